"""The benchmark harness: a prompt suite x drafters x k, measured against transformers' own generate().

Two benchmarks live here, both as plain functions that return JSON-able dicts (the CLI in
:mod:`specviz.cli` only parses flags and prints):

- :func:`run_bench` (end-to-end). For each prompt, after a warm-up of every method (a short run of
  ``warmup_tokens``; ``--quick`` warms up on the first prompt only), the methods run
  interleaved (round-robin, the order rotated each repeat) and the median wall time is kept:
  our standard decoding, our speculative decoding per drafter and k, transformers' ``generate()`` greedy
  (same prompt ids, ``max_new_tokens``, ``do_sample=False``, same EOS ids), and transformers'
  ``generate()`` with the matching drafter (``prompt_lookup_num_tokens=k`` with
  ``max_matching_ngram_size`` = our ``ngram_max`` for n-gram lookup; ``assistant_model`` with
  ``num_assistant_tokens=k``, a constant schedule and no confidence cut-off for drafters that are models).
  With ``paired`` (``bench --paired``) each of our speculative runs is instead timed in lockstep with a standard-
  decoding run of its own (:func:`run_ours_paired`): one pass of each in turn, each timed on its own clock, so a
  drift of the machine's speed (10-25 % over seconds on a shared VM) falls on both sides of every ratio.
- :func:`kernel_bench` (the cost side). Time of one target forward over n new tokens after a prompt, the
  weight bytes each forward reads, the memory-copy floor, and the verify-cost curve T(k+1)/T(1).

Definitions used in the results (written here once, next to the numbers):
- tokens_per_s = generated tokens / wall seconds of the whole call (prefill included, model loading
  excluded), the same stopwatch for our runs and for transformers' ``generate()``.
- speedup = a method's tokens/s over the standard baseline's tokens/s of the same implementation
  (ours over our baseline, transformers' over transformers' greedy). With ``paired``, our speculative method's
  tokens/s over the tokens/s of the standard runs it was paired with, tokens and seconds summed over every pair
  (:func:`paired_speedup`), and ``speedup_quartiles`` the quartiles of the single runs' paired ratios (the spread
  the figure carries).
- baseline_ratio_vs_transformers = our baseline tokens/s / transformers' greedy tokens/s.
- speedup_ratio_vs_transformers = our speedup / transformers' speedup with the same drafter and k.
- tokens_per_pass = tokens after the prefill's / target passes after the prefill (bonus included): ours,
  and transformers' greedy (1.0). transformers' assisted generate() has no separate prefill (its first
  forward verifies the first draft together with the prompt), so for it only tokens_per_forward is given.
- tokens_per_forward = generated tokens / every target forward (prefill included), for all methods;
  transformers' forwards are counted with a forward hook on the target.
- acceptance_rate = accepted / drafted (ours only: transformers does not report its drafts).
- ids_identical_to_transformers = every output of ours (baseline and every drafter) has exactly the
  token ids of transformers' greedy generate() on the same prompt.
Aggregates pool the prompts: total tokens / total seconds, total accepted / total drafted.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import torch

from specviz.drafters.heads import DEFAULT_TREE_NODES
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.events import PassEvent
from specviz.core.race import race
from specviz.core.generation_settings import settings_record
from specviz.core.verify import SamplingConfig
from specviz.core.kv import Clock, compilations, forward_logits, new_cache, rollback_cache
from specviz.core.metrics import RunStats
from specviz.compiled import COMPILED_LABEL, COMPILING_NOTE, forward_path
from specviz.analysis.exactness import compare_ids, divergence_line, first_divergence
from specviz.core.graphs import requested_path

DEFAULT_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "suite.jsonl"  # the benchmark suite
EXAMPLE_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "prompts.jsonl"  # the app's examples
QUICK_DRAFTERS = ("ngram", "bf16")
QUICK_K = (4,)
QUICK_MAX_NEW_TOKENS = 32
QUICK_REPEATS = 1
QUICK_MAX_CATEGORIES = 6  # keeps --quick under two minutes on a 2-core CPU (one torch thread, light load)
QUICK_WARMUP_EVERY_PROMPT = False  # --quick warms up once, on the first prompt
KERNEL_TOKEN_COUNTS = tuple(range(1, 18)) + (32,)  # 1..17 gives T(k+1)/T(1) for k = 1..16

Progress = Callable[[str], None]


# ------------------------------------------------------------------------------------------------ prompts


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt: ``{"id", "category", "prompt"}`` in the JSONL suite."""

    id: str
    category: str
    prompt: str


