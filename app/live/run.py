"""The Generate button's run (:func:`generate`): it validates the inputs (one mapping of input name -> value,
:func:`app.inputs.parse_settings`), waits for its turn on the device (:mod:`app.device`: runs of every tab take
turns, first come first served, and a waiting visitor is told how many runs are ahead), loads the target and the
drafter, then runs the speculative stream and its baseline through :func:`specviz.core.race.race` (one thread,
interleaved by each run's own clock, so neither is timed while the other computes) and yields rendered panes,
stats and charts at a bounded rate (:data:`UPDATE_INTERVAL_S`, :data:`CHART_INTERVAL_S`). Both engine streams get
the job's cancel flag: Stop, or a closed handler, stops them before their next forward (a long prompt is read 256
tokens per forward). On ZeroGPU the runs happen in the GPU worker (:func:`gpu_events`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import gradio as gr

from app import device, render, zerogpu
from app.device import LOCAL_PREFIX, Job, load_target, relay, session_key
from app.endings import until_stopped
from app.inputs import (GATED_DRAFTERS, Settings, check_settings_vocab, fit_prompt_for, fit_settings_exit_layer,
                        parse_settings)
from app.costs import known_costs, learn_costs, plan_text, tokens_info, tuned_costs
from app.prefill_notes import LONG_PROMPT_TOKENS, long_prompt_note, settle_prefill_note, settled_after_prefill
from app.estimates import NOW, threads_note
from app.live.outputs import (ENDED, _SUFFIX_STORES, _VIEWS, _VIEWS_LOCK, RUNS, Frame, add_to_history, failed, final,
                              history_html, keep_good, planned_status, status_only, stopped_in_queue)
from app.live.view import RunView, head_accuracy
from app.weights_setting import in_chosen_weights, operator_weights
from app.records import RunSummary
from app.shares import live_method
from specviz.measure.machine import CpuShare
from specviz.runtime.compiled import forward_path
from specviz.core.engine import speculative_generate, standard_generate
from specviz.core.graphs import path_label
from specviz.core.kv import PREFILL_CHUNK, check_cancel, forward_chunked, new_cache
from specviz.core.race import race
from specviz.drafters.registry import label_of, make_drafter
from specviz.drafters.suffix import SuffixStore
from specviz.runtime.models import dtype_name
from specviz.runtime.weights import weights_of

UPDATE_INTERVAL_S = 0.25  # token panes and stats: at most 4 refreshes a second
CHART_INTERVAL_S = 3.0  # charts (with the draft tree and heads' table): at most one every 3 s while the runs stream.
# A plotly redraw of the dashboard is the browser's heaviest work: on a 2-core machine with other programs running
# each one blocked the page for up to 3.3 s (long tasks), at 2 a second a Stop click waited 10 s to be sent (none
# over 0.31 s without them); the end state draws them once more, complete
WHAT = "another session is generating"  # what visitors in line are told a Live run is doing
READING_PANE = "Reading the prompt… this run's tokens appear here as soon as it is read."
READING_STATS = "This run's figures appear here once its tokens stream; the earlier runs' stay in the history below."
"""The cards' place while a run reads its prompt: a trial read the previous run's "0.44× the speed, slower" under the
next run's "Reading the prompt…", with another drafter already chosen."""


