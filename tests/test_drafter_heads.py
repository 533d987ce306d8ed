"""EAGLE / Medusa heads and tree drafting on the tiny target: tree masks, exactness, caches, files, sampling."""

from __future__ import annotations

import math
import re

import pytest
import torch

from specviz.core.drafting import Draft, DraftContext
from specviz.drafters.heads import EagleDrafter, MedusaDrafter, TreeSettings
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.registry import VariantKey, make_drafter, split_variant
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.drafters.networks import (EagleHead, HeadsError, MedusaHeads, fusion_layers, load_heads, new_eagle_head,
                           new_medusa_heads, read_metadata, save_heads)
from specviz.core.kv import cache_length, forward_logits, forward_logits_features, keep_positions, new_cache
from specviz.core.tree import ancestors, depths, tree_attention_mask, tree_positions, verify_tree_greedy
from float_tolerance import assert_within, model_tolerance
from test_engine import _chi_square, _prompts


def _run(target, prompt, cfg, drafter=None):
    gen = standard_generate(target, prompt, cfg) if drafter is None else speculative_generate(target, drafter, prompt, cfg)
    return collect(gen, target.tokenizer, prompt)


def _medusa(target, seed=0, vocab=None):
    heads = new_medusa_heads(target.model, num_heads=4, vocab_ids=vocab)
    torch.manual_seed(seed)
    for block in heads.blocks:  # random, not zero, so heads disagree with each other
        torch.nn.init.normal_(block.weight, std=0.05)
    return heads.eval().requires_grad_(False)


def _eagle(target, vocab=None, eagle3=False, extra_layers=0):
    """A random EAGLE-1 head, or with ``eagle3`` an EAGLE-3 head fusing three of the target's hidden states;
    ``extra_layers`` decoder layers after the first."""
    layers = fusion_layers(target.model.config.num_hidden_layers) if eagle3 else ()
    return new_eagle_head(target.model, vocab_ids=vocab, feature_layers=layers,
                          extra_layers=extra_layers).eval().requires_grad_(False)


def _eagle_kind(target, kind, vocab=None):
    """A random head of an EAGLE ``kind``: "eagle", "eagle3" or "eagle-deep" (EAGLE-1 with two more layers)."""
    return _eagle(target, vocab, kind == "eagle3", 2 if kind == "eagle-deep" else 0)


def _head_and_tree(target, kind, tree_nodes):
    """A random head of ``kind`` over a draft vocabulary of the even ids, and tree settings (None: a chain)."""
    vocab = torch.arange(0, target.vocab_size, 2)
    head = _eagle(target, vocab) if kind == "eagle" else _medusa(target, vocab=vocab)
    return head, TreeSettings(max_nodes=tree_nodes) if tree_nodes else None


# ------------------------------------------------------------------------------------------------ tree helpers

def test_tree_mask_positions_and_paths():
    parents = [-1, -1, 0, 0, 2]  # two roots' children; node 4 under 2 under 0
    assert depths(parents) == [1, 1, 2, 2, 3]
    assert ancestors(parents, 4) == [0, 2, 4]
    mask = tree_attention_mask(parents, context_len=3)[0, 0]
    assert mask.shape == (6, 9)
    assert mask[:, :4].all()  # context and root for everyone
    assert mask[5].tolist() == [True] * 4 + [True, False, True, False, True]  # node 4 sees 0, 2, itself
    assert mask[2].tolist() == [True] * 4 + [False, True, False, False, False]  # node 1 sees only itself
    assert tree_positions(parents, 3).tolist() == [[3, 4, 4, 5, 5, 6]]
    with pytest.raises(ValueError):
        tree_attention_mask([1, -1], 0)


