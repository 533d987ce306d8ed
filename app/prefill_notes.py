"""The Live tab's notes about a long prefill: the estimate said before the target reads a long prompt
(:func:`long_prompt_note`, planned from :mod:`app.costs`), and its replacement by the time the prefill took once
both runs have read it (:func:`settled_after_prefill`, :func:`settle_prefill_note`)."""

from __future__ import annotations

from app import estimates
from app.costs import LONG_PREFILL_S, RunCosts, _seconds, planned_estimate
from app.estimates import NOW
from app.inputs import Settings


LONG_PROMPT_TOKENS = 512  # a prompt of this many tokens or more is called long


def long_prompt_note(settings: Settings, costs: RunCosts | None, prompt_tokens: int, load=NOW) -> str:
    """The note before a prefill expected over :data:`LONG_PREFILL_S`: a prompt of :data:`LONG_PROMPT_TOKENS` or
    more is "a long prompt" (with the server's cap when it has one); a shorter one is slow to read because the machine
    is slow or busy now, and is said so. "" when the prefill is short or its cost unknown. Its time carries the
    plan's range ("take about 61 s (50–75 s) to read": :func:`planned_estimate`, ``load`` as :func:`plan_text`'s)."""
    if costs is None:
        return ""
    seconds = costs.prefill_s(prompt_tokens, settings.drafter != "none")
    if seconds <= LONG_PREFILL_S:
        return ""
    took = planned_estimate(costs, seconds, load if load is not NOW else estimates.machine_load())
    took = f"about {_seconds(seconds)}" if took.very_busy else took.text("")  # the busy sentence is the plan's
    runs = "both runs read it" if settings.drafter != "none" else "the target reads it"
    if prompt_tokens < LONG_PROMPT_TOKENS:
        return (f"Reading the {prompt_tokens:,}-token prompt takes {took} here ({runs}): the machine is slow or busy "
                "now, so the first token appears late.")
    cap = (f" This server reads at most {settings.max_prompt_tokens:,} prompt tokens."
           if settings.max_prompt_tokens else "")
    return (f"A long prompt: {prompt_tokens:,} tokens take {took} to read before the first token appears ({runs}; a "
            f"shorter prompt starts sooner).{cap}")


def settled_after_prefill(events, view, note: str):
    """``events`` (a run's stream: engine events, or None while it computes) passed through; once ``view`` holds
    both runs' prefills (the consumer folds each event in before asking for the next), ``note`` is settled
    (:func:`settle_prefill_note`): the prefill's estimate leaves the status as soon as its measured time is known."""
    for event in events:
        yield event
        if note and event is not None and view.base_stats.prefill_ms > 0 and (
                view.spec is None or view.spec_stats.prefill_ms > 0):
            settle_prefill_note(view, note)
            note = ""


def settle_prefill_note(view, note: str) -> None:
    """Replace ``note`` (the estimate said before a long prefill) in ``view.notes`` by the time the prefill took
    (both runs' prefills on their own clocks, ms from :class:`specviz.measure.run_stats.RunStats`), or drop it when no
    prefill finished (the run was stopped while reading). No-op when ``note`` is not there."""
    if not note or note not in view.notes:
        return
    ms = view.base_stats.prefill_ms + (view.spec_stats.prefill_ms if view.spec is not None else 0.0)
    index = view.notes.index(note)
    if ms <= 0:
        del view.notes[index]
        return
    runs = "both runs" if view.spec is not None else "the target"
    view.notes[index] = (f"The {view.prompt_tokens:,}-token prompt was read in {ms / 1000.0:.1f} s ({runs}; "
                         "the prefill).")
