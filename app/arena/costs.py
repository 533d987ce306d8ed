"""Which measured step cost the Arena's rough estimate rests on (:func:`chosen_costs`), and how busy the machine is
now (:func:`machine_load`). Every cost keeps the load other programs put on the machine while it was measured
(:attr:`app.costs.RunCosts.measured_load`): the estimate moves only by the load changed since
(:func:`app.estimates.load_factor`), as a cost measured on a busy machine already holds its slowness.

An arena run loads its target in the operator's weight format with the threads tuned for it, as a Live run in that
format does; the Live tab keeps its costs under the target spec for that format and under "target · int4 weights"
for another (:func:`app.live.run.costs_key`), so only the former apply. Of what applies, the newest measurement
wins: the latest arena run's T_step (:func:`learn_arena`), the latest Live run (:func:`app.costs.newest_run`)
or the forwards the start-up timed (:func:`app.costs.tuned_costs`). A start-up figure from a quiet moment is
thus replaced as soon as a run measured the machine as it is now (seen: 39 ms a token planned, 215-243 ms measured).

Each arena run also leaves its methods' decoding time as a share of standard decoding's (:func:`learn_arena`,
:func:`method_shares`), kept with the Live runs' in :mod:`app.shares`: the next estimate takes a method's share
measured here where it has one (the untrained early exit at k = 4 took 3.1x a standard run's time, n-gram lookup
0.6x: one constant for both misplaced either), else on the CPU its prior measured on the project's CPU.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Sequence

from app import costs as live
from app import estimates, shares as method_store
from app.costs import RunCosts
from app.estimates import MIN_SPREAD
from app.shares import MethodShare
from app.render import seconds_text
from specviz.analysis.arena_rows import BASELINE

ARENA_RUN = "the latest arena run of this model here"
LIVE_RUN = "the latest run of this model on this server"
STARTUP = "forwards timed on this machine"

_ARENA: dict[str, RunCosts] = {}  # target spec -> the latest arena run's standard decoding costs
_LOCK = threading.Lock()


def arena_costs(target: str, rows: Sequence[dict], prefill: RunCosts | None = None,
                now: float | None = None, load: tuple[float, int] | None = None) -> RunCosts | None:
    """Standard decoding's costs measured by an arena run of ``target`` from its ``rows``
    (:attr:`specviz.analysis.arena_rows.ArenaResult.rows`): the median T_step (ms a token after the prefill) of its
    baseline rows (drafter "none"), its spread the rows' lowest and highest T_step over that median (at least
    :data:`app.estimates.MIN_SPREAD`); the prompt read's cost from ``prefill`` (the costs known for the target; 0
    without). ``now``: when measured (time.time() s); ``load``: other programs' load during the run (CPUs' worth of
    CPU count: :func:`app.estimates.machine_load`; None: unknown). None without a baseline row with a T_step."""
    base = [r for r in rows if r.get("drafter") == "none" and (r.get("t_step_ms") or 0) > 0]
    if not base:
        return None
    steps = sorted(float(r["t_step_ms"]) for r in base)
    middle = steps[len(steps) // 2]
    low = min(float(r.get("t_step_ms_low") or r["t_step_ms"]) for r in base) / middle
    high = max(float(r.get("t_step_ms_high") or r["t_step_ms"]) for r in base) / middle
    return RunCosts(prefill.prefill_ms_per_token if prefill else 0.0, middle, None, ARENA_RUN,
                    (min(MIN_SPREAD[0], low), max(MIN_SPREAD[1], high)),
                    prefill_fixed_ms=prefill.prefill_fixed_ms if prefill else 0.0,
                    measured_at=time.time() if now is None else now, measured_load=load)


def learn_arena(target: str, rows: Sequence[dict], load: tuple[float, int] | None = None) -> None:
    """Keep an arena run's costs (:func:`arena_costs`, ``load``: other programs' load during the run) and its
    methods' shares (:func:`shares_of_rows`, each replacing that method's earlier one, Live runs' included:
    :func:`app.shares.learn_shares`) for the next estimates of ``target``; no costs without a measured baseline."""
    costs = arena_costs(target, rows, live.known_costs(target), load=load)
    with _LOCK:
        if costs is not None:
            _ARENA[target] = costs
    method_store.learn_shares(target, shares_of_rows(rows))


def shares_of_rows(rows: Sequence[dict]) -> dict[tuple[str, str], MethodShare]:
    """Each method's decoding time as a share of standard decoding's, from an arena run's per-prompt ``rows``
    (:attr:`specviz.analysis.arena_rows.ArenaResult.rows`), keyed by (drafter, k label): the median over its
    prompts of 1 / decoding speedup, its range from 1 / the highest to 1 / the lowest end of their spreads (a row
    without a spread: its own value), at least :data:`app.estimates.MIN_SPREAD` about the share. E.g. n-gram k=4
    at 1.70x (0.86–4.69x) on one prompt: 0.588 (0.213–1.163). Rows without a decoding speedup above 0 are left out."""
    found: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in rows:
        value = r.get("decode_speedup")
        if r.get("drafter") == BASELINE or not value or value <= 0:
            continue
        fast, slow = r.get("decode_speedup_high") or value, r.get("decode_speedup_low") or value
        found.setdefault((r["drafter"], str(r.get("k"))), []).append((1.0 / value, 1.0 / max(fast, value),
                                                                       1.0 / max(min(slow, value), 1e-9)))
    out = {}
    for key, values in found.items():
        share = sorted(v[0] for v in values)[len(values) // 2]
        low, high = min(v[1] for v in values), max(v[2] for v in values)
        out[key] = MethodShare(share, min(low, share * MIN_SPREAD[0]), max(high, share * MIN_SPREAD[1]))
    return out


def method_shares(target: str, methods: Sequence[tuple[str, str]]) -> list[MethodShare]:
    """The shares of those of ``methods`` ((drafter, k label) pairs: ("ngram", "4"), ("early-exit", "auto")) that
    have one, in their order (:func:`app.shares.share_for`, as the Live tab's plan reads them): measured by the
    latest arena run (:func:`learn_arena`) or Live run of ``target`` here, else on the CPU the method's prior (a
    :class:`app.shares.PriorShare`); [] where none has."""
    found = (method_store.share_for(target, m) for m in methods)
    return [share for share in found if share is not None]


def chosen_costs(target: str, now: float | None = None) -> RunCosts | None:
    """The costs an arena run of ``target`` should take, newest first: of the latest arena run, of the latest Live
    run in the same weight format (its prompt read from the Live runs' median), or the start-up's timed forwards;
    its ``source`` says which and how long ago ("the latest arena run of this model here, 3 min 5 s ago"). ``now``:
    time.time() s. None when nothing applies (no invented number)."""
    with _LOCK:
        arena = _ARENA.get(target)
    known, newest = live.known_costs(target), live.newest_run(target)
    if newest is not None and known is not None:
        newest = dataclasses.replace(known, base_ms_per_token=newest.base_ms_per_token, source=LIVE_RUN,
                                     spread=MIN_SPREAD, measured_at=newest.measured_at,
                                     measured_load=newest.measured_load)
    candidates = [c for c in (arena, newest, live.tuned_or_none(target)) if c is not None]
    if not candidates:
        return None
    best = max(candidates, key=lambda c: c.measured_at if c.measured_at is not None else float("-inf"))
    if best.measured_at is None:
        return best
    ago = max(0.0, (time.time() if now is None else now) - best.measured_at)
    return dataclasses.replace(best, source=f"{best.source}, {seconds_text(ago, at_least=1)} ago")


def machine_load() -> tuple[float, int] | None:
    """Other programs' (load, CPU count) now, as every tab reads it (:func:`app.estimates.machine_load`: their
    runnable threads sampled over the last seconds, or before the first samples the 5-minute load average less this
    process's running threads); None where the OS has no load average."""
    return estimates.machine_load()
