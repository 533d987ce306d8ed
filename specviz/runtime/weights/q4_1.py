"""The embedded GGUF's own 4-bit blocks as int4 linears, so the int4 format loses nothing the file holds.

A Q4_1 block covers 32 consecutive inputs of one weight row in 20 bytes: d (float16), m (float16), then 16 bytes
whose low nibbles are the codes of inputs 0..15 and high nibbles those of inputs 16..31; each weight is
``d * q + m``. :func:`decode_q4_1` turns a tensor's blocks into (codes, d, m); :class:`Int4Linear` packs them
for torch's CPU kernel with ``scale = d, zero = m + 8 d`` (exact, specviz.runtime.weights.linears).

The GGUF stores llama's q and k projections with their rows permuted (llama.cpp's rotary layout); transformers
undoes it when it dequantizes the file, which is how the embedded float32 model was made (specviz.runtime.models). Rather
than trust one formula, :func:`file_int4_linears` tries the row orders a permutation could have and keeps the one
whose dequantized floats equal the loaded float32 weight exactly; a tensor with no exact match is left out (the
caller quantizes it from float and says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from specviz.runtime.weights.linears import INT4_GROUP

BLOCK_BYTES = 20  # d, m (float16 each) + 16 bytes of 4-bit codes
Q4_1_TYPE = 3  # GGMLQuantizationType.Q4_1

# GGUF tensor name (within blk.{i}.) -> the llama module path (within model.layers.{i}.)
_LLAMA_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                "ffn_down": "mlp.down_proj"}


@dataclass(frozen=True)
class Q4_1Tensor:
    """One Q4_1 tensor decoded: codes uint8 (N, K) in 0..15; d and m float32 (N, K/32), from float16 exactly."""

    codes: torch.Tensor
    d: torch.Tensor
    m: torch.Tensor

    def dequantized(self) -> torch.Tensor:
        """(N, K) float32 weights d * q + m, as GGUF readers compute them."""
        n, k = self.codes.shape
        q = self.codes.reshape(n, k // INT4_GROUP, INT4_GROUP).float()
        return (q * self.d[..., None] + self.m[..., None]).reshape(n, k)

    def rows(self, order: torch.Tensor) -> "Q4_1Tensor":
        """The same tensor with its rows taken in ``order`` (a (N,) index)."""
        return Q4_1Tensor(self.codes[order], self.d[order], self.m[order])


def decode_q4_1(raw: np.ndarray | bytes, rows: int, cols: int) -> Q4_1Tensor:
    """Decode ``rows`` x ``cols`` weights from Q4_1 blocks (``raw``: rows * cols / 32 * 20 bytes, row-major).

    Raises ValueError when ``cols`` is not a multiple of 32 or the byte count does not match."""
    if cols % INT4_GROUP:
        raise ValueError(f"Q4_1 rows must be a multiple of {INT4_GROUP} wide, got {cols}")
    data = np.frombuffer(bytes(raw) if isinstance(raw, bytes) else np.ascontiguousarray(raw).tobytes(), np.uint8)
    groups = cols // INT4_GROUP
    if data.size != rows * groups * BLOCK_BYTES:
        raise ValueError(f"{data.size} bytes cannot hold {rows} x {cols} Q4_1 weights")
    blocks = data.reshape(rows, groups, BLOCK_BYTES)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    packed = blocks[..., 4:]
    codes = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).reshape(rows, cols)
    return Q4_1Tensor(torch.from_numpy(codes.copy()), torch.from_numpy(d), torch.from_numpy(m))


def read_q4_1_tensors(path: str | Path, limit: int | None = None) -> dict[str, Q4_1Tensor]:
    """The Q4_1 tensors of the GGUF file at ``path`` (the first ``limit`` of them, or all) by their GGUF names
    (e.g. "blk.0.attn_q.weight"), in file order."""
    from gguf import GGUFReader

    out = {}
    for tensor in GGUFReader(str(path)).tensors:
        if limit is not None and len(out) >= limit:
            break
        if int(tensor.tensor_type) == Q4_1_TYPE:
            cols, rows = (int(v) for v in tensor.shape[:2])  # GGUF lists the fastest-varying dimension first
            out[tensor.name] = decode_q4_1(tensor.data, rows, cols)
    return out


def module_name(gguf_name: str) -> str | None:
    """The llama module path of a GGUF weight name ("blk.3.ffn_up.weight" -> "model.layers.3.mlp.up_proj")."""
    parts = gguf_name.split(".")
    if len(parts) != 4 or parts[0] != "blk" or parts[3] != "weight" or parts[2] not in _LLAMA_NAMES:
        return None
    return f"model.layers.{parts[1]}.{_LLAMA_NAMES[parts[2]]}"


def _row_orders(rows: int, head_counts: tuple[int, ...]) -> list[torch.Tensor]:
    """Identity, then the inverse of llama.cpp's q/k row permutation (and, in case, the permutation itself) for
    each plausible head count: in the file, the rows of a head run (pair, half) instead of (half, pair)."""
    orders = [torch.arange(rows)]
    for heads in head_counts:
        if heads and rows % (2 * heads) == 0:
            half = rows // heads // 2
            orders.append(torch.arange(rows).reshape(heads, half, 2).transpose(1, 2).reshape(rows))
            orders.append(torch.arange(rows).reshape(heads, 2, half).transpose(1, 2).reshape(rows))
    return orders


def matching_rows(tensor: Q4_1Tensor, weight: torch.Tensor, head_counts: tuple[int, ...]) -> Q4_1Tensor | None:
    """``tensor`` with its rows in the order whose dequantized floats equal ``weight`` (N, K) exactly, or None."""
    if tuple(tensor.codes.shape) != tuple(weight.shape):
        return None
    target = weight.detach().float()
    for order in _row_orders(weight.shape[0], head_counts):
        candidate = tensor.rows(order)
        if torch.equal(candidate.dequantized(), target):
            return candidate
    return None


def file_int4_tensors(path: str | Path, weights: dict[str, torch.Tensor],
                      head_counts: tuple[int, ...]) -> dict[str, Q4_1Tensor]:
    """The file's Q4_1 tensors for the linears in ``weights`` (module path -> float weight (N, K)) whose
    dequantized values equal that weight exactly, rows reordered where the file permuted them."""
    found = {}
    for name, tensor in read_q4_1_tensors(path).items():
        module = module_name(name)
        if module in weights:
            match = matching_rows(tensor, weights[module], head_counts)
            if match is not None:
                found[module] = match
    return found
