"""A new-user trial: after the browser window was widened from phone width (400 px) to 1400 px, the Classroom's
what-if chart had its legend lying on the axis title "draft length k" (the legend stood at a fraction of the plot's
height under it, and the widened plot grew taller). Now the legend stands at the chart's bottom edge, under the axis
title, at any width; and the phone's taller layout (meta.sv_narrow, drawn by assets/head.html) is dropped again when
the window is widened. In a real browser, with a real what-if run."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_support import open_page, requires_chromium  # noqa: E402

pytestmark = requires_chromium
SHOTS = Path(__file__).resolve().parent.parent / "artifacts"
RUN_TIMEOUT_MS = 240_000

LABELS_JS = """() => { const gd = document.querySelector('#whatif-chart .js-plotly-plot');
    const out = [];
    for (const [kind, sel] of [['title', '.gtitle'], ['xtitle', '.xtitle'], ['ytitle', '.ytitle'],
                               ['legend', '.legend .traces'], ['xtick', '.xtick'], ['ytick', '.ytick']])
        for (const e of gd.querySelectorAll(sel)) { const r = e.getBoundingClientRect();
            if (r.width && r.height) out.push({kind, text: e.textContent, left: r.left, top: r.top, right: r.right,
                                               bottom: r.bottom}); }
    return {labels: out, width: gd.getBoundingClientRect().width, narrow: !!gd.__specvizNarrow}; }"""
"""The what-if chart's labels (title, axis titles, each legend item, tick labels) with their boxes (px), the chart's
width and whether it is drawn with its narrow layout."""


def _overlaps(labels: list[dict]) -> list[tuple[str, str]]:
    """The pairs of labels of different kinds whose boxes overlap by more than 1 px each way (ticks of one axis sit
    side by side; a legend item beside another is one legend)."""
    hits = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if a["kind"] == b["kind"]:
                continue
            if min(a["right"], b["right"]) - max(a["left"], b["left"]) > 1 and \
                    min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1:
                hits.append((f"{a['kind']} {a['text'][:20]}", f"{b['kind']} {b['text'][:20]}"))
    return hits


def _labels_once_drawn(page, narrow: bool) -> dict:
    """The chart's labels once it is drawn (narrow or wide, as asked) and Plotly has settled."""
    page.wait_for_function(f"() => {{ const gd = document.querySelector('#whatif-chart .js-plotly-plot'); "
                           f"return gd && gd.querySelector('.legend') && !!gd.__specvizNarrow === {str(narrow).lower()}"
                           f"; }}", timeout=15_000)
    time.sleep(0.8)  # the resize handler waits 250 ms, then Plotly draws
    return page.evaluate(LABELS_JS)


def test_the_whatif_chart_labels_do_not_overlap_after_widening_a_phone_window(browser, app_url):
    page = open_page(browser, {"width": 400, "height": 900})
    try:
        page.goto(app_url + "?tab=classroom")
        page.wait_for_selector("#whatif-run", state="visible", timeout=30_000)
        for slider, value in (("#whatif-kmax", "4"), ("#whatif-tokens", "16")):
            box = page.locator(f"{slider} input[type=number]")
            box.fill(value)
            box.press("Enter")
        page.click("#whatif-run")
        page.wait_for_selector("#whatif-status .status-done, #whatif-status .status-error", timeout=RUN_TIMEOUT_MS)
        assert "Predicted" in page.inner_text("#whatif-status"), page.inner_text("#whatif-status")
        SHOTS.mkdir(exist_ok=True)
        phone = _labels_once_drawn(page, narrow=True)
        page.locator("#whatif-chart").screenshot(path=str(SHOTS / "classroom-whatif-400.png"))
        assert phone["width"] <= 400 and not _overlaps(phone["labels"]), _overlaps(phone["labels"])
        page.set_viewport_size({"width": 1400, "height": 1000})
        wide = _labels_once_drawn(page, narrow=False)
        page.locator("#whatif-chart").screenshot(path=str(SHOTS / "classroom-whatif-widened-1400.png"))
        assert wide["width"] > 1000, wide["width"]
        kinds = {label["kind"] for label in wide["labels"]}
        assert {"title", "xtitle", "ytitle", "legend", "xtick", "ytick"} <= kinds, kinds
        assert not _overlaps(wide["labels"]), _overlaps(wide["labels"])
        xtitle = next(label for label in wide["labels"] if label["kind"] == "xtitle")
        legend_tops = [label["top"] for label in wide["labels"] if label["kind"] == "legend"]
        assert min(legend_tops) >= xtitle["bottom"], (legend_tops, xtitle)  # the legend under the axis title
    finally:
        page.context.close()
