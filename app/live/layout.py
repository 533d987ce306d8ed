"""The Live tab's layout (:func:`build_tab`, inside the current ``gr.Tab``: the prompt, the controls, the results,
the examples) and its wiring: Generate (:func:`app.live.run.generate`, sent the controls named in
:data:`app.live.defaults.INPUTS` as one mapping), Stop, the controls that follow each other, numbers typed out of a
slider's range, "Output only" (a class on <body>, :data:`OUTPUT_ONLY_JS`) and the derived default of max new
tokens on page load."""

from __future__ import annotations

import json

import gradio as gr

from app import render
from app.api_words import API
from app.inputs import (EXIT_LAYER, FREQUENCY_PENALTY, GATED_DRAFTERS, HEAD_DRAFTERS, MAX_CANDIDATES,
                        MAX_CONFIDENCE, MAX_NEW_TOKENS_HINT, MAX_NGRAM, MAX_TREE_NODES, MAX_WINDOW, MIN_P, NO_REPEAT_NGRAM_SIZE,
                        PRESENCE_PENALTY, REPETITION_PENALTY, SEED, TOP_K, default_gate, parse_exit_layer,
                        parse_k_schedule)
from app.live.controls import (PRESET_CHOICES, drafter_changed, gate_chosen, k_chosen, lookahead_k, preset_chosen,
                               stop_now, stop_run)
from app.costs import DEFAULT_TOKENS_RETRY_S, DEFAULT_TOKENS_TRIES
from app.live.default_tokens import wire_default_tokens
from app.live.defaults import DEFAULTS, INPUTS, example_labels, load_examples
from app.live.hint import plan_after, wire_tokens_hint
from app.live.prompt_check import READY, wire_prompt_check
from app.live.outputs import BASE_PLACEHOLDER, SPEC_PLACEHOLDER, progress_html
from app.live.run import generate
from app.messages import enter_commits_js, tell_when_clamped, tell_when_invalid
from app.weights_setting import DEFAULT_WEIGHTS, decided_weights, default_reason, operator_weights
from specviz.core.engine import MAX_K
from specviz.drafters.registry import choices
from specviz.runtime.policy import current_policy
from specviz.runtime.weights import FORMATS


def build_tab(history: gr.State, d: dict) -> None:
    """Lay out the Live tab inside the current ``gr.Tab`` and wire its events. ``history`` is the session's run
    history (gr.State of :class:`app.records.RunSummary` rows, also read by the "Why it works" tab); ``d`` holds
    every key of :data:`DEFAULTS`. The
    drafter menu lists the registry's drafters as they are now (:func:`specviz.drafters.registry.choices`)."""
    ui: dict[str, gr.components.Component] = {}  # elem_id-like name -> component
    # four columns in reading order: the prompt, the controls, results, examples. The stylesheet (.sv-main) shows
    # the examples right under the prompt (the controls under them) beside the results on a wide screen, so they
    # are in the first screen; on a phone the results come right after the controls, the examples last.
    with gr.Row(equal_height=False, elem_id="live-main", elem_classes=["sv-main"]):
        with gr.Column(scale=1, min_width=300, elem_id="prompt-column", elem_classes=["sv-top"]):
            _prompt_controls(ui, d)
        with gr.Column(scale=1, min_width=300, elem_id="controls", elem_classes=["sv-side"]):
            _drafter_controls(ui, d)
            _run_controls(ui, d)
        with gr.Column(scale=3, min_width=300, elem_id="results", elem_classes=["sv-results"]):
            _results(ui)
        with gr.Column(scale=1, min_width=300, elem_id="examples-column", elem_classes=["sv-side2"]):
            _examples(ui)
    _wire(ui, history, d)


def _prompt_controls(ui: dict, d: dict) -> None:
    """The prompt box and the Generate / Stop buttons."""
    ui["prompt"] = gr.Textbox(d["prompt"], label="Prompt", lines=5, max_lines=8, elem_id="prompt",
                              placeholder="Ask something, or pick an example below…")
    with gr.Row():
        ui["generate"] = gr.Button("Generate", variant="primary", elem_id="generate", scale=2,
                                   min_width=100)  # with Stop beside it in the 300 px column
        ui["stop"] = gr.Button("Stop", variant="stop", elem_id="stop", scale=1, min_width=80)
    ui["progress"] = gr.HTML("", elem_id="run-progress")  # the status's compact copy, shown on a phone (style.css)


