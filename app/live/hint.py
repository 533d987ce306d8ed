"""The Live tab's max-new-tokens info line: how long a run of the slider's value takes at the latest measured costs
(:func:`app.costs.tokens_info`), said before Generate and kept current. A trial read "Set to 48 on load: a run of
about 20 s" for the whole session while its runs took 10 s, and saw no time at all for 1,024 new tokens until it
pressed Generate.

The line follows the slider's value, the settings that name the run's method and the weight format (what a run's
plan reads besides the prompt's length), and every run's end, finished or stopped (its costs join the estimate,
:func:`app.costs.learn_costs`): a finished run's line comes in its own last message, the one that says "Done in"
(a trial saw it a few seconds after Done, from a second round trip). The ready status beside Generate carries the
same plan's short form ("48 new tokens: about 14 s (12–17 s)", :func:`plan_hint`): a visitor reads the status by
the button, and a trial saw only "Ready" there.
"""

from __future__ import annotations

import json

import gradio as gr

from app.costs import tokens_plan
from app.estimates import NOW
from app.inputs import parse_settings
from app.live.defaults import INPUTS
from app.live.prompt_check import READY_MARK, with_plan
from app.messages import SETTLE_WAIT_MS
from app.live.run import planned_costs

PLAN_INPUTS = ("drafter", "weights", "confidence", "k", "adaptive_k", "tree_nodes", "lookup", "exit_layer", "window",
               "ngram", "candidates")
"""The controls besides the slider whose change moves the plan: what names the run's method (its drafter, gate, k,
tree, lookup first, exit layer, lookahead's W, N, G; :func:`app.shares.live_method`) and the weight format. The
gate matters on its own: a drafter's change moves the gate slider to that drafter's default in a second event, and
a line read with the previous drafter's gate named no method (a trial read "with other drafters" before pressing
and the drafter's own prior after)."""

SHORT_PROMPT = "?"
"""The prompt a plan reads while the prompt box is empty (one token: the estimate of a short prompt)."""


NO_PLAN = ("", "")
""":func:`plan_of` for a run's inputs with no cost of its target (or of this weight format) known yet: the line goes
(its earlier plan was for other settings: a page read "12 new tokens …" under a box set to 20, then int8 weights)."""


def plan_of(values) -> tuple[str, str] | None:
    """(the slider's info line, the plan's short form) for the Live tab's controls ``values`` (raw, in the order of
    :data:`app.live.defaults.INPUTS`), from one estimate (:func:`app.costs.tokens_plan`); an empty prompt is planned
    as :data:`SHORT_PROMPT`. :data:`NO_PLAN` where no cost of the target is known yet; None while the inputs are not
    a run's (a number typed out of range, say: its own check says so, and the line stays)."""
    named = dict(zip(INPUTS, values))
    if not str(named.get("prompt") or "").strip():
        named["prompt"] = SHORT_PROMPT
    try:
        settings = parse_settings(named)
    except Exception:  # noqa: BLE001 - a value Generate would refuse: Generate says why, the line stays
        return None
    return tokens_plan(settings, planned_costs(settings), load=NOW) or NO_PLAN


def tokens_hint(*values):
    """The max-new-tokens slider's update (its ``info`` only, :func:`plan_of`: "" for :data:`NO_PLAN`) for the
    controls ``values``; gr.skip() while they are not a run's."""
    plan = plan_of(values)
    return gr.skip() if plan is None else gr.update(info=plan[0])


def plan_hint(*values):
    """:func:`tokens_hint` and the ready status: (slider update, status) for the controls ``values`` followed by the
    status as shown. A status that holds the ready line (:func:`app.live.prompt_check.with_plan`) carries the plan's
    short form there (plain "Ready" for :data:`NO_PLAN`); any other status (a run's, a failed run's) stays. One
    estimate gives both (:func:`plan_of`)."""
    *controls, status = values
    plan = plan_of(controls)
    if plan is None:
        return gr.skip(), gr.skip()
    ready = with_plan(status, plan[1])
    return gr.update(info=plan[0]), gr.skip() if ready is None else ready


