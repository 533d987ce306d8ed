"""The "Why it works" tab: the forward-time grid on the tiny model, the what-if curves and figure, the Live-run
marker, and the Measure handler called directly."""

from __future__ import annotations

import html
import os
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from app import device, why  # noqa: E402
from app.inputs import clamp_notice  # noqa: E402
from app.records import RunSummary  # noqa: E402
from drain_support import last_output, last_values  # noqa: E402
from specviz.core.costs import expected_tokens_per_pass, interpolate, predicted_speedup_paper  # noqa: E402
from specviz.measure.costs import alpha_for_tokens_per_pass, measure_draft_costs, whatif_curves  # noqa: E402
from specviz.measure.grid import measure_forward_grid  # noqa: E402
from toast_support import no_toast, toasts_shown  # noqa: E402


def test_forward_grid_has_a_time_per_batch_and_token_count(tiny_target):
    grid = measure_forward_grid(tiny_target, prompt_len=16, token_counts=(4, 1, 2, 8), batch_sizes=(4, 1),
                                repeats=2, warmup=1)
    assert grid["token_counts"] == [1, 2, 4, 8] and grid["batch_sizes"] == [1, 4]
    assert set(grid["ms"]) == {1, 4}
    for batch in (1, 4):
        assert list(grid["ms"][batch]) == [1, 2, 4, 8]
        assert all(ms > 0 for ms in grid["ms"][batch].values())
        assert all(gbs > 0 for gbs in grid["gbs"][batch].values())
    assert grid["param_bytes"] == tiny_target.param_bytes
    assert grid["step_ms"] == grid["ms"][1][1] and set(grid["verify_cost"]) == {1, 3, 7}
    assert grid["gbs"][1][1] == pytest.approx(tiny_target.param_bytes / (grid["step_ms"] / 1000) / 1e9)
    assert not grid["stopped"] and grid["copy_bandwidth_gbs"] is None


def test_forward_grid_stops_when_asked(tiny_target):
    grid = measure_forward_grid(tiny_target, prompt_len=8, token_counts=(1, 2), batch_sizes=(1, 4), repeats=1,
                                should_stop=lambda: True)
    assert grid["stopped"] and grid["ms"] == {1: {}}


def test_draft_costs(tiny_target):
    costs = measure_draft_costs(tiny_target, step_ms=1.0, exit_layer=2, prompt_len=8, repeats=2)
    assert costs["early-exit"] > 0 and costs["ngram"] >= 0 and costs["early_exit_layer"] == 2


def test_whatif_curves_follow_the_formulas():
    curve = {1: 10.0, 2: 10.5, 4: 11.0, 8: 14.0, 16: 22.0, 32: 40.0}
    out = whatif_curves(0.8, 0.1, curve)
    assert out["k"] == list(range(1, 17))
    assert out["tokens_per_pass"][3] == pytest.approx(expected_tokens_per_pass(0.8, 4))
    assert out["paper"][3] == pytest.approx(predicted_speedup_paper(0.8, 4, 0.1))
    # k = 4: T(5) interpolated between T(4) and T(8); drafting 4 x 0.1 x T(1)
    assert out["measured"][3] == pytest.approx(expected_tokens_per_pass(0.8, 4) * 10.0 / (11.75 + 4.0))
    assert whatif_curves(0.5, 0.0)["measured"] is None
    assert interpolate(curve, 40) == pytest.approx(49.0) and interpolate({3: 2.0}, 7) == 2.0


def test_alpha_for_tokens_per_pass_inverts_the_expectation():
    for alpha, k in ((0.3, 2), (0.75, 4), (0.95, 8)):
        assert alpha_for_tokens_per_pass(expected_tokens_per_pass(alpha, k), k) == pytest.approx(alpha, abs=1e-6)
    assert alpha_for_tokens_per_pass(0.5, 4) == pytest.approx(0.0, abs=1e-9)
    assert alpha_for_tokens_per_pass(9.0, 4) == pytest.approx(1.0, abs=1e-9)


def test_whatif_figure_has_a_point_per_k_and_the_marked_run():
    curves = whatif_curves(0.7, 0.05, {1: 10.0, 2: 10.2, 4: 10.8, 8: 12.0, 16: 20.0, 32: 38.0})
    fig = why.whatif_figure(curves, {"k": 4, "tokens_per_pass": 2.6, "speedup": 1.8, "label": "your run"})
    assert isinstance(fig, go.Figure)
    by_name = {}
    for trace in fig.data:
        by_name.setdefault(trace.name, []).append(trace)
    assert list(by_name["expected tokens per pass"][0].x) == list(range(1, 17))
    assert len(by_name["speedup, paper<br>(verification = 1 step)"][0].y) == 16
    measured = [t for name, ts in by_name.items() if name.startswith("speedup with the measured") for t in ts]
    assert len(measured) == 1 and len(measured[0].y) == 16
    run = by_name["your run"]
    assert [(list(t.x), list(t.y)) for t in run] == [([4], [2.6]), ([4], [1.8])]
    # no run, no measurement: no star and no measured curve, and a hint to press Measure
    bare = why.whatif_figure(whatif_curves(0.7, 0.05))
    assert "your run" not in {t.name for t in bare.data}
    assert any("Measure" in a.text for a in bare.layout.annotations)


def test_a_measured_curve_above_the_papers_is_too_noisy_for_a_best_k():
    """Seen in the browser on a busy machine: T(4) timed below T(1) gave "best measured costs: k = 3 (2.72×)",
    beside a card calling the same data too noisy."""
    quiet = whatif_curves(0.7, 0.05, {1: 10.0, 2: 10.2, 4: 10.8, 8: 12.0, 16: 20.0, 32: 38.0})
    noisy = whatif_curves(0.7, 0.05, {1: 10.0, 2: 10.2, 4: 8.0, 8: 12.0, 16: 20.0, 32: 38.0})
    assert not why.noisy_measured(quiet) and why.noisy_measured(noisy)
    best = lambda fig: next(a.text for a in fig.layout.annotations if a.text.startswith("Best k"))  # noqa: E731
    assert "Best k, measured costs: k = " in best(why.whatif_figure(quiet))
    text = best(why.whatif_figure(noisy))
    assert "Measured costs: too noisy to tell" in text and "Best k, measured" not in text and "Best k, paper" in text


def test_the_best_k_labels_stand_under_the_speedup_chart_not_on_its_curve():
    """Seen at 1400 px: "best paper: k = 16 (1.98×)" sat in the plot's top right, on the rising curves. The best-k
    lines (and "Press Measure" before a measurement) now stand under the charts, in a grown bottom margin."""
    figure = why.whatif_figure(whatif_curves(0.9, 0.0))
    (note,) = [a for a in figure.layout.annotations if a.text.startswith("Best k")]
    # (1 − 0.9^17) / (1 − 0.9) = 8.33 tokens per pass at k = 16, and c = 0: 8.33×
    assert note.text == ("Best k, paper: k = 16 (8.33×),<br>the end of the range, still rising<br>Press "
                         "<b>Measure</b> for the curve with<br>measured verification costs")
    assert (note.xref, note.yref, note.y, note.yanchor) == ("paper", "y2 domain", 0, "top") and note.yshift < 0
    measured = why.whatif_figure(whatif_curves(0.7, 0.05, {1: 10.0, 2: 10.2, 4: 10.8, 8: 12.0, 16: 20.0, 32: 38.0}))
    (note,) = [a for a in measured.layout.annotations if a.text.startswith("Best k")]
    assert note.text.count("<br>") == 1 and "Measure" not in note.text and note.yanchor == "top"


