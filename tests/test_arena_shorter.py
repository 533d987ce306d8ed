"""A long Arena plan says so before Run arena and names the change that shortens it most, with that change's figure
from the same plan (app.arena.shorter.quicker); a short plan says nothing more."""

from __future__ import annotations

import pytest

from app.arena import shorter
from app.arena.progress import estimate
from app.arena.settings import choose_prompts
from app.costs import RunCosts

COSTS = RunCosts(2.0, 229.0, None, "forwards timed on this machine", (0.85, 1.25))


def _plan(settings: dict):
    """The Arena's own plan (app.arena.progress.estimate) of ``settings`` at 229 ms a token, every method at the
    middle of its unknown share (no prior: the test reads no store), on a quiet machine."""
    tokens = [len(p["prompt"]) // 4 for p in settings["prompts"]]
    return estimate(COSTS, tokens, len(settings["drafters"]) * len(settings["ks"]), settings["max_new_tokens"],
                    load=None)


def _settings(ks=("4", "auto"), drafters=("ngram", "early-exit"), tokens=48) -> dict:
    return {"prompts": choose_prompts("category", "", "code-edit"), "drafters": list(drafters), "ks": list(ks),
            "max_new_tokens": tokens, "target": "embedded"}


def test_a_long_plan_names_the_quickest_way_down_with_its_own_figure():
    s = _settings()
    assert _plan(s).estimate.seconds > shorter.LONG_S
    one = _plan({**s, "prompts": choose_prompts("prompt", "Name three colours.", "")})
    said = shorter.quicker(s, "Name three colours.", plan=_plan)
    assert said == ("That is long (over 5 min at its middle); quickest way down: one prompt (Prompts: “One prompt "
                    f"(typed below)”), {one.estimate.text()}")
    assert one.estimate.seconds <= shorter.LONG_S


def test_without_a_typed_prompt_it_takes_two_changes_at_most_each_kind_once_the_shortest_first():
    """Every method at the same share here: half the tokens (48 -> 24) shortens most, then one k or one drafter
    (equal; the first offered, k); halving again is never offered beside it ("24 ... and 8 new tokens")."""
    s = _settings()
    assert (_plan({**s, "max_new_tokens": 24}).estimate.seconds < _plan({**s, "ks": ["4"]}).estimate.seconds
            == _plan({**s, "drafters": ["ngram"]}).estimate.seconds)
    both = _plan({**s, "max_new_tokens": 24, "ks": ["4"]})
    assert shorter.quicker(s, "", plan=_plan) == ("That is long (over 5 min at its middle); quickest way down: 24 new "
                                                 f"tokens per run and k = 4 alone, {both.estimate.text()}")
    assert both.estimate.text() == "about 3 min (2–6 min)"


def test_a_short_plan_or_no_plan_says_nothing_more():
    assert shorter.quicker(_settings(ks=("4",), drafters=("ngram",), tokens=16), "Hi", plan=_plan) == ""
    assert shorter.quicker(_settings(), "Hi", plan=lambda s: None) == ""


def test_the_matching_preset_keeps_its_two_drafters_and_k():
    s = {**_settings(ks=("4",), drafters=("early-exit", "distilled")), "max_new_tokens": 256}
    half = _plan({**s, "max_new_tokens": 128}).estimate.text()
    assert shorter.quicker(s, "", plan=_plan, methods=False) == (
        f"That is long (over 5 min at its middle); quickest way down: 128 new tokens per run, {half}")


@pytest.mark.parametrize("tokens, half", [(48, 24), (40, 16), (24, 16), (16, None), (8, None)])
def test_half_the_tokens_is_a_multiple_of_8_at_least_16(tokens, half):
    words = [w for _, w, _ in shorter._changes(_settings(tokens=tokens), "")]
    assert [w for w in words if "new tokens" in w] == ([f"{half} new tokens per run"] if half else [])
