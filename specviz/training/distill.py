"""Self-distillation data for trained drafters: the target's own generations and its features.

Recipe (``python -m specviz train eagle|medusa`` runs it when the data is missing):
1. Prompts: :func:`distill_prompts` builds a fixed, seeded set of prompts we wrote (everyday chat, explanation,
   summarization, translation, code and code editing, math, rewriting, grounded questions). None of them is in
   the benchmark suite (``../shared/prompts`` / ``assets/prompts.jsonl``, now part of ``assets/suite.jsonl``), so the benchmark measures held-out
   prompts; part two's task forms follow the suite's categories, though, and a few of its instruction lines are
   worded as suite prompts' first lines (docs/heads.md lists them).
2. Generation (:func:`generate_corpus`): the target answers each prompt with its chat template (at most 192 new
   tokens) in batches of 32, one shard file per batch: the first 1280 prompts sampled (temperature 0.7, top-p
   0.95: varied replies to a smaller template set), the next 1280 greedily (all different prompts; the replies a
   greedy run sees, as the benchmark's are). The target's own outputs are the data, so a head learns the
   target's habits rather than another model's.
3. Features (:func:`extract_features`): one target forward over each full sequence (prompt + reply) gives, per
   position t, the last hidden feature f_t (after the final norm: ``logits_t = lm_head(f_t)``, stored as
   float16) and the target's greedy next token ``argmax logits_t`` (the label the heads are trained to match,
   because greedy verification accepts exactly that token).

Part three (``CorpusSettings(prompt_set="part3")``, :func:`part_three_prompts`): forms of request beyond the
suite's task forms (everyday requests, open questions, stories, dialogues, instructions with constraints,
multi-turn follow-ups written as real chat turns, descriptions, letters), all greedy, each shard recording every
sequence's form so that training can hold whole forms out. It is stored as token ids only: the EAGLE-3 recipe
recomputes the features by a prefill at training time (:func:`prefill_corpus`, kept in memory for the run).

Part four (``prompt_set="part4"``, :func:`part_four_prompts`): the suite's own eight task forms with contents of
their own (long structured documents, conversations written out in one message, contexts of several facts), all
greedy, forms stored after part three's (:data:`ALL_FORMS`); no suite prompt or eight-word run of one is used.

Part five (``prompt_set="part5"``, :func:`part_five_prompts`): long structured documents of 2.4-3.4 k characters
with varied tasks (10 prompts in 16), plus rag over medium contexts, short-answer qa, multi-sentence translation and
chat, the suite's forms with the lowest acceptance; all greedy, forms stored after part four's, the suite held out.

Part six, in two stages: ``prompt_set="part6-docs"`` (:func:`part_six_doc_prompts`), short texts the target writes
about made-up names, sampled; ``prompt_set="part6"``, one task over each of those texts (follow-up edits in the suite's
conversation frame, summaries, questions from the text alone, translation, rewrites), greedy, its prompts built from
the first stage's committed shards (:func:`specviz.training.dataset.set_prompts`).

Every step writes one file per shard and skips shards already on disk, so an interrupted run resumes where it
stopped. The committed form of the same shards (uint16 ids in ``data/distill/<set>/``, made by ``python -m specviz
train data``) is :mod:`specviz.training.dataset`; :func:`prefill_corpus` reads both forms. Cache shards live in
``<cache>/distill/`` (part three: ``<cache>/distill-part3/``; see
:func:`specviz.runtime.models.cache_dir`). The prompts themselves are written in :mod:`specviz.training.prompts` (parts one
and two), :mod:`specviz.training.prompts_part3`, :mod:`specviz.training.prompts_part4` and
:mod:`specviz.training.prompts_part5` and :mod:`specviz.training.prompts_part6`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch
from safetensors.torch import load_file, save_file

from specviz.training.idshards import id_shard_paths, load_id_shard
from specviz.training.prompts import PART_ONE, distill_prompts  # noqa: F401  (re-exported)
from specviz.training.prompts_part3 import FORMS_3, part_three_prompts  # noqa: F401  (re-exported)
from specviz.training.prompts_part4 import FORMS_4, part_four_prompts  # noqa: F401  (re-exported)
from specviz.training.prompts_part5 import FORMS_5, part_five_prompts  # noqa: F401  (re-exported)
from specviz.training.prompts_part6 import ALL_FORMS, FORMS_6, part_six_doc_prompts  # noqa: F401  (re-exported)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CorpusSettings:
    """How :func:`generate_corpus` samples (defaults are the shipped heads' recipe)."""

    num_prompts: int = 2560
    batch_size: int = 32
    max_new_tokens: int = 192
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    sampled_prompts: int = PART_ONE  # prompts before this index are sampled (temperature, top-p), later ones greedy
    prompt_set: str = "default"  # "default": parts one and two (the shipped heads); "part3"/"part4"/"part5"/"part6":
    # all greedy; "part6-docs": all sampled (part six's first stage)

    def __post_init__(self) -> None:
        if self.prompt_set not in PROMPT_SETS:
            raise ValueError(f"unknown prompt set {self.prompt_set!r}; choose one of {', '.join(PROMPT_SETS)}")


PROMPT_SETS = ("default", "part3", "part4", "part5", "part6-docs", "part6")
SAMPLED_SETS = ("part6-docs",)  # sets answered by sampling throughout (the default set samples part one only)


def corpus_prompts(settings: CorpusSettings) -> list[tuple[int, str | tuple[tuple[str, str], ...]]]:
    """The (form, prompt) pairs ``settings`` asks for: parts one and two (form -1: not recorded), part three, four,
    five or six's first stage (form = index into :data:`ALL_FORMS`).

    Raises:
        ValueError: ``part6``, whose prompts need the first stage's texts (:func:`specviz.training.dataset.set_prompts`).
    """
    if settings.prompt_set == "part3":
        return part_three_prompts(settings.num_prompts, settings.seed)
    if settings.prompt_set == "part4":
        return part_four_prompts(settings.num_prompts, settings.seed)
    if settings.prompt_set == "part5":
        return part_five_prompts(settings.num_prompts, settings.seed)
    if settings.prompt_set == "part6-docs":
        return part_six_doc_prompts(settings.num_prompts, settings.seed)
    if settings.prompt_set == "part6":
        raise ValueError("part six's prompts are built from its first stage's texts: "
                         "specviz.training.dataset.set_prompts")
    return [(-1, p) for p in distill_prompts(settings.num_prompts, settings.seed)]


def encode_turns(tokenizer, prompt: str | tuple[tuple[str, str], ...]) -> list[int]:
    """Token ids of a prompt with the chat template: a string is one user message
    (:func:`specviz.runtime.models.encode_prompt`); chat turns ((role, text), ...) are written as those messages, followed
    by the assistant's generation prompt. Raises ValueError for empty turns."""
    from specviz.runtime import models


    if isinstance(prompt, str):
        return models.encode_prompt(tokenizer, prompt)
    return models.encode_turns(tokenizer, list(prompt))


def data_dir(prompt_set: str = "default") -> Path:
    """Where the distillation shards of a prompt set are kept (``<specviz cache>/distill``; part three's in
    ``<specviz cache>/distill-part3``, as its shard numbers restart at 0)."""
    from specviz.runtime.models import cache_dir

    return cache_dir() / ("distill" if prompt_set == "default" else f"distill-{prompt_set}")


def _shard_path(folder: Path, index: int, kind: str) -> Path:
    return folder / f"{kind}-{index:04d}.safetensors"


def _save(tensors: dict, path: Path) -> None:
    """Write a shard atomically (a temporary file renamed into place), so an interrupted run leaves no half shard."""
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp))
    tmp.replace(path)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def kept_prefill(cache: Path, key: dict, make: Callable[[], object], count: Callable[[object], int],
                 progress: Progress | None = None, also: tuple[dict, ...] = ()):
    """A prefill kept on disk: the object stored in ``cache`` when it was stored with ``key`` (a dict of what made
    it: sets, shard files, target...) or one of ``also`` (keys of prefills that hold at least as much), else
    ``make()``'s, written there atomically (``torch.save`` of {key, corpus} to a ``.tmp`` renamed into place) and
    returned. ``count(corpus)`` gives its positions for the progress line."""
    if cache.exists():
        stored = torch.load(cache, weights_only=False)
        if stored.get("key") == key or stored.get("key") in also:
            _say(progress, f"prefill: read from {cache} ({count(stored['corpus'])} positions)")
            return stored["corpus"]
        _say(progress, f"prefill: {cache} was made for other data; making it again")
    corpus = make()
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(cache.name + ".tmp")
    torch.save({"key": key, "corpus": corpus}, tmp)
    tmp.replace(cache)
    _say(progress, f"prefill: kept in {cache} ({cache.stat().st_size / 1e9:.2f} GB)")
    return corpus


