"""The operator's weight format for the app's targets (``SPECVIZ_WEIGHTS``: float32, bfloat16, int8 or int4;
docs/weights.md): :func:`in_operator_weights` is the one call :func:`app.device.load_target` makes after loading and
tuning a target. The formatted target is a light copy (:func:`specviz.runtime.weights.with_weights`, cached per target and
format) whose label names the format ("..., int8 weights)"), so every tab's status names it; standard decoding and
the speculative run both use it, so ids stay identical within the format.

Unset (or ``auto``), the CPU's default is the format measured fastest on the machine at hand at start-up
(:func:`specviz.measure.tuning.tune_weights`, kept with the tuning so a restart reads it; a format replaces float32
only when clearly faster: :func:`specviz.measure.weights_default.choose_default`); on a GPU, with tuning off, or a
target not loaded in float32, float32. Each format's model gets the verify curve measured for it, which k = auto
reads (:func:`specviz.core.costs.set_verify_curve`).
"""

from __future__ import annotations

import logging
import os

ENV_WEIGHTS = "SPECVIZ_WEIGHTS"
DEFAULT_WEIGHTS = "float32"
AUTO = "auto"  # SPECVIZ_WEIGHTS=auto, as unset: the format measured fastest here

_MEASURED: dict[str, str] = {}  # target spec -> the default format measured at its load in this process
_REASONS: dict[str, str] = {}  # target spec -> why that default (specviz.measure.weights_default.reason)
_SKIPPED: set[str] = set()  # target specs whose formats were not compared: the machine was busy (float32 kept)

log = logging.getLogger("specviz.app")


def explicit_weights(env: dict | None = None) -> str | None:
    """The weight format the operator set (``SPECVIZ_WEIGHTS``, case and spaces ignored); None when unset or
    ``auto`` (the measured default applies). A value that is no format is logged as a warning and
    :data:`DEFAULT_WEIGHTS` returned."""
    from specviz.runtime.weights import FORMATS

    text = (os.environ if env is None else env).get(ENV_WEIGHTS, "").strip().lower()
    if not text or text == AUTO:
        return None
    if text not in FORMATS:
        log.warning("%s=%r is not a weight format (%s, or %s): using %s", ENV_WEIGHTS, text, ", ".join(FORMATS),
                    AUTO, DEFAULT_WEIGHTS)
        return DEFAULT_WEIGHTS
    return text


def operator_weights(env: dict | None = None, target: str | None = None) -> str:
    """The app's default weight format: the operator's ``SPECVIZ_WEIGHTS`` (:func:`explicit_weights`), else the
    format measured fastest when the target ``target`` (a spec; None: the one loaded first) was loaded in this
    process (:func:`in_operator_weights`), else :data:`DEFAULT_WEIGHTS`."""
    explicit = explicit_weights(env)
    if explicit is not None:
        return explicit
    if target is None:
        return next(iter(_MEASURED.values()), DEFAULT_WEIGHTS)
    return _MEASURED.get(target, DEFAULT_WEIGHTS)


def decided_weights(env: dict | None = None) -> str | None:
    """The app's default weight format once it is decided: the operator's ``SPECVIZ_WEIGHTS``
    (:func:`explicit_weights`), else the one recorded when the first target was loaded in this process
    (:func:`in_operator_weights`: measured, or float32 where nothing is measured); None while the start-up has not
    decided yet (a page opened then shows :data:`DEFAULT_WEIGHTS` as a placeholder and asks again later)."""
    explicit = explicit_weights(env)
    if explicit is not None:
        return explicit
    return next(iter(_MEASURED.values()), None)


