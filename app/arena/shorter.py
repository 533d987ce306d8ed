"""What to change when the Arena's plan before Run arena is long: :func:`quicker` names the change of the chosen
settings that shortens the race most (one prompt instead of several, one k or one drafter instead of several, half
the new tokens), taken greedily until the plan's middle falls to :data:`LONG_S` or no change is left, each figure
from the same plan that gave the long one (:func:`app.arena.progress.rough_estimate`, at the same load and clock):
no second estimate. A trial's visitor who pressed Run arena on the defaults met a race planned at 9–30 min on a busy
machine and had not been told it was long."""

from __future__ import annotations

import time
from typing import Callable

from app.arena.progress import ArenaEstimate, rough_estimate
from app.arena.settings import MIN_NEW_TOKENS, SOURCES, choose_prompts
from app.arena import costs as arena_costs
from app.estimates import span_text
from app.inputs import InputError

LONG_S = 300.0
"""A plan whose middle figure is above this many seconds is long: the status says so and names what shortens it."""
ONE_PROMPT = next(label for label, key in SOURCES if key == "prompt")
"""The Prompts choice of a single typed prompt, as the page labels it."""

Plan = Callable[[dict], ArenaEstimate | None]


FEWEST_TOKENS = 2 * MIN_NEW_TOKENS
"""Half the max new tokens is offered down to this: a shorter run is often too short to time (no reading)."""


def _changes(s: dict, prompt: str, methods: bool = True) -> list[tuple[str, str, dict]]:
    """Each single change of the settings ``s`` (:func:`app.arena.progress.rough_estimate`'s keys) that shortens the
    race, as (kind, words, changed settings): one typed prompt (``prompt``, the Prompt box's text; none when it is
    empty), the first k alone and the first drafter alone (only with ``methods``), half the max new tokens (a
    multiple of 8, at least :data:`FEWEST_TOKENS`)."""
    out = []
    if len(s["prompts"]) > 1:
        try:
            out.append(("prompts", f"one prompt (Prompts: “{ONE_PROMPT}”)",
                        {**s, "prompts": choose_prompts("prompt", prompt, "")}))
        except InputError:
            pass  # an empty Prompt box: no single prompt to offer
    if methods and len(s["ks"]) > 1:
        out.append(("ks", f"k = {s['ks'][0]} alone", {**s, "ks": list(s["ks"][:1])}))
    if methods and len(s["drafters"]) > 1:
        out.append(("drafters", f"{s['drafters'][0]} alone", {**s, "drafters": list(s["drafters"][:1])}))
    half = max(FEWEST_TOKENS, s["max_new_tokens"] // 16 * 8)
    if half < s["max_new_tokens"]:
        out.append(("tokens", f"{half} new tokens per run", {**s, "max_new_tokens": half}))
    return out


def _figure(rough: ArenaEstimate) -> str:
    """A plan's length in the status's words: "about 2 min (1–4 min)", or its range alone on a very busy machine."""
    e = rough.estimate
    return f"{span_text(e.low, e.high)}" if e.very_busy else e.text()


def quicker(s: dict, prompt: str = "", plan: Plan | None = None, methods: bool = True) -> str:
    """One sentence for a long plan of the checked settings ``s`` (keys of :func:`rough_estimate`: ``prompts``,
    ``drafters``, ``ks``, ``max_new_tokens``, ``target``), "" for a plan whose middle is at most :data:`LONG_S` s or
    that has no figure: "That is long (over 5 min at its middle); quickest way down: one prompt (Prompts: “One
    prompt (typed below)”), about 2 min (1–4 min)". Changes (:func:`_changes`) are taken greedily, each the one
    whose plan is shortest, each kind once and two at most, until the middle is at most :data:`LONG_S` s, joined by
    "and". ``prompt``: the Prompt
    box's text; ``plan``: the planning function (by default :func:`rough_estimate` at one clock and load read
    now, so that every figure of the sentence comes from the same plan); ``methods``: False keeps the drafters and k
    (a comparison of two drafters, :mod:`app.arena.matching`)."""
    if plan is None:
        now, load = time.time(), arena_costs.machine_load()  # the module's, which a test replaces
        plan = lambda settings: rough_estimate(settings, now, load)  # noqa: E731 - one clock and load for all
    rough = plan(s)
    if rough is None or rough.estimate.seconds <= LONG_S:
        return ""
    taken, kinds, best = [], set(), rough
    while best.estimate.seconds > LONG_S and len(taken) < 2:
        tried = [(kind, words, changed, plan(changed)) for kind, words, changed in _changes(s, prompt, methods)
                 if kind not in kinds]  # each kind of change once: "24 new tokens", never then "16" as well
        tried = [t for t in tried if t[3] is not None and t[3].estimate.seconds < best.estimate.seconds]
        if not tried:
            break
        kind, words, s, best = min(tried, key=lambda t: t[3].estimate.seconds)
        taken.append(words)
        kinds.add(kind)
    if not taken:
        return ""
    return (f"That is long (over {LONG_S / 60:.0f} min at its middle); quickest way down: {' and '.join(taken)}, "
            f"{_figure(best)}")
