"""The eager CPU fast path (specviz.speed): same greedy outputs and near-identical logits, an honest report.

No timings here: speed is measured by ``python -m specviz bench --kernel`` (see docs/performance.md).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import specviz.speed as speed
from specviz.drafters import EarlyExitDrafter, ModelDrafter, NgramDrafter
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.kv import forward_logits, new_cache

from float_tolerance import assert_within, matmul_tolerance, model_tolerance

# kernels: every test here compares oneDNN's linear with the default kernels, or checks which of them runs, so
# `make test` repeats the module with an AVX2 dispatch (where the self-test must pass and the bounds hold too)
pytestmark = [pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN"),
              pytest.mark.kernels]


def _fresh_model(folder, dtype=torch.float32):
    """The tiny target loaded straight from transformers: not prepared, not shared with other tests."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    model.requires_grad_(False)
    return model


def _prompt(target):
    return target.tokenizer.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)


def _ids(target, prompt, cfg, drafter=None):
    gen = standard_generate(target, prompt, cfg) if drafter is None else speculative_generate(target, drafter, prompt, cfg)
    return collect(gen, target.tokenizer, prompt).token_ids


def test_load_model_applies_and_reports_the_fast_path(tiny_target):
    report = tiny_target.speed
    assert report is not None and report is speed.report_of(tiny_target.model)
    assert report.applied == ("onednn-linear", "fused-projections", "packed-weights", "sdpa-gqa") and report.active
    assert report.linears == 4 * 7 + 1  # 7 linears per layer + the LM head (tied to the embedding, counted once)
    assert report.fused_groups == 4 * 2  # q/k/v and gate/up per layer
    assert "onednn-linear (29 linears)" in report.summary()
    assert speed.prepare_for_decoding(tiny_target.model) is report  # idempotent


def test_logits_match_the_unprepared_model(tiny_target, tiny_model_dir):
    plain = _fresh_model(tiny_model_dir)
    prompt = _prompt(tiny_target)
    for n in (1, 2, 5, 9):
        cache_fast, cache_plain = new_cache(tiny_target.model), new_cache(plain)
        fast = [forward_logits(tiny_target.model, prompt, cache_fast, 1)]
        ref = [forward_logits(plain, prompt, cache_plain, 1)]
        fast.append(forward_logits(tiny_target.model, prompt[:n], cache_fast, n))
        ref.append(forward_logits(plain, prompt[:n], cache_plain, n))
        for a, b in zip(fast, ref):  # two kernels: the float32 rounding bound, not a fixed atol
            assert_within(a, b, model_tolerance(b, plain.config.hidden_size), f"fast vs default, {n} rows")
            assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_greedy_outputs_unchanged(tiny_target, tiny_draft, tiny_model_dir):
    plain_target = dataclasses.replace(tiny_target, model=_fresh_model(tiny_model_dir), speed=None)
    prompt = _prompt(tiny_target)
    cfg = GenerationConfig(max_new_tokens=40, k=4)
    reference = _ids(plain_target, prompt, cfg)
    assert _ids(tiny_target, prompt, cfg) == reference
    drafters = {
        "ngram": lambda t: NgramDrafter(),
        "model": lambda t: ModelDrafter(tiny_draft.model, "tiny draft"),
        "early-exit": lambda t: EarlyExitDrafter(t.model, 2),
    }
    for name, make in drafters.items():
        assert _ids(tiny_target, prompt, cfg, make(tiny_target)) == reference, name
        with speed.plain_path(tiny_target.model):  # the default kernels on the prepared model: same ids too
            assert _ids(tiny_target, prompt, cfg, make(tiny_target)) == reference, name


def test_plain_path_restores_the_default_kernels(tiny_target, tiny_model_dir):
    plain = _fresh_model(tiny_model_dir)
    prompt = _prompt(tiny_target)
    with speed.plain_path(tiny_target.model):
        inside = forward_logits(tiny_target.model, prompt, new_cache(tiny_target.model), 3)
    expected = forward_logits(plain, prompt, new_cache(plain), 3)
    torch.testing.assert_close(inside, expected, rtol=1e-6, atol=1e-6 * float(expected.abs().max()))
    assert all(m._specviz_fast for m in tiny_target.model.modules() if isinstance(m, speed._FastLinear))


def test_fused_projection_alone_and_state_dict(tiny_model_dir):
    model = _fresh_model(tiny_model_dir)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    report = speed.prepare_for_decoding(model)
    assert report.fused_groups == 8
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    attention = model.model.layers[0].self_attn
    x = torch.randn(1, 3, attention.k_proj.in_features)
    with torch.inference_mode():  # k_proj called without q_proj first, then with another input: computed alone
        # oneDNN vs F.linear sum each output's 64 products in different orders: bound each element by them
        weight = attention.k_proj.weight
        assert_within(attention.k_proj(x), F.linear(x, weight), matmul_tolerance(x, weight), "k_proj alone")
        attention.q_proj(x)
        y, weight = torch.randn_like(x), attention.v_proj.weight
        assert_within(attention.v_proj(y), F.linear(y, weight), matmul_tolerance(y, weight), "v_proj, other input")


def test_disabled_and_unsupported_models_keep_the_default_kernels(tiny_model_dir, monkeypatch):
    off = speed.prepare_for_decoding(_fresh_model(tiny_model_dir), enabled=False)
    assert not off.active and "disabled" in off.skipped[0]
    monkeypatch.setenv(speed.ENV_FAST, "0")
    assert not speed.prepare_for_decoding(_fresh_model(tiny_model_dir)).active
    monkeypatch.delenv(speed.ENV_FAST)
    bf16 = _fresh_model(tiny_model_dir, torch.bfloat16)
    report = speed.prepare_for_decoding(bf16)
    assert not report.active and "bfloat16" in report.skipped[0]
    assert not any(isinstance(m, speed._FastLinear) for m in bf16.modules())


def test_a_failing_self_test_undoes_everything(tiny_model_dir, monkeypatch):
    model = _fresh_model(tiny_model_dir)
    prompt = list(range(3, 20))
    expected = forward_logits(model, prompt, new_cache(model), 2)
    real = speed._onednn_linear
    calls = {"n": 0}

    def wrong(x, weight, bias):  # right on the small availability check, wrong inside the model
        calls["n"] += 1
        return real(x, weight, bias) * (1.0 if calls["n"] == 1 else 1.5)

    monkeypatch.setattr(speed, "_onednn_linear", wrong)
    report = speed.prepare_for_decoding(model)
    assert not report.active and "self-test" in report.skipped[0]
    assert not any(isinstance(m, speed._FastLinear) for m in model.modules())
    assert torch.equal(forward_logits(model, prompt, new_cache(model), 2), expected)
