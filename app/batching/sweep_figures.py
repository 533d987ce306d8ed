"""The sweep's figure (:func:`sweep_figure`): the speedup against B beside the pass cost; a pure function of the
sweep's result."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from app.batching.shared import figure_layout, two_panels
from app.batching.sweep_job import REPEATS
from app.batching.sweep_reading import (crossover, disturbance, impossible, noisy_prediction, predicted_cell,
                                        prediction_noise, speedup_text, unreadable_costs, verdict)
from app.figures import COLORS, WIDE_SPREAD, off_the_top
from specviz.analysis.batching import BATCH_SIZES, repeat_speedups, repeat_values, spread_cell

def sweep_figure(result: dict) -> go.Figure:
    """Left: the measured speedup against B (median, bars spanning the repeats; noisy points hollow and grey), the
    predicted curve, a line at 1× and the batch size where speculation stops paying. Right: the pass cost
    T(B, k+1) / T(B, 1) beside the tokens per pass: speculation pays while a pass costs fewer steps than the
    tokens it emits; greyed and marked not readable where other programs disturbed the sweep
    (:func:`unreadable_costs`)."""
    k, rows = result["k"], [r for r in result["rows"] if verdict(r) != "none"]
    busy = disturbance(result) is not None  # other programs disturbed the sweep: repeats across 1 are too noisy
    layout = figure_layout(460)
    two_panels(layout, ("Speedup over standard decoding", f"Cost of a pass over B × {k + 1} tokens"))
    sizes = [r["batch"] for r in result["rows"]] or list(BATCH_SIZES)
    ticks = {"type": "log", "tickvals": sizes, "ticktext": [str(b) for b in sizes],
             "title": {"text": "batch size B (prompts decoded together)"}}
    layout["xaxis"] |= ticks
    layout["xaxis2"] |= ticks
    layout["yaxis"] |= {"title": {"text": "× standard decoding"}, "rangemode": "tozero"}
    layout["yaxis2"] |= {"title": {"text": "per pass (units in each line's name)"}, "rangemode": "tozero"}
    data = [{"type": "scatter", "mode": "lines", "x": [sizes[0], sizes[-1]], "y": [1, 1],
             "name": "standard decoding (1×)", "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5},
             "hoverinfo": "skip"}]
    predicted = [r for r in result["rows"] if r.get("predicted") is not None]
    unreadable = unreadable_costs(result)  # a disturbed machine: the pass costs the model reads are too low
    unsure = [r for r in predicted if unreadable or noisy_prediction(r, result["rows"])]
    predicted = [r for r in predicted if r not in unsure]
    if unsure:
        whys = [f"left out of the curve, too noisy: {prediction_noise(r, result['rows'])}" for r in unsure]
        why = f"not readable: {unreadable}" if unreadable else "%{text}"  # a noisy point: its own reason
        data.append({"type": "scatter", "mode": "markers", "x": [r["batch"] for r in unsure],
                     "y": [r["predicted"] for r in unsure], "text": None if unreadable else whys,
                     "name": f"predicted: {'not readable' if unreadable else 'too noisy (its timings disagree)'}",
                     "marker": {"size": 8, "symbol": "diamond-open", "color": COLORS["other"]},
                     "hovertemplate": f"B = %{{x}}: predicted %{{y:.2f}}× (a model), {why}<extra></extra>"})
    if predicted:
        data.append({"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in predicted],
                     "y": [r["predicted"] for r in predicted], "name": "predicted from B = 1 and T(B, n)",
                     "line": {"color": COLORS["expected"], "dash": "dash", "width": 2}, "marker": {"size": 6},
                     "error_y": _prediction_bars(predicted), "text": [predicted_cell(r) for r in predicted],
                     "hovertemplate": "B = %{x}: predicted %{text}× (a model; the range from its inputs' "
                                      "spread)<extra></extra>"})
    data += _measured_traces(rows, busy)
    cross = crossover(rows)
    if cross is not None:
        data.append({"type": "scatter", "mode": "markers", "x": [cross["batch"]], "y": [cross["speedup"]],
                     "name": f"speculation stops paying (B = {cross['batch']})",
                     "marker": {"size": 20, "symbol": "circle-open", "color": COLORS["rejected"],
                                "line": {"width": 3}}, "hoverinfo": "skip"})
    data += _cost_traces(result["rows"], k, sizes, unreadable_costs(result))
    visible = _cap_wide_ranges(layout, rows, predicted)
    if cross is not None:
        layout["annotations"].append(_crossover_note(cross, visible))
    return go.Figure({"data": data, "layout": layout})


def _crossover_note(cross: dict, visible: float) -> dict:
    """The label at the batch size where speculation stops paying: above its point when the point sits in the lower
    half of the chart (below it, it covered the B axis' labels: a trial), else below it. ``visible``: about the
    left chart's top value (:func:`_cap_wide_ranges`)."""
    low = cross["speedup"] < 0.5 * visible
    return {"text": f"below 1× from B = {cross['batch']}", "x": math.log10(cross["batch"]), "y": cross["speedup"],
            "xref": "x", "yref": "y", "ax": -40, "ay": -40 if low else 40, "showarrow": True,
            "arrowcolor": COLORS["rejected"], "font": {"size": 12, "color": COLORS["rejected"]},
            "bgcolor": "rgba(255,255,255,0.85)"}


def _cap_wide_ranges(layout: dict, rows: list[dict], predicted: list[dict]) -> float:
    """The left chart's height from its points, the measured repeats and 1×, not from a predicted range far above
    them (:func:`app.figures.off_the_top`; the range's hover gives it whole). Returns about the chart's top value:
    the tallest value drawn and the predicted ranges kept whole."""
    top = max([1.0] + [max(repeat_speedups(r)) for r in rows] + [r["predicted"] for r in predicted])
    highs = [(r["predicted_high"], f"at B = {r['batch']}") for r in predicted if r.get("predicted_high") is not None]
    axis, notes = off_the_top(top, highs, "a predicted range")
    layout["yaxis"] |= axis
    layout["annotations"] += notes
    return max([top] + [high for high, _ in highs if high <= WIDE_SPREAD * top])


def _error_bars(rows: list[dict], color: str) -> dict:
    """From each median speedup up to the fastest repeat and down to the slowest."""
    ups = [repeat_speedups(r) for r in rows]
    return {"type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 5,
            "array": [max(u) - r["speedup"] for u, r in zip(ups, rows)],
            "arrayminus": [r["speedup"] - min(u) for u, r in zip(ups, rows)]}


def _prediction_bars(rows: list[dict]) -> dict:
    """Error bars from each predicted speedup to the ends of its inputs' range (none where the row kept none)."""
    def reach(r: dict, end: str, sign: int) -> float:
        bound = r.get(f"predicted_{end}")
        return 0.0 if bound is None else max(0.0, sign * (bound - r["predicted"]))

    return {"type": "data", "symmetric": False, "color": COLORS["expected"], "thickness": 1.2, "width": 4,
            "array": [reach(r, "high", 1) for r in rows], "arrayminus": [reach(r, "low", -1) for r in rows]}


def _measured_traces(rows: list[dict], busy: bool) -> list[dict]:
    """The left panel's measured speedups: the rows that are findings on a line (median, bars spanning the repeats),
    the too-noisy ones as hollow grey points (all of them when other programs were ``busy``)."""
    sure = [r for r in rows if verdict(r, busy) != "noisy"]
    noisy = [r for r in rows if verdict(r, busy) == "noisy"]
    traces = []
    if sure:
        traces.append({"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in sure],
                       "y": [r["speedup"] for r in sure], "name": f"measured (median of {REPEATS}; bars: repeats)",
                       "line": {"color": COLORS["speculative"], "width": 3}, "marker": {"size": 9},
                       "error_y": _error_bars(sure, COLORS["speculative"]),
                       "text": [speedup_text(r, busy) for r in sure],
                       "hovertemplate": "B = %{x}: %{text}<extra></extra>"})
    if noisy:
        why = "repeats on both sides of 1" + (", other programs busy" if busy else "")
        name = (f"no finding (too noisy to tell: {why}; or impossible timings)" if any(map(impossible, noisy))
                else f"too noisy to tell ({why})")  # impossible rows say their own reason in the hover (speedup_text)
        traces.append({"type": "scatter", "mode": "markers", "x": [r["batch"] for r in noisy],
                       "y": [r["speedup"] for r in noisy], "name": name,
                       "marker": {"size": 10, "symbol": "circle-open", "color": COLORS["other"], "line": {"width": 2}},
                       "error_y": _error_bars(noisy, COLORS["other"]), "text": [speedup_text(r, busy) for r in noisy],
                       "hovertemplate": "B = %{x}: %{text}<extra></extra>"})
    return traces


def _repeat_bars(rows: list[dict], figure: str, color: str) -> dict:
    """Error bars from each row's ``figure`` up to its highest repeat and down to its lowest (:func:`repeat_values`;
    none on a row with fewer than two repeats)."""
    spans = [repeat_values(r, figure) for r in rows]
    return {"type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 5,
            "array": [max(0.0, max(v) - r[figure]) if len(v) > 1 else 0.0 for v, r in zip(spans, rows)],
            "arrayminus": [max(0.0, r[figure] - min(v)) if len(v) > 1 else 0.0 for v, r in zip(spans, rows)]}


def _pass_cost_trace(cost: list[dict], k: int, unreadable: str | None) -> dict:
    """The right panel's pass cost T(B, k+1) / T(B, 1) against B (``cost``: the rows that have one), bars spanning
    its repeats. Where the pass costs cannot be read (``unreadable``: :func:`unreadable_costs`'s reason) it is a
    grey dotted line of hollow points whose legend entry and hover say so, as the table's cells and the lesson do."""
    name = f"pass cost T(B, {k + 1}) / T(B, 1), in one-token steps (bars: repeats)"
    color, line, marker = COLORS["verify"], {"width": 3}, {"size": 8}
    hover = "B = %{x}: a pass costs %{text} steps<extra></extra>"
    if unreadable:
        name = f"pass cost T(B, {k + 1}) / T(B, 1): not readable<br>({unreadable})"
        color, line, marker = COLORS["other"], {"width": 2, "dash": "dot"}, {"size": 8, "symbol": "circle-open"}
        hover = f"B = %{{x}}: %{{text}} steps, not readable: {unreadable}<extra></extra>"
    return {"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in cost],
            "y": [r["pass_cost"] for r in cost], "name": name, "line": line | {"color": color},
            "marker": marker | {"color": color}, "xaxis": "x2", "yaxis": "y2",
            "error_y": _repeat_bars(cost, "pass_cost", color),
            "text": [spread_cell(r, "pass_cost", ".2f") for r in cost], "hovertemplate": hover}


def _cost_traces(rows: list[dict], k: int, sizes: list[int], unreadable: str | None = None) -> list[dict]:
    """The right panel: pass cost (:func:`_pass_cost_trace`, ``unreadable`` as there) and tokens per pass against B
    (each with bars spanning its repeats, the hover giving the range), and the one-step line."""
    cost = [r for r in rows if r.get("pass_cost") is not None]
    tpp = [r for r in rows if r.get("tokens_per_pass") is not None]
    return [
        _pass_cost_trace(cost, k, unreadable),
        {"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in tpp],
         "y": [r["tokens_per_pass"] for r in tpp], "name": "tokens per pass (emitted), in tokens",
         "line": {"color": COLORS["accepted"], "width": 2, "dash": "dash"}, "marker": {"size": 7},
         "error_y": _repeat_bars(tpp, "tokens_per_pass", COLORS["accepted"]),
         "text": [spread_cell(r, "tokens_per_pass", ".2f") for r in tpp],
         "xaxis": "x2", "yaxis": "y2", "hovertemplate": "B = %{x}: %{text} tokens per pass<extra></extra>"},
        {"type": "scatter", "mode": "lines", "x": [sizes[0], sizes[-1]], "y": [1, 1], "xaxis": "x2", "yaxis": "y2",
         "name": "one step (free verification)", "showlegend": False,
         "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}, "hoverinfo": "skip"},
    ]
