"""How the Arena reads a pooled or per-prompt row: the spread of its ratios and timings in words, and whether its
speedup is a finding (:func:`speedup_reading`, the rule every tab uses) or noise (:func:`_noisy`: too noisy to tell,
or impossible: faster than its tokens per pass allow). The tables, the charts, the status and the downloads all read
rows through these."""

from __future__ import annotations

from app import render
from specviz.analysis.arena_rows import BASELINE
from specviz.core.verdict import Verdict, format_apart, read_speedup


NOISY_DRIFT = 0.15  # baseline runs beside a method that differ by more than this: the machine's speed changed
IMPOSSIBLE_MARGIN = 0.05  # a decoding speedup this far above the tokens per pass: noise (see _impossible)


SPEEDUP_KEYS = ("speedup", "decode_speedup")  # the measured ratios: each shown with its spread (speedup_cell)
NO_SPREAD = "one run: no spread"
NO_PASS_SPREAD = "one pass: no spread"  # T_verify / T_draft: their spread is over the passes of the run


def spread_text(row: dict, key: str) -> str:
    """The spread of a row's ratio ``key`` ("speedup" or "decode_speedup") in words: "1.15–1.31" (its rate over each
    standard run beside the method taken alone; pooled rows: lowest to highest over their prompts), "reference"
    for standard decoding (1 by definition), or :data:`NO_SPREAD` where no pair of standard runs gave one."""
    if row.get("drafter") == BASELINE:
        return "reference"
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    if low is None or high is None:
        return NO_SPREAD
    return "–".join(format_apart(low, high))


def speedup_reading(row: dict, key: str = "decode_speedup") -> Verdict | None:
    """The rule's reading (:func:`specviz.core.verdict.read_speedup`, the one every tab uses) of a method's ratio
    ``key`` on its spread against each standard run beside it (:func:`spread_text`): baselines that drifted more
    than :data:`NOISY_DRIFT` apart are the disturbance (a spread across 1 then reads too noisy even when narrow; one
    wholly on one side of 1 keeps its verdict), and a decoding speedup above its tokens per pass is impossible
    (:func:`_impossible`). None for the reference row, without the ratio, or without a spread (one run)."""
    value = row.get(key)
    if value is None or row.get("drafter") == BASELINE or not _has_spread(row, key):
        return None
    drift = row.get("baseline_drift") or 0
    busy = f"baselines {drift:.0%} apart" if drift > NOISY_DRIFT else None
    why = "impossible: noise" if key == "decode_speedup" and _impossible(row) else None  # above its tokens/pass
    low, high = row[f"{key}_low"], row[f"{key}_high"]
    return read_speedup(value, min(low, value), max(high, value), busy=busy, impossible=why)


def range_text(low: float, high: float, decimals: int, extra: int = 1) -> str:
    """"39.8–43.0": two ends with ``decimals`` decimals, or up to ``extra`` more until they read differently
    (:func:`specviz.core.verdict.format_apart`); ends that still read alike say the spread is below that precision."""
    return "–".join(format_apart(low, high, decimals, decimals + extra))


def _impossible(row: dict) -> bool:
    """A method's decoding speedup above its tokens per pass by more than :data:`IMPOSSIBLE_MARGIN`: a pass would
    have cost less than one standard step, although it does the same forward with more tokens and drafts too. The
    machine's speed changed between the runs; the ratio is noise."""
    speedup, tokens = row.get("decode_speedup"), row.get("tokens_per_pass")
    return (row.get("drafter") != BASELINE and speedup is not None and tokens is not None
            and speedup > tokens * (1 + IMPOSSIBLE_MARGIN))


def _noisy(row: dict) -> bool:
    """A method's row whose decoding speedup is too noisy to tell (:func:`speedup_reading`) or impossible
    (:func:`_impossible`), or, without a spread to read, whose baselines drifted beyond :data:`NOISY_DRIFT`: its
    timings are no finding."""
    if row.get("drafter") == BASELINE:
        return False
    read = speedup_reading(row)
    if read is None:  # no spread to read (one baseline beside it, or a file without one): drifted baselines decide
        return _impossible(row) or (row.get("baseline_drift") or 0) > NOISY_DRIFT
    return _impossible(row) or not read.finding


def _noise_word(row: dict) -> str:
    """The hover's word on a bar: "(too noisy to tell: its ratios on both sides of 1, baselines 36% apart)", "(too
    noisy to tell: faster than its tokens per pass allow)" or ""."""
    if _impossible(row):
        return "(too noisy to tell: faster than its tokens per pass allow, no finding)"
    if not _noisy(row):
        return ""
    drift = row.get("baseline_drift") or 0
    return ("(too noisy to tell: its ratios on both sides of 1"
            + (f", baselines {drift:.0%} apart" if drift > NOISY_DRIFT else "") + ", no finding)")


def _has_spread(row: dict, key: str) -> bool:
    return row.get(f"{key}_low") is not None and row.get(f"{key}_high") is not None


def noisy_rows(rows: list[dict]) -> int:
    """How many per-prompt rows of a method (not the baseline) are noisy (:func:`_noisy`)."""
    return sum(1 for r in rows if _noisy(r))


def noisy_count(noisy: int, rows: list[dict]) -> str:
    """``noisy`` of the per-prompt method rows in ``rows`` (the baseline's not counted), in words that agree: "1 of
    2 methods" for one prompt, "3 of 8 prompt × method results" for several."""
    methods = [r for r in rows if r.get("drafter") != BASELINE]
    prompts = len({r.get("prompt_id") for r in methods})
    if prompts <= 1:
        return f"{noisy} of {render.plural(len(methods), 'method')}"
    return f"{noisy} of {render.plural(len(methods), 'prompt × method result')}"
