"""The arena and the cost side of speculative decoding, as plain functions (no Gradio: the app's Arena and
"Why it works" tabs call these).

Arena (:func:`run_arena`). Per prompt, every drafter x k runs once, with standard decoding (the baseline) timed
before the first method, between every two and after the last (B, m1, B, m2, ..., B), all with the same target and
:class:`~specviz.core.engine.GenerationConfig` (only k / adaptive k change). A method's ratios divide its rate by the
pooled rate of the two baseline runs beside it, so a slow moment of a shared machine weighs on both sides of a
ratio instead of on every method of a prompt at once; ``baseline_drift`` says how much those two disagreed.
Every run is timed on its own clock (:class:`~specviz.core.events.PassEvent` timings). One short warm-up of each method
runs first, and an untimed prefill of each prompt before its runs, so that no measured run pays for first-call
initialisation; the order of the methods rotates from prompt to prompt, so none always runs first.

Definitions of the figures (one row per prompt x method, and pooled per category and overall):
- tokens_per_pass = tokens after the prefill / target passes after it (bonus included; 1.0 for the baseline).
- acceptance_rate = accepted / drafted (bonus excluded). alpha = accepted / (accepted + rejections), the
  per-token acceptance of the formulas (only positions the target judged count).
- m = drafted tokens / pass (the mean draft length: k for a fixed k unless the drafter proposed fewer).
- tokens_per_s = generated tokens / seconds on the run's own clock (prefill included); speedup = a run's
  tokens_per_s / that of the baseline runs beside it; decode_speedup = the same without the prefill (the headline,
  as in the Live tab, and what the predictions model).
- T_step = the baseline's target forward ms per token after the prefill; T_verify = the speculative run's
  target forward ms per pass; T_draft = its drafting ms per pass; c = T_draft / drafted token / T_step.
- predicted_speedup_paper = (1 - alpha^(m+1)) / ((1 - alpha)(c m + 1)) (Leviathan et al. 2023, Thm 3.8;
  a verification is assumed to cost one target step).
- predicted_speedup_measured = E[tokens per pass] x T_step / (T_verify + T_draft). The gap between the two
  predictions is the verification overhead (T_verify against T_step).
- ids_identical (greedy only, None when sampling) = the run's ids equal the baseline's.
- speedup_low / speedup_high and decode_speedup_low / decode_speedup_high: the spread of a method's ratios, its
  rate over each of the two baseline runs beside it taken alone (:func:`speedup_spread`); pooled rows take the
  lowest and the highest over their prompts. None where no pair of baseline runs gives one (and for the baseline
  itself, the reference).
- <figure>_low / <figure>_high for the other timed figures (:func:`timed_spread`, :func:`derived_spread`):
  tokens_per_s over the runs pooled in the row (the baseline's row of a prompt: all its runs; a method runs once
  per prompt: none); baseline_tokens_per_s and t_step_ms over the baseline runs beside the method (the baseline's
  row: all its runs), lowest and highest run; t_verify_ms and t_draft_ms (means over the method's passes) the 95%
  percentile-bootstrap interval of that mean over its passes (:func:`~specviz.core.metrics.bootstrap_mean`); c and
  the two predictions computed from the ends of their parts' spreads (each end from the parts' ends that push it
  furthest that way).
  Pooled rows take the lowest and highest over their prompts (a prompt without a spread of its own adds its value).
  None where there is no spread to tell (one run, one pass).
Pooled figures add the counts and the times of their rows first, then divide.

Cost side (:func:`measure_forward_grid`, :func:`whatif_curves`): the target's forward time over n new tokens after
a cached prompt, for several batch sizes, and what-if curves of tokens per pass and speedup against k.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import torch

from specviz.analysis.bench import Prompt, copy_bandwidth_gbs, environment
from specviz.drafters.heads import DEFAULT_TREE_NODES
from specviz.drafters.registry import HEAD_KEYS, drafter_keys, make_drafter, split_variant
from specviz.core.engine import MAX_K, GenerationConfig, speculative_generate, standard_generate
from specviz.core.events import RunCancelled
from specviz.core.generation_settings import settings_record
from specviz.core.kv import Clock, new_cache, rollback_cache
from specviz.core.costs import Costs, interpolate
from specviz.core.metrics import (Counters, RunStats, decode_speedup, expected_tokens_per_pass, faster_than_possible,
                                  bootstrap_mean, predicted_speedup_measured, predicted_speedup_paper, speedup)

AUTO = "auto"
AUTO_K_START = 4  # k = auto (cost-aware) starts here (as in the CLI)
BASELINE = "none"
WARMUP_TOKENS = 8
TREE_SUFFIX = "tree"  # "eagle:tree" / "medusa:tree": the head drafter with a tree of TREE_NODES (as the bench)
TREE_DRAFTERS = HEAD_KEYS
TREE_NODES = DEFAULT_TREE_NODES
ArenaProgress = Callable[[float, str], None]
"""progress(fraction done in [0, 1], message)."""
ShouldStop = Callable[[], bool]

DEFINITIONS = {
    "tokens_per_pass": "tokens after the prefill / target passes after it (bonus included; 1.0 = standard decoding)",
    "acceptance_rate": "accepted / drafted (bonus excluded)",
    "alpha": "per-token acceptance: accepted / (accepted + rejections); only judged positions count",
    "m": "mean drafted tokens per pass (k in the formulas)",
    "tokens_per_s": "generated tokens / seconds on the run's own clock, prefill included",
    "speedup": ("tokens_per_s / the baseline's tokens_per_s, the baseline being the two standard-decoding runs "
                "timed just before and just after this method on the same prompt, pooled (same target and settings)"),
    "decode_speedup": "the same after the prefill (tokens after the first / time after the prefill): the headline",
    "runs": "runs pooled in the row (the baseline row of a prompt pools every baseline run of that prompt)",
    "baseline_runs": "standard-decoding runs the row's ratios are taken against (2 per method and prompt)",
    "baseline_drift": ("fastest / slowest decoding rate of those baseline runs - 1 (pooled rows: the largest of "
                       "their rows); above 0.15 the machine's speed changed during the measurement: a ratio whose "
                       "spread spans 1 is then too noisy to tell"),
    "t_step_ms": "baseline: target forward ms per token after the prefill",
    "t_verify_ms": "speculative run: target forward ms per pass (k+1 tokens)",
    "t_draft_ms": "speculative run: drafting ms per pass",
    "c": "draft cost per drafted token / T_step (chains only: empty for trees, as are the formulas' columns)",
    "predicted_speedup_paper": "(1 - alpha^(m+1)) / ((1 - alpha)(c m + 1)); a verification costs one step",
    "predicted_speedup_measured": "E[tokens per pass] x T_step / (T_verify + T_draft)",
    "ids_identical": "greedy: the run's token ids equal the baseline's; empty when sampling (and for the baseline)",
    "speedup_low": ("the lowest end-to-end ratio against one baseline run beside the method taken alone (pooled "
                    "rows: the lowest over their prompts); empty for the baseline and without two baseline runs"),
    "speedup_high": "the highest such ratio (see speedup_low)",
    "decode_speedup_low": "the same spread for decode_speedup (see speedup_low)",
    "decode_speedup_high": "the highest decode_speedup against one baseline run taken alone",
    "tokens_per_s_low": ("the slowest of the runs pooled in the row (the baseline's row: all its runs of the prompt; "
                         "pooled rows: the lowest over their prompts); empty for a method's prompt row (one run)"),
    "tokens_per_s_high": "the fastest such run (see tokens_per_s_low)",
    "baseline_tokens_per_s_low": ("the slowest of the baseline runs beside the method (the baseline's row: all its "
                                  "runs; pooled rows: the lowest over their prompts)"),
    "baseline_tokens_per_s_high": "the fastest such baseline run (see baseline_tokens_per_s_low)",
    "t_step_ms_low": ("the lowest T_step of one of those baseline runs taken alone (pooled rows: the lowest over "
                      "their prompts)"),
    "t_step_ms_high": "the highest such T_step (see t_step_ms_low)",
    "t_verify_ms_low": ("low end of the 95% bootstrap interval of T_verify, the mean over the method's passes "
                        "(resampling its passes; pooled rows: the lowest over their prompts); empty with one pass"),
    "t_verify_ms_high": "high end of that interval (see t_verify_ms_low)",
    "t_draft_ms_low": "low end of the 95% bootstrap interval of T_draft over the method's passes (as t_verify_ms_low)",
    "t_draft_ms_high": "high end of that interval",
    "c_low": "T_draft_low / m / T_step_high: c from the cheap ends of its parts' spreads",
    "c_high": "T_draft_high / m / T_step_low",
    "predicted_speedup_paper_low": "the paper's prediction at c_high (its parts' unfavourable ends)",
    "predicted_speedup_paper_high": "the paper's prediction at c_low",
    "predicted_speedup_measured_low": "E[tokens per pass] x T_step_low / (T_verify_high + T_draft_high)",
    "predicted_speedup_measured_high": "E[tokens per pass] x T_step_high / (T_verify_low + T_draft_low)",
    "pooling": "category and overall rows add their rows' counts and times, then divide",
}

CSV_COLUMNS = (
    "level", "category", "prompt_id", "drafter", "k", "prompts", "runs", "tokens", "passes", "drafted", "accepted",
    "rejections", "tree_passes", "tokens_per_pass", "acceptance_rate", "alpha", "m", "expected_tokens_per_pass", "tokens_per_s",
    "baseline_tokens_per_s", "speedup", "speedup_low", "speedup_high", "decode_speedup", "decode_speedup_low",
    "decode_speedup_high", "tokens_per_s_low", "tokens_per_s_high", "baseline_tokens_per_s_low",
    "baseline_tokens_per_s_high", "predicted_speedup_paper", "predicted_speedup_paper_low",
    "predicted_speedup_paper_high", "predicted_speedup_measured", "predicted_speedup_measured_low",
    "predicted_speedup_measured_high", "t_step_ms", "t_step_ms_low", "t_step_ms_high", "t_verify_ms",
    "t_verify_ms_low", "t_verify_ms_high", "t_draft_ms", "t_draft_ms_low", "t_draft_ms_high", "c", "c_low", "c_high",
    "ids_identical", "elapsed_ms", "ttft_ms", "draft_ms",
    "verify_ms", "baseline_elapsed_ms", "baseline_ttft_ms", "baseline_verify_ms", "baseline_passes",
    "baseline_runs", "baseline_drift",
)


# ----------------------------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class Variant:
    """One method of the arena: a drafter key and a draft length (``k`` None for the baseline)."""

    drafter: str
    k: int | None = None
    adaptive: bool = False

    @property
    def k_label(self) -> str:
        """"4", "auto" or "" (baseline)."""
        if self.drafter == BASELINE:
            return ""
        return AUTO if self.adaptive else str(self.k)

    @property
    def label(self) -> str:
        """"standard" or "<drafter> k=<k>"."""
        return "standard" if self.drafter == BASELINE else f"{self.drafter} k={self.k_label}"

    def config(self, base: GenerationConfig) -> GenerationConfig:
        """``base`` with this variant's k (k = auto, the cost-aware choice, starts at :data:`AUTO_K_START`)."""
        if self.drafter == BASELINE:
            return base
        return dataclasses.replace(base, k=self.k or AUTO_K_START, adaptive_k=False, auto_k=self.adaptive)


