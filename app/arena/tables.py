"""The Arena's three tables (pooled summary, timings, per prompt) as gr.Dataframe values: every speedup and timed
figure shown with its spread (:func:`speedup_cell`, :func:`timed_cell`), every counted share (the acceptance rate,
α) with its 95% interval over the row's passes, or the Wilson interval of its counts for a row saved without them
(:func:`share_interval`, :func:`share_cell`), and tokens per pass with its 95% interval over the passes
(:func:`tokens_per_pass_cell`); the intervals: :mod:`specviz.analysis.arena_intervals`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.arena.verdicts import (NO_PASS_SPREAD, NO_READING, NO_SPREAD, NOISY_DRIFT, SPEEDUP_KEYS, no_finding,
                                no_reading_words, range_text, speedup_reading, spread_text)
from app.render.markup import keep_names, keep_ranges
from app.render.stats import counted_spread
from specviz.analysis.arena_intervals import (OVER_COUNTS, OVER_PASSES, SHARE_COUNTS, share_basis,  # noqa: F401
                                              share_interval)
from specviz.analysis.arena_rows import BASELINE, PASS_SPREAD_FIGURES, TIMED_SPREAD_FIGURES
from specviz.core.verdict import NOISY, NOT_FINDING, format_ratio_ends
from specviz.measure.stats import Interval


SUMMARY_COLUMNS = (  # (header, key, decimals or None for text): what each method did, its speedups and its check
    ("Category", "category", None), ("Method", "variant", None),
    ("Speedup, decode", "decode_speedup", 2), ("Baseline drift", "baseline_drift", "%"),
    ("Speedup, end to end", "speedup", 2), ("Tokens/pass", "tokens_per_pass", 2),
    ("Acceptance", "acceptance_rate", "%"), ("α", "alpha", 2), ("Prompts", "prompts", 0),
    ("Same ids", "ids_identical", None),
)
"""The headline, the decoding speedup, right after the method with its check (the drift) and the end-to-end speedup
beside it (a trial found the speedup out of sight at the right of a sideways-scrolling table on a 400 px phone; below
640 px each row is now a card of labelled cells in this order, :func:`card_css`)."""
TIMING_COLUMNS = (  # the rates, the predictions and the timings they are made from, with the runs they come from
    ("Category", "category", None), ("Method", "variant", None), ("Tokens per run", "tokens_per_run", 0),
    ("Runs", "runs", 0),
    ("Tokens/s", "tokens_per_s", 1), ("Predicted, paper", "predicted_speedup_paper", 2),
    ("Predicted, measured costs", "predicted_speedup_measured", 2), ("T_step ms", "t_step_ms", 1),
    ("T_verify ms", "t_verify_ms", 1), ("T_draft ms", "t_draft_ms", 1), ("c", "c", 3),
)
"""The pooled rows are shown as two tables, :data:`SUMMARY_COLUMNS` and these, each narrow enough for a 1400 px
page (one table of all 19 columns was about 1,670 px wide). Tokens are counted per run (:func:`tokens_per_run_cell`)
beside the runs pooled in the row: a trial's standard row read "Tokens 48 · Runs 3" (its three runs added) beside a
method's "Tokens 16 · Runs 1", and could not tell that every run made 16."""
_ALL_COLUMNS = {c[1]: c for c in SUMMARY_COLUMNS + TIMING_COLUMNS}
PROMPT_COLUMNS = (("Prompt", "prompt_id", None),) + tuple(_ALL_COLUMNS[key] for key in (  # one table, in an accordion
    "variant", "decode_speedup", "baseline_drift", "speedup", "tokens_per_run", "runs", "tokens_per_pass",
    "acceptance_rate", "alpha", "tokens_per_s", "predicted_speedup_paper", "predicted_speedup_measured",
    "t_step_ms", "t_verify_ms", "t_draft_ms", "c", "ids_identical"))
"""The per-prompt rows' columns: every pooled column but Category and Prompts, after the prompt's id, which names its
category ("code-edit-3"; a typed prompt "your-prompt"): a trial's 400 px card read the prompt and its category
twice, "code-edit-3" above "code-edit". The downloads keep each row's category."""


