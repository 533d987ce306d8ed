"""Recording files (specviz.analysis.recording): round trips, files written with fewer fields (an older writer),
refused files (size, format, version, inconsistent events: one sentence each, never a trace), the shipped
walkthrough recordings (they open, and re-recording a greedy one reproduces its token ids), and the Classroom's
open / upload / download handlers and the operator switch SPECVIZ_ALLOW_UPLOADS."""

from __future__ import annotations

import copy
import gzip
import html
import json
import os

import pytest
from test_classroom_stepper import greedy_recording, sampling_recording

from specviz.analysis import recording as rf
from specviz.analysis.recording import RecordingError
from specviz.analysis.stepper import Stepper
from specviz.core.events import PassEvent
from specviz.runtime.policy import Policy

GREEDY_WALKTHROUGHS = ("grounded-ngram", "chat-ngram", "lookahead-jacobi")


def _doc(rec=None) -> dict:
    return json.loads(gzip.decompress(rf.dumps(rec or sampling_recording(), {"title": "t"})))


def _refused(data) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(RecordingError) as caught:
        rf.loads(raw)
    message = str(caught.value)
    assert message.endswith(".") and "\n" not in message and "Traceback" not in message
    return message


# ------------------------------------------------------------------------------------------------- the format


@pytest.mark.parametrize("make", [sampling_recording, greedy_recording])
def test_a_recording_round_trips_through_a_file(make, tmp_path):
    rec = make()
    path = rf.save(tmp_path / "run.json.gz", rec, {"title": "a run", "settings": {"k": 4}})
    opened = rf.load(path)
    back = opened.recording
    assert back.events[1:] == tuple(e for e in rec.events[1:])  # every field, nested records included
    assert back.events[0] == rec.events[0]
    assert (back.greedy, back.drafter_name, back.deterministic, back.prompt_tokens) == (
        rec.greedy, rec.drafter_name, rec.deterministic, rec.prompt_tokens)
    assert dict(back.token_texts) == dict(rec.token_texts) and dict(back.rejections) == dict(rec.rejections)
    assert opened.meta["title"] == "a run" and opened.meta["created_by"].startswith("specviz ")
    assert rf.dumps(rec, {"title": "a run"}) == rf.dumps(back, {"title": "a run"})  # reproducible bytes
    assert rf.loads(json.dumps(rf.to_dict(rec)).encode()).recording.events == back.events  # plain JSON opens too


def test_every_event_field_has_a_reader():
    """A field added to PassEvent needs a reader in EVENT_READERS (old files then still open: it takes its
    default when missing)."""
    fields = {f.name for f in __import__("dataclasses").fields(PassEvent)}
    assert fields <= set(rf.EVENT_READERS), sorted(fields - set(rf.EVENT_READERS))


def test_a_file_written_with_fewer_fields_still_opens():
    """An older writer knew fewer event fields: missing ones take their defaults or are derived."""
    doc = _doc()
    optional = ("run", "k", "accept_mask", "next_id", "next_kind", "text_delta", "timings", "t_end_ms",
                "num_generated", "target_cache_len", "draft_cache_len", "near_tie_gap", "next_k", "draft_source",
                "tree", "notice", "expected_gain", "row", "finish_reason")
    for event in doc["events"]:
        for name in optional:
            event.pop(name, None)
    for dist in doc["rejections"].values():
        dist.pop("draft_known")
    del doc["meta"], doc["deterministic"], doc["prompt_tokens"]
    doc["events"][0]["a_field_from_the_future"] = {"ignored": True}
    opened = rf.from_dict(doc)
    rec, full = opened.recording, sampling_recording()
    assert [e.emitted_ids for e in rec.events] == [e.emitted_ids for e in full.events]
    assert [e.accept_mask for e in rec.events] == [e.accept_mask for e in full.events]
    assert [(e.next_id, e.next_kind) for e in rec.events[:3]] == [(e.next_id, e.next_kind) for e in full.events[:3]]
    assert rec.events[1].k == 4 and rec.events[2].num_generated == 1 + 3 + 3
    stepper = Stepper(rec)
    while not stepper.at_end:  # every step still shows
        stepper.next()
        assert stepper.caption() and stepper.progress()


