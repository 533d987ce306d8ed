"""The batches and losses of the trained drafters: the map from target ids to draft-vocabulary labels, token-budget
batches, an EAGLE batch's padded tensors, EAGLE-1's two-step loss, and EAGLE-3's training-time test (the mask,
the unrolled head, its loss and its held-out accuracy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from specviz.drafters.networks import DraftLMHead, EagleHead
from specviz.training.distill import Corpus


def _label_map(vocab: torch.Tensor | None, vocab_size: int) -> torch.Tensor:
    """Token id -> draft-vocabulary index (-100 = outside, ignored by cross-entropy)."""
    if vocab is None:
        return torch.arange(vocab_size)
    table = torch.full((vocab_size,), -100, dtype=torch.long)
    table[vocab] = torch.arange(vocab.numel())
    return table


def _batches(seqs: list[tuple[int, int, int]], batch_tokens: int, g: torch.Generator) -> list[list[tuple[int, int, int]]]:
    """Shuffle, then group sequences of similar length so that each batch pads little."""
    order = torch.randperm(len(seqs), generator=g).tolist()
    chunks = [sorted((seqs[i] for i in order[c:c + 64]), key=lambda s: s[1] - s[0]) for c in range(0, len(order), 64)]
    batches = []
    for chunk in chunks:
        batch: list[tuple[int, int, int]] = []
        for s in chunk:
            width = max([q[1] - q[0] for q in batch + [s]])
            if batch and width * (len(batch) + 1) > batch_tokens:
                batches.append(batch)
                batch = []
            batch.append(s)
        if batch:
            batches.append(batch)
    perm = torch.randperm(len(batches), generator=g).tolist()
    return [batches[i] for i in perm]


class EagleBatch(NamedTuple):
    """The padded tensors of one batch of B sequences, T = the longest sequence's length - 1 positions (j = 1..T)."""

    f_in: torch.Tensor  # (B, T, H_in) float: the head's inputs f_{j-1} (the fused layers' states for EAGLE-3)
    embeds: torch.Tensor  # (B, T, H) float: embeddings of the tokens x_j
    positions: torch.Tensor  # (B, T) long: the positions j
    f_out: torch.Tensor  # (B, T, H) float: the target's features f_j (EAGLE-1's regression targets)
    y: torch.Tensor  # (B, T) long: the labels y_j as draft-vocabulary ids, -100 where there is none
    valid: torch.Tensor  # (B, T) bool: the positions losses and accuracies count


@dataclass(frozen=True)
class EagleParts:
    """What every EAGLE loss of one training run reads: the head being trained, its LM head over the draft
    vocabulary, the corpus, the target's input embedding and the map from target ids to draft-vocabulary labels."""

    head: EagleHead
    lm: DraftLMHead
    corpus: Corpus
    embed: torch.nn.Module
    labels: torch.Tensor  # (target vocab,) long: draft-vocabulary id of each target id, -100 outside it


def _eagle_batch(corpus: Corpus, batch: list[tuple[int, int, int]], embed, labels: torch.Tensor, reply_only: bool = False,
                 inputs: torch.Tensor | None = None) -> EagleBatch:
    """Padded tensors for one batch: inputs f_{j-1} (rows of ``inputs``, default ``corpus.features``; the
    fused layers' states for EAGLE-3), tokens x_j, positions j, targets f_j and label y_j; with ``reply_only``
    only positions whose label is a reply token (j >= reply start - 1) are valid."""
    inputs = corpus.features if inputs is None else inputs
    width = max(b - a for a, b, _ in batch) - 1
    hidden = corpus.features.shape[1]
    f_in = torch.zeros(len(batch), width, inputs.shape[1])
    f_out = torch.zeros(len(batch), width, hidden)
    tokens = torch.zeros(len(batch), width, dtype=torch.long)
    y = torch.full((len(batch), width), -100, dtype=torch.long)
    valid = torch.zeros(len(batch), width, dtype=torch.bool)
    for row, (a, b, r) in enumerate(batch):
        n = b - a - 1
        f_in[row, :n] = inputs[a:b - 1].float()
        f_out[row, :n] = corpus.features[a + 1:b].float()
        tokens[row, :n] = corpus.ids[a + 1:b]
        y[row, :n] = labels[corpus.top1[a + 1:b]]
        valid[row, max(0, r - a - 2) if reply_only else 0:n] = True
    positions = torch.arange(1, width + 1).expand(len(batch), width)
    with torch.no_grad():
        embeds = embed(tokens)
    return EagleBatch(f_in, embeds, positions, f_out, y, valid)


