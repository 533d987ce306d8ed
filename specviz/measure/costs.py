"""Measured costs read through the one cost model (:mod:`specviz.core.costs`: expected tokens per pass, T_verify(k),
T_pass, the predicted speedups, and :func:`~specviz.core.costs.interpolate`, the one interpolator): the draft cost c
of the drafters that need no extra model, what a lookahead pass costs against a one-token step, the what-if curves
of tokens per pass and speedup against k, and their inverse (the alpha behind a tokens per pass).

The model itself stays in the core because k = auto (:mod:`specviz.core.draft_length`) reads it in every pass, and
the core imports nothing above it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Sequence

import torch

from specviz.core.costs import Costs, expected_tokens_per_pass, interpolate, predicted_speedup_paper
from specviz.core.drafting import DraftContext
from specviz.core.engine import MAX_K
from specviz.core.verify import SamplingConfig
from specviz.drafters.early_exit import early_exit_view
from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW, forward_tokens
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.registry import default_exit_layer
from specviz.measure.timing import time_forward_ms, time_forward_rounds


def measure_draft_costs(target, step_ms: float, *, exit_layer: int | None = None, prompt_len: int = 64,
                        repeats: int = 5, step_repeats: Sequence[float] = ()) -> dict:
    """c (one drafted token's cost / one target step ``step_ms``) of the drafters that need no extra model:
    "early-exit" (a 1-token forward of the target's first layers) and "ngram" (one lookup over a context of
    ``prompt_len`` + 32 tokens).

    Returns ``{"early-exit": c from the median, "early-exit_range": (low, high), "ngram", "ngram_range": (low,
    high), "early_exit_layer"}``; a range spans the drafter's repeats over the one-token step's: the fastest repeat
    over the slowest step of ``step_repeats`` and the reverse (over ``step_ms`` alone when no step repeats are
    given), so it holds the run-to-run noise of both timings. The n-gram's c times the lookup alone (its
    ``propose``: a few microseconds); the engine's per-pass work around any drafter (the cache rollback, the events)
    is no drafting and is not in c."""

    layers = exit_layer or default_exit_layer(target.num_layers)
    view = early_exit_view(target.model, layers)
    rounds = time_forward_rounds(view, target.device, prompt_len, [1], {"default": contextlib.nullcontext},
                                 repeats=repeats, warmup=1)["default"][1]
    early = statistics.median(rounds)
    steps = [t for t in step_repeats if t > 0] or [step_ms]
    gen = torch.Generator().manual_seed(0)
    context = torch.randint(0, int(target.vocab_size), (prompt_len + 32,), generator=gen).tolist()
    drafter, times = NgramDrafter(), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        drafter.propose(DraftContext(context, 4, SamplingConfig(), None))
        times.append((time.perf_counter() - t0) * 1000.0)
    return {"early-exit": early / step_ms, "early-exit_range": (min(rounds) / max(steps), max(rounds) / min(steps)),
            "ngram": statistics.median(times) / step_ms,
            "ngram_range": (min(times) / max(steps), max(times) / min(steps)), "early_exit_layer": float(layers)}


def lookahead_pass_cost(curve: dict[int, float], window: int, ngram: int, candidates: int) -> dict:
    """What a full lookahead pass costs against a one-token step, from a measured forward curve (n new tokens ->
    ms, batch 1: :func:`~specviz.measure.grid.measure_forward_grid`'s row, or
    :func:`~specviz.measure.timing.time_forward_ms`).

    A pass feeds n = 1 + W(N-1) + G(N-1) tokens (:func:`specviz.drafters.lookahead.forward_tokens`); T(n) is read
    from the curve, interpolated between measured n (:func:`~specviz.core.costs.interpolate`). Returns
    ``{"window", "ngram", "candidates", "tokens": n, "step_ms": T(1), "pass_ms": T(n), "ratio": T(n)/T(1),
    "measured": n was timed, "extrapolated": n lies beyond the largest measured n}``. ``ratio`` is also the tokens
    per pass lookahead needs to break even. Raises ValueError without T(1) in ``curve``.
    """

    if 1 not in curve:
        raise ValueError("the forward curve needs the one-token step T(1)")
    n = forward_tokens(window, ngram, candidates)
    pass_ms = interpolate(curve, n)  # the measured T(n) itself when n was timed
    return {"window": window, "ngram": ngram, "candidates": candidates, "tokens": n, "step_ms": curve[1],
            "pass_ms": pass_ms, "ratio": pass_ms / curve[1], "measured": n in curve, "extrapolated": n > max(curve)}


def describe_lookahead_cost(cost: dict) -> str:
    """One line: "lookahead pass at W=4, N=3, G=4: 17 tokens, T(17)/T(1) = 1.85 (interpolated)"."""
    how = "" if cost["measured"] else " (extrapolated)" if cost["extrapolated"] else " (interpolated)"
    return (f"lookahead pass at W={cost['window']}, N={cost['ngram']}, G={cost['candidates']}: {cost['tokens']} "
            f"tokens, T({cost['tokens']})/T(1) = {cost['ratio']:.2f}{how}")



def _lookahead_setting(window: int | None, ngram: int | None, candidates: int | None) -> tuple[int, int, int]:
    """(W, N, G), None taking the defaults of :mod:`specviz.drafters.lookahead`."""

    return window or DEFAULT_WINDOW, ngram or DEFAULT_NGRAM, candidates or DEFAULT_CANDIDATES


def lookahead_cost(target, window: int | None = None, ngram: int | None = None, candidates: int | None = None,
                   prompt_len: int = 64) -> dict:
    """A full lookahead pass's forward (1 + W(N-1) + G(N-1) tokens) against a one-token step, both timed here after
    a ``prompt_len``-token cached prompt (:func:`~specviz.measure.timing.time_forward_ms`, median of 7), as
    :func:`lookahead_pass_cost` (None: the drafter's default W, N, G)."""

    setting = _lookahead_setting(window, ngram, candidates)
    times = time_forward_ms(target.model, target.device, prompt_len, [1, forward_tokens(*setting)])
    return {**lookahead_pass_cost(times, *setting), "prompt_len": prompt_len}


def kernel_lookahead_cost(result: dict, window: int | None = None, ngram: int | None = None,
                          candidates: int | None = None) -> dict:
    """The same from a :func:`kernel_bench` result's curve (n new tokens -> ms; interpolated where n was not timed)."""

    curve = {int(row["new_tokens"]): row["ms"] for row in result["curve"]}
    return {**lookahead_pass_cost(curve, *_lookahead_setting(window, ngram, candidates)),
            "prompt_len": result["settings"]["prompt_len"]}


def lookahead_cost_line(cost: dict) -> str:
    """The bench's line for :func:`lookahead_cost`: tokens, T(n)/T(1), both in ms, and the break-even."""

    return (f"{describe_lookahead_cost(cost)} ({cost['pass_ms']:.1f} ms vs a one-token step of {cost['step_ms']:.1f} "
            f"ms): lookahead pays only above {cost['ratio']:.2f} tokens per pass")



def whatif_curves(alpha: float, c: float, verify_curve: dict[int, float] | None = None,
                  k_max: int = MAX_K) -> dict:
    """Expected tokens per pass and predicted speedups for k = 1..k_max at per-token acceptance ``alpha`` and draft
    cost ratio ``c``.

    ``verify_curve`` (n new tokens -> ms, batch 1, from :func:`~specviz.measure.grid.measure_forward_grid`) gives the
    measured-cost prediction E[tau] x T(1) / (T(k+1) + c k T(1)), with T interpolated between measured n: the cost
    model of :class:`specviz.core.costs.Costs` (:meth:`~specviz.core.costs.Costs.from_forward_curve`); without it that
    series is None.
    """
    ks = list(range(1, k_max + 1))
    tau = [expected_tokens_per_pass(alpha, k) for k in ks]
    paper = [predicted_speedup_paper(alpha, k, c) for k in ks]
    measured = None
    if verify_curve:
        costs = Costs.from_forward_curve(verify_curve, c)
        measured = [costs.speedup(expected, k) if costs.pass_ms(k) > 0 else float("nan")
                    for k, expected in zip(ks, tau)]
    return {"k": ks, "tokens_per_pass": tau, "paper": paper, "measured": measured, "alpha": alpha, "c": c}


def alpha_for_tokens_per_pass(tokens_per_pass: float, k: float) -> float:
    """The per-token acceptance alpha whose expected tokens per pass at draft length ``k`` is ``tokens_per_pass``
    (clamped to [1, k+1]); the inverse of :func:`~specviz.core.costs.expected_tokens_per_pass` in alpha, by bisection.
    """
    if k <= 0:
        return 0.0
    if tokens_per_pass >= k + 1.0:
        return 1.0
    if tokens_per_pass <= 1.0:
        return 0.0
    goal, lo, hi = tokens_per_pass, 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens_per_pass(mid, k) < goal:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
