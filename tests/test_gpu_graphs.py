"""The graph path on the CPU (issue 36): the device-side static cache run eagerly (the graph bodies without capture)
gives the ids of today's SlabCache path, and the graph bookkeeping (widths, buckets, one graph per key, exact mode's
padding, rollback by length, runners busy and released) with the capture faked."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specviz.core import graphs
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.graphs import (GraphKey, GraphRunner, acquire_runner, choose_runner, graph_report, graph_width,
                                 pad_width, requested_path)
from specviz.core.kv import compilations, forward_logits, forward_logits_features, keep_positions, new_cache
from specviz.core.static_cache import CapacityError, DeviceCache, chain_block, device_inputs, tree_block
from specviz.core.tree import tree_attention_mask, tree_positions
from specviz.drafters import EarlyExitDrafter, NgramDrafter
from specviz.drafters.lookahead import LookaheadDrafter


def _run(target, prompt, cfg, drafter=None):
    gen = standard_generate(target, prompt, cfg) if drafter is None else speculative_generate(target, drafter, prompt,
                                                                                               cfg)
    return collect(gen, target.tokenizer, prompt)


def _prompt(tok):
    return tok.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)


@pytest.fixture
def graph_target(tiny_target):
    """The tiny target asking for the graph path (on the CPU: graph bodies run eagerly over the DeviceCache)."""
    return dataclasses.replace(tiny_target, path="graphs")


class FakeGraph:
    """A capture stand-in that records what was captured and replayed (the body still runs, as EagerGraph)."""

    log: list[tuple[str, tuple[int, ...]]] = []

    def __init__(self, body, device=None, pool=None) -> None:
        self.body = body
        self.outputs = body()
        FakeGraph.log.append(("capture", tuple(self.outputs[0].shape)))

    def replay(self):
        self.outputs = self.body()
        FakeGraph.log.append(("replay", tuple(self.outputs[0].shape)))
        return self.outputs


# ------------------------------------------------------------------------------------------------ exactness (float32)


@pytest.mark.kernels
@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("name", ["standard", "ngram", "early-exit", "lookahead"])
def test_static_cache_ids_equal_slab_cache_ids(tiny_target, graph_target, name, k):
    """Same ids, same accept decisions pass by pass, on the device-cache path as on the eager SlabCache path."""
    make = {"standard": lambda: None, "ngram": NgramDrafter, "lookahead": LookaheadDrafter,
            "early-exit": lambda: EarlyExitDrafter(tiny_target.model, 2)}[name]
    prompt = _prompt(tiny_target.tokenizer)
    cfg = GenerationConfig(max_new_tokens=32, k=k)
    eager, graph = _run(tiny_target, prompt, cfg, make()), _run(graph_target, prompt, cfg, make())
    base = _run(tiny_target, prompt, cfg)
    assert graph.token_ids == eager.token_ids == base.token_ids
    assert [e.num_accepted for e in graph.events] == [e.num_accepted for e in eager.events]
    assert [e.target_cache_len for e in graph.events] == [e.target_cache_len for e in eager.events]
    assert graph.forward_path.startswith("graphs") and "float32" in graph.forward_path
    assert eager.forward_path == "eager"


def test_forward_logits_match_slab_forward(tiny_target):
    """One forward over the DeviceCache vs the SlabCache after the same prompt: the same logits (float32, up to
    rounding) for a chain and for a tree (mask and positions built on the device)."""
    model, prompt = tiny_target.model, _prompt(tiny_target.tokenizer)
    runner = GraphRunner(model, 256)
    slab = new_cache(model)
    runner.prefill(prompt[:-1])
    forward_logits(model, prompt[:-1], slab, 1)
    draft = [5, 9, 11]
    chain = runner.forward([prompt[-1]] + draft)
    expected = forward_logits(model, [prompt[-1]] + draft, slab, 4)
    torch.testing.assert_close(chain[0], expected, rtol=1e-4, atol=1e-4)
    assert runner.cache.row_lengths() == [len(prompt) + 3] == slab.layers[0].lengths
    runner.cache.set_row_lengths([len(prompt) - 1])  # rollback by length: the next forward overwrites the slots
    again = runner.forward([prompt[-1]] + draft)
    torch.testing.assert_close(again[0], chain[0], rtol=0, atol=0)
    runner.cache.set_row_lengths([len(prompt) - 1])
    parents = [-1, -1, 0, 1]  # two children of the root, one grandchild under each
    tree_logits, _ = runner.forward([prompt[-1], 5, 7, 9, 11], parents)
    slab.set_row_lengths([len(prompt) - 1])
    eager_tree, _ = forward_logits_features(model, [prompt[-1], 5, 7, 9, 11], slab, 5,
                                            attention_mask=tree_attention_mask(parents, len(prompt) - 1),
                                            position_ids=tree_positions(parents, len(prompt) - 1))
    torch.testing.assert_close(tree_logits, eager_tree, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------ the device cache


def test_device_inputs_mask_positions_and_slots():
    cache = DeviceCache(num_layers=1, capacity=10, device=torch.device("cpu"))
    cache.advance(3)
    positions, mask = device_inputs(cache, torch.arange(2), chain_block(2, torch.device("cpu")))
    assert cache.slots.tolist() == [[3, 4]] and positions.tolist() == [[3, 4]]
    assert mask.shape == (1, 1, 2, 10)
    assert mask[0, 0].int().tolist() == [[1, 1, 1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]]
    block, depth = tree_block([-1, -1, 0], torch.device("cpu"))
    positions, mask = device_inputs(cache, depth, block)
    assert positions.tolist() == tree_positions([-1, -1, 0], 3).tolist()
    assert torch.equal(mask[0, 0, :, :7], tree_attention_mask([-1, -1, 0], 3)[0, 0])
    assert not mask[0, 0, :, 7:].any()


def test_device_cache_rollback_keep_and_capacity():
    cache = DeviceCache(num_layers=2, capacity=8, device=torch.device("cpu"))
    keys = torch.arange(6, dtype=torch.float32).reshape(1, 1, 6, 1)
    device_inputs(cache, torch.arange(6), chain_block(6, torch.device("cpu")))
    for layer in cache.layers:
        layer.update(keys, keys)
    cache.advance(6)
    assert cache.lengths.tolist() == [6] and cache.get_seq_length() == 6
    with pytest.raises(ValueError):
        cache.set_row_lengths([7])
    cache.set_row_lengths([4])
    assert cache.lengths.tolist() == [4] and cache.row_lengths() == [4]
    keep_positions(cache, [0, 1, 3])  # a tree's accepted path: entries moved to the front, length 3
    assert cache.row_lengths() == [3] and cache.lengths.tolist() == [3]
    assert cache.layers[1].keys[0, 0, :3, 0].tolist() == [0.0, 1.0, 3.0]
    cache.check_room(5)
    with pytest.raises(CapacityError):
        cache.check_room(6)


# ------------------------------------------------------------------------------------------------ bookkeeping


def test_graph_widths_and_buckets():
    assert [graph_width(n) for n in (1, 2, 9, 17)] == [1, 2, 9, 17]
    assert graph_width(18) is None  # wider than any chain graph: runs eagerly
    assert [graph_width(n, pad_to=9) for n in (1, 5, 9)] == [9, 9, 9] and graph_width(10, pad_to=9) is None
    assert [graph_width(n, tree=True) for n in (1, 8, 9, 33, 128)] == [8, 8, 16, 64, 128]
    assert graph_width(129, tree=True) is None
    with pytest.raises(ValueError):
        graph_width(0)
    config = GenerationConfig(k=4, k_max=12)
    assert pad_width(config, torch.float32) is None
    assert pad_width(config, torch.bfloat16) == 5
    assert pad_width(dataclasses.replace(config, auto_k=True), torch.bfloat16) == 13


def test_one_graph_per_width_never_reused_for_another(tiny_target):
    """A graph captured for k=3 (width 4) serves only 4-token forwards: a k=5 pass gets its own (width 6)."""
    FakeGraph.log.clear()
    model, prompt = tiny_target.model, _prompt(tiny_target.tokenizer)
    runner = GraphRunner(model, 256, graph_class=FakeGraph)
    runner.prefill(prompt)
    context = len(prompt)
    for n in (4, 6, 4, 1, 6):
        logits, _ = runner.forward(prompt[:n])
        assert logits.shape == (n, tiny_target.vocab_size)
        runner.cache.set_row_lengths([context])
    assert sorted(k.width for k in runner.graphs) == [1, 4, 6]
    assert runner.replays == {GraphKey(4): 2, GraphKey(6): 2, GraphKey(1): 1}
    assert [shape for kind, shape in FakeGraph.log if kind == "capture"] == [(4, tiny_target.vocab_size),
                                                                              (6, tiny_target.vocab_size),
                                                                              (1, tiny_target.vocab_size)]
    assert all(tuple(runner.inputs[key].ids.shape) == (1, key.width) for key in runner.graphs)
    before = compilations()
    runner.forward(prompt[:2])
    assert compilations() == before + 1  # a capture counts as a compilation (the pass is marked compiling)
    runner.cache.set_row_lengths([context])
    runner.pad_to = 6  # exact mode: every chain forward of <= 6 tokens takes the width-6 graph
    for n in (1, 3, 6):
        assert runner.forward(prompt[:n])[0].shape[0] == n
        runner.cache.set_row_lengths([context])
    assert runner.replays[GraphKey(6)] == 5 and sorted(k.width for k in runner.graphs) == [1, 2, 4, 6]
    runner.forward(prompt[:5], [-1, 0, 1, -1])  # a tree of 4 nodes: the 8 bucket, with its own inputs
    assert GraphKey(8, tree=True) in runner.graphs and runner.cache.row_lengths() == [context + 5]


def test_runners_are_held_by_one_run_each_and_released(graph_target, tiny_target):
    prompt = _prompt(tiny_target.tokenizer)
    cfg = GenerationConfig(max_new_tokens=6)
    held = [acquire_runner(tiny_target.model, 64, graph_class=graphs.EagerGraph) for _ in range(graphs.MAX_RUNNERS)]
    try:
        assert all(r is not None for r in held) and len({id(r) for r in held}) == graphs.MAX_RUNNERS
        assert acquire_runner(tiny_target.model, 64, graph_class=graphs.EagerGraph) is None
        busy = _run(graph_target, prompt, cfg)
        assert busy.forward_path.startswith("eager") and "busy" in busy.forward_path
    finally:
        for runner in held:
            runner.busy.release()
    run = _run(graph_target, prompt, cfg)
    assert run.forward_path.startswith("graphs")
    assert run.token_ids == busy.token_ids
    runner = acquire_runner(tiny_target.model, 64, graph_class=graphs.EagerGraph)  # released when the run ended
    assert runner is not None and runner.cache.row_lengths() == [0]
    runner.busy.release()
    stopped = standard_generate(graph_target, prompt, cfg)
    next(stopped)
    stopped.close()  # a run abandoned after its first event hands its runner back too
    free = [acquire_runner(tiny_target.model, 64, graph_class=graphs.EagerGraph) for _ in range(graphs.MAX_RUNNERS)]
    assert all(r is not None for r in free)
    for runner in free:
        runner.busy.release()
    report = graph_report(tiny_target.model)["runners"]
    assert report and all(r["capacity"] >= 64 and not r["captured"] for r in report)


def test_raced_runs_each_take_graphs(graph_target, tiny_target):
    """The Live tab races the baseline against the speculative run in one thread: both run on the graph path
    (a runner each) and the greedy ids agree."""
    from specviz.core.race import race

    prompt = _prompt(tiny_target.tokenizer)
    cfg = GenerationConfig(max_new_tokens=20, k=3)
    events = list(race(speculative_generate(graph_target, NgramDrafter(), prompt, cfg),
                       standard_generate(graph_target, prompt, cfg)))
    spec = [e for e in events if e.run == "speculative"]
    base = [e for e in events if e.run == "baseline"]
    assert spec[0].forward_path.startswith("graphs") and base[0].forward_path.startswith("graphs")
    assert [t for e in spec for t in e.emitted_ids] == [t for e in base for t in e.emitted_ids]


def test_path_choice(tiny_target, monkeypatch):
    monkeypatch.delenv(graphs.ENV_GRAPHS, raising=False)
    assert requested_path(tiny_target) == "eager"  # auto on a CPU
    monkeypatch.setenv(graphs.ENV_GRAPHS, "1")
    assert requested_path(tiny_target) == "graphs"
    assert requested_path(dataclasses.replace(tiny_target, path="eager")) == "eager"
    monkeypatch.setenv(graphs.ENV_GRAPHS, "0")
    assert requested_path(dataclasses.replace(tiny_target, path="graphs")) == "graphs"
    assert requested_path(tiny_target) == "eager"
    runner, path = choose_runner(dataclasses.replace(tiny_target, path="graphs"), [[1, 2], [3]], GenerationConfig())
    assert runner is None and "batch of 2 prompts" in path


def test_bfloat16_exact_mode_pads_every_chain_forward(tiny_model_dir):
    """bfloat16 on the graph path: exact mode runs the baseline's steps and every pass at one width (1 + k)."""
    from specviz.runtime.models import load_model

    target = dataclasses.replace(load_model(str(tiny_model_dir), device="cpu", dtype="bfloat16"), path="graphs")
    prompt = _prompt(target.tokenizer)
    cfg = GenerationConfig(max_new_tokens=16, k=3)
    base = _run(target, prompt, cfg)
    spec = _run(target, prompt, cfg, NgramDrafter())
    assert "exact mode: every chain forward 4 wide" in base.forward_path
    runner = next(iter(target.model._specviz_graph_runners.values()))[0]
    assert set(runner.replays) == {GraphKey(4)} and runner.replays[GraphKey(4)] == len(base.events) - 1 + len(
        spec.events) - 1
    assert len(spec.token_ids) == len(base.token_ids) == 16


