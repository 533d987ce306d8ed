"""The Batching tab's layout (:func:`build_tab`): the models, then the sweep's and the check's controls, results and
events; :func:`release_session` is the tab's hook for a closed browser tab."""

from __future__ import annotations

import gradio as gr

from app.api_words import API
from app.batching.check_handlers import CHECKS, on_check, stop_check
from app.batching.check_job import CHECK_N, CHECK_PROMPT, MAX_N, MIN_N, N_FIELD, N_INFO
from app.batching.plan import CHECK_LEAD, SWEEP_LEAD, check_plan_status, refresh, sweep_plan_status
from app.batching.shared import DEFAULT_DRAFTER, drafter_menu
from app.batching.sweep_handlers import SWEEPS, on_measure, stop_sweep
from app.batching.sweep_job import DEFAULT_K, DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS, PROMPT_LENGTHS, REPEATS, SHORT
from app.batching.sweep_reading import NOISY_SPREAD, empty_table
from app.messages import enter_commits_js, settled_inputs_js, tell_when_clamped
from app.stop_marks import mark_while_sent, sent_js, stop_sent_js
from specviz.analysis.batching import BATCH_SIZES
from specviz.core.engine import MAX_K

INTRO = (
    "<div class='batching-intro'><p><b>Where the free verification runs out.</b> A decode step of a few rows waits "
    "on memory (reading the weights), so verifying k+1 tokens per row costs about one step: speculation's profit. "
    "A batch spends the same slack: B rows per forward also cost little more than one. Together they run out of "
    "it: at some B a forward over B × (k+1) tokens is bound by arithmetic, a pass costs clearly more than a step, "
    "and speculation stops paying (serving stacks turn it down as the batch grows). Long prompts add KV-cache "
    "reads to every forward, which keeps a batch memory-bound longer (MagicDec).</p></div>"
)
SWEEP_NOTE = (
    "<div class='batching-note'>Per batch size B, the same example prompts (recycled to B rows) are decoded by "
    f"standard and by speculative decoding (greedy), {REPEATS} interleaved repeats, each timed on the batch's own "
    "clock after the prefill. Every measured figure is a median (tokens/s: of the repeats; T: of all the runs' "
    "forwards; the pass cost: their ratio), <b>in brackets the lowest and highest of the repeats' own</b> (“all "
    "repeats equal” where they agree exactly, “one sample” from one repeat). <b>Speedup</b> = speculative ÷ "
    "standard tokens/s (medians; in brackets the repeats' own ratios; “faster” or “slower” when every repeat is, "
    f"however far apart and however busy the machine; repeats on both sides of 1 spread wider than "
    f"{NOISY_SPREAD:.0%}, or on a busy machine: “too noisy to tell”, the median still given; the same rule as the "
    "Live headline). "
    "<b>Pass cost</b> = T(B, k+1) ÷ T(B, 1) from the runs' own forwards. <b>Predicted (model)</b>: a model's "
    "estimate, not a measurement, = tokens per pass at B = 1 × T(B, 1) ÷ (T(B, k+1) + B × drafting per row), T from "
    "the forward grid when timed; in brackets the same over its inputs' spread (“left out, too noisy” with why, "
    "no number, where the pass cost it reads was timed below one step or far from the sweep's own; “not readable” "
    "with the pass costs when other programs disturbed the sweep). <b>KV cache</b>: the batch's keys and values at its longest "
    "row's end.</div>"
)
CHECK_NOTE = (
    "<div class='batching-note'>N sampled runs of 3 tokens each way (16 at a time). The first token comes from the "
    "prefill and never meets the verifier, so the check keeps the runs whose first token was the most frequent one "
    "and counts the next two tokens, where a draft is verified; it compares them with the target's exact "
    "probabilities (chi-square) and with each other. The default prompt starts with “The sky”, so the n-gram "
    "drafter guesses “ sky” after a first “The”: a guess the target seldom makes.</div>"
)