def parse_ks(ks: Iterable[int | str]) -> list[int | str]:
    """Validate draft lengths: ints in 1..MAX_K (also as strings) and "auto"; duplicates dropped, order kept.

    Raises:
        ValueError: an entry that is neither.
    """
    out: list[int | str] = []
    for k in ks:
        text = str(k).strip().lower()
        value: int | str
        if text == AUTO:
            value = AUTO
        else:
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"k must be a whole number in 1..{MAX_K} or 'auto', got {k!r}") from None
            if not 1 <= value <= MAX_K:
                raise ValueError(f"k must be in 1..{MAX_K} or 'auto', got {value}")
        if value not in out:
            out.append(value)
    return out


def variants(drafters: Sequence[str], ks: Sequence[int | str]) -> list[Variant]:
    """The baseline, then every drafter x k (drafters in the given order, "none" skipped).

    Raises:
        ValueError: no drafter or no k, an unknown drafter key, or a bad k.
    """
    keys = [d for d in dict.fromkeys(drafters) if d != BASELINE]
    unknown = [d for d in keys if not is_drafter_key(d)]
    if unknown:
        raise ValueError(f"unknown drafter {unknown[0]!r}; choose from: {', '.join(drafter_keys()[1:])} "
                         f"({' and '.join(f'{d}:{TREE_SUFFIX}' for d in TREE_DRAFTERS)} draft trees, "
                         f"{' and '.join(f'{d}:lookup' for d in TREE_DRAFTERS)} try n-gram lookup first)")
    if not keys:
        raise ValueError("Pick at least one drafter.")
    parsed = parse_ks(ks)
    if not parsed:
        raise ValueError("Pick at least one draft length k.")
    return [Variant(BASELINE)] + [Variant(d, AUTO_K_START if k == AUTO else int(k), k == AUTO)
                                  for d in keys for k in parsed]


def is_drafter_key(key: str) -> bool:
    """A registry key, or a head drafter with suffixes: "eagle:tree" / "medusa:tree" (a tree of
    :data:`TREE_NODES`), "eagle:lookup" / "medusa:lookup" (n-gram lookup first), or both
    (:func:`specviz.drafters.registry.split_variant`)."""
    try:
        split_variant(key)
    except ValueError:
        return False
    return True


def build_drafter(key: str, target, *, draft_spec: str | None = None, exit_layer: int | None = None):
    """A fresh drafter for an arena key (None for the baseline); "<key>:tree" drafts a tree of
    :data:`TREE_NODES` nodes (greedy; a chain when sampling). Raises ValueError (e.g.
    :class:`specviz.drafters.networks.HeadsError` when no trained heads fit the target)."""
    if key == BASELINE:
        return None
    v = split_variant(key)
    return make_drafter(v.base, target, draft_spec=draft_spec, exit_layer=exit_layer,
                        tree_nodes=TREE_NODES if v.tree else 0, lookup=v.lookup)


def as_prompts(prompts: Iterable[dict | Prompt]) -> list[Prompt]:
    """Prompts from ``{"id", "category", "prompt"}`` dicts (or :class:`~specviz.analysis.bench.Prompt`).

    Raises:
        ValueError: no prompts, or an empty prompt.
    """
    out = []
    for i, p in enumerate(prompts, start=1):
        if isinstance(p, Prompt):
            out.append(p)
            continue
        text = str(p.get("prompt") or "")
        if not text.strip():
            raise ValueError("The prompt is empty.")
        out.append(Prompt(str(p.get("id") or f"prompt-{i}"), str(p.get("category") or "custom"), text))
    if not out:
        raise ValueError("There are no prompts to run.")
    return out


