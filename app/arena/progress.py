"""Where an arena run is, in words: "prompt 2 of 6, method 1 of 2" and, once a first prompt is measured, the time
left and the whole run's length estimated from that prompt's measured rate (:class:`ArenaPace`). Before that, a
rough range from the newest step cost this process measured for the target in the format the arena runs
(:func:`estimate`: prompts x methods x max new tokens x that cost; :mod:`app.arena.costs` picks it; nothing is
timed for it), each method's run at the share of a standard run's time the latest arena or Live run here measured
for it, else on the CPU at its prior measured on the project's CPU (:func:`app.arena.costs.method_shares`, read from
:mod:`app.shares` as the Live tab's plan reads it), any other method at :data:`METHOD_TIME`: one middle figure with
its range, moved by the load changed since an older cost was measured and said plainly on a very busy machine
(:func:`app.estimates.make_estimate`, shared with the other tabs), or, where nothing was measured, that there is
none. Pure bookkeeping: the handler feeds it the job's progress messages and the prompts finished; a test passes its
own clock and costs."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from app.costs import tokens_about
from app.estimates import (BUSY_PER_CPU, LOAD_WINDOW_S, SHORTER, Estimate, busy_factor, is_busy,  # noqa: F401 - shared
                           load_factor, make_estimate)
from app.render import seconds_text
from app.shares import MethodShare, PriorShare  # noqa: F401 - MethodShare re-exported (its home was here)
from specviz.analysis.arena_rows import WARMUP_TOKENS

METHOD_TIME = (0.5, 3.2)
"""A drafter's run, as a share of the time of a standard run of as many tokens, before anything is measured: from
half (twice as fast: above every speedup measured on the project's CPU, 1.76x at best) to 3.2 times (the untrained
early exit at k = 4 decoded at 0.32x, docs/heads.md)."""


class StepCosts(Protocol):
    """What :func:`estimate` reads of :class:`app.costs.RunCosts` (and its ``measured_load`` where it has one)."""

    base_ms_per_token: float
    source: str
    spread: tuple[float, float]

    def prefill_s(self, prompt_tokens: int, drafter: bool) -> float: ...


BUSY_SHARE = BUSY_PER_CPU
"""A load above this share of the CPU count: the machine is busy now (:func:`app.estimates.is_busy`)."""
MIDDLE_SHARE = math.sqrt(METHOD_TIME[0] * METHOD_TIME[1])
"""A drafter's run's share of a standard run's time for the middle figure: the middle of :data:`METHOD_TIME`."""
STOPS_EARLY = "less if runs stop early at the end-of-sequence token"


