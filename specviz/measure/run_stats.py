"""One run's statistics as the live views draw them: its :class:`~specviz.core.counters.Counters` (the counts of
committed work and every figure derived from them), its per-pass series (the charts) and the spreads of its timed
figures over its passes (:mod:`specviz.measure.stats`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specviz.core.counters import _LISTS, _SCALARS, Counters
from specviz.core.events import PassEvent
from specviz.measure.stats import (MIN_JUDGED_PASSES, Interval, _times, bootstrap_ratio_of_sums,
                                   pass_share_interval, tokens_per_pass_interval, wilson_interval)


@dataclass
class RunStats(Counters):
    """One run's :class:`Counters` plus what its live charts draw (call :meth:`add` for each event in order).

    Attributes (beyond the counters): ``run`` ("speculative" / "baseline"), ``finish_reason``, ``max_k``, and per
    pass after the prefill: ``pass_acceptance`` (committed accepted / counted drafted, None without a draft),
    ``pass_tokens``, ``pass_k``, ``pass_drafted``, ``pass_accepted``, ``pass_rejections``, ``pass_gain`` (k = auto's expected gain of
    the pass's k over a plain step, else None); per event (prefill included): ``curve_ms``
    (the run's clock, ms) and ``curve_tokens`` (tokens so far); ``pass_ms``: each pass's own-clock time (draft +
    verify + other, ms), what :func:`judge_decode_speedup` resamples; ``pass_verify_ms`` / ``pass_draft_ms``: each
    pass's target forward and drafting time (ms), whose mean the arena shows as T_verify and T_draft, with its
    interval (:func:`bootstrap_mean`); ``pass_k_asked``: the draft length the schedule asked for each pass (the
    event before it's ``next_k``; None where not known: the first pass, the baseline), so a pass whose ``pass_k``
    is below it had its k cut by the output budget (max new tokens: :meth:`k_cut_by_budget`).

    The running figures, one per pass after the prefill: the :class:`Counters` figure of the passes so far, read from
    the same properties the cards show, so a chart's last point is the card's figure exactly: ``running_acceptance``
    (:attr:`acceptance_rate`), ``running_alpha`` (:attr:`alpha`), ``running_tokens_per_pass``
    (:attr:`tokens_per_pass`), ``running_expected`` (:attr:`expected_tokens_per_pass`); None where the figure is
    not defined yet (nothing drafted or judged).
    """

    run: str = ""
    finish_reason: str | None = None
    max_k: int = 0
    pass_acceptance: list[float | None] = field(default_factory=list)
    pass_tokens: list[int] = field(default_factory=list)
    pass_k: list[int] = field(default_factory=list)
    pass_drafted: list[int] = field(default_factory=list)
    pass_accepted: list[int] = field(default_factory=list)
    pass_rejections: list[int] = field(default_factory=list)  # per pass: 1 when the target refused a draft, else 0
    pass_gain: list[float | None] = field(default_factory=list)
    curve_ms: list[float] = field(default_factory=list)
    curve_tokens: list[int] = field(default_factory=list)
    pass_ms: list[float] = field(default_factory=list)  # per pass after the prefill: its own-clock time (ms)
    pass_verify_ms: list[float] = field(default_factory=list)  # per pass: its target forward (ms)
    pass_draft_ms: list[float] = field(default_factory=list)  # per pass: its drafting (ms)
    pass_k_asked: list[int | None] = field(default_factory=list)  # per pass: k before the budget's cut (None: unknown)
    running_acceptance: list[float | None] = field(default_factory=list)  # per pass: acceptance_rate so far
    running_alpha: list[float | None] = field(default_factory=list)  # per pass: alpha so far
    running_tokens_per_pass: list[float | None] = field(default_factory=list)  # per pass: tokens_per_pass so far
    running_expected: list[float | None] = field(default_factory=list)  # per pass: expected_tokens_per_pass so far
    _next_k: int | None = field(default=None, repr=False, compare=False)  # the latest event's next_k

    def add(self, event: PassEvent) -> None:
        """Fold one event into the counters and the chart series."""
        super().add(event)
        self.run = event.run
        self.curve_ms.append(event.t_end_ms)
        self.curve_tokens.append(event.num_generated)
        self.finish_reason = event.finish_reason or self.finish_reason
        asked, self._next_k = self._next_k, event.next_k
        if event.kind == "prefill":
            return
        self.pass_k_asked.append(asked)
        drafted, accepted = event.counted_drafted, event.committed_accepted
        self.max_k = max(self.max_k, event.k)
        self.pass_acceptance.append(accepted / drafted if drafted else None)
        self.pass_tokens.append(len(event.emitted_ids))
        self.pass_k.append(event.k)
        self.pass_drafted.append(drafted)
        self.pass_accepted.append(accepted)
        self.pass_rejections.append(event.num_rejections)
        self.pass_gain.append(event.expected_gain)
        self.pass_ms.append(event.timings.total_ms)
        self.pass_verify_ms.append(event.timings.verify_ms)
        self.pass_draft_ms.append(event.timings.draft_ms)
        self.running_acceptance.append(self.acceptance_rate)
        self.running_alpha.append(self.alpha)
        self.running_tokens_per_pass.append(self.tokens_per_pass)
        self.running_expected.append(self.expected_tokens_per_pass)

    def k_cut_by_budget(self, first_asked: int | None = None) -> list[bool]:
        """Per pass after the prefill: whether its k (``pass_k``) is below the k its schedule asked for
        (``pass_k_asked``), which only the output budget does (the engine drafts at most max new tokens − tokens so
        far − 1; the drafter proposing fewer tokens leaves k alone). ``first_asked``: the k asked for a pass whose
        request is unknown (the first pass: the run's configured k; None: not flagged)."""
        return [asked is not None and k < asked
                for k, asked in zip(self.pass_k, (a if a is not None else first_asked for a in self.pass_k_asked))]

    @property
    def counters(self) -> Counters:
        """The additive part alone (for pooling with ``+``)."""
        return Counters(**{name: getattr(self, name) for name in _SCALARS + _LISTS})

    def decode_rate(self) -> Interval | None:
        """:attr:`decode_tokens_per_s` (tokens/s after the prefill) with its 95% bootstrap interval over this run's
        passes (:func:`bootstrap_ratio_of_sums` of tokens and ms per pass); None with fewer than two passes (a
        single pass has no spread: show the rate as one sample)."""
        return _times(bootstrap_ratio_of_sums(self.pass_tokens, self.pass_ms), 1000.0)

    def rate(self) -> Interval | None:
        """:attr:`tokens_per_s` (prefill included) with the interval of :meth:`decode_rate`'s draws, the prefill (one
        measurement: the first token and its time) added to each draw as measured; None with fewer than two
        passes."""
        fixed = (self.generated - self.emitted, self.prefill_ms)
        return _times(bootstrap_ratio_of_sums(self.pass_tokens, self.pass_ms, fixed=fixed), 1000.0)

    def acceptance_interval(self) -> Interval | None:
        """:attr:`acceptance_rate` (accepted / drafted, in [0, 1]) with its 95% interval over this run's passes
        (:func:`~specviz.measure.stats.pass_share_interval` of accepted and drafted per pass); None with fewer than
        two passes that drafted."""
        return pass_share_interval(self.pass_accepted, self.pass_drafted)

    def alpha_interval(self) -> Interval | None:
        """:attr:`alpha` (accepted / (accepted + rejections)) with its 95% interval over this run's passes (as
        :meth:`acceptance_interval`, out of the positions each pass's target judged); None with fewer than two
        passes that judged a draft."""
        judged = [a + r for a, r in zip(self.pass_accepted, self.pass_rejections)]
        return pass_share_interval(self.pass_accepted, judged)

    def position_intervals(self) -> list[Interval | None]:
        """:attr:`per_position_acceptance` with each position's 95% Wilson interval
        (:func:`~specviz.measure.stats.wilson_interval`): for position i = 1..max drafted, accepted at i out of the
        passes whose target judged i (``position_accepted`` / ``position_tried``; a pass judges a position at most
        once, so the passes are its trials). None at a position no pass judged (its bar reads 0.0)."""
        return [wilson_interval(a, t) for a, t in zip(self.position_accepted, self.position_tried)]

    def tokens_per_pass_interval(self) -> Interval | None:
        """:attr:`tokens_per_pass` (emitted / passes, bonus included) with its 95% percentile-bootstrap interval
        over this run's passes (:func:`~specviz.measure.stats.tokens_per_pass_interval`: the bootstrap of the mean
        of the tokens each pass emitted, as the Arena's rows); None with fewer than two passes."""
        return tokens_per_pass_interval(self.pass_tokens)

    @property
    def too_few_passes(self) -> bool:
        """Fewer passes after the prefill than :data:`~specviz.measure.stats.MIN_JUDGED_PASSES`: a figure counted
        over them (acceptance, tokens per pass) is too noisy to tell, whatever its interval says."""
        return self.passes < MIN_JUDGED_PASSES

    def share(self, part: str) -> Interval | None:
        """The share of ``part`` ("verify", "draft" or "other") in the time after the prefill, in [0, 1], with its
        bootstrap interval over the passes (:func:`bootstrap_ratio_of_sums` of the part's and the pass's ms);
        None with fewer than two passes.

        Raises:
            ValueError: an unknown ``part``."""
        if part == "verify":
            parts = self.pass_verify_ms
        elif part == "draft":
            parts = self.pass_draft_ms
        elif part == "other":
            parts = [max(0.0, t - v - d) for t, v, d in zip(self.pass_ms, self.pass_verify_ms, self.pass_draft_ms)]
        else:
            raise ValueError(f"part must be verify, draft or other, got {part!r}")
        return bootstrap_ratio_of_sums(parts, self.pass_ms)

    # names kept from the live view's first version
    @property
    def ttft_ms(self) -> float:
        """Time to first token (ms): the prefill."""
        return self.prefill_ms

    @property
    def emitted_after_prefill(self) -> int:
        """Tokens emitted by the passes after the prefill (== ``emitted``)."""
        return self.emitted
