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

from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator, Protocol

import torch

from specviz.core.draft_length import AutoK, GateK, HeuristicK
from specviz.core.drafting import Draft, DraftContext, Drafter
from specviz.core.graphs import choose_runner
from specviz.core.events import (BatchStep, LookaheadRecord, NumericalError, PassEvent, PositionDetail, RunCancelled,
                                 RunKind, RunResult, Timings, TreeRecord)
from specviz.core.kv import (PREFILL_CHUNK, Clock, cache_length, check_cancel, compilations, forward_chunked,
                             forward_rows, keep_positions, new_cache)
from specviz.core.tree import ancestors, depths, tree_attention_mask, tree_positions, verify_tree_greedy
from specviz.core.window import position_limit, window_budget
from specviz.core.verify import (SamplingConfig, Verdict, all_finite, apply_processors, fit_vocab, process_logits,
                                 restrict_vocab, sample, verify_greedy, verify_sampling)

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

    def draft_length(self, drafter: Drafter | None = None) -> HeuristicK | AutoK | GateK:
        """A fresh draft-length controller for one run. A drafter with a ``fixed_k`` (lookahead: its candidates'
        length N-1) drafts that many tokens every pass, whatever k the config asks for; with ``auto_k`` it may
        take plain one-token steps instead where its passes do not pay (:class:`~specviz.core.draft_length.GateK`)."""
        fixed = getattr(drafter, "fixed_k", None)
        if fixed is not None:
            if self.auto_k:
                return GateK(int(fixed), warmup=int(getattr(drafter, "warmup_passes", 0)),
                             wait=bool(getattr(drafter, "waits_for_candidates", False)))
            return HeuristicK(int(fixed), int(fixed), False)
        if self.auto_k:
            return AutoK(self.k_max, min(self.k, self.k_max))
        return HeuristicK(self.k, self.k_max, self.adaptive_k)


class OutputTracker:
    """Emits tokens one at a time and applies the stopping rules exactly as standard decoding would.

    Rules, checked after each token in order: the token is an EOS id ("eos", the id is kept in
    ``ids``); it is a stop token id ("stop", kept too); the decoded text now contains a stop string ("stop"; the
    text is cut before it); the
    budget is spent ("length"). Streaming text is released incrementally: a trailing incomplete UTF-8
    sequence (U+FFFD) and any suffix that could still grow into a stop string are held back.
    """

    def __init__(self, tokenizer, max_new_tokens: int, eos_ids: Iterable[int], stop_strings: tuple[str, ...],
                 stop_ids: Iterable[int] = ()):
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.eos_ids = frozenset(eos_ids)
        self.stop_ids = frozenset(stop_ids)
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
            elif token in self.stop_ids:
                self.finish_reason = "stop"
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
class _Row:
    """One prompt's run inside a batch: its output, generator, drafter, draft-length control and clock."""

    name: RunKind
    row: int
    prompt_ids: list[int]
    out: OutputTracker
    gen: torch.Generator
    drafter: Drafter | None = None  # None: standard decoding, or a drafter dropped after non-finite numbers
    control: HeuristicK | AutoK | GateK | None = None
    pending: torch.Tensor | None = None  # target features of committed positions the drafter has not read
    index: int = 0
    elapsed_ms: float = 0.0
    k_next: int = 0

    @property
    def committed(self) -> list[int]:
        """Prompt ids followed by every emitted token."""
        return self.prompt_ids + self.out.ids

    @property
    def finished(self) -> bool:
        """Whether a stopping rule has fired."""
        return self.out.finish_reason is not None

    @property
    def budget(self) -> int:
        """Draft tokens that could still be emitted this pass (tokens left, less the target's own)."""
        return self.out.max_new_tokens - len(self.out.ids) - 1


def feature_request(drafters: list[Drafter | None]) -> bool | tuple[int, ...]:
    """The target features a batch's forwards return for its drafters' ``needs_hidden``: False (none), True (the
    final features) or a tuple of hidden-state indices (an EAGLE-3 head's; see
    :func:`specviz.core.kv.pick_features`).

    Raises:
        ValueError: drafters of one batch ask for different features.
    """
    wanted = {d.needs_hidden for d in drafters if d is not None and d.needs_hidden}
    if len(wanted) > 1:
        raise ValueError("the drafters of one batch read different target features; run them in separate batches")
    return wanted.pop() if wanted else False