def load_prompts(path: str | os.PathLike) -> list[Prompt]:
    """Read a JSONL prompt file, one object a line (blank lines skipped), in either of two formats, told apart
    line by line:

    - ours: ``{"id", "category", "prompt"}``, all strings (assets/suite.jsonl, assets/prompts.jsonl);
    - Spec-Bench's question.jsonl: ``{"question_id", "category", "turns"}`` (a line with "turns"), the id an
      integer (or a string), ``turns`` the user's turns as strings. Only the first turn is used, as the prompt;
      the id becomes ``str(question_id)``.

    Raises:
        ValueError: the file is missing, empty, or a line is neither (one sentence naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"prompt file not found: {path}")
    prompts: list[Prompt] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        prompt = _prompt_from_line(item, f"{path}:{number}")
        if not prompt.prompt.strip():
            raise ValueError(f"{path}:{number}: the prompt is empty")
        prompts.append(prompt)
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return prompts


def _prompt_from_line(item, where: str) -> Prompt:
    """One parsed line as a :class:`Prompt` (Spec-Bench's format when it has "turns", else ours)."""
    if isinstance(item, dict) and "turns" in item:
        question_id, turns = item.get("question_id"), item["turns"]
        id_ok = isinstance(question_id, str) or (isinstance(question_id, int) and not isinstance(question_id, bool))
        if not (id_ok and isinstance(item.get("category"), str) and isinstance(turns, list) and turns
                and all(isinstance(turn, str) for turn in turns)):
            raise ValueError(f"{where}: expected Spec-Bench's question_id (an integer), category (a string) and "
                             "turns (a non-empty list of strings)")
        return Prompt(str(question_id), item["category"], turns[0])
    if not isinstance(item, dict) or not all(isinstance(item.get(key), str) for key in ("id", "category", "prompt")):
        raise ValueError(f"{where}: expected an object with string fields id, category and prompt (or Spec-Bench's "
                         "question_id, category and turns)")
    return Prompt(item["id"], item["category"], item["prompt"])


def one_per_category(prompts: Iterable[Prompt], max_categories: int | None = None) -> list[Prompt]:
    """The first prompt of each category, in order of first appearance (at most ``max_categories``)."""
    chosen: dict[str, Prompt] = {}
    for prompt in prompts:
        if prompt.category not in chosen and (max_categories is None or len(chosen) < max_categories):
            chosen[prompt.category] = prompt
    return list(chosen.values())


# ------------------------------------------------------------------------------------------------ methods


@dataclass(frozen=True)
class Method:
    """One way of generating: ``impl`` "ours" or "transformers"; ``drafter`` "none" for standard decoding.

    ``k`` is the draft length (None for standard decoding); ``adaptive`` means k = auto: ours is the cost-aware
    choice (:class:`specviz.core.draft_length.AutoK`, starting at ``k``); transformers has none, so no transformers
    method is run for it.
    """

    impl: str
    drafter: str = "none"
    k: int | None = None
    adaptive: bool = False

    @property
    def variant(self) -> str:
        """"standard" or "<drafter>@k<k>" / "<drafter>@auto": the key shared by the two implementations."""
        if self.drafter == "none":
            return "standard"
        return f"{self.drafter}@auto" if self.adaptive else f"{self.drafter}@k{self.k}"

    @property
    def name(self) -> str:
        """"ours/<variant>" or "transformers/<variant>"."""
        return f"{self.impl}/{self.variant}"


@dataclass
class Measurement:
    """One generation: its ids and wall time, and what we know of its passes (None where unknown)."""

    token_ids: tuple[int, ...]
    wall_s: float
    target_forwards: int | None = None  # every target forward, the prefill included
    target_passes: int | None = None  # target forwards after a prefill that emitted one token
    drafted: int | None = None
    accepted: int | None = None
    near_tie_gaps: tuple[float | None, ...] = ()  # per output token (our baseline only)

    @property
    def tokens_per_s(self) -> float | None:
        """Generated tokens / wall seconds (prefill included)."""
        return len(self.token_ids) / self.wall_s if self.wall_s > 0 else None


def run_ours(target, drafter, prompt_ids: list[int], config: GenerationConfig) -> Measurement:
    """Generate with our engine (``drafter`` None: standard decoding) and time the whole call."""
    clock = Clock(target.device)
    t0 = clock.now_ms()
    if drafter is None:
        events = standard_generate(target, prompt_ids, config)
    else:
        events = speculative_generate(target, drafter, prompt_ids, config)
    result = collect(events, target.tokenizer, prompt_ids)
    return _measurement(list(result.events), (clock.now_ms() - t0) / 1000.0, drafter is None)


def _measurement(events: list[PassEvent], wall_s: float, baseline: bool) -> Measurement:
    """A :class:`Measurement` of one run's events, timed ``wall_s`` seconds."""
    stats = RunStats()
    for event in events:
        stats.add(event)
    ids = tuple(t for e in events for t in e.emitted_ids)
    gaps = tuple(g for e in events for g in [e.near_tie_gap] * len(e.emitted_ids)) if baseline else ()
    return Measurement(ids, wall_s, stats.passes + 1, stats.passes, stats.drafted, stats.accepted, gaps)


def run_ours_paired(target, drafter, prompt_ids: list[int], config: GenerationConfig
                    ) -> tuple[Measurement, Measurement]:
    """A speculative run and a standard-decoding run of the same prompt, one pass of each in turn
    (:func:`specviz.core.race.race`: whichever is behind on its own clock goes next), each timed on its own clock
    (``PassEvent.t_end_ms``: its drafts, forwards and bookkeeping, not the other run's). Both see the machine in
    the same state within a pass or two, so their ratio does not move with the slow drift of a shared VM's speed.
    Returns (speculative, standard) measurements; wall_s is each run's own clock in seconds."""
    spec = speculative_generate(target, drafter, prompt_ids, config)
    base = standard_generate(target, prompt_ids, config)
    runs: dict[str, list[PassEvent]] = {"speculative": [], "baseline": []}
    for event in race(spec, base):
        runs[event.run].append(event)
    return tuple(_measurement(runs[name], runs[name][-1].t_end_ms / 1000.0, name == "baseline")
                 for name in ("speculative", "baseline"))


class ForwardCounter:
    """Counts forward calls of exactly one module object (a context manager around a hook)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.count = 0
        self._handle = None

    def _hook(self, module, args) -> None:
        if module is self.module:  # early-exit views share the hook dict of the module they copy
            self.count += 1

    def __enter__(self) -> "ForwardCounter":
        self.count = 0
        self._handle = self.module.register_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


@contextlib.contextmanager
def _assistant_settings(assistant: torch.nn.Module, k: int, adaptive: bool):
    """Give ``assistant`` a private generation config asking for exactly k drafts per pass (restored after)."""
    original = assistant.generation_config
    config = copy.deepcopy(original)
    config.num_assistant_tokens = k
    config.num_assistant_tokens_schedule = "heuristic_transient" if adaptive else "constant"
    config.assistant_confidence_threshold = 0.0  # 0 disables the early stop on low draft confidence
    assistant.generation_config = config
    try:
        yield
    finally:
        assistant.generation_config = original


def transformers_settings(sampling: SamplingConfig, stop_token_ids: tuple[int, ...] = ()) -> dict | None:
    """transformers' ``generate()`` arguments with the meaning of ``sampling``'s logits processors and of the stop
    token ids (``repetition_penalty``, ``no_repeat_ngram_size``, ``sequence_bias`` for a finite bias, ``bad_words_ids``
    for a ban, ``stop_token_ids`` to add to its EOS ids); None when a setting has no counterpart there (the
    frequency and presence penalties), so no comparison can be made."""
    if sampling.frequency_penalty or sampling.presence_penalty:
        return None
    out: dict = {"stop_token_ids": list(stop_token_ids)}
    if sampling.repetition_penalty != 1.0:
        out["repetition_penalty"] = sampling.repetition_penalty
    if sampling.no_repeat_ngram_size:
        out["no_repeat_ngram_size"] = sampling.no_repeat_ngram_size
    banned = [[t] for t, bias in sampling.logit_bias if bias == float("-inf")]
    biased = {(t,): bias for t, bias in sampling.logit_bias if bias != float("-inf")}
    if banned:
        out["bad_words_ids"] = banned
    if biased:
        out["sequence_bias"] = biased
    return out


def run_transformers(target, prompt_ids: list[int], max_new_tokens: int, *, prompt_lookup_k: int | None = None,
                     ngram_max: int = 3, assistant: torch.nn.Module | None = None, k: int = 4,
                     adaptive: bool = False, settings: dict | None = None) -> Measurement:
    """transformers' ``generate()`` greedy on the same ids and EOS ids, optionally with prompt lookup
    (``prompt_lookup_k``) or an ``assistant`` model, and with the processors of ``settings``
    (:func:`transformers_settings`); times the whole call and counts target forwards."""
    from transformers import GenerationConfig as HFGenerationConfig

    model = target.model
    settings = dict(settings or {})
    eos = list(dict.fromkeys(list(target.eos_token_ids) + settings.pop("stop_token_ids", [])))
    gen_config = HFGenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, eos_token_id=eos or None,
        pad_token_id=eos[0] if eos else None, temperature=None, top_p=None, top_k=None, **settings,
    )
    kwargs: dict = {}
    if prompt_lookup_k is not None:
        gen_config.prompt_lookup_num_tokens = prompt_lookup_k
        gen_config.max_matching_ngram_size = ngram_max
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=target.device)
    mask = torch.ones_like(ids)
    count_passes = assistant is not model  # an oracle assistant is the target itself: its forwards mix in
    settings = _assistant_settings(assistant, k, adaptive) if assistant is not None else contextlib.nullcontext()
    if assistant is not None:
        kwargs["assistant_model"] = assistant
    clock = Clock(target.device)
    with settings, ForwardCounter(model) as counter, torch.inference_mode():
        t0 = clock.now_ms()
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_config, **kwargs)
        wall_s = (clock.now_ms() - t0) / 1000.0
    new_ids = tuple(int(t) for t in out[0, len(prompt_ids):].tolist())
    forwards = counter.count if count_passes and counter.count > 0 else None
    passes = forwards - 1 if forwards and assistant is None and prompt_lookup_k is None else None
    return Measurement(new_ids, wall_s, forwards, passes)


def transformers_counterpart(drafter) -> str | None:
    """How transformers' generate() drafts like ``drafter``: "prompt_lookup", "assistant" or None."""
    from specviz.drafters.model import ModelDrafter
    from specviz.drafters.ngram import NgramDrafter

    if isinstance(drafter, NgramDrafter):
        return "prompt_lookup"
    if isinstance(drafter, ModelDrafter):
        return "assistant"
    return None


# ----------------------------------------------------------------------------------------------- the bench


@dataclass
class BenchSettings:
    """What to run. ``ks`` holds ints and/or the string "auto" (adaptive k starting at 4)."""

    drafters: tuple[str, ...] = QUICK_DRAFTERS
    ks: tuple[int | str, ...] = (2, 4, 8)
    max_new_tokens: int = 64
    repeats: int = 3
    warmup_tokens: int = 8
    warmup_every_prompt: bool = True  # False: one warm-up, before the first prompt only
    ngram_max: int = 3
    ngram_min: int = 1
    draft_spec: str | None = None
    exit_layer: int | None = None
    use_chat_template: bool = True
    heads_path: str | None = None  # eagle / medusa head file (default: the shipped one)
    tree_nodes: int = 10  # nodes of the tree for "eagle:tree" / "medusa:tree"
    min_confidence: float | None = None  # eagle / medusa confidence gate (None: the drafters' default)
    window: int | None = None  # lookahead's W, N and G (None: the defaults of specviz.drafters.lookahead)
    ngram: int | None = None
    candidates: int | None = None
    warm_suffix: bool = False  # suffix: False = cold (an empty store of earlier outputs for every run); True = the
    # store keeps one output of each earlier prompt of this bench (never the same prompt's warm-up or repeats)
    compare_transformers: bool = True
    paired: bool = False  # time each of our speculative runs in lockstep with its own standard run (run_ours_paired)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)  # greedy; its logits processors apply
    stop_token_ids: tuple[int, ...] = ()
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("extra", "sampling", "stop_token_ids")}
        d["drafters"], d["ks"] = list(self.drafters), list(self.ks)
        d["generation_settings"] = settings_record(self.sampling, self.stop_token_ids)
        d.update(self.extra)
        return d


def _methods(settings: BenchSettings, drafters: dict) -> list[Method]:
    methods = [Method("ours")]
    if settings.compare_transformers:
        methods.append(Method("transformers"))
    for key in settings.drafters:
        for k in settings.ks:
            adaptive = k == "auto"
            k_value = 4 if adaptive else int(k)
            methods.append(Method("ours", key, k_value, adaptive))
            counterpart = transformers_counterpart(drafters[key])
            if settings.compare_transformers and counterpart and not adaptive:  # transformers has no cost-aware k
                methods.append(Method("transformers", key, k_value))
    return methods


def _run_method(method: Method, target, drafters: dict, prompt_ids: list[int], max_new_tokens: int,
                settings: BenchSettings) -> Measurement:
    if method.impl == "ours":
        config = GenerationConfig(max_new_tokens=max_new_tokens, k=method.k or 4, auto_k=method.adaptive,
                                  sampling=settings.sampling, stop_token_ids=settings.stop_token_ids)
        return run_ours(target, drafters.get(method.drafter), prompt_ids, config)
    same = transformers_settings(settings.sampling, settings.stop_token_ids)
    if method.drafter == "none":
        return run_transformers(target, prompt_ids, max_new_tokens, settings=same)
    drafter = drafters[method.drafter]
    if transformers_counterpart(drafter) == "prompt_lookup":
        return run_transformers(target, prompt_ids, max_new_tokens, prompt_lookup_k=method.k,
                                ngram_max=settings.ngram_max, settings=same)
    return run_transformers(target, prompt_ids, max_new_tokens, assistant=drafter.model, k=method.k,
                            adaptive=method.adaptive, settings=same)


