"""Runs on the model, through the app's device runner (:mod:`app.device`): validating a run's settings
(:func:`parse`), recording a run for step mode (:func:`record`, :func:`record_walkthrough`) and the what-if's run
pairs (a speculative run and its baseline). Each job carries its cancel flag into the engine; a failure becomes the
tab's one-line status (:func:`failed`)."""

from __future__ import annotations

import functools
import time
from typing import Callable, Mapping

import gradio as gr

from app import render
from app.classroom.recordings import opened, recording_meta, summary
from app.classroom.stepping import stop_playing
from app.classroom.walkthroughs import DEFAULTS, FIELDS, STEP_MAX_NEW_TOKENS, recorded_menu, walkthrough_settings
from app.device import Job, load_target, relay, waiting_status
from app.estimates import threads_note
from app.inputs import InputError, Settings, fit_prompt_for, fit_settings_exit_layer, parse_settings
from app.messages import report
from specviz.analysis.recording import RecordingFile
from specviz.analysis.stepper import Recorder, Stepper
from specviz.core.engine import speculative_generate, standard_generate
from specviz.core.race import race
from specviz.drafters.registry import make_drafter


def parse(values: Mapping[str, object], *, limit: int = STEP_MAX_NEW_TOKENS) -> Settings:
    """Validate a classroom run's settings (``values``: :data:`FIELDS` by name; a missing one takes its
    :data:`DEFAULTS` value) through :func:`app.inputs.parse_settings`; a classroom run needs a drafter and at most
    ``limit`` new tokens; its repetition penalty (1 = off) applies to the target and the draft alike, so the step
    view's p and q are the penalized ones. Raises :class:`app.inputs.InputError`."""
    (prompt, drafter, exit_layer, draft_model, k, temperature, seed, max_new_tokens, target,
     repetition_penalty) = (values.get(name, DEFAULTS[name]) for name in FIELDS)
    if drafter == "none" or not drafter:
        raise InputError("The classroom needs a drafter: pick one (n-gram lookup needs no model).")
    try:
        tokens = int(float(max_new_tokens))
    except (TypeError, ValueError):
        raise InputError("Max new tokens must be a whole number.") from None
    if tokens > limit:
        raise InputError(f"Keep it short in the classroom: at most {limit} new tokens (got {tokens}).")
    return parse_settings(dict(prompt=prompt, target=target, drafter=drafter, draft_model=draft_model,
                               exit_layer=exit_layer, k=k, adaptive_k=False, temperature=temperature, top_p=1.0,
                               top_k=0, seed=seed, max_new_tokens=max_new_tokens, stop_strings="", chat_template=True,
                               repetition_penalty=repetition_penalty))


def _prepare(settings: Settings, say: Callable[[object], None], work: str = "run"):
    """Load the target and a fresh drafter, and encode the prompt: (target, drafter, prompt ids, note, settings
    as run). An
    early-exit layer the loaded target lacks is fitted to its layers, as in Live
    (:func:`app.inputs.fit_settings_exit_layer`): the note says so, before the prompt's note ("" when neither has
    one). When other programs' work caps the threads, ``say`` gets ("note", the cap's note for ``work``:
    :func:`app.estimates.threads_note`; :func:`on_device` keeps it under every status). Raises InputError for a target
    with no layer to exit after, or a prompt that does not fit."""

    say(f"Loading the target {settings.target}…")
    target = load_target(settings.target, progress=say)
    threads = threads_note(target.model, work)  # fewer threads beside other programs (set by job.turn)
    if threads:
        say(("note", threads))
    settings, layer_note = fit_settings_exit_layer(settings, target)
    say("Preparing the drafter…")
    drafter = make_drafter(settings.drafter, target, draft_spec=settings.draft_model, exit_layer=settings.exit_layer,
                           window=settings.window, ngram=settings.ngram, candidates=settings.candidates, progress=say)
    prompt_ids, prompt_note, _ = fit_prompt_for(settings, target, drafter)
    note = " ".join(n for n in (layer_note, prompt_note) if n)
    return target, drafter, prompt_ids, note, settings


