"""A reload during a Live run, in a real browser (Debian's chromium via playwright, the embedded model, loopback only).

The server ends a page's run when the page goes, and the reloaded page starts with an empty history; a new user's
trial met both without a word. The reloaded page now says, above its status, that the run stopped with the page and
that its earlier runs went too (assets/head.html, part 7), until its next Generate; that next run starts at once (the
old one is not still holding the device). Screenshot: artifacts/reload-note.png (look at it).
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import non_loopback, requires_chromium  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "artifacts"
APP_MAX_NEW_TOKENS = 256  # read by conftest's app_url: a run long enough to reload in its middle
RUN_TIMEOUT_MS = 240_000

pytestmark = requires_chromium


def _generate(page, tokens: int) -> None:
    box = page.locator("#max-new-tokens input[type=number]")
    box.fill(str(tokens))
    box.press("Tab")
    page.click("#generate")
    page.wait_for_selector("#status .status-busy, #status .status-wait", timeout=30_000)


def test_a_reload_during_a_run_says_the_run_and_the_history_went(browser, app_url):
    context = browser.new_context(viewport={"width": 400, "height": 860}, device_scale_factor=1)
    page = context.new_page()
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    try:
        page.goto(app_url)
        page.wait_for_selector("#generate", timeout=60_000)
        _generate(page, 8)  # a first run, finished: the page's history holds it
        page.wait_for_selector("#status .status-done", timeout=RUN_TIMEOUT_MS)
        assert page.locator("#history table.history tr").count() == 2  # the header and the run
        _generate(page, APP_MAX_NEW_TOKENS)  # a second, reloaded in its middle
        page.wait_for_function("() => /pass \\d+/.test(document.getElementById('status').innerText)",
                               timeout=RUN_TIMEOUT_MS)
        page.reload()
        page.wait_for_selector("#sv-reload-note", timeout=30_000)
        note = page.inner_text("#sv-reload-note")
        assert note == ("ℹ The run going when this page was reloaded stopped with it: the server ends a page's run "
                        "when the page goes. Its history (1 earlier run) went too: a reloaded page starts a new one.")
        order = page.evaluate("() => [...document.querySelectorAll('#sv-reload-note, #status')].map(e => e.id)")
        assert order == ["sv-reload-note", "status"]  # above the status
        assert page.locator("#history table.history").count() == 0  # the new page's history: empty
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "reload-note.png"))
        _generate(page, 8)  # the next run goes at once (the old one gave the device back) and the note goes
        assert page.locator("#sv-reload-note").count() == 0
        page.wait_for_selector("#status .status-done", timeout=60_000)
        page.reload()  # a reload with no run going says nothing
        page.wait_for_selector("#status", timeout=30_000)
        page.wait_for_timeout(500)
        assert page.locator("#sv-reload-note").count() == 0
    finally:
        context.close()
    assert not non_loopback(requests), non_loopback(requests)