def _drafter_controls(ui: dict, d: dict) -> None:
    """The drafter menu (read from the registry now) and what each drafter takes: a draft model, an exit layer,
    the head drafters' tree and lookup first, the confidence gate (:data:`GATED_DRAFTERS`; the drafter's own default,
    :func:`gate_value`) and k (with adaptive k)."""
    gr.HTML('<a class="sv-jump" href="#prompt-column">↑ Prompt and Generate</a>', elem_id="jump-generate",
            elem_classes=["sv-one-column"])
    ui["drafter"] = gr.Dropdown([(c.label, c.key) for c in choices()], value=d["drafter"], label="Drafter",
                                elem_id="drafter", info="What proposes the tokens the target checks")
    from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

    ui["drafter_about"] = add_about(ui["drafter"], "drafter-about", d["drafter"])
    ui["draft_model"] = gr.Textbox(d["draft_model"], label="Draft model", elem_id="draft-model",
                                   placeholder="hub id (org/name) or local folder; another tokenizer is re-tokenized",
                                   visible=d["drafter"] == "model")
    ui["exit_layer"] = gr.Number(d["exit_layer"], label="Early-exit layer (0 = half the target's layers)",
                                 elem_id="exit-layer",
                                 info="Untrained, the first layers agree with the full model on few tokens "
                                      "(SmolLM2-135M: 46% at layer 28/30, under 15% below 20): expect a "
                                      "low acceptance rate; the idea shows, the speedup does not.",
                                 visible=d["drafter"] == "early-exit")
    heads = d["drafter"] in HEAD_DRAFTERS
    ui["tree_nodes"] = gr.Slider(0, MAX_TREE_NODES, value=d["tree_nodes"], step=1, label="Tree nodes (0 = a chain)",
                                 elem_id="tree-nodes",
                                 info="EAGLE / Medusa: draft a tree of candidates (depth ≤ k) and verify it in one "
                                      "target pass. Greedy only: at temperature > 0 the drafter drafts a chain.",
                                 visible=heads, interactive=heads)
    gated = d["drafter"] in GATED_DRAFTERS
    ui["confidence"] = gr.Slider(0, MAX_CONFIDENCE, value=gate_value(d), step=0.05,
                                 label="Confidence gate (0 = always k)", elem_id="confidence", info=GATE_INFO,
                                 visible=gated, interactive=gated)
    ui["lookup"] = gr.Checkbox(d["lookup"], label="Lookup first (copy repeated text, else the head)",
                               elem_id="lookup-first",
                               info="EAGLE / Medusa: each pass, n-gram lookup looks for the text's last 2-3 tokens "
                                    "earlier on and, if found, the target checks what followed them (such passes "
                                    "are marked “copy”); the head drafts only otherwise.",
                               visible=heads, interactive=heads)
    _lookahead_controls(ui, d)
    own_k = d["drafter"] not in ("none", "lookahead")  # lookahead's k is N-1
    ui["k"] = gr.Slider(1, MAX_K, value=d["k"] if d["drafter"] != "lookahead" else d["ngram"] - 1, step=1,
                        label="Draft length k", elem_id="draft-length", interactive=own_k)
    ui["adaptive_k"] = gr.Radio([("fixed", "fixed"), ("adaptive", "heuristic"), ("auto (cost-aware)", "auto")],
                                value=parse_k_schedule(d["adaptive_k"]), label="Draft length schedule",
                                elem_id="k-schedule", interactive=d["drafter"] != "none",
                                info="adaptive: +1 after a fully accepted pass, −1 after a rejection. auto: each "
                                     "pass's k, 0 included, chosen from this run's measured costs and acceptance "
                                     "(lookahead: a full pass or a plain step).")


GATE_INFO = ("Stop drafting where the draft's own probability of the whole guess so far drops below this: an "
             "unsure pass drafts fewer than k tokens, or none. Default 0.15 for EAGLE / Medusa, 0.2 for the "
             "distilled draft (faster on a CPU), 0 for a draft model. The output stays exact.")
"""The confidence gate's note under its label (:func:`app.inputs.default_gate` gives the defaults it names)."""


