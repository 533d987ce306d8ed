"""Training the EAGLE-style head and the Medusa heads on self-distillation data (:mod:`specviz.training.distill`).

``python -m specviz train eagle|medusa`` runs the whole recipe: make the data if it is missing (resumable),
pick the draft vocabulary, train with a fixed seed (resumable from a checkpoint), report held-out accuracy and
write a head file (float16 safetensors, :func:`specviz.drafters.networks.save_heads`).

EAGLE loss (Li et al. 2024): for every position j >= 1 of a sequence, the head reads (f_{j-1}, x_j) and
predicts f_j; loss = SmoothL1(f̂_j, f_j) + 0.1 * cross-entropy of the draft logits against the target's greedy
token y_j (over the draft vocabulary). A second, "drafting" step feeds the head its own prediction f̂_{j-1} in
place of f_{j-1}, attending to entries built from true features before j, exactly the situation of the second
drafted token; its loss is added with weight 0.5 (the same idea as EAGLE-3's training-time test). Inputs get
uniform noise (EAGLE's feature augmentation).

EAGLE-3 recipe (``recipe="eagle3"``; Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large
Language Models via Training-Time Test"): the head reads ``fuse([h_low; h_mid; h_high])`` of three of the
target's hidden states (:func:`specviz.drafters.networks.fusion_layers`) and is trained on tokens only: the
cross-entropy of ``DraftLMHead(out_norm(o))`` against the target's greedy token, no feature loss. Training-time
test: the head is unrolled over ``ttt_steps`` steps; step s feeds every position the head's own output of step
s-1 at the position before (in place of the target's fused feature) and attends exactly as drafting does: to the
entries built from true features up to where that draft started, the entries of its own earlier draft steps, and
itself (:func:`ttt_mask`). Step s's loss has weight ``step_decay ** (s - 1)``. No input noise (the unrolled steps
are the head's own noise). The features come from a prefill at training time (:func:`prefill_corpus`).

Medusa loss (Cai et al. 2024, Medusa-1: frozen target): head i on f_t is trained with cross-entropy against
y_{t+1+i}, the target's greedy token i+1 places after its own next token, weighted 0.8^i.

Draft vocabulary: the N most frequent greedy target tokens of the data (N = 8192 by default; the coverage is
printed). Positions whose label is outside it count as misses in the accuracy and are left out of the loss.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from specviz.training.distill import (Corpus, CorpusSettings, data_dir, extract_features, generate_corpus, load_corpus,
                                     kept_prefill, prefill_corpus)
from specviz.training.idshards import id_shard_paths, load_id_shard
from specviz.drafters.networks import (DraftLMHead, EagleHead, MedusaHeads, fusion_layers, new_eagle_head,
                                       new_medusa_heads, parameter_count, save_heads, target_signature)
from specviz.training.losses import (EagleParts, _batches, _eagle_batch, _eagle_losses, _label_map, _ttt_losses,
                                     ttt_mask, unroll, unrolled_accuracy)  # noqa: F401  (ttt_mask, unroll: re-exported)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TrainSettings:
    """Training settings (defaults are the shipped heads' recipe).

    Attributes:
        epochs: passes over the training data (None: 4 for the EAGLE head, 2 for the Medusa heads, which cost
            more per position: four heads through the draft LM head).
        lr: peak AdamW learning rate (linear warm-up over 50 steps, cosine decay to 0).
        batch_tokens: about this many positions per optimizer step.
        vocab_size: draft vocabulary size N (0 = the full vocabulary).
        medusa_heads: number of Medusa heads.
        holdout: fraction of sequences kept out of training for the accuracy report.
        noise: uniform input-feature noise, as a fraction of the features' standard deviation (EAGLE only).
        seed: the seed of initialisation, shuffling and noise.
        init: EAGLE head start: "last-layer" copies the target's last decoder layer (attention, MLP, norms) and
            sets ``fc`` to pass the feature through (plus a small random token part); "random" is N(0, 0.02).
        weight_decay: AdamW weight decay.
        ce_weight: weight of the EAGLE head's cross-entropy term against its feature term.
        recipe: "eagle" (EAGLE-1 head: feature + token loss, two steps) or "eagle3" (fused layers, token loss,
            training-time test).
        ttt_steps: steps the EAGLE-3 recipe unrolls (>= 1; the held-out report always unrolls 4).
        step_decay: weight of step s's loss is step_decay ** (s - 1) (EAGLE-3 recipe).
        start_from: a head file of the same kind and recipe to continue training from (its weights and its draft
            vocabulary; ``init`` and ``vocab_size`` are then unused), e.g. the shipped head trained further on new
            data; None: a new head.
        head_layers: decoder layers of an EAGLE head (1: the papers' head). Continuing a file of fewer layers grows
            it: the new layers start as the identity (their output projections zero), so training starts from
            what the file drafts.
    """

    epochs: int | None = None
    lr: float = 2e-3
    batch_tokens: int = 1024
    vocab_size: int = 8192
    medusa_heads: int = 4
    holdout: float = 0.05
    noise: float = 0.2
    seed: int = 0
    init: str = "random"
    weight_decay: float = 0.0
    ce_weight: float = 0.1
    recipe: str = "eagle"
    ttt_steps: int = 4
    step_decay: float = 0.8
    start_from: str | None = None
    head_layers: int = 1

    def __post_init__(self) -> None:
        if self.head_layers < 1:
            raise ValueError(f"head_layers must be 1 or more, got {self.head_layers}")
        if self.recipe not in ("eagle", "eagle3"):
            raise ValueError(f"unknown EAGLE recipe {self.recipe!r}; choose eagle or eagle3")
        if self.ttt_steps < 1:
            raise ValueError(f"ttt_steps must be >= 1, got {self.ttt_steps}")


EPOCHS = {"eagle": 4, "medusa": 2}


def draft_vocabulary(corpus: Corpus, size: int) -> tuple[torch.Tensor | None, float]:
    """The ``size`` most frequent greedy target tokens (sorted ids) and the share of labels they cover.

    Returns (None, 1.0) for ``size`` 0 (the full vocabulary).
    """
    if size <= 0:
        return None, 1.0
    counts = torch.bincount(corpus.top1)
    size = min(size, int((counts > 0).sum()))
    top = torch.topk(counts, size).indices
    coverage = float(counts[top].sum()) / float(counts.sum())
    return torch.sort(top).values, coverage


def _split(corpus: Corpus, holdout: float, seed: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """Train / held-out sequences as (start, end, start of the reply)."""
    seqs = [(a, b, a + int(p)) for (a, b), p in zip(corpus.sequences(), corpus.prompt_lens.tolist()) if b - a >= 3]
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(seqs), generator=g).tolist()
    n_hold = max(1, int(len(seqs) * holdout))
    return [seqs[i] for i in order[n_hold:]], [seqs[i] for i in order[:n_hold]]


def _lr(step: int, total: int, peak: float) -> float:
    if step < 50:
        return peak * (step + 1) / 50
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - 50) / max(1, total - 50))))


@dataclass(frozen=True)
class StartState:
    """A head file's weights to continue training from (:attr:`TrainSettings.start_from`): its name, tensors
    (float32; ``vocab_ids`` as stored) and draft vocabulary (None: the full vocabulary)."""

    name: str
    state: dict
    vocab_ids: torch.Tensor | None

    def vocab(self, corpus: Corpus) -> tuple[torch.Tensor | None, float]:
        """(the file's draft vocabulary, the share of ``corpus``'s greedy labels inside it), as
        :func:`draft_vocabulary` gives them for a new head."""
        if self.vocab_ids is None:
            return None, 1.0
        counts = torch.bincount(corpus.top1, minlength=int(self.vocab_ids.max()) + 1)
        return self.vocab_ids, float(counts[self.vocab_ids].sum()) / max(1.0, float(counts.sum()))

    def load_into(self, head: torch.nn.Module) -> None:
        """Copy the weights into ``head`` (a new head of the same shapes, or an EAGLE head of more layers: those
        the file lacks start as the identity, their ``o_proj`` and ``down_proj`` zero). Raises ValueError in one
        sentence when they do not fit (another recipe, EAGLE-1 against EAGLE-3, another number of Medusa heads,
        or more layers than the head)."""
        try:
            missing, unexpected = head.load_state_dict(self.state, strict=False)
        except RuntimeError as error:
            first = str(error).splitlines()[1].strip() if len(str(error).splitlines()) > 1 else str(error)
            raise ValueError(f"{self.name} does not fit the head this training makes (another recipe or size?): "
                             f"{first}") from None
        grown = {int(k.split(".")[1]) for k in missing if k.startswith("extra.")}
        left = [k for k in missing if not k.startswith("extra.")] + list(unexpected)
        if left:
            raise ValueError(f"{self.name} does not fit the head this training makes (another recipe or size?): "
                             f"{'unexpected' if unexpected else 'missing'} weights such as {left[0]}")
        with torch.no_grad():
            for index in grown:
                head.extra[index].o_proj.weight.zero_()
                head.extra[index].down_proj.weight.zero_()


def start_state(path: str | None, target, kind: str) -> StartState | None:
    """The head file ``path`` (``kind``: eagle or medusa) read to continue training from, or None without a path.

    Raises:
        HeadsError: a missing or malformed file, another kind, or one made for another target
            (:func:`specviz.drafters.networks.read_head_state`, as loading it to draft checks)."""
    if not path:
        return None
    from specviz.drafters.networks import read_head_state

    _, state, vocab = read_head_state(path, target.model, kind)
    return StartState(Path(path).name, state, vocab)


# ------------------------------------------------------------------------------------------------ EAGLE


@torch.no_grad()
def init_from_last_layer(head: EagleHead, target_model: torch.nn.Module) -> None:
    """Start the head from the target's last decoder layer (same sizes): a prior that already maps features of
    the target's residual stream to its output. ``fc`` starts as [small random | identity]: the feature passes
    through, the token embedding adds a little. Raises ValueError when the sizes differ."""
    layer = target_model.model.layers[-1]
    pairs = {"q_proj": layer.self_attn.q_proj, "k_proj": layer.self_attn.k_proj, "v_proj": layer.self_attn.v_proj,
             "o_proj": layer.self_attn.o_proj, "gate_proj": layer.mlp.gate_proj, "up_proj": layer.mlp.up_proj,
             "down_proj": layer.mlp.down_proj, "norm1": layer.input_layernorm, "norm2": layer.post_attention_layernorm}
    for name, source in pairs.items():
        mine = getattr(head, name).weight
        if mine.shape != source.weight.shape:
            raise ValueError(f"cannot start the head from the target's last layer: {name} is {tuple(mine.shape)}, "
                             f"the target's {tuple(source.weight.shape)}")
        mine.copy_(source.weight.detach())
    hidden = head.config.hidden
    head.fc.weight[:, hidden:] = torch.eye(hidden)
    head.fc.weight[:, :hidden].normal_(std=0.02)
    head.fc.bias.zero_()


def train_eagle(target, corpus: Corpus, settings: TrainSettings, checkpoint: Path | None = None,
                progress: Progress | None = None) -> tuple[EagleHead, dict]:
    """Train an :class:`EagleHead` for ``target`` on ``corpus`` with ``settings.recipe`` ("eagle": EAGLE-1;
    "eagle3": fused layers, token loss, training-time test); returns the head (eval mode) and a report dict (draft
    vocabulary coverage, held-out accuracy per drafted position, minutes).

    Raises:
        ValueError: the EAGLE-3 recipe on a corpus without the fused layers' states (see :func:`prefill_corpus`).
    """
    t_start = time.perf_counter()
    settings = replace(settings, epochs=settings.epochs or EPOCHS["eagle"])
    start = start_state(settings.start_from, target, "eagle")
    vocab, coverage = draft_vocabulary(corpus, settings.vocab_size) if start is None else start.vocab(corpus)
    labels = _label_map(vocab, target.vocab_size)
    head = _new_head(target, corpus, settings, vocab)
    if start is not None:
        start.load_into(head)
    head.train()
    lm = DraftLMHead(target.model.get_output_embeddings().weight, vocab)
    embed = target.model.get_input_embeddings()
    train, hold = _split(corpus, settings.holdout, settings.seed)
    parts = EagleParts(head, lm, corpus, embed, labels)
    run_batch = _batch_step(parts, settings)
    opt = torch.optim.AdamW(head.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    g = torch.Generator().manual_seed(settings.seed)
    plans = [_batches(train, settings.batch_tokens, g) for _ in range(settings.epochs)]
    total = sum(len(p) for p in plans)
    step = _resume(checkpoint, head, opt)
    torch.manual_seed(settings.seed + step)
    bar = _bar(total, step, f"train {settings.recipe}")
    for plan_step, batch in enumerate(b for plan in plans for b in plan):
        if plan_step < step:
            continue
        for group in opt.param_groups:
            group["lr"] = _lr(step, total, settings.lr)
        loss, shown = run_batch(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        bar.update(1)
        bar.set_postfix(loss=f"{float(loss.detach()):.3f}", **{k: f"{v:.2f}" for k, v in shown.items()})
        if checkpoint is not None and step % 100 == 0:
            _save_checkpoint(checkpoint, head, opt, step)
    if checkpoint is not None and step % 100:
        _save_checkpoint(checkpoint, head, opt, step)  # the finished state (a kept checkpoint then only reports)
    bar.close()
    head.eval()
    report = _eagle_report(parts, target, (train, hold), coverage, settings)
    report["minutes"] = round((time.perf_counter() - t_start) / 60, 1)
    _say(progress, f"{settings.recipe}: held-out accuracy per drafted position "
                   + ", ".join(f"{a:.1%}" for a in report["holdout_acc_per_step"]))
    return head.requires_grad_(False), report


def _new_head(target, corpus: Corpus, settings: TrainSettings, vocab: torch.Tensor | None) -> EagleHead:
    """A fresh head for the recipe (EAGLE-3: fusing :func:`fusion_layers`, which the corpus must hold)."""
    layers = fusion_layers(target.model.config.num_hidden_layers) if settings.recipe == "eagle3" else ()
    if layers and (corpus.layer_features is None or tuple(corpus.layers) != layers):
        raise ValueError(f"the eagle3 recipe reads the target's hidden states {layers}; this corpus holds "
                         f"{tuple(corpus.layers) or 'none'} (make it with prefill_corpus(..., layers={layers}))")
    head = new_eagle_head(target.model, vocab, seed=settings.seed, feature_layers=layers,
                          extra_layers=settings.head_layers - 1)
    if settings.init == "last-layer":
        init_from_last_layer(head, target.model)
    return head


def _batch_step(parts: EagleParts, settings: TrainSettings):
    """The recipe's loss for one batch: a function batch -> (loss, {accuracy name: value}) for the progress bar."""
    head, lm, corpus, embed, labels = parts.head, parts.lm, parts.corpus, parts.embed, parts.labels
    if settings.recipe == "eagle3":
        def ttt(batch):
            tensors = _eagle_batch(corpus, batch, embed, labels, inputs=corpus.layer_features)
            loss, hits, oks = _ttt_losses(head, lm, tensors, settings.ttt_steps, settings.step_decay)
            return loss, {f"acc{s + 1}": int(h.sum()) / max(1, int(o.sum())) for s, (h, o) in enumerate(zip(hits, oks))}
        return ttt
    noise_std = settings.noise * float(corpus.features[:20000].float().std())

    def eagle(batch):
        loss, c1, c2, n = _eagle_losses(head, lm, _eagle_batch(corpus, batch, embed, labels), noise_std,
                                        settings.ce_weight)
        return loss, {"acc1": c1 / n, "acc2": c2 / n}
    return eagle


def _eagle_report(parts: EagleParts, target, split: tuple[list, list], coverage: float,
                  settings: TrainSettings) -> dict:
    """The training report: sizes, vocabulary, held-out accuracy (EAGLE-1's two-step figures where they apply,
    and the unrolled per-position figures of :func:`unrolled_accuracy` for every recipe), settings. ``split`` is
    (training sequences, held-out sequences) as :func:`_split` gives them."""
    head, corpus = parts.head, parts.corpus
    train, hold = split
    unrolled = unrolled_accuracy(head, target, corpus, hold)
    if settings.recipe == "eagle":
        acc1, acc2 = _eagle_accuracy(parts, hold)
    else:
        acc1, acc2 = unrolled["per_step"][:2]
    vocab = head.vocab_ids
    return {"kind": "eagle", "recipe": settings.recipe, "positions": corpus.num_positions,
            "train_sequences": len(train), "holdout_sequences": len(hold), "vocab": int(vocab.numel()),
            "vocab_coverage": round(coverage, 4), "holdout_acc_token1": round(acc1, 4),
            "holdout_acc_token2": round(acc2, 4), "holdout_acc_per_step": [round(a, 4) for a in unrolled["per_step"]],
            "holdout_chain_accepted": round(unrolled["chain"], 3), "parameters": parameter_count(head),
            "settings": asdict(settings)}


@torch.no_grad()
def _eagle_accuracy(parts: EagleParts, hold: list[tuple[int, int, int]]) -> tuple[float, float]:
    """EAGLE-1's held-out accuracy of drafted positions 1 and 2 on the reply tokens of ``hold``."""
    c1 = c2 = n = 0
    for batch in _batches(hold, 4096, torch.Generator().manual_seed(1)):
        tensors = _eagle_batch(parts.corpus, batch, parts.embed, parts.labels, reply_only=True)
        _, a1, a2, count = _eagle_losses(parts.head, parts.lm, tensors, 0.0)
        c1, c2, n = c1 + a1, c2 + a2, n + count
    return c1 / max(1, n), c2 / max(1, n)


# ------------------------------------------------------------------------------------------------ Medusa

def _medusa_rows(corpus: Corpus, seqs: list[tuple[int, int, int]], num_heads: int, labels: torch.Tensor,
                 reply_only: bool = False):
    """Positions t with (labels (P, num_heads), inside (P, num_heads)): label i is y_{t+1+i} as a draft-vocabulary
    index (-100 when outside the draft vocabulary or past the sequence end); inside marks t+1+i < end."""
    starts, ys, insides = [], [], []
    for a, b, r in seqs:
        t = torch.arange(max(a, r - 1) if reply_only else a, b - 1)
        y = torch.full((t.numel(), num_heads), -100, dtype=torch.long)
        inside = torch.zeros((t.numel(), num_heads), dtype=torch.bool)
        for i in range(num_heads):
            ok = t + 1 + i < b
            y[ok, i] = labels[corpus.top1[t[ok] + 1 + i]]
            inside[:, i] = ok
        starts.append(t)
        ys.append(y)
        insides.append(inside)
    return torch.cat(starts), torch.cat(ys), torch.cat(insides)


def train_medusa(target, corpus: Corpus, settings: TrainSettings, checkpoint: Path | None = None,
                 progress: Progress | None = None) -> tuple[MedusaHeads, dict]:
    """Train :class:`MedusaHeads` for ``target`` on ``corpus``; returns the heads (eval mode) and a report with
    held-out accuracy per head."""
    t_start = time.perf_counter()
    settings = replace(settings, epochs=settings.epochs or EPOCHS["medusa"])
    start = start_state(settings.start_from, target, "medusa")
    vocab, coverage = draft_vocabulary(corpus, settings.vocab_size) if start is None else start.vocab(corpus)
    labels = _label_map(vocab, target.vocab_size)
    heads = new_medusa_heads(target.model, settings.medusa_heads, vocab).train()
    if start is not None:
        start.load_into(heads)
    lm = DraftLMHead(target.model.get_output_embeddings().weight, vocab)
    train, hold = _split(corpus, settings.holdout, settings.seed)
    rows, ys, _ = _medusa_rows(corpus, train, settings.medusa_heads, labels)
    opt = torch.optim.AdamW(heads.parameters(), lr=settings.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(settings.seed)
    per_epoch = math.ceil(rows.numel() / settings.batch_tokens)
    total = per_epoch * settings.epochs
    step = _resume(checkpoint, heads, opt)
    weights = torch.tensor([0.8 ** i for i in range(settings.medusa_heads)])
    bar = _bar(total, step, "train medusa")
    perms = [torch.randperm(rows.numel(), generator=g) for _ in range(settings.epochs)]
    for s in range(step, total):
        perm = perms[s // per_epoch]
        idx = perm[(s % per_epoch) * settings.batch_tokens:(s % per_epoch + 1) * settings.batch_tokens]
        for group in opt.param_groups:
            group["lr"] = _lr(s, total, settings.lr)
        out = heads(corpus.features[rows[idx]].float())  # (B, heads, H)
        logits = lm.subset_logits(out)
        y = ys[idx]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100, reduction="none")
        ce = ce.view(y.shape)
        per_head = (ce * (y >= 0)).sum(0) / (y >= 0).sum(0).clamp(min=1)
        loss = (per_head * weights).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.update(1)
        bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        if checkpoint is not None and (s + 1) % 100 == 0:
            _save_checkpoint(checkpoint, heads, opt, s + 1)
    if checkpoint is not None and total % 100 and step < total:
        _save_checkpoint(checkpoint, heads, opt, total)  # the finished state
    bar.close()
    heads.eval()
    acc = _medusa_accuracy(heads, lm, corpus, hold, labels, settings.medusa_heads)
    report = {"kind": "medusa", "positions": corpus.num_positions, "train_sequences": len(train),
              "holdout_sequences": len(hold), "vocab": 0 if vocab is None else int(vocab.numel()),
              "vocab_coverage": round(coverage, 4), "holdout_acc_per_head": [round(a, 4) for a in acc],
              "parameters": parameter_count(heads), "minutes": round((time.perf_counter() - t_start) / 60, 1),
              "settings": asdict(settings)}
    _say(progress, "medusa: held-out accuracy per head " + ", ".join(f"{a:.1%}" for a in acc))
    return heads.requires_grad_(False), report


@torch.no_grad()
def _medusa_accuracy(heads, lm, corpus, hold, labels, num_heads) -> list[float]:
    rows, ys, inside = _medusa_rows(corpus, hold, num_heads, labels, reply_only=True)
    pred = lm.subset_logits(heads(corpus.features[rows].float())).argmax(-1)
    hits = (pred == ys) & inside
    return [float(hits[:, i].sum()) / max(1, int(inside[:, i].sum())) for i in range(num_heads)]


# ------------------------------------------------------------------------------------------------ plumbing

def _bar(total: int, initial: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True)


def _resume(checkpoint: Path | None, module: torch.nn.Module, opt) -> int:
    if checkpoint is None or not checkpoint.exists():
        return 0
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    module.load_state_dict(state["module"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])


def _save_checkpoint(checkpoint: Path, module, opt, step: int) -> None:
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint.with_suffix(".tmp")
    torch.save({"module": module.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp)
    tmp.replace(checkpoint)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


@dataclass(frozen=True)
class TrainData:
    """Where :func:`run_training` finds its data and keeps its checkpoint.

    Attributes:
        folder: a cache-form folder (``ids-*.safetensors``), made when missing (None: ``<cache>/distill[-part3]``).
        sets: committed set folders (:mod:`specviz.training.dataset`, e.g. ``data/distill/part3``); when given,
            nothing is generated and every kind's features come from a prefill.
        forms: part-three forms to train on (indices into ``FORMS_3``; None: all).
        checkpoint: the checkpoint to resume from and keep (it can be committed; a rerun of a finished training
            then only writes the head). None: ``<data>/ckpt-<kind>-seed<seed>.pt``, removed when training ends.
        prefill_cache: with ``sets``, a file that keeps the prefill for the next kind trained on the same sets
            (:func:`cached_prefill`: made with EAGLE-3's fused layers too, so eagle, eagle3 and medusa share one
            prefill, unless they would not fit the memory); None: prefill in memory only.
    """

    folder: Path | None = None
    sets: tuple[Path, ...] = ()
    forms: tuple[int, ...] | None = None
    checkpoint: Path | None = None
    prefill_cache: Path | None = None


def cached_prefill(target, sets: list[Path], forms: tuple[int, ...] | None, cache: Path,
                   progress: Progress | None = None, fused: bool | None = None) -> Corpus:
    """The :func:`prefill_corpus` of ``sets`` read from ``cache`` when it was made for the same sets, forms, target
    and shard files, else made and written there (``torch.save``); a cache made for anything else is replaced.

    ``fused``: keep the hidden states EAGLE-3 fuses too (True), so every kind shares one prefill (about 4.6 KB per
    position for SmolLM2-135M: 4 GB for 891 k positions), or not (False: 1.2 KB per position; a cache with them
    serves as well); None decides by memory (:func:`fused_prefill_fits`): without them when the prefill's peak would
    not fit (all five committed sets, 3.06 M positions, would need about 28 GB with them), and says so.
    """
    every = fusion_layers(target.model.config.num_hidden_layers)
    if fused is None:
        fused, why = fused_prefill_fits(target, sets)
        if not fused:
            _say(progress, f"prefill: without EAGLE-3's fused layers ({why}); `train eagle3` on these sets prefills "
                           f"again")
    layers = every if fused else ()
    key = {"sets": [str(s) for s in sets], "forms": list(forms) if forms is not None else None,
           "target": target_signature(target.model), "layers": list(layers),
           "shards": [[p.name, p.stat().st_size] for s in sets for p in id_shard_paths(s)]}
    return kept_prefill(cache, key, lambda: prefill_corpus(target, sets, layers, forms, progress),
                        lambda c: c.num_positions, progress, also=() if fused else (dict(key, layers=list(every)),))


def fused_prefill_fits(target, sets: list[Path]) -> tuple[bool, str]:
    """Whether a prefill of ``sets`` with EAGLE-3's fused layers fits this machine's available memory (with a
    quarter to spare), and if not why, in words: its peak is about twice the kept tensors (the per-sequence pieces and
    their concatenation), 2 x (8 H + 16) bytes per position in float16 (H the target's width). True when the
    available memory is unknown."""
    from specviz.runtime.presets import available_bytes

    width = int(target.model.config.hidden_size)
    positions = sum(int(load_id_shard(p)["ids"].numel()) for s in sets for p in id_shard_paths(s))
    peak = 2 * positions * (8 * width + 16)
    free = available_bytes(torch.device("cpu"))
    if not free or peak <= 0.75 * free:
        return True, ""
    return False, (f"{positions:,} positions would need about {peak / 1e9:.0f} GB with them, "
                   f"{free / 1e9:.0f} GB is available")


def run_training(kind: str, target, out: Path, *, settings: TrainSettings = TrainSettings(),
                 corpus_settings: CorpusSettings = CorpusSettings(), data: TrainData = TrainData(),
                 progress: Progress | None = None) -> dict:
    """The whole recipe for ``kind`` ("eagle", "eagle3" or "medusa"): data (made or resumed, or committed sets
    read: :class:`TrainData`), training (resumed from the checkpoint when present), held-out report, head file at
    ``out``. Returns the report. "eagle3" trains an EAGLE head with the EAGLE-3 recipe on features recomputed by a
    prefill (kept in memory, no feature files), optionally on the part-three ``data.forms`` only.

    Raises:
        ValueError: unknown kind.
    """
    if kind not in ("eagle", "eagle3", "medusa"):
        raise ValueError(f"unknown head kind {kind!r}; choose eagle, eagle3 or medusa")
    layers = fusion_layers(target.model.config.num_hidden_layers) if kind == "eagle3" else ()
    if kind == "eagle3":
        settings = replace(settings, recipe="eagle3")
    forms, sets = data.forms, list(data.sets)
    if sets:
        _say(progress, f"data: {', '.join(str(s) for s in sets)} (committed id shards, features by a prefill)")
        folder = sets[0]
        corpus = (cached_prefill(target, sets, forms, data.prefill_cache, progress,
                                 fused=True if kind == "eagle3" else None) if data.prefill_cache
                  else prefill_corpus(target, sets, layers, forms, progress))
    else:
        folder = data.folder or data_dir(corpus_settings.prompt_set)
        _say(progress, f"data: {folder}")
        generate_corpus(target, folder, corpus_settings, progress)
        if kind == "eagle3":
            corpus = prefill_corpus(target, folder, layers, forms, progress)
        else:
            extract_features(target, folder, progress)
            corpus = load_corpus(folder)
    _say(progress, f"data: {corpus.num_positions} positions in {corpus.offsets.numel() - 1} sequences")
    if settings.epochs is None:
        settings = replace(settings, epochs=EPOCHS["medusa" if kind == "medusa" else "eagle"])
    given = data.checkpoint is not None
    checkpoint = data.checkpoint or folder / f"ckpt-{kind}-seed{settings.seed}.pt"
    trainer = train_medusa if kind == "medusa" else train_eagle
    head, report = trainer(target, corpus, settings, checkpoint, progress)
    report["data"] = ({"sets": [str(s) for s in sets]} if sets else asdict(corpus_settings)) | (
        {"forms": list(forms)} if forms is not None else {})
    save_heads(head, out, target.model, report)
    if checkpoint.exists() and not given:
        checkpoint.unlink()  # finished: a rerun starts a fresh training
    _say(progress, f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return report
