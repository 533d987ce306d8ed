"""The thread cap said in every tab that runs under it. A job's torch threads are capped when other programs use the
CPUs (:func:`app.estimates.threads_for_run`, set by ``Job.turn``); the Live and Arena tabs said so under their status,
but a trial found the Why tab, the Batching check and sweep and the Classroom silent about it, although they run
under the same cap. Each now puts the note (:func:`app.estimates.threads_note`, one wording for all) under its
status; without a cap there is no note.

The cap is faked as tests/test_busy_threads.py fakes it: other programs' share of the CPUs set to one busy loop on 2
CPUs (a cap of 1 thread) or to a quiet machine, and the tiny target given a tuned choice of 2 threads."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import batching, classroom, device, estimates, why  # noqa: E402
from specviz.core.kv import set_thread_limit  # noqa: E402
from torch_threads import torch_threads  # noqa: E402

HEAD = "other programs are using the CPUs: this {} uses 1 torch thread of the 2 tuned here, which is faster beside them."


@pytest.fixture(params=[True, False], ids=["capped", "quiet"])
def capped(request, monkeypatch, tiny_model_dir):
    """True: one busy loop on 2 CPUs (the next job's cap is 1 thread); False: a quiet machine (no cap). The tiny
    target, as the tabs load it, carries a tuned choice of 2 threads meanwhile."""
    monkeypatch.setenv(estimates.ENV_BUSY_THREADS, "1")
    monkeypatch.setattr(estimates.os, "cpu_count", lambda: 2)
    share = 0.5 if request.param else 0.1
    monkeypatch.setattr(estimates._RECENT, "share", lambda back_s=None: share)
    model = device.load_target(str(tiny_model_dir)).model  # the process's shared copy, which the tabs load
    model._specviz_threads = (2, 2)
    try:
        with torch_threads(2):
            yield request.param
    finally:
        model._specviz_threads = None
        set_thread_limit(None)


def _said(status: str, work: str) -> bool:
    """Whether ``status`` (HTML) carries the cap's note for ``work`` under its line, as Live and the Arena do."""
    text = html.unescape(status)
    note = estimates.threads_note_text(1, 2, work)
    return f'<small class="status-note">ℹ {note}</small>' in text


def _statuses(outputs, at: int = 0) -> list[str]:
    return [out[at] for out in outputs if isinstance(out[at], str)]


def test_the_why_measurement_says_the_cap(capped, tiny_model_dir, monkeypatch):
    import specviz.measure.grid

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2))  # a small grid: the note is what is tested here
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1,))
    statuses = _statuses(why.measure(str(tiny_model_dir), 2, 0.7, "", "", ""))
    assert "Measured in" in statuses[-1], statuses[-1]
    assert _said(statuses[-1], "measurement") is capped  # under the final status
    assert any("Measuring…" in s and _said(s, "measurement") for s in statuses) is capped  # and while it measures
    assert not device.DEVICE.locked


def test_the_batching_check_says_the_cap(capped, tiny_model_dir):
    out = list(batching.check(batching.CheckForm("Hello there", 1.0, "ngram", 100, False, str(tiny_model_dir), "")))
    status = out[-1][0]
    assert "Checked in" in status and _said(status, "check") is capped, status
    assert not device.DEVICE.locked


def test_the_batching_sweep_says_all_its_timings_share_the_cap(capped, tiny_model_dir):
    out = list(batching.measure(batching.SweepForm("ngram", 2, 6, [1], batching.SHORT, False, str(tiny_model_dir),
                                                   "")))
    status = out[-1][0]
    assert "Measured B = 1" in status and _said(status, "sweep") is capped, status
    if capped:
        assert "All the sweep's timings share it" in html.unescape(status)
    assert not device.DEVICE.locked


def test_the_classroom_says_the_cap_when_recording_and_in_the_what_if(capped, tiny_model_dir):
    recorded = list(classroom.record("The quick brown fox", "ngram", 0, "", 3, 0.0, 0, 8, str(tiny_model_dir)))
    status = recorded[-1][1]
    assert "Recorded" in status and _said(status, "recording") is capped, status
    assert any("Recording…" in s and _said(s, "recording") for s in _statuses(recorded, 1)) is capped
    pair = list(classroom.whatif_run("The quick brown fox", "ngram", 0, "", 0, str(tiny_model_dir), 3, 8))
    status = pair[-1][1]
    assert "Predicted from one greedy run" in status and _said(status, "run") is capped, status
    assert not device.DEVICE.locked


def test_one_wording_for_every_tab():
    """Every tab's note starts alike and names its own work; Live's note reads as before; the Arena's names a race."""
    for work, subject in (("run", "run"), ("race", "race"), ("recording", "run"), ("measurement", "measurement"), ("check", "check"),
                          ("sweep", "sweep")):
        assert estimates.threads_note_text(1, 2, work).startswith(HEAD.format(subject))
    assert estimates.threads_note_text(1, 2, "run") == (
        "other programs are using the CPUs: this run uses 1 torch thread of the 2 tuned here, which is faster beside "
        "them. Sums round by thread count, so greedy text can differ from a 2-thread run's; both runs here share it, "
        "so they stay identical")
    assert estimates.threads_note_text(1, 2, "race").endswith(
        "every method's runs and baselines here share it, so each matches its baseline")  # a race has more than two
    assert estimates.threads_note_text(3, 4, "sweep").startswith(
        "other programs are using the CPUs: this sweep uses 3 torch threads of the 4 tuned here")