def test_greedy_tree_walk_follows_target_argmax():
    vocab = 10
    logits = torch.zeros(6, vocab)
    parents, tokens = [-1, -1, 0, 0, 2], [5, 7, 3, 4, 9]
    for row, best in enumerate([7, 0, 0, 0, 0, 0]):  # root wants 7 -> node 1 (a leaf)
        logits[row, best] = 1.0
    v = verify_tree_greedy(tokens, parents, logits)
    assert v.path == (1,) and v.next_kind == "bonus" and v.next_id == 0 and v.shown == (1,)
    logits = torch.zeros(6, vocab)
    for row, best in enumerate([5, 4, 0, 8, 0, 0]):  # 5 -> node 0, then wants 4 -> node 3 (leaf), then 0
        logits[row, best] = 1.0
    v = verify_tree_greedy(tokens, parents, logits)
    assert v.path == (0, 3) and v.next_id == 0 and v.next_kind == "bonus"
    logits = torch.zeros(6, vocab)
    logits[0, 1] = 1.0  # nothing matches at the first level
    v = verify_tree_greedy(tokens, parents, logits)
    assert v.path == () and v.next_id == 1 and v.next_kind == "recovered" and v.shown == (0,)


@pytest.mark.kernels
def test_single_path_tree_verify_equals_chain_verify(tiny_target):
    model = tiny_target.model
    prompt = _prompts(tiny_target.tokenizer)["normal"]
    draft = prompt[2:7]
    chain_cache, tree_cache = new_cache(model), new_cache(model)
    forward_logits(model, prompt[:-1], chain_cache, 1)
    forward_logits(model, prompt[:-1], tree_cache, 1)
    chain = forward_logits(model, [prompt[-1]] + draft, chain_cache, len(draft) + 1)
    parents = list(range(-1, len(draft) - 1))
    ctx = cache_length(tree_cache)
    tree, feats = forward_logits_features(model, [prompt[-1]] + draft, tree_cache, len(draft) + 1,
                                          attention_mask=tree_attention_mask(parents, ctx),
                                          position_ids=tree_positions(parents, ctx))
    # the same numbers through a causal mask and through an explicit tree mask: the attention kernels may
    # differ, so compare within float32 rounding of the logits (float_tolerance), not with a fixed atol
    tolerance = model_tolerance(chain, model.config.hidden_size)
    assert_within(tree, chain, tolerance, "tree mask vs causal chain")
    assert torch.equal(chain.argmax(-1), tree.argmax(-1))
    assert feats.shape == (len(draft) + 1, model.config.hidden_size)
    assert_within(model.lm_head(feats).float(), tree, tolerance, "LM head on the returned features")
    v = verify_tree_greedy(draft, parents, tree)
    assert len(v.path) == sum(1 for _ in v.path)  # a path, in order
    assert list(v.path) == list(range(len(v.path)))


@pytest.mark.kernels
def test_keep_positions_matches_a_fresh_prefill(tiny_target):
    model = tiny_target.model
    prompt = _prompts(tiny_target.tokenizer)["normal"]
    parents = [-1, -1, 0, 2]
    tokens = [prompt[3], prompt[4], prompt[5], prompt[6]]
    cache = new_cache(model)
    forward_logits(model, prompt[:-1], cache, 1)
    ctx = cache_length(cache)
    forward_logits_features(model, [prompt[-1]] + tokens, cache, 5, attention_mask=tree_attention_mask(parents, ctx),
                            position_ids=tree_positions(parents, ctx))
    keep_positions(cache, list(range(ctx + 1)) + [ctx + 1 + 0, ctx + 1 + 2])  # root, node 0, node 2
    fresh = new_cache(model)
    forward_logits(model, prompt + [tokens[0], tokens[2]], fresh, 1)
    assert cache_length(cache) == cache_length(fresh) == len(prompt) + 2
    hidden = model.config.hidden_size  # keys and values are projections of the hidden state: K = hidden
    length = cache_length(cache)
    for n, (a, b) in enumerate(zip(cache.layers, fresh.layers)):  # up to 0.8 rounding units apart on AVX2
        a_keys, b_keys = a.keys[:, :, :length], b.keys[:, :, :length]  # the slabs' held positions
        a_values, b_values = a.values[:, :, :length], b.values[:, :, :length]
        assert_within(a_keys, b_keys, model_tolerance(b_keys, hidden), f"layer {n} keys")
        assert_within(a_values, b_values, model_tolerance(b_values, hidden), f"layer {n} values")
    with pytest.raises(ValueError):
        keep_positions(cache, [3, 2])


