"""The Live tab's inputs without a browser: the parse checks and their sentences, the stable elem ids, and how
its number and slider boxes commit (Enter, an empty or non-number box, Gradio's range check). The browser side is
tests/test_slider_boxes_browser.py."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import DEFAULTS, build_demo, inputs, live, load_examples, render  # noqa: E402
from test_live import GOOD  # noqa: E402

@pytest.mark.parametrize("change, words", [
    ({"prompt": "   "}, "prompt is empty"),
    ({"k": 17}, "Draft length k must be between 1 and 16"),
    ({"k": 0}, "Draft length k"),
    ({"max_new_tokens": 0}, "Max new tokens"),
    ({"max_new_tokens": 5000}, "Max new tokens"),
    ({"temperature": -1}, "Temperature"),
    ({"top_p": 0}, "Top-p"),
    ({"top_k": 2.5}, "whole number"),
    ({"seed": "abc"}, "Seed must be a number"),
    ({"drafter": "model"}, "needs a draft model"),
    ({"drafter": "magic"}, "Unknown drafter"),
])
def test_bad_inputs_have_clear_messages(change, words):
    with pytest.raises(inputs.InputError, match=words):
        inputs.parse_settings({**GOOD, **change})


def test_a_fraction_for_k_or_max_new_tokens_runs_rounded_as_its_box_says_from_generate():
    """A trial typed k = 2.5 and pressed Generate at once: the box turned to 3 while the run was refused "(got 2.5)".
    Generate's parse (``fit_whole``) runs what the box holds, with the box's own sentence as a note; out of range
    stays refused, and the other callers still refuse a fraction."""
    s = inputs.parse_settings({**GOOD, "k": 2.5, "max_new_tokens": 20.5}, fit_whole=True)
    assert (s.k, s.max_new_tokens) == (3, 21)
    assert s.notes == ("Max new tokens must be a whole number (got 20.5); using 21.",
                       "Draft length k must be a whole number (got 2.5); using 3.")
    assert inputs.parse_settings({**GOOD, "k": 3.0}, fit_whole=True).notes == ()
    with pytest.raises(inputs.InputError, match=r"Draft length k must be between 1 and 16 \(got 16.5\)"):
        inputs.parse_settings({**GOOD, "k": 16.5}, fit_whole=True)
    with pytest.raises(inputs.InputError, match=r"Draft length k must be a whole number \(got 2.5\)"):
        inputs.parse_settings({**GOOD, "k": 2.5})
    with pytest.raises(inputs.InputError, match="Draft length k must be a number"):
        inputs.parse_settings({**GOOD, "k": "2.5x"}, fit_whole=True)


def test_a_fraction_for_tree_nodes_or_lookaheads_window_runs_rounded_from_generate_too():
    """The same for the other whole-step sliders Generate reads: an EAGLE tree's nodes and lookahead's W, N, G."""
    s = inputs.parse_settings({**GOOD, "drafter": "eagle", "tree_nodes": 7.5}, fit_whole=True)
    assert s.tree_nodes == 8 and s.notes == ("Tree nodes must be a whole number (got 7.5); using 8.",)
    s = inputs.parse_settings({**GOOD, "drafter": "lookahead", "window": 3.5, "ngram": 3, "candidates": 1.5},
                              fit_whole=True)
    assert (s.window, s.ngram, s.candidates, s.k) == (4, 3, 2, 2)
    assert s.notes == ("Window W must be a whole number (got 3.5); using 4.",
                       "Candidates G must be a whole number (got 1.5); using 2.")
    with pytest.raises(inputs.InputError, match=r"Window W must be a whole number \(got 3.5\)"):
        inputs.parse_settings({**GOOD, "drafter": "lookahead", "window": 3.5})


def test_settings_and_stop_strings():
    s = inputs.parse_settings({**GOOD, "stop_strings": "END, \\n\\n\nSTOP", "target": "  ",
                                 "temperature": 0.7, "top_k": 40})
    assert s.stop_strings == ("END", "\n\n", "STOP") and s.target == "embedded"
    config = s.config()
    assert config.sampling.temperature == 0.7 and config.sampling.top_k == 40 and config.k == 4
    assert inputs.parse_stop_strings("") == ()


def test_examples_cover_the_suite_and_our_own():
    rows = load_examples()
    cats = {r["category"] for r in rows}
    assert {"chat", "translation", "summarization", "qa", "math", "rag", "code-edit", "repeated-text"} <= cats
    assert all(r["prompt"].strip() for r in rows)


def test_build_demo_has_the_stable_elem_ids():
    demo = build_demo(max_new_tokens=40)
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    for elem_id in ("prompt", "generate", "stop", "target", "drafter", "draft-length", "max-new-tokens",
                    "temperature", "seed", "spec-output", "baseline-output", "charts", "stats", "top-p", "top-k",
                    "stop-strings", "k-schedule", "draft-model", "exit-layer"):
        assert elem_id in ids, elem_id
    with pytest.raises(TypeError):
        build_demo(colour="red")


def test_enter_commits_the_live_tabs_number_boxes_and_only_theirs():
    """Gradio's slider box commits a typed number on blur only: the Live tab registers, on page load, a script that
    turns Enter in a number box of its controls column (#controls: k, max new tokens, temperature, ... and the
    number boxes) into that blur, and leaves the other tabs' boxes alone (one page-wide listener doubled the "Why it
    works" tab's messages). The browser test in test_layout_phone_browser.py presses Enter in the real page."""
    from app.messages import enter_commits_js

    demo = build_demo(max_new_tokens=40)
    loaded = [fn.js for fn in demo.fns.values() if fn.js and "svEnterCommits" in fn.js]
    assert live.ENTER_COMMITS_JS in loaded and live.ENTER_COMMITS_JS == enter_commits_js("#controls")
    assert "box.closest(\"#controls\")" in live.ENTER_COMMITS_JS and "new FocusEvent('blur')" in live.ENTER_COMMITS_JS
    assert "document.addEventListener('keydown'" in live.ENTER_COMMITS_JS
    ids = {c.get("props", {}).get("elem_id"): c for c in demo.config["components"]}
    assert ids["controls"]["type"] == "column"  # the scope exists, and is the Live tab's controls column
    assert enter_commits_js("#arena-controls") != live.ENTER_COMMITS_JS  # a scope of its own per tab


