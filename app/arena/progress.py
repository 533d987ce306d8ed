"""Where an arena run is, in words: "prompt 2 of 6, method 1 of 2" and, once a first prompt is measured, the time
left and the whole run's length estimated from that prompt's measured rate (:class:`ArenaPace`). Before that, a
rough range from the newest step cost this process measured for the target in the format the arena runs
(:func:`estimate`: prompts x methods x max new tokens x that cost; :mod:`app.arena.costs` picks it; nothing is
timed for it), its upper end widened and said so when the machine is busy now, or, where nothing was measured,
that there is none. Pure bookkeeping: the handler feeds it the job's progress messages and the
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
    """What :func:`estimate` reads of :class:`app.costs.RunCosts`."""

    base_ms_per_token: float
    source: str
    spread: tuple[float, float]

    def prefill_s(self, prompt_tokens: int, drafter: bool) -> float: ...


@dataclass(frozen=True)
class ArenaEstimate:
    """A whole arena run's length before its first prompt is measured: ``low_s`` to ``high_s`` seconds, from
    ``ms_per_token`` (standard decoding's wall-clock ms per token, from ``source``, in words). ``load``: (load
    average, CPUs) when the machine is busy now; ``high_s`` is then widened by :func:`busy_factor` from
    ``quiet_high_s``, the upper end on a quiet machine."""

    low_s: float
    high_s: float
    ms_per_token: float
    source: str
    load: tuple[float, int] | None = None
    quiet_high_s: float | None = None

    def range_text(self) -> str:
        """ "roughly 42 s – 3 min 41 s in all on a quiet machine"; on a busy one "roughly 42 s – 7 min 22 s in all
        with the machine as busy as now, load average 2.0 on 2 CPUs: the upper end is 2x a quiet machine's 3 min 41 s
        for sharing the CPUs, more if other programs slow each step further"."""
        low, high = seconds_text(self.low_s, at_least=1), seconds_text(self.high_s, at_least=1)
        if self.load is None:
            return f"roughly {low} – {high} in all on a quiet machine"
        load, cpus = self.load
        quiet = seconds_text(self.quiet_high_s or self.high_s, at_least=1)
        return (f"roughly {low} – {high} in all with the machine as busy as now, load average {load:.1f} on {cpus} "
                f"CPUs: the upper end is {busy_factor(load, cpus):.2g}x a quiet machine's {quiet} for sharing the "
                "CPUs, more if other programs slow each step further")

    def basis_text(self) -> str:
        """What the range rests on, in words."""
        return (f"a rough estimate from {self.ms_per_token:.0f} ms a token of standard decoding ({self.source}), "
                f"each drafter's run taken as {METHOD_TIME[0]:g}–{METHOD_TIME[1]:g} times a standard run's time, "
                "every run writing all its max new tokens")


def busy_factor(load: float, cpus: int) -> float:
    """How much longer a run takes on ``cpus`` CPUs (>= 1) with a load average of ``load`` from other programs,
    when it gets its fair share of them: its threads share the CPUs with that many others, 1 + load / cpus (e.g.
    2.0 on 2 CPUs: 2x). A lower bound: a one-token step whose thread is descheduled slows more (5-14x seen)."""
    return 1.0 + max(0.0, load) / max(1, cpus)


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
    (``methods + 1`` standard runs and ``methods`` drafters' runs of ``max_new_tokens``).

    From ``costs`` (:func:`app.costs.known_costs`: standard decoding's ms per token measured here, by the
    start-up's timed forwards or recent Live runs, and a prompt's read): a drafter's run takes :data:`METHOD_TIME`
    times a standard run's decoding, and the range is widened by the costs' own ``spread``. Loading, the drafters'
    set-up and a busy machine are not in it. E.g. 6 prompts of 40 tokens, 2 methods, 48 new tokens, 50 ms a token,
    2 ms per prompt token, spread (0.7, 1.6): 60.22 s x 0.7 = 42 s to 138.25 s x 1.6 = 221 s. ``load``: (load
    average, CPUs) when the machine is busy now: the upper end times :func:`busy_factor` (221 s x 2 = 442 s at a
    load of 2.0 on 2 CPUs).

    Returns None without costs (nothing measured for this target yet) or without prompts."""
    if costs is None or not prompt_tokens or not costs.base_ms_per_token or costs.base_ms_per_token <= 0:
        return None
    methods, warm = max(1, methods), min(warmup_tokens, max_new_tokens)

    def total(share: float) -> float:
        race = sum(_runs_s(costs, n, max_new_tokens, methods + 1, methods, share) + costs.prefill_s(n, False)
                   for n in prompt_tokens)
        return race + (_runs_s(costs, prompt_tokens[0], warm, 1, methods, share) if warm > 0 else 0.0)

    low, high = costs.spread
    quiet = total(METHOD_TIME[1]) * high
    factor = busy_factor(*load) if load is not None else 1.0
    return ArenaEstimate(total(METHOD_TIME[0]) * low, quiet * factor, costs.base_ms_per_token, costs.source, load,
                         quiet)


NOW = object()
"""``rough_estimate``'s default load: the machine's, read now."""


def rough_estimate(s: dict, now: float | None = None, load=NOW) -> ArenaEstimate | None:
    """:func:`estimate` for the checked arena settings ``s`` (:func:`app.arena.settings.parse_inputs`: its
    ``prompts``, ``drafters`` x ``ks`` methods, ``max_new_tokens`` and ``target``), from the newest cost this process
    measured for the target in the format the arena runs (:func:`app.arena.costs.chosen_costs`; ``now``: time.time()
    s; nothing is timed here), each prompt's tokens counted from its characters
    (:data:`app.costs.CHARS_PER_TOKEN`), widened when the machine is busy now (``load``: (load average, CPUs)
    or None; by default :func:`app.arena.costs.machine_load`); None when nothing was measured."""
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
        measured, the rough range (:meth:`ArenaEstimate.range_text`: "roughly 42 s – 3 min 41 s in all on a quiet
        machine, a rough estimate until the first prompt is measured"), or :data:`UNMEASURED`."""
        rate = self.seconds_per_prompt()
        if rate is None:
            if self.rough is None:
                return UNMEASURED
            return f"{self.rough.range_text()}, a rough estimate until the first prompt is measured"
        left = max(0.0, (len(self.ids) - self.done) * rate - (self.clock() - self.done_at))
        total = len(self.ids) * rate
        measured = "the first prompt" if self.done == 1 else f"the first {self.done} prompts"
        return f"about {seconds_text(left)} left of about {seconds_text(total)} (the pace of {measured})"
