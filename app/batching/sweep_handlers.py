"""The sweep's buttons: Measure (:func:`measure`) and Stop (:func:`stop_sweep`)."""

from __future__ import annotations

import time

import gradio as gr

from app import device, render
from app.batching.plan import pressed_sweep_plan, refusal_status
from app.batching.shared import JobStatus, lesson_html
from app.messages import NOTHING_RUNNING
from app.batching.sweep_figures import sweep_figure
from app.batching.sweep_files import write_sweep_files
from app.batching.sweep_job import DEFAULT_K, REPEATS, SweepForm, sweep_work
from app.batching.sweep_lesson import sweep_lesson
from app.batching.sweep_reading import disturbance, empty_table, grid_timings, sweep_table
from app.device import CancelRegistry, relay, session_key
from app.inputs import InputError
from app.messages import report
from app.stop_marks import stopped_in_queue
from specviz.runtime.policy import PolicyError

SWEEP_OUTPUTS = ("batching-status", "batching-lesson", "batching-chart", "batching-table", "batching-csv",
                 "batching-json")
"""What :func:`measure` yields, in order (the components' elem_ids)."""
SWEEPS = CancelRegistry()  # this tab's sweeps, one per session


def _sweep_out(status=None, lesson=None, chart=None, table=None, csv_file=None, json_file=None) -> tuple:
    """An output tuple in :data:`SWEEP_OUTPUTS` order; None leaves a component as it is; a chart given is shown, and
    so is a lesson that is not empty (:func:`_sweep_cleared` hides them)."""
    values = (status, None if lesson is None else gr.update(value=lesson, visible=bool(lesson)),
              None if chart is None else gr.update(value=chart, visible=True), table, csv_file, json_file)
    return tuple(gr.skip() if v is None else v for v in values)


def _sweep_cleared(status: str, k: int = DEFAULT_K) -> tuple:
    """An output tuple that shows ``status`` and clears an earlier sweep's lesson, chart, table (its headers for
    ``k``) and downloads, so that a refused or new sweep never sits above the results of the one before it with
    nothing saying whose they are (as the check, :func:`app.batching.check_handlers._check_cleared`). Yielded by
    each new press of Measure, refused or started. The lesson is hidden, not only emptied, as the check's
    (:func:`app.batching.check_handlers._check_cleared`: an empty block keeps its height and gaps); the empty table
    keeps its headers."""
    hidden = gr.update(value=None, visible=False)
    return status, gr.update(value="", visible=False), hidden, empty_table(k), hidden, hidden


def measure(form: SweepForm, progress=gr.Progress(), request: gr.Request = None):
    """The Measure button: validate the form, wait for the device, run the sweep there; yields
    :data:`SWEEP_OUTPUTS` tuples (status updates, then the table, chart, lesson and both files, also after a Stop)."""
    try:
        s = form.parse()
    except (InputError, PolicyError) as error:
        SWEEPS.take_queued(request)  # a Stop pressed while this one was queued is spent: the next one runs as asked
        yield _sweep_cleared(refusal_status("checking the batching inputs", error))
        return
    job = device.start(SWEEPS, request, f"the batch-size sweep is running on '{s.models.target}'")
    shown = SweepStatus(progress, lambda status: _sweep_out(status=status), "Measuring")
    plan = pressed_sweep_plan(s)  # until the probe's estimate (app.batching.plan)
    if plan is not None:
        shown.planned(plan.estimate, f"planned from {plan.source()}")
    try:
        if job.cancelled:  # Stop was pressed while it waited in Gradio's queue (app.stop_marks)
            yield _sweep_cleared(render.status_html(stopped_in_queue("sweep", reached=True), "info"), s.k)
            return
        planned = "" if plan is None else f"; {plan.short_text()}"
        yield _sweep_cleared(render.status_html(f"Starting the batch-size sweep{planned}…", "busy"), s.k)
        result = None
        if (yield from relay(job.turn(), shown.waiting)):
            result = yield from relay(job.call(sweep_work, job, s, stoppable=True), shown.show)
        if result is None:  # stopped, and the sweep's own result did not come back: what it showed stands in
            result = shown.kept()
        yield _swept(result, time.monotonic() - shown.started, shown.notes)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _sweep_out(status=report("batch sweep", error, shown.notes))  # sizes shown keep the cap's note
    finally:
        job.release()  # also when Gradio closes this handler: the sweep stops before its next forward


