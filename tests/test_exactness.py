"""Exactness flagged where it is not held (issue 36), and the target's dtype chosen and named: the divergence record
and its sentence (specviz.analysis.exactness), ``--dtype`` on generate and bench with the dtype in every record,
the bench rows' comparison with our standard decoding, ``SPECVIZ_DTYPE`` for the app, TF32 off, and a CLI that
imports no UI library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specviz.analysis import bench
from specviz.analysis.bench_report import format_bench
from specviz.analysis.exactness import compare_ids, divergence_line, divergence_reason, first_divergence
from specviz.analysis.prompts import load_prompts
from specviz.cli import _summary, main
from specviz.runtime.models import exact_float32_on_cuda, operator_dtype

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The quick brown fox jumps over the lazy dog while the cat"


def test_first_divergence_and_its_record():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert bench.first_difference is first_divergence  # one source
    same = compare_ids([4, 5, 6], [0.5, 0.25, 1.0], [4, 5, 6], "bfloat16")
    assert same == {"ids_identical_to_standard": True, "first_divergence": None, "top2_gap": None,
                    "matching_prefix": 3, "dtype": "bfloat16", "reason": None}
    assert divergence_line(same) == "identical ids to standard decoding"
    differ = compare_ids([4, 5, 6], [0.5, 0.25, 1.0], [4, 7, 6], "bfloat16")
    assert differ["first_divergence"] == 1 and differ["top2_gap"] == 0.25 and differ["matching_prefix"] == 1
    assert divergence_line(differ) == ("ids differ from standard decoding at token 1 (top-2 gap 0.25, bfloat16: "
                                       "verification and step run different kernels)")
    assert compare_ids([4, 5], [], [4], "float32")["top2_gap"] is None  # gaps unknown: None, not a guess
    assert "not expected" in divergence_reason("float32") and "kernels" in divergence_reason("float16")


@pytest.mark.kernels  # bfloat16 verification rows vs one-token steps: the tiny target's gaps keep the ids equal
def test_generate_names_the_dtype_and_compares_in_it(capsys, tiny_model_dir):
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "12",
                 "--device", "cpu", "--dtype", "bfloat16", "--drafter", "ngram", "--compare", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    run = json.loads(out)
    assert run["dtype"] == "bfloat16" and "bfloat16" in run["target"]
    assert run["compare"]["ids_identical"] is True and run["compare"]["first_difference"] is None
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "4",
                 "--device", "cpu", "--dtype", "int8", "--json"])
    assert code == 2 and "invalid choice" in capsys.readouterr().err


def test_the_text_output_says_where_and_why_ids_differ():
    record = {"drafter": "ngram", "k": 4, "seed": 0, "num_tokens": 20, "finish_reason": "length", "wall_s": 1.0,
              "tokens_per_s": 20.0, "ttft_ms": 10.0, "target_passes": 10, "tokens_per_pass": 1.9,
              "expected_tokens_per_pass": 2.0, "drafted": 20, "accepted": 9, "acceptance_rate": 0.45, "alpha": 0.5,
              "compare": {"ids_identical": False, "greedy": True, "first_difference": 11, "near_tie_gap": 0.25,
                          "top2_gap": 0.25, "dtype": "bfloat16",
                          "reason": "bfloat16: verification and step run different kernels",
                          "baseline_tokens_per_s": 18.0, "decode_speedup_verdict": "too short", "speedup": 1.1,
                          "decode_speedup_reading": "too short to tell"}}
    text = _summary(record, "tiny (bfloat16)")
    said = divergence_line({"ids_identical_to_standard": False, "first_divergence": 11, "top2_gap": 0.25,
                            "reason": "bfloat16: verification and step run different kernels"})
    assert said in text  # the sentence's wording: test_first_divergence_and_its_record


@pytest.mark.kernels
def test_bench_rows_compare_with_standard_decoding(tiny_model_dir, tmp_path):
    from specviz.runtime.models import load_model

    target = load_model(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "p1", "category": "chat", "prompt": PROMPT}) + "\n"
                     + json.dumps({"id": "p2", "category": "qa", "prompt": "the cat sat on the mat"}) + "\n")
    settings = bench.BenchSettings(drafters=("ngram",), ks=(3,), max_new_tokens=10, repeats=1, warmup_tokens=0,
                                   compare_transformers=False)
    result = bench.run_bench(target, load_prompts(suite), settings, deadline_s=0.0)
    assert result["dtype"] == "bfloat16" and result["skipped_prompts"] == ["p2"]  # the budget: one prompt, then stop
    assert list(result["categories"]) == ["chat"]
    row = result["prompts"][0]
    assert row["dtype"] == "bfloat16"
    res = row["results"]["ours/ngram@k3"]
    assert res["ids_identical_to_standard"] is True and res["first_divergence"] is None and res["top2_gap"] is None
    assert result["ids_identical_to_standard"] is True
    assert "ids identical to our standard decoding (bfloat16): yes" in format_bench(result)
    # a row whose ids differ: the first divergence, the baseline's gap there and why, in the row and the text
    results = {"ours/standard": {"token_ids": [1, 2, 3]}, "ours/ngram@k3": {"token_ids": [1, 2, 9]}}
    bench._compare_to_standard(results, (0.5, 0.4, 0.03), "bfloat16", greedy=True)
    assert results["ours/ngram@k3"]["first_divergence"] == 2 and results["ours/ngram@k3"]["top2_gap"] == 0.03
    assert "different kernels" in results["ours/ngram@k3"]["divergence_reason"]
    result["prompts"][0]["results"]["ours/ngram@k3"].update(results["ours/ngram@k3"])
    said = divergence_line(results["ours/ngram@k3"] | {"reason": results["ours/ngram@k3"]["divergence_reason"]})
    assert "token 2 (top-2 gap 0.03, bfloat16" in said and f"p1 ours/ngram@k3: {said}" in format_bench(result)


def test_operator_dtype_setting():
    assert operator_dtype({}) is None and operator_dtype({"SPECVIZ_DTYPE": "auto"}) is None
    assert operator_dtype({"SPECVIZ_DTYPE": "bf16"}) == "bfloat16"
    assert operator_dtype({"SPECVIZ_DTYPE": " Float16 "}) == "float16"
    assert operator_dtype({"SPECVIZ_DTYPE": "float32"}) == "float32"
    assert operator_dtype({"SPECVIZ_DTYPE": "int4"}) is None  # unreadable: logged, the device's default


def test_the_app_loads_its_target_in_the_operator_dtype(monkeypatch, tiny_model_dir):
    import app.device as device
    import specviz.measure.tuning

    monkeypatch.setenv("SPECVIZ_DTYPE", "bfloat16")
    monkeypatch.setattr(specviz.measure.tuning, "tune", lambda loaded, progress=None, **_: type("T", (), {"summary": str})())
    loaded = device.load_target(str(tiny_model_dir))
    assert loaded.dtype == torch.bfloat16 and "bfloat16" in loaded.label


def test_tf32_is_turned_off():
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        exact_float32_on_cuda()
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


@pytest.mark.slow
def test_the_cli_imports_no_ui_library(tiny_model_dir):
    """The GPU machine has no gradio and no plotly: generate and bench must not need them."""
    code = ("import sys; from specviz.cli import main\n"
            f"rc = [main(['generate', '--target', {str(tiny_model_dir)!r}, '--prompt', 'hi', '--max-new-tokens', '3',"
            " '--device', 'cpu', '--json', '--compare']), main(['bench', '--target', "
            f"{str(tiny_model_dir)!r}, '--kernel', '--device', 'cpu', '--json', '--drafters', 'ngram'])]\n"
            "print('RESULT', rc, sorted({m.split('.')[0] for m in sys.modules} & {'app', 'gradio', 'plotly'}))")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "SPECVIZ_TUNE": "0"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert "RESULT [0, 0] []" in done.stdout, done.stdout[-1000:] + done.stderr[-2000:]
