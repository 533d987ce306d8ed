"""The Arena's time before its first prompt is measured (app/arena/progress.py): one middle figure with a range at
most 3x wide from the step cost this process already measured for the target (prompts x runs x max new tokens),
moved once by the load changed since the cost was measured, a plain sentence on a very busy machine, replaced by
the measured time left once a prompt is done; without a measured cost, no invented number. Pure arithmetic: no
model runs, nothing is timed."""

from __future__ import annotations

import dataclasses
import html
import os
from types import SimpleNamespace

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import pytest  # noqa: E402

from app.arena import matching  # noqa: E402
from app.arena.progress import MIDDLE_SHARE, UNMEASURED, ArenaPace, estimate, rough_estimate  # noqa: E402
from app.arena.settings import choose_prompts  # noqa: E402
from app import estimates, shares  # noqa: E402
from app.live import costs as live_costs  # noqa: E402
from app.costs import RunCosts  # noqa: E402

LOGGED = RunCosts(prefill_ms_per_token=3.815569208984016, base_ms_per_token=129.9392247761195,
                  spec_ms_per_token=50.22533754537698, source="recent runs of this model on this server",
                  spread=(0.85, 1.25), prefill_fixed_ms=129.3074309129025)
"""The embedded model's costs as the app logged them after its start-up run on the project's 2-core VM
(2026-12-05 03:08, app.live.warmup: "costs: RunCosts(...)"), while a training job shared the machine."""
QA_TOKENS = [17, 19, 16, 19, 17, 18]  # the suite's six qa prompts: 68, 77, 64, 77, 68, 70 characters / 4
PRESET_PRIORS = [shares.CPU_PRIORS[("early-exit", "4")], shares.CPU_PRIORS[("distilled", "4")]]
"""The matching preset's two methods (the early exit and the distilled draft at k = 4) before either ran here: their
shares measured on the project's CPU, 3.1 (2.6-4.2) and 0.95 (0.74-1.08)."""


def test_the_estimate_adds_every_run_by_hand():
    """6 prompts of 40 tokens, 2 methods, 48 new tokens, 50 ms a token, 2 ms per prompt token, spread (0.7, 1.6).
    Per prompt: 6 prompt reads (5 timed runs and the untimed prefill) 0.48 s; 3 standard runs of 47 tokens after
    the first 7.05 s; 2 drafters' runs 2.35 s x 2 x share. Warm-up on the first prompt, 8 tokens: 3 reads 0.24 s,
    7 tokens of standard decoding 0.35 s and of 2 drafters 0.35 s x 2 x share. At the middle share sqrt(0.5 x 3.2)
    = 1.2649: 6 x (0.48 + 7.05 + 5.945) + 0.24 + 0.35 + 0.885 = 82.33 s; the range 60.22 s x 0.7 = 42.15 s (share
    0.5) to 138.25 s x 1.6 = 221.2 s (share 3.2) is 5.25x wide, drawn in to 3x about the middle: 82.33 x 0.512 ^
    0.6627 = 52.83 s to 82.33 x 2.687 ^ 0.6627 = 158.5 s."""
    costs = RunCosts(2.0, 50.0, None, "forwards timed on this machine", (0.7, 1.6))
    rough = estimate(costs, [40] * 6, 2, 48)
    assert MIDDLE_SHARE == pytest.approx(1.2649, abs=1e-4)
    e = rough.estimate
    assert (e.seconds, e.low, e.high) == (pytest.approx(82.326, abs=0.01), pytest.approx(52.83, abs=0.01),
                                          pytest.approx(158.49, abs=0.01))
    assert e.high / e.low == pytest.approx(3.0) and e.factor == 1.0
    assert rough.range_text() == ("about 80 s (55 s – 3 min) in all on a quiet machine, less if runs stop early at "
                                  "the end-of-sequence token")
    assert rough.basis_text() == ("a rough estimate from 50 ms a token of standard decoding (forwards timed on this "
                                  "machine), each drafter's run taken as 0.5–3.2 times a standard run's time")
    # no warm-up: 6 x 13.475 s = 80.85 s in the middle
    assert estimate(costs, [40] * 6, 2, 48, warmup_tokens=0).estimate.seconds == pytest.approx(80.85, abs=0.01)
    assert rough == estimate(costs, [40] * 6, 2, 48)  # the same inputs, the same figures and words


def test_the_matching_preset_from_the_costs_the_app_logged():
    """The preset's race (six qa prompts, early exit and distilled draft at k = 4, 48 new tokens) from the logged
    costs: prompt reads 6 x (6 x 129.31 + 3.816 x 106) ms = 7.08 s and the warm-up's 0.58 s; decoding at the middle
    share 6 x 47 x 129.94 ms x (3 + 2 x 1.2649) + 7 x 129.94 ms x 3.5298 = 205.84 s: 213.5 s in all, its range
    (156.05 x 0.85 to 358.84 x 1.25) drawn in to 139-417 s (that machine's measured race took about 8 minutes)."""
    rough = estimate(LOGGED, QA_TOKENS, 2, 48)
    assert rough.estimate.seconds == pytest.approx(213.50, abs=0.01)
    assert (rough.estimate.low, rough.estimate.high) == (pytest.approx(139.0, abs=0.01), pytest.approx(416.99, abs=0.01))
    assert rough.range_text().startswith("about 4 min (2–7 min) in all on a quiet machine")
    assert rough.ms_per_token == pytest.approx(129.94, abs=0.01)


