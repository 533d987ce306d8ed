"""The Why tab's layout and wiring: :func:`build_tab` lays out the measurement (target, early-exit layer,
Measure and Stop, the chart and the cards) and the what-if chart with its controls, and wires their events."""

from __future__ import annotations

import functools

import gradio as gr

from app import render
from app.api_words import API
from app.inputs import EXIT_LAYER, parse_exit_layer
from app.messages import RELEASE_TRIGGER_MODE, enter_commits_js, tell_when_invalid
from app.stop_marks import mark_while_sent, sent_js, stop_sent_js
from app.why.controls import (DEFAULT_ALPHA, DEFAULT_C, KEPT, MAX_C, RUN_BOX_EMPTY, SLIDERS, check_run,
                              remember, slider_typed, whatif)
from app.why.handlers import MEASURE_INPUTS, clicked, stop, stop_said
from app.why.history import from_history, run_hint
from app.why.offload import OFFLOAD_INFO, OFFLOAD_LABEL
from app.why.plan import PLAN_REFRESH_S, plan_html, refresh_from_address, refresh_while_shown
from app.why.weights import WEIGHTS_INFO, WEIGHTS_LABEL
from specviz.measure.grid import BATCH_SIZES, IMPOSSIBLE_MARGIN, TOKEN_COUNTS


INTRO = (
    "<div class='why-intro'><p><b>When is verification nearly free?</b> Where the step waits on memory. "
    "Generating one token with a large model reads every weight from memory once; the arithmetic for that one token "
    "is tiny. Feeding the target k+1 tokens at once reads the same weights once and does k+1 times the arithmetic "
    "<i>for free</i> while the arithmetic units are idle anyway: the flat part of the curve below. A small model or "
    "a busy CPU may have no flat part: the Verifying k=4 card below says which this machine shows. Where the curve "
    "bends up, the arithmetic units are full, each extra token costs real time, and drafting more stops paying: "
    "that is why k cannot grow forever.</p><p><b>Batching uses the same slack.</b> A server that already decodes 16 "
    "requests at once has filled the arithmetic units with the batch, so its curve bends much earlier and "
    "verification stops being free: serving stacks tune speculation and batching together.</p></div>"
)
"""The tab's lead: its heading asks the question rather than claims the answer, as the measured cards may contradict it
(a trial read "Why verification is nearly free." right above "Verifying k=4 (batch 1) 2.28 steps … not nearly free
here")."""


WHATIF_STATUS_ID = "why-whatif-status"
MEASURE_MARK = "svWhyMeasuring"  # the page sent a measurement that has not ended (app.stop_marks)
"""The what-if status: a line right under the α and c sliders that says what a typed slider value or run cannot
be used as (:func:`_tell_typed_nonsense`); the Measure status (``why-status``) keeps to the measurement. Inline,
not a toast: at 400 px the toasts covered the what-if heading and sliders."""




MEASURE_NOTE = (
    f"<div class='why-note'>Times one forward over n = {', '.join(map(str, TOKEN_COUNTS))} new tokens after a 64-token "
    f"prompt, for batch sizes {', '.join(map(str, BATCH_SIZES))} (median of 3, after a warm-up; the bars span the 3), "
    "on this device, now. It first times a few forwards and says how long the whole measurement will take here. A "
    "point that comes out faster than less work (impossible: noise from other work on the machine) is measured "
    f"again, and flagged ✕ if it stays impossible; one below less work by less than {IMPOSSIBLE_MARGIN:.0%} (or with "
    "repeats that overlap) is ringed ○: within noise of impossible, the two read as equal.</div>")
"""The note under the Measure button."""


def _run_boxes() -> tuple[gr.Textbox, gr.Textbox, gr.Textbox, gr.HTML]:
    """The run to mark on the what-if chart: k, tokens per pass, speedup, and the hint under them. Empty (showing —)
    until the Live tab's latest run fills them (:func:`from_history`, which also says in the hint why a run's
    speedup box stays —) or the visitor types one: never a 0 that reads as a result. Text boxes, read by
    :func:`run_point`: Gradio's number box shows 0 for no value (its placeholder never shows at first)."""
    with gr.Row(elem_id="why-run"):
        boxes = tuple(gr.Textbox(None, label=label, placeholder=RUN_BOX_EMPTY, max_lines=1, elem_id=elem_id,
                                 min_width=70)
                      for label, elem_id in (("Run: k", "why-run-k"), ("tokens/pass", "why-run-tpp"),
                                             ("speedup", "why-run-speedup")))
    hint = gr.HTML(run_hint(None), elem_id="why-run-hint")
    return (*boxes, hint)


