"""A new user's trial: with k = auto the "Acceptance by draft position" chart's x labels collided (up to 16
positions, one label each, turned on their side in a third of the page). At most POSITION_TICKS upright labels now,
the first and the last position always among them. The same trial found the k axes of the what-if charts (the Why
tab's and the classroom's, k up to 16) labelling every k on a 400 px phone: they take the same ticks, while every k
keeps its point and its hover. A later trial found the Why what-if chart cut at 400 px after Measure: its title
line (the measured c too noisy to tell) and the best-k note wider than the chart, a legend name under the toolbar;
every line of its texts now fits a phone, the title heading the legend. Another found the Live tab's per-pass charts
labelling a run of a few passes 0.5, 1, 1.5, ...: a target-pass axis now carries whole passes only."""

from __future__ import annotations

import os
import sys

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

from app import classroom, figures, why  # noqa: E402
from app.figures import visible_lines, wrap_words  # noqa: E402
from app.why import figures as why_figures  # noqa: E402
from specviz.analysis.whatif import analyze  # noqa: E402
from specviz.measure.costs import whatif_curves  # noqa: E402
from test_counted_spreads import _run  # noqa: E402
from test_whatif import _prefill, _spec, base_run  # noqa: E402


def test_the_position_axis_of_a_k_auto_run_keeps_few_upright_labels():
    auto = _run([(16, 16), (3, 1), (9, 4), (0, 0), (12, 12)])  # k = auto: plain steps and k up to 16
    assert len(auto.per_position_acceptance) == 16
    axis = figures.position_panel(auto, _run([], run="baseline")).xaxis
    assert axis["tickvals"] == [1, 4, 8, 12, 16] and axis["tickangle"] == 0 and "dtick" not in axis
    fixed = figures.position_panel(_run([(4, 2), (4, 4)]), _run([], run="baseline")).xaxis
    assert fixed["tickvals"] == [1, 2, 3, 4] and fixed["tickangle"] == 0
    assert figures.position_ticks(9)["tickvals"] == [1, 2, 4, 6, 9]
    for positions in range(1, 17):
        ticks = figures.position_ticks(positions)["tickvals"]
        assert len(ticks) <= figures.POSITION_TICKS and ticks[0] == 1 and ticks[-1] == positions
        assert ticks == sorted(set(ticks))
        if positions > figures.POSITION_TICKS:  # the last label stands apart from the one before it
            assert ticks[-1] - ticks[-2] >= 2


@pytest.mark.parametrize("k_max, ticks", [(16, [1, 4, 8, 12, 16]), (9, [1, 2, 4, 6, 9]), (6, [1, 2, 3, 4, 5, 6])])
def test_the_why_whatif_k_axes_keep_few_labels_and_every_k_its_point(k_max, ticks):
    curves = whatif_curves(0.7, 0.05, {1: 10.0, 2: 10.2, 4: 10.8, 8: 12.0, 16: 20.0, 32: 38.0}, k_max)
    fig = why.whatif_figure(curves, {"k": 4, "tokens_per_pass": 2.6, "speedup": 1.8, "label": "your run"})
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):  # tokens per pass (left), predicted speedup (right)
        assert list(axis.tickvals) == ticks and axis.tickmode == "array" and axis.tickangle == 0
        assert axis.dtick is None and list(axis.range) == [0.5, k_max + 0.5]
    curves_drawn = [t for t in fig.data if t.hovertemplate and "k=%{x}" in t.hovertemplate and len(t.x) > 1]
    assert {t.name for t in curves_drawn} == {"expected tokens per pass", "speedup, paper<br>(verification = 1 step)",
                                              "speedup with the measured<br>T(k+1), batch 1"}
    assert all(list(t.x) == list(range(1, k_max + 1)) for t in curves_drawn)  # every k has its point and hover


def test_the_classroom_whatif_k_axis_keeps_few_labels_and_every_k_its_point():
    spec = [_prefill("speculative")] + [_spec(i + 1, 16, 16, n) for i, n in enumerate([16, 5, 0, 12, 16, 3])]
    result = analyze(spec, base_run(60), resamples=0)
    assert result.k_max == 16
    fig = classroom.whatif_figure(result, {4: 1.3})
    axis = fig.layout.xaxis
    assert list(axis.tickvals) == [1, 4, 8, 12, 16] and axis.tickangle == 0 and axis.dtick is None
    predicted = fig.data[0]
    assert list(predicted.x) == list(range(1, 17)) and len(predicted.hovertext) == 16
    assert [t.startswith(f"k = {k}<br>") for k, t in zip(range(1, 17), predicted.hovertext)] == [True] * 16
    small = classroom.whatif_figure(analyze(spec, base_run(60), k_max=5, resamples=0)).layout.xaxis
    assert list(small.tickvals) == [1, 2, 3, 4, 5]


