"""The page address and the share box: settings to a query string (:func:`share_query`) and back
(:func:`settings_from_query`), the link the share box offers, the tab a link opens, and what a page load applies
(:func:`on_load`: the address's settings and a recorded run opened at once)."""

from __future__ import annotations

import math
from typing import Mapping
from urllib.parse import urlencode

import gradio as gr

from app import render
from app.inputs import clamp_notice
from app.classroom.lesson import view
from app.classroom.recordings import open_shipped
from app.classroom.walkthroughs import (CASTS, CUSTOM, DEFAULTS, FIELDS, SLIDER_RANGES, WHOLE_NUMBERS,
                                        edited_note_html, load_walkthroughs, matches, note_html, plain,
                                        unknown_preset_message, walkthrough_settings)


def share_query(values: Mapping[str, object], present: bool = False, preset: str | None = None,
                walkthroughs: list[dict] | None = None) -> str:
    """The query string ("?tab=classroom&...") that reopens the Classroom tab with these settings.

    Without ``preset``, the prompt and the drafter are always written and other fields only where they differ from
    :data:`DEFAULTS`; with a known walkthrough id as ``preset``, only the fields that differ from that walkthrough.
    The exit layer is written only for the early-exit drafter, the draft model only for the model drafter.
    """
    by_id = {w["id"]: w for w in (load_walkthroughs() if walkthroughs is None else walkthroughs)}
    base = walkthrough_settings(by_id[preset]) if preset in by_id else None
    params: dict[str, object] = {"tab": "classroom"}
    if base is not None:
        params["preset"] = preset
    for name in FIELDS:
        value = values.get(name, DEFAULTS[name])
        if name == "exit_layer" and values.get("drafter") != "early-exit":
            continue
        if name == "draft_model" and values.get("drafter") != "model":
            continue
        if value is None or (value == "" and name != "prompt"):
            continue
        always = base is None and name in ("prompt", "drafter")
        if always or not _same(value, (base or DEFAULTS)[name]):
            params[name] = plain(value)
    if present:
        params["present"] = 1
    return "?" + urlencode(params)


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def settings_from_query(params: Mapping[str, str], walkthroughs: list[dict] | None = None) -> dict | None:
    """Settings from a page address' query parameters, or None when they hold nothing for the classroom.

    ``preset=<walkthrough id>`` starts from that walkthrough; any field given explicitly overrides it; values that
    do not parse are ignored (the field keeps its default). The result has every field of :data:`FIELDS` plus
    ``present`` (bool), ``preset`` (the walkthrough id, or "") and ``unknown_preset`` (a ``preset`` the link names
    that is no walkthrough's id, or ""; the settings then start from :data:`DEFAULTS`).
    """
    params = {str(k): str(v) for k, v in dict(params).items()}
    if params.get("tab") != "classroom" and "preset" not in params:
        return None
    walkthroughs = load_walkthroughs() if walkthroughs is None else walkthroughs
    by_id = {w["id"]: w for w in walkthroughs}
    preset = params.get("preset", "")
    values = walkthrough_settings(by_id[preset]) if preset in by_id else dict(DEFAULTS)
    for name in FIELDS:
        if name in params:
            try:
                values[name] = CASTS[name](params[name])
            except ValueError:
                pass
    values["present"] = params.get("present", "") in ("1", "true", "yes", "on")
    values["preset"] = preset if preset in by_id else ""
    values["unknown_preset"] = preset if preset and preset not in by_id else ""
    return values


def share_link(*values):
    """The share box's value: a query string (made absolute in the browser by the next step). Takes the
    :data:`FIELDS`, the presentation flag and the walkthrough id, as raw payloads (its events run with preprocess
    off: a number typed out of a slider's range while a run recorded must not meet Gradio's range check); the
    numbers are read as the controls hold them (:func:`held`)."""
    *fields, present, preset = values
    return share_query(held(dict(zip(FIELDS, fields))), bool(present), preset or None)