def _grid(ms: dict, impossible: list | None = None) -> dict:
    return {"token_counts": [1, 2, 4], "ms": ms, "param_bytes": 1e8, "spread": {},
            "gbs": {b: {n: 1.0 for n in row} for b, row in ms.items()}, "impossible": impossible or []}


def test_a_point_below_less_work_inside_the_margin_is_within_noise_of_impossible():
    """Batch 16, 2 tokens measured 10 % below batch 16, 1 token: inside the 10 % margin, so the grid does not flag
    it impossible; the chart rings it and the text says it is within noise of impossible. A point flagged ✕ is
    not ringed too, and a curve that only rises rings nothing."""
    ms = {1: {1: 10.0, 2: 10.5, 4: 11.0}, 16: {1: 30.0, 2: 27.0, 4: 33.0}}
    points = why.within_noise_points(_grid(ms))
    assert points == [{"batch": 16, "n": 2, "than_batch": 16, "than_n": 1, "below": pytest.approx(0.1)}]
    figure = why.forward_figure(_grid(ms))
    rings = [t for t in figure.data if t.name == why.WITHIN_NOISE]
    assert [(list(t.x), list(t.y)) for t in rings] == [([2], [27.0]), ([2], [pytest.approx(0.9)])]
    assert "within noise of impossible" in rings[0].text[0] and "10.0% below batch 16, n = 1" in rings[0].text[0]
    assert "(inside the 10% margin)" in rings[0].text[0]
    assert any(a.text == "○ 1 point below less work,<br>inside the 10% noise margin:<br>within noise of impossible,"
               "<br>not a finding" for a in figure.layout.annotations)
    text = why.within_noise_text(_grid(ms))
    assert "batch 16, 2 tokens 10% below batch 16, 1 token, inside the 10% margin" in text
    assert "Within noise of impossible" in text and "or with overlapping" not in text
    flagged = _grid(ms, [{"batch": 16, "n": 2, "than_batch": 16, "than_n": 1}])
    assert why.within_noise_points(flagged) == [] and why.within_noise_text(flagged) == ""
    rising = _grid({1: {1: 10.0, 2: 10.5, 4: 11.0}, 16: {1: 30.0, 2: 31.0, 4: 33.0}})
    assert why.within_noise_points(rising) == []
    assert not [t for t in why.forward_figure(rising).data if t.name == why.WITHIN_NOISE]
    # a larger batch below a smaller one at the same n counts too
    assert why.within_noise_points(_grid({1: {1: 10.0}, 4: {1: 9.8}}))[0]["than_batch"] == 1


def test_whatif_handler_uses_the_chosen_batch_curve():
    measurement = {"grid": {"ms": {1: {1: 10.0, 2: 10.0, 4: 10.0}, 16: {1: 20.0, 2: 40.0, 4: 80.0}}}}
    one = why.whatif(0.9, 0.0, 1, 2, 2.5, 1.5, measurement)
    sixteen = why.whatif(0.9, 0.0, 16, 0, 0, 0, measurement)
    measured = [next(t for t in f.data if (t.name or "").startswith("speedup with the measured"))
                for f in (one, sixteen)]
    assert measured[0].y[1] > 2.5 and measured[1].y[1] < 1.5  # batch 16: verification costs ~(k+1) steps
    assert "your run" in {t.name for t in one.data} and "your run" not in {t.name for t in sixteen.data}


def _plain(title: str) -> str:
    """A chart title as read: its wrapped lines (``<br>``) joined by single spaces."""
    return " ".join(title.replace("<br>", " ").split())


def test_latest_live_run_is_read_from_the_history():
    history = [RunSummary(drafter="none", k="", tokens_per_pass=None, speedup=None),
               RunSummary(drafter="early exit (layer 15/30)", k="k = 6 (adaptive)", k_value=6,
                          k_schedule="heuristic", tokens_per_pass=2.5, speedup=1.7)]
    run = why.latest_run(history)
    assert run == {"k": 6, "tokens_per_pass": 2.5, "speedup": 1.7, "adaptive": True,
                   "drafter": "early exit (layer 15/30)", "speedup_note": None, "tokens_per_pass_interval": None,
                   "speedup_interval": None, "tokens_per_pass_spread": ""}
    k, tpp, speedup, alpha, c, fig, hint = why.from_history(history)
    assert c == why.gr.skip()  # an early-exit run leaves c as it is (Measure sets it)
    assert (k, tpp, speedup) == (6, "2.50", "1.70") and why.RUN_HINT in hint  # 2 decimals, as every tab shows
    assert "The ★ has no error bar: its tokens per pass has none (the run recorded no range)." in hint
    assert expected_tokens_per_pass(alpha, 6) == pytest.approx(2.5, abs=0.02)
    stars = [t for t in fig.data if t.name == "your run"]
    assert [(list(t.x), list(t.y)) for t in stars] == [([6], [2.5]), ([6], [1.7])]
    assert fig.layout.legend.title.text.startswith(f"α = {alpha:.2f}")
    assert why.latest_run([]) is None
    assert all(v == {"__type__": "update"} for v in why.from_history([]))
    # c read raw (preprocess off): typed out of range while the run ran, drawn at the slider's end; emptied, kept
    note = " " + why.alpha_note(alpha, why.run_point(6, 2.5, 1.7))  # the ★'s α: the one fitted to its run
    title = why.from_history(history, 99, 1, None)[-2].layout.legend.title.text
    assert title.startswith(f"α = {alpha:.2f}, c = 2.000")
    drawn = why.from_history(history, None, 1, None, {"alpha": 0.8, "c": 0.3})[-2]
    assert _plain(drawn.layout.legend.title.text) == f"α = {alpha:.2f}, c = 0.300"
    below = next(a.text for a in drawn.layout.annotations if "Best k" in a.text)  # the ★'s α: under the charts
    assert _plain(below).endswith(note)
    longer = [RunSummary(drafter="n-gram lookup (2-3)", k="k = 2 (adaptive)", k_value=2, k_schedule="heuristic",
                         tokens_per_pass=4.4, speedup=2.1)]
    k, tpp, speedup, alpha, c, fig, _ = why.from_history(longer)  # adaptive k grew past its start: 4.4 needs k >= 4
    assert (k, tpp) == (4, "4.40") and why.run_issues(k, tpp, speedup) == (True, {})
    assert [(list(t.x), list(t.y)) for t in fig.data if t.name == "your run"][0] == ([4], [4.4])


