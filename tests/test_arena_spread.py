"""The spread the arena gives each timed figure, from hand-made timings (measure_run replaced by a fake run, so no
clock is read): each speedup against the standard runs timed beside its method and the drift between them; the
bootstrap interval of T_verify and T_draft over the passes; T_step, c and the predictions carrying the spread of their
parts, and a pooled row spanning its prompts; and how the table's cells, the bars' error bars and the downloads show
it. The same figures on real runs: test_arena_runs.py."""

from __future__ import annotations

import csv
import io
import json
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app.figures import NOTE_HEADROOM  # noqa: E402

from app import arena as arena_tab  # noqa: E402
from app.arena.verdicts import speedup_reading  # noqa: E402
from specviz.analysis.arena import variants  # noqa: E402
from specviz.analysis.arena_rows import (Measured, Variant, _counts, make_row, pool, to_csv,  # noqa: E402
                                         to_json)
from specviz.core.engine import GenerationConfig  # noqa: E402
from specviz.core.verdict import NOISY, NOT_FINDING, SAME, SLOWER  # noqa: E402


# ----------------------------------------------------------------------------------------- the speedups' spread


def test_one_slow_baseline_run_weighs_only_on_the_methods_beside_it(monkeypatch):
    """Hand-made timings: the third baseline run is 5x slower (the machine was busy then). With a baseline timed
    next to every method, only the two methods beside it get a large ratio, and their rows show the drift."""
    import specviz.analysis.arena as arena
    from specviz.analysis.prompts import Prompt
    from specviz.core.counters import Counters

    baseline_ms = iter([100.0, 100.0, 500.0, 100.0, 100.0])  # ms per token of each baseline run, in order

    def fake_run(target, drafter, ids, config, stop):
        ms = next(baseline_ms) if drafter is None else 50.0  # every method: 2x the normal baseline
        passes = 10 if drafter is None else 1  # a method's pass makes 10 tokens: its 2x-6x are possible
        stats = Counters(runs=1, passes=passes, emitted=10, generated=11, prefill_ms=5.0, verify_ms=10 * ms)
        return Measured(stats, (1, 2, 3))

    monkeypatch.setattr(arena, "measure_run", fake_run)
    methods = variants(["ngram", "model"], [2, 4])
    ticks: list[str] = []
    session = arena._Session(None, GenerationConfig(), lambda v: None if v.drafter == "none" else object(),
                             lambda: False, ticks.append)
    runs = arena._measure_prompt(session, methods, 0, Prompt("p", "c", "x"), [1])
    order = [t.split(": ")[1] for t in ticks]
    assert order == ["standard", "ngram k=2", "standard", "ngram k=4", "standard", "model k=2", "standard",
                     "model k=4", "standard"]
    rows = {v.label: make_row("prompt", "c", "p", v, _counts(*runs[v][:2], True, runs[v][2]))
            for v in methods}
    assert rows["ngram k=2"]["decode_speedup"] == pytest.approx(2.0)
    assert rows["model k=4"]["decode_speedup"] == pytest.approx(2.0)
    for label in ("ngram k=4", "model k=2"):  # beside the slow run: (100 + 500) / 2 ms per token against 50
        assert rows[label]["decode_speedup"] == pytest.approx(6.0)
        assert rows[label]["baseline_drift"] == pytest.approx(4.0)
    assert rows["ngram k=2"]["baseline_drift"] == pytest.approx(0.0)
    assert arena_tab.noisy_rows(list(rows.values())) == 2  # no spread to read here: the drift decides
    drift = arena_tab.SUMMARY_COLUMNS.index(("Baseline drift", "baseline_drift", "%"))
    cells = arena_tab.table(list(rows.values()))["data"]
    assert cells[2][drift] == "400% unsteady (the 2 beside it)" and cells[1][drift] == "0% (the 2 beside it)"  # ngram k=4 beside the slow run; k=2 not
    assert cells[0][drift] == "400% unsteady (all 5 standard runs)"  # the reference: all its runs, the same line


def _rows_measured_by(monkeypatch, fake_run) -> dict:
    """The prompt rows of n-gram at k = 2 and 4 and standard decoding, each run by ``fake_run``, by label."""
    import specviz.analysis.arena as arena
    from specviz.analysis.prompts import Prompt
    monkeypatch.setattr(arena, "measure_run", fake_run)
    methods = variants(["ngram"], [2, 4])
    session = arena._Session(None, GenerationConfig(), lambda v: None if v.drafter == "none" else object(),
                             lambda: False, lambda _: None)
    runs = arena._measure_prompt(session, methods, 0, Prompt("p", "c", "x"), [1])
    return {v.label: make_row("prompt", "c", "p", v, _counts(*runs[v][:2], True, *runs[v][2:]))
            for v in methods}


def _hand_made_rows(monkeypatch, baseline_ms: list[float], method_ms: float = 50.0) -> dict:
    """Per-prompt rows of ngram x (2, 4) from hand-made timings: the baseline runs take ``baseline_ms`` ms per token
    in order (B, m1, B, m2, B), every method ``method_ms``; 10 tokens after a 5 ms prefill, 11 in all."""
    from specviz.core.counters import Counters

    times = iter(baseline_ms)

    def fake_run(target, drafter, ids, config, stop):
        ms = next(times) if drafter is None else method_ms
        passes = 10 if drafter is None else 2
        return Measured(Counters(runs=1, passes=passes, emitted=10, generated=11, prefill_ms=5.0,
                                 verify_ms=10 * ms), (1, 2, 3))

    return _rows_measured_by(monkeypatch, fake_run)


