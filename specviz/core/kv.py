"""The KV cache, model forwards over it, and the functions that roll it back.

:class:`SlabCache` keeps every layer's keys and values in buffers allocated ahead (a slab per layer, grown by
doubling when a run outlasts it), writes each forward's new positions in place, and rolls back by length: a
rejected draft costs nothing to undo, and a step copies only its own new keys and values (a growing cache that
concatenates copies all of them every step). Rows of a batch may hold different lengths (ragged acceptance);
the engine then passes each row's attention mask and positions. It implements transformers' ``Cache``
interface, so the stock model code reads and writes it.

transformers 5.24 is pinned: its model forwards take ``cache=`` (the old ``past_key_values=`` still works there
with a deprecation warning; :func:`_cache_argument` picks the name a given model's forward accepts, so the GPU
check runs on older 5.x releases too).
"""

from __future__ import annotations

import inspect
import sys
import time
from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from specviz.core.events import RunCancelled
from specviz.core.window import windowed_mask

PREFILL_CHUNK = 256
"""Most tokens one forward reads: a long prompt is read in chunks this size, so a Stop (checked before every
forward) is honoured within one chunk. The baseline and the speculative run chunk alike (same numerics)."""

INITIAL_CAPACITY = 256
"""Positions a slab holds before it first grows (it doubles when a run needs more)."""


