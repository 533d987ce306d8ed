"""Speculation and batching: where the free verification runs out, and a sampling-law check.

**The sweep** (:func:`batch_sweep`). A decode step of a small batch is bound by reading the weights, so verifying
k+1 tokens per row costs about as much as one token per row: speculation's profit. A batch uses the same slack:
B rows per forward also cost little more than one. Both together run out of it: at some batch size the forward
of B x (k+1) tokens becomes compute-bound and costs clearly more than B x 1, and speculation stops paying
(vLLM turns speculation down as the batch grows; MagicDec and BASS study this). For each B, the same prompts
(recycled to B rows) are decoded by standard and by speculative decoding, interleaved repeats, each timed on the
batch's own clock after the prefill (:class:`~specviz.core.events.BatchStep`); per B the table gives both rates
(tokens/s over all rows), the speedup, tokens per pass, the pass cost T(B, k+1) / T(B, 1) measured from the runs'
own forwards, and the KV-cache memory of the batch. The predicted speedup comes from the batch-1 acceptance alone
and the measured forward grid (:func:`specviz.measure.grid.measure_forward_grid`):

    predicted(B) = E[tokens per pass at B = 1] x T(B, 1) / (T(B, k+1) + B x T_draft per row at B = 1)

so the lesson reads off the numbers: the speedup holds while T(B, k+1) / T(B, 1) stays near 1.

**The sampling check** (:func:`sampling_check`). N short sampled runs (batched) of standard and speculative
decoding; the two tokens after the prefill's token (the first token never meets the verifier) are counted and
compared with the target's exact probabilities (chi-square goodness of fit, cells with expected count < 5 pooled)
and with each other (chi-square test of homogeneity). With ``broken=True`` the verifier accepts every draft token
(:attr:`specviz.core.engine.GenerationConfig.accept_all_drafts`), and a drafter that disagrees with the target
makes the test fail: the check can tell a wrong sampler from a right one.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import torch

from specviz.core.costs import predicted_speedup
from specviz.core.drafting import Drafter
from specviz.core.engine import GenerationConfig, generate_batch
from specviz.core.events import BatchStep
from specviz.core.kv import check_cancel
from specviz.core.verdict import format_apart, format_ratio_ends
from specviz.core.verify import apply_processors, process_logits, restrict_vocab

BATCH_SIZES = (1, 2, 4, 8, 16)
Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]


@dataclass(frozen=True)
class BatchRun:
    """One batched run: tokens after the prefill, its decode time (ms, own clock), target forwards after the
    prefill and how many tokens those forwards read per row, the rows' passes and their emitted tokens."""

    tokens: int
    decode_ms: float
    steps: tuple[BatchStep, ...]
    row_passes: int
    row_emitted: int
    ids: tuple[tuple[int, ...], ...]
    draft_ms: float = 0.0


def run_batch(target, prompts: list[list[int]], config: GenerationConfig, drafters: list[Drafter] | None,
              cancel=None) -> BatchRun:
    """Decode ``prompts`` as one batch and sum what the sweep needs (see :class:`BatchRun`)."""
    steps, ids = [], [[] for _ in prompts]
    row_passes = row_emitted = 0
    for event in generate_batch(target, prompts, config, drafters=drafters, cancel=cancel):
        if isinstance(event, BatchStep):
            steps.append(event)
            continue
        ids[event.row].extend(event.emitted_ids)
        if event.kind == "pass":
            row_passes += 1
            row_emitted += len(event.emitted_ids)
    after = [s for s in steps if s.index > 0]
    decode_ms = steps[-1].t_end_ms - steps[0].t_end_ms if after else 0.0
    return BatchRun(row_emitted, decode_ms, tuple(steps), row_passes, row_emitted, tuple(map(tuple, ids)),
                    sum(s.draft_ms for s in after))


