"""What-if k: predict the speedup of every draft length k from one greedy run at the largest k.

Why one run is enough. In greedy mode a drafter's first j proposals with k = j are the first j of its proposals
with a larger k (the same context gives the same guesses: n-gram lookup copies a prefix of the same follow-up,
a greedy draft model takes the same argmaxes), and the target keeps the longest prefix that equals its argmax. So
a pass that accepted n tokens at k_max would have accepted min(n, k) at k, and from the run's passes:

- per-position acceptance a_i = P(draft i accepted | drafts 1..i-1 accepted), i = 1..k_max. A position is
  *reached* in a pass when the pass asked for k >= i tokens and drafts 1..i-1 were all accepted; it counts as
  accepted when draft i was accepted. A drafter that proposed fewer than i tokens (n-gram with a short match)
  counts as not accepted at i: a run with any k >= i would have seen the same short proposal.
- E[tokens per pass](k) = 1 + sum_{j=1..k} prod_{i<=j} a_i (the 1 is the recovered or bonus token). At k_max it
  equals the run's measured tokens per pass over its passes at k_max (:func:`tokens_per_pass`; near the token
  limit the engine drafts fewer tokens, and an EOS can cut a pass).

The prediction is an estimate: at a smaller k the passes start at other positions of the same greedy output, so
they see other contexts; the per-position rates assume the same mix.

Costs (ms, each run on its own clock, :class:`Costs`): T_step is the baseline's time per token (its forward plus
its bookkeeping); a speculative pass at k costs T_verify(k) + k * T_draft + T_other. Only the largest k was run, so
T_verify(k) is interpolated linearly through (0, the baseline's one-token forward) and the measured median verify
time per number of drafted tokens m (passes at k_max usually draft m = k_max; an n-gram drafter gives several m).

    predicted speedup(k) = E[tau](k) * T_step / (T_verify(k) + k * T_draft + T_other)

The recommended k is the argmax (the smaller k on a tie). How sure that is: :func:`spread` resamples the run's
passes with replacement (a bootstrap; the baseline's costs stay as measured) and repeats the prediction on each
resample, giving every k a range of predicted speedups and the share of resamples in which it comes out best. Below
:data:`MIN_PASSES` passes the range is too rough to tell the k apart. A recommended k equal to the largest k tried
says nothing about larger ones (:attr:`WhatIf.best_at_edge`). :func:`paper_speedups` adds the paper's prediction
(Leviathan et al. 2023, Thm 3.8: E[tau] / (c k + 1), verification costs one step) for comparison: the gap between
the two is the verification overhead. Pure functions, no model and no clock inside.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from statistics import median
from typing import Iterable, Sequence

import numpy as np

from specviz.core import counters as core_counters
from specviz.core.costs import (Costs, end_to_end_speedup, expected_tokens, predicted_speedup,
                                predicted_speedup_paper)
from specviz.core.counters import Counters
from specviz.core.events import PassEvent

__all__ = ["MIN_PASSES", "RESAMPLES", "Costs", "PositionCounts", "Prediction", "Spread", "WhatIf", "alpha", "analyze", "decode_speedup",
           "end_to_end_speedup", "expected_tokens", "measure_costs", "position_counts", "predict",
           "predicted_speedup", "recommend", "spread", "tokens_per_pass", "tokens_per_pass_range",
           "tokens_per_s_speedup"]


@dataclass(frozen=True)
class PositionCounts:
    """Per drafted position i = 1..k_max: passes that reached it and passes that accepted it (see module doc)."""

    reached: tuple[int, ...]
    accepted: tuple[int, ...]

    @property
    def rates(self) -> tuple[float, ...]:
        """a_i = accepted_i / reached_i; 0.0 where no pass reached position i (nothing beyond it can count)."""
        return tuple(a / r if r else 0.0 for a, r in zip(self.accepted, self.reached))

    @property
    def k_max(self) -> int:
        """The largest position counted."""
        return len(self.reached)


def _passes(events: Iterable[PassEvent]) -> list[PassEvent]:
    return [e for e in events if e.kind == "pass"]


def position_counts(events: Iterable[PassEvent], k_max: int | None = None) -> PositionCounts:
    """Count, per position, the passes of a speculative run that reached and accepted it
    (:attr:`specviz.core.counters.Counters.position_reached`).

    Args:
        events: the run's events (the prefill and baseline-like events with k == 0 are ignored).
        k_max: positions to count (default: the largest k asked for in the run).

    Returns:
        :class:`PositionCounts` of length ``k_max``.
    """
    events = list(events)
    counters = Counters.of(events)
    if k_max is None:
        k_max = max((e.k for e in _passes(events)), default=0)
    reached = (list(counters.position_reached) + [0] * k_max)[:k_max]
    accepted = (list(counters.position_accepted) + [0] * k_max)[:k_max]
    return PositionCounts(tuple(reached), tuple(accepted))


def measure_costs(spec_events: Iterable[PassEvent], base_events: Iterable[PassEvent]) -> Costs:
    """:class:`Costs` from a speculative run and a standard-decoding run of the same target and prompt.

    Medians, not means, for per-pass times (a busy machine gives a few slow outliers); draft time is total draft
    ms over total drafted tokens.

    Raises:
        ValueError: if the baseline has no pass after its prefill.
    """
    spec = _passes(spec_events)
    return _resampled_costs(_base_costs(list(base_events)), spec, range(len(spec)))


@dataclass(frozen=True)
class Prediction:
    """One k of the what-if: expected tokens per pass, the cost of a pass (ms), the predicted decoding speedup
    (prefill excluded) and the paper's prediction (verification costs one step)."""

    k: int
    expected_tokens: float
    pass_ms: float
    speedup: float
    paper_speedup: float


