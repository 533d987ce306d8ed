"""The Classroom tab's layout: the walkthrough menu and recording files, the stage where a run is stepped through,
the settings of your own run, and the what-if k accordion; :func:`build_tab` puts them together and wires them
(:mod:`app.classroom.wiring`)."""

from __future__ import annotations

import html

import gradio as gr

from app import render
from app.classroom.lesson import NO_RECORDING
from app.classroom.recordings import uploads_allowed
from app.classroom.stepping import PLAY_INTERVAL_S
from app.classroom.walkthroughs import (DEFAULTS, SLIDER_RANGES, WHATIF_MAX_NEW_TOKENS, load_walkthroughs,
                                        menu_choices, note_html, walkthrough_settings)
from app.classroom.wiring import KEYS_JS, wire
from specviz.core.engine import MAX_K
from specviz.drafters.registry import choices


INTRO = ('<div class="cr-intro"><b>Classroom.</b> Step through a recorded run: what the drafter proposed, what '
         'the target thought of each guess, why each was accepted or rejected, and where the next token came from. '
         'Each walkthrough opens its run at once; change the settings and press Record run for your own. Keys: '
         '<kbd>→</kbd> next, <kbd>←</kbd> previous, <kbd>space</kbd> play / pause (also on the presentation '
         'view\'s box, which <kbd>Enter</kbd> or a click ticks).</div>')
OWN_RUN = ('<div class="cr-heading">Your own run</div><div class="cr-note">Change the prompt or the settings, then '
           'record the run on the model: from a few seconds to half a minute, as busy as the machine is and as '
           'many runs as are in line; the status counts the tokens as they come.</div>')


def build_tab(target: str = "embedded") -> None:
    """Build the Classroom tab's contents inside the current ``gr.Tab`` and wire its events (including a page-load
    event that applies settings from the address and opens a recorded run).

    Three columns in the page's order: the walkthrough menu and the recording files, the stage (where a run is
    stepped through) and the settings of your own run. The stylesheet shows them as two columns on a wide screen
    (menu above settings, stage beside them) and as one column, stage second, on a narrow one."""
    walkthroughs = load_walkthroughs()
    first = walkthrough_settings(walkthroughs[0]) if walkthroughs else dict(DEFAULTS)
    first["target"] = target
    tab = gr.context.Context.block
    tabs = tab.parent if isinstance(getattr(tab, "parent", None), gr.Tabs) else None
    ui: dict = {}
    with gr.Column(elem_id="classroom-root", elem_classes=["classroom"]):
        gr.HTML(INTRO, elem_id="classroom-intro")
        with gr.Row(equal_height=False, elem_id="classroom-main", elem_classes=["sv-main"]):
            with gr.Column(scale=1, min_width=300, elem_id="classroom-pick", elem_classes=["sv-side"]):
                _walkthrough_controls(ui, walkthroughs)
            with gr.Column(scale=3, min_width=300, elem_id="classroom-stage", elem_classes=["sv-results"]):
                _stage(ui)
            with gr.Column(scale=1, min_width=300, elem_id="classroom-controls", elem_classes=["sv-side2"]):
                _settings_controls(ui, first)
        _whatif_controls(ui)
    ui["stepper"] = gr.State(None)
    ui["playing"] = gr.State(False)  # Play: whether the timer steps the run
    ui["timer"] = gr.Timer(PLAY_INTERVAL_S, active=False)
    wire(ui, tabs)


def _walkthrough_controls(ui: dict, walkthroughs: list[dict]) -> None:
    """The walkthrough menu and its note, downloading and opening recording files (opening only where the operator
    allows uploads), and the presentation view."""
    ui["walkthrough"] = gr.Dropdown(menu_choices(walkthroughs),
                                    value=walkthroughs[0]["id"] if walkthroughs else None, label="Walkthrough",
                                    elem_id="classroom-walkthrough")
    ui["note"] = gr.HTML(note_html(walkthroughs[0] if walkthroughs else None), elem_id="classroom-note")
    with gr.Row(elem_id="classroom-files"):
        ui["download"] = gr.DownloadButton("⬇ Download this run", value=None, interactive=False, size="sm",
                                           elem_id="classroom-download", min_width=140)
        # no file_types: Gradio would refuse another type in the browser, before open_upload runs, with a toast
        # and no status, so the status kept the previous upload's message; open_upload names and refuses any file
        # that is not a recording itself
        ui["upload"] = gr.UploadButton("⬆ Open a recording file", type="filepath", size="sm",
                                       elem_id="classroom-upload", min_width=140, visible=uploads_allowed())
    ui["present"] = gr.Checkbox(False, label="Presentation view (large type, high contrast)",
                                elem_id="classroom-present")