def _forward_ms(runs: list[BatchRun], tokens: int | None) -> float | None:
    """Median forward time (ms) of the runs' full-batch steps reading ``tokens`` per row (None: any)."""
    times = [s.forward_ms for r in runs for s in r.steps
             if s.index > 0 and s.rows == r.steps[0].rows and (tokens is None or s.new_tokens == tokens)]
    return statistics.median(times) if times else None


@dataclass
class SweepRow:
    """The figures of one batch size (rates in tokens/s over all rows; times in ms)."""

    batch: int
    standard_tps: float | None
    speculative_tps: float | None
    speedup: float | None
    tokens_per_pass: float | None
    step_ms: float | None  # T(B, 1), from the standard runs' forwards
    verify_ms: float | None  # T(B, k+1), from the speculative runs' full-draft forwards
    pass_cost: float | None  # T(B, k+1) / T(B, 1)
    kv_megabytes: float
    predicted: float | None = None
    predicted_pass_cost: float | None = None  # T(B, k+1) / T(B, 1) of the forward grid the prediction was made from
    # the prediction from its inputs' spread (:func:`predict`): lowest and highest; equal to it where none was kept
    predicted_low: float | None = None
    predicted_high: float | None = None
    repeats: list[tuple[float, float]] = field(default_factory=list)  # (standard tps, speculative tps) per repeat
    # (T(B, 1), T(B, k+1)) per repeat: the median forward of that repeat's standard run and of its speculative run
    # (None where a run made no such forward); the spread of step_ms, verify_ms and pass_cost
    repeat_forward_ms: list[tuple[float | None, float | None]] = field(default_factory=list)
    repeat_tokens_per_pass: list[float | None] = field(default_factory=list)  # each speculative run's own

    def as_dict(self) -> dict:
        """The row as plain JSON values."""
        return dict(self.__dict__)


def kv_bytes_per_token(target) -> int:
    """Bytes of keys and values one token keeps in the cache (all layers)."""
    config = target.model.config.get_text_config()
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    size = torch.finfo(target.dtype).bits // 8
    return 2 * config.num_hidden_layers * heads * head_dim * size


def _tps(run: BatchRun) -> float | None:
    return run.tokens / (run.decode_ms / 1000.0) if run.decode_ms > 0 else None


def sweep_row(target, prompts: list[list[int]], batch: int, config: GenerationConfig,
              make_drafter: Callable[[], Drafter], repeats: int = 3, cancel=None) -> SweepRow:
    """Standard and speculative decoding of ``batch`` rows (the prompts recycled), ``repeats`` interleaved pairs;
    rates are medians over the repeats."""
    rows = [prompts[i % len(prompts)] for i in range(batch)]
    std_runs, spec_runs = [], []
    for repeat in range(repeats):
        order = (False, True) if repeat % 2 == 0 else (True, False)
        for speculative in order:
            drafters = [make_drafter() for _ in rows] if speculative else None
            (spec_runs if speculative else std_runs).append(run_batch(target, rows, config, drafters, cancel))
    pairs = [(_tps(a), _tps(b)) for a, b in zip(std_runs, spec_runs)]
    std = statistics.median(p[0] for p in pairs if p[0]) if any(p[0] for p in pairs) else None
    spec = statistics.median(p[1] for p in pairs if p[1]) if any(p[1] for p in pairs) else None
    step, verify = _forward_ms(std_runs, 1), _forward_ms(spec_runs, config.k + 1)
    passes = sum(r.row_passes for r in spec_runs)
    per_repeat = [(_forward_ms([a], 1), _forward_ms([b], config.k + 1)) for a, b in zip(std_runs, spec_runs)]
    longest = max(len(p) for p in rows) + config.max_new_tokens + config.k + 1
    return SweepRow(batch, std, spec, spec / std if std and spec else None,
                    sum(r.row_emitted for r in spec_runs) / passes if passes else None, step, verify,
                    verify / step if verify and step else None, kv_bytes_per_token(target) * longest * batch / 1e6,
                    repeats=pairs, repeat_forward_ms=per_repeat,
                    repeat_tokens_per_pass=[r.row_emitted / r.row_passes if r.row_passes else None
                                            for r in spec_runs])


