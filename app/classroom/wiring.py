"""The Classroom tab's events: opening runs (the walkthrough menu, a recording file, the page load), recording,
stepping and Play, hand edits of the settings, the share box and what-if k. Opening and stepping a recorded run is
no model work, so those events skip the queue; runs on the model go through it."""

from __future__ import annotations

import gradio as gr

from app.classroom.links import on_load, share_follows, share_link
from app.classroom.recordings import open_upload, open_walkthrough, upload_started
from app.classroom.running import record_pressed, record_run
from app.classroom.stepping import play_tick, play_toggle, step_first, step_next, step_prev, step_rejection
from app.classroom.walkthroughs import FIELDS, settings_edited
from app.classroom.whatif import whatif_rerun, whatif_run
from app.messages import enter_commits_js, tell_when_clamped


KEYS_JS = """
if (!window.__specvizClassroomKeys) {
  window.__specvizClassroomKeys = true;
  const present = (t) => !!(t && t.closest && t.closest('#classroom-present'));  // the presentation view's box
  const space = (ev) => ev.key === ' ' || ev.code === 'Space';
  document.addEventListener('keydown', (ev) => {
    const next = document.getElementById('classroom-next');
    if (!next || next.offsetParent === null || ev.altKey || ev.ctrlKey || ev.metaKey) return;  // tab not shown
    const t = ev.target;
    const tag = t && t.tagName ? t.tagName.toUpperCase() : '';
    const box = tag === 'INPUT' && (t.type || '').toLowerCase() === 'checkbox';  // e.g. "presentation": no typing
    if (t && (t.isContentEditable || (tag === 'INPUT' && !box) || tag === 'TEXTAREA' || tag === 'SELECT')) return;
    const press = (id) => { const b = document.getElementById(id); if (b && !b.disabled) b.click(); };
    if (ev.key === 'ArrowRight') { ev.preventDefault(); press('classroom-next'); }
    else if (ev.key === 'ArrowLeft') { ev.preventDefault(); press('classroom-prev'); }
    else if (space(ev) && tag !== 'BUTTON' && (!box || present(t))) {  // a focused button or another checkbox
      ev.preventDefault(); press('classroom-play');  // answers space itself (it clicks, it ticks)
    }
  });
  document.addEventListener('keyup', (ev) => {  // a checkbox ticks on space's keyup: not the presentation view's
    if (space(ev) && present(ev.target)) ev.preventDefault();
  });
}
"""
"""On page load: the tab's keys (:data:`app.classroom.layout.INTRO` names them). → and ← step, space plays or pauses,
wherever focus is but in a field being typed into or on a button (a focused button answers space itself). On the
presentation view's checkbox space plays or pauses too, and never unticks it (a presenter who had just ticked it
lost the big type and nothing played); Enter (Gradio's checkbox answers it) or a click ticks and unticks it."""
PRESENT_JS = """(on) => {
  document.body.classList.toggle('sv-present', !!on);
  window.scrollTo(0, 0);  // the view starts at the top
  const stage = document.getElementById('classroom-stage');
  if (stage) { stage.setAttribute('tabindex', '-1'); stage.focus({preventScroll: true}); }
}"""
"""When the presentation view's checkbox is ticked or unticked (by a click, Enter, or a link's ``present=1``): the
view on or off, from the top of the page, and focus moved off the box to the stage (focusable by script only,
``tabindex=-1``), so the keys that follow step and play the walkthrough."""
ABSOLUTE_JS = ("(q) => (typeof q === 'string' && q.startsWith('?')) ? "
               "window.location.origin + window.location.pathname + q : q")


QUIET = {"show_progress": "hidden", "api_visibility": "private"}
ENTER_COMMITS_JS = enter_commits_js("#classroom-controls, #whatif")
"""On page load: Enter in a number box of the Classroom's settings or of the what-if accordion commits it as leaving
the box does (:func:`app.messages.enter_commits_js`, the script the Live, Arena and Batching tabs register for their
own controls): a slider's box (k, temperature, max new tokens, largest k, tokens per run) holding a number out of
range is set at once to the value runs use and one sentence says so (:func:`app.messages.tell_when_clamped`: "Draft
length k is at most 16 here; using 16."), an emptied one gets its earlier value back ("... was empty; kept 4."), and
a number box (seed, early-exit layer, repetition penalty) is checked at once (:func:`app.messages.tell_when_invalid`).
Before, Enter did nothing there: a new user's k = 99 stayed in its box until the next click."""


