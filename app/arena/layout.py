"""The Arena tab's layout and wiring: :func:`build_tab` lays out the controls (drafters, k, prompts, max new
tokens, Run and Stop, and the target, draft model and sampling in an accordion) and the results (status, tables,
charts, downloads, the definitions), and wires their events."""

from __future__ import annotations

import gradio as gr

from app import render
from app.api_words import API
from app.arena import matching
from app.arena.handlers import clicked, preset_chosen, source_changed, stop
from app.arena.settings import (DEFAULT_DRAFTERS, DEFAULT_KS, DEFAULT_MAX_NEW_TOKENS, DEFAULT_PROMPT, K_CHOICES,
                                MAX_NEW_TOKENS, MAX_NEW_TOKENS_NAME, MIN_NEW_TOKENS, RUN_INPUTS, SOURCES, SUITE_INFO,
                                categories, category_choices, drafter_choices, suite)
from app.arena.tables import PROMPT_COLUMNS, SUMMARY_COLUMNS, TIMING_COLUMNS, card_css, empty_table
from app.arena.verdicts import IMPOSSIBLE_MARGIN, NOISY_DRIFT
from app.drafter_about import add_about
from app.inputs import EXIT_LAYER, MIN_P, REPETITION_PENALTY, SEED, parse_exit_layer
from app.messages import enter_commits_js, settled_inputs_js, tell_when_clamped, tell_when_invalid
from app.stop_marks import mark_while_sent, set_mark, stop_sent_js
from specviz.runtime.presets import PRESETS


NOTE = (
    "<div class='arena-note'><p><b>In short.</b> Each drafter × k runs once per prompt, between two runs of standard "
    "decoding; its <b>speedup</b> is its rate over theirs, and the range after it spans every standard run of the "
    "prompt. A range wholly above 1 is faster, wholly below slower; one across 1 is too noisy to tell. <b>Baseline "
    "drift</b> (fastest ÷ slowest standard run − 1) spans the runs its brackets name. Below: each figure "
    "defined; the CSV and JSON hold every prompt.</p>"
    "<details><summary><b>How ratios are formed</b></summary><p>Per prompt, each drafter × k runs once, with "
    "standard decoding timed before the first method, between every two and after the last (standard, method, "
    "standard, method, …, standard; the methods' order rotates from prompt to prompt), every run on its own clock. A "
    "method's <b>speedup</b> divides its rate by the pooled rate of the two standard runs right beside it, so a slow "
    "moment of the machine weighs on both sides of one ratio instead of on every method of the prompt. <b>Baseline "
    "drift</b> = how much those two standard runs differ (fastest ÷ slowest − 1); above 15% the machine's speed "
    "changed during the measurement (“unsteady”). <b>Speedup, decode</b> (after the prefill) is the headline; "
    "<b>speedup, end to end</b> includes the prefill. The standard row pools all its runs (Runs) and is the "
    "reference (1 by definition); its baseline drift is how far all those runs lie apart (“all 3 standard runs”, "
    "so it reads at least as high as any method's of the prompt), read with the same 15% line. Category and “all” "
    "rows pool their prompts' counts and times; their drift is "
    "their worst prompt's (“worst prompt”).</p></details>"
    "<details><summary><b>The speedup's range and its words</b></summary><p><b>The range after each speedup</b>, "
    "e.g. 1.23× faster (1.15–1.31×), is its spread (the chart's error bars): the method's rate over each standard "
    "run of its prompt taken alone, not only the two beside it, lowest and highest, widened by how far one standard "
    "run lies from their pooled rate, since the method runs once and its own run may be off as much; a category or "
    "“all” row gives the lowest and highest over its prompts. Where no pair of standard runs gives a spread, the "
    "cell says “one run: no spread”. The words follow the rule of every tab: a range wholly above 1 is faster, "
    "wholly below slower, however wide; one that spans 1.00 is too noisy to tell (about the same when narrow and the "
    f"baselines steady), its number still given; a decoding speedup more than {IMPOSSIBLE_MARGIN:.0%} above its "
    "tokens per pass (what they allow, with a margin for timing noise), or baselines more than "
    f"{NOISY_DRIFT:.0%} apart with no spread to read, is “no reading”: no speedup is claimed, end to end neither "
    "(the ratio and why in brackets). It names the cause the row's timings support: beside baselines that agree, "
    "a run too short to time (its tokens and passes are given; a longer run or more prompts would read it); beside "
    "baselines that drifted apart, the machine's speed changed during the run (run again). A range on one side of "
    "1 holds however far the baselines drifted.</p></details>"
    "<details><summary><b>Tokens/pass, acceptance, α and the predictions</b></summary><p><b>Tokens per run</b> = tokens ÷ the runs "
    "pooled in the row (Runs), alike on every row. <b>Tokens/pass</b> counts "
    "the bonus token, with its 95% interval over the method's passes (the bootstrap of the mean of the tokens each "
    "pass emitted, as the Live tab's card; a category or “all” row over all its prompts' passes; standard decoding "
    "makes one per pass, exactly); <b>acceptance</b> = accepted ÷ drafted; <b>α</b> = accepted ÷ (accepted + "
    "rejections), the per-token acceptance of the formulas. <b>Predicted, paper</b> = (1 − α<sup>m+1</sup>) / "
    "((1 − α)(c·m + 1)), which assumes a verification costs one target step; <b>predicted, measured costs</b> = "
    "E[tokens/pass] × T_step / (T_verify + T_draft). m = drafted tokens per pass, c = drafting ms per drafted token "
    "÷ T_step. The gap between the two predictions is the verification overhead. The predictions model decoding "
    "after the prefill, as <b>speedup, decode</b> does.</p></details>"
    "<details><summary><b>The other figures' ranges</b></summary><p><b>The range after tokens/s, T_step, "
    "T_verify, T_draft, c and the predictions</b> is their spread too: tokens/s from the slowest to the fastest run "
    "pooled in the row (a method runs once per prompt, so its prompt row says “one run: no spread”); T_step from "
    "the standard runs beside the method taken alone (the standard row: all its runs); T_verify and T_draft (means "
    "per pass) the 95% bootstrap interval of that mean over the method's passes (“one pass: no spread” with a "
    "single pass; a few slow passes stretch it upwards); c computed from the ends of those spreads that push it "
    "furthest each way, and the predictions from those and from α's 95% interval (the one its α cell shows: a "
    "prediction rises with α, so its low end takes α's low end), which over a few passes is often the wider part "
    "(the predictions' markers carry it as error bars). A category or “all” row spans its prompts.</p></details>"
    "</div>"
)
"""The Arena's definitions under its results: a short lead, then each part folded (a trial found the whole, about 400
words, too much to read beside the tables)."""


