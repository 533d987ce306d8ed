"""The arena: run_arena on tiny models (greedy identity, metric ranges, pooling, CSV/JSON), its figures, and the
Arena tab's handler called directly as a generator (a table and both files; clear messages for bad input)."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from browser_support import open_page, requires_chromium  # noqa: E402
from drain_support import last_values  # noqa: E402
from torch_threads import torch_threads  # noqa: E402

from app import arena as arena_tab  # noqa: E402
from app import device  # noqa: E402
from app.arena.verdicts import speedup_reading  # noqa: E402
from specviz.analysis.arena import run_arena, variants  # noqa: E402
from specviz.analysis.arena_rows import (CSV_COLUMNS, Measured, Variant, _counts, make_row, pool, to_csv,  # noqa: E402
                                         to_json)
from specviz.core.costs import (expected_tokens_per_pass, predicted_speedup_measured,  # noqa: E402
                                predicted_speedup_paper)
from specviz.core.engine import GenerationConfig  # noqa: E402
from specviz.core.verdict import FASTER, NOT_FINDING  # noqa: E402
from specviz.core.verify import SamplingConfig  # noqa: E402

PROMPTS = [
    {"id": "fox", "category": "story", "prompt": "The quick brown fox jumps over the lazy dog while the cat sleeps"},
    {"id": "spec", "category": "tech", "prompt": "Speculative decoding lets a small draft model propose tokens"},
]


@pytest.fixture(scope="module")
def result(tiny_model_dir, tiny_draft_dir):
    from specviz.runtime.models import load_model

    # one thread (module-scoped: the autouse per-test fixture has not run yet), put back after: left at 1, the next
    # module's embedded model would load with one thread
    with torch_threads(1):
        target = load_model(str(tiny_model_dir), device="cpu")
        seen = []
        out = run_arena(target, PROMPTS, ["ngram", "model"], [2, "auto"], GenerationConfig(max_new_tokens=24),
                        progress=lambda fraction, message: seen.append((fraction, message)),
                        draft_spec=str(tiny_draft_dir))
    out.progress_seen = seen
    return out


def test_every_method_runs_on_every_prompt_with_the_baseline_first(result):
    labels = [v.label for v in result.variants]
    assert labels == ["standard", "ngram k=2", "ngram k=auto", "model k=2", "model k=auto"]
    assert [(r["prompt_id"], r["variant"]) for r in result.rows] == [(p["id"], v) for p in PROMPTS for v in labels]
    assert not result.stopped and result.wall_s > 0
    fractions = [f for f, _ in result.progress_seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("fox (story): model k=auto" in m for _, m in result.progress_seen)


def test_a_baseline_is_timed_before_and_after_every_method(result):
    """B, m1, B, m2, ..., B per prompt: each method's ratio uses the two baseline runs beside it."""
    runs = [m.split(": ", 1)[1] for _, m in result.progress_seen if m.startswith("fox (story): ")]
    assert runs[0::2] == ["standard"] * 5 and len(runs) == 9
    assert sorted(runs[1::2]) == ["model k=2", "model k=auto", "ngram k=2", "ngram k=auto"]
    rows = {r["variant"]: r for r in result.rows if r["prompt_id"] == "fox"}
    assert rows["standard"]["runs"] == 5 and rows["standard"]["tokens"] == 5 * 24
    for label in ("ngram k=2", "model k=auto"):
        assert rows[label]["runs"] == 1 and rows[label]["baseline_runs"] == 2
        assert rows[label]["baseline_tokens"] == 2 * 24 and rows[label]["baseline_drift"] >= 0


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
    assert cells[2][drift] == "400% unsteady" and cells[1][drift] == "0%"  # ngram k=4 beside the slow run; k=2 not
    assert cells[0][drift] == "400% (its runs apart)"  # the reference: all its runs, no noisy flag



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


def test_every_speedup_carries_its_spread_against_each_baseline_beside_it(monkeypatch):
    """Baselines of 100, 110, 500 ms per token around methods of 50 ms per token: ngram k=2 sits between 100 and
    110 (decoding rates 10 and 9.09 tokens/s against its 20), ngram k=4 between 110 and 500."""
    rows = _hand_made_rows(monkeypatch, [100.0, 110.0, 500.0])
    k2, k4, base = rows["ngram k=2"], rows["ngram k=4"], rows["standard"]
    assert k2["decode_speedup"] == pytest.approx(20 / (20_000 / 2100))  # 2.1: the two baselines pooled
    assert (k2["decode_speedup_low"], k2["decode_speedup_high"]) == (pytest.approx(2.0), pytest.approx(2.2))
    assert (k4["decode_speedup_low"], k4["decode_speedup_high"]) == (pytest.approx(2.2), pytest.approx(10.0))
    assert k4["decode_speedup_high"] / k4["decode_speedup_low"] == pytest.approx(1 + k4["baseline_drift"])
    # end to end (prefill included): 11 tokens in 505 ms against 11 in 1005 and 1105 ms
    assert (k2["speedup_low"], k2["speedup_high"]) == (pytest.approx(1005 / 505), pytest.approx(1105 / 505))
    assert base["decode_speedup_low"] is None and base["speedup_high"] is None  # the reference has none
    table = arena_tab.table([base, k2, k4])
    decode = table["headers"].index("Speedup, decode")
    end = table["headers"].index("Speedup, end to end")
    # 6.10 is above the 5 tokens per pass of ngram k=4: not a finding whatever its spread, the number kept and that
    # reason in its own words; its spread lies wholly above 1, so never "too noisy to tell" (the one rule, issue 34)
    assert [row[decode] for row in table["data"]] == [
        arena_tab.speedup_cell(r, "decode_speedup") for r in (base, k2, k4)]
    assert table["data"][0][decode] == "1.00 (reference)"  # the cells' wording: tests/test_messages.py
    assert [(v.word, v.value) for v in map(speedup_reading, (k2, k4))] == [
        (FASTER, pytest.approx(2.10)), (NOT_FINDING, pytest.approx(6.10))]
    assert "its 5.0 tokens per pass" in speedup_reading(k4).reason and "355%" in speedup_reading(k4).reason
    assert table["data"][1][end] == "2.09× faster (1.99–2.19×)"
    # a pooled row spans the lowest to the highest over its prompts
    pooled = pool_rows([k2, k4])
    assert (pooled["decode_speedup_low"], pooled["decode_speedup_high"]) == (pytest.approx(2.0),
                                                                             pytest.approx(10.0))


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