def test_every_speedup_carries_its_spread_against_every_baseline_of_its_prompt(monkeypatch):
    """Baselines of 100, 110, 500 ms per token around methods of 50 ms per token: ngram k=2 sits between 100 and
    110 (decoding rates 10 and 9.09 tokens/s against its 20), ngram k=4 between 110 and 500. Each ratio is taken
    against the two runs beside it. Its spread: against each of the three (2.0, 2.2 and 10.0), widened by how far
    one standard run lies from their pool (30 tokens in 7.1 s: 4.23 tokens/s; the runs' 10, 9.09 and 2 are 2.37 and
    0.47 of it at the ends), since the method's one run may be off as much."""
    rows = _hand_made_rows(monkeypatch, [100.0, 110.0, 500.0])
    k2, k4, base = rows["ngram k=2"], rows["ngram k=4"], rows["standard"]
    pool_rate = 30 / 7.1
    assert k2["decode_speedup"] == pytest.approx(20 / (20_000 / 2100))  # 2.1: the two baselines pooled
    for row in (k2, k4):
        assert (row["decode_speedup_low"], row["decode_speedup_high"]) == (
            pytest.approx(2.0 * 2 / pool_rate), pytest.approx(10.0 * 10 / pool_rate))  # 0.95 and 23.67
    assert k4["decode_speedup_high"] / k4["decode_speedup_low"] == pytest.approx((1 + base["baseline_drift"]) ** 2)
    assert k2["baseline_drift"] == pytest.approx(0.1)  # the drift stays that of the two runs beside the method
    # end to end (prefill included): 11 tokens in 505 ms against 11 in 1005, 1105 and 5005 ms (33 in 7115 pooled)
    assert (k2["speedup_low"], k2["speedup_high"]) == (pytest.approx(1005 / 505 * 7115 / (3 * 5005)),
                                                       pytest.approx(5005 / 505 * 7115 / (3 * 1005)))
    assert base["decode_speedup_low"] is None and base["speedup_high"] is None  # the reference has none
    table = arena_tab.table([base, k2, k4])
    decode = table["headers"].index("Speedup, decode")
    end = table["headers"].index("Speedup, end to end")
    # 6.10 is above the 5 tokens per pass of ngram k=4: not a finding whatever its spread, the number kept and that
    # reason in its own words; its spread lies wholly above 1, so never "too noisy to tell" (the one rule, issue 34)
    assert [row[decode] for row in table["data"]] == [
        arena_tab.speedup_cell(r, "decode_speedup") for r in (base, k2, k4)]
    assert table["data"][0][decode] == "1.00 (reference)"  # the cells' wording: tests/test_messages.py
    # ngram k=2: 2.10× against the two beside it, but a machine whose standard runs lie 5× apart tells nothing
    assert [(v.word, v.value) for v in map(speedup_reading, (k2, k4))] == [
        (NOISY, pytest.approx(2.10)), (NOT_FINDING, pytest.approx(6.10))]
    assert "its 5.0 tokens per pass" in speedup_reading(k4).reason and "355%" in speedup_reading(k4).reason
    assert table["data"][1][end] == "too noisy to tell: 2.09× measured (0.94–23.39×)"
    # a pooled row spans the lowest to the highest over its prompts
    pooled = pool_rows([k2, k4])
    assert (pooled["decode_speedup_low"], pooled["decode_speedup_high"]) == (pytest.approx(2.0 * 2 / pool_rate),
                                                                             pytest.approx(10.0 * 10 / pool_rate))


def test_a_method_slower_than_the_two_runs_beside_it_only_is_no_finding(monkeypatch):
    """A trial's busy machine: "0.98× the speed, slower (0.975–0.981×)" beside two standard runs that happened to
    agree, while the prompt's third standard run took 116% longer. Against every standard run of the prompt the
    method's ratios lie on both sides of 1: too noisy to tell, the number kept. ngram k=4, beside the slow run,
    is slower than the fast runs and faster than the slow one: too noisy to tell as well."""
    rows = _hand_made_rows(monkeypatch, [100.0, 101.0, 216.0], method_ms=102.5)
    k2, k4 = rows["ngram k=2"], rows["ngram k=4"]
    assert k2["decode_speedup"] == pytest.approx(100.5 / 102.5)  # against the two beside it, pooled: 0.98
    pool_rate = 30 / 4.17  # tokens/s of the three standard runs pooled; theirs are 10, 9.90 and 4.63
    assert (k2["decode_speedup_low"], k2["decode_speedup_high"]) == (
        pytest.approx(100 / 102.5 * (1000 / 216) / pool_rate), pytest.approx(216 / 102.5 * 10 / pool_rate))
    assert [(v.word, round(v.value, 2)) for v in map(speedup_reading, (k2, k4))] == [(NOISY, 0.98), (NOISY, 1.55)]
    assert arena_tab.noisy_rows([k2, k4]) == 2
    # with the prompt's standard runs all alike, the same method is slower: every ratio lies below 1
    steady = _hand_made_rows(monkeypatch, [100.0, 101.0, 100.0], method_ms=102.5)["ngram k=2"]
    assert speedup_reading(steady).word == SLOWER
    # the trial's next arena: "0.96× the speed, slower (0.94–0.98×)" on standard runs 5% apart; its one run may be
    # off as much as they are, so a gap within their spread is no verdict
    close = _hand_made_rows(monkeypatch, [100.0, 105.0, 103.0], method_ms=107.0)["ngram k=2"]
    assert close["decode_speedup_high"] == pytest.approx(105 / 107 * 10 / (30 / 3.08)) and round(
        close["decode_speedup_high"], 3) == 1.007
    assert speedup_reading(close).word == SAME


def pool_rows(rows: list[dict]) -> dict:
    return pool("category", "c", [dict(r, variant="ngram k=2", k="2") for r in rows], Variant("ngram", 2))


