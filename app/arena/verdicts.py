"""How the Arena reads a pooled or per-prompt row: the spread of its ratios and timings in words, and whether its
speedup is a finding or not. One function decides that for a row, :func:`no_finding` (too noisy to tell: its decoding
ratios across 1; or no reading: faster than its tokens per pass allow, or its baselines more than
:data:`NOISY_DRIFT` apart); the table's cells (:func:`speedup_reading`, both speedups of the row), the chart's
hatching, the downloads' ``noisy`` column and the status's count all read it. The words for why are in one place,
:func:`noise_text` and :func:`no_reading_words`, which name the cause the row's evidence supports
(:func:`no_reading_cause`): the machine's speed changed where its baselines drifted apart, a run too short to time
where they agree."""

from __future__ import annotations

from app import render
from app.render.stats import NO_READING, RUN_AGAIN, SPEED_CHANGED  # the Live card's words too
from specviz.analysis.arena_rows import BASELINE
from specviz.core.verdict import NOISY, Verdict, format_apart, format_ratio_ends, read_speedup
from specviz.measure.stats import IMPOSSIBLE_MARGIN  # the Live tab's margin: one rule (see _impossible)


NOISY_DRIFT = 0.15  # baseline runs beside a method that differ by more than this: the machine's speed changed


SPEEDUP_KEYS = ("speedup", "decode_speedup")  # the measured ratios: each shown with its spread (speedup_cell)
NO_SPREAD = "one run: no spread"
NO_PASS_SPREAD = "one pass: no spread"  # T_verify / T_draft: their spread is over the passes of the run


def spread_text(row: dict, key: str) -> str:
    """The spread of a row's ratio ``key`` ("speedup" or "decode_speedup") in words: "1.15–1.31" (its rate over each
    standard run of its prompt taken alone, widened by their own spread:
    :func:`specviz.analysis.arena_rows.speedup_spread`; pooled rows: lowest to highest over their prompts), "reference"
    for standard decoding (1 by definition), or :data:`NO_SPREAD` where no pair of standard runs gave one."""
    if row.get("drafter") == BASELINE:
        return "reference"
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    if low is None or high is None:
        return NO_SPREAD
    return "–".join(format_ratio_ends(low, high))  # an end near 1 keeps the side of 1 it is on


def speedup_reading(row: dict, key: str = "decode_speedup") -> Verdict | None:
    """The reading of a method's ratio ``key`` ("decode_speedup" or "speedup", × standard) on its spread against
    each standard run of its prompt (:func:`spread_text`), by the rule every tab uses
    (:func:`specviz.core.verdict.read_speedup`) and the row's verdict (:func:`no_finding`), so both speedups of a row
    agree: a row of no reading (a decoding speedup above its tokens per pass) reads "not a finding" with why,
    whatever the ratio's own spread; a too-noisy row never reads faster, slower or about the same. None for the reference row,
    without the ratio, or without a spread."""
    value = row.get(key)
    if value is None or row.get("drafter") == BASELINE or not _has_spread(row, key):
        return None
    low, high = min(row[f"{key}_low"], value), max(row[f"{key}_high"], value)
    kind = no_finding(row)
    if kind == NO_READING:
        why = "; ".join(w for w in (impossible_words(row, key), drift_words(row)) if w)
        return read_speedup(value, low, high, impossible=why)
    read = read_speedup(value, low, high, busy=drift_words(row))
    if kind == NOISY and read.finding:  # the end-to-end ratio of runs whose decoding ratios lie across 1
        return Verdict(NOISY, read.value, read.low, read.high, reason=DECODE_ACROSS)
    return read


DECODE_ACROSS = "its decoding ratios on both sides of 1"
"""Why an end-to-end speedup reads too noisy to tell though its own spread lies on one side of 1."""


def no_finding(row: dict) -> str | None:
    """THE rule for a row (one prompt's or a pooled one): whether a method's timings are a finding. None for a finding
    (and for standard decoding, the reference); :data:`NOISY` ("too noisy to tell") where its decoding speedup's
    ratios against the standard runs of its prompt lie on both sides of 1 (wide, or beside baselines more than
    :data:`NOISY_DRIFT` apart); :data:`NO_READING` ("no reading") for a decoding speedup above its tokens per pass
    (:func:`_impossible`), or baselines more than :data:`NOISY_DRIFT` apart with no spread to read (its cause in
    words: :func:`no_reading_cause`). Ratios wholly on one side of 1 keep their verdict however far the baselines
    drifted (a method slower than both the fast and the slow baseline is slower: issue 34's rule, the Live tab's
    too). The table, the chart's hatching, the downloads' ``noisy`` and the status's count all read this."""
    if row.get("drafter") == BASELINE:
        return None
    if _impossible(row):
        return NO_READING
    value = row.get("decode_speedup")
    if value is not None and _has_spread(row, "decode_speedup"):
        low, high = row["decode_speedup_low"], row["decode_speedup_high"]
        if read_speedup(value, min(low, value), max(high, value), busy=drift_words(row)).word == NOISY:
            return NOISY
        return None  # ratios on one side of 1 against every standard run of the prompt hold
    return NO_READING if drift_words(row) else None  # nothing to read but two baselines far apart


