"""The arena of speculative decoding, as plain functions (no Gradio: the app's Arena and
"Why it works" tabs call these).

Arena (:func:`run_arena`). Per prompt, every drafter x k runs once, with standard decoding (the baseline) timed
before the first method, between every two and after the last (B, m1, B, m2, ..., B), all with the same target and
:class:`~specviz.core.engine.GenerationConfig` (only k / adaptive k change). A method's ratios divide its rate by the
pooled rate of the two baseline runs beside it, so a slow moment of a shared machine weighs on both sides of a
ratio instead of on every method of a prompt at once; ``baseline_drift`` says how much those two disagreed.
Every run is timed on its own clock (:class:`~specviz.core.events.PassEvent` timings). One short warm-up of each method
runs first, and an untimed prefill of each prompt before its runs, so that no measured run pays for first-call
initialisation; the order of the methods rotates from prompt to prompt, so none always runs first.

Definitions of the figures (one row per prompt x method, and pooled per category and overall):
- tokens_per_pass = tokens after the prefill / target passes after it (bonus included; 1.0 for the baseline).
- acceptance_rate = accepted / drafted (bonus excluded). alpha = accepted / (accepted + rejections), the
  per-token acceptance of the formulas (only positions the target judged count).
- m = drafted tokens / pass (the mean draft length: k for a fixed k unless the drafter proposed fewer).
- tokens_per_s = generated tokens / seconds on the run's own clock (prefill included); speedup = a run's
  tokens_per_s / that of the baseline runs beside it; decode_speedup = the same without the prefill (the headline,
  as in the Live tab, and what the predictions model).
- T_step = the baseline's target forward ms per token after the prefill; T_verify = the speculative run's
  target forward ms per pass; T_draft = its drafting ms per pass; c = T_draft / drafted token / T_step.
- predicted_speedup_paper = (1 - alpha^(m+1)) / ((1 - alpha)(c m + 1)) (Leviathan et al. 2023, Thm 3.8;
  a verification is assumed to cost one target step).
- predicted_speedup_measured = E[tokens per pass] x T_step / (T_verify + T_draft). The gap between the two
  predictions is the verification overhead (T_verify against T_step).
- ids_identical (greedy only, None when sampling) = the run's ids equal the baseline's.
- speedup_low / speedup_high and decode_speedup_low / decode_speedup_high: the spread of a method's ratios, its
  rate over each of the two baseline runs beside it taken alone (:func:`speedup_spread`); pooled rows take the
  lowest and the highest over their prompts. None where no pair of baseline runs gives one (and for the baseline
  itself, the reference).
- <figure>_low / <figure>_high for the other timed figures (:func:`timed_spread`, :func:`derived_spread`):
  tokens_per_s over the runs pooled in the row (the baseline's row of a prompt: all its runs; a method runs once
  per prompt: none); baseline_tokens_per_s and t_step_ms over the baseline runs beside the method (the baseline's
  row: all its runs), lowest and highest run; t_verify_ms and t_draft_ms (means over the method's passes) the 95%
  percentile-bootstrap interval of that mean over its passes (:func:`~specviz.measure.stats.bootstrap_mean`); c and
  the two predictions computed from the ends of their parts' spreads (each end from the parts' ends that push it
  furthest that way).
  Pooled rows take the lowest and highest over their prompts (a prompt without a spread of its own adds its value).
  None where there is no spread to tell (one run, one pass).
Pooled figures add the counts and the times of their rows first, then divide.

Layout: this module runs the arena (the methods, the loop over prompts, one run); the rows, their figures and the
exports are :mod:`specviz.analysis.arena_rows`; the cost side (the forward grid, draft costs, what-if curves) is
:mod:`specviz.measure`. Import those names from there.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from specviz.analysis.arena_rows import (AUTO, AUTO_K_START, BASELINE, TREE_DRAFTERS, TREE_NODES, TREE_SUFFIX,
                                         WARMUP_TOKENS, ArenaResult, Measured, Variant, _counts, baseline_drift,
                                         make_row, pool_runs, summarize)
from specviz.analysis.prompts import Prompt
from specviz.core.engine import MAX_K, GenerationConfig, speculative_generate, standard_generate
from specviz.core.events import RunCancelled
from specviz.core.generation_settings import settings_record
from specviz.drafters.registry import drafter_keys, make_drafter, split_variant
from specviz.measure.grid import ArenaProgress, ShouldStop
from specviz.measure.machine import environment
from specviz.measure.run_stats import RunStats


def parse_ks(ks: Iterable[int | str]) -> list[int | str]:
    """Validate draft lengths: ints in 1..MAX_K (also as strings) and "auto"; duplicates dropped, order kept.

    Raises:
        ValueError: an entry that is neither.
    """
    out: list[int | str] = []
    for k in ks:
        text = str(k).strip().lower()
        value: int | str
        if text == AUTO:
            value = AUTO
        else:
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"k must be a whole number in 1..{MAX_K} or 'auto', got {k!r}") from None
            if not 1 <= value <= MAX_K:
                raise ValueError(f"k must be in 1..{MAX_K} or 'auto', got {value}")
        if value not in out:
            out.append(value)
    return out


def variants(drafters: Sequence[str], ks: Sequence[int | str]) -> list[Variant]:
    """The baseline, then every drafter x k (drafters in the given order, "none" skipped).

    Raises:
        ValueError: no drafter or no k, an unknown drafter key, or a bad k.
    """
    keys = [d for d in dict.fromkeys(drafters) if d != BASELINE]
    unknown = [d for d in keys if not is_drafter_key(d)]
    if unknown:
        raise ValueError(f"unknown drafter {unknown[0]!r}; choose from: {', '.join(drafter_keys()[1:])} "
                         f"({' and '.join(f'{d}:{TREE_SUFFIX}' for d in TREE_DRAFTERS)} draft trees, "
                         f"{' and '.join(f'{d}:lookup' for d in TREE_DRAFTERS)} try n-gram lookup first)")
    if not keys:
        raise ValueError("Pick at least one drafter.")
    parsed = parse_ks(ks)
    if not parsed:
        raise ValueError("Pick at least one draft length k.")
    return [Variant(BASELINE)] + [Variant(d, AUTO_K_START if k == AUTO else int(k), k == AUTO)
                                  for d in keys for k in parsed]


def is_drafter_key(key: str) -> bool:
    """A registry key, or a head drafter with suffixes: "eagle:tree" / "medusa:tree" (a tree of
    :data:`TREE_NODES`), "eagle:lookup" / "medusa:lookup" (n-gram lookup first), or both
    (:func:`specviz.drafters.registry.split_variant`)."""
    try:
        split_variant(key)
    except ValueError:
        return False
    return True


def build_drafter(key: str, target, *, draft_spec: str | None = None, exit_layer: int | None = None):
    """A fresh drafter for an arena key (None for the baseline); "<key>:tree" drafts a tree of
    :data:`TREE_NODES` nodes (greedy; a chain when sampling). Raises ValueError (e.g.
    :class:`specviz.drafters.networks.HeadsError` when no trained heads fit the target)."""
    if key == BASELINE:
        return None
    v = split_variant(key)
    return make_drafter(v.base, target, draft_spec=draft_spec, exit_layer=exit_layer,
                        tree_nodes=TREE_NODES if v.tree else 0, lookup=v.lookup)


def as_prompts(prompts: Iterable[dict | Prompt]) -> list[Prompt]:
    """Prompts from ``{"id", "category", "prompt"}`` dicts (or :class:`~specviz.analysis.prompts.Prompt`).

    Raises:
        ValueError: no prompts, or an empty prompt.
    """
    out = []
    for i, p in enumerate(prompts, start=1):
        if isinstance(p, Prompt):
            out.append(p)
            continue
        text = str(p.get("prompt") or "")
        if not text.strip():
            raise ValueError("The prompt is empty.")
        out.append(Prompt(str(p.get("id") or f"prompt-{i}"), str(p.get("category") or "custom"), text))
    if not out:
        raise ValueError("There are no prompts to run.")
    return out


def measure_run(target, drafter, prompt_ids: list[int], config: GenerationConfig,
                should_stop: ShouldStop | None = None) -> Measured | None:
    """Run standard decoding (``drafter`` None) or speculative decoding to the end; None if stopped midway."""
    if drafter is None:
        events = standard_generate(target, prompt_ids, config, cancel=should_stop)
    else:
        events = speculative_generate(target, drafter, prompt_ids, config, cancel=should_stop)
    stats, ids, trees = RunStats(), [], 0
    try:
        for event in events:
            stats.add(event)
            ids.extend(event.emitted_ids)
            trees += event.tree is not None
    except RunCancelled:  # should_stop said so before a forward: nothing more ran
        return None
    return Measured(stats, tuple(ids), trees)


def _arena_settings(target, prompts: list[Prompt], methods: list[Variant], config: GenerationConfig, **options
                    ) -> dict:
    """The settings an arena result records (JSON-able)."""
    return {
        "target": target.spec, "drafters": list(dict.fromkeys(v.drafter for v in methods[1:])),
        "ks": list(dict.fromkeys(v.k_label for v in methods[1:])),
        "auto_k_start": AUTO_K_START, "max_new_tokens": config.max_new_tokens,
        "sampling": settings_record(config.sampling, config.stop_token_ids, config.stop_strings),
        "stop_strings": list(config.stop_strings), "stop_token_ids": list(config.stop_token_ids),
        "k_max": config.k_max, **options, "prompts": [dataclasses.asdict(p) for p in prompts],
    }


@dataclass(frozen=True)
class ArenaOptions:
    """How the arena builds and warms its methods: ``draft_spec`` (the "model" drafter's model), ``exit_layer``
    (early exit's layer), ``use_chat_template`` (encode the prompts as chat turns), ``warmup_tokens`` (the tokens of
    each method's untimed warm-up run; 0: no warm-up and no untimed prefill per prompt)."""

    draft_spec: str | None = None
    exit_layer: int | None = None
    use_chat_template: bool = True
    warmup_tokens: int = WARMUP_TOKENS


@dataclass(frozen=True)
class _Session:
    """What every run of one arena shares: the target, the settings every run starts from, a fresh drafter per method
    (``drafter_for(variant)``, None for the baseline), the stop check, and ``tick(label)``, called before each timed
    run."""

    target: object
    config: GenerationConfig
    drafter_for: Callable[[Variant], object]
    stop: ShouldStop
    tick: Callable[[str], None]

    def run(self, v: Variant, ids: list[int], config: GenerationConfig | None = None) -> Measured | None:
        """One run of method ``v`` on ``ids`` (``config``: instead of the session's); None when stopped."""
        return measure_run(self.target, self.drafter_for(v), ids, v.config(config or self.config), self.stop)


def _warm_up(session: _Session, methods: list[Variant], ids: list[int], tokens: int) -> bool:
    """One short untimed run of each method (kernels, caches and allocator warm); False when stopped."""
    warm = dataclasses.replace(session.config, max_new_tokens=min(tokens, session.config.max_new_tokens))
    for v in methods:
        if session.stop() or session.run(v, ids, warm) is None:
            return False
    return True


def _measure_prompt(session: _Session, methods: list[Variant], number: int, prompt: Prompt, ids: list[int]
                    ) -> dict[Variant, tuple] | None:
    """Every method on one prompt, with standard decoding timed before the first, between every two and after the
    last (B, m1, B, m2, ..., B), so each method's ratio uses the two baseline runs beside it and a slow moment
    of the machine weighs on both sides of it. The methods' order rotates per prompt (none always runs first);
    ``session.tick(label)`` before each run.

    Returns method -> (its run, the two baseline runs beside it pooled, their :func:`baseline_drift`, those two
    runs, [its run], every baseline run of the prompt); the baseline -> (all its runs pooled, the same, the drift
    over all of them, [] : it is the reference of the ratios, with no spread of its own, all its runs: the spread
    of its timings, []). None when stopped.

    A method's ratios are taken against the two runs beside it, their spread against every baseline run of its
    prompt: the method runs once, so how far the prompt's standard runs differ is the least its own run may be off
    too. A trial read "0.98× the speed, slower (0.975–0.981×)" beside two runs that happened to agree while the
    prompt's standard runs were 116% apart."""
    base_v, drafters = methods[0], methods[1:]
    shift = number % len(drafters)

    def timed(v: Variant) -> Measured | None:
        session.tick(f"{prompt.id} ({prompt.category}): {v.label}")
        return session.run(v, ids)

    baselines = [timed(base_v)]
    runs: dict[Variant, tuple] = {}
    for v in drafters[shift:] + drafters[:shift]:
        run = timed(v) if baselines[-1] is not None else None
        after = timed(base_v) if run is not None else None
        if after is None:
            return None
        baselines.append(after)
        runs[v] = (run, pool_runs(baselines[-2:]), baseline_drift(baselines[-2:]), baselines[-2:], [run])
    if baselines[0] is None:
        return None
    runs = {v: (*measured, list(baselines)) for v, measured in runs.items()}  # the spread: every standard run
    everything = pool_runs(baselines)
    runs[base_v] = (everything, everything, baseline_drift(baselines), [], baselines, [])
    return runs


def _drafter_notes(session: _Session, methods: list[Variant]) -> list[str]:
    """Build every method's drafter once, before anything is measured (a bad drafter fails here, a draft model
    loads), and return the sentences they ask to show, each once."""
    notes: list[str] = []
    for v in methods[1:]:
        note = getattr(session.drafter_for(v), "note", "")
        if isinstance(note, str) and note and note not in notes:
            notes.append(note)
    return notes


def iter_arena(target, prompts: Iterable[dict | Prompt], drafters: Sequence[str], ks: Sequence[int | str],
               config: GenerationConfig, progress: ArenaProgress | None = None, should_stop: ShouldStop | None = None,
               **options) -> Iterator[ArenaResult]:
    """:func:`run_arena` step by step: yields the growing result after each prompt (the last one is final).
    ``options``: the fields of :class:`ArenaOptions` by name (TypeError for any other)."""
    from specviz.runtime.models import encode_prompt

    started = time.perf_counter()
    opts = ArenaOptions(**options)
    prompts = as_prompts(prompts)
    methods = variants(drafters, ks)
    encoded = [encode_prompt(target.tokenizer, p.prompt, use_chat_template=opts.use_chat_template) for p in prompts]
    result = ArenaResult(prompts=prompts, variants=methods, environment=environment(target), settings=_arena_settings(
        target, prompts, methods, config, **dataclasses.asdict(opts)))
    say = progress or (lambda fraction, message: None)
    total, done = len(prompts) * (2 * len(methods) - 1), [0]  # every method, and a baseline after each

    def tick(label: str) -> None:
        say(done[0] / total, label)
        done[0] += 1

    session = _Session(target, config, lambda v: build_drafter(v.drafter, target, draft_spec=opts.draft_spec,
                                                               exit_layer=opts.exit_layer),
                       should_stop or (lambda: False), tick)
    result.notes.extend(_drafter_notes(session, methods))
    if opts.warmup_tokens > 0:
        say(0.0, "Warming up (one short run of each method)…")
        result.stopped = not _warm_up(session, methods, encoded[0], opts.warmup_tokens)
    for number, (prompt, ids) in enumerate(zip(prompts, encoded)):
        if result.stopped:
            break
        if opts.warmup_tokens > 0:  # an untimed prefill of this prompt, so no method pays for its first shape
            measure_run(target, None, ids, dataclasses.replace(config, max_new_tokens=1), session.stop)
        runs = _measure_prompt(session, methods, number, prompt, ids)
        if runs is None:
            result.stopped = True
            break
        result.rows.extend(make_row("prompt", prompt.category, prompt.id, v,
                                    _counts(*runs[v][:2], config.sampling.greedy, *runs[v][2:])) for v in methods)
        result.summary = summarize(result.rows, methods)
        result.wall_s = time.perf_counter() - started
        say(done[0] / total, f"{prompt.id} done")
        yield result
    result.wall_s = time.perf_counter() - started
    say(1.0, "Stopped." if result.stopped else "Done.")
    yield result


def run_arena(target, prompts: Iterable[dict | Prompt], drafters: Sequence[str], ks: Sequence[int | str],
              config: GenerationConfig, progress: ArenaProgress | None = None, should_stop: ShouldStop | None = None,
              **options) -> ArenaResult:
    """Race drafters x k against standard decoding of ``target`` on each prompt (see the module docstring).

    Args:
        target: a :class:`specviz.runtime.models.LoadedModel`.
        prompts: ``{"id", "category", "prompt"}`` dicts (or :class:`~specviz.analysis.prompts.Prompt`).
        drafters: drafter keys (:func:`~specviz.drafters.registry.drafter_keys`, and "eagle:tree" / "medusa:tree"
            for a tree of :data:`TREE_NODES`; "none" is ignored: the baseline always runs).
        ks: draft lengths, ints in 1..16 and/or "auto" (cost-aware k starting at :data:`AUTO_K_START`).
        config: the settings every run shares (its k and adaptive_k are replaced per method).
        progress: optional ``progress(fraction, message)``.
        should_stop: optional callable checked before every target pass; True ends the arena (``stopped``).
        **options: the fields of :class:`ArenaOptions` (``draft_spec``, ``exit_layer``, ``use_chat_template``,
            ``warmup_tokens``).

    Raises:
        ValueError: no drafter or k, a bad k or drafter, an empty prompt.
        specviz.runtime.models.ModelLoadError: a draft model that cannot be loaded.
    """
    result = ArenaResult()
    for result in iter_arena(target, prompts, drafters, ks, config, progress, should_stop, **options):
        pass
    return result
