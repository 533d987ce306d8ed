"""The Arena's buttons and menus. :func:`run` checks the inputs, waits for its turn on the device
(:mod:`app.device`: arena runs take turns with every other tab's runs), loads the target and runs
:func:`specviz.analysis.arena.iter_arena` in the job's thread with the job's cancel flag as ``should_stop`` (checked
before every target forward); it yields the tables and charts after every prompt, and the CSV and JSON downloads at
the end (also after a Stop: they then hold the prompts that finished). Every output tuple has the order of
:data:`OUTPUTS`."""

from __future__ import annotations

import dataclasses
import logging
import time

import gradio as gr

from app import device, estimates, render
from app.arena.figures import arena_figure, predictions_figure, shown_rows
from app.arena.costs import learn_arena
from app.arena.files import write_files
from app.arena.matching import sentence as matching_sentence
from app.arena.progress import UNMEASURED, ArenaEstimate, ArenaPace, rough_estimate
from app.arena.settings import TREE_NOTE, ArenaInputs, parse_inputs
from app.arena.tables import PROMPT_COLUMNS, TIMING_COLUMNS, shown_table, table
from app.arena.verdicts import (EITHER, NO_READING, SHORT_RUN, SPEED_CHANGED, cause_rule, no_finding, no_reading_cause,
                                noisy_count, noisy_rows)
from app.device import CancelRegistry, Job, load_target, relay, session_key
from app.inputs import InputError, check_exit_layer
from app.messages import nothing_to_stop, report
from app.stop_marks import stopped_in_queue
from specviz.analysis.arena import as_prompts, iter_arena
from specviz.analysis.arena_rows import TREE_SUFFIX, ArenaResult
from specviz.core.engine import GenerationConfig
from specviz.core.generation_settings import settings_summary
from specviz.core.verdict import NOISY
from specviz.core.verify import SamplingConfig
from specviz.measure.machine import CpuShare, busy_machine_warning
from specviz.runtime.policy import PolicyError
from specviz.runtime.presets import preset


log = logging.getLogger("specviz.app.arena")

OUTPUTS = ("arena-status", "arena-table", "arena-timings", "arena-prompts", "arena-charts", "arena-predictions",
           "arena-csv", "arena-json")
"""What :func:`run` yields, in order (the components' elem_ids)."""


STATUS_INTERVAL_S = 1.0  # a "still running" refresh at most this often between prompts


RUNS = CancelRegistry()  # the Arena tab's runs, one per session