def _median_measurement(runs: list[Measurement]) -> dict:
    """The run with the median wall time (ids of the first run; whether all repeats gave the same ids)."""
    ordered = sorted(runs, key=lambda m: m.wall_s)
    mid = ordered[(len(ordered) - 1) // 2]
    return {
        "num_tokens": len(mid.token_ids),
        "wall_s": statistics.median(m.wall_s for m in runs),
        "wall_s_all": [round(m.wall_s, 6) for m in runs],
        "tokens_per_s": len(mid.token_ids) / statistics.median(m.wall_s for m in runs),
        "target_forwards": mid.target_forwards,
        "target_passes": mid.target_passes,
        "drafted": mid.drafted,
        "accepted": mid.accepted,
        "tokens_per_pass": (len(mid.token_ids) - 1) / mid.target_passes if mid.target_passes else None,
        "tokens_per_forward": len(mid.token_ids) / mid.target_forwards if mid.target_forwards else None,
        "acceptance_rate": mid.accepted / mid.drafted if mid.drafted else None,
        "repeats_identical": all(m.token_ids == runs[0].token_ids for m in runs),
        "token_ids": list(runs[0].token_ids),
    }


first_difference = first_divergence  # the bench's older name (one source: specviz.analysis.exactness)


def bench_prompt(target, drafters: dict, prompt: Prompt, prompt_ids: list[int], methods: list[Method],
                 settings: BenchSettings, progress: Progress | None = None, warmup: bool = True) -> dict:
    """Warm up every method once (``warmup_tokens``) if ``warmup``, then run them interleaved ``repeats`` times.
    With ``settings.paired`` our speculative methods run paired with a standard run each (:func:`run_ours_paired`):
    those standard runs are ``ours/standard``'s measurements, and each method's result carries
    ``paired_speedup_all`` (standard seconds / its seconds, per repeat) and the paired standard runs' figures."""
    paired = settings.paired and any(m.impl == "ours" and m.drafter != "none" for m in methods)
    timed = [m for m in methods if not (paired and m.name == "ours/standard")]
    if warmup and settings.warmup_tokens > 0:
        for method in methods:
            _run_method(method, target, drafters, prompt_ids, min(settings.warmup_tokens, settings.max_new_tokens),
                        settings)
    runs: dict[str, list[Measurement]] = {m.name: [] for m in methods}
    partners: dict[str, list[Measurement]] = {}
    baseline_gaps: tuple = ()
    for r in range(settings.repeats):
        shift = r % len(timed)
        for method in timed[shift:] + timed[:shift]:  # rotate the order so no method is always first
            if paired and method.impl == "ours" and method.drafter != "none":
                m, base = _run_paired(method, target, drafters, prompt_ids, settings)
                runs["ours/standard"].append(base)
                partners.setdefault(method.name, []).append(base)
                baseline_gaps = base.near_tie_gaps
            else:
                m = _run_method(method, target, drafters, prompt_ids, settings.max_new_tokens, settings)
            runs[method.name].append(m)
            if method.name == "ours/standard":
                baseline_gaps = m.near_tie_gaps
        if progress:
            progress(f"  {prompt.id}: repeat {r + 1}/{settings.repeats} done")
    results = {name: _median_measurement(rs) for name, rs in runs.items()}
    for name, bases in partners.items():
        res = results[name]
        res["paired_speedup_all"] = [round(b.wall_s / x.wall_s, 6) for b, x in zip(bases, runs[name])]
        res["paired_baseline_s_all"] = [round(b.wall_s, 6) for b in bases]
        res["paired_tokens_all"] = [[len(x.token_ids), len(b.token_ids)] for b, x in zip(bases, runs[name])]
    _compare_to_standard(results, baseline_gaps, _dtype_of(target), settings.sampling.greedy)
    reference = results.get("transformers/standard")
    for name, res in results.items():
        if reference is None or name == "transformers/standard":
            continue
        diff = first_difference(res["token_ids"], reference["token_ids"])
        res["ids_identical_to_transformers"] = diff is None
        if diff is not None:
            res["first_difference"] = diff
            res["baseline_near_tie_gap"] = baseline_gaps[diff] if diff < len(baseline_gaps) else None
    return {"id": prompt.id, "category": prompt.category, "prompt_tokens": len(prompt_ids), "dtype": _dtype_of(target),
            "results": results}


def _dtype_of(target) -> str:
    """The target's dtype name ("float32", "bfloat16", "float16")."""
    return str(target.dtype).removeprefix("torch.")


def _compare_to_standard(results: dict, baseline_gaps: tuple, dtype: str, greedy: bool) -> None:
    """Add to each of our speculative results (greedy runs only) whether its ids are our standard decoding's, and
    where not the first divergence, the baseline's top-2 logit gap there and why
    (:func:`specviz.analysis.exactness.compare_ids`: ``ids_identical_to_standard``, ``first_divergence``,
    ``top2_gap``, ``divergence_reason``)."""
    base = results.get("ours/standard")
    if base is None or not greedy:
        return
    for name, res in results.items():
        if not name.startswith("ours/") or name == "ours/standard":
            continue
        exact = compare_ids(base["token_ids"], baseline_gaps, res["token_ids"], dtype)
        res["ids_identical_to_standard"] = exact["ids_identical_to_standard"]
        res["first_divergence"] = exact["first_divergence"]
        res["top2_gap"] = exact["top2_gap"]
        res["divergence_reason"] = exact["reason"]


def _run_paired(method: Method, target, drafters: dict, prompt_ids: list[int],
                settings: BenchSettings) -> tuple[Measurement, Measurement]:
    config = GenerationConfig(max_new_tokens=settings.max_new_tokens, k=method.k or 4, auto_k=method.adaptive,
                              sampling=settings.sampling, stop_token_ids=settings.stop_token_ids)
    return run_ours_paired(target, drafters.get(method.drafter), prompt_ids, config)


def _pool(records: list[dict], name: str) -> dict | None:
    rows = [rec["results"][name] for rec in records if name in rec["results"]]
    if not rows:
        return None
    tokens = sum(r["num_tokens"] for r in rows)
    seconds = sum(r["wall_s"] for r in rows)
    passes = [r["target_passes"] for r in rows]
    forwards = [r["target_forwards"] for r in rows]
    after_prefill = sum(r["num_tokens"] - 1 for r in rows)
    drafted = sum(r["drafted"] or 0 for r in rows)
    out = {
        "prompts": len(rows),
        "tokens": tokens,
        "wall_s": seconds,
        "tokens_per_s": tokens / seconds if seconds > 0 else None,
        "tokens_per_pass": after_prefill / sum(passes) if None not in passes and sum(passes) else None,
        "tokens_per_forward": tokens / sum(forwards) if None not in forwards and sum(forwards) else None,
        "acceptance_rate": sum(r["accepted"] or 0 for r in rows) / drafted if drafted else None,
    }
    if all("paired_speedup_all" in r for r in rows):  # ours, timed against standard runs of its own
        out["paired_speedup"] = paired_speedup(rows)
        out["speedup_quartiles"] = _quartiles([x for r in rows for x in r["paired_speedup_all"]])
        out["paired_runs"] = sum(len(r["paired_speedup_all"]) for r in rows)
    if any("ids_identical_to_transformers" in r for r in rows):
        out["ids_identical_to_transformers"] = all(r.get("ids_identical_to_transformers", True) for r in rows)
    if any("ids_identical_to_standard" in r for r in rows):
        out["ids_identical_to_standard"] = all(r.get("ids_identical_to_standard", True) for r in rows)
        out["prompts_differing_from_standard"] = sum(not r.get("ids_identical_to_standard", True) for r in rows)
    return out


def paired_speedup(rows: list[dict]) -> float | None:
    """The speedup of paired runs (every repeat of every prompt in ``rows``, a method's per-prompt results): its
    tokens per second over those of the standard runs it was paired with, each side's tokens and seconds summed
    over all pairs; within a pair both saw the machine alike, so the sums keep that."""
    spec_s = sum(sum(r["wall_s_all"]) for r in rows)
    base_s = sum(sum(r["paired_baseline_s_all"]) for r in rows)
    spec_tokens = sum(t[0] for r in rows for t in r["paired_tokens_all"])
    base_tokens = sum(t[1] for r in rows for t in r["paired_tokens_all"])
    if spec_s <= 0 or base_s <= 0 or not base_tokens:
        return None
    return (spec_tokens / spec_s) / (base_tokens / base_s)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize(records: list[dict], methods: list[Method]) -> dict:
    """Pooled figures of ``records`` per method, speedups, and the two ratios against transformers."""
    pooled = {m.name: _pool(records, m.name) for m in methods}
    pooled = {name: fig for name, fig in pooled.items() if fig is not None}
    base = {impl: (pooled.get(f"{impl}/standard") or {}).get("tokens_per_s") for impl in ("ours", "transformers")}
    for name, fig in pooled.items():
        fig["speedup"] = fig["paired_speedup"] if "paired_speedup" in fig else \
            _ratio(fig["tokens_per_s"], base[name.split("/")[0]])
    out = {"methods": pooled,
           "baseline_ratio_vs_transformers": _ratio(base["ours"], base["transformers"]),
           "speedup_ratio_vs_transformers": {}}
    for m in methods:
        if m.impl == "ours" and m.drafter != "none" and f"transformers/{m.variant}" in pooled:
            out["speedup_ratio_vs_transformers"][m.variant] = _ratio(
                pooled[m.name]["speedup"], pooled[f"transformers/{m.variant}"]["speedup"])
    flags = [fig["ids_identical_to_transformers"] for name, fig in pooled.items()
             if name.startswith("ours/") and "ids_identical_to_transformers" in fig]
    out["ids_identical_to_transformers"] = all(flags) if flags else None
    same = [fig["ids_identical_to_standard"] for fig in pooled.values() if "ids_identical_to_standard" in fig]
    out["ids_identical_to_standard"] = all(same) if same else None
    return out


def load_average() -> float | None:
    """The 1-minute load average (None where the OS has none): other work on the machine skews timings."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


CONTENDED_SHARE = 0.2  # other programs took more than this share of the CPUs during a timing: its ratios are not read


class CpuShare:
    """How much of this machine's CPU time other processes took since this object was made: (busy CPU time of all
    processes, from ``/proc/stat``, steal time included) minus this process's own (``os.times``), over all CPUs'
    time. A run's timings are distorted where it is high: with two torch threads, a forward whose second thread is
    descheduled waits at every operation, so a one-token step slows down far more than a wide verify (seen in the
    browser: a second program at one full core made steps 5-14x slower and lookahead look 2.1x faster where its
    passes cost 1.9 steps). Linux only; elsewhere :meth:`others` is None."""

    def __init__(self) -> None:
        self._start = self._snapshot()

    @staticmethod
    def _snapshot() -> tuple[float, float, float] | None:
        """(all CPUs' time, their busy time, this process's CPU time), in seconds; None without /proc/stat."""
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                ticks = [int(v) for v in stat.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
            hertz = os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, AttributeError):
            return None
        own = os.times()
        total = sum(ticks) / hertz
        return total, total - (ticks[3] + ticks[4]) / hertz, own.user + own.system

    def others(self) -> float | None:
        """The share (0..1) of all CPUs' time used by other processes since the start; None when unknown or when
        too little time passed to tell (under 0.2 s of CPU time)."""
        now = self._snapshot()
        if now is None or self._start is None:
            return None
        total, busy, own = (b - a for a, b in zip(self._start, now))
        if total < 0.2:
            return None
        return min(1.0, max(0.0, (busy - own) / total))


def busy_machine_warning(cpu: CpuShare | None = None) -> str | None:
    """A warning line when other work slowed a run, else None.

    Args:
        cpu: started when the run began. Where it can tell, the warning is its share of the CPUs taken by other
            programs above :data:`CONTENDED_SHARE`. The load average would count the run's own threads (two
            busy torch threads make a load of 2 on a 2-CPU machine), so it decides only before a run (``cpu``
            None) or where the share is unknown: above half the CPU count.
    """
    share = cpu.others() if cpu is not None else None
    if share is not None:
        if share > CONTENDED_SHARE:
            return (f"warning: other programs used {share:.0%} of this machine's CPU time during the run: timings "
                    f"are slow and noisy")
        return None
    load, cpus = load_average(), os.cpu_count() or 1
    if load is not None and load > 0.5 * cpus:
        return (f"warning: this machine is busy (load average {load:.1f} on {cpus} CPUs): timings will be slow "
                f"and noisy")
    return None


def environment(target=None) -> dict:
    """Versions and machine facts needed to reproduce a result."""
    import transformers

    import specviz

    info = {
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "specviz": getattr(specviz, "__version__", "unknown")},
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "load_average_1min": load_average()},
    }
    if target is not None:
        device = target.device
        info["device"] = {"device": str(device), "dtype": str(target.dtype).removeprefix("torch."),
                          "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
        speed = getattr(target, "speed", None)
        info["target"] = {"spec": target.spec, "label": target.label, "num_layers": target.num_layers,
                          "param_bytes": target.param_bytes,
                          # kernels of the loaded model, shared by our runs and transformers' generate()
                          "kernels": speed.summary() if speed is not None else "default kernels",
                          "forward": forward_path(target.model),
                          "engine_path": requested_path(target)}  # graphs or eager (specviz.core.graphs)
    return info


def make_drafters(target, settings: BenchSettings, progress: Progress | None = None) -> dict:
    """One drafter instance per key (each run resets it; a draft model is loaded once)."""
    from specviz.drafters.registry import make_drafter, split_variant

    drafters: dict = {}
    for key in settings.drafters:
        if key != "none" and key not in drafters:
            v = split_variant(key)
            drafters[key] = make_drafter(v.base, target, draft_spec=settings.draft_spec, exit_layer=settings.exit_layer,
                                         ngram_max=settings.ngram_max, ngram_min=settings.ngram_min,
                                         heads_path=settings.heads_path,
                                         tree_nodes=settings.tree_nodes if v.tree else 0,
                                         min_confidence=settings.min_confidence, lookup=v.lookup,
                                         window=settings.window, ngram=settings.ngram,
                                         candidates=settings.candidates, remember_outputs=False, progress=progress)
    return drafters


def suffix_note(settings: BenchSettings) -> str | None:
    """How the bench runs suffix decoding (cold or warm), or None when it does not run it."""
    if not any(key.split(":")[0] == "suffix" for key in settings.drafters):
        return None
    if settings.warm_suffix:
        return ("suffix decoding runs warm (--warm-suffix): its store of earlier outputs holds the output of every "
                "earlier prompt of this bench, never the same prompt's warm-up or repeats")
    return ("suffix decoding runs cold: an empty store of earlier outputs for every run, so it drafts from the "
            "prompt and its own output only (--warm-suffix keeps the earlier prompts' outputs)")


def _feed_suffix_stores(drafters: dict, prompt_ids: list[int], record: dict) -> None:
    """Warm mode: hand this prompt's standard-decoding output (greedy: every method's) to each suffix drafter's
    store, after all of the prompt's runs."""
    from specviz.drafters.suffix import SuffixDrafter

    output = record["results"].get("ours/standard", {}).get("token_ids")
    for drafter in drafters.values():
        if isinstance(drafter, SuffixDrafter) and output:
            drafter.store.add(prompt_ids, list(output))


