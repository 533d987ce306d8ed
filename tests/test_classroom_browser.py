"""The Classroom tab's stepper (app/classroom/): its pure helpers (the table, chart, caption and output of a step),
then the real tab in a real browser (Debian's chromium via playwright, the embedded model, loopback only).

In the browser a new user opens a shared link to the "poorly matched drafter" walkthrough (sampling at temperature
1, fixed seed): its recorded run opens at once, with no model work; they step with Next until a rejection and see q,
p, min(1, p/q), u and the decision, the caption and the rejection chart; use the keyboard, the presentation view,
Play and the share link (an unchanged walkthrough's link is just its id). The settings, links, recording and
what-if k are tests/test_classroom_inputs_browser.py's. Screenshots go to /tmp/classroom-*.png.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from urllib.parse import urlparse

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import non_loopback, open_page, requires_chromium  # noqa: E402
from classroom_browser_support import (  # noqa: E402,F401  (page: the fixture)
    choose_walkthrough, click_and_wait, page, step_text)

from app import classroom  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402
from specviz.analysis.stepper import Distributions, Recording, Step, Stepper  # noqa: E402


# ------------------------------------------------------------------------------------------------- no browser


def _recording() -> Recording:
    prefill = PassEvent(run="speculative", index=0, kind="prefill", k=0, draft_ids=(), accept_mask=(),
                        num_accepted=0, next_id=1, next_kind="target", emitted_ids=(1,), details=(), text_delta="",
                        timings=Timings(), t_end_ms=5.0, num_generated=1)
    details = (PositionDetail(0.8, 0.4, 0.9, 2, True), PositionDetail(0.1, 0.5, 0.7, 4, True),
               PositionDetail(0.2, 0.3, None, 5, False))
    one = PassEvent(run="speculative", index=1, kind="pass", k=3, draft_ids=(2, 3, 4), accept_mask=(True, False, False),
                    num_accepted=1, next_id=6, next_kind="recovered", emitted_ids=(2, 6), details=details,
                    text_delta="", timings=Timings(), t_end_ms=9.0, num_generated=3, finish_reason="length")
    dist = Distributions(1, (6, 3, 5), (0.5, 0.1, 0.2), (0.1, 0.5, 0.1), (0.8, 0.0, 0.2), drafted_id=3, chosen_id=6)
    texts = {1: "Hi", 2: " there", 3: " <b>", 4: " you", 5: " all", 6: " friend"}
    return Recording((prefill, one), greedy=False, drafter_name="draft", token_texts=texts, rejections={1: dist})


def test_walkthrough_menu_labels_are_short_and_the_note_gives_the_full_title():
    walkthroughs = classroom.load_walkthroughs()
    choices = classroom.menu_choices(walkthroughs)
    labels = [label for label, _ in choices]
    assert [value for _, value in choices] == [w["id"] for w in walkthroughs] + [classroom.CUSTOM]
    assert len(set(labels)) == len(labels) and all(len(label) <= classroom.MENU_LABEL_MAX for label in labels)
    assert choices[-1] == ("Your own prompt and settings", classroom.CUSTOM)
    for walkthrough, label in zip(walkthroughs, labels):
        assert label == walkthrough["menu"] and label != walkthrough["title"]
        note = classroom.note_html(walkthrough)  # the full title, under the menu
        assert f"<b>{classroom.html.escape(walkthrough['title'])}.</b>" in note
    assert classroom.menu_choices([{"id": "x", "title": "An old entry"}])[0] == ("An old entry", "x")


def test_table_chart_and_caption_html_from_a_recording():
    stepper = Stepper(_recording())
    stepper.goto(Step(1, "decide"))
    table = classroom.table_html(stepper)
    for header in ("q (draft)", "p (target)", "min(1, p/q)", "u", "decision"):
        assert f">{header}</th>" in table
    assert 'data-decision="rejected"' in table and 'data-decision="not judged"' in table
    assert "&lt;b&gt;" in table and "<b>" not in table  # token text is escaped
    assert '<td data-col="ratio">0.200</td>' in table and "0.700" in table
    figure = classroom.rejection_figure(stepper.distributions(), stepper.recording)
    assert [t.name for t in figure.data] == ["target p", "draft q", "residual norm(max(0, p − q))"]
    assert any("recovered" in a.text for a in figure.layout.annotations)
    # the tallest bar (residual 0.8) would have put the axis at 1.28: it stops at 1, the marks in a grown margin
    assert list(figure.layout.yaxis.range) == [0, 1.0] and figure.layout.margin.t == 70 + classroom.MARK_ROOM_PX
    assert classroom.probability_range(0.5) == (pytest.approx(0.8), 0)
    assert classroom.probability_range(0.625) == (1.0, 0) and classroom.probability_range(0.99)[0] == 1.0
    # phase 3 (decide): the caption says the recovered token is drawn in step 4, so the chart does not mark it yet
    marks = lambda: [a.text for a in classroom.rejection_chart(stepper).layout.annotations]  # noqa: E731
    assert marks() == ["<b>✗ drafted (rejected)</b>"]
    stepper.goto(Step(1, "emit"))
    assert marks() == ["<b>✗ drafted (rejected)</b>", "<b>★ recovered</b>"]
    stepper.goto(Step(1, "decide"))
    assert "rejected" in classroom.caption_html(stepper)
    progress, caption, table2, chart, output = classroom.view(stepper)
    assert chart["visible"] is True and "Pass 1 of 1" in progress
    stepper.goto(0)
    assert classroom.view(stepper)[3]["visible"] is False  # no chart at the prefill
    out = classroom.step_rejection(stepper)  # jumps to pass 1's decision (the run's only rejection)
    assert stepper.current == Step(1, "decide") and "No rejection" not in out[2]
    out = classroom.step_rejection(stepper)  # none left: it stays and says so
    assert stepper.current == Step(1, "decide") and "No rejection after this step." in out[2]


@pytest.mark.parametrize("walkthrough", ["chat-ngram", "lookahead-jacobi"])
def test_a_pass_with_nothing_drafted_says_plain_target_token_not_recovered_or_bonus(walkthrough):
    """A recorded pass that drafted nothing (the n-gram drafter had no guess; lookahead had no candidate): at its
    emit step the highlighted phase, the progress line, the caption, the table and the output so far call its token
    a plain target token, as the Live tab does, and nothing says recovered or bonus."""
    from app import render

    stepper = Stepper(classroom.shipped_recording(walkthrough).recording)
    step = next(st for st in stepper.steps if st.phase == "emit" and not stepper.event(st).draft_ids)
    stepper.goto(step)
    progress, caption, table, _, output = classroom.view(stepper)
    on = re.search(r'<span class="cr-phase cr-phase-on">([^<]*)</span>', progress).group(1)
    assert on == "4 · plain target token"
    assert "4 · plain target token</b>" in progress and "cr-phase-skip" in progress  # nothing to accept or reject
    assert "plain target token" in caption and "not recovered" in caption and "not a bonus" in caption
    assert 'data-decision="target"' in table and "● plain target token" in table and "nothing drafted" in table
    for html_ in (progress, table):
        assert "recovered" not in html_ and "bonus" not in html_
    current = re.search(r'<span class="pass cr-current"[^>]*>(.*?)</span></span>', output).group(1)
    assert re.findall(r'data-kind="(\w+)"', current) == ["target"]
    # the Live tab's pane labels the same token alike
    pane = render.Pane(_TextTokenizer(stepper.recording))
    for event in stepper.recording.events[: step.pass_index + 1]:
        pane.add(event)
    last = pane.passes[-1]
    assert [t.kind for t in last] == ["target"] and "a plain target token, neither recovered nor bonus" in last[0].title
    assert "plain target token (prefill, baseline, a pass with nothing drafted)" in render.legend_html()


class _TextTokenizer:
    """Decodes a recording's ids with its stored token texts (enough for the Live pane's labels)."""

    all_special_ids = ()

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def decode(self, ids, **_):
        return "".join(self.recording.text(i) for i in ids)


# ------------------------------------------------------------------------------------------------- browser


def _numbers(row) -> dict[str, float]:
    cells = {}
    for col in ("q", "p", "ratio", "u"):
        text = row.locator(f"td[data-col={col}]").inner_text()
        match = re.search(r"\d\.\d{3}", text)
        if match:
            cells[col] = float(match.group())
    return cells


@requires_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_every_walkthrough_name_fits_the_closed_menu(browser, app_url, width):
    """Each choice of the walkthrough menu, once picked, shows whole in the closed menu (no clipped text) at a
    desktop's and a phone's width; the note under the menu gives the walkthrough's full title."""
    page = open_page(browser, {"width": width, "height": 900})
    try:
        page.goto(app_url + "?tab=classroom&preset=grounded-ngram")
        page.wait_for_selector("#classroom-status .status-done", timeout=30_000)
        menu = "#classroom-walkthrough input"
        for label, value in classroom.menu_choices(classroom.load_walkthroughs()):
            page.click(menu)
            page.click(f"#classroom-walkthrough li[role=option][aria-label={label!r}]")
            page.wait_for_function(f"() => document.querySelector({menu!r}).value === {label!r}", timeout=10_000)
            page.wait_for_selector("#classroom-walkthrough [role=listbox]", state="detached", timeout=10_000)
            fits = page.eval_on_selector(menu, "e => [e.scrollWidth, e.clientWidth]")
            assert fits[0] <= fits[1], (label, fits)
            if value != classroom.CUSTOM:
                title = {w["id"]: w["title"] for w in classroom.load_walkthroughs()}[value]
                page.wait_for_function("(t) => document.querySelector('#classroom-note').innerText.includes(t)",
                                       arg=title, timeout=10_000)
        page.screenshot(path=f"/tmp/classroom-menu-{width}.png")
    finally:
        page.context.close()


