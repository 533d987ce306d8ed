"""The Arena's downloads: the result as CSV and JSON, carrying what the page shows (every row's noise verdict, the
notes and the status in words)."""

from __future__ import annotations

import dataclasses
import html
import re

from app.arena.verdicts import NOISY_DRIFT, _noisy, noise_text
from app.downloads import write_csv_and_json
from app.estimates import THREADS_DEFINITION
from specviz.analysis.arena_rows import BASELINE, ArenaResult, to_csv, to_json


FILE_DEFINITIONS = {
    "wall_s": "seconds from the Run click to the end, as the status says (waiting for the device and loading the "
              "target included)",
    "race_wall_s": "seconds of the arena once the target was loaded: the drafters' set-up, the warm-up and the runs",
    "noisy": "true where the page marks the row noisy: the standard runs beside it more than "
             f"{NOISY_DRIFT:.0%} apart, or a decoding speedup above its tokens per pass; no finding",
    "noise": "why a row is no finding, in the page's words: too noisy to tell (its ratios on both sides of 1) or "
             "no reading (faster than its tokens per pass allow, or baselines drifted apart), with the cause its "
             "timings support: a run too short to time where its baselines agree (a longer run or more prompts "
             "would read it), the machine's speed changed during the run where they drifted apart (run again)",
    "status": "the status line the page showed at the end, in words",
    "threads": THREADS_DEFINITION + "; every method's runs and baselines share it",
}
"""What the downloads add to :data:`specviz.analysis.arena_rows.DEFINITIONS`."""

VERDICT_COLUMNS = ("noisy", "noise")
"""The columns the downloads add to every row: ``noisy`` (true where the page hatches the row's bar and marks its
drift "unsteady" or its speedup "no reading", :func:`_noisy`; empty for standard decoding) and ``noise`` (why, in
the words of the page, :func:`app.arena.verdicts.noise_text`)."""


def with_verdicts(rows: list[dict]) -> list[dict]:
    """``rows`` with :data:`VERDICT_COLUMNS` added, as the page judges each one."""
    return [dict(r, noisy=None if r.get("drafter") == BASELINE else _noisy(r), noise=noise_text(r)) for r in rows]


def plain_status(status: str) -> str:
    """A status line's HTML (:func:`app.render.status_html`) as the words the page shows, notes included."""
    text = html.unescape(re.sub(r"<br\s*/?>", " · ", re.sub(r"<i [^>]*></i>", "", status)))
    return " ".join(re.sub(r"<[^>]+>", "", text).split())


def write_files(result: ArenaResult, folder: str | None = None, *, wall_s: float | None = None, notes=(),
                status: str = "") -> tuple[str, str]:
    """Write the result as CSV and JSON into a fresh temporary folder (or ``folder``); returns both paths.

    The files carry what the page shows: every row's noise verdict (:data:`VERDICT_COLUMNS`), and in the JSON the
    ``notes`` shown under the status, the status itself in words (``status``, HTML) and ``wall_s``: the seconds the
    status gives (from the Run click: waiting for the device and loading the target included); ``race_wall_s`` is the
    arena after loading (:attr:`ArenaResult.wall_s`, which ``wall_s`` was before: 32.6 s beside a status's 50 s);
    ``threads``: the thread cap its timings ran under (:func:`app.estimates.threads_record`, kept in the result's
    environment by the job; None where unknown)."""
    shown = dataclasses.replace(result, rows=with_verdicts(result.rows), summary=with_verdicts(result.summary))
    data = to_json(shown)
    data["race_wall_s"] = round(result.wall_s, 1)
    data["wall_s"] = round(result.wall_s if wall_s is None else wall_s, 1)
    data["notes"] = list(dict.fromkeys([*notes, *result.notes]))
    data["status"] = plain_status(status) if status else ""
    data["threads"] = result.environment.get("threads")  # the cap the timings ran under (app.estimates.threads_record)
    data["definitions"] = {**data.get("definitions", {}), **FILE_DEFINITIONS}
    return write_csv_and_json("arena", to_csv(shown, VERDICT_COLUMNS), data, folder)
