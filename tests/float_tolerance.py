"""Tolerances for comparing float32 results that two kernels (or two shapes of one kernel) computed.

Why a derived tolerance instead of a fixed atol: which CPU kernel runs depends on the instruction set the CPU
offers (AVX2 or AVX-512), and each kernel sums a dot product of length K in its own order (SIMD width,
blocking, FMA). Reordering a float32 sum of K products changes it by at most about K * eps * sum|a_k b_k|, and
typically by about sqrt(K) * eps * sum|a_k b_k| (the rounding errors are independent and partly cancel, like a
random walk). A fixed atol such as 1e-4 is far too loose for small values and too tight for large logits;
scaling with sqrt(K), eps and the magnitude holds on every instruction set.

Used by the tests marked ``kernels`` (``make test`` runs them a second time with an AVX2 dispatch).
"""

from __future__ import annotations

import torch

EPS32 = torch.finfo(torch.float32).eps  # 1.19e-7: the spacing of float32 numbers near 1.0

# Headroom over the largest difference measured. Logits of SmolLM2-135M (K = 576, 30 layers) through oneDNN vs
# MKL: 1.1 units on AVX-512, 1.5 units on AVX2. Tiny test model, cached vs fresh prefill and tree-pruned vs
# fresh keys/values: up to 0.8 units on AVX2 (exactly equal on AVX-512). One unit = sqrt(K) * eps * max|ref|.
HEADROOM = 8.0


def model_tolerance(reference: torch.Tensor, reduction: int, headroom: float = HEADROOM) -> float:
    """Absolute tolerance for a model output (logits, keys or values) computed by two kernel paths.

    Args:
        reference: the output of one path, any shape; its largest magnitude sets the scale.
        reduction: K, the length of the last dot products that produced it (the hidden size for logits).
        headroom: the factor over one unit (see HEADROOM).

    Returns ``headroom * sqrt(K) * eps * max|reference|``. It uses the output's magnitude in place of
    sum|a_k b_k| of every element: rounding in earlier layers also reaches the output, but each layer's norm
    rescales it, so the final dot products' size is what matters (the measured units above confirm it).
    """
    scale = float(reference.detach().abs().max().clamp_min(1.0))
    return headroom * reduction ** 0.5 * EPS32 * scale


def matmul_tolerance(x: torch.Tensor, weight: torch.Tensor, headroom: float = 4.0) -> torch.Tensor:
    """Per-element tolerance (..., N) for x (..., K) @ weight (N, K).T computed by two kernels.

    ``headroom * sqrt(K) * eps * (|x| @ |weight|.T)``: the bound above with the true sum|a_k b_k| of each
    element, plus 1e-30 so that an exactly-zero product allows no difference but does not divide by zero.
    """
    magnitude = x.detach().abs().float() @ weight.detach().abs().float().T
    return headroom * x.shape[-1] ** 0.5 * EPS32 * magnitude + 1e-30


def assert_within(actual: torch.Tensor, expected: torch.Tensor, tolerance: float | torch.Tensor, what: str) -> None:
    """Assert |actual - expected| <= tolerance element-wise (NaN fails), naming the worst element's ratio."""
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    error = (actual.detach().float() - expected.detach().float()).abs()
    ratio = error / tolerance
    worst = float(ratio.max()) if ratio.numel() else 0.0
    assert not torch.isnan(error).any() and worst <= 1.0, (
        f"{what}: differs by {float(error.max()):.3g}, {worst:.3g}x the float32 rounding tolerance "
        f"(CPU capability {torch.backends.cpu.get_cpu_capability()})")