# ------------------------------------------------------------------------------------------ slider boxes


def test_enter_commits_every_slider_box_in_the_live_controls_column():
    """A new user typed k = 6 in its box, pressed Enter and reported the run used the old k: the Live tab's Enter
    script (the one the Batching and Arena tabs register, app.messages.enter_commits_js) no longer
    skips slider boxes, and every slider of the controls column says a number typed out of range (a release listener,
    app.messages.tell_when_clamped). tests/test_slider_boxes_browser.py presses Enter in the real page."""
    demo = build_demo(max_new_tokens=40)
    js = live.ENTER_COMMITS_JS
    enter = js[js.index("addEventListener('keydown'"):js.index("addEventListener('focusin'")]  # the Enter listener alone
    assert "new FocusEvent('blur')" in enter and "input[type=range]" not in enter  # slider boxes are not skipped
    components = {c["id"]: c for c in demo.config["components"]}

    def inside(node: dict) -> list[int]:
        return [node["id"]] + [i for child in node.get("children", []) for i in inside(child)]

    def find(node: dict, elem_id: str) -> dict | None:
        if components.get(node["id"], {}).get("props", {}).get("elem_id") == elem_id:
            return node
        return next((n for c in node.get("children", []) if (n := find(c, elem_id))), None)

    sliders = {i for i in inside(find(demo.config["layout"], "controls")) if components[i]["type"] == "slider"}
    names = {components[i]["props"]["elem_id"] for i in sliders}
    assert {"draft-length", "max-new-tokens", "temperature", "top-p"} <= names and len(sliders) == 9
    released = {t for dep in demo.config["dependencies"] for t, event in dep["targets"] if event == "release"}
    assert sliders <= released


def _slider_events(demo) -> list[tuple[str, str, list[str], bool]]:
    """(tab elem_id, the triggering event, elem_ids of the sliders read, preprocess on) of every handler of ``demo``
    that reads a slider (an event with no component of its own, a timer's tick, a page load, is named by its
    event)."""
    import gradio as gr

    tab_of = {}
    for tab in demo.blocks.values():
        if isinstance(tab, gr.Tab):
            stack = [tab]
            while stack:
                block = stack.pop()
                tab_of[block._id] = tab.elem_id
                stack.extend(getattr(block, "children", []))
    found = []
    for fn in demo.fns.values():
        sliders = [b for b in fn.inputs if isinstance(b, gr.Slider)]
        if not sliders or fn.fn is None:
            continue
        tab = tab_of.get(sliders[0]._id)
        events = {f"{type(block).__name__.lower()}.{event}" if block is not None else event
                  for block, event in [(demo.blocks.get(t) if t is not None else None, e) for t, e in fn.targets]}
        found.append((tab, ",".join(sorted(events)) or "then", [b.elem_id for b in sliders], fn.preprocess))
    return found