ENTER_EMPTY_JS = """() => {
  if (window.svWhyEnterEmpty) return;
  window.svWhyEnterEmpty = true;
  document.addEventListener('keydown', (ev) => {
    const box = ev.target;
    if (ev.key !== 'Enter' || !(box instanceof HTMLInputElement) || box.type !== 'number' || box.value !== ''
        || !box.closest('#whatif-controls')) return;
    box.dispatchEvent(new FocusEvent('blur'));
  }, true);
}"""
"""On page load: Enter in an empty what-if slider box (emptied, or holding what a number box cannot read, such as
"abc") commits it as leaving the box does, so :func:`slider_typed` puts the kept number back and says so at once. A
box holding a number is left alone: its ``input`` event already redrew the chart and clamped it (committing it
again would say a clamp twice)."""


def _tell_typed_nonsense(sliders: tuple[gr.Slider, gr.Slider], run_boxes: tuple, status: gr.HTML,
                         kept: gr.State, measurement: gr.State) -> None:
    """Say typed values the what-if chart cannot use, never drop them silently, in one line of ``status`` (the
    what-if status under the sliders, :data:`WHATIF_STATUS_ID`; no toast): a run box left with a value no run
    gives (:func:`check_run`); α or c typed out of range, already while typing (a number typed redraws the chart,
    clamped, before the box is left) and when the box is left; and a box left with no number, which gets its last
    number back (:func:`slider_typed`, which keeps the last numbers in ``kept``; c's range follows the
    ``measurement``'s c)."""
    for box in run_boxes:  # left, or Enter (a text box's submit: the trial's bad values sat there unsaid)
        gr.on([box.blur, box.submit], check_run, inputs=[*run_boxes, status], outputs=[status], preprocess=False,
              show_progress="hidden", concurrency_limit=None, api_visibility="private")
    # every release is sent at once (RELEASE_TRIGGER_MODE, as tell_when_clamped's): held back behind the click's
    # release ("always_last"), the typed number's release read the box after Gradio had clamped it (2.48 -> 2,
    # -1 -> 0), and nothing was said (issue 34's trial on a busy machine)
    for slider, key in zip(sliders, SLIDERS):
        for event, left, mode in ((slider.input, False, "always_last"), (slider.release, True, RELEASE_TRIGGER_MODE)):
            event(functools.partial(slider_typed, key, left=left), inputs=[slider, kept, measurement, status],
                  outputs=[slider, status, kept], preprocess=False, show_progress="hidden",
                  trigger_mode=mode, concurrency_limit=None, api_visibility="private")
    gr.context.Context.root_block.load(None, js=ENTER_EMPTY_JS, queue=False, api_visibility="private")


ENTER_COMMITS_JS = enter_commits_js("#why-controls")
"""Enter in the measurement column's early-exit layer box commits it as leaving it does (its check says -3 or 1e9
at once, as in the other tabs); scoped to that column: the what-if boxes answer Enter themselves."""
EXIT_LAYER_INFO = ("Measure times a draft made of the target's first this many layers and sets the what-if's draft "
                   "cost c (its cost per token ÷ a target step) to it")
"""The early-exit layer box's info: what the layer is for, in the glossary's terms (a trial's reader met "Early-exit
layer for c" without knowing c)."""