def gate_value(d: dict) -> float:
    """The confidence gate slider's first value: ``d["confidence"]`` when given (an override of
    :data:`DEFAULTS`), else the page's drafter's own default (:func:`app.inputs.default_gate`), or the heads' 0.15
    for a drafter without a gate (the slider is hidden then; API clients that leave the gate out send it)."""
    if d.get("confidence") is not None:
        return float(d["confidence"])
    return default_gate(d["drafter"] if d["drafter"] in GATED_DRAFTERS else HEAD_DRAFTERS[0])


def _lookahead_controls(ui: dict, d: dict) -> None:
    """Lookahead decoding's window W, n-gram size N and candidates G (shown for that drafter only)."""
    shown = d["drafter"] == "lookahead"
    ui["window"] = gr.Slider(1, MAX_WINDOW, value=d["window"], step=1, label="Window W (Jacobi positions)",
                             elem_id="lookahead-window", visible=shown, interactive=shown,
                             info="Lookahead: the target also guesses W positions ahead by Jacobi iteration in "
                                  "every forward; its guesses feed an n-gram pool. No draft model.")
    ui["ngram"] = gr.Slider(2, MAX_NGRAM, value=d["ngram"], step=1, label="N-gram size N (k = N−1)",
                            elem_id="lookahead-ngram", visible=shown, interactive=shown,
                            info="The window keeps N−1 levels; a candidate is N−1 tokens after the last one.")
    ui["candidates"] = gr.Slider(1, MAX_CANDIDATES, value=d["candidates"], step=1, label="Candidates G per pass",
                                 elem_id="lookahead-candidates", visible=shown, interactive=shown,
                                 info="Pool n-grams verified in the same forward (one when sampling). A forward "
                                      "reads 1 + W(N−1) + G(N−1) tokens: on a CPU that costs more than one step.")


def _run_controls(ui: dict, d: dict) -> None:
    """Max new tokens (up to the operator's cap, read now), the target, sampling and stopping."""
    max_tokens = current_policy().max_new_tokens  # SPECVIZ_MAX_NEW_TOKENS
    ui["max_new_tokens"] = gr.Slider(1, max_tokens, value=min(d["max_new_tokens"], max_tokens), step=1,
                                     label="Max new tokens", elem_id="max-new-tokens")
    ui["target"] = gr.Textbox(d["target"], label="Target model", elem_id="target",
                              info="'embedded' (SmolLM2-135M-Instruct, shipped), a hub id or a local folder")
    ui["preset"] = gr.Dropdown(PRESET_CHOICES, value="", label="Or a real pair (needs a network)", elem_id="preset",
                               info="Fills the target and its draft model of the same family, downloaded from the "
                                    "Hub on the first run (a GPU is advised; gated models need HF_TOKEN)")
    _weights_control(ui, d)
    with gr.Accordion("Sampling and stopping", open=False, elem_id="sampling"):
        # the label short enough for one line beside its number box in the 330 px column (1400 px) and on a
        # phone: "Temperature (0 = greedy)" wrapped to two lines there; the detail goes in the info line
        ui["temperature"] = gr.Slider(0, 2, value=d["temperature"], step=0.05, elem_id="temperature",
                                      label="Temperature", info="0 = greedy; above 0 both runs sample")
        with gr.Row():
            ui["top_p"] = gr.Slider(0.05, 1, value=d["top_p"], step=0.05, label="Top-p (1 = off)", elem_id="top-p")
            # no minimum= or precision= on number boxes: Gradio would refuse a negative number in a popup, or
            # round a typed 2.5, before the handler runs; the handler says what is wrong in the status line
            ui["top_k"] = gr.Number(d["top_k"], label="Top-k (0 = off)", elem_id="top-k")
        ui["seed"] = gr.Number(d["seed"], label="Seed", elem_id="seed")
        ui["stop_strings"] = gr.Textbox(d["stop_strings"], label="Stop strings", elem_id="stop-strings",
                                        placeholder="comma- or newline-separated; \\n for a newline")
        ui["chat_template"] = gr.Checkbox(d["chat_template"], label="Use the chat template", elem_id="chat-template")
        _processor_controls(ui, d)


WEIGHTS_NOTE = ("Fewer bytes read per step, faster steps. int8 and int4 change the model's numbers: the text can "
                "differ from float32's, but both runs here still match each other.")