@requires_chromium
def test_the_notes_link_reads_as_part_of_its_sentence(browser, app_url):
    """A new user read "or  open it ." in the poorly matched drafter's note: Gradio pads every link like a button;
    the note's link has no padding, so the sentence reads "or open it."."""
    page = open_page(browser, {"width": 1400, "height": 900})
    try:
        page.goto(app_url + "?tab=classroom&preset=poor-drafter")
        page.wait_for_selector("#classroom-note .cr-compare a", timeout=30_000)
        padding = page.eval_on_selector("#classroom-note .cr-compare a",
                                        "a => [getComputedStyle(a).paddingLeft, getComputedStyle(a).paddingRight]")
        assert padding == ["0px", "0px"]
        assert "or open it." in page.inner_text("#classroom-note")
    finally:
        page.context.close()


def _open_the_poor_drafter_link(page) -> None:
    """The shared link opens the Classroom on the walkthrough's settings and its recorded run, at once."""
    page.goto(page.app_url + "?preset=poor-drafter")
    page.wait_for_selector("#classroom-record", state="visible", timeout=30_000)
    assert page.get_attribute("#tab-classroom-button", "aria-selected") == "true"  # the link opens the tab
    assert "leaves" in page.input_value("#classroom-prompt textarea")
    assert page.input_value("#classroom-temperature input[type=number]") == "1"
    page.wait_for_selector("#classroom-status .status-done", timeout=15_000)  # the recorded run, at once
    assert "Recorded run of" in page.inner_text("#classroom-status"), page.inner_text("#classroom-status")
    assert "Prefill" in page.inner_text("#classroom-caption")


