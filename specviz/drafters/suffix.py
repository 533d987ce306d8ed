"""Suffix decoding: model-free drafting from suffix tries (Oliaro et al. 2024, "SuffixDecoding: Extreme Speculative
Decoding for Emerging AI Applications"; vLLM's ``suffix`` method, which runs Arctic Inference's implementation).

Two tries index every substring of at most ``max_depth`` tokens, with how often each occurred:

- the **run's trie** over the prompt and the output so far, built at :meth:`SuffixDrafter.reset` and extended by one
  token at a time as tokens are committed (never rebuilt during a run);
- the **store** (:class:`SuffixStore`): a trie over the latest earlier outputs of the same session (a page visit in
  the app, a process in the CLI), each with a few prompt tokens before it, so a repeated request finds its earlier
  answer from the first token on. It holds at most ``max_outputs`` outputs and ``max_tokens`` tokens: the oldest
  output leaves first, and its counts are taken out of the trie again.

Each drafted token: among the nodes of the text's suffixes in both tries (kept as a list per trie, one node per
suffix length 1..max_depth-1, advanced in O(max_depth) per token), take the deepest that has a continuation (the
longest matching suffix; equal depth: the more probable continuation, then the run's trie), and propose its most
frequent next token (ties: the most recent). Its empirical probability is count(next token) / count(continuations);
the draft's probability is the product along the chain, and drafting stops before it falls below ``min_prob``, or
at k tokens. A proposal thus costs O(k x max_depth) dictionary look-ups, whatever the context length.

A proposal is a chain (greedy and sampling alike: deterministic, so one-hot draft probabilities) whose
:attr:`~specviz.core.drafting.Draft.source` says where its first token was copied from: ``"prompt"``, ``"output"``
(earlier in this run's output) or ``"earlier"`` (an earlier output of the session, from the store).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from specviz.core.drafting import Draft, DraftContext, DrafterBase

DEFAULT_MAX_DEPTH = 16  # longest indexed substring (tokens): matched suffixes of up to 15 tokens
DEFAULT_MIN_PROB = 0.1  # stop drafting where the chain's empirical probability would fall below this
DEFAULT_MAX_OUTPUTS = 16  # earlier outputs the store keeps
DEFAULT_MAX_TOKENS = 2048  # tokens the store keeps (outputs and their lead-in tokens): at most ~10 MB of trie
DEFAULT_LEAD_IN = 8  # prompt tokens stored before each output (a repeated request matches from its first token)


class _Node:
    """A trie node: one substring. ``count`` = its occurrences; ``total`` = occurrences followed by one more token
    (the sum of the children's counts); ``best`` = the token of the most frequent child (ties: the most recent);
    ``last`` = the stamp of its latest occurrence's last token (a position for the run's trie)."""

    __slots__ = ("children", "count", "total", "best", "last")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.count = 0
        self.total = 0
        self.best: int | None = None
        self.last = -1


class SuffixTrie:
    """Every substring of at most ``max_depth`` tokens of the sequences inserted, with occurrence counts.

    A sequence is inserted one token at a time (:meth:`extend`), given the nodes of its current suffixes (a "tail":
    ``tail[i]`` is the node of its last i + 1 tokens, i < max_depth - 1); :meth:`retract` takes a sequence out again
    the same way. Memory: at most ``max_depth`` nodes per inserted token (``nodes`` counts them).

    Raises:
        ValueError: ``max_depth`` < 2.
    """

    def __init__(self, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        if max_depth < 2:
            raise ValueError(f"a suffix trie needs max_depth >= 2, got {max_depth}")
        self.max_depth = max_depth
        self.root = _Node()
        self.nodes = 1

    def extend(self, tail: list[_Node], token: int, stamp: int) -> list[_Node]:
        """Count one more token after the sequence whose suffix nodes are ``tail``; returns the new tail."""
        grown = []
        for parent in [self.root, *tail]:
            child = parent.children.get(token)
            if child is None:
                child = parent.children[token] = _Node()
                self.nodes += 1
            child.count += 1
            child.last = stamp
            parent.total += 1
            best = parent.children.get(parent.best) if parent.best is not None else None
            if best is None or child.count >= best.count:  # ties go to the most recent
                parent.best = token
            grown.append(child)
        return grown[: self.max_depth - 1]

    def retract(self, tail: list[_Node], token: int) -> list[_Node]:
        """Undo one :meth:`extend` of the oldest occurrences (nodes whose count drops to 0 are removed)."""
        shrunk = []
        for parent in [self.root, *tail]:
            child = parent.children[token]
            child.count -= 1
            parent.total -= 1
            if child.count == 0:
                del parent.children[token]
                self.nodes -= 1
            if parent.best == token:  # the most frequent child may have changed
                parent.best = max(parent.children, key=lambda t: (parent.children[t].count, parent.children[t].last),
                                  default=None)
            shrunk.append(child)
        return shrunk[: self.max_depth - 1]

    def follow(self, tail: list[_Node], token: int) -> list[_Node]:
        """The tail after ``token`` without counting it: the nodes of the suffixes that occur in the trie (a
        suffix that does not occur has no longer one that does)."""
        moved = []
        for parent in [self.root, *tail]:
            child = parent.children.get(token)
            if child is None:
                break
            moved.append(child)
        return moved[: self.max_depth - 1]

    def tail_of(self, ids: list[int]) -> list[_Node]:
        """The tail of a whole sequence (only its last max_depth - 1 tokens matter)."""
        tail: list[_Node] = []
        for token in ids[-(self.max_depth - 1):]:
            tail = self.follow(tail, token)
        return tail


def deepest_continuation(tail: list[_Node]) -> tuple[int, _Node | None]:
    """(matched suffix length, node) of the longest suffix in ``tail`` that has a continuation; (0, None) if none."""
    for length in range(len(tail), 0, -1):
        if tail[length - 1].best is not None:
            return length, tail[length - 1]
    return 0, None


def most_frequent_next(node: _Node) -> tuple[int, float, _Node]:
    """(token, empirical probability, child) of ``node``'s most frequent continuation."""
    child = node.children[node.best]
    return node.best, child.count / node.total, child


