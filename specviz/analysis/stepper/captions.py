"""The captions of step mode: a plain-language sentence or two per phase of a pass (lookahead passes have their
own draft, verify and decide captions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from specviz.analysis.stepper.record import Recording, no_draft_reason
from specviz.core.events import PassEvent
from specviz.core.verdict import format_apart
from specviz.core.verify import acceptance_probability

if TYPE_CHECKING:
    from specviz.analysis.stepper.stepping import Stepper


def _q(rec: Recording, token_id: int) -> str:
    return f"“{rec.label(token_id)}”"


def _list(rec: Recording, ids: Sequence[int], most: int = 6) -> str:
    shown = ", ".join(_q(rec, t) for t in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def _all_guesses(m: int) -> str:
    """"the guess" for one guess (m = 1), "all 3 guesses" for more: no "all 1 guesses"."""
    return "the guess" if m == 1 else f"all {m} guesses"


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
    return (f"The target checked {_all_guesses(m)} in a single forward pass (one pass over {m + 1} positions costs "
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
        verb = "was" if m == 1 else "were"
        return (f"{_all_guesses(m).capitalize()} {verb} accepted, so the target's forward pass gives one more token "
                f"for free: it {how} after the last guess — the bonus token {token}.{gain}" + _cut_note(e, m + 1) + end)
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