def _outputs(status=None, summary=None, timings=None, prompts=None, charts=None, predictions=None, csv=None,
             json_file=None):
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is."""
    skip = gr.skip()

    def shown(figure):
        return None if figure is None else gr.update(value=figure, visible=True)

    values = (status, summary, timings, prompts, shown(charts), shown(predictions), csv, json_file)
    return tuple(skip if v is None else v for v in values)


def _failed(what: str, error: BaseException, notes=()) -> tuple:
    """The output tuple of a failed run: the message in the status line (:func:`app.messages.report`), with
    ``notes``, the running status's (the thread cap's among them), under it: the prompts it showed stay."""
    return _outputs(status=report(what, error, notes))


def _result_outputs(result: ArenaResult, status: str):
    return _outputs(status=status, summary=shown_table(shown_rows(result.summary)),
                    timings=shown_table(shown_rows(result.summary), TIMING_COLUMNS),
                    prompts=shown_table(result.rows, PROMPT_COLUMNS),
                    charts=arena_figure(result.summary), predictions=predictions_figure(result.summary))


def _done_status(result: ArenaResult, seconds: float, notes=(), cpu: CpuShare | None = None) -> str:
    """The status line of a finished (or stopped) run, with ``notes`` under it; a run that raced the early exit
    and the distilled draft gets their comparison first among the notes (:func:`app.arena.matching.sentence`)."""
    compare = matching_sentence(result.summary)
    notes = ([compare] if compare else []) + [n for n in notes if n != compare]
    same = result.ids_identical
    check = {True: " · greedy outputs identical to standard decoding ✓",
             False: " · some greedy outputs differ from standard decoding (see “Same ids”)",
             None: ""}[same]
    n = len({r["prompt_id"] for r in result.rows})
    if result.stopped:
        return render.status_html(f"Stopped after {render.plural(n, 'prompt')} in {seconds:.0f} s; the downloads "
                                  "hold those.", "info", notes=notes)
    target = result.environment.get("target", {}).get("label", "")
    busy = busy_machine_warning(cpu)
    noisy = noisy_rows(result.rows)
    drift = (f" · {noisy_count(noisy, result.rows)} no finding ({_no_finding_kinds(result.rows)}): read those "
             "ratios as noise" if noisy else "")
    methods = render.plural(len(result.variants) - 1, "method") + " and standard decoding"  # variants: baseline first
    return render.status_html(f"Done: {render.plural(n, 'prompt')} × {methods} in {seconds:.0f} s{check}"
                              f" · {target}" + (f" · {busy}" if busy else "") + drift,
                              "done" if same is not False else "info", notes=notes)


def run(*values, progress=gr.Progress(), request: gr.Request = None, **named):
    """:func:`race` for Python callers: the fields of :class:`ArenaInputs` given positionally or by name
    (``run(["ngram"], ["4"], "prompt", "Hello", None, 16, "embedded", "", 0, 0.0, 0, True)``). Raises TypeError, on
    the first ``next``, for a missing or an unknown field."""
    yield from race(ArenaInputs(*values, **named), progress, request)


def clicked(progress=gr.Progress(), request: gr.Request = None, **values):
    """The Run button: validate, wait for the device, load, race every method on every prompt; yields
    :data:`OUTPUTS` tuples (the table and charts after each prompt, the files at the end). The repetition penalty
    and min-p came last, so API clients written before them still work (both off)."""
    # wired with inputs_kwargs (the names of RUN_INPUTS): Gradio passes the progress and the request by position
    yield from race(ArenaInputs(**values), progress, request)


def race(inputs: ArenaInputs, progress=gr.Progress(), request: gr.Request = None):
    """The Run button's work on ``inputs``: check them (a bad one: the status says it), wait for the
    device, load, race every method on every prompt; yields :data:`OUTPUTS` tuples (the tables and charts after
    each prompt, the files at the end). ``request``: the session whose Stop or closed tab ends the run."""
    try:
        s = parse_inputs(inputs)
    except (InputError, PolicyError) as error:
        RUNS.take_queued(request)  # a Stop pressed while this one was queued is spent: the next one runs as asked
        yield _failed("checking the arena's inputs", error)
        return
    notes = _run_notes(s)
    methods = len(s["drafters"]) * len(s["ks"]) + 1
    prompts = render.plural(len(s["prompts"]), "prompt")
    job = device.start(RUNS, request, f"the arena is running ({prompts} × {render.plural(methods - 1, 'method')} "
                                      "and standard decoding)")  # the words of its status
    started, cpu = time.monotonic(), CpuShare()
    try:
        if job.cancelled:  # Stop was pressed while it waited in Gradio's queue (app.stop_marks)
            yield _outputs(status=render.status_html(stopped_in_queue("run", reached=True), "info"))
            return
        hidden = gr.update(visible=False)  # a previous run's results never stand beside this one's status
        rough = rough_estimate(s)
        yield _outputs(status=render.status_html(
            f"Starting: {prompts} × {render.plural(methods - 1, 'method')}, with standard decoding timed before "
            f"and after each ({2 * methods - 1} runs per prompt), {s['max_new_tokens']} new tokens each; "
            + _estimate_words(rough) + "…", "busy",
            notes=notes), summary=table([]), timings=table([], TIMING_COLUMNS),
            prompts=table([], PROMPT_COLUMNS))[:4] + (hidden,) * 4
        pace = ArenaPace([p.id for p in as_prompts(s["prompts"])], methods - 1, rough=rough)
        result = yield from _race_on_device(job, s, _Progress(progress, notes, started, pace))
        if result is not None:
            # the next estimate starts from this run's own T_step, with the load it was measured at
            learn_arena(s["target"], result.rows, estimates.machine_load())
        yield from _show_result(result, job, time.monotonic() - started, notes, cpu, pace)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _failed("arena", error, notes)
    finally:
        job.release()  # also when Gradio closes this handler: the arena stops before its next target forward


def _estimate_words(rough: ArenaEstimate | None) -> str:
    """The "Starting" status's words on time: the rough range with what it rests on, then that the time left
    follows once the first prompt is measured; :data:`app.arena.progress.UNMEASURED` without a range."""
    if rough is None:
        return UNMEASURED
    return f"{rough.range_text()} ({rough.basis_text()}); the time left follows once the first prompt is measured"


def _run_notes(s: dict) -> list[str]:
    """The notes under the status for the checked settings ``s`` (:func:`parse_inputs`): values used instead of the
    ones given (in the slider's own words, app.messages.clamped), trees drafting chains when sampling, and the
    generation settings every run uses."""
    notes = list(s["notices"])  # e.g. a max new tokens typed outside the slider's range: the value this run uses
    trees = [d for d in s["drafters"] if d.endswith(f":{TREE_SUFFIX}")]
    notes += [TREE_NOTE] if trees and s["temperature"] > 0 else []
    changed = settings_summary(SamplingConfig(repetition_penalty=s["generation"]["repetition_penalty"],
                                              min_p=s["generation"]["min_p"]))
    notes += [f"Every run (baseline, target and draft alike) uses: {changed}."] if changed else []
    return notes


def _race_on_device(job: Job, s: dict, shown: "_Progress"):
    """Wait for the device, then run :func:`_arena_work` in the job's thread, yielding status and partial
    results; returns the last result (None when stopped before any)."""
    began = time.monotonic()

    def waiting(place) -> tuple:  # the seconds change the line each second: an answer that covered it is redrawn
        return _outputs(status=render.status_html(
            f"Waiting for the device… ({place.holder or 'another run holds it'}; "
            f"{time.monotonic() - began:.0f} s so far)", "wait"))

    if not (yield from relay(job.turn(), waiting)):
        return None
    result = yield from relay(job.call(_arena_work, job, s, stoppable=True), shown.show)
    return result or shown.result


def _arena_work(job: Job, s: dict) -> ArenaResult | None:
    """In the job's thread: load the target, then race every method on every prompt (stopping before the next
    target forward once the job is cancelled). Says ("progress", (fraction, message)) and ("partial", a
    snapshot of the result so far) through the job; returns the final result (None when nothing ran).
    Raises InputError for an early-exit layer the target lacks."""

    def say_progress(fraction: float, message: str) -> None:
        job.say(("progress", (fraction, message)))

    say_progress(0.0, f"Loading the target {s['target']}…")
    loaded = load_target(s["target"], progress=lambda message: say_progress(0.0, message))
    check_exit_layer(s["exit_layer"], loaded)
    threads = estimates.threads_record(loaded.model, "race")  # fewer threads beside other programs (set by job.turn)
    if threads["note"]:
        job.say(("note", threads["note"]))
    if "model" in s["drafters"] or "bf16" in s["drafters"]:
        say_progress(0.0, "Loading the draft model…")
    generation = dict(s.get("generation") or {})
    stop_token_ids = tuple(generation.pop("stop_token_ids", ()))
    config = GenerationConfig(max_new_tokens=s["max_new_tokens"], stop_token_ids=stop_token_ids,
                              sampling=SamplingConfig(temperature=s["temperature"], seed=s["seed"], **generation))
    result = None
    for result in iter_arena(loaded, s["prompts"], s["drafters"], s["ks"], config, say_progress, job.should_stop,
                             draft_spec=s["draft_spec"], exit_layer=s["exit_layer"],
                             use_chat_template=s["chat_template"]):
        result.environment["threads"] = threads  # the cap every timing ran under, for the JSON (app.arena.files)
        # a snapshot: the worker extends the rows again while the handler renders these
        job.say(("partial", dataclasses.replace(result, rows=list(result.rows), summary=list(result.summary))))
    return result


class _Progress:
    """Turns the arena job's messages into the progress bar (``gr.Progress`` works only in the handler's thread)
    and status updates: a new message at once, the table and charts after each prompt, "still running" about
    every :data:`STATUS_INTERVAL_S` seconds."""

    def __init__(self, progress, notes: list[str], started: float, pace: ArenaPace | None = None) -> None:
        self.progress, self.notes, self.started = progress, notes, started
        self.pace = pace  # where the run is ("prompt 2 of 6, method 1 of 2") and the time left
        self.message, self.fraction, self.last = "", 0.0, 0.0
        self.result: ArenaResult | None = None  # the latest partial result

    def show(self, item) -> tuple | None:
        """The output tuple for one item of the job (None: nothing to show now)."""
        now = time.monotonic()
        kind, payload = item if item is not None else ("tick", None)
        if kind == "progress":
            self.fraction, message = payload
            self.progress(self.fraction, desc=message)
            if message == self.message:
                return None
            self.message = message  # the status names the same run as the progress bar
            if self.pace is not None:
                self.pace.started(self.fraction, message)
            return self._status(now)
        if kind == "note":
            self.notes.append(payload)
            return self._status(now)
        if kind == "partial" and payload.rows:
            self.result = payload
            if self.pace is not None:
                self.pace.prompts_done(len({r["prompt_id"] for r in payload.rows}))
            self.notes.extend(note for note in payload.notes if note not in self.notes)  # e.g. re-tokenized drafts
            return _result_outputs(payload, self._running(now))
        if now - self.last < STATUS_INTERVAL_S:
            return None
        self.progress(self.fraction, desc=self.message or "Working…")
        return self._status(now)

    def _running(self, now: float) -> str:
        """The "Running… message (seconds)" status line; counts as shown now."""
        self.last = now
        where = self.pace.position() if self.pace is not None else ""
        timing = f"; {self.pace.timing()}" if self.pace is not None else ""  # before the first run: the estimate
        return render.status_html(f"Running… {where + ': ' if where else ''}{self.message} "
                                  f"({now - self.started:.0f} s{timing})", "busy", notes=self.notes)

    def _status(self, now: float) -> tuple:
        return _outputs(status=self._running(now))


def _show_result(result: ArenaResult | None, job: Job, seconds: float, notes: list[str], cpu: CpuShare | None = None,
                 pace: ArenaPace | None = None):
    """The final outputs: the table, charts and both downloads; or why there is nothing to show (``cpu``: started
    with the run, for the busy warning; ``pace``: where the run was, named when a Stop left no finished prompt)."""
    if result is None:
        if job.cancelled:
            yield _outputs(status=render.status_html("Stopped.", "info"))
        return
    if not result.rows:
        said = pace.stopped_text() if pace is not None else "Stopped before the first prompt finished: nothing to show."
        yield _outputs(status=render.status_html(said, "info"))
        return
    shown_notes = notes + [n for n in result.notes if n not in notes]
    status = _done_status(result, seconds, shown_notes, cpu)
    csv_path, json_path = write_files(result, wall_s=seconds, notes=shown_notes, status=status)  # what the page says
    final = _result_outputs(result, status)
    yield final[:6] + (gr.update(value=csv_path, visible=True), gr.update(value=json_path, visible=True))


def _no_finding_kinds(rows: list[dict]) -> str:
    """Which kinds of no finding a run's rows hold, each with its reason and, when several occur, its count (a trial:
    "too noisy to tell ...; or not a finding ..." did not say which applied); a row of no reading is counted under
    the cause its evidence supports (:func:`app.arena.verdicts.no_reading_cause`, with its rule,
    :func:`app.arena.verdicts.cause_rule`): "too noisy to tell: ratios against the standard runs of its prompt on
    both sides of 1", "no reading: a run too short to time (a speedup more than 5% above its tokens per pass beside
    baselines within 15%)", "no reading: the machine's speed changed during the run (baselines more than 15%
    apart)", or "1 too noisy to tell: ...; 2 no reading: ..."."""
    found = [no_finding(r) for r in rows]  # the one rule (app.arena.verdicts.no_finding), as noisy_rows counts
    causes = [no_reading_cause(r) for r, kind in zip(rows, found) if kind == NO_READING]
    kinds = [(found.count(NOISY), f"{NOISY}: ratios against the standard runs of its prompt on both sides of 1")]
    kinds += [(causes.count(cause), f"{NO_READING}: {cause} ({cause_rule(cause)})")
              for cause in (SHORT_RUN, SPEED_CHANGED, EITHER)]
    present = [(n, words) for n, words in kinds if n]
    return "; ".join(words if len(present) == 1 else f"{n} {words}" for n, words in present)


