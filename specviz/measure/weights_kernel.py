"""The step time, memory floor and verify curve of a target in each weight format, measured in one process.

For each format (specviz.runtime.weights.formats) the target runs forwards of n = 1..9 new tokens after the same cached
prompt (each rolled back), every format and every n once per round, their order alternating between rounds, so a
machine whose speed drifts slows every format of a round alike. Figures per format:

- ``step_ms``: the median one-token forward (a standard decoding step), in ms;
- ``linear_mb``: the bytes of the linears in that format (the LM head included), MB;
- ``floor_ms``: those bytes over the measured copy bandwidth (bytes read + written per second of a large copy),
  the time a step cannot beat while it reads every weight once;
- ``verify``: {n: median over rounds of T(n) / T(1) within the round}, what verifying k = n - 1 drafted tokens
  costs in one-token steps;
- ``step_ms_range``: the fastest and slowest one-token forward over the rounds (ms);
- ``speedup``: float32's step_ms / this format's (when float32 is measured).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

import torch

from specviz.runtime.weights.formats import FORMATS, linear_bytes
from specviz.runtime.weights.loaded import with_weights

TOKEN_COUNTS = tuple(range(1, 10))


def _round_times(models: dict, prompt_len: int, token_counts: list[int], rounds: int, warmup: int,
                 after_round: Callable[[int], None] | None = None) -> dict[str, list[dict[int, float]]]:
    """format -> one {n: ms} per timed round, each format and n timed once per round (order alternating);
    ``after_round(i)`` is called after round i (warm-ups included, from 1), e.g. to raise RunCancelled on Stop."""
    from specviz.core.kv import Clock, forward_logits, new_cache, rollback_cache

    first = next(iter(models.values()))
    vocab = int(first.model.config.get_text_config().vocab_size)
    ids = torch.randint(0, vocab, (prompt_len + max(token_counts),), generator=torch.Generator().manual_seed(0))
    ids = ids.tolist()
    caches = {}
    for fmt, loaded in models.items():
        caches[fmt] = new_cache(loaded.model)
        forward_logits(loaded.model, ids[:prompt_len], caches[fmt], 1)
    clock = Clock(first.device)
    out: dict[str, list[dict[int, float]]] = {fmt: [] for fmt in models}
    names = list(models)
    for i in range(warmup + rounds):
        times: dict[str, dict[int, float]] = {fmt: {} for fmt in names}
        for n in (token_counts if i % 2 == 0 else token_counts[::-1]):
            for fmt in (names if i % 2 == 0 else names[::-1]):
                t0 = clock.now_ms()
                forward_logits(models[fmt].model, ids[prompt_len:prompt_len + n], caches[fmt], n)
                times[fmt][n] = clock.now_ms() - t0
                rollback_cache(caches[fmt], prompt_len)
        if i >= warmup:
            for fmt in names:
                out[fmt].append(times[fmt])
        if after_round is not None:
            after_round(i + 1)
    return out


def _figures(rounds: list[dict[int, float]], linear_bytes: int, bandwidth_gbs: float) -> dict:
    """The per-format figures of the module docstring from its rounds (speedup added by the caller)."""
    step_ms = statistics.median(r[1] for r in rounds)
    floor_ms = linear_bytes / (bandwidth_gbs * 1e9) * 1000.0
    verify = {n: round(statistics.median(r[n] / r[1] for r in rounds), 3) for n in rounds[0]}
    # the floor to 3 significant figures: a tiny model's int4 floor (0.003 ms on a fast machine) read 0.0 at 2 places
    return {"step_ms": round(step_ms, 2), "linear_mb": round(linear_bytes / 1e6, 1),
            "floor_ms": float(f"{floor_ms:.3g}"),
            "step_over_floor": round(step_ms / floor_ms, 2), "verify": verify,
            "step_ms_range": [round(min(r[1] for r in rounds), 2), round(max(r[1] for r in rounds), 2)],
            "step_ms_quartiles": [round(q, 2) for q in statistics.quantiles([r[1] for r in rounds], n=4)]
            if len(rounds) > 1 else None}


def kernel_by_format(target, formats: Iterable[str] = FORMATS, *, prompt_len: int = 64, rounds: int = 9,
                     warmup: int = 2, progress: Callable[[str], None] | None = None,
                     bandwidth_gbs: float | None = None, after_round: Callable[[int], None] | None = None) -> dict:
    """Measure ``target`` (a float32 LoadedModel) in each of ``formats``; returns {"formats": {fmt: figures},
    "copy_bandwidth_gbs", "threads", "load_average" (1-minute, before and after), "target", "settings"}.
    ``bandwidth_gbs``: a copy bandwidth measured already (GB/s; measured here when None); ``after_round(i)``: called
    after each round of :func:`_round_times` (whatever it raises ends the measurement).

    Raises WeightsError where a format cannot be applied (e.g. int4 off the CPU)."""
    from specviz.measure.machine import copy_bandwidth_gbs, load_average

    load_before = load_average()
    models = {fmt: with_weights(target, fmt, progress=progress) for fmt in formats}
    bandwidth = bandwidth_gbs or copy_bandwidth_gbs(target.device)
    if progress:
        progress(f"copy bandwidth {bandwidth:.1f} GB/s; timing {len(models)} formats x n = 1..9, {rounds} rounds...")
    with torch.inference_mode():
        times = _round_times(models, prompt_len, list(TOKEN_COUNTS), rounds, warmup, after_round)
    figures = {}
    for fmt, loaded in models.items():
        figures[fmt] = _figures(times[fmt], linear_bytes(loaded.model), bandwidth)
    if "float32" in figures:
        for fig in figures.values():
            fig["speedup"] = round(figures["float32"]["step_ms"] / fig["step_ms"], 2)
    return {"formats": figures, "copy_bandwidth_gbs": round(bandwidth, 1), "threads": torch.get_num_threads(),
            "load_average": [load_before, load_average()], "target": target.label,
            "settings": {"prompt_len": prompt_len, "rounds": rounds, "warmup": warmup}}


def format_kernel_by_format(result: dict) -> str:
    """The text table of :func:`kernel_by_format`: one row per format, the verify curve T(n)/T(1) for n = 2..9."""
    load = ", ".join("?" if v is None else f"{v:.1f}" for v in result["load_average"])
    lines = [f"weight formats on {result['target']}: {result['threads']} threads, copy bandwidth "
             f"{result['copy_bandwidth_gbs']} GB/s, load average {load} (before, after)",
             f"{'format':<9} {'linears':>8} {'step':>8} {'floor':>7} {'step/':>6} {'vs':>5}  T(n)/T(1), n = 2..9",
             f"{'':<9} {'MB':>8} {'ms':>8} {'ms':>7} {'floor':>6} {'f32':>5}"]
    for fmt, fig in result["formats"].items():
        curve = " ".join(f"{fig['verify'][n]:.2f}" for n in TOKEN_COUNTS[1:])
        lines.append(f"{fmt:<9} {fig['linear_mb']:>8.1f} {fig['step_ms']:>8.2f} {fig['floor_ms']:>7.2f} "
                     f"{fig['step_over_floor']:>6.2f} {fig.get('speedup', float('nan')):>5.2f}  {curve}")
    return "\n".join(lines)


def kernel_report(target, rounds: int = 9, progress: Callable[[str], None] | None = None) -> tuple[dict, str]:
    """``bench --kernel --weights all [--repeats R]``: (the :func:`kernel_by_format` result over ``rounds`` timed
    rounds, its text table)."""
    result = kernel_by_format(target, rounds=max(2, rounds), progress=progress)
    return result, format_kernel_by_format(result)
