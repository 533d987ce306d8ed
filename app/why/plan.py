"""How long Measure will take, said beside the button before it is pressed (a trial's user learned "about 11 min"
only after pressing it) and updated as the target and the two boxes under it change.

One formula: :func:`measure_seconds` (the grid's :func:`specviz.measure.grid.grid_seconds` plus
:data:`ESTIMATE_EXTRA_S`) gives both this line and the status's estimate once Measure has timed its first forwards
(:mod:`app.why.handlers`). Before that press, the one-token step and the per-token cost of a wide forward come from
the newest measurement of the same target in this process: the latest Measure's first forwards
(:func:`remember_probe`), or, where newer, forwards another tab timed or the Live runs' costs
(:func:`app.costs.newest_costs`: the start-up's forwards, a Batching sweep's, the Live runs'), its source named;
with none, the line says only that it takes minutes. The range
and the machine's load it moves with are :mod:`app.estimates`'.
"""

from __future__ import annotations

import threading
import time

import gradio as gr

from app.costs import as_probe, newest_costs, note_forwards
from app.estimates import NOW, PROBE_SPREAD, Estimate, machine_load, make_estimate
from specviz.measure.grid import BATCH_SIZES, TOKEN_COUNTS, grid_seconds

ESTIMATE_EXTRA_S = 3.0  # beyond the grid: the memory-copy bandwidth and the drafters' costs (about this long)
_PROBES: dict[str, tuple[dict[int, float], float, tuple[float, int] | None]] = {}
"""Target spec -> (its latest Measure's probe: ms of one forward over n new tokens, when it was timed (time.time()
s), other programs' load then); shared by every session of this process."""
_LOCK = threading.Lock()
LAST_MEASURE = "the first forwards of the last Measure here"
"""Where a plan from the Why tab's own last probe comes from, in words."""
EXTRA_WORDS = {"offload": "the offloaded curve", "weights": "the weight formats"}
"""The boxes under Measure whose extra time no estimate holds (timed by rounds once they run), as the line names
them."""


PLAN_REFRESH_S = 12.0
"""How often the line beside Measure is said again while the Why tab is shown: the machine's load it follows moves
(other programs start and end), and a line computed once at page load read the same on a quiet and a busy machine."""
WHY_TAB = ("why", "Why it works")
"""The Why tab's id and label in the app's tabs (:mod:`app`'s demo)."""


def refresh_while_shown(select: gr.SelectData) -> gr.Timer:
    """The plan's timer (:data:`PLAN_REFRESH_S`) on while the Why tab is the one shown, off otherwise, at a tab's
    select (``select``: which tab, its ``value`` or ``id``). Annotated with the class itself: Gradio fills only
    such a parameter (with "gr.SelectData | None" the select came as None and the timer never started)."""
    return gr.Timer(active=str(select.value) in WHY_TAB or str(select.index) in WHY_TAB)


def refresh_from_address(request: gr.Request) -> gr.Timer:
    """The plan's timer at page load: on when the address opens the page on the Why tab ("?tab=why"). A load event
    has no select data: given a ``gr.SelectData`` parameter, Gradio fails building it."""
    params = getattr(request, "query_params", None) or {}
    return gr.Timer(active=str(params.get("tab", "")).lower() == WHY_TAB[0])


def measure_seconds(probe: dict[int, float]) -> float:
    """Seconds a whole Measure takes from ``probe`` (ms of one forward over n new tokens, at least two n: the
    grid's :func:`~specviz.measure.grid.grid_seconds` over :data:`TOKEN_COUNTS` x :data:`BATCH_SIZES`, plus
    :data:`ESTIMATE_EXTRA_S` for the copy bandwidth and the drafters' c); the boxes under Measure not included."""
    return grid_seconds(probe, token_counts=TOKEN_COUNTS, batch_sizes=BATCH_SIZES) + ESTIMATE_EXTRA_S


def remember_probe(spec: str, probe: dict[int, float]) -> None:
    """Keep ``probe`` (the first forwards a Measure of ``spec`` timed) for the next estimate before a press, and as
    the newest forwards timed of ``spec`` for the other tabs' plans (:func:`app.costs.note_forwards`)."""
    wide = max(probe)
    kept = note_forwards(spec, probe[min(probe)], probe[wide] / wide, LAST_MEASURE)
    with _LOCK:
        _PROBES[spec] = (dict(probe), kept.measured_at, machine_load())


