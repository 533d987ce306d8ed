"""The forward grid: the target's forward time over n new tokens after a cached prompt, for several batch sizes
(:func:`measure_forward_grid`), with its honesty checks (a larger workload timed faster than a smaller one is noise:
:func:`impossible_points`, :func:`below_less_work`), and the quick probe that estimates how long a grid will take
(:func:`probe_forward_ms`, :func:`grid_seconds`).

Units: ms per forward, tokens, GB/s of weights read per second.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch

from specviz.core.kv import Clock, new_cache, rollback_cache
from specviz.measure.machine import copy_bandwidth_repeats
from specviz.measure.stats import faster_than_possible


TOKEN_COUNTS = (1, 2, 4, 8, 16, 32)
BATCH_SIZES = (1, 4, 16)
REMEASURES = 2  # a batch size whose curve comes out impossible is measured again at most this many more times
ArenaProgress = Callable[[float, str], None]
"""progress(fraction done in [0, 1], message)."""
ShouldStop = Callable[[], bool]


@torch.inference_mode()
def _forward(model: torch.nn.Module, ids: torch.Tensor, cache) -> None:
    model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=ids.shape[1])


@dataclass(frozen=True)
class GridOptions:
    """What :func:`measure_forward_grid` times: forwards of n new tokens (``token_counts``) after a cached
    ``prompt_len``-token prompt (random ids from ``seed``), at each batch size of ``batch_sizes``; ``warmup`` rounds
    not kept, then ``repeats`` kept; a batch size with an impossible point measured again at most ``remeasures``
    more times; ``bandwidth``: also time a large memory copy (GB/s, :func:`copy_bandwidth_gbs`)."""

    prompt_len: int = 64
    token_counts: Sequence[int] = TOKEN_COUNTS
    batch_sizes: Sequence[int] = BATCH_SIZES
    repeats: int = 3
    warmup: int = 2
    bandwidth: bool = False
    seed: int = 0
    remeasures: int = REMEASURES


def measure_forward_grid(target, options: GridOptions | None = None, *, progress: ArenaProgress | None = None,
                         should_stop: ShouldStop | None = None, **settings) -> dict:
    """Median ms of one target forward over n new tokens (logits for all n, as a verification) after a cached
    ``prompt_len``-token prompt, for each batch size (the same prompt repeated) and n.

    The cache is prefilled once per batch size and rolled back after every forward (:func:`rollback_cache`), so
    every measurement starts from the same ``prompt_len`` positions. Each batch size runs ``warmup`` rounds (not
    kept) then ``repeats`` rounds over every n, and keeps the median per n.

    Honesty: a point that measured faster than a smaller workload beyond noise (more new tokens, or a larger
    batch, :func:`impossible_points`: e.g. T(2) below T(1)) cannot be a finding; the batch sizes involved are
    measured again, up to ``remeasures`` more times while one stays impossible; what still is, is in "impossible".

    Returns:
        ``{"token_counts", "batch_sizes", "ms": {batch: {n: ms}}, "spread": {batch: {n: (min ms, max ms)}} over the
        repeats, "samples": {batch: {n: [ms of repeat 1, 2, ...]}} (repeat i of every n timed in the same round),
        "impossible": [{"batch", "n", "than_batch", "than_n"}], "remeasured": [batch sizes measured again],
        "measurements": {batch: times measured}, "param_bytes", "gbs": {batch: {n: GB/s}}, "step_ms", "verify_cost":
        {k: T(k+1)/T(1) at batch 1, for measured k+1}, "copy_bandwidth_gbs" (the median of its repeats, or None),
        "copy_bandwidth_range" ((slowest, fastest) repeat's GB/s, or None), "settings", "wall_s",
        "stopped"}``; GB/s = weight bytes read per forward / its time.

    Args:
        target: a :class:`specviz.runtime.models.LoadedModel`.
        options: what to time (:class:`GridOptions`); ``settings``: its fields by name, replacing ``options``'.
        progress: optional ``progress(fraction done, message)``; should_stop: optional, checked before every
            forward (True ends the grid early: ``"stopped"``).

    Raises:
        ValueError: empty or non-positive token counts or batch sizes.
        TypeError: a setting that is not a field of :class:`GridOptions`.
    """
    o = dataclasses.replace(options or GridOptions(), **settings)
    started = time.perf_counter()
    grid, batch_sizes = _Grid.start(target, o, progress, should_stop)
    ms: dict[int, dict[int, float]] = {}
    for b in batch_sizes:
        ms[b] = grid.batch(b)
        if grid.stopped:
            break
    impossible, remeasured = grid.recheck(ms, o.remeasures)
    one = ms.get(batch_sizes[0], {})
    step = one.get(1)
    result = {
        "token_counts": grid.token_counts, "batch_sizes": batch_sizes, "ms": ms, "param_bytes": target.param_bytes,
        "gbs": {b: {n: target.param_bytes / (t / 1000.0) / 1e9 for n, t in row.items()} for b, row in ms.items()},
        "step_ms": step,
        "verify_cost": {n - 1: t / step for n, t in one.items() if step and n > 1} if batch_sizes[0] == 1 else {},
        "spread": {b: {n: (min(t), max(t)) for n, t in grid.samples[b].items() if n in ms[b]} for b in ms},
        "samples": {b: {n: list(t) for n, t in grid.samples[b].items() if n in ms[b]} for b in ms},
        "impossible": impossible, "remeasured": remeasured, "measurements": dict(grid.measurements),
        **_bandwidth(target.device if o.bandwidth and not grid.stopped else None),
        "settings": {"prompt_len": o.prompt_len, "repeats": o.repeats, "warmup": o.warmup, "seed": o.seed},
        "stopped": grid.stopped,
    }
    result["wall_s"] = time.perf_counter() - started
    grid.say(1.0, "Stopped." if grid.stopped else "Done.")
    return result


@dataclass
class _Grid:
    """The timing loop of :func:`measure_forward_grid` (one batch size at a time)."""

    model: torch.nn.Module
    clock: Clock
    ids: torch.Tensor  # (1, prompt_len + max n) random token ids
    prompt_len: int
    token_counts: list[int]
    warmup: int
    repeats: int
    say: ArenaProgress
    stop: ShouldStop
    total: int  # tokens the whole grid runs (for the progress fraction)
    done: int = 0
    stopped: bool = False
    samples: dict = field(default_factory=dict)  # batch -> {n: [ms of each kept repeat]}
    measurements: Counter = field(default_factory=Counter)  # batch -> times its row was measured

    @classmethod
    def start(cls, target, o: GridOptions, progress: ArenaProgress | None, should_stop: ShouldStop | None
              ) -> tuple[_Grid, list[int]]:
        """The loop for ``o`` on ``target`` (random prompt ids from ``o.seed``) and the batch sizes to run, sorted.
        Raises ValueError for empty or non-positive token counts or batch sizes."""
        token_counts = sorted({int(n) for n in o.token_counts})
        batch_sizes = sorted({int(b) for b in o.batch_sizes})
        if not token_counts or token_counts[0] < 1 or not batch_sizes or batch_sizes[0] < 1:
            raise ValueError("token counts and batch sizes must be >= 1")
        gen = torch.Generator().manual_seed(o.seed)
        ids = torch.randint(0, int(target.vocab_size), (1, o.prompt_len + max(token_counts)), generator=gen)
        rounds = o.warmup + o.repeats
        total = sum(b * (o.prompt_len + sum(token_counts) * rounds) for b in batch_sizes)  # tokens to run
        grid = cls(target.model, Clock(target.device), ids.to(target.device), o.prompt_len, token_counts, o.warmup,
                   o.repeats, progress or (lambda fraction, message: None), should_stop or (lambda: False), total)
        return grid, batch_sizes

    def recheck(self, ms: dict[int, dict[int, float]], remeasures: int = 1) -> tuple[list[dict], list[int]]:
        """Measure again every batch size with a point faster than possible (:func:`impossible_points`) or beaten
        by one, replacing its row of ``ms``, up to ``remeasures`` times while such a point remains. Returns (the
        points still impossible, the batch sizes measured again, in order)."""
        found, again = impossible_points(self.samples), set()
        for _ in range(remeasures):
            if not found or self.stopped:
                break
            now = sorted({p["batch"] for p in found} | {p["than_batch"] for p in found})
            again |= set(now)
            self.total += sum(b * (self.prompt_len + sum(self.token_counts) * (self.warmup + self.repeats))
                              for b in now)
            for b in now:
                self.say(self.done / self.total, f"batch {b}: measuring again (a point came out faster than "
                         f"possible; measurement {self.measurements[b] + 1})")
                ms[b] = self.batch(b)
                if self.stopped:
                    break
            found = impossible_points(self.samples)
        return found, sorted(again)

    def batch(self, b: int) -> dict[int, float]:
        """Median ms per n at batch ``b``: prefill once, then rounds over every n (warm-up rounds first, not kept),
        the cache rolled back after each forward; a burst of other work then spreads over all n instead of
        bending the curve at one of them."""
        if self.stop():
            self.stopped, self.samples[b] = True, {}
            return {}
        self.measurements[b] += 1
        self.say(self.done / self.total, f"batch {b}: prefilling {self.prompt_len} tokens")
        cache = new_cache(self.model)
        _forward(self.model, self.ids[:, :self.prompt_len].expand(b, -1).contiguous(), cache)
        self.done += b * self.prompt_len
        times: dict[int, list[float]] = {n: [] for n in self.token_counts}
        for i in range(self.warmup + self.repeats):
            phase = "warming up" if i < self.warmup else f"round {i - self.warmup + 1}/{self.repeats}"
            self.say(self.done / self.total, f"batch {b}: {phase}")
            for n in self.token_counts:
                if self.stop():
                    self.stopped = True
                    break
                new = self.ids[:, self.prompt_len:self.prompt_len + n].expand(b, -1).contiguous()
                t0 = self.clock.now_ms()
                _forward(self.model, new, cache)
                t1 = self.clock.now_ms()
                rollback_cache(cache, self.prompt_len)
                if i >= self.warmup:
                    times[n].append(t1 - t0)
                self.done += b * n
            if self.stopped:
                break
        self.samples[b] = {n: t for n, t in times.items() if len(t) == self.repeats}
        return {n: statistics.median(t) for n, t in self.samples[b].items()}


IMPOSSIBLE_MARGIN = 0.1  # a larger workload must beat a smaller one by more than this share to be flagged


def impossible_points(samples: dict[int, dict[int, Sequence[float]]], margin: float = IMPOSSIBLE_MARGIN
                      ) -> list[dict]:
    """The points of a forward grid that measured faster than a smaller workload beyond noise
    (:func:`specviz.measure.stats.faster_than_possible`): more new tokens at the same batch size, or a larger batch
    at the same n, cannot take less time. ``samples``: batch -> {n: repeat times in ms}. One entry per offending
    point, naming the first smaller workload it beats: ``{"batch", "n", "than_batch", "than_n"}``."""
    out = []
    batches = sorted(samples)
    for b in batches:
        for n in sorted(samples[b]):
            smaller = [(b, m) for m in sorted(samples[b]) if m < n]
            smaller += [(c, n) for c in batches if c < b and n in samples[c]]
            beaten = next(((c, m) for c, m in smaller
                           if faster_than_possible(samples[c][m], samples[b][n], margin=margin)), None)
            if beaten is not None:
                out.append({"batch": b, "n": n, "than_batch": beaten[0], "than_n": beaten[1]})
    return out


def below_less_work(ms: dict[int, dict[int, float]], flagged: Iterable[tuple[int, int]] = ()) -> list[dict]:
    """The points of a forward grid measured below a smaller workload that :func:`impossible_points` does not flag:
    their median is lower than that of fewer new tokens at the same batch size, or of a smaller batch at the same n,
    but by no more than its margin, or with repeats that overlap. More work cannot take less time, so such a point
    is within noise of impossible: the two workloads measured the same, and the dip is no finding.

    Args:
        ms: batch -> {n: median ms} (:func:`measure_forward_grid`'s ``"ms"``).
        flagged: (batch, n) of the points already flagged impossible (left out here).

    Returns:
        One entry per point, naming the smaller workload it is furthest below: ``{"batch", "n", "than_batch",
        "than_n", "below"}``, ``below`` the share it is below that workload's median (0.1 = 10 %).
    """
    skip = set(flagged)
    out = []
    batches = sorted(ms)
    for b in batches:
        for n in sorted(ms[b]):
            if (b, n) in skip or not ms[b][n]:
                continue
            smaller = [(b, m) for m in ms[b] if m < n] + [(c, n) for c in batches if c < b and n in ms[c]]
            shortfall = [(1.0 - ms[b][n] / ms[c][m], c, m) for c, m in smaller if ms[c][m] and ms[b][n] < ms[c][m]]
            if shortfall:
                below, c, m = max(shortfall)
                out.append({"batch": b, "n": n, "than_batch": c, "than_n": m, "below": below})
    return out


@torch.inference_mode()
def probe_forward_ms(target, token_counts: Sequence[int] = (1, 16), *, prompt_len: int = 16, repeats: int = 2,
                     seed: int = 0, budget_ms: float = 0.0, max_repeats: int = 0) -> dict[int, float]:
    """A quick cost probe (a second or so on a small CPU): the median ms of one target forward over n new tokens
    after a cached ``prompt_len``-token prompt of random ids (batch 1), for each n of ``token_counts``; one
    untimed warm-up round (the first forwards after a load or a thread-count change run cold), then ``repeats`` timed rounds, the cache rolled back
    after each forward. With ``budget_ms``, more rounds follow while the timed rounds so far took less than it, up
    to ``max_repeats`` rounds in all: a median of more forwards, so one stalled forward on a shared CPU does not set
    it (two timed forwards made the median their mean)."""
    counts = sorted({int(n) for n in token_counts})
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, int(target.vocab_size), (1, prompt_len + counts[-1]), generator=gen).to(target.device)
    clock, cache = Clock(target.device), new_cache(target.model)
    _forward(target.model, ids[:, :prompt_len], cache)
    times: dict[int, list[float]] = {n: [] for n in counts}
    spent, rounds = 0.0, 0
    while rounds < 1 + repeats or (spent < budget_ms and rounds < 1 + max(repeats, max_repeats)):
        for n in counts:
            t0 = clock.now_ms()
            _forward(target.model, ids[:, prompt_len:prompt_len + n], cache)
            elapsed = clock.now_ms() - t0
            rollback_cache(cache, prompt_len)
            if rounds:
                times[n].append(elapsed)
                spent += elapsed
        rounds += 1
    return {n: statistics.median(t) for n, t in times.items()}


def grid_seconds(probe: dict[int, float], *, prompt_len: int = 64, token_counts: Sequence[int] = TOKEN_COUNTS,
                 batch_sizes: Sequence[int] = BATCH_SIZES, repeats: int = 3, warmup: int = 2) -> float:
    """The expected seconds of :func:`measure_forward_grid` with these settings, from a :func:`probe_forward_ms`
    result (ms of one forward over n tokens, at least two n): a forward of b rows x n tokens is taken to cost
    max(T(1), b n t), t = T(n_max) / n_max the per-token cost of a wide forward (memory-bound below, compute-bound
    above), and the prefill of each batch b x ``prompt_len`` tokens at t per token."""
    largest = max(probe)
    step, per_token = probe[min(probe)], probe[largest] / largest
    total = 0.0
    for b in batch_sizes:
        total += b * prompt_len * per_token
        total += (warmup + repeats) * sum(max(step, b * n * per_token) for n in token_counts)
    return total / 1000.0


def _bandwidth(device) -> dict:
    """``{"copy_bandwidth_gbs", "copy_bandwidth_range"}``: the median GB/s of :func:`copy_bandwidth_repeats` on
    ``device`` and its (lowest, highest) repeat; both None for no ``device`` (not asked, or the grid stopped)."""
    if device is None:
        return {"copy_bandwidth_gbs": None, "copy_bandwidth_range": None}
    rates = copy_bandwidth_repeats(device)
    return {"copy_bandwidth_gbs": statistics.median(rates), "copy_bandwidth_range": (min(rates), max(rates))}