PASS_AXES = ("Acceptance rate", "Tokens per target pass", "Draft length k per pass")
"""The Live dashboard's charts drawn against the target pass (its 1st, 2nd and 5th)."""


@pytest.mark.parametrize("passes, ticks", [(1, [1]), (2, [1, 2]), (3, [1, 2, 3])])
def test_the_live_pass_axes_of_a_short_run_show_whole_passes_only(passes, ticks):
    spec = _run([(4, 2), (4, 4), (4, 0)][:passes])
    fig = figures.dashboard_figure(spec, _run([], run="baseline"))
    titles = [visible_lines(a.text)[0] for a in fig.layout.annotations]
    assert [titles[0], titles[1], titles[4]] == list(PASS_AXES)
    for name in ("xaxis", "xaxis2", "xaxis5"):  # acceptance, tokens per pass, k (positions and ms sit between)
        axis = fig.layout[name]
        assert axis.title.text == "target pass" and axis.tickmode == "array" and axis.dtick is None
        assert list(axis.tickvals) == ticks and all(isinstance(v, int) for v in axis.tickvals)
    assert list(fig.data[0].x) == ticks  # one bar a pass, at the labelled pass


def test_the_pass_ticks_are_whole_and_few_at_any_run_length():
    assert figures.pass_ticks(0)["tickvals"] == []  # no pass yet: no labels, never 0.5 steps on an empty axis
    assert figures.pass_ticks(9)["tickvals"] == [2, 4, 6, 8]
    assert figures.pass_ticks(40)["tickvals"] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert figures.pass_ticks(1234)["tickvals"] == [200, 400, 600, 800, 1000, 1200]
    for passes in range(1, 2001):
        ticks = figures.pass_ticks(passes)["tickvals"]
        assert 1 <= len(ticks) <= figures.POSITION_TICKS and ticks == sorted(set(ticks))
        assert all(isinstance(v, int) and 1 <= v <= passes for v in ticks)
    with pytest.raises(ValueError, match="0 or more target passes"):
        figures.pass_ticks(-1)


def test_wrap_words_breaks_at_spaces_and_keeps_every_word():
    text = "measured c too noisy to tell: repeats 0.03–0.72, 24.0× apart: no finding, try the slider"
    wrapped = wrap_words(text, 34)
    assert wrapped == ("measured c too noisy to tell:<br>repeats 0.03–0.72, 24.0× apart: no<br>finding, try the "
                       "slider")
    assert wrapped.replace("<br>", " ") == text
    assert wrap_words("Press <b>Measure</b> now<br>ok", 13) == "Press <b>Measure</b><br>now<br>ok"  # tags count 0
    assert wrap_words("a unbreakableword b", 5) == "a<br>unbreakableword<br>b"  # never cut inside a word
    with pytest.raises(ValueError, match="at least one character"):
        wrap_words("x", 0)