class SlabLayer(CacheLayerMixin):
    """One attention layer's keys and values: (B, H_kv, capacity, D) buffers and each row's length.

    ``update`` writes the n new positions of row b at ``lengths[b] .. lengths[b] + n`` and returns views of the
    first ``max(lengths) + n`` positions (rows that are shorter hold stale entries there, hidden by the engine's
    mask). Lengths are Python ints: reading them never waits for the device.
    """

    is_compileable = False
    is_croppable = True
    is_sliding = False

    def __init__(self, capacity: int = INITIAL_CAPACITY) -> None:
        super().__init__()
        self.capacity = capacity
        self.lengths: list[int] = []

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Allocate the slabs from the first keys' batch, heads, head size, dtype and device."""
        batch, heads, _, _ = key_states.shape
        self.device = key_states.device
        self.keys = key_states.new_zeros((batch, heads, self.capacity, key_states.shape[-1]))
        self.values = value_states.new_zeros((batch, heads, self.capacity, value_states.shape[-1]))
        self.lengths = [0] * batch
        self.is_initialized = True

    @torch.inference_mode()
    def _grow(self, needed: int) -> None:
        size = max(needed, 2 * self.capacity)
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((*old.shape[:2], size, old.shape[-1]))
            new[:, :, :self.capacity] = old
            setattr(self, name, new)
        self.capacity = size

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write (B, H_kv, n, D) new keys and values after each row's length; return (B, H_kv, span, D) views,
        span = the longest row's new length."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        end = max(self.lengths) + n
        if end > self.capacity:
            self._grow(end)
        if min(self.lengths) == max(self.lengths):  # every row at the same length: one copy per tensor
            start = self.lengths[0]
            self.keys[:, :, start:start + n] = key_states
            self.values[:, :, start:start + n] = value_states
        else:
            for row, start in enumerate(self.lengths):
                self.keys[row, :, start:start + n] = key_states[row]
                self.values[row, :, start:start + n] = value_states[row]
        self.lengths = [length + n for length in self.lengths]
        return self.keys[:, :, :end], self.values[:, :, :end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        """(kv length, offset) for transformers' mask: the longest row plus the new positions, from 0."""
        return (max(self.lengths) if self.lengths else 0) + query_length, 0

    def get_seq_length(self) -> int:
        """The longest row's length (all rows in a single-prompt run)."""
        return max(self.lengths) if self.lengths else 0

    def get_max_length(self) -> int:
        """No fixed maximum: a slab grows when it must."""
        return -1

    def crop(self, tokens_to_remove: int) -> None:
        """transformers' crop: remove ``-tokens_to_remove`` positions from every row."""
        self.lengths = [max(0, length + min(0, tokens_to_remove)) for length in self.lengths]

    @torch.inference_mode()
    def keep(self, row: int, positions: list[int]) -> None:
        """Keep only ``positions`` (ascending) of ``row``, moved to its front in order; its length becomes their
        number."""
        index = torch.tensor(positions, dtype=torch.long, device=self.keys.device)
        for name in ("keys", "values"):
            buffer = getattr(self, name)
            buffer[row, :, :len(positions)] = buffer[row].index_select(1, index)
        self.lengths[row] = len(positions)

    def reset(self) -> None:
        """Empty every row (the slabs stay allocated)."""
        self.lengths = [0] * len(self.lengths)


class SlabCache(Cache):
    """A KV cache of :class:`SlabLayer` s, one per decoder layer of the model it was made for.

    Invariants a run relies on: ``row_lengths()`` is the same in every layer; a forward of n tokens extends
    every row by n; :func:`rollback_cache` and :func:`keep_positions` change lengths only (and, for a tree, move
    the kept entries to the front), never the slabs' addresses.
    """

    def __init__(self, num_layers: int, capacity: int = INITIAL_CAPACITY) -> None:
        super().__init__(layers=[SlabLayer(capacity) for _ in range(num_layers)])

    def row_lengths(self) -> list[int]:
        """Positions held per row (a single-prompt run has one row)."""
        return list(self.layers[0].lengths) if self.layers and self.layers[0].is_initialized else []

    @torch.inference_mode()
    def select_rows(self, rows: list[int]) -> None:
        """Keep only the batch rows ``rows`` (in that order), e.g. dropping rows whose run has finished."""
        if not self.layers or not self.layers[0].is_initialized:
            return
        for layer in self.layers:
            index = torch.tensor(rows, dtype=torch.long, device=layer.keys.device)
            layer.keys = layer.keys.index_select(0, index)
            layer.values = layer.values.index_select(0, index)
            layer.lengths = [layer.lengths[row] for row in rows]

    @torch.inference_mode()
    def stack_rows(self, caches: list[SlabCache]) -> None:
        """Become the batch of ``caches`` (single-row SlabCaches of the same model, each of its own length): row b
        holds caches[b]'s positions, at caches[b]'s length."""
        for layer, rows in zip(self.layers, zip(*(cache.layers for cache in caches))):
            lengths = [row.lengths[0] for row in rows]
            layer.capacity = max(row.capacity for row in rows)
            for name in ("keys", "values"):
                first = getattr(rows[0], name)
                stacked = first.new_zeros((len(rows), first.shape[1], layer.capacity, first.shape[-1]))
                for b, row in enumerate(rows):
                    stacked[b, :, :lengths[b]] = getattr(row, name)[0, :, :lengths[b]]
                setattr(layer, name, stacked)
            layer.device, layer.lengths, layer.is_initialized = rows[0].device, lengths, True

    def set_row_lengths(self, lengths: list[int]) -> None:
        """Shorten rows to ``lengths`` (each <= the row's current length): a rollback per row."""
        current = self.row_lengths()
        if len(lengths) != len(current) or any(not 0 <= new <= old for new, old in zip(lengths, current)):
            raise ValueError(f"cannot roll rows of {current} positions back to {lengths}")
        for layer in self.layers:
            layer.lengths = list(lengths)


def _decoder_layers(model: torch.nn.Module) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(config.num_hidden_layers)


def row_exact(model: torch.nn.Module) -> bool:
    """Whether ``model``'s attention computes a verification's rows as one-token steps do (attention modules marked
    ``_specviz_row_exact`` by :func:`specviz.runtime.speed.attention.mark_row_exact`: a weight format on the CPU)."""
    return any(getattr(module, "_specviz_row_exact", False) for module in model.modules())


def new_cache(model: torch.nn.Module, capacity: int = INITIAL_CAPACITY) -> SlabCache:
    """An empty :class:`SlabCache` for ``model`` (one layer per decoder layer), ``capacity`` positions ahead."""
    return SlabCache(_decoder_layers(model), capacity)


def cache_length(cache: Cache) -> int:
    """Number of positions held in ``cache`` (tokens; the longest row of a batch)."""
    return int(cache.get_seq_length())


def compilations() -> int:
    """Graphs torch.compile has produced in this process so far (0 when nothing was ever compiled).

    A change across a forward means that forward (or anything else running meanwhile) traced and compiled a graph,
    so its time includes compilation: the engine marks such passes (``PassEvent.compiling``). Read from torch's
    own counter (``torch._dynamo.utils.counters["stats"]["unique_graphs"]``) without importing torch._dynamo, plus
    the CUDA graphs the graph path captured (:func:`note_capture`).
    """
    utils = sys.modules.get("torch._dynamo.utils")
    dynamo = int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0
    return dynamo + _CAPTURES[0]


_CAPTURES = [0]


def note_capture() -> None:
    """Count one forward graph captured by :mod:`specviz.core.graphs` (its time then falls in a pass, which the
    engine marks ``compiling`` as it does for torch.compile, through :func:`compilations`)."""
    _CAPTURES[0] += 1


_THREAD_LIMIT: list[int | None] = [None]


def set_thread_limit(threads: int | None) -> None:
    """Cap every tuned forward's thread count (``model._specviz_threads``) at ``threads`` from now on (None: no
    cap), as the app does for a run beside other programs' work (:func:`app.estimates.threads_for_run`): two
    OpenMP threads on two CPUs, one of them shared with another program, wait on each other at every operation.
    A model without a tuned choice keeps torch's count. Thread counts change float rounding, so a cap is set
    between runs, never inside one (a run's baseline and speculative forwards must share it)."""
    _THREAD_LIMIT[0] = None if threads is None else max(1, int(threads))


def chosen_threads(model: torch.nn.Module) -> tuple[int, int] | None:
    """The (one-token, several-token) thread counts ``model``'s forwards use: its tuned choice
    (``model._specviz_threads``, set by :mod:`specviz.measure.tuning`) within the cap of :func:`set_thread_limit`;
    None when the model carries no choice (torch's count is used as it is)."""
    choice = getattr(model, "_specviz_threads", None)
    if not choice:
        return None
    limit = _THREAD_LIMIT[0]
    return choice if limit is None else (min(choice[0], limit), min(choice[1], limit))


def _use_threads(model: torch.nn.Module, new_tokens: int) -> None:
    """Set torch's thread count to the one measured fastest for this forward's size, when the model carries a
    choice (:func:`chosen_threads`)."""
    choice = chosen_threads(model)
    if choice:
        wanted = choice[0] if new_tokens == 1 else choice[1]
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)


