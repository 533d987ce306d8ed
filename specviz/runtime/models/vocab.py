"""Vocabularies: whether a target and a draft model mean the same token by the same id, and how many ids to compare."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specviz.runtime.models.base import LoadedModel, VocabularyMismatchError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def same_vocabulary(target: LoadedModel, draft: LoadedModel) -> bool:
    """Whether the two tokenizers map the same strings (added and special tokens included) to the same ids. When
    not, a draft model drafts through :mod:`specviz.drafters.cross_tokenizer` (its text is re-tokenized)."""
    return target.tokenizer is draft.tokenizer or target.tokenizer.get_vocab() == draft.tokenizer.get_vocab()


def check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """Raise VocabularyMismatchError (naming both labels) unless a token id means the same token to both models.

    The tokenizers must map the same strings (added and special tokens included) to the same ids, and each LM
    head must cover every id of the vocabulary. LM heads of different sizes beyond that (padding rows) are
    allowed: compare probabilities over ``shared_vocab_size(target, draft)`` ids.
    """
    if target.tokenizer is not draft.tokenizer:
        target_vocab, draft_vocab = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
        if target_vocab != draft_vocab:
            differing = len(set(target_vocab.items()) ^ set(draft_vocab.items()))
            raise VocabularyMismatchError(
                f"The draft {draft.label} and the target {target.label} use different vocabularies "
                f"({len(draft_vocab)} vs {len(target_vocab)} tokens, {differing} entries differ), so their token "
                f"ids mean different things: pick a drafter with the target's tokenizer.")
    needed = token_id_count(target.tokenizer)
    for loaded in (target, draft):
        if loaded.vocab_size < needed:
            raise VocabularyMismatchError(
                f"The LM head of {loaded.label} has {loaded.vocab_size} outputs but the tokenizer it shares with "
                f"{(draft if loaded is target else target).label} has {needed} ids, so some ids have no logits.")


def token_id_count(tokenizer: PreTrainedTokenizerBase) -> int:
    """The number of ids ``tokenizer`` defines (its largest id + 1, added and special tokens included)."""
    return max(tokenizer.get_vocab().values()) + 1


def shared_vocab_size(target: LoadedModel, draft: LoadedModel) -> int:
    """The number of leading logits both LM heads have: slice both distributions to it before comparing them."""
    return min(target.vocab_size, draft.vocab_size)
