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

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_gbs", lambda device: 12.5)  # skip the 512 MB copy
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
