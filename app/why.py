"""The "Why it works" tab: the target's forward time against the number of new tokens, measured live on this
device for a few batch sizes, and an interactive what-if chart of tokens per pass and speedup against k.

:func:`measure` (the Measure button) waits for its turn on the device (:mod:`app.device`: it takes turns with
every other tab's runs), loads the target and runs :func:`specviz.analysis.arena.measure_forward_grid` (with the
job's cancel flag as ``should_stop``, so Stop (:func:`stop`) or a closed handler ends it before its next forward) and
:func:`specviz.analysis.arena.measure_draft_costs` in the job's thread; before the grid, a few forwards timed here
(:func:`specviz.analysis.arena.probe_forward_ms`) give the status its estimate of the whole measurement. A point
measured faster than less work is measured again by the grid and, if still impossible, flagged on the chart and
in the text and left out of the lines, the cards and the what-if curve (:func:`possible_curve`); one below less
work but inside the margin is ringed as within noise of impossible (:func:`within_noise_points`). Error bars span
the repeats of each point. :func:`whatif` redraws the what-if chart
from the sliders, the last measurement and a run to mark (filled from the Live tab's latest run by
:func:`from_history`). Figures are pure functions.
"""

from __future__ import annotations

import functools
import html
import logging
import math
import time

import gradio as gr
import plotly.graph_objects as go

from app import device, render
from app.device import CancelRegistry, Job, load_target, relay
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX
from app.inputs import EXIT_LAYER, InputError, check_models, clamp_notice, fit_loaded_exit_layer, parse_exit_layer
from app.messages import report, tell_when_invalid, warn
from app.records import RunSummary
from specviz.analysis.arena import (
    BATCH_SIZES,
    IMPOSSIBLE_MARGIN,
    TOKEN_COUNTS,
    alpha_for_tokens_per_pass,
    below_less_work,
    grid_seconds,
    interpolate,
    lookahead_pass_cost,
    probe_forward_ms,
    measure_draft_costs,
    measure_forward_grid,
    whatif_curves,
)
from specviz.analysis.bench import CpuShare, busy_machine_warning
from specviz.core.verdict import SAME, Verdict, read_speedup
from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW
from specviz.core.engine import MAX_K
from specviz.policy import PolicyError, current_policy

log = logging.getLogger("specviz.app.why")

OUTPUTS = ("why-status", "why-chart", "why-summary", "why-measurement", "why-c", "why-batch", "why-whatif-chart")
"""What :func:`measure` yields, in order (the components' elem_ids; why-measurement is the gr.State)."""

DEFAULT_ALPHA = 0.7
DEFAULT_C = 0.05
MAX_C = 2.0
"""The right end of the what-if's draft cost slider (a larger c typed into its box is drawn as this, as the slider
shows it)."""
BATCH_COLORS = {1: COLORS["speculative"], 4: COLORS["bonus"], 16: COLORS["recovered"]}
STATUS_INTERVAL_S = 1.0
ESTIMATE_EXTRA_S = 3.0  # beyond the grid: the memory-copy bandwidth and the drafters' costs (about this long)
RUNS = CancelRegistry()  # the tab's measurements, one per session

INTRO = (
    "<div class='why-intro'><p><b>Why verification is nearly free.</b> Generating one token with a large model "
    "reads every weight from memory once; the arithmetic for that one token is tiny, so the step waits on memory. "
    "Feeding the target k+1 tokens at once reads the same weights once and does k+1 times the arithmetic "
    "<i>for free</i> while the arithmetic units are idle anyway: the flat part of the curve below. Where the curve "
    "bends up, the arithmetic units are full, each extra token costs real time, and drafting more stops paying: "
    "that is why k cannot grow forever.</p><p><b>Batching uses the same slack.</b> A server that already decodes 16 "
    "requests at once has filled the arithmetic units with the batch, so its curve bends much earlier and "
    "verification stops being free: serving stacks tune speculation and batching together.</p></div>"
)


# ------------------------------------------------------------------------------------------------ figures


def _layout(height: int) -> dict:
    return {"template": "plotly_white", "font": {"family": FONT, "size": 12}, "height": height,
            "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 80, "b": 50}, "modebar": MODEBAR,
            "legend": {"orientation": "h", "x": 0, "y": 1.09, "yanchor": "bottom", "font": {"size": 12}}}


NOTE_LINE_PX = 15  # one line of an 11 px note below the charts (_note_below)
NOTE_GAP_PX = 6  # below each such note


def _note_below(layout: dict, axis: str, text: str, color: str) -> None:
    """Put ``text`` (lines split by ``<br>``, each short enough for a phone-wide chart) under the charts, never on a
    plot where it could cover data: below the panel ``axis`` (the lowest; on a phone, where ``assets/head.html``
    stacks the panels, the last one), from the figure's left edge, where the bottom margin (the tick labels and the
    axis title) ends. The margin and the height grow by the note's lines, so the plots keep their size and a later
    note goes under the earlier ones."""
    top = layout["margin"]["b"]
    layout["annotations"].append({
        "text": text, "align": "left", "x": 0, "xref": "paper", "xanchor": "left", "y": 0,
        "yref": f"y{axis} domain", "yanchor": "top", "yshift": -top, "showarrow": False,
        "font": {"size": 11, "color": color}})
    grown = (text.count("<br>") + 1) * NOTE_LINE_PX + NOTE_GAP_PX
    layout["margin"]["b"] = top + grown
    layout["height"] += grown


def _two_panels(layout: dict, titles: tuple[str, str], gap: float = 0.1) -> list[tuple[str, float, float]]:
    """Put two side-by-side axes into ``layout``; returns (axis suffix, x0, x1) per panel."""
    width = (1 - gap) / 2
    panels, notes = [], []
    for i, title in enumerate(titles):
        n = "" if i == 0 else "2"
        x0 = i * (width + gap)
        layout[f"xaxis{n}"] = {"domain": [x0, x0 + width], "anchor": f"y{n}", "automargin": True}
        layout[f"yaxis{n}"] = {"domain": [0, 1], "anchor": f"x{n}", "automargin": True}
        notes.append({"text": f"<b>{title}</b>", "x": x0 + width / 2, "y": 1, "xref": "paper", "yref": "paper",
                      "xanchor": "center", "yanchor": "bottom", "yshift": 6, "showarrow": False,
                      "font": {"size": 14}})
        panels.append((n, x0, x0 + width))
    layout["annotations"] = notes
    return panels