def drift_words(row: dict) -> str | None:
    """"baselines drifted 16% apart" where the standard runs beside a method differ by more than
    :data:`NOISY_DRIFT` (the machine's speed changed during the measurement), else None."""
    drift = row.get("baseline_drift") or 0
    return f"baselines drifted {drift:.0%} apart" if drift > NOISY_DRIFT else None


def impossible_words(row: dict, key: str = "decode_speedup") -> str | None:
    """"faster than its 2.1 tokens per pass allow" for a decoding speedup above its tokens per pass
    (:func:`_impossible`), else None; for another ``key`` (the end-to-end "speedup", which that bound does not
    limit) "its decoding speedup (3.12×) faster than its 2.1 tokens per pass allow"."""
    if not _impossible(row):
        return None
    which = "" if key == "decode_speedup" else f"its decoding speedup ({row['decode_speedup']:.2f}×) "
    return f"{which}faster than its {row['tokens_per_pass']:.1f} tokens per pass allow"




SHORT_RUN = "a run too short to time"
"""The cause of a speedup of no reading whose baselines agree (within :data:`NOISY_DRIFT`): the machine held
steady, so what broke the bound is the coarse timing of few tokens in few passes (a trial's short race read "the
machine's speed changed" beside baselines 6% apart)."""
LONGER = "a longer run or more prompts would read it"
EITHER = f"{SHORT_RUN}, or {SPEED_CHANGED}"
"""The cause where no two baselines tell which: the speedup broke its bound, nothing says whether the machine moved."""
RUN_LONGER = f"{RUN_AGAIN}, longer or on more prompts"


def no_reading_cause(row: dict) -> str:
    """Which cause the evidence supports for a row of no reading (:func:`no_finding`), in the page's words:
    :data:`SPEED_CHANGED` where its baselines lie more than :data:`NOISY_DRIFT` apart (:func:`drift_words`);
    :data:`SHORT_RUN` where they agree within it, so only its decoding speedup above its tokens per pass is left
    (:func:`_impossible`: the timing of few passes is too coarse); :data:`EITHER` where no two baselines gave a
    drift to tell which."""
    if drift_words(row):
        return SPEED_CHANGED
    return SHORT_RUN if row.get("baseline_drift") is not None else EITHER


def timed_words(row: dict) -> str | None:
    """What a method's row timed after the prefill, in words: "24 tokens in 11 passes timed" (its
    ``emitted_after_prefill`` and ``passes``; a pooled row adds "over 3 prompts"); None without those counts."""
    tokens, passes = row.get("emitted_after_prefill"), row.get("passes")
    if tokens is None or passes is None:
        return None
    prompts = row.get("prompts") or 1
    over = f" over {render.plural(prompts, 'prompt')}" if prompts > 1 else ""
    return f"{render.plural(tokens, 'token')} in {render.plural(passes, 'pass', 'passes')} timed{over}"


def agree_words(row: dict) -> str | None:
    """"baselines 4% apart" where the standard runs beside a method agree (within :data:`NOISY_DRIFT`), else None
    (drifted apart: :func:`drift_words`; no drift measured)."""
    drift = row.get("baseline_drift")
    return f"baselines {drift:.0%} apart" if drift is not None and drift <= NOISY_DRIFT else None


