"""The batch-size sweep and the sampling-law check (specviz.analysis.batching) on the tiny models, and the CLI's
bench --batch."""

from __future__ import annotations

import json

import pytest

from specviz.analysis import batching
from specviz.cli import main
from specviz.core.engine import GenerationConfig
from specviz.core.verify import SamplingConfig
from specviz.drafters import ModelDrafter, NgramDrafter


def _prompts(tok):
    return [tok.encode(text, add_special_tokens=False) for text in (
        "the cat sat on the mat and the dog sat on the log",
        "a river runs through the green valley past old stone bridges",
        "the engineer writes tests first then code then runs the tests",
    )]


def test_sweep_rows_follow_their_definitions(tiny_target):
    config = GenerationConfig(max_new_tokens=12, k=3)
    result = batching.batch_sweep(tiny_target, _prompts(tiny_target.tokenizer), config, NgramDrafter,
                                  batching.SweepOptions(batch_sizes=(1, 2, 4), repeats=2))
    rows = result["rows"]
    assert [r["batch"] for r in rows] == [1, 2, 4] and not result["stopped"]
    for r in rows:
        assert r["standard_tps"] > 0 and r["speculative_tps"] > 0
        assert r["speedup"] == pytest.approx(r["speculative_tps"] / r["standard_tps"])
        assert 1.0 <= r["tokens_per_pass"] <= 4.0
        rows_used = [_prompts(tiny_target.tokenizer)[i % 3] for i in range(r["batch"])]
        assert r["kv_megabytes"] == pytest.approx(
            batching.kv_bytes_per_token(tiny_target) * (max(map(len, rows_used)) + 12 + 4) * r["batch"] / 1e6)
        assert len(r["repeats"]) == 2
        # each repeat's own T(B, 1), T(B, k+1) and tokens per pass, the spread the tab shows beside the medians: the
        # median over all the runs' forwards lies between the repeats' own medians
        assert len(r["repeat_forward_ms"]) == 2 and len(r["repeat_tokens_per_pass"]) == 2
        steps = [step for step, _ in r["repeat_forward_ms"]]
        assert all(s > 0 for s in steps) and min(steps) <= r["step_ms"] <= max(steps)
        verifies = [v for _, v in r["repeat_forward_ms"] if v is not None]
        if r["verify_ms"] is not None:
            assert verifies and min(verifies) <= r["verify_ms"] <= max(verifies)
        emitted = [t for t in r["repeat_tokens_per_pass"] if t is not None]
        assert min(emitted) <= r["tokens_per_pass"] <= max(emitted)
    assert rows[0]["predicted"] is not None
    text = batching.format_sweep(result)
    assert "Speculation" in text and "lowest and highest of 2 repeats" in text
    for r, line in zip(rows, text.splitlines()[1:]):  # each figure with the range of its repeats, as the tab shows it
        assert batching.spread_cell(r, "standard_tps", ".1f") in line
        assert batching.spread_cell(r, "pass_cost", ".2f") in line
        ups = batching.repeat_speedups(r)
        assert line.split()[0] == str(r["batch"]) and f"{r['speedup']:.2f} (" in line and len(ups) == 2


def test_the_sweep_stops_when_asked(tiny_target):
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 1

    result = batching.batch_sweep(tiny_target, _prompts(tiny_target.tokenizer), GenerationConfig(max_new_tokens=6),
                                  NgramDrafter,
                                  batching.SweepOptions(batch_sizes=(1, 2, 4), repeats=1, should_stop=stop))
    assert result["stopped"] and len(result["rows"]) <= 1