def test_the_preset_and_the_run_read_the_costs_kept_for_the_target(monkeypatch):
    """rough_estimate reads app.costs (nothing is timed) and the two methods' priors (neither ran here: 3.1 and 0.95
    of a standard run's time); without costs for a target there is no number. On a quiet machine (the load read here
    is pinned: this one may be busy)."""
    from app.arena import costs as arena_costs

    _stores(monkeypatch, {}, {"embedded": LOGGED})
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])  # no run here yet: no chat template's tokens learned
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit", "distilled"],
                "ks": ["4"], "max_new_tokens": 48, "target": "embedded"}
    assert [max(1, round(len(p["prompt"]) / 4)) for p in settings["prompts"]] == QA_TOKENS
    assert rough_estimate(settings) == estimate(LOGGED, QA_TOKENS, 2, 48, measured=PRESET_PRIORS)
    status = matching.status(48, "embedded")
    assert "at 48 new tokens per run, about 5 min (3–7 min) in all on a quiet machine" in status
    assert "130 ms a token of standard decoding" in status and "Run arena" in status
    assert "about" in matching.status("not a number", "embedded")  # the slider's default then
    assert rough_estimate({**settings, "target": "gpt2"}) is None
    assert UNMEASURED in matching.status(48, "gpt2") and "min" not in matching.status(48, "gpt2")
    assert estimate(LOGGED, [], 2, 48) is None and estimate(None, QA_TOKENS, 2, 48) is None
    monkeypatch.setattr(live_costs, "_OVERHEAD", [25])  # a run read 25 tokens of chat template beyond the text
    assert [n + 25 for n in QA_TOKENS] == [live_costs.tokens_about(p["prompt"]) for p in settings["prompts"]]


def test_the_pace_gives_the_estimate_until_the_first_prompt_is_measured():
    now = [0.0]
    rough = estimate(LOGGED, QA_TOKENS, 2, 48)
    pace = ArenaPace([f"qa-{i}" for i in range(1, 7)], 2, clock=lambda: now[0], rough=rough)
    assert pace.timing() == (f"{rough.range_text()}, a rough estimate until the first prompt is measured")
    assert pace.timing().startswith("about 4 min (2–7 min) in all on a quiet machine")
    pace.started(0.0, "qa-1 (qa): standard")
    now[0] = 70.0
    pace.prompts_done(1)
    now[0] = 80.0
    assert pace.timing() == "about 5 min 40 s left of about 7 min 0 s (the pace of the first prompt)"
    assert ArenaPace(["a"], 1).timing() == UNMEASURED


# --------------------------------------------- which cost, the busy machine, and the status following its inputs

TRIAL_ROWS = [{"drafter": "none", "t_step_ms": 215.0, "t_step_ms_low": 211.0, "t_step_ms_high": 219.0},
              {"drafter": "none", "t_step_ms": 229.0, "t_step_ms_low": 224.0, "t_step_ms_high": 236.0},
              {"drafter": "none", "t_step_ms": 243.0, "t_step_ms_low": 240.0, "t_step_ms_high": 251.0},
              {"drafter": "early-exit", "t_step_ms": 990.0}]  # a method's row: not a baseline's T_step
"""Baseline rows as a new user's trial saw them on a loaded machine: T_step 215-243 ms (its estimate had said 39)."""
STARTUP = RunCosts(2.0, 39.0, None, "forwards timed on this machine", (0.7, 1.6), measured_at=1000.0)


def _stores(monkeypatch, runs: dict, tuned: dict) -> None:
    """The Live tab's ``runs`` and ``tuned`` costs, no arena run and no share measured here; the runs decode on the
    CPU (the project's: its drafters' priors apply, :data:`app.shares.CPU_PRIORS`)."""
    from app.arena import costs as arena_costs

    monkeypatch.setattr(live_costs, "_COSTS", runs)
    monkeypatch.setattr(live_costs, "_TUNED", tuned)
    monkeypatch.setattr(arena_costs, "_ARENA", {})
    monkeypatch.setattr(shares, "_MEASURED", {})
    monkeypatch.setattr(shares, "on_cpu", lambda: True)
    monkeypatch.setattr(shares, "key_weights", lambda target: "float32")  # the priors' own format


def test_the_newest_cost_of_the_arenas_own_format_is_chosen(monkeypatch):
    """The start-up's 39 ms (a quiet moment), a Live run of int4 weights at 190 ms (kept under another key: not the
    format the arena runs) and the latest arena run's T_step: the median 229 ms of its baseline rows, spread 211/229
    = 0.92 and 251/229 = 1.10, widened to at least (0.85, 1.25). Its prompt read comes from the known costs."""
    from app.arena import costs as arena_costs

    int4 = RunCosts(3.0, 190.0, None, live_costs.RECENT_RUNS, measured_at=1500.0)
    _stores(monkeypatch, {"embedded · int4 weights": [int4]}, {"embedded": STARTUP})
    assert arena_costs.chosen_costs("embedded", now=1060.0).source == "forwards timed on this machine, 60 s ago"
    assert arena_costs.chosen_costs("embedded", now=1060.0).base_ms_per_token == 39.0
    assert arena_costs.chosen_costs("gpt2") is None  # nothing measured: no number
    measured = arena_costs.arena_costs("embedded", TRIAL_ROWS, STARTUP, now=2000.0)
    assert (measured.base_ms_per_token, measured.spread) == (229.0, (0.85, 1.25))
    assert measured.prefill_ms_per_token == 2.0
    monkeypatch.setattr(arena_costs.time, "time", lambda: 2000.0)
    arena_costs.learn_arena("embedded", TRIAL_ROWS)
    chosen = arena_costs.chosen_costs("embedded", now=2100.0)
    assert chosen.base_ms_per_token == 229.0
    assert chosen.source == "the latest arena run of this model here, 100 s ago"
    assert arena_costs.arena_costs("embedded", TRIAL_ROWS[3:]) is None  # no baseline row: nothing learned