def test_the_speedup_bars_carry_error_bars(monkeypatch):
    rows = list(_hand_made_rows(monkeypatch, [100.0, 110.0, 500.0]).values())
    for r in rows:
        r["level"] = "category"
    figure = arena_tab.arena_figure(rows)
    bar = {(t.name, t.yaxis): t for t in figure.data}[("ngram k=4", "y4")]
    value = rows[2]["decode_speedup"]
    assert bar.error_y.array == pytest.approx((10.0 - value,)) and bar.error_y.arrayminus == pytest.approx(
        (value - 2.2,))
    assert "2.20–10.00 against each standard run beside it" in bar.text[0]
    measured = arena_tab.predictions_figure(rows).data[0]
    assert measured.error_y.array == pytest.approx((2.2 - rows[1]["decode_speedup"], 10.0 - value))
    assert any(arena_tab.SPREAD_NOTE in a.text for a in figure.layout.annotations)
    assert "one run: no spread" in arena_tab.NOTE and "The range after each speedup" in arena_tab.NOTE


# ------------------------------------------------------------------------------ the other timed figures' spread

# per pass: ngram k=2's, then ngram k=4's. Two values, twice each: a bootstrap of the mean over 4 passes draws all
# four alike with p = 1/16, above the 2.5% tails, so its 95% interval is exactly (smaller value, larger value)
VERIFY_MS = ([50.0, 150.0, 150.0, 50.0], [20.0, 40.0, 20.0, 40.0])
DRAFT_MS = ([1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 1.0, 1.0])


def _timed_rows(monkeypatch, baseline_ms=(100.0, 110.0, 500.0)) -> dict:
    """Per-prompt rows of ngram x (2, 4) (B, m1, B, m2, B): the baseline runs take ``baseline_ms`` ms per token
    (10 passes after a 5 ms prefill, 11 tokens), each method 4 passes with the per-pass verify and draft ms of
    :data:`VERIFY_MS` / :data:`DRAFT_MS` (8 drafted, 6 accepted, 2 rejections: alpha 0.75, m 2)."""
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
                         pass_draft_ms=list(draft))
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


def test_run_stats_keep_each_passs_verify_and_draft_time(tiny_target):
    import specviz.analysis.arena as arena

    ids = tiny_target.tokenizer.encode(PROMPTS[0]["prompt"])
    run = arena.measure_run(tiny_target, arena.build_drafter("ngram", tiny_target), ids,
                            GenerationConfig(max_new_tokens=12, k=2))
    stats = run.stats
    assert len(stats.pass_verify_ms) == len(stats.pass_draft_ms) == stats.passes > 1
    assert sum(stats.pass_verify_ms) == pytest.approx(stats.verify_ms)
    assert sum(stats.pass_draft_ms) == pytest.approx(stats.draft_ms)


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
    # c and the predictions inherit the spread of their parts (alpha 0.75, m 2)
    assert k2["alpha"] == pytest.approx(0.75) and k2["m"] == pytest.approx(2.0)
    assert k2["c"] == pytest.approx(8 / 8 / 105)
    assert (k2["c_low"], k2["c_high"]) == (pytest.approx(1.0 / (2 * 110)), pytest.approx(3.0 / (2 * 100)))
    assert (k2["predicted_speedup_paper_low"], k2["predicted_speedup_paper_high"]) == (
        pytest.approx(predicted_speedup_paper(0.75, 2, 3.0 / 200)),
        pytest.approx(predicted_speedup_paper(0.75, 2, 1.0 / 220)))
    assert (k2["predicted_speedup_measured_low"], k2["predicted_speedup_measured_high"]) == (
        pytest.approx(predicted_speedup_measured(0.75, 2, 100.0, 150.0, 3.0)),
        pytest.approx(predicted_speedup_measured(0.75, 2, 110.0, 50.0, 1.0)))
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
    assert "from the spread of T_step, T_verify, T_draft" in paper.text[0]


def test_greedy_outputs_are_identical_to_the_baseline(result):
    spec_rows = [r for r in result.rows if r["drafter"] != "none"]
    assert all(r["ids_identical"] is True for r in spec_rows)
    assert all(r["ids_identical"] is None for r in result.rows if r["drafter"] == "none")
    assert result.ids_identical is True


