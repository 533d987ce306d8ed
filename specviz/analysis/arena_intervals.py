"""The 95% intervals of an arena row's counted figures, from the row's own counts (one source for the tables, the
charts, the downloads and the predictions' spread, :func:`specviz.analysis.arena_rows.derived_spread`):

- the counted shares, acceptance rate and α (:func:`share_interval`): over the row's passes, resampled whole
  (:func:`specviz.measure.stats.pass_share_interval`), or the Wilson interval of its summed counts for a row
  without per-pass counts (:func:`share_basis` says which);
- tokens per pass (:func:`tokens_per_pass_interval`): the percentile bootstrap of the mean over the row's passes,
  the Live tab's figure (:func:`specviz.measure.stats.tokens_per_pass_interval`).

A row is a dict of :mod:`specviz.analysis.arena_rows` (its counts and its per-pass lists ``pass_drafted``,
``pass_accepted``, ``pass_rejections``, ``pass_tokens``; a pooled row: its prompts' passes one after another).
"""

from __future__ import annotations

from specviz.measure.stats import Interval, pass_share_interval, tokens_per_pass_interval as _tokens_interval
from specviz.measure.stats import wilson_interval


SHARE_COUNTS = {"acceptance_rate": ("accepted", ("drafted",)), "alpha": ("accepted", ("accepted", "rejections"))}
"""The counted shares of a row and the counts they are made of: (numerator, the counts summed into the denominator);
acceptance rate = accepted / drafted, α = accepted / (accepted + rejections) (:mod:`specviz.core.counters`)."""


OVER_PASSES, OVER_COUNTS = "passes", "counts"
"""What a counted share's interval was computed over (:func:`share_basis`): the row's passes, resampled whole, or
(a row without per-pass counts) its summed counts taken as independent tokens."""


def _share(row: dict, key: str) -> tuple[Interval, str] | None:
    """:func:`share_interval` and :func:`share_basis` in one: (interval, :data:`OVER_PASSES` or
    :data:`OVER_COUNTS`), or None."""
    numerator, parts = SHARE_COUNTS[key]
    if row.get(key) is None:
        return None
    trials = sum(int(row.get(part) or 0) for part in parts)
    successes = int(row.get(numerator) or 0)
    if trials <= 0 or not 0 <= successes <= trials:
        return None
    lists = [row.get(f"pass_{name}") for name in (numerator, *parts)]
    if all(isinstance(values, (list, tuple)) for values in lists) and len({len(v) for v in lists}) == 1:
        tops, bottoms = lists[0], [sum(counts) for counts in zip(*lists[1:])]
        if sum(tops) == successes and sum(bottoms) == trials:  # the passes are the row's own counts
            interval = pass_share_interval(tuple(tops), tuple(bottoms))
            if interval is not None:
                return interval, OVER_PASSES
    return wilson_interval(successes, trials), OVER_COUNTS


def share_interval(row: dict, key: str) -> Interval | None:
    """A counted share of a row (``key`` in :data:`SHARE_COUNTS`, a fraction in [0, 1]) with its 95% interval.

    Over passes, where the row keeps its per-pass counts (:data:`specviz.analysis.arena_rows.PASS_COUNTS`, summing
    to its counts; a pooled row: its prompts' passes one after another): a pass's drafted tokens are not
    independent trials (after the first rejection the rest of the pass is rejected), so the passes are resampled
    whole, :func:`specviz.measure.stats.pass_share_interval` (the percentile bootstrap over the passes that drafted,
    seed 0, at least as wide as the Wilson interval of the sums, so a row that accepted everything keeps a width;
    the Live tab's cards use the same). E.g. six passes of 4 drafted, all or none accepted, 12 of 24: 0.5 in
    0.17–0.83, where Wilson says 0.31–0.69.

    Fallback, the Wilson score interval of the row's summed counts (:func:`specviz.measure.stats.wilson_interval`,
    every token an independent trial: too narrow when passes are correlated), only where the per-pass counts are
    missing (a row saved before they were kept, counters pooled without passes) or do not match the counts, or
    fewer than two passes drafted; e.g. 5 accepted of 68 drafted -> 0.074 in 0.032–0.16. :func:`share_basis` says
    which one a row got.

    Returns None when the row has no such share or nothing was counted. Raises KeyError for a ``key`` that is not a
    counted share."""
    found = _share(row, key)
    return found and found[0]


def share_basis(row: dict, key: str) -> str | None:
    """What :func:`share_interval` computed the row's interval over: :data:`OVER_PASSES` or :data:`OVER_COUNTS`
    (Wilson); None without an interval."""
    found = _share(row, key)
    return found and found[1]


def tokens_per_pass_interval(row: dict) -> Interval | None:
    """A row's tokens per pass (tokens after the prefill / passes, bonus included) with its 95% interval over its
    passes: :func:`specviz.measure.stats.tokens_per_pass_interval` of the tokens each pass emitted (``pass_tokens``;
    a pooled row: its prompts' passes one after another), the Live tab's card's interval; e.g. passes of 1, 4, 4,
    1, 4 tokens: 2.80 in 1.60–4.00.

    Returns None where the row keeps no per-pass tokens (the standard row, whose every pass makes one token;
    counters pooled without passes), where they do not add up to its counts (``passes`` passes,
    ``emitted_after_prefill`` tokens), or with fewer than two passes."""
    tokens = row.get("pass_tokens")
    if not isinstance(tokens, (list, tuple)) or row.get("tokens_per_pass") is None:
        return None
    if len(tokens) != row.get("passes") or sum(tokens) != row.get("emitted_after_prefill"):
        return None
    return _tokens_interval(tokens)


def tokens_per_pass_spread(row: dict) -> dict:
    """``{"tokens_per_pass_low", "tokens_per_pass_high"}`` of a row: the ends of :func:`tokens_per_pass_interval`
    (tokens per pass), both None without one."""
    interval = tokens_per_pass_interval(row)
    return {"tokens_per_pass_low": interval and interval.low, "tokens_per_pass_high": interval and interval.high}


def alpha_ends(row: dict) -> tuple[float, float] | None:
    """A row's α (per-token acceptance, in [0, 1]) as (low, high): the ends of its 95% interval
    (:func:`share_interval`, the table's α cell), or (α, α) where it has none; None without α."""
    alpha = row.get("alpha")
    if alpha is None:
        return None
    interval = share_interval(row, "alpha")
    return (interval.low, interval.high) if interval is not None else (alpha, alpha)
