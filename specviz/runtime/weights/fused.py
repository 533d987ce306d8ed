"""Fused projection groups for the formatted linears: q/k/v of each attention block, gate/up of each MLP.

The projections of a group read the same input (the normed hidden state), so a formatted model computes them as
one wider linear: one cast of the input rows to the kernel's dtype, one kernel call, one cast back, instead of
three (or two) of each. The fused linear holds the members' weights laid end to end along the output dimension
(:func:`fused_linear`): bfloat16 and int8 concatenate the weights (int8 is per output row, so quantizing the
concatenation gives each member's own codes and scales); int4 concatenates each member's Q4_1 codes, d and m
(the GGUF file's own blocks where the file has them) and packs the whole, padded to 16 rows once.

Each member is replaced by a :class:`FusedMember`, which returns its columns of the group's product for its
input. The first member called with an input tensor computes the whole product and keeps it; the others, called
with that same tensor object, return their slice of it. A member called with another tensor (or a second time)
computes the group's product for it and takes its slice, so its output is always its columns of the fused
product for its own input: the same numbers whichever order or input the modeling code uses.

Shapes: a member maps (..., in_features) -> (..., out_features); the group's linear (..., sum of out_features).
"""

from __future__ import annotations

import threading

import torch

from specviz.runtime.weights.linears import Bf16Linear, Int4Linear, Int8Linear, WeightLinear, quantize_q4_1

ATTENTION_GROUP = ("q_proj", "k_proj", "v_proj")
MLP_GROUP = ("gate_proj", "up_proj")
GROUPS = (ATTENTION_GROUP, MLP_GROUP)


class FusedProjections:
    """The product of a group's fused linear, kept per thread for the input tensor that asked for it last."""

    def __init__(self, linear: WeightLinear, sizes: list[int]) -> None:
        self.linear = linear
        self.sizes = [int(s) for s in sizes]
        self._local = threading.local()

    def output(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """Member ``index``'s columns of the fused product for ``x`` (..., in_features) -> (..., sizes[index])."""
        state = self._local
        if getattr(state, "x", None) is x and index in state.waiting:
            state.waiting.discard(index)
            part = state.parts[index]
            if not state.waiting:
                state.x = state.parts = None
            return part
        parts = self.linear(x).split(self.sizes, dim=-1)
        state.x, state.parts = x, parts
        state.waiting = set(range(len(self.sizes))) - {index}
        return parts[index]


class FusedMember(torch.nn.Module):
    """One projection of a fused group (replaces its ``nn.Linear``). The first member holds the group's linear as
    its submodule ``fused`` (so the weights are counted and saved once); the others reach it through the group."""

    def __init__(self, group: FusedProjections, index: int) -> None:
        super().__init__()
        self.group, self.index = group, index
        self.in_features = group.linear.in_features
        self.out_features = group.sizes[index]
        self.weights_format = group.linear.weights_format
        if index == 0:
            self.fused = group.linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group.output(self.index, x)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, format={self.weights_format}, "
                f"member {self.index} of {len(self.group.sizes)}")


def _int4_blocks(linear: torch.nn.Linear, blocks) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, d, m) of ``linear``: the file's Q4_1 blocks when given, else quantized from its weight."""
    if blocks is not None:
        return blocks.codes, blocks.d, blocks.m
    return quantize_q4_1(linear.weight)


def fused_linear(members: list[torch.nn.Linear], fmt: str, file_blocks: list) -> WeightLinear:
    """One ``fmt`` linear over ``members``' weights laid end to end along the output dimension (bias too, when
    they have one); ``file_blocks``: each member's Q4_1 tensor from the file, or None (int4 only).

    Raises ValueError when ``fmt`` cannot hold the weights (int4: input width not a multiple of 32)."""
    bias = None if members[0].bias is None else torch.cat([m.bias.detach() for m in members])
    if fmt == "int4":
        codes, d, m = (torch.cat(parts) for parts in zip(*(_int4_blocks(lin, blocks)
                                                            for lin, blocks in zip(members, file_blocks))))
        return Int4Linear(codes, d, m, bias)
    weight = torch.cat([m.weight.detach() for m in members])
    if fmt == "int8":
        return Int8Linear.from_float(weight, bias)
    if fmt == "bfloat16":
        return Bf16Linear(weight, bias)
    raise ValueError(f"no fused form for {fmt}")


def fusable_groups(model: torch.nn.Module, skip: torch.nn.Module | None = None) -> list[tuple[str, list[str]]]:
    """(parent module path, member names) of each q/k/v and gate/up group of ``model`` whose members are
    ``nn.Linear`` layers (the float32 fast path's included) with one input width and all or none with a bias
    (``skip`` is never a member)."""
    found = []
    for path, module in model.named_modules():
        for names in GROUPS:
            members = [getattr(module, name, None) for name in names]
            if not all(isinstance(m, torch.nn.Linear) and m is not skip for m in members):
                continue
            if len({m.in_features for m in members}) != 1 or len({m.bias is None for m in members}) != 1:
                continue
            found.append((path, list(names)))
    return found


def fuse_group(parent: torch.nn.Module, names: list[str], fmt: str, file_blocks: list) -> FusedProjections:
    """Replace ``parent``'s linears ``names`` (in place) by the members of one fused ``fmt`` group; returns it.
    Raises ValueError (from :func:`fused_linear`) and leaves ``parent`` unchanged when the format cannot hold them."""
    members = [getattr(parent, name) for name in names]
    group = FusedProjections(fused_linear(members, fmt, file_blocks), [m.out_features for m in members])
    for index, name in enumerate(names):
        parent._modules[name] = FusedMember(group, index)
    return group
