"""The Batching tab's estimate before a press (app.batching.plan): a trial pressed Check and waited through the law of
the first tokens (about 7 s) and a first batch (37–43 s on its CPU) before the status said anything of how long the
check would take. Each part's status now plans its run from the costs the app already measured for the target (the
start-up's timed forwards, recent Live runs), by the law its own in-run estimate uses, with the range and the
source; with nothing measured it says so, with no number. Hand-computed figures, no timing."""

from __future__ import annotations

import html
import re

import pytest

from app import costs as measured
from app import estimates
from app.batching import check_job, plan
from app.batching.shared import JobStatus, batched_forward_ms
from app.batching.sweep_job import parse_sweep, sweep_seconds
from app.costs import RECENT_RUNS, RunCosts
from app.estimates import MIN_SPREAD, PROBE_SPREAD

STARTUP = RunCosts(5.0, 48.0, None, "forwards timed on this machine", PROBE_SPREAD, measured_at=1000.0,
                   measured_load=(0.0, 2))
"""Costs as the start-up's timed forwards leave them (app.costs.tuned_costs): 48 ms a one-token step, 5 ms a token
of a wide forward, the wide range of one timed probe."""
QUIET = (0.0, 2)  # other programs' load now: none, on 2 CPUs


@pytest.fixture(autouse=True)
def nothing_learned(monkeypatch):
    """No sweep, check, Live run or forwards timed here before each test (app.batching.shared keeps the latest per
    target; app.costs the Live runs and the newest forwards, which a plan takes when they are newer)."""
    from app.batching import shared

    monkeypatch.setattr(shared, "_TIMED", {})
    monkeypatch.setattr(measured, "_COSTS", {})
    monkeypatch.setattr(measured, "_TUNED", {})


def test_measured_costs_become_the_probe_the_in_run_estimate_reads():
    probe = plan.costs_probe(STARTUP)
    assert probe == {1: 48.0, 64: 320.0}
    # the tab's one law: max(T(1), rows × tokens × 5 ms)
    assert [batched_forward_ms(probe, rows, tokens) for rows, tokens in ((1, 1), (1, 43), (16, 1), (16, 5))] == [
        48.0, 215.0, 80.0, 400.0]


def test_a_check_of_200_runs_is_planned_batch_by_batch():
    """N = 200 on a 43-token prompt: the law of the first tokens 215 + 220 + 32 × 45 × 5 = 7,635 ms; 12 batches of
    16 (standard: prefill 3,440 + 2 steps of 80 = 3,600; speculative: 3,440 + 2 / 1.5 passes of 400 = 3,973.3) and
    one of 8 (1,720 + 2 × 48 = 1,816; 1,720 + 2 / 1.5 × 200 = 1,986.7): 102.3 s in all."""
    law = 215.0 + 220.0 + 32 * 45 * 5.0
    standard = 12 * (16 * 43 * 5.0 + 2 * 80.0) + (8 * 43 * 5.0 + 2 * 48.0)
    speculative = 12 * (16 * 43 * 5.0 + 2 / 1.5 * 400.0) + (8 * 43 * 5.0 + 2 / 1.5 * 200.0)
    assert check_job.check_seconds({1: 48.0, 64: 320.0}, 200, 43) == pytest.approx(
        (law + standard + speculative) / 1000.0) == pytest.approx(102.3177, abs=1e-4)


def test_a_check_planned_from_the_start_up_forwards_is_wide_and_names_its_source():
    made = plan.check_plan(STARTUP, 200, 43, load=QUIET, now=1125.0)
    assert (made.estimate.seconds, made.estimate.low, made.estimate.high) == pytest.approx(
        (102.3177, 102.3177 * 0.7, 102.3177 * 1.6), abs=1e-3)
    assert made.text() == ("200 runs per side, 13 batches of up to 16: about 100 s (1–3 min), planned from 48 ms a "
                           "one-token step and 5.0 ms a token of a wide forward (forwards timed on this machine, "
                           "2 min 5 s ago)")
    assert made.short_text() == "planned: about 100 s (1–3 min) in all"
    # 40 runs: 3 batches (16, 16, 8), 26.6 s: 19–45 s
    assert plan.check_plan(STARTUP, 40, 43, load=QUIET, now=1125.0).text().startswith(
        "40 runs per side, 3 batches of up to 16: about 27 s (19–45 s), planned from 48 ms")


