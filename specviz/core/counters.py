"""The counts of committed work of a run (or many) and the figures derived from them. Every figure carries its
definition.

Counters count committed work: drafts the verifier accepted after the run's end (EOS, a stop string or the budget
inside a pass) count neither as drafted nor as accepted (:attr:`PassEvent.counted_drafted`,
:attr:`PassEvent.committed_accepted`). A tree pass counts every node it verified as drafted, and its accepted path
as accepted.

- acceptance rate = accepted / drafted, in [0, 1]; the bonus token is not a draft, so it is excluded (a tree:
  accepted path tokens / nodes verified).
- tokens per pass (tau, mean accepted length) = emitted tokens / target passes, bonus included, in
  [1, k+1]; the prefill and its token are not counted (they are reported as time to first token).
- per-token acceptance alpha = accepted / (accepted + rejections): only positions the target judged count
  (tokens after a pass's first rejection were never judged).
- per-position acceptance i = P(draft token i accepted | tokens < i accepted), i = 1..k (conditional); the
  unconditional share accepted-at-position-i / passes is what vLLM exports (:attr:`RunStats.per_position_share`).
- expected tokens per pass E[tau] = (1 - alpha^(m+1)) / (1 - alpha), with m the mean length of the chain a pass
  offered the target (m+1 when alpha = 1; :attr:`Counters.chained`: a chain's drafted tokens, a tree's depth,
  lookahead's kept candidate, since a pass can accept at most one chain) — Leviathan et al. 2023, eq. (1)
  (:func:`specviz.core.costs.expected_tokens_per_pass`, the one formula; the cost model and the predicted speedups
  are in :mod:`specviz.core.costs` too).
- the running figures a chart draws (:class:`RunStats` ``running_*``) are these properties after each pass: a
  chart's last point is the card's figure.
- speedup = speculative tokens/s over baseline tokens/s, both on their own clocks; the decoding speedup leaves
  the prefill out (:func:`speedup`, :func:`decode_speedup`).

The statistics of a run's timings (a figure's bootstrap interval over the passes, the verdict on a speedup) and a
run's per-pass series (:class:`~specviz.measure.run_stats.RunStats`) are in :mod:`specviz.measure`: the core counts
committed work; what its timings may be read as is measured above it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.costs import expected_tokens_per_pass
from specviz.core.events import PassEvent


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _add_lists(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    return tuple((a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n))


@dataclass
class Counters:
    """The additive counts of one run or many (prompts, repeats): ``a + b`` merges them, and every figure is
    derived from the counts, so a pooled figure is the ratio of sums, never a mean of ratios. Times in ms on the
    runs' own clocks.

    Attributes:
        runs: runs counted.
        passes: target passes after the prefill; ``emitted``: tokens those passes emitted (bonus included);
            ``generated``: every output token (the prefill's included).
        drafted / accepted / rejections: committed work (see the module docstring); a tree pass counts its
            verified nodes as drafted (``tree_passes``, ``tree_nodes``); a lookahead pass its candidates' tokens
            (its window's tokens, not verified, in ``window_tokens``).
        chained: per pass, the tokens of the longest chain it could accept (:func:`chain_tokens`), summed: m of
            the expected tokens per pass; left out (None), the drafted count (a chain drafter's).
        prefill_ms: time to first token; draft_ms / verify_ms / other_ms: the passes' split of their time.
        position_tried / position_accepted: per drafted position i (index i-1): passes that judged it (drafted it
            with positions before it accepted) and passes that accepted it.
        position_reached: per position i: passes that *asked* for at least i tokens with positions before it
            accepted (a position the drafter did not fill counts as reached and not accepted: the what-if of k).
    """

    runs: int = 0
    passes: int = 0
    emitted: int = 0
    generated: int = 0
    drafted: int = 0
    accepted: int = 0
    rejections: int = 0
    tree_passes: int = 0
    tree_nodes: int = 0
    window_tokens: int = 0
    chained: int | None = None  # None: the drafted count (counters made by hand, for chain drafters)
    prefill_ms: float = 0.0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    other_ms: float = 0.0
    position_tried: tuple[int, ...] = ()
    position_accepted: tuple[int, ...] = ()
    position_reached: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.chained is None:
            self.chained = self.drafted

    def __add__(self, other: Counters) -> Counters:
        sums = {name: getattr(self, name) + getattr(other, name) for name in _SCALARS}
        lists = {name: _add_lists(getattr(self, name), getattr(other, name)) for name in _LISTS}
        return Counters(**sums, **lists)

    @classmethod
    def of(cls, events) -> Counters:
        """The counters of one run's events."""
        counters = cls()
        for event in events:
            counters.add(event)
        return counters

    def add(self, event: PassEvent) -> None:
        """Fold one event in (the prefill starts a run)."""
        if event.kind == "prefill":
            self.runs += 1
            self.generated += len(event.emitted_ids)
            self.prefill_ms += event.timings.total_ms
            return
        accepted, rejections = event.committed_accepted, event.num_rejections
        self.passes += 1
        self.emitted += len(event.emitted_ids)
        self.generated += len(event.emitted_ids)
        self.drafted += event.counted_drafted
        self.chained += chain_tokens(event)
        self.accepted += accepted
        self.rejections += rejections
        if event.tree is not None:
            self.tree_passes += 1
            self.tree_nodes += event.tree.num_nodes
        if event.lookahead is not None:
            self.window_tokens += event.lookahead.window_tokens
        self.draft_ms += event.timings.draft_ms
        self.verify_ms += event.timings.verify_ms
        self.other_ms += event.timings.other_ms
        shown = accepted if event.cut_in_drafts else event.num_drafted
        asked = accepted if event.cut_in_drafts else event.k
        tried = [1 if i < accepted + rejections else 0 for i in range(shown)]
        self.position_tried = _add_lists(self.position_tried, tuple(tried))
        self.position_accepted = _add_lists(self.position_accepted, tuple(1 if i < accepted else 0
                                                                            for i in range(shown)))
        self.position_reached = _add_lists(self.position_reached, tuple(1 if i <= accepted else 0
                                                                          for i in range(asked)))

    # ---------------------------------------------------------------------------------------- derived figures
    @property
    def elapsed_ms(self) -> float:
        """Own-clock time of the runs, prefill included (ms)."""
        return self.prefill_ms + self.draft_ms + self.verify_ms + self.other_ms

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / drafted in [0, 1]; None when nothing was drafted (standard decoding)."""
        return _ratio(self.accepted, self.drafted)

    @property
    def alpha(self) -> float | None:
        """Per-token acceptance accepted / (accepted + rejections); None when nothing was judged."""
        return _ratio(self.accepted, self.accepted + self.rejections)

    @property
    def tokens_per_pass(self) -> float | None:
        """Emitted tokens / target passes (bonus included, prefill excluded); None before the first pass."""
        return _ratio(self.emitted, self.passes)

    @property
    def mean_proposed(self) -> float:
        """Mean number of tokens drafted per pass (m)."""
        return self.drafted / self.passes if self.passes else 0.0

    @property
    def mean_chain(self) -> float:
        """m: the mean length of the chain a pass offered (:attr:`chained` / passes); equal to
        :attr:`mean_proposed` for chain drafters, below it for trees and lookahead's several candidates."""
        return self.chained / self.passes if self.passes else 0.0

    @property
    def expected_tokens_per_pass(self) -> float | None:
        """(1 - alpha^(m+1)) / (1 - alpha) with m = :attr:`mean_chain`, in [1, m + 1]; None without alpha."""
        a = self.alpha
        return None if a is None else expected_tokens_per_pass(a, self.mean_chain)

    @property
    def per_position_acceptance(self) -> list[float]:
        """P(draft token i accepted | tokens before i accepted) for i = 1..max drafted (0.0 where never judged)."""
        return [a / t if t else 0.0 for a, t in zip(self.position_accepted, self.position_tried)]

    @property
    def per_position_share(self) -> list[float]:
        """Accepted at position i / target passes, i = 1..max drafted (unconditional; vLLM's per-position figure)."""
        return [a / self.passes for a in self.position_accepted] if self.passes else []

    @property
    def per_position_reached(self) -> list[float]:
        """Accepted at position i / passes that asked for i with the positions before it accepted (an unfilled
        position counts as not accepted): the rates a_i of the what-if of k (:func:`expected_tokens`)."""
        accepted = list(self.position_accepted) + [0] * max(0, len(self.position_reached) - len(self.position_accepted))
        return [a / r if r else 0.0 for a, r in zip(accepted, self.position_reached)]

    @property
    def mean_nodes_per_tree(self) -> float | None:
        """Nodes verified per tree pass (None without tree passes)."""
        return _ratio(self.tree_nodes, self.tree_passes)

    @property
    def tokens_per_s(self) -> float | None:
        """Generated tokens / elapsed seconds (prefill included), on the runs' own clocks."""
        return _ratio(self.generated * 1000.0, self.elapsed_ms)

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first / time after the prefill (tokens/s): the steady decoding rate."""
        return _ratio(self.emitted * 1000.0, self.elapsed_ms - self.prefill_ms)

    @property
    def forward_ms(self) -> float | None:
        """Mean target forward per pass (ms): for standard decoding, one step's forward T_step."""
        return _ratio(self.verify_ms, self.passes)

    @property
    def draft_ms_per_pass(self) -> float | None:
        """Mean drafting time per pass (ms)."""
        return _ratio(self.draft_ms, self.passes)

    def as_dict(self) -> dict:
        """The figures as plain JSON-able values."""
        return {
            "target_passes": self.passes,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance_rate": self.acceptance_rate,
            "alpha": self.alpha,
            "tokens_per_pass": self.tokens_per_pass,
            "expected_tokens_per_pass": self.expected_tokens_per_pass,
            "per_position_acceptance": self.per_position_acceptance,
            "per_position_share": self.per_position_share,
            "tree_passes": self.tree_passes,
            "tree_nodes_verified": self.tree_nodes,
            "lookahead_window_tokens": self.window_tokens,
            "ttft_ms": self.prefill_ms,
            "draft_ms": self.draft_ms,
            "verify_ms": self.verify_ms,
            "other_ms": self.other_ms,
            "tokens_per_s": self.tokens_per_s,
        }


def chain_tokens(event: PassEvent) -> int:
    """The length of the longest chain a pass offered its target, the most it could accept from its drafts
    (tokens): a tree pass's depth (its deepest node's ancestors, itself included), a lookahead pass's kept candidate
    (N-1 tokens; 0 without candidates), else the counted drafted tokens. A pass cut inside its drafts (the run's
    end) counts its committed ones, as :attr:`PassEvent.counted_drafted` does."""
    if event.cut_in_drafts:
        return event.counted_drafted
    if event.tree is not None:
        depth: list[int] = []
        for parent in event.tree.parents:  # topologically ordered: a parent comes before its children
            depth.append(1 + (depth[parent] if parent >= 0 else 0))
        return max(depth, default=0)
    if event.lookahead is not None:
        record = event.lookahead
        return len(record.candidates[record.winner]) if record.winner is not None else 0
    return event.counted_drafted


_SCALARS = ("runs", "passes", "emitted", "generated", "drafted", "chained", "accepted", "rejections",
            "tree_passes", "tree_nodes", "window_tokens", "prefill_ms", "draft_ms", "verify_ms", "other_ms")
_LISTS = ("position_tried", "position_accepted", "position_reached")


def speedup(spec: Counters, base: Counters) -> float | None:
    """Speculative tokens/s over baseline tokens/s (same target and settings), prefill included.

    None if either is unknown, or if the speculative run made no target pass after its prefill (a one-token
    run has nothing to speed up; its ratio would only compare two prefills)."""
    a, b = spec.tokens_per_s, base.tokens_per_s
    return a / b if a and b and spec.passes > 0 else None


def decode_speedup(spec: Counters, base: Counters) -> float | None:
    """Speculative over baseline decoding rate (tokens after the first / time after the prefill)."""
    a, b = spec.decode_tokens_per_s, base.decode_tokens_per_s
    return a / b if a and b and spec.passes > 0 else None
