"""The Live tab's max-new-tokens info line: how long a run of the slider's value takes at the latest measured costs
(:func:`app.costs.tokens_info`), said before Generate and kept current. A trial read "Set to 48 on load: a run of
about 20 s" for the whole session while its runs took 10 s, and saw no time at all for 1,024 new tokens until it
pressed Generate.

The line follows the slider's value, the settings that name the run's method and the weight format (what a run's
plan reads besides the prompt's length), and every run's end, finished or stopped (its costs join the estimate,
:func:`app.costs.learn_costs`).
"""

from __future__ import annotations

import gradio as gr

from app.costs import tokens_info
from app.estimates import NOW
from app.inputs import parse_settings
from app.live.defaults import INPUTS
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


def tokens_hint(*values):
    """The max-new-tokens slider's update (its ``info`` only, :func:`app.costs.tokens_info`) for the Live tab's
    controls ``values`` (raw, in the order of :data:`app.live.defaults.INPUTS`); an empty prompt is planned as
    :data:`SHORT_PROMPT`. gr.skip() while the inputs are not a run's (a number typed out of range, say: its own
    check says so) or no cost of the target is known yet."""
    named = dict(zip(INPUTS, values))
    if not str(named.get("prompt") or "").strip():
        named["prompt"] = SHORT_PROMPT
    try:
        settings = parse_settings(named)
    except Exception:  # noqa: BLE001 - a value Generate would refuse: Generate says why, the line stays
        return gr.skip()
    info = tokens_info(settings, planned_costs(settings), load=NOW)
    return gr.skip() if info is None else gr.update(info=info)


def wire_tokens_hint(ui: dict, ended: list) -> None:
    """Keep ``ui["max_new_tokens"]``'s info line current (:func:`tokens_hint`): on page load, on a change of the
    slider (a typed, dragged or derived value), of :data:`PLAN_INPUTS`, and after each event of ``ended``
    (Generate's and Stop's last events). In the browser's round trip, outside the queue: it reads measured costs and
    the load average, nothing more. Raw values (preprocess off), as the slider's other listeners: a number typed out
    of its range must not raise Gradio's range error. ``always_last``: while the visitor types 1024, the answer for
    "102" cannot land after the one for "1024"."""
    inputs = [ui[name] for name in INPUTS]
    box = ui["max_new_tokens"]
    options = dict(inputs=inputs, outputs=[box], queue=False, preprocess=False, show_progress="hidden",
                   api_visibility="private")
    gr.context.Context.root_block.load(tokens_hint, **options)
    box.change(tokens_hint, trigger_mode="always_last", **options)
    for name in PLAN_INPUTS:
        if name in ui:
            ui[name].change(tokens_hint, **options)
    for event in ended:
        event.then(tokens_hint, **options)
