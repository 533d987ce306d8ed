"""The Arena's time before its first prompt is measured (app/arena/progress.py): a rough range from the step cost
this process already measured for the target (prompts x runs x max new tokens), "up to" its upper end as runs may
stop early at the end-of-sequence token, set for the load added since the cost was measured, replaced by the
measured time left once a prompt is done; without a measured cost, no invented number. Pure arithmetic: no model
runs, nothing is timed."""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import pytest  # noqa: E402

from app.arena import matching  # noqa: E402
from app.arena.progress import METHOD_TIME, UNMEASURED, ArenaPace, estimate, rough_estimate  # noqa: E402
from app.arena.settings import choose_prompts  # noqa: E402
from app.live import costs as live_costs  # noqa: E402
from app.costs import RunCosts  # noqa: E402

LOGGED = RunCosts(prefill_ms_per_token=3.815569208984016, base_ms_per_token=129.9392247761195,
                  spec_ms_per_token=50.22533754537698, source="recent runs of this model on this server",
                  spread=(0.85, 1.25), prefill_fixed_ms=129.3074309129025)
"""The embedded model's costs as the app logged them after its start-up run on the project's 2-core VM
(2026-12-05 03:08, app.live.warmup: "costs: RunCosts(...)"), while a training job shared the machine."""
QA_TOKENS = [17, 19, 16, 19, 17, 18]  # the suite's six qa prompts: 68, 77, 64, 77, 68, 70 characters / 4


def test_the_estimate_adds_every_run_by_hand():
    """6 prompts of 40 tokens, 2 methods, 48 new tokens, 50 ms a token, 2 ms per prompt token, spread (0.7, 1.6).
    Per prompt: 6 prompt reads (5 timed runs and the untimed prefill) 0.48 s; 3 standard runs of 47 tokens after
    the first 7.05 s; 2 drafters' runs 2.35 s (x 0.5) or 15.04 s (x 3.2). Warm-up on the first prompt, 8 tokens:
    3 reads 0.24 s, 7 tokens of standard decoding 0.35 s and of 2 drafters 0.35 s or 2.24 s. In all 60.22 s or
    138.25 s, times the spread's ends, when every run writes all its tokens; every run stopping at its first token
    leaves the reads alone: 6 x 0.48 + 0.24 = 3.12 s x 0.7."""
    costs = RunCosts(2.0, 50.0, None, "forwards timed on this machine", (0.7, 1.6))
    rough = estimate(costs, [40] * 6, 2, 48)
    assert rough.full_low_s == pytest.approx(60.22 * 0.7) and rough.high_s == pytest.approx(138.25 * 1.6)
    assert rough.low_s == pytest.approx(3.12 * 0.7)
    assert rough.range_text() == ("up to roughly 3 min 41 s in all on a quiet machine: 42 s – 3 min 41 s if every "
                                  "run writes all its max new tokens, as little as 2 s if runs stop early at the "
                                  "end-of-sequence token")
    assert rough.basis_text() == ("a rough estimate from 50 ms a token of standard decoding (forwards timed on this "
                                  "machine), each drafter's run taken as 0.5–3.2 times a standard run's time")
    # no warm-up: 6 x 9.88 s and 6 x 22.57 s, or 6 x 0.48 s of reads
    bare = estimate(costs, [40] * 6, 2, 48, warmup_tokens=0)
    assert (bare.full_low_s, bare.high_s) == (pytest.approx(59.28 * 0.7), pytest.approx(135.42 * 1.6))
    assert bare.low_s == pytest.approx(2.88 * 0.7)


def test_the_matching_preset_from_the_costs_the_app_logged():
    """The preset's race (six qa prompts, early exit and distilled draft at k = 4, 48 new tokens) from the logged
    costs: prompt reads 6 x (6 x 129.31 + 3.816 x 106) ms = 7.08 s, the warm-up's 0.58 s; decoding 6 x 47 x 129.94
    ms x (3 + 2 x 0.5) = 146.57 s and 1.82 s of warm-up, or x (3 + 2 x 3.2) = 344.44 s and 6.73 s: 156.05 s x 0.85
    = 2 min 13 s to 358.84 s x 1.25 = 7 min 29 s (that machine's measured race of both took about 8 minutes)."""
    rough = estimate(LOGGED, QA_TOKENS, 2, 48)
    assert rough.full_low_s == pytest.approx(156.054 * 0.85, abs=0.01)
    assert rough.high_s == pytest.approx(358.838 * 1.25, abs=0.01)
    assert rough.range_text().startswith("up to roughly 7 min 29 s in all on a quiet machine: 2 min 13 s – 7 min "
                                         "29 s if every run writes all its max new tokens")
    assert rough.ms_per_token == pytest.approx(129.94, abs=0.01)


