"""Where an arena run is, in words: "prompt 2 of 6, method 1 of 2" and, once a first prompt is measured, the time
left and the whole run's length estimated from that prompt's measured rate (:class:`ArenaPace`). Before that, a
rough range from the newest step cost this process measured for the target in the format the arena runs
(:func:`estimate`: prompts x methods x max new tokens x that cost; :mod:`app.arena.costs` picks it; nothing is
timed for it): "up to" its upper end, as runs that stop at the end-of-sequence token end sooner, widened and said
so when the machine is busier now than when the cost was measured, or, where nothing was measured, that there is
none. Pure bookkeeping: the handler feeds it the job's progress messages and the
prompts finished; a test passes its own clock and costs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from app.render import seconds_text
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


BUSY_SHARE = 0.5
"""A load average above this share of the CPU count before a run: the machine is busy now (the rule of
:func:`specviz.measure.machine.busy_machine_warning` where no run is under way to measure)."""


@dataclass(frozen=True)
class ArenaEstimate:
    """A whole arena run's length before its first prompt is measured, in seconds: at most ``high_s`` (every run
    writes all its max new tokens, each drafter's run at :data:`METHOD_TIME`'s slow end), ``full_low_s`` when every
    run writes them all at the fast end, and as little as ``low_s`` when every run stops at the end-of-sequence
    token right after its prompt read (only the reads are left), from ``ms_per_token`` (standard decoding's
    wall-clock ms per token, from ``source``, in words). ``load``: (load average, CPUs) now (None: unknown);
    ``measured_load``: other programs' (load, CPUs) while the cost was measured (None: unknown); ``factor``:
    :func:`load_factor` of the two, already applied (to the upper end above 1, to both lower ends below 1);
    ``measured_high_s``: the upper end before it."""

    low_s: float
    full_low_s: float
    high_s: float
    ms_per_token: float
    source: str
    load: tuple[float, int] | None = None
    measured_load: tuple[float, int] | None = None
    factor: float = 1.0
    measured_high_s: float | None = None

    def range_text(self) -> str:
        """ "up to roughly 3 min 41 s in all on a quiet machine: 42 s – 3 min 41 s if every run writes all its max
        new tokens, as little as 4 s if runs stop early at the end-of-sequence token", then what the load changed
        (:meth:`load_text`)."""
        low, full_low, high = (seconds_text(v, at_least=1) for v in (self.low_s, self.full_low_s, self.high_s))
        where, why = self.load_text()
        return (f"up to roughly {high} in all {where}: {full_low} – {high} if every run writes all its max new "
                f"tokens, as little as {low} if runs stop early at the end-of-sequence token{why}")

    def load_text(self) -> tuple[str, str]:
        """(the machine the range is for, what the load changed: "" or "; the upper end is …"), in words."""
        now, then = self.load, self.measured_load
        if then is None:
            if self.factor == 1.0:
                return "on a quiet machine", ""
            quiet = seconds_text(self.measured_high_s or self.high_s, at_least=1)
            return (f"with the machine as busy as now (load average {now[0]:.1f} on {now[1]} CPUs)",
                    f"; the upper end is {self.factor:.3g}x a quiet machine's {quiet} for sharing the CPUs, more if "
                    "other programs slow each step further")
        loads = (f"other programs' load {then[0]:.1f} on {then[1]} CPUs then"
                 + (f", load average {now[0]:.1f} now" if now is not None else ""))
        if self.factor > 1.0:
            measured = seconds_text(self.measured_high_s or self.high_s, at_least=1)
            return (f"with the machine busier than when its step cost was measured ({loads})",
                    f"; the upper end is {self.factor:.3g}x the measured cost's {measured} for the load added "
                    "since, more if other programs slow each step further")
        if self.factor < 1.0:
            return (f"with the machine quieter than when its step cost was measured ({loads})",
                    f"; the lower ends are {self.factor:.3g}x the measured cost's for the load gone since")
        if not is_busy(then) and not is_busy(now):
            return "on a quiet machine", ""
        if now is None:
            return f"at the load its step cost was measured at ({loads})", ""
        return f"with the machine as busy as when its step cost was measured ({loads})", ""

    def basis_text(self) -> str:
        """What the range rests on, in words."""
        return (f"a rough estimate from {self.ms_per_token:.0f} ms a token of standard decoding ({self.source}), "
                f"each drafter's run taken as {METHOD_TIME[0]:g}–{METHOD_TIME[1]:g} times a standard run's time")


def is_busy(load: tuple[float, int] | None) -> bool:
    """Whether ``load`` ((load, CPU count); None: unknown, not busy) is above :data:`BUSY_SHARE` of the CPUs."""
    return load is not None and load[0] > BUSY_SHARE * max(1, load[1])


def busy_factor(load: float, cpus: int) -> float:
    """How much longer a run takes on ``cpus`` CPUs (>= 1) with a load average of ``load`` from other programs,
    when it gets its fair share of them: its threads share the CPUs with that many others, 1 + load / cpus (e.g.
    2.0 on 2 CPUs: 2x). A lower bound: a one-token step whose thread is descheduled slows more (5-14x seen)."""
    return 1.0 + max(0.0, load) / max(1, cpus)


def load_factor(now: tuple[float, int] | None, measured: tuple[float, int] | None) -> float:
    """How much slower (above 1) or faster (below 1) a run should go now than when its step cost was measured, from
    the load other programs put on the machine now (``now``: (load average, CPUs)) and then (``measured``: (load,
    CPUs), :attr:`app.costs.RunCosts.measured_load`): :func:`busy_factor` now over then, as the measured cost
    already holds the slowness of its own load. E.g. 2.0 then on 2 CPUs: 1 at 2.0 now (not widened again), 1.25 at
    3.0 now (2.5 / 2), 0.75 at 1.0 now. With the load then unknown the cost is taken as a quiet machine's: a busy
    machine now (:func:`is_busy`) gives its whole :func:`busy_factor`, a quiet one 1. With the load now unknown: 1."""
    if now is None:
        return 1.0
    if measured is None:
        return busy_factor(*now) if is_busy(now) else 1.0
    return busy_factor(*now) / busy_factor(*measured)


def _runs_s(costs: StepCosts, prompt_tokens: int, new_tokens: int, standard: int, methods: int, share: float
            ) -> float:
    """Seconds of ``standard`` standard runs and ``methods`` drafters' runs of one prompt of ``prompt_tokens``
    tokens, each reading the prompt and writing ``new_tokens`` (the first from the prefill), a drafter's decoding
    taking ``share`` times standard decoding's."""
    prefills = (standard + methods) * costs.prefill_s(prompt_tokens, False)
    return prefills + max(new_tokens - 1, 0) * costs.base_ms_per_token / 1000.0 * (standard + methods * share)


