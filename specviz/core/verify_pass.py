"""Phase 2 of a pass, per row: judge the draft from the target's logits over [last committed] + draft.

Three shapes, one function each, each returning an :class:`~specviz.core.rowpass.Outcome`:

- :func:`verify_chain`: a chain of m <= k tokens (m = 0 is a plain step). The textbook step: the target's
  distribution p at each of the m + 1 positions; greedy keeps the longest prefix equal to the target's argmax,
  sampling accepts token i with probability min(1, p_i / q_i) and on the first rejection draws the recovered token
  from norm(max(0, p - q)); if all m are accepted the target's row m gives a bonus token
  (:func:`specviz.core.verify.verify_greedy`, :func:`~specviz.core.verify.verify_sampling`).
- :func:`verify_tree`: a tree of candidates (greedy only), walked from the root
  (:func:`specviz.core.tree.verify_tree_greedy`).
- :func:`verify_lookahead`: a lookahead pass (Fu et al. 2024): the Jacobi step's new window level, then its
  candidate n-grams verified as chains, the longest accepted one kept.

Each row's logits are first run through the run's logits processors with the history each position sees
(:meth:`specviz.core.batch.Batch.processed`), so a processed run verifies against the same distributions standard
decoding samples from.
"""

from __future__ import annotations

import torch

from specviz.core.batch import Batch
from specviz.core.drafting import Draft
from specviz.core.events import LookaheadRecord, PositionDetail, TreeRecord
from specviz.core.rowpass import Outcome, Row
from specviz.core.tree import ancestors, verify_tree_greedy
from specviz.core.verify import Verdict, fit_vocab, process_logits, sample, verify_greedy, verify_sampling


def top2_gap(logits_row: torch.Tensor) -> float:
    """The gap between the two largest logits of a (vocab,) row (a near tie when small)."""
    top = torch.topk(logits_row, 2).values
    return float(top[0] - top[1])


def plain_step(batch: Batch, row: Row, logits: torch.Tensor, features: torch.Tensor | None) -> Outcome:
    """No draft: the target's own token from its (1, vocab) logits (standard decoding's step)."""
    token = batch.choose(row, logits[0])
    return Outcome((), 0, token, "target", (), (0,), features, near_tie_gap=top2_gap(logits[0]))


# -------------------------------------------------------------------------------------------- a chain


def verify_chain(batch: Batch, row: Row, draft: Draft, logits: torch.Tensor,
                 features: torch.Tensor | None) -> Outcome:
    """Judge a chain draft (possibly empty: a plain step) from the target's (m+1, vocab) logits over [last
    committed] + draft, and (m+1, H) features or None. Returns the pass's :class:`Outcome`: the accepted prefix
    of the draft, then the recovered or bonus token (the target's own token when greedy)."""
    ids = list(draft.token_ids)
    if not ids:
        return plain_step(batch, row, logits, features)
    logits = batch.processed(row, logits, [ids[:i] for i in range(len(ids) + 1)])  # position i sees ids[:i]
    p = process_logits(logits, batch.config.sampling)  # (m+1, vocab): the target's distribution at each position
    verdict = _judge_chain(batch, row, draft, logits, p)
    n = verdict.num_accepted
    return Outcome(tuple(ids), n, verdict.next_id, verdict.next_kind, tuple(ids[:n]), tuple(range(n + 1)),
                   features, _chain_details(draft, logits, p, verdict))


def _judge_chain(batch: Batch, row: Row, draft: Draft, logits: torch.Tensor, p: torch.Tensor) -> Verdict:
    """Greedy prefix match, or rejection sampling against the draft's distributions q (one-hot for a deterministic
    drafter); ``accept_all_drafts`` is the sampling check's deliberately wrong verifier."""
    ids, sampling = list(draft.token_ids), batch.config.sampling
    if batch.config.accept_all_drafts:  # wrong on purpose: every draft token accepted, then the bonus token
        bonus = int(logits[len(ids)].argmax()) if sampling.greedy else sample(p[len(ids)], row.gen)
        return Verdict(len(ids), bonus, "bonus")
    if sampling.greedy:
        return verify_greedy(ids, logits)
    q = fit_vocab(draft.draft_probs[: len(ids)], batch.vocab) if draft.draft_probs is not None else None
    return verify_sampling(ids, q, p, row.gen)


def _chain_details(draft: Draft, logits: torch.Tensor, p: torch.Tensor, verdict: Verdict
                   ) -> tuple[PositionDetail, ...]:
    """One :class:`PositionDetail` per draft token: the target's p of it, the draft's q, the uniform drawn, the
    target's argmax there, and whether the pass judged it (every token up to the first rejection)."""
    ids, n = list(draft.token_ids), verdict.num_accepted
    p_of = p[torch.arange(len(ids), device=p.device), torch.tensor(ids, device=p.device)].tolist()
    top = logits[: len(ids)].argmax(dim=-1).tolist()
    return tuple(
        PositionDetail(float(p_of[i]), float(draft.token_probs[i]) if i < len(draft.token_probs) else 1.0,
                       verdict.uniforms[i] if i < len(verdict.uniforms) else None, int(top[i]), i <= n)
        for i in range(len(ids)))


# -------------------------------------------------------------------------------------------- a tree


