"""The distilled draft model (specviz.drafters.distilled, specviz.training.draft_model) on the tiny target: files,
refusal of another target, exact greedy output, the sampling distribution, and the train command."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.cli.main import main
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.drafters.distilled import (DistilledDrafter, DraftModel, load_draft_model, read_draft_metadata,
                                        save_draft_model, spaced_layers)
from specviz.drafters.networks import HeadsError
from specviz.drafters.registry import describe, drafter_keys, make_drafter
from specviz.training.idshards import save_id_shard
from test_engine import _chi_square, _prompts


def _draft(target, layers=(0, 2), every=2, noise=0.02, seed=0):
    """A draft of target layers ``layers`` (noised, so it disagrees sometimes) over every ``every``-th token id."""
    vocab = torch.arange(0, target.vocab_size, every) if every > 1 else None
    draft = DraftModel(target.model, list(layers), vocab)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in draft.trainable():
            p.add_(noise * torch.randn_like(p))
    return draft


def _run(target, prompt, cfg, drafter=None):
    gen = standard_generate(target, prompt, cfg) if drafter is None else speculative_generate(target, drafter, prompt, cfg)
    return collect(gen, target.tokenizer, prompt)


def test_spaced_layers():
    assert spaced_layers(2, 30) == [0, 1] and spaced_layers(2, 30, "spaced") == [0, 29]
    assert spaced_layers(4, 30, "spaced") == [0, 10, 19, 29] and spaced_layers(1, 4, "spaced") == [0]
    with pytest.raises(ValueError, match="1..4 layers"):
        spaced_layers(5, 4)


def test_files_round_trip_and_refuse_another_target(tiny_target, tiny_draft, tmp_path):
    draft = _draft(tiny_target)
    path = save_draft_model(draft, tmp_path / "d.safetensors", tiny_target.model, {"steps": 3})
    meta = read_draft_metadata(path)
    assert meta["settings"] == {"source_layers": [0, 2]} and meta["info"] == {"steps": 3}
    names = set(__import__("safetensors").safe_open(str(path), "pt").keys())
    assert "norm.weight" in names and "vocab_ids" in names and not any("embed" in n for n in names)
    loaded = load_draft_model(path, tiny_target.model)
    assert loaded.num_layers == 2 and torch.equal(loaded.vocab_ids, draft.vocab_ids)
    w, v = loaded.layers[1].mlp.up_proj.weight, draft.layers[1].mlp.up_proj.weight
    assert torch.equal(w, v.detach().half().float())
    assert loaded.layers[1].self_attn.layer_idx == 1  # renumbered for the draft's own cache
    assert loaded.view.model.embed_tokens.weight is tiny_target.model.model.embed_tokens.weight  # shared
    with pytest.raises(HeadsError, match="distilled from another target") as caught:
        load_draft_model(path, tiny_draft.model)
    assert str(caught.value).count(". ") <= 1 and "\n" not in str(caught.value)
    with pytest.raises(HeadsError, match="not found"):
        load_draft_model(tmp_path / "missing.safetensors", tiny_target.model)
    assert isinstance(make_drafter("distilled", tiny_target, heads_path=str(path)), DistilledDrafter)
    from specviz.training.draft_model import SoftCorpus, _vocabulary

    labels = torch.tensor([[0], [2], [3], [4]])  # 3 of 4 greedy labels are even: inside the file's vocabulary
    corpus = SoftCorpus(torch.zeros(4, dtype=torch.long), torch.tensor([0, 4]), torch.tensor([1]), labels,
                        torch.ones(4, 1))
    vocab, coverage = _vocabulary(corpus, 0, str(path))
    assert torch.equal(vocab, draft.vocab_ids) and coverage == 0.75
    with pytest.raises(HeadsError, match="No distilled draft model fits"):
        make_drafter("distilled", tiny_target)  # the shipped file is for the embedded model only
    assert "distilled" in drafter_keys() and "trained on its outputs" in describe("distilled")


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_output_is_the_target_s_own(tiny_target, k):
    draft = _draft(tiny_target)
    accepted = 0
    for label, prompt in _prompts(tiny_target.tokenizer).items():
        cfg = GenerationConfig(max_new_tokens=30, k=k)
        base = _run(tiny_target, prompt, cfg)
        spec = _run(tiny_target, prompt, cfg, DistilledDrafter(draft))
        assert spec.token_ids == base.token_ids, (label, k)
        drafted = [t for e in spec.events[1:] for t in e.draft_ids]
        assert drafted and all(t % 2 == 0 for t in drafted)  # from the draft vocabulary only
        accepted += sum(e.num_accepted for e in spec.events[1:] if e.kind == "pass")
    assert accepted > 0  # started from the target's layers: it agrees on some tokens


@pytest.mark.parametrize("fmt", ["int8", "int4", "bfloat16"])
def test_a_file_loads_for_a_target_in_another_weight_format(tiny_target, tmp_path, fmt):
    """Seen in the Arena: with the app's weight format on (int4: packed codes, fused projections) loading the
    shipped file failed copying the target's layers ("Missing key(s) ... q_proj.weight"); the file fills every
    layer itself, so it loads whatever the target's linears are, with the same weights, and the output stays that
    target's own."""
    from specviz.runtime.weights.loaded import with_weights

    path = save_draft_model(_draft(tiny_target), tmp_path / "d.safetensors", tiny_target.model, {})
    packed = with_weights(tiny_target, fmt)
    assert packed.model is not tiny_target.model
    loaded, plain = load_draft_model(path, packed.model), load_draft_model(path, tiny_target.model)
    assert all(torch.equal(a, b) for a, b in zip(loaded.layers.state_dict().values(),
                                                  plain.layers.state_dict().values()))
    prompt = next(iter(_prompts(packed.tokenizer).values()))
    cfg = GenerationConfig(max_new_tokens=16, k=4)
    assert _run(packed, prompt, cfg, DistilledDrafter(loaded)).token_ids == _run(packed, prompt, cfg).token_ids