# ----------------------------------------------------------------------------------------------- one run


@dataclass
class Measured:
    """One finished run (or several of one method pooled, :func:`pool_runs`): statistics and output ids."""

    stats: Counters  # a RunStats for one run; pooled runs: the sum of their counters
    token_ids: tuple[int, ...]
    tree_passes: int = 0  # passes that drafted a tree (EAGLE / Medusa with tree nodes, greedy)


def pool_runs(runs: Sequence[Measured]) -> Measured:
    """Runs of one method on one prompt as one: counters summed (so rates are ratios of sums), the first run's
    ids (greedy runs of one method give the same ids)."""
    total = Counters()
    for run in runs:
        total = total + (run.stats.counters if isinstance(run.stats, RunStats) else run.stats)
    return Measured(total, runs[0].token_ids, sum(r.tree_passes for r in runs))


def baseline_drift(runs: Sequence[Measured]) -> float | None:
    """How much runs of the baseline disagree: fastest / slowest decoding rate - 1 (0.1 = 10%); None for fewer
    than two runs with a rate."""
    rates = [r.stats.decode_tokens_per_s for r in runs]
    if len(rates) < 2 or any(not rate for rate in rates):
        return None
    return max(rates) / min(rates) - 1.0


SPREAD_KEYS = ("speedup_low", "speedup_high", "decode_speedup_low", "decode_speedup_high")


def speedup_spread(run: Measured, baselines: Sequence[Measured]) -> dict:
    """The spread of a method's two ratios over the baseline runs timed beside it: its rate over each baseline run
    taken alone (:func:`~specviz.core.metrics.speedup` end to end, :func:`~specviz.core.metrics.decode_speedup`
    after the prefill), lowest and highest. The method runs once per prompt, so this is the spread the machine's
    drift between runs puts on its ratio (high / low = 1 + :func:`baseline_drift`).

    Returns:
        ``{"speedup_low", "speedup_high", "decode_speedup_low", "decode_speedup_high"}`` (plain ratios); a pair is
        None when fewer than two baseline runs give a ratio (one run tells no spread).
    """
    out: dict = {}
    for key, ratio in (("speedup", speedup), ("decode_speedup", decode_speedup)):
        values = [v for v in (ratio(run.stats, b.stats) for b in baselines) if v is not None]
        low, high = (min(values), max(values)) if len(values) >= 2 else (None, None)
        out[f"{key}_low"], out[f"{key}_high"] = low, high
    return out


RUN_SPREAD_FIGURES = ("tokens_per_s", "baseline_tokens_per_s", "t_step_ms")  # spread over runs
PASS_SPREAD_FIGURES = ("t_verify_ms", "t_draft_ms")  # spread over the passes of one run (bootstrap of the mean)
DERIVED_SPREAD_FIGURES = ("c", "predicted_speedup_paper", "predicted_speedup_measured")  # from their parts' ends
TIMED_SPREAD_FIGURES = RUN_SPREAD_FIGURES + PASS_SPREAD_FIGURES + DERIVED_SPREAD_FIGURES
"""The figures besides the speedups that carry a spread (``<figure>_low`` / ``<figure>_high`` in a row)."""


