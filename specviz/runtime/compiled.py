"""The opt-in compiled forward: ``torch.compile`` (inductor) of a loaded model, warmed at set-up, cached on disk.

Why: an eager one-token step of the embedded model spends ~5 ms in Python and the dispatcher besides its linears
(docs/performance-journal.md, section 2); a compiled forward runs the transformers modules as generated C++ kernels.
It is off by default: compiling takes minutes on a small CPU the first time, and on the project's 2-core VM it made a
one-token step ~6 % faster but a verification slower than the eager fast path (docs/performance-journal.md, section 10).

How it is switched on: ``SPECVIZ_COMPILE=1`` in the environment (``generate --compile`` / ``bench --compile`` set it,
``make compile`` runs ``python -m specviz compile``); :func:`specviz.runtime.models.load_model` then calls
:func:`compile_forward` on every model it loads (the target and model drafters alike).

What it does, all at load time (never in the background of a timed run):
1. the linears: where the eager fast path is on, each runs oneDNN's linear on its plain weight as one opaque op
   (``specviz::onednn_linear``, registered here; inductor cannot lower ``mkldnn._linear_pointwise`` itself, and the
   fast path's fused groups and packed copies do not trace); with the fast path off (``SPECVIZ_FAST=0``) they are
   ``F.linear`` (inductor calls MKL's GEMM);
2. ``model.forward`` is replaced by ``torch.compile(model.forward, dynamic=True)``: the new-token count, the cache
   length and the slab capacity of :class:`specviz.core.kv.SlabCache` are symbolic, so one graph serves every
   verify length and context (sizes 0 and 1 are specialised by torch: a prefill into an empty cache and a
   one-token step have graphs of their own);
3. :func:`warm_up` runs the shapes the engine uses on a scratch cache (prefill into an empty cache, a second
   prefill chunk, a one-token step, verifications of several lengths, each with and without the final features
   the EAGLE / Medusa drafters read: transformers collects those with hooks, which split that forward into a few
   graphs), so those graphs are compiled before any run is timed.
Inductor's caches (FX graphs, AOT autograd) are written under ``cache_dir()/compile`` (``TORCHINDUCTOR_CACHE_DIR``),
so a later process reads the compiled kernels instead of compiling them again (it still traces the model). The
graphs are specialised to torch's thread count at load (changing it recompiles), so :mod:`specviz.measure.tuning` leaves a
compiled model's threads and kernels alone.

Honesty: a shape no warm-up covered (a tree mask, a batch of rows) compiles on first use. The engine marks every
pass during which anything was compiled (:func:`specviz.core.kv.compilations`, ``PassEvent.compiling``); the CLI
JSON, the bench and the Live tab say "timings include compilation" for such a run.

Exactness: the baseline and the speculative run call the same compiled forward, so greedy ids stay identical
between them (the logits differ from the eager path's by float32 rounding only, ~1e-5).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from specviz.core.kv import compilations, forward_logits, forward_logits_features, new_cache, rollback_cache
from specviz.runtime.speed import report_of, set_fast_path

ENV_COMPILE = "SPECVIZ_COMPILE"
ENV_INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"
COMPILED_LABEL = "compiled (inductor)"
COMPILING_NOTE = ("Timings include compilation: torch.compile compiled a graph, or the graph path captured a CUDA "
                  "graph, during this run (a shape not seen before); run it again for figures without it.")
WARM_PROMPT = 24  # tokens of the scratch prefill (then a second chunk, steps and verifications after it)
WARM_VERIFY = (2, 5)  # verification lengths run at warm-up (k = 1 and k = 4); any other length uses the same graph
RECOMPILE_LIMIT = 64  # graphs torch keeps per code object: every model's forward shares transformers' wrapper code


@dataclass(frozen=True)
class CompileReport:
    """What :func:`compile_forward` did to a model.

    Attributes:
        graphs: graphs torch.compile produced while warming up (each traced; compiled or read from disk).
        warm_s: seconds the warm-up took (tracing and compiling included), wall clock.
        cache_hits / cache_misses: inductor FX-graph cache hits (kernels read from disk) and misses (compiled).
        shapes: the forwards warmed, in words, e.g. "prefill 24 (empty cache)".
        cache_dir: where inductor keeps its caches.
    """

    graphs: int
    warm_s: float
    cache_hits: int
    cache_misses: int
    shapes: tuple[str, ...]
    cache_dir: str

    def summary(self) -> str:
        """One line, e.g. "compiled (inductor): 6 graphs warmed in 41.2 s (disk cache: 6 read, 0 compiled)"."""
        return (f"{COMPILED_LABEL}: {self.graphs} graphs warmed in {self.warm_s:.1f} s (disk cache: "
                f"{self.cache_hits} read, {self.cache_misses} compiled)")


@torch.library.custom_op("specviz::onednn_linear", mutates_args=())
def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (..., K) @ weight (N, K).T + bias (N) with oneDNN on the plain weight: the fast path's linear as an op a
    compiled graph calls (see :mod:`specviz.runtime.speed`). Returns (..., N)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


@onednn_linear.register_fake
def _onednn_linear_shape(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def compile_requested() -> bool:
    """True when the environment variable ``SPECVIZ_COMPILE`` is 1/true/yes/on, except on a ZeroGPU Space
    (``SPACES_ZERO_GPU`` set): its GPU workers are separate processes that would each compile again."""
    if os.environ.get("SPACES_ZERO_GPU", "").strip():
        return False
    return os.environ.get(ENV_COMPILE, "").strip().lower() in ("1", "true", "yes", "on")


def compile_report(model: torch.nn.Module) -> CompileReport | None:
    """The report of :func:`compile_forward` on ``model``, or None when its forward is not compiled."""
    return getattr(model, "_specviz_compile_report", None)


def forward_path(model: torch.nn.Module) -> str:
    """Which forward runs: "compiled (inductor)", "eager fast path" or "eager default kernels"."""
    if compile_report(model) is not None:
        return COMPILED_LABEL
    report = report_of(model)
    fast = report is not None and report.active and any(
        getattr(m, "_specviz_fast", False) for m in model.modules() if hasattr(m, "_specviz_group"))
    return "eager fast path" if fast else "eager default kernels"


def use_cache_dir(folder=None) -> str:
    """Point inductor's on-disk caches at ``folder`` (default ``cache_dir()/compile``) unless the operator set
    ``TORCHINDUCTOR_CACHE_DIR`` to a place of their own; returns the folder in use."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from specviz.runtime.models import cache_dir

    current = os.environ.get(ENV_INDUCTOR_CACHE)
    if current is None or os.path.abspath(current) == os.path.abspath(default_cache_dir()):
        os.environ[ENV_INDUCTOR_CACHE] = os.path.abspath(str(folder or cache_dir() / "compile"))
    return os.environ[ENV_INDUCTOR_CACHE]