# Gradio's handler of the Measure button (its API description is the docstring): the controls' values, named by
# ``inputs_kwargs`` as the fields of :class:`SweepForm`, become one form for :func:`measure`.
def on_measure(progress=gr.Progress(), request: gr.Request = None, **controls):
    """The Measure button: validate, wait for the device, run the sweep there; yields :data:`SWEEP_OUTPUTS`
    tuples (status updates, then the table, chart, lesson and both files, also after a Stop)."""
    yield from measure(SweepForm(**controls), progress, request)


class SweepStatus(JobStatus):
    """:class:`JobStatus` plus the sweep's partial results: after each finished batch size the table and chart show
    the sizes so far (as the Arena shows its prompts so far), and :attr:`partial` keeps the latest, the result to
    show should a Stop end the job before its own result comes back."""

    def __init__(self, progress, out, verb: str) -> None:
        super().__init__(progress, out, verb)
        self.partial: dict | None = None
        self.grid: dict | None = None  # the predicted curve's timings, once timed (or cut short by a Stop)

    def kept(self) -> dict | None:
        """The result to show when the job's own did not come back: the latest partial result, else the timings of
        the predicted curve (no batch size measured), both marked stopped; None without either."""
        if self.partial is not None:
            return dict(self.partial, stopped=True)
        if self.grid is not None:
            settings = self.grid["settings"]
            return {**self.grid, "rows": [], "k": settings["k"], "max_new_tokens": settings["max_new_tokens"],
                    "stopped": True}
        return None

    def show(self, item) -> tuple | None:
        """The output tuple for one item of the job (None: nothing new to show)."""
        if item is not None and item[0] == "grid":
            self.grid = item[1]
            return None
        if item is None or item[0] != "partial":
            return super().show(item)
        self.partial = item[1]
        sizes = ", ".join(str(r["batch"]) for r in self.partial["rows"])
        now = f"; {self.message}" if self.message else ""
        status = render.status_html(f"{self.verb}… B = {sizes} done ({time.monotonic() - self.started:.0f} s)"
                                    f"{now}", "busy", notes=self.notes)
        return _sweep_out(status, chart=sweep_figure(self.partial), table=sweep_table(self.partial))


def stopped_text(result: dict, seconds: float) -> str:
    """The status of a sweep a Stop ended after some batch sizes: "Stopped after B = 1, 2 (40 s); not measured:
    B = 4, 8. The table, chart, lesson and downloads hold the finished sizes." (the sizes asked for are the
    result's ``settings["batch_sizes"]``)."""
    done = [r["batch"] for r in result["rows"]]
    asked = (result.get("settings") or {}).get("batch_sizes") or done
    left = [b for b in sorted(asked) if b not in done]
    return (f"Stopped after B = {', '.join(map(str, done))} ({seconds:.0f} s)"
            + (f"; not measured: B = {', '.join(map(str, left))}" if left else "")
            + ". The table, chart, lesson and downloads hold the finished sizes.")


TIMED = "(median ms of one forward, range of the repeats)"
"""How the predicted curve's timings are given in a stopped sweep's status."""
FILES_HOLD = "the downloads hold these timings"


def grid_stopped_text(result: dict, seconds: float) -> str:
    """The status of a sweep a Stop ended while it timed the predicted curve, before any batch size was measured:
    that sentence, then the T(B, 1) and T(B, k+1) it finished (:func:`grid_timings`) and the sizes not timed, or
    that none finished. ``result``: the sweep's, its "grid" as :func:`sweep_work` keeps it."""
    head = f"Stopped while timing the predicted curve ({seconds:.0f} s), before any batch size was measured"
    texts, done = grid_timings(result["grid"], result["k"])
    if not texts:
        return head + ": no batch size's timing finished, so there is nothing to show."
    asked = (result.get("settings") or {}).get("batch_sizes") or done
    left = [b for b in sorted(asked) if b not in done]
    return (f"{head}. Timed before the Stop {TIMED}: {'; '.join(texts)}"
            + (f"; not timed: B = {', '.join(map(str, left))}" if left else "")
            + ". A predicted speedup also needs B = 1's tokens per pass, measured after this timing, so there is "
            f"no chart or table; {FILES_HOLD}.")


