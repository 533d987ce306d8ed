"""Drafters built on trained heads that read the target's features: EAGLE-style and Medusa (see :mod:`specviz.drafters.networks`).

Both need the target's final features of every committed position; the engine passes the new ones in
``DraftContext.target_hidden`` (``needs_hidden = True``): after the prefill, one row per prompt position; after a
pass, one row for the fed root and each accepted draft token. So before every ``propose`` the drafter holds
features f_0 .. f_{C-2} for a committed sequence of C tokens (the last committed token is not fed yet). An
EAGLE-3 head (Li et al. 2025) asks for three of the target's hidden states instead (``needs_hidden`` is then a
tuple of hidden-state indices, and the rows are those states side by side); the target's forwards return them
at no extra cost (the hidden states exist anyway), and other drafters still get the final features alone.

Greedy runs may draft a *tree* (:class:`TreeSettings`); sampling runs always draft a chain with the exact
distributions the tokens were drawn from (the engine's rejection sampling then keeps the target's distribution).

**Confidence gate** (``min_confidence``, a dynamic draft length): a chain stops before the first token whose
cumulative draft probability (the product of the draft's probabilities of the tokens so far, its own estimate of
the chance that the whole chain is accepted) falls below the threshold, and a tree keeps only nodes above it; so
a pass where the head is unsure drafts fewer tokens, down to none (a plain one-token step). The draft length is
decided by the drafter alone, before the target sees anything, so greedy output and the sampling distribution
stay exact. The same idea as the confidence threshold of Hugging Face's assisted generation and of EAGLE-2's
confidence-ranked trees (Li et al. 2024).

**Lookup first** (``lookup = True``): before the head drafts, n-gram prompt lookup (:class:`NgramDrafter`, here
with suffixes of 2-3 tokens) looks for an earlier occurrence of the text's last tokens; when it finds one, the pass
verifies the copied continuation (a chain) instead of the head's guess, and the head only takes in the new
features. Copying wins where the answer repeats the prompt (summaries, questions over a context, code edits),
the head where it does not. With a greedy tree the copy does not replace the head: it is grafted into the head's
tree as one whole branch (sharing the nodes the head already guessed), kept whatever the head thinks of it, and
the head's best candidates fill the rest of the same ``max_nodes``, so a pass whose copy goes wrong can still
accept the head's guess. The choice depends on the committed text alone, so exactness is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specviz.core.drafting import Draft, DraftContext, DrafterBase
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.networks import DraftLMHead, EagleHead, MedusaHeads, follow_target
from specviz.core.verify import process_logits, restrict_vocab, sample
from specviz.runtime.weights.formats import head_weight, weights_of


DEFAULT_TREE_NODES = 10  # the tree size the arena's and the bench's "eagle:tree" / "medusa:tree" use
DEFAULT_MIN_CONFIDENCE = 0.15  # the confidence gate's default (measured best for the shipped heads; 0 = always k)
LOOKUP_NGRAM = (2, 3)  # suffix lengths (min, max) "lookup first" matches: a one-token match is too weak to beat the head


@dataclass(frozen=True)
class TreeSettings:
    """Shape of a greedy draft tree.

    Attributes:
        max_nodes: nodes kept in the final tree (the verification forward covers max_nodes + 1 tokens).
        branch: candidates taken per expanded node (its top-``branch`` tokens).
        width: nodes expanded per depth (the best by cumulative draft log-probability).
    Depth is the pass's k. The final tree keeps the ``max_nodes`` nodes with the highest cumulative draft
    log-probability (every node's ancestors are kept too), as EAGLE-2 re-ranks its dynamic tree.
    """

    max_nodes: int = DEFAULT_TREE_NODES
    branch: int = 3
    width: int = 3

    def __post_init__(self) -> None:
        if self.max_nodes < 1 or self.branch < 1 or self.width < 1:
            raise ValueError("tree settings must be positive")


@dataclass
class _Node:
    token: int
    parent: int  # index into the node list, -1 = root
    logp: float  # cumulative draft log-probability
    depth: int
    feat_in: torch.Tensor | None = None  # the parent's predicted feature (EAGLE input)


def _graft(nodes: list[_Node], copied: list[int]) -> list[int]:
    """Add a copied chain (token ids, depth 1..m) to a tree's ``nodes`` in place, sharing the nodes the tree
    already has on its path; returns the m node indices of the chain, parents first."""
    path, parent = [], -1
    for depth, token in enumerate(copied, 1):
        hit = next((i for i, n in enumerate(nodes) if n.parent == parent and n.token == token), None)
        if hit is None:
            nodes.append(_Node(int(token), parent, nodes[parent].logp if parent >= 0 else 0.0, depth))
            hit = len(nodes) - 1
        path.append(hit)
        parent = hit
    return path


def _select_tree(nodes: list[_Node], max_nodes: int, min_confidence: float = 0.0,
                 pinned: list[int] = ()) -> Draft:
    """The best ``max_nodes`` nodes by cumulative log-prob (ancestors included), topologically ordered with the
    better child first; nodes whose cumulative probability is below ``min_confidence`` are left out (a child's is
    never above its parent's, so the kept nodes still form a tree; none left is an empty draft). ``pinned``
    (a path from the root, e.g. a copied chain) is kept whatever its draft probability, counts in ``max_nodes``,
    comes first at its depth and has draft probability 1 (a copy is certain, as n-gram lookup's chains are)."""
    floor = math.log(min_confidence) if min_confidence > 0 else -math.inf
    order = sorted((i for i in range(len(nodes)) if nodes[i].logp >= floor), key=lambda i: -nodes[i].logp)
    keep: set[int] = set(pinned)
    for i in order:
        if len(keep) >= max_nodes:
            break
        chain = []
        j = i
        while j >= 0 and j not in keep:
            chain.append(j)
            j = nodes[j].parent
        if len(keep) + len(chain) > max_nodes:
            continue
        keep.update(chain)
    if not keep:
        return Draft([], [], None)
    first = set(pinned)
    kept = sorted(keep, key=lambda i: (nodes[i].depth, i not in first, -nodes[i].logp))
    new_index = {old: new for new, old in enumerate(kept)}

    def prob(i: int) -> float:  # a copy is drafted for sure, as lookup's chains are
        return 1.0 if i in first else math.exp(nodes[i].logp - (nodes[nodes[i].parent].logp if nodes[i].parent >= 0
                                                                 else 0.0))

    return Draft(
        token_ids=[nodes[i].token for i in kept],
        token_probs=[prob(i) for i in kept],
        parents=[new_index[nodes[i].parent] if nodes[i].parent >= 0 else -1 for i in kept],
        source="lookup" if pinned else None,
        copied=tuple(new_index[i] for i in pinned),
    )


def _weights_of(head: torch.nn.Module) -> str:
    """"int8" for a head loaded with int8 weights (:func:`~specviz.drafters.networks.load_heads`), else "float";
    the draft LM head follows it."""
    return "int8" if weights_of(head) == "int8" else "float"


class _FeatureDrafter(DrafterBase):
    """Shared bookkeeping: the target features received so far."""

    needs_hidden = True
    weights = "float"  # the heads' and the draft LM head's weights: "int8" when the head was loaded so (HEAD_WEIGHTS)

    def __init__(self, target_model: torch.nn.Module, vocab_ids: torch.Tensor, tree: TreeSettings | None,
                 min_confidence: float = DEFAULT_MIN_CONFIDENCE, lookup: bool = False) -> None:
        if not 0.0 <= min_confidence < 1.0:
            raise ValueError(f"the draft confidence threshold must be in [0, 1), got {min_confidence}")
        self.min_confidence = float(min_confidence)
        self.lookup = NgramDrafter(min_ngram=LOOKUP_NGRAM[0], max_ngram=LOOKUP_NGRAM[1]) if lookup else None
        self.copied_passes = 0  # passes of this run that verified a copied continuation instead of the head's draft
        self.embed = target_model.get_input_embeddings()
        self.lm = DraftLMHead(head_weight(target_model), vocab_ids if vocab_ids.numel() else None, self.weights)
        self.tree = tree
        self._feats: torch.Tensor | None = None

    def _absorb(self, ctx: DraftContext) -> torch.Tensor:
        if ctx.target_hidden is not None:
            new = ctx.target_hidden.detach()
            self._feats = new if self._feats is None else torch.cat([self._feats, new])
        have = 0 if self._feats is None else self._feats.shape[0]
        if have != len(ctx.committed_ids) - 1:
            raise RuntimeError(f"{self.name} has target features for {have} positions but needs "
                               f"{len(ctx.committed_ids) - 1}; is the engine passing target_hidden?")
        return self._feats

    def _copy(self, ctx: DraftContext) -> Draft | None:
        """With lookup first: the continuation of the latest earlier match of the text's last 2-3 tokens, else
        None. Counts the pass as copied; takes in no features (the caller does, once per pass)."""
        if self.lookup is None:
            return None
        draft = self.lookup.propose(ctx)
        if not draft.token_ids:
            return None
        self.copied_passes += 1
        draft.source = "lookup"
        return draft

    def _grafts(self, ctx: DraftContext) -> bool:
        """True when this pass drafts a greedy tree, into which a copied chain is grafted (lookup first)."""
        return self.tree is not None and ctx.sampling.greedy

    def _choose(self, h: torch.Tensor, ctx: DraftContext, drafted: list[int] = ()) -> tuple[int, float,
                                                                                          torch.Tensor | None]:
        """One token from feature h (H,) after ``drafted`` (this pass's tokens so far): greedy argmax over the
        draft vocabulary, or a sample; with the run's logits processors on, over the processed full logits."""
        if ctx.sampling.greedy and not ctx.sampling.processed:
            sub = self.lm.subset_logits(h)
            best = sub.argmax()  # a 0-dim index on the head's device
            prob = float(torch.softmax(sub.float(), -1)[best])
            return int(self.lm.to_token_ids(best)), prob, None
        logits = ctx.processed(restrict_vocab(self.lm.full_logits(h).float(), ctx.vocab_size), list(drafted))
        probs = process_logits(logits[None], ctx.sampling)[0]
        if ctx.sampling.greedy:
            best = int(logits.argmax())
            return best, float(probs[best]), None
        token = sample(probs, ctx.generator)
        return token, float(probs[token]), probs

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Nothing to roll back: draft-time state is rebuilt from committed features at the next propose."""


class EagleDrafter(_FeatureDrafter):
    """Drafting with an :class:`~specviz.drafters.networks.EagleHead` (EAGLE, Li et al. 2024; EAGLE-3, Li et al.
    2025, for a head with ``feature_layers``), chain or greedy tree.

    The head keeps its own KV cache of entries built from *true* target features (positions 1..C-1, entry j
    from (f_{j-1}, x_j)); each ``propose`` first adds the newly committed positions in one head forward, then
    drafts on its own predicted features. Draft-time entries are dropped at the next ``propose``.

    Cost per drafted token: one head layer (~4M parameters for SmolLM2) plus the draft LM head (8192 rows).
    """

    def __init__(self, target_model: torch.nn.Module, head: EagleHead, tree: TreeSettings | None = None,
                 name: str = "EAGLE head", min_confidence: float = DEFAULT_MIN_CONFIDENCE, lookup: bool = False) -> None:
        self.weights = _weights_of(head)
        super().__init__(target_model, head.vocab_ids, tree, min_confidence, lookup)
        self.head = follow_target(head, target_model)  # the target's device and dtype (a no-op after load_heads)
        self.needs_hidden = head.feature_request  # True, or the hidden states an EAGLE-3 head fuses
        self.name = name + (f" (tree of {tree.max_nodes})" if tree else "") + (" + lookup" if lookup else "")
        self.reset([])

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a new run (no features, empty head cache)."""
        self._feats = None
        self.copied_passes = 0
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None
        self._last: torch.Tensor | None = None

    @property
    def cache_len(self) -> int:
        """Entries in the head's KV cache built from committed positions."""
        return 0 if self._keys is None else int(self._keys.shape[2])

    def _emb(self, tokens: list[int]) -> torch.Tensor:
        return self.embed(torch.tensor(tokens, dtype=torch.long, device=self.embed.weight.device))

    @torch.inference_mode()
    def _catch_up(self, ctx: DraftContext) -> None:
        feats = self._absorb(ctx)
        committed = ctx.committed_ids
        start = self.cache_len  # entries for positions 1..start exist
        end = len(committed) - 1  # need entries up to position C-1
        if start >= end:  # nothing new committed since the last propose: the last prediction still holds
            return
        positions = torch.arange(start + 1, end + 1, device=feats.device)
        past = (self._keys, self._values) if self._keys is not None else None
        out, (k, v) = self.head(self.head.take_in(feats[start:end])[None], self._emb(committed[start + 1:end + 1])[None],
                                positions, past)
        self._keys = k if past is None else torch.cat([past[0], k], dim=2)
        self._values = v if past is None else torch.cat([past[1], v], dim=2)
        self._last = out[0, -1]

    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        """Draft up to ``ctx.k`` tokens: a chain, or in greedy mode with tree settings a tree of depth k (with
        lookup first, a copied chain when the text's last tokens occurred before; with a tree, that copy grafted
        into the tree as one branch)."""
        copied = self._copy(ctx)
        if copied is not None and not self._grafts(ctx):
            self._absorb(ctx)  # the head only takes in this pass's features
            return copied
        self._catch_up(ctx)
        if self._grafts(ctx):
            return self._propose_tree(ctx, copied.token_ids if copied else [])
        pos = len(ctx.committed_ids) - 1
        keys, values, h = self._keys, self._values, self._last
        ids, probs, rows = [], [], []
        confidence = 1.0
        for i in range(ctx.k):
            token, prob, row = self._choose(self.head.readout(h), ctx, ids)
            confidence *= prob
            if confidence < self.min_confidence:  # the gate: the rest of the chain is unlikely to be accepted
                break
            ids.append(token)
            probs.append(prob)
            if row is not None:
                rows.append(row)
            if i + 1 < ctx.k:
                pos += 1
                out, (k, v) = self.head(h[None, None], self._emb([token])[None], torch.tensor([pos], device=h.device),
                                        (keys, values))
                keys, values, h = torch.cat([keys, k], 2), torch.cat([values, v], 2), out[0, 0]
        return Draft(ids, probs, torch.stack(rows) if rows else None)

    def _propose_tree(self, ctx: DraftContext, copied: list[int]) -> Draft:
        tree = self.tree
        root_pos = len(ctx.committed_ids) - 1
        nodes: list[_Node] = []

        def add_children(parent: int, h: torch.Tensor, base_logp: float, depth: int) -> None:
            logp = torch.log_softmax(self.lm.subset_logits(self.head.readout(h)).float(), -1)
            top = torch.topk(logp, tree.branch)
            tokens = self.lm.to_token_ids(top.indices).tolist()
            for token, lp in zip(tokens, top.values.tolist()):
                nodes.append(_Node(int(token), parent, base_logp + lp, depth, h))

        add_children(-1, self._last, 0.0, 1)
        frontier = list(range(len(nodes)))
        fed: list[int] = []  # node index of each draft-time head entry, in order
        keys, values = self._keys, self._values
        stable = keys.shape[2]
        for depth in range(2, ctx.k + 1):
            expand = sorted(frontier, key=lambda i: -nodes[i].logp)[: tree.width]
            mask = torch.zeros(len(expand), stable + len(fed) + len(expand), dtype=torch.bool, device=keys.device)
            mask[:, :stable] = True
            for row, i in enumerate(expand):
                mask[row, stable + len(fed) + row] = True
                j = nodes[i].parent
                while j >= 0:
                    mask[row, stable + fed.index(j)] = True
                    j = nodes[j].parent
            feats_in = torch.stack([nodes[i].feat_in for i in expand])[None]
            embeds = self._emb([nodes[i].token for i in expand])[None]
            positions = torch.full((len(expand),), root_pos + depth - 1, device=keys.device)
            out, (k, v) = self.head(feats_in, embeds, positions, (keys, values), mask[None, None])
            keys, values = torch.cat([keys, k], 2), torch.cat([values, v], 2)
            fed.extend(expand)
            frontier = []
            for row, i in enumerate(expand):
                first = len(nodes)
                add_children(i, out[0, row], nodes[i].logp, depth)
                frontier.extend(range(first, len(nodes)))
        return _select_tree(nodes, tree.max_nodes, self.min_confidence, _graft(nodes, copied[: tree.max_nodes]))


class MedusaDrafter(_FeatureDrafter):
    """Drafting with :class:`~specviz.drafters.networks.MedusaHeads` (Medusa, Cai et al. 2024), chain or greedy tree.

    From the feature of the last position the target processed (f_{C-2}), head i proposes the token at
    committed position C+i (the target's own token at C-1 is already committed). One forward of all heads per
    pass; a chain has at most ``num_heads`` tokens. A tree combines each head's top candidates (a child's token
    does not depend on its parent's, as the heads see only f_{C-2}).
    """

    def __init__(self, target_model: torch.nn.Module, heads: MedusaHeads, tree: TreeSettings | None = None,
                 name: str = "Medusa heads", min_confidence: float = DEFAULT_MIN_CONFIDENCE, lookup: bool = False) -> None:
        self.weights = _weights_of(heads)
        super().__init__(target_model, heads.vocab_ids, tree, min_confidence, lookup)
        self.heads = follow_target(heads, target_model)  # the target's device and dtype (a no-op after load_heads)
        self.name = name + (f" (tree of {tree.max_nodes})" if tree else "") + (" + lookup" if lookup else "")
        self.reset([])

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a new run."""
        self._feats = None
        self.copied_passes = 0

    @property
    def cache_len(self) -> None:
        """Medusa heads keep no cache."""
        return None

    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        """Draft min(k, num_heads) tokens (chain), or in greedy mode with tree settings a tree of that depth (with
        lookup first, a copied chain of up to k tokens when the text's last tokens occurred before; with a tree,
        that copy grafted into the tree as one branch, up to k deep)."""
        copied = self._copy(ctx)
        feats = self._absorb(ctx)
        if copied is not None and not self._grafts(ctx):
            return copied
        outs = self.heads(feats[-1])  # (num_heads, H)
        depth = min(ctx.k, self.heads.num_heads)
        if self._grafts(ctx):
            return self._propose_tree(outs, depth, copied.token_ids if copied else [])
        if ctx.sampling.greedy and not ctx.sampling.processed:  # all heads in one matrix product
            probs_sub = torch.softmax(self.lm.subset_logits(outs[:depth]).float(), -1)
            best = probs_sub.max(-1)
            tokens, probs = self.lm.to_token_ids(best.indices).tolist(), best.values.tolist()
            keep, confidence = 0, 1.0
            while keep < depth and confidence * probs[keep] >= self.min_confidence:
                confidence *= probs[keep]
                keep += 1
            return Draft(tokens[:keep], probs[:keep], None)
        ids, probs, rows = [], [], []
        confidence = 1.0
        for i in range(depth):
            token, prob, row = self._choose(outs[i], ctx, ids)
            confidence *= prob
            if confidence < self.min_confidence:
                break
            ids.append(token)
            probs.append(prob)
            if row is not None:
                rows.append(row)
        return Draft(ids, probs, torch.stack(rows) if rows else None)

    def _propose_tree(self, outs: torch.Tensor, depth: int, copied: list[int]) -> Draft:
        tree = self.tree
        logp = torch.log_softmax(self.lm.subset_logits(outs[:depth]).float(), -1)
        top = torch.topk(logp, tree.branch, dim=-1)
        tokens = self.lm.to_token_ids(top.indices).tolist()
        values = top.values.tolist()
        nodes: list[_Node] = [_Node(int(t), -1, lp, 1) for t, lp in zip(tokens[0], values[0])]
        frontier = list(range(len(nodes)))
        for d in range(1, depth):
            expand = sorted(frontier, key=lambda i: -nodes[i].logp)[: tree.width]
            frontier = []
            for i in expand:
                for t, lp in zip(tokens[d], values[d]):
                    frontier.append(len(nodes))
                    nodes.append(_Node(int(t), i, nodes[i].logp + lp, d + 1))
        return _select_tree(nodes, tree.max_nodes, self.min_confidence, _graft(nodes, copied[: tree.max_nodes]))
