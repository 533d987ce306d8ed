"""The kernel bench (``specviz bench --kernel``), the cost side of speculative decoding on one target: ms per forward
over n new tokens after a cached prompt, the weight bytes each forward reads, the memory-copy floor, the verify-cost
curve T(k+1)/T(1) (at a short and a long context), and optionally each drafter's cost per pass in one-token steps.

Definitions: :data:`KERNEL_DEFINITIONS`; goals: :data:`STEP_TARGET_FRACTION`, :data:`VERIFY_TARGET_RATIO`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from specviz.runtime.compiled import COMPILED_LABEL, COMPILING_NOTE, forward_path
from specviz.core.kv import compilations
from specviz.drafters.heads import DEFAULT_TREE_NODES
from specviz.drafters.registry import make_drafter, split_variant
from specviz.measure.costs import lookahead_cost_line
from specviz.measure.machine import copy_bandwidth_gbs, environment
from specviz.measure.timing import time_drafter_ms, time_forward_rounds
from specviz.runtime.speed import plain_path, report_of, row_padding, without_row_padding

Progress = Callable[[str], None]


KERNEL_TOKEN_COUNTS = tuple(range(1, 18)) + (32,)  # 1..17 gives T(k+1)/T(1) for k = 1..16
KERNEL_DRAFTERS = ("ngram", "early-exit", "eagle", "eagle:tree", "medusa", "medusa:tree")
STEP_TARGET_FRACTION = 0.5  # the goal: a one-token step within 2x of the floor
VERIFY_TARGET_RATIO = 1.15  # ... and a verification over k <= 4 tokens at most 1.15 one-token steps,
VERIFY_TARGET_MAX_K = 4  # at a short and at a long context
LONG_CONTEXT = 1024  # the long context of the verify curve (tokens cached before the timed forward)
LONG_TOKEN_COUNTS = (1, 2, 3, 4, 5, 9, 17)


def _medians(rounds: dict[int, list[float]]) -> dict[int, float]:
    """{n: median ms} of :func:`time_forward_rounds`'s {n: ms per round}."""
    return {n: statistics.median(ms) for n, ms in rounds.items()}


def _quartiles(values: list[float]) -> list[float]:
    """[25th, 75th] percentile of ``values`` (both the value itself for one value)."""
    if len(values) < 2:
        return [values[0], values[0]]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return [q[0], q[2]]


def _cost_figures(rounds: dict[int, list[float]], param_bytes: int, floor_ms: float) -> dict:
    """step ms, fraction of floor, effective GB/s, the curve and the verify-cost ratios of one timing run.

    ``rounds``: {n: ms per round} (:func:`time_forward_rounds`). ms figures are medians over the rounds; a
    ratio T(n)/T(1) is the median of the rounds' own ratios, and ``verify_cost_spread`` gives their quartiles.
    """
    times = {n: statistics.median(ms) for n, ms in rounds.items()}
    t1 = times[1]
    ratios = {n: [a / b for a, b in zip(ms, rounds[1])] for n, ms in rounds.items()}
    curve = [{"new_tokens": n, "ms": ms, "ratio_vs_1": statistics.median(ratios[n]),
              "effective_gbs": param_bytes / (ms / 1000.0) / 1e9} for n, ms in times.items()]
    verify_cost = {k: statistics.median(ratios[k + 1]) for k in range(1, 17) if k + 1 in times}
    spread = {k: _quartiles(ratios[k + 1]) for k in verify_cost}
    checked = [v for k, v in verify_cost.items() if k <= VERIFY_TARGET_MAX_K]
    return {
        "step_ms": t1,
        "fraction_of_floor": floor_ms / t1,
        "step_effective_gbs": param_bytes / (t1 / 1000.0) / 1e9,
        "curve": curve,
        "verify_cost": verify_cost,
        "verify_cost_spread": spread,
        "step_target_met": floor_ms / t1 >= STEP_TARGET_FRACTION,
        "verify_target_met": (max(checked) <= VERIFY_TARGET_RATIO) if checked else None,
    }


