"""The forward-time grid read for noise, shared by the Why tab's charts, cards and text: the points flagged impossible
(measured faster than less work even after a remeasure, left out of every figure: :func:`possible_curve`) and the
points within noise of impossible (below less work, but inside the margin or with overlapping repeats: ringed, kept
on the lines). A grid is :func:`specviz.measure.grid.measure_forward_grid`'s dict."""

from __future__ import annotations

from app import render
from specviz.measure.grid import IMPOSSIBLE_MARGIN, below_less_work


def possible_curve(grid: dict, batch: int) -> dict[int, float]:
    """The measured ms per n at ``batch`` without the points flagged impossible (noise is no finding)."""
    bad = {p["n"] for p in grid.get("impossible", []) if p["batch"] == batch}
    return {n: ms for n, ms in grid["ms"].get(batch, {}).items() if n not in bad}


def times_measured(grid: dict) -> int:
    """How many times the batch size measured most often was measured (1 without a remeasure): the impossible
    points' batch sizes were measured this often before they were flagged. A grid that kept no count (from before
    the count was kept) was measured twice where it flagged or remeasured anything."""
    again = grid.get("remeasured") or grid.get("impossible")
    return max((grid.get("measurements") or {}).values(), default=2 if again else 1)


def _times(count: int) -> str:
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


def impossible_text(grid: dict) -> str:
    """One plain sentence when the measurement could not get a possible curve: the points still faster than
    possible after being measured again ("" when none)."""
    points = grid.get("impossible") or []
    if not points:
        return ""
    shown = "; ".join(f"batch {p['batch']}, {p['n']} token{'s' if p['n'] > 1 else ''} measured faster than batch "
                      f"{p['than_batch']}, {p['than_n']} token{'s' if p['than_n'] > 1 else ''}" for p in points[:3])
    more = f" and {len(points) - 3} more" if len(points) > 3 else ""
    return (f"⚠ Could not get a possible curve: measured {_times(times_measured(grid))}, {len(points)} "
            f"point{'s' if len(points) > 1 else ''} still came out faster than less work ({shown}{more}). More work "
            "cannot take less time, so this is noise from other work on the machine, flagged ✕ on the chart and left "
            "out of the lines and the what-if curve; measure again when the machine is quieter.")


WITHIN_NOISE = "within noise of impossible"
"""The legend's name of the points :func:`within_noise_points` finds (short: one line of a phone's legend; the
chart's note and the hover say why it is no finding)."""


def within_noise_points(grid: dict) -> list[dict]:
    """The grid's points measured below a smaller workload but not flagged impossible (inside the margin of
    :func:`specviz.measure.grid.impossible_points`, or their repeats overlap): within noise of impossible
    (:func:`specviz.measure.grid.below_less_work`; entries ``{"batch", "n", "than_batch", "than_n", "below"}``)."""
    flagged = [(p["batch"], p["n"]) for p in grid.get("impossible", [])]
    return below_less_work(grid.get("ms", {}), flagged)


def inside_margin(point: dict) -> bool:
    """Whether a point within noise of impossible (:func:`within_noise_points`) lies below less work by no more
    than :data:`IMPOSSIBLE_MARGIN`; otherwise it was not flagged because its repeats overlap the smaller
    workload's (the grid flags a point only when both hold: further below than the margin, every repeat below)."""
    return point["below"] <= IMPOSSIBLE_MARGIN


def _why_not_flagged(point: dict) -> str:
    """Why a point below less work is within noise: "inside the 10% margin" or "repeats overlap"."""
    return f"inside the {IMPOSSIBLE_MARGIN:.0%} margin" if inside_margin(point) else "with repeats that overlap"


def within_noise_text(grid: dict) -> str:
    """One sentence on the points within noise of impossible ("" when none), naming up to three, each with the
    condition that kept it from being flagged (:func:`_why_not_flagged`)."""
    points = within_noise_points(grid)
    if not points:
        return ""
    shown = "; ".join(f"batch {p['batch']}, {p['n']} token{'s' if p['n'] > 1 else ''} {p['below']:.0%} below batch "
                      f"{p['than_batch']}, {p['than_n']} token{'s' if p['than_n'] > 1 else ''}, "
                      f"{_why_not_flagged(p)}" for p in points[:3])
    more = f"; and {len(points) - 3} more" if len(points) > 3 else ""
    return (f"○ {render.plural(len(points), 'point')} measured below less work: {shown}{more}. Within noise of "
            "impossible, so read the two as equal, not as a finding.")


def noisy_measured(curves: dict) -> bool:
    """Whether the measured-cost speedup beats the paper's anywhere (by over 1 %): the paper's curve counts a
    verification as one step, so this happens only where a forward over k+1 tokens was timed below a one-token step,
    which no machine does (noise)."""
    measured = curves.get("measured") or []
    return any(m > p * 1.01 for m, p in zip(measured, curves["paper"]))
