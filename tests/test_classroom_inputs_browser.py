"""The Classroom tab's settings, links and what-if k (app/classroom/): their pure helpers, then the real tab in a
real browser (Debian's chromium via playwright, the embedded model, loopback only).

In the browser a link's ?tab= opens that tab; Enter commits a settings box at once (an out-of-range k or seed gets
one sentence) and the menu keeps naming the run on the stage; a teacher records their own short run, downloads it,
switches to another walkthrough and opens the downloaded file again (and a broken file gets one sentence); runs
what-if k and re-runs at the recommended k, with predicted and measured speedups side by side; and the share box
follows the walkthrough opened. Stepping through a run is tests/test_classroom_browser.py's. Screenshots go to
/tmp/classroom-*.png.
"""

from __future__ import annotations

import html
import os
import re
import time
from urllib.parse import parse_qs, urlparse

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import non_loopback, open_page, requires_chromium  # noqa: E402
from classroom_browser_support import choose_walkthrough, page  # noqa: E402,F401  (page: the fixture)

from app import classroom  # noqa: E402
from app.classroom.walkthroughs import unknown_preset_message  # noqa: E402

RUN_TIMEOUT_MS = 240_000  # a few tokens on a busy 2-core CPU, with a wide margin


# ------------------------------------------------------------------------------------------------- no browser


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
    # too few passes: the head names the best k without recommending it (a trial read "Recommended k = 6" above it)
    assert '<div class="wi-head">Best k in this short run <b>k = 4</b>' in classroom.whatif_html(edge)
    assert '<div class="wi-head">Recommended <b>k = ' in classroom.whatif_html(_whatif([4, 3] * 15))
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


def test_record_with_bad_input_gives_a_message_not_a_trace():
    out = list(classroom.record("   ", "ngram", 0, "", 4, 0.0, 0, 24, "embedded"))
    assert len(out) == 1 and "prompt is empty" in out[0][1] and "status-error" in out[0][1]
    out = list(classroom.record("Hi", "none", 0, "", 4, 0.0, 0, 24, "embedded"))
    assert "needs a drafter" in out[0][1]
    out = list(classroom.record("Hi", "ngram", 0, "", 4, 0.0, 0, 500, "embedded"))
    assert "at most" in out[0][1]


# ------------------------------------------------------------------------------------------------- browser


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

    choose_walkthrough(page, "Open chat")  # another run: its recorded run opens
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
    too_few = "Too few passes to tell" in result  # a short run names its best k without recommending it
    assert (f"Best k in this short run k = {k}" if too_few else f"Recommended k = {k}") in result
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
    choose_walkthrough(page, "Poorly matched")
    page.wait_for_function("() => document.querySelector('#classroom-status').textContent.includes('Poorly')",
                           timeout=15_000)
    page.wait_for_function("() => (document.querySelector('#classroom-share textarea')?.value || '')"
                           ".endsWith('preset=poor-drafter')", timeout=15_000)
    link = urlparse(page.input_value("#classroom-share textarea"))
    assert link.hostname == "127.0.0.1" and link.query == "tab=classroom&preset=poor-drafter"
    page.locator("#classroom-share").scroll_into_view_if_needed()
    page.screenshot(path=f"/tmp/classroom-share-{width}.png")
    page.context.close()


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
