"""The what-if chart's controls and its redraw: the α and c sliders (a typed value out of range is clamped and
said, an emptied box gets its last number back: :func:`slider_typed`), the run boxes (k, tokens per pass,
speedup; a run no decoding can give is said and not marked: :func:`run_issues`) and :func:`whatif`, which draws the
chart from them and the last measurement. What the controls cannot use is said in the what-if status, the line
under the sliders (``#why-whatif-status``), never as a toast: on a phone the toasts covered the what-if heading,
and the Measure status, far above, is for the measurement only."""

from __future__ import annotations

import html
import math
import re

import gradio as gr
import plotly.graph_objects as go

from app import render
from app.inputs import clamp_notice
from app.why.figures import whatif_figure
from app.why.noise import noisy_c, possible_curve
from specviz.core.engine import MAX_K
from specviz.measure.costs import alpha_for_tokens_per_pass, whatif_curves

DEFAULT_ALPHA = 0.7
DEFAULT_C = 0.05
MAX_C = 2.0
"""The right end of the what-if's draft cost slider before a measurement (a larger c typed into its box is drawn as
this, as the slider shows it); a measured c above it moves the end (:func:`c_top`)."""
RUN_BOX_EMPTY = "—"  # what a run box shows until a Live run fills it (or one is typed)


_RANGED = re.compile(r"^(?P<figure>.*?)\s*\(\s*(?P<low>[-+]?[\d.]+)\s*[–-]\s*(?P<high>[-+]?[\d.]+)\s*\)\s*$")


def split_range(text) -> tuple[str, tuple[float, float] | None]:
    """A run box's text as (its figure's text, the range written after it in brackets, or None): "2.88 (1.75–4.00)"
    -> ("2.88", (1.75, 4.0)), as a Live run fills the boxes (:func:`app.why.history.from_history`, in the Live
    card's words); "2.6" -> ("2.6", None); a bracket that is no range stays in the figure's text ("2 (x)")."""
    found = _RANGED.match(str(text if text is not None else ""))
    if found is None:
        return str(text if text is not None else "").strip(), None
    try:
        return found["figure"], (float(found["low"]), float(found["high"]))
    except ValueError:
        return str(text).strip(), None


def _number(text) -> float | None:
    """A run box's text as a finite number, or None ("", "abc", "nan", "inf"); a range after it, "2.88 (1.75–4.00)",
    is not part of the number (:func:`split_range`)."""
    try:
        value = float(split_range(text)[0])
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def _range(text, value: float | None) -> tuple[float, float] | None:
    """The range written after a run box's figure (:func:`split_range`) when it holds ``value`` (to the 2 decimals
    shown); None without one, or for one that does not hold it."""
    span = split_range(text)[1]
    if span is None or value is None or not span[0] - 5e-3 <= value <= span[1] + 5e-3:
        return None
    return span


RUN_BOXES = ("k", "tokens_per_pass", "speedup")
"""The run boxes, in order (:func:`run_issues` names its problems by them)."""


def run_issues(k, tokens_per_pass, speedup) -> tuple[bool, dict[str, str]]:
    """Check the typed run (the boxes' text) against what a run can give: k a whole number in 1..MAX_K, tokens per
    pass in [1, k + 1] (each pass emits at least the target's own token, at most k drafts + the bonus token), a
    speedup above 0. Returns (whether the run is marked, {box of :data:`RUN_BOXES`: one sentence that says what is
    wrong and what happens: the run is not marked, or its speedup is left out}). An empty box is no problem
    (:func:`_blank`; an empty k or tokens per pass: nothing marked yet)."""
    blank = _blank(k) or _blank(tokens_per_pass)  # not typed yet: nothing marked, nothing wrong
    problems = {} if blank else _run_problems(k, tokens_per_pass)
    sp = _number(speedup)
    if not _blank(speedup) and not (sp and sp > 0):
        problems["speedup"] = f"Speedup must be a number above 0 (got “{speedup}”): the run's speedup is left out."
    return not blank and not {"k", "tokens_per_pass"} & problems.keys(), problems


def _run_problems(k, tokens_per_pass) -> dict[str, str]:
    """The problem of a typed k and tokens per pass (both boxes filled), at most one: {box: sentence}."""
    k_value, tau = _number(k), _number(tokens_per_pass)
    if k_value is None or not k_value.is_integer() or not 1 <= k_value <= MAX_K:
        return {"k": f"Run: k must be a whole number from 1 to {MAX_K} (got “{k}”): the run is not marked."}
    if tau is None:
        return {"tokens_per_pass": f"Tokens per pass must be a number (got “{tokens_per_pass}”): the run is not "
                                   "marked."}
    if not 1 <= tau <= k_value + 1:
        return {"tokens_per_pass": (
            f"Tokens per pass at k = {k_value:g} lies between 1 (nothing accepted) and {k_value + 1:g} (all k drafts "
            f"accepted + the bonus token), not {tau:g}: the run is not marked.")}
    return {}