def _span(values, middle: float) -> tuple[float, float]:
    """(lowest, highest) of ``values`` (None and 0 left out), or (middle, middle) where none are left."""
    kept = [v for v in values if v]
    return (min(kept), max(kept)) if kept else (middle, middle)


def predict(rows: list[SweepRow], grid: dict | None, k: int) -> None:
    """Fill each row's ``predicted`` speedup from the batch-1 tokens per pass and the forward grid's T(B, n) (ms,
    ``grid["ms"][B][n]``; rows whose B the grid lacks use the sweep's own measured step and verify times), and its
    ``predicted_low`` / ``predicted_high`` from the same formula over its inputs' spread: the B = 1 repeats' tokens
    per pass, and T(B, 1), T(B, k+1) from the grid's (min, max) per cell (``grid["spread"][B][n]``) or the sweep's
    repeats; low = fewest tokens × fastest step ÷ slowest pass, high the other way round. The drafting cost per row
    is one figure (from the B = 1 medians) and adds no spread. Each is :func:`~specviz.core.costs.predicted_speedup`
    (E[tau] x T_step / T_pass, T_pass = T(B, k+1) + B x the drafting per row)."""
    first = next((r for r in rows if r.batch == 1 and r.tokens_per_pass), None)
    if first is None:
        return
    draft_per_row = 0.0  # drafting cost per pass and row at B = 1, from its own run (ms)
    if first.verify_ms and first.speculative_tps and first.tokens_per_pass:
        per_pass_ms = first.tokens_per_pass / first.speculative_tps * 1000.0
        draft_per_row = max(0.0, per_pass_ms - first.verify_ms)
    tokens = _span(first.repeat_tokens_per_pass, first.tokens_per_pass)
    for row in rows:
        table = (grid or {}).get("ms", {}).get(row.batch, {})
        spread = (grid or {}).get("spread", {}).get(row.batch, {})
        step = table.get(1, row.step_ms)
        verify = table.get(k + 1, row.verify_ms)
        if step and verify:
            row.predicted = predicted_speedup(first.tokens_per_pass, step, verify + row.batch * draft_per_row)
            row.predicted_pass_cost = verify / step
            steps = (spread.get(1) or (step, step)) if 1 in table else _span(
                [s for s, _ in row.repeat_forward_ms], step)
            verifies = (spread.get(k + 1) or (verify, verify)) if k + 1 in table else _span(
                [v for _, v in row.repeat_forward_ms], verify)
            row.predicted_low = predicted_speedup(tokens[0], steps[0], verifies[1] + row.batch * draft_per_row)
            row.predicted_high = predicted_speedup(tokens[1], steps[1], verifies[0] + row.batch * draft_per_row)


@dataclass(frozen=True)
class SweepOptions:
    """How :func:`batch_sweep` sweeps: the batch sizes (each once, in increasing order), ``repeats`` interleaved
    standard and speculative runs per size, an optional forward grid for the predicted curve (``grid["ms"][B][n]``
    in ms, ``grid["spread"][B][n]`` its (min, max); see :func:`predict`), ``progress(fraction 0..1, message)`` and
    ``should_stop()``, asked before each batch size and each forward; ``on_row(result so far)``, called after each
    batch size finishes with the sweep's result as :func:`batch_sweep` would return it then (``"stopped"`` False), so
    a caller can show, and keep, the finished batch sizes should the sweep end early."""

    batch_sizes: Sequence[int] = BATCH_SIZES
    repeats: int = 3
    grid: dict | None = None
    progress: Progress | None = None
    should_stop: ShouldStop | None = None
    on_row: Callable[[dict], None] | None = None


