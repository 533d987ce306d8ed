"""Exactness against standard decoding: where a greedy speculative run's ids first differ from the standard baseline's
of the same target copy, and why that can happen (issue 36).

Greedy speculative decoding emits exactly the baseline's ids when the target's verification (k+1 tokens in one
forward) computes each row as the one-token step does. On the CPU in float32, and on CUDA in float32 with TF32 off
(:func:`specviz.runtime.models.exact_float32_on_cuda`), it does for the engine's forwards. In bfloat16 and float16 a
(k+1)-token forward and a one-token step run different kernels (other tilings, other reduction orders), so their
logits differ in the last bits and, where the baseline's top two logits are nearly tied, the argmax can flip: the
output is then still the target's greedy text of *some* rounding, but not identical to the baseline's. Nothing hides
that: every record carries the first divergence (the output position, 0 = the token the prefill emitted) and the
baseline's top-2 logit gap there (:attr:`specviz.core.events.PassEvent.near_tie_gap`), and the text says it plainly.
One source for the CLI (``generate --compare``, ``bench``), ``scripts/gpu_check.py`` and ``scripts/gpu_bench.py``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

LOW_PRECISION = ("bfloat16", "float16")


def first_divergence(a: Iterable[int], b: Iterable[int]) -> int | None:
    """The first output position where two id sequences differ (a length difference counts: the shorter one's
    length), or None when they are equal."""
    a, b = list(a), list(b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def divergence_reason(dtype: str) -> str:
    """Why greedy ids can differ from standard decoding in ``dtype`` ("float32", "bfloat16", "float16")."""
    if dtype in LOW_PRECISION:
        return f"{dtype}: verification and step run different kernels"
    return f"{dtype}: not expected (verification rows compute as one-token steps do); please report it"


def compare_ids(baseline_ids: Sequence[int], baseline_gaps: Sequence[float | None], ids: Sequence[int],
                dtype: str) -> dict:
    """The exactness record of a greedy run's ``ids`` against the standard baseline of the same target copy.

    Args:
        baseline_ids: the baseline's output ids.
        baseline_gaps: the baseline's top-2 logit gap per output token (position i: the step that emitted token i;
            shorter or empty when unknown).
        ids: the speculative run's output ids.
        dtype: the target's dtype name.

    Returns:
        {"ids_identical_to_standard": bool, "first_divergence": int | None (output position), "top2_gap": the
        baseline's top-2 logit gap there (None when identical or unknown), "matching_prefix": tokens equal before
        it, "dtype": dtype, "reason": :func:`divergence_reason` or None when identical}.
    """
    where = first_divergence(baseline_ids, ids)
    gap = baseline_gaps[where] if where is not None and where < len(baseline_gaps) else None
    return {"ids_identical_to_standard": where is None, "first_divergence": where,
            "top2_gap": None if gap is None else float(gap),
            "matching_prefix": len(baseline_ids) if where is None else where, "dtype": dtype,
            "reason": None if where is None else divergence_reason(dtype)}


def divergence_line(record: dict) -> str:
    """One sentence for a :func:`compare_ids` record: "identical ids to standard decoding", or e.g. "ids differ from
    standard decoding at token 11 (top-2 gap 0.25, bfloat16: verification and step run different kernels)"."""
    if record["ids_identical_to_standard"]:
        return "identical ids to standard decoding"
    gap = "unknown" if record.get("top2_gap") is None else f"{record['top2_gap']:.4g}"
    return (f"ids differ from standard decoding at token {record['first_divergence']} (top-2 gap {gap}, "
            f"{record['reason']})")
