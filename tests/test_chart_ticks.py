"""A new user's trial: with k = auto the "Acceptance by draft position" chart's x labels collided (up to 16
positions, one label each, turned on their side in a third of the page). At most POSITION_TICKS upright labels now,
the first and the last position always among them."""

from __future__ import annotations

import os
import sys

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
sys.path.insert(0, os.path.dirname(__file__))

from app import figures  # noqa: E402
from test_counted_spreads import _run  # noqa: E402


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
