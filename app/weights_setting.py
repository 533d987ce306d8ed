"""The operator's weight format for the app's targets (``SPECVIZ_WEIGHTS``: float32, bfloat16, int8 or int4;
docs/weights.md): :func:`in_operator_weights` is the one call :func:`app.device.load_target` makes after loading and
tuning a target. The formatted target is a light copy (:func:`specviz.runtime.weights.with_weights`, cached per target and
format) whose label names the format ("..., int8 weights)"), so every tab's status names it; standard decoding and
the speculative run both use it, so ids stay identical within the format.
"""

from __future__ import annotations

import logging
import os

ENV_WEIGHTS = "SPECVIZ_WEIGHTS"
DEFAULT_WEIGHTS = "float32"

log = logging.getLogger("specviz.app")


def operator_weights(env: dict | None = None) -> str:
    """The weight format the operator set (``SPECVIZ_WEIGHTS``, case and spaces ignored), or :data:`DEFAULT_WEIGHTS`
    when unset. A value that is no format is logged as a warning and the default used."""
    from specviz.runtime.weights import FORMATS

    text = (os.environ if env is None else env).get(ENV_WEIGHTS, "").strip().lower()
    if not text:
        return DEFAULT_WEIGHTS
    if text not in FORMATS:
        log.warning("%s=%r is not a weight format (%s): using %s", ENV_WEIGHTS, text, ", ".join(FORMATS),
                    DEFAULT_WEIGHTS)
        return DEFAULT_WEIGHTS
    return text


def in_operator_weights(loaded, progress=None):
    """``loaded`` (a float32 LoadedModel) in the operator's weight format (itself for float32). Raises
    :class:`specviz.runtime.weights.WeightsError` (one sentence) where the format cannot run, e.g. int8 or int4 on a GPU, or
    a target the operator's ``SPECVIZ_DTYPE`` did not load in float32."""
    import torch

    from specviz.runtime.weights import WeightsError, with_weights

    fmt = operator_weights()
    if fmt == DEFAULT_WEIGHTS:
        return loaded
    if loaded.dtype != torch.float32:
        raise WeightsError(f"{ENV_WEIGHTS}={fmt} starts from float32 weights, but this target was loaded in "
                           f"{str(loaded.dtype).removeprefix('torch.')} (SPECVIZ_DTYPE): set SPECVIZ_DTYPE=float32 "
                           f"or unset {ENV_WEIGHTS}.")
    return with_weights(loaded, fmt, progress=progress)


def in_chosen_weights(target, fmt: str, progress=None):
    """``target`` (what :func:`app.device.load_target` returned, perhaps already in the operator's format) in the
    visitor's weight format ``fmt`` (the Live tab's "Weights"): made from the float32 target it came from, one copy
    per format (:func:`specviz.runtime.weights.with_weights`); float32 is the target as loaded. Raises
    :class:`specviz.runtime.weights.WeightsError` with one sentence where ``fmt`` cannot run: int8 or int4 off the CPU,
    any format but the loaded one on a target not loaded in float32 (``SPECVIZ_DTYPE``), or on a placed target."""
    from specviz.runtime.models import dtype_name
    from specviz.runtime.weights import WeightsError, weights_of, with_weights
    from specviz.runtime.weights.formats import CPU_ONLY
    from specviz.runtime.weights.loaded import float_target

    base = float_target(target)
    loaded_as = dtype_name(base.dtype)
    if fmt in (weights_of(base.model), loaded_as):
        return base
    if getattr(base.model, "hf_device_map", None):
        raise WeightsError(f"The {fmt} weights are not available for a target the operator placed across devices "
                           "(SPECVIZ_DEVICE_MAP): choose float32.")
    if fmt in CPU_ONLY and base.device.type != "cpu":
        raise WeightsError(f"The {fmt} weights run on the CPU only (torch's weight-only kernels), and this server "
                           f"runs the target on its GPU ({base.device}): choose float32 or bfloat16.")
    if loaded_as != "float32":
        raise WeightsError(f"The {fmt} weights are made from float32 weights, but this server loads the target in "
                           f"{loaded_as} (SPECVIZ_DTYPE): choose float32, the weights as loaded.")
    return with_weights(base, fmt, progress=progress)
