"""A :class:`~specviz.runtime.models.LoadedModel` in a weight format: the hook the CLI (and later the app) calls after loading.

``with_weights(target, "int4")`` returns a new LoadedModel (cached per loaded model and format) whose label names
the format and whose ``param_bytes`` are the bytes a step reads (:func:`specviz.runtime.weights.formats.step_bytes`: the
float32 embedding table left out, as a formatted head no longer reads it), which the kernel bench's floors use; ``"float32"`` returns the target itself. See :mod:`specviz.runtime.weights.formats`.
"""

from __future__ import annotations

import dataclasses
import weakref

import torch

from specviz.runtime.weights.formats import (CPU_ONLY, Progress, WeightsError, WeightsReport, apply_weights, check_format,
                                     light_copy, step_bytes, weights_of)

_MADE: "weakref.WeakKeyDictionary[object, dict[str, object]]" = weakref.WeakKeyDictionary()
_REPORTS: "weakref.WeakKeyDictionary[torch.nn.Module, WeightsReport]" = weakref.WeakKeyDictionary()


def weights_report(model: torch.nn.Module) -> WeightsReport | None:
    """The report of the formatting that made ``model`` (None for a model :func:`with_weights` did not make)."""
    return _REPORTS.get(model)


def float_target(loaded):
    """The float32 LoadedModel ``loaded`` was made from by :func:`with_weights` (``loaded`` itself otherwise)."""
    for base, made in list(_MADE.items()):
        if any(m is loaded for m in made.values()):
            return base
    return loaded


_DTYPES = ("float32", "bfloat16", "float16")


def labelled(label: str, fmt: str) -> str:
    """``label`` naming the weight format, and the compute dtype as such where the label ends with it:
    "SmolLM2 (embedded, float32)" -> "SmolLM2 (embedded, int4 weights, float32 activations)"."""
    if fmt == "float32":
        return label
    if label.endswith(")"):
        head, _, last = label[:-1].rpartition(", ")
        if head and last in _DTYPES:
            return f"{head}, {fmt} weights, {last} activations)"
        return f"{label[:-1]}, {fmt} weights)"
    return f"{label} ({fmt} weights)"


def _file_tensors(target, fmt: str, progress: Progress | None) -> dict:
    """The embedded GGUF's Q4_1 tensors matching the target's linears (int4 on the embedded model), else {}."""
    from specviz.runtime.models import EMBEDDED, embedded_gguf_path

    if fmt != "int4" or target.spec != EMBEDDED:
        return {}
    from specviz.runtime.weights.q4_1 import file_int4_tensors

    config = target.model.config.get_text_config()
    heads = (int(config.num_attention_heads), int(getattr(config, "num_key_value_heads", 0) or 0))
    weights = {name: m.weight for name, m in target.model.named_modules() if isinstance(m, torch.nn.Linear)}
    try:
        return file_int4_tensors(embedded_gguf_path(), weights, heads)
    except Exception as error:  # noqa: BLE001 - any failure: quantize from float instead, and say so
        if progress:
            progress(f"weights: the GGUF's Q4_1 blocks could not be used ({error}); quantizing from float32")
        return {}


def with_weights(target, fmt: str, progress: Progress | None = None):
    """``target`` (a LoadedModel) with its linears in ``fmt`` (one of FORMATS); float32 returns ``target``.

    Raises WeightsError (one sentence) for an unknown format, an int format off the CPU, or a model whose
    weights are not float32 (the formats start from the float32 weights)."""
    check_format(fmt)
    if fmt == weights_of(target.model):
        return target
    if fmt in CPU_ONLY and target.device.type != "cpu":
        raise WeightsError(f"{fmt} weights run on the CPU only (torch's weight-only kernels); this target is on "
                           f"{target.device}")
    if target.dtype != torch.float32:
        raise WeightsError(f"weight formats start from a float32 target; this one is {target.dtype} "
                           "(use --dtype float32)")
    made = _MADE.setdefault(target, {})
    if fmt not in made:
        model = light_copy(target.model)
        report = apply_weights(model, fmt, _file_tensors(target, fmt, progress))
        _REPORTS[model] = report
        made[fmt] = dataclasses.replace(target, model=model, label=labelled(target.label, fmt),
                                        param_bytes=step_bytes(model))
    if progress:
        progress(f"weights: {weights_report(made[fmt].model).summary()}")
    return made[fmt]


# ------------------------------------------------------------------------------------------------ the CLI's hook


def add_weights_argument(parser) -> None:
    """``--weights {float32,bfloat16,int8,int4,all}`` on an argparse parser (all: ``bench --kernel`` only)."""
    from specviz.runtime.weights.formats import FORMATS

    parser.add_argument("--weights", default="float32", choices=(*FORMATS, "all"),
                        help="the target's linear layers (the LM head included): float32 (default), bfloat16, or "
                             "int8 / int4 weight-only (CPU; int4 of the embedded model from its GGUF's own 4-bit "
                             "blocks); all: bench --kernel measures every format side by side (docs/weights.md)")


def weights_for_run(target, args, progress: Progress | None = None):
    """The target a command runs: ``target`` in the format ``args.weights`` names (unchanged for float32 and for
    ``all``, which only ``bench --kernel`` takes). Raises WeightsError (one sentence) otherwise."""
    fmt = getattr(args, "weights", "float32") or "float32"
    if fmt == "all":
        if not getattr(args, "kernel", False):
            raise WeightsError("--weights all is for bench --kernel (a table of every format): choose one format")
        return target
    return with_weights(target, fmt, progress)
