"""The Classroom's settings as a new user's trial met them, without a browser (the tab's events are called as Gradio
calls them; tests/test_classroom_inputs_browser.py presses the keys in a real page):

- a slider's box committed with a number out of range (k = 99, temperature 5) is set to the value runs use at once,
  with the one sentence the other tabs say, and Enter commits it as leaving the box does (before, Enter did nothing
  and 99 stayed in the box until the next click);
- the seed box says what the Live and Arena tabs' seed boxes say, only when it is committed, never while typing;
- after a setting is edited, the walkthrough menu keeps naming the run on the stage (its note says the settings
  are no longer the walkthrough's and that Record run records them) until Record run opens the new run.
No model runs: the shipped recordings are opened and Record run's model work is replaced by a stand-in.
"""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import pytest  # noqa: E402

from app import classroom, inputs  # noqa: E402
from app.classroom import running  # noqa: E402
from app.messages import enter_commits_js  # noqa: E402
from app.render import status_html  # noqa: E402
from toast_support import no_toast  # noqa: E402

POOR = "poor-drafter"
NAMES = {"classroom-k": "Draft length k", "classroom-temperature": "Temperature",
         "classroom-max-new-tokens": "Max new tokens"}
"""The names the Classroom's slider sentences give, as the Live tab's sliders give them."""


