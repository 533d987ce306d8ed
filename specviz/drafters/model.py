"""Drafting with a causal LM of the same vocabulary: a smaller model, a bfloat16 copy of the target, the
target's own first layers (see :mod:`specviz.drafters.early_exit`) or the target itself (oracle). A draft model with
another tokenizer drafts through :mod:`specviz.drafters.cross_tokenizer` (its text is re-tokenized for the target).

The drafter keeps its own KV cache. Invariant after ``commit``: the cache holds a prefix of the committed
sequence, of length committed - 1 (after a pass with a rejection) or committed - 2 (after a fully accepted
pass, whose last draft token was never fed); ``propose`` first feeds whatever committed tokens are missing
(1 or 2, or the whole prompt on the first pass, in chunks that check the run's cancel flag).
Its logits are cut to the run's shared vocabulary (``DraftContext.vocab_size``), so it never proposes a padded id.

The draft model's window: a draft model reads positions 0 .. ``draft_window`` - 1 only (its
``max_position_embeddings``, which may be smaller than the target's). Drafting *stops* where the sequence outgrows
it: a pass drafts at most ``draft_window`` + 1 - C tokens (C = committed tokens), so none once the committed
sequence is longer than the window, and the engine then does a plain target step for that pass (an empty
:class:`~specviz.core.drafting.Draft`). The target's input and output never depend on the drafter; only the speed
does. :func:`window_note` says so in one sentence for the UI and the CLI.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specviz.core.drafting import Draft, DraftContext, DrafterBase
from specviz.core.graphs import DraftForwards
from specviz.core.kv import cache_length, rollback_cache
from specviz.runtime.models import context_window
from specviz.core.verify import process_logits, restrict_vocab, sample


class ModelDrafter(DrafterBase):
    """Autoregressive drafting with ``model`` (greedy argmax or sampling with the run's settings).

    Args:
        model: a causal LM whose token ids mean the same as the target's (checked at load time by
            :func:`specviz.runtime.models.check_same_vocabulary`).
        name: label shown in the UI and CLI.

    Each proposed token costs one forward of ``model`` (plus one to catch up with the committed tokens).
    In sampling mode ``Draft.draft_probs`` holds the exact (k, V) distributions the tokens were drawn from.

    ``draft_window`` is the model's context window in tokens (None when its config states none). Past it the
    drafter stops: it proposes fewer tokens, then none, and the target decodes alone (see the module docstring).

    ``min_confidence`` in [0, 1): the confidence gate, as the head drafters' (:mod:`specviz.drafters.heads`): a
    draft stops before the first token whose cumulative draft probability (the product of the draft's
    probabilities of its tokens so far, after the run's temperature and filters) falls below it; 0 always drafts
    k. The draft length depends on the draft model alone, so greedy output and the sampled distribution stay exact.
    Raises ValueError outside [0, 1).
    """

    needs_hidden = False

    def __init__(self, model: torch.nn.Module, name: str, min_confidence: float = 0.0) -> None:
        if not 0.0 <= min_confidence < 1.0:
            raise ValueError(f"the draft confidence threshold must be in [0, 1), got {min_confidence}")
        self.min_confidence = float(min_confidence)
        self.model = model
        self.name = name
        self.draft_window = context_window(model)
        self._forwards = DraftForwards(model)  # graphs on CUDA (specviz.core.graphs), else the eager SlabCache
        self._fed: list[int] = []  # token ids whose keys/values are in the cache, in order
        self._stable = 0  # length of the prefix of _fed known to be committed

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a new run (empties the cache; the prompt is fed lazily by the first ``propose``)."""
        self._forwards.reset(len(prompt_ids))
        self._fed = []
        self._stable = 0

    def room(self, committed: int) -> int:
        """How many tokens this drafter can propose after ``committed`` tokens within its window (a large number
        when it has none): feeding the committed tokens and all but the last drafted one must stay below it."""
        return 1 << 30 if self.draft_window is None else self.draft_window + 1 - committed

    @property
    def _cache(self):
        """The KV cache in use: the graph runner's DeviceCache or a SlabCache (:class:`DraftForwards`)."""
        return self._forwards.cache

    @property
    def cache_len(self) -> int:
        """Positions in the drafter's KV cache."""
        return cache_length(self._cache)

    def propose(self, ctx: DraftContext) -> Draft:
        """Draft ``ctx.k`` tokens after ``ctx.committed_ids`` (see the module docstring for the cache), fewer or
        none where the draft model's window ends."""
        room = self.room(len(ctx.committed_ids))
        if room < ctx.k:  # the window ends within this pass: draft what fits, or nothing
            if room < 1:
                return Draft([])
            ctx = replace(ctx, k=room)
        missing = ctx.committed_ids[len(self._fed):]
        logits = restrict_vocab(self._forwards.logits(missing, self._fed, ctx.cancel), ctx.vocab_size)
        self._fed.extend(missing)
        ids: list[int] = []
        token_probs: list[float] = []
        rows: list[torch.Tensor] = []
        confidence = 1.0
        for i in range(ctx.k):
            logits = ctx.processed(logits, ids)  # the run's penalties, as the target's row here will see them
            probs = process_logits(logits[None], ctx.sampling)[0]
            token = int(logits.argmax()) if ctx.sampling.greedy else sample(probs, ctx.generator)
            confidence *= float(probs[token])
            if confidence < self.min_confidence:  # the gate: the rest of the draft is unlikely to be accepted
                break
            if not ctx.sampling.greedy:
                rows.append(probs)
            ids.append(token)
            token_probs.append(float(probs[token]))
            if i + 1 < ctx.k:
                logits = restrict_vocab(self._forwards.logits([token], self._fed), ctx.vocab_size)
                self._fed.append(token)
        draft_probs = torch.stack(rows) if rows else None
        return Draft(ids, token_probs, draft_probs)

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Roll the cache back to the longest fed prefix that is still committed (at most committed - 1)."""
        keep = self._stable  # already known to be committed (the committed sequence only grows)
        limit = min(len(self._fed), len(committed_ids) - 1)
        while keep < limit and self._fed[keep] == committed_ids[keep]:
            keep += 1
        rollback_cache(self._cache, keep)
        del self._fed[keep:]
        self._stable = keep


def window_note(drafter, prompt_tokens: int, max_new_tokens: int) -> str:
    """One sentence telling the user that ``drafter``'s model window ends before this run does ("" when it does
    not, or when the drafter has no window of its own).

    Args:
        drafter: any drafter; only a :class:`ModelDrafter` (or subclass) with a ``draft_window`` can say something.
        prompt_tokens: length of the encoded prompt the target reads, in tokens.
        max_new_tokens: the run's budget of new tokens.
    """
    window = getattr(drafter, "draft_window", None)
    if not isinstance(window, int) or prompt_tokens + max_new_tokens - 1 <= window:  # its last pass still fits
        return ""
    drafted = window - prompt_tokens  # new tokens after which the committed sequence outgrows the window
    if drafted < 1:
        return (f"The draft model's window is {window:,} tokens, no longer than the {prompt_tokens:,}-token prompt: "
                f"it cannot draft, so the target decodes alone (same output, no speed-up).")
    return (f"The draft model's window is {window:,} tokens: it drafts for the first {drafted:,} new tokens, then the "
            f"target decodes alone (same output).")


def drafter_note(drafter, prompt_tokens: int, max_new_tokens: int) -> str:
    """What to tell the user about ``drafter`` before a run, in sentences ("" when nothing): its own ``note`` when
    it has one (a draft model with another tokenizer says its drafts are re-tokenized and verified as one-hot
    drafts, :class:`~specviz.drafters.cross_tokenizer.CrossTokenizerDrafter`), then :func:`window_note`.

    Args:
        drafter: any drafter, or None for standard decoding.
        prompt_tokens: length of the encoded prompt the target reads, in tokens.
        max_new_tokens: the run's budget of new tokens.
    """
    own = getattr(drafter, "note", "")
    notes = [own if isinstance(own, str) else "", window_note(drafter, prompt_tokens, max_new_tokens)]
    return " ".join(note for note in notes if note)
