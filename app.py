"""Launch the specviz web app: ``python app.py`` (then open http://127.0.0.1:7860).

Respects GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860). SPECVIZ_TARGET picks the target that
is pre-loaded and shown by default (default: the embedded SmolLM2-135M-Instruct). Nothing heavy happens at
import time: the model is pre-loaded in the background only when run as a script.
"""

from __future__ import annotations

import logging
import os
import threading

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def _early_load(spec: str) -> threading.Thread:
    """Start loading the target before Gradio is even imported: the two take seconds each and overlap (the
    loaded model is cached; ``preload`` then finds it). Errors are left to ``preload``, which reports them."""

    def work() -> None:
        try:
            from specviz.models import load_model

            load_model(spec)
        except Exception:  # noqa: BLE001 - preload logs the reason
            pass

    thread = threading.Thread(target=work, name="specviz-early-load", daemon=True)
    thread.start()
    return thread


def main() -> None:
    """Start loading the target, build the demo meanwhile, and serve."""
    target = os.environ.get("SPECVIZ_TARGET", "embedded")
    _early_load(target)
    from app import build_demo, launch_options
    from app.handlers import preload

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    demo = build_demo(target=target)
    preload(target)
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        **launch_options(),
    )


if __name__ == "__main__":
    main()
