"""Plotly figures from run statistics. Pure functions: (spec RunStats, baseline RunStats) -> Figure.

Each figure's definitions follow :mod:`specviz.core.counters` (acceptance rate excludes the bonus token; tokens per
pass includes it; the prefill is not a pass). :func:`dashboard_figure` lays the single charts out as one figure,
so the page redraws one plot per refresh.

Figures are built from plain dicts and validated once by ``go.Figure(dict)``: ``make_subplots`` plus per-trace
updates cost ~0.7 s a refresh on a busy 2-core machine, this costs ~30 ms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import plotly.graph_objects as go

from specviz.measure.run_stats import RunStats

COLORS = {
    "speculative": "#6f42c1",
    "baseline": "#6e7781",
    "accepted": "#1a7f37",
    "rejected": "#cf222e",
    "recovered": "#b35900",
    "bonus": "#0969da",
    "expected": "#0969da",
    "draft": "#bf8700",
    "verify": "#6f42c1",
    "other": "#8c959f",
    "prefill": "#d0d7de",
}
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
MODEBAR = {"orientation": "v", "bgcolor": "rgba(255,255,255,0.75)", "color": "#8c959f",
           "activecolor": "#24292f"}
"""Plotly's toolbar as a column down the right edge, in the right margin (:data:`MODEBAR_MARGIN_PX`), so it never
covers a chart title or legend at the top (every figure of the app uses it)."""
MODEBAR_MARGIN_PX = 40


@dataclass
class Panel:
    """One chart: its title, traces (plotly dicts without axis ids) and axis settings."""

    title: str
    traces: list[dict]
    xaxis: dict = field(default_factory=dict)
    yaxis: dict = field(default_factory=dict)
    barmode: str | None = None


def _axis(title: str, **extra) -> dict:
    return {"title": {"text": title, "font": {"size": 12}}, "automargin": True, **extra}


WIDE_SPREAD = 2.0
"""A range whose top is more than this many times a chart's tallest value is cut at the chart's top
(:func:`off_the_top`)."""
NOTE_HEADROOM = 1.35
"""An axis cut by :func:`off_the_top` ends this many times above its tallest value kept: room for the note's two
lines at the chart's top (at 1.1 a trial's note sat on a marker at 400 px)."""


def off_the_top(top: float, highs: list[tuple[float, str]], what: str, xref: str = "x domain",
                yref: str = "y domain") -> tuple[dict, list[dict]]:
    """A chart's height from its own values, not from a range far above them (trials: a predicted range to 7.28 and
    an Arena bar's spread to 9.6 flattened every point under 1.5 and 2). ``top``: the tallest value drawn (points,
    bars, markers, 1×); ``highs``: each range's top and where it is ("at B = 2"); ``what``: what the ranges are
    ("a predicted range"). Returns (the y-axis settings, the notes): the axis up to the top and the ranges within
    :data:`WIDE_SPREAD` times it, and one note in the chart's ``xref`` / ``yref`` domain naming where the highest
    range that runs off the top ends; ({}, []) when none is that wide."""
    wide = [(high, where) for high, where in highs if high > WIDE_SPREAD * top]
    if not wide:
        return {}, []
    high, where = max(wide)
    note = {"text": f"{what} runs off the top (to {high:.2f}× {where})", "x": 0, "y": 1, "xref": xref, "yref": yref,
            "xanchor": "left", "yanchor": "top", "showarrow": False, "font": {"size": 11, "color": "#57606a"},
            "bgcolor": "rgba(255,255,255,0.85)"}
    kept = [high for high, _ in highs if high <= WIDE_SPREAD * top]
    return {"range": [0, NOTE_HEADROOM * max([top] + kept)], "rangemode": "normal"}, [note]


def _pass_numbers(stats: RunStats) -> list[int]:
    return list(range(1, len(stats.pass_tokens) + 1))


PASS_TICK_STEPS = (1, 2, 5)
"""The spacings of the target-pass axis' labels, times powers of ten: 1, 2, 5, 10, 20, 50, 100, ..."""


def pass_ticks(passes: int) -> dict:
    """The ticks of a target-pass axis over passes 1..``passes``: whole numbers only, every ``step``-th pass with
    ``step`` the smallest of 1, 2, 5, 10, 20, 50, ... that keeps at most :data:`POSITION_TICKS` labels, e.g. 3 ->
    1, 2, 3; 17 -> 2, 4, ..., 16. Left to itself Plotly labelled a run of 1 to 3 passes 0.5, 1, 1.5, ... (a pass has
    no halves). No pass yet: no labels. Raises ValueError for a negative ``passes``."""
    if passes < 0:
        raise ValueError(f"A run has 0 or more target passes, not {passes}.")
    step = _tick_step(passes)
    first = 1 if step == 1 else step
    return {"tickmode": "array", "tickvals": list(range(first, passes + 1, step)), "tickangle": 0}


