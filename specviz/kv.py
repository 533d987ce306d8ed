"""Model forwards over a KV cache, and the one function that rolls a cache back.

transformers 5.24 is pinned: its ``Cache.crop`` takes the number of tokens to remove as a negative
integer (earlier 5.x releases took the length to keep), and model forwards take ``cache=`` (the old
``past_key_values=`` still works with a deprecation warning).
"""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache


def new_cache(model: torch.nn.Module) -> DynamicCache:
    """An empty dynamic KV cache sized for ``model``'s config (its number of layers)."""
    return DynamicCache(config=model.config)


def cache_length(cache: DynamicCache) -> int:
    """Number of positions held in ``cache`` (tokens)."""
    return int(cache.get_seq_length())


@torch.inference_mode()
def forward_logits(
    model: torch.nn.Module, input_ids: list[int], cache: DynamicCache, num_logits: int
) -> torch.Tensor:
    """Run ``model`` over ``input_ids`` appended to ``cache`` and return the last logits.

    Args:
        model: a causal LM (transformers ``*ForCausalLM``).
        input_ids: n new token ids; positions continue after ``cache_length(cache)``.
        cache: the KV cache, extended in place by n positions.
        num_logits: how many final positions need logits (1 for decoding, k+1 for verification); the LM
            head runs only on those rows.

    Returns:
        (num_logits, V) float32 logits, on the model's device.
    """
    ids = torch.tensor([input_ids], dtype=torch.long, device=model.device)
    out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=num_logits)
    return out.logits[0, -num_logits:].float()


def rollback_cache(cache: DynamicCache, keep_len: int) -> None:
    """Drop every cached position at or after ``keep_len`` (rejected draft tokens), in place.

    Raises:
        ValueError: if ``keep_len`` is negative or longer than the cache.
    """
    length = cache_length(cache)
    if keep_len < 0 or keep_len > length:
        raise ValueError(f"cannot roll a cache of {length} positions back to {keep_len}")
    if keep_len < length:
        cache.crop(keep_len - length)


class Clock:
    """Milliseconds on a device: synchronizes CUDA before reading ``time.perf_counter``."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"

    def now_ms(self) -> float:
        """Current time in ms (after the device has finished queued work)."""
        if self._cuda:
            torch.cuda.synchronize()
        return time.perf_counter() * 1000.0