def check_tree(batch: Batch, draft: Draft) -> None:
    """Refuse a tree draft the engine cannot verify.

    Raises:
        NotImplementedError: in sampling mode (a tree needs a multi-candidate acceptance rule; draft a chain),
            or in a batch of several prompts (trees are single-prompt).
    """
    if not batch.config.sampling.greedy and draft.lookahead is None:  # a lookahead pass verifies one chain
        raise NotImplementedError("tree drafts are verified in greedy mode only; draft a chain when sampling")
    if len(batch.active) != 1:
        raise NotImplementedError("tree and lookahead drafts are verified for a single prompt; draft chains in a "
                                  "batch")


def verify_tree(batch: Batch, row: Row, draft: Draft, logits: torch.Tensor,
                features: torch.Tensor | None) -> Outcome:
    """Judge a tree draft from the target's (N+1, vocab) logits over [last committed] + every node (one forward
    with the tree's mask): the greedy walk of :func:`specviz.core.tree.verify_tree_greedy`, each node's row
    processed with the history along its own path."""
    tokens, parents = list(draft.token_ids), list(draft.parents)
    paths = [[]] + [[tokens[a] for a in ancestors(parents, i)] for i in range(len(tokens))]
    logits = batch.processed(row, logits, paths)
    verdict = verify_tree_greedy(tokens, parents, logits)
    path, shown = list(verdict.path), list(verdict.shown)
    judge_rows = [0] + [1 + i for i in shown[:-1]]  # the row that judged each shown node (its parent's)
    top = logits.argmax(dim=-1).tolist()
    probs = torch.softmax(logits[judge_rows], dim=-1) if shown else None
    details = tuple(
        PositionDetail(float(probs[j, tokens[node]]), float(draft.token_probs[node]) if draft.token_probs else 1.0,
                       None, int(top[judge_rows[j]]), j <= len(path))
        for j, node in enumerate(shown))
    tree = TreeRecord(tuple(tokens), tuple(parents), tuple(path), tuple(shown), tuple(draft.copied))
    return Outcome(tuple(tokens[i] for i in shown), len(path), verdict.next_id, verdict.next_kind,
                   tuple(tokens[i] for i in path), tuple([0] + [1 + i for i in path]), features, details, tree)


# -------------------------------------------------------------------------------------------- lookahead


def verify_lookahead(batch: Batch, row: Row, draft: Draft, logits: torch.Tensor) -> Outcome:
    """Judge a lookahead pass from the target's (1 + nodes, vocab) logits over [last committed] + the tree of
    :class:`~specviz.core.drafting.LookaheadPlan`: the Jacobi step's new level is the argmax at each top-level
    window node; only the candidates are verified: greedy keeps the longest accepted prefix among them, sampling
    verifies the one candidate as a one-hot draft (rejection sampling)."""
    plan, tokens = draft.lookahead, list(draft.token_ids)
    top = logits.argmax(dim=-1).tolist()
    new_level = tuple(int(top[1 + node]) for node in plan.window_nodes[-1]) if plan.window_nodes else ()
    chains = [list(chain) for chain in plan.candidates]
    rows_of = [[0] + [1 + node for node in chain] for chain in chains]  # the rows judging each token, then after
    best, verdict = _best_candidate(batch, row, logits, [[tokens[n] for n in c] for c in chains], rows_of)
    record = LookaheadRecord(tuple(tuple(tokens[n] for n in level) for level in plan.window_nodes), new_level,
                             tuple(tuple(tokens[n] for n in chain) for chain in chains), best,
                             verdict.num_accepted, plan.pool_size)
    if best is None:
        return Outcome((), 0, verdict.next_id, "target", (), (0,), None, lookahead=record)
    chain, ids = chains[best], [tokens[node] for node in chains[best]]
    n = verdict.num_accepted
    shown = ids[: n + 1]
    probs = process_logits(batch.processed(row, logits[rows_of[best][: len(shown)]],
                                           [ids[:j] for j in range(len(shown))]), batch.config.sampling)
    details = tuple(PositionDetail(float(probs[i, t]), 1.0, verdict.uniforms[i] if i < len(verdict.uniforms) else None,
                                   int(top[rows_of[best][i]]), i <= n) for i, t in enumerate(shown))
    return Outcome(tuple(shown), n, verdict.next_id, verdict.next_kind, tuple(ids[:n]),
                   tuple([0] + [1 + node for node in chain[:n]]), None, details, lookahead=record)


def _best_candidate(batch: Batch, row: Row, logits: torch.Tensor, candidates: list[list[int]],
                    rows_of: list[list[int]]) -> tuple[int | None, Verdict]:
    """Verify each candidate n-gram as a chain over its own logits rows; returns the index of the one with the most
    accepted tokens (the first on ties; None without candidates) and its verdict (a plain step's without)."""
    best, verdict = None, Verdict(0, batch.choose(row, logits[0]), "target")
    for i, (ids, rows) in enumerate(zip(candidates, rows_of)):
        chain_logits = batch.processed(row, logits[rows], [ids[:j] for j in range(len(ids) + 1)])
        if batch.config.sampling.greedy:
            found = verify_greedy(ids, chain_logits)
        else:
            found = verify_sampling(ids, None, process_logits(chain_logits, batch.config.sampling), row.gen)
        if best is None or found.num_accepted > verdict.num_accepted:
            best, verdict = i, found
    return best, verdict