def drafter_changed(drafter: str):
    """Show the exit layer for early exit, the draft model box for 'model'."""
    return gr.update(visible=drafter == "early-exit"), gr.update(visible=drafter == "model")


def wire(ui: dict, tabs: gr.Tabs | None) -> None:
    """Every event of the tab: opening runs (walkthrough menu, file, page load), recording, stepping, playing,
    settings, sharing and what-if k."""
    settings = [ui[name] for name in FIELDS]
    views = [ui[name] for name in ("progress", "caption", "table", "chart", "output")]
    opened_outputs = [ui["stepper"], ui["status"], *views, ui["download"]]
    # the share link's events (after a run, after opening another, the share button) read the settings raw
    # (preprocess off): a number typed out of a slider's range meanwhile must not meet Gradio's range check (its raw
    # toast); share_link reads it as the slider holds it
    share = {"fn": share_link, "inputs": [*settings, ui["present"], ui["walkthrough"]], "outputs": [ui["share"]],
             "preprocess": False}
    paused = [ui["playing"], ui["timer"], ui["play"]]  # opening another run pauses Play (stop_playing)
    ui["record"].click(record_pressed, outputs=[*paused, ui["status"]], queue=False, **QUIET)  # at once, before the run
    # the menu names the run on the stage: it changes when the recorded run opens (record_run), not at an edit
    ui["record"].click(record_run, inputs=[ui["walkthrough"], *settings],
                       outputs=[*opened_outputs, ui["walkthrough"], ui["note"]], concurrency_limit=4,
                       concurrency_id="classroom-run", **QUIET).then(**share, **QUIET).then(
        None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS, **QUIET)
    # opening a recorded run is no model work either: outside the queue, like a step
    follows = {**share, "fn": share_follows, "inputs": [ui["share"], *share["inputs"]]}
    ui["walkthrough"].input(open_walkthrough, inputs=[ui["walkthrough"]],
                            outputs=[ui["note"], *settings, *opened_outputs, *paused], queue=False, **QUIET).then(
        **follows, queue=False, **QUIET).then(None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS,
                                              **QUIET)  # the share box follows the open walkthrough
    # a click on the button (before the file picker) replaces an earlier upload's message: a file Gradio itself
    # refuses in the browser (over its size limit) never reaches open_upload, and its toast must not sit under
    # another file's refusal
    ui["upload"].click(upload_started, outputs=[ui["status"]], queue=False, **QUIET)
    ui["upload"].upload(open_upload, inputs=[ui["upload"]],
                        outputs=[ui["walkthrough"], ui["note"], *settings, *opened_outputs, *paused],
                        concurrency_limit=None, **QUIET).then(**follows, queue=False, **QUIET).then(
        None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS, **QUIET)
    _wire_stepping(ui, views)
    # a hand edit away from the walkthrough's settings is said in its note; preprocess off: a number typed out of a
    # slider's range arrives before the slider clamps it (Gradio's range check would answer with a server error), and
    # settings_edited compares the raw values as numbers
    edited = {"fn": settings_edited, "inputs": [ui["walkthrough"], ui["stepper"], *settings], "outputs": [ui["note"]],
              "queue": False, "preprocess": False, **QUIET}
    for box in settings:
        box.input(**edited)
    ui["drafter"].change(drafter_changed, inputs=[ui["drafter"]], outputs=[ui["exit_layer"], ui["draft_model"]],
                         queue=False, **QUIET)
    ui["present"].change(None, inputs=[ui["present"]], js=PRESENT_JS, **QUIET)
    for check in _wire_checks(ui):  # the note again once a box's check settled its value ("abc" in Seed: 0 back)
        check.then(**edited)
    ui["share_btn"].click(**share, **QUIET).then(None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS,
                                                 **QUIET)
    _wire_whatif(ui)
    load_outputs = [ui["walkthrough"], ui["note"], *settings, ui["present"], *opened_outputs]
    load_outputs += [tabs] if tabs is not None else []

    def load(request: gr.Request = None):
        if tabs is None:
            return on_load(request)[:-1]
        return on_load(request, tuple(str(t.id) for t in tabs.children if isinstance(t, gr.Tab)))

    gr.context.Context.root_block.load(load, outputs=load_outputs, queue=False, **QUIET)