def test_row_metrics_are_in_range_and_follow_the_formulas(result):
    for r in result.rows:
        assert r["tokens"] == 24 * r["runs"] and r["tokens_per_s"] > 0 and r["baseline_tokens_per_s"] > 0
        assert r["speedup"] > 0 and r["decode_speedup"] > 0 and r["t_step_ms"] > 0
        if r["drafter"] == "none":
            assert r["tokens_per_pass"] == 1.0 and r["speedup"] == pytest.approx(1.0)
            assert r["alpha"] is None and r["predicted_speedup_paper"] is None
            continue
        k_max = 16 if r["k"] == "auto" else int(r["k"])
        assert 1.0 <= r["tokens_per_pass"] <= k_max + 1
        assert r["t_verify_ms"] > 0 and r["t_draft_ms"] >= 0
        if r["k"] == "auto" and r["acceptance_rate"] is None:  # k = auto found that no draft pays here
            continue
        assert 0.0 <= r["acceptance_rate"] <= 1.0
        if r["drafter"] == "model" and r["k"] != "auto":  # the tiny draft agrees with the target often, not always
            assert 0.0 < r["alpha"] < 1.0 and r["acceptance_rate"] <= r["alpha"]
            assert r["m"] > 0 and r["c"] > 0
            assert r["expected_tokens_per_pass"] == pytest.approx(expected_tokens_per_pass(r["alpha"], r["m"]))
            assert r["predicted_speedup_paper"] == pytest.approx(predicted_speedup_paper(r["alpha"], r["m"], r["c"]))
            assert r["predicted_speedup_measured"] == pytest.approx(predicted_speedup_measured(
                r["alpha"], r["m"], r["t_step_ms"], r["t_verify_ms"], r["t_draft_ms"]))
            # c m T_step is the drafting time per pass, so the two predictions differ only in T_verify vs T_step
            assert r["c"] * r["m"] * r["t_step_ms"] == pytest.approx(r["t_draft_ms"])
        if r["k"] == "2":
            assert r["m"] <= 2


def test_real_rows_carry_the_spread_of_their_timed_figures(result):
    for r in result.rows:
        # rates and T_step are ratios of sums over the runs they span: they lie inside their spread
        for key in ("baseline_tokens_per_s", "t_step_ms") + (("tokens_per_s",) if r["drafter"] == "none" else ()):
            assert r[f"{key}_low"] <= r[key] * (1 + 1e-9) and r[key] <= r[f"{key}_high"] * (1 + 1e-9), (key, r)
        if r["drafter"] == "none":
            assert r["runs"] == 5 and r["t_verify_ms_low"] is None and r["c_low"] is None
            continue
        assert r["tokens_per_s_low"] is None  # one run of a method per prompt
        assert r["passes"] >= 2  # 24 tokens: several passes, so every mean per pass has its interval
        # the means per pass, c and the predictions lie inside their spread (their ends push each way)
        for key in ("t_verify_ms", "t_draft_ms", "c", "predicted_speedup_paper", "predicted_speedup_measured"):
            if r[key] is not None:
                assert r[f"{key}_low"] <= r[key] * (1 + 1e-9) and r[key] <= r[f"{key}_high"] * (1 + 1e-9), (key, r)
        assert r["t_verify_ms_low"] > 0 and r["t_draft_ms_low"] >= 0
    for r in result.summary:  # pooled: the lowest to the highest over their prompts
        mine = [p for p in result.rows if p["variant"] == r["variant"]
                and (r["category"] == "all" or p["category"] == r["category"])]
        assert r["t_step_ms_low"] == min(p["t_step_ms_low"] for p in mine)
        assert r["t_step_ms_high"] == max(p["t_step_ms_high"] for p in mine)


def test_pooled_rows_per_category_and_overall(result):
    levels = [(r["level"], r["category"]) for r in result.summary]
    assert levels == [("category", "story")] * 5 + [("category", "tech")] * 5 + [("overall", "all")] * 5
    by = {(r["category"], r["variant"]): r for r in result.summary}
    rows = {(r["category"], r["variant"]): r for r in result.rows}
    assert by[("story", "model k=2")]["tokens_per_pass"] == rows[("story", "model k=2")]["tokens_per_pass"]
    overall = by[("all", "model k=2")]
    parts = [rows[(c, "model k=2")] for c in ("story", "tech")]
    assert overall["prompts"] == 2 and overall["tokens"] == 48
    assert overall["accepted"] == sum(p["accepted"] for p in parts)
    drafted = sum(p["drafted"] for p in parts)
    assert overall["acceptance_rate"] == pytest.approx(overall["accepted"] / drafted)
    seconds = sum(p["elapsed_ms"] for p in parts) / 1000
    assert overall["tokens_per_s"] == pytest.approx(48 / seconds)
    assert overall["ids_identical"] is True and by[("all", "standard")]["ids_identical"] is None


def test_csv_has_a_header_and_every_row(result):
    text = to_csv(result)
    table = list(csv.reader(io.StringIO(text)))
    assert tuple(table[0]) == CSV_COLUMNS
    assert len(table) == 1 + len(result.rows) + len(result.summary)
    first = dict(zip(table[0], table[1]))
    assert first["level"] == "prompt" and first["prompt_id"] == "fox" and first["drafter"] == "none"
    assert first["ids_identical"] == "" and first["alpha"] == ""
    model = next(dict(zip(table[0], row)) for row in table[1:] if row[3] == "model")
    assert model["ids_identical"] == "true" and 0 < float(model["alpha"]) < 1


