"""Frozen records that the engine yields, one per target forward.

The engine (:mod:`specviz.core.engine`) knows token ids, never HTML; the UI knows these events, never KV caches.
Both the speculative loop and the standard-decoding baseline yield :class:`PassEvent`; the baseline's
events have ``k == 0`` and no draft.

Timings are in milliseconds (ms) and measured on the run's own clock: ``t_end_ms`` is the sum of the
durations of this run's forwards so far (prefill included), so time a consumer spends between events
(rendering, or another run interleaved on the same device) is never counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PassKind = Literal["prefill", "pass"]
"""``prefill``: the forward over the prompt that emits the first token; ``pass``: a later target forward."""

NextKind = Literal["recovered", "bonus", "target"]
"""How the target's own token of a pass was chosen.

- ``recovered``: at the first rejected position, sampled from norm(max(0, target_probs - draft_probs))
  (greedy: the target's argmax there).
- ``bonus``: every drafted token was accepted; sampled from the target at position k+1.
- ``target``: nothing was drafted (prefill, standard decoding, or a drafter with no proposal).
"""

FinishReason = Literal["eos", "length", "stop"]

RunKind = Literal["speculative", "baseline"]
"""``speculative``: the run with a drafter; ``baseline``: standard decoding of the same target."""

DraftSource = Literal["lookup", "pool", "retokenized", "prompt", "output", "earlier"]
"""Where a proposal came from: ``lookup`` = copied by n-gram lookup (a head drafter with lookup first); ``pool`` =
an n-gram of lookahead decoding's pool; ``retokenized`` = a draft model with another tokenizer drafted text in its own
vocabulary and the text was re-tokenized for the target (:mod:`specviz.drafters.cross_tokenizer`); ``prompt`` /
``output`` / ``earlier`` = suffix decoding copied the draft's first token from the prompt, from this run's output, or
from an earlier output of the session (:mod:`specviz.drafters.suffix`); None on an event means the drafter's own
proposal."""


class RunCancelled(Exception):
    """A run was stopped by its caller's cancel flag; raised by the engine before the next forward would start."""


class NumericalError(RuntimeError):
    """The target's logits turned non-finite (NaN or inf): the run cannot go on. The message is one sentence."""


@dataclass(frozen=True)
class TreeRecord:
    """The whole draft tree of a tree pass (greedy only).

    Attributes:
        tokens: N node token ids.
        parents: N parent indices (-1 = the root, the last committed token), topologically ordered.
        path: the accepted node indices, root's child first.
        shown: the nodes listed in the event's ``draft_ids``: the accepted path plus the first rejected child.
        copied: the nodes of the chain n-gram lookup copied into the tree (a head drafter with lookup first; root's
            child first), () when none was.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    path: tuple[int, ...]
    shown: tuple[int, ...]
    copied: tuple[int, ...] = ()

    @property
    def num_nodes(self) -> int:
        """Nodes the target verified in this pass (all of them, in one forward)."""
        return len(self.tokens)


@dataclass(frozen=True)
class Timings:
    """Where one pass's time went, in milliseconds.

    ``draft_ms``: the drafter's ``propose`` (and catch-up of its cache); ``verify_ms``: the target forward;
    ``other_ms``: acceptance math, cache rollback, stop checks and detokenization.
    """

    draft_ms: float = 0.0
    verify_ms: float = 0.0
    other_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        """draft + verify + other (ms)."""
        return self.draft_ms + self.verify_ms + self.other_ms


@dataclass(frozen=True)
class LookaheadRecord:
    """What one lookahead pass did (for the window and pool view).

    Attributes:
        levels: the window as the forward read it: per level (oldest first) its W guessed tokens.
        new_level: the W tokens this pass's Jacobi step produced (the window's next top level).
        candidates: the pool n-grams verified (each N-1 tokens after the last committed one).
        winner: the index of the candidate whose accepted prefix was taken (None without candidates).
        accepted: how many of the winner's tokens were accepted.
        pool_size: n-grams in the pool before this pass's new ones; ``added``: new n-grams this pass.
    """

    levels: tuple[tuple[int, ...], ...]
    new_level: tuple[int, ...]
    candidates: tuple[tuple[int, ...], ...]
    winner: int | None
    accepted: int
    pool_size: int
    added: int = 0

    @property
    def window_tokens(self) -> int:
        """Tokens of the lookahead branch in the pass's forward (levels x W)."""
        return sum(len(level) for level in self.levels)

    @property
    def candidate_tokens(self) -> int:
        """Tokens of the verification branch in the forward (all candidates' tokens, each verified)."""
        return sum(len(c) for c in self.candidates)


