"""The CPU's default weight format chosen by measurement, and each format's verify curve for k = auto (issue 37).

:func:`measure_formats` times the target in every weight format that can run here (float32, bfloat16, int8, int4:
:mod:`specviz.runtime.weights`) after the same cached prompt: forwards of n = :data:`TOKEN_COUNTS` new tokens, every
format and n once per round, their order alternating between rounds (:func:`specviz.measure.weights_kernel`'s
rounds), :data:`WARMUP` warm-up and :data:`ROUNDS` timed rounds. Per format it keeps the median one-token step
(ms), its fastest and slowest round, and the verify curve T(n) / T(1) (median over rounds of the ratio within a
round). On the embedded model this adds a few seconds to the start-up's tuning (:func:`specviz.measure.tuning.tune_weights`
keeps the figures with the other tuning results, so a restart does not measure again).

:func:`choose_default` is the rule: a format replaces float32 only when it is clearly faster, its median step at
least :data:`MARGIN` under float32's *and* its slowest round under float32's median (so a format is not chosen on
noise); among those the lowest median wins. Otherwise float32 stays. Only an *exact* format qualifies: one whose
verification of several tokens gives each row the logits a one-token step gives it (:func:`verify_gap` at most
:data:`EXACT_GAP`), so greedy ids of a speculative run equal standard decoding's. On the project's 2-core VMs int8
and int4 were not (2026-12-05: logits up to 0.25 apart at 2 threads, with the bfloat16 activations their kernels
take; the suite bench in int4 gave ids different from standard decoding on 2 of 14 prompts), so float32 stayed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

import torch

from specviz.runtime.weights import FORMATS, WeightsError, with_weights

TOKEN_COUNTS = (1, 2, 3, 5, 9)  # forward sizes timed per format: the step and the verify curve's shape
ROUNDS = 4
WARMUP = 1
PROMPT_TOKENS = 64
MARGIN = 0.10  # a format replaces float32 only if its median step is at least this share faster
BASE = "float32"
GAP_TOKENS = 5  # the verification :func:`verify_gap` compares with one-token steps
EXACT_GAP = 1e-3  # the largest logit difference taken as exact (float32's own: about 2e-5 on the embedded model)


def choose_default(figures: dict[str, dict]) -> str:
    """The default format from per-format figures ``{fmt: {"step": median ms, "range": [fastest, slowest] ms}}``:
    the fastest format (lowest median) among those whose median is at least :data:`MARGIN` under float32's and
    whose slowest round is under float32's median; float32 when none qualifies or float32 was not measured.

    Formats that are not exact here (:func:`is_exact`) never qualify.

    >>> choose_default({"float32": {"step": 37.4, "range": [36, 39]},
    ...                 "int4": {"step": 16.7, "range": [16, 18], "verify_gap": 0.0}})
    'int4'
    """
    base = figures.get(BASE)
    if base is None:
        return BASE
    ceiling = base["step"] * (1.0 - MARGIN)
    clear = {fmt: fig["step"] for fmt, fig in figures.items()
             if fmt != BASE and fig["step"] <= ceiling and fig["range"][1] < base["step"] and is_exact(fig)}
    return min(clear, key=clear.get) if clear else BASE


def is_exact(figures: dict) -> bool:
    """Whether a format's figures show it exact here: its :func:`verify_gap` measured and at most :data:`EXACT_GAP`
    (figures kept before the gap was measured count as not exact)."""
    gap = figures.get("verify_gap")
    return gap is not None and gap <= EXACT_GAP


@torch.inference_mode()
def verify_gap(model, vocab_size: int, tokens: int = GAP_TOKENS) -> float:
    """The largest absolute difference between the logits of one forward over ``tokens`` new tokens (a
    verification) and those of the same tokens fed one at a time (one-token steps), after the same
    :data:`PROMPT_TOKENS`-token prompt, at the threads the runs use. 0.0: every row exact."""
    from specviz.core.kv import forward_logits, new_cache

    ids = [(7919 * i + 13) % vocab_size for i in range(PROMPT_TOKENS + tokens)]
    cache = new_cache(model)
    forward_logits(model, ids[:PROMPT_TOKENS], cache, 1)
    multi = forward_logits(model, ids[PROMPT_TOKENS:], cache, tokens).float()
    cache = new_cache(model)
    forward_logits(model, ids[:PROMPT_TOKENS], cache, 1)
    single = torch.cat([forward_logits(model, [i], cache, 1) for i in ids[PROMPT_TOKENS:]]).float()
    return float((multi - single).abs().max())


def formats_that_run(target, progress: Callable[[str], None] | None = None) -> dict:
    """{fmt: LoadedModel} for every format of :data:`specviz.runtime.weights.FORMATS` that ``target`` (a float32
    LoadedModel) can take here (:func:`specviz.runtime.weights.with_weights`; a format raising WeightsError, e.g.
    int8 off the CPU, is left out)."""
    models = {}
    for fmt in FORMATS:
        try:
            models[fmt] = with_weights(target, fmt, progress=progress)
        except WeightsError:
            continue
    return models


def measure_formats(target, formats: Iterable[str] | None = None, *, rounds: int = ROUNDS, warmup: int = WARMUP,
                    progress: Callable[[str], None] | None = None) -> dict[str, dict]:
    """Time ``target`` (a float32 LoadedModel) in each format that runs here (all of ``formats``, default every
    format); returns ``{fmt: {"step": median one-token ms, "range": [fastest, slowest] ms, "verify": {n: median
    T(n)/T(1)}}}`` with n in :data:`TOKEN_COUNTS`. Uses the threads set now (the tuning's, via the model)."""
    from specviz.measure.weights_kernel import _round_times

    models = formats_that_run(target, progress)
    if formats is not None:
        models = {fmt: m for fmt, m in models.items() if fmt in set(formats)}
    with torch.inference_mode():
        times = _round_times(models, PROMPT_TOKENS, list(TOKEN_COUNTS), max(1, rounds), max(0, warmup))
    figures = {fmt: figures_of(rounds_) for fmt, rounds_ in times.items()}
    for fmt, fig in figures.items():
        fig["verify_gap"] = round(verify_gap(models[fmt].model, int(target.vocab_size)), 6)
    return figures


def figures_of(rounds: list[dict[int, float]]) -> dict:
    """One format's figures from its timed rounds ({n: ms} each): see :func:`measure_formats`."""
    steps = [r[1] for r in rounds]
    verify = {n: round(statistics.median(r[n] / r[1] for r in rounds), 3) for n in rounds[0]}
    return {"step": round(statistics.median(steps), 2), "range": [round(min(steps), 2), round(max(steps), 2)],
            "verify": verify}


def why_not(fmt: str, figures: dict[str, dict]) -> str | None:
    """Why format ``fmt`` did not replace float32 by :func:`choose_default`'s rule, in words ("its median step is
    only 4% under float32's", "its slowest round (240 ms) is not under float32's median (230 ms)", "not exact here:
    a verification's logits up to 0.25 from one-token steps'"); None where it qualifies, or without figures for it
    and float32."""
    base, fig = figures.get(BASE), figures.get(fmt)
    if base is None or fig is None or fmt == BASE:
        return None
    if fig["step"] > base["step"] * (1.0 - MARGIN):
        under = 1.0 - fig["step"] / base["step"]
        return (f"its median step is only {under:.0%} under float32's" if under > 0
                else "its median step is not under float32's")
    if fig["range"][1] >= base["step"]:
        return f"its slowest round ({fig['range'][1]:.0f} ms) is not under float32's median ({base['step']:.0f} ms)"
    if not is_exact(fig):
        gap = fig.get("verify_gap")
        return (f"not exact here (a verification's logits differ from one-token steps' by up to {gap:.2g})"
                if gap is not None else "not checked for exactness here")
    return None


def reason(figures: dict[str, dict], chosen: str) -> str:
    """One or two sentences saying why ``chosen`` (:func:`choose_default` of ``figures``) is the default, with the
    measured medians: "int4 is the default: its one-token step took 221 ms, float32's 355 ms (the rule: at least
    10% faster, its slowest round under float32's median, exact here)." or "float32 kept: int4 221 ms a step vs
    355 ms, but not exact here: ...; int8 ...". "" without float32's figures (nothing was measured)."""
    base = figures.get(BASE)
    if base is None:
        return ""
    rule = (f"(the rule: at least {MARGIN:.0%} faster, its slowest round under float32's median, exact here, so "
            "that a speculative run gives standard decoding's greedy ids)")
    if chosen != BASE and chosen in figures:
        return (f"{chosen} is the default: its one-token step took {figures[chosen]['step']:.0f} ms, float32's "
                f"{base['step']:.0f} ms {rule}.")
    faster = [f"{fmt} {fig['step']:.0f} ms, but {why_not(fmt, figures)}" for fmt, fig in
              sorted(figures.items(), key=lambda item: item[1]["step"]) if fmt != BASE and why_not(fmt, figures)]
    if not faster:
        return f"float32 kept: no other format was measured here {rule}."
    return (f"float32 kept ({base['step']:.0f} ms a one-token step) {rule}: " + "; ".join(faster) + ".")


def describe(figures: dict[str, dict], chosen: str, seconds: float | None = None) -> str:
    """One log line: each format's median step, the choice and what the measurement added (``seconds``)."""
    steps = ", ".join(f"{fmt} {fig['step']:.1f}" for fmt, fig in figures.items())
    took = f"; measured in {seconds:.1f} s" if seconds is not None else ""
    inexact = [f"{fmt} (a verification's logits up to {fig['verify_gap']:.3g} from one-token steps')"
               for fmt, fig in figures.items() if fmt != BASE and "verify_gap" in fig and not is_exact(fig)]
    left = f"; not exact here, so not chosen: {', '.join(inexact)}" if inexact else ""
    return f"one-token step (ms, median): {steps}; default weights {chosen}{left}{took}"
