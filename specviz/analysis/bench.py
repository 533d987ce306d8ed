"""The benchmark harness: a prompt suite x drafters x k, measured against transformers' own generate().

Its parts: the prompts (:mod:`specviz.analysis.prompts`), one timed run of a method
(:mod:`specviz.analysis.bench_runs`), the report (:mod:`specviz.analysis.bench_report`); timing, the
machine's load and the kernel bench are :mod:`specviz.measure`'s. Import those names from there.

The two benchmarks are plain functions that return JSON-able dicts (the CLI in :mod:`specviz.cli` only
parses flags and prints):

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
- :func:`~specviz.measure.kernel.kernel_bench` (the cost side): in :mod:`specviz.measure.kernel`.

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

import copy
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from specviz.analysis.bench_report import DEFINITIONS, head_targets
from specviz.analysis.bench_runs import (Measurement, Method, TransformersDrafting, run_ours, run_ours_paired,
                                         run_transformers, transformers_counterpart, transformers_settings)
from specviz.analysis.exactness import compare_ids, first_divergence
from specviz.analysis.prompts import Prompt
from specviz.core.engine import GenerationConfig
from specviz.core.generation_settings import settings_record
from specviz.core.kv import compilations
from specviz.core.verify import SamplingConfig
from specviz.drafters.registry import make_drafter, split_variant
from specviz.drafters.suffix import SuffixDrafter
from specviz.measure.costs import lookahead_cost
from specviz.measure.kernel import _quartiles
from specviz.measure.machine import environment, load_average

QUICK_DRAFTERS = ("ngram", "bf16")
QUICK_K = (4,)
QUICK_MAX_NEW_TOKENS = 32
QUICK_REPEATS = 1
QUICK_MAX_CATEGORIES = 6  # keeps --quick under two minutes on a 2-core CPU (one torch thread, light load)
QUICK_WARMUP_EVERY_PROMPT = False  # --quick warms up once, on the first prompt
Progress = Callable[[str], None]


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
    tree_width: int = 3  # the tree's nodes expanded per depth, and candidates taken from each
    min_confidence: float | None = None  # eagle / medusa confidence gate (None: the drafters' default)
    head_weights: str | None = None  # eagle / medusa / distilled weights while drafting: int8 / float (None: int8 on the CPU)
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
        drafting = TransformersDrafting(prompt_lookup_k=method.k, ngram_max=settings.ngram_max)
    else:
        drafting = TransformersDrafting(assistant=drafter.model, k=method.k, adaptive=method.adaptive)
    return run_transformers(target, prompt_ids, max_new_tokens, drafting, settings=same)


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


def make_drafters(target, settings: BenchSettings, progress: Progress | None = None) -> dict:
    """One drafter instance per key (each run resets it; a draft model is loaded once)."""

    drafters: dict = {}
    for key in settings.drafters:
        if key != "none" and key not in drafters:
            v = split_variant(key)
            drafters[key] = make_drafter(v.base, target, draft_spec=settings.draft_spec, exit_layer=settings.exit_layer,
                                         ngram_max=settings.ngram_max, ngram_min=settings.ngram_min,
                                         heads_path=settings.heads_path,
                                         tree_nodes=settings.tree_nodes if v.tree else 0,
                                         tree_width=settings.tree_width,
                                         min_confidence=settings.min_confidence, lookup=v.lookup,
                                         head_weights=settings.head_weights,
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
        target: the :class:`specviz.runtime.models.LoadedModel` to decode with.
        prompts: the prompts (see :func:`load_prompts`).
        settings: drafters, k values, budget, repeats.
        progress: optional callable(str) for progress lines.
        deadline_s: seconds after the start past which no further prompt is started (None: no limit); the prompts
            left are listed in ``skipped_prompts`` and every figure covers the prompts that ran (at least one).

    Raises:
        ValueError / ModelLoadError: bad settings, an empty prompt, or a draft model that cannot be loaded.
    """
    from specviz.runtime.models import encode_prompt

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
    _add_drafter_notes(result, target, drafters, settings)
    result["machine"]["load_average_1min"] = load_at_start  # environment() ran at the end
    result["machine"]["load_average_1min_end"] = load_average()
    result["compiling"] = compilations() != compiled_before  # torch.compile ran during the bench: timings include it
    return result


def _add_drafter_notes(result: dict, target, drafters: dict, settings: BenchSettings) -> None:
    """Add to ``result`` what its drafters call for: the weights the trained heads drafted with (what "auto" came
    to here, in ``settings``), the trained drafters' targets, the suffix drafter's note, lookahead's cost."""
    from specviz.drafters.distilled import DistilledDrafter
    from specviz.drafters.heads import EagleDrafter, MedusaDrafter

    trained = (EagleDrafter, MedusaDrafter, DistilledDrafter)
    formats = sorted({d.weights for d in drafters.values() if isinstance(d, trained)})
    if formats:
        result["settings"]["head_weights"] = "/".join(formats)
    targets = head_targets(result["overall"], result["categories"])
    if targets:
        result["head_targets"] = targets
    result["suffix_note"] = suffix_note(settings)
    if any(key.split(":")[0] == "lookahead" for key in settings.drafters):
        result["lookahead_cost"] = lookahead_cost(target, settings.window, settings.ngram, settings.candidates)


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


def write_json(result: dict, path: str | os.PathLike) -> None:
    """Write ``result`` as indented JSON (creating the folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