def test_a_speedup_without_a_pair_of_baselines_says_it_has_no_spread():
    row = {"level": "category", "category": "c", "variant": "ngram k=4", "drafter": "ngram", "tokens_per_pass": 2.0,
           "decode_speedup": 1.23, "speedup": 1.1, "baseline_drift": None}
    assert arena_tab.speedup_cell(row, "decode_speedup") == "1.23 (one run: no spread)"
    assert arena_tab.speedup_cell(dict(row, decode_speedup=None), "decode_speedup") == "–"
    bars = arena_tab.spread_bars([row])
    assert bars["array"] == [0.0] and bars["visible"] is False
    figure = arena_tab.arena_figure([dict(row, drafter="none", variant="standard", decode_speedup=1.0), row])
    assert any("one run: no spread where no bar is drawn" in a.text for a in figure.layout.annotations)
    # the method legend sits above the top row's titles, however many note lines they have (a trial saw it drawn
    # over the acceptance panel's three-line title): its bottom above the tallest, and inside the top margin
    lay = figure.layout
    inner = lay.height - lay.margin.t - lay.margin.b
    lines = max(1 + a.text.count("<br>") for a in lay.annotations if a.y == 1 and a.yanchor == "bottom")
    assert lines >= 2 and (lay.legend.y - 1) * inner >= 14 * 1.3 + 11 * 1.3 * (lines - 1) + 4
    assert lay.margin.t >= (lay.legend.y - 1) * inner + 30  # a row of legend items above it


def test_the_speedup_bars_carry_error_bars(monkeypatch):
    rows = list(_hand_made_rows(monkeypatch, [100.0, 110.0, 500.0]).values())
    for r in rows:
        r["level"] = "category"
    figure = arena_tab.arena_figure(rows)
    bar = {(t.name, t.yaxis): t for t in figure.data}[("ngram k=4", "y4")]
    value, low, high = rows[2]["decode_speedup"], 2.0 * 2 / (30 / 7.1), 10.0 * 10 / (30 / 7.1)  # 0.95, 23.67
    assert bar.error_y.array == pytest.approx((high - value,)) and bar.error_y.arrayminus == pytest.approx(
        (value - low,))
    assert "0.95–23.67 against its prompt's standard runs, with their spread" in bar.text[0]
    measured = arena_tab.predictions_figure(rows).data[0]
    assert measured.error_y.array == pytest.approx((high - rows[1]["decode_speedup"], high - value))
    assert any(arena_tab.SPREAD_NOTE in a.text for a in figure.layout.annotations)
    assert "one run: no spread" in arena_tab.NOTE and "The range after each speedup" in arena_tab.NOTE


# ------------------------------------------------------------------------------ the other timed figures' spread

# per pass: ngram k=2's, then ngram k=4's. Two values, twice each: a bootstrap of the mean over 4 passes draws all
# four alike with p = 1/16, above the 2.5% tails, so its 95% interval is exactly (smaller value, larger value)
VERIFY_MS = ([50.0, 150.0, 150.0, 50.0], [20.0, 40.0, 20.0, 40.0])
DRAFT_MS = ([1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 1.0, 1.0])
PASS_LISTS = {"pass_drafted": [2, 2, 2, 2], "pass_accepted": [2, 2, 1, 1], "pass_rejections": [0, 0, 1, 1],
              "pass_tokens": [3, 3, 2, 2]}
"""Each method's passes (as :data:`VERIFY_MS`, two kinds twice each): α 0.75 in 0.41–1.00 (the bootstrap over the
passes draws all four fully accepted with p 1/16, so its top is 1; the Wilson interval of 6 of 8 sets its bottom,
0.409), tokens per pass 2.5 in exactly 2.00–3.00."""
ALPHA_LOW = 0.409275430310169  # the Wilson interval's low end for 6 accepted of 8 judged (95%)


def _timed_rows(monkeypatch, baseline_ms=(100.0, 110.0, 500.0)) -> dict:
    """Per-prompt rows of ngram x (2, 4) (B, m1, B, m2, B): the baseline runs take ``baseline_ms`` ms per token
    (10 passes after a 5 ms prefill, 11 tokens), each method 4 passes with the per-pass verify and draft ms of
    :data:`VERIFY_MS` / :data:`DRAFT_MS` (8 drafted, 6 accepted, 2 rejections: alpha 0.75, m 2), per pass 2 drafted,
    2, 2, 1, 1 accepted and 3, 3, 2, 2 tokens (:data:`PASS_LISTS`)."""
    from specviz.core.counters import Counters
    from specviz.measure.run_stats import RunStats

    times, methods_seen = iter(baseline_ms), iter(range(2))

    def fake_run(target, drafter, ids, config, stop):
        if drafter is None:
            ms = next(times)
            return Measured(Counters(runs=1, passes=10, emitted=10, generated=11, prefill_ms=5.0,
                                     verify_ms=10 * ms), (1, 2, 3))
        i = next(methods_seen)
        verify, draft = VERIFY_MS[i], DRAFT_MS[i]
        stats = RunStats(runs=1, passes=4, emitted=10, generated=11, drafted=8, accepted=6, rejections=2,
                         prefill_ms=5.0, verify_ms=sum(verify), draft_ms=sum(draft), pass_verify_ms=list(verify),
                         pass_draft_ms=list(draft), **{key: list(v) for key, v in PASS_LISTS.items()})
        return Measured(stats, (1, 2, 3))

    return _rows_measured_by(monkeypatch, fake_run)