def _span(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """(lowest, highest) of the known values; (None, None) for fewer than two (one value has no spread)."""
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if len(known) >= 2 else (None, None)


def timed_spread(run: Measured, standard: Sequence[Measured], own: Sequence[Measured] = ()) -> dict:
    """The spread of a row's timed figures from what was measured (see the module docstring).

    Args:
        run: the row's run (a method's one run, or the baseline's runs pooled).
        standard: the baseline runs behind its T_step and baseline tokens/s (the two beside a method; for the
            baseline's row, all its runs).
        own: the runs pooled in ``run`` (one for a method: its tokens/s then has no spread).

    Returns:
        ``{"tokens_per_s_low", "tokens_per_s_high", "baseline_tokens_per_s_low", ..., "t_draft_ms_high"}``: lowest
        and highest over runs for :data:`RUN_SPREAD_FIGURES` (None with fewer than two runs); for
        :data:`PASS_SPREAD_FIGURES`, the interval of the mean per pass of a :class:`~specviz.core.metrics.RunStats`
        (:func:`~specviz.core.metrics.bootstrap_mean` over its passes; None for pooled counters, which keep no
        passes, and for fewer than two passes).
    """
    out: dict = {}
    spans = {"tokens_per_s": _span(r.stats.tokens_per_s for r in own),
             "baseline_tokens_per_s": _span(b.stats.tokens_per_s for b in standard),
             "t_step_ms": _span(b.stats.forward_ms for b in standard)}
    for key, passes in (("t_verify_ms", "pass_verify_ms"), ("t_draft_ms", "pass_draft_ms")):
        interval = bootstrap_mean(getattr(run.stats, passes, ()))
        spans[key] = (interval.low, interval.high) if interval else (None, None)
    for key, (low, high) in spans.items():
        out[f"{key}_low"], out[f"{key}_high"] = low, high
    return out


def _ends(row: dict, key: str) -> tuple[float, float] | None:
    """A row's figure as (low, high): its spread, or (value, value) without one; None without a value."""
    low, high, value = row.get(f"{key}_low"), row.get(f"{key}_high"), row.get(key)
    if low is not None and high is not None:
        return low, high
    return None if value is None else (value, value)


def _has_spread(row: dict, *keys: str) -> bool:
    return any(row.get(f"{k}_low") is not None and row.get(f"{k}_high") is not None for k in keys)


def derived_spread(row: dict) -> dict:
    """The spread c and the two predictions inherit from their parts (T_step, T_verify, T_draft; alpha and m are
    counts, with none): each end computed from the ends of the parts' spreads that push it furthest that way, a part
    without a spread taken at its value. c = T_draft / (m T_step); the paper's prediction falls as c grows; the
    measured-cost prediction is E[tokens per pass] x T_step / (T_verify + T_draft).

    Returns:
        ``{"c_low", "c_high", "predicted_speedup_paper_low", ..., "predicted_speedup_measured_high"}``; a pair is
        None where the figure is (a tree, the baseline) or none of its parts has a spread.
    """
    out = dict.fromkeys(f"{k}_{end}" for k in DERIVED_SPREAD_FIGURES for end in ("low", "high"))
    alpha, m = row.get("alpha"), row.get("m")
    step, verify, draft = _ends(row, "t_step_ms"), _ends(row, "t_verify_ms"), _ends(row, "t_draft_ms")
    if row.get("c") is not None and m and step and draft and step[0] > 0 and _has_spread(row, "t_step_ms",
                                                                                            "t_draft_ms"):
        c_low, c_high = draft[0] / (m * step[1]), draft[1] / (m * step[0])
        out["c_low"], out["c_high"] = c_low, c_high
        if row.get("predicted_speedup_paper") is not None and alpha is not None:
            out["predicted_speedup_paper_low"] = predicted_speedup_paper(alpha, m, c_high)
            out["predicted_speedup_paper_high"] = predicted_speedup_paper(alpha, m, c_low)
    if (row.get("predicted_speedup_measured") is not None and alpha is not None and m is not None and step
            and verify and _has_spread(row, "t_step_ms", "t_verify_ms", "t_draft_ms")):
        draft = draft or (0.0, 0.0)
        low = predicted_speedup_measured(alpha, m, step[0], verify[1], draft[1])
        high = predicted_speedup_measured(alpha, m, step[1], verify[0], draft[0])
        if low == low and high == high:  # not NaN (a pass of no time)
            out["predicted_speedup_measured_low"], out["predicted_speedup_measured_high"] = low, high
    return out


def measure_run(target, drafter, prompt_ids: list[int], config: GenerationConfig,
                should_stop: ShouldStop | None = None) -> Measured | None:
    """Run standard decoding (``drafter`` None) or speculative decoding to the end; None if stopped midway."""
    if drafter is None:
        events = standard_generate(target, prompt_ids, config, cancel=should_stop)
    else:
        events = speculative_generate(target, drafter, prompt_ids, config, cancel=should_stop)
    stats, ids, trees = RunStats(), [], 0
    try:
        for event in events:
            stats.add(event)
            ids.extend(event.emitted_ids)
            trees += event.tree is not None
    except RunCancelled:  # should_stop said so before a forward: nothing more ran
        return None
    return Measured(stats, tuple(ids), trees)


def _counts(run: Measured, base: Measured, greedy: bool, drift: float | None = None,
            beside: Sequence[Measured] = (), own: Sequence[Measured] = ()) -> dict:
    """The additive quantities of a method's run(s) and the baseline runs timed beside them (what pooling sums),
    ``baseline_drift`` (:func:`baseline_drift` of those baselines; pooled rows keep their largest), the ratios'
    spread over ``beside``, the baseline runs taken one by one (:func:`speedup_spread`; None without them), and the
    timed figures' spread (:func:`timed_spread`: over ``beside``, or over ``own``, the runs pooled in ``run``, for
    the baseline's row, which has no runs beside it)."""
    s, b = run.stats, base.stats
    spread = speedup_spread(run, beside) if beside else dict.fromkeys(SPREAD_KEYS)
    return {
        **spread, **timed_spread(run, beside or own, own),
        "prompts": 1, "runs": s.runs, "tokens": s.generated, "passes": s.passes, "emitted_after_prefill": s.emitted,
        "drafted": s.drafted, "accepted": s.accepted, "rejections": s.rejections, "tree_passes": run.tree_passes,
        "elapsed_ms": s.elapsed_ms, "ttft_ms": s.prefill_ms, "draft_ms": s.draft_ms, "verify_ms": s.verify_ms,
        "baseline_runs": b.runs, "baseline_tokens": b.generated, "baseline_elapsed_ms": b.elapsed_ms,
        "baseline_ttft_ms": b.prefill_ms, "baseline_verify_ms": b.verify_ms, "baseline_passes": b.passes,
        "baseline_emitted_after_prefill": b.emitted, "baseline_drift": drift,
        "ids_identical": (run.token_ids == base.token_ids) if greedy and run is not base else None,
    }


_ADDITIVE = ("prompts", "runs", "baseline_runs", "tokens", "passes", "emitted_after_prefill", "drafted", "accepted",
             "rejections", "tree_passes",
             "elapsed_ms", "ttft_ms", "draft_ms", "verify_ms", "baseline_tokens", "baseline_elapsed_ms",
             "baseline_ttft_ms", "baseline_verify_ms", "baseline_passes", "baseline_emitted_after_prefill")


def _as_counters(c: dict, prefix: str = "") -> Counters:
    """The :class:`~specviz.core.metrics.Counters` of a row's additive counts (``prefix`` "baseline_" for its
    baseline's); a row stores elapsed time, so "other" is what is left of it after prefill, draft and verify."""
    def get(key: str, default=0):
        return c.get(prefix + key, default)

    draft_ms = get("draft_ms") if not prefix else 0.0
    return Counters(
        runs=c["prompts"], passes=get("passes"), emitted=get("emitted_after_prefill"), generated=get("tokens"),
        drafted=get("drafted") if not prefix else 0, accepted=get("accepted") if not prefix else 0,
        rejections=get("rejections") if not prefix else 0, tree_passes=get("tree_passes") if not prefix else 0,
        prefill_ms=get("ttft_ms"), draft_ms=draft_ms, verify_ms=get("verify_ms"),
        other_ms=get("elapsed_ms") - get("ttft_ms") - draft_ms - get("verify_ms"))


def derive(counts: dict, baseline: bool) -> dict:
    """The figures of :data:`DEFINITIONS` from additive counts (one run, or pooled rows), all computed by
    :mod:`specviz.core.metrics` from the counters."""
    spec, base = _as_counters(counts), _as_counters(counts, "baseline_")
    t_step = base.forward_ms
    out = {
        "tokens_per_pass": spec.tokens_per_pass,
        "acceptance_rate": None, "alpha": None, "m": None, "expected_tokens_per_pass": None,
        "tokens_per_s": spec.tokens_per_s, "baseline_tokens_per_s": base.tokens_per_s,
        "speedup": speedup(spec, base), "decode_speedup": decode_speedup(spec, base),
        "t_step_ms": t_step, "t_verify_ms": None, "t_draft_ms": None, "c": None,
        "predicted_speedup_paper": None, "predicted_speedup_measured": None,
    }
    if baseline:
        return out
    out.update(acceptance_rate=spec.acceptance_rate, alpha=spec.alpha, m=spec.mean_proposed if spec.passes else None,
               t_verify_ms=spec.forward_ms, t_draft_ms=spec.draft_ms_per_pass)
    if spec.tree_passes:  # the chain formulas below do not describe a tree
        return out
    out["c"] = spec.draft_cost(t_step)
    alpha, m = out["alpha"], out["m"]
    if alpha is not None and m is not None:
        out["expected_tokens_per_pass"] = spec.expected_tokens_per_pass
        if out["c"] is not None:
            out["predicted_speedup_paper"] = predicted_speedup_paper(alpha, m, out["c"])
        if t_step and out["t_verify_ms"] is not None:
            out["predicted_speedup_measured"] = predicted_speedup_measured(
                alpha, m, t_step, out["t_verify_ms"], out["t_draft_ms"] or 0.0)
    return out


def make_row(level: str, category: str, prompt_id: str, variant: Variant, counts: dict) -> dict:
    """A result row: identity, additive counts, derived figures and the spread c and the predictions inherit from
    the timed figures' spread in ``counts`` (:func:`derived_spread`)."""
    row = {"level": level, "category": category, "prompt_id": prompt_id, "drafter": variant.drafter,
           "k": variant.k_label, "variant": variant.label, **counts, **derive(counts, variant.drafter == BASELINE)}
    return row | derived_spread(row)


def _pooled_span(rows: list[dict], key: str) -> tuple[float | None, float | None]:
    """The lowest and highest of ``key`` over ``rows``: their spreads' ends, and the value of a row without one;
    (None, None) when no row has a spread and fewer than two have a value."""
    ends, spread = [], False
    for r in rows:
        low, high = r.get(f"{key}_low"), r.get(f"{key}_high")
        if low is not None and high is not None:
            ends += [low, high]
            spread = True
        elif r.get(key) is not None:
            ends.append(r[key])
    return (min(ends), max(ends)) if spread or len(ends) >= 2 else (None, None)


def pool(level: str, category: str, rows: list[dict], variant: Variant) -> dict:
    """One pooled row of ``rows`` (all of ``variant``): counts summed, then the figures derived; the speedups'
    spread is the lowest and highest over the rows (widened to hold the pooled ratio itself), so is that of the runs'
    and passes' timed figures (:func:`_pooled_span`), and c and the predictions inherit theirs from those
    (:func:`derived_spread`)."""
    counts = {key: sum(r[key] for r in rows) for key in _ADDITIVE}
    drifts = [r["baseline_drift"] for r in rows if r.get("baseline_drift") is not None]
    counts["baseline_drift"] = max(drifts) if drifts else None
    flags = [r["ids_identical"] for r in rows]
    counts["ids_identical"] = None if any(f is None for f in flags) else all(flags)
    row = make_row(level, category, "", variant, counts)
    for key in ("speedup", "decode_speedup"):
        lows = [r[f"{key}_low"] for r in rows if r.get(f"{key}_low") is not None]
        highs = [r[f"{key}_high"] for r in rows if r.get(f"{key}_high") is not None]
        value = row.get(key)
        if lows and highs and value is not None:  # a ratio of sums may fall a hair outside its rows' ratios
            row[f"{key}_low"], row[f"{key}_high"] = min(lows + [value]), max(highs + [value])
        else:
            row[f"{key}_low"] = row[f"{key}_high"] = None
    for key in RUN_SPREAD_FIGURES + PASS_SPREAD_FIGURES:
        row[f"{key}_low"], row[f"{key}_high"] = _pooled_span(rows, key) if row.get(key) is not None else (None, None)
    return row | derived_spread(row)


# ----------------------------------------------------------------------------------------------- the arena


@dataclass
class ArenaResult:
    """What :func:`run_arena` returns.

    ``rows``: one per prompt x method (the baseline included, drafter "none"); ``summary``: pooled rows per
    category then "all" (level "category" / "overall"); ``stopped``: True when ``should_stop`` ended it early
    (rows hold the prompts that finished); ``notes``: sentences the drafters ask to show (e.g. a draft model with
    another tokenizer has its drafts re-tokenized and verified as one-hot drafts).
    """

    rows: list[dict] = field(default_factory=list)
    summary: list[dict] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    stopped: bool = False
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        """Categories in order of first appearance among the finished rows."""
        return list(dict.fromkeys(r["category"] for r in self.rows))

    @property
    def ids_identical(self) -> bool | None:
        """Greedy: every run's ids equal its baseline's; None when sampling or nothing ran."""
        flags = [r["ids_identical"] for r in self.rows if r["drafter"] != BASELINE]
        return None if not flags or any(f is None for f in flags) else all(flags)


def summarize(rows: list[dict], variants_: list[Variant]) -> list[dict]:
    """Pooled rows per category (in order of appearance) and overall ("all"), per variant."""
    out = []
    names = dict.fromkeys(r["category"] for r in rows)
    groups = [("category", c, [r for r in rows if r["category"] == c]) for c in names]
    groups.append(("overall", "all", rows))
    for level, category, members in groups:
        for v in variants_:
            mine = [r for r in members if r["drafter"] == v.drafter and r["k"] == v.k_label]
            if mine:
                out.append(pool(level, category, mine, v))
    return out


def _arena_settings(target, prompts: list[Prompt], methods: list[Variant], config: GenerationConfig, **options
                    ) -> dict:
    """The settings an arena result records (JSON-able)."""
    return {
        "target": target.spec, "drafters": list(dict.fromkeys(v.drafter for v in methods[1:])),
        "ks": list(dict.fromkeys(v.k_label for v in methods[1:])),
        "auto_k_start": AUTO_K_START, "max_new_tokens": config.max_new_tokens,
        "sampling": settings_record(config.sampling, config.stop_token_ids, config.stop_strings),
        "stop_strings": list(config.stop_strings), "stop_token_ids": list(config.stop_token_ids),
        "k_max": config.k_max, **options, "prompts": [dataclasses.asdict(p) for p in prompts],
    }


def _warm_up(target, methods: list[Variant], ids: list[int], config: GenerationConfig, tokens: int, drafter_for,
             stop: ShouldStop) -> bool:
    """One short untimed run of each method (kernels, caches and allocator warm); False when stopped."""
    warm = dataclasses.replace(config, max_new_tokens=min(tokens, config.max_new_tokens))
    for v in methods:
        if stop() or measure_run(target, drafter_for(v), ids, v.config(warm), stop) is None:
            return False
    return True


def _measure_prompt(target, methods: list[Variant], number: int, prompt: Prompt, ids: list[int],
                    config: GenerationConfig, drafter_for, stop: ShouldStop, tick
                    ) -> dict[Variant, tuple[Measured, Measured, float | None, list[Measured], list[Measured]]] | None:
    """Every method on one prompt, with standard decoding timed before the first, between every two and after the
    last (B, m1, B, m2, ..., B), so each method's ratio uses the two baseline runs beside it and a slow moment
    of the machine weighs on both sides of it. The methods' order rotates per prompt (none always runs first);
    ``tick(label)`` before each run.

    Returns method -> (its run, the two baseline runs beside it pooled, their :func:`baseline_drift`, those two
    runs, [its run]); the baseline -> (all its runs pooled, the same, the drift over all of them, [] : it is the
    reference of the ratios, with no spread of its own, all its runs: the spread of its timings). None when
    stopped."""
    base_v, drafters = methods[0], methods[1:]
    shift = number % len(drafters)

    def timed(v: Variant) -> Measured | None:
        tick(f"{prompt.id} ({prompt.category}): {v.label}")
        return measure_run(target, drafter_for(v), ids, v.config(config), stop)

    baselines = [timed(base_v)]
    runs: dict[Variant, tuple[Measured, Measured, float | None, list[Measured], list[Measured]]] = {}
    for v in drafters[shift:] + drafters[:shift]:
        run = timed(v) if baselines[-1] is not None else None
        after = timed(base_v) if run is not None else None
        if after is None:
            return None
        baselines.append(after)
        runs[v] = (run, pool_runs(baselines[-2:]), baseline_drift(baselines[-2:]), baselines[-2:], [run])
    if baselines[0] is None:
        return None
    everything = pool_runs(baselines)
    runs[base_v] = (everything, everything, baseline_drift(baselines), [], baselines)
    return runs


def iter_arena(target, prompts: Iterable[dict | Prompt], drafters: Sequence[str], ks: Sequence[int | str],
               config: GenerationConfig, progress: ArenaProgress | None = None, should_stop: ShouldStop | None = None,
               *, draft_spec: str | None = None, exit_layer: int | None = None, use_chat_template: bool = True,
               warmup_tokens: int = WARMUP_TOKENS) -> Iterator[ArenaResult]:
    """:func:`run_arena` step by step: yields the growing result after each prompt (the last one is final)."""
    from specviz.models import encode_prompt

    started = time.perf_counter()
    prompts = as_prompts(prompts)
    methods = variants(drafters, ks)
    encoded = [encode_prompt(target.tokenizer, p.prompt, use_chat_template=use_chat_template) for p in prompts]
    result = ArenaResult(prompts=prompts, variants=methods, environment=environment(target), settings=_arena_settings(
        target, prompts, methods, config, draft_spec=draft_spec, exit_layer=exit_layer,
        use_chat_template=use_chat_template, warmup_tokens=warmup_tokens))
    stop = should_stop or (lambda: False)
    say = progress or (lambda fraction, message: None)

    def drafter_for(v: Variant):
        return build_drafter(v.drafter, target, draft_spec=draft_spec, exit_layer=exit_layer)

    for v in methods[1:]:  # fail on a bad drafter (and load a draft model) before measuring anything
        note = getattr(drafter_for(v), "note", "")
        if isinstance(note, str) and note and note not in result.notes:
            result.notes.append(note)
    total, done = len(prompts) * (2 * len(methods) - 1), [0]  # every method, and a baseline after each

    def tick(label: str) -> None:
        say(done[0] / total, label)
        done[0] += 1

    if warmup_tokens > 0:
        say(0.0, "Warming up (one short run of each method)…")
        result.stopped = not _warm_up(target, methods, encoded[0], config, warmup_tokens, drafter_for, stop)
    for number, (prompt, ids) in enumerate(zip(prompts, encoded)):
        if result.stopped:
            break
        if warmup_tokens > 0:  # an untimed prefill of this prompt, so no method pays for its first shape
            measure_run(target, None, ids, dataclasses.replace(config, max_new_tokens=1), stop)
        runs = _measure_prompt(target, methods, number, prompt, ids, config, drafter_for, stop, tick)
        if runs is None:
            result.stopped = True
            break
        result.rows.extend(make_row("prompt", prompt.category, prompt.id, v,
                                    _counts(*runs[v][:2], config.sampling.greedy, *runs[v][2:])) for v in methods)
        result.summary = summarize(result.rows, methods)
        result.wall_s = time.perf_counter() - started
        say(done[0] / total, f"{prompt.id} done")
        yield result
    result.wall_s = time.perf_counter() - started
    say(1.0, "Stopped." if result.stopped else "Done.")
    yield result


def run_arena(target, prompts: Iterable[dict | Prompt], drafters: Sequence[str], ks: Sequence[int | str],
              config: GenerationConfig, progress: ArenaProgress | None = None, should_stop: ShouldStop | None = None,
              **options) -> ArenaResult:
    """Race drafters x k against standard decoding of ``target`` on each prompt (see the module docstring).

    Args:
        target: a :class:`specviz.models.LoadedModel`.
        prompts: ``{"id", "category", "prompt"}`` dicts (or :class:`~specviz.analysis.bench.Prompt`).
        drafters: drafter keys (:func:`~specviz.drafters.registry.drafter_keys`, and "eagle:tree" / "medusa:tree"
            for a tree of :data:`TREE_NODES`; "none" is ignored: the baseline always runs).
        ks: draft lengths, ints in 1..16 and/or "auto" (cost-aware k starting at :data:`AUTO_K_START`).
        config: the settings every run shares (its k and adaptive_k are replaced per method).
        progress: optional ``progress(fraction, message)``.
        should_stop: optional callable checked before every target pass; True ends the arena (``stopped``).
        **options: ``draft_spec``, ``exit_layer``, ``use_chat_template``, ``warmup_tokens``.

    Raises:
        ValueError: no drafter or k, a bad k or drafter, an empty prompt.
        specviz.models.ModelLoadError: a draft model that cannot be loaded.
    """
    result = ArenaResult()
    for result in iter_arena(target, prompts, drafters, ks, config, progress, should_stop, **options):
        pass
    return result


# ----------------------------------------------------------------------------------------------- exports


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def to_csv(result: ArenaResult, extra_columns: Sequence[str] = ()) -> str:
    """Per-prompt rows then pooled rows, columns :data:`CSV_COLUMNS` then ``extra_columns`` (keys a caller added to
    the rows, e.g. the app's noise verdicts); an empty cell = not applicable."""
    columns = (*CSV_COLUMNS, *extra_columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in result.rows + result.summary:
        writer.writerow([_cell(row.get(col)) for col in columns])
    return buffer.getvalue()


def to_json(result: ArenaResult) -> dict:
    """Everything needed to read and reproduce a run: settings, versions, machine, device, definitions, rows."""
    env = result.environment
    return {
        "benchmark": "arena",
        "settings": result.settings,
        "versions": env.get("versions", {}),
        "machine": env.get("machine", {}),
        "device": env.get("device", {}),
        "target": env.get("target", {}),
        "methods": [v.label for v in result.variants],
        "definitions": DEFINITIONS,
        "stopped": result.stopped,
        "notes": list(result.notes),
        "ids_identical": result.ids_identical,
        "wall_s": result.wall_s,
        "summary": result.summary,
        "rows": result.rows,
    }


# ----------------------------------------------------------------------------------------------- cost side

TOKEN_COUNTS = (1, 2, 4, 8, 16, 32)
BATCH_SIZES = (1, 4, 16)
REMEASURES = 2  # a batch size whose curve comes out impossible is measured again at most this many more times


@torch.inference_mode()
def _forward(model: torch.nn.Module, ids: torch.Tensor, cache) -> None:
    model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=ids.shape[1])


def measure_forward_grid(target, *, prompt_len: int = 64, token_counts: Sequence[int] = TOKEN_COUNTS,
                         batch_sizes: Sequence[int] = BATCH_SIZES, repeats: int = 3, warmup: int = 2,
                         bandwidth: bool = False, progress: ArenaProgress | None = None,
                         should_stop: ShouldStop | None = None, seed: int = 0, remeasures: int = REMEASURES) -> dict:
    """Median ms of one target forward over n new tokens (logits for all n, as a verification) after a cached
    ``prompt_len``-token prompt, for each batch size (the same prompt repeated) and n.

    The cache is prefilled once per batch size and rolled back after every forward (:func:`rollback_cache`), so
    every measurement starts from the same ``prompt_len`` positions. Each batch size runs ``warmup`` rounds (not
    kept) then ``repeats`` rounds over every n, and keeps the median per n.

    Honesty: a point that measured faster than a smaller workload beyond noise (more new tokens, or a larger
    batch, :func:`impossible_points`: e.g. T(2) below T(1)) cannot be a finding; the batch sizes involved are
    measured again, up to ``remeasures`` more times while one stays impossible; what still is, is in "impossible".

    Returns:
        ``{"token_counts", "batch_sizes", "ms": {batch: {n: ms}}, "spread": {batch: {n: (min ms, max ms)}} over the
        repeats, "samples": {batch: {n: [ms of repeat 1, 2, ...]}} (repeat i of every n timed in the same round),
        "impossible": [{"batch", "n", "than_batch", "than_n"}], "remeasured": [batch sizes measured again],
        "measurements": {batch: times measured}, "param_bytes", "gbs": {batch: {n: GB/s}}, "step_ms", "verify_cost":
        {k: T(k+1)/T(1) at batch 1, for measured k+1}, "copy_bandwidth_gbs" (or None), "settings", "wall_s",
        "stopped"}``; GB/s = weight bytes read per forward / its time.

    Raises:
        ValueError: empty or non-positive token counts or batch sizes.
    """
    token_counts = sorted({int(n) for n in token_counts})
    batch_sizes = sorted({int(b) for b in batch_sizes})
    if not token_counts or token_counts[0] < 1 or not batch_sizes or batch_sizes[0] < 1:
        raise ValueError("token counts and batch sizes must be >= 1")
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, int(target.vocab_size), (1, prompt_len + max(token_counts)), generator=gen).to(target.device)
    total = sum(b * (prompt_len + sum(token_counts) * (warmup + repeats)) for b in batch_sizes)  # tokens to run
    grid = _Grid(target.model, Clock(target.device), ids, prompt_len, token_counts, warmup, repeats,
                 progress or (lambda fraction, message: None), should_stop or (lambda: False), total)
    ms: dict[int, dict[int, float]] = {}
    for b in batch_sizes:
        ms[b] = grid.batch(b)
        if grid.stopped:
            break
    impossible, remeasured = grid.recheck(ms, remeasures)
    one = ms.get(batch_sizes[0], {})
    step = one.get(1)
    result = {
        "token_counts": token_counts, "batch_sizes": batch_sizes, "ms": ms, "param_bytes": target.param_bytes,
        "gbs": {b: {n: target.param_bytes / (t / 1000.0) / 1e9 for n, t in row.items()} for b, row in ms.items()},
        "step_ms": step,
        "verify_cost": {n - 1: t / step for n, t in one.items() if step and n > 1} if batch_sizes[0] == 1 else {},
        "spread": {b: {n: (min(t), max(t)) for n, t in grid.samples[b].items() if n in ms[b]} for b in ms},
        "samples": {b: {n: list(t) for n, t in grid.samples[b].items() if n in ms[b]} for b in ms},
        "impossible": impossible, "remeasured": remeasured, "measurements": dict(grid.measurements),
        "copy_bandwidth_gbs": copy_bandwidth_gbs(target.device) if bandwidth and not grid.stopped else None,
        "settings": {"prompt_len": prompt_len, "repeats": repeats, "warmup": warmup, "seed": seed},
        "stopped": grid.stopped,
    }
    result["wall_s"] = time.perf_counter() - started
    grid.say(1.0, "Stopped." if grid.stopped else "Done.")
    return result


