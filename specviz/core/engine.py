"""The speculative decoding loop and the standard-decoding baseline, both as generators of PassEvent.

Speculative loop (Leviathan et al. 2023; Chen et al. 2023), one target pass per iteration:
  1 draft     the drafter proposes m <= k tokens (a chain, or a tree) after the committed sequence
  2 verify    one target forward over [last committed token] + draft; greedy prefix match / tree walk, or
              rejection sampling (:mod:`specviz.core.verify`, :mod:`specviz.core.tree`) -> one :class:`Outcome`
  3 commit    keep the accepted path in the target's cache (rollback), emit accepted + recovered/bonus token
              under the stopping rules (EOS, stop strings, max_new_tokens)
  4 update    tell the drafter what was committed; choose the next k
  5 event     one :class:`PassEvent` built by the builder shared with the prefill and the baseline

Standard decoding is the same loop with an empty draft, so the baseline and the speculative run make the same
forward calls with the same shapes for the same tokens (greedy exactness does not rest on two code paths).

Cache invariant (asserted after every pass when ``check_invariants`` is on): the target cache holds
exactly committed - 1 positions, committed = prompt + emitted tokens; the last emitted token is fed at
the start of the next pass. The prefill emits the first token and is reported on its own (index 0); it reads
the prompt in chunks of at most :data:`PREFILL_CHUNK` tokens (both runs alike), so a Stop is honoured within one
chunk: every forward first checks the run's cancel flag and raises :class:`~specviz.core.events.RunCancelled`.

Counters count committed work: see :class:`~specviz.core.events.PassEvent` (``committed_accepted``,
``counted_drafted``) and :mod:`specviz.core.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Protocol

import torch

from specviz.core.draft_length import AutoK, HeuristicK
from specviz.core.drafting import Draft, DraftContext, Drafter
from specviz.core.events import (NumericalError, PassEvent, PositionDetail, RunCancelled, RunKind, RunResult, Timings,
                            TreeRecord)
from specviz.core.kv import (PREFILL_CHUNK, Clock, cache_length, forward_chunked, keep_positions, new_cache,
                        rollback_cache)
from specviz.core.tree import tree_attention_mask, tree_positions, verify_tree_greedy
from specviz.core.verify import (SamplingConfig, all_finite, fit_vocab, process_logits, restrict_vocab, sample,
                            verify_greedy, verify_sampling)

MAX_K = 16


@dataclass(frozen=True)
class GenerationConfig:
    """Settings shared by the speculative run and its baseline.

    Attributes:
        max_new_tokens: most tokens to generate (>= 1).
        sampling: greedy (temperature 0) or sampling settings, see :class:`SamplingConfig`.
        k: draft length per pass, 1..16 (the first pass's when ``adaptive_k`` or ``auto_k``).
        adaptive_k: the heuristic schedule: grow k by 1 after a pass whose drafter filled k and had every token
            accepted, shrink by 1 after a rejection, within [1, k_max] (:class:`~specviz.core.draft_length.HeuristicK`).
        auto_k: k = auto, the cost-aware choice in 0..k_max from the run's measured pass costs and acceptance
            (:class:`~specviz.core.draft_length.AutoK`); excludes ``adaptive_k``.
        k_max: the upper bound of adaptive and automatic k.
        stop_strings: generation ends after the token that completes any of these; the text is cut before it.
        check_invariants: assert the cache invariant after each pass (cheap; on by default).
    """

    max_new_tokens: int = 128
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    k: int = 4
    adaptive_k: bool = False
    auto_k: bool = False
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
        if self.adaptive_k and self.auto_k:
            raise ValueError("choose one draft-length schedule: adaptive_k (heuristic) or auto_k (cost-aware)")

    def draft_length(self) -> HeuristicK | AutoK:
        """A fresh draft-length controller for one run."""
        if self.auto_k:
            return AutoK(self.k_max, min(self.k, self.k_max))
        return HeuristicK(self.k, self.k_max, self.adaptive_k)


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


class Target(Protocol):
    """What the engine needs of a loaded model (:class:`specviz.models.LoadedModel` is one).

    ``vocab_size`` is the LM head's number of rows; ``num_token_ids`` (optional) the ids the tokenizer defines:
    rows beyond it are padding and get probability 0 (:func:`specviz.core.verify.restrict_vocab`).
    """

    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    eos_token_ids: tuple[int, ...]
    vocab_size: int


def shared_vocab(target: Target) -> int:
    """Ids a run's distributions cover: the LM head's rows, cut to the tokenizer's ids when the head is padded."""
    tokens = getattr(target, "num_token_ids", None)
    return min(target.vocab_size, tokens) if tokens else target.vocab_size


def _top2_gap(logits_row: torch.Tensor) -> float:
    top = torch.topk(logits_row, 2).values
    return float(top[0] - top[1])


@dataclass
class _Run:
    """One run's state: its target, cache, output and clock. ``forward`` is the only way to the target."""

    name: RunKind
    target: Target
    prompt_ids: list[int]
    config: GenerationConfig
    cancel: object | None  # anything with is_set() (a threading.Event)
    features: bool = False  # keep the target's final features (a drafter reads them)
    cache: object = None
    out: OutputTracker = None
    gen: torch.Generator = None
    clock: Clock = None
    vocab: int = 0
    elapsed_ms: float = 0.0
    index: int = 0

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("The prompt is empty.")
        self.prompt_ids = list(self.prompt_ids)
        self.cache = new_cache(self.target.model)
        self.out = OutputTracker(self.target.tokenizer, self.config.max_new_tokens, self.target.eos_token_ids,
                                 self.config.stop_strings)
        self.gen = torch.Generator(device=self.target.device)
        self.gen.manual_seed(self.config.sampling.seed)
        self.clock = Clock(self.target.device)
        self.vocab = shared_vocab(self.target)

    @property
    def committed(self) -> list[int]:
        """Prompt ids followed by every emitted token."""
        return self.prompt_ids + self.out.ids

    @property
    def finished(self) -> bool:
        """Whether a stopping rule has fired."""
        return self.out.finish_reason is not None

    def forward(self, ids: list[int], num_logits: int, **tree) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The target over ``ids`` after its cache: (num_logits, vocab) float32 logits and (n, H) features (None
        unless the run keeps them). Raises RunCancelled before starting when cancelled, NumericalError when the
        logits are not finite."""
        logits, feats = forward_chunked(self.target.model, ids, self.cache, num_logits, cancel=self.cancel,
                                        features=self.features, **tree)
        if not all_finite(logits):
            raise NumericalError(
                f"The target's logits turned non-finite (NaN or inf) at output token {len(self.out.ids) + 1}, so "
                f"no token can be chosen; the run stops. A float16 model can overflow: try float32 or bfloat16.")
        return restrict_vocab(logits, self.vocab), feats

    def choose(self, logits_row: torch.Tensor) -> int:
        """The target's own token from one (vocab,) logits row: argmax, or a sample with the run's settings."""
        if self.config.sampling.greedy:
            return int(logits_row.argmax())
        return sample(process_logits(logits_row[None], self.config.sampling)[0], self.gen)

    def check_invariant(self) -> None:
        """Assert the target cache holds committed - 1 positions (while the run goes on)."""
        if self.config.check_invariants and not self.finished:
            assert cache_length(self.cache) == len(self.committed) - 1, "target cache invariant broken"


@dataclass(frozen=True)
class Outcome:
    """What one verification decided (chain or tree); the commit step and the event builder read it.

    Attributes:
        shown_ids: the draft tokens the event shows (a chain: all; a tree: accepted path + first rejected child).
        num_accepted: accepted draft tokens (a prefix of ``shown_ids``).
        next_id / next_kind: the target's own token of the pass and how it was chosen.
        accepted_ids: the accepted draft tokens in order (for a tree, the path's tokens).
        keep_rows: the fed rows (0 = the root) whose cache entries and features become committed.
        features: (n, H) target features of the fed rows, or None.
        details: one :class:`PositionDetail` per shown token.
        tree: the whole tree of a tree pass, else None.
        near_tie_gap: top-2 logit gap at the emitted token when nothing was drafted (the baseline), else None.
    """

    shown_ids: tuple[int, ...]
    num_accepted: int
    next_id: int
    next_kind: str
    accepted_ids: tuple[int, ...]
    keep_rows: tuple[int, ...]
    features: torch.Tensor | None = None
    details: tuple[PositionDetail, ...] = ()
    tree: TreeRecord | None = None
    near_tie_gap: float | None = None


# -------------------------------------------------------------------------------------------- 2 verify


def verify_chain(run: _Run, draft: Draft) -> Outcome:
    """One target forward over [last committed] + a chain draft (possibly empty: a plain step); greedy prefix
    match or rejection sampling. Returns the pass's :class:`Outcome`; changes only the cache (extended by the fed
    tokens, rolled back by :func:`commit`)."""
    ids = list(draft.token_ids)
    logits, feats = run.forward([run.committed[-1]] + ids, len(ids) + 1)
    if not ids:
        token = run.choose(logits[0])
        return Outcome((), 0, token, "target", (), (0,), feats, near_tie_gap=_top2_gap(logits[0]))
    sampling = run.config.sampling
    target_probs = process_logits(logits, sampling)
    if sampling.greedy:
        verdict = verify_greedy(ids, logits)
    else:
        draft_probs = fit_vocab(draft.draft_probs[: len(ids)], run.vocab) if draft.draft_probs is not None else None
        verdict = verify_sampling(ids, draft_probs, target_probs, run.gen)
    n = verdict.num_accepted
    rows = torch.arange(len(ids), device=target_probs.device)
    p = target_probs[rows, torch.tensor(ids, device=target_probs.device)].tolist()
    top = logits[: len(ids)].argmax(dim=-1).tolist()
    details = tuple(
        PositionDetail(float(p[i]), float(draft.token_probs[i]) if i < len(draft.token_probs) else 1.0,
                       verdict.uniforms[i] if i < len(verdict.uniforms) else None, int(top[i]), i <= n)
        for i in range(len(ids)))
    return Outcome(tuple(ids), n, verdict.next_id, verdict.next_kind, tuple(ids[:n]), tuple(range(n + 1)), feats,
                   details)


def verify_tree(run: _Run, draft: Draft) -> Outcome:
    """One target forward over [last committed] + every tree node with a tree attention mask, then the greedy
    walk (:func:`specviz.core.tree.verify_tree_greedy`). Greedy only.

    Raises:
        NotImplementedError: in sampling mode (a tree needs a multi-candidate acceptance rule; draft a chain).
    """
    if not run.config.sampling.greedy:
        raise NotImplementedError("tree drafts are verified in greedy mode only; draft a chain when sampling")
    tokens, parents = list(draft.token_ids), list(draft.parents)
    context = cache_length(run.cache)  # committed - 1
    mask = tree_attention_mask(parents, context, device=run.target.device)
    positions = tree_positions(parents, context, device=run.target.device)
    logits, feats = run.forward([run.committed[-1]] + tokens, len(tokens) + 1, attention_mask=mask,
                                position_ids=positions)
    verdict = verify_tree_greedy(tokens, parents, logits)
    path, shown = list(verdict.path), list(verdict.shown)
    judge_rows = [0] + [1 + i for i in shown[:-1]]  # the row that judged each shown node (its parent's)
    top = logits.argmax(dim=-1).tolist()
    probs = torch.softmax(logits[judge_rows], dim=-1) if shown else None
    details = tuple(
        PositionDetail(float(probs[j, tokens[node]]), float(draft.token_probs[node]) if draft.token_probs else 1.0,
                       None, int(top[judge_rows[j]]), j <= len(path))
        for j, node in enumerate(shown))
    tree = TreeRecord(tuple(tokens), tuple(parents), tuple(path), tuple(shown))
    return Outcome(tuple(tokens[i] for i in shown), len(path), verdict.next_id, verdict.next_kind,
                   tuple(tokens[i] for i in path), tuple([0] + [1 + i for i in path]), feats, details, tree)


# -------------------------------------------------------------------------------------------- 3 commit


def commit(run: _Run, outcome: Outcome) -> tuple[list[int], torch.Tensor | None, str]:
    """Keep the committed rows in the target's cache (drop the rejected ones), then emit the accepted tokens
    and the target's own token under the stopping rules. Returns (emitted ids, features of the committed rows
    or None, the text this makes final)."""
    context = len(run.committed) - 1  # cached positions before this pass
    rows = list(outcome.keep_rows)
    if rows == list(range(len(rows))):
        rollback_cache(run.cache, context + len(rows))
    else:
        keep_positions(run.cache, list(range(context)) + [context + r for r in rows])
    features = outcome.features[rows] if outcome.features is not None else None
    emitted = run.out.push(list(outcome.accepted_ids) + [outcome.next_id])
    return emitted, features, run.out.release()


# -------------------------------------------------------------------------------------------- 1 draft


def _draft(drafter: Drafter, run: _Run, k: int, pending: torch.Tensor | None) -> tuple[Draft, str | None]:
    """The drafter's proposal for this pass (at most k tokens, ids inside the run's vocabulary), or an empty
    draft with a notice when its numbers are not finite (the run then goes on without drafts)."""
    ctx = DraftContext(run.committed, k, run.config.sampling, run.gen, pending, vocab_size=run.vocab,
                       cancel=run.cancel)
    draft = drafter.propose(ctx)
    probs_ok = all_finite(draft.token_probs) and (draft.draft_probs is None or all_finite(draft.draft_probs))
    if not probs_ok:
        return Draft([]), (f"The drafter ({getattr(drafter, 'name', 'drafter')}) produced non-finite numbers (NaN "
                           f"or inf), e.g. a float16 draft that overflowed: the run goes on without drafts, as "
                           f"standard decoding (same output).")
    if draft.parents is None:  # a chain: at most k tokens, cut before any id outside the shared vocabulary
        ids = draft.token_ids[:k]
        m = next((i for i, t in enumerate(ids) if not 0 <= t < run.vocab), len(ids))
        if m < len(draft.token_ids):
            rows = draft.draft_probs[:m] if draft.draft_probs is not None else None
            draft = Draft(list(ids[:m]), list(draft.token_probs[:m]), rows, None, draft.source)
    return draft, None


# -------------------------------------------------------------------------------------------- 5 event


def _event(run: _Run, outcome: Outcome, emitted: list[int], delta: str, timings: Timings, *, k: int = 0,
           drafter: Drafter | None = None, next_k: int | None = None, source: str | None = None,
           notice: str | None = None, gain: float | None = None) -> PassEvent:
    """The event of one forward (prefill, baseline step or speculative pass); advances the run's clock."""
    run.elapsed_ms += timings.total_ms
    n = outcome.num_accepted
    return PassEvent(
        run=run.name, index=run.index, kind="prefill" if run.index == 0 else "pass", k=k,
        draft_ids=outcome.shown_ids, accept_mask=tuple(i < n for i in range(len(outcome.shown_ids))),
        num_accepted=n, next_id=outcome.next_id, next_kind=outcome.next_kind, emitted_ids=tuple(emitted),
        details=outcome.details, text_delta=delta, timings=timings, t_end_ms=run.elapsed_ms,
        num_generated=len(run.out.ids), target_cache_len=cache_length(run.cache),
        draft_cache_len=drafter.cache_len if drafter is not None else None, finish_reason=run.out.finish_reason,
        near_tie_gap=outcome.near_tie_gap if run.name == "baseline" else None, next_k=next_k,
        draft_source=source, tree=outcome.tree, notice=notice, expected_gain=gain,
    )


