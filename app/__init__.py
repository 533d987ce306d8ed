"""The Gradio app: :func:`build_demo` puts the tabs together, :func:`serve` starts it.

One module per tab, each with its handlers and its part of the layout (no tab imports another):
:mod:`app.live`, :mod:`app.arena`, :mod:`app.why`, :mod:`app.batching`, :mod:`app.classroom`. Shared by the tabs: :mod:`app.device`
(the one device runner: the fair lock, work in threads, cancel flags), :mod:`app.inputs` (validation),
:mod:`app.messages` (error messages and the failure log), and the views :mod:`app.render` (token HTML),
:mod:`app.figures` (Plotly figures) and :mod:`app.tree_view` (draft trees).

Set ``GRADIO_ANALYTICS_ENABLED=False`` before importing gradio (``app.py`` does). Theme and CSS are launch
options in Gradio 6: launch with ``demo.launch(**launch_options())``.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from app import arena, batching, classroom, device, live, why, zerogpu  # noqa: E402
from app.live import DEFAULTS, load_examples  # noqa: E402,F401 - the Live tab's defaults are the demo's

ASSETS = Path(__file__).resolve().parent.parent / "assets"
MAX_UPLOAD_BYTES = 4 * 2 ** 20  # Gradio refuses bigger uploads before they reach the disk
SYSTEM_FONTS = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "Liberation Mono", "monospace"]

INTRO = (
    '<div class="intro"><h1>specviz <span>· speculative decoding, token by token</span></h1>'
    "<p>A cheap drafter guesses the next k tokens; one forward of the target model checks them all at once. "
    "Watch each guess be <b>accepted</b> or <b>rejected</b> next to plain one-token-at-a-time decoding of the "
    "same model — same output, fewer target passes.</p></div>"
)


def theme() -> gr.themes.Base:
    """A soft theme with system fonts only (nothing fetched from font services)."""
    return gr.themes.Soft(primary_hue="violet", font=SYSTEM_FONTS, font_mono=MONO_FONTS)


def launch_options() -> dict:
    """Keyword arguments for ``demo.launch``: the theme, the stylesheet (and before it the Arena tables' phone labels,
    :data:`app.arena.PHONE_CSS`, made from their columns), the page scripts (``assets/head.html``: charts one per row
    on a narrow screen, token details on tap) and the upload limit (a recording file is checked against its own,
    smaller cap: :data:`specviz.analysis.recording.MAX_FILE_BYTES`)."""
    return {"theme": theme(), "css": arena.PHONE_CSS, "css_paths": [str(ASSETS / "style.css")],
            "head_paths": [str(ASSETS / "head.html")], "max_file_size": MAX_UPLOAD_BYTES}


def build_demo(**defaults) -> gr.Blocks:
    """Build the app. Keyword arguments override :data:`DEFAULTS` (e.g. ``target="/path/to/model"``,
    ``drafter="early-exit"``, ``max_new_tokens=40``); ``target`` is every tab's default target. Loads nothing:
    models load on the first run (or via :func:`app.device.preload`). Raises TypeError for an unknown default."""
    unknown = set(defaults) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown defaults: {', '.join(sorted(unknown))}")
    d = {**DEFAULTS, **defaults}
    # delete_cache: Gradio's copies of offered files older than a day go, checked hourly (a Space runs for weeks)
    with gr.Blocks(title="specviz · speculative decoding", fill_width=True, analytics_enabled=False,
                   delete_cache=(3600, 86400)) as demo:
        history = gr.State([])  # the Live tab's run history; the Why tab marks its newest run
        gr.HTML(INTRO, elem_id="intro")
        with gr.Tabs(elem_id="tabs", overflow_behavior="wrap"):  # every tab in sight on a phone, no "…" menu
            with gr.Tab("Live", id="live", elem_id="tab-live"):
                live.build_tab(history, d)
            with gr.Tab("Arena", id="arena", elem_id="tab-arena"):
                arena.build_tab(target=d["target"])
            with gr.Tab("Why it works", id="why", elem_id="tab-why"):
                why.build_tab(history, target=d["target"])
            with gr.Tab("Batching", id="batching", elem_id="tab-batching"):
                batching.build_tab(target=d["target"])
            with gr.Tab("Classroom", id="classroom", elem_id="tab-classroom"):
                classroom.build_tab(target=d["target"])
        for release_session in (live.release_session, arena.release_session, why.release_session,
                                batching.release_session):
            demo.unload(release_session)
    demo.queue(default_concurrency_limit=2, max_size=64)
    return demo


def serve(target: str = "embedded", **launch) -> gr.Blocks:
    """Build the demo with ``target`` as every tab's default, start loading that target in the background (so
    the first run does not wait for it: the model, its tuning, a short Live run whose costs plan the next runs and
    the default max new tokens, :func:`app.live.warmup.warm_up`), and serve (``launch``: ``demo.launch`` keywords
    such as ``server_name``). Blocks until the server stops (unless ``prevent_thread_lock``); returns the demo."""
    demo = build_demo(target=target)
    if zerogpu.active():  # ZeroGPU: placed on the GPU now, in this process, so its GPU workers inherit it
        zerogpu.place_at_start(target, device.load_target)
    else:  # the model, its tuning and a short Live run at start-up: the first visitor's run measures nothing
        device.preload(target, then=lambda loaded: live.warm_up(target, loaded, {**DEFAULTS, "target": target}))
    demo.launch(**launch, **launch_options())
    return demo
