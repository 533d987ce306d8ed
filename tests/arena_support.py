"""Drain the Arena tab's Run handler into its outputs by name (shared by the Arena tab's tests and the Arena tests of
the trained heads)."""

from __future__ import annotations

from app import arena as arena_tab
from app import device
from drain_support import last_values


def drain(gen) -> dict:
    """Run the arena handler to the end: the last real value of each output."""
    last = last_values(gen, arena_tab.OUTPUTS, sized=True, counted=True)
    assert not device.DEVICE.locked, "the device lock must be released when the arena ends"
    return last
