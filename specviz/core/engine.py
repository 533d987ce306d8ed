"""The speculative decoding loop and the standard-decoding baseline, both as generators of PassEvent.

Speculative loop (Leviathan et al. 2023; Chen et al. 2023), one target pass per iteration (:func:`_decode`), each
running row carrying one :class:`~specviz.core.rowpass.RowPass` through the phases:
  1 draft     the drafter proposes m <= k tokens (a chain, or a tree) after the committed sequence
  2 verify    one target forward over [last committed token] + draft, then the row's verdict: a chain, a tree or a
              lookahead pass, each its own function in :mod:`specviz.core.verify_pass` -> one :class:`Outcome`
  3 commit    keep the accepted path in the target's cache (rollback), emit accepted + recovered/bonus token
              under the stopping rules (EOS, stop strings, max_new_tokens: :mod:`specviz.core.output`)
  4 update    tell the drafter what was committed; choose the next k
  5 event     one :class:`PassEvent` built by the builder shared with the prefill and the baseline

Where things live: this module holds the loop, the phases 1, 3, 4 and 5 and the public generators;
:mod:`specviz.core.batch` the batch (the target, its cache, the only way to a forward);
:mod:`specviz.core.rowpass` the records the phases hand on; :mod:`specviz.core.drafting` the drafter contract
(:class:`~specviz.core.drafting.DrafterBase`: every hook the engine calls, with defaults).

Standard decoding is the same loop with an empty draft, so the baseline and the speculative run make the same
forward calls with the same shapes for the same tokens (greedy exactness does not rest on two code paths).

Cache invariant (asserted after every pass when ``check_invariants`` is on): the target cache holds
exactly committed - 1 positions, committed = prompt + emitted tokens; the last emitted token is fed at
the start of the next pass. The prefill emits the first token and is reported on its own (index 0); it reads
the prompt in chunks of at most :data:`~specviz.core.kv.PREFILL_CHUNK` tokens (both runs alike), so a Stop is
honoured within one chunk: every forward first checks the run's cancel flag and raises
:class:`~specviz.core.events.RunCancelled`.

Counters count committed work: see :class:`~specviz.core.events.PassEvent` (``committed_accepted``,
``counted_drafted``) and :mod:`specviz.core.counters`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import torch

from specviz.core.batch import Batch, Target, feature_request, shared_vocab
from specviz.core.draft_length import AutoK, GateK, HeuristicK
from specviz.core.drafting import Draft, DraftContext, Drafter, as_drafter
from specviz.core.events import BatchStep, PassEvent, RunResult, Timings
from specviz.core.kv import compilations, keep_positions
from specviz.core.output import OutputTracker
from specviz.core.rowpass import Outcome, PassTimes, Row, RowPass
from specviz.core.tree import depths
from specviz.core.verify import SamplingConfig, all_finite
from specviz.core.verify_pass import check_tree, top2_gap, verify_chain, verify_lookahead, verify_tree

__all__ = ["MAX_K", "GenerationConfig", "OutputTracker", "Target", "collect", "feature_request", "generate_batch",
           "shared_vocab", "speculative_generate", "standard_generate"]

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
        stop_token_ids: generation ends at any of these ids (kept in the ids, like an EOS; finish reason "stop"),
            special tokens included, which stop strings cannot match (they are decoded without them).
        check_invariants: assert the cache invariant after each pass (cheap; on by default).
        accept_all_drafts: a deliberately WRONG verifier for the sampling-law demonstration
            (:func:`specviz.analysis.batching.sampling_check`): every draft token is accepted and the bonus token
            drawn, so the output follows the draft, not the target. Never on otherwise.
    """

    max_new_tokens: int = 128
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    k: int = 4
    adaptive_k: bool = False
    auto_k: bool = False
    k_max: int = MAX_K
    stop_strings: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    check_invariants: bool = True
    accept_all_drafts: bool = False

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

    def draft_length(self, drafter: Drafter | None = None,
                     verify_curve: dict[int, float] | None = None) -> HeuristicK | AutoK | GateK:
        """A fresh draft-length controller for one run. A drafter with a ``fixed_k`` (lookahead: its candidates'
        length N-1) drafts that many tokens every pass, whatever k the config asks for; with ``auto_k`` it may
        take plain one-token steps instead where its passes do not pay (:class:`~specviz.core.draft_length.GateK`).
        ``verify_curve``: the target's verify curve in its weight format ({n: T(n) / T(1)},
        :func:`specviz.core.costs.verify_curve_of`), k = auto's prior for the sizes a run has not timed."""
        contract = as_drafter(drafter)
        if contract is not None and contract.fixed_k is not None:
            fixed = int(contract.fixed_k)
            if self.auto_k:
                return GateK(fixed, warmup=int(contract.warmup_passes), wait=bool(contract.waits_for_candidates))
            return HeuristicK(fixed, fixed, False)
        if self.auto_k:
            return AutoK(self.k_max, min(self.k, self.k_max), prior=verify_curve)
        return HeuristicK(self.k, self.k_max, self.adaptive_k)



