"""A new user's trial: k = 2.5 typed into the Live tab's "Draft length k" box became 3 without a word. In chromium
the box sends 2.5 to the server (Gradio's slider rounds nothing before its release), and leaving the box says
"Draft length k must be a whole number (got 2.5); using 3." (:func:`app.messages.tell_when_clamped`); Generate
pressed straight after typing runs what the box then holds, with the same sentence in its status
(:func:`app.inputs.whole_setting`), where it was refused "(got 2.5)" while the box showed 3. Max new tokens shares
the path. Real browser (Debian's chromium), loopback only; the embedded model runs one short generation."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import page, requires_chromium  # noqa: E402,F401  (page: the fixture)

pytestmark = requires_chromium

APP_MAX_NEW_TOKENS = 12  # the Generate run: a few passes of the embedded model


def _type(page, elem_id: str, typed: str) -> None:
    """Type ``typed`` over the slider ``elem_id``'s box key by key, as a person does."""
    page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.size > 0")  # the page-load script
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.click()
    box.press("Control+a")
    box.press_sequentially(typed)


@pytest.mark.parametrize("elem_id, name, key", [("draft-length", "Draft length k", "Tab"),
                                                ("max-new-tokens", "Max new tokens", "Enter")])
def test_a_fraction_left_in_a_whole_number_box_is_said_with_the_value_used(page, elem_id, name, key):
    _type(page, elem_id, "2.5")
    page.locator(f"#{elem_id} input[type=number]").first.press(key)
    said = f"{name} must be a whole number (got 2.5); using 3."
    page.wait_for_selector(f"#status >> text={said}", timeout=30_000)
    page.wait_for_function(f"() => document.querySelector('#{elem_id} input[type=number]').value === '3'",
                           timeout=30_000)


def test_generate_pressed_straight_after_a_fraction_runs_what_the_box_holds_and_says_so(page):
    _type(page, "draft-length", "2.5")
    page.locator("#generate").click()  # leaves the box and sends the run at once
    page.wait_for_selector("#status >> text=Done in", timeout=240_000)
    status = page.locator("#status").inner_text()
    assert "Draft length k must be a whole number (got 2.5); using 3." in status, status
    assert "k = 3" in page.locator("#spec-output").inner_text()
    assert page.locator("#draft-length input[type=number]").first.input_value() == "3"
