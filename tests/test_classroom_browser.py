"""The Classroom tab (app/classroom/): its pure helpers, then the real tab in a real browser (Debian's chromium via
playwright, the embedded model, loopback only).

In the browser a new user opens a shared link to the "poorly matched drafter" walkthrough (sampling at temperature
1, fixed seed): its recorded run opens at once, with no model work; they step with Next until a rejection and see q,
p, min(1, p/q), u and the decision, the caption and the rejection chart; use the keyboard, the presentation view,
Play and the share link (an unchanged walkthrough's link is just its id). Then a teacher records their own short run,
downloads it, switches to another walkthrough and opens the downloaded file again (and a broken file gets one
sentence); then runs what-if k and re-runs at the recommended k, with predicted and measured speedups side by side.
Screenshots go to /tmp/classroom-*.png.
"""

from __future__ import annotations

import dataclasses
import html
import os
import re
import time
from urllib.parse import parse_qs, urlparse

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import non_loopback, open_page, requires_chromium  # noqa: E402

from app import classroom  # noqa: E402
from app.classroom.walkthroughs import unknown_preset_message  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402
from specviz.analysis.stepper import Distributions, Recording, Step, Stepper  # noqa: E402

RUN_TIMEOUT_MS = 240_000  # a few tokens on a busy 2-core CPU, with a wide margin


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


def test_share_link_round_trips_through_the_address():
    values = {"prompt": "Tell me & more\nplease", "drafter": "early-exit", "exit_layer": 7, "draft_model": "x/y",
              "k": 6, "temperature": 0.7, "seed": 3, "max_new_tokens": 20, "target": "embedded",
              "repetition_penalty": 1.3}
    query = classroom.share_query(values, present=True)
    params = {k: v[0] for k, v in parse_qs(query[1:]).items()}
    assert params["tab"] == "classroom" and "draft_model" not in params and "target" not in params  # default
    back = classroom.settings_from_query(params)
    assert {f: back[f] for f in classroom.FIELDS if f != "draft_model"} == {
        f: values[f] for f in classroom.FIELDS if f != "draft_model"}
    assert back["present"] is True
    preset = classroom.load_walkthroughs()[0]
    short = classroom.share_query(classroom.walkthrough_settings(preset), preset=preset["id"])
    assert short == f"?tab=classroom&preset={preset['id']}"  # an unchanged walkthrough is just its id
    changed = classroom.settings_from_query({"preset": preset["id"], "seed": "9", "k": "not a number"})
    assert changed["seed"] == 9 and changed["k"] == preset["settings"]["k"] and changed["preset"] == preset["id"]
    assert classroom.settings_from_query({"foo": "bar"}) is None


def test_an_unknown_preset_in_the_link_is_named_with_the_known_ones():
    """?preset=nope opened the custom settings with "Settings from the link: press Record run": now the status
    says the walkthrough is unknown and lists the known ids."""
    from types import SimpleNamespace

    walkthroughs = classroom.load_walkthroughs()
    values = classroom.settings_from_query({"preset": "nope", "k": "6"})
    assert values["preset"] == "" and values["unknown_preset"] == "nope" and values["k"] == 6
    assert classroom.settings_from_query({"preset": walkthroughs[0]["id"]})["unknown_preset"] == ""
    out = classroom.on_load(SimpleNamespace(query_params={"tab": "classroom", "preset": "nope"}))
    status = out[4 + len(classroom.FIELDS)]
    # the sentence (the preset named, the known ids listed) is worded in tests/test_messages.py
    assert "status-error" in status and html.escape(unknown_preset_message("nope", walkthroughs)) in status
    assert out[0]["value"] == classroom.CUSTOM and out[3 + len(classroom.FIELDS)] is None


