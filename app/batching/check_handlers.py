"""The check's buttons: Check (:func:`check`) and Stop (:func:`stop_check`)."""

from __future__ import annotations

import time

import gradio as gr

from app import device, render
from app.batching.check_figures import check_figure
from app.batching.check_job import CheckForm, CheckSettings, check_work
from app.batching.plan import pressed_check_plan, refusal_status
from app.batching.check_reading import check_lesson, check_stats_html
from app.batching.shared import JobStatus, lesson_html
from app.messages import NOTHING_RUNNING
from app.device import CancelRegistry, relay, session_key
from app.inputs import InputError
from app.messages import report
from app.stop_marks import stopped_in_queue
from specviz.measure.machine import CpuShare, busy_machine_warning
from specviz.runtime.policy import PolicyError

CHECK_OUTPUTS = ("batching-check-status", "batching-check-lesson", "batching-check-chart", "batching-check-stats")
"""What :func:`check` yields, in order (the components' elem_ids)."""
CHECKS = CancelRegistry()  # this tab's sampling checks, one per session


def check(form: CheckForm, progress=gr.Progress(), request: gr.Request = None):
    """The Check button: validate the form, wait for the device, run the sampling check there; yields
    :data:`CHECK_OUTPUTS` tuples."""
    try:
        c = form.parse()
    except (InputError, PolicyError) as error:
        CHECKS.take_queued(request)  # a Stop pressed while this one was queued is spent: the next one runs as asked
        yield _check_cleared(refusal_status("checking the sampling check's inputs", error))
        return
    job = device.start(CHECKS, request, f"a sampling check is running on '{c.models.target}'")
    shown = JobStatus(progress, lambda status: _check_out(status=status), "Checking")
    plan = pressed_check_plan(c)  # until the first batch is done (app.batching.plan)
    if plan is not None:
        shown.planned(plan.estimate, f"planned from {plan.source()}")
    cpu = CpuShare()
    try:
        if job.cancelled:  # Stop was pressed while it waited in Gradio's queue (app.stop_marks)
            yield _check_cleared(render.status_html(stopped_in_queue("check", reached=True), "info"))
            return
        planned = "" if plan is None else plan.short_text()
        yield _check_cleared(render.status_html(f"Starting: {c.n} standard and {c.n} speculative runs"
                                                + (f"; {planned}" if planned else "") + "…", "busy"))
        result = None
        if (yield from relay(job.turn(), shown.waiting)):
            result = yield from relay(job.call(check_work, job, c, stoppable=True), shown.show)
        yield _checked(result, c, time.monotonic() - shown.started, cpu, shown.notes)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _check_out(status=report("sampling check", error, shown.notes))  # what it showed keeps the cap's note
    finally:
        job.release()


# Gradio's handler of the Check button (its API description is the docstring): the controls' values, named by
# ``inputs_kwargs`` as the fields of :class:`CheckForm`, become one form for :func:`check`.
def on_check(progress=gr.Progress(), request: gr.Request = None, **controls):
    """The Check button: validate, wait for the device, run the sampling check there; yields
    :data:`CHECK_OUTPUTS` tuples."""
    yield from check(CheckForm(**controls), progress, request)


def _check_out(status=None, lesson=None, chart=None, stats=None) -> tuple:
    """An output tuple in :data:`CHECK_OUTPUTS` order; None leaves a component as it is; a chart given is shown, and
    so is a lesson or table that is not empty (:func:`_check_cleared` hides them)."""
    values = (status, None if lesson is None else gr.update(value=lesson, visible=bool(lesson)),
              None if chart is None else gr.update(value=chart, visible=True),
              None if stats is None else gr.update(value=stats, visible=bool(stats)))
    return tuple(gr.skip() if v is None else v for v in values)


def _check_cleared(status: str) -> tuple:
    """An output tuple that shows ``status`` and hides an earlier check's verdict, chart and table: a trial ran N =
    200, then N = 20, and read the refusal of N = 20 right above the N = 200 verdict, charts and chi-square table,
    with nothing saying they were the earlier check's (the Live tab likewise hides its cards while a new run reads
    its prompt). Yielded by each new press of Check, refused or started. Each is hidden, not only emptied: an empty
    lesson and table still took their blocks' height and gaps, about 100 px between a refusal and the check's notes
    at 1400 px (a trial)."""
    return (status, gr.update(value="", visible=False), gr.update(value=None, visible=False),
            gr.update(value="", visible=False))


def _checked(result: dict | None, c: CheckSettings, seconds: float, cpu: CpuShare | None = None,
             notes=()) -> tuple:
    """The check's final outputs, or "Stopped." (``cpu``: started with the check, for the busy warning; ``notes``:
    under the status, e.g. the thread cap's, :func:`app.batching.shared.say_threads`)."""
    if result is None:
        return _check_out(status=render.status_html("Stopped.", "info", notes=notes))
    busy = busy_machine_warning(cpu)
    verifier = "a broken verifier that accepts every draft" if c.broken else "the rejection-sampling verifier"
    status = render.status_html(f"Checked in {seconds:.0f} s on {result['label']}: {c.n} standard and {c.n} "
                                f"speculative runs at temperature {c.temperature:g}, {verifier}."
                                + (f" · {busy}" if busy else ""), "done", notes=notes)
    return _check_out(status, lesson_html(check_lesson(result)), check_figure(result), check_stats_html(result))


def stop_check(sent=False, request: gr.Request = None) -> str:
    """The check's Stop button: flag this session's sampling check; with none registered but ``sent`` (the page
    says it sent one that has not ended: :mod:`app.stop_marks`), that one still waits in Gradio's queue and will
    run nothing ("... so it will not run."); else "Nothing is running."."""
    queued = sent is True and session_key(request) is not None
    if CHECKS.cancel(request, queued=queued):
        return render.status_html("Stopping…", "info")
    return render.status_html(stopped_in_queue("check") if queued else NOTHING_RUNNING, "info")
