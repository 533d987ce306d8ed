"""The Live tab's runs as the Why tab reads them: the newest run to mark on the what-if chart
(:func:`latest_run`, :func:`from_history`) and the lookahead settings whose pass cost the cards show
(:func:`lookahead_settings`)."""

from __future__ import annotations

import math

import gradio as gr

from app.records import RunSummary
from app.why.controls import DEFAULT_C, measured_c, run_alpha, whatif
from specviz.core.engine import MAX_K
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
    "speedup_note"} (the note: why a run has no speedup, e.g. "too noisy"; None when it has one)."""
    for row in history or []:
        if row.start_k is not None and row.tokens_per_pass:
            return {"k": row.start_k, "tokens_per_pass": float(row.tokens_per_pass), "speedup": row.speedup,
                    "adaptive": row.adaptive, "drafter": row.drafter, "speedup_note": row.speedup_note}
    return None


def run_hint(run: dict | None) -> str:
    """The line under the run boxes: :data:`RUN_HINT`, or for a marked run without a speedup why its box stays —."""
    if run is None or run["speedup"]:
        return f"<div class='why-note why-run-hint'>{RUN_HINT}</div>"
    why = run.get("speedup_note") or "not judged"
    return (f"<div class='why-note why-run-hint'>Your latest Live run is marked by its k and tokens per pass; its "
            f"speedup was {why} (the Live tab says why), so that box stays —. Type a speedup to mark one.</div>")


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
    Returns (run k, tokens/pass, speedup, α, c (a skip when :func:`run_c` knows none), what-if figure, the hint
    under the run boxes, :func:`run_hint`)."""
    run = latest_run(history)
    if run is None:
        return (gr.skip(),) * 7
    k, tpp = run["k"], round(run["tokens_per_pass"], 3)
    if run["adaptive"] and tpp > k + 1:  # adaptive k drafted longer than its start: the smallest k that gives it
        k = min(MAX_K, math.ceil(tpp - 1))
    alpha = run_alpha(k, tpp)
    drafter_c = run_c(run, measurement)
    c = c if drafter_c is None else drafter_c
    speedup = round(run["speedup"], 3) if run["speedup"] else None  # a run whose speedup was not judged: — stays
    figure = whatif(alpha, c, batch, k, tpp, speedup, measurement, kept)
    return k, tpp, speedup, alpha, gr.skip() if drafter_c is None else c, figure, run_hint(run)
