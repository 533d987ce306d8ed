"""A drafter's decoding time as a share of standard decoding's for as many tokens (1 / its decoding speedup): the one
source the Live tab's plan (:func:`app.costs.known_costs`) and the Arena's rough estimate
(:func:`app.arena.costs.method_shares`) read for a method, a drafter at a draft length k ("ngram", "4").

Where a share comes from, first found first:

1. this method's latest run here (:func:`learn_shares`): an Arena run's rows (:func:`app.arena.costs.learn_arena`)
   or a finished Live run (:func:`app.costs.learn_costs`, the speculative run's ms per token over the baseline's),
   each replacing the method's earlier share, kept per target key (the Live tab's :func:`app.live.run.costs_key`:
   the operator's weight format under the target's spec, as the Arena runs it);
2. on the CPU, the method's prior (:data:`CPU_PRIORS`): its decoding speedup measured in docs on the project's 2-core
   CPU, a range wide enough to hold the spread measured there (a :class:`PriorShare`; on a GPU none applies);
3. nothing (None): each tab keeps its own fallback (the Live tab the other drafters' runs with a wide range, the
   Arena :data:`app.arena.progress.METHOD_TIME`).

A Live run's method is its drafter and k as the Arena names them (:func:`live_method`): "eagle:tree" for a tree of
the Arena's size, "eagle:lookup" for lookup first, a confidence gate other than the Arena's stated in the name
("distilled gate 0.2"): a share is read only where it means the same thing.
"""

from __future__ import annotations

import threading
from typing import Mapping, NamedTuple

from app import zerogpu
from app.estimates import MIN_SPREAD
from app.inputs import LOOKAHEAD_DEFAULTS
from specviz.analysis.arena_rows import AUTO, TREE_NODES
from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE
from specviz.drafters.registry import HEAD_KEYS
from specviz.runtime.models.base import ModelLoadError
from specviz.runtime.models.devices import resolve_device


class MethodShare(NamedTuple):
    """A method's decoding time as a share of standard decoding's for as many tokens: ``share`` (1 / its decoding
    speedup), ``low``–``high`` its range (the ends of the speedup's spread, inverted)."""

    share: float
    low: float
    high: float


class PriorShare(MethodShare):
    """A :class:`MethodShare` from :data:`CPU_PRIORS` (measured on the project's CPU, not run here yet)."""

    __slots__ = ()


class ScaledPrior(PriorShare):
    """A :class:`PriorShare` measured on float32 weights, grown for int8 or int4 ones (:data:`DEARER_VERIFY`)."""

    __slots__ = ()


Method = tuple[str, str]
"""(drafter, k label): the registry key or the Arena's variant ("eagle:lookup"), and "4", "auto" or "adaptive"."""

PRIOR_WORDS = "planned from this drafter's measured cost on the project's CPU, not yet run here"
"""What a plan from :data:`CPU_PRIORS` says of its source."""
SCALED_WORDS = "measured on float32 weights, grown for these weights' dearer verification"
"""What a plan from a :class:`ScaledPrior` adds."""

