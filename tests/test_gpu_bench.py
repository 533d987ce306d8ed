"""scripts/gpu_bench.py in its CPU mode on the tiny target (``--device cpu --quick``): it runs end to end with only
torch, transformers and specviz (no gradio, no plotly), writes one report (JSON + Markdown) with the kernel figures
and the suite's tokens/s, speedups with their spread, tokens per pass and exactness per method; float32 greedy ids are
standard decoding's; the offload section holds both verify curves (whole, layers offloaded to disk), the implied
speedups at the suite's tokens per pass and a speculative run on the offloaded target whose ids are standard
decoding's of it. Without CUDA, ``--device cuda`` stops with one sentence; so do a missing --gguf file and, on a
checkout without the graph path, ``--path graphs``."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_bench.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_bench  # noqa: E402  (imports no torch / transformers / gradio at module level)

pytestmark = pytest.mark.slow

DRAFTERS = "ngram,suffix,lookahead"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", SPECVIZ_TUNE="0")
    return env


def _run(*flags: str, timeout: int = 300) -> subprocess.CompletedProcess:
    code = ("import runpy, sys; sys.argv = ['gpu_bench.py', *sys.argv[1:]]\n"
            "try:\n    runpy.run_path('scripts/gpu_bench.py', run_name='__main__')\n"
            "finally:\n    print('UI', sorted({m.split('.')[0] for m in sys.modules} & {'app', 'gradio', 'plotly'}), "
            "file=sys.stderr)")
    return subprocess.run([sys.executable, "-c", code, *flags], capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=ROOT)


@pytest.fixture(scope="module")
def quick_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-bench")
    proc = _run("--device", "cpu", "--quick", "--target", str(tiny_model_dir), "--drafters", DRAFTERS,
                "--prompts", "3", "--threads", "1", "--path", "eager", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc, json.loads((out / "gpu_bench.json").read_text()), out


def test_report_has_the_kernel_and_the_suite(quick_run):
    proc, report, out = quick_run
    assert "UI []" in proc.stderr  # nothing from the app, gradio or plotly was imported
    assert report["complete"] is True and report["errors"] == [] and report["quick"] is True
    assert report["environment"]["device"] == "cpu" and report["path"] == "eager"
    run = report["runs"]["float32"]
    assert "float32" in run["target"]
    rows = run["kernel"]["rows"]
    assert [r["context"] for r in rows][0] == 64 and len(rows) == 2
    for row in rows:
        assert row["step_ms"] > 0 and row["floor_ms"] > 0
        assert list(row["verify_cost"]) == [str(k) for k in range(1, 9)]  # T(k+1)/T(1), k = 1..8, both contexts
        assert all(v > 0 for v in row["verify_cost"].values())
    full = run["suite_full"]
    assert [p["id"] for p in full["prompts"]] == ["chat-1", "translation-1", "summarization-1"]  # round-robin
    assert all(p["dtype"] == "float32" for p in full["prompts"])
    methods = run["suite"]["methods"]
    assert set(methods) == {"ours/standard"} | {f"ours/{d}@auto" for d in DRAFTERS.split(",")}
    for name, m in methods.items():
        assert m["tokens_per_s"] > 0 and m["tokens_per_pass"] >= 1.0
        if name != "ours/standard":
            assert m["ids_identical_to_standard"] is True  # float32 greedy: exact
            low, high = m["speedup_range"]
            assert 0 < low <= high and m["speedup"] > 0
    assert set(run["suite"]["categories"]) == {"chat", "translation", "summarization"}
    assert run["suite"]["divergences"] == []


def test_offload_section_has_both_curves_and_exact_ids(quick_run):
    proc, report, out = quick_run
    section = report["runs"]["float32"]["offload"]
    assert section["where"] == "disk" and "disk (streamed)" in section["labels"]["offloaded"]
    assert set(section["figures"]) == {"memory", "offloaded"}
    for curve in section["figures"].values():
        assert list(curve) == [str(n) for n in range(1, 10)]  # T(n)/T(1), n = 1..9
        assert curve["1"]["ratio"] == 1.0 and all(p["ms"] > 0 and p["ratio"] > 0 for p in curve.values())
    ex = section["exactness"]
    assert ex["ids_identical"] is True and ex["ids_identical_to_whole"] is True and ex["first_divergence"] is None
    assert ex["drafted"] > 0  # drafts were verified on the offloaded target
    assert section["speedups_at"] == "suite"
    assert {row["method"] for row in section["speedups"]} == {f"ours/{d}@auto" for d in DRAFTERS.split(",")}
    for row in section["speedups"]:
        assert row["tokens_per_pass"] >= 1.0 and row["memory"]["speedup"] > 0 and row["offloaded"]["speedup"] > 0
    assert not (out / "offload").exists()  # the offload folder is removed after the section
    assert "### Offload: whole on the device vs decoder layers offloaded to disk" in report["markdown"]
    assert "Flatter: " in report["markdown"] and "ids = its standard decoding: yes" in report["markdown"]


def test_offload_speedups_without_a_suite():
    import gpu_bench_offload as offload

    curve = {str(n): {"ms": 10.0 + n, "ratio": (10.0 + n) / 11.0} for n in range(1, 10)}
    section = offload.add_speedups({"figures": {"memory": curve, "offloaded": curve}}, None)
    assert section["speedups_at"] == "k=4" and [r["tokens_per_pass"] for r in section["speedups"]] == [1, 2, 3, 4, 5]
    assert section["speedups"][4]["memory"]["ratio"] == pytest.approx(15.0 / 11.0)  # T(5)/T(1) at k = 4
    assert section["speedups"][4]["memory"]["speedup"] == pytest.approx(5 * 11.0 / 15.0)
    assert offload.ratio_at(curve, 1.5) == pytest.approx(12.5 / 11.0)  # read between n = 2 and n = 3
    assert offload.ratio_at(curve, 20) == curve["9"]["ratio"]  # clamped to the curve


def test_markdown_is_printed_and_written(quick_run):
    proc, report, out = quick_run
    text = (out / "gpu_bench.md").read_text()
    assert text == report["markdown"] and text.strip() in proc.stdout
    assert "one-token step and T(k+1)/T(1)" in text and "| 64 |" in text
    assert "| ours/ngram@auto |" in text and "Speedup per category" in text
    assert "(one prompt: no spread)" in text  # one prompt per category: no spread claimed


def test_setup_errors_are_one_sentence(tmp_path):
    checks = [("--gguf", str(tmp_path / "missing.gguf"), "--device", "cpu")]
    if not torch.cuda.is_available():
        checks.append(("--device", "cuda"))
    if importlib.util.find_spec(gpu_bench.GRAPHS_MODULE) is None:
        checks.append(("--device", "cpu", "--path", "graphs"))
    for flags in checks:
        proc = _run(*flags, "--out", str(tmp_path / "r"), timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("UI")]
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpu_bench: "), (flags, proc.stderr)
        assert "UI []" in proc.stderr


def test_a_drafter_that_cannot_be_made_is_left_out(tiny_model_dir, tmp_path):
    """The tiny target has no trained heads: eagle is left out (an error in the report, exit status 1), the rest runs."""
    out = tmp_path / "r"
    proc = _run("--device", "cpu", "--quick", "--target", str(tiny_model_dir), "--drafters", "ngram,eagle",
                "--prompts", "1", "--threads", "1", "--skip-kernel", "--skip-offload", "--out", str(out))
    report = json.loads((out / "gpu_bench.json").read_text())
    assert proc.returncode == 1 and report["complete"] is False
    assert [e["where"] for e in report["errors"]] == ["float32: drafter eagle"]
    assert "No trained eagle heads fit" in report["errors"][0]["error"]
    assert set(report["runs"]["float32"]["suite"]["methods"]) == {"ours/standard", "ours/ngram@auto"}
    assert "float32: drafter eagle: HeadsError: No trained eagle heads fit" in report["markdown"]


def test_round_robin_and_spread_cells():
    from specviz.analysis.prompts import Prompt

    prompts = [Prompt(f"{c}-{i}", c, "x") for c in ("a", "b", "c") for i in (1, 2, 3)]
    assert [p.id for p in gpu_bench.round_robin(prompts, 2)] == ["a-1", "b-1", "c-1", "a-2", "b-2", "c-2"]
    assert [p.id for p in gpu_bench.round_robin(prompts, 2, limit=4)] == ["a-1", "b-1", "c-1", "a-2"]
    assert gpu_bench.spread_cell(1.2, [1.1, 1.3]) == "1.20x (1.10-1.30, 2 prompts)"
    assert gpu_bench.spread_cell(1.02, [0.9, 1.1]) == "1.02x (0.90-1.10, 2 prompts, spread crosses 1)"
    assert gpu_bench.spread_cell(None, []) == "-"


def test_out_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert gpu_bench.out_dir(None) == tmp_path
    monkeypatch.delenv("OUT")
    assert gpu_bench.out_dir(None) == Path("gpu_bench_report")
    assert gpu_bench.out_dir(str(tmp_path / "x")) == tmp_path / "x"
