"""Many visitors at once: runs take turns on the device in arrival order and each waiting visitor is told its
place; Stop frees the worker at once (even while a model loads); a failure in one run leaves the others alone;
and the bounded load test (scripts/loadtest.py, K=4 Gradio client sessions on loopback) completes with every
session seeing its own output. Tiny models, except the classroom load test: visitors stepping through a recorded
walkthrough while Live runs of the embedded model compute."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import device, live  # noqa: E402
from app.messages import message_for  # noqa: E402
from drain_support import settled  # noqa: E402
from specviz.runtime import models  # noqa: E402
from toast_support import no_toast  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def local_policy(monkeypatch):
    for name in ("SPACE_ID", "SPECVIZ_PUBLIC", "SPECVIZ_ALLOWED_MODELS", "SPECVIZ_ALLOW_LOCAL_PATHS",
                 "SPECVIZ_MAX_NEW_TOKENS", "SPECVIZ_MAX_PROMPT_TOKENS"):
        monkeypatch.delenv(name, raising=False)


class Request:
    def __init__(self, session_hash):
        self.session_hash = session_hash


def _args(model_dir, **change):
    base = dict(prompt="The quick brown fox", target=str(model_dir), drafter="ngram", draft_model="", exit_layer=0,
                k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=6,
                stop_strings="", chat_template=True)
    return {**base, **change}


class Session(threading.Thread):
    """Drives one visitor's generate handler in its own thread (as a Gradio worker would), recording statuses."""

    def __init__(self, name: str, **kwargs) -> None:
        super().__init__(daemon=True, name=name)
        self.kwargs = kwargs
        self.statuses: list[str] = []
        self.last: dict = {}
        self.done_at: float | None = None

    def run(self) -> None:
        for out in live.generate(self.kwargs, request=Request(self.name)):
            shown = settled(out, live.OUTPUTS)
            self.last.update(shown)
            if "status" in shown:
                self.statuses.append(shown["status"])
        self.done_at = time.monotonic()


def _wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# ------------------------------------------------------------------------------------------- the device line


def test_device_lock_is_first_come_first_served_with_positions():
    lock = device.DeviceLock(stale_s=0.5)
    assert lock.acquire("a", "running a", timeout=0)
    assert not lock.acquire("b", "running b", timeout=0) and not lock.acquire("c", "running c", timeout=0)
    assert lock.ahead("b") == 1 and lock.ahead("c") == 2 and lock.waiting == 2 and lock.holder == "running a"
    assert not lock.release("someone") and lock.locked  # only the holder releases
    assert lock.release("a")
    assert not lock.acquire("c", "c", timeout=0)  # b came first
    assert lock.acquire("b", "b", timeout=0) and lock.ahead("c") == 1
    lock.leave("c")
    assert lock.waiting == 0
    assert not lock.acquire("d", "d", timeout=0)  # d stands in line, then is abandoned
    time.sleep(0.6)
    assert lock.release("b") and lock.acquire("e", "e", timeout=0)  # the stale place did not block e


def test_a_page_waiting_for_its_own_other_run_is_not_told_another_session_holds_the_device():
    """A trial started a Live run, switched to the Arena and read "Waiting for the device… (another session is
    generating)": its own Live run. A run of the same browser session is named as the page's own; another
    session's is named as before."""
    from types import SimpleNamespace

    live_runs, arena_runs = device.CancelRegistry(), device.CancelRegistry()
    mine, theirs = SimpleNamespace(session_hash="page-1"), SimpleNamespace(session_hash="page-2")
    holder = device.start(live_runs, mine, live.WHAT)
    assert next(holder.turn(), None) is None  # the device was free: held at once
    try:
        own = next(device.start(arena_runs, mine, "the arena is running").turn())
        other = next(device.start(arena_runs, theirs, "the arena is running").turn())
        assert (own.ahead, own.holder) == (1, device.OWN_RUN)
        assert (other.ahead, other.holder) == (2, live.WHAT)  # the holder, then the page's arena run in line
    finally:
        device.DEVICE.release(holder.owner)
        for owner in [o for o in list(device.DEVICE._line) if o.startswith("page-")]:
            device.DEVICE.leave(owner)


