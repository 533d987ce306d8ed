"""Numbers typed out of a slider's range, said when Generate is pressed (the Live tab).

Gradio's slider box quietly sets the value it sends to the nearest end of its range when Enter is pressed in it,
and keeps showing what was typed: k = -3 ran as k = 1, max new tokens 99999 as 1024, without a word (the box's own
``release`` check, :func:`app.messages.tell_when_clamped`, is not reached that way). So Generate's browser-side
listener also reads what each slider's box shows (:func:`typed_js`, a JSON object name -> text, with the click's
time so that each click is a change) into a hidden box; its ``change`` (:func:`say_clamped`) answers, as the run
starts, with one sentence per clamped value (:func:`app.input_fields.clamp_notice`: "Draft length k is at least 1;
using 1.") in a toast, and puts each box back to the value the run uses.
"""

from __future__ import annotations

import html
import json

import gradio as gr

from app.input_fields import clamp_notice

TYPED_SLIDERS = {"max_new_tokens": ("max-new-tokens", "Max new tokens"), "k": ("draft-length", "Draft length k"),
                 "tree_nodes": ("tree-nodes", "Tree nodes"), "confidence": ("confidence", "The confidence gate"),
                 "window": ("lookahead-window", "Window W"), "ngram": ("lookahead-ngram", "N-gram size N"),
                 "candidates": ("lookahead-candidates", "Candidates G"), "temperature": ("temperature", "Temperature"),
                 "top_p": ("top-p", "Top-p")}
"""The Live tab's sliders read when Generate is pressed: name -> (the slider's elem_id, the name its sentence
gives)."""


def typed_js(names) -> str:
    """A JavaScript expression giving, as JSON text, what the number box of each slider in ``names`` (keys of
    :data:`TYPED_SLIDERS`) shows ({"k": "-3", ...}, null where the box is absent) and the click's time ("at")."""
    ids = {name: TYPED_SLIDERS[name][0] for name in names}
    return ("JSON.stringify(Object.assign({at: Date.now()}, Object.fromEntries(Object.entries("
            + json.dumps(ids) + ").map(([n, id]) => { const box = document.querySelector('#' + id + "
            "' input[type=number]'); return [n, box ? box.value : null]; }))))")


def clamped_values(typed, bounds: dict) -> list[tuple[str, float, str]]:
    """The values clamped by their sliders: ``typed`` is :func:`typed_js`'s JSON text (or None / ""),
    ``bounds`` maps a slider's name to (low, high, hint: "" or who sets the upper end). Returns (name, value
    used, one sentence) for each typed number outside its range, in ``bounds``' order; [] for anything that is not
    such JSON (never raises)."""
    try:
        shown = json.loads(typed) if typed else {}
    except (TypeError, ValueError):
        return []
    if not isinstance(shown, dict):
        return []
    found = []
    for name, (low, high, hint) in bounds.items():
        notice = clamp_notice(shown.get(name), TYPED_SLIDERS[name][1], low, high, hint)
        if notice is not None:
            found.append((name, *notice))
    return found


def say_clamped(typed, bounds: dict) -> list:
    """The hidden box's ``change``: a toast per clamped value (:func:`clamped_values`) and an update per slider
    of ``bounds`` (in that order): the value used where it was clamped, else left as it is."""
    clamped = {name: (used, message) for name, used, message in clamped_values(typed, bounds)}
    for used, message in clamped.values():
        gr.Info(html.escape(message))
    return [gr.update(value=clamped[name][0]) if name in clamped else gr.skip() for name in bounds]
