"""The drafter protocol shared by every drafting strategy.

A drafter proposes up to k tokens after the committed sequence; the engine verifies them with one target
forward and then tells the drafter what was committed, so a drafter with a KV cache can roll it back.

:class:`DraftContext` carries the target's final features for drafters that read them (EAGLE-style and
Medusa heads, ``needs_hidden = True``), and :class:`Draft` may carry a parent index per node: a tree of
candidates, verified in one target forward with a tree attention mask (greedy mode; see :mod:`specviz.core.tree`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch

from specviz.core.verify import SamplingConfig, apply_processors


@dataclass
class DraftContext:
    """What a drafter may read when proposing.

    Attributes:
        committed_ids: prompt ids followed by every emitted token (list of ints, length C).
        k: the most tokens to propose this pass (>= 1).
        sampling: the run's sampling settings (a drafter that samples must use :func:`process_logits` with
            these, and report the exact distribution it drew from).
        generator: the run's seeded torch.Generator.
        target_hidden: (n, H) the target's final features (after the last norm) of the committed positions the
            drafter has not seen yet: every prompt position on the first pass, then the fed root and the accepted
            draft tokens of the previous pass; None for drafters whose ``needs_hidden`` is False. A drafter whose
            ``needs_hidden`` is a tuple of hidden-state indices (an EAGLE-3 head) gets (n, len(tuple) * H): those
            hidden states of the target side by side (0 = embeddings, i = output of decoder layer i).
        vocab_size: ids the run's distributions cover (:func:`specviz.core.verify.restrict_vocab`): a drafter proposes
            only ids below it and reports distributions over exactly these ids (padded LM-head rows get 0); None
            means the target's whole head.
        cancel: the run's cancel flag (anything with ``is_set()``) or None; a drafter that runs many forwards (a
            draft model reading a long prompt) passes it to :func:`specviz.core.kv.forward_chunked`.
        prompt_len: how many of ``committed_ids`` are the prompt (the frequency and presence penalties count
            generated tokens only; see :func:`specviz.core.verify.apply_processors`).
    """

    committed_ids: list[int]
    k: int
    sampling: SamplingConfig
    generator: torch.Generator | None
    target_hidden: torch.Tensor | None = None
    vocab_size: int | None = None
    cancel: object | None = None
    prompt_len: int = 0

    def processed(self, logits: torch.Tensor, drafted: list[int]) -> torch.Tensor:
        """(V,) draft logits after the run's logits processors, as the target's row at the same position sees
        them: the committed tokens plus the tokens this draft proposed before it (``drafted``)."""
        if not self.sampling.processed:
            return logits
        return apply_processors(logits[None], self.sampling, [self.committed_ids + list(drafted)],
                                self.prompt_len)[0]


@dataclass(frozen=True)
class LookaheadPlan:
    """What a lookahead pass adds to one target forward (Fu et al. 2024, "Break the Sequential Dependency of LLM
    Inference Using Lookahead Decoding"), laid out as the nodes of one tree under the last committed token.

    Attributes:
        window_nodes: per level (oldest first), the node indices of its W tokens. Node (level l, column j) is a
            guess for the token l + j positions after the last committed token; its parent is the node below it
            in its column (level 0: the node to its left, or the root), so its ancestors are exactly the tokens
            its Jacobi step reads: the level-0 guesses before its column and its column below it.
        candidates: the verification branch: node indices of each candidate n-gram's tokens, in order (a chain
            from the root); in sampling mode at most one, chosen before the target sees anything.
        pool_size: n-grams in the pool when the candidates were chosen.
    """

    window_nodes: tuple[tuple[int, ...], ...]
    candidates: tuple[tuple[int, ...], ...]
    pool_size: int = 0

    @property
    def window_tokens(self) -> int:
        """Tokens the lookahead branch adds to the forward."""
        return sum(len(level) for level in self.window_nodes)


@dataclass
class Draft:
    """A proposal.

    Attributes:
        token_ids: m <= k proposed ids (may be empty: the pass then emits one normal target token).
        token_probs: m floats, the draft's probability of each proposed token (1.0 for a deterministic drafter).
        draft_probs: (m, V) float32 distributions the tokens were drawn from, or None for a deterministic
            drafter or in greedy mode (one-hot / unused).
        parents: None for a chain; for a tree, the parent node index of each node (-1 = the last committed
            token), topologically ordered (parents first). Trees are for greedy mode only.
        source: where a composite drafter's proposal came from ("lookup": copied by n-gram lookup; "pool": a
            lookahead candidate; "retokenized": text drafted in another tokenizer's vocabulary; "prompt" / "output" /
            "earlier": suffix decoding copied it from the prompt, the run's output or an earlier output of the
            session), or None; the engine passes it on as the pass event's ``draft_source``.
        resplit: for a "retokenized" chain, one bool per token: True where the target token does not coincide with
            one of the draft model's tokens (the tokenizers split the text differently); () otherwise. The engine
            passes it on as the pass event's ``resplit``.
        lookahead: for a lookahead pass, which of the tree's nodes are the window and which the candidates
            (:class:`LookaheadPlan`); only the candidates are verified. None otherwise.
        copied: for a tree with source "lookup", the node indices of the chain n-gram lookup copied into it (root's
            child first; the other nodes are the head's guesses); () otherwise. The engine passes it on in the pass
            event's ``tree``.
    """

    token_ids: list[int]
    token_probs: list[float] = field(default_factory=list)
    draft_probs: torch.Tensor | None = None
    parents: list[int] | None = None
    source: str | None = None
    lookahead: LookaheadPlan | None = None
    resplit: tuple[bool, ...] = ()
    copied: tuple[int, ...] = ()


@runtime_checkable
class Drafter(Protocol):
    """The least a drafting strategy must have (a structural type: any object with these members drafts).

    ``reset`` starts a run; ``propose`` returns a :class:`Draft`; ``commit`` is called after each pass that drafted,
    with the new committed sequence and how many draft tokens were accepted, so the drafter can roll its cache back;
    ``cache_len`` reports its KV-cache length (None without a cache). The optional hooks the engine also calls are
    declared, with their defaults, by :class:`DrafterBase`; :func:`as_drafter` gives any Drafter those defaults.
    """

    name: str
    needs_hidden: bool | tuple[int, ...]  # False, True (final features) or hidden-state indices (see DraftContext)

    def reset(self, prompt_ids: list[int]) -> None: ...

    def propose(self, ctx: DraftContext) -> Draft: ...

    def commit(self, committed_ids: list[int], num_accepted: int) -> None: ...

    @property
    def cache_len(self) -> int | None: ...


class DrafterBase:
    """The drafter contract: every member the engine reads or calls, with the default a plain drafter wants.

    A drafter subclasses this and defines ``name`` and :meth:`propose` (and :meth:`reset` / :meth:`commit` when it
    keeps state); the rest is optional. What the engine calls, and when:

    - ``reset(prompt_ids)`` once before the prefill of a run;
    - ``has_candidates(committed_ids)`` whenever the next k is chosen (after the prefill and each pass), for
      k = auto's gate (:class:`~specviz.core.draft_length.GateK`): whether a pass could accept anything now
      (default True);
    - ``propose(ctx)`` in phase 1 (draft) of each pass with k >= 1;
    - ``commit(committed_ids, num_accepted)`` in phase 4 (update) of each pass that drafted;
    - ``advance(new_level)`` in phase 4 of a lookahead pass (a draft carrying a :class:`LookaheadPlan`): the
      Jacobi step's outputs; returns the new n-grams (default 0; only a lookahead drafter is called);
    - ``finish(committed_ids)`` once when the row ends (a last pass that drafted nothing is never committed);
    - read: ``name`` (notices), ``needs_hidden`` (which target features the forwards return), ``cache_len`` (the
      event's ``draft_cache_len``), ``fixed_k`` / ``warmup_passes`` / ``waits_for_candidates`` (the draft-length
      controller: :meth:`specviz.core.engine.GenerationConfig.draft_length`).
    """

    name: str = "drafter"
    needs_hidden: bool | tuple[int, ...] = False
    cache_len: int | None = None  # KV-cache length after rollback (None: the drafter has no cache)
    fixed_k: int | None = None  # a drafter that drafts this many tokens every pass, whatever k (lookahead: N-1)
    warmup_passes: int = 0  # passes k = auto's gate leaves out of its means while the drafter warms up
    waits_for_candidates: bool = False  # whether k = auto's gate may hold the first pass until has_candidates

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a run on ``prompt_ids`` (default: nothing to reset)."""

    def propose(self, ctx: DraftContext) -> Draft:
        """At most ``ctx.k`` tokens after ``ctx.committed_ids``.

        Raises:
            NotImplementedError: a subclass must define it.
        """
        raise NotImplementedError(f"{type(self).__name__} must define propose(ctx)")

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """The pass committed ``committed_ids`` (prompt + output), ``num_accepted`` of the draft among them (default:
        nothing to roll back)."""

    def finish(self, committed_ids: list[int]) -> None:
        """The row ended with ``committed_ids`` (default: nothing to do)."""

    def has_candidates(self, committed_ids: list[int]) -> bool:
        """Whether a pass after ``committed_ids`` could draft anything worth verifying (default True)."""
        return True

    def advance(self, new_level: list[int]) -> int:
        """A lookahead pass's Jacobi outputs (W ids); returns the n-grams added to the pool (default 0)."""
        return 0


class _Adapted(DrafterBase):
    """A :class:`Drafter` that does not subclass :class:`DrafterBase` (a test's stub, a wrapper in the app), seen
    through the contract: its own members where it defines them, the contract's defaults otherwise. Attributes are
    read on every use, so a changing ``cache_len`` or ``name`` shows through."""

    def __init__(self, inner: Drafter) -> None:
        self.inner = inner

    def _own(self, name: str):
        return getattr(self.inner, name, getattr(DrafterBase, name))

    name = property(lambda self: self._own("name"))
    needs_hidden = property(lambda self: self._own("needs_hidden"))
    cache_len = property(lambda self: self._own("cache_len"))
    fixed_k = property(lambda self: self._own("fixed_k"))
    warmup_passes = property(lambda self: self._own("warmup_passes"))
    waits_for_candidates = property(lambda self: self._own("waits_for_candidates"))

    def reset(self, prompt_ids: list[int]) -> None:
        self.inner.reset(prompt_ids)

    def propose(self, ctx: DraftContext) -> Draft:
        return self.inner.propose(ctx)

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        self.inner.commit(committed_ids, num_accepted)

    def finish(self, committed_ids: list[int]) -> None:
        own = getattr(self.inner, "finish", None)
        if own is not None:
            own(committed_ids)

    def has_candidates(self, committed_ids: list[int]) -> bool:
        own = getattr(self.inner, "has_candidates", None)
        return True if own is None else bool(own(committed_ids))

    def advance(self, new_level: list[int]) -> int:
        return self.inner.advance(new_level)


def as_drafter(drafter: Drafter | None) -> DrafterBase | None:
    """``drafter`` under the full contract of :class:`DrafterBase` (itself when it subclasses it; None stays None).
    The engine calls this once per run, so it calls every hook directly afterwards."""
    if drafter is None or isinstance(drafter, DrafterBase):
        return drafter
    return _Adapted(drafter)