def _blank(text) -> bool:
    """A run box with nothing typed: empty, or the "—" it shows until a run fills it."""
    return str(text if text is not None else "").strip() in ("", RUN_BOX_EMPTY)


def run_point(k, tokens_per_pass, speedup, label: str = "your run") -> dict | None:
    """The run to mark, or None when its k or tokens per pass is missing or not what a run can give
    (:func:`run_issues`; the boxes are text: "", "4", "1.6", "2.88 (1.75–4.00)"); a speedup that is missing, not
    above 0 or not a number is left unmarked. Returns {"k", "tokens_per_pass", "speedup" (None: unmarked),
    "tokens_per_pass_range", "speedup_range" ((low, high) written in the box after its figure, the 95% range a Live
    run recorded; None without one: :func:`_range`), "label"}."""
    marked, _ = run_issues(k, tokens_per_pass, speedup)
    if not marked:
        return None
    sp, tau = _number(speedup), _number(tokens_per_pass)
    sp = sp if sp and sp > 0 else None
    return {"k": _number(k), "tokens_per_pass": tau, "speedup": sp, "label": label,
            "tokens_per_pass_range": _range(tokens_per_pass, tau), "speedup_range": _range(speedup, sp)}


RUN_PROBLEM_ENDINGS = ("the run is not marked.", "the run's speedup is left out.")
"""How every sentence of :func:`run_issues` ends: a status line that holds one is about the typed run."""


def check_run(k, tokens_per_pass, speedup, shown: str | None = None) -> str | object:
    """When a run box (of :data:`RUN_BOXES`) is left: the what-if status (HTML) names every problem the
    typed run has now (:func:`run_issues`), each saying whether the run is marked. Once the run has none, a status
    that still shows an earlier problem (``shown``: the what-if status's HTML) turns into what is marked; any other
    status stays (a skip), as it does when nothing is typed; the line is the same whichever box was left."""
    marked, problems = run_issues(k, tokens_per_pass, speedup)
    if problems:
        return render.status_html(" ".join(problems.values()), "info")
    if marked and any(end in html.unescape(str(shown or "")) for end in RUN_PROBLEM_ENDINGS):
        point = run_point(k, tokens_per_pass, speedup)
        what = f"k = {point['k']:g}, {point['tokens_per_pass']:g} tokens per pass"
        what += f", {point['speedup']:g}× speedup" if point["speedup"] else ""
        return render.status_html(f"Your run is marked on the what-if chart ({what}).", "info")
    return gr.skip()


def c_top(measurement: dict | None) -> float:
    """The draft cost slider's right end: :data:`MAX_C`, or a measured early-exit c above it rounded up to a whole
    number (2.482 -> 3), so that the slider, its box and the chart all hold the c that Measure set. The one source
    for the slider's range (:func:`app.why.handlers._measured`), the chart's clamp (:func:`whatif`) and the typed
    box's (:func:`slider_typed`)."""
    costs = (measurement or {}).get("costs") or {}
    measured = costs.get("early-exit")
    if measured is None or not math.isfinite(measured) or measured <= MAX_C:
        return MAX_C
    return float(math.ceil(measured))


def whatif(alpha, c, batch, run_k, run_tpp, run_speedup, measurement, kept: dict | None = None) -> go.Figure:
    """The what-if chart for the sliders, the measured curve at ``batch`` (if measured) and the run to mark. The
    sliders' values may be raw payloads, typed out of range: α is taken within [0, 1] and c within
    [0, :func:`c_top`], as the sliders clamp them; one that is no number (an emptied box: None, or "abc") is
    drawn at its last number, ``kept`` (:func:`slider_typed`'s state, {"alpha", "c"}; the defaults without it),
    which :func:`slider_typed` puts back into the box when it is left. Drawn at the measured c whose repeats spread
    too far (:func:`app.why.noise.noisy_c`), the title (at the head of the legend) says that c is too noisy to
    tell."""
    kept = kept or KEPT
    alpha = min(max(_or_kept(alpha, kept["alpha"]), 0.0), 1.0)
    c = min(max(_or_kept(c, kept["c"]), 0.0), c_top(measurement))
    curve = None
    if measurement:
        ms = measurement["grid"]["ms"]
        batch = int(batch) if batch and int(batch) in ms else min(ms)
        possible = possible_curve(measurement["grid"], batch)
        curve = possible if len(possible) > 1 else None
    curves = whatif_curves(alpha, c, curve, MAX_K)
    noisy = noisy_c((measurement or {}).get("costs"))
    drawn = noisy and abs(c - measurement["costs"]["early-exit"]) < 5e-3  # the measured c drawn: say it is noise
    point = run_point(run_k, run_tpp, run_speedup)
    noise = f"measured c {noisy}: no finding, try the slider" if drawn else None
    return whatif_figure(curves, point, int(batch or 1), noise, c_words(c, measurement), alpha_note(alpha, point))


