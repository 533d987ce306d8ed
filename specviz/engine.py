"""The speculative decoding loop and the standard-decoding baseline, both as generators of PassEvent.

Speculative loop (Leviathan et al. 2023; Chen et al. 2023), one target pass per iteration:
  1 draft     the drafter proposes m <= k tokens after the committed sequence
  2 verify    one target forward over [last committed token] + draft -> (m+1, V) logits
  3 accept    greedy prefix match, or rejection sampling (:mod:`specviz.verify`)
  4 rollback  drop rejected positions from the target's and the drafter's caches
  5 update    emit accepted + recovered/bonus token, cut at EOS / stop string / max_new_tokens

Cache invariant (asserted after every pass when ``check_invariants`` is on): the target cache holds
exactly committed - 1 positions, committed = prompt + emitted tokens; the last emitted token is fed at
the start of the next pass. The prefill emits the first token and is reported on its own (index 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch

from specviz.drafters.base import DraftContext, Drafter
from specviz.events import PassEvent, PositionDetail, RunResult, Timings
from specviz.kv import (Clock, cache_length, forward_logits, forward_logits_features, keep_positions, new_cache,
                        rollback_cache)
from specviz.tree import tree_attention_mask, tree_positions, verify_tree_greedy
from specviz.verify import SamplingConfig, process_logits, sample, verify_greedy, verify_sampling

MAX_K = 16


@dataclass(frozen=True)
class GenerationConfig:
    """Settings shared by the speculative run and its baseline.

    Attributes:
        max_new_tokens: most tokens to generate (>= 1).
        sampling: greedy (temperature 0) or sampling settings, see :class:`SamplingConfig`.
        k: draft length per pass, 1..16 (the starting value when ``adaptive_k``).
        adaptive_k: grow k by 1 after a fully accepted pass, shrink by 1 after a rejection, within [1, k_max].
        k_max: the upper bound of adaptive k.
        stop_strings: generation ends after the token that completes any of these; the text is cut before it.
        check_invariants: assert the cache invariant after each pass (cheap; on by default).
    """

    max_new_tokens: int = 128
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    k: int = 4
    adaptive_k: bool = False
    k_max: int = MAX_K
    stop_strings: tuple[str, ...] = ()
    check_invariants: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 1 <= self.k <= MAX_K:
            raise ValueError(f"k (draft length) must be in 1..{MAX_K}, got {self.k}")
        if not 1 <= self.k_max <= MAX_K:
            raise ValueError(f"k_max must be in 1..{MAX_K}, got {self.k_max}")
        if any(not s for s in self.stop_strings):
            raise ValueError("stop strings must be non-empty")


class OutputTracker:
    """Emits tokens one at a time and applies the stopping rules exactly as standard decoding would.

    Rules, checked after each token in order: the token is an EOS id ("eos", the id is kept in
    ``ids``); the decoded text now contains a stop string ("stop"; the text is cut before it); the
    budget is spent ("length"). Streaming text is released incrementally: a trailing incomplete UTF-8
    sequence (U+FFFD) and any suffix that could still grow into a stop string are held back.
    """

    def __init__(self, tokenizer, max_new_tokens: int, eos_ids: Iterable[int], stop_strings: tuple[str, ...]):
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.eos_ids = frozenset(eos_ids)
        self.stop_strings = stop_strings
        self.ids: list[int] = []
        self.finish_reason: str | None = None
        self._released = ""
        self._stop_at: int | None = None  # character index where a stop string begins

    def _decode(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)

    def push(self, tokens: list[int]) -> list[int]:
        """Append ``tokens`` one by one until a stopping rule fires; return the ones actually emitted."""
        taken: list[int] = []
        for token in tokens:
            if self.finish_reason is not None:
                break
            self.ids.append(token)
            taken.append(token)
            if token in self.eos_ids:
                self.finish_reason = "eos"
            elif self.stop_strings and self._find_stop() is not None:
                self.finish_reason = "stop"
            elif len(self.ids) >= self.max_new_tokens:
                self.finish_reason = "length"
        return taken

    def _find_stop(self) -> int | None:
        text = self._decode()
        hits = [text.find(s) for s in self.stop_strings if s in text]
        self._stop_at = min(hits) if hits else None
        return self._stop_at

    @property
    def text(self) -> str:
        """The output text so far (special tokens skipped; cut before a stop string)."""
        text = self._decode()
        return text[: self._stop_at] if self._stop_at is not None else text

    def release(self) -> str:
        """The newly final part of the text since the last call."""
        text = self.text
        if self.finish_reason is None:
            text = text.rstrip("\ufffd")
            for s in self.stop_strings:  # hold back a tail that may be the start of a stop string
                for n in range(min(len(s) - 1, len(text)), 0, -1):
                    if text.endswith(s[:n]):
                        text = text[:-n]
                        break
        if not text.startswith(self._released):
            return ""  # the decoder rewrote earlier text; wait for a stable prefix
        delta = text[len(self._released):]
        self._released = text
        return delta


class KController:
    """Draft length per pass: fixed, or adaptive (+1 after a fully accepted pass, -1 after a rejection).

    The adaptive rule is the simple heuristic transformers uses for assisted generation's
    "heuristic" schedule, with step 1 both ways, bounded to [1, k_max].
    """

    def __init__(self, config: GenerationConfig) -> None:
        self.k = config.k
        self.adaptive = config.adaptive_k
        self.k_max = config.k_max

    def observe(self, num_drafted: int, num_accepted: int) -> None:
        """Update k after a pass."""
        if not self.adaptive or num_drafted == 0:
            return
        if num_accepted == num_drafted:
            self.k = min(self.k + 1, self.k_max)
        else:
            self.k = max(self.k - 1, 1)


def _choose(logits_row: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None) -> int:
    if sampling.greedy:
        return int(logits_row.argmax())
    return sample(process_logits(logits_row[None], sampling)[0], generator)


def _top2_gap(logits_row: torch.Tensor) -> float:
    top = torch.topk(logits_row, 2).values
    return float(top[0] - top[1])


def _generator(sampling: SamplingConfig, device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(sampling.seed)
    return gen


def _check_prompt(prompt_ids: list[int]) -> list[int]:
    if not prompt_ids:
        raise ValueError("The prompt is empty.")
    return list(prompt_ids)


def _prefill(run, target, prompt_ids, cache, config, gen, out, clock, features: list | None = None) -> PassEvent:
    t0 = clock.now_ms()
    if features is None:
        logits = forward_logits(target.model, prompt_ids, cache, 1)[-1]
    else:  # a drafter reads the target's features: keep them (same logits computation)
        logits, feats = forward_logits_features(target.model, prompt_ids, cache, 1)
        logits = logits[-1]
        features.append(feats)
    t1 = clock.now_ms()
    token = _choose(logits, config.sampling, gen)
    out.push([token])
    gap = _top2_gap(logits)
    delta = out.release()
    t2 = clock.now_ms()
    return PassEvent(
        run=run, index=0, kind="prefill", k=0, draft_ids=(), accept_mask=(), num_accepted=0,
        next_id=token, next_kind="target", emitted_ids=(token,), details=(), text_delta=delta,
        timings=Timings(0.0, t1 - t0, t2 - t1), t_end_ms=t2 - t0, num_generated=len(out.ids),
        target_cache_len=cache_length(cache), finish_reason=out.finish_reason, near_tie_gap=gap,
    )


def standard_generate(target, prompt_ids: list[int], config: GenerationConfig) -> Iterator[PassEvent]:
    """Standard (autoregressive) decoding of ``target``: one event per token, ``k == 0``.

    Args:
        target: a :class:`specviz.models.LoadedModel`.
        prompt_ids: the encoded prompt (non-empty list of ids).
        config: settings; ``k`` is ignored.

    Yields:
        :class:`PassEvent` with run="baseline": the prefill (index 0), then one per generated token.

    Raises:
        ValueError: for an empty prompt.
    """
    prompt_ids = _check_prompt(prompt_ids)
    clock = Clock(target.device)
    gen = _generator(config.sampling, target.device)
    cache = new_cache(target.model)
    out = OutputTracker(target.tokenizer, config.max_new_tokens, target.eos_token_ids, config.stop_strings)
    event = _prefill("baseline", target, prompt_ids, cache, config, gen, out, clock)
    elapsed = event.t_end_ms
    yield event
    index = 0
    while out.finish_reason is None:
        index += 1
        t0 = clock.now_ms()
        logits = forward_logits(target.model, [out.ids[-1]], cache, 1)[-1]
        t1 = clock.now_ms()
        token = _choose(logits, config.sampling, gen)
        out.push([token])
        gap = _top2_gap(logits)
        delta = out.release()
        t2 = clock.now_ms()
        elapsed += t2 - t0
        if config.check_invariants:
            assert cache_length(cache) == len(prompt_ids) + len(out.ids) - 1
        yield PassEvent(
            run="baseline", index=index, kind="pass", k=0, draft_ids=(), accept_mask=(), num_accepted=0,
            next_id=token, next_kind="target", emitted_ids=(token,), details=(), text_delta=delta,
            timings=Timings(0.0, t1 - t0, t2 - t1), t_end_ms=elapsed, num_generated=len(out.ids),
            target_cache_len=cache_length(cache), finish_reason=out.finish_reason, near_tie_gap=gap,
        )


def _details(draft, verdict, target_probs, target_logits) -> tuple[PositionDetail, ...]:
    m = len(draft.token_ids)
    if m == 0:
        return ()
    rows = torch.arange(m, device=target_probs.device)
    ids = torch.tensor(draft.token_ids, device=target_probs.device)
    p = target_probs[rows, ids].tolist()
    top = target_logits[:m].argmax(dim=-1).tolist()
    out = []
    for i in range(m):
        judged = i <= verdict.num_accepted
        u = verdict.uniforms[i] if i < len(verdict.uniforms) else None
        q = draft.token_probs[i] if i < len(draft.token_probs) else 1.0
        out.append(PositionDetail(float(p[i]), float(q), u, int(top[i]), judged))
    return tuple(out)


def speculative_generate(
    target, drafter: Drafter, prompt_ids: list[int], config: GenerationConfig
) -> Iterator[PassEvent]:
    """Speculative decoding of ``target`` with ``drafter``: one event per target pass.

    Args:
        target: a :class:`specviz.models.LoadedModel`.
        drafter: any :class:`~specviz.drafters.base.Drafter` over the same vocabulary.
        prompt_ids: the encoded prompt (non-empty list of ids).
        config: settings (k, sampling, stopping).

    Yields:
        :class:`PassEvent` with run="speculative": the prefill (index 0), then one per target pass.
        Greedy output ids equal :func:`standard_generate`'s (same numerics); sampled output follows the
        target's distribution.

    Raises:
        ValueError: for an empty prompt.
        NotImplementedError: a tree-shaped draft (``Draft.parents``) in sampling mode.

    Tree drafts (greedy): one target forward over [last committed] + all nodes with a tree attention mask
    (:mod:`specviz.tree`); the event's ``draft_ids`` / ``accept_mask`` show the accepted path plus the first
    rejected child, and ``extra["tree"]`` holds the whole tree (tokens, parents, accepted path).
    """
    prompt_ids = _check_prompt(prompt_ids)
    clock = Clock(target.device)
    gen = _generator(config.sampling, target.device)
    cache = new_cache(target.model)
    out = OutputTracker(target.tokenizer, config.max_new_tokens, target.eos_token_ids, config.stop_strings)
    drafter.reset(prompt_ids)
    needs_hidden = bool(getattr(drafter, "needs_hidden", False))
    features: list | None = [] if needs_hidden else None
    event = _prefill("speculative", target, prompt_ids, cache, config, gen, out, clock, features)
    pending = features[0] if needs_hidden else None  # features of committed positions the drafter has not seen
    elapsed = event.t_end_ms
    yield event
    k_control = KController(config)
    index = 0
    while out.finish_reason is None:
        index += 1
        committed = prompt_ids + out.ids
        budget = config.max_new_tokens - len(out.ids)  # tokens still allowed, >= 1
        k = min(k_control.k, budget - 1)  # drafting past the budget could never be emitted
        t0 = clock.now_ms()
        # 1 draft
        draft = drafter.propose(DraftContext(committed, k, config.sampling, gen, pending)) if k > 0 else None
        if draft is not None and draft.parents is not None and len(draft.token_ids) > 0:
            pending, step = yield from _tree_pass(target, drafter, draft, committed, prompt_ids, k, cache, config,
                                                  out, k_control, clock, t0, index, elapsed, needs_hidden)
            elapsed = step
            continue
        draft_ids = list(draft.token_ids[:k]) if draft is not None else []
        t1 = clock.now_ms()
        # 2 verify
        if needs_hidden:
            target_logits, feats = forward_logits_features(target.model, [committed[-1]] + draft_ids, cache,
                                                           len(draft_ids) + 1)
        else:
            target_logits = forward_logits(target.model, [committed[-1]] + draft_ids, cache, len(draft_ids) + 1)
        t2 = clock.now_ms()
        # 3 accept
        target_probs = process_logits(target_logits, config.sampling)
        if config.sampling.greedy:
            verdict = verify_greedy(draft_ids, target_logits)
        else:
            draft_probs = draft.draft_probs[: len(draft_ids)] if draft is not None and draft.draft_probs is not None else None
            verdict = verify_sampling(draft_ids, draft_probs, target_probs, gen)
        n = verdict.num_accepted
        # 4 rollback: keep committed - 1 positions (the recovered/bonus token is fed next pass)
        rollback_cache(cache, len(committed) + n)
        if needs_hidden:
            pending = feats[: n + 1]  # the root and the accepted draft tokens are now committed and cached
        # 5 update
        emitted = out.push(draft_ids[:n] + [verdict.next_id])
        if draft is not None:
            drafter.commit(prompt_ids + out.ids, n)
        k_control.observe(len(draft_ids), n)
        details = _details(draft, verdict, target_probs, target_logits) if draft_ids else ()
        delta = out.release()
        t3 = clock.now_ms()
        elapsed += t3 - t0
        if config.check_invariants and out.finish_reason is None:
            assert cache_length(cache) == len(prompt_ids) + len(out.ids) - 1, "target cache invariant broken"
        yield PassEvent(
            run="speculative", index=index, kind="pass", k=k, draft_ids=tuple(draft_ids),
            accept_mask=tuple(i < n for i in range(len(draft_ids))), num_accepted=n,
            next_id=verdict.next_id, next_kind=verdict.next_kind, emitted_ids=tuple(emitted),
            details=details, text_delta=delta, timings=Timings(t1 - t0, t2 - t1, t3 - t2),
            t_end_ms=elapsed, num_generated=len(out.ids), target_cache_len=cache_length(cache),
            draft_cache_len=drafter.cache_len, finish_reason=out.finish_reason,
            extra={"next_k": k_control.k, **({"draft_source": draft.source} if draft is not None and draft.source
                                              else {})},
        )


def _tree_pass(target, drafter, draft, committed, prompt_ids, k, cache, config, out, k_control, clock, t0, index,
               elapsed, needs_hidden):
    """One pass over a tree draft (greedy only): tree-masked verify, greedy walk, keep the accepted path's
    cache entries. Yields its PassEvent; returns (features for the drafter, new elapsed ms)."""
    if not config.sampling.greedy:
        raise NotImplementedError("tree drafts are verified in greedy mode only; draft a chain when sampling")
    t1 = clock.now_ms()
    tokens, parents = list(draft.token_ids), list(draft.parents)
    context = cache_length(cache)  # committed - 1
    mask = tree_attention_mask(parents, context, device=target.device)
    positions = tree_positions(parents, context, device=target.device)
    target_logits, feats = forward_logits_features(target.model, [committed[-1]] + tokens, cache, len(tokens) + 1,
                                                   attention_mask=mask, position_ids=positions)
    t2 = clock.now_ms()
    verdict = verify_tree_greedy(tokens, parents, target_logits)
    path = list(verdict.path)
    n = len(path)
    keep_positions(cache, list(range(context + 1)) + [context + 1 + i for i in path])
    pending = feats[[0] + [1 + i for i in path]] if needs_hidden else None
    emitted = out.push([tokens[i] for i in path] + [verdict.next_id])
    drafter.commit(prompt_ids + out.ids, n)
    shown = list(verdict.shown)
    k_control.observe(len(shown), n)
    rows = [0] + [1 + i for i in shown[:-1]]  # the target row that judged each shown node (its parent's)
    top = target_logits.argmax(dim=-1).tolist()
    probs = torch.softmax(target_logits[rows], dim=-1) if rows else None
    details = tuple(
        PositionDetail(float(probs[j, tokens[node]]), float(draft.token_probs[node]) if draft.token_probs else 1.0,
                       None, int(top[rows[j]]), j <= n)
        for j, node in enumerate(shown)
    )
    delta = out.release()
    t3 = clock.now_ms()
    elapsed += t3 - t0
    if config.check_invariants and out.finish_reason is None:
        assert cache_length(cache) == len(prompt_ids) + len(out.ids) - 1, "target cache invariant broken"
    tree = {"tokens": tokens, "parents": parents, "path": path, "shown": shown}
    yield PassEvent(
        run="speculative", index=index, kind="pass", k=k, draft_ids=tuple(tokens[i] for i in shown),
        accept_mask=tuple(j < n for j in range(len(shown))), num_accepted=n,
        next_id=verdict.next_id, next_kind=verdict.next_kind, emitted_ids=tuple(emitted),
        details=details, text_delta=delta, timings=Timings(t1 - t0, t2 - t1, t3 - t2),
        t_end_ms=elapsed, num_generated=len(out.ids), target_cache_len=cache_length(cache),
        draft_cache_len=drafter.cache_len, finish_reason=out.finish_reason,
        extra={"next_k": k_control.k, "tree": tree},
    )
    return pending, elapsed


def collect(events: Iterable[PassEvent], tokenizer, prompt_ids: list[int]) -> RunResult:
    """Drain an event stream into a :class:`RunResult` (token ids, text, finish reason, wall time)."""
    evs = list(events)
    ids = tuple(t for e in evs for t in e.emitted_ids)
    text = "".join(e.text_delta for e in evs)
    return RunResult(
        run=evs[0].run, prompt_ids=tuple(prompt_ids), token_ids=ids, text=text,
        finish_reason=evs[-1].finish_reason, events=tuple(evs), wall_s=evs[-1].t_end_ms / 1000.0,
    )