"""The note of the "Weights" control: what a format trades (docs/weights.md)."""


def _weights_control(ui: dict, d: dict) -> None:
    """The target's weight format (float32, bfloat16, int8, int4; by default the operator's ``SPECVIZ_WEIGHTS``, else
    the format the start-up measured fastest on this CPU: :func:`app.weights_setting.operator_weights`, read on each
    page load, so a page opened after the measurement shows it; a page opened before it is switched to it once it
    is decided, unless the visitor chose a format or sent a run: :func:`retry_weights`, :data:`WEIGHTS_APPLY_JS`),
    :data:`WEIGHTS_NOTE` under its label as the other controls' notes are."""
    ui["weights"] = gr.Radio(list(FORMATS), value=d.get("weights") or operator_weights, label="Weights",
                             elem_id="weights", info=WEIGHTS_NOTE)
    if not d.get("weights"):  # the default is the measured one: it and its reason, once known (a page opened
        _wire_weights_default(ui["weights"])  # during the start-up asks again with a timer, as max new tokens does)


WEIGHTS_APPLY_JS = """(offered, shown) => {
  if (!offered) return undefined;
  const keep = window.svWeightsKept || window.svTokensKept || offered.value == null || shown !== offered.fallback;
  return keep ? {__type__: 'update', info: offered.info}
              : {__type__: 'update', value: offered.value, info: offered.info};
}"""
"""The browser's step after the server offered the Weights default (:func:`offer_weights`; ``shown``: the radio's
value now): its note always, its value only while the page sent no run (``window.svTokensKept``, set by Generate's
:func:`starting_js`), the visitor never clicked a format (``window.svWeightsKept``) and it still shows the
placeholder: a run reads the format the radio shows, so the radio must not change under a run sent before the
server's answer came (as max new tokens, :mod:`app.live.default_tokens`)."""


def _wire_weights_default(radio: gr.Radio) -> None:
    """The Weights radio's measured default on page load and on each tick of a retry timer, through a hidden
    holder (:func:`offer_weights`) that :data:`WEIGHTS_APPLY_JS` moves into the radio in the browser."""
    from gradio.context import Context

    held, chosen, tries = gr.JSON(None, visible=False, elem_id="weights-offered"), gr.State(False), gr.State(0)
    apply = dict(js=WEIGHTS_APPLY_JS, inputs=[held, radio], outputs=[radio], queue=False, show_progress="hidden",
                 api_visibility="private")
    quiet = dict(show_progress="hidden", api_visibility="private")
    radio.input(lambda: True, outputs=[chosen], queue=False, **quiet)  # the visitor chose a format: theirs stays
    radio.input(None, js="() => { window.svWeightsKept = true; }", queue=False, **quiet)
    Context.root_block.load(lambda shown, was: offer_weights(page_weights(shown, was)), inputs=[radio, chosen],
                            outputs=[held], queue=False, **quiet).then(None, **apply)
    timer = gr.Timer(DEFAULT_TOKENS_RETRY_S)

    def ticked(shown, was, count):
        update, running, count = retry_weights(shown, was, count)
        return offer_weights(update), running, count

    timer.tick(ticked, inputs=[radio, chosen, tries], outputs=[held, timer, tries], concurrency_limit=None,
               **quiet).then(None, **apply)


def offer_weights(update) -> dict | None:
    """The holder's value for a Weights update from :func:`page_weights` (a gr.update dict, or gr.skip()'s):
    {"value": the format or None, "info": the note, "fallback": the placeholder the page opened with}; None when
    there is nothing to say yet."""
    if not isinstance(update, dict) or "info" not in update:
        return None
    return {"value": update.get("value"), "info": update["info"], "fallback": DEFAULT_WEIGHTS}


def page_weights(shown: str | None, chosen: bool = False):
    """On page load and each tick of :func:`retry_weights`: once the default weight format is decided
    (:func:`app.weights_setting.decided_weights`), the Weights radio's note with its reason (:func:`weights_info`),
    and its value set to the default where it still shows the start-up's placeholder (float32, ``shown``) and the
    visitor has not chosen a format (``chosen``); no change while it is not decided."""
    decided = decided_weights()
    if decided is None:
        return gr.skip()
    if chosen or shown != DEFAULT_WEIGHTS or shown == decided:
        return gr.update(info=weights_info())
    return gr.update(value=decided, info=weights_info())