def tokens_per_pass(events: Iterable[PassEvent], k: int | None = None) -> float | None:
    """Measured tokens per pass over the passes that asked for the full draft length ``k`` (default: the run's
    largest k). Near the token limit the engine asks for fewer tokens, so those last passes are left out: this is
    the figure :func:`expected_tokens` predicts (None when no pass asked for k)."""
    passes = _passes(events)
    if k is None:
        k = max((e.k for e in passes), default=0)
    full = [e for e in passes if e.k == k]
    return sum(len(e.emitted_ids) for e in full) / len(full) if full else None


def alpha(events: Iterable[PassEvent]) -> float | None:
    """Per-token acceptance of a run (:attr:`specviz.core.counters.Counters.alpha`)."""
    return Counters.of(events).alpha


def predict(rates: Sequence[float], costs: Costs, k_values: Iterable[int], alpha_value: float | None = None
            ) -> list[Prediction]:
    """A :class:`Prediction` for each k (1..len(rates)); the paper's figure uses ``alpha_value`` (NaN if None)."""
    c = costs.draft_ms_per_token / costs.step_ms if costs.step_ms > 0 else 0.0
    out = []
    for k in k_values:
        expected = expected_tokens(rates, k)
        pass_ms = costs.pass_ms(k)
        paper = predicted_speedup_paper(alpha_value, k, c) if alpha_value is not None else float("nan")
        out.append(Prediction(k, expected, pass_ms, predicted_speedup(expected, costs.step_ms, pass_ms), paper))
    return out


def recommend(predictions: Sequence[Prediction]) -> Prediction:
    """The prediction with the largest speedup (the smallest k among equals).

    Raises:
        ValueError: for an empty list.
    """
    if not predictions:
        raise ValueError("nothing to recommend from: no predictions")
    return max(predictions, key=lambda p: (p.speedup, -p.k))


MIN_PASSES = 20
"""Fewer passes than this give a what-if too rough to tell one k from the next: say so rather than pick."""
RESAMPLES = 200
"""Bootstrap resamples of :func:`spread`."""