def _kernel_token_counts(token_counts: Iterable[int], drafters: list[str]) -> list[int]:
    """The forward sizes to time: always 1, and a tree's verification size when a tree drafter is costed."""
    counts = sorted(set(int(n) for n in token_counts))
    if not counts or counts[0] < 1:
        raise ValueError("token counts must be >= 1")
    if 1 not in counts:
        counts = [1] + counts
    if any(key.endswith(":tree") for key in drafters) and DEFAULT_TREE_NODES + 1 not in counts:
        counts = sorted(counts + [DEFAULT_TREE_NODES + 1])  # a tree's verification forward
    return counts


KERNEL_DEFINITIONS = {
    "ms": "median wall time of one target forward over n new tokens after a cached prompt",
    "effective_gbs": "param_bytes / ms: weight bytes read per second",
    "floor_ms": "param_bytes / copy bandwidth (bytes read + written per second of a large tensor copy)",
    "fraction_of_floor": "floor_ms / ms of a one-token step (1.0 = at the memory floor)",
    "verify_cost": "T(k+1 new tokens) / T(1): a verification's cost in target steps (median of per-round ratios; "
                   "each round times every n once, interleaved)",
    "verify_cost_spread": "the 25th and 75th percentiles of those per-round ratios",
    "long_context": "the same curve after a cached prompt of long_context tokens (a long document)",
    "plain": "the same figures with the default kernels (specviz.runtime.speed.plain_path), timed interleaved",
    "unpadded": "the same figures without the row padding chosen by tuning (specviz.runtime.speed.without_row_padding)",
}


def _kernel_variants(target, compare_plain: bool) -> dict[str, Callable[[], contextlib.AbstractContextManager]]:
    """The ways of running the target that the kernel bench times interleaved: as loaded; with the default kernels
    (when the fast path is active and ``compare_plain``); without the row padding (when tuning chose one)."""

    report = report_of(target.model)
    variants = {"loaded": contextlib.nullcontext}
    if compare_plain and report is not None and report.active and forward_path(target.model) != COMPILED_LABEL:
        variants["plain"] = lambda: plain_path(target.model)
    if row_padding(target.model):
        variants["unpadded"] = lambda: without_row_padding(target.model)
    return variants


def _long_context_figures(target, long_context: int | None, repeats: int, warmup: int, floor_ms: float,
                          progress: Progress | None, token_counts: tuple[int, ...] = LONG_TOKEN_COUNTS) -> dict:
    """``long_context`` (and ``long_context_unpadded`` when a row padding is in use): the verify curve after
    ``long_context`` cached tokens, bounded by the model's window; {} when ``long_context`` is None or 0."""

    window = getattr(target.model.config.get_text_config(), "max_position_embeddings", None)
    if long_context and window:
        long_context = min(long_context, window - max(token_counts))  # the model's window bounds it
    if not long_context:
        return {}
    if progress:
        progress(f"verify curve after {long_context} tokens of context")
    variants = {"default": contextlib.nullcontext}
    if row_padding(target.model):
        variants["unpadded"] = lambda: without_row_padding(target.model)
    timed = time_forward_rounds(target.model, target.device, long_context, token_counts, variants, repeats, warmup)
    out = {"long_context": {"prompt_len": long_context,
                            **_cost_figures(timed["default"], target.param_bytes, floor_ms)}}
    if "unpadded" in timed:
        out["long_context_unpadded"] = {"prompt_len": long_context,
                                        **_cost_figures(timed["unpadded"], target.param_bytes, floor_ms)}
    return out


