"""A KV cache of fixed capacity whose lengths live on the device: the cache the CUDA-graph path runs over.

:class:`DeviceCache` holds every layer's keys and values in (B, H_kv, capacity, D) buffers allocated once, and each
row's length in a (B,) ``torch.long`` tensor on the model's device. A forward of n new tokens (see
:func:`device_inputs`) writes them at slots ``lengths[b] + arange(n)`` with ``scatter_`` (no Python slicing whose shape
depends on a length), attends over the whole capacity under a boolean mask built on the device from the lengths
(context ``< lengths[b]``, plus the new block's own causal or tree pattern), and takes positions ``lengths[b] +
depth``. So one captured CUDA graph per forward width serves every position: nothing in it reads a length on the host.
Rollback sets the length tensor (``fill_``; the entries past it are stale and masked).

The host keeps a mirror of the lengths (``row_lengths()``, Python ints): the engine knows them anyway (committed - 1),
so reading them never waits for the device, and capacity is checked on the host before a forward.

It implements transformers' ``Cache`` interface as :class:`specviz.core.kv.SlabCache` does (the stock model code
calls ``update`` per layer); forwards over it always pass a 4-D mask and explicit ``position_ids``, so transformers
5.17 and 5.24 skip their own mask building and never ask the cache for a length (checked for Llama in both).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


class CapacityError(ValueError):
    """A forward would write past the cache's fixed capacity."""


class DeviceLayer(CacheLayerMixin):
    """One attention layer's keys and values, (B, H_kv, capacity, D), written at the owner's current ``slots``."""

    is_compileable = True
    is_croppable = True
    is_sliding = False

    def __init__(self, owner: "DeviceCache") -> None:
        super().__init__()
        self.owner = owner

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Allocate the buffers from the first keys' batch, heads, head size, dtype and device."""
        batch, heads, _, _ = key_states.shape
        self.device = key_states.device
        self.keys = key_states.new_zeros((batch, heads, self.owner.capacity, key_states.shape[-1]))
        self.values = value_states.new_zeros((batch, heads, self.owner.capacity, value_states.shape[-1]))
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write (B, H_kv, n, D) keys and values at the owner's (B, n) ``slots``; return the whole buffers."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        slots = self.owner.slots[:, None, :, None]  # (B, 1, n, 1)
        self.keys.scatter_(2, slots.expand(-1, key_states.shape[1], -1, key_states.shape[-1]), key_states)
        self.values.scatter_(2, slots.expand(-1, value_states.shape[1], -1, value_states.shape[-1]), value_states)
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int, *args) -> tuple[int, int]:
        """(kv length, offset): the whole capacity from 0 (forwards pass their own 4-D mask, so unused there)."""
        return self.owner.capacity, 0

    def get_seq_length(self) -> int:
        """The longest row's length (host mirror; never reads the device)."""
        return self.owner.get_seq_length()

    def get_max_length(self) -> int:
        """The fixed capacity."""
        return self.owner.capacity

    def crop(self, tokens_to_remove: int) -> None:
        """transformers' crop: the owner shortens every row (lengths are shared by all layers)."""
        self.owner.crop(tokens_to_remove)

    @torch.inference_mode()
    def move(self, row: int, index: torch.Tensor) -> None:
        """Copy the entries at ``index`` (m,) of ``row`` to its first m slots, in order."""
        for buffer in (self.keys, self.values):
            buffer[row, :, :index.numel()] = buffer[row].index_select(1, index)

    def keep(self, row: int, positions: list[int]) -> None:
        """:class:`~specviz.core.kv.SlabLayer`'s ``keep`` (used by :func:`~specviz.core.kv.keep_positions`): keep
        ``positions`` of ``row``, moved to its front; the row's length becomes their number (set once per cache)."""
        self.owner.keep(row, positions, layer=self)

    def reset(self) -> None:
        """Empty every row (the buffers stay allocated)."""
        self.owner.reset()


