"""The Arena's two figures, pure functions of the pooled rows: :func:`arena_figure` (four grouped bar charts: tokens
per pass, acceptance, tokens/s and the decoding speedup) and :func:`predictions_figure` (the measured speedup beside
the two predictions). Noisy bars are hatched; every bar but the standard row's reference figures carries its spread
as error bars (tokens per pass and acceptance: their 95% interval over the passes)."""

from __future__ import annotations

import plotly.graph_objects as go

from app.arena.tables import (OVER_COUNTS, PERCENT_SHARES, share_basis, share_interval, share_spread,
                               tokens_per_pass_cell)
from app.arena.verdicts import (NO_SPREAD, SPEEDUP_KEYS, _has_spread, _noise_word, _noisy, range_text, spread_text)
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX, off_the_top
from specviz.analysis.arena_rows import BASELINE


SHADES = {  # per drafter, dark to light: one shade per k; none is the baseline's neutral grey (COLORS["baseline"])
    "ngram": ("#0f5323", "#1a7f37", "#2da44e", "#4ac26b", "#6fdd8b", "#aceebb"),
    "early-exit": ("#3e1f79", "#6f42c1", "#8250df", "#a475f9", "#c297ff", "#d8b9ff"),
    "bf16": ("#0a3069", "#0550ae", "#0969da", "#218bff", "#54aeff", "#80ccff"),
    "model": ("#762c00", "#953800", "#bc4c00", "#e16f24", "#fb8f44", "#ffb77c"),
    "oracle": ("#000000", "#1f2328", "#24292f", "#32383f", "#424a53", "#57606a"),  # charcoal: apart from the grey
    "distilled": ("#3b2314", "#5c3a21", "#8a5a36", "#b07a4f", "#cf9f78", "#e8c9ad"),
    "suffix": ("#0c4a6e", "#075985", "#0284c7", "#0ea5e9", "#38bdf8", "#7dd3fc"),
    "eagle": ("#4d2d00", "#7d4e00", "#9a6700", "#bf8700", "#d4a72c", "#eac54f"),
    "medusa": ("#5c0020", "#99003a", "#bf3989", "#e85aad", "#f692ce", "#ffadda"),
    "eagle:tree": ("#00403e", "#006a67", "#008f8a", "#1fb5ad", "#5fd3cb", "#a6ece6"),
    "medusa:tree": ("#2f3a00", "#4d5e00", "#6b8000", "#8fa61a", "#b3c94d", "#d6e89a"),
    "eagle:lookup": ("#1b1f5e", "#2e3a8c", "#4051b5", "#5c6bc0", "#7986cb", "#9fa8da"),
    "medusa:lookup": ("#67060c", "#a40e26", "#cf222e", "#fa4549", "#ff8182", "#ffcecb"),
    "eagle:tree:lookup": ("#3d0a4d", "#6a1b7a", "#8e24aa", "#ab47bc", "#ce93d8", "#e1bee7"),  # violet
    "medusa:tree:lookup": ("#1c2b36", "#2f4858", "#46667a", "#5f8599", "#86a6b8", "#b4cbd7"),  # slate
    "lookahead": ("#003d4d", "#005f73", "#0a9396", "#2bb3b1", "#6cd0c9", "#a8e6df"),
}


def variant_colors(rows: list[dict]) -> dict[str, str]:
    """A colour per method label: the baseline grey, each drafter its own hue (a tree variant such as
    "eagle:tree" a hue of its own), each k a shade of it, spread from dark to light so that two k's of one
    drafter stay apart."""
    labels: dict[str, list[str]] = {}  # drafter -> its method labels, in order of appearance
    colors = {}
    for r in rows:
        label = r["variant"]
        if r["drafter"] == BASELINE:
            colors[label] = COLORS["baseline"]
        elif label not in labels.setdefault(r["drafter"], []):
            labels[r["drafter"]].append(label)
    for drafter, names in labels.items():
        shades = SHADES.get(drafter, SHADES["oracle"])
        top = len(shades) - 1
        for i, label in enumerate(names):  # indices 1..top (the darkest is kept for text), evenly spread
            index = 1 + round(i * (top - 1) / (len(names) - 1)) if len(names) > 1 else 2
            colors[label] = shades[min(index, top)]
    return colors


def _layout(height: int) -> dict:
    return {"template": "plotly_white", "font": {"family": FONT, "size": 12}, "height": height,
            "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 70, "b": 50}, "modebar": MODEBAR, "barmode": "group",
            "bargap": 0.25,
            "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 12},
                       "title": {"text": "method "}}}