def _record_work(settings, job: Job):
    """In the job's thread: record a run (:func:`record_settings`). Module-level, so it can run in a ZeroGPU
    worker (:mod:`app.zerogpu`)."""
    return record_settings(settings, job.say, job.cancel)


def whatif_work(settings, k_max: int, job: Job):
    """In the job's thread: one greedy run at ``k_max`` and one of standard decoding: (spec events, base events).
    The analysis (:func:`specviz.analysis.whatif.analyze`, its bootstrap included) runs after the job, so the device
    is held only while the model computes."""
    target_model, drafter_obj, prompt_ids, note, _ = _prepare(settings, job.say)
    job.say(f"{note + ' ' if note else ''}Running k = {k_max} and standard decoding (greedy, "
            f"{settings.max_new_tokens} tokens)…")
    return _run_pair(target_model, drafter_obj, prompt_ids, settings.config(), job.cancel)


def rerun_work(settings, k: int, job: Job):
    """In the job's thread: the what-if's check, a run at the recommended ``k`` and standard decoding."""
    target_model, drafter_obj, prompt_ids, note, _ = _prepare(settings, job.say)
    job.say(f"{note + ' ' if note else ''}Re-running at k = {k} and standard decoding…")
    return _run_pair(target_model, drafter_obj, prompt_ids, settings.config(), job.cancel)


def _run_pair(target, drafter, prompt_ids, config, cancel) -> tuple[list, list]:
    """The speculative run and its baseline, interleaved by their own clocks (:func:`specviz.core.race.race`);
    both check ``cancel`` before every forward (raising RunCancelled)."""
    spec, base = [], []
    for event in race(speculative_generate(target, drafter, prompt_ids, config, cancel=cancel),
                      standard_generate(target, prompt_ids, config, cancel=cancel)):
        (spec if event.run == "speculative" else base).append(event)
    return spec, base


def on_device(work: Callable[[Job], object], what: str, width: int, notes: list[str] | None = None):
    """Run ``work(job)`` on the device in a job's thread; yield output tuples of ``width`` with the status second
    (the place in line while waiting, then the latest message ``work`` gave :meth:`Job.say`, every 0.25 s; a
    ("note", text) it gave, such as the thread cap's (:func:`_prepare`), stands under each status from then on and is
    added to ``notes``, for the caller's final status). Returns ``work``'s result, or None when the run was cancelled
    (the handler went away: ``work`` passes the job's flag to the engine, which then starts no other forward);
    re-raises its error."""
    skip = gr.skip()
    job = Job(what, session="classroom")
    latest, started = ["Starting…"], time.monotonic()
    said = notes if notes is not None else []

    def status(html_status: str) -> tuple:
        return (skip, html_status) + (skip,) * (width - 2)

    def show(item) -> tuple:
        if isinstance(item, str):
            latest[0] = item
        elif isinstance(item, tuple) and item[0] == "note" and item[1] not in said:
            said.append(item[1])
        return status(render.status_html(f"{latest[0]} ({time.monotonic() - started:.0f} s)", "busy", notes=said))

    try:
        if not (yield from relay(job.turn(), lambda place: status(waiting_status(place.ahead, place.holder)))):
            return None
        started = time.monotonic()
        return (yield from relay(job.call(work, job, stoppable=True), show))
    finally:
        job.release()


def failed(error: BaseException) -> str:
    """The error status of a failed classroom run (logged; the tab's status line says it)."""
    return report("classroom run", error)


