"""Self-speculation from the target's own first L layers (early exit), with no training.

The draft model is a view of the target that runs embeddings, decoder layers 0..L-1, the final norm and
the LM head. Weights are shared with the target (the same Parameter objects; nothing is copied). The KV
cache is *not* shared: the view keeps its own cache for its L layers (the invariant of
:class:`~specviz.drafters.model.ModelDrafter`). Sharing it would save the prompt's early-layer prefill but
would tie the draft's rollback to the target's; we keep them apart so each cache has one owner.
See LayerSkip (Elhoushi et al. 2024) and Draft & Verify (Zhang et al. 2023) for the idea.
"""

from __future__ import annotations

import copy

import torch

from specviz.drafters.model import ModelDrafter
from specviz.runtime.placement import rehook_view


def early_exit_view(model: torch.nn.Module, num_layers: int) -> torch.nn.Module:
    """A shallow copy of a decoder-only ``*ForCausalLM`` that runs only its first ``num_layers`` layers.

    Raises:
        ValueError: if num_layers is not in [1, total layers].
    """
    total = model.config.num_hidden_layers
    if not 1 <= num_layers <= total:
        raise ValueError(f"exit layer must be in 1..{total}, got {num_layers}")
    config = copy.copy(model.config)
    config.num_hidden_layers = num_layers
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:num_layers]
    inner = copy.copy(model.model)
    inner._modules = dict(inner._modules)
    inner.config = config
    inner.layers = torch.nn.ModuleList(list(model.model.layers)[:num_layers])
    outer = copy.copy(model)
    outer._modules = dict(outer._modules)
    outer.config = config
    outer.model = inner
    return rehook_view(outer)  # a placed target's copies run their own forward (specviz.runtime.placement)


class EarlyExitDrafter(ModelDrafter):
    """A :class:`ModelDrafter` over :func:`early_exit_view` of the target (weights shared, own cache)."""

    def __init__(self, target_model: torch.nn.Module, exit_layer: int) -> None:
        total = target_model.config.num_hidden_layers
        super().__init__(early_exit_view(target_model, exit_layer), f"early exit (layer {exit_layer}/{total})")
        self.exit_layer = exit_layer