def test_the_run_boxes_are_empty_until_a_run_fills_them():
    """Before the first Live run the boxes show — (not 0 / 0 / 0, which read as a result) with a hint; a run whose
    speedup could not be judged leaves its speedup box empty too."""
    import gradio as gr

    with gr.Blocks():
        *boxes, hint = why._run_boxes()
    assert [b.value or "" for b in boxes] == ["", "", ""] and {b.placeholder for b in boxes} == {"—"}
    assert why.RUN_HINT in hint.value
    assert why.run_point("4", "1.6", "") == {"k": 4.0, "tokens_per_pass": 1.6, "speedup": None, "label": "your run",
                                             "tokens_per_pass_range": None, "speedup_range": None}
    assert why.run_point("", "", "") is None and why.run_point("four", "1.6", "1.2") is None
    assert why.run_point("4", "1.6", "fast")["speedup"] is None and why.run_point("nan", "1.6", "") is None
    assert "your run" not in {t.name for t in why.whatif(0.7, 0.05, 1, None, None, None, None).data}
    k, tpp, speedup, alpha, _, fig, hint = why.from_history([RunSummary(drafter="ngram", k="k = 4", k_value=4,
                                                                     k_schedule="fixed", tokens_per_pass=1.6,
                                                                     speedup=None, speedup_note="too noisy")])
    assert (k, tpp, speedup) == (4, "1.60", None)
    assert "its speedup was too noisy (the Live tab says why), so that box stays —" in hint
    assert [(list(t.x), list(t.y)) for t in fig.data if t.name == "your run"] == [([4], [1.6])]  # no speedup star


def test_a_typed_run_that_no_run_can_give_is_said_and_not_marked():
    """k = "abc", 9 tokens per pass at k = 4 (more than k + 1 = 5), k = 0 or 2.5, a speedup of -3: each gets one
    sentence (in the what-if status) that says whether the run is marked; a possible run has no problem."""
    assert why.run_issues("4", "2.5", "1.3") == (True, {})
    assert why.run_issues("", "", "") == (False, {})  # nothing typed: nothing to say
    marked, problems = why.run_issues("abc", "2", "1.5")
    assert not marked and problems == {"k": f"Run: k must be a whole number from 1 to {why.MAX_K} (got “abc”): the "
                                            "run is not marked."}
    marked, problems = why.run_issues("4", "9", "1.5")
    assert not marked and problems == {"tokens_per_pass": "Tokens per pass at k = 4 lies between 1 (nothing "
                                       "accepted) and 5 (all k drafts accepted + the bonus token), not 9: the run is "
                                       "not marked."}
    assert not why.run_issues("0", "1", "1")[0] and not why.run_issues("2.5", "2", "")[0]
    assert not why.run_issues("4", "0.5", "")[0] and not why.run_issues("4", "x", "")[0]
    marked, problems = why.run_issues("4", "2.5", "-3")
    assert marked and problems == {"speedup": "Speedup must be a number above 0 (got “-3”): the run's speedup is "
                                              "left out."}
    assert why.run_point("4", "9", "1.5") is None and why.run_point("4", "5", "1.5")["tokens_per_pass"] == 5.0
    assert why.run_point("4", "2.5", "-3")["speedup"] is None
    status = why.check_run("4", "9", "1.5")  # leaving a run box
    too_many = why.run_issues("4", "9", "1.5")[1]["tokens_per_pass"]  # worded above, once
    assert "status-info" in status and html.escape(too_many) in status
    assert why.check_run("4", "9", "1.5") == status  # the same line whichever run box was left
    both = why.check_run("2.5", "2", "-1")  # two problems: the status names both
    assert "got “2.5”" in both and "got “-1”" in both
    # mended: a status still on a problem turns into what is marked; any other status stays
    assert "Your run is marked on the what-if chart (k = 4, 2.5 tokens per pass, 1.3× speedup)" in why.check_run(
        "4", "2.5", "1.3", status)
    assert why.check_run("4", "2.5", "1.3", "<div>Measured the costs</div>") == why.gr.skip()
    assert why.check_run("", "", "", status) == why.gr.skip()
    names = [t.name for t in why.whatif(0.7, 0.05, 1, "4", "9", "1.5", None).data]
    assert "your run" not in names


def test_measure_handler_on_a_tiny_model_folder(tiny_model_dir, monkeypatch):
    import specviz.measure.grid
    from app import estimates

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    monkeypatch.setattr(estimates, "machine_load", lambda: (0.2, 2))  # a quiet machine (this one may be busy)
    last = last_values(why.measure(str(tiny_model_dir), 2, 0.7, 4, 2.0, 1.5), why.OUTPUTS, every=True, sized=True)
    assert not device.DEVICE.locked
    assert "Measured" in last["why-status"]
    # the estimate comes from the first forwards timed here, not from a fixed promise
    assert any("estimated from the first forwards" in s for s in last["all_why-status"])
    fig = last["why-chart"]
    assert isinstance(fig, go.Figure) and {t.name for t in fig.data} >= {"batch 1", "batch 4", "batch 16"}
    assert "Weights read per forward" in last["why-summary"] and "12.5" in last["why-summary"]
    assert "the ceiling for reading weights; repeats 12.0–13.0 GB/s" in last["why-summary"]
    grid = last["why-measurement"]["grid"]
    assert set(grid["ms"]) == {1, 4, 16} and all(len(row) == 6 for row in grid["ms"].values())
    assert 0 < last["why-c"] and isinstance(last["why-whatif-chart"], go.Figure)


def test_measure_handler_bad_target_gives_a_message():
    """A target that cannot be loaded, or none typed: one sentence in the Measure status, the tab's own line, and
    no toast repeating it."""
    with no_toast():
        out = last_output(why.measure("/no/such/folder", 0, 0.7, 0, 0, 0))
    assert "status-error" in out[0] and "no such local folder" in out[0]
    assert not device.DEVICE.locked
    with no_toast():
        out = last_output(why.measure("  ", 0, 0.7, 0, 0, 0))
    assert "status-error" in out[0] and "Give a target model: 'embedded', a hub id" in html.unescape(out[0])


def test_a_point_far_below_less_work_but_with_overlapping_repeats_says_so():
    """Seen at 400 px: "batch 16, 2 tokens 22% below … by less than the 10% margin or with overlapping repeats" read
    as a contradiction. A point 22% below is outside the margin, so only its overlapping repeats kept it from being
    flagged: the status, the hover and the chart's note name that condition alone."""
    ms = {1: {1: 10.0, 2: 10.5, 4: 11.0}, 16: {1: 30.0, 2: 23.4, 4: 33.0}}
    point = why.within_noise_points(_grid(ms))[0]
    assert point["below"] == pytest.approx(0.22) and not why.inside_margin(point)
    text = why.within_noise_text(_grid(ms))
    assert "batch 16, 2 tokens 22% below batch 16, 1 token, with repeats that overlap." in text
    assert "margin" not in text
    figure = why.forward_figure(_grid(ms))
    ring = next(t for t in figure.data if t.name == why.WITHIN_NOISE)
    assert "(with repeats that overlap)" in ring.text[0] and "margin" not in ring.text[0]
    assert any(a.text == "○ 1 point below less work,<br>with overlapping repeats:<br>within noise of impossible,"
               "<br>not a finding" for a in figure.layout.annotations)
    both = _grid({1: {1: 10.0, 2: 9.5, 4: 11.0}, 16: {1: 30.0, 2: 23.4, 4: 33.0}})
    assert any(a.text.startswith("○ 2 points below less work<br>(1 inside the 10% margin,<br>1 with overlapping "
                                 "repeats):<br>") for a in why.forward_figure(both).layout.annotations)


