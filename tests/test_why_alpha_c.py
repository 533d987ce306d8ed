"""The what-if chart's α and c beside the Live run they mark (a new user's trial): the ★'s α is the one whose formula
gives the run's tokens per pass at its k, said beside it with why the Live card's per-token α differs; an n-gram run
is drawn at the lookup's c (measured, or ≈ 0 before a measurement), never at the slider's default 0.05, and the
chart's title says where its c comes from."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import why  # noqa: E402
from app.records import RunSummary  # noqa: E402
from app.why import handlers  # noqa: E402
from specviz.core.costs import expected_tokens_per_pass  # noqa: E402
from specviz.measure.costs import measure_draft_costs  # noqa: E402

NGRAM_RUN = RunSummary(drafter="n-gram lookup (2-3)", k="k = 4", k_value=4, k_schedule="fixed", alpha=0.91,
                       tokens_per_pass=2.2, speedup=1.4)
"""The trial's kind of run: the Live card read α 0.91 (accepted ÷ judged) while the passes gave 2.2 tokens each
(the lookup often finds fewer than k tokens to draft)."""
MEASURED = {"grid": {"ms": {1: {1: 10.0, 2: 10.5, 4: 11.0}}, "token_counts": [1, 2, 4], "param_bytes": 1e8,
                     "spread": {}, "impossible": [], "settings": {"repeats": 3, "prompt_len": 64}},
            "costs": {"early-exit": 0.52, "early-exit_range": (0.49, 0.58), "ngram": 0.00031,
                      "ngram_range": (0.00024, 0.00052), "early_exit_layer": 15.0},
            "label": "T", "note": None}


def _plain(title: str) -> str:
    """A chart title as read: its wrapped lines (``<br>``) joined by single spaces."""
    return " ".join(title.replace("<br>", " ").split())


def test_the_stars_alpha_is_said_beside_it_with_why_the_live_cards_differs():
    k, tpp, _, alpha, _, fig, _ = why.from_history([NGRAM_RUN])
    assert (k, tpp) == (4, "2.20")
    assert alpha == why.run_alpha(4, 2.2) == pytest.approx(0.57, abs=0.005)  # not the card's 0.91
    assert expected_tokens_per_pass(alpha, 4) == pytest.approx(2.2, abs=0.02)
    title = _plain(fig.layout.legend.title.text)
    assert title.startswith(f"α = {alpha:.2f}, c = ") and "★'s α" not in title  # 5 lines there squeezed the plots
    below = _plain(next(a.text for a in fig.layout.annotations if "Best k" in a.text))  # under the charts
    assert below.endswith("★'s α: the one that gives its 2.20 tokens/pass at k = 4 by the formula. The Live card's "
                          "α (accepted ÷ judged drafts) differs when passes draft fewer than k.")
    assert [t.name for t in fig.data if t.marker.symbol == "star"][0] == "your run"
    # the user moves α away: the line no longer claims it is the run's
    moved = why.whatif(0.5, 0.0, 1, "4", "2.2", "1.4", None)
    assert "★'s α" not in _plain(next(a.text for a in moved.layout.annotations if "Best k" in a.text))
    assert why.alpha_note(0.57, None) is None


def test_an_ngram_run_is_drawn_at_the_lookups_c_not_the_sliders_default():
    """The trial's c = 0.05 beside an n-gram run was :data:`DEFAULT_C`, the slider's start, not a cost of the
    lookup."""
    *_, c, fig, _ = why.from_history([NGRAM_RUN])  # before any measurement: ≈ 0, said not measured
    assert c == 0.0
    title = _plain(fig.layout.legend.title.text)
    assert title.startswith("α = 0.57, c = 0.000 (a free draft, as n-gram lookup's ≈ 0)")
    *_, c, fig, _ = why.from_history([NGRAM_RUN], 0.05, 1, MEASURED)  # measured: the lookup's own c
    assert c == 0.0003
    assert _plain(fig.layout.legend.title.text).startswith("α = 0.57, c = 0.0003 (n-gram lookup, measured)")
    # a drafter whose c this tab does not measure leaves c as it is, and the title says a default is one
    other = RunSummary(drafter="draft model SmolLM2", k="k = 4", k_value=4, k_schedule="fixed", tokens_per_pass=2.2)
    *_, c, fig, _ = why.from_history([other])
    assert c == why.gr.skip()
    assert _plain(fig.layout.legend.title.text).startswith("α = 0.57, c = 0.050 (a default, not measured)")
    assert why.run_c(None, MEASURED) is None


def test_measure_sets_c_to_the_marked_ngram_runs_lookup_and_says_so(monkeypatch):
    monkeypatch.setattr(handlers, "forward_figure", lambda grid: None)
    monkeypatch.setattr(handlers, "summary_html", lambda grid, costs, lookahead=(): "")
    out = handlers._measured(MEASURED, 12.0, 0.57, "4", "2.2", "1.4", history=[NGRAM_RUN], press=handlers.Press(c=0.0))
    assert out[handlers.OUTPUTS.index("why-c")]["value"] == 0.0003
    assert ("c (the draft's cost per token ÷ a target step) moved from 0 to 0.0003: your latest Live run's n-gram "
            "lookup's cost measured here (the lookup alone, microseconds), so the what-if draws that run's drafter."
            in html.unescape(out[0]))
    assert "(n-gram lookup, measured)" in _plain(out[-1].layout.legend.title.text)
    out = handlers._measured(MEASURED, 12.0, 0.57, "", "", "", press=handlers.Press(c=0.05))  # no Live run: the early exit's
    assert out[handlers.OUTPUTS.index("why-c")]["value"] == 0.52
    layers = int(MEASURED["costs"]["early_exit_layer"])
    # a trial: Measure moved c from the slider's 0.05 to the early exit's with no word, and the best k fell to 1
    assert (f"c (the draft's cost per token ÷ a target step) moved from 0.05 to 0.52: the early exit's cost measured "
            f"here (a draft of the target's first {layers} layers), so the what-if draws a drafter this machine "
            "timed; a draft this dear pays only at a small k (type another c to try a cheaper draft)."
            in html.unescape(out[0]))
    again = handlers._measured(MEASURED, 12.0, 0.57, "", "", "", press=handlers.Press(c="0.52"))  # c already the early exit's
    assert (f"c (the draft's cost per token ÷ a target step) stays at 0.52: the early exit's cost measured here (a "
            f"draft of the target's first {layers} layers)." in html.unescape(again[0]))
    unknown = handlers._measured(MEASURED, 12.0, 0.57, "", "", "")  # an API call without c: "is now"
    assert "c (the draft's cost per token ÷ a target step) is now 0.52: " in html.unescape(unknown[0])


def test_measure_sends_the_c_it_found_and_the_layer_box_names_c_plainly():
    import gradio as gr
    from app.why.layout import EXIT_LAYER_INFO

    assert handlers.MEASURE_INPUTS[-1] == "c"  # last: API calls by position before it still work
    with gr.Blocks() as demo:
        why.build_tab()
    boxes = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert boxes["why-exit-layer"].label == "Early-exit layer (sets the draft cost c; 0 = half the layers)"
    assert boxes["why-exit-layer"].info == EXIT_LAYER_INFO and "cost per token ÷ a target step" in EXIT_LAYER_INFO
    measure = next(fn for fn in demo.fns.values() if fn.api_name == "why_measure")
    assert [b.elem_id for b in measure.inputs][-1] == "why-c"


def test_the_lookups_c_card_gives_its_range_and_what_it_times(tiny_target):
    card = why.summary_html(MEASURED["grid"], MEASURED["costs"])
    assert "n-gram lookup: 0.0003 (repeats 0.0002–0.0005; the lookup alone, microseconds)" in card
    costs = measure_draft_costs(tiny_target, step_ms=1.0, exit_layer=2, prompt_len=8, repeats=3,
                                step_repeats=[0.9, 1.0, 1.2])
    low, high = costs["ngram_range"]  # the lookup's repeats over the step's, as the early exit's range
    assert 0 < low <= costs["ngram"] <= high


def test_the_star_carries_the_runs_recorded_95_percent_ranges_as_error_bars():
    """A trial: the Live card read tokens per pass "2.88 (1.75–4.00)", the Why tab's box "2.875" and its ★ had no
    error bar. The boxes now show 2 decimals with the run's range, the ★s carry it as error bars; a run that
    recorded none says so under the boxes."""
    import dataclasses

    ranged = dataclasses.replace(NGRAM_RUN, tokens_per_pass=2.875, tokens_per_pass_interval=(1.75, 4.0),
                                 tokens_per_pass_spread="1.75–4.00", speedup=1.4, speedup_interval=(1.21, 1.62))
    k, tpp, speedup, alpha, _, fig, hint = why.from_history([ranged])
    assert (k, tpp, speedup) == (4, "2.88 (1.75–4.00)", "1.40 (1.21–1.62)")
    assert alpha == why.run_alpha(4, 2.88)
    assert why.run_issues(k, tpp, speedup) == (True, {})
    point = why.run_point(k, tpp, speedup)
    assert (point["tokens_per_pass"], point["tokens_per_pass_range"]) == (2.88, (1.75, 4.0))
    assert (point["speedup"], point["speedup_range"]) == (1.4, (1.21, 1.62))
    stars = [t for t in fig.data if t.marker.symbol == "star"]
    assert [t.name for t in stars] == ["your run ± its 95% range"] * 2 and [t.showlegend for t in stars] == [True,
                                                                                                          False]
    bars = [(list(t.y), list(t.error_y.arrayminus), list(t.error_y.array)) for t in stars]
    assert bars == [([2.88], [pytest.approx(1.13)], [pytest.approx(1.12)]),
                    ([1.4], [pytest.approx(0.19)], [pytest.approx(0.22)])]
    assert "95% range 1.75–4.00" in stars[0].hovertemplate
    assert fig.layout.yaxis.range[1] >= 4.0  # the bar's top stays on the chart
    assert "The ★'s bars: its 95% ranges, as the Live cards show them." in hint
    few = dataclasses.replace(ranged, tokens_per_pass_spread="1.75–4.00; 5 passes: too few to tell")
    said = "The ★'s bars: its 95% ranges, as the Live cards show them; 5 passes: too few to tell."
    assert said in why.from_history([few])[-1]
    one = dataclasses.replace(ranged, tokens_per_pass_interval=None, tokens_per_pass_spread="one pass: no spread",
                              speedup=None, speedup_interval=None, speedup_note="too short")
    k, tpp, speedup, *_, fig, hint = why.from_history([one])
    assert (tpp, speedup) == ("2.88", None)
    assert "The ★ has no error bar: its tokens per pass has none (one pass: no spread)." in hint
    (star,) = [t for t in fig.data if t.marker.symbol == "star"]
    assert star.name == "your run" and star.error_y.visible is False and "no range known" in star.hovertemplate
    # a typed range that does not hold its figure is no range; a typed figure without one has none
    assert why.run_point("4", "2.5 (3.0–4.0)", "")["tokens_per_pass_range"] is None
    assert why.controls.split_range("2 (x)") == ("2 (x)", None)


def test_a_long_legend_grows_the_figure_so_the_plots_keep_their_height():
    """A trial at 1400 px: the ★'s α note (5 lines at the head of the legend) left each plot 134 px tall. The note
    now stands under the charts, and the figure grows by its legend's height (legend_px)."""
    from app.why.figures import LEGEND_LINE_PX, LEGEND_ROW_PX, legend_px

    fig = why.whatif(0.72, 0.0, 1, "4", "2.88 (1.75–4.00)", "1.40 (1.21–1.62)", None)
    title = fig.layout.legend.title.text
    assert title == "α = 0.72, c = 0.000 (a free draft,<br>as n-gram lookup's ≈ 0)"
    # 5 names, two a row: (1 line, 1 line), (2 lines: "speedup, paper<br>(verification = 1 step)", 1), (1): 4 lines
    assert legend_px(title, [t.to_plotly_json() for t in fig.data]) == (2 + 4) * LEGEND_LINE_PX + 3 * LEGEND_ROW_PX
    bare = why.whatif(0.72, 0.0, 1, "", "", "", None)
    assert fig.layout.height - bare.layout.height >= LEGEND_LINE_PX  # the ★'s legend row (and its note below)
