"""Targets placed by accelerate's device map (:mod:`specviz.runtime.placement`): a tiny model split over the CPU and the disk
(its offload folder in tmp_path) decodes exactly as the single-device model, sampling stays seeded, the KV cache
and the drafters sit where their inputs are, and bad maps or limits give one sentence."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.cli import main
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.kv import forward_logits, new_cache
from specviz.core.verify import SamplingConfig
from specviz.drafters.early_exit import EarlyExitDrafter, early_exit_view
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.runtime.models import encode_prompt, load_model
from specviz.runtime.placement import (PlacementError, cache_misplacements, load_placed, parse_device_map, parse_max_memory,
                               plan_device_map, skeleton_of)
from specviz.runtime.speed import plain_path

PROMPT = "The quick brown fox jumps over the lazy dog while the cat"
# layers 1 and 3 are read from the checkpoint at every forward; the rest stays in CPU memory
SPLIT = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.layers.2": "cpu",
         "model.layers.3": "disk", "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
GREEDY = GenerationConfig(max_new_tokens=24, k=4)


@pytest.fixture(scope="module")
def placed(tiny_model_dir, tmp_path_factory):
    """The tiny target split over cpu and disk (offload folder in a tmp path)."""
    return load_placed(str(tiny_model_dir), device_map=SPLIT, offload_folder=tmp_path_factory.mktemp("offload"))


@pytest.fixture(scope="module")
def single(tiny_model_dir):
    """The tiny target on one device, as the app loads it."""
    return load_model(str(tiny_model_dir), device="cpu")


def _ids(target, drafter, config, prompt_ids):
    events = (standard_generate(target, prompt_ids, config) if drafter is None
              else speculative_generate(target, drafter, prompt_ids, config))
    return collect(events, target.tokenizer, prompt_ids).token_ids


def _baseline(single, prompt_ids, config=GREEDY):
    """Standard decoding of the single-device model with the default kernels (a placed model runs those)."""
    with plain_path(single.model):
        return _ids(single, None, config, prompt_ids)


def test_split_over_cpu_and_disk_is_placed_as_asked(placed):
    layers = placed.model.model.layers
    assert placed.model.hf_device_map == SPLIT
    assert layers[1].self_attn.q_proj.weight.device.type == "meta"  # streamed from disk at each forward
    assert layers[0].self_attn.q_proj.weight.device.type == "cpu"
    assert placed.device == torch.device("cpu") and placed.path == "eager"
    assert "disk (streamed)" in placed.label


@pytest.mark.parametrize("drafter", ["ngram", "model", "early-exit"])
def test_greedy_ids_of_a_split_target_equal_single_device_standard_decoding(placed, single, tiny_draft_dir,
                                                                           drafter):
    prompt_ids = encode_prompt(placed.tokenizer, PROMPT)
    expected = _baseline(single, prompt_ids)
    make = {"ngram": lambda: NgramDrafter(),
            "model": lambda: ModelDrafter(load_model(str(tiny_draft_dir), device=placed.device).model, "draft"),
            "early-exit": lambda: EarlyExitDrafter(placed.model, 2)}[drafter]
    assert _ids(placed, None, GREEDY, prompt_ids) == expected
    result = collect(speculative_generate(placed, make(), prompt_ids, GREEDY), placed.tokenizer, prompt_ids)
    assert result.token_ids == expected
    assert sum(len(e.draft_ids) for e in result.events) > 0  # drafts were verified, not skipped


@pytest.mark.parametrize("kind, tree_nodes", [("eagle", 0), ("eagle", 6), ("medusa", 6)])
def test_head_drafters_read_a_split_targets_features_and_keep_greedy_ids(placed, single, kind, tree_nodes):
    from specviz.drafters.heads import EagleDrafter, MedusaDrafter, TreeSettings
    from specviz.drafters.networks import new_eagle_head, new_medusa_heads

    torch.manual_seed(0)  # random heads, built from the single-device copy (the placed one streams some weights)
    tree = TreeSettings(max_nodes=tree_nodes) if tree_nodes else None
    if kind == "eagle":
        drafter = EagleDrafter(placed.model, new_eagle_head(single.model).eval().requires_grad_(False), tree)
    else:
        drafter = MedusaDrafter(placed.model, new_medusa_heads(single.model, num_heads=4).eval().requires_grad_(False),
                                tree)
    prompt_ids = encode_prompt(placed.tokenizer, PROMPT)
    result = collect(speculative_generate(placed, drafter, prompt_ids, GREEDY), placed.tokenizer, prompt_ids)
    assert result.token_ids == _baseline(single, prompt_ids)
    assert sum(len(e.draft_ids) for e in result.events) > 0


def test_a_preset_map_within_a_memory_limit_offloads_and_stays_exact(tiny_model_dir, single, tmp_path):
    target = load_placed(str(tiny_model_dir), device_map="auto", max_memory="cpu=420KB", offload_folder=tmp_path)
    plan = target.model._specviz_device_map
    assert "disk" in plan.values() and "cpu" in plan.values(), plan
    assert plan["model.embed_tokens"] == "cpu" and plan.get("lm_head", "cpu") == "cpu"  # kept resident
    prompt_ids = encode_prompt(target.tokenizer, PROMPT)
    assert _ids(target, NgramDrafter(), GREEDY, prompt_ids) == _baseline(single, prompt_ids)


def test_a_map_with_a_default_entry_is_split_for_accelerate_and_stays_exact(tiny_model_dir, single, tmp_path):
    target = load_placed(str(tiny_model_dir), device_map="model.layers.2=disk,*=cpu", offload_folder=tmp_path)
    plan = target.model._specviz_device_map
    assert plan["model.layers.2"] == "disk" and plan["model.layers.1"] == "cpu" and "" not in plan
    prompt_ids = encode_prompt(target.tokenizer, PROMPT)
    assert _ids(target, NgramDrafter(), GREEDY, prompt_ids) == _baseline(single, prompt_ids)


def test_sampling_on_a_split_target_is_seeded_and_reproducible(placed, single):
    prompt_ids = encode_prompt(placed.tokenizer, PROMPT)
    config = GenerationConfig(max_new_tokens=20, k=4, sampling=SamplingConfig(temperature=1.0, seed=11))
    first = _ids(placed, NgramDrafter(), config, prompt_ids)
    assert _ids(placed, NgramDrafter(), config, prompt_ids) == first
    assert _ids(placed, None, config, prompt_ids) == _baseline(single, prompt_ids, config)


def test_each_layers_cache_lives_where_that_layer_computes(placed):
    cache = new_cache(placed.model)
    forward_logits(placed.model, encode_prompt(placed.tokenizer, PROMPT), cache, 1)
    assert all(layer.is_initialized for layer in cache.layers)
    assert cache_misplacements(placed.model, cache) == []


def test_the_early_exit_view_of_a_placed_target_runs_only_its_layers(placed, single):
    ids = torch.tensor([encode_prompt(placed.tokenizer, PROMPT)])
    with torch.inference_mode(), plain_path(single.model):
        view = early_exit_view(placed.model, 2)(ids).logits
        reference = early_exit_view(single.model, 2)(ids).logits
        full = placed.model(ids).logits
    assert torch.allclose(view, reference, atol=1e-5)
    assert not torch.allclose(view, full, atol=1e-3)


@pytest.mark.parametrize("device_map, max_memory, folder, words", [
    ({**SPLIT, "model.layers.1": "tpu"}, None, True, "Unknown device 'tpu'"),
    ({**SPLIT, "model.layers.1": "cuda:3"}, None, True, "GPU 3"),
    ({**SPLIT, "model.layer.9": "cpu"}, None, True, "not a module of this model"),
    ({"model.layers.0": "cpu"}, None, True, "places no device"),
    ({**SPLIT, "lm_head": "disk", "model.embed_tokens": "disk"}, None, True, "keep the input embedding"),
    (SPLIT, None, False, "offload folder"),
    ("auto", "cpu=1KB", True, "too small for anything"),
    ("auto", "cpu=lots", True, "as a memory size"),
    ("everywhere", None, True, "Cannot read the device map"),
])
def test_bad_maps_and_limits_are_one_sentence(tiny_model_dir, tmp_path, device_map, max_memory, folder, words):
    with pytest.raises(PlacementError) as caught:
        load_placed(str(tiny_model_dir), device_map=device_map, max_memory=max_memory,
                    offload_folder=tmp_path if folder else None)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert words in message and "\n" not in message and message.endswith(".")


def test_the_cli_places_the_target_and_prints_errors_as_one_line(capsys, tiny_model_dir, tmp_path):
    base = ["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "8", "--json"]
    pairs = ",".join(f"{name}={device}" for name, device in SPLIT.items())
    assert main([*base, "--drafter", "none"]) == 0
    expected = json.loads(capsys.readouterr()[0])["token_ids"]
    code = main([*base, "--drafter", "ngram", "--device-map", pairs, "--offload-folder", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["token_ids"] == expected and "placed:" in err
    code = main([*base, "--device-map", pairs.replace("disk", "tpu", 1), "--offload-folder", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("error: Unknown device 'tpu'") and len(err.strip().splitlines()) == 1
    assert main([*base, "--max-memory", "cpu=1KB"]) == 2
    assert "too small for anything" in capsys.readouterr()[1]


def test_parsers_read_the_documented_forms(tiny_model_dir):
    assert parse_device_map("Auto") == "auto"
    assert parse_device_map("model.layers.0=disk, *=cpu") == {"model.layers.0": "disk", "": "cpu"}
    assert parse_device_map('{"": "cpu"}') == {"": "cpu"}
    assert parse_max_memory("cpu=2GiB") == {"cpu": 2 * 2**30}
    skeleton = skeleton_of(str(tiny_model_dir), torch.float32)
    assert plan_device_map(skeleton, "auto") == {"": "cpu"}  # it all fits: one device, nothing streamed


def test_the_offload_curve_figures_read_a_fixed_streaming_cost_as_a_flatter_curve():
    from specviz.analysis.offload import curve_figures, format_markdown, line_fit, speedup_table

    compute = {n: 100.0 + 40.0 * n for n in range(1, 10)}  # ms: the same compute in both copies
    times = {"memory": {n: [ms, ms * 1.1] for n, ms in compute.items()},
             "disk": {n: [ms + 600.0, (ms + 600.0) * 1.1] for n, ms in compute.items()}}  # + streaming per forward
    figures = {name: curve_figures(t) for name, t in times.items()}
    assert figures["disk"][9]["ratio"] < figures["memory"][9]["ratio"]
    assert line_fit(figures["disk"]) == pytest.approx((735.0, 42.0))  # the medians: 1.05 x the line
    assert line_fit(figures["memory"])[1] == pytest.approx(42.0)
    row = speedup_table(figures)[3]  # k = 4
    assert row["k"] == 4 and row["disk"]["all_accepted"] == pytest.approx(5 / (900 / 740))
    assert row["memory"]["tau=2"] == pytest.approx(2 / (300 / 140))
    assert speedup_table(figures)[0]["disk"]["tau=3"] is None  # k = 1 yields at most 2 tokens
    assert "| 9 (8) |" in format_markdown(figures)
