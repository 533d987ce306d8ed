"""Sliding-window attention under the engine's own attention masks.

A model with sliding-window layers (Mistral, Qwen2/3 with ``use_sliding_window``, Gemma 2/3's interleaved local
layers) lets a query at position p see keys at positions j with p - window < j <= p only. When transformers builds
the mask itself (a chain pass over one prompt) it applies the window from the absolute positions, and the
:class:`~specviz.core.kv.SlabCache` keeps every position, so nothing is lost. But a tree or lookahead pass and a
batch of rows pass their own 4-D mask, which transformers uses as given: without :func:`windowed_mask` the sliding
layers of such a pass would read keys outside their window (tokens a standard decode step cannot see), and greedy
output would differ from standard decoding once the text outgrows the window.
"""

from __future__ import annotations

import torch

FULL, SLIDING = "full_attention", "sliding_attention"


def sliding_window(model: torch.nn.Module) -> tuple[int | None, tuple[str, ...] | None]:
    """(window in tokens, layer types) of ``model``'s sliding layers: (None, None) when it has none; layer types
    None when every layer slides (Mistral states no ``layer_types``)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not isinstance(window, int) or window <= 0 or (types is not None and SLIDING not in types):
        return None, None
    return window, (tuple(types) if types is not None else None)


def windowed_mask(model: torch.nn.Module, mask: torch.Tensor, position_ids: torch.Tensor | None,
                  lengths: list[int]) -> torch.Tensor | dict[str, torch.Tensor]:
    """``mask`` as ``model``'s layers need it: unchanged for a model without sliding layers; the mask with each
    query's window applied when every layer slides; else a {layer type: mask} mapping (transformers' form for
    models that mix full and sliding layers).

    Args:
        model: the causal LM the mask is for.
        mask: (B, 1, n, span) bool, True where a query (one of the n new tokens) may see a key (a cache slot).
        position_ids: (B, n) positions of the new tokens (None: they continue after each row's length).
        lengths: each row's cached positions before this forward; slot j < lengths[b] holds position j, slot
            lengths[b] + i holds new token i.

    Raises:
        NotImplementedError: the model has layer types other than full and sliding attention (one sentence).
    """
    window, types = sliding_window(model)
    if window is None:
        return mask
    if types is not None and set(types) - {FULL, SLIDING}:
        raise NotImplementedError(f"This model's attention layers of kinds {sorted(set(types) - {FULL, SLIDING})} "
                                  "are not supported by tree, lookahead or batched passes: draft a chain for one "
                                  "prompt.")
    batch, _, n, span = mask.shape
    device = mask.device
    starts = torch.tensor(lengths, device=device)[:, None]
    queries = position_ids if position_ids is not None else starts + torch.arange(n, device=device)[None, :]
    keys = torch.arange(span, device=device)[None, :].repeat(batch, 1)  # (B, span): slot j holds position j ...
    for b, start in enumerate(lengths):  # ... except the new tokens' slots, which hold their given positions
        stop = min(span, start + n)
        keys[b, start:stop] = queries[b, :stop - start]
    inside = keys[:, None, :] > queries[:, :, None] - window  # (B, n, span), transformers' sliding overlay
    banded = mask & inside[:, None]
    return banded if types is None else {FULL: mask, SLIDING: banded}


def context_window(*models) -> int | None:
    """The smallest context window (``max_position_embeddings``, or ``n_positions`` etc.) in tokens of the given
    LoadedModels or torch models; None when none of them states one. Positions 0 .. window - 1 exist: a model
    with a learned position table (GPT-2, OPT) cannot read a token at position ``window`` or later."""
    sizes = []
    for item in models:
        model = getattr(item, "model", item)
        config = getattr(model, "config", None)
        if config is None:
            continue
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(text_config, name, None)
            if isinstance(value, int) and value > 0:
                sizes.append(value)
                break
    return min(sizes) if sizes else None


def has_position_table(model: torch.nn.Module) -> bool:
    """Whether ``model`` reads learned absolute positions from a table (GPT-2's ``wpe``, OPT's ``embed_positions``):
    an embedding other than the token embedding whose name says it holds positions. Rotary models (Llama, Mistral,
    Qwen) have none: past their stated window they still run (with degraded text), while a table raises."""
    tokens = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return any(isinstance(module, torch.nn.Embedding) and module is not tokens and ("pos" in name.rsplit(".", 1)[-1]
                                                                                   or name.endswith("wpe"))
               for name, module in model.named_modules())


def position_limit(model: torch.nn.Module) -> int | None:
    """Positions ``model`` can read at all: its context window when it has a position table
    (:func:`has_position_table`), else None (no hard limit; the UI and the CLI still fit prompts to the window)."""
    return context_window(model) if has_position_table(model) else None


def window_budget(model: torch.nn.Module, prompt_tokens: int, max_new_tokens: int) -> int:
    """The new tokens a run can emit within ``model``'s position table: ``max_new_tokens``, or fewer where the
    table ends first (the last emitted token sits at position limit - 1 and is never fed; every pass feeds only
    positions below it, since a pass drafts at most the tokens still to emit less one). Models without a table
    (:func:`position_limit` None) get ``max_new_tokens``.

    Raises:
        ValueError: the prompt alone fills the table (one sentence).
    """
    window = position_limit(model)
    if window is None:
        return max_new_tokens
    if prompt_tokens >= window:
        raise ValueError(f"The prompt has {prompt_tokens:,} tokens, which fills the target's context window of "
                         f"{window:,} tokens: shorten it.")
    return min(max_new_tokens, window - prompt_tokens)
