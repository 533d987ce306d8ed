"""Threads and kernels chosen by measurement (specviz.measure.tuning): the choice rule, the file kept per machine, and the
per-forward thread switch."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.runtime import speed

from specviz.measure import tuning
from specviz.core.kv import forward_logits, new_cache


@pytest.fixture()
def tuned_on(monkeypatch, tiny_target):
    """Tuning on for one test; the shared tiny target gets its threads and kernels back afterwards."""
    monkeypatch.setenv("SPECVIZ_TUNE", "1")
    threads = torch.get_num_threads()
    yield
    tiny_target.model._specviz_threads = None
    speed.set_fast_path(tiny_target.model, True)
    speed.set_row_padding(tiny_target.model, {})
    torch.set_num_threads(threads)


def _fake_times(table):
    """A stand-in for the timing loop: {(threads, fast): (step ms, verify ms)}."""
    def times(model, device, combos):
        return {combo: {"step": [table[combo][0]] * 3, "verify": [table[combo][1]] * 3} for combo in combos}
    return times


def _fake_rows(by_threads):
    """A stand-in for the linears' row timing: {threads: {rows: ms}}, read at the thread count set."""
    return lambda model, rows: {m: by_threads[torch.get_num_threads()][m] for m in rows}


# the 121 linears of SmolLM2-135M on the project's AVX-512 machine (1 and 2 threads, ms; docs/performance.md)
AVX512_ROWS = {1: {1: 37.2, 2: 45.7, 3: 32.0, 4: 29.3, 5: 29.3, 6: 30.0, 7: 36.9, 8: 40.1},
               2: {1: 23.7, 2: 27.0, 3: 22.2, 4: 21.1, 5: 19.8, 6: 19.7, 7: 23.1, 8: 24.1}}


def test_row_padding_is_measured_at_each_chosen_thread_count(tiny_target, monkeypatch):
    monkeypatch.setattr(tuning.os, "cpu_count", lambda: 2)
    table = {(1, True): (104.8, 150.0), (1, False): (95.3, 170.0), (2, True): (92.6, 160.0), (2, False): (112.5, 190.0)}
    monkeypatch.setattr(tuning, "_time_combos", _fake_times(table))
    monkeypatch.setattr(tuning, "time_linear_rows", _fake_rows(AVX512_ROWS))
    choice = tuning.measure(tiny_target)  # a step at 2 threads, a verification at 1
    assert (choice.step_threads, choice.verify_threads) == (2, 1)
    assert choice.pad_rows == {1: 6, 2: 4}  # n = 1 from the 2-thread times, n > 1 from the 1-thread ones
    assert choice.ms["rows/1"] == AVX512_ROWS[1] and "rows padded 1->6 2->4" in choice.summary()
    table[(1, False)] = (60.0, 100.0)  # the default kernels win: nothing is padded
    assert tuning.measure(tiny_target).pad_rows == {}


def test_the_kept_row_padding_is_read_back_and_applied(tiny_target, tmp_path, tuned_on, monkeypatch):
    monkeypatch.setattr(tuning, "_busy", lambda load, others: False)
    monkeypatch.setattr(tuning, "measure", lambda target: tuning.Tuning(1, 1, True, {}, {1: 4, 2: 4}))
    assert tuning.tune(tiny_target, folder=tmp_path).pad_rows == {1: 4, 2: 4}
    tuning.forget()  # a later process: the choice comes from the file
    again = tuning.tune(tiny_target, folder=tmp_path)
    assert again.source == "disk" and again.pad_rows == {1: 4, 2: 4}  # JSON's string keys come back as ints
    assert speed.row_padding(tiny_target.model) == {1: 4, 2: 4}
    path = next(tmp_path.glob("*.json"))
    path.write_text(path.read_text().replace('"2": 4', '"2": 1'))  # a damaged file (m < n) is measured again
    tuning.forget()
    assert tuning.tune(tiny_target, folder=tmp_path).source == "measured"


