"""The Batching tab's estimates before a press: how long a Check (:func:`check_plan`) or a Measure
(:func:`sweep_plan`) should take, said in the part's status line from the page's load on and again whenever an
input they follow changes (:func:`check_plan_status`, :func:`sweep_plan_status`, wired by
:func:`app.batching.layout.wire_plans`).

They are planned from the newest measurement this process holds of the target (:func:`planning_costs`: the latest
run of the same part here, the forwards timed by the start-up, the Why tab or a sweep, or its recent Live runs,
whichever was measured last; nothing is timed for them), put
in the form of the probe a sweep times at its start (:func:`costs_probe`: the one-token step and a wide forward's
cost per token) and run through the same law as the run's own estimate
(:func:`app.batching.check_job.check_seconds`, :func:`app.batching.sweep_job.sweep_seconds`). The range is the
costs' spread (wide from forwards timed alone: :data:`app.estimates.PROBE_SPREAD`; :data:`app.estimates.MIN_SPREAD`
from a finished check), moved by the load changed since they were measured (:func:`app.costs.planned_estimate`).
Where nothing was measured for the target the status says so (:data:`UNMEASURED`), with no number.

Once the run's own estimate exists (the sweep's probe, the check's first batch) it takes over: until then the
running status keeps the plan (:meth:`app.batching.shared.JobStatus.planned`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from app import costs as measured
from app import estimates, render
from app.batching.check_job import CHECK_BATCH, FIRST_BATCH, N_FIELD, check_seconds
from app.batching.shared import learned_timing
from app.batching.sweep_job import LONG_PROMPT_TOKENS, PROBE_WIDE, SweepSettings, parse_sweep, sweep_seconds
from app.costs import RunCosts, planned_estimate
from app.estimates import Estimate
from app.inputs import InputError
from app.messages import leading_notice, report
from app.render import seconds_text
from specviz.analysis.prompts import EXAMPLE_PROMPTS, load_prompts
from specviz.runtime.policy import PolicyError

CHECK_LEAD = "Press Check to sample both ways and test them"
SWEEP_LEAD = "Pick a drafter, k and batch sizes, then press Measure"
"""How each part's status begins while it only says what a press would do: :func:`refresh` replaces only those."""
UNMEASURED = "no forward of this model has been timed here yet, so there is no estimate before the run"
SWEEP_PROBE = "a few forwards are timed at its start to tell how long it will take"
SMALLER_N = "a smaller N makes it shorter"
FEWER_SIZES = "fewer batch sizes or new tokens make it shorter"


def planning_costs(target: str, part: str) -> tuple[RunCosts, str] | None:
    """(The costs a plan of ``part``, "check" or "sweep", of ``target`` rests on, those costs in words): the newest
    measurement of them in this process, whichever it is: what the latest run of that part timed here
    (:func:`app.batching.shared.learned_timing`: a sweep's first forwards, a check's ms a token), or the newest
    forwards timed or Live runs of the target (:func:`app.costs.newest_costs`: the start-up's forwards, the Why
    tab's Measure, a sweep's, the Live runs': batch-1 decoding on the wall clock, rendering included); None when
    nothing was measured. A trial planned a sweep at 14–47 min from a start-up's 1321 ms a step, 11 minutes old,
    after the Why tab and Live runs had measured 73–78 ms a step; on this project's shared 2-core VM a start-up on a
    busy moment timed 492 ms a step and planned a check of N = 48 at about 2 min (2–4 min), which took 36 s."""
    target = str(target or "").strip()
    learned = learned_timing(target, part)
    costs = measured.newest_costs(target)
    if learned is not None and (costs is None or (learned[0].measured_at or 0.0) >= (costs.measured_at or 0.0)):
        return learned
    return None if costs is None else (costs, costs_words(costs))


def costs_words(costs: RunCosts) -> str:
    """"48 ms a one-token step and 5.0 ms a token of a wide forward": the law's inputs in ``costs``."""
    return (f"{costs.base_ms_per_token:.0f} ms a one-token step and {costs.prefill_ms_per_token:.1f} ms a token of a "
            "wide forward")


def costs_probe(costs: RunCosts) -> dict[int, float]:
    """Measured ``costs`` as the probe a sweep times at its start (:func:`app.costs.as_probe` at
    :data:`~app.batching.sweep_job.PROBE_WIDE` tokens)."""
    return measured.as_probe(costs, PROBE_WIDE)


