"""The Live tab's banner "The prompt is empty: ..." (Generate pressed with an empty prompt,
:data:`app.inputs.EMPTY_PROMPT`) goes as soon as the prompt box holds something: a trial typed a prompt, changed k,
and read the stale red banner under the newer line about k. In the browser only (:func:`clears_js`, no server round
trip per keystroke); any other line of the status (a box's notice above it, a run's summary) stays.
"""

from __future__ import annotations

import json

from app import render
from app.inputs import EMPTY_PROMPT
from app.live.outputs import progress_html

BANNER = render.status_html(EMPTY_PROMPT, "error")
"""The status line of a run refused for its empty prompt (:func:`app.messages.report` of that InputError)."""
READY = render.status_html("Ready: press Generate, or type your own prompt or pick an example.", "info")
"""The Live tab's status before any run; what the status says when the banner was all it held."""


def clears_js() -> str:
    """The prompt box's change listener (JS, inputs: prompt, status, the status's copy under Generate; outputs the
    last two): with a prompt that is not blank, :data:`BANNER` leaves both (:data:`READY` in its place when it was
    all the status held; its copy then empty, as before any run); anything else comes back unchanged."""
    copy, empty_copy = BANNER.replace(' role="status"', "", 1), progress_html("")
    return f"""(prompt, status, progress) => {{
  const banner = {json.dumps(BANNER)}, copy = {json.dumps(copy)}, emptyCopy = {json.dumps(empty_copy)};
  status = status || ''; progress = progress || '';
  if (!String(prompt || '').trim() || !status.includes(banner)) return [status, progress];
  let rest = status.split(banner).join('');
  if (!rest.trim()) rest = {json.dumps(READY)};
  let shown = progress.split(copy).join('');
  if (shown === emptyCopy) shown = '';
  return [rest, shown];
}}"""


def wire_prompt_check(ui: dict) -> None:
    """Clear the empty-prompt banner from ``ui["status"]`` and ``ui["progress"]`` when ``ui["prompt"]`` changes to
    something (:func:`clears_js`): typed, pasted or an example picked; browser-side, unqueued."""
    ui["prompt"].change(None, js=clears_js(), inputs=[ui["prompt"], ui["status"], ui["progress"]],
                        outputs=[ui["status"], ui["progress"]], queue=False, show_progress="hidden",
                        api_visibility="private")