def test_a_preset_in_the_link_never_overrides_the_tab_it_asks_for():
    """?tab=arena&preset=bogus opened the Classroom: the preset took the tab over. Now the tab asked for opens and
    the Classroom still names the unknown preset in its status, for when the user goes there."""
    from types import SimpleNamespace

    tabs = ("live", "arena", "why", "batching", "classroom")
    out = classroom.on_load(SimpleNamespace(query_params={"tab": "arena", "preset": "bogus"}), tabs)
    assert out[-1].selected == "arena"
    said = html.escape(unknown_preset_message("bogus", classroom.load_walkthroughs()))
    assert said in out[4 + len(classroom.FIELDS)]
    assert classroom.tab_to_open({"preset": "bogus"}, tabs).selected == "classroom"  # no tab=: the classroom's link
    assert classroom.tab_to_open({"tab": "classroom", "preset": "bogus"}, tabs).selected == "classroom"
    assert classroom.tab_to_open({"tab": "why"}, tabs).selected == "why"
    assert classroom.tab_to_open({"tab": "nowhere", "preset": "bogus"}, tabs) == classroom.gr.skip()
    assert classroom.tab_to_open({}, tabs) == classroom.gr.skip()


def _whatif(rates_per_pass, k=4, passes=None):
    """A what-if from hand-made passes (tests/test_whatif.py's events) accepting ``rates_per_pass`` tokens each."""
    from test_whatif import _prefill, _spec, base_run
    from specviz.analysis.whatif import analyze

    spec = [_prefill("speculative")] + [_spec(i + 1, k, k, n) for i, n in enumerate(rates_per_pass)]
    return analyze(spec, base_run(sum(rates_per_pass) + len(rates_per_pass) + 1), k)


def test_whatif_gives_a_spread_says_too_few_passes_and_a_best_k_at_the_edge():
    """Seen with 6 passes at k = 4: a bare "k = 4: 1.93×" and "Re-run at k = 4", the k the run had used. Now the
    result carries its bootstrap range and best-k share, says when the passes are too few and when the best k is
    the largest tried, and offers no re-run at the run's own k."""
    edge = _whatif([4, 4, 3, 4, 4, 4])  # 6 passes, nearly all accepted: k = 4 wins
    assert edge.recommended.k == 4 and edge.best_at_edge and edge.spread.too_few
    notes = classroom.whatif_caveats(edge)
    sp = edge.spread
    assert notes[0].startswith(f"Spread: over {sp.resamples} resamples of the run's 6 passes, k = 4 predicts "
                               f"{sp.low[3]:.2f}–{sp.high[3]:.2f}× (80% of them) and comes out best in "
                               f"{sp.best_share[3]:.0%}")
    assert notes[1].startswith("<b>Too few passes to tell:</b> 6 passes (fewer than 20)")
    assert notes[2].startswith("<b>The best k is the largest tried</b> (k = 4)")
    assert all(f'<div class="wi-note wi-caveat">{n}</div>' in classroom.whatif_html(edge) for n in notes)
    assert classroom.rerun_k(edge) is None
    button = classroom.rerun_button(edge)
    assert button.value == "k = 4 was measured in this run" and button.interactive is False
    status = classroom.whatif_status(edge)
    assert "Re-run" not in status and "The recommended k is the one this run used" in status
    assert "Too few passes to tell the k apart" in status
    rerun = list(classroom.whatif_rerun({"result": edge, "settings": None, "checks": {}}))
    assert len(rerun) == 1 and "nothing to re-run" in rerun[0][1]
    figure = classroom.whatif_figure(edge)
    predicted = figure.data[0]
    assert predicted.name == "predicted (measured costs;<br>bars: 80% of resampled passes)"
    assert list(predicted.error_y.array) == pytest.approx([h - p.speedup for h, p in zip(sp.high, edge.predictions)])
    assert list(predicted.error_y.arrayminus) == pytest.approx([p.speedup - lo for lo, p in zip(sp.low,
                                                                                                 edge.predictions)])

    inner = _whatif([2] * 24)  # 24 passes, all accepting 2 of 4: k = 2 wins every resample
    assert inner.recommended.k == 2 and not inner.best_at_edge and not inner.spread.too_few
    assert len(classroom.whatif_caveats(inner)) == 1 and "comes out best in 100%" in classroom.whatif_caveats(inner)[0]
    assert classroom.rerun_k(inner) == 2
    button = classroom.rerun_button(inner)
    assert button.value == "Re-run at k = 2 to check" and button.interactive is True
    assert "Re-run at k = 2 to check the prediction." in classroom.whatif_status(inner)


