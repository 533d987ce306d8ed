"""Eager speed-ups for decoding on the CPU, applied once to a loaded model (no compilation, no new numerics split).

Why: on the project's 2-core AVX2/AVX-512 machine the default float32 ``nn.Linear`` (MKL sgemm through
``aten::mm``) re-reads its weight per row for 2..16 rows, so a verification forward over k+1 tokens cost about
1.7x a one-token step, and the 49152 x 576 LM head alone took 9-25 ms instead of the ~4 ms one read of its
113 MB needs. oneDNN's linear (``torch.ops.mkldnn._linear_pointwise``) on the *plain* weight (no reordered copy)
reads it about once for 1..16 rows. Measurements and conditions: docs/performance.md.

What :func:`prepare_for_decoding` does (each step only where it applies, and only after a self-test):
1. ``onednn-linear``: every exact ``torch.nn.Linear`` of a float32 model on the CPU (the tied LM head
   included) computes with oneDNN instead of ``aten::mm``. Same weights, same memory, no copy.
2. ``fused-projections``: the q/k/v projections of each attention block and the gate/up projections of each
   MLP are computed as one wider linear over their weights laid end to end in one buffer (the parameters
   become views of that buffer, so memory does not grow and ``state_dict`` is unchanged). The first
   projection's call computes all of them for that input; the others return their slice when called with
   the same input tensor (and compute on their own otherwise).
3. ``packed-weights``: each fast linear (and each fused group) also keeps its weight reordered by oneDNN for
   several rows (``torch.ops.mkldnn._reorder_linear_weight`` with a batch hint of 16) and computes with that copy:
   the plain layout reads its weight about once for one row but its cost grows with the rows (the LM head:
   5.5 ms for 1 row, 8.6 ms for 5), while the reordered one stays flat (5.6 and 3.4 ms; 6.2 ms for 17), so a
   verification over k+1 tokens costs little more than a one-token step. The copy doubles the weights' memory, so
   it is made only while the machine has at least three times the model's size free
   (:data:`PACK_MEMORY_FACTOR`); the plain parameters stay for ``state_dict``, training and :func:`plain_path`.
4. ``sdpa-gqa``: attention over several new tokens (a verification) reads the grouped key/value heads directly
   (SDPA's ``enable_gqa``) instead of copying them per query head (transformers' ``repeat_kv``, which it does
   whenever a mask is needed, i.e. for every pass of k+1 tokens after a prompt): transformers' own switch
   ``TRANSFORMERS_SDPA_FORCE_GQA=1``, set for the process when a CPU model is prepared (on CUDA the masked GQA
   kernel is the slow math one, so it stays off there). Same values: the kernels compute the same sums.

Exactness: the model object is changed in place, so everything that runs it (the standard baseline, every
verification, early-exit drafters that share its layers, transformers' own ``generate()`` in the benchmark)
uses the same kernels and sees the same numerics. The fast logits differ from the default kernels' only by
float32 rounding (about 1e-5 relative), so greedy outputs can differ from an unprepared model only at
near-ties; within one prepared model the baseline and the speculative run agree as before.

Opt out with ``SPECVIZ_FAST=0`` (checked at load time), or compare within one process with
:func:`plain_path`, which switches a prepared model back to the default kernels temporarily.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F

ENV_FAST = "SPECVIZ_FAST"
PACK_BATCH_HINT = 16  # the rows oneDNN's reordered layout is made for (it serves 1..256 rows correctly)
PACK_MEMORY_FACTOR = 3  # pack only while MemAvailable >= this x the model's bytes (the copy doubles them)
ENV_FORCE_GQA = "TRANSFORMERS_SDPA_FORCE_GQA"  # transformers' switch: SDPA's grouped-query attention even with a mask
_ATTENTION_GROUP = ("q_proj", "k_proj", "v_proj")
_MLP_GROUP = ("gate_proj", "up_proj")


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


def fast_path_enabled() -> bool:
    """False when the environment variable ``SPECVIZ_FAST`` is 0/false/no/off."""
    return os.environ.get(ENV_FAST, "1").strip().lower() not in ("0", "false", "no", "off")


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


def prepare_draft_head(module: torch.nn.Module) -> int:
    """Switch the exact ``nn.Linear`` layers of a small float32 CPU module (an EAGLE / Medusa draft head) to
    oneDNN's linear, as :func:`prepare_for_decoding` does for a target. No self-test is needed: a draft's
    numerics never touch exactness (the target verifies every token). Returns the number of layers switched (0
    when the fast path is off or not usable)."""
    if not fast_path_enabled() or _onednn_unusable(module) is not None:
        return 0
    return _switch_linears(module)


def draft_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (..., K) @ weight (N, K).T for a draft (e.g. a narrow LM head): oneDNN on a float32 CPU tensor without
    gradients when the fast path is on, else ``F.linear``."""
    if (x.device.type == "cpu" and x.dtype == torch.float32 and weight.dtype == torch.float32 and fast_path_enabled()
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))):
        return _onednn_linear(x, weight, None)
    return F.linear(x, weight)


