"""The Live tab's banner "The prompt is empty: ..." (Generate pressed with an empty prompt,
:data:`app.inputs.EMPTY_PROMPT`) goes as soon as the prompt box holds something: a trial typed a prompt, changed k,
and read the stale red banner under the newer line about k. In the browser only (:func:`clears_js`, no server round
trip per keystroke); any other line of the status (a box's notice above it, a run's summary) stays. The panes' line
"No result: ... (see the message above)" (:data:`app.live.outputs.NO_RESULT`, a first run refused) goes with it: a
trial read it pointing at a message already gone; each pane says what it said before any run again.
"""

from __future__ import annotations

import html
import json
import re

from app import render
from app.inputs import EMPTY_PROMPT
from app.live.outputs import BASE_PLACEHOLDER, NO_RESULT, SPEC_PLACEHOLDER, progress_html

BANNER = render.status_html(EMPTY_PROMPT, "error")
"""The status line of a run refused for its empty prompt (:func:`app.messages.report` of that InputError)."""
READY = render.status_html("Ready: press Generate, or type your own prompt or pick an example.", "info")
"""The Live tab's status before any run (until the page's first plan, :func:`ready_status`); what the status says
when the banner was all it held and no plan was made yet."""
READY_MARK = '<span class="status-text">ℹ Ready'
"""How a ready status begins (:data:`READY`, :func:`ready_status`)."""
_READY_LINE = re.compile(r'<div class="status status-info" role="status"><span class="status-text">ℹ Ready[:.][^<]*'
                         r'</span></div>')


def ready_status(plan: str) -> str:
    """The ready status with a run's plan (``plan``: :func:`app.costs.run_plan`'s short form, e.g. "48 new tokens:
    about 14 s (12–17 s)"): "Ready. 48 new tokens: about 14 s (12–17 s). Press Generate, or type your own prompt or
    pick an example."."""
    return render.status_html(f"Ready. {plan}. Press Generate, or type your own prompt or pick an example.", "info")


def with_plan(status, plan: str) -> str | None:
    """``status`` (the Live status's HTML) with its ready line, :data:`READY` or an earlier :func:`ready_status`,
    replaced by ``ready_status(plan)`` (:data:`READY` for a ``plan`` of ""; a box's notice above it stays); None when
    it holds no ready line (a run's status, a failed run's banner: they stay as they are)."""
    if not isinstance(status, str):
        return None
    found = _READY_LINE.search(status)
    if found is None:
        return None
    return status[:found.start()] + (ready_status(plan) if plan else READY) + status[found.end():]


def clears_js() -> str:
    """The prompt box's change listener (JS, inputs: prompt, status, the status's copy under Generate, the speculative
    and the baseline pane; outputs the last four): with a prompt that is not blank, :data:`BANNER` leaves both status
    boxes (the latest ready status with its plan, kept by :data:`app.live.hint.KEEP_READY_JS`, or :data:`READY`, in its
    place when it was all the status held; its copy then empty, as before any run), and a
    pane that says :data:`~app.live.outputs.NO_RESULT` says its placeholder before any run again
    (:data:`~app.live.outputs.SPEC_PLACEHOLDER`, :data:`~app.live.outputs.BASE_PLACEHOLDER`); anything else comes
    back unchanged (a pane showing an earlier run's tokens, or no banner to clear)."""
    copy, empty_copy = BANNER.replace(' role="status"', "", 1), progress_html("")
    no_result = html.escape(NO_RESULT)  # as render.placeholder_html writes it
    fresh = [render.placeholder_html(SPEC_PLACEHOLDER), render.placeholder_html(BASE_PLACEHOLDER)]
    return f"""(prompt, status, progress, spec, base) => {{
  const banner = {json.dumps(BANNER)}, copy = {json.dumps(copy)}, emptyCopy = {json.dumps(empty_copy)};
  const noResult = {json.dumps(no_result)}, fresh = {json.dumps(fresh)};
  status = status || ''; progress = progress || '';
  if (!String(prompt || '').trim() || !status.includes(banner)) return [status, progress, spec, base];
  let rest = status.split(banner).join('');
  if (!rest.trim()) rest = window.svReadyStatus || {json.dumps(READY)};
  let shown = progress.split(copy).join('');
  if (shown === emptyCopy) shown = '';
  const panes = [spec, base].map((pane, i) => String(pane || '').includes(noResult) ? fresh[i] : pane);
  return [rest, shown, ...panes];
}}"""


def wire_prompt_check(ui: dict) -> None:
    """Clear the empty-prompt banner from ``ui["status"]`` and ``ui["progress"]``, and the "No result" line from the
    panes ``ui["spec_out"]`` and ``ui["base_out"]``, when ``ui["prompt"]`` changes to something (:func:`clears_js`):
    typed, pasted or an example picked; browser-side, unqueued."""
    boxes = [ui["status"], ui["progress"], ui["spec_out"], ui["base_out"]]
    ui["prompt"].change(None, js=clears_js(), inputs=[ui["prompt"], *boxes], outputs=boxes, queue=False,
                        show_progress="hidden", api_visibility="private")
