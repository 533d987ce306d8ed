"""The cost model of a pass, written once: what a pass yields (expected tokens), what it costs (ms), and the speedup
predicted from the two. :class:`~specviz.core.draft_length.AutoK`, the what-if of k
(:mod:`specviz.analysis.whatif`), the Arena's and the Why tab's curves (:func:`specviz.measure.costs.whatif_curves`)
and the live cards all read these functions; :mod:`specviz.measure.costs` reads measured curves through them.

- expected tokens per pass from the per-token acceptance alpha: E[tau] = (1 - alpha^(k+1)) / (1 - alpha)
  (Leviathan et al. 2023, eq. 1); from per-position rates a_i: 1 + sum_{j<=k} prod_{i<=j} a_i.
- T_verify(k) (``verify_ms(k)`` everywhere): the target forward of a pass that verifies k drafted tokens, ms. That
  forward reads k + 1 tokens (the last committed one and the k drafts); T_verify(0) is a one-token step's forward.
  Forward grids keyed by the number of tokens n a forward reads (the Why tab's T(n)) read T_verify(k) = T(k + 1).
- T_pass(k) = T_verify(k) + k * T_draft + T_other (T_draft per drafted token, T_other per pass: acceptance,
  rollback, detokenizing).
- predicted speedup = E[tau] * T_step / T_pass(k); the paper's (Thm 3.8) is the same with T_verify = T_step and
  T_draft = c * T_step: E[tau] / (c k + 1).
- every measured curve (ms against a token count) is read by one piecewise-linear :func:`interpolate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Sequence


def interpolate(points: Mapping[float, float] | Iterable[tuple[float, float]], x: float, *,
                lone_slope: float = 0.0) -> float:
    """A measured cost curve read at ``x``: piecewise-linear between the measured points, the exact value at a
    measured point; outside them the nearest segment's slope continues, floored at 0 (a forward over more tokens
    never costs less than one over fewer: a falling end segment is noise, read flat).

    Args:
        points: (x, y) pairs, e.g. tokens -> ms, as a mapping or pairs in any order (one y per x).
        x: where to read the curve.
        lone_slope: the slope used when a single point is known (0.0: flat).

    Returns:
        y at ``x`` (same unit as the points' y).

    Raises:
        ValueError: no point given.
    """
    pts = sorted(points.items() if isinstance(points, Mapping) else points)
    if not pts:
        raise ValueError("a cost curve needs at least one measured point")
    if len(pts) == 1:
        return pts[0][1] + lone_slope * (x - pts[0][0])
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x == x0:
            return y0
        if x == x1:
            return y1
        if x0 < x < x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    below = x < pts[0][0]
    (x0, y0), (x1, y1) = pts[:2] if below else pts[-2:]
    slope = max(0.0, (y1 - y0) / (x1 - x0))
    return y0 + slope * (x - x0) if below else y1 + slope * (x - x1)


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


def expected_tokens(rates: Sequence[float], k: int) -> float:
    """E[tokens per pass](k) = 1 + sum_{j=1..k} prod_{i<=j} a_i.

    Args:
        rates: per-position acceptance a_1..a_K, each in [0, 1].
        k: draft length, 0..K (0 is standard decoding: 1 token per pass).

    Raises:
        ValueError: k outside 0..len(rates), or a rate outside [0, 1].
    """
    if not 0 <= k <= len(rates):
        raise ValueError(f"k must be in 0..{len(rates)}, got {k}")
    total, survive = 1.0, 1.0
    for a in rates[:k]:
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"acceptance rates must be in [0, 1], got {a}")
        survive *= a
        total += survive
    return total


def pass_ms(verify_ms: float, k: float, draft_ms_per_token: float, other_ms: float = 0.0) -> float:
    """T_pass(k) = T_verify(k) + k * T_draft + T_other, ms: a speculative pass at draft length k, from its target
    forward ``verify_ms`` (T_verify(k)), the drafter's ms per drafted token and the pass's other ms."""
    return verify_ms + k * draft_ms_per_token + other_ms


def predicted_speedup(expected: float, step_ms: float, pass_ms: float) -> float:
    """E[tau] * T_step / T_pass: tokens per pass over the cost of a pass counted in standard steps.

    Raises:
        ValueError: ``pass_ms`` <= 0.
    """
    if pass_ms <= 0:
        raise ValueError(f"a pass must take some time, got {pass_ms} ms")
    return expected * step_ms / pass_ms


def predicted_speedup_paper(alpha: float, k: float, c: float) -> float:
    """Leviathan et al. 2023, Thm 3.8: E[tau] / (c k + 1); assumes a verification costs one target step.

    ``c`` is the draft's cost per token over one target step (dimensionless): :func:`predicted_speedup` with
    T_step = 1, T_pass = T_verify + k c = 1 + c k.
    """
    return predicted_speedup(expected_tokens_per_pass(alpha, k), 1.0, pass_ms(1.0, k, c))


def predicted_speedup_measured(alpha: float, k: float, t_step_ms: float, t_verify_ms: float, t_draft_ms: float) -> float:
    """E[tau] x T_step / (T_verify(k) + T_draft(k)), with measured times in ms per pass (``t_draft_ms``: the pass's
    whole drafting); NaN when the pass costs nothing."""
    denom = t_verify_ms + t_draft_ms
    return predicted_speedup(expected_tokens_per_pass(alpha, k), t_step_ms, denom) if denom > 0 else float("nan")


@dataclass(frozen=True)
class Costs:
    """Measured costs in ms.

    Attributes:
        step_ms: the baseline's time per generated token (forward + bookkeeping): the cost of one standard step.
        step_forward_ms: the baseline's one-token forward alone: T_verify(0), the anchor of the verify curve.
        draft_ms_per_token: the drafter's time per drafted token.
        verify_points: (m drafted tokens, median verify ms) measured points, m >= 1, sorted by m.
        pass_overhead_ms: a speculative pass's time outside draft and verify (acceptance, rollback, detokenizing).
        prefill_ms: the prefill (time to first token); only :func:`end_to_end_speedup` uses it.
    """

    step_ms: float
    step_forward_ms: float
    draft_ms_per_token: float
    verify_points: tuple[tuple[int, float], ...]
    pass_overhead_ms: float = 0.0
    prefill_ms: float = 0.0

    @classmethod
    def from_forward_curve(cls, curve: Mapping[int, float], draft_cost: float = 0.0) -> Costs:
        """Costs from a forward grid (n tokens read -> ms, batch 1): T_step = T_verify(0) = T(1) (read by
        :func:`interpolate` when n = 1 was not timed), T_verify(k) = T(k + 1), T_draft = ``draft_cost`` x T(1), no
        overhead. Raises ValueError for an empty curve."""
        step = interpolate(curve, 1)
        points = tuple((n - 1, ms) for n, ms in sorted(curve.items()) if n > 1)
        return cls(step_ms=step, step_forward_ms=step, draft_ms_per_token=draft_cost * step, verify_points=points)

    def verify_ms(self, k: float) -> float:
        """T_verify(k), ms: the target forward of a pass verifying ``k`` drafted tokens (a forward over k + 1
        tokens); :func:`interpolate` through (0, step_forward_ms) and :attr:`verify_points`: past the last point the
        last segment's slope continues (never below the last point)."""
        return interpolate([(0.0, self.step_forward_ms)] + [(float(m), ms) for m, ms in self.verify_points if m > 0], k)

    def pass_ms(self, k: float) -> float:
        """A speculative pass at draft length k (ms): :func:`pass_ms` of T_verify(k), T_draft and T_other."""
        return pass_ms(self.verify_ms(k), k, self.draft_ms_per_token, self.pass_overhead_ms)

    def speedup(self, expected: float, k: float) -> float:
        """:func:`predicted_speedup` of ``expected`` tokens per pass at draft length ``k`` with these costs."""
        return predicted_speedup(expected, self.step_ms, self.pass_ms(k))


def end_to_end_speedup(expected: float, costs: Costs, k: int, tokens: int) -> float:
    """The tokens/s ratio of whole runs of ``tokens`` tokens, prefill included (both runs pay the same prefill):
    (T_prefill + (N-1) T_step) / (T_prefill + (N-1) / E[tau] * T_pass(k))."""
    rest = max(tokens - 1, 0)
    base = costs.prefill_ms + rest * costs.step_ms
    spec = costs.prefill_ms + rest / expected * costs.pass_ms(k)
    return base / spec if spec > 0 else float("nan")


# ------------------------------------------------------------------------------- a format's measured verify curve

def set_verify_curve(model, curve: Mapping[int, float] | None) -> None:
    """Give ``model`` (a target's torch module) the verify curve measured for it, {n tokens read: T(n) / T(1)}
    (start-up tuning per weight format: :func:`specviz.measure.tuning.tune_weights`), which k = auto reads as its
    prior (:func:`verify_curve_of`); None removes it. The curve belongs to this module object only: a copy of it
    (another weight format made from it) does not inherit it."""
    model._specviz_verify_curve = None if curve is None else (id(model), {int(n): float(r) for n, r in curve.items()})


def with_verify_curve(known: Mapping[int, float], curve: Mapping[int, float] | None) -> dict[int, float]:
    """A run's measured forward times ``known`` ({n tokens read: ms}) with the sizes it has not measured filled from
    a measured verify ``curve`` ({n: T(n) / T(1)}), scaled to the run: by its own T(1) when it has one, else by the
    median of known ms / curve ratio over the sizes both hold. Sizes the run measured keep their own times. Returns
    ``known`` as a new dict when ``curve`` is None or shares no size with it (no scale can be read)."""
    points = dict(known)
    if not curve or not points:
        return points
    if 1 in points:
        scale = points[1]
    else:
        shared = [points[n] / curve[n] for n in points if n in curve and curve[n] > 0]
        if not shared:
            return points
        scale = sorted(shared)[len(shared) // 2]
    for n, ratio in curve.items():
        points.setdefault(int(n), scale * float(ratio))
    return points


def verify_curve_of(model) -> dict[int, float] | None:
    """The verify curve set on ``model`` by :func:`set_verify_curve` ({n: T(n) / T(1)}), None when none was set
    on this very module object."""
    held = getattr(model, "_specviz_verify_curve", None)
    if not held or held[0] != id(model):
        return None
    return dict(held[1])
