"""How the sweep's rows are read: each speedup by the rule every tab uses (:func:`reading`, :func:`verdict`,
:func:`speedup_text`), impossible timings (:func:`impossible`), a noisy prediction (:func:`noisy_prediction`), a
disturbed machine (:func:`disturbance`) and whether its pass costs can be read (:func:`unreadable_costs`), the
table (:func:`sweep_table`), and the timings of a predicted curve a Stop kept (:func:`grid_figures`, in words
:func:`grid_timings`)."""

from __future__ import annotations

from typing import Callable

from app.batching.sweep_job import DEFAULT_K
from app.figures import COLORS
from specviz.analysis.batching import repeat_speedups, spread_cell
from specviz.core.verdict import (FASTER, NARROW, NOISY, NOT_FINDING, SAME, SLOWER, Verdict, format_apart,
                                  format_ratio_ends, read_speedup)
from specviz.measure.machine import CONTENDED_SHARE

NOISY_SPREAD = NARROW - 1  # repeats on both sides of 1 spread wider than this (fastest ÷ slowest − 1): too noisy
IMPOSSIBLE_COST = 0.95  # a pass of k+1 tokens per row measured below this many one-token steps: noise
COST_DISAGREEMENT = 1.25  # the grid's and the sweep's pass costs differ by more than this factor: too noisy
IMPOSSIBLE_WORDS = "impossible timings (a pass cheaper than a step, or a speedup above the tokens per pass)"
VERDICT_WORDS = {"pays": "faster", "loses": "slower", "even": "even"}
"""The table's word for a measured verdict (:func:`speedup_text`)."""


# ---------------------------------------------------------------------------------------------------------- verdicts


def reading(row: dict, busy: bool = False) -> Verdict | None:
    """The rule's reading of a row's speedup (:func:`specviz.core.verdict.read_speedup`): the median with its
    repeats' range (lowest to highest); :func:`impossible` timings are not a finding whatever the range, with their
    reason (:func:`impossible_reason`). ``busy``: other
    programs disturbed the sweep (:func:`disturbance`): repeats on both sides of 1 are then too noisy even when
    close, repeats on one side keep their verdict. None when nothing was measured."""
    ups = repeat_speedups(row)
    if row.get("speedup") is None or not ups:
        return None
    why = impossible_reason(row) if impossible(row) else None
    return read_speedup(row["speedup"], min(ups), max(ups), busy="other programs busy" if busy else None,
                        impossible=why)


def verdict(row: dict, busy: bool = False) -> str:
    """"pays" (every repeat above 1, however far apart: all faster), "loses" (every repeat below 1: all slower),
    "even" (the repeats straddle 1 but agree within :data:`NOISY_SPREAD` on an undisturbed machine), "noisy" (they
    straddle 1 and spread by more than :data:`NOISY_SPREAD`, or straddle it on a busy machine, or the row is
    :func:`impossible`: too noisy to tell) or "none" (nothing measured): the words of :func:`reading`, the rule
    every tab uses. ``busy`` as there."""
    read = reading(row, busy)
    if read is None:
        return "none"
    return {FASTER: "pays", SLOWER: "loses", SAME: "even", NOISY: "noisy", NOT_FINDING: "noisy"}[read.word]


def impossible_reason(row: dict) -> str:
    """Why an :func:`impossible` row is no finding, in its own words: "a pass measured cheaper than one step" (its
    cost is noise, so not shown) or "faster than its 2.0 tokens per pass allow"; :data:`IMPOSSIBLE_WORDS` when
    neither figure says."""
    cost, speedup, tokens = row.get("pass_cost"), row.get("speedup"), row.get("tokens_per_pass")
    if cost is not None and cost < IMPOSSIBLE_COST:
        return "a pass measured cheaper than one step"
    if speedup is not None and tokens is not None:
        return f"faster than its {tokens:.1f} tokens per pass allow"
    return IMPOSSIBLE_WORDS


def impossible(row: dict) -> bool:
    """A row no real machine can produce: a pass over k+1 tokens per row cheaper than a one-token step (pass cost
    below :data:`IMPOSSIBLE_COST`), or a speedup above the tokens per pass by more than 5 %. The machine's speed
    changed between the timings."""
    cost, speedup, tokens = row.get("pass_cost"), row.get("speedup"), row.get("tokens_per_pass")
    return ((cost is not None and cost < IMPOSSIBLE_COST)
            or (speedup is not None and tokens is not None and speedup > tokens * 1.05))


def crossover(rows: list[dict]) -> dict | None:
    """The smallest batch size whose repeats all lost (speedup below 1), noisy rows never counting."""
    return next((r for r in rows if verdict(r) == "loses"), None)


