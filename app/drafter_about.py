"""The line under a drafter menu: what the chosen drafter is and what it costs.

One source: the registry's one-line description and cost (:func:`specviz.drafters.registry.describe`), so the Live,
Classroom and Batching menus and the Arena's drafter list say the same, and a drafter added with
:func:`specviz.drafters.registry.register` brings its own line. :func:`add_about` puts the line right under a menu
and updates it when the choice changes (in the browser's round trip, outside the queue: it does no work).
"""

from __future__ import annotations

import functools
import html

import gradio as gr

from specviz.drafters.registry import describe, label_of

STYLE = "font-size: 0.85em; line-height: 1.35; color: var(--body-text-color-subdued); margin: 2px 2px 0;"


def about_html(key: str | None) -> str:
    """The line for one drafter key (a variant such as "eagle:tree" too) as HTML: ``<div class="sv-drafter-about"
    data-drafter=KEY>``; an empty div for no choice or an unknown key."""
    key = str(key or "")
    line = describe(key) if key else ""
    return (f'<div class="sv-drafter-about" data-drafter="{html.escape(key, quote=True)}" style="{STYLE}">'
            f"{html.escape(line)}</div>")


def about_many_html(keys, labels: dict[str, str] | None = None) -> str:
    """The lines for several chosen drafters (the Arena's list), in the order given, each named by its menu label
    (``labels``: key -> label; else the registry's); an empty div for none."""
    labels = labels or {}
    items = "".join(f'<li data-drafter="{html.escape(str(k), quote=True)}"><b>{html.escape(labels.get(str(k)) or label_of(str(k)))}'
                    f"</b>: {html.escape(describe(str(k)))}</li>" for k in (keys or []) if describe(str(k)))
    body = f'<ul style="margin: 0; padding-left: 1.1em;">{items}</ul>' if items else ""
    return f'<div class="sv-drafter-about" style="{STYLE}">{body}</div>'


def add_about(menu: gr.Dropdown | gr.CheckboxGroup, elem_id: str, value) -> gr.HTML:
    """Put the line(s) for ``menu``'s choice right here in the layout (call it just after creating ``menu``), with
    ``value`` the menu's first value, and update it on every change of the choice. Returns the HTML component."""
    if isinstance(menu, gr.CheckboxGroup):
        render = functools.partial(about_many_html, labels={str(v): str(label) for label, v in menu.choices})
    else:
        render = about_html
    about = gr.HTML(render(value), elem_id=elem_id, padding=False)
    menu.change(render, inputs=[menu], outputs=[about], queue=False, show_progress="hidden",
                api_visibility="private")
    return about