@dataclass(frozen=True)
class Plan:
    """A run's length planned before the press: ``estimate`` (seconds, with its range and the load now), the
    ``costs`` it was planned from and ``words``, those costs in words; ``what`` the run does in words, ``shorter``
    what makes it shorter (said on a very busy machine) and ``now`` (time.time() s) for how old the costs are."""

    estimate: Estimate
    costs: RunCosts
    words: str
    what: str
    shorter: str
    now: float

    def source(self) -> str:
        """What the plan rests on: "48 ms a one-token step and 4.8 ms a token of a wide forward (forwards timed on
        this machine, 2 min 5 s ago)"."""
        c = self.costs
        ago = "" if c.measured_at is None else f", {seconds_text(max(0.0, self.now - c.measured_at), at_least=1)} ago"
        return f"{self.words} ({c.source}{ago})"

    def short_text(self) -> str:
        """The estimate alone, as the running status says it before the run's own: "planned: about 100 s (70 s –
        3 min) in all"; on a very busy machine the plain sentence of :meth:`app.estimates.Estimate.text`."""
        e = self.estimate
        return e.text(self.shorter) if e.very_busy else f"planned: {e.text('')} in all"

    def text(self) -> str:
        """The status's sentence: "200 runs per side, 13 batches of up to 16: about 100 s (70 s – 3 min), planned
        from 48 ms a one-token step and 4.8 ms a token of a wide forward (…)"; on a very busy machine "…: the
        machine is very busy now (load 12 on 2 CPUs): this may take 2–8 min, planned from …; a smaller N makes it
        shorter"."""
        said = f"{self.what}: {self.estimate.text('')}, planned from {self.source()}"
        return f"{said}; {self.shorter}" if self.estimate.very_busy else said


REFUSAL_MARK = "data-sv-refusal"
"""The attribute that marks a status as a press's refusal of the form's values (:func:`refusal_status`)."""


def refusal_status(what: str, error: BaseException) -> str:
    """The status of a press whose form was refused (``error``, an InputError or PolicyError; ``what`` names the
    check for the log): :func:`app.messages.report`'s error line, marked (:data:`REFUSAL_MARK`) so that a change of
    the inputs plans the run again in its place (:func:`refresh`)."""
    return report(what, error).replace("<div ", f'<div {REFUSAL_MARK}="1" ', 1)


def refresh(shown, values: tuple, lead: str, status_of) -> str | dict:
    """On a change of an input a part's plan follows: ``status_of(*values)`` (:func:`check_plan_status` or
    :func:`sweep_plan_status`) while the status ``shown`` (its HTML) only says what a press would do (it begins with
    ``lead``: :data:`CHECK_LEAD` or :data:`SWEEP_LEAD`), under a box's sentence on top of it
    (:func:`app.messages.leading_notice`), or is a press's refusal of the form (:func:`refusal_status`: a trial
    unticked every batch size, read "Pick at least one batch size." at Measure, ticked B = 1 again and the warning
    stayed, with no plan); gr.skip() for a run's progress, its results or its failure."""
    said = str(shown or "")
    if lead not in said and REFUSAL_MARK not in said:
        return gr.skip()
    return leading_notice(shown) + status_of(*values)  # a box's sentence on top stays until the box changes it


def _plan(known, seconds_of, what: str, shorter: str, load, now: float | None) -> Plan | None:
    """A :class:`Plan` of ``seconds_of(probe)`` seconds for ``known`` (costs, or (costs, their words) as
    :func:`planning_costs` gives them; None: no plan)."""
    if known is None:
        return None
    costs, words = known if isinstance(known, tuple) else (known, costs_words(known))
    seconds = seconds_of(costs_probe(costs))
    load = estimates.machine_load() if load is estimates.NOW else load
    return Plan(planned_estimate(costs, seconds, load), costs, words, what, shorter,
                time.time() if now is None else now)


