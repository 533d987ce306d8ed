"""Fewer torch threads beside other programs' work: the cap's rule (specviz.measure.machine.threads_beside), the
engine's forwards under it (specviz.core.kv), the app's choice when a job takes the device (app.estimates), and
exact greedy ids under a cap."""

from __future__ import annotations

import pytest
import torch

from app import device, estimates
from specviz.core import kv
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.kv import chosen_threads, forward_logits, new_cache, set_thread_limit
from specviz.measure.machine import threads_beside


@pytest.fixture
def no_cap():
    set_thread_limit(None)
    yield
    set_thread_limit(None)


def test_a_cpu_counts_as_taken_from_six_tenths_of_ones_work():
    two = {others: threads_beside(others, 2) for others in (None, 0.0, 0.5, 0.59, 0.6, 1.0, 1.59, 1.6, 2.0, 3.5)}
    assert two == {None: None, 0.0: None, 0.5: None, 0.59: None, 0.6: 1, 1.0: 1, 1.59: 1, 1.6: 1, 2.0: 1, 3.5: 1}
    assert threads_beside(3.0, 16) == 13 and threads_beside(0.7, 16) == 15 and threads_beside(0.2, 16) is None
    assert threads_beside(5.0, 1) is None  # one CPU: one thread already


def test_the_cap_lowers_a_tuned_choice_and_leaves_an_untuned_model_alone(tiny_target, no_cap):
    model = tiny_target.model
    seen = []
    hook = model.register_forward_pre_hook(lambda m, a: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        model._specviz_threads = (2, 2)
        set_thread_limit(1)
        assert chosen_threads(model) == (1, 1)
        cache = new_cache(model)
        forward_logits(model, [1, 2, 3], cache, 1)
        forward_logits(model, [4], cache, 1)
        set_thread_limit(None)
        assert chosen_threads(model) == (2, 2)
        forward_logits(model, [5], cache, 1)
        model._specviz_threads = None
        set_thread_limit(1)
        assert chosen_threads(model) is None  # no tuned choice: torch's count stays as it is
    finally:
        model._specviz_threads = None
        hook.remove()
        torch.set_num_threads(before)
    assert seen == [1, 1, 2]


def _fake_share(monkeypatch, share, cpus=2):
    monkeypatch.setenv(estimates.ENV_BUSY_THREADS, "1")
    monkeypatch.setattr(estimates.os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(estimates._RECENT, "share", lambda back_s=None: share)


def test_a_job_taking_the_device_caps_its_threads_by_the_load_now(monkeypatch, tiny_target, no_cap):
    model = tiny_target.model
    model._specviz_threads = (2, 2)
    try:
        _fake_share(monkeypatch, 0.5)  # one busy loop on 2 CPUs
        job = device.Job("a test run")
        try:
            held = yield_from(job.turn())
        finally:
            job.release()
        assert held is True and kv._THREAD_LIMIT[0] == 1 and chosen_threads(model) == (1, 1)
        assert estimates.threads_note(model) == (
            "other programs are using the CPUs: this run uses 1 torch thread of the 2 tuned here, which is faster "
            "beside them. Sums round by thread count, so greedy text can differ from a 2-thread run's; both runs here "
            "share it, so they stay identical")
        _fake_share(monkeypatch, 0.1)  # quiet again: the next job has the tuned threads
        job = device.Job("a test run")
        try:
            assert yield_from(job.turn()) is True
        finally:
            job.release()
        assert kv._THREAD_LIMIT[0] is None and estimates.threads_note(model) == ""
    finally:
        model._specviz_threads = None


def test_the_cap_is_off_where_the_operator_turns_it_off(monkeypatch, no_cap):
    _fake_share(monkeypatch, 1.0)
    monkeypatch.setenv(estimates.ENV_BUSY_THREADS, "0")
    assert estimates.threads_for_run() is None and kv._THREAD_LIMIT[0] is None


def test_without_a_recent_share_the_cpus_are_watched_briefly(monkeypatch, no_cap):
    _fake_share(monkeypatch, None)
    monkeypatch.setattr(estimates, "THREADS_PROBE_S", 0.0)
    monkeypatch.setattr("specviz.measure.machine.CpuShare.others", lambda self: 0.9)
    assert estimates.threads_for_run() == 1 and kv._THREAD_LIMIT[0] == 1


def test_greedy_ids_stay_the_baselines_under_a_cap(tiny_target, tiny_draft, no_cap):
    """A cap set before a run holds for its baseline and its speculative forwards alike (one thread count), so
    greedy ids stay identical."""
    from specviz.drafters import ModelDrafter

    model = tiny_target.model
    before = torch.get_num_threads()
    prompt = tiny_target.tokenizer("The quick brown fox").input_ids
    config = GenerationConfig(max_new_tokens=24, k=3)
    model._specviz_threads = (2, 2)
    seen = set()
    hook = model.register_forward_pre_hook(lambda m, a: seen.add(torch.get_num_threads()))
    try:
        set_thread_limit(1)
        base = collect(standard_generate(tiny_target, prompt, config), tiny_target.tokenizer, prompt)
        spec = collect(speculative_generate(tiny_target, ModelDrafter(tiny_draft.model, "d"), prompt, config),
                       tiny_target.tokenizer, prompt)
    finally:
        model._specviz_threads = None
        hook.remove()
        torch.set_num_threads(before)
    assert base.token_ids == spec.token_ids and len(base.token_ids) == 24 and seen == {1}


def yield_from(steps):
    """Drive a generator that yields waiting notes and returns a value; the value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
