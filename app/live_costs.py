"""The Live tab's run-time estimates, fed by this process's own runs: a short real run at start-up, the note that
replaces a prefill's estimate by its measured time when a run ends.

Where the figures come from (:mod:`app.live` plans with them: :func:`app.live.known_costs`, :class:`app.live.RunCosts`):

- :func:`warm_up`, at the app's start-up while the model is pre-loaded (:func:`app.device.preload`, the device
  held): a Live run of the page's own settings (the example in the prompt box, the default drafter, k) cut to
  :data:`STARTUP_TOKENS` new tokens, run as a visitor's run is once it holds the device: the forwards that set the
  prefill's floor are timed (:func:`app.live.tuned_costs`), both runs raced and rendered, and its costs (prefill
  per prompt token, baseline step, speculative cost per token, on the wall clock) learned as a run of this server
  (:func:`app.live.learn_costs`); then the default max new tokens is derived (:func:`app.live.derived_default_tokens`).
  So the first visitor's run neither measures nor waits for a measurement, and its estimate comes from costs
  measured here, not assumed.
- every later run's own costs (:func:`app.live.learn_costs` after it ends).

:func:`settle_prefill_note`: an estimate said before a long prefill ("take about 2 min 47 s to read") is replaced
by the time the prefill took as soon as both runs have read the prompt (:func:`settled_after_prefill`), and at the
latest when the run ends, so no estimate is left under "Done in 28.6 s".
"""

from __future__ import annotations

import logging
import time

from app.device import LOCAL_PREFIX, Job
from app.inputs import parse_settings

log = logging.getLogger(__name__)

STARTUP_TOKENS = 24  # the start-up run's new tokens: about two seconds on a 2-core CPU for the embedded model


def warm_up(spec: str, loaded, defaults: dict) -> float | None:
    """The start-up run (see the module docstring) for the target ``spec`` (``loaded``: its load is not redone),
    with the Live tab's ``defaults`` (:data:`app.live.DEFAULTS` keys; max new tokens cut to :data:`STARTUP_TOKENS`),
    run as a visitor's run is once it holds the device (:func:`app.live._generate_on_device`: the forwards timed for
    the plan, both runs raced, the panes rendered, its costs learned); then the default max new tokens. Call it
    while holding the device. Returns the run's wall time in seconds, or None when the prompt box starts empty
    (nothing representative to run: the costs then come from the timed forwards alone). Raises what a run raises
    (bad defaults: ValueError)."""
    from app import live

    wall_s = None
    if str(defaults.get("prompt", "")).strip():
        values = {**defaults, "target": spec, "max_new_tokens": min(STARTUP_TOKENS, int(defaults["max_new_tokens"]))}
        settings = parse_settings(*[values[name] for name in live.INPUTS], fit_layer=True)
        live.tuned_costs(spec, loaded)  # timed before the run: its wall clock (the costs' scale) is the run's own
        job = Job("the app's start-up run", session=f"{LOCAL_PREFIX}startup")
        started = time.monotonic()
        try:
            for _ in live._generate_on_device(settings, [], job):
                pass
        finally:
            job.release()
            with live._VIEWS_LOCK:
                live._VIEWS.pop(job.session, None)
        wall_s = time.monotonic() - started
    else:
        live.tuned_costs(spec, loaded)
    tokens = live.derived_default_tokens(spec, live.DEFAULTS["max_new_tokens"])
    log.info("start-up run of %s: %s s; costs: %s; default max new tokens: %s", spec,
             "none" if wall_s is None else f"{wall_s:.1f}", live.known_costs(spec), tokens)
    return wall_s


def timed_forwards(loaded, wide: int) -> tuple[float, float]:
    """(T(1) ms, T(``wide``) / ``wide`` ms per token after ``wide`` cached tokens) of ``loaded``'s target, timed here
    (:func:`specviz.analysis.arena.probe_forward_ms`) at the thread counts its runs use: the per-machine tuning's
    choice for a one-token step and for a wider forward (``model._specviz_threads``, :mod:`specviz.tuning`), else
    torch's current count. (Timed at another count the figures mislead: on two busy cores a two-thread step took
    1.5 s where the one-thread step the runs use took 0.1 s.)"""
    import torch

    from specviz.analysis.arena import probe_forward_ms

    choice = getattr(loaded.model, "_specviz_threads", None) or (torch.get_num_threads(),) * 2
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(choice[0])
        step = probe_forward_ms(loaded, (1,))[1]
        torch.set_num_threads(choice[1])
        per_token = probe_forward_ms(loaded, (wide,), prompt_len=wide)[wide] / wide  # after a cached chunk, as a
        # long prompt's later chunks are read
    finally:
        torch.set_num_threads(before)
    return step, per_token


def settled_after_prefill(events, view, note: str):
    """``events`` (a run's stream: engine events, or None while it computes) passed through; once ``view`` holds
    both runs' prefills (the consumer folds each event in before asking for the next), ``note`` is settled
    (:func:`settle_prefill_note`): the prefill's estimate leaves the status as soon as its measured time is known."""
    for event in events:
        yield event
        if note and event is not None and view.base_stats.prefill_ms > 0 and (
                view.spec is None or view.spec_stats.prefill_ms > 0):
            settle_prefill_note(view, note)
            note = ""


def settle_prefill_note(view, note: str) -> None:
    """Replace ``note`` (the estimate said before a long prefill) in ``view.notes`` by the time the prefill took
    (both runs' prefills on their own clocks, ms from :class:`specviz.core.metrics.RunStats`), or drop it when no
    prefill finished (the run was stopped while reading). No-op when ``note`` is not there."""
    if not note or note not in view.notes:
        return
    ms = view.base_stats.prefill_ms + (view.spec_stats.prefill_ms if view.spec is not None else 0.0)
    index = view.notes.index(note)
    if ms <= 0:
        del view.notes[index]
        return
    runs = "both runs" if view.spec is not None else "the target"
    view.notes[index] = (f"The {view.prompt_tokens:,}-token prompt was read in {ms / 1000.0:.1f} s ({runs}; "
                         "the prefill).")
