"""The app's operator placement (:mod:`app.placed`): with ``SPECVIZ_DEVICE_MAP`` and ``SPECVIZ_OFFLOAD_FOLDER`` the
tabs load their target split over the CPU and the disk, the Live handler's ids equal standard decoding of the
single-device model, the status names the placement, tuning is skipped, and a bad map is one sentence."""

from __future__ import annotations

import html
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import device, live, placed  # noqa: E402
from app.live import run as live_run  # noqa: E402
from drain_support import last_output, live_field  # noqa: E402
from why_support import drain_measure  # noqa: E402
from specviz.core.engine import collect, standard_generate  # noqa: E402
from specviz.runtime.models import load_model  # noqa: E402
from specviz.runtime.speed import plain_path  # noqa: E402

PAIRS = ("model.embed_tokens=cpu,model.layers.0=cpu,model.layers.1=disk,model.layers.2=cpu,model.layers.3=disk,"
         "model.norm=cpu,model.rotary_emb=cpu,lm_head=cpu")
ARGS = dict(prompt="The quick brown fox jumps over the lazy dog while the cat", drafter="ngram", draft_model="",
            exit_layer=0, k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=20,
            stop_strings="", chat_template=False, tree_nodes=0)


@pytest.fixture
def operator_map(monkeypatch, tmp_path):
    """The operator's cpu+disk map in the environment; tuning made to fail, so a call to it would show."""
    monkeypatch.setenv(placed.ENV_DEVICE_MAP, PAIRS)
    monkeypatch.setenv(placed.ENV_OFFLOAD_FOLDER, str(tmp_path / "offload"))

    def no_tuning(*args, **kwargs):
        raise AssertionError("a placed target is not tuned")

    monkeypatch.setattr("specviz.measure.tuning.tune", no_tuning)
    placed.forget_placed()
    yield
    placed.forget_placed()


def test_the_operator_placement_is_read_from_the_environment():
    assert placed.operator_placement({}) is None
    assert placed.operator_placement({placed.ENV_OFFLOAD_FOLDER: "/tmp/x"}) == placed.Placement("auto", "", "/tmp/x")
    found = placed.operator_placement({placed.ENV_DEVICE_MAP: " balanced ", placed.ENV_MAX_MEMORY: "cpu=2GiB"})
    assert found == placed.Placement("balanced", "cpu=2GiB", "") and "max memory cpu=2GiB" in found.describe()


def test_the_live_handler_on_an_operator_placed_target_decodes_as_the_single_device_model(
        operator_map, tiny_model_dir, monkeypatch):
    seen: dict = {}
    real_spec = live_run.speculative_generate

    def spy(target, drafter, prompt_ids, config, *args, **kwargs):
        seen.update(target=target, prompt_ids=list(prompt_ids), config=config, events=[])
        for event in real_spec(target, drafter, prompt_ids, config, *args, **kwargs):
            seen["events"].append(event)
            yield event

    monkeypatch.setattr(live_run, "speculative_generate", spy)
    final = last_output(live.generate({**ARGS, "target": str(tiny_model_dir)}, []))
    assert not device.DEVICE.locked
    target = seen["target"]
    assert target.model._specviz_device_map["model.layers.1"] == "disk" and target.path == "eager"
    assert device.load_target(str(tiny_model_dir)) is target  # kept: the next run does not load it again
    got = collect(iter(seen["events"]), target.tokenizer, seen["prompt_ids"]).token_ids
    single = load_model(str(tiny_model_dir), device="cpu")
    with plain_path(single.model):  # a placed target runs the default kernels
        expected = collect(standard_generate(single, seen["prompt_ids"], seen["config"]), single.tokenizer,
                           seen["prompt_ids"]).token_ids
    assert got == expected and len(got) > 0
    status = live_field(final, "status")
    assert "Done in" in status and "2 on disk (streamed)" in status  # the status names the placement
    history = live_field(final, "history-state")
    assert history[0].identical is True


