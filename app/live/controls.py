"""The Live tab's small handlers: Stop (:func:`stop`; the button's :func:`stop_now`, then :func:`stop_run`: the run's
result so far, :func:`stopped_view`),
a closed browser tab (:func:`release_session`), and the controls that follow each other: a real pair picked
(:func:`preset_chosen`), the drafter menu (:func:`drafter_changed`: which options show), lookahead's k = N−1
(:func:`lookahead_k`), the visitor's own k (:func:`k_chosen`) and own confidence gate (:func:`gate_chosen`)."""

from __future__ import annotations

import gradio as gr

from app import render
from app.device import session_key
from app.inputs import GATED_DRAFTERS, HEAD_DRAFTERS, MAX_CONFIDENCE, MAX_NGRAM, default_gate
from app.live.outputs import (ENDED, _GOOD, _SUFFIX_STORES, _VIEWS, _VIEWS_LOCK, RUNS, add_to_history, blank, final,
                              stopped_in_queue,
                              history_html, keep_good, status_only, stopped_status)
from app.messages import NOTHING_RUNNING, nothing_to_stop
from app.live.view import RunView
from app.records import RunSummary
from specviz.core.engine import MAX_K
from specviz.runtime.presets import PRESETS, preset


def stop(request: gr.Request = None):
    """Flag the session's run as cancelled: its engine starts no other forward, and the handler ends on its own
    within a tick and releases the device. Returns the status line: "Stopped.", or "Nothing is
    running." when the session had no run to flag (a trial: "Stopped." although nothing had run). Only the caller's
    own session is stopped: a request without a session stops nothing, and a call with no request at all (Python
    code in this process) stops the runs started without a request."""
    return stopped_status() if RUNS.cancel(request) else render.status_html(NOTHING_RUNNING, "info")


def _view_of(request) -> RunView | None:
    key = session_key(request)
    with _VIEWS_LOCK:
        return _VIEWS.get(key) if key else None


def stop_now(request: gr.Request = None, sent=False):
    """The Stop button's first, light handler: cancel the session's run (:func:`stop`) and freeze its view
    (:meth:`app.live.view.RunView.mark_stopped`), answering with the status line only ("Stopped after 12.1 s ...";
    a run that had already finished keeps its summary). The whole result (panes, charts, draft tree, the history
    row) follows in :func:`stop_run`, chained after it, once the run has ended: this answer must not wait for that,
    nor for the drawing of a whole result (on a busy machine it came 8.9 s after the click). ``sent``: True when
    the page says it sent a run that has not ended (:data:`app.live.layout.STOP_SENT_JS`); with no run of the
    session registered, that run still waits in Gradio's queue: it will start flagged and end at once
    (:meth:`app.cancels.CancelRegistry.cancel`), and the status says :func:`app.live.outputs.stopped_in_queue`.
    Returns a tuple in :data:`app.live.defaults.OUTPUTS` order."""
    queued = sent is True and session_key(request) is not None
    flagged = RUNS.cancel(request, queued=queued)
    if queued and not flagged:
        return status_only(stopped_in_queue())
    status = stopped_status() if flagged else render.status_html(NOTHING_RUNNING, "info")
    view = _view_of(request)
    if view is None:
        return status_only(status)
    if not flagged:  # it had ended (on its own, or stopped before: a trial's second Stop changed nothing on the
        # page): "Nothing is running." above its summary, which stays
        return status_only(nothing_to_stop(view.status(), "stop"), view.cut)
    view.mark_stopped()
    return status_only(view.status() if view.cancelled else status, view.cut)


STOP_WAIT_S = 10.0
"""How long Stop's second handler waits for the flagged run's handler to end (it notices the flag within a tick,
:data:`app.device.TICK_S`, then frees the device; a forward or a model load in progress can hold it longer)."""


def _wait_for_the_run(request) -> None:
    """Wait (at most :data:`STOP_WAIT_S`) until the session's flagged run has ended: Stop does not have Gradio cancel
    the run's event (the empty message the server sends for a cancelled event at times left a red "Error" on the
    status), so the run ends on its own; once it has, the browser counts it as over (Generate starts the next run at
    once) and nothing it sent can land after Stop's result."""
    ENDED.wait(session_key(request), STOP_WAIT_S)


def stop_run(history: list[RunSummary] | None = None, request: gr.Request = None):
    """The Stop button: cancel the session's run (:func:`stop`), wait for its handler to end
    (:func:`_wait_for_the_run`), and show what it made so far as its result (:func:`stopped_view`); without a view,
    the status :func:`stop_now` gave stays. Returns a tuple in :data:`app.live.defaults.OUTPUTS` order."""
    flagged = RUNS.cancel(request)
    _wait_for_the_run(request)
    view = _view_of(request)
    if view is None or (not flagged and view.stop_shown):  # a Stop after the stopped result: stop_now's line stays
        return status_only(None)
    return stopped_view(history, request)