def test_the_preset_and_the_run_read_the_costs_kept_for_the_target(monkeypatch):
    """rough_estimate reads app.costs (nothing is timed); without costs for a target there is no number. On a
    quiet machine (the load read here is pinned: this one may be busy)."""
    from app.arena import costs as arena_costs

    _stores(monkeypatch, {}, {"embedded": LOGGED})
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit", "distilled"],
                "ks": ["4"], "max_new_tokens": 48, "target": "embedded"}
    assert [max(1, round(len(p["prompt"]) / 4)) for p in settings["prompts"]] == QA_TOKENS
    assert rough_estimate(settings) == estimate(LOGGED, QA_TOKENS, 2, 48)
    status = matching.status(48, "embedded")
    assert ("at 48 new tokens per run, up to roughly 7 min 29 s in all on a quiet machine: 2 min 13 s – 7 min 29 s "
            "if every run writes all its max new tokens") in status
    assert "130 ms a token of standard decoding" in status and "Run arena" in status
    assert "roughly" in matching.status("not a number", "embedded")  # the slider's default then
    assert rough_estimate({**settings, "target": "gpt2"}) is None
    assert UNMEASURED in matching.status(48, "gpt2") and "roughly" not in matching.status(48, "gpt2")
    assert estimate(LOGGED, [], 2, 48) is None and estimate(None, QA_TOKENS, 2, 48) is None