def test_no_event_but_a_button_press_reads_a_slider_through_gradios_range_check():
    """A new user typed 99999 into "Max new tokens" and got the app's sentence AND Gradio's raw red toast "Value 99999
    is greater than maximum value 1024." with a traceback in the log: while the box is being typed in (before Enter
    or leaving it) the slider holds the typed number, and a handler reading the slider then, with Gradio's
    preprocessing on (gradio's Slider.preprocess refuses a value out of range), failed: the retry timer of the
    derived max new tokens ticks every few seconds. In the Live, Arena and Batching tabs a slider is now read through
    that check only by a button's click (pressing a button leaves the box first, and the slider clamps itself then);
    every other reader takes the raw value (preprocess off) and checks it itself. The Why and Classroom tabs are held to
    the same rule (a number typed out of c's range while a Live run ran met the check when the history changed)."""
    demo = build_demo()  # max new tokens at its default: the page-load default and its retry timer are wired
    events = _slider_events(demo)
    assert any(event == "timer.tick" and ids == ["max-new-tokens"] and not pre for _, event, ids, pre in events)
    assert any(event == "load" and ids == ["max-new-tokens"] and not pre for _, event, ids, pre in events)
    tabs = ("tab-live", "tab-arena", "tab-batching", "tab-why", "tab-classroom")
    assert {tab for tab, *_ in events} <= set(tabs)  # every tab with a slider is held to the rule
    checked = [(tab, event, ids) for tab, event, ids, pre in events if pre and tab in tabs]
    assert checked and all(event == "button.click" for _, event, _ in checked), checked
    assert ("tab-live", "button.click", ["draft-length", "temperature", "top-p", "max-new-tokens", "tree-nodes",
                                         "confidence", "lookahead-window", "lookahead-ngram",
                                         "lookahead-candidates"]) in checked  # Generate's, the one Live has
    # the Why and Classroom tabs: only Measure (alpha, and c to say what it moves), Record run and Run what-if (each parses what it reads with our
    # sentences); the Live history's change (c), the share link's events and the kept numbers' then read raw
    classroom = ["classroom-k", "classroom-temperature", "classroom-max-new-tokens"]
    assert sorted((tab, ids) for tab, _, ids in checked if tab in ("tab-why", "tab-classroom")) == [
        ("tab-classroom", classroom), ("tab-classroom", ["whatif-kmax", "whatif-tokens"]),
        ("tab-why", ["why-alpha", "why-c"])]  # Measure reads c too, to say from what value it moves it
    assert any(tab == "tab-why" and event == "state.change" and ids == ["why-c"] and not pre
               for tab, event, ids, pre in events)


def test_a_sliders_box_left_empty_or_not_a_number_keeps_its_earlier_value_and_says_so():
    """"abc" typed into k's box (Chromium refuses the letters, so the box is left empty) set k to 1 with "Draft length
    k was empty; using 1.", losing k = 4: the page now puts the box back to its value before the edit
    (app.messages.enter_commits_js) and its release sends {"kept": 4, "bad": ...} (app.messages.kept_js), which the
    handler says (app.messages.clamped); tests/test_slider_boxes_browser.py types it in the real page."""
    from app.messages import clamped, kept_js

    update, status = clamped({"kept": 4, "bad": False}, "Draft length k", 1, 16)
    assert update["value"] == 4 and inputs.kept_notice(4, "Draft length k", 1, 16)[1] in status
    assert "Draft length k was empty; kept 4." in status and "status-info" in status
    update, status = clamped({"kept": 0.7, "bad": True}, "Temperature", 0, 2)
    assert update["value"] == 0.7 and "Temperature was not a number; kept 0.7." in status
    assert clamped({"ignore": True}, "Draft length k", 1, 16) == ({"__type__": "update"},) * 2  # put back elsewhere
    update, status = clamped(None, "Draft length k", 1, 16)  # a slider the page could not put back: as before
    assert update["value"] == 1 and "Draft length k was empty; using 1." in status
    assert clamped(6, "Draft length k", 1, 16) == ({"__type__": "update"},) * 2  # in range: nothing changes
    js = kept_js("draft-length")
    assert '"#draft-length input[type=number]"' in js and "svEmptied" in js
    assert "Number(box.dataset.svPutBack)" in js and "{ignore: true}" in js
    page = live.ENTER_COMMITS_JS
    assert "addEventListener('focusin'" in page and "addEventListener('blur'" in page
    assert "box.validity.badInput || box.dataset.svBad || letters ? 'bad' : 'empty'" in page and "box.value = kept" in page
    assert "box.dataset.svPutBack = kept" in page  # the release sends the value put back, not Gradio's copy
    assert "addEventListener('input'" in page  # what is not a number is noted when typed, not only at Enter
    demo = build_demo(max_new_tokens=40)
    released = {fn.targets[0][0]: fn.js for fn in demo.fns.values()
                if fn.targets and fn.targets[0][1] == "release" and fn.js}
    for name in ("k", "max_new_tokens", "temperature", "top_p"):
        elem_id = {"k": "draft-length", "max_new_tokens": "max-new-tokens", "temperature": "temperature",
                   "top_p": "top-p"}[name]
        slider = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)
        assert released[slider._id] == kept_js(elem_id), elem_id


