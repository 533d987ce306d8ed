"""The sweep's buttons: Measure (:func:`measure`) and Stop (:func:`stop_sweep`)."""

from __future__ import annotations

import time

import gradio as gr

from app import device, render
from app.batching.shared import NOTHING_RUNNING, JobStatus, lesson_html
from app.batching.sweep_figures import sweep_figure
from app.batching.sweep_files import write_sweep_files
from app.batching.sweep_job import REPEATS, SweepForm, sweep_work
from app.batching.sweep_lesson import sweep_lesson
from app.batching.sweep_reading import disturbance, sweep_table
from app.device import CancelRegistry, relay
from app.inputs import InputError
from app.messages import report
from specviz.runtime.policy import PolicyError

SWEEP_OUTPUTS = ("batching-status", "batching-lesson", "batching-chart", "batching-table", "batching-csv",
                 "batching-json")
"""What :func:`measure` yields, in order (the components' elem_ids)."""
SWEEPS = CancelRegistry()  # this tab's sweeps, one per session


def _sweep_out(status=None, lesson=None, chart=None, table=None, csv_file=None, json_file=None) -> tuple:
    """An output tuple in :data:`SWEEP_OUTPUTS` order; None leaves a component as it is."""
    values = (status, lesson, None if chart is None else gr.update(value=chart, visible=True), table, csv_file,
              json_file)
    return tuple(gr.skip() if v is None else v for v in values)


def measure(form: SweepForm, progress=gr.Progress(), request: gr.Request = None):
    """The Measure button: validate the form, wait for the device, run the sweep there; yields
    :data:`SWEEP_OUTPUTS` tuples (status updates, then the table, chart, lesson and both files, also after a Stop)."""
    try:
        s = form.parse()
    except (InputError, PolicyError) as error:
        yield _sweep_out(status=report("checking the batching inputs", error))
        return
    job = device.start(SWEEPS, request, f"the batch-size sweep is running on '{s.models.target}'")
    shown = JobStatus(progress, lambda status: _sweep_out(status=status), "Measuring")
    try:
        yield _sweep_out(status=render.status_html("Starting the batch-size sweep…", "busy"))
        result = None
        if (yield from relay(job.turn(), shown.waiting)):
            result = yield from relay(job.call(sweep_work, job, s, stoppable=True), shown.show)
        yield _swept(result, time.monotonic() - shown.started)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _sweep_out(status=report("batch sweep", error))
    finally:
        job.release()  # also when Gradio closes this handler: the sweep stops before its next forward


# Gradio's handler of the Measure button (its API description is the docstring): the controls' values, named by
# ``inputs_kwargs`` as the fields of :class:`SweepForm`, become one form for :func:`measure`.
def on_measure(progress=gr.Progress(), request: gr.Request = None, **controls):
    """The Measure button: validate, wait for the device, run the sweep there; yields :data:`SWEEP_OUTPUTS`
    tuples (status updates, then the table, chart, lesson and both files, also after a Stop)."""
    yield from measure(SweepForm(**controls), progress, request)


def _swept(result: dict | None, seconds: float) -> tuple:
    """The final outputs: table, chart, lesson and files; or why there is nothing to show."""
    if result is None or not result["rows"]:
        return _sweep_out(status=render.status_html("Stopped before the first batch size finished: nothing to "
                                                    "show.", "info"))
    result["wall_s"] = round(seconds, 1)
    csv_path, json_path = write_sweep_files(result)
    busy = disturbance(result)
    sizes = ", ".join(str(r["batch"]) for r in result["rows"])
    head = (f"Stopped after B = {sizes} ({seconds:.0f} s); the downloads hold those." if result["stopped"] else
            f"Measured B = {sizes} in {seconds:.0f} s on {result.get('label', 'the target')} ({result['device']}): "
            f"k = {result['k']}, {result['max_new_tokens']} new tokens per row, {REPEATS} interleaved repeats per "
            "B, medians.")
    status = render.status_html(head + (f" · warning: {busy}: a gain may be smaller on a quiet machine" if busy
                                        else ""),
                                "info" if result["stopped"] else "done")
    return _sweep_out(status, lesson_html(sweep_lesson(result)), sweep_figure(result), sweep_table(result),
                      gr.update(value=csv_path, visible=True), gr.update(value=json_path, visible=True))


def stop_sweep(request: gr.Request = None) -> str:
    """The sweep's Stop button: flag this session's sweep (it ends before its next forward and shows the batch
    sizes that finished; "Nothing is running." when there is no sweep of this session to stop)."""
    if not SWEEPS.cancel(request):
        return render.status_html(NOTHING_RUNNING, "info")
    return render.status_html("Stopping…", "info")