# ------------------------------------------------------------------------------------------------ exactness

class _OracleTree:
    """Builds trees that contain the target's greedy continuation on a *second* branch, with a decoy first
    child at every depth, and stops the true path at depth 3 (so walks reach inner nodes and leaves)."""

    needs_hidden = False
    name = "oracle tree"
    cache_len = None

    def __init__(self, target):
        self.target = target

    def reset(self, prompt_ids):
        pass

    def commit(self, committed_ids, num_accepted):
        pass

    def propose(self, ctx):
        ids = list(ctx.committed_ids)
        truth = []
        for _ in range(min(ctx.k, 3)):
            c = new_cache(self.target.model)
            truth.append(int(forward_logits(self.target.model, ids + truth, c, 1)[-1].argmax()))
        tokens, parents, parent = [], [], -1
        for t in truth:
            tokens += [(t + 1) % 50, t]
            parents += [parent, parent]
            parent = len(tokens) - 1
        return Draft(tokens, [0.5] * len(tokens), None, parents)


@pytest.mark.parametrize("k", [1, 4])
def test_tree_passes_accept_paths_and_keep_greedy_output(tiny_target, k):
    for label, prompt in _prompts(tiny_target.tokenizer).items():
        cfg = GenerationConfig(max_new_tokens=30, k=k)
        base = _run(tiny_target, prompt, cfg)
        spec = _run(tiny_target, prompt, cfg, _OracleTree(tiny_target))
        assert spec.token_ids == base.token_ids, label
        passes = [e for e in spec.events if e.kind == "pass"]
        assert max(e.num_accepted for e in passes) == min(k, 3)
        tree = passes[0].tree
        assert len(tree.tokens) == 2 * min(k, 3) and tree.path == (1, 3, 5)[: len(tree.path)]


