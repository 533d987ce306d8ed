"""Helpers shared by the real-browser tests (Debian's chromium driven by playwright, loopback only).

The fixtures that use them (``app_url``, ``browser``) live in the "real-browser fixtures" section of conftest.py.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]

requires_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM}")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_page(browser, viewport: dict[str, int]):
    """A page in a fresh context of ``browser``; ``page.requests`` lists every URL it asks for.
    Close it with ``page.context.close()``."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.requests = []
    page.on("request", lambda request: page.requests.append(request.url))
    return page


@pytest.fixture
def page(browser, app_url):
    """A fresh 1440 x 900 page on the app, its Generate button rendered (import it into a module to use it);
    ``page.requests`` lists every URL it asked for."""
    page = open_page(browser, {"width": 1440, "height": 900})
    page.goto(app_url)
    page.wait_for_selector("#generate")
    yield page
    page.context.close()


def non_loopback(urls: list[str]) -> list[str]:
    """The URLs in ``urls`` that leave 127.0.0.1 (data:, blob: and about: URLs stay in the browser)."""
    out = []
    for url in urls:
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about"):
            continue
        if parsed.hostname not in ("127.0.0.1", "localhost"):
            out.append(url)
    return out