def retry_weights(shown: str | None, chosen: bool, tries: int):
    """A tick of the Weights radio's retry timer (every :data:`app.costs.DEFAULT_TOKENS_RETRY_S` s): a page opened
    before the start-up decided the default format gets it as soon as it is decided (:func:`page_weights`). Returns
    (radio update, timer update, tries + 1): the timer stops once the default is decided, once the visitor chose a
    format (theirs stays), or after :data:`app.costs.DEFAULT_TOKENS_TRIES` ticks."""
    tries = int(tries or 0) + 1
    if chosen:
        return gr.skip(), gr.Timer(active=False), tries
    update = page_weights(shown, chosen)
    done = "info" in update or tries >= DEFAULT_TOKENS_TRIES
    return update, gr.Timer(active=not done), tries


def weights_info(env: dict | None = None, target: str | None = None) -> str:
    """The Weights control's note: :data:`WEIGHTS_NOTE`, then why the default is the default
    (:func:`app.weights_setting.default_reason`: the start-up measurement's logged reason, or the operator's
    choice), where known."""
    why = default_reason(env, target)
    return f"{WEIGHTS_NOTE} {why}" if why else WEIGHTS_NOTE


def _processor_controls(ui: dict, d: dict) -> None:
    """The logits processors and stop token ids (as transformers' generate() names them), inside "Sampling and
    stopping": applied to the target and the draft alike at every draft position, and to the baseline."""
    gr.Markdown("Penalties, bans and stop ids apply to the target and the draft alike at every drafted position "
                "(and to the baseline), as transformers' generate() applies them.", elem_id="processors-note")
    with gr.Row():
        ui["repetition_penalty"] = gr.Number(d["repetition_penalty"], label="Repetition penalty (1 = off)",
                                             elem_id="repetition-penalty")
        ui["min_p"] = gr.Number(d["min_p"], label="Min-p (0 = off; sampling only)", elem_id="min-p")
    with gr.Row():
        ui["frequency_penalty"] = gr.Number(d["frequency_penalty"], label="Frequency penalty (0 = off)",
                                            elem_id="frequency-penalty")
        ui["presence_penalty"] = gr.Number(d["presence_penalty"], label="Presence penalty (0 = off)",
                                           elem_id="presence-penalty")
    ui["no_repeat_ngram_size"] = gr.Number(d["no_repeat_ngram_size"], label="No-repeat n-gram size (0 = off)",
                                           elem_id="no-repeat-ngram-size")
    ui["logit_bias"] = gr.Textbox(d["logit_bias"], label="Logit bias", elem_id="logit-bias",
                                  placeholder="id:bias, e.g. 13:2.5, 30:-inf (-inf bans the token)")
    with gr.Row():
        ui["banned_ids"] = gr.Textbox(d["banned_ids"], label="Banned token ids", elem_id="banned-ids",
                                      placeholder="e.g. 30, 31 (a bias of -inf)")
        ui["stop_token_ids"] = gr.Textbox(d["stop_token_ids"], label="Stop token ids", elem_id="stop-token-ids",
                                          placeholder="e.g. 2 (special tokens too)")


def _examples(ui: dict) -> None:
    """The example prompts (a click fills the prompt box)."""
    examples = load_examples()
    gr.Examples(examples=[[e["prompt"]] for e in examples], inputs=[ui["prompt"]], label="Example prompts",
                example_labels=example_labels(examples), examples_per_page=EXAMPLES_PER_PAGE, elem_id="examples")


EXAMPLES_PER_PAGE = 6  # one line each (style.css): the prompt above them and the drafter menu below them fit the
# first screen at 1400x900