def stop(current: str | None = None, request: gr.Request = None, sent=False) -> str:
    """The Stop button: flag this session's arena run (it ends before its next target pass and shows what
    finished); with none registered but ``sent`` (the page says it sent one that has not ended:
    :mod:`app.stop_marks`), that one still waits in Gradio's queue and will run nothing ("... so it will not
    run."); with none going, "Nothing is running." above ``current``, the status shown (the last run's summary
    stays, :func:`app.messages.nothing_to_stop`)."""
    queued = sent is True and session_key(request) is not None
    if RUNS.cancel(request, queued=queued):
        return render.status_html("Stopping…", "info")
    if queued:
        return render.status_html(stopped_in_queue("run"), "info")
    return nothing_to_stop(current, "arena-stop")


def release_session(request: gr.Request = None) -> None:
    """When a browser tab closes: cancel that session's arena run (and no one else's)."""
    RUNS.cancel_session(request)


def preset_chosen(key: str, chosen: list[str] | None):
    """A real pair picked (:data:`specviz.runtime.presets.PRESETS`): its target and draft model, and the 'Draft model'
    drafter ticked beside the chosen ones (outputs: target, draft model, drafters); nothing changes for "—"."""
    if not key:
        return gr.skip(), gr.skip(), gr.skip()
    pair = preset(key)
    return pair.target, pair.draft, [*(chosen or []), *([] if "model" in (chosen or []) else ["model"])]


def source_changed(source: str):
    """Show the prompt box for one prompt, the category menu for a category."""
    return gr.update(visible=source == "prompt"), gr.update(visible=source == "category")
