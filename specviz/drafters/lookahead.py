"""Lookahead decoding: draft-free speculation by the target itself (Fu et al., ICML 2024, "Break the Sequential
Dependency of LLM Inference Using Lookahead Decoding"; llama.cpp's ``lookahead`` example).

Two branches ride in every target forward, beside the last committed token x:

- **lookahead branch**: a window of W columns and N-1 levels of Jacobi (fixed-point) iterations. The guess at
  level l, column j (both from 0) stands for the token l + j + 1 positions after x. Each forward runs one Jacobi
  step for the top level: every top guess reads the level-0 guesses left of its column and its column below it
  (exactly a guessed sequence up to its own position) and the target's argmax there becomes the guess one
  position further, the next level. A column read bottom to top plus that new guess is an N-gram of consecutive
  positions: it goes into the **pool**, keyed by its first token. Then the oldest level is dropped (the window
  slides by one position per pass, as in the paper, whatever was accepted).
- **verification branch**: up to G pool n-grams whose key is x, each a chain of N-1 candidate tokens after x.
  The target judges them in the same forward; the longest accepted prefix is kept (greedy), or, when sampling,
  the one candidate chosen before the forward is verified as a deterministic (one-hot) draft by rejection sampling,
  which keeps the target's distribution exactly.

The pool can start from the prompt (``pool_from_prompt``, on by default, as the reference implementation's
``POOL_FROM_PROMPT`` option): every N-gram of the prompt goes in before the first pass, so from the first pass on
the verification branch can copy material the prompt holds (documents to summarise or quote), while the window's
own n-grams take over as they come.

Both branches are one tree under x (:class:`~specviz.core.drafting.LookaheadPlan`): a window node's parent is the
node below it in its column (level 0: the node to its left), so the engine's tree attention mask and positions
(:mod:`specviz.core.tree`) are the paper's lookahead mask; candidates are chains from x. Only candidate nodes are
verified and only the accepted candidate tokens stay in the target's cache.

Costs: a forward reads 1 + W(N-1) + G(N-1) tokens; on a GPU that is nearly free, on a small CPU it is not, and the
speedup is tokens per pass over that pass cost.
"""

from __future__ import annotations

import random
from collections import OrderedDict

from specviz.core.drafting import Draft, DraftContext, DrafterBase, LookaheadPlan

# the defaults: the setting that decoded fastest (median over one prompt per category of the shared suite, greedy, 32
# tokens) in a small sweep on a 2-core CPU, W in {3, 5}, N in {3, 4}, G in {2, 4} (docs/performance.md,
# scripts/lookahead_sweep.py): tokens per pass barely moved (1.21-1.25), so the cheapest forward (11 tokens) won
DEFAULT_WINDOW = 3
DEFAULT_NGRAM = 3
DEFAULT_CANDIDATES = 2
POOL_PER_KEY = 8  # n-grams kept per first token (the most recent first)


def forward_tokens(window: int, ngram: int, candidates: int) -> int:
    """Tokens one full lookahead pass feeds the target: the last committed token, the window's W(N-1) guesses and
    G candidates of N-1 tokens, 1 + W(N-1) + G(N-1) (fewer while the window fills or the pool has fewer
    candidates; one candidate when sampling)."""
    return 1 + (window + candidates) * (ngram - 1)