def check_plan(costs, n: int, prompt_tokens: int, load=None, now: float | None = None) -> Plan | None:
    """The plan of a check of ``n`` runs per side on a prompt of about ``prompt_tokens`` tokens, from ``costs``
    (:class:`app.costs.RunCosts`, or (costs, their words): :func:`planning_costs` of the target; None: nothing
    measured, no plan) by
    :func:`app.batching.check_job.check_seconds`. ``load``: other programs' (load, CPUs) now
    (:data:`app.estimates.NOW` reads it; None: unknown); ``now``: time.time() s (a test's own)."""
    batches = -(-n // CHECK_BATCH)
    what = f"{n:,} runs per side, {render.plural(batches, 'batch', 'batches')} of up to {CHECK_BATCH}"
    return _plan(costs, lambda probe: check_seconds(probe, n, prompt_tokens), what, SMALLER_N, load, now)


def sweep_plan(costs, s: SweepSettings, prompt_tokens: int, load=None, now: float | None = None) -> Plan | None:
    """The plan of the sweep ``s`` on prompts of about ``prompt_tokens`` tokens each, from ``costs`` (as
    :func:`check_plan`) by :func:`app.batching.sweep_job.sweep_seconds` (its predicted curve's grid included when
    ticked): "5 batch sizes (B = 1, 2, 4, 8, 16) at 24 new tokens per row, with the predicted curve: about …"."""
    sizes = render.plural(len(s.batch_sizes), "batch size")
    what = (f"{sizes} (B = {', '.join(map(str, s.batch_sizes))}) at {s.max_new_tokens} new tokens per row"
            + (", with the predicted curve" if s.predicted else ""))
    return _plan(costs, lambda probe: sweep_seconds(probe, s, prompt_tokens), what, FEWER_SIZES, load, now)


def sweep_prompt_tokens(s: SweepSettings) -> int:
    """About how many tokens each of the sweep's prompts has before they are tokenized: long prompts
    :data:`~app.batching.sweep_job.LONG_PROMPT_TOKENS`; short ones the mean of the example prompts its largest
    batch takes (:func:`app.costs.tokens_about`: characters over 4, plus the chat template's tokens a run here read)."""
    if s.long_prompts:
        return LONG_PROMPT_TOKENS
    texts = [p.prompt for p in load_prompts(EXAMPLE_PROMPTS)][:max(s.batch_sizes)]
    return round(sum(measured.tokens_about(t) for t in texts) / len(texts))


def pressed_check_plan(c) -> Plan | None:
    """The plan of the check ``c`` (:class:`app.batching.check_job.CheckSettings`) as Check is pressed (the load
    now): what its running status says until its first batch is done. None without measured costs."""
    return check_plan(planning_costs(c.models.target, "check"), c.n, measured.tokens_about(c.prompt),
                      load=estimates.NOW)


def pressed_sweep_plan(s: SweepSettings) -> Plan | None:
    """The plan of the sweep ``s`` as Measure is pressed: what its running status says until its probe's estimate.
    None without measured costs."""
    return sweep_plan(planning_costs(s.models.target, "sweep"), s, sweep_prompt_tokens(s), load=estimates.NOW)


def check_plan_status(target, prompt, n) -> str:
    """The check's status before Check: :data:`CHECK_LEAD`, then the plan (:func:`check_plan` of the target's
    measured costs, the load now) or :data:`UNMEASURED`, and that the time left follows once the first batch is
    done. An N the box refuses: the lead alone (the box's own check says why)."""
    try:
        runs = int(N_FIELD.parse(n))
    except InputError:
        return render.status_html(f"{CHECK_LEAD}.", "info")
    plan = check_plan(planning_costs(target, "check"), runs, measured.tokens_about(str(prompt or "")),
                      load=estimates.NOW)
    said = UNMEASURED if plan is None else plan.text()
    return render.status_html(f"{CHECK_LEAD}: {said}; {FIRST_BATCH}.", "info")


def sweep_plan_status(drafter, k, max_new_tokens, batch_sizes, prompt_length, predicted, target, draft_model) -> str:
    """The sweep's status before Measure: :data:`SWEEP_LEAD`, then the plan (:func:`sweep_plan`) or
    :data:`UNMEASURED`, and that a few forwards timed at its start tell more (:data:`SWEEP_PROBE`). Settings the
    form refuses: the lead and the probe alone (Measure says why)."""
    try:
        s = parse_sweep(drafter, k, max_new_tokens, batch_sizes, prompt_length, predicted, target, draft_model)
    except (InputError, PolicyError):
        return render.status_html(f"{SWEEP_LEAD}: {SWEEP_PROBE}.", "info")
    plan = sweep_plan(planning_costs(s.models.target, "sweep"), s, sweep_prompt_tokens(s), load=estimates.NOW)
    said = UNMEASURED if plan is None else plan.text()
    return render.status_html(f"{SWEEP_LEAD}: {said}; {SWEEP_PROBE}.", "info")