@dataclass(frozen=True)
class ArenaEstimate:
    """A whole arena run's length before its first prompt is measured: ``estimate`` (:class:`app.estimates.Estimate`,
    seconds) when every run writes all its max new tokens, each method's run at its known share of a standard
    run's time (``measured``: the ``methods``' shares known, measured here or a :class:`app.shares.PriorShare`) or,
    none known, at :data:`MIDDLE_SHARE` for the middle figure and at :data:`METHOD_TIME`'s ends for the range, with the cost's spread; from ``ms_per_token``
    (standard decoding's wall-clock ms per token, from ``source``, in words); ``measured_load``: other programs'
    (load, CPUs) then (None: unknown); ``age_s``: how long ago the cost was measured (None: unknown), under
    :data:`LOAD_WINDOW_S` the load change widens the range only."""

    estimate: Estimate
    ms_per_token: float
    source: str
    measured_load: tuple[float, int] | None = None
    methods: int = 1
    measured: tuple[MethodShare, ...] = ()
    age_s: float | None = None

    def range_text(self, shorter: bool = True) -> str:
        """ "about 4 min (2–6 min) in all on a quiet machine, less if runs stop early at the end-of-sequence token";
        busy: "… in all with the machine as busy as now (load 3 on 2 CPUs; 1.5x the time measured at load 1), …";
        very busy: "the machine is very busy now (load 12 on 2 CPUs): this may take 10–40 min in all, less if runs
        stop early …; fewer tokens or prompts make it shorter" (``shorter`` False: without that last clause, for a
        status that names the change and its figure, :func:`app.arena.shorter.quicker`)."""
        e = self.estimate
        if e.very_busy:
            return f"{e.text('')} in all, {STOPS_EARLY}" + (f"; {SHORTER}" if shorter else "")
        return f"{e.text()} in all {self.load_text()}, {STOPS_EARLY}"

    def load_text(self) -> str:
        """The machine the estimate is for, in words: "on a quiet machine", "with the machine as busy as now (load
        3.0 on 2 CPUs; 1.5x the time measured at load 1.0)", "… (load 2.7 on 2 CPUs; its step time, measured 60 s
        ago, already ran beside it)" (a recent cost: :data:`LOAD_WINDOW_S`)."""
        now, then = self.estimate.load, self.measured_load
        if not is_busy(now) and not is_busy(then):
            return "on a quiet machine"
        if now is None:
            return f"at the load its step cost was measured at ({then[0]:.1f} on {then[1]} CPUs)"
        moved = (f"; {self.estimate.factor:.3g}x the time measured at load {then[0]:.1f}"
                 if then is not None and abs(self.estimate.factor - 1.0) >= 0.05 else "")
        if self.recent and then is not None:
            moved = f"; its step time, measured {seconds_text(self.age_s, at_least=1)} ago, already ran beside it"
        return f"with the machine as busy as now (load {now[0]:.1f} on {now[1]} CPUs{moved})"

    @property
    def recent(self) -> bool:
        """Whether the cost was measured less than :data:`LOAD_WINDOW_S` ago (its load change moved no figure)."""
        return self.age_s is not None and self.age_s < LOAD_WINDOW_S

    def basis_text(self) -> str:
        """What the estimate rests on, in words: "a rough estimate from 109 ms a token of standard decoding (…),
        each drafter's run taken as 0.5–3.2 times a standard run's time" or, with shares known, "…, 2 of 4 methods'
        runs at the share of a standard run's time the latest runs here measured (0.59–1.28), 1 planned from its
        measured cost on the project's CPU, not yet run here (3.1 times), the others taken as 0.5–3.2 times"
        (a :class:`app.shares.PriorShare` is a prior)."""
        basis = f"a rough estimate from {self.ms_per_token:.0f} ms a token of standard decoding ({self.source}), "
        prior = f"{METHOD_TIME[0]:g}–{METHOD_TIME[1]:g} times a standard run's time"
        if not self.measured:
            return basis + f"each drafter's run taken as {prior}"
        here = [m for m in self.measured if not isinstance(m, PriorShare)]
        cpu = [m for m in self.measured if isinstance(m, PriorShare)]
        parts = [f"{len(here)} of {self.methods} methods' runs at the share of a standard run's time the latest runs "
                 f"here measured ({_shares_span(here)})"] if here else []
        if cpu:
            count = f"{len(cpu)}" if here else f"{len(cpu)} of {self.methods} methods' runs"
            own = "its" if len(cpu) == 1 else "their"
            parts.append(f"{count} planned from {own} measured cost on the project's CPU, not yet run here "
                         f"({_shares_span(cpu)} times a standard run's time)")
        rest = "" if len(self.measured) >= self.methods else f", the others taken as {prior}"
        return basis + ", ".join(parts) + rest


def _shares_span(shares: Sequence[MethodShare]) -> str:
    """ "0.59" for one share (or equal ones), "0.59–3.57" from the lowest to the highest of several."""
    values = sorted(m.share for m in shares)
    low, high = f"{values[0]:.2f}", f"{values[-1]:.2f}"
    return low if low == high else f"{low}–{high}"


def _runs_s(costs: StepCosts, prompt_tokens: int, new_tokens: int, standard: int, shares: Sequence[float]) -> float:
    """Seconds of ``standard`` standard runs and one run of each method of one prompt of ``prompt_tokens`` tokens,
    each reading the prompt and writing ``new_tokens`` (the first from the prefill), a method's decoding taking its
    ``shares`` entry times standard decoding's."""
    prefills = (standard + len(shares)) * costs.prefill_s(prompt_tokens, False)
    return prefills + max(new_tokens - 1, 0) * costs.base_ms_per_token / 1000.0 * (standard + sum(shares))


