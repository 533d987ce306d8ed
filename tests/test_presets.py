"""Real-pair presets offline: every preset's architecture (Llama; Qwen2 with its vocabulary padded beyond the
tokenizer) built tiny, saved and loaded through the user's path, and drafted by a smaller model of its family with
greedy ids equal to standard decoding; the memory estimate matches the real parameter count, and a model that
cannot fit is refused with one sentence before any weight is read."""

from __future__ import annotations

import pytest
import torch

from specviz.runtime import models, presets

from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.drafters.registry import make_drafter
from tests.conftest import CORPUS, EOS, build_tokenizer


def _tiny(folder, family: str, tokenizer, layers: int, seed: int, padded: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    eos = tokenizer.convert_tokens_to_ids(EOS)
    common = dict(vocab_size=len(tokenizer) + padded, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, eos_token_id=eos,
                  pad_token_id=eos, initializer_range=0.2)
    config = (LlamaConfig(tie_word_embeddings=False, bos_token_id=None, **common) if family == "llama"
              else Qwen2Config(tie_word_embeddings=True, **common))
    torch.manual_seed(seed)
    model = (LlamaForCausalLM if family == "llama" else Qwen2ForCausalLM)(config).to(torch.float32)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(CORPUS, 300, [EOS])


@pytest.mark.parametrize("family, padded", [("llama", 0), ("qwen2", 37)])
def test_each_family_is_estimated_and_drafted_exactly(tmp_path, tokenizer, family, padded):
    target_dir, target_model = _tiny(tmp_path / "target", family, tokenizer, 4, 0, padded)
    draft_dir, _ = _tiny(tmp_path / "draft", family, tokenizer, 2, 1, padded)
    real = sum(p.numel() for p in target_model.parameters())
    estimate = presets.parameter_count(target_model.config)
    biases = sum(p.numel() for n, p in target_model.named_parameters() if n.endswith(".bias"))  # Qwen2's q, k, v
    assert estimate == real - biases
    target = models.load_model(str(target_dir))
    assert target.vocab_size == len(tokenizer) + padded  # the padded rows are kept, never sampled
    drafter = make_drafter("model", target, draft_spec=str(draft_dir))
    ids = models.encode_text(target.tokenizer, "Volcanoes erupt when magma")
    config = GenerationConfig(max_new_tokens=24, k=3)
    spec = collect(speculative_generate(target, drafter, ids, config), target.tokenizer, ids)
    base = collect(standard_generate(target, ids, config), target.tokenizer, ids)
    assert spec.token_ids == base.token_ids and len(base.token_ids) == 24


def test_a_model_that_cannot_fit_is_refused_before_loading(tiny_model_dir, monkeypatch):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_dir)
    need = presets.estimate_bytes(config, torch.float32)
    assert presets.check_fits(config, torch.float32, torch.device("cpu"), "tiny", free=need * 2) == need
    with pytest.raises(presets.MemoryTooSmallError, match="GiB free: pick a smaller model"):
        presets.check_fits(config, torch.float32, torch.device("cpu"), "tiny", free=need)
    monkeypatch.setattr(presets, "available_bytes", lambda device: need // 2)
    models.clear_model_cache()
    with pytest.raises(models.ModelLoadError, match="needs about"):
        models.load_model(str(tiny_model_dir))
    models.clear_model_cache()


def test_the_presets_pair_models_of_one_family():
    assert len({p.key for p in presets.PRESETS}) == len(presets.PRESETS)
    for p in presets.PRESETS:
        assert p.target.split("/")[0] == p.draft.split("/")[0]  # one publisher, one tokenizer family
    assert presets.preset("qwen2.5-7b").draft == "Qwen/Qwen2.5-0.5B-Instruct"
    with pytest.raises(KeyError, match="known"):
        presets.preset("nope")


@pytest.mark.parametrize("sizes, billions", [
    # SmolLM2-1.7B-Instruct and Qwen2.5-7B-Instruct as their published configs give them; 1.71 B and 7.61 B params
    (dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32,
          intermediate_size=8192, vocab_size=49152, tie_word_embeddings=True), 1.71),
    (dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
          intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False), 7.61),
])
def test_the_estimate_of_real_pairs_matches_their_published_size(sizes, billions):
    from transformers import LlamaConfig

    assert presets.parameter_count(LlamaConfig(**sizes)) / 1e9 == pytest.approx(billions, rel=0.01)


def test_picking_a_preset_fills_the_models_in_the_live_tab_and_the_arena():
    from app import arena, live

    target, drafter, draft = live.preset_chosen("qwen2.5-7b")
    assert (target, drafter, draft["value"]) == ("Qwen/Qwen2.5-7B-Instruct", "model", "Qwen/Qwen2.5-0.5B-Instruct")
    target, draft, ticked = arena.preset_chosen("smollm2-1.7b", ["ngram"])
    assert (target, draft, ticked) == ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct",
                                       ["ngram", "model"])
    assert arena.preset_chosen("smollm2-1.7b", ["model"])[2] == ["model"]
