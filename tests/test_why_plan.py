"""The line beside the Why tab's Measure button: how long a measurement takes, said before the press (a trial's user
learned "about 11 min (8–17 min)" only after pressing), from the same formula the status uses once it runs, and
following the target and the boxes under Measure."""

from __future__ import annotations

import os
import typing
from types import SimpleNamespace

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import costs, why  # noqa: E402
from app.estimates import PROBE_SPREAD, rough_time, span_text  # noqa: E402
from app.why import plan  # noqa: E402
from specviz.measure.grid import BATCH_SIZES, TOKEN_COUNTS, grid_seconds  # noqa: E402

QUIET = (0.0, 2)  # other programs' (load, CPUs): nothing else running


@pytest.fixture(autouse=True)
def _nothing_timed(monkeypatch):
    """Each test starts with nothing timed in this process (the stores are the process's, shared by sessions)."""
    monkeypatch.setattr(plan, "_PROBES", {})
    monkeypatch.setattr(plan, "_TOOK", {})
    monkeypatch.setattr(costs, "_TUNED", {})
    monkeypatch.setattr(costs, "_COSTS", {})  # no Live runs: an earlier test's would be the newest measurement
    monkeypatch.setattr(plan, "machine_load", lambda: QUIET)


def test_before_anything_is_timed_the_line_says_it_takes_minutes():
    line = why.plan_html("embedded", load=QUIET)
    assert "Measure takes minutes: it times every batch size and token count, and says how long once it has timed " \
           "a first forward." in line
    assert why.planned("embedded", QUIET) is None


def test_a_measure_of_the_target_gives_the_estimate_from_the_one_formula():
    probe = {1: 40.0, max(TOKEN_COUNTS): 200.0}  # ms of one forward over 1 and 32 new tokens
    seconds = grid_seconds(probe, token_counts=TOKEN_COUNTS, batch_sizes=BATCH_SIZES) + why.ESTIMATE_EXTRA_S
    assert why.measure_seconds(probe) == pytest.approx(seconds)  # the status's figure once Measure runs
    why.remember_probe("embedded", probe)
    estimate, source = why.planned("embedded", QUIET)
    assert estimate.seconds == pytest.approx(seconds)
    assert (estimate.low, estimate.high) == (pytest.approx(seconds * PROBE_SPREAD[0]),
                                             pytest.approx(seconds * PROBE_SPREAD[1]))
    said = f"about {rough_time(seconds)} ({span_text(seconds * PROBE_SPREAD[0], seconds * PROBE_SPREAD[1])})"
    assert f"Measure takes {said} here now, from the first forwards of the last Measure here." in \
        why.plan_html("embedded", load=QUIET)
    # another target was never timed: minutes, said plainly; the boxes under Measure are named, unestimated
    assert "Measure takes minutes" in why.plan_html("org/other-model", load=QUIET)
    line = why.plan_html(" embedded ", True, True, load=QUIET)
    assert line.endswith(", plus the offloaded curve and the weight formats (said once it runs).</div>")


def test_the_next_plan_learns_how_long_the_last_measure_took_against_its_plan():
    """A trial: a Measure planned at about 80 s took 107 s, and the line after it still read "about 55 s". The last
    Measure's time over its own plan (1.34 here) scales the next plan from its probe, said in the source; a ratio
    within 10 % of 1 changes nothing, and one beyond the limits is held at them."""
    probe = {1: 40.0, max(TOKEN_COUNTS): 200.0}
    seconds = why.measure_seconds(probe)
    why.remember_probe("embedded", probe)
    plan.remember_took("embedded", 1.34 * seconds, seconds)
    estimate, source = why.planned("embedded", QUIET)
    assert estimate.seconds == pytest.approx(1.34 * seconds)
    assert source == ("from the first forwards of the last Measure here, scaled to the time that Measure took (1.3× "
                      "what its first forwards planned)")
    plan.remember_took("embedded", 1.05 * seconds, seconds)
    assert why.planned("embedded", QUIET)[0].seconds == pytest.approx(seconds)
    plan.remember_took("embedded", 10 * seconds, seconds)
    assert why.planned("embedded", QUIET)[0].seconds == pytest.approx(plan.TOOK_LIMITS[1] * seconds)


def test_the_start_ups_timed_forwards_give_it_before_any_measure():
    costs._TUNED["embedded"] = costs.RunCosts(2.0, 30.0, None, "forwards timed on this machine", PROBE_SPREAD,
                                              measured_load=QUIET)
    widest = max(TOKEN_COUNTS)
    seconds = why.measure_seconds({1: 30.0, widest: widest * 2.0})
    estimate, source = why.planned("embedded", QUIET)
    assert estimate.seconds == pytest.approx(seconds) and source == "from forwards timed on this machine"
    busy = why.plan_html("embedded", load=(12.0, 2))  # very busy: its own plain sentence, the range widened
    assert "Measure: the machine is very busy now (load 12 on 2 CPUs): this may take " in busy