def _step_to_a_rejection_and_read_it(page) -> None:
    """Next, phase by phase, to the first rejection: the table's q, p, min(1, p/q), u and decision, the
    caption and the rejection chart (the recovered token not marked yet)."""
    for _ in range(40):  # Next, phase by phase, until a rejection is on the table
        if page.locator("#classroom-table tr[data-decision=rejected]").count():
            break
        click_and_wait(page, "#classroom-next")
    table = page.locator("#classroom-table table")
    assert table.get_attribute("data-phase") == "decide"
    headers = page.eval_on_selector_all("#classroom-table th", "ths => ths.map(th => th.textContent)")
    assert headers == ["#", "token", "q (draft)", "p (target)", "min(1, p/q)", "u", "decision"]
    row = page.locator("#classroom-table tr[data-decision=rejected]")
    numbers = _numbers(row)
    assert set(numbers) == {"q", "p", "ratio", "u"}, numbers
    if numbers["q"] >= 0.05:  # shown values are rounded to 3 decimals
        assert numbers["ratio"] == pytest.approx(min(1.0, numbers["p"] / numbers["q"]), abs=0.02)
    assert numbers["u"] >= numbers["ratio"] - 0.001  # rejected: u was not below min(1, p/q)
    assert "rejected" in row.inner_text()
    caption = page.inner_text("#classroom-caption")
    assert "min(1, p/q)" in caption and "rejected" in caption and "u =" in caption
    page.wait_for_selector("#classroom-chart .js-plotly-plot", timeout=15_000)
    names = page.eval_on_selector("#classroom-chart .js-plotly-plot", "gd => gd.data.map(t => t.name)")
    assert names[:2] == ["target p", "draft q"] and names[2].startswith("residual")
    notes = page.eval_on_selector("#classroom-chart .js-plotly-plot",
                                  "gd => gd.layout.annotations.map(a => a.text).join(' ')")
    assert "drafted" in notes and "recovered" not in notes  # the recovered token is drawn at the emit step
    time.sleep(0.5)  # let plotly finish drawing before the screenshot
    page.screenshot(path="/tmp/classroom-rejection.png", full_page=True)