ENTER_COMMITS_JS = enter_commits_js("#batching-controls, #batching-check-controls")
SWEEP_MARK, CHECK_MARK = "svSweepSent", "svCheckSent"  # the page sent one that has not ended (app.stop_marks)
"""On page load: Enter in a number box of this tab's controls commits it as leaving the box does
(:func:`app.messages.enter_commits_js`), the sliders' own boxes (k, max new tokens, temperature) included: the N box
gets its check (:func:`app.messages.tell_when_invalid`) and a slider's number out of range or emptied gets its
sentence (:func:`app.messages.tell_when_clamped`) at once. Without the sliders, a trial's max new tokens 100000 stayed
in the box after Enter with no word until the next click (tests/test_slider_boxes_browser.py)."""


def build_tab(target: str = "embedded") -> None:
    """Lay out the Batching tab inside the current ``gr.Tab`` and wire its events; ``target`` is the default
    target of both parts. Each part's status plans its run before the press (:mod:`app.batching.plan`), again on
    the page's load, when the tab is opened (its ``select``; built outside a tab, not) and when an input the plan
    follows changes (:func:`wire_plans`)."""
    tab = gr.context.Context.block if isinstance(gr.context.Context.block, gr.Tab) else None
    gr.HTML(INTRO, elem_id="batching-intro")
    with gr.Accordion("Target and draft model", open=False, elem_id="batching-models"):
        with gr.Row():
            target_box = gr.Textbox(target, label="Target model", elem_id="batching-target",
                                    info="'embedded', a hub id or a local folder")
            draft_model = gr.Textbox("", label="Draft model (for the 'Draft model' drafter)",
                                     elem_id="batching-draft-model", placeholder="hub id or local folder")
    sweep = _sweep_section(target_box, draft_model)
    check = _check_section(target_box, draft_model)
    gr.context.Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    wire_plans(sweep, check, tab)


def refresh_sweep(request: gr.Request, shown, *values):
    """The sweep's status planned again for ``values`` (:data:`SWEEP_PLAN_INPUTS`' values:
    :func:`app.batching.plan.refresh` of :func:`app.batching.plan.sweep_plan_status`), or gr.skip() while the session's
    sweep is registered (waiting or running: its own status stands)."""
    return gr.skip() if SWEEPS.running(request) else refresh(shown, values, SWEEP_LEAD, sweep_plan_status)


def refresh_check(request: gr.Request, shown, *values):
    """The check's status planned again for ``values`` (:data:`CHECK_PLAN_INPUTS`' values), as
    :func:`refresh_sweep` does for the sweep."""
    return gr.skip() if CHECKS.running(request) else refresh(shown, values, CHECK_LEAD, check_plan_status)


SWEEP_PLAN_INPUTS = ("drafter", "k", "max_new_tokens", "batch_sizes", "prompt_length", "predicted", "target",
                     "draft_model")
"""What the sweep's plan reads, in :func:`app.batching.plan.sweep_plan_status`'s order (SweepForm's fields)."""
CHECK_PLAN_INPUTS = ("target", "prompt", "n")
"""What the check's plan reads, in :func:`app.batching.plan.check_plan_status`'s order."""


def wire_plans(sweep: dict, check: dict, tab: gr.Tab | None = None) -> None:
    """Make each part's status say its plan (:func:`refresh_sweep`, :func:`refresh_check`; ``sweep`` and ``check``:
    name -> component, "status" and the inputs its plan reads) on the page's load, when the tab is opened (``tab``'s
    ``select``: Live runs since the page's load count) and on the visitor's change of an input it reads (``input``,
    not ``change``: a value the app sets, as a slider's clamp with its own status line, is not answered over that
    line), in the browser's round trip, outside the queue (it reads measured costs and the load, nothing more); raw
    values (preprocess off), so a number out of range reaches the plan, which leaves it to its own check. After a
    box's own check when it is left (``part["left"]``, a list: the N box's blur, the sweep's k and max new tokens
    releases), the plan is made again for the value the box settled on, under its sentence (a trial read "using 20"
    above a plan of 200 runs, then no plan after 100; another read "using 4." for max new tokens per row above a plan
    of 24, or of 2, or with no number)."""
    for part, names, handler in ((sweep, SWEEP_PLAN_INPUTS, refresh_sweep), (check, CHECK_PLAN_INPUTS, refresh_check)):
        inputs = [part["status"]] + [part[name] for name in names]
        options = dict(inputs=inputs, outputs=[part["status"]], queue=False, preprocess=False,
                       show_progress="hidden", api_visibility="private")
        for name in names:
            part[name].input(handler, trigger_mode="always_last", **options)
        for left in part.get("left", ()):  # the box's sentence settled its value: planned for it, under the sentence
            left.then(handler, **options)
        gr.context.Context.root_block.load(handler, **options)
        if tab is not None:
            tab.select(handler, **options)


