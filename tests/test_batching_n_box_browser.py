"""The sampling check's "N runs per side" box in a real browser (Debian's chromium driven by playwright, loopback
only). A new user's trial: 50 then "abc" (Chromium refuses the letters, so the box is left empty) set the box back to
its default 200 and lost the 50; 99999 gave a warning in other words than the sliders'. The box now keeps its earlier
value and says a number out of range as a slider's box does (:func:`app.messages.kept_or_refused`)."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import page, requires_chromium  # noqa: E402,F401  (page: the fixture)

pytestmark = requires_chromium


def _enter(page, typed: str, said: str, used: str) -> None:
    """Type ``typed`` key by key over the N box's value, press Enter, and wait for ``said`` in the check's status and
    ``used`` in the box."""
    box = page.locator("#batching-check-n input[type=number]").first
    box.click()
    box.press("Control+a")
    box.press_sequentially(typed)
    box.press("Enter")
    page.wait_for_selector(f"#batching-check-status >> text={said}", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#batching-check-n input[type=number]').value === "
                           f"'{used}'", timeout=30_000)


def test_the_n_box_keeps_its_earlier_value_and_says_its_range(page):
    page.get_by_role("tab", name="Batching").click()
    page.wait_for_selector("#batching-check-n input[type=number]")
    page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.size > 0")  # the page-load script
    _enter(page, "99999", "N runs per side is at most 1000 here; using 1000.", "1000")
    _enter(page, "50", "N runs per side is at most 1000 here", "50")  # in range: nothing new is said
    page.wait_for_timeout(3000)  # the box's change reaches the server (it remembers 50); generous on a busy machine
    _enter(page, "abc", "N runs per side was not a number; kept 50.", "50")  # letters: not "was empty"
    page.wait_for_timeout(1000)
    box = page.locator("#batching-check-n input[type=number]").first
    box.click()
    box.press("Control+a")
    box.press("Delete")
    box.press("Enter")  # emptied, no letters
    page.wait_for_selector("#batching-check-status >> text=N runs per side was empty; kept 50.", timeout=30_000)
    assert page.get_by_text("set back to its default").count() == 0


def test_a_refused_check_leaves_no_gap_under_its_status(page):
    """A trial pressed Check with N = 20, too few for the default prompt: the refusal stood about 100 px above the
    check's notes, over the emptied verdict and table. The check hides them (app.batching.check_handlers
    ._check_cleared), so the notes follow the status at the column's usual gap."""
    page.get_by_role("tab", name="Batching").click()
    page.wait_for_selector("#batching-check-n input[type=number]")
    page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.size > 0")  # the page-load script
    box = page.locator("#batching-check-n input[type=number]").first
    box.fill("20")
    box.press("Enter")
    page.locator("#batching-check").click()
    page.wait_for_selector("#batching-check-status >> text=nothing was sampled", timeout=120_000)
    gap = page.evaluate("""() => document.getElementById('batching-check-note').getBoundingClientRect().top
        - document.getElementById('batching-check-status').getBoundingClientRect().bottom""")
    assert 0 <= gap <= 30, gap
    for hidden in ("batching-check-lesson", "batching-check-stats"):
        assert page.locator(f"#{hidden}").is_hidden(), hidden
