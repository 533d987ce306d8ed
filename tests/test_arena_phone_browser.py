"""A new-user trial on a 400 px phone: the Arena's results table put its headline, the decoding speedup, off to the
right (the table scrolls sideways, so the phone showed Category, Method, Prompts, Tokens/pass and no speedup); and a
speedup the timings cannot give read "not a finding: ..." in the table. Both in a real browser, on the real page,
with the Run handler replaced by one that yields a finished result at once (no model run; the table and charts are
built by the tab's own code)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from browser_support import open_page, requires_chromium  # noqa: E402

from app import render  # noqa: E402
from app.arena import handlers  # noqa: E402
from specviz.analysis.arena_rows import BASELINE, ArenaResult  # noqa: E402

pytestmark = requires_chromium
APP_MAX_NEW_TOKENS = 12  # read by conftest's app_url
PHONE = {"width": 400, "height": 900}
SHOTS = Path(__file__).resolve().parent.parent / "artifacts"


def _row(variant: str, drafter: str, speedup: float, low: float | None, high: float | None, drift: float) -> dict:
    """A pooled row of one category as the Arena's row builder makes it (the figures the tables and charts read)."""
    method = drafter != BASELINE
    return {"level": "category", "category": "code-edit", "prompt_id": "code-edit-1", "variant": variant,
            "drafter": drafter, "k": "4" if method else "0", "prompts": 1, "runs": 1 if method else 2, "tokens": 48,
            "passes": 20 if method else 48, "drafted": 80 if method else 0, "accepted": 48 if method else 0,
            "rejections": 14 if method else 0, "tokens_per_pass": 2.1 if method else 1.0,
            "acceptance_rate": 48 / 80 if method else None, "alpha": 48 / 62 if method else None,
            "tokens_per_s": 12.5, "decode_speedup": speedup, "decode_speedup_low": low, "decode_speedup_high": high,
            "speedup": speedup * 0.95, "baseline_drift": drift, "ids_identical": True if method else None,
            "predicted_speedup_paper": 1.6 if method else None,
            "predicted_speedup_measured": 1.3 if method else None, "tree_passes": 0}


ROWS = [_row("standard", BASELINE, 1.0, None, None, 0.04),
        _row("ngram k=4", "ngram", 1.42, 1.31, 1.55, 0.05),
        _row("early-exit k=4", "early-exit", 2.45, 2.27, 2.63, 0.16)]  # above its 2.1 tokens per pass: no reading


SHOWN = "() => [...document.querySelectorAll('{} .virtual-row')].some(r => r.innerText.includes('no reading'))"
"""A script that is true once the table (a selector) shows the no-reading row (Gradio's rows in sight, not its
hidden sizing copy)."""


def _finished(*_args, **_kwargs):
    """The Run handler's last output at once: the tab's own tables, charts and status of :data:`ROWS`."""
    result = ArenaResult(rows=ROWS, summary=ROWS, variants=["standard", "ngram k=4", "early-exit k=4"])
    yield handlers._result_outputs(result, render.status_html("Done: canned result", "done"))


def _headers(page, table: str) -> list[dict]:
    """The header cells of ``table`` (a selector) with their left and right edges against its scroller's (px)."""
    return page.evaluate("""sel => { const v = document.querySelector(sel + ' .virtual-table-viewport')
        || document.querySelector(sel + ' .table-wrap'); const box = v.getBoundingClientRect();
        return [...document.querySelectorAll(sel + ' thead th')].map(th => { const r = th.getBoundingClientRect();
            return {text: th.innerText.trim(), left: r.left - box.left, right: r.right - box.left,
                    width: v.clientWidth, scroll: v.scrollLeft}; }); }""", table)


def test_on_a_phone_the_speedup_is_in_sight_and_a_speedup_without_a_reading_says_so_calmly(app_url, browser,
                                                                                            monkeypatch):
    monkeypatch.setattr(handlers, "race", _finished)
    page = open_page(browser, PHONE)
    try:
        page.goto(app_url, wait_until="load")
        page.locator("#tab-arena-button").click()
        page.locator("#arena-run").click()
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('canned result')",
                               timeout=30_000)
        page.wait_for_function(SHOWN.format("#arena-table"), timeout=20_000)
        table = page.locator("#arena-table")
        table.scroll_into_view_if_needed()
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "phone-arena-table.png"))
        headers = {h["text"].replace("\n", " "): h for h in _headers(page, "#arena-table")}
        speedup = headers["Speedup, decode"]
        assert speedup["scroll"] == 0 and speedup["left"] >= 0, speedup
        assert speedup["right"] <= speedup["width"], speedup  # in sight without scrolling sideways
        assert [h for h in headers][:3] == ["Category", "Method", "Speedup, decode"]
        cells = [" ".join(td.split()) for td in page.eval_on_selector_all("#arena-table .virtual-row",
                                                                            "trs => trs.map(tr => tr.innerText)")]
        assert any("1.42× faster (1.31–1.55×)" in c for c in cells), cells
        calm = ("no reading: the machine's speed changed during the run (2.45× measured, 2.27–2.63×; faster than "
                "its 2.1 tokens per pass allow; baselines drifted 16% apart); run again")
        assert any(calm in c for c in cells) and not any("not a finding" in c for c in cells), cells
        assert any("60% (" in c for c in cells), cells  # the acceptance rate in percent, as the Live tab
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, overflow  # the page itself never scrolls sideways
    finally:
        page.context.close()


@pytest.mark.parametrize("width", [1400])
def test_on_a_desktop_the_summary_table_fits_without_a_sideways_scroll(app_url, browser, monkeypatch, width):
    monkeypatch.setattr(handlers, "race", _finished)
    page = open_page(browser, {"width": width, "height": 1000})
    try:
        page.goto(app_url, wait_until="load")
        page.locator("#tab-arena-button").click()
        page.locator("#arena-run").click()
        page.wait_for_function(SHOWN.format("#arena-table"), timeout=30_000)
        page.locator("#arena-results").screenshot(path=str(SHOTS / "desktop-arena-results.png"))
        headers = _headers(page, "#arena-table")
        assert all(h["right"] <= h["width"] + 1 for h in headers), headers
    finally:
        page.context.close()