# -------------------------------------------------------------------------------------------- the loop


def _holding(batch: Batch) -> Iterator[PassEvent | BatchStep]:
    """:func:`_decode`, handing the graph runner the batch holds back when the loop ends (finished, failed,
    cancelled or closed)."""
    try:
        yield from _decode(batch)
    finally:
        if batch.runner is not None:
            batch.runner.busy.release()


def _decode(batch: Batch) -> Iterator[PassEvent | BatchStep]:
    """The loop of a batch: prefill, then passes until every row has finished (one target forward per pass). Each
    pass is one :class:`RowPass` per running row, filled phase by phase."""
    yield from _prefill(batch)
    while batch.active:
        batch.index += 1
        batch.compile_mark = compilations()
        times = PassTimes(batch.clock.now_ms())
        # 1 draft
        passes = [_draft(batch, row) for row in batch.active]
        times.drafted = batch.clock.now_ms()
        # 2 verify
        _verify(batch, passes)
        times.verified = batch.clock.now_ms()
        # 3 commit
        _commit(batch, passes)
        times.committed = batch.clock.now_ms()
        # 4 update
        for rp in passes:
            _update(rp, times)
        batch.check_invariant()
        # 5 event
        yield from _pass_events(batch, passes, times)
        batch.drop_finished()


# -------------------------------------------------------------------------------------------- 1 draft


def _draft(batch: Batch, row: Row) -> RowPass:
    """1 draft: the row's proposal for this pass (at most k tokens, ids inside the run's vocabulary), timed."""
    t0 = batch.clock.now_ms()
    rp = RowPass(row, k=min(row.k_next, row.budget) if row.drafter is not None else 0,
                 expected_gain=row.control.expected_gain if row.control is not None else None)
    if row.drafter is not None and rp.k > 0:
        rp.draft, rp.notice = _proposal(batch, row, rp.k)
    rp.draft_ms = batch.clock.now_ms() - t0
    return rp


def _proposal(batch: Batch, row: Row, k: int) -> tuple[Draft, str | None]:
    """The row's drafter's proposal, or an empty draft (a plain step), with a notice when its numbers are not
    finite (the row then goes on without drafts) or none when a tree would reach past the context window."""
    ctx = DraftContext(row.committed, k, batch.config.sampling, row.gen, row.pending, vocab_size=batch.vocab,
                       cancel=batch.cancel, prompt_len=len(row.prompt_ids))
    row.pending = None  # the drafter has read them
    draft = row.drafter.propose(ctx)
    if not (all_finite(draft.token_probs) and (draft.draft_probs is None or all_finite(draft.draft_probs))):
        name, row.drafter = row.drafter.name, None
        return Draft([]), (f"The drafter ({name}) produced non-finite numbers (NaN or inf), e.g. a float16 draft "
                           f"that overflowed: the run goes on without drafts, as standard decoding (same output).")
    if draft.parents is not None and draft.token_ids and batch.window is not None and \
            max(depths(list(draft.parents))) > batch.window - len(row.committed):
        return Draft([]), None  # a tree (lookahead window) reaching past the target's context window: a plain step
    if draft.parents is None:  # a chain: at most k tokens, cut before any id outside the shared vocabulary
        ids = draft.token_ids[:k]
        m = next((i for i, t in enumerate(ids) if not 0 <= t < batch.vocab), len(ids))
        if m < len(draft.token_ids):
            probs = draft.draft_probs[:m] if draft.draft_probs is not None else None
            draft = Draft(list(ids[:m]), list(draft.token_probs[:m]), probs, None, draft.source,
                          resplit=draft.resplit[:m])
    return draft, None


