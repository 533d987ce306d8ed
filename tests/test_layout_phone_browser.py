"""The page on a phone (400 px) and on a desktop (1440 px), in a real browser (Debian's chromium via playwright, the
embedded model, loopback only).

At 400 px: one column with no sideways scroll, every tab in sight (no "…" menu), the results right after the
Generate (before the settings and the example prompts), after Generate the run's status in sight right under the
button, both panes at least 300 px wide, the charts one per row at full width, a
token's details shown on a tap, and the run history (the table of this session's runs) fitting the phone: each
run a block of four columns under the header's block, no sideways scrolling in its box nor a shade. The Temperature
slider's label stays one line with its number box beside it, at both widths. At 1440 px the same page keeps its
two columns: examples under the controls, panes
side by side, charts three to a row (the phone's page widened to a desktop: the charts go back side by side), the
history fits (no shade), the Arena's two tables fit without a shade, and a max new tokens typed above its end is
said (in the status and a short toast) as well as clamped. The
Classroom at 400 px: its stage right after the walkthrough menu, a recorded run ready to step with no model work, and
its chart tapped with no Plotly toolbar over it (the toolbar back beside the chart, clear of it, at 1400 px). The Live
panel's inputs are found by their labels alone (get_by_label("Target model")).
Screenshots go to artifacts/phone-*.png and artifacts/desktop-*.png (look at them).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import non_loopback, requires_chromium  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "artifacts"
APP_MAX_NEW_TOKENS = 12  # read by conftest's app_url
RUN_TIMEOUT_MS = 240_000
PHONE = {"width": 400, "height": 860}
DESKTOP = {"width": 1440, "height": 900}
PROMPT = "Copy this list twice: apples, pears, plums, apples, pears, plums."

pytestmark = requires_chromium


@pytest.fixture
def phone(browser, app_url):
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=1)
    page = context.new_page()
    page.requests = []
    page.on("request", lambda request: page.requests.append(request.url))
    page.app_url = app_url
    yield page
    context.close()


def _layout(page) -> dict:
    return page.evaluate("""() => {
        const box = (sel) => { const e = document.querySelector(sel); if (!e) return null;
                               const r = e.getBoundingClientRect(); return {top: r.top + scrollY, left: r.left,
                               width: r.width}; };
        return {scrollWidth: document.scrollingElement.scrollWidth, innerWidth: innerWidth,
                tabs: [...document.querySelectorAll('#tabs [role=tab]')].map(t => t.offsetParent !== null),
                menu: !!document.querySelector('#tabs .overflow-menu button') &&
                      document.querySelector('#tabs .overflow-menu').offsetParent !== null,
                results: box('#results'), examples: box('#examples'), controls: box('#controls'),
                panes: [box('#spec-output'), box('#baseline-output')]};
    }""")


def _no_sideways_scroll(page) -> None:
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1], widths


def _charts(page) -> dict:
    return page.eval_on_selector("#charts .js-plotly-plot", """gd => ({
        stacked: gd.dataset.svStacked, width: gd.getBoundingClientRect().width,
        domains: Object.keys(gd.layout).filter(k => /^xaxis\\d*$/.test(k)).map(k => gd.layout[k].domain),
        titleSize: Math.min(...(gd.layout.annotations || []).map(a => (a.font || {}).size || 99))})""")


WATCH_PROGRESS_JS = """() => { window.__svSeen = [];
    new MutationObserver(() => { const e = document.querySelector('#status .status'); if (!e) return;
        const r = e.getBoundingClientRect(), last = window.__svSeen.at(-1), text = e.textContent;
        if (!last || last.text !== text) window.__svSeen.push({text, top: r.top, bottom: r.bottom, y: scrollY,
                                                                 height: innerHeight}); })
      .observe(document.body, {subtree: true, childList: true, characterData: true}); }"""
"""Record each text the status under Generate shows, with where it was on the screen then."""


def _wait_cue(page, scroller: str, more: str) -> None:
    page.wait_for_function("([s, m]) => document.querySelector(s)?.parentElement.dataset.svMore === m",
                           arg=[scroller, more], timeout=5_000)


def _history_fits_the_phone(page) -> None:
    """The run history fits a 400 px phone (a trial found its ten columns scrolling 765 px sideways in a 312 px
    box): the table no wider than its box, no cell cut, no shade, and each figure in sight."""
    box = "#history .sv-scroll"
    page.locator(box).scroll_into_view_if_needed()
    _wait_cue(page, box, "")
    fit = page.eval_on_selector(box, """e => { const t = e.querySelector('table.history');
        return {table: t.scrollWidth, box: e.clientWidth, room: e.scrollWidth - e.clientWidth,
                cut: [...t.querySelectorAll('th, td')].filter(c => c.scrollWidth > c.clientWidth + 1)
                       .map(c => c.textContent)}; }""")
    assert fit["table"] <= fit["box"] and fit["room"] <= 0 and fit["cut"] == [], fit
    assert fit["box"] >= 300, fit
    said = page.inner_text("#history")
    assert "n-gram" in said and "tok/pass" in said and "acceptance" in said  # each cell names itself
    labels = page.eval_on_selector_all("#history .hist-label", "ls => ls.map(l => l.scrollWidth <= l.clientWidth + 1)")
    assert labels and all(labels), labels  # no label cut ("tokens/p…")
    page.locator("#history").screenshot(path=str(SHOTS / "phone-history.png"))


def _temperature_label_on_one_line(page) -> None:
    """The Temperature slider's label on one line, its number box beside it (not under it), as Top-p's: "Temperature
    (0 = greedy)" wrapped to two lines in the 330 px settings column; the detail is in its info line now."""
    heads = page.evaluate("""() => ['#temperature', '#top-p'].map(s => {
        const e = document.querySelector(s), box = e.querySelector('input[type=number]').getBoundingClientRect(),
              label = e.querySelector('[data-testid=block-info]').getBoundingClientRect();
        return {label: label.height, labelTop: label.top, labelRight: label.right, boxTop: box.top,
                boxLeft: box.left}; })""")
    temperature, top_p = heads
    assert temperature["label"] == top_p["label"], heads  # one line, as Top-p's
    assert abs(temperature["boxTop"] - temperature["labelTop"]) < temperature["label"], heads  # beside it
    assert temperature["labelRight"] <= temperature["boxLeft"], heads


