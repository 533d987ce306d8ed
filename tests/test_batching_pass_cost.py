"""The Batching sweep's pass costs follow one rule (app.batching.sweep_reading.unreadable_costs) in the lesson, the
table and the chart. A trial on a machine where other programs used 56% of the CPUs read "so the pass costs cannot
be read" in the lesson beside a table showing "1.14 (1.12–1.18)" and a chart drawing the pass-cost line as read."""

from __future__ import annotations

from app import batching
from app.batching.sweep_reading import MUTED_CELL, unreadable_costs
from app.figures import COLORS


def _row(batch: int, forward_ms: list[tuple[float, float]], pass_cost: float) -> dict:
    """A measured row at k = 4 whose repeats all pay (1.5-1.7x) and whose pass costs are ``verify / step`` of
    ``forward_ms`` (T(B, 1), T(B, 5) in ms per repeat)."""
    return {"batch": batch, "pass_cost": pass_cost, "speedup": 1.6, "tokens_per_pass": 2.4,
            "repeats": [(10.0, 15.0), (10.0, 16.0), (10.0, 17.0)], "repeat_forward_ms": forward_ms,
            "repeat_tokens_per_pass": [2.3, 2.4, 2.5], "kv_megabytes": 1.0, "standard_tps": 10.0,
            "speculative_tps": 16.0, "step_ms": 50.0, "verify_ms": 57.0, "predicted": None}


def _trial(share: float) -> dict:
    """The trial's sweep: k = 4, 8 tokens per row, B = 1 and 2; at B = 1 the pass costs 1.14 (1.12-1.18) steps."""
    rows = [_row(1, [(50.0, 56.0), (50.0, 57.0), (50.0, 59.0)], 1.14),
            _row(2, [(60.0, 72.0), (60.0, 73.2), (60.0, 75.0)], 1.22)]
    return {"k": 4, "device": "CPU", "rows": rows, "cpu_others": share,
            "settings": {"max_new_tokens": 8, "batch_sizes": [1, 2]}}


def _cells(result: dict) -> list[str]:
    table = batching.sweep_table(result)
    column = table["headers"].index("Pass cost (steps)")
    return [row[column] for row in table["data"]]


def test_a_busy_sweep_says_in_lesson_table_and_chart_that_its_pass_costs_cannot_be_read():
    busy = _trial(0.56)
    reason = "other programs used 56% of the CPUs"
    assert unreadable_costs(busy) == reason
    assert "other programs used 56% of this machine's CPU time" in batching.sweep_lesson(busy)
    assert "so the pass costs cannot be read" in batching.sweep_lesson(busy)
    # the table: each pass-cost cell keeps its number and range, says why it is not readable, and is muted
    assert _cells(busy) == [f"1.14 (1.12–1.18), not readable: {reason}", f"1.22 (1.20–1.25), not readable: {reason}"]
    table = batching.sweep_table(busy)
    column, predicted = table["headers"].index("Pass cost (steps)"), table["headers"].index("Predicted (model)")
    assert [row[column] for row in table["metadata"]["styling"]] == [MUTED_CELL, MUTED_CELL]
    assert {cell for row in table["metadata"]["styling"] for i, cell in enumerate(row)
            if i not in (column, predicted)} == {""}
    # the chart: the pass-cost line is grey, dotted and hollow, its legend and hover saying why
    (cost,) = [t for t in batching.sweep_figure(busy).data if t.name.startswith("pass cost")]
    assert cost.name == f"pass cost T(B, 5) / T(B, 1): not readable<br>({reason})"
    assert (cost.line.color, cost.line.dash, cost.marker.symbol) == (COLORS["other"], "dot", "circle-open")
    assert list(cost.y) == [1.14, 1.22] and list(cost.text) == ["1.14 (1.12–1.18)", "1.22 (1.20–1.25)"]
    assert cost.hovertemplate == f"B = %{{x}}: %{{text}} steps, not readable: {reason}<extra></extra>"


def test_a_quiet_sweep_reads_its_pass_costs_everywhere():
    quiet = _trial(0.05)
    assert unreadable_costs(quiet) is None
    lesson = batching.sweep_lesson(quiet)
    assert "cannot be read" not in lesson and "stays near 1 (every repeat at most 1.25) up to B = 2" in lesson
    assert _cells(quiet) == ["1.14 (1.12–1.18)", "1.22 (1.20–1.25)"]
    assert "metadata" not in batching.sweep_table(quiet)
    (cost,) = [t for t in batching.sweep_figure(quiet).data if t.name.startswith("pass cost")]
    assert cost.name == "pass cost T(B, 5) / T(B, 1), in one-token steps (bars: repeats)"
    assert (cost.line.color, cost.line.dash) == (COLORS["verify"], None)


