"""Lookahead's k is N−1: in a real browser (Debian's chromium, loopback only) the "Draft length k" slider and its
number box are not editable while lookahead is chosen (a trial reported the box beside N as editable), follow N, and
become editable again for another drafter."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import open_page, requires_chromium  # noqa: E402

pytestmark = requires_chromium

K_BOX, K_RANGE = "#draft-length input[type=number]", "#draft-length input[type=range]"


def _choose(page, label: str) -> None:
    page.click("#drafter input")
    page.click(f"li[role=option]:has-text('{label}')")


def test_k_is_not_editable_beside_n_for_lookahead(browser, app_url):
    page = open_page(browser, {"width": 1400, "height": 900})
    try:
        page.goto(app_url)
        page.wait_for_selector("#generate")
        assert page.is_editable(K_BOX)  # the default drafter takes its own k
        _choose(page, "Lookahead")
        page.wait_for_selector("#lookahead-ngram", state="visible")
        page.wait_for_function(f"() => document.querySelector({K_BOX!r}).disabled")
        ngram = int(page.input_value("#lookahead-ngram input[type=number]"))
        assert page.input_value(K_BOX) == str(ngram - 1)
        assert not page.is_editable(K_BOX) and page.is_disabled(K_RANGE)
        reset = page.locator("#draft-length button")  # the slider's reset arrow puts no other k back either
        assert reset.count() == 0 or reset.first.is_disabled()
        page.fill("#lookahead-ngram input[type=number]", "5")
        page.press("#lookahead-ngram input[type=number]", "Enter")
        page.wait_for_function(f"() => document.querySelector({K_BOX!r}).value === '4'")
        assert not page.is_editable(K_BOX)
        page.locator("#controls").screenshot(path="artifacts/lookahead-k.png")
        _choose(page, "N-gram")
        page.wait_for_function(f"() => !document.querySelector({K_BOX!r}).disabled")
        assert page.is_editable(K_BOX) and not page.is_disabled(K_RANGE)
    finally:
        page.context.close()
