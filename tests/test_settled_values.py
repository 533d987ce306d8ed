"""What a new user's trial (README only, chromium at 1400 and 400 px, a busy machine) met after a box's check settled
its value, and the thread cap's record in the downloads, without a browser (tests/test_classroom_inputs_browser.py
types into a real page):

- the Classroom: "abc" typed in Seed gave the same 0 back, yet the walkthrough's note said the settings had changed;
  at 1400 px its sentence stood about 1,360 px above the box (assets/head.html part 11 now places it under the box
  at any width where the status line is out of sight);
- the Batching sweep: "Max new tokens per row" clamped to 4 left the plan beside Measure for the raw value (24, 2,
  or no number at all): it is planned again for the clamped value, under the clamp's sentence;
- the Arena's and the Batching sweep's JSON did not say which thread cap their timings ran under; an error after a
  sweep showed its first batch sizes dropped the cap's note.
Hand-written values, no model run, no timing."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import gradio as gr
import pytest

from app import classroom, estimates, messages
from app.batching import plan
from app.batching.layout import SWEEP_PLAN_INPUTS, build_tab, refresh_sweep
from app.estimates import PROBE_SPREAD, threads_record
from app.render import status_html
from specviz.core.kv import set_thread_limit

ROOT = Path(__file__).resolve().parent.parent


def _dependencies(demo: gr.Blocks, elem_id: str, event: str):
    """The event functions of ``elem_id``'s ``event`` and the config entries chained after each (``.then``)."""
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    fns = [fn for fn in demo.fns.values() for t, e in fn.targets if e == event and names.get(t) == elem_id]
    deps = demo.config["dependencies"]
    return [(fn, [d for d in deps if d.get("trigger_after") == fn._id]) for fn in fns]


# --------------------------------------------------------------------------------------------------------- Classroom


def _opened(walkthrough_id: str) -> list:
    """The walkthrough's settings in FIELDS order, as its menu entry puts them in the boxes."""
    walkthrough = next(w for w in classroom.load_walkthroughs() if w["id"] == walkthrough_id)
    settings = classroom.walkthrough_settings(walkthrough)
    return walkthrough, [settings[name] for name in classroom.FIELDS]


def test_an_emptied_number_box_does_not_mark_the_settings_changed():
    walkthrough, values = _opened(classroom.load_walkthroughs()[0]["id"])
    seed = classroom.FIELDS.index("seed")
    assert values[seed] == 0  # the trial's walkthrough: "abc" in Seed gave this same 0 back
    stepper = object()
    plain = classroom.note_html(walkthrough)
    for emptied in (None, ""):  # Chromium empties a number box typed over with letters: no value yet
        typed = list(values)
        typed[seed] = emptied
        assert classroom.settings_edited(walkthrough["id"], stepper, *typed) == gr.skip()
    assert classroom.settings_edited(walkthrough["id"], stepper, *values) == plain  # the 0 its check put back
    typed = list(values)
    typed[seed] = 5
    assert html.escape(classroom.EDITED) in classroom.settings_edited(walkthrough["id"], stepper, *typed)
    k = classroom.FIELDS.index("k")
    typed = list(values)
    typed[k] = ""  # a slider's emptied box: the page puts its earlier value back
    assert classroom.settings_edited(walkthrough["id"], stepper, *typed) == gr.skip()


def test_each_classroom_box_check_is_followed_by_the_note_for_the_settled_value():
    with gr.Blocks() as demo:
        with gr.Tabs():
            with gr.Tab("Classroom", id="classroom"):
                classroom.build_tab("embedded")
    for elem_id, event in (("classroom-seed", "blur"), ("classroom-exit-layer", "blur"),
                           ("classroom-repetition-penalty", "blur"), ("classroom-k", "release"),
                           ("classroom-temperature", "release"), ("classroom-max-new-tokens", "release")):
        ((check, after),) = _dependencies(demo, elem_id, event)
        after = [d for d in after if demo.fns[d["id"]].fn is not None]  # the browser's own step (the check's
        # in-flight mark cleared: app.messages.settled_inputs_js) runs no server function
        fns = [demo.fns[d["id"]].fn for d in after]
        assert fns == [classroom.settings_edited], elem_id
        (outputs,) = [[demo.blocks[o].elem_id for o in d["outputs"]] for d in after]
        assert outputs == ["classroom-note"]
    # the Seed's check itself: "abc" (sent as {"letters": true}) is 0 again, said in the status line
    ((seed, _),) = _dependencies(demo, "classroom-seed", "blur")
    update, status = seed.fn({"letters": True}, None)
    assert update["value"] == 0 and "Seed was not a number, so it is set back to its default, 0." in status


def test_a_box_sentence_stands_under_its_box_at_any_width_where_the_status_is_out_of_sight():
    head = (ROOT / "assets" / "head.html").read_text(encoding="utf-8")
    place = head[head.index("function noteBoxes()"):head.index("let queued = false;")]
    assert "if (!block || inSight(notice)) continue;" in place and "PHONE_PX" not in place
    style = (ROOT / "assets" / "style.css").read_text(encoding="utf-8")
    assert not re.search(r"@media \(min-width: 641px\) \{ \.sv-box-note \{ display: none", style)


# ---------------------------------------------------------------------------------------------------------- Batching


