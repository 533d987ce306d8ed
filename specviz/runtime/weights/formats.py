"""A loaded target in another weight format: its linear layers (the LM head included) swapped for formatted ones.

:func:`with_weights` returns a new :class:`~specviz.runtime.models.LoadedModel` whose model is a light copy of the loaded
one: every module object is copied, every tensor shared, and only the linears are replaced, so the float32 model
stays as it was (in the model cache, for the float32 runs one click away) and the copy costs only the new
weights. Everything that runs the copy (standard decoding, every verification, drafters that share the target's
layers) uses the same formatted weights and kernels: exactness holds inside a format, not across formats.

For the embedded model, int4 is packed from the GGUF file's own Q4_1 blocks (specviz.runtime.weights.q4_1): the 4-bit
codes are the file's; d and m are rounded to bfloat16 for the fast CPU kernel. The LM head, tied to the embedding
(Q8_0 in the file), is int8 in the int4 format (:data:`HEAD_FORMAT`), quantized per row from its float values.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch

from specviz.runtime.weights.fused import fusable_groups, fuse_group
from specviz.runtime.weights.linears import Bf16Linear, Int4Linear, Int8Linear, WeightLinear

FORMATS = ("float32", "bfloat16", "int8", "int4")
CPU_ONLY = ("int8", "int4")  # torch's weight-only kernels used here are CPU ones
# The LM head's format where it differs from the other linears': in int4 it stays in 8 bits, as the embedded GGUF
# keeps it (Q8_0); a 4-bit head changed the embedded model's greedy text within a dozen tokens.
HEAD_FORMAT = {"int4": "int8"}

Progress = Callable[[str], None]

class WeightsError(ValueError):
    """A weight format that cannot be applied here; the message is one sentence for the person who asked."""


@dataclasses.dataclass(frozen=True)
class WeightsReport:
    """What :func:`apply_weights` did: the format, how many linears it changed, where their values came from
    (``from_file``: the GGUF's own blocks; ``from_float``: quantized from the loaded weights), the ones kept as
    they were with the reason, and the bytes of all linears before and after (what one step reads of them)."""

    format: str
    linears: int = 0
    from_file: int = 0
    from_float: int = 0
    kept: tuple[str, ...] = ()
    float_bytes: int = 0
    step_bytes: int = 0
    fused_groups: int = 0

    def summary(self) -> str:
        """One line, e.g. "int4: 211 linears (210 from the file's Q4_1 blocks), 80 MB of linears (float32: 538 MB)"."""
        source = f" ({self.from_file} from the file's Q4_1 blocks)" if self.from_file else ""
        kept = f"; kept: {', '.join(self.kept)}" if self.kept else ""
        fused = f"; {self.fused_groups} q/k/v and gate/up groups fused" if self.fused_groups else ""
        return (f"{self.format}: {self.linears} linears{source}, {self.step_bytes / 1e6:.0f} MB of linears "
                f"(float32: {self.float_bytes / 1e6:.0f} MB){fused}{kept}")


def check_format(name: str) -> str:
    """``name`` when it is one of :data:`FORMATS`; raises WeightsError otherwise."""
    if name not in FORMATS:
        raise WeightsError(f"unknown weight format {name!r}: choose one of {', '.join(FORMATS)}")
    return name


def weights_of(model: torch.nn.Module) -> str:
    """The weight format a model runs in ("float32" unless :func:`apply_weights` changed it)."""
    return getattr(model, "_specviz_weights", "float32")


def linear_bytes(model: torch.nn.Module) -> int:
    """Bytes of every linear's weight (and scales and bias) in its current format: what one step reads of them."""
    total = 0
    for module in model.modules():
        if isinstance(module, WeightLinear):
            total += module.weight_bytes()
        elif isinstance(module, torch.nn.Linear):
            total += sum(p.numel() * p.element_size() for p in (module.weight, module.bias) if p is not None)
    return total


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes of all parameters and buffers of ``model``, a tensor shared by several modules counted once."""
    seen = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        seen[(tensor.data_ptr(), tensor.numel(), tensor.dtype)] = tensor.numel() * tensor.element_size()
    return sum(seen.values())


def step_bytes(model: torch.nn.Module) -> int:
    """Bytes one decode step reads of ``model``'s weights, as ``LoadedModel.param_bytes`` counts them for the
    floors: all parameters and buffers (:func:`model_bytes`) less the input embedding table when no linear reads
    it as its weight (a formatted LM head no longer does; a step looks up one row of the table)."""
    total = model_bytes(model)
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    table = getattr(embeddings, "weight", None)
    if table is None or any(isinstance(m, torch.nn.Linear) and m.weight is table for m in model.modules()):
        return total
    return total - table.numel() * table.element_size()


def light_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` and all its submodules as new objects that share every parameter and buffer."""
    clone = copy.copy(module)
    clone._parameters = dict(module._parameters)
    clone._buffers = dict(module._buffers)
    clone._modules = {name: None if child is None else light_copy(child) for name, child in module._modules.items()}
    return clone


def _formatted(linear: torch.nn.Linear, fmt: str, blocks) -> WeightLinear:
    """``linear`` in ``fmt``; int4 from ``blocks`` (a Q4_1Tensor) when given, else quantized from its weight."""
    if fmt == "bfloat16":
        return Bf16Linear(linear.weight, linear.bias)
    if fmt == "int8":
        return Int8Linear.from_float(linear.weight, linear.bias)
    if blocks is not None:
        return Int4Linear(blocks.codes, blocks.d, blocks.m, linear.bias)
    return Int4Linear.from_float(linear.weight, linear.bias)


def apply_weights(model: torch.nn.Module, fmt: str, file_tensors: dict | None = None,
                  fuse: bool = True, target: bool = True) -> WeightsReport:
    """Replace every ``nn.Linear`` of ``model`` (in place) by its ``fmt`` form; ``file_tensors`` maps module paths to
    Q4_1 tensors to pack as they are (int4). With ``fuse``, each q/k/v and gate/up group becomes one fused linear
    (specviz.runtime.weights.fused). A linear the format cannot hold (int4: input width not a multiple of 32) is
    kept and named in the report. ``target`` False for a draft module (a trained head): its attention is not
    made row-exact, since no verification runs through it. Raises WeightsError for an unknown format."""
    check_format(fmt)
    before = linear_bytes(model)
    if fmt == "float32":
        return WeightsReport(fmt, float_bytes=before, step_bytes=before)
    table = file_tensors or {}
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    changed, from_file, groups = 0, 0, 0
    for path, names in fusable_groups(model, skip=head) if fuse else []:
        parent = model.get_submodule(path) if path else model
        full = [f"{path}.{n}" if path else n for n in names]
        try:
            fuse_group(parent, names, fmt, [table.get(n) for n in full])
        except ValueError:
            continue  # formatted one by one below, where the reason is reported
        changed, from_file, groups = changed + len(names), from_file + sum(n in table for n in full), groups + 1
    kept = []
    for name, linear in [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]:
        try:
            new = _formatted(linear, HEAD_FORMAT.get(fmt, fmt) if linear is head else fmt, table.get(name))
        except ValueError as error:
            kept.append(f"{name} ({error})")
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        parent._modules[child] = new
        changed += 1
        from_file += name in table
    model._specviz_weights = fmt
    if target and next(model.parameters()).device.type == "cpu":  # bfloat16 inputs: verifications' attention row by row
        from specviz.runtime.speed.attention import mark_row_exact

        mark_row_exact(model)
    return WeightsReport(fmt, linears=changed, from_file=from_file, from_float=changed - from_file,
                         kept=tuple(kept), fused_groups=groups, float_bytes=before, step_bytes=linear_bytes(model))


def head_weight(model: torch.nn.Module) -> torch.Tensor:
    """The LM head's weight as floats, (vocab, hidden), for code that reads it directly (the trained heads' draft
    LM head): the head's own weight while it is an ``nn.Linear``; in a weight format, the input embedding table it
    is tied to (the float32 values the format was made from), else the format's values read back (int8: codes x
    scales; int4: through its kernel). Drafting only: verification always runs the formatted head itself."""
    head = model.get_output_embeddings()
    if isinstance(head, torch.nn.Linear):
        return head.weight
    config = getattr(model, "config", None)
    table = model.get_input_embeddings().weight
    if getattr(config, "tie_word_embeddings", False) and tuple(table.shape) == (head.out_features, head.in_features):
        return table
    if hasattr(head, "dequantized"):
        return head.dequantized()
    if hasattr(head, "codes"):
        return head.codes.float() * head.scales.float()[:, None]
    return head.weight.float()

