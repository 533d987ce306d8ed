"""A new user's trial: with k = auto the "Acceptance by draft position" chart's x labels collided (up to 16
positions, one label each, turned on their side in a third of the page). At most POSITION_TICKS upright labels now,
the first and the last position always among them. The same trial found the k axes of the what-if charts (the Why
tab's and the classroom's, k up to 16) labelling every k on a 400 px phone: they take the same ticks, while every k
keeps its point and its hover."""

from __future__ import annotations

import os
import sys

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

from app import classroom, figures, why  # noqa: E402
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
    assert {t.name for t in curves_drawn} == {"expected tokens per pass", "speedup, paper (verification = 1 step)",
                                              "speedup with the measured T(k+1), batch 1"}
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
