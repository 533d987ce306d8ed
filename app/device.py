"""The one device runner: every tab's long work (model loads, generations, arena races, measurements, classroom
recordings) goes through it.

- :class:`DeviceLock` (:data:`DEVICE`): one run on the device at a time, so each run's timings are undisturbed;
  waiters stand in a fair line (first come, first served) and are told how many runs are ahead of them.
- :class:`CancelRegistry`: one cancel flag per browser session and tab, so a Stop button (or a closed browser tab)
  flags only its own session's run.
- :class:`Job`: one run's turn on the device. A tab's handler (a generator) waits for its turn with
  :meth:`Job.turn`, runs blocking work in a thread with :meth:`Job.call` or drives an engine stream in a thread with
  :meth:`Job.stream`, and yields status updates while the thread works (:func:`relay` turns each tick into an
  output tuple). :meth:`Job.release` ends the run: it sets the job's cancel flag (so the engine starts no other
  forward: it checks the flag before each one, prompts included, 256 tokens at a time), leaves the line, and
  frees the device at once, or when the last thread of the job ends, so two runs never overlap.

The cancel flag is set by Stop (through the tab's registry) or by :meth:`Job.release`, which a handler calls in
its ``finally``: that also runs when Gradio closes the handler's generator (the browser tab closed, or the event
was cancelled). A :class:`~specviz.core.events.RunCancelled` raised by the engine ends a job quietly.

Session keys: a browser request's ``session_hash``; runs started without a request (Python code in this process,
tests) get a private ``local-<uuid>`` key. A stop that comes with a request but no session hash (e.g. a raw API
call) stops nothing: it cannot prove whose run it is.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from app import render, zerogpu
from app.estimates import start_sampling, threads_for_run
from app.cancels import LOCAL_PREFIX, CancelRegistry, session_key  # noqa: F401 - the tabs import them from here
from specviz.core.events import RunCancelled
from specviz.runtime.policy import current_policy

log = logging.getLogger("specviz.app")

OWN_RUN = "your own run on another tab of this page holds it"  # what a session waiting for its own other run is told
TICK_S = 0.25  # how often a waiting handler hears from its job (a status refresh, a check for Stop)
LINE_POLL_S = 0.5  # how often a run in line asks again for the device (and refreshes its place)
RELEASE_JOIN_S = 0.5  # how long release waits for a stopped job's stream to notice its flag
RUN_THREAD = "specviz-run"  # the thread that drives an engine stream (see Job.stream)
STOPPED_HOLDER = "finishing the model load or forward pass of a stopped run"

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------- the lock


class DeviceLock:
    """A process-wide lock around whole runs, first come first served, with an owner so a Stop can release only
    its own run.

    Waiters stand in a line: :meth:`acquire` joins it (or refreshes the caller's place), and the lock goes to the
    head of the line. :meth:`ahead` tells a waiter how many runs are before it. A waiter that stops calling
    :meth:`acquire` for ``stale_s`` seconds (a run whose generator was dropped without cleanup) loses its place,
    so an abandoned visitor never blocks the line; :meth:`leave` gives up a place at once.
    """

    def __init__(self, stale_s: float = 10.0) -> None:
        self._cond = threading.Condition()
        self._owner: str | None = None
        self._what: str | Callable[[], str] = ""
        self._line: dict[str, float] = {}  # waiting owner -> when it last asked (insertion order = arrival)
        self.stale_s = stale_s

    def _prune(self, now: float) -> None:
        for owner in [o for o, seen in self._line.items() if now - seen > self.stale_s]:
            del self._line[owner]

    def acquire(self, owner: str, what: str, timeout: float) -> bool:
        """Take the lock for ``owner`` (doing ``what``) within ``timeout`` seconds; True on success. On a
        timeout the caller keeps its place in the line (call again, or :meth:`leave`)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                now = time.monotonic()
                self._line[owner] = now
                self._prune(now)
                if self._owner is None and next(iter(self._line)) == owner:
                    del self._line[owner]
                    self._owner, self._what = owner, what
                    return True
                if now >= deadline:
                    return False
                self._cond.wait(min(deadline - now, 0.25))

    def release(self, owner: str) -> bool:
        """Release the lock if ``owner`` holds it (and drop any place it has in the line); True when released."""
        with self._cond:
            self._line.pop(owner, None)
            if self._owner != owner:
                self._cond.notify_all()
                return False
            self._owner, self._what = None, ""
            self._cond.notify_all()
            return True

    def leave(self, owner: str) -> None:
        """Give up ``owner``'s place in the line (a no-op when it has none)."""
        with self._cond:
            if self._line.pop(owner, None) is not None:
                self._cond.notify_all()

    def relabel(self, owner: str, what: str | Callable[[], str]) -> None:
        """Change what the holder ``owner`` is said to be doing: a text, or a callable giving it each time
        :attr:`holder` is read (e.g. a start-up part's running time, :class:`StartupPart`)."""
        with self._cond:
            if self._owner == owner:
                self._what = what

    def ahead(self, owner: str) -> int:
        """How many runs are before ``owner``: the holder (if any) and the waiters that came earlier."""
        with self._cond:
            self._prune(time.monotonic())
            waiting = list(self._line)
            before = waiting.index(owner) if owner in waiting else len(waiting)
            return before + (self._owner is not None and self._owner != owner)

    @property
    def waiting(self) -> int:
        """How many runs wait in line."""
        with self._cond:
            self._prune(time.monotonic())
            return len(self._line)

    @property
    def holder(self) -> str:
        """What the current holder is doing ("" when free), as of now."""
        what = self._what
        return what() if callable(what) else what

    @property
    def locked(self) -> bool:
        """Whether a run holds the device."""
        return self._owner is not None

    def held_by(self, session: str) -> bool:
        """Whether a run of ``session`` (a :class:`Job`'s, owners being ``"{session}:{id}"``) holds the device."""
        return bool(session) and (self._owner or "").startswith(f"{session}:")


DEVICE = DeviceLock()


# ------------------------------------------------------------------------------------------------- jobs


@dataclass(frozen=True)
class Waiting:
    """A run's place in the device's line: ``ahead`` runs come before it; the holder is doing ``holder``."""

    ahead: int
    holder: str


@dataclass(frozen=True)
class _Failure:
    error: BaseException


class Job:
    """One run's turn on the device (see the module docstring): its cancel flag, its place in the line and the
    threads it started.

    ``what`` is what other visitors are told the holder is doing. ``cancel`` is the run's flag (a fresh one when
    None); ``session`` names the owner (and, with ``registry``, the entry :meth:`release` removes).
    """

    def __init__(self, what: str, cancel: threading.Event | None = None, session: str = "run",
                 registry: CancelRegistry | None = None) -> None:
        self.what = what
        self.cancel = cancel if cancel is not None else threading.Event()
        self.session = session
        self.owner = f"{session}:{uuid.uuid4().hex}"
        self._registry = registry
        self._threads: list[tuple[threading.Thread, bool]] = []  # (thread, stops when flagged)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()

    @property
    def cancelled(self) -> bool:
        """Stop was pressed, or the handler went away."""
        return self.cancel.is_set()

    def should_stop(self) -> bool:
        """The cancel flag as a callable (for ``should_stop=`` and ``cancel=`` arguments)."""
        return self.cancel.is_set()

    def say(self, message: object) -> None:
        """Hand a message from the job's thread to the handler (thread-safe); :meth:`call` yields it."""
        self._inbox.put(message)

    def turn(self) -> Iterator[Waiting]:
        """Wait for the device. Yields a :class:`Waiting` while in line (the first one at once, then about every
        half second); returns True once the device is held, False when the job was cancelled first
        (``held = yield from job.turn()``). Once held, the job's thread count is set for the CPUs other programs
        leave free now (:func:`app.estimates.threads_for_run`)."""
        timeout = 0.0  # the first try does not wait: a visitor in line sees their place at once
        while not DEVICE.acquire(self.owner, self.what, timeout=timeout):
            timeout = LINE_POLL_S
            if self.cancelled:
                return False
            own = self._registry is not None and DEVICE.held_by(self.session)  # a page's Live run, then its Arena
            yield Waiting(DEVICE.ahead(self.owner), OWN_RUN if own else DEVICE.holder)
        if not zerogpu.active():  # a GPU worker's threads are not this process's
            threads_for_run()  # fewer threads beside other programs' work, fixed for the whole job
        return True

    def call(self, fn: Callable[..., T], *args, stoppable: bool = False, **kwargs) -> Iterator[object]:
        """Run ``fn(*args, **kwargs)`` in a thread. Yields each message given to :meth:`say` meanwhile, and None
        every :data:`TICK_S` seconds; returns ``fn``'s value (``value = yield from job.call(...)``) or re-raises its
        error in the handler's thread.

        On cancel: a ``stoppable`` function (one that checks :meth:`should_stop`, or passes the flag to the
        engine) is waited for and its value returned; any other (a model load cannot be interrupted) is left to
        finish in its thread and None is returned at once; the device stays held until it ends (see
        :meth:`release`). A :class:`RunCancelled` from ``fn`` returns None.

        On a ZeroGPU Space a ``stoppable`` call (a tab's compute, given this job among its arguments) runs in the GPU
        worker process (:func:`app.zerogpu.remote_work`), its messages relayed here; model loads stay in this process.
        """
        if self.cancelled:
            return None
        if stoppable and zerogpu.active():  # a tab's compute: in the GPU worker (load calls stay here)
            runner = zerogpu.remote_work(fn, args, kwargs, self, self.say)
            if runner is not None:
                fn, args, kwargs = runner, (), {}
        box: dict = {}

        def work() -> None:
            try:
                box["value"] = fn(*args, **kwargs)
            except RunCancelled:  # the engine saw the flag before a forward: nothing more ran
                pass
            except BaseException as error:  # handed to the handler's thread
                box["error"] = error

        thread = self._start(work, "specviz-job", stoppable)
        while True:
            thread.join(TICK_S)
            yield from self._messages()
            if not thread.is_alive():
                break
            if self.cancelled and not stoppable:
                return None
            yield None
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def stream(self, items: Iterator[T]) -> Iterator[T | None]:
        """Drive ``items`` (an engine stream) in a thread and yield each item as it arrives, or None every
        :data:`TICK_S` seconds while none does, so the handler refreshes its status and notices Stop during a long
        forward. The consumer checks :attr:`cancelled` itself; when it stops reading (or the flag is set) the
        thread stops after the item in progress, and the engine before its next forward. A
        :class:`RunCancelled` ends the stream quietly; any other error is re-raised in the handler's thread."""
        out: queue.SimpleQueue = queue.SimpleQueue()
        done = object()
        left = threading.Event()  # the consumer stopped reading (Stop, or Gradio closed the handler)

        def work() -> None:
            try:
                for item in items:
                    out.put(item)
                    if self.cancelled or left.is_set():
                        break
            except RunCancelled:  # Stop during a forward: the engine started no other one
                pass
            except BaseException as error:  # handed to the handler's thread
                out.put(_Failure(error))
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()
                out.put(done)

        self._start(work, RUN_THREAD, stoppable=True)
        try:
            yield from _drain(out, done)
        finally:
            left.set()

    def release(self) -> None:
        """End the run (finished, failed, stopped or closed): set the cancel flag, leave the line, unregister from
        the registry, and free the device now, or, when a thread of this job still runs (a model load, or a
        forward in progress at Stop), as soon as the last one ends, so two runs never overlap. The handler's
        worker is free either way."""
        self.cancel.set()
        DEVICE.leave(self.owner)
        if self._registry is not None:
            self._registry.finish(self.session, self.cancel)
        for thread, stoppable in self._threads:  # a flagged stream usually ends within one forward
            if stoppable:
                thread.join(timeout=RELEASE_JOIN_S)
        alive = [thread for thread, _ in self._threads if thread.is_alive()]
        if not alive:
            DEVICE.release(self.owner)
            return
        DEVICE.relabel(self.owner, STOPPED_HOLDER)

        def wait_then_release() -> None:
            for thread in alive:
                thread.join()
            DEVICE.release(self.owner)

        threading.Thread(target=wait_then_release, name="specviz-release", daemon=True).start()

    def _start(self, work: Callable[[], None], name: str, stoppable: bool) -> threading.Thread:
        context = contextvars.copy_context()  # the handler's context (the Gradio request ZeroGPU's calls read)
        thread = threading.Thread(target=context.run, args=(work,), name=name, daemon=True)
        self._threads.append((thread, stoppable))
        thread.start()
        return thread

    def _messages(self) -> Iterator[object]:
        while not self._inbox.empty():
            yield self._inbox.get()


def _drain(out: queue.SimpleQueue, done: object) -> Iterator[object | None]:
    """Yield the items put into ``out`` until ``done`` (None every tick while none comes); re-raise a failure."""
    while True:
        try:
            item = out.get(timeout=TICK_S)
        except queue.Empty:
            yield None
            continue
        if item is done:
            return
        if isinstance(item, _Failure):
            raise item.error
        yield item


def start(registry: CancelRegistry, request, what: str) -> Job:
    """A job for ``request``'s session, registered in the tab's ``registry`` (which cancels that session's
    previous run there); :meth:`Job.release` unregisters it."""
    session, flag = registry.start(request)
    return Job(what, flag, session=session, registry=registry)


def relay(steps: Iterator[object], show: Callable[[object], object]):
    """Yield ``show(item)`` for each item of ``steps`` (a job's :meth:`~Job.turn`, :meth:`~Job.call` or
    :meth:`~Job.stream`), skipping None results, and return what ``steps`` returns:
    ``value = yield from relay(job.call(fn), show)``. Closing the caller closes ``steps``."""
    try:
        while True:
            try:
                item = next(steps)
            except StopIteration as done:
                return done.value
            shown = show(item)
            if shown is not None:
                yield shown
    finally:
        close = getattr(steps, "close", None)
        if close is not None:
            close()


def waiting_status(ahead: int, holder: str, notes=()) -> str:
    """The status of a run waiting in line for the device."""
    runs = "1 run is" if ahead == 1 else f"{ahead} runs are"
    what = f" ({holder})" if holder else ""
    return render.status_html(f"Waiting for the device… {runs} ahead of yours{what}. Runs take turns so that "
                              f"each one's timing is undisturbed.", "wait", notes=notes)


_TUNINGS_LOGGED: set[tuple[str, str]] = set()  # (model label, tuning summary) already in this process's log


def load_target(spec: str, progress=None, *, startup: bool = False):
    """Load a target (:func:`specviz.runtime.models.load_model`, shared per process; in the operator's ``SPECVIZ_DTYPE``, else
    the device's default: :func:`specviz.runtime.models.operator_dtype`) and apply the threads and kernels measured fastest
    for it on this machine (:func:`specviz.measure.tuning.tune`: measured once per process, 15-25 s on a 2-core machine, or
    read from disk; later calls take the choice kept in memory). ``startup``: the app's start-up (:func:`preload`),
    the one place where a choice measured on a busy machine is measured again when the machine is quiet now; never a
    visitor's run. The choice is logged once, when it is measured or read from disk, not on each run that reuses
    it. Raises what ``load_model`` raises.

    With the operator's placement (``SPECVIZ_DEVICE_MAP``, ``SPECVIZ_MAX_MEMORY``, ``SPECVIZ_OFFLOAD_FOLDER``:
    :mod:`app.placed`) the target is placed by accelerate's device map instead, kept loaded, and runs eagerly with
    the default kernels: no tuning, torch.compile or CUDA graphs. Raises PlacementError (one sentence) for a
    placement that cannot be used. Last, the target is put in the operator's weight format (``SPECVIZ_WEIGHTS``:
    :mod:`app.weights_setting`), or where that is unset, on the CPU, in the format the start-up measured fastest
    here (half a minute or more once, kept with the tuning); raises WeightsError (one sentence) for a format that
    cannot run here."""
    from specviz.core.graphs import warm_graphs
    from specviz.runtime.models import load_model, operator_dtype
    from specviz.measure.tuning import tune

    from app.placed import load_operator_placed, operator_placement
    from app.weights_setting import in_operator_weights

    placement = operator_placement()
    if placement is not None:  # a target bigger than the device: placed, streamed, eager (as the CLI's --device-map)
        return load_operator_placed(spec, placement, operator_dtype(), progress)
    loaded = load_model(spec, dtype=operator_dtype(), progress=progress)
    choice = tune(loaded, progress=progress, remeasure_busy=startup)
    said = (loaded.label, choice.summary())
    if said not in _TUNINGS_LOGGED:  # measured or read just now; a run reusing the kept choice says nothing
        _TUNINGS_LOGGED.add(said)
        log.info("%s: %s", *said)
    warmed = warm_graphs(loaded)  # CUDA graphs captured at load on the graph path (None elsewhere)
    if warmed:
        log.info("%s: %s", loaded.label, warmed)
    return in_operator_weights(loaded, progress)  # SPECVIZ_WEIGHTS, else the CPU's measured fastest


STARTUP_MEASURING = "the app is measuring this machine once at start-up"
"""What a waiting visitor is told while the start-up measures the fastest threads and kernels (:func:`preload`),
followed by its running time (:func:`startup_holder`)."""
STARTUP_WEIGHTS = "the app is comparing the weight formats on this machine once at start-up"
"""What a waiting visitor is told while the start-up times each weight format (:func:`preload`)."""
STARTUP_TIMING = "the app is timing a first short run once at start-up, so that later runs are planned from it"
"""What a waiting visitor is told while the start-up's ``then`` runs (:func:`preload`)."""
USUAL_S = {STARTUP_MEASURING: 25.0, STARTUP_WEIGHTS: 30.0, STARTUP_TIMING: 20.0}
"""How long each start-up part usually takes with the embedded model on 2 CPUs (seconds). Measured 2026-12-05 on
the project's 2-core VM beside a one-core training job (load 2-7, under nice 19): the model load 10.1 s, threads
and kernels 24.7 s, the weight formats 56.6 s, the timed forwards 19.7 s and the 24-token run 6.7 s."""


LOAD_USUAL_S = 10.0  # the start-up's model load, as :data:`USUAL_S`


def _seconds(seconds: float) -> str:
    """A duration in words: "45 s" under a minute, else minutes and seconds ("3 min", "3 min 5 s")."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    return f"{whole // 60} min" + (f" {whole % 60} s" if whole % 60 else "")


def startup_holder(what: str, usual_s: float, elapsed_s: float, load: float | None, cpus: int) -> str:
    """What a waiting visitor is told while the start-up part ``what`` holds the device: how long it has run
    (``elapsed_s``) against its usual time (``usual_s``), and once it runs past that, that it does, with the
    1-minute ``load`` average on ``cpus`` CPUs as the reason when it exceeds them (None: unknown, no reason).

    >>> startup_holder("the app is measuring this machine once at start-up", 20, 180.2, 12.4, 2)
    'the app is measuring this machine once at start-up: running 3 min, longer than the usual 20 s because the machine is busy: load 12 on 2 CPUs'
    """
    if elapsed_s < usual_s + 0.5:  # as shown: "25 s so far" up to 25.4 s, never "running 25 s, longer than 25 s"
        return f"{what}: {_seconds(elapsed_s)} so far, usually about {_seconds(usual_s)}"
    busy = ""
    if load is not None and load > cpus:
        shown = f"{load:.0f}" if load >= 9.95 else f"{load:.1f}"
        busy = f" because the machine is busy: load {shown} on {cpus} CPU{'s' if cpus != 1 else ''}"
    return f"{what}: running {_seconds(elapsed_s)}, longer than the usual {_seconds(usual_s)}{busy}"


class StartupPart:
    """A start-up part's label for :meth:`DeviceLock.relabel`: called, it gives :func:`startup_holder` of ``what``
    now (``usual_s`` seconds, default its :data:`USUAL_S` time or 20; the seconds since it was made; this
    machine's 1-minute load average)."""

    def __init__(self, what: str, usual_s: float | None = None) -> None:
        self.what = what
        self.usual_s = USUAL_S.get(what, 20.0) if usual_s is None else usual_s
        self.started = time.monotonic()

    def __call__(self) -> str:
        import os

        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):
            load = None
        return startup_holder(self.what, self.usual_s, time.monotonic() - self.started, load, os.cpu_count() or 1)


def preload(spec: str = "embedded", then: Callable[[object], None] | None = None) -> threading.Thread:
    """Load ``spec`` in a background thread under the device lock, so the first run does not wait for it: the
    model, its tuning (:func:`load_target` with ``startup``), then ``then(loaded)`` (e.g. the Live tab's
    default-length measurement). Visitors waiting meanwhile are told which part holds the device and for how long
    (:class:`StartupPart`: the model's load, the machine's measurement :data:`STARTUP_MEASURING`, the weight formats'
    :data:`STARTUP_WEIGHTS`, ``then``'s :data:`STARTUP_TIMING`). A visitor already waiting when ``then`` would
    start goes first: the start-up gives the device up and runs ``then`` when its turn in the line comes again,
    so a visitor never waits for a part that is only there to plan later runs.
    Returns the thread (already started). Logs the operator policy in force and how long each part took; a model
    that cannot be loaded is logged as a warning, not raised, and so is a failure of ``then``."""
    log.info("%s", current_policy().describe())
    start_sampling()  # the machine's load, read from now on: the first run's plan and threads have seconds of it

    def work() -> None:
        from specviz.measure.tuning import MEASURING, MEASURING_WEIGHTS
        from specviz.runtime.models import ModelLoadError

        owner = f"preload:{uuid.uuid4().hex}"
        DEVICE.acquire(owner, f"the model '{spec}' is loading", timeout=3600)
        DEVICE.relabel(owner, StartupPart(f"the model '{spec}' is loading", LOAD_USUAL_S))
        parts = [("loading", time.monotonic())]
        try:
            log.info("pre-loading %s", spec)

            def said(message: str) -> None:
                log.info("%s", message)
                part = {MEASURING: STARTUP_MEASURING, MEASURING_WEIGHTS: STARTUP_WEIGHTS}.get(message)
                if part is not None:
                    DEVICE.relabel(owner, StartupPart(part))
                    parts.append((part, time.monotonic()))

            loaded = load_target(spec, progress=said, startup=True)
            parts.append(("done", time.monotonic()))
            log.info("pre-loaded %s; %s", spec, _took(parts))
            if then is not None:
                owner = _after_waiting_visitors(owner)
                DEVICE.relabel(owner, StartupPart(STARTUP_TIMING))
                began = time.monotonic()
                then(loaded)
                log.info("start-up run of %s took %.1f s", spec, time.monotonic() - began)
        except ModelLoadError as error:
            log.warning("could not pre-load %s: %s", spec, error)
        except Exception as error:  # noqa: BLE001 - the start-up's extra measurement never stops the server
            log.warning("after pre-loading %s: %s", spec, error)
        finally:
            DEVICE.release(owner)

    thread = threading.Thread(target=work, name="specviz-preload", daemon=True)
    thread.start()
    return thread


def _took(parts: list[tuple[str, float]]) -> str:
    """The start-up parts' durations for the log: "loading 10.1 s, <part> 24.7 s, ..." (``parts``: (name, when
    it began) in order, the last one's name "done")."""
    return ", ".join(f"{name} {b - a:.1f} s" for (name, a), (_, b) in zip(parts, parts[1:]))


def _after_waiting_visitors(owner: str) -> str:
    """Let the runs waiting for the device (if any) go before the start-up's remaining part: give the device up
    and queue for it again behind them; returns the owner that holds it now (``owner`` when no one waited)."""
    if DEVICE.waiting == 0:
        return owner
    log.info("start-up: %d run(s) waiting go before the start-up run", DEVICE.waiting)
    DEVICE.release(owner)
    owner = f"preload:{uuid.uuid4().hex}"
    DEVICE.acquire(owner, STARTUP_TIMING, timeout=24 * 3600)
    return owner
