"""The Why tab's two figures, pure functions of their data: :func:`forward_figure` (the measured forward times
against new tokens, with the noise flags of :mod:`app.why.noise`) and :func:`whatif_figure` (tokens per pass and
predicted speedup against k)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from app import render
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX, position_ticks, wrap_words
from app.why.noise import (WITHIN_NOISE, _times, _why_not_flagged, inside_margin, noisy_measured, times_measured,
                           within_noise_points)
from specviz.measure.grid import IMPOSSIBLE_MARGIN


BATCH_COLORS = {1: COLORS["speculative"], 4: COLORS["bonus"], 16: COLORS["recovered"]}


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


LEGEND_LINE_CHARS = 28
"""The longest line of a what-if legend name: on a 400 px phone (``assets/head.html`` stacks the panels and turns
the legend into a column from the plot's left edge) a 28-character name and its line sample fit the 236 px plot,
clear of the toolbar in the right margin."""
TITLE_LINE_CHARS = 34
"""The longest line of the what-if title at the head of the legend (13 px): about 6.4 px a character there, it fits
the same 236 px."""



def ceiling_note(ks: list[int], last: int, axis: str) -> dict:
    """The note where the k+1 line leaves the tokens-per-pass chart at k = ``last`` (of ``ks``; ``axis``: the
    chart's axis number): "k+1 goes on up / (to 17 at k = 16)" on two lines, beside the line's last point, on the
    side with room (left of it past the middle of the k axis): on one line it ran past a 400 px phone's edge. It hangs
    down from that point (``yanchor`` top): centred on it, its first line rose into the panel's title where the
    point is at the chart's top."""
    right = last > (ks[0] + ks[-1]) / 2
    return {"text": f"k+1 goes on up<br>(to {ks[-1] + 1} at k = {ks[-1]})", "x": last, "y": last + 1,
            "xref": f"x{axis}", "yref": f"y{axis}", "xanchor": "right" if right else "left", "yanchor": "top",
            "align": "right" if right else "left", "showarrow": False, "xshift": -6 if right else 6,
            "font": {"size": 11, "color": COLORS["baseline"]}}


FLAT_WITHIN = 0.01
"""A speedup curve's best k at the end of the k range is said to be on a plateau from the smallest k whose speedup,
and every larger k's, lies within this share of the best (:func:`plateau_start`)."""
FLAT_MIN_KS = 3
"""... when that plateau holds at least this many k: a curve that still rises past 1% by the end is not flat."""


def plateau_start(ks: list[int], speedups: list[float], within: float = FLAT_WITHIN) -> int:
    """The smallest k of ``ks`` from which every point of ``speedups`` (× standard decoding, one a k; NaN skipped)
    lies within ``within`` (a share: 0.01 = 1%) of the best of them; the best k itself when the curve still rises
    by more than that just below it."""
    points = [(k, s) for k, s in zip(ks, speedups) if s == s]
    top = max(s for _, s in points)
    start = points[-1][0]
    for k, s in reversed(points):
        if s < top * (1 - within):
            break
        start = k
    return start


def best_k_line(ks: list[int], speedups: list[float], name: str) -> str:
    """The note line naming the best draft length of one predicted-speedup curve (``speedups``: × standard decoding,
    one a k of ``ks``; ``name``: "paper" or "measured costs"), e.g. "Best k, paper: k = 4 (2.10×)". A best k at the
    end of the range on a curve flat there (within :data:`FLAT_WITHIN` for :data:`FLAT_MIN_KS` k or more:
    :func:`plateau_start`) is said to be both: "Best k, paper: k = 16 (3.56×), the end of the range; within 1% from
    k = 8" (a bare k = 16, the slider's end, read as a finding); one still rising there: "..., the end of the
    range, still rising".
    Where no k gives a speedup above 1 (as shown, to two decimals), drafting never pays, and the line says so
    instead of naming a best k that slows decoding down: "Paper: no k pays at this draft cost (best k = 1 gives
    0.67×)". Every line is wrapped for a 400 px phone. Points that are not numbers (NaN, an untimed cost) are
    skipped."""
    points = [(k, s) for k, s in zip(ks, speedups) if s == s]
    k, top = max(points, key=lambda point: point[1])
    if round(top, 2) > 1:
        line = f"Best k, {name}: k = {k} ({top:.2f}×)"
        if k != ks[-1]:
            return line
        start = plateau_start(ks, speedups)
        flat = sum(1 for j, _ in points if j >= start) >= FLAT_MIN_KS
        end = (f"the end of the range; within {FLAT_WITHIN:.0%} from k = {start}" if flat
               else "the end of the range, still rising")
        return wrap_words(f"{line},<br>{end}")
    cost = "this draft cost" if name == "paper" else "these costs"
    return wrap_words(f"{name.capitalize()}: no k pays at {cost} (best k = {k} gives {top:.2f}×)")


def best_notes(ks: list[int], curves: dict, below: str | None = None) -> str:
    """The lines under the what-if charts: each speedup curve's best k (:func:`best_k_line`), or that the measured
    one is too noisy to tell, "Press Measure" before a measurement, then ``below`` (the ★'s α), wrapped."""
    best = [best_k_line(ks, series, name)
            for series, name in ((curves["paper"], "paper"), (curves.get("measured"), "measured costs")) if series]
    if noisy_measured(curves):  # a verification timed below a step: the measured curve is no finding
        best = best[:1] + [wrap_words("Measured costs: too noisy to tell a best k (a verification timed below a "
                                      "one-token step)")]
    if not curves.get("measured"):
        best.append("Press <b>Measure</b> for the curve with<br>measured verification costs")  # fits 400 px
    best += [wrap_words(below)] if below else []
    return "<br>".join(best)


def whatif_figure(curves: dict, run: dict | None = None, batch: int = 1, note: str | None = None,
                  c_words: str = "", below: str | None = None) -> go.Figure:
    """Left: expected tokens per pass against k at the chosen α (and the k+1 ceiling). Right: predicted speedup,
    the paper's (a verification costs one step) and, when measured, with the measured verification cost
    T(k+1) at ``batch``. ``run`` ({"k", "tokens_per_pass", "speedup"}) is marked on both. ``curves["k"]`` is
    1..k_max: every k has its point and hover; the k axes label at most :data:`app.figures.POSITION_TICKS` of them
    (:func:`app.figures.position_ticks`). The chart's title (α and c, then ``note``, e.g. that the measured c is
    noise, or which α the run's is: :func:`app.why.controls.alpha_note`) heads the legend (:func:`_title_legend`),
    with ``c_words`` in brackets after c (where c comes from: :func:`app.why.controls.c_words`; "" says nothing);
    ``below``: a note put under the charts, under the best-k lines (the ★'s α: it made the legend 7 lines high and
    the plots 134 px at 1400 px). The figure grows by its legend's height (:func:`legend_px`), so each plot keeps
    about 300 px however long the legend is. Every text line fits a 400 px phone."""
    layout = _layout(430)
    (a, _, _), (b, _, _) = _two_panels(layout, ("Expected tokens per target pass", "Predicted speedup"))
    ks = curves["k"]
    for axis in (a, b):
        layout[f"xaxis{axis}"] |= {"title": {"text": "draft length k"}, **position_ticks(ks[-1]),
                                   "range": [0.5, ks[-1] + 0.5]}  # every k keeps its point; a few labels
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
         "name": "speedup, paper<br>(verification = 1 step)", "line": {"color": COLORS["speculative"], "width": 3},
         "marker": {"size": 6}, "xaxis": f"x{b}", "yaxis": f"y{b}",
         "hovertemplate": "k=%{x}: %{y:.2f}× (paper)<extra></extra>"},
    ]
    if curves.get("measured"):
        data.append({"type": "scatter", "mode": "lines+markers", "x": ks, "y": curves["measured"],
                     "name": f"speedup with the measured<br>T(k+1), batch {batch}",
                     "line": {"color": COLORS["rejected"], "width": 3, "dash": "dash"}, "marker": {"size": 6},
                     "xaxis": f"x{b}", "yaxis": f"y{b}",
                     "hovertemplate": "k=%{x}: %{y:.2f}× (measured costs)<extra></extra>"})
    # under the charts: a rising curve ends top right
    _note_below(layout, b, best_notes(ks, curves, below), COLORS["baseline"])
    ceiling = max(tau + [2.0] + ([run["tokens_per_pass"]] if run and run.get("tokens_per_pass") else [])
                  + ([run["tokens_per_pass_range"][1]] if run and run.get("tokens_per_pass_range") else []))
    layout[f"yaxis{a}"]["range"] = [0, ceiling * 1.25]  # the k+1 line may leave the chart: E[tau] saturates
    inside = [k for k in ks if k + 1 <= ceiling * 1.25]
    if inside and inside[-1] < ks[-1]:  # say where the ceiling line goes on, above the chart
        layout["annotations"].append(ceiling_note(ks, inside[-1], a))
    data.append({"type": "scatter", "mode": "lines", "x": [ks[0], ks[-1]], "y": [1, 1], "xaxis": f"x{b}",
                 "yaxis": f"y{b}", "name": "standard decoding (1×)",
                 "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}, "hoverinfo": "skip"})
    if run and run.get("k") and run.get("tokens_per_pass"):
        data += run_markers(run, a, b)
    c_text = f"{curves['c']:.4f}" if 0 < curves["c"] < 5e-3 else f"{curves['c']:.3f}"  # an n-gram's 0.0003, not 0
    _title_legend(layout, f"α = {curves['alpha']:.2f}, c = {c_text}" + (f" ({c_words})" if c_words else "")
                  + (f"<br>{note}" if note else ""))
    layout["height"] += legend_px(layout["legend"]["title"]["text"], data)
    return go.Figure({"data": data, "layout": layout})


LEGEND_LINE_PX = 17  # one line of the what-if legend's title (13 px type) or of a name
LEGEND_ROW_PX = 10  # between two rows of names


def legend_px(title: str, data: list[dict]) -> int:
    """The height in px of the what-if legend above the panels, as drawn wide (two names a row,
    :func:`_title_legend`): ``title``'s lines (``<br>``) and the rows of the names of ``data`` shown in the legend
    (a name of two lines makes its row two lines high). Plotly grows the top margin by this; the figure grows by it
    too, so the plots keep their height."""
    names = [t["name"] for t in data if t.get("showlegend", True) is not False and t.get("name")]
    rows = [names[i:i + 2] for i in range(0, len(names), 2)]
    lines = sum(max(n.count("<br>") + 1 for n in row) for row in rows)
    return (title.count("<br>") + 1 + lines) * LEGEND_LINE_PX + len(rows) * LEGEND_ROW_PX


RANGED_RUN = "± its 95% range"
"""Put after the ★'s legend name when it carries error bars (the run's recorded 95% ranges); without them the name
is the label alone, and the hover (and, for a Live run, the line under the run boxes) says it has no range."""


def _error_bar(value: float, span: tuple[float, float] | None) -> dict:
    """Plotly's error bar of one marker at ``value`` spanning ``span`` (low, high); hidden without one."""
    if span is None:
        return {"visible": False}
    return {"type": "data", "symmetric": False, "array": [max(0.0, span[1] - value)],
            "arrayminus": [max(0.0, value - span[0])], "color": COLORS["accepted"], "thickness": 2, "width": 6}


def run_markers(run: dict, a: str, b: str) -> list[dict]:
    """The ★ of ``run`` (:func:`app.why.controls.run_point`'s) on the tokens-per-pass panel (axis ``a``) and, with a
    speedup, on the speedup panel (``b``), each with its recorded 95% range as an error bar
    ("tokens_per_pass_range", "speedup_range"; none where there is none); the legend name says when it has bars
    (:data:`RANGED_RUN`) and the hover gives the range or says there is none."""
    label = run.get("label") or "your run"
    ranged = run.get("tokens_per_pass_range") or (run.get("speedup") and run.get("speedup_range"))
    name = wrap_words(f"{label} {RANGED_RUN}" if ranged else label, LEGEND_LINE_CHARS)
    marker = {"symbol": "star", "size": 18, "color": COLORS["accepted"], "line": {"color": "#ffffff", "width": 1}}
    out = []
    for key, axis, unit in (("tokens_per_pass", a, " tokens/pass"), ("speedup", b, "× measured")):
        value = run.get(key)
        if not value:
            continue
        span = run.get(f"{key}_range")
        spread = f" (95% range {span[0]:.2f}–{span[1]:.2f})" if span else " (no range known)"
        out.append({"type": "scatter", "mode": "markers", "x": [run["k"]], "y": [value], "name": name,
                    "legendgroup": "run", "showlegend": not out, "marker": marker, "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}", "error_y": _error_bar(value, span),
                    "hovertemplate": f"{html.escape(label)}: k=%{{x}}, %{{y:.2f}}{unit}{spread}<extra></extra>"})
    return out


def _title_legend(layout: dict, title: str) -> None:
    """Put the chart's ``title`` (lines split by ``<br>``) at the head of the legend above the panels, wrapped into
    lines a 400 px phone shows whole (:func:`app.figures.wrap_words`): Plotly lays the two out as one block and
    grows the top margin to hold it, so a title of any length never runs over the legend, as a figure title at the
    top edge did, and neither reaches the toolbar in the right margin. Wide, the legend holds two names a row."""
    layout["legend"] |= {"y": 1.1, "entrywidth": 0.45, "entrywidthmode": "fraction",
                         "title": {"text": wrap_words(title, TITLE_LINE_CHARS), "side": "top", "font": {"size": 13}}}
    layout["margin"]["t"] = 40
