"""The Arena tab: several drafters x k on one prompt, a category or the whole suite, raced one after another
against standard decoding of the same target (:mod:`specviz.analysis.arena` does the measuring; this package is
the tab's inputs, handlers, tables, figures and downloads).

One module per concern; every name other code uses is importable from ``app.arena`` itself:

- :mod:`app.arena.layout`: :func:`build_tab`, the layout, the definitions note (:data:`NOTE`: how ratios are
  formed) and the wiring of its events.
- :mod:`app.arena.handlers`: the Run and Stop buttons and the menus. :func:`run` (its inputs :class:`ArenaInputs`)
  validates, waits for its turn on the device (:mod:`app.device`), loads the target and runs
  :func:`specviz.analysis.arena.iter_arena` in the job's thread with the job's cancel flag as ``should_stop``; it
  yields the tables and charts after every prompt, and the CSV and JSON downloads at the end (also after a Stop:
  they then hold the prompts that finished).
- :mod:`app.arena.settings`: the drafters, k and prompts offered, and :func:`parse_inputs`.
- :mod:`app.arena.verdicts`: how a row is read. Standard decoding is timed before and after every method on each
  prompt, and each method's ratios use the two baseline runs beside it; each ratio is read by the rule every tab
  uses (:func:`speedup_reading`: its ratios against each standard run of the prompt, widened by their own spread,
  all above 1 read faster, all below slower, on both sides too noisy to tell when those baselines drifted above
  :data:`NOISY_DRIFT` or spread widely), and
  whether a row is a finding at all is one function's (:func:`app.arena.verdicts.no_finding`: not where its
  baselines drifted above :data:`NOISY_DRIFT` or its decoding speedup exceeds its tokens per pass: "no reading",
  with the cause its evidence supports, :func:`app.arena.verdicts.no_reading_words`),
  read alike by the tables (both speedups), the charts' hatching, the downloads' ``noisy`` and the status's count.
- :mod:`app.arena.tables`: every speedup shown carries its spread, its ratio against each of those baseline runs
  alone (:func:`speedup_cell`); so do the other timed figures, tokens/s, T_step, T_verify, T_draft, c and the
  predictions (:func:`timed_cell`; the spreads are :func:`specviz.analysis.arena_rows.timed_spread`'s and
  :func:`~specviz.analysis.arena_rows.derived_spread`'s).
- :mod:`app.arena.figures`: the bar charts and the predictions chart, pure functions of the pooled rows (error bars
  from :func:`spread_bars`).
- :mod:`app.arena.files`: the CSV and JSON downloads (:func:`write_files`).
- :mod:`app.arena.matching`: the "Poorly vs better matched draft" button (the early exit against the distilled draft,
  k = 4, greedy) and the sentence comparing the two after a run (:func:`app.arena.matching.sentence`, from the
  pooled rows: the status's first note).
"""

from __future__ import annotations

from app.arena.figures import (ARENA_PANELS, HATCHED_NOTE, RATE_SPREAD_NOTE, SHADES, SPREAD_NOTE, SPREAD_PANELS,
                               TIMED_KEYS, _prediction_word, arena_figure, predictions_figure, shown_rows, spread_bars,
                               variant_colors)
from app.arena.files import FILE_DEFINITIONS, VERDICT_COLUMNS, plain_status, with_verdicts, write_files
from app.arena.handlers import (OUTPUTS, RUNS, STATUS_INTERVAL_S, _done_status, _outputs, clicked, preset_chosen, race,
                                release_session, run, source_changed, stop)
from app.arena.layout import CLEAR_TOASTS_JS, ENTER_COMMITS_JS, NOTE, PHONE_CSS, build_tab
from app.arena.settings import (DEFAULT_DRAFTERS, DEFAULT_KS, DEFAULT_MAX_NEW_TOKENS, K_CHOICES, MAX_NEW_TOKENS,
                                MAX_NEW_TOKENS_NAME, MIN_NEW_TOKENS, RUN_INPUTS, SOURCES, SUITE_INFO, TREE_NOTE,
                                ArenaInputs, categories, category_choices, choose_prompts, drafter_choices,
                                max_new_tokens_used, parse_inputs, suite)
from app.arena.tables import (PROMPT_COLUMNS, SUMMARY_COLUMNS, TIMING_COLUMNS, drift_cell, empty_table,
                              speedup_cell, table, timed_cell)
from app.arena.verdicts import (IMPOSSIBLE_MARGIN, NO_PASS_SPREAD, NO_SPREAD, NOISY_DRIFT, SPEEDUP_KEYS, noisy_count,
                                noisy_rows, range_text, speedup_reading, spread_text)
from app.inputs import InputError
from specviz.analysis.arena_rows import BASELINE

__all__ = [
    "ARENA_PANELS", "BASELINE", "CLEAR_TOASTS_JS", "DEFAULT_DRAFTERS", "DEFAULT_KS", "DEFAULT_MAX_NEW_TOKENS",
    "ENTER_COMMITS_JS", "FILE_DEFINITIONS", "HATCHED_NOTE", "IMPOSSIBLE_MARGIN", "K_CHOICES", "MAX_NEW_TOKENS",
    "MAX_NEW_TOKENS_NAME", "MIN_NEW_TOKENS", "NOISY_DRIFT", "NOTE", "NO_PASS_SPREAD", "NO_SPREAD", "OUTPUTS",
    "PHONE_CSS", "PROMPT_COLUMNS", "RATE_SPREAD_NOTE", "RUNS", "RUN_INPUTS", "SHADES", "SOURCES", "SPEEDUP_KEYS",
    "SPREAD_NOTE", "SPREAD_PANELS", "STATUS_INTERVAL_S", "SUITE_INFO", "SUMMARY_COLUMNS", "TIMED_KEYS",
    "TIMING_COLUMNS", "TREE_NOTE", "VERDICT_COLUMNS", "ArenaInputs", "InputError", "_done_status", "_outputs",
    "_prediction_word", "arena_figure", "build_tab", "categories", "category_choices", "choose_prompts", "clicked",
    "drafter_choices", "drift_cell", "empty_table", "max_new_tokens_used", "noisy_count", "noisy_rows", "parse_inputs",
    "plain_status", "predictions_figure", "preset_chosen", "race", "range_text",
    "release_session", "run", "shown_rows", "source_changed", "speedup_cell", "speedup_reading", "spread_bars",
    "spread_text", "stop", "suite", "table", "timed_cell", "variant_colors", "with_verdicts", "write_files",
]