# -------------------------------------------------------------------------------------------- 2 verify


def _verify(batch: Batch, passes: list[RowPass]) -> None:
    """2 verify: one target forward over every active row's [last committed] + draft, then each row's verdict:
    a chain, or (a batch of one) a tree or a lookahead pass (:mod:`specviz.core.verify_pass`)."""
    first = passes[0].draft
    tree = len(passes) == 1 and first.parents is not None and bool(first.token_ids)
    if tree:
        check_tree(batch, first)
    inputs = [[rp.row.committed[-1]] + list(rp.draft.token_ids) for rp in passes]
    results = batch.forward(inputs, list(first.parents) if tree else None)
    for rp, (logits, features) in zip(passes, results):
        if tree and first.lookahead is not None:
            rp.outcome = verify_lookahead(batch, rp.row, rp.draft, logits)
        elif tree:
            rp.outcome = verify_tree(batch, rp.row, rp.draft, logits, features)
        else:
            rp.outcome = verify_chain(batch, rp.row, rp.draft, logits, features)


# -------------------------------------------------------------------------------------------- 3 commit


def _commit(batch: Batch, passes: list[RowPass]) -> None:
    """3 commit: keep each row's committed entries in the cache (drop the rejected ones), hand the drafters the
    committed features, emit under the stopping rules."""
    contexts = [len(rp.row.committed) - 1 for rp in passes]  # cached positions before this pass
    keep = list(passes[0].outcome.keep_rows)
    if len(passes) == 1 and keep != list(range(len(keep))):  # a tree's path
        keep_positions(batch.cache, list(range(contexts[0])) + [contexts[0] + r for r in keep])
    else:
        batch.cache.set_row_lengths([c + len(rp.outcome.keep_rows) for c, rp in zip(contexts, passes)])
    for rp in passes:
        row, outcome = rp.row, rp.outcome
        if outcome.features is not None and row.drafter is not None:
            row.pending = _join(row.pending, outcome.features[list(outcome.keep_rows)])
        rp.emitted = row.out.push(outcome.emitted_ids)
        rp.text_delta = row.out.release()


def _join(pending: torch.Tensor | None, new: torch.Tensor | None) -> torch.Tensor | None:
    """Features the drafter has not read yet, followed by this pass's (a pass without a draft did not read)."""
    if pending is None or new is None:
        return new if pending is None else pending
    return torch.cat([pending, new])


# -------------------------------------------------------------------------------------------- 4 update


def _update(rp: RowPass, times: PassTimes) -> None:
    """4 update: tell the row's drafter what was committed (and a lookahead drafter its Jacobi step's outputs);
    let its draft-length control learn from the pass's costs; choose the row's next k."""
    row, outcome = rp.row, rp.outcome
    if row.drafter is None or row.control is None:
        row.k_next = 0
        return
    if rp.k > 0:
        row.drafter.commit(row.committed, outcome.num_accepted)
    if outcome.lookahead is not None:  # the window's next level, new n-grams in the pool
        rp.pool_added = row.drafter.advance(list(outcome.lookahead.new_level))
    row.control.observe(rp.k, len(outcome.shown_ids), outcome.num_accepted, verify_ms=times.verify_ms,
                        draft_ms=rp.draft_ms, other_ms=times.commit_ms, forward_tokens=1 + len(rp.draft.token_ids))
    row.k_next = row.control.choose(row.budget, row.ready)


# -------------------------------------------------------------------------------------------- 5 event


