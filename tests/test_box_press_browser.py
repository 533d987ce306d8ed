"""A number box left by the press of a run's button, and a box's newer sentence, in a real browser (Debian's chromium
driven by playwright, loopback only). A new user's trial: N = 3 typed in the Batching check's box, then one press of
Check: the box became 20 and said so, and nothing started (the press carried 3 while the box's own check was on its
round trip; the run refused 3 and the check's answer covered the refusal). In the Live tab k = -3 after 2.5 left
"must be a whole number (got 2.5); using 3." under a box of 1 (a plan that read the status before the newer sentence
wrote it back after). And a Measure refused for no batch size kept its warning after B = 1 was ticked again."""

from __future__ import annotations

import json
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from browser_support import open_page, requires_chromium  # noqa: E402

pytestmark = requires_chromium

PHONE = {"width": 400, "height": 900}
CHECK_PROMPT_START = "The sky"


def _text(page, elem_id: str) -> str:
    return page.inner_text(f"#{elem_id}").strip()


def test_one_press_of_check_settles_n_and_starts_the_check_with_it(app_url, browser):
    page = open_page(browser, {"width": 1400, "height": 900})
    sent = []

    def record(request):  # the Check's own event: its first input is the check's prompt
        if "queue/join" in request.url:
            data = (json.loads(request.post_data or "{}").get("data") or [None])
            if isinstance(data[0], str) and data[0].startswith(CHECK_PROMPT_START):
                sent.append(data)

    page.on("request", record)
    try:
        page.goto(app_url, wait_until="load")
        page.get_by_role("tab", name="Batching").first.click()
        box = page.locator("#batching-check-n input").first
        box.click(click_count=3)
        page.keyboard.press("Control+a")
        page.keyboard.type("3")  # no Enter: the press of Check leaves the box
        page.click("#batching-check")
        page.wait_for_function("() => window.svCheckSent === true", timeout=10_000)
        page.wait_for_timeout(500)
        assert len(sent) == 1 and 20 in sent[0] and 3 not in sent[0], sent  # one press, sent with the settled N
        assert box.input_value() == "20"
        page.click("#batching-check-stop")
    finally:
        page.close()


def test_a_newer_sentence_about_k_replaces_the_older_one_and_stays(app_url, browser):
    page = open_page(browser, PHONE)
    try:
        page.goto(app_url, wait_until="load")
        page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.size > 0")
        box = page.locator("#draft-length input[type=number]").first
        assert box.evaluate("b => b.closest('.block[id]').id") == "draft-length"  # where its early mark is kept
        said = {"2.5": "Draft length k must be a whole number (got 2.5); using 3.",
                "-3": "Draft length k is at least 1 here; using 1."}
        for typed in ("-3", "2.5", "-3"):
            box.click(click_count=3)
            page.keyboard.type(typed)
            box.press("Enter")
            page.wait_for_function("(s) => document.querySelector('#status').innerText.includes(s)",
                                   arg=said[typed], timeout=30_000)
            page.wait_for_timeout(1500)  # a plan answered late must not bring an older sentence back
            status = _text(page, "status")
            assert said[typed] in status and status.count("Draft length k") == 1, (typed, status)
        assert box.input_value() == "1"
    finally:
        page.close()


def test_a_refused_measure_is_planned_over_once_a_batch_size_is_ticked_again(app_url, browser):
    page = open_page(browser, PHONE)
    try:
        page.goto(app_url, wait_until="load")
        page.get_by_role("tab", name="Batching").first.click()
        sizes = page.locator("#batching-sizes")
        for b in ("1", "2", "4", "8", "16"):
            sizes.get_by_label(b, exact=True).uncheck()
        page.click("#batching-measure")
        page.wait_for_selector("#batching-status >> text=Pick at least one batch size.", timeout=30_000)
        sizes.get_by_label("1", exact=True).check()
        page.wait_for_function("() => document.querySelector('#batching-status').innerText.includes('press Measure')",
                               timeout=30_000)
        status = _text(page, "batching-status")
        assert "Pick at least one batch size." not in status and "⚠" not in status, status
    finally:
        page.close()
