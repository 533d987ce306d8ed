"""What a visitor reads when something goes wrong, and what the operator's log records.

:func:`message_for` turns any exception into one sentence (never a stack trace); :func:`log_failure` logs a
failed run; :func:`report` does both, shows a toast when asked, and returns the error status line. Every tab
uses these three; :func:`tell_when_clamped` says so when a number typed into a slider's box is out of its range. A
stopped run (:class:`specviz.core.events.RunCancelled`) is not an error: the device runner (:mod:`app.device`) ends
it quietly, so it never reaches here.
"""

from __future__ import annotations

import html
import logging
import traceback

import gradio as gr

from app import render
from app.inputs import clamp_notice
from specviz.core.events import NumericalError

log = logging.getLogger("specviz.app")


def message_for(error: BaseException) -> str:
    """A user-facing sentence for ``error``: the message itself for bad input, a model that cannot be loaded
    or a numerical failure (those are written for visitors); "Not supported yet: ..." for a missing feature;
    else "Something went wrong (Type: first line). The details are in the server log." Never raises."""
    from specviz.models import ModelLoadError

    try:
        if isinstance(error, (ValueError, ModelLoadError, NumericalError)):  # InputError, PolicyError included
            return str(error) or "Invalid input."
        if isinstance(error, NotImplementedError):
            return f"Not supported yet: {error}"
        first = (str(error).strip().splitlines() or [""])[0]
    except Exception:  # noqa: BLE001 - an exception whose str() fails must not break the tab
        first = ""
    return f"Something went wrong ({type(error).__name__}: {first}). The details are in the server log."


def log_failure(what: str, error: BaseException) -> None:
    """Log a failed run for the operator: a user's mistake (bad input, a model that cannot be found or loaded)
    as one line, anything else with its traceback. ``what`` names the run ("generation", "arena", ...)."""
    from specviz.models import ModelLoadError

    if isinstance(error, (ValueError, ModelLoadError)):
        log.info("%s refused: %s", what, error)
    else:
        log.error("%s failed:\n%s", what, "".join(traceback.format_exception(error)))


def warn(message: str) -> None:
    """A toast for the visitor (outside a request, a Python ``UserWarning``)."""
    gr.Warning(html.escape(message))


def clamped(value, name: str, low: float, high: float, hint: str = "") -> tuple:
    """The handler of :func:`tell_when_clamped`: for a number typed outside [low, high] (``value``: the slider's raw
    payload), a toast and an info status line that say which value runs use (:func:`app.inputs.clamp_notice`), and
    the slider set to it; (skip, skip) for a value in range."""
    found = clamp_notice(value, name, low, high, hint)
    if found is None:
        return gr.skip(), gr.skip()
    used, message = found
    gr.Info(html.escape(message))
    return gr.update(value=used), render.status_html(message, "info")


def tell_when_clamped(slider: gr.Slider, status: gr.HTML, name: str, hint: str = "") -> None:
    """Say so when a number typed into ``slider``'s box is out of its range. Gradio's slider sends its ``release``
    event with the typed number when the box is left and then quietly sets itself to the nearest end; this listener
    reads that raw number (preprocess off: Gradio's range check would refuse it) and answers with a toast and a line
    in ``status`` (:func:`clamped`). Queued, so that the toast can show; no concurrency limit (it does no work)."""
    low, high = slider.minimum, slider.maximum
    slider.release(lambda value: clamped(value, name, low, high, hint), inputs=[slider], outputs=[slider, status],
                   preprocess=False, show_progress="hidden", concurrency_limit=None, api_visibility="private")


def report(what: str, error: BaseException, toast: bool = True) -> str:
    """Log ``error`` (see :func:`log_failure`), show its message as a toast when ``toast``, and return the
    message as an error status line (HTML)."""
    log_failure(what, error)
    message = message_for(error)
    if toast:
        warn(message)
    return render.status_html(message, "error")