def build_tab(history: gr.State | None = None, target: str = "embedded") -> None:
    """Lay out the "Why it works" tab inside the current ``gr.Tab`` and wire its events. ``history`` is the Live
    tab's run history (gr.State); its newest run is marked on the what-if chart."""
    tab = gr.context.Context.block  # the tab this is built in (its select refreshes the plan)
    gr.HTML(INTRO, elem_id="why-intro")
    measurement = gr.State(None)
    kept = gr.State(dict(KEPT))  # the what-if sliders' last numbers (slider_typed): an emptied box gets its back
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="why-controls"):
            target_box = gr.Textbox(target, label="Target model", elem_id="why-target",
                                    info="'embedded', a hub id or a local folder")
            exit_layer = gr.Number(0, label="Early-exit layer (sets the draft cost c; 0 = half the layers)",
                                   info=EXIT_LAYER_INFO, elem_id="why-exit-layer")
            offload = gr.Checkbox(False, label=OFFLOAD_LABEL, info=OFFLOAD_INFO, elem_id="why-offload")
            weights = gr.Checkbox(False, label=WEIGHTS_LABEL, info=WEIGHTS_INFO, elem_id="why-weights")
            with gr.Row():
                measure_btn = gr.Button("Measure", variant="primary", elem_id="why-measure", scale=3)
                stop_btn = gr.Button("Stop", variant="stop", elem_id="why-stop", scale=1, min_width=80)
            plan = gr.HTML(plan_html(target), elem_id="why-measure-plan")  # how long, before the press
            gr.HTML(MEASURE_NOTE)
        with gr.Column(scale=3, min_width=600, elem_id="why-results"):
            status = gr.HTML(render.status_html("Press Measure to time the target on this device.", "info"),
                             elem_id="why-status")
            chart = gr.Plot(elem_id="why-chart", show_label=False, visible=False)
            summary = gr.HTML("", elem_id="why-summary")
            weights_chart = gr.Plot(elem_id="why-weights-chart", show_label=False, visible=False)
    gr.HTML("<h3 class='why-heading'>What if: tokens per pass and speedup against k</h3>"
            "<div class='why-note'>E[tokens per pass] = (1 − α<sup>k+1</sup>) / (1 − α). Speedup, paper: "
            "E[tokens/pass] / (c·k + 1). Speedup with measured costs: E[tokens/pass] × T(1) / (T(k+1) + c·k·T(1)), "
            "T from the measurement above (interpolated between measured n). The star is your latest Live run "
            "(α is set to the value that gives its tokens per pass at its k, not the Live card's accepted ÷ judged; "
            "an n-gram run sets c to the lookup's), or any run you type in.</div>",
            elem_id="why-whatif-note")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="whatif-controls"):
            alpha = gr.Slider(0, 1, value=DEFAULT_ALPHA, step=0.01, label="Per-token acceptance α",
                              elem_id="why-alpha")
            c = gr.Slider(0, MAX_C, value=DEFAULT_C, step=0.005,
                          label="Draft cost c (one drafted token ÷ one target step)", elem_id="why-c",
                          info="n-gram ≈ 0 (a Live n-gram run sets it); early exit ≈ its share of the layers "
                               "(Measure sets it)")
            whatif_status = gr.HTML("", elem_id=WHATIF_STATUS_ID)  # what the what-if boxes cannot use, said here
            batch = gr.Radio([("batch 1", 1)], value=1, label="Measured curve of batch size", elem_id="why-batch",
                             interactive=False)
            run_k, run_tpp, run_speedup, hint = _run_boxes()
        with gr.Column(scale=3, min_width=600):
            whatif_chart = gr.Plot(whatif(DEFAULT_ALPHA, DEFAULT_C, 1, None, None, None, None),
                                   elem_id="why-whatif-chart", show_label=False)
    sent = dict(zip(MEASURE_INPUTS, [target_box, exit_layer, alpha, run_k, run_tpp, run_speedup, history,
                                          offload, weights, c]))
    measuring = _wire_measure((measure_btn, stop_btn), sent, [status, chart, summary, weights_chart, measurement, c,
                                                             batch, whatif_chart])
    controls = [alpha, c, batch, run_k, run_tpp, run_speedup, measurement, kept]
    _wire_whatif(controls, whatif_chart, whatif_status)
    tell_when_invalid(exit_layer, status, EXIT_LAYER, parse_exit_layer, target=target_box)
    gr.context.Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    _follow_setters(measuring, history, controls, whatif_chart, hint)
    _wire_plan(plan, (target_box, offload, weights), measuring, tab)


def _wire_plan(plan: gr.HTML, settings: tuple, measuring, tab=None) -> None:
    """Keep the line beside Measure (:func:`app.why.plan.plan_html`) on the settings and the machine's load now:
    ``settings`` (the target box, the offload and weight-format boxes) left or changed, the page loaded, the tab
    (``tab``, a ``gr.Tab``; None: built outside one) selected, every :data:`PLAN_REFRESH_S` seconds while it is the
    tab shown (a timer that the tabs' select switches on and off: :func:`refresh_while_shown`; a tick reads the
    load average and a dict) and a Measure ended (its first forwards now give the estimate)."""
    target_box, offload, weights = settings
    timer = gr.Timer(PLAN_REFRESH_S, active=False)
    triggers = [target_box.blur, target_box.submit, offload.change, weights.change,
                gr.context.Context.root_block.load, timer.tick]
    tabs = getattr(tab, "parent", None)
    if isinstance(tabs, gr.Tabs):
        triggers.append(tab.select)
        tabs.select(refresh_while_shown, outputs=[timer], queue=False, show_progress="hidden",
                    api_visibility="private")
        gr.context.Context.root_block.load(refresh_from_address, outputs=[timer], queue=False,
                                           show_progress="hidden", api_visibility="private")
    gr.on(triggers, plan_html, inputs=[target_box, offload, weights], outputs=[plan], queue=False,
          show_progress="hidden", api_visibility="private")
    measuring.then(plan_html, inputs=[target_box, offload, weights], outputs=[plan], queue=False,
                   show_progress="hidden", api_visibility="private")


