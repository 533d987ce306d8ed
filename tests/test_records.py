"""The Live tab's history row (app.records.RunSummary): typed fields the Why tab reads instead of the display
labels, and a frozen value Gradio's state can hash for its change events."""

from __future__ import annotations

import dataclasses

from app.records import NO_INTERVAL, RunSummary
from app.render import history_counted, history_html
from honest_support import unlabelled


def test_the_k_a_run_started_from_follows_its_schedule():
    fixed = RunSummary(drafter="n-gram", k="k = 4", k_value=4, k_schedule="fixed")
    adaptive = dataclasses.replace(fixed, k="k = 4 (adaptive)", k_schedule="heuristic")
    auto = dataclasses.replace(fixed, k="k = auto", k_schedule="auto")
    lookahead = RunSummary(drafter="lookahead (W=3, N=3, G=2)", k="k = 2 (N−1) or a plain step (auto)", k_value=2,
                           k_schedule="auto", lookahead=(3, 3, 2))
    assert [row.start_k for row in (fixed, adaptive, auto, lookahead, RunSummary())] == [4, 4, None, 2, None]
    assert [row.adaptive for row in (fixed, adaptive, auto, lookahead)] == [False, True, False, False]


def test_a_row_is_a_frozen_value():
    row = RunSummary(drafter="n-gram", k="k = 4", spec_tps=20.0, spec_tps_interval=(18.0, 22.0))
    assert hash(row) == hash(dataclasses.replace(row)) and row == dataclasses.replace(row)
    assert RunSummary().spec_tps_interval == NO_INTERVAL  # a row that keeps no interval (shown as the rate alone)


def test_a_row_without_a_drafter_or_a_kept_spread_shows_the_figure_alone():
    row = RunSummary(drafter="n-gram", k="k = 4", acceptance=0.6, tokens_per_pass=1.9)
    assert (row.acceptance_spread, row.tokens_per_pass_spread) == ("", "")  # a row that keeps none
    table = unlabelled(history_html([row, RunSummary()]))
    assert "<td>60%</td><td>1.90</td>" in table and "<td>–</td><td>–</td>" in table
    spread = dataclasses.replace(row, acceptance_spread="44–88%", tokens_per_pass_spread="5 passes: too few to tell")
    assert history_counted(spread.acceptance, spread.acceptance_spread, percent=True) == (
        '60%<br><small class="spread" style="white-space: nowrap">(44–88%)</small>')
    assert history_counted(spread.tokens_per_pass, spread.tokens_per_pass_spread) == (
        '1.90<br><small class="spread">(5 passes: too few to tell)</small>')