ARENA_PANELS = (  # (title, key, y-axis title, include the baseline, y range)
    ("Tokens per target pass (bonus included)", "tokens_per_pass", "tokens / pass", True, None),
    ("Acceptance rate (accepted ÷ drafted)", "acceptance_rate", "acceptance", False, [0, 1.05]),
    ("Tokens per second<br>(own clock, prefill included)", "tokens_per_s", "tokens / s", True, None),
    ("Decoding speedup (after the prefill)", "decode_speedup", "× standard", False, None),
)


TIMED_KEYS = ("tokens_per_s", "decode_speedup")  # the panels whose bars are timings (noise can mislead them)
SPREAD_PANELS = SPEEDUP_KEYS + ("tokens_per_s",)  # the panels whose bars carry error bars (spread_bars)
SHARE_PANELS = ("acceptance_rate",)  # the panels of a counted share: error bars of its Wilson interval
COUNTED_PANELS = ("tokens_per_pass",)  # a mean counted over the passes: error bars of its interval over them


def _noise_marks(rows: list[dict]) -> dict:
    """Plotly marker settings: noisy rows' bars hatched and faded."""
    return {"pattern": {"shape": ["/" if _noisy(r) else "" for r in rows], "fillmode": "overlay", "size": 6,
                        "solidity": 0.4},
            "opacity": [0.45 if _noisy(r) else 1.0 for r in rows]}


HATCHED_NOTE = ("hatched bars: too noisy to tell (ratios against<br>its prompt's standard runs on both sides of "
                "1),<br>or no reading (too short, or the speed changed)")
"""The note under the Arena's charts when a bar is hatched, in lines short enough for a phone-wide chart."""

SPREAD_NOTE = "error bars: its ratio against each standard run<br>of its prompt, widened by their own spread"
RATE_SPREAD_NOTE = "error bars: its slowest to its fastest run"
"""What the tokens/s panel's error bars are (:func:`specviz.analysis.arena_rows.timed_spread`)."""
SHARE_SPREAD_NOTE = "error bars: 95% interval over its passes"
SHARE_COUNTS_NOTE = "error bars: 95% Wilson interval of its counts<br>(no passes to resample)"
SHARE_MIXED_NOTE = "<br>(Wilson on its counts where no passes are kept)"
"""What the acceptance panel's error bars are (:func:`app.arena.tables.share_interval`): the interval over the
rows' passes; the Wilson interval of their counts where every row lacks per-pass counts; the first with the last
added where only some do."""
TOKENS_SPREAD_NOTE = "error bars: 95% interval over its passes<br>(standard decoding: one per pass, no bar)"
"""What the tokens-per-pass panel's error bars are (:func:`specviz.analysis.arena_intervals.tokens_per_pass_interval`,
the Live tab's card's interval)."""


def _spread_subtitle(rows: list[dict], key: str = "decode_speedup") -> str:
    """The line under a panel's title that says what its error bars are (and where there are none): a speedup's
    (:data:`SPREAD_NOTE`, methods only) or tokens/s's (:data:`RATE_SPREAD_NOTE`)."""
    speedup = key in SPEEDUP_KEYS
    shown = [r for r in rows if r["drafter"] != BASELINE] if speedup else rows
    if not shown:
        return ""
    none = any(not _has_spread(r, key) for r in shown if r.get(key) is not None)
    text = (SPREAD_NOTE if speedup else RATE_SPREAD_NOTE) + (f"<br>{NO_SPREAD} where no bar is drawn" if none else "")
    return _note_line(text)


def _note_line(text: str) -> str:
    """``text`` as the small grey line under a panel's title."""
    return f"<br><span style='font-size:11px;color:#57606a;font-weight:normal'>{text}</span>"


def spread_bars(rows: list[dict], key: str = "decode_speedup") -> dict:
    """Plotly error bars for the figure ``key`` of ``rows``: from each value down to its ``<key>_low`` and up to its
    ``<key>_high`` (a speedup: its ratios against its prompt's standard runs, :func:`spread_text`; tokens/s:
    its slowest and fastest run; tokens per pass: its 95% interval over the passes); none for a row without a
    spread, nor for the standard row's speedups (the reference)."""
    def ends(r: dict) -> tuple[float, float]:
        value, low, high = r.get(key), r.get(f"{key}_low"), r.get(f"{key}_high")
        if value is None or low is None or high is None or (key in SPEEDUP_KEYS and r.get("drafter") == BASELINE):
            return 0.0, 0.0
        return max(0.0, high - value), max(0.0, value - low)

    up, down = zip(*(ends(r) for r in rows)) if rows else ((), ())
    return {"type": "data", "symmetric": False, "array": list(up), "arrayminus": list(down), "visible": any(up + down),
            "color": "#24292f", "thickness": 1.5, "width": 4}