def held(values: Mapping[str, object]) -> dict:
    """The settings ``values`` (raw payloads: a slider's box may hold any number typed, a number box None) as the
    tab's controls hold them: a slider's number within its range (:data:`SLIDER_RANGES`; one typed outside it is
    the nearest end, as the slider sets itself when its box is left, and its own release says so: app.messages
    .tell_when_clamped), a whole-number setting (:data:`WHOLE_NUMBERS`) rounded, and a number setting that holds
    no number None (the link then leaves it out: its default). Other settings are returned as given."""
    out = dict(values)
    for name in (*SLIDER_RANGES, *WHOLE_NUMBERS, "repetition_penalty"):
        if name not in out:
            continue
        number = _finite(out[name])
        if number is not None and name in SLIDER_RANGES:
            found = clamp_notice(number, name, *SLIDER_RANGES[name])
            number = float(found[0]) if found else number
        out[name] = None if number is None else round(number) if name in WHOLE_NUMBERS else plain(number)
    return out


def _finite(value) -> float | None:
    """A raw payload as a finite number, or None (None, "", "abc", nan, inf, a bool)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def share_follows(shown: str, *values):
    """The share box after another run was opened (a walkthrough from the menu, a recording file): a box holding a
    link gets the link to what is now open (:func:`share_link`; ``values``: its inputs), so a teacher never hands out
    the previous walkthrough's; an empty box stays empty."""
    if not (shown or "").strip():
        return ""
    return share_link(*values)


def tab_to_open(params: Mapping[str, str], tab_ids: tuple[str, ...] = ()):
    """The page's tab selection for a page address: the tab its ``tab=`` names when that is one of ``tab_ids`` (the
    app's tab ids), the Classroom for ``tab=classroom`` or for classroom settings without a ``tab=`` (a bare
    ``?preset=...``), else ``gr.skip()`` (the page's first tab). A ``preset=`` never overrides the tab asked for:
    ``?tab=arena&preset=x`` opens the Arena (the Classroom still applies and names the preset)."""
    asked = str(params.get("tab", "") or "")
    if asked == "classroom" or (not asked and settings_from_query(params) is not None):
        return gr.Tabs(selected="classroom")
    return gr.Tabs(selected=asked) if asked in tab_ids else gr.skip()


def on_load(request: gr.Request = None, tab_ids: tuple[str, ...] = ()):
    """Page load: apply the classroom settings in the address, if any, open the tab the address asks for
    (:func:`tab_to_open`; ``tab_ids``: the app's tab ids), and open a recorded run: the walkthrough's when the
    settings are a walkthrough's (a link with ``preset=<id>`` and nothing changed, or no classroom settings at all:
    the first walkthrough). Returns (walkthrough, note, *FIELDS, present, stepper, status, *view, download, tab
    selection)."""
    params = dict(getattr(request, "query_params", None) or {}) if request is not None else {}
    params = {str(k): str(v) for k, v in params.items()}
    tab = tab_to_open(params, tab_ids)
    walkthroughs = load_walkthroughs()
    if walkthroughs and params.get("tab") == "classroom" and "preset" not in params and not any(
            name in params for name in FIELDS):
        params["preset"] = walkthroughs[0]["id"]  # "?tab=classroom" alone: the first walkthrough
    values = settings_from_query(params)
    by_id = {w["id"]: w for w in walkthroughs}
    if values is None:  # no classroom settings in the address: the first walkthrough's run, ready to step
        opened_run = open_shipped(walkthroughs[0]) if walkthroughs else (gr.skip(),) * 8
        return (*(gr.skip(),) * (len(FIELDS) + 3), *opened_run, tab)
    preset = by_id.get(values["preset"])
    if preset is not None and matches(preset, values):
        opened_run = open_shipped(preset)
    else:
        said = ("Settings from the link: press Record run to record this run.", "info")
        if values["unknown_preset"]:
            said = (unknown_preset_message(values["unknown_preset"], walkthroughs), "error")
        opened_run = (None, render.status_html(*said), *view(None), gr.update(value=None, interactive=False))
    note = note_html(preset) if preset is None or opened_run[0] is not None else edited_note_html(preset, False)
    return (gr.update(value=values["preset"] or CUSTOM), note, *(values[f] for f in FIELDS),
            values["present"], *opened_run, tab)