def run_alpha(k, tokens_per_pass) -> float:
    """The what-if's α for a run of draft length ``k`` and ``tokens_per_pass`` (emitted ÷ target passes): the α
    whose E[tokens per pass] = (1 − α^(k+1)) / (1 − α) equals the run's
    (:func:`~specviz.measure.costs.alpha_for_tokens_per_pass`), to the slider's 2 decimals. The one source of this
    figure (:func:`app.why.history.from_history` sets the slider to it, :func:`alpha_note` says it). It is not the
    Live card's per-token α, accepted ÷ (accepted + rejections) (:attr:`specviz.core.counters.Counters.alpha`),
    which counts the drafts the target judged: the two differ where passes draft fewer than k tokens (an n-gram
    finds no match) or acceptances are not independent of each other, as the formula assumes."""
    return round(alpha_for_tokens_per_pass(float(tokens_per_pass), float(k)), 2)


def alpha_note(alpha: float, run: dict | None) -> str | None:
    """The note under the what-if charts (it stood at the head of the legend, 5 lines that squeezed the plots) while
    α is the ★'s own (``run``: :func:`run_point`'s; :func:`run_alpha`): which α this is and why the Live card's
    differs; None for any other α."""
    if run is None or abs(alpha - run_alpha(run["k"], run["tokens_per_pass"])) > 5e-3:
        return None
    return (f"★'s α: the one that gives its {run['tokens_per_pass']:.2f} tokens/pass at k = {run['k']:g} by the "
            "formula. The Live card's α (accepted ÷ judged drafts) differs when passes draft fewer than k.")


def c_words(c: float, measurement: dict | None) -> str:
    """What the drawn draft cost ``c`` is, for the what-if title: "n-gram lookup, measured" or "early exit,
    measured" when it is a drafter's cost the last ``measurement`` timed (:func:`measured_c`), "a free draft, as
    n-gram lookup's ≈ 0" for 0 before any measurement (a Live n-gram run sets it, :func:`app.why.history.run_c`, and
    so may a visitor: a trial typed −2, clamped to 0, and read "n-gram lookup" with no n-gram run), "a default, not
    measured" for :data:`DEFAULT_C` before one; "" for a c set by hand."""
    costs = (measurement or {}).get("costs") or {}
    for key, words in (("ngram", "n-gram lookup"), ("early-exit", "early exit")):
        if key in costs and abs(c - measured_c(costs, key)) < 5e-4:
            return f"{words}, measured"
    if not costs and c == 0:
        return "a free draft, as n-gram lookup's ≈ 0"
    return "a default, not measured" if not costs and abs(c - DEFAULT_C) < 1e-9 else ""


def c_change_text(before, after: float, key: str, costs: dict) -> str:
    """What Measure did to the what-if's draft cost c, in one sentence for its status: ``before`` the slider's raw
    value when Measure was pressed (None or no number: unknown), ``after`` the measured c it now holds, ``key`` whose
    ("early-exit", or "ngram" for the latest Live run's n-gram lookup), ``costs``
    (:func:`specviz.measure.costs.measure_draft_costs`'s, with "early_exit_layer"). E.g. "c (the draft's cost per
    token ÷ a target step) moved from 0.05 to 0.52: the early exit's cost measured here (a draft of the target's
    first 15 layers), so the what-if draws a drafter this machine timed; a draft this dear pays only at a small k
    (type another c to try a cheaper draft)." A trial's c changed with no word of it, and the chart's best k fell
    to 1."""
    shown = f"{after:.3g}"
    if key == "ngram":
        whose = "your latest Live run's n-gram lookup's cost measured here (the lookup alone, microseconds)"
        why = "so the what-if draws that run's drafter"
    else:
        layers = int(costs.get("early_exit_layer") or 0)
        whose = ("the early exit's cost measured here (a draft of the target's first "
                 f"{layers} layers)" if layers else "the early exit's cost measured here")
        why = ("so the what-if draws a drafter this machine timed; a draft this dear pays only at a small k (type "
               "another c to try a cheaper draft)" if after >= 0.2 else "so the what-if draws a drafter this machine "
               "timed")
    old = _number(before)
    what = "c (the draft's cost per token ÷ a target step)"
    if old is not None and f"{old:.3g}" == shown:  # as the sentence writes them: 0 and 0.0003 differ
        return f"{what} stays at {shown}: {whose}."
    moved = f"moved from {old:.3g} to {shown}" if old is not None else f"is now {shown}"
    return f"{what} {moved}: {whose}, {why}."