def test_a_newer_live_run_replaces_an_older_arena_run_and_the_median(monkeypatch):
    """Live runs of the same format at 39 ms (the start-up's run), 120 ms and 190 ms (newest, 2500 s): their median
    says 120, the newest 190; newer than the arena's 229 ms (2000 s), the Live run's 190 ms is chosen, its prompt
    read as the Live tab plans it (their short prompts' median 1.5 ms a token: the start-up's wide forward, 2.0,
    timed before them, no longer floors it), its spread at least (0.85, 1.25)."""
    from app.arena import costs as arena_costs

    runs = [RunCosts(1.0, 39.0, None, live_costs.RECENT_RUNS, measured_at=1200.0),
            RunCosts(1.5, 120.0, None, live_costs.RECENT_RUNS, measured_at=1800.0),
            RunCosts(2.0, 190.0, None, live_costs.RECENT_RUNS, measured_at=2500.0)]
    _stores(monkeypatch, {"embedded": runs}, {"embedded": STARTUP})
    assert live_costs.known_costs("embedded").base_ms_per_token == 120.0
    arena_costs._ARENA["embedded"] = arena_costs.arena_costs("embedded", TRIAL_ROWS, STARTUP, now=2000.0)
    chosen = arena_costs.chosen_costs("embedded", now=2530.0)
    assert (chosen.base_ms_per_token, chosen.prefill_ms_per_token, chosen.spread) == (190.0, 1.5, (0.85, 1.25))
    assert chosen.source == "the latest run of this model on this server, 30 s ago"


def test_the_trials_race_from_its_own_step_cost():
    """Six qa prompts, early exit and distilled draft, 229 ms a token, 2 ms per prompt token, spread (0.85, 1.25).
    Reads: 6 x 106 x 2 ms + 3 x 17 x 2 ms = 1.374 s. At 48 new tokens, the middle share: (6 x 47 x 5.5298 + 7 x
    3.5298) x 0.229 + 1.374 = 364.14 s, its range (262.89 x 0.85 to 620.27 x 1.25, 3.47x) drawn in to 236.6-709.8
    s; at 16: (6 x 15 x 5.5298 + 7 x 3.5298) x 0.229 + 1.374 = 121.0 s, 78.6-235.7 s."""
    costs = RunCosts(2.0, 229.0, None, "the latest arena run of this model here, 100 s ago", (0.85, 1.25))
    at48, at16 = estimate(costs, QA_TOKENS, 2, 48).estimate, estimate(costs, QA_TOKENS, 2, 16).estimate
    assert (at48.seconds, at48.low, at48.high) == (pytest.approx(364.14, abs=0.01), pytest.approx(236.59, abs=0.01),
                                                   pytest.approx(709.76, abs=0.01))
    assert at48.text() == "about 6 min (4–12 min)"
    assert (at16.seconds, at16.low, at16.high) == (pytest.approx(121.0, abs=0.01), pytest.approx(78.57, abs=0.01),
                                                   pytest.approx(235.7, abs=0.01))
    assert at16.text() == "about 2 min (1–4 min)"


def test_a_busy_machine_moves_the_estimate_once_and_a_very_busy_one_is_said_plainly(monkeypatch):
    """A cost measured at a load of 2.0 on 2 CPUs (busy factor 1 + 2 / 2 = 2): read at 2.0 it is not moved; at 3.0
    all three figures are (1 + 1.5) / 2 = 1.25x (364.14 -> 455.17 s); at 1.0, 0.75x. A cost whose load is unknown is
    not moved. The trial's Live cost, 6370 ms a token measured at load 12, read at 13 (1.07x): the machine is very
    busy, the range at least 0.6-2x the middle and at most 4x wide, said as one sentence with what makes it shorter
    (before, the same settings read "roughly 105 min 13 s – 3164 min 1 s")."""
    from app.arena.progress import load_factor

    busy = dataclasses.replace(TRIAL, measured_load=(2.0, 2))
    assert (load_factor((3.0, 2), (2.0, 2)), load_factor((1.0, 2), (2.0, 2))) == (1.25, 0.75)
    assert (load_factor(None, (2.0, 2)), load_factor((3.0, 2), None)) == (1.0, 1.0)
    assert load_factor((30.0, 2), (0.0, 2)) == 4.0 and load_factor((0.0, 2), (30.0, 2)) == 0.5  # bounded
    same = estimate(busy, QA_TOKENS, 2, 48, load=(2.0, 2))
    assert same.estimate.factor == 1.0 and same.estimate.seconds == pytest.approx(364.14, abs=0.01)
    assert same.range_text() == ("about 6 min (4–12 min) in all with the machine as busy as now (load 2.0 on 2 CPUs), "
                                 "less if runs stop early at the end-of-sequence token")
    busier = estimate(busy, QA_TOKENS, 2, 48, load=(3.0, 2)).estimate
    assert (busier.seconds, busier.high) == (pytest.approx(364.137 * 1.25, abs=0.01), pytest.approx(709.763 * 1.25,
                                                                                                     abs=0.01))
    assert "(load 3.0 on 2 CPUs; 1.25x the time measured at load 2.0)" in estimate(busy, QA_TOKENS, 2, 48,
                                                                                  load=(3.0, 2)).range_text()
    assert estimate(busy, QA_TOKENS, 2, 48, load=(1.0, 2)).estimate.seconds == pytest.approx(364.137 * 0.75,
                                                                                             abs=0.01)
    assert estimate(TRIAL, QA_TOKENS, 2, 48, load=(2.0, 2)).estimate.factor == 1.0  # unknown then: not moved
    trial = dataclasses.replace(TRIAL, base_ms_per_token=6370.0, measured_load=(12.0, 2))
    very = estimate(trial, QA_TOKENS, 2, 48, load=(13.0, 2))
    assert very.estimate.very_busy and very.estimate.high / very.estimate.low <= 4.0 + 1e-9
    assert very.range_text() == (
        "the machine is very busy now (load 13 on 2 CPUs): this may take 1 h 50 min – 6 h 25 min in all, less if "
        "runs stop early at the end-of-sequence token; fewer tokens or prompts make it shorter")
    assert estimate(trial, QA_TOKENS, 2, 8, load=(13.0, 2)).range_text().startswith(
        "the machine is very busy now (load 13 on 2 CPUs): this may take 18 min – 1 h 5 min in all")
    assert estimate(trial, QA_TOKENS, 2, 8, load=(13.0, 2)) == estimate(trial, QA_TOKENS, 2, 8, load=(13.0, 2))