def test_the_choice_follows_the_measured_medians(tiny_target, monkeypatch):
    monkeypatch.setattr(tuning.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(tuning, "time_linear_rows", _fake_rows(AVX512_ROWS))
    # as measured on a 2-core AVX2 machine: 2 threads win a step with the fast path, 1 thread wins a verification
    table = {(1, True): (104.8, 150.0), (1, False): (95.3, 170.0), (2, True): (92.6, 160.0), (2, False): (112.5, 190.0)}
    monkeypatch.setattr(tuning, "_time_combos", _fake_times(table))
    choice = tuning.measure(tiny_target)
    assert (choice.fast_path, choice.step_threads, choice.verify_threads) == (True, 2, 1)
    assert choice.ms["1/plain"] == {"step": 95.3, "verify": 170.0}
    table[(1, False)] = (60.0, 100.0)  # the default kernels now win at 1 thread
    assert tuning.measure(tiny_target).fast_path is False


def test_tune_measures_once_keeps_it_on_disk_and_applies_it(tiny_target, tmp_path, tuned_on, monkeypatch):
    monkeypatch.setattr(tuning, "_busy", lambda load, others: False)
    first = tuning.tune(tiny_target, folder=tmp_path)
    assert first.source == "measured" and first.kept
    files = list(tmp_path.glob("*.json"))
    assert [f.stem for f in files] == [tuning.machine_key(tiny_target)]
    record = json.loads(files[0].read_text())
    assert record["step_threads"] == first.step_threads and record["cores"] >= 1 and record["busy"] is False
    tuning.forget()  # a later process
    second = tuning.tune(tiny_target, folder=tmp_path)
    assert second.source == "disk" and (second.step_threads, second.fast_path) == (first.step_threads,
                                                                                  first.fast_path)
    assert tiny_target.model._specviz_threads == (first.step_threads, first.verify_threads)
    assert "fast path" in second.summary() or "default kernels" in second.summary()


@pytest.fixture()
def counted(monkeypatch):
    """measure() replaced by a stand-in that counts its calls (1 thread, default kernels)."""
    calls = []

    def measure(target):
        calls.append(target)
        return tuning.Tuning(1, 1, False, {"1/plain": {"step": 10.0 * len(calls), "verify": 20.0}})

    monkeypatch.setattr(tuning, "measure", measure)
    return calls


def test_a_busy_machine_is_measured_once_kept_in_memory_and_on_disk_with_its_load(tiny_target, tmp_path, tuned_on,
                                                                                 monkeypatch, counted):
    monkeypatch.setattr(tuning, "_load_average", lambda: 3.5)
    monkeypatch.setattr(tuning, "_busy", lambda load, others: True)
    first = tuning.tune(tiny_target, folder=tmp_path)
    assert len(counted) == 1 and first.busy and first.kept and first.load == 3.5
    assert "(measured; the machine was busy)" in first.summary()
    again = tuning.tune(tiny_target, folder=tmp_path, progress=lambda message: pytest.fail(message))
    assert len(counted) == 1 and again == first  # in memory: no second measurement, no status line
    assert tuning.known(tiny_target, tmp_path) == first
    record = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert record["busy"] is True and record["load"] == 3.5 and record["ms"]["1/plain"]["step"] == 10.0
    tuning.forget()  # a later start on a busy machine uses the disk's busy choice
    later = tuning.tune(tiny_target, folder=tmp_path)
    assert len(counted) == 1 and later.source == "disk" and later.busy and later.load == 3.5
    assert tiny_target.model._specviz_threads == (1, 1)


def test_a_busy_choice_is_measured_again_only_at_start_up_on_a_quiet_machine(tiny_target, tmp_path, tuned_on,
                                                                            monkeypatch, counted):
    busy = [True]
    monkeypatch.setattr(tuning, "_busy", lambda load, others: busy[0])
    monkeypatch.setattr(tuning, "_quiet_now", lambda: not busy[0])
    assert tuning.tune(tiny_target, folder=tmp_path).busy and len(counted) == 1
    assert tuning.tune(tiny_target, folder=tmp_path, remeasure_busy=True).busy  # still busy: no new measurement
    busy[0] = False
    assert tuning.tune(tiny_target, folder=tmp_path).busy and len(counted) == 1  # a run never measures again
    quiet = tuning.tune(tiny_target, folder=tmp_path, remeasure_busy=True)  # the start-up does
    assert len(counted) == 2 and not quiet.busy and quiet.ms["1/plain"]["step"] == 20.0
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["busy"] is False
    tuning.tune(tiny_target, folder=tmp_path, remeasure_busy=True)  # quiet already: nothing to do
    assert len(counted) == 2
    busy[0] = True  # forced on a busy machine: used here, but the file keeps the quiet machine's choice
    assert tuning.tune(tiny_target, folder=tmp_path, force=True).busy and len(counted) == 3
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["ms"]["1/plain"]["step"] == 20.0


def test_concurrent_callers_measure_once(tiny_target, tmp_path, tuned_on, monkeypatch, counted):
    import threading

    monkeypatch.setattr(tuning, "_busy", lambda load, others: True)
    results = []
    threads = [threading.Thread(target=lambda: results.append(tuning.tune(tiny_target, folder=tmp_path)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(counted) == 1 and len(results) == 3 and all(r is results[0] for r in results)


def test_the_measured_load_is_the_cpu_share_of_other_programs(monkeypatch):
    monkeypatch.setattr(tuning.os, "cpu_count", lambda: 2)
    assert tuning._busy(0.5, 0.6) and not tuning._busy(3.0, 0.1)  # the share decides where it is known
    assert tuning._busy(2.5, None) and not tuning._busy(1.5, None) and not tuning._busy(None, None)


def test_forwards_switch_threads_by_size(tiny_target):
    seen = []
    hook = tiny_target.model.register_forward_pre_hook(lambda m, a: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    tiny_target.model._specviz_threads = (2, 1)
    try:
        cache = new_cache(tiny_target.model)
        forward_logits(tiny_target.model, [1, 2, 3], cache, 1)
        forward_logits(tiny_target.model, [4], cache, 1)
    finally:
        tiny_target.model._specviz_threads = None
        hook.remove()
        torch.set_num_threads(before)
    assert seen == [1, 2]


def test_tuning_off_changes_nothing(tiny_target, tmp_path):
    choice = tuning.tune(tiny_target, folder=tmp_path)  # SPECVIZ_TUNE=0 in the tests' environment
    assert choice.source == "off" and not list(tmp_path.glob("*.json"))
    assert getattr(tiny_target.model, "_specviz_threads", None) is None


def test_the_app_logs_a_tuning_once_not_on_every_run_that_reuses_it(monkeypatch, caplog):
    """Issue 34's trial: "rows padded 1->2 (measured; the machine was busy)" was logged 28 times, once per run, for
    one measurement. The app logs the choice when it is measured or read, not when a run reuses the kept one."""
    import logging
    from types import SimpleNamespace

    import specviz.core.graphs
    import specviz.runtime.models
    import app.weights_setting
    from app import device

    kept = tuning.Tuning(2, 2, True, pad_rows={1: 2}, busy=True)
    loaded = SimpleNamespace(label="tiny")
    monkeypatch.setattr(specviz.runtime.models, "load_model", lambda spec, **kw: loaded)
    monkeypatch.setattr(tuning, "tune", lambda target, **kw: kept)  # the kept choice, as a later run gets it
    monkeypatch.setattr(specviz.core.graphs, "warm_graphs", lambda target: None)
    monkeypatch.setattr(app.weights_setting, "in_operator_weights", lambda target, progress=None: target)
    monkeypatch.setattr(device, "_TUNINGS_LOGGED", set())
    with caplog.at_level(logging.INFO, logger=device.log.name):
        for _ in range(5):
            assert device.load_target("tiny") is loaded
    said = [r.getMessage() for r in caplog.records if "rows padded" in r.getMessage()]
    assert said == [f"tiny: {kept.summary()}"]  # once; the summary's wording: tests/test_messages.py