def _max_new_tokens_typed_too_high_is_said(page) -> None:
    """Typed above the slider's end and the box left: Gradio clamps it, and the status and a short toast say so."""
    box = page.locator("#max-new-tokens input[type=number]")
    top = box.get_attribute("max")
    box.fill(str(int(top) + 4000))
    box.press("Tab")
    said = f"Max new tokens is at most {top} here"
    page.wait_for_function("(s) => document.getElementById('status').innerText.includes(s)", arg=said, timeout=10_000)
    page.wait_for_selector(f".toast-body:has-text('{said}')", timeout=10_000)
    assert box.input_value() == top


SAMPLING_TYPOS = {"#top-k": ("-3", "0", "Top-k must be between 0 and 1,000,000 (got -3). Using 0."),
                  "#repetition-penalty": ("0", "1", "Repetition penalty must be between 0.01 and 10 (got 0; 1 is off). "
                                                    "Using 1 (off).")}
"""Number boxes of "Sampling and stopping" typed out of range (seen set quietly by a new-user check): what each is
set to, and the sentence the status gives (no toast)."""


def _sampling_boxes_typed_out_of_range_are_said(page, shot: str) -> None:
    """Each box of :data:`SAMPLING_TYPOS`, typed and left: set to the value runs use, said in the status (one
    sentence naming the setting, its range and the value used), with no toast."""
    accordion = page.get_by_text("Sampling and stopping").first
    if not page.locator("#top-k input").first.is_visible():
        accordion.click()
    for selector, (typed, used, said) in SAMPLING_TYPOS.items():
        box = page.locator(f"{selector} input").first
        box.scroll_into_view_if_needed()
        box.fill(typed)
        box.press("Tab")
        page.wait_for_function("(s) => document.getElementById('status').innerText.includes(s)", arg=said,
                               timeout=10_000)
        assert box.input_value() == used, selector
    page.wait_for_timeout(1_000)  # a toast would have come with the status or right after it
    assert not any(said.split(" (got")[0] in toast for toast in page.locator(".toast-body").all_inner_texts())
    page.locator("#status").screenshot(path=str(SHOTS / shot))


