"""Committed distillation data: the target's generations as uint16 token-id shards in a folder of the repository
(``data/distill/<set>/ids-NNNN.npz``, :mod:`specviz.training.idshards`), with a ``manifest.json`` per set recording
the recipe and, per shard, where and how fast it was made.

:func:`generate_set` (``python -m specviz train data``) makes the shards asked for and skips those already there,
so the work splits into parts done at different times and places and nothing is generated twice. Every shard is
seeded on its own (:func:`specviz.training.distill.make_shard`), so a shard regenerated on the same machine kind is
identical. Training reads the sets with ``train eagle|eagle3|medusa --data data/distill/<set>[,<set>...]``,
recomputing the features by a prefill (:func:`specviz.training.distill.prefill_corpus`).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Callable

import torch

from specviz.training.distill import CorpusSettings, corpus_prompts, make_shard
from specviz.training.prompts_part6 import part_six_task_prompts
from specviz.training.idshards import load_id_shard, save_id_shard, shard_name

Progress = Callable[[str], None]
MANIFEST = "manifest.json"
DEFAULT_ROOT = Path("data/distill")


class DataSetError(ValueError):
    """A data set's manifest disagrees with the recipe asked for, or the shards asked for do not exist."""


def set_name(settings: CorpusSettings) -> str:
    """The folder name of a prompt set's data under ``data/distill``: ``default`` (parts one and two) or ``part3``,
    with ``-seed<n>`` for a seed other than 0."""
    return settings.prompt_set + (f"-seed{settings.seed}" if settings.seed else "")


def recipe(settings: CorpusSettings, target) -> dict:
    """The fields that fix a shard's contents (all but how many prompts there are in all)."""
    from specviz.drafters.networks import target_signature

    return {"prompt_set": settings.prompt_set, "seed": settings.seed, "batch_size": settings.batch_size,
            "max_new_tokens": settings.max_new_tokens, "sampled_prompts": settings.sampled_prompts
            if settings.prompt_set == "default" else 0, "temperature": settings.temperature,
            "top_p": settings.top_p, "target": getattr(target, "label", "?"),
            "target_signature": target_signature(target.model)}


def read_manifest(folder: Path) -> dict | None:
    """The set's manifest, or None when the folder has none."""
    path = folder / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def _write_manifest(folder: Path, manifest: dict) -> None:
    tmp = folder / (MANIFEST + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    tmp.replace(folder / MANIFEST)


def _record_shard(folder: Path, manifest: dict, key: str, entry: dict) -> dict:
    """Add one shard's entry to the manifest on disk, under a lock, re-read first: processes making other
    ``--shards`` ranges of the same set at the same time keep each other's entries. Returns the manifest written."""
    with open(folder / ".manifest.lock", "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # no fcntl (Windows): one process per set
            pass
        current = read_manifest(folder) or manifest
        current["num_prompts"] = max(current["num_prompts"], manifest["num_prompts"])
        current["shards"][key] = entry
        _write_manifest(folder, current)
    return current


def _check_recipe(stored: dict, wanted: dict, target, folder: Path) -> None:
    """Raise DataSetError when the stored recipe differs from ``wanted`` in a field that changes shard contents."""
    from specviz.drafters.networks import signature_fits

    for key, value in wanted.items():
        if key in ("target", "target_signature"):
            continue
        if stored.get(key) != value:
            raise DataSetError(f"{folder} holds shards made with {key}={stored.get(key)!r}, not {value!r}; "
                               f"use another --out folder or the same recipe")
    if not signature_fits(stored.get("target_signature", ""), target.model):
        raise DataSetError(f"{folder} holds shards of another target ({stored.get('target')}); use another --out folder")


def machine_info(target) -> dict:
    """Where a shard is made: device, threads, processor or GPU name, library versions."""
    import transformers

    device = torch.device(target.device)
    if device.type == "cuda":
        where = torch.cuda.get_device_name(device)
    else:
        where = _cpu_name()
    return {"device": device.type, "threads": torch.get_num_threads(), "machine": where,
            "torch": torch.__version__, "transformers": transformers.__version__}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} cores)"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def shard_range(text: str | None, total: int) -> range:
    """``--shards`` as a range: ``"a:b"`` (shards a..b-1), ``"a:"`` (a to the end), ``"a"`` (one shard) or None
    (all ``total``).

    Raises:
        DataSetError: not of that form, empty, or beyond the ``total`` shards the prompt count makes.
    """
    if not text:
        return range(total)
    try:
        first, sep, last = text.partition(":")
        lo = int(first) if first else 0
        hi = (int(last) if last else total) if sep else lo + 1
    except ValueError:
        raise DataSetError(f"--shards must look like 0:8, 3: or 5, got {text!r}") from None
    if not 0 <= lo < hi <= total:
        raise DataSetError(f"--shards {text} is outside the {total} shards of these prompts (0:{total})")
    return range(lo, hi)