def _off_the_top(rows: list[dict], key: str, notes: list[dict], xref: str, yref: str, also=()) -> dict:
    """The y-axis settings of a speedup chart of ``rows``' ``key`` bars and ``also`` (the keys of other figures drawn
    on it, with their error bars), its height not set by one spread far above them (:func:`app.figures.off_the_top`;
    its note appended to ``notes``, on two lines for a phone: "a spread runs off the top (to 9.60× <br>for early-exit
    k=4, qa)")."""
    keys = (key, *also)
    top = max([1.0] + [r[k] for r in rows for k in keys if r.get(k) is not None])
    highs = [(r[f"{k}_high"], f"<br>for {r['variant']}, {r['category']}") for r in rows for k in keys
             if r.get(f"{k}_high") is not None and r.get("drafter") != BASELINE]
    axis, said = off_the_top(top, highs, "a spread", xref, yref)
    notes += said
    return axis


def _spread_word(row: dict, key: str) -> str:
    """The hover's spread of a bar: "(1.15–1.31 against its prompt's standard runs, with their spread)",
    "(reference)" or "(one run: no spread)" for a speedup; "(12.1–13.0 from its slowest to its fastest run)" for tokens/s."""
    if key not in SPEEDUP_KEYS:
        if not _has_spread(row, key):
            return f"({NO_SPREAD})"
        return f"({range_text(row[f'{key}_low'], row[f'{key}_high'], 1)} from its slowest to its fastest run)"
    text = spread_text(row, key)
    if text in ("reference", NO_SPREAD):
        return f"({text})"
    return f"({text} against its prompt's standard runs, with their spread)"


def _with_share_ends(rows: list[dict], key: str) -> list[dict]:
    """``rows`` with ``<key>_low`` / ``<key>_high`` set from each row's interval of the share (over its passes, or
    the Wilson interval of its counts: :func:`app.arena.tables.share_interval`; None where it has none), for
    :func:`spread_bars`."""
    out = []
    for r in rows:
        interval = share_interval(r, key)
        out.append(r | {f"{key}_low": interval and interval.low, f"{key}_high": interval and interval.high})
    return out


def _share_words(row: dict, key: str) -> str:
    """What a share's interval is, for its hover: "95% interval over its passes" or, for a row without per-pass
    counts, "95% Wilson interval of its counts"."""
    if share_basis(row, key) == OVER_COUNTS:
        return "95% Wilson interval of its counts"
    return "95% interval over its passes"


def _share_subtitle(rows: list[dict], key: str) -> str:
    """The line under a share's panel title (:data:`SHARE_SPREAD_NOTE`, :data:`SHARE_COUNTS_NOTE`, or the first
    with :data:`SHARE_MIXED_NOTE`), by what the rows' intervals were computed over (:func:`share_basis`)."""
    bases = {share_basis(r, key) for r in rows} - {None}
    if bases == {OVER_COUNTS}:
        return _note_line(SHARE_COUNTS_NOTE)
    return _note_line(SHARE_SPREAD_NOTE + (SHARE_MIXED_NOTE if OVER_COUNTS in bases else ""))


def _subtitle(rows: list[dict], key: str) -> str:
    """The note line under panel ``key``'s title, saying what its error bars are: a speedup's or tokens/s's
    (:func:`_spread_subtitle`), a counted share's (:func:`_share_subtitle`), tokens per pass's
    (:data:`TOKENS_SPREAD_NOTE`); "" for a panel without error bars."""
    if key in SPREAD_PANELS:
        return _spread_subtitle(rows, key)
    if key in SHARE_PANELS:
        return _share_subtitle(rows, key)
    return _note_line(TOKENS_SPREAD_NOTE) if key in COUNTED_PANELS and rows else ""


