"""Where an arena run is, in words: "prompt 2 of 6, method 1 of 2" and, once a first prompt is measured, the time
left and the whole run's length estimated from that prompt's measured rate (:class:`ArenaPace`). Pure bookkeeping:
the handler feeds it the job's progress messages and the prompts finished; a test passes its own clock."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from app.render import seconds_text


class ArenaPace:
    """The progress of ``prompts`` (their ids, in order) × ``methods`` methods (drafter methods, standard decoding
    not counted), each prompt timed as B, m1, B, m2, …, B (``2 * methods + 1`` runs; the order
    :func:`specviz.analysis.arena.iter_arena` uses). ``clock`` gives seconds."""

    def __init__(self, prompts: Sequence[str], methods: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ids, self.methods, self.clock = list(prompts), max(1, methods), clock
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
        """ "about 4 min 10 s left of about 7 min 0 s (the pace of the first prompt)"; before a first
        prompt is measured, that the estimate follows."""
        rate = self.seconds_per_prompt()
        if rate is None:
            return "the time left follows once the first prompt is measured"
        left = max(0.0, (len(self.ids) - self.done) * rate - (self.clock() - self.done_at))
        total = len(self.ids) * rate
        measured = "the first prompt" if self.done == 1 else f"the first {self.done} prompts"
        return f"about {seconds_text(left)} left of about {seconds_text(total)} (the pace of {measured})"