def _places(statuses: list[str]) -> set[tuple[int, str]]:
    """The (runs ahead, what holds the device or "") that waiting status lines name."""
    return {(int(m[1]), m[2] or "") for s in statuses
            for m in re.finditer(r"(\d+) runs? (?:is|are) ahead of yours(?: \(([^)]*)\))?", s)}


def test_waiting_visitors_see_their_place_and_go_in_arrival_order(tiny_model_dir):
    assert device.DEVICE.acquire("test-holder", "a test holds the device", timeout=1)
    try:
        first = Session("first", **_args(tiny_model_dir, prompt="The river runs"))
        first.start()
        _wait_for(lambda: device.DEVICE.waiting == 1)
        second = Session("second", **_args(tiny_model_dir, prompt="The old library"))
        second.start()
        _wait_for(lambda: device.DEVICE.waiting == 2 and any("2 runs are ahead" in s for s in second.statuses))
    finally:
        device.DEVICE.release("test-holder")
    first.join(60)
    second.join(60)
    # the place in line and what holds the device (the sentence is worded in tests/test_messages.py)
    assert (1, "a test holds the device") in _places(first.statuses)
    assert 2 in {ahead for ahead, _ in _places(second.statuses)}
    assert "Done in" in first.last["status"] and "Done in" in second.last["status"]
    assert first.done_at < second.done_at
    assert first.last["baseline-output"] != second.last["baseline-output"]
    assert not device.DEVICE.locked and device.DEVICE.waiting == 0


def test_a_failing_run_leaves_the_other_sessions_alone(tiny_model_dir, monkeypatch):
    real = live.run.standard_generate

    def sometimes_broken(target, prompt_ids, config, **options):
        if config.max_new_tokens == 7:
            raise RuntimeError("simulated crash inside one run")
        return real(target, prompt_ids, config, **options)

    monkeypatch.setattr(live.run, "standard_generate", sometimes_broken)
    sessions = [Session(f"s{i}", **_args(tiny_model_dir, max_new_tokens=7 if i == 1 else 6,
                                         prompt=f"The quick brown fox {i}")) for i in range(3)]
    with no_toast():
        for session in sessions:
            session.start()
        for session in sessions:
            session.join(60)
    assert message_for(RuntimeError("simulated crash inside one run")) in sessions[1].last["status"]
    assert "Done in" in sessions[0].last["status"] and "Done in" in sessions[2].last["status"]
    assert not device.DEVICE.locked
    again = Session("s1", **_args(tiny_model_dir))  # the failed session itself goes on
    again.run()
    assert "Done in" in again.last["status"]


def test_stop_while_loading_frees_the_worker_at_once(tiny_model_dir, monkeypatch):
    real = models.load_model
    loading = threading.Event()

    def slow_load(*args, **kwargs):
        loading.set()
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(models, "load_model", slow_load)
    session = Session("stopper", **_args(tiny_model_dir))
    session.start()
    assert loading.wait(10)
    stopped = time.monotonic()
    live.stop(Request("stopper"))
    session.join(5)
    assert not session.is_alive() and session.done_at - stopped < 0.6, "the worker must be free at once"
    assert device.DEVICE.locked  # the load cannot be interrupted: it keeps the device until it ends...
    _wait_for(lambda: not device.DEVICE.locked, timeout=10)  # ...and then frees it


def test_stop_during_a_long_prefill_frees_the_worker_and_the_next_run_starts(tiny_model_dir, monkeypatch):
    real = live.run.standard_generate
    gate = threading.Event()

    def slow_prefill(*args, **kwargs):  # the baseline's first forward takes as long as a huge prompt's would
        gate.wait(3.0)
        yield from real(*args, **kwargs)

    monkeypatch.setattr(live.run, "standard_generate", slow_prefill)
    first = Session("reader", **_args(tiny_model_dir, drafter="none", max_new_tokens=5))
    first.start()
    _wait_for(lambda: any("Reading the prompt" in s for s in first.statuses))
    _wait_for(lambda: any(re.search(r"Reading the prompt.*\(\d+ s\)", s) for s in first.statuses[1:]))  # ticking
    stopped = time.monotonic()
    live.stop(Request("reader"))
    first.join(5)
    assert not first.is_alive() and first.done_at - stopped < 1.0, "Stop must not wait for the forward"
    out = live.stopped_view([], Request("reader"))  # the Stop button's view of a run with no token yet
    assert "while the prompt was being read" in out[4] and "nothing was generated" in out[0]
    assert out[2]["visible"] is False and out[6] == []  # no charts, no history row: nothing was measured
    gate.set()
    monkeypatch.setattr(live.run, "standard_generate", real)
    second = Session("reader", **_args(tiny_model_dir, drafter="none", max_new_tokens=5))  # the same visitor again
    second.start()
    second.join(60)
    assert "Done in" in second.last["status"], second.statuses[-3:]
    _wait_for(lambda: not device.DEVICE.locked)