def compile_forward(model: torch.nn.Module, *, warm: bool = True, features: bool = True,
                    progress=None) -> CompileReport:
    """Compile ``model``'s forward with torch.compile (inductor, dynamic shapes) and warm it up (idempotent).

    Args:
        model: a loaded causal LM in eval mode (transformers ``*ForCausalLM``), prepared or not by
            :func:`specviz.runtime.speed.prepare_for_decoding` (its linears then run oneDNN: see the module docstring).
        warm: run :func:`warm_up` now (False: graphs compile at the first forward of each shape; such passes are
            flagged as compiling).
        features: also warm the forwards that return the final features (EAGLE / Medusa drafters).
        progress: optional callable(str) for a status line.

    Returns:
        The :class:`CompileReport` (also kept on the model, see :func:`compile_report`).

    Raises:
        RuntimeError: torch.compile failed while warming up; the model's eager forward is restored first.
    """
    previous = compile_report(model)
    if previous is not None:
        return previous
    import torch._dynamo

    folder = use_cache_dir()
    # torch counts graphs per code object, and every compiled model runs the same transformers code: beyond the
    # limit (8 by default) it would silently run eagerly, so a target and a draft model could not both be compiled
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    eager = model.forward
    if report_of(model) is not None:  # each linear's kernel flag as an attribute of its own: the graphs guard on it
        set_fast_path(model, forward_path(model) == "eager fast path")
    model.forward = torch.compile(eager, dynamic=True)
    try:
        report = _warm(model, folder, warm, features, progress)
    except Exception as error:
        model.forward = eager
        raise RuntimeError(f"torch.compile of the forward failed while warming up: {error}") from error
    model._specviz_compile_report = report
    return report


def _warm(model: torch.nn.Module, folder: str, warm: bool, features: bool, progress) -> CompileReport:
    """Run :func:`warm_up` (when ``warm``) and count what it compiled."""
    from torch._dynamo.utils import counters

    if progress is not None and warm:
        progress("Compiling the forward (torch.compile): minutes the first time, seconds once its cache is on disk…")
    graphs0, started = compilations(), time.perf_counter()
    hits0, misses0 = (counters["inductor"][name] for name in ("fxgraph_cache_hit", "fxgraph_cache_miss"))
    shapes = warm_up(model, features=features) if warm else ()
    return CompileReport(
        graphs=compilations() - graphs0, warm_s=time.perf_counter() - started,
        cache_hits=counters["inductor"]["fxgraph_cache_hit"] - hits0,
        cache_misses=counters["inductor"]["fxgraph_cache_miss"] - misses0, shapes=tuple(shapes), cache_dir=folder)


def warm_up(model: torch.nn.Module, *, features: bool = True) -> list[str]:
    """Run every forward shape the engine uses once on a scratch cache, so its graph is compiled now.

    The shapes: a prefill of :data:`WARM_PROMPT` tokens into an empty cache, a second prefill chunk after it, a
    one-token step, and verifications of :data:`WARM_VERIFY` tokens (logits for each), then (``features``) the
    same with the final features returned. Token ids are arbitrary (the numerics do not matter here).

    Returns:
        The forwards run, in words.
    """
    vocab = int(model.config.get_text_config().vocab_size)
    ids = [(7919 * i + 3) % vocab for i in range(2 * WARM_PROMPT)]
    shapes = []
    for with_features in (False, True) if features else (False,):
        forward = forward_logits_features if with_features else forward_logits
        suffix = " + features" if with_features else ""
        cache = new_cache(model)
        forward(model, ids[:WARM_PROMPT], cache, 1)
        forward(model, ids[WARM_PROMPT:WARM_PROMPT + WARM_PROMPT // 2], cache, 1)
        shapes += [f"prefill {WARM_PROMPT} (empty cache){suffix}", f"prefill chunk {WARM_PROMPT // 2}{suffix}"]
        context = WARM_PROMPT + WARM_PROMPT // 2
        for n in (1, *WARM_VERIFY):
            forward(model, ids[:n], cache, n)
            rollback_cache(cache, context)
            shapes.append(f"{'step' if n == 1 else 'verify'} {n}{suffix}")
    return shapes