class FailingGraph:
    """A capture that fails (as a CUDA capture of an uncapturable operation would)."""

    def __init__(self, body, device=None, pool=None) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")


def test_failed_capture_falls_back_to_the_eager_body(tiny_target, monkeypatch):
    """A capture that fails is recorded and the runner goes on running the same body eagerly: same logits."""
    model, prompt = tiny_target.model, _prompt(tiny_target.tokenizer)
    reference = GraphRunner(model, 256)
    reference.prefill(prompt)
    expected = reference.forward([3, 4, 5])[0]
    runner = GraphRunner(model, 256, graph_class=FailingGraph)
    runner.prefill(prompt)
    logits = runner.forward([3, 4, 5])[0]
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)
    assert runner.capture_error.startswith("RuntimeError: operation not permitted") and not runner.captured
    assert runner.cache.row_lengths() == [len(prompt) + 3]


@pytest.mark.parametrize("room", [None, 16])
def test_model_drafter_on_graphs_drafts_as_on_the_eager_path(tiny_target, monkeypatch, room):
    """A draft model's own forwards through its private runner (SPECVIZ_GRAPHS=1; graph bodies run eagerly on the
    CPU): the same drafts and accept decisions as on the eager path, also when the run outgrows the runner's
    cache (``room``: a tiny capacity) and finishes on the eager path."""
    prompt = _prompt(tiny_target.tokenizer)
    cfg = GenerationConfig(max_new_tokens=40, k=4)
    monkeypatch.setenv(graphs.ENV_GRAPHS, "0")
    eager = _run(tiny_target, prompt, cfg, EarlyExitDrafter(tiny_target.model, 2))
    monkeypatch.setenv(graphs.ENV_GRAPHS, "1")
    if room is not None:
        monkeypatch.setattr(graphs, "DRAFT_ROOM", room)
        monkeypatch.setattr(graphs, "CAPACITY_STEP", 16)
    drafter = EarlyExitDrafter(tiny_target.model, 2)
    graph = _run(dataclasses.replace(tiny_target, path="eager"), prompt, cfg, drafter)
    assert graph.token_ids == eager.token_ids
    assert [e.draft_ids for e in graph.events] == [e.draft_ids for e in eager.events]
    assert [e.draft_cache_len for e in graph.events] == [e.draft_cache_len for e in eager.events]
    runner = drafter._forwards.runner
    assert runner is not None and runner.replays
    assert (drafter._cache is runner.cache) == (room is None)  # outgrown: the run finished on a SlabCache
    again = _run(dataclasses.replace(tiny_target, path="eager"), prompt, cfg, drafter)  # a second run: reset
    assert again.token_ids == eager.token_ids


