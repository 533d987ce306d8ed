"""Every plan rests on the newest measurement of the costs it reads, and a plan made from one run holds that run.

A new-user trial: the start-up timed 1321 ms a one-token step and 28.6 ms a token of a wide forward (its forwards
timed at two threads beside another program, before the busy machine's cap was set); Live runs then measured
~78 ms a token and the Why tab's Measure 73 ms a step, yet Batching, 11 minutes later, still planned from the
start-up's figures (14–47 min), and the Live plan made from a 6.5 s run read 9–13 s (the start-up's prefill cost
kept as a floor)."""

from __future__ import annotations

import dataclasses
import os
import time

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import costs, estimates, inputs, live, shares, why  # noqa: E402
from app.batching import plan as batching_plan, shared  # noqa: E402
from app.why import plan as why_plan  # noqa: E402
from honest_support import paired_runs, run_view  # noqa: E402
from specviz.core.events import Timings  # noqa: E402
from specviz.measure.grid import TOKEN_COUNTS  # noqa: E402

QUIET = (0.0, 2)  # other programs' (load, CPUs): nothing else running
STALE_AGE_S = 686.0  # the trial's start-up probe was 11 min 26 s old when Batching planned from it


@pytest.fixture(autouse=True)
def _nothing_measured(monkeypatch):
    """No run, probe or sweep measured in this process yet; the load read as quiet."""
    monkeypatch.setattr(costs, "_COSTS", {})
    monkeypatch.setattr(costs, "_TUNED", {})
    monkeypatch.setattr(costs, "_OVERHEAD", [])
    monkeypatch.setattr(why_plan, "_PROBES", {})
    monkeypatch.setattr(why_plan, "_TOOK", {})
    monkeypatch.setattr(shared, "_TIMED", {})
    monkeypatch.setattr(estimates, "machine_load", lambda: QUIET)
    monkeypatch.setattr(why_plan, "machine_load", lambda: QUIET)


def _stale_start_up(spec: str = "embedded") -> costs.RunCosts:
    """The trial's start-up figures, timed :data:`STALE_AGE_S` ago."""
    tuned = costs.RunCosts(28.61, 1321.04, None, costs.STARTUP_FORWARDS, estimates.PROBE_SPREAD,
                           measured_at=time.time() - STALE_AGE_S, measured_load=(3.0, 2))
    costs._TUNED[spec] = tuned
    return tuned


def _learned_run(spec: str = "embedded", prompt_tokens: int = 120) -> float:
    """A finished Live run of ``spec`` learned (:func:`app.costs.learn_costs`): a 120-token prompt read in 600 ms,
    16 one-token baseline steps of 60 ms, 8 speculative passes of 100 ms, on a page whose rendering stretched the
    wall clock to 1.3 times the runs' own; returns its wall seconds."""
    spec_events, base = paired_runs(8, lambda i: 100.0, lambda i: 60.0)
    base[0] = dataclasses.replace(base[0], timings=Timings(0.0, 600.0, 0.0))
    view = run_view(spec_events, base)
    view.prompt_tokens = prompt_tokens
    view.ended = view.started + (view.spec_stats.elapsed_ms + view.base_stats.elapsed_ms) / 1000.0 * 1.3
    costs.learn_costs(spec, view)
    return view.ended - view.started


def _settings(max_new_tokens: int) -> inputs.Settings:
    return inputs.parse_settings(dict(prompt="hi", target="embedded", drafter="ngram", draft_model="", exit_layer=0,
                                      k=1, adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0, seed=0,
                                      max_new_tokens=max_new_tokens, stop_strings="", chat_template=True))


