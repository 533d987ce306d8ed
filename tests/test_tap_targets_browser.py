"""A new user's trial on a phone (400 px): the Live tab's example-prompt page buttons ("Pages: 1 2 3") were 8 px wide
and 17 px high, hard to tap. assets/style.css makes them at least 24 x 24 px (WCAG 2.5.8) at 1400 px, where the row
keeps its look, and 44 x 44 px on a phone. The same page reads the grey of its reading text (#intro p and the cards'
definitions share --body-text-color-subdued) at WCAG AA contrast on its own background, light and dark. The app
runs with the embedded model in Debian's chromium, loopback only."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import open_page, requires_chromium  # noqa: E402
from test_contrast import AA_TEXT, contrast  # noqa: E402

pytestmark = requires_chromium

PAGE_BUTTONS = ("() => [...document.querySelectorAll('#examples .paginate button')].map(b => {"
                " const r = b.getBoundingClientRect(); return [b.textContent.trim(), r.width, r.height]; })")
GREY = ("() => { const p = document.querySelector('#intro p'); let e = p, bg = 'rgba(0, 0, 0, 0)';"
        " while (e && bg === 'rgba(0, 0, 0, 0)') { bg = getComputedStyle(e).backgroundColor; e = e.parentElement; }"
        " return [getComputedStyle(p).color, bg || getComputedStyle(document.body).backgroundColor]; }")


def _hex(css: str) -> str:
    """"rgb(75, 85, 99)" as "#4b5563"."""
    parts = css[css.index("(") + 1:css.index(")")].split(",")[:3]
    return "#" + "".join(f"{int(float(p)):02x}" for p in parts)


@pytest.mark.parametrize("width, least", [(400, 44), (1400, 24)])
def test_the_example_page_buttons_are_big_enough_to_tap(browser, app_url, width, least):
    page = open_page(browser, {"width": width, "height": 900})
    try:
        page.goto(app_url)
        page.wait_for_selector("#examples .paginate button")
        buttons = page.evaluate(PAGE_BUTTONS)
        assert [b[0] for b in buttons][:2] == ["1", "2"], buttons
        assert all(w >= least and h >= least for _, w, h in buttons), buttons
        if width == 1400:  # the row keeps its desktop look: small boxes, on one line
            assert all(w < 30 and h < 30 for _, w, h in buttons), buttons
            tops = page.evaluate("() => [...document.querySelectorAll('#examples .paginate button')].map("
                                 "b => Math.round(b.getBoundingClientRect().top))")
            assert len(set(tops)) == 1, tops
    finally:
        page.context.close()


@pytest.mark.parametrize("mode, expected", [("light", "#4b5563"), ("dark", "#9ca3af")])
def test_grey_reading_text_has_aa_contrast_light_and_dark(browser, app_url, mode, expected):
    page = open_page(browser, {"width": 1400, "height": 900})
    try:
        page.goto(f"{app_url}?__theme={mode}")
        page.wait_for_selector("#intro p")
        colour, back = page.evaluate(GREY)
        assert _hex(colour) == expected, (colour, back)
        assert contrast(_hex(colour), _hex(back)) >= AA_TEXT, (colour, back)
    finally:
        page.context.close()
