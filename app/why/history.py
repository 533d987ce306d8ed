"""The Live tab's runs as the Why tab reads them: the newest run to mark on the what-if chart
(:func:`latest_run`, :func:`from_history`) and the lookahead settings whose pass cost the cards show
(:func:`lookahead_settings`)."""

from __future__ import annotations

import math

import gradio as gr

from app.records import NO_INTERVAL, RunSummary
from app.why.controls import DEFAULT_C, measured_c, run_alpha, whatif
from specviz.core.engine import MAX_K
from specviz.core.verdict import format_apart
from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW


def lookahead_settings(history: list[RunSummary] | None = None) -> list[tuple[int, int, int]]:
    """The (W, N, G) of lookahead passes to cost: the newest Live lookahead run's (its history row's
    :attr:`~app.records.RunSummary.lookahead`), then the defaults when they differ."""
    out = [row.lookahead for row in history or [] if row.lookahead is not None][:1]
    default = (DEFAULT_WINDOW, DEFAULT_NGRAM, DEFAULT_CANDIDATES)
    return out + ([default] if default not in out else [])


RUN_HINT = ("Your latest Live run fills these (— until you run one in the Live tab); or type a run's k, tokens per "
            "pass and speedup to mark it on the chart.")


def latest_run(history: list[RunSummary] | None) -> dict | None:
    """The newest Live-tab run with a drafter and a k it started from (:attr:`~app.records.RunSummary.start_k`: not
    k = auto) that measured its tokens per pass: {"k", "tokens_per_pass", "speedup", "adaptive", "drafter",
    "speedup_note", "tokens_per_pass_interval", "speedup_interval", "tokens_per_pass_spread"} (the note: why a run
    has no speedup, e.g. "too noisy"; None when it has one; the intervals: (low, high) 95% ranges, None where the
    row holds none; the spread: the Live card's words for tokens per pass, "" in a row that keeps none)."""
    for row in history or []:
        if row.start_k is not None and row.tokens_per_pass:
            interval = row.tokens_per_pass_interval
            return {"k": row.start_k, "tokens_per_pass": float(row.tokens_per_pass), "speedup": row.speedup,
                    "adaptive": row.adaptive, "drafter": row.drafter, "speedup_note": row.speedup_note,
                    "tokens_per_pass_interval": None if interval == NO_INTERVAL else interval,
                    "speedup_interval": row.speedup_interval if row.speedup else None,
                    "tokens_per_pass_spread": row.tokens_per_pass_spread}
    return None


def box_text(value: float, interval: tuple[float, float] | None) -> str:
    """A run box's text for a Live run's figure: to 2 decimals, as every tab shows it, with its 95% range in the
    Live card's words when the run recorded one: "2.88 (1.75–4.00)" (:func:`specviz.core.verdict.format_apart`: a
    third decimal where two read alike), else "2.88"."""
    if interval is None:
        return f"{value:.2f}"
    low, high = format_apart(interval[0], interval[1], 2, 3)
    return f"{value:.2f} ({low}–{high})"


def run_hint(run: dict | None) -> str:
    """The line under the run boxes: :data:`RUN_HINT`; for a marked run (``run``: :func:`latest_run`'s) also what
    the ★'s error bars are (:func:`bars_words`) and, without a speedup, why its box stays —."""
    if run is None:
        return f"<div class='why-note why-run-hint'>{RUN_HINT}</div>"
    bars = bars_words(run)
    if run["speedup"]:
        return f"<div class='why-note why-run-hint'>{RUN_HINT} {bars}</div>"
    why = run.get("speedup_note") or "not judged"
    return (f"<div class='why-note why-run-hint'>Your latest Live run is marked by its k and tokens per pass; its "
            f"speedup was {why} (the Live tab says why), so that box stays —. Type a speedup to mark one. "
            f"{bars}</div>")


def bars_words(run: dict) -> str:
    """What the ★'s error bars are for a Live ``run`` (:func:`latest_run`'s): "The ★'s bars: its 95% ranges, as the
    Live cards show them." (with "; 5 passes: too few to tell" where the card says so); or, for a run that recorded
    no range of its tokens per pass, why the ★ has none: "one pass: no spread", or a history row from before ranges
    were kept."""
    spread = run.get("tokens_per_pass_spread") or ""
    if run.get("tokens_per_pass_interval") is None:
        why = spread or "the run recorded no range"
        return f"The ★ has no error bar: its tokens per pass has none ({why})."
    few = spread.split("; ", 1)[1] if "; " in spread else ""
    return "The ★'s bars: its 95% ranges, as the Live cards show them" + (f"; {few}." if few else ".")


def run_c(run: dict | None, measurement: dict | None) -> float | None:
    """The draft cost c of the marked run's drafter (``run``: :func:`latest_run`'s), when this tab knows it: for an
    n-gram lookup (its name "n-gram lookup (2-3)") the lookup's c the last ``measurement`` timed
    (:func:`app.why.controls.measured_c`, about 0.0003), else 0 (a lookup costs microseconds against a step of
    milliseconds; the chart's title says it is not measured). None for every other drafter: c stays as it is (Measure
    sets the early exit's). Before, an n-gram run was drawn at the slider's default c = 0.05 with nothing to say so."""
    if run is None or not str(run.get("drafter", "")).replace("-", "").lower().startswith("ngram"):
        return None
    costs = (measurement or {}).get("costs") or {}
    return measured_c(costs, "ngram") if "ngram" in costs else 0.0


def from_history(history, c=DEFAULT_C, batch=1, measurement=None, kept: dict | None = None):
    """When the Live tab's history changes: mark its newest run, set α to the value that gives that run's tokens
    per pass at its k (:func:`app.why.controls.run_alpha`), c to its drafter's where known (:func:`run_c`: an n-gram
    lookup's), and redraw (an adaptive-k run whose tokens per pass exceed its starting k + 1 is marked at the
    smallest k that gives them, so the run boxes' check, :func:`run_issues`, holds). ``c`` and ``batch`` are the raw
    payloads (preprocess off: a c typed out of range while the run ran is drawn at the nearest end of its slider, an
    emptied box at its ``kept`` number, as :func:`whatif` draws them; the slider's own release says the clamp).
    Returns (run k, tokens/pass and speedup as their boxes' text, to 2 decimals with the run's 95% range when it
    recorded one (:func:`box_text`: "2.88 (1.75–4.00)"; the ★'s error bars), α, c (a skip when :func:`run_c` knows
    none), what-if figure, the hint under the run boxes, :func:`run_hint`)."""
    run = latest_run(history)
    if run is None:
        return (gr.skip(),) * 7
    k, tpp = run["k"], round(run["tokens_per_pass"], 2)  # as the Live card shows it
    if run["adaptive"] and tpp > k + 1:  # adaptive k drafted longer than its start: the smallest k that gives it
        k = min(MAX_K, math.ceil(tpp - 1))
    alpha = run_alpha(k, tpp)
    drafter_c = run_c(run, measurement)
    c = c if drafter_c is None else drafter_c
    tpp = box_text(tpp, run["tokens_per_pass_interval"])  # with its 95% range: the ★'s error bar
    # a run whose speedup was not judged: — stays
    speedup = box_text(run["speedup"], run["speedup_interval"]) if run["speedup"] else None
    figure = whatif(alpha, c, batch, k, tpp, speedup, measurement, kept)
    return k, tpp, speedup, alpha, gr.skip() if drafter_c is None else c, figure, run_hint(run)