CPU_PRIORS: dict[tuple[str, str | None], PriorShare] = {
    # (drafter, k label; None: any k, where the docs measured little difference between k's): the share of standard
    # decoding's time (1 / decoding speedup) on the project's 2-core CPU, with a range holding the spread measured.
    # docs/heads.md, "The distilled draft model (2026-12-05)", both benches: the untrained early exit at 0.32x and
    # 0.34x (each drafted token 0.61 of a target step, 2 % accepted); the default Arena's rows 0.28-0.30x
    # (tests/test_arena_estimate.py); a trial's Live run 0.25x, and one on a busy machine (load 7) 0.26x
    ("early-exit", "4"): PriorShare(3.1, 2.6, 4.2),
    # docs/benchmarks.md, "Benchmark results": 1.21x (0.91-2.09x by category) at k = 4, and its trained-drafters
    # table 1.21x; docs/performance-journal.md sections 12 and 17, k = auto: 1.38x and 1.23x (0.99-1.83x)
    ("ngram", None): PriorShare(0.8, 0.45, 1.1),
    # docs/performance-journal.md sections 12 and 17 and the Spec-Bench subset: 1.38x, 1.26x, 1.20x (0.86-1.82x)
    ("suffix", None): PriorShare(0.78, 0.5, 1.1),
    # docs/heads.md, "head weights in int8": 1.33x (quartiles 1.17-1.54x) at k = 3-6 on a float32 target, 1.06-1.10x
    # (0.94-1.22x) on int4; docs/performance-journal.md section 17, k = auto: 1.12x
    ("eagle", None): PriorShare(0.75, 0.62, 1.06),
    # docs/heads.md, "head weights in int8": 1.54x (1.26-2.02x) float32, 1.13-1.21x on int4
    ("eagle:lookup", None): PriorShare(0.65, 0.5, 1.0),
    # docs/benchmarks.md, "Trained drafters": a tree of 10, 1.02x (0.80-1.50x by category)
    ("eagle:tree", None): PriorShare(0.98, 0.67, 1.25),
    # docs/heads.md, "a copied branch in the head's tree": 1.28x paired (quartiles 1.06-1.82x), 1.36x unpaired
    ("eagle:tree:lookup", None): PriorShare(0.78, 0.55, 0.95),
    # docs/benchmarks.md, "Trained drafters": 1.04x (0.88-1.33x); docs/performance-journal.md 17, k = auto: 1.08x
    ("medusa", None): PriorShare(0.95, 0.75, 1.14),
    # docs/heads.md, "head weights in int8": 1.40x (1.08-1.76x); docs/benchmarks.md: 1.26x
    ("medusa:lookup", None): PriorShare(0.72, 0.57, 0.93),
    # docs/benchmarks.md, "Trained drafters": a tree of 10, 1.05x (0.91-1.40x)
    ("medusa:tree", None): PriorShare(0.95, 0.71, 1.1),
    # docs/heads.md, "a copied branch in the head's tree": 1.33x (one run)
    ("medusa:tree:lookup", None): PriorShare(0.75, 0.64, 0.94),
    # docs/heads.md, "The distilled draft model" (1.01x, fourth training) and "in int8" (1.08x, quartiles 0.94-1.35x);
    # "a confidence gate for the distilled draft model": 1.00x (0.93-1.08x) ungated, as the Arena drafts it
    ("distilled", "4"): PriorShare(0.95, 0.74, 1.08),
    # the same sections at k = 1: 1.13x, 1.15x (1.06-1.26x), 1.12x (1.03-1.22x)
    ("distilled", "1"): PriorShare(0.88, 0.79, 0.97),
    # docs/heads.md, "a confidence gate for the distilled draft model": gate 0.2 (the Live tab's), 1.16x (1.07-1.26x)
    ("distilled gate 0.2", "4"): PriorShare(0.86, 0.79, 0.93),
    # docs/performance-journal.md section 9 (the default W, N, G: 1.03x median) and 17 (k = auto: 1.05x, 0.97-1.18x)
    ("lookahead", None): PriorShare(0.97, 0.8, 1.25),
    # docs/benchmarks.md, "Benchmark results": the bfloat16 copy at k = 4, 0.71x (0.64-0.79x by category)
    ("bf16", "4"): PriorShare(1.41, 1.27, 1.56),
}

INT4_PRIORS: dict[tuple[str, str | None], PriorShare] = {
    # docs/heads.md, "Head weights in int8", on int4 weights, paired: EAGLE alone at k = 3 and 4, 0.96-1.10x
    # (quartiles 0.84-1.22x); docs/heads.md, "the best trained drafter", unpaired: 0.92x
    ("eagle", None): PriorShare(0.98, 0.82, 1.2),
    # the same runs, lookup first: 1.08-1.21x (quartiles 0.89-1.47x); unpaired 1.02x
    ("eagle:lookup", None): PriorShare(0.9, 0.68, 1.12),
}
"""Priors measured on int4 weights (the CPU's measured default here), which replace :data:`CPU_PRIORS`' there."""

DEARER_VERIFY = (1.3, 1.7)
"""How a float32 prior grows on int8 or int4 weights (its middle, its high end): their verification is dearer in
one-token steps (docs/heads.md, "the best trained drafter": a k = 4 EAGLE pass costs 1.40 steps on float32 weights
and 2.34 on int4, x1.67; docs/weights.md: T(5)/T(1) 0.95-0.98 on float32 and bfloat16, 1.86-1.90 on int8 and int4),
and EAGLE's share went from 0.75 to 0.98 (x1.3). A trial on int4 weights saw the early exit at 5.1x, its float32
prior 3.1x (2.6-4.2x)."""
DEARER_FORMATS = ("int8", "int4")

_MEASURED: dict[str, dict[Method, MethodShare]] = {}  # target key -> method -> its latest share measured here
_LOCK = threading.Lock()


def learn_shares(target: str, shares: Mapping[Method, MethodShare]) -> None:
    """Keep ``shares`` (method -> its share measured by a run of ``target`` here), each replacing the method's
    earlier one."""
    with _LOCK:
        _MEASURED.setdefault(target, {}).update(shares)


