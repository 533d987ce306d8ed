"""The graph path: the target's forwards over a :class:`~specviz.core.static_cache.DeviceCache`, one CUDA graph per
forward width, replayed at any position.

Why: on a GPU the eager engine is overhead-bound (issue 36: a 135M step takes 20 ms eager, ~3 ms as a CUDA graph).
A graph replays a fixed sequence of kernels on fixed buffers, so everything that varies between passes lives in
device tensors the graph reads: the cache's lengths (positions, write slots and the attention mask are computed from
them inside the graph), and static input buffers per width (the fed ids; for a tree or lookahead pass also the new
block's mask and depths). Rollback writes the length tensor; nothing is re-captured.

Widths (:func:`graph_width`): a chain pass of n = 1 + k tokens (standard decoding n = 1) runs the graph of width n,
k <= 16; a tree or lookahead pass is padded up to a bucket of :data:`TREE_BUCKETS` (padding nodes see only the root
and themselves; no real node sees them). Wider forwards, and the prompt's prefill chunks, run the same body eagerly
over the same cache. Graphs are keyed by :class:`GraphKey` (width, tree or chain, features), so the graph of one k is
never replayed for another k (the shape bug vLLM users met as "expected size 7 == 9").

Exact mode (``pad_to``, bfloat16 / float16 on the graph path; :func:`pad_width`): every chain forward of a run is
padded to one width W = 1 + the largest k the run may use, the baseline's one-token steps included, so each position
is computed by the same kernels (same GEMM shapes, attention over the same capacity) whether it is verified or
stepped; padding rows come after the real ones and no real row attends to them. Whether bf16 greedy ids are then
identical is measured on the GPU (scripts/gpu_check.py, "engine graph path"); a tree or lookahead pass (bucketed
widths) and any run without exact mode carry no such promise, and the run's ``forward_path`` says so. float32 (TF32
off) needs no padding.

Capture: lazily, the first time a width is needed (``GraphRunner.capture_ms`` and ``captures`` report the cost; the
pass that captured is marked ``compiling``), or ahead with :meth:`GraphRunner.capture`. Without CUDA the same runner
runs with :class:`EagerGraph` (the body called at each replay, nothing captured): the CPU tests and the CPU
diagnostic path ("graphs" asked on a CPU) exercise every line except the capture itself.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch

from specviz.core.kv import PREFILL_CHUNK, _cache_argument, _layers, _use_threads, check_cancel, note_capture, \
    pick_features
from specviz.core.static_cache import DeviceCache, chain_block, device_inputs, new_device_cache, tree_block

MAX_CHAIN_WIDTH = 17
"""Widest chain forward with a graph of its own: 1 + k for k <= 16 (the engine's MAX_K)."""
TREE_BUCKETS = (8, 16, 32, 64, 128)
"""Widths a tree or lookahead pass is padded up to (the smallest that fits); wider ones run eagerly."""
ENV_GRAPHS = "SPECVIZ_GRAPHS"
"""Operator setting: 0 keeps every run on the eager path; 1 asks for graphs (the default on CUDA)."""
ENV_EXACT = "SPECVIZ_EXACT"
"""Operator setting: 0 turns exact mode off for bfloat16 / float16 on the graph path (on by default there)."""
CAPACITY_STEP = 256
"""A runner's cache capacity is the positions a run needs, rounded up to a multiple of this (doubling when a
later run needs more)."""
MAX_RUNNERS = 4
"""Runners (each a cache and its graphs) kept per model and feature request: runs alive at the same time."""
_POOL_LOCK = threading.Lock()
WIDE_MARGIN = 2 * TREE_BUCKETS[-1]
"""Positions a run's cache keeps past its last token for the widest forward (a tree bucket, an eager wide pass)."""



@dataclass(frozen=True)
class GraphKey:
    """What one captured graph serves: ``width`` fed tokens, a ``tree`` pass (block mask and depths as inputs) or a
    chain, and the target ``features`` returned (False, True, or hidden-state indices)."""

    width: int
    tree: bool = False
    features: bool | tuple[int, ...] = False


def graph_width(n: int, *, tree: bool = False, pad_to: int | None = None) -> int | None:
    """The width of the graph serving a forward of ``n`` fed tokens, or None when it runs eagerly.

    A chain: n itself, or ``pad_to`` when set and n <= pad_to (exact mode); None past :data:`MAX_CHAIN_WIDTH`
    (and past ``pad_to``). A tree or lookahead pass: the smallest :data:`TREE_BUCKETS` entry >= n, None past the
    last.

    Raises:
        ValueError: n < 1.
    """
    if n < 1:
        raise ValueError(f"a forward feeds at least one token, got {n}")
    if tree:
        return next((b for b in TREE_BUCKETS if b >= n), None)
    if pad_to is not None:
        return pad_to if n <= pad_to else None
    return n if n <= MAX_CHAIN_WIDTH else None


def pad_width(config, dtype: torch.dtype) -> int | None:
    """Exact mode's chain width for a run of ``config`` (a GenerationConfig) on a ``dtype`` target: 1 + the largest
    k it may draft (k_max under adaptive or automatic k, else k), or None (float32, or ``SPECVIZ_EXACT=0``).

    The baseline and the speculative run of one config get the same width, so their rows are computed alike."""
    if dtype == torch.float32 or os.environ.get(ENV_EXACT, "").strip().lower() in ("0", "false", "no", "off"):
        return None
    return 1 + (config.k_max if (config.adaptive_k or config.auto_k) else config.k)


class EagerGraph:
    """A "graph" without CUDA: the body runs at capture and again at every replay (same buffers, same code)."""

    def __init__(self, body: Callable[[], tuple], device: torch.device | None = None, pool=None) -> None:
        self.body = body
        self.outputs = body()

    def replay(self) -> tuple:
        self.outputs = self.body()
        return self.outputs


class CudaGraph:
    """``body`` captured as a CUDA graph (after warm-up calls on a side stream); replays return its static outputs."""

    def __init__(self, body: Callable[[], tuple], device: torch.device, pool=None) -> None:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # cuBLAS handles, workspaces and lazy inits happen outside the capture
            for _ in range(2):
                body()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool, capture_error_mode="thread_local"):  # other threads may run
            self.outputs = body()

    def replay(self) -> tuple:
        self.graph.replay()
        return self.outputs


