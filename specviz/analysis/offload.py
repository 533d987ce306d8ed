"""The verify curve of a target held in memory beside the same target offloaded (weights streamed per forward).

T(n) is the ms of one target forward over n new tokens after a cached prompt (a verification of k = n - 1 drafted
tokens reads n). Speculative decoding pays when T(k+1) / T(1) stays well below the tokens a pass yields: the
implied speedup of a pass that yields tau tokens is tau * T(1) / T(k+1) (:func:`specviz.core.costs.predicted_speedup`
with the draft's cost left out). A target in memory pays for its compute, which grows with n; an offloaded one first
streams every weight from disk (or, on a GPU, from CPU memory) whether it checks 1 token or k+1, so its curve is
flatter and the speedup approaches tokens per pass.

:func:`time_curves` times the models interleaved (each round times every n once on every model, the order of the n
and of the models alternating between rounds) so a machine whose speed drifts slows both alike; ratios are taken
within a round and their median kept.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

import torch

from specviz.core.costs import predicted_speedup
from specviz.core.kv import Clock, forward_logits, new_cache, rollback_cache

Progress = Callable[[str], None]
TOKEN_COUNTS = tuple(range(1, 10))  # n = 1..9: k = 0..8


def time_curves(models: dict[str, torch.nn.Module], device: torch.device, *, prompt_len: int = 64,
                token_counts: Iterable[int] = TOKEN_COUNTS, rounds: int = 3, warmup: int = 1, seed: int = 0,
                progress: Progress | None = None) -> dict[str, dict[int, list[float]]]:
    """ms of one forward over n new tokens after a ``prompt_len``-token cached prompt, per round and model.

    Args:
        models: name -> causal LM (same vocabulary), e.g. {"memory": ..., "disk": ...}.
        device: where inputs go (the models' main device); timed with :class:`specviz.core.kv.Clock`.
        token_counts: the n to time (each forward computes logits for all n, as a verification does).
        rounds / warmup: timed and untimed rounds.

    Returns:
        name -> {n: [ms of round 1, ...]}.
    """
    counts = list(token_counts)
    vocab = min(int(m.config.get_text_config().vocab_size) for m in models.values())
    ids = torch.randint(0, vocab, (prompt_len + max(counts),), generator=torch.Generator().manual_seed(seed)).tolist()
    caches = {name: new_cache(model) for name, model in models.items()}
    for name, model in models.items():
        forward_logits(model, ids[:prompt_len], caches[name], 1)
    clock, names = Clock(device), list(models)
    out: dict[str, dict[int, list[float]]] = {name: {n: [] for n in counts} for name in names}
    for i in range(warmup + rounds):
        for n in (counts if i % 2 == 0 else counts[::-1]):
            for name in (names if i % 2 == 0 else names[::-1]):
                t0 = clock.now_ms()
                forward_logits(models[name], ids[prompt_len:prompt_len + n], caches[name], n)
                elapsed = clock.now_ms() - t0
                rollback_cache(caches[name], prompt_len)
                if i >= warmup:
                    out[name][n].append(elapsed)
        if progress is not None:
            progress(f"round {i + 1}/{warmup + rounds}{' (warm-up)' if i < warmup else ''} done")
    return out


def curve_figures(times: dict[int, list[float]]) -> dict[int, dict[str, float]]:
    """Per n: the median ms and the median over rounds of T(n)/T(1) (both rounds' forwards timed side by side)."""
    ones = times[1]
    return {n: {"ms": statistics.median(ms), "ratio": statistics.median(t / one for t, one in zip(ms, ones))}
            for n, ms in sorted(times.items())}


def line_fit(figures: dict[int, dict[str, float]]) -> tuple[float, float]:
    """(fixed ms per forward, ms per token): the least-squares line through the median ms against n. An offloaded
    model's fixed part holds the streaming of its weights; the per-token part is the compute both copies share."""
    ns = sorted(figures)
    mean_n = statistics.fmean(ns)
    mean_ms = statistics.fmean(figures[n]["ms"] for n in ns)
    spread = sum((n - mean_n) ** 2 for n in ns)
    slope = sum((n - mean_n) * (figures[n]["ms"] - mean_ms) for n in ns) / spread if spread else 0.0
    return mean_ms - slope * mean_n, slope


def implied_speedup(tokens_per_pass: float, ratio: float) -> float:
    """tau * T(1) / T(k+1) for a pass yielding ``tokens_per_pass`` whose forward costs ``ratio`` one-token steps
    (the draft's own cost left out: an upper bound for a drafter that costs something)."""
    return predicted_speedup(tokens_per_pass, 1.0, ratio)


def speedup_table(figures: dict[str, dict[int, dict[str, float]]], taus: Iterable[float] = (1.5, 2.0, 3.0)
                  ) -> list[dict]:
    """Rows per k = n - 1 >= 1: each model's T(k+1)/T(1) and its implied speedup at each tau (None where tau exceeds
    k + 1, which a pass cannot yield) and at tau = k + 1 (every draft accepted)."""
    rows = []
    names = list(figures)
    for n in sorted(figures[names[0]]):
        if n < 2:
            continue
        row = {"k": n - 1}
        for name in names:
            ratio = figures[name][n]["ratio"]
            row[name] = {"ratio": ratio,
                         **{f"tau={tau:g}": implied_speedup(tau, ratio) if tau <= n else None for tau in taus},
                         "all_accepted": implied_speedup(n, ratio)}
        rows.append(row)
    return rows


def format_markdown(figures: dict[str, dict[int, dict[str, float]]], taus: Iterable[float] = (1.5, 2.0, 3.0)) -> str:
    """Two markdown tables: the verify curves (ms and T(n)/T(1) per model) and the implied speedups per k."""
    names, taus = list(figures), list(taus)
    head = "| n (k = n-1) | " + " | ".join(f"{m} ms | {m} T(n)/T(1)" for m in names) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(names))]
    for n in sorted(figures[names[0]]):
        cells = " | ".join(f"{figures[m][n]['ms']:.1f} | {figures[m][n]['ratio']:.2f}" for m in names)
        lines.append(f"| {n} ({n - 1}) | {cells} |")
    fits = {m: line_fit(figures[m]) for m in names}
    lines += ["", "Least-squares line through the medians: " + "; ".join(
        f"{m} {a:.0f} ms per forward + {b:.1f} ms per token" for m, (a, b) in fits.items()) + "."]
    columns = [f"tau={t:g}" for t in taus] + ["all_accepted"]
    titles = [f"tau = {t:g}" for t in taus] + ["tau = k+1"]
    lines += ["", "| k | " + " | ".join(f"{m}: {title}" for m in names for title in titles) + " |",
              "|" + "---|" * (1 + len(names) * len(columns))]
    for row in speedup_table(figures, taus):
        cells = " | ".join("-" if row[m][c] is None else f"{row[m][c]:.2f}" for m in names for c in columns)
        lines.append(f"| {row['k']} | {cells} |")
    return "\n".join(lines)