@dataclass
class _Grid:
    """The timing loop of :func:`measure_forward_grid` (one batch size at a time)."""

    model: torch.nn.Module
    clock: Clock
    ids: torch.Tensor  # (1, prompt_len + max n) random token ids
    prompt_len: int
    token_counts: list[int]
    warmup: int
    repeats: int
    say: ArenaProgress
    stop: ShouldStop
    total: int  # tokens the whole grid runs (for the progress fraction)
    done: int = 0
    stopped: bool = False
    samples: dict = field(default_factory=dict)  # batch -> {n: [ms of each kept repeat]}
    measurements: Counter = field(default_factory=Counter)  # batch -> times its row was measured

    def recheck(self, ms: dict[int, dict[int, float]], remeasures: int = 1) -> tuple[list[dict], list[int]]:
        """Measure again every batch size with a point faster than possible (:func:`impossible_points`) or beaten
        by one, replacing its row of ``ms``, up to ``remeasures`` times while such a point remains. Returns (the
        points still impossible, the batch sizes measured again, in order)."""
        found, again = impossible_points(self.samples), set()
        for _ in range(remeasures):
            if not found or self.stopped:
                break
            now = sorted({p["batch"] for p in found} | {p["than_batch"] for p in found})
            again |= set(now)
            self.total += sum(b * (self.prompt_len + sum(self.token_counts) * (self.warmup + self.repeats))
                              for b in now)
            for b in now:
                self.say(self.done / self.total, f"batch {b}: measuring again (a point came out faster than "
                         f"possible; measurement {self.measurements[b] + 1})")
                ms[b] = self.batch(b)
                if self.stopped:
                    break
            found = impossible_points(self.samples)
        return found, sorted(again)

    def batch(self, b: int) -> dict[int, float]:
        """Median ms per n at batch ``b``: prefill once, then rounds over every n (warm-up rounds first, not kept),
        the cache rolled back after each forward; a burst of other work then spreads over all n instead of
        bending the curve at one of them."""
        if self.stop():
            self.stopped, self.samples[b] = True, {}
            return {}
        self.measurements[b] += 1
        self.say(self.done / self.total, f"batch {b}: prefilling {self.prompt_len} tokens")
        cache = new_cache(self.model)
        _forward(self.model, self.ids[:, :self.prompt_len].expand(b, -1).contiguous(), cache)
        self.done += b * self.prompt_len
        times: dict[int, list[float]] = {n: [] for n in self.token_counts}
        for i in range(self.warmup + self.repeats):
            phase = "warming up" if i < self.warmup else f"round {i - self.warmup + 1}/{self.repeats}"
            self.say(self.done / self.total, f"batch {b}: {phase}")
            for n in self.token_counts:
                if self.stop():
                    self.stopped = True
                    break
                new = self.ids[:, self.prompt_len:self.prompt_len + n].expand(b, -1).contiguous()
                t0 = self.clock.now_ms()
                _forward(self.model, new, cache)
                t1 = self.clock.now_ms()
                rollback_cache(cache, self.prompt_len)
                if i >= self.warmup:
                    times[n].append(t1 - t0)
                self.done += b * n
            if self.stopped:
                break
        self.samples[b] = {n: t for n, t in times.items() if len(t) == self.repeats}
        return {n: statistics.median(t) for n, t in self.samples[b].items()}


