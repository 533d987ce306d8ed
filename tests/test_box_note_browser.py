"""A number box's sentence where the visitor is, in a real browser (Debian's chromium driven by playwright, loopback
only). A new user's trial on a 400 px phone typed k = 99 in the Live tab: the box turned to 16 and the sentence saying
so went to the tab's status line, more than a screen above the box, so nothing was seen. On a window 640 px wide or
less, a sentence whose status line is out of sight is now shown under the box too, for as long as the status line
says it (assets/head.html, part 11), and so at any width (the Classroom's Seed at 1400 px sits about 1,360 px below
its status); a status in sight shows it once, in the status line. No toast is added: the one a
slider's clamp shows stays the only one (tests/toast_support.py)."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import open_page, requires_chromium  # noqa: E402

pytestmark = requires_chromium

PHONE = {"width": 400, "height": 800}
SHOTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "artifacts")
SAID_K = "Draft length k is at most 16 here; using 16."

PLACE = """([box, status]) => { const b = document.getElementById(box), s = document.getElementById(status);
    const note = b.querySelector(':scope > .sv-box-note'), r = s.getBoundingClientRect();
    const n = note && note.getBoundingClientRect();
    return {note: note ? note.textContent : null,
            shown: !!note && n.height > 0 && n.top >= -1 && n.bottom <= innerHeight + 1,
            statusInSight: r.bottom > 0 && r.top < innerHeight, toasts: document.querySelectorAll('.toast-body').length};
}"""
"""A script that reads, for a box (its elem_id) and its tab's status line (elem_id): the note under the box (its text,
and whether it is all in sight), whether the status line is in sight, and how many toasts are up."""


def _commit(page, elem_id: str, typed: str) -> None:
    """Type ``typed`` into the number box of ``elem_id`` (scrolled to the middle of the window) and press Enter."""
    page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.size > 0")  # the page-load script
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.evaluate("el => el.scrollIntoView({block: 'center'})")
    box.click()
    box.fill(typed)
    box.press("Enter")


def test_on_a_phone_a_sentence_about_a_box_stands_under_the_box_while_the_status_says_it(app_url, browser):
    page = open_page(browser, PHONE)
    try:
        page.goto(app_url, wait_until="load")
        page.wait_for_selector("#generate")
        _commit(page, "draft-length", "99")
        page.wait_for_selector(f"#status >> text={SAID_K}", timeout=30_000)
        page.wait_for_selector("#draft-length > .sv-box-note", timeout=10_000)
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, "phone-box-note-k.png"))
        seen = page.evaluate(PLACE, ["draft-length", "status"])
        assert seen["note"] == f"ℹ {SAID_K}" and seen["shown"] and not seen["statusInSight"], seen
        assert seen["toasts"] <= 1  # the slider's clamp toast at most: the note adds none
        _commit(page, "draft-length", "5")  # a value the run takes: the sentence leaves the status, and the box
        page.wait_for_function("() => !document.querySelector('#status .status-notice')", timeout=30_000)
        page.wait_for_function("() => !document.querySelector('.sv-box-note')", timeout=10_000)
        # a number box that keeps its earlier value (the Batching check's N): its sentence is the box's too
        page.get_by_role("tab", name="Batching").click()
        box = page.locator("#batching-check-n input[type=number]").first
        box.wait_for()
        page.set_viewport_size({"width": 400, "height": 420})  # a phone with its keyboard up: the status below
        page.evaluate("() => document.getElementById('batching-check-n').scrollIntoView({block: 'end'})")
        box.evaluate("el => el.focus({preventScroll: true})")  # typed where it is (a click scrolls it up)
        page.keyboard.press("Control+a")
        page.keyboard.type("5")
        page.keyboard.press("Enter")
        page.wait_for_selector("#batching-check-n > .sv-box-note", timeout=30_000)
        seen = page.evaluate(PLACE, ["batching-check-n", "batching-check-status"])
        assert seen["note"] == "ℹ N runs per side is at least 20 here; using 20." and seen["shown"], seen
        page.screenshot(path=os.path.join(SHOTS, "phone-box-note-n.png"))
        assert page.locator('#batching-check-status .status-notice[data-box="batching-check-n"]').count() == 1
    finally:
        page.context.close()


def test_on_a_wide_window_with_the_status_in_sight_the_sentence_is_said_once_in_the_status(app_url, browser):
    page = open_page(browser, {"width": 1400, "height": 1200})
    try:
        page.goto(app_url, wait_until="load")
        page.wait_for_selector("#generate")
        page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.size > 0")
        box = page.locator("#draft-length input[type=number]").first
        box.evaluate("el => el.scrollIntoView({block: 'nearest'})")  # the page as it opens: the status in sight
        box.click()
        box.fill("99")
        box.press("Enter")
        page.wait_for_selector(f"#status >> text={SAID_K}", timeout=30_000)
        page.wait_for_timeout(500)  # a few frames: the page script has seen the sentence
        seen = page.evaluate(PLACE, ["draft-length", "status"])
        assert seen["statusInSight"] and seen["note"] is None, seen
        assert page.locator(".sv-box-note").count() == 0
    finally:
        page.context.close()


def test_on_a_wide_window_the_classroom_seed_sentence_stands_under_the_box(app_url, browser):
    """At 1400 px the Classroom's status heads the stage while Seed sits about 1,360 px lower, under the menu: a trial
    typed "abc" there and saw no sentence. It now stands under the box too, and the walkthrough's note does not say
    the settings changed (the same 0 came back)."""
    page = open_page(browser, {"width": 1400, "height": 900})
    try:
        page.goto(app_url + "?tab=classroom", wait_until="load")
        box = page.locator("#classroom-seed input[type=number]").first
        box.wait_for()
        page.wait_for_selector("#classroom-status >> text=Recorded run", timeout=30_000)
        page.wait_for_function("() => window.svKeepBoxes && window.svKeepBoxes.size > 0")  # the page-load script
        box.evaluate("el => el.scrollIntoView({block: 'center'})")
        box.click()
        page.keyboard.press("Control+a")
        page.keyboard.type("abc")
        page.keyboard.press("Tab")
        said = "Seed was not a number, so it is set back to its default, 0."
        page.wait_for_selector(f"#classroom-status >> text={said}", timeout=30_000)
        page.wait_for_selector("#classroom-seed > .sv-box-note", timeout=10_000)
        seen = page.evaluate(PLACE, ["classroom-seed", "classroom-status"])
        assert seen["note"] == f"ℹ {said}" and seen["shown"] and not seen["statusInSight"], seen
        assert box.input_value() == "0"
        page.wait_for_timeout(500)  # the note after the check's settled value
        assert "You changed the settings" not in page.locator("#classroom-note").inner_text()
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, "wide-classroom-seed-note.png"))
    finally:
        page.context.close()
