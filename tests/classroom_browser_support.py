"""Helpers shared by the Classroom's real-browser tests (test_classroom_browser.py, test_classroom_inputs_browser.py):
a page fixture, and stepping and picking a walkthrough on the Classroom tab.

Import ``page`` into a module to use the fixture (a 1440 x 1000 page, not yet opened; ``page.app_url`` is the app's
address and ``page.requests`` every URL it asked for). The ``app_url`` and ``browser`` fixtures it uses live in the
"real-browser fixtures" section of conftest.py.
"""

from __future__ import annotations

import pytest
from browser_support import open_page


@pytest.fixture
def page(browser, app_url):
    """A fresh 1440 x 1000 page (not yet opened: go to ``page.app_url``); closed after the test."""
    page = open_page(browser, {"width": 1440, "height": 1000})
    page.app_url = app_url
    yield page
    page.context.close()


def step_text(page) -> str:
    """The Classroom's step counter as shown, e.g. "step 3 / 41"."""
    return page.inner_text("#classroom-progress .cr-count")


def click_and_wait(page, selector: str) -> None:
    """Click ``selector`` and wait (15 s at most) until the step counter changes."""
    before = step_text(page)
    page.click(selector)
    page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent !== "
                           f"{before!r}", timeout=15_000)


def choose_walkthrough(page, label: str) -> None:
    """Pick the walkthrough whose menu label contains ``label`` (case-insensitive)."""
    page.click("#classroom-walkthrough input")
    page.click(f"li[role=option]:has-text('{label}')")