def _keys_step_to_the_recovered_token_and_back(page) -> None:
    """Keyboard: → to the recovered token (table, caption, output and chart say it), ← back to the decision (focus
    outside any field)."""
    page.click("#classroom-caption")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#classroom-table table[data-phase=emit]", timeout=15_000)
    assert page.locator("#classroom-table tr[data-decision=recovered]").count() == 1
    assert "recovered" in page.inner_text("#classroom-caption")
    assert page.locator("#classroom-output span[data-kind=recovered]").count() >= 1
    page.wait_for_function("() => document.querySelector('#classroom-chart .js-plotly-plot').layout.annotations"
                           ".some(a => a.text.includes('recovered'))", timeout=15_000)
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector("#classroom-table table[data-phase=decide]", timeout=15_000)


def _presentation_view_from_the_top(page) -> None:
    """Presentation view: large type, from the top of the page; the keys then go to the walkthrough (focus moved to
    the stage), space on the box plays and pauses without unticking it; then off again (Enter on the box)."""
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.check("#classroom-present input")
    page.wait_for_function("() => document.body.classList.contains('sv-present')", timeout=10_000)
    page.wait_for_function("() => window.scrollY === 0", timeout=10_000)
    size = page.eval_on_selector("#classroom-caption .cr-caption", "e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 24, size
    page.screenshot(path="/tmp/classroom-present.png")
    _arrows_step_after_the_presentation_checkbox(page)
    _space_on_the_presentation_checkbox_plays(page)
    page.focus("#classroom-present input")
    page.keyboard.press("Enter")  # the keyboard's way to untick it
    page.wait_for_function("() => !document.body.classList.contains('sv-present')", timeout=10_000)
    assert not page.is_checked("#classroom-present input")
    assert page.evaluate("() => document.activeElement.id") == "classroom-stage"


def _arrows_step_after_the_presentation_checkbox(page) -> None:
    """A trial: in the presentation view → did nothing while focus stayed on the checkbox just ticked. Now ticking
    it moves focus to the stage, and → and ← step from there (and from the box itself); in the prompt box (typing)
    they move the caret and the step stays."""
    page.wait_for_function("() => document.activeElement.id === 'classroom-stage'", timeout=10_000)
    for focus in (None, "#classroom-present input"):
        if focus:
            page.focus(focus)
        before = step_text(page)
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent !== "
                               f"{before!r}", timeout=15_000)
        assert page.evaluate("() => document.body.classList.contains('sv-present')")  # the view stays on
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent === "
                               f"{before!r}", timeout=15_000)
    page.click("#classroom-prompt textarea")
    page.evaluate("() => document.querySelector('#classroom-prompt textarea').setSelectionRange(0, 0)")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.querySelector('#classroom-prompt textarea').selectionStart") == 1
    time.sleep(1.0)  # a step would have reached the counter by now (it does in well under a second above)
    assert step_text(page) == before


def _space_on_the_presentation_checkbox_plays(page) -> None:
    """A trial: space, with focus on the presentation box just ticked, unticked it (the big type gone) and nothing
    played. Now space there plays and pauses, and the box stays ticked."""
    page.focus("#classroom-present input")
    before = step_text(page)
    page.keyboard.press(" ")
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Pause')",
                           timeout=15_000)
    page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent !== "
                           f"{before!r}", timeout=20_000)  # it plays: the step moves on its own
    assert page.is_checked("#classroom-present input")
    assert page.evaluate("() => document.body.classList.contains('sv-present')")
    page.keyboard.press(" ")
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Play')",
                           timeout=15_000)
    time.sleep(0.5)  # a late keyup or change event would have unticked it by now
    assert page.is_checked("#classroom-present input")
    assert page.evaluate("() => document.body.classList.contains('sv-present')")


