"""The Classroom's two Plotly figures: the distributions at a rejection (:func:`rejection_figure`, built once per
recording, pass and phase and shared by every session: :func:`rejection_chart`) and the what-if's predicted speedup
against k (:func:`whatif_figure`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Mapping

import plotly.graph_objects as go

from app.classroom.whatif_view import range_words
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX, position_ticks, wrap_words
from specviz.analysis.stepper import Distributions, Recording, Stepper, display_text
from specviz.analysis.whatif import WhatIf

CHART_TOKENS = 10  # bars per distribution chart


def _labels(ids, rec: Recording) -> list[str]:
    labels, seen = [], {}
    for t in ids:
        text = display_text(rec.text(t))
        label = f"“{text if len(text) <= 14 else text[:13] + '…'}”"
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label} #{t}")
    return labels


MARK_HEADROOM = 1.6  # the probability axis' top over the tallest bar: room for the ✗ / ★ marks above it
MARK_ROOM_PX = 64  # the top margin's growth when the axis stops at 1 and a mark stands above the plot
WIDE_MARK_SHIFT_PX = 50  # two marks' words stand this far to each side of their bars, away from each other
TITLE_TOP_PX = 12  # the rejection chart's title hangs this far below the figure's top (a trial saw a mark over it)


def probability_range(tallest: float) -> tuple[float, int]:
    """(the probability axis' top, extra top margin in px) for a rejection chart whose tallest bar is ``tallest``:
    room above it for the marks, but never past 1, the largest probability; when the axis stops at 1, the marks of a
    tall bar stand above the plot, in a top margin grown by :data:`MARK_ROOM_PX`."""
    top = tallest * MARK_HEADROOM
    return (top, 0) if top <= 1.0 else (1.0, MARK_ROOM_PX)


def _choice_mark(dist: Distributions, reveal: bool) -> list[tuple[int, str, str]]:
    """The mark of the target's own token on the rejection chart, as (token id, words, colour), or none: "★ recovered"
    once it is emitted (``reveal``, phase 4); before that, in greedy mode (no residual), "★ target's top choice", the
    token the subtitle says replaces the guess, already known at the decision; in sampling mode none, as it is only
    drawn from the residual in the next step."""
    if reveal:
        return [(dist.chosen_id, "★ recovered", COLORS["recovered"])]
    if dist.residual is None:
        return [(dist.chosen_id, "★ target's top choice", COLORS["recovered"])]
    return []


def rejection_figure(dist: Distributions, rec: Recording, reveal: bool = True) -> go.Figure:
    """Bars of the target's p, the draft's q and (sampling) the residual norm(max(0, p − q)) over their top tokens,
    with the rejected draft token marked and the target's own token (:func:`_choice_mark`): "★ recovered" when
    ``reveal`` (phase 4, emit); at phase 3 (accept / reject) "★ target's top choice" in greedy mode, where the
    subtitle says it replaces the guess, and no mark when sampling: the caption says it is drawn in the next step."""
    must = {dist.token_ids.index(dist.drafted_id), dist.token_ids.index(dist.chosen_id)}
    rest = [i for i in range(len(dist.token_ids)) if i not in must]  # already most probable first
    keep = sorted(must | set(rest[:max(0, CHART_TOKENS - len(must))]))
    ids = [dist.token_ids[i] for i in keep]
    x = _labels(ids, rec)
    traces = [
        {"type": "bar", "x": x, "y": [dist.target[i] for i in keep], "name": "target p",
         "marker": {"color": COLORS["verify"]}},
        {"type": "bar", "x": x, "y": [dist.draft[i] for i in keep],
         "name": "draft q" + ("" if dist.draft_known else " (only the guess is known)"),
         "marker": {"color": COLORS["draft"]}},
    ]
    if dist.residual is not None:
        traces.append({"type": "bar", "x": x, "y": [dist.residual[i] for i in keep],
                       "name": "residual norm(max(0, p − q))", "marker": {"color": COLORS["accepted"]}})
    heights = [max(t["y"][j] for t in traces) for j in range(len(x))]
    notes, marks = [], [(dist.drafted_id, "✗ drafted (rejected)", COLORS["rejected"]), *_choice_mark(dist, reveal)]
    places = [ids.index(token) for token, _, _ in marks]
    for (token, text, color), j in zip(marks, places):
        shift = 18 if token == dist.drafted_id and dist.drafted_id != dist.chosen_id and len(marks) > 1 else 0
        side = 0 if len(set(places)) < 2 else (1 if j == max(places) else -1)  # words off the other mark's bar
        # (a trial read "★ target's top choice" across the draft's bar beside it)
        notes.append({"x": x[j], "y": heights[j], "text": f"<b>{text}</b>", "showarrow": True, "arrowhead": 2,
                      "ax": side * WIDE_MARK_SHIFT_PX, "ay": -28 - shift, "font": {"color": color, "size": 13},
                      "arrowcolor": color})
    why = ("the target's top choice replaces the guess" if dist.residual is None else
           "the recovered token is drawn from the residual")
    title = f"At the rejection:<br>{_subtitle(why)}"  # two short lines fit a phone
    top, room = probability_range(max(heights + [0.05]))
    height = 380 + room  # the title pinned to the top: centred in a top margin grown for the marks, it met them
    layout = {"template": "plotly_white", "font": {"family": FONT, "size": 13}, "height": height,
              "title": {"text": title, "font": {"size": 15}, "x": 0.01, "xanchor": "left", "yref": "container",
                        "y": 1 - TITLE_TOP_PX / height, "yanchor": "top"}, "annotations": notes,
              "margin": {"l": 55, "r": MODEBAR_MARGIN_PX, "t": 70 + room, "b": 20}, "barmode": "group",
              "modebar": MODEBAR,
              "xaxis": {"automargin": True, "tickangle": -30 if len(x) > 6 else 0},
              "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero", "range": [0, top]},
              # inside the plot's top right, above the small bars (the most probable tokens come first)
              "legend": {"orientation": "v", "y": 1, "yanchor": "top", "x": 1, "xanchor": "right",
                         "bgcolor": "rgba(255,255,255,0.85)", "font": {"size": 12}}}
    narrow = narrow_layout([(x[ids.index(t)], heights[ids.index(t)], text, color) for t, text, color in marks], top,
                           [ids.index(t) for t, _, _ in marks])
    narrow["title"]["text"] = "At the rejection:<br>" + _subtitle(wrap_words(why, NARROW_TITLE_CHARS))
    layout["meta"] = {"sv_narrow": narrow}
    return go.Figure({"data": traces, "layout": layout})


NARROW_HEIGHT_PX = 510  # the rejection chart's height where it is drawn narrow (a phone)
NARROW_TOP_PX = 210  # its top margin there: the title, the legend under it (up to three rows), then the marks
NARROW_TITLE_CHARS = 28  # the subtitle's longest line there: at 400 px its one line (~300 px) ran under the mode bar
NARROW_LEGEND_PX = 84  # the legend's top there, under the title's three lines (22 px type in the presentation view)
NARROW_PLOT_PX = 190  # about the plot's height there (under the upright token labels)
NARROW_MARK_CHARS = 11  # the longest line of a mark there ("★ recovered"; "✗ drafted" / "(rejected)")
NARROW_MARK_PX = (20, 52)  # the marks' centres above the plot's top edge: the first (the rejected guess), the second
NARROW_MARK_SHIFT_PX = 22  # two marks' words stand this far apart sideways, each toward its own bar's side


def narrow_layout(marks: list[tuple[str, float, str, str]], top: float, places: list[int] | None = None) -> dict:
    """The parts of the rejection chart's layout that replace the wide ones where the chart is drawn narrower than
    assets/head.html's STACK_BELOW_PX (a 400 px phone: a plot about 240 px wide). There ten token labels at -30°
    overlapped and a mark's one-line words ("✗ drafted (rejected)", 150 px) lay across the neighbouring bars, so:
    the token labels stand upright-turned (-90°) in smaller type, the legend sits in a row under the title, and
    each mark (``marks``: (x label, bar height, words, colour), the rejected guess first) is wrapped at its spaces
    (:func:`app.figures.wrap_words`) and stands above the plot, its arrow down to its bar. ``top`` is the
    probability axis' top. ``places``: the marks' bar positions (left to right); two marks' words then stand
    :data:`NARROW_MARK_SHIFT_PX` apart sideways, each toward its own bar's side (at 400 px the upper mark's arrow ran
    through the lower mark's words over neighbouring bars). A dict of layout keys; a dict value is merged into the
    wide layout's own key."""
    per_px = top / NARROW_PLOT_PX
    sides = [0] * len(marks)
    if places is not None and len(places) == 2 and places[0] != places[1]:
        sides = [-1, 1] if places[0] < places[1] else [1, -1]
    notes = []
    for (x, height, text, color), lift, side in zip(marks, NARROW_MARK_PX, sides):
        lines = wrap_words(text, NARROW_MARK_CHARS).split("<br>")
        notes.append({"x": x, "y": height, "text": "<br>".join(f"<b>{line}</b>" for line in lines),
                      "showarrow": True, "arrowhead": 2, "ax": side * NARROW_MARK_SHIFT_PX, "ayref": "y",
                      "ay": top + lift * per_px,
                      "font": {"color": color, "size": 12}, "arrowcolor": color})
    container_y = lambda px: 1 - px / NARROW_HEIGHT_PX  # noqa: E731 - px from the figure's top, as Plotly's 0..1
    return {"height": NARROW_HEIGHT_PX, "annotations": notes,
            "margin": {"t": NARROW_TOP_PX},
            "title": {"yref": "container", "y": container_y(20), "yanchor": "top"},
            "xaxis": {"tickangle": -90, "tickfont": {"size": 11}},
            "legend": {"orientation": "h", "x": 0, "xanchor": "left", "yref": "container",
                       "y": container_y(NARROW_LEGEND_PX), "yanchor": "top", "bgcolor": "rgba(255,255,255,0)"}}


def _subtitle(text: str) -> str:
    """``text`` (lines split by ``<br>``) in the title's small type, each line in its own span."""
    return "<br>".join(f"<span style='font-size:13px'>{line}</span>" for line in text.split("<br>"))


_CHARTS: OrderedDict[tuple[int, int], tuple[Recording, go.Figure]] = OrderedDict()
_CHARTS_LOCK = threading.Lock()
CHART_CACHE_SIZE = 256  # rejection charts kept (a 64-token run has at most 128: two per pass)


def rejection_chart(stepper: Stepper) -> go.Figure | None:
    """The rejection chart of the stepper's current step (None when it shows none), the recovered token marked at
    the emit phase only (:func:`rejection_figure`). Built once per recording, pass and phase kind, then shared by every session stepping through that recording: a figure costs tens of milliseconds, a
    step otherwise well under one."""
    dist = stepper.distributions()
    if dist is None:
        return None
    rec = stepper.recording
    reveal = stepper.current.phase == "emit"  # the recovered token is drawn in phase 4, not before
    key = (id(rec), stepper.current.pass_index, reveal)
    with _CHARTS_LOCK:
        hit = _CHARTS.get(key)
        if hit is not None and hit[0] is rec:  # the entry holds its recording, so the id is not reused meanwhile
            _CHARTS.move_to_end(key)
            return hit[1]
    figure = rejection_figure(dist, rec, reveal)
    with _CHARTS_LOCK:
        _CHARTS[key] = (rec, figure)
        while len(_CHARTS) > CHART_CACHE_SIZE:
            _CHARTS.popitem(last=False)
    return figure


def whatif_figure(result: WhatIf, checks: Mapping[int, float] | None = None) -> go.Figure:
    """Predicted speedup against k (the recommended k starred), the paper's prediction, 1× (standard decoding),
    the speedup measured at k_max in the what-if run, and any re-run measurements ``checks`` {k: speedup}. Every k
    (1..k_max) has its point and hover; the k axis labels at most :data:`app.figures.POSITION_TICKS` of them."""
    ks = [p.k for p in result.predictions]
    rec = result.recommended
    hover = [f"k = {p.k}<br>E[tokens/pass] = {p.expected_tokens:.2f}<br>pass {p.pass_ms:.1f} ms vs step "
             f"{result.costs.step_ms:.1f} ms<br>predicted {p.speedup:.2f}×" for p in result.predictions]
    predicted = {"type": "scatter", "mode": "lines+markers", "x": ks, "y": [p.speedup for p in result.predictions],
                 "name": "predicted (measured costs)", "line": {"color": COLORS["speculative"], "width": 3},
                 "hovertext": hover, "hoverinfo": "text"}
    spread = result.spread
    if spread is not None:  # the bootstrap range of each k's prediction, as error bars
        level = f"{spread.level:.0%}"
        predicted["name"] = f"predicted (measured costs;<br>bars: {level} of resampled passes)"  # fits 400 px
        predicted["error_y"] = {"type": "data", "symmetric": False, "color": COLORS["speculative"], "thickness": 1.5,
                                "array": [max(0.0, h - p.speedup) for h, p in zip(spread.high, result.predictions)],
                                "arrayminus": [max(0.0, p.speedup - lo) for lo, p in zip(spread.low, result.predictions)]}
        hover[:] = [f"{h}<br>{level} of resamples: {range_words((lo, hi), 2)}; best in {share:.0%}"
                    for h, lo, hi, share in zip(hover, spread.low, spread.high, spread.best_share)]
    traces = [
        predicted,
        {"type": "scatter", "mode": "lines", "x": ks, "y": [p.paper_speedup for p in result.predictions],
         "name": "paper (a verify costs one step)", "line": {"color": COLORS["baseline"], "dash": "dot", "width": 2}},
        {"type": "scatter", "mode": "markers", "x": [rec.k], "y": [rec.speedup],
         "name": f"recommended k = {rec.k}", "marker": {"symbol": "star", "size": 20, "color": COLORS["recovered"]}},
    ]
    if result.measured_speedup is not None:
        traces.append({"type": "scatter", "mode": "markers", "x": [result.k_max], "y": [result.measured_speedup],
                       "name": f"measured in this run (k = {result.k_max})",
                       "marker": {"symbol": "diamond-open", "size": 13, "color": COLORS["bonus"],
                                  "line": {"width": 2}}})
    if checks:
        traces.append({"type": "scatter", "mode": "markers", "x": list(checks), "y": list(checks.values()),
                       "name": "measured by the re-run",
                       "marker": {"symbol": "diamond", "size": 14, "color": COLORS["accepted"]}})
    # 440 px (540 on a phone, WHATIF_NARROW, where the legend's rows under the chart take ~130 px): at 380 the plot
    # left its y axis title less height than it needs, and the title ran up into the chart's subtitle
    layout = {"template": "plotly_white", "font": {"family": FONT, "size": 13}, "height": 440,
              "title": {"text": "What if k were different?<br><span style='font-size:12px'>Predicted decoding "
                                "speedup</span>", "font": {"size": 15}},  # two short lines fit a phone
              "xaxis": {"title": {"text": "draft length k"}, **(position_ticks(ks[-1]) if ks else {})},
              "yaxis": {"title": {"text": "× standard decoding"}, "rangemode": "tozero", "automargin": True},
              "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                          "line": {"color": "#8c959f", "dash": "dash", "width": 1}}],
              "annotations": [{"x": rec.k, "y": rec.speedup, "text": f"<b>k = {rec.k}: {rec.speedup:.2f}×</b>",
                               "showarrow": True, "ay": -34, "ax": 0, "font": {"color": COLORS["recovered"]}}],
              "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 60, "b": WHATIF_BOTTOM_PX}, "modebar": MODEBAR,
              "legend": WHATIF_LEGEND, "meta": {"sv_narrow": WHATIF_NARROW}}
    return go.Figure({"data": traces, "layout": layout})


WHATIF_BOTTOM_PX = 115
"""The what-if chart's bottom margin: its ticks and axis title, then the legend's one or two rows (its first item
has two lines) under them."""
WHATIF_LEGEND = {"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yref": "container", "yanchor": "bottom"}
"""The what-if chart's legend, at the chart's bottom edge in px, under the axis title however tall the plot is: at a
fraction of the plot under it (y = -0.3) it lay on "draft length k" once a 400 px window was widened to 1400 px (a
trial), since the plot grew taller and its fraction with it (tests/test_classroom_widen_browser.py)."""
WHATIF_NARROW = {"height": 540, "margin": {"b": 215}}
"""The parts of its layout drawn where the chart is narrower than assets/head.html's STACK_BELOW_PX (a phone), the
wide layout's again when it is widened: room under the axis title for the legend's four rows of five lines."""