TOOK_LIMITS = (0.5, 4.0)
"""How far the last Measure's time over its plan (:func:`remember_took`) moves the next plan, at most."""
_TOOK: dict[str, float] = {}  # target spec -> the last whole Measure's seconds over the seconds its probe planned


def remember_took(spec: str, took_s: float, planned_s: float) -> None:
    """Keep how long the last whole Measure of ``spec`` took (``took_s``, its grid and the drafters' c, from its
    first forward on) over what its own probe planned (``planned_s``, :func:`measure_seconds`): the next plan from
    that probe is scaled by it (a trial: a Measure planned at about 80 s took 107 s, and the line after it still
    read "about 55 s")."""
    if took_s > 0 and planned_s > 0:
        with _LOCK:
            _TOOK[spec] = min(max(took_s / planned_s, TOOK_LIMITS[0]), TOOK_LIMITS[1])


def _known_probe(spec: str) -> tuple[dict[int, float], float | None, tuple[float, int] | None, str] | None:
    """(probe, when timed or None, load then, where it comes from in words) for ``spec``, or None: nothing timed.
    The newest measurement wins: the last Measure's own probe here, unless forwards timed since (a Batching sweep's)
    or Live runs ended since (:func:`app.costs.newest_costs`) are newer."""
    with _LOCK:
        kept = _PROBES.get(spec)
    newest = newest_costs(spec)
    if kept is not None and (newest is None or newest.measured_at is None or kept[1] >= newest.measured_at):
        return (*kept, f"from {LAST_MEASURE}")  # scaled in planned() by its time taken
    if newest is None:
        return None
    probe = as_probe(newest, max(TOKEN_COUNTS))  # a wide forward's cost per token, at the grid's widest n
    return probe, newest.measured_at, newest.measured_load, f"from {newest.source}"


def planned(spec: str, load=NOW) -> tuple[Estimate, str] | None:
    """The :class:`~app.estimates.Estimate` of a Measure of ``spec`` (its range :data:`PROBE_SPREAD`, moved by the
    load's change since the forwards were timed: :func:`app.estimates.make_estimate`) and where it comes from, in
    words; None when nothing of ``spec`` was timed in this process. ``load``: other programs' (load, CPUs) now
    (:data:`NOW`: read it)."""
    known = _known_probe(spec)
    if known is None:
        return None
    probe, when, measured_load, source = known
    seconds = measure_seconds(probe)
    with _LOCK:
        took = _TOOK.get(spec) if source == f"from {LAST_MEASURE}" else None  # that Measure's own miss
    if took is not None and abs(took - 1.0) >= 0.1:
        seconds *= took
        source = f"{source}, scaled to the time that Measure took ({took:.1f}× what its first forwards planned)"
    now = machine_load() if load is NOW else load
    age = time.time() - when if when is not None else None
    return make_estimate(seconds, seconds * PROBE_SPREAD[0], seconds * PROBE_SPREAD[1], now, measured_load,
                         age), source


def plan_html(target, offload=False, weights=False, load=NOW) -> str:
    """The line beside Measure: "Measure takes about 4 min (3–6 min) here now, from forwards the app timed on this
    machine." for ``target`` (the target box's text), plus what the ticked boxes (``offload``, ``weights``) add
    unestimated; "Measure takes minutes: ..." when nothing of the target was timed yet. HTML, one line."""
    spec = str(target or "").strip()
    found = planned(spec, load) if spec else None
    extras = [words for key, words in EXTRA_WORDS.items() if {"offload": offload, "weights": weights}[key]]
    more = f", plus {' and '.join(extras)} (said once it runs)" if extras else ""
    if found is None:
        text = ("Measure takes minutes: it times every batch size and token count, and says how long once it has "
                f"timed a first forward{more}.")
    else:
        estimate, source = found
        said = estimate.text("")  # on a very busy machine a sentence of its own: "the machine is very busy now ..."
        text = f"Measure: {said}, {source}{more}." if estimate.very_busy else (
            f"Measure takes {said} here now, {source}{more}.")
    return f"<div class='why-note' id='why-measure-plan-line'>{text}</div>"