def speedup_text(row: dict, busy: bool = False) -> str:
    """"2.15× faster (1.84–2.44×)" (every repeat above 1), "0.80× the speed, slower (0.75–0.85×)", "1.02× about the same
    (0.98–1.05×)", "too noisy to tell: 1.05× measured (0.80–1.50×)" or "2.70× (2.60–2.80×), not a finding: faster
    than its 2.0 tokens per pass allow" (:func:`reading`, ``busy`` as there): the
    median, then the repeats' own range; "–" when not measured."""
    read = reading(row, busy)
    return "–" if read is None else read.cell()


def disturbance(result: dict) -> str | None:
    """Why none of the sweep's timings can be read, or None: other programs took more than
    :data:`CONTENDED_SHARE` of the machine's CPU time while the grid and the sweep were timed (``cpu_others``, from
    :class:`CpuShare`: a descheduled torch thread slows a one-token step far more than a wide pass, so every speedup
    and pass cost is off, in a direction that flatters speculation); where that share is unknown, a load average
    above half the CPUs at the sweep's end (``environment``)."""
    share = result.get("cpu_others")
    if share is not None:
        return (f"other programs used {share:.0%} of this machine's CPU time while it was measured, which slows "
                "one-token steps more than wide passes" if share > CONTENDED_SHARE else None)
    machine = result.get("environment", {}).get("machine", {})
    load, cpus = machine.get("load_average_1min"), machine.get("cpu_count") or 1
    if load is not None and load > 0.5 * cpus:
        return (f"the machine was busy (load average {load:.1f} on {cpus} CPUs), so steps and passes were slowed "
                "unevenly")
    return None


def unreadable_costs(result: dict) -> str | None:
    """The one rule for whether the sweep's pass costs T(B, k+1) / T(B, 1) can be read, followed by the lesson, the
    table's pass-cost cells and the chart's pass-cost line alike: None where they can; where other programs
    disturbed the sweep (:func:`disturbance`: a descheduled thread slows a one-token step more than a wide pass, so
    every pass cost reads too low), why not, short enough for a table cell or a legend: "other programs used 56% of
    the CPUs" (``cpu_others``, a share 0..1) or "the machine was busy (load average 3.1 on 2 CPUs)"."""
    if disturbance(result) is None:
        return None
    share = result.get("cpu_others")
    if share is not None:
        return f"other programs used {share:.0%} of the CPUs"
    machine = result.get("environment", {}).get("machine", {})
    return (f"the machine was busy (load average {machine['load_average_1min']:.1f} on "
            f"{machine.get('cpu_count') or 1} CPUs)")


# --------------------------------------------------------------------------------------------------------- the table


def prediction_noise(row: dict, rows: list[dict]) -> str | None:
    """Why a row's predicted speedup is too noisy to show as a prediction, in words for its cell and the chart's
    hover, or None where it can be shown. The model divides B = 1's tokens per pass by the pass cost T(B, k+1) /
    T(B, 1) the forward grid timed before the sweep (``predicted_pass_cost``). Too noisy: the prediction is above
    the B = 1 tokens per pass it is made from (by more than 5 %: the grid timed a pass over k+1 tokens per row cheaper
    than a one-token step, which no machine does), or the grid's pass cost and the one the sweep itself measured
    (the table's) differ by more than :data:`COST_DISAGREEMENT` times (the machine's speed changed between the two
    timings, e.g. another program took a core: a contention that makes one-token steps several times slower).
    "the pass cost it reads was timed at 4.20 steps before the sweep, the sweep's own at 1.10 (the machine's speed
    changed between them)", "the pass cost it reads was timed at 0.62 steps, cheaper than one step, which no machine
    does", or without the grid's pass cost (a file from before it was kept) "it came out 3.74×, above the 2.33
    tokens per pass at B = 1 it is made from, which no machine allows"."""
    first = next((r for r in rows if r["batch"] == 1 and r.get("tokens_per_pass")), None)
    predicted = row.get("predicted")
    if predicted is None or first is None:
        return None
    grid, sweep = row.get("predicted_pass_cost"), row.get("pass_cost")
    if predicted > first["tokens_per_pass"] * 1.05:
        return (f"the pass cost it reads was timed at {grid:.2f} steps, cheaper than one step, which no machine does"
                if grid else f"it came out {predicted:.2f}×, above the {first['tokens_per_pass']:.2f} tokens per pass "
                "at B = 1 it is made from, which no machine allows")
    if grid and sweep and max(grid / sweep, sweep / grid) > COST_DISAGREEMENT:
        return (f"the pass cost it reads was timed at {grid:.2f} steps before the sweep, the sweep's own at "
                f"{sweep:.2f} (the machine's speed changed between them)")
    return None