def forward_figure(grid: dict) -> go.Figure:
    """Left: ms of one target forward against new tokens n, one line per batch size. Right: T(n)/T(1) of each
    batch size on log-log axes beside the diagonal of n separate steps (flat = free, diagonal = no gain)."""
    layout = _layout(440)
    (a, _, _), (b, _, _) = _two_panels(layout, ("Target forward time vs new tokens",
                                                "Cost of n tokens, in one-token steps"))
    counts = grid["token_counts"]
    ticks = {"tickvals": counts, "ticktext": [str(n) for n in counts]}
    layout[f"xaxis{a}"] |= {"type": "log", "title": {"text": "new tokens n (k+1 to verify k)", "font": {"size": 12}},
                            **ticks}
    layout[f"yaxis{a}"] |= {"title": {"text": "ms per forward"}, "rangemode": "tozero"}
    layout[f"xaxis{b}"] |= {"type": "log", "title": {"text": "new tokens n"}, **ticks}
    layout[f"yaxis{b}"] |= {"type": "log", "title": {"text": "T(n) / T(1)"}, "tickvals": [0.5, 1, 2, 4, 8, 16, 32],
                            "ticktext": ["0.5", "1", "2", "4", "8", "16", "32"]}
    data = []
    bad = {(p["batch"], p["n"]) for p in grid.get("impossible", [])}
    for batch, row in grid["ms"].items():
        ns = [n for n in counts if n in row]
        if not ns:
            continue
        color = BATCH_COLORS.get(int(batch), COLORS["other"])
        gbs, spread = grid["gbs"][batch], grid.get("spread", {}).get(batch, {})
        text = [f"batch {batch}, {n} new token{'s' if n > 1 else ''}: {row[n]:.1f} ms"
                + (f" (repeats {spread[n][0]:.1f}–{spread[n][1]:.1f})" if n in spread else "") + "<br>"
                f"{grid['param_bytes'] / 1e6:.0f} MB of weights read → {gbs[n]:.1f} GB/s effective" for n in ns]
        name = f"batch {batch}"
        shown = [None if (batch, n) in bad else row[n] for n in ns]  # an impossible point is no finding: a gap
        data.append({"type": "scatter", "mode": "lines+markers", "x": ns, "y": shown, "name": name,
                     "legendgroup": name, "line": {"color": color, "width": 3}, "marker": {"size": 7},
                     "error_y": _spread_bars(row, spread, ns, color),
                     "text": text, "hovertemplate": "%{text}<extra></extra>", "xaxis": f"x{a}", "yaxis": f"y{a}"})
        one = row.get(ns[0])
        data.append({"type": "scatter", "mode": "lines+markers", "x": ns,
                     "y": [None if v is None else v / one for v in shown],
                     "name": name, "legendgroup": name, "showlegend": False, "line": {"color": color, "width": 3},
                     "marker": {"size": 7},
                     "hovertemplate": f"batch {batch}, n=%{{x}}: %{{y:.2f}} steps<extra></extra>",
                     "xaxis": f"x{b}", "yaxis": f"y{b}"})
    data.append({"type": "scatter", "mode": "lines", "x": counts, "y": counts, "name": "n separate one-token steps",
                 "line": {"color": COLORS["baseline"], "dash": "dot", "width": 2}, "xaxis": f"x{b}", "yaxis": f"y{b}",
                 "hovertemplate": "n steps: %{y}<extra></extra>"})
    _flag_impossible(grid, data, layout, a, b)
    _flag_within_noise(grid, data, layout, (a, b))
    return go.Figure({"data": data, "layout": layout})


def _spread_bars(row: dict, spread: dict, ns: list[int], color: str) -> dict:
    """Plotly error bars from the median up to the slowest repeat and down to the fastest (the spread)."""
    if not spread:
        return {"visible": False}
    return {"type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 4,
            "array": [spread[n][1] - row[n] if n in spread else 0 for n in ns],
            "arrayminus": [row[n] - spread[n][0] if n in spread else 0 for n in ns]}


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


def _flag_impossible(grid: dict, data: list[dict], layout: dict, axis: str, below: str) -> None:
    """Mark the impossible points (red ✕ at their measured time on the panel ``axis``, no line through them) and
    say so in a note under the charts (:func:`_note_below` the panel ``below``)."""
    points = [p for p in grid.get("impossible", []) if p["n"] in grid["ms"].get(p["batch"], {})]
    if not points:
        return
    data.append({"type": "scatter", "mode": "markers", "name": "impossible: noise, not a finding",
                 "x": [p["n"] for p in points], "y": [grid["ms"][p["batch"]][p["n"]] for p in points],
                 "marker": {"symbol": "x-thin", "size": 13, "line": {"color": COLORS["rejected"], "width": 3},
                            "color": COLORS["rejected"]},
                 "text": [f"batch {p['batch']}, n = {p['n']}: faster than batch {p['than_batch']}, n = "
                          f"{p['than_n']}: impossible, measured {_times(times_measured(grid))}" for p in points],
                 "hovertemplate": "%{text}<extra></extra>", "xaxis": f"x{axis}", "yaxis": f"y{axis}"})
    _note_below(layout, below, f"✕ {render.plural(len(points), 'point')} faster than less work:<br>noise "
                f"(measured {_times(times_measured(grid))}),<br>not a finding", COLORS["rejected"])


WITHIN_NOISE = "within noise of impossible"
"""The legend's name of the points :func:`within_noise_points` finds (short: one line of a phone's legend; the
chart's note and the hover say why it is no finding)."""


def within_noise_points(grid: dict) -> list[dict]:
    """The grid's points measured below a smaller workload but not flagged impossible (inside the margin of
    :func:`specviz.analysis.arena.impossible_points`, or their repeats overlap): within noise of impossible
    (:func:`specviz.analysis.arena.below_less_work`; entries ``{"batch", "n", "than_batch", "than_n", "below"}``)."""
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


def _within_noise_note(points: list[dict]) -> str:
    """The chart's note on the ringed points, naming the condition that applied to each (:func:`inside_margin`),
    in short lines (at most about 33 characters) that fit a phone-wide chart."""
    margin = sum(inside_margin(p) for p in points)
    overlap = len(points) - margin
    head = f"○ {render.plural(len(points), 'point')} below less work"
    if not overlap:
        why = f",<br>inside the {IMPOSSIBLE_MARGIN:.0%} noise margin"
    elif not margin:
        why = ",<br>with overlapping repeats"
    else:
        why = f"<br>({margin} inside the {IMPOSSIBLE_MARGIN:.0%} margin,<br>{overlap} with overlapping repeats)"
    return f"{head}{why}:<br>within noise of impossible,<br>not a finding"


def _flag_within_noise(grid: dict, data: list[dict], layout: dict, axes: tuple[str, str]) -> None:
    """Ring the points within noise of impossible (:func:`within_noise_points`) on both panels (left: ms; right:
    T(n)/T(1) of their batch) and say so in a note under the charts (:func:`_note_below` the right panel, the
    lowest on a phone): they stay on the lines, but are no finding."""
    points = [p for p in within_noise_points(grid) if p["n"] in grid["ms"].get(p["batch"], {})]
    if not points:
        return
    a, b = axes
    text = [f"batch {p['batch']}, n = {p['n']}: {p['below']:.1%} below batch {p['than_batch']}, n = {p['than_n']} "
            f"({_why_not_flagged(p)}): within noise of impossible" for p in points]
    ring = {"symbol": "circle-open", "size": 17, "color": "#24292f", "line": {"width": 2}}
    data.append({"type": "scatter", "mode": "markers", "name": WITHIN_NOISE, "legendgroup": "within-noise",
                 "x": [p["n"] for p in points], "y": [grid["ms"][p["batch"]][p["n"]] for p in points],
                 "marker": ring, "text": text, "hovertemplate": "%{text}<extra></extra>", "xaxis": f"x{a}",
                 "yaxis": f"y{a}"})
    one = {p["batch"]: grid["ms"][p["batch"]][min(grid["ms"][p["batch"]])] for p in points}
    data.append({"type": "scatter", "mode": "markers", "name": WITHIN_NOISE, "legendgroup": "within-noise",
                 "showlegend": False, "x": [p["n"] for p in points],
                 "y": [grid["ms"][p["batch"]][p["n"]] / one[p["batch"]] for p in points], "marker": ring,
                 "text": text, "hovertemplate": "%{text}<extra></extra>", "xaxis": f"x{b}", "yaxis": f"y{b}"})
    _note_below(layout, b, _within_noise_note(points), "#24292f")


