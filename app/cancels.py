"""Stop buttons' cancel flags: one registry per tab (:class:`CancelRegistry`), keyed by the browser session.

A run registers its flag when it starts; Stop sets it. A Stop pressed while the session's run still waits in Gradio's
own queue (more handlers going than the event's concurrency limit: 8 Live runs) finds no flag yet: when the page
says it sent a run that has not ended, the registry keeps a mark instead, and the session's next run starts flagged.
"""

from __future__ import annotations

import threading
import uuid

LOCAL_PREFIX = "local-"  # the key of a run started without a browser session (Python code in this process)


def session_key(request) -> str | None:
    """The browser session of a Gradio request (None without a request or without a session hash)."""
    return getattr(request, "session_hash", None) if request is not None else None


class CancelRegistry:
    """Session key -> the cancel flag (a ``threading.Event``) of that session's current run. Thread-safe. Each tab
    keeps its own, so one tab's Stop never stops another tab's run.

    A run registers itself with :meth:`start` (which cancels the session's previous run of the same registry) and
    unregisters with :meth:`finish` (:meth:`app.device.Job.release` does). Stop buttons call :meth:`cancel`; a
    closed browser tab calls :meth:`cancel_session`. A Stop for a run not registered yet (``queued``) leaves a mark
    that the session's next :meth:`start` consumes by flagging that run at once (:meth:`take_queued` drops it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flags: dict[str, threading.Event] = {}
        self._queued: set[str] = set()  # sessions whose Stop came while their run waited in Gradio's queue

    def start(self, request) -> tuple[str, threading.Event]:
        """Register a new run of ``request``'s session: returns (key, flag). A previous run of the same session
        in this registry is cancelled first; the flag comes set when Stop was pressed while this run was queued."""
        key = session_key(request) or f"{LOCAL_PREFIX}{uuid.uuid4().hex}"
        flag = threading.Event()
        with self._lock:
            previous = self._flags.get(key)
            if previous is not None:
                previous.set()
            self._flags[key] = flag
            if key in self._queued:
                self._queued.discard(key)
                flag.set()
        return key, flag

    def running(self, request) -> bool:
        """Whether ``request``'s session has a run registered here (started, not finished: waiting for the device
        or running); False without a session."""
        key = session_key(request)
        with self._lock:
            return key is not None and key in self._flags

    def finish(self, key: str, flag: threading.Event) -> None:
        """Unregister a run that ended (a newer run of the session keeps its own flag)."""
        with self._lock:
            if self._flags.get(key) is flag:
                del self._flags[key]

    def cancel(self, request=None, queued: bool = False) -> int:
        """The Stop button: flag the run of ``request``'s session; with no request at all (Python code in this
        process), the runs started without a request. ``queued``: the page says it sent a run that has not ended;
        with none registered, that run still waits in Gradio's queue, and it will start flagged (a mark for
        :meth:`start`). Returns how many runs were flagged (0 when only the mark was left)."""
        key = session_key(request)
        with self._lock:
            if request is None:
                flags = [f for k, f in self._flags.items() if k.startswith(LOCAL_PREFIX)]
            else:
                flags = [self._flags[key]] if key in self._flags else []
            if not flags and queued and key:
                self._queued.add(key)
        for flag in flags:
            flag.set()
        return len(flags)

    def take_queued(self, request) -> bool:
        """Drop the mark of a Stop pressed while ``request``'s run was queued (a run that ends before it registers,
        e.g. refused for its input, must not leave it to the next one); True when there was one."""
        key = session_key(request)
        with self._lock:
            if key in self._queued:
                self._queued.discard(key)
                return True
        return False

    def cancel_session(self, request) -> None:
        """A browser tab closed: flag that session's run, and no one else's; drop its queued Stop."""
        key = session_key(request)
        with self._lock:
            flag = self._flags.get(key) if key else None
            self._queued.discard(key)
        if flag is not None:
            flag.set()
