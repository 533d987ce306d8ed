"""The Classroom's pair of drafter walkthroughs (assets/walkthroughs.json): the poorly matched early exit and the
well-matched distilled draft model, on the same prompt and settings; each note leads to the other, and an opened
run's status gives its acceptance rate and tokens per pass, so the two compare run by run. No model runs: the
shipped recordings are opened (the shipped files' figures are read from them, never written here)."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app import classroom  # noqa: E402
from app.classroom.walkthroughs import compare_html  # noqa: E402
from specviz.analysis import recording as rf  # noqa: E402
from specviz.core.counters import Counters  # noqa: E402

POOR, WELL = "poor-drafter", "distilled-drafter"


def _by_id() -> dict:
    return {w["id"]: w for w in classroom.load_walkthroughs()}


def test_the_distilled_walkthrough_is_the_poor_one_with_another_drafter():
    walkthroughs = _by_id()
    poor, well = walkthroughs[POOR], walkthroughs[WELL]
    assert well["title"] == "Well-matched drafter: a distilled 2-layer model"
    assert len(well["menu"]) <= classroom.MENU_LABEL_MAX and well["menu"] == "Well-matched drafter"
    poor_settings, well_settings = map(classroom.walkthrough_settings, (poor, well))
    assert well_settings["drafter"] == "distilled" and poor_settings["drafter"] == "early-exit"
    same = [f for f in classroom.FIELDS if f not in ("drafter", "exit_layer")]
    assert {f: well_settings[f] for f in same} == {f: poor_settings[f] for f in same}  # prompt, k, T, seed, tokens
    assert "early exit" in well["description"] and "matching, not size, decides acceptance" in well["description"]
    ids = [w["id"] for w in classroom.load_walkthroughs()]
    assert ids.index(WELL) == ids.index(POOR) + 1  # side by side in the menu


def test_each_note_leads_to_the_other_walkthrough():
    walkthroughs = _by_id()
    for here, there in ((POOR, WELL), (WELL, POOR)):
        note = classroom.note_html(walkthroughs[here])
        label = html.escape(walkthroughs[there]["menu"])
        assert f"Compare it run by run with “{label}”" in note
        assert f'<a href="?tab=classroom&amp;preset={there}">open it</a>' in note
        assert classroom.settings_from_query({"tab": "classroom", "preset": there})["preset"] == there  # it opens
    assert compare_html({"id": "x", "compare": "nope"}) == "" and compare_html({"id": "x"}) == ""
    assert "cr-compare" not in classroom.note_html(walkthroughs["grounded-ngram"])


def test_an_opened_run_says_its_acceptance_and_tokens_per_pass():
    for walkthrough_id in (POOR, WELL):
        out = classroom.open_walkthrough(walkthrough_id)
        status = out[2 + len(classroom.FIELDS)]
        counts = Counters.of(rf.load(classroom.recording_path(walkthrough_id)).recording.events)
        assert counts.drafted > 0 and counts.passes > 0
        assert (f"acceptance rate {counts.acceptance_rate:.2f} ({counts.accepted} of {counts.drafted} drafted), "
                f"{counts.tokens_per_pass:.2f} tokens per pass.") in status