@torch.inference_mode()
def generate_corpus(target, folder: Path, settings: CorpusSettings = CorpusSettings(),
                    progress: Progress | None = None, prompts: list | None = None) -> list[Path]:
    """Generate the target's replies to the prompts of ``settings`` (:func:`corpus_prompts`), one
    ``ids-NNNN.safetensors`` shard per batch of ``settings.batch_size``.

    Each shard holds ``ids`` (int32, all sequences laid end to end: prompt then reply, cut after the first EOS),
    ``offsets`` (int64, N+1 sequence boundaries) and ``prompt_lens`` (int32, N); part three's also ``forms``
    (int32, N: index into :data:`FORMS_3`). Token ids only: features come from a prefill (:func:`extract_features`
    or :func:`prefill_corpus`). Existing shards are kept (resume). Returns the shard paths in order.

    ``prompts`` replaces the set's prompts with given (form, prompt) pairs (held-out evaluation sets, say; they
    are answered greedily, and their forms are stored).
    """
    folder.mkdir(parents=True, exist_ok=True)
    given = prompts is not None
    prompts = prompts if given else corpus_prompts(settings)
    paths = []
    batches = range(0, len(prompts), settings.batch_size)
    for shard, start in enumerate(batches):
        path = _shard_path(folder, shard, "ids")
        paths.append(path)
        if path.exists():
            continue
        t0 = time.perf_counter()
        tensors = make_shard(target, prompts, settings, shard, given)
        _save(tensors, path)
        new = int(tensors["offsets"][-1]) - int(tensors["prompt_lens"].sum())
        _say(progress, f"shard {shard + 1}/{len(batches)}: {new} new tokens in {time.perf_counter() - t0:.0f} s")
    return paths