def test_the_whatif_checks_give_every_number_its_spread_or_say_one_run():
    """The "check inside this run" line and the re-run table showed bare numbers. Now each prediction carries the
    bootstrap range of the run's passes, each measured tokens per pass the range of its own passes, and each
    measured speedup (one run against one baseline) says it is one run with no spread."""
    from test_whatif import _prefill, _spec, base_run
    from specviz.analysis.whatif import tokens_per_pass_range

    result = _whatif([2, 3, 1, 4, 2, 0, 3, 2, 1, 2, 4, 2])
    sp, k = result.spread, result.k_max
    (s_low, s_high), (t_low, t_high) = sp.at(k)
    m_low, m_high = sp.measured_tokens
    at = result.at(k)
    inside = classroom.whatif_html(result).split('id="whatif-inside">', 1)[1].split("</div>", 1)[0]
    assert (f'predicted {at.speedup:.2f}× <small class="wi-range">({s_low:.2f}–{s_high:.2f})</small>, measured '
            f'{result.measured_speedup:.2f}× <small class="wi-range">(one run: no spread)</small>') in inside
    assert (f'tokens per pass predicted {at.expected_tokens:.2f} <small class="wi-range">({t_low:.2f}–{t_high:.2f})'
            f'</small>, measured {result.measured_tokens_per_pass:.2f} <small class="wi-range">({m_low:.2f}–'
            f'{m_high:.2f})</small>') in inside
    assert f"Ranges: 80% of {sp.resamples} resamples of the run's 12 passes." in inside
    assert m_low < m_high and t_low < t_high and s_low < s_high

    rerun_k = 2
    spec = [_prefill("speculative")] + [_spec(i + 1, rerun_k, rerun_k, n, generated=1 + 3 * (i + 1))
                                        for i, n in enumerate([2, 1, 2, 0, 2, 2, 1, 2])]
    base = base_run(sum(len(e.emitted_ids) for e in spec))
    state, status, _, html_out, _ = classroom._checked({"checks": {}}, result, rerun_k, spec, base)
    (p_low, p_high), (pt_low, pt_high) = sp.at(rerun_k)
    e_low, e_high = sp.end_to_end(rerun_k, spec[-1].num_generated)
    mt_low, mt_high = tokens_per_pass_range(spec, rerun_k)
    table = html_out.split('id="whatif-check"', 1)[1].split("</table>", 1)[0]
    rows = {r.split("</th>", 1)[0].rsplit(">", 1)[1]: r for r in table.split("<tr>")[2:]}
    tau_row = rows[f"tokens per pass (passes drafting k = {rerun_k})"]
    assert f"({pt_low:.2f}–{pt_high:.2f})" in tau_row and f"({mt_low:.2f}–{mt_high:.2f})" in tau_row
    assert mt_low < mt_high
    assert f"({p_low:.2f}–{p_high:.2f})" in rows["decoding speedup (prefill excluded)"]
    assert "(one run: no spread)" in rows["decoding speedup (prefill excluded)"]
    assert f"({e_low:.2f}–{e_high:.2f})" in rows["tokens/s ratio (prefill included)"]
    assert "(one run: no spread)" in rows["tokens/s ratio (prefill included)"]
    assert e_low <= e_high
    assert f"predicted {result.at(rerun_k).speedup:.2f}× ({p_low:.2f}–{p_high:.2f}), measured" in status
    assert "(one run; decoding, prefill excluded)" in status


def test_a_range_whose_ends_read_the_same_says_so():
    """Every resample of the passes can give one value (e.g. every pass accepted all k): "1.96 (1.96–1.96)" read as
    a typo, so the range says that the resamples were all equal, in the table, the status and the caveat."""
    assert classroom._with_range(1.96, (1.96, 1.9601), 2, "×") == \
        '1.96× <small class="wi-range">(all resamples equal)</small>'
    assert classroom._with_range(1.96, (1.5, 2.3), 2, "×") == '1.96× <small class="wi-range">(1.50–2.30)</small>'
    assert classroom.plain_range(1.96, (1.96, 1.96)) == "1.96× (all resamples equal)"
    assert classroom._predicts(1.96, 1.96) == "1.96× in every resample"
    assert classroom._predicts(1.5, 2.3) == "1.50–2.30×"


