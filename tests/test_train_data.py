"""Committed distillation data (specviz.training.dataset, specviz.training.idshards): uint16 shards, resume,
interrupted shards, recipe checks, and training on committed shards with a kept checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from specviz.cli.main import main
from specviz.training.dataset import DataSetError, generate_set, read_manifest, shard_range
from specviz.training.distill import CorpusSettings, make_shard, part_three_prompts, prefill_corpus
from specviz.training.idshards import id_shard_paths, load_id_shard, save_id_shard
from specviz.training.train import TrainData, TrainSettings, run_training

TINY = CorpusSettings(num_prompts=4, batch_size=2, max_new_tokens=4, prompt_set="part3")


def test_uint16_shard_round_trip(tmp_path):
    tensors = {"ids": torch.tensor([1, 49151, 65535, 0, 7], dtype=torch.int32),
               "offsets": torch.tensor([0, 3, 5]), "prompt_lens": torch.tensor([2, 1], dtype=torch.int32),
               "forms": torch.tensor([5, 0], dtype=torch.int32)}
    path = tmp_path / "ids-0000.npz"
    save_id_shard(path, tensors)
    with np.load(path) as raw:
        assert raw["ids"].dtype == np.uint16 and raw["forms"].dtype == np.int16
    back = load_id_shard(path)
    assert back["ids"].tolist() == [1, 49151, 65535, 0, 7] and back["ids"].dtype == torch.int64
    assert back["offsets"].tolist() == [0, 3, 5] and back["prompt_lens"].tolist() == [2, 1]
    assert back["forms"].tolist() == [5, 0]
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError, match="uint16"):
        save_id_shard(tmp_path / "ids-0001.npz", tensors | {"ids": torch.tensor([1, 65536, 0, 0, 0])})
    with pytest.raises(ValueError, match="offsets end at"):
        save_id_shard(tmp_path / "ids-0001.npz", tensors | {"offsets": torch.tensor([0, 3, 4])})
    assert not (tmp_path / "ids-0001.npz").exists()


def test_shard_range():
    assert shard_range(None, 5) == range(5) and shard_range("1:3", 5) == range(1, 3)
    assert shard_range("3:", 5) == range(3, 5) and shard_range("4", 5) == range(4, 5)
    for bad in ("2:9", "x", "3:3", "5"):
        with pytest.raises(DataSetError):
            shard_range(bad, 5)


def test_sets_resume_redo_interrupted_shards_and_match_a_lone_shard(tiny_target, tmp_path):
    folder = tmp_path / "part3"
    paths = generate_set(tiny_target, folder, TINY)
    assert [p.name for p in paths] == ["ids-0000.npz", "ids-0001.npz"]
    prompts = part_three_prompts(4)
    first = load_id_shard(paths[0])
    assert first["forms"].tolist() == [0, 1] and first["offsets"].numel() == 3
    direct = make_shard(tiny_target, prompts, TINY, 0)  # the same shard made alone: the same ids
    assert first["ids"].tolist() == direct["ids"].tolist()
    assert first["prompt_lens"].tolist() == direct["prompt_lens"].tolist()
    manifest = read_manifest(folder)
    assert manifest["num_prompts"] == 4 and manifest["recipe"]["batch_size"] == 2
    assert sorted(manifest["shards"]) == ["0000", "0001"] and manifest["shards"]["0001"]["sequences"] == 2
    assert manifest["shards"]["0000"]["new_tokens"] == int(direct["offsets"][-1] - direct["prompt_lens"].sum())

    stamps = [p.stat().st_mtime_ns for p in paths]
    generate_set(tiny_target, folder, TINY)  # a second run makes nothing
    assert [p.stat().st_mtime_ns for p in paths] == stamps

    paths[1].unlink()  # interrupted while writing shard 1: only its .tmp is there
    (folder / "ids-0001.npz.tmp").write_bytes(b"PK\x03\x04 half a shard")
    paths[0].write_bytes(paths[0].read_bytes()[:40])  # and shard 0 truncated (a copy cut short)
    generate_set(tiny_target, folder, TINY, shards="0:2")
    assert load_id_shard(paths[0])["ids"].tolist() == first["ids"].tolist()
    assert load_id_shard(paths[1])["prompt_lens"].numel() == 2 and not list(folder.glob("*.tmp"))


def test_a_set_refuses_another_recipe_and_grows_a_short_last_shard(tiny_target, tmp_path):
    folder = tmp_path / "part3"
    generate_set(tiny_target, folder, CorpusSettings(num_prompts=3, batch_size=2, max_new_tokens=4,
                                                    prompt_set="part3"))
    assert load_id_shard(folder / "ids-0001.npz")["prompt_lens"].numel() == 1
    generate_set(tiny_target, folder, TINY, shards="1")  # four prompts: shard 1 now holds two
    assert load_id_shard(folder / "ids-0001.npz")["forms"].tolist() == [2, 3]
    with pytest.raises(DataSetError, match="max_new_tokens=4"):
        generate_set(tiny_target, folder, CorpusSettings(num_prompts=4, batch_size=2, max_new_tokens=5,
                                                        prompt_set="part3"))


def test_training_reads_committed_shards_and_keeps_its_checkpoint(tiny_target, tmp_path):
    sets = [tmp_path / "part3", tmp_path / "old"]
    generate_set(tiny_target, sets[0], TINY)
    from specviz.training.distill import generate_corpus

    generate_corpus(tiny_target, sets[1], CorpusSettings(num_prompts=2, batch_size=2, max_new_tokens=4, seed=1))
    assert [p.suffix for p in id_shard_paths(sets[1])] == [".safetensors"]  # the cache's form is read too
    corpus = prefill_corpus(tiny_target, sets)
    assert corpus.offsets.numel() - 1 == 6 and corpus.forms.tolist() == [0, 1, 2, 3, -1, -1]
    assert corpus.ids[:corpus.offsets[1]].tolist() == load_id_shard(sets[0] / "ids-0000.npz")["ids"][
        :corpus.offsets[1]].tolist()
    ckpt = tmp_path / "ckpt" / "eagle3.pt"
    settings = TrainSettings(epochs=1, batch_tokens=32, vocab_size=40, holdout=0.2)
    report = run_training("eagle3", tiny_target, tmp_path / "h.safetensors", settings=settings,
                          data=TrainData(sets=tuple(sets), checkpoint=ckpt))
    assert report["train_sequences"] + report["holdout_sequences"] == 6
    assert report["data"]["sets"] == [str(s) for s in sets] and not list(sets[0].glob("feats-*"))
    state = torch.load(ckpt, weights_only=True)
    assert ckpt.exists() and state["step"] >= 1  # kept, at the finished step
    again = run_training("eagle3", tiny_target, tmp_path / "h2.safetensors", settings=settings,
                         data=TrainData(sets=tuple(sets), checkpoint=ckpt))  # resumes at the end: the same head, no step retrained
    assert again["holdout_acc_per_step"] == report["holdout_acc_per_step"]
    assert torch.load(ckpt, weights_only=True)["step"] == state["step"]
    medusa = run_training("medusa", tiny_target, tmp_path / "m.safetensors", data=TrainData(sets=(sets[0],)),
                          settings=TrainSettings(epochs=1, batch_tokens=32, vocab_size=40, holdout=0.25))
    assert medusa["train_sequences"] + medusa["holdout_sequences"] == 4 and not (sets[0] / "ckpt-medusa-seed0.pt").exists()


def test_the_data_command_writes_a_set_and_training_names_missing_sets(tiny_model_dir, tmp_path, capsys):
    argv = ["train", "data", "--target", str(tiny_model_dir), "--prompt-set", "part3", "--prompts", "2",
            "--batch-size", "2", "--max-new-tokens", "3", "--threads", "1", "--device", "cpu", "--out", str(tmp_path)]
    assert main(argv) == 0
    manifest = json.loads((tmp_path / "part3" / "manifest.json").read_text())
    assert manifest["recipe"]["max_new_tokens"] == 3 and list(manifest["shards"]) == ["0000"]
    assert "1 made now" in capsys.readouterr().err
    assert main(argv + ["--shards", "0:3"]) == 2  # one clear sentence: beyond the shards of two prompts
    assert "outside the 1 shards" in capsys.readouterr().err
    code = main(["train", "eagle3", "--target", str(tiny_model_dir), "--threads", "1",
                 "--data", f"{tmp_path / 'part3'},{tmp_path / 'nothing'}"])
    assert code == 2 and "holds no committed id shards" in capsys.readouterr().err
    ckpt = tmp_path / "ckpt" / "e3.pt"
    code = main(["train", "eagle3", "--target", str(tiny_model_dir), "--threads", "1", "--device", "cpu",
                 "--data", str(tmp_path / "part3"), "--forms", "everyday,open", "--epochs", "1", "--batch-tokens", "32",
                 "--ckpt", str(ckpt), "--out", str(tmp_path / "e3.safetensors")])
    printed, err = capsys.readouterr()
    report = json.loads(printed)
    assert code == 0 and report["data"] == {"sets": [str(tmp_path / "part3")], "forms": [0, 1]}
    assert report["train_sequences"] == 1 and report["holdout_sequences"] == 1 and ckpt.exists()


def test_part_four_data_stores_the_suites_forms_and_training_picks_them_by_name(tiny_model_dir, tmp_path, capsys):
    """`train data --prompt-set part4` stores forms 8.. (after part three's); `--forms chat` keeps only those."""
    from specviz.training.idshards import load_id_shard

    argv = ["train", "data", "--target", str(tiny_model_dir), "--prompt-set", "part4", "--prompts", "4",
            "--batch-size", "2", "--max-new-tokens", "3", "--threads", "1", "--device", "cpu", "--out", str(tmp_path)]
    assert main(argv) == 0
    manifest = json.loads((tmp_path / "part4" / "manifest.json").read_text())
    assert manifest["recipe"]["prompt_set"] == "part4" and list(manifest["shards"]) == ["0000", "0001"]
    shards = [load_id_shard(path) for path in sorted((tmp_path / "part4").glob("ids-*.npz"))]
    assert [s["forms"].tolist() for s in shards] == [[8, 9], [10, 11]]
    capsys.readouterr()
    code = main(["train", "eagle3", "--target", str(tiny_model_dir), "--threads", "1", "--device", "cpu",
                 "--data", str(tmp_path / "part4"), "--forms", "chat,summarization", "--epochs", "1",
                 "--batch-tokens", "32", "--out", str(tmp_path / "e3.safetensors")])
    report = json.loads(capsys.readouterr()[0])
    assert code == 0 and report["data"]["forms"] == [8, 10]
    assert report["train_sequences"] + report["holdout_sequences"] == 2


def test_one_prefill_is_kept_and_shared_between_kinds(tiny_target, tmp_path, monkeypatch):
    from specviz.training import train as train_module
    from specviz.training.distill import _prefill

    folder = tmp_path / "part3"
    generate_set(tiny_target, folder, TINY)
    seqs = [s for d in map(load_id_shard, id_shard_paths(folder))
            for s in torch.tensor_split(d["ids"], d["offsets"][1:-1])]
    feats, top1, _ = _prefill(tiny_target, seqs, 1)  # one sequence a batch: no padding at all
    sorted_feats, sorted_top1, _ = _prefill(tiny_target, seqs, 3)  # batches by length, back in data order
    assert [t.tolist() for t in sorted_top1] == [t.tolist() for t in top1]
    assert all(torch.allclose(a.float(), b.float(), atol=2e-2) for a, b in zip(feats, sorted_feats))
    calls = []
    real = train_module.prefill_corpus
    monkeypatch.setattr(train_module, "prefill_corpus", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    cache = tmp_path / "prefill.pt"
    settings = TrainSettings(epochs=1, batch_tokens=32, vocab_size=40, holdout=0.25)
    data = TrainData(sets=(folder,), prefill_cache=cache)
    eagle = run_training("eagle", tiny_target, tmp_path / "e.safetensors", settings=settings, data=data)
    medusa = run_training("medusa", tiny_target, tmp_path / "m.safetensors", settings=settings, data=data)
    eagle3 = run_training("eagle3", tiny_target, tmp_path / "e3.safetensors", settings=settings, data=data)
    layers = train_module.fusion_layers(tiny_target.model.config.num_hidden_layers)
    assert calls == [layers] and cache.exists()  # one prefill, with the fused layers, for all three kinds
    assert eagle["positions"] == eagle3["positions"] == sum(len(s) for s in seqs)
    assert medusa["train_sequences"] + medusa["holdout_sequences"] == 4
    generate_set(tiny_target, folder, CorpusSettings(num_prompts=6, batch_size=2, max_new_tokens=4, prompt_set="part3"))
    run_training("medusa", tiny_target, tmp_path / "m2.safetensors", settings=settings, data=data)
    assert len(calls) == 2  # the set grew: the kept prefill was made for other data, so it is made again


def test_a_prefill_too_large_for_the_memory_is_kept_without_the_fused_layers(tiny_target, tmp_path, monkeypatch):
    """All five committed sets (3.06 M positions) with EAGLE-3's fused layers would peak near 28 GB on a 24 GB
    machine (seen: the process reached 9.4 GB a third of the way in): when the peak would not fit, eagle and medusa
    keep a prefill without them and say so; eagle3 then makes its own; a kept prefill with them serves the others."""
    from specviz.runtime import presets
    from specviz.training import train as train_module

    folder = tmp_path / "part3"
    generate_set(tiny_target, folder, TINY)
    calls, said = [], []
    real = train_module.prefill_corpus
    monkeypatch.setattr(train_module, "prefill_corpus", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    positions = sum(int(load_id_shard(p)["ids"].numel()) for p in id_shard_paths(folder))
    width = tiny_target.model.config.hidden_size
    monkeypatch.setattr(presets, "available_bytes", lambda device: positions * (8 * width + 16))  # 2x short
    fits, why = train_module.fused_prefill_fits(tiny_target, [folder])
    assert not fits and f"{positions:,} positions would need about" in why
    cache = tmp_path / "prefill.pt"
    settings = TrainSettings(epochs=1, batch_tokens=32, vocab_size=40, holdout=0.25)
    data = TrainData(sets=(folder,), prefill_cache=cache)
    run_training("eagle", tiny_target, tmp_path / "e.safetensors", settings=settings, data=data, progress=said.append)
    run_training("medusa", tiny_target, tmp_path / "m.safetensors", settings=settings, data=data)
    assert calls == [()] and any("without EAGLE-3's fused layers" in m for m in said)  # one prefill, no layers
    run_training("eagle3", tiny_target, tmp_path / "e3.safetensors", settings=settings, data=data)
    layers = train_module.fusion_layers(tiny_target.model.config.num_hidden_layers)
    assert calls == [(), layers]  # eagle3 needs them: made again, with them
    run_training("eagle", tiny_target, tmp_path / "e2.safetensors", settings=settings, data=data)
    assert calls == [(), layers]  # the kept prefill with the layers serves eagle too


def test_the_prefill_hands_freed_memory_back_after_each_batch(tiny_target, tmp_path, monkeypatch):
    """Its batches grow (shortest first), so the allocator's freed blocks piled up: 11.4 GB resident after 57 % of
    all five committed sets, 6.4 GB after one trim. Each batch now ends with one (glibc's malloc_trim)."""
    import platform

    from specviz.training import distill
    from specviz.training.distill import _prefill

    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert distill.release_freed_memory() is True
    trims = []
    monkeypatch.setattr(distill, "release_freed_memory", lambda: trims.append(1) or True)
    seqs = [torch.arange(1, n + 1) for n in (3, 5, 4, 6, 2)]
    feats, top1, _ = _prefill(tiny_target, seqs, 2)
    assert len(trims) == 3 and [len(t) for t in top1] == [3, 5, 4, 6, 2]  # 3 batches of at most 2