def test_the_machines_load_is_read_the_same_way_for_every_tab(monkeypatch):
    """The Arena reads app.estimates.machine_load: the 5-minute load average (not the 1-minute one, which jumped from
    one minute to the next) less this process's own running threads."""
    from app.arena import costs as arena_costs

    monkeypatch.setattr(estimates.os, "getloadavg", lambda: (15.5, 12.5, 10.0))
    monkeypatch.setattr(estimates.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(estimates, "own_running_threads", lambda: 2)
    monkeypatch.setattr(estimates, "recent_load", lambda cpus: None)  # the last seconds' share: unknown
    assert arena_costs.machine_load() == estimates.machine_load() == (10.5, 2)
    monkeypatch.setattr(estimates, "own_running_threads", lambda: 20)
    assert estimates.machine_load() == (0.0, 2)
    monkeypatch.setattr(estimates, "recent_load", lambda cpus: 1.5)  # a load that just started: the average lags
    assert estimates.machine_load() == (1.5, 2)

    def no_load():
        raise OSError

    monkeypatch.setattr(estimates.os, "getloadavg", no_load)
    assert arena_costs.machine_load() is None
    assert estimates.own_running_threads() >= 1  # this thread, running the test


def test_the_load_of_the_last_seconds_is_other_programs_share_of_the_cpus(monkeypatch):
    """Trial: "about 6 s (5–9 s)" planned, 23.8 s taken, two busy loops started just before (the 5-minute average
    lags). RecentShare reads other programs' share of the CPUs between its oldest kept sample (at most 20 s old, at
    least 3 s) and now."""
    clock, counters = [100.0], [(0.0, 0.0, 0.0)]  # (all CPUs' time, busy time, this process's time) in s
    monkeypatch.setattr(estimates.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(estimates, "cpu_snapshot", lambda: counters[0])
    monkeypatch.setattr(estimates, "others_runnable", lambda: None)  # unknown: the share decides
    recent = estimates.RecentShare()
    recent._thread = object()  # no sampling thread: the test keeps the samples itself
    recent._keep(clock[0])
    clock[0], counters[0] = 102.0, (4.0, 3.0, 1.0)
    assert recent.share() is None  # 2 s of samples: too short to tell
    recent._keep(clock[0])
    clock[0], counters[0] = 104.0, (8.0, 7.0, 1.0)  # 8 s of CPU time (2 CPUs x 4 s), 7 busy, 1 of it ours
    assert recent.share() == pytest.approx(0.75)
    for step in range(12):  # the next 24 s: other programs take both CPUs, the first samples drop out
        recent._keep(clock[0])
        clock[0] += 2.0
        counters[0] = tuple(v + d for v, d in zip(counters[0], (4.0, 4.0, 0.0)))
    assert recent.share() == pytest.approx(1.0) and len(recent._samples) == 11
    monkeypatch.setattr(estimates, "_RECENT", recent)
    assert estimates.recent_load(2) == pytest.approx(2.0)  # two busy loops on 2 CPUs


def test_the_load_of_the_last_seconds_counts_other_programs_runnable_threads(monkeypatch):
    """The 5-minute average lagged a load that had just started and stayed high for minutes after one ended (an
    Arena planned 65 s after a run under load, and took 18 s). The load is other programs' runnable threads sampled
    each second: the higher of the last 6 s's mean and the last 20 s's, and it sees more load than CPUs."""
    clock, runnable = [100.0], [0.0]
    monkeypatch.setattr(estimates.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(estimates, "cpu_snapshot", lambda: (clock[0], 0.0, 0.0))
    monkeypatch.setattr(estimates, "others_runnable", lambda: runnable[0])
    recent = estimates.RecentShare()
    recent._thread = object()  # no sampling thread: the test keeps the samples itself
    monkeypatch.setattr(estimates, "_RECENT", recent)

    def seconds(n: int, load: float) -> None:
        runnable[0] = load
        for _ in range(n):
            recent._keep(clock[0])
            clock[0] += 1.0

    seconds(2, 0.0)
    assert recent.runnable() is None and estimates.recent_load(2) is None  # under 3 s of samples
    seconds(18, 0.0)
    seconds(4, 3.0)  # three busy loops started 4 s ago
    assert recent.runnable(6.0) == pytest.approx(2.0) and recent.runnable() == pytest.approx(0.6)  # 12/6, 12/20
    assert estimates.recent_load(2) == pytest.approx(2.0)  # the last seconds' mean: a load that just started
    seconds(30, 3.0)
    assert estimates.recent_load(2) == pytest.approx(3.0)  # more than the CPUs
    seconds(4, 0.0)  # they ended 4 s ago: the 20 s mean still holds most of them
    assert estimates.recent_load(2) == pytest.approx(2.4)  # 16 of the last 20 samples at 3
    seconds(20, 0.0)
    assert estimates.recent_load(2) == pytest.approx(0.0)  # 20 s later the load is gone, not minutes later
    monkeypatch.setattr(estimates.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    assert estimates.machine_load()[0] == pytest.approx(0.0)  # the lagging average is not read beside samples


def test_the_status_follows_max_new_tokens_and_the_drafters(monkeypatch):
    """After the preset's button, 48 -> 16 new tokens re-says the estimate at 16 (the trial's status stayed at 48
    until Run); the early exit alone, at its prior's 3.1 (2.6-4.2) of a standard run's time: (6 x 15 x 5.1 + 7 x 4.1)
    x 0.229 + 0.916 = 112.60 s in the middle, 101.50 x 0.85 = 86.27 s to 137.03 x 1.25 = 171.29 s; a run's status or
    a number outside the slider is left alone."""
    from app.arena import costs as arena_costs

    _stores(monkeypatch, {}, {})
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])
    arena_costs._ARENA["embedded"] = RunCosts(2.0, 229.0, None, arena_costs.ARENA_RUN, (0.85, 1.25),
                                              measured_at=2000.0)
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    monkeypatch.setattr(arena_costs.time, "time", lambda: 2100.0)
    preset = ([matching.POOR, matching.WELL], [matching.K], "category", "", "qa")
    shown = matching.refresh(matching.status(48, "embedded"), *preset, 48, "embedded")
    assert "at 48 new tokens per run, about 8 min (6–11 min) in all on a quiet machine" in shown
    now16 = matching.refresh(shown, *preset, 16, "embedded")
    assert "at 16 new tokens per run, about 3 min (2–4 min) in all on a quiet machine" in now16
    assert "229 ms a token of standard decoding (the latest arena run of this model here, 100 s ago)" in now16
    one = matching.refresh(now16, [matching.POOR], [matching.K], "category", "", "qa", 16, "embedded")
    assert ("6 prompts × 1 method at 16 new tokens per run: about 115 s (1–3 min) in all on a quiet machine, "
            "less if runs stop early at the end-of-sequence token; a rough estimate from 229 ms") in one
    assert ("1 of 1 methods' runs planned from its measured cost on the project's CPU, not yet run here (3.10 times a "
            "standard run's time)") in html.unescape(one)
    assert matching.MARK in one
    assert UNMEASURED in matching.refresh(one, *preset[:4], "qa", 16, "gpt2")
    assert matching.READY in matching.refresh(one, [], [matching.K], "category", "", "qa", 16, "embedded")
    running = "Starting: 6 prompts × 2 methods …"
    assert matching.refresh(running, *preset, 16, "embedded") == gr.skip()
    assert matching.refresh(now16, *preset, 4000, "embedded") == gr.skip()  # the slider's own check says it
    # an answer to a change sent before Run arena (the estimate still shown then) never covers the session's run
    from types import SimpleNamespace

    from app.arena.handlers import RUNS
    page, other = SimpleNamespace(session_hash="page-a"), SimpleNamespace(session_hash="page-b")
    key, flag = RUNS.start(page)
    try:
        assert matching.refresh_unless_running(page, now16, *preset, 16, "embedded") == gr.skip()
        assert matching.MARK in matching.refresh_unless_running(other, now16, *preset, 16, "embedded")
    finally:
        RUNS.finish(key, flag)
    assert matching.MARK in matching.refresh_unless_running(page, now16, *preset, 16, "embedded")


def test_the_tokens_hint_says_what_the_estimate_says():
    """The trial read "Small keeps a category to minutes on a CPU" beside an estimate of hours on a busy machine."""
    from app.arena.layout import TOKENS_HINT

    assert "minutes" not in TOKENS_HINT and "estimates it for your choices" in TOKENS_HINT
    # a later trial at 1400 px: "the status below" sat at the top right; the words now hold at every width (where
    # the line is at 400 and 1400 px: tests/test_arena_phone_browser.py)
    assert "below" not in TOKENS_HINT and "the status line at the top of the results" in TOKENS_HINT


def test_every_input_of_the_estimate_refreshes_the_status_outside_the_queue():
    """The Arena tab wires a visitor's change (``input``: not the app's own updates, such as the clamp's) of the
    drafters, k, prompt source, prompt, category, max new tokens and target to :func:`app.arena.matching.refresh`
    into its status, unqueued, on raw values (no range error for a typed number)."""
    from app import arena as arena_tab

    with gr.Blocks() as demo:
        arena_tab.build_tab("embedded")
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    wired = {names[t]: fn for fn in demo.fns.values() for t, event in fn.targets
             if event == "input" and fn.fn is matching.refresh_unless_running}
    assert set(wired) == {"arena-drafters", "arena-ks", "arena-source", "arena-prompt", "arena-category",
                          "arena-max-new-tokens", "arena-target"}
    for fn in wired.values():
        assert not fn.queue and not fn.preprocess
        assert [names[b._id] for b in fn.inputs][:1] == ["arena-status"] and names[fn.outputs[0]._id] == "arena-status"
        # one keystroke's input sent while the previous was unanswered was dropped ("once"): 24 typed sent only "2"
        assert fn.trigger_mode == "always_last"
    # the box's release is the clamp's alone ("is at most 512 here; using 512."): an estimate there would race it
    assert not [fn for fn in demo.fns.values() for t, event in fn.targets
                if event == "release" and names.get(t) == "arena-max-new-tokens"
                and fn.fn is matching.refresh_unless_running]


def _page_load_status(demo) -> str:
    """What the Arena's page-load refresh of ``demo`` (built with only the Arena tab) puts in its status: its
    function called with its inputs' values as the page starts (the status line, then the ticked defaults)."""
    loads = [fn for fn in demo.fns.values() for _, event in fn.targets
             if event == "load" and fn.fn is matching.refresh_unless_running]
    assert len(loads) == 1 and not loads[0].queue and not loads[0].preprocess
    return loads[0].fn(None, *(block.value for block in loads[0].inputs))  # no request: no session's run


def test_the_page_load_says_the_estimate_for_the_ticked_defaults(monkeypatch):
    """The trial's page said only "Pick drafters, k and prompts, then press Run arena." while two drafters, k = {4,
    auto} and a 6-prompt category were ticked: the page load says their estimate (now k = 4 alone: 6 prompts x 2
    methods at 48 new tokens, 229 ms a token; n-gram and the early exit at k = 4 at their priors measured on the
    project's CPU, 0.8 and 3.1 of a standard run's time: about 8 min, long, so with the quickest way down), or in one
    sentence that no step time is measured yet."""
    from app import arena as arena_tab
    from app.arena import costs as arena_costs

    with gr.Blocks() as demo:
        arena_tab.build_tab("embedded")
    _stores(monkeypatch, {}, {})
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])
    assert _page_load_status(demo) == (
        '<div class="status status-info" role="status"><span class="status-text">ℹ 6 prompts × 2 methods at 48 new '
        "tokens per run: no step time measured for this model here yet, so no estimate: the time left follows once "
        "the first prompt is measured; press Run arena to race them.</span></div>")
    arena_costs._ARENA["embedded"] = RunCosts(2.0, 229.0, None, arena_costs.ARENA_RUN, (0.85, 1.25),
                                              measured_at=2000.0)
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    monkeypatch.setattr(arena_costs.time, "time", lambda: 2100.0)
    shown = _page_load_status(demo)
    assert matching.READY not in shown and matching.MARK in shown
    assert ("6 prompts × 2 methods at 48 new tokens per run: about 8 min (6–11 min) in all on a quiet machine, "
            "less if runs stop early at the end-of-sequence token. That is long (over 5 min at its middle); quickest "
            "way down: one prompt (Prompts: “One prompt (typed below)”), about 85 s (1–2 min). This is a rough "
            "estimate from 229 ms a token of standard decoding (the latest arena run of this model here, 100 s ago), "
            "2 of 2 methods' runs planned from their measured cost on the project's CPU, not yet run here (0.80–3.10 "
            "times a standard run's time); press Run arena to race them") in html.unescape(shown)