def _stage(ui: dict) -> None:
    """Status, progress, the step buttons, caption, table, rejection chart and the output so far."""
    ui["status"] = gr.HTML(render.status_html("Opening the walkthrough's recorded run…", "info"),
                           elem_id="classroom-status")
    ui["progress"] = gr.HTML("", elem_id="classroom-progress")
    with gr.Row(elem_id="classroom-nav"):
        ui["first"] = gr.Button("« Start", size="sm", elem_id="classroom-first", min_width=70)
        ui["prev"] = gr.Button("◀ Previous", elem_id="classroom-prev", min_width=100)
        ui["play"] = gr.Button("▶ Play", elem_id="classroom-play", min_width=90)
        ui["next"] = gr.Button("Next ▶", variant="primary", elem_id="classroom-next", min_width=100)
        ui["rejection"] = gr.Button("Next rejection »", size="sm", elem_id="classroom-next-rejection",
                                    min_width=130)
    ui["caption"] = gr.HTML(f'<div class="cr-caption">{html.escape(NO_RECORDING)}</div>', elem_id="classroom-caption")
    ui["table"] = gr.HTML("", elem_id="classroom-table")
    ui["chart"] = gr.Plot(elem_id="classroom-chart", show_label=False, visible=False)
    ui["output"] = gr.HTML("", elem_id="classroom-output")
    gr.HTML("", js_on_load=KEYS_JS, elem_id="classroom-keys")


def _settings_controls(ui: dict, first: dict) -> None:
    """The settings of your own run (:data:`FIELDS`), Record run and the share link."""
    gr.HTML(OWN_RUN, elem_id="classroom-own")
    ui["prompt"] = gr.Textbox(first["prompt"], label="Prompt", lines=4, max_lines=10, elem_id="classroom-prompt")
    ui["drafter"] = gr.Dropdown([(c.label, c.key) for c in choices() if c.key != "none"], value=first["drafter"],
                                label="Drafter", elem_id="classroom-drafter")
    from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

    ui["drafter_about"] = add_about(ui["drafter"], "classroom-drafter-about", first["drafter"])
    ui["exit_layer"] = gr.Number(first["exit_layer"], label="Early-exit layer (0 = half the target's layers)",
                                 elem_id="classroom-exit-layer", visible=first["drafter"] == "early-exit")
    ui["draft_model"] = gr.Textbox(first["draft_model"], label="Draft model", elem_id="classroom-draft-model",
                                   placeholder="hub id or local folder (same tokenizer, or re-tokenized)",
                                   visible=first["drafter"] == "model")
    ui["k"] = gr.Slider(*SLIDER_RANGES["k"], value=first["k"], step=1, label="Draft length k", elem_id="classroom-k")
    # the whole width, as the Live tab's: beside Seed, in half the column, its number box dropped under its label
    ui["temperature"] = gr.Slider(*SLIDER_RANGES["temperature"], value=first["temperature"], step=0.05,
                                  label="Temperature", info="0 = greedy", elem_id="classroom-temperature")
    ui["seed"] = gr.Number(first["seed"], label="Seed", elem_id="classroom-seed")
    ui["max_new_tokens"] = gr.Slider(*SLIDER_RANGES["max_new_tokens"], value=first["max_new_tokens"], step=1,
                                     label="Max new tokens", elem_id="classroom-max-new-tokens")
    ui["target"] = gr.Textbox(first["target"], label="Target model", elem_id="classroom-target")
    ui["repetition_penalty"] = gr.Number(first["repetition_penalty"], label="Repetition penalty (1 = off)",
                                         elem_id="classroom-repetition-penalty",
                                         info="target and draft alike: the p and q shown are the penalized ones")
    ui["record"] = gr.Button("Record run", variant="primary", elem_id="classroom-record")
    ui["share_btn"] = gr.Button("Share link to these settings", size="sm", elem_id="classroom-share-btn")
    # the label is read by screen readers only (Gradio's default name, "Textbox", was read out and shown in the
    # page's text); the placeholder and the button above say what the box holds
    ui["share"] = gr.Textbox("", label="Link to these settings", show_label=False,
                             placeholder="a link with this prompt and settings", buttons=["copy"], lines=1,
                             max_lines=3, elem_id="classroom-share")


def _whatif_controls(ui: dict) -> None:
    """The what-if k accordion: largest k, tokens, Run what-if, the re-run, and their status, chart and result."""
    with gr.Accordion("What if k were different?", open=True, elem_id="whatif"):
        gr.HTML('<div class="cr-intro">One greedy run at the largest k (with the prompt and drafter above) measures '
                'how often each draft position is accepted and what drafting and verifying cost; that predicts the '
                'speedup of every smaller k. Then re-run at the recommended k to check.</div>')
        with gr.Row(equal_height=True):
            ui["k_max"] = gr.Slider(2, MAX_K, value=8, step=1, label="Largest k", elem_id="whatif-kmax", scale=2,
                                    min_width=200)
            ui["tokens"] = gr.Slider(8, WHATIF_MAX_NEW_TOKENS, value=48, step=1, label="Tokens per run",
                                     elem_id="whatif-tokens", scale=2, min_width=200)
            ui["whatif_run"] = gr.Button("Run what-if", variant="primary", elem_id="whatif-run", scale=1)
            ui["whatif_rerun"] = gr.Button("Re-run at the recommended k", elem_id="whatif-rerun", interactive=False,
                                           scale=1)
        ui["whatif_status"] = gr.HTML("", elem_id="whatif-status")
        ui["whatif_chart"] = gr.Plot(elem_id="whatif-chart", show_label=False, visible=False)
        ui["whatif_result"] = gr.HTML("", elem_id="whatif-result")
