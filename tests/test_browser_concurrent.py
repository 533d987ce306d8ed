"""Two visitors at once, in a real browser (Debian's chromium via playwright), on the embedded model, loopback only.

Both pages press Generate while the device is busy: each is told its place in line, then both runs finish (one
after the other, so neither's timing is disturbed) and each page shows its own prompt's output: the baseline pane
of each equals standard decoding of that page's prompt, computed here directly with the engine.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
MAX_NEW_TOKENS = 16
TIMEOUT_MS = 120_000
PROMPTS = ("Name three fruits that are red.", "Write one sentence about the moon.")

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(embedded):
    from app import build_demo, launch_options

    demo = build_demo(max_new_tokens=MAX_NEW_TOKENS)
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _reference(embedded, prompt: str) -> str:
    """Standard (greedy) decoding of ``prompt``, as the baseline pane must show it."""
    from specviz.engine import GenerationConfig, collect, standard_generate
    from specviz.models import encode_prompt

    prompt_ids = encode_prompt(embedded.tokenizer, prompt)
    events = list(standard_generate(embedded, prompt_ids, GenerationConfig(max_new_tokens=MAX_NEW_TOKENS)))
    ids = collect(events, embedded.tokenizer, prompt_ids).token_ids
    return embedded.tokenizer.decode(ids, skip_special_tokens=False)


def _pane_text(page, pane: str) -> str:
    return page.eval_on_selector_all(f"#{pane} span[data-kind]", "els => els.map(e => e.textContent).join('')")


def test_two_pages_generate_at_once_and_each_shows_its_own_result(browser, app_url, embedded):
    from app import handlers

    contexts = [browser.new_context(viewport={"width": 1280, "height": 900}) for _ in PROMPTS]
    pages = [context.new_page() for context in contexts]
    requests: list[str] = []
    try:
        for page, prompt in zip(pages, PROMPTS):
            page.on("request", lambda request: requests.append(request.url))
            page.goto(app_url)
            page.wait_for_selector("#generate")
            page.fill("#prompt textarea", prompt)
        assert handlers.DEVICE.acquire("browser-test", "a test holds the device", timeout=5)
        try:
            for page in pages:  # both press Generate while the device is busy
                page.click("#generate")
            for page in pages:  # each is told its place in line
                page.wait_for_selector("#status .status-wait:has-text('ahead of yours')", timeout=30_000)
            places = sorted(page.inner_text("#status") for page in pages)
            assert "1 run is ahead" in places[0] and "2 runs are ahead" in places[1], places
        finally:
            handlers.DEVICE.release("browser-test")
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
        outside = [u for u in requests if urlparse(u).scheme not in ("data", "blob", "about")
                   and urlparse(u).hostname not in ("127.0.0.1", "localhost")]
        assert not outside, outside
    finally:
        for context in contexts:
            context.close()
    assert not handlers.DEVICE.locked
