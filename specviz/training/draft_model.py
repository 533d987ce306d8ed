"""Training the distilled draft model (:mod:`specviz.drafters.distilled`) on the target's own outputs.

Data: committed token-id sets (``data/distill/<set>``, :mod:`specviz.training.dataset`). One target prefill over
them (:func:`soft_prefill`) records, at every position, the target's ``top_k`` most likely next tokens and their
probabilities (temperature 1). The loss is the cross-entropy of the draft's distribution over the draft vocabulary
against those probabilities, renormalised over the ones inside the draft vocabulary: a truncated KL to the
target, whose top token is the greedy label (the same label on a sampled reply as on a greedy one). Every position
of a sequence trains (the prompt's as well: the draft reads prompts too).

Held-out figures (:func:`held_out_report`): first-token accuracy (the draft's argmax equals the target's at a reply
position) and the mean accepted tokens of a greedy chain of k drafted by the drafter itself, as the engine would
(:func:`chain_acceptance`; on greedy replies, where the target's greedy continuation is the reply).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import torch
import torch.nn.functional as F

from specviz.drafters.distilled import DistilledDrafter, DraftModel, save_draft_model, spaced_layers
from specviz.training.idshards import id_shard_paths, load_id_shard
from specviz.training.distill import kept_prefill, length_batches, padded_batch

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DistillSettings:
    """How the draft model is made and trained.

    Attributes:
        layers: N, its decoder layers.
        init: "first" (target layers 0..N-1) or "spaced" (evenly spaced, first to last): :func:`spaced_layers`.
        epochs: passes over the training sequences.
        batch_tokens: positions per optimizer step (sequences are packed up to it; a longer one is a batch alone).
        lr: peak learning rate (AdamW, 20 warm-up steps, cosine to 0).
        vocab_size: draft vocabulary (the most frequent greedy tokens of the data; 0 = the full vocabulary).
        vocab_from: a head or draft-model file whose draft vocabulary (``vocab_ids``) to use instead, e.g. the
            shipped EAGLE head's, counted over all 2560 prompts (small data sees fewer distinct tokens).
        top_k: target probabilities kept per position for the loss.
        holdout: share of sequences held out of training (reported on).
        seed: seeds the layer copies' order of batches and the held-out split.
        checkpoint_every: optimizer steps between checkpoints.
    """

    layers: int = 2
    init: str = "first"
    epochs: int = 2
    batch_tokens: int = 2048
    lr: float = 3e-4
    vocab_size: int = 8192
    vocab_from: str | None = None
    top_k: int = 16
    holdout: float = 0.05
    seed: int = 0
    checkpoint_every: int = 25


@dataclass
class SoftCorpus:
    """Sequences laid end to end with the target's top-k next-token distributions.

    Attributes:
        ids: (P,) int64 token ids.
        offsets: (N+1,) int64 sequence boundaries.
        prompt_lens: (N,) int64 prompt length of each sequence.
        top_ids: (P, K) int64 the target's K likeliest next tokens at each position, likeliest first.
        top_probs: (P, K) float32 their probabilities (temperature 1).
        sources: (N,) int64 index into ``set_names`` of the set each sequence came from (None: one unnamed set).
        set_names: the sets read, in order.
    """

    ids: torch.Tensor
    offsets: torch.Tensor
    prompt_lens: torch.Tensor
    top_ids: torch.Tensor
    top_probs: torch.Tensor
    sources: torch.Tensor | None = None
    set_names: tuple[str, ...] = ()

    def bounds(self) -> list[tuple[int, int, int]]:
        """(start, end, start of the reply) of each sequence."""
        b = self.offsets.tolist()
        return [(b[i], b[i + 1], b[i] + int(p)) for i, p in enumerate(self.prompt_lens.tolist())]


@torch.inference_mode()
def soft_prefill(target, sets: list[Path], top_k: int, progress: Progress | None = None,
                 batch_size: int = 8) -> SoftCorpus:
    """Read every id shard of ``sets`` and run the target over the sequences (right-padded batches).

    Raises:
        FileNotFoundError: no sequence in ``sets``.
    """
    seqs, prompt_lens, sources = [], [], []
    for index, path in [(i, p) for i, s in enumerate(sets) for p in id_shard_paths(Path(s))]:
        d = load_id_shard(path)
        b = d["offsets"].tolist()
        seqs += [d["ids"][b[i]:b[i + 1]] for i in range(len(b) - 1)]
        prompt_lens += d["prompt_lens"].tolist()
        sources += [index] * (len(b) - 1)
    if not seqs:
        raise FileNotFoundError(f"no id shards in {', '.join(str(s) for s in sets)}; make them with "
                                f"`python -m specviz train data`")
    t0 = time.perf_counter()
    top_ids, top_probs = [None] * len(seqs), [None] * len(seqs)
    for picked in length_batches(seqs, batch_size):  # similar lengths: little padding
        batch, mask = padded_batch([seqs[i] for i in picked])
        logits = target.model(input_ids=batch.to(target.device), attention_mask=mask.to(target.device),
                              use_cache=False).logits.float()
        probs, ids = logits.softmax(-1).topk(top_k, dim=-1)
        for row, i in enumerate(picked):
            top_ids[i] = ids[row, :len(seqs[i])].cpu()
            top_probs[i] = probs[row, :len(seqs[i])].cpu()
    offsets = torch.tensor([0] + [len(s) for s in seqs]).cumsum(0)
    _say(progress, f"prefill: {int(offsets[-1])} positions of {len(seqs)} sequences in {time.perf_counter() - t0:.0f} s")
    return SoftCorpus(torch.cat(seqs).long(), offsets, torch.tensor(prompt_lens, dtype=torch.long),
                      torch.cat(top_ids).long(), torch.cat(top_probs), torch.tensor(sources, dtype=torch.long),
                      tuple(str(s) for s in sets))


def _vocabulary(corpus: SoftCorpus, size: int, source: str | None = None) -> tuple[torch.Tensor | None, float]:
    """The draft vocabulary: ``source``'s ``vocab_ids`` when given, else the ``size`` most frequent greedy tokens of
    the data (:func:`specviz.training.train.draft_vocabulary` over the target's top tokens); and the share of the
    data's greedy labels it covers.

    Raises:
        ValueError: ``source`` holds no ``vocab_ids`` (one sentence).
    """
    from specviz.training.train import draft_vocabulary

    top1 = corpus.top_ids[:, 0]
    if source is None:
        return draft_vocabulary(SimpleNamespace(top1=top1), size)
    from safetensors import safe_open

    with safe_open(str(source), framework="pt") as f:
        if "vocab_ids" not in f.keys():
            raise ValueError(f"{source} holds no draft vocabulary (vocab_ids)")
        vocab = torch.sort(f.get_tensor("vocab_ids").long()).values
    return vocab, float(torch.isin(top1, vocab).float().mean())


def _batches(seqs: list[tuple[int, int, int]], batch_tokens: int, epochs: int, seed: int) -> list[list[tuple]]:
    """Every optimizer step's sequences, for all epochs (each epoch a seeded permutation, packed greedily)."""
    g = torch.Generator().manual_seed(seed)
    steps: list[list[tuple]] = []
    for _ in range(epochs):
        group, width = [], 0
        for i in torch.randperm(len(seqs), generator=g).tolist():
            n = seqs[i][1] - seqs[i][0]
            if group and (len(group) + 1) * max(width, n) > batch_tokens:
                steps.append(group)
                group, width = [], 0
            group.append(seqs[i])
            width = max(width, n)
        if group:
            steps.append(group)
    return steps


def _targets(corpus: SoftCorpus, rows: torch.Tensor, to_draft: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, K) draft-vocabulary indices (0 where outside) and (M, K) target probabilities renormalised over the ones
    inside the draft vocabulary, for corpus positions ``rows`` (M,)."""
    index = to_draft[corpus.top_ids[rows]]
    probs = corpus.top_probs[rows] * (index >= 0)
    return index.clamp(min=0), probs / probs.sum(-1, keepdim=True).clamp(min=1e-9)


def batch_loss(draft: DraftModel, corpus: SoftCorpus, group: list[tuple], to_draft: torch.Tensor) -> torch.Tensor:
    """Mean soft cross-entropy (nats per position) of the draft on one batch of sequences (start, end, reply)."""
    device = next(draft.layers.parameters()).device
    width = max(b - a for a, b, _ in group)
    batch = torch.zeros((len(group), width), dtype=torch.long)
    mask = torch.zeros((len(group), width), dtype=torch.bool)
    rows = []
    for r, (a, b, _) in enumerate(group):
        batch[r, :b - a], mask[r, :b - a] = corpus.ids[a:b], True
        rows.append(torch.arange(a, b))
    hidden = draft.view.model(input_ids=batch.to(device), attention_mask=mask.long().to(device),
                              use_cache=False).last_hidden_state
    logq = F.log_softmax(draft.head.subset_logits(hidden[mask.to(device)]).float(), dim=-1)
    index, probs = _targets(corpus, torch.cat(rows), to_draft)
    return -(probs.to(device) * logq.gather(-1, index.to(device))).sum(-1).mean()


def _lr(step: int, total: int, peak: float) -> float:
    if step < 20:
        return peak * (step + 1) / 20
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - 20) / max(1, total - 20))))


def train_draft_model(target, corpus: SoftCorpus, settings: DistillSettings, checkpoint: Path,
                      progress: Progress | None = None) -> tuple[DraftModel, dict]:
    """Train a new draft model on ``corpus`` (resumed from ``checkpoint`` when it exists; written every
    ``settings.checkpoint_every`` steps). Returns the draft model (eval mode) and the report (sizes, steps,
    seconds, held-out figures of :func:`held_out_report`)."""
    torch.manual_seed(settings.seed)
    target.model.requires_grad_(False)  # the shared embedding stays frozen
    vocab, coverage = _vocabulary(corpus, settings.vocab_size, settings.vocab_from)
    source = spaced_layers(settings.layers, target.model.config.num_hidden_layers, settings.init)
    draft = DraftModel(target.model, source, vocab)
    params = draft.trainable()
    for p in params:
        p.requires_grad_(True)
    to_draft = torch.full((draft.head.vocab_size,), -1, dtype=torch.long)
    to_draft[vocab if vocab is not None else torch.arange(draft.head.vocab_size)] = torch.arange(
        draft.head.rows)
    train, hold = _split(corpus, settings.holdout, settings.seed)
    steps = _batches(train, settings.batch_tokens, settings.epochs, settings.seed)
    opt = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    start = _resume(checkpoint, draft, opt)
    before = _held_loss(draft, corpus, hold, to_draft) if start == 0 else None
    _say(progress, f"distilled draft: {settings.layers} layers from target layers {source}, draft vocabulary "
                   f"{draft.head.rows} ({coverage:.1%} of greedy labels), {len(train)} training sequences, "
                   f"{len(steps)} steps, from step {start}")
    t0, last, losses = time.perf_counter(), time.perf_counter(), []
    for step in range(start, len(steps)):
        for group in opt.param_groups:
            group["lr"] = _lr(step, len(steps), settings.lr)
        loss = batch_loss(draft, corpus, steps[step], to_draft)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if (step + 1) % settings.checkpoint_every == 0 or step + 1 == len(steps):
            _save_checkpoint(checkpoint, draft, opt, step + 1)
        if time.perf_counter() - last > 30 or step + 1 == len(steps):
            last = time.perf_counter()
            _say(progress, f"step {step + 1}/{len(steps)}: loss {losses[-1]:.3f}, {last - t0:.0f} s{_load()}")
    for module in (draft.layers, draft.norm):
        module.eval().requires_grad_(False)
    report = {"settings": asdict(settings), "source_layers": source, "vocab_coverage": round(coverage, 4),
              "train_sequences": len(train), "held_out_sequences": len(hold), "steps": len(steps),
              "seconds_this_run": round(time.perf_counter() - t0, 1), "threads": torch.get_num_threads(),
              "train_loss_first_steps": _mean(losses[:max(1, len(losses) // 10)]),
              "train_loss_last_steps": _mean(losses[-max(1, len(losses) // 10):]),
              "held_out_loss_before": None if before is None else round(before, 4),
              "held_out_loss": round(_held_loss(draft, corpus, hold, to_draft), 4)}
    report.update(held_out_report(draft, corpus, hold))
    report.update(held_out_by_set(draft, corpus, hold))
    return draft, report


def held_out_by_set(draft: DraftModel, corpus: SoftCorpus, hold: list[tuple]) -> dict:
    """:func:`held_out_report` on each set's share of ``hold`` when the corpus read more than one set (a set seen
    in training may be far easier than another): {"held_out_by_set": {set: report}}, or {} for one set."""
    if corpus.sources is None or len(corpus.set_names) < 2:
        return {}
    starts = {int(a): int(i) for a, i in zip(corpus.offsets[:-1].tolist(), corpus.sources.tolist())}
    return {"held_out_by_set": {name: held_out_report(draft, corpus, [s for s in hold if starts[s[0]] == i])
                                for i, name in enumerate(corpus.set_names)}}


def _mean(values: list[float]) -> float | None:
    """Mean of ``values`` rounded to 4 places, None for none (a run resumed at its end trains no step)."""
    return round(sum(values) / len(values), 4) if values else None


def _split(corpus: SoftCorpus, holdout: float, seed: int) -> tuple[list[tuple], list[tuple]]:
    """Train / held-out sequences (start, end, reply start), seeded; at least one held out."""
    seqs = [s for s in corpus.bounds() if s[1] - s[0] >= 3]
    order = torch.randperm(len(seqs), generator=torch.Generator().manual_seed(seed + 1)).tolist()
    n_hold = max(1, int(len(seqs) * holdout)) if len(seqs) > 1 else 0
    return [seqs[i] for i in sorted(order[n_hold:])], [seqs[i] for i in sorted(order[:n_hold])]


@torch.no_grad()
def _held_loss(draft: DraftModel, corpus: SoftCorpus, hold: list[tuple], to_draft: torch.Tensor) -> float:
    if not hold:
        return float("nan")
    return float(sum(batch_loss(draft, corpus, [s], to_draft) for s in hold)) / len(hold)


@torch.no_grad()
def first_token_accuracy(draft: DraftModel, corpus: SoftCorpus, seqs: list[tuple]) -> float:
    """Share of reply positions (the last prompt position on) where the draft's argmax is the target's (in [0, 1];
    nan without positions)."""
    hits = total = 0
    for a, b, r in seqs:
        hidden = draft.view.model(input_ids=corpus.ids[a:b][None].to(draft.view.device), use_cache=False).last_hidden_state
        best = draft.head(hidden[0, r - a - 1:]).argmax(-1).cpu()
        hits += int((best == corpus.top_ids[r - 1:b, 0]).sum())
        total += b - r + 1
    return hits / total if total else float("nan")


@torch.inference_mode()
def chain_acceptance(drafter, corpus: SoftCorpus, seqs: list[tuple], k: int = 4, every: int = 1) -> dict:
    """Mean accepted tokens of a greedy chain of ``k`` drafted by ``drafter`` (any :class:`ModelDrafter`) at every
    ``every``-th reply position, as the engine would accept it: draft token i is accepted while it equals the
    target's greedy token at its place. Where the reply itself leaves the target's greedy path (a sampled reply)
    the chain stops counting, so on sampled replies it is a lower bound.

    Returns:
        {"accepted_per_pass": mean accepted (0..k), "acceptance_rate": that / k, "passes": chains counted}.
    """
    from specviz.core.drafting import DraftContext
    from specviz.core.verify import SamplingConfig

    greedy, accepted, passes = SamplingConfig(), 0, 0
    for a, b, r in seqs:
        seq, top1 = corpus.ids[a:b].tolist(), corpus.top_ids[a:b, 0].tolist()
        drafter.reset(seq[:r - a])
        for t in range(r - a - 1, b - a - 1, every):  # t: the last committed position
            committed = seq[:t + 1]
            drafter.commit(committed, 0)
            ids = drafter.propose(DraftContext(committed, k, greedy, None)).token_ids
            n = 0
            while n < len(ids) and t + n < len(seq) and ids[n] == top1[t + n]:
                n += 1
                if t + n >= len(seq) or seq[t + n] != ids[n - 1]:
                    break
            accepted += n
            passes += 1
    mean = accepted / passes if passes else float("nan")
    return {"accepted_per_pass": round(mean, 4), "acceptance_rate": round(mean / k, 4), "passes": passes}


def held_out_report(draft: DraftModel, corpus: SoftCorpus, seqs: list[tuple], k: int = 4) -> dict:
    """First-token accuracy and the k-chain acceptance of ``draft`` on ``seqs`` (see the module docstring)."""
    if not seqs:
        return {}
    return {"held_out_first_token_accuracy": round(first_token_accuracy(draft, corpus, seqs), 4),
            "held_out_chain": chain_acceptance(DistilledDrafter(draft), corpus, seqs, k)}


def _resume(checkpoint: Path, draft: DraftModel, opt) -> int:
    if not checkpoint.exists():
        return 0
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    draft.load_state_dict(state["module"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])


def _save_checkpoint(checkpoint: Path, draft: DraftModel, opt, step: int) -> None:
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint.with_suffix(".tmp")
    torch.save({"module": draft.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp)
    tmp.replace(checkpoint)


def _load() -> str:
    return f", load {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


@dataclass(frozen=True)
class DraftPaths:
    """Where :func:`run_draft_training` writes: the draft file ``out``; the training ``checkpoint`` (None: a cache
    file removed at the end); ``prefill_cache``, a file keeping the soft prefill for the next training on the same
    sets (None: prefill in memory only)."""

    out: Path
    checkpoint: Path | None = None
    prefill_cache: Path | None = None


def cached_soft_prefill(target, sets: list[Path], top_k: int, cache: Path | None,
                        progress: Progress | None = None) -> SoftCorpus:
    """:func:`soft_prefill` of ``sets``, read from ``cache`` when it was made for the same sets, top-k, target and
    shard files (names and sizes), else made and written there (``torch.save``, about 200 bytes per position at
    top-k 16: 0.2 GB for 891 k positions). ``cache`` None: no file. A cache made for anything else is replaced.

    Raises:
        FileNotFoundError: no sequence in ``sets``.
    """
    from specviz.drafters.networks import target_signature

    if cache is None:
        return soft_prefill(target, sets, top_k, progress)
    key = {"sets": [str(s) for s in sets], "top_k": top_k, "target": target_signature(target.model),
           "shards": [[p.name, p.stat().st_size] for s in sets for p in id_shard_paths(Path(s))]}
    return kept_prefill(cache, key, lambda: soft_prefill(target, sets, top_k, progress), lambda c: c.ids.numel(),
                        progress)


def run_draft_training(target, sets: list[Path], paths: DraftPaths, settings: DistillSettings,
                       eval_sets: list[Path] = (), progress: Progress | None = None) -> dict:
    """The whole recipe: prefill of ``sets`` (kept in ``paths.prefill_cache`` when given), training (resumed from
    ``paths.checkpoint``; None: a cache file removed at the end), the file at ``paths.out``, and held-out figures on
    ``eval_sets`` when given. Returns the report.

    Raises:
        FileNotFoundError: no id shard in ``sets`` (or ``eval_sets``).
    """
    from specviz.drafters.networks import target_signature
    from specviz.runtime.models import cache_dir

    corpus = cached_soft_prefill(target, sets, settings.top_k, paths.prefill_cache, progress)
    out, given = paths.out, paths.checkpoint is not None
    checkpoint = paths.checkpoint or cache_dir() / "distilled" / f"ckpt-L{settings.layers}-seed{settings.seed}.pt"
    draft, report = train_draft_model(target, corpus, settings, checkpoint, progress)
    report["data"] = {"sets": [str(s) for s in sets], "positions": corpus.ids.numel(),
                      "sequences": corpus.prompt_lens.numel()}
    report["target"] = target_signature(target.model)
    if eval_sets:
        other = soft_prefill(target, list(eval_sets), settings.top_k, progress)
        report["eval"] = {"sets": [str(s) for s in eval_sets]} | held_out_report(draft, other, other.bounds())
    save_draft_model(draft, out, target.model, report)
    if not given and checkpoint.exists():
        checkpoint.unlink()
    _say(progress, f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return report
