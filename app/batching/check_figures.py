"""The check's figure (:func:`check_figure`): the two samples' histograms beside the exact law; a pure function of
the check's result."""

from __future__ import annotations

import plotly.graph_objects as go

from app.batching.check_reading import counted
from app.batching.shared import figure_layout, two_panels
from app.figures import COLORS

SHOWN_PAIRS = 12  # the histograms' bars: the most frequent pairs, then "all other pairs"


def _cells(result: dict) -> list[tuple[int, int]]:
    """The pairs shown as bars: the most frequent in both samples together."""
    both = {c: result["standard"].get(c, 0) + result["speculative"].get(c, 0)
            for c in set(result["standard"]) | set(result["speculative"])}
    return sorted(both, key=lambda c: (-both[c], c))[:SHOWN_PAIRS]


def check_figure(result: dict) -> go.Figure:
    """Two horizontal histograms side by side (standard, speculative): the counted runs per (token 2, token 3)
    pair, the most frequent :data:`SHOWN_PAIRS` then "all other pairs", each with the exact law's expected count
    (the target's probability × the runs counted) as a marker; both on one x scale (0 to the largest bar or marker
    of either, matched when zoomed)."""
    cells = _cells(result)
    labels = [result["labels"][c] for c in cells] + ["all other pairs"]
    broken = " (broken verifier)" if result["broken"] else ""
    layout = figure_layout(120 + 30 * len(labels))
    two_panels(layout, ("Standard decoding", f"Speculative decoding{broken}"))
    data, top = [], 1.0  # top: the largest bar or marker of either panel, for one x scale shared by both
    for i, (side, color) in enumerate((("standard", COLORS["baseline"]), ("speculative", COLORS["speculative"]))):
        n = "" if i == 0 else "2"
        total = counted(result, side)
        observed = [result[side].get(c, 0) for c in cells]
        observed.append(total - sum(observed))
        exact = [result["exact"].get(c) for c in cells]
        rest = 1.0 - sum(p for p in exact if p is not None)
        expected = [None if p is None else p * total for p in exact] + [max(0.0, rest) * total]
        top = max(top, *observed, *(e for e in expected if e is not None))
        data.append({"type": "bar", "orientation": "h", "y": labels, "x": observed, "name": f"{side} runs",
                     "legendgroup": side, "marker": {"color": color}, "opacity": 0.8,  # each side's own colour
                     "xaxis": f"x{n}", "yaxis": f"y{n}",
                     "hovertemplate": "%{y}: %{x} runs<extra>" + side + "</extra>"})
        data.append({"type": "scatter", "mode": "markers", "y": labels, "x": expected,
                     "name": "expected (exact law × runs)", "legendgroup": "exact",  # short: a 400 px legend
                     "showlegend": i == 1, "xaxis": f"x{n}", "yaxis": f"y{n}",
                     "marker": {"symbol": "diamond", "size": 11, "color": "#ffffff",
                                "line": {"color": "#24292f", "width": 2}},
                     "hovertemplate": "%{y}: %{x:.1f} expected<extra>exact law</extra>"})
        layout[f"yaxis{n}"] |= {"type": "category", "autorange": "reversed", "tickfont": {"size": 11}}
        layout[f"xaxis{n}"] |= {"title": {"text": f"runs (of {total} counted)"}, "rangemode": "tozero"}
    layout["yaxis2"]["showticklabels"] = True
    shared = [0, top * 1.08]  # one scale for both panels, so that their bars compare by length
    layout["xaxis"] |= {"range": shared, "autorange": False}
    layout["xaxis2"] |= {"range": shared, "autorange": False, "matches": "x"}
    return go.Figure({"data": data, "layout": layout})