def _pass_events(batch: Batch, passes: list[RowPass], times: PassTimes) -> Iterator[PassEvent | BatchStep]:
    """5 event: the batch's :class:`BatchStep`, then each row's :class:`PassEvent` (its draft time, the shared
    forward, the shared bookkeeping)."""
    other = batch.clock.now_ms() - times.verified
    compiling = compilations() != batch.compile_mark  # the drafts or the forward compiled a graph
    batch.elapsed_ms += times.verified - times.start + other
    lengths = batch.cache.row_lengths()
    yield BatchStep(batch.name, batch.index, len(passes), 1 + max(len(rp.draft.token_ids) for rp in passes),
                    times.verify_ms, times.draft_ms, sum(len(rp.emitted) for rp in passes), batch.elapsed_ms)
    for rp, length in zip(passes, lengths):
        rp.row.index = batch.index
        yield _event(rp, Timings(rp.draft_ms, times.verify_ms, other), length, compiling)


def _event(rp: RowPass, timings: Timings, cache_len: int | None, compiling: bool) -> PassEvent:
    """The event of one row's forward (prefill, baseline step or speculative pass); advances the row's clock."""
    row, outcome = rp.row, rp.outcome
    row.elapsed_ms += timings.total_ms
    n, shown = outcome.num_accepted, outcome.shown_ids
    source = rp.draft.source
    return PassEvent(
        run=row.name, index=row.index, kind="prefill" if row.index == 0 else "pass", k=rp.k,
        draft_ids=shown, accept_mask=tuple(i < n for i in range(len(shown))),
        num_accepted=n, next_id=outcome.next_id, next_kind=outcome.next_kind, emitted_ids=tuple(rp.emitted),
        details=outcome.details, text_delta=rp.text_delta, timings=timings, t_end_ms=row.elapsed_ms,
        num_generated=len(row.out.ids), target_cache_len=cache_len,
        draft_cache_len=row.drafter.cache_len if row.drafter is not None else None,
        finish_reason=row.out.finish_reason,
        near_tie_gap=outcome.near_tie_gap if row.name == "baseline" else None,
        next_k=row.k_next if row.control is not None and row.index > 0 else None,
        draft_source=source if shown or source != "pool" else None, tree=outcome.tree, notice=rp.notice,
        expected_gain=rp.expected_gain, row=row.row, lookahead=rp.lookahead, resplit=rp.draft.resplit[:len(shown)],
        compiling=compiling,
    )


# -------------------------------------------------------------------------------------------- 0 prefill


def _prefill(batch: Batch) -> Iterator[PassEvent | BatchStep]:
    """Read the prompts (in chunks) and emit each row's first token: a :class:`BatchStep` then one event per row."""
    for row in batch.active:
        if row.drafter is not None:
            row.drafter.reset(row.prompt_ids)
    t0 = batch.clock.now_ms()
    batch.compile_mark = compilations()
    results = batch.prefill_logits()
    t1 = batch.clock.now_ms()
    compiling = compilations() != batch.compile_mark
    events = []
    for row, (logits, feats), length in zip(batch.active, results, batch.cache.row_lengths()):
        t2 = batch.clock.now_ms()
        token = batch.choose(row, logits)
        row.pending = feats
        rp = RowPass(row, notice=_window_notice(batch, row),
                     outcome=Outcome((), 0, token, "target", (), (), None, near_tie_gap=top2_gap(logits)))
        rp.emitted = row.out.push([token])
        rp.text_delta = row.out.release()
        if row.drafter is not None:
            row.k_next = row.control.choose(row.budget, row.ready)
        event = _event(rp, Timings(0.0, t1 - t0, batch.clock.now_ms() - t2), length, compiling)
        events.append(replace(event, forward_path=batch.path))
    batch.elapsed_ms += batch.clock.now_ms() - t0
    yield BatchStep(batch.name, 0, len(events), max(len(r.prompt_ids) for r in batch.active), t1 - t0, 0.0,
                    len(events), batch.elapsed_ms)
    yield from events
    batch.drop_finished()