def test_the_confidence_gate_in_a_runs_label_says_what_it_is():
    """A new user read "k = 4 · gate 0.15" and could not tell what the gate was: the label says "confidence gate
    0.15", and the history's k cell and the pane's subtitle explain it on hover (the drafter's --confidence P)."""
    settings = inputs.parse_settings({**DEFAULTS, "prompt": "x", "drafter": "eagle", "confidence": 0.15})
    label = live.k_label(settings)
    assert label == "k = 4 · confidence gate 0.15", label
    from app.records import RunSummary

    row = RunSummary(drafter="EAGLE head", drafter_key="eagle", k=label)
    table = render.history_html([row])
    title = html.escape(render.history.CONFIDENCE_GATE_TITLE)
    assert f'<span title="{title}">confidence gate 0.15</span>' in table
    assert "its own probability of the guess so far drops below P" in render.history.CONFIDENCE_GATE_TITLE


@pytest.mark.parametrize("drafter, confidence, words", [
    ("eagle", 0.15, "the head stops drafting where its own probability of the guess so far drops below P"),
    ("medusa", 0.3, "the head stops drafting where its own probability of the guess so far drops below P"),
    ("distilled", 0.2, "the draft model stops drafting where its own probability of the draft so far drops below P"),
])
def test_a_runs_gate_is_explained_in_its_drafters_words_in_the_pane_and_in_the_history(drafter, confidence, words):
    """A draft-model run's history row (distilled, 'model') said on hover that "the head stops drafting", while its
    pane header named the draft model. Both now read one source, :func:`app.render.history.gate_title`: the heads'
    words for eagle and medusa, the draft model's for the others; the row keeps its drafter's key for it."""
    from honest_support import Tokens, paired_runs

    settings = inputs.parse_settings({**DEFAULTS, "prompt": "x", "drafter": drafter, "confidence": confidence})
    view = live.RunView(settings, "tiny", drafter, render.Pane(Tokens()), render.Pane(Tokens(), separators=False),
                        prompt_tokens=10)
    spec, base = paired_runs(3, lambda i: 40.0, lambda i: 30.0)
    for event in [*spec, *base]:
        view.add(event)
    row = view.summary()
    assert row.drafter_key == drafter and row.k == f"k = 4 · confidence gate {confidence:g}"
    title = html.escape(render.history.gate_title(drafter))
    assert words in render.history.gate_title(drafter)
    assert f'<span title="{title}">confidence gate {confidence:g}</span>' in render.history_html([row])
    assert f'<span class="pane-sub" title="{title}">' in view.spec_html()  # the pane header: the same words
    assert render.history.gate_title("model") == render.history.gate_title("distilled")  # a draft model too
    assert render.history.gate_title("model") != render.history.gate_title("eagle")


def test_the_api_page_names_generates_parameters_in_their_order():
    """A trial found Gradio's API page listing /generate's parameters as param_0 ... param_28 under raw docstring
    markup: they now carry the controls' names, in the order positional clients send them, and a plain description."""
    from app.live.defaults import INPUTS

    endpoint = build_demo(max_new_tokens=40).get_api_info()["named_endpoints"]["/generate"]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == list(INPUTS)
    assert ":func:" not in endpoint["description"]  # plain words (app.api_words), checked for every endpoint below
    defaults = {p["parameter_name"]: p["parameter_default"] for p in endpoint["parameters"]}
    assert defaults["target"] == "embedded" and defaults["drafter"] == "ngram" and defaults["max_new_tokens"] == 40
    from app.api_words import API

    endpoints = build_demo(max_new_tokens=40).get_api_info()["named_endpoints"]
    for name, said in API.items():  # every public endpoint in plain words, none with the docstrings' markup
        assert endpoints[f"/{name}"]["description"] == said and "``" not in said and ":func:" not in said
