"""The arena's methods and result rows: a method (:class:`Variant`), one finished run (:class:`Measured`), the row
of a prompt x method (:func:`make_row`: additive counts, the figures derived from them, their spreads), pooled rows
per category and overall (:func:`pool`, :func:`summarize`), the result (:class:`ArenaResult`) and its CSV and JSON
exports. The figures' definitions: :data:`DEFINITIONS` and the docstring of :mod:`specviz.analysis.arena`, whose
loop (:func:`~specviz.analysis.arena.iter_arena`) fills these rows.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from specviz.analysis.arena_intervals import alpha_ends, tokens_per_pass_spread
from specviz.analysis.prompts import Prompt
from specviz.core.costs import expected_tokens_per_pass, predicted_speedup_measured, predicted_speedup_paper
from specviz.core.counters import Counters, decode_speedup, speedup
from specviz.core.engine import GenerationConfig
from specviz.drafters.heads import DEFAULT_TREE_NODES
from specviz.drafters.registry import HEAD_KEYS
from specviz.measure.run_stats import RunStats
from specviz.measure.stats import bootstrap_mean


AUTO = "auto"
AUTO_K_START = 4  # k = auto (cost-aware) starts here (as in the CLI)
BASELINE = "none"
WARMUP_TOKENS = 8
TREE_SUFFIX = "tree"  # "eagle:tree" / "medusa:tree": the head drafter with a tree of TREE_NODES (as the bench)
TREE_DRAFTERS = HEAD_KEYS
TREE_NODES = DEFAULT_TREE_NODES


DEFINITIONS = {
    "tokens_per_pass": "tokens after the prefill / target passes after it (bonus included; 1.0 = standard decoding)",
    "acceptance_rate": "accepted / drafted (bonus excluded)",
    "alpha": "per-token acceptance: accepted / (accepted + rejections); only judged positions count",
    "m": ("mean tokens of the chain a pass offered the target (k in the formulas): a chain drafter's drafted "
          "tokens per pass, lookahead's kept candidate"),
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
    "predicted_speedup_paper_low": ("the paper's prediction at alpha_low and c_high (its parts' unfavourable ends; "
                                    "alpha_low: the low end of alpha's 95% interval over the row's passes, the "
                                    "table's alpha cell)"),
    "predicted_speedup_paper_high": "the paper's prediction at alpha_high and c_low",
    "predicted_speedup_measured_low": ("E[tokens per pass](alpha_low, m) x T_step_low / (T_verify_high + "
                                       "T_draft_high)"),
    "predicted_speedup_measured_high": "E[tokens per pass](alpha_high, m) x T_step_high / (T_verify_low + T_draft_low)",
    "tokens_per_pass_low": ("low end of the 95% bootstrap interval of tokens per pass, the mean of the tokens each "
                            "pass emitted (resampling the row's passes, pass_tokens; a pooled row: all its prompts' "
                            "passes), as the Live tab's card; empty for the baseline (one per pass) and with one pass"),
    "tokens_per_pass_high": "high end of that interval (see tokens_per_pass_low)",
    "expected_tokens_per_pass_low": ("E[tokens per pass](alpha_low, m): the expected tokens per pass at the low end "
                                     "of alpha's 95% interval over the row's passes; empty where alpha has none"),
    "expected_tokens_per_pass_high": "E[tokens per pass](alpha_high, m) (see expected_tokens_per_pass_low)",
    "pass_drafted": ("per target pass after the prefill, in order: the drafted tokens it counted (a pooled row: its "
                     "rows' passes one after another); what the acceptance rate's and alpha's intervals resample"),
    "pass_accepted": "per pass (as pass_drafted): the drafted tokens it accepted",
    "pass_rejections": "per pass (as pass_drafted): 1 where the target rejected a drafted token, else 0",
    "pass_tokens": "per pass (as pass_drafted): the tokens it emitted, bonus included; what tokens per pass resamples",
    "pooling": "category and overall rows add their rows' counts and times, then divide",
}

PASS_COUNTS = ("pass_drafted", "pass_accepted", "pass_rejections", "pass_tokens")
"""The per-pass counts a method's row keeps (lists, one entry per pass after the prefill; None where they are not
known: the baseline's row, counters pooled without passes, a row saved before they were kept). The counted shares'
intervals and tokens per pass's resample these passes whole (:mod:`specviz.analysis.arena_intervals`): after a
rejection the rest of a pass's draft is rejected too, so its tokens are not independent trials. JSON only (the CSV
has one cell per figure)."""

CSV_COLUMNS = (
    "level", "category", "prompt_id", "drafter", "k", "prompts", "runs", "tokens", "passes", "drafted", "accepted",
    "rejections", "tree_passes", "tokens_per_pass", "tokens_per_pass_low", "tokens_per_pass_high", "acceptance_rate",
    "alpha", "m", "expected_tokens_per_pass", "expected_tokens_per_pass_low", "expected_tokens_per_pass_high",
    "tokens_per_s",
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
    """The spread of a method's two ratios (:func:`~specviz.core.counters.speedup` end to end,
    :func:`~specviz.core.counters.decode_speedup` after the prefill) over baseline runs (the arena gives every one
    of its prompt). Two noises, both read off those runs: the baselines' (its rate over each of them taken alone,
    lowest and highest), and its own run's, which ran once, so may be off by as much as one baseline run lies from
    their pooled rate (each run's ratio over the pool, lowest and highest). The ends multiply: low = lowest ratio x
    the slowest run's share, high = highest x the fastest run's, so high / low = (1 + :func:`baseline_drift`)^2 and
    the ratio against any one of them (or any pair pooled) lies inside. A trial read "0.96× the speed, slower
    (0.94–0.98×)" on baselines 5% apart: a method's one run can be off as much.

    Returns:
        ``{"speedup_low", "speedup_high", "decode_speedup_low", "decode_speedup_high"}`` (plain ratios); a pair is
        None when fewer than two baseline runs give a ratio (one run tells no spread).
    """
    out: dict = {}
    pooled = pool_runs(baselines) if baselines else None
    for key, ratio in (("speedup", speedup), ("decode_speedup", decode_speedup)):
        values = [v for v in (ratio(run.stats, b.stats) for b in baselines) if v is not None]
        own = [v for v in (ratio(b.stats, pooled.stats) for b in baselines) if v is not None]
        low, high = None, None
        if len(values) >= 2 and len(own) >= 2:
            low, high = min(values) * min(own), max(values) * max(own)
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
        :data:`PASS_SPREAD_FIGURES`, the interval of the mean per pass of a :class:`~specviz.measure.run_stats.RunStats`
        (:func:`~specviz.measure.stats.bootstrap_mean` over its passes; None for pooled counters, which keep no
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


def expected_spread(expected: float | None, alpha: tuple[float, float] | None, m: float | None) -> dict:
    """``{"expected_tokens_per_pass_low", "expected_tokens_per_pass_high"}``: E[tokens per pass](α, m) at the ends of
    α's 95% interval (``alpha``, (low, high) from :func:`~specviz.analysis.arena_intervals.alpha_ends`; the formula
    rises with α); both None where the row has no expectation (``expected`` None: a tree, the baseline) or α no
    spread. E.g. α 0.50 (0.40–0.60), m 4: 1.94 (1.65–2.31)."""
    if expected is None or alpha is None or not m or not alpha[0] < alpha[1]:
        return {"expected_tokens_per_pass_low": None, "expected_tokens_per_pass_high": None}
    return {"expected_tokens_per_pass_low": expected_tokens_per_pass(alpha[0], m),
            "expected_tokens_per_pass_high": expected_tokens_per_pass(alpha[1], m)}


def derived_spread(row: dict) -> dict:
    """The spread c and the two predictions inherit from their parts: T_step, T_verify and T_draft (their spreads),
    and for the predictions α's 95% interval too (:func:`~specviz.analysis.arena_intervals.alpha_ends`: the table's
    α cell; m is a count, with none). Each end is computed from the ends of the parts that push it furthest that
    way, a part without a spread taken at its value. c = T_draft / (m T_step); the paper's prediction,
    E[tokens per pass](α, m) / (c m + 1), rises with α and falls as c grows; the measured-cost prediction,
    E[tokens per pass](α, m) x T_step / (T_verify + T_draft), rises with α and T_step. E.g. α 0.88 (0.62–1.00), m 4
    and c 0.0020 (0.0019–0.0021): paper 3.90, its range 2.37–4.96 (the timings alone: 3.90–3.91).

    Returns:
        ``{"c_low", "c_high", "predicted_speedup_paper_low", ..., "predicted_speedup_measured_high"}`` (c a plain
        ratio, the predictions × standard decoding) and :func:`expected_spread`'s pair; a pair is None where the
        figure is (a tree, the baseline) or none of its parts has a spread.
    """
    out = dict.fromkeys(f"{k}_{end}" for k in DERIVED_SPREAD_FIGURES for end in ("low", "high"))
    m, alpha = row.get("m"), alpha_ends(row)
    out |= expected_spread(row.get("expected_tokens_per_pass"), alpha, m)
    step, verify, draft = _ends(row, "t_step_ms"), _ends(row, "t_verify_ms"), _ends(row, "t_draft_ms")
    alpha_spread = alpha is not None and alpha[0] < alpha[1]
    c = None
    if row.get("c") is not None and m and step and draft and step[0] > 0:
        c = draft[0] / (m * step[1]), draft[1] / (m * step[0])
        if _has_spread(row, "t_step_ms", "t_draft_ms"):
            out["c_low"], out["c_high"] = c
    if row.get("predicted_speedup_paper") is not None and alpha and c and (alpha_spread or out["c_low"] is not None):
        out["predicted_speedup_paper_low"] = predicted_speedup_paper(alpha[0], m, c[1])
        out["predicted_speedup_paper_high"] = predicted_speedup_paper(alpha[1], m, c[0])
    if (row.get("predicted_speedup_measured") is not None and alpha and m is not None and step and verify
            and (alpha_spread or _has_spread(row, "t_step_ms", "t_verify_ms", "t_draft_ms"))):
        draft = draft or (0.0, 0.0)
        low = predicted_speedup_measured(alpha[0], m, step[0], verify[1], draft[1])
        high = predicted_speedup_measured(alpha[1], m, step[1], verify[0], draft[0])
        if low == low and high == high:  # not NaN (a pass of no time)
            out["predicted_speedup_measured_low"], out["predicted_speedup_measured_high"] = low, high
    return out


def pass_counts(stats) -> dict:
    """:data:`PASS_COUNTS` of one run's statistics: copies of a :class:`~specviz.measure.run_stats.RunStats`'s
    per-pass lists; None for each with counters that keep no passes (pooled runs, the baseline's row)."""
    if not isinstance(stats, RunStats):
        return dict.fromkeys(PASS_COUNTS)
    return {key: list(getattr(stats, key)) for key in PASS_COUNTS}


def _pooled_pass_counts(rows: list[dict]) -> dict:
    """:data:`PASS_COUNTS` of a pooled row: its rows' passes one after another; None for each list that not every
    row has (a pooled interval over some of its passes would claim more than was counted)."""
    return {key: [n for r in rows for n in r[key]] if rows and all(r.get(key) is not None for r in rows) else None
            for key in PASS_COUNTS}


def _counts(run: Measured, base: Measured, greedy: bool, drift: float | None = None,
            beside: Sequence[Measured] = (), own: Sequence[Measured] = (),
            standard: Sequence[Measured] = ()) -> dict:
    """The additive quantities of a method's run(s) and the baseline runs timed beside them (what pooling sums),
    ``baseline_drift`` (:func:`baseline_drift` of those baselines; pooled rows keep their largest), the ratios'
    spread over ``standard`` (every baseline run of the prompt; ``beside`` when not given), the baseline runs taken
    one by one (:func:`speedup_spread`; None without them), the timed figures' spread (:func:`timed_spread`: over
    ``beside``, or over ``own``, the runs pooled in ``run``, for the baseline's row, which has no runs beside it)
    and the run's :data:`PASS_COUNTS` (:func:`pass_counts`)."""
    s, b = run.stats, base.stats
    spread_over = standard or beside
    spread = speedup_spread(run, spread_over) if spread_over else dict.fromkeys(SPREAD_KEYS)
    return {
        **spread, **timed_spread(run, beside or own, own), **pass_counts(s),
        "prompts": 1, "runs": s.runs, "tokens": s.generated, "passes": s.passes, "emitted_after_prefill": s.emitted,
        "drafted": s.drafted, "accepted": s.accepted, "rejections": s.rejections, "tree_passes": run.tree_passes,
        "chained": s.chained,
        "elapsed_ms": s.elapsed_ms, "ttft_ms": s.prefill_ms, "draft_ms": s.draft_ms, "verify_ms": s.verify_ms,
        "baseline_runs": b.runs, "baseline_tokens": b.generated, "baseline_elapsed_ms": b.elapsed_ms,
        "baseline_ttft_ms": b.prefill_ms, "baseline_verify_ms": b.verify_ms, "baseline_passes": b.passes,
        "baseline_emitted_after_prefill": b.emitted, "baseline_drift": drift,
        "ids_identical": (run.token_ids == base.token_ids) if greedy and run is not base else None,
    }


_ADDITIVE = ("prompts", "runs", "baseline_runs", "tokens", "passes", "emitted_after_prefill", "drafted", "accepted",
             "rejections", "tree_passes", "chained",
             "elapsed_ms", "ttft_ms", "draft_ms", "verify_ms", "baseline_tokens", "baseline_elapsed_ms",
             "baseline_ttft_ms", "baseline_verify_ms", "baseline_passes", "baseline_emitted_after_prefill")


def _as_counters(c: dict, prefix: str = "") -> Counters:
    """The :class:`~specviz.core.counters.Counters` of a row's additive counts (``prefix`` "baseline_" for its
    baseline's); a row stores elapsed time, so "other" is what is left of it after prefill, draft and verify."""
    def get(key: str, default=0):
        return c.get(prefix + key, default)

    draft_ms = get("draft_ms") if not prefix else 0.0
    return Counters(
        runs=c["prompts"], passes=get("passes"), emitted=get("emitted_after_prefill"), generated=get("tokens"),
        drafted=get("drafted") if not prefix else 0, accepted=get("accepted") if not prefix else 0,
        rejections=get("rejections") if not prefix else 0, tree_passes=get("tree_passes") if not prefix else 0,
        chained=get("chained", None) if not prefix else 0,  # None (a row saved before it was kept): drafted
        prefill_ms=get("ttft_ms"), draft_ms=draft_ms, verify_ms=get("verify_ms"),
        other_ms=get("elapsed_ms") - get("ttft_ms") - draft_ms - get("verify_ms"))


def derive(counts: dict, baseline: bool) -> dict:
    """The figures of :data:`DEFINITIONS` from additive counts (one run, or pooled rows), all computed by
    :mod:`specviz.core.counters` from the counters."""
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
    out.update(acceptance_rate=spec.acceptance_rate, alpha=spec.alpha, m=spec.mean_chain if spec.passes else None,
               t_verify_ms=spec.forward_ms, t_draft_ms=spec.draft_ms_per_pass)
    if spec.tree_passes:  # the chain formulas below do not describe a tree
        return out
    alpha, m, per_pass = out["alpha"], out["m"], spec.draft_ms_per_pass
    out["c"] = per_pass / (m * t_step) if per_pass is not None and m and t_step else None  # per chain token
    if alpha is not None and m is not None:
        out["expected_tokens_per_pass"] = spec.expected_tokens_per_pass
        if out["c"] is not None:
            out["predicted_speedup_paper"] = predicted_speedup_paper(alpha, m, out["c"])
        if t_step and out["t_verify_ms"] is not None:
            out["predicted_speedup_measured"] = predicted_speedup_measured(
                alpha, m, t_step, out["t_verify_ms"], out["t_draft_ms"] or 0.0)
    return out


def make_row(level: str, category: str, prompt_id: str, variant: Variant, counts: dict) -> dict:
    """A result row: identity, additive counts, derived figures, tokens per pass's 95% interval over the passes in
    ``counts`` (:func:`~specviz.analysis.arena_intervals.tokens_per_pass_spread`) and the spread c and the
    predictions inherit from the timed figures' spread in ``counts`` and α's interval (:func:`derived_spread`)."""
    row = {"level": level, "category": category, "prompt_id": prompt_id, "drafter": variant.drafter,
           "k": variant.k_label, "variant": variant.label, **counts, **derive(counts, variant.drafter == BASELINE)}
    row |= tokens_per_pass_spread(row)
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
    """One pooled row of ``rows`` (all of ``variant``): counts summed, then the figures derived, and the rows' per-pass
    counts one after another (:func:`_pooled_pass_counts`, over which tokens per pass and α get their intervals);
    the speedups' spread is the lowest and highest over the rows (widened to hold the pooled ratio itself), so is
    that of the runs' and passes' timed figures (:func:`_pooled_span`), and c and the predictions inherit theirs
    from those and α's (:func:`derived_spread`)."""
    counts = {key: sum(r[key] for r in rows) for key in _ADDITIVE} | _pooled_pass_counts(rows)
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