def test_int8_weights_draft_close_to_float_and_keep_the_output(tiny_target, tmp_path):
    """On the CPU the distilled draft drafts with int8 weights (auto, as the heads): every linear of its layers
    (q/k/v and gate/up fused) and its LM-head rows; its logits stay within 5 % of the float file's, the output is the
    target's own, and ``head_weights="float"`` keeps the float file."""
    from specviz.runtime.weights.linears import Int8Linear

    path = save_draft_model(_draft(tiny_target), tmp_path / "d.safetensors", tiny_target.model, {})
    auto = make_drafter("distilled", tiny_target, heads_path=str(path))
    plain = make_drafter("distilled", tiny_target, heads_path=str(path), head_weights="float")
    assert (auto.weights, plain.weights) == ("int8", "float")
    linears = [m for m in auto.draft.layers.modules() if isinstance(m, torch.nn.Linear)]
    assert not linears and isinstance(auto.draft.head.int8, Int8Linear) and auto.draft.head.lm.weight is None
    assert sum(isinstance(m, Int8Linear) for m in auto.draft.layers.modules()) == 4 * 2  # q/k/v fused, o, gate/up fused, down
    ids = torch.tensor([[1, 5, 9, 14, 3, 7]])
    with torch.no_grad():
        a, b = auto.draft.view(input_ids=ids).logits, plain.draft.view(input_ids=ids).logits
    seen = torch.isfinite(b)
    assert torch.equal(seen, torch.isfinite(a)) and (a[seen] - b[seen]).norm() / b[seen].norm() < 0.05
    prompt = next(iter(_prompts(tiny_target.tokenizer).values()))
    cfg = GenerationConfig(max_new_tokens=20, k=4)
    assert _run(tiny_target, prompt, cfg, auto).token_ids == _run(tiny_target, prompt, cfg).token_ids


def test_sampling_keeps_the_target_distribution(tiny_target):
    draft = _draft(tiny_target)
    assert _chi_square(tiny_target, lambda: DistilledDrafter(draft), dict(temperature=1.0), n=600) > 1e-3


def _tiny_set(target, folder, count=6, length=24, seed=0):
    """A committed set of ``count`` sequences: the target's greedy continuations of random prompts of 8 tokens."""
    g = torch.Generator().manual_seed(seed)
    seqs = []
    for _ in range(count):
        ids = torch.randint(0, target.vocab_size, (8,), generator=g).tolist()
        with torch.no_grad():
            while len(ids) < length:
                ids.append(int(target.model(torch.tensor([ids])).logits[0, -1].argmax()))
        seqs.append(torch.tensor(ids))
    folder.mkdir(parents=True)
    save_id_shard(folder / "ids-0000.npz", {"ids": torch.cat(seqs), "offsets": torch.tensor([0] + [length] * count).cumsum(0),
                                            "prompt_lens": torch.full((count,), 8)})
    return folder


