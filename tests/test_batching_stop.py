"""A new user's trial: Stop during a batch-size sweep lost the batch sizes already finished. The sweep shows each
batch size as it finishes (as the Arena shows its prompts) and keeps them: after a Stop the table, chart, lesson and
files hold the finished sizes, and the status says the sweep was stopped and which sizes were not measured."""

from __future__ import annotations

import json
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import batching, device  # noqa: E402
from app.batching import sweep_handlers, sweep_job  # noqa: E402
import specviz.analysis.batching as analysis  # noqa: E402
from specviz.core.events import RunCancelled  # noqa: E402


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
