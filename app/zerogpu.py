"""Running on a ZeroGPU Space (Hugging Face's shared GPUs): CUDA exists only inside calls decorated with the
``spaces`` package's ``GPU`` decorator.

How ZeroGPU works, and what specviz does about each point:

- A decorated call runs in a separate worker process, forked from the app's process; its arguments and every
  value it returns or yields are pickled across. So the work sent there is a module-level function given plain
  data (settings, token ids), and it yields plain data back (the engine's events: token ids, floats, small
  dataclasses; CPU tensors at most, never CUDA tensors: :func:`plain` checks).
- Models are placed on "cuda" in the app's process when it starts (the one place specviz loads a model before
  the first request, :func:`app.serve`); the worker inherits them through the fork.
- Each call asks for a GPU for a ``duration`` in seconds; :func:`stream` sizes it from the run (a callable of the
  same arguments, as ``spaces`` allows), so short runs queue ahead of long ones.
- The ``spaces`` package reads the Gradio request from a context variable: the app's worker threads start with a
  copy of the handler's context (:class:`app.device.Job`), so the decorated call sees the visitor's request.
- A Stop cannot reach into the worker process: the app stops reading (the visitor sees the run stop at once) and
  the worker ends with the run, bounded by its duration.

Off ZeroGPU (a CPU Space, a dedicated GPU, a laptop), :func:`active` is False and nothing here changes what runs,
with or without ``spaces`` installed. ``SPECVIZ_ZEROGPU=0`` turns the ZeroGPU path off even on such a Space.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import os
from typing import Callable, Iterator

import torch

log = logging.getLogger("specviz.app.zerogpu")

MIN_DURATION_S = 15  # the smallest GPU slot asked for: a model load check and a few passes
MAX_DURATION_S = 120  # the largest: longer runs are refused by the operator's limits before they get here
SECONDS_PER_TOKEN = 0.08  # a deliberately slow guess per generated token (both runs, a 1-2B model, bf16)

_decorated: dict[Callable, Callable] = {}


def active() -> bool:
    """True on a ZeroGPU Space: ``SPACES_ZERO_GPU`` is set true (the Space sets it), the ``spaces`` package
    imports, and ``SPECVIZ_ZEROGPU`` is not "0"."""
    if os.environ.get("SPECVIZ_ZEROGPU", "1") == "0":
        return False
    if os.environ.get("SPACES_ZERO_GPU", "").lower() not in ("1", "t", "true"):
        return False
    return _spaces() is not None


def _spaces():
    """The ``spaces`` module, or None when it is not installed."""
    try:
        return importlib.import_module("spaces")
    except ImportError:
        return None


def duration_for(max_new_tokens: int, prompt_tokens: int = 0) -> int:
    """Seconds of GPU to ask for a run of ``max_new_tokens`` (both runs, the prompt read twice), clamped to
    [:data:`MIN_DURATION_S`, :data:`MAX_DURATION_S`]."""
    guess = MIN_DURATION_S + SECONDS_PER_TOKEN * (2 * max_new_tokens + prompt_tokens / 50)
    return int(min(MAX_DURATION_S, max(MIN_DURATION_S, math.ceil(guess))))


def gpu(task: Callable, duration: Callable[..., int] | int) -> Callable:
    """``task`` decorated with ``spaces.GPU(duration=duration)`` (once per task; ``duration`` may be a callable
    of the task's arguments). Off ZeroGPU, ``task`` itself."""
    if not active():
        return task
    if task not in _decorated:
        _decorated[task] = _spaces().GPU(duration=duration)(task)
    return _decorated[task]


def stream(task: Callable[..., Iterator], *args, duration: Callable[..., int] | int) -> Iterator:
    """Run the generator function ``task(*args)`` on the GPU (ZeroGPU) or here (elsewhere) and yield its items.
    ``task`` must be a module-level function and ``args`` plain data: both cross a process boundary on ZeroGPU."""
    yield from gpu(task, duration)(*args)


def plain(value, depth: int = 0):
    """``value`` unchanged when it can cross to another process as it is: raises TypeError for a CUDA tensor
    anywhere inside it (lists, tuples, dicts, dataclasses), which the worker process must move to the CPU first."""
    if depth > 6:
        return value
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise TypeError(f"a {value.device.type} tensor cannot leave the GPU worker: move it to the CPU")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            plain(getattr(value, field.name), depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            plain(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value[:64]:
            plain(item, depth + 1)
    return value


def place_at_start(spec: str, load: Callable[[str], object]) -> None:
    """On ZeroGPU, load ``spec`` now, in the app's process (placed on "cuda", which ZeroGPU allows there), so the
    worker processes inherit it; elsewhere nothing (the app pre-loads in the background instead). A model that
    cannot be loaded is logged, not raised: the page still starts and says why on the first run."""
    if not active():
        return
    try:
        load(spec)
        log.info("ZeroGPU: %s placed on the GPU at start", spec)
    except Exception as error:  # noqa: BLE001 - the page must come up; the first run reports the error
        log.warning("ZeroGPU: could not load %s at start: %s", spec, error)


# ------------------------------------------------------------------------------ a tab's work in the GPU worker

WORK_DURATION_S = MAX_DURATION_S  # a measurement's length is not known ahead: it asks for the most


class WorkerJob:
    """Stands in for :class:`app.device.Job` inside a GPU worker process: :meth:`say` hands a message back to the
    app (:func:`remote` yields it), :meth:`should_stop` is False (a Stop cannot reach this process: the app stops
    reading and the call ends within its duration)."""

    def __init__(self, say: Callable[[object], None]) -> None:
        import threading

        self.say = say
        self.cancelled = False
        self.cancel = threading.Event()  # never set

    def should_stop(self) -> bool:
        """Never: see the class docstring."""
        return False


def remote(fn: Callable, args: tuple, kwargs: dict, job_at: tuple[int, ...]):
    """In the GPU worker: ``fn(*args, **kwargs)`` with a :class:`WorkerJob` at the positions ``job_at`` of
    ``args``; yields ``("say", message)`` for each progress message, then ``("value", fn's result)``. Run in a
    thread so the messages flow while ``fn`` works; an error in ``fn`` is raised here (ZeroGPU hands it back)."""
    import queue
    import threading

    out: queue.SimpleQueue = queue.SimpleQueue()
    job = WorkerJob(lambda message: out.put(("say", message)))
    call_args = tuple(job if i in job_at else a for i, a in enumerate(args))
    box: dict = {}

    def work() -> None:
        try:
            box["value"] = fn(*call_args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - raised again in the generator below
            box["error"] = error
        finally:
            out.put(("end", None))

    threading.Thread(target=work, name="specviz-gpu-work", daemon=True).start()
    while (item := out.get())[0] != "end":
        yield item
    if "error" in box:
        raise box["error"]
    yield "value", plain(box.get("value"))


def remote_work(fn: Callable, args: tuple, kwargs: dict, job, say: Callable[[object], None]) -> Callable[[], object] | None:
    """A function that runs ``fn(*args, **kwargs)`` through :func:`remote` on the GPU and returns its value,
    forwarding its progress messages to ``say``; ``job`` (the app's Job) is replaced by a :class:`WorkerJob` there.
    None when ``fn`` or its arguments cannot be pickled (a closure): the caller then runs it here."""
    import pickle

    job_at = tuple(i for i, a in enumerate(args) if a is job)
    sent = tuple(None if i in job_at else a for i, a in enumerate(args))
    try:
        pickle.dumps((fn, sent, kwargs))
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        log.warning("ZeroGPU: %s runs in the app's process (%s)", getattr(fn, "__name__", fn), error)
        return None

    def run() -> object:
        value = None
        for kind, item in stream(remote, fn, sent, kwargs, job_at, duration=WORK_DURATION_S):
            if kind == "say":
                say(item)
            else:
                value = item
        return value

    return run
