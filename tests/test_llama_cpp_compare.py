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


# the close of llama-lookup's stderr (rag-1 of the suite, --draft-max 4, then 0), as captured
LOOKUP_OUTPUT = """\
llama_model_loader: - kv  21:               tokenizer.ggml.add_bos_token bool             = false
encoded  112 tokens in    0.144 seconds, speed: 1234.380 t/s
decoded   66 tokens in    0.491 seconds, speed:  134.446 t/s

n_draft      = 4
n_predict    = 66
n_drafted    = 33
t_draft_flat = 0.06 ms
t_draft      = 0.44 ms, 13.24 us per token, 75514.87 tokens per second
n_accept     = 19
accept       = 57.576%

target:

llama_perf_sampler_print:    sampling time =       1.61 ms /    66 runs   (    0.02 ms per token, 40866.87 tokens per second)
llama_perf_context_print:        load time =    1684.51 ms
llama_perf_context_print: prompt eval time =     287.79 ms /   154 tokens (    1.87 ms per token,   535.10 tokens per second)
llama_perf_context_print:        eval time =     337.51 ms /    37 runs   (    9.12 ms per token,   109.63 tokens per second)
"""

LOOKUP_PLAIN = """\
decoded   65 tokens in    0.605 seconds, speed:  107.514 t/s
n_draft      = 0
n_predict    = 65
n_drafted    = 0
n_accept     = 0
accept       = -nan%
"""

# llama-bench -p 64 -n 64 -t 2 -r 2 -o json, as captured on the loaded 2-core VM (one repetition stalled), keys abridged
BENCH_OUTPUT = """\
[
  {"build_commit": "unknown", "build_number": 0, "cpu_info": "Intel(R) Xeon(R) Processor",
   "model_type": "llama 256M Q4_1", "n_threads": 2, "defrag_thold": -1.000000, "n_prompt": 64, "n_gen": 0,
   "avg_ts": 143.778406, "stddev_ts": 182.537844, "samples_ts": [ 272.852, 14.7047 ]},
  {"build_commit": "unknown", "build_number": 0, "cpu_info": "Intel(R) Xeon(R) Processor",
   "model_type": "llama 256M Q4_1", "n_threads": 2, "defrag_thold": -1.000000, "n_prompt": 0, "n_gen": 64,
   "avg_ts": 0.986502, "stddev_ts": 0.572388, "samples_ts": [ 0.581763, 1.39124 ]}
]
"""


def test_lookup_report_is_read(compare):
    figures = compare.parse_lookup(LOOKUP_OUTPUT)
    assert (figures.decoded, figures.draft, figures.drafted, figures.accepted) == (66, 4, 33, 19)
    assert figures.seconds == pytest.approx(0.491)
    assert figures.tokens_per_s == pytest.approx(134.446)  # the decode phase's, not the perf lines' eval rate
    assert figures.acceptance_rate == pytest.approx(19 / 33)


def test_lookup_without_drafting_has_no_acceptance_rate(compare):
    figures = compare.parse_lookup(LOOKUP_PLAIN)
    assert (figures.decoded, figures.draft, figures.drafted, figures.accepted) == (65, 0, 0, 0)
    assert figures.acceptance_rate is None


def test_lookup_output_without_its_report_is_one_sentence(compare):
    with pytest.raises(ValueError, match=r"^llama-lookup's output has no 'decoded' line") as error:
        compare.parse_lookup("llama_model_load: error loading model\n")
    assert str(error.value).count(".") >= 1 and "\n" not in str(error.value)


def test_lookup_text_compared_without_its_draft_candidates(compare):
    # chat-1 at 1 thread, as captured: with --draft-max 4 the reply leaves the plain one at "Outdoor adventure"
    drafted = ("Day 1: Arrival\n\nDay - draft candidate: token=216\n - draft candidate: token=33\n 2: Outdoor "
               "adventure - draft candidate: token=198\n\n\n")
    plain = "Day 1: Arrival\n\nDay 2: Outdoor activity\n\n"
    assert not compare.same_reply(drafted, plain)
    assert compare.same_reply(drafted, "Day 1: Arrival\n\nDay 2: Outdoor adventure")
    assert compare.same_reply(drafted, "Day 1: Arrival\n\nDay 2: Outdoor")  # one ran a token past the other


def test_bench_json_is_read(compare):
    got = compare.parse_bench("warning: some log line\n" + BENCH_OUTPUT)
    assert got["tg64"]["samples"] == [0.581763, 1.39124]
    assert got["tg64"]["tokens_per_s"] == pytest.approx((0.581763 + 1.39124) / 2)  # the median of its repetitions
    assert got["pp64"] == {"tokens_per_s": pytest.approx((272.852 + 14.7047) / 2), "mean": 143.778406,
                           "stddev": 182.537844, "samples": [272.852, 14.7047], "threads": 2}
    assert got["build"] == {"commit": "unknown", "number": 0, "cpu": "Intel(R) Xeon(R) Processor",
                            "model_type": "llama 256M Q4_1"}


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