class _Batch:
    """B prompts decoded together over one cache (a single prompt is a batch of one). ``active`` lists the rows
    still running, in cache-row order; :meth:`forward` is the only way to the target."""

    def __init__(self, name: RunKind, target: Target, prompts: list[list[int]], config: GenerationConfig,
                 cancel: object | None, drafters: list[Drafter | None] | None = None) -> None:
        if not prompts or any(not p for p in prompts):
            raise ValueError("The prompt is empty.")
        self.name, self.target, self.config, self.cancel = name, target, config, cancel
        self.clock = Clock(target.device)
        self.vocab = shared_vocab(target)
        self.window = position_limit(target.model)  # positions 0 .. window - 1 exist (None: no table, no limit)
        drafters = drafters if drafters is not None else [None] * len(prompts)
        self.features = feature_request(drafters)
        # the forward path: a graph runner over a static device-side cache, or the eager SlabCache
        self.runner, self.path = choose_runner(target, prompts, config, self.features)
        self.cache = self.runner.cache if self.runner is not None else new_cache(target.model)
        self.rows = [_Row(name, i, list(p), OutputTracker(target.tokenizer,
                                                          window_budget(target.model, len(p), config.max_new_tokens),
                                                          target.eos_token_ids, config.stop_strings,
                                                          config.stop_token_ids),
                          self._generator(i), d, config.draft_length(d) if d is not None else None)
                     for i, (p, d) in enumerate(zip(prompts, drafters))]
        self.active = list(self.rows)
        self.index = 0
        self.elapsed_ms = 0.0
        self.compile_mark = compilations()  # torch.compile's graph count when the current pass started

    def _generator(self, row: int) -> torch.Generator:
        gen = torch.Generator(device=self.target.device)
        gen.manual_seed(self.config.sampling.seed + row)  # row r of a batch draws as a single run seeded seed + r
        return gen

    def forward(self, inputs: list[list[int]], **tree) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The target over each active row's new ids after its cache: per row, (len, vocab) float32 logits and
        (len, H) features (or None). Raises RunCancelled before starting when cancelled, NumericalError when the
        logits are not finite."""
        if self.runner is not None:  # the graph path (a single prompt)
            check_cancel(self.cancel)
            return self._checked([self.runner.forward(inputs[0], tree.get("parents"),
                                                      to_host=self.config.sampling.greedy)])
        if len(inputs) == 1:
            logits, feats = forward_chunked(self.target.model, inputs[0], self.cache, len(inputs[0]),
                                            cancel=self.cancel, features=self.features, **tree)
            out = [(logits, feats)]
        else:
            out = self._forward_rows(inputs)
        return self._checked(out)

    def _checked(self, out: list[tuple[torch.Tensor, torch.Tensor | None]]
                 ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The rows' logits cut to the shared vocabulary, after checking they are finite (NumericalError)."""
        if not all(all_finite(logits) for logits, _ in out):
            raise NumericalError(
                f"The target's logits turned non-finite (NaN or inf) at output token "
                f"{min(len(r.out.ids) for r in self.active) + 1}, so no token can be chosen; the run stops. A "
                f"float16 model can overflow: try float32 or bfloat16.")
        return [(restrict_vocab(logits, self.vocab), feats) for logits, feats in out]

    def _forward_rows(self, inputs: list[list[int]]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Rows of different lengths in one forward: padded at the end, each row's own causal mask and positions."""
        check_cancel(self.cancel)
        lengths, n = self.cache.row_lengths(), max(len(ids) for ids in inputs)
        span = max(lengths) + n
        device = self.target.device
        starts = torch.tensor(lengths, device=device)[:, None]
        offsets = torch.arange(n, device=device)[None, :]
        mask = (torch.arange(span, device=device)[None, None, :] <= (starts + offsets)[:, :, None])[:, None]
        padded = [ids + [ids[-1]] * (n - len(ids)) for ids in inputs]
        logits, feats = forward_rows(self.target.model, padded, self.cache, n, attention_mask=mask,
                                     position_ids=starts + offsets, features=self.features)
        return [(logits[b, :len(ids)], feats[b, :len(ids)] if feats is not None else None)
                for b, ids in enumerate(inputs)]

    def prefill_logits(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Read every prompt (in chunks; rows padded at the end to the longest): per row, the logits at its last
        prompt position and the features of its prompt positions (or None)."""
        if self.runner is not None:
            logits, feats = self.runner.prefill(self.active[0].prompt_ids, self.cancel)
            return self._checked([(logits[-1], feats)])
        if len(self.active) == 1:
            row = self.active[0]
            logits, feats = forward_chunked(self.target.model, row.prompt_ids, self.cache, 1, cancel=self.cancel,
                                            features=self.features)
            return self._checked([(logits[-1], feats)])
        longest = max(len(r.prompt_ids) for r in self.active)
        padded = [r.prompt_ids + [r.prompt_ids[-1]] * (longest - len(r.prompt_ids)) for r in self.active]
        logits_at: list = [None] * len(padded)
        feats: list[list[torch.Tensor]] = [[] for _ in padded]
        for start in range(0, longest, PREFILL_CHUNK):
            check_cancel(self.cancel)
            piece = [ids[start:start + PREFILL_CHUNK] for ids in padded]
            logits, f = forward_rows(self.target.model, piece, self.cache, len(piece[0]), features=self.features)
            for b, row in enumerate(self.active):
                last = len(row.prompt_ids) - 1 - start
                if 0 <= last < len(piece[0]):
                    logits_at[b] = logits[b, last]
                if f is not None:
                    feats[b].append(f[b])
        self.cache.set_row_lengths([len(r.prompt_ids) for r in self.active])
        return self._checked([(logits_at[b], torch.cat(feats[b])[:len(row.prompt_ids)] if feats[b] else None)
                              for b, row in enumerate(self.active)])

    def processed(self, row: _Row, logits: torch.Tensor, prefixes: list[list[int]]) -> torch.Tensor:
        """(n, vocab) logits after the run's logits processors (:func:`specviz.core.verify.apply_processors`),
        row i seeing the committed tokens plus ``prefixes[i]`` (the draft tokens before its position)."""
        sampling = self.config.sampling
        if not sampling.processed:
            return logits
        committed = row.committed
        return apply_processors(logits, sampling, [committed + list(p) for p in prefixes], len(row.prompt_ids))

    def choose(self, row: _Row, logits_row: torch.Tensor, prefix: list[int] = ()) -> int:
        """The target's own token from one (vocab,) logits row after the committed tokens and ``prefix``:
        argmax of the processed logits, or a sample with the row's generator."""
        logits = self.processed(row, logits_row[None], [list(prefix)])
        if self.config.sampling.greedy:
            return int(logits[0].argmax())
        return sample(process_logits(logits, self.config.sampling)[0], row.gen)

    def drop_finished(self) -> None:
        """Take finished rows out of the batch (and their cache rows); a drafter with a ``finish`` method is told
        the row's whole committed sequence."""
        for row in self.active:
            if row.finished and row.drafter is not None and hasattr(row.drafter, "finish"):
                row.drafter.finish(row.committed)
        keep = [i for i, row in enumerate(self.active) if not row.finished]
        if len(keep) < len(self.active):
            if keep:
                self.cache.select_rows(keep)
            self.active = [self.active[i] for i in keep]

    def check_invariant(self) -> None:
        """Assert every running row's cache holds its committed - 1 positions."""
        if self.config.check_invariants:
            lengths = self.cache.row_lengths()
            for row, length in zip(self.active, lengths):
                if not row.finished:
                    assert length == len(row.committed) - 1, "target cache invariant broken"


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
        lookahead: a lookahead pass's window, candidates and the Jacobi step's new level, else None.
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
    lookahead: LookaheadRecord | None = None


# -------------------------------------------------------------------------------------------- 2 verify


def verify_chain(batch: _Batch, row: _Row, draft: Draft, logits: torch.Tensor,
                 features: torch.Tensor | None) -> Outcome:
    """Judge a chain draft (possibly empty: a plain step) from the target's (m+1, vocab) logits over [last
    committed] + draft: greedy prefix match or rejection sampling. Returns the pass's :class:`Outcome`."""
    ids = list(draft.token_ids)
    if not ids:
        token = batch.choose(row, logits[0])
        return Outcome((), 0, token, "target", (), (0,), features, near_tie_gap=_top2_gap(logits[0]))
    sampling = batch.config.sampling
    logits = batch.processed(row, logits, [ids[:i] for i in range(len(ids) + 1)])
    target_probs = process_logits(logits, sampling)
    if batch.config.accept_all_drafts:  # the broken verifier of the sampling check: wrong on purpose
        verdict = Verdict(len(ids), sample(target_probs[len(ids)], row.gen) if not sampling.greedy
                          else int(logits[len(ids)].argmax()), "bonus")
    elif sampling.greedy:
        verdict = verify_greedy(ids, logits)
    else:
        draft_probs = fit_vocab(draft.draft_probs[: len(ids)], batch.vocab) if draft.draft_probs is not None \
            else None
        verdict = verify_sampling(ids, draft_probs, target_probs, row.gen)
    n = verdict.num_accepted
    positions = torch.arange(len(ids), device=target_probs.device)
    p = target_probs[positions, torch.tensor(ids, device=target_probs.device)].tolist()
    top = logits[: len(ids)].argmax(dim=-1).tolist()
    details = tuple(
        PositionDetail(float(p[i]), float(draft.token_probs[i]) if i < len(draft.token_probs) else 1.0,
                       verdict.uniforms[i] if i < len(verdict.uniforms) else None, int(top[i]), i <= n)
        for i in range(len(ids)))
    return Outcome(tuple(ids), n, verdict.next_id, verdict.next_kind, tuple(ids[:n]), tuple(range(n + 1)),
                   features, details)


def verify_lookahead(batch: _Batch, row: _Row, draft: Draft, logits: torch.Tensor) -> Outcome:
    """Judge a lookahead pass from the target's (1 + nodes, vocab) logits over [last committed] + the tree of
    :class:`~specviz.core.drafting.LookaheadPlan`: the Jacobi step's new level is the argmax at each top-level
    window node; only the candidates are verified: greedy keeps the longest accepted prefix among them, sampling
    verifies the one candidate as a one-hot draft (rejection sampling)."""
    plan, tokens = draft.lookahead, list(draft.token_ids)
    top = logits.argmax(dim=-1).tolist()
    new_level = tuple(int(top[1 + node]) for node in plan.window_nodes[-1]) if plan.window_nodes else ()
    chains = [list(chain) for chain in plan.candidates]
    rows_of = [[0] + [1 + node for node in chain] for chain in chains]  # the rows judging each token, then after
    best, verdict = None, Verdict(0, batch.choose(row, logits[0]), "target")
    for i, (chain, rows) in enumerate(zip(chains, rows_of)):
        ids = [tokens[node] for node in chain]
        chain_logits = batch.processed(row, logits[rows], [ids[:j] for j in range(len(ids) + 1)])
        if batch.config.sampling.greedy:
            found = verify_greedy(ids, chain_logits)
        else:
            found = verify_sampling(ids, None, process_logits(chain_logits, batch.config.sampling), row.gen)
        if best is None or found.num_accepted > verdict.num_accepted:
            best, verdict = i, found
    record = LookaheadRecord(tuple(tuple(tokens[n] for n in level) for level in plan.window_nodes), new_level,
                             tuple(tuple(tokens[n] for n in chain) for chain in chains), best,
                             verdict.num_accepted, plan.pool_size)
    if best is None:
        return Outcome((), 0, verdict.next_id, "target", (), (0,), None, lookahead=record)
    chain, ids = chains[best], [tokens[node] for node in chains[best]]
    n = verdict.num_accepted
    shown = ids[: n + 1]
    probs = process_logits(batch.processed(row, logits[rows_of[best][: len(shown)]],
                                           [ids[:j] for j in range(len(shown))]), batch.config.sampling)
    details = tuple(PositionDetail(float(probs[i, t]), 1.0, verdict.uniforms[i] if i < len(verdict.uniforms) else None,
                                   int(top[rows_of[best][i]]), i <= n) for i, t in enumerate(shown))
    return Outcome(tuple(shown), n, verdict.next_id, verdict.next_kind, tuple(ids[:n]),
                   tuple([0] + [1 + node for node in chain[:n]]), None, details, lookahead=record)


def tree_inputs(batch: _Batch, draft: Draft) -> dict:
    """The tree attention mask and positions of a tree pass over a single row (see :mod:`specviz.core.tree`).

    Raises:
        NotImplementedError: in sampling mode (a tree needs a multi-candidate acceptance rule; draft a chain),
            or in a batch of several prompts (trees are single-prompt).
    """
    if not batch.config.sampling.greedy and draft.lookahead is None:  # a lookahead pass verifies one chain
        raise NotImplementedError("tree drafts are verified in greedy mode only; draft a chain when sampling")
    if len(batch.active) != 1:
        raise NotImplementedError("tree and lookahead drafts are verified for a single prompt; draft chains in a "
                                  "batch")
    if batch.runner is not None:  # the graph path builds the mask and positions on the device
        return {"parents": list(draft.parents)}
    context = cache_length(batch.cache)  # committed - 1
    return {"attention_mask": tree_attention_mask(list(draft.parents), context, device=batch.target.device),
            "position_ids": tree_positions(list(draft.parents), context, device=batch.target.device)}


def verify_tree(batch: _Batch, row: _Row, draft: Draft, logits: torch.Tensor,
                features: torch.Tensor | None) -> Outcome:
    """Judge a tree draft from the target's (N+1, vocab) logits over [last committed] + every node (one forward
    with :func:`tree_inputs`): the greedy walk of :func:`specviz.core.tree.verify_tree_greedy`, each node's row
    processed with the history along its own path."""
    tokens, parents = list(draft.token_ids), list(draft.parents)
    paths = [[]] + [[tokens[a] for a in ancestors(parents, i)] for i in range(len(tokens))]
    logits = batch.processed(row, logits, paths)
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
                   tuple(tokens[i] for i in path), tuple([0] + [1 + i for i in path]), features, details, tree)


def _verify_all(batch: _Batch, drafts: list[Draft]) -> list[Outcome]:
    """2 verify: one target forward over every active row's [last committed] + draft, then each row's
    verdict (a chain, or a tree for a single prompt)."""
    tree = len(drafts) == 1 and drafts[0].parents is not None and bool(drafts[0].token_ids)
    inputs = [[row.committed[-1]] + list(draft.token_ids) for row, draft in zip(batch.active, drafts)]
    results = batch.forward(inputs, **(tree_inputs(batch, drafts[0]) if tree else {}))
    if tree and drafts[0].lookahead is not None:
        return [verify_lookahead(batch, batch.active[0], drafts[0], results[0][0])]
    if tree:
        return [verify_tree(batch, batch.active[0], drafts[0], *results[0])]
    return [verify_chain(batch, row, draft, logits, feats)
            for row, draft, (logits, feats) in zip(batch.active, drafts, results)]


# -------------------------------------------------------------------------------------------- 3 commit


def _commit_all(batch: _Batch, outcomes: list[Outcome]) -> list[tuple[list[int], str]]:
    """3 commit: keep each row's committed entries in the cache (drop the rejected ones), hand the drafters the
    committed features, emit under the stopping rules. Returns each row's (emitted ids, newly final text)."""
    contexts = [len(row.committed) - 1 for row in batch.active]  # cached positions before this pass
    if len(outcomes) == 1 and list(outcomes[0].keep_rows) != list(range(len(outcomes[0].keep_rows))):
        rows = list(outcomes[0].keep_rows)  # a tree's path
        keep_positions(batch.cache, list(range(contexts[0])) + [contexts[0] + r for r in rows])
    else:
        batch.cache.set_row_lengths([c + len(o.keep_rows) for c, o in zip(contexts, outcomes)])
    out = []
    for row, outcome in zip(batch.active, outcomes):
        if outcome.features is not None and row.drafter is not None:
            row.pending = _join(row.pending, outcome.features[list(outcome.keep_rows)])
        emitted = row.out.push(list(outcome.accepted_ids) + [outcome.next_id])
        out.append((emitted, row.out.release()))
    return out


# -------------------------------------------------------------------------------------------- 1 draft


def _draft(batch: _Batch, row: _Row, k: int) -> tuple[Draft, str | None]:
    """The row's drafter's proposal for this pass (at most k tokens, ids inside the run's vocabulary), or an
    empty draft with a notice when its numbers are not finite (the row then goes on without drafts)."""
    if row.drafter is None or k <= 0:
        return Draft([]), None
    ctx = DraftContext(row.committed, k, batch.config.sampling, row.gen, row.pending, vocab_size=batch.vocab,
                       cancel=batch.cancel, prompt_len=len(row.prompt_ids))
    row.pending = None  # the drafter has read them
    draft = row.drafter.propose(ctx)
    probs_ok = all_finite(draft.token_probs) and (draft.draft_probs is None or all_finite(draft.draft_probs))
    if not probs_ok:
        name = getattr(row.drafter, "name", "drafter")
        row.drafter = None
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


def _draft_all(batch: _Batch) -> tuple[list[Draft], list[int], list[str | None], list[float]]:
    """1 draft: every active row's proposal; returns the drafts, the k each asked for, notices and draft ms."""
    drafts, ks, notices, times = [], [], [], []
    for row in batch.active:
        t0 = batch.clock.now_ms()
        k = min(row.k_next, row.budget) if row.drafter is not None else 0
        draft, notice = _draft(batch, row, k)
        drafts.append(draft)
        ks.append(k)
        notices.append(notice)
        times.append(batch.clock.now_ms() - t0)
    return drafts, ks, notices, times


# -------------------------------------------------------------------------------------------- 4 update


def _update_all(batch: _Batch, drafts: list[Draft], ks: list[int], outcomes: list[Outcome],
                times: tuple[list[float], float, float]) -> None:
    """4 update: tell each drafter what was committed; learn from the pass's costs; choose each row's next k."""
    draft_ms, verify_ms, other_ms = times
    for i, (row, draft, k, outcome, ms) in enumerate(zip(batch.active, drafts, ks, outcomes, draft_ms)):
        if row.drafter is None or row.control is None:
            row.k_next = 0
            continue
        if k > 0:
            row.drafter.commit(row.committed, outcome.num_accepted)
        if outcome.lookahead is not None:  # the Jacobi step's outputs: the next level, new n-grams in the pool
            added = row.drafter.advance(list(outcome.lookahead.new_level))
            outcomes[i] = replace(outcome, lookahead=replace(outcome.lookahead, added=added))
        row.control.observe(k, len(outcome.shown_ids), outcome.num_accepted, verify_ms=verify_ms, draft_ms=ms,
                            other_ms=other_ms, forward_tokens=1 + len(draft.token_ids))
        row.k_next = row.control.choose(row.budget, _ready(row))


def _ready(row: _Row) -> bool:
    """Whether the row's drafter has a candidate for its last committed token (a drafter without
    ``has_candidates`` always may have one)."""
    has = getattr(row.drafter, "has_candidates", None)
    return True if has is None else bool(has(row.committed))


# -------------------------------------------------------------------------------------------- 5 event


def _event(batch: _Batch, row: _Row, outcome: Outcome, emitted: list[int], delta: str, timings: Timings, *,
           k: int = 0, source: str | None = None, notice: str | None = None, gain: float | None = None,
           cache_len: int | None = None, resplit: tuple[bool, ...] = (), compiling: bool = False) -> PassEvent:
    """The event of one row's forward (prefill, baseline step or speculative pass); advances the row's clock."""
    row.elapsed_ms += timings.total_ms
    n = outcome.num_accepted
    drafter = row.drafter
    return PassEvent(
        run=row.name, index=row.index, kind="prefill" if row.index == 0 else "pass", k=k,
        draft_ids=outcome.shown_ids, accept_mask=tuple(i < n for i in range(len(outcome.shown_ids))),
        num_accepted=n, next_id=outcome.next_id, next_kind=outcome.next_kind, emitted_ids=tuple(emitted),
        details=outcome.details, text_delta=delta, timings=timings, t_end_ms=row.elapsed_ms,
        num_generated=len(row.out.ids), target_cache_len=cache_len,
        draft_cache_len=drafter.cache_len if drafter is not None else None, finish_reason=row.out.finish_reason,
        near_tie_gap=outcome.near_tie_gap if row.name == "baseline" else None,
        next_k=row.k_next if row.control is not None and row.index > 0 else None,
        draft_source=source if outcome.shown_ids or source != "pool" else None, tree=outcome.tree, notice=notice,
        expected_gain=gain, row=row.row, lookahead=outcome.lookahead, resplit=resplit[:len(outcome.shown_ids)],
        compiling=compiling,
    )


def _prefill(batch: _Batch) -> Iterator[PassEvent | BatchStep]:
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
    lengths = batch.cache.row_lengths()
    for row, (logits, feats), length in zip(batch.active, results, lengths):
        t2 = batch.clock.now_ms()
        token = batch.choose(row, logits)
        row.pending = feats
        outcome = Outcome((), 0, token, "target", (), (), None, near_tie_gap=_top2_gap(logits))
        emitted = row.out.push([token])
        delta = row.out.release()
        if row.drafter is not None:
            row.k_next = row.control.choose(row.budget, _ready(row))
        other = batch.clock.now_ms() - t2
        event = _event(batch, row, outcome, emitted, delta, Timings(0.0, t1 - t0, other), cache_len=length,
                       compiling=compiling, notice=_window_notice(batch, row))
        events.append(replace(event, forward_path=batch.path))
    batch.elapsed_ms += batch.clock.now_ms() - t0
    yield BatchStep(batch.name, 0, len(events), max(len(r.prompt_ids) for r in batch.active), t1 - t0, 0.0,
                    len(events), batch.elapsed_ms)
    yield from events
    batch.drop_finished()


def _window_notice(batch: _Batch, row: _Row) -> str | None:
    """One sentence when the target's context window, not max_new_tokens, ends the row's run (None otherwise)."""
    if row.out.max_new_tokens >= batch.config.max_new_tokens:
        return None
    room = row.out.max_new_tokens
    return (f"The target's context window ends {room:,} token{'s' if room != 1 else ''} after the "
            f"{len(row.prompt_ids):,}-token prompt: the run stops there, before {batch.config.max_new_tokens:,} new "
            f"tokens.")


# -------------------------------------------------------------------------------------------- the loops


def _join(pending: torch.Tensor | None, new: torch.Tensor | None) -> torch.Tensor | None:
    """Features the drafter has not read yet, followed by this pass's (a pass without a draft did not read)."""
    if pending is None or new is None:
        return new if pending is None else pending
    return torch.cat([pending, new])


def _holding(batch: _Batch) -> Iterator[PassEvent | BatchStep]:
    """:func:`_decode`, handing the graph runner the batch holds back when the loop ends (finished, failed,
    cancelled or closed)."""
    try:
        yield from _decode(batch)
    finally:
        if batch.runner is not None:
            batch.runner.busy.release()


def _decode(batch: _Batch) -> Iterator[PassEvent | BatchStep]:
    """The loop of a batch: prefill, then passes until every row has finished (one forward per pass)."""
    yield from _prefill(batch)
    while batch.active:
        batch.index += 1
        t0 = batch.clock.now_ms()
        batch.compile_mark = compilations()
        gains = [row.control.expected_gain if row.control is not None else None for row in batch.active]
        # 1 draft
        drafts, ks, notices, draft_ms = _draft_all(batch)
        t1 = batch.clock.now_ms()
        # 2 verify
        outcomes = _verify_all(batch, drafts)
        t2 = batch.clock.now_ms()
        # 3 commit
        committed = _commit_all(batch, outcomes)
        t3 = batch.clock.now_ms()
        # 4 update
        _update_all(batch, drafts, ks, outcomes, (draft_ms, t2 - t1, t3 - t2))
        batch.check_invariant()
        # 5 event
        yield from _pass_events(batch, (t0, t1, t2), drafts, ks, outcomes, committed, notices, gains, draft_ms)
        batch.drop_finished()


def _pass_events(batch: _Batch, clock: tuple[float, float, float], drafts: list[Draft], ks: list[int],
                 outcomes: list[Outcome], committed: list[tuple[list[int], str]], notices: list[str | None],
                 gains: list[float | None], draft_ms: list[float]) -> Iterator[PassEvent | BatchStep]:
    """5 event: the batch's :class:`BatchStep`, then each row's :class:`PassEvent` (its draft time, the shared
    forward, the shared bookkeeping)."""
    t0, t1, t2 = clock
    other = batch.clock.now_ms() - t2
    compiling = compilations() != batch.compile_mark  # the drafts or the forward compiled a graph
    batch.elapsed_ms += t2 - t0 + other
    lengths = batch.cache.row_lengths()
    yield BatchStep(batch.name, batch.index, len(batch.active), 1 + max(len(d.token_ids) for d in drafts), t2 - t1,
                    t1 - t0, sum(len(e) for e, _ in committed), batch.elapsed_ms)
    for i, row in enumerate(batch.active):
        row.index = batch.index
        emitted, delta = committed[i]
        yield _event(batch, row, outcomes[i], emitted, delta, Timings(draft_ms[i], t2 - t1, other), k=ks[i],
                     source=drafts[i].source, notice=notices[i], gain=gains[i], cache_len=lengths[i],
                     resplit=drafts[i].resplit, compiling=compiling)


def generate_batch(target, prompts: list[list[int]], config: GenerationConfig, *,
                   drafters: list[Drafter | None] | None = None,
                   cancel: object | None = None) -> Iterator[PassEvent | BatchStep]:
    """Decode B prompts together (B >= 1; prompts of any lengths), speculatively for each row with a drafter.

    Args:
        target: a :class:`specviz.models.LoadedModel` (any :class:`Target`).
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
    return _holding(_Batch(name, target, [list(p) for p in prompts], config, cancel, drafters))


def _rows_only(events: Iterator[PassEvent | BatchStep]) -> Iterator[PassEvent]:
    return (event for event in events if isinstance(event, PassEvent))


def standard_generate(target, prompt_ids: list[int], config: GenerationConfig, *,
                      cancel: object | None = None) -> Iterator[PassEvent]:
    """Standard (autoregressive) decoding of ``target``: one event per token, ``k == 0`` (a batch of one, see
    :func:`generate_batch`).

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
    return _rows_only(_holding(_Batch("baseline", target, [list(prompt_ids)], config, cancel)))


def speculative_generate(target, drafter: Drafter, prompt_ids: list[int], config: GenerationConfig, *,
                         cancel: object | None = None) -> Iterator[PassEvent]:
    """Speculative decoding of ``target`` with ``drafter``: one event per target pass (a batch of one, see
    :func:`generate_batch`).

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
    return _rows_only(_holding(_Batch("speculative", target, [list(prompt_ids)], config, cancel, [drafter])))


def collect(events: Iterable[PassEvent], tokenizer, prompt_ids: list[int]) -> RunResult:
    """Drain an event stream into a :class:`RunResult` (token ids, text, finish reason, wall time)."""
    evs = list(events)
    ids = tuple(t for e in evs for t in e.emitted_ids)
    text = "".join(e.text_delta for e in evs)
    return RunResult(
        run=evs[0].run, prompt_ids=tuple(prompt_ids), token_ids=ids, text=text,
        finish_reason=evs[-1].finish_reason, events=tuple(evs), wall_s=evs[-1].t_end_ms / 1000.0,
    )
