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


SPREAD_LIMIT = 2.0
"""Repeats whose highest is more than this many times their lowest make a time or a draft cost c too noisy to tell
(:func:`spread_too_wide`). Such a figure is read against no 1, so the verdict rule's narrow test
(:data:`specviz.core.verdict.NARROW`, for a ratio across 1) does not apply; a slowest repeat over twice the fastest
means the rounds timed a machine whose speed changed under them (other programs), not the step."""
BELOW_ONE = 0.9
"""A verify ratio T(n)/T(1) (n > 1) below this is clearly below one step: more tokens timed cheaper than one, which no
machine does (noise; just under 1 is the flat part of the curve)."""


def spread_too_wide(low: float | None, high: float | None) -> bool:
    """Whether repeats from ``low`` to ``high`` (ms, or a cost c: any positive unit) spread more than
    :data:`SPREAD_LIMIT` (a non-positive ``low`` counts as too wide); False without a range (None)."""
    if low is None or high is None:
        return False
    return low <= 0 or high / low > SPREAD_LIMIT


def spread_noise_text(low: float, high: float, unit: str = "") -> str:
    """Why a figure with repeats ``low``–``high`` is too noisy to tell, in words: "too noisy to tell: repeats
    128.0–927.7 ms, 7.2× apart"."""
    apart = f", {high / low:.1f}× apart" if low > 0 else ""
    decimals = 1 if unit else 2
    return f"too noisy to tell: repeats {low:.{decimals}f}–{high:.{decimals}f}{unit}{apart}"


def noisy_c(costs: dict | None) -> str:
    """Why the measured early-exit draft cost c is too noisy to tell (:func:`spread_noise_text` of its repeats),
    "" when its repeats are close enough or were not kept. ``costs``:
    :func:`specviz.measure.costs.measure_draft_costs`'s dict, with "early-exit_range" (low, high)."""
    span = (costs or {}).get("early-exit_range")
    if not span or not spread_too_wide(span[0], span[1]):
        return ""
    return spread_noise_text(span[0], span[1])


def format_noise(figures: dict) -> str:
    """Why one weight format's figures are too noisy to tell ("" when they are not): its rounds' one-token steps
    spread more than :data:`SPREAD_LIMIT` ("one-token steps 128.0–927.7 ms across rounds, 7.2× apart"), or its verify
    curve has ratios below :data:`BELOW_ONE` ("T(n)/T(1) below one step at n = 3, 5"). ``figures``: one format's
    entry of :func:`specviz.measure.weights_kernel.kernel_by_format` ("step_ms_range" [low, high] ms, "verify"
    {n: ratio}, keys ints or strings)."""
    reasons = []
    low, high = figures.get("step_ms_range") or (None, None)
    if spread_too_wide(low, high):
        reasons.append(f"one-token steps {low:.1f}–{high:.1f} ms across rounds"
                       + (f", {high / low:.1f}× apart" if low > 0 else ""))
    below = below_one(figures)
    if below:
        reasons.append(f"T(n)/T(1) below one step at n = {', '.join(map(str, below))}")
    return "; ".join(reasons)


def below_one(figures: dict) -> list[int]:
    """The n > 1 of a weight format's verify curve whose T(n)/T(1) is below :data:`BELOW_ONE`, ascending."""
    verify = {int(n): v for n, v in figures.get("verify", {}).items()}
    return sorted(n for n, v in verify.items() if n > 1 and v < BELOW_ONE)