def _pass_counts_agree_with_their_word(page) -> None:
    """The panes' headers: "1 pass", "12 passes" (seen: "1 passes")."""
    for pane in ("#spec-output", "#baseline-output"):
        header = page.inner_text(f"{pane} .pane-figures")
        count, word = re.search(r"(\d+)\s+(passes|pass)\b", header).groups()
        assert word == ("pass" if count == "1" else "passes"), header


def _progress_seen_under_the_button(page) -> None:
    """After Generate on a phone, without scrolling: the status right under the button told how the run went (a pass
    and token count while it streamed, "Done in" at the end), its first line always in sight (the trial of 5 Dec
    found it, and the panes, 1,200 px under the button, below the settings)."""
    seen = page.evaluate("window.__svSeen")
    assert any(re.search(r"Generating… pass \d+, \d+ tokens?", s["text"]) for s in seen), seen
    assert "Done in" in seen[-1]["text"], seen
    assert all(0 <= s["top"] and s["top"] + 40 <= s["height"] for s in seen), seen  # in sight, no scrolling needed
    page.screenshot(path=str(SHOTS / "phone-generate-done.png"))
    generate = page.eval_on_selector("#generate", "e => e.getBoundingClientRect().bottom")
    assert 0 < seen[-1]["top"] - generate < 80, (generate, seen[-1])  # right under the button


def _phone_page_before_a_run(page) -> None:
    """At 400 px before a run: no sideways scroll, every tab in sight (no "…" menu), the results before the
    settings and the settings before the example prompts, and the settings found by their labels."""
    layout = _layout(page)
    assert layout["scrollWidth"] <= layout["innerWidth"], layout
    assert layout["tabs"] == [True] * 5 and not layout["menu"], layout  # every tab in sight (Batching included)
    assert layout["results"]["top"] < layout["controls"]["top"] < layout["examples"]["top"], layout
    _main_inputs_found_by_label(page)


MAIN_INPUTS = {"Prompt": ("textbox", "prompt"), "Drafter": ("combobox", "drafter"),
               "Draft length k": ("spinbutton", "draft-length"), "Draft length schedule": ("group", "k-schedule"),
               "Max new tokens": ("spinbutton", "max-new-tokens"), "Target model": ("textbox", "target"),
               "Or a real pair (needs a network)": ("combobox", "preset"), "Weights": ("group", "weights")}
"""The Live panel's inputs: (role, the block's elem_id) by label. A trial's get_by_label("Target model") found
nothing: the box's name held its info line too; a slider's box was "number input for …", a radio group unnamed."""


def _main_inputs_found_by_label(page) -> None:
    """Each of :data:`MAIN_INPUTS` found by its label alone, as a control of that role in its own block, its info
    line its description (assets/head.html, part 6); the Target model box takes typing through its label."""
    page.wait_for_function("() => document.querySelector('#target textarea')?.hasAttribute('aria-labelledby')",
                           timeout=5_000)
    for name, (role, block) in MAIN_INPUTS.items():
        by_label, by_role = page.get_by_label(name, exact=True), page.get_by_role(role, name=name, exact=True)
        assert (by_label.count(), by_role.count()) == (1, 1), name
        assert by_label.evaluate("e => e.closest('.block').id") == block == by_role.evaluate(
            "e => e.closest('.block').id"), name
    assert page.get_by_label("Target model").count() == 1  # the trial's call, not exact
    target = page.get_by_label("Target model")
    described = target.evaluate("e => document.getElementById(e.getAttribute('aria-describedby')).textContent")
    assert "a hub id or a local folder" in described
    assert page.get_by_label("Draft length k", exact=True).input_value() == "4"
    kept = target.input_value()
    target.fill("embedded")
    assert page.input_value("#target textarea") == "embedded" == kept


