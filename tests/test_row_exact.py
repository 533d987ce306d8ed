"""Row-exact attention in the CPU weight formats beyond chains (specviz.runtime.speed.attention.mark_row_exact): a tree
pass computes each node as the one-token steps along its path would, a batch's pass each row as its own run's
steps would, bit for bit (bfloat16 / int8 / int4 on the tiny target, 1 and 2 threads), so tree drafters, lookahead
and batches give standard decoding's greedy ids inside a format. Chains: tests/test_weights_default.py."""

from __future__ import annotations

import random

import pytest
import torch

from specviz.core.engine import GenerationConfig, collect, generate_batch, speculative_generate, standard_generate
from specviz.core.events import PassEvent
from specviz.core.kv import cache_length, forward_logits, forward_logits_features, forward_rows, new_cache, row_exact
from specviz.core.tree import ancestors, tree_attention_mask, tree_positions
from specviz.drafters import NgramDrafter
from specviz.drafters.heads import EagleDrafter, MedusaDrafter, TreeSettings
from specviz.drafters.lookahead import LookaheadDrafter
from specviz.runtime.speed import attention
from specviz.runtime.weights import with_weights
from test_drafter_heads import _eagle, _medusa
from test_engine import _prompts
from torch_threads import torch_threads

FORMATS = ["bfloat16", "int8", "int4"]


def _wide_tree(nodes: int, seed: int) -> list[int]:
    """Parents of a random topologically ordered tree of ``nodes`` nodes, most of them under recent nodes."""
    rng = random.Random(seed)
    return [-1 if i == 0 or rng.random() < 0.15 else rng.randrange(max(0, i - 4), i) for i in range(nodes)]


TREES = {  # parents lists: a mixed tree, a 32-node tree (the app's and the CLI's largest), a chain as a tree
    "mixed": [-1, -1, 0, 0, 2, 1, 4, 4, 6, -1, 9, 3],
    "wide": _wide_tree(32, seed=3),
    "chain": [-1, 0, 1, 2, 3],
}


def _ids(vocab: int, count: int, seed: int) -> list[int]:
    return [(7919 * i + 31 * seed + 13) % vocab for i in range(count)]


@torch.inference_mode()
def _step_logits(model, prefix: list[int], tokens: list[int]) -> torch.Tensor:
    """(len(tokens), V) logits of one-token steps over ``tokens`` after a fresh cache has read ``prefix``."""
    cache = new_cache(model)
    forward_logits(model, prefix, cache, 1)
    return torch.cat([forward_logits(model, [t], cache, 1) for t in tokens])


def _tree_gap(model, vocab: int, context: list[int], parents: list[int], tokens: list[int]) -> float:
    """Largest |logit difference| between a tree pass over [last context token] + ``tokens`` and the one-token steps
    along each leaf's path (the root, then the path's nodes), every node of the tree compared."""
    cache = new_cache(model)
    forward_logits(model, context[:-1], cache, 1)
    ctx = cache_length(cache)
    tree, _ = forward_logits_features(model, [context[-1]] + tokens, cache, len(tokens) + 1,
                                      attention_mask=tree_attention_mask(parents, ctx),
                                      position_ids=tree_positions(parents, ctx))
    worst = 0.0
    for leaf in (i for i in range(len(parents)) if i not in parents):
        path = ancestors(parents, leaf)
        steps = _step_logits(model, context[:-1], [context[-1]] + [tokens[a] for a in path])
        worst = max(worst, float((tree[[0] + [a + 1 for a in path]] - steps).abs().max()))
    return worst


@pytest.mark.kernels
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tree_pass_computes_each_node_as_the_steps_along_its_path(tiny_target, fmt, threads):
    # bfloat16's linears (oneDNN) compute a row of a many-row input as a one-row input does only for some row counts
    # (on the tiny target's 64 -> 64 projection 27 and 29 rows differ here), so its trees stay small
    model, vocab = with_weights(tiny_target, fmt).model, tiny_target.vocab_size
    trees = {name: parents for name, parents in TREES.items() if fmt != "bfloat16" or len(parents) < 16}
    with torch_threads(threads):
        for name, parents in trees.items():
            for length in (5, 23, 40):
                tokens = _ids(vocab, len(parents), seed=length)[::-1]
                assert _tree_gap(model, vocab, _ids(vocab, length, seed=1), parents, tokens) == 0.0, (name, length)


def test_row_keys_gathers_each_nodes_context_ancestors_and_itself():
    parents = TREES["mixed"]
    mask = tree_attention_mask(parents, context_len=4)
    n, length = mask.shape[-2:]
    rows = attention._row_keys(mask, 1, n, length)[0]
    assert rows[0] == slice(0, 5) and rows[1] == slice(0, 6)  # the root; node 0 right after it: views
    assert rows[6].indices.tolist() == [0, 1, 2, 3, 4] + [5 + a for a in ancestors(parents, 5)]  # root, 1, 5
    assert rows[6].lead == 5  # the context and the root: copied once for every node
    assert rows[5].indices.tolist() == [0, 1, 2, 3, 4, 5, 7, 9] and rows[5].lead == 6  # node 4 under 2 under 0
    additive = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    assert all(torch.equal(a.indices, b.indices) and a.lead == b.lead if isinstance(a, attention.Gather) else a == b
               for a, b in zip(attention._row_keys(additive, 1, n, length)[0], rows))
    lengths = torch.tensor([8, 6, 3])[:, None]  # a ragged batch: each row sees its own cache and new tokens
    ragged = (torch.arange(10)[None, None, :] <= (lengths + torch.arange(2)[None, :])[:, :, None])[:, None]
    assert attention._row_keys(ragged, 3, 2, 10) == [[slice(0, 9), slice(0, 10)], [slice(0, 7), slice(0, 8)],
                                                     [slice(0, 4), slice(0, 5)]]
    empty = mask.clone()
    empty[..., 3, :] = False
    assert attention._row_keys(empty, 1, n, length) is None  # a row that sees nothing: the one-call path
    big = torch.ones(1, 1, attention.ROW_EXACT_ROWS + 1, 80, dtype=torch.bool)
    assert attention._row_keys(big, 1, attention.ROW_EXACT_ROWS + 1, 80) is None  # too many rows
    assert attention._row_keys(None, 1, 1, 7) is None  # a one-token step stays as it is
    assert attention._row_keys(None, 1, attention.ROW_EXACT_MAX + 1, 90) is None  # a long prefill chunk too