def stopped_view(history: list[RunSummary] | None = None, request: gr.Request = None,
                 status: str | None = None):
    """The result of a stopped run, as a tuple in :data:`app.live.defaults.OUTPUTS` order: both panes without the
    typing cursor, the stats with finish reason "stopped" and the output check up to the stop, the final charts and
    draft tree, the status, and the run history with the run added (marked stopped). When no run was streaming
    (still loading, or finished on its own) only the status changes. The Stop button calls it (:func:`stop_run`)
    after :func:`stop_now` froze the view, once the run's handler has ended (it sends nothing after the flag); the
    history row is added once, whichever call comes first."""
    key = session_key(request)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key) if key else None
    history = list(history) if isinstance(history, list) else []
    if view is None:
        return status_only(status or stopped_status())
    view.mark_stopped()
    if not view.cancelled:  # it finished on its own: its result and stop_now's line stay as they are
        return status_only(None)
    if not view.in_history and not view.empty:  # once, whichever of Stop's handlers comes first
        view.in_history = True
        add_to_history(history, view)
        keep_good(key, view)
    view.stop_shown = True
    if view.empty:  # stopped while the prompt was read: nothing was measured, so no figures and no history row
        return blank("Stopped before the first token: nothing was generated or measured.", view.status(),
                     history_html(history), history, cut=view.cut)
    return final(view, history_html(history), history)


def release_session(request: gr.Request = None):
    """When a browser tab closes: cancel its run and forget its last view."""
    RUNS.cancel_session(request)
    key = session_key(request)
    if key:
        with _VIEWS_LOCK:
            _VIEWS.pop(key, None)
            _GOOD.pop(key, None)
            _SUFFIX_STORES.pop(key, None)


PRESET_CHOICES = [("—", "")] + [(p.label, p.key) for p in PRESETS]


def preset_chosen(key: str):
    """A real pair picked (:data:`specviz.runtime.presets.PRESETS`): its target, the 'model' drafter and its draft model
    (outputs: target, drafter, draft model); nothing changes for "—"."""
    if not key:
        return gr.skip(), gr.skip(), gr.skip()
    chosen = preset(key)
    return chosen.target, "model", gr.update(value=chosen.draft, visible=True)


def drafter_changed(drafter: str, ngram=None, chosen_k=None, chosen_gate=None):
    """Show the draft-model box for 'model', the exit layer for 'early-exit', the confidence gate for the drafters it
    reaches (:data:`app.inputs.GATED_DRAFTERS`: eagle, medusa, the distilled and 'model' draft models), the tree size
    and lookup first for the head drafters (eagle, medusa), and W, N, G for lookahead; k only matters with a drafter
    that takes it (lookahead's is N-1, shown on the k slider from ``ngram``; leaving lookahead puts back
    ``chosen_k``, the visitor's last own k). The gate moves to the drafter's own default
    (:func:`app.inputs.default_gate`: 0.15 for the heads, 0.2 for the distilled draft, 0 for 'model') unless the
    visitor set one (``chosen_gate``, kept by :func:`gate_chosen`), which stays. Outputs: draft model, exit layer,
    tree nodes, confidence gate, lookup first, k, adaptive k, window, n-gram size, candidates."""
    heads, lookahead, gated = drafter in HEAD_DRAFTERS, drafter == "lookahead", drafter in GATED_DRAFTERS
    head_only = gr.update(visible=heads, interactive=heads)
    lookahead_only = gr.update(visible=lookahead, interactive=lookahead)
    own_gate = default_gate(drafter) if chosen_gate is None else chosen_gate
    gate = gr.update(value=own_gate, visible=True, interactive=True) if gated else gr.update(visible=False,
                                                                                           interactive=False)
    own_k = gr.update(interactive=drafter not in ("none", "lookahead"))
    k = lookahead_k(ngram) if lookahead else own_k if chosen_k is None else \
        gr.update(value=chosen_k, interactive=drafter != "none")
    schedule = gr.update(interactive=drafter != "none")  # lookahead: fixed, or auto (whole passes gated)
    return (gr.update(visible=drafter == "model"), gr.update(visible=drafter == "early-exit"),
            head_only, gate, head_only, k, schedule, lookahead_only, lookahead_only, lookahead_only)


def lookahead_k(ngram, drafter: str = "lookahead"):
    """The k slider for lookahead: N-1 and not editable (another drafter, or an N that is no number: no change)."""
    try:
        n = min(max(int(float(ngram)), 2), MAX_NGRAM)  # the raw payload: a number typed out of range is clamped
    except (TypeError, ValueError, OverflowError):
        return gr.update(interactive=False) if drafter == "lookahead" else gr.skip()
    return gr.update(value=n - 1, interactive=False) if drafter == "lookahead" else gr.skip()


def _typed_number(value) -> float | None:
    """A slider's raw payload as a float; None for an empty box, NaN or anything that is not a number."""
    try:
        typed = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if typed != typed else typed


def k_chosen(value):
    """The visitor's own k after an edit of the k slider, for :func:`drafter_changed` to put back: ``value`` (the
    raw payload, perhaps typed out of range) as an int within 1..MAX_K, as the slider clamps it; no change for an
    empty box or anything that is not a number."""
    typed = _typed_number(value)
    return gr.skip() if typed is None else int(round(min(max(typed, 1), MAX_K)))


def gate_chosen(value):
    """The visitor's own confidence gate after an edit of its slider, for :func:`drafter_changed` to keep across a
    change of drafter: ``value`` (the raw payload, perhaps typed out of range) as a float within
    0..:data:`app.inputs.MAX_CONFIDENCE`, as the slider clamps it; no change for an empty box or anything that is not
    a number."""
    typed = _typed_number(value)
    return gr.skip() if typed is None else min(max(typed, 0.0), MAX_CONFIDENCE)