def test_the_mean_per_pass_carries_a_bootstrap_interval():
    from specviz.measure.stats import bootstrap_mean

    two = bootstrap_mean([0.0, 1.0])  # resampled means 0, 0.5, 1 with p 1/4, 1/2, 1/4: the interval is both ends
    assert (two.value, two.low, two.high, two.level) == (0.5, 0.0, 1.0, 0.95)
    alike = bootstrap_mean([7.0, 7.0, 7.0])
    assert (alike.value, alike.low, alike.high) == (7.0, 7.0, 7.0)
    skewed = bootstrap_mean([1.0] * 19 + [100.0])  # one slow pass: the mean (5.95) stays inside, stretched upwards
    assert skewed.value == pytest.approx(5.95) and skewed.low < skewed.value < skewed.high <= 100.0
    assert skewed.low >= 1.0 and skewed.high - skewed.value > skewed.value - skewed.low
    assert bootstrap_mean([1.0] * 19 + [100.0]) == skewed  # seeded: the same passes give the same interval
    assert bootstrap_mean([7.0]) is None and bootstrap_mean([]) is None
    with pytest.raises(ValueError):
        bootstrap_mean([1.0, 2.0], level=1.0)


def test_timed_figures_spread_over_the_runs_and_passes_they_come_from(monkeypatch):
    from specviz.core.costs import predicted_speedup_measured, predicted_speedup_paper

    rows = _timed_rows(monkeypatch)
    k2, k4, base = rows["ngram k=2"], rows["ngram k=4"], rows["standard"]
    rate = {ms: 11_000 / (5 + 10 * ms) for ms in (100.0, 110.0, 500.0)}  # each baseline run's tokens/s
    # T_step and the baseline's tokens/s: the lowest and highest of the two baseline runs beside each method
    assert (k2["t_step_ms_low"], k2["t_step_ms_high"]) == (pytest.approx(100.0), pytest.approx(110.0))
    assert (k4["t_step_ms_low"], k4["t_step_ms_high"]) == (pytest.approx(110.0), pytest.approx(500.0))
    assert (k2["baseline_tokens_per_s_low"], k2["baseline_tokens_per_s_high"]) == (
        pytest.approx(rate[110.0]), pytest.approx(rate[100.0]))
    # the standard row pools all its runs: its tokens/s and T_step span all three
    assert (base["tokens_per_s_low"], base["tokens_per_s_high"]) == (pytest.approx(rate[500.0]),
                                                                     pytest.approx(rate[100.0]))
    assert (base["t_step_ms_low"], base["t_step_ms_high"]) == (pytest.approx(100.0), pytest.approx(500.0))
    assert base["t_verify_ms_low"] is None and base["c_low"] is None  # no drafts: no T_verify, T_draft or c
    # a method runs once per prompt: its own tokens/s has no spread
    assert k2["tokens_per_s_low"] is None and k2["tokens_per_s_high"] is None
    # T_verify and T_draft: the mean per pass with its bootstrap interval over the passes (here: both ends)
    assert (k2["t_verify_ms"], k2["t_verify_ms_low"], k2["t_verify_ms_high"]) == (100.0, 50.0, 150.0)
    assert (k2["t_draft_ms"], k2["t_draft_ms_low"], k2["t_draft_ms_high"]) == (2.0, 1.0, 3.0)
    assert (k4["t_verify_ms_low"], k4["t_verify_ms_high"]) == (20.0, 40.0)
    assert (k4["t_draft_ms_low"], k4["t_draft_ms_high"]) == (1.0, 1.0)  # every pass alike
    # c inherits the spread of its parts; the predictions those and α's interval (alpha 0.75 in 0.41–1.00, m 2)
    assert k2["alpha"] == pytest.approx(0.75) and k2["m"] == pytest.approx(2.0)
    assert k2["c"] == pytest.approx(8 / 8 / 105)
    assert (k2["c_low"], k2["c_high"]) == (pytest.approx(1.0 / (2 * 110)), pytest.approx(3.0 / (2 * 100)))
    assert (k2["predicted_speedup_paper_low"], k2["predicted_speedup_paper_high"]) == (
        pytest.approx(predicted_speedup_paper(ALPHA_LOW, 2, 3.0 / 200)),
        pytest.approx(predicted_speedup_paper(1.0, 2, 1.0 / 220)))
    assert (k2["predicted_speedup_paper_low"], k2["predicted_speedup_paper_high"]) == (
        pytest.approx(1.5309, abs=1e-4), pytest.approx(3 / (1 + 2 / 220)))  # 1.53–2.97, the value 2.27
    assert (k2["predicted_speedup_measured_low"], k2["predicted_speedup_measured_high"]) == (
        pytest.approx(predicted_speedup_measured(ALPHA_LOW, 2, 100.0, 150.0, 3.0)),
        pytest.approx(predicted_speedup_measured(1.0, 2, 110.0, 50.0, 1.0)))
    assert k2["c_low"] < k2["c"] < k2["c_high"]
    assert (k2["predicted_speedup_measured_low"] < k2["predicted_speedup_measured"]
            < k2["predicted_speedup_measured_high"])
    # a pooled row spans the lowest to the highest over its prompts (a prompt without a spread adds its value)
    pooled = pool_rows([k2, k4])
    assert (pooled["t_step_ms_low"], pooled["t_step_ms_high"]) == (pytest.approx(100.0), pytest.approx(500.0))
    assert (pooled["t_verify_ms_low"], pooled["t_verify_ms_high"]) == (20.0, 150.0)
    assert (pooled["t_draft_ms_low"], pooled["t_draft_ms_high"]) == (1.0, 3.0)
    assert (pooled["tokens_per_s_low"], pooled["tokens_per_s_high"]) == (
        pytest.approx(min(k2["tokens_per_s"], k4["tokens_per_s"])), pytest.approx(max(k2["tokens_per_s"],
                                                                                      k4["tokens_per_s"])))
    assert pooled["c_low"] == pytest.approx(1.0 / (pooled["m"] * 500.0))
    assert pooled["c_high"] == pytest.approx(3.0 / (pooled["m"] * 100.0))
    alone = pool_rows([k2])  # one prompt: its own spread; its tokens/s (one run) still has none
    assert alone["tokens_per_s_low"] is None and alone["t_verify_ms_low"] == 50.0


