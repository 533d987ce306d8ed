"""A new user's trial: the Classroom's footer read "Settings · Settings" (Gradio's footer icons repeat their link's
words as alt text, so the settings button's accessible name was "Settings Settings"). assets/head.html marks those
icons decorative. Real browser (Debian's chromium), loopback only, no model loaded."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import free_port, open_page, requires_chromium  # noqa: E402


@pytest.fixture(scope="module")
def bare_app_url():
    """The app on a free loopback port; nothing runs, so no model is loaded."""
    from app import build_demo, launch_options

    demo = build_demo(max_new_tokens=40)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@requires_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_the_footer_names_each_link_once(bare_app_url, browser, width):
    page = open_page(browser, {"width": width, "height": 900})
    try:
        from playwright.sync_api import expect

        page.goto(bare_app_url + "?tab=classroom")
        expect(page.get_by_role("tab", name="Classroom", selected=True)).to_have_count(1, timeout=60_000)
        footer = page.locator("footer")
        footer.get_by_role("button", name="Settings", exact=True).wait_for(timeout=60_000)
        snapshot = footer.aria_snapshot()
        assert 'button "Settings"' in snapshot and "Settings Settings" not in snapshot, snapshot
        assert 'link "Built with Gradio"' in snapshot and "logo" not in snapshot, snapshot
        assert " ".join(footer.inner_text().split()).endswith("Built with Gradio · Settings")
    finally:
        page.context.close()


@requires_chromium
@pytest.mark.parametrize("width", [400, 1400])
def test_the_api_page_is_reachable_from_the_footer_on_a_phone_too(bare_app_url, browser, width):
    """A new user's trial: at 400 px the footer had no "Use via API" (Gradio hides it at 640 px and below); it is
    shown there as at 1400 px, and a tap opens the API page. Screenshots: artifacts/footer-api-<width>.png."""
    from pathlib import Path

    page = open_page(browser, {"width": width, "height": 900})
    try:
        page.goto(bare_app_url)
        api = page.locator("footer").get_by_role("button", name="Use via API")
        api.wait_for(state="visible", timeout=60_000)
        assert " ".join(page.locator("footer").inner_text().split()).startswith("Use via API ·")
        api.scroll_into_view_if_needed()
        shots = Path(__file__).resolve().parent.parent / "artifacts"
        shots.mkdir(exist_ok=True)
        page.screenshot(path=str(shots / f"footer-{width}.png"))
        api.click()
        page.get_by_text("/generate").first.wait_for(state="visible", timeout=60_000)  # the API page's first call
        assert "view=api" in page.url
        page.screenshot(path=str(shots / f"footer-api-{width}.png"))
    finally:
        page.context.close()