def generate(values: Mapping[str, object], history: list[RunSummary] | None = None, request: gr.Request = None):
    """The Generate button: validate, wait for the device, load, then stream both runs (see the module doc);
    yields output tuples in :data:`app.live.defaults.OUTPUTS` order.

    Args:
        values: the run's inputs by name (:data:`app.inputs.SETTING_NAMES`; those added after the first API clients
            were written may be left out: a chain with the default confidence gate, no lookup and no penalties,
            lookahead's default W, N and G, :data:`app.inputs.OPTIONAL_SETTINGS`).
        history: the session's run history (newest first); a finished run's row is added to a copy.
        request: Gradio's request (its session keys the run, for Stop); None from Python code in this process.

    Bad input of any shape (a missing or unknown name too) is one sentence in the status line, never a crash."""
    clicked = time.monotonic()  # "Done in" counts from here: the visitor's wait, loading and preparing included
    history = list(history) if isinstance(history, list) else []
    try:
        settings = parse_settings(values, fit_layer=True, fit_whole=True)  # as the boxes: refused out of range
    except Exception as error:  # noqa: BLE001 - bad input of any shape is a message, never a crash
        RUNS.take_queued(request)  # a Stop pressed while this run was queued is spent: the next run starts as asked
        yield failed("checking the inputs", error, session_key(request))
        return
    job = device.start(RUNS, request, WHAT)
    if job.cancelled:  # Stop came while this run waited in Gradio's queue: it runs nothing, and says so
        job.release()
        yield status_only(stopped_in_queue(reached=True))
        return
    ended = ENDED.going(job.session)
    try:  # nothing is sent after the flag: Stop's result (app.live.controls.stop_run) is the last word
        yield from until_stopped(_run(settings, history, job, clicked), job)
    finally:
        job.release()  # also when Gradio closes this handler: the engine starts no other forward
        if job.session.startswith(LOCAL_PREFIX):  # no browser session to press Stop later
            with _VIEWS_LOCK:
                _VIEWS.pop(job.session, None)
        ENDED.ended(job.session, ended)


def _run(settings: Settings, history: list[RunSummary], job: Job, clicked: float):
    """:func:`generate` once the inputs are valid and the job made: wait for the device, then the run; any failure
    is one message."""
    try:
        plan = plan_text(settings, planned_costs(settings), load=NOW)

        def waiting(place) -> tuple:
            return status_only(planned_status(settings, plan, place.ahead, place.holder))

        yield status_only(planned_status(settings, plan, device.DEVICE.ahead(job.owner), device.DEVICE.holder))
        if (yield from relay(job.turn(), waiting)):
            yield from generate_on_device(settings, history, job, clicked)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield failed("generation", error, job.session)


def generate_on_device(settings: Settings, history: list[RunSummary], job: Job, clicked: float | None = None):
    """The run, once the device is held: load, open the view, stream both runs; add the run to ``history`` when
    it finished on its own (a stopped run is added by :func:`app.live.controls.stopped_view`). ``clicked``: the
    ``time.monotonic()`` when Generate's handler began (its "Done in" counts from there; None: from the runs'
    start)."""
    obtained = time.monotonic()  # the device is held from here: the time before is the wait for it
    loaded = yield from _load(settings, job)
    if loaded is None:
        return
    settings, target, drafter = loaded
    key = costs_key(settings)
    costs = planned_costs(settings) or (None if zerogpu.active() else  # no forward here on ZeroGPU
                                 tuned_costs(key, target))  # the device is held here
    view, prompt_ids = _open_view(settings, target, drafter, job.session)  # its clock starts after the timing
    threads = threads_note(target.model)  # fewer threads beside other programs (set by job.turn)
    if threads:
        view.notes.append(threads)
    view.clicked, view.obtained = clicked, obtained
    note = long_prompt_note(settings, costs, len(prompt_ids))
    if note:  # a long prefill, announced before it starts: in every status of the run
        view.notes.append(note)
    reading = _reading_status(view, len(prompt_ids), plan_text(settings, costs, len(prompt_ids), load=NOW))
    waiting = render.placeholder_html(READING_PANE)  # not an earlier run's text or message while this one reads
    yield Frame(waiting, waiting, stats=render.placeholder_html(READING_STATS), status=reading(), tree="", heads="",
                cut=view.cut, hide_charts=True).values()  # nor its figures
    view.cpu = CpuShare()
    stream = job.stream(_engine_events(settings, target, drafter, prompt_ids, job.cancel))
    try:
        yield from _stream(view, settled_after_prefill(stream, view, note), job.cancel, reading)
    finally:  # also when Gradio closes this handler
        stream.close()
        settle_prefill_note(view, note)  # stopped while reading: the estimate goes
    if not (job.cancelled or view.cancelled):
        view.ended = time.monotonic()
        learn_costs(key, view)
        keep_good(job.session, view)
        add_to_history(history, view)
        # the whole end state in the handler's last message, history row included: a component that message
        # skips can be put back by the browser to its value from a message before the last (seen: the every-pass
        # draft tree, sent one message earlier, replaced by the latest streamed pass once the history row arrived)
        # the max-new-tokens line's next plan, from the costs just learned, in the same message as "Done in"
        yield final(view, history_html(history), history, tokens_info(settings, planned_costs(settings), load=NOW))