IMPOSSIBLE_MARGIN = 0.1  # a larger workload must beat a smaller one by more than this share to be flagged


def impossible_points(samples: dict[int, dict[int, Sequence[float]]], margin: float = IMPOSSIBLE_MARGIN
                      ) -> list[dict]:
    """The points of a forward grid that measured faster than a smaller workload beyond noise
    (:func:`specviz.core.metrics.faster_than_possible`): more new tokens at the same batch size, or a larger batch
    at the same n, cannot take less time. ``samples``: batch -> {n: repeat times in ms}. One entry per offending
    point, naming the first smaller workload it beats: ``{"batch", "n", "than_batch", "than_n"}``."""
    out = []
    batches = sorted(samples)
    for b in batches:
        for n in sorted(samples[b]):
            smaller = [(b, m) for m in sorted(samples[b]) if m < n]
            smaller += [(c, n) for c in batches if c < b and n in samples[c]]
            beaten = next(((c, m) for c, m in smaller
                           if faster_than_possible(samples[c][m], samples[b][n], margin=margin)), None)
            if beaten is not None:
                out.append({"batch": b, "n": n, "than_batch": beaten[0], "than_n": beaten[1]})
    return out


def below_less_work(ms: dict[int, dict[int, float]], flagged: Iterable[tuple[int, int]] = ()) -> list[dict]:
    """The points of a forward grid measured below a smaller workload that :func:`impossible_points` does not flag:
    their median is lower than that of fewer new tokens at the same batch size, or of a smaller batch at the same n,
    but by no more than its margin, or with repeats that overlap. More work cannot take less time, so such a point
    is within noise of impossible: the two workloads measured the same, and the dip is no finding.

    Args:
        ms: batch -> {n: median ms} (:func:`measure_forward_grid`'s ``"ms"``).
        flagged: (batch, n) of the points already flagged impossible (left out here).

    Returns:
        One entry per point, naming the smaller workload it is furthest below: ``{"batch", "n", "than_batch",
        "than_n", "below"}``, ``below`` the share it is below that workload's median (0.1 = 10 %).
    """
    skip = set(flagged)
    out = []
    batches = sorted(ms)
    for b in batches:
        for n in sorted(ms[b]):
            if (b, n) in skip or not ms[b][n]:
                continue
            smaller = [(b, m) for m in ms[b] if m < n] + [(c, n) for c in batches if c < b and n in ms[c]]
            shortfall = [(1.0 - ms[b][n] / ms[c][m], c, m) for c, m in smaller if ms[c][m] and ms[b][n] < ms[c][m]]
            if shortfall:
                below, c, m = max(shortfall)
                out.append({"batch": b, "n": n, "than_batch": c, "than_n": m, "below": below})
    return out


