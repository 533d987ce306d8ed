"""In a real browser: a Stop pressed while the Why tab's measurement, the Batching sweep or an Arena run still waits
in Gradio's queue reaches the server (app.stop_marks). The page's mark is set by hand here, as while a run waits in the queue
(filling Gradio's queue itself takes more than 4 runs at once); the next click then starts one that runs nothing,
the status keeps Stop's line, and the page's mark is cleared once that event has ended."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import non_loopback, page, requires_chromium  # noqa: E402,F401  (page: the fixture)

pytestmark = requires_chromium


@pytest.mark.parametrize("tab, mark, stop, start, status", [
    ("Why it works", "svWhyMeasuring", "#why-stop", "#why-measure", "#why-status"),
    ("Batching", "svSweepSent", "#batching-stop", "#batching-measure", "#batching-status"),
    ("Arena", "svArenaRunning", "#arena-stop", "#arena-run", "#arena-status"),
])
def test_a_stop_for_one_still_in_the_queue_keeps_it_from_running(page, tab, mark, stop, start, status):
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector(stop, state="visible", timeout=20_000)
    page.evaluate(f"() => {{ window.{mark} = true; }}")
    page.click(stop)
    page.wait_for_selector(f"{status}:has-text('still waiting for its turn')", timeout=20_000)
    assert "so it will not run" in page.inner_text(status)
    page.evaluate(f"() => {{ window.{mark} = false; }}")
    page.click(start)  # it starts flagged on the server, runs nothing and says so
    page.wait_for_selector(f"{status}:has-text('so it did not run')", timeout=120_000)
    page.wait_for_function(f"() => window.{mark} === false", timeout=20_000)
    said = page.inner_text(status)
    assert "not run" in said and "Measuring" not in said and "Stopped after" not in said, said
    assert not non_loopback(page.requests)


def test_the_runs_inputs_pass_through_the_pages_mark_unchanged(page):
    """The mark rides on the run's own event (its browser side returns the inputs as they are): what the visitor
    typed still reaches the server, in order (each refusal below names the field it read), and a refused run clears
    the mark."""
    page.get_by_role("tab", name="Why it works").click()
    page.fill("#why-target input, #why-target textarea", "/no/such/folder")
    page.locator("#why-measure").dispatch_event("click")
    _said(page, "#why-status", "no such local folder")
    page.wait_for_function("() => window.svWhyMeasuring === false", timeout=20_000)
    page.get_by_role("tab", name="Batching").click()
    page.fill("#batching-check-prompt textarea", "   ")
    page.locator("#batching-check").dispatch_event("click")  # its own listener, wherever the tab's layout put it
    _said(page, "#batching-check-status", "prompt is empty")
    page.fill("#batching-check-prompt textarea", "Say hi.")
    page.fill("#batching-check-temperature input[type=number]", "0")
    page.press("#batching-check-temperature input[type=number]", "Enter")
    page.locator("#batching-check").dispatch_event("click")
    _said(page, "#batching-check-status", "needs a temperature above 0")
    page.wait_for_function("() => window.svCheckSent === false", timeout=20_000)
    assert not non_loopback(page.requests)


def _said(page, status: str, words: str) -> None:
    """Wait (60 s at most) until ``status`` says ``words``; on a timeout, fail with what it said and the page's
    marks (a CI run once timed out here with no trace of what the page showed)."""
    try:
        page.wait_for_selector(f"{status}:has-text({words!r})", timeout=60_000)
    except Exception as error:  # noqa: BLE001 - re-raised with the page's state
        marks = page.evaluate("() => [window.svWhyMeasuring, window.svCheckSent]")
        raise AssertionError(f"{status} never said {words!r}: it says {page.inner_text(status)!r}; marks "
                             f"(svWhyMeasuring, svCheckSent) {marks}") from error