def test_a_bad_operator_map_is_one_sentence_in_the_status(monkeypatch, tiny_model_dir):
    monkeypatch.setenv(placed.ENV_DEVICE_MAP, PAIRS.replace("disk", "tpu", 1))
    placed.forget_placed()
    final = last_output(live.generate({**ARGS, "target": str(tiny_model_dir)}, []))
    status = html.unescape(live_field(final, "status"))
    assert "status-error" in status and "Unknown device 'tpu'" in status and "Traceback" not in status
    assert not device.DEVICE.locked


# ------------------------------------------------------------------------------ the Why tab's offloaded curve


def _measure(tiny_model_dir, monkeypatch, **named) -> dict:
    """The Why tab's Measure on the tiny target with a small grid; the last value of each output."""
    import specviz.measure.grid
    from app import why

    monkeypatch.setattr(specviz.measure.grid, "copy_bandwidth_repeats", lambda device: [12.0, 12.5, 13.0])
    monkeypatch.setattr(why.handlers, "TOKEN_COUNTS", (1, 2, 4))
    monkeypatch.setattr(why.handlers, "BATCH_SIZES", (1,))
    return drain_measure(str(tiny_model_dir), **named)


def test_the_why_tab_draws_the_offloaded_curve_beside_the_whole_one_when_asked(tiny_model_dir, monkeypatch):
    last = _measure(tiny_model_dir, monkeypatch, offload=True)
    offload = last["why-measurement"]["offload"]
    assert offload["where"] == "disk" and "disk (streamed)" in offload["label"]
    assert all(sorted(f) == list(range(1, 10)) for f in offload["figures"].values())  # n = 1..9: k up to 8
    names = {t.name for t in last["why-chart"].data}
    assert {"batch 1, layers offloaded to disk", "batch 1, whole, default kernels"} <= names
    assert "The offloaded curve is drawn on the right." in last["why-status"]
    summary = html.unescape(last["why-summary"])
    assert "offloaded curve" in summary and "your run's k = 4 and 2.5 tokens per pass" in summary
    assert any("Timing the target offloaded to disk: round" in s for s in last["all_why-status"] if "Measuring" in s)


def test_without_the_box_the_why_tab_measures_and_draws_as_before(tiny_model_dir, monkeypatch):
    last = _measure(tiny_model_dir, monkeypatch)
    assert last["why-measurement"]["offload"] is None
    assert not any("offloaded" in (t.name or "") for t in last["why-chart"].data)
    assert "why-offload" not in last["why-summary"] and "offloaded" not in last["why-status"]


def test_the_offload_paragraph_reads_the_flatter_curve_and_the_implied_speedup():
    from app.why.offload import offload_html
    from specviz.analysis.offload import curve_figures, implied_speedup

    compute = {n: 100.0 + 40.0 * n for n in range(1, 10)}
    figures = {"memory": curve_figures({n: [ms] for n, ms in compute.items()}),
               "offloaded": curve_figures({n: [ms + 600.0] for n, ms in compute.items()})}
    found = {"figures": figures, "where": "disk", "label": "tiny", "seconds": 3.0}
    text = re.sub(r"<[^>]+>", "", html.unescape(offload_html(found, 0.7, {"k": 3.0, "tokens_per_pass": 2.0})))
    assert "The offloaded curve is flatter" in text and "every layer's weights from disk" in text
    assert f"{implied_speedup(2.0, 860 / 740):.2f}× standard decoding offloaded" in text
    assert f"{implied_speedup(2.0, 260 / 140):.2f}× whole" in text
    swapped = {**found, "figures": {"memory": figures["offloaded"], "offloaded": figures["memory"]}}
    assert "no flatter here" in offload_html(swapped, 0.7, None)
    assert offload_html(None, 0.7, None) == ""


def test_an_offload_that_cannot_be_placed_is_one_sentence(monkeypatch):
    import specviz.runtime.placement
    from app.why.offload import measure_offloaded, offload_html

    def refuse(*args, **kwargs):
        raise specviz.runtime.placement.PlacementError("This model cannot be placed.")

    monkeypatch.setattr(specviz.runtime.placement, "load_placed", refuse)
    found = measure_offloaded("embedded", lambda message: None, lambda: False)
    assert found == {"error": "The offloaded curve was not measured: This model cannot be placed."}
    assert "not measured" in offload_html(found, 0.7, None)