def test_json_has_settings_versions_and_device(result):
    data = json.loads(json.dumps(to_json(result)))
    assert data["benchmark"] == "arena"
    s = data["settings"]
    assert s["drafters"] == ["ngram", "model"] and s["ks"] == ["2", "auto"] and s["max_new_tokens"] == 24
    assert s["sampling"]["temperature"] == 0.0 and [p["id"] for p in s["prompts"]] == ["fox", "spec"]
    assert {"torch", "transformers", "specviz", "python"} <= set(data["versions"])
    assert data["device"]["device"] == "cpu" and data["machine"]["cpu_count"] >= 1 and data["machine"]["platform"]
    assert data["target"]["param_bytes"] > 0
    assert len(data["rows"]) == 10 and data["ids_identical"] is True and "alpha" in data["definitions"]


def test_figures_group_by_category(result):
    fig = arena_tab.arena_figure(result.summary)
    assert isinstance(fig, go.Figure)
    bars = [t for t in fig.data if t.type == "bar"]
    # 4 panels: tokens/pass and tokens/s include the baseline (5 methods), acceptance and speedup do not (4)
    assert len(bars) == 5 + 4 + 5 + 4
    assert list(bars[0].x) == ["story", "tech", "all"]
    pred = arena_tab.predictions_figure(result.summary)
    assert [t.type for t in pred.data] == ["bar", "scatter", "scatter"]
    assert len(pred.data[0].x[0]) == 3 * 4  # (story, tech, all) x 4 speculative methods
    assert "no markers" not in pred.layout.annotations[0].text  # chains only: every method has its markers
    assert pred.layout.annotations[0].text == "error bars: the ratio against each standard run<br>beside the method"
    # a short, two-line title; the legend under the chart (container coordinates), never over the title
    assert pred.layout.title.text == "<b>Speedup: measured vs predicted</b><br>from the measured α"
    assert pred.layout.legend.orientation == "h" and pred.layout.legend.yref == "container"
    assert pred.layout.legend.y == 0 and pred.layout.legend.yanchor == "bottom" and pred.layout.margin.b == 135
    # every line of the titles and notes fits a 400 px phone (at most 50 characters between <br>s)
    texts = [a.text for a in fig.layout.annotations] + [a.text for a in pred.layout.annotations]
    lines = [re.sub(r"<[^>]+>", "", line) for t in texts for line in t.split("<br>")]
    assert max(len(line) for line in lines) <= 50, max(lines, key=len)
    tree_rows = [dict(r, predicted_speedup_paper=None, tree_passes=5) if r["drafter"] == "ngram" else r
                 for r in result.summary]
    assert "no markers" in arena_tab.predictions_figure(tree_rows).layout.annotations[0].text


def test_each_method_gets_its_own_colour():
    rows = [{"variant": label, "drafter": drafter} for label, drafter in (
        ("none", "none"), ("eagle k=2", "eagle"), ("eagle k=4", "eagle"), ("eagle:tree k=2", "eagle:tree"),
        ("eagle:tree k=4", "eagle:tree"), ("medusa k=4", "medusa"), ("medusa:tree k=4", "medusa:tree"),
        ("eagle k=2", "eagle"))]
    colors = arena_tab.variant_colors(rows)
    assert len(colors) == 7 and len(set(colors.values())) == 7
    assert colors["eagle k=2"] == arena_tab.SHADES["eagle"][1] and colors["eagle k=4"] == arena_tab.SHADES["eagle"][5]
    assert colors["eagle:tree k=2"] in arena_tab.SHADES["eagle:tree"]  # a tree is a hue of its own


def test_every_offered_drafter_has_a_hue_apart_from_the_standard_grey():
    """Each drafter the Arena offers, at one k, gets its own colour (the distilled draft was the fallback grey,
    beside standard decoding's); standard decoding keeps the neutral grey, and no drafter's colour lies near it."""
    drafters = [key for _, key in arena_tab.drafter_choices()]
    rows = [{"variant": "none", "drafter": "none"}] + [{"variant": f"{d} k=4", "drafter": d} for d in drafters]
    colors = arena_tab.variant_colors(rows)
    assert set(drafters) <= set(arena_tab.SHADES) and len(set(colors.values())) == len(rows)

    def rgb(color: str) -> tuple[int, ...]:
        return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))

    grey = rgb(colors["none"])
    assert colors["none"] == "#6e7781"
    for d in drafters:
        assert sum(abs(a - b) for a, b in zip(rgb(colors[f"{d} k=4"]), grey)) > 60, d


def test_variants_and_bad_settings():
    assert variants(["ngram", "none", "ngram"], ["4", "auto", 4]) == [
        Variant("none"), Variant("ngram", 4), Variant("ngram", 4, adaptive=True)]
    for drafters, ks, words in ((["none"], [4], "at least one drafter"), (["ngram"], [], "at least one draft"),
                                (["ngram"], [17], "1..16"), (["ngram"], ["x"], "whole number"),
                                (["nope"], [4], "unknown drafter")):
        with pytest.raises(ValueError, match=words):
            variants(drafters, ks)


def test_stop_ends_the_arena_with_the_finished_prompts(tiny_target):
    flag = {"stop": False}

    def progress(fraction: float, message: str) -> None:  # stop once the second prompt's n-gram run starts
        flag["stop"] = flag["stop"] or message.startswith("spec (tech): ngram")

    out = run_arena(tiny_target, PROMPTS, ["ngram"], [2], GenerationConfig(max_new_tokens=12), progress=progress,
                    should_stop=lambda: flag["stop"])
    assert out.stopped
    assert {r["prompt_id"] for r in out.rows} == {"fox"} and len(out.rows) == 2


