"""A drafter not run here yet is planned from its own measured cost (app/shares.py), in the Live tab's plan and the
Arena's rough estimate alike. A trial: after n-gram runs, the untrained early exit was planned at 10-30 s (the n-gram
runs' figure, widened 0.5-2.5x) and took 37 s: its decoding costs about 3x standard decoding's on the project's CPU,
n-gram lookup's about 0.8x. Pure arithmetic on recorded costs: no model runs, nothing is timed."""

from __future__ import annotations

import dataclasses
import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import live, shares  # noqa: E402
from app.arena import costs as arena_costs  # noqa: E402
from app.arena.progress import MethodShare, rough_estimate  # noqa: E402
from app.arena.settings import choose_prompts  # noqa: E402
from app.inputs import parse_settings  # noqa: E402
from honest_support import paired_runs, run_view  # noqa: E402

PRIOR = ("planned from this drafter's measured cost on the project's CPU, not yet run here: its decoding 3.1x "
         "(2.6–4.2x) standard decoding's time")
"""The source the early exit's first plan names (k = 4: docs/heads.md, "The distilled draft model", 0.32x)."""


@pytest.fixture()
def stores(monkeypatch):
    """No run, arena run or share kept yet; the runs decode on the CPU (the priors' machine)."""
    monkeypatch.setattr(live.costs, "_COSTS", {})
    monkeypatch.setattr(live.costs, "_TUNED", {})
    monkeypatch.setattr(live.costs, "_OVERHEAD", [])
    monkeypatch.setattr(arena_costs, "_ARENA", {})
    monkeypatch.setattr(shares, "_MEASURED", {})
    monkeypatch.setattr(shares, "on_cpu", lambda: True)
    monkeypatch.setattr(arena_costs, "machine_load", lambda: None)
    import app.weights_setting

    monkeypatch.setattr(app.weights_setting, "_MEASURED", {})  # float32, the priors' format, unless a key names one
    monkeypatch.delenv(app.weights_setting.ENV_WEIGHTS, raising=False)


def _settings(drafter: str, **values):
    """The Live tab's settings for a run of 76 new tokens of ``drafter`` at k = 4 (the page's other defaults)."""
    named = {**live.DEFAULTS, "target": "t", "prompt": "Say hi.", "drafter": drafter, "k": 4, "max_new_tokens": 76,
             **values}
    return parse_settings({name: named[name] for name in live.INPUTS}, fit_layer=False)


def _ngram_runs() -> list:
    """Three n-gram runs at k = 4 here: 100 ms a token of standard decoding, 60 of n-gram lookup's (0.6x), 2 ms a prompt
    token."""
    return [live.RunCosts(2.0, 100.0, 60.0, live.costs.RECENT_RUNS, drafter="ngram", method=("ngram", "4"))
            for _ in range(3)]


def _planned(drafter: str):
    """The Live tab's costs for a run of ``drafter`` at k = 4 on target "t", as its plan reads them."""
    settings = _settings(drafter)
    return settings, live.known_costs("t", drafter, shares.live_method(settings))


def test_a_first_early_exit_plan_after_only_ngram_runs_covers_three_times_standard_decoding(stores, monkeypatch):
    """76 new tokens, a 10-token prompt: the n-gram plan 0.04 + 75 x 0.16 = 12.04 s. The early exit, not run here,
    at its prior 3.1 (2.6-4.2) of the baseline's 100 ms: 310 ms a token, 0.04 + 75 x 0.41 = 30.79 s, its range the
    runs' (0.85, 1.25) times (1 + 2.6) / 4.1 and (1 + 4.2) / 4.1: 0.7463-1.5854, 22.98-48.81 s, said "about 30 s
    (23–50 s)". Its decoding is planned at 3.1 x the standard run's 7.5 s, and the trial's 37 s lies in the range.
    On a GPU the CPU's prior does not apply: the other drafters' runs, widened, as before."""
    live.costs._COSTS["t"] = _ngram_runs()
    settings, early = _planned("early-exit")
    assert shares.live_method(settings) == ("early-exit", "4")
    assert early.spec_ms_per_token == pytest.approx(310.0) and early.base_ms_per_token == 100.0
    assert early.spread == (pytest.approx(0.7463, abs=1e-4), pytest.approx(1.5854, abs=1e-4))
    assert early.source == f"{live.costs.RECENT_RUNS}; {PRIOR}"
    plan = live.plan_text(settings, early, 10, load=None)
    assert plan == f"about 30 s (23–50 s) (from {live.costs.RECENT_RUNS}; {PRIOR})"
    seconds = early.run_s(10, 76, drafter=True)
    assert seconds == pytest.approx(30.79) and seconds * 0.7463 < 37.0 < seconds * 1.5854
    ngram_settings, ngram = _planned("ngram")
    assert live.plan_text(ngram_settings, ngram, 10, load=None) == f"about 12 s (10–15 s) (from {live.costs.RECENT_RUNS})"
    assert shares.prior_share(("ngram", "4")).share < 1.0 < shares.prior_share(("early-exit", "4")).share
    monkeypatch.setattr(shares, "on_cpu", lambda: False)
    gpu = _planned("early-exit")[1]
    assert (gpu.spec_ms_per_token, gpu.spread) == (60.0, live.costs.OTHER_DRAFTER_SPREAD)
    assert gpu.source == f"{live.costs.RECENT_RUNS}, with other drafters"