def _prefill(run: _Run) -> tuple[PassEvent, torch.Tensor | None]:
    """Read the prompt (in chunks) and emit the first token. Returns its event and the prompt's features."""
    t0 = run.clock.now_ms()
    logits, feats = run.forward(run.prompt_ids, 1)
    t1 = run.clock.now_ms()
    token = run.choose(logits[-1])
    outcome = Outcome((), 0, token, "target", (), (), None, near_tie_gap=_top2_gap(logits[-1]))
    emitted = run.out.push([token])
    delta = run.out.release()
    t2 = run.clock.now_ms()
    return _event(run, outcome, emitted, delta, Timings(0.0, t1 - t0, t2 - t1)), feats


# -------------------------------------------------------------------------------------------- the loops


def _join(pending: torch.Tensor | None, new: torch.Tensor | None) -> torch.Tensor | None:
    """Features the drafter has not read yet, followed by this pass's (a pass without a draft did not read)."""
    if pending is None or new is None:
        return new if pending is None else pending
    return torch.cat([pending, new])


def standard_generate(target, prompt_ids: list[int], config: GenerationConfig, *,
                      cancel: object | None = None) -> Iterator[PassEvent]:
    """Standard (autoregressive) decoding of ``target``: one event per token, ``k == 0``.

    Args:
        target: a :class:`specviz.models.LoadedModel` (any :class:`Target`).
        prompt_ids: the encoded prompt (non-empty list of ids).
        config: settings; ``k`` is ignored.
        cancel: optional flag with ``is_set()`` (a threading.Event), checked before every forward.

    Yields:
        :class:`PassEvent` with run="baseline": the prefill (index 0), then one per generated token.

    Raises:
        ValueError: for an empty prompt.
        RunCancelled: when ``cancel`` is set (before the next forward starts).
        NumericalError: the target's logits turned non-finite.
    """
    run = _Run("baseline", target, prompt_ids, config, cancel)
    event, _ = _prefill(run)
    yield event
    while not run.finished:
        run.index += 1
        t0 = run.clock.now_ms()
        outcome = verify_chain(run, Draft([]))
        t1 = run.clock.now_ms()
        emitted, _, delta = commit(run, outcome)
        run.check_invariant()
        yield _event(run, outcome, emitted, delta, Timings(0.0, t1 - t0, run.clock.now_ms() - t1))


