"""The records one pass of the engine hands from phase to phase (:mod:`specviz.core.engine`).

- :class:`Row`: one prompt's run inside a batch (its output, generator, drafter, draft-length control, clock);
  it lives for the whole run.
- :class:`RowPass`: what one row's pass did, filled phase by phase: 1 draft writes ``k``, ``draft``, ``notice``
  and ``draft_ms``; 2 verify writes ``outcome``; 3 commit writes ``emitted`` and ``text_delta``; 4 update writes
  ``pool_added``; 5 event reads them all. No phase rewrites another phase's fields.
- :class:`Outcome`: what verification decided for one row (chain, tree or lookahead).
- :class:`PassTimes`: the batch's clock readings between the phases of one pass (ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from specviz.core.draft_length import AutoK, GateK, HeuristicK
from specviz.core.drafting import Draft, DrafterBase
from specviz.core.events import LookaheadRecord, PositionDetail, RunKind, TreeRecord
from specviz.core.output import OutputTracker


@dataclass
class Row:
    """One prompt's run inside a batch: its output, generator, drafter, draft-length control and clock."""

    name: RunKind
    row: int
    prompt_ids: list[int]
    out: OutputTracker
    gen: torch.Generator
    drafter: DrafterBase | None = None  # None: standard decoding, or a drafter dropped after non-finite numbers
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

    @property
    def ready(self) -> bool:
        """Whether the row's drafter has a candidate for its last committed token (k = auto's gate asks)."""
        return self.drafter is None or self.drafter.has_candidates(self.committed)


@dataclass(frozen=True)
class Outcome:
    """What one verification decided (chain, tree or lookahead); the commit step and the event builder read it.

    Attributes:
        shown_ids: the draft tokens the event shows (a chain: all; a tree: accepted path + first rejected child).
        num_accepted: accepted draft tokens (a prefix of ``shown_ids``).
        next_id / next_kind: the target's own token of the pass and how it was chosen ("target", "bonus",
            "recovered").
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

    @property
    def emitted_ids(self) -> list[int]:
        """The tokens the pass offers to the output: the accepted draft tokens, then the target's own token."""
        return list(self.accepted_ids) + [self.next_id]


@dataclass
class RowPass:
    """One row's pass, filled in phase by phase (see the module docstring).

    Attributes:
        row: the row this pass belongs to.
        k: the draft length the row asked for (0: a plain step, or standard decoding).
        expected_gain: the draft-length controller's expected gain when the pass began (None without one).
        draft: 1 draft: the proposal (chain or tree), cut to the run's vocabulary and to k.
        notice: 1 draft: one sentence for the event (a drafter dropped after non-finite numbers, the context
            window reached), or None.
        draft_ms: 1 draft: this row's drafting time (ms).
        outcome: 2 verify: the verdict.
        emitted: 3 commit: the ids actually emitted (the stopping rules may cut ``outcome.emitted_ids``).
        text_delta: 3 commit: the newly final text.
        pool_added: 4 update: n-grams a lookahead pass added to its pool (0 otherwise).
    """

    row: Row
    k: int = 0
    expected_gain: float | None = None
    draft: Draft = field(default_factory=lambda: Draft([]))
    notice: str | None = None
    draft_ms: float = 0.0
    outcome: Outcome | None = None
    emitted: list[int] = field(default_factory=list)
    text_delta: str = ""
    pool_added: int = 0

    @property
    def lookahead(self) -> LookaheadRecord | None:
        """The lookahead record of the event: the verify phase's, with the update phase's new n-gram count."""
        record = self.outcome.lookahead if self.outcome is not None else None
        if record is None:
            return None
        return replace(record, added=self.pool_added)


@dataclass
class PassTimes:
    """The batch clock's readings (ms) at the start of a pass and after its draft, verify and commit phases."""

    start: float
    drafted: float = 0.0
    verified: float = 0.0
    committed: float = 0.0

    @property
    def draft_ms(self) -> float:
        """Every row's drafting, one after the other."""
        return self.drafted - self.start

    @property
    def verify_ms(self) -> float:
        """The shared target forward and the verdicts."""
        return self.verified - self.drafted

    @property
    def commit_ms(self) -> float:
        """Cache rollback and emitting under the stopping rules."""
        return self.committed - self.verified