def test_after_the_drafters_own_run_its_own_figure_wins(stores):
    """An arena run measured the early exit at k = 4 at 0.28x and 0.30x on two prompts (share 3.571, the median):
    the Live plan takes that share before the prior (357.1 ms a token) and says so; then a Live run of the early exit
    at 380 ms a token: its own figure, from its own runs, with the runs' range."""
    live.costs._COSTS["t"] = _ngram_runs()
    arena_costs.learn_arena("t", [{"drafter": "none", "k": "", "decode_speedup": 1.0, "t_step_ms": 100.0},
                                  {"drafter": "early-exit", "k": "4", "decode_speedup": 0.28},
                                  {"drafter": "early-exit", "k": "4", "decode_speedup": 0.30}])
    early = _planned("early-exit")[1]
    assert early.spec_ms_per_token == pytest.approx(357.14, abs=0.01)
    assert early.source == (f"{live.costs.RECENT_RUNS}; this drafter's share from its latest run here: its decoding "
                            "3.6x (3–4.5x) standard decoding's time")
    live.costs._COSTS["t"].append(live.RunCosts(2.0, 100.0, 380.0, live.costs.RECENT_RUNS, drafter="early-exit",
                                                method=("early-exit", "4")))
    own = _planned("early-exit")[1]
    assert (own.spec_ms_per_token, own.spread, own.source) == (380.0, live.costs.MIN_SPREAD, live.costs.RECENT_RUNS)


def test_a_live_run_at_one_k_does_not_plan_another_k(stores):
    """A trial: an EAGLE run at k = 8 then planned a run at k = 4 (the runs were matched by drafter). Each run is
    kept under its method as the Arena names it (drafter variant and k label): the k = 8 run's 150 ms a token plans
    only k = 8; k = 4 falls back as before, to EAGLE's share (its prior on the CPU here: 0.75, 75 ms a token), and
    lookup first is another method again (its prior 0.65). A run the Arena does not name (a draft model of the
    visitor's choice) is still matched by its drafter."""
    live.costs._COSTS["t"] = _ngram_runs()
    view = run_view(*paired_runs(10, lambda i: 300.0, lambda i: 100.0), drafter="eagle")
    view.settings = dataclasses.replace(view.settings, k=8)
    view.ended = view.started + 0.3
    live.learn_costs("t", view)
    assert live.costs._COSTS["t"][-1].method == ("eagle", "8") == shares.live_method(view.settings)
    eight = live.known_costs("t", "eagle", ("eagle", "8"))
    assert eight.spec_ms_per_token == pytest.approx(150.0) and eight.source == live.costs.RECENT_RUNS
    four = live.known_costs("t", "eagle", ("eagle", "4"))
    assert four.spec_ms_per_token == pytest.approx(75.0) and shares.PRIOR_WORDS in four.source
    lookup = live.known_costs("t", "eagle", ("eagle:lookup", "8"))
    assert lookup.spec_ms_per_token == pytest.approx(65.0)
    live.costs._COSTS["t"].append(live.RunCosts(2.0, 100.0, 220.0, live.costs.RECENT_RUNS, drafter="model"))
    assert live.known_costs("t", "model", None).spec_ms_per_token == 220.0


def test_the_arena_and_the_live_plan_read_one_share(stores):
    """Before any run of the early exit, both take its prior (3.1); a Live run of the early exit at k = 1 (600 ms a
    pass of 2 tokens against 100 ms a standard step: 6000 / 20 over 2000 / 20 ms a token, share 3.0) gives the Arena
    that share for k = 1 (range 0.85-1.25x: one run), and the Live plan the same 3.0."""
    live.costs._COSTS["t"] = _ngram_runs()
    settings = {"prompts": choose_prompts("category", "", "qa"), "drafters": ["early-exit"], "ks": ["4"],
                "max_new_tokens": 48, "target": "t"}
    arena = rough_estimate(settings, now=None, load=None)
    assert arena.measured == (shares.CPU_PRIORS[("early-exit", "4")],)
    live_plan = _planned("early-exit")[1]
    assert live_plan.spec_ms_per_token / live_plan.base_ms_per_token == pytest.approx(arena.measured[0].share)
    assert "1 of 1 methods' runs planned from its measured cost on the project's CPU, not yet run here (3.10 times" \
        in html.unescape(arena.basis_text())
    view = run_view(*paired_runs(10, lambda i: 600.0, lambda i: 100.0), drafter="early-exit")
    view.ended = view.started + 0.3
    live.learn_costs("t", view)
    assert shares.live_method(view.settings) == ("early-exit", "1")
    measured = arena_costs.method_shares("t", [("early-exit", "1")])
    assert measured == [pytest.approx(MethodShare(3.0, 2.55, 3.75))] and type(measured[0]) is MethodShare
    one = live.known_costs("t", "early-exit", ("early-exit", "1"))
    assert one.spec_ms_per_token / one.base_ms_per_token == pytest.approx(3.0)


