"""The Gradio app: layout (:func:`build_demo`), token HTML (:mod:`app.render`), charts (:mod:`app.figures`) and
event handlers (:mod:`app.handlers`).

Set ``GRADIO_ANALYTICS_ENABLED=False`` before importing gradio (``app.py`` does). Theme and CSS are launch
options in Gradio 6: launch with ``demo.launch(**launch_options())``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from app import handlers, render  # noqa: E402
from app import arena, why  # noqa: E402
from app import classroom  # noqa: E402
from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE  # noqa: E402
from specviz.drafters.registry import DRAFTERS  # noqa: E402
from specviz.engine import MAX_K  # noqa: E402

ASSETS = Path(__file__).resolve().parent.parent / "assets"
SYSTEM_FONTS = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "Liberation Mono", "monospace"]

DEFAULTS = {
    "prompt": "",
    "target": "embedded",
    "drafter": "ngram",
    "draft_model": "",
    "exit_layer": 0,
    "k": 4,
    "adaptive_k": False,
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "seed": 0,
    "max_new_tokens": 128,
    "stop_strings": "",
    "chat_template": True,
    "tree_nodes": 0,
    "confidence": DEFAULT_MIN_CONFIDENCE,
    "lookup": False,
}


def load_examples(path: Path = ASSETS / "prompts.jsonl") -> list[dict]:
    """The example prompts ({id, category, prompt} per line), sorted by category."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["category"])


def theme() -> gr.themes.Base:
    """A soft theme with system fonts only (nothing fetched from font services)."""
    return gr.themes.Soft(primary_hue="violet", font=SYSTEM_FONTS, font_mono=MONO_FONTS)


def launch_options() -> dict:
    """Keyword arguments for ``demo.launch``: the theme and the stylesheet."""
    return {"theme": theme(), "css_paths": [str(ASSETS / "style.css")]}


INTRO = (
    '<div class="intro"><h1>specviz <span>· speculative decoding, token by token</span></h1>'
    "<p>A cheap drafter guesses the next k tokens; one forward of the target model checks them all at once. "
    "Watch each guess be <b>accepted</b> or <b>rejected</b> next to plain one-token-at-a-time decoding of the "
    "same model — same output, fewer target passes.</p></div>"
)