def test_stop_without_a_session_stops_no_one(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    session = Session("victim", **_args(tiny_model_dir, max_new_tokens=120))
    session.start()
    _wait_for(lambda: any("Generating" in s for s in session.statuses))
    live.stop(Request(None))  # e.g. a raw API call without a session
    live.stop(Request("someone-else"))
    live.stop()  # Python code in this process: stops only runs started without a request
    session.join(60)
    assert "Done in" in session.last["status"]


# ------------------------------------------------------------------------------------------- every tab's jobs


def test_closing_a_handler_cancels_its_job_and_frees_the_device_when_the_work_ends():
    started, saw_flag = threading.Event(), threading.Event()

    def work(job: device.Job) -> None:  # stoppable work: it checks the job's flag
        started.set()
        while not job.should_stop():
            time.sleep(0.01)
        saw_flag.set()

    def handler():
        job = device.Job("a test job")
        try:
            if (yield from device.relay(job.turn(), lambda place: "waiting")):
                yield from device.relay(job.call(work, job, stoppable=True), lambda item: "working")
        finally:
            job.release()

    gen = handler()
    assert next(gen) == "working" and started.wait(5)
    assert device.DEVICE.locked and device.DEVICE.holder == "a test job"
    gen.close()  # what Gradio does when the browser tab closes
    assert saw_flag.wait(5)
    _wait_for(lambda: not device.DEVICE.locked)


class _Forwards:
    """Counts a model's forwards (a forward pre-hook; each sleeps ``delay_s``, so a tiny run lasts a while) and
    those that start after :attr:`closed` is set."""

    def __init__(self, model, delay_s: float) -> None:
        self.count = self.after = 0
        self.delay_s = delay_s
        self.closed = threading.Event()
        self.handle = model.register_forward_pre_hook(self._pre)

    def _pre(self, module, args) -> None:
        self.count += 1
        self.after += self.closed.is_set()
        time.sleep(self.delay_s)


def _tab_run(tab: str, model_dir) -> tuple:
    """(handler generator, words of its status once the engine runs) of a tab's long run on the tiny model."""
    from app import arena, classroom, why

    target = str(model_dir)
    if tab == "live":  # as the other tabs: a closed tab's handler ends the run (the device lock is released)
        return live.generate(_args(model_dir, max_new_tokens=200), request=Request("closing-tab")), "Generating… pass"
    if tab == "classroom":
        return classroom.record("The quick brown fox", "ngram", 0, "", 4, 0.0, 0, 60, target), "Recording… pass"
    if tab == "arena":
        return arena.run(["ngram"], ["2"], "prompt", "The quick brown fox", None, 64, target, "", 0, 0.0, 0,
                         True), "your-prompt"
    return why.measure(target, 0, 0.7, 0, 0, 0), "Measuring… batch"


@pytest.mark.parametrize("tab", ["live", "classroom", "arena", "why"])
def test_closing_a_tab_handler_stops_its_run_before_the_next_forward(tiny_model_dir, tab, monkeypatch):
    import specviz.measure.grid

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    forwards = _Forwards(models.load_model(str(tiny_model_dir)).model, delay_s=0.03)
    try:
        gen, running = _tab_run(tab, tiny_model_dir)
        for out in gen:
            if running in "".join(map(str, out[:5])):  # the status: 1st (arena, why), 2nd (classroom), 5th (live)
                break
        else:
            raise AssertionError(f"the {tab} run ended before its engine ran")
        forwards.closed.set()
        gen.close()  # the browser tab closed: Gradio closes the handler
        _wait_for(lambda: not device.DEVICE.locked, timeout=10)
        count = forwards.count
        time.sleep(0.2)
        assert forwards.count == count, "nothing runs once the device is free"
    finally:
        forwards.handle.remove()
    assert count > forwards.after and forwards.after <= 1, (count, forwards.after)


# ------------------------------------------------------------------------------------------- the load test


def _loadtest():
    spec = importlib.util.spec_from_file_location("loadtest", ROOT / "scripts" / "loadtest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["loadtest"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_load_test_four_sessions(tiny_model_dir, capsys):
    loadtest = _loadtest()
    started = time.monotonic()
    code = loadtest.main(["--target", str(tiny_model_dir), "--sessions", "4", "--requests", "2",
                          "--max-new-tokens", "12", "--timeout", "60", "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    print(report)
    assert code == 0, report
    assert report["completions"] == 8 and report["errors"] == 0 and report["timeouts"] == 0
    assert report["mismatches"] == 0  # every session got the output of its own prompt
    assert report["distinct_outputs"] == 4  # four prompts, four different outputs
    assert report["sessions_shown_queue_position"] >= 1  # runs took turns, and the waiting were told so
    assert report["model_loads"] == 0  # the reference phase loaded it; the load phase shares it
    assert report["latency_p50_s"] <= report["latency_p95_s"] <= 60 and report["peak_rss_mb"] > 0
    assert time.monotonic() - started < 60
    assert not device.DEVICE.locked


def test_load_test_refuses_other_hosts():
    with pytest.raises(SystemExit, match="only runs against loopback"):
        _loadtest().check_loopback("http://example.com:7860/")


def test_classroom_load_test_steps_stay_fast_while_a_live_run_computes(embedded, capsys):
    """A smaller classroom than the CLI's 20 x 20 (to stay near a minute): 10 visitors step through a recorded
    walkthrough while Live runs of the embedded model compute; every step arrives, in order, and a step does not
    wait for the Live run. The CLI's 1 s budget is a wall-clock goal for a quiet machine; under a full test suite
    on 2 cores the test compares a step's p95 with a whole Live run's response time measured in the same run (a
    step queued behind the run would take about that long)."""
    loadtest = _loadtest()
    started = time.monotonic()
    loadtest.main(["--classroom", "--visitors", "10", "--steps", "10", "--think", "0.2",
                   "--live-tokens", "24", "--timeout", "120", "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    print(report)
    assert report["opened"] == 10 and report["steps_done"] == 100 and report["errors"] == 0, report
    assert report["wrong_steps"] == 0  # each visitor saw its own next step: sessions keep their own stepper
    assert report["live_busy_fraction"] > 0.9 and report["live_runs_completed"] >= 1, report
    assert report["step_p95_s"] < 0.5 * report["live_run_p50_s"], report  # steps did not queue behind the run
    assert time.monotonic() - started < 120
    assert not device.DEVICE.locked


def test_a_visitor_waiting_at_start_up_is_told_the_app_is_measuring_the_machine(monkeypatch):
    """Seen: 46 s of "1 run is ahead of yours (the model 'embedded' is loading)" while the start-up measured this
    machine's threads and kernels; the waiting line names what the start-up is doing."""
    from specviz.measure.tuning import MEASURING

    seen = []

    def fake_load(spec, progress=None, startup=False):
        seen.append(device.DEVICE.holder)
        progress(MEASURING)
        seen.append(device.waiting_status(device.DEVICE.ahead("visitor"), device.DEVICE.holder))
        return object()

    monkeypatch.setattr(device, "load_target", fake_load)
    device.preload("embedded", then=lambda loaded: seen.append(device.DEVICE.holder)).join(30)
    assert seen[0] == "the model 'embedded' is loading: 0 s so far, usually about 10 s"
    assert f"1 run is ahead of yours ({device.STARTUP_MEASURING}: 0 s so far, usually about 25 s)" in seen[1]
    assert seen[2] == f"{device.STARTUP_TIMING}: 0 s so far, usually about 20 s" and not device.DEVICE.locked


def test_the_start_up_wait_says_how_long_it_has_run_and_why_it_runs_long():
    """Seen: a Live run waited over 3 minutes under "(the app is measuring this machine once at start-up (about 20
    s))" on a 2-core machine at load 10-15; the line now counts the time and says when it runs past the usual."""
    holder = device.startup_holder
    assert holder(device.STARTUP_MEASURING, 25, 12.3, 1.1, 2) == (
        "the app is measuring this machine once at start-up: 12 s so far, usually about 25 s")
    assert holder(device.STARTUP_MEASURING, 25, 185, 12.4, 2) == (
        "the app is measuring this machine once at start-up: running 3 min 5 s, longer than the usual 25 s because "
        "the machine is busy: load 12 on 2 CPUs")
    assert holder(device.STARTUP_WEIGHTS, 30, 41, 3.46, 2).endswith(
        ": running 41 s, longer than the usual 30 s because the machine is busy: load 3.5 on 2 CPUs")
    assert holder(device.STARTUP_TIMING, 20, 41, 1.5, 2).endswith(": running 41 s, longer than the usual 20 s")
    assert holder(device.STARTUP_TIMING, 20, 41, None, 2).endswith(": running 41 s, longer than the usual 20 s")
    assert holder(device.STARTUP_TIMING, 20, 20.4, 9.0, 2).endswith(": 20 s so far, usually about 20 s")


def test_a_waiting_visitor_sees_the_start_up_clock_move(monkeypatch):
    """The holder's label is read afresh at each refresh of the waiting line: 5 s, then 3 min at load 12."""
    clock = {"now": 1000.0}
    monkeypatch.setattr(device.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 11.0, 10.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    lock = device.DeviceLock()
    assert lock.acquire("start-up", "the model 'embedded' is loading", timeout=0)
    lock.relabel("start-up", device.StartupPart(device.STARTUP_MEASURING))
    clock["now"] += 5
    assert lock.holder == f"{device.STARTUP_MEASURING}: 5 s so far, usually about 25 s"
    clock["now"] += 175.2
    status = device.waiting_status(1, lock.holder)
    assert (f"1 run is ahead of yours ({device.STARTUP_MEASURING}: running 3 min, longer than the usual 25 s "
            "because the machine is busy: load 12 on 2 CPUs)") in status
    lock.release("start-up")
    assert lock.holder == ""


def test_the_start_up_run_stops_at_its_next_forward_when_a_visitor_comes(monkeypatch):
    """Trial on a machine at load 9-12: the start-up run took 566 s and the first visitor waited 9 min 25 s
    behind it. Now the run gives way: once someone waits for the device it is stopped at its next forward (its
    cancel flag), returns no wall time (the costs come from the timed forwards), and the page still gets its
    derived default."""
    from app.live import warmup

    class Line:  # the device's line: a visitor arrives after the run's second frame
        waiting = 0

    frames = []

    def fake_run(settings, history, job):
        for frame in range(10):
            if job.cancelled:  # the engine checks the flag before each forward
                return
            frames.append(frame)
            if frame == 1:
                Line.waiting = 1
            yield frame

    derived = []
    monkeypatch.setattr(warmup, "DEVICE", Line)
    monkeypatch.setattr(warmup, "generate_on_device", fake_run)
    monkeypatch.setattr(warmup.costs, "tuned_costs", lambda spec, loaded: None)
    monkeypatch.setattr(warmup.costs, "derived_default_tokens", lambda spec, tokens: derived.append(spec) or 16)
    defaults = {**live.DEFAULTS, "target": "embedded"}
    assert warmup.warm_up("embedded", object(), defaults) is None
    assert frames == [0, 1] and derived == ["embedded"]
    Line.waiting, frames[:] = 0, []  # nobody in line: the whole run, timed
    monkeypatch.setattr(warmup, "generate_on_device",
                        lambda settings, history, job: iter(frames.append(f) or f for f in range(10)))
    wall = warmup.warm_up("embedded", object(), defaults)
    assert wall is not None and wall >= 0 and frames == list(range(10))


def test_a_visitor_waiting_at_start_up_goes_before_the_start_up_run(monkeypatch):
    """The start-up's last part (a short run that plans later runs) lets a visitor already in line go first."""
    order = []

    def visitor() -> None:
        assert device.DEVICE.acquire("visitor", "a visitor's run", timeout=30)
        order.append("visitor")
        device.DEVICE.release("visitor")

    def fake_load(spec, progress=None, startup=False):
        threading.Thread(target=visitor, daemon=True).start()
        deadline = time.monotonic() + 10
        while device.DEVICE.waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        order.append("loaded")
        return object()

    monkeypatch.setattr(device, "load_target", fake_load)
    device.preload("embedded", then=lambda loaded: order.append("start-up run")).join(30)
    assert order == ["loaded", "visitor", "start-up run"] and not device.DEVICE.locked
