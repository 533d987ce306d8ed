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
5. ``folded-gqa``: a layer's query heads that share a key/value head are laid out as extra query rows of that
   head (q (B, H, n, D) -> (B, H_kv, G*n, D), the mask repeated G times; G = H / H_kv), so each key/value head is
   read once per forward and the kernel multiplies G*n rows at a time instead of n. transformers does this for one
   new token without a mask (``pack_gqa``); here it also covers a verification's n > 1 tokens and masked
   (batched, tree) passes. At 1 024 cached tokens (SmolLM2-135M, 30 layers, 1 thread, this machine) attention
   over 5 new tokens took 14.6 ms per forward with SDPA's grouped-query kernel and 11.9 folded; one new token 6.0
   and 5.3 (docs/performance.md, section 12). It folds only where every thread keeps work (:func:`_enough_work`:
   one thread, or two batch x key/value-head units per thread). It runs through transformers' ``sdpa`` entry,
   replaced once per process by :func:`_folded_sdpa`, which folds only for the attention modules of a prepared
   CPU model (flag ``_specviz_fold``, off in :func:`plain_path`) and hands every other call (prefill with
   ``is_causal``, CUDA, dropout, soft-capping, sinks, compilation) to transformers' own function unchanged.
6. ``row-padding`` (chosen by measurement, :mod:`specviz.tuning`): oneDNN picks its kernel by the number of rows,
   and on some CPUs fewer rows are slower. On this project's 2-core AVX-512 machine (1 thread, the 121 packed
   linears of SmolLM2-135M) one row took 26.9 ms, two 35.1, four 21.1; with an AVX2 dispatch the cost grows
   with the rows (28.0, 27.8, ..., 33.2 for four). So a forward of n rows may be computed as m > n rows, the
   extra rows zeros and dropped, where the machine measured m rows faster (:func:`time_linear_rows`,
   :func:`choose_row_padding`, :func:`set_row_padding`); a one-token step then ran 49.5 ms instead of 53.9 and
   a two-token verification 47.5 instead of 64.7 (docs/performance.md, "Row padding").

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
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

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
            parts = _padded_linear(x, self.packed if self.packed is not None else self.weight, self.bias,
                                   member._specviz_pad).split(self.sizes, dim=-1)
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
    _specviz_pad: dict[int, int] = {}  # rows -> rows computed (row-padding); empty: none, as the class default

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
            return _padded_linear(x, packed, self.bias, self._specviz_pad)
        return _padded_linear(x, self.weight, self.bias, self._specviz_pad)


def _padded_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   pad: dict[int, int]) -> torch.Tensor:
    """oneDNN's x (..., K) @ weight.T + bias, computed over ``pad[rows]`` rows (zeros after x's) when ``pad`` maps
    x's row count to more; the extra rows are dropped (a view of the first rows is returned)."""
    if pad:
        width = x.shape[-1]
        rows = x.numel() // width
        padded = pad.get(rows)
        if padded and padded > rows:
            buffer = x.new_zeros((padded, width))
            buffer[:rows] = x.reshape(rows, width)
            return _onednn_linear(buffer, weight, bias)[:rows].reshape(*x.shape[:-1], -1)
    return _onednn_linear(x, weight, bias)


def set_row_padding(model: torch.nn.Module, table: dict[int, int]) -> None:
    """Make ``model``'s fast linears compute a forward of n rows (batch x new tokens) as ``table[n]`` rows, where
    the table has n (``row-padding`` above; an empty table turns it off). Raises ValueError for an entry m < n."""
    table = {int(n): int(m) for n, m in table.items() if int(m) != int(n)}
    if any(m < n or n < 1 for n, m in table.items()):
        raise ValueError(f"row padding must map n rows to m >= n rows: {table}")
    for module in model.modules():
        if isinstance(module, _FastLinear):
            module._specviz_pad = table