@pytest.mark.parametrize("k", [1, 4, 8])
@pytest.mark.parametrize("kind", ["eagle", "eagle3", "eagle-deep", "medusa"])
@pytest.mark.parametrize("tree_nodes", [0, 6])
def test_head_drafters_keep_greedy_output(tiny_target, kind, k, tree_nodes):
    vocab = torch.arange(0, tiny_target.vocab_size, 2)  # a draft vocabulary of half the tokens
    for label, prompt in _prompts(tiny_target.tokenizer).items():
        cfg = GenerationConfig(max_new_tokens=30, k=k)
        base = _run(tiny_target, prompt, cfg)
        tree = TreeSettings(max_nodes=tree_nodes) if tree_nodes else None
        drafter = (EagleDrafter(tiny_target.model, _eagle_kind(tiny_target, kind, vocab), tree)
                   if kind.startswith("eagle") else MedusaDrafter(tiny_target.model, _medusa(tiny_target, vocab=vocab), tree))
        spec = _run(tiny_target, prompt, cfg, drafter)
        assert spec.token_ids == base.token_ids, (kind, k, tree_nodes, label)
        for e in spec.events[1:]:
            assert len(e.draft_ids) <= k
            if tree_nodes and e.draft_ids:
                assert len(e.tree.tokens) <= tree_nodes
            assert all(t % 2 == 0 for t in e.draft_ids)  # drafts come from the draft vocabulary only
        if kind.startswith("eagle"):  # head cache: one entry per committed position except the first and the last
            last = spec.events[-1]
            assert drafter.cache_len <= len(prompt) + last.num_generated - 1


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
@pytest.mark.parametrize("tree_nodes", [0, 6])
def test_confidence_gate_cuts_drafts_and_keeps_greedy_output(tiny_target, kind, tree_nodes):
    head, tree = _head_and_tree(tiny_target, kind, tree_nodes)

    def make(gate):
        cls = EagleDrafter if kind == "eagle" else MedusaDrafter
        return cls(tiny_target.model, head, tree, min_confidence=gate)

    prompt = next(iter(_prompts(tiny_target.tokenizer).values()))
    cfg = GenerationConfig(max_new_tokens=24, k=4)
    base = _run(tiny_target, prompt, cfg)
    open_run = _run(tiny_target, prompt, cfg, make(0.0))
    firsts = sorted(e.details[0].draft_prob for e in open_run.events[1:] if e.details)
    gate = firsts[len(firsts) // 2]  # about half the passes' first guesses fall below it
    for threshold in (gate, 0.999):
        spec = _run(tiny_target, prompt, cfg, make(threshold))
        assert spec.token_ids == base.token_ids, (kind, tree_nodes, threshold)
        passes = [e for e in spec.events[1:] if e.kind == "pass"]
        for e in passes:
            shown = e.tree.path if e.tree else range(len(e.draft_ids))
            confidence = math.prod(e.details[i].draft_prob for i in range(len(shown)) if i < len(e.details))
            assert confidence >= threshold * (1 - 1e-6)  # every drafted path is above the gate
        if threshold == 0.999:
            assert all(not e.draft_ids for e in passes) and len(passes) == spec.events[-1].num_generated - 1
        else:
            assert any(not e.draft_ids for e in passes) and any(e.draft_ids for e in passes)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        make(1.0)


@pytest.mark.parametrize("kind,gate", [("eagle", 0.0), ("medusa", 0.0), ("eagle", 0.05), ("eagle3", 0.0)])
def test_head_drafters_keep_the_sampling_distribution(tiny_target, kind, gate):
    vocab = torch.arange(0, tiny_target.vocab_size, 2)
    if kind.startswith("eagle"):  # the tree is ignored when sampling; the gate shortens chains by the sampled tokens' q
        head = _eagle(tiny_target, vocab, kind == "eagle3")
        make = lambda: EagleDrafter(tiny_target.model, head, TreeSettings(4), min_confidence=gate)
    else:
        heads = _medusa(tiny_target, vocab=vocab)
        make = lambda: MedusaDrafter(tiny_target.model, heads, min_confidence=gate)
    assert _chi_square(tiny_target, make, dict(temperature=1.0), n=600) > 1e-3


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
@pytest.mark.parametrize("tree_nodes", [0, 2, 6])
def test_lookup_first_copies_repeats_and_keeps_greedy_output(tiny_target, kind, tree_nodes):
    head, tree = _head_and_tree(tiny_target, kind, tree_nodes)
    cls = EagleDrafter if kind == "eagle" else MedusaDrafter
    for label, prompt in _prompts(tiny_target.tokenizer).items():
        cfg = GenerationConfig(max_new_tokens=30, k=4)
        base = _run(tiny_target, prompt, cfg)
        drafter = cls(tiny_target.model, head, tree, min_confidence=0.0, lookup=True)
        spec = _run(tiny_target, prompt, cfg, drafter)
        assert spec.token_ids == base.token_ids, (kind, tree_nodes, label)
        committed = list(prompt) + list(spec.events[0].emitted_ids)
        copied, before_last = 0, None
        for e in spec.events[1:]:
            if e.kind != "pass":
                continue
            before_last = len(committed)
            # a pass copies exactly when the last 2-3 committed tokens occurred before: then it drafts a chain
            # of what followed them (odd ids too: copies are not limited to the head's draft vocabulary)
            match = NgramDrafter(min_ngram=2, max_ngram=3).propose(DraftContext(committed, e.k, None, None))
            if match.token_ids:
                copied += 1
                assert e.draft_source == "lookup"
                if tree is None:  # the pass verifies the copy alone
                    assert list(e.draft_ids)[: len(match.token_ids)] == match.token_ids[: len(e.draft_ids)]
                    assert e.tree is None and all(e.copied_drafts)
                else:  # greedy tree: the copy is one whole branch from the root, beside the head's candidates
                    t = e.tree
                    copy = match.token_ids[:tree_nodes]  # a tree smaller than the copy keeps the copy's start
                    assert [t.tokens[i] for i in t.copied] == copy and t.parents[t.copied[0]] == -1
                    assert all(t.parents[b] == a for a, b in zip(t.copied, t.copied[1:]))
                    assert len(copy) <= t.num_nodes <= tree_nodes
                    assert e.copied_drafts == tuple(node in t.copied for node in t.shown)
            else:
                assert e.draft_source is None
            committed.extend(e.emitted_ids)
        assert drafter.copied_passes == copied
        if label == "repeated":
            assert copied > 0
        # every propose checks that the head holds features for all committed positions but the last (it raises
        # otherwise), so copied passes kept it in step; the EAGLE head's cache caught up over them too
        assert drafter._feats.shape[0] <= before_last - 1
        if kind == "eagle" and copied < len([e for e in spec.events if e.kind == "pass"]):
            assert 0 < drafter.cache_len <= drafter._feats.shape[0]


def test_a_copied_chain_is_grafted_into_the_tree_and_kept():
    from specviz.drafters.heads import _graft, _Node, _select_tree

    lp = math.log
    nodes = [_Node(10, -1, lp(0.6), 1), _Node(20, -1, lp(0.3), 1), _Node(11, 0, lp(0.3), 2), _Node(12, 0, lp(0.24), 2)]
    path = _graft(nodes, [20, 21, 22])  # 20 is the tree's node 1; 21 and 22 are new
    assert path == [1, 4, 5] and [(n.token, n.parent, n.depth) for n in nodes[4:]] == [(21, 1, 2), (22, 4, 3)]
    draft = _select_tree(nodes, max_nodes=4, min_confidence=0.5, pinned=path)
    # the copy is kept although 0.3 < 0.5, first at each depth; the one node left goes to the best other (0.6)
    assert draft.token_ids == [20, 10, 21, 22] and draft.parents == [-1, -1, 0, 2]
    # a copied node's draft probability is 1 (as a copied chain's), also where the head guessed it too (0.3)
    assert [round(p, 6) for p in draft.token_probs] == [1.0, 0.6, 1.0, 1.0] and draft.source == "lookup"
    assert draft.copied == (0, 2, 3)
    plain = _select_tree(nodes[:4], max_nodes=3)
    assert plain.token_ids == [10, 20, 11] and plain.parents == [-1, -1, 0] and plain.source is None
    assert _graft(nodes, []) == []


def test_copied_passes_say_so_in_the_pane(tiny_target):
    from app.render import Pane

    prompt = _prompts(tiny_target.tokenizer)["repeated"]
    drafter = EagleDrafter(tiny_target.model, _eagle(tiny_target), min_confidence=0.0, lookup=True)
    pane = Pane(tiny_target.tokenizer)
    copied = {}
    for event in speculative_generate(tiny_target, drafter, prompt, GenerationConfig(max_new_tokens=16, k=4)):
        pane.add(event)
        copied[event.index] = event.draft_source == "lookup"
    drafted = [t for tokens in pane.passes for t in tokens if t.kind in ("accepted", "rejected")]
    assert any(copied.values()) and drafted
    assert all(("copied by n-gram lookup" in t.title) == copied[t.pass_index] for t in drafted)
    markup = pane.html()
    assert "copied by n-gram lookup" in markup
    marked = {int(i) for i in re.findall(r'class="pass pass-copied" data-pass-index="(\d+)"', markup)}
    assert marked == {i for i, c in copied.items() if c} and markup.count('class="copied-mark"') == len(marked)


def test_lookup_first_keeps_the_sampling_distribution(tiny_target):
    vocab = torch.arange(0, tiny_target.vocab_size, 2)
    head = _eagle(tiny_target, vocab)
    normal = next(v for k, v in _prompts(tiny_target.tokenizer).items() if k == "normal")
    prompt = normal + normal[:2]  # the last two tokens occurred at the start: the first pass copies
    make = lambda: EagleDrafter(tiny_target.model, head, min_confidence=0.0, lookup=True)  # noqa: E731
    assert make().lookup.propose(DraftContext(prompt, 3, None, None)).token_ids == normal[2:5]
    assert _chi_square(tiny_target, make, dict(temperature=1.0), n=600, prompt=prompt) > 1e-3


def test_variant_keys():
    assert split_variant("eagle:tree:lookup") == VariantKey("eagle", True, True)
    assert split_variant("medusa:lookup") == VariantKey("medusa", False, True)
    assert split_variant("ngram") == VariantKey("ngram")
    for bad in ("ngram:lookup", "eagle:lookup:lookup", "eagle:fast", "nope"):
        with pytest.raises(ValueError, match="unknown drafter"):
            split_variant(bad)


# ------------------------------------------------------------------------------------------------ files

def test_head_files_round_trip_and_refuse_other_targets(tiny_target, tiny_draft, tmp_path):
    vocab = torch.arange(0, tiny_target.vocab_size, 3)
    eagle = _eagle(tiny_target, vocab)
    path = save_heads(eagle, tmp_path / "e.safetensors", tiny_target.model, {"epochs": 1})
    meta = read_metadata(path)
    assert meta["kind"] == "eagle" and meta["info"] == {"epochs": 1}
    loaded = load_heads(path, tiny_target.model, "eagle")
    assert isinstance(loaded, EagleHead) and torch.equal(loaded.vocab_ids, vocab)
    assert torch.allclose(loaded.fc.weight, eagle.fc.weight.half().float())
    with pytest.raises(HeadsError, match="another target"):
        load_heads(path, tiny_draft.model)
    with pytest.raises(HeadsError, match="not medusa"):
        load_heads(path, tiny_target.model, "medusa")
    with pytest.raises(HeadsError, match="not found"):
        load_heads(tmp_path / "missing.safetensors", tiny_target.model)
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(HeadsError):
        load_heads(tmp_path / "junk.safetensors", tiny_target.model)
    medusa_path = save_heads(_medusa(tiny_target), tmp_path / "m.safetensors", tiny_target.model)
    assert isinstance(load_heads(medusa_path, tiny_target.model), MedusaHeads)
    drafter = make_drafter("eagle", tiny_target, heads_path=str(path), tree_nodes=5)
    assert isinstance(drafter, EagleDrafter) and drafter.tree.max_nodes == 5
    with pytest.raises(HeadsError, match="No trained medusa heads"):
        make_drafter("medusa", tiny_target)


def test_eagle3_head_files_record_their_recipe_and_old_files_still_load(tiny_target, tmp_path):
    """Format 2 (EAGLE-3) files carry format, recipe and the fusion weights; format 1 files (no format key, as
    the shipped heads) load unchanged; a newer format is refused with a message."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    head = _eagle(tiny_target, torch.arange(0, tiny_target.vocab_size, 3), eagle3=True)
    path = save_heads(head, tmp_path / "e3.safetensors", tiny_target.model, {"recipe": "eagle3"})
    meta = read_metadata(path)
    assert meta["format"] == 2 and meta["recipe"] == "eagle3" and meta["kind"] == "eagle"
    assert meta["settings"]["feature_layers"] == [1, 2, 3]
    loaded = load_heads(path, tiny_target.model, "eagle")
    assert loaded.config.feature_layers == (1, 2, 3) and loaded.feature_request == (1, 2, 3)
    assert torch.equal(loaded.fuse.weight, head.fuse.weight.half().float())
    assert torch.equal(loaded.out_norm.weight, head.out_norm.weight.half().float())
    old = save_heads(_eagle(tiny_target), tmp_path / "e1.safetensors", tiny_target.model)
    with safe_open(str(old), framework="pt") as f:
        assert "format" not in f.metadata()  # format 1 files are written exactly as before
    meta1 = read_metadata(old)
    assert meta1["format"] == 1 and meta1["recipe"] == "eagle"
    assert load_heads(old, tiny_target.model).feature_request is True
    with safe_open(str(path), framework="pt") as f:
        newer = dict(f.metadata(), format="4")
    save_file(load_file(str(path)), str(tmp_path / "e9.safetensors"), metadata=newer)
    with pytest.raises(HeadsError, match="format '4'.*update specviz"):
        load_heads(tmp_path / "e9.safetensors", tiny_target.model)


def test_a_deeper_head_caches_each_layer_and_its_files_say_format_3(tiny_target, tmp_path):
    """A head of three layers keeps each layer's KV entries side by side (B, 3 x kv_heads, S, d): fed in two calls
    with the first call's entries as past, it gives what one call over all positions gives. Its file is format 3
    and loads with its layers; a one-layer file keeps its
    settings as before (no extra_layers key)."""
    head = _eagle(tiny_target, extra_layers=2)
    c = head.config
    hidden = c.hidden
    torch.manual_seed(0)
    feats, embeds = torch.randn(1, 7, hidden), torch.randn(1, 7, hidden)
    positions = torch.arange(1, 8)
    with torch.no_grad():
        whole, (k, v) = head(feats, embeds, positions)
        first, past = head(feats[:, :4], embeds[:, :4], positions[:4])
        rest, _ = head(feats[:, 4:], embeds[:, 4:], positions[4:], past)
    assert k.shape == v.shape == (1, 3 * c.kv_heads, 7, c.head_dim) and past[0].shape[2] == 4
    assert_within(torch.cat([first, rest], 1), whole, model_tolerance(whole, hidden), "split calls")
    path = save_heads(head, tmp_path / "deep.safetensors", tiny_target.model)
    meta = read_metadata(path)
    assert meta["format"] == 3 and meta["recipe"] == "eagle" and meta["settings"]["extra_layers"] == 2
    loaded = load_heads(path, tiny_target.model)
    assert loaded.config.extra_layers == 2 and len(loaded.extra) == 2
    assert torch.equal(loaded.extra[1].down_proj.weight, head.extra[1].down_proj.weight.half().float())
    one = read_metadata(save_heads(_eagle(tiny_target), tmp_path / "one.safetensors", tiny_target.model))
    assert one["format"] == 1 and "extra_layers" not in one["settings"]


def test_a_batch_reads_one_kind_of_target_features(tiny_target):
    """EAGLE-3 drafters get the fused layers' states, EAGLE-1 and Medusa the final features; one batch cannot
    mix them."""
    from specviz.core.engine import feature_request
    from specviz.core.kv import forward_logits_features, new_cache

    e1, e3 = EagleDrafter(tiny_target.model, _eagle(tiny_target)), EagleDrafter(tiny_target.model, _eagle(tiny_target, eagle3=True))
    assert feature_request([None, e1]) is True and feature_request([e3, e3]) == (1, 2, 3)
    assert feature_request([None, NgramDrafter()]) is False
    with pytest.raises(ValueError, match="different target features"):
        feature_request([e1, e3])
    ids = [5, 6, 7, 8]
    _, final = forward_logits_features(tiny_target.model, ids, new_cache(tiny_target.model), 1)
    _, fused = forward_logits_features(tiny_target.model, ids, new_cache(tiny_target.model), 1, layers=(1, 2, 3))
    with torch.no_grad():
        states = tiny_target.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    hidden = tiny_target.model.config.hidden_size
    assert final.shape == (4, hidden) and fused.shape == (4, 3 * hidden)
    for block, index in enumerate((1, 2, 3)):  # the blocks are hidden_states[1], [2], [3] side by side
        expected = states[index][0]
        assert_within(fused[:, block * hidden:(block + 1) * hidden], expected, model_tolerance(expected, hidden),
                      f"hidden state {index}")
    assert_within(final, states[-1][0], model_tolerance(states[-1][0], hidden), "final features")


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_head_drafters_run_on_a_target_in_a_weight_format(tiny_target, fmt):
    from specviz.runtime.weights import with_weights
    from specviz.runtime.weights.formats import head_weight

    formatted = with_weights(tiny_target, fmt)
    table = tiny_target.model.get_input_embeddings().weight
    if tiny_target.model.config.tie_word_embeddings:  # the formatted head is tied: drafting reads the float table
        assert head_weight(formatted.model) is table
    assert tuple(head_weight(formatted.model).shape) == tuple(table.shape)
    vocab = torch.arange(0, tiny_target.vocab_size, 2)
    prompt = next(iter(_prompts(tiny_target.tokenizer).values()))
    cfg = GenerationConfig(max_new_tokens=24, k=4)
    base = _run(formatted, prompt, cfg)
    for drafter in (EagleDrafter(formatted.model, _eagle(formatted, vocab)),
                    MedusaDrafter(formatted.model, _medusa(formatted, vocab=vocab))):
        assert _run(formatted, prompt, cfg, drafter).token_ids == base.token_ids, (fmt, type(drafter).__name__)


@pytest.mark.parametrize("kind", ["eagle", "eagle3", "eagle-deep", "medusa"])
def test_int8_head_weights_are_the_cpu_default_and_keep_greedy_output(tiny_target, tmp_path, kind):
    from specviz.runtime.weights.linears import Int8Linear

    vocab = torch.arange(0, tiny_target.vocab_size, 2)
    head = _medusa(tiny_target, vocab=vocab) if kind == "medusa" else _eagle_kind(tiny_target, kind, vocab)
    path = save_heads(head, tmp_path / "h.safetensors", tiny_target.model)
    plain = load_heads(path, tiny_target.model, weights="float")
    small = load_heads(path, tiny_target.model, weights="int8")
    # every linear in int8 (EAGLE: fc, q/k/v fused, o, gate/up fused, down, and EAGLE-3's fuse; 4 more per extra
    # layer; Medusa: 4 blocks),
    # the scales still bfloat16 after the drafter places the head (follow_target leaves a formatted head alone)
    assert not any(isinstance(m, torch.nn.Linear) for m in small.modules())
    linears = [m for m in small.modules() if isinstance(m, Int8Linear)]
    assert len(linears) == {"eagle": 5, "eagle3": 6, "eagle-deep": 13, "medusa": 4}[kind]
    base_key = "medusa" if kind == "medusa" else "eagle"
    drafter = make_drafter(base_key, tiny_target, heads_path=str(path))
    assert drafter.weights == "int8" and drafter.lm.int8 is not None and drafter.lm.weight is None  # float rows dropped
    placed = drafter.heads if kind == "medusa" else drafter.head
    assert all(m.scales.dtype == torch.bfloat16 for m in placed.modules() if isinstance(m, Int8Linear))
    float_drafter = make_drafter(base_key, tiny_target, heads_path=str(path), head_weights="float")
    assert float_drafter.weights == "float" and float_drafter.lm.int8 is None
    # the int8 head computes nearly what the float one does (int8 weights per row, bfloat16 activations)
    torch.manual_seed(0)
    hidden = tiny_target.model.config.hidden_size
    with torch.inference_mode():
        if kind == "medusa":
            x = torch.randn(3, hidden)
            want, got = plain(x), small(x)
        else:
            width = len(plain.config.feature_layers or (1,)) * hidden
            feats, embeds = torch.randn(1, 3, width), torch.randn(1, 3, hidden)
            positions = torch.arange(1, 4)
            want = plain(plain.take_in(feats), embeds, positions)[0]
            got = small(small.take_in(feats), embeds, positions)[0]
        logits_want = float_drafter.lm.subset_logits(want)
        logits_got = drafter.lm.subset_logits(got)
    assert float((got - want).norm() / want.norm()) < 0.05
    assert float((logits_got - logits_want).norm() / logits_want.norm()) < 0.05
    prompt = next(iter(_prompts(tiny_target.tokenizer).values()))
    cfg = GenerationConfig(max_new_tokens=24, k=4)
    assert _run(tiny_target, prompt, cfg, drafter).token_ids == _run(tiny_target, prompt, cfg).token_ids


def test_head_weights_setting():
    from types import SimpleNamespace

    from specviz.drafters.networks import head_weights_for

    def model_on(device):
        embedding = torch.nn.Embedding(4, 2, device=device)
        return SimpleNamespace(get_input_embeddings=lambda: embedding)

    cpu, elsewhere = model_on("cpu"), model_on("meta")
    assert [head_weights_for(cpu, w) for w in (None, "auto", "INT8", "float")] == ["int8", "int8", "int8", "float"]
    assert [head_weights_for(elsewhere, w) for w in (None, "auto", "float")] == ["float"] * 3
    with pytest.raises(HeadsError, match="CPU only"):
        head_weights_for(elsewhere, "int8")
    with pytest.raises(HeadsError, match="auto, int8 or float"):
        head_weights_for(cpu, "int4")
