"""The Classroom's settings and its built-in walkthroughs: the fields a run needs (:data:`FIELDS`, :data:`DEFAULTS`),
the walkthroughs of ``assets/walkthroughs.json``, the menu that picks one and the note under it, and whether settings
are still a walkthrough's (a hand edit away from them is said under the menu, which keeps naming the run on the stage
until Record run opens a new one: :func:`settings_edited`, :func:`recorded_menu`)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Callable, Mapping

import gradio as gr

from specviz.core.engine import MAX_K

ASSETS = Path(__file__).resolve().parents[2] / "assets"
WALKTHROUGHS_PATH = ASSETS / "walkthroughs.json"
STEP_MAX_NEW_TOKENS = 64  # a step run is read pass by pass: keep it short
WHATIF_MAX_NEW_TOKENS = 256
FIELDS = ("prompt", "drafter", "exit_layer", "draft_model", "k", "temperature", "seed", "max_new_tokens", "target",
          "repetition_penalty")
"""The settings a classroom run needs, in the order the handlers take them (and the share link carries them)."""
DEFAULTS = {"prompt": "", "drafter": "ngram", "exit_layer": 0, "draft_model": "", "k": 4, "temperature": 0.0,
            "seed": 0, "max_new_tokens": 24, "target": "embedded", "repetition_penalty": 1.0}
SLIDER_RANGES = {"k": (1, MAX_K), "temperature": (0, 2), "max_new_tokens": (1, STEP_MAX_NEW_TOKENS)}
"""The settings the tab shows as sliders: field -> (low, high), the slider's range."""
WHOLE_NUMBERS = ("exit_layer", "k", "seed", "max_new_tokens")
"""The number settings that are whole numbers (:data:`CASTS` reads them with int)."""
CUSTOM, CUSTOM_LABEL = "custom", "Your own prompt and settings"


def load_walkthroughs(path: Path = WALKTHROUGHS_PATH) -> list[dict]:
    """The built-in walkthroughs: [{id, title, menu, description, compare, settings: {field: value}}] (settings are
    partial; missing fields take :data:`DEFAULTS`; ``menu``, optional, is the short label of the walkthrough menu;
    ``compare``, optional, the id of the walkthrough its note points to, :func:`compare_html`)."""
    return json.loads(path.read_text(encoding="utf-8"))


MENU_LABEL_MAX = 28
"""The most characters of a walkthrough menu label: the closed menu shows its choice on one line, about 260 px wide
in the Classroom's narrow column on a desktop and on a 400 px phone alike; the full title stands in the note under
the menu."""


def menu_choices(walkthroughs: list[dict]) -> list[tuple[str, str]]:
    """The walkthrough menu's (label, id) pairs: each walkthrough's short ``menu`` label (its title when it has
    none), then "Your own prompt and settings"."""
    return [(w.get("menu") or w["title"], w["id"]) for w in walkthroughs] + [(CUSTOM_LABEL, CUSTOM)]


def walkthrough_settings(walkthrough: dict) -> dict:
    """A walkthrough's full settings (:data:`DEFAULTS` filled in)."""
    return {**DEFAULTS, **walkthrough.get("settings", {})}


CASTS: dict[str, Callable[[str], object]] = {
    "prompt": str, "drafter": str, "draft_model": str, "target": str,
    "exit_layer": int, "k": int, "seed": int, "max_new_tokens": int, "temperature": float, "repetition_penalty": float,
}