@contextlib.contextmanager
def without_row_padding(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, ``model``'s fast linears compute the rows they are given (no row padding)."""
    saved = row_padding(model)
    set_row_padding(model, {})
    try:
        yield
    finally:
        set_row_padding(model, saved)


def row_padding(model: torch.nn.Module) -> dict[int, int]:
    """The row-padding table in use ({} when none)."""
    for module in model.modules():
        if isinstance(module, _FastLinear):
            return dict(module._specviz_pad)
    return {}


def _linear_weights(model: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor | None, int]]:
    """(weight as the fast path reads it, bias, input width) of each distinct fast linear or projection group of
    ``model``."""
    seen, out = set(), []
    for module in model.modules():
        if not isinstance(module, _FastLinear):
            continue
        group = module._specviz_group
        if group is not None:
            if id(group) not in seen:
                seen.add(id(group))
                out.append((group.packed if group.packed is not None else group.weight, group.bias,
                            group.members[0].in_features))
            continue
        if id(module) in seen:
            continue
        seen.add(id(module))
        packed = module._specviz_packed
        usable = packed is not None and module._specviz_packed_from == module.weight.data_ptr()
        out.append((packed if usable else module.weight, module.bias, module.in_features))
    return out


@torch.inference_mode()
def time_linear_rows(model: torch.nn.Module, rows: list[int], repeats: int = 5, warmup: int = 1,
                     seed: int = 0) -> dict[int, float]:
    """Median ms of computing every fast linear of a prepared ``model`` once on m rows, for each m in ``rows``.

    The linears (121 for SmolLM2-135M: q/k/v and gate/up fused, the LM head) run in model order on random inputs,
    with the weights as the fast path reads them (packed where packed); the m are interleaved within each round
    (order alternating), ``warmup`` rounds untimed. The rest of a forward (attention, norms) does not depend on
    padding, so these times decide it. Raises ValueError when the model has no fast linears.
    """
    weights = _linear_weights(model)
    if not weights:
        raise ValueError("the model has no fast-path linears to time")
    gen = torch.Generator().manual_seed(seed)
    widths = {width for _, _, width in weights}
    inputs = {m: {k: torch.randn(m, k, generator=gen) for k in widths} for m in rows}
    times: dict[int, list[float]] = {m: [] for m in rows}
    for round_ in range(warmup + repeats):
        for m in (rows if round_ % 2 == 0 else rows[::-1]):
            x = inputs[m]
            t0 = time.perf_counter()
            for weight, bias, width in weights:
                _onednn_linear(x[width], weight, bias)
            if round_ >= warmup:
                times[m].append((time.perf_counter() - t0) * 1000.0)
    return {m: statistics.median(v) for m, v in times.items()}


PAD_MARGIN = 0.10  # pad only where m rows measured at least 10 % faster than n rows (a tuning run's linears-only
# times vary by a few per cent between runs: with 5 %, one run padded 5 rows to 6 and the whole forward got slower)


def choose_row_padding(times: dict[int, float], margin: float = PAD_MARGIN) -> dict[int, int]:
    """For each n in ``times`` (rows -> ms), the m >= n with the lowest time, kept where it beats T(n) by more than
    ``margin`` (a share); n itself otherwise (left out of the table). Returns {n: m} for the padded n only."""
    table = {}
    for n in sorted(times):
        best = min((m for m in times if m >= n), key=lambda m: (times[m], m))
        if best != n and times[best] < (1.0 - margin) * times[n]:
            table[n] = best
    return table


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


