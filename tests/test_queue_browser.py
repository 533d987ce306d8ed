"""Two visitors at once, in a real browser (Debian's chromium via playwright), on the embedded model, loopback only.

Both pages press Generate while the device is busy: each is told its place in line, then both runs finish (one
after the other, so neither's timing is disturbed) and each page shows its own prompt's output: the baseline pane
of each equals standard decoding of that page's prompt, computed here directly with the engine.
"""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import non_loopback, open_page, requires_chromium  # noqa: E402

MAX_NEW_TOKENS = 16
APP_MAX_NEW_TOKENS = MAX_NEW_TOKENS  # read by conftest's app_url
TIMEOUT_MS = 120_000
PROMPTS = ("Name three fruits that are red.", "Write one sentence about the moon.")

pytestmark = requires_chromium


def _reference(embedded, prompt: str) -> str:
    """Standard (greedy) decoding of ``prompt``, as the baseline pane must show it."""
    from specviz.core.engine import GenerationConfig, collect, standard_generate
    from specviz.runtime.models import encode_prompt

    prompt_ids = encode_prompt(embedded.tokenizer, prompt)
    events = list(standard_generate(embedded, prompt_ids, GenerationConfig(max_new_tokens=MAX_NEW_TOKENS)))
    ids = collect(events, embedded.tokenizer, prompt_ids).token_ids
    return embedded.tokenizer.decode(ids, skip_special_tokens=False)


def _pane_text(page, pane: str) -> str:
    return page.eval_on_selector_all(f"#{pane} span[data-kind]", "els => els.map(e => e.textContent).join('')")


def test_two_pages_generate_at_once_and_each_shows_its_own_result(browser, app_url, embedded):
    from app import device

    pages = [open_page(browser, {"width": 1280, "height": 900}) for _ in PROMPTS]
    try:
        for page, prompt in zip(pages, PROMPTS):
            page.goto(app_url)
            page.wait_for_selector("#generate")
            page.fill("#prompt textarea", prompt)
        assert device.DEVICE.acquire("browser-test", "a test holds the device", timeout=5)
        try:
            for page in pages:  # both press Generate while the device is busy
                page.click("#generate")
            for page in pages:  # each is told its place in line
                page.wait_for_selector("#status .status-wait:has-text('ahead of yours')", timeout=30_000)
            places = sorted(page.inner_text("#status") for page in pages)
            assert "1 run is ahead" in places[0] and "2 runs are ahead" in places[1], places
        finally:
            device.DEVICE.release("browser-test")
        for page in pages:
            page.wait_for_selector("#status .status-done, #status .status-error", timeout=TIMEOUT_MS)
            assert "Done in" in page.inner_text("#status")
        shown = [_pane_text(page, "baseline-output") for page in pages]
        expected = [_reference(embedded, prompt) for prompt in PROMPTS]
        assert shown == expected  # each page shows its own prompt's output, nobody else's
        assert shown[0] != shown[1]
        for page in pages:
            assert "identical token ids" in page.inner_text("#stats").lower()
            assert page.locator("#charts .js-plotly-plot").count() == 1
        outside = non_loopback([url for page in pages for url in page.requests])
        assert not outside, outside
    finally:
        for page in pages:
            page.context.close()
    assert not device.DEVICE.locked