def _tokens_words(row: dict) -> str:
    """The hover's spread of a tokens-per-pass bar, as its table cell's brackets
    (:func:`app.arena.tables.tokens_per_pass_cell`): "(1.75–4.00, 95% interval over its passes)", "(standard
    decoding: one per pass)", "(one pass: no spread)"."""
    said = tokens_per_pass_cell(row).partition(" ")[2]
    return f"{said[:-1]}, 95% interval over its passes)" if row.get("tokens_per_pass_low") is not None else said


def _bar_spread(rows: list[dict], key: str) -> tuple[list[str], dict]:
    """The hover words and the plotly settings (error bars, noise marks) of one method's bars of panel ``key``."""
    timed = key in TIMED_KEYS
    if key in COUNTED_PANELS:
        return [_tokens_words(r) for r in rows], {"error_y": spread_bars(rows, key)}
    if key in SHARE_PANELS:
        ended = _with_share_ends(rows, key)
        words = [f"({share_spread(r, key)}, {_share_words(r, key)})" if r[f"{key}_low"] is not None else ""
                 for r in ended]
        return words, {"error_y": spread_bars(ended, key)}
    words = [(_spread_word(r, key) + " " if key in SPREAD_PANELS else "") + (_noise_word(r) if timed else "")
             for r in rows]
    return words, ({"error_y": spread_bars(rows, key)} if key in SPREAD_PANELS else {})


def _prediction_word(row: dict, key: str) -> str:
    """The hover's spread of a prediction marker, which is a model's figure, not a measurement: "(a model of the
    measured α; 1.40–1.61 from α's 95% interval and the spread of T_step, T_verify, T_draft)" (the ends of each
    that push it furthest each way: :func:`specviz.analysis.arena_rows.derived_spread`) or "(a model of the
    measured α; α and its timings one sample each: no spread)"."""
    if not _has_spread(row, key):
        return ("(a model of the measured α; α and its timings one sample each: no spread)"
                if row.get(key) is not None else "")
    return (f"(a model of the measured α; {range_text(row[f'{key}_low'], row[f'{key}_high'], 2)} from α's 95% "
            "interval and the spread of T_step, T_verify, T_draft)")


def shown_rows(summary: list[dict]) -> list[dict]:
    """The pooled rows worth showing: per category, and "all" only when there is more than one category."""
    several = len({r["category"] for r in summary if r["level"] == "category"}) > 1
    return [r for r in summary if r["level"] == "category" or (r["level"] == "overall" and several)]