def test_opening_the_arena_tab_re_says_the_estimate_from_a_live_run_since_the_page_load(monkeypatch):
    """A trial: after several Live runs, the Arena tab still said the page load's "no step time measured for this
    model here yet, so no estimate" until a box changed, then "593 ms a token of standard decoding (the latest run of
    this model on this server, 3 min 7 s ago)". The tab's select event now runs the page load's refresh, with the
    same inputs, outside the queue; the cost a Live run recorded since is then read."""
    import app
    from app.arena import costs as arena_costs

    demo = app.build_demo()
    tabs = {block._id: block for block in demo.blocks.values() if isinstance(block, gr.Tab)}
    arena_tab = next(t for t in tabs.values() if t.elem_id == "tab-arena")
    selects = [fn for fn in demo.fns.values() for t, event in fn.targets if event == "select" and t == arena_tab._id]
    loads = [fn for fn in demo.fns.values() for _, event in fn.targets
             if event == "load" and fn.fn is matching.refresh_unless_running]
    assert len(selects) == 1 and len(loads) == 1
    select = selects[0]
    assert select.fn is matching.refresh_unless_running and not select.queue and not select.preprocess
    assert [b._id for b in select.inputs] == [b._id for b in loads[0].inputs]
    assert [b.elem_id for b in select.inputs][0] == "arena-status" and select.outputs[0].elem_id == "arena-status"
    config = demo.get_config_file()  # the page's own config says the same
    assert [(d["inputs"], d["outputs"], d["queue"]) for d in config["dependencies"]
            if [arena_tab._id, "select"] in [list(t) for t in d["targets"]]] == [
        ([b._id for b in select.inputs], [b._id for b in select.outputs], False)]

    runs: dict = {}
    _stores(monkeypatch, runs, {})
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    monkeypatch.setattr(arena_costs.time, "time", lambda: 1187.0)
    values = [block.value for block in select.inputs]
    shown = loads[0].fn(None, *values)  # the page load, before any Live run
    assert UNMEASURED in shown
    runs["embedded"] = [RunCosts(2.0, 593.0, None, live_costs.RECENT_RUNS, measured_at=1000.0)]  # a Live run since
    opened = select.fn(None, shown, *values[1:])
    assert UNMEASURED not in opened and matching.MARK in opened
    assert ("6 prompts × 2 methods at 48 new tokens per run: about" in opened
            and "a rough estimate from 593 ms a token of standard decoding (the latest run of this model on this "
                "server, 3 min 7 s ago)" in opened), opened
    assert select.fn(None, "Starting: 6 prompts × 2 methods …", *values[1:]) == gr.skip()  # a run's status stays


