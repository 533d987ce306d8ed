"""Drafting with a causal LM of the same vocabulary: a smaller model, a bfloat16 copy of the target, the
target's own first layers (see :mod:`specviz.drafters.early_exit`) or the target itself (oracle).

The drafter keeps its own KV cache. Invariant after ``commit``: the cache holds a prefix of the committed
sequence, of length committed - 1 (after a pass with a rejection) or committed - 2 (after a fully accepted
pass, whose last draft token was never fed); ``propose`` first feeds whatever committed tokens are missing
(1 or 2, or the whole prompt on the first pass) in one forward.
"""

from __future__ import annotations

import torch

from specviz.drafters.base import Draft, DraftContext
from specviz.kv import cache_length, forward_logits, new_cache, rollback_cache
from specviz.verify import process_logits, sample


class ModelDrafter:
    """Autoregressive drafting with ``model`` (greedy argmax or sampling with the run's settings).

    Args:
        model: a causal LM whose token ids mean the same as the target's (checked at load time by
            :func:`specviz.models.check_same_vocabulary`).
        name: label shown in the UI and CLI.

    Each proposed token costs one forward of ``model`` (plus one to catch up with the committed tokens).
    In sampling mode ``Draft.draft_probs`` holds the exact (k, V) distributions the tokens were drawn from.
    """

    needs_hidden = False

    def __init__(self, model: torch.nn.Module, name: str) -> None:
        self.model = model
        self.name = name
        self._cache = new_cache(model)
        self._fed: list[int] = []  # token ids whose keys/values are in the cache, in order
        self._stable = 0  # length of the prefix of _fed known to be committed

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a new run (empties the cache; the prompt is fed lazily by the first ``propose``)."""
        self._cache = new_cache(self.model)
        self._fed = []
        self._stable = 0

    @property
    def cache_len(self) -> int:
        """Positions in the drafter's KV cache."""
        return cache_length(self._cache)

    def propose(self, ctx: DraftContext) -> Draft:
        """Draft ``ctx.k`` tokens after ``ctx.committed_ids`` (see the module docstring for the cache)."""
        missing = ctx.committed_ids[len(self._fed):]
        logits = forward_logits(self.model, missing, self._cache, 1)[-1]
        self._fed.extend(missing)
        ids: list[int] = []
        token_probs: list[float] = []
        rows: list[torch.Tensor] = []
        for i in range(ctx.k):
            probs = process_logits(logits[None], ctx.sampling)[0]
            if ctx.sampling.greedy:
                token = int(logits.argmax())
            else:
                token = sample(probs, ctx.generator)
                rows.append(probs)
            ids.append(token)
            token_probs.append(float(probs[token]))
            if i + 1 < ctx.k:
                logits = forward_logits(self.model, [token], self._cache, 1)[-1]
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