def test_sampling_check_passes_a_right_sampler_and_catches_a_broken_one(tiny_target, tiny_draft):
    prompt = _prompts(tiny_target.tokenizer)[0]
    config = GenerationConfig(max_new_tokens=3, k=3, sampling=SamplingConfig(temperature=1.0))
    make = lambda: ModelDrafter(tiny_draft.model, "d")  # noqa: E731 - agrees with the target ~40 % of the time
    right = batching.sampling_check(tiny_target, prompt, config, make, n=400)
    assert right["fit_speculative"][1] > 1e-3 and right["fit_standard"][1] > 1e-3
    assert right["homogeneity"][1] > 1e-3
    assert sum(right["speculative"].values()) > 100
    broken = batching.sampling_check(tiny_target, prompt, config, make, n=400, broken=True)
    assert broken["broken"] and broken["fit_speculative"][1] < 0.01
    # the law read before sampling (the app's check of N) is the one the test uses, not read twice
    first, share, exact = batching.first_token_law(tiny_target, prompt, config)
    assert first == right["first"] and exact == right["exact"] and 0 < share <= 1
    again = batching.sampling_check(tiny_target, prompt, config, make, n=400, law=(first, {"marker": 1.0}))
    assert again["exact"] == {"marker": 1.0}  # reused as given
    other = batching.sampling_check(tiny_target, prompt, config, make, n=400, law=(first + 1, {"marker": 1.0}))
    assert other["exact"] == right["exact"]  # another first token: read afresh


def test_sampling_check_needs_a_temperature(tiny_target):
    with pytest.raises(ValueError, match="temperature"):
        batching.sampling_check(tiny_target, [1, 2, 3], GenerationConfig(), NgramDrafter, n=10)


def test_bench_batch_command(tiny_model_dir, capsys, tmp_path):
    suite = tmp_path / "s.jsonl"
    suite.write_text("\n".join(json.dumps({"id": f"p{i}", "category": "c", "prompt": f"the cat sat {i} times"})
                               for i in range(3)) + "\n")
    code = main(["bench", "--batch", "1,2", "--prompts", str(suite), "--target", str(tiny_model_dir), "--device",
                 "cpu", "--max-new-tokens", "6", "--repeats", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert [r["batch"] for r in result["rows"]] == [1, 2] and result["drafter"] == "ngram"
    assert main(["bench", "--batch", "0,2"]) == 2
    assert "batch values must be in 1..64" in capsys.readouterr().err


def test_the_prediction_carries_the_range_of_its_inputs():
    """predicted = tokens per pass at B = 1 × T(B, 1) / (T(B, k+1) + B × drafting per row); its low and high end put
    the B = 1 repeats' fewest (most) tokens per pass and the grid's fastest (slowest) forwards into the same formula."""
    first = batching.SweepRow(1, 10.0, 20.0, 2.0, 2.0, 10.0, 12.0, 1.2, 1.0,
                              repeat_forward_ms=[(10.0, 12.0)] * 3, repeat_tokens_per_pass=[1.9, 2.0, 2.2])
    second = batching.SweepRow(2, 18.0, 30.0, 1.67, 2.0, 11.0, 16.0, 1.45, 2.0,
                               repeat_forward_ms=[(10.5, 15.0), (11.0, 16.0), (12.0, 18.0)])
    grid = {"ms": {1: {1: 10.0, 3: 12.0}}, "spread": {1: {1: (9.0, 11.0), 3: (11.0, 14.0)}}}
    batching.predict([first, second], grid, k=2)
    draft = 2.0 / 20.0 * 1000.0 - 12.0  # ms per pass at B = 1 beyond its verification: 88 ms
    assert first.predicted == pytest.approx(2.0 * 10.0 / (12.0 + draft))
    assert first.predicted_low == pytest.approx(1.9 * 9.0 / (14.0 + draft))  # from the grid's spread
    assert first.predicted_high == pytest.approx(2.2 * 11.0 / (11.0 + draft))
    # B = 2 is not in the grid: the sweep's own T and the range of its repeats
    assert second.predicted == pytest.approx(2.0 * 11.0 / (16.0 + 2 * draft))
    assert second.predicted_low == pytest.approx(1.9 * 10.5 / (18.0 + 2 * draft))
    assert second.predicted_high == pytest.approx(2.2 * 12.0 / (15.0 + 2 * draft))
    assert first.predicted_low < first.predicted < first.predicted_high