@dataclass
class SuffixStore:
    """The global store of suffix decoding: a :class:`SuffixTrie` over the latest earlier outputs of one session.

    An output goes in with up to ``lead_in`` prompt tokens before it; its substrings never run into another output.
    At most ``max_outputs`` outputs and ``max_tokens`` tokens are kept (an output longer than ``max_tokens`` keeps its
    last ``max_tokens`` tokens); the oldest leaves first, so the trie's nodes stay under ``max_tokens x max_depth``.
    Only what :meth:`add` or a finished run (:meth:`begin`) hands in is stored.

    Raises:
        ValueError: a cap below 1 or ``max_depth`` < 2.
    """

    max_outputs: int = DEFAULT_MAX_OUTPUTS
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_depth: int = DEFAULT_MAX_DEPTH
    lead_in: int = DEFAULT_LEAD_IN
    trie: SuffixTrie = field(init=False)
    outputs: deque = field(init=False)  # the stored sequences (lead-in + output), oldest first
    tokens: int = field(init=False, default=0)
    _stamp: int = field(init=False, default=0)
    _open: tuple[list[int], list[int]] | None = field(init=False, default=None)  # a run's (lead-in, output)

    def __post_init__(self) -> None:
        if self.max_outputs < 1 or self.max_tokens < 1 or self.lead_in < 0:
            raise ValueError(f"the suffix store needs max_outputs >= 1, max_tokens >= 1 and lead_in >= 0; got "
                             f"{self.max_outputs}, {self.max_tokens}, {self.lead_in}")
        self.trie = SuffixTrie(self.max_depth)
        self.outputs = deque()

    def add(self, prompt_ids: list[int], output_ids: list[int]) -> None:
        """Store one output (with the last ``lead_in`` tokens of its prompt), then drop the oldest ones over a cap."""
        if not output_ids:
            return
        lead = list(prompt_ids[-self.lead_in:]) if self.lead_in else []
        sequence = [int(t) for t in (lead + list(output_ids))[-self.max_tokens:]]
        tail: list[_Node] = []
        for token in sequence:
            self._stamp += 1
            tail = self.trie.extend(tail, token, self._stamp)
        self.outputs.append(sequence)
        self.tokens += len(sequence)
        while len(self.outputs) > self.max_outputs or self.tokens > self.max_tokens:
            self._evict()

    def _evict(self) -> None:
        """Take the oldest stored output out of the trie."""
        sequence = self.outputs.popleft()
        tail: list[_Node] = []
        for token in sequence:
            tail = self.trie.retract(tail, token)
        self.tokens -= len(sequence)

    def begin(self, prompt_ids: list[int]) -> list[int]:
        """A run starts: the previous run's output (handed out by the last call) is stored now; returns the list the
        new run's committed output tokens go into (stored at the next call) as the drafter is told about them
        (after each pass with a draft, and the whole output when the run ends)."""
        self.flush()
        self._open = (list(prompt_ids[-self.lead_in:]) if self.lead_in else [], [])
        return self._open[1]

    def flush(self) -> None:
        """Store the output handed out by :meth:`begin`, if any (a stopped run's output counts as far as it went)."""
        if self._open is not None:
            prompt_ids, output_ids = self._open
            self._open = None
            self.add(prompt_ids, output_ids)

    def clear(self) -> None:
        """Forget every stored output (and the open one)."""
        self.trie = SuffixTrie(self.max_depth)
        self.outputs.clear()
        self.tokens = 0
        self._open = None