def _eagle_losses(head: EagleHead, lm: DraftLMHead, batch: EagleBatch, noise_std: float, ce_weight: float = 0.1):
    """(loss, step-1 correct, step-2 correct, counted) for one batch."""
    f_in, embeds, positions, f_out, y, valid = batch
    noisy = f_in + (torch.rand_like(f_in) * 2 - 1) * noise_std if noise_std else f_in
    out1, (k1, v1) = head(noisy, embeds, positions)
    t = f_in.shape[1]
    # step 2: position j reads the head's own f̂_{j-1} and attends to true-feature entries before j, and itself
    pred_in = torch.cat([f_in[:, :1], out1[:, :-1]], dim=1)
    causal_before = torch.ones(t, t, dtype=torch.bool).tril(-1)
    mask = torch.cat([causal_before, torch.eye(t, dtype=torch.bool)], dim=1)[None, None]
    out2, _ = head(pred_in, embeds, positions, (k1, v1), mask)
    m = valid[..., None].float()
    count = valid.sum().clamp(min=1)
    losses, correct = [], []
    for out, weight in ((out1, 1.0), (out2, 0.5)):
        feat = (F.smooth_l1_loss(out, f_out, reduction="none") * m).sum() / (count * out.shape[-1])
        logits = lm.subset_logits(out)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)
        losses.append(weight * (feat + ce_weight * ce))
        correct.append(int(((logits.argmax(-1) == y) & valid).sum()))
    return losses[0] + losses[1], correct[0], correct[1], int(count)


def ttt_mask(t: int, step: int) -> torch.Tensor:
    """The attention mask of training-time-test step ``step`` (1-based) over t entries: (t, step * t) bool,
    True = may attend; keys in blocks [step 1 (entries built from true features) | step 2 | ... | step ``step``].

    Row c is the ``step``-th drafted token of a draft that started after the true entry at column c - step + 1
    (EAGLE-3's training-time test, Li et al. 2025): it sees the true entries up to that column, the entry of each
    earlier draft step s at column c - step + s, and itself, which is what :class:`EagleDrafter`'s head cache
    holds when it drafts that token. Step 1 is the causal mask. Rows c < step - 1 have no such draft (only
    themselves to attend to) and are left out of losses and accuracy.
    """
    cols = torch.arange(t)
    rows = cols[:, None]
    blocks = [cols[None, :] <= rows - step + 1]
    blocks += [cols[None, :] == rows - step + s for s in range(2, step + 1)]
    return torch.cat(blocks, dim=1)


def unroll(head: EagleHead, first_in: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor,
           steps: int) -> list[torch.Tensor]:
    """Run ``head`` for ``steps`` training-time-test steps (see :func:`ttt_mask`).

    Args:
        first_in: (B, T, H) head inputs g of committed positions (``head.take_in`` of the target's features;
            column c holds position c's, the entry at position c + 1 reads it).
        embeds: (B, T, H) embeddings of the tokens at positions 1..T; positions: (B, T) or (T,).
        steps: >= 1.

    Returns:
        ``steps`` outputs (B, T, H); step s reads, at column c, step s-1's output at column c - 1 (the head's own
        guess in place of the target's feature), so column c of step s drafts the s-th token of a draft.
    """
    out, (k, v) = head(first_in, embeds, positions)
    outs, keys, values = [out], [k], [v]
    t = first_in.shape[1]
    for step in range(2, steps + 1):
        fed = torch.cat([first_in[:, :1], out[:, :-1]], dim=1)  # column 0 has no draft: any input, masked out later
        mask = ttt_mask(t, step).to(first_in.device)[None, None]
        out, (k, v) = head(fed, embeds, positions, (torch.cat(keys, 2), torch.cat(values, 2)), mask)
        outs.append(out)
        keys.append(k)
        values.append(v)
    return outs