@dataclass
class _Inputs:
    """A graph's static inputs: ids (1, w) long, depth (w,) long, block (w, w) bool (device), and pinned host
    buffers the next values are written to before one non-blocking copy each."""

    ids: torch.Tensor
    depth: torch.Tensor
    block: torch.Tensor
    host_ids: torch.Tensor
    host_depth: torch.Tensor | None = None
    host_block: torch.Tensor | None = None
    host_logits: torch.Tensor | None = None  # (w, V) float32, pinned: the logits read back in one copy


def _host(shape: tuple[int, ...], dtype: torch.dtype, cuda: bool) -> torch.Tensor:
    tensor = torch.zeros(shape, dtype=dtype)
    return tensor.pin_memory() if cuda else tensor


class GraphRunner:
    """The target's forwards over one :class:`DeviceCache` (batch of one), as graphs per :class:`GraphKey`.

    Args:
        model: the target (a ``*ForCausalLM``), eval mode.
        capacity: the cache's positions (fixed; a run that needs more gets a new runner).
        features: target features each forward returns (False, True = final, or hidden-state indices).
        pad_to: exact mode's chain width (:func:`pad_width`), or None; a per-run setting (:func:`acquire_runner`
            sets it): the graphs do not depend on it, only which width a forward takes.
        graph_class: :class:`CudaGraph` (default on CUDA) or :class:`EagerGraph` (default elsewhere; tests).
    """

    def __init__(self, model: torch.nn.Module, capacity: int, *, features: bool | tuple[int, ...] = False,
                 pad_to: int | None = None, graph_class: type | None = None) -> None:
        self.model, self.features, self.pad_to = model, features, pad_to
        with torch.inference_mode():
            self.cache: DeviceCache = new_device_cache(model, capacity)
        self.device = self.cache.device
        self.cuda = self.device.type == "cuda"
        self.graph_class = graph_class or (CudaGraph if self.cuda else EagerGraph)
        self.pool = torch.cuda.graph_pool_handle() if self.cuda and self.graph_class is CudaGraph else None
        self.graphs: dict[GraphKey, object] = {}
        self.inputs: dict[GraphKey, _Inputs] = {}
        self.capture_ms = 0.0
        self.replays: dict[GraphKey, int] = {}
        self.eager_forwards = 0
        self.capture_error: str | None = None
        self.busy = threading.Lock()

    @property
    def captured(self) -> bool:
        """Whether graphs are real CUDA graphs (False: the body runs eagerly at each replay)."""
        return self.graph_class is CudaGraph

    # ------------------------------------------------------------------ the body
    def _body(self, ids: torch.Tensor, depth: torch.Tensor, block: torch.Tensor, keep: int
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One forward of (1, w) ``ids`` after the cache: (keep, V) float32 logits (the last ``keep`` rows) and
        (w, H) features or None. Reads lengths on the device only; does not advance them."""
        positions, mask = device_inputs(self.cache, depth, block)
        out = self.model(input_ids=ids, position_ids=positions, attention_mask=mask, use_cache=True,
                         logits_to_keep=keep, output_hidden_states=bool(self.features),
                         **{_cache_argument(self.model): self.cache})
        feats = pick_features(out.hidden_states, _layers(self.features))[0] if self.features else None
        return out.logits[0].float(), feats

    def _eager(self, ids: list[int], keep: int, parents: list[int] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The body run eagerly (prefill chunks, forwards wider than any graph); advances the lengths by len(ids)."""
        n = len(ids)
        self.cache.check_room(n)
        _use_threads(self.model, n)
        if parents is None:
            depth, block = torch.arange(n, device=self.device), chain_block(n, self.device)
        else:
            block, depth = tree_block(list(parents), self.device)
        tensor = torch.tensor([ids], dtype=torch.long, device=self.device)
        logits, feats = self._body(tensor, depth, block, keep)
        self.cache.advance(n)
        self.eager_forwards += 1
        return logits, feats

    # ------------------------------------------------------------------ graphs
    def _new_inputs(self, key: GraphKey) -> _Inputs:
        w = key.width
        inputs = _Inputs(torch.zeros((1, w), dtype=torch.long, device=self.device),
                         torch.arange(w, device=self.device), chain_block(w, self.device),
                         _host((1, w), torch.long, self.cuda))
        if key.tree:
            inputs.host_depth = _host((w,), torch.long, self.cuda)
            inputs.host_block = _host((w, w), torch.bool, self.cuda)
        return inputs

    def graph(self, key: GraphKey):
        """The graph of ``key``, captured now when missing (its time added to ``capture_ms``).

        Raises:
            ValueError: ``key.features`` differs from the runner's.
            CapacityError: the cache has no room for a forward of ``key.width`` tokens at its current length.
        """
        if key.features != self.features:
            raise ValueError(f"this runner returns features {self.features!r}, not {key.features!r}")
        if key not in self.graphs:
            self.cache.check_room(key.width)  # the warm-up and capture write slots past the current length
            inputs = self._new_inputs(key)
            t0 = time.perf_counter()
            self.graphs[key] = self._captured(lambda: self._body(inputs.ids, inputs.depth, inputs.block, key.width))
            if self.cuda:
                torch.cuda.synchronize(self.device)
            self.capture_ms += (time.perf_counter() - t0) * 1000.0
            self.inputs[key] = inputs
            self.replays[key] = 0
            note_capture()
        return self.graphs[key]

    def _captured(self, body: Callable[[], tuple]):
        """``body`` as a graph of ``graph_class``; a capture that fails is recorded (``capture_error``) and this
        runner goes on without capturing (EagerGraph: same body, eager), so the run still completes."""
        try:
            return self.graph_class(body, self.device, self.pool)
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back to the same body run eagerly
            if self.graph_class is EagerGraph:
                raise
            self.capture_error = f"{type(exc).__name__}: {exc}"[:500]
            self.graph_class = EagerGraph
            if self.cuda:
                torch.cuda.synchronize(self.device)
            return EagerGraph(body)

    @torch.inference_mode()
    def capture(self, widths: list[int], *, tree: bool = False) -> float:
        """Capture the graphs of ``widths`` ahead (at load); returns the milliseconds it took."""
        before = self.capture_ms
        for width in widths:
            self.graph(GraphKey(width, tree, self.features))
        return self.capture_ms - before

    def _fill(self, key: GraphKey, ids: list[int], parents: list[int] | None) -> None:
        """Write the pass's ids (padded to the width) and, for a tree, its block and depths into the static inputs."""
        inputs, w, n = self.inputs[key], key.width, len(ids)
        inputs.host_ids[0, :n] = torch.tensor(ids, dtype=torch.long)
        inputs.host_ids[0, n:] = ids[-1]
        inputs.ids.copy_(inputs.host_ids, non_blocking=self.cuda)
        if key.tree:
            block, depth = tree_block(list(parents), torch.device("cpu"))
            inputs.host_block.zero_()
            inputs.host_block[:n, :n] = block
            pad = torch.arange(n, w)
            inputs.host_block[pad, 0] = True  # a padding node sees the root and itself (never a real node)
            inputs.host_block[pad, pad] = True
            inputs.host_depth.fill_(1)
            inputs.host_depth[:n] = depth
            inputs.block.copy_(inputs.host_block, non_blocking=self.cuda)
            inputs.depth.copy_(inputs.host_depth, non_blocking=self.cuda)

    # ------------------------------------------------------------------ the engine's calls
    @torch.inference_mode()
    def forward(self, ids: list[int], parents: list[int] | None = None, *, to_host: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The target over ``ids`` (the last committed token + a chain draft, or + a tree's nodes with ``parents``)
        after the cache: (n, V) float32 logits and (n, H) features (or None), n = len(ids). The lengths advance by
        n (the commit then rolls them back to what it keeps).

        ``to_host`` (a greedy run on CUDA): the logits come back on the CPU through one copy into a pinned buffer,
        the pass's one wait for the device; everything the verifier then reads (argmax, top-2 gap, finiteness,
        the event's numbers) needs no further sync. They are a view of that buffer, valid until the next forward of
        the same width. Without it, or without CUDA: a device copy.

        Raises:
            CapacityError: the cache has no room for this forward.
        """
        n, tree = len(ids), parents is not None
        width = graph_width(n, tree=tree, pad_to=self.pad_to)
        if width is None:
            return self._eager(ids, n, parents)
        key = GraphKey(width, tree, self.features)
        self.cache.check_room(width)
        graph = self.graph(key)
        self._fill(key, ids, parents)
        logits, feats = graph.replay()
        self.replays[key] += 1
        self.cache.advance(n)
        feats = feats[:n].clone() if feats is not None else None
        if not (to_host and self.cuda):
            return logits[:n].clone(), feats
        inputs = self.inputs[key]
        if inputs.host_logits is None:
            inputs.host_logits = _host(tuple(logits.shape), torch.float32, True)
        inputs.host_logits[:n].copy_(logits[:n], non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return inputs.host_logits[:n], feats

    @torch.inference_mode()
    def prefill(self, ids: list[int], cancel: object | None = None, chunk: int = PREFILL_CHUNK
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Read a prompt after the cache in eager forwards of at most ``chunk`` tokens (the engine's chunks),
        checking ``cancel`` before each: (1, V) float32 logits at the last position and (n, H) features or None.

        Raises:
            RunCancelled: ``cancel`` was set before a chunk.
            CapacityError: the prompt does not fit.
        """
        feats: list[torch.Tensor] = []
        for start in range(0, len(ids), chunk):
            check_cancel(cancel)
            logits, f = self._eager(ids[start:start + chunk], 1)
            if f is not None:
                feats.append(f)
        return logits, (torch.cat(feats) if len(feats) > 1 else feats[0]) if feats else None

    @torch.inference_mode()
    def reset(self) -> None:
        """Empty the cache for a new run (graphs stay captured)."""
        self.cache.reset()


def capacity_for(positions: int) -> int:
    """A runner capacity holding ``positions``: rounded up to a multiple of :data:`CAPACITY_STEP`."""
    return -(-max(positions, 1) // CAPACITY_STEP) * CAPACITY_STEP


def acquire_runner(model: torch.nn.Module, positions: int, *, features: bool | tuple[int, ...] = False,
                   pad_to: int | None = None, graph_class: type | None = None) -> GraphRunner | None:
    """A free :class:`GraphRunner` of ``model`` for a run needing ``positions`` cache positions, reset, set to the
    run's ``pad_to`` and locked (release with ``runner.busy.release()``), or None when all
    :data:`MAX_RUNNERS` for these settings are held by other runs (the caller runs eagerly).

    Runners live on the model (``model._specviz_graph_runners``: per (features, graph class) a list), so later
    runs replay the graphs earlier ones captured; runs alive at the same time (the Live tab races the baseline
    against the speculative run in one thread) each hold their own runner (own cache, own graphs). A free runner
    too small for this run is replaced by a larger one (its graphs are captured again)."""
    with _POOL_LOCK:
        pool = model.__dict__.setdefault("_specviz_graph_runners", {}).setdefault((features, graph_class), [])
        for i, runner in enumerate(pool):
            if runner.busy.acquire(blocking=False):
                if runner.cache.capacity < positions:  # grow by doubling: few re-captures
                    runner.busy.release()
                    capacity = max(capacity_for(positions), 2 * runner.cache.capacity)
                    runner = pool[i] = GraphRunner(model, capacity, features=features, graph_class=graph_class)
                    runner.busy.acquire()
                break
        else:
            if len(pool) >= MAX_RUNNERS:
                return None
            runner = GraphRunner(model, capacity_for(positions), features=features, graph_class=graph_class)
            runner.busy.acquire()
            pool.append(runner)
    runner.reset()
    runner.pad_to = pad_to
    return runner


def requested_path(target) -> str:
    """The forward path asked for ``target``: its ``path`` attribute when "eager" or "graphs" (a
    :class:`specviz.runtime.models.LoadedModel` carries one), else ``SPECVIZ_GRAPHS`` (0: eager, 1: graphs), else graphs on
    CUDA and eager elsewhere. "graphs" on a device without CUDA runs the graph bodies eagerly (nothing captured)."""
    asked = str(getattr(target, "path", "auto") or "auto").strip().lower()
    if asked in ("eager", "graphs"):
        return asked
    env = os.environ.get(ENV_GRAPHS, "").strip().lower()
    if env in ("0", "false", "no", "off", "eager"):
        return "eager"
    if env in ("1", "true", "yes", "on", "graphs"):
        return "graphs"
    return "graphs" if torch.device(target.device).type == "cuda" else "eager"


def _promise(dtype: torch.dtype, pad_to: int | None, captured: bool) -> str:
    """What a graph run promises about greedy ids, in one clause."""
    how = "CUDA graphs per forward width over a static device-side cache" if captured else \
        "static device-side cache, graph bodies run eagerly (no CUDA: nothing captured)"
    name = str(dtype).replace("torch.", "")
    if dtype == torch.float32:
        return f"graphs ({how}; float32: greedy ids as on the eager path)"
    if pad_to is not None:
        return (f"graphs ({how}; exact mode: every chain forward {pad_to} wide, so {name} rows are computed as the "
                f"baseline's; tree and lookahead passes are not covered)")
    return (f"graphs ({how}; {name} without exact mode: greedy ids may differ from standard decoding at near-ties; "
            f"{ENV_EXACT}=1 turns it on)")


def choose_runner(target, prompts: list[list[int]], config, features: bool | tuple[int, ...] = False
                  ) -> tuple[GraphRunner | None, str]:
    """The engine's forward path for a run: a locked :class:`GraphRunner` (or None: the eager SlabCache path) and
    one line naming the path and, for graphs, what it promises about greedy ids (``PassEvent.forward_path``).

    Args:
        target: the run's target (``model``, ``device``; optional ``path``).
        prompts: the run's encoded prompts (a batch of several runs eagerly).
        config: the run's GenerationConfig (max_new_tokens sizes the cache; k / k_max the exact width).
        features: the target features the drafters read.
    """
    if requested_path(target) == "eager":
        return None, "eager (SlabCache; graphs off)" if torch.device(target.device).type == "cuda" else "eager"
    model = target.model
    if len(prompts) > 1:
        return None, f"eager (a batch of {len(prompts)} prompts runs on the eager path)"
    if getattr(model, "_specviz_compile_report", None) is not None:
        return None, "eager (the forward is compiled with torch.compile; graphs are not captured over it)"
    dtype = next(model.parameters()).dtype
    pad_to = pad_width(config, dtype)
    positions = len(prompts[0]) + config.max_new_tokens + WIDE_MARGIN
    cuda = torch.device(target.device).type == "cuda"
    runner = acquire_runner(model, positions, features=features, pad_to=pad_to,
                            graph_class=CudaGraph if cuda else EagerGraph)
    if runner is None:
        return None, f"eager (this model's {MAX_RUNNERS} graph runners are busy with other runs)"
    if runner.capture_error is not None:
        return runner, f"graphs not captured ({runner.capture_error[:120]}); the graph bodies run eagerly"
    return runner, _promise(dtype, pad_to, cuda)


def graph_report(model: torch.nn.Module) -> dict:
    """What the graph path has done for ``model``: per runner, its capacity, exact width, captured widths, capture
    milliseconds, replays per width and eager forwards (prefill chunks, wide passes)."""
    runners = [r for pool in getattr(model, "_specviz_graph_runners", {}).values() for r in pool]
    return {"runners": [{"capacity": r.cache.capacity, "last_pad_to": r.pad_to, "features": r.features,
                         "captured": r.captured, "capture_error": r.capture_error,
                         "widths": sorted({(k.width, k.tree) for k in r.graphs}),
                         "capture_ms": round(r.capture_ms, 1), "eager_forwards": r.eager_forwards,
                         "replays": {f"{k.width}{'t' if k.tree else ''}": v for k, v in r.replays.items()}}
                        for r in runners]}


def path_label(target) -> str:
    """A short name of the forward path a single-prompt run of ``target`` takes: "CUDA graphs", "graph bodies
    (eager, no CUDA)" or "eager" (a run's ``forward_path`` says more, e.g. exact mode or why it fell back)."""
    if requested_path(target) == "eager":
        return "eager"
    return "CUDA graphs" if torch.device(target.device).type == "cuda" else "graph bodies (eager, no CUDA)"


DRAFT_ROOM = 1024
"""Positions a drafter's private runner keeps past the prompt at a run's start (a run outgrowing it finishes on the
eager path; the next run gets a runner twice as large)."""


DRAFT_GRAPH_WIDTH = 4
"""Widest feed a drafter's runner replays as a graph (its steps feed 1 token, its catch-ups 1 or 2); a longer feed
(the prompt) runs in eager chunks over the same cache."""


def graphs_wanted(device: torch.device) -> bool:
    """Whether a drafter's own model on ``device`` runs on the graph path: ``SPECVIZ_GRAPHS`` (0 / 1) when set, else
    on CUDA (the ``--path`` option sets it)."""
    env = os.environ.get(ENV_GRAPHS, "").strip().lower()
    if env in ("0", "false", "no", "off", "eager"):
        return False
    return env in ("1", "true", "yes", "on", "graphs") or torch.device(device).type == "cuda"


class DraftForwards:
    """A draft model's forwards over its own cache (:class:`specviz.drafters.model.ModelDrafter`): through a private
    :class:`GraphRunner` (the drafter's one-token steps and short catch-ups as graphs, up to
    :data:`DRAFT_GRAPH_WIDTH` tokens wide) when
    :func:`graphs_wanted`, else the eager SlabCache path. The drafter owns it for every run it serves (one run at a
    time), so no pool or lock is involved.

    ``cache`` is the cache in use (a DeviceCache or a SlabCache); roll it back with
    :func:`specviz.core.kv.rollback_cache` as before.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        from specviz.core.kv import new_cache

        self.model = model
        self.runner: GraphRunner | None = None
        self.cache = new_cache(model)

    def reset(self, prompt_len: int) -> None:
        """Start a run with an empty cache: the runner's (grown when this prompt needs more room) or a SlabCache."""
        from specviz.core.kv import new_cache

        if not graphs_wanted(next(self.model.parameters()).device):
            self.cache = new_cache(self.model)
            return
        needed = prompt_len + DRAFT_ROOM
        if self.runner is None or self.runner.cache.capacity < needed:
            old = self.runner.cache.capacity if self.runner is not None else 0
            self.runner = GraphRunner(self.model, max(capacity_for(needed), 2 * old))
        self.runner.reset()
        self.cache = self.runner.cache

    def logits(self, ids: list[int], fed: list[int], cancel: object | None = None) -> torch.Tensor:
        """(V,) float32 logits after ``ids`` fed after the cache (which holds ``fed``): one graph replay for a short
        feed, eager chunks for a long one (the prompt). A run outgrowing the runner's cache moves to the eager path:
        ``fed`` is read again into a SlabCache (same logits up to rounding).

        Raises:
            RunCancelled: ``cancel`` was set before a forward.
        """
        from specviz.core.kv import forward_chunked, new_cache
        from specviz.core.static_cache import CapacityError

        if self.runner is not None and self.cache is self.runner.cache:
            try:
                if len(ids) <= DRAFT_GRAPH_WIDTH:
                    check_cancel(cancel)
                    return self.runner.forward(ids)[0][-1]
                return self.runner.prefill(ids, cancel)[0][-1]
            except CapacityError:
                self.cache = new_cache(self.model)
                ids = list(fed) + list(ids)
        return forward_chunked(self.model, ids, self.cache, 1, cancel=cancel)[0][-1]


WARM_CAPACITY = 2048
"""Cache positions of the runner :func:`warm_graphs` prepares at load (a run needing more gets a larger runner)."""


def warm_graphs(target, widths: tuple[int, ...] = tuple(range(1, MAX_CHAIN_WIDTH + 1))) -> str | None:
    """Capture ``target``'s chain graphs ahead (at load: widths 1..17 serve standard decoding, every k and exact
    mode) when its runs take the graph path on CUDA; returns one line saying what it did and how long it took, or
    None when nothing applies (the eager path, no CUDA, a compiled forward, every runner busy, or already done for
    this model: the app calls it before every run)."""
    if requested_path(target) != "graphs" or torch.device(target.device).type != "cuda" or \
            getattr(target.model, "_specviz_compile_report", None) is not None or \
            target.model.__dict__.get("_specviz_graphs_warm"):
        return None
    runner = acquire_runner(target.model, WARM_CAPACITY, graph_class=CudaGraph)
    if runner is None:
        return None
    try:
        ms = runner.capture(list(widths))
        runner.reset()
    finally:
        runner.busy.release()
    target.model.__dict__["_specviz_graphs_warm"] = True
    if runner.capture_error is not None:
        return f"graphs: capture failed ({runner.capture_error[:160]}); the graph bodies run eagerly"
    return f"graphs: widths {widths[0]}..{widths[-1]} captured in {ms:.0f} ms"