def set_fast_path(model: torch.nn.Module, on: bool) -> None:
    """Switch a prepared model's linears to the fast kernels (``on``) or to the default ones, until switched
    again (:mod:`specviz.tuning` turns the fast path off where it measured slower)."""
    for module in model.modules():
        if isinstance(module, _FastLinear):
            module._specviz_fast = bool(on)


@contextlib.contextmanager
def plain_path(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, ``model``'s prepared linears use the default kernels (``F.linear``, one per layer)."""
    modules = [m for m in model.modules() if isinstance(m, _FastLinear)]
    saved = [m._specviz_fast for m in modules]
    for m in modules:
        m._specviz_fast = False
    try:
        yield
    finally:
        for m, was in zip(modules, saved):
            m._specviz_fast = was


# ------------------------------------------------------------------------------------------------ kernels


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (..., K) @ weight (N, K).T + bias (N) with oneDNN, reading the plain weight (no reordered copy)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _Group:
    """Projections that read the same input, computed as one linear over a shared weight buffer.

    ``weight`` is (sum of N_i, K); member i's parameter is rows [offset_i, offset_i + N_i) of it.
    """

    def __init__(self, members: list[torch.nn.Linear]) -> None:
        self.members = members
        self.sizes = [m.out_features for m in members]
        with torch.no_grad():
            self.weight = torch.cat([m.weight for m in members]).contiguous()
            has_bias = members[0].bias is not None
            self.bias = torch.cat([m.bias for m in members]).contiguous() if has_bias else None
            offset = 0
            for member, size in zip(members, self.sizes):
                member.weight = torch.nn.Parameter(self.weight[offset:offset + size], requires_grad=False)
                if has_bias:
                    member.bias = torch.nn.Parameter(self.bias[offset:offset + size], requires_grad=False)
                offset += size
        self._pointers = [m.weight.data_ptr() for m in members]
        self.packed: torch.Tensor | None = None  # the weight reordered for several rows (see ``packed-weights``)
        self._local = threading.local()

    def intact(self) -> bool:
        """Whether every member still reads its slice of the buffer (false after ``.to()`` or a re-assignment)."""
        return all(m.weight.data_ptr() == p for m, p in zip(self.members, self._pointers))

    def output(self, member: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        state = self._local
        index = self.members.index(member)
        if index == 0:
            if not self.intact():
                return _onednn_linear(x, member.weight, member.bias)
            parts = _onednn_linear(x, self.packed if self.packed is not None else self.weight,
                                   self.bias).split(self.sizes, dim=-1)
            state.x, state.parts, state.next = x, parts, 1
            return parts[0]
        if getattr(state, "x", None) is x and state.next == index:
            part = state.parts[index]
            state.next += 1
            if state.next == len(self.members):
                state.x = state.parts = None
            return part
        return _onednn_linear(x, member.weight, member.bias)


class _FastLinear(torch.nn.Linear):
    """An ``nn.Linear`` whose forward uses oneDNN (and its projection group, if any) under inference."""

    _specviz_fast = True
    _specviz_group: _Group | None = None
    _specviz_packed: torch.Tensor | None = None
    _specviz_packed_from: int = 0  # the plain weight's address when it was packed (a moved weight is not reused)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (not self._specviz_fast or x.device.type != "cpu" or x.dtype != self.weight.dtype
                or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))):
            return F.linear(x, self.weight, self.bias)
        if torch.compiler.is_compiling():  # traced by specviz.compiled: oneDNN on the plain weight, one opaque op
            return torch.ops.specviz.onednn_linear(x, self.weight, self.bias)
        if self._specviz_group is not None:
            return self._specviz_group.output(self, x)
        packed = self._specviz_packed
        if packed is not None and self._specviz_packed_from == self.weight.data_ptr():
            return _onednn_linear(x, packed, self.bias)
        return _onednn_linear(x, self.weight, self.bias)


