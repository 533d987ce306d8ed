"""A new user's trial: Stop during a batch-size sweep lost the batch sizes already finished. The sweep shows each
batch size as it finishes (as the Arena shows its prompts) and keeps them: after a Stop the table, chart, lesson and
files hold the finished sizes, and the status says the sweep was stopped and which sizes were not measured. A Stop
while the predicted curve is timed (before any batch size) says so and keeps that timing's finished batch sizes; so
does a Stop after that timing, before the first batch size. The downloads hold what a Stop kept, the predicted
curve's T(B, 1) and T(B, k+1) included, with a note of what is missing."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import batching, device  # noqa: E402
from app.batching import sweep_handlers, sweep_job, sweep_reading  # noqa: E402
import specviz.analysis.batching as analysis  # noqa: E402
from specviz.core.events import RunCancelled  # noqa: E402
from specviz.core.verdict import format_apart  # noqa: E402
from specviz.measure import grid as grid_module  # noqa: E402


def _measure(tiny_model_dir, predicted: bool = False) -> list[tuple]:
    return list(batching.measure(batching.SweepForm("ngram", 2, 6, [1, 2, 4], batching.SHORT, predicted,
                                                    str(tiny_model_dir), "")))


def _check_stopped_after_b1(out: tuple) -> None:
    status, lesson, chart, table, csv_file, json_file = out
    assert "Stopped after B = 1 (" in status and "not measured: B = 2, 4." in status, status
    assert "hold the finished sizes" in status
    assert [row[0] for row in table["data"]] == ["1"] and chart["visible"] is True
    assert lesson["visible"] is True and lesson["value"]
    with open(json_file["value"]) as f:
        saved = json.load(f)
    assert saved["stopped"] is True and [r["batch"] for r in saved["rows"]] == [1]
    assert saved["rows"][0]["speculative_tps"] > 0 and saved["rows"][0]["standard_tps"] > 0
    assert saved["missing"]["not_measured"] == [2, 4] and saved["stop_note"].startswith(
        "Stopped: no speedup measured at B = 2, 4")
    with open(csv_file["value"]) as f:
        lines = list(csv.DictReader(f))
    assert [(r["batch"], r["note"]) for r in lines] == [
        ("1", "run stopped: this batch size finished before the Stop"), ("2", "run stopped: speedup not measured"),
        ("4", "run stopped: speedup not measured")]
    assert float(lines[0]["speedup"]) > 0 and lines[1]["speedup"] == lines[1]["verdict"] == ""
    assert not device.DEVICE.locked


@pytest.mark.parametrize("predicted", [False, True])
def test_stop_after_the_first_batch_size_keeps_and_shows_it(tiny_model_dir, monkeypatch, predicted):
    real_row, finished = analysis.sweep_row, []

    def row_then_stop(*args, **kwargs):
        row = real_row(*args, **kwargs)
        finished.append(row.batch)
        sweep_handlers.stop_sweep(None)  # the visitor presses Stop while B = 2 is about to start
        return row

    monkeypatch.setattr(analysis, "sweep_row", row_then_stop)
    outs = _measure(tiny_model_dir, predicted)
    assert finished == [1]
    _check_stopped_after_b1(outs[-1])
    # B = 1 was shown as soon as it finished, before the end: a table of one row under a "B = 1 done" status
    shown = [out for out in outs[:-1] if isinstance(out[3], dict) and out[3].get("data") and out[3]["data"][0][0]]
    assert outs[0][3]["data"] == [[""] * 10]  # the start cleared an earlier sweep's table (test_batching_new_press)
    assert shown and [row[0] for row in shown[0][3]["data"]] == ["1"] and "B = 1 done" in shown[0][0]


def test_stop_inside_a_batch_size_keeps_the_sizes_before_it(tiny_model_dir, monkeypatch):
    real_run, calls = analysis.run_batch, []

    def stop_in_b2(target, rows, *args, **kwargs):
        calls.append(len(rows))
        if len(rows) == 2 and calls.count(2) == 2:  # B = 2's second run
            sweep_handlers.stop_sweep(None)
        return real_run(target, rows, *args, **kwargs)

    monkeypatch.setattr(analysis, "run_batch", stop_in_b2)
    _check_stopped_after_b1(_measure(tiny_model_dir)[-1])


def test_a_stop_whose_job_returns_nothing_still_shows_the_finished_sizes(tiny_model_dir, monkeypatch):
    """Where the sweep's own result does not come back (the job ended by the Stop, e.g. in a GPU worker), the last
    partial result stands in for it."""
    real_work = sweep_job.sweep_work

    def cut_short(job, s):
        real_work(job, s)
        raise RunCancelled()  # the job's result is lost: Job.call returns None

    real_row = analysis.sweep_row

    def row_then_stop(*args, **kwargs):
        row = real_row(*args, **kwargs)
        sweep_handlers.stop_sweep(None)
        return row

    monkeypatch.setattr(analysis, "sweep_row", row_then_stop)
    monkeypatch.setattr(sweep_handlers, "sweep_work", cut_short)
    _check_stopped_after_b1(_measure(tiny_model_dir)[-1])


def test_the_stopped_status_names_the_sizes_left():
    result = {"rows": [{"batch": 1}, {"batch": 2}], "settings": {"batch_sizes": [16, 1, 2, 4]}}
    assert sweep_handlers.stopped_text(result, 41.6) == (
        "Stopped after B = 1, 2 (42 s); not measured: B = 4, 16. The table, chart, lesson and downloads hold the "
        "finished sizes.")


def _stop_in_the_grid(monkeypatch, after: int) -> dict:
    """Press Stop once the predicted curve's grid has timed ``after`` batch sizes; returns {"grid": its result,
    "rows": batch sizes the sweep measured} as they come."""
    real_batch, real_grid, real_row = grid_module._Grid.batch, sweep_job.measure_forward_grid, analysis.sweep_row
    seen: dict = {"rows": []}

    def batch_then_stop(self, b):
        if len(self.measurements) >= after:
            sweep_handlers.stop_sweep(None)
        return real_batch(self, b)

    def grid_kept(*args, **kwargs):
        seen["grid"] = real_grid(*args, **kwargs)
        return seen["grid"]

    def row_seen(*args, **kwargs):
        seen["rows"].append(args[2])
        return real_row(*args, **kwargs)

    monkeypatch.setattr(grid_module._Grid, "batch", batch_then_stop)
    monkeypatch.setattr(sweep_job, "measure_forward_grid", grid_kept)
    monkeypatch.setattr(analysis, "sweep_row", row_seen)
    return seen


def _lose_the_jobs_result(monkeypatch) -> None:
    """The sweep's job ends cancelled after its work, so its own result is lost (what the Stop message keeps must
    come from the timings passed back on the way)."""
    real_work = sweep_job.sweep_work

    def cut_short(job, s):
        real_work(job, s)
        raise RunCancelled()

    monkeypatch.setattr(sweep_handlers, "sweep_work", cut_short)


@pytest.mark.parametrize("lost", [False, True])
def test_stop_while_timing_the_predicted_curve_says_so_and_keeps_its_timings(tiny_model_dir, monkeypatch, lost):
    """A new user's trial: Stop while the predicted curve was timed showed no word of that phase. The status says
    the sweep stopped there, before any batch size was measured, and keeps the grid's finished T(1, 1), T(1, 3)
    (with their repeats' range), also where the job's own result is lost (``lost``)."""
    seen = _stop_in_the_grid(monkeypatch, after=1)
    if lost:
        _lose_the_jobs_result(monkeypatch)
    status, *others = _measure(tiny_model_dir, predicted=True)[-1]
    status = html.unescape(status)
    grid = seen["grid"]
    assert grid["stopped"] is True and list(grid["ms"][1]) == [1, 3] and not grid["ms"].get(2)
    assert seen["rows"] == []  # no batch size was measured
    ends = [grid["spread"][1][n] for n in (1, 3)]
    cells = [f"T(1,{n}) = {grid['ms'][1][n]:.1f} ("
             + ("repeats equal" if low == high else "–".join(format_apart(low, high, 1, 3))) + ")"
             for n, (low, high) in zip((1, 3), ends)]
    assert "Stopped while timing the predicted curve (" in status, status
    assert "s), before any batch size was measured. Timed before the Stop (median ms of one forward, range of the " \
           f"repeats): B = 1: {cells[0]}, {cells[1]}" in status, status
    assert "; not timed: B = 2, 4. A predicted speedup also needs B = 1's tokens per pass" in status, status
    assert "so there is no chart or table; the downloads hold these timings.</span>" in status, status
    lesson, chart, table, csv_file, json_file = others
    assert all(isinstance(o, dict) and o.get("__type__") == "update" and len(o) == 1 for o in (lesson, chart, table))
    with open(csv_file["value"]) as f:  # the downloads hold the timings the status lists, and say what is missing
        lines = list(csv.DictReader(f))
    assert [(r["batch"], r["note"]) for r in lines] == [
        ("1", "run stopped: speedup not measured"),
        ("2", "run stopped: speedup not measured; T(B, 1) and T(B, 3) not timed for the predicted curve"),
        ("4", "run stopped: speedup not measured; T(B, 1) and T(B, 3) not timed for the predicted curve")]
    assert [float(lines[0][c]) for c in ("grid_step_ms", "grid_step_ms_min", "grid_step_ms_max")] == pytest.approx(
        [grid["ms"][1][1], *ends[0]]) and float(lines[0]["grid_verify_ms"]) == pytest.approx(grid["ms"][1][3])
    assert lines[1]["grid_step_ms"] == lines[1]["speedup"] == ""
    with open(json_file["value"]) as f:
        saved = json.load(f)
    assert saved["stopped"] is True and saved["rows"] == []
    assert saved["missing"] == {"not_measured": [1, 2, 4], "not_timed": [2, 4]}
    assert [g["batch"] for g in saved["grid_timings"]] == [1]
    assert saved["grid_timings"][0]["verify_ms_max"] == pytest.approx(ends[1][1])
    assert not device.DEVICE.locked


def test_stop_before_the_predicted_curve_timed_any_size(tiny_model_dir, monkeypatch):
    seen = _stop_in_the_grid(monkeypatch, after=0)
    status = html.unescape(_measure(tiny_model_dir, predicted=True)[-1][0])
    assert seen["grid"]["stopped"] is True and seen["grid"]["ms"] == {1: {}} and seen["rows"] == []
    assert ("Stopped while timing the predicted curve (" in status and "s), before any batch size was measured: no "
            "batch size's timing finished, so there is nothing to show." in status), status


def test_the_predicted_curve_stopped_status_names_its_timings():
    grid = {"ms": {1: {1: 2.14, 3: 2.83}, 2: {1: 3.0, 3: 2.5}, 4: {1: 5.0}},
            "spread": {1: {1: (2.05, 2.31), 3: (2.83, 2.83)}, 2: {1: (2.9, 3.1), 3: (2.4, 2.6)}, 4: {}},
            "impossible": [], "stopped": True}
    result = {"rows": [], "k": 2, "grid": grid, "settings": {"batch_sizes": [1, 2, 4, 8]}}
    assert sweep_handlers.grid_stopped_text(result, 12.4) == (
        "Stopped while timing the predicted curve (12 s), before any batch size was measured. Timed before the Stop "
        "(median ms of one forward, range of the repeats): B = 1: T(1,1) = 2.1 (2.0–2.3), T(1,3) = 2.8 (repeats "
        "equal); B = 2: T(2,1) = 3.0 (2.9–3.1), T(2,3) = 2.5 (2.4–2.6) (too noisy: timed faster than less work); "
        "not timed: B = 4, 8. A predicted speedup also needs B = 1's tokens per pass, measured after this timing, so "
        "there is no chart or table; the downloads hold these timings.")
    assert sweep_handlers.grid_stopped_text({**result, "grid": {**grid, "ms": {1: {}}}}, 3) == (
        "Stopped while timing the predicted curve (3 s), before any batch size was measured: no batch size's "
        "timing finished, so there is nothing to show.")


@pytest.mark.parametrize("lost", [False, True])
def test_stop_after_the_predicted_curve_before_the_first_size_says_what_finished(tiny_model_dir, monkeypatch, lost):
    """A new user's trial: a Stop after the predicted curve was timed, before B = 1 was measured, read "Stopped
    before the first batch size finished: nothing to show." although every T(B, 1) and T(B, 3) had finished. It now
    lists them, says what was not measured, and the downloads hold them; also where the job's own result is lost."""
    real_grid, seen = sweep_job.measure_forward_grid, {}

    def grid_then_stop(*args, **kwargs):
        seen["grid"] = real_grid(*args, **kwargs)
        sweep_handlers.stop_sweep(None)  # the visitor presses Stop as the grid's last forward ends
        return seen["grid"]

    monkeypatch.setattr(sweep_job, "measure_forward_grid", grid_then_stop)
    if lost:
        _lose_the_jobs_result(monkeypatch)
    status, lesson, chart, table, csv_file, json_file = _measure(tiny_model_dir, predicted=True)[-1]
    status, grid = html.unescape(status), seen["grid"]
    assert grid["stopped"] is False and sorted(grid["ms"]) == [1, 2, 4]
    texts, done = sweep_reading.grid_timings(grid, 2)
    assert done == [1, 2, 4] and texts[0].startswith(f"B = 1: T(1,1) = {grid['ms'][1][1]:.1f} (")
    assert re.search(r"ℹ Stopped after the predicted curve was timed \(\d+ s\), before the first batch size "
                        r"\(B = 1\) was measured\. Timed \(median ms of one forward, range of the repeats\): "
                        + re.escape("; ".join(texts)) + re.escape(
                            "; not measured: the speedup at B = 1, 2, 4, so there is no chart or table; the downloads "
                            "hold these timings.</span>"), status), status
    assert all(o.get("__type__") == "update" and len(o) == 1 for o in (lesson, chart, table))
    with open(csv_file["value"]) as f:
        lines = list(csv.DictReader(f))
    assert [(r["batch"], r["note"]) for r in lines] == [(str(b), "run stopped: speedup not measured") for b in done]
    assert [float(r["grid_step_ms"]) for r in lines] == pytest.approx([grid["ms"][b][1] for b in done])
    assert [float(r["grid_verify_ms"]) for r in lines] == pytest.approx([grid["ms"][b][3] for b in done])
    with open(json_file["value"]) as f:
        saved = json.load(f)
    assert saved["missing"] == {"not_measured": [1, 2, 4], "not_timed": []} and saved["rows"] == []
    assert saved["stop_note"] == "Stopped: no speedup measured at B = 1, 2, 4."
    assert not device.DEVICE.locked


def _timed_result(stopped_grid: bool) -> dict:
    """A hand-made sweep a Stop ended before any batch size: the grid timed B = 1 and 2 (B = 2's pass below a
    step: too noisy), not B = 4 (cut short) nor 8; ``stopped_grid``: the Stop came inside the grid."""
    grid = {"ms": {1: {1: 2.14, 3: 2.83}, 2: {1: 3.0, 3: 2.5}}, "impossible": [], "stopped": stopped_grid,
            "spread": {1: {1: (2.05, 2.31), 3: (2.83, 2.83)}, 2: {1: (2.9, 3.1), 3: (2.4, 2.6)}}}
    if stopped_grid:
        grid["ms"][4], grid["spread"][4] = {1: 5.0}, {1: (4.9, 5.2)}
    sizes = [1, 2, 4, 8] if stopped_grid else [1, 2]
    return {"rows": [], "k": 2, "grid": grid, "stopped": True,
            "settings": {"batch_sizes": sizes, "predicted": True, "max_new_tokens": 6, "k": 2}}


def test_a_stop_after_the_predicted_curve_names_its_timings_and_what_was_not_measured():
    assert sweep_handlers.grid_timed_text(_timed_result(False), 30.2) == (
        "Stopped after the predicted curve was timed (30 s), before the first batch size (B = 1) was measured. Timed "
        "(median ms of one forward, range of the repeats): B = 1: T(1,1) = 2.1 (2.0–2.3), T(1,3) = 2.8 (repeats "
        "equal); B = 2: T(2,1) = 3.0 (2.9–3.1), T(2,3) = 2.5 (2.4–2.6) (too noisy: timed faster than less work); not "
        "measured: the speedup at B = 1, 2, so there is no chart or table; the downloads hold these timings.")
    status, *_, csv_file, json_file = batching._swept(_timed_result(False), 30.2)
    assert html.unescape(status).count("Stopped after the predicted curve was timed (30 s)") == 1
    assert csv_file["visible"] is True and json_file["visible"] is True


def test_the_downloads_of_a_stopped_predicted_curve_hold_its_timings_and_what_is_missing(tmp_path):
    """The timings the stop message lists, in the CSV and JSON, with the note of what is missing."""
    result = _timed_result(True)
    lines = list(csv.DictReader(io.StringIO(batching.sweep_csv(result))))
    grid_columns = ("grid_step_ms", "grid_step_ms_min", "grid_step_ms_max", "grid_verify_ms", "grid_verify_ms_min",
                    "grid_verify_ms_max", "grid_too_noisy")
    assert [[r["batch"]] + [r[c] for c in grid_columns] + [r["speedup"], r["note"]] for r in lines] == [
        ["1", "2.14", "2.05", "2.31", "2.83", "2.83", "2.83", "False", "", "run stopped: speedup not measured"],
        ["2", "3.0", "2.9", "3.1", "2.5", "2.4", "2.6", "True", "", "run stopped: speedup not measured"],
        ["4", "", "", "", "", "", "", "", "", "run stopped: speedup not measured; T(B, 1) and T(B, 3) not timed for "
                                              "the predicted curve"],
        ["8", "", "", "", "", "", "", "", "", "run stopped: speedup not measured; T(B, 1) and T(B, 3) not timed for "
                                              "the predicted curve"]]
    csv_path, json_path = batching.write_sweep_files(result, str(tmp_path))
    saved = json.loads(open(json_path, encoding="utf-8").read())
    assert saved["stopped"] is True and saved["rows"] == [] and saved["max_new_tokens"] == 6
    assert saved["missing"] == {"not_measured": [1, 2, 4, 8], "not_timed": [4, 8]}
    assert saved["stop_note"] == ("Stopped: no speedup measured at B = 1, 2, 4, 8; T(B, 1) and T(B, 3) not timed for "
                                  "the predicted curve at B = 4, 8.")
    assert saved["grid_timings"] == [
        {"batch": 1, "step_ms": 2.14, "step_ms_min": 2.05, "step_ms_max": 2.31, "verify_ms": 2.83,
         "verify_ms_min": 2.83, "verify_ms_max": 2.83, "too_noisy": False},
        {"batch": 2, "step_ms": 3.0, "step_ms_min": 2.9, "step_ms_max": 3.1, "verify_ms": 2.5, "verify_ms_min": 2.4,
         "verify_ms_max": 2.6, "too_noisy": True}]
    status, lesson, chart, table, csv_file, json_file = batching._swept(_timed_result(True), 12.4)
    assert "Stopped while timing the predicted curve (12 s)" in html.unescape(status)
    assert all(o.get("__type__") == "update" and len(o) == 1 for o in (lesson, chart, table))
    assert open(csv_file["value"], encoding="utf-8").read() == batching.sweep_csv(_timed_result(True))
    # a sweep that ran to its end: no note, nothing missing
    assert batching.sweep_json({**result, "stopped": False})["stop_note"] is None
    assert {r["note"] for r in csv.DictReader(io.StringIO(batching.sweep_csv({**result, "stopped": False})))} == {""}


class _SaidJob:
    """A job that keeps what the sweep says and is never stopped."""

    def __init__(self) -> None:
        self.said: list = []

    def say(self, item) -> None:
        self.said.append(item)

    def should_stop(self) -> bool:
        return False


def test_each_progress_line_names_its_phase(tiny_model_dir):
    """A new user's trial: while the predicted curve was timed the progress read "batch 1: round 3/3", the words of
    the measured phase. Each line now names its phase first."""
    job = _SaidJob()
    sweep_job.sweep_work(job, sweep_job.parse_sweep("ngram", 2, 4, [1], batching.SHORT, True, str(tiny_model_dir), ""))
    lines = [payload[1] for kind, payload in job.said if kind == "progress"]
    grid = [line for line in lines if line.startswith("predicted curve")]
    measured = [line for line in lines if line.startswith("measured curve")]
    assert grid[0] == "predicted curve: timing T(B, 1) and T(B, 3), batch 1: prefilling 92 tokens", grid
    assert "predicted curve: timing T(B, 1) and T(B, 3), batch 1: warming up" in grid
    assert "predicted curve: timing T(B, 1) and T(B, 3), batch 1: round 3/3" in grid
    assert measured == ["measured curve, batch 1: standard and speculative decoding, 3 repeats"], measured
    assert lines[-1] == "Done." and not [line for line in lines if line.startswith("batch ")]


def test_a_stop_while_the_sweep_or_check_waits_in_the_queue_keeps_it_from_running(tiny_model_dir):
    """Gradio runs at most 4 Arena runs, measurements, sweeps and checks at once; a Stop pressed while the page's
    sweep (or check) still waited in that queue found nothing to flag, so it ran later anyway. The page now marks a
    sent one (app.stop_marks) and Stop carries the mark: it starts flagged, runs nothing and says so; one refused
    for its input spends the mark; the next one runs."""
    import html

    import gradio as gr

    from app.batching import check_handlers, sweep_handlers
    from app.stop_marks import stop_sent_js

    with gr.Blocks() as demo:
        batching.build_tab()
    deps = demo.get_config_file()["dependencies"]
    for start, api, mark in (("batching_measure", "batching_stop", "svSweepSent"),
                             ("batching_check", "batching_check_stop", "svCheckSent")):
        stop_dep = next(d for d in deps if d.get("api_name") == api)
        assert stop_dep["js"] == stop_sent_js(mark, 1) and len(stop_dep["inputs"]) == 1 and stop_dep["queue"] is False
        sent = next(d for d in deps if d.get("api_name") == start)["js"]
        # on the run's own event, first thing; then the wait for a box's check in flight (app.messages.settled_inputs_js)
        assert sent.startswith("async (...args) => {\n  let out = await ((...args) => { window." + mark + " = true; "
                               "return args; })(...args);") and "window.svSettling" in sent
        assert sum(f"window.{mark} = false" in (d.get("js") or "") for d in deps) == 1  # cleared once it ended

    me = type("R", (), {"session_hash": "batching-queued"})()
    sweep = batching.SweepForm("ngram", 2, 6, [1, 2], batching.SHORT, False, str(tiny_model_dir), "")
    said = html.unescape(sweep_handlers.stop_sweep(True, me))
    assert "your sweep was still waiting for its turn in the server's queue, so it will not run." in said
    out = list(batching.measure(sweep, request=me))
    assert len(out) == 1 and "so it did not run" in html.unescape(out[0][0]) and not device.DEVICE.locked
    assert "Nothing is running." in sweep_handlers.stop_sweep(False, me)  # nothing sent, nothing running: no mark
    assert "Measured" in list(batching.measure(sweep, request=me))[-1][0]

    check = batching.CheckForm("Hello there", 1.0, "ngram", 30, False, str(tiny_model_dir), "")
    assert "so it will not run" in check_handlers.stop_check(True, me)
    refused = list(batching.check(batching.CheckForm("", 1.0, "ngram", 30, False, str(tiny_model_dir), ""),
                                  request=me))
    assert len(refused) == 1 and "prompt is empty" in refused[0][0]  # refused before it starts: spends the mark
    done = list(batching.check(check, request=me))
    assert len(done) > 1 and "did not run" not in done[-1][0]
    check_handlers.stop_check(True, me)
    out = list(batching.check(check, request=me))
    assert len(out) == 1 and "your check was still waiting" in html.unescape(out[0][0])