@dataclass(frozen=True)
class Spread:
    """How much a what-if's predictions move when the run's passes are resampled (:func:`spread`).

    ``low`` / ``high``: per k = 1..k_max, the predicted speedup (×) at the lower and upper ``level`` quantiles
    ((1 - level) / 2 and (1 + level) / 2) of the resamples; ``tokens_low`` / ``tokens_high``: the same for the
    expected tokens per pass E[tau](k); ``measured_tokens``: (low, high) of the run's measured tokens per pass over
    its passes at k_max (:func:`tokens_per_pass` of each resample; None when no drawn pass asked for k_max);
    ``best_share``: per k, the fraction of resamples in which that k is the recommended one (sums to 1);
    ``passes``: passes resampled.
    """

    passes: int
    resamples: int
    level: float
    low: tuple[float, ...]
    high: tuple[float, ...]
    best_share: tuple[float, ...]
    tokens_low: tuple[float, ...] = ()
    tokens_high: tuple[float, ...] = ()
    measured_tokens: tuple[float, float] | None = None
    # per resample: its costs, and per k its E[tau] (rows k = 1..k_max): what :meth:`end_to_end` reads
    resampled_costs: tuple[Costs, ...] = field(default=(), repr=False, compare=False)
    resampled_tokens: tuple[tuple[float, ...], ...] = field(default=(), repr=False, compare=False)

    @property
    def too_few(self) -> bool:
        """Fewer than :data:`MIN_PASSES` passes: too few to tell the k apart."""
        return self.passes < MIN_PASSES

    def at(self, k: int) -> tuple[tuple[float, float], tuple[float, float]]:
        """((speedup low, high), (E[tau] low, high)) of draft length k."""
        return (self.low[k - 1], self.high[k - 1]), (self.tokens_low[k - 1], self.tokens_high[k - 1])

    def end_to_end(self, k: int, tokens: int) -> tuple[float, float] | None:
        """(low, high) of the predicted tokens/s ratio of whole runs of ``tokens`` tokens at k, prefill included
        (:func:`end_to_end_speedup` of each resample's E[tau](k) and costs); None when the samples were not kept."""
        if not self.resampled_costs or not 1 <= k <= len(self.resampled_tokens):
            return None
        values = [end_to_end_speedup(tau, costs, k, tokens)
                  for tau, costs in zip(self.resampled_tokens[k - 1], self.resampled_costs)]
        (low,), (high,) = _quantiles([values], self.level)
        return low, high


