"""The app's start-up run: a short real Live run while the model is pre-loaded, so the first visitor's run neither
measures nor waits for a measurement, and its estimate comes from costs measured here, not assumed."""

from __future__ import annotations

import logging
import time

from app import estimates, zerogpu
from app.device import DEVICE, LOCAL_PREFIX, Job
from app.inputs import parse_settings
from app import costs
from app.live.defaults import DEFAULTS, INPUTS
from app.live.outputs import _VIEWS, _VIEWS_LOCK
from app.live.run import generate_on_device

log = logging.getLogger(__name__)

STARTUP_TOKENS = 24  # the start-up run's new tokens: about two seconds on a 2-core CPU for the embedded model


def warm_up(spec: str, loaded, defaults: dict) -> float | None:
    """The start-up run for the target ``spec`` (``loaded``: its load is not redone), at the app's start-up while
    the model is pre-loaded (:func:`app.device.preload`, the device held): a Live run of the page's own settings
    (``defaults``: :data:`app.live.defaults.DEFAULTS` keys, the example in the prompt box, the default drafter, k)
    cut to :data:`STARTUP_TOKENS` new tokens, run as a visitor's run is once it holds the device
    (:func:`app.live.run.generate_on_device`): the forwards that set the prefill's floor are timed
    (:func:`app.costs.tuned_costs`), both runs raced and rendered, and its costs learned as a run of this
    server (:func:`app.costs.learn_costs`); then the default max new tokens is derived
    (:func:`app.costs.derived_default_tokens`). Call it while holding the device.

    A visitor who comes while the run goes on is not kept waiting for it: the run stops at its next forward
    (:func:`_run_giving_way`) and the costs come from the timed forwards, as with an empty prompt box. On a
    busy machine that run took minutes (a trial: 566 s at load 9-12 on 2 CPUs, with a visitor in line all along).

    Returns the run's wall time in seconds, or None when the prompt box starts empty or a visitor came first
    (nothing representative ran: the costs then come from the timed forwards alone). Raises what a run raises
    (bad defaults: ValueError)."""
    wall_s = None
    cap = None if zerogpu.active() else estimates.threads_for_run()  # as a run's job sets it (app.device.Job.turn):
    # the start-up holds the device without a job, and its forwards were timed at the tuned threads beside another
    # program's work (a trial: 1321 ms a step, its runs then took 78 ms a token at the capped count)
    if str(defaults.get("prompt", "")).strip():
        values = {**defaults, "target": spec, "max_new_tokens": min(STARTUP_TOKENS, int(defaults["max_new_tokens"]))}
        settings = parse_settings({name: values[name] for name in INPUTS}, fit_layer=True)
        began = time.monotonic()
        costs.tuned_costs(spec, loaded)  # timed before the run: its wall clock (the costs' scale) is the run's own
        log.info("start-up: forwards of %s timed in %.1f s (threads capped at %s)", spec, time.monotonic() - began,
                 cap)
        wall_s = _run_giving_way(settings)
    else:
        costs.tuned_costs(spec, loaded)
    tokens = costs.derived_default_tokens(spec, DEFAULTS["max_new_tokens"])
    log.info("start-up run of %s: %s s; costs: %s; default max new tokens: %s", spec,
             "none" if wall_s is None else f"{wall_s:.1f}", costs.known_costs(spec), tokens)
    return wall_s


def _run_giving_way(settings) -> float | None:
    """Run ``settings`` as the start-up run (:func:`app.live.run.generate_on_device`, the device held by the
    start-up) and return its wall time in seconds, or None when a visitor asked for the device meanwhile: the run
    is then stopped at its next forward (its cancel flag; the engine checks it before each forward, and the job's
    frames come at least every :data:`app.device.TICK_S` seconds) and the device goes to the visitor once the
    start-up releases it."""
    job = Job("the app's start-up run", session=f"{LOCAL_PREFIX}startup")
    started, gave_way = time.monotonic(), False
    try:
        for _ in generate_on_device(settings, [], job):
            if DEVICE.waiting and not gave_way:
                log.info("start-up: a visitor is waiting; the start-up run stops after %.1f s",
                         time.monotonic() - started)
                gave_way = True
                job.cancel.set()
    finally:
        job.release()
        with _VIEWS_LOCK:
            _VIEWS.pop(job.session, None)
    return None if gave_way else time.monotonic() - started