def test_a_hand_edit_keeps_the_walkthrough_named_and_says_so():
    """A hand edit no longer turns the menu to "Custom" while the walkthrough's run is still on the stage (a trial
    saw "Your own prompt and settings" over the walkthrough's recording): the note says so, the menu stays
    (tests/test_classroom_settings.py follows Record run)."""
    preset = classroom.load_walkthroughs()[0]
    values = classroom.walkthrough_settings(preset)
    same = [values[f] for f in classroom.FIELDS]
    same[classroom.FIELDS.index("k")] = float(values["k"])  # a slider sends a float: still the walkthrough
    assert classroom.settings_edited(preset["id"], object(), *same) == classroom.note_html(preset)
    edited = [values[f] for f in classroom.FIELDS]
    edited[classroom.FIELDS.index("prompt")] = values["prompt"] + " And why?"
    note = classroom.settings_edited(preset["id"], object(), *edited)
    assert note == classroom.edited_note_html(preset, True) and html.escape(classroom.EDITED) in note
    assert classroom.settings_edited(classroom.CUSTOM, object(), *edited) == classroom.gr.skip()


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


def test_record_with_bad_input_gives_a_message_not_a_trace():
    out = list(classroom.record("   ", "ngram", 0, "", 4, 0.0, 0, 24, "embedded"))
    assert len(out) == 1 and "prompt is empty" in out[0][1] and "status-error" in out[0][1]
    out = list(classroom.record("Hi", "none", 0, "", 4, 0.0, 0, 24, "embedded"))
    assert "needs a drafter" in out[0][1]
    out = list(classroom.record("Hi", "ngram", 0, "", 4, 0.0, 0, 500, "embedded"))
    assert "at most" in out[0][1]


# ------------------------------------------------------------------------------------------------- browser


@pytest.fixture
def page(browser, app_url):
    page = open_page(browser, {"width": 1440, "height": 1000})
    page.app_url = app_url
    yield page
    page.context.close()


def _numbers(row) -> dict[str, float]:
    cells = {}
    for col in ("q", "p", "ratio", "u"):
        text = row.locator(f"td[data-col={col}]").inner_text()
        match = re.search(r"\d\.\d{3}", text)
        if match:
            cells[col] = float(match.group())
    return cells


def _step_text(page) -> str:
    return page.inner_text("#classroom-progress .cr-count")


def _click_and_wait(page, selector: str) -> None:
    before = _step_text(page)
    page.click(selector)
    page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent !== "
                           f"{before!r}", timeout=15_000)


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


@requires_chromium
def test_a_link_with_tab_opens_that_tab(browser, app_url):
    """A new user found that ?tab=arena and ?tab=why opened on Live; the Classroom's page load now opens the tab
    any ?tab= names (app.classroom.tab_to_open), a preset never overriding it, and an unknown one opens Live."""
    page = open_page(browser, {"width": 1400, "height": 900})
    selected = ("() => [...document.querySelectorAll('#tabs button[role=tab]')]"
                ".filter(b => b.getAttribute('aria-selected') === 'true').map(b => b.innerText.trim())")
    try:
        for query, tab in (("?tab=arena", "Arena"), ("?tab=why", "Why it works"), ("?tab=batching", "Batching"),
                           ("?tab=classroom", "Classroom"), ("?tab=arena&preset=nope", "Arena"),
                           ("?tab=nowhere", "Live"), ("", "Live")):
            page.goto(app_url + query, wait_until="load")
            page.wait_for_selector("#tabs button[role=tab]", timeout=30_000)
            if tab == "Live":  # the page's first tab: the load must leave it so (it answers within a second or two)
                page.wait_for_timeout(3_000)
            else:
                page.wait_for_function(f"() => ({selected})().length === 1 && ({selected})()[0] === {tab!r}",
                                       timeout=30_000)
            assert page.evaluate(selected) == [tab], query
        page.screenshot(path="/tmp/classroom-tab-link.png")
        assert not non_loopback(page.requests)
    finally:
        page.context.close()


