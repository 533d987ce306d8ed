"""What a visitor reads when something goes wrong, and what the operator's log records.

:func:`message_for` turns any exception into one sentence (never a stack trace); :func:`log_failure` logs a
failed run; :func:`report` does both and returns the error status line. Every tab uses these three;
:func:`tell_when_clamped` says so when a number typed into a slider's box is out of its range, and
:func:`tell_when_invalid` when a number box is left with a value its run would refuse (:func:`enter_commits_js`: or
when Enter is pressed in it). Each sentence is said once, in the status line of the tab it concerns, and not also as a
toast (a toast could outlive its cause, and said the same sentence twice), except a slider's clamp
(:data:`CLAMP_TOAST_S`). A stopped run
(:class:`specviz.core.events.RunCancelled`) is not an error: the device runner (:mod:`app.device`) ends it quietly,
so it never reaches here.
"""

from __future__ import annotations

import html
import json
import logging
import re
import traceback

import gradio as gr

from app import render
from app.inputs import (EXIT_LAYER, NumberField, clamp_notice, emptied_slider_notice, empty_notice, exit_layer_notice,
                        kept_notice, number_notice)
from specviz.core.events import NumericalError

log = logging.getLogger("specviz.app")


def message_for(error: BaseException) -> str:
    """A user-facing sentence for ``error``: the message itself for bad input, a model that cannot be loaded
    or a numerical failure (those are written for visitors); "Not supported yet: ..." for a missing feature;
    else "Something went wrong (Type: first line). The details are in the server log." Never raises."""
    from specviz.runtime.models import ModelLoadError

    try:
        if isinstance(error, (ValueError, ModelLoadError, NumericalError)):  # InputError, PolicyError included
            return str(error) or "Invalid input."
        if isinstance(error, NotImplementedError):
            return f"Not supported yet: {error}"
        first = (str(error).strip().splitlines() or [""])[0]
    except Exception:  # noqa: BLE001 - an exception whose str() fails must not break the tab
        first = ""
    return f"Something went wrong ({type(error).__name__}: {first}). The details are in the server log."


def log_failure(what: str, error: BaseException) -> None:
    """Log a failed run for the operator: a user's mistake (bad input, a model that cannot be found or loaded)
    as one line, anything else with its traceback. ``what`` names the run ("generation", "arena", ...)."""
    from specviz.runtime.models import ModelLoadError

    if isinstance(error, (ValueError, ModelLoadError)):
        log.info("%s refused: %s", what, error)
    else:
        log.error("%s failed:\n%s", what, "".join(traceback.format_exception(error)))


CLAMP_TOAST_S = 5
"""How long the toast of a slider's clamp (:func:`clamped`) stays, the one toast the app keeps besides its status
line: Gradio clamps a slider's value in the browser, so a run started at once (k = -3, Enter, Generate) gets the
clamped value with no note of its own, and its first status replaces the line that said the clamp (a browser test:
tests/test_live_browser.py, k typed out of range with Enter). 5 s, not Gradio's 10: at 400 px the toast covers the
top of the page meanwhile (a trial)."""


def clamped(value, name: str, low: float, high: float, hint: str = "", whole: bool = False) -> tuple:
    """The handler of :func:`tell_when_clamped`: for a number typed outside [low, high] (``value``: the slider's raw
    payload), an info status line and a short toast (:data:`CLAMP_TOAST_S`) that say which value runs use
    (:func:`app.inputs.clamp_notice`), and the slider set to it; for a box left empty or with what is not a number,
    which the page put back to its earlier value (:func:`enter_commits_js`; ``value``: ``{"kept": 4, "bad":
    false}``; ``{"ignore": true}``: an empty value the page is putting back, said by the put-back's own release,
    :func:`kept_js`), the same with
    :func:`app.inputs.kept_notice` ("Draft length k was empty; kept 4."); for an emptied box the page could not put
    back (a slider without an elem_id), which the slider reads as 0 and clamps, :func:`app.inputs.emptied_slider_notice`
    ("... was empty; using 1."); with ``whole`` (a slider of whole steps) a fraction is said and rounded too; (skip,
    skip) for a value the run takes."""
    if isinstance(value, dict) and value.get("ignore"):
        return gr.skip(), gr.skip()
    if isinstance(value, dict):
        found = kept_notice(value.get("kept"), name, low, high, bool(value.get("bad")))
    elif value is None or value == "":
        found = emptied_slider_notice(name, low, high)
    else:
        found = clamp_notice(value, name, low, high, hint, whole)
    if found is None:
        return gr.skip(), gr.skip()
    used, message = found
    gr.Info(html.escape(message), duration=CLAMP_TOAST_S)
    return gr.update(value=used), render.status_html(message, "info")


