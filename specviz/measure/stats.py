"""Statistics of timings: a timed figure from one run on a shared machine is a sample, not a fact. These give it a
spread (percentile bootstrap over passes), say when it is too noisy or too short to read, and catch measurements
that cannot be true.

- :func:`bootstrap_rate_ratio`: the ratio of two runs' decoding rates with its interval; :func:`judge_speedup` /
  :func:`judge_decode_speedup` read it by the one rule of :mod:`specviz.core.verdict` (faster or slower when the
  interval lies wholly above or below 1; the same or too noisy to tell when it spans 1; or too short to judge).
- :func:`bootstrap_ratio_of_sums`: one run's rate, or a part's share of its time, with its interval
  (:meth:`specviz.measure.run_stats.RunStats.decode_rate`); :func:`bootstrap_mean`: a mean per pass (T_verify,
  T_draft) with its interval, and tokens per pass (:func:`tokens_per_pass_interval`); :func:`end_to_end_interval`:
  the end-to-end ratio, each prefill one measurement.
- :func:`pass_share_interval`: a counted share (the acceptance rate, α) over a run's passes, the wider of the
  bootstrap over passes and the Wilson score interval (:func:`wilson_interval`) of its counts.
- :func:`faster_than_possible`: more work timed faster than less beyond noise (a forward grid's impossible points).

Intervals are :class:`Interval` records (value, low, high, level); every bootstrap is seeded, so the same
passes give the same interval.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from specviz.core.counters import speedup
from specviz.core.verdict import FASTER, NARROW, NOISY, NOT_FINDING, SAME, SLOWER, Verdict, read_speedup

if TYPE_CHECKING:
    from specviz.measure.run_stats import RunStats


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
                         level: float = BOOTSTRAP_LEVEL, seed: int = 0,
                         fixed: tuple[tuple[float, int], tuple[float, int]] = ((0.0, 0), (0.0, 0))) -> Interval | None:
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
        fixed: (speculative run's, baseline run's) (ms, tokens) added to every draw of that run unresampled: its
            prefill, a single measurement, for the end-to-end ratio (:func:`end_to_end_interval`); (0.0, 0) leaves
            it out.

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
    spec_fixed, base_fixed = fixed
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


def tokens_per_pass_interval(pass_tokens: Sequence[int]) -> Interval | None:
    """Tokens per pass (tokens emitted after the prefill / target passes, bonus included) with its 95% interval:
    :func:`bootstrap_mean` of the tokens each pass emitted (seed 0, the passes resampled whole), the one formula of
    the Live tab's card (:meth:`specviz.measure.run_stats.RunStats.tokens_per_pass_interval`) and the Arena's rows
    (:func:`specviz.analysis.arena_intervals.tokens_per_pass_interval`); e.g. passes of 1, 4, 4, 1, 4 tokens: 2.80
    in 1.60–4.00.

    Args:
        pass_tokens: per pass after the prefill, in order: the tokens it emitted (>= 1 each).

    Returns:
        The mean tokens per pass and its interval, or None for fewer than two passes.
    """
    return bootstrap_mean(tuple(pass_tokens))


def wilson_interval(successes: int, trials: int, level: float = BOOTSTRAP_LEVEL) -> Interval | None:
    """``successes / trials`` with its Wilson score interval (Wilson 1927): the binomial interval that stays inside
    [0, 1] and keeps a width when every trial (or none) succeeded, e.g. 10 of 10 -> 1.0 in 0.72–1.0 at 95%.

    Returns:
        The share and its interval, or None for no trials.

    Raises:
        ValueError: successes outside [0, trials], or a level outside (0, 1).
    """
    from statistics import NormalDist

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be between 0 and the trials ({trials}), got {successes}")
    if trials == 0:
        return None
    z = NormalDist().inv_cdf((1 + level) / 2)
    share = successes / trials
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * (share * (1 - share) / trials + z * z / (4 * trials * trials)) ** 0.5
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    return Interval(share, low, 1.0 if successes == trials else min(1.0, centre + half), level)


@_by_value
def pass_share_interval(numerators: Sequence[int], denominators: Sequence[int], *,
                        level: float = BOOTSTRAP_LEVEL) -> Interval | None:
    """A share counted token by token over a run's passes (the acceptance rate: accepted / drafted per pass; α:
    accepted / judged per pass) with an interval that holds both of two: the percentile bootstrap over the passes
    that counted any token (:func:`bootstrap_ratio_of_sums`: a pass's tokens are not independent trials, one
    rejection ends the pass, so the passes are resampled whole) and the Wilson score interval of the summed counts
    (:func:`wilson_interval`: a run whose every pass accepted everything still reads as uncertain, where the
    bootstrap would draw 100% every time). Passes that counted nothing (a plain step of k = auto) are left out.

    Args:
        numerators / denominators: one count per pass (same lengths), 0 <= numerator <= denominator.

    Returns:
        The share of the sums and the wider interval, or None with fewer than two passes that counted a token.

    Raises:
        ValueError: lists of different lengths, or a level outside (0, 1).
    """
    if len(numerators) != len(denominators):
        raise ValueError("every pass needs both its count and what it was counted out of")
    counted = [(n, d) for n, d in zip(numerators, denominators) if d > 0]
    if len(counted) < 2:
        return None
    nums, dens = [n for n, _ in counted], [d for _, d in counted]
    boot = bootstrap_ratio_of_sums(nums, dens, level=level)
    wilson = wilson_interval(sum(nums), sum(dens), level)
    return Interval(wilson.value, min(boot.low, wilson.low), max(boot.high, wilson.high), level)


def end_to_end_interval(spec: RunStats, base: RunStats) -> Interval | None:
    """The end-to-end ratio (:func:`~specviz.core.counters.speedup`: tokens/s with the prefill included) with its bootstrap interval over
    both runs' passes (:func:`bootstrap_rate_ratio`); each run's prefill is one measurement, added to every draw as
    measured (so the interval is the passes' share of the spread only). None when :func:`~specviz.core.counters.speedup` is None or a run
    has fewer than two passes. Its top is cut at ``spec``'s tokens per pass (or at the value, when that lies above
    them), as the decoding speedup's is (:func:`_cut_at`): with the prefill included the ratio can only be smaller."""
    if speedup(spec, base) is None:
        return None
    interval = bootstrap_rate_ratio(spec.pass_ms, spec.pass_tokens, base.pass_ms, base.pass_tokens,
                                    fixed=((spec.prefill_ms, spec.generated - spec.emitted),
                                           (base.prefill_ms, base.generated - base.emitted)))
    most = spec.tokens_per_pass
    if interval is None or not most or interval.high <= most:
        return interval
    return dataclasses.replace(interval, high=max(most, interval.value))


