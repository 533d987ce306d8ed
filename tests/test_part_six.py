"""Part six of the distillation data (specviz.training.prompts_part6): texts the target writes itself (sampled), then
tasks over them; built in two committed sets, the second from the first's shards."""

from __future__ import annotations

import json
from collections import Counter

from specviz.cli.main import main
from specviz.training.distill import ALL_FORMS, FORMS_5, FORMS_6, PROMPT_SETS, CorpusSettings, corpus_prompts
from specviz.training.idshards import load_id_shard
from specviz.training.prompts_part6 import (DOC_FORMS_6, FORM_BASE_6, TASK_FORMS_6, part_six_doc_prompts,
                                            part_six_task_prompts)
from tests.test_train import _eight_word_runs, _suite_prompts

FRAMES = ("Use only the context to answer the question.", "Context:", "Question:", "Here is our conversation so far.",
          "User:", "Assistant:")  # the suite's frames, shared on purpose


def test_stage_one_asks_for_made_up_texts_in_turn_and_holds_the_suite_out():
    """Forms numbered after part five's, the twelve kinds of text in turn, all 2560 requests different, fixed for a
    seed and extended by a larger count; no suite prompt or eight-word run of one."""
    pairs = part_six_doc_prompts(2560)
    assert FORM_BASE_6 == 25 and ALL_FORMS[FORM_BASE_6 - 1] == FORMS_5[-1] and ALL_FORMS[25:] == FORMS_6
    assert part_six_doc_prompts(50) == pairs[:50] and part_six_doc_prompts(50, seed=1) != pairs[:50]
    assert corpus_prompts(CorpusSettings(num_prompts=30, prompt_set="part6-docs")) == pairs[:30]
    assert [ALL_FORMS[f] for f, _ in pairs[:12]] == list(DOC_FORMS_6)
    assert len({p for _, p in pairs}) == 2560
    suite = _suite_prompts(shared=True)
    suite_runs = set().union(*(_eight_word_runs(r["prompt"], FRAMES) for r in suite))
    ours = set().union(*(_eight_word_runs(p, FRAMES) for _, p in pairs))
    assert not ours & suite_runs, sorted(ours & suite_runs)[:3]


def test_stage_two_builds_one_task_per_text_around_the_text_itself():
    """Task i holds text i verbatim (in a written-out conversation after its request, in chat turns, as a document or
    context), or its first sentences to translate; forms take turns (4 follow-ups, 2 summaries, 2 questions, a
    translation, a rewrite in 10) and a Python function is always followed up."""
    requests = part_six_doc_prompts(40)
    texts = [f"Text number {i} was written for this test. It has a second sentence.\nAnd a third line {i}."
             for i in range(40)]
    tasks = part_six_task_prompts(texts)
    assert len(tasks) == 40 and part_six_task_prompts(texts[:20]) == tasks[:20]
    counts = Counter(ALL_FORMS[f] for f, _ in tasks)
    assert set(counts) <= set(TASK_FORMS_6) and counts["followup-written"] + counts["followup-turns"] >= 16
    for i, ((form, prompt), (_, request)) in enumerate(zip(tasks, requests)):
        name = ALL_FORMS[form]
        if name == "followup-turns":
            assert prompt[:2] == (("user", request), ("assistant", texts[i])) and prompt[2][0] == "user"
        elif name == "followup-written":
            assert prompt.startswith(f"Here is our conversation so far.\n\nUser: {request}\nAssistant: {texts[i]}\n\n")
        elif name == "text-translation":
            assert prompt.startswith("Translate into ") and f"Text number {i} was written for this test." in prompt
        else:
            assert texts[i] in prompt
        if "Python function" in request:
            assert name.startswith("followup")
    ours = set().union(*(_eight_word_runs(p if isinstance(p, str) else " | ".join(t for _, t in p), FRAMES)
                         for _, p in part_six_task_prompts(["A short text."] * 400)))
    suite_runs = set().union(*(_eight_word_runs(r["prompt"], FRAMES) for r in _suite_prompts(shared=True)))
    assert not ours & suite_runs, sorted(ours & suite_runs)[:3]


def test_the_data_command_makes_both_stages_and_names_a_missing_first_stage(tiny_model_dir, tmp_path, capsys):
    """`train data --prompt-set part6` before its documents exist says so in one sentence; after `part6-docs`, its
    shards hold the tasks over the target's own texts (decoded from the first stage's shards), with forms 37.."""
    from transformers import AutoTokenizer

    from specviz.cli.train import PROMPT_SET_NAMES

    assert PROMPT_SET_NAMES == PROMPT_SETS
    base = ["train", "data", "--target", str(tiny_model_dir), "--prompts", "4", "--batch-size", "2",
            "--max-new-tokens", "3", "--threads", "1", "--device", "cpu", "--out", str(tmp_path)]
    assert main(base + ["--prompt-set", "part6", "--shards", "0"]) == 2
    assert "needs shard 0 of" in capsys.readouterr().err
    assert main(base + ["--prompt-set", "part6-docs"]) == 0
    docs = json.loads((tmp_path / "part6-docs" / "manifest.json").read_text())
    assert docs["recipe"]["prompt_set"] == "part6-docs" and list(docs["shards"]) == ["0000", "0001"]
    assert main(base + ["--prompt-set", "part6"]) == 0
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    doc_shards = [load_id_shard(tmp_path / "part6-docs" / f"ids-000{n}.npz") for n in (0, 1)]
    texts = [tokenizer.decode(s["ids"][int(s["offsets"][r]) + int(s["prompt_lens"][r]):int(s["offsets"][r + 1])]
                              .tolist(), skip_special_tokens=True) for s in doc_shards for r in range(2)]
    task = load_id_shard(tmp_path / "part6" / "ids-0000.npz")
    assert task["forms"].tolist() == [FORM_BASE_6 + FORMS_6.index(ALL_FORMS[f]) for f, _ in
                                      part_six_task_prompts(texts)[:2]]
    assert [ALL_FORMS[f] for f in task["forms"].tolist()] == ["followup-written", "text-summary"]
    first = tokenizer.decode(task["ids"][:int(task["prompt_lens"][0])].tolist())
    assert part_six_doc_prompts(1)[0][1] in first and texts[0].strip() in first
    capsys.readouterr()
    assert main(base[:5] + ["6"] + base[6:] + ["--prompt-set", "part6", "--shards", "0:3"]) == 2
    assert "part6 shard 2 needs shard 2 of" in capsys.readouterr().err


def test_training_on_part_six_without_its_committed_set_is_refused_in_one_sentence(capsys):
    """Part six's prompts need its first stage's texts, so `train eagle --prompt-set part6` asks for --data."""
    assert main(["train", "eagle", "--prompt-set", "part6", "--threads", "1"]) == 2
    assert "train with --data data/distill/part6" in capsys.readouterr().err