def _share_link_names_the_walkthrough(page) -> None:
    """Share link: an absolute (loopback) address with the walkthrough, named by its id."""
    page.click("#classroom-share-btn")
    page.wait_for_function("() => (document.querySelector('#classroom-share textarea')?.value || '')"
                           ".startsWith('http')", timeout=15_000)
    link = urlparse(page.input_value("#classroom-share textarea"))
    assert link.hostname == "127.0.0.1"
    assert link.query == "tab=classroom&preset=poor-drafter"  # the walkthrough's recorded run, by its id


def _play_steps_and_space_pauses(page) -> None:
    """Play advances on its own; space (focus outside any field) pauses it."""
    before = step_text(page)
    page.click("#classroom-play")
    page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent !== "
                           f"{before!r}", timeout=20_000)
    assert "Pause" in page.inner_text("#classroom-play")
    page.click("#classroom-caption")
    page.keyboard.press(" ")
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Play')",
                           timeout=15_000)


@requires_chromium
def test_step_through_a_sampling_run_to_a_rejection(page):
    _open_the_poor_drafter_link(page)
    _step_to_a_rejection_and_read_it(page)
    _keys_step_to_the_recovered_token_and_back(page)
    _presentation_view_from_the_top(page)
    _share_link_names_the_walkthrough(page)
    _play_steps_and_space_pauses(page)
    assert "Traceback" not in page.content()
    assert not non_loopback(page.requests), non_loopback(page.requests)


@requires_chromium
def test_play_stops_when_another_walkthrough_opens_and_a_phone_table_keeps_tokens_whole(browser, app_url):
    """Seen: Play kept stepping the newly picked walkthrough (it opened at step 3 and went on), and at 400 px the
    presentation view's table split " water" into "wate" / "r". Now picking a walkthrough pauses Play and opens its
    run at step 1; every token of the table stands on one line, the page no wider than the phone."""
    page = open_page(browser, {"width": 400, "height": 850})
    page.goto(app_url + "?tab=classroom&preset=grounded-ngram&present=1")
    page.wait_for_selector("#classroom-status .status-done", timeout=30_000)
    for _ in range(6):
        click_and_wait(page, "#classroom-next")
    page.wait_for_function("() => document.body.classList.contains('sv-present')", timeout=10_000)
    tokens = page.eval_on_selector_all(
        "#classroom-table .cr-tok", "els => els.map(e => [e.textContent, e.getClientRects().length, "
        "e.getBoundingClientRect().height, parseFloat(getComputedStyle(e).lineHeight) || "
        "1.3 * parseFloat(getComputedStyle(e).fontSize)])")
    assert any(text.strip() == "tomatoes" for text, *_ in tokens), tokens
    for text, boxes, height, line in tokens:
        assert boxes == 1 and height < 1.6 * line, (text, height, line)  # one line: not broken inside the token
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 400
    page.screenshot(path="/tmp/classroom-present-400.png", full_page=True)

    page.click("#classroom-play")
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Pause')",
                           timeout=15_000)
    choose_walkthrough(page, "Poorly matched")
    page.wait_for_function("() => document.querySelector('#classroom-status').textContent.includes('Poorly')",
                           timeout=15_000)
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Play')",
                           timeout=15_000)
    time.sleep(3 * classroom.PLAY_INTERVAL_S)  # a playing timer would have stepped by now
    assert step_text(page).startswith("step 1 /"), step_text(page)
    page.context.close()


def test_whitespace_tokens_in_the_output_get_a_visible_width_and_newline_mark():
    """At 400 px a token of spaces or a newline in "Output so far" was a sliver: it now has class tok-space (a
    minimum width in assets/style.css) and a newline its ⏎ mark, as in the Live panes."""
    rec = _recording()
    rec = dataclasses.replace(rec, token_texts={**rec.token_texts, 2: " ", 6: "\n"})
    stepper = Stepper(rec)
    stepper.goto(Step(1, "emit"))
    out = classroom.output_html(stepper)
    assert '<span class="tok tok-accepted tok-space" data-kind="accepted"> </span>' in out
    assert ('<span class="tok tok-recovered tok-space" data-kind="recovered"><i class="nl" aria-hidden="true"></i>\n'
            '</span>') in out
    assert '<span class="tok tok-target" data-kind="target">Hi</span>' in out  # text tokens as before