ARENA_MARK = "svArenaRunning"  # the page sent a run that has not ended (app.stop_marks)
CLEAR_TOASTS_JS = ("(...inputs) => { " + set_mark(ARENA_MARK) + "document.querySelectorAll('[data-testid=\"toast-close\"]').forEach((close) => "
                   "close.click()); const status = document.getElementById('arena-status'); "
                   "const box = status && status.getBoundingClientRect(); "
                   "if (box && (box.top < 0 || box.top > window.innerHeight - 40)) "
                   "status.scrollIntoView({block: 'start', behavior: 'smooth'}); return inputs; }")
"""Run arena's client side, before the run is sent: close every toast on the page (their own close buttons), so
that one left from earlier (Gradio's own: the app's sentences go to the status line, never to a toast) neither stays
beside this run nor comes back grouped with a later one ("Warning (2)"). The status line, where the run's progress
is said, is scrolled into sight when it is out of it (a trial at 1400 x 900 pressed Run arena and saw nothing change). It also marks the page as having sent a
run (:data:`ARENA_MARK`, for a Stop while the run waits in Gradio's queue). Returns the inputs unchanged."""

ENTER_COMMITS_JS = enter_commits_js("#arena-controls")
"""On page load: Enter in a number box of the Arena's controls commits it as leaving the box does
(:func:`app.messages.enter_commits_js`): a slider's box then clamps a number typed outside its range and
:func:`app.messages.tell_when_clamped` says so at once, and a number box gets its check
(:func:`app.messages.tell_when_invalid`). Without it Enter did nothing: the box kept showing e.g. 3 below the
slider's 8, unannounced until the box was left."""


TOKENS_HINT = ("The time grows with it: the status line at the top of the results estimates it for your choices "
               "(the suite: about 9x a category)")
"""The max-new-tokens slider's hint: the status line's estimate, not a promise of minutes (a busy CPU took hours).
Where that line is, in words true at every width: the results' first line, right of the controls at 1400 px, under
them on a phone (it said "the status below", which a 1400 px page shows at the top right)."""


def _preset_picker(target_box: gr.Textbox, draft_model: gr.Textbox, drafters: gr.CheckboxGroup) -> None:
    """The real-pair menu (:func:`preset_chosen` fills the models and ticks the 'Draft model' drafter)."""
    box = gr.Dropdown([("—", "")] + [(p.label, p.key) for p in PRESETS], value="",
                      label="Or a real pair (needs a network)", elem_id="arena-preset",
                      info="Fills the target and draft model and ticks the 'Draft model' drafter")
    box.change(preset_chosen, inputs=[box, drafters], outputs=[target_box, draft_model, drafters], queue=False,
               api_visibility="private")


