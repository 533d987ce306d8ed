"""New-user trials on a 400 px phone: the Arena's results table put its headline, the decoding speedup, off to the
right (the table scrolled sideways, so the phone showed Category, Method, Prompts, Tokens/pass and no speedup), and
later "Same ids" and "Acceptance" were off screen; a speedup the timings cannot give read "not a finding: ..." in the
table. Below 640 px each of the Arena's three tables now shows every row as a card of labelled cells (no sideways
scroll); at 1400 px the tables stay as they were. In a real browser, on the real page, with the Run handler replaced
by one that yields a finished result at once (no model run; the tables and charts are built by the tab's own code);
the phone labels' CSS itself without a browser too."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from browser_support import open_page, requires_chromium  # noqa: E402

from app import render  # noqa: E402
from app.arena import PHONE_CSS, PROMPT_COLUMNS, SUMMARY_COLUMNS, TIMING_COLUMNS, handlers  # noqa: E402
from app.arena.tables import card_css  # noqa: E402
from specviz.analysis.arena_rows import BASELINE, ArenaResult  # noqa: E402

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
            "predicted_speedup_measured": 1.3 if method else None, "tree_passes": 0, **(WIDE if method else {})}


WIDE = {"t_step_ms": 68.8, "t_step_ms_low": 53.4, "t_step_ms_high": 85.8, "t_verify_ms": 137.7,
        "t_verify_ms_low": 108.2, "t_verify_ms_high": 189.3, "t_draft_ms": 163.8, "t_draft_ms_low": 118.9,
        "t_draft_ms_high": 262.3, "c": 0.0005, "c_low": 0.00023, "c_high": 0.00088, "tokens_per_s_low": 7.0,
        "tokens_per_s_high": 16.1}
"""The widest timings a trial's Arena race showed (the embedded model, 2 drafters at k = 4 and auto, on a busy
2-CPU machine): its timings table scrolled sideways at 1400 px, by 174 px."""


ROWS = [_row("standard", BASELINE, 1.0, None, None, 0.04),
        dict(_row("ngram k=4", "ngram", 1.42, 1.31, 1.55, 0.05), predicted_speedup_paper_low=1.45,
             predicted_speedup_paper_high=1.72, predicted_speedup_measured_low=1.1,
             predicted_speedup_measured_high=1.5,  # the predictions' spread: the chart's markers' error bars
             tokens_per_pass_low=1.75, tokens_per_pass_high=2.45),  # its passes' tokens resampled
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


CARDS = """sel => { const v = document.querySelector(sel + ' .virtual-table-viewport'), box = v.getBoundingClientRect();
    const head = document.querySelector(sel + ' thead');
    return {scroll: v.scrollWidth - v.clientWidth, header: head.getBoundingClientRect().height,
            rows: [...document.querySelectorAll(sel + ' div.virtual-row')].map(row => [...row.querySelectorAll(
                ':scope > .body-cell')].map(cell => { const r = cell.getBoundingClientRect();
                return {label: getComputedStyle(cell, '::before').content.replace(/^"|"$/g, ''),
                        text: cell.innerText.replace(/\u2060/g, '').trim(), left: r.left - box.left,
                        right: box.right - r.right, joined: (cell.innerText.match(/–\u2060/g) || []).length,
                        cut: cell.scrollWidth - cell.clientWidth}; }))}; }"""
"""A script that reads a Dataframe (a selector) as a phone shows it: how far its box scrolls sideways (px), its header
row's height, and for each row's cells the label shown above the value (its ::before text, "none" without), the
value, the cell's edges against the box (px, negative when outside) and how much of its content is cut (px)."""


STATUS_PLACE = """() => { const box = id => document.getElementById(id).getBoundingClientRect();
    const status = box('arena-status'), results = box('arena-results'), slider = box('arena-max-new-tokens');
    return {first: Math.abs(status.top - results.top) < 20 && status.left - results.left < 20,
            below: status.top >= slider.bottom, right: status.left >= slider.right}; }"""