class DeviceCache(Cache):
    """A fixed-capacity KV cache of :class:`DeviceLayer` s whose lengths are a (B,) device tensor.

    Invariants: ``lengths`` (device) equals ``row_lengths()`` (host) after every call of this class's methods
    (a forward goes through :func:`device_inputs` then :meth:`advance`); every row's length <= ``capacity``; the
    buffers' addresses never change (captured graphs hold them).
    """

    def __init__(self, num_layers: int, capacity: int, device: torch.device, batch: int = 1) -> None:
        super().__init__(layers=[DeviceLayer(self) for _ in range(num_layers)])
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=self.device)
        self.host = [0] * batch
        self.kv_range = torch.arange(self.capacity, device=self.device)
        self.slots = torch.zeros((batch, 1), dtype=torch.long, device=self.device)

    # ------------------------------------------------------------------ lengths
    def row_lengths(self) -> list[int]:
        """Positions held per row (host mirror)."""
        return list(self.host)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """The longest row's length (host mirror)."""
        return max(self.host) if self.host else 0

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        """The fixed capacity."""
        return self.capacity

    def set_row_lengths(self, lengths: list[int]) -> None:
        """Shorten rows to ``lengths`` (each <= the row's current length): a rollback per row, on the device.

        Raises:
            ValueError: a length longer than the row's or negative, or a wrong number of rows.
        """
        if len(lengths) != len(self.host) or any(not 0 <= new <= old for new, old in zip(lengths, self.host)):
            raise ValueError(f"cannot roll rows of {self.host} positions back to {lengths}")
        self._set(lengths)

    @torch.inference_mode()
    def _set(self, lengths: list[int]) -> None:
        if len(set(lengths)) == 1:
            self.lengths.fill_(lengths[0])
        else:
            for row, length in enumerate(lengths):
                self.lengths[row].fill_(length)
        self.host = [int(n) for n in lengths]

    def crop(self, tokens_to_remove: int) -> None:
        """transformers' crop: remove ``-tokens_to_remove`` positions from every row (a negative count)."""
        self._set([max(0, n + min(0, tokens_to_remove)) for n in self.host])

    def reset(self) -> None:
        """Empty every row (the buffers stay allocated)."""
        self._set([0] * len(self.host))

    @torch.inference_mode()
    def advance(self, n: int) -> None:
        """Every row grew by ``n`` positions (after a forward of n new tokens per row)."""
        self.lengths.add_(n)
        self.host = [length + n for length in self.host]

    def check_room(self, width: int) -> None:
        """Raise :class:`CapacityError` when a forward of ``width`` tokens would not fit."""
        if self.get_seq_length() + width > self.capacity:
            raise CapacityError(f"a forward of {width} tokens after {self.get_seq_length()} cached ones exceeds the "
                                f"static cache's capacity of {self.capacity} positions")

    @torch.inference_mode()
    def keep(self, row: int, positions: list[int], layer: DeviceLayer | None = None) -> None:
        """Keep only ``positions`` (ascending) of ``row``, moved to its front in order (every layer, or one)."""
        index = torch.tensor(positions, dtype=torch.long, device=self.device)
        for each in ([layer] if layer is not None else self.layers):
            if each.is_initialized:
                each.move(row, index)
        lengths = list(self.host)
        lengths[row] = len(positions)
        self._set(lengths)


def new_device_cache(model: torch.nn.Module, capacity: int, batch: int = 1) -> DeviceCache:
    """An empty :class:`DeviceCache` for ``model`` (one layer per decoder layer) on the model's device."""
    from specviz.core.kv import _decoder_layers

    return DeviceCache(_decoder_layers(model), capacity, next(model.parameters()).device, batch)


def chain_block(n: int, device: torch.device) -> torch.Tensor:
    """(n, n) bool: the new tokens' causal pattern (token i sees new tokens 0..i)."""
    return torch.ones((n, n), dtype=torch.bool, device=device).tril_()


def tree_block(parents: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The fed block of a tree pass ([last committed] + nodes, parents[i] = -1 for a child of the root): (n, n) bool
    ancestor-or-self pattern and (n,) depths (root 0), n = 1 + len(parents)."""
    from specviz.core.tree import ancestors

    n = 1 + len(parents)
    block = [[False] * n for _ in range(n)]
    depth = [0] * n
    block[0][0] = True
    for i in range(len(parents)):
        path = ancestors(parents, i)  # the nodes from the root's child down to i
        depth[1 + i] = len(path)
        block[1 + i][0] = True
        for node in path:
            block[1 + i][1 + node] = True
    return (torch.tensor(block, dtype=torch.bool, device=device),
            torch.tensor(depth, dtype=torch.long, device=device))


def device_inputs(cache: DeviceCache, depth: torch.Tensor, block: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Set the cache's write slots for a forward of n tokens and build its positions and mask, all on the device.

    Args:
        cache: the cache; ``cache.slots`` becomes (B, n) ``lengths[:, None] + arange(n)``.
        depth: (n,) or (B, n) long: each new token's depth below the last committed position's (a chain: arange).
        block: (n, n) or (B, n, n) bool: which new tokens each new token sees (a chain: lower triangle).

    Returns:
        (B, n) position ids ``lengths + depth`` and the (B, 1, n, capacity) bool mask: key j visible to new token i
        of row b iff j < lengths[b] (the context) or j = lengths[b] + m with block[i, m].
    """
    n = depth.shape[-1]
    start = cache.lengths[:, None]
    cache.slots = start + torch.arange(n, device=start.device)[None, :]
    positions = start + depth
    rel = cache.kv_range[None, :] - start  # (B, capacity): key slot relative to the first new one
    inside = (rel >= 0) & (rel < n)
    batch = start.shape[0]
    block = block.expand(batch, n, n) if block.dim() == 2 else block
    seen = block.gather(2, rel.clamp(0, n - 1)[:, None, :].expand(batch, n, -1))  # (B, n, capacity)
    mask = (rel < 0)[:, None, :] | (inside[:, None, :] & seen)
    return positions, mask[:, None]