def test_sampling_leaves_identity_unchecked(tiny_target):
    config = GenerationConfig(max_new_tokens=10, sampling=SamplingConfig(temperature=0.8, seed=1))
    out = run_arena(tiny_target, PROMPTS[:1], ["early-exit"], [2], config, exit_layer=2, warmup_tokens=0)
    assert all(r["ids_identical"] is None for r in out.rows) and out.ids_identical is None
    assert out.settings["sampling"]["temperature"] == 0.8


# ------------------------------------------------------------------------------------------ the handler

GOOD = dict(drafters=["ngram", "early-exit"], ks=["2", "auto"], source="prompt",
            prompt="The quick brown fox jumps over the lazy dog", category="qa", max_new_tokens=16,
            target="embedded", draft_model="", exit_layer=0, temperature=0.0, seed=0, chat_template=True)


def drain(gen) -> dict:
    """Run the arena handler to the end: the last real value of each output."""
    last = last_values(gen, arena_tab.OUTPUTS, sized=True, counted=True)
    assert not device.DEVICE.locked, "the device lock must be released when the arena ends"
    return last


def test_handler_yields_a_table_charts_and_files(tiny_model_dir):
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir)})))
    table = out["arena-table"]
    assert table["headers"][:2] == ["Category", "Method"]
    methods = [row[1] for row in table["data"]]
    # one category: its rows only (the pooled "all" rows would repeat them; they stay in the CSV)
    assert methods == ["standard", "ngram k=2", "ngram k=auto", "early-exit k=2", "early-exit k=auto"]
    assert all(row[-1] == "✓" for row in table["data"] if row[1] != "standard")
    assert len(out["arena-prompts"]["data"]) == 5
    assert isinstance(out["arena-charts"], go.Figure) and isinstance(out["arena-predictions"], go.Figure)
    assert "Done" in out["arena-status"] and "identical" in out["arena-status"]
    with open(out["arena-csv"], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 + 10 and rows[0]["prompt_id"] == "your-prompt"
    with open(out["arena-json"], encoding="utf-8") as f:
        data = json.load(f)
    assert data["settings"]["target"] == str(tiny_model_dir.resolve()) and data["versions"]["torch"]


def test_handler_runs_a_suite_category(tiny_model_dir):
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "source": "category", "category": "math",
                                         "drafters": ["ngram"], "ks": ["4"], "max_new_tokens": 8})))
    assert {row[0] for row in out["arena-table"]["data"]} == {"math"}
    # the benchmark suite's math prompts (assets/suite.jsonl), each with its baseline row
    assert [row[0] for row in out["arena-prompts"]["data"]] == [f"math-{i}" for i in range(1, 7) for _ in range(2)]
    assert out["arena-csv"].endswith(".csv")


def test_the_arena_categories_are_the_benchmark_suites():
    """Seen: "one category of the suite" ran 2 prompts of the Live tab's examples (a list with repeated-text and no
    multi-turn), not the 54-prompt suite the README's tables use. The Arena reads the suite itself and says so."""
    from specviz.analysis.prompts import DEFAULT_PROMPTS, load_prompts

    suite = load_prompts(DEFAULT_PROMPTS)
    assert len(suite) == 54 and [p["id"] for p in arena_tab.suite()] == [p.id for p in suite]
    assert arena_tab.categories() == ["chat", "translation", "summarization", "qa", "math", "rag", "code-edit",
                                      "multi-turn"]
    assert ("multi-turn (12 prompts)", "multi-turn") in arena_tab.category_choices()
    assert ("math (6 prompts)", "math") in arena_tab.category_choices()
    assert len(arena_tab.choose_prompts("suite", "", "")) == 54
    assert [p["id"] for p in arena_tab.choose_prompts("category", "", "multi-turn")][-1] == "multi-turn-12"
    with pytest.raises(arena_tab.InputError, match="Pick a category"):
        arena_tab.choose_prompts("category", "", "repeated-text")
    assert arena_tab.SUITE_INFO.format(n=54, c=8) == ("The benchmark suite: assets/suite.jsonl, 54 prompts in 8 "
                                                      "categories (the README's tables use it)")


@pytest.mark.parametrize("change, words", [
    ({"drafters": []}, "at least one drafter"),
    ({"ks": []}, "at least one draft length"),
    ({"prompt": "   "}, "prompt is empty"),
    ({"source": "category", "category": "nope"}, "Pick a category"),
    ({"drafters": ["model"]}, "needs a draft model"),
    ({"max_new_tokens": "lots"}, "Max new tokens per run must be a number"),
    ({"target": "/no/such/folder"}, "no such local folder"),
    ({"exit_layer": 9}, "early-exit layer"),
])
def test_bad_input_gives_a_message(tiny_model_dir, change, words):
    args = GOOD | {"target": str(tiny_model_dir), "max_new_tokens": 4} | change
    out = drain(arena_tab.run(**args))
    assert "status-error" in out["arena-status"] and re.search(words, out["arena-status"], re.I)
    assert "Traceback" not in out["arena-status"] and "arena-csv" not in out


def test_stop_button_flags_the_running_arena(tiny_model_dir, monkeypatch):
    gen = arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "max_new_tokens": 64}))
    first = next(gen)
    assert "Starting" in first[0]
    arena_tab.stop()  # no request: flags every running arena
    out = drain(gen)
    assert "Stopped" in out["arena-status"]