def estimate(costs: StepCosts | None, prompt_tokens: Sequence[int], methods: int, max_new_tokens: int,
             warmup_tokens: int = WARMUP_TOKENS, load: tuple[float, int] | None = None) -> ArenaEstimate | None:
    """How long an arena of ``methods`` drafter methods on prompts of ``prompt_tokens`` tokens (one entry per
    prompt) should take, before anything of it is measured, in the order
    :func:`specviz.analysis.arena.iter_arena` runs: one warm-up of standard decoding and of each method on the first
    prompt (``warmup_tokens`` new tokens at most), then per prompt an untimed prefill and B, m1, B, …, B
    (``methods + 1`` standard runs and ``methods`` drafters' runs of at most ``max_new_tokens``).

    From ``costs`` (:func:`app.arena.costs.chosen_costs`: standard decoding's ms per token measured here and a
    prompt's read): a drafter's run takes :data:`METHOD_TIME` times a standard run's decoding, and the range is
    widened by the costs' own ``spread``. Every run may stop at the end-of-sequence token before its max new tokens,
    so the low end ``low_s`` is every run stopping at its first token (the prompt reads alone); ``full_low_s`` is
    the low end when every run writes them all. Loading and the drafters' set-up are not in it. E.g. 6 prompts of
    40 tokens, 2 methods, 48 new tokens, 50 ms a token, 2 ms per prompt token, spread (0.7, 1.6): 60.22 s x 0.7 =
    42 s to 138.25 s x 1.6 = 221 s when every run writes all 48, from 3.12 s x 0.7 = 2.2 s when each stops at once.
    ``load``: (load average, CPUs) now; the load the cost was measured at (``costs.measured_load``, when it has
    one) sets how much of it is new (:func:`load_factor`: above 1 times the upper end, below 1 the lower ends;
    221 s x 2 = 442 s at a load of 2.0 on 2 CPUs after a quiet measurement, 221 s when measured at 2.0 too).

    Returns None without costs (nothing measured for this target yet) or without prompts."""
    if costs is None or not prompt_tokens or not costs.base_ms_per_token or costs.base_ms_per_token <= 0:
        return None
    methods, warm = max(1, methods), min(warmup_tokens, max_new_tokens)

    def total(share: float, new_tokens: int = max_new_tokens, warm: int = warm) -> float:
        race = sum(_runs_s(costs, n, new_tokens, methods + 1, methods, share) + costs.prefill_s(n, False)
                   for n in prompt_tokens)
        return race + (_runs_s(costs, prompt_tokens[0], warm, 1, methods, share) if warm > 0 else 0.0)

    low, high = costs.spread
    measured = getattr(costs, "measured_load", None)
    factor = load_factor(load, measured)
    quick = min(1.0, factor)  # a quieter machine than measured: the lower ends come down, the upper end stays
    at_high = total(METHOD_TIME[1]) * high
    return ArenaEstimate(total(METHOD_TIME[0], 1, min(warm, 1)) * low * quick, total(METHOD_TIME[0]) * low * quick,
                         at_high * max(1.0, factor), costs.base_ms_per_token, costs.source, load, measured, factor,
                         at_high)


