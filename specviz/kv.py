"""Model forwards over a KV cache, and the one function that rolls a cache back.

transformers 5.24 is pinned: its ``Cache.crop`` takes the number of tokens to remove as a negative
integer (earlier 5.x releases took the length to keep), and model forwards take ``cache=`` (the old
``past_key_values=`` still works with a deprecation warning).
"""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache

from specviz.events import RunCancelled

PREFILL_CHUNK = 256
"""Most tokens one forward reads: a long prompt is read in chunks this size, so a Stop (checked before every
forward) is honoured within one chunk. The baseline and the speculative run chunk alike (same numerics)."""


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


def check_cancel(cancel: object | None) -> None:
    """Raise :class:`~specviz.events.RunCancelled` when ``cancel`` is set: a flag with ``is_set()`` (a
    threading.Event) or a callable returning True to stop."""
    if cancel is not None and (cancel.is_set() if hasattr(cancel, "is_set") else cancel()):
        raise RunCancelled("the run was stopped")


def forward_chunked(
    model: torch.nn.Module, input_ids: list[int], cache: DynamicCache, num_logits: int, *,
    cancel: object | None = None, features: bool = False, chunk: int = PREFILL_CHUNK,
    attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`forward_logits` (or :func:`forward_logits_features`) over ``input_ids`` in forwards of at most
    ``chunk`` tokens, checking ``cancel`` before each one.

    Args:
        model, input_ids, cache, num_logits: as :func:`forward_logits`; ``num_logits`` <= the last chunk's length.
        cancel: a flag with ``is_set()`` or a callable (see :func:`check_cancel`); checked before every forward.
        features: also return the final features of every new position (concatenated over the chunks).
        chunk: most tokens per forward (a tree mask or explicit positions are never split: one forward).
        attention_mask, position_ids: as :func:`forward_logits_features`.

    Returns:
        (num_logits, V) float32 logits and (n, H) features or None.

    Raises:
        RunCancelled: ``cancel`` was set before a forward started.
    """
    if attention_mask is not None or position_ids is not None or len(input_ids) <= chunk:
        pieces = [input_ids]
    else:
        pieces = [input_ids[i:i + chunk] for i in range(0, len(input_ids), chunk)]
    feats: list[torch.Tensor] = []
    for piece in pieces:
        check_cancel(cancel)
        wanted = num_logits if piece is pieces[-1] else 1
        if features or attention_mask is not None or position_ids is not None:
            logits, f = forward_logits_features(model, piece, cache, wanted, attention_mask=attention_mask,
                                                position_ids=position_ids)
            feats.append(f)
        else:
            logits = forward_logits(model, piece, cache, wanted)
    if not features:
        return logits, None
    return logits, feats[0] if len(feats) == 1 else torch.cat(feats)


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