def test_refused_files_get_one_sentence():
    assert "at most 1 MB" in _refused(b" " * (rf.MAX_FILE_BYTES + 1))
    assert "not a specviz recording" in _refused(b"\x00\x01 not json")
    assert "not a specviz recording" in _refused({"format": "something-else"})
    assert "newer specviz" in _refused({**_doc(), "version": rf.VERSION + 1})
    bomb = gzip.compress(b" " * (rf.MAX_JSON_BYTES + 10))
    assert len(bomb) < rf.MAX_FILE_BYTES and "Uncompressed" in _refused(bomb)
    assert "cannot be decompressed" in _refused(b"\x1f\x8b garbage")
    assert "not a specviz recording" in _refused(json.dumps(_doc()).replace('"t_end_ms":', '"t_end_ms":NaN,"x":')
                                                 .encode())
    doc = _doc()
    doc["events"][1]["num_accepted"] = 9
    assert "Event 1" in _refused(doc)
    doc = _doc()
    doc["events"][1]["draft_ids"] = ["a"]
    assert "draft_ids must be a whole number" in _refused(doc)
    doc = _doc()
    doc["events"][1]["details"][0]["target_prob"] = 3.5
    assert "probability" in _refused(doc)
    doc = _doc()
    doc["rejections"]["1"]["chosen_id"] = 999
    assert "rejection at event 1" in _refused(doc)
    doc = _doc()
    doc["rejections"]["7"] = doc["rejections"]["1"]
    assert "an event it lacks" in _refused(doc)
    doc = _doc()
    doc["events"] = []
    assert "no events" in _refused(doc)
    doc = _doc()
    del doc["events"][1]["emitted_ids"]
    assert "lacks emitted_ids" in _refused(doc)
    doc = _doc()
    doc["events"][1]["details"][2]["uniform"] = None  # the rejected position of a sampling run
    assert "uniform" in _refused(doc)
    doc = _doc()
    doc["token_texts"] = {"x": 1}
    assert "token_texts" in _refused(doc)


def test_a_too_big_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json.gz"
    with path.open("wb") as f:
        f.truncate(rf.MAX_FILE_BYTES + 1)
    with pytest.raises(RecordingError, match=r"^The file is 1 MB; a recording file may be at most 1 MB\.$"):
        rf.load(path)


# ------------------------------------------------------------------------------------------------- shipped files


def test_every_walkthrough_ships_a_recording_that_opens():
    from app import classroom

    for walkthrough in classroom.load_walkthroughs():
        path = classroom.recording_path(walkthrough["id"])
        assert path.is_file(), f"run scripts/record_walkthroughs.py {walkthrough['id']}"
        assert path.stat().st_size < 64 * 1024
        opened = rf.load(path)
        assert opened.meta["walkthrough"] == walkthrough["id"]
        assert classroom.meta_settings(opened.meta)["prompt"] == walkthrough["settings"]["prompt"]
        rec = opened.recording
        assert rec.greedy == (walkthrough["settings"].get("temperature", 0) == 0)
        assert len(rec.output_ids) == walkthrough["settings"]["max_new_tokens"]
        assert any(e.num_rejections for e in rec.events)  # every walkthrough shows a rejection


@pytest.mark.parametrize("walkthrough_id", GREEDY_WALKTHROUGHS)
def test_re_recording_a_greedy_walkthrough_reproduces_the_shipped_token_ids(walkthrough_id, embedded):
    from app import classroom

    walkthrough = {w["id"]: w for w in classroom.load_walkthroughs()}[walkthrough_id]
    assert walkthrough["settings"]["temperature"] == 0.0
    shipped = rf.load(classroom.recording_path(walkthrough_id)).recording
    again = classroom.record_walkthrough(walkthrough).recording
    assert rf.token_ids(again) == rf.token_ids(shipped)
    assert [e.num_accepted for e in again.events] == [e.num_accepted for e in shipped.events]