def _generate_on_the_phone(page) -> None:
    """Generate a run of :data:`PROMPT` and watch its status stay in sight right under the button until "Done in"."""
    page.fill("#prompt textarea", PROMPT)
    page.evaluate(WATCH_PROGRESS_JS)
    SHOTS.mkdir(exist_ok=True)
    page.click("#generate")
    page.wait_for_function("() => !document.getElementById('status').innerText.includes('Ready')", timeout=15_000)
    page.screenshot(path=str(SHOTS / "phone-generate-pressed.png"))
    page.wait_for_selector("#status .status-done, #status .status-error", timeout=RUN_TIMEOUT_MS)
    assert "Done in" in page.inner_text("#status")
    _progress_seen_under_the_button(page)


def _phone_panes_and_charts_after_the_run(page) -> None:
    """After the run at 400 px: the panes one above the other and at least 300 px wide, the charts one
    per row at full width, the pass counts agreeing with their word."""
    page.wait_for_selector("#charts .js-plotly-plot", timeout=15_000)
    time.sleep(0.5)  # plotly finishes drawing
    layout = _layout(page)
    assert all(p["width"] >= 300 for p in layout["panes"]), layout["panes"]
    assert layout["panes"][0]["top"] < layout["panes"][1]["top"]  # one above the other
    charts = _charts(page)
    assert charts["stacked"] == "1" and all(d == [0, 1] for d in charts["domains"]), charts  # one chart per row
    assert charts["width"] >= 300 and charts["titleSize"] >= 12, charts
    _no_sideways_scroll(page)
    _pass_counts_agree_with_their_word(page)
    _links_between_the_prompt_and_the_settings(page)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "phone-live.png"), full_page=True)
    page.locator("#charts").screenshot(path=str(SHOTS / "phone-charts.png"))


def _links_between_the_prompt_and_the_settings(page) -> None:
    """A trial at 400 px scrolled past 7,300 px of results to change the drafter: a link under Generate goes to the
    settings, and one at their top goes back (both hidden on a desktop, :func:`_the_same_page_on_a_desktop`)."""
    page.click("#jump-settings a")
    page.wait_for_function("() => Math.abs(document.querySelector('#controls').getBoundingClientRect().top) < 40",
                           timeout=5_000)
    page.click("#jump-generate a")
    page.wait_for_function("() => { const r = document.querySelector('#generate').getBoundingClientRect(); "
                           "return r.top >= 0 && r.bottom <= innerHeight; }", timeout=5_000)


def _token_details_on_a_tap(page) -> None:
    """A token's details on a tap (a touch screen shows no ``title``), inside the phone's width; a tap elsewhere
    hides them."""
    token = page.locator("#spec-output span.tok[title]").nth(2)
    token.scroll_into_view_if_needed()
    title = token.get_attribute("title")
    token.tap()
    page.wait_for_selector("#sv-tip:not([hidden])", timeout=5_000)
    assert page.inner_text("#sv-tip") == title and "pass" in title
    box = page.eval_on_selector("#sv-tip", "e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; }")
    assert 0 <= box[0] and box[1] <= PHONE["width"], box
    page.screenshot(path=str(SHOTS / "phone-token-tap.png"))
    page.tap("#status")  # a tap elsewhere hides it
    page.wait_for_selector("#sv-tip", state="hidden", timeout=5_000)


