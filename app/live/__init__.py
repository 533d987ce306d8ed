"""The Live tab: a prompt, a drafter and k; the speculative run and its standard-decoding baseline stream side by
side, with stats and charts, and Stop keeps what they made as the run's result.

Where each part lives:

- :mod:`app.live.defaults`: the default settings (:data:`DEFAULTS`), the names of the inputs a run reads
  (:data:`INPUTS`) and of the outputs it sends (:data:`OUTPUTS`), the example prompts;
- :mod:`app.live.run`: the Generate button (:func:`generate`, the inputs as one mapping of name -> value): validate,
  wait for the device, load, race both runs and stream the rendered result;
- :mod:`app.live.view`: the view-model (:class:`RunView`): one run's panes, statistics, output check, judged
  speedup and its history row (:class:`app.records.RunSummary`);
- :mod:`app.live.outputs`: one message of the handlers (:class:`Frame`), the end state, a failed run, and the
  per-session stores (the running view for Stop, the last good result);
- :mod:`app.costs`: the run-cost estimation service (:class:`RunCosts`): how long a run should take, learned
  from this process's runs and timed forwards, and the derived default of max new tokens (a plan's range and the
  machine's load: :mod:`app.estimates`, shared with the other tabs);
- :mod:`app.live.warmup`: the app's start-up run (:func:`warm_up`);
- :mod:`app.live.controls`: Stop, a closed tab, and the controls that follow each other;
- :mod:`app.live.layout`: the layout and its wiring (:func:`build_tab`).

Honest numbers: the headline is the decoding speedup (after the prefill) with its bootstrap interval over passes
(:func:`specviz.measure.stats.judge_decode_speedup`); a run too short to judge or too noisy to tell shows no
figure in green or red, and enters the history without a speedup. A prompt longer than the target's context
window (or than ``SPECVIZ_MAX_PROMPT_TOKENS``) is cut from the left with the chat template kept whole, and the
status says so; any exception in a run becomes a message for that session only (:mod:`app.messages`), and the
session's last good result stays in the panes. Time you can plan: before a run the status says how long it should
take (:mod:`app.costs`) and how many runs are ahead. "Output only" shows the committed text plainly (a class
on <body>, :data:`OUTPUT_ONLY_JS`).

The names other code and the tests use are re-exported here.
"""

from __future__ import annotations

from app import costs  # noqa: F401 - the run-cost service, shared with the Arena
from app.live import controls, defaults, layout, outputs, run, view, warmup  # noqa: F401 - the parts
from app.live.controls import (PRESET_CHOICES, drafter_changed, gate_chosen, k_chosen, lookahead_k, preset_chosen,
                               release_session, stop, stop_now, stop_run, stopped_view)
from app.costs import (COST_RUNS, DEFAULT_RUN_S, LONG_PREFILL_S, MIN_DEFAULT_TOKENS, RECENT_RUNS, RunCosts,
                       costs_of_run, default_max_new_tokens, derived_default_tokens, known_costs, learn_costs,
                       page_default_tokens, plan_text, tuned_costs)
from app.forward_timing import timed_forwards
from app.prefill_notes import long_prompt_note, settle_prefill_note, settled_after_prefill
from app.estimates import MIN_SPREAD, PROBE_SPREAD
from app.live.defaults import ASSETS, DEFAULTS, FIRST_EXAMPLE, INPUTS, OUTPUTS, example_labels, load_examples
from app.live.layout import (CHECKED_NUMBERS, CLAMPED_SLIDERS, ENTER_COMMITS_JS, EXAMPLES_PER_PAGE, OUTPUT_ONLY_JS,
                             build_tab)
from app.live.outputs import HISTORY_ROWS, Frame, history_html, planned_status, progress_html, stopped_status
from app.live.run import (CHART_INTERVAL_S, READING_PANE, UPDATE_INTERVAL_S, WHAT, generate, generate_on_device,
                          gpu_events, gpu_seconds)
from app.live.view import K_CUT_NAME, PASSES, RunView, k_label, mark_budget_cuts
from app.live.warmup import STARTUP_TOKENS, warm_up

__all__ = [
    "PRESET_CHOICES", "drafter_changed", "gate_chosen", "k_chosen", "lookahead_k", "preset_chosen", "release_session", "stop",
    "stop_now", "stop_run", "stopped_view", "COST_RUNS", "DEFAULT_RUN_S", "LONG_PREFILL_S", "MIN_DEFAULT_TOKENS", "MIN_SPREAD",
    "PROBE_SPREAD", "RECENT_RUNS", "RunCosts", "costs_of_run", "default_max_new_tokens", "derived_default_tokens",
    "known_costs", "learn_costs", "long_prompt_note", "page_default_tokens", "plan_text", "settle_prefill_note",
    "settled_after_prefill", "timed_forwards", "tuned_costs", "ASSETS", "DEFAULTS", "FIRST_EXAMPLE", "INPUTS",
    "OUTPUTS", "example_labels", "load_examples", "CHECKED_NUMBERS", "CLAMPED_SLIDERS", "ENTER_COMMITS_JS",
    "EXAMPLES_PER_PAGE", "OUTPUT_ONLY_JS", "build_tab", "HISTORY_ROWS", "Frame", "history_html", "planned_status",
    "progress_html", "stopped_status", "CHART_INTERVAL_S", "READING_PANE", "UPDATE_INTERVAL_S", "WHAT", "generate",
    "generate_on_device", "gpu_events", "gpu_seconds", "K_CUT_NAME", "PASSES", "RunView", "k_label",
    "mark_budget_cuts", "STARTUP_TOKENS", "warm_up",
]