class _Loading:
    """The status while the target and the drafter load: the latest progress message and the seconds so far."""

    def __init__(self, settings: Settings) -> None:
        self.notes = settings.notes
        self.latest = f"Loading the target {settings.target}…"
        self.started = time.monotonic()

    def show(self, message: object = None, clear: bool = False) -> tuple:
        """The status tuple; a str ``message`` becomes the latest one (None: a tick). ``clear``: an earlier run's
        draft tree and heads' table go too."""
        if isinstance(message, str):
            self.latest = message
        seconds = time.monotonic() - self.started
        status = render.status_html(f"{self.latest} ({seconds:.0f} s)", "busy", notes=self.notes)
        return Frame(status=status, tree="" if clear else None, heads="" if clear else None).values()


def _load(settings: Settings, job: Job):
    """Load the target and make the drafter in the job's threads, yielding the loading status; returns (settings,
    target, drafter or None), or None when the run was stopped meanwhile (a load cannot be interrupted: it finishes
    in its thread, which keeps the device until then). An early-exit layer the loaded target lacks (its layers were
    unknown before loading) is replaced by its nearest layer, said in a note under the status from then on
    (:func:`app.inputs.fit_settings_exit_layer`), as the box's own line in the status would have said."""

    loading = _Loading(settings)
    yield loading.show(clear=True)  # an earlier run's draft tree and heads' table go
    target = yield from relay(job.call(target_in_weights, settings, progress=job.say), loading.show)
    if job.cancelled:
        return None
    settings, _ = fit_settings_exit_layer(settings, target)
    loading.notes = settings.notes  # the fitted layer's note: under this status already, and every later one
    check_settings_vocab(settings, target)
    if settings.drafter == "none":
        return settings, target, None
    loading.latest = f"Preparing the drafter ({label_of(settings.drafter)})…"
    drafter = yield from relay(job.call(_new_drafter, settings, target, job.say, job.session), loading.show)
    return None if job.cancelled else (settings, target, drafter)


def target_in_weights(settings: Settings, progress=None):
    """The run's target: ``settings.target`` loaded (:func:`app.device.load_target`) in the visitor's weight format
    ``settings.weights`` (:func:`app.weights_setting.in_chosen_weights`: one copy per format, kept; float32 the target
    as loaded). The baseline and the speculative run both use it, so greedy ids stay identical within the format.
    Raises what ``load_target`` raises, and WeightsError (one sentence) for a format that cannot run here."""
    target = load_target(settings.target, progress=progress)
    return in_chosen_weights(target, settings.weights, progress)


def costs_key(settings: Settings) -> str:
    """Where the run's measured costs are kept (:mod:`app.costs`): the target spec, with the weight format when
    it is not the operator's ("embedded · int4 weights"), as a format's step costs its own."""
    if settings.weights == operator_weights():
        return settings.target
    return f"{settings.target} · {settings.weights} weights"


def planned_costs(settings: Settings):
    """The costs a Live run of ``settings`` is planned with (:class:`app.costs.RunCosts` or None): those kept under
    :func:`costs_key`, for its drafter and its method as the Arena names it (:func:`app.costs.known_costs`,
    :func:`app.shares.live_method`)."""
    return known_costs(costs_key(settings), settings.drafter, live_method(settings))


