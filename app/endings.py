"""How a tab's long handler (a Live run, the Why tab's measurement) ends after Stop without Gradio's hard cancel.

Stop used ``cancels=[event]``; when the event was still going, Gradio closed it with an empty message that the
browser's client could not read, and the run's status was marked as failed (a red "Error" pill, in about a third of
the stops of a trial). Now Stop only sets the run's cancel flag (:class:`app.device.Job`): the handler passes on its
outputs through :func:`until_stopped`, which ends it quietly at the first output after the flag, and Stop's
follow-up waits (:meth:`Endings.wait`) until the handler has ended before it sends the stopped result, so that
result is the last word and the next run starts at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

FLAGGED = object()
"""What a handler's relay may yield while a flagged job's thread is still busy (a forward or a load in progress):
:func:`until_stopped` ends the handler at it without sending anything."""


def until_stopped(outputs: Iterator, job) -> Iterator:
    """Pass on ``outputs`` until ``job`` (an :class:`app.device.Job`) is flagged (Stop, a newer run of the session, a
    closed tab); then close them and end, sending nothing more. :data:`FLAGGED` items are never sent."""
    try:
        for out in outputs:
            if job.cancelled:
                return
            if out is not FLAGGED:
                yield out
    finally:
        outputs.close()


class Endings:
    """Session key -> an event set once that session's latest handler (of one tab) has ended. Thread-safe."""

    def __init__(self) -> None:
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def going(self, session: str) -> threading.Event:
        """Register a handler of ``session`` as going; pass the event to :meth:`ended` when it ends."""
        event = threading.Event()
        with self._lock:
            self._events[session] = event
        return event

    def ended(self, session: str, event: threading.Event) -> None:
        """The handler of ``event`` has ended: wake a Stop waiting for it (a newer handler keeps its own entry)."""
        event.set()
        with self._lock:
            if self._events.get(session) is event:
                del self._events[session]

    def wait(self, session: str | None, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` seconds until ``session``'s handler has ended (at once when none is going)."""
        with self._lock:
            event = self._events.get(session) if session else None
        if event is not None:
            event.wait(timeout_s)

    def __contains__(self, session: str) -> bool:
        with self._lock:
            return session in self._events