def record_settings(settings: Settings, say: Callable[[object], None] = lambda message: None, cancel=None):
    """Record one run with ``settings`` (loads the target and the drafter): (Recording, note on the layer and the
    prompt, the early-exit layer it ran at: the asked one fitted to the target's layers). ``say`` gets the progress
    lines and the thread cap's ("note", text) (:func:`_prepare`).
    ``cancel``: the job's flag (RunCancelled before the next forward once it is set)."""
    target_model, drafter_obj, prompt_ids, note, settings = _prepare(settings, say, "recording")
    say("Recording the run…")
    recorder = Recorder(target_model, drafter_obj, prompt_ids, settings.config(), cancel=cancel)
    for event in recorder.events():
        say(recording_progress(event.index, event.num_generated))
    return recorder.recording(), note, settings.exit_layer


def recording_progress(index: int, generated: int) -> str:
    """The status while a run records: "Recording… pass 3, 7 tokens"; pass 0 is the prompt's prefill, which
    gives the first token ("Recording… prompt read, 1 token"; a trial read "pass 0, 1 tokens")."""
    what = "prompt read" if index == 0 else f"pass {index}"
    return f"Recording… {what}, {generated} token{'' if generated == 1 else 's'}"


def record(*fields):
    """"Record run": validate, record a run on the device, then show its first step. ``fields``: the settings in
    :data:`FIELDS` order (the tab's inputs; the repetition penalty may be left out: 1, off).
    Yields (stepper state, status, progress, caption, table, chart, output, download)."""
    skip = gr.skip()
    values = dict(zip(FIELDS, fields))
    notes: list[str] = []  # the thread cap's, said while the run records (on_device)
    try:
        settings = parse(values)
        recorded = yield from on_device(functools.partial(_record_work, settings),
                                        "the classroom is recording a run", 8, notes)
    except Exception as error:  # noqa: BLE001 - any failure is a message, the tab stays usable
        yield (skip, failed(error), skip, skip, skip, skip, skip, skip)
        return
    if recorded is None:  # cancelled: the handler is gone
        return
    recording, note, values["exit_layer"] = recorded  # the file names the layer the run used
    file = RecordingFile(recording, recording_meta(values))
    stepper, status, *rest = opened(file, "Recorded")
    if note or notes:
        status = render.status_html(f"Recorded: {summary(recording)}.", "done", notes=[note, *notes])
    yield (stepper, status, *rest)


RECORD_PRESSED = "Record run: your run is in line for the model; its place and progress follow here."
"""The status the moment Record run is pressed, before the queued run says its place in line (a trial on a busy
machine saw the old "Recorded run" line for 15 s after the click, with nothing saying a run was coming)."""


def record_pressed() -> tuple:
    """What Record run's click sends at once, outside the queue: Play paused (:func:`stop_playing`) and the status
    :data:`RECORD_PRESSED`. Returns (playing, timer, play button, status HTML)."""
    return (*stop_playing(), render.status_html(RECORD_PRESSED, "wait"))


def record_run(walkthrough_id: str, *fields):
    """"Record run" as the tab wires it: :func:`record`'s outputs, then the walkthrough menu and its note, which
    change only when the recorded run opens (:func:`app.classroom.walkthroughs.recorded_menu`): until then the menu
    keeps naming the run on the stage, and a failed or cancelled run changes neither. ``fields``: the settings in
    :data:`FIELDS` order. Yields (stepper state, status, progress, caption, table, chart, output, download, menu,
    note)."""
    skip = gr.skip()
    run = record(*fields)
    try:
        for out in run:
            opened_now = isinstance(out[0], Stepper)  # the run recorded and opened: the last output
            yield (*out, *(recorded_menu(walkthrough_id, fields) if opened_now else (skip, skip)))
    finally:
        run.close()  # a closed handler stops the run (its job's cancel flag) at once


def record_walkthrough(walkthrough: dict, target: str = "embedded",
                       say: Callable[[str], None] = lambda message: None) -> RecordingFile:
    """Record a walkthrough's run as the Classroom would (on ``target``), with the file's meta: how the shipped
    recordings are made (``scripts/record_walkthroughs.py``) and checked."""
    values = {**walkthrough_settings(walkthrough), "target": target}
    recording, _, values["exit_layer"] = record_settings(parse(values), say)
    return RecordingFile(recording, recording_meta(values, walkthrough))
