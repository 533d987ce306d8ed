"""scripts/llama_cpp_compare.py without llama.cpp: its reading of llama-bench's and llama-lookup's output (captured
from the 0.3.16 sdist's build on the embedded GGUF), and its one sentence when no build exists."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("llama_cpp_compare", ROOT / "scripts" / "llama_cpp_compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the module runs
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


LOOKUP_OUTPUT = """\
main: build = 1 (unknown)
llama_model_loader: loaded meta data with 33 key-value pairs and 272 tensors from SmolLM2-135M-Instruct.Q4_1.gguf


<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
<|im_start|>user
Summarize the text.<|im_end|>
<|im_start|>assistant
The text says the sea is calm.

encoded   45 tokens in    0.031 seconds, speed: 1451.613 t/s
decoded   65 tokens in    0.412 seconds, speed:  157.767 t/s

n_draft      = 4
n_predict    = 65
n_drafted    = 48
t_draft_flat = 0.02 ms
t_draft      = 0.35 ms, 7.29 us per token, 137142.86 tokens per second
n_accept     = 30
accept       = 62.500%

target:

llama_perf_context_print:        load time =      52.10 ms
"""

LOOKUP_PLAIN = LOOKUP_OUTPUT.replace("n_draft      = 4", "n_draft      = 0").replace(
    "n_drafted    = 48", "n_drafted    = 0").replace("n_accept     = 30", "n_accept     = 0").replace(
    "accept       = 62.500%", "accept       = -nan%")

BENCH_OUTPUT = json.dumps([
    {"build_commit": "4227c9be", "build_number": 1, "cpu_info": "AMD EPYC", "model_type": "llama ?B Q4_1",
     "n_threads": 2, "n_prompt": 64, "n_gen": 0, "avg_ts": 812.5, "stddev_ts": 11.25,
     "samples_ts": [800.0, 812.5, 825.0]},
    {"build_commit": "4227c9be", "build_number": 1, "cpu_info": "AMD EPYC", "model_type": "llama ?B Q4_1",
     "n_threads": 2, "n_prompt": 0, "n_gen": 64, "avg_ts": 120.25, "stddev_ts": 2.5,
     "samples_ts": [118.0, 120.25, 122.5]},
], indent=2)


def test_lookup_report_is_read(compare):
    figures = compare.parse_lookup(LOOKUP_OUTPUT)
    assert (figures.decoded, figures.draft, figures.drafted, figures.accepted) == (65, 4, 48, 30)
    assert figures.seconds == pytest.approx(0.412)
    assert figures.tokens_per_s == pytest.approx(157.767)
    assert figures.acceptance_rate == pytest.approx(0.625)


def test_lookup_without_drafting_has_no_acceptance_rate(compare):
    figures = compare.parse_lookup(LOOKUP_PLAIN)
    assert (figures.draft, figures.drafted, figures.accepted, figures.acceptance_rate) == (0, 0, 0, None)


def test_lookup_output_without_its_report_is_one_sentence(compare):
    with pytest.raises(ValueError, match=r"^llama-lookup's output has no 'decoded' line") as error:
        compare.parse_lookup("llama_model_load: error loading model\n")
    assert str(error.value).count(".") >= 1 and "\n" not in str(error.value)


def test_bench_json_is_read(compare):
    got = compare.parse_bench("warning: some log line\n" + BENCH_OUTPUT)
    assert got["tg64"]["tokens_per_s"] == 120.25
    assert got["tg64"]["samples"] == [118.0, 120.25, 122.5]
    assert got["pp64"] == {"tokens_per_s": 812.5, "stddev": 11.25, "samples": [800.0, 812.5, 825.0], "threads": 2}
    assert got["build"]["commit"] == "4227c9be"


def test_bench_text_table_is_refused(compare):
    with pytest.raises(ValueError, match=r"run it with -o json"):
        compare.parse_bench("| model | size | params | backend | threads | test | t/s |\n")


def test_no_build_is_one_sentence(compare, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path))
    assert compare.main(["--threads", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.endswith(".")
    assert err.startswith(f"llama.cpp is not built in {tmp_path / 'llama.cpp'} (no llama-bench, llama-lookup)")
    assert "python scripts/llama_cpp_compare.py --build" in err
    assert not (tmp_path / "llama.cpp").exists()  # nothing downloaded or built without --build


def test_a_built_tool_is_found(compare, tmp_path):
    for path in compare.tool_paths(tmp_path).values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    assert compare.missing_build_message(tmp_path) is None


def test_table_puts_the_ratio_and_both_speedups_side_by_side(compare):
    medians = {"llama.tg64": 120.0, "llama.pp64": 800.0, "ours.standard.float32": 30.0, "ours.standard.int4": 60.0,
               "llama.lookup.chat-1.tokens_per_s": 150.0, "llama.lookup.chat-1.speedup": 1.25,
               "llama.lookup.chat-1.acceptance_rate": 0.5, "llama.lookup.chat-1.standard_tokens_per_s": 120.0,
               "ours.ngram.chat-1.tokens_per_s": 90.0, "ours.ngram.chat-1.speedup": 1.5,
               "ours.ngram.chat-1.acceptance_rate": 0.6, "ours.ngram.chat-1.standard_tokens_per_s": 60.0}
    text = compare.table(medians, ["float32", "int4"], ["chat-1"], 64, "int4")
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    assert rows["float32"][1:] == ["30.0", "4.00x"]
    assert rows["int4"][1:] == ["60.0", "2.00x"]
    assert rows["chat-1"][1:] == ["150.0", "1.25x", "0.50", "90.0", "1.50x", "0.60", "2.00x"]