def tell_when_clamped(slider: gr.Slider, status: gr.HTML, name: str, hint: str = "") -> None:
    """Say so when a number typed into ``slider``'s box is out of its range. Gradio's slider sends its ``release``
    event with the typed number when the box is left and then quietly sets itself to the nearest end; this listener
    reads that raw number (preprocess off: Gradio's range check would refuse it) and answers with a line above
    what ``status`` shows, and a short toast (:func:`clamped`, :func:`kept_status`: a run's summary stays under it); a
    later value of the box's own that the run takes removes that line. Queued, one release of the box at a time and in
    the order sent (its own concurrency group of 1; each takes a millisecond), so that a release answered late cannot
    undo a later one. Every release is sent (``trigger_mode="multiple"``): the click into the box already sends one (the
    pointer's, with the old value), and with Gradio's default ("once") the typed number's release was dropped while
    that one was still queued, as on a busy machine: k = 99 then ran k = 16 without a word. Returns the release event
    (a caller chains what follows the settled value with ``.then``)."""
    low, high = slider.minimum, slider.maximum
    tag = slider.elem_id or name
    whole = float(slider.step or 0).is_integer() and float(low).is_integer()  # k, max new tokens: whole steps

    def said(value, current=None):
        return kept_status(clamped(value, name, low, high, hint, whole), current, tag, value)

    released = slider.release(said, inputs=[slider, status], outputs=[slider, status], preprocess=False,
                              show_progress="hidden", concurrency_limit=1, concurrency_id=f"release-{tag}",
                              api_visibility="private", trigger_mode=RELEASE_TRIGGER_MODE,
                              js=kept_js(slider.elem_id) if slider.elem_id else None)
    return _settled_after(released, slider.elem_id)


def kept_js(elem_id: str) -> str:
    """The browser side of a slider's release (:func:`tell_when_clamped`) with elem_id ``elem_id``: when the page
    has just put an emptied box or one holding what is not a number back to its earlier value
    (:func:`enter_commits_js` marks the box with the value put back), that value goes as ``{"kept": 4, "bad":
    true|false}`` so that :func:`clamped` says so; any other release goes unchanged.

    The kept value is read from the box's mark, not from the release's own ``value``: the page puts the value back
    and the slider sends its release in the same blur, and Gradio's copy of the value could still be the one before
    (empty). A release that carries an empty value from a box the page puts back (it knows an earlier value) goes as
    ``{"ignore": true}`` (:func:`clamped` changes nothing): a fresh-clone run sent one beside the put-back's own
    release, both were answered at once, and the one answered last ("was empty; using 1.", the slider set to 1)
    replaced "was empty; kept 4.". A release of the same value as the box's previous one within a second goes as
    ``{"ignore": true}`` too: one edit left with Tab can send two, and each said it (a toast "Info (2)" with the same
    sentence twice)."""
    box = json.dumps(f"#{elem_id} input[type=number]")
    return f"""(value, ...rest) => {{
  {settling_js(elem_id)}
  const box = document.querySelector({box});
  const emptied = box && box.dataset.svEmptied;
  if (!emptied) {{
    if ((value === null || value === '') && box && box.dataset.svKept) return [{{ignore: true}}, ...rest];
    const now = Date.now(), last = box && box.svLastRelease;  // one edit can send two releases of one value
    if (last && last.value === value && now - last.at < 1000) return [{{ignore: true}}, ...rest];
    if (box) box.svLastRelease = {{value, at: now}};
    return [value, ...rest];
  }}
  const kept = Number(box.dataset.svPutBack);
  delete box.dataset.svEmptied;
  delete box.dataset.svPutBack;
  return [{{kept: Number.isFinite(kept) ? kept : value, bad: emptied === 'bad'}}, ...rest];
}}"""