def _why_chart_fits_after_the_run(page) -> None:
    """Trial: the Why tab's what-if chart, redrawn with the run's star while its tab was hidden, took Plotly's
    default 700 px and ran past a 400 px phone's edge ("Expected tokens" cut, the axis title "dra"). Picking the tab
    now fits it to its box (assets/head.html, part 5)."""
    page.get_by_role("tab", name="Why it works").click()
    fit = ("() => { const e = document.querySelector('#why-whatif-chart .main-svg'); const box = "
           "document.querySelector('#why-whatif-chart .js-plotly-plot')?.parentElement; return e && box ? "
           "[Math.round(e.getBoundingClientRect().width), Math.round(box.getBoundingClientRect().width)] : null; }")
    page.wait_for_function(f"() => {{ const w = ({fit})(); return w && Math.abs(w[0] - w[1]) <= 2; }}",
                           timeout=10_000)
    width, box = page.evaluate(fit)
    assert width <= PHONE["width"] and abs(width - box) <= 2, (width, box)
    _no_sideways_scroll(page)
    page.get_by_role("tab", name="Live").click()


def _the_same_page_on_a_desktop(page) -> None:
    """The same page widened to a desktop: two columns, panes side by side, charts three to a row, the
    history and the Arena's tables with no shade; typed max new tokens and sampling typos said, the Temperature
    label on one line."""
    page.set_viewport_size(DESKTOP)
    assert not page.is_visible("#run-progress")  # the status is beside the button: no copy under it
    assert not page.is_visible("#jump-settings a") and not page.is_visible("#jump-generate a")  # one column only
    page.wait_for_function("() => document.querySelector('#charts .js-plotly-plot')?.dataset.svStacked === '0'",
                           timeout=10_000)
    time.sleep(0.5)
    layout = _layout(page)
    assert layout["examples"]["left"] < layout["results"]["left"], layout  # examples under the controls
    assert layout["panes"][0]["top"] == layout["panes"][1]["top"], layout["panes"]
    assert sorted({d[0] for d in _charts(page)["domains"]}) == pytest.approx([0, 0.357, 0.713], abs=0.01)
    _no_sideways_scroll(page)
    _wait_cue(page, "#history .sv-scroll", "")  # the history fits a desktop: no shade
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOTS / "desktop-live.png"), full_page=True)
    _max_new_tokens_typed_too_high_is_said(page)
    _sampling_boxes_typed_out_of_range_are_said(page, "desktop-sampling-typos.png")
    _temperature_label_on_one_line(page)
    page.get_by_role("tab", name="Arena").click()  # its two tables (what each method did; rates and timings) fit
    _wait_cue(page, "#arena-table .virtual-table-viewport", "")  # a desktop: no shade on either
    _wait_cue(page, "#arena-timings .virtual-table-viewport", "")
    page.locator("#arena-table").screenshot(path=str(SHOTS / "desktop-arena-table.png"))


TOOLBAR_JS = """gd => { const bar = gd.querySelector('.modebar'), r = gd.getBoundingClientRect();
    const plots = [...gd.querySelectorAll('.nsewdrag')].map(d => d.getBoundingClientRect().right - r.left);
    const b = bar && bar.getBoundingClientRect();
    return {display: bar ? getComputedStyle(bar.closest('.modebar-container')).display : null,
            opacity: bar ? getComputedStyle(bar.closest('.modebar-container')).opacity : null,
            left: b ? b.left - r.left : null, width: b ? b.width : 0, plotRight: Math.max(...plots)}; }"""
"""Plotly's toolbar on a chart: its container's display and opacity, its left edge and width and the plot areas'
right edge (px from the chart's left)."""


def _no_toolbar_on_the_phone(page, chart: str) -> None:
    """At 400 px a tap on a chart (how a phone reads a value) shows no toolbar: a trial found it standing over the
    charts' right edge at that width (assets/style.css)."""
    plot = page.locator(f"{chart} .js-plotly-plot")
    plot.scroll_into_view_if_needed()
    plot.tap(position={"x": 80, "y": 150})
    time.sleep(0.3)
    bar = plot.evaluate(TOOLBAR_JS)
    assert bar["display"] == "none" and bar["width"] == 0, bar
    page.screenshot(path=str(SHOTS / "phone-chart-no-toolbar.png"))