def drafter_costs(target, keys: Iterable[str], times: dict[int, float], prompt_len: int, ks: Iterable[int],
                  tree_nodes: int = DEFAULT_TREE_NODES, progress: Progress | None = None) -> dict:
    """Per drafter and k: draft ms, the verification's ms (T(nodes + 1) from ``times``), and the pass cost in
    one-token steps: (draft + verify) / T(1). That ratio is also the break-even point: the tokens per pass a
    drafter must reach to beat standard decoding at that k. Drafters that cannot be built here (no head file
    for this target, for instance) are listed under ``skipped`` with the reason."""

    step = times[1]
    rows, skipped = {}, {}
    for key in keys:
        try:
            v = split_variant(key)
            # the gate off: a cost curve times the drafting of exactly k tokens (or the whole tree)
            drafter = make_drafter(v.base, target, tree_nodes=tree_nodes if v.tree else 0, min_confidence=0.0,
                                   lookup=v.lookup)
        except Exception as error:  # noqa: BLE001 - report and go on with the others
            skipped[key] = str(error).splitlines()[0]
            continue
        if progress:
            progress(f"drafter cost: {key}")
        curve = {}
        for k, fig in time_drafter_ms(target, drafter, prompt_len, ks).items():
            verify = times.get(fig["nodes"] + 1)
            curve[k] = {**fig, "verify_ms": verify,
                        "pass_cost_steps": None if verify is None else (fig["draft_ms"] + verify) / step}
        rows[key] = curve
    return {"drafters": rows, "skipped": skipped}


@dataclass(frozen=True)
class KernelOptions:
    """What :func:`kernel_bench` times: forwards of n new tokens (``token_counts``) after a ``prompt_len``-token
    cached prompt, ``warmup`` untimed rounds then ``repeats`` timed ones; a ``copy_megabytes`` MB memory copy for the
    floor; the default kernels interleaved when ``compare_plain``; each of ``drafters`` (bench keys) at each k of
    ``drafter_ks``; the verify curve again after ``long_context`` cached tokens (None skips it) for
    ``long_token_counts``."""

    prompt_len: int = 64
    token_counts: Iterable[int] = KERNEL_TOKEN_COUNTS
    repeats: int = 7
    warmup: int = 2
    copy_megabytes: int = 256
    compare_plain: bool = True
    drafters: Iterable[str] = ()
    drafter_ks: Iterable[int] = tuple(range(1, 17))
    long_context: int | None = LONG_CONTEXT
    long_token_counts: Iterable[int] = LONG_TOKEN_COUNTS