def test_arena_and_why_follow_the_operator_policy(monkeypatch, tmp_path):
    """On a public deployment a visitor cannot point the arena or the why tab at a local folder."""
    from app import arena as arena_tab
    from app import why as why_tab

    monkeypatch.setenv("SPECVIZ_PUBLIC", "1")
    folder = str(tmp_path)
    arena_out = list(arena_tab.run(["ngram"], [4], "prompt", "Hello there", None, 8, folder, "", 0, 0.0, 0, True))
    assert any("SPECVIZ_ALLOW_LOCAL_PATHS" in str(part) for part in arena_out[-1])
    why_out = list(why_tab.measure(folder, 0, 0.8, 4, 2.0, 1.2))
    assert any("SPECVIZ_ALLOW_LOCAL_PATHS" in str(part) for part in why_out[-1])


def test_a_max_new_tokens_outside_the_slider_is_clamped_and_said(tiny_model_dir):
    """Seen in the browser: 3 typed into the max-new-tokens box (the slider's range is 8..256) stood there with no
    message. The Run path keeps to the slider's range too: a number outside it runs at the nearest end, and the run's
    status and a toast say so in the slider's own words (app.inputs.clamp_notice)."""
    said = arena_tab.max_new_tokens_used(3)[1]  # its wording: tests/test_messages.py
    assert arena_tab.max_new_tokens_used(3) == (8, said) and "8" in said
    assert arena_tab.max_new_tokens_used("300") == (256, arena_tab.max_new_tokens_used(10 ** 6)[1])
    assert "256" in arena_tab.max_new_tokens_used("300")[1]
    assert arena_tab.max_new_tokens_used(16) == (16, None)
    with pytest.raises(ValueError, match="Max new tokens per run must be a whole number"):
        arena_tab.max_new_tokens_used(12.5)
    args = GOOD | {"target": str(tiny_model_dir), "drafters": ["ngram"], "ks": ["2"], "max_new_tokens": 3}
    out = drain(arena_tab.run(**args))
    assert "Done" in out["arena-status"] and said in out["arena-status"]
    with open(out["arena-json"], encoding="utf-8") as f:
        assert json.load(f)["settings"]["max_new_tokens"] == 8


def test_run_closes_earlier_toasts_and_enter_commits_a_number_box():
    """The Run button closes the toasts on the page before its run is sent (an earlier attempt's warnings neither
    stay nor come back grouped with this run's), and Enter in a number box of the controls commits it as leaving
    it does (a blur event: the clamp and its message at once). Both are client-side; the browser test below
    watches them work."""
    import gradio as gr

    with gr.Blocks() as demo:
        arena_tab.build_tab("embedded")
    js = {fn.api_name: fn.js for fn in demo.fns.values() if fn.js}
    assert js["arena"] == arena_tab.CLEAR_TOASTS_JS and "toast-close" in arena_tab.CLEAR_TOASTS_JS
    assert arena_tab.ENTER_COMMITS_JS in js.values() and "#arena-controls" in arena_tab.ENTER_COMMITS_JS


# ------------------------------------------------------------------------------------------------- in a browser


def _toasts(page) -> list[str]:
    return [" ".join(t.inner_text().split()) for t in page.query_selector_all(".toast-body")]


def _settled_toasts(page, expected: list[str], timeout_ms: int = 5_000) -> list[str]:
    """The toasts once they equal ``expected`` (a closed toast fades out for a moment first), or as they are after
    ``timeout_ms``."""
    for _ in range(timeout_ms // 250):
        if _toasts(page) == expected:
            break
        page.wait_for_timeout(250)
    return _toasts(page)


@requires_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_in_a_browser_enter_says_the_clamp_and_a_new_run_shows_only_its_own_warning(app_url, browser, width):
    """Seen in the browser: after Enter the box kept 3 unannounced, and a second refused Run showed "Warning (2)" with
    the first attempt's message again. Neither needs a model run: both refusals happen before the device."""
    page = open_page(browser, {"width": width, "height": 900})
    try:
        page.goto(app_url, wait_until="load")
        page.locator("#tab-arena-button").click()
        box = page.locator("#arena-max-new-tokens input[type=number]")
        box.wait_for()
        box.fill("3")
        box.press("Enter")
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('at least 8')",
                               timeout=20_000)
        assert box.input_value() == "8" and box.evaluate("(el) => el === document.activeElement")
        assert arena_tab.max_new_tokens_used(3)[1] in " ".join(_toasts(page))
        for label in ("N-gram prompt lookup", "Self-speculation"):  # untick both default drafters
            page.locator("#arena-drafters label", has_text=label).first.click()
        page.locator("#arena-run").click()
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('at least one drafter')",
                               timeout=20_000)
        shown = ["Warning × Pick at least one drafter."]
        assert _settled_toasts(page, shown) == shown  # the Info toast closed by Run
        page.locator("#arena-drafters label", has_text="N-gram prompt lookup").first.click()
        for k in ("4", "auto"):  # untick both default k's
            page.locator("#arena-ks label", has_text=k).first.click()
        page.locator("#arena-run").click()
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('draft length k')",
                               timeout=20_000)
        shown = ["Warning × Pick at least one draft length k."]
        assert _settled_toasts(page, shown) == shown  # not "Warning (2)" with the old message again
        page.wait_for_timeout(1_000)
        assert _toasts(page) == shown  # and none comes back
        page.screenshot(path=f"/tmp/arena-toasts-{width}.png", full_page=False)
    finally:
        page.context.close()