_CACHE_ARGUMENT: dict[type, str] = {}


def _cache_argument(model: torch.nn.Module) -> str:
    """The keyword a model's forward takes its cache by: ``cache`` (transformers >= 5.24) or ``past_key_values``."""
    kind = type(model)
    if kind not in _CACHE_ARGUMENT:
        parameters = inspect.signature(model.forward).parameters
        _CACHE_ARGUMENT[kind] = "cache" if "cache" in parameters else "past_key_values"
    return _CACHE_ARGUMENT[kind]


@torch.inference_mode()
def forward_logits(
    model: torch.nn.Module, input_ids: list[int], cache: Cache, num_logits: int
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
    _use_threads(model, len(input_ids))
    ids = torch.tensor([input_ids], dtype=torch.long, device=model.device)
    out = model(input_ids=ids, use_cache=True, logits_to_keep=num_logits, **{_cache_argument(model): cache})
    return out.logits[0, -num_logits:].float()


def pick_features(hidden_states: tuple[torch.Tensor, ...], layers: tuple[int, ...] = ()) -> torch.Tensor:
    """The features drafters read from a forward's ``hidden_states`` (..., T, H) each: the final one (after the last
    norm) for empty ``layers``, else the listed hidden states side by side, (..., T, len(layers) * H) (EAGLE-3
    heads; 0 = embeddings, i = output of decoder layer i)."""
    if not layers:
        return hidden_states[-1]
    return torch.cat([hidden_states[i] for i in layers], dim=-1)


def _layers(features: bool | tuple[int, ...]) -> tuple[int, ...]:
    """A drafter's feature request (``needs_hidden``: True or hidden-state indices) as :func:`pick_features`'s
    ``layers``."""
    return tuple(features) if isinstance(features, tuple) else ()


@torch.inference_mode()
def forward_logits_features(
    model: torch.nn.Module, input_ids: list[int], cache: Cache, num_logits: int, *,
    attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
    layers: tuple[int, ...] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`forward_logits` that also returns the final features (after the last norm) of every new position.

    The logits are computed exactly as :func:`forward_logits` computes them (same call, same LM head), so runs
    that need features (EAGLE / Medusa drafters) keep the baseline's numerics.

    Args:
        model, input_ids, cache, num_logits: as :func:`forward_logits`.
        attention_mask: optional (1, 1, n, cache_len + n) bool mask (a tree mask, see :mod:`specviz.core.tree`).
        position_ids: optional (1, n) positions (default: continuing after the cache).
        layers: hidden-state indices to return side by side instead of the final features (see
            :func:`pick_features`; an EAGLE-3 drafter's request).

    Returns:
        (num_logits, V) float32 logits and (n, H) features ((n, len(layers) * H) with ``layers``), on the
        model's device.
    """
    _use_threads(model, len(input_ids))
    ids = torch.tensor([input_ids], dtype=torch.long, device=model.device)
    kwargs = {}
    if attention_mask is not None:  # sliding layers get their window applied (specviz.core.window)
        kwargs["attention_mask"] = windowed_mask(model, attention_mask, position_ids, [cache_length(cache)])
    if position_ids is not None:
        kwargs["position_ids"] = position_ids
    out = model(input_ids=ids, use_cache=True, logits_to_keep=num_logits, output_hidden_states=True,
                **{_cache_argument(model): cache}, **kwargs)
    return out.logits[0, -num_logits:].float(), pick_features(out.hidden_states, layers)[0]


@torch.inference_mode()
def forward_rows(
    model: torch.nn.Module, rows: list[list[int]], cache: Cache, num_logits: int, *,
    attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
    features: bool | tuple[int, ...] = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One forward over B rows of n new tokens each (a batch; rows padded by the caller to equal length).

    Args:
        model: a causal LM.
        rows: B lists of n token ids.
        cache: the batch's KV cache (B rows), extended in place by n positions per row.
        num_logits: how many final positions of each row need logits.
        attention_mask: optional (B, 1, n, span) bool mask (rows of different cached lengths need one).
        position_ids: optional (B, n) positions.
        features: also return the final features of every new position (a tuple: those hidden states side by
            side, see :func:`pick_features`).

    Returns:
        (B, num_logits, V) float32 logits and (B, n, H) features ((B, n, len * H) for a tuple) or None.
    """
    _use_threads(model, len(rows) * len(rows[0]))
    ids = torch.tensor(rows, dtype=torch.long, device=model.device)
    kwargs = {name: value for name, value in (("attention_mask", attention_mask), ("position_ids", position_ids))
              if value is not None}
    if attention_mask is not None:  # sliding layers get their window applied (specviz.core.window)
        lengths = cache.row_lengths() if isinstance(cache, SlabCache) else [cache_length(cache)] * len(rows)
        kwargs["attention_mask"] = windowed_mask(model, attention_mask, position_ids, lengths or [0] * len(rows))
    out = model(input_ids=ids, use_cache=True, logits_to_keep=num_logits, output_hidden_states=bool(features),
                **{_cache_argument(model): cache}, **kwargs)
    return out.logits[:, -num_logits:].float(), (pick_features(out.hidden_states, _layers(features)) if features else None)


def check_cancel(cancel: object | None) -> None:
    """Raise :class:`~specviz.core.events.RunCancelled` when ``cancel`` is set: a flag with ``is_set()`` (a
    threading.Event) or a callable returning True to stop."""
    if cancel is not None and (cancel.is_set() if hasattr(cancel, "is_set") else cancel()):
        raise RunCancelled("the run was stopped")


@dataclass(frozen=True)
class TreeLayout:
    """How a tree pass's new tokens see each other (see :mod:`specviz.core.tree`): a (1, 1, n, cache_len + n) bool
    attention mask and (1, n) position ids."""

    attention_mask: torch.Tensor
    position_ids: torch.Tensor


def forward_chunked(
    model: torch.nn.Module, input_ids: list[int], cache: Cache, num_logits: int, *,
    cancel: object | None = None, features: bool | tuple[int, ...] = False, chunk: int = PREFILL_CHUNK,
    tree: TreeLayout | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`forward_logits` (or :func:`forward_logits_features`) over ``input_ids`` in forwards of at most
    ``chunk`` tokens, checking ``cancel`` before each one.

    Args:
        model, input_ids, cache, num_logits: as :func:`forward_logits`; ``num_logits`` <= the last chunk's length.
        cancel: a flag with ``is_set()`` or a callable (see :func:`check_cancel`); checked before every forward.
        features: also return the final features of every new position (concatenated over the chunks; a tuple of
            hidden-state indices: those side by side, see :func:`pick_features`).
        chunk: most tokens per forward (a tree is never split: one forward).
        tree: the mask and positions of a tree of new tokens (:class:`TreeLayout`), or None for a chain.

    Returns:
        (num_logits, V) float32 logits and (n, H) features or None.

    Raises:
        RunCancelled: ``cancel`` was set before a forward started.
    """
    if tree is not None or len(input_ids) <= chunk:
        pieces = [input_ids]
    else:
        pieces = [input_ids[i:i + chunk] for i in range(0, len(input_ids), chunk)]
    feats: list[torch.Tensor] = []
    for piece in pieces:
        check_cancel(cancel)
        wanted = num_logits if piece is pieces[-1] else 1
        if features or tree is not None:
            logits, f = forward_logits_features(
                model, piece, cache, wanted, layers=_layers(features),
                attention_mask=tree.attention_mask if tree is not None else None,
                position_ids=tree.position_ids if tree is not None else None)
            feats.append(f)
        else:
            logits = forward_logits(model, piece, cache, wanted)
    if not features:
        return logits, None
    return logits, feats[0] if len(feats) == 1 else torch.cat(feats)


def keep_positions(cache: SlabCache, keep: list[int]) -> None:
    """Keep only the cached positions listed in ``keep`` (ascending), in that order; used after a tree pass to
    keep the context plus the accepted path. In place (single-row caches).

    Raises:
        ValueError: an index out of range or not ascending.
    """
    length = cache_length(cache)
    if any(b <= a for a, b in zip(keep, keep[1:])) or (keep and not 0 <= keep[0] <= keep[-1] < length):
        raise ValueError(f"positions to keep must be ascending and within the cache of {length}")
    moved = next((i for i, position in enumerate(keep) if position != i), len(keep))
    if moved == len(keep):  # a prefix: a rollback
        rollback_cache(cache, len(keep))
        return
    if hasattr(cache, "keep"):  # a DeviceCache (specviz.core.static_cache): one move of every layer
        cache.keep(0, keep)
        return
    for layer in cache.layers:
        layer.keep(0, keep)


def rollback_cache(cache: Cache, keep_len: int) -> None:
    """Drop every cached position at or after ``keep_len`` (rejected draft tokens), in place (a single-row cache;
    a batch's rows are set one by one with :meth:`SlabCache.set_row_lengths`).

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