def no_reading_words(row: dict, measured: str = "", key: str = "decode_speedup") -> str:
    """Why a method's decoding speedup is no reading, in one plain sentence: the cause the evidence supports
    (:func:`no_reading_cause`), its detail in brackets, what to do. ``measured`` (the ratio ``key`` as measured,
    "2.45× measured, 2.27–2.63×") leads the brackets where given:

    - baselines agree: "no reading: a run too short to time (faster than its 2.1 tokens per pass allow; 24 tokens
      in 11 passes timed, baselines 4% apart); a longer run or more prompts would read it";
    - baselines drifted: "no reading: the machine's speed changed during the run (faster than its 2.1 tokens per
      pass allow; baselines drifted 16% apart); run again";
    - no drift measured: "no reading: a run too short to time, or the machine's speed changed during the run
      (faster than its 2.1 tokens per pass allow; 24 tokens in 11 passes timed); run again, longer or on more
      prompts".

    THE one place for these words (the table's cells, the chart's hover, the downloads' ``noise``). A trial read the
    rule's "not a finding: ..." in the table's large type as alarming, and then a short race's "the machine's speed
    changed" beside baselines 6% apart as a claim nothing showed."""
    cause = no_reading_cause(row)
    if cause == SPEED_CHANGED:
        parts, then = (measured, impossible_words(row, key), drift_words(row)), RUN_AGAIN
    else:
        counted = ", ".join(w for w in (timed_words(row), agree_words(row)) if w)
        parts, then = (measured, impossible_words(row, key), counted), LONGER if cause == SHORT_RUN else RUN_LONGER
    detail = "; ".join(w for w in parts if w)
    return f"{NO_READING}: {cause}" + (f" ({detail})" if detail else "") + f"; {then}"


def cause_rule(cause: str) -> str:
    """The rule behind each cause of no reading (:func:`no_reading_cause`), for a status that counts rows: "a
    speedup more than 5% above its tokens per pass beside baselines within 15%" (:data:`SHORT_RUN`), "baselines
    more than 15% apart" (:data:`SPEED_CHANGED`), "a speedup more than 5% above its tokens per pass, no two
    baselines to tell which" (:data:`EITHER`)."""
    above = f"a speedup more than {IMPOSSIBLE_MARGIN:.0%} above its tokens per pass"
    if cause == SPEED_CHANGED:
        return f"baselines more than {NOISY_DRIFT:.0%} apart"
    return f"{above} beside baselines within {NOISY_DRIFT:.0%}" if cause == SHORT_RUN else (
        f"{above}, no two baselines to tell which")


def noise_text(row: dict) -> str:
    """Why a method's row is no finding, in the words the page uses everywhere (table cell, chart hover, status,
    downloads' ``noise`` column); "" for a finding or the reference row:

    - "too noisy to tell: its ratios on both sides of 1; baselines drifted 36% apart" (a spread across 1 only);
    - "no reading: a run too short to time (faster than its 2.1 tokens per pass allow; 24 tokens in 11 passes timed,
      baselines 4% apart); a longer run or more prompts would read it" (impossible timings, whatever the spread,
      beside baselines that agree);
    - "no reading: the machine's speed changed during the run (baselines drifted 29% apart); run again" (baselines
      more than :data:`NOISY_DRIFT` apart, with impossible timings or no spread to read):
      :func:`no_reading_words`.

    Which one: :func:`no_finding`.
    """
    kind = no_finding(row)
    if kind is None:
        return ""
    if kind == NOISY:
        return "; ".join(w for w in (f"{NOISY}: its ratios on both sides of 1", drift_words(row)) if w)
    return no_reading_words(row)


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
    """Whether a method's row is no finding (:func:`no_finding`): its bars hatched, ``noisy`` in the downloads."""
    return no_finding(row) is not None


def _noise_word(row: dict) -> str:
    """The hover's words on a bar, :func:`noise_text` in brackets: "(too noisy to tell: its ratios on both sides of
    1; baselines drifted 36% apart)", "(no reading: a run too short to time (faster than its 2.1 tokens per pass
    allow; 24 tokens in 11 passes timed, baselines 4% apart); a longer run or more prompts would read it)" or ""."""
    text = noise_text(row)
    return f"({text})" if text else ""


def _has_spread(row: dict, key: str) -> bool:
    return row.get(f"{key}_low") is not None and row.get(f"{key}_high") is not None


def noisy_rows(rows: list[dict]) -> int:
    """How many per-prompt rows of a method (not the baseline) are no finding (:func:`no_finding`): the status's
    count."""
    return sum(1 for r in rows if _noisy(r))


def noisy_count(noisy: int, rows: list[dict]) -> str:
    """``noisy`` of the per-prompt method rows in ``rows`` (the baseline's not counted), in words that agree: "1 of
    2 methods" for one prompt, "3 of 8 prompt × method results (the “Per prompt” table below; ...)" for several,
    since the tables above pool the prompts (a trial counted the status's rows in the pooled table)."""
    methods = [r for r in rows if r.get("drafter") != BASELINE]
    prompts = len({r.get("prompt_id") for r in methods})
    if prompts <= 1:
        return f"{noisy} of {render.plural(len(methods), 'method')}"
    return (f"{noisy} of {render.plural(len(methods), 'prompt × method result')} (the “Per prompt” table below; "
            "the pooled tables above may read otherwise)")