def test_the_train_command_trains_resumes_and_reports(tiny_model_dir, tiny_target, tmp_path, capsys):
    data, held = _tiny_set(tiny_target, tmp_path / "set"), _tiny_set(tiny_target, tmp_path / "held", 2, seed=1)
    ckpt, out = tmp_path / "ckpt.pt", tmp_path / "d.safetensors"
    argv = ["train", "distilled", "--target", str(tiny_model_dir), "--threads", "1", "--device", "cpu",
            "--layers", "1", "--data", str(data), "--eval-data", str(held), "--epochs", "8", "--batch-tokens", "48",
            "--lr", "0.001", "--ckpt", str(ckpt), "--out", str(out), "--prefill-cache", str(tmp_path / "pf.pt")]
    assert main(argv) == 0
    printed, err = capsys.readouterr()
    report = json.loads(printed)
    assert "prefill: kept in" in err and (tmp_path / "pf.pt").exists()
    assert report["source_layers"] == [0] and report["train_sequences"] == 5 and report["held_out_sequences"] == 1
    assert report["steps"] == 24 and torch.load(ckpt, weights_only=True)["step"] == 24  # 2 batches of 2, 1 of 1, x8
    assert report["train_loss_last_steps"] < 0.8 * report["train_loss_first_steps"]  # it learns
    assert report["held_out_loss_before"] > 0 and report["held_out_loss"] > 0
    chain = report["eval"]["held_out_chain"]
    assert chain["passes"] == 2 * 16 and 0 <= chain["accepted_per_pass"] <= 4
    assert 0 <= report["eval"]["held_out_first_token_accuracy"] <= 1
    assert read_draft_metadata(out)["info"]["steps"] == 24
    assert main(argv + ["--out", str(tmp_path / "again.safetensors")]) == 0  # resumed at the end: the same file
    printed, err = capsys.readouterr()
    again = json.loads(printed)
    assert "prefill: read from" in err and again["data"]["positions"] == report["data"]["positions"] == 6 * 24
    assert again["held_out_loss"] == report["held_out_loss"] and again["held_out_loss_before"] is None
    assert again["train_loss_last_steps"] is None
    assert main(["train", "distilled", "--target", str(tiny_model_dir), "--threads", "1"]) == 2
    assert "needs --data with committed sets" in capsys.readouterr().err


def test_held_out_figures_are_given_per_set(tiny_target, tmp_path):
    from specviz.training.draft_model import _split, held_out_by_set, held_out_report, soft_prefill

    a, b = _tiny_set(tiny_target, tmp_path / "a", 4), _tiny_set(tiny_target, tmp_path / "b", 3, seed=1)
    corpus = soft_prefill(tiny_target, [a, b], 4)
    assert corpus.sources.tolist() == [0, 0, 0, 0, 1, 1, 1] and corpus.set_names == (str(a), str(b))
    _, hold = _split(corpus, 0.5, 0)
    assert len(hold) == 3
    draft = _draft(tiny_target, (0,))
    by_set = held_out_by_set(draft, corpus, hold)["held_out_by_set"]
    overall = held_out_report(draft, corpus, hold)["held_out_chain"]["passes"]
    passes = [r["held_out_chain"]["passes"] for r in by_set.values() if r]
    assert sum(passes) == overall == 3 * 16  # 16 reply positions a sequence, each chain counted once
    assert held_out_by_set(draft, soft_prefill(tiny_target, [a], 4), hold[:1]) == {}


def test_the_confidence_gate_drafts_fewer_tokens_and_keeps_the_output(tiny_target, tmp_path):
    """A draft model's confidence gate (as the heads'): a draft stops before the first token whose cumulative
    draft probability falls below the gate, down to none (a plain target step); the greedy output stays the
    target's own, every drafted chain's product of probabilities is at or above the gate, and a gate outside
    [0, 1) is refused."""
    draft = _draft(tiny_target)
    cfg = GenerationConfig(max_new_tokens=30, k=4)
    drafted = {}
    for gate in (0.0, 0.3, 0.9):
        total = 0
        for label, prompt in _prompts(tiny_target.tokenizer).items():
            spec = _run(tiny_target, prompt, cfg, DistilledDrafter(draft, min_confidence=gate))
            assert spec.token_ids == _run(tiny_target, prompt, cfg).token_ids, (label, gate)
            for event in spec.events[1:]:
                if event.kind == "pass" and event.draft_ids:
                    assert float(torch.tensor([d.draft_prob for d in event.details]).prod()) >= gate - 1e-6
                total += len(event.draft_ids) if event.kind == "pass" else 0
        drafted[gate] = total
    assert drafted[0.0] > drafted[0.3] > drafted[0.9]  # a higher gate drafts fewer tokens
    path = save_draft_model(draft, tmp_path / "d.safetensors", tiny_target.model, {})
    assert make_drafter("distilled", tiny_target, heads_path=str(path), min_confidence=0.3).min_confidence == 0.3
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        DistilledDrafter(draft, min_confidence=1.0)


def test_the_confidence_gate_keeps_the_sampled_distribution(tiny_target):
    draft = _draft(tiny_target)
    assert _chi_square(tiny_target, lambda: DistilledDrafter(draft, min_confidence=0.3), dict(temperature=1.0),
                       n=600) > 1e-3
