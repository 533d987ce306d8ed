"""A new user's trial: the sweep's "Predicted (model)" cell read "too noisy (0.28)" beside a measured "1.06× faster
(1.06–1.21×)"; a bare 0.28 labelled too noisy meant nothing. 0.28 was the model's predicted speedup, made from a
pass cost the forward grid timed before the sweep far from the one the sweep itself measured. The cell now leaves
the number out and says what was too noisy, with both pass costs; the chart's hover gives the same reason."""

from __future__ import annotations

from app import batching
from app.batching.sweep_reading import PREDICTED_HEADER, prediction_noise


def _row(batch: int, predicted: float, grid_cost: float, sweep_cost: float) -> dict:
    """A sweep row measured 1.06× faster (repeats 1.06–1.21×) at 2.0 tokens per pass."""
    return {"batch": batch, "pass_cost": sweep_cost, "speedup": 1.06, "tokens_per_pass": 2.0, "kv_megabytes": 1.0,
            "repeats": [(10.0, 10.6), (10.0, 12.1), (10.0, 11.0)], "standard_tps": 10.0, "speculative_tps": 10.6,
            "step_ms": 80.0, "verify_ms": 80.0 * sweep_cost, "predicted": predicted, "predicted_low": predicted - 0.02,
            "predicted_high": predicted + 0.02, "predicted_pass_cost": grid_cost}


def _cells(rows: list[dict]) -> list[str]:
    table = batching.sweep_table({"k": 4, "rows": rows})
    column = table["headers"].index(PREDICTED_HEADER)
    return [r[column] for r in table["data"]]


def test_a_prediction_from_a_pass_cost_the_sweep_contradicts_says_what_was_noisy_without_the_number():
    rows = [_row(1, 0.28, 7.05, 1.52), _row(2, 1.31, 1.40, 1.45)]
    contradicted = ("left out, too noisy: the pass cost it reads was timed at 7.05 steps before the sweep, the "
                    "sweep's own at 1.52 (the machine's speed changed between them)")
    assert _cells(rows) == [contradicted, "1.31 (1.29–1.33)"]
    assert "0.28" not in _cells(rows)[0]
    table = batching.sweep_table({"k": 4, "rows": rows})
    assert table["data"][0][table["headers"].index("Speedup (repeats)")] == "1.06× faster (1.06–1.21×)"
    (noisy,) = [t for t in batching.sweep_figure({"k": 4, "rows": rows}).data
                if t.name == "predicted: too noisy (its timings disagree)"]
    assert list(noisy.x) == [1] and list(noisy.y) == [0.28]  # on the chart, apart from the curve, with its reason
    assert list(noisy.text) == [contradicted.replace("left out, ", "left out of the curve, ")]
    assert noisy.hovertemplate == "B = %{x}: predicted %{y:.2f}× (a model), %{text}<extra></extra>"


def test_a_prediction_above_its_tokens_per_pass_names_the_pass_cost_below_one_step():
    rows = [_row(1, 2.6, 0.74, 1.21)]  # the grid timed a pass of 5 tokens cheaper than a one-token step
    assert prediction_noise(rows[0], rows) == ("the pass cost it reads was timed at 0.74 steps, cheaper than one "
                                               "step, which no machine does")
    assert _cells(rows) == ["left out, too noisy: the pass cost it reads was timed at 0.74 steps, cheaper than one "
                            "step, which no machine does"]
    agreeing = [_row(1, 1.3, 1.30, 1.21)]  # within 1.25× of the sweep's own pass cost: shown with its range
    assert prediction_noise(agreeing[0], agreeing) is None and _cells(agreeing) == ["1.30 (1.28–1.32)"]