def plain(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def same_setting(a, b) -> bool:
    """Two values of one setting are the same (numbers compared as numbers, text without outer spaces)."""
    try:
        return abs(float(a) - float(b)) < 1e-9
    except (TypeError, ValueError):
        return str(a if a is not None else "").strip() == str(b if b is not None else "").strip()


def matches(walkthrough: dict, values: Mapping[str, object]) -> bool:
    """``values`` are the walkthrough's settings (the target aside: a walkthrough runs on the app's target)."""
    wanted = walkthrough_settings(walkthrough)
    return all(same_setting(wanted[f], values.get(f)) for f in FIELDS if f != "target")


def compare_html(walkthrough: dict, walkthroughs: list[dict] | None = None) -> str:
    """The way to the walkthrough that ``walkthrough["compare"]`` names (optional: the same prompt and settings with
    one thing changed, e.g. a poorly and a better matched drafter): a sentence naming its menu label, with a link that
    opens it (``?tab=classroom&preset=<id>``); "" when it names none or an unknown one."""
    other = next((w for w in (load_walkthroughs() if walkthroughs is None else walkthroughs)
                  if w["id"] == walkthrough.get("compare")), None)
    if other is None:
        return ""
    label = html.escape(other.get("menu") or other["title"])
    href = html.escape(f"?tab=classroom&preset={other['id']}", quote=True)
    return (f' <span class="cr-compare">Compare it run by run with “{label}” (the same prompt and settings but the '
            f'drafter): pick it in the menu above, or <a href="{href}">open it</a>.</span>')


def note_html(walkthrough: dict | None) -> str:
    """The note under the walkthrough menu: the full title, the description, and the way to the walkthrough it
    compares with (:func:`compare_html`); "" for none."""
    if not walkthrough:
        return ""
    return (f'<div class="cr-note"><b>{html.escape(walkthrough["title"])}.</b> '
            f'{html.escape(walkthrough["description"])}{compare_html(walkthrough)}</div>')


EDITED = ("You changed the settings below, so they are no longer this walkthrough's: the run on the stage is "
          "still its recorded run. Press Record run to record a run with your settings.")
"""Said under the menu when the settings were edited away from the open walkthrough's while a run is on the stage
(:func:`settings_edited`): the menu keeps naming the run shown until another run opens."""
EDITED_NO_RUN = ("You changed the settings below, so they are no longer this walkthrough's. Press Record run to "
                 "record a run with your settings.")
"""The same when no run is on the stage (a link with changed settings, a walkthrough without a recorded run)."""


def edited_note_html(walkthrough: dict, shown: bool) -> str:
    """The note under the menu for settings edited away from ``walkthrough``'s: its note (:func:`note_html`), then
    :data:`EDITED` (``shown``: a run is on the stage) or :data:`EDITED_NO_RUN`."""
    said = EDITED if shown else EDITED_NO_RUN
    return note_html(walkthrough) + f'<div class="cr-note cr-edited">{html.escape(said)}</div>'


NUMBER_SETTINGS = ("exit_layer", "k", "temperature", "seed", "max_new_tokens", "repetition_penalty")
"""The settings typed into number boxes. One left empty, or typed over with letters (the browser empties a number box
then), holds no value yet: its check puts one back when the box is left, and :func:`settings_edited` decides the note
from that value (a trial typed "abc" in Seed, got the same 0 back and read that the settings had changed)."""


def settings_edited(walkthrough_id: str, stepper, *fields):
    """A setting was changed by hand (``fields`` in :data:`FIELDS` order; ``stepper``: the run on the stage, or
    None). The menu keeps the selected walkthrough, the name of the run on the stage, until another run opens (Record
    run: :func:`recorded_menu`; the menu; a file), so a run is never shown under another run's name; the note says
    plainly when the settings are no longer the walkthrough's (:func:`edited_note_html`) and is the plain note again
    when they are. Returns the note (HTML), or ``gr.skip()`` when no walkthrough is selected ("Custom") or a number
    box is empty (:data:`NUMBER_SETTINGS`: called again with the value its check settles on)."""
    walkthrough = {w["id"]: w for w in load_walkthroughs()}.get(walkthrough_id)
    values = dict(zip(FIELDS, fields))
    if walkthrough is None or any(values.get(name) in (None, "") for name in NUMBER_SETTINGS):
        return gr.skip()
    if matches(walkthrough, values):
        return note_html(walkthrough)
    return edited_note_html(walkthrough, stepper is not None)


def recorded_menu(walkthrough_id: str, fields) -> tuple:
    """The menu and its note once Record run has opened the run it recorded with ``fields`` (in :data:`FIELDS`
    order): the selected walkthrough and its plain note when they are still its settings, else "Your own prompt and
    settings" and no note. Returns (menu update, note HTML)."""
    walkthrough = {w["id"]: w for w in load_walkthroughs()}.get(walkthrough_id)
    if walkthrough is not None and matches(walkthrough, dict(zip(FIELDS, fields))):
        return gr.update(value=walkthrough["id"]), note_html(walkthrough)
    return gr.update(value=CUSTOM), ""


def unknown_preset_message(preset: str, walkthroughs: list[dict]) -> str:
    """What to say for a link whose ``preset=`` names no walkthrough: that it is unknown, the known ids, and what
    the tab shows instead."""
    known = ", ".join(w["id"] for w in walkthroughs) or "none"
    return (f"The link asks for the walkthrough “{preset}”, which this app does not have. Known walkthroughs: "
            f"{known}. The settings below are the link's other values over the defaults: pick a walkthrough, or "
            "press Record run to record them.")