def _have(path: Path, count: int) -> bool:
    """Whether ``path`` is a complete, readable shard of ``count`` sequences (a short last shard of a smaller
    prompt count is redone when the count grows)."""
    if not path.exists():
        return False
    try:
        return load_id_shard(path)["prompt_lens"].numel() == count
    except ValueError:
        return False


def generate_set(target, folder: Path, settings: CorpusSettings, shards: str | None = None,
                 progress: Progress | None = None) -> list[Path]:
    """Make the shards ``shards`` (see :func:`shard_range`; default all) of ``settings``' prompts in ``folder``,
    skipping complete ones, each written atomically, and record the recipe and each shard's time in the manifest.
    Returns the paths of the shards asked for.

    Raises:
        DataSetError: the folder's manifest has another recipe, ``shards`` is out of range, or (part six) a shard of
            the first stage it needs is missing.
    """
    prompts = set_prompts(settings, folder, target.tokenizer)
    bs = settings.batch_size
    total = -(-len(prompts) // bs)
    if settings.prompt_set == "part6":  # its prompts run as far as its first stage's shards do
        needed = shard_range(shards, -(-settings.num_prompts // bs))
        if needed.stop > total:
            first = max(total, needed.start)
            raise DataSetError(f"part6 shard {first} needs shard {first} of {folder.parent / _docs_set(settings)} "
                               f"first (make it with `train data --prompt-set part6-docs`)")
    asked = shard_range(shards, total)
    folder.mkdir(parents=True, exist_ok=True)
    wanted = recipe(settings, target)
    manifest = read_manifest(folder) or {"recipe": wanted, "num_prompts": 0, "shards": {}}
    _check_recipe(manifest["recipe"], wanted, target, folder)
    manifest["num_prompts"] = max(manifest["num_prompts"], len(prompts))
    paths, made = [], 0
    for n, shard in enumerate(asked):
        path = folder / shard_name(shard)
        paths.append(path)
        count = len(prompts[shard * bs:(shard + 1) * bs])
        if _have(path, count):
            continue
        t0 = time.perf_counter()
        tensors = make_shard(target, prompts, settings, shard)
        seconds = time.perf_counter() - t0
        save_id_shard(path, tensors)
        new = int(tensors["offsets"][-1]) - int(tensors["prompt_lens"].sum())
        entry = {"sequences": count, "positions": int(tensors["offsets"][-1]), "new_tokens": new,
                 "seconds": round(seconds, 1), "tokens_per_s": round(new / max(seconds, 1e-9), 1),
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **machine_info(target)}
        manifest = _record_shard(folder, manifest, f"{shard:04d}", entry)
        made += 1
        load = f", load {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
        _say(progress, f"shard {shard} ({n + 1}/{len(asked)}): {count} prompts, {new} new tokens in {seconds:.0f} s, "
                       f"{new / max(seconds, 1e-9):.1f} tokens/s{load}")
    if not made and not (folder / MANIFEST).exists():
        _write_manifest(folder, manifest)
    _say(progress, f"{folder}: shards {asked.start}..{asked.stop - 1} present ({made} made now)")
    return paths


def _docs_set(settings: CorpusSettings) -> str:
    """The folder name of part six's first stage for ``settings``' seed."""
    return set_name(CorpusSettings(prompt_set="part6-docs", seed=settings.seed))


def set_prompts(settings: CorpusSettings, folder: Path, tokenizer) -> list:
    """The (form, prompt) pairs of ``settings``' set (:func:`specviz.training.distill.corpus_prompts`). Part six's are
    built from its first stage's texts, read from the complete shards of ``part6-docs`` beside ``folder`` in order
    (replies decoded without special tokens), so they run as far as those shards do, up to ``num_prompts``."""
    if settings.prompt_set != "part6":
        return corpus_prompts(settings)
    docs = folder.parent / _docs_set(settings)
    texts: list[str] = []
    bs = settings.batch_size
    while len(texts) < settings.num_prompts and _have(docs / shard_name(len(texts) // bs), bs):
        shard = load_id_shard(docs / shard_name(len(texts) // bs))
        ids, offsets, lens = shard["ids"], shard["offsets"], shard["prompt_lens"]
        for row in range(lens.numel()):
            reply = ids[int(offsets[row]) + int(lens[row]):int(offsets[row + 1])]
            texts.append(tokenizer.decode(reply.tolist(), skip_special_tokens=True))
    return part_six_task_prompts(texts[:settings.num_prompts], settings.seed)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
