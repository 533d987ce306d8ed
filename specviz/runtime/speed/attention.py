"""The attention speed-ups of the fast path: SDPA's grouped-query kernel with masks (``sdpa-gqa``) and the query
heads of a group folded into rows (``folded-gqa``, :func:`_folded_sdpa`); and attention row by row for a model whose
verifications must compute each row exactly as a one-token step does (:func:`mark_row_exact`)."""

from __future__ import annotations

import os
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

ENV_FORCE_GQA = "TRANSFORMERS_SDPA_FORCE_GQA"  # transformers' switch: SDPA's grouped-query attention even with a mask


def _grouped_attention(model: torch.nn.Module) -> bool:
    """Turn on SDPA's grouped-query attention with masks (CPU, sdpa attention, grouped key/value heads)."""
    config = model.config.get_text_config()
    heads, kv_heads = getattr(config, "num_attention_heads", 0), getattr(config, "num_key_value_heads", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or not kv_heads or kv_heads == heads:
        return False
    os.environ.setdefault(ENV_FORCE_GQA, "1")
    return os.environ[ENV_FORCE_GQA] == "1"


_STOCK_SDPA: Callable | None = None  # transformers' own ``sdpa`` attention function, kept when it is replaced


def _fold_attention(model: torch.nn.Module) -> int:
    """Mark the grouped-query attention modules of a CPU sdpa model for :func:`_folded_sdpa` (installed once per
    process); returns how many were marked (0: nothing to fold)."""
    config = model.config.get_text_config()
    if getattr(config, "_attn_implementation", None) != "sdpa" or next(model.parameters()).device.type != "cpu":
        return 0
    modules = [m for m in model.modules() if getattr(m, "num_key_value_groups", 1) > 1]
    if not modules or not _install_folded_sdpa():
        return 0
    for module in modules:
        module._specviz_fold = True
    return len(modules)


def _install_folded_sdpa() -> bool:
    """Make :func:`_folded_sdpa` transformers' ``sdpa`` attention (idempotent); False if the registry is missing."""
    global _STOCK_SDPA
    try:
        from transformers.modeling_utils import AttentionInterface
    except ImportError:
        return False
    current = AttentionInterface._global_mapping.get("sdpa")
    if current is None:
        return False
    if current is not _folded_sdpa:
        _STOCK_SDPA = current
        AttentionInterface.register("sdpa", _folded_sdpa)
    return True


ROW_EXACT_MAX = 32  # forwards of at most this many new tokens (verifications) go row by row in a row-exact model
ROW_EXACT_ROWS = 64  # masked forwards (trees, lookahead's window, batches) of at most this many rows in all, too


def mark_row_exact(model: torch.nn.Module) -> int:
    """Make ``model``'s attention compute a verification row by row, each row as the one-token step that would
    compute it alone (its own query, exactly the keys it may see, in cache order, no mask: :func:`_row_keys`,
    :func:`_per_row`): a chain verification (one sequence, 2..:data:`ROW_EXACT_MAX` new tokens, plain causal mask),
    and a forward with an explicit mask of at most :data:`ROW_EXACT_ROWS` rows in all (batch rows x new tokens): a
    tree pass (each node sees the context, its ancestors and itself, as its step on the accepted path would; the
    lookahead drafter's window is such a tree) or a batch's pass (each row its own cached length). A model whose
    linears round their input to bfloat16 (the int8/int4/bfloat16 weight formats) needs it: attention over several
    queries differs from one query's by float32 rounding (~1e-7), which a bfloat16 rounding can turn into a 2^-8
    change and a different greedy token. Marks the attention modules (of this model object only) and installs the
    hook; returns how many were marked (0: not an sdpa model, nothing to do)."""
    config = model.config.get_text_config() if hasattr(model, "config") else None
    if getattr(config, "_attn_implementation", None) != "sdpa" or not _install_folded_sdpa():
        return 0
    modules = [m for m in model.modules() if hasattr(m, "num_key_value_groups")]
    for module in modules:
        module._specviz_row_exact = True
    return len(modules)


def _plain_causal(mask: torch.Tensor | None, n: int, length: int) -> bool:
    """Whether ``mask`` (None, or (1, 1, n, L) boolean or additive) lets new row i see exactly keys 0..L-n+i."""
    if mask is None:
        return True
    if mask.dim() != 4 or tuple(mask.shape[-2:]) != (n, length) or mask.shape[0] != 1 or mask.shape[1] != 1:
        return False
    seen = mask[0, 0] if mask.dtype == torch.bool else mask[0, 0] == 0
    causal = torch.ones(n, length, dtype=torch.bool).tril(length - n)
    return bool(torch.equal(seen.cpu(), causal))


class Gather(NamedTuple):
    """The cached positions a row attends to when they are not one range: ``indices`` (m,) int64, ascending; the
    first ``lead`` of them are 0..lead-1 (a tree node's context and root)."""

    indices: torch.Tensor
    lead: int


Keys = slice | Gather  # the cached positions one row attends to: a range (read as a view of the cache) or a Gather


def _row_keys(mask: torch.Tensor | None, batch: int, n: int, length: int) -> list[list[Keys]] | None:
    """Per batch row b and new token i, the key positions its one-token step reads, or None: keep the one-call path.

    Args:
        mask: None (causal: row i sees keys 0..L-n+i), or (B or 1, 1, n, L) boolean (True: may attend) or additive
            (0: may attend).
        batch, n, length: B, new tokens per row, L key positions.

    Returns:
        ``keys[b][i]``: a slice when the row sees a contiguous range (a chain, a batch row, a tree node whose
        ancestors are its predecessors), else a (m,) int64 tensor of the positions it sees, in cache order (a tree
        node: the context, its ancestors from the root down, itself). None for one token of one sequence without a
        mask (the step itself), a causal forward of more than :data:`ROW_EXACT_MAX` new tokens, more than
        :data:`ROW_EXACT_ROWS` rows of a batch or under a mask, any other shape of mask, or a row that sees nothing.
    """
    if mask is None:
        return _causal_rows(batch, n, length)
    if (batch * n > ROW_EXACT_ROWS or mask.dim() != 4 or mask.shape[1] != 1
            or tuple(mask.shape[-2:]) != (n, length) or mask.shape[0] not in (1, batch)):
        return None
    global _LAST_MASK
    last = _LAST_MASK  # every layer of a forward gets the same mask: read it once (a copy kept, compared)
    if (last is not None and last[1] == batch and last[0].shape == mask.shape and last[0].dtype == mask.dtype
            and last[0].device == mask.device and torch.equal(last[0], mask)):
        return last[2]
    if batch == 1 and n > 1 and _plain_causal(mask, n, length):
        rows = _causal_rows(batch, n, length)
    else:
        rows = _masked_rows(mask, batch, n, length)
    _LAST_MASK = (mask.clone(), batch, rows)
    return rows


_LAST_MASK: tuple | None = None  # (a copy of the last mask read, its batch size, its rows)


def _causal_rows(batch: int, n: int, length: int) -> list[list[Keys]] | None:
    """:func:`_row_keys` under the causal mask: row i of every batch row sees keys 0..L-n+i."""
    if batch * n == 1 or n > ROW_EXACT_MAX or batch > 1 and batch * n > ROW_EXACT_ROWS:
        return None
    return [[slice(0, length - n + i + 1) for i in range(n)]] * batch


def _masked_rows(mask: torch.Tensor, batch: int, n: int, length: int) -> list[list[Keys]] | None:
    """:func:`_row_keys` for a (B or 1, 1, n, L) mask of the right shape, read from scratch."""
    seen = (mask[:, 0] if mask.dtype == torch.bool else mask[:, 0] == 0).cpu().expand(batch, n, length)
    counts = seen.sum(-1).reshape(-1)
    if not bool((counts > 0).all()):
        return None
    first = seen.int().argmax(-1).reshape(-1)  # the first position each row sees, its last, its first unseen
    last = (length - 1 - seen.flip(-1).int().argmax(-1)).reshape(-1)
    gap = torch.where(seen.all(-1), length, (~seen).int().argmax(-1)).reshape(-1)
    contiguous = (last - first + 1 == counts).tolist()
    first, counts, gap = first.tolist(), counts.tolist(), gap.tolist()
    columns = seen.reshape(batch * n, length).nonzero()[:, 1].split(counts)
    rows = [slice(first[r], first[r] + counts[r]) if contiguous[r] else Gather(columns[r], gap[r] if first[r] == 0
                                                                                else 0) for r in range(batch * n)]
    return [rows[b * n:(b + 1) * n] for b in range(batch)]


def _per_row(module, query, key, value, rows: list[list[Keys]], options):
    """Attention for each new row alone, as its one-token step computes it: (B, n, H, D) output, None.

    ``rows`` as :func:`_row_keys` returns them. Each row goes through :func:`_folded_sdpa` with one query, its keys
    and values (:func:`_row_views`) and no mask."""
    options = {k: v for k, v in options.items() if k != "is_causal"}
    out = []
    for b, keys in enumerate(rows):
        views = _row_views(key[b:b + 1], value[b:b + 1], keys)
        out.append(torch.cat([_folded_sdpa(module, query[b:b + 1, :, i:i + 1], *next(views), None, **options)[0]
                              for i in range(len(keys))], dim=1))
    return torch.cat(out) if len(out) > 1 else out[0], None


def _row_views(key: torch.Tensor, value: torch.Tensor, keys: list[Keys]):
    """Per row of one sequence, in order, its (1, H_kv, m, D) keys and values: a range is a view of the cache (as
    the step reads it); a :class:`Gather`'s positions are written after their shared lead in one scratch buffer
    (the lead copied once, then each row's other positions: a tree node's ancestors and itself), valid until the
    next row's are yielded."""
    gathers = [k for k in keys if isinstance(k, Gather)]
    if gathers:
        lead = min(k.lead for k in gathers)
        size = (1, key.shape[1], max(len(k.indices) for k in gathers), key.shape[-1])
        scratch = key.new_empty(size), value.new_empty(size)
        scratch[0][:, :, :lead], scratch[1][:, :, :lead] = key[:, :, :lead], value[:, :, :lead]
    for k in keys:
        if isinstance(k, slice):
            yield key[:, :, k], value[:, :, k]
            continue
        rest, m = k.indices[lead:].to(key.device), len(k.indices)
        scratch[0][:, :, lead:m] = key.index_select(2, rest)
        scratch[1][:, :, lead:m] = value.index_select(2, rest)
        yield scratch[0][:, :, :m], scratch[1][:, :, :m]


def _folded_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, **options):
    """transformers' ``sdpa`` attention with the query heads of a group folded into rows (``folded-gqa`` above).

    Args:
        module: the attention module (its ``num_key_value_groups`` G and ``_specviz_fold`` flag are read).
        query: (B, H, n, D); key, value: (B, H_kv, L, D) with H = G * H_kv (views of the cache are fine).
        attention_mask: None (one new token, nothing hidden) or (B or 1, 1, n, L), boolean or additive.
        options: transformers' attention keywords as it passes them (``dropout``, ``scaling``, ``is_causal``,
            ``position_bias``, ``softcap``, ``s_aux``, ``output_attentions``, ...; absent ones take transformers'
            defaults); a folded call reads ``scaling`` (None: 1 / sqrt(D)).

    Returns:
        ((B, n, H, D) contiguous attention output, None), as transformers' function returns.

    Any call it does not fold (:func:`_foldable`: module not marked, no groups, not on the CPU, n > 1 without a mask,
    dropout, position bias, soft-capping, attention sinks, attention weights asked for, or under torch.compile) goes
    to transformers' own function with the same arguments.
    """
    if getattr(module, "_specviz_row_exact", False):
        rows = _row_keys(attention_mask, query.shape[0], query.shape[2], key.shape[2])
        if rows is not None:
            return _per_row(module, query, key, value, rows, options)
    if not _foldable(module, query, key, attention_mask, options):
        return _STOCK_SDPA(module, query, key, value, attention_mask, **options)
    groups = module.num_key_value_groups
    batch, heads, n, dim = query.shape
    # head h reads key/value head h // G (transformers' repeat_kv), so row g*n + i of group j is query head j*G + g
    # at new position i, whose mask row is i
    rows = query.reshape(batch, heads // groups, groups * n, dim)
    mask = None if attention_mask is None else attention_mask.repeat(1, 1, groups, 1)
    out = F.scaled_dot_product_attention(rows, key, value, attn_mask=mask, scale=options.get("scaling"))
    return out.reshape(batch, heads, n, dim).transpose(1, 2).contiguous(), None


def _foldable(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor | None,
              options: dict) -> bool:
    """Whether :func:`_folded_sdpa` folds this call (shapes and ``options`` as it takes them)."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, n, _ = query.shape
    return bool(getattr(module, "_specviz_fold", False) and groups > 1 and query.device.type == "cpu"
                and not options.get("dropout", 0.0) and options.get("position_bias") is None
                and key.shape[1] * groups == heads
                and options.get("softcap") is None and options.get("s_aux") is None
                and not options.get("output_attentions") and not torch.compiler.is_compiling()
                and _enough_work(batch * key.shape[1])
                and (attention_mask is None and n == 1
                     or attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[1] == 1
                     and attention_mask.shape[2] == n))


def _enough_work(units: int) -> bool:
    """Whether folding keeps every thread busy: SDPA's CPU kernel splits its work by batch row and head, and a
    folded layer has only batch x H_kv of them (3 for SmolLM2-135M), which 2 threads share 2 + 1. Measured at 1 024
    cached tokens, 30 layers: 1 thread, one new token 6.0 -> 5.3 ms folded, five 14.6 -> 11.9; 2 threads, one new
    token 4.2 -> 4.6 ms (slower), five 9.6 -> 8.7. So fold on one thread, or where each thread gets two units."""
    threads = torch.get_num_threads()
    return threads == 1 or units >= 2 * threads
