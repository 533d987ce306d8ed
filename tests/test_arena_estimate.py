"""The Arena's time before its first prompt is measured (app/arena/progress.py): a rough range on a quiet machine
from the step cost this process already measured for the target (prompts x runs x max new tokens), replaced by the
measured time left once a prompt is done; without a measured cost, no invented number. Pure arithmetic: no model
runs, nothing is timed."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app.arena import matching  # noqa: E402
from app.arena.progress import UNMEASURED, ArenaPace, estimate, rough_estimate  # noqa: E402
from app.arena.settings import choose_prompts  # noqa: E402
from app.live import costs as live_costs  # noqa: E402
from app.live.costs import RunCosts  # noqa: E402

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
    138.25 s, times the spread's ends."""
    costs = RunCosts(2.0, 50.0, None, "forwards timed on this machine", (0.7, 1.6))
    rough = estimate(costs, [40] * 6, 2, 48)
    assert rough.low_s == pytest.approx(60.22 * 0.7) and rough.high_s == pytest.approx(138.25 * 1.6)
    assert rough.range_text() == "roughly 42 s – 3 min 41 s in all on a quiet machine"
    assert rough.basis_text() == ("a rough estimate from 50 ms a token of standard decoding (forwards timed on this "
                                  "machine), each drafter's run taken as 0.5–3.2 times a standard run's time, every "
                                  "run writing all its max new tokens")
    # no warm-up: 6 x 9.88 s and 6 x 22.57 s
    bare = estimate(costs, [40] * 6, 2, 48, warmup_tokens=0)
    assert (bare.low_s, bare.high_s) == (pytest.approx(59.28 * 0.7), pytest.approx(135.42 * 1.6))


def test_the_matching_preset_from_the_costs_the_app_logged():
    """The preset's race (six qa prompts, early exit and distilled draft at k = 4, 48 new tokens) from the logged
    costs: prompt reads 6 x (6 x 129.31 + 3.816 x 106) ms = 7.08 s, the warm-up's 0.58 s; decoding 6 x 47 x 129.94
    ms x (3 + 2 x 0.5) = 146.57 s and 1.82 s of warm-up, or x (3 + 2 x 3.2) = 344.44 s and 6.73 s: 156.05 s x 0.85
    = 2 min 13 s to 358.84 s x 1.25 = 7 min 29 s (that machine's measured race of both took about 8 minutes)."""
    rough = estimate(LOGGED, QA_TOKENS, 2, 48)
    assert rough.low_s == pytest.approx(156.054 * 0.85, abs=0.01)
    assert rough.high_s == pytest.approx(358.838 * 1.25, abs=0.01)
    assert rough.range_text() == "roughly 2 min 13 s – 7 min 29 s in all on a quiet machine"
    assert rough.ms_per_token == pytest.approx(129.94, abs=0.01)


def test_the_preset_and_the_run_read_the_costs_kept_for_the_target(monkeypatch):
    """rough_estimate reads app.live.costs (nothing is timed); without costs for a target there is no number."""
    monkeypatch.setattr(live_costs, "_COSTS", {})
    monkeypatch.setattr(live_costs, "_TUNED", {"embedded": LOGGED})
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit", "distilled"],
                "ks": ["4"], "max_new_tokens": 48, "target": "embedded"}
    assert [max(1, round(len(p["prompt"]) / 4)) for p in settings["prompts"]] == QA_TOKENS
    assert rough_estimate(settings) == estimate(LOGGED, QA_TOKENS, 2, 48)
    status = matching.status(48, "embedded")
    assert "roughly 2 min 13 s – 7 min 29 s in all on a quiet machine at 48 new tokens per run" in status
    assert "130 ms a token of standard decoding" in status and "Run arena" in status
    assert "roughly" in matching.status("not a number", "embedded")  # the slider's default then
    assert rough_estimate({**settings, "target": "gpt2"}) is None
    assert UNMEASURED in matching.status(48, "gpt2") and "roughly" not in matching.status(48, "gpt2")
    assert estimate(LOGGED, [], 2, 48) is None and estimate(None, QA_TOKENS, 2, 48) is None


def test_the_pace_gives_the_estimate_until_the_first_prompt_is_measured():
    now = [0.0]
    rough = estimate(LOGGED, QA_TOKENS, 2, 48)
    pace = ArenaPace([f"qa-{i}" for i in range(1, 7)], 2, clock=lambda: now[0], rough=rough)
    assert pace.timing() == ("roughly 2 min 13 s – 7 min 29 s in all on a quiet machine, a rough estimate until the "
                             "first prompt is measured")
    pace.started(0.0, "qa-1 (qa): standard")
    now[0] = 70.0
    pace.prompts_done(1)
    now[0] = 80.0
    assert pace.timing() == "about 5 min 40 s left of about 7 min 0 s (the pace of the first prompt)"
    assert ArenaPace(["a"], 1).timing() == UNMEASURED