RELEASE_TRIGGER_MODE = "multiple"
"""How :func:`tell_when_clamped` sends a slider's releases: each one (see there why not Gradio's "once")."""


def refused(value, field: NumberField, parse=None, target=None) -> tuple:
    """The handler of :func:`tell_when_invalid`: for a value its run would refuse (``value``: the box's raw payload),
    an info status line with the Run path's own message and the value used instead
    (:func:`app.inputs.number_notice`; the early-exit layer: :func:`app.inputs.exit_layer_notice`, against the layers
    of ``target``, the tab's target spec, when they are known without loading it), and the box set to it; for an
    emptied box, its default put back and said in the status line (:func:`app.inputs.empty_notice`); (skip, skip)
    for a value the run accepts. Never raises."""
    letters = isinstance(value, dict) and bool(value.get("letters"))  # letters typed: the box was left empty
    try:
        if letters or value is None or value == "":
            used, message = empty_notice(field, letters)
            return gr.update(value=used), render.status_html(message, "info")
        if field is EXIT_LAYER:
            found = exit_layer_notice(value, target)
        else:
            found = number_notice(value, field, parse)
    except Exception:  # noqa: BLE001 - a check must never break the page
        log.exception("checking %s failed", field.name)
        found = None
    if found is None:
        return gr.skip(), gr.skip()
    used, message = found
    return gr.update(value=used), render.status_html(message, "info")


def enter_commits_js(container: str) -> str:
    """The page-load script that makes Enter in a number box inside ``container`` (a CSS selector of one tab's
    controls, e.g. "#controls") commit it as leaving the box does: it sends the box a ``blur`` event (the box keeps
    the focus), so a number box gets its check (:func:`tell_when_invalid`) at once; without this Enter did nothing
    until the box was left. A slider's own box is included: Enter with 100000, 0 or an empty box is said at once
    (:func:`tell_when_clamped`) and the run gets the clamped value, in every tab (measured in chromium:
    tests/test_slider_boxes_browser.py).

    A slider's own box left empty, or holding what is not a number, gets its earlier value back
    (:func:`_slider_boxes_js`).

    Scoped to ``container`` on purpose: one listener for the whole page made Enter in the "Why it works" tab's boxes,
    which answer Enter themselves, say everything twice. A second load of the same script (a page built twice in
    one window) adds no second listener. Register it with ``Context.root_block.load(None, js=...)``."""
    flag = json.dumps(container)
    return f"""() => {{
  const seen = (window.svEnterCommits = window.svEnterCommits || new Set());
  if (seen.has({flag})) return;
  seen.add({flag});
  document.addEventListener('keydown', (ev) => {{
    const box = ev.target;
    if (ev.key !== 'Enter' || !(box instanceof HTMLInputElement) || box.type !== 'number'
        || !box.closest({flag})) return;
    box.dispatchEvent(new FocusEvent('blur'));
  }}, true);
{_slider_boxes_js(flag)}
}}"""