"""A script that says where the status line is: ``first`` (the results column's top line), ``below`` and ``right``
of the max-new-tokens slider, whose hint names that line (:data:`app.arena.layout.TOKENS_HINT`)."""


def _assert_cards(page, table: str, columns) -> list[list[dict]]:
    """``table`` (a selector) as a phone's cards: no sideways scroll, the header row hidden, every cell of every row
    inside the box, its content not cut, under its column's header as a label. Returns the rows' cells."""
    shown = page.evaluate(CARDS, table)
    assert shown["scroll"] <= 0 and shown["header"] == 0, (table, shown["scroll"], shown["header"])
    assert shown["rows"], table
    for cells in shown["rows"]:
        assert [c["label"] for c in cells] == [header for header, _, _ in columns], cells
        assert all(c["left"] >= -0.5 and c["right"] >= -0.5 and c["cut"] <= 0 for c in cells), cells
    return shown["rows"]


@requires_chromium
def test_on_a_phone_every_column_of_each_arena_table_is_a_labelled_cell_in_sight(app_url, browser, monkeypatch):
    monkeypatch.setattr(handlers, "race", _finished)
    page = open_page(browser, PHONE)
    try:
        page.goto(app_url, wait_until="load")
        page.locator("#tab-arena-button").click()
        page.locator("#arena-run").click()
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('canned result')",
                               timeout=30_000)
        page.wait_for_function(SHOWN.format("#arena-table"), timeout=20_000)
        page.locator("#arena-per-prompt").click()
        page.wait_for_function(SHOWN.format("#arena-prompts"), timeout=20_000)
        table = page.locator("#arena-table")
        table.scroll_into_view_if_needed()
        SHOTS.mkdir(exist_ok=True)
        table.screenshot(path=str(SHOTS / "phone-arena-table.png"))
        page.locator("#arena-timings").screenshot(path=str(SHOTS / "phone-arena-timings.png"))
        page.locator("#arena-predictions").screenshot(path=str(SHOTS / "phone-arena-predictions.png"))
        rows = _assert_cards(page, "#arena-table", SUMMARY_COLUMNS)
        _assert_cards(page, "#arena-timings", TIMING_COLUMNS)
        _assert_cards(page, "#arena-prompts", PROMPT_COLUMNS)
        cells = {(row[1]["text"], c["label"]): " ".join(c["text"].split()) for row in rows for c in row}
        assert cells["ngram k=4", "Speedup, decode"] == "1.42× faster (1.31–1.55×)", cells
        assert cells["ngram k=4", "Same ids"] == "✓" and cells["ngram k=4", "Acceptance"] == "60% (49–70%)", cells
        assert cells["ngram k=4", "Tokens/pass"] == "2.10 (1.75–2.45)", cells
        joined = {(row[1]["text"], c["label"]): c["joined"] for row in rows for c in row}
        assert joined["ngram k=4", "Acceptance"] == 1  # the range's en dash joined to its end: one line, "(49–70%)"
        assert page.evaluate(STATUS_PLACE) == {"first": True, "below": True, "right": False}  # "at the top of the
        # results", under the slider on a phone
        calm = ("no reading: the machine's speed changed during the run (2.45× measured, 2.27–2.63×; faster than "
                "its 2.1 tokens per pass allow; baselines drifted 16% apart); run again")
        assert cells["early-exit k=4", "Speedup, decode"] == calm, cells
        assert not any("not a finding" in c for c in cells.values()), cells
        speedup = [c for c in rows[1] if c["label"] == "Speedup, decode"][0]  # across the card: its left edge
        assert speedup["left"] < 10 and speedup["right"] < 10, speedup
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, overflow  # the page itself never scrolls sideways
        page.set_viewport_size({"width": 1400, "height": 1000})  # a phone turned, a window widened: a table again
        page.wait_for_function("document.querySelector('#arena-table thead').getBoundingClientRect().height > 0")
        page.wait_for_function("""() => [...document.querySelectorAll('#arena-table thead th')]
            .every(th => th.getBoundingClientRect().width > 40)""", timeout=10_000)  # its columns measured anew
        assert {c["label"] for row in page.evaluate(CARDS, "#arena-table")["rows"] for c in row} == {"none"}
        assert page.evaluate(STATUS_PLACE) == {"first": True, "below": False, "right": True}  # top right at 1400 px
    finally:
        page.context.close()


