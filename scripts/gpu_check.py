"""The GPU check (issue 15): what a decode step, a verification and greedy exactness look like on a CUDA device.

    python scripts/gpu_check.py --out DIR                 # on a machine with CUDA (about 1-2 min on one H200)
    python scripts/gpu_check.py --device cpu --quick      # tiny stand-in configs on the CPU (seconds; tests, CI)

Needs only torch with CUDA, transformers >= 5.17 and safetensors (transformers imports it), plus this repository's
``specviz`` package: no gradio, no plotly, no network, no model weights. The models are *random-weight* Llama models
built here from the published configs' sizes (SmolLM2-135M-Instruct, the embedded default, and SmolLM2-1.7B), so
timings are real and token ids mean nothing. For each model, in float32 (TF32 off) and bfloat16, it measures:

1. floor: weight bytes / device copy bandwidth (a large device-to-device copy, bytes read + written), the least a
   one-token step can take when it must read every weight once;
2. step: the one-token step at 64 and 1,024 cached tokens, eager (the engine's ``forward_logits`` over its
   ``SlabCache``) and as CUDA graphs: the SlabCache step replayed at one position (its lengths are Python ints, so a
   captured graph always writes the same slot: it times a step but cannot decode), and a self-advancing greedy decode
   step over transformers' ``StaticCache`` (device-side length, position and mask computed inside the graph), whose
   tokens are checked against the engine's standard decoding;
3. verify: T(k+1)/T(1) for k = 1..8 at 64 and 1,024 cached tokens, eager and graph (SlabCache, one position);
4. exactness: ``speculative_generate`` with same-model drafters (an early-exit view of the first half of the layers,
   and n-gram lookup on a repeated prompt) against ``standard_generate``. float32: the ids should be identical.
   bfloat16: a (k+1)-token verification and a one-token step run different kernels, so the report gives the first
   divergence and the baseline's top-2 logit gap there instead of claiming identity;
5. the engine's own graph path (issue 36; scripts/gpu_engine_check.py): standard decoding through the engine on its
   CUDA-graph path beside the bare StaticCache graph step (target <= 1.25x), the engine runner's T(k+1)/T(1), and
   greedy ids on that path (vs the eager path; speculative vs standard with bfloat16's exact mode on and off).
The weights are drawn wider than the published initializer (see INIT_STD) so the models do not repeat one token.

Timings: the device is synchronised before a clock is read (CUDA events on the GPU), warm-up calls are excluded, and
each figure is the median of several repeats of a few calls. One report, written after every section (a run cut
short keeps what it measured): ``--out`` (a folder, or a ``.json`` path) gets ``gpu_check.json`` and
``gpu_check.md``; default ``$OUT/gpu_check.json`` when ``$OUT`` is set, else ``./gpu_check_report/``. The Markdown
tables are also printed. Exit status: 0 when every section ran and float32 was exact, 1 otherwise, 2 when the
environment lacks something (one sentence on stderr).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from specviz.analysis.exactness import first_divergence  # noqa: E402,F401  (no torch: kept as this script's name)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the models are built from the configs below
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MIN_TRANSFORMERS = (5, 17)

# The published configs' sizes (config.json of HuggingFaceTB/SmolLM2-135M-Instruct, the embedded default model, and
# of HuggingFaceTB/SmolLM2-1.7B); the weights are random. Both are LlamaForCausalLM with tied embeddings.
MODELS: dict[str, dict] = {
    "smollm2-135m": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0,
                         max_position_embeddings=8192, rms_norm_eps=1e-5),
    "smollm2-1.7b": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32,
                         intermediate_size=8192, vocab_size=49152, tie_word_embeddings=True, rope_theta=130000.0,
                         max_position_embeddings=8192, rms_norm_eps=1e-5),
}
# Random weights drawn with the published sizes but not the published initializer_range (0.02): models drawn with it
# repeat one token forever (near-uniform attention averages the context away), so every draft is accepted and greedy
# exactness tests nothing. INIT_STD (10x) gives varied text; the layers an early-exit drafter skips (the second half)
# get their output projections scaled by SKIPPED_LAYER_SCALE, so the drafter agrees with the target only part of the
# time (accepted, rejected, recovered and bonus tokens all occur). Values do not change a step's time.
INIT_STD = 0.2
SKIPPED_LAYER_SCALE = 0.3

# --quick: tiny stand-ins under the same names (same structure, a few layers; CPU seconds). Not the published sizes.
QUICK_MODELS: dict[str, dict] = {
    "smollm2-135m": dict(MODELS["smollm2-135m"], hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=128, vocab_size=512),
    "smollm2-1.7b": dict(MODELS["smollm2-1.7b"], hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=4, intermediate_size=256, vocab_size=512),
}


@dataclass(frozen=True)
class Settings:
    """How much to measure. ``repeats`` samples of ``iters`` calls each after ``warmup`` calls; median of samples."""

    contexts: tuple[int, ...] = (64, 1024)
    ks: tuple[int, ...] = tuple(range(1, 9))
    warmup: int = 2
    repeats: int = 5
    iters: int = 8
    copy_bytes: int = 2 << 30  # 2 GiB: far beyond any cache level
    new_tokens: int = 64  # exactness runs
    draft_k: int = 4
    graph_tokens: int = 32  # tokens the StaticCache graph decodes for its check against the engine
    seed: int = 0


FULL = Settings()
QUICK = Settings(warmup=1, repeats=3, iters=3, copy_bytes=64 << 20, new_tokens=24, graph_tokens=12)

DEFINITIONS = {
    "copy_gb_per_s": "bytes read + bytes written by one device-to-device tensor copy, / its median time",
    "floor_ms": "weight bytes (every parameter once, the tied embedding / LM head once) / copy bandwidth: the least a "
                "one-token step can take if it reads every weight once (KV-cache reads not included; see kv_bytes)",
    "step eager_ms": "one forward of 1 new token after `context` cached tokens through specviz.core.kv.forward_logits "
                     "over a SlabCache (the engine's path: ids to the device, logits to float32), then a rollback",
    "step graph_ms": "the same forward captured as a CUDA graph over the SlabCache and replayed at one position",
    "step static_graph_ms": "a CUDA graph of a greedy decode step over transformers' StaticCache (positions, mask and "
                            "next id computed on the device), replayed from `context` on; its attention covers the "
                            "cache's whole preallocated length (max_cache_len) under a mask",
    "x_floor": "step time / floor_ms (1.0 = at the memory floor)",
    "verify ratio": "T(k+1)/T(1): one forward of k+1 new tokens over one forward of 1, same context and variant",
    "exactness": "greedy ids of speculative_generate vs standard_generate on the eager engine path (the graph path: "
                 "'engine ids'), same target and prompt; first_divergence "
                 "is the output index of the first differing token, gap the baseline's top-2 logit gap there",
    "acceptance": "accepted / drafted over the speculative run's passes (bonus excluded, committed work only)",
    "tokens_per_pass": "tokens emitted after the prefill / target passes (bonus included)",
}


class EnvironmentError_(Exception):
    """Something the check needs is missing; the message is one sentence."""


# ------------------------------------------------------------------------------------------------ environment


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3])


def check_environment(device_name: str) -> dict:
    """Import what the check needs and describe the machine; raise EnvironmentError_ (one sentence) when something
    needed is missing."""
    if sys.version_info < (3, 10):
        raise EnvironmentError_(f"Python >= 3.10 is needed, this is {platform.python_version()}.")
    try:
        import torch
    except ImportError:
        raise EnvironmentError_("torch is not installed: install torch (with CUDA for a GPU run).") from None
    try:
        import transformers
    except ImportError as exc:
        raise EnvironmentError_(f"transformers >= 5.17 is needed but could not be imported ({exc}).") from None
    if _version_tuple(transformers.__version__) < MIN_TRANSFORMERS:
        raise EnvironmentError_(f"transformers >= 5.17 is needed, this is {transformers.__version__}.")
    try:
        import safetensors  # noqa: F401  (transformers needs it; named here so a missing one says so)
    except ImportError:
        raise EnvironmentError_("safetensors is not installed (transformers needs it): pip install safetensors.") \
            from None
    try:
        from transformers.cache_utils import Cache, CacheLayerMixin, StaticCache  # noqa: F401
    except ImportError as exc:
        raise EnvironmentError_(f"transformers {transformers.__version__} lacks the cache classes the engine "
                                f"needs ({exc}).") from None
    try:
        import specviz.core.engine  # noqa: F401
        import specviz.core.graphs  # noqa: F401
        import specviz.drafters.early_exit  # noqa: F401
        import specviz.drafters.ngram  # noqa: F401
    except ImportError as exc:
        raise EnvironmentError_(f"the specviz package could not be imported from {ROOT} ({exc}).") from None
    env = {
        "python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
        "transformers": transformers.__version__, "cuda_available": torch.cuda.is_available(),
        "cuda_runtime": torch.version.cuda, "device": device_name, "device_name": platform.processor() or "cpu",
    }
    if device_name == "cuda":
        if not torch.cuda.is_available():
            raise EnvironmentError_(f"this check needs a CUDA GPU, but torch {torch.__version__} sees none "
                                    f"(torch.cuda.is_available() is False); try --device cpu --quick.")
        props = torch.cuda.get_device_properties(0)
        env.update(device_name=torch.cuda.get_device_name(0), capability=".".join(map(str, torch.cuda
                   .get_device_capability(0))), memory_gib=round(props.total_memory / 2**30, 1),
                   bf16_supported=torch.cuda.is_bf16_supported())
        if not env["bf16_supported"]:
            raise EnvironmentError_(f"{env['device_name']} does not support bfloat16, which this check measures.")
    else:
        env["threads"] = torch.get_num_threads()
    return env


def precision_settings() -> dict:
    """TF32 off (float32 matmuls and convolutions in full precision) for the whole run; returns what is in force."""
    import torch

    torch.set_float32_matmul_precision("highest")
    try:
        torch.backends.cudnn.allow_tf32 = False
    except (AttributeError, RuntimeError):
        pass
    state = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    readings = {"cuda_matmul_allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
                "cudnn_allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
                "cuda_matmul_fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,  # torch >= 2.9
                "bf16_reduced_precision_reduction":
                    lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction}
    for key, read in readings.items():
        try:
            state[key] = read()
        except (AttributeError, RuntimeError):
            pass
    return state


# ------------------------------------------------------------------------------------------------ timing


class Timer:
    """Milliseconds per call: CUDA events on the GPU (the device synchronised first), perf_counter on the CPU."""

    def __init__(self, device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"

    def per_call_ms(self, fn, iters: int) -> float:
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) * 1000.0 / iters

    def measure(self, fn, settings: Settings, *, reset=None, iters: int | None = None) -> dict:
        """Median (and spread) of ``settings.repeats`` samples of ``iters`` calls after ``settings.warmup`` calls.
        ``reset`` runs (untimed) before the warm-up and before every sample."""
        iters = iters or settings.iters
        if reset:
            reset()
        for _ in range(settings.warmup):
            fn()
        samples = []
        for _ in range(settings.repeats):
            if reset:
                reset()
            samples.append(self.per_call_ms(fn, iters))
        return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


# ------------------------------------------------------------------------------------------------ models


class IdsTokenizer:
    """What the engine needs of a tokenizer for random-weight models: a stable decode (ids as text)."""

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return " ".join(str(int(i)) for i in ids)


@dataclass
class RandomTarget:
    """A :class:`specviz.core.engine.Target` over a random-weight model (no EOS: runs end at max_new_tokens)."""

    model: object
    tokenizer: object
    device: object
    eos_token_ids: tuple[int, ...]
    vocab_size: int
    path: str = "auto"  # the engine's forward path (specviz.core.graphs.requested_path)


def build_model(sizes: dict, dtype, device, seed: int):
    """A random-weight LlamaForCausalLM of ``sizes`` in ``dtype`` on ``device`` (initialised there, eval mode)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    sizes = dict(sizes)
    theta = sizes.pop("rope_theta")
    config = LlamaConfig(**sizes, rope_parameters={"rope_type": "default", "rope_theta": theta},
                         initializer_range=INIT_STD, attn_implementation="sdpa", bos_token_id=None,
                         eos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if next(model.parameters()).device.type != device.type:
        model = model.to(device)
    model.eval().requires_grad_(False)
    with torch.no_grad():
        for layer in model.model.layers[exit_layer(model):]:
            layer.self_attn.o_proj.weight.mul_(SKIPPED_LAYER_SCALE)
            layer.mlp.down_proj.weight.mul_(SKIPPED_LAYER_SCALE)
    return model


def exit_layer(model) -> int:
    """The early-exit drafter's depth: the first half of the layers."""
    return max(1, model.config.num_hidden_layers // 2)


def weight_bytes(model) -> int:
    """Bytes of every parameter, each once (``parameters()`` lists the tied LM head / embedding once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_bytes(model, context: int) -> int:
    """Bytes of keys and values a step reads after ``context`` cached tokens (all layers)."""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * context * itemsize


def random_ids(n: int, vocab: int, seed: int) -> list[int]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n,), generator=g).tolist()


def prefilled_cache(model, prompt: list[int], room: int):
    """A SlabCache for ``model`` holding ``prompt`` (read in the engine's chunks), with ``room`` free positions
    preallocated so it never grows (a grown slab would move under a captured graph)."""
    from specviz.core.kv import forward_chunked, new_cache

    cache = new_cache(model, capacity=len(prompt) + room)
    forward_chunked(model, prompt, cache, 1)
    return cache


# ------------------------------------------------------------------------------------------------ measurements


def copy_bandwidth(device, settings: Settings, timer: Timer) -> dict:
    import torch

    n = settings.copy_bytes // 4
    src = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    m = timer.measure(lambda: dst.copy_(src), settings, iters=5)
    gbps = 2 * settings.copy_bytes / (m["median_ms"] / 1000.0) / 1e9
    del src, dst
    return {"copy_bytes": settings.copy_bytes, "copy_ms": m["median_ms"], "gb_per_s": gbps}


def eager_forward_ms(model, cache, context: int, n: int, settings: Settings, timer: Timer) -> dict:
    """The engine's forward of n new tokens after ``context`` cached ones (forward_logits), rolled back each call."""
    from specviz.core.kv import forward_logits, rollback_cache

    ids = random_ids(n, model.config.vocab_size, seed=context + n)

    def call():
        forward_logits(model, ids, cache, n)
        rollback_cache(cache, context)

    return timer.measure(call, settings)


class SlabGraph:
    """A CUDA graph of one forward of n tokens over a SlabCache at a fixed position (``context``). Replays write the
    same cache slots and attend over the same length: a timing of the step, not a decoder."""

    def __init__(self, model, cache, context: int, n: int) -> None:
        import torch

        from specviz.core.kv import _cache_argument, rollback_cache

        self.model, self.cache, self.context, self.n = model, cache, context, n
        self.kwargs = {_cache_argument(model): cache}
        self.ids = torch.tensor([random_ids(n, model.config.vocab_size, seed=7 * context + n)], device=model.device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up outside the capture (cuBLAS handles, workspaces, lazy inits)
            for _ in range(3):
                model(input_ids=self.ids, use_cache=True, logits_to_keep=n, **self.kwargs)
                rollback_cache(cache, context)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph):
                self.logits = model(input_ids=self.ids, use_cache=True, logits_to_keep=n, **self.kwargs).logits
        finally:
            rollback_cache(cache, context)  # capture ran the Python side once: lengths grew by n

    def replay(self) -> None:
        self.graph.replay()

    def check(self) -> dict:
        """Replay once and compare with the engine's eager forward at the same position."""
        import torch

        from specviz.core.kv import forward_logits, rollback_cache

        self.replay()
        torch.cuda.synchronize()
        graph_logits = self.logits[0, -self.n:].float().clone()
        eager = forward_logits(self.model, self.ids[0].tolist(), self.cache, self.n)
        rollback_cache(self.cache, self.context)
        return {"max_abs_diff": float((graph_logits - eager).abs().max()),
                "argmax_equal": bool(torch.equal(graph_logits.argmax(-1), eager.argmax(-1)))}


class StaticDecodeStep:
    """A greedy decode step over transformers' StaticCache whose position, attention mask and next id live on the
    device: ``step()`` reads the cache's length (a device tensor), feeds ``ids``, and writes the argmax back into
    ``ids``. Captured as a CUDA graph, every replay decodes one more token with no host work."""

    def __init__(self, model, prompt: list[int], max_cache_len: int) -> None:
        import torch
        from transformers.cache_utils import StaticCache

        from specviz.core.kv import PREFILL_CHUNK, _cache_argument

        self.model = model
        self.cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
        self.kwargs = {_cache_argument(model): self.cache}
        self.kv_range = torch.arange(max_cache_len, device=model.device)
        for start in range(0, len(prompt), PREFILL_CHUNK):  # the engine's prefill chunks (same numerics)
            piece = torch.tensor([prompt[start:start + PREFILL_CHUNK]], device=model.device)
            logits = model(input_ids=piece, use_cache=True, logits_to_keep=1, **self.kwargs).logits
        self.ids = logits[:, -1:].argmax(-1)  # (1, 1): the first new token, fed by the first step
        self.context = len(prompt)
        self.graph = None

    def step(self):
        """One greedy token (eager, or recorded into a graph)."""
        position = self.cache.layers[0].cumulative_length.reshape(1, 1).clone()  # before any layer appends
        mask = (self.kv_range <= position).reshape(1, 1, 1, -1)  # keys 0..position (the rest is unwritten)
        logits = self.model(input_ids=self.ids, position_ids=position, attention_mask=mask, use_cache=True,
                            logits_to_keep=1, **self.kwargs).logits
        self.ids.copy_(logits[:, -1:].argmax(-1))
        return logits

    def set_length(self, length: int) -> None:
        for layer in self.cache.layers:
            layer.cumulative_length.fill_(length)

    def capture(self) -> None:
        import torch

        start, first = self.context, self.ids.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()
        self.set_length(start)  # the warm-up decoded 3 tokens: start again after the prompt
        self.ids.copy_(first)

    def run(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.step()

    def decode(self, count: int) -> list[int]:
        """The first new token and ``count`` more, decoded by ``run`` from the prompt on."""
        import torch

        self.set_length(self.context)
        tokens = [int(self.ids)]
        first = self.ids.clone()
        for _ in range(count):
            self.run()
            tokens.append(int(self.ids))
        if self.device_is_cuda:
            torch.cuda.synchronize()
        self.set_length(self.context)
        self.ids.copy_(first)
        return tokens

    @property
    def device_is_cuda(self) -> bool:
        return self.kv_range.device.type == "cuda"


def compare_to_baseline(baseline, ids: list[int], dtype: str = "float32") -> dict:
    """Exactness record of ``ids`` against a collected standard run (whose event i emitted output token i), from
    :func:`specviz.analysis.exactness.compare_ids` (the one source the CLI and the bench use too)."""
    from specviz.analysis.exactness import compare_ids

    base_ids = list(baseline.token_ids)
    exact = compare_ids(base_ids, [e.near_tie_gap for e in baseline.events], ids, dtype)
    gaps = [e.near_tie_gap for e in baseline.events if e.near_tie_gap is not None]
    return {"tokens": len(base_ids), "identical": exact["ids_identical_to_standard"],
            "first_divergence": exact["first_divergence"], "gap_at_divergence": exact["top2_gap"],
            "matching_prefix": exact["matching_prefix"], "min_baseline_gap": min(gaps) if gaps else None,
            "reason": exact["reason"]}


def exactness(model, device, settings: Settings) -> dict:
    """speculative_generate with same-model drafters vs standard_generate (greedy), on a repeated random prompt."""
    from specviz.core.counters import Counters
    from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
    from specviz.drafters.early_exit import EarlyExitDrafter
    from specviz.drafters.ngram import NgramDrafter

    vocab = model.config.vocab_size
    prompt = random_ids(16, vocab, seed=settings.seed + 1) * 4  # 64 tokens: a 16-token pattern, four times
    target = RandomTarget(model, IdsTokenizer(), device, (), vocab, path="eager")  # the eager engine path
    config = GenerationConfig(max_new_tokens=settings.new_tokens, k=settings.draft_k)
    baseline = collect(standard_generate(target, prompt, config), target.tokenizer, prompt)
    drafters = {"early-exit": EarlyExitDrafter(model, exit_layer(model)), "n-gram": NgramDrafter()}
    out = {}
    for name, drafter in drafters.items():
        run = collect(speculative_generate(target, drafter, prompt, config), target.tokenizer, prompt)
        counts = Counters.of(run.events)  # the figures as the app computes them (specviz.core.counters)
        record = compare_to_baseline(baseline, list(run.token_ids), str(model.dtype).removeprefix("torch."))
        record.update(drafter=getattr(drafter, "name", name), k=settings.draft_k, passes=counts.passes,
                      acceptance=counts.acceptance_rate, tokens_per_pass=counts.tokens_per_pass)
        out[name] = record
    return out


# ------------------------------------------------------------------------------------------------ the run


class Check:
    """Runs the sections, keeps the report, writes it after every section."""

    def __init__(self, args, settings: Settings, env: dict, out_json: Path) -> None:
        import torch

        self.args, self.settings, self.out_json = args, settings, out_json
        self.device = torch.device(args.device)
        self.timer = Timer(self.device)
        self.t0 = time.perf_counter()
        self.report = {
            "report": "specviz GPU check (issue 15)", "schema": 1, "quick": args.quick, "complete": False,
            "environment": env, "precision": precision_settings(),
            "settings": {**settings.__dict__, "budget_s": args.budget_s},
            "definitions": {**DEFINITIONS, **engine_check().DEFINITIONS},
            "weights": (f"random, seeded, normal std {INIT_STD}; the second half of the layers' output projections "
                        f"scaled by {SKIPPED_LAYER_SCALE}; sizes: "
                        + ("tiny stand-ins (--quick), not the published sizes" if args.quick
                           else "the published configs'")),
            "bandwidth": None, "models": {}, "errors": [], "skipped": [], "wall_s": None,
        }

    # -- bookkeeping
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def over_budget(self) -> bool:
        return bool(self.args.budget_s) and self.elapsed() > self.args.budget_s

    @contextmanager
    def section(self, where: str):
        """Run a section; an exception is recorded (and the run goes on), the report is written afterwards."""
        started = time.perf_counter()
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - a section that fails must not lose the others
            tail = traceback.format_exc().strip().splitlines()[-4:]
            self.report["errors"].append({"where": where, "error": f"{type(exc).__name__}: {exc}"[:600],
                                          "traceback_tail": tail})
            print(f"[gpu_check] {where}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        finally:
            if self.args.verbose:
                print(f"[gpu_check] {where}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
            self.write()

    def skip(self, where: str) -> bool:
        if self.over_budget():
            self.report["skipped"].append(f"{where} (time budget of {self.args.budget_s} s spent)")
            return True
        return False

    def write(self) -> None:
        self.report["wall_s"] = round(self.elapsed(), 1)
        self.report["markdown"] = markdown(self.report)
        self.out_json.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out_json.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.report, indent=1, default=str))
        tmp.replace(self.out_json)
        self.out_json.with_suffix(".md").write_text(self.report["markdown"])

    # -- sections
    def run(self) -> dict:
        import torch

        with self.section("bandwidth"):
            self.report["bandwidth"] = copy_bandwidth(self.device, self.settings, self.timer)
        sizes = QUICK_MODELS if self.args.quick else MODELS
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
        for name in self.args.models:
            entry = self.report["models"].setdefault(name, {"config": sizes[name], "dtypes": {}})
            for dtype_name in self.args.dtypes:
                where = f"{name}/{dtype_name}"
                if self.skip(where):
                    continue
                result = entry["dtypes"].setdefault(dtype_name, {})
                model = None
                with self.section(f"{where}/build"):
                    model = build_model(sizes[name], dtypes[dtype_name], self.device, self.settings.seed)
                    entry["params"] = sum(p.numel() for p in model.parameters())
                    result["weight_bytes"] = weight_bytes(model)
                    bandwidth = (self.report["bandwidth"] or {}).get("gb_per_s")
                    result["floor_ms"] = result["weight_bytes"] / (bandwidth * 1e9) * 1000 if bandwidth else None
                if model is not None:
                    with torch.inference_mode():
                        self.run_model(where, model, result)
                del model
                gc.collect()
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
        self.report["complete"] = not self.report["skipped"]
        self.write()
        return self.report

    def run_model(self, where: str, model, result: dict) -> None:
        s, cuda = self.settings, self.device.type == "cuda"
        result.update(step={}, verify={}, graph={"slab": {}, "static": {}}, exactness=None)
        for context in s.contexts:
            if self.skip(f"{where}/context {context}"):
                continue
            key = str(context)
            step = result["step"].setdefault(key, {"kv_bytes": kv_bytes(model, context)})
            verify = result["verify"].setdefault(key, {"eager": None, "graph": None})
            cache = None
            with self.section(f"{where}/{key}/prefill"):
                cache = prefilled_cache(model, random_ids(context, model.config.vocab_size, s.seed + context),
                                        room=max(s.ks) + 8)
            if cache is None:
                continue
            with self.section(f"{where}/{key}/eager"):  # T(1) is the eager one-token step
                times = {n: eager_forward_ms(model, cache, context, n, s, self.timer)["median_ms"]
                         for n in (1, *(k + 1 for k in s.ks))}
                step["eager_ms"] = times[1]
                verify["eager"] = curve(times, s.ks)
            if cuda:
                with self.section(f"{where}/{key}/graph (SlabCache)"):
                    self.slab_graphs(model, cache, context, step, verify, result)
            else:
                result["graph"]["slab"][key] = {"skipped": "CUDA graphs need a CUDA device"}
            del cache
            if self.skip(f"{where}/{key}/graph (StaticCache)"):
                continue
            with self.section(f"{where}/{key}/graph (StaticCache)"):
                self.static_graph(model, context, step, result)
            floor = result.get("floor_ms")
            for variant in ("eager_ms", "graph_ms", "static_graph_ms"):
                if floor and step.get(variant):
                    step[variant.replace("_ms", "_x_floor")] = step[variant] / floor
        engine_check().run_section(sys.modules[__name__], self, where, model, result)
        if not self.skip(f"{where}/exactness"):
            with self.section(f"{where}/exactness"):
                result["exactness"] = exactness(model, self.device, s)

    def slab_graphs(self, model, cache, context: int, step: dict, verify: dict, result: dict) -> None:
        """Graphs of 1..k+1-token forwards over the engine's SlabCache at one position. A first capture that fails
        is a finding (recorded under graph.slab, the StaticCache graph then stands alone), not an error."""
        import torch

        record = result["graph"]["slab"].setdefault(str(context), {"captured": False})
        try:
            graph = SlabGraph(model, cache, context, 1)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be captured is what this records
            record["error"] = f"{type(exc).__name__}: {exc}"[:600]
            record["note"] = "the SlabCache step could not be captured; the StaticCache graph is the graph variant"
            torch.cuda.synchronize()
            return
        record.update(captured=True, check_vs_eager=graph.check(),
                      note="SlabCache lengths are Python ints: the graph replays one position (times a step and a "
                           "verification; it cannot decode)")
        times = {1: self.timer.measure(graph.replay, self.settings)["median_ms"]}
        step["graph_ms"] = times[1]
        del graph
        for k in self.settings.ks:
            graph = SlabGraph(model, cache, context, k + 1)
            times[k + 1] = self.timer.measure(graph.replay, self.settings)["median_ms"]
            del graph
        torch.cuda.empty_cache()
        verify["graph"] = curve(times, self.settings.ks)

    def static_graph(self, model, context: int, step: dict, result: dict) -> None:
        from specviz.core.engine import GenerationConfig, collect, standard_generate

        s, cuda = self.settings, self.device.type == "cuda"
        prompt = random_ids(context, model.config.vocab_size, s.seed + context)
        timed = s.warmup + s.iters + 8  # positions a timing sample may advance past the prompt
        max_len = context + max(timed, s.graph_tokens + 1)
        decoder = StaticDecodeStep(model, prompt, max_len)
        record = {"max_cache_len": max_len, "captured": False}
        if cuda:
            decoder.capture()
            record["captured"] = True
        else:
            record["note"] = "no CUDA: the graph's step body was run eagerly (its logic checked, no timing)"
        tokens = decoder.decode(s.graph_tokens)
        target = RandomTarget(model, IdsTokenizer(), self.device, (), model.config.vocab_size,
                              path="eager")  # vs the eager engine path
        baseline = collect(standard_generate(target, prompt, GenerationConfig(max_new_tokens=s.graph_tokens + 1)),
                           target.tokenizer, prompt)
        record["check_vs_engine"] = compare_to_baseline(baseline, tokens)
        if cuda:
            step["static_graph_ms"] = self.timer.measure(decoder.run, s, reset=lambda: decoder.set_length(context))[
                "median_ms"]
        result["graph"]["static"][str(context)] = record
        del decoder


def engine_check():
    """scripts/gpu_engine_check.py (this folder): the engine graph path's section."""
    if str(Path(__file__).resolve().parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gpu_engine_check

    return gpu_engine_check


def curve(times: dict[int, float], ks) -> dict:
    """T(1) and T(k+1)/T(1) per k from {n tokens: ms}."""
    t1 = times[1]
    return {"t1_ms": t1, "tn_ms": {str(k): times[k + 1] for k in ks},
            "ratio": {str(k): times[k + 1] / t1 for k in ks}}


# ------------------------------------------------------------------------------------------------ the report


def _f(value, fmt: str = "{:.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def markdown(report: dict) -> str:
    """The report's short Markdown tables (printed, written next to the JSON, and kept in it)."""
    env = report["environment"]
    bw = report.get("bandwidth") or {}
    quick = " (QUICK: tiny stand-in configs, not the published sizes)" if report["quick"] else ""
    lines = [f"# specviz GPU check{quick}",
             "",
             f"{env.get('device_name')} ({env.get('device')}), torch {env.get('torch')}, transformers "
             f"{env.get('transformers')}; random weights; float32 matmul precision "
             f"{report['precision'].get('float32_matmul_precision')} (TF32 off). Copy bandwidth "
             f"{_f(bw.get('gb_per_s'), '{:.0f}')} GB/s ({_f((bw.get('copy_bytes') or 0) / 2**20, '{:.0f}')} MiB "
             f"copy, read + write); floor = weight bytes / copy bandwidth. Medians of {report['settings']['repeats']} "
             f"samples; wall {report.get('wall_s')} s.", "",
             "## One-token step (ms; x floor in brackets)", "",
             "| model | dtype | weights MB | floor | context | eager | graph, SlabCache (one position) | "
             "graph, StaticCache (decoding) |",
             "|---|---|---|---|---|---|---|---|"]
    verify_rows, exact_rows = [], []
    for name, entry in report["models"].items():
        for dtype, r in entry["dtypes"].items():
            for ctx, st in (r.get("step") or {}).items():
                cells = []
                for v in ("eager", "graph", "static_graph"):
                    ms, x = st.get(f"{v}_ms"), st.get(f"{v}_x_floor")
                    cells.append("–" if ms is None else f"{ms:.3f} ({x:.1f}x)" if x else f"{ms:.3f}")
                lines.append(f"| {name} | {dtype} | {_f((r.get('weight_bytes') or 0) / 1e6, '{:.0f}')} | "
                             f"{_f(r.get('floor_ms'), '{:.3f}')} | {ctx} | " + " | ".join(cells) + " |")
            for ctx, v in (r.get("verify") or {}).items():
                for variant in ("eager", "graph"):
                    c = v.get(variant)
                    if c:
                        ratios = " | ".join(f"{c['ratio'][k]:.2f}" for k in c["ratio"])
                        verify_rows.append(f"| {name} | {dtype} | {ctx} | {variant} | {c['t1_ms']:.3f} | {ratios} |")
            for drafter, e in (r.get("exactness") or {}).items():
                same = "yes" if e["identical"] else "no"
                exact_rows.append(f"| {name} | {dtype} | {drafter} | {e['tokens']} | {same} | "
                                  f"{_f(e['first_divergence'], '{}')} | {_f(e['gap_at_divergence'], '{:.4f}')} | "
                                  f"{_f(e['min_baseline_gap'], '{:.4f}')} | {_f(e['acceptance'])} | "
                                  f"{_f(e['tokens_per_pass'])} |")
            for ctx, g in (r.get("graph", {}).get("static") or {}).items():
                c = g.get("check_vs_engine")
                if c:
                    exact_rows.append(f"| {name} | {dtype} | StaticCache graph vs engine (ctx {ctx}) | {c['tokens']} | "
                                      f"{'yes' if c['identical'] else 'no'} | {_f(c['first_divergence'], '{}')} | "
                                      f"{_f(c['gap_at_divergence'], '{:.4f}')} | {_f(c['min_baseline_gap'], '{:.4f}')}"
                                      f" | – | – |")
    ks = report["settings"]["ks"]
    lines += ["", "## Verification cost T(k+1)/T(1)", "",
              "| model | dtype | context | variant | T(1) ms | " + " | ".join(f"k={k}" for k in ks) + " |",
              "|---|---|---|---|---|" + "---|" * len(ks)] + verify_rows
    lines += ["", f"## Greedy exactness (speculative vs standard, k={report['settings']['draft_k']})", "",
              "| model | dtype | drafter | tokens | identical | first divergence | top-2 gap there | min top-2 gap "
              "| acceptance | tokens/pass |", "|---|---|---|---|---|---|---|---|---|---|"] + exact_rows
    lines += engine_check().markdown_rows(report)
    notes = [f"- {name}/{dtype}, context {ctx}: SlabCache graph not captured ({g['error']}); {g['note']}"
             for name, entry in report["models"].items() for dtype, r in entry["dtypes"].items()
             for ctx, g in ((r.get("graph") or {}).get("slab") or {}).items() if g.get("error")]
    if notes:
        lines += ["", "## Notes", ""] + notes
    if report["errors"] or report["skipped"]:
        lines += ["", "## Not measured", ""]
        lines += [f"- error in {e['where']}: {e['error']}" for e in report["errors"]]
        lines += [f"- skipped: {s}" for s in report["skipped"]]
    return "\n".join(lines) + "\n"


def float32_inexact(report: dict) -> list[str]:
    """Where float32 greedy speculative output differed from standard decoding."""
    return [f"{name}/{drafter}" for name, entry in report["models"].items()
            for drafter, e in ((entry["dtypes"].get("float32") or {}).get("exactness") or {}).items()
            if not e["identical"]]


def out_path(arg: str | None) -> Path:
    """--out as the JSON path: a .json path as given, else gpu_check.json inside that folder."""
    if arg is None:
        arg = os.path.join(os.environ["OUT"], "gpu_check.json") if os.environ.get("OUT") else "gpu_check_report"
    path = Path(arg)
    return path if path.suffix == ".json" else path / "gpu_check.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda (default) or cpu")
    p.add_argument("--quick", action="store_true", help="tiny stand-in configs and few repeats (CPU seconds)")
    p.add_argument("--out", help="report folder or .json path (default: $OUT/gpu_check.json, else "
                                 "./gpu_check_report/)")
    p.add_argument("--models", nargs="+", choices=tuple(MODELS), default=list(MODELS))
    p.add_argument("--dtypes", nargs="+", choices=("float32", "bfloat16"), default=["float32", "bfloat16"])
    p.add_argument("--budget-s", type=float, default=None,
                   help="soft time limit: sections not started by then are skipped (default 270 s; --quick: none)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: 1 with --device cpu --quick)")
    p.add_argument("--verbose", action="store_true", help="print each section's time")
    args = p.parse_args(argv)
    if args.budget_s is None:
        args.budget_s = 0 if args.quick else 270
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        env = check_environment(args.device)
    except EnvironmentError_ as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    import torch

    if args.device == "cpu" and (args.threads or args.quick):
        torch.set_num_threads(args.threads or 1)
        env["threads"] = torch.get_num_threads()
    out_json = out_path(args.out)
    check = Check(args, QUICK if args.quick else FULL, env, out_json)
    report = check.run()
    print(report["markdown"])
    print(f"report: {out_json} and {out_json.with_suffix('.md')}")
    inexact = float32_inexact(report) + engine_check().float32_inexact(report)
    if inexact:
        print(f"gpu_check: float32 speculative output differed from standard decoding in {', '.join(inexact)}.",
              file=sys.stderr)
    return 1 if report["errors"] or inexact else 0


if __name__ == "__main__":
    sys.exit(main())