CARD_CLASSES = ["sv-wide-table", "sv-wrap-cells", "sv-cards"]
"""The Arena tables' classes (``assets/style.css``): headers that wrap between words, cells as narrow as their longest
word, and on a phone (below 640 px) a card of labelled cells for each row."""
TABLE_COLUMNS = {"arena-table": SUMMARY_COLUMNS, "arena-timings": TIMING_COLUMNS, "arena-prompts": PROMPT_COLUMNS}
"""Each Arena table's elem_id and its columns."""
PHONE_CSS = "".join(card_css(elem_id, columns) for elem_id, columns in TABLE_COLUMNS.items())
"""The phone labels of the Arena's tables (:func:`app.arena.tables.card_css`), given to ``demo.launch`` with the
stylesheet (:func:`app.launch_options`)."""


def _results_column() -> tuple:
    """The results column's components: status, summary table, timings table, per-prompt table, charts, predictions,
    CSV, JSON."""
    status = gr.HTML(render.status_html(matching.READY, "info"),
                     elem_id="arena-status")
    summary = gr.Dataframe(empty_table(), label="Per category, and all prompts pooled", interactive=False,
                           elem_id="arena-table", elem_classes=CARD_CLASSES, max_height=1000,
                           wrap=True)  # a value and its spread may sit on two lines; 420 px hid a third method's
    # rows below the table's fold with no cue (a trial): tall enough for 4 methods x a category and the pooled rows
    timings = gr.Dataframe(empty_table(TIMING_COLUMNS), label="Rates, predictions and the timings behind them",
                           interactive=False, elem_id="arena-timings", elem_classes=CARD_CLASSES,
                           max_height=1000, wrap=True)  # the summary's other half: each fits a 1400 px page
    charts = gr.Plot(elem_id="arena-charts", show_label=False, visible=False)
    predictions = gr.Plot(elem_id="arena-predictions", show_label=False, visible=False)
    with gr.Row(elem_id="arena-downloads"):
        csv_file = gr.File(label="Results (CSV)", elem_id="arena-csv", interactive=False, visible=False)
        json_file = gr.File(label="Results, settings, versions and device (JSON)", elem_id="arena-json",
                            interactive=False, visible=False)
    with gr.Accordion("Per prompt", open=False, elem_id="arena-per-prompt"):
        per_prompt = gr.Dataframe(empty_table(PROMPT_COLUMNS), interactive=False, elem_id="arena-prompts",
                                  elem_classes=CARD_CLASSES, max_height=480, wrap=True,
                                  show_label=False)
    gr.HTML(NOTE, elem_id="arena-definitions")
    return status, summary, timings, per_prompt, charts, predictions, csv_file, json_file


def _drafter_list() -> tuple[gr.CheckboxGroup, gr.Button]:
    """The drafters to race, with what each ticked one is and costs under the list (:func:`app.drafter_about.add_about`),
    and under that the "Poorly vs better matched draft" button (:mod:`app.arena.matching`; :func:`build_tab` wires
    it)."""
    drafters = gr.CheckboxGroup(drafter_choices(), value=list(DEFAULT_DRAFTERS), label="Drafters",
                                elem_id="arena-drafters", info="Each runs against the same standard-decoding baseline")
    add_about(drafters, "arena-drafters-about", list(DEFAULT_DRAFTERS))
    return drafters, gr.Button(matching.LABEL, size="sm", elem_id="arena-matching")


def _settings_accordion(target: str, drafters: gr.CheckboxGroup) -> tuple:
    """The "Target, draft model and sampling" accordion; returns (target, draft model, early-exit layer,
    temperature, seed, repetition penalty, min-p, chat template) components."""
    with gr.Accordion("Target, draft model and sampling", open=False, elem_id="arena-settings"):
        target_box = gr.Textbox(target, label="Target model", elem_id="arena-target",
                                info="'embedded', a hub id or a local folder")
        draft_model = gr.Textbox("", label="Draft model (for the 'Draft model' drafter)",
                                 elem_id="arena-draft-model", placeholder="hub id or local folder")
        _preset_picker(target_box, draft_model, drafters)
        exit_layer = gr.Number(0, label="Early-exit layer (0 = half the target's layers)",
                               elem_id="arena-exit-layer")
        temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature", elem_id="arena-temperature",
                                info="0 = greedy: outputs are checked identical")  # one label line, as Live's
        seed = gr.Number(0, label="Seed", elem_id="arena-seed")
        with gr.Row():  # applied to the target and the draft alike, and to the baseline
            repetition_penalty = gr.Number(1.0, label="Repetition penalty (1 = off)",
                                           elem_id="arena-repetition-penalty")
            min_p = gr.Number(0.0, label="Min-p (0 = off; sampling only)", elem_id="arena-min-p")
        chat_template = gr.Checkbox(True, label="Use the chat template", elem_id="arena-chat-template")
    return target_box, draft_model, exit_layer, temperature, seed, repetition_penalty, min_p, chat_template


