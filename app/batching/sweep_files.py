"""The sweep's downloads: CSV (:func:`sweep_csv`) and JSON (:func:`sweep_json`), written by
:func:`write_sweep_files`; a stopped sweep's keep what finished, the predicted curve's timings included, and say
what is missing (:func:`missing`, :func:`stop_note`)."""

from __future__ import annotations

import csv
import io

from app.batching.sweep_job import REPEATS
from app.batching.sweep_lesson import sweep_lesson
from app.batching.sweep_reading import (IMPOSSIBLE_COST, NOISY_SPREAD, crossover, disturbance, grid_figures,
                                        verdict)
from app.downloads import write_csv_and_json
from app.estimates import THREADS_DEFINITION
from specviz.analysis.batching import REPEATED_FIGURES, repeat_speedups, repeat_values
from specviz.measure.machine import CONTENDED_SHARE

DEFINITIONS = {
    "batch": "B: prompts decoded together (the example prompts recycled to fill B rows)",
    "standard_tps / speculative_tps": "tokens per second over all rows after the prefill, each run on its own "
                                      "clock; median of the repeats",
    "<figure>_min / <figure>_max": "the lowest and highest of the repeats' own values of that figure (tokens/s, "
                                   "tokens per pass, T(B, 1), T(B, k+1) and the pass cost per repeat); equal with "
                                   "one repeat",
    "speedup": "speculative ÷ standard tokens/s (medians); speedup_min / speedup_max: the repeats' own ratios",
    "verdict": f"pays / loses (every repeat above / below 1, however far apart, however busy the machine), even (the "
               f"repeats on both sides of 1 within {NOISY_SPREAD:.0%} of each other, the machine quiet), or noisy (on "
               f"both sides of 1 and spread more than {NOISY_SPREAD:.0%} or the machine busy: too noisy to tell; or "
               "impossible timings, a pass cheaper than a step or a speedup above the tokens per pass: not a finding)",
    "predicted": "tokens per pass at B = 1 × T(B, 1) / (T(B, k+1) + B × drafting per row at B = 1): a model",
    "predicted_low / predicted_high": "the same formula over its inputs' spread: the B = 1 repeats' tokens per pass "
                                      "and T(B, 1), T(B, k+1) from the grid's fastest and slowest forward (or the "
                                      "sweep's repeats); low = fewest tokens × fastest step ÷ slowest pass",
    "tokens_per_pass": "emitted tokens ÷ target passes of the speculative runs, bonus included",
    "step_ms / verify_ms": "T(B, 1) / T(B, k+1): median ms of the runs' own full-batch forwards",
    "pass_cost": "T(B, k+1) / T(B, 1): one verification pass in one-token steps",
    "kv_megabytes": "the batch's KV cache at its longest row's end (keys and values, all layers)",
    "other_programs_cpu_share": f"share (0..1) of all CPUs' time that other programs used while the grid and the "
                                f"sweep were timed; above {CONTENDED_SHARE:g} the lesson reads no pass cost, and "
                                "repeats on both sides of 1 are too noisy",
    "grid_step_ms / grid_verify_ms": "T(B, 1) / T(B, k+1) timed for the predicted curve (the forward grid): median "
                                     "ms of one forward over 1 / k+1 new tokens per row after a cached prompt; "
                                     "_min / _max: its repeats' range; empty: not timed",
    "grid_too_noisy": f"the grid timed a pass below {IMPOSSIBLE_COST:g} one-token steps, or more work faster than "
                      "less: noise",
    "threads": THREADS_DEFINITION + "; every timing of the sweep, the predicted curve's included, shares it",
    "note": "empty for a sweep that ran to its end; after a Stop, what this batch size misses (its measured speedup, "
            "its predicted-curve timings)",
}
CSV_COLUMNS = ("batch", "standard_tps", "standard_tps_min", "standard_tps_max", "speculative_tps",
               "speculative_tps_min", "speculative_tps_max", "speedup", "speedup_min", "speedup_max", "verdict",
               "predicted", "predicted_low", "predicted_high", "tokens_per_pass", "tokens_per_pass_min",
               "tokens_per_pass_max", "step_ms", "step_ms_min", "step_ms_max", "verify_ms", "verify_ms_min",
               "verify_ms_max", "pass_cost", "pass_cost_min", "pass_cost_max", "kv_megabytes", "grid_step_ms",
               "grid_step_ms_min", "grid_step_ms_max", "grid_verify_ms", "grid_verify_ms_min", "grid_verify_ms_max",
               "grid_too_noisy", "note")


def _asked(result: dict) -> tuple[list[int], bool]:
    """The batch sizes the sweep was asked for (its rows' where the settings do not say) and whether it was asked
    to time the predicted curve."""
    settings = result.get("settings") or {}
    asked = settings.get("batch_sizes") or [r["batch"] for r in result["rows"]]
    return sorted(int(b) for b in asked), bool(settings.get("predicted", result.get("grid")))