def test_a_check_planned_from_recent_live_runs_is_narrower():
    live = RunCosts(5.0, 48.0, 40.0, RECENT_RUNS, MIN_SPREAD, measured_at=1000.0, measured_load=(0.0, 2))
    made = plan.check_plan(live, 200, 43, load=QUIET, now=1030.0)
    assert (made.estimate.low, made.estimate.high) == pytest.approx((102.3177 * 0.85, 102.3177 * 1.25), abs=1e-3)
    assert made.text() == ("200 runs per side, 13 batches of up to 16: about 100 s (1–2 min), planned from 48 ms a "
                           "one-token step and 5.0 ms a token of a wide forward (recent runs of this model on this "
                           "server, 30 s ago)")


def test_a_very_busy_machine_gets_the_plain_sentence_and_what_makes_it_shorter():
    """The stored costs' middle is kept at load 12 on 2 CPUs (app.costs.planned_estimate: a load reading only widens
    the range, at least VERY_BUSY_WIDTH about the middle), so the sentence gives a range without a middle."""
    made = plan.check_plan(STARTUP, 200, 43, load=(12.0, 2), now=1125.0)
    assert made.text() == ("200 runs per side, 13 batches of up to 16: the machine is very busy now (load 12 on 2 "
                           "CPUs): this may take 1–5 min, planned from 48 ms a one-token step and 5.0 ms a token of a "
                           "wide forward (forwards timed on this machine, 2 min 5 s ago); a smaller N makes it "
                           "shorter")


def test_a_sweep_is_planned_by_the_law_of_its_own_probe():
    """B = 1 and 4, k = 4, 24 new tokens per row, 50-token prompts, 3 repeats: B = 1 prefills 250 twice, 24 steps of
    48 and 16 passes of 48 (2,420 ms); B = 4: 1,000 twice, 24 × 48 and 16 × 100 (4,752 ms); × 3 = 21.5 s."""
    s = parse_sweep("ngram", 4, 24, [1, 4], "short", False, "embedded", "")
    assert sweep_seconds(plan.costs_probe(STARTUP), s, 50) == pytest.approx(3 * (2420 + 4752) / 1000.0)
    assert plan.sweep_plan(STARTUP, s, 50, load=QUIET, now=1125.0).text() == (
        "2 batch sizes (B = 1, 4) at 24 new tokens per row: about 22 s (15–35 s), planned from 48 ms a one-token step "
        "and 5.0 ms a token of a wide forward (forwards timed on this machine, 2 min 5 s ago)")
    long_prompts = parse_sweep("ngram", 4, 24, [1, 4], "long", True, "embedded", "")
    assert plan.sweep_prompt_tokens(long_prompts) == 1000
    assert plan.sweep_plan(STARTUP, long_prompts, 1000, load=QUIET, now=1125.0).what == (
        "2 batch sizes (B = 1, 4) at 24 new tokens per row, with the predicted curve")


def _text(status: str) -> str:
    """A status line's words as the page shows them (its icon's markup dropped)."""
    return html.unescape(re.sub(r"<[^>]+>", "", status)).strip()


def test_the_status_plans_the_run_or_says_nothing_was_measured(monkeypatch):
    monkeypatch.setattr(estimates, "machine_load", lambda: QUIET)
    monkeypatch.setattr(measured, "tuned_or_none", lambda target: None)
    monkeypatch.setattr(measured, "known_costs", lambda target, drafter=None: None)
    assert _text(plan.check_plan_status("embedded", "Hello", 200)) == (
        "ℹ Press Check to sample both ways and test them: no forward of this model has been timed here yet, so there "
        "is no estimate before the run; the time left follows once the first batch is done.")
    assert _text(plan.sweep_plan_status("ngram", 4, 24, [1, 4], "short", False, "embedded", "")) == (
        "ℹ Pick a drafter, k and batch sizes, then press Measure: no forward of this model has been timed here yet, "
        "so there is no estimate before the run; a few forwards are timed at its start to tell how long it will take.")
    monkeypatch.setattr(measured, "tuned_or_none", lambda target: STARTUP if target == "embedded" else None)
    monkeypatch.setattr(measured, "tokens_about", lambda prompt: 43)
    monkeypatch.setattr(plan.time, "time", lambda: 1125.0)
    assert _text(plan.check_plan_status("embedded", "Hello", 200)) == (
        "ℹ Press Check to sample both ways and test them: 200 runs per side, 13 batches of up to 16: about 100 s "
        "(1–3 min), planned from 48 ms a one-token step and 5.0 ms a token of a wide forward (forwards timed on this "
        "machine, 2 min 5 s ago); the time left follows once the first batch is done.")
    assert "no forward of this model" in plan.check_plan_status("another/model", "Hello", 200)
    # an N the box refuses: the lead alone (the box's own check says why); an empty box: the default N
    assert _text(plan.check_plan_status("embedded", "Hello", 5)) == "ℹ Press Check to sample both ways and test them."
    assert "200 runs per side" in plan.check_plan_status("embedded", "Hello", None)