@dataclass
class _Candidate:
    """One drafted token: where from ("prompt", "output", "earlier") and its empirical probability."""

    token: int
    prob: float
    origin: str


class SuffixDrafter(DrafterBase):
    """Suffix decoding (see the module docstring): the run's trie plus a session's :class:`SuffixStore`.

    Args:
        store: the session's store of earlier outputs, shared by the drafters of one session; None: a new one that
            lives as long as this drafter (the CLI reuses one drafter for every run of a process).
        remember: each run's output joins the store when the next run starts (False: the store only changes through
            :meth:`SuffixStore.add`, as the bench's warm mode does; with a new store it then stays empty: cold).
        max_depth: longest indexed substring (tokens, >= 2); matched suffixes have at most max_depth - 1 tokens.
        min_prob: drafting stops before the chain's empirical probability would fall below this, in [0, 1).

    Raises:
        ValueError: a parameter out of range.
    """

    needs_hidden = False
    cache_len = None

    def __init__(self, store: SuffixStore | None = None, remember: bool = True, max_depth: int = DEFAULT_MAX_DEPTH,
                 min_prob: float = DEFAULT_MIN_PROB) -> None:
        if not 0.0 <= min_prob < 1.0:
            raise ValueError(f"suffix decoding's probability threshold must be in [0, 1), got {min_prob}")
        self.store = store if store is not None else SuffixStore(max_depth=max_depth)
        self.remember = remember
        self.max_depth = max_depth
        self.min_prob = min_prob
        self.name = "suffix decoding (prompt + earlier outputs)" if remember else "suffix decoding (cold)"
        self.reset([])

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a run: a new trie over the prompt (O(prompt x max_depth)); the previous run's output joins the
        store (when remembering); the store's tail is found from the prompt's last tokens."""
        self.trie = SuffixTrie(self.max_depth)
        self.prompt_len = len(prompt_ids)
        self._seen = 0
        self._tail: list[_Node] = []
        self._store_tail: list[_Node] = []
        self._output: list[int] | None = self.store.begin(prompt_ids) if self.remember and prompt_ids else None
        self._store_tail = self.store.trie.tail_of(list(prompt_ids))
        self._sync(list(prompt_ids))

    def _sync(self, committed_ids: list[int]) -> None:
        """Index the committed tokens not seen yet (O(max_depth) each) and advance the store's tail."""
        for position in range(self._seen, len(committed_ids)):
            token = int(committed_ids[position])
            self._tail = self.trie.extend(self._tail, token, position)
            if position >= self.prompt_len:
                self._store_tail = self.store.trie.follow(self._store_tail, token)
                if self._output is not None:
                    self._output.append(token)
        self._seen = max(self._seen, len(committed_ids))

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Index the tokens this pass committed (nothing to roll back: drafts were never indexed)."""
        self._sync(committed_ids)

    def finish(self, committed_ids: list[int]) -> None:
        """The run ended: index its last tokens too (a last pass that drafted nothing was never committed), so the
        store receives the whole output."""
        self._sync(committed_ids)

    def propose(self, ctx: DraftContext) -> Draft:
        """The most frequent continuation of the longest matching suffix, token by token, while the chain's
        empirical probability stays >= ``min_prob``, at most ``ctx.k`` tokens, ids below ``ctx.vocab_size``."""
        self._sync(ctx.committed_ids)
        tail, store_tail = self._tail, self._store_tail
        drafted: list[_Candidate] = []
        chance = 1.0
        while len(drafted) < ctx.k:
            step = self._next(tail, store_tail)
            if step is None or chance * step.prob < self.min_prob:
                break
            if ctx.vocab_size is not None and step.token >= ctx.vocab_size:
                break
            chance *= step.prob
            drafted.append(step)
            tail = self.trie.follow(tail, step.token)
            store_tail = self.store.trie.follow(store_tail, step.token)
        if not drafted:
            return Draft([], [])
        return Draft([c.token for c in drafted], [1.0] * len(drafted), source=drafted[0].origin)

    def _next(self, tail: list[_Node], store_tail: list[_Node]) -> _Candidate | None:
        """The next token: from the trie with the longer matching suffix (equal: the more probable, then the run's)."""
        own_length, own = deepest_continuation(tail)
        store_length, stored = deepest_continuation(store_tail)
        if own is None and stored is None:
            return None
        own_pick = most_frequent_next(own) if own is not None else None
        store_pick = most_frequent_next(stored) if stored is not None else None
        if own_pick is not None and (store_pick is None or (own_length, own_pick[1]) >= (store_length, store_pick[1])):
            token, prob, child = own_pick
            return _Candidate(token, prob, "prompt" if child.last < self.prompt_len else "output")
        token, prob, _ = store_pick
        return _Candidate(token, prob, "earlier")
