"""Drafting strategies, all behind :class:`specviz.core.drafting.Drafter`."""

from specviz.core.drafting import Draft, DraftContext, Drafter
from specviz.drafters.early_exit import EarlyExitDrafter, early_exit_view
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter

__all__ = ["Draft", "DraftContext", "Drafter", "EarlyExitDrafter", "ModelDrafter", "NgramDrafter", "early_exit_view"]