def _slider_boxes_js(flag: str) -> str:
    """The part of :func:`enter_commits_js` for slider boxes inside the container ``flag`` (a CSS selector as a JS
    string literal): listeners on the document, in the capture phase.

    A slider's box (Gradio marks it ``data-testid="number-input"``; a gr.Number box has no such mark) left empty, or
    holding what is not a number (Chromium refuses letters in a number box, so "abc" typed over "4" leaves it
    empty), is put back to the value it had before the edit, and its release says so
    (:func:`kept_js`, :func:`clamped`: "Draft length k was empty; kept 4."): Gradio's slider would read it as 0 and
    clamp it to its minimum, losing the earlier value. This happens before the slider's own blur handler, so the
    release, and a Generate pressed next, carry the kept value. What is not a number ("4e") is noted when typed: on a
    busy page Svelte's bound value, one keystroke late, set the box to "" before Enter, and it was said as empty.
    Letters, which Chromium drops from the box, are noted when pressed, so "abc" is said as not a number, not as
    empty (a trial: "the user did type something")."""
    return f"""  const sliderBox = (box) => box instanceof HTMLInputElement && box.type === 'number'
    && box.closest({flag}) && box.dataset.testid === 'number-input';
  document.addEventListener('keydown', (ev) => {{
    const box = ev.target;
    if (sliderBox(box) && {LETTER_KEY_JS})
      box.dataset.svLetters = 'bad';
  }}, true);
  document.addEventListener('focusin', (ev) => {{
    if (!sliderBox(ev.target)) return;
    ev.target.dataset.svKept = ev.target.value;
    ev.target.dataset.svLetters = '';
  }}, true);
  document.addEventListener('input', (ev) => {{
    const box = ev.target;
    if (sliderBox(box)) box.dataset.svBad = box.value === '' && box.validity.badInput ? 'bad' : '';
  }}, true);
  document.addEventListener('blur', (ev) => {{
    const box = ev.target;
    if (!sliderBox(box)) return;
    const block = box.closest('.block[id]');  // its check in flight from now on: before the clamp's change event
    if (block) {{
      const s = (window.svSettling = window.svSettling || {{}}), m = s[block.id] || {{n: 0}};
      s[block.id] = {{n: m.n + 1, at: Date.now(), early: (m.early || 0) + 1}};
    }}
    const kept = box.dataset.svKept;
    const letters = box.dataset.svLetters;
    box.dataset.svLetters = '';
    if (box.value === '' && kept) {{
      box.dataset.svEmptied = box.validity.badInput || box.dataset.svBad || letters ? 'bad' : 'empty';
      box.dataset.svPutBack = kept;
      box.value = kept;
      box.dispatchEvent(new Event('input', {{bubbles: true}}));
    }} else if (box.value !== '') {{
      const n = Math.min(Math.max(Number(box.value), Number(box.min)), Number(box.max));
      box.dataset.svKept = String(n);
    }}
  }}, true);"""


LETTER_KEY_JS = "ev.key.length === 1 && !ev.ctrlKey && !ev.metaKey && !/[0-9.eE+-]/.test(ev.key)"
"""A JS test of keydown event ``ev``: a printable key a number cannot hold (a letter), noted so that a box Chromium
leaves empty after it is said as "not a number" (:func:`_slider_boxes_js`, :func:`_keep_letters_js`)."""


def _keep_letters_js(elem_id: str) -> str:
    """On page load, for the box that keeps its value with elem_id ``elem_id``: letters pressed in it are noted
    (Chromium drops them from a number box, which is then left empty), so its blur says "was not a number", not
    "was empty", as a slider's box does (:func:`_slider_boxes_js`). Once per page."""
    box = json.dumps(f"#{elem_id}")
    return f"""() => {{
  const seen = (window.svKeepBoxes = window.svKeepBoxes || new Set());
  if (seen.has({box})) return;
  seen.add({box});
  const mine = (b) => b instanceof HTMLInputElement && b.type === 'number' && b.closest({box});
  document.addEventListener('keydown', (ev) => {{
    if (mine(ev.target) && {LETTER_KEY_JS})
      ev.target.dataset.svLetters = 'bad';
  }}, true);
  document.addEventListener('focusin', (ev) => {{ if (mine(ev.target)) ev.target.dataset.svLetters = ''; }}, true);
}}"""


def _keep_blur_js(elem_id: str) -> str:
    """The browser side of a keeping box's blur (:func:`tell_when_invalid` with ``keep``): an empty value from a box
    where letters were typed goes as ``{"letters": true}`` (:func:`kept_or_refused` says "was not a number")."""
    box = json.dumps(f"#{elem_id} input[type=number]")
    return f"""(value, ...rest) => {{
  {settling_js(elem_id)}
  const box = document.querySelector({box});
  const letters = box && box.dataset.svLetters === 'bad';
  if (box) box.dataset.svLetters = '';
  return [(value === null || value === '') && letters ? {{letters: true}} : value, ...rest];
}}"""


