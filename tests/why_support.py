"""Drain the Why it works tab's Measure handler into its outputs by name (shared by the tests of its optional
measurements: the offloaded curve, the weight formats)."""

from __future__ import annotations

from app import device, why
from drain_support import last_values


def drain_measure(target: str, **named) -> dict:
    """Run ``why.measure`` on ``target`` (early-exit layer 2, α 0.7, a run of k 4 at 2.5 tokens per pass) to the end.
    Returns each output's last value by its name in :data:`app.why.OUTPUTS` (an update's value unwrapped; an update
    without one skipped) and every value it took under ``"all_" + name``; checks each message's length and that the
    device is free at the end."""
    last = last_values(why.measure(target, 2, 0.7, "4", "2.5", "", **named), why.OUTPUTS, every=True, sized=True)
    assert not device.DEVICE.locked
    return last