def test_the_why_whatif_texts_fit_a_phone_after_a_noisy_measure():
    """The trial's figure: the measured c 24× apart across its repeats, a verification timed below a step, a run
    marked. Title and note lines fit 236 px of plot at 400 px (34 and 40 characters), legend names 28; the title
    heads the legend, which Plotly lays out as one block above the panels (no figure title at the top edge)."""
    grid = {"ms": {1: {1: 534.0, 2: 480.0, 4: 560.0, 8: 600.0, 16: 700.0, 32: 900.0}}, "param_bytes": 5e8,
            "impossible": [], "spread": {1: {1: (128.0, 927.7)}}, "settings": {"repeats": 3, "prompt_len": 64}}
    costs = {"early-exit": 0.459, "early-exit_range": (0.03, 0.72), "ngram": 0.0002, "early_exit_layer": 15}
    fig = why.whatif(0.76, 0.459, 1, "4", "2.6", "1.2", {"grid": grid, "costs": costs})
    legend = fig.layout.legend
    assert fig.layout.title.text is None and legend.title.side == "top"
    assert visible_lines(legend.title.text) == ["α = 0.76, c = 0.459 (early exit,", "measured)",
                                                "measured c too noisy to tell:",
                                                "repeats 0.03–0.72, 24.0× apart: no", "finding, try the slider"]
    assert (legend.orientation, legend.x, legend.y, legend.yanchor) == ("h", 0, 1.1, "bottom")  # above the panels
    assert legend.entrywidth == 0.45 and legend.entrywidthmode == "fraction"  # wide: two names a row
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert [line for name in names for line in visible_lines(name)] == [
        "expected tokens per pass", "k+1 (every draft accepted)", "speedup, paper", "(verification = 1 step)",
        "speedup with the measured", "T(k+1), batch 1", "standard decoding (1×)", "your run"]
    assert max(len(line) for name in names for line in visible_lines(name)) <= why_figures.LEGEND_LINE_CHARS == 28
    (note,) = [a for a in fig.layout.annotations if a.text.startswith("Best k")]
    assert visible_lines(note.text) == ["Best k, paper: k = 2 (1.22×)", "Measured costs: too noisy to tell a best",
                                        "k (a verification timed below a", "one-token step)"]
    assert fig.layout.margin.b == 50 + 4 * why_figures.NOTE_LINE_PX + why_figures.NOTE_GAP_PX  # room for its lines
    assert fig.layout.modebar.orientation == "v" and fig.layout.margin.r == figures.MODEBAR_MARGIN_PX


def test_the_classroom_whatif_keeps_room_for_its_axis_title_on_a_phone():
    """At 400 px the legend's rows under the chart took so much of 380 px that the y axis title ran up into the
    subtitle; 440 px keeps the plot taller than its title, and every legend line fits the phone."""
    spec = [_prefill("speculative")] + [_spec(i + 1, 16, 16, n) for i, n in enumerate([16, 5, 0, 12, 16, 3])]
    fig = classroom.whatif_figure(analyze(spec, base_run(60)), {4: 1.3})
    assert fig.layout.height == 440 and fig.layout.legend.yanchor == "bottom" and fig.layout.legend.y == 0
    assert fig.layout.legend.yref == "container"  # under the axis title at any width (tests/test_classroom_widen_...)
    narrow = fig.layout.meta["sv_narrow"]  # a phone: taller, with room for the legend's four rows under the axis
    assert narrow == {"height": 540, "margin": {"b": 215}}
    assert min(440 - 60 - fig.layout.margin.b, 540 - 60 - 215) >= 260  # the plot keeps the height it had
    lines = [line for t in fig.data for line in visible_lines(t.name)]
    assert "bars: 80% of resampled passes)" in lines and max(len(line) for line in lines) <= 31


def test_the_count_axes_show_whole_tokens_only():
    """The same trial's leftover: "Tokens emitted vs time" labelled a run's first tokens 0.5, 1.5, and the k chart's
    draft-token axis k 0.2, 0.4. Counts now take whole ticks from 0; the k chart keeps Plotly's ticks only when it
    also draws k = auto's expected gain (a fraction)."""
    spec, base = _run([(4, 2), (4, 0)]), _run([(0, 0)], run="baseline")
    k_axis = figures.k_panel(spec, base).yaxis
    assert k_axis["tickvals"] == [0, 1, 2, 3, 4] and k_axis["title"]["text"] == "draft tokens per pass"
    assert max(spec.curve_tokens + base.curve_tokens) == 3
    assert figures.latency_panel(spec, base).yaxis["tickvals"] == [0, 1, 2, 3]
    assert figures.count_ticks(2)["tickvals"] == [0, 1, 2]
    assert figures.count_ticks(37)["tickvals"] == [0, 5, 10, 15, 20, 25, 30, 35]
    for top in range(0, 500):
        ticks = figures.count_ticks(top)["tickvals"]
        assert ticks[0] == 0 and len(ticks) <= figures.POSITION_TICKS + 1 and all(isinstance(v, int) for v in ticks)
    with pytest.raises(ValueError, match="0 or more"):
        figures.count_ticks(-1)