def test_the_charts_notes_stand_below_the_plots_where_they_cover_no_data():
    """Seen at 400 px: the ○ note drawn on the left plot covered part of the batch-16 line. The ✕ and ○ notes now
    stand under the charts, from the figure's left edge, below the right panel's bottom (the lowest panel, side by
    side or stacked on a phone), each under the one before, in a bottom margin grown by their lines; the plots keep
    their height."""
    ms = {1: {1: 10.0, 2: 9.5, 4: 11.0}, 16: {1: 30.0, 2: 23.4, 4: 33.0}}
    plain = why.forward_figure(_grid({1: {1: 10.0, 2: 10.5, 4: 11.0}}))
    figure = why.forward_figure(_grid(ms, [{"batch": 1, "n": 4, "than_batch": 1, "than_n": 2}]))
    notes = [a for a in figure.layout.annotations if a.text[0] in "✕○"]
    assert [a.text[0] for a in notes] == ["✕", "○"]
    assert notes[0].text == "✕ 1 point faster than less work:<br>noise (measured twice),<br>not a finding"
    for note in notes:
        assert (note.xref, note.x, note.xanchor, note.yref, note.y, note.yanchor) == (
            "paper", 0, "left", "y2 domain", 0, "top")
    lines = [a.text.count("<br>") + 1 for a in notes]  # 3 and 6
    assert notes[0].yshift == -plain.layout.margin.b  # under the tick labels and the axis title
    assert notes[1].yshift == notes[0].yshift - lines[0] * why.NOTE_LINE_PX - why.NOTE_GAP_PX
    grown = sum(lines) * why.NOTE_LINE_PX + 2 * why.NOTE_GAP_PX
    assert figure.layout.margin.b == plain.layout.margin.b + grown
    assert figure.layout.height == plain.layout.height + grown  # the plots keep their pixel height
    assert max(len(line) for a in notes for line in a.text.split("<br>")) <= 33  # phone-wide lines


def test_cost_cards_carry_the_spread_of_their_per_repeat_ratios():
    """Verifying k=4, the lookahead pass and c showed bare numbers beside the step card's repeats: each now gives the
    lowest and highest of its ratio over the repeats (repeat i of every n was timed in the same round)."""
    samples = {1: {1: [98.0, 100.0, 104.0], 4: [103.0, 104.0, 108.0], 8: [107.0, 110.0, 116.0],
                   16: [118.0, 120.0, 130.0]},
               16: {1: [150.0, 200.0, 260.0], 4: [290.0, 300.0, 310.0], 8: [480.0, 500.0, 520.0]}}
    ms = {b: {n: sorted(t)[1] for n, t in row.items()} for b, row in samples.items()}
    grid = {"ms": ms, "samples": samples, "param_bytes": 1e8, "impossible": [],
            "spread": {b: {n: (min(t), max(t)) for n, t in row.items()} for b, row in samples.items()}}
    # batch 1, T(5) per round: T(4) + (T(8) - T(4)) / 4 over T(1)
    assert why.round_ratios(grid, 1, 5) == [pytest.approx(104.0 / 98), pytest.approx(105.5 / 100),
                                            pytest.approx(110.0 / 104)]
    costs = {"early-exit": 0.53, "early-exit_range": (0.49, 0.58), "ngram": 0.0002, "early_exit_layer": 15}
    html = why.summary_html(grid, costs, lookahead=[(3, 3, 2)])
    # the figure is the median of the rounds' ratios (1.061, 1.055, 1.058), the range's own source
    assert ("T(5)/T(1) (the median of 3 repeats, each timed T(5) and T(1) in the same round): 5 tokens for the price "
            "of 1.06; repeats 1.05–1.06") in html
    # batch 16, rounds: (290 + 190/4) / 150 = 2.25, 350 / 200 = 1.75, (310 + 210/4) / 260 = 1.39
    assert "5 tokens for the price of 1.75; repeats 1.39–2.25; not nearly free here: this step reads so few" in html
    assert "1.05–1.06; not nearly free" not in html  # batch 1 is the flat part: the heading holds there
    assert "first 15 layers, 1 token ÷ a target step; repeats 0.49–0.58; n-gram lookup: 0.0002" in html
    # lookahead W=3, N=3, G=2: 11 tokens, T(11) = T(8) + 3/8 (T(16) − T(8)) per round
    assert ("T(11)/T(1) (interpolated; the median of 3 repeats, each timed T(11) and T(1) in the same round); it pays "
            "only above 1.14 tokens per pass; repeats 1.13–1.17") in html
    single = dict(grid, samples={b: {n: t[:1] for n, t in row.items()} for b, row in samples.items()})
    assert "one repeat: no spread" in why.summary_html(single, None)


def test_the_copy_bandwidth_card_gives_its_repeats_range_and_the_heading_claims_nothing():
    """A trial's "Memory copy bandwidth 18.6 GB/s" card showed no spread beside cards that gave theirs, under the
    heading "Why verification is nearly free." right above a k = 4 card at 2.28 steps, "not nearly free here". The
    card now gives its repeats' range (too noisy to tell when they lie more than 2× apart, "repeats not kept" for a
    grid from before the range was kept); the heading asks when verification is nearly free."""
    samples = {1: {1: [98.0, 100.0, 104.0], 4: [103.0, 104.0, 108.0]}}
    grid = {"ms": {1: {1: 100.0, 4: 104.0}}, "samples": samples, "param_bytes": 1e8, "impossible": [],
            "copy_bandwidth_gbs": 18.6, "copy_bandwidth_range": (17.94, 19.21)}
    html = why.summary_html(grid, None)
    assert ("<div class='card-value'>18.6 <small>GB/s</small></div><div class='card-def'>read + written by a large "
            "tensor copy: the ceiling for reading weights; repeats 17.9–19.2 GB/s</div>") in html
    noisy = why.summary_html(dict(grid, copy_bandwidth_range=(6.0, 19.2)), None)
    assert ("18.6 <small>GB/s: too noisy to tell</small>" in noisy
            and "weights; too noisy to tell: repeats 6.0–19.2 GB/s, 3.2× apart" in noisy)
    assert "weights; repeats not kept: no spread" in why.summary_html(dict(grid, copy_bandwidth_range=None), None)
    assert "<b>When is verification nearly free?</b> Where the step waits on memory." in why.INTRO
    assert "Why verification is nearly free" not in why.INTRO


def test_the_grid_keeps_the_copy_bandwidth_repeats_range(tiny_target, monkeypatch):
    import specviz.measure.grid

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [19.2, 17.9, 18.6, 18.1, 19.0])
    grid = measure_forward_grid(tiny_target, token_counts=(1, 2), batch_sizes=(1,), repeats=1, warmup=0,
                                bandwidth=True)
    assert grid["copy_bandwidth_gbs"] == 18.6 and grid["copy_bandwidth_range"] == (17.9, 19.2)
    from specviz.measure.machine import copy_bandwidth_repeats

    rates = copy_bandwidth_repeats(tiny_target.device, megabytes=1, repeats=3)  # a real copy, 1 MB
    assert len(rates) == 3 and all(rate > 0 for rate in rates)


