"""The Measure and Stop buttons. :func:`measure` waits for its turn on the device (:mod:`app.device`: it takes
turns with every other tab's runs), loads the target and runs :func:`specviz.measure.grid.measure_forward_grid`
(with the job's cancel flag as ``should_stop``, so Stop (:func:`stop`) or a closed handler ends it before its next
forward) and :func:`specviz.measure.costs.measure_draft_costs` in the job's thread; before the grid, a few forwards
timed here (:func:`specviz.measure.grid.probe_forward_ms`) give the status its estimate of the whole measurement.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time

import gradio as gr

from app import device, render
from app.estimates import MIN_SPREAD, Estimate, fresh_estimate, make_estimate, progress_text, threads_note
from app.device import CancelRegistry, Job, load_target, relay, session_key
from app.endings import FLAGGED, Endings, until_stopped
from app.inputs import InputError, check_models, fit_loaded_exit_layer, parse_exit_layer
from app.messages import report
from app.stop_marks import stopped_in_queue
from app.why.cards import summary_html
from app.why.controls import DEFAULT_C, c_change_text, c_top, measured_c, run_point, whatif
from app.why.figures import forward_figure
from app.why.history import latest_run, lookahead_settings, run_c
from app.why.noise import _times, impossible_text, within_noise_text
from app.why.offload import ROUNDS, WARMUP, add_offload_lines, measure_offloaded, offload_html
from app.why.plan import measure_seconds, remember_probe, remember_took
from app.why.weights import ROUNDS as FORMAT_ROUNDS, WARMUP as FORMAT_WARMUP
from app.why.weights import measure_formats, weights_figure, weights_html
from specviz.measure.costs import measure_draft_costs
from specviz.measure.grid import BATCH_SIZES, TOKEN_COUNTS, measure_forward_grid, probe_forward_ms
from specviz.measure.machine import CpuShare, busy_machine_warning
from specviz.runtime.policy import PolicyError, current_policy


log = logging.getLogger("specviz.app.why")

OUTPUTS = ("why-status", "why-chart", "why-summary", "why-weights-chart", "why-measurement", "why-c", "why-batch",
           "why-whatif-chart")
"""What :func:`measure` yields, in order (the components' elem_ids; why-measurement is the gr.State)."""


STATUS_INTERVAL_S = 1.0
RUNS = CancelRegistry()  # the tab's measurements, one per session
OFFLOAD_ROUNDS = ROUNDS + WARMUP  # the offloaded curve's rounds (app.why.offload), the warm-up included
FINISHED: dict[str, list[int]] = {}
"""Session key ("" without a request) -> the batch sizes of its running measurement whose forward times are done,
in order (:class:`FinishedBatches`), taken by :func:`stop` before it flags the measurement: the flagged handler
sends nothing more (:func:`app.endings.until_stopped`), so only Stop can say what had finished."""
STOP_WAIT_S = 5.0
"""How long Stop's second handler (:func:`stop_said`) waits for the flagged measurement's handler to end (it
notices the flag within a tick, :data:`app.device.TICK_S`, and ends; the device is freed once the forward in
progress has ended)."""
ENDED = Endings()  # session -> its latest measurement's handler has ended (Stop's second line waits for it)
_BATCH_LINE = re.compile(r"batch (\d+): ")


class FinishedBatches:
    """Follows a measurement's progress lines ("batch 4: warming up", from
    :func:`specviz.measure.grid.measure_forward_grid`) into :data:`FINISHED` under ``key``: a batch size is done once
    another one starts (the next, or an earlier one measured again: "batch 1: measuring again …"), the last one once
    the drafters are timed ("Timing the drafters (c)…"). Once Stop has taken the entry (or a newer measurement of the
    session has its own), lines read later no longer reach :data:`FINISHED`."""

    def __init__(self, key: str) -> None:
        self.key, self.current, self.done = key, None, []
        FINISHED[key] = self.done

    def line(self, message: str) -> None:
        """Read one progress line."""
        done = self.done
        found = _BATCH_LINE.match(message or "")
        if found:
            batch = int(found.group(1))
            if self.current is not None and batch != self.current and self.current not in done:
                done.append(self.current)  # the next batch size began, or a re-measurement after the last
            self.current = batch
        elif (message or "").startswith("Timing the drafters") and self.current is not None:
            if self.current not in done:
                done.append(self.current)

    def close(self) -> None:
        """The measurement's handler ended (finished, failed or stopped; Stop took the entry before it flagged the
        measurement): nothing of it is left for a later Stop to say. A newer measurement's entry stays."""
        if FINISHED.get(self.key) is self.done:
            FINISHED.pop(self.key, None)


def _out(status=None, chart=None, summary=None, state=None, c=None, batch=None, whatif_fig=None,
         weights_fig=None) -> tuple:
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is (a chart shows when given)."""
    chart = None if chart is None else gr.update(value=chart, visible=True)
    weights_fig = None if weights_fig is None else gr.update(value=weights_fig, visible=True)
    return tuple(gr.skip() if v is None else v
                 for v in (status, chart, summary, weights_fig, state, c, batch, whatif_fig))


def _measure_inputs(target, exit_layer) -> tuple[str, int | None]:
    """(target spec, early-exit layer or None for half the layers). Raises InputError, or PolicyError for a
    model the operator does not allow."""
    spec = (target or "").strip()
    if not spec:
        raise InputError("Give a target model: 'embedded', a hub id or a local folder.")
    check_models(spec, None, current_policy())  # the operator's model policy (specviz.runtime.policy)
    return spec, parse_exit_layer(exit_layer)


@dataclasses.dataclass(frozen=True)
class MeasureInputs:
    """What the Measure button sends, in the order of its API (``why_measure``): the raw values of the target box,
    the early-exit layer box (0 or empty: half the layers), α and the three run boxes (their text, for the what-if
    chart drawn at the end) and the Live tab's run history (None without one), which names the lookahead settings
    whose pass cost the cards show (:func:`app.why.history.lookahead_settings`), and ``offload``: whether to also
    time the target with its layers offloaded (:mod:`app.why.offload`; off by default), ``weights``: whether to
    also time the step in each weight format (:mod:`app.why.weights`; off by default), and ``c``: the what-if's draft
    cost as the press found it (None: unknown), which the status names when Measure changes it
    (:func:`app.why.controls.c_change_text`)."""

    target: str | None
    exit_layer: object
    alpha: object
    run_k: object
    run_tpp: object
    run_speedup: object
    history: list[dict] | None = None
    offload: bool = False
    weights: bool = False
    c: object = None


MEASURE_INPUTS = tuple(field.name for field in dataclasses.fields(MeasureInputs))
"""The Measure button's inputs by name, in its API's order (:class:`MeasureInputs`)."""


def measure(*values, progress=gr.Progress(), request: gr.Request = None, **named):
    """:func:`measure_from` for Python callers: the fields of :class:`MeasureInputs` given positionally or by name
    (``measure("embedded", 0, 0.7, "", "", "")``). Raises TypeError, on the first ``next``, for a missing or an
    unknown field."""
    yield from measure_from(MeasureInputs(*values, **named), progress, request)


def clicked(progress=gr.Progress(), request: gr.Request = None, **values):
    """The Measure button: the forward-time grid (batch sizes x new tokens) and the drafters' c on the target,
    on the device; yields :data:`OUTPUTS` tuples. ``history`` (the Live tab's runs) names the lookahead settings
    whose pass cost the cards show (:func:`lookahead_settings`)."""
    # wired with inputs_kwargs (the names of MEASURE_INPUTS): Gradio passes the progress and the request by position
    yield from measure_from(MeasureInputs(**values), progress, request)


def measure_from(inputs: MeasureInputs, progress=gr.Progress(), request: gr.Request = None):
    """The Measure button's work on ``inputs``: check them (a bad one: the status says it), wait for the
    device, measure, and yield :data:`OUTPUTS` tuples: the status while measuring, then the chart, the cards, the
    measurement, c (the early-exit drafter's), the batch choices and the what-if chart. ``request``: the session
    whose Stop or closed tab ends the measurement: once flagged, the handler ends on its own within a tick and
    sends nothing more (:func:`app.endings.until_stopped`), so Stop's status is the last word."""
    try:
        spec, layer = _measure_inputs(inputs.target, inputs.exit_layer)
    except (InputError, PolicyError) as error:
        RUNS.take_queued(request)  # a Stop pressed while this one was queued is spent: the next one runs as asked
        yield _out(status=render.status_html(str(error), "error"))
        return
    job = device.start(RUNS, request, f"the forward-time curve is being measured on '{spec}'")
    if job.cancelled:  # Stop was pressed while it waited in Gradio's queue (app.stop_marks): its own line, as a
        job.release()  # handler that sends nothing at all leaves Gradio's outputs blank
        yield _out(status=render.status_html(stopped_in_queue("measurement", reached=True), "info"))
        return
    ended = ENDED.going(job.session)
    try:  # nothing is sent after the flag: Stop's status (stop, then stop_said) is the last word
        yield from until_stopped(_measure_job(job, inputs, (spec, layer), progress, request), job)
    finally:
        ENDED.ended(job.session, ended)


def _measure_job(job: Job, inputs: MeasureInputs, target: tuple[str, int | None], progress, request):
    """:func:`measure_from` once the inputs are valid and ``job`` made: wait for the device and measure ``target``
    (spec, early-exit layer); any failure is one message. The job is released however this ends (closed, too: the
    grid stops before its next forward)."""
    started, cpu = time.monotonic(), CpuShare()
    finished = FinishedBatches(session_key(request) or "")
    try:
        yield _out(status=render.status_html("Measuring…", "busy"))
        measurement = yield from _measure_on_device(job, (*target, bool(inputs.offload), bool(inputs.weights)),
                                                    progress, started, finished)
        if measurement is not None:  # None: stopped while waiting for the device (Stop's status says so)
            yield _measured(measurement, time.monotonic() - started, inputs.alpha, inputs.run_k, inputs.run_tpp,
                            inputs.run_speedup, history=inputs.history, press=Press(cpu, inputs.c))
    except Exception as error:  # noqa: BLE001 - any failure becomes a message
        yield _out(status=report("measurement", error))
    finally:
        job.release()  # also when closed: the grid stops before its next forward
        finished.close()  # Stop took what had finished before it flagged the measurement


def _measure_on_device(job: Job, work: tuple[str, int | None, bool, bool], progress, started: float,
                       finished: FinishedBatches | None = None):
    """Wait for the device, then run :func:`_measure_work` in the job's thread on ``work`` (spec, early-exit layer,
    offload, weights), feeding the progress bar, ``finished`` (the batch sizes done, for Stop) and a "Measuring…"
    status about every :data:`STATUS_INTERVAL_S` seconds, and, once the job is flagged, :data:`app.endings.FLAGGED`
    every tick (the handler ends at it); returns the measurement (None when stopped while waiting). The thread cap's
    note (``("threads", text)`` from the job: :func:`app.estimates.threads_note`) stands under every status from then
    on."""
    state = {"message": "", "last": 0.0, "estimate": None, "note": "", "notes": []}

    def waiting(place) -> tuple:
        return _out(status=render.status_html(f"Waiting for the device… ({place.holder or 'another run holds it'})",
                                              "wait"))

    def show(item) -> tuple | object | None:
        if job.cancelled:  # every tick until the job's thread ends: the handler ends at once (until_stopped)
            return FLAGGED
        now = time.monotonic()
        if item is not None and item[0] == "estimate":  # the first forward's timing: the whole measurement's length
            state["estimate"] = fresh_estimate(item[1]) if item[1] is not None else None
            state["last"] = 0.0
        elif item is not None and item[0] == "remaining":  # seconds still to go, timed by the offloaded part
            left = now - started + item[1]
            state["estimate"], state["last"] = make_estimate(left, left * MIN_SPREAD[0], left * MIN_SPREAD[1]), 0.0
        elif item is not None and item[0] == "note":  # the early-exit layer fitted to the target: said in every
            state["note"], state["last"] = f" {item[1]}", 0.0  # status from now on, the final one too (_measured)
        elif item is not None and item[0] == "threads":  # fewer threads beside other programs: under every status
            state["notes"], state["last"] = [item[1]], 0.0
        elif item is not None:  # ("progress", (fraction, message)): gr.Progress works in the handler's thread only
            fraction, state["message"] = item[1]
            progress(fraction, desc=state["message"])
            if finished is not None:
                finished.line(state["message"])
            return None
        if now - state["last"] < STATUS_INTERVAL_S:
            return None
        state["last"] = now
        return _out(status=render.status_html(
            _measuring(state["message"], now - started, state["estimate"]) + state["note"], "busy",
            notes=state["notes"]))

    if not (yield from relay(job.turn(), waiting)):
        return None
    return (yield from relay(job.call(_measure_work, job, *work, stoppable=True), show))


def _measuring(message: str, seconds: float, estimate: Estimate | float | None) -> str:
    """The status text while measuring: the step, the seconds so far and, once the first forwards were timed,
    the expected length of the whole measurement with its range (:func:`app.estimates.progress_text`; a number of
    seconds: :func:`app.estimates.fresh_estimate` of it at an unknown load)."""
    if estimate is None:
        return f"Measuring… {message} ({seconds:.0f} s; timing a first forward to tell how long this will take)"
    if not isinstance(estimate, Estimate):
        estimate = fresh_estimate(float(estimate), None)
    return f"Measuring… {message} ({progress_text(seconds, estimate, ESTIMATE_SOURCE)})"


ESTIMATE_SOURCE = "estimated from the first forwards timed here just now"
"""How the measurement's estimate was made, said beside it until it is passed (:func:`app.render.elapsed_text`)."""


def _measure_work(job: Job, spec: str, layer: int | None, offload: bool = False, weights: bool = False) -> dict:
    """In the job's thread: load the target, time the forward grid (stopping when the job is cancelled) and, when
    it completed, the drafters' c. An early-exit layer the loaded target lacks is fitted to its layers
    (:func:`app.inputs.fit_loaded_exit_layer`) and the note is said at once (``("note", text)`` to the job). Returns
    {"grid", "costs" (None when stopped), "label", "note" (the layer's note or None), "offload" (with ``offload``
    and a completed grid: :func:`_offload_work`'s, else None), "weights" (with ``weights`` and a completed grid:
    :func:`_weights_work`'s, else None), "threads" (the thread cap's note, :func:`app.estimates.threads_note`, said at
    once as ``("threads", text)``; "" without a cap)}. Raises InputError for a target with no layer to exit after."""

    def say(fraction: float, message: str) -> None:
        job.say(("progress", (fraction, message)))

    say(0.0, f"Loading the target {spec}…")
    loaded = load_target(spec, progress=lambda message: say(0.0, message))
    layer, note = fit_loaded_exit_layer(layer, loaded)  # out of the target's range: its nearest layer, said
    if note:
        job.say(("note", note))
    threads = threads_note(loaded.model, "measurement")  # fewer threads beside other programs (set by job.turn)
    if threads:
        job.say(("threads", threads))
    say(0.0, "Timing a first forward…")
    began = time.monotonic()
    probe = probe_forward_ms(loaded, (1, max(TOKEN_COUNTS)))
    remember_probe(spec, probe)  # the next estimate before a press (app.why.plan) reads it
    job.say(("estimate", measure_seconds(probe)))
    grid = measure_forward_grid(loaded, token_counts=TOKEN_COUNTS, batch_sizes=BATCH_SIZES, bandwidth=True,
                                progress=lambda f, m: say(0.9 * f, m), should_stop=job.should_stop)
    costs = None
    if not grid["stopped"] and grid["step_ms"] and not job.should_stop():  # closed after the grid's last forward
        say(0.92, "Timing the drafters (c)…")
        first = min(grid["ms"])
        costs = measure_draft_costs(loaded, grid["step_ms"], exit_layer=layer,
                                    step_repeats=grid.get("samples", {}).get(first, {}).get(1, ()))
        remember_took(spec, time.monotonic() - began, measure_seconds(probe))  # the next plan learns its miss
    curves = _offload_work(job, spec) if offload and costs is not None else None
    formats = _weights_work(job, loaded, grid) if weights and costs is not None and not job.should_stop() else None
    return {"grid": grid, "costs": costs, "label": loaded.label, "note": note, "offload": curves, "weights": formats,
            "threads": threads}


def _offload_work(job: Job, spec: str) -> dict | None:
    """In the job's thread: :func:`app.why.offload.measure_offloaded` with its progress on the bar (at 0.95) and,
    from its second round on, the seconds still to go (``("remaining", s)``: the rounds timed so far, per round); until
    then no estimate (``("estimate", None)``)."""
    rounds: list[float] = []  # when each round ended
    job.say(("estimate", None))  # the grid's estimate did not count this part: said again once rounds are timed

    def say(message: str) -> None:
        job.say(("progress", (0.95, message)))
        if "round" in message:
            rounds.append(time.monotonic())
            if len(rounds) > 1:
                each = (rounds[-1] - rounds[0]) / (len(rounds) - 1)
                job.say(("remaining", each * max(0, OFFLOAD_ROUNDS - len(rounds))))

    return measure_offloaded(spec, say, job.should_stop)


def _weights_work(job: Job, loaded, grid: dict) -> dict | None:
    """In the job's thread: :func:`app.why.weights.measure_formats` on ``loaded`` with the grid's copy bandwidth, its
    progress on the bar (at 0.97) and, from its second round on, the seconds still to go (``("remaining", s)``)."""
    rounds: list[float] = []
    job.say(("estimate", None))  # the grid's estimate did not count this part

    def say(message: str) -> None:
        job.say(("progress", (0.97, message)))
        if "round" in message:
            rounds.append(time.monotonic())
            if len(rounds) > 1:
                each = (rounds[-1] - rounds[0]) / (len(rounds) - 1)
                job.say(("remaining", each * max(0, FORMAT_ROUNDS + FORMAT_WARMUP - len(rounds))))

    return measure_formats(loaded, grid.get("copy_bandwidth_gbs"), say, job.should_stop)


@dataclasses.dataclass(frozen=True)
class Press:
    """What a Measure press found besides its inputs, for its finished status: ``cpu``, other programs' share of the
    CPUs while it ran (None: unknown), and ``c``, the what-if's draft cost when it was pressed (None: unknown)."""

    cpu: CpuShare | None = None
    c: object = None


def _measured(measurement: dict, seconds: float, alpha, run_k, run_tpp, run_speedup, history=None,
              press: Press = Press()) -> tuple:
    """The outputs of a finished measurement: status, forward chart, summary cards, the state, c (set to the Live
    tab's latest run's drafter's when this tab measures it, an n-gram lookup's (:func:`app.why.history.run_c`), else
    to the early-exit drafter's, the slider's end moved to hold it: :func:`c_top`), the batch choices and the what-if
    chart with the measured costs. ``history``: the Live tab's runs (None without them), which also name the
    lookahead settings whose pass cost the cards show (:func:`app.why.history.lookahead_settings`). ``press``: the
    CPUs' load while it ran and c as the press found it; the status says from what to what c moved, and why
    (:func:`c_change_text`)."""
    grid, costs = measurement["grid"], measurement["costs"]
    ngram = run_c(latest_run(history), measurement) if costs else None
    c = ngram if ngram is not None else measured_c(costs, "early-exit") if costs else None
    changed = "" if c is None else " " + c_change_text(press.c, c, "early-exit" if ngram is None else "ngram", costs)
    busy = busy_machine_warning(press.cpu)
    again = grid.get("remeasured") or []
    counts = grid.get("measurements") or {}
    again_text = (f" Batch size{'s' if len(again) > 1 else ''} {', '.join(map(str, again))} measured again "
             f"({', '.join(f'{b}: {_times(counts.get(b, 2))}' for b in again)}): a point came out faster than less "
             "work." if again else "")
    flagged = " ".join(t for t in (impossible_text(grid), within_noise_text(grid)) if t)
    fitted = f"{measurement['note']} " if measurement.get("note") else ""  # the early-exit layer, fitted
    offload = measurement.get("offload")
    if offload:  # asked for: drawn beside the whole target's curve, or its failure in one sentence
        again_text += f" {offload['error']}" if "error" in offload else " The offloaded curve is drawn on the right."
    formats = measurement.get("weights")
    if formats:  # asked for: its own chart below the cards, or its failure in one sentence
        again_text += f" {formats['error']}" if "error" in formats else " The weight formats are drawn below."
    status = render.status_html(
        f"{fitted}Measured in {seconds:.0f} s on {measurement['label']} ({grid['settings']['repeats']} "
        f"repeats per point, median; prompt of {grid['settings']['prompt_len']} tokens). The what-if chart now "
        f"uses these costs.{changed}{again_text}" + (f" {flagged}" if flagged else "")
        + (f" · {busy}" if busy else ""), "info" if flagged else "done", notes=[measurement.get("threads") or ""])
    figure = whatif(alpha, c if c is not None else DEFAULT_C, 1, run_k, run_tpp, run_speedup, measurement)
    offload_text = offload_html(offload, alpha, run_point(run_k, run_tpp, run_speedup))
    cards = summary_html(grid, costs, lookahead_settings(history))
    return _out(status, add_offload_lines(forward_figure(grid), offload),
                cards + offload_text + weights_html(formats, busy), measurement,
                gr.update(value=c, maximum=c_top(measurement)) if c is not None else None,
                gr.update(choices=[(f"batch {b}", b) for b in grid["ms"]], value=min(grid["ms"]), interactive=True),
                figure, weights_figure(formats) if formats and "error" not in formats else None)


STOPPED = ("Stopped before anything was measured, and the device is free; press Measure to time the forward-time "
           "curve.")
"""The Stop button's status when this session has no earlier measurement (the chart shows none of its own)."""
STOPPED_KEPT = ("Stopped, and the device is free. The chart and c (the early-exit drafter's cost) from your earlier "
                "measurement stay; press Measure to time again.")
"""The Stop button's status when an earlier measurement of this session stays on the chart."""


def stopped_partway(batches: list[int]) -> str:
    """The Stop button's status when batch sizes ``batches`` (not empty) of the running measurement had finished:
    "Stopped after batch 1 had been measured (of batch sizes 1, 4 and 16), and the device is free. A stopped
    measurement is not drawn: the chart and c need every batch size; press Measure to time the whole curve."."""
    sizes = list(BATCH_SIZES)
    of = ", ".join(map(str, sizes[:-1])) + f" and {sizes[-1]}" if len(sizes) > 1 else str(sizes[0])
    done = ", ".join(map(str, batches[:-1])) + f" and {batches[-1]}" if len(batches) > 1 else str(batches[0])
    what = "batch" if len(batches) == 1 else "batches"
    return (f"Stopped after {what} {done} had been measured (of batch sizes {of}), and the device is free. A "
            "stopped measurement is not drawn: the chart and c need every batch size; press Measure to time the "
            "whole curve.")


STOPPED_QUEUED = stopped_in_queue("measurement")
"""The Stop button's status when the page had sent a measurement that no handler had started yet (more Arena runs
and measurements going than the server takes at once): that measurement starts flagged and sends nothing."""


def stop(measurement=None, request: gr.Request = None, sent=False) -> str:
    """The Stop button: flag this session's measurement (it starts no other forward, and its handler ends on its own
    within a tick, sending nothing more, and releases the device) and say so: what had finished when a batch size
    of the running measurement had (:func:`stopped_partway`, from :data:`FINISHED`), else :data:`STOPPED_KEPT` when
    ``measurement`` (the tab's state: the latest finished measurement, None before one) holds an earlier one, else
    :data:`STOPPED`. ``sent``: True when the page says it sent a measurement that has not ended
    (:mod:`app.stop_marks`); with none of the session registered, that one still waits in Gradio's queue: it will
    start flagged and send nothing, and the status says :data:`STOPPED_QUEUED`. Only the caller's own session is
    stopped (a call with no request at all, Python code in this process, stops the measurements started without
    one). Returns the status line."""
    key = session_key(request) or ""
    batches = FINISHED.pop(key, None) or []
    queued = sent is True and session_key(request) is not None
    flagged = RUNS.cancel(request, queued=queued)
    kept = " The chart and c from your earlier measurement stay." if measurement else ""
    if queued and not flagged:
        said = render.status_html(STOPPED_QUEUED + kept, "info")
    elif batches:
        said = render.status_html(stopped_partway(batches) + kept, "info")
    else:
        said = render.status_html(STOPPED_KEPT if measurement else STOPPED, "info")
    STOP_SAID[key] = said
    return said


STOP_SAID: dict[str, str] = {}
"""Session key -> what :func:`stop` last said, until :func:`stop_said` says it again."""


def _wait_for_the_measurement(request) -> None:
    """Wait (at most :data:`STOP_WAIT_S`) until the session's flagged measurement's handler has ended: Stop does not
    have Gradio cancel the Measure event (the empty message the server sends for a cancelled event at times left a
    red "Error" on the status), so the handler ends on its own; once it has, the browser counts it as over (Measure
    starts the next one at once) and nothing it sent can land after Stop's line."""
    ENDED.wait(session_key(request), STOP_WAIT_S)


def stop_said(request: gr.Request = None):
    """Stop's status once more (wired with ``.then`` after :func:`stop`), once the flagged measurement's handler has
    ended (:func:`_wait_for_the_measurement`): a status the measurement had in flight when Stop answered ("Measuring…
    Timing a first forward…") could land after Stop's answer; this line comes after it. Returns the line
    :func:`stop` said for this session, or ``gr.skip()`` when it said none."""
    _wait_for_the_measurement(request)
    said = STOP_SAID.pop(session_key(request) or "", None)
    return gr.skip() if said is None else said


def release_session(request: gr.Request = None) -> None:
    """When a browser tab closes: cancel that session's measurement (and no one else's)."""
    RUNS.cancel_session(request)
    FINISHED.pop(session_key(request) or "", None)
    STOP_SAID.pop(session_key(request) or "", None)
