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


@torch.inference_mode()
def forward_logits_features(
    model: torch.nn.Module, input_ids: list[int], cache: DynamicCache, num_logits: int, *,
    attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`forward_logits` that also returns the final features (after the last norm) of every new position.

    The logits are computed exactly as :func:`forward_logits` computes them (same call, same LM head), so runs
    that need features (EAGLE / Medusa drafters) keep the baseline's numerics.

    Args:
        model, input_ids, cache, num_logits: as :func:`forward_logits`.
        attention_mask: optional (1, 1, n, cache_len + n) bool mask (a tree mask, see :mod:`specviz.tree`).
        position_ids: optional (1, n) positions (default: continuing after the cache).

    Returns:
        (num_logits, V) float32 logits and (n, H) features, on the model's device.
    """
    ids = torch.tensor([input_ids], dtype=torch.long, device=model.device)
    kwargs = {}
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask
    if position_ids is not None:
        kwargs["position_ids"] = position_ids
    out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=num_logits, output_hidden_states=True,
                **kwargs)
    return out.logits[0, -num_logits:].float(), out.hidden_states[-1][0]


def keep_positions(cache: DynamicCache, keep: list[int]) -> None:
    """Keep only the cached positions listed in ``keep`` (ascending), in that order; used after a tree pass to
    keep the context plus the accepted path. In place.

    Raises:
        ValueError: an index out of range or not ascending.
        NotImplementedError: a cache with sliding-window or other non-dynamic layers.
    """
    length = cache_length(cache)
    if any(b <= a for a, b in zip(keep, keep[1:])) or (keep and not 0 <= keep[0] <= keep[-1] < length):
        raise ValueError(f"positions to keep must be ascending and within the cache of {length}")
    if keep == list(range(len(keep))):
        rollback_cache(cache, len(keep))
        return
    index = None
    for layer in cache.layers:
        if type(layer).__name__ != "DynamicLayer":
            raise NotImplementedError(f"tree passes need a plain dynamic cache, not {type(layer).__name__}")
        if index is None:
            index = torch.tensor(keep, dtype=torch.long, device=layer.keys.device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)


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