def _quantiles(samples: Sequence[Sequence[float]], level: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(low, high): per row of ``samples``, its (1 - level) / 2 and (1 + level) / 2 quantiles (np.quantile, linear
    between order statistics)."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(np.asarray(samples, dtype=float), [tail, 1.0 - tail], axis=1)
    return tuple(float(v) for v in low), tuple(float(v) for v in high)


def _base_costs(base_events: Sequence[PassEvent]) -> dict:
    """The baseline's part of :class:`Costs` (step_ms, step_forward_ms, prefill_ms), measured once: a resample of
    the speculative passes leaves it as it is. Raises ValueError like :func:`measure_costs`."""
    base = _passes(base_events)
    if not base:
        raise ValueError("the baseline run needs at least two tokens to measure a decoding step")
    prefill = [e.t_end_ms for e in base_events if e.kind == "prefill"]
    return {"step_ms": median(e.timings.verify_ms + e.timings.other_ms for e in base),
            "step_forward_ms": median(e.timings.verify_ms for e in base), "prefill_ms": prefill[0] if prefill else 0.0}


def _resampled_costs(base: dict, passes: Sequence[PassEvent], drawn: Sequence[int]) -> Costs:
    """:class:`Costs` of the drawn passes (indices into ``passes``, in draw order) with the baseline's part ``base``
    (:func:`_base_costs`): what :func:`measure_costs` returns for all passes drawn once, in order."""
    drafted = sum(passes[i].num_drafted for i in drawn)
    by_m: dict[int, list[float]] = {}
    for i in drawn:
        if passes[i].num_drafted:
            by_m.setdefault(passes[i].num_drafted, []).append(passes[i].timings.verify_ms)
    return Costs(
        step_ms=base["step_ms"], step_forward_ms=base["step_forward_ms"],
        draft_ms_per_token=sum(passes[i].timings.draft_ms for i in drawn) / drafted if drafted else 0.0,
        verify_points=tuple((m, median(v)) for m, v in sorted(by_m.items())),
        pass_overhead_ms=median(passes[i].timings.other_ms for i in drawn) if len(drawn) else 0.0,
        prefill_ms=base["prefill_ms"],
    )


def spread(spec_events: Sequence[PassEvent], base_events: Sequence[PassEvent], k_max: int | None = None,
           resamples: int = RESAMPLES, level: float = 0.8, seed: int = 0) -> Spread:
    """Bootstrap the what-if over the speculative run's passes: draw as many passes as the run has, with
    replacement, ``resamples`` times (a ``random.Random(seed)``: the same run gives the same spread); per draw,
    re-count the per-position acceptance and re-measure the draft, verify and overhead costs of the drawn passes
    (the baseline's step as measured, once), predict every k and note the best, E[tau](k) and the measured tokens
    per pass at k_max.

    What does not depend on the draw is done once, before the resamples: the baseline's costs and each pass's
    per-position counts (a draw sums the counts of its passes, as :func:`position_counts` of the drawn passes would).

    Returns:
        :class:`Spread` over k = 1..k_max (default: the largest k asked for in the run).

    Raises:
        ValueError: if the run has no pass, the baseline has none, or ``resamples`` < 1.
    """
    passes = _passes(spec_events)
    if not passes:
        raise ValueError("no pass to resample")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1 (got {resamples})")
    k_max = max(e.k for e in passes) if k_max is None else k_max
    ks = range(1, k_max + 1)
    base = _base_costs(list(base_events))
    counts = [position_counts([e], k_max) for e in passes]  # one pass' reached / accepted per position
    reached = np.array([c.reached for c in counts], dtype=np.int64).reshape(len(passes), k_max)
    accepted = np.array([c.accepted for c in counts], dtype=np.int64).reshape(len(passes), k_max)
    emitted = [len(e.emitted_ids) for e in passes]
    rng = random.Random(seed)
    speedups = np.empty((k_max, resamples))
    expected = np.empty((k_max, resamples))
    measured: list[float] = []
    costs_drawn: list[Costs] = []
    wins = [0] * k_max
    for r in range(resamples):
        drawn = [rng.randrange(len(passes)) for _ in passes]
        rates = PositionCounts(tuple(int(v) for v in reached[drawn].sum(axis=0)),
                               tuple(int(v) for v in accepted[drawn].sum(axis=0))).rates
        costs_drawn.append(_resampled_costs(base, passes, drawn))
        predictions = predict(rates, costs_drawn[-1], ks)
        speedups[:, r] = [p.speedup for p in predictions]
        expected[:, r] = [p.expected_tokens for p in predictions]
        wins[recommend(predictions).k - 1] += 1
        full = [emitted[i] for i in drawn if passes[i].k == k_max]
        if full:
            measured.append(sum(full) / len(full))
    low, high = _quantiles(speedups, level)
    tokens_low, tokens_high = _quantiles(expected, level)
    measured_range = None
    if measured:  # some drawn pass asked for k_max
        (m_low,), (m_high,) = _quantiles([measured], level)
        measured_range = (m_low, m_high)
    return Spread(passes=len(passes), resamples=resamples, level=level, low=low, high=high,
                  best_share=tuple(w / resamples for w in wins), tokens_low=tokens_low, tokens_high=tokens_high,
                  measured_tokens=measured_range, resampled_costs=tuple(costs_drawn),
                  resampled_tokens=tuple(tuple(float(v) for v in row) for row in expected))


def tokens_per_pass_range(events: Iterable[PassEvent], k: int, resamples: int = RESAMPLES, level: float = 0.8,
                          seed: int = 0) -> tuple[float, float] | None:
    """The bootstrap (low, high) ``level`` range of :func:`tokens_per_pass` at ``k``: the passes that asked for k,
    drawn with replacement ``resamples`` times (``random.Random(seed)``); None when no pass asked for k."""
    emitted = [len(e.emitted_ids) for e in _passes(events) if e.k == k]
    if not emitted:
        return None
    rng = random.Random(seed)
    means = [sum(emitted[rng.randrange(len(emitted))] for _ in emitted) / len(emitted) for _ in range(resamples)]
    (low,), (high,) = _quantiles([means], level)
    return low, high


@dataclass(frozen=True)
class WhatIf:
    """The full what-if from one run at k_max (see :func:`analyze`)."""

    k_max: int
    counts: PositionCounts
    costs: Costs
    predictions: tuple[Prediction, ...]
    recommended: Prediction
    measured_tokens_per_pass: float | None  # over the passes at k_max (see :func:`tokens_per_pass`)
    measured_speedup: float | None  # decoding tokens/s ratio at k_max (prefill excluded), when both runs are known
    tokens: int  # tokens generated by the run
    alpha: float | None
    spread: Spread | None = None  # the bootstrap over the run's passes (:func:`spread`)

    @property
    def best_at_edge(self) -> bool:
        """The recommended k is the largest k tried (and more than 1): a larger k might be faster still."""
        return self.recommended.k == self.k_max > 1

    @property
    def rates(self) -> tuple[float, ...]:
        """Per-position acceptance a_1..a_kmax."""
        return self.counts.rates

    def at(self, k: int) -> Prediction:
        """The prediction for draft length k."""
        return self.predictions[k - 1]


def decode_speedup(spec_events: Sequence[PassEvent], base_events: Sequence[PassEvent]) -> float | None:
    """Measured decoding speedup of two runs' events (:func:`specviz.core.counters.decode_speedup`)."""
    return core_counters.decode_speedup(Counters.of(spec_events), Counters.of(base_events))


def tokens_per_s_speedup(spec_events: Sequence[PassEvent], base_events: Sequence[PassEvent]) -> float | None:
    """Measured end-to-end speedup of two runs' events, prefill included (:func:`specviz.core.counters.speedup`)."""
    return core_counters.speedup(Counters.of(spec_events), Counters.of(base_events))


def analyze(spec_events: Sequence[PassEvent], base_events: Sequence[PassEvent], k_max: int | None = None,
            resamples: int = RESAMPLES) -> WhatIf:
    """The what-if of a greedy speculative run at k_max and its standard-decoding baseline, with its bootstrap
    :func:`spread` over ``resamples`` resamples of the passes (none when 0).

    Raises:
        ValueError: if the speculative run has no pass, or its drafter proposed nothing at all.
    """
    spec_events, base_events = list(spec_events), list(base_events)
    passes = _passes(spec_events)
    if not passes:
        raise ValueError("The run ended at its first token, so there is no pass to learn from: allow more tokens.")
    if not any(e.num_drafted for e in passes):
        raise ValueError("The drafter proposed nothing in this run, so there is no acceptance to learn from.")
    counts = position_counts(spec_events, k_max)
    costs = measure_costs(spec_events, base_events)
    a = alpha(spec_events)
    predictions = tuple(predict(counts.rates, costs, range(1, counts.k_max + 1), a))
    return WhatIf(
        k_max=counts.k_max, counts=counts, costs=costs, predictions=predictions,
        recommended=recommend(predictions), measured_tokens_per_pass=tokens_per_pass(spec_events, counts.k_max),
        measured_speedup=decode_speedup(spec_events, base_events), tokens=spec_events[-1].num_generated, alpha=a,
        spread=spread(spec_events, base_events, counts.k_max, resamples) if resamples else None,
    )