def _grouped_attention(model: torch.nn.Module) -> bool:
    """Turn on SDPA's grouped-query attention with masks (CPU, sdpa attention, grouped key/value heads)."""
    config = model.config.get_text_config()
    heads, kv_heads = getattr(config, "num_attention_heads", 0), getattr(config, "num_key_value_heads", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or not kv_heads or kv_heads == heads:
        return False
    os.environ.setdefault(ENV_FORCE_GQA, "1")
    return os.environ[ENV_FORCE_GQA] == "1"


_STOCK_SDPA: Callable | None = None  # transformers' own ``sdpa`` attention function, kept when it is replaced


def _fold_attention(model: torch.nn.Module) -> int:
    """Mark the grouped-query attention modules of a CPU sdpa model for :func:`_folded_sdpa` (installed once per
    process); returns how many were marked (0: nothing to fold)."""
    config = model.config.get_text_config()
    if getattr(config, "_attn_implementation", None) != "sdpa" or next(model.parameters()).device.type != "cpu":
        return 0
    modules = [m for m in model.modules() if getattr(m, "num_key_value_groups", 1) > 1]
    if not modules or not _install_folded_sdpa():
        return 0
    for module in modules:
        module._specviz_fold = True
    return len(modules)


def _install_folded_sdpa() -> bool:
    """Make :func:`_folded_sdpa` transformers' ``sdpa`` attention (idempotent); False if the registry is missing."""
    global _STOCK_SDPA
    try:
        from transformers.modeling_utils import AttentionInterface
    except ImportError:
        return False
    current = AttentionInterface._global_mapping.get("sdpa")
    if current is None:
        return False
    if current is not _folded_sdpa:
        _STOCK_SDPA = current
        AttentionInterface.register("sdpa", _folded_sdpa)
    return True


def _folded_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 is_causal: bool | None = None, position_bias: torch.Tensor | None = None, **kwargs):
    """transformers' ``sdpa`` attention with the query heads of a group folded into rows (``folded-gqa`` above).

    Args:
        module: the attention module (its ``num_key_value_groups`` G and ``_specviz_fold`` flag are read).
        query: (B, H, n, D); key, value: (B, H_kv, L, D) with H = G * H_kv (views of the cache are fine).
        attention_mask: None (one new token, nothing hidden) or (B or 1, 1, n, L), boolean or additive.

    Returns:
        ((B, n, H, D) contiguous attention output, None), as transformers' function returns.

    Any call it does not fold (module not marked, no groups, not on the CPU, n > 1 without a mask, dropout,
    position bias, soft-capping, attention sinks, attention weights asked for, or under torch.compile) goes to
    transformers' own function with the same arguments.
    """
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, n, dim = query.shape
    foldable = (getattr(module, "_specviz_fold", False) and groups > 1 and query.device.type == "cpu"
                and not dropout and position_bias is None and key.shape[1] * groups == heads
                and kwargs.get("softcap") is None and kwargs.get("s_aux") is None
                and not kwargs.get("output_attentions") and not torch.compiler.is_compiling()
                and _enough_work(batch * key.shape[1])
                and (attention_mask is None and n == 1
                     or attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[1] == 1
                     and attention_mask.shape[2] == n))
    if not foldable:
        return _STOCK_SDPA(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                           is_causal=is_causal, position_bias=position_bias, **kwargs)
    # head h reads key/value head h // G (transformers' repeat_kv), so row g*n + i of group j is query head j*G + g
    # at new position i, whose mask row is i
    rows = query.reshape(batch, heads // groups, groups * n, dim)
    mask = None if attention_mask is None else attention_mask.repeat(1, 1, groups, 1)
    out = F.scaled_dot_product_attention(rows, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(batch, heads, n, dim).transpose(1, 2).contiguous(), None


def _enough_work(units: int) -> bool:
    """Whether folding keeps every thread busy: SDPA's CPU kernel splits its work by batch row and head, and a
    folded layer has only batch x H_kv of them (3 for SmolLM2-135M), which 2 threads share 2 + 1. Measured at 1 024
    cached tokens, 30 layers: 1 thread, one new token 6.0 -> 5.3 ms folded, five 14.6 -> 11.9; 2 threads, one new
    token 4.2 -> 4.6 ms (slower), five 9.6 -> 8.7. So fold on one thread, or where each thread gets two units."""
    threads = torch.get_num_threads()
    return threads == 1 or units >= 2 * threads


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
