"""The Batching tab (issue 18): where the free verification runs out, and a check that speculative sampling keeps
the target's distribution. Two parts, each in modules of its own; :func:`build_tab` lays both out.

**Speculation × batch size** (the Measure button, :func:`measure`). One :class:`app.device.Job` waits for its turn
on the device, loads the target, encodes a few example prompts (assets/prompts.jsonl; "long" joins them to about
:data:`LONG_PROMPT_TOKENS` tokens each), times a few forwards (:func:`specviz.measure.grid.probe_forward_ms`) for
the estimate in the status line (:func:`sweep_seconds`), optionally times the forward grid T(B, 1), T(B, k+1)
for the predicted curve (:func:`specviz.measure.grid.measure_forward_grid`), and runs
:func:`specviz.analysis.batching.batch_sweep` with the job's cancel flag as ``should_stop`` (Stop, or a closed
browser tab, ends it before its next forward; the batch sizes that finished are still shown, and they and the
predicted curve's timings are in the downloads with a note of what is missing). Shown: a table per
B (:func:`sweep_table`; every measured figure with the lowest and highest of its repeats,
:func:`~specviz.analysis.batching.spread_cell`, and the predicted speedup, a model, with its inputs' range,
:func:`predicted_cell`), the speedup against B beside the pass cost (:func:`sweep_figure`), one sentence that reads
the lesson off the numbers (:func:`sweep_lesson`), and CSV / JSON downloads (:func:`write_sweep_files`). Every
speedup is read by the rule every tab uses (:func:`specviz.core.verdict.read_speedup`, :func:`verdict`) on its
repeats' range: all above 1 reads "faster" ("2.15× faster"), all below "slower" ("0.62× the speed, slower"), with
the median and the range, however wide and however busy the machine; only repeats on both sides of 1 that disagree
by more than :data:`NOISY_SPREAD` (or on a busy machine) read "too noisy to tell", the median still shown.

**The sampling-law check** (the Check button, :func:`check`). One job runs
:func:`specviz.analysis.batching.sampling_check`: N short sampled runs of standard and of speculative decoding
(batched), the two tokens after the prefill's token counted and compared with the target's exact probabilities
(chi-square goodness of fit) and with each other (homogeneity). Shown: the two histograms side by side with the
exact law's expected counts as markers (:func:`check_figure`), the statistics (:func:`check_stats_html`) and one
sentence (:func:`check_lesson`). The drafters are wrapped to count what they proposed (:class:`CountingDrafter`),
so a drafter that proposed nothing (the speculative runs were standard decoding) is said to have tested nothing.

The modules, each part's from its inputs to its buttons:

- ``layout``: :func:`build_tab` (the controls, results and events of both parts) and :func:`release_session`.
- ``shared``: the models both parts run, the drafter factory, a running job's status line, the figure frame.
- ``sweep_job``: the sweep's form and settings, its prompts, time estimate and the job itself.
- ``sweep_reading`` (verdicts and the table), ``sweep_lesson``, ``sweep_figures``, ``sweep_files`` (CSV, JSON).
- ``sweep_handlers``: Measure and Stop.
- ``check_job``: the check's form and settings, its time law (:func:`check_seconds`) and the job;
  ``check_reading`` (the tests read, the lesson, the statistics), ``check_figures``, ``check_handlers`` (Check and
  Stop).
- ``plan``: each part's estimate before the press, from the costs already measured for the target
  (:func:`app.batching.plan.check_plan`, :func:`app.batching.plan.sweep_plan`), said in its status line.

Figures are pure functions of the results; nothing here imports another tab.
"""

from __future__ import annotations

from app.batching.check_figures import check_figure
from app.batching.check_handlers import check, stop_check
from app.batching.check_job import CHECK_N, MAX_N, N_FIELD, CheckForm, parse_check
from app.batching.check_reading import check_lesson, check_stats_html, runs_needed, too_few
from app.batching.layout import ENTER_COMMITS_JS, build_tab, release_session
from app.batching.shared import CountingDrafter
from app.batching.sweep_figures import sweep_figure
from app.batching.sweep_files import csv_rows, sweep_csv, sweep_json, write_sweep_files
from app.batching.sweep_handlers import _swept, measure, stop_sweep
from app.batching.sweep_job import (LONG, LONG_PROMPT_TOKENS, MAX_NEW_TOKENS, REPEATS, SHORT, SweepForm, parse_sweep,
                                    sweep_seconds)
from app.batching.sweep_lesson import cost_verdict, sweep_lesson
from app.batching.sweep_reading import (NOISY_SPREAD, disturbance, impossible, noisy_prediction, predicted_cell,
                                        speedup_text, sweep_table, unreadable_costs, verdict)
from specviz.core.engine import MAX_K  # the k slider's end

__all__ = [
    "CHECK_N", "ENTER_COMMITS_JS", "LONG", "LONG_PROMPT_TOKENS", "MAX_K", "MAX_N", "MAX_NEW_TOKENS", "NOISY_SPREAD",
    "N_FIELD", "REPEATS", "SHORT", "CheckForm", "CountingDrafter", "SweepForm", "_swept", "build_tab", "check",
    "check_figure", "check_lesson", "check_stats_html", "cost_verdict", "csv_rows", "disturbance", "impossible",
    "measure", "noisy_prediction", "parse_check", "parse_sweep", "predicted_cell", "release_session", "runs_needed",
    "speedup_text", "stop_check", "stop_sweep", "sweep_csv", "sweep_figure", "sweep_json", "sweep_lesson",
    "sweep_seconds", "sweep_table", "too_few", "unreadable_costs", "verdict", "write_sweep_files",
]