def measured_share(target: str, method: Method | None) -> MethodShare | None:
    """The latest share a run of ``target`` here measured for ``method`` (an Arena row or a Live run); None: none."""
    with _LOCK:
        return _MEASURED.get(target, {}).get(method) if method is not None else None


def prior_share(method: Method | None, weights: str = "float32") -> PriorShare | None:
    """``method``'s prior from :data:`CPU_PRIORS` (its own k's entry, else its any-k entry) where the runs decode
    on the CPU (:func:`on_cpu`), for targets in the weight format ``weights``: on int4 its entry in
    :data:`INT4_PRIORS` where there is one, else on int8 or int4 the float32 prior grown by :data:`DEARER_VERIFY`
    (a :class:`ScaledPrior`). None on a GPU, for an unknown method or a k not measured."""
    if method is None or not on_cpu():
        return None
    if weights == "int4":
        measured = INT4_PRIORS.get(method) or INT4_PRIORS.get((method[0], None))
        if measured is not None:
            return measured
    prior = CPU_PRIORS.get(method) or CPU_PRIORS.get((method[0], None))
    if prior is None or weights not in DEARER_FORMATS:
        return prior
    middle, high = DEARER_VERIFY
    return ScaledPrior(prior.share * middle, prior.low, prior.high * high)


def key_weights(target: str) -> str:
    """The weight format of the runs kept under ``target`` (a key of :func:`app.live.run.costs_key`: "embedded ·
    int4 weights" names it; a bare spec runs in the operator's format, :func:`app.weights_setting.operator_weights`)."""
    from app.weights_setting import operator_weights

    head, sep, tail = target.rpartition(" · ")
    if sep and tail.endswith(" weights"):
        return tail.removesuffix(" weights")
    return operator_weights()


def share_for(target: str, method: Method | None) -> MethodShare | None:
    """``method``'s share for a run of ``target``: measured here (:func:`measured_share`), else its prior on the
    CPU in the runs' weight format (:func:`prior_share`, :func:`key_weights`; a :class:`PriorShare`), else None."""
    return measured_share(target, method) or prior_share(method, key_weights(target))


def on_cpu() -> bool:
    """Whether the app's runs decode on the CPU (the device "auto" resolves to, ``SPECVIZ_DEVICE`` included; not on
    ZeroGPU): :data:`CPU_PRIORS` hold only there."""
    if zerogpu.active():
        return False
    try:
        return resolve_device(None).type == "cpu"
    except ModelLoadError:
        return False


def run_share(spec_ms_per_token: float, base_ms_per_token: float) -> MethodShare | None:
    """A Live run's share: its speculative run's ms per token over its baseline's (one run: a range of
    :data:`app.estimates.MIN_SPREAD` about it); None without both."""
    if not spec_ms_per_token or not base_ms_per_token or base_ms_per_token <= 0:
        return None
    share = spec_ms_per_token / base_ms_per_token
    return MethodShare(share, share * MIN_SPREAD[0], share * MIN_SPREAD[1])


def live_method(settings) -> Method | None:
    """The method of a Live run of ``settings`` (:class:`app.inputs.Settings`) as the Arena names it: the drafter,
    with ":tree" (a tree of the Arena's :data:`~specviz.analysis.arena_rows.TREE_NODES` nodes) and ":lookup" for
    the heads, a gate other than the Arena's stated (" gate 0.2"), and the k label ("4", "auto"; "adaptive" for
    the heuristic schedule, which the Arena does not run). None for standard decoding, a draft model of the
    visitor's choice, an early exit at a layer of its choice, lookahead at another W, N, G than the Arena's or a tree
    of another size: no share is read for it."""
    drafter = settings.drafter
    if drafter in ("none", "model") or (drafter == "early-exit" and settings.exit_layer not in (None, 0)) or (
            drafter == "lookahead" and (settings.window, settings.ngram, settings.candidates) != LOOKAHEAD_DEFAULTS):
        return None
    variant = drafter
    if drafter in HEAD_KEYS:
        tree = settings.drafted_tree_nodes
        if tree not in (0, TREE_NODES):
            return None
        variant += (":tree" if tree else "") + (":lookup" if settings.lookup else "")
    if settings.gate != (DEFAULT_MIN_CONFIDENCE if drafter in HEAD_KEYS else 0.0):
        variant += f" gate {settings.gate:g}"
    schedule = settings.k_schedule
    return variant, AUTO if schedule == "auto" else str(settings.k) if schedule == "fixed" else "adaptive"


def share_words(share: MethodShare) -> str:
    """ "3.1x (2.6–4.2x)": a share as a time factor with its range."""
    return f"{share.share:.2g}x ({share.low:.2g}–{share.high:.2g}x)"