@requires_chromium
def test_step_through_a_sampling_run_to_a_rejection(page):
    page.goto(page.app_url + "?preset=poor-drafter")
    page.wait_for_selector("#classroom-record", state="visible", timeout=30_000)
    assert page.get_attribute("#tab-classroom-button", "aria-selected") == "true"  # the link opens the tab
    assert "leaves" in page.input_value("#classroom-prompt textarea")
    assert page.input_value("#classroom-temperature input[type=number]") == "1"
    page.wait_for_selector("#classroom-status .status-done", timeout=15_000)  # the recorded run, at once
    assert "Recorded run of" in page.inner_text("#classroom-status"), page.inner_text("#classroom-status")
    assert "Prefill" in page.inner_text("#classroom-caption")

    for _ in range(40):  # Next, phase by phase, until a rejection is on the table
        if page.locator("#classroom-table tr[data-decision=rejected]").count():
            break
        _click_and_wait(page, "#classroom-next")
    table = page.locator("#classroom-table table")
    assert table.get_attribute("data-phase") == "decide"
    headers = page.eval_on_selector_all("#classroom-table th", "ths => ths.map(th => th.textContent)")
    assert headers == ["#", "draft token", "q (draft)", "p (target)", "min(1, p/q)", "u", "decision"]
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

    # keyboard: → to the recovered token, ← back (focus outside any field)
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

    # presentation view: large type, from the top of the page
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.check("#classroom-present input")
    page.wait_for_function("() => document.body.classList.contains('sv-present')", timeout=10_000)
    page.wait_for_function("() => window.scrollY === 0", timeout=10_000)
    size = page.eval_on_selector("#classroom-caption .cr-caption", "e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 24, size
    page.screenshot(path="/tmp/classroom-present.png")
    page.uncheck("#classroom-present input")

    # share link: an absolute address with the walkthrough and the changed setting
    page.click("#classroom-share-btn")
    page.wait_for_function("() => (document.querySelector('#classroom-share textarea')?.value || '')"
                           ".startsWith('http')", timeout=15_000)
    link = urlparse(page.input_value("#classroom-share textarea"))
    assert link.hostname == "127.0.0.1"
    assert link.query == "tab=classroom&preset=poor-drafter"  # the walkthrough's recorded run, by its id

    # Play advances on its own; space pauses it
    before = _step_text(page)
    page.click("#classroom-play")
    page.wait_for_function(f"() => document.querySelector('#classroom-progress .cr-count')?.textContent !== "
                           f"{before!r}", timeout=20_000)
    assert "Pause" in page.inner_text("#classroom-play")
    page.click("#classroom-caption")
    page.keyboard.press(" ")
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Play')",
                           timeout=15_000)
    assert "Traceback" not in page.content()
    assert not non_loopback(page.requests), non_loopback(page.requests)


@requires_chromium
def test_enter_commits_a_classroom_box_at_once_and_the_menu_keeps_naming_the_run_shown(page):
    """A new user's trial: k = 99 stayed in the Classroom's box until the next click, the seed's sentence came late,
    and after the edit the menu read "Your own prompt and settings" over the walkthrough's run. Enter now commits
    a box as in the other tabs (app.classroom.ENTER_COMMITS_JS): the value runs use is in the box and one sentence
    in the status at once; nothing is said while the seed is typed; the menu still names the run on the stage and
    its note says the settings are no longer the walkthrough's."""
    wait = {"timeout": 120_000}  # a busy 2-core machine
    page.goto(page.app_url + "?tab=classroom&preset=poor-drafter")
    page.wait_for_selector("#classroom-status .status-done", **wait)
    page.wait_for_function("() => window.svEnterCommits && window.svEnterCommits.has('#classroom-controls, #whatif')",
                           **wait)
    k = page.locator("#classroom-k input[type=number]").first
    k.fill("99")
    k.press("Enter")
    page.wait_for_selector("#classroom-status >> text=Draft length k is at most 16 here; using 16.", **wait)
    page.wait_for_function("() => document.querySelector('#classroom-k input[type=number]').value === '16'", **wait)
    seed = page.locator("#classroom-seed input").first
    seed.click()
    seed.press("Control+a")
    seed.press_sequentially("-1.5", delay=300)
    page.wait_for_timeout(1500)
    assert "Seed" not in page.inner_text("#classroom-status")  # still typing: nothing said
    seed.press("Enter")
    page.wait_for_selector("#classroom-status >> text=Seed must be between 0 and 9,007,199,254,740,991 (got -1.5). "
                           "Using 0.", **wait)
    page.wait_for_function("() => document.querySelector('#classroom-seed input').value === '0'", **wait)
    assert page.input_value("#classroom-walkthrough input") == "Poorly matched drafter"
    assert classroom.EDITED in page.inner_text("#classroom-note")
    assert "Poorly matched drafter" in page.inner_text("#classroom-note")
    page.screenshot(path="/tmp/classroom-edited.png")