@pytest.fixture(scope="module")
def tabs():
    """The Classroom and Arena tabs built in one page: (demo, {elem_id: block}, {(elem_id, event): handler})."""
    from app.arena import build_tab as arena_tab

    with gr.Blocks() as demo:
        with gr.Tabs():
            with gr.Tab("Arena"):
                arena_tab("embedded")
            with gr.Tab("Classroom", id="classroom"):
                classroom.build_tab("embedded")
    ids = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    blocks = {getattr(b, "elem_id", None): b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    events: dict = {}
    for fn in demo.fns.values():
        for target, event in fn.targets:
            events.setdefault((ids.get(target), event), []).append(fn)
    return demo, blocks, events


def _said(notice) -> str:
    """A notice's sentence as a status line's HTML shows it."""
    return html.escape(notice[1])


def _inside(block, elem_ids: tuple[str, ...]) -> bool:
    """Whether ``block`` lies inside a block whose elem_id is one of ``elem_ids``."""
    parent = getattr(block, "parent", None)
    while parent is not None:
        if getattr(parent, "elem_id", None) in elem_ids:
            return True
        parent = getattr(parent, "parent", None)
    return False


def test_enter_commits_every_classroom_box_as_in_the_other_tabs(tabs):
    demo, blocks, _ = tabs
    assert classroom.ENTER_COMMITS_JS == enter_commits_js("#classroom-controls, #whatif")  # the shared script
    assert classroom.ENTER_COMMITS_JS in [fn.js for fn in demo.fns.values() if fn.js]  # registered on page load
    boxes = [b for b in blocks.values() if isinstance(b, (gr.Slider, gr.Number)) and _inside(b, ("classroom-root",))]
    assert {b.elem_id for b in boxes} == {"classroom-k", "classroom-temperature", "classroom-max-new-tokens",
                                          "classroom-seed", "classroom-exit-layer", "classroom-repetition-penalty",
                                          "whatif-kmax", "whatif-tokens"}
    assert [b.elem_id for b in boxes if not _inside(b, ("classroom-controls", "whatif"))] == []  # all in scope


@pytest.mark.parametrize("elem_id, typed, used, said", [
    ("classroom-k", 99, 16, "Draft length k is at most 16 here; using 16."),
    ("classroom-k", 0, 1, "Draft length k is at least 1 here; using 1."),
    ("classroom-temperature", 5, 2, "Temperature is at most 2 here; using 2."),
    ("classroom-temperature", -0.5, 0, "Temperature is at least 0 here; using 0."),
    ("classroom-max-new-tokens", 500, 64, "Max new tokens is at most 64 here; using 64."),
    ("classroom-k", {"kept": 4, "bad": False}, 4, "Draft length k was empty; kept 4."),
    ("classroom-k", {"kept": 6, "bad": True}, 6, "Draft length k was not a number; kept 6."),
])
def test_a_classroom_slider_box_committed_out_of_range_is_set_and_said_at_once(tabs, elem_id, typed, used, said):
    """The slider's commit (release: the box left, or Enter through :data:`classroom.ENTER_COMMITS_JS`) sets the box
    to the value runs use and says the other tabs' sentence (:func:`app.inputs.clamp_notice`, the shared helper)."""
    _, blocks, events = tabs
    (fn,) = events[(elem_id, "release")]
    assert fn.preprocess is False and fn.trigger_mode == "multiple"  # each commit, read raw
    update, status = fn.fn(typed)
    assert update["value"] == used and html.escape(said) in status and "status-info" in status
    slider = blocks[elem_id]
    if not isinstance(typed, dict):  # the sentence is the shared helper's, as in the Live, Arena and Batching tabs
        assert said == inputs.clamp_notice(typed, NAMES[elem_id], slider.minimum, slider.maximum)[1]
    assert all(v == {"__type__": "update"} for v in fn.fn(slider.maximum))  # in range: nothing changes


def test_the_seed_box_says_what_the_other_tabs_seed_box_says_when_committed_only(tabs):
    _, _, events = tabs
    (ours,) = events[("classroom-seed", "blur")]  # left, or Enter (ENTER_COMMITS_JS sends a blur)
    (arena,) = events[("arena-seed", "blur")]
    for typed, used in ((-1.5, 0), (2.5, 3), ("abc", 0), (2**60, inputs.MAX_SEED)):
        with no_toast():
            update, status = ours.fn(typed)
        with no_toast():
            theirs = arena.fn(typed)  # word for word the Arena's (and Live's: the same rule), marked as its box's
        assert theirs == (update, status.replace('data-box="classroom-seed"', 'data-box="arena-seed"'))
        assert update["value"] == used and _said(inputs.number_notice(typed, inputs.SEED)) in status
    with no_toast():
        update, status = ours.fn(-1.5)
    assert "Seed must be between 0 and 9,007,199,254,740,991 (got -1.5). Using 0." in status
    update, status = ours.fn("")  # emptied: its default back, no toast
    assert update["value"] == 0 and "Seed: the box was left empty, so it is set back to its default, 0." in status
    assert all(v == {"__type__": "update"} for v in ours.fn(7))  # a seed the run takes: nothing said
    # while typing, the seed box's only listener tells the walkthrough's note (settings_edited), never the status
    typing = events[("classroom-seed", "input")] + events.get(("classroom-seed", "change"), [])
    assert [fn.fn for fn in typing] == [classroom.settings_edited]
    assert [[o.elem_id for o in fn.outputs] for fn in typing] == [["classroom-note"]]


def test_a_boxs_sentence_goes_above_the_run_summary_and_replaces_an_earlier_one(tabs):
    """Trials: "Seed must be…" replaced the Classroom's status, and k = -1.5 in the Live tab replaced "Done in…": the
    run's summary was gone, and a valid value typed next left the stale sentence. A box's sentence now goes above the
    status the tab showed (read along with the box), marked as its box's with the value it set; a second one
    replaces the first; the value it set read back changes nothing, another value the run takes removes it."""
    demo, blocks, events = tabs
    (seed,) = events[("classroom-seed", "blur")]
    k = next(fn for fn in events[("classroom-k", "release")] if fn.js)
    assert [b.elem_id for b in seed.inputs][:2] == ["classroom-seed", "classroom-status"]
    assert [b.elem_id for b in k.inputs] == ["classroom-k", "classroom-status"] and "...rest" in k.js
    assert (k.concurrency_limit, k.concurrency_id) == (1, "release-classroom-k")  # answered one at a time, in order
    summary = status_html("Recorded run: 12 passes, acceptance 0.40.", "done")
    with no_toast():
        update, status = seed.fn(-1.5, summary)
    assert status.startswith('<div class="status-notice" data-box="classroom-seed" data-used="0">')
    assert status.endswith(summary) and _said(inputs.number_notice(-1.5, inputs.SEED)) in status
    assert update["value"] == 0
    with no_toast():
        _, again = seed.fn(2.5, status)
    assert again.count("status-notice") == 1 and again.endswith(summary)
    assert _said(inputs.number_notice(2.5, inputs.SEED)) in again and "got -1.5" not in again
    update, clamped_k = k.fn(99, again)  # a slider's sentence replaces the seed's, the summary stays
    assert update["value"] == 16 and 'data-box="classroom-k" data-used="16"' in clamped_k
    assert "Seed must" not in clamped_k and clamped_k.endswith(summary) and clamped_k.count("status-notice") == 1
    assert seed.fn(7, clamped_k) == (gr.skip(), gr.skip())  # a good seed leaves the k sentence alone
    assert k.fn(16, clamped_k) == (gr.skip(), gr.skip())  # the clamped 16 read back (the next release): it stays
    assert k.fn({"ignore": True}, clamped_k) == (gr.skip(), gr.skip())  # an empty value being put back: the same
    assert k.fn(5, clamped_k) == (gr.skip(), summary)  # k = 5, which the run takes: the sentence goes
    _, emptied = seed.fn("", None)  # nothing shown before: the sentence alone
    assert "set back to its default" in emptied and emptied.endswith("</div></div>")


def _opened_poor() -> tuple[dict, list, object]:
    """The poorly matched drafter walkthrough opened from the menu: (walkthrough, settings in FIELDS order, stepper)."""
    walkthrough = {w["id"]: w for w in classroom.load_walkthroughs()}[POOR]
    out = classroom.open_walkthrough(POOR)
    n = len(classroom.FIELDS)
    stepper, status = out[1 + n], out[2 + n]
    assert f"Recorded run of “{html.escape(walkthrough['title'])}”" in status  # the walkthrough's run on the stage
    return walkthrough, list(out[1:1 + n]), stepper


def test_an_edit_keeps_the_menu_on_the_run_shown_and_says_record_run_records_the_settings(tabs):
    _, _, events = tabs
    walkthrough, values, stepper = _opened_poor()
    shipped = classroom.shipped_recording(POOR).recording
    assert stepper.recording.output_ids == shipped.output_ids
    edited = list(values)
    edited[classroom.FIELDS.index("k")] = 2
    note = classroom.settings_edited(POOR, stepper, *edited)
    assert html.escape(walkthrough["title"]) in note and html.escape(classroom.EDITED) in note
    assert classroom.EDITED == ("You changed the settings below, so they are no longer this walkthrough's: the run "
                                "on the stage is still its recorded run. Press Record run to record a run with your "
                                "settings.")
    # no edit event changes the menu or the stage: the run shown keeps its name
    for name in classroom.FIELDS:
        (fn,) = events[(f"classroom-{name.replace('_', '-')}", "input")]
        assert [o.elem_id for o in fn.outputs] == ["classroom-note"], name
    values[classroom.FIELDS.index("k")] = float(values[classroom.FIELDS.index("k")])  # a slider's float: still it
    assert classroom.settings_edited(POOR, stepper, *values) == classroom.note_html(walkthrough)  # edited back
    assert html.escape(classroom.EDITED_NO_RUN) in classroom.settings_edited(POOR, None, *edited)  # nothing shown
    assert classroom.settings_edited(classroom.CUSTOM, stepper, *edited) == gr.skip()


def _stand_in_record(opened_run):
    """A stand-in for :func:`app.classroom.running.record`: a waiting status, then ``opened_run`` (8 outputs)."""
    def record(*fields):
        yield (gr.skip(), "<p>Recording…</p>", *(gr.skip(),) * 6)
        yield opened_run
    return record


def test_record_run_names_the_new_run_only_once_it_opens(monkeypatch):
    walkthrough, values, stepper = _opened_poor()
    edited = list(values)
    edited[classroom.FIELDS.index("k")] = 2
    new_run = (stepper, "<p>Recorded: …</p>", "p", "c", "t", None, "o", None)  # a stepper: the run opened
    monkeypatch.setattr(running, "record", _stand_in_record(new_run))
    waiting, done = list(classroom.record_run(POOR, *edited))
    assert waiting[-2:] == (gr.skip(), gr.skip())  # while recording, the menu still names the run shown
    assert done[:8] == new_run and done[8]["value"] == classroom.CUSTOM and done[9] == ""
    waiting, done = list(classroom.record_run(POOR, *values))  # the walkthrough's own settings: still its name
    assert done[8]["value"] == POOR and done[9] == classroom.note_html(walkthrough)
    failed = (gr.skip(), "<p class='status-error'>The prompt is empty.</p>", *(gr.skip(),) * 6)
    monkeypatch.setattr(running, "record", lambda *fields: (out for out in [failed]))
    assert list(classroom.record_run(POOR, *edited)) == [(*failed, gr.skip(), gr.skip())]  # failed: unchanged


def test_a_link_with_changed_settings_names_the_walkthrough_and_says_nothing_is_recorded():
    from types import SimpleNamespace

    out = classroom.on_load(SimpleNamespace(query_params={"tab": "classroom", "preset": POOR, "k": "2"}))
    assert out[0]["value"] == POOR and html.escape(classroom.EDITED_NO_RUN) in out[1]
    assert out[3 + len(classroom.FIELDS)] is None  # no run on the stage


def test_record_run_says_at_once_that_a_run_is_coming(tabs):
    """A trial on a busy machine: 15 s after Record run the status still showed the old "Recorded run" line. The
    click's unqueued handler now pauses Play and says the run is in line; the queued run's own lines follow it."""
    from app.classroom.running import RECORD_PRESSED, record_pressed

    demo, blocks, _ = tabs
    playing, timer, play, status = record_pressed()
    assert playing is False and play.value == "▶ Play"
    assert RECORD_PRESSED in html.unescape(status) and "status-wait" in status
    record_id = blocks["classroom-record"]._id
    status_id = blocks["classroom-status"]._id
    at_once = [fn for fn in demo.fns.values() if (record_id, "click") in [tuple(t) for t in fn.targets]
               and fn.fn is record_pressed]
    assert len(at_once) == 1 and not at_once[0].queue
    assert status_id in [o._id for o in at_once[0].outputs]


def test_the_recording_status_counts_tokens_in_words():
    """A trial read "Recording… pass 0, 1 tokens" while the prompt was read; pass 0 is the prefill."""
    from app.classroom.running import recording_progress

    assert recording_progress(0, 1) == "Recording… prompt read, 1 token"
    assert recording_progress(3, 7) == "Recording… pass 3, 7 tokens"
    assert recording_progress(1, 1) == "Recording… pass 1, 1 token"
