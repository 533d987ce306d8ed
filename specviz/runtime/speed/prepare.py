"""Applying the fast path to a model: :func:`prepare_for_decoding` (each step after a self-test, undone when it
fails), the :class:`SpeedReport`, switching it on and off (:func:`set_fast_path`, :func:`plain_path`) and packing
the weights where memory allows."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import torch

from specviz.runtime.speed.attention import _fold_attention, _grouped_attention
from specviz.runtime.speed.kernels import (ENV_FAST, _FastLinear, _fuse_projections, _onednn_unusable, _switch_linears,
                                   fast_path_enabled)

PACK_BATCH_HINT = 16  # the rows oneDNN's reordered layout is made for (it serves 1..256 rows correctly)
PACK_MEMORY_FACTOR = 3  # pack only while MemAvailable >= this x the model's bytes (the copy doubles them)


@dataclass(frozen=True)
class SpeedReport:
    """What :func:`prepare_for_decoding` did to a model.

    Attributes:
        applied: names of the speed-ups in use ("onednn-linear", "fused-projections").
        skipped: one short reason per speed-up not in use (e.g. "onednn-linear: not float32").
        linears: linear layers switched to the fast kernel (the tied LM head counts once).
        fused_groups: groups of projections computed as one linear (q/k/v and gate/up per layer).
    """

    applied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    linears: int = 0
    fused_groups: int = 0

    @property
    def active(self) -> bool:
        """True when any speed-up is in use."""
        return bool(self.applied)

    def summary(self) -> str:
        """One line, e.g. "onednn-linear (211 linears), fused-projections (60 groups)"."""
        parts = []
        for name in self.applied:
            if name == "onednn-linear":
                parts.append(f"{name} ({self.linears} linears)")
            elif name == "fused-projections":
                parts.append(f"{name} ({self.fused_groups} groups)")
            else:
                parts.append(name)
        return ", ".join(parts) if parts else "default kernels (" + "; ".join(self.skipped) + ")"


def report_of(model: torch.nn.Module) -> SpeedReport | None:
    """The report of the last :func:`prepare_for_decoding` on ``model``, or None if it was never prepared."""
    return getattr(model, "_specviz_speed_report", None)


def prepare_for_decoding(model: torch.nn.Module, *, enabled: bool | None = None,
                         fuse: bool = True) -> SpeedReport:
    """Apply the eager CPU speed-ups to ``model`` in place (idempotent) and say what was applied.

    Args:
        model: a loaded causal LM in eval mode (gradients off).
        enabled: False applies nothing; None follows :func:`fast_path_enabled`.
        fuse: also compute q/k/v and gate/up as one linear each.

    A self-test runs one tiny forward with and without the speed-ups; if it fails or the logits differ beyond
    float32 rounding, everything is undone and the report says why.
    """
    previous = report_of(model)
    if previous is not None:
        return previous
    report = _prepare(model, fast_path_enabled() if enabled is None else enabled, fuse)
    model._specviz_speed_report = report
    return report


def set_fast_path(model: torch.nn.Module, on: bool) -> None:
    """Switch a prepared model's linears to the fast kernels (``on``) or to the default ones, until switched
    again (:mod:`specviz.measure.tuning` turns the fast path off where it measured slower)."""
    for module in model.modules():
        if isinstance(module, _FastLinear):
            module._specviz_fast = bool(on)
        elif hasattr(module, "_specviz_fold"):
            module._specviz_fold = bool(on)


@contextlib.contextmanager
def plain_path(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, ``model``'s prepared linears use the default kernels (``F.linear``, one per layer) and its
    attention is not folded (transformers' own ``sdpa``)."""
    modules = [m for m in model.modules() if isinstance(m, _FastLinear)]
    attention = [m for m in model.modules() if hasattr(m, "_specviz_fold")]
    saved = [m._specviz_fast for m in modules]
    folded = [m._specviz_fold for m in attention]
    for m in modules:
        m._specviz_fast = False
    for m in attention:
        m._specviz_fold = False
    try:
        yield
    finally:
        for m, was in zip(modules, saved):
            m._specviz_fast = was
        for m, was in zip(attention, folded):
            m._specviz_fold = was