def measured_c(costs: dict, key: str) -> float:
    """A drafter's measured c as the slider is set to it (``key``: "early-exit" or "ngram" of
    :func:`specviz.measure.costs.measure_draft_costs`): early exit's to 3 decimals, the n-gram lookup's (a few
    microseconds ÷ a step, 0.0003) to 4."""
    return round(costs[key], 4 if key == "ngram" else 3)


def _or_kept(value, kept: float) -> float:
    """A slider's raw payload as a number, or ``kept`` when it is none (:func:`_number`)."""
    number = _number(value)
    return kept if number is None else number


SLIDERS = {"alpha": ("Per-token acceptance α", 0.0, 1.0), "c": ("Draft cost c", 0.0, MAX_C)}
"""The what-if sliders: key → (name in messages, low, high)."""
KEPT = {"alpha": DEFAULT_ALPHA, "c": DEFAULT_C}
"""The sliders' last numbers before anything is typed (:func:`slider_typed`'s state starts here)."""


def slider_typed(key: str, value, kept: dict | None, measurement: dict | None = None, shown: str | None = None,
                 left: bool = True) -> tuple:
    """What a what-if slider's box holds, said when the chart cannot use it as typed; the handler of its ``input``
    (while typing, ``left`` False) and ``release`` (the box left, or Enter in an empty box: :data:`ENTER_EMPTY_JS`)
    events, on the raw payload (preprocess off).

    Args:
        key: "alpha" or "c" (:data:`SLIDERS`).
        value: the box's payload: a number, or None for an emptied box (a number box shows "abc" as empty), or any
            text from the API.
        kept: the state {"alpha", "c"}: each slider's last number (None: :data:`KEPT`).
        measurement: the last measurement (its c may move the draft cost slider's end: :func:`c_top`), or None.
        shown: the what-if status's HTML now: a sentence about this slider that a number in range makes stale is
            cleared (a run box's sentence stays).
        left: whether the box was left; while typing, an empty box is a number on its way and is left alone.

    Returns:
        (slider, status, kept): ``status`` is the what-if status under the sliders (HTML), never the Measure
        status, and no toast is shown. A number in range: (skip, skip, kept with it); out of range: the slider set
        to the nearest end, one sentence ("Draft cost c is at most 2 here; using 2.": :func:`app.inputs.clamp_notice`)
        as the status, and that end kept (a number in range clears this slider's earlier sentence: :func:`_stale`);
        no number, once left: the slider set back to its kept number and
        "Draft cost c must be a number from 0 to 2; keeping 0.05." (the chart, :func:`whatif`, already draws the
        kept number); no number while typing: three skips. A box left out of range at the end the typing already
        clamped it to (and said) is set again without a second sentence (the status keeps the first).
    """
    name, low, high = SLIDERS[key]
    high = c_top(measurement) if key == "c" else high
    kept = dict(kept or KEPT)
    number = _number(value)
    if number is None:
        if not left:
            return gr.skip(), gr.skip(), gr.skip()
        message = f"{name} must be a number from {low:g} to {high:g}; keeping {kept[key]:g}."
    else:
        found = clamp_notice(number, name, low, high)
        if found is None:  # in range: its earlier sentence goes, unless this is the number that sentence set (the
            # release of 2.48 read after Gradio clamped the box to 2, on a busy machine, took the sentence away)
            stale = _stale(shown, name) and number != kept[key]
            return gr.skip(), ("" if stale else gr.skip()), {**kept, key: number}
        if left and found[0] == kept[key]:  # the typing already clamped it and said so: set, but say it once
            return gr.update(value=kept[key]), gr.skip(), kept
        kept[key], message = found
    return gr.update(value=kept[key]), render.status_html(message, "info"), kept


def _stale(shown: str | None, name: str) -> bool:
    """Whether the what-if status ``shown`` (HTML) holds a sentence about the slider called ``name`` (every
    sentence of :func:`slider_typed` begins with it; the run boxes' sentences never name a slider)."""
    return name in html.unescape(str(shown or ""))


def remember(alpha, c, kept: dict | None, measurement: dict | None = None) -> dict:
    """The state of :func:`slider_typed` after a handler set the sliders (Measure sets c, a Live run sets α): their
    numbers now, from the raw payloads (preprocess off: a box typed in meanwhile may hold any number), each within
    its slider's range (α in [0, 1], c in [0, :func:`c_top` of ``measurement``]) as the slider clamps it; a payload
    that is no number keeps the kept one. Returns {"alpha", "c"}."""
    kept = kept or KEPT
    top = {"alpha": SLIDERS["alpha"][2], "c": c_top(measurement)}
    return {key: min(max(_or_kept(value, kept[key]), 0.0), top[key]) for key, value in (("alpha", alpha), ("c", c))}