def noisy_prediction(row: dict, rows: list[dict]) -> bool:
    """Whether a row's predicted speedup is too noisy to show as a prediction (:func:`prediction_noise` says why)."""
    return prediction_noise(row, rows) is not None


def predicted_cell(row: dict) -> str:
    """The model's predicted speedup with the range its inputs' spread gives (``predicted_low`` / ``_high``,
    :func:`specviz.analysis.batching.predict`): "1.23 (1.10–1.35)"; "1.23 (all inputs one sample)" where the range
    is a point; the bare value for a row without the range (a file from before it was kept); "–" without one."""
    value, low, high = row.get("predicted"), row.get("predicted_low"), row.get("predicted_high")
    if value is None:
        return "–"
    if low is None or high is None:
        return f"{value:.2f}"
    if low == high:
        return f"{value:.2f} (all inputs one sample)"
    return f"{value:.2f} ({'–'.join(format_ratio_ends(low, high))})"  # an end near 1: its side shown


def grid_figures(grid: dict | None, k: int) -> list[dict]:
    """The batch sizes a forward grid timed in full (``grid``: the sweep result's "grid", ``{"ms": {B: {n: ms}},
    "spread": {B: {n: (min ms, max ms)}}, "impossible": [{"batch", "n", ...}]}``, its keys ints or digit strings;
    None: no grid), ascending: ``{"batch", "step_ms", "step_ms_min", "step_ms_max", "verify_ms", "verify_ms_min",
    "verify_ms_max", "too_noisy"}``, step = T(B, 1) and verify = T(B, k+1) in ms (median of the repeats, their
    range; min = max = the median where the grid kept no range), ``too_noisy`` where a pass timed below
    :data:`IMPOSSIBLE_COST` steps or the grid flagged a point of that batch size impossible. A batch size a Stop
    cut short (one of the two timings missing) is left out."""
    grid, figures = grid or {}, []
    flagged = {int(p["batch"]) for p in grid.get("impossible") or ()}
    spreads = {int(b): ends for b, ends in (grid.get("spread") or {}).items()}
    for batch, row in sorted((int(b), r) for b, r in (grid.get("ms") or {}).items()):
        row = {int(n): t for n, t in row.items()}
        if not row.get(1) or not row.get(k + 1):
            continue  # the Stop came inside this batch size
        spread = {int(n): ends for n, ends in (spreads.get(batch) or {}).items()}
        out = {"batch": batch}
        for name, n in (("step_ms", 1), ("verify_ms", k + 1)):
            low, high = spread.get(n) or (row[n], row[n])
            out |= {name: row[n], f"{name}_min": low, f"{name}_max": high}
        figures.append(out | {"too_noisy": batch in flagged or row[k + 1] / row[1] < IMPOSSIBLE_COST})
    return figures


def grid_timings(grid: dict, k: int) -> tuple[list[str], list[int]]:
    """What a forward grid stopped part-way holds (``grid`` as :func:`grid_figures` reads it): one text per batch
    size it timed in full (both T(B, 1) and T(B, k+1), in ms with the range of their repeats), "B = 1: T(1,1) = 2.1
    (2.0–2.3), T(1,3) = 2.8 (2.7–2.9)" ("repeats equal" for a range of one value), with "too noisy" where
    :func:`grid_figures` says so; and those batch sizes, ascending."""
    texts, done = [], []
    for fig in grid_figures(grid, k):
        cells = []
        for name, n in (("step_ms", 1), ("verify_ms", k + 1)):
            low, high = fig[f"{name}_min"], fig[f"{name}_max"]
            ends = "repeats equal" if low == high else "–".join(format_apart(low, high, 1, 3))
            cells.append(f"T({fig['batch']},{n}) = {fig[name]:.1f} ({ends})")
        texts.append(f"B = {fig['batch']}: {', '.join(cells)}"
                     + (" (too noisy: timed faster than less work)" if fig["too_noisy"] else ""))
        done.append(fig["batch"])
    return texts, done


def _fmt(value, spec: str) -> str:
    """``value`` in the format ``spec``, or "–" where it was not measured."""
    return "–" if value is None else format(value, spec)


def prediction_cell(row: dict, unreadable: str | None = None) -> str:
    """The Predicted column's cell: :func:`predicted_cell`, with why it cannot be read after it where the pass costs
    it is made from cannot (``unreadable``: :func:`unreadable_costs`'s reason), as the pass-cost cell says."""
    cell = predicted_cell(row)
    return f"{cell}, not readable: {unreadable}" if unreadable and row.get("predicted") is not None else cell