def speculative_generate(target, drafter: Drafter, prompt_ids: list[int], config: GenerationConfig, *,
                         cancel: object | None = None) -> Iterator[PassEvent]:
    """Speculative decoding of ``target`` with ``drafter``: one event per target pass.

    Args:
        target: a :class:`specviz.models.LoadedModel` (any :class:`Target`).
        drafter: any :class:`~specviz.core.drafting.Drafter` over the same vocabulary.
        prompt_ids: the encoded prompt (non-empty list of ids).
        config: settings (k, sampling, stopping).
        cancel: optional flag with ``is_set()`` (a threading.Event), checked before every forward.

    Yields:
        :class:`PassEvent` with run="speculative": the prefill (index 0), then one per target pass.
        Greedy output ids equal :func:`standard_generate`'s (same numerics); sampled output follows the
        target's distribution. A drafter whose numbers turn non-finite is dropped for the rest of the run (the
        event of that pass carries a ``notice``).

    Raises:
        ValueError: for an empty prompt.
        NotImplementedError: a tree-shaped draft (``Draft.parents``) in sampling mode.
        RunCancelled: when ``cancel`` is set (before the next forward starts).
        NumericalError: the target's logits turned non-finite.
    """
    run = _Run("speculative", target, prompt_ids, config, cancel, features=bool(drafter.needs_hidden))
    drafter.reset(run.prompt_ids)
    event, pending = _prefill(run)  # pending: target features of committed positions the drafter has not seen
    yield event
    control = config.draft_length()
    active: Drafter | None = drafter
    k_next = control.choose(config.max_new_tokens - len(run.out.ids) - 1)
    while not run.finished:
        run.index += 1
        k, gain = min(k_next, config.max_new_tokens - len(run.out.ids) - 1), control.expected_gain
        t0 = run.clock.now_ms()
        # 1 draft
        draft_read = active is not None and k > 0
        draft, notice = _draft(active, run, k, pending) if draft_read else (Draft([]), None)
        active = None if notice else active
        t1 = run.clock.now_ms()
        # 2 verify
        outcome = verify_tree(run, draft) if draft.parents is not None and draft.token_ids else \
            verify_chain(run, draft)
        t2 = run.clock.now_ms()
        # 3 commit
        emitted, features, delta = commit(run, outcome)
        pending = features if draft_read else _join(pending, features)
        t3 = run.clock.now_ms()
        # 4 update
        if draft_read and active is not None:
            active.commit(run.committed, outcome.num_accepted)
        control.observe(k, len(outcome.shown_ids), outcome.num_accepted, verify_ms=t2 - t1, draft_ms=t1 - t0,
                        other_ms=t3 - t2, forward_tokens=1 + len(draft.token_ids))
        k_next = control.choose(config.max_new_tokens - len(run.out.ids) - 1) if active is not None else 0
        run.check_invariant()
        # 5 event
        yield _event(run, outcome, emitted, delta, Timings(t1 - t0, t2 - t1, run.clock.now_ms() - t2), k=k,
                     drafter=drafter, next_k=k_next, source=draft.source, notice=notice, gain=gain)


def collect(events: Iterable[PassEvent], tokenizer, prompt_ids: list[int]) -> RunResult:
    """Drain an event stream into a :class:`RunResult` (token ids, text, finish reason, wall time)."""
    evs = list(events)
    ids = tuple(t for e in evs for t in e.emitted_ids)
    text = "".join(e.text_delta for e in evs)
    return RunResult(
        run=evs[0].run, prompt_ids=tuple(prompt_ids), token_ids=ids, text=text,
        finish_reason=evs[-1].finish_reason, events=tuple(evs), wall_s=evs[-1].t_end_ms / 1000.0,
    )
