"""Suffix decoding in the Live tab, in a real browser (Debian's chromium, the embedded model, loopback only): the same
prompt generated twice in one page visit; the second run drafts from the first run's output, and those passes carry
the small "earlier" mark that the legend explains. Saves ``artifacts/suffix-earlier.png`` and
``artifacts/suffix-legend.png``."""

from __future__ import annotations

import os
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import non_loopback, open_page, requires_chromium  # noqa: E402

APP_MAX_NEW_TOKENS = 24  # read by the app_url fixture
SHOT = Path(__file__).resolve().parent.parent / "artifacts" / "suffix-earlier.png"
GENERATION_TIMEOUT_MS = 300_000

pytestmark = requires_chromium


def _generate(page) -> str:
    page.click("#generate")
    page.wait_for_selector("#status .status-done, #status .status-error", state="detached",
                           timeout=GENERATION_TIMEOUT_MS)
    page.wait_for_selector("#status .status-done, #status .status-error", timeout=GENERATION_TIMEOUT_MS)
    return page.inner_text("#status")


def test_a_second_run_in_the_same_page_marks_drafts_copied_from_the_first(browser, app_url):
    page = open_page(browser, {"width": 1440, "height": 900})
    try:
        page.goto(app_url)
        page.wait_for_selector("#generate")
        page.click("#drafter input")
        page.click("li[role=option]:has-text('Suffix decoding')")
        page.fill("#prompt textarea", "Write a short poem about the sea.")
        assert "Done in" in _generate(page)
        assert page.locator("#spec-output .pass-earlier").count() == 0  # nothing earlier in this page visit yet
        assert "Done in" in _generate(page)
        marked = page.locator("#spec-output .pass-earlier .earlier-mark")
        assert marked.count() > 0
        assert page.locator("#spec-output .tok[title*='from an earlier output of this page visit']").count() > 0
        assert "earlier output" in page.inner_text("#legend")
        assert "identical token ids" in page.inner_text("#stats").lower()
        SHOT.parent.mkdir(exist_ok=True)
        page.locator("#spec-output").screenshot(path=str(SHOT))
        page.locator("#legend").screenshot(path=str(SHOT.with_name("suffix-legend.png")))
        assert not non_loopback(page.requests)
    finally:
        page.context.close()
