"""Running statistics of a run, computed from its events. Every figure carries its definition.

Counters count committed work: drafts the verifier accepted after the run's end (EOS, a stop string or the budget
inside a pass) count neither as drafted nor as accepted (:attr:`PassEvent.counted_drafted`,
:attr:`PassEvent.committed_accepted`). A tree pass counts every node it verified as drafted, and its accepted path
as accepted.

- acceptance rate = accepted / drafted, in [0, 1]; the bonus token is not a draft, so it is excluded (a tree:
  accepted path tokens / nodes verified).
- tokens per pass (tau, mean accepted length) = emitted tokens / target passes, bonus included, in
  [1, k+1]; the prefill and its token are not counted (they are reported as time to first token).
- per-token acceptance alpha = accepted / (accepted + rejections): only positions the target judged count
  (tokens after a pass's first rejection were never judged).
- per-position acceptance i = P(draft token i accepted | tokens < i accepted), i = 1..k (conditional); the
  unconditional share accepted-at-position-i / passes is what vLLM exports (:attr:`RunStats.per_position_share`).
- expected tokens per pass E[tau] = (1 - alpha^(m+1)) / (1 - alpha), with m the mean proposed length
  (k+1 when alpha = 1) — Leviathan et al. 2023, eq. (1) (:func:`specviz.core.costs.expected_tokens_per_pass`, the
  one formula; the cost model and the predicted speedups are in :mod:`specviz.core.costs` too).
- the running figures a chart draws (:class:`RunStats` ``running_*``) are these properties after each pass: a
  chart's last point is the card's figure.
- speedup = speculative tokens/s over baseline tokens/s, both on their own clocks; the decoding speedup leaves
  the prefill out. Its spread: :func:`bootstrap_rate_ratio` (a percentile bootstrap over the passes of both runs)
  and :func:`judge_speedup` (faster or slower when the interval lies wholly above or below 1; the same or too
  noisy to tell when it spans 1; or too short to judge). A mean per pass
  (T_verify, T_draft) carries :func:`bootstrap_mean`'s interval over the passes; a run's decoding rate, its rate with
  the prefill and a part's share of its time carry :func:`bootstrap_ratio_of_sums`'s (:meth:`RunStats.decode_rate`,
  :meth:`RunStats.rate`, :meth:`RunStats.share`), the end-to-end ratio :func:`end_to_end_interval`'s. The prefill
  (time to first token) is one measurement per run: it has no spread of its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

# The cost model (expected tokens, T_verify, T_pass, predicted speedups) is written once, in specviz.core.costs;
# its names stay importable from here.
from specviz.core.costs import (Costs, end_to_end_speedup, expected_tokens, expected_tokens_per_pass,  # noqa: F401
                                predicted_speedup, predicted_speedup_measured, predicted_speedup_paper)
from specviz.core.events import PassEvent
from specviz.core.verdict import FASTER, NARROW, NOISY, SAME, SLOWER, Verdict, read_speedup


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _add_lists(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    return tuple((a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n))


@dataclass
class Counters:
    """The additive counts of one run or many (prompts, repeats): ``a + b`` merges them, and every figure is
    derived from the counts, so a pooled figure is the ratio of sums, never a mean of ratios. Times in ms on the
    runs' own clocks.

    Attributes:
        runs: runs counted.
        passes: target passes after the prefill; ``emitted``: tokens those passes emitted (bonus included);
            ``generated``: every output token (the prefill's included).
        drafted / accepted / rejections: committed work (see the module docstring); a tree pass counts its
            verified nodes as drafted (``tree_passes``, ``tree_nodes``); a lookahead pass its candidates' tokens
            (its window's tokens, not verified, in ``window_tokens``).
        prefill_ms: time to first token; draft_ms / verify_ms / other_ms: the passes' split of their time.
        position_tried / position_accepted: per drafted position i (index i-1): passes that judged it (drafted it
            with positions before it accepted) and passes that accepted it.
        position_reached: per position i: passes that *asked* for at least i tokens with positions before it
            accepted (a position the drafter did not fill counts as reached and not accepted: the what-if of k).
    """

    runs: int = 0
    passes: int = 0
    emitted: int = 0
    generated: int = 0
    drafted: int = 0
    accepted: int = 0
    rejections: int = 0
    tree_passes: int = 0
    tree_nodes: int = 0
    window_tokens: int = 0
    prefill_ms: float = 0.0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    other_ms: float = 0.0
    position_tried: tuple[int, ...] = ()
    position_accepted: tuple[int, ...] = ()
    position_reached: tuple[int, ...] = ()

    def __add__(self, other: Counters) -> Counters:
        sums = {name: getattr(self, name) + getattr(other, name) for name in _SCALARS}
        lists = {name: _add_lists(getattr(self, name), getattr(other, name)) for name in _LISTS}
        return Counters(**sums, **lists)

    @classmethod
    def of(cls, events) -> Counters:
        """The counters of one run's events."""
        counters = cls()
        for event in events:
            counters.add(event)
        return counters

    def add(self, event: PassEvent) -> None:
        """Fold one event in (the prefill starts a run)."""
        if event.kind == "prefill":
            self.runs += 1
            self.generated += len(event.emitted_ids)
            self.prefill_ms += event.timings.total_ms
            return
        accepted, rejections = event.committed_accepted, event.num_rejections
        self.passes += 1
        self.emitted += len(event.emitted_ids)
        self.generated += len(event.emitted_ids)
        self.drafted += event.counted_drafted
        self.accepted += accepted
        self.rejections += rejections
        if event.tree is not None:
            self.tree_passes += 1
            self.tree_nodes += event.tree.num_nodes
        if event.lookahead is not None:
            self.window_tokens += event.lookahead.window_tokens
        self.draft_ms += event.timings.draft_ms
        self.verify_ms += event.timings.verify_ms
        self.other_ms += event.timings.other_ms
        shown = accepted if event.cut_in_drafts else event.num_drafted
        asked = accepted if event.cut_in_drafts else event.k
        tried = [1 if i < accepted + rejections else 0 for i in range(shown)]
        self.position_tried = _add_lists(self.position_tried, tuple(tried))
        self.position_accepted = _add_lists(self.position_accepted, tuple(1 if i < accepted else 0
                                                                            for i in range(shown)))
        self.position_reached = _add_lists(self.position_reached, tuple(1 if i <= accepted else 0
                                                                          for i in range(asked)))

    # ---------------------------------------------------------------------------------------- derived figures
    @property
    def elapsed_ms(self) -> float:
        """Own-clock time of the runs, prefill included (ms)."""
        return self.prefill_ms + self.draft_ms + self.verify_ms + self.other_ms

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / drafted in [0, 1]; None when nothing was drafted (standard decoding)."""
        return _ratio(self.accepted, self.drafted)

    @property
    def alpha(self) -> float | None:
        """Per-token acceptance accepted / (accepted + rejections); None when nothing was judged."""
        return _ratio(self.accepted, self.accepted + self.rejections)

    @property
    def tokens_per_pass(self) -> float | None:
        """Emitted tokens / target passes (bonus included, prefill excluded); None before the first pass."""
        return _ratio(self.emitted, self.passes)

    @property
    def mean_proposed(self) -> float:
        """Mean number of tokens drafted per pass (m)."""
        return self.drafted / self.passes if self.passes else 0.0

    @property
    def expected_tokens_per_pass(self) -> float | None:
        """(1 - alpha^(m+1)) / (1 - alpha) with m the mean proposed length; None without alpha."""
        a = self.alpha
        return None if a is None else expected_tokens_per_pass(a, self.mean_proposed)

    @property
    def per_position_acceptance(self) -> list[float]:
        """P(draft token i accepted | tokens before i accepted) for i = 1..max drafted (0.0 where never judged)."""
        return [a / t if t else 0.0 for a, t in zip(self.position_accepted, self.position_tried)]

    @property
    def per_position_share(self) -> list[float]:
        """Accepted at position i / target passes, i = 1..max drafted (unconditional; vLLM's per-position figure)."""
        return [a / self.passes for a in self.position_accepted] if self.passes else []

    @property
    def per_position_reached(self) -> list[float]:
        """Accepted at position i / passes that asked for i with the positions before it accepted (an unfilled
        position counts as not accepted): the rates a_i of the what-if of k (:func:`expected_tokens`)."""
        accepted = list(self.position_accepted) + [0] * max(0, len(self.position_reached) - len(self.position_accepted))
        return [a / r if r else 0.0 for a, r in zip(accepted, self.position_reached)]

    @property
    def mean_nodes_per_tree(self) -> float | None:
        """Nodes verified per tree pass (None without tree passes)."""
        return _ratio(self.tree_nodes, self.tree_passes)

    @property
    def tokens_per_s(self) -> float | None:
        """Generated tokens / elapsed seconds (prefill included), on the runs' own clocks."""
        return _ratio(self.generated * 1000.0, self.elapsed_ms)

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first / time after the prefill (tokens/s): the steady decoding rate."""
        return _ratio(self.emitted * 1000.0, self.elapsed_ms - self.prefill_ms)

    @property
    def forward_ms(self) -> float | None:
        """Mean target forward per pass (ms): for standard decoding, one step's forward T_step."""
        return _ratio(self.verify_ms, self.passes)

    @property
    def draft_ms_per_pass(self) -> float | None:
        """Mean drafting time per pass (ms)."""
        return _ratio(self.draft_ms, self.passes)

    def draft_cost(self, step_ms: float | None) -> float | None:
        """c: drafting time per drafted token over one target step ``step_ms`` (dimensionless)."""
        per_token = _ratio(self.draft_ms, self.drafted)
        return per_token / step_ms if per_token is not None and step_ms else None

    def as_dict(self) -> dict:
        """The figures as plain JSON-able values."""
        return {
            "target_passes": self.passes,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance_rate": self.acceptance_rate,
            "alpha": self.alpha,
            "tokens_per_pass": self.tokens_per_pass,
            "expected_tokens_per_pass": self.expected_tokens_per_pass,
            "per_position_acceptance": self.per_position_acceptance,
            "per_position_share": self.per_position_share,
            "tree_passes": self.tree_passes,
            "tree_nodes_verified": self.tree_nodes,
            "lookahead_window_tokens": self.window_tokens,
            "ttft_ms": self.prefill_ms,
            "draft_ms": self.draft_ms,
            "verify_ms": self.verify_ms,
            "other_ms": self.other_ms,
            "tokens_per_s": self.tokens_per_s,
        }


_SCALARS = ("runs", "passes", "emitted", "generated", "drafted", "accepted", "rejections", "tree_passes",
            "tree_nodes", "window_tokens", "prefill_ms", "draft_ms", "verify_ms", "other_ms")
_LISTS = ("position_tried", "position_accepted", "position_reached")


@dataclass
class RunStats(Counters):
    """One run's :class:`Counters` plus what its live charts draw (call :meth:`add` for each event in order).

    Attributes (beyond the counters): ``run`` ("speculative" / "baseline"), ``finish_reason``, ``max_k``, and per
    pass after the prefill: ``pass_acceptance`` (committed accepted / counted drafted, None without a draft),
    ``pass_tokens``, ``pass_k``, ``pass_drafted``, ``pass_accepted``, ``pass_gain`` (k = auto's expected gain of
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


def speedup(spec: Counters, base: Counters) -> float | None:
    """Speculative tokens/s over baseline tokens/s (same target and settings), prefill included.

    None if either is unknown, or if the speculative run made no target pass after its prefill (a one-token
    run has nothing to speed up; its ratio would only compare two prefills)."""
    a, b = spec.tokens_per_s, base.tokens_per_s
    return a / b if a and b and spec.passes > 0 else None


def decode_speedup(spec: Counters, base: Counters) -> float | None:
    """Speculative over baseline decoding rate (tokens after the first / time after the prefill)."""
    a, b = spec.decode_tokens_per_s, base.decode_tokens_per_s
    return a / b if a and b and spec.passes > 0 else None


# ------------------------------------------------------------------------------- spread and honesty
# A timed figure from one run on a shared machine is a sample, not a fact: these helpers give it a spread, say
# when it is too noisy or too short to read, and catch measurements that cannot be true.

MIN_JUDGED_PASSES = 8
"""Fewer passes after the prefill than this (in either run) and a speedup is not judged at all."""
NOISY_SPREAD = NARROW
"""An interval that contains 1.0 and whose high / low exceeds this is "too noisy to tell" (the rule's
:data:`specviz.core.verdict.NARROW`)."""
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95



def _by_value(function):
    """``function`` (a seeded bootstrap: the same inputs give the same interval) remembered by its arguments' values
    for the latest 64 calls. A Live refresh asks for the same run's intervals in several places (cards, pane headers,
    history), and the handler shares the CPU with the run it measures, so each is drawn once per pass count.
    Arguments that cannot be frozen into a key (e.g. numpy arrays) compute afresh."""
    @functools.lru_cache(maxsize=64)
    def remembered(args: tuple, kwargs: tuple):
        return function(*args, **dict(kwargs))

    def frozen(value):
        return tuple(value) if isinstance(value, (list, tuple)) else value

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        key = (tuple(frozen(a) for a in args), tuple(sorted((k, frozen(v)) for k, v in kwargs.items())))
        try:
            hash(key)
        except TypeError:
            return function(*args, **kwargs)
        return remembered(*key)

    return wrapper


@dataclass(frozen=True)
class Interval:
    """A point estimate and its interval: ``low`` <= ``value`` <= ``high`` (usually), at confidence ``level``."""

    value: float
    low: float
    high: float
    level: float = BOOTSTRAP_LEVEL

    @property
    def spread(self) -> float:
        """high / low (1.0 = no spread; inf when low <= 0)."""
        return self.high / self.low if self.low > 0 else float("inf")

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in [low, high]."""
        return self.low <= x <= self.high



def _resampled_ratios(numerators: Sequence[float], denominators: Sequence[float], fixed: tuple, rng, resamples: int):
    """The bootstrap draws behind :func:`bootstrap_ratio_of_sums` and :func:`bootstrap_rate_ratio`: ``resamples``
    rounds, each drawing as many passes as there are with replacement from ``rng`` (a pass keeps its numerator and
    denominator together); returns each round's (sum of drawn numerators + fixed[0]) / (sum of drawn denominators +
    fixed[1]), shape (resamples,)."""
    import numpy as np

    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    picks = rng.integers(0, len(num), size=(resamples, len(num)))
    return (num[picks].sum(axis=1) + fixed[0]) / np.maximum(den[picks].sum(axis=1) + fixed[1], 1e-12)


@_by_value
def bootstrap_rate_ratio(spec_ms: Sequence[float], spec_tokens: Sequence[int], base_ms: Sequence[float],
                         base_tokens: Sequence[int], *, resamples: int = BOOTSTRAP_RESAMPLES,
                         level: float = BOOTSTRAP_LEVEL, seed: int = 0, spec_fixed: tuple[float, int] = (0.0, 0),
                         base_fixed: tuple[float, int] = (0.0, 0)) -> Interval | None:
    """The ratio of two decoding rates with a percentile-bootstrap interval over passes.

    Method: the rate of a run is (sum of its passes' tokens) / (sum of their times). Each of ``resamples`` rounds
    draws, independently for each run, as many passes as it has, with replacement (the nonparametric bootstrap,
    Efron 1979), and computes (spec rate / baseline rate) of the drawn passes; the interval is the (1 - level) / 2
    and (1 + level) / 2 quantiles of those ratios (the percentile interval, Efron & Tibshirani 1993, ch. 13).
    Random draws come from ``numpy.random.default_rng(seed)``, so the same passes give the same interval.

    Args:
        spec_ms / base_ms: each pass's time after the prefill (ms), one run each.
        spec_tokens / base_tokens: tokens each of those passes emitted (same lengths as the times).
        resamples: bootstrap rounds; level: the interval's confidence in (0, 1); seed: the generator's seed.
        spec_fixed / base_fixed: (ms, tokens) added to every draw of that run unresampled: its prefill, a single
            measurement, for the end-to-end ratio (:func:`end_to_end_interval`); (0.0, 0) leaves it out.

    Returns:
        The ratio of the full samples and its interval, or None when either run has fewer than 2 passes or no
        time (a single pass has no spread to resample).

    Raises:
        ValueError: times and token counts of different lengths, or a level outside (0, 1).
    """
    import numpy as np

    if len(spec_ms) != len(spec_tokens) or len(base_ms) != len(base_tokens):
        raise ValueError("every pass needs both its time and its token count")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if min(len(spec_ms), len(base_ms)) < 2 or sum(spec_ms) <= 0 or sum(base_ms) <= 0:
        return None
    rng = np.random.default_rng(seed)
    spec_rates = _resampled_ratios(spec_tokens, spec_ms, (spec_fixed[1], spec_fixed[0]), rng, resamples)
    base_rates = _resampled_ratios(base_tokens, base_ms, (base_fixed[1], base_fixed[0]), rng, resamples)
    ratios = spec_rates / np.maximum(base_rates, 1e-12)
    low, high = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
    value = (((sum(spec_tokens) + spec_fixed[1]) / (sum(spec_ms) + spec_fixed[0]))
             / ((sum(base_tokens) + base_fixed[1]) / (sum(base_ms) + base_fixed[0])))
    return Interval(float(value), float(low), float(high), level)


@_by_value
def bootstrap_ratio_of_sums(numerators: Sequence[float], denominators: Sequence[float], *, fixed: tuple = (0.0, 0.0),
                            resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                            seed: int = 0) -> Interval | None:
    """sum(numerators) / sum(denominators) over one run's passes with a percentile-bootstrap interval over them.

    Method: as :func:`bootstrap_rate_ratio` for one run: each of ``resamples`` rounds draws as many passes as there
    are, with replacement (a pass keeps its numerator and denominator together), and takes the ratio of the drawn
    sums; the interval is the (1 - level) / 2 and (1 + level) / 2 quantiles of those ratios, widened to hold the
    ratio of the full samples if it falls outside. A decoding rate is ``1000 *`` this of (tokens, ms) per pass
    (:meth:`RunStats.decode_rate`); a share of the time is this of (part ms, pass ms).

    Args:
        numerators / denominators: one value each per pass (same lengths), e.g. tokens emitted and ms.
        fixed: (numerator, denominator) added to every draw unresampled, e.g. the prefill's one token and its time
            (a single measurement: no spread of its own enters the interval).
        resamples, level, seed: as :func:`bootstrap_rate_ratio`.

    Returns:
        The ratio and its interval, or None for fewer than two passes or a zero denominator.

    Raises:
        ValueError: lists of different lengths, or a level outside (0, 1).
    """
    import numpy as np

    if len(numerators) != len(denominators):
        raise ValueError("every pass needs both its numerator and its denominator")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if len(numerators) < 2 or sum(denominators) + fixed[1] <= 0:
        return None
    ratios = _resampled_ratios(numerators, denominators, fixed, np.random.default_rng(seed), resamples)
    low, high = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
    value = float((sum(numerators) + fixed[0]) / (sum(denominators) + fixed[1]))
    return Interval(value, min(float(low), value), max(float(high), value), level)


def _times(interval: Interval | None, factor: float) -> Interval | None:
    """``interval`` with its value and ends multiplied by ``factor`` (None stays None)."""
    if interval is None:
        return None
    return Interval(interval.value * factor, interval.low * factor, interval.high * factor, interval.level)


def end_to_end_interval(spec: RunStats, base: RunStats) -> Interval | None:
    """The end-to-end ratio (:func:`speedup`: tokens/s with the prefill included) with its bootstrap interval over
    both runs' passes (:func:`bootstrap_rate_ratio`); each run's prefill is one measurement, added to every draw as
    measured (so the interval is the passes' share of the spread only). None when :func:`speedup` is None or a run
    has fewer than two passes."""
    if speedup(spec, base) is None:
        return None
    return bootstrap_rate_ratio(spec.pass_ms, spec.pass_tokens, base.pass_ms, base.pass_tokens,
                                spec_fixed=(spec.prefill_ms, spec.generated - spec.emitted),
                                base_fixed=(base.prefill_ms, base.generated - base.emitted))


_KEYS = {FASTER: "faster", SLOWER: "slower", SAME: "same", NOISY: "too noisy"}
"""The judgement's verdict key for each word of the rule (:mod:`specviz.core.verdict`)."""


@dataclass(frozen=True)
class SpeedupJudgement:
    """What a measured speedup may be read as: the rule of :func:`specviz.core.verdict.read_speedup` on its
    bootstrap interval.

    ``verdict``: "faster" / "slower" (the interval lies above / below 1.0: a clear result however wide it is, and
    on a busy machine too), "same" (it contains 1.0 and is narrow, on an undisturbed machine), "too noisy" (it
    contains 1.0 and is wide: high / low > :data:`NOISY_SPREAD`, or the timings were disturbed) or "too short"
    (fewer than :data:`MIN_JUDGED_PASSES` passes after the prefill in a run). ``value``: the ratio (None when too
    short); ``interval``: its bootstrap interval (None when too short); ``passes``: the fewer of the two runs'
    passes; ``reason``: what disturbed the timings (the ``disturbed`` of :func:`judge_speedup`), None when nothing
    did.
    """

    verdict: str
    value: float | None
    interval: Interval | None
    passes: int
    reason: str | None = None  # what disturbed the timings (they flatter the speculative run); None: undisturbed

    @property
    def finding(self) -> bool:
        """Whether the ratio may be shown as a result (faster, slower or the same), not as noise."""
        return self.verdict in ("faster", "slower", "same")

    @property
    def reading(self) -> Verdict | None:
        """The rule's :class:`~specviz.core.verdict.Verdict` (word, value, interval, reason) for a headline; None
        when too short to judge."""
        if self.interval is None or self.value is None:
            return None
        word = {key: word for word, key in _KEYS.items()}[self.verdict]
        i = self.interval
        return Verdict(word, self.value, i.low, i.high, i.level, self.reason)

    def describe(self) -> str:
        """One sentence a visitor can read: the interval, or why there is no figure."""
        if self.verdict == "too short":
            return (f"too short to judge: {self.passes} pass{'' if self.passes == 1 else 'es'} after the prefill in "
                    f"the run with fewer, at least {MIN_JUDGED_PASSES} needed in each")
        i = self.interval
        span = f"{i.low:.2f}–{i.high:.2f}× ({i.level:.0%} bootstrap interval over passes)"
        if self.reason and self.verdict == "too noisy":
            return (f"too noisy to tell: {self.reason}, which slows one-token steps more than wide passes and so "
                    f"flatters the speculative run (measured {span}, across 1.0)")
        if self.reason and self.verdict == "slower":
            return (f"slower: {span}, although {self.reason}, which flatters the speculative run: undisturbed it "
                    f"would be slower still")
        if self.reason and self.verdict == "faster":
            return (f"faster: {span}, the whole interval above 1.0, although {self.reason}, which slows one-token "
                    f"steps more than wide passes: undisturbed the gain may be smaller")
        return {"faster": f"faster: {span}", "slower": f"slower: {span}",
                "same": f"no clear difference: {span}",
                "too noisy": f"too noisy to tell: {span} spans 1.0 widely"}[self.verdict]


def judge_speedup(spec_ms: Sequence[float], spec_tokens: Sequence[int], base_ms: Sequence[float],
                  base_tokens: Sequence[int], *, min_passes: int = MIN_JUDGED_PASSES,
                  noisy_spread: float = NOISY_SPREAD, seed: int = 0, disturbed: str | None = None) -> SpeedupJudgement:
    """Judge a decoding-rate ratio from the passes of two runs (the interval is :func:`bootstrap_rate_ratio`'s,
    the reading :func:`specviz.core.verdict.read_speedup`'s: the one rule every tab uses).

    The verdict is the interval's place against 1.0: wholly below is "slower" and wholly above "faster", however
    wide; only an interval across 1.0 is undecided ("same" when narrow, "too noisy" when high / low >
    ``noisy_spread``); a run with fewer than ``min_passes`` passes is "too short".

    ``disturbed``: what disturbed the timings, when something did, in words ("other programs used 45% of the
    CPUs"). Other work on the CPUs slows a one-token step more than a wide pass, so it flatters the speculative
    run: it is said beside the figure, and an interval across 1.0 reads "too noisy" even when narrow; an interval
    wholly on one side of 1.0 keeps its verdict (seen: n-gram 2.51×, 95 % 1.48–3.98×, read "too noisy" on a busy
    machine when the disturbance hid every gain).
    """
    passes = min(len(spec_ms), len(base_ms))
    interval = None
    if passes >= max(min_passes, 2):
        interval = bootstrap_rate_ratio(spec_ms, spec_tokens, base_ms, base_tokens, seed=seed)
    if interval is None:
        return SpeedupJudgement("too short", None, None, passes)
    read = read_speedup(interval.value, interval.low, interval.high, level=interval.level, busy=disturbed or None,
                        narrow=noisy_spread)
    return SpeedupJudgement(_KEYS[read.word], interval.value, interval, passes, disturbed or None)


def judge_decode_speedup(spec: RunStats, base: RunStats, **options) -> SpeedupJudgement:
    """:func:`judge_speedup` of two runs' passes after the prefill (each on its own clock): the decoding speedup
    of ``spec`` over ``base`` (:func:`decode_speedup`) with its interval, or why it cannot be read; ``options``:
    :func:`judge_speedup`'s (``disturbed``: what disturbed the timings, e.g. other programs on the CPUs)."""
    return judge_speedup(spec.pass_ms, spec.pass_tokens, base.pass_ms, base.pass_tokens, **options)


def bootstrap_mean(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                   seed: int = 0) -> Interval | None:
    """The mean of ``values`` (e.g. per-pass ms) with a percentile-bootstrap interval: how sure the mean is.

    Method: ``resamples`` rounds each draw as many values as there are, with replacement, and take their mean; the
    interval is the (1 - level) / 2 and (1 + level) / 2 quantiles of those means (the percentile interval, as
    :func:`bootstrap_rate_ratio`), widened to hold the mean itself if it falls outside. A few slow values widen it
    upwards, where quartiles would leave a skewed mean outside them. Draws come from
    ``numpy.random.default_rng(seed)``: the same values give the same interval.

    Returns:
        The mean and its interval, or None for fewer than two values (one value has no spread).

    Raises:
        ValueError: a level outside (0, 1).
    """
    import numpy as np

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if len(values) < 2:
        return None
    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    low, high = np.quantile(data[picks].mean(axis=1), [(1 - level) / 2, (1 + level) / 2])
    mean = float(data.mean())
    return Interval(mean, min(float(low), mean), max(float(high), mean), level)


def faster_than_possible(fewer_ms: Sequence[float], more_ms: Sequence[float], *, margin: float = 0.05) -> bool:
    """Whether repeated timings of a larger workload (more tokens, or a larger batch, of the same forward) beat
    those of a smaller one beyond noise: every repeat of the larger is below every repeat of the smaller, and its
    median is more than ``margin`` (a share) below the smaller's. Doing strictly more work cannot be faster; such
    a pair is noise from other work on the machine. False when either list is empty."""
    if not fewer_ms or not more_ms:
        return False
    median_fewer = sorted(fewer_ms)[len(fewer_ms) // 2]
    median_more = sorted(more_ms)[len(more_ms) // 2]
    return max(more_ms) < min(fewer_ms) and median_more < median_fewer * (1.0 - margin)


def format_apart(a: float, b: float, decimals: int = 2, most: int = 6) -> tuple[str, str]:
    """``a`` and ``b`` with ``decimals`` decimals, or more (up to ``most``) until two different numbers read
    differently: (0.018, 0.021) -> ("0.018", "0.021"), where two decimals would show 0.02 twice."""
    for places in range(decimals, max(decimals, most) + 1):
        x, y = f"{a:.{places}f}", f"{b:.{places}f}"
        if x != y or a == b:
            return x, y
    return x, y