def build_demo(**defaults) -> gr.Blocks:
    """Build the app. Keyword arguments override :data:`DEFAULTS` (e.g. ``target="/path/to/model"``,
    ``drafter="early-exit"``, ``max_new_tokens=40``). Loads nothing: models load on the first Generate (or via
    :func:`app.handlers.preload`)."""
    unknown = set(defaults) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown defaults: {', '.join(sorted(unknown))}")
    d = {**DEFAULTS, **defaults}
    examples = load_examples()
    with gr.Blocks(title="specviz · speculative decoding", fill_width=True, analytics_enabled=False) as demo:
        history = gr.State([])
        gr.HTML(INTRO, elem_id="intro")
        with gr.Tabs(elem_id="tabs"):
            with gr.Tab("Live", id="live", elem_id="tab-live"):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=1, min_width=300, elem_id="controls"):
                        prompt = gr.Textbox(d["prompt"], label="Prompt", lines=5, max_lines=14, elem_id="prompt",
                                            placeholder="Ask something, or pick an example below…")
                        with gr.Row():
                            generate_btn = gr.Button("Generate", variant="primary", elem_id="generate", scale=2)
                            stop_btn = gr.Button("Stop", variant="stop", elem_id="stop", scale=1)
                        drafter = gr.Dropdown([(c.label, c.key) for c in DRAFTERS], value=d["drafter"], label="Drafter",
                                              elem_id="drafter", info="What proposes the tokens the target checks")
                        draft_model = gr.Textbox(d["draft_model"], label="Draft model", elem_id="draft-model",
                                                 placeholder="hub id (org/name) or local folder, same tokenizer",
                                                 visible=d["drafter"] == "model")
                        exit_layer = gr.Number(d["exit_layer"], label="Early-exit layer (0 = half the target's layers)",
                                               precision=0, elem_id="exit-layer",
                                           info="Untrained, the first layers agree with the full model on few tokens "
                                                "(SmolLM2-135M: 46% at layer 28/30, under 15% below 20): expect a "
                                                "low acceptance rate; the idea shows, the speedup does not.",
                                               visible=d["drafter"] == "early-exit")
                        heads = d["drafter"] in handlers.HEAD_DRAFTERS
                        tree_nodes = gr.Slider(0, handlers.MAX_TREE_NODES, value=d["tree_nodes"], step=1,
                                               label="Tree nodes (0 = a chain)", elem_id="tree-nodes",
                                               info="EAGLE / Medusa: draft a tree of candidates (depth ≤ k) and "
                                                    "verify it in one target pass. Greedy only: at temperature > 0 "
                                                    "the drafter drafts a chain.",
                                               visible=heads, interactive=heads)
                        confidence = gr.Slider(0, handlers.MAX_CONFIDENCE, value=d["confidence"], step=0.05,
                                               label="Confidence gate (0 = always k)", elem_id="confidence",
                                               info="EAGLE / Medusa: stop drafting where the head's own probability "
                                                    "of the whole guess so far drops below this; an unsure pass "
                                                    "drafts fewer tokens, or none. The output stays exact.",
                                               visible=heads, interactive=heads)
                        lookup = gr.Checkbox(d["lookup"], label="Lookup first (copy repeated text, else the head)",
                                             elem_id="lookup-first",
                                             info="EAGLE / Medusa: each pass, n-gram lookup looks for the text's "
                                                  "last 2-3 tokens earlier on and, if found, the target checks "
                                                  "what followed them (such passes are marked “copy”); the head "
                                                  "drafts only otherwise.",
                                             visible=heads, interactive=heads)
                        k = gr.Slider(1, MAX_K, value=d["k"], step=1, label="Draft length k", elem_id="draft-length",
                                      interactive=d["drafter"] != "none")
                        adaptive_k = gr.Checkbox(d["adaptive_k"], label="Adaptive k (+1 after a fully accepted pass, "
                                                 "−1 after a rejection)", elem_id="adaptive-k",
                                                 interactive=d["drafter"] != "none")
                        max_new_tokens = gr.Slider(1, handlers.MAX_NEW_TOKENS, value=min(d["max_new_tokens"], handlers.MAX_NEW_TOKENS), step=1,
                                                   label="Max new tokens", elem_id="max-new-tokens")
                        target = gr.Textbox(d["target"], label="Target model", elem_id="target",
                                            info="'embedded' (SmolLM2-135M-Instruct, shipped), a hub id or a local folder")
                        with gr.Accordion("Sampling and stopping", open=False, elem_id="sampling"):
                            temperature = gr.Slider(0, 2, value=d["temperature"], step=0.05, elem_id="temperature",
                                                    label="Temperature (0 = greedy)")
                            with gr.Row():
                                top_p = gr.Slider(0.05, 1, value=d["top_p"], step=0.05, label="Top-p (1 = off)",
                                                  elem_id="top-p")
                                # no minimum= on number boxes: Gradio would refuse a negative number in a popup
                                # before the handler runs; the handler says what is wrong in the status line
                                top_k = gr.Number(d["top_k"], label="Top-k (0 = off)", precision=0,
                                                  elem_id="top-k")
                            seed = gr.Number(d["seed"], label="Seed", precision=0, elem_id="seed")
                            stop_strings = gr.Textbox(d["stop_strings"], label="Stop strings", elem_id="stop-strings",
                                                      placeholder="comma- or newline-separated; \\n for a newline")
                            chat_template = gr.Checkbox(d["chat_template"], label="Use the chat template",
                                                        elem_id="chat-template")
                        gr.Examples(
                            examples=[[e["prompt"]] for e in examples], inputs=[prompt], label="Example prompts",
                            example_labels=example_labels(examples),
                            examples_per_page=18, elem_id="examples",
                        )
                    with gr.Column(scale=3, min_width=600, elem_id="results"):
                        status = gr.HTML(render.status_html("Ready: type a prompt and press Generate.", "info"),
                                         elem_id="status")
                        gr.HTML(render.legend_html(), elem_id="legend")
                        with gr.Row(equal_height=True, elem_id="panes"):
                            spec_out = gr.HTML(render.placeholder_html("The speculative run appears here."),
                                               elem_id="spec-output", elem_classes=["out-pane"])
                            base_out = gr.HTML(render.placeholder_html("The standard-decoding baseline appears here."),
                                               elem_id="baseline-output", elem_classes=["out-pane"])
                        with gr.Row(equal_height=False, elem_id="drafter-insight"):
                            tree_out = gr.HTML("", elem_id="draft-tree", visible=False, scale=3)
                            heads_out = gr.HTML("", elem_id="head-accuracy", visible=False, scale=1, min_width=280)
                        stats = gr.HTML("", elem_id="stats")
                        charts = gr.Plot(label="Charts", elem_id="charts", show_label=False, visible=False)
                        history_out = gr.HTML("", elem_id="history")
                # the order of handlers.generate's parameters and of handlers.OUTPUTS
                inputs = [prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p, top_k, seed,
                          max_new_tokens, stop_strings, chat_template, tree_nodes, confidence, lookup, history]
                outputs = [spec_out, base_out, charts, stats, status, history_out, history, tree_out, heads_out]
                run = generate_btn.click(handlers.generate, inputs=inputs, outputs=outputs,
                            api_name="generate", show_progress="minimal", show_progress_on=[status],
                            concurrency_limit=8, concurrency_id="generate")  # a queued visitor sees "queue: 3/5"
                # the status is set again one round trip later, after any update the cancelled run had in flight
                stop_btn.click(handlers.stop_run, inputs=[history], outputs=outputs, cancels=[run], queue=False,
                               api_name="stop").then(
                    handlers.stopped_view, inputs=[history], outputs=outputs, queue=False, api_visibility="private")
                drafter.change(handlers.drafter_changed, inputs=[drafter],
                               outputs=[draft_model, exit_layer, tree_nodes, confidence, lookup, k, adaptive_k],
                               queue=False,
                               api_visibility="private")
            # other tabs: each module builds its own tab and wires its own events, one line each here
            with gr.Tab("Arena", id="arena", elem_id="tab-arena"): arena.build_tab(target=d["target"])  # noqa: E701
            with gr.Tab("Why it works", id="why", elem_id="tab-why"): why.build_tab(history, target=d["target"])  # noqa: E701
            with gr.Tab("Classroom", id="classroom", elem_id="tab-classroom"): classroom.build_tab(target=d["target"])  # noqa: E701
        demo.unload(handlers.release_session)
        demo.unload(arena.release_session)
    demo.queue(default_concurrency_limit=2, max_size=64)
    return demo


def example_labels(examples: list[dict]) -> list[str]:
    """"category · first words" per example; where two would read the same, the start of their next line
    is added (e.g. two questions over different contexts)."""
    labels = [f"{e['category']} · {_short(e['prompt'])}" for e in examples]
    for i, e in enumerate(examples):
        lines = [line for line in e["prompt"].strip().splitlines() if line.strip()]
        if labels.count(labels[i]) > 1 and len(lines) > 1:
            labels[i] += f" — {_short(lines[1], 5)}"
    return labels


def _short(prompt: str, words: int = 7) -> str:
    first = prompt.strip().splitlines()[0].split()
    return " ".join(first[:words]) + ("…" if len(first) > words else "")