def test_the_pace_gives_the_estimate_until_the_first_prompt_is_measured():
    now = [0.0]
    rough = estimate(LOGGED, QA_TOKENS, 2, 48)
    pace = ArenaPace([f"qa-{i}" for i in range(1, 7)], 2, clock=lambda: now[0], rough=rough)
    assert pace.timing() == (f"{rough.range_text()}, a rough estimate until the first prompt is measured")
    assert pace.timing().startswith("up to roughly 7 min 29 s in all on a quiet machine: 2 min 13 s – ")
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
    from app.arena import costs as arena_costs

    monkeypatch.setattr(live_costs, "_COSTS", runs)
    monkeypatch.setattr(live_costs, "_TUNED", tuned)
    monkeypatch.setattr(arena_costs, "_ARENA", {})


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
    read as the Live tab plans it (their short prompts' median 1.5 ms a token, floored by the start-up's wide
    forward: 2.0), its spread at least (0.85, 1.25)."""
    from app.arena import costs as arena_costs

    runs = [RunCosts(1.0, 39.0, None, live_costs.RECENT_RUNS, measured_at=1200.0),
            RunCosts(1.5, 120.0, None, live_costs.RECENT_RUNS, measured_at=1800.0),
            RunCosts(2.0, 190.0, None, live_costs.RECENT_RUNS, measured_at=2500.0)]
    _stores(monkeypatch, {"embedded": runs}, {"embedded": STARTUP})
    assert live_costs.known_costs("embedded").base_ms_per_token == 120.0
    arena_costs._ARENA["embedded"] = arena_costs.arena_costs("embedded", TRIAL_ROWS, STARTUP, now=2000.0)
    chosen = arena_costs.chosen_costs("embedded", now=2530.0)
    assert (chosen.base_ms_per_token, chosen.prefill_ms_per_token, chosen.spread) == (190.0, 2.0, (0.85, 1.25))
    assert chosen.source == "the latest run of this model on this server, 30 s ago"


def test_the_trials_race_from_its_own_step_cost():
    """Six qa prompts, early exit and distilled draft, 229 ms a token, 2 ms per prompt token, spread (0.85, 1.25).
    Reads: 6 x 106 x 2 ms + 3 x 17 x 2 ms = 1.374 s. Decoding at 48 new tokens: (6 x 47 x (3 + 2 x 0.5) + 7 x 2)
    x 0.229 = 261.518 s, or (6 x 47 x 9.4 + 7 x 7.4) x 0.229 = 618.895 s: 262.892 x 0.85 = 3 min 43 s to 620.269 x
    1.25 = 12 min 55 s (the 39 ms it had said gave 23 s - 60 s). At 16: (6 x 15 x 4 + 14) x 0.229 + 1.374 = 87.02 s
    x 0.85 = 74 s, (6 x 15 x 9.4 + 51.8) x 0.229 + 1.374 = 206.97 s x 1.25 = 4 min 19 s."""
    costs = RunCosts(2.0, 229.0, None, "the latest arena run of this model here, 100 s ago", (0.85, 1.25))
    at48, at16 = estimate(costs, QA_TOKENS, 2, 48), estimate(costs, QA_TOKENS, 2, 16)
    assert (at48.full_low_s, at48.high_s) == (pytest.approx(262.892 * 0.85), pytest.approx(620.2694 * 1.25))
    assert at48.range_text().startswith("up to roughly 12 min 55 s in all on a quiet machine: 3 min 43 s – 12 min "
                                        "55 s if every run writes")
    assert (at16.full_low_s, at16.high_s) == (pytest.approx(87.02 * 0.85), pytest.approx(206.9702 * 1.25))
    assert at16.range_text().startswith("up to roughly 4 min 19 s in all on a quiet machine: 74 s – 4 min 19 s")


def test_a_busy_machine_widens_the_upper_end_and_says_so(monkeypatch):
    """A cost whose load while measured is unknown is taken as a quiet machine's. A load average of 2.0 on 2 CPUs
    now: the run's threads share them, 1 + 2.0 / 2 = 2x the quiet upper end (12 min 55 s -> 25 min 51 s), the low
    ends kept (the reads alone: 6 x 106 x 2 ms + 3 x 17 x 2 ms = 1.374 s x 0.85); 3.4 on 2: 2.7x. Below half the
    CPUs' count the machine counts as quiet."""
    from app.arena import costs as arena_costs
    from app.arena.progress import busy_factor, is_busy
    from specviz.measure import machine

    costs = RunCosts(2.0, 229.0, None, "the latest arena run of this model here, 100 s ago", (0.85, 1.25))
    busy = estimate(costs, QA_TOKENS, 2, 48, load=(2.0, 2))
    assert busy.full_low_s == pytest.approx(262.892 * 0.85) and busy.high_s == pytest.approx(620.2694 * 1.25 * 2)
    assert busy.low_s == pytest.approx(1.374 * 0.85)
    assert busy.range_text() == (
        "up to roughly 25 min 51 s in all with the machine as busy as now (load average 2.0 on 2 CPUs): 3 min 43 s – "
        "25 min 51 s if every run writes all its max new tokens, as little as 1 s if runs stop early at the "
        "end-of-sequence token; the upper end is 2x a quiet machine's 12 min 55 s for sharing the CPUs, more if "
        "other programs slow each step further")
    assert "quiet machine in all" not in busy.range_text() and busy_factor(3.4, 2) == pytest.approx(2.7)
    quiet = estimate(costs, QA_TOKENS, 2, 48, load=(0.9, 2))  # below half the CPUs: as an unknown load
    assert (quiet.factor, quiet.high_s) == (1.0, pytest.approx(620.2694 * 1.25))
    assert quiet.range_text() == estimate(costs, QA_TOKENS, 2, 48).range_text()
    monkeypatch.setattr(arena_costs.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(machine, "load_average", lambda: 3.4)
    assert arena_costs.machine_load() == (3.4, 2) and is_busy(arena_costs.machine_load())
    monkeypatch.setattr(machine, "load_average", lambda: 0.9)
    assert arena_costs.machine_load() == (0.9, 2) and not is_busy(arena_costs.machine_load())
    monkeypatch.setattr(machine, "load_average", lambda: None)
    assert arena_costs.machine_load() is None and not is_busy(None)


def test_the_status_follows_max_new_tokens_and_the_drafters(monkeypatch):
    """After the preset's button, 48 -> 16 new tokens re-says the estimate at 16 (the trial's status stayed at 48
    until Run); the early exit alone gives the plain line, 54.846 s x 0.85 = 47 s to 114.82 s x 1.25 = 2 min 24 s; a run's status or a number outside the slider is left alone."""
    from app.arena import costs as arena_costs

    _stores(monkeypatch, {}, {})
    arena_costs._ARENA["embedded"] = RunCosts(2.0, 229.0, None, arena_costs.ARENA_RUN, (0.85, 1.25),
                                              measured_at=2000.0)
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    monkeypatch.setattr(arena_costs.time, "time", lambda: 2100.0)
    preset = ([matching.POOR, matching.WELL], [matching.K], "category", "", "qa")
    shown = matching.refresh(matching.status(48, "embedded"), *preset, 48, "embedded")
    assert "at 48 new tokens per run, up to roughly 12 min 55 s in all on a quiet machine: 3 min 43 s – " in shown
    now16 = matching.refresh(shown, *preset, 16, "embedded")
    assert "at 16 new tokens per run, up to roughly 4 min 19 s in all on a quiet machine: 74 s – 4 min 19 s" in now16
    assert "229 ms a token of standard decoding (the latest arena run of this model here, 100 s ago)" in now16
    one = matching.refresh(now16, [matching.POOR], [matching.K], "category", "", "qa", 16, "embedded")
    # one method: 4 reads of 106 tokens and 2 of 17 (0.916 s); (6 x 15 x 2.5 + 7 x 1.5) x 0.229 = 53.93 s x 0.85,
    # (6 x 15 x 5.2 + 7 x 4.2) x 0.229 = 113.9 s x 1.25
    assert ("6 prompts × 1 method at 16 new tokens per run: up to roughly 2 min 24 s in all on a quiet machine: 47 s "
            "– 2 min 24 s if every run writes all its max new tokens, as little as 1 s if runs stop early at the "
            "end-of-sequence token; a rough estimate from 229 ms") in one and matching.MARK in one
    assert UNMEASURED in matching.refresh(one, *preset[:4], "qa", 16, "gpt2")
    assert matching.READY in matching.refresh(one, [], [matching.K], "category", "", "qa", 16, "embedded")
    running = "Starting: 6 prompts × 2 methods …"
    assert matching.refresh(running, *preset, 16, "embedded") == gr.skip()
    assert matching.refresh(now16, *preset, 4000, "embedded") == gr.skip()  # the slider's own check says it


def test_every_input_of_the_estimate_refreshes_the_status_outside_the_queue():
    """The Arena tab wires a visitor's change (``input``: not the app's own updates, such as the clamp's) of the
    drafters, k, prompt source, prompt, category, max new tokens and target to :func:`app.arena.matching.refresh`
    into its status, unqueued, on raw values (no range error for a typed number)."""
    from app import arena as arena_tab

    with gr.Blocks() as demo:
        arena_tab.build_tab("embedded")
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    wired = {names[t]: fn for fn in demo.fns.values() for t, event in fn.targets
             if event == "input" and fn.fn is matching.refresh}
    assert set(wired) == {"arena-drafters", "arena-ks", "arena-source", "arena-prompt", "arena-category",
                          "arena-max-new-tokens", "arena-target"}
    for fn in wired.values():
        assert not fn.queue and not fn.preprocess
        assert [names[b._id] for b in fn.inputs][:1] == ["arena-status"] and names[fn.outputs[0]._id] == "arena-status"


# --------------------------------------------- runs that stop early, and the load a cost was measured at

QA_READS_S = 1.374  # six qa prompts, 2 methods: 6 x 106 x 2 ms of reads in the race, 3 x 17 x 2 ms in the warm-up
TRIAL = RunCosts(2.0, 229.0, None, "the latest arena run of this model here, 100 s ago", (0.85, 1.25))


def _race_s(costs: RunCosts, answer_tokens: int, share: float) -> float:
    """The time the cost model gives a race of six qa prompts x 2 methods (and the warm-up of 8 tokens) whose every
    run stops at the end-of-sequence token after ``answer_tokens`` tokens, a drafter's decoding at ``share`` times
    standard decoding's: what an early-stopping race takes at exactly that cost."""
    steps = (answer_tokens - 1) * (6 * (3 + 2 * share) + (1 + 2 * share))
    return QA_READS_S + steps * costs.base_ms_per_token / 1000.0


def test_the_low_end_allows_for_runs_that_stop_at_the_end_of_sequence_token():
    """The trial's short-answer race: 48 max new tokens, every answer 6 tokens long, the drafters as fast as standard
    decoding: 1.374 s of reads + (5 x (6 x 5 + 3)) x 0.229 = 39.159 s. The old low end, every run writing all 48
    tokens at the fastest drafters, said 3 min 43 s, above it; the low end now is every run stopping at its first
    token, the reads alone: 1.374 x 0.85 = 1.168 s, at or below any early-stopping race (the fastest, one token each,
    takes 1.374 s), and the status says "up to" the upper end."""
    rough = estimate(TRIAL, QA_TOKENS, 2, 48)
    assert _race_s(TRIAL, 6, 1.0) == pytest.approx(39.159)
    assert rough.full_low_s == pytest.approx(262.892 * 0.85) and rough.full_low_s > _race_s(TRIAL, 6, 1.0)
    assert rough.low_s == pytest.approx(QA_READS_S * 0.85)
    for tokens in (1, 2, 6, 24, 48):
        for share in METHOD_TIME:
            assert rough.low_s <= _race_s(TRIAL, tokens, share) <= rough.high_s
    assert rough.range_text() == (
        "up to roughly 12 min 55 s in all on a quiet machine: 3 min 43 s – 12 min 55 s if every run writes all its "
        "max new tokens, as little as 1 s if runs stop early at the end-of-sequence token")
    assert "every run writing all its max new tokens" not in rough.basis_text()


def test_a_cost_measured_on_a_busy_machine_is_not_widened_again_at_the_same_load():
    """The trial's 229 ms measured while other programs kept 2.0 of 2 CPUs busy, read with a load average of 2.0 now:
    the cost already holds that load's slowness, so the range stays its own (upper end 620.2694 x 1.25 = 12 min
    55 s; before, 2x: 25 min 51 s). Measured at 0.2 and read at 0.4, the little load added counts: 1.2 / 1.1 =
    1.09x (775.34 s -> 845.82 s); with the load now unknown, the range is the measured one's."""
    busy = dataclasses.replace(TRIAL, measured_load=(2.0, 2))
    same = estimate(busy, QA_TOKENS, 2, 48, load=(2.0, 2))
    assert same.factor == 1.0 and same.high_s == pytest.approx(620.2694 * 1.25)
    assert same.low_s == pytest.approx(QA_READS_S * 0.85) and same.full_low_s == pytest.approx(262.892 * 0.85)
    assert same.range_text() == (
        "up to roughly 12 min 55 s in all with the machine as busy as when its step cost was measured (other "
        "programs' load 2.0 on 2 CPUs then, load average 2.0 now): 3 min 43 s – 12 min 55 s if every run writes "
        "all its max new tokens, as little as 1 s if runs stop early at the end-of-sequence token")
    assert estimate(TRIAL, QA_TOKENS, 2, 48, load=(2.0, 2)).high_s == pytest.approx(620.2694 * 1.25 * 2)
    quiet = estimate(dataclasses.replace(TRIAL, measured_load=(0.2, 2)), QA_TOKENS, 2, 48, load=(0.4, 2))
    assert quiet.factor == pytest.approx(1.2 / 1.1)
    assert quiet.range_text().startswith("up to roughly 14 min 6 s in all with the machine busier than")
    unknown_now = estimate(busy, QA_TOKENS, 2, 48, load=None)
    assert unknown_now.factor == 1.0 and "at the load its step cost was measured at (other programs' load 2.0 on " \
        "2 CPUs then)" in unknown_now.range_text()


def test_the_range_follows_the_load_that_changed_since_the_cost_was_measured():
    """Measured at 2.0 on 2 CPUs (busy factor 2): at 3.0 now the upper end is (1 + 1.5) / 2 = 1.25x the measured
    range's (12 min 55 s -> 16 min 9 s), the lower ends kept; at 1.0 now the run should go faster, (1 + 0.5) / 2 =
    0.75x on the lower ends (3 min 43 s -> 2 min 48 s), the upper end kept: never narrower than the cost's spread."""
    from app.arena.progress import load_factor

    busy = dataclasses.replace(TRIAL, measured_load=(2.0, 2))
    assert (load_factor((3.0, 2), (2.0, 2)), load_factor((1.0, 2), (2.0, 2))) == (1.25, 0.75)
    assert (load_factor(None, (2.0, 2)), load_factor((3.0, 2), None), load_factor((0.9, 2), None)) == (1.0, 2.5, 1.0)
    busier = estimate(busy, QA_TOKENS, 2, 48, load=(3.0, 2))
    assert busier.high_s == pytest.approx(620.2694 * 1.25 * 1.25)
    assert (busier.full_low_s, busier.low_s) == (pytest.approx(262.892 * 0.85), pytest.approx(QA_READS_S * 0.85))
    assert busier.range_text() == (
        "up to roughly 16 min 9 s in all with the machine busier than when its step cost was measured (other "
        "programs' load 2.0 on 2 CPUs then, load average 3.0 now): 3 min 43 s – 16 min 9 s if every run writes all "
        "its max new tokens, as little as 1 s if runs stop early at the end-of-sequence token; the upper end is "
        "1.25x the measured cost's 12 min 55 s for the load added since, more if other programs slow each step "
        "further")
    quieter = estimate(busy, QA_TOKENS, 2, 48, load=(1.0, 2))
    assert quieter.high_s == pytest.approx(620.2694 * 1.25)
    assert quieter.full_low_s == pytest.approx(262.892 * 0.85 * 0.75)
    assert quieter.low_s == pytest.approx(QA_READS_S * 0.85 * 0.75)
    assert quieter.range_text().endswith("; the lower ends are 0.75x the measured cost's for the load gone since")
    assert "2 min 48 s – 12 min 55 s" in quieter.range_text()


class _Share:
    """A :class:`specviz.measure.machine.CpuShare` stand-in: other programs took ``share`` of the CPUs."""

    def __init__(self, share):
        self.share = share

    def others(self):
        return self.share


def test_every_cost_record_keeps_the_load_it_was_measured_at(monkeypatch):
    """Other programs' share of the CPUs during a measurement, times the CPU count, is kept with the cost: an arena
    run's (its handler's CpuShare), a Live run's (its view's) and the median of the Live runs'; the Arena's choice of
    the newest Live run keeps that run's. Read on an equally busy machine, the chosen cost is not widened."""
    from app.arena import costs as arena_costs
    from app.costs import known_costs, learn_costs, others_load

    monkeypatch.setattr(live_costs.os, "cpu_count", lambda: 2)
    assert (others_load(_Share(0.5)), others_load(_Share(None)), others_load(None)) == ((1.0, 2), None, None)
    _stores(monkeypatch, {}, {"embedded": STARTUP})
    monkeypatch.setattr(arena_costs.time, "time", lambda: 2000.0)
    arena_costs.learn_arena("embedded", TRIAL_ROWS, others_load(_Share(1.0)))
    assert arena_costs.chosen_costs("embedded", now=2100.0).measured_load == (2.0, 2)
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit", "distilled"],
                "ks": ["4"], "max_new_tokens": 48, "target": "embedded"}
    rough = rough_estimate(settings, now=2100.0, load=(2.0, 2))
    assert rough.factor == 1.0 and rough.high_s == pytest.approx(620.2694 * 1.25)  # the trial's T_step, 229 ms

    def view(share: float):
        base = SimpleNamespace(prefill_ms=50.0, elapsed_ms=1250.0, emitted=12, generated=12, finish_reason="length")
        return SimpleNamespace(spec=None, spec_stats=None, base_stats=base, prompt_tokens=10, started=0.0, ended=1.3,
                               settings=SimpleNamespace(prompt="Say hi."), cpu=_Share(share))

    monkeypatch.setattr(live_costs.time, "time", lambda: 3000.0)
    for share in (0.1, 0.9, 0.4):
        learn_costs("embedded", view(share))
    assert live_costs.newest_run("embedded").measured_load == (0.8, 2)
    assert known_costs("embedded").measured_load == (0.8, 2)  # the median of 0.2, 1.8 and 0.8
    assert arena_costs.chosen_costs("embedded", now=3010.0).measured_load == (0.8, 2)  # newer than the arena's
