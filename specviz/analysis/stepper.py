"""Step mode: a recorded speculative run, replayed one phase of one pass at a time, with plain-language captions.

A :class:`Recording` is a finished run's events plus what a classroom needs beyond them: each token's text, and at
each rejection the top of the target's, the draft's and the residual distribution (:class:`Distributions`).
:class:`Recorder` produces one by running the engine with a thin drafter wrapper that keeps each proposal, and by
running the target (and, in greedy mode, a draft model) once more on the committed prefix of each rejected
position, with a cache of its own (:class:`PrefixForward`): cheap for a small model and a short run, and nothing
in the engine changes.

:class:`Stepper` walks the recording: the prefill is one step (phase ``prefill``), every later pass is four steps
``draft`` -> ``verify`` -> ``decide`` -> ``emit`` (three when the drafter proposed nothing: there is nothing to
decide, and the token at emit is a plain target token: :func:`phase_label`). :meth:`Stepper.table_rows` gives the
per-position numbers revealed so far (q at draft; p and the target's top token at verify; min(1, p/q), the uniform u
and the decision at decide; the recovered / bonus / plain target token at emit) and
:meth:`Stepper.caption` a sentence for students. No Gradio here.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

from specviz.core.events import PassEvent
from specviz.core.generation_settings import settings_summary
from specviz.core.metrics import format_apart
from specviz.core.verify import acceptance_probability

PHASES = ("prefill", "draft", "verify", "decide", "emit")
"""Phases in step order; the prefill has only ``prefill``, a pass without a draft skips ``decide``."""

PHASE_LABELS = {
    "prefill": "prefill",
    "draft": "1 · draft",
    "verify": "2 · verify",
    "decide": "3 · accept / reject",
    "emit": "4 · recovered / bonus token",
}
PLAIN_EMIT_LABEL = "4 · plain target token"
"""The emit phase's label on a pass where nothing was drafted (k = 0): its token is a plain target token, neither
recovered (no draft was rejected) nor bonus (no draft was accepted)."""


def phase_label(phase: str, drafted: bool = True) -> str:
    """The label of ``phase`` (a key of :data:`PHASE_LABELS`); ``drafted`` False (a pass with nothing drafted) gives
    :data:`PLAIN_EMIT_LABEL` for ``emit``. Raises KeyError for an unknown phase."""
    return PLAIN_EMIT_LABEL if phase == "emit" and not drafted else PHASE_LABELS[phase]


def no_draft_reason(event: PassEvent) -> str:
    """Why a pass (not the prefill) drafted nothing, in words: lookahead decoding had no candidate, the pass's k was
    0 (k = auto chose a plain step, or the token limit left no room), or the drafter had no guess."""
    if event.lookahead is not None:
        return "lookahead decoding had no candidate starting with the last token"
    if event.k == 0:
        return "k = 0 for this pass (k = auto chose a plain step, or the token limit left no room to draft)"
    return "the drafter had no guess"


# ------------------------------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Distributions:
    """The top of three distributions at a pass's first rejected draft position (for a small bar chart).

    Attributes:
        position: 0-based drafted position of the rejection (== the pass's number of accepted tokens).
        token_ids: the tokens shown: the union of each distribution's top tokens, the drafted and the chosen one,
            most probable first (by target + draft + residual).
        target: target_probs of those tokens (the processed distribution: the run's penalties, bans and biases with
            the committed text as history, then temperature, top-k, top-p and min-p; the draft's likewise).
        draft: draft_probs of those tokens (one-hot on the drafted token for a deterministic drafter).
        residual: norm(max(0, target - draft)) of those tokens; None in greedy mode (the target's argmax is taken).
        drafted_id: the rejected draft token.
        chosen_id: the recovered token (drawn from the residual; greedy: the target's argmax).
        draft_known: False when the drafter did not expose its distribution (only the drafted token's q is real).
    """

    position: int
    token_ids: tuple[int, ...]
    target: tuple[float, ...]
    draft: tuple[float, ...]
    residual: tuple[float, ...] | None
    drafted_id: int
    chosen_id: int
    draft_known: bool = True


@dataclass(frozen=True)
class Recording:
    """A finished speculative run ready for stepping.

    Attributes:
        events: the run's events, the prefill first.
        greedy: temperature 0 (acceptance = "draft == target's argmax", no uniform numbers).
        drafter_name: shown in captions.
        deterministic: the drafter proposes with certainty (q = 1, e.g. n-gram lookup).
        token_texts: id -> decoded text (a missing id shows as ``#id``).
        prompt_tokens: length of the encoded prompt.
        rejections: index in ``events`` -> :class:`Distributions` at that pass's rejection.
        processing: the run's generation settings off their defaults besides temperature and seed, in words (e.g.
            "repetition penalty 1.3"; "" when none): every p and q shown is after them.
    """

    events: tuple[PassEvent, ...]
    greedy: bool
    drafter_name: str = "drafter"
    deterministic: bool = False
    token_texts: Mapping[int, str] = field(default_factory=dict)
    prompt_tokens: int = 0
    rejections: Mapping[int, Distributions] = field(default_factory=dict)
    processing: str = ""

    def text(self, token_id: int) -> str:
        """The raw decoded text of one token."""
        return self.token_texts.get(int(token_id), f"#{int(token_id)}")

    def label(self, token_id: int) -> str:
        """A token's text made visible: newline as ⏎, tab as ⇥, an all-space token as ␣, empty as ∅."""
        return display_text(self.text(token_id))

    @property
    def output_ids(self) -> list[int]:
        """Every emitted token id, in order."""
        return [t for e in self.events for t in e.emitted_ids]


def display_text(text: str) -> str:
    """Make a token's text visible on a slide: ⏎ for a newline, ⇥ for a tab, ⟨0x..⟩ for a control character;
    in an all-blank token ␣ for a space and ⟨U+....⟩ for another blank (e.g. a no-break space)."""
    if text == "":
        return "∅"
    shown = text.replace("\n", "⏎").replace("\t", "⇥").replace("\r", "")
    shown = "".join(f"⟨0x{ord(c):02x}⟩" if unicodedata.category(c) in ("Cc", "Cf") else c for c in shown)
    if text.strip():
        return shown
    return "".join("␣" if c == " " else c if c in "⏎⇥" else f"⟨U+{ord(c):04X}⟩" for c in shown)


# ------------------------------------------------------------------------------------------------- stepping


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


# ------------------------------------------------------------------------------------------------- captions


def _q(rec: Recording, token_id: int) -> str:
    return f"“{rec.label(token_id)}”"


def _list(rec: Recording, ids: Sequence[int], most: int = 6) -> str:
    shown = ", ".join(_q(rec, t) for t in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def _caption_prefill(s: Stepper, e: PassEvent) -> str:
    rec = s.recording
    first = _q(rec, e.emitted_ids[0]) if e.emitted_ids else "nothing"
    prompt = f"the prompt ({_plural(rec.prompt_tokens, 'token')})" if rec.prompt_tokens else "the prompt"
    return (f"Prefill: the target model read {prompt} in one forward pass and chose the first token, {first}. "
            "From now on every pass has four phases: the drafter guesses a few tokens, the target checks them all "
            "at once, the good guesses are kept, and the target adds one token of its own.")


def _caption_draft(s: Stepper, e: PassEvent) -> str:
    rec = s.recording
    if not e.draft_ids:
        why = f"nothing was drafted: {no_draft_reason(e)}"
        if e.lookahead is None and e.k > 0:  # the drafter had no guess
            why = "the drafter had no guess this time" + (" (nothing in the text matched)" if rec.deterministic else "")
        return (f"Pass {e.index}: {why}, so this pass is a plain step, as in standard decoding: the target will "
                "produce one token by itself.")
    how = ("It copies what followed an earlier occurrence of the last few tokens, so it is certain of its guesses: "
           "q = 1 for each." if rec.deterministic else
           "Each guess comes with q, the drafter's own probability for it." if not rec.greedy else
           "It picks its own most likely token each time; q is the probability it gave that token.")
    return (f"Pass {e.index}: the drafter, {rec.drafter_name}, guessed the next {_plural(len(e.draft_ids), 'token')}: "
            f"{_list(rec, e.draft_ids)}. Guessing is cheap. {how} None of these tokens is in the output yet.")


def _caption_verify(s: Stepper, e: PassEvent) -> str:
    m = len(e.draft_ids)
    if not m:
        return ("The target ran one forward pass on the last token, exactly like standard decoding, and computed "
                "its probabilities for the next token.")
    what = ("its own top choice at every position" if s.recording.greedy else
            "p, its own probability for each guessed token")
    return (f"The target checked all {m} guesses in a single forward pass (one pass over {m + 1} positions costs "
            f"about as much as one ordinary decoding step when the hardware has spare parallel capacity) and "
            f"computed {what}. It also already knows what it would say after the last guess.")


def _caption_decide(s: Stepper, e: PassEvent) -> str:
    rec = s.recording
    n, m = e.num_accepted, len(e.draft_ids)
    parts = []
    if rec.greedy:
        parts.append("Greedy mode: a guess is accepted only if it is exactly the target's top choice.")
        if n:
            parts.append(f"The first {_plural(n, 'guess')} matched, so {'it was' if n == 1 else 'they were'} accepted.")
        if n < m:
            top = e.details[n].target_top_id if n < len(e.details) else None
            prefer = f" (the target preferred {_q(rec, top)})" if top is not None else ""
            parts.append(f"Guess {n + 1}, {_q(rec, e.draft_ids[n])}, did not match{prefer}, so it was rejected.")
    else:
        parts.append("Each guess is accepted with probability min(1, p/q): a random number u between 0 and 1 is "
                     "drawn, and the guess is kept if u < min(1, p/q).")
        for i in range(min(n, 2)):
            d = e.details[i]
            r = acceptance_probability(d.target_prob, d.draft_prob)
            shown_r, shown_u = format_apart(r, d.uniform)
            why = ("p ≥ q, so it is always kept" if r >= 1.0 else
                   f"min(1, p/q) = {shown_r} and u = {shown_u} is below it")
            parts.append(f"Guess {i + 1}, {_q(rec, e.draft_ids[i])}: {why}, accepted.")
        if n == 3:
            parts.append("Guess 3 passed the same test and was accepted too.")
        elif n > 3:
            parts.append(f"Guesses 3 to {n} passed the same test and were accepted too.")
        if n < m:
            d = e.details[n]
            r = acceptance_probability(d.target_prob, d.draft_prob)
            p_text, q_text = format_apart(d.target_prob, d.draft_prob)  # 0.018 vs 0.021, never 0.02 vs 0.02
            r_text, u_text = format_apart(r, d.uniform)
            parts.append(f"Guess {n + 1}, {_q(rec, e.draft_ids[n])}: the target gives it p = {p_text} but "
                         f"the drafter gave it q = {q_text}, so it is kept only with probability "
                         f"{r_text}; u = {u_text} is not below that, so it was rejected.")
    if n == m - 2:
        parts.append("The guess after it was never judged: it was built on a rejected token, so it is thrown away.")
    elif n < m - 2:
        parts.append(f"The {m - n - 1} guesses after it were never judged: they were built on a rejected token, so "
                     "they are thrown away.")
    if n == m:
        parts.append("The guess was accepted." if m == 1 else f"All {m} guesses were accepted.")
    else:
        parts.append(f"Result: {n} of {m} accepted.")
    return " ".join(parts)


def _cut_note(e: PassEvent, full: int) -> str:
    if len(e.emitted_ids) >= full or e.finish_reason is None:
        return ""
    why = {"eos": "the end-of-text token", "length": "the token limit", "stop": "a stop string"}
    return (f" The run ends here ({why.get(e.finish_reason, e.finish_reason)}), so only "
            f"{_plural(len(e.emitted_ids), 'token')} of this pass {'is' if len(e.emitted_ids) == 1 else 'are'} kept.")


def _caption_emit(s: Stepper, e: PassEvent) -> str:
    rec = s.recording
    n, m = e.num_accepted, len(e.draft_ids)
    end = " This was the last pass." if e.finish_reason is not None else ""
    if len(e.emitted_ids) <= n:  # cut before the target's own token
        return ("The accepted guesses reach the end of the run, so the target's own token is not needed."
                + _cut_note(e, n + 1) + end)
    token = _q(rec, e.emitted_ids[n])
    total = len(e.emitted_ids)
    gain = (f" This pass produced {_plural(total, 'token')} for one target forward pass"
            + (" — standard decoding would have needed " + _plural(total, "pass") + "." if total > 1 else "."))
    if not m:
        return (f"The target produced {token} by itself: one token, as in standard decoding. It is a plain target "
                "token: not recovered (no guess was rejected) and not a bonus (no guess was accepted)." + end)
    if e.next_kind == "bonus":
        how = "took its top choice" if rec.greedy else "sampled from its own distribution"
        return (f"All {m} guesses were accepted, so the target's forward pass gives one more token for free: it "
                f"{how} after the last guess — the bonus token {token}.{gain}" + _cut_note(e, m + 1) + end)
    if rec.greedy:
        how = (f"the target's own top choice {token} replaces the rejected guess — exactly the token standard "
               "decoding would have produced here")
    else:
        how = (f"the target draws its own token from the leftover distribution norm(max(0, p − q)), the probability "
               f"the drafter under-estimated; it drew the recovered token {token}. This correction makes the output "
               "follow the target's own distribution exactly, as if the target had sampled alone")
    return f"At the rejected position {how}.{gain}" + _cut_note(e, n + 1) + end


_CAPTIONS: dict[str, Callable[[Stepper, PassEvent], str]] = {
    "prefill": _caption_prefill, "draft": _caption_draft, "verify": _caption_verify, "decide": _caption_decide,
    "emit": _caption_emit,
}


def _lookahead_ids(record) -> list[int]:
    """Every token id a lookahead pass shows: its window, the Jacobi step's outputs and the candidates."""
    return [t for level in record.levels for t in level] + list(record.new_level) + [
        t for c in record.candidates for t in c]


def _caption_lookahead_draft(s: Stepper, e: PassEvent) -> str:
    """Lookahead decoding, phase 1: no draft model; the window and the pool the target built itself."""
    rec, la = s.recording, e.lookahead
    levels, width = len(la.levels), max((len(level) for level in la.levels), default=0)
    before = [t for event in rec.events[: rec.events.index(e)] for t in event.emitted_ids]
    root = _q(rec, before[-1]) if before else "the last token"
    window = (f"Its window holds {_plural(levels, 'level')} of {width} guesses each, made by the target itself in "
              "earlier passes (the next step shows how). ")
    pool = f"The pool of n-grams those guesses produced holds {_plural(la.pool_size, 'n-gram')}"
    if not la.candidates:
        none = (f"{pool}, but none starts with {root}" if la.pool_size else
                "The pool of n-grams is still empty (the window has not filled yet)")
        return (f"Pass {e.index}: lookahead decoding has no draft model. {window}{none}, so there is nothing to "
                "verify: this forward only advances the window and gives one token.")
    return (f"Pass {e.index}: lookahead decoding has no draft model. {window}{pool}; "
            f"{_plural(len(la.candidates), 'candidate')} start{'s' if len(la.candidates) == 1 else ''} with {root}: "
            + "; ".join(_list(rec, c) for c in la.candidates)
            + f". All of them and the window go through the target in one forward of "
              f"{1 + sum(len(level) for level in la.levels) + sum(len(c) for c in la.candidates)} tokens.")


def _caption_lookahead_verify(s: Stepper, e: PassEvent) -> str:
    """Lookahead decoding, phase 2: the candidates checked, and one Jacobi step on the window."""
    rec, la = s.recording, e.lookahead
    what = "candidate" if len(la.candidates) == 1 else _plural(len(la.candidates), "candidate")
    checked = (f"The target checked the {what} (its top choice at every "
               "position) and, in the same forward, ran one step of Jacobi iteration on the window. " if la.candidates
               else "The target ran one forward pass on the last token and, in it, one step of Jacobi iteration on "
                    "the window. ")
    jacobi = ("Jacobi iteration treats the next tokens as unknowns solved all at once: at each window position the "
              "target predicts the token after the guesses before it, as if they were right, and the predictions "
              "become the next guesses. Repeated pass after pass, a guess that stops changing has reached what "
              "greedy decoding would write there. ")
    new = (f"This step produced {_list(rec, la.new_level)}, the window's new top level; the oldest level drops out. "
           if la.new_level else "")
    learned = (f"Each column read from its oldest guess down to the new token is an n-gram: {la.added} new ones "
               "joined the pool, ready for a later pass whose last token starts them." if la.added else
               "No new n-gram joined the pool this time (the window is still filling, or they were known).")
    return checked + jacobi + new + learned


def _caption_lookahead_decide(s: Stepper, e: PassEvent) -> str:
    """Lookahead decoding, phase 3: the longest accepted candidate wins (greedy), then the usual verdict."""
    la = e.lookahead
    if la.winner is None or len(la.candidates) < 2:
        return _caption_decide(s, e)
    return (f"Of the {len(la.candidates)} candidates, candidate {la.winner + 1} matched the target's choices the "
            f"longest, so it is the one kept. " + _caption_decide(s, e))


_LOOKAHEAD_CAPTIONS: dict[str, Callable[[Stepper, PassEvent], str]] = {
    "draft": _caption_lookahead_draft, "verify": _caption_lookahead_verify, "decide": _caption_lookahead_decide,
}


# ------------------------------------------------------------------------------------------------- recording


class RecordingDrafter:
    """Wraps a drafter and keeps its latest :class:`~specviz.core.drafting.Draft` (everything else passes through)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.needs_hidden = getattr(inner, "needs_hidden", False)
        self.last = None

    def reset(self, prompt_ids: list[int]) -> None:
        self.last = None
        self.inner.reset(prompt_ids)

    def propose(self, ctx):
        self.last = self.inner.propose(ctx)
        return self.last

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        self.inner.commit(committed_ids, num_accepted)

    def advance(self, new_level: list[int]) -> int:
        """Lookahead decoding: hand the Jacobi step's outputs to the wrapped drafter (its window and pool)."""
        return self.inner.advance(new_level)

    @property
    def cache_len(self):
        return getattr(self.inner, "cache_len", None)


class PrefixForward:
    """Next-token distributions of ``model`` after growing prefixes, reusing a KV cache across calls.

    The committed text only grows, so each call feeds just the tokens after the longest prefix it shares with the
    previous call (rolling back the rest): a whole run's rejections cost about one extra prefill of the prompt
    plus short forwards.
    """

    def __init__(self, model) -> None:
        from specviz.core.kv import new_cache

        self.model = model
        self.cache = new_cache(model)
        self.fed: list[int] = []

    def probs(self, prefix: list[int], sampling, prompt_len: int = 0):
        """The processed distribution (V,) of the next token after ``prefix`` (non-empty; its first ``prompt_len``
        tokens are the prompt): the run's logits processors with ``prefix`` as the history
        (:func:`specviz.core.verify.apply_processors`, as the engine and the drafters apply them), then temperature,
        top-k, top-p and min-p."""
        from specviz.core.kv import forward_logits, rollback_cache
        from specviz.core.verify import apply_processors, process_logits

        keep = 0
        limit = min(len(self.fed), len(prefix) - 1)  # feed at least one token to get logits
        while keep < limit and self.fed[keep] == prefix[keep]:
            keep += 1
        rollback_cache(self.cache, keep)
        logits = forward_logits(self.model, list(prefix[keep:]), self.cache, 1)
        self.fed = list(prefix)
        return process_logits(apply_processors(logits, sampling, [list(prefix)], prompt_len), sampling)[0]


def rejection_distributions(target: PrefixForward, draft_model: PrefixForward | None, draft, prefix: list[int],
                            event: PassEvent, sampling, top: int = 8, prompt_len: int = 0) -> Distributions:
    """The target / draft / residual distributions at ``event``'s first rejection.

    Args:
        target: the target's model behind a :class:`PrefixForward` (run once more over ``prefix``).
        draft_model: the draft model behind a :class:`PrefixForward` (None for a drafter without a model); run
            only when the draft carries no distributions (a draft model in greedy mode).
        draft: the pass's :class:`~specviz.core.drafting.Draft`.
        prefix: prompt + tokens emitted before this pass + the pass's accepted draft tokens.
        event: the pass (with num_accepted < num_drafted).
        sampling: the run's :class:`~specviz.core.verify.SamplingConfig` (its logits processors see ``prefix``, of
            which the first ``prompt_len`` tokens are the prompt, on both sides).
        top: tokens kept from each distribution's top.
    """
    import torch

    from specviz.core.verify import one_hot_row, residual_distribution

    i = event.num_accepted
    drafted = int(event.draft_ids[i])
    target_row = target.probs(prefix, sampling, prompt_len)
    known = True
    if draft is not None and draft.draft_probs is not None and i < len(draft.draft_probs):
        draft_row = draft.draft_probs[i].float().to(target_row.device)
    elif draft_model is not None:
        draft_row = draft_model.probs(prefix, sampling, prompt_len).to(target_row.device)
    else:  # a deterministic drafter: one-hot on its guess (q < 1 without a distribution: only that q is known)
        q = float(draft.token_probs[i]) if draft is not None and i < len(draft.token_probs) else 1.0
        draft_row = one_hot_row(drafted, target_row) * q
        known = q >= 1.0
    size = min(target_row.shape[-1], draft_row.shape[-1])
    target_row, draft_row = target_row[:size], draft_row[:size]
    residual = None if sampling.greedy else residual_distribution(target_row, draft_row)
    rows = [target_row, draft_row] + ([residual] if residual is not None else [])
    chosen = int(event.next_id) if event.next_id is not None else int(target_row.argmax())
    ids = {drafted, chosen}
    for row in rows:
        ids.update(int(t) for t in torch.topk(row, min(top, size)).indices.tolist())
    score = sum(rows)
    ordered = sorted(ids, key=lambda t: -float(score[t]))
    pick = lambda row: tuple(float(row[t]) for t in ordered)  # noqa: E731
    return Distributions(i, tuple(ordered), pick(target_row), pick(draft_row),
                         pick(residual) if residual is not None else None, drafted, chosen, known)


class Recorder:
    """Runs the engine's speculative loop and records what step mode needs (see the module docstring).

    Use ``for event in recorder.events(): ...`` (e.g. to show progress), then :meth:`recording`.
    """

    def __init__(self, target, drafter, prompt_ids: list[int], config, top: int = 8, cancel=None) -> None:
        self.target = target
        self.drafter = RecordingDrafter(drafter)
        self.prompt_ids = list(prompt_ids)
        self.config = config
        self.top = top
        self.cancel = cancel  # a threading.Event or a callable; set: RunCancelled before the next forward
        self._events: list[PassEvent] = []
        self._rejections: dict[int, Distributions] = {}
        self._proposed_probs = False

    def events(self) -> Iterator[PassEvent]:
        """Run the engine; yields each event after recording it. Raises RunCancelled when ``cancel`` is set
        (checked before every forward, the extra ones of a rejection's distributions included)."""
        from specviz.core.engine import speculative_generate
        from specviz.core.kv import check_cancel

        output: list[int] = []
        target = PrefixForward(self.target.model)
        model = getattr(self.drafter.inner, "model", None)
        draft_model = PrefixForward(model) if model is not None else None
        for event in speculative_generate(self.target, self.drafter, self.prompt_ids, self.config,
                                          cancel=self.cancel):
            draft = self.drafter.last if event.kind == "pass" and event.draft_ids else None
            if draft is not None and draft.draft_probs is not None:
                self._proposed_probs = True
            if draft is not None and event.num_rejections:
                check_cancel(self.cancel)
                prefix = self.prompt_ids + output + list(event.draft_ids[:event.num_accepted])
                self._rejections[len(self._events)] = rejection_distributions(
                    target, draft_model, draft, prefix, event, self.config.sampling, self.top, len(self.prompt_ids))
            output.extend(event.emitted_ids)
            self._events.append(event)
            yield event

    def recording(self) -> Recording:
        """The finished :class:`Recording`."""
        events = tuple(self._events)
        ids = set(t for e in events for t in e.emitted_ids + e.draft_ids)
        ids.update(t for e in events if e.lookahead is not None for t in _lookahead_ids(e.lookahead))
        ids.update(d.target_top_id for e in events for d in e.details)
        ids.update(t for dist in self._rejections.values() for t in dist.token_ids)
        decode = self.target.tokenizer.decode
        texts = {t: decode([t], skip_special_tokens=False, clean_up_tokenization_spaces=False) for t in ids}
        inner = self.drafter.inner
        deterministic = getattr(inner, "model", None) is None and not self._proposed_probs and all(
            d.draft_prob == 1.0 for e in events for d in e.details)
        return Recording(events, self.config.sampling.greedy, self.drafter.name, deterministic, texts,
                         len(self.prompt_ids), dict(self._rejections),
                         settings_summary(self.config.sampling, self.config.stop_token_ids))


def record_run(target, drafter, prompt_ids: list[int], config, top: int = 8) -> Recording:
    """Run and record in one call (see :class:`Recorder`)."""
    recorder = Recorder(target, drafter, prompt_ids, config, top)
    for _ in recorder.events():
        pass
    return recorder.recording()
