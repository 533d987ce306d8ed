"""ZeroGPU, offline: a stand-in for the ``spaces`` package whose GPU decorator records each call, pickles the
arguments and every yielded value across (as the real one does between the app and its GPU worker process) and
runs the task; the Live tab, the Arena and the Classroom then give the same ids as without it."""

from __future__ import annotations

import functools
import pickle
import re
import sys
import types

import pytest
import torch

from app import classroom, live, zerogpu


class StandIn:
    """The ``spaces`` module as far as specviz uses it: ``GPU(duration=...)`` over a generator function."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def GPU(self, duration):  # noqa: N802 - the real decorator's name
        def decorate(task):
            def wrapper(*args, **kwargs):
                args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))  # to the worker process
                seconds = duration(*args, **kwargs) if callable(duration) else duration
                self.calls.append({"task": task.__name__, "duration": seconds})
                for item in task(*args, **kwargs):
                    yield pickle.loads(pickle.dumps(item))  # and back
            return wrapper
        return decorate


@pytest.fixture
def zero(monkeypatch):
    stand_in = StandIn()
    module = types.ModuleType("spaces")
    module.GPU = stand_in.GPU
    monkeypatch.setitem(sys.modules, "spaces", module)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(zerogpu, "_decorated", {})
    assert zerogpu.active()
    return stand_in


def test_off_zerogpu_nothing_changes(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert not zerogpu.active()
    task = lambda: iter(())  # noqa: E731
    assert zerogpu.gpu(task, 10) is task
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setenv("SPECVIZ_ZEROGPU", "0")
    assert not zerogpu.active()


def test_durations_are_sized_from_the_run():
    assert zerogpu.duration_for(1) == zerogpu.MIN_DURATION_S + 1  # 15 s and two tokens, rounded up
    assert zerogpu.MIN_DURATION_S < zerogpu.duration_for(200, 500) <= zerogpu.MAX_DURATION_S
    assert zerogpu.duration_for(10 ** 6) == zerogpu.MAX_DURATION_S


def test_a_cuda_tensor_may_not_leave_the_worker():
    zerogpu.plain({"ids": [1, 2], "probs": torch.zeros(3)})
    fake = torch.empty(0, device="meta")  # any non-CPU device is refused alike
    with pytest.raises(TypeError, match="move it to the CPU"):
        zerogpu.plain([{"x": fake}])


def _live_ids(tiny_model_dir, drafter: str) -> tuple[str, str]:
    args = dict(prompt="The quick brown fox", target=str(tiny_model_dir), drafter=drafter, draft_model="",
                exit_layer=0, k=3, adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0, seed=0,
                max_new_tokens=12, stop_strings="", chat_template=False)
    out = None
    for out in live.generate(args):
        pass

    def tokens(pane) -> list[tuple[str, str, str]]:  # (kind, pass, id) of every token shown, timings left out
        markup = pane.get("value", "") if isinstance(pane, dict) else str(pane)
        return re.findall(r'data-kind="(\w+)" data-pass="(\d+)" data-id="(\d+)"', markup)

    spec, base = tokens(out[0]), tokens(out[1])  # the speculative and the baseline panes of the last message
    assert spec and base
    return spec, base


def test_live_runs_in_the_gpu_worker_with_the_same_output(tiny_model_dir, zero, monkeypatch):
    on = _live_ids(tiny_model_dir, "ngram")
    assert [c["task"] for c in zero.calls] == ["gpu_events"]
    assert zerogpu.MIN_DURATION_S <= zero.calls[0]["duration"] <= zerogpu.MAX_DURATION_S
    monkeypatch.delenv("SPACES_ZERO_GPU")
    off = _live_ids(tiny_model_dir, "ngram")
    assert on == off  # the same panes, token for token


def _returned(gen):
    messages = []
    try:
        while True:
            messages.append(next(gen))
    except StopIteration as stop:
        return stop.value, messages


def test_a_tab_measurement_runs_in_the_gpu_worker(tiny_model_dir, zero, monkeypatch):
    settings = classroom.parse({"prompt": "The quick brown fox", "drafter": "ngram", "exit_layer": 0,
                                "draft_model": "", "k": 3, "temperature": 0.0, "seed": 0, "max_new_tokens": 8,
                                "target": str(tiny_model_dir)})
    work = functools.partial(classroom._record_work, settings)
    (recording, *_), shown = _returned(classroom.on_device(work, "test", 8))
    assert [c["task"] for c in zero.calls] == ["remote"] and zero.calls[0]["duration"] == zerogpu.WORK_DURATION_S
    monkeypatch.delenv("SPACES_ZERO_GPU")
    (here, *_), _ = _returned(classroom.on_device(work, "test", 8))
    assert len(zero.calls) == 1  # off ZeroGPU: run here
    assert recording.output_ids == here.output_ids
