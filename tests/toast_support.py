"""Toasts in tests. The app says each sentence once, in the status line of the tab it concerns, never also as a
Gradio toast (gr.Info, gr.Warning): a toast repeated the status word for word and could outlive its cause.
:func:`toasts_shown` records the toasts shown inside a ``with`` block; :func:`no_toast` fails when one is shown.
Outside a request Gradio prints an Info and turns a Warning into a Python ``UserWarning``; both are replaced here,
so a handler called directly is watched as the page would see it."""

from __future__ import annotations

import os
from contextlib import contextmanager

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import pytest  # noqa: E402


@contextmanager
def toasts_shown():
    """Yields a list that gets the text of every toast (gr.Info, gr.Warning) shown inside the block."""
    shown: list[str] = []

    def show(message, *_, **__):  # the duration and title are not what these tests read
        shown.append(message)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gr, "Info", show)
        patch.setattr(gr, "Warning", show)
        yield shown


@contextmanager
def no_toast():
    """Fails, naming them, when a toast is shown inside the block."""
    with toasts_shown() as shown:
        yield
    assert shown == [], f"toasts shown: {shown}"
