"""The what-if chart's best-k note (app.why.figures.best_k_line): a best k is named only where it speeds decoding
up; where every k gives a speedup at or below 1×, the note says that no k pays, for the paper's curve and the
measured-cost curve separately. A trial at α = 1, c = 2 read "Best k, paper: k = 1 (0.67×)"."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import why  # noqa: E402
from app.figures import visible_lines  # noqa: E402
from app.why.figures import best_k_line  # noqa: E402
from specviz.measure.costs import whatif_curves  # noqa: E402


def _note(figure) -> str:
    """The note under the speedup chart (the one naming the best k, or that none pays)."""
    (note,) = [a.text for a in figure.layout.annotations if "Best k" in a.text or "no k pays" in a.text]
    return note


def test_no_k_pays_at_alpha_one_and_draft_cost_two():
    curves = whatif_curves(1.0, 2.0)
    # α = 1: k+1 tokens a pass for 1 + 2k steps, so (k+1)/(2k+1): 2/3 at k = 1, falling towards 1/2
    assert curves["paper"][0] == pytest.approx(2 / 3) and max(curves["paper"]) == curves["paper"][0]
    note = _note(why.whatif_figure(curves))
    assert "Best k" not in note
    assert " ".join(visible_lines(note)).startswith("Paper: no k pays at this draft cost (best k = 1 gives 0.67×) ")
    assert all(len(line) <= 40 for line in visible_lines(note))


def test_a_normal_setting_still_names_its_best_k():
    curves = whatif_curves(0.7, 0.05)
    best = max(range(16), key=lambda i: curves["paper"][i])
    assert curves["paper"][best] > 1
    note = _note(why.whatif_figure(curves))
    assert visible_lines(note)[0] == f"Best k, paper: k = {best + 1} ({curves['paper'][best]:.2f}×)"
    assert "no k pays" not in note


def test_the_measured_curve_is_judged_on_its_own():
    """The paper's curve pays at α = 0.7, c = 0.05; verifications timed at k+1 times a step do not."""
    steep = {1: 10.0, 2: 20.0, 4: 40.0, 8: 80.0, 16: 160.0, 32: 320.0}
    curves = whatif_curves(0.7, 0.05, steep)
    assert max(curves["paper"]) > 1 and max(curves["measured"]) < 1
    lines = " ".join(visible_lines(_note(why.whatif_figure(curves))))
    top = max(curves["measured"])
    assert lines.startswith("Best k, paper: k = ")
    assert f"Measured costs: no k pays at these costs (best k = 1 gives {top:.2f}×)" in lines
    assert curves["measured"][0] == top


def test_best_k_line_skips_untimed_points_and_needs_more_than_one_as_shown():
    assert best_k_line([1, 2, 3], [float("nan"), 1.5, 1.2], "paper") == "Best k, paper: k = 2 (1.50×)"
    assert "no k pays" in best_k_line([1, 2], [1.004, 0.9], "paper")  # shows as 1.00×: no speedup
    assert best_k_line([1, 2], [1.006, 0.9], "measured costs") == "Best k, measured costs: k = 1 (1.01×)"


def test_a_best_k_at_the_end_of_a_flat_curve_says_so():
    """A trial at c = 0 read "Best k, paper: k = 16 (3.56×)": the slider's end, on a curve flat for many k. The note
    now says it is the end of the range and from which k the curve stays within 1% of it."""
    curves = whatif_curves(0.7, 0.0)
    paper = curves["paper"]
    assert paper[-1] == max(paper) and paper[-1] == pytest.approx(3.326, abs=1e-3)
    assert paper[11] >= 0.99 * paper[-1] > paper[10]  # k = 12 is the first k within 1% of k = 16's
    assert why.figures.plateau_start(curves["k"], paper) == 12
    assert " ".join(visible_lines(_note(why.whatif_figure(curves)))).startswith(
        "Best k, paper: k = 16 (3.33×), the end of the range; within 1% from k = 12 Press Measure")
    assert all(len(line) <= 40 for line in visible_lines(_note(why.whatif_figure(curves))))
    # still rising by more than 1% at the end: the end of the range, not a plateau
    steep = whatif_curves(0.99, 0.0)["paper"]
    assert steep[-1] > 1.01 * steep[-2]
    assert " ".join(visible_lines(best_k_line(list(range(1, 17)), steep, "paper"))) == (
        f"Best k, paper: k = 16 ({steep[-1]:.2f}×), the end of the range, still rising")
    # a best k inside the range stays bare, as before
    assert best_k_line([1, 2, 3, 4], [1.5, 2.0, 2.0, 1.9], "paper") == "Best k, paper: k = 2 (2.00×)"
    assert " ".join(visible_lines(best_k_line([1, 2, 3, 4], [1.5, 1.99, 2.0, 2.005], "paper"))) == (
        "Best k, paper: k = 4 (2.00×), the end of the range; within 1% from k = 2")