def test_the_table_shows_each_timed_figure_with_its_spread(monkeypatch):
    rows = _timed_rows(monkeypatch)
    table = arena_tab.table([rows["standard"], rows["ngram k=2"]], arena_tab.TIMING_COLUMNS)
    cells = [dict(zip(table["headers"], row)) for row in table["data"]]
    base, k2 = cells
    assert base["Tokens/s"] == "4.6 (2.2–10.9)" and base["T_step ms"] == "236.7 (100.0–500.0)"
    assert base["T_verify ms"] == "–" and base["c"] == "–"
    assert k2["Tokens/s"] == f"{11_000 / 413:.1f} (one run: no spread)"  # 11 tokens in 5 + 400 + 8 ms
    assert k2["T_step ms"] == "105.0 (100.0–110.0)" and k2["T_verify ms"] == "100.0 (50.0–150.0)"
    assert k2["T_draft ms"] == "2.0 (1.0–3.0)"
    assert k2["c"] == "0.0095 (0.0045–0.0150)"  # below 1: two significant digits, and the ends as many
    assert re.fullmatch(r"\d\.\d\d \(\d\.\d\d–\d\.\d\d\)", k2["Predicted, measured costs"])
    one_pass = dict(rows["ngram k=2"], t_verify_ms_low=None, t_verify_ms_high=None)
    assert arena_tab.timed_cell(one_pass, "t_verify_ms", 1) == "100.0 (one pass: no spread)"
    # a small value shows two significant digits; ends that would read alike get more decimals, the value as many
    assert arena_tab.timed_cell({"t_draft_ms": 0.04, "t_draft_ms_low": 0.031, "t_draft_ms_high": 0.052},
                                "t_draft_ms", 1) == "0.040 (0.031–0.052)"
    # one more decimal at most: ends still alike say the spread is below that precision
    assert arena_tab.timed_cell({"c": 1.0, "c_low": 0.99991, "c_high": 0.99996}, "c", 2) == "1.000 (1.000–1.000)"
    assert arena_tab.timed_cell({"t_step_ms": 20.02, "t_step_ms_low": 20.01, "t_step_ms_high": 20.04},
                                "t_step_ms", 1) == "20.02 (20.01–20.04)"
    assert "The range after tokens/s, T_step, T_verify, T_draft, c and the predictions" in arena_tab.NOTE


def test_the_downloads_carry_the_timed_figures_spread(monkeypatch):
    from specviz.analysis.arena_rows import ArenaResult, DEFINITIONS

    rows = _timed_rows(monkeypatch)
    result = ArenaResult(rows=list(rows.values()), summary=[pool_rows([rows["ngram k=2"], rows["ngram k=4"]])])
    table = list(csv.reader(io.StringIO(to_csv(result))))
    for figure in ("tokens_per_s", "baseline_tokens_per_s", "t_step_ms", "t_verify_ms", "t_draft_ms", "c",
                   "predicted_speedup_paper", "predicted_speedup_measured"):
        for end in ("low", "high"):
            assert f"{figure}_{end}" in table[0] and f"{figure}_{end}" in DEFINITIONS
    lines = [dict(zip(table[0], line)) for line in table[1:]]
    k2 = next(line for line in lines if line["level"] == "prompt" and line["k"] == "2")
    assert (float(k2["t_verify_ms_low"]), float(k2["t_verify_ms_high"])) == (50.0, 150.0)
    assert (float(k2["t_step_ms_low"]), float(k2["t_step_ms_high"])) == (100.0, 110.0)
    assert k2["tokens_per_s_low"] == "" and lines[0]["t_verify_ms_low"] == ""  # one run; the baseline has none
    pooled = lines[-1]
    assert pooled["level"] == "category" and float(pooled["t_step_ms_high"]) == 500.0
    data = json.loads(json.dumps(to_json(result)))
    assert data["rows"][1]["t_draft_ms_low"] == 1.0 and "c_high" in data["definitions"]


def test_the_tokens_per_s_bars_carry_error_bars(monkeypatch):
    rows = list(_timed_rows(monkeypatch).values())
    for r in rows:
        r["level"] = "category"
    figure = arena_tab.arena_figure(rows)
    bars = {(t.name, t.yaxis): t for t in figure.data}
    standard = bars[("standard", "y3")]
    value = rows[0]["tokens_per_s"]
    assert standard.error_y.array == pytest.approx((rows[0]["tokens_per_s_high"] - value,))
    assert standard.error_y.arrayminus == pytest.approx((value - rows[0]["tokens_per_s_low"],))
    assert "from its slowest to its fastest run" in standard.text[0]
    assert bars[("ngram k=2", "y3")].error_y.array == (0.0,)  # one run: no bar, and the hover says so
    assert "one run: no spread" in bars[("ngram k=2", "y3")].text[0]
    assert any(arena_tab.RATE_SPREAD_NOTE in a.text and "no bar is drawn" in a.text
               for a in figure.layout.annotations)
    paper = arena_tab.predictions_figure(rows).data[1]
    assert "from α's 95% interval and the spread of T_step, T_verify, T_draft" in paper.text[0]