def wire_tokens_hint(ui: dict, ended: list) -> None:
    """Keep ``ui["max_new_tokens"]``'s info line and the ready status (``ui["status"]``) current
    (:func:`plan_hint`): on page load, on a change of the slider (a typed, dragged or derived value), of
    :data:`PLAN_INPUTS`, and after each event of ``ended`` (Stop's last events; a finished run's own last message
    carries its line: :func:`app.live.run.generate_on_device`). In the browser's round trip, outside the queue: it
    reads measured costs and the load average, nothing more. Raw values (preprocess off), as the slider's other
    listeners: a number typed out of its range must not raise Gradio's range error. ``always_last``: while the
    visitor types 1024, the answer for "102" cannot land after the one for "1024". After each, the browser keeps the
    ready status with its plan (``window.svReadyStatus``, :data:`KEEP_READY_JS`) for the prompt box's banner clearing
    (:func:`app.live.prompt_check.clears_js`)."""
    options, keep = _plan_options(ui)
    gr.context.Context.root_block.load(plan_hint, **options).then(None, **keep)
    ui["max_new_tokens"].change(plan_hint, trigger_mode="always_last", **options).then(None, **keep)
    for name in PLAN_INPUTS:
        if name in ui:
            ui[name].change(plan_hint, **options).then(None, **keep)
    plan_after(ui, ended)


def plan_after(ui: dict, events: list) -> None:
    """Make the plan again (:func:`plan_hint`) after each of ``events``: Stop's result, and the browser step that
    puts the derived default of max new tokens into the slider (:func:`app.live.default_tokens.wire_default_tokens`:
    a value set by a browser-only step fires no change event, so a reloaded page kept the setter's own line, a
    second estimate from other costs)."""
    options, keep = _plan_options(ui, guarded=False)  # an event's end: its answer is on the page
    for event in events:
        event.then(plan_hint, **options).then(None, **keep)


def _plan_options(ui: dict, guarded: bool = True) -> tuple[dict, dict]:
    """The listener options of :func:`plan_hint` (raw controls and the status in, the slider and the status out, no
    queue; ``guarded``: the status left alone while a box's check is in flight, :data:`UNSETTLED_STATUS_JS`) and of
    its browser step :data:`KEEP_READY_JS`."""
    inputs = [ui[name] for name in INPUTS] + [ui["status"]]
    options = dict(inputs=inputs, outputs=[ui["max_new_tokens"], ui["status"]], queue=False, preprocess=False,
                   show_progress="hidden", api_visibility="private",
                   js=UNSETTLED_STATUS_JS if guarded else None)
    keep = dict(js=KEEP_READY_JS, inputs=[ui["status"]], queue=False, show_progress="hidden", api_visibility="private")
    return options, keep


UNSETTLED_STATUS_JS = f"""(...args) => {{
  const limit = {SETTLE_WAIT_MS};
  const busy = Object.values(window.svSettling || {{}}).some((m) => Date.now() - m.at < limit);
  return busy ? [...args.slice(0, -1), null] : args;
}}"""
"""The plan's browser side (:func:`plan_hint`): while a box's check is in flight (:func:`app.messages.settling_js`)
the status goes as null, so that the plan leaves the status alone (the slider's line still follows); the check's
own answer is followed by a plan of its own (:func:`app.live.layout._wire_helpers`). A plan read the status before
that answer landed and wrote it back after: a trial typed -3 for k after 2.5 and kept reading "must be a whole
number (got 2.5); using 3." under a box of 1, and on a fresh page read no sentence at all for -3."""


KEEP_READY_JS = f"""(status) => {{
  if (status && status.includes({json.dumps(READY_MARK)})) window.svReadyStatus = status;
}}"""
"""The browser's step after each plan: the latest ready status with its plan, for
:func:`app.live.prompt_check.clears_js` to put back when the empty-prompt banner goes."""