def _choose_walkthrough(page, label: str) -> None:
    """Pick the walkthrough whose menu label contains ``label`` (case-insensitive)."""
    page.click("#classroom-walkthrough input")
    page.click(f"li[role=option]:has-text('{label}')")


@requires_chromium
def test_play_stops_when_another_walkthrough_opens_and_a_phone_table_keeps_tokens_whole(browser, app_url):
    """Seen: Play kept stepping the newly picked walkthrough (it opened at step 3 and went on), and at 400 px the
    presentation view's table split " water" into "wate" / "r". Now picking a walkthrough pauses Play and opens its
    run at step 1; every token of the table stands on one line, the page no wider than the phone."""
    page = open_page(browser, {"width": 400, "height": 850})
    page.goto(app_url + "?tab=classroom&preset=grounded-ngram&present=1")
    page.wait_for_selector("#classroom-status .status-done", timeout=30_000)
    for _ in range(6):
        _click_and_wait(page, "#classroom-next")
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
    _choose_walkthrough(page, "Poorly matched")
    page.wait_for_function("() => document.querySelector('#classroom-status').textContent.includes('Poorly')",
                           timeout=15_000)
    page.wait_for_function("() => document.getElementById('classroom-play').textContent.includes('Play')",
                           timeout=15_000)
    time.sleep(3 * classroom.PLAY_INTERVAL_S)  # a playing timer would have stepped by now
    assert _step_text(page).startswith("step 1 /"), _step_text(page)
    page.context.close()


@requires_chromium
def test_record_download_and_open_a_run_again(page, tmp_path):
    from specviz.analysis import recording

    page.goto(page.app_url + "?tab=classroom")
    page.wait_for_selector("#classroom-status .status-done", timeout=30_000)  # the first walkthrough's run
    page.fill("#classroom-prompt textarea", "Count: one two three, one two three, one two three, one two")
    page.fill("#classroom-max-new-tokens input[type=number]", "6")
    page.press("#classroom-max-new-tokens input[type=number]", "Enter")
    page.click("#classroom-record")
    page.wait_for_selector("#classroom-status .status-done:has-text('Recorded:')", timeout=RUN_TIMEOUT_MS)
    steps = page.inner_text("#classroom-progress .cr-count")

    with page.expect_download(timeout=15_000) as download:
        page.click("#classroom-download")
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == "specviz-run.json.gz"
    opened = recording.load(saved)
    assert len(opened.recording.output_ids) == 6 and opened.meta["settings"]["prompt"].startswith("Count:")

    _choose_walkthrough(page, "Open chat")  # another run: its recorded run opens
    page.wait_for_selector("#classroom-status .status-done:has-text('Open chat')", timeout=15_000)
    page.set_input_files("#classroom-files input[type=file]", str(saved))
    page.wait_for_selector("#classroom-status .status-done:has-text('Opened')", timeout=15_000)
    assert page.inner_text("#classroom-progress .cr-count") == "step 1 / " + steps.split(" / ")[1]
    assert page.input_value("#classroom-prompt textarea").startswith("Count:")  # the file's settings
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "specviz-recording", "version": 99}')
    page.set_input_files("#classroom-files input[type=file]", str(broken))
    page.wait_for_selector("#classroom-status .status-error", timeout=15_000)
    assert "newer specviz" in page.inner_text("#classroom-status") and "Traceback" not in page.content()
    assert page.inner_text("#classroom-progress .cr-count") == "step 1 / " + steps.split(" / ")[1]  # unchanged
    page.screenshot(path="/tmp/classroom-files.png", full_page=True)
    assert not non_loopback(page.requests)


