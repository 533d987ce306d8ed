"""A new user's trial: Stop during a batch-size sweep lost the batch sizes already finished. The sweep shows each
batch size as it finishes (as the Arena shows its prompts) and keeps them: after a Stop the table, chart, lesson and
files hold the finished sizes, and the status says the sweep was stopped and which sizes were not measured. A Stop
while the predicted curve is timed (before any batch size) says so and keeps that timing's finished batch sizes."""

from __future__ import annotations

import html
import json
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import batching, device  # noqa: E402
from app.batching import sweep_handlers, sweep_job  # noqa: E402
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
    assert [row[0] for row in table["data"]] == ["1"] and chart["visible"] is True and lesson
    with open(json_file["value"]) as f:
        saved = json.load(f)
    assert saved["stopped"] is True and [r["batch"] for r in saved["rows"]] == [1]
    assert saved["rows"][0]["speculative_tps"] > 0 and saved["rows"][0]["standard_tps"] > 0
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
    shown = [out for out in outs[:-1] if isinstance(out[3], dict) and out[3].get("data")]
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


@pytest.mark.parametrize("lost", [False, True])
def test_stop_while_timing_the_predicted_curve_says_so_and_keeps_its_timings(tiny_model_dir, monkeypatch, lost):
    """A new user's trial: Stop while the predicted curve was timed showed no word of that phase. The status says
    the sweep stopped there, before any batch size was measured, and keeps the grid's finished T(1, 1), T(1, 3)
    (with their repeats' range), also where the job's own result is lost (``lost``)."""
    seen = _stop_in_the_grid(monkeypatch, after=1)
    if lost:
        real_work = sweep_job.sweep_work

        def cut_short(job, s):
            real_work(job, s)
            raise RunCancelled()

        monkeypatch.setattr(sweep_handlers, "sweep_work", cut_short)
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
    assert all(isinstance(o, dict) and o.get("__type__") == "update" and len(o) == 1 for o in others)  # left as is
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
        "there is no chart or table.")
    assert sweep_handlers.grid_stopped_text({**result, "grid": {**grid, "ms": {1: {}}}}, 3) == (
        "Stopped while timing the predicted curve (3 s), before any batch size was measured: no batch size's "
        "timing finished, so there is nothing to show.")


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
