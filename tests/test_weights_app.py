"""The weight formats in the app (issue 37): the operator's ``SPECVIZ_WEIGHTS`` read where the app loads its target
(the Live handler's ids equal standard decoding in the same format, the status names it), and the Why tab's optional
step time against weight bytes (one point per format beside the memory floor; off: the tab as before)."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import device, live  # noqa: E402
from app.live import run as live_run  # noqa: E402
from app.weights_setting import ENV_WEIGHTS, operator_weights  # noqa: E402
from drain_support import last_output, live_field  # noqa: E402
from why_support import drain_measure  # noqa: E402
from specviz.core.engine import collect, standard_generate  # noqa: E402
from specviz.runtime.models import load_model  # noqa: E402
from specviz.runtime.weights import FORMATS, weights_of, with_weights  # noqa: E402

ARGS = dict(prompt="The quick brown fox jumps over the lazy dog while the cat", drafter="ngram", draft_model="",
            exit_layer=0, k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=20,
            stop_strings="", chat_template=False, tree_nodes=0)


def test_the_operator_weight_format_is_read_from_the_environment():
    assert operator_weights({}) == "float32"
    assert operator_weights({ENV_WEIGHTS: " INT4 "}) == "int4"
    assert operator_weights({ENV_WEIGHTS: "bfloat16"}) == "bfloat16"
    assert operator_weights({ENV_WEIGHTS: "int3"}) == "float32"  # logged, the default used


def test_the_live_handler_in_int8_decodes_as_standard_decoding_in_int8(tiny_model_dir, monkeypatch):
    final, seen = _live_run(tiny_model_dir, monkeypatch, env_weights="int8")
    target = seen["target"]
    assert weights_of(target.model) == "int8"
    got = collect(iter(seen["events"]), target.tokenizer, seen["prompt_ids"]).token_ids
    assert got == _standard_ids(tiny_model_dir, "int8", seen) and len(got) > 0
    status = live_field(final, "status")
    assert "Done in" in status and "int8 weights" in status  # the status names the format
    assert live_field(final, "history-state")[0].identical is True


def test_a_format_that_cannot_run_is_one_sentence_in_the_status(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(ENV_WEIGHTS, "int4")
    monkeypatch.setenv("SPECVIZ_DTYPE", "bfloat16")
    final = last_output(live.generate({**ARGS, "target": str(tiny_model_dir)}, []))
    status = html.unescape(live_field(final, "status"))
    assert "status-error" in status and "SPECVIZ_DTYPE=float32" in status and "Traceback" not in status
    assert not device.DEVICE.locked


# ------------------------------------------------------------------------------ the Why tab's weight formats


def _measure(tiny_model_dir, monkeypatch, **named) -> dict:
    """The Why tab's Measure on the tiny target with a small grid and two rounds per format; the last value of each
    output (an output never sent is absent)."""
    import specviz.measure.grid
    from app import why
    from app.why import weights

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2, 4))
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1,))
    monkeypatch.setattr(weights, "ROUNDS", 2)
    monkeypatch.setattr(weights, "WARMUP", 0)
    return drain_measure(str(tiny_model_dir), **named)


def test_the_why_tab_draws_step_time_against_weight_bytes_when_asked(tiny_model_dir, monkeypatch):
    last = _measure(tiny_model_dir, monkeypatch, weights=True)
    result = last["why-measurement"]["weights"]
    assert list(result["formats"]) == list(FORMATS) and result["copy_bandwidth_gbs"] == 12.5
    chart = last["why-weights-chart"]
    points = [t for t in chart.data if t.mode == "markers+text"]
    assert [t.name for t in points] == list(FORMATS) and all(len(t.x) == 1 for t in points)
    mb = {t.name: t.x[0] for t in points}
    assert mb["float32"] > mb["bfloat16"] > mb["int8"] > mb["int4"]  # fewer bytes per format
    floor = [t for t in chart.data if (t.name or "").startswith("memory floor")]
    assert len(floor) == 1 and floor[0].y[1] == pytest.approx(floor[0].x[1] / 12.5)  # MB / (GB/s) = ms
    curves = [t for t in chart.data if t.mode == "lines+markers"]
    assert len(curves) == len(FORMATS) and all(list(t.x) == list(range(1, 10)) for t in curves)
    assert "The weight formats are drawn below." in last["why-status"]
    summary = html.unescape(last["why-summary"])
    assert "Step time against weight bytes" in summary and "T(5)/T(1)" in summary
    assert any("Weight formats: round" in s for s in last["all_why-status"] if "Measuring" in s)


def test_without_the_box_the_why_tab_has_no_weights_chart(tiny_model_dir, monkeypatch):
    last = _measure(tiny_model_dir, monkeypatch)
    assert last["why-measurement"]["weights"] is None
    assert "why-weights-chart" not in last  # never sent: the hidden chart stays hidden
    assert "why-weights" not in last["why-summary"] and "weight formats" not in last["why-status"]


def test_stop_ends_the_weights_measurement(tiny_model_dir):
    from app.why.weights import measure_formats

    loaded = load_model(str(tiny_model_dir), device="cpu")
    said: list[str] = []
    assert measure_formats(loaded, 10.0, said.append, lambda: True) is None
    assert said  # it stopped at its first check


def _result(int4_verify: float) -> dict:
    figures = {fmt: {"step_ms": ms, "linear_mb": mb, "floor_ms": mb / 10.0, "step_over_floor": ms / (mb / 10.0),
                     "step_ms_range": [ms * 0.9, ms * 1.2], "verify": {n: 1.0 + (v - 1.0) * (n - 1) / 4
                                                                     for n in range(1, 10)}}
               for fmt, ms, mb, v in (("float32", 60.0, 538.0, 1.05), ("bfloat16", 40.0, 269.0, 1.1),
                                      ("int8", 25.0, 135.0, 1.4), ("int4", 20.0, 95.0, int4_verify))}
    return {"formats": figures, "copy_bandwidth_gbs": 10.0, "threads": 2, "settings": {"rounds": 4},
            "left_out": "", "seconds": 12.0}


def test_the_weights_paragraph_says_where_the_step_is_memory_bound():
    from app.why.weights import weights_figure, weights_html

    text = html.unescape(weights_html(_result(2.1)))
    assert "Memory-bound" in text and "float32, bfloat16" in text  # 1.1x and 1.5x their floors
    assert "Far above the floor" in text and "int4 (2.1×)" in text
    assert "int4's curve rises above float32's" in text and "int4 2.10" in text
    assert "no steeper" in weights_html(_result(1.0))
    assert "not measured" in weights_html({"error": "The weight formats were not measured: no."})
    assert weights_html(None) == ""
    bars = [t for t in weights_figure(_result(2.1)).data if t.name == "int4" and t.mode == "markers+text"][0]
    assert bars.error_y.array[0] == pytest.approx(4.0) and bars.error_y.arrayminus[0] == pytest.approx(2.0)


# ------------------------------------------------------------------------------ the visitor's "Weights" choice


def _standard_ids(tiny_model_dir, fmt: str, seen: dict) -> list[int]:
    """Standard decoding's ids of the spied run's prompt and settings, on the tiny target in ``fmt``."""
    same_format = with_weights(load_model(str(tiny_model_dir), device="cpu"), fmt)
    return collect(standard_generate(same_format, seen["prompt_ids"], seen["config"]), same_format.tokenizer,
                   seen["prompt_ids"]).token_ids


def _live_run(tiny_model_dir, monkeypatch, env_weights: str | None = None, **values) -> tuple[tuple, dict]:
    """The Live handler on the tiny target with ``values`` added to :data:`ARGS` and the operator's
    ``SPECVIZ_WEIGHTS`` set to ``env_weights`` (None: unset); (its last message, as it is, the speculative run's
    target and events)."""
    seen: dict = {}
    real_spec = live_run.speculative_generate

    def spy(target, drafter, prompt_ids, config, *args, **kwargs):
        seen.update(target=target, prompt_ids=list(prompt_ids), config=config, events=[])
        for event in real_spec(target, drafter, prompt_ids, config, *args, **kwargs):
            seen["events"].append(event)
            yield event

    if env_weights is None:
        monkeypatch.delenv(ENV_WEIGHTS, raising=False)
    else:
        monkeypatch.setenv(ENV_WEIGHTS, env_weights)
    monkeypatch.setattr(live_run, "speculative_generate", spy)
    final = last_output(live.generate({**ARGS, "target": str(tiny_model_dir), **values}, []))
    assert not device.DEVICE.locked
    return final, seen


def test_the_visitor_chooses_int8_and_both_runs_use_it(tiny_model_dir, monkeypatch):
    final, seen = _live_run(tiny_model_dir, monkeypatch, weights="int8")
    target = seen["target"]
    assert weights_of(target.model) == "int8"
    got = collect(iter(seen["events"]), target.tokenizer, seen["prompt_ids"]).token_ids
    expected = _standard_ids(tiny_model_dir, "int8", seen)
    assert got == expected and len(got) > 0
    status = live_field(final, "status")
    assert "Done in" in status and "int8 weights" in status
    row = live_field(final, "history-state")[0]
    assert row.identical is True and row.weights == "int8"
    assert "int8 weights" in live_field(final, "history")


def test_a_run_that_omits_the_weights_keeps_float32(tiny_model_dir, monkeypatch):
    final, seen = _live_run(tiny_model_dir, monkeypatch)
    assert weights_of(seen["target"].model) == "float32"
    row = live_field(final, "history-state")[0]
    assert row.weights == "float32" and row.identical is True
    assert "weights" not in live_field(final, "history")


def test_a_bad_weight_format_is_one_sentence(tiny_model_dir, monkeypatch):
    final, seen = _live_run(tiny_model_dir, monkeypatch, weights="int3")
    status = html.unescape(live_field(final, "status"))
    assert "status-error" in status and "Unknown weight format 'int3'" in status and "Traceback" not in status
    assert not seen  # nothing ran


def test_the_weights_setting_is_optional_and_defaults_to_the_operators(monkeypatch):
    from app.inputs import InputError, OPTIONAL_SETTINGS, parse_weights

    assert OPTIONAL_SETTINGS["weights"] is None
    monkeypatch.delenv(ENV_WEIGHTS, raising=False)
    assert parse_weights(None) == parse_weights("") == "float32"
    assert parse_weights(" INT4 ") == "int4"
    monkeypatch.setenv(ENV_WEIGHTS, "bfloat16")
    assert parse_weights(None) == "bfloat16" and parse_weights("float32") == "float32"
    with pytest.raises(InputError, match="choose float32, bfloat16, int8 or int4"):
        parse_weights(8)


def test_int8_on_a_target_not_in_float32_is_one_sentence(tiny_model_dir):
    import torch

    from app.weights_setting import in_chosen_weights
    from specviz.runtime.weights import WeightsError

    loaded = load_model(str(tiny_model_dir), device="cpu", dtype=torch.bfloat16)
    assert in_chosen_weights(loaded, "bfloat16") is loaded and in_chosen_weights(loaded, "float32") is loaded
    with pytest.raises(WeightsError, match=r"loads the target in bfloat16 \(SPECVIZ_DTYPE\): choose float32"):
        in_chosen_weights(loaded, "int8")
    on_gpu = type("Loaded", (), {"model": loaded.model, "dtype": torch.float32, "device": torch.device("cuda")})()
    with pytest.raises(WeightsError, match=r"CPU only .* choose float32 or bfloat16\."):
        in_chosen_weights(on_gpu, "int4")


# ------------------------------------------------------------------------------ the start-up's weight formats


@pytest.fixture()
def fresh_tuning(tmp_path, monkeypatch, tiny_target):
    """Tuning on, kept under ``tmp_path``, the threads' measurement faked (quiet), nothing measured in memory and
    no default format known; each format's measurement counted in the list returned."""
    import app.weights_setting as setting
    from specviz.measure import tuning, weights_default

    monkeypatch.setenv("SPECVIZ_TUNE", "1")
    monkeypatch.delenv(ENV_WEIGHTS, raising=False)
    monkeypatch.setattr(tuning, "_busy", lambda load, others: False)
    monkeypatch.setattr(tuning, "_path", lambda target, folder: tmp_path / f"{tuning.machine_key(target)}.json")
    monkeypatch.setattr(tuning, "measure", lambda target: tuning.Tuning(1, 1, False, {}))
    for name, empty in (("_MEASURED", {}), ("_REASONS", {}), ("_SKIPPED", set())):
        monkeypatch.setattr(setting, name, empty)
    calls = []

    def measure_formats(target, formats=None, progress=None, **_):
        calls.append(target)
        fig = lambda step: {"step": step, "range": [step - 1, step + 1], "verify": {1: 1.0, 2: 1.1}, "verify_gap": 0.0}
        if progress:
            progress("weights: int8: 211 linears, 135 MB of linears (float32: 538 MB); 60 q/k/v groups fused (0 s)")
        return {"float32": fig(37.4), "int8": fig(20.6)}

    monkeypatch.setattr(weights_default, "measure_formats", measure_formats)
    threads = getattr(tiny_target.model, "_specviz_threads", None)
    flags = [(m, name, getattr(m, name)) for m in tiny_target.model.modules()
             for name in ("_specviz_fast", "_specviz_fold") if hasattr(m, name)]  # the faked tuning turns them off
    tuning.forget()
    yield calls
    tuning.forget()
    from specviz.core.costs import set_verify_curve

    for module, name, value in flags:
        setattr(module, name, value)
    for fmt in ("float32", "int8"):
        set_verify_curve(with_weights(tiny_target, fmt).model, None)
    tiny_target.model._specviz_threads = threads