def test_the_prediction_markers_carry_error_bars_from_their_spread(monkeypatch):
    """The table gives each prediction a range (from α's interval and the spread of T_step, T_verify, T_draft); the
    chart's markers show it too, as error bars of their own colour, side by side on the bar; a prediction without a
    spread has none, and the note above the chart says what each kind of error bar is."""
    from app.figures import COLORS
    from specviz.core.costs import predicted_speedup_measured, predicted_speedup_paper

    rows = list(_timed_rows(monkeypatch).values())
    for r in rows:
        r["level"] = "category"
    k2, k4 = rows[1], dict(rows[2], predicted_speedup_paper_low=None, predicted_speedup_paper_high=None)
    figure = arena_tab.predictions_figure([rows[0], k2, k4])
    _, paper, measured = figure.data
    assert [paper.name, measured.name] == ["predicted, paper (verification = 1 step)", "predicted with measured costs"]
    # ngram k=2: alpha 0.75 (0.41–1.00), m 2; c from T_draft 1-3 ms over T_step 100-110 ms; T_verify 50-150 ms
    low, high = predicted_speedup_paper(ALPHA_LOW, 2, 3.0 / 200), predicted_speedup_paper(1.0, 2, 1.0 / 220)
    assert paper.y[0] == pytest.approx(predicted_speedup_paper(0.75, 2, 8 / 8 / 105))
    assert paper.error_y.array[0] == pytest.approx(high - paper.y[0]) and paper.error_y.array[0] > 0
    assert paper.error_y.arrayminus[0] == pytest.approx(paper.y[0] - low) and paper.error_y.arrayminus[0] > 0
    low, high = (predicted_speedup_measured(ALPHA_LOW, 2, 100.0, 150.0, 3.0),
                 predicted_speedup_measured(1.0, 2, 110.0, 50.0, 1.0))
    assert measured.error_y.array[0] == pytest.approx(high - measured.y[0])
    assert measured.error_y.arrayminus[0] == pytest.approx(measured.y[0] - low)
    assert (paper.error_y.array[1], paper.error_y.arrayminus[1]) == (0.0, 0.0)  # ngram k=4's paper: no spread
    assert measured.error_y.array[1] > 0 and measured.error_y.visible and paper.error_y.visible
    assert measured.error_y.color == COLORS["rejected"] and figure.layout.scattermode == "group"
    notes = figure.layout.annotations[-1].text.split("<br>")
    assert notes == ["bars' error bars: the ratio against each standard", "run of its prompt, widened by their spread",
                     "markers' error bars: α's 95% interval and the", "spread of T_step, T_verify and T_draft",
                     "a marker without error bars: one run, no spread"]
    assert max(len(line) for line in notes) <= 50  # a 400 px phone's chart
    # five lines: the top margin grows past its 100 px, and the chart with it, so the notes stay under the title
    assert figure.layout.margin.t == 55 + 15 * 5 and figure.layout.height == 500 + 30
    spread = [dict(r, predicted_speedup_paper_low=None, predicted_speedup_paper_high=None,
                   predicted_speedup_measured_low=None, predicted_speedup_measured_high=None) for r in rows]
    bare = arena_tab.predictions_figure(spread)
    assert not bare.data[1].error_y.visible and not bare.data[2].error_y.visible
    assert bare.layout.annotations[-1].text == ("bars' error bars: the ratio against each standard<br>run of its "
                                                "prompt, widened by their spread<br>a marker without error bars: "
                                                "one run, no spread")
    assert bare.layout.margin.t == 100 and bare.layout.height == 500  # three lines fit the margin
    assert "markers' error bars" not in bare.layout.annotations[-1].text
    assert arena_tab.predictions_figure([]).layout.annotations == ()  # nothing shown: nothing said


def test_a_spread_far_above_the_bars_runs_off_the_top_and_is_said():
    """A trial at 400 px: one bar's spread to 9.6 set the decoding-speedup axes to 9.6 and flattened every bar under 2.
    The axis now follows the bars, the markers, 1x and the spreads within 2x of them; the wide one runs off the top
    and a note in the chart says where it ends. A chart without such a spread keeps its own axis."""
    def row(variant, drafter, speedup, high):
        return {"level": "category", "category": "qa", "variant": variant, "drafter": drafter, "baseline_drift": 0.1,
                "decode_speedup": speedup, "decode_speedup_low": speedup * 0.8, "decode_speedup_high": high,
                "tokens_per_pass": 1.5, "acceptance_rate": 0.4, "tokens_per_s": 10.0, "predicted_speedup_paper": 1.2,
                "predicted_speedup_measured": 1.1, "tree_passes": 0}

    base = dict(row("standard", arena_tab.BASELINE, 1.0, 1.0), decode_speedup_low=None, decode_speedup_high=None)
    rows = [base, row("ngram k=4", "ngram", 1.3, 1.7), row("early-exit k=4", "early-exit", 0.64, 9.6)]
    for figure, axis in ((arena_tab.arena_figure(rows), "yaxis4"), (arena_tab.predictions_figure(rows), "yaxis")):
        assert list(figure.layout[axis].range) == [0, pytest.approx(1.7 * NOTE_HEADROOM)]  # ngram, to 1.7: whole
        notes = [a.text for a in figure.layout.annotations]
        assert "a spread runs off the top (to 9.60× <br>for early-exit k=4, qa)" in notes  # lines for a phone
    calm = [base, row("ngram k=4", "ngram", 1.3, 1.7)]
    assert arena_tab.arena_figure(calm).layout.yaxis4.range is None
    # a prediction marker's spread counts as a bar's: far above, it runs off the top too, and the note says so
    wide = [base, dict(calm[1], predicted_speedup_measured_low=0.9, predicted_speedup_measured_high=8.0)]
    figure = arena_tab.predictions_figure(wide)
    assert list(figure.layout.yaxis.range) == [0, pytest.approx(1.7 * NOTE_HEADROOM)]
    assert "a spread runs off the top (to 8.00× <br>for ngram k=4, qa)" in [a.text for a in figure.layout.annotations]
    assert not any("runs off" in a.text for a in arena_tab.predictions_figure(calm).layout.annotations)