def test_the_verify_card_s_figure_lies_in_the_range_shown_with_it():
    """A trial's k = 4 card read 1.65 steps beside "repeats 1.73–1.85": the figure was the ratio of the median curve,
    whose T(4), T(8) and T(1) medians came from different rounds, the range the rounds' own ratios. Both now come from
    the rounds: the figure is their median, said in a few words; the median curve's ratio (1.675 here) is used only
    without per-repeat samples."""
    samples = {1: {1: [100.0, 100.0, 90.0], 4: [150.0, 170.0, 160.0], 8: [260.0, 190.0, 180.0]}}
    ms = {1: {n: sorted(t)[1] for n, t in samples[1].items()}}
    grid = {"ms": ms, "samples": samples, "param_bytes": 1e8, "impossible": []}
    assert why.round_ratios(grid, 1, 5) == [pytest.approx(1.775), pytest.approx(1.75), pytest.approx(1.8333, abs=1e-4)]
    html = why.summary_html(grid, None)
    assert ("<div class='card-value'>1.77 <small>steps</small></div><div class='card-def'>T(5)/T(1) (the median of 3 "
            "repeats, each timed T(5) and T(1) in the same round): 5 tokens for the price of 1.77; repeats "
            "1.75–1.83") in html
    assert "1.68" not in html and "1.67" not in html
    bare = why.summary_html(dict(grid, samples={}), None)  # no per-repeat samples: the median curve, said so
    assert "1.68 <small>steps</small>" in bare and "T(5)/T(1) (the median curve): 5 tokens for the price of 1.68" in bare


def test_draft_costs_give_the_range_over_repeats(tiny_target):
    costs = measure_draft_costs(tiny_target, step_ms=1.0, exit_layer=2, prompt_len=8, repeats=3,
                                step_repeats=[0.9, 1.0, 1.2])
    low, high = costs["early-exit_range"]
    # c is the median early-exit forward over step_ms = 1; the range is the fastest repeat over the slowest step
    # (1.2) up to the slowest repeat over the fastest step (0.9), so it holds c and is wider than the steps' spread
    assert 0 < low < costs["early-exit"] < high and high / low >= 1.2 / 0.9


def test_live_chart_titles_wrap_and_the_k_chart_says_why_drafted_bars_pass_k():
    """app/figures.py, seen in the browser: a long chart title ("Acceptance by draft position (no token drafted)")
    centred over a third of a 1400 px page ran past its left edge; the k chart's axis read "tokens (gain: ×)"; its
    drafted bars stood above the k line for tree and lookahead passes with no word why."""
    from app import figures
    from specviz.measure.run_stats import RunStats

    assert figures.title_html("Draft length k per pass") == "<b>Draft length k per pass</b>"
    assert figures.title_html("Acceptance by draft position (no token drafted)") == (
        "<b>Acceptance by draft position</b><br><span style='font-size:12px'>(no token drafted)</span>")
    empty = figures.dashboard_figure(RunStats("speculative"), RunStats("baseline"))
    assert "<b>Acceptance by draft position</b><br>" in [a.text for a in empty.layout.annotations][3]
    tree = RunStats("speculative")
    tree.pass_k, tree.pass_drafted, tree.pass_accepted, tree.pass_tokens = [3, 3], [8, 3], [2, 3], [3, 4]
    tree.pass_gain = [None, None]
    panel = figures.k_panel(tree, RunStats("baseline"))
    assert panel.traces[0]["name"] == "drafted (a tree or lookahead pass<br>drafts more tokens than its depth k)"
    assert panel.yaxis["title"]["text"] == "draft tokens per pass"
    chain = RunStats("speculative")
    chain.pass_k, chain.pass_drafted, chain.pass_accepted, chain.pass_tokens = [3, 3], [3, 2], [1, 2], [2, 3]
    chain.pass_gain = [1.4, None]
    panel = figures.k_panel(chain, RunStats("baseline"))
    assert panel.traces[0]["name"] == "drafted" and panel.yaxis["title"]["text"] == "draft tokens; expected gain (×)"


def test_an_empty_k_or_tokens_per_pass_is_no_problem_but_a_typed_speedup_still_is():
    """run_issues without its old `if blank: pass` branch: a blank k or tokens per pass skips their checks (even
    when the other box holds nonsense), a typed speedup is still checked, and nothing is marked."""
    assert why.run_issues("abc", "", "") == (False, {})
    assert why.run_issues("—", "9", "") == (False, {})
    marked, problems = why.run_issues("", "2", "-3")
    assert not marked and list(problems) == ["speedup"]


def test_the_measure_button_has_a_stop_that_flags_the_session_and_no_handler_cancels_it():
    """Live and the Arena had a Stop button, the Why tab's Measure had none: a long measurement could only be
    waited out. Stop flags the session's measurement (its grid starts no other forward; the handler ends on its own).
    It no longer has Gradio cancel the Measure event: in Chromium that left a red "Error" on the status now and then
    (2 of 10 stops), as on the Live tab."""
    import gradio as gr

    with gr.Blocks() as demo:
        why.build_tab()
    ids = {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}
    deps = demo.get_config_file()["dependencies"]
    measure = next(d["id"] for d in deps if d.get("api_name") == "why_measure")
    assert not any(measure in (d.get("cancels") or []) for d in deps)  # no handler cancels the Measure event
    from_stop = [d for d in deps if any(t[0] == ids["why-stop"] for t in d["targets"])]
    assert any(d.get("api_name") == "why_stop" and d["queue"] is False for d in from_stop)
    # the measurement state, and the status box whose value the page's "a measurement sent" mark replaces
    assert all(len(d["inputs"]) == 2 for d in from_stop if d.get("api_name") == "why_stop")

    job = device.start(why.RUNS, None, "a test measurement")
    try:
        status = why.stop()
        assert job.cancel.is_set() and "status-info" in status and why.STOPPED in status
    finally:
        job.release()


def test_stop_never_has_gradio_cancel_the_measurement_it_ends_on_its_own_and_sends_nothing_after_the_flag(
        tiny_model_dir, monkeypatch):
    """With Gradio's hard cancel gone, Stop's flag ends the Measure handler on its own: it sends nothing after the
    flag (no status in flight, no stopped grid's result, no "Stopped while waiting" line), ends within a tick, frees
    the device, and Stop's second handler (stop_said) waits for that end, then says Stop's line: the last word. The
    handler is read here as Gradio reads it, in a thread of its own; nobody closes it. Measure works again after."""
    import threading
    import time

    monkeypatch.setattr(why.handlers, "STATUS_INTERVAL_S", 0.0)
    me = type("R", (), {"session_hash": "why-stop-ends-itself"})()

    def stopped_after(running, shown: int, measurement=None) -> tuple[list, float, str, str]:
        for _ in range(shown):
            next(running)
        sent, ended = [], threading.Event()

        def drive() -> None:  # what Gradio does: keep reading the handler until it ends
            sent.extend(running)
            ended.set()

        said = why.stop(measurement, me)  # the flag; the handler is not closed by anyone
        reader, t0 = threading.Thread(target=drive), time.monotonic()
        reader.start()
        again = why.handlers.stop_said(me)  # waits for the handler's end
        waited = time.monotonic() - t0
        assert ended.is_set(), "Stop's line came again before the measurement's handler had ended"
        reader.join(5)
        return sent, waited, said, again

    # stopped while measuring (the target loading, or its grid under way)
    sent, waited, said, again = stopped_after(why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me), 2)
    assert sent == [] and waited < why.handlers.STOP_WAIT_S and again == said and "status-info" in said
    assert not device.DEVICE.locked and "why-stop-ends-itself" not in why.handlers.ENDED
    assert "why-stop-ends-itself" not in why.handlers.FINISHED
    # stopped while waiting for the device: no "Stopped while waiting" line after Stop's (an earlier one stays)
    holder = device.start(device.CancelRegistry(), None, "another run")
    assert next(holder.turn(), True) is True
    try:
        running = why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me)
        assert "Measuring…" in next(running)[0] and "Waiting for the device" in next(running)[0]
        sent, waited, said, again = stopped_after(running, 0, {"grid": {}, "costs": {}})
        assert sent == [] and waited < why.handlers.STOP_WAIT_S and why.STOPPED_KEPT in html.unescape(again)
    finally:
        holder.release()
    # Measure works again right after a Stop; a stop_said with no measurement going does not wait
    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2))
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1, 4))
    outs = list(why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me))
    assert "Measured in" in outs[-1][0] and isinstance(outs[-1][4], dict) and not device.DEVICE.locked
    t0 = time.monotonic()
    assert isinstance(why.handlers.stop_said(me), type(why.handlers.gr.skip()))
    assert time.monotonic() - t0 < 0.5
    why.handlers.release_session(me)