def kept_or_refused(value, kept, field: NumberField) -> tuple:
    """The handler of :func:`tell_when_invalid` for a box that keeps its earlier value (``keep``), worded as a
    slider's box is (:func:`clamped`): an emptied box (``value`` None or "": Chromium also empties a number box typed
    over with letters, sent as ``{"letters": true}`` by :func:`_keep_blur_js`) is set back to ``kept``, the last
    value the run accepted ("N runs per side was empty; kept 50.", or "... was not a number; kept 50." for letters,
    :func:`app.inputs.kept_notice`); a number outside the box's range is set to the nearest end ("N runs per
    side is at most 1000 here; using 1000.", :func:`app.inputs.clamp_notice`); each as an info status line.
    Anything else (no earlier value known, a fraction in a whole-number box) as :func:`refused`. Never raises."""
    letters = isinstance(value, dict) and bool(value.get("letters"))  # letters typed: the box was left empty
    if letters:
        value = None
    try:
        if value is None or value == "":
            found = kept_notice(kept, field.name, field.low, field.high, letters) if kept not in (None, "") else None
        else:
            found = clamp_notice(value, field.name, field.low, field.high)
    except Exception:  # noqa: BLE001 - a check must never break the page
        log.exception("checking %s failed", field.name)
        found = None
    if found is None:
        return refused(value, field)
    used, message = found
    return gr.update(value=used), render.status_html(message, "info")


def accepted_value(value, field: NumberField):
    """``value`` as the run reads it when the run accepts it (``field``'s :meth:`NumberField.parse`), else
    ``gr.skip()``: what a box that keeps its earlier value remembers (:func:`tell_when_invalid`). Never raises."""
    if value is None or value == "":
        return gr.skip()
    try:
        return field.parse(value)
    except Exception:  # noqa: BLE001 - not a value the run takes: keep the one remembered
        return gr.skip()


def tell_when_invalid(box: gr.Number, status: gr.HTML, field: NumberField, parse=None, target=None,
                      keep: bool = False):
    """Check a number box when it is left, not only when Run is pressed: a value its run would refuse (``field``'s
    range, or ``parse``, the Run path's own parser, e.g. :func:`app.inputs.parse_exit_layer`) gets a line in
    ``status`` with the Run path's message and the value used instead, and the box is set to it; an emptied box
    gets its default back, said in ``status`` (:func:`refused`). ``target``: the tab's target model box, read along
    for the early-exit layer (:data:`app.inputs.EXIT_LAYER`), checked against that model's own layers when they are
    known without loading it (:func:`specviz.runtime.models.layer_count`; nothing is loaded here). The raw payload is
    read (preprocess off: no Gradio check runs first); queued, as a slider's release is; no concurrency limit (it does
    no work).

    ``keep``: the box remembers the last value the run accepts (a ``gr.State``, set on each change) and an emptied
    box gets that value back, not the default, and a number out of range is said as a slider's is
    (:func:`kept_or_refused`). Either way the sentence stands above the status the tab showed, marked as the box's
    (:func:`kept_status`, which a phone's page reads to show it under the box: assets/head.html), and goes when the
    box is left with another value (a trial typed 0, read "using 20", typed 100 and still read "using 20"). Letters
    typed in the box are said as "not a number", not as an empty box (:func:`_keep_letters_js`). Returns the blur
    event (a caller chains what follows the settled value with ``.then``)."""
    tag = box.elem_id or field.name
    letters = dict(js=_keep_blur_js(box.elem_id)) if box.elem_id else {}
    if box.elem_id:
        gr.context.Context.root_block.load(None, js=_keep_letters_js(box.elem_id), queue=False,
                                           api_visibility="private")
    if keep:
        kept = gr.State(box.value)
        box.change(lambda value: accepted_value(value, field), inputs=[box], outputs=[kept], preprocess=False,
                   queue=False, show_progress="hidden", api_visibility="private")
        left = box.blur(lambda value, earlier=None, current=None: kept_status(kept_or_refused(value, earlier, field),
                                                                              current, tag, value),
                        inputs=[box, kept, status], outputs=[box, status], preprocess=False, show_progress="hidden",
                        concurrency_limit=None, api_visibility="private", **letters)
        return _settled_after(left, box.elem_id)
    inputs = [box, status] if target is None else [box, status, target]

    def said(value, current=None, spec=None):
        return kept_status(refused(value, field, parse, spec), current, tag, value)

    left = box.blur(said, inputs=inputs, outputs=[box, status], preprocess=False, show_progress="hidden",
                    concurrency_limit=None, api_visibility="private", **letters)
    return _settled_after(left, box.elem_id)