# ------------------------------------------------------------------------------------------------ applying


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
    applied = (("onednn-linear",) + (("fused-projections",) if groups else ()) + (("packed-weights",) if packed else ())
               + (("sdpa-gqa",) if gqa else ()))
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


def _grouped_attention(model: torch.nn.Module) -> bool:
    """Turn on SDPA's grouped-query attention with masks (CPU, sdpa attention, grouped key/value heads)."""
    config = model.config.get_text_config()
    heads, kv_heads = getattr(config, "num_attention_heads", 0), getattr(config, "num_key_value_heads", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or not kv_heads or kv_heads == heads:
        return False
    os.environ.setdefault(ENV_FORCE_GQA, "1")
    return os.environ[ENV_FORCE_GQA] == "1"


def _onednn_unusable(model: torch.nn.Module) -> str | None:
    """Why the oneDNN linear cannot be used for ``model`` (None when it can)."""
    try:
        weight = next(model.parameters())
    except StopIteration:
        return "the model has no parameters"
    if weight.device.type != "cpu":
        return f"not on the CPU ({weight.device})"
    if weight.dtype != torch.float32:
        return f"{str(weight.dtype).removeprefix('torch.')} already uses oneDNN by default (float32 only)"
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "oneDNN is not available in this torch build"
    try:
        x, w = torch.randn(3, 2, 8), torch.randn(5, 8)
        if not torch.allclose(_onednn_linear(x, w, None), F.linear(x, w), rtol=1e-4, atol=1e-5):
            return "oneDNN's linear disagrees with torch's on a small check"
    except Exception as error:  # noqa: BLE001
        return f"oneDNN's linear failed ({type(error).__name__})"
    return None


def _switch_linears(model: torch.nn.Module) -> int:
    count = 0
    for module in {id(m): m for m in model.modules()}.values():
        if type(module) is torch.nn.Linear:
            module.__class__ = _FastLinear
            count += 1
    return count


def _fuse_projections(model: torch.nn.Module) -> int:
    groups = 0
    for module in list(model.modules()):
        for names in (_ATTENTION_GROUP, _MLP_GROUP):
            members = [getattr(module, name, None) for name in names]
            if not all(isinstance(m, _FastLinear) and m._specviz_group is None for m in members):
                continue
            if len({m.in_features for m in members}) != 1 or len({m.bias is None for m in members}) != 1:
                continue
            if len({m.weight.dtype for m in members}) != 1:
                continue
            group = _Group(members)
            for member in members:
                member._specviz_group = group
            groups += 1
    return groups


def _undo(model: torch.nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, _FastLinear):
            module._specviz_group = None  # the weights stay views of the group's buffer: same values
            module._specviz_packed = None
            module.__class__ = torch.nn.Linear


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