def test_stop_says_its_line_again_one_round_trip_later():
    """In Chromium, Stop in a measurement's first second could leave the measurement's last status ("Measuring…
    Timing a first forward… (1 s of about 27 s") or a red Gradio "Error" badge over the status: an in-flight status
    landed after Stop's answer. A listener chained after Stop says Stop's line again, once, after the measurement's
    handler has ended (no measurement here: at once); the stylesheet hides Gradio's badge on that status."""
    import gradio as gr

    with gr.Blocks() as demo:
        why.build_tab()
    deps = demo.get_config_file()["dependencies"]
    stop_id = next(d["id"] for d in deps if d.get("api_name") == "why_stop")
    (again,) = [d for d in deps if d.get("trigger_after") == stop_id]
    assert again["queue"] is False and again["show_progress"] == "hidden" and not again["inputs"]
    session = type("R", (), {"session_hash": "again"})()
    said = why.stop(None, session)
    assert why.STOPPED in said and why.handlers.stop_said(session) == said
    assert isinstance(why.handlers.stop_said(session), type(gr.skip()))  # said once only
    css = (Path(__file__).resolve().parents[1] / "assets" / "style.css").read_text()
    assert '#why-status [data-testid="status-tracker"]:has(> .error)' in css


def test_stop_after_a_batch_size_finished_says_what_had_been_measured(tiny_model_dir, monkeypatch):
    """Trial: Stop about 7 s into Measure said "Stopped before anything was measured" though batch 1 had been
    measured by 5 s (the progress read "batch 4: warming up"). Stop now says which batch sizes had finished. The
    handler is driven by hand on the tiny target and stopped once batch 4 has started, as Gradio closes it on Stop."""
    import specviz.measure.grid

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    monkeypatch.setattr(why.handlers, "STATUS_INTERVAL_S", 0.0)  # a status for every step: stop at batch 4
    running = why.measure(str(tiny_model_dir), 2, 0.7, "", "", "")
    seen = []
    for out in running:
        seen.append(out[0])
        if why.handlers.FINISHED.get(""):
            break
    done = list(why.handlers.FINISHED[""])  # batch 1 done (the tiny target may have finished 4, even 16, too)
    assert done and done == [1, 4, 16][:len(done)]  # the job's thread runs ahead of the handler's statuses
    status = html.unescape(why.stop(None))
    assert why.handlers.stopped_partway(done) in status and why.STOPPED not in status
    assert why.handlers.stopped_partway([1]) == (
        "Stopped after batch 1 had been measured (of batch sizes 1, 4 and 16), and the device is free. A stopped "
        "measurement is not drawn: the chart and c need every batch size; press Measure to time the whole curve.")
    running.close()  # Gradio closes the stopped handler
    assert not device.DEVICE.locked and "" not in why.handlers.FINISHED
    assert why.STOPPED in why.stop(None)  # a second Stop: nothing is running, nothing had finished
    # with an earlier measurement on the chart, it stays and is said to
    assert why.handlers.stopped_partway([1, 4]).startswith("Stopped after batches 1 and 4 had been measured")
    why.handlers.FINISHED["sess"] = [1]
    kept = html.unescape(why.stop({"grid": {}, "costs": {}}, type("R", (), {"session_hash": "sess"})()))
    assert ("press Measure to time the whole curve. The chart and c from your earlier measurement stay." in kept
            and "sess" not in why.handlers.FINISHED)
    lines = why.handlers.FinishedBatches("lines")  # the grid's own lines, a re-measurement of batch 1 after 16
    for line in ("Loading the target x…", "batch 1: prefilling 64 tokens", "batch 1: warming up", "batch 4: warming up",
                 "batch 16: measuring", "batch 1: measuring again (a point came out faster than possible; "
                 "measurement 2)"):
        lines.line(line)
    assert why.handlers.FINISHED["lines"] == [1, 4, 16]
    lines.close()
    # a measurement that ends by itself leaves nothing for a later Stop
    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2))
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1, 4))
    list(why.measure(str(tiny_model_dir), 2, 0.7, "", "", ""))
    assert "" not in why.handlers.FINISHED and why.STOPPED in why.stop(None)


def test_an_early_exit_layer_the_target_lacks_is_fitted_and_said_when_measuring(tiny_model_dir, monkeypatch):
    """Measure refused an early-exit layer beyond the loaded target (check_exit_layer) where Live fits it: now c is
    timed at the target's last layer but one, and every status from then on says so (no toast besides). The tiny
    target has 4 layers: layer 100 becomes 3."""
    import specviz.measure.grid

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2))  # a small grid: the layer is what is tested here
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1,))
    layers = []
    real_costs = why.handlers.measure_draft_costs

    def costs(loaded, step_ms, exit_layer=None, **kwargs):
        layers.append(exit_layer)
        return real_costs(loaded, step_ms, exit_layer=exit_layer, **kwargs)

    monkeypatch.setattr(why.handlers, "measure_draft_costs", costs)
    with toasts_shown() as toasts:
        statuses = [out[0] for out in why.measure(str(tiny_model_dir), 100, 0.7, "", "", "")
                    if isinstance(out[0], str)]
    assert layers == [3] and not device.DEVICE.locked and toasts == []
    assert "which has 4 layers (got 100). Using 3." in html.unescape(statuses[-1])
    # done, or info where the tiny target's two token counts came out within noise of each other (the flag is
    # the grid's own reading of the timings, which this test does not control)
    flagged = "Within noise of" in statuses[-1] or "faster than possible" in statuses[-1]
    assert ("status-info" if flagged else "status-done") in statuses[-1]
    assert "(got 100). Using 3. Measured in" in statuses[-1]
    said = [s for s in statuses if "Using 3." in s]
    assert said and statuses.index(said[0]) > 0  # said once the target is loaded, and from then on
    assert all("Using 3." in s for s in statuses[statuses.index(said[0]):])
    assert why._measure_inputs("embedded", 100) == ("embedded", 100)  # the box's own check lets it through


