"""Token trees: several draft continuations verified in one target forward (greedy only).

A tree draft is a list of N nodes, each a token with the index of its parent node (-1 = the root, which is the
last committed token). Nodes are in topological order (a parent comes before its children). The target runs
once over [root] + nodes with a *tree attention mask*: every node attends to the whole committed context, the
root, its ancestors and itself, and sits at position ``root_position + depth``. The greedy walk then follows,
from the root, the child whose token equals the target's argmax, as far as it goes; the target's argmax at
the last node reached is the pass's own token (bonus if the walk reached a leaf, recovered otherwise). That is
exactly the output of standard greedy decoding, so trees keep greedy exactness. (Sampling from a tree needs a
different acceptance rule, e.g. SpecInfer's multi-candidate rejection sampling; specviz drafts a chain when
sampling.) References: SpecInfer (Miao et al. 2024), Medusa (Cai et al. 2024), EAGLE-2 (Li et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def check_parents(parents: list[int]) -> None:
    """Raise ValueError unless ``parents`` is a topologically ordered forest under the root (-1)."""
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"tree node {i} has parent {p}; parents must come earlier (or be -1, the root)")


def depths(parents: list[int]) -> list[int]:
    """Depth of each node (a child of the root has depth 1)."""
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def ancestors(parents: list[int], node: int) -> list[int]:
    """The nodes from the root's child down to ``node`` (inclusive), in order."""
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


def tree_attention_mask(parents: list[int], context_len: int, device=None) -> torch.Tensor:
    """Boolean attention mask for a target forward over [root] + N tree nodes after ``context_len`` cached positions.

    Returns:
        (1, 1, N+1, context_len + N + 1) bool, True where a query may attend: row 0 is the root (the context and
        itself), row i+1 is node i (the context, the root, its ancestors and itself).
    """
    check_parents(parents)
    n = len(parents)
    mask = torch.zeros(n + 1, context_len + n + 1, dtype=torch.bool, device=device)
    mask[:, : context_len + 1] = True
    for i in range(n):
        for a in ancestors(parents, i):
            mask[i + 1, context_len + 1 + a] = True
    return mask[None, None]


def tree_positions(parents: list[int], root_position: int, device=None) -> torch.Tensor:
    """(1, N+1) int64 positions of [root] + nodes: the root at ``root_position``, a node at root + depth."""
    return torch.tensor([[root_position] + [root_position + d for d in depths(parents)]], dtype=torch.long,
                        device=device)


@dataclass(frozen=True)
class TreeVerdict:
    """Result of :func:`verify_tree_greedy`.

    Attributes:
        path: accepted node indices, root's child first (empty when the first level missed).
        next_id: the target's argmax after the last accepted node (the pass's own token).
        next_kind: "bonus" when the walk ended at a leaf, "recovered" otherwise.
        shown: a chain to display: the accepted path, then (if the walk stopped at a node with children) that
            node's first child, the draft's best guess that the target rejected.
    """

    path: tuple[int, ...]
    next_id: int
    next_kind: str
    shown: tuple[int, ...]


def verify_tree_greedy(token_ids: list[int], parents: list[int], target_logits: torch.Tensor) -> TreeVerdict:
    """Greedy tree verification.

    Args:
        token_ids: N node tokens.
        parents: N parent indices (-1 = root), topologically ordered.
        target_logits: (N+1, V) target logits for [root] + nodes (row 0 predicts the root's next token).

    Returns:
        :class:`TreeVerdict` (the accepted path is the longest one that standard greedy decoding would emit).
    """
    check_parents(parents)
    top = target_logits.argmax(dim=-1).tolist()
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    path: list[int] = []
    node = -1
    while True:
        want = top[node + 1]
        match = next((c for c in children.get(node, []) if token_ids[c] == want), None)
        if match is None:
            break
        path.append(match)
        node = match
    kids = children.get(node, [])
    shown = tuple(path) + ((kids[0],) if kids else ())
    return TreeVerdict(tuple(path), int(top[node + 1]), "recovered" if kids else "bonus", shown)