def test_warm_graphs_captures_ahead_only_on_cuda_graphs(tiny_target, monkeypatch):
    """At load: nothing on the eager path or without CUDA (this machine); with CUDA stubbed in, widths 1..17 are
    captured into a runner the next run takes (capture faked)."""
    assert graphs.warm_graphs(tiny_target) is None  # a CPU target: eager
    assert graphs.warm_graphs(dataclasses.replace(tiny_target, path="graphs")) is None  # no CUDA: nothing to capture
    FakeGraph.log.clear()
    monkeypatch.setattr(graphs, "CudaGraph", FakeGraph)
    fake_cuda = dataclasses.replace(tiny_target, path="graphs")
    object.__setattr__(fake_cuda, "device", torch.device("cuda"))
    model = tiny_target.model
    monkeypatch.setattr(model, "_specviz_graph_runners", {}, raising=False)
    line = graphs.warm_graphs(fake_cuda)
    assert line.startswith("graphs: widths 1..17 captured in")
    assert len([kind for kind, _ in FakeGraph.log if kind == "capture"]) == 17
    runner = model._specviz_graph_runners[(False, FakeGraph)][0]
    assert sorted(k.width for k in runner.graphs) == list(range(1, 18)) and runner.cache.row_lengths() == [0]
    assert not runner.busy.locked()
    assert graphs.warm_graphs(fake_cuda) is None  # once per model (the app calls it before every run)
    del model.__dict__["_specviz_graphs_warm"]  # leave the shared tiny model as it was


