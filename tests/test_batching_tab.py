"""The Batching tab's handlers on the tiny models: a sweep yields a table, a chart, a lesson and files whose numbers
are the sweep's; the check shows its statistics; bad input is one sentence, never a traceback."""

from __future__ import annotations

import csv
import json

import pytest

from app import batching, device


def _last(gen) -> tuple:
    out = None
    for out in gen:
        pass
    return out


def test_a_sweep_shows_its_table_chart_lesson_and_files(tiny_model_dir):
    out = _last(batching.measure("ngram", 2, 6, [1, 2], batching.SHORT, True, str(tiny_model_dir), ""))
    status, lesson, chart, table, csv_file, json_file = out
    assert "Measured B = 1, 2" in status, status
    assert [row[0] for row in table["data"]] == ["1", "2"]  # one row per batch size
    # the lesson reads the cause off the numbers, or says the repeats disagree (a busy machine): never a bare ratio
    assert "pass cost T(B, 3) / T(B, 1)" in lesson or "too noisy to tell" in lesson, lesson
    assert chart["visible"] is True
    with open(json_file["value"]) as f:
        saved = json.load(f)
    with open(csv_file["value"]) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["batch"]) for r in rows] == [r["batch"] for r in saved["rows"]] == [1, 2]
    share = saved["other_programs_cpu_share"]  # measured while the sweep ran (None without /proc/stat)
    assert share is None or 0.0 <= share <= 1.0
    for row, shown in zip(saved["rows"], table["data"]):
        assert row["speculative_tps"] > 0 and row["standard_tps"] > 0
        assert shown[2] == f"{row['speculative_tps']:.1f}"  # the table shows the file's numbers
    assert not device.DEVICE.locked


def test_the_check_shows_its_statistics(tiny_model_dir):
    out = _last(batching.check("Hello there", 1.0, "ngram", 30, False, str(tiny_model_dir), ""))
    status, lesson, chart, stats = out
    assert "Checked in" in status and "30 standard and 30 speculative" in status, status
    for test in ("standard vs the exact law", "speculative vs the exact law", "standard vs speculative"):
        assert test in stats, stats
    assert chart["visible"] is True
    proposed = int(stats.split("The drafter proposed ")[1].split(" ")[0])
    if proposed == 0:  # n-gram lookup found nothing to propose on this prompt: the lesson must not claim a pass
        assert "nothing" in lesson.lower() or "no draft" in lesson.lower(), lesson


@pytest.mark.parametrize("args, words", [
    (("ngram", 2, 6, [], batching.SHORT, True), "at least one batch size"),
    (("ngram", 2, 6, [3], batching.SHORT, True), "chosen from"),
    (("model", 2, 6, [1], batching.SHORT, True), "needs a draft model"),
    (("ngram", 99, 6, [1], batching.SHORT, True), "k (draft length)"),
])
def test_bad_sweep_input_gives_one_sentence(tiny_model_dir, args, words):
    status = _last(batching.measure(*args, str(tiny_model_dir), ""))[0]
    assert words in status and "Traceback" not in status, status


@pytest.mark.parametrize("temperature, n, words", [(0.0, 30, "temperature above 0"),
                                                   (1.0, 5, "N runs per side must be between 20 and 1000 (got 5)")])
def test_bad_check_input_gives_one_sentence(tiny_model_dir, temperature, n, words):
    status = _last(batching.check("Hi", temperature, "ngram", n, False, str(tiny_model_dir), ""))[0]
    assert words in status and "Traceback" not in status, status


def test_an_impossible_row_is_noise_in_the_lesson_not_a_finding():
    def row(batch, cost, speedup, tokens=1.9):
        return {"batch": batch, "pass_cost": cost, "speedup": speedup, "tokens_per_pass": tokens,
                "repeats": [(10.0, 10.0 * speedup)] * 3, "kv_megabytes": 1.0}

    cheap_pass = row(1, 0.78, 1.6)  # a pass over 5 tokens cheaper than a one-token step
    too_fast = row(2, 1.1, 2.8)  # 2.8x from 1.9 tokens per pass
    fine = row(4, 1.2, 1.4)
    assert batching.impossible(cheap_pass) and batching.impossible(too_fast) and not batching.impossible(fine)
    assert batching.verdict(cheap_pass) == batching.verdict(too_fast) == "noisy"
    lesson = batching.sweep_lesson({"k": 4, "device": "cpu", "rows": [cheap_pass, too_fast, fine]})
    assert "at most 1.20) up to B = 4" in lesson and "0.78" not in lesson
    assert lesson.count("the timings are impossible") == 2


def _paying_rows() -> list[dict]:
    return [{"batch": b, "pass_cost": 2.0, "speedup": 1.6, "tokens_per_pass": 2.33, "repeats": [(10.0, 16.0)] * 3,
             "kv_megabytes": 1.0, "standard_tps": 10.0, "speculative_tps": 16.0, "step_ms": 80.0, "verify_ms": 160.0,
             "predicted": None}
            for b in (1, 2)]