def test_the_phone_labels_are_the_columns_headers_and_a_speedup_spans_its_card():
    css = card_css("arena-table", SUMMARY_COLUMNS)
    assert css.startswith("@media (max-width: 640px) {") and css.count("::before") == len(SUMMARY_COLUMNS) == 10
    cell = "#arena-table div.virtual-row > .body-cell"
    assert f'{cell}[data-col="2"]::before {{ content: "Speedup, decode"; }}' in css
    assert f'{cell}[data-col="9"]::before {{ content: "Same ids"; }}' in css
    assert f'{cell}:is([data-col="2"], [data-col="4"]) {{ grid-column: 1 / -1; }}' in css  # the two speedups
    assert card_css("t", [('Say "hi" \\ bye', "x", None)]).count('content: "Say \\"hi\\" \\\\ bye";') == 1
    assert card_css("t", []) == ""
    assert PHONE_CSS.count("::before") == len(SUMMARY_COLUMNS) + len(TIMING_COLUMNS) + len(PROMPT_COLUMNS)
    assert all(f"#{elem_id} " in PHONE_CSS for elem_id in ("arena-table", "arena-timings", "arena-prompts"))


@requires_chromium
@pytest.mark.parametrize("width", [1400])
def test_on_a_desktop_both_pooled_tables_fit_without_a_sideways_scroll(app_url, browser, monkeypatch, width):
    """The summary and, with a trial's widest timings (:data:`WIDE`), the timings table: Gradio sized each column 16
    px wider than its cells need (style.css pads its sizing copy as the shown cells), which put the timings table's
    c column out of sight at 1400 px."""
    monkeypatch.setattr(handlers, "race", _finished)
    page = open_page(browser, {"width": width, "height": 1000})
    try:
        page.goto(app_url, wait_until="load")
        page.locator("#tab-arena-button").click()
        page.locator("#arena-run").click()
        page.wait_for_function(SHOWN.format("#arena-table"), timeout=30_000)
        page.locator("#arena-results").screenshot(path=str(SHOTS / "desktop-arena-results.png"))
        page.locator("#arena-predictions").screenshot(path=str(SHOTS / "desktop-arena-predictions.png"))
        headers = _headers(page, "#arena-table")
        assert all(h["right"] <= h["width"] + 1 for h in headers), headers
        assert [" ".join(h["text"].split()) for h in headers] == [header for header, _, _ in SUMMARY_COLUMNS]
        shown = page.evaluate(CARDS, "#arena-table")  # a table: its header row, no card labels
        assert shown["header"] > 0 and shown["scroll"] <= 0, shown
        assert {c["label"] for row in shown["rows"] for c in row} == {"none"}, shown["rows"]
        page.locator("#arena-timings").screenshot(path=str(SHOTS / "desktop-arena-timings.png"))
        headers = _headers(page, "#arena-timings")
        assert all(h["right"] <= h["width"] + 1 for h in headers), headers
        assert [" ".join(h["text"].split()) for h in headers] == [header for header, _, _ in TIMING_COLUMNS]
        timings = page.evaluate(CARDS, "#arena-timings")
        assert timings["header"] > 0 and timings["scroll"] <= 0, timings
        cells = {(row[1]["text"], header): c for row in timings["rows"]
                 for c, (header, _, _) in zip(row, TIMING_COLUMNS)}
        assert cells["early-exit k=4", "c"]["text"] == "0.00050 (0.00023–0.00088)" and all(
            c["cut"] <= 0 for c in cells.values()), cells
    finally:
        page.context.close()
