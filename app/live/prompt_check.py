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

from app import render
from app.inputs import EMPTY_PROMPT
from app.live.outputs import BASE_PLACEHOLDER, NO_RESULT, SPEC_PLACEHOLDER, progress_html

BANNER = render.status_html(EMPTY_PROMPT, "error")
"""The status line of a run refused for its empty prompt (:func:`app.messages.report` of that InputError)."""
READY = render.status_html("Ready: press Generate, or type your own prompt or pick an example.", "info")
"""The Live tab's status before any run; what the status says when the banner was all it held."""


def clears_js() -> str:
    """The prompt box's change listener (JS, inputs: prompt, status, the status's copy under Generate, the speculative
    and the baseline pane; outputs the last four): with a prompt that is not blank, :data:`BANNER` leaves both status
    boxes (:data:`READY` in its place when it was all the status held; its copy then empty, as before any run), and a
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
  if (!rest.trim()) rest = {json.dumps(READY)};
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
