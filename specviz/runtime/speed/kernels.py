"""The linear kernels of the fast path: oneDNN's linear on the plain weight, fused projection groups, the packed
(reordered) weights, and row padding with its measurement (:func:`time_linear_rows`, :func:`choose_row_padding`)."""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from typing import Iterator

import torch
import torch.nn.functional as F

ENV_FAST = "SPECVIZ_FAST"
_ATTENTION_GROUP = ("q_proj", "k_proj", "v_proj")
_MLP_GROUP = ("gate_proj", "up_proj")


def fast_path_enabled() -> bool:
    """False when the environment variable ``SPECVIZ_FAST`` is 0/false/no/off."""
    return os.environ.get(ENV_FAST, "1").strip().lower() not in ("0", "false", "no", "off")


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
        if torch.compiler.is_compiling():  # traced by specviz.runtime.compiled: oneDNN on the plain weight, one opaque op
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
