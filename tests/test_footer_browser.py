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