def arena_figure(summary: list[dict]) -> go.Figure:
    """Four grouped bar charts of the pooled rows: x = category (then "all"), one bar per method."""
    rows = shown_rows(summary)
    cats = list(dict.fromkeys(r["category"] for r in rows))
    colors = variant_colors(rows)
    labels = list(colors)
    columns, gap_x, gap_y = 2, 0.08, 0.2
    width, height = (1 - gap_x) / 2, (1 - gap_y) / 2
    layout = _layout(760)
    data, notes = [], []
    for i, (title, key, ytitle, with_base, yrange) in enumerate(ARENA_PANELS):
        row, col = divmod(i, columns)
        n = "" if i == 0 else str(i + 1)
        shown = ".0%" if key in PERCENT_SHARES else ".2f"  # a share in percent, as the table shows it: "58%"
        x0 = col * (width + gap_x)
        y1 = 1 - row * (height + gap_y)
        layout[f"xaxis{n}"] = {"domain": [x0, x0 + width], "anchor": f"y{n}", "type": "category",
                               "categoryorder": "array", "categoryarray": cats, "automargin": True}
        layout[f"yaxis{n}"] = {"domain": [max(0.0, y1 - height), y1], "anchor": f"x{n}", "automargin": True,
                               "title": {"text": ytitle, "font": {"size": 12}}, "rangemode": "tozero",
                               **({"range": yrange} if yrange else {}),
                               **({"tickformat": shown} if key in PERCENT_SHARES else {})}
        for label in labels:
            mine = [r for r in rows if r["variant"] == label]
            if not with_base and mine and mine[0]["drafter"] == BASELINE:
                continue
            words, bars = _bar_spread(mine, key)
            data.append({"type": "bar", "x": [r["category"] for r in mine], "y": [r.get(key) for r in mine],
                         "name": label, "legendgroup": label, "showlegend": i == 0 or (i == 2 and not with_base),
                         "marker": {"color": colors[label], **(_noise_marks(mine) if key in TIMED_KEYS else {})},
                         **bars,
                         "xaxis": f"x{n}", "yaxis": f"y{n}", "text": words, "textposition": "none",  # hover only
                         "hovertemplate": f"{label}<br>%{{x}}: %{{y:{shown}}} %{{text}}<extra>{title}</extra>"})
        if key == "decode_speedup":
            layout[f"yaxis{n}"] |= _off_the_top(rows, key, notes, f"x{n} domain", f"y{n} domain")
            layout["shapes"] = [{"type": "line", "xref": f"x{n} domain", "yref": f"y{n}", "x0": 0, "x1": 1, "y0": 1,
                                 "y1": 1, "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}}]
        notes.append({"text": f"<b>{title}</b>" + _subtitle(rows, key),
                      "x": x0 + width / 2, "y": y1, "xref": "paper", "yref": "paper",
                      "xanchor": "center", "yanchor": "bottom", "yshift": 4, "showarrow": False,
                      "font": {"size": 14}})
    if any(_noisy(r) for r in rows):
        # under the last chart's axis (y of the last panel's domain, so that assets/head.html, which moves only
        # paper-placed notes, keeps it under the last chart when a phone stacks them, not between two charts)
        notes.append({"text": HATCHED_NOTE, "x": 0, "y": -0.17, "xref": "paper", "yref": f"y{len(ARENA_PANELS)} domain",
                      "xanchor": "left", "yanchor": "top", "align": "left", "showarrow": False,
                      "font": {"size": 11, "color": COLORS["rejected"]}})
    layout["annotations"] = notes
    _legend_above_titles(layout, notes)
    return go.Figure({"data": data, "layout": layout})


def _legend_above_titles(layout: dict, notes: list[dict]) -> None:
    """Put the method legend (one row over the top charts) above the top row's titles, however many lines their
    notes under them take (the acceptance panel's can take three): at 1.06 of the plot's height it overlapped a
    three-line title. Sets the top margin and the legend's y (paper units, above 1)."""
    lines = max([1] + [1 + n["text"].count("<br>") for n in notes if n.get("y") == 1 and n.get("yanchor") == "bottom"])
    title_px = 18 + 15 * (lines - 1) + 4  # a 14 px bold title, 11 px note lines, the notes' 4 px shift
    layout["margin"]["t"] = max(90, title_px + 44)
    layout["margin"]["b"] = 100  # room for the hatched-bars note's three lines
    inner = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    layout["legend"]["y"] = 1 + (title_px + 6) / inner


PREDICTION_KEYS = ("predicted_speedup_paper", "predicted_speedup_measured")
"""The predictions the chart of :func:`predictions_figure` draws as markers."""
BAR_SPREAD_NOTE = "bars' error bars: the ratio against each standard<br>run of its prompt, widened by their spread"
MARKER_SPREAD_NOTE = "markers' error bars: α's 95% interval and the<br>spread of T_step, T_verify and T_draft"
NO_MARKER_SPREAD_NOTE = "a marker without error bars: one run, no spread"
"""The notes of :func:`predictions_figure` on its error bars, in lines short enough for a phone-wide chart (the
markers' spread: :func:`specviz.analysis.arena_rows.derived_spread`)."""


def _prediction_notes(rows: list[dict]) -> list[str]:
    """What :func:`predictions_figure`'s error bars are, one note each: the bars' (:data:`BAR_SPREAD_NOTE`), the
    markers' where one has a spread (:data:`MARKER_SPREAD_NOTE`), and :data:`NO_MARKER_SPREAD_NOTE` where a marker
    has none; nothing without rows."""
    if not rows:
        return []
    shown = [(r, key) for r in rows for key in PREDICTION_KEYS if r.get(key) is not None]
    said = [BAR_SPREAD_NOTE]
    if any(_has_spread(r, key) for r, key in shown):
        said.append(MARKER_SPREAD_NOTE)
    if any(not _has_spread(r, key) for r, key in shown):
        said.append(NO_MARKER_SPREAD_NOTE)
    return said


def predictions_figure(summary: list[dict]) -> go.Figure:
    """Measured speedup after the prefill (bars) beside the two predictions from the measured α (markers), per category
    and method; the gap between the markers is the verification overhead. Each bar and each marker carries its spread as
    error bars (a marker's: ``<prediction>_low`` / ``_high``, from α's interval and the spread of its timings; none
    where it has none), and the note above the chart says what they are (:func:`_prediction_notes`); the markers sit
    side by side on their bar (Plotly's ``scattermode`` "group"), so their error bars stay apart."""
    rows = [r for r in shown_rows(summary) if r["drafter"] != BASELINE]
    colors = variant_colors(rows)
    x = [[r["category"] for r in rows], [r["variant"] for r in rows]]
    data = [
        {"type": "bar", "x": x, "y": [r["decode_speedup"] for r in rows],
         "name": "measured (after the prefill)",
         "marker": {"color": [colors[r["variant"]] for r in rows], **_noise_marks(rows)}, "opacity": 0.85,
         "error_y": spread_bars(rows), "text": [f"{_spread_word(r, 'decode_speedup')} {_noise_word(r)}" for r in rows],
         "textposition": "none", "hovertemplate": "%{x}<br>measured %{y:.2f}× %{text}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "x": x, "y": [r["predicted_speedup_paper"] for r in rows],
         "name": "predicted, paper (verification = 1 step)",
         "marker": {"symbol": "diamond", "size": 11, "color": "#ffffff", "line": {"color": "#24292f", "width": 2}},
         "error_y": spread_bars(rows, "predicted_speedup_paper") | {"color": "#24292f", "width": 6},
         "text": [_prediction_word(r, "predicted_speedup_paper") for r in rows],
         "hovertemplate": "%{x}<br>paper %{y:.2f}× %{text}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "x": x, "y": [r["predicted_speedup_measured"] for r in rows],
         "name": "predicted with measured costs",
         "marker": {"symbol": "x-thin", "size": 12, "color": COLORS["rejected"], "line": {"color": COLORS["rejected"],
                                                                                      "width": 3}},
         "error_y": spread_bars(rows, "predicted_speedup_measured") | {"color": COLORS["rejected"], "width": 6},
         "text": [_prediction_word(r, "predicted_speedup_measured") for r in rows],
         "hovertemplate": "%{x}<br>measured costs %{y:.2f}× %{text}<extra></extra>"},
    ]
    layout = _layout(440) | {
        "title": {"text": "<b>Speedup: measured vs predicted</b><br>from the measured α", "font": {"size": 14},
                  "x": 0.5, "xanchor": "center", "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 12}},
        "xaxis": {"type": "multicategory", "automargin": True, "tickfont": {"size": 11}},
        "yaxis": {"title": {"text": "× standard decoding"}, "rangemode": "tozero", "automargin": True},
        "scattermode": "group",  # the two markers side by side on their bar: their error bars apart
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                    "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}}],
    }
    annotations = []
    layout["yaxis"] |= _off_the_top(rows, "decode_speedup", annotations, "x domain", "y domain", PREDICTION_KEYS)
    # the legend under the chart (below the two rows of category labels), one row at 1400 px and up to three on a
    # phone: it never covers the title or the bars; the notes go under it, wrapped to fit a phone-wide chart
    layout["legend"] = {"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yref": "container", "yanchor": "bottom",
                        "font": {"size": 12}}
    layout["margin"] |= {"t": 100, "b": 135}
    layout["height"] = 500
    said = _prediction_notes(rows)
    if any(r["predicted_speedup_paper"] is None and r.get("tree_passes") for r in rows):
        said.append("tree methods: no markers<br>(the formulas are for chains)")
    layout["annotations"] = annotations
    _place_notes(layout, said)
    return go.Figure({"data": data, "layout": layout})


NOTE_LINE_PX, UNDER_TITLE_PX = 15, 55
"""A line of a chart's 11 px notes, and the top of the chart down to below its two-line title (px)."""


def _place_notes(layout: dict, said: list[str]) -> None:
    """Adds the notes ``said`` (lines joined by <br>) to ``layout``'s annotations, at the right end above the plot
    and under the title: the top margin (at least its 100 px) and the height with it grow with the notes' lines, so
    they never run into the title on a phone (seen at 400 px: five lines over it)."""
    if not said:
        return
    text = "<br>".join(said)
    top = max(layout["margin"]["t"], UNDER_TITLE_PX + NOTE_LINE_PX * (text.count("<br>") + 1))
    layout["height"] += top - layout["margin"]["t"]
    layout["margin"]["t"] = top
    layout["annotations"] = layout.get("annotations", []) + [
        {"text": text, "xref": "paper", "yref": "paper", "x": 1, "y": 1, "xanchor": "right", "yanchor": "bottom",
         "align": "right", "showarrow": False, "font": {"size": 11, "color": "#57606a"}}]