class LookaheadDrafter(DrafterBase):
    """Lookahead decoding's two branches (see the module docstring).

    Args:
        window: W, the window's columns (>= 1).
        ngram: N, the n-gram size (>= 2): N-1 levels, candidates of N-1 tokens.
        candidates: G, most pool n-grams verified per pass (>= 1; one when sampling).
        seed: seeds the window's first guesses (tokens drawn from the prompt).
        pool_from_prompt: put the prompt's N-grams into the pool at the start of each run.

    Raises:
        ValueError: a size out of range.
    """

    needs_hidden = False
    cache_len = None

    def __init__(self, window: int = DEFAULT_WINDOW, ngram: int = DEFAULT_NGRAM, candidates: int = DEFAULT_CANDIDATES,
                 seed: int = 0, pool_from_prompt: bool = True) -> None:
        if window < 1 or ngram < 2 or candidates < 1:
            raise ValueError(f"lookahead needs window >= 1, n-gram size >= 2 and candidates >= 1; got W={window}, "
                             f"N={ngram}, G={candidates}")
        self.window, self.ngram, self.candidates, self.seed = window, ngram, candidates, seed
        self.pool_from_prompt = pool_from_prompt
        self.name = f"lookahead (W={window}, N={ngram}, G={candidates})"
        self.reset([])

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a run: a pool holding the prompt's N-grams (empty without ``pool_from_prompt``); level 0 of the
        window guesses tokens drawn from the prompt."""
        rng = random.Random(self.seed)
        source = list(prompt_ids) or [0]
        self.levels: list[list[int]] = [[rng.choice(source) for _ in range(self.window)]]
        self.pool: dict[int, OrderedDict[tuple[int, ...], None]] = {}
        if self.pool_from_prompt:
            ids = [int(t) for t in prompt_ids]
            for start in range(len(ids) - self.ngram + 1):  # in prompt order: the latest occurrence is the most recent
                self._remember(tuple(ids[start:start + self.ngram]))
        self._plan: LookaheadPlan | None = None

    @property
    def fixed_k(self) -> int:
        """The draft length of every pass: the candidates' length N-1 (the engine uses it whatever k it is given)."""
        return self.ngram - 1

    @property
    def warmup_passes(self) -> int:
        """Passes before the window gives n-grams: it needs N-1 levels before its columns do (until then only the
        prompt's n-grams can be candidates, and the passes are smaller than a full one), so k = auto's gate (:class:`~specviz.core.draft_length.GateK`) leaves these passes out of its means
        (unless one carried a candidate from the seeded pool: that one counts and ends the warm-up)."""
        return self.ngram - 1

    @property
    def pool_size(self) -> int:
        """N-grams in the pool."""
        return sum(len(grams) for grams in self.pool.values())

    @property
    def waits_for_candidates(self) -> bool:
        """Whether k = auto's gate may hold the first pass until the pool has a candidate: only a pool seeded from
        the prompt can have one before the window has run."""
        return self.pool_from_prompt

    def has_candidates(self, committed_ids: list[int]) -> bool:
        """Whether the pool holds an n-gram keyed by the last committed token (what a pass could accept).

        Args:
            committed_ids: the prompt and the output so far (ids; the last one is the key).
        """
        return bool(committed_ids) and bool(self.pool.get(int(committed_ids[-1])))

    def propose(self, ctx: DraftContext) -> Draft:
        """The pass's tree: the window (every level) and the pool's candidates for the last committed token, each
        cut to ``ctx.k`` tokens (one candidate, the most recent, when sampling)."""
        tokens, parents = [], []
        window_nodes = []
        for level, guesses in enumerate(self.levels):
            nodes = []
            for column, token in enumerate(guesses):
                below = window_nodes[level - 1][column] if level else (nodes[-1] if nodes else -1)
                nodes.append(len(tokens))
                tokens.append(int(token))
                parents.append(below)
            window_nodes.append(tuple(nodes))
        chains = []
        for gram in self._candidates(ctx):
            chain = []
            for token in gram[: ctx.k]:
                parents.append(chain[-1] if chain else -1)
                chain.append(len(tokens))
                tokens.append(int(token))
            chains.append(tuple(chain))
        self._plan = LookaheadPlan(tuple(window_nodes), tuple(chains), self.pool_size)
        return Draft(tokens, [1.0] * len(tokens), None, parents, "pool", self._plan)

    def _candidates(self, ctx: DraftContext) -> list[tuple[int, ...]]:
        grams = list(reversed(self.pool.get(ctx.committed_ids[-1], {})))  # the most recent first
        limit = 1 if not ctx.sampling.greedy else self.candidates
        return [g for g in grams if all(ctx.vocab_size is None or t < ctx.vocab_size for t in g)][:limit]

    def advance(self, new_level: list[int]) -> int:
        """Take the Jacobi step's outputs (the target's argmax at each top-level node, W ids): collect the
        window's n-grams into the pool and slide the window by one level. Returns the number of new n-grams."""
        added = 0
        if len(self.levels) == self.ngram - 1:
            for column in range(self.window):
                gram = tuple(level[column] for level in self.levels) + (int(new_level[column]),)
                added += self._remember(gram)
            self.levels = self.levels[1:]
        self.levels.append([int(t) for t in new_level])
        return added

    def _remember(self, gram: tuple[int, ...]) -> int:
        grams = self.pool.setdefault(gram[0], OrderedDict())
        known = gram[1:] in grams
        grams.pop(gram[1:], None)
        grams[gram[1:]] = None  # the most recent last
        while len(grams) > POOL_PER_KEY:
            grams.popitem(last=False)
        return 0 if known else 1

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Nothing to roll back: the window slides in :meth:`advance`."""