def test_the_time_charts_switch_to_seconds_and_say_the_prefill_is_one_measurement():
    """Trial: a 20-second run's time chart read "20k ms" on its axis, and the two prefills (17 s against 11 s, one
    measurement each) carried no note on the chart. From 2000 ms the axes are in seconds; the prefill's bar says
    it is one measurement in its legend and hover."""
    import dataclasses

    from specviz.core.events import Timings
    from specviz.measure.run_stats import RunStats
    from test_counted_spreads import _event

    def slow(passes, run="speculative", scale=1000.0):
        stats = RunStats()
        for i, (drafted, accepted) in enumerate([(0, 0)] + passes):
            event = _event(i, drafted, accepted, run)
            timings = Timings(*(getattr(event.timings, f) * scale for f in ("draft_ms", "verify_ms", "other_ms")))
            stats.add(dataclasses.replace(event, t_end_ms=event.t_end_ms * scale, timings=timings))
        return stats

    assert figures.time_unit([1999.0, None]) == (1.0, "ms") and figures.time_unit([2000.0]) == (1000.0, "s")
    assert figures.time_unit([]) == (1.0, "ms")
    spec, base = slow([(4, 2), (4, 4)]), slow([(0, 0)] * 3, run="baseline")
    latency = figures.latency_panel(spec, base)
    assert latency.xaxis["title"]["text"] == "s since the prefill started"
    assert latency.traces[0]["x"] == [t / 1000 for t in spec.curve_ms] and max(spec.curve_ms) >= 2000
    quick = figures.latency_panel(_run([(4, 2)]), _run([(0, 0)], run="baseline"))
    assert quick.xaxis["title"]["text"] == "ms since the prefill started"
    time = figures.time_panel(spec, base)
    assert time.title == "Time spent (s, own clock)" and time.xaxis["title"]["text"] == "s"
    prefill = time.traces[0]
    assert prefill["name"] == "prefill (one measurement)" and "one measurement" in prefill["hovertemplate"]
    assert prefill["x"] == [spec.ttft_ms / 1000, base.ttft_ms / 1000] and " s, " in prefill["hovertemplate"]
    assert figures.time_panel(_run([(4, 2)]), _run([(0, 0)], run="baseline")).title == "Time spent (ms, own clock)"
    # hovers (the next trial): the full name and the unit, where Plotly's own label read "(2.179353, 101)
    # speculative", "target forwa... (7.352585, baseline)" and "standard dec... (27, 1)"
    assert latency.traces[0]["hovertemplate"] == "%{fullData.name}: %{y} tokens at %{x:.2f} s<extra></extra>"
    assert "%{x:.0f} ms" in quick.traces[0]["hovertemplate"]
    assert [t["hovertemplate"].endswith(" s<extra></extra>") for t in time.traces[1:]] == [True] * 3
    per_pass = figures.tokens_per_pass_panel(spec, base).traces
    assert all("%{fullData.name}" in t["hovertemplate"] and "tokens" in t["hovertemplate"] for t in per_pass)
    for panel in (figures.acceptance_panel, figures.position_panel, figures.k_panel):
        assert all("hovertemplate" in t for t in panel(spec, base).traces), panel.__name__


def test_the_status_icons_need_no_emoji_font():
    """Trial: in Debian's Chromium (no emoji font) the waiting status began with an empty box where ⏳ should have
    been. Every status icon is now a symbol of the common text fonts, none from the emoji blocks."""
    from app.render import status_html

    icons = {kind: status_html("x", kind).split('class="status-text">')[1].split(" x")[0]
             for kind in ("busy", "wait", "done", "error", "info")}
    assert icons["wait"] == "◷" and icons["done"] == "✓" and icons["info"] == "ℹ"
    assert all(0x2300 > ord(ch) or ord(ch) > 0x23FF for icon in icons.values() for ch in icon if not ch.isascii())
    assert all(ord(ch) < 0x1F000 for icon in icons.values() for ch in icon)


def test_the_ceiling_note_fits_a_phone():
    """Trial at 400 px: "k+1 goes on up (to 17 at k = 16)" on one line ran past the chart's right edge. It is two
    lines now, on the side of the line's last point with room."""
    from app.why.figures import ceiling_note

    ks = list(range(1, 17))
    late, early = ceiling_note(ks, 9, "1"), ceiling_note(ks, 5, "1")
    assert late["text"] == "k+1 goes on up<br>(to 17 at k = 16)" and late["xanchor"] == "right"
    assert early["xanchor"] == "left" and early["xshift"] == 6 and late["xshift"] == -6
    assert late["yanchor"] == early["yanchor"] == "top"  # under the point: centred on it, it rose into the title
    assert max(len(line) for line in visible_lines(late["text"])) <= 18