def test_a_change_replans_only_a_status_that_says_what_a_press_would_do(monkeypatch):
    monkeypatch.setattr(measured, "tuned_or_none", lambda target: None)
    monkeypatch.setattr(measured, "known_costs", lambda target, drafter=None: None)
    waiting = plan.check_plan_status("embedded", "Hello", 200)
    again = plan.refresh(waiting, ("embedded", "Hello", 100), plan.CHECK_LEAD, plan.check_plan_status)
    assert again == waiting  # nothing measured yet: the same sentence
    for shown in ("<div>Checked in 96 s on SmolLM2 …</div>", "<div>⚠ Something went wrong (RuntimeError: x).</div>",
                  None):
        assert plan.refresh(shown, ("embedded", "Hello", 100), plan.CHECK_LEAD, plan.check_plan_status) == {
            "__type__": "update"}  # gr.skip(): a run's status, its results or its failure stay


def test_a_refusal_of_the_form_is_planned_over_when_an_input_changes(monkeypatch):
    """A trial unticked every batch size, pressed Measure, ticked B = 1 again: the warning stayed, with no plan."""
    from app.inputs import InputError

    monkeypatch.setattr(measured, "tuned_or_none", lambda target: None)
    monkeypatch.setattr(measured, "known_costs", lambda target, drafter=None: None)
    refused = plan.refusal_status("checking the batching inputs", InputError("Pick at least one batch size."))
    assert "⚠ Pick at least one batch size." in refused and plan.REFUSAL_MARK in refused
    values = ("ngram", 4, 24, [1], "short", True, "embedded", "")
    again = plan.refresh(refused, values, plan.SWEEP_LEAD, plan.sweep_plan_status)
    assert again == plan.sweep_plan_status(*values) and "Pick at least one" not in again
    assert f"{plan.SWEEP_LEAD}: {plan.UNMEASURED}" in html.unescape(again)