def _toolbar_beside_the_chart_on_a_desktop(page, chart: str) -> None:
    """At 1400 px the toolbar is there on a hover, in the chart's right margin, clear of its plot area."""
    page.set_viewport_size({"width": 1400, "height": 900})
    plot = page.locator(f"{chart} .js-plotly-plot")
    plot.scroll_into_view_if_needed()
    plot.hover(position={"x": 80, "y": 150})
    page.wait_for_function(f"() => getComputedStyle(document.querySelector('{chart} .modebar-container'))"
                           ".opacity === '1'", timeout=5_000)
    bar = plot.evaluate(TOOLBAR_JS)
    assert bar["display"] != "none" and bar["width"] > 0 and bar["left"] >= bar["plotRight"], bar
    plot.screenshot(path=str(SHOTS / "desktop-chart-toolbar.png"))
    page.set_viewport_size(PHONE)


def test_live_tab_on_a_phone_then_on_a_desktop(phone):
    page = phone
    page.goto(page.app_url)
    page.wait_for_selector("#generate", timeout=60_000)
    _phone_page_before_a_run(page)
    page.get_by_role("tab", name="Why it works").click()  # its what-if chart drawn once, then hidden during the run
    page.wait_for_selector("#why-whatif-chart .main-svg", timeout=15_000)
    page.get_by_role("tab", name="Live").click()
    _generate_on_the_phone(page)
    _phone_panes_and_charts_after_the_run(page)
    _token_details_on_a_tap(page)
    _history_fits_the_phone(page)
    _sampling_boxes_typed_out_of_range_are_said(page, "phone-sampling-typos.png")
    _temperature_label_on_one_line(page)
    _no_sideways_scroll(page)
    _why_chart_fits_after_the_run(page)
    _the_same_page_on_a_desktop(page)
    assert not non_loopback(page.requests), non_loopback(page.requests)


def test_classroom_on_a_phone_steps_a_recorded_run(phone):
    from app import classroom

    page = phone
    loads = []
    real = classroom.running.load_target  # where the Classroom's runs load their target
    classroom.running.load_target = lambda *a, **k: loads.append(a) or real(*a, **k)
    try:
        page.goto(page.app_url + "?tab=classroom&preset=grounded-ngram")
        page.wait_for_selector("#classroom-status .status-done", timeout=30_000)
        assert "Recorded run" in page.inner_text("#classroom-status")
        assert "step 1 /" in page.inner_text("#classroom-progress")
        _no_sideways_scroll(page)
        for _ in range(30):  # Next, tapped, until a rejection shows its chart
            overflow = page.evaluate("() => { const box = document.querySelector('#classroom-table'); "
                                     "return (box.querySelector('table')?.scrollWidth || 0) - box.clientWidth; }")
            assert overflow <= 0, overflow  # the step's table fits the phone, no scrolling inside it either
            if page.locator("#classroom-chart .js-plotly-plot").count() and page.is_visible("#classroom-chart"):
                break
            before = page.inner_text("#classroom-progress .cr-count")
            page.tap("#classroom-next")
            page.wait_for_function("(b) => document.querySelector('#classroom-progress .cr-count')?.textContent "
                                   "!== b", arg=before, timeout=10_000)
        assert page.locator("#classroom-table tr[data-decision=rejected]").count() == 1
        time.sleep(0.5)
        _no_toolbar_on_the_phone(page, "#classroom-chart")
        order = page.evaluate("() => ['#classroom-pick', '#classroom-stage', '#classroom-controls']"
                              ".map(s => document.querySelector(s).getBoundingClientRect().top)")
        assert order == sorted(order), order  # menu, stage, then the settings of your own run
        stage = page.eval_on_selector("#classroom-stage", "e => e.getBoundingClientRect().width")
        assert stage >= 300
        _no_sideways_scroll(page)
        page.screenshot(path=str(SHOTS / "phone-classroom.png"), full_page=True)
        _toolbar_beside_the_chart_on_a_desktop(page, "#classroom-chart")
    finally:
        classroom.running.load_target = real
    assert loads == []  # no model was loaded (or run) to step through the recorded walkthrough
    assert not non_loopback(page.requests)
