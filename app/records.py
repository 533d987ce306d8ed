"""Typed records the tabs share (a tab never imports another tab, :file:`.importlinter`): what one Live run leaves
in the session's history (:class:`RunSummary`), read by the Live tab's history table and by the "Why it works"
tab, which marks the newest run on its what-if chart."""

from __future__ import annotations

from dataclasses import dataclass

NO_INTERVAL = ()
"""A rate's interval in a row that keeps none (shown as the rate alone); None is a one-pass run's (no spread)."""


@dataclass(frozen=True)
class RunSummary:
    """One row of the Live tab's run history (newest first in ``gr.State``; frozen, so Gradio's change check hashes
    it by value).

    Attributes:
        drafter: the drafter's name as its pane shows it ("n-gram", "lookahead (W=3, N=3, G=2)"), "none" for
            standard decoding alone.
        drafter_key: the drafter's registry key ("eagle", "distilled", :attr:`app.inputs.Settings.drafter`; "none"
            for standard decoding alone): what the k cell's confidence gate is, the heads' or a draft model's
            (:func:`app.render.history.gate_title`).
        k: how the run drafts, in words for the k column ("k = 4 (adaptive) · tree of 10 nodes, depth ≤ k", ""
            without a drafter).
        k_value: the run's configured draft length k (lookahead: N−1), None without a drafter.
        k_schedule: "fixed", "heuristic" (adaptive k) or "auto" (:data:`app.inputs.K_SCHEDULES`); "" without a
            drafter.
        lookahead: lookahead's (W, N, G) — window, n-gram size, candidates per pass — or None for other drafters.
        alpha: the measured per-token acceptance α of the speculative run (None without a drafter).
        temperature: the sampling temperature (0 = greedy).
        seed: the sampling seed (None for a greedy run: it needs none to be repeated).
        tokens: tokens the run made (the speculative run's; the baseline's without a drafter).
        acceptance: accepted ÷ drafted tokens (None without a drafter).
        tokens_per_pass: emitted tokens ÷ target passes, bonus included (None without a drafter).
        acceptance_spread, tokens_per_pass_spread: each figure's spread as its Live card words it
            (:func:`app.render.stats.counted_spread` of the run's passes): "44–88%", "1.60–2.20", "one pass: no
            spread", "3 passes: too few to tell", "55–70%; 5 passes: too few to tell"; "" in a row that keeps none
            (shown as the figure alone) and without a drafter.
        tokens_per_pass_interval: the (low, high) 95% bootstrap interval of tokens per pass over the run's passes
            (:meth:`specviz.measure.run_stats.RunStats.tokens_per_pass_interval`; its Live card's "2.88
            (1.75–4.00)"); None for a run of fewer than two passes or without a drafter, :data:`NO_INTERVAL` in a
            row that keeps none. The Why tab draws it as the error bar of its ★.
        spec_tps, base_tps: decoding rates in tokens/s after the prefill (spec: None without a drafter).
        spec_tps_interval, base_tps_interval: each rate's (low, high) bootstrap interval over the passes; None for
            a run of one pass, :data:`NO_INTERVAL` in a row that keeps none.
        speedup: the judged decoding speedup (None when it could not be judged).
        speedup_interval: its (low, high) interval when judged.
        speedup_cut_at: the tokens per pass its interval's top was cut at
            (:attr:`specviz.measure.stats.SpeedupJudgement.cut_at`), None when it was not.
        speedup_note: why there is no speedup ("too short", "too noisy"), else None.
        speedup_measured: a too-noisy run's measured ratio, kept for the table's muted figure.
        speedup_reason: why it is too noisy, in a few words ("0.85–1.40× spans 1").
        identical: whether both runs made the same ids (greedy only; None when sampling).
        stopped: the visitor pressed Stop: the row holds what was made so far.
        cut_base_tokens: when Stop came after the run ``tokens`` counts had finished (the speculative run done, its
            baseline still going), the tokens the baseline had made when it was cut; None otherwise (``tokens``
            itself was cut, or nothing was stopped). A trial read "48 (stopped)" for a run that had made all 48.
        settings: the generation settings off their defaults, in words ("" when none).
        weights: the target's weight format ("float32", "bfloat16", "int8", "int4"; the Live tab's "Weights").
        busy_share: other programs' share of the CPUs during the runs (in [0, 1]) when it was above
            :data:`specviz.measure.machine.CONTENDED_SHARE` (a busy machine, which flatters speculation); else None.
    """

    drafter: str = "none"
    drafter_key: str = "none"
    k: str = ""
    k_value: int | None = None
    k_schedule: str = ""
    lookahead: tuple[int, int, int] | None = None
    alpha: float | None = None
    temperature: float = 0.0
    seed: int | None = None
    tokens: int = 0
    acceptance: float | None = None
    tokens_per_pass: float | None = None
    acceptance_spread: str = ""
    tokens_per_pass_spread: str = ""
    tokens_per_pass_interval: tuple[float, float] | None | tuple[()] = NO_INTERVAL
    spec_tps: float | None = None
    base_tps: float | None = None
    spec_tps_interval: tuple[float, float] | None | tuple[()] = NO_INTERVAL
    base_tps_interval: tuple[float, float] | None | tuple[()] = NO_INTERVAL
    speedup: float | None = None
    speedup_interval: tuple[float, float] | None = None
    speedup_cut_at: float | None = None
    speedup_note: str | None = None
    speedup_measured: float | None = None
    speedup_reason: str | None = None
    identical: bool | None = None
    stopped: bool = False
    cut_base_tokens: int | None = None
    settings: str = ""
    weights: str = "float32"
    busy_share: float | None = None

    @property
    def tokens_text(self) -> str:
        """The history's tokens cell: "48"; "30 (stopped)" where Stop cut the counted run; "48 (baseline stopped at
        30)" where the counted run had finished and Stop cut only its baseline."""
        if not self.stopped:
            return str(self.tokens)
        if self.cut_base_tokens is not None:
            return f"{self.tokens} (baseline stopped at {self.cut_base_tokens})"
        return f"{self.tokens} (stopped)"

    @property
    def adaptive(self) -> bool:
        """Adaptive k (the heuristic): k grew and shrank from ``k_value`` during the run (lookahead's k is N−1
        throughout)."""
        return self.k_schedule == "heuristic" and self.lookahead is None

    @property
    def start_k(self) -> int | None:
        """The k the run drafted with (its start, for adaptive k); None for standard decoding and for k = auto,
        whose passes each chose their own k (lookahead's k is N−1 whatever the schedule)."""
        if self.k_value is None or (self.k_schedule == "auto" and self.lookahead is None):
            return None
        return self.k_value