def _results(ui: dict) -> None:
    """The status line, the legend, both panes, the draft tree and heads' table, stats, charts and history."""
    ui["status"] = gr.HTML(READY, elem_id="status")
    gr.HTML(render.legend_html(), elem_id="legend")
    ui["output_only"] = gr.Checkbox(False, label="Output only: the committed text, plain (no drafts, no colours)",
                                    elem_id="output-only", container=False)
    with gr.Row(equal_height=True, elem_id="panes"):  # side by side; stacked on a phone (style.css)
        ui["spec_out"] = gr.HTML(render.placeholder_html(SPEC_PLACEHOLDER),
                                 elem_id="spec-output", elem_classes=["out-pane"])
        ui["base_out"] = gr.HTML(render.placeholder_html(BASE_PLACEHOLDER),
                                 elem_id="baseline-output", elem_classes=["out-pane"])
    # on one column the settings come after all the results (style.css): a link to them under the panes, and one
    # back at their top (a trial at 400 px scrolled past 7,300 px of results to change the drafter); wide: hidden
    gr.HTML('<a class="sv-jump" href="#controls">Drafter and settings ↓</a>', elem_id="jump-settings",
            elem_classes=["sv-one-column"])
    with gr.Row(equal_height=False, elem_id="drafter-insight"):
        ui["tree_out"] = gr.HTML("", elem_id="draft-tree", visible=False, scale=3)
        ui["heads_out"] = gr.HTML("", elem_id="head-accuracy", visible=False, scale=1, min_width=280)
    ui["stats"] = gr.HTML("", elem_id="stats")
    ui["charts"] = gr.Plot(label="Charts", elem_id="charts", show_label=False, visible=False)
    ui["history_out"] = gr.HTML("", elem_id="history")


def _generate_clicked(request: gr.Request, history=None, **values):
    """Generate's handler: ``values`` are the controls of :data:`INPUTS` by name (Gradio's ``inputs_kwargs``, so the
    API page names each parameter), ``history`` the session's; they reach :func:`app.live.run.generate` as one
    mapping (Gradio fills ``request``)."""
    yield from generate(values, history, request)



def _wire(ui: dict, history: gr.State, d: dict | None = None) -> None:
    """Generate, Stop (which flags the run, so that it ends on its own within a tick, and shows what it made, then
    sends the whole view once the run has ended), the drafter menu's dependent controls, and
    :func:`_wire_helpers` (numbers typed out of a slider's range, output only, the derived default of max new
    tokens). Generate sends the controls of :data:`INPUTS` by name, then the history (the API's parameters, named,
    in the order positional clients send them); :func:`_generate_clicked` makes them one mapping."""
    outputs = [ui["spec_out"], ui["base_out"], ui["charts"], ui["stats"], ui["status"], ui["history_out"], history,
               ui["tree_out"], ui["heads_out"], ui["progress"], ui["max_new_tokens"]]  # the order of OUTPUTS
    # on the click itself, in the browser: the status and its copy under the button say the run was sent, before the
    # server's first message (on a busy server it took seconds; on a phone nothing in sight changed meanwhile). Wired
    # first: the browser runs a click's listeners in turn, each streamed one to its end
    ui["generate"].click(None, js=starting_js(), inputs=[ui["status"], ui["progress"]],
                         outputs=[ui["status"], ui["progress"]], queue=False, show_progress="hidden",
                         api_visibility="private")
    named = {name: ui[name] for name in INPUTS} | {"history": history}  # the API's order, as before
    run = ui["generate"].click(_generate_clicked, inputs_kwargs=named, outputs=outputs, api_name="generate",
                               api_description=API["generate"],
                               show_progress="minimal", show_progress_on=[ui["status"]], concurrency_limit=8,
                               concurrency_id="generate")  # a queued visitor sees "queue: 3/5"
    # the typed values go as sent: the run fits a fraction or an out-of-range k itself and says so in its own status
    # (app.inputs.whole_setting), so Generate needs no wait for a box's check (app.messages.settled_inputs_js)
    run.then(None, js=RUN_ENDED_JS, queue=False, show_progress="hidden", api_visibility="private")
    # Stop: first a light answer (the flag, the frozen view's status line), then the whole result once the run has
    # ended (queued, so that the history's change reaches the Why tab: from a queue-free event it did not, and a
    # stopped run was never marked there; a second trial). No cancels=[run]: the flag ends the run on its own within
    # a tick (app.device.TICK_S), and Gradio's hard cancel at times left a red "Error" on the status (a
    # trial: the server's empty closing message for a cancelled event crashed the browser's client, which then
    # marked the run's status tracker as failed)
    # (the status box only carries the page's "a run of mine was sent and has not ended" to stop_now: STOP_SENT_JS)
    first = ui["stop"].click(stop_now, inputs=[ui["status"]], js=STOP_SENT_JS, outputs=outputs, queue=False,
                             preprocess=False, show_progress="hidden", api_visibility="private")
    stopped = first.then(stop_run, inputs=[history], outputs=outputs, queue=True, show_progress="hidden",
                         concurrency_limit=None, api_name="stop", api_description=API["stop"])
    stopped.then(None, js=RUN_ENDED_JS, queue=False, show_progress="hidden", api_visibility="private")
    wire_tokens_hint(ui, [stopped])  # the max-new-tokens line follows Stop (a finished run's last message has it)
    # preprocess off on listeners a slider triggers: a number typed out of its range reaches them before the slider
    # clamps it, and Gradio's range check would answer with a server error; these handlers parse the raw number
    ui["ngram"].change(lookahead_k, inputs=[ui["ngram"], ui["drafter"]], outputs=[ui["k"]], queue=False,
                       preprocess=False, api_visibility="private")
    chosen_k = gr.State(d["k"] if d else DEFAULTS["k"])  # the visitor's own k, put back when lookahead is left
    ui["k"].input(k_chosen, inputs=[ui["k"]], outputs=[chosen_k], queue=False, preprocess=False,
                  api_visibility="private")
    chosen_gate = gr.State((d or DEFAULTS)["confidence"])  # the visitor's own gate (None: each drafter's default)
    ui["confidence"].input(gate_chosen, inputs=[ui["confidence"]], outputs=[chosen_gate], queue=False,
                           preprocess=False, api_visibility="private")
    ui["drafter"].change(drafter_changed, inputs=[ui["drafter"], ui["ngram"], chosen_k, chosen_gate],
                         outputs=[ui[name] for name in ("draft_model", "exit_layer", "tree_nodes", "confidence",
                                                        "lookup", "k", "adaptive_k", "window", "ngram",
                                                        "candidates")],
                         queue=False, preprocess=False, api_visibility="private")  # ngram read raw (lookahead_k)
    _wire_helpers(ui, d or DEFAULTS)