def batch_sweep(target, prompts: list[list[int]], config: GenerationConfig, make_drafter: Callable[[], Drafter],
                options: SweepOptions = SweepOptions()) -> dict:
    """The sweep of the module docstring: ``{"rows": [SweepRow.as_dict()...], "k", "max_new_tokens",
    "stopped", "crossover"}``, where ``crossover`` is the smallest B whose measured speedup is below 1 (None if
    none). ``options``: the batch sizes, repeats, forward grid and callbacks (:class:`SweepOptions`). Stops early
    (``stopped``) when ``options.should_stop()``; raises what the engine raises (ValueError for an empty prompt)."""
    should_stop, repeats = options.should_stop, options.repeats
    say = options.progress or (lambda fraction, message: None)
    rows: list[SweepRow] = []
    stopped = False
    sizes = sorted({int(b) for b in options.batch_sizes})
    for i, batch in enumerate(sizes):
        if should_stop is not None and should_stop():
            stopped = True
            break
        say(i / len(sizes), f"batch {batch}: standard and speculative decoding, {repeats} repeats")
        from specviz.core.events import RunCancelled

        try:
            rows.append(sweep_row(target, prompts, batch, config, make_drafter, repeats, should_stop))
        except RunCancelled:
            stopped = True
            break
        if options.on_row is not None:
            options.on_row(_sweep_result(rows, options.grid, config, stopped=False))
    say(1.0, "Stopped." if stopped else "Done.")
    return _sweep_result(rows, options.grid, config, stopped)


def _sweep_result(rows: list[SweepRow], grid: dict | None, config: GenerationConfig, stopped: bool) -> dict:
    """:func:`batch_sweep`'s result of the rows measured so far: their predictions filled in (:func:`predict`, on
    copies), and the crossover, the smallest B whose measured speedup is below 1."""
    rows = [replace(r) for r in rows]
    predict(rows, grid, config.k)
    below = next((r.batch for r in rows if r.speedup is not None and r.speedup < 1.0), None)
    return {"rows": [r.as_dict() for r in rows], "k": config.k, "max_new_tokens": config.max_new_tokens,
            "stopped": stopped, "crossover": below}


# ------------------------------------------------------------------------------------------------ reading rows


def repeat_speedups(row: dict) -> list[float]:
    """The speedup of each repeat (its speculative ÷ its standard tokens/s), where both were measured."""
    return [spec / std for std, spec in row.get("repeats") or () if std and spec]


REPEATED_FIGURES = ("standard_tps", "speculative_tps", "tokens_per_pass", "step_ms", "verify_ms", "pass_cost")
"""The row's figures that have a value per repeat (:func:`repeat_values`): each is shown with their range."""
ONE_SAMPLE = "one sample"


def repeat_values(row: dict, figure: str) -> list[float]:
    """The value of one of :data:`REPEATED_FIGURES` in each repeat that measured it: tokens/s from ``repeats``,
    T(B, 1) and T(B, k+1) (ms) from ``repeat_forward_ms``, the pass cost as their ratio per repeat, tokens per pass
    from ``repeat_tokens_per_pass``; [] where the row kept none (raises KeyError for another figure)."""
    pairs = row.get("repeat_forward_ms") or ()
    values = {
        "standard_tps": lambda: [std for std, _ in row.get("repeats") or ()],
        "speculative_tps": lambda: [spec for _, spec in row.get("repeats") or ()],
        "tokens_per_pass": lambda: list(row.get("repeat_tokens_per_pass") or ()),
        "step_ms": lambda: [step for step, _ in pairs],
        "verify_ms": lambda: [verify for _, verify in pairs],
        "pass_cost": lambda: [verify / step for step, verify in pairs if step and verify],
    }[figure]()
    return [v for v in values if v]