def test_a_busy_start_up_skips_the_weight_formats_and_says_so(tiny_target, fresh_tuning, monkeypatch):
    import app.weights_setting as setting
    from specviz.measure import tuning

    probes = []
    monkeypatch.setattr(tuning, "busy_now", lambda: probes.append(1) or (True, 12.0))
    said = []
    assert setting.measured_default(tiny_target, progress=said.append) == "float32" and fresh_tuning == []
    assert setting.operator_weights() == "float32"
    assert setting.default_reason(target=str(tiny_target.spec)) == setting.skipped_reason(12.0) == (
        f"float32 kept without comparing the formats: the machine was busy when the target loaded (load 12.0 on "
        f"{os.cpu_count()} CPUs), so their timings would have been noise. A start on a quiet machine compares them.")
    assert setting.measured_default(tiny_target) == "float32" and probes == [1]  # a visitor's run: no probe again
    assert not any("weights:" in line for line in said)


def test_the_setting_shown_after_the_start_up_picks_a_format_is_that_format(tiny_target, fresh_tuning):
    """A page reads the default on each load (the Weights radio's value is :func:`operator_weights`): float32
    before the start-up measured the formats, the measured int8 after."""
    import app.weights_setting as setting

    assert setting.operator_weights() == "float32"  # a page opened during the start-up's measurement
    said = []
    target = setting.in_operator_weights(tiny_target, progress=said.append)
    assert weights_of(target.model) == "int8" and len(fresh_tuning) == 1
    assert setting.operator_weights() == "int8"  # a page opened afterwards
    from specviz.measure.tuning import MEASURING, MEASURING_WEIGHTS

    assert said == [MEASURING, MEASURING_WEIGHTS]  # the figures and the int8 copy's report: the log only