def estimate(costs: StepCosts | None, prompt_tokens: Sequence[int], methods: int, max_new_tokens: int,
             warmup_tokens: int = WARMUP_TOKENS, load: tuple[float, int] | None = None,
             measured: Sequence[MethodShare] = (), age_s: float | None = None) -> ArenaEstimate | None:
    """How long an arena of ``methods`` drafter methods on prompts of ``prompt_tokens`` tokens (one entry per
    prompt) should take when every run writes all ``max_new_tokens``, before anything of it is measured, in the
    order :func:`specviz.analysis.arena.iter_arena` runs: one warm-up of standard decoding and of each method on the
    first prompt (``warmup_tokens`` new tokens at most), then per prompt an untimed prefill and B, m1, B, …, B.

    From ``costs`` (:func:`app.arena.costs.chosen_costs`: standard decoding's ms per token measured here and a
    prompt's read) and each method's share of a standard run's time: ``measured`` for the methods with a share
    known (:func:`app.arena.costs.method_shares`, at most ``methods``: measured here, or a CPU prior), the others at
    :data:`MIDDLE_SHARE` for the middle figure and :data:`METHOD_TIME`'s ends for the range; the range times the
    costs' ``spread``, drawn in and moved by the load as :func:`app.estimates.make_estimate` does (``load``: other
    programs' (load, CPUs) now; ``costs.measured_load``: then), except for a cost measured ``age_s`` < 
    :data:`LOAD_WINDOW_S` seconds ago, whose load change only widens the range on its side.
    E.g. 6 prompts of 40 tokens, 2 methods, 48 new tokens, 50 ms a token, 2 ms per prompt token, spread (0.7, 1.6):
    the middle 85.9 s, the range 60.2 s x 0.7 = 42 s to 138.2 s x 1.6 = 221 s, drawn in to 3x: 50–149 s.
    Loading and the drafters' set-up are not in it. None without costs or without prompts."""
    if costs is None or not prompt_tokens or not costs.base_ms_per_token or costs.base_ms_per_token <= 0:
        return None
    methods, warm = max(1, methods), min(warmup_tokens, max_new_tokens)
    measured = tuple(measured)[:methods]
    unmeasured = methods - len(measured)

    def total(end: int) -> float:  # end 0: the middle shares, 1: the low ends, 2: the high ends
        prior = (MIDDLE_SHARE, *METHOD_TIME)[end]
        shares = [m[end] for m in measured] + [prior] * unmeasured
        race = sum(_runs_s(costs, n, max_new_tokens, methods + 1, shares) + costs.prefill_s(n, False)
                   for n in prompt_tokens)
        return race + (_runs_s(costs, prompt_tokens[0], warm, 1, shares) if warm > 0 else 0.0)

    low, high = costs.spread
    planned = make_estimate(total(0), total(1) * low, total(2) * high, load, getattr(costs, "measured_load", None),
                            age_s)
    return ArenaEstimate(planned, costs.base_ms_per_token, costs.source, getattr(costs, "measured_load", None),
                         methods, measured, age_s)


NOW = object()
"""``rough_estimate``'s default load: the machine's, read now."""


def rough_estimate(s: dict, now: float | None = None, load=NOW) -> ArenaEstimate | None:
    """:func:`estimate` for the checked arena settings ``s`` (:func:`app.arena.settings.parse_inputs`: its
    ``prompts``, ``drafters`` x ``ks`` methods, ``max_new_tokens`` and ``target``), from the newest cost this process
    measured for the target in the format the arena runs (:func:`app.arena.costs.chosen_costs`; ``now``: time.time()
    s; nothing is timed here) and the methods' shares known (:func:`app.arena.costs.method_shares`: measured by the
    latest arena or Live runs here, else on the CPU their priors), each prompt's tokens counted before tokenizing
    (:func:`app.costs.tokens_about`), for the load now (``load``: (load, CPUs) or None; by default
    :func:`app.arena.costs.machine_load`); None when nothing was measured."""
    from app.arena.costs import chosen_costs, machine_load, method_shares

    now = time.time() if now is None else now
    tokens = [tokens_about(p.get("prompt") or "") for p in s["prompts"]]
    methods = len(s["drafters"]) * len(s["ks"])
    costs = chosen_costs(s["target"], now)
    age = None if costs is None or costs.measured_at is None else max(0.0, now - costs.measured_at)
    shares = method_shares(s["target"], [(d, str(k)) for d in s["drafters"] for k in s["ks"]])
    return estimate(costs, tokens, methods, s["max_new_tokens"], load=machine_load() if load is NOW else load,
                    measured=shares, age_s=age)


UNMEASURED = ("no step time measured for this model here yet, so no estimate: the time left follows once the "
              "first prompt is measured")
"""What the status says before the first prompt is measured when :func:`estimate` has nothing to go on."""


