"""The line under each drafter menu: what the chosen drafter is and what it costs, from the registry (one source),
updated when the choice changes; and menu labels that fit the menu at 1400 px and 400 px (a real browser)."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from browser_support import open_page, requires_chromium  # noqa: E402

from app import build_demo  # noqa: E402
from app.drafter_about import about_html, about_many_html  # noqa: E402
from specviz.drafters.registry import DrafterChoice, choices, describe, register, unregister  # noqa: E402

ABOUT_IDS = {"drafter": "drafter-about", "classroom-drafter": "classroom-drafter-about",
             "batching-drafter": "batching-drafter-about", "batching-check-drafter": "batching-check-drafter-about",
             "arena-drafters": "arena-drafters-about"}
MAX_LABEL_CHARS = 30


def test_every_drafter_says_what_it_is_and_what_it_costs_in_one_short_label_and_line():
    for c in choices():
        assert c.description and c.cost, c.key
        assert c.line() == f"{c.description} Cost: {c.cost}" == describe(c.key)
        assert len(c.label) <= MAX_LABEL_CHARS, c.label  # the longest cut in the menu was 42 characters
        assert c.line().count(". ") <= 3 and len(c.line()) < 240, c.key
    assert describe("suffix").endswith("Cost: next to nothing; it pays on text seen before.")
    assert describe("eagle:tree").startswith(describe("eagle")) and "one pass (greedy only)" in describe("eagle:tree")
    assert describe("nope") == "" and describe("ngram:tree") == ""


def test_the_line_is_the_registrys_and_a_registered_drafter_brings_its_own():
    shown = about_html("oracle")
    assert 'data-drafter="oracle"' in shown and html.escape(describe("oracle")) in shown
    assert "Cost: a full target step per drafted token" in shown
    register(DrafterChoice("toy2", "Toy", "Repeats the last token.", lambda t, o: None, cost="nothing."))
    try:
        assert "Repeats the last token. Cost: nothing." in about_html("toy2")
    finally:
        unregister("toy2")
    many = about_many_html(["ngram", "eagle:tree"], {"eagle:tree": "EAGLE head, tree of 10 nodes (greedy)"})
    assert many.count("<li") == 2 and "<b>N-gram prompt lookup</b>: Copies what followed" in many
    assert "<b>EAGLE head, tree of 10 nodes (greedy)</b>" in many and about_many_html([]).count("<li") == 0


def test_every_drafter_menu_has_its_line_under_it_updated_on_change():
    demo = build_demo(max_new_tokens=40)
    blocks = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    changes = {(t, fn.outputs[0]._id if fn.outputs else None) for fn in demo.fns.values()
               for t, event in fn.targets if event == "change"}
    for menu_id, about_id in ABOUT_IDS.items():
        menu, about = blocks[menu_id], blocks[about_id]
        assert isinstance(about, gr.HTML), about_id
        assert (menu._id, about._id) in changes, menu_id
        first = menu.value if isinstance(menu.value, str) else menu.value[0]
        assert html.escape(describe(first)) in about.value, about_id
    assert blocks["arena-drafters-about"].value.count("<li") == len(blocks["arena-drafters"].value)


# ------------------------------------------------------------------------------------------------ browser


@requires_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_the_line_follows_the_menu_and_every_label_fits(browser, app_url, width):
    page = open_page(browser, {"width": width, "height": 900})
    page.goto(app_url)
    page.wait_for_selector("#drafter-about .sv-drafter-about", timeout=60_000)
    page.click("#drafter input")
    page.click("li[role=option]:has-text('Suffix decoding')")
    page.wait_for_selector("#drafter-about [data-drafter=suffix]", timeout=10_000)
    assert page.inner_text("#drafter-about").strip() == describe("suffix")
    # the menu's labels, measured in the menu box's own font: none is cut
    room, widths = page.locator("#drafter input").first.evaluate(
        """(e, labels) => { const cs = getComputedStyle(e); const c = document.createElement('canvas').getContext('2d');
        c.font = cs.font; return [e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
        labels.map(l => c.measureText(l).width)]; }""", [c.label for c in choices()])
    assert room > 200 and max(widths) <= room, (room, widths)
    page.click("#drafter input")
    heights = page.locator("ul[role=listbox] li").evaluate_all("els => els.map(e => e.getBoundingClientRect().height)")
    assert len(heights) == len(choices()) and max(heights) < 1.5 * min(heights), heights  # no label wraps
    page.screenshot(path=f"/tmp/drafter-menu-{width}.png")
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Classroom").click()
    page.wait_for_selector("#classroom-drafter-about .sv-drafter-about", timeout=10_000)
    page.click("#classroom-drafter input")
    page.click("li[role=option]:has-text('Oracle')")
    page.wait_for_selector("#classroom-drafter-about [data-drafter=oracle]", timeout=10_000)
    assert page.inner_text("#classroom-drafter-about").strip() == describe("oracle")
    page.locator("#classroom-drafter").scroll_into_view_if_needed()
    page.screenshot(path=f"/tmp/drafter-about-classroom-{width}.png")
    page.context.close()