def noisy_measured(curves: dict) -> bool:
    """Whether the measured-cost speedup beats the paper's anywhere (by over 1 %): the paper's curve counts a
    verification as one step, so this happens only where a forward over k+1 tokens was timed below a one-token step,
    which no machine does (noise)."""
    measured = curves.get("measured") or []
    return any(m > p * 1.01 for m, p in zip(measured, curves["paper"]))


def whatif_figure(curves: dict, run: dict | None = None, batch: int = 1) -> go.Figure:
    """Left: expected tokens per pass against k at the chosen α (and the k+1 ceiling). Right: predicted speedup,
    the paper's (a verification costs one step) and, when measured, with the measured verification cost
    T(k+1) at ``batch``. ``run`` ({"k", "tokens_per_pass", "speedup"}) is marked on both."""
    layout = _layout(430)
    (a, _, _), (b, _, _) = _two_panels(layout, ("Expected tokens per target pass", "Predicted speedup"))
    ks = curves["k"]
    for axis in (a, b):
        layout[f"xaxis{axis}"] |= {"title": {"text": "draft length k"}, "dtick": 1 if len(ks) <= 16 else 2,
                                   "range": [0.5, ks[-1] + 0.5]}
    layout[f"yaxis{a}"] |= {"title": {"text": "tokens / pass"}, "rangemode": "tozero"}
    layout[f"yaxis{b}"] |= {"title": {"text": "× standard decoding"}, "rangemode": "tozero"}
    tau = curves["tokens_per_pass"]
    data = [
        {"type": "scatter", "mode": "lines+markers", "x": ks, "y": tau, "name": "expected tokens per pass",
         "line": {"color": COLORS["expected"], "width": 3}, "marker": {"size": 6}, "xaxis": f"x{a}",
         "yaxis": f"y{a}", "hovertemplate": "k=%{x}: %{y:.2f} tokens/pass<extra></extra>"},
        {"type": "scatter", "mode": "lines", "x": ks, "y": [k + 1 for k in ks], "name": "k+1 (every draft accepted)",
         "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}, "xaxis": f"x{a}", "yaxis": f"y{a}",
         "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines+markers", "x": ks, "y": curves["paper"],
         "name": "speedup, paper (verification = 1 step)", "line": {"color": COLORS["speculative"], "width": 3},
         "marker": {"size": 6}, "xaxis": f"x{b}", "yaxis": f"y{b}",
         "hovertemplate": "k=%{x}: %{y:.2f}× (paper)<extra></extra>"},
    ]
    if curves.get("measured"):
        data.append({"type": "scatter", "mode": "lines+markers", "x": ks, "y": curves["measured"],
                     "name": f"speedup with the measured T(k+1), batch {batch}",
                     "line": {"color": COLORS["rejected"], "width": 3, "dash": "dash"}, "marker": {"size": 6},
                     "xaxis": f"x{b}", "yaxis": f"y{b}",
                     "hovertemplate": "k=%{x}: %{y:.2f}× (measured costs)<extra></extra>"})
    best = [f"Best k, {name}: k = {ks[max(range(len(ks)), key=lambda i: series[i])]} ({max(series):.2f}×)"
            for series, name in ((curves["paper"], "paper"), (curves.get("measured"), "measured costs")) if series]
    if noisy_measured(curves):  # a verification timed below a step: the measured curve is no finding
        best = best[:1] + ["Measured costs: too noisy to tell a best k (a verification timed below a one-token step)"]
    if not curves.get("measured"):
        best.append("Press <b>Measure</b> for the curve with<br>measured verification costs")  # fits 400 px
    _note_below(layout, b, "<br>".join(best), COLORS["baseline"])  # under the charts: a rising curve ends top right
    ceiling = max(tau + [2.0] + ([run["tokens_per_pass"]] if run and run.get("tokens_per_pass") else []))
    layout[f"yaxis{a}"]["range"] = [0, ceiling * 1.25]  # the k+1 line may leave the chart: E[tau] saturates
    inside = [k for k in ks if k + 1 <= ceiling * 1.25]
    if inside and inside[-1] < ks[-1]:  # say where the ceiling line goes on, above the chart
        layout["annotations"].append({
            "text": f"k+1 goes on up (to {ks[-1] + 1} at k = {ks[-1]})", "x": inside[-1], "y": inside[-1] + 1,
            "xref": f"x{a}", "yref": f"y{a}", "xanchor": "left", "yanchor": "middle", "ax": 24, "ay": 0,
            "showarrow": False, "xshift": 6, "font": {"size": 11, "color": COLORS["baseline"]}})
    data.append({"type": "scatter", "mode": "lines", "x": [ks[0], ks[-1]], "y": [1, 1], "xaxis": f"x{b}",
                 "yaxis": f"y{b}", "name": "standard decoding (1×)",
                 "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}, "hoverinfo": "skip"})
    if run and run.get("k") and run.get("tokens_per_pass"):
        label = run.get("label") or "your run"
        marker = {"symbol": "star", "size": 18, "color": COLORS["accepted"], "line": {"color": "#ffffff", "width": 1}}
        data.append({"type": "scatter", "mode": "markers", "x": [run["k"]], "y": [run["tokens_per_pass"]],
                     "name": label, "legendgroup": "run", "marker": marker, "xaxis": f"x{a}", "yaxis": f"y{a}",
                     "hovertemplate": f"{html.escape(label)}: k=%{{x}}, %{{y:.2f}} tokens/pass<extra></extra>"})
        if run.get("speedup"):
            data.append({"type": "scatter", "mode": "markers", "x": [run["k"]], "y": [run["speedup"]], "name": label,
                         "legendgroup": "run", "showlegend": False, "marker": marker, "xaxis": f"x{b}",
                         "yaxis": f"y{b}",
                         "hovertemplate": f"{html.escape(label)}: k=%{{x}}, %{{y:.2f}}× measured<extra></extra>"})
    layout["legend"] |= {"y": 1.1, "entrywidth": 0.5, "entrywidthmode": "fraction"}  # long names: two a row
    layout["title"] = {"text": f"α = {curves['alpha']:.2f}, c = {curves['c']:.3f}", "x": 0.5, "xanchor": "center",
                       "y": 0.995, "yanchor": "top", "font": {"size": 13}}
    layout["margin"]["t"] = 120
    return go.Figure({"data": data, "layout": layout})


def lookahead_settings(history: list[RunSummary] | None = None) -> list[tuple[int, int, int]]:
    """The (W, N, G) of lookahead passes to cost: the newest Live lookahead run's (its history row's
    :attr:`~app.records.RunSummary.lookahead`), then the defaults when they differ."""
    out = [row.lookahead for row in history or [] if row.lookahead is not None][:1]
    default = (DEFAULT_WINDOW, DEFAULT_NGRAM, DEFAULT_CANDIDATES)
    return out + ([default] if default not in out else [])


def _lookahead_cards(grid: dict, batch: int, settings, latest: bool) -> list[tuple[str, str, str]]:
    """(label, value, note) per lookahead setting: its full pass's forward against a one-token step, read from the
    ``batch`` curve of ``grid`` without its impossible points (:func:`specviz.analysis.arena.lookahead_pass_cost`),
    with the range of the same ratio over the repeats (:func:`_ratio_spread`). ``latest``: the first setting is
    the newest Live run's."""
    curve = possible_curve(grid, batch)
    cards = []
    for i, (w, n, g) in enumerate(settings):
        if 1 not in curve or len(curve) < 2:
            break
        cost = lookahead_pass_cost(curve, w, n, g)
        how = "measured" if cost["measured"] else "extrapolated" if cost["extrapolated"] else "interpolated"
        whose = "your latest Live run" if latest and i == 0 else "the default"
        label = f"Lookahead pass (W={w}, N={n}, G={g})"
        head = f"{whose}: 1 + W(N−1) + G(N−1) = {cost['tokens']} tokens in one forward, T({cost['tokens']})/T(1) ({how})"
        read = cost_reading(grid, batch, cost["tokens"], cost["ratio"])
        if not read.finding:  # more tokens timed cheaper than one, or repeats far apart across one step: noise
            cards.append(_noisy_card(label, read, head))
            continue
        cards.append((label, f"{cost['ratio']:.2f} <small>steps</small>",
                      f"{head}{ONE_STEP if read.word == SAME else ''}; it pays only above {cost['ratio']:.2f} "
                      "tokens per pass" + _ratio_spread(grid, batch, cost["tokens"])))
    return cards


ONE_STEP = " (the same as one step within noise: the flat part of the curve)"
"""Said of a cost ratio whose repeats straddle 1 narrowly (the rule's "about the same")."""


def cost_reading(grid: dict, batch: int, n: float, cost: float) -> Verdict:
    """A cost ratio T(n)/T(1) at ``batch`` read by the rule every tab uses (:func:`specviz.core.verdict.read_speedup`)
    on its per-repeat ratios (:func:`round_ratios`; the ratio alone without them): every repeat above 1 is a cost
    ("faster" in the rule's words: more than one step), repeats across 1 and close together the same as one step
    ("about the same": the flat part of the curve), every repeat below 1 impossible (more tokens timed cheaper than
    one) and repeats across 1 far apart too noisy to tell."""
    ratios = round_ratios(grid, batch, n) or [cost]
    low, high = min(min(ratios), cost), max(max(ratios), cost)
    return read_speedup(cost, low, high, impossible="more tokens timed cheaper than one" if high < 1 else None)


def _noisy_card(label: str, read: Verdict, what: str) -> tuple[str, str, str]:
    """A cost card whose ratio is no finding (:func:`cost_reading`): the number kept, and why."""
    if read.high < 1:
        why = ("a forward over more tokens cannot take less time than over one, so this is noise from other work on "
               "the machine")
    else:
        why = f"its repeats fall on both sides of one step and far apart ({read.low:.2f}–{read.high:.2f})"
    return (label, f"{read.value:.2f} <small>steps: too noisy to tell</small>",
            f"{what} measured {read.value:.2f}: {why}; measure again when it is quieter")


def round_ratios(grid: dict, batch: int, n: float) -> list[float]:
    """T(n)/T(1) at ``batch`` once per repeat: repeat i of every token count was timed in the same round
    (:func:`specviz.analysis.arena.measure_forward_grid`'s ``"samples"``), so each round gives its own curve, read at
    ``n`` as the medians are (:func:`specviz.analysis.arena.interpolate` between measured counts; points flagged
    impossible left out). [] without per-repeat samples or without T(1)."""
    samples = grid.get("samples", {}).get(batch, {})
    bad = {p["n"] for p in grid.get("impossible", []) if p["batch"] == batch}
    kept = {m: t for m, t in samples.items() if m not in bad and t}
    if 1 not in kept or len(kept) < 2:
        return []
    rounds = min(len(t) for t in kept.values())
    curves = [{m: t[i] for m, t in kept.items()} for i in range(rounds)]
    return [interpolate(curve, n) / curve[1] for curve in curves if curve[1] > 0]


def _ratio_spread(grid: dict, batch: int, n: float) -> str:
    """"; repeats a–b" for T(n)/T(1) at ``batch``: the lowest and highest of the per-repeat ratios
    (:func:`round_ratios`); "; one repeat: no spread" with a single repeat, "" without per-repeat samples."""
    ratios = round_ratios(grid, batch, n)
    if len(ratios) == 1:
        return "; one repeat: no spread"
    return f"; repeats {min(ratios):.2f}–{max(ratios):.2f}" if ratios else ""


def summary_html(grid: dict, costs: dict | None, lookahead=()) -> str:
    """Cards: weights read per forward, the one-token step and its GB/s, the copy bandwidth, the cost of a
    k=4 verification at batch 1 and the largest batch, the measured c of the drafters, and a full lookahead pass's
    cost for each (W, N, G) of ``lookahead`` (:func:`lookahead_settings`)."""
    ms = {b: possible_curve(grid, b) for b in grid["ms"]}
    first, last = min(ms), max(ms)
    step = ms[first].get(1)
    spread = grid.get("spread", {}).get(first, {}).get(1)
    cards = [("Weights read per forward", f"{grid['param_bytes'] / 1e6:,.0f} <small>MB</small>",
              "every parameter once, whatever the number of tokens")]
    if grid.get("impossible"):
        cards.insert(0, ("Impossible points", f"{len(grid['impossible'])} <small>flagged ✕</small>",
                         "faster than less work even when measured again: noise, left out of every figure here"))
    if step:
        cards.append(("One-token step (batch 1)", f"{step:.1f} <small>ms</small>",
                      f"= {grid['param_bytes'] / (step / 1000) / 1e9:.1f} GB/s of weights (effective)"
                      + (f"; repeats {spread[0]:.1f}–{spread[1]:.1f} ms" if spread else "")))
    if grid.get("copy_bandwidth_gbs"):
        cards.append(("Memory copy bandwidth", f"{grid['copy_bandwidth_gbs']:.1f} <small>GB/s</small>",
                      "read + written by a large tensor copy: the ceiling for reading weights"))
    for batch in dict.fromkeys((first, last)):
        row = ms[batch]
        if 1 in row and len(row) > 1:
            cost = interpolate(row, 5) / row[1]
            read = cost_reading(grid, batch, 5, cost)
            if not read.finding:
                cards.append(_noisy_card(f"Verifying k=4 (batch {batch})", read, "T(5)/T(1)"))
                continue
            cards.append((f"Verifying k=4 (batch {batch})", f"{cost:.2f} <small>steps</small>",
                          f"T(5)/T(1): 5 tokens for the price of {cost:.2f}{ONE_STEP if read.word == SAME else ''}"
                          + _ratio_spread(grid, batch, 5)))
    if costs:
        layer = int(costs.get("early_exit_layer", 0))
        span = costs.get("early-exit_range")
        cards.append(("Draft cost c", f"{costs['early-exit']:.2f} <small>early exit</small>",
                      f"first {layer} layers, 1 token ÷ a target step"
                      + (f"; repeats {span[0]:.2f}–{span[1]:.2f}" if span else "")
                      + f"; n-gram lookup: {costs['ngram']:.4f}"))
    cards += _lookahead_cards(grid, first, lookahead, latest=len(lookahead) > 1)
    body = "".join(f"<div class='card'><div class='card-label'>{html.escape(label)}</div>"
                   f"<div class='card-value'>{value}</div><div class='card-def'>{html.escape(note)}</div></div>"
                   for label, value, note in cards)
    return f"<div class='stats why-cards'>{body}</div>"


# ------------------------------------------------------------------------------------------------ handlers


def _number(text) -> float | None:
    """A run box's text as a finite number, or None ("", "abc", "nan", "inf")."""
    try:
        value = float(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


RUN_BOXES = ("k", "tokens_per_pass", "speedup")
"""The run boxes, in order (:func:`run_issues` names its problems by them)."""


def run_issues(k, tokens_per_pass, speedup) -> tuple[bool, dict[str, str]]:
    """Check the typed run (the boxes' text) against what a run can give: k a whole number in 1..MAX_K, tokens per
    pass in [1, k + 1] (each pass emits at least the target's own token, at most k drafts + the bonus token), a
    speedup above 0. Returns (whether the run is marked, {box of :data:`RUN_BOXES`: one sentence that says what is
    wrong and what happens: the run is not marked, or its speedup is left out}). An empty box is no problem
    (:func:`_blank`; an empty k or tokens per pass: nothing marked yet)."""
    blank = _blank(k) or _blank(tokens_per_pass)  # not typed yet: nothing marked, nothing wrong
    problems = {} if blank else _run_problems(k, tokens_per_pass)
    sp = _number(speedup)
    if not _blank(speedup) and not (sp and sp > 0):
        problems["speedup"] = f"Speedup must be a number above 0 (got “{speedup}”): the run's speedup is left out."
    return not blank and not {"k", "tokens_per_pass"} & problems.keys(), problems


def _run_problems(k, tokens_per_pass) -> dict[str, str]:
    """The problem of a typed k and tokens per pass (both boxes filled), at most one: {box: sentence}."""
    k_value, tau = _number(k), _number(tokens_per_pass)
    if k_value is None or not k_value.is_integer() or not 1 <= k_value <= MAX_K:
        return {"k": f"Run: k must be a whole number from 1 to {MAX_K} (got “{k}”): the run is not marked."}
    if tau is None:
        return {"tokens_per_pass": f"Tokens per pass must be a number (got “{tokens_per_pass}”): the run is not "
                                   "marked."}
    if not 1 <= tau <= k_value + 1:
        return {"tokens_per_pass": (
            f"Tokens per pass at k = {k_value:g} lies between 1 (nothing accepted) and {k_value + 1:g} (all k drafts "
            f"accepted + the bonus token), not {tau:g}: the run is not marked.")}
    return {}


def _blank(text) -> bool:
    """A run box with nothing typed: empty, or the "—" it shows until a run fills it."""
    return str(text if text is not None else "").strip() in ("", RUN_BOX_EMPTY)


def run_point(k, tokens_per_pass, speedup, label: str = "your run") -> dict | None:
    """The run to mark, or None when its k or tokens per pass is missing or not what a run can give
    (:func:`run_issues`; the boxes are text: "", "4", "1.6"); a speedup that is missing, not above 0 or not a
    number is left unmarked."""
    marked, _ = run_issues(k, tokens_per_pass, speedup)
    if not marked:
        return None
    sp = _number(speedup)
    return {"k": float(k), "tokens_per_pass": float(tokens_per_pass), "speedup": sp if sp and sp > 0 else None,
            "label": label}


RUN_PROBLEM_ENDINGS = ("the run is not marked.", "the run's speedup is left out.")
"""How every sentence of :func:`run_issues` ends: a status line that holds one is about the typed run."""


def check_run(box: str, k, tokens_per_pass, speedup, shown: str | None = None) -> str | object:
    """When the run box ``box`` (of :data:`RUN_BOXES`) is left: a warning toast for the typed run's problem in that
    box (:func:`run_issues`), and a status line that names every problem the run has now, each saying whether the
    run is marked. Once the run has none, a status that still shows an earlier problem (``shown``: the status's
    HTML) turns into what is marked; any other status stays (a skip), as it does when nothing is typed."""
    marked, problems = run_issues(k, tokens_per_pass, speedup)
    if box in problems:
        warn(problems[box])
    if problems:
        return render.status_html(" ".join(problems.values()), "info")
    if marked and any(end in html.unescape(str(shown or "")) for end in RUN_PROBLEM_ENDINGS):
        point = run_point(k, tokens_per_pass, speedup)
        what = f"k = {point['k']:g}, {point['tokens_per_pass']:g} tokens per pass"
        what += f", {point['speedup']:g}× speedup" if point["speedup"] else ""
        return render.status_html(f"Your run is marked on the what-if chart ({what}).", "info")
    return gr.skip()


def whatif(alpha, c, batch, run_k, run_tpp, run_speedup, measurement, kept: dict | None = None) -> go.Figure:
    """The what-if chart for the sliders, the measured curve at ``batch`` (if measured) and the run to mark. The
    sliders' values may be raw payloads, typed out of range: α is taken within [0, 1] and c within [0, MAX_C], as the
    sliders clamp them; one that is no number (an emptied box: None, or "abc") is drawn at its last number,
    ``kept`` (:func:`slider_typed`'s state, {"alpha", "c"}; the defaults without it), which :func:`slider_typed`
    puts back into the box when it is left."""
    kept = kept or KEPT
    alpha = min(max(_or_kept(alpha, kept["alpha"]), 0.0), 1.0)
    c = min(max(_or_kept(c, kept["c"]), 0.0), MAX_C)
    curve = None
    if measurement:
        ms = measurement["grid"]["ms"]
        batch = int(batch) if batch and int(batch) in ms else min(ms)
        possible = possible_curve(measurement["grid"], batch)
        curve = possible if len(possible) > 1 else None
    curves = whatif_curves(alpha, c, curve, MAX_K)
    return whatif_figure(curves, run_point(run_k, run_tpp, run_speedup), int(batch or 1))


def _or_kept(value, kept: float) -> float:
    """A slider's raw payload as a number, or ``kept`` when it is none (:func:`_number`)."""
    number = _number(value)
    return kept if number is None else number


SLIDERS = {"alpha": ("Per-token acceptance α", 0.0, 1.0), "c": ("Draft cost c", 0.0, MAX_C)}
"""The what-if sliders: key → (name in messages, low, high)."""
KEPT = {"alpha": DEFAULT_ALPHA, "c": DEFAULT_C}
"""The sliders' last numbers before anything is typed (:func:`slider_typed`'s state starts here)."""


def slider_typed(key: str, value, kept: dict | None, left: bool = True) -> tuple:
    """What a what-if slider's box holds, said when the chart cannot use it as typed; the handler of its ``input``
    (while typing, ``left`` False) and ``release`` (the box left, or Enter in an empty box: :data:`ENTER_EMPTY_JS`)
    events, on the raw payload (preprocess off).

    Args:
        key: "alpha" or "c" (:data:`SLIDERS`).
        value: the box's payload: a number, or None for an emptied box (a number box shows "abc" as empty), or any
            text from the API.
        kept: the state {"alpha", "c"}: each slider's last number (None: :data:`KEPT`).
        left: whether the box was left; while typing, an empty box is a number on its way and is left alone.

    Returns:
        (slider, status, kept): a number in range: (skip, skip, kept with it); out of range: the slider set to the
        nearest end, one sentence ("Draft cost c is at most 2 here; using 2.": :func:`app.inputs.clamp_notice`) as a
        toast and the status, and that end kept; no number, once left: the slider set back to its kept number and
        "Draft cost c must be a number from 0 to 2; keeping 0.05." (the chart, :func:`whatif`, already draws the
        kept number); no number while typing: three skips.
    """
    name, low, high = SLIDERS[key]
    kept = dict(kept or KEPT)
    number = _number(value)
    if number is None:
        if not left:
            return gr.skip(), gr.skip(), gr.skip()
        message = f"{name} must be a number from {low:g} to {high:g}; keeping {kept[key]:g}."
    else:
        found = clamp_notice(number, name, low, high)
        if found is None:
            return gr.skip(), gr.skip(), {**kept, key: number}
        kept[key], message = found
    gr.Info(html.escape(message))
    return gr.update(value=kept[key]), render.status_html(message, "info"), kept


def remember(alpha, c, kept: dict | None) -> dict:
    """The state of :func:`slider_typed` after a handler set the sliders (Measure sets c, a Live run sets α): their
    numbers now (a payload that is no number keeps the kept one)."""
    kept = kept or KEPT
    return {"alpha": _or_kept(alpha, kept["alpha"]), "c": _or_kept(c, kept["c"])}


def latest_run(history: list[RunSummary] | None) -> dict | None:
    """The newest Live-tab run with a drafter and a k it started from (:attr:`~app.records.RunSummary.start_k`: not
    k = auto) that measured its tokens per pass: {"k", "tokens_per_pass", "speedup", "adaptive", "drafter"}."""
    for row in history or []:
        if row.start_k is not None and row.tokens_per_pass:
            return {"k": row.start_k, "tokens_per_pass": float(row.tokens_per_pass), "speedup": row.speedup,
                    "adaptive": row.adaptive, "drafter": row.drafter}
    return None


def from_history(history, c=DEFAULT_C, batch=1, measurement=None):
    """When the Live tab's history changes: mark its newest run, set α to the value that gives that run's tokens
    per pass at its k, and redraw (an adaptive-k run whose tokens per pass exceed its starting k + 1 is marked at the
    smallest k that gives them, so the run boxes' check, :func:`run_issues`, holds). Returns (run k, tokens/pass,
    speedup, α, what-if figure)."""
    run = latest_run(history)
    if run is None:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    k, tpp = run["k"], round(run["tokens_per_pass"], 3)
    if run["adaptive"] and tpp > k + 1:  # adaptive k drafted longer than its start: the smallest k that gives it
        k = min(MAX_K, math.ceil(tpp - 1))
    alpha = round(alpha_for_tokens_per_pass(tpp, k), 2)
    speedup = round(run["speedup"], 3) if run["speedup"] else None  # a run whose speedup was not judged: — stays
    return k, tpp, speedup, alpha, whatif(alpha, c, batch, k, tpp, speedup, measurement)


def _out(status=None, chart=None, summary=None, state=None, c=None, batch=None, whatif_fig=None) -> tuple:
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is (the chart shows when given)."""
    chart = None if chart is None else gr.update(value=chart, visible=True)
    return tuple(gr.skip() if v is None else v for v in (status, chart, summary, state, c, batch, whatif_fig))


def _measure_inputs(target, exit_layer) -> tuple[str, int | None]:
    """(target spec, early-exit layer or None for half the layers). Raises InputError, or PolicyError for a
    model the operator does not allow."""
    spec = (target or "").strip()
    if not spec:
        raise InputError("Give a target model: 'embedded', a hub id or a local folder.")
    check_models(spec, None, current_policy())  # the operator's model policy (specviz.policy)
    return spec, parse_exit_layer(exit_layer)


def measure(target, exit_layer, alpha, run_k, run_tpp, run_speedup, history=None, progress=gr.Progress(),
            request: gr.Request = None):
    """The Measure button: the forward-time grid (batch sizes x new tokens) and the drafters' c on the target,
    on the device; yields :data:`OUTPUTS` tuples. ``history`` (the Live tab's runs) names the lookahead settings
    whose pass cost the cards show (:func:`lookahead_settings`)."""
    try:
        spec, layer = _measure_inputs(target, exit_layer)
    except (InputError, PolicyError) as error:
        warn(str(error))
        yield _out(status=render.status_html(str(error), "error"))
        return
    job = device.start(RUNS, request, f"the forward-time curve is being measured on '{spec}'")
    started, cpu = time.monotonic(), CpuShare()
    try:
        yield _out(status=render.status_html("Measuring…", "busy"))
        measurement = yield from _measure_on_device(job, spec, layer, progress, started)
        if measurement is None:
            yield _out(status=render.status_html("Stopped.", "info"))
            return
        yield _measured(measurement, time.monotonic() - started, alpha, run_k, run_tpp, run_speedup,
                        lookahead_settings(history), cpu=cpu)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message
        yield _out(status=report("measurement", error))
    finally:
        job.release()  # also when Gradio closes this handler: the grid stops before its next forward


def _measure_on_device(job: Job, spec: str, layer: int | None, progress, started: float):
    """Wait for the device, then run :func:`_measure_work` in the job's thread, feeding the progress bar and a
    "Measuring…" status about every :data:`STATUS_INTERVAL_S` seconds; returns the measurement (None when
    stopped while waiting)."""
    state = {"message": "", "last": 0.0, "estimate": None, "note": ""}

    def waiting(place) -> tuple:
        return _out(status=render.status_html(f"Waiting for the device… ({place.holder or 'another run holds it'})",
                                              "wait"))

    def show(item) -> tuple | None:
        now = time.monotonic()
        if item is not None and item[0] == "estimate":  # the first forward's timing: the whole measurement's length
            state["estimate"], state["last"] = item[1], 0.0
        elif item is not None and item[0] == "note":  # the early-exit layer was fitted to the target: a toast, and
            warn(item[1])  # the status says it until the end
            state["note"], state["last"] = f" {item[1]}", 0.0
        elif item is not None:  # ("progress", (fraction, message)): gr.Progress works in the handler's thread only
            fraction, state["message"] = item[1]
            progress(fraction, desc=state["message"])
            return None
        if now - state["last"] < STATUS_INTERVAL_S:
            return None
        state["last"] = now
        return _out(status=render.status_html(
            _measuring(state["message"], now - started, state["estimate"]) + state["note"], "busy"))

    if not (yield from relay(job.turn(), waiting)):
        return None
    return (yield from relay(job.call(_measure_work, job, spec, layer, stoppable=True), show))


def _measuring(message: str, seconds: float, estimate: float | None) -> str:
    """The status text while measuring: the step, the seconds so far and, once the first forwards were timed,
    the expected length of the whole measurement."""
    if estimate is None:
        return f"Measuring… {message} ({seconds:.0f} s; timing a first forward to tell how long this will take)"
    return (f"Measuring… {message} ({seconds:.0f} s of about {estimate:.0f} s, estimated from the first forwards "
            "timed here just now)")


def _measure_work(job: Job, spec: str, layer: int | None) -> dict:
    """In the job's thread: load the target, time the forward grid (stopping when the job is cancelled) and, when
    it completed, the drafters' c. An early-exit layer the loaded target lacks is fitted to its layers
    (:func:`app.inputs.fit_loaded_exit_layer`) and the note is said at once (``("note", text)`` to the job). Returns
    {"grid", "costs" (None when stopped), "label", "note" (the layer's note or None)}. Raises InputError for a
    target with no layer to exit after."""

    def say(fraction: float, message: str) -> None:
        job.say(("progress", (fraction, message)))

    say(0.0, f"Loading the target {spec}…")
    loaded = load_target(spec, progress=lambda message: say(0.0, message))
    layer, note = fit_loaded_exit_layer(layer, loaded)  # out of the target's range: its nearest layer, said
    if note:
        job.say(("note", note))
    say(0.0, "Timing a first forward…")
    probe = probe_forward_ms(loaded, (1, max(TOKEN_COUNTS)))
    job.say(("estimate", grid_seconds(probe, token_counts=TOKEN_COUNTS, batch_sizes=BATCH_SIZES) + ESTIMATE_EXTRA_S))
    grid = measure_forward_grid(loaded, token_counts=TOKEN_COUNTS, batch_sizes=BATCH_SIZES, bandwidth=True,
                                progress=lambda f, m: say(0.9 * f, m), should_stop=job.should_stop)
    costs = None
    if not grid["stopped"] and grid["step_ms"] and not job.should_stop():  # closed after the grid's last forward
        say(0.92, "Timing the drafters (c)…")
        first = min(grid["ms"])
        costs = measure_draft_costs(loaded, grid["step_ms"], exit_layer=layer,
                                    step_repeats=grid.get("samples", {}).get(first, {}).get(1, ()))
    return {"grid": grid, "costs": costs, "label": loaded.label, "note": note}


def _measured(measurement: dict, seconds: float, alpha, run_k, run_tpp, run_speedup, lookahead=(),
              cpu: CpuShare | None = None) -> tuple:
    """The outputs of a finished measurement: status, forward chart, summary cards, the state, c (set to the
    early-exit drafter's), the batch choices and the what-if chart with the measured costs."""
    grid, costs = measurement["grid"], measurement["costs"]
    c = round(costs["early-exit"], 3) if costs else None
    busy = busy_machine_warning(cpu)
    again = grid.get("remeasured") or []
    counts = grid.get("measurements") or {}
    again_text = (f" Batch size{'s' if len(again) > 1 else ''} {', '.join(map(str, again))} measured again "
             f"({', '.join(f'{b}: {_times(counts.get(b, 2))}' for b in again)}): a point came out faster than less "
             "work." if again else "")
    flagged = " ".join(t for t in (impossible_text(grid), within_noise_text(grid)) if t)
    fitted = f"{measurement['note']} " if measurement.get("note") else ""  # the early-exit layer, fitted
    status = render.status_html(
        f"{fitted}Measured in {seconds:.0f} s on {measurement['label']} ({grid['settings']['repeats']} "
        f"repeats per point, median; prompt of {grid['settings']['prompt_len']} tokens). The what-if chart now "
        f"uses these costs; c is set to the early-exit drafter's.{again_text}" + (f" {flagged}" if flagged else "")
        + (f" · {busy}" if busy else ""), "info" if flagged else "done")
    figure = whatif(alpha, c if c is not None else DEFAULT_C, 1, run_k, run_tpp, run_speedup, measurement)
    return _out(status, forward_figure(grid), summary_html(grid, costs, lookahead), measurement,
                gr.update(value=c) if c is not None else None,
                gr.update(choices=[(f"batch {b}", b) for b in grid["ms"]], value=min(grid["ms"]), interactive=True),
                figure)


STOPPED = ("Stopped: the measurement ended before its next forward, and the device is free. The chart and c of an "
           "earlier measurement stay; press Measure to time again.")


def stop(request: gr.Request = None) -> str:
    """The Stop button: flag this session's measurement (it starts no other forward; Gradio also closes its
    handler, which releases the device) and say so. Only the caller's own session is stopped (a call with no request
    at all, Python code in this process, stops the measurements started without one). Returns the status line."""
    RUNS.cancel(request)
    return render.status_html(STOPPED, "info")


def release_session(request: gr.Request = None) -> None:
    """When a browser tab closes: cancel that session's measurement (and no one else's)."""
    RUNS.cancel_session(request)


# ------------------------------------------------------------------------------------------------ layout


RUN_BOX_EMPTY = "—"  # what a run box shows until a Live run fills it (or one is typed)
RUN_HINT = ("Your latest Live run fills these (— until you run one in the Live tab); or type a run's k, tokens per "
            "pass and speedup to mark it on the chart.")


MEASURE_NOTE = (
    f"<div class='why-note'>Times one forward over n = {', '.join(map(str, TOKEN_COUNTS))} new tokens after a 64-token "
    f"prompt, for batch sizes {', '.join(map(str, BATCH_SIZES))} (median of 3, after a warm-up; the bars span the 3), "
    "on this device, now. It first times a few forwards and says how long the whole measurement will take here. A "
    "point that comes out faster than less work (impossible: noise from other work on the machine) is measured "
    f"again, and flagged ✕ if it stays impossible; one below less work by less than {IMPOSSIBLE_MARGIN:.0%} (or with "
    "repeats that overlap) is ringed ○: within noise of impossible, the two read as equal.</div>")
"""The note under the Measure button."""


def _run_boxes() -> tuple[gr.Textbox, gr.Textbox, gr.Textbox]:
    """The run to mark on the what-if chart: k, tokens per pass, speedup. Empty (showing —) with a hint until the
    Live tab's latest run fills them (:func:`from_history`) or the visitor types one: never a 0 that reads as a
    result. Text boxes, read by :func:`run_point`: Gradio's number box shows 0 for no value (its placeholder never
    shows at first)."""
    with gr.Row(elem_id="why-run"):
        boxes = tuple(gr.Textbox(None, label=label, placeholder=RUN_BOX_EMPTY, max_lines=1, elem_id=elem_id,
                                 min_width=70)
                      for label, elem_id in (("Run: k", "why-run-k"), ("tokens/pass", "why-run-tpp"),
                                             ("speedup", "why-run-speedup")))
    gr.HTML(f"<div class='why-note why-run-hint'>{RUN_HINT}</div>", elem_id="why-run-hint")
    return boxes


ENTER_EMPTY_JS = """() => {
  if (window.svWhyEnterEmpty) return;
  window.svWhyEnterEmpty = true;
  document.addEventListener('keydown', (ev) => {
    const box = ev.target;
    if (ev.key !== 'Enter' || !(box instanceof HTMLInputElement) || box.type !== 'number' || box.value !== ''
        || !box.closest('#whatif-controls')) return;
    box.dispatchEvent(new FocusEvent('blur'));
  }, true);
}"""
"""On page load: Enter in an empty what-if slider box (emptied, or holding what a number box cannot read, such as
"abc") commits it as leaving the box does, so :func:`slider_typed` puts the kept number back and says so at once. A
box holding a number is left alone: its ``input`` event already redrew the chart and clamped it (committing it
again would say a clamp twice)."""


def _tell_typed_nonsense(sliders: tuple[gr.Slider, gr.Slider], run_boxes: tuple, status: gr.HTML,
                         kept: gr.State) -> None:
    """Say typed values the what-if chart cannot use (toast + a line in ``status``), never drop them silently: a run
    box left with a value no run gives (:func:`check_run`); α or c typed out of range, already while typing (a
    number typed redraws the chart, clamped, before the box is left) and when the box is left; and a box left with
    no number, which gets its last number back (:func:`slider_typed`, which keeps the last numbers in ``kept``)."""
    for name, box in zip(RUN_BOXES, run_boxes):
        box.blur(functools.partial(check_run, name), inputs=[*run_boxes, status], outputs=[status], preprocess=False,
                 show_progress="hidden", concurrency_limit=None, api_visibility="private")
    for slider, key in zip(sliders, SLIDERS):
        for event, left in ((slider.input, False), (slider.release, True)):
            event(functools.partial(slider_typed, key, left=left), inputs=[slider, kept],
                  outputs=[slider, status, kept], preprocess=False, show_progress="hidden",
                  trigger_mode="always_last", concurrency_limit=None, api_visibility="private")
    gr.context.Context.root_block.load(None, js=ENTER_EMPTY_JS, queue=False, api_visibility="private")


def build_tab(history: gr.State | None = None, target: str = "embedded") -> None:
    """Lay out the "Why it works" tab inside the current ``gr.Tab`` and wire its events. ``history`` is the Live
    tab's run history (gr.State); its newest run is marked on the what-if chart."""
    gr.HTML(INTRO, elem_id="why-intro")
    measurement = gr.State(None)
    kept = gr.State(dict(KEPT))  # the what-if sliders' last numbers (slider_typed): an emptied box gets its back
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="why-controls"):
            target_box = gr.Textbox(target, label="Target model", elem_id="why-target",
                                    info="'embedded', a hub id or a local folder")
            exit_layer = gr.Number(0, label="Early-exit layer for c (0 = half the layers)", precision=0,
                                   elem_id="why-exit-layer")
            with gr.Row():
                measure_btn = gr.Button("Measure", variant="primary", elem_id="why-measure", scale=3)
                stop_btn = gr.Button("Stop", variant="stop", elem_id="why-stop", scale=1, min_width=80)
            gr.HTML(MEASURE_NOTE)
        with gr.Column(scale=3, min_width=600, elem_id="why-results"):
            status = gr.HTML(render.status_html("Press Measure to time the target on this device.", "info"),
                             elem_id="why-status")
            chart = gr.Plot(elem_id="why-chart", show_label=False, visible=False)
            summary = gr.HTML("", elem_id="why-summary")
    gr.HTML("<h3 class='why-heading'>What if: tokens per pass and speedup against k</h3>"
            "<div class='why-note'>E[tokens per pass] = (1 − α<sup>k+1</sup>) / (1 − α). Speedup, paper: "
            "E[tokens/pass] / (c·k + 1). Speedup with measured costs: E[tokens/pass] × T(1) / (T(k+1) + c·k·T(1)), "
            "T from the measurement above (interpolated between measured n). The star is your latest Live run "
            "(α is set to the value that gives its tokens per pass), or any run you type in.</div>",
            elem_id="why-whatif-note")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="whatif-controls"):
            alpha = gr.Slider(0, 1, value=DEFAULT_ALPHA, step=0.01, label="Per-token acceptance α",
                              elem_id="why-alpha")
            c = gr.Slider(0, MAX_C, value=DEFAULT_C, step=0.005, label="Draft cost c (one drafted token ÷ one target step)",
                          elem_id="why-c", info="n-gram ≈ 0; early exit ≈ its share of the layers; set by Measure")
            batch = gr.Radio([("batch 1", 1)], value=1, label="Measured curve of batch size", elem_id="why-batch",
                             interactive=False)
            run_k, run_tpp, run_speedup = _run_boxes()
        with gr.Column(scale=3, min_width=600):
            whatif_chart = gr.Plot(whatif(DEFAULT_ALPHA, DEFAULT_C, 1, None, None, None, None),
                                   elem_id="why-whatif-chart", show_label=False)
    measuring = measure_btn.click(measure, inputs=[target_box, exit_layer, alpha, run_k, run_tpp, run_speedup]
                      + ([history] if history is not None else []),
                      outputs=[status, chart, summary, measurement, c, batch, whatif_chart], api_name="why_measure",
                      show_progress="full", show_progress_on=[status], concurrency_limit=4, concurrency_id="arena")
    # Stop: flag the session's measurement (it starts no other forward) and close its handler, which releases the
    # device; the chart and the c of an earlier measurement stay
    stop_btn.click(stop, outputs=[status], cancels=[measuring], queue=False, api_name="why_stop")
    _wire_whatif([alpha, c, batch, run_k, run_tpp, run_speedup, measurement, kept], whatif_chart, status)
    tell_when_invalid(exit_layer, status, EXIT_LAYER, parse_exit_layer, target=target_box)
    setters = [measuring]  # c as Measure set it; α as a Live run set it (from_history)
    if history is not None:
        setters.append(history.change(from_history, inputs=[history, c, batch, measurement],
                                      outputs=[run_k, run_tpp, run_speedup, alpha, whatif_chart],
                                      show_progress="hidden", api_visibility="private"))
    for setter in setters:  # the sliders' last numbers (slider_typed) follow what these handlers set
        setter.then(remember, inputs=[alpha, c, kept], outputs=[kept], show_progress="hidden", api_visibility="private")


def _wire_whatif(whatif_inputs: list, whatif_chart: gr.Plot, status: gr.HTML) -> None:
    """Redraw the what-if chart on a user's edit of its controls (``whatif_inputs``: :func:`whatif`'s, α, c, batch,
    the three run boxes, the measurement and the sliders' kept numbers) and say what it cannot use
    (:func:`_tell_typed_nonsense`)."""
    alpha, c, batch, run_k, run_tpp, run_speedup, _, kept = whatif_inputs
    # user edits only (.input): the handlers that set these controls (measure, from_history) draw the chart
    # themselves, so no chain of change events can race them with stale values; always_last drops the
    # intermediate values of a slider drag; preprocess off: a number typed out of a slider's range arrives before
    # the slider clamps it (Gradio's range check would answer with a server error), and whatif clamps it itself
    gr.on([alpha.input, c.input, batch.input, run_k.input, run_tpp.input, run_speedup.input, run_k.blur,
           run_tpp.blur, run_speedup.blur], whatif,
          inputs=whatif_inputs, outputs=[whatif_chart], show_progress="hidden", trigger_mode="always_last",
          preprocess=False, api_visibility="private")
    _tell_typed_nonsense((alpha, c), (run_k, run_tpp, run_speedup), status, kept)