@dataclass(frozen=True)
class PositionDetail:
    """What the target thought of one drafted position (for hover text and the step-through view).

    ``target_prob`` / ``draft_prob``: probability of the drafted token under the target's and the draft's
    processed distributions (after temperature, top-k, top-p); ``draft_prob`` is 1.0 for a deterministic
    drafter (one-hot). ``uniform``: the number drawn for the acceptance test (None in greedy mode, or for
    positions after the first rejection, which were never judged). ``target_top_id``: the target's most
    likely token at this position.
    """

    target_prob: float
    draft_prob: float
    uniform: float | None
    target_top_id: int
    judged: bool


@dataclass(frozen=True)
class PassEvent:
    """One target forward of a run.

    Attributes:
        run: "speculative" or "baseline" (see :data:`RunKind`).
        index: 0 for the prefill, then 1, 2, ... for target passes.
        kind: "prefill" or "pass".
        k: draft length requested for this pass (0 for the baseline and the prefill).
        draft_ids: the drafter's proposal as shown, length <= k (a tree pass: its accepted path plus the first
            rejected child; the whole tree is in ``tree``).
        accept_mask: one bool per shown draft token, the verifier's verdict; only a prefix can be True.
        num_accepted: draft tokens the verifier accepted (== sum(accept_mask)). On the last pass of a run some of
            them may lie after the end (EOS, a stop string or the budget): :attr:`committed_accepted` counts only
            those that entered the output, and the run's counters use it.
        next_id: the target's own token of this pass (recovered, bonus or plain target token).
        next_kind: "recovered", "bonus" or "target" (see :data:`NextKind`).
        emitted_ids: tokens this pass added to the output, in order: the accepted drafts then next_id, cut
            at EOS, a stop string or max_new_tokens exactly where standard decoding would stop. Its length
            can be smaller than num_accepted + 1 only on the last pass.
        details: one :class:`PositionDetail` per shown draft token.
        text_delta: new text that this pass makes final (incremental detokenization; holds back
            incomplete UTF-8 so no U+FFFD appears mid-stream). Concatenated over a run it equals the text.
        timings: :class:`Timings` of this pass (ms).
        t_end_ms: the run's own clock after this pass (ms since the prefill started).
        num_generated: output tokens so far, this pass included.
        target_cache_len / draft_cache_len: KV-cache lengths after rollback (None when there is no cache).
        finish_reason: set on the last event of a run: "eos", "length" or "stop".
        near_tie_gap: baseline only: the gap between the top two logits at the emitted token (used to show
            that a divergence between two numerics sits at a near-tie).
        next_k: the draft length the next pass will ask for (adaptive k); None for the baseline and the prefill.
        draft_source: where the pass's draft came from (:data:`DraftSource`): "lookup" when a head drafter with
            lookup first copied it (a chain, or in a tree one branch: ``tree.copied``), "retokenized" when a draft
            model with another tokenizer drafted it, "prompt" / "output" / "earlier" where suffix decoding copied it
            from, else None.
        resplit: for a "retokenized" draft, one bool per shown draft token: True where that target token does not
            coincide with exactly one of the draft model's tokens (the two tokenizers split the text differently
            there); () otherwise.
        tree: the whole tree of a tree pass (:class:`TreeRecord`), else None.
        notice: one sentence when something about the drafting changed at this pass (e.g. the drafter's
            numbers turned non-finite and the run goes on without drafts), else None.
        expected_gain: k = auto only: the expected decoding rate at this pass's k over a plain step's, from the
            run's measured costs and acceptance (1.0 when it chose k = 0; None before anything was measured).
        row: the prompt's row in a batch (0 for a single prompt).
        lookahead: for a lookahead pass, its window, pool and candidates (:class:`LookaheadRecord`), else None;
            ``draft_ids`` then shows the winning candidate (its accepted prefix and the first rejected token).
        compiling: True when torch.compile traced or compiled a graph while this pass (or prefill) ran, so its
            timings include compilation (:func:`specviz.core.kv.compilations`; see :mod:`specviz.runtime.compiled`), or
            when the graph path captured a CUDA graph (:mod:`specviz.core.graphs`).
        forward_path: on the prefill event only: which forward path the run takes and what it promises ("eager
            ...", "graphs ..."; :func:`specviz.core.graphs.choose_runner`), else None.
    """

    run: RunKind
    index: int
    kind: PassKind
    k: int
    draft_ids: tuple[int, ...]
    accept_mask: tuple[bool, ...]
    num_accepted: int
    next_id: int | None
    next_kind: NextKind
    emitted_ids: tuple[int, ...]
    details: tuple[PositionDetail, ...]
    text_delta: str
    timings: Timings
    t_end_ms: float
    num_generated: int
    target_cache_len: int | None = None
    draft_cache_len: int | None = None
    finish_reason: FinishReason | None = None
    near_tie_gap: float | None = None
    next_k: int | None = None
    draft_source: DraftSource | None = None
    tree: TreeRecord | None = None
    notice: str | None = None
    expected_gain: float | None = None
    row: int = 0
    lookahead: LookaheadRecord | None = None
    resplit: tuple[bool, ...] = ()
    compiling: bool = False
    forward_path: str | None = None

    @property
    def copied_drafts(self) -> tuple[bool, ...]:
        """One bool per shown draft token: True where n-gram lookup copied it (``draft_source`` "lookup": every
        token of a chain, or in a tree the nodes of its copied branch)."""
        if self.draft_source != "lookup":
            return (False,) * len(self.draft_ids)
        if self.tree is None:
            return (True,) * len(self.draft_ids)
        return tuple(node in self.tree.copied for node in self.tree.shown)

    @property
    def num_drafted(self) -> int:
        """Number of shown draft tokens in this pass (a chain: every proposed token)."""
        return len(self.draft_ids)

    @property
    def cut_in_drafts(self) -> bool:
        """True when the run ended inside this pass's accepted drafts (the target's own token was not emitted)."""
        return len(self.emitted_ids) <= self.num_accepted and self.finish_reason is not None

    @property
    def committed_accepted(self) -> int:
        """Accepted draft tokens that entered the output (the run's "accepted" counter)."""
        return min(self.num_accepted, len(self.emitted_ids))

    @property
    def counted_drafted(self) -> int:
        """Draft tokens this pass counts as drafted (the run's "drafted" counter): a chain's proposed tokens, every
        node of a tree (all were verified), every candidate token of a lookahead pass (its window's tokens are
        counted apart); on a pass cut inside its accepted drafts, only the committed ones."""
        if self.cut_in_drafts:
            return self.committed_accepted
        if self.lookahead is not None:
            return self.lookahead.candidate_tokens
        return self.tree.num_nodes if self.tree is not None else self.num_drafted

    @property
    def num_rejections(self) -> int:
        """1 if the target refused a draft token in this pass and its own token was emitted, else 0 (positions
        after the first rejection were never judged)."""
        return 1 if self.num_accepted < self.num_drafted and not self.cut_in_drafts else 0