def release_session(request: gr.Request = None) -> None:
    """When a browser tab closes: cancel that session's sweep and check (and no one else's)."""
    SWEEPS.cancel_session(request)
    CHECKS.cancel_session(request)


def _sweep_section(target_box: gr.Textbox, draft_model: gr.Textbox) -> dict:
    """The speculation × batch size part: its controls, results and events. Returns its form's components and its
    status (name -> component), for its plan (:func:`wire_plans`)."""
    gr.HTML("<h3 class='batching-heading'>Speculation × batch size</h3>")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="batching-controls"):
            drafter = gr.Dropdown(drafter_menu(), value=DEFAULT_DRAFTER, label="Drafter", elem_id="batching-drafter")
            from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

            add_about(drafter, "batching-drafter-about", DEFAULT_DRAFTER)
            k = gr.Slider(1, MAX_K, value=DEFAULT_K, step=1, label="Draft length k", elem_id="batching-k")
            max_new = gr.Slider(4, MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=4,
                                label="Max new tokens per row", elem_id="batching-max-new-tokens")
            sizes = gr.CheckboxGroup([(str(b), b) for b in BATCH_SIZES], value=list(BATCH_SIZES),
                                     label="Batch sizes B", elem_id="batching-sizes")
            length = gr.Radio([(label, key) for label, key in PROMPT_LENGTHS], value=SHORT, label="Prompts",
                              elem_id="batching-prompt-length")
            predicted = gr.Checkbox(True, label="Predicted curve (times T(B, 1) and T(B, k+1) first)",
                                    elem_id="batching-predicted")
            with gr.Row():
                measure_btn = gr.Button("Measure", variant="primary", elem_id="batching-measure", scale=2,
                                        min_width=100)  # with Stop beside it in the 300 px column
                stop_btn = gr.Button("Stop", variant="stop", elem_id="batching-stop", scale=1, min_width=80)
        with gr.Column(scale=3, min_width=600, elem_id="batching-results"):
            status = gr.HTML(sweep_plan_status(DEFAULT_DRAFTER, DEFAULT_K, DEFAULT_MAX_NEW_TOKENS, list(BATCH_SIZES), SHORT,
                                          True, target_box.value, ""), elem_id="batching-status")
            lesson = gr.HTML("", elem_id="batching-lesson", visible=False)  # shown with a sweep's lesson
            chart = gr.Plot(elem_id="batching-chart", show_label=False, visible=False)
            table = gr.Dataframe(empty_table(), label="Per batch size", interactive=False, elem_id="batching-table",
                                 elem_classes=["sv-wide-table", "sv-wrap-cells"], wrap=True)
            with gr.Row(elem_id="batching-downloads"):
                csv_file = gr.File(label="Results (CSV)", elem_id="batching-csv", interactive=False, visible=False)
                json_file = gr.File(label="Results, settings, versions and device (JSON)", elem_id="batching-json",
                                    interactive=False, visible=False)
            gr.HTML(SWEEP_NOTE, elem_id="batching-definitions")
    form = {"drafter": drafter, "k": k, "max_new_tokens": max_new, "batch_sizes": sizes, "prompt_length": length,
            "predicted": predicted, "target": target_box, "draft_model": draft_model}  # SweepForm's fields
    sweeping = measure_btn.click(on_measure, inputs_kwargs=form,
                                 outputs=[status, lesson, chart, table, csv_file, json_file],
                                 api_name="batching_measure", api_description=API["batching_measure"],
                                 show_progress="full", show_progress_on=[status],
                                 concurrency_limit=4, concurrency_id="arena",
                                 js=settled_inputs_js(list(form.values()), sent_js(SWEEP_MARK)))
    mark_while_sent(sweeping, SWEEP_MARK)  # Stop then also reaches a sweep still in Gradio's queue
    stop_btn.click(stop_sweep, inputs=[status], js=stop_sent_js(SWEEP_MARK, 1), outputs=[status], queue=False,
                   api_name="batching_stop", api_description=API["batching_stop"])
    left = [tell_when_clamped(max_new, status, "Max new tokens per row"), tell_when_clamped(k, status, "Draft length k")]
    return {**form, "status": status, "left": left}