def grid_timed_text(result: dict, seconds: float) -> str:
    """The status of a sweep a Stop ended after the predicted curve was timed in full, before its first batch
    size was measured: "Stopped after the predicted curve was timed (30 s), before the first batch size (B = 1)
    was measured. Timed (median ms of one forward, range of the repeats): B = 1: T(1,1) = 2.1 (2.0–2.3), T(1,3) =
    2.8 (2.7–2.9); B = 2: …; not measured: the speedup at B = 1, 2, so there is no chart or table; the downloads
    hold these timings." (:func:`grid_timings`). ``result``: the sweep's, its "grid" as :func:`sweep_work` keeps
    it, timed to its end."""
    texts, done = grid_timings(result["grid"], result["k"])
    asked = sorted((result.get("settings") or {}).get("batch_sizes") or done)
    return (f"Stopped after the predicted curve was timed ({seconds:.0f} s), before the first batch size "
            f"(B = {asked[0]}) was measured. Timed {TIMED}: {'; '.join(texts)}; not measured: the speedup at B = "
            f"{', '.join(map(str, asked))}, so there is no chart or table; {FILES_HOLD}.")


def _files(result: dict) -> tuple:
    """Both downloads of ``result`` (:func:`write_sweep_files`), shown."""
    csv_path, json_path = write_sweep_files(result)
    return gr.update(value=csv_path, visible=True), gr.update(value=json_path, visible=True)


def _nothing_swept(result: dict | None, seconds: float, notes=()) -> tuple:
    """The outputs of a sweep a Stop ended before any batch size was measured: the predicted curve's timings it
    kept, in the status and both downloads (:func:`grid_stopped_text`, :func:`grid_timed_text`), or why there is
    nothing to show; ``notes`` under the status."""
    grid = (result or {}).get("grid")
    if not grid or not grid_timings(grid, result["k"])[0]:
        text = (grid_stopped_text(result, seconds) if grid and grid.get("stopped") else
                "Stopped before the first batch size finished: nothing to show.")
        return _sweep_out(status=render.status_html(text, "info", notes=notes))
    result["wall_s"] = round(seconds, 1)
    text = grid_stopped_text(result, seconds) if grid.get("stopped") else grid_timed_text(result, seconds)
    return _sweep_out(render.status_html(text, "info", notes=notes), None, None, None, *_files(result))


def _swept(result: dict | None, seconds: float, notes=()) -> tuple:
    """The final outputs: table, chart, lesson and files; or what a Stop before any batch size kept. ``notes``: under
    the status (the thread cap's: :func:`app.batching.shared.say_threads`, every timing of the sweep shares it)."""
    if result is None or not result["rows"]:
        return _nothing_swept(result, seconds, notes)
    result["wall_s"] = round(seconds, 1)
    busy = disturbance(result)
    sizes = ", ".join(str(r["batch"]) for r in result["rows"])
    head = (stopped_text(result, seconds) if result["stopped"] else
            f"Measured B = {sizes} in {seconds:.0f} s on {result.get('label', 'the target')} ({result['device']}): "
            f"k = {result['k']}, {result['max_new_tokens']} new tokens per row, {REPEATS} interleaved repeats per "
            "B, medians.")
    status = render.status_html(head + (f" · warning: {busy}: a gain may be smaller on a quiet machine" if busy
                                        else ""),
                                "info" if result["stopped"] else "done", notes=notes)
    return _sweep_out(status, lesson_html(sweep_lesson(result)), sweep_figure(result), sweep_table(result),
                      *_files(result))


def stop_sweep(sent=False, request: gr.Request = None) -> str:
    """The sweep's Stop button: flag this session's sweep (it ends before its next forward and shows the batch
    sizes that finished); with none registered but ``sent`` (the page says it sent one that has not ended:
    :mod:`app.stop_marks`), that one still waits in Gradio's queue and will run nothing ("... so it will not
    run."); else "Nothing is running."."""
    queued = sent is True and session_key(request) is not None
    if SWEEPS.cancel(request, queued=queued):
        return render.status_html("Stopping…", "info")
    return render.status_html(stopped_in_queue("sweep") if queued else NOTHING_RUNNING, "info")