def _run(target, prompt, config, drafter=None):
    events = standard_generate(target, prompt, config) if drafter is None else \
        speculative_generate(target, drafter, prompt, config)
    return collect(events, target.tokenizer, prompt)


@pytest.mark.kernels
@pytest.mark.parametrize("threads", [1, 2])
def test_tree_drafters_and_lookahead_keep_standard_decodings_ids_in_int4(tiny_target, threads):
    int4 = with_weights(tiny_target, "int4")
    vocab = torch.arange(0, tiny_target.vocab_size, 2)
    eagle, medusa = _eagle(int4, vocab), _medusa(int4, vocab=vocab)
    drafters = {"eagle:tree": lambda: EagleDrafter(int4.model, eagle, TreeSettings(max_nodes=10)),
                "medusa:tree": lambda: MedusaDrafter(int4.model, medusa, TreeSettings(max_nodes=10)),
                "lookahead": lambda: LookaheadDrafter(3, 3, 2)}
    config = GenerationConfig(max_new_tokens=30, k=4)
    with torch_threads(threads):
        for label, prompt in _prompts(tiny_target.tokenizer).items():
            base = _run(int4, prompt, config).token_ids
            for name, make in drafters.items():
                spec = _run(int4, prompt, config, make())
                assert spec.token_ids == base, (name, label)
                if name != "lookahead":
                    assert any(e.tree is not None and len(e.tree.tokens) > 1 for e in spec.events[1:]), name


@torch.inference_mode()
def _batch_gap(model, prompts: list[list[int]], drafts: list[list[int]]) -> float:
    """Largest |logit difference| between one batch pass over each row's ``drafts`` (rows of different cached
    lengths, the engine's ragged mask) and each prompt's own one-token steps over them."""
    lengths, n = [len(p) for p in prompts], len(drafts[0])
    singles = [new_cache(model) for _ in prompts]  # each prompt read alone, as the engine's batch does here
    for prompt, single in zip(prompts, singles):
        forward_logits(model, prompt, single, 1)
    cache = new_cache(model)
    cache.stack_rows(singles)
    assert cache.row_lengths() == lengths
    starts, offsets = torch.tensor(lengths)[:, None], torch.arange(n)[None, :]
    mask = (torch.arange(max(lengths) + n)[None, None, :] <= (starts + offsets)[:, :, None])[:, None]
    logits, _ = forward_rows(model, drafts, cache, n, attention_mask=mask, position_ids=starts + offsets)
    worst = 0.0
    for row, prompt in enumerate(prompts):
        worst = max(worst, float((logits[row] - _step_logits(model, prompt, drafts[row])).abs().max()))
    return worst


@pytest.mark.kernels
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_batch_pass_computes_each_row_as_its_own_runs_steps(tiny_target, fmt, threads):
    model, vocab = with_weights(tiny_target, fmt).model, tiny_target.vocab_size
    with torch_threads(threads):
        for lengths in ([7, 12, 9], [3, 20], [5, 16, 11, 14], [40, 120, 75]):
            prompts = [_ids(vocab, length, seed=row) for row, length in enumerate(lengths)]
            drafts = [_ids(vocab, 5, seed=40 + row) for row in range(len(lengths))]
            assert _batch_gap(model, prompts, drafts) == 0.0, lengths


@pytest.mark.kernels
def test_a_batch_keeps_each_rows_standard_decoding_ids_in_int4(tiny_target):
    int4 = with_weights(tiny_target, "int4")
    normal = _prompts(tiny_target.tokenizer)["normal"]
    long = tiny_target.tokenizer.encode(" ".join(["the river runs past old stone bridges and quiet farms"] * 20),
                                        add_special_tokens=False)[:200]
    prompts = [normal[:1], normal, long]  # the batch reads each prompt alone (Batch._prefill_each), then together
    config = GenerationConfig(max_new_tokens=24, k=4)
    assert row_exact(int4.model) and not row_exact(tiny_target.model)  # float32 batches read prompts together
    with torch_threads(2):
        for drafters in (None, [NgramDrafter() for _ in prompts]):
            rows: dict[int, list[int]] = {}
            for event in generate_batch(int4, prompts, config, drafters=drafters):
                if isinstance(event, PassEvent):
                    rows.setdefault(event.row, []).extend(event.emitted_ids)
            for row, prompt in enumerate(prompts):
                assert tuple(rows[row]) == _run(int4, prompt, config).token_ids, (drafters is None, row)
