"""The app's operator placement (:mod:`app.placed`): with ``SPECVIZ_DEVICE_MAP`` and ``SPECVIZ_OFFLOAD_FOLDER`` the
tabs load their target split over the CPU and the disk, the Live handler's ids equal standard decoding of the
single-device model, the status names the placement, tuning is skipped, and a bad map is one sentence."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import device, live, placed  # noqa: E402
from specviz.core.engine import collect, standard_generate  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.speed import plain_path  # noqa: E402

PAIRS = ("model.embed_tokens=cpu,model.layers.0=cpu,model.layers.1=disk,model.layers.2=cpu,model.layers.3=disk,"
         "model.norm=cpu,model.rotary_emb=cpu,lm_head=cpu")
ARGS = dict(prompt="The quick brown fox jumps over the lazy dog while the cat", drafter="ngram", draft_model="",
            exit_layer=0, k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=20,
            stop_strings="", chat_template=False, tree_nodes=0, history=[])


@pytest.fixture
def operator_map(monkeypatch, tmp_path):
    """The operator's cpu+disk map in the environment; tuning made to fail, so a call to it would show."""
    monkeypatch.setenv(placed.ENV_DEVICE_MAP, PAIRS)
    monkeypatch.setenv(placed.ENV_OFFLOAD_FOLDER, str(tmp_path / "offload"))

    def no_tuning(*args, **kwargs):
        raise AssertionError("a placed target is not tuned")

    monkeypatch.setattr("specviz.tuning.tune", no_tuning)
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
    real_spec = live.speculative_generate

    def spy(target, drafter, prompt_ids, config, *args, **kwargs):
        seen.update(target=target, prompt_ids=list(prompt_ids), config=config, events=[])
        for event in real_spec(target, drafter, prompt_ids, config, *args, **kwargs):
            seen["events"].append(event)
            yield event

    monkeypatch.setattr(live, "speculative_generate", spy)
    outs = list(live.generate(**{**ARGS, "target": str(tiny_model_dir)}))
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
    status = outs[-1][live.OUTPUTS.index("status")]
    assert "Done in" in status and "2 on disk (streamed)" in status  # the status names the placement
    history = outs[-1][live.OUTPUTS.index("history-state")]
    assert history[0]["identical"] is True


def test_a_bad_operator_map_is_one_sentence_in_the_status(monkeypatch, tiny_model_dir):
    monkeypatch.setenv(placed.ENV_DEVICE_MAP, PAIRS.replace("disk", "tpu", 1))
    placed.forget_placed()
    outs = list(live.generate(**{**ARGS, "target": str(tiny_model_dir)}))
    status = html.unescape(outs[-1][live.OUTPUTS.index("status")])
    assert "status-error" in status and "Unknown device 'tpu'" in status and "Traceback" not in status
    assert not device.DEVICE.locked