_KEYS = {FASTER: "faster", SLOWER: "slower", SAME: "same", NOISY: "too noisy", NOT_FINDING: "not a finding"}
IMPOSSIBLE_MARGIN = 0.05  # a decoding speedup this far above the run's tokens per pass cannot be true
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
    did; ``cut_at``: the tokens per pass the interval's top was cut at (:func:`_cut_at`), None when it was not;
    ``impossible``: for "not a finding" (:func:`above_possible`), why the timings cannot be true on their own ("faster
    than its 3.1 tokens per pass allow"; ``reason`` then holds it and the disturbance together), else None.
    """

    verdict: str
    value: float | None
    interval: Interval | None
    passes: int
    reason: str | None = None  # what disturbed the timings (they flatter the speculative run); None: undisturbed
    cut_at: float | None = None
    impossible: str | None = None

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
        if self.verdict == "not a finding":
            return (f"not a finding: {self.reason} (measured {span}); a pass cannot cost less than a one-token step, "
                    f"so the machine's speed changed between the two runs")
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


def above_possible(judged: SpeedupJudgement, most: float | None) -> SpeedupJudgement:
    """``judged`` read again as "not a finding" when its speedup is above ``most`` (the speculative run's tokens
    per pass) by more than :data:`IMPOSSIBLE_MARGIN`: a pass would have cost less than one standard step, so the
    machine's speed changed between the runs (the reason says so, then what disturbed them); else ``judged``."""
    if most is None or judged.value is None:
        return judged
    bound = most * (1.0 + IMPOSSIBLE_MARGIN)
    if judged.value <= bound:
        return _cut_at(judged, most)
    i = judged.interval
    impossible = f"faster than its {most:.1f} tokens per pass allow"
    read = read_speedup(judged.value, i.low, i.high, level=i.level, busy=judged.reason, impossible=impossible)
    return SpeedupJudgement(_KEYS[NOT_FINDING], judged.value, i, judged.passes, read.reason, impossible=impossible)


def _cut_at(judged: SpeedupJudgement, bound: float) -> SpeedupJudgement:
    """``judged`` with its interval's top cut at ``bound``, the tokens per pass (or at the value, when the value lies
    within the margin above them): no pass costs less than one standard step, so the speedup cannot lie above them
    and that part of a bootstrap interval is noise (a trial on a busy machine read 2.95x "1.72-5.10x" beside 3.06
    tokens per pass; a second trial read a top of 3.41 beside 3.25 as a contradiction while the cut still had the
    margin). The verdict stays as read: a cut top moves no interval across 1, since the bound is at least 1."""
    i = judged.interval
    if i is None or i.high <= bound:
        return judged
    return dataclasses.replace(judged, interval=dataclasses.replace(i, high=max(bound, i.value)), cut_at=bound)


def judge_decode_speedup(spec: RunStats, base: RunStats, **options) -> SpeedupJudgement:
    """:func:`judge_speedup` of two runs' passes after the prefill (each on its own clock): the decoding speedup
    of ``spec`` over ``base`` (:func:`decode_speedup`) with its interval, or why it cannot be read; ``options``:
    :func:`judge_speedup`'s (``disturbed``: what disturbed the timings, e.g. other programs on the CPUs). A
    speedup above ``spec``'s tokens per pass (by :data:`IMPOSSIBLE_MARGIN`) is "not a finding": a pass would have
    cost less than one standard step."""
    judged = judge_speedup(spec.pass_ms, spec.pass_tokens, base.pass_ms, base.pass_tokens, **options)
    return above_possible(judged, spec.tokens_per_pass or None)


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
