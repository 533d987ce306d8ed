"""Self-distillation data for trained drafters: the target's own generations and its features.

Recipe (``python -m specviz train eagle|medusa`` runs it when the data is missing):
1. Prompts: :func:`distill_prompts` builds a fixed, seeded set of prompts we wrote (everyday chat, explanation,
   summarization, translation, code, math, rewriting, grounded questions). None of them is in the benchmark
   suite (``../shared/prompts`` / ``assets/prompts.jsonl``), so the benchmark measures held-out prompts.
2. Generation (:func:`generate_corpus`): the target samples a reply to each prompt with its chat template
   (temperature 0.7, top-p 0.95, at most 192 new tokens) in batches of 32, one shard file per batch. The
   target's own outputs are the data, so a head learns the target's habits rather than another model's.
3. Features (:func:`extract_features`): one target forward over each full sequence (prompt + reply) gives, per
   position t, the last hidden feature f_t (after the final norm: ``logits_t = lm_head(f_t)``, stored as
   float16) and the target's greedy next token ``argmax logits_t`` (the label the heads are trained to match,
   because greedy verification accepts exactly that token).

Every step writes one file per shard and skips shards already on disk, so an interrupted run resumes where it
stopped. Shards live in ``<cache>/distill/`` (see :func:`specviz.models.cache_dir`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch
from safetensors.torch import load_file, save_file

Progress = Callable[[str], None]

_TOPICS = [
    "photosynthesis", "the water cycle", "compound interest", "volcanoes", "the immune system", "black holes",
    "recycling plastic", "the French Revolution", "machine learning", "honey bees", "electric cars",
    "the printing press", "sleep", "coffee", "the Moon's phases", "rainbows", "vaccines", "the stock market",
    "coral reefs", "the Roman Empire", "solar panels", "earthquakes", "the human heart", "bread baking",
    "climate change", "the internet", "chess", "public libraries", "wind turbines", "the Olympic Games",
    "octopuses", "glaciers", "inflation", "the piano", "antibiotics", "deserts", "airplanes", "tea",
    "the Great Wall of China", "bicycles", "composting", "time zones", "DNA", "lightning", "the metric system",
    "rain forests", "museums", "penguins", "nuclear fusion", "mountains",
]
_CHAT = [
    "Give me three tips for staying focused while studying at home.",
    "What should I pack for a weekend camping trip?",
    "How can I make my mornings less stressful?",
    "Suggest a healthy breakfast I can make in ten minutes.",
    "I want to start running. How should I begin?",
    "What are some good ways to save money on groceries?",
    "How do I politely decline an invitation to a party?",
    "Recommend a few hobbies for someone who likes being outdoors.",
    "How can I keep a houseplant alive in a dark apartment?",
    "What is a good way to learn a new language as an adult?",
    "Help me plan a birthday dinner for four friends.",
    "How do I prepare for a job interview?",
    "What are some fun things to do on a rainy day?",
    "How can I get better at remembering names?",
    "Write a short, friendly message inviting my neighbours to a picnic.",
    "What should I consider before adopting a dog?",
]
_EXPLAIN = [
    "Explain {t} to a ten-year-old.",
    "What is {t}? Answer in a short paragraph.",
    "Give three interesting facts about {t}.",
    "Why does {t} matter? Explain briefly.",
    "Write a short paragraph about the history of {t}.",
    "What are the main advantages and disadvantages of {t}?",
    "Describe {t} in simple words.",
]
_SENTENCES = [
    "The city council voted on Tuesday to extend the opening hours of the central park.",
    "A local bakery has started donating its unsold bread to a nearby shelter every evening.",
    "Scientists observed a rare bird species nesting in the valley for the first time in forty years.",
    "The new bus line connects the university with the train station in under fifteen minutes.",
    "Heavy rain caused the river to rise, but the flood barriers held through the night.",
    "Students at the school built a small weather station and share their data online.",
    "The museum reopened after two years of renovation with a new wing for modern art.",
    "Farmers in the region report that the apple harvest is larger than last year.",
    "A volunteer group cleaned more than two tonnes of rubbish from the beach on Sunday.",
    "The library introduced a programme that lends tools as well as books.",
    "Engineers finished testing the bridge, which will open to cyclists next month.",
    "The town's football team won the regional final after a penalty shoot-out.",
]
_LANGS = ["French", "Spanish", "German", "Italian", "Portuguese"]
_CODE = [
    "Write a Python function that returns the largest number in a list.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python function that counts the vowels in a sentence.",
    "Write a Python function that reverses the words in a sentence.",
    "Write a Python function that returns the factorial of n.",
    "Write a Python function that removes duplicates from a list while keeping the order.",
    "Write a Python function that converts Celsius to Fahrenheit.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Write a Python class for a simple bank account with deposit and withdraw methods.",
    "Write a JavaScript function that capitalizes the first letter of each word.",
    "Write a SQL query that returns the ten most recent orders from an orders table.",
    "Explain what a Python list comprehension is, with an example.",
    "Write a Python function that reads a text file and counts its lines.",
    "What is the difference between a list and a tuple in Python?",
    "Write a Python function that checks whether a number is prime.",
]
_REWRITE = [
    "Rewrite this sentence to sound more formal: {s}",
    "Turn this sentence into a question: {s}",
    "Summarize in a few words: {s}",
    "Write a headline for this news item: {s}",
]


def _math_prompt(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 40), rng.randint(2, 30), rng.randint(2, 9)
    forms = [
        f"A shop sells pencils for {c} dollars each. How much do {a} pencils cost? Show your steps.",
        f"Tom has {a} apples and gives away {min(a - 1, b)}. How many apples does he have left?",
        f"What is {a} times {b}? Explain how you calculated it.",
        f"A train travels {a * 10} kilometres in {c} hours. What is its average speed?",
        f"Solve for x: {c}x + {a} = {a + c * b}.",
        f"A rectangle is {a} cm long and {b} cm wide. What are its area and perimeter?",
        f"If a recipe needs {c} eggs for {b} people, how many eggs are needed for {b * 3} people?",
    ]
    return rng.choice(forms)


def distill_prompts(count: int = 1280, seed: int = 0) -> list[str]:
    """The fixed self-distillation prompt set: ``count`` prompts drawn with ``seed`` from the templates above.

    The mix: a quarter explanations, and the rest split among chat, summarization, translation, code, math,
    rewriting and grounded questions. Deterministic for a given (count, seed).
    """
    rng = random.Random(seed)
    makers = [
        lambda: rng.choice(_EXPLAIN).format(t=rng.choice(_TOPICS)),
        lambda: rng.choice(_EXPLAIN).format(t=rng.choice(_TOPICS)),
        lambda: rng.choice(_CHAT),
        lambda: "Summarize the following in one or two sentences:\n" + " ".join(rng.sample(_SENTENCES, 4)),
        lambda: f"Translate into {rng.choice(_LANGS)}: {rng.choice(_SENTENCES)}",
        lambda: rng.choice(_CODE),
        lambda: _math_prompt(rng),
        lambda: rng.choice(_REWRITE).format(s=rng.choice(_SENTENCES)),
        lambda: ("Read the notes and answer the question.\nNotes: " + " ".join(rng.sample(_SENTENCES, 3))
                 + "\nQuestion: What happened, according to the notes?"),
    ]
    return [rng.choice(makers)() for _ in range(count)]


@dataclass(frozen=True)
class CorpusSettings:
    """How :func:`generate_corpus` samples (defaults are the shipped heads' recipe)."""

    num_prompts: int = 1280
    batch_size: int = 32
    max_new_tokens: int = 192
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0


def data_dir() -> Path:
    """Where the distillation shards are kept (``<specviz cache>/distill``)."""
    from specviz.models import cache_dir

    return cache_dir() / "distill"


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


@torch.inference_mode()
def generate_corpus(target, folder: Path, settings: CorpusSettings = CorpusSettings(),
                    progress: Progress | None = None) -> list[Path]:
    """Sample the target's replies to :func:`distill_prompts`, one ``ids-NNNN.safetensors`` shard per batch.

    Each shard holds ``ids`` (int32, all sequences laid end to end: prompt then reply, cut after the first EOS),
    ``offsets`` (int64, N+1 sequence boundaries) and ``prompt_lens`` (int32, N). Existing shards are kept
    (resume). Returns the shard paths in order.
    """
    from specviz.models import encode_prompt

    folder.mkdir(parents=True, exist_ok=True)
    prompts = distill_prompts(settings.num_prompts, settings.seed)
    tok = target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else target.eos_token_ids[0]
    eos = set(target.eos_token_ids)
    paths = []
    batches = range(0, len(prompts), settings.batch_size)
    for shard, start in enumerate(batches):
        path = _shard_path(folder, shard, "ids")
        paths.append(path)
        if path.exists():
            continue
        t0 = time.perf_counter()
        encoded = [encode_prompt(tok, p) for p in prompts[start:start + settings.batch_size]]
        width = max(len(e) for e in encoded)
        input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):  # left padding, as batched generation needs
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            mask[row, width - len(ids):] = 1
        torch.manual_seed(settings.seed * 100003 + shard)
        out = target.model.generate(
            input_ids=input_ids.to(target.device), attention_mask=mask.to(target.device), do_sample=True,
            temperature=settings.temperature, top_p=settings.top_p, top_k=0,
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
        _save({
            "ids": torch.tensor([t for s in seqs for t in s], dtype=torch.int32),
            "offsets": torch.tensor(offsets, dtype=torch.int64),
            "prompt_lens": torch.tensor(prompt_lens, dtype=torch.int32),
        }, path)
        new = offsets[-1] - sum(prompt_lens)
        _say(progress, f"shard {shard + 1}/{len(batches)}: {new} new tokens in {time.perf_counter() - t0:.0f} s")
    return paths


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
        feats, top1 = [], []
        for start in range(0, len(seqs), batch_size):
            group = seqs[start:start + batch_size]
            width = max(len(s) for s in group)
            batch = torch.zeros((len(group), width), dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for row, s in enumerate(group):
                batch[row, :len(s)] = s
                mask[row, :len(s)] = 1
            out = target.model(input_ids=batch.to(target.device), attention_mask=mask.to(target.device),
                               output_hidden_states=True, use_cache=False)
            hidden = out.hidden_states[-1]
            best = out.logits.argmax(dim=-1)
            for row, s in enumerate(group):
                feats.append(hidden[row, :len(s)].to(torch.float16).cpu())
                top1.append(best[row, :len(s)].to(torch.int32).cpu())
        _save({"features": torch.cat(feats), "top1": torch.cat(top1)}, path)
        _say(progress, f"features {n + 1}/{len(ids_paths)}: {offsets[-1]} positions in {time.perf_counter() - t0:.0f} s")
    return paths


@dataclass
class Corpus:
    """The distillation data in memory, sequences laid end to end.

    Attributes:
        ids: (P,) int64 token ids.
        features: (P, H) float16 target features f_t.
        top1: (P,) int64 target greedy next token after position t.
        offsets: (N+1,) int64 sequence boundaries.
        prompt_lens: (N,) int64 prompt length of each sequence (the reply follows).
    """

    ids: torch.Tensor
    features: torch.Tensor
    top1: torch.Tensor
    offsets: torch.Tensor
    prompt_lens: torch.Tensor

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