def kernel_bench(target, options: KernelOptions | None = None, *, progress: Progress | None = None,
                 **settings) -> dict:
    """The cost side of speculative decoding on ``target``: ms per forward over n new tokens, and the floor.

    Returns a dict with ``curve`` (one row per n: ms, T(n)/T(1), effective GB/s), ``verify_cost`` (k ->
    T(k+1)/T(1) for every k whose k+1 was measured), ``param_bytes`` (weights read per forward),
    ``copy_bandwidth_gbs`` (read + written), ``floor_ms`` (param_bytes / copy bandwidth),
    ``fraction_of_floor`` (floor_ms / T(1): 1.0 means a one-token step runs at the memory floor) and
    ``step_effective_gbs`` (param_bytes / T(1)), all after a ``prompt_len``-token context; ``long_context`` holds
    the same figures after ``long_context`` cached tokens for ``long_token_counts`` new tokens (None skips it).
    The figures are for the model as loaded (with the eager speed-ups of :mod:`specviz.runtime.speed`, listed under ``speed``); when those are active and
    ``compare_plain``, the default kernels' figures, timed interleaved, are under ``plain``. With ``drafters``
    (keys as in the bench, e.g. "eagle:tree"), ``drafter_costs`` holds each drafter's cost curve for
    ``drafter_ks`` (see :func:`drafter_costs`). ``options``: those settings (:class:`KernelOptions`); ``settings``:
    its fields by name, replacing ``options``'; ``progress``: optional callable(str) for progress lines.

    Raises:
        ValueError: a token count below 1. TypeError: a setting that is not a field of :class:`KernelOptions`.
    """
    o = dataclasses.replace(options or KernelOptions(), **settings)
    prompt_len, repeats, warmup, copy_megabytes, long_context = (o.prompt_len, o.repeats, o.warmup, o.copy_megabytes,
                                                                 o.long_context)
    drafters = list(o.drafters)
    token_counts = _kernel_token_counts(o.token_counts, drafters)
    started = time.perf_counter()
    compiled_before = compilations()
    bandwidth = copy_bandwidth_gbs(target.device, copy_megabytes)
    report = report_of(target.model)
    variants = _kernel_variants(target, o.compare_plain)
    timed = time_forward_rounds(target.model, target.device, prompt_len, token_counts, variants, repeats, warmup)
    floor_ms = target.param_bytes / (bandwidth * 1e9) * 1000.0
    result = {
        "benchmark": "kernel",
        "settings": {"prompt_len": prompt_len, "token_counts": token_counts, "repeats": repeats, "warmup": warmup,
                     "copy_megabytes": copy_megabytes, "long_context": long_context},
        **environment(target), "speed": report.summary() if report is not None else "not prepared (default kernels)",
        "param_bytes": target.param_bytes, "copy_bandwidth_gbs": bandwidth, "floor_ms": floor_ms,
        **_cost_figures(timed["loaded"], target.param_bytes, floor_ms),
        "targets": {"fraction_of_floor_at_least": STEP_TARGET_FRACTION,
                    "verify_cost_at_most": VERIFY_TARGET_RATIO, "verify_cost_for_k_up_to": VERIFY_TARGET_MAX_K},
        "definitions": dict(KERNEL_DEFINITIONS),
    }
    if "unpadded" in timed:
        result["row_padding"] = row_padding(target.model)
        result["unpadded"] = _cost_figures(timed["unpadded"], target.param_bytes, floor_ms)
    if "plain" in timed:
        result["plain"] = _cost_figures(timed["plain"], target.param_bytes, floor_ms)
    result.update(_long_context_figures(target, long_context, repeats, warmup, floor_ms, progress,
                                        tuple(o.long_token_counts)))
    if drafters:
        result["drafter_costs"] = drafter_costs(target, drafters, _medians(timed["loaded"]), prompt_len,
                                                list(o.drafter_ks), progress=progress)
        result["definitions"]["pass_cost_steps"] = ("(draft ms + verify ms) / one-token step ms: a pass's cost in "
                                                    "target steps, and the tokens per pass needed to break even")
    result["wall_s"] = time.perf_counter() - started
    result["compiling"] = compilations() != compiled_before  # torch.compile ran during the bench: timings include it
    return result


def _fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _verify_costs(fig: dict) -> str:
    """'k=1: 1.05 (1.02-1.08), ...' from a figure of :func:`_cost_figures` (quartiles where the result has them)."""
    spread = fig.get("verify_cost_spread") or {}
    parts = []
    for k, value in fig["verify_cost"].items():
        q = spread.get(k) or spread.get(str(k))
        parts.append(f"k={k}: {value:.2f}" + (f" ({q[0]:.2f}-{q[1]:.2f})" if q else ""))
    return ", ".join(parts)


