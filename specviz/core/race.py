"""Run a speculative stream and its baseline together without letting them compete for the device.

Both generators run in this one thread, one forward at a time; each measures only its own forwards
(``PassEvent.t_end_ms``), so neither's timing includes the other's work. :func:`race` advances whichever
run is behind on its own clock, so a consumer sees the two streams in the order a true side-by-side race
on separate identical devices would produce them.
"""

from __future__ import annotations

from typing import Iterator

from specviz.core.events import PassEvent


def race(spec: Iterator[PassEvent], base: Iterator[PassEvent]) -> Iterator[PassEvent]:
    """Interleave two event streams by their own clocks; yields each event once, in clock order.

    Stops when both streams are exhausted; a stream that raises propagates the error to the caller.
    """
    streams = {"speculative": iter(spec), "baseline": iter(base)}
    clocks = {name: 0.0 for name in streams}
    # Both prefills run back to back before either event is handed out: a consumer's work on the first
    # event (rendering, sending it to a browser) may overlap the next forward, and must not always land on
    # the second run's prefill.
    first = []
    for name in list(streams):
        try:
            first.append(next(streams[name]))
            clocks[name] = first[-1].t_end_ms
        except StopIteration:
            del streams[name]
    yield from first
    while streams:
        name = min(streams, key=lambda n: clocks[n])
        try:
            event = next(streams[name])
        except StopIteration:
            del streams[name]
            continue
        clocks[name] = event.t_end_ms
        yield event
