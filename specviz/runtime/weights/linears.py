"""Linear layers that hold their weight in fewer bytes: bfloat16, int8 weight-only and int4 weight-only.

Each one replaces an ``nn.Linear`` of a loaded model (:mod:`specviz.runtime.weights.formats`) and takes the model's own
activations (float32 on the CPU): the input rows are cast to the kernel's compute dtype, the product is cast back,
so the rest of the model (embeddings, norms, attention, the KV cache) is unchanged. The kernels are torch's own:

- bfloat16: ``F.linear`` on a bfloat16 weight (oneDNN on the CPU).
- int8: ``aten._weight_int8pack_mm`` (weight int8, one scale per output row). It is fast only with bfloat16
  activations: with float32 ones it took 4-200x longer on this project's machines (docs/weights.md).
- int4: ``aten._weight_int4pack_mm_for_cpu``, group-wise (32 inputs per group), which computes each weight as
  ``(q - 8) * scale + zero`` for a 4-bit code q in 0..15. A Q4_1 block of a GGUF file holds ``d * q + m``, so
  ``scale = d`` and ``zero = m + 8 d`` express it exactly (:func:`q4_1_scales_and_zeros`). The fast path needs
  bfloat16 activations and bfloat16 scales; float32 ones (``compute_dtype=torch.float32``) reproduce the file's
  float32 values bit for bit but ran 30-60x slower, so they serve the round-trip test, not decoding.

Shapes: a linear maps (..., in_features) -> (..., out_features); weights are (out_features, in_features).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

INT4_GROUP = 32  # inputs sharing one (scale, zero): Q4_1's block size
_INT4_ROWS = 16  # torch's CPU int4 packing needs out_features to be a multiple of 16 (padded here with zeros)


class WeightLinear(torch.nn.Module):
    """Base of the formatted linears: input and output sizes, an optional float bias, and the bytes a step reads."""

    weights_format = "float32"

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().clone(), requires_grad=False)

    def weight_bytes(self) -> int:
        """Bytes of the weight (and its scales) that one forward reads, the bias included."""
        return sum(t.numel() * t.element_size() for t in self._weight_tensors()) + (
            0 if self.bias is None else self.bias.numel() * self.bias.element_size())

    def _weight_tensors(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def _finish(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The kernel's (rows, out_features) result as x's dtype and leading shape, plus the bias."""
        out = out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias.to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, format={self.weights_format}"


class Bf16Linear(WeightLinear):
    """A linear with a bfloat16 weight; inputs are cast to bfloat16 and outputs back to the input's dtype."""

    weights_format = "bfloat16"

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias)
        self.register_buffer("weight", weight.detach().to(torch.bfloat16).contiguous())

    def _weight_tensors(self) -> list[torch.Tensor]:
        return [self.weight]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._finish(F.linear(x.to(torch.bfloat16), self.weight), x)


def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8: (codes int8 (N, K), scales float32 (N,)) with weight ~= codes * scales[:, None]."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
    codes = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return codes, scales


class Int8Linear(WeightLinear):
    """Weight-only int8 (one scale per output row) through ``aten._weight_int8pack_mm``."""

    weights_format = "int8"

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None,
                 compute_dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__(codes.shape[1], codes.shape[0], bias)
        self.compute_dtype = compute_dtype
        self.register_buffer("codes", codes.to(torch.int8).contiguous())
        self.register_buffer("scales", scales.to(compute_dtype).contiguous())

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> "Int8Linear":
        return cls(*quantize_int8(weight), bias)

    def _weight_tensors(self) -> list[torch.Tensor]:
        return [self.codes, self.scales]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(self.compute_dtype).contiguous()
        return self._finish(torch.ops.aten._weight_int8pack_mm(rows, self.codes, self.scales), x)


def quantize_q4_1(weight: torch.Tensor, group: int = INT4_GROUP) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric 4-bit per group of ``group`` inputs, as Q4_1 does: (codes uint8 (N, K) in 0..15, d (N, K/group),
    m (N, K/group)) with weight ~= d * codes + m per group (d = (max - min) / 15, m = min; float32).

    Raises ValueError when K is not a multiple of ``group``."""
    n, k = weight.shape
    if k % group:
        raise ValueError(f"int4 needs the input width ({k}) to be a multiple of {group}")
    w = weight.detach().float().reshape(n, k // group, group)
    low, high = w.amin(dim=-1), w.amax(dim=-1)
    d = (high - low) / 15.0
    safe = torch.where(d > 0, d, torch.ones_like(d))
    codes = torch.round((w - low[..., None]) / safe[..., None]).clamp(0, 15).to(torch.uint8)
    return codes.reshape(n, k), d, low


def q4_1_scales_and_zeros(d: torch.Tensor, m: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The int4 kernel's (K/group, N, 2) ``scales_and_zeros`` for Q4_1's d, m (each (N, K/group)).

    The kernel computes (q - 8) * scale + zero; Q4_1 holds d * q + m; so scale = d and zero = m + 8 d. For d and m
    read from float16 (a GGUF file) the float32 sum m + 8 d is exact, hence so is the weight."""
    d32, m32 = d.float(), m.float()
    return torch.stack([d32, m32 + 8.0 * d32], dim=-1).transpose(0, 1).contiguous().to(dtype)


class Int4Linear(WeightLinear):
    """Weight-only int4, group-wise, through torch's CPU kernel ``aten._weight_int4pack_mm_for_cpu``.

    ``codes`` (N, K) in 0..15, ``d`` and ``m`` (N, K/group): weight = d * codes + m per group (Q4_1's form).
    Rows are padded with zeros to a multiple of 16 for the packing and dropped from the output.
    Raises ValueError when K is not a multiple of ``group``."""

    weights_format = "int4"

    def __init__(self, codes: torch.Tensor, d: torch.Tensor, m: torch.Tensor, bias: torch.Tensor | None = None,
                 group: int = INT4_GROUP, compute_dtype: torch.dtype = torch.bfloat16) -> None:
        n, k = codes.shape
        if k % group or tuple(d.shape) != (n, k // group) or d.shape != m.shape:
            raise ValueError(f"int4 codes {tuple(codes.shape)} and scales {tuple(d.shape)} do not fit group {group}")
        super().__init__(k, n, bias)
        self.group, self.compute_dtype = group, compute_dtype
        padded = -(-n // _INT4_ROWS) * _INT4_ROWS
        if padded != n:
            codes = torch.cat([codes, codes.new_zeros(padded - n, k)])
            d, m = (torch.cat([t, t.new_zeros(padded - n, t.shape[1])]) for t in (d, m))
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32).contiguous(), 1)
        self.register_buffer("packed", packed)
        self.register_buffer("scales_and_zeros", q4_1_scales_and_zeros(d, m, compute_dtype))

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> "Int4Linear":
        return cls(*quantize_q4_1(weight), bias)

    def _weight_tensors(self) -> list[torch.Tensor]:
        return [self.packed, self.scales_and_zeros]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(self.compute_dtype).contiguous()
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.packed, self.group, self.scales_and_zeros)
        if out.shape[1] != self.out_features:
            out = out[:, :self.out_features]
        return self._finish(out, x)

    def dequantized(self) -> torch.Tensor:
        """The (N, K) weight as the kernel computes it, read back through the kernel itself (identity rows)."""
        eye = torch.eye(self.in_features, dtype=self.compute_dtype)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.packed, self.group, self.scales_and_zeros)
        return out[:, :self.out_features].t().float().contiguous()
