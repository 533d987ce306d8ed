"""How many tokens to draft in the next pass: fixed k, the heuristic schedule, or a cost-aware choice (k = auto).

**Heuristic** (:class:`HeuristicK`): +1 after a pass whose drafter filled k and had every token accepted, -1 after a
rejection, within [1, k_max]; the rule of transformers' assisted generation ("heuristic" schedule). It ignores what
a pass costs, so it keeps drafting where no k pays.

**Cost-aware** (:class:`AutoK`): before each pass, for every k in 0..k_max, the expected decoding rate

    rate(k) = E[tokens per pass](k) / E[pass ms](k),   E[tokens](k) = 1 + sum_{j<=k} prod_{i<=j} a_i,
    E[pass ms](k) = T_verify(k) + k * T_draft + T_other,

with a_i the run's recent per-position acceptance (a position the drafter did not fill counts as not accepted,
as in the what-if of k; a decaying mean that starts at the prior :data:`PRIOR_ACCEPTANCE`, so the prior fades as
passes come in) and the costs measured on this run's own passes: T_verify(k) of a pass verifying k drafts, whose
forward reads n = k + 1 tokens, at the current context length (a decaying average per n, interpolated between
measured n), T_draft per drafted token, T_other per pass (the cost model of :mod:`specviz.core.costs`). k = 0 is a plain one-token step (rate 1 / T_verify(0)). The k with the highest rate wins, so
the run stops drafting where no k is expected to beat standard decoding, and drafts longer where acceptance is
high and verification is cheap. The choice and its expected gain over k = 0, rate(k) / rate(0), are reported on
each pass event.

Learning needs samples the choice alone would not give: while T(1) is unknown or stale the controller runs a k = 0
pass now and then, and after several passes without drafting it drafts a one-token probe to see whether acceptance
came back. A probe after which drafting still does not pay doubles the number of plain steps before the next one
(:data:`DRAFT_PROBE_AFTER` up to :data:`AUTO_PROBE_MAX`), so on text the drafter never guesses the probes cost
little; a choice to draft resets the gap. Neither kind of sample changes the output: the draft length never does (greedy output is the
baseline's; sampling keeps the target's distribution). Because the choice reads the run's timings, a sampled run
with k = auto is exact but not bit-reproducible from its seed.

**Gate** (:class:`GateK`): k = auto for a drafter whose passes all have one shape (lookahead decoding): there is no
length to choose, only whether to draft at all, so each pass is the drafter's full pass or a plain step, by the
same measured rates.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

from specviz.core.costs import expected_tokens, interpolate, pass_ms, predicted_speedup, with_verify_curve

DECAY = 0.9  # weight kept by older observations per new one (~10 passes of memory)
PRIOR_ACCEPTANCE = 0.5  # a_i before a position was ever reached: the decaying means' starting point, of weight
PRIOR_WEIGHT = 1.0  # PRIOR_WEIGHT, which decays like any observation (see AutoK.acceptance)
PRIOR_SLOPE = 0.10  # T(n) / T(1) grows by this per extra token until two sizes were measured
STEP_PROBE_EVERY = 24  # passes between k = 0 samples of T(1) when the choice never picks k = 0
DRAFT_PROBE_AFTER = 6  # k = 0 passes in a row before a short draft tests acceptance again
GATE_PROBE_MAX = 48  # GateK: the most steps between probes (the gap doubles after each probe that did not pay)
AUTO_PROBE_MAX = 24  # AutoK: the most steps between probes (the same doubling from DRAFT_PROBE_AFTER)
GATE_STEP_SAMPLES = 3  # GateK: plain steps timed in a row after the first counted full pass, before it compares
GATE_COST_WINDOW = 8  # GateK: a cost is the median of this many recent passes of its kind
PROBE_K = 1  # AutoK's probe drafts one token: the first position's acceptance is what decides whether any k pays


class HeuristicK:
    """The heuristic schedule (see the module docstring); ``adaptive=False`` keeps k fixed."""

    def __init__(self, k: int, k_max: int, adaptive: bool) -> None:
        self.k, self.k_max, self.adaptive = k, k_max, adaptive
        self.expected_gain: float | None = None

    def choose(self, budget: int, ready: bool = True) -> int:
        """The draft length the next pass asks for (the engine cuts it to the budget; ``ready`` is not used)."""
        return self.k

    def observe(self, requested: int, proposed: int, accepted: int, **_costs) -> None:
        """Update k after a pass that asked for ``requested`` tokens, got ``proposed`` and kept ``accepted``."""
        if not self.adaptive or proposed == 0:
            return
        if accepted < proposed:
            self.k = max(self.k - 1, 1)
        elif proposed >= requested:
            self.k = min(self.k + 1, self.k_max)


@dataclass
class _Decaying:
    """A decaying sum and weight: its mean follows recent values."""

    total: float = 0.0
    weight: float = 0.0

    def add(self, value: float, weight: float = 1.0) -> None:
        self.total = self.total * DECAY + value * weight
        self.weight = self.weight * DECAY + weight

    def mean(self) -> float | None:
        return self.total / self.weight if self.weight > 1e-9 else None


@dataclass
class AutoK:
    """The cost-aware draft length (see the module docstring).

    Attributes:
        k_max: the longest draft considered.
        k: the draft length of the first pass (before anything was measured).
        expected_gain: rate(k) / rate(0) of the last choice (None before costs are known).
        probe_after: plain passes in a row before the next probe (:data:`DRAFT_PROBE_AFTER` doubling to
            :data:`AUTO_PROBE_MAX` after each probe that did not make drafting pay).
        prior: the target's verify curve measured at start-up in its weight format ({n: T(n) / T(1)},
            :func:`specviz.core.costs.verify_curve_of`; None: none), read for the forward sizes this run has not
            timed yet, scaled to the sizes it has (:func:`specviz.core.costs.with_verify_curve`).
    """

    k_max: int
    k: int = 4
    expected_gain: float | None = None
    prior: dict[int, float] | None = None
    _accepted: list[_Decaying] = field(default_factory=list)  # per position: accepted (total) of reached (weight)
    _verify: dict[int, _Decaying] = field(default_factory=dict)  # forward length n -> ms
    _draft: _Decaying = field(default_factory=_Decaying)  # ms per drafted token
    _other: _Decaying = field(default_factory=_Decaying)  # ms per pass
    _since_step: int = 0
    _idle: int = 0
    probe_after: int = DRAFT_PROBE_AFTER
    _probed: bool = False  # the last pass was a probe

    def __post_init__(self) -> None:
        self._accepted = [_Decaying(PRIOR_ACCEPTANCE * PRIOR_WEIGHT, PRIOR_WEIGHT) for _ in range(self.k_max)]

    # ------------------------------------------------------------------------------------------ estimates
    def acceptance(self) -> list[float]:
        """a_1..a_kmax: recent P(position i accepted | positions before it accepted).

        Each is a decaying mean that starts at :data:`PRIOR_ACCEPTANCE` with weight :data:`PRIOR_WEIGHT`; the prior
        decays like an observation. (A prior added afresh to the decayed counts, as before, held a_1 at
        0.5 / 11 = 0.045 or more however many drafts were rejected, since the counts' weight saturates at
        1 / (1 - DECAY) = 10: a run whose drafts were never accepted then kept drafting one or two tokens whenever
        its T(2) happened to be timed 5 % under T(1), which a drifting machine does for dozens of passes. On the
        seeded drifting-machine model of tests/test_draft_length.py, with no draft ever accepted, 48 tokens went from
        0.94x to 0.96x standard decoding; docs/performance-journal.md section 18.)"""
        return [accepted.mean() for accepted in self._accepted]

    def verify_ms(self, k: int) -> float | None:
        """T_verify(k), ms: the target forward of a pass verifying ``k`` drafted tokens (a forward over n = k + 1
        tokens; T_verify(0) is a plain step's), as :meth:`specviz.core.costs.Costs.verify_ms` means it. The measured
        mean for n tokens, else the start-up's curve for the target's format (:attr:`prior`) scaled to this run, else
        :func:`~specviz.core.costs.interpolate`'d between measured sizes (the end segments'
        slopes, floored at 0, continue outside them; :data:`PRIOR_SLOPE` while only one size is known); None before
        any pass."""
        known = {size: avg.mean() for size, avg in self._verify.items() if avg.mean() is not None}
        known = with_verify_curve(known, self.prior)
        if not known:
            return None
        lone_slope = 0.0
        if len(known) == 1:
            ((x, y),) = known.items()
            lone_slope = y * PRIOR_SLOPE / (1 + PRIOR_SLOPE * (x - 1))
        return max(1e-6, interpolate(known, k + 1, lone_slope=lone_slope))

    def rate(self, k: int, rates: list[float]) -> float | None:
        """Expected tokens per ms at draft length k (None before any cost is known): :func:`expected_tokens` of the
        recent per-position acceptance ``rates`` over :func:`pass_ms` of T_verify(k), T_draft and T_other."""
        verify = self.verify_ms(k)
        if verify is None:
            return None
        cost = pass_ms(verify, k, self._draft.mean() or 0.0, self._other.mean() or 0.0)
        return expected_tokens(rates, k) / cost

    # ------------------------------------------------------------------------------------------ choosing
    def choose(self, budget: int, ready: bool = True) -> int:
        """The draft length for the next pass, in 0..min(k_max, budget) (``ready`` is not used: a drafter with
        nothing to propose makes its pass a plain step by itself)."""
        limit = max(0, min(self.k_max, budget))
        rates = self.acceptance()
        values = [self.rate(k, rates) for k in range(limit + 1)]
        if values[0] is None:  # nothing measured yet: the configured start
            self.expected_gain = None
            return min(self.k, limit)
        best = max(range(limit + 1), key=lambda k: (values[k], -k))
        self.expected_gain = values[best] / values[0]
        probed, self._probed = self._probed, False
        if best > 0:
            self.probe_after = DRAFT_PROBE_AFTER
        elif probed:
            self.probe_after = min(2 * self.probe_after, AUTO_PROBE_MAX)  # the probe did not make drafting pay
        if best > 0 and 1 not in self._verify or self._since_step >= STEP_PROBE_EVERY:
            best = 0  # sample T(1): the anchor of every comparison
        elif best == 0 and self._idle >= self.probe_after and limit > 0:
            best = min(PROBE_K, limit)  # has acceptance come back?
            self._probed = True
        return best

    def observe(self, requested: int, proposed: int, accepted: int, *, verify_ms: float = 0.0,
                draft_ms: float = 0.0, other_ms: float = 0.0, forward_tokens: int = 0) -> None:
        """Learn from a pass: ``requested`` k, ``proposed`` and ``accepted`` drafts, its times (ms) and the number
        of tokens its target forward read (``forward_tokens``, 1 + the drafts)."""
        if forward_tokens > 0:
            self._verify.setdefault(forward_tokens, _Decaying()).add(verify_ms)
            self._other.add(other_ms)
        if proposed > 0:
            self._draft.add(draft_ms / proposed, proposed)
        self._since_step = 0 if forward_tokens == 1 else self._since_step + 1
        self._idle = self._idle + 1 if requested == 0 else 0
        for i in range(min(requested, self.k_max)):  # position i+1 was reached iff the i before it were accepted
            if i > accepted:
                break
            self._accepted[i].add(1.0 if i < accepted else 0.0)


class GateK:
    """k = auto for a drafter whose passes have a single shape (lookahead decoding: a window and candidates of
    N-1 tokens in every forward, ``fixed_k``): before each pass, draft the full pass or take a plain one-token step
    (k = 0), whichever is expected faster,

        gain = (E[tokens per full pass] / E[full pass ms]) / (1 / E[step ms]),

    with both costs (the forward plus drafting and bookkeeping, ms) the median of the last :data:`GATE_COST_WINDOW`
    passes of their kind and the tokens a full pass emitted (accepted + 1) a decaying mean over this run's own passes.
    A median, because a shared machine's interference only ever adds time: one step timed during a stall (108 ms
    against a usual 70 on the project's VM) once kept a whole answer drafting at 0.93x on a decaying mean. For the
    same reason the gate times :data:`GATE_STEP_SAMPLES` plain steps in a row after its first counted full pass
    before it trusts the comparison: a step costs nothing against standard decoding, which is all steps, while
    more full passes would cost where they do not pay.
    gain >= 1 drafts; below, the run takes plain steps. The probes are
    :class:`AutoK`'s: a step every :data:`STEP_PROBE_EVERY` full passes keeps T(1) fresh, and a full pass after
    :data:`DRAFT_PROBE_AFTER` steps in a row tests whether drafting pays again (a lookahead window advances only on
    its own passes, so the probe is also what lets its pool grow). A full pass costs far more than :class:`AutoK`'s
    one-token probe (1.15-1.45 steps for lookahead's 11 tokens), so each probe after which drafting still does not
    pay doubles the gap to the next, up to :data:`GATE_PROBE_MAX` steps (the probes then cost under 1 % of the
    run); a choice to draft resets it. A drafter that needs passes to warm up (lookahead's pool is empty until its
    window has N-1 levels) gets ``warmup`` full passes first whose cost and tokens are not counted, so the gate does
    not judge it by passes that could not win. The output never depends on the choice.

    A full pass can only beat a step through its candidates (lookahead's verification branch), so the engine tells
    :meth:`choose` whether the drafter has any for the last committed token (``ready``). A probe waits for one: a
    pass without candidates emits exactly one token at more than a step's cost and says nothing about acceptance
    (after plain steps the window's guesses are stale too). With ``wait`` (a pool seeded from the prompt, which can
    hold candidates before the window has run) the warm-up's first pass waits the same way, so a run that never
    reaches a candidate (a translation whose words the prompt does not contain) is standard decoding throughout;
    without it (an empty pool that only the window can fill) the warm-up starts at once. With ``wait``, a warm-up
    pass that carried a candidate is evidence like any counted pass (its cost and its tokens are counted) and ends
    the warm-up: a rejected first pass then sends the run to plain steps at once instead of after the rest of the
    warm-up and a counted pass (suite paired A/B, docs/performance-journal.md section 16). Once warm-up has begun, and
    while drafting pays, full passes run whether or not they carry candidates, so the window keeps sliding.

    Attributes:
        k_max: the drafter's fixed draft length (tokens per candidate).
        warmup: full passes run first and left out of the means (>= 0).
        wait: hold the first full pass until the drafter has a candidate (``ready``).
        expected_gain: the last choice's gain over a step (None before both kinds of pass were timed).
        probe_after: plain steps in a row before the next probe (:data:`DRAFT_PROBE_AFTER` doubling to
            :data:`GATE_PROBE_MAX`).
    """

    def __init__(self, k: int, warmup: int = 0, wait: bool = False) -> None:
        self.k_max, self.warmup, self.wait = k, max(0, warmup), wait
        self._full_passes = 0
        self.expected_gain: float | None = None
        self._full: deque[float] = deque(maxlen=GATE_COST_WINDOW)  # ms of recent full passes
        self._step: deque[float] = deque(maxlen=GATE_COST_WINDOW)  # ms of recent one-token steps
        self._steps_timed = 0
        self._tokens = _Decaying()  # tokens emitted per full pass
        self._since_step = 0
        self._idle = 0
        self.probe_after = DRAFT_PROBE_AFTER  # steps in a row before the next probe
        self._probed = False  # the last pass was a probe
        self._carried = False  # the drafter had a candidate when the last full pass was chosen

    def choose(self, budget: int, ready: bool = True) -> int:
        """The next pass's draft length: ``k_max`` (a full pass) or 0 (a plain step); ``ready``: the drafter has a
        candidate for the last committed token."""
        if budget <= 0:
            return 0
        self._carried = ready
        if not self._full:
            if self.wait and self._full_passes == 0 and not ready:
                return 0  # a first pass without a candidate could not win: wait for one
            return self.k_max  # warming up, or no counted full pass yet
        if self._steps_timed < GATE_STEP_SAMPLES:
            return 0  # time T(1), the anchor of the comparison, a few times in a row before trusting it
        full, step, tokens = statistics.median(self._full), statistics.median(self._step), self._tokens.mean()
        self.expected_gain = predicted_speedup(tokens, step, max(full, 1e-6))
        probed, self._probed = self._probed, False
        if self.expected_gain >= 1.0:
            self.probe_after = DRAFT_PROBE_AFTER
            return 0 if self._since_step >= STEP_PROBE_EVERY else self.k_max
        if probed:
            self.probe_after = min(2 * self.probe_after, GATE_PROBE_MAX)
        if self._idle >= self.probe_after and ready:  # a probe without a candidate would learn nothing
            self._probed = True
            return self.k_max
        return 0

    def observe(self, requested: int, proposed: int, accepted: int, *, verify_ms: float = 0.0,
                draft_ms: float = 0.0, other_ms: float = 0.0, forward_tokens: int = 0) -> None:
        """Learn from a pass: ``requested`` > 0 for a full pass (then ``accepted`` drafts were kept), its times in
        ms (``proposed`` and ``forward_tokens`` are not needed: every full pass has the same shape)."""
        cost = verify_ms + draft_ms + other_ms
        if requested > 0:
            if self._full_passes < self.warmup and self.wait and self._carried:
                self._full_passes = self.warmup  # it carried a candidate: evidence, and the warm-up ends here
            if self._full_passes >= self.warmup:  # a warm-up pass is neither a full pass's cost nor its yield
                self._full.append(cost)
                self._tokens.add(1.0 + accepted)
            self._full_passes += 1
            self._since_step += 1
            self._idle = 0
        else:
            self._step.append(cost)
            self._steps_timed += 1
            self._since_step = 0
            self._idle += 1
