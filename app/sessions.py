"""Cancel flags of the runs in progress, one per browser session (shared by the Live tab and the Arena / Why tabs).

A run registers itself with :meth:`CancelRegistry.start` (which cancels the session's previous run of the same
registry), checks its flag between steps, and unregisters with :meth:`CancelRegistry.finish`. Stop buttons call
:meth:`CancelRegistry.cancel`; a closed browser tab calls :meth:`CancelRegistry.cancel_session`.

Session keys: a browser request's ``session_hash``; runs started without a request (Python code in this process,
tests) get a private ``local-<uuid>`` key. A stop that comes with a request but no session hash (e.g. a raw API
call) stops nothing: it cannot prove whose run it is.
"""

from __future__ import annotations

import threading
import uuid

LOCAL_PREFIX = "local-"


def session_key(request) -> str | None:
    """The browser session of a Gradio request (None without a request or without a session hash)."""
    return getattr(request, "session_hash", None) if request is not None else None


class CancelRegistry:
    """Session key -> the cancel flag (a ``threading.Event``) of that session's current run. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flags: dict[str, threading.Event] = {}

    def start(self, request) -> tuple[str, threading.Event]:
        """Register a new run of ``request``'s session: returns (key, flag). A previous run of the same session
        in this registry is cancelled first."""
        key = session_key(request) or f"{LOCAL_PREFIX}{uuid.uuid4().hex}"
        flag = threading.Event()
        with self._lock:
            previous = self._flags.get(key)
            if previous is not None:
                previous.set()
            self._flags[key] = flag
        return key, flag

    def finish(self, key: str, flag: threading.Event) -> None:
        """Unregister a run that ended (a newer run of the session keeps its own flag)."""
        with self._lock:
            if self._flags.get(key) is flag:
                del self._flags[key]

    def cancel(self, request=None) -> int:
        """The Stop button: flag the run of ``request``'s session; with no request at all (Python code in this
        process), the runs started without a request. Returns how many runs were flagged."""
        with self._lock:
            if request is None:
                flags = [f for k, f in self._flags.items() if k.startswith(LOCAL_PREFIX)]
            else:
                key = session_key(request)
                flags = [self._flags[key]] if key in self._flags else []
        for flag in flags:
            flag.set()
        return len(flags)

    def cancel_session(self, request) -> None:
        """A browser tab closed: flag that session's run, and no one else's."""
        key = session_key(request)
        with self._lock:
            flag = self._flags.get(key) if key else None
        if flag is not None:
            flag.set()
