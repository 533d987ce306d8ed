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


@pytest.mark.parametrize("temperature, n, words", [(0.0, 30, "temperature above 0"), (1.0, 5, "N (runs per side)")])
def test_bad_check_input_gives_one_sentence(tiny_model_dir, temperature, n, words):
    status = _last(batching.check("Hi", temperature, "ngram", n, False, str(tiny_model_dir), ""))[0]
    assert words in status and "Traceback" not in status, status