SETTLE_WAIT_MS = 4000
"""How long a run's button waits at most for the boxes' checks in flight (:func:`settled_inputs_js`): each takes a
millisecond on the server and one round trip; a check older than this is taken as lost (its mark then stops
counting)."""


def settling_js(elem_id: str) -> str:
    """The JS statement that marks the box ``elem_id``'s check as in flight (``window.svSettling[elem_id]``: how
    many, and since when), run in the browser side of its blur or release (:func:`kept_js`, :func:`_keep_blur_js`);
    :func:`_settled_after` clears it once the check's answer is on the page. A slider's box is marked earlier, as it
    is left (:func:`_slider_boxes_js`, ``early``: its release then counts no second time): the slider's clamp fires
    its change before the release, and a plan sent on that change wrote an older sentence back (a busy trial)."""
    key = json.dumps(elem_id)
    return (f"{{ const s = (window.svSettling = window.svSettling || {{}}), m = s[{key}] || {{n: 0}}; "
            f"if (m.early) {{ m.early -= 1; m.at = Date.now(); }} else s[{key}] = {{n: m.n + 1, at: Date.now()}}; }}")


def _settled_after(event, elem_id: str | None):
    """Clear the in-flight mark of box ``elem_id``'s check (:func:`settling_js`) once ``event`` (its blur or
    release) has ended and its answer is on the page. Returns ``event`` (callers chain what follows it)."""
    if elem_id:
        key = json.dumps(elem_id)
        event.then(None, js=f"() => {{ const s = window.svSettling || {{}}; "
                            f"if (s[{key}] && --s[{key}].n <= 0) delete s[{key}]; }}",
                   queue=False, show_progress="hidden", api_visibility="private")
    return event


def settled_inputs_js(inputs: list, js: str | None = None) -> str:
    """The browser side of a run's button whose event reads ``inputs`` (components, in the event's order; with
    ``inputs_kwargs``, its values' order): first ``js`` (an earlier browser side that returns its inputs, e.g.
    :func:`app.stop_marks.sent_js`), then, while a box's check is in flight (:func:`settling_js`: the box was left by
    the very press of the button, whose mousedown blurs it), it waits for that check's answer (at most
    :data:`SETTLE_WAIT_MS`) and sends the value the box settled on, read from the page, in place of the one typed.

    Without it one press did not start a run: the button's event carried the typed value (N = 3) while the box's own
    check, sent at the mousedown, was still on its round trip; the run refused 3, and the check's answer (built on the
    status before the press) then replaced that refusal with "N runs per side is at least 20 here; using 20." (a
    trial, measured: the Check button did not move between mousedown and click). Now the check's answer lands first
    and the run gets 20 (its status then replaces the box's sentence)."""
    ids = json.dumps([getattr(c, "elem_id", None) for c in inputs])
    first = js or "(...args) => args"
    return f"""async (...args) => {{
  let out = await ({first})(...args);
  const ids = {ids}, limit = {SETTLE_WAIT_MS}, started = Date.now();
  const live = () => Object.entries(window.svSettling || {{}}).filter(([, m]) => Date.now() - m.at < limit);
  const waited = ids.map((id, i) => (id && (window.svSettling || {{}})[id] ? i : -1)).filter((i) => i >= 0);
  if (!live().length) return out;
  while (live().length && Date.now() - started < limit) await new Promise((r) => setTimeout(r, 25));
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));  // the answer drawn in the box
  out = [...out];
  for (const i of waited) {{
    const box = document.querySelector('#' + ids[i] + ' input[type=number]');
    if (box && box.value !== '' && Number.isFinite(Number(box.value))) out[i] = Number(box.value);
  }}
  return out;
}}"""