# ------------------------------------------------------------------------ α's interval in the predictions' range


def test_the_predictions_range_carries_alphas_interval_not_only_the_timings():
    """A trial: "Predicted, paper 3.180 (3.179–3.181)" beside α "0.88 (0.62–1.00)" on the same row: the range held
    α fixed. Each end now takes α's end that pushes it that way (the α cell's interval) with the timings' ends."""
    from app.arena.tables import share_interval
    from specviz.analysis.arena_rows import derived_spread
    from specviz.core.costs import predicted_speedup_measured, predicted_speedup_paper

    # ngram k=4 over 8 passes, all 4 accepted but two (rejected at the first token): α 24 / 26 = 0.92 in 0.76–1.00;
    # T_draft 0.8 ms (0.76–0.84), T_step 100 ms (99.9–100.1), T_verify 120 ms (no spread): c 0.0020 (0.0019–0.0021)
    accepted = [4, 4, 0, 4, 4, 0, 4, 4]
    row = {"level": "prompt", "drafter": "ngram", "alpha": 24 / 26, "m": 4.0, "c": 0.002, "t_step_ms": 100.0,
           "t_step_ms_low": 99.9, "t_step_ms_high": 100.1, "t_verify_ms": 120.0, "t_draft_ms": 0.8,
           "t_draft_ms_low": 0.76, "t_draft_ms_high": 0.84, "accepted": 24, "rejections": 2, "drafted": 32,
           "predicted_speedup_paper": predicted_speedup_paper(24 / 26, 4, 0.002),
           "predicted_speedup_measured": predicted_speedup_measured(24 / 26, 4, 100.0, 120.0, 0.8),
           "pass_accepted": accepted, "pass_drafted": [4] * 8, "pass_rejections": [0, 0, 1, 0, 0, 1, 0, 0]}

    alpha = share_interval(row, "alpha")
    assert (round(alpha.value, 3), round(alpha.low, 2), alpha.high) == (0.923, 0.76, 1.0)
    spread = derived_spread(row)
    c_low, c_high = 0.76 / (4 * 100.1), 0.84 / (4 * 99.9)
    assert (spread["c_low"], spread["c_high"]) == (pytest.approx(c_low), pytest.approx(c_high))
    low, high = spread["predicted_speedup_paper_low"], spread["predicted_speedup_paper_high"]
    assert (low, high) == (pytest.approx(predicted_speedup_paper(alpha.low, 4, c_high)),
                           pytest.approx(predicted_speedup_paper(1.0, 4, c_low)))
    assert (round(row["predicted_speedup_paper"], 2), round(low, 2), round(high, 2)) == (4.25, 3.08, 4.96)
    timings_only = derived_spread(dict(row, accepted=0, rejections=0, pass_accepted=None))  # α without counts
    assert (round(timings_only["predicted_speedup_paper_low"], 3), round(timings_only["predicted_speedup_paper_high"],
                                                                         3)) == (4.252, 4.255)  # the trial's kind
    assert (spread["predicted_speedup_measured_low"], spread["predicted_speedup_measured_high"]) == (
        pytest.approx(predicted_speedup_measured(alpha.low, 4, 99.9, 120.0, 0.84)),
        pytest.approx(predicted_speedup_measured(1.0, 4, 100.1, 120.0, 0.76)))
    # α's interval alone gives a range where no timing has a spread; none without either
    still = dict(row, t_step_ms_low=None, t_step_ms_high=None, t_draft_ms_low=None, t_draft_ms_high=None)
    alone = derived_spread(still)
    assert alone["c_low"] is None and (alone["predicted_speedup_paper_low"], alone["predicted_speedup_paper_high"]) \
        == (pytest.approx(predicted_speedup_paper(alpha.low, 4, 0.002)), pytest.approx(5 / 1.008))
    assert alone["predicted_speedup_measured_low"] == pytest.approx(
        predicted_speedup_measured(alpha.low, 4, 100.0, 120.0, 0.8))
    bare = dict(still, accepted=0, rejections=0, pass_accepted=None)  # α with no counts behind it: no interval
    assert all(v is None for v in derived_spread(bare).values())
    cells = dict(zip(*(lambda t: (t["headers"], t["data"][0]))(arena_tab.table(
        [dict(row, variant="ngram k=4", **spread)], arena_tab.TIMING_COLUMNS))))
    assert cells["Predicted, paper"] == "4.25 (3.08–4.96)"  # the timings alone: 4.25 (4.25–4.25)
    assert "α's 95% interval" in arena_tab.NOTE and "α's low end" in arena_tab.NOTE


# ------------------------------------------------------------------------------------- tokens per pass's interval