def build_tab(target: str = "embedded") -> None:
    """Lay out the Arena tab inside the current ``gr.Tab`` and wire its events (the tab's own ``select`` among
    them: it re-says the estimate, :func:`app.arena.matching.wire_refresh`; built outside a tab, none)."""
    tab = gr.context.Context.block if isinstance(gr.context.Context.block, gr.Tab) else None
    cats = categories()
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="arena-controls"):
            drafters, matching_btn = _drafter_list()
            ks = gr.CheckboxGroup(list(K_CHOICES), value=list(DEFAULT_KS), label="Draft length k",
                                  elem_id="arena-ks",
                                  info="auto = cost-aware k, as in the Live tab: chosen each pass from the measured "
                                  "pass cost and acceptance (0 when no k pays), starting at 4")
            source = gr.Radio([(label, key) for label, key in SOURCES], value="category", label="Prompts",
                              elem_id="arena-source", info=SUITE_INFO.format(n=len(suite()), c=len(cats)))
            prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=3, max_lines=10, visible=False,
                                elem_id="arena-prompt", placeholder="Type a prompt…")
            category = gr.Dropdown(category_choices(), value="code-edit" if "code-edit" in cats else cats[0],
                                   label="Category", elem_id="arena-category")
            max_new_tokens = gr.Slider(MIN_NEW_TOKENS, MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=8,
                                       label="Max new tokens per run", elem_id="arena-max-new-tokens",
                                       info=TOKENS_HINT)
            with gr.Row():
                run_btn = gr.Button("Run arena", variant="primary", elem_id="arena-run", scale=2,
                                    min_width=100)  # with Stop beside it in the 300 px column
                stop_btn = gr.Button("Stop", variant="stop", elem_id="arena-stop", scale=1, min_width=80)
            (target_box, draft_model, exit_layer, temperature, seed, repetition_penalty, min_p,
             chat_template) = _settings_accordion(target, drafters)
        with gr.Column(scale=3, min_width=600, elem_id="arena-results"):
            status, summary, timings, per_prompt, charts, predictions, csv_file, json_file = _results_column()
    outputs = [status, summary, timings, per_prompt, charts, predictions, csv_file, json_file]
    inputs = [drafters, ks, source, prompt, category, max_new_tokens, target_box, draft_model, exit_layer,
              temperature, seed, chat_template, repetition_penalty, min_p]
    # Stop only flags the run: it ends before its next target pass and still shows (and offers for download)
    # the prompts that finished. The status says the run's progress itself: Gradio's full overlay, with its own
    # progress line and timer, covered it (a trial; the minimal one still drew its bar over it), so none is shown:
    # the handler's first message ("Starting: ...") comes at once
    running = run_btn.click(clicked, inputs_kwargs=dict(zip(RUN_INPUTS, inputs, strict=True)), outputs=outputs,
                            api_name="arena", api_description=API["arena"], show_progress="hidden",
                            show_progress_on=[status], concurrency_limit=4, concurrency_id="arena",
                            js=settled_inputs_js(inputs, CLEAR_TOASTS_JS))  # a box left by this press: its value
    mark_while_sent(running, ARENA_MARK)
    gr.context.Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    # the status twice: the shown line (kept under "Nothing is running.") and, in its place, the page's mark
    stop_btn.click(stop, inputs=[status, status], js=stop_sent_js(ARENA_MARK, 2), outputs=[status], queue=False,
                   api_name="arena_stop", api_description=API["arena_stop"])
    tell_when_clamped(max_new_tokens, status, MAX_NEW_TOKENS_NAME)
    tell_when_clamped(temperature, status, "Temperature")
    tell_when_invalid(exit_layer, status, EXIT_LAYER, parse_exit_layer, target=target_box)  # its layers, once loaded
    tell_when_invalid(seed, status, SEED)
    tell_when_invalid(repetition_penalty, status, REPETITION_PENALTY)
    tell_when_invalid(min_p, status, MIN_P)
    matching.wire(matching_btn, [drafters, ks, source, category, temperature, status],  # PRESET_OUTPUTS' order
                  [max_new_tokens, target_box, prompt])
    matching.wire_refresh({"status": status, "drafters": drafters, "ks": ks, "source": source, "prompt": prompt,
                           "category": category, "max_new_tokens": max_new_tokens, "target": target_box}, tab)
    source.change(source_changed, inputs=[source], outputs=[prompt, category], queue=False,
                  api_visibility="private")