@requires_chromium
def test_whatif_recommends_a_k_and_the_rerun_checks_it(page):
    page.goto(page.app_url + "?preset=grounded-ngram")
    page.wait_for_selector("#whatif-run", state="visible", timeout=30_000)
    for slider, value in (("#whatif-kmax", "4"), ("#whatif-tokens", "16")):
        page.fill(f"{slider} input[type=number]", value)
        page.press(f"{slider} input[type=number]", "Enter")
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-status .status-done, #whatif-status .status-error", timeout=RUN_TIMEOUT_MS)
    assert "Predicted" in page.inner_text("#whatif-status"), page.inner_text("#whatif-status")
    page.wait_for_selector("#whatif-chart .js-plotly-plot", timeout=15_000)
    names = page.eval_on_selector("#whatif-chart .js-plotly-plot", "gd => gd.data.map(t => t.name)")
    star = next(n for n in names if n.startswith("recommended k = "))
    k = int(star.rsplit(" ", 1)[1])
    assert 1 <= k <= 4
    result = page.inner_text("#whatif-result")
    assert f"Recommended k = {k}" in result
    assert re.search(rf"Spread: over \d+ resamples of the run's \d+ passes, k = {k} predicts \d+\.\d\d(–\d+\.\d\d×|× in every resample)",
                     result), result
    assert ("Too few passes to tell" in result) == ("Too few passes" in page.inner_text("#whatif-status"))
    bars = page.eval_on_selector("#whatif-chart .js-plotly-plot", "gd => gd.data[0].error_y.arrayminus.length")
    assert bars == 4  # a spread for every k
    if k == 4:  # the run's own k: its measured speedup is the check, so no re-run is offered
        assert "The best k is the largest tried" in result
        assert page.inner_text("#whatif-rerun") == "k = 4 was measured in this run"
        assert page.is_disabled("#whatif-rerun")
        page.locator("#whatif").screenshot(path="/tmp/classroom-whatif.png")
        return
    assert f"k = {k}" in page.inner_text("#whatif-rerun")

    page.click("#whatif-rerun")
    page.wait_for_selector("#whatif-check", timeout=RUN_TIMEOUT_MS)
    check = page.inner_text("#whatif-check")
    assert f"Re-run at k = {k}" in check and "predicted" in check and "measured" in check
    speedups = re.findall(r"(\d+\.\d\d)×", page.inner_text("#whatif-check tr:has-text('decoding speedup')"))
    assert len(speedups) == 2, check  # predicted and measured, side by side
    row = page.inner_text("#whatif-check tr:has-text('decoding speedup')")
    assert re.search(r"\d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d\)", row) and "one run: no spread" in row, row
    names = page.eval_on_selector("#whatif-chart .js-plotly-plot", "gd => gd.data.map(t => t.name)")
    assert "measured by the re-run" in names
    time.sleep(0.5)
    page.locator("#whatif").screenshot(path="/tmp/classroom-whatif.png")
    assert not non_loopback(page.requests)


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


def test_share_follows_the_open_walkthrough_or_stays_empty():
    """A share box holding a link gets the link to the run now open; an empty one stays empty."""
    poor = next(w for w in classroom.load_walkthroughs() if w["id"] == "poor-drafter")
    values = [classroom.walkthrough_settings(poor)[f] for f in classroom.FIELDS]
    assert classroom.share_follows("", *values, False, "poor-drafter") == ""
    assert classroom.share_follows("http://x/?tab=classroom&preset=grounded-ngram", *values, False,
                                   "poor-drafter") == "?tab=classroom&preset=poor-drafter"
    assert classroom.share_follows("?old", *values, True, "poor-drafter") == "?tab=classroom&preset=poor-drafter&present=1"



def test_the_share_link_reads_the_raw_settings_as_the_controls_hold_them():
    """The share link's events read the settings raw (preprocess off: k = 99 typed into its box while a run recorded
    met Gradio's range check, a raw "Value 99 is greater than maximum value 16" toast): a slider's number out of
    range is linked at the nearest end, a whole-number box's number rounded, and a box holding no number left out
    (its default)."""
    values = {"prompt": "Hi", "drafter": "early-exit", "exit_layer": 7.0, "draft_model": "", "k": 99,
              "temperature": -1, "seed": 3.0, "max_new_tokens": 500, "target": "embedded", "repetition_penalty": None}
    query = classroom.share_link(*(values[f] for f in classroom.FIELDS), False, "")
    params = {k: v[0] for k, v in parse_qs(query[1:]).items()}
    assert (params["k"], params["max_new_tokens"], params["exit_layer"], params["seed"]) == ("16", "64", "7", "3")
    assert "temperature" not in params and "repetition_penalty" not in params  # 0 and "none": the defaults
    assert classroom.links.held({"k": "abc", "temperature": 2.5, "seed": None}) == {"k": None, "temperature": 2,
                                                                                   "seed": None}
    assert classroom.links.held({"k": 4.0, "max_new_tokens": "12"}) == {"k": 4, "max_new_tokens": 12}



