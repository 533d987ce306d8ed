"""The Live tab's derived default of max new tokens on page load (:func:`app.costs.page_default_tokens`), set in the
slider only while the visitor has neither pressed Generate nor touched its box.

The server derives the default (up to seconds on a fresh server: the start-up measures, the device is waited for);
the page may send a run meanwhile. A trial pressed Generate 4 s after the page opened: its run read the box's 64,
then the load's answer set the box to 40 ("Set to 40 on load … about 20 s") while the run went on, and the run
made 64 tokens in 52 s. So the server's answer goes to a hidden holder (:func:`offer`), and a browser step
(:data:`APPLY_JS`) moves it into the slider only when the page never sent a run nor had the box changed by hand
(``window.svTokensKept``, set by Generate's :func:`app.live.layout.starting_js` and :data:`KEPT_JS`) and the box
still shows the value the page opened with: the value a run uses is always the one the box shows.
"""

from __future__ import annotations

import gradio as gr

from app import costs

KEPT_JS = "() => { window.svTokensKept = true; }"
"""The slider's own input (typed, dragged): the page's derived default no longer replaces the visitor's value."""

APPLY_JS = """(offered, shown) => {
  if (!offered || offered.value == null || window.svTokensKept) return undefined;
  if (Number(shown) !== Number(offered.fallback)) return undefined;
  return {__type__: 'update', value: offered.value};
}"""
"""The browser's step after the server offered a default (:func:`offer`; ``shown``: the slider's value now): the
slider's new value (its info line then comes from the value's change, :func:`app.live.hint.plan_hint`: one plan, not
a second estimate from the load's costs, which a reload showed as another time for the same runs), or undefined
(Gradio leaves the slider as it is) once Generate was pressed or the box was touched
(``window.svTokensKept``) or it shows another value than the page's fallback."""


def offer(update, fallback: int) -> dict | None:
    """The holder's value for a slider ``update`` from :func:`app.costs.page_default_tokens` (a gr.update dict, or
    gr.skip()'s): {"value": tokens, "info": the slider's info line, "fallback": the value the page opened with}
    when it sets a value, else None (nothing to apply)."""
    if not isinstance(update, dict) or "value" not in update:
        return None
    return {"value": int(update["value"]), "info": update.get("info"), "fallback": int(fallback)}


def wire_default_tokens(box: gr.Slider, spec: str, fallback: int) -> list:
    """On page load, and on each tick of a retry timer (every :data:`app.costs.DEFAULT_TOKENS_RETRY_S` s, at most
    :data:`app.costs.DEFAULT_TOKENS_TRIES` ticks: a page opened while the start-up still measured), ask the server
    for the derived default of ``box`` (the max-new-tokens slider; ``spec``: the target; ``fallback``: the value
    the page opened with) into a hidden holder, then apply it in the browser (:data:`APPLY_JS`). Raw values
    (preprocess off): while a visitor types into the box, the slider holds the typed number, and Gradio's range
    check refused a tick reading 99999 with a raw error toast. Returns the browser steps that apply it, for the plan
    to follow them (:func:`app.live.hint.plan_after`)."""
    from gradio.context import Context

    held = gr.JSON(None, visible=False, elem_id="max-new-tokens-offered")
    options = dict(show_progress="hidden", concurrency_limit=None, api_visibility="private", preprocess=False)
    apply = dict(js=APPLY_JS, inputs=[held, box], outputs=[box], queue=False, show_progress="hidden",
                 api_visibility="private")
    box.input(None, js=KEPT_JS, queue=False, show_progress="hidden", api_visibility="private")

    def loaded(shown):
        return offer(costs.page_default_tokens(spec, fallback, shown), fallback)

    def ticked(shown, tries):
        update, timer, tries = costs.retry_default_tokens(spec, fallback, shown, tries)
        return offer(update, fallback), timer, tries

    applied = [Context.root_block.load(loaded, inputs=[box], outputs=[held], **options).then(None, **apply)]
    timer, tries = gr.Timer(costs.DEFAULT_TOKENS_RETRY_S), gr.State(0)
    applied.append(timer.tick(ticked, inputs=[box, tries], outputs=[held, timer, tries], **options).then(None, **apply))
    return applied
