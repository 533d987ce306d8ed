"""Running statistics of a run, computed from its events. Every figure carries its definition.

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
- expected tokens per pass E[tau] = (1 - alpha^(m+1)) / (1 - alpha), with m the mean proposed length
  (k+1 when alpha = 1) — Leviathan et al. 2023, eq. (1).
- speedup = speculative tokens/s over baseline tokens/s, both on their own clocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specviz.events import PassEvent


def expected_tokens_per_pass(alpha: float, k: float) -> float:
    """E[tokens per pass] = (1 - alpha^(k+1)) / (1 - alpha) for per-token acceptance alpha and draft length k.

    Args:
        alpha: per-token acceptance in [0, 1].
        k: draft length (may be fractional: the mean proposed length).

    Returns:
        Expected tokens per pass, in [1, k+1] (k+1 when alpha == 1).

    Raises:
        ValueError: if alpha is outside [0, 1] or k < 0.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1.0)) / (1.0 - alpha)


def predicted_speedup_paper(alpha: float, k: float, c: float) -> float:
    """Leviathan et al. 2023, Thm 3.8: E[tau] / (c k + 1); assumes a verification costs one target step.

    ``c`` is the draft's cost per token over one target step (dimensionless).
    """
    return expected_tokens_per_pass(alpha, k) / (c * k + 1.0)


def predicted_speedup_measured(alpha: float, k: float, t_step_ms: float, t_verify_ms: float, t_draft_ms: float) -> float:
    """E[tau] x T_step / (T_verify(k) + T_draft(k)), with measured times in ms per pass."""
    denom = t_verify_ms + t_draft_ms
    return expected_tokens_per_pass(alpha, k) * t_step_ms / denom if denom > 0 else float("nan")


@dataclass
class RunStats:
    """Accumulates one run's events (call :meth:`add` for each). All times are ms on the run's own clock."""

    run: str = ""
    passes: int = 0
    drafted: int = 0
    accepted: int = 0
    rejections: int = 0
    emitted_after_prefill: int = 0
    generated: int = 0
    ttft_ms: float = 0.0
    elapsed_ms: float = 0.0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    other_ms: float = 0.0
    max_k: int = 0
    tree_passes: int = 0
    tree_nodes: int = 0
    position_tried: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    # per-event series for charts: (pass index, value)
    pass_acceptance: list[float | None] = field(default_factory=list)
    pass_tokens: list[int] = field(default_factory=list)
    pass_k: list[int] = field(default_factory=list)
    pass_drafted: list[int] = field(default_factory=list)
    pass_accepted: list[int] = field(default_factory=list)
    curve_ms: list[float] = field(default_factory=list)
    curve_tokens: list[int] = field(default_factory=list)

    def add(self, event: PassEvent) -> None:
        """Fold one event into the statistics."""
        self.run = event.run
        self.generated = event.num_generated
        self.elapsed_ms = event.t_end_ms
        self.curve_ms.append(event.t_end_ms)
        self.curve_tokens.append(event.num_generated)
        self.finish_reason = event.finish_reason or self.finish_reason
        if event.kind == "prefill":
            self.ttft_ms = event.t_end_ms
            return
        self.passes += 1
        accepted, rejections = event.committed_accepted, event.num_rejections
        self.drafted += event.counted_drafted
        self.accepted += accepted
        self.rejections += rejections
        if event.tree is not None:
            self.tree_passes += 1
            self.tree_nodes += event.tree.num_nodes
        self.emitted_after_prefill += len(event.emitted_ids)
        self.draft_ms += event.timings.draft_ms
        self.verify_ms += event.timings.verify_ms
        self.other_ms += event.timings.other_ms
        self.max_k = max(self.max_k, event.k)
        judged = accepted + rejections  # positions whose verdict entered the output
        shown = accepted if event.cut_in_drafts else event.num_drafted
        while len(self.position_tried) < shown:
            self.position_tried.append(0)
            self.position_accepted.append(0)
        for i in range(judged):
            self.position_tried[i] += 1
            self.position_accepted[i] += 1 if i < accepted else 0
        drafted = event.counted_drafted
        self.pass_acceptance.append(accepted / drafted if drafted else None)
        self.pass_tokens.append(len(event.emitted_ids))
        self.pass_k.append(event.k)
        self.pass_drafted.append(drafted)
        self.pass_accepted.append(accepted)

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / drafted in [0, 1]; None when nothing was drafted (standard decoding)."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def alpha(self) -> float | None:
        """Per-token acceptance accepted / (accepted + rejections); None when nothing was judged."""
        judged = self.accepted + self.rejections
        return self.accepted / judged if judged else None

    @property
    def tokens_per_pass(self) -> float | None:
        """Emitted tokens / target passes (bonus included, prefill excluded); None before the first pass."""
        return self.emitted_after_prefill / self.passes if self.passes else None

    @property
    def mean_proposed(self) -> float:
        """Mean number of tokens drafted per pass."""
        return self.drafted / self.passes if self.passes else 0.0

    @property
    def expected_tokens_per_pass(self) -> float | None:
        """(1 - alpha^(m+1)) / (1 - alpha) with m the mean proposed length; None without alpha."""
        a = self.alpha
        return None if a is None else expected_tokens_per_pass(a, self.mean_proposed)

    @property
    def per_position_acceptance(self) -> list[float]:
        """P(draft token i accepted | tokens before i accepted) for i = 1..max drafted."""
        return [a / t if t else 0.0 for a, t in zip(self.position_accepted, self.position_tried)]

    @property
    def per_position_share(self) -> list[float]:
        """Accepted at position i / target passes, i = 1..max judged (unconditional; vLLM's per-position figure)."""
        return [a / self.passes for a in self.position_accepted] if self.passes else []

    @property
    def mean_nodes_per_tree(self) -> float | None:
        """Nodes verified per tree pass (None without tree passes)."""
        return self.tree_nodes / self.tree_passes if self.tree_passes else None

    @property
    def tokens_per_s(self) -> float | None:
        """Generated tokens / elapsed seconds (prefill included), on the run's own clock."""
        return self.generated / (self.elapsed_ms / 1000.0) if self.elapsed_ms > 0 else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first / time after the prefill (tokens/s): the steady decoding rate."""
        t = self.elapsed_ms - self.ttft_ms
        return self.emitted_after_prefill / (t / 1000.0) if t > 0 else None

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
            "ttft_ms": self.ttft_ms,
            "draft_ms": self.draft_ms,
            "verify_ms": self.verify_ms,
            "other_ms": self.other_ms,
            "tokens_per_s": self.tokens_per_s,
        }


def speedup(spec: RunStats, base: RunStats) -> float | None:
    """Speculative tokens/s over baseline tokens/s (same target and settings).

    None if either is unknown, or if the speculative run made no target pass after its prefill (a one-token
    run has nothing to speed up; its ratio would only compare two prefills)."""
    a, b = spec.tokens_per_s, base.tokens_per_s
    return a / b if a and b and spec.passes > 0 else None