def test_run_what_if_says_a_largest_k_that_is_no_number_in_a_sentence():
    """Run what-if read "Largest k" with int(float(...)): an empty box (None) gave "Something went wrong (TypeError:
    ...)"; it is now parsed as the other settings are, with one sentence."""
    from app.classroom.whatif import whatif_run

    for typed, said in ((None, "Largest k must be a number."), (1, "Largest k must be between 2 and 16 (got 1).")):
        state, status, *_ = next(whatif_run("Hi", "ngram", 0, "", 0, "embedded", typed, 48))
        assert said in html.unescape(status) and "Something went wrong" not in status


@requires_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_share_box_follows_when_another_walkthrough_opens(browser, app_url, width):
    """Seen: the share box kept the previous walkthrough's link after another walkthrough was opened, so a teacher
    handed out the wrong one. Now it follows the walkthrough opened from the menu."""
    page = open_page(browser, {"width": width, "height": 900})
    page.goto(app_url + "?tab=classroom&preset=grounded-ngram")
    page.wait_for_selector("#classroom-status .status-done", timeout=30_000)
    page.click("#classroom-share-btn")
    page.wait_for_function("() => (document.querySelector('#classroom-share textarea')?.value || '')"
                           ".endsWith('preset=grounded-ngram')", timeout=15_000)
    _choose_walkthrough(page, "Poorly matched")
    page.wait_for_function("() => document.querySelector('#classroom-status').textContent.includes('Poorly')",
                           timeout=15_000)
    page.wait_for_function("() => (document.querySelector('#classroom-share textarea')?.value || '')"
                           ".endsWith('preset=poor-drafter')", timeout=15_000)
    link = urlparse(page.input_value("#classroom-share textarea"))
    assert link.hostname == "127.0.0.1" and link.query == "tab=classroom&preset=poor-drafter"
    page.locator("#classroom-share").scroll_into_view_if_needed()
    page.screenshot(path=f"/tmp/classroom-share-{width}.png")
    page.context.close()


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
    assert narrow["margin"] == {"t": classroom.figures.NARROW_TOP_PX} and narrow["height"] > figure.layout.height
    stepper.goto(Step(1, "decide"))  # before the recovered token is drawn: the rejected guess's mark only
    assert len(classroom.rejection_chart(stepper).layout.meta["sv_narrow"]["annotations"]) == 1


def test_the_phone_stylesheet_puts_results_under_generate_and_keeps_slider_ends():
    """The 400 px trial: the Live status and panes began 1,200 px under Generate (now right under it on one column,
    the wide layout untouched), sliders showed no least / greatest value (Gradio hides them at 480 px), and the
    share box's hidden label read "Textbox"."""
    from pathlib import Path

    css = (Path(__file__).resolve().parent.parent / "assets" / "style.css").read_text(encoding="utf-8")
    narrow = css[css.index("@media (max-width: 899px)"):]
    narrow = narrow[:narrow.index("\n}\n")]
    assert '#live-main { grid-template-areas: "top" "results" "side" "side2"; }' in narrow
    assert 'grid-template-areas: "top results" "side2 results" "side results";' in css  # the wide layout
    assert "#run-progress { display: none !important; }" in css
    assert ".slider_input_container > .min_value, .slider_input_container > .max_value { display: block !important; }" \
        in css
    import gradio as gr

    from app.classroom import layout
    from app.classroom.walkthroughs import DEFAULTS

    ui: dict = {}
    with gr.Blocks():
        layout._settings_controls(ui, {**DEFAULTS, "target": "embedded"})
    assert ui["share"].label == "Link to these settings" and ui["share"].show_label is False


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
        _click_and_wait(page, "#classroom-next")
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
    assert title["right"] <= bar["left"], (title, bar)
    lines = page.eval_on_selector_all("#classroom-chart .gtitle tspan.line", "ts => ts.map(t => t.textContent)")
    assert lines[1:] == ["the recovered token is drawn", "from the residual"], lines
    page.locator("#classroom-table").scroll_into_view_if_needed()
    page.screenshot(path="/tmp/classroom-present-400-table.png")
    page.locator("#classroom-chart").scroll_into_view_if_needed()
    page.screenshot(path="/tmp/classroom-present-400-chart.png")
    page.context.close()