def test_a_run_keeps_the_format_its_page_shows_and_says_so(tiny_target, fresh_tuning):
    """A page opened before the start-up picked int8 still shows float32: the run uses float32 and its status
    says so; a page set to int8 is told its weights are being prepared, in words."""
    import app.weights_setting as setting

    setting.in_operator_weights(tiny_target)
    said = []
    assert setting.in_chosen_weights(tiny_target, "float32", said.append) is tiny_target
    assert said == ["Using the float32 weights set on this page (the server's default is int8, measured fastest "
                    "here)…"]
    said.clear()
    assert weights_of(setting.in_chosen_weights(tiny_target, "int8", said.append).model) == "int8"
    assert said[0] == "Using the int8 weights…" and said[1:] == ["Preparing the int8 weights…"]
    assert setting.chosen_note("float32", "int4", by_operator=True) == (
        "Using the float32 weights set on this page (the server's default is int4, set by its operator)…")


def test_a_page_opened_before_the_start_up_decided_gets_the_default_format(tiny_target, fresh_tuning):
    """The Weights radio of a page opened while the start-up compares the formats shows float32; its page-load and
    timer handlers set it to the decided int8 once known, unless the visitor chose a format, and the timer stops."""
    import app.weights_setting as setting
    from app.costs import DEFAULT_TOKENS_TRIES
    from app.live.layout import page_weights, retry_weights

    assert setting.decided_weights() is None  # still comparing: nothing changes, the timer asks again
    assert page_weights("float32") == {"__type__": "update"}
    update, timer, tries = retry_weights("float32", False, 0)
    assert update == {"__type__": "update"} and timer.active is True and tries == 1
    setting.in_operator_weights(tiny_target)  # the start-up measures int8 fastest
    assert setting.decided_weights() == "int8"
    update, timer, tries = retry_weights("float32", False, tries)
    assert update["value"] == "int8" and timer.active is False and tries == 2
    assert update["info"].startswith(live.layout.WEIGHTS_NOTE) and "int8" in update["info"].removeprefix(
        live.layout.WEIGHTS_NOTE)  # the reason with its figures
    assert page_weights("float32")["value"] == "int8"  # the page load of a page that still shows the placeholder
    for shown, chosen in (("float32", True), ("bfloat16", False), ("int8", False)):  # theirs stays
        assert "value" not in page_weights(shown, chosen)
    update, timer, tries = retry_weights("float32", True, 5)  # the visitor clicked float32 themselves
    assert update == {"__type__": "update"} and timer.active is False and tries == 6
    setting._MEASURED.clear()
    _, timer, _ = retry_weights("float32", False, DEFAULT_TOKENS_TRIES - 1)
    assert timer.active is False  # it gives up after its tries


def test_the_weights_radio_is_wired_to_retry_only_when_left_at_its_default():
    from app import build_demo

    def wired(demo) -> tuple[bool, bool]:
        ids = {c["id"]: c for c in demo.config["components"]}
        radio = next(i for i, c in ids.items() if c.get("props", {}).get("elem_id") == "weights")
        held = [i for i, c in ids.items() if c.get("props", {}).get("elem_id") == "weights-offered"]
        deps = demo.config["dependencies"]
        ticks = any(held and held[0] in d.get("outputs", []) and any(ids.get(t[0], {}).get("type") == "timer"
                                                                     for t in d.get("targets", [])) for d in deps)
        ticks = ticks and any(radio in d.get("outputs", []) and held[0] in d.get("inputs", []) for d in deps)
        clicks = any([radio, "input"] in [list(t) for t in d.get("targets", [])] for d in deps)
        return ticks, clicks

    assert wired(build_demo()) == (True, True)
    assert wired(build_demo(weights="int4")) == (False, False)  # an operator's page setting stays