# --------------------------------------------- the load a cost was measured at

TRIAL = RunCosts(2.0, 229.0, None, "the latest arena run of this model here, 100 s ago", (0.85, 1.25))


def test_every_cost_record_keeps_the_load_it_was_measured_at(monkeypatch):
    """The load read by app.estimates.machine_load when a cost is measured is kept with it: an arena run's, a Live
    run's and the median of the Live runs'; the Arena's choice of the newest Live run keeps that run's. Read at the
    same load, the chosen cost is not moved."""
    from app.arena import costs as arena_costs
    from app.costs import known_costs, learn_costs

    _stores(monkeypatch, {}, {"embedded": STARTUP})
    monkeypatch.setattr(arena_costs.time, "time", lambda: 2000.0)
    arena_costs.learn_arena("embedded", TRIAL_ROWS, (2.0, 2))
    assert arena_costs.chosen_costs("embedded", now=2100.0).measured_load == (2.0, 2)
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit", "distilled"],
                "ks": ["4"], "max_new_tokens": 48, "target": "embedded"}
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])
    rough = rough_estimate(settings, now=2100.0, load=(2.0, 2))
    assert rough.estimate.factor == 1.0 and rough.estimate.seconds == pytest.approx(464.74, abs=0.01)  # 229 ms

    def view():
        base = SimpleNamespace(prefill_ms=50.0, elapsed_ms=1250.0, emitted=12, generated=12, finish_reason="length")
        return SimpleNamespace(spec=None, spec_stats=None, base_stats=base, prompt_tokens=10, started=0.0, ended=1.3,
                               settings=SimpleNamespace(prompt="Say hi.", max_prompt_tokens=None))

    monkeypatch.setattr(live_costs.time, "time", lambda: 3000.0)
    for load in (0.2, 1.8, 0.8):
        monkeypatch.setattr(estimates, "machine_load", lambda load=load: (load, 2))
        learn_costs("embedded", view())
    assert live_costs.newest_run("embedded").measured_load == (0.8, 2)
    assert known_costs("embedded").measured_load == (0.8, 2)  # the median of 0.2, 1.8 and 0.8
    assert arena_costs.chosen_costs("embedded", now=3010.0).measured_load == (0.8, 2)  # newer than the arena's
    assert live_costs._OVERHEAD == [10 - 2]  # "Say hi." is 2 tokens by its characters; the run read 10