def test_the_running_status_keeps_the_plan_until_the_run_has_its_own(monkeypatch):
    """Pressed: the plan stands in the running status, said as planned; the check's first batch drops it (the job
    says ("estimate", None)) and the sweep's probe replaces it with its own estimate and words."""
    from app.batching import shared

    clock = iter([0.0, 12.0, 50.0, 60.0, 61.0, 62.0])
    monkeypatch.setattr(shared.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(estimates, "machine_load", lambda: QUIET)
    made = plan.check_plan(STARTUP, 200, 43, load=QUIET, now=1125.0)
    status = JobStatus(lambda *a, **k: None, lambda text: (text,), "Checking")
    status.planned(made.estimate, f"planned from {made.source()}")
    first = _text(status.show(("progress", (0.0, "sampling standard runs …")))[0])
    assert first == ("Checking… sampling standard runs … (12 s of about 100 s (1–3 min), planned from 48 ms a "
                     "one-token step and 5.0 ms a token of a wide forward (forwards timed on this machine, 2 min 5 s "
                     "ago))")
    status.show(("estimate", None))
    assert _text(status.show(("progress", (0.1, "about 90 s left")))[0]) == "Checking… about 90 s left (60 s)"
    status.show(("estimate", 300.0))  # a sweep's probe: its own estimate, in its own words
    assert "(62 s of about 5 min (4–8 min), estimated from a few forwards timed just now" in _text(
        status.show(("progress", (0.2, "batch 1")))[0])


def test_pressing_check_or_measure_says_the_plan_while_it_starts(tiny_model_dir, monkeypatch):
    """The plan of the settings pressed leads the running status: N = 40 on a 43-token prompt, 26.6 s (above); the
    sweep of B = 1 and 4 on 43-token prompts: 3 × ((430 + 1,152 + 768) + (1,720 + 1,152 + 1,600)) ms = 20.5 s."""
    from app import batching, device

    target = str(tiny_model_dir)
    monkeypatch.setattr(measured, "tuned_or_none", lambda spec: STARTUP if spec == target else None)
    monkeypatch.setattr(measured, "tokens_about", lambda prompt: 43)
    monkeypatch.setattr(estimates, "machine_load", lambda: QUIET)
    checking = batching.check(batching.CheckForm("Hello there", 1.0, "ngram", 40, False, target, ""))
    starting = next(checking)
    checking.close()  # pressed and left: the device is released, nothing sampled
    assert _text(starting[0]) == "Starting: 40 standard and 40 speculative runs; planned: about 27 s (19–45 s) in all…"
    measuring = batching.measure(batching.SweepForm("ngram", 4, 24, [1, 4], batching.SHORT, False, target, ""))
    starting = next(measuring)
    measuring.close()
    assert _text(starting[0]) == "Starting the batch-size sweep; planned: about 20 s (14–35 s) in all…"
    assert not device.DEVICE.locked


def test_the_plan_rests_on_the_latest_run_here_then_the_start_up_forwards_then_live_runs(monkeypatch):
    """A start-up on a busy moment times slow forwards (seen: 492 ms a step, 22.6 ms a token: a check of N = 48
    planned at about 2 min took 36 s): the latest run of the same part here comes first. A check of 40 runs that
    took 36 s on a 43-token prompt read 5,313.7 tokens (check_seconds at 1 ms a token): 6.8 ms a token, and the
    same check is planned at its 36 s; the sweep's first forwards plan the next sweep."""
    from app.batching import shared
    from app.batching.check_job import CheckSettings, learn_check
    from app.batching.shared import LATEST_SWEEP, Models, learn_timing, timing_costs

    live = RunCosts(20.9, 81.0, 45.0, RECENT_RUNS, MIN_SPREAD, measured_at=1000.0, measured_load=(0.0, 2))
    monkeypatch.setattr(measured, "tuned_or_none", lambda target: STARTUP if target == "embedded" else None)
    monkeypatch.setattr(measured, "known_costs", lambda target, drafter=None: live)
    monkeypatch.setattr(measured, "tokens_about", lambda prompt: 43)
    monkeypatch.setattr(estimates, "machine_load", lambda: QUIET)
    assert plan.planning_costs(" embedded ", "check") == (STARTUP, "48 ms a one-token step and 5.0 ms a token of a "
                                                                   "wide forward")
    assert plan.planning_costs("another/model", "check")[0] is live
    assert check_job.check_seconds({1: 1.0, 2: 2.0}, 40, 43) == pytest.approx(5.3136667, abs=1e-6)
    monkeypatch.setattr(shared.time, "time", lambda: 1000.0)  # when the check ended
    learn_check(CheckSettings(Models("embedded", "ngram"), "Hello", 1.0, 40, False), 43, 36.0)
    learn_timing("embedded", "sweep", timing_costs(52.0, 4.9, LATEST_SWEEP, PROBE_SPREAD),
                 "52 ms a one-token step and 4.9 ms a token of a wide forward")
    monkeypatch.setattr(plan.time, "time", lambda: 1030.0)  # 30 s later (the same clock: the patch is time's own)
    assert _text(plan.check_plan_status("embedded", "Hello", 40)) == (
        "ℹ Press Check to sample both ways and test them: 40 runs per side, 3 batches of up to 16: about 35 s (30–45 "
        "s), planned from 6.8 ms a token its forwards read (the latest check of this model here, 30 s ago); the time "
        "left follows once the first batch is done.")
    assert plan.check_plan(plan.planning_costs("embedded", "check"), 40, 43, load=QUIET).estimate.seconds == (
        pytest.approx(36.0))
    assert "planned from 52 ms a one-token step and 4.9 ms a token of a wide forward (the first forwards of the " \
           "latest sweep of this model here, 30 s ago)" in _text(
               plan.sweep_plan_status("ngram", 4, 24, [1, 4], "short", False, "embedded", ""))
    assert plan.check_plan(live, 48, 43, load=QUIET, now=1030.0).text().endswith(
        "planned from 81 ms a one-token step and 20.9 ms a token of a wide forward (recent runs of this model on this "
        "server, 30 s ago)")