def _check_section(target_box: gr.Textbox, draft_model: gr.Textbox) -> dict:
    """The sampling-law check part: its controls, results and events. Returns its status and the inputs its plan
    reads (name -> component), for its plan (:func:`wire_plans`)."""
    gr.HTML("<h3 class='batching-heading'>Does speculative sampling keep the target's distribution?</h3>")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="batching-check-controls"):
            prompt = gr.Textbox(CHECK_PROMPT, label="Prompt", lines=2, elem_id="batching-check-prompt")
            temperature = gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature",
                                    elem_id="batching-check-temperature")
            check_drafter = gr.Dropdown(drafter_menu(), value=DEFAULT_DRAFTER, label="Drafter",
                                        elem_id="batching-check-drafter")
            from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

            add_about(check_drafter, "batching-check-drafter-about", DEFAULT_DRAFTER)
            n = gr.Number(CHECK_N, label=f"{N_FIELD.name} ({MIN_N}–{MAX_N})", info=N_INFO,
                          elem_id="batching-check-n")
            broken = gr.Checkbox(False, label="Accept every draft (a broken verifier)", elem_id="batching-check-broken")
            with gr.Row():
                check_btn = gr.Button("Check", variant="primary", elem_id="batching-check", scale=2, min_width=100)
                check_stop = gr.Button("Stop", variant="stop", elem_id="batching-check-stop", scale=1,
                                       min_width=80)
        with gr.Column(scale=3, min_width=600, elem_id="batching-check-results"):
            check_status = gr.HTML(check_plan_status(target_box.value, CHECK_PROMPT, CHECK_N),
                                   elem_id="batching-check-status")
            check_lesson_box = gr.HTML("", elem_id="batching-check-lesson", visible=False)  # shown with a result
            check_chart = gr.Plot(elem_id="batching-check-chart", show_label=False, visible=False)
            stats = gr.HTML("", elem_id="batching-check-stats", visible=False)
            gr.HTML(CHECK_NOTE, elem_id="batching-check-note")
    form = {"prompt": prompt, "temperature": temperature, "drafter": check_drafter, "n": n, "broken": broken,
            "target": target_box, "draft_model": draft_model}  # CheckForm's fields
    checking = check_btn.click(on_check, inputs_kwargs=form,
                               outputs=[check_status, check_lesson_box, check_chart, stats], api_name="batching_check",
                               api_description=API["batching_check"], show_progress="full",
                               show_progress_on=[check_status], concurrency_limit=4, concurrency_id="arena",
                               js=settled_inputs_js(list(form.values()), sent_js(CHECK_MARK)))
    mark_while_sent(checking, CHECK_MARK)
    check_stop.click(stop_check, inputs=[check_status], js=stop_sent_js(CHECK_MARK, 1), outputs=[check_status],
                     queue=False, api_name="batching_check_stop", api_description=API["batching_check_stop"])
    tell_when_clamped(temperature, check_status, "Temperature")
    from app.messages import tell_when_invalid  # the N box checked when left, with the Run path's name and limits
    left = tell_when_invalid(n, check_status, N_FIELD, keep=True)  # an emptied box keeps its earlier N
    return {"status": check_status, "target": target_box, "prompt": prompt, "n": n, "left": [left]}