def _ttt_losses(head: EagleHead, lm: DraftLMHead, batch: EagleBatch, steps: int, decay: float):
    """EAGLE-3 loss of one batch: sum over steps s of decay^(s-1) x cross-entropy of step s's draft logits
    against y at its valid columns (c >= s - 1). Returns (loss, hits per step, counted per step), each (B, T)
    bool."""
    f_in, embeds, positions, _, y, valid = batch
    outs = unroll(head, head.take_in(f_in), embeds, positions, steps)
    loss = f_in.new_zeros(())
    hits, oks = [], []
    for s, out in enumerate(outs):
        ok = valid.clone()
        ok[:, :s] = False
        logits = lm.subset_logits(head.readout(out))
        target = torch.where(ok, y, torch.full_like(y, -100))
        if bool((target >= 0).any()):
            loss = loss + decay ** s * F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                       ignore_index=-100)
        hits.append((logits.argmax(-1) == y) & ok)
        oks.append(ok)
    return loss, hits, oks


@torch.no_grad()
def unrolled_accuracy(head: EagleHead, target, corpus: Corpus, seqs: list[tuple[int, int, int]] | None = None,
                      steps: int = 4, batch_tokens: int = 4096) -> dict:
    """How well ``head`` drafts on its own predictions, on the reply tokens of ``seqs`` (start, end, reply start;
    default every sequence of ``corpus``): tokens teacher-forced, features the head's own after the first step.

    Returns:
        {"per_step": [acc_1 .. acc_steps], "chain": mean accepted tokens of a k = steps chain (gate off),
        "positions": reply positions counted}. acc_s is the share of positions where the s-th drafted token
        equals the target's greedy token (given the s - 1 before it were right: the acceptance rate of drafted
        position s); chain is the expected number of leading right guesses from every reply position, so tokens
        per pass ~ 1 + chain where the text is like ``seqs``.

    Raises:
        ValueError: an EAGLE-3 head on a corpus without its layers' states.
    """
    if seqs is None:
        seqs = [(a, b, a + int(p)) for (a, b), p in zip(corpus.sequences(), corpus.prompt_lens.tolist()) if b - a >= 3]
    layers = tuple(head.config.feature_layers)
    if layers and tuple(corpus.layers) != layers:
        raise ValueError(f"this head reads hidden states {layers}; the corpus holds {tuple(corpus.layers) or 'none'}")
    vocab = head.vocab_ids if head.vocab_ids.numel() else None
    labels = _label_map(vocab, target.vocab_size)
    lm = DraftLMHead(target.model.get_output_embeddings().weight, vocab)
    embed = target.model.get_input_embeddings()
    hit_sum, counted, chain_sum, starts = [0] * steps, [0] * steps, 0.0, 0
    for batch in _batches(seqs, batch_tokens, torch.Generator().manual_seed(1)):
        tensors = _eagle_batch(corpus, batch, embed, labels, reply_only=True,
                               inputs=corpus.layer_features if layers else None)
        _, hits, oks = _ttt_losses(head, lm, tensors, steps, 1.0)
        for s in range(steps):
            hit_sum[s] += int(hits[s].sum())
            counted[s] += int(oks[s].sum())
        chain_sum += float(_chain_lengths(hits)[oks[0]].sum())
        starts += int(oks[0].sum())
    return {"per_step": [h / max(1, n) for h, n in zip(hit_sum, counted)], "chain": chain_sum / max(1, starts),
            "positions": counted[0]}


def _chain_lengths(hits: list[torch.Tensor]) -> torch.Tensor:
    """(B, T) accepted tokens of a chain whose first draft is at column c: the leading run of right guesses
    hits[0][c], hits[1][c + 1], ..., hits[s][c + s]."""
    alive = torch.ones_like(hits[0], dtype=torch.float32)
    total = torch.zeros_like(alive)
    for s, hit in enumerate(hits):
        shifted = torch.zeros_like(hit)
        shifted[:, :hit.shape[1] - s] = hit[:, s:]
        alive = alive * shifted.float()
        total = total + alive
    return total