# ------------------------------------------------------------------------------------------------- the Classroom


def test_opening_a_walkthrough_needs_no_model(monkeypatch):
    from app import classroom

    def no_model(*args, **kwargs):
        raise AssertionError("a recorded walkthrough must not load a model")

    monkeypatch.setattr(classroom.running, "load_target", no_model)
    walkthrough = classroom.load_walkthroughs()[0]
    out = classroom.open_walkthrough(walkthrough["id"])
    stepper, status, progress, caption, table, chart, output, download, playing, timer, play = out[
        1 + len(classroom.FIELDS):]
    assert playing is False and timer.active is False and play.value == "▶ Play"  # opening a run pauses Play
    assert isinstance(stepper, Stepper) and "Recorded run" in status and "status-done" in status
    assert "Prefill" in caption and "step 1 /" in progress
    assert download["value"].endswith(f"{walkthrough['id']}.json.gz") and download["interactive"] is True
    assert rf.load(download["value"]).recording.events == stepper.recording.events
    stepper.next()
    assert classroom.step_next(stepper)[0].index == 2  # stepping: pure Python on the shared recording
    assert classroom.shipped_recording(walkthrough["id"]) is classroom.shipped_recording(walkthrough["id"])
    assert classroom.open_walkthrough(classroom.CUSTOM) == (classroom.gr.skip(),) * (len(classroom.FIELDS) + 12)


def test_page_load_opens_the_first_walkthrough_or_the_linked_one():
    from types import SimpleNamespace

    from app import classroom

    walkthroughs = classroom.load_walkthroughs()
    plain = classroom.on_load(SimpleNamespace(query_params={}))
    assert isinstance(plain[3 + len(classroom.FIELDS)], Stepper)
    linked = classroom.on_load(SimpleNamespace(query_params={"preset": walkthroughs[2]["id"]}))
    stepper = linked[3 + len(classroom.FIELDS)]
    assert stepper.recording is classroom.shipped_recording(walkthroughs[2]["id"]).recording
    changed = classroom.on_load(SimpleNamespace(query_params={"preset": walkthroughs[2]["id"], "seed": "99"}))
    assert changed[3 + len(classroom.FIELDS)] is None and "Record run" in changed[4 + len(classroom.FIELDS)]


def _upload(path):
    from app import classroom

    out = classroom.open_upload(str(path))
    n = len(classroom.FIELDS)
    return out, out[n + 3]