def test_the_pooled_rows_fit_a_desktop_page_as_two_tables():
    """A new-user check measured the one 19-column summary table at about 1,671 px, a sideways scroll on a 1400 px
    desktop: the pooled rows are two tables now, what each method did (speedups, acceptance, the check) and the
    rates, predictions and timings behind them; every column is in one of them, each once but Category and Method,
    and the per-prompt table keeps them all."""
    summary = [c[0] for c in arena_tab.SUMMARY_COLUMNS]
    timings = [c[0] for c in arena_tab.TIMING_COLUMNS]
    assert summary[:2] == timings[:2] == ["Category", "Method"] and summary[-1] == "Same ids"
    assert len(summary) <= 10 and len(timings) <= 11
    assert set(summary[2:]).isdisjoint(timings[2:])
    assert {c[0] for c in arena_tab.PROMPT_COLUMNS} == (set(summary) | set(timings) | {"Prompt"}) - {"Prompts"}
    assert arena_tab.OUTPUTS[1:3] == ("arena-table", "arena-timings")
    out = arena_tab._outputs(summary="s", timings="t")
    assert out[1:3] == ("s", "t")
    # a prediction's hover says it is a model's figure and where its range comes from
    row = {"predicted_speedup_paper": 1.5, "predicted_speedup_paper_low": 1.4, "predicted_speedup_paper_high": 1.61}
    assert arena_tab._prediction_word(row, "predicted_speedup_paper") == (
        "(a model of the measured α; 1.40–1.61 from the spread of T_step, T_verify, T_draft, α taken as counted)")
    assert "one sample" in arena_tab._prediction_word({"predicted_speedup_paper": 1.5}, "predicted_speedup_paper")