def test_a_live_runs_method_is_named_as_the_arena_names_it(stores):
    """A tree of the Arena's 10 nodes with lookup first is "eagle:tree:lookup"; the distilled draft's Live gate (0.2,
    the Arena drafts it ungated) is stated, and has its own prior (1.16x: 0.86); k = auto and the heuristic
    schedule are labelled; a draft model of the visitor's choice and an early exit at another layer have none."""
    assert shares.live_method(_settings("eagle", tree_nodes=10, lookup=True)) == ("eagle:tree:lookup", "4")
    assert shares.live_method(_settings("eagle", tree_nodes=20)) is None
    distilled = shares.live_method(_settings("distilled"))
    assert distilled == ("distilled gate 0.2", "4")
    assert shares.prior_share(distilled) == shares.PriorShare(0.86, 0.79, 0.93)
    assert shares.live_method(_settings("ngram", adaptive_k="auto")) == ("ngram", "auto")
    assert shares.live_method(_settings("ngram", adaptive_k="heuristic")) == ("ngram", "adaptive")
    assert shares.prior_share(("ngram", "adaptive")) == shares.CPU_PRIORS[("ngram", None)]  # any k
    assert shares.prior_share(("early-exit", "2")) is None  # measured at k = 4 only
    assert shares.live_method(_settings("early-exit", exit_layer=7)) is None
    assert shares.live_method(_settings("none")) is None


def test_before_any_run_the_start_ups_timed_step_takes_the_prior_too(stores):
    """Only the start-up's timed forwards (100 ms a step, range 0.7-1.6x): the early exit at 310 ms a token, its
    range 0.7 x 3.6 / 4.1 = 0.6146 to 1.6 x 5.2 / 4.1 = 2.0293 (drawn in to 3x wide when said)."""
    live.costs._TUNED["t"] = live.RunCosts(2.0, 100.0, None, "forwards timed on this machine", live.PROBE_SPREAD)
    early = _planned("early-exit")[1]
    assert early.spec_ms_per_token == pytest.approx(310.0)
    assert early.spread == (pytest.approx(0.6146, abs=1e-4), pytest.approx(2.0293, abs=1e-4))
    assert early.source == f"forwards timed on this machine; {PRIOR}"
    assert _planned("none")[1] is live.costs._TUNED["t"]  # standard decoding alone: no drafter's share


def test_on_int4_weights_a_prior_is_int4s_own_or_grown_for_its_dearer_verification(stores):
    """On int4 weights (a key naming them, or the operator's format) EAGLE reads its prior measured on int4 (0.98,
    0.82-1.2: docs/heads.md, 0.96-1.10x paired), and the early exit its float32 prior grown by DEARER_VERIFY: 3.1 x 1.3
    = 4.03, its high end 4.2 x 1.7 = 7.14, which holds the 5.1x a trial measured on int4; the source says so.
    Float32 and bfloat16 keys keep the float32 priors."""
    assert shares.key_weights("t · int4 weights") == "int4" and shares.key_weights("t") == "float32"
    assert shares.share_for("t · int4 weights", ("eagle", "4")) == (0.98, 0.82, 1.2)
    grown = shares.share_for("t · int4 weights", ("early-exit", "4"))
    assert isinstance(grown, shares.ScaledPrior)
    assert grown == (pytest.approx(4.03), 2.6, pytest.approx(7.14)) and grown.low < 5.1 < grown.high
    assert shares.share_for("t · int8 weights", ("ngram", "4")) == (pytest.approx(1.04), 0.45, pytest.approx(1.87))
    assert shares.share_for("t · bfloat16 weights", ("early-exit", "4")) == (3.1, 2.6, 4.2)
    assert shares.share_for("t", ("eagle", "4")) == (0.75, 0.62, 1.06)
    live.costs._COSTS["t · int4 weights"] = _ngram_runs()
    early = live.known_costs("t · int4 weights", "early-exit", ("early-exit", "4"))
    assert early.spec_ms_per_token == pytest.approx(403.0)
    assert early.source.endswith("its decoding 4x (2.6–7.1x) standard decoding's time (measured on float32 weights, "
                                 "grown for these weights' dearer verification)")
