"""Devices and dtypes: which torch device a name means, which dtype a load uses, and exact float32 on CUDA."""

from __future__ import annotations

import os

import torch

from specviz.runtime.models.base import ModelLoadError

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}

ENV_DTYPE = "SPECVIZ_DTYPE"  # the operator's dtype for the app's targets: float32 | bfloat16 | float16 | auto
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")  # auto: float32 on the CPU, bfloat16 on CUDA


def resolve_device(name: str | torch.device | None = None) -> torch.device:
    """The torch device for ``name`` ("cpu", "cuda", "cuda:1", "mps", or None/"auto").

    "auto" means the ``SPECVIZ_DEVICE`` environment variable when set, else CUDA when available, else the CPU.
    A bare "cuda" becomes the current CUDA device with its index, so equal devices compare equal.
    Raises ModelLoadError for an unknown name or a device this machine does not have.
    """
    text = str(name).strip().lower() if name is not None else "auto"
    if text in ("", "auto"):
        text = os.environ.get("SPECVIZ_DEVICE", "").strip().lower() or "auto"
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ModelLoadError(f"Unknown device {text!r}: use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'.") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"Device {text!r} was asked for, but this machine has no usable CUDA GPU.")
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ModelLoadError(f"Device {text!r} was asked for, but only {torch.cuda.device_count()} GPU(s) exist.")
        device = torch.device("cuda", index)
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError("Device 'mps' was asked for, but Apple's Metal backend is not available here.")
    return device


def dtype_name(dtype: torch.dtype) -> str:
    """"float32", "bfloat16" or "float16" (the name records and the status use)."""
    return str(dtype).removeprefix("torch.")


def operator_dtype(env: dict | None = None) -> str | None:
    """The dtype the operator set for the app's targets (``SPECVIZ_DTYPE``: float32, bfloat16 or float16; also bf16,
    fp16, fp32), or None for the device's default (unset or "auto": float32 on the CPU, bfloat16 on CUDA). An
    unreadable value is logged and ignored (None)."""
    import logging

    text = (os.environ if env is None else env).get(ENV_DTYPE, "").strip().lower().removeprefix("torch.")
    if not text or text == "auto":
        return None
    if text not in _DTYPES:
        logging.getLogger("specviz.runtime.models").warning("%s=%r is not a dtype (float32, bfloat16, float16, auto): "
                                                    "using the device's default", ENV_DTYPE, text)
        return None
    return dtype_name(_DTYPES[text])


def _resolve_dtype(dtype: torch.dtype | str | None, device: torch.device) -> torch.dtype:
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, str):
        if dtype.strip().lower().removeprefix("torch.") not in _DTYPES:
            raise ValueError(f"Unknown dtype {dtype!r}: use 'float32', 'bfloat16' or 'float16'.")
        return _DTYPES[dtype.strip().lower().removeprefix("torch.")]
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"Unsupported dtype {dtype}: use torch.float32, torch.bfloat16 or torch.float16.")
    return dtype


def exact_float32_on_cuda() -> None:
    """Turn TF32 off for CUDA matmuls and cuDNN (process-wide): a float32 target then rounds as float32 everywhere, so
    its verification and its one-token step agree as on the CPU. Called at every CUDA load, whatever the dtype: a
    bfloat16 model never uses TF32, and turning it on for one would change a float32 model loaded beside it."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
