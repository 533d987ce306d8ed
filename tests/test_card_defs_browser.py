"""The cards' definitions on a phone (assets/head.html, part 9): clamped to two lines, and a tap shows them all. A
new-user trial found the toggle out of a keyboard's and a screen reader's reach (a div with no role). Here the page
script runs in Debian's chromium on a page of two cards (served by playwright itself, no app server): at 400 px each definition is a button kept in
step with what it shows, Enter and Space press it; at 1400 px it is plain text."""

from __future__ import annotations

from pathlib import Path

from browser_support import open_page, requires_chromium

pytestmark = requires_chromium

HEAD = (Path(__file__).resolve().parents[1] / "assets" / "head.html").read_text(encoding="utf-8")
CARDS = ('<div class="card"><div class="card-def">first definition, long enough to wrap over several lines at a '
         'phone\'s width, as the Live cards\' are</div></div><div class="card"><div class="card-def">second</div>'
         '</div><button id="other">other</button>')
ATTRS = ("() => [...document.querySelectorAll('.card-def')].map(d => [d.getAttribute('role'), d.getAttribute('tabindex'), "
         "d.getAttribute('aria-expanded')])")


def _page(browser, width: int):
    page = open_page(browser, {"width": width, "height": 800})
    body = f"<html><head>{HEAD}</head><body>{CARDS}</body></html>"  # served at an address: the script reads
    page.route("http://127.0.0.1:9/", lambda route: route.fulfill(body=body, content_type="text/html"))  # storage
    page.goto("http://127.0.0.1:9/")
    page.wait_for_timeout(100)  # the page script marks the definitions at the next frame
    return page


def _open(page) -> bool:
    return page.evaluate("() => document.body.classList.contains('sv-defs-open')")


def test_on_a_phone_each_definition_is_a_button_that_enter_and_space_press(browser):
    page = _page(browser, 400)
    try:
        assert page.evaluate(ATTRS) == [["button", "0", "false"]] * 2
        page.keyboard.press("Tab")  # the first definition is the first stop
        assert page.evaluate("() => document.activeElement.textContent").startswith("first definition")
        page.keyboard.press("Enter")
        page.wait_for_timeout(100)
        assert _open(page) and page.evaluate(ATTRS) == [["button", "0", "true"]] * 2
        page.keyboard.press(" ")
        page.wait_for_timeout(100)
        assert not _open(page) and page.evaluate(ATTRS) == [["button", "0", "false"]] * 2
        assert page.evaluate("() => window.scrollY") == 0  # Space pressed the button, it did not scroll
        page.focus("#other")
        page.keyboard.press("Enter")  # another element's Enter is not the toggle
        assert not _open(page)
        page.locator(".card-def").nth(1).click()  # a tap still toggles
        page.wait_for_timeout(100)
        assert _open(page) and page.evaluate(ATTRS)[0][2] == "true"
    finally:
        page.context.close()


def test_at_1400_px_a_definition_is_plain_text(browser):
    page = _page(browser, 1400)
    try:
        assert page.evaluate(ATTRS) == [[None, None, None]] * 2
        page.locator(".card-def").nth(0).click()
        assert not _open(page)
        page.set_viewport_size({"width": 400, "height": 800})  # a phone turned: buttons; back: plain text again
        page.wait_for_timeout(150)
        assert page.evaluate(ATTRS) == [["button", "0", "false"]] * 2
        page.set_viewport_size({"width": 1400, "height": 800})
        page.wait_for_timeout(150)
        assert page.evaluate(ATTRS) == [[None, None, None]] * 2
    finally:
        page.context.close()


def test_on_a_phone_toasts_sit_at_the_bottom_not_over_the_tab_bar(browser):
    """Gradio's toast container (.toast-wrap, fixed at the top) moves to the window's bottom at 400 px; at 1400 px
    it stays where Gradio puts it."""
    where = ("() => { const r = document.getElementById('toasts').getBoundingClientRect(); "
             "return [Math.round(r.top), Math.round(r.bottom)]; }")
    for width, expected in ((400, (788 - 40, 788)), (1400, (12, 52))):
        page = _page(browser, width)
        try:
            page.evaluate("() => document.body.insertAdjacentHTML('beforeend', '<div class=\"toast-wrap\" "
                          "id=\"toasts\" style=\"position: fixed; top: 12px; height: 40px\"></div>')")
            assert tuple(page.evaluate(where)) == expected, width
        finally:
            page.context.close()