def test_upload_opens_a_downloaded_run_and_refuses_bad_files(tmp_path, monkeypatch):
    from app import classroom

    monkeypatch.delenv("SPECVIZ_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("SPECVIZ_ALLOW_UPLOADS", raising=False)
    walkthrough = classroom.load_walkthroughs()[1]
    download = classroom.open_walkthrough(walkthrough["id"])[-4]["value"]
    good = tmp_path / "shared.json.gz"
    good.write_bytes(open(download, "rb").read())
    out, status = _upload(good)
    assert "Opened shared.json.gz" in status and out[0]["value"] == walkthrough["id"]
    assert out[2] == walkthrough["settings"]["prompt"]  # the file's settings fill the fields
    assert isinstance(out[2 + len(classroom.FIELDS)], Stepper)
    assert out[-3:][0] is False and out[-2].active is False  # a file opened while playing: Play pauses

    edited = rf.load(good)
    other = rf.save(tmp_path / "edited.json.gz", edited.recording, {**edited.meta, "settings": {"prompt": "x"}})
    out, status = _upload(other)
    assert out[0]["value"] == classroom.CUSTOM and out[2] == "x"

    big = tmp_path / "big.json.gz"
    big.write_bytes(b"\x1f\x8b" + os.urandom(rf.MAX_FILE_BYTES))
    out, status = _upload(big)
    assert "status-error" in status and "may be at most 1 MB" in status
    assert all(v == classroom.gr.skip() for i, v in enumerate(out) if i != len(classroom.FIELDS) + 3)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "not a specviz recording" in _upload(broken)[1]

    monkeypatch.setenv("SPECVIZ_PUBLIC", "1")  # a public server: uploads off unless the operator turns them on
    out, status = _upload(good)
    assert "turned off on this server (SPECVIZ_ALLOW_UPLOADS)" in status
    monkeypatch.setenv("SPECVIZ_ALLOW_UPLOADS", "1")
    assert "Opened" in _upload(good)[1]


def test_every_upload_reaches_the_handler_and_its_status_names_that_file_only(tmp_path, monkeypatch):
    """Seen in the browser: after a refused tampered.json.gz, a picture.png was refused by Gradio's own type check
    in the browser (the button's file_types), so the handler never ran and the status kept tampered.json.gz's
    message. The button now takes any file; each refusal names its own file and says the shown run stays."""
    import gradio as gr
    from app import classroom

    monkeypatch.delenv("SPECVIZ_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    with gr.Blocks():
        classroom.build_tab()
        button = next(b for b in gr.context.Context.root_block.blocks.values()
                      if getattr(b, "elem_id", None) == "classroom-upload")
    assert button.file_types is None
    picture = tmp_path / "picture.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    broken = tmp_path / "tampered.json.gz"
    broken.write_text("{not json")
    first = _upload(broken)[1]
    assert "tampered.json.gz: The file is not a specviz recording" in first and classroom.KEPT_RUN in first
    second = _upload(picture)[1]
    assert "status-error" in second and "picture.png: The file is not a specviz recording" in second
    assert "tampered" not in second and classroom.KEPT_RUN in second


def test_upload_policy_defaults():
    assert Policy.from_env({}).allow_uploads is True
    assert Policy.from_env({"SPACE_ID": "org/space"}).allow_uploads is False
    assert Policy.from_env({"SPECVIZ_PUBLIC": "1", "SPECVIZ_ALLOW_UPLOADS": "yes"}).allow_uploads is True
    assert Policy.from_env({"SPECVIZ_ALLOW_UPLOADS": "maybe"}).allow_uploads is False  # unreadable: the safe choice
    assert "recording uploads off" in Policy.from_env({"SPACE_ID": "x"}).describe()


def test_a_recorded_run_offers_its_download(monkeypatch):
    from app import classroom

    rec = copy.deepcopy(greedy_recording())
    monkeypatch.setattr(classroom.running, "on_device", lambda work, what, width, notes=None: _done((rec, "", 0)))
    out = list(classroom.record("Hello", "ngram", 0, "", 3, 0.0, 0, 8, "embedded"))
    stepper, status, *_, download = out[-1]
    assert "Recorded" in status and download["value"].endswith("specviz-run.json.gz")
    opened = rf.load(download["value"])
    assert opened.recording.events == rec.events and classroom.meta_settings(opened.meta)["prompt"] == "Hello"


def _done(value):
    return value
    yield  # a generator that returns ``value`` at once, like _on_device after the device work


def test_tree_and_lookahead_records_round_trip():
    from dataclasses import replace

    from specviz.core.events import LookaheadRecord, TreeRecord

    rec = greedy_recording()
    tree = TreeRecord(tokens=(2, 3, 4, 7), parents=(-1, 0, 1, 0), path=(0,), shown=(0, 1))
    window = LookaheadRecord(levels=((5, 6), (7, 8)), new_level=(9, 10), candidates=((2, 3), (4, 5)), winner=0,
                             accepted=1, pool_size=12, added=2)
    events = (rec.events[0], replace(rec.events[1], tree=tree, lookahead=window, draft_source="pool", notice="hi"))
    rec = replace(rec, events=events)
    assert rf.loads(rf.dumps(rec)).recording.events == events


def test_record_run_pauses_play_at_once(monkeypatch):
    """Play kept stepping while Record run recorded, then went on stepping the new run the user had not started it
    on. A click on Record run now pauses Play outside the queue (as opening a walkthrough or a file does), before the
    queued recording starts."""
    import gradio as gr
    from app import classroom

    monkeypatch.delenv("SPECVIZ_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    with gr.Blocks() as demo:
        classroom.build_tab()
    ids = {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}
    deps = demo.get_config_file()["dependencies"]
    clicks = [d for d in deps if [ids["classroom-record"], "click"] in [list(t) for t in d["targets"]]]
    pause = [d for d in clicks if d["queue"] is False]
    assert len(clicks) == 2 and len(pause) == 1 and ids["classroom-play"] in pause[0]["outputs"]
    playing, timer, button = classroom.stop_playing()
    assert playing is False and timer.active is False and button.value == "▶ Play"


def test_clicking_open_a_recording_file_replaces_an_earlier_uploads_message(monkeypatch):
    """Seen in the browser: after bad.json.gz was refused, a 5 MB file was refused by Gradio itself (its
    max_file_size, a toast) before open_upload ran, so the status kept saying "bad.json.gz: …" under the new
    file's toast. A click on the button now sets the status first, outside the queue."""
    import gradio as gr
    from app import classroom

    monkeypatch.delenv("SPECVIZ_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    with gr.Blocks() as demo:
        classroom.build_tab()
    ids = {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}
    deps = demo.get_config_file()["dependencies"]
    clicks = [d for d in deps if [ids["classroom-upload"], "click"] in [list(t) for t in d["targets"]]]
    assert len(clicks) == 1 and clicks[0]["outputs"] == [ids["classroom-status"]] and clicks[0]["queue"] is False
    status = classroom.upload_started()
    assert "status-info" in status and classroom.PICK_FILE in status and "bad.json.gz" not in status


def test_an_early_exit_layer_the_target_lacks_is_fitted_and_said_in_a_classroom_run(tiny_model_dir):
    """Live fits an early-exit layer beyond the loaded target to its last layer but one, with a note; the
    Classroom refused it (check_exit_layer). Now it records at the fitted layer and its status says so, as Live's
    does: the tiny target has 4 layers, so layer 100 becomes 3, and layer 2 is used as asked, with no note."""
    from app import classroom

    values = {"prompt": "one two three", "drafter": "early-exit", "exit_layer": 100, "draft_model": None, "k": 3,
              "temperature": 0, "seed": 0, "max_new_tokens": 6, "target": str(tiny_model_dir)}
    settings = classroom.parse(values)
    recording, note, layer = classroom.record_settings(settings)
    assert recording.drafter_name == "early exit (layer 3/4)" and layer == 3
    from app import inputs
    from specviz.runtime.models import load_model

    label = load_model(str(tiny_model_dir), device="cpu").label  # cached by the recording
    assert note == inputs.fit_exit_layer(100, 4, label)[1]  # the target's own 4 layers; wording: test_messages.py
    recording, note, layer = classroom.record_settings(
        classroom.parse({**values, "exit_layer": 2}))
    assert recording.drafter_name == "early exit (layer 2/4)" and note == "" and layer == 2
    *_, last = classroom.record("one two three", "early-exit", 100, None, 3, 0, 0, 6, str(tiny_model_dir))
    stepper, status = last[:2]
    assert isinstance(stepper, Stepper) and stepper.recording.drafter_name == "early exit (layer 3/4)"
    assert "status-done" in status and html.escape(note) in status
    with open(last[-1]["value"], "rb") as file:  # the download the status offers
        saved = rf.loads(file.read())
    assert saved.meta["settings"]["exit_layer"] == 3  # the file names the layer the run used, not the one asked