def spread_cell(row: dict, figure: str, spec: str) -> str:
    """A figure with the range of its repeats, "41.2 (38.0–44.1)" (the ends with more decimals where ``spec``'s
    would read alike), "2.33 (all repeats equal)" where the repeats agree exactly, "41.2 (one sample)" from one repeat,
    the bare value where the row kept no repeats (a file from before they were kept); "–" without a value."""
    value = row.get(figure)
    if value is None:
        return "–"
    samples = repeat_values(row, figure)
    shown = format(value, spec)
    if len(samples) == 1:
        return f"{shown} ({ONE_SAMPLE})"
    if not samples:
        return shown
    low, high = min(samples), max(samples)
    if low == high and format(low, spec) == shown:
        return f"{shown} (all repeats equal)"
    low, high = min(low, value), max(high, value)  # a pooled figure (the pass cost) may lie outside its repeats
    decimals = int(spec.strip(".f"))
    return f"{shown} ({'–'.join(format_apart(low, high, decimals, decimals + 2))})"


def format_sweep(result: dict) -> str:
    """A readable table of :func:`batch_sweep`'s result: each measured figure with the lowest and highest of its
    repeats (:func:`spread_cell`), the speedup with its repeats' own ratios and the predicted speedup with the range
    its inputs give."""
    def speedup(r: dict) -> str:
        ups = repeat_speedups(r)
        if r["speedup"] is None or not ups:
            return "-" if r["speedup"] is None else f"{r['speedup']:.2f}"
        if len(ups) == 1:
            return f"{r['speedup']:.2f} ({ONE_SAMPLE})"
        low, high = min(ups + [r["speedup"]]), max(ups + [r["speedup"]])
        return f"{r['speedup']:.2f} ({'–'.join(format_ratio_ends(low, high))})"

    def predicted(r: dict) -> str:
        value, low, high = r.get("predicted"), r.get("predicted_low"), r.get("predicted_high")
        if value is None or low is None or high is None:
            return "-" if value is None else f"{value:.2f}"
        return f"{value:.2f} ({'–'.join(format_ratio_ends(low, high))})"

    columns = [("B", lambda r: str(r["batch"])),
               ("std tok/s", lambda r: spread_cell(r, "standard_tps", ".1f")),
               ("spec tok/s", lambda r: spread_cell(r, "speculative_tps", ".1f")),
               ("speedup", speedup), ("predicted", predicted),
               ("tok/pass", lambda r: spread_cell(r, "tokens_per_pass", ".2f")),
               ("T(B,1) ms", lambda r: spread_cell(r, "step_ms", ".1f")),
               ("T(B,k+1) ms", lambda r: spread_cell(r, "verify_ms", ".1f")),
               ("cost", lambda r: spread_cell(r, "pass_cost", ".2f")),
               ("KV MB", lambda r: "-" if r.get("kv_megabytes") is None else f"{r['kv_megabytes']:.1f}")]
    cells = [[name for name, _ in columns]] + [[cell(r) for _, cell in columns] for r in result["rows"]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    repeats = max((len(r.get("repeats") or ()) for r in result["rows"]), default=0)
    lines.append(f"In brackets: the lowest and highest of {repeats} repeats per batch size (for the speedup, each "
                 "repeat's own ratio; for the prediction, the range its inputs give).")
    crossover = result.get("crossover")
    lines.append(f"k = {result['k']}, {result['max_new_tokens']} new tokens per row; cost = T(B, k+1) / T(B, 1). "
                 + (f"Speculation stops paying at B = {crossover}." if crossover else
                    "Speculation paid at every batch size measured."))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the sampling check


MIN_EXPECTED = 5  # a cell of the goodness of fit needs this expected count; rarer cells are pooled into one
JOINT_MIN_P = 0.004  # second tokens rarer than this are left out of the exact law: their pairs' expected counts
# stay below 5 for every N the check allows (N <= 1000 runs), so the chi-square pools them into one cell anyway
JOINT_CHUNK = 32  # rows per batched forward of the exact law


def _next_probs(target, rows: list[list[int]], prompt_len: int, config: GenerationConfig) -> torch.Tensor:
    """The target's sampling law of the token after each of ``rows`` (token id lists, a prompt of ``prompt_len``
    then generated tokens), after the run's logits processors: (len(rows), vocab) probabilities."""
    vocab = min(target.vocab_size, getattr(target, "num_token_ids", None) or target.vocab_size)
    ids = torch.tensor(rows, dtype=torch.long, device=target.device)
    with torch.inference_mode():
        logits = target.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1].float()
    logits = restrict_vocab(logits, vocab)
    return process_logits(apply_processors(logits, config.sampling, rows, prompt_len), config.sampling)


