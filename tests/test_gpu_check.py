"""scripts/gpu_check.py in its CPU mode (``--device cpu --quick``, tiny stand-in configs): it runs end to end with only
torch, transformers and specviz, writes one report whose keys the GPU run fills the same way, and speculative
decoding's float32 greedy output equals standard decoding's. Plus: without CUDA, ``--device cuda`` stops with one
sentence, and the script loads nothing from the app, gradio or plotly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_check  # noqa: E402  (imports no torch / transformers at module level)

pytestmark = pytest.mark.slow

MODELS = ("smollm2-135m", "smollm2-1.7b")
DTYPES = ("float32", "bfloat16")
CONTEXTS = ("64", "1024")
KS = [str(k) for k in range(1, 9)]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc, json.loads((out / "gpu_check.json").read_text()), out


def test_report_has_every_section(quick_run):
    _, report, _ = quick_run
    assert report["quick"] is True and report["complete"] is True
    assert report["errors"] == [] and report["skipped"] == []
    env = report["environment"]
    assert {"torch", "transformers", "cuda_available", "device", "device_name", "python"} <= env.keys()
    assert report["precision"]["float32_matmul_precision"] == "highest"
    assert report["bandwidth"]["gb_per_s"] > 0
    assert set(report["models"]) == set(MODELS)
    for name in MODELS:
        entry = report["models"][name]
        assert entry["params"] > 0 and entry["config"]["vocab_size"] > 0
        assert set(entry["dtypes"]) == set(DTYPES)
        for dtype in DTYPES:
            result = entry["dtypes"][dtype]
            assert result["weight_bytes"] > 0 and result["floor_ms"] > 0
            assert set(result["step"]) == set(CONTEXTS)
            for ctx in CONTEXTS:
                step = result["step"][ctx]
                assert step["eager_ms"] > 0 and step["eager_x_floor"] > 0 and step["kv_bytes"] > 0
                assert "graph_ms" not in step  # no CUDA graphs on the CPU
                eager = result["verify"][ctx]["eager"]
                assert eager["t1_ms"] == step["eager_ms"]
                assert list(eager["ratio"]) == KS and all(r > 0 for r in eager["ratio"].values())
                assert result["verify"][ctx]["graph"] is None
                assert "skipped" in result["graph"]["slab"][ctx]
                static = result["graph"]["static"][ctx]
                assert static["captured"] is False and static["check_vs_engine"]["tokens"] > 0
            assert set(result["exactness"]) == {"early-exit", "n-gram"}


def test_float32_greedy_output_is_exact(quick_run):
    _, report, _ = quick_run
    for name in MODELS:
        result = report["models"][name]["dtypes"]["float32"]
        for drafter, record in result["exactness"].items():
            assert record["identical"], (name, drafter, record)
            assert record["first_divergence"] is None and record["matching_prefix"] == record["tokens"]
        # the StaticCache decode step (the graph's body, run eagerly here) decodes as the engine does
        for ctx, static in result["graph"]["static"].items():
            assert static["check_vs_engine"]["identical"], (name, ctx, static)
    # the early-exit drafter of these models is right only part of the time: accepted and rejected tokens both occur
    early = [report["models"][n]["dtypes"]["float32"]["exactness"]["early-exit"]["acceptance"] for n in MODELS]
    assert all(0.0 < a < 1.0 for a in early), early


def test_markdown_is_printed_and_written(quick_run):
    proc, report, out = quick_run
    text = (out / "gpu_check.md").read_text()
    assert text == report["markdown"]
    assert "QUICK" in text and "## Verification cost T(k+1)/T(1)" in text and "## Greedy exactness" in text
    assert "| smollm2-1.7b | bfloat16 | early-exit |" in text
    assert text.strip() in proc.stdout


def test_without_cuda_it_stops_with_one_sentence_and_loads_no_ui():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code = ("import sys; sys.path.insert(0, 'scripts'); import gpu_check; rc = gpu_check.main(['--device', 'cuda']); "
            "print(rc, sorted({m.split('.')[0] for m in sys.modules} & {'app', 'gradio', 'plotly'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env(),
                          cwd=ROOT)
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "CUDA" in lines[0], proc.stderr


def test_out_path(monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert gpu_check.out_path(None) == tmp_path / "gpu_check.json"
    monkeypatch.delenv("OUT")
    assert gpu_check.out_path(None) == Path("gpu_check_report") / "gpu_check.json"
    assert gpu_check.out_path(str(tmp_path / "r.json")) == tmp_path / "r.json"
    assert gpu_check.out_path(str(tmp_path / "dir")) == tmp_path / "dir" / "gpu_check.json"


def test_first_divergence():
    assert gpu_check.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert gpu_check.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert gpu_check.first_divergence([1, 2, 3], [1, 2]) == 2