def test_a_plan_made_from_one_run_holds_that_run_not_the_start_ups_prefill():
    _stale_start_up()
    wall = _learned_run()
    assert wall == pytest.approx((600 + 16 * 60 + 50 + 8 * 100) / 1000 * 1.3)  # 3.2 s
    settings = _settings(17)  # the run wrote 17 tokens: its first, then 16 steps
    known = live.known_costs("embedded", "ngram", shares.live_method(settings))
    assert known.prefill_ms_per_token == pytest.approx((600 - 60) / 120)  # the run's own read past a step, not 28.61
    assert known.base_ms_per_token == pytest.approx(60 * 1.3)
    seconds = known.run_s(120, 17, drafter=True)
    estimate = costs.planned_estimate(known, seconds, None)
    assert estimate.low <= wall <= estimate.high, (estimate.low, wall, estimate.high)
    plan, short = costs.run_plan(settings, known, 120, load=None)
    assert plan == f"{estimate.text('')} (from recent runs of this model on this server)"
    assert short == f"17 new tokens: {estimate.text('')}"


def test_a_wide_forward_timed_after_the_runs_still_floors_a_short_prompts_read():
    _learned_run(prompt_tokens=120)
    costs.note_forwards("embedded", 50.0, 9.0, "the first forwards of the last Measure here")
    assert live.known_costs("embedded").prefill_ms_per_token == pytest.approx(9.0)  # newer than the run: the floor


def test_the_why_and_batching_plans_take_the_newest_measurement():
    _stale_start_up()
    # before any run: the start-up's forwards, named with their age
    assert why.planned("embedded", QUIET)[1] == "from forwards timed on this machine"
    assert batching_plan.planning_costs("embedded", "sweep")[0].base_ms_per_token == pytest.approx(1321.04)
    # a Live run since: its costs plan both tabs
    _learned_run()
    runs = live.known_costs("embedded")
    estimate, source = why.planned("embedded", QUIET)
    assert source == "from recent runs of this model on this server"
    assert estimate.seconds == pytest.approx(why.measure_seconds(costs.as_probe(runs, max(TOKEN_COUNTS))))
    planned, words = batching_plan.planning_costs("embedded", "sweep")
    assert planned == runs and words == "78 ms a one-token step and 4.5 ms a token of a wide forward"
    status = batching_plan.check_plan_status("embedded", "Hello", 40)
    assert "planned from 78 ms a one-token step and 4.5 ms a token of a wide forward (recent runs of this model on " \
           "this server, " in status and "1321" not in status
    # the Why tab's Measure since: its first forwards plan the Why line and Batching
    why.remember_probe("embedded", {1: 73.0, max(TOKEN_COUNTS): 32 * 3.0})
    assert why.planned("embedded", QUIET)[1] == "from the first forwards of the last Measure here"
    planned, words = batching_plan.planning_costs("embedded", "check")
    assert planned.source == "the first forwards of the last Measure here"
    assert words == "88 ms a one-token step and 3.0 ms a token of a wide forward"  # 73 ms x 1.2, a run's step


def test_a_sweep_since_the_measure_plans_the_why_line_and_a_first_live_run():
    _stale_start_up()
    why.remember_probe("embedded", {1: 73.0, max(TOKEN_COUNTS): 32 * 3.0})
    time.sleep(0.01)  # the sweep's forwards are timed after the Measure's
    costs.note_forwards("embedded", 70.0, 2.5, shared.LATEST_SWEEP)
    estimate, source = why.planned("embedded", QUIET)
    assert source == f"from {shared.LATEST_SWEEP}"
    assert estimate.seconds == pytest.approx(why.measure_seconds({1: 84.0, max(TOKEN_COUNTS): 84.0}))  # never below a step
    first = live.known_costs("embedded")  # no Live run yet: the newest forwards, a run's step from them
    assert (first.base_ms_per_token, first.prefill_ms_per_token) == (pytest.approx(84.0), 2.5)
    assert live.plan_text(_settings(17), first, 120, load=None).endswith(f"(from {shared.LATEST_SWEEP})")


def test_an_older_probe_never_replaces_a_newer_one():
    newer = costs.note_forwards("embedded", 70.0, 2.5, "a sweep")
    costs.note_forwards("embedded", 1100.0, 28.6, "an old probe", at=newer.measured_at - 60.0)
    assert costs.tuned_or_none("embedded") is newer
