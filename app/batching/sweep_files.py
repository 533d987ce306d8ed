"""The sweep's downloads: CSV (:func:`sweep_csv`) and JSON (:func:`sweep_json`), written by
:func:`write_sweep_files`."""

from __future__ import annotations

import csv
import io

from app.batching.sweep_job import REPEATS
from app.batching.sweep_lesson import sweep_lesson
from app.batching.sweep_reading import NOISY_SPREAD, crossover, disturbance, verdict
from app.downloads import write_csv_and_json
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
}
CSV_COLUMNS = ("batch", "standard_tps", "standard_tps_min", "standard_tps_max", "speculative_tps",
               "speculative_tps_min", "speculative_tps_max", "speedup", "speedup_min", "speedup_max", "verdict",
               "predicted", "predicted_low", "predicted_high", "tokens_per_pass", "tokens_per_pass_min",
               "tokens_per_pass_max", "step_ms", "step_ms_min", "step_ms_max", "verify_ms", "verify_ms_min",
               "verify_ms_max", "pass_cost", "pass_cost_min", "pass_cost_max", "kv_megabytes")


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
    """The sweep as CSV, columns :data:`CSV_COLUMNS` (an empty cell: not measured)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in csv_rows(result):
        writer.writerow(["" if row.get(c) is None else row[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def sweep_json(result: dict) -> dict:
    """Everything needed to read and reproduce the sweep: settings, versions, machine, device, definitions, rows
    and the forward grid (if timed)."""
    env = result.get("environment", {})
    return {"benchmark": "batching", "settings": result.get("settings", {}), "k": result["k"],
            "max_new_tokens": result["max_new_tokens"], "repeats": REPEATS,
            "prompt_tokens": result.get("prompt_tokens"), "versions": env.get("versions", {}),
            "machine": env.get("machine", {}), "device": env.get("device", {}), "target": env.get("target", {}),
            "definitions": DEFINITIONS, "stopped": result["stopped"],
            "crossover": None if disturbance(result) else (crossover(result["rows"]) or {}).get("batch"),
            "lesson": sweep_lesson(result),
            "other_programs_cpu_share": result.get("cpu_others"),
            "rows": csv_rows(result), "grid": result.get("grid"), "wall_s": result.get("wall_s")}


def write_sweep_files(result: dict, folder: str | None = None) -> tuple[str, str]:
    """Write the sweep as CSV and JSON into a fresh temporary folder (or ``folder``); returns both paths."""
    return write_csv_and_json("batching", sweep_csv(result), sweep_json(result), folder)