STARTING = "Starting: your run was sent to the server…"


RUN_GOING = "A run is going: press Stop to end it, then Generate to start one with your new settings."
"""Said under the buttons when Generate is pressed while the session's run is going (Gradio drops that click)."""


def starting_js() -> str:
    """Generate's browser-side answer: a function giving the status line and its compact copy under the button
    (:func:`app.live.outputs.progress_html`, the copy a narrow screen shows in sight of the button) saying
    :data:`STARTING`, at once, with no round trip. While a run of this page is going (marked here, cleared by
    :data:`RUN_ENDED_JS`) Gradio drops the click, so the status is left as it is and a note right under the buttons
    (at 400 px too, above the status) says :data:`RUN_GOING` until the run ends (a trial pressed Generate with new
    settings during a run and nothing said why nothing happened; a later one, double-clicking then clicking once
    more, missed the note, which then went after 6 s)."""
    status = render.status_html(STARTING, "busy")
    return f"""(status, progress) => {{
  if (window.svLiveRunning) {{
    const buttons = document.querySelector('#generate')?.parentElement;
    let note = document.getElementById('sv-run-going');
    if (buttons && !note) {{
      note = document.createElement('div');
      note.id = 'sv-run-going';
      note.setAttribute('role', 'status');
      note.className = 'sv-run-going';
      buttons.insertAdjacentElement('afterend', note);
    }}
    if (note) note.textContent = {json.dumps(RUN_GOING)};  // stays until the run ends (RUN_ENDED_JS)
    return [status, progress];
  }}
  window.svLiveRunning = true;
  window.svTokensKept = true;  // the derived default of max new tokens no longer replaces the box
  return [{json.dumps(status)}, {json.dumps(progress_html(status))}];
}}"""


STOP_SENT_JS = "(status) => [window.svLiveRunning === true]"
"""Stop's browser side: whether this page sent a run that has not ended (:func:`starting_js` marks it), passed to
:func:`app.live.controls.stop_now` in place of the status box's value; a run not registered on the server then still
waits in Gradio's queue."""

RUN_ENDED_JS = "() => { window.svLiveRunning = false; document.getElementById('sv-run-going')?.remove(); }"
"""After a Live run ends (finished, failed or stopped): Generate starts runs again (:func:`starting_js`)."""