def first_token_law(target, prompt: list[int], config: GenerationConfig) -> tuple[int, float, dict]:
    """Before sampling: (the likeliest first token, its probability, the exact law of the two tokens after it,
    :func:`_joint_two`): what a check of this prompt and temperature will count, for planning its N ahead
    (:func:`pairs_needed`). A few forwards."""
    law = _next_probs(target, [prompt], len(prompt), config)[0]
    first = int(torch.argmax(law))
    return first, float(law[first]), _joint_two(target, prompt, first, config)


def pairs_needed(exact: dict, share: float) -> tuple[int, int] | None:
    """(counted runs, N runs per side) the goodness of fit needs: two pairs of the exact law ``exact`` expected at
    least :data:`MIN_EXPECTED` times among the counted runs, so the second most likely pair (probability p2) needs
    MIN_EXPECTED / p2 counted runs, and N that over ``share``, the part of the runs counted (their first token the
    counted one). None when the law has fewer than two pairs or ``share`` is 0. E.g. p2 = 0.18, share 0.75: (28,
    38)."""
    ranked = sorted(exact.values(), reverse=True)
    if len(ranked) < 2 or ranked[1] <= 0 or share <= 0:
        return None
    need = math.ceil(MIN_EXPECTED / ranked[1] - 1e-9)
    return need, math.ceil(need / share - 1e-9)


def _joint_two(target, prompt: list[int], first: int, config: GenerationConfig) -> dict[tuple[int, int], float]:
    """The target's exact probabilities of the two tokens after ``first`` (the prefill's token), after the run's
    logits processors (each position sees the text before it, as the engine applies them). Pairs whose second
    token has probability below :data:`JOINT_MIN_P` are left out (see there); the third token's law is computed
    for every kept second token at once, :data:`JOINT_CHUNK` rows per forward."""
    def probs(rows: list[list[int]]) -> torch.Tensor:
        return _next_probs(target, rows, len(prompt), config)

    p2, joint = probs([prompt + [first]])[0], {}
    seconds = torch.nonzero(p2 >= JOINT_MIN_P).flatten().tolist()
    for start in range(0, len(seconds), JOINT_CHUNK):
        chunk = seconds[start:start + JOINT_CHUNK]
        p3 = probs([prompt + [first, t2] for t2 in chunk])
        for t2, row in zip(chunk, p3):
            for t3 in torch.nonzero(row > 1e-5).flatten().tolist():
                joint[(t2, t3)] = float(p2[t2] * row[t3])
    return joint


def _samples(target, prompt: list[int], config: GenerationConfig, n: int, batch: int,
             make_drafter: Callable[[], Drafter] | None, cancel=None,
             done: Callable[[int], None] | None = None) -> list[tuple[int, int, int]]:
    """n sampled runs of 3 tokens, ``batch`` rows at a time (row r of batch j draws with seed base + j*batch + r);
    ``done(runs finished so far)`` after each batch. ``cancel`` (a flag with ``is_set()`` or a callable) is also
    looked at before each batch, its drafters made: raises RunCancelled when it is set, so a Stop ends the check
    within the batch under way."""
    out: list[tuple[int, int, int]] = []
    for start in range(0, n, batch):
        check_cancel(cancel)
        rows = min(batch, n - start)
        run_config = replace(config, max_new_tokens=3, sampling=replace(config.sampling, seed=start))
        drafters = [make_drafter() for _ in range(rows)] if make_drafter else None
        got = run_batch(target, [prompt] * rows, run_config, drafters, cancel)
        out.extend(tuple(ids[:3]) for ids in got.ids if len(ids) >= 3)
        if done is not None:
            done(start + rows)
    return out