def _follow_setters(measuring, history: gr.State | None, controls: list, whatif_chart: gr.Plot, hint: gr.HTML) -> None:
    """After Measure (``measuring``, its event) sets c and a Live run (``history``'s change, :func:`from_history`)
    sets α and the run boxes, the sliders' last numbers follow (:func:`remember`). ``controls``: α, c, batch, the
    three run boxes, the measurement and the kept numbers (as :func:`_wire_whatif`'s). Both read raw values
    (preprocess off): c's box may hold a number typed out of range when a Live run ends, and Gradio's range check
    would answer with its raw toast; both handlers clamp the raw number themselves."""
    alpha, c, batch, run_k, run_tpp, run_speedup, measurement, kept = controls
    setters = [measuring]  # c as Measure set it; α as a Live run set it (from_history)
    if history is not None:
        setters.append(history.change(from_history, inputs=[history, c, batch, measurement, kept],
                                      outputs=[run_k, run_tpp, run_speedup, alpha, c, whatif_chart, hint],
                                      preprocess=False,
                                      show_progress="hidden", api_visibility="private"))
    for setter in setters:  # the sliders' last numbers (slider_typed) follow what these handlers set
        setter.then(remember, inputs=[alpha, c, kept, measurement], outputs=[kept], preprocess=False,
                    show_progress="hidden", api_visibility="private")


def _wire_whatif(whatif_inputs: list, whatif_chart: gr.Plot, status: gr.HTML) -> None:
    """Redraw the what-if chart on a user's edit of its controls (``whatif_inputs``: :func:`whatif`'s, α, c, batch,
    the three run boxes, the measurement and the sliders' kept numbers) and say what it cannot use in ``status``,
    the what-if status (:func:`_tell_typed_nonsense`)."""
    alpha, c, batch, run_k, run_tpp, run_speedup, measurement, kept = whatif_inputs
    # user edits only (.input): the handlers that set these controls (measure, from_history) draw the chart
    # themselves, so no chain of change events can race them with stale values; always_last drops the
    # intermediate values of a slider drag; preprocess off: a number typed out of a slider's range arrives before
    # the slider clamps it (Gradio's range check would answer with a server error), and whatif clamps it itself
    gr.on([alpha.input, c.input, batch.input, run_k.input, run_tpp.input, run_speedup.input, run_k.blur,
           run_tpp.blur, run_speedup.blur, run_k.submit, run_tpp.submit, run_speedup.submit], whatif,
          inputs=whatif_inputs, outputs=[whatif_chart], show_progress="hidden", trigger_mode="always_last",
          preprocess=False, api_visibility="private")
    _tell_typed_nonsense((alpha, c), (run_k, run_tpp, run_speedup), status, kept, measurement)


def _wire_measure(buttons: tuple[gr.Button, gr.Button], sent: dict, outputs: list):
    """Measure (the handler gets ``sent``'s boxes by name; ``outputs``: status, chart, summary, weights chart,
    measurement, c, batch, what-if chart) and its Stop; returns Measure's event. Stop flags the measurement and
    frees the device; an earlier chart and c stay (the status says if there is one), then the same line once more
    when the measurement's handler has ended. No cancels=[measuring]: Gradio's hard cancel at times left a red
    "Error" on the status (2 of 10 stops); the flag ends the handler (app.endings). The page's mark "a measurement
    sent, not ended" reaches Stop in place of the status box's value (app.stop_marks), so a Stop also keeps a
    measurement still waiting in Gradio's queue from running."""
    measure_btn, stop_btn = buttons
    status, measurement = outputs[0], outputs[4]
    measuring = measure_btn.click(clicked, inputs_kwargs={name: box for name, box in sent.items() if box is not None},
                                  outputs=outputs, api_name="why_measure", api_description=API["why_measure"],
                                  show_progress="full",
                                  show_progress_on=[status], concurrency_limit=4, concurrency_id="arena",
                                  js=sent_js(MEASURE_MARK))
    mark_while_sent(measuring, MEASURE_MARK)
    stop_btn.click(stop, inputs=[measurement, status], outputs=[status], queue=False, js=stop_sent_js(MEASURE_MARK, 2),
                   api_name="why_stop", api_description=API["why_stop"]).then(stop_said, outputs=[status], queue=False, show_progress="hidden",
                                             api_visibility="private")
    return measuring
