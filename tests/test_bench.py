"""The benchmark harness (specviz.analysis.bench and ``python -m specviz bench``) on the tiny models."""

from __future__ import annotations

import json

import pytest

from specviz.analysis import bench
from specviz.analysis.bench_report import _paired_cell, format_bench, head_targets
from specviz.analysis.bench_runs import run_ours_paired
from specviz.analysis.prompts import Prompt, load_prompts, one_per_category
from specviz.cli import main
from specviz.core.engine import GenerationConfig
from specviz.drafters.heads import DEFAULT_TREE_NODES
from specviz.measure.kernel import KERNEL_TOKEN_COUNTS, _cost_figures, _verify_costs, format_kernel, kernel_bench

SUITE = [
    {"id": "story-1", "category": "story", "prompt": "The quick brown fox jumps over the lazy dog while the cat"},
    {"id": "facts-1", "category": "facts", "prompt": "The old library keeps thousands of books about history"},
]


@pytest.fixture
def suite_file(tmp_path):
    path = tmp_path / "suite.jsonl"
    path.write_text("\n".join(json.dumps(item) for item in SUITE) + "\n\n")
    return path


def test_load_prompts_reads_the_suite_and_names_bad_lines(tmp_path, suite_file):
    prompts = load_prompts(suite_file)
    assert [p.id for p in prompts] == ["story-1", "facts-1"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(SUITE[0]) + "\n{\"id\": \"x\"}\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_prompts(bad)
    with pytest.raises(ValueError, match="not found"):
        load_prompts(tmp_path / "missing.jsonl")


def test_one_per_category_keeps_the_first_of_each():
    prompts = [Prompt("a1", "a", "x"), Prompt("a2", "a", "y"), Prompt("b1", "b", "z")]
    assert [p.id for p in one_per_category(prompts)] == ["a1", "b1"]
    assert [p.id for p in one_per_category(prompts, max_categories=1)] == ["a1"]


def test_first_difference():
    assert bench.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert bench.first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert bench.first_difference([1, 2], [1, 2, 3]) == 2


@pytest.mark.kernels  # our engine's greedy ids vs transformers' generate() on the same model
def test_bench_on_tiny_models_reports_ratios_categories_and_identical_ids(tiny_target, tiny_draft_dir, suite_file):
    settings = bench.BenchSettings(drafters=("ngram", "model"), ks=(2, "auto"), max_new_tokens=10, repeats=2,
                                   warmup_tokens=2, draft_spec=str(tiny_draft_dir))
    result = bench.run_bench(tiny_target, load_prompts(suite_file), settings)
    json.dumps(result)  # JSON-able
    assert set(result["categories"]) == {"story", "facts"}
    assert result["ids_identical_to_transformers"] is True
    assert result["baseline_ratio_vs_transformers"] > 0
    # transformers' prompt lookup has no adaptive schedule: no ngram@auto ratio
    assert set(result["speedup_ratio_vs_transformers"]) == {"ngram@k2", "model@k2"}  # transformers has no k = auto
    assert all(r > 0 for r in result["speedup_ratio_vs_transformers"].values())
    for summary in [result["overall"], *result["categories"].values()]:
        methods = summary["methods"]
        assert methods["ours/standard"]["tokens_per_pass"] == 1.0
        assert methods["ours/standard"]["acceptance_rate"] is None
        assert methods["ours/standard"]["speedup"] == pytest.approx(1.0)
        assert methods["transformers/standard"]["tokens_per_pass"] == 1.0  # counted with a forward hook
        for name in ("ours/ngram@k2", "ours/model@k2", "ours/model@auto"):
            assert 1.0 <= methods[name]["tokens_per_pass"] <= 17.0
            rate = methods[name]["acceptance_rate"]
            assert rate is None or 0.0 <= rate <= 1.0
            assert methods[name]["speedup"] > 0
        assert methods["transformers/standard"]["tokens_per_forward"] == 1.0
        # transformers' assisted generate() has no separate prefill: only tokens per forward
        assert methods["transformers/model@k2"]["tokens_per_pass"] is None
        assert 1.0 <= methods["transformers/model@k2"]["tokens_per_forward"] <= 3.0
        assert methods["ours/model@k2"]["tokens_per_forward"] <= 3.0
    for record in result["prompts"]:
        assert all(res["repeats_identical"] for res in record["results"].values())
        assert len(record["results"]["ours/standard"]["wall_s_all"]) == 2
    assert result["versions"]["torch"] and result["versions"]["transformers"] and result["versions"]["specviz"]
    assert result["machine"]["cpu_count"] >= 1 and result["device"]["device"] == "cpu"
    assert result["settings"]["ks"] == [2, "auto"]
    assert "tokens_per_s" in result["definitions"]
    assert "OVERALL" in format_bench(result)


def test_paired_bench_times_each_speculative_run_against_its_own_standard_run(tiny_target, suite_file):
    settings = bench.BenchSettings(drafters=("ngram",), ks=(2, "auto"), max_new_tokens=10, repeats=2, warmup_tokens=2,
                                   compare_transformers=False, paired=True)
    result = bench.run_bench(tiny_target, load_prompts(suite_file), settings)
    json.dumps(result)
    for record in result["prompts"]:
        res = record["results"]
        base = res["ours/standard"]
        assert len(base["wall_s_all"]) == 4  # two speculative methods x two repeats, one standard run each
        assert base["repeats_identical"] and base["tokens_per_pass"] == 1.0
        for name in ("ours/ngram@k2", "ours/ngram@auto"):
            assert res[name]["token_ids"] == base["token_ids"]  # greedy: identical ids in lockstep too
            assert len(res[name]["paired_speedup_all"]) == 2 and all(x > 0 for x in res[name]["paired_speedup_all"])
            assert res[name]["paired_tokens_all"] == [[len(base["token_ids"])] * 2] * 2
            ratios = [b / x for b, x in zip(res[name]["paired_baseline_s_all"], res[name]["wall_s_all"])]
            assert ratios == pytest.approx(res[name]["paired_speedup_all"], rel=1e-4)
    for category, summary in [("", result["overall"]), *result["categories"].items()]:
        fig = summary["methods"]["ours/ngram@k2"]
        rows = [p["results"]["ours/ngram@k2"] for p in result["prompts"] if category in ("", p["category"])]
        assert fig["speedup"] == pytest.approx(sum(sum(r["paired_baseline_s_all"]) for r in rows)
                                               / sum(sum(r["wall_s_all"]) for r in rows))  # greedy: equal tokens
        low, high = fig["speedup_quartiles"]
        assert 0 < low <= high
    assert "paired runs" in format_bench(result)
    assert "baseline ours/transformers" not in format_bench(result)  # no transformers runs: no such line
    assert _paired_cell({"speedup_quartiles": [1.41, 1.41], "paired_runs": 1}) == "  one paired run: no spread"


def test_paired_runs_have_their_own_clocks(tiny_target):
    from specviz.drafters import NgramDrafter
    prompt = tiny_target.tokenizer("one two three one two three one two", add_special_tokens=False)["input_ids"]
    config = GenerationConfig(max_new_tokens=12, k=3)
    spec, base = run_ours_paired(tiny_target, NgramDrafter(), prompt, config)
    assert spec.token_ids == base.token_ids and len(base.token_ids) == 12
    assert base.target_passes == 11 and base.drafted == 0
    assert spec.target_passes <= 11 and spec.drafted >= 0
    assert 0 < spec.wall_s and 0 < base.wall_s


def test_bench_command_quick_json_and_out_file(capsys, tiny_model_dir, suite_file, tmp_path):
    out_file = tmp_path / "res" / "bench.json"
    code = main(["bench", "--target", str(tiny_model_dir), "--prompts", str(suite_file), "--quick",
                 "--drafters", "ngram,bf16", "--max-new-tokens", "6", "--device", "cpu", "--json", "--out",
                 str(out_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)  # stdout is only the JSON document
    assert result == json.loads(out_file.read_text())
    assert result["settings"]["quick"] is True and result["settings"]["ks"] == [4]
    assert result["settings"]["repeats"] == 1 and result["settings"]["max_new_tokens"] == 6
    assert set(result["speedup_ratio_vs_transformers"]) == {"ngram@k4", "bf16@k4"}
    assert result["ids_identical_to_transformers"] is True
    assert "story-1" in err  # progress on stderr


def test_bench_command_errors(capsys, tiny_model_dir, tmp_path):
    assert main(["bench", "--target", str(tiny_model_dir), "--prompts", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        f"error: prompt file not found: {tmp_path / 'none.jsonl'}"]
    assert main(["bench", "--k", "0"]) == 2
    assert main(["bench", "--drafters", "ngram,model", "--prompts", str(tmp_path / "x.jsonl")]) == 2
    assert "--draft-model" in capsys.readouterr().err
    for bad in ("ngram:lookup", "eagle:fast"):
        assert main(["bench", "--drafters", bad]) == 2
        assert "eagle:lookup and medusa:lookup try n-gram lookup first" in capsys.readouterr().err


def test_kernel_bench_curve(tiny_target):
    result = kernel_bench(tiny_target, repeats=2, warmup=1, copy_megabytes=8)
    assert [row["new_tokens"] for row in result["curve"]] == list(range(1, 18)) + [32]
    assert list(result["verify_cost"]) == list(range(1, 17))
    assert result["curve"][0]["ratio_vs_1"] == 1.0
    assert all(row["ms"] > 0 and row["effective_gbs"] > 0 for row in result["curve"])
    assert result["param_bytes"] == tiny_target.param_bytes
    assert result["copy_bandwidth_gbs"] > 0 and result["floor_ms"] > 0 and result["fraction_of_floor"] > 0
    long = result["long_context"]  # the tiny model's window (512) bounds the long context
    assert long["prompt_len"] == 512 - 17 and list(long["verify_cost"]) == [1, 2, 3, 4, 8, 16]
    assert "after 495 tokens of context" in format_kernel(result)
    small = kernel_bench(tiny_target, token_counts=(2, 5), repeats=1, warmup=0, copy_megabytes=4,
                         long_context=None)
    assert [row["new_tokens"] for row in small["curve"]] == [1, 2, 5]  # T(1) is always measured
    assert list(small["verify_cost"]) == [1, 4]
    assert "verify cost" in format_kernel(result)
    q1, q3 = result["verify_cost_spread"][4]
    assert q1 <= result["verify_cost"][4] <= q3  # two rounds: the median lies between the quartiles


def test_kernel_bench_times_the_row_padding_against_none(tiny_target):
    from specviz.runtime import speed


    speed.set_row_padding(tiny_target.model, {1: 4, 2: 4})
    try:
        result = kernel_bench(tiny_target, token_counts=(2, 3), repeats=1, warmup=0, copy_megabytes=4,
                              compare_plain=False, long_context=64)
    finally:
        speed.set_row_padding(tiny_target.model, {})
    assert result["row_padding"] == {1: 4, 2: 4} and list(result["unpadded"]["verify_cost"]) == [1, 2]
    assert list(result["long_context_unpadded"]["verify_cost"]) == [1, 2, 3, 4, 8, 16]
    text = format_kernel(result)
    assert "row padding (n rows computed as m): 1->4, 2->4" in text and "after 64 tokens, no row padding: k=1" in text


def test_verify_cost_is_the_median_of_per_round_ratios():
    # round 2 ran on a machine twice as slow: a ratio of medians would mix the rounds, per-round ratios do not
    rounds = {1: [10.0, 20.0, 10.0], 2: [11.0, 22.0, 11.0], 5: [12.0, 24.0, 13.0]}
    fig = _cost_figures(rounds, param_bytes=10**6, floor_ms=1.0)
    assert fig["step_ms"] == 10.0 and fig["verify_cost"][1] == pytest.approx(1.1)
    assert fig["verify_cost"][4] == pytest.approx(1.2) and fig["verify_cost_spread"][4] == pytest.approx([1.2, 1.25])
    assert [row["ratio_vs_1"] for row in fig["curve"]] == pytest.approx([1.0, 1.1, 1.2])
    assert "k=4: 1.20 (1.20-1.25)" in _verify_costs(fig)


def test_kernel_command_json(capsys, tiny_model_dir):
    code = main(["bench", "--kernel", "--target", str(tiny_model_dir), "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(json.loads(out)["curve"]) == len(KERNEL_TOKEN_COUNTS)


def test_kernel_bench_drafter_costs(tiny_target, tmp_path, monkeypatch):
    import specviz.drafters.networks as heads

    heads.save_heads(heads.new_eagle_head(tiny_target.model), tmp_path / "tiny-eagle.safetensors", tiny_target.model)
    monkeypatch.setattr(heads, "HEADS_DIR", tmp_path)
    result = kernel_bench(tiny_target, token_counts=range(1, 10), repeats=1, warmup=0, copy_megabytes=4,
                          drafters=("ngram", "eagle", "eagle:tree", "medusa"), drafter_ks=(1, 4))
    costs = result["drafter_costs"]
    assert set(costs["drafters"]) == {"ngram", "eagle", "eagle:tree"}
    assert "No trained medusa heads" in costs["skipped"]["medusa"]
    for key, curve in costs["drafters"].items():
        assert list(curve) == [1, 4]
        for k, fig in curve.items():
            assert fig["draft_ms"] >= 0 and fig["verify_ms"] > 0
            assert fig["pass_cost_steps"] == pytest.approx((fig["draft_ms"] + fig["verify_ms"]) / result["step_ms"])
    assert costs["drafters"]["eagle"][4]["nodes"] == 4
    assert costs["drafters"]["eagle:tree"][4]["nodes"] == DEFAULT_TREE_NODES
    text = format_kernel(result)
    assert "pass cost" in text and "eagle:tree" in text and "skipped" in text


def test_head_targets_report():
    def fig(tpp, tps, speedup):
        return {"tokens_per_pass": tpp, "tokens_per_s": tps, "speedup": speedup}

    methods = {"ours/standard": fig(1.0, 20.0, 1.0), "ours/ngram@k4": fig(1.3, 22.0, 1.1),
               "ours/eagle@k4": fig(2.6, 35.0, 1.75), "ours/eagle:tree@k4": fig(2.9, 33.0, 1.65),
               "ours/medusa@k4": fig(1.5, 25.0, 1.25), "ours/medusa:tree@k4": fig(1.9, 24.0, 1.2),
               "ours/medusa:lookup@k4": fig(2.2, 30.0, 1.5)}
    overall = {"methods": methods}
    per_category = {"chat": {"methods": methods}, "rag": {"methods": {**methods, "ours/ngram@k4": fig(3, 50.0, 2.5)}}}
    t = head_targets(overall, per_category)
    assert t["eagle_chain_k4_tokens_per_pass"] == {"value": 2.6, "goal": 2.5, "met": True}
    assert t["tree_tokens_per_pass"]["met"] is False and t["tree_tokens_per_pass"]["method"] == "ours/eagle:tree@k4"
    assert t["best_trained_speedup"]["value"] == 1.75
    # Medusa's goal reads its best method at k = 4, chain or tree, lookup-first variants left out
    assert t["medusa_k4_tokens_per_pass"] == {"value": 1.9, "method": "ours/medusa:tree@k4", "goal": 1.8, "met": True}
    assert t["vs_ngram_by_category"]["chat"]["ratio"] == pytest.approx(35 / 22)
    assert t["vs_ngram_by_category"]["chat"]["open_ended"] and not t["vs_ngram_by_category"]["rag"]["open_ended"]
    assert head_targets({"methods": {"ours/standard": methods["ours/standard"]}}, {}) is None