@dataclass(frozen=True)
class BatchStep:
    """One target forward of a batch of prompts (:func:`specviz.core.engine.generate_batch`); the rows' own
    :class:`PassEvent` s of that forward follow it.

    Attributes:
        run: "speculative" or "baseline".
        index: 0 for the prefill, then 1, 2, ... per forward.
        rows: rows in the forward (finished rows leave the batch).
        new_tokens: tokens per row in the forward (1 + the longest draft; shorter rows are padded).
        forward_ms: the forward's time (ms); ``draft_ms``: the rows' drafting before it, all rows together.
        emitted: tokens the rows emitted from this forward, all rows together.
        t_end_ms: the batch's own clock after this forward and its bookkeeping (ms).
    """

    run: RunKind
    index: int
    rows: int
    new_tokens: int
    forward_ms: float
    draft_ms: float
    emitted: int
    t_end_ms: float


@dataclass(frozen=True)
class RunResult:
    """A finished run, collected from its events by :func:`specviz.core.engine.collect`.

    ``token_ids``: generated ids only (the EOS id included when the run ended on it); ``text``: decoded with
    special tokens skipped (cut before a stop string); ``wall_s``: from the prefill's start to the last token
    (model loading excluded), seconds.
    """

    run: str
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str
    finish_reason: FinishReason
    events: tuple[PassEvent, ...]
    wall_s: float

    @property
    def compiling(self) -> bool:
        """True when any pass of the run compiled a graph (torch.compile): its timings include compilation."""
        return any(event.compiling for event in self.events)

    @property
    def forward_path(self) -> str | None:
        """The run's forward path as its prefill event names it (:attr:`PassEvent.forward_path`)."""
        return self.events[0].forward_path if self.events else None