OUTPUT_ONLY_JS = "(on) => { document.body.classList.toggle('sv-output-only', !!on); }"
"""The "Output only" checkbox: a class on <body> that the stylesheet reads (no round trip, also while a run
streams): both panes show the committed text plainly, without rejected drafts, colours or pass marks."""


ENTER_COMMITS_JS = enter_commits_js("#controls")
"""On page load: Enter in a number box of the Live tab's controls column commits it as leaving the box does
(:func:`app.messages.enter_commits_js`, the script the Batching and Arena tabs register for their own columns): the
number boxes (top-k, seed, exit layer, the penalties) are checked and a refused value said at once, and the sliders'
own boxes (k, max new tokens, temperature, ...) included: a number typed out of range, 0 or an emptied box is said
and replaced by the value runs use (:func:`app.messages.tell_when_clamped`) on Enter, not only when the box is left
(before, Enter did nothing there: a new user typed k = 6, pressed Enter and reported the run used the old k;
tests/test_slider_boxes_browser.py).
The other tabs' boxes are left alone."""


def _wire_helpers(ui: dict, d: dict) -> None:
    """Enter in a number box of the controls (:data:`ENTER_COMMITS_JS`), numbers typed out of a slider's range (max new tokens and :data:`CLAMPED_SLIDERS`: the box is set to the value
    runs use, and the status says so) and number boxes left with a value a run would refuse
    (:data:`CHECKED_NUMBERS`, the same), the "Output only" view, and, when max new tokens was left at its default,
    the derived default on each page load; the empty-prompt banner goes once the prompt is typed
    (:func:`app.live.prompt_check.wire_prompt_check`)."""
    checks = [tell_when_clamped(ui["max_new_tokens"], ui["status"], "Max new tokens", hint=MAX_NEW_TOKENS_HINT)]
    wire_prompt_check(ui)  # the empty-prompt banner goes once the prompt is not
    for name, label in CLAMPED_SLIDERS.items():
        checks.append(tell_when_clamped(ui[name], ui["status"], label))
    for name, field in CHECKED_NUMBERS.items():
        if name in ui:
            layer = field is EXIT_LAYER  # checked against the target's layer count (its config, without loading)
            checks.append(tell_when_invalid(ui[name], ui["status"], field, parse_exit_layer if layer else None,
                                            target=ui.get("target") if layer else None))
    plan_after(ui, checks)  # a plan sent while a check was in flight left the status alone (UNSETTLED_STATUS_JS)
    from gradio.context import Context

    Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    if "output_only" in ui:
        ui["output_only"].change(None, inputs=[ui["output_only"]], js=OUTPUT_ONLY_JS, queue=False)
    if "preset" in ui:
        ui["preset"].change(preset_chosen, inputs=[ui["preset"]], outputs=[ui["target"], ui["drafter"],
                                                                          ui["draft_model"]],
                            queue=False, api_visibility="private")
    if d["max_new_tokens"] == DEFAULTS["max_new_tokens"]:  # set in the browser only while the visitor has not
        applied = wire_default_tokens(ui["max_new_tokens"], d["target"], d["max_new_tokens"])  # pressed Generate
        plan_after(ui, applied)  # nor typed; the line and the ready status then plan the value set


CLAMPED_SLIDERS = {"k": "Draft length k", "tree_nodes": "Tree nodes", "confidence": "The confidence gate",
                   "window": "Window W", "ngram": "N-gram size N", "candidates": "Candidates G",
                   "temperature": "Temperature", "top_p": "Top-p"}
"""The Live tab's sliders (besides max new tokens) whose numbers typed out of range are said
(:func:`app.messages.tell_when_clamped`), with the name each message gives."""
CHECKED_NUMBERS = {"top_k": TOP_K, "seed": SEED, "exit_layer": EXIT_LAYER, "min_p": MIN_P,
                   "repetition_penalty": REPETITION_PENALTY, "frequency_penalty": FREQUENCY_PENALTY,
                   "presence_penalty": PRESENCE_PENALTY, "no_repeat_ngram_size": NO_REPEAT_NGRAM_SIZE}
"""The Live tab's number boxes, checked when left (:func:`app.messages.tell_when_invalid`) by the rules the Run
path reads (:class:`app.inputs.NumberField`)."""