def test_the_rejection_chart_has_a_narrow_layout_with_upright_labels_and_wrapped_marks():
    """At 400 px the trial saw ten token labels at -30° overlap and "✗ drafted (rejected)" lie across the bars: the
    figure carries a narrow layout (drawn by assets/head.html below its STACK_BELOW_PX) whose labels stand at -90°
    and whose marks, wrapped at their spaces, stand above the plot (their tails above the axis' top)."""
    from app.figures import visible_lines

    stepper = Stepper(_recording())
    stepper.goto(Step(1, "emit"))
    figure = classroom.rejection_chart(stepper)
    narrow = figure.layout.meta["sv_narrow"]
    assert narrow["xaxis"] == {"tickangle": -90, "tickfont": {"size": 11}}
    assert figure.layout.xaxis.tickangle in (0, -30)  # the wide figure keeps its own labels
    notes = narrow["annotations"]
    assert [visible_lines(n["text"]) for n in notes] == [["✗ drafted", "(rejected)"], ["★ recovered"]]
    top = figure.layout.yaxis.range[1]
    assert all(n["ayref"] == "y" and n["ay"] > top for n in notes)
    assert notes[1]["ay"] > notes[0]["ay"]  # the second mark stands above the first, never on it
    shift = classroom.figures.NARROW_MARK_SHIFT_PX  # and apart sideways, each toward its own bar's side
    assert sorted((notes[0]["ax"], notes[1]["ax"])) == [-shift, shift] and notes[0]["ax"] != 0
    assert narrow["margin"] == {"t": classroom.figures.NARROW_TOP_PX} and narrow["height"] > figure.layout.height
    stepper.goto(Step(1, "decide"))  # before the recovered token is drawn: the rejected guess's mark only
    assert len(classroom.rejection_chart(stepper).layout.meta["sv_narrow"]["annotations"]) == 1


@requires_chromium
def test_a_phone_presentation_enlarges_the_table_and_keeps_the_chart_title_clear_of_the_mode_bar(browser, app_url):
    """A new user's trial at 400 px, presentation view: the per-token table stayed in 11 px type beside a 17 px
    caption, and the rejection chart's subtitle "…drawn from the residual" ran under the mode bar's icons. The table's
    type (its tokens' too) is now 13 px with the whole table in its box; the subtitle wraps left of the mode bar."""
    page = open_page(browser, {"width": 400, "height": 850})
    page.goto(app_url + "?tab=classroom&preset=poor-drafter&present=1")
    page.wait_for_selector("#classroom-status .status-done", timeout=30_000)
    page.wait_for_function("() => document.body.classList.contains('sv-present')", timeout=10_000)
    for _ in range(40):
        if page.locator("#classroom-table tr[data-decision=rejected]").count():
            break
        click_and_wait(page, "#classroom-next")
    sizes = page.eval_on_selector("#classroom-table", "box => ['td', 'th', '.cr-tok'].map(t => "
                                  "parseFloat(getComputedStyle(box.querySelector(t)).fontSize))")
    assert sizes == [pytest.approx(13.2, abs=0.1), pytest.approx(12.0, abs=0.1), pytest.approx(13.2, abs=0.1)], sizes
    widths = page.eval_on_selector("#classroom-table", "box => [box.scrollWidth, box.clientWidth]")
    assert widths[0] <= widths[1], widths  # the decision column in sight, no sideways scroll
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 400
    page.wait_for_selector("#classroom-chart .js-plotly-plot .gtitle", timeout=15_000)
    time.sleep(0.5)  # let plotly finish drawing
    title, bar = (page.eval_on_selector(f"#classroom-chart {s}", "e => e.getBoundingClientRect().toJSON()")
                  for s in (".gtitle", ".modebar"))
    # up to 640 px the mode bar is not shown at all (it covered charts' right edge); else the title keeps left of it
    assert bar["width"] == 0 or title["right"] <= bar["left"], (title, bar)
    assert title["right"] <= 400, title
    lines = page.eval_on_selector_all("#classroom-chart .gtitle tspan.line", "ts => ts.map(t => t.textContent)")
    assert lines[1:] == ["the recovered token is drawn", "from the residual"], lines
    page.locator("#classroom-table").scroll_into_view_if_needed()
    page.screenshot(path="/tmp/classroom-present-400-table.png")
    page.locator("#classroom-chart").scroll_into_view_if_needed()
    page.screenshot(path="/tmp/classroom-present-400-chart.png")
    page.context.close()