def _window_notice(batch: Batch, row: Row) -> str | None:
    """One sentence when the target's context window, not max_new_tokens, ends the row's run (None otherwise)."""
    if row.out.max_new_tokens >= batch.config.max_new_tokens:
        return None
    room = row.out.max_new_tokens
    return (f"The target's context window ends {room:,} token{'s' if room != 1 else ''} after the "
            f"{len(row.prompt_ids):,}-token prompt: the run stops there, before {batch.config.max_new_tokens:,} new "
            f"tokens.")


# -------------------------------------------------------------------------------------------- the runs


def generate_batch(target, prompts: list[list[int]], config: GenerationConfig, *,
                   drafters: list[Drafter | None] | None = None,
                   cancel: object | None = None) -> Iterator[PassEvent | BatchStep]:
    """Decode B prompts together (B >= 1; prompts of any lengths), speculatively for each row with a drafter.

    Args:
        target: a :class:`specviz.runtime.models.LoadedModel` (any :class:`Target`).
        prompts: B encoded prompts (non-empty lists of ids).
        config: settings shared by every row (k, sampling, stopping; row r samples with seed ``seed + r``).
        drafters: one fresh drafter per row (drafters hold per-run state), None entries or None for standard
            decoding. Rows draft chains; a tree draft is verified only in a batch of one.
        cancel: optional flag with ``is_set()`` or a callable, checked before every forward.

    Yields:
        Per target forward, a :class:`~specviz.core.events.BatchStep` then one :class:`PassEvent` per row in it
        (``row`` = its index in ``prompts``). Rows finish independently (EOS, stop string, max_new_tokens) and
        leave the batch. Rows of different cached lengths share a forward through per-row causal masks and
        positions, so each row's greedy output equals its single-prompt decoding up to float rounding of the
        batched kernels (a first divergence can only fall at a near-tie).

    Raises:
        ValueError: an empty prompt.
        NotImplementedError: a tree draft in sampling mode or in a batch of several prompts.
        RunCancelled: when ``cancel`` is set (before the next forward starts).
        NumericalError: the target's logits turned non-finite.
    """
    name = "speculative" if drafters is not None and any(d is not None for d in drafters) else "baseline"
    return _holding(Batch(name, target, [list(p) for p in prompts], config, cancel, drafters))


def _rows_only(events: Iterator[PassEvent | BatchStep]) -> Iterator[PassEvent]:
    return (event for event in events if isinstance(event, PassEvent))


def standard_generate(target, prompt_ids: list[int], config: GenerationConfig, *,
                      cancel: object | None = None) -> Iterator[PassEvent]:
    """Standard (autoregressive) decoding of ``target``: one event per token, ``k == 0`` (a batch of one, see
    :func:`generate_batch`).

    Args:
        target: a :class:`specviz.runtime.models.LoadedModel` (any :class:`Target`).
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
    return _rows_only(_holding(Batch("baseline", target, [list(prompt_ids)], config, cancel)))


def speculative_generate(target, drafter: Drafter, prompt_ids: list[int], config: GenerationConfig, *,
                         cancel: object | None = None) -> Iterator[PassEvent]:
    """Speculative decoding of ``target`` with ``drafter``: one event per target pass (a batch of one, see
    :func:`generate_batch`).

    Args:
        target: a :class:`specviz.runtime.models.LoadedModel` (any :class:`Target`).
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
    return _rows_only(_holding(Batch("speculative", target, [list(prompt_ids)], config, cancel, [drafter])))


def collect(events: Iterable[PassEvent], tokenizer, prompt_ids: list[int]) -> RunResult:
    """Drain an event stream into a :class:`RunResult` (token ids, text, finish reason, wall time)."""
    evs = list(events)
    ids = tuple(t for e in evs for t in e.emitted_ids)
    text = "".join(e.text_delta for e in evs)
    return RunResult(
        run=evs[0].run, prompt_ids=tuple(prompt_ids), token_ids=ids, text=text,
        finish_reason=evs[-1].finish_reason, events=tuple(evs), wall_s=evs[-1].t_end_ms / 1000.0,
    )