@torch.inference_mode()
def probe_forward_ms(target, token_counts: Sequence[int] = (1, 16), *, prompt_len: int = 16, repeats: int = 2,
                     seed: int = 0) -> dict[int, float]:
    """A quick cost probe (a second or so on a small CPU): the median ms of one target forward over n new tokens
    after a cached ``prompt_len``-token prompt of random ids (batch 1), for each n of ``token_counts``; one
    untimed warm-up forward, then ``repeats`` timed ones per n, the cache rolled back after each."""
    counts = sorted({int(n) for n in token_counts})
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, int(target.vocab_size), (1, prompt_len + counts[-1]), generator=gen).to(target.device)
    clock, cache = Clock(target.device), new_cache(target.model)
    _forward(target.model, ids[:, :prompt_len], cache)
    times: dict[int, list[float]] = {n: [] for n in counts}
    for i in range(1 + repeats):
        for n in counts:
            t0 = clock.now_ms()
            _forward(target.model, ids[:, prompt_len:prompt_len + n], cache)
            elapsed = clock.now_ms() - t0
            rollback_cache(cache, prompt_len)
            if i:
                times[n].append(elapsed)
    return {n: statistics.median(t) for n, t in times.items()}


def grid_seconds(probe: dict[int, float], *, prompt_len: int = 64, token_counts: Sequence[int] = TOKEN_COUNTS,
                 batch_sizes: Sequence[int] = BATCH_SIZES, repeats: int = 3, warmup: int = 2) -> float:
    """The expected seconds of :func:`measure_forward_grid` with these settings, from a :func:`probe_forward_ms`
    result (ms of one forward over n tokens, at least two n): a forward of b rows x n tokens is taken to cost
    max(T(1), b n t), t = T(n_max) / n_max the per-token cost of a wide forward (memory-bound below, compute-bound
    above), and the prefill of each batch b x ``prompt_len`` tokens at t per token."""
    largest = max(probe)
    step, per_token = probe[min(probe)], probe[largest] / largest
    total = 0.0
    for b in batch_sizes:
        total += b * prompt_len * per_token
        total += (warmup + repeats) * sum(max(step, b * n * per_token) for n in token_counts)
    return total / 1000.0