def test_a_slider_box_left_with_no_number_gets_its_last_number_back_and_one_sentence():
    """Typing "abc" as draft cost c emptied the box (a number box reads it as nothing), put the thumb mid-track and
    drew the chart at c = 0 with no word, where α = 1.5 got "… is at most 1 here; using 1". Now the chart keeps
    the last number while the box is empty, and leaving it (or Enter) puts that number back with one sentence."""
    kept = {"alpha": 0.8, "c": 0.3}
    # while typing, an empty box is a number on its way: nothing is said or set
    assert why.slider_typed("c", None, kept, left=False) == (why.gr.skip(),) * 3
    slider, status, after = why.slider_typed("c", None, kept)  # left empty
    assert slider == why.gr.update(value=0.3) and after == kept
    assert "Draft cost c must be a number from 0 to 2; keeping 0.3." in status
    slider, status, after = why.slider_typed("alpha", "abc", kept)  # the API can send text
    assert slider["value"] == 0.8 and "Per-token acceptance α must be a number from 0 to 1; keeping 0.8." in status
    # a number in range is kept as the new last number, silently; one out of range is clamped, said and kept
    assert why.slider_typed("c", 0.125, kept, left=False) == (why.gr.skip(), why.gr.skip(), {"alpha": 0.8, "c": 0.125})
    slider, status, after = why.slider_typed("alpha", 1.5, kept, left=False)
    assert slider["value"] == 1 and after == {"alpha": 1, "c": 0.3}
    assert clamp_notice(1.5, "Per-token acceptance α", 0, 1)[1] in status  # worded in tests/test_messages.py
    # leaving the box still holding 1.5: set to 1 again, not said twice (the status keeps the first sentence)
    assert why.slider_typed("alpha", 1.5, after) == (why.gr.update(value=1), why.gr.skip(), after)
    slider, _, after = why.slider_typed("c", "-1", None)  # no state yet: the defaults
    assert slider["value"] == 0 and after == {"alpha": why.DEFAULT_ALPHA, "c": 0}
    # the chart draws the kept number for a box with none, never 0
    assert why.whatif(0.8, None, 1, "", "", "", None, kept).layout.legend.title.text == "α = 0.80, c = 0.300"
    assert why.whatif("abc", "x", 1, "", "", "", None, kept).layout.legend.title.text == "α = 0.80, c = 0.300"
    assert _plain(why.whatif(None, None, 1, "", "", "", None).layout.legend.title.text) == (
        "α = 0.70, c = 0.050 (a default, not measured)")
    # after Measure sets c (or a Live run sets α), the state follows the sliders
    assert why.remember(0.65, 0.41, kept) == {"alpha": 0.65, "c": 0.41}
    assert why.remember(None, 0.41, kept) == {"alpha": 0.8, "c": 0.41}
    # raw payloads (preprocess off): a number typed out of range meanwhile is kept as the slider holds it
    assert why.remember(1.5, 99, kept) == {"alpha": 1.0, "c": why.MAX_C}
    assert why.remember("abc", -3, kept, {"costs": {"early-exit": 2.48}}) == {"alpha": 0.8, "c": 0.0}
    assert why.remember(0.5, 2.7, kept, {"costs": {"early-exit": 2.48}}) == {"alpha": 0.5, "c": 2.7}  # c's end: 3


def test_a_number_in_range_clears_the_sliders_stale_sentence_and_leaves_others():
    """The trial typed c = 1e9 ("Draft cost c is at most 2 here; using 2."), then 0.3: the line kept the old
    sentence under a chart drawn at 0.3. A number in range now clears that slider's sentence, while typing and when
    the box is left; the other slider's sentence and a run box's stay."""
    kept = {"alpha": 0.8, "c": 0.05}
    _, said, kept = why.slider_typed("c", 1e9, kept)
    assert "Draft cost c is at most 2 here; using 2." in said
    for left in (False, True):
        assert why.slider_typed("c", 0.3, kept, None, said, left=left) == (why.gr.skip(), "", {"alpha": 0.8, "c": 0.3})
    _, empty_said, _ = why.slider_typed("alpha", None, kept)  # "... must be a number ...; keeping 0.8."
    assert why.slider_typed("alpha", 0.5, kept, None, empty_said)[1] == ""
    assert why.slider_typed("alpha", 0.5, kept, None, said)[1] == why.gr.skip()  # c's sentence is not α's
    run_said = why.check_run("99", "2", "", None)  # a run box's sentence names no slider
    assert "Run: k must be a whole number" in run_said
    assert why.slider_typed("c", 0.3, kept, None, run_said)[1] == why.gr.skip()
    assert why.slider_typed("c", 0.3, kept, None, None)[1] == why.gr.skip()  # nothing shown: nothing to clear
    # the number the sentence set, read back (a release after Gradio clamped the box, in a loaded fresh-clone run):
    # the sentence stays
    _, said, kept = why.slider_typed("c", 2.48, {"alpha": 0.8, "c": 0.05})
    assert kept["c"] == 2 and why.slider_typed("c", 2, kept, None, said, left=True)[1] == why.gr.skip()


def test_the_what_if_sliders_are_wired_to_keep_their_last_number():
    """Each slider's input and release events go to slider_typed with the kept state (in and out) and say what they
    say in the what-if status, never the Measure status; the chart reads the state too, and Measure and a Live run
    update it once they set the sliders."""
    import gradio as gr

    with gr.Blocks() as demo:
        history = gr.State([])
        why.build_tab(history)
    ids = {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}
    deps = demo.get_config_file()["dependencies"]
    for elem_id in ("why-alpha", "why-c"):
        events = {t[1] for d in deps for t in d["targets"]
                  if t[0] == ids[elem_id] and ids["why-whatif-status"] in d["outputs"]}
        assert {"input", "release"} <= events
        assert not [d for d in deps if ids["why-status"] in d["outputs"]
                    and any(t[0] == ids[elem_id] for t in d["targets"])]
    chart = [d for d in deps if ids["why-whatif-chart"] in d["outputs"] and len(d["inputs"]) == 8
             and d["inputs"][0] == ids["why-alpha"]]  # whatif's (Measure's 8 inputs start with the target box)
    assert chart  # whatif's inputs end with the kept state
    kept = chart[0]["inputs"][-1]
    assert sum(d["outputs"] == [kept] for d in deps) == 2  # after Measure and after a Live run
    assert any(why.ENTER_EMPTY_JS == d.get("js") for d in deps)


def test_a_measured_c_above_the_sliders_end_moves_the_end_and_the_chart_uses_it(monkeypatch):
    """Issue 34's trial: Measure set the draft cost box to 2.482 (early exit) while the slider stopped at 2 and the
    chart said "c = 2.000". The slider's end now holds the measured c (rounded up), and the box, the chart and a
    typed value agree."""
    measured = {"grid": _grid({1: {1: 10.0, 2: 10.5, 4: 11.0}}), "costs": {"early-exit": 2.482}, "label": "T"}
    assert why.c_top(measured) == 3 and why.c_top(None) == why.MAX_C == 2
    assert why.c_top({"grid": {}, "costs": {"early-exit": 0.53}}) == 2  # a c within the usual range keeps it
    assert _plain(why.whatif(0.7, 2.482, 1, "", "", "", measured).layout.legend.title.text) == (
        "α = 0.70, c = 2.482 (early exit, measured)")
    unmeasured = why.whatif(0.7, 2.482, 1, "", "", "", None)
    assert unmeasured.layout.legend.title.text == "α = 0.70, c = 2.000"  # no such c yet
    kept = {"alpha": 0.7, "c": 2.482}
    assert why.slider_typed("c", 2.9, kept, measured, left=False)[2] == {"alpha": 0.7, "c": 2.9}  # in range now
    slider, status, after = why.slider_typed("c", 3.5, kept, measured)
    assert slider["value"] == 3 and clamp_notice(3.5, "Draft cost c", 0, 3)[1] in status and after["c"] == 3
    # the Measure handler sets the slider's end with its value
    from app.why import handlers

    monkeypatch.setattr(handlers, "forward_figure", lambda grid: None)
    monkeypatch.setattr(handlers, "summary_html", lambda grid, costs, lookahead=(): "")
    grid = dict(measured["grid"], settings={"repeats": 3, "prompt_len": 64})
    out = handlers._measured(dict(measured, grid=grid, note=None), 12.0, 0.7, "", "", "")
    c_update = out[handlers.OUTPUTS.index("why-c")]
    assert c_update["value"] == 2.482 and c_update["maximum"] == 3
    assert _plain(out[-1].layout.legend.title.text) == "α = 0.70, c = 2.482 (early exit, measured)"


