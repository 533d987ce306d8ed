"""The arena on tiny models, run for real: run_arena's order of runs (a baseline timed before and after every
method), greedy output identical to the baseline, each row's figures in range and following the formulas, the pooled
rows per category and overall, the CSV and JSON, the figures and each method's colour, bad settings, a stop and
sampling. The spread of each timed figure from hand-made timings: test_arena_spread.py; the Arena tab's handler:
test_arena_tab.py."""

from __future__ import annotations

import csv
import io
import json
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from torch_threads import torch_threads  # noqa: E402

from app import arena as arena_tab  # noqa: E402
from specviz.analysis.arena import run_arena, variants  # noqa: E402
from specviz.analysis.arena_intervals import share_interval  # noqa: E402
from specviz.analysis.arena_rows import CSV_COLUMNS, Variant, to_csv, to_json  # noqa: E402
from specviz.core.costs import (expected_tokens_per_pass, predicted_speedup_measured,  # noqa: E402
                                predicted_speedup_paper)
from specviz.core.engine import GenerationConfig  # noqa: E402
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


def test_run_stats_keep_each_passs_verify_and_draft_time(tiny_target):
    import specviz.analysis.arena as arena

    ids = tiny_target.tokenizer.encode(PROMPTS[0]["prompt"])
    run = arena.measure_run(tiny_target, arena.build_drafter("ngram", tiny_target), ids,
                            GenerationConfig(max_new_tokens=12, k=2))
    stats = run.stats
    assert len(stats.pass_verify_ms) == len(stats.pass_draft_ms) == stats.passes > 1
    assert sum(stats.pass_verify_ms) == pytest.approx(stats.verify_ms)
    assert sum(stats.pass_draft_ms) == pytest.approx(stats.draft_ms)


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
        # its passes' tokens add up to its counts, and give tokens per pass its interval (the Live card's formula)
        assert len(r["pass_tokens"]) == r["passes"] and sum(r["pass_tokens"]) == r["emitted_after_prefill"]
        assert r["tokens_per_pass_low"] <= r["tokens_per_pass"] <= r["tokens_per_pass_high"] <= k_max + 1
        assert r["t_verify_ms"] > 0 and r["t_draft_ms"] >= 0
        if r["k"] == "auto" and r["acceptance_rate"] is None:  # k = auto found that no draft pays here
            continue
        assert 0.0 <= r["acceptance_rate"] <= 1.0
        if r["drafter"] == "model" and r["k"] != "auto":  # the tiny draft agrees with the target often, not always
            assert 0.0 < r["alpha"] < 1.0 and r["acceptance_rate"] <= r["alpha"]
            assert r["m"] > 0 and r["c"] > 0
            assert r["expected_tokens_per_pass"] == pytest.approx(expected_tokens_per_pass(r["alpha"], r["m"]))
            low, high = r["expected_tokens_per_pass_low"], r["expected_tokens_per_pass_high"]  # at alpha's ends
            assert low < r["expected_tokens_per_pass"] < high and low == pytest.approx(
                expected_tokens_per_pass(share_interval(r, "alpha").low, r["m"]))
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
    said = pred.layout.annotations[-1].text  # the notes (after a "runs off the top" note, when a spread is that wide)
    assert "no markers" not in said  # chains only: every method has its markers
    assert said.startswith("bars' error bars: the ratio against each standard<br>run of its prompt, widened by their spread<br>"), said
    # the markers' error bars: the predictions' spread from their timings' (each method ran over several passes)
    assert "markers' error bars: α's 95% interval and the<br>spread of T_step, T_verify and T_draft" in said
    assert pred.data[2].error_y.visible and any(pred.data[2].error_y.array)
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
    assert "no markers" in arena_tab.predictions_figure(tree_rows).layout.annotations[-1].text


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