NOW = object()
"""``rough_estimate``'s default load: the machine's, read now."""


def rough_estimate(s: dict, now: float | None = None, load=NOW) -> ArenaEstimate | None:
    """:func:`estimate` for the checked arena settings ``s`` (:func:`app.arena.settings.parse_inputs`: its
    ``prompts``, ``drafters`` x ``ks`` methods, ``max_new_tokens`` and ``target``), from the newest cost this process
    measured for the target in the format the arena runs (:func:`app.arena.costs.chosen_costs`; ``now``: time.time()
    s; nothing is timed here), each prompt's tokens counted from its characters
    (:data:`app.costs.CHARS_PER_TOKEN`), set for the load now against the load the cost was measured at (``load``:
    (load average, CPUs) or None; by default :func:`app.arena.costs.machine_load`); None when nothing was
    measured."""
    from app.arena.costs import chosen_costs, machine_load
    from app.costs import CHARS_PER_TOKEN

    tokens = [max(1, round(len(str(p.get("prompt") or "")) / CHARS_PER_TOKEN)) for p in s["prompts"]]
    methods = len(s["drafters"]) * len(s["ks"])
    return estimate(chosen_costs(s["target"], now), tokens, methods, s["max_new_tokens"],
                    load=machine_load() if load is NOW else load)


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

    def started(self, fraction: float, message: str) -> bool:
        """Note the job's progress line ``(fraction 0..1, message)``; True when it begins a timed run (its message
        names a prompt: "code-edit-3 (code-edit): early-exit k=auto")."""
        if not any(message.startswith(f"{pid} (") for pid in self.ids):
            return False
        self.run = round(fraction * len(self.ids) * self.per_prompt)
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

    def seconds_per_prompt(self) -> float | None:
        """The measured seconds per prompt (None before a first prompt finished)."""
        if not self.done or self.first is None:
            return None
        return (self.done_at - self.first) / self.done

    def timing(self) -> str:
        """ "about 4 min 10 s left of about 7 min 0 s (the pace of the first prompt)"; before a first prompt is
        measured, the rough range (:meth:`ArenaEstimate.range_text`: "up to roughly 3 min 41 s in all on a quiet
        machine: …, a rough estimate until the first prompt is measured"), or :data:`UNMEASURED`."""
        rate = self.seconds_per_prompt()
        if rate is None:
            if self.rough is None:
                return UNMEASURED
            return f"{self.rough.range_text()}, a rough estimate until the first prompt is measured"
        left = max(0.0, (len(self.ids) - self.done) * rate - (self.clock() - self.done_at))
        total = len(self.ids) * rate
        measured = "the first prompt" if self.done == 1 else f"the first {self.done} prompts"
        return f"about {seconds_text(left)} left of about {seconds_text(total)} (the pace of {measured})"
