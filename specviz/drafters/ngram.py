"""N-gram prompt lookup (Saxena 2023, "Prompt Lookup Decoding"; transformers' ``prompt_lookup_num_tokens``).

The drafter looks for the most recent earlier occurrence of the last n committed tokens (n from
``max_ngram`` down to ``min_ngram``) in the prompt and the text so far, and proposes the tokens that
followed it. It has no model and no cache; its proposals are deterministic (one-hot draft probabilities).
"""

from __future__ import annotations

from specviz.core.drafting import Draft, DraftContext, DrafterBase


class NgramDrafter(DrafterBase):
    """Prompt-lookup drafting.

    Args:
        max_ngram: longest suffix to match (tokens), >= min_ngram.
        min_ngram: shortest suffix to match (tokens), >= 1.

    Raises:
        ValueError: for sizes out of range.
    """

    needs_hidden = False
    cache_len = None

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"n-gram sizes need 1 <= min ({min_ngram}) <= max ({max_ngram})")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.name = f"n-gram lookup ({min_ngram}-{max_ngram})"

    def reset(self, prompt_ids: list[int]) -> None:
        """Nothing to reset: the lookup reads the committed ids each pass."""

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Nothing to roll back."""

    def propose(self, ctx: DraftContext) -> Draft:
        """Up to ``ctx.k`` tokens that followed the latest earlier match of the longest matching suffix.

        A match near the end runs into the text being predicted: the continuation is then copied on from itself
        (as an LZ77 copy may overlap its own output), so periodic text ("ha ha ha", [1, 2, 1, 2]) fills all k
        tokens instead of stopping at the period.
        """
        ids = ctx.committed_ids
        for n in range(min(self.max_ngram, len(ids) - 1), self.min_ngram - 1, -1):
            suffix = ids[-n:]
            # scan right to left for the most recent earlier occurrence (not the suffix itself)
            for start in range(len(ids) - n - 1, -1, -1):
                if ids[start:start + n] == suffix:
                    follow = _copy_on(ids, start + n, ctx.k)
                    if ctx.vocab_size is not None:  # never propose an id outside the run's vocabulary
                        follow = follow[:next((i for i, t in enumerate(follow) if t >= ctx.vocab_size), len(follow))]
                    if follow:
                        return Draft(follow, [1.0] * len(follow))
        return Draft([], [])


def _copy_on(ids: list[int], source: int, count: int) -> list[int]:
    """``count`` tokens copied from ``ids[source:]``, continuing from the copy itself past the end of ``ids``
    (``source`` < len(ids))."""
    period = len(ids) - source
    return [ids[source + i] if i < period else ids[source + i % period] for i in range(count)]