def _kernel_summary_lines(result: dict) -> list[str]:
    """One line per timed variant of :func:`kernel_bench` (as loaded, without row padding, default kernels, after a
    long context): its one-token step against the floor and its worst verify cost for k <= 4, with the goals."""
    def verdict(met) -> str:
        return "-" if met is None else ("met" if met else "NOT met")

    long, unpadded, plain = result.get("long_context"), result.get("unpadded"), result.get("plain")
    long_unpadded = result.get("long_context_unpadded")
    rows = [("as loaded", result)] + ([("no row padding", unpadded)] if unpadded else []) + (
        [("default kernels", plain)] if plain else []) + (
        [(f"after {long['prompt_len']} tok", long)] if long else []) + (
        [("  no row padding", long_unpadded)] if long_unpadded else [])
    lines = []
    if unpadded:
        table = sorted(result["row_padding"].items(), key=lambda item: int(item[0]))
        lines.append("row padding (n rows computed as m): " + ", ".join(f"{n}->{m}" for n, m in table)
                     + "; 'no row padding' times the same model without it, interleaved")
    for name, fig in rows:
        worst = max((v for k, v in fig["verify_cost"].items() if int(k) <= VERIFY_TARGET_MAX_K), default=float("nan"))
        lines.append(f"  {name:<16} one-token step {fig['step_ms']:6.1f} ms = {fig['step_effective_gbs']:5.1f} GB/s "
                     f"= {fig['fraction_of_floor']:.2f} of the floor's speed (goal >= {STEP_TARGET_FRACTION:.2f}: "
                     f"{verdict(fig['step_target_met'])}); max verify cost k<={VERIFY_TARGET_MAX_K}: {worst:.2f} "
                     f"(goal <= {VERIFY_TARGET_RATIO:.2f}: {verdict(fig['verify_target_met'])})")
    return lines


def format_kernel(result: dict) -> str:
    """A readable table of :func:`kernel_bench`'s result (and the default kernels' figures, when measured)."""
    plain = result.get("plain")
    lines = [f"{result['target']['label']} on {result['device']['device']}, {result['machine']['torch_threads']} "
             f"torch threads: {result['param_bytes'] / 1e6:.0f} MB of weights read per forward; copy bandwidth "
             f"{result['copy_bandwidth_gbs']:.1f} GB/s (read + write) -> floor {result['floor_ms']:.1f} ms per step",
             f"kernels: {result.get('speed', '-')}; forward: {result['target'].get('forward', '-')}"]
    if result.get("compiling"):
        lines.append(COMPILING_NOTE)
    long, unpadded = result.get("long_context"), result.get("unpadded")
    lines += _kernel_summary_lines(result)
    header = f"{'new tokens':>10}{'ms':>9}{'T(n)/T(1)':>11}{'GB/s':>8}"
    if plain:
        header += f"{'default ms':>12}{'T(n)/T(1)':>11}{'GB/s':>8}"
    lines.append(header)
    plain_rows = {row["new_tokens"]: row for row in plain["curve"]} if plain else {}
    for row in result["curve"]:
        line = f"{row['new_tokens']:>10}{row['ms']:>9.1f}{row['ratio_vs_1']:>11.2f}{row['effective_gbs']:>8.1f}"
        if plain:
            other = plain_rows[row["new_tokens"]]
            line += f"{other['ms']:>12.1f}{other['ratio_vs_1']:>11.2f}{other['effective_gbs']:>8.1f}"
        lines.append(line)
    lines.append("verify cost T(k+1)/T(1), median of per-round ratios (quartiles): " + _verify_costs(result))
    if unpadded:
        lines.append("  no row padding: " + _verify_costs(unpadded))
    if plain:
        lines.append("  default kernels: " + _verify_costs(plain))
    if long:
        lines.append(f"  after {long['prompt_len']} tokens of context: " + _verify_costs(long))
    if result.get("long_context_unpadded"):
        lines.append(f"  after {long['prompt_len']} tokens, no row padding: "
                     + _verify_costs(result["long_context_unpadded"]))
    if result.get("lookahead_cost"):
        lines.append(lookahead_cost_line(result["lookahead_cost"]))
    costs = result.get("drafter_costs")
    if costs:
        lines.append("")
        lines.append("pass cost in one-token steps = (draft ms + verify ms) / step ms; also the tokens per pass "
                     "needed to break even")
        for key, curve in costs["drafters"].items():
            lines.append(f"  {key:<12} " + ", ".join(
                f"k={k}: {_fmt(fig['pass_cost_steps'])} ({fig['draft_ms']:.1f} ms draft"
                + (f", {fig['nodes']} nodes" if fig["nodes"] != int(k) else "") + ")"
                for k, fig in curve.items()))
        for key, why in costs["skipped"].items():
            lines.append(f"  {key:<12} skipped: {why}")
    return "\n".join(lines)