def missing(result: dict) -> dict:
    """What a stopped sweep lacks: ``{"not_measured": [B...], "not_timed": [B...]}``, the batch sizes whose
    speedup was not measured and those whose T(B, 1) and T(B, k+1) were not timed for the predicted curve (empty
    where it was not asked for); both empty for a sweep that ran to its end."""
    if not result.get("stopped"):
        return {"not_measured": [], "not_timed": []}
    asked, predicted = _asked(result)
    measured = {r["batch"] for r in result["rows"]}
    timed = {f["batch"] for f in grid_figures(result.get("grid"), result["k"])}
    return {"not_measured": [b for b in asked if b not in measured],
            "not_timed": [b for b in asked if predicted and b not in timed]}


def stop_note(result: dict) -> str | None:
    """One sentence on a stopped sweep's downloads: "Stopped: no speedup measured at B = 2, 4; T(B, 1) and T(B, 3)
    not timed for the predicted curve at B = 4." (or "Stopped after every part finished."); None when not
    stopped."""
    if not result.get("stopped"):
        return None
    gaps, k = missing(result), result["k"]
    parts = ([f"no speedup measured at B = {', '.join(map(str, gaps['not_measured']))}"]
             if gaps["not_measured"] else []) + (
        [f"T(B, 1) and T(B, {k + 1}) not timed for the predicted curve at B = "
         f"{', '.join(map(str, gaps['not_timed']))}"] if gaps["not_timed"] else [])
    return f"Stopped: {'; '.join(parts)}." if parts else "Stopped after every part finished."


def _row_note(result: dict, batch: int, gaps: dict) -> str:
    """The CSV's note of one batch size (:data:`DEFINITIONS`): "" when the sweep was not stopped."""
    if not result.get("stopped"):
        return ""
    parts = (["speedup not measured"] if batch in gaps["not_measured"] else []) + (
        [f"T(B, 1) and T(B, {result['k'] + 1}) not timed for the predicted curve"] if batch in gaps["not_timed"]
        else [])
    return "run stopped: " + ("; ".join(parts) if parts else "this batch size finished before the Stop")


def csv_rows(result: dict) -> list[dict]:
    """The rows with the repeats' spread (``<figure>_min`` / ``_max`` of the speedup and every one of
    :data:`REPEATED_FIGURES`) and the verdict added (all "noisy" in a sweep other programs disturbed)."""
    busy, out = disturbance(result) is not None, []
    for r in result["rows"]:
        spans = {"speedup": repeat_speedups(r)} | {f: repeat_values(r, f) for f in REPEATED_FIGURES}
        ends = {f"{f}_{end}": (pick(v) if v else None) for f, v in spans.items()
                for end, pick in (("min", min), ("max", max))}
        out.append(r | ends | {"verdict": verdict(r, busy)})
    return out


def sweep_csv(result: dict) -> str:
    """The sweep as CSV, columns :data:`CSV_COLUMNS` (an empty cell: not measured): one line per batch size
    measured, or timed for the predicted curve, or (after a Stop) asked for, ascending, each with the predicted
    curve's T(B, 1) and T(B, k+1) where they were timed (``grid_*``) and, after a Stop, a note of what it lacks."""
    measured = {r["batch"]: r for r in csv_rows(result)}
    grid = {f["batch"]: {f"grid_{key}": value for key, value in f.items() if key != "batch"}
            for f in grid_figures(result.get("grid"), result["k"])}
    gaps = missing(result)
    sizes = set(measured) | set(grid) | (set(_asked(result)[0]) if result.get("stopped") else set())
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for b in sorted(sizes):
        row = {"batch": b} | measured.get(b, {}) | grid.get(b, {}) | {"note": _row_note(result, b, gaps)}
        writer.writerow(["" if row.get(c) is None else row[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def sweep_json(result: dict) -> dict:
    """Everything needed to read and reproduce the sweep: settings, versions, machine, device, definitions, the
    measured rows, the forward grid (if timed) and its T(B, 1), T(B, k+1) per batch size (``grid_timings``,
    :func:`grid_figures`); after a Stop, what is missing (``missing``, ``stop_note``); the thread cap its timings ran
    under (``threads``: :func:`app.estimates.threads_record`; None in a result that predates it)."""
    env, settings = result.get("environment", {}), result.get("settings") or {}
    return {"benchmark": "batching", "settings": settings, "k": result["k"],
            "max_new_tokens": result.get("max_new_tokens", settings.get("max_new_tokens")), "repeats": REPEATS,
            "prompt_tokens": result.get("prompt_tokens"), "versions": env.get("versions", {}),
            "machine": env.get("machine", {}), "device": env.get("device", {}), "target": env.get("target", {}),
            "definitions": DEFINITIONS, "stopped": result["stopped"], "stop_note": stop_note(result),
            "missing": missing(result), "grid_timings": grid_figures(result.get("grid"), result["k"]),
            "crossover": None if disturbance(result) else (crossover(result["rows"]) or {}).get("batch"),
            "lesson": sweep_lesson(result),
            "other_programs_cpu_share": result.get("cpu_others"), "threads": result.get("threads"),
            "rows": csv_rows(result), "grid": result.get("grid"), "wall_s": result.get("wall_s")}


def write_sweep_files(result: dict, folder: str | None = None) -> tuple[str, str]:
    """Write the sweep as CSV and JSON into a fresh temporary folder (or ``folder``); returns both paths."""
    return write_csv_and_json("batching", sweep_csv(result), sweep_json(result), folder)
