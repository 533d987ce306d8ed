"""The "Why it works" tab: the target's forward time against the number of new tokens, measured live on this
device for a few batch sizes, and an interactive what-if chart of tokens per pass and speedup against k.

One module per concern; every name other code uses is importable from ``app.why`` itself:

- :mod:`app.why.layout`: :func:`build_tab`, the layout and the wiring of its events.
- :mod:`app.why.handlers`: the Measure and Stop buttons (:func:`measure`, its inputs :class:`MeasureInputs`,
  :func:`stop`). Measure waits for its turn on the device (:mod:`app.device`), loads the target, times a few
  forwards for its estimate, then the forward grid (:func:`specviz.measure.grid.measure_forward_grid`, stopped
  before its next forward by Stop or a closed tab) and the drafters' c, in the job's thread.
- :mod:`app.why.noise`: the grid read for noise. A point measured faster than less work is measured again by the
  grid and, if still impossible, flagged on the chart and in the text and left out of the lines, the cards and the
  what-if curve (:func:`possible_curve`); one below less work but inside the margin is ringed as within noise of
  impossible (:func:`within_noise_points`).
- :mod:`app.why.figures`: the forward-time chart (error bars span the repeats of each point) and the what-if chart,
  pure functions of their data.
- :mod:`app.why.cards`: the summary cards under the forward-time chart.
- :mod:`app.why.controls`: the what-if chart's sliders and run boxes, and :func:`whatif`, which redraws the chart
  from them and the last measurement.
- :mod:`app.why.offload`: the optional offloaded verify curve; :mod:`app.why.weights`: the optional step time
  against weight bytes in each weight format (float32, bfloat16, int8, int4) beside the memory floor.
- :mod:`app.why.history`: the Live tab's runs as this tab reads them (:func:`from_history` marks the latest run).
"""

from __future__ import annotations

import gradio as gr  # noqa: F401 - tests patch gr.Info through this module

from app.why.cards import ONE_STEP, cost_reading, round_ratios, summary_html
from app.why.controls import (DEFAULT_ALPHA, DEFAULT_C, KEPT, MAX_C, RUN_BOX_EMPTY, RUN_BOXES, RUN_PROBLEM_ENDINGS,
                              SLIDERS, alpha_note, c_top, c_words, check_run, measured_c, remember, run_alpha,
                              run_issues, run_point, slider_typed, whatif)
from app.why.figures import BATCH_COLORS, NOTE_GAP_PX, NOTE_LINE_PX, forward_figure, whatif_figure
from app.why.handlers import (MEASURE_INPUTS, OUTPUTS, RUNS, STATUS_INTERVAL_S, STOPPED,
                              STOPPED_KEPT, STOPPED_QUEUED, MeasureInputs, _measure_inputs, _measured, _measuring,
                              clicked, measure, measure_from, release_session, stop)
from app.why.history import RUN_HINT, from_history, latest_run, lookahead_settings, run_c
from app.why.layout import ENTER_COMMITS_JS, ENTER_EMPTY_JS, INTRO, MEASURE_NOTE, _run_boxes, build_tab
from app.why.plan import ESTIMATE_EXTRA_S, measure_seconds, plan_html, planned, remember_probe
from app.why.noise import (WITHIN_NOISE, impossible_text, inside_margin, noisy_measured, possible_curve,
                           times_measured, within_noise_points, within_noise_text)
from specviz.core.engine import MAX_K

__all__ = [
    "BATCH_COLORS", "DEFAULT_ALPHA", "DEFAULT_C", "ENTER_COMMITS_JS", "ENTER_EMPTY_JS", "ESTIMATE_EXTRA_S", "INTRO",
    "KEPT", "MAX_C",
    "MAX_K", "MEASURE_INPUTS", "MEASURE_NOTE", "NOTE_GAP_PX", "NOTE_LINE_PX", "ONE_STEP", "OUTPUTS", "RUNS",
    "RUN_BOXES", "RUN_BOX_EMPTY", "RUN_HINT", "RUN_PROBLEM_ENDINGS", "SLIDERS", "STATUS_INTERVAL_S", "STOPPED",
    "STOPPED_KEPT", "STOPPED_QUEUED",
    "WITHIN_NOISE", "MeasureInputs", "_measure_inputs", "_measured", "_measuring", "_run_boxes", "build_tab",
    "alpha_note", "c_top", "c_words", "check_run", "clicked", "cost_reading", "forward_figure", "from_history",
    "impossible_text",
    "inside_margin",
    "latest_run", "lookahead_settings", "measure", "measure_from", "measure_seconds", "plan_html", "planned",
    "remember_probe", "noisy_measured", "possible_curve",
    "measured_c", "release_session", "remember", "round_ratios", "run_alpha", "run_c", "run_issues", "run_point",
    "slider_typed", "stop", "summary_html", "times_measured",
    "whatif", "whatif_figure", "within_noise_points", "within_noise_text",
]