def test_tokens_per_pass_carries_the_live_tabs_interval_over_its_passes(monkeypatch):
    """A trial: the Tokens/pass column read "2.88" and "1.35" and its chart had no error bars, while the Live tab
    showed "2.88 (1.75–4.00)" for the same kind of run. Each row now keeps its passes' tokens and shows tokens per pass
    with the Live card's interval (one formula: specviz.measure.stats.tokens_per_pass_interval); a pooled row over all
    its prompts' passes."""
    from specviz.analysis.arena_rows import ArenaResult
    from specviz.measure.run_stats import RunStats
    from specviz.measure.stats import tokens_per_pass_interval

    rows = _timed_rows(monkeypatch)
    k2, k4, base = rows["ngram k=2"], rows["ngram k=4"], rows["standard"]
    # passes of 3, 3, 2, 2 tokens: 2.5, and the 95% interval of the mean is exactly 2.00–3.00 (see PASS_LISTS)
    assert k2["pass_tokens"] == [3, 3, 2, 2] and k2["tokens_per_pass"] == 2.5
    assert (k2["tokens_per_pass_low"], k2["tokens_per_pass_high"]) == (2.0, 3.0)
    live = RunStats(pass_tokens=[3, 3, 2, 2]).tokens_per_pass_interval()  # what the Live tab's card shows
    assert (live.low, live.high) == (k2["tokens_per_pass_low"], k2["tokens_per_pass_high"])
    assert base["tokens_per_pass"] == 1.0 and base["tokens_per_pass_low"] is None  # one per pass, exactly
    pooled = pool_rows([k2, k4])  # eight passes, 3, 3, 2, 2 twice
    assert pooled["pass_tokens"] == [3, 3, 2, 2] * 2 and pooled["tokens_per_pass"] == 2.5
    eight = tokens_per_pass_interval([3, 3, 2, 2] * 2)
    assert (pooled["tokens_per_pass_low"], pooled["tokens_per_pass_high"]) == (eight.low, eight.high)
    assert (eight.low, eight.high) == (2.125, 2.875)  # more passes, a narrower interval
    # the table's cell, as the Live card words it
    cells = arena_tab.table([base, k2, pooled])
    column = cells["headers"].index("Tokens/pass")
    assert [line[column] for line in cells["data"]] == ["1.00 (standard decoding: one per pass)", "2.50 (2.00–3.00)",
                                                        "2.50 (2.12–2.88)"]
    one = make_row("prompt", "c", "p", Variant("ngram", 2), dict(k2, passes=1, emitted_after_prefill=3,
                                                                  pass_tokens=[3], tokens=4))
    assert (one["tokens_per_pass"], one["tokens_per_pass_low"]) == (3.0, None)
    assert arena_tab.table([one])["data"][0][column] == "3.00 (one pass: no spread)"
    for kept in (None, [3, 3, 2]):  # counters pooled without passes; passes not adding up to the row's counts
        row = make_row("prompt", "c", "p", Variant("ngram", 2), dict(k2, pass_tokens=kept))
        assert row["tokens_per_pass_low"] is None  # no interval, not a wrong one
        assert arena_tab.table([row])["data"][0][column] == "2.50 (no passes kept: no spread)"
    # the chart's error bars and hover
    chart_rows = [dict(r, level="category") for r in (base, k2)]
    bars = {(t.name, t.yaxis): t for t in arena_tab.arena_figure(chart_rows).data}
    tokens = bars[("ngram k=2", "y")]
    assert (tokens.error_y.array, tokens.error_y.arrayminus) == ((0.5,), (0.5,))
    assert tokens.text[0] == "(2.00–3.00, 95% interval over its passes)"
    assert bars[("standard", "y")].error_y.array == (0.0,)
    assert bars[("standard", "y")].text[0] == "(standard decoding: one per pass)"
    notes = [a.text for a in arena_tab.arena_figure(chart_rows).layout.annotations]
    assert any(a.startswith("<b>Tokens per target pass") and "95% interval over its passes" in a for a in notes)
    # the downloads
    result = ArenaResult(rows=[base, k2, k4], summary=[pooled])
    table = list(csv.reader(io.StringIO(to_csv(result))))
    lines = [dict(zip(table[0], line)) for line in table[1:]]
    assert [(line["tokens_per_pass_low"], line["tokens_per_pass_high"]) for line in lines] == [
        ("", ""), ("2", "3"), ("2", "3"), ("2.125", "2.875")]
    data = json.loads(json.dumps(to_json(result)))
    assert data["summary"][0]["tokens_per_pass_high"] == 2.875 and "tokens_per_pass_low" in data["definitions"]
    assert data["rows"][1]["pass_tokens"] == [3, 3, 2, 2]


def test_the_expected_tokens_per_pass_carries_alphas_interval():
    """The CSV's expected tokens per pass had no interval beside its α's: now E at α's two ends."""
    from specviz.analysis.arena_rows import expected_spread
    from specviz.core.costs import expected_tokens_per_pass

    spread = expected_spread(expected_tokens_per_pass(0.5, 4), (0.4, 0.6), 4)
    assert spread == {"expected_tokens_per_pass_low": pytest.approx(1.6496),
                      "expected_tokens_per_pass_high": pytest.approx(2.3056)}
    none = {"expected_tokens_per_pass_low": None, "expected_tokens_per_pass_high": None}
    assert expected_spread(None, (0.4, 0.6), 4) == none  # a tree, the baseline
    assert expected_spread(1.9, (0.5, 0.5), 4) == none  # no spread in α


def test_the_definitions_lead_with_a_short_summary_and_fold_the_rest():
    """A trial found the Arena's definitions (about 400 words under the tables) too much to read: a lead of a few
    sentences stays open, each part is folded under its own summary."""
    import re

    lead = arena_tab.NOTE.split("<details>")[0]
    words = len(re.sub(r"<[^>]+>", " ", lead).split())
    assert 30 < words < 80, words
    assert [m for m in re.findall(r"<summary><b>([^<]+)</b></summary>", arena_tab.NOTE)] == [
        "How ratios are formed", "The speedup's range and its words", "Tokens/pass, acceptance, α and the predictions",
        "The other figures' ranges"]
    assert arena_tab.NOTE.count("<details>") == arena_tab.NOTE.count("</details>") == 4
