"""The training recipe end to end on the tiny target: data shards, resume, vocabulary, head files."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from specviz.training.distill import (PART_ONE, CorpusSettings, distill_prompts, extract_features, generate_corpus,
                             load_corpus)
from specviz.drafters.registry import make_drafter
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.drafters.networks import load_heads, read_metadata
from specviz.models import encode_prompt
from specviz.training.train import TrainSettings, _medusa_rows, draft_vocabulary, run_training

SMALL = CorpusSettings(num_prompts=6, batch_size=3, max_new_tokens=12, seed=0)


def test_prompt_set_is_fixed_and_varied():
    a, b = distill_prompts(200), distill_prompts(200)
    assert a == b and distill_prompts(100) == a[:100]  # a larger set extends the smaller one (resume)
    assert len(set(a)) > 120
    assert any("Translate" in p for p in a) and any("Python" in p for p in a) and any("Summarize" in p for p in a)


def test_part_two_prompts_are_all_different_and_cover_the_new_tasks():
    prompts = distill_prompts(PART_ONE + 600)
    part_two = prompts[PART_ONE:]
    assert prompts[:PART_ONE] == distill_prompts(PART_ONE)  # part one is the original recipe, unchanged
    assert len(set(part_two)) == 600 and not set(part_two) & set(prompts[:PART_ONE])  # greedy: no repeats
    for marker in ("Use only the context", "def ", "Translate into", "Summarize", "Answer in"):
        assert any(marker in p for p in part_two), marker
    assert all("`=`" not in p for p in part_two)  # a rename names a real variable


@pytest.mark.kernels  # batched, left-padded generation vs one sequence at a time: other kernel shapes
def test_shards_after_the_sampled_prompts_are_greedy(tiny_target, tmp_path):
    settings = CorpusSettings(num_prompts=4, batch_size=2, max_new_tokens=10, seed=0, sampled_prompts=2)
    paths = generate_corpus(tiny_target, tmp_path, settings)
    shard = load_file(str(paths[1]))  # prompts 2 and 3: greedy
    offsets, ids = shard["offsets"].tolist(), shard["ids"].tolist()
    prompts = distill_prompts(4)[2:]
    for row, prompt in enumerate(prompts):
        encoded = encode_prompt(tiny_target.tokenizer, prompt)
        seq = ids[offsets[row]:offsets[row + 1]]
        assert seq[:len(encoded)] == encoded and int(shard["prompt_lens"][row]) == len(encoded)
        cfg = GenerationConfig(max_new_tokens=10, k=1)
        base = collect(standard_generate(tiny_target, encoded, cfg), tiny_target.tokenizer, encoded)
        assert seq[len(encoded):] == list(base.token_ids)  # the target's greedy reply, token for token


@pytest.mark.kernels  # top1 comes from a right-padded batch, the check from one sequence: other kernel shapes
def test_data_shards_resume_and_line_up(tiny_target, tmp_path):
    paths = generate_corpus(tiny_target, tmp_path, SMALL)
    assert [p.name for p in paths] == ["ids-0000.safetensors", "ids-0001.safetensors"]
    stamp = paths[0].stat().st_mtime_ns
    generate_corpus(tiny_target, tmp_path, SMALL)  # resume: nothing is regenerated
    assert paths[0].stat().st_mtime_ns == stamp
    extract_features(tiny_target, tmp_path)
    corpus = load_corpus(tmp_path)
    shard = load_file(str(paths[0]))
    assert shard["offsets"].numel() == 4 and int(shard["offsets"][-1]) == shard["ids"].numel()
    assert corpus.features.shape == (corpus.num_positions, tiny_target.model.config.hidden_size)
    # the stored label is the target's greedy next token after each position
    a, b = next(corpus.sequences())
    with torch.no_grad():
        logits = tiny_target.model(input_ids=corpus.ids[a:b][None]).logits[0]
    assert torch.equal(logits.argmax(-1), corpus.top1[a:b])
    vocab, coverage = draft_vocabulary(corpus, 5)
    assert vocab.numel() == 5 and 0 < coverage <= 1 and torch.equal(vocab, vocab.sort().values)
    rows, ys, inside = _medusa_rows(corpus, [(a, b, a)], 2, torch.arange(tiny_target.vocab_size))
    assert rows.tolist() == list(range(a, b - 1))
    assert ys[0, 0] == corpus.top1[a + 1] and ys[0, 1] == corpus.top1[a + 2]
    assert inside[-1, 0] and not inside[-1, 1] and ys[-1, 1] == -100


def test_training_writes_heads_that_draft_exactly(tiny_target, tmp_path):
    settings = TrainSettings(epochs=1, batch_tokens=64, vocab_size=40, holdout=0.2)
    prompt = tiny_target.tokenizer.encode("the cat sat on the mat", add_special_tokens=False)
    cfg = GenerationConfig(max_new_tokens=20, k=3)
    base = collect(standard_generate(tiny_target, prompt, cfg), tiny_target.tokenizer, prompt)
    for kind in ("eagle", "medusa"):
        out = tmp_path / f"{kind}.safetensors"
        report = run_training(kind, tiny_target, out, settings=settings, corpus_settings=SMALL, folder=tmp_path / "d")
        meta = read_metadata(out)
        assert meta["kind"] == kind and meta["info"]["vocab"] == 40
        assert 0 <= meta["info"]["vocab_coverage"] <= 1
        if kind == "eagle":
            assert 0 <= report["holdout_acc_token1"] <= 1 and 0 <= report["holdout_acc_token2"] <= 1
        else:
            assert len(report["holdout_acc_per_head"]) == settings.medusa_heads
        head = load_heads(out, tiny_target.model, kind)
        assert head.vocab_ids.numel() == 40
        for tree in (0, 4):
            drafter = make_drafter(kind, tiny_target, heads_path=str(out), tree_nodes=tree)
            spec = collect(speculative_generate(tiny_target, drafter, prompt, cfg), tiny_target.tokenizer, prompt)
            assert spec.token_ids == base.token_ids