def _checked_settings(settings: BenchSettings, progress: Progress | None) -> BenchSettings:
    """A copy of ``settings`` without the "none" drafter, and without transformers' runs when a generation setting
    has no counterpart there (said through ``progress``). Raises ValueError for sampling settings (greedy only)."""
    settings = copy.copy(settings)
    settings.drafters = tuple(d for d in settings.drafters if d != "none")
    if not settings.sampling.greedy:
        raise ValueError("the bench is greedy: its sampling settings need temperature 0")
    if settings.compare_transformers and transformers_settings(settings.sampling) is None:
        settings.compare_transformers = False
        if progress:
            progress("note: transformers' generate() has no frequency or presence penalty: its runs are skipped")
    return settings


def run_bench(target, prompts: list[Prompt], settings: BenchSettings, progress: Progress | None = None,
              deadline_s: float | None = None) -> dict:
    """Run the end-to-end benchmark (see the module docstring) and return the JSON-able result.

    Args:
        target: the :class:`specviz.models.LoadedModel` to decode with.
        prompts: the prompts (see :func:`load_prompts`).
        settings: drafters, k values, budget, repeats.
        progress: optional callable(str) for progress lines.
        deadline_s: seconds after the start past which no further prompt is started (None: no limit); the prompts
            left are listed in ``skipped_prompts`` and every figure covers the prompts that ran (at least one).

    Raises:
        ValueError / ModelLoadError: bad settings, an empty prompt, or a draft model that cannot be loaded.
    """
    from specviz.models import encode_prompt

    started = time.perf_counter()
    load_at_start, compiled_before = load_average(), compilations()
    settings = _checked_settings(settings, progress)
    drafters = make_drafters(target, settings, progress)
    methods = _methods(settings, drafters)
    encoded = [encode_prompt(target.tokenizer, p.prompt, use_chat_template=settings.use_chat_template) for p in prompts]
    if progress:
        progress(f"{len(prompts)} prompt(s) x {len(methods)} methods x {settings.repeats} repeat(s), "
                 f"{settings.max_new_tokens} new tokens each")
        if suffix_note(settings):
            progress(suffix_note(settings))
    records, skipped = _bench_prompts(target, drafters, methods, (prompts, encoded), settings, progress,
                                      (started, deadline_s))
    categories = list(dict.fromkeys(r["category"] for r in records))
    per_category = {c: summarize([r for r in records if r["category"] == c], methods) for c in categories}
    overall = summarize(records, methods)
    result = {
        "benchmark": "end-to-end",
        "settings": settings.as_dict(),
        **environment(target),
        "methods": [m.name for m in methods],
        "definitions": DEFINITIONS,
        "overall": overall,
        "categories": per_category,
        "baseline_ratio_vs_transformers": overall["baseline_ratio_vs_transformers"],
        "speedup_ratio_vs_transformers": overall["speedup_ratio_vs_transformers"],
        "ids_identical_to_transformers": overall["ids_identical_to_transformers"],
        "dtype": _dtype_of(target),
        "ids_identical_to_standard": overall["ids_identical_to_standard"],
        "prompts": records,
        "skipped_prompts": skipped,
        "wall_s": time.perf_counter() - started,
    }
    targets = head_targets(overall, per_category)
    if targets:
        result["head_targets"] = targets
    result["suffix_note"] = suffix_note(settings)
    if any(key.split(":")[0] == "lookahead" for key in settings.drafters):
        result["lookahead_cost"] = lookahead_cost(target, settings.window, settings.ngram, settings.candidates)
    result["machine"]["load_average_1min"] = load_at_start  # environment() ran at the end
    result["machine"]["load_average_1min_end"] = load_average()
    result["compiling"] = compilations() != compiled_before  # torch.compile ran during the bench: timings include it
    return result