def _tick_step(top: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that labels 1..``top`` with at most :data:`POSITION_TICKS` labels."""
    scale = 1
    while True:
        step = next((s * scale for s in PASS_TICK_STEPS if top // (s * scale) <= POSITION_TICKS), None)
        if step is not None:
            return step
        scale *= 10


def count_ticks(top: int) -> dict:
    """The ticks of an axis of counts 0..``top`` (tokens emitted, tokens drafted in a pass): whole numbers only,
    spaced as :func:`pass_ticks`' (e.g. 2 -> 0, 1, 2; 37 -> 0, 5, ..., 35). Left to itself Plotly labelled a run's
    first token 0.5 and 1.5. Raises ValueError for a negative ``top``."""
    if top < 0:
        raise ValueError(f"A count is 0 or more, not {top}.")
    return {"tickmode": "array", "tickvals": list(range(0, top + 1, _tick_step(top)))}


def _pass_axis(stats: RunStats) -> dict:
    return _axis("target pass", **pass_ticks(len(stats.pass_tokens)))


def per_pass_counts(stats: RunStats) -> tuple[list[int], list[int]]:
    """(drafted, accepted) per target pass."""
    return list(stats.pass_drafted), list(stats.pass_accepted)


def running_acceptance(stats: RunStats) -> list[float | None]:
    """Acceptance rate (accepted / drafted) over passes 1..i, for each pass i (None until something is drafted):
    :attr:`RunStats.running_acceptance`, the card's :attr:`~specviz.core.counters.Counters.acceptance_rate` after
    each pass."""
    return list(stats.running_acceptance)


def expected_series(stats: RunStats) -> list[float | None]:
    """E[tau] = (1 - α^(m+1)) / (1 - α) after each pass (None until a draft was judged):
    :attr:`RunStats.running_expected`, the card's :attr:`~specviz.core.counters.Counters.expected_tokens_per_pass`
    after each pass, so the line ends at the card's figure."""
    return list(stats.running_expected)


def _line(x, y, name, color, width=3, dash=None, shape=None, markers=False) -> dict:
    line = {"color": color, "width": width}
    if dash:
        line["dash"] = dash
    if shape:
        line["shape"] = shape
    return {"type": "scatter", "x": list(x), "y": list(y), "name": name, "line": line,
            "mode": "lines+markers" if markers else "lines", "marker": {"size": 4}}


def _bar(x, y, name, color, opacity=0.6, **extra) -> dict:
    return {"type": "bar", "x": list(x), "y": list(y), "name": name, "marker": {"color": color},
            "opacity": opacity, **extra}


def _hover(traces: list[dict], template: str) -> list[dict]:
    """``traces`` with ``template`` as the hover text of each one that has none of its own: the full trace name
    and the value's unit, where Plotly's own label cut the name ("standard dec... (27, 1)") and gave no unit."""
    for trace in traces:
        trace.setdefault("hovertemplate", template + "<extra></extra>")
    return traces


# ------------------------------------------------------------------------------------------------ panels


def acceptance_panel(spec: RunStats, base: RunStats) -> Panel:
    """Acceptance rate per pass (bars) and running (line); bonus tokens excluded; a pass that drafted nothing (the
    gate, k = auto's plain step, no n-gram match) is marked on the axis, so its missing bar never reads as 0 %
    accepted (a trial). With no token drafted yet (k =
    auto took only plain steps, or the n-gram drafter found nothing to copy) the title says so, as the by-position
    chart's does, instead of an empty axis with no word."""
    x = _pass_numbers(spec)
    none = not any(spec.pass_drafted)
    traces = [_bar(x, spec.pass_acceptance, "acceptance per pass", COLORS["accepted"], 0.5),
              _line(x, running_acceptance(spec), "acceptance, running", COLORS["speculative"])]
    plain = [p for p, drafted in zip(x, spec.pass_drafted) if not drafted]
    if plain and not none:  # a pass that drafted nothing has no rate: marked, so it never reads as 0 % accepted
        mark = {"symbol": "x-thin-open", "size": 9, "color": COLORS["baseline"], "line": {"width": 2}}
        traces.append({"type": "scatter", "x": plain, "y": [0.0] * len(plain), "mode": "markers",
                       "name": "nothing drafted (no rate)", "marker": mark,
                       "hovertemplate": "pass %{x}: nothing drafted, a plain step (no acceptance rate)<extra></extra>"})
    _hover(traces, "pass %{x}: %{y:.0%} (%{fullData.name})")
    return Panel("Acceptance rate (no token drafted)" if none else "Acceptance rate (accepted ÷ drafted)", traces,
                 _pass_axis(spec), _axis("acceptance", range=[0, 1.05]))


def tokens_per_pass_panel(spec: RunStats, base: RunStats) -> Panel:
    """Tokens emitted per target pass (bonus included), the running mean, the value expected from α, and the
    baseline's one token per pass."""
    x = _pass_numbers(spec)
    return Panel("Tokens per target pass", _hover([
        _bar(x, spec.pass_tokens, "tokens per pass", COLORS["speculative"], 0.35),
        _line(x, spec.running_tokens_per_pass, "tokens/pass, running mean", COLORS["speculative"]),
        _line(x, expected_series(spec), "expected from α", COLORS["expected"], 2, "dash"),
        _line(x, [1.0] * len(x), "standard decoding (1)", COLORS["baseline"], 1.5, "dot"),
    ], "pass %{x}: %{y:.2f} tokens (%{fullData.name})"), _pass_axis(spec), _axis("tokens", rangemode="tozero"))


SECONDS_FROM_MS = 2000.0
"""A time axis whose largest value reaches this many ms is drawn in seconds: a 20-second run read "20k ms"."""


def time_unit(values_ms) -> tuple[float, str]:
    """(divisor, unit) for a time axis over ``values_ms`` (ms; None entries skipped): (1000, "s") once the largest
    reaches :data:`SECONDS_FROM_MS`, else (1, "ms")."""
    top = max((v for v in values_ms if v is not None), default=0.0)
    return (1000.0, "s") if top >= SECONDS_FROM_MS else (1.0, "ms")


def _scaled(values, divisor: float) -> list:
    return [None if v is None else v / divisor for v in values]


def latency_panel(spec: RunStats, base: RunStats) -> Panel:
    """Tokens emitted against each run's own clock (ms, or s once a run passes :data:`SECONDS_FROM_MS`): the
    steeper line is the faster run."""
    runs = [(stats, name) for stats, name in ((spec, "speculative"), (base, "baseline")) if stats.curve_ms]
    divisor, unit = time_unit([t for stats, _ in runs for t in stats.curve_ms])
    traces = [_line(_scaled(stats.curve_ms, divisor), stats.curve_tokens, name, COLORS[name], shape="hv",
                    markers=True) for stats, name in runs]
    top = max((t for stats in (spec, base) for t in stats.curve_tokens), default=0)
    _hover(traces, f"%{{fullData.name}}: %{{y}} tokens at %{{x:.{2 if unit == 's' else 0}f}} {unit}")
    return Panel("Tokens emitted vs time (own clock)", traces, _axis(f"{unit} since the prefill started"),
                 _axis("tokens", rangemode="tozero", **count_ticks(int(top))))


POSITION_BARS = "accepted ÷ judged at each position<br>error bars: 95% Wilson interval"
"""The by-position chart's bar name (its legend's note): what a bar is and what its error bar is (each line fits a
400 px phone, :data:`PHONE_LINE_CHARS`)."""


def position_panel(spec: RunStats, base: RunStats) -> Panel:
    """Per-position acceptance P(draft token i accepted | tokens before it accepted), i = 1..k, each bar with its
    95% Wilson interval of accepted / judged at that position (:meth:`RunStats.position_intervals`; none where no
    pass judged it), the counts in its hover, and α."""
    values = spec.per_position_acceptance
    x = list(range(1, len(values) + 1))
    traces = [_bar(x, values, POSITION_BARS, COLORS["accepted"], 0.7, **_position_spread(spec))]
    if spec.alpha is not None and x:
        traces.append(_line(x, [spec.alpha] * len(x), "α (all positions)", COLORS["expected"], 2, "dash"))
    _hover(traces, "position %{x}: %{y:.0%} (%{fullData.name})")
    if not x:  # k = auto took only plain steps so far (or the drafter found nothing): say so, not an empty axis
        return Panel("Acceptance by draft position (no token drafted)", traces,
                     _axis("position in the draft", dtick=1, range=[0.5, 4.5]),
                     _axis("P(kept | earlier kept)", range=[0, 1.05]))
    return Panel("Acceptance by draft position", traces, _axis("position in the draft", **position_ticks(len(x))),
                 _axis("P(kept | earlier kept)", range=[0, 1.05]))


def _position_spread(spec: RunStats) -> dict:
    """The by-position bars' error bars (each position's Wilson interval, 0 where no pass judged it), and their hover:
    the share, the counts and the interval ("position 2: 80% kept, 8 of 10 judged; 95% 49–94%")."""
    up, down, words = [], [], []
    for interval, kept, judged in zip(spec.position_intervals(), spec.position_accepted, spec.position_tried):
        if interval is None:
            up.append(0.0), down.append(0.0), words.append("no pass judged it")
            continue
        up.append(interval.high - interval.value), down.append(interval.value - interval.low)
        words.append(f"{kept} of {judged} judged; 95% {interval.low:.0%}–{interval.high:.0%}")
    return {"error_y": {"type": "data", "symmetric": False, "array": up, "arrayminus": down, "visible": bool(up),
                        "color": "#24292f", "thickness": 1.5, "width": 4},
            "text": words, "textposition": "none",
            "hovertemplate": "position %{x}: %{y:.0%} kept, %{text}<extra></extra>"}


POSITION_TICKS = 8
"""The most labels the draft-position axis carries: a third of the Live tab at 1400 px (and a 400 px phone) holds
about this many upright two-digit labels; k = auto may draft up to 16 positions, whose 16 labels collided. The
axes of k 1..16 (the Why tab's and the classroom's what-if charts) keep the same few labels."""


def position_ticks(positions: int) -> dict:
    """The ticks of an axis of whole numbers 1..``positions`` (the draft positions, or k on the what-if charts of
    :mod:`app.why.figures` and :mod:`app.classroom.figures`): every one up to :data:`POSITION_TICKS`, else 1, every
    ``step``-th (2 up to 12 positions, 4 above) and the last, e.g. 16 -> 1, 4, 8, 12, 16; labels stay upright
    (``tickangle`` 0), as Plotly would turn a crowded axis' labels on their side. The hover still names every
    bar's (or point's) position or k."""
    if positions <= POSITION_TICKS:
        return {"tickmode": "array", "tickvals": list(range(1, positions + 1)), "tickangle": 0}
    step = 2 if positions <= 12 else 4
    ticks = sorted({1, positions, *range(step, positions + 1, step)})
    if positions - 1 in ticks and positions - 1 != 1:  # the last label never crowds the one before it
        ticks.remove(positions - 1)
    return {"tickmode": "array", "tickvals": ticks, "tickangle": 0}


def k_panel(spec: RunStats, base: RunStats) -> Panel:
    """Draft length k per pass (flat for a fixed k; the adaptive or automatic choice otherwise), how many were
    drafted, and, for k = auto, the gain it expected from its choice over a plain step (k = 0)."""
    x = _pass_numbers(spec)
    drafted, _ = per_pass_counts(spec)
    k_line = _line(x, spec.pass_k, "k", COLORS["draft"], shape="hv", markers=True)
    traces = [_bar(x, drafted, drafted_name(drafted, spec.pass_k), COLORS["draft"], 0.3), k_line]
    gains = spec.pass_gain
    y_axis = _axis("draft tokens per pass", rangemode="tozero", **count_ticks(max([*drafted, *spec.pass_k], default=0)))
    if any(g is not None for g in gains):
        k_line["text"] = [f"k = {k}" + (f"; expected {g:.2f}× a plain step" if g is not None else "")
                          for k, g in zip(spec.pass_k, gains)]
        k_line["hovertemplate"] = "pass %{x}: %{text}<extra></extra>"
        traces.append(_line(x, gains, "expected gain (× a plain step)", COLORS["expected"], 2, "dot"))
        y_axis = _axis("draft tokens; expected gain (×)", rangemode="tozero")  # gains are fractions
    _hover(traces, "pass %{x}: %{y:.3~f} (%{fullData.name})")
    return Panel("Draft length k per pass", traces, _pass_axis(spec), y_axis)


def drafted_name(drafted, ks) -> str:
    """The k chart's bar name: "drafted", and why a bar stands above the k line when one does: a tree pass drafts
    many nodes up to depth k, a lookahead pass verifies several n-grams of length k."""
    if any(d > k for d, k in zip(drafted, ks)):
        return "drafted (a tree or lookahead pass<br>drafts more tokens than its depth k)"  # 2 lines fit a phone
    return "drafted"


PREFILL_HOVER = ("%{y}: prefill %{x:.3~f} UNIT, one measurement (a gap between the two runs' prefills may be"
                 " noise)<extra></extra>")


def time_panel(spec: RunStats, base: RunStats) -> Panel:
    """Where each run's time went (ms, or s once a run's total passes :data:`SECONDS_FROM_MS`; own clock): the
    prefill (one measurement per run, which its hover says), drafting, the target's forwards after the prefill
    (verify: the same figures as the "Where the time went" card, which counts from the prefill's end), the rest."""
    runs = ["speculative", "baseline"]
    parts = {
        "prefill": ("prefill (one measurement)", [spec.ttft_ms, base.ttft_ms]),
        "draft": ("draft", [spec.draft_ms, base.draft_ms]),
        "verify": ("target forwards", [spec.verify_ms, base.verify_ms]),
        "other": ("other", [spec.other_ms, base.other_ms]),
    }
    totals = [sum(values[i] or 0.0 for _, values in parts.values()) for i in range(len(runs))]
    divisor, unit = time_unit(totals)
    traces = [{"type": "bar", "y": runs, "x": _scaled(values, divisor), "name": label, "orientation": "h",
               "marker": {"color": COLORS[key]}} for key, (label, values) in parts.items()]
    traces[0]["hovertemplate"] = PREFILL_HOVER.replace("UNIT", unit)
    _hover(traces, f"%{{y}}: %{{fullData.name}} %{{x:.3~f}} {unit}")
    return Panel(f"Time spent ({unit}, own clock)", traces, _axis(unit), _axis(""), barmode="stack")


# ------------------------------------------------------------------------------------------------ figures


TITLE_LINE_CHARS = 30
"""The longest chart title kept on one line: a third of a 1400 px page holds about 30 characters of the 14 px bold
title; a longer one, centred over its chart, ran past the page's left edge ("Acceptance by draft position (no
token drafted)")."""


def title_html(title: str) -> str:
    """A chart title in bold; one longer than :data:`TITLE_LINE_CHARS` with a bracketed part ("… (no token
    drafted)") keeps its head on the first line and puts the bracket, smaller, on a second."""
    head, sep, tail = title.partition(" (")
    if len(title) <= TITLE_LINE_CHARS or not sep:
        return f"<b>{title}</b>"
    return f"<b>{head}</b><br><span style='font-size:12px'>({tail}</span>"


PHONE_LINE_CHARS = 40
"""The longest line of a chart's text (a note, a legend title) that a 400 px phone shows whole: the figure there is
about 336 px wide, 236 px of it plot, and an 11-12 px line holds about 40 characters from the plot's left edge."""


def wrap_words(text: str, width: int = PHONE_LINE_CHARS) -> str:
    """``text`` with each of its lines (split by ``<br>``) broken at spaces into lines of at most ``width`` visible
    characters (tags such as ``<b>`` do not count), joined by ``<br>``; a word longer than ``width`` gets a line of
    its own, never cut. Every word is kept, in order. Raises ValueError for a ``width`` below 1."""
    if width < 1:
        raise ValueError(f"A line must hold at least one character, not {width}.")
    out = []
    for line in text.split("<br>"):
        current, shown = [], 0
        for word in line.split(" "):
            size = len(_TAG.sub("", word))
            if current and shown + 1 + size > width:
                out.append(" ".join(current))
                current, shown = [], 0
            shown += size + (1 if current else 0)
            current.append(word)
        out.append(" ".join(current))
    return "<br>".join(out)


def visible_lines(text: str) -> list[str]:
    """The lines of a chart text as shown: split at ``<br>``, tags removed (for checks of :func:`wrap_words`)."""
    return [_TAG.sub("", line) for line in text.split("<br>")]


_TAG = re.compile(r"<[^>]*>")


def _layout(height: int) -> dict:
    return {"template": "plotly_white", "font": {"family": FONT, "size": 12}, "height": height,
            "margin": {"l": 55, "r": MODEBAR_MARGIN_PX, "t": 50, "b": 40}, "modebar": MODEBAR,
            "legend": {"orientation": "h", "y": -0.22, "x": 0, "font": {"size": 11}}}


def _single(panel: Panel) -> go.Figure:
    layout = _layout(320) | {"title": {"text": title_html(panel.title), "font": {"size": 15}}, "xaxis": panel.xaxis,
                             "yaxis": panel.yaxis}
    if panel.barmode:
        layout["barmode"] = panel.barmode
    return go.Figure({"data": panel.traces, "layout": layout})


def acceptance_figure(spec: RunStats, base: RunStats) -> go.Figure:
    """Acceptance rate per pass and running (see :func:`acceptance_panel`)."""
    return _single(acceptance_panel(spec, base))


def tokens_per_pass_figure(spec: RunStats, base: RunStats) -> go.Figure:
    """Tokens per target pass: measured, expected from α, and the baseline (see :func:`tokens_per_pass_panel`)."""
    return _single(tokens_per_pass_panel(spec, base))


def latency_figure(spec: RunStats, base: RunStats) -> go.Figure:
    """Tokens emitted vs own-clock time for both runs (see :func:`latency_panel`)."""
    return _single(latency_panel(spec, base))


def position_figure(spec: RunStats, base: RunStats) -> go.Figure:
    """Per-position acceptance (see :func:`position_panel`)."""
    return _single(position_panel(spec, base))


def k_figure(spec: RunStats, base: RunStats) -> go.Figure:
    """The k trace (see :func:`k_panel`)."""
    return _single(k_panel(spec, base))


def time_figure(spec: RunStats, base: RunStats) -> go.Figure:
    """Time breakdown of both runs (see :func:`time_panel`)."""
    return _single(time_panel(spec, base))


PANELS = (acceptance_panel, tokens_per_pass_panel, latency_panel, position_panel, k_panel, time_panel)


K_TITLES = {"heuristic": "k per pass (adaptive)",
            "auto": "k per pass (auto, from costs)"}


BASELINE_PANELS = (latency_panel, time_panel)
"""The charts of a run without a drafter (standard decoding only): the ones that have something to show."""


def dashboard_figure(spec: RunStats, base: RunStats, *, k_schedule: str = "fixed", columns: int = 3,
                     speculative: bool = True) -> go.Figure:
    """All charts in one figure, ``columns`` per row, each with its own legend underneath; the k chart's title
    names the draft-length schedule ("fixed", "heuristic" or "auto"). ``speculative=False`` (drafter "none"):
    only :data:`BASELINE_PANELS`, since acceptance, tokens per pass, positions and k have nothing to show."""
    panels = [make(spec, base) for make in (PANELS if speculative else BASELINE_PANELS)]
    if speculative and k_schedule in K_TITLES:
        panels[PANELS.index(k_panel)].title = K_TITLES[k_schedule]
    rows = -(-len(panels) // columns)
    row_px, plot_px, top_px, bottom_px = 420, 240, 40, 10  # a row: plot, axis title, legend, next title
    total_px = row_px * (rows - 1) + plot_px + 130 + top_px + bottom_px  # the last row: plot, axis title, legend
    gap_x = 0.07
    width = (1 - gap_x * (columns - 1)) / columns
    data, notes = [], []
    layout = _layout(total_px) | {"margin": {"l": 55, "r": MODEBAR_MARGIN_PX, "t": top_px, "b": bottom_px},
                                  "showlegend": True}
    inner = total_px - top_px - bottom_px
    for i, panel in enumerate(panels):
        row, col = divmod(i, columns)
        n = "" if i == 0 else str(i + 1)
        x0 = col * (width + gap_x)
        y1 = 1 - row * row_px / inner
        y0 = y1 - plot_px / inner
        layout[f"xaxis{n}"] = panel.xaxis | {"domain": [x0, x0 + width], "anchor": f"y{n}"}
        layout[f"yaxis{n}"] = panel.yaxis | {"domain": [y0, y1], "anchor": f"x{n}"}
        legend = f"legend{n}"
        layout[legend] = {"orientation": "v", "x": x0, "xanchor": "left", "y": y0 - 46 / inner, "yanchor": "top",
                          "font": {"size": 11}, "bgcolor": "rgba(0,0,0,0)", "tracegroupgap": 0,
                          "traceorder": "normal"}
        for trace in panel.traces:
            data.append(trace | {"xaxis": f"x{n}", "yaxis": f"y{n}", "legend": legend})
        notes.append({"text": title_html(panel.title), "x": x0 + width / 2, "y": y1, "xref": "paper",
                      "yref": "paper", "xanchor": "center", "yanchor": "bottom", "showarrow": False,
                      "font": {"size": 14}})
    layout["annotations"] = notes
    layout["barmode"] = "stack"  # one bar series per chart except the time breakdown, which stacks
    return go.Figure({"data": data, "layout": layout})
