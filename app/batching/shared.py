"""What both parts of the Batching tab share: the models they run (:class:`Models`, :func:`parse_models`), the drafter
factory that counts proposals (:class:`CountingDrafter`), the status line of a running job (:class:`JobStatus`), the
lesson's paragraph and the two-panel figure frame."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from app import device, estimates, render
from app.costs import RunCosts
from app.estimates import fresh_estimate, progress_text
from app.figures import FONT, MODEBAR, MODEBAR_MARGIN_PX
from app.inputs import InputError, check_models, text
from specviz.drafters.registry import NONE, choices, make_drafter
from specviz.runtime.policy import current_policy

DEFAULT_DRAFTER = "ngram"
STATUS_INTERVAL_S = 1.0
ASSUMED_TOKENS_PER_PASS = 1.5  # for the estimates only, before anything was accepted


def batched_forward_ms(probe: dict[int, float], rows: int, tokens: int) -> float:
    """The ms of one forward of ``rows`` rows × ``tokens`` new tokens, from a probe (ms of one forward over n new
    tokens at batch 1, at least two n: :func:`specviz.measure.grid.probe_forward_ms`, or measured costs put in that
    form, :func:`app.batching.plan.costs_probe`): max(T(1), rows · tokens · t), t = the widest forward's ms per
    token (memory-bound below, compute-bound above). The law of every estimate of this tab."""
    wide = max(probe)
    return max(probe[min(probe)], rows * tokens * probe[wide] / wide)


# ------------------------------------------------------------------------------------------------------------ models


@dataclass(frozen=True)
class Models:
    """The target spec, the drafter key and the draft model spec (the 'model' drafter's only)."""

    target: str
    drafter: str
    draft_spec: str | None = None


def drafter_menu() -> list[tuple[str, str]]:
    """(label, key) of every registry drafter but standard decoding."""
    return [(c.label, c.key) for c in choices() if c.key != NONE.key]


def parse_models(target, drafter, draft_model) -> Models:
    """The models, checked against the operator's policy. Raises InputError (or PolicyError), one sentence."""
    spec = text(target, "The target").strip()
    if not spec:
        raise InputError("Give a target model: 'embedded', a hub id or a local folder.")
    if drafter not in {key for _, key in drafter_menu()}:
        raise InputError("Pick a drafter.")
    draft = text(draft_model, "The draft model").strip() or None
    if drafter == "model" and not draft:
        raise InputError("The 'Draft model' drafter needs a draft model: a hub id or a local folder.")
    draft = draft if drafter == "model" else None
    check_models(spec, draft, current_policy())  # the operator's model policy (specviz.runtime.policy)
    return Models(spec, drafter, draft)


# -------------------------------------------------------------------------------------------- what the runs timed


LATEST_SWEEP = "the first forwards of the latest sweep of this model here"
LATEST_CHECK = "the latest check of this model here"
_TIMED: dict[tuple[str, str], tuple[RunCosts, str]] = {}  # (target spec, "sweep" or "check") -> its latest timing
_TIMED_LOCK = threading.Lock()


def learn_timing(target: str, part: str, costs: RunCosts, words: str) -> None:
    """Keep what a sweep or a check (``part``) of ``target`` timed, as ``costs`` (a one-token step and a wide
    forward's ms per token, the law's inputs: :func:`batched_forward_ms`) said as ``words`` ("52 ms a one-token step
    and 4.9 ms a token of a wide forward"), for the next plan of that part (:mod:`app.batching.plan`); it replaces
    the one before. Shared by every session of this process (a job run in a ZeroGPU worker keeps it there)."""
    with _TIMED_LOCK:
        _TIMED[(target, part)] = (costs, words)


def learned_timing(target: str, part: str) -> tuple[RunCosts, str] | None:
    """The latest timing :func:`learn_timing` kept for ``part`` of ``target``, None before any."""
    with _TIMED_LOCK:
        return _TIMED.get((target, part))


def timing_costs(step_ms: float, per_token_ms: float, source: str, spread: tuple[float, float]) -> RunCosts:
    """A timing as :class:`app.costs.RunCosts` (the one-token step ``step_ms``, a wide forward's ``per_token_ms``),
    measured now at the load of now, from ``source``, its range ``spread``."""
    return RunCosts(per_token_ms, step_ms, None, source, spread, measured_at=time.time(),
                    measured_load=estimates.machine_load())


# ---------------------------------------------------------------------------------------------------------- drafters


class CountingDrafter:
    """A drafter that counts what the drafter it wraps proposed (``passes`` asked, ``proposed`` tokens) into a
    shared ``tally`` dict; everything else is the wrapped drafter's."""

    def __init__(self, inner, tally: dict) -> None:
        self.inner, self.tally = inner, tally

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def propose(self, ctx):
        """The wrapped drafter's proposal, counted."""
        draft = self.inner.propose(ctx)
        self.tally["passes"] = self.tally.get("passes", 0) + 1
        self.tally["proposed"] = self.tally.get("proposed", 0) + len(draft.token_ids)
        return draft


def drafter_factory(models: Models, loaded, tally: dict | None = None) -> Callable[[], object]:
    """A factory of fresh drafters (a drafter holds one run's state; a draft model is loaded once and shared).
    Makes one at once, so a drafter that cannot be made fails before any timing. ``tally``: count proposals."""
    def make():
        drafter = make_drafter(models.drafter, loaded, draft_spec=models.draft_spec)
        return CountingDrafter(drafter, tally) if tally is not None else drafter

    make()
    return make


# ------------------------------------------------------------------------------------------------- status and lesson


ESTIMATE_WORDS = ("estimated from a few forwards timed just now: more load from other programs during the run "
                  "makes it longer")
"""What the sweep's time estimate is (:func:`app.batching.sweep_job.sweep_seconds`: a second of probe forwards at
the load of now, with their range: :func:`app.estimates.fresh_estimate`): said beside it, so that a run taking longer
on a machine getting busier is expected; once the run is past it, :func:`app.estimates.progress_text` says so."""


class JobStatus:
    """Turns a job's messages into the progress bar (``gr.Progress`` works in the handler's thread only) and a
    status line about every :data:`STATUS_INTERVAL_S` seconds: the step, the seconds so far and, once known, the
    estimate with its range (or, once passed, that it was: :func:`app.estimates.progress_text`), and what it was made
    from (``words``). ``out(status)`` makes the handler's output tuple. Until the job says its own estimate, the
    one planned before the press may stand in (:meth:`planned`); an ("estimate", None) item drops it. A ("note", text)
    from the job (the thread cap's: :func:`say_threads`) joins :attr:`notes`, which stand under every status from then
    on, the final one's too."""

    def __init__(self, progress, out: Callable[[str], tuple], verb: str) -> None:
        self.progress, self.out, self.verb = progress, out, verb
        self.started, self.last, self.message, self.estimate = time.monotonic(), 0.0, "", None
        self.notes: list[str] = []
        self.words = ESTIMATE_WORDS

    def planned(self, estimate, words: str) -> None:
        """Show ``estimate`` (an :class:`app.estimates.Estimate` planned before the press, None: none), said as
        ``words`` (what it was planned from), until the job's own estimate replaces it."""
        self.estimate, self.words = estimate, words

    def waiting(self, place) -> tuple:
        """The status while in line for the device."""
        return self.out(device.waiting_status(place.ahead, place.holder))

    def show(self, item) -> tuple | None:
        """The output tuple for one item of the job (None: nothing new to show)."""
        kind, payload = item if item is not None else ("tick", None)
        if kind == "estimate":  # seconds from the probe: its range and the load now, read once (app.estimates)
            self.estimate, self.last = (fresh_estimate(payload) if payload is not None else None), 0.0
            self.words = ESTIMATE_WORDS
        elif kind == "note":
            self.notes, self.last = [*self.notes, payload], 0.0
        elif kind == "progress":
            fraction, message = payload
            self.progress(fraction, desc=message)
            if message != self.message:
                self.message, self.last = message, 0.0
        now = time.monotonic()
        if now - self.last < STATUS_INTERVAL_S:
            return None
        self.last = now
        seconds = now - self.started
        took = f"{seconds:.0f} s" if self.estimate is None else progress_text(seconds, self.estimate, self.words)
        return self.out(render.status_html(f"{self.verb}… {self.message} ({took})", "busy", notes=self.notes))


def say_threads(job, loaded, work: str) -> dict:
    """In the job's thread, once ``loaded`` (the target) is loaded: say ("note", text) through ``job`` when other
    programs' work caps its threads (:func:`app.estimates.threads_note` for ``work``, "check" or "sweep"); nothing
    without a cap. Returns the cap's record for the downloads (:func:`app.estimates.threads_record`)."""
    record = estimates.threads_record(loaded.model, work)  # fewer threads beside other programs (set by job.turn)
    if record["note"]:
        job.say(("note", record["note"]))
    return record


def lesson_html(sentence: str) -> str:
    """The lesson sentence as a highlighted paragraph (escaped)."""
    import html

    return f"<p class='batching-lesson'>{html.escape(sentence)}</p>" if sentence else ""


# ------------------------------------------------------------------------------------------------------ figure frame


def figure_layout(height: int) -> dict:
    """A Plotly layout of ``height`` px in the app's font, legend across the top, room on the right for the mode
    bar; both parts' figures start from it."""
    return {"template": "plotly_white", "font": {"family": FONT, "size": 12}, "height": height,
            "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 90, "b": 55}, "modebar": MODEBAR,
            "legend": {"orientation": "h", "x": 0, "y": 1.12, "yanchor": "bottom", "font": {"size": 12}}}


def two_panels(layout: dict, titles: tuple[str, str], gap: float = 0.12) -> None:
    """Two side-by-side axes (x/y and x2/y2) with their titles above them."""
    width = (1 - gap) / 2
    notes = []
    for i, title in enumerate(titles):
        n, x0 = ("" if i == 0 else "2"), i * (width + gap)
        layout[f"xaxis{n}"] = {"domain": [x0, x0 + width], "anchor": f"y{n}", "automargin": True}
        layout[f"yaxis{n}"] = {"domain": [0, 1], "anchor": f"x{n}", "automargin": True}
        notes.append({"text": f"<b>{title}</b>", "x": x0 + width / 2, "y": 1, "xref": "paper", "yref": "paper",
                      "xanchor": "center", "yanchor": "bottom", "yshift": 6, "showarrow": False,
                      "font": {"size": 14}})
    layout["annotations"] = notes
