"""The cursor over a :class:`~specviz.analysis.stepper.record.Recording`: the step sequence, the table rows revealed
so far and the words of each step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from specviz.analysis.stepper.captions import _CAPTIONS, _LOOKAHEAD_CAPTIONS
from specviz.analysis.stepper.record import PHASES, Distributions, Recording, phase_label
from specviz.core.events import PassEvent
from specviz.core.verify import acceptance_probability


@dataclass(frozen=True)
class Step:
    """Where the stepper stands: ``pass_index`` is the position in the recording's events (0 = prefill)."""

    pass_index: int
    phase: str


@dataclass(frozen=True)
class Row:
    """One line of a pass's table; None means "not revealed yet" (or not meaningful, e.g. u in greedy mode).

    Attributes:
        position: 1-based drafted position (the recovered / bonus row has the position it fills).
        token_id / token: the token and its visible text.
        q: the draft's probability of the token (1.0 for a deterministic drafter).
        p: the target's probability of the token.
        ratio: min(1, p/q), the acceptance probability (sampling, judged positions).
        uniform: the number u drawn for the test "accept if u < min(1, p/q)" (sampling, judged positions).
        decision: "accepted", "rejected" or "not judged" for drafts; "recovered", "bonus" or "target" for the
            target's own token.
        target_top: greedy mode: the target's top token at this position.
        kind: "draft" for a drafted token, "next" for the target's own token of the pass.
    """

    position: int
    token_id: int
    token: str
    q: float | None = None
    p: float | None = None
    ratio: float | None = None
    uniform: float | None = None
    decision: str | None = None
    target_top: str | None = None
    kind: str = "draft"


def steps_of(events: Sequence[PassEvent]) -> list[Step]:
    """The step sequence of a run (see the module docstring)."""
    steps: list[Step] = []
    for i, event in enumerate(events):
        if event.kind == "prefill":
            steps.append(Step(i, "prefill"))
        elif event.draft_ids:
            steps.extend(Step(i, phase) for phase in ("draft", "verify", "decide", "emit"))
        else:
            steps.extend(Step(i, phase) for phase in ("draft", "verify", "emit"))
    return steps


class Stepper:
    """A cursor over a :class:`Recording`'s steps. ``next`` / ``prev`` stay put at the ends."""

    def __init__(self, recording: Recording) -> None:
        if not recording.events:
            raise ValueError("a recording needs at least one event")
        self.recording = recording
        self.steps = steps_of(recording.events)
        self.index = 0

    # ------------------------------------------------------------------------------------------ moving
    @property
    def current(self) -> Step:
        """The step shown now."""
        return self.steps[self.index]

    @property
    def at_start(self) -> bool:
        """At the first step."""
        return self.index == 0

    @property
    def at_end(self) -> bool:
        """At the last step."""
        return self.index == len(self.steps) - 1

    def next(self) -> Step:
        """Advance one step (stays at the last)."""
        self.index = min(self.index + 1, len(self.steps) - 1)
        return self.current

    def prev(self) -> Step:
        """Go back one step (stays at the first)."""
        self.index = max(self.index - 1, 0)
        return self.current

    def goto(self, where: int | Step) -> Step:
        """Jump to a step number (clamped to the range) or to a :class:`Step` of this recording."""
        if isinstance(where, Step):
            self.index = self.steps.index(where)
        else:
            self.index = max(0, min(int(where), len(self.steps) - 1))
        return self.current

    def next_rejection(self) -> Step:
        """Jump to the next ``decide`` step of a pass with a rejection (stays put when there is none)."""
        for i in range(self.index + 1, len(self.steps)):
            step = self.steps[i]
            if step.phase == "decide" and self.event(step).num_rejections:
                self.index = i
                break
        return self.current

    # ------------------------------------------------------------------------------------------ reading
    def event(self, step: Step | None = None) -> PassEvent:
        """The event of a step (default: the current one)."""
        return self.recording.events[(step or self.current).pass_index]

    @property
    def num_passes(self) -> int:
        """Target passes after the prefill."""
        return sum(1 for e in self.recording.events if e.kind == "pass")

    def distributions(self, step: Step | None = None) -> Distributions | None:
        """The rejection's distributions, at the decide and emit phases of a pass with a rejection; else None."""
        step = step or self.current
        if step.phase not in ("decide", "emit"):
            return None
        return self.recording.rejections.get(step.pass_index)

    def table_rows(self, step: Step | None = None) -> list[Row]:
        """The rows of the step's pass, with the numbers revealed up to its phase (see :class:`Row`)."""
        step = step or self.current
        event = self.event(step)
        rec = self.recording
        if step.phase == "prefill":
            return [Row(1, t, rec.label(t), decision="target", kind="next") for t in event.emitted_ids[:1]]
        order = PHASES.index(step.phase)
        verified, decided = order >= PHASES.index("verify"), order >= PHASES.index("decide")
        rows = []
        for i, token in enumerate(event.draft_ids):
            d = event.details[i] if i < len(event.details) else None
            q = d.draft_prob if d is not None else None
            p = d.target_prob if d is not None and verified else None
            judged = i <= event.num_accepted
            decision = ratio = u = None
            if decided:
                decision = "accepted" if i < event.num_accepted else "rejected" if judged else "not judged"
                if not rec.greedy and judged and d is not None:
                    ratio = acceptance_probability(d.target_prob, d.draft_prob)
                    u = d.uniform
            top = rec.label(d.target_top_id) if rec.greedy and verified and d is not None else None
            rows.append(Row(i + 1, int(token), rec.label(token), q, p, ratio, u, decision, top))
        n = event.num_accepted
        if step.phase == "emit" and len(event.emitted_ids) > n:
            token = event.emitted_ids[n]
            kind = event.next_kind if event.draft_ids else "target"
            dist = rec.rejections.get(step.pass_index)
            p = None
            if dist is not None and token in dist.token_ids:
                p = dist.target[dist.token_ids.index(token)]
            rows.append(Row(n + 1, int(token), rec.label(token), p=p, decision=kind, kind="next"))
        return rows

    # ------------------------------------------------------------------------------------------ words
    def progress(self, step: Step | None = None) -> str:
        """e.g. "Pass 3 of 9 · 2 · verify"."""
        step = step or self.current
        if step.phase == "prefill":
            return "Prefill (before pass 1)"
        event = self.event(step)
        return f"Pass {event.index} of {self.num_passes} · {phase_label(step.phase, bool(event.draft_ids))}"

    def caption(self, step: Step | None = None) -> str:
        """A plain-language sentence or two for students: what just happened in this phase, and why."""
        step = step or self.current
        event = self.event(step)
        if event.lookahead is not None and step.phase in _LOOKAHEAD_CAPTIONS:
            return _LOOKAHEAD_CAPTIONS[step.phase](self, event)
        return _CAPTIONS[step.phase](self, event)