def _cell(value, decimals: int | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "✓" if value else "✗ differs"
    if decimals is None:
        return str(value)
    if decimals == "%":  # a share shown in percent
        return f"{value:.0%}"
    return f"{value:.{decimals}f}"


def _drifted(drift: float) -> str:
    """A baseline drift in percent, "unsteady" after it above :data:`NOISY_DRIFT` (the machine's speed changed)."""
    return f"{drift:.0%}" + (" unsteady" if drift > NOISY_DRIFT else "")


def drift_cell(row: dict) -> str:
    """A row's Baseline drift cell: one measure on every row, fastest ÷ slowest decoding rate of standard-decoding
    runs − 1, with which runs it spans in brackets, as they differ by row: a method's row the 2 standard runs timed
    beside it ("92% unsteady (the 2 beside it)"), the standard row all the standard runs of its prompt ("188%
    unsteady (all 3 standard runs)"), so never less than a method's of that prompt (a trial read 188% beside 92%
    and could not tell why); a pooled row (category, "all") its worst prompt's ("…, worst prompt"). "unsteady" above
    :data:`NOISY_DRIFT` on every row; "–" without two runs."""
    drift = row.get("baseline_drift")
    if drift is None:
        return "–"
    pooled = row.get("level", "prompt") != "prompt"
    if row.get("drafter") == BASELINE:
        runs = row.get("runs")
        which = ("all standard runs, worst prompt" if pooled or not runs else f"all {runs} standard runs")
    else:
        which = "the 2 beside it, worst prompt" if pooled else "the 2 beside it"
    return f"{_drifted(drift)} ({which})"


def tokens_per_run_cell(row: dict) -> str:
    """Tokens generated per run pooled in the row (``tokens`` / ``runs``, prefill's first token included): "16" on a
    method's prompt row (one run) and on the standard row beside it (its 3 runs of 16 each), so both read in one
    unit beside Runs; a mean of runs that differ (EOS, sampling) with one decimal, "14.5 (mean)"; "–" without
    both counts."""
    tokens, runs = row.get("tokens"), row.get("runs")
    if tokens is None or not runs:
        return "–"
    per_run = tokens / runs
    return f"{per_run:.0f}" if per_run == int(per_run) else f"{per_run:.1f} (mean)"


def speedup_cell(row: dict, key: str) -> str:
    """A measured speedup (``key``: "decode_speedup" or the end-to-end "speedup") as the table shows it, read by
    :func:`speedup_reading` under the row's one verdict (:func:`no_finding`): "1.23× faster (1.15–1.31×)"; "too noisy
    to tell: 1.05× measured (0.90–1.25×), baselines drifted 36% apart"; for a row of no reading (timings its tokens
    per pass cannot give, or baselines more than 15% apart with no spread to read) the words first, the ratio kept in
    the brackets (:func:`no_reading_words`, its cause as the timings support it): "no reading: a run too short to
    time (3.12× measured, 3.02–3.17×; faster than its 2.9 tokens per pass allow; 24 tokens in 9 passes timed,
    baselines 5% apart); a longer run or more prompts would read it", in both speedup cells of the row; "1.00
    (reference)" for standard decoding, "1.23 (one run: no spread)" where none can be told (the no-reading sentence
    after it for a row of no reading); "–" without a ratio."""
    value = row.get(key)
    if value is None:
        return "–"
    read = speedup_reading(row, key)
    if read is None:
        text = f"{value:.2f} ({spread_text(row, key)})"
        return f"{text}, {no_reading_words(row, key=key)}" if no_finding(row) == NO_READING else text
    if read.word == NOT_FINDING:
        ends = "–".join(format_ratio_ends(read.low, read.high))
        return no_reading_words(row, f"{read.shown()}× measured, {ends}×", key)
    return read.cell() + (f", {read.reason}" if read.word == NOISY and read.reason else "")


PERCENT_SHARES = ("acceptance_rate",)
"""The counted shares the tables show in percent, as the Live tab's card does ("58% (41–73%)"); α stays a fraction
("0.61 (0.45–0.75)"), as its Live card. The downloads keep every share a fraction in [0, 1]."""


@dataclass(frozen=True)
class _ReadByInterval:
    """What :func:`app.render.stats.counted_spread` reads of a run's statistics, for an Arena row: the Arena reads a
    share by its interval alone (the matching sentence, the chart's error bars), so its cells take the Live card's
    form of the interval ("41–73%") without the card's note on a short run (``too_few_passes`` False); ``passes``
    is read only without an interval, which :func:`share_spread` and :func:`tokens_per_pass_cell` never pass."""

    passes: int = 0
    too_few_passes: bool = False


def share_spread(row: dict, key: str, decimals: int | str = 2) -> str | None:
    """The interval of a row's counted share (:func:`share_interval`) as :func:`share_cell` shows it in brackets:
    "0.03–0.16" (``decimals`` decimals), or for a share of :data:`PERCENT_SHARES` in percent as the Live tab's card
    words it (:func:`app.render.stats.counted_spread`): "41–73%", "0–7%". None without an interval."""
    interval = share_interval(row, key)
    if interval is None:
        return None
    if key in PERCENT_SHARES:
        return counted_spread(interval, _ReadByInterval(), percent=True)
    return range_text(interval.low, interval.high, decimals)


def share_cell(row: dict, key: str, decimals: int | str = 2) -> str:
    """A counted share as the tables show it, with its interval (:func:`share_spread`): "0.07 (0.03–0.16)"
    (``decimals`` decimals); a share of :data:`PERCENT_SHARES` (its column's decimals "%") in percent, as the Live
    tab's card: "58% (41–73%)"; the value alone with "(no counts: no spread)" for a row that has the share but not
    its counts; "–" without it."""
    value = row.get(key)
    if value is None:
        return "–"
    shown = f"{value:.0%}" if key in PERCENT_SHARES else f"{value:.{decimals}f}"
    return f"{shown} ({share_spread(row, key, decimals) or 'no counts: no spread'})"


STANDARD_TOKENS_PER_PASS = "standard decoding: one per pass"
NO_PASSES_KEPT = "no passes kept: no spread"
"""The brackets of a Tokens/pass cell without an interval (:func:`tokens_per_pass_cell`): the standard row, whose
every pass makes one token; a row that keeps no per-pass tokens."""


def tokens_per_pass_cell(row: dict, decimals: int = 2) -> str:
    """Tokens per pass (bonus included) with its 95% interval over the row's passes (``tokens_per_pass_low`` /
    ``_high``: :func:`specviz.analysis.arena_intervals.tokens_per_pass_interval`, the Live tab's card's, worded as
    that card: :func:`app.render.stats.counted_spread`): "2.88 (1.75–4.00)" (``decimals`` decimals); "1.00 (standard
    decoding: one per pass)" for the standard row; "3.00 (one pass: no spread)" with a single pass; "2.88 (no passes
    kept: no spread)" for a row without its per-pass tokens (or with ones that do not add up to its counts); "–" without
    a value."""
    value = row.get("tokens_per_pass")
    if value is None:
        return "–"
    shown = f"{value:.{decimals}f}"
    if row.get("drafter") == BASELINE:
        return f"{shown} ({STANDARD_TOKENS_PER_PASS})"
    low, high = row.get("tokens_per_pass_low"), row.get("tokens_per_pass_high")
    if low is None or high is None:
        return f"{shown} ({NO_PASS_SPREAD if (row.get('passes') or 0) <= 1 else NO_PASSES_KEPT})"
    return f"{shown} ({counted_spread(Interval(value, low, high), _ReadByInterval())})"


def _places(value: float, decimals: int, most: int = 6) -> int:
    """``decimals``, or more for a small value, so that it shows two significant digits (0.04 ms: "0.040", not
    "0.0"); at most ``most``."""
    if not value or not math.isfinite(value) or abs(value) >= 1:
        return decimals
    return min(most, max(decimals, 1 - math.floor(math.log10(abs(value)))))


def timed_cell(row: dict, key: str, decimals: int) -> str:
    """A timed figure (tokens/s, T_step, T_verify, T_draft, c, a prediction) with its spread, "41.2 (39.8–43.0)"
    (a value below 1 with two significant digits, and the ends with one more decimal where that makes them read
    apart, the value then as many); "41.2 (one run: no spread)" where none can be told (:data:`NO_PASS_SPREAD` for the
    per-pass figures); "–" without a value. What each spread is: :data:`specviz.analysis.arena_rows.DEFINITIONS`
    (``<figure>_low``)."""
    value = row.get(key)
    if value is None:
        return "–"
    places = _places(value, decimals)
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    if low is None or high is None:
        return f"{value:.{places}f} ({NO_PASS_SPREAD if key in PASS_SPREAD_FIGURES else NO_SPREAD})"
    ends = range_text(low, high, places)
    return f"{value:.{max(places, len(ends.split('–')[0].partition('.')[2]))}f} ({ends})"


def table(rows: list[dict], columns=SUMMARY_COLUMNS) -> dict:
    """A gr.Dataframe value ({"headers", "data"}) of ``rows`` with ``columns`` formatted as text; a speedup
    carries its spread, and a decoding speedup above what its tokens per pass allow reads "no reading: a run too
    short to time (…); a longer run or more prompts would read it" or "no reading: the machine's speed changed
    during the run (…); run again" (:func:`speedup_cell`); so do the other timed figures
    (:func:`timed_cell`), the counted shares (:func:`share_cell`) and tokens per pass (:func:`tokens_per_pass_cell`)."""
    def cell(r: dict, key: str, decimals) -> str:
        if key == "baseline_drift":
            return drift_cell(r)
        if key == "tokens_per_run":
            return tokens_per_run_cell(r)
        if key in SPEEDUP_KEYS:
            return speedup_cell(r, key)
        if key in SHARE_COUNTS:
            return share_cell(r, key, decimals)
        if key == "tokens_per_pass":
            return tokens_per_pass_cell(r, decimals)
        return timed_cell(r, key, decimals) if key in TIMED_SPREAD_FIGURES else _cell(r.get(key), decimals)

    return {"headers": [c[0] for c in columns],
            "data": [[cell(r, key, decimals) for _, key, decimals in columns] for r in rows]}


NAME_KEYS = ("prompt_id", "category", "variant")
"""The columns of names (a prompt, a category, a method) whose hyphenated words the page keeps whole
(:func:`shown_table`)."""


def shown_table(rows: list[dict], columns=SUMMARY_COLUMNS) -> dict:
    """:func:`table` as the page shows it: each range kept on one line (:func:`keep_ranges`), and in the columns of
    :data:`NAME_KEYS` each hyphenated name whole (:func:`keep_names`: "early-exit", not "early-" / "exit"). The
    downloads are written from the rows, never from these cells."""
    value = table(rows, columns)
    names = {i for i, (_, key, _) in enumerate(columns) if key in NAME_KEYS}
    return {"headers": value["headers"],
            "data": [[keep_ranges(keep_names(cell) if i in names else cell) for i, cell in enumerate(line)]
                     for line in value["data"]]}


def empty_table(columns=SUMMARY_COLUMNS) -> dict:
    """A table with headers only."""
    return {"headers": [c[0] for c in columns], "data": [["" for _ in columns]]}


CARD_WIDE_KEYS = SPEEDUP_KEYS
"""The columns whose cells take a phone card's whole width (:func:`card_css`): a speedup's cell may be a sentence
("no reading: a run too short to time (...); a longer run or more prompts would read it")."""


def _css_text(text: str) -> str:
    """``text`` as a CSS string literal ("Speedup, decode" -> '"Speedup, decode"'); a quote or backslash escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def card_css(elem_id: str, columns) -> str:
    """The phone rules (below 640 px) that name each cell of the gr.Dataframe ``elem_id`` (its elem_classes holding
    "sv-cards") by its column's header, in ``columns`` order (Gradio marks each body cell with its column index,
    ``data-col``): the label above the value, the header row hidden, each row a card of two columns
    (``assets/style.css``, ``.sv-cards``), a speedup's cell (:data:`CARD_WIDE_KEYS`) across the card. A 400 px phone
    then reads every column of a row without scrolling sideways; wider screens keep the table. Returns the CSS
    text; nothing at all for no ``columns``."""
    cell = f"#{elem_id} div.virtual-row > .body-cell"
    rules = [f'{cell}[data-col="{i}"]::before {{ content: {_css_text(header)}; }}'
             for i, (header, _, _) in enumerate(columns)]
    wide = ", ".join(f'[data-col="{i}"]' for i, (_, key, _) in enumerate(columns) if key in CARD_WIDE_KEYS)
    if wide:
        rules.append(f"{cell}:is({wide}) {{ grid-column: 1 / -1; }}")
    return "@media (max-width: 640px) {\n  " + "\n  ".join(rules) + "\n}\n" if rules else ""