# --------------------------------------------- calibrated from what this process measured

MEASURED_HERE = RunCosts(prefill_ms_per_token=8.42394395898441, base_ms_per_token=109.37977445090567,
                         spec_ms_per_token=55.96422629684439, source="recent runs of this model on this server",
                         spread=(0.85, 1.25), prefill_fixed_ms=108.5791316086973, measured_load=(0.36, 2))
"""The start-up's costs on the project's 2-core VM beside another engineer's benchmark (2026-12-06 23:02, logged by
app.live.warmup): 109.4 ms a token, its load read as 0.36 while the 5-minute average was still catching up. The
default Arena (code-edit, n-gram and early exit at k = 4 and auto, 48 new tokens) started a minute later at load
2.7 took 331 s, its standard runs 109.2 ms a token (T_step median)."""
CODE_EDIT_TOKENS = [52, 40, 51, 39, 64, 61]  # the suite's six code-edit prompts, characters / 4


def test_a_cost_measured_minutes_ago_already_holds_the_load_of_now():
    """The default Arena from the start-up's cost measured 10 s before (the trial's was 60 s, under the 5-minute
    average's window; the load is now sampled, and that window is 20 s), load 2.7 now. Per prompt 10 prompt reads
    (9 timed runs and the untimed prefill) and 47 tokens x 109.38 ms x (5 + 4 x 1.2649) = 51.715 s: 6 x 51.715 +
    10 x (6 x 0.10858 + 0.008424 x 307) + the warm-up (5 reads of 52 tokens 2.733 s, 7 tokens x 109.38 ms x 6.0596
    4.639 s) = 350.04 s: the measured 331 s lies 6% below it. Under LOAD_WINDOW_S the load change (1.99x) widens the
    high end only ((1 + 2.7 / 2) / (1 + 0.36 / 2) = 1.9915: 682.5 x 1.9915 = 1359.3 s, then drawn in to 3x: 265.4-796.1
    s); ten minutes old, it moves all three as before (697.1 s, about 12 min: the trial's "far too high"). A quieter
    machine now (load 0, 0.85x) widens the low end only: 192.8-682.5 s, drawn in to 210.3-630.9 s."""
    from app.arena.progress import LOAD_WINDOW_S

    recent = estimate(MEASURED_HERE, CODE_EDIT_TOKENS, 4, 48, load=(2.7, 2), age_s=10.0)
    e = recent.estimate
    assert (e.seconds, e.low, e.high, e.factor) == (pytest.approx(350.04, abs=0.01), pytest.approx(265.38, abs=0.01),
                                                    pytest.approx(796.14, abs=0.01), 1.0)
    assert e.low < 331.0 < e.seconds  # the race it planned took 331 s
    assert recent.range_text() == (
        "about 6 min (4–13 min) in all with the machine as busy as now (load 2.7 on 2 CPUs; its step time, measured "
        "10 s ago, already ran beside it), less if runs stop early at the end-of-sequence token")
    old = estimate(MEASURED_HERE, CODE_EDIT_TOKENS, 4, 48, load=(2.7, 2), age_s=LOAD_WINDOW_S + 300)
    assert (old.estimate.seconds, old.estimate.factor) == (pytest.approx(697.11, abs=0.01),
                                                           pytest.approx(1.9915, abs=1e-4))
    assert "1.99x the time measured at load 0.4" in old.range_text()
    quieter = estimate(MEASURED_HERE, CODE_EDIT_TOKENS, 4, 48, load=(0.0, 2), age_s=10.0).estimate
    assert (quieter.seconds, quieter.low, quieter.high) == (pytest.approx(350.04, abs=0.01),
                                                            pytest.approx(210.30, abs=0.01),
                                                            pytest.approx(630.90, abs=0.01))