def _bench_prompts(target, drafters, methods, prompts_and_ids, settings: BenchSettings, progress: Progress | None,
                   clock: tuple[float, float | None]) -> tuple[list[dict], list[str]]:
    """Each prompt's record (:func:`bench_prompt`), in order, and the ids of the prompts not started because
    ``clock`` = (start, deadline seconds or None) had passed (at least one prompt always runs)."""
    prompts, encoded = prompts_and_ids
    started, deadline_s = clock
    records: list[dict] = []
    for i, (prompt, ids) in enumerate(zip(prompts, encoded), start=1):
        if records and deadline_s is not None and time.perf_counter() - started > deadline_s:
            skipped = [p.id for p in prompts[i - 1:]]
            if progress:
                progress(f"time budget ({deadline_s:.0f} s) reached: {len(skipped)} prompt(s) not run")
            return records, skipped
        if progress:
            progress(f"[{i}/{len(prompts)}] {prompt.id} ({prompt.category}, {len(ids)} prompt tokens)")
        warmup = settings.warmup_every_prompt or i == 1
        records.append(bench_prompt(target, drafters, prompt, ids, methods, settings, progress, warmup))
        if settings.warm_suffix:
            _feed_suffix_stores(drafters, ids, records[-1])
    return records, []


def _lookahead_setting(window: int | None, ngram: int | None, candidates: int | None) -> tuple[int, int, int]:
    """(W, N, G), None taking the defaults of :mod:`specviz.drafters.lookahead`."""
    from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW

    return window or DEFAULT_WINDOW, ngram or DEFAULT_NGRAM, candidates or DEFAULT_CANDIDATES


def lookahead_cost(target, window: int | None = None, ngram: int | None = None, candidates: int | None = None,
                   prompt_len: int = 64) -> dict:
    """A full lookahead pass's forward (1 + W(N-1) + G(N-1) tokens) against a one-token step, both timed here after
    a ``prompt_len``-token cached prompt (:func:`time_forward_ms`, median of 7), as
    :func:`specviz.analysis.arena.lookahead_pass_cost` (None: the drafter's default W, N, G)."""
    from specviz.analysis.arena import lookahead_pass_cost
    from specviz.drafters.lookahead import forward_tokens

    setting = _lookahead_setting(window, ngram, candidates)
    times = time_forward_ms(target.model, target.device, prompt_len, [1, forward_tokens(*setting)])
    return {**lookahead_pass_cost(times, *setting), "prompt_len": prompt_len}


def kernel_lookahead_cost(result: dict, window: int | None = None, ngram: int | None = None,
                          candidates: int | None = None) -> dict:
    """The same from a :func:`kernel_bench` result's curve (n new tokens -> ms; interpolated where n was not timed)."""
    from specviz.analysis.arena import lookahead_pass_cost

    curve = {int(row["new_tokens"]): row["ms"] for row in result["curve"]}
    return {**lookahead_pass_cost(curve, *_lookahead_setting(window, ngram, candidates)),
            "prompt_len": result["settings"]["prompt_len"]}


def lookahead_cost_line(cost: dict) -> str:
    """The bench's line for :func:`lookahead_cost`: tokens, T(n)/T(1), both in ms, and the break-even."""
    from specviz.analysis.arena import describe_lookahead_cost

    return (f"{describe_lookahead_cost(cost)} ({cost['pass_ms']:.1f} ms vs a one-token step of {cost['step_ms']:.1f} "
            f"ms): lookahead pays only above {cost['ratio']:.2f} tokens per pass")


HEAD_TARGETS = {"eagle_chain_k4_tokens_per_pass": 2.5, "tree_tokens_per_pass": 3.0, "best_trained_speedup": 1.5}
OPEN_ENDED = ("chat", "qa", "math", "translation")  # categories where the output is not copied from the prompt


def head_targets(overall: dict, per_category: dict) -> dict | None:
    """The trained drafters' targets (issue: EAGLE/Medusa heads) checked on a bench result, or None when no
    eagle/medusa method ran: EAGLE chain k=4 tokens per pass >= 2.5, the best tree >= 3.0, the best trained
    drafter's speedup >= 1.5, and per open-ended category the best trained drafter's tokens/s against n-gram's.
    Lookup-first variants ("eagle:lookup") do not count as trained drafters here: part of their drafts are copies."""
    from specviz.drafters.registry import HEAD_KEYS, split_variant

    def is_trained(name: str) -> bool:  # "ours/eagle:tree@k4" yes, "ours/eagle:lookup@k4" and "ours/ngram@k4" no
        try:
            v = split_variant(name.split("/")[1].split("@")[0])
        except ValueError:  # "ours/standard", transformers' methods
            return False
        return v.base in HEAD_KEYS and not v.lookup

    methods = overall["methods"]
    trained = {n: f for n, f in methods.items() if n.startswith("ours/") and is_trained(n)}
    if not trained:
        return None

    def best(figs: dict, key: str):
        pairs = [(f.get(key), n) for n, f in figs.items() if f.get(key) is not None]
        return max(pairs) if pairs else (None, None)

    chain = methods.get("ours/eagle@k4", {}).get("tokens_per_pass")
    tree_value, tree_name = best({n: f for n, f in trained.items() if ":tree" in n}, "tokens_per_pass")
    speed_value, speed_name = best(trained, "speedup")
    out = {
        "eagle_chain_k4_tokens_per_pass": {"value": chain, "goal": HEAD_TARGETS["eagle_chain_k4_tokens_per_pass"]},
        "tree_tokens_per_pass": {"value": tree_value, "method": tree_name, "goal": HEAD_TARGETS["tree_tokens_per_pass"]},
        "best_trained_speedup": {"value": speed_value, "method": speed_name, "goal": HEAD_TARGETS["best_trained_speedup"]},
        "vs_ngram_by_category": {},
    }
    for target in ("eagle_chain_k4_tokens_per_pass", "tree_tokens_per_pass", "best_trained_speedup"):
        value = out[target]["value"]
        out[target]["met"] = None if value is None else value >= out[target]["goal"]
    for category, summary in per_category.items():
        figs = summary["methods"]
        ngram, _ = best({n: f for n, f in figs.items() if n.startswith("ours/ngram")}, "tokens_per_s")
        mine, name = best({n: f for n, f in figs.items() if n in trained}, "tokens_per_s")
        if ngram is not None and mine is not None:
            out["vs_ngram_by_category"][category] = {"trained": name, "trained_tokens_per_s": mine,
                                                     "ngram_tokens_per_s": ngram, "ratio": mine / ngram,
                                                     "open_ended": category in OPEN_ENDED}
    return out


DEFINITIONS = {
    "tokens_per_s": "generated tokens / wall seconds of the whole call (prefill included, loading excluded)",
    "speedup": "tokens/s over the standard decoding tokens/s of the same implementation",
    "baseline_ratio_vs_transformers": "our standard decoding tokens/s / transformers generate() greedy tokens/s",
    "speedup_ratio_vs_transformers": "our speedup / transformers' speedup with the same drafter and k",
    "tokens_per_pass": "tokens after the prefill / target passes after the prefill (bonus included); not for "
                       "transformers' assisted generate(), which has no separate prefill",
    "tokens_per_forward": "generated tokens / every target forward, the prefill included (all methods)",
    "acceptance_rate": "accepted / drafted (bonus excluded); ours only",
    "ids_identical_to_transformers": "every output of ours has the ids of transformers' greedy generate()",
    "ids_identical_to_standard": "greedy: a speculative output has exactly the ids of our standard decoding of the "
                                 "same target copy; where not, first_divergence = the output position of the first "
                                 "differing token, top2_gap = the baseline's top-2 logit gap there, divergence_reason "
                                 "= why it can happen in this dtype (specviz.analysis.exactness)",
    "aggregation": "pooled over prompts: total tokens / total seconds, total accepted / total drafted",
    "paired": "with --paired: each of our speculative runs advanced one pass at a time together with a standard "
              "run of its own, each timed on its own clock; speedup = its tokens/s over those standard runs' "
              "tokens/s, tokens and seconds summed over every pair; speedup_quartiles = quartiles of the single "
              "pairs' ratios",
}


# ---------------------------------------------------------------------------------------------- the kernel


def copy_bandwidth_gbs(device: torch.device, megabytes: int = 256, repeats: int = 5) -> float:
    """Memory bandwidth in GB/s from a large tensor copy, counting bytes read + written (median of repeats)."""
    n = megabytes * 1024 * 1024 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    clock = Clock(device)
    dst.copy_(src)  # warm-up: page in both buffers
    times = []
    for _ in range(repeats):
        t0 = clock.now_ms()
        dst.copy_(src)
        times.append((clock.now_ms() - t0) / 1000.0)
    return 2 * src.numel() * src.element_size() / statistics.median(times) / 1e9


