"""A number typed into a slider's box, in a real browser (Debian's chromium driven by playwright, loopback only).

A new user's trial: in the Batching tab, max new tokens 100000 and temperature 99 stayed in their boxes after Enter
with no word until the next click, and in the Live tab an emptied or 0 "Draft length k" became 1 without a word. Enter
in a Batching slider's box now commits it (:data:`app.batching.layout.ENTER_COMMITS_JS`), and every out-of-range or
emptied box says the value used (:func:`app.messages.tell_when_clamped`).
"""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import page, requires_chromium  # noqa: E402,F401  (page: the fixture)

pytestmark = requires_chromium




def _type(page, elem_id: str, typed: str, key: str, status: str, said: str, used: str) -> None:
    """Type ``typed`` into the slider ``elem_id``'s box, press ``key`` and wait for ``said`` in ``status`` and
    ``used`` in the box."""
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.fill(typed)
    box.press(key)
    page.wait_for_selector(f"#{status} >> text={said}", timeout=30_000)
    page.wait_for_function(f"() => document.querySelector('#{elem_id} input[type=number]').value === '{used}'",
                           timeout=30_000)


def test_enter_in_a_batching_sliders_box_says_the_value_used_at_once(page):
    page.get_by_role("tab", name="Batching").click()
    page.wait_for_selector("#batching-max-new-tokens input[type=number]")
    _type(page, "batching-max-new-tokens", "100000", "Enter", "batching-status",
          "Max new tokens per row is at most 128 here; using 128.", "128")
    _type(page, "batching-k", "0", "Enter", "batching-status", "Draft length k is at least 1 here; using 1.", "1")
    _type(page, "batching-check-temperature", "99", "Enter", "batching-check-status",
          "Temperature is at most 2 here; using 2.", "2")


def test_an_emptied_or_zero_draft_length_in_the_live_tab_is_said(page):
    _type(page, "draft-length", "", "Tab", "status", "Draft length k was empty; using 1.", "1")
    _type(page, "draft-length", "0", "Tab", "status", "Draft length k is at least 1 here; using 1.", "1")