def test_an_unknown_share_falls_back_to_the_load_average_in_all_three():
    loaded = dict(_trial(0.0), environment={"machine": {"load_average_1min": 3.1, "cpu_count": 2}})
    del loaded["cpu_others"]
    reason = "the machine was busy (load average 3.1 on 2 CPUs)"
    assert unreadable_costs(loaded) == reason
    assert "pass costs cannot be read" in batching.sweep_lesson(loaded)
    assert _cells(loaded)[0] == f"1.14 (1.12–1.18), not readable: {reason}"
    assert any(reason in t.name for t in batching.sweep_figure(loaded).data)


def test_a_busy_sweep_says_its_prediction_cannot_be_read_either():
    """The model's prediction divides by the pass costs T(B, k+1) / T(B, 1), which a disturbed machine reads too low:
    its cells are muted and say why, as the pass costs' do, and the chart draws it apart (a trial: a busy sweep
    flagged the pass costs but showed "Predicted (model) 1.52 (1.40–1.66)" as read)."""
    busy, quiet = _trial(0.56), _trial(0.05)
    for result in (busy, quiet):
        for row, value in zip(result["rows"], (1.52, 1.31)):
            row.update(predicted=value, predicted_low=value - 0.1, predicted_high=value + 0.1)
    reason = "other programs used 56% of the CPUs"

    def predicted(result):
        table = batching.sweep_table(result)
        column = table["headers"].index("Predicted (model)")
        return [row[column] for row in table["data"]], [row[column] for row in table.get("metadata", {}).get(
            "styling", [[""] * len(table["headers"])] * len(table["data"]))]

    assert predicted(busy) == ([f"1.52 (1.42–1.62), not readable: {reason}",
                                f"1.31 (1.21–1.41), not readable: {reason}"], [MUTED_CELL, MUTED_CELL])
    assert predicted(quiet) == (["1.52 (1.42–1.62)", "1.31 (1.21–1.41)"], ["", ""])
    names = [t.name for t in batching.sweep_figure(busy).data if t.name.startswith("predicted")]
    assert names == ["predicted: not readable"]
    (apart,) = [t for t in batching.sweep_figure(busy).data if t.name == "predicted: not readable"]
    assert list(apart.y) == [1.52, 1.31] and reason in apart.hovertemplate
    assert [t.name for t in batching.sweep_figure(quiet).data if t.name.startswith("predicted")] == [
        "predicted from B = 1 and T(B, n)"]


def test_impossible_timings_at_the_smallest_batch_leave_the_next_pass_cost_readable():
    """CI's sweep: B = 1's timings were impossible (1.5× from 1.0 tokens per pass) and B = 2 lost; the lesson read no
    pass cost at all (it read B = 1's, which impossible timings do not have), where B = 2's was there to read."""
    gone = _row(1, [(50.0, 56.0), (50.0, 57.0), (50.0, 59.0)], 1.14) | {
        "speedup": 1.5, "tokens_per_pass": 1.0, "repeat_tokens_per_pass": [1.0, 1.0, 1.0]}
    lost = _row(2, [(60.0, 120.0), (60.0, 126.0), (60.0, 132.0)], 2.1) | {
        "speedup": 0.9, "tokens_per_pass": 1.0, "repeats": [(10.0, 9.0), (10.0, 8.5), (10.0, 9.5)],
        "repeat_tokens_per_pass": [1.0, 1.0, 1.0], "speculative_tps": 9.0}
    lesson = batching.sweep_lesson({"k": 2, "device": "CPU", "rows": [gone, lost], "cpu_others": 0.0})
    assert lesson == (
        "On this CPU a pass over 2 × 3 tokens already costs 2.1 steps (2.0–2.2) at B = 2, so speculation does not pay "
        "even at B = 2 (0.90×, every repeat slower: 0.85–0.95×; 1.0 tokens per pass (all repeats equal) do not cover "
        "the pass and the drafting). At B = 1 the timings are impossible (faster than its 1.0 tokens per pass allow):"
        " not a finding."), lesson