def test_greedy_pass_reads_logits_back_once_into_a_reused_buffer(tiny_target, monkeypatch):
    """``to_host`` (CUDA stubbed: no pinning, a stream whose synchronize is counted): the logits come back through
    one buffer per width, equal to a device copy, with one wait per forward."""
    model, prompt = tiny_target.model, _prompt(tiny_target.tokenizer)
    waits = []

    class Stream:
        def synchronize(self):
            waits.append(1)

    monkeypatch.setattr(graphs, "_host", lambda shape, dtype, cuda: torch.zeros(shape, dtype=dtype))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)  # after a capture
    runner = GraphRunner(model, 256)
    runner.prefill(prompt)
    expected = runner.forward([3, 4, 5])[0].clone()
    runner.cache.set_row_lengths([len(prompt)])
    runner.cuda = True
    first = runner.forward([3, 4, 5], to_host=True)[0]
    torch.testing.assert_close(first, expected, rtol=0, atol=0)
    assert waits == [1] and first.data_ptr() == runner.inputs[GraphKey(3)].host_logits.data_ptr()
    runner.cache.set_row_lengths([len(prompt)])
    second = runner.forward([3, 4], to_host=True)[0]  # another width: its own buffer
    assert waits == [1, 1] and second.shape == (2, tiny_target.vocab_size)
    assert second.data_ptr() == runner.inputs[GraphKey(2)].host_logits.data_ptr() != first.data_ptr()