def test_the_choice_reads_the_age_of_the_newest_cost(monkeypatch):
    """A Live run 10 s old at 122 ms a token, its load read as 0.9 at its end (the run's own thread taken out of a
    5-minute average it had barely entered), the Arena's page at load 2.9: before, 1.68x the time (seen in the
    browser: "about 6 min (4–12 min) …; 1.68x the time measured at load 0.9"); now not moved."""
    from app.arena import costs as arena_costs

    live = dataclasses.replace(LOGGED, base_ms_per_token=122.0, measured_at=1000.0, measured_load=(0.9, 2))
    _stores(monkeypatch, {"embedded": [live]}, {})
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit", "distilled"],
                "ks": ["4"], "max_new_tokens": 48, "target": "embedded"}
    rough = rough_estimate(settings, now=1010.0, load=(2.9, 2))
    assert rough.age_s == 10.0 and rough.estimate.factor == 1.0
    assert rough.estimate.seconds == pytest.approx(estimate(live, QA_TOKENS, 2, 48, measured=PRESET_PRIORS).estimate.seconds)
    assert "measured 10 s ago, already ran beside it" in rough.range_text()
    assert rough_estimate(settings, now=1900.0, load=(2.9, 2)).estimate.factor == pytest.approx(2.45 / 1.45)  # 15 min old


ARENA_ROWS = [{"drafter": "none", "k": "", "decode_speedup": 1.0, "t_step_ms": 109.2},
              {"drafter": "ngram", "k": "4", "decode_speedup": 1.70, "decode_speedup_low": 0.86,
               "decode_speedup_high": 4.69},
              {"drafter": "early-exit", "k": "4", "decode_speedup": 0.28, "decode_speedup_low": 0.22,
               "decode_speedup_high": 0.32},
              {"drafter": "early-exit", "k": "4", "decode_speedup": 0.30, "decode_speedup_low": 0.27,
               "decode_speedup_high": 0.33}]
"""Per-prompt rows as the default Arena measured them (its pooled n-gram k=4 and early exit k=4 cells; the early
exit's second prompt a little faster)."""


def test_a_methods_share_is_the_one_the_latest_arena_run_measured(monkeypatch):
    """n-gram k=4: 1 / 1.70 = 0.588, range 1 / 4.69 = 0.213 to 1 / 0.86 = 1.163; the early exit k=4 over two prompts:
    the median (upper) of 1 / 0.28 = 3.571 and 1 / 0.30 = 3.333 is 3.571, range 1 / 0.33 = 3.030 to 1 / 0.22 =
    4.545 (at least 0.85-1.25x its share: 3.036 is above 3.030, so 3.030 stays). The default Arena on a GPU (where
    the CPU's priors do not apply) then plans those two at their shares and k = auto's two at 1.2649: 47 x 109.38 ms
    x (5 + 0.588 + 3.571 + 2 x 1.2649) = 65.08 s a prompt, 401.56 s in all (350.04 s with every method at 1.2649)."""
    from app.arena import costs as arena_costs
    from app.arena.progress import MethodShare

    measured = arena_costs.shares_of_rows(ARENA_ROWS)
    assert measured[("ngram", "4")] == pytest.approx(MethodShare(0.5882, 0.2132, 1.1628), abs=1e-4)
    assert measured[("early-exit", "4")] == pytest.approx(MethodShare(3.5714, 3.0303, 4.5455), abs=1e-4)
    assert set(measured) == {("ngram", "4"), ("early-exit", "4")}  # the baseline is no method
    _stores(monkeypatch, {"embedded": [dataclasses.replace(MEASURED_HERE, measured_at=1000.0)]}, {})
    monkeypatch.setattr(shares, "on_cpu", lambda: False)
    monkeypatch.setattr(live_costs, "_OVERHEAD", [])
    monkeypatch.setattr(arena_costs.time, "time", lambda: 1030.0)
    arena_costs.learn_arena("embedded", ARENA_ROWS, (2.7, 2))
    methods = [("ngram", "4"), ("ngram", "auto"), ("early-exit", "4"), ("early-exit", "auto")]
    assert arena_costs.method_shares("embedded", methods) == [measured[("ngram", "4")], measured[("early-exit", "4")]]
    assert arena_costs.method_shares("gpt2", methods) == []
    planned = estimate(MEASURED_HERE, CODE_EDIT_TOKENS, 4, 48, load=(2.7, 2), age_s=10.0,
                       measured=list(measured.values()))
    assert planned.estimate.seconds == pytest.approx(401.56, abs=0.01)
    assert planned.basis_text().endswith(
        "2 of 4 methods' runs at the share of a standard run's time the latest runs here measured "
        "(0.59–3.57), the others taken as 0.5–3.2 times a standard run's time")
    settings = {"prompts": choose_prompts("category", "", "code-edit"), "drafters": ["ngram", "early-exit"],
                "ks": ["4", "auto"], "max_new_tokens": 48, "target": "embedded"}
    assert rough_estimate(settings, now=1060.0, load=(2.7, 2)).measured == (measured[("ngram", "4")],
                                                                              measured[("early-exit", "4")])