def _chi_square(observed: dict, expected: dict, n: int) -> tuple[float, float, int]:
    """(statistic, p-value, degrees of freedom) of observed counts against expected probabilities, cells with an
    expected count below :data:`MIN_EXPECTED` pooled into one."""
    from scipy.stats import chisquare

    big = [c for c, p in expected.items() if p * n >= MIN_EXPECTED]
    obs = [observed.get(c, 0) for c in big] + [n - sum(observed.get(c, 0) for c in big)]
    exp = [expected[c] * n for c in big] + [max(1e-9, n - sum(expected[c] * n for c in big))]
    if len(big) < 2:
        return float("nan"), float("nan"), 0
    result = chisquare(obs, exp)
    return float(result.statistic), float(result.pvalue), len(obs) - 1


def sampling_check(target, prompt: list[int], config: GenerationConfig, make_drafter: Callable[[], Drafter], *,
                   n: int = 200, batch: int = 16, broken: bool = False, cancel=None,
                   progress: Callable[[str, int], None] | None = None, law: tuple[int, dict] | None = None) -> dict:
    """The sampling-law check of the module docstring. ``progress(side, runs done)``, if given, is called after
    each batch of ``batch`` runs, ``side`` "standard" (all n first) then "speculative".

    Returns ``{"n", "first", "standard", "speculative" (counts of (t2, t3) pairs), "exact" (probabilities),
    "fit_standard", "fit_speculative" (chi-square stat, p, dof against the exact law), "homogeneity" (stat, p,
    dof between the two samples), "broken"}``. ``law``: (first token, its exact law) already read
    (:func:`first_token_law`), used when the most frequent first token is that one instead of read again. Raises
    ValueError in greedy mode (there is nothing to sample).
    """
    if config.sampling.greedy:
        raise ValueError("The sampling check needs a temperature above 0.")
    spec_config = replace(config, accept_all_drafts=broken)
    def done(side: str) -> Callable[[int], None] | None:
        return None if progress is None else lambda runs: progress(side, runs)

    standard = _samples(target, prompt, config, n, batch, None, cancel, done("standard"))
    speculative = _samples(target, prompt, spec_config, n, batch, make_drafter, cancel, done("speculative"))
    firsts = {s[0] for s in standard + speculative}
    first = max(firsts, key=lambda t: sum(1 for s in standard + speculative if s[0] == t))
    std = _pair_counts(standard, first)
    spec = _pair_counts(speculative, first)
    exact = law[1] if law is not None and law[0] == first else _joint_two(target, prompt, first, config)
    return {"n": n, "first": first, "standard": std, "speculative": spec, "exact": exact, "broken": broken,
            "fit_standard": _chi_square(std, exact, sum(std.values())),
            "fit_speculative": _chi_square(spec, exact, sum(spec.values())),
            "homogeneity": _homogeneity(std, spec)}


def _pair_counts(samples: list[tuple[int, int, int]], first: int) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for t1, t2, t3 in samples:
        if t1 == first:
            counts[(t2, t3)] = counts.get((t2, t3), 0) + 1
    return counts


def _homogeneity(a: dict, b: dict) -> tuple[float, float, int]:
    """Chi-square test that two samples of pairs come from one law (cells with few counts pooled)."""
    from scipy.stats import chi2_contingency

    cells = sorted(set(a) | set(b), key=lambda c: -(a.get(c, 0) + b.get(c, 0)))
    big = [c for c in cells if a.get(c, 0) + b.get(c, 0) >= 10]
    rest = [c for c in cells if c not in big]
    table = [[a.get(c, 0) for c in big] + [sum(a.get(c, 0) for c in rest)],
             [b.get(c, 0) for c in big] + [sum(b.get(c, 0) for c in rest)]]
    table = [list(col) for col in zip(*table) if sum(col) > 0]
    if len(table) < 2:
        return float("nan"), float("nan"), 0
    stat, p, dof, _ = chi2_contingency(list(zip(*table)))
    return float(stat), float(p), int(dof)