def time_forward_ms(model: torch.nn.Module, device: torch.device, prompt_len: int, token_counts: Iterable[int],
                    repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict[int, float]:
    """Median ms of one forward over n new tokens after a ``prompt_len``-token cached prompt, for each n.

    Every forward computes logits for all n positions (as a verification does) and is then rolled back, so
    each measurement starts from the same cache of ``prompt_len`` positions.
    """
    variants = {"default": contextlib.nullcontext}
    return time_forward_variants(model, device, prompt_len, token_counts, variants, repeats, warmup, seed)["default"]


def time_forward_variants(model: torch.nn.Module, device: torch.device, prompt_len: int,
                          token_counts: Iterable[int],
                          variants: dict[str, Callable[[], contextlib.AbstractContextManager]],
                          repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict[str, dict[int, float]]:
    """Like :func:`time_forward_ms` for several ways of running the same model, measured interleaved.

    ``variants`` maps a name to a context-manager factory entered around each timed forward (e.g.
    :func:`specviz.speed.plain_path` for the default kernels). Returns variant name -> {n: median ms} of
    :func:`time_forward_rounds`.
    """
    rounds = time_forward_rounds(model, device, prompt_len, token_counts, variants, repeats, warmup, seed)
    return {name: {n: statistics.median(ms) for n, ms in per_n.items()} for name, per_n in rounds.items()}


def time_forward_rounds(model: torch.nn.Module, device: torch.device, prompt_len: int,
                        token_counts: Iterable[int],
                        variants: dict[str, Callable[[], contextlib.AbstractContextManager]],
                        repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict[str, dict[int, list[float]]]:
    """ms of one forward over n new tokens after a ``prompt_len``-token cached prompt, per round.

    Every round times each n once for each variant (``warmup`` untimed rounds first, then ``repeats`` timed
    ones); the order of the n and of the variants alternates between rounds. So a machine whose speed drifts
    (a shared VM: +-20 % between seconds was seen) slows every n of a round alike, and the ratio T(n)/T(1) taken
    within a round (:func:`_cost_figures`) cancels the drift that a ratio of medians timed minutes apart keeps.
    Each forward computes logits for all n positions (as a verification does) and is then rolled back.

    Returns:
        variant name -> {n: [ms of round 1, ..., ms of round ``repeats``]}.
    """
    token_counts = list(token_counts)
    vocab = int(model.config.get_text_config().vocab_size)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (prompt_len + max(token_counts),), generator=gen).tolist()
    cache = new_cache(model)
    forward_logits(model, ids[:prompt_len], cache, 1)
    clock = Clock(device)
    names = list(variants)
    out: dict[str, dict[int, list[float]]] = {name: {n: [] for n in token_counts} for name in names}
    for i in range(warmup + repeats):
        for n in (token_counts if i % 2 == 0 else token_counts[::-1]):
            new = ids[prompt_len:prompt_len + n]
            for name in (names if i % 2 == 0 else names[::-1]):
                with variants[name]():
                    t0 = clock.now_ms()
                    forward_logits(model, new, cache, n)
                    t1 = clock.now_ms()
                rollback_cache(cache, prompt_len)
                if i >= warmup:
                    out[name][n].append(t1 - t0)
    return out


KERNEL_DRAFTERS = ("ngram", "early-exit", "eagle", "eagle:tree", "medusa", "medusa:tree")


def time_drafter_ms(target, drafter, prompt_len: int, ks: Iterable[int], repeats: int = 5, seed: int = 0) -> dict:
    """Median ms of one ``propose`` of k tokens, for each k, from a caught-up state after a cached prompt.

    The drafter starts a run on ``prompt_len`` tokens, a random block written twice (plus the target's
    features when it reads them),
    proposes once (catch-up, not timed), then each timed call proposes again for the same committed sequence
    and is followed by ``commit(committed, 0)``, so every call drafts from the same state. The per-pass
    catch-up of 1 + accepted tokens is not included. Returns {k: {"draft_ms", "nodes"}}, where nodes is the
    number of tokens the target verifies besides the root (k for a chain; the tree's size for a tree).
    """
    from specviz.core.drafting import DraftContext
    from specviz.core.kv import forward_logits_features
    from specviz.core.verify import SamplingConfig

    vocab = int(target.model.config.get_text_config().vocab_size)
    gen = torch.Generator().manual_seed(seed)
    block = torch.randint(0, vocab, (max(1, prompt_len // 2),), generator=gen).tolist()
    prompt = (block * 2)[:prompt_len]  # a repeated block, so that n-gram lookup finds a match and drafts k tokens
    clock = Clock(target.device)
    sampling = SamplingConfig()
    out = {}
    for k in ks:
        drafter.reset(prompt[:-1])
        hidden = None
        wanted = getattr(drafter, "needs_hidden", False)
        if wanted:
            _, hidden = forward_logits_features(target.model, prompt[:-1], new_cache(target.model), 1,
                                                layers=wanted if isinstance(wanted, tuple) else ())
        draft = drafter.propose(DraftContext(prompt, k, sampling, None, hidden))
        drafter.commit(prompt, 0)
        times = []
        for _ in range(repeats):
            t0 = clock.now_ms()
            draft = drafter.propose(DraftContext(prompt, k, sampling, None, None))
            times.append(clock.now_ms() - t0)
            drafter.commit(prompt, 0)
        out[k] = {"draft_ms": statistics.median(times), "nodes": len(draft.token_ids)}
    return out


def drafter_costs(target, keys: Iterable[str], times: dict[int, float], prompt_len: int, ks: Iterable[int],
                  tree_nodes: int = DEFAULT_TREE_NODES, progress: Progress | None = None) -> dict:
    """Per drafter and k: draft ms, the verification's ms (T(nodes + 1) from ``times``), and the pass cost in
    one-token steps: (draft + verify) / T(1). That ratio is also the break-even point: the tokens per pass a
    drafter must reach to beat standard decoding at that k. Drafters that cannot be built here (no head file
    for this target, for instance) are listed under ``skipped`` with the reason."""
    from specviz.drafters.registry import make_drafter, split_variant

    step = times[1]
    rows, skipped = {}, {}
    for key in keys:
        try:
            v = split_variant(key)
            # the gate off: a cost curve times the drafting of exactly k tokens (or the whole tree)
            drafter = make_drafter(v.base, target, tree_nodes=tree_nodes if v.tree else 0, min_confidence=0.0,
                                   lookup=v.lookup)
        except Exception as error:  # noqa: BLE001 - report and go on with the others
            skipped[key] = str(error).splitlines()[0]
            continue
        if progress:
            progress(f"drafter cost: {key}")
        curve = {}
        for k, fig in time_drafter_ms(target, drafter, prompt_len, ks).items():
            verify = times.get(fig["nodes"] + 1)
            curve[k] = {**fig, "verify_ms": verify,
                        "pass_cost_steps": None if verify is None else (fig["draft_ms"] + verify) / step}
        rows[key] = curve
    return {"drafters": rows, "skipped": skipped}


STEP_TARGET_FRACTION = 0.5  # the goal: a one-token step within 2x of the floor
VERIFY_TARGET_RATIO = 1.15  # ... and a verification over k <= 4 tokens at most 1.15 one-token steps,
VERIFY_TARGET_MAX_K = 4  # at a short and at a long context
LONG_CONTEXT = 1024  # the long context of the verify curve (tokens cached before the timed forward)
LONG_TOKEN_COUNTS = (1, 2, 3, 4, 5, 9, 17)


def _medians(rounds: dict[int, list[float]]) -> dict[int, float]:
    """{n: median ms} of :func:`time_forward_rounds`'s {n: ms per round}."""
    return {n: statistics.median(ms) for n, ms in rounds.items()}


def _quartiles(values: list[float]) -> list[float]:
    """[25th, 75th] percentile of ``values`` (both the value itself for one value)."""
    if len(values) < 2:
        return [values[0], values[0]]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return [q[0], q[2]]


def _cost_figures(rounds: dict[int, list[float]], param_bytes: int, floor_ms: float) -> dict:
    """step ms, fraction of floor, effective GB/s, the curve and the verify-cost ratios of one timing run.

    ``rounds``: {n: ms per round} (:func:`time_forward_rounds`). ms figures are medians over the rounds; a
    ratio T(n)/T(1) is the median of the rounds' own ratios, and ``verify_cost_spread`` gives their quartiles.
    """
    times = {n: statistics.median(ms) for n, ms in rounds.items()}
    t1 = times[1]
    ratios = {n: [a / b for a, b in zip(ms, rounds[1])] for n, ms in rounds.items()}
    curve = [{"new_tokens": n, "ms": ms, "ratio_vs_1": statistics.median(ratios[n]),
              "effective_gbs": param_bytes / (ms / 1000.0) / 1e9} for n, ms in times.items()]
    verify_cost = {k: statistics.median(ratios[k + 1]) for k in range(1, 17) if k + 1 in times}
    spread = {k: _quartiles(ratios[k + 1]) for k in verify_cost}
    checked = [v for k, v in verify_cost.items() if k <= VERIFY_TARGET_MAX_K]
    return {
        "step_ms": t1,
        "fraction_of_floor": floor_ms / t1,
        "step_effective_gbs": param_bytes / (t1 / 1000.0) / 1e9,
        "curve": curve,
        "verify_cost": verify_cost,
        "verify_cost_spread": spread,
        "step_target_met": floor_ms / t1 >= STEP_TARGET_FRACTION,
        "verify_target_met": (max(checked) <= VERIFY_TARGET_RATIO) if checked else None,
    }


def _kernel_token_counts(token_counts: Iterable[int], drafters: list[str]) -> list[int]:
    """The forward sizes to time: always 1, and a tree's verification size when a tree drafter is costed."""
    counts = sorted(set(int(n) for n in token_counts))
    if not counts or counts[0] < 1:
        raise ValueError("token counts must be >= 1")
    if 1 not in counts:
        counts = [1] + counts
    if any(key.endswith(":tree") for key in drafters) and DEFAULT_TREE_NODES + 1 not in counts:
        counts = sorted(counts + [DEFAULT_TREE_NODES + 1])  # a tree's verification forward
    return counts


KERNEL_DEFINITIONS = {
    "ms": "median wall time of one target forward over n new tokens after a cached prompt",
    "effective_gbs": "param_bytes / ms: weight bytes read per second",
    "floor_ms": "param_bytes / copy bandwidth (bytes read + written per second of a large tensor copy)",
    "fraction_of_floor": "floor_ms / ms of a one-token step (1.0 = at the memory floor)",
    "verify_cost": "T(k+1 new tokens) / T(1): a verification's cost in target steps (median of per-round ratios; "
                   "each round times every n once, interleaved)",
    "verify_cost_spread": "the 25th and 75th percentiles of those per-round ratios",
    "long_context": "the same curve after a cached prompt of long_context tokens (a long document)",
    "plain": "the same figures with the default kernels (specviz.speed.plain_path), timed interleaved",
    "unpadded": "the same figures without the row padding chosen by tuning (specviz.speed.without_row_padding)",
}


def _kernel_variants(target, compare_plain: bool) -> dict[str, Callable[[], contextlib.AbstractContextManager]]:
    """The ways of running the target that the kernel bench times interleaved: as loaded; with the default kernels
    (when the fast path is active and ``compare_plain``); without the row padding (when tuning chose one)."""
    from specviz.speed import plain_path, report_of, row_padding, without_row_padding

    report = report_of(target.model)
    variants = {"loaded": contextlib.nullcontext}
    if compare_plain and report is not None and report.active and forward_path(target.model) != COMPILED_LABEL:
        variants["plain"] = lambda: plain_path(target.model)
    if row_padding(target.model):
        variants["unpadded"] = lambda: without_row_padding(target.model)
    return variants


def _long_context_figures(target, long_context: int | None, repeats: int, warmup: int, floor_ms: float,
                          progress: Progress | None, token_counts: tuple[int, ...] = LONG_TOKEN_COUNTS) -> dict:
    """``long_context`` (and ``long_context_unpadded`` when a row padding is in use): the verify curve after
    ``long_context`` cached tokens, bounded by the model's window; {} when ``long_context`` is None or 0."""
    from specviz.speed import row_padding, without_row_padding

    window = getattr(target.model.config.get_text_config(), "max_position_embeddings", None)
    if long_context and window:
        long_context = min(long_context, window - max(token_counts))  # the model's window bounds it
    if not long_context:
        return {}
    if progress:
        progress(f"verify curve after {long_context} tokens of context")
    variants = {"default": contextlib.nullcontext}
    if row_padding(target.model):
        variants["unpadded"] = lambda: without_row_padding(target.model)
    timed = time_forward_rounds(target.model, target.device, long_context, token_counts, variants, repeats, warmup)
    out = {"long_context": {"prompt_len": long_context,
                            **_cost_figures(timed["default"], target.param_bytes, floor_ms)}}
    if "unpadded" in timed:
        out["long_context_unpadded"] = {"prompt_len": long_context,
                                        **_cost_figures(timed["unpadded"], target.param_bytes, floor_ms)}
    return out


def kernel_bench(target, *, prompt_len: int = 64, token_counts: Iterable[int] = KERNEL_TOKEN_COUNTS,
                 repeats: int = 7, warmup: int = 2, copy_megabytes: int = 256, compare_plain: bool = True,
                 drafters: Iterable[str] = (), drafter_ks: Iterable[int] = tuple(range(1, 17)),
                 long_context: int | None = LONG_CONTEXT, long_token_counts: Iterable[int] = LONG_TOKEN_COUNTS,
                 progress: Progress | None = None) -> dict:
    """The cost side of speculative decoding on ``target``: ms per forward over n new tokens, and the floor.

    Returns a dict with ``curve`` (one row per n: ms, T(n)/T(1), effective GB/s), ``verify_cost`` (k ->
    T(k+1)/T(1) for every k whose k+1 was measured), ``param_bytes`` (weights read per forward),
    ``copy_bandwidth_gbs`` (read + written), ``floor_ms`` (param_bytes / copy bandwidth),
    ``fraction_of_floor`` (floor_ms / T(1): 1.0 means a one-token step runs at the memory floor) and
    ``step_effective_gbs`` (param_bytes / T(1)), all after a ``prompt_len``-token context; ``long_context`` holds
    the same figures after ``long_context`` cached tokens for ``long_token_counts`` new tokens (None skips it).
    The figures are for the model as loaded (with the eager speed-ups of :mod:`specviz.speed`, listed under ``speed``); when those are active and
    ``compare_plain``, the default kernels' figures, timed interleaved, are under ``plain``. With ``drafters``
    (keys as in the bench, e.g. "eagle:tree"), ``drafter_costs`` holds each drafter's cost curve for
    ``drafter_ks`` (see :func:`drafter_costs`).
    """
    from specviz.speed import report_of, row_padding

    drafters = list(drafters)
    token_counts = _kernel_token_counts(token_counts, drafters)
    started = time.perf_counter()
    compiled_before = compilations()
    bandwidth = copy_bandwidth_gbs(target.device, copy_megabytes)
    report = report_of(target.model)
    variants = _kernel_variants(target, compare_plain)
    timed = time_forward_rounds(target.model, target.device, prompt_len, token_counts, variants, repeats, warmup)
    floor_ms = target.param_bytes / (bandwidth * 1e9) * 1000.0
    result = {
        "benchmark": "kernel",
        "settings": {"prompt_len": prompt_len, "token_counts": token_counts, "repeats": repeats, "warmup": warmup,
                     "copy_megabytes": copy_megabytes, "long_context": long_context},
        **environment(target), "speed": report.summary() if report is not None else "not prepared (default kernels)",
        "param_bytes": target.param_bytes, "copy_bandwidth_gbs": bandwidth, "floor_ms": floor_ms,
        **_cost_figures(timed["loaded"], target.param_bytes, floor_ms),
        "targets": {"fraction_of_floor_at_least": STEP_TARGET_FRACTION,
                    "verify_cost_at_most": VERIFY_TARGET_RATIO, "verify_cost_for_k_up_to": VERIFY_TARGET_MAX_K},
        "definitions": dict(KERNEL_DEFINITIONS),
    }
    if "unpadded" in timed:
        result["row_padding"] = row_padding(target.model)
        result["unpadded"] = _cost_figures(timed["unpadded"], target.param_bytes, floor_ms)
    if "plain" in timed:
        result["plain"] = _cost_figures(timed["plain"], target.param_bytes, floor_ms)
    result.update(_long_context_figures(target, long_context, repeats, warmup, floor_ms, progress,
                                        tuple(long_token_counts)))
    if drafters:
        result["drafter_costs"] = drafter_costs(target, drafters, _medians(timed["loaded"]), prompt_len,
                                                list(drafter_ks), progress=progress)
        result["definitions"]["pass_cost_steps"] = ("(draft ms + verify ms) / one-token step ms: a pass's cost in "
                                                    "target steps, and the tokens per pass needed to break even")
    result["wall_s"] = time.perf_counter() - started
    result["compiling"] = compilations() != compiled_before  # torch.compile ran during the bench: timings include it
    return result


# ----------------------------------------------------------------------------------------------- printing


def _fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def format_bench(result: dict) -> str:
    """A readable table of :func:`run_bench`'s result."""
    lines = [COMPILING_NOTE] if result.get("compiling") else []
    header = (f"{'category':<15}{'method':<26}{'tok/pass':>9}{'tok/fwd':>8}{'accept':>8}{'tok/s':>8}"
              f"{'speedup':>9}{'ids=HF':>8}")
    sections = list(result["categories"].items()) + [("OVERALL", result["overall"])]
    lines.append(header)
    lines.append("-" * len(header))
    for category, summary in sections:
        for i, (name, fig) in enumerate(summary["methods"].items()):
            same = fig.get("ids_identical_to_transformers")
            lines.append(f"{category if i == 0 else '':<15}{name:<26}{_fmt(fig['tokens_per_pass']):>9}"
                         f"{_fmt(fig['tokens_per_forward']):>8}{_fmt(fig['acceptance_rate']):>8}{_fmt(fig['tokens_per_s'], '.1f'):>8}"
                         f"{_fmt(fig['speedup']):>9}{'-' if same is None else ('yes' if same else 'NO'):>8}"
                         + _paired_cell(fig))
        if summary["baseline_ratio_vs_transformers"] is not None:
            ratios = ", ".join(f"{v}: {_fmt(r)}" for v, r in summary["speedup_ratio_vs_transformers"].items())
            lines.append(f"{'':<15}baseline ours/transformers: {_fmt(summary['baseline_ratio_vs_transformers'])}; "
                         f"speedup ours/transformers: {ratios or '-'}")
    lines.append("")
    same = result["ids_identical_to_transformers"]
    lines.append("ids identical to transformers' greedy: " + ("not checked (no transformers runs)" if same is None
                                                               else "yes" if same else "NO"))
    if result["settings"].get("paired"):
        lines.append("paired: each ours/<drafter> speedup is against the standard runs timed in lockstep with it; "
                     "'paired runs' = quartiles of the single runs' ratios (how many runs)")
    if result.get("lookahead_cost"):
        lines.append(lookahead_cost_line(result["lookahead_cost"]))
    same = result.get("ids_identical_to_standard")
    if same is not None:
        lines.append(f"ids identical to our standard decoding ({result.get('dtype')}): " + ("yes" if same else "NO"))
    lines += _difference_lines(result)
    if result.get("suffix_note"):
        lines.append(result["suffix_note"])
    targets = result.get("head_targets")
    if targets:
        lines.append("")
        lines.append("trained drafters (goals of the EAGLE/Medusa issue):")
        for key, label in (("eagle_chain_k4_tokens_per_pass", "EAGLE chain k=4 tokens/pass"),
                           ("tree_tokens_per_pass", "best tree tokens/pass"),
                           ("best_trained_speedup", "best trained speedup")):
            fig = targets[key]
            met = "-" if fig["met"] is None else ("met" if fig["met"] else "NOT met")
            lines.append(f"  {label:<30}{_fmt(fig['value']):>7}  (goal >= {fig['goal']}: {met})"
                         + (f"  {fig['method']}" if fig.get("method") else ""))
        for category, fig in targets["vs_ngram_by_category"].items():
            lines.append(f"  {category:<15} {fig['trained']} {fig['trained_tokens_per_s']:.1f} tok/s vs n-gram "
                         f"{fig['ngram_tokens_per_s']:.1f} tok/s = {fig['ratio']:.2f}x"
                         + (" (open-ended)" if fig["open_ended"] else ""))
    m = result["machine"]
    lines.append(f"{result['target']['label']} on {result['device']['device']} ({result['target']['kernels']}); "
                 f"{m['cpu_count']} CPUs, "
                 f"{m['torch_threads']} torch threads; torch {result['versions']['torch']}, transformers "
                 f"{result['versions']['transformers']}; {result['wall_s']:.1f} s; load average at start "
                 f"{_fmt(m.get('load_average_1min'), '.1f')}, at end {_fmt(m.get('load_average_1min_end'), '.1f')}")
    return "\n".join(lines)


def _difference_lines(result: dict) -> list[str]:
    """One line per run whose greedy ids left our standard decoding's or transformers' (where and the gap)."""
    lines = []
    for rec in result["prompts"]:
        for name, res in rec["results"].items():
            if res.get("ids_identical_to_standard") is False:
                lines.append(f"  {rec['id']} {name}: {divergence_line(res | {'reason': res['divergence_reason']})}")
            if res.get("ids_identical_to_transformers") is False:
                lines.append(f"  {rec['id']} {name}: first difference at token {res['first_difference']} "
                             f"(baseline top-2 logit gap there: {_fmt(res.get('baseline_near_tie_gap'), '.4f')})")
    return lines


def _paired_cell(fig: dict) -> str:
    """The spread of a paired figure: "  paired runs 0.97-1.05 (12)" (quartiles of the single pairs' ratios, how
    many pairs), "  one paired run" (no spread to give), or "" for an unpaired figure."""
    q, runs = fig.get("speedup_quartiles"), fig.get("paired_runs")
    if not q:
        return ""
    if runs == 1:
        return "  one paired run: no spread"
    return f"  paired runs {_fmt(q[0])}-{_fmt(q[1])} ({runs})"


def _verify_costs(fig: dict) -> str:
    """'k=1: 1.05 (1.02-1.08), ...' from a figure of :func:`_cost_figures` (quartiles where the result has them)."""
    spread = fig.get("verify_cost_spread") or {}
    parts = []
    for k, value in fig["verify_cost"].items():
        q = spread.get(k) or spread.get(str(k))
        parts.append(f"k={k}: {value:.2f}" + (f" ({q[0]:.2f}-{q[1]:.2f})" if q else ""))
    return ", ".join(parts)


def _kernel_summary_lines(result: dict) -> list[str]:
    """One line per timed variant of :func:`kernel_bench` (as loaded, without row padding, default kernels, after a
    long context): its one-token step against the floor and its worst verify cost for k <= 4, with the goals."""
    def verdict(met) -> str:
        return "-" if met is None else ("met" if met else "NOT met")

    long, unpadded, plain = result.get("long_context"), result.get("unpadded"), result.get("plain")
    long_unpadded = result.get("long_context_unpadded")
    rows = [("as loaded", result)] + ([("no row padding", unpadded)] if unpadded else []) + (
        [("default kernels", plain)] if plain else []) + (
        [(f"after {long['prompt_len']} tok", long)] if long else []) + (
        [("  no row padding", long_unpadded)] if long_unpadded else [])
    lines = []
    if unpadded:
        table = sorted(result["row_padding"].items(), key=lambda item: int(item[0]))
        lines.append("row padding (n rows computed as m): " + ", ".join(f"{n}->{m}" for n, m in table)
                     + "; 'no row padding' times the same model without it, interleaved")
    for name, fig in rows:
        worst = max((v for k, v in fig["verify_cost"].items() if int(k) <= VERIFY_TARGET_MAX_K), default=float("nan"))
        lines.append(f"  {name:<16} one-token step {fig['step_ms']:6.1f} ms = {fig['step_effective_gbs']:5.1f} GB/s "
                     f"= {fig['fraction_of_floor']:.2f} of the floor's speed (goal >= {STEP_TARGET_FRACTION:.2f}: "
                     f"{verdict(fig['step_target_met'])}); max verify cost k<={VERIFY_TARGET_MAX_K}: {worst:.2f} "
                     f"(goal <= {VERIFY_TARGET_RATIO:.2f}: {verdict(fig['verify_target_met'])})")
    return lines


def format_kernel(result: dict) -> str:
    """A readable table of :func:`kernel_bench`'s result (and the default kernels' figures, when measured)."""
    plain = result.get("plain")
    lines = [f"{result['target']['label']} on {result['device']['device']}, {result['machine']['torch_threads']} "
             f"torch threads: {result['param_bytes'] / 1e6:.0f} MB of weights read per forward; copy bandwidth "
             f"{result['copy_bandwidth_gbs']:.1f} GB/s (read + write) -> floor {result['floor_ms']:.1f} ms per step",
             f"kernels: {result.get('speed', '-')}; forward: {result['target'].get('forward', '-')}"]
    if result.get("compiling"):
        lines.append(COMPILING_NOTE)
    long, unpadded = result.get("long_context"), result.get("unpadded")
    lines += _kernel_summary_lines(result)
    header = f"{'new tokens':>10}{'ms':>9}{'T(n)/T(1)':>11}{'GB/s':>8}"
    if plain:
        header += f"{'default ms':>12}{'T(n)/T(1)':>11}{'GB/s':>8}"
    lines.append(header)
    plain_rows = {row["new_tokens"]: row for row in plain["curve"]} if plain else {}
    for row in result["curve"]:
        line = f"{row['new_tokens']:>10}{row['ms']:>9.1f}{row['ratio_vs_1']:>11.2f}{row['effective_gbs']:>8.1f}"
        if plain:
            other = plain_rows[row["new_tokens"]]
            line += f"{other['ms']:>12.1f}{other['ratio_vs_1']:>11.2f}{other['effective_gbs']:>8.1f}"
        lines.append(line)
    lines.append("verify cost T(k+1)/T(1), median of per-round ratios (quartiles): " + _verify_costs(result))
    if unpadded:
        lines.append("  no row padding: " + _verify_costs(unpadded))
    if plain:
        lines.append("  default kernels: " + _verify_costs(plain))
    if long:
        lines.append(f"  after {long['prompt_len']} tokens of context: " + _verify_costs(long))
    if result.get("long_context_unpadded"):
        lines.append(f"  after {long['prompt_len']} tokens, no row padding: "
                     + _verify_costs(result["long_context_unpadded"]))
    if result.get("lookahead_cost"):
        lines.append(lookahead_cost_line(result["lookahead_cost"]))
    costs = result.get("drafter_costs")
    if costs:
        lines.append("")
        lines.append("pass cost in one-token steps = (draft ms + verify ms) / step ms; also the tokens per pass "
                     "needed to break even")
        for key, curve in costs["drafters"].items():
            lines.append(f"  {key:<12} " + ", ".join(
                f"k={k}: {_fmt(fig['pass_cost_steps'])} ({fig['draft_ms']:.1f} ms draft"
                + (f", {fig['nodes']} nodes" if fig["nodes"] != int(k) else "") + ")"
                for k, fig in curve.items()))
        for key, why in costs["skipped"].items():
            lines.append(f"  {key:<12} skipped: {why}")
    return "\n".join(lines)


def write_json(result: dict, path: str | os.PathLike) -> None:
    """Write ``result`` as indented JSON (creating the folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