class ArenaPace:
    """The progress of ``prompts`` (their ids, in order) × ``methods`` methods (drafter methods, standard decoding
    not counted), each prompt timed as B, m1, B, m2, …, B (``2 * methods + 1`` runs; the order
    :func:`specviz.analysis.arena.iter_arena` uses). ``clock`` gives seconds; ``rough``: the run's length estimated
    before anything is measured (:func:`estimate`; None: nothing to estimate from)."""

    def __init__(self, prompts: Sequence[str], methods: int, clock: Callable[[], float] = time.monotonic,
                 rough: ArenaEstimate | None = None) -> None:
        self.ids, self.methods, self.clock, self.rough = list(prompts), max(1, methods), clock, rough
        self.per_prompt = 2 * self.methods + 1
        self.run = -1  # index of the timed run under way (of len(ids) * per_prompt); -1 before the first
        self.first: float | None = None  # when the first timed run began (loading and warm-up excluded)
        self.done, self.done_at = 0, 0.0  # prompts finished, and when the last of them finished
        self.label = ""  # the method of the timed run under way ("n-gram k=4"), from its progress line

    def started(self, fraction: float, message: str) -> bool:
        """Note the job's progress line ``(fraction 0..1, message)``; True when it begins a timed run (its message
        names a prompt: "code-edit-3 (code-edit): early-exit k=auto")."""
        if not any(message.startswith(f"{pid} (") for pid in self.ids):
            return False
        self.run = round(fraction * len(self.ids) * self.per_prompt)
        self.label = message.split("): ", 1)[1] if "): " in message else ""
        if self.first is None:
            self.first = self.clock()
        return True

    def prompts_done(self, count: int) -> None:
        """``count`` prompts have finished (each with every method and its standard runs)."""
        if count > self.done:
            self.done, self.done_at = count, self.clock()

    def position(self) -> str:
        """ "prompt 2 of 6, method 1 of 2" (a standard run: "standard decoding after method 1 of 2"); "" before the
        first timed run."""
        if self.run < 0:
            return ""
        prompt, r = divmod(self.run, self.per_prompt)
        where = f"prompt {min(prompt + 1, len(self.ids))} of {len(self.ids)}"
        if r % 2:
            return f"{where}, method {(r + 1) // 2} of {self.methods}"
        if r == 0:
            return f"{where}, standard decoding before method 1 of {self.methods}"
        return f"{where}, standard decoding after method {r // 2} of {self.methods}"

    def stopped_text(self) -> str:
        """Why a Stop left nothing to show, naming what was running: "Stopped while prompt 1 of 6 was running (2 of
        its 5 runs done, n-gram k=4 under way): nothing finished to show; a prompt's rows appear once all 5 of its
        runs finish (standard decoding before, between and after the methods)." Before the first timed run: that
        the Stop came while loading or warming up."""
        if self.run < 0:
            return ("Stopped while loading or warming up, before the first prompt's timed runs began: nothing "
                    "finished to show.")
        prompt, r = divmod(self.run, self.per_prompt)
        under_way = f", {self.label} under way" if self.label else ""
        return (f"Stopped while prompt {min(prompt + 1, len(self.ids))} of {len(self.ids)} was running ({r} of its "
                f"{self.per_prompt} runs done{under_way}): nothing finished to show; a prompt's rows appear once all "
                f"{self.per_prompt} of its runs finish (standard decoding before, between and after the methods).")

    def seconds_per_prompt(self) -> float | None:
        """The measured seconds per prompt (None before a first prompt finished)."""
        if not self.done or self.first is None:
            return None
        return (self.done_at - self.first) / self.done

    def timing(self) -> str:
        """ "about 4 min 10 s left of about 7 min 0 s (the pace of the first prompt)"; before a first prompt is
        measured, the rough estimate (:meth:`ArenaEstimate.range_text`: "about 4 min (2–7 min) in all on a quiet
        machine, …, a rough estimate until the first prompt is measured"), or :data:`UNMEASURED`."""
        rate = self.seconds_per_prompt()
        if rate is None:
            if self.rough is None:
                return UNMEASURED
            return f"{self.rough.range_text()}, a rough estimate until the first prompt is measured"
        left = max(0.0, (len(self.ids) - self.done) * rate - (self.clock() - self.done_at))
        total = len(self.ids) * rate
        measured = "the first prompt" if self.done == 1 else f"the first {self.done} prompts"
        return f"about {seconds_text(left)} left of about {seconds_text(total)} (the pace of {measured})"