def measure_draft_costs(target, step_ms: float, *, exit_layer: int | None = None, prompt_len: int = 64,
                        repeats: int = 5, step_repeats: Sequence[float] = ()) -> dict:
    """c (one drafted token's cost / one target step ``step_ms``) of the drafters that need no extra model:
    "early-exit" (a 1-token forward of the target's first layers) and "ngram" (one lookup over a context of
    ``prompt_len`` + 32 tokens).

    Returns ``{"early-exit": c from the median, "early-exit_range": (low, high), "ngram", "early_exit_layer"}``;
    the range spans the early-exit forward's repeats over the one-token step's: the fastest repeat over the slowest
    step of ``step_repeats`` and the reverse (over ``step_ms`` alone when no step repeats are given), so it holds
    the run-to-run noise of both timings."""
    from specviz.analysis.bench import time_forward_rounds
    from specviz.core.drafting import DraftContext
    from specviz.drafters.early_exit import early_exit_view
    from specviz.drafters.ngram import NgramDrafter
    from specviz.drafters.registry import default_exit_layer
    from specviz.core.verify import SamplingConfig

    layers = exit_layer or default_exit_layer(target.num_layers)
    view = early_exit_view(target.model, layers)
    rounds = time_forward_rounds(view, target.device, prompt_len, [1], {"default": contextlib.nullcontext},
                                 repeats=repeats, warmup=1)["default"][1]
    early = statistics.median(rounds)
    steps = [t for t in step_repeats if t > 0] or [step_ms]
    gen = torch.Generator().manual_seed(0)
    context = torch.randint(0, int(target.vocab_size), (prompt_len + 32,), generator=gen).tolist()
    drafter, times = NgramDrafter(), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        drafter.propose(DraftContext(context, 4, SamplingConfig(), None))
        times.append((time.perf_counter() - t0) * 1000.0)
    return {"early-exit": early / step_ms, "early-exit_range": (min(rounds) / max(steps), max(rounds) / min(steps)),
            "ngram": statistics.median(times) / step_ms, "early_exit_layer": float(layers)}


def lookahead_pass_cost(curve: dict[int, float], window: int, ngram: int, candidates: int) -> dict:
    """What a full lookahead pass costs against a one-token step, from a measured forward curve (n new tokens ->
    ms, batch 1: :func:`measure_forward_grid`'s row, or :func:`specviz.analysis.bench.time_forward_ms`).

    A pass feeds n = 1 + W(N-1) + G(N-1) tokens (:func:`specviz.drafters.lookahead.forward_tokens`); T(n) is read
    from the curve, interpolated between measured n (:func:`interpolate`). Returns ``{"window", "ngram",
    "candidates", "tokens": n, "step_ms": T(1), "pass_ms": T(n), "ratio": T(n)/T(1), "measured": n was timed,
    "extrapolated": n lies beyond the largest measured n}``. ``ratio`` is also the tokens per pass lookahead needs to
    break even. Raises ValueError without T(1) in ``curve``.
    """
    from specviz.drafters.lookahead import forward_tokens

    if 1 not in curve:
        raise ValueError("the forward curve needs the one-token step T(1)")
    n = forward_tokens(window, ngram, candidates)
    pass_ms = interpolate(curve, n)  # the measured T(n) itself when n was timed
    return {"window": window, "ngram": ngram, "candidates": candidates, "tokens": n, "step_ms": curve[1],
            "pass_ms": pass_ms, "ratio": pass_ms / curve[1], "measured": n in curve, "extrapolated": n > max(curve)}


def describe_lookahead_cost(cost: dict) -> str:
    """One line: "lookahead pass at W=4, N=3, G=4: 17 tokens, T(17)/T(1) = 1.85 (interpolated)"."""
    how = "" if cost["measured"] else " (extrapolated)" if cost["extrapolated"] else " (interpolated)"
    return (f"lookahead pass at W={cost['window']}, N={cost['ngram']}, G={cost['candidates']}: {cost['tokens']} "
            f"tokens, T({cost['tokens']})/T(1) = {cost['ratio']:.2f}{how}")


def whatif_curves(alpha: float, c: float, verify_curve: dict[int, float] | None = None,
                  k_max: int = MAX_K) -> dict:
    """Expected tokens per pass and predicted speedups for k = 1..k_max at per-token acceptance ``alpha`` and draft
    cost ratio ``c``.

    ``verify_curve`` (n new tokens -> ms, batch 1, from :func:`measure_forward_grid`) gives the measured-cost
    prediction E[tau] x T(1) / (T(k+1) + c k T(1)), with T interpolated between measured n: the cost model of
    :class:`specviz.core.costs.Costs` (:meth:`~specviz.core.costs.Costs.from_forward_curve`); without it that
    series is None.
    """
    ks = list(range(1, k_max + 1))
    tau = [expected_tokens_per_pass(alpha, k) for k in ks]
    paper = [predicted_speedup_paper(alpha, k, c) for k in ks]
    measured = None
    if verify_curve:
        costs = Costs.from_forward_curve(verify_curve, c)
        measured = [costs.speedup(expected, k) if costs.pass_ms(k) > 0 else float("nan")
                    for k, expected in zip(ks, tau)]
    return {"k": ks, "tokens_per_pass": tau, "paper": paper, "measured": measured, "alpha": alpha, "c": c}


def alpha_for_tokens_per_pass(tokens_per_pass: float, k: float) -> float:
    """The per-token acceptance alpha whose expected tokens per pass at draft length ``k`` is ``tokens_per_pass``
    (clamped to [1, k+1]); the inverse of :func:`~specviz.core.metrics.expected_tokens_per_pass` in alpha, by bisection.
    """
    if k <= 0:
        return 0.0
    if tokens_per_pass >= k + 1.0:
        return 1.0
    if tokens_per_pass <= 1.0:
        return 0.0
    goal, lo, hi = tokens_per_pass, 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens_per_pass(mid, k) < goal:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