def _wire_checks(ui: dict) -> list:
    """A setting's box committed (left, or Enter: :data:`ENTER_COMMITS_JS`) with a value runs would not use: a
    slider's number out of range is set to the nearest end and said (:func:`app.messages.tell_when_clamped`), a number
    box a run would refuse is set to the value used and said (:func:`app.messages.tell_when_invalid`), in the other
    tabs' words. Nothing is said while a box is being typed into. Returns the checks' events, one a box (the caller
    chains what reads the settled value)."""
    gr.context.Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    checks = [tell_when_clamped(ui["max_new_tokens"], ui["status"], "Max new tokens"),
              tell_when_clamped(ui["k"], ui["status"], "Draft length k"),
              tell_when_clamped(ui["temperature"], ui["status"], "Temperature")]
    from app.inputs import EXIT_LAYER, REPETITION_PENALTY, SEED, parse_exit_layer  # number boxes, checked when left
    from app.messages import tell_when_invalid
    checks.append(tell_when_invalid(ui["exit_layer"], ui["status"], EXIT_LAYER, parse_exit_layer,
                                    target=ui["target"]))
    checks.append(tell_when_invalid(ui["repetition_penalty"], ui["status"], REPETITION_PENALTY))
    if "seed" in ui:
        checks.append(tell_when_invalid(ui["seed"], ui["status"], SEED))
    return checks


def _wire_stepping(ui: dict, views: list) -> None:
    """The step buttons and Play's timer. A step is pure Python on the session's stepper (well under a millisecond
    with the shared rejection charts), so it skips the queue: a plain request, answered at once, however many
    sessions step while a live run computes."""
    for name, handler in (("next", step_next), ("prev", step_prev), ("rejection", step_rejection),
                          ("first", step_first)):
        ui[name].click(handler, inputs=[ui["stepper"]], outputs=[ui["stepper"], *views], queue=False,
                       trigger_mode="always_last", **QUIET)  # clicks during a step: one more step after it
    playing, timer = ui["playing"], ui["timer"]
    ui["play"].click(play_toggle, inputs=[ui["stepper"], playing],
                     outputs=[playing, timer, ui["play"], ui["stepper"], *views], concurrency_limit=None, **QUIET)
    timer.tick(play_tick, inputs=[ui["stepper"], playing], outputs=[playing, timer, ui["play"], ui["stepper"], *views],
               concurrency_limit=None, **QUIET)


def _wire_whatif(ui: dict) -> None:
    """Run what-if and the re-run at the recommended k (on the device, in line with other runs)."""
    state = gr.State(None)
    inputs = [ui[name] for name in ("prompt", "drafter", "exit_layer", "draft_model", "seed", "target", "k_max",
                                    "tokens")]
    outputs = [state, ui["whatif_status"], ui["whatif_chart"], ui["whatif_result"], ui["whatif_rerun"]]
    ui["whatif_run"].click(whatif_run, inputs=inputs, outputs=outputs, concurrency_limit=4,
                           concurrency_id="classroom-run", **QUIET)
    ui["whatif_rerun"].click(whatif_rerun, inputs=[state], outputs=outputs, concurrency_limit=4,
                             concurrency_id="classroom-run", **QUIET)
    tell_when_clamped(ui["tokens"], ui["whatif_status"], "Tokens per run")
    tell_when_clamped(ui["k_max"], ui["whatif_status"], "Largest k")