def predicted_column_cell(row: dict, rows: list[dict], unreadable: str | None = None) -> str:
    """The Predicted (model) column's cell: :func:`prediction_cell`; where the prediction is too noisy
    (:func:`prediction_noise`) no number, but that it was left out and why: "left out, too noisy: the pass cost it
    reads was timed at 4.20 steps before the sweep, the sweep's own at 1.10 (...)". A trial read "too noisy (0.28)"
    beside a measured 1.06× and could not tell what 0.28 was (the model's speedup from such a pass cost)."""
    why = prediction_noise(row, rows)
    return f"left out, too noisy: {why}" if why else prediction_cell(row, unreadable)


def pass_cost_cell(row: dict, unreadable: str | None = None) -> str:
    """A row's pass cost T(B, k+1) / T(B, 1) in steps with its repeats' range, "1.14 (1.12–1.18)"; where the sweep's
    pass costs cannot be read (``unreadable``: :func:`unreadable_costs`'s reason) with why after it: "1.14
    (1.12–1.18), not readable: other programs used 56% of the CPUs"; "–" where not measured."""
    cell = spread_cell(row, "pass_cost", ".2f")
    return f"{cell}, not readable: {unreadable}" if unreadable and row.get("pass_cost") is not None else cell


def sweep_columns(k: int, rows: list[dict] = (), busy: bool = False,
                  unreadable: str | None = None) -> list[tuple[str, Callable[[dict], str]]]:
    """(header, cell of a row) of the table; ``rows``: the sweep's rows (a noisy prediction is read against them);
    ``busy``: other programs disturbed the sweep (repeats across 1 are too noisy to tell, :func:`verdict`);
    ``unreadable``: why the pass costs cannot be read (:func:`unreadable_costs`), said in their cells."""
    return [
        ("B", lambda r: str(r["batch"])),
        ("Standard tok/s", lambda r: spread_cell(r, "standard_tps", ".1f")),
        ("Speculative tok/s", lambda r: spread_cell(r, "speculative_tps", ".1f")),
        ("Speedup (repeats)", lambda r: speedup_text(r, busy)),
        (PREDICTED_HEADER, lambda r: predicted_column_cell(r, rows, unreadable)),
        ("Tokens/pass", lambda r: spread_cell(r, "tokens_per_pass", ".2f")),
        ("T(B,1) ms", lambda r: spread_cell(r, "step_ms", ".1f")),
        (f"T(B,{k + 1}) ms", lambda r: spread_cell(r, "verify_ms", ".1f")),
        (PASS_COST_HEADER, lambda r: pass_cost_cell(r, unreadable)),
        ("KV cache MB", lambda r: _fmt(r["kv_megabytes"], ".1f")),
    ]


PASS_COST_HEADER = "Pass cost (steps)"
PREDICTED_HEADER = "Predicted (model)"
UNREADABLE_COLUMNS = (PASS_COST_HEADER, PREDICTED_HEADER)
"""The columns read from the pass costs (the model's prediction divides by them): muted, with why, where
:func:`unreadable_costs` says they cannot be read."""
MUTED_CELL = f"color: {COLORS['baseline']}; font-style: italic"
"""The CSS of a table cell whose number cannot be read (a pass cost on a disturbed machine)."""


def sweep_table(result: dict) -> dict:
    """The gr.Dataframe value ({"headers", "data"}, strings) of a sweep: one row per batch size. Where the pass costs
    cannot be read (:func:`unreadable_costs`) their cells and the prediction's say why and are muted
    (``metadata["styling"]``: one CSS string a cell, :data:`MUTED_CELL` in :data:`UNREADABLE_COLUMNS`, "" elsewhere)."""
    unreadable = unreadable_costs(result)
    columns = sweep_columns(result["k"], result["rows"], disturbance(result) is not None, unreadable)
    table = {"headers": [c[0] for c in columns], "data": [[cell(r) for _, cell in columns] for r in result["rows"]]}
    if unreadable and table["data"]:
        muted = [MUTED_CELL if header in UNREADABLE_COLUMNS else "" for header, _ in columns]
        table["metadata"] = {"display_value": None, "styling": [list(muted) for _ in table["data"]]}
    return table


def empty_table(k: int = DEFAULT_K) -> dict:
    """The table's headers and one empty row."""
    columns = sweep_columns(k)
    return {"headers": [c[0] for c in columns], "data": [["" for _ in columns]]}