def _new_drafter(settings: Settings, target, say, session: str | None = None):
    """A fresh drafter for ``settings`` (registry key and options) drafting for ``target``; suffix decoding shares
    the browser session's store of earlier outputs (:func:`_suffix_store`). The confidence gate
    (:attr:`app.inputs.Settings.gate`) goes to the drafters the Live tab's gate control reaches
    (:data:`app.inputs.GATED_DRAFTERS`: eagle, medusa, the distilled and 'model' draft models; 0 = always k); the
    others get None (their factory's own: none)."""
    gate = settings.gate if settings.drafter in GATED_DRAFTERS else None
    return make_drafter(settings.drafter, target, draft_spec=settings.draft_model, exit_layer=settings.exit_layer,
                        tree_nodes=settings.drafted_tree_nodes, min_confidence=gate,
                        lookup=settings.lookup, window=settings.window, ngram=settings.ngram,
                        candidates=settings.candidates, progress=say,
                        suffix_store=_suffix_store(session) if settings.drafter == "suffix" else None)


def _suffix_store(session: str | None) -> SuffixStore | None:
    """The session's store of earlier outputs for suffix decoding (made on first use, dropped when the page
    closes); None without a browser session (the drafter then has a store of its own: cold)."""
    if not session or session.startswith(LOCAL_PREFIX):
        return None
    with _VIEWS_LOCK:
        return _SUFFIX_STORES.setdefault(session, SuffixStore())


def precision_of(target) -> str:
    """What ``target`` computes in: its dtype, and its weight format where that is not the dtype's own
    ("bfloat16", "float32 · int4 weights")."""
    dtype = dtype_name(next(target.model.parameters()).dtype)
    weights = weights_of(target.model)
    return dtype if weights in ("float32", dtype) else f"{dtype} · {weights} weights"


def _open_view(settings: Settings, target, drafter, session: str) -> tuple[RunView, list[int]]:
    """Fit the prompt into the target's window (a note says what was cut) and make the run's view, kept for
    Stop under ``session``. Returns (view, prompt ids)."""
    prompt_ids, note, cut = fit_prompt_for(settings, target, drafter)  # the note: in every status of the run
    engine = path_label(target)  # "eager" says nothing the forward's own path has not said
    label = f"{target.label} · {forward_path(target.model)}" + ("" if engine == "eager" else f" · {engine}")
    view = RunView(settings, label, getattr(drafter, "name", "none"),
                   render.Pane(target.tokenizer) if drafter is not None else None,
                   render.Pane(target.tokenizer, separators=False), notes=[*settings.notes, *([note] if note else [])],
                   heads=head_accuracy(drafter), prompt_tokens=len(prompt_ids), cut=cut, precision=precision_of(target))
    with _VIEWS_LOCK:
        _VIEWS[session] = view
    return view, prompt_ids


def _reading_status(view: RunView, prompt_tokens: int, plan: str = ""):
    """A function giving the status while the prompt is read (the prefill), with a ticking timer and the run's
    expected length (``plan``, see :func:`plan_text`)."""
    runs = "both runs read" if view.spec is not None else "the target reads"
    since = time.monotonic()
    whole = f" · the whole run: {plan}" if plan else ""
    why = "; a long prompt takes a while on a CPU" if prompt_tokens >= LONG_PROMPT_TOKENS else ""

    def status() -> str:
        return render.status_html(f"Reading the prompt: {runs} its {prompt_tokens:,} tokens (the prefill{why})… "
                                  f"({time.monotonic() - since:.0f} s){whole}", "busy", notes=view.notes)

    return status


def _engine_events(settings: Settings, target, drafter, prompt_ids: list[int], cancel: threading.Event):
    """The baseline's events, raced with the speculative run's when there is a drafter; both check ``cancel``
    before every forward. On ZeroGPU the runs happen in the GPU worker (:func:`gpu_events`)."""
    if zerogpu.active():
        return zerogpu.stream(gpu_events, settings, list(prompt_ids), duration=gpu_seconds)
    return _local_events(settings, target, drafter, prompt_ids, cancel)


def gpu_seconds(settings: Settings, prompt_ids: list[int]) -> int:
    """The GPU time a ZeroGPU call asks for this run (:func:`app.zerogpu.duration_for`)."""
    return zerogpu.duration_for(settings.max_new_tokens, len(prompt_ids))


