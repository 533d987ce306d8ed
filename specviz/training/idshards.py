"""Token-id shards on disk: the committed form (``ids-NNNN.npz``, ids as uint16) and the cache's older form
(``ids-NNNN.safetensors``, ids as int32), read alike.

An ``.npz`` shard holds ``ids`` (uint16, all sequences laid end to end: prompt then reply), ``offsets`` (int64,
N+1 sequence boundaries), ``prompt_lens`` (int32, N) and ``forms`` (int16, N: part-three form index, -1 = not
recorded). uint16 holds every id of a vocabulary up to 65,536 tokens (SmolLM2's has 49,152).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

MAX_VOCAB = 1 << 16  # ids must be below this to be stored as uint16


def shard_name(index: int) -> str:
    """The committed file name of shard ``index`` (``ids-0003.npz``)."""
    return f"ids-{index:04d}.npz"


def save_id_shard(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write one shard (``ids``, ``offsets``, ``prompt_lens``, optional ``forms``) as ``.npz`` with uint16 ids,
    atomically: a ``.tmp`` file written, flushed and renamed into place, so an interrupted write leaves no shard.

    Raises:
        ValueError: an id outside 0..65535, or offsets that do not end at the number of ids.
    """
    ids = tensors["ids"].cpu().numpy()
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= MAX_VOCAB):
        raise ValueError(f"token ids must lie in 0..{MAX_VOCAB - 1} to be stored as uint16; got {ids.min()}..{ids.max()}")
    offsets = tensors["offsets"].cpu().numpy().astype(np.int64)
    if int(offsets[-1]) != ids.size:
        raise ValueError(f"offsets end at {int(offsets[-1])} but the shard holds {ids.size} ids")
    count = offsets.size - 1
    forms = tensors["forms"].cpu().numpy() if "forms" in tensors else np.full(count, -1)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, ids=ids.astype(np.uint16), offsets=offsets,
                            prompt_lens=tensors["prompt_lens"].cpu().numpy().astype(np.int32),
                            forms=forms.astype(np.int16))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def load_id_shard(path: Path) -> dict[str, torch.Tensor]:
    """One shard, either form, as ``ids`` (P,) int64, ``offsets`` (N+1,) int64, ``prompt_lens`` (N,) int64 and
    ``forms`` (N,) int64 (-1 where not recorded).

    Raises:
        ValueError: the file is not a readable shard (truncated, or missing an array).
    """
    try:
        if path.suffix == ".npz":
            with np.load(path) as z:
                raw = {k: torch.from_numpy(z[k].astype(np.int64)) for k in z.files}
        else:
            from safetensors.torch import load_file

            raw = {k: v.long() for k, v in load_file(str(path)).items()}
    except Exception as error:  # a truncated zip or safetensors file: say which file
        raise ValueError(f"{path} is not a readable id shard ({type(error).__name__}: {error})") from None
    missing = [k for k in ("ids", "offsets", "prompt_lens") if k not in raw]
    if missing:
        raise ValueError(f"{path} is not an id shard: it lacks {', '.join(missing)}")
    raw.setdefault("forms", torch.full((raw["offsets"].numel() - 1,), -1, dtype=torch.int64))
    return raw


def id_shard_paths(folder: Path) -> list[Path]:
    """The id shards of ``folder`` in shard order: committed ``ids-*.npz`` and cache ``ids-*.safetensors`` (a
    shard present in both forms is read once, from the ``.npz``)."""
    npz = {p.stem: p for p in folder.glob("ids-*.npz")}
    old = {p.stem: p for p in folder.glob("ids-*.safetensors") if p.stem not in npz}
    return [merged for _, merged in sorted((npz | old).items())]