def test_the_line_stands_beside_measure_and_follows_the_settings():
    import gradio as gr

    with gr.Blocks() as demo:
        with gr.Tab("Why"):
            why.build_tab(target="embedded")
    config = demo.get_config_file()
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    plan_id = next(i for i, e in ids.items() if e == "why-measure-plan")
    named = {e: i for i, e in ids.items()}
    feeders = [d for d in config["dependencies"] if d["outputs"] == [plan_id]]
    assert all(d["inputs"] == [named["why-target"], named["why-offload"], named["why-weights"]] for d in feeders)
    events = {(ids.get(t[0]), t[1]) for d in feeders for t in d["targets"]}
    assert {("why-target", "blur"), ("why-target", "submit"), ("why-offload", "change"),
            ("why-weights", "change"), (None, "load")} <= events
    assert any(d.get("trigger_after") is not None for d in feeders)  # and once a Measure has ended


BUSY = (2.0, 2)  # two busy loops on the 2 CPUs: a run gets half the machine (busy_factor 2)


def test_the_line_follows_the_machines_load(monkeypatch):
    """A trial: the line read the same on a quiet machine and beside two busy loops on its 2 CPUs. The load now
    (machine_load, read at each call) moves the estimate: an old probe's middle and range by the load's factor, a
    probe of the last 20 s (its load already in its timing: the load's samples are shared) its range on the slow
    side."""
    probe = {1: 40.0, max(TOKEN_COUNTS): 200.0}
    seconds = why.measure_seconds(probe)
    monkeypatch.setattr(plan, "_PROBES", {"embedded": (probe, plan.time.time() - 3600.0, QUIET)})  # an hour ago
    quiet, _ = why.planned("embedded")  # load=NOW: machine_load, monkeypatched to QUIET
    monkeypatch.setattr(plan, "machine_load", lambda: BUSY)
    busy, _ = why.planned("embedded")
    assert (quiet.seconds, quiet.low, quiet.high) == (pytest.approx(seconds), pytest.approx(seconds * 0.7),
                                                      pytest.approx(seconds * 1.6))
    assert (busy.seconds, busy.low, busy.high) == (pytest.approx(2 * seconds), pytest.approx(2 * seconds * 0.7),
                                                   pytest.approx(2 * seconds * 1.6))
    assert why.plan_html("embedded") != why.plan_html("embedded", load=QUIET)
    assert f"about {rough_time(2 * seconds)} ({span_text(2 * seconds * 0.7, 2 * seconds * 1.6)})" in \
        why.plan_html("embedded")
    monkeypatch.setattr(plan, "_PROBES", {"embedded": (probe, plan.time.time() - 10.0, QUIET)})  # 10 s ago
    recent, _ = why.planned("embedded")
    assert recent.seconds == pytest.approx(seconds)  # 0.7–3.2 of it, drawn in to MAX_WIDTH (3x) in logs
    assert recent.high / recent.low == pytest.approx(3.0) and recent.high > 1.4 * quiet.high  # 123 s, not 85 s


def test_the_line_is_said_again_when_the_tab_is_shown_and_on_a_timer_while_it_is():
    import gradio as gr

    with gr.Blocks() as demo:
        with gr.Tabs():
            with gr.Tab("Live", id="live"):
                gr.HTML("")
            with gr.Tab("Why it works", id="why"):
                why.build_tab(target="embedded")
    config = demo.get_config_file()
    ids = {c["id"]: c for c in config["components"]}
    plan_id = next(i for i, c in ids.items() if c.get("props", {}).get("elem_id") == "why-measure-plan")
    timer_id = next(i for i, c in ids.items() if c["type"] == "timer" and c["props"]["value"] == plan.PLAN_REFRESH_S)
    assert ids[timer_id]["props"]["active"] is False  # until the tab is shown
    feeders = {(t[0], t[1]) for d in config["dependencies"] if d["outputs"] == [plan_id] for t in d["targets"]}
    tab_ids = {c["props"].get("label"): i for i, c in ids.items() if c["type"] == "tabitem"}
    assert (timer_id, "tick") in feeders and (tab_ids["Why it works"], "select") in feeders
    switches = {t[1] for d in config["dependencies"] if d["outputs"] == [timer_id] for t in d["targets"]}
    assert switches == {"select", "load"}
    on = lambda value, index: plan.refresh_while_shown(gr.SelectData(None, {"value": value, "index": index}))  # noqa
    assert on("Why it works", 2).active is True and on("Live", 0).active is False
    address = lambda query: plan.refresh_from_address(SimpleNamespace(query_params=query))  # noqa: E731
    assert address({}).active is False and address({"tab": "why"}).active is True
    # Gradio fills a select's data and a request only for parameters annotated with the classes themselves
    assert typing.get_type_hints(plan.refresh_while_shown)["select"] is gr.SelectData
    assert typing.get_type_hints(plan.refresh_from_address)["request"] is gr.Request
