"""One timed generation of the bench, ours or transformers': what a method is (:class:`Method`), what a run gives
(:class:`Measurement`: ids, wall time, forwards, passes), our engine's runs (alone, or paired with a standard run
pass by pass) and transformers' ``generate()`` with its matching drafter (prompt lookup or an assistant model)."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch

from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.events import PassEvent
from specviz.core.kv import Clock
from specviz.core.race import race
from specviz.core.verify import SamplingConfig
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.measure.run_stats import RunStats


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


@dataclass(frozen=True)
class TransformersDrafting:
    """How transformers' ``generate()`` drafts: prompt lookup of ``prompt_lookup_k`` tokens (n-grams up to
    ``ngram_max``), or an ``assistant`` model proposing ``k`` tokens a pass (``adaptive``: its own heuristic
    schedule); neither set: plain greedy decoding."""

    prompt_lookup_k: int | None = None
    ngram_max: int = 3
    assistant: torch.nn.Module | None = None
    k: int = 4
    adaptive: bool = False


def run_transformers(target, prompt_ids: list[int], max_new_tokens: int,
                     drafting: TransformersDrafting = TransformersDrafting(), settings: dict | None = None
                     ) -> Measurement:
    """transformers' ``generate()`` greedy on the same ids and EOS ids, optionally drafting (prompt lookup or an
    assistant model: ``drafting``), and with the processors of ``settings`` (:func:`transformers_settings`); times
    the whole call and counts target forwards."""
    from transformers import GenerationConfig as HFGenerationConfig

    model = target.model
    settings = dict(settings or {})
    eos = list(dict.fromkeys(list(target.eos_token_ids) + settings.pop("stop_token_ids", [])))
    gen_config = HFGenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, eos_token_id=eos or None,
        pad_token_id=eos[0] if eos else None, temperature=None, top_p=None, top_k=None, **settings,
    )
    kwargs: dict = {}
    prompt_lookup_k, assistant = drafting.prompt_lookup_k, drafting.assistant
    if prompt_lookup_k is not None:
        gen_config.prompt_lookup_num_tokens = prompt_lookup_k
        gen_config.max_matching_ngram_size = drafting.ngram_max
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=target.device)
    mask = torch.ones_like(ids)
    count_passes = assistant is not model  # an oracle assistant is the target itself: its forwards mix in
    settings = (_assistant_settings(assistant, drafting.k, drafting.adaptive) if assistant is not None
                else contextlib.nullcontext())
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

    if isinstance(drafter, NgramDrafter):
        return "prompt_lookup"
    if isinstance(drafter, ModelDrafter):
        return "assistant"
    return None