def test_the_downloads_carry_every_verdict_and_note_the_page_shows(tmp_path):
    """Seen on a busy machine: the CSV had no noisy column, the JSON's notes were empty and its wall_s (32.6 s, the
    races alone) disagreed with the status's 50 s. The files now carry each row's noise verdict as the page marks it,
    the notes under the status, the status in words, and the status's own seconds."""
    from app import render
    from specviz.analysis.arena_rows import ArenaResult

    base = {"level": "prompt", "category": "qa", "prompt_id": "qa-1", "drafter": "none", "k": "", "variant": "standard",
            "ids_identical": True}
    rows = [base,
            dict(base, drafter="ngram", k=4, variant="ngram k=4", baseline_drift=0.31, decode_speedup=1.2,
                 tokens_per_pass=1.5),
            dict(base, drafter="suffix", k=4, variant="suffix k=4", baseline_drift=0.02, decode_speedup=3.0,
                 tokens_per_pass=1.5),
            dict(base, drafter="oracle", k=4, variant="oracle k=4", baseline_drift=0.02, decode_speedup=1.1,
                 tokens_per_pass=4.0)]
    result = ArenaResult(rows=rows, summary=[], wall_s=32.64, notes=["Drafts were re-tokenized."])
    note = "Every run (baseline, target and draft alike) uses: repetition penalty 1.2."
    status = render.status_html("Done: 1 prompt × 3 methods and standard decoding in 50 s · 2 of 3 methods noisy",
                                "done", notes=[note, "Drafts were re-tokenized."])
    csv_path, json_path = arena_tab.write_files(result, str(tmp_path), wall_s=50.3, notes=[note], status=status)
    with open(csv_path, encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert [(line["drafter"], line["noisy"]) for line in lines] == [("none", ""), ("ngram", "true"),
                                                                    ("suffix", "true"), ("oracle", "false")]
    # no spread to read here: the drifted baselines are the reason, said as such (not "too noisy to tell")
    from app.arena.verdicts import noise_text  # its wording: tests/test_messages.py

    assert [line["noise"] for line in lines] == [noise_text(row) for row in rows] and lines[3]["noise"] == ""
    assert "drifted 31%" in lines[1]["noise"] and "too noisy" not in lines[1]["noise"]
    assert "its 1.5 tokens per pass" in lines[2]["noise"]
    with open(json_path, encoding="utf-8") as f:
        data = json.load(f)
    assert data["wall_s"] == 50.3 and data["race_wall_s"] == 32.6
    assert data["notes"] == [note, "Drafts were re-tokenized."]
    assert data["status"] == ("✓ Done: 1 prompt × 3 methods and standard decoding in 50 s · 2 of 3 methods noisy · "
                              f"ℹ {note} · ℹ Drafts were re-tokenized.")
    assert [r["noisy"] for r in data["rows"]] == [None, True, True, False]
    assert {"wall_s", "race_wall_s", "noisy", "noise", "status"} <= set(data["definitions"])


def test_the_json_gives_the_wall_time_the_status_gave(tiny_model_dir):
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "drafters": ["ngram"], "ks": ["2"],
                                         "max_new_tokens": 8})))
    seconds = int(re.search(r" in (\d+) s", out["arena-status"]).group(1))
    with open(out["arena-json"], encoding="utf-8") as f:
        data = json.load(f)
    assert round(data["wall_s"]) == seconds and data["race_wall_s"] <= data["wall_s"]
    assert data["status"].startswith("✓ Done: 1 prompt × 1 method and standard decoding in") or \
        data["status"].startswith("ℹ Done")
    with open(out["arena-csv"], encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert {line["noisy"] for line in lines if line["drafter"] == "ngram"} <= {"true", "false"}
    assert all(line["noisy"] == "" for line in lines if line["drafter"] == "none")


def test_arena_pace_says_where_the_run_is_and_the_time_left_from_the_first_prompt():
    """The status's "prompt i of N, method j of M" and the time left, from a fake clock (no timing)."""
    from app.arena.progress import ArenaPace

    now = [100.0]
    pace = ArenaPace(["a-1", "b-2", "c-3"], 2, clock=lambda: now[0])  # 5 timed runs per prompt
    assert not pace.started(0.0, "Warming up (one short run of each method)…") and pace.position() == ""
    assert pace.started(0.0, "a-1 (code): standard decoding")
    assert pace.position() == "prompt 1 of 3, standard decoding before method 1 of 2"
    assert "follows once the first prompt is measured" in pace.timing()
    pace.started(3 / 15, "a-1 (code): n-gram k=4")
    assert pace.position() == "prompt 1 of 3, method 2 of 2"
    pace.started(4 / 15, "a-1 (code): standard decoding")
    assert pace.position() == "prompt 1 of 3, standard decoding after method 2 of 2"
    now[0] = 160.0  # the first prompt took 60 s
    pace.prompts_done(1)
    pace.started(6 / 15, "b-2 (qa): n-gram k=4")
    assert pace.position() == "prompt 2 of 3, method 1 of 2"
    assert pace.seconds_per_prompt() == 60.0
    now[0] = 170.0
    assert pace.timing() == "about 110 s left of about 3 min 0 s (the pace of the first prompt)"


def test_the_one_prompt_box_starts_with_an_example_so_run_works_at_once():
    """A new user's trial: picking "one prompt" showed an empty box, and Run answered that the prompt is empty. The
    box starts with the app's first example (the Live tab's too); its placeholder still asks for one when cleared."""
    import gradio as gr

    from app.arena.layout import build_tab
    from app.arena.settings import DEFAULT_PROMPT, choose_prompts
    from specviz.analysis.prompts import EXAMPLE_PROMPTS, FIRST_EXAMPLE, load_prompts

    example = next(p.prompt for p in load_prompts(EXAMPLE_PROMPTS) if p.id == FIRST_EXAMPLE)
    assert DEFAULT_PROMPT == example and example.startswith("Use only the context to answer the question.")
    with gr.Blocks() as demo:
        build_tab()
    box = next(c for c in demo.config["components"] if c.get("props", {}).get("elem_id") == "arena-prompt")
    assert box["props"]["value"] == example and box["props"]["placeholder"] == "Type a prompt…"
    assert choose_prompts("prompt", box["props"]["value"], "") == [
        {"id": "your-prompt", "category": "your prompt", "prompt": example.strip()}]


def test_a_stop_after_the_first_prompt_keeps_its_rows_and_says_so(tiny_model_dir):
    """A new user's trial: Stop 9 s into a race said "Stopped before the first prompt finished: nothing to show".
    A prompt's rows, once all its runs finished, stay through a Stop: the table, the downloads and the status."""
    from drain_support import settled

    def stop_once_a_prompt_shows(gen):
        for out in gen:
            rows = settled(out, arena_tab.OUTPUTS).get("arena-prompts")
            if isinstance(rows, dict) and rows.get("data"):
                arena_tab.stop()  # no request: flags every running arena
            yield out

    args = GOOD | {"target": str(tiny_model_dir), "source": "category", "category": "math", "drafters": ["ngram"],
                   "ks": ["2"], "max_new_tokens": 8}
    out = drain(stop_once_a_prompt_shows(arena_tab.run(**args)))
    shown = int(re.search(r"Stopped after (\d) prompts? in \d+ s; the downloads hold those", out["arena-status"])[1])
    assert 1 <= shown < 6  # the worker may finish the prompt under way before it sees the flag
    assert len(out["arena-prompts"]["data"]) == 2 * shown  # each prompt: standard decoding and ngram k=2
    with open(out["arena-csv"], encoding="utf-8") as f:
        ids = [line["prompt_id"] for line in csv.DictReader(f) if line["level"] == "prompt"]
    assert ids == [f"math-{i}" for i in range(1, shown + 1) for _ in range(2)]


def test_a_stop_inside_the_first_prompt_says_what_was_running(tiny_model_dir, monkeypatch):
    """Stopped during the first prompt's method run: nothing finished, and the status says which prompt and run."""
    from specviz.analysis import arena

    real = arena.measure_run

    def stop_in_the_first_timed_method_run(target, drafter, ids, config, stop):
        if drafter is not None and config.max_new_tokens == 16:  # not a warm-up (8 tokens) nor a prefill
            arena_tab.stop()
        return real(target, drafter, ids, config, stop)

    monkeypatch.setattr(arena, "measure_run", stop_in_the_first_timed_method_run)
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "source": "category", "category": "math",
                                         "drafters": ["ngram"], "ks": ["2"]})))
    status = html.unescape(out["arena-status"])
    assert ("Stopped while prompt 1 of 6 was running (1 of its 3 runs done, ngram k=2 under way): nothing "
            "finished to show; a prompt's rows appear once all 3 of its runs finish") in status
    assert "arena-csv" not in out


def test_the_stop_message_names_the_run_under_way():
    from app.arena.progress import ArenaPace

    pace = ArenaPace(["a-1", "b-2"], 2)
    assert pace.stopped_text().startswith("Stopped while loading or warming up")
    pace.started(2 / 10, "a-1 (code): early-exit k=auto")
    assert pace.stopped_text().startswith("Stopped while prompt 1 of 2 was running (2 of its 5 runs done, "
                                          "early-exit k=auto under way): nothing finished to show")