def measured_default(loaded, progress=None) -> str:
    """The default format measured fastest for ``loaded`` (a float32 LoadedModel) on this machine
    (:func:`specviz.measure.tuning.tune_weights`: measured once, kept with the tuning), remembered under its spec
    for :func:`operator_weights`; float32 where it is not measured (a GPU, tuning off, not float32).

    A busy machine (:func:`specviz.measure.tuning.busy_now`: other programs hold the CPUs) with nothing kept from
    an earlier measurement skips the comparison: float32 stays for this process, said in the log and in the
    Weights control's note (:func:`default_reason`); timings taken then would be noise and are not kept anyway,
    and a visitor waiting behind it would pay for them. A later start on a quiet machine compares the formats."""
    from specviz.measure.tuning import busy_now, known, tune, tuning_enabled, tune_weights
    from specviz.measure.weights_default import reason

    spec = str(loaded.spec)
    if spec in _SKIPPED:
        return _MEASURED.setdefault(spec, DEFAULT_WEIGHTS)
    kept = known(loaded) or (tune(loaded, progress=_plain(progress, False)) if tuning_enabled() else None)
    if kept is not None and kept.weights is None and kept.source not in ("off", "compiled"):
        busy, load = busy_now()
        if busy:
            _SKIPPED.add(spec)
            _MEASURED[spec] = DEFAULT_WEIGHTS
            _REASONS[spec] = skipped_reason(load)
            log.info("default weights for %s: %s", spec, _REASONS[spec])
            return DEFAULT_WEIGHTS
    tuning = tune_weights(loaded, progress=_plain(progress, False))
    fmt = tuning.weights or DEFAULT_WEIGHTS
    _MEASURED[spec] = fmt
    why = reason(tuning.weights_ms or {}, fmt)
    if why:
        _REASONS[spec] = why
        log.info("default weights for %s: %s", spec, why)
    return fmt


def skipped_reason(load: float | None, cpus: int | None = None) -> str:
    """The Weights control's note when the weight formats' comparison was skipped on a busy machine (``load``: the
    1-minute load average then, None: unknown; ``cpus``: default this machine's count)."""
    cpus = cpus or os.cpu_count() or 1
    seen = f" (load {load:.1f} on {cpus} CPUs)" if load is not None else ""
    return (f"float32 kept without comparing the formats: the machine was busy when the target loaded{seen}, so "
            "their timings would have been noise. A start on a quiet machine compares them.")


def _plain(progress, copies: bool = True):
    """``progress`` (a callable(str) showing a run's status, or None) for the weight formats' work: the
    measurement's own lines pass, a converted copy's report ("weights: int8: 211 linears, 135 MB of linears ...")
    becomes plain words ("Preparing the int8 weights…"; ``copies`` False: the measurement's own copies, the log
    only) and every other line (the figures of a measurement) goes to the server log only."""
    from specviz.measure.tuning import MEASURING, MEASURING_WEIGHTS

    if progress is None:
        return None

    def say(message: str) -> None:
        if message in (MEASURING, MEASURING_WEIGHTS):
            progress(message)
            return
        log.info("%s", message)
        fmt = message.removeprefix("weights: ").split(":", 1)[0]
        if copies and message.startswith("weights: ") and fmt in _formats():
            progress(f"Preparing the {fmt} weights…")

    return say


def _formats() -> tuple[str, ...]:
    from specviz.runtime.weights import FORMATS

    return tuple(FORMATS)


def default_reason(env: dict | None = None, target: str | None = None) -> str:
    """Why the default weight format (:func:`operator_weights`) is what it is, one or two sentences for the Weights
    control: the operator's choice ("set by the operator: SPECVIZ_WEIGHTS=int8."), the start-up measurement's
    reason with its figures (:func:`specviz.measure.weights_default.reason`, logged at start-up: "float32 kept (355
    ms a one-token step) ...: int4 221 ms, but not exact here ..."), or "" before anything was measured."""
    explicit = explicit_weights(env)
    if explicit is not None:
        return f"Default set by the operator: {ENV_WEIGHTS}={explicit}."
    if target is None:
        return next(iter(_REASONS.values()), "")
    return _REASONS.get(target, "")