def gpu_events(settings: Settings, prompt_ids: list[int]):
    """In a ZeroGPU worker process: the target (inherited from the app's process, already on the GPU) and a fresh
    drafter, then :func:`_local_events`; each event checked to hold no GPU tensor (:func:`app.zerogpu.plain`).
    Plain arguments only: they are pickled to get here."""
    target = target_in_weights(settings)
    drafter = None if settings.drafter == "none" else _new_drafter(settings, target, lambda message: None)
    for event in _local_events(settings, target, drafter, prompt_ids, threading.Event()):
        yield zerogpu.plain(event)


def _local_events(settings: Settings, target, drafter, prompt_ids: list[int], cancel: threading.Event):
    """:func:`_engine_events` in this process: an untimed read of the prompt's first chunk
    (:func:`warm_prompt_read`), then the runs."""
    config = settings.config()
    base = standard_generate(target, prompt_ids, config, cancel=cancel)
    runs = base if drafter is None else race(speculative_generate(target, drafter, prompt_ids, config, cancel=cancel),
                                             base)
    return _after_warm_read(target, prompt_ids, cancel, runs)


def _after_warm_read(target, prompt_ids: list[int], cancel: threading.Event, runs):
    """``runs`` (an event stream), after :func:`warm_prompt_read` in the thread that reads the stream."""
    warm_prompt_read(target, prompt_ids, cancel)
    yield from runs


def warm_prompt_read(target, prompt_ids: list[int], cancel: threading.Event | None = None) -> None:
    """One untimed forward of ``target`` over the prompt's first :data:`~specviz.core.kv.PREFILL_CHUNK` ids on a
    scratch cache (thrown away; no event), before the timed prefills. Why: :func:`~specviz.core.race.race` runs the
    speculative prefill first, and the first forward after Generate shares the CPUs with the browser drawing the
    frames sent just before it ("Reading the prompt…"). Measured in the browser on a 2-core machine: other processes
    took 34-47% of the CPUs during the speculative prefill, 12-17% during the baseline's right after, so the
    speculative time to first token read 1.1-1.5x the baseline's for the same forward (1.5-2x in a trial), and the
    end-to-end ratio leaned against speculation. This forward takes that share, and any first-call cost of the
    prompt's shape, for both runs; both timed prefills then read the prompt alike. ``cancel``: checked first
    (RunCancelled)."""
    check_cancel(cancel)
    forward_chunked(target.model, list(prompt_ids[:PREFILL_CHUNK]), new_cache(target.model), 1, cancel=cancel)


def _stream(view: RunView, events, cancel: threading.Event, idle_status=None):
    """Fold events into ``view``; yield the panes and stats at most every UPDATE_INTERVAL_S, charts less often (the
    end state, :func:`app.live.outputs.final`, is the caller's last message).
    ``events`` may yield None while the engine computes (:meth:`app.device.Job.stream`): then Stop is noticed at
    once, and before the first event ``idle_status()`` is shown about once a second (a ticking prefill timer)."""
    last_update = last_chart = last_idle = 0.0
    seen = False
    for event in events:
        if cancel.is_set() or view.cancelled:  # Stop: controls.stop_run shows the view as it is now
            return
        if event is None:
            now = time.monotonic()
            if not seen and idle_status is not None and now - last_idle >= 1.0:
                last_idle = now
                yield status_only(idle_status(), view.cut)
            continue
        seen = True
        view.add(event)
        now = time.monotonic()
        slower = min(4.0, max(1.0, view.base_stats.generated / 256))  # long outputs: big HTML, fewer refreshes
        if now - last_update >= UPDATE_INTERVAL_S * slower:
            chart = tree = heads = None
            if now - last_chart >= CHART_INTERVAL_S * slower:  # the tree and the heads' table at the charts' rate
                chart, tree, heads, last_chart = view.figure(), view.tree_html(), view.heads_html(), now
            last_update = now
            yield Frame(view.spec_html(), view.base_html(), chart, view.stats_html(), view.status(), tree=tree,
                        heads=heads, cut=view.cut).values()