def leading_notice(current) -> str:
    """The sentence about a box on top of the status ``current`` (HTML; :func:`kept_status`), "" when none: a
    status that is planned again (:func:`app.batching.plan.refresh`) keeps it on top until the box changes it."""
    found = _NOTICE.match(current) if isinstance(current, str) else None
    return current[:found.end()] if found else ""


_NOTICE = re.compile(r'^<div class="status-notice" data-box="([^"]*)"(?: data-used="([^"]*)")?>.*?</div></div>',
                     re.DOTALL)


NOTHING_RUNNING = "Nothing is running."  # a Stop with no run of this session to stop (said, not "Stopping…")


def nothing_to_stop(current: str | None, button: str) -> str:
    """The status after a Stop pressed with no run of the session's going: "Nothing is running." above ``current``,
    the status the tab showed, so the last run's summary stays under it (a trial: the Arena's Stop after "✓ Done"
    left "Stopping…" for good); another press replaces the line (:func:`kept_status`, marked as ``button``'s)."""
    return kept_status((gr.skip(), render.status_html(NOTHING_RUNNING, "info")), current, button)[1]


def kept_status(result: tuple, current: str | None, box: str = "", value=None) -> tuple:
    """:func:`refused`'s or :func:`clamped`'s ``result`` (box update, status line) with the status line put above
    ``current``, the status the tab showed (HTML; None or empty: nothing), and marked as ``box``'s (its elem_id) with
    the value it set the box to, so that a run's summary stays under the sentence about a box (trials lost the Live
    and Classroom run summaries to "Draft length k is at least 1 here…" and "Seed must be…"). An earlier such
    sentence on top of ``current`` is replaced, not stacked. A result that says nothing (a value the run takes,
    ``gr.skip()``) changes nothing, except that ``value``, when given and not the value ``box``'s own sentence on
    top set, takes that sentence away (a trial typed 5 after "using 1." and the sentence stayed)."""
    update, said = result
    found = _NOTICE.match(current) if isinstance(current, str) else None
    if not isinstance(said, str):
        if value is None or found is None or found.group(1) != box or _same_number(value, found.group(2)):
            return result
        return result[0], current[found.end():]
    earlier = current[found.end():] if found else (current if isinstance(current, str) else "")
    used = update.get("value") if isinstance(update, dict) else None
    mark = f' data-used="{html.escape(str(used), quote=True)}"' if used is not None else ""
    return update, f'<div class="status-notice" data-box="{html.escape(box, quote=True)}"{mark}>{said}</div>{earlier}'


def _same_number(value, shown: str | None) -> bool:
    """Whether a box's raw ``value`` is the number ``shown`` (a notice's data-used; None: unknown, so the same); a
    value that is not a number (an ignored release, ``{"ignore": true}``) counts as the same: it changes nothing."""
    if shown is None:
        return True
    try:
        return float(value) == float(shown)
    except (TypeError, ValueError):
        return True


def report(what: str, error: BaseException, notes=()) -> str:
    """Log ``error`` (see :func:`log_failure`) and return its message as an error status line (HTML): every caller
    shows it in its tab's status line, so no toast says it again (a toast outlived the failure it named). ``notes``:
    the running status's notes, kept under the message where a run failed after showing part of its timings (the
    thread cap's, :func:`app.estimates.threads_note`: no timing stands without it); none for a refusal."""
    log_failure(what, error)
    return render.status_html(message_for(error), "error", notes=notes)
