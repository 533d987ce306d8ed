"""Launch the specviz web app: ``python app.py`` (then open http://127.0.0.1:7860).

Respects GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860). SPECVIZ_TARGET picks the target that
is pre-loaded and shown by default (default: the embedded SmolLM2-135M-Instruct). Nothing heavy happens at
import time: the model is pre-loaded in the background only when run as a script.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def main() -> None:
    """Serve the demo (:func:`app.serve`: it builds it and starts pre-loading the target)."""
    from app import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    serve(target=os.environ.get("SPECVIZ_TARGET", "embedded"),
          server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
          server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))


if __name__ == "__main__":
    main()