def with_curve(formatted, base):
    """``formatted`` (``base`` in a weight format) after giving its model the verify curve measured for its
    format (:func:`specviz.measure.tuning.verify_curve`), which k = auto reads; returns ``formatted``."""
    from specviz.core.costs import set_verify_curve
    from specviz.measure.tuning import verify_curve
    from specviz.runtime.weights import weights_of

    curve = verify_curve(base, weights_of(formatted.model))
    if curve is not None:
        set_verify_curve(formatted.model, curve)
    return formatted


def in_operator_weights(loaded, progress=None):
    """``loaded`` (a float32 LoadedModel) in the operator's weight format (:func:`explicit_weights`), else, on the
    CPU, in the format measured fastest here (:func:`measured_default`; the measurement also gives every format's
    verify curve to k = auto; an explicit format measures nothing); itself for float32.
    Raises :class:`specviz.runtime.weights.WeightsError` (one sentence) where the operator's format cannot run,
    e.g. int8 or int4 on a GPU, or a target the operator's ``SPECVIZ_DTYPE`` did not load in float32."""
    import torch

    from specviz.runtime.weights import WeightsError, with_weights

    fmt = explicit_weights()
    if fmt is None:  # unset or auto: the format measured fastest here (float32 where not measured)
        on_cpu = loaded.device.type == "cpu" and loaded.dtype == torch.float32
        if on_cpu:
            fmt = measured_default(loaded, progress)
        else:  # a GPU or a target not in float32: float32, decided (pages waiting for the default stop asking)
            fmt = _MEASURED.setdefault(str(loaded.spec), DEFAULT_WEIGHTS)
    if fmt == DEFAULT_WEIGHTS:
        return with_curve(loaded, loaded)
    if loaded.dtype != torch.float32:
        raise WeightsError(f"{ENV_WEIGHTS}={fmt} starts from float32 weights, but this target was loaded in "
                           f"{str(loaded.dtype).removeprefix('torch.')} (SPECVIZ_DTYPE): set SPECVIZ_DTYPE=float32 "
                           f"or unset {ENV_WEIGHTS}.")
    return with_curve(with_weights(loaded, fmt, progress=_logged), loaded)  # the run's own format says more


def _logged(message: str) -> None:
    """A progress line for the server log only (the copy in the default format a visitor's run may not use)."""
    log.info("%s", message)


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
    if progress is not None:
        progress(chosen_note(fmt, operator_weights(target=str(base.spec)), explicit_weights() is not None))
    if fmt in (weights_of(base.model), loaded_as):
        return with_curve(base, base)
    if getattr(base.model, "hf_device_map", None):
        raise WeightsError(f"The {fmt} weights are not available for a target the operator placed across devices "
                           "(SPECVIZ_DEVICE_MAP): choose float32.")
    if fmt in CPU_ONLY and base.device.type != "cpu":
        raise WeightsError(f"The {fmt} weights run on the CPU only (torch's weight-only kernels), and this server "
                           f"runs the target on its GPU ({base.device}): choose float32 or bfloat16.")
    if loaded_as != "float32":
        raise WeightsError(f"The {fmt} weights are made from float32 weights, but this server loads the target in "
                           f"{loaded_as} (SPECVIZ_DTYPE): choose float32, the weights as loaded.")
    return with_curve(with_weights(base, fmt, progress=_plain(progress)), base)


def chosen_note(fmt: str, default: str, by_operator: bool = False) -> str:
    """The run's status while its target is readied: the weight format the page set (``fmt``), and, where the
    server's default (``default``, :func:`operator_weights`; ``by_operator``: set by ``SPECVIZ_WEIGHTS``, else
    measured) differs, that the run keeps the page's (a page opened before the start-up measured the formats
    still shows float32), in words that fit a format the visitor chose too (a trial chose int4 and was told to
    "choose" the default "to use it").

    >>> chosen_note("float32", "int8")
    "Using the float32 weights set on this page (the server's default is int8, measured fastest here)…"
    """
    if fmt == default:
        return f"Using the {fmt} weights…"
    how = "set by its operator" if by_operator else "measured fastest here"
    return f"Using the {fmt} weights set on this page (the server's default is {default}, {how})…"
