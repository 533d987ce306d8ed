"""Real target / draft pairs for users with a network, and the memory check made before any model loads.

Each :class:`Preset` pairs an instruction-tuned target with a smaller model of the same family that shares its
tokenizer (the classic setting of speculative decoding: a well-matched small draft). The weights come from the
Hugging Face Hub, so a preset needs a network (and, for gated models such as Llama, an ``HF_TOKEN`` with access).
On a GPU they load in bfloat16, on a CPU in float32 (:func:`specviz.runtime.models.load_model`'s default).

:func:`estimate_bytes` sizes a model from its config alone (no weights read): embeddings, attention and MLP
projections, norms; :func:`check_fits` compares that with the memory free on the device and raises
:class:`MemoryTooSmallError` with one sentence before a load that could not succeed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Preset:
    """A target and its draft model (hub ids), shown under ``label``."""

    key: str
    label: str
    target: str
    draft: str
    gated: bool = False  # the Hub asks for an access token (HF_TOKEN) with the licence accepted


PRESETS: tuple[Preset, ...] = (
    Preset("smollm2-1.7b", "SmolLM2-1.7B-Instruct drafted by SmolLM2-135M-Instruct",
           "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
    Preset("smollm2-1.7b-360m", "SmolLM2-1.7B-Instruct drafted by SmolLM2-360M-Instruct",
           "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct"),
    Preset("qwen2.5-7b", "Qwen2.5-7B-Instruct drafted by Qwen2.5-0.5B-Instruct",
           "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    Preset("llama-3.1-8b", "Llama-3.1-8B-Instruct drafted by Llama-3.2-1B-Instruct (gated: needs HF_TOKEN)",
           "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", gated=True),
)

HEADROOM = 1.2  # weights x this: activations, the KV cache of a demo-sized run, the allocator's slack


class MemoryTooSmallError(RuntimeError):
    """The model would not fit in the device's free memory (the message says how much each needs)."""


def preset(key: str) -> Preset:
    """The preset named ``key``. Raises KeyError listing the known keys."""
    for p in PRESETS:
        if p.key == key:
            return p
    raise KeyError(f"unknown preset {key!r}; known: {', '.join(p.key for p in PRESETS)}")


def parameter_count(config) -> int:
    """Parameters of a decoder-only transformer from its config (Llama / Qwen2 / Mistral style: grouped-query
    attention, a gated MLP, untied or tied embeddings). Exact for those families up to biases and norms."""
    c = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden, layers, vocab = int(c.hidden_size), int(c.num_hidden_layers), int(c.vocab_size)
    heads = int(c.num_attention_heads)
    kv_heads = int(getattr(c, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(c, "head_dim", None) or hidden // heads)
    inter = int(getattr(c, "intermediate_size", 4 * hidden))
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)  # q and o, k and v
    mlp = 3 * hidden * inter  # gate, up, down
    norms = 2 * hidden
    embeddings = vocab * hidden * (1 if getattr(c, "tie_word_embeddings", False) else 2)
    return layers * (attention + mlp + norms) + embeddings + hidden


def estimate_bytes(config, dtype: torch.dtype) -> int:
    """Bytes of the weights of ``config``'s model in ``dtype`` (:func:`parameter_count` x the element size)."""
    return parameter_count(config) * torch.empty((), dtype=dtype).element_size()


def available_bytes(device: torch.device) -> int:
    """Free memory on ``device`` in bytes: the GPU's free memory (torch.cuda.mem_get_info), else the system's
    available memory (/proc/meminfo MemAvailable; 0 when unknown, which skips the check)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def check_fits(config, dtype: torch.dtype, device: torch.device, name: str, free: int | None = None) -> int:
    """Raise :class:`MemoryTooSmallError` when ``name`` (its weights x :data:`HEADROOM`) exceeds the free memory
    of ``device`` (``free`` bytes, measured when None; 0 = unknown: no check). Returns the estimated bytes."""
    need = estimate_bytes(config, dtype)
    free = available_bytes(device) if free is None else free
    if free and need * HEADROOM > free:
        raise MemoryTooSmallError(
            f"{name} needs about {need / 2**30:.1f} GiB in {str(dtype).removeprefix('torch.')} "
            f"({parameter_count(config) / 1e9:.2f} B parameters) plus room to run, but {device.type} has "
            f"{free / 2**30:.1f} GiB free: pick a smaller model or a bigger machine.")
    return need