def _prepare(model: torch.nn.Module, enabled: bool, fuse: bool) -> SpeedReport:
    if not enabled:
        return SpeedReport(skipped=(f"disabled ({ENV_FAST}=0 or enabled=False)",))
    reason = _onednn_unusable(model)
    if reason is not None:
        return SpeedReport(skipped=(f"onednn-linear: {reason}",))
    try:
        reference = _probe_logits(model)
    except Exception as error:  # noqa: BLE001 - a model this probe cannot run keeps the default kernels
        return SpeedReport(skipped=(f"onednn-linear: self-test forward failed ({type(error).__name__})",))
    linears = _switch_linears(model)
    groups = _fuse_projections(model) if fuse else 0
    packed, why_not = _pack_weights(model)
    gqa = _grouped_attention(model)
    folded = _fold_attention(model)
    applied = (("onednn-linear",) + (("fused-projections",) if groups else ()) + (("packed-weights",) if packed else ())
               + (("sdpa-gqa",) if gqa else ()) + (("folded-gqa",) if folded else ()))
    skipped = () if groups else (("fused-projections: off",) if not fuse else
                                 ("fused-projections: no q/k/v or gate/up projections found",))
    skipped += () if packed else (f"packed-weights: {why_not}",)
    try:
        problem = _compare(reference, _probe_logits(model))
    except Exception as error:  # noqa: BLE001 - any failure means: do not use the fast path
        problem = f"self-test raised {type(error).__name__}: {error}"
    if problem is not None:
        _undo(model)
        return SpeedReport(skipped=(f"onednn-linear: {problem}",))
    return SpeedReport(applied=applied, skipped=skipped, linears=linears, fused_groups=groups)


def _memory_available() -> int | None:
    """Bytes the kernel says are available (Linux /proc/meminfo), None when unknown."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@torch.inference_mode()
def _pack_weights(model: torch.nn.Module) -> tuple[int, str]:
    """Give every fast linear and fused group a weight reordered for several rows; (count, why not when 0)."""
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    free = _memory_available()
    if free is None or free < PACK_MEMORY_FACTOR * size:
        return 0, "not enough free memory for a second copy of the weights" if free is not None else "memory unknown"
    reorder = getattr(torch.ops.mkldnn, "_reorder_linear_weight", None)
    if reorder is None:
        return 0, "this torch build cannot reorder weights for oneDNN"
    count = 0
    groups = {id(m._specviz_group): m._specviz_group for m in model.modules()
              if isinstance(m, _FastLinear) and m._specviz_group is not None}
    for group in groups.values():
        group.packed = reorder(group.weight, PACK_BATCH_HINT)
        count += 1
    for module in {id(m): m for m in model.modules()}.values():
        if isinstance(module, _FastLinear) and module._specviz_group is None:
            module._specviz_packed = reorder(module.weight.detach(), PACK_BATCH_HINT)
            module._specviz_packed_from = module.weight.data_ptr()
            count += 1
    return count, ""


def _undo(model: torch.nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, _FastLinear):
            module._specviz_group = None  # the weights stay views of the group's buffer: same values
            module._specviz_packed = None
            module.__class__ = torch.nn.Linear
        elif hasattr(module, "_specviz_fold"):
            del module._specviz_fold


@torch.inference_mode()
def _probe_logits(model: torch.nn.Module) -> torch.Tensor:
    """Logits at the last 2 of 4 fixed tokens (one forward, no cache), for the self-test."""
    vocab = int(getattr(model.config.get_text_config(), "vocab_size", 2) or 2)
    ids = torch.arange(4, dtype=torch.long).mul_(7919).remainder_(vocab).view(1, 4)
    return model(input_ids=ids, use_cache=False, logits_to_keep=2).logits.float()


def _compare(reference: torch.Tensor, fast: torch.Tensor) -> str | None:
    scale = float(reference.abs().max().clamp_min(1.0))
    error = float((reference - fast).abs().max())
    if not error <= 1e-3 * scale:  # float32 rounding gives ~1e-5 of the scale; NaN fails too
        return f"self-test logits differ by {error:.3g} (scale {scale:.3g})"
    return None