def make_shard(target, prompts: list, settings: CorpusSettings, shard: int, given: bool = False
               ) -> dict[str, torch.Tensor]:
    """Shard ``shard`` of the (form, prompt) pairs ``prompts`` (those from ``shard * settings.batch_size`` on, one
    batch): ``ids`` int32, ``offsets`` int64, ``prompt_lens`` int32 and, for part three or ``given`` prompts,
    ``forms`` int32. Seeded per shard (``seed * 100003 + shard``), so a shard made alone equals the same shard of a
    whole run on the same machine kind; sampled only in part one of the default set and in :data:`SAMPLED_SETS`."""
    start = shard * settings.batch_size
    torch.manual_seed(settings.seed * 100003 + shard)
    sampled = not given and (settings.prompt_set in SAMPLED_SETS
                             or settings.prompt_set == "default" and start < settings.sampled_prompts)
    group = prompts[start:start + settings.batch_size]
    tensors = _generate_shard(target, [p for _, p in group], settings, sampled)
    if given or settings.prompt_set != "default":
        tensors["forms"] = torch.tensor([f for f, _ in group], dtype=torch.int32)
    return tensors


def _generate_shard(target, prompts: list, settings: CorpusSettings, sampled: bool) -> dict[str, torch.Tensor]:
    """One batch of replies (left-padded batched generation; sampled with temperature / top-p, or greedy) as the
    shard tensors ids / offsets / prompt_lens."""
    tok = target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else target.eos_token_ids[0]
    eos = set(target.eos_token_ids)
    encoded = [encode_turns(tok, p) for p in prompts]
    width = max(len(e) for e in encoded)
    input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, ids in enumerate(encoded):  # left padding, as batched generation needs
        input_ids[row, width - len(ids):] = torch.tensor(ids)
        mask[row, width - len(ids):] = 1
    if sampled:
        how = dict(do_sample=True, temperature=settings.temperature, top_p=settings.top_p, top_k=0)
    else:  # greedy: the replies the benchmark's greedy runs see
        how = dict(do_sample=False)
    out = target.model.generate(
        input_ids=input_ids.to(target.device), attention_mask=mask.to(target.device), **how,
        max_new_tokens=settings.max_new_tokens, pad_token_id=pad,
    )
    seqs, prompt_lens = [], []
    for row, ids in enumerate(encoded):
        reply = []
        for token in out[row, width:].tolist():
            reply.append(token)
            if token in eos:
                break
        seqs.append(ids + reply)
        prompt_lens.append(len(ids))
    offsets = [0]
    for s in seqs:
        offsets.append(offsets[-1] + len(s))
    return {
        "ids": torch.tensor([t for s in seqs for t in s], dtype=torch.int32),
        "offsets": torch.tensor(offsets, dtype=torch.int64),
        "prompt_lens": torch.tensor(prompt_lens, dtype=torch.int32),
    }