def test_the_sweep_is_planned_again_for_the_value_its_clamp_settled_on(monkeypatch):
    from app.batching import shared
    from app.batching.shared import LATEST_SWEEP, learn_timing, timing_costs

    monkeypatch.setattr(shared, "_TIMED", {})
    monkeypatch.setattr(estimates, "machine_load", lambda: (0.0, 2))
    learn_timing("embedded", "sweep", timing_costs(52.0, 4.9, LATEST_SWEEP, PROBE_SPREAD),
                 "52 ms a one-token step and 4.9 ms a token of a wide forward")
    with gr.Blocks() as demo:
        build_tab()
    for elem_id in ("batching-max-new-tokens", "batching-k"):
        ((release, after),) = _dependencies(demo, elem_id, "release")
        after = [d for d in after if demo.fns[d["id"]].fn is not None]  # the in-flight mark's browser step left out
        assert [demo.fns[d["id"]].fn for d in after] == [refresh_sweep], elem_id
        assert [demo.blocks[i].elem_id for i in after[0]["inputs"]][:4] == ["batching-status", "batching-drafter",
                                                                           "batching-k", "batching-max-new-tokens"]
    ((release, _),) = _dependencies(demo, "batching-max-new-tokens", "release")
    values = dict(drafter="ngram", k=4, max_new_tokens=0, batch_sizes=[1, 4], prompt_length="short",
                  predicted=False, target="embedded", draft_model="")
    raw = plan.sweep_plan_status(*values.values())  # the plan the typed 0 made: the form refuses it, no number
    assert "new tokens per row" not in raw and "about" not in raw
    update, clamped = release.fn(0, raw)
    assert update["value"] == 4 and "Max new tokens per row is at least 4 here; using 4." in clamped
    values["max_new_tokens"] = update["value"]  # what the slider holds once its release is answered
    shown = refresh_sweep(None, clamped, *(values[name] for name in SWEEP_PLAN_INPUTS))
    assert shown.startswith(messages.leading_notice(clamped))  # the clamp's sentence stays on top
    assert shown.count("status-notice") == 1
    assert "2 batch sizes (B = 1, 4) at 4 new tokens per row" in html.unescape(shown)
    assert re.search(r"about \d+ s", html.unescape(shown))  # a number again


# -------------------------------------------------------------------------------------------------- the thread cap


class _Tuned:
    """A model as the tuning leaves it: two torch threads for one-token and for several-token forwards."""

    _specviz_threads = (2, 2)


@pytest.fixture
def capped():
    """The cap the device runner sets beside other programs' work (one thread), lifted again afterwards."""
    set_thread_limit(1)
    yield
    set_thread_limit(None)


def test_the_thread_record_says_the_cap_the_timings_ran_under(capped):
    record = threads_record(_Tuned(), "sweep")
    assert record == {"tuned": 2, "used": 1, "capped": True, "note": estimates.threads_note_text(1, 2, "sweep")}
    assert record["note"].startswith("other programs are using the CPUs: this sweep uses 1 torch thread of the 2")
    set_thread_limit(None)
    assert threads_record(_Tuned(), "race") == {"tuned": 2, "used": 2, "capped": False, "note": ""}
    with pytest.raises(KeyError):
        threads_record(_Tuned(), "sweeps")


def test_the_sweep_json_records_the_thread_cap(capped, tmp_path):
    from app.batching.sweep_files import DEFINITIONS, sweep_json, write_sweep_files

    record = threads_record(_Tuned(), "sweep")
    result = {"rows": [], "k": 4, "max_new_tokens": 8, "stopped": True, "threads": record,
              "settings": {"batch_sizes": [1, 2], "predicted": False, "k": 4, "max_new_tokens": 8}}
    assert sweep_json(result)["threads"] == record
    assert "torch threads the timings ran under" in DEFINITIONS["threads"]
    _, path = write_sweep_files(result, str(tmp_path))
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    assert saved["threads"] == {"tuned": 2, "used": 1, "capped": True, "note": record["note"]}
    assert sweep_json({**result, "threads": None})["threads"] is None  # a result kept from before: unknown


def test_the_arena_json_records_the_thread_cap(capped, tmp_path):
    from app.arena.files import FILE_DEFINITIONS, write_files
    from specviz.analysis.arena_rows import ArenaResult

    record = threads_record(_Tuned(), "race")
    result = ArenaResult(prompts=[], variants=[], environment={"threads": record}, wall_s=1.0)
    _, path = write_files(result, str(tmp_path), wall_s=2.0)
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    assert saved["threads"]["used"] == 1 and saved["threads"]["tuned"] == 2 and saved["threads"]["capped"] is True
    assert "every method's runs and baselines here share it" in saved["threads"]["note"]
    assert saved["definitions"]["threads"] == FILE_DEFINITIONS["threads"]


def test_an_error_after_timings_were_shown_keeps_the_cap_note_a_refusal_has_none(capped):
    note = estimates.threads_note(_Tuned(), "sweep")
    failed = messages.report("batch sweep", RuntimeError("out of memory"), [note])
    assert "Something went wrong (RuntimeError: out of memory)" in failed and html.escape(note) in failed
    refused = messages.report("checking the batching inputs", ValueError("Pick at least one batch size."))
    assert refused == status_html("Pick at least one batch size.", "error")  # nothing ran: no note