def test_a_sweep_other_programs_disturbed_draws_no_conclusion():
    """Seen in the browser under heavy CPU contention: the status warned that the machine was busy, yet the lesson
    read "a pass ... already costs 2.0 steps at B = 1, so speculation pays". A sweep during which other programs took
    more than CONTENDED_SHARE of the CPUs says its timings are too noisy to tell, and why, and concludes nothing."""
    quiet = {"k": 4, "device": "cpu", "rows": _paying_rows(), "cpu_others": 0.05}
    assert batching.disturbance(quiet) is None
    assert ("already costs 2.0 steps at B = 1, yet speculation pays (1.60× at B = 1: 2.3 tokens per pass more than "
            "cover it)") in batching.sweep_lesson(quiet)  # a costly pass is no reason for paying: "yet", and why
    busy = dict(quiet, cpu_others=0.45)
    lesson = batching.sweep_lesson(busy)
    assert lesson.startswith("The timings are too noisy to tell whether speculation pays at any batch size: other "
                             "programs used 45% of this machine's CPU time"), lesson
    assert not any(claim in lesson for claim in ("pays (", "breaks even", "does not pay", "1.60×", "2.0 steps"))
    # where the share is unknown (no /proc/stat): the load average recorded at the sweep's end
    loaded = {"k": 4, "device": "cpu", "rows": _paying_rows(),
              "environment": {"machine": {"load_average_1min": 3.1, "cpu_count": 2}}}
    assert "too noisy to tell" in batching.sweep_lesson(loaded) and "load average 3.1 on 2 CPUs" in \
        batching.sweep_lesson(loaded)
    calm = dict(loaded, environment={"machine": {"load_average_1min": 0.4, "cpu_count": 2}})
    assert "yet speculation pays" in batching.sweep_lesson(calm)
    # the status line warns with the same reason; the JSON keeps the share and the same lesson
    result = dict(busy, stopped=False, max_new_tokens=8, label="tiny", settings={}, environment={})
    status, shown_lesson = batching._swept(result, 12.0)[:2]
    assert "warning: other programs used 45% of this machine" in status and "too noisy to tell" in status
    assert "too noisy to tell" in shown_lesson and "speculation pays (" not in shown_lesson
    saved = batching.sweep_json(result)
    assert saved["other_programs_cpu_share"] == 0.45 and saved["lesson"] == lesson


def test_a_lesson_without_a_pass_cost_states_the_verdict_alone():
    rows = [dict(r, pass_cost=None) for r in _paying_rows()]  # e.g. too few tokens for a full pass to be timed
    lesson = batching.sweep_lesson({"k": 4, "device": "CPU", "rows": rows, "cpu_others": 0.0})
    assert lesson.startswith("On this CPU speculation pays (1.60× at B = 1)"), lesson


def test_a_prediction_above_the_tokens_per_pass_is_noise_in_the_table_and_chart():
    """Seen in the browser on a busy machine: B = 1 predicted 3.74× from 2.33 tokens per pass (the forward grid timed
    T(1, 5) below T(1, 1)). The table says too noisy and the chart keeps that point off the predicted line."""
    def row(batch, predicted):
        return {"batch": batch, "pass_cost": 1.86, "speedup": 1.6, "tokens_per_pass": 2.33, "predicted": predicted,
                "repeats": [(10.0, 16.0)] * 3, "kv_megabytes": 1.0, "standard_tps": 10.0, "speculative_tps": 16.0,
                "step_ms": 65.4, "verify_ms": 121.4}

    rows = [row(1, 3.74), row(2, 0.84)]
    assert batching.noisy_prediction(rows[0], rows) and not batching.noisy_prediction(rows[1], rows)
    table = batching.sweep_table({"k": 4, "rows": rows})
    column = table["headers"].index("Predicted")
    assert [r[column] for r in table["data"]] == ["too noisy (3.74)", "0.84"]
    traces = {t.name: t for t in batching.sweep_figure({"k": 4, "rows": rows}).data}
    assert list(traces["predicted from B = 1 and T(B, n)"].x) == [2]
    assert list(traces["predicted: too noisy (its timings disagree)"].x) == [1]


def test_a_prediction_from_costs_the_sweep_contradicts_is_noise():
    """Seen in the browser with a second program taking a core: the table showed a pass costing 1.97 steps at B = 1
    and 2.33 tokens per pass, but Predicted 2.26 (the forward grid, timed at another moment, had a pass at ~1.0
    step). A prediction whose pass cost differs from the sweep's own by more than 25 % says too noisy."""
    base = {"batch": 1, "pass_cost": 1.97, "speedup": 1.57, "tokens_per_pass": 2.33, "repeats": [(10.0, 15.7)] * 3,
            "kv_megabytes": 1.0, "standard_tps": 10.0, "speculative_tps": 15.7, "step_ms": 81.2, "verify_ms": 159.8}
    contradicted = dict(base, predicted=2.26, predicted_pass_cost=1.03)
    agreeing = dict(base, predicted=1.18, predicted_pass_cost=1.90)
    assert batching.noisy_prediction(contradicted, [contradicted])
    assert not batching.noisy_prediction(agreeing, [agreeing])