def test_a_c_typed_out_of_range_is_said_when_its_box_is_left():
    """Issue 34's trial on a busy machine: typing 2.48 as draft cost c became 2 and -1 became 0 without a word, as
    k = 99 once did in Live: held back behind the click's release ("always_last"), the typed number's release read
    the box after Gradio had clamped it. Each slider's release is now sent at once, as Live's k's, and says the
    clamp with the sentence Live's k gets."""
    import gradio as gr

    from app.inputs import clamp_notice
    from app.messages import RELEASE_TRIGGER_MODE

    with gr.Blocks() as demo:
        why.build_tab(gr.State([]))
    ids = {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}
    for elem_id in ("why-alpha", "why-c"):
        released = [fn for fn in demo.fns.values() if (ids[elem_id], "release") in fn.targets]
        assert released and all(fn.trigger_mode == RELEASE_TRIGGER_MODE and fn.preprocess is False
                                for fn in released), elem_id
    for typed, used in ((2.48, 2), (-1, 0)):
        slider, status, kept = why.slider_typed("c", typed, None)
        message = clamp_notice(typed, "Draft cost c", 0, why.MAX_C)[1]
        assert slider["value"] == used == kept["c"] and message in status


def test_the_measuring_status_says_plainly_once_past_its_estimate():
    """Trial: the status read "of about 383 s" all the way through a measurement that took much longer, and two
    tries on a busy machine said "about 1832 s" and "871 s": the estimate is a middle figure with the probe's range
    (x 0.7 to x 1.6), "up to" its high end once past the middle, and plain once past that."""
    assert why._measuring("batch 4: round 2/5", 100, 383.0) == (
        "Measuring… batch 4: round 2/5 (100 s of about 6 min (4–10 min), estimated from the first forwards timed "
        "here just now)")
    assert why._measuring("batch 8: round 1/5", 500, 383.0) == (
        "Measuring… batch 8: round 1/5 (8 min 20 s of up to 10 min, estimated from the first forwards timed here "
        "just now)")
    assert why._measuring("batch 16: round 5/5", 700, 383.0) == (
        "Measuring… batch 16: round 5/5 (11 min 40 s, past the estimate of 4–10 min: the machine is busier or "
        "slower than estimated)")
    # the two tries of the trial, as said now: their ranges overlap
    assert why._measuring("x", 46, 871.0).endswith("(46 s of about 15 min (10–23 min), estimated from the first "
                                                   "forwards timed here just now)")
    assert "(46 s of about 31 min (21–49 min)" in why._measuring("x", 46, 1832.0)


def test_the_measuring_status_on_a_very_busy_machine_is_one_plain_sentence():
    from app.estimates import fresh_estimate

    estimate = fresh_estimate(871.0, (12.0, 2))
    assert why._measuring("batch 4: warming up", 100, estimate) == (
        "Measuring… batch 4: warming up (100 s; the machine is very busy now (load 12 on 2 CPUs): this may take "
        "9–29 min)")
    assert why._measuring("x", 100, fresh_estimate(871.0, (12.0, 2))) == why._measuring("x", 100, estimate)


def test_stop_says_whether_an_earlier_measurement_stays():
    """Trial: after Stop with nothing measured the status said "The chart and c of an earlier measurement stay"."""
    assert why.STOPPED in why.stop(None) and "earlier" not in why.stop(None)  # the tab's state before a measurement
    kept = html.unescape(why.stop({"grid": {}, "costs": {}}))
    assert why.STOPPED_KEPT in kept and "from your earlier measurement stay" in kept


def test_a_stop_while_the_measurement_waits_in_the_queue_keeps_it_from_running(tiny_model_dir, monkeypatch):
    """Gradio runs at most 4 Arena runs and measurements at once; a Stop pressed while the page's measurement still
    waited in that queue found nothing to flag, and the measurement ran later anyway. The page now marks a sent
    measurement (app.stop_marks) and Stop carries the mark: that measurement starts flagged and sends nothing, so
    Stop's line stays the last word; a measurement refused for its input spends the mark; the next one runs."""
    import gradio as gr

    from app.stop_marks import stop_sent_js

    with gr.Blocks() as demo:
        why.build_tab()
    ids = {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}
    deps = demo.get_config_file()["dependencies"]
    stop_dep = next(d for d in deps if d.get("api_name") == "why_stop")
    assert stop_dep["js"] == stop_sent_js("svWhyMeasuring", 2) == "(a0, a1) => [a0, window.svWhyMeasuring === true]"
    assert stop_dep["inputs"][1] == ids["why-status"]
    measure = next(d for d in deps if d.get("api_name") == "why_measure")
    measure_id = measure["id"]
    assert measure["js"] == "(...args) => { window.svWhyMeasuring = true; return args; }"  # inputs pass unchanged
    assert any(d.get("trigger_after") == measure_id and d.get("js") == "() => { window.svWhyMeasuring = false; }"
               for d in deps)

    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2))
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1, 4))
    me = type("R", (), {"session_hash": "why-queued"})()
    said = why.stop(None, me, sent=True)
    assert why.STOPPED_QUEUED in html.unescape(said) and "so it will not run" in why.STOPPED_QUEUED
    outs = list(why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me))  # flagged: measures nothing
    assert len(outs) == 1 and "so it did not run" in html.unescape(outs[0][0])
    assert all(isinstance(v, type(why.handlers.gr.skip())) for v in outs[0][1:])  # the rest stays as it was
    assert not device.DEVICE.locked and why.handlers.stop_said(me) == said
    outs = list(why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me))  # the mark was spent
    assert "Measured in" in outs[-1][0]
    kept = why.stop(outs[-1][4], me, sent=True)  # an earlier measurement stays on the chart, and the line says so
    assert "The chart and c from your earlier measurement stay." in kept
    refused = list(why.measure("  ", 0, 0.7, "", "", "", request=me))  # refused before it starts: spends the mark
    assert len(refused) == 1 and "status-error" in refused[0][0]
    outs = list(why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me))
    assert "Measured in" in outs[-1][0]
    assert why.STOPPED in why.stop(None, me, sent=False)  # nothing sent, nothing running: no mark
    assert "Measured in" in list(why.measure(str(tiny_model_dir), 2, 0.7, "", "", "", request=me))[-1][0]
    why.handlers.release_session(me)