@torch.inference_mode()
def extract_features(target, folder: Path, progress: Progress | None = None, batch_size: int = 8) -> list[Path]:
    """For every ``ids`` shard, write ``feats-NNNN.safetensors``: ``features`` (P, H) float16, the target's final
    normed hidden state at every position, and ``top1`` (P,) int32, the target's greedy next token there.

    Sequences run one batch at a time, right-padded with an attention mask. Existing shards are kept (resume).
    """
    paths = []
    ids_paths = sorted(folder.glob("ids-*.safetensors"))
    for n, ids_path in enumerate(ids_paths):
        path = ids_path.with_name(ids_path.name.replace("ids-", "feats-"))
        paths.append(path)
        if path.exists():
            continue
        t0 = time.perf_counter()
        data = load_file(str(ids_path))
        ids, offsets = data["ids"].long(), data["offsets"].tolist()
        seqs = [ids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        feats, top1, _ = _prefill(target, seqs, batch_size)
        _save({"features": torch.cat(feats), "top1": torch.cat(top1)}, path)
        _say(progress, f"features {n + 1}/{len(ids_paths)}: {offsets[-1]} positions in {time.perf_counter() - t0:.0f} s")
    return paths


def padded_batch(group: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of token ids right-padded into (len(group), longest) int64 ids and their attention mask (1 = real)."""
    width = max(len(s) for s in group)
    batch = torch.zeros((len(group), width), dtype=torch.long)
    mask = torch.zeros((len(group), width), dtype=torch.long)
    for row, s in enumerate(group):
        batch[row, :len(s)], mask[row, :len(s)] = s, 1
    return batch, mask


@torch.inference_mode()
def length_batches(seqs: list[torch.Tensor], batch_size: int) -> list[list[int]]:
    """Indices of ``seqs`` in batches of ``batch_size`` sequences of similar length (shortest first), so that a
    right-padded prefill pads little."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def _prefill(target, seqs: list[torch.Tensor], batch_size: int, layers: tuple[int, ...] = ()
             ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """One target forward per batch of sequences (right-padded, attention mask): per sequence of length n, the
    final features (n, H) float16, the greedy next tokens (n,) int32 and, when ``layers`` lists hidden-state
    indices (0 = embeddings, i = output of layer i), their concatenation (n, len(layers) * H) float16. The lists
    follow ``seqs``' order; batches are formed from sequences of similar length (less padding: 1.3x the
    positions per second of batches in data order, measured on the 2-core CPU)."""
    feats, top1, fused = [None] * len(seqs), [None] * len(seqs), [None] * len(seqs) if layers else []
    for picked in length_batches(seqs, batch_size):
        batch, mask = padded_batch([seqs[i] for i in picked])
        out = target.model(input_ids=batch.to(target.device), attention_mask=mask.to(target.device),
                           output_hidden_states=True, use_cache=False)
        hidden = out.hidden_states[-1]
        best = out.logits.argmax(dim=-1)
        stacked = torch.cat([out.hidden_states[i] for i in layers], dim=-1) if layers else None
        for row, i in enumerate(picked):
            n = len(seqs[i])
            feats[i] = hidden[row, :n].to(torch.float16).cpu()
            top1[i] = best[row, :n].to(torch.int32).cpu()
            if stacked is not None:
                fused[i] = stacked[row, :n].to(torch.float16).cpu()
        del out, hidden, best, stacked
        release_freed_memory()
    return feats, top1, fused


def release_freed_memory() -> bool:
    """Hand the memory the C allocator holds free back to the system (glibc's ``malloc_trim``), as a prefill does
    after each batch: its batches grow (shortest first), so freed blocks are too small for the next batch's and
    pile up. Seen on all five committed sets (3.06 M positions, features 3.5 GB): 11.4 GB resident after 57 % of
    the positions, 6.4 GB right after one trim. True when trimmed; False where there is no glibc."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, looked up once; None without it."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def prefill_corpus(target, folder: Path | list[Path], layers: tuple[int, ...] = (), forms: tuple[int, ...] | None = None,
                   progress: Progress | None = None, batch_size: int = 8) -> Corpus:
    """A :class:`Corpus` from the ``ids`` shards of ``folder`` (or of several folders, in order: committed
    ``ids-*.npz`` sets under ``data/distill`` or cache ``ids-*.safetensors`` ones, :func:`id_shard_paths`) alone: features recomputed by a prefill and kept in
    memory for the run (no feature files), optionally only the sequences whose form is in ``forms`` (part three),
    with the hidden states ``layers`` (for EAGLE-3 heads, :func:`specviz.drafters.networks.fusion_layers`) in
    ``Corpus.layer_features``. Cost: one forward over every kept token (SmolLM2-135M on 2 quiet CPU threads:
    about 650 positions/s, 23 minutes for 891 k positions).

    Raises:
        FileNotFoundError: no ``ids`` shard in ``folder``, or no sequence of the forms asked for.
    """
    seqs, prompt_lens, kinds = [], [], []
    folders = [folder] if isinstance(folder, Path) else list(folder)
    for ids_path in [p for f in folders for p in id_shard_paths(f)]:
        d = load_id_shard(ids_path)
        ids, bounds = d["ids"], d["offsets"].tolist()
        for i, form in enumerate(d["forms"].tolist()):
            if forms is None or form in forms:
                seqs.append(ids[bounds[i]:bounds[i + 1]])
                prompt_lens.append(int(d["prompt_lens"][i]))
                kinds.append(form)
    if not seqs:
        raise FileNotFoundError(f"no distillation sequences{' of those forms' if forms else ''} in "
                                f"{', '.join(str(f) for f in folders)}; "
                                f"make them with `python -m specviz train`")
    t0 = time.perf_counter()
    feats, top1, fused = _prefill(target, seqs, batch_size, layers)
    offsets = torch.tensor([0] + [len(s) for s in seqs]).cumsum(0)
    _say(progress, f"prefill: {int(offsets[-1])} positions of {len(seqs)} sequences in {time.perf_counter() - t0:.0f} s")
    return Corpus(torch.cat(seqs), torch.cat(feats), torch.cat(top1).long(), offsets, torch.tensor(prompt_lens),
                  torch.cat(fused) if fused else None, torch.tensor(kinds), tuple(layers))


@dataclass
class Corpus:
    """The distillation data in memory, sequences laid end to end.

    Attributes:
        ids: (P,) int64 token ids.
        features: (P, H) float16 target features f_t.
        top1: (P,) int64 target greedy next token after position t.
        offsets: (N+1,) int64 sequence boundaries.
        prompt_lens: (N,) int64 prompt length of each sequence (the reply follows).
        layer_features: (P, 3H) float16 hidden states of the layers an EAGLE-3 head fuses, side by side, or None.
        forms: (N,) int64 part-three form of each sequence (index into :data:`FORMS_3`; -1 = not recorded), or None.
        layers: the hidden-state indices in ``layer_features`` (empty without them).
    """

    ids: torch.Tensor
    features: torch.Tensor
    top1: torch.Tensor
    offsets: torch.Tensor
    prompt_lens: torch.Tensor
    layer_features: torch.Tensor | None = None
    forms: torch.Tensor | None = None
    layers: tuple[int, ...] = ()

    @property
    def num_positions(self) -> int:
        return int(self.ids.numel())

    def sequences(self) -> Iterator[tuple[int, int]]:
        """(start, end) of each sequence."""
        bounds = self.offsets.tolist()
        for i in range(len(bounds) - 1):
            yield bounds[i], bounds[i + 1]


def load_corpus(folder: Path) -> Corpus:
    """Read every (ids, feats) shard pair in ``folder`` into one :class:`Corpus`.

    Raises:
        FileNotFoundError: if there is no complete shard pair.
    """
    ids, feats, top1, offsets, prompt_lens = [], [], [], [torch.zeros(1, dtype=torch.int64)], []
    base = 0
    for ids_path in sorted(folder.glob("ids-*.safetensors")):
        feats_path = ids_path.with_name(ids_path.name.replace("ids-", "feats-"))
        if not feats_path.exists():
            continue
        d, f = load_file(str(ids_path)), load_file(str(feats_path))
        ids.append(d["ids"].long())
        feats.append(f["features"])
        top1.append(f["top1"].long())
        offsets.append(d["offsets"][1:] + base)
        prompt_lens.append(d["prompt_lens"].long())
        base += int(d["offsets"][-1])
    if not ids:
        raise FileNotFoundError(f"no distillation data in {folder}; run `python -m specviz train` to make it")
    return Corpus(torch.cat(ids), torch.cat(feats), torch.cat(top1), torch.cat(offsets), torch.cat(prompt_lens))
