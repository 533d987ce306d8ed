"""Drafting strategies, each a :class:`specviz.core.drafting.DrafterBase` (the drafter contract: every hook the
engine calls, with defaults)."""

from specviz.core.drafting import Draft, DraftContext, Drafter, DrafterBase
from specviz.drafters.early_exit import EarlyExitDrafter, early_exit_view
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter

__all__ = ["Draft", "DraftContext", "Drafter", "DrafterBase", "EarlyExitDrafter", "ModelDrafter", "NgramDrafter",
           "early_exit_view"]
