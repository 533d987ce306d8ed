"""Issue 16, "a first visit that convinces": readable output and the small faults (distinct example labels, unique
element ids, numbers typed out of a slider's range or left in a number box a run refuses, p and q captions, the history
table's headers, the chart toolbar, a failed run keeping the last good result). The speedup's interval and the rates'
spreads: test_honest_numbers.py. No browser here: test_honest_numbers_browser.py checks what needs one."""

from __future__ import annotations

import html
import os
import re
from collections import Counter

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from app import build_demo, device, inputs, live, render, why  # noqa: E402
from app.records import RunSummary  # noqa: E402
from drain_support import last_output, last_values  # noqa: E402
from honest_support import Tokens, paired_runs, unlabelled  # noqa: E402
from specviz.core.events import PositionDetail  # noqa: E402
from specviz.core.verdict import format_apart  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402
from toast_support import no_toast, toasts_shown  # noqa: E402


# ------------------------------------------------------------------------------------------ readable output


def test_token_boundaries_alternate_a_tint_instead_of_adding_space():
    pane = render.Pane(Tokens())
    for event in paired_runs(3, lambda i: 1.0, lambda i: 1.0)[0]:
        pane.add(event)
    spans = re.findall(r'<span class="([^"]*)"', pane.html())
    assert ["tok-alt" in c for c in spans] == [False, True, False, True, False, True, False]
    css = (live.ASSETS / "style.css").read_text()
    block = css[css.index("issue 16: readable output"):]
    assert ".tokens .tok, .tokens .tok-space { padding: 0; margin: 0;" in block
    assert "body.sv-output-only #panes .tok-rejected" in block


def test_output_only_is_a_checkbox_of_the_live_tab():
    demo = build_demo(max_new_tokens=40)
    boxes = [c for c in demo.config["components"] if c.get("props", {}).get("elem_id") == "output-only"]
    assert len(boxes) == 1 and boxes[0]["type"] == "checkbox"
    assert "sv-output-only" in live.OUTPUT_ONLY_JS


# ------------------------------------------------------------------------------------------ small faults


def test_example_labels_are_distinct():
    labels = live.example_labels(live.load_examples())
    assert len(labels) == len(set(labels))
    rag = [label for label in labels if label.startswith("rag")]
    assert len(rag) == 2 and all(" — Context:" in label for label in rag)  # both twins are told apart
    twins = [{"category": "c", "prompt": "Same first line\nsame second"}] * 3
    label = "c · Same first line — same second"
    assert live.example_labels(twins) == [label, f"{label} (2)", f"{label} (3)"]


def test_element_ids_are_unique_on_the_page():
    demo = build_demo(max_new_tokens=40)
    ids = [c.get("props", {}).get("elem_id") for c in demo.config["components"]]
    twice = [i for i, n in Counter(i for i in ids if i).items() if n > 1]
    assert twice == [] and "why-whatif-chart" in ids


def test_k_and_n_typed_out_of_range_are_read_as_the_slider_clamps_them():
    """The listeners a slider's own edits trigger get its raw payload (a number typed out of range arrives before the
    slider clamps it): they take it as the slider does, and skip what is not a number."""
    assert [live.k_chosen(v) for v in (0, -3, 99, 7, 7.0, "5")] == [1, 1, live.controls.MAX_K, 7, 7, 5]
    assert all(live.k_chosen(v) == {"__type__": "update"} for v in (None, "", "abc"))
    assert live.lookahead_k(1)["value"] == 1 and live.lookahead_k(99)["value"] == live.controls.MAX_NGRAM - 1
    assert live.lookahead_k(5)["value"] == 4 and live.lookahead_k(5, "ngram") == {"__type__": "update"}


def test_numbers_typed_out_of_a_sliders_range_are_said_in_every_tab():
    """Gradio's slider quietly sets a number typed beyond its end to that end when the box is left (its release event
    carries the typed number first). Every slider a visitor can type into answers that event with a status line
    naming the value runs use, and a short toast with the same sentence (app.messages.CLAMP_TOAST_S: a run started
    at once replaces the status line); a value in range changes nothing. No other listener a slider triggers
    runs Gradio's range check (it would answer a typed 0 for k with a server error and a traceback in the log)."""
    from app import arena, batching, classroom
    from specviz.runtime.policy import current_policy

    # the sentences' wording: tests/test_messages.py (clamp_notice); here, that every slider says them
    demo = build_demo(max_new_tokens=40)
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    released = {names[target]: fn for fn in demo.fns.values() for target, event in fn.targets if event == "release"}
    sliders = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, gr.Slider)}
    assert set(released) == set(sliders), set(sliders) ^ set(released)  # every slider, and only sliders
    def typed(fn, value) -> tuple:
        """(slider update, status) of a release handler given ``value``; inputs after the slider (a tab's state,
        e.g. the Why tab's kept numbers) get None, their start, and outputs after the first two are left out."""
        return tuple(fn.fn(value, *[None] * (len(fn.inputs) - 1))[:2])

    for elem_id, slider in sliders.items():
        fn = released[elem_id]
        assert fn.queue and not fn.preprocess, elem_id  # queued, in order; the raw number is read
        with toasts_shown() as toasts:
            box, status = typed(fn, slider.maximum + 1000)
        assert box["value"] == slider.maximum and "status-info" in status and " is at most " in status, elem_id
        if elem_id not in ("why-alpha", "why-c"):  # the Why tab's what-if sliders: their own line, no toast
            assert len(toasts) == 1 and toasts[0] in status, (elem_id, toasts)  # the same sentence
        else:
            assert toasts == [], elem_id
        box, status = typed(fn, slider.minimum - 1)
        assert box["value"] == slider.minimum and " is at least " in status, elem_id
        assert all(v == {"__type__": "update"} for v in typed(fn, slider.maximum)), elem_id  # in range: no change
    by_slider = [(names[t], e, fn) for fn in demo.fns.values() for t, e in fn.targets if names.get(t) in sliders]
    assert [(elem_id, event) for elem_id, event, fn in by_slider if fn.preprocess] == []
    tops = {"max-new-tokens": ("Max new tokens", current_policy().max_new_tokens),
            "arena-max-new-tokens": ("Max new tokens per run", arena.MAX_NEW_TOKENS),
            "batching-max-new-tokens": ("Max new tokens per row", batching.MAX_NEW_TOKENS),
            "classroom-max-new-tokens": ("Max new tokens", classroom.STEP_MAX_NEW_TOKENS),
            "whatif-tokens": ("Tokens per run", classroom.WHATIF_MAX_NEW_TOKENS),
            "draft-length": ("Draft length k", live.controls.MAX_K), "batching-k": ("Draft length k", batching.MAX_K),
            "temperature": ("Temperature", 2), "why-c": ("Draft cost c", 2)}
    for elem_id, (name, top) in tops.items():
        box, status = typed(released[elem_id], top + 1000)
        assert f"{name} is at most {top} here" in status and f"using {top}." in status, status
    assert "SPECVIZ_MAX_NEW_TOKENS" in released["max-new-tokens"].fn(10 ** 6)[1]  # who sets the Live tab's end
    box, status = released["batching-max-new-tokens"].fn(1)
    assert box["value"] == 4 and _said(inputs.clamp_notice(1, "Max new tokens per row", 4, 128)) in status
    box, status = released["draft-length"].fn(0)
    assert box["value"] == 1 and _said(inputs.clamp_notice(0, "Draft length k", 1, live.controls.MAX_K)) in status
    box, status = released["temperature"].fn(-1)
    assert box["value"] == 0 and _said(inputs.clamp_notice(-1, "Temperature", 0, 2)) in status


def _said(notice: tuple) -> str:
    """A notice's sentence (``(value used, sentence)``, from its builder) as the status line's HTML shows it."""
    return html.escape(notice[1])


def test_number_boxes_left_with_a_value_a_run_refuses_say_so_in_every_tab():
    """A number box (top-k, seed, min-p, the penalties, no-repeat n-gram size, early-exit layer, N runs) is checked
    when it is left, not only when Run is pressed: the Run path's own message, the value used instead (the box is set
    to it) in the status line, and no toast; silence for a value a run accepts. The raw payload is read
    (preprocess off), so no Gradio check runs first, and nothing raises."""
    from app import batching

    notice = inputs.number_notice(-3, inputs.TOP_K)  # the sentences' wording: tests/test_messages.py
    assert notice[0] == 0
    with pytest.raises(inputs.InputError) as refused:  # the Run path says the same words
        inputs.parse_settings(dict(prompt="hi", target="embedded", drafter="ngram", draft_model="", exit_layer=0,
                                   k=4, adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=-3, seed=0,
                                   max_new_tokens=64, stop_strings="", chat_template=True))
    assert notice[1] == f"{refused.value} Using 0."
    accepted = ((0, inputs.TOP_K), (None, inputs.SEED), ("", inputs.MIN_P), (1.3, inputs.REPETITION_PENALTY),
                (-2, inputs.FREQUENCY_PENALTY), (2, inputs.PRESENCE_PENALTY), (64, inputs.NO_REPEAT_NGRAM_SIZE))
    assert [inputs.number_notice(v, f) for v, f in accepted] == [None] * len(accepted)
    demo = build_demo(max_new_tokens=40)
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    left = {names[target]: fn for fn in demo.fns.values() for target, event in fn.targets if event == "blur"}
    boxes = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, gr.Number)}
    assert set(boxes) <= set(left), set(boxes) - set(left)  # every number box of every tab (some text boxes too)
    assert {"top-k", "seed", "min-p", "repetition-penalty", "frequency-penalty", "presence-penalty",
            "no-repeat-ngram-size", "exit-layer", "arena-seed", "arena-min-p", "arena-exit-layer",
            "classroom-seed", "classroom-exit-layer", "why-exit-layer", "batching-check-n"} <= set(left)
    for elem_id, box in boxes.items():
        fn = left[elem_id]
        assert fn.queue and not fn.preprocess, elem_id  # queued; the raw number is read
        if elem_id == "batching-check-n":  # keeps its earlier value, said as a slider's box: tests/test_messages.py
            assert fn.fn(-1000)[0]["value"] == batching.check_job.MIN_N
            continue
        with no_toast():
            update, status = fn.fn(-1000)
        assert "status-info" in status and " must be " in status and "Using" in status, elem_id
        assert update["value"] == inputs.number_notice(-1000, *_field_of(elem_id))[0], elem_id  # the lowest
        assert all(v == {"__type__": "update"} for v in fn.fn(box.value)), elem_id  # its default: silent
    with no_toast():
        update, status = left["batching-check-n"].fn(10 ** 9)  # an info line
    assert update["value"] == batching.MAX_N
    assert "N runs per side is at most 1000 here; using 1000." in status
    assert batching.N_FIELD.name in "N runs per side (20–1000)"
    with no_toast():
        update, status = left["top-k"].fn(-3)
    assert update["value"] == 0 and _said(notice) in status
    with no_toast():
        update, status = left["arena-min-p"].fn(5)
    assert update["value"] == 0.99 and _said(inputs.number_notice(5, inputs.MIN_P)) in status


def test_the_early_exit_layer_box_is_checked_against_the_loaded_target_when_left(tiny_model_dir):
    """Left with a layer the target lacks, the box says so with the target's own bound and takes the nearest layer,
    when that target is already loaded (nothing is loaded by the check); unloaded, a number beyond any model's takes
    0 (half the target's layers), never 10,000. The Live and Arena boxes read their tab's target box."""
    from specviz.runtime.models import load_model

    spec = str(tiny_model_dir)
    loaded = load_model(spec, device="cpu")  # in the process's model cache now (another test may have dropped it)
    label = loaded.label  # 4 layers: exits after 1..3
    def fit(value) -> tuple:
        """The notice for ``value`` against this target's own layers and label (wording: tests/test_messages.py)."""
        used, message = inputs.fit_exit_layer(value, 4, label)
        return used or 0, message

    assert all(f"1 to 3 for {label}, which has 4 layers" in fit(v)[1] for v in (100, 4, 10 ** 5, -2))
    assert inputs.exit_layer_notice(100, spec) == fit(100) and fit(100)[0] == 3
    assert inputs.exit_layer_notice(4, f" {spec} ") == fit(4) and fit(4)[0] == 3
    assert inputs.exit_layer_notice(10 ** 5, spec) == fit(10 ** 5) and fit(10 ** 5)[0] == 3
    assert [inputs.exit_layer_notice(v, spec) for v in (3, 1, 0, None, "")] == [None] * 5
    assert inputs.exit_layer_notice(-2, spec)[0] == 0 and inputs.exit_layer_notice(2.5, spec)[0] == 3  # halves up
    assert inputs.exit_layer_notice(-2, spec) == fit(-2)  # below 1 alike: 0, the default
    with pytest.raises(inputs.InputError) as refused:  # the Run path's words
        inputs.check_exit_layer(4, loaded)
    assert fit(4)[1] == f"{refused.value} Using 3."
    unloaded = "someone/never-loaded-model"
    assert inputs.exit_layer_notice(100, unloaded) is None  # its layers are unknown until a run loads it
    assert inputs.exit_layer_notice(10 ** 5, unloaded) == (0, inputs.fit_exit_layer(10 ** 5)[1])  # layers unknown
    demo = build_demo(max_new_tokens=40)
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    left = {names[t]: fn for fn in demo.fns.values() for t, event in fn.targets if event == "blur"}
    for elem_id, status_id, target_id in (("exit-layer", "status", "target"),
                                          ("arena-exit-layer", "arena-status", "arena-target")):
        fn = left[elem_id]  # the box, the status it says its sentence over, the target box
        assert [names[block._id] for block in fn.inputs] == [elem_id, status_id, target_id]
        with no_toast():
            update, status = fn.fn(100, None, spec)
        assert update["value"] == 3 and _said(fit(100)) in status
        assert all(v == {"__type__": "update"} for v in fn.fn(2, None, spec))


def test_the_early_exit_layer_box_knows_an_unloaded_targets_layers_from_its_config(tmp_path, tiny_tokenizer):
    """Before its target is loaded, the box left with a layer the target lacks is refused with the target's own
    bound, read from the saved folder's config.json (:func:`specviz.runtime.models.layer_count`); a layer it has passes
    silently; nothing is loaded by either check."""
    from conftest import build_tiny_model

    from specviz.runtime.models import cached_model

    spec = str(build_tiny_model(tmp_path / "six-layers", tiny_tokenizer, seed=5, num_layers=6))
    assert cached_model(spec) is None
    def said(value) -> str:
        """The notice for ``value`` against six-layers' own 6 layers (wording: tests/test_messages.py), as shown."""
        return _said(inputs.fit_exit_layer(value, 6, "six-layers"))
    demo = build_demo(max_new_tokens=40)
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    left = {names[t]: fn for fn in demo.fns.values() for t, event in fn.targets if event == "blur"}
    for elem_id in ("exit-layer", "arena-exit-layer"):
        fn = left[elem_id]
        with no_toast():
            update, status = fn.fn(100, None, spec)
        assert update["value"] == 5 and said(100) in status
        with no_toast():
            update, status = fn.fn(6, None, f" {spec} ")
        assert update["value"] == 5 and said(6) in status
        assert all(v == {"__type__": "update"} for v in fn.fn(5, None, spec))  # its last layer but one: passes
        assert all(v == {"__type__": "update"} for v in fn.fn(1, None, spec))
    assert inputs.exit_layer_notice(100, spec) == inputs.fit_exit_layer(100, 6, "six-layers")
    assert "1 to 5 for six-layers, which has 6 layers" in said(100)  # the bound read from its config
    assert cached_model(spec) is None  # the checks read the config only


def test_an_emptied_number_box_gets_its_default_back_and_says_so():
    """A Seed or N box emptied and left is set back to the default a run would use, and the status line says so
    (no toast)."""
    from app import batching

    demo = build_demo(max_new_tokens=40)
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    left = {names[t]: fn for fn in demo.fns.values() for t, event in fn.targets if event == "blur"}
    with no_toast():
        update, status = left["batching-check-n"].fn(None)
        assert update["value"] == batching.CHECK_N == 200
        assert _said(inputs.empty_notice(batching.N_FIELD)) in status  # wording: tests/test_messages.py
        for elem_id in ("seed", "arena-seed", "classroom-seed"):
            update, status = left[elem_id].fn("")
            assert update["value"] == 0 and _said(inputs.empty_notice(inputs.SEED)) in status, elem_id
        update, status = left["arena-exit-layer"].fn(None, "embedded")
        assert update["value"] == 0 and _said(inputs.empty_notice(inputs.EXIT_LAYER)) in status
    assert batching.parse_check("hi", 1.0, "ngram", None, False, "embedded", "").n == 200  # the run agrees


def _field_of(elem_id: str) -> tuple:
    """The rule (and parser) a number box is checked by, from its element id."""
    from app import batching

    if elem_id.endswith("exit-layer"):
        return inputs.EXIT_LAYER, inputs.parse_exit_layer
    if elem_id == "batching-check-n":
        return batching.N_FIELD, None
    key = elem_id.removeprefix("arena-").removeprefix("classroom-").replace("-", "_").upper()
    return getattr(inputs, key), None


def test_the_history_names_the_temperature_and_scrolls_inside_its_box():
    row = RunSummary(drafter="ngram", k="k = 4", temperature=0.7, seed=3, settings="top-p 0.9", tokens=64,
                     acceptance=0.5, tokens_per_pass=2.0, spec_tps=20.0, base_tps=16.0, speedup=1.25, identical=None)
    labelled = render.history_html([row])
    labels = re.findall(r'<span class="hist-label">([^<]*)</span>', labelled)  # a phone shows them in each cell
    table = unlabelled(labelled)
    headers = re.findall(r"<th>([^<]*)</th>", table.replace("<wbr>", ""))  # "tokens/pass" may break after "/"
    assert labels == [label for _, label in render.history.HISTORY_COLUMNS] and "tok/pass" in labels
    assert headers == ["drafter", "k", "temperature, settings", "tokens", "acceptance", "tokens/pass", "spec tok/s*",
                       "base tok/s*", "decoding speedup*", "same ids"]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    assert cells[1] == "k = 4" and cells[2] == "0.7 · seed 3 · top-p 0.9" and cells[8] == "1.25×"
    assert '<td class="hist-k" style="white-space: nowrap">k = 4</td>' in table  # never on two lines
    # the title stays above the box; the table scrolls sideways inside it (a shade says so: assets/head.html)
    assert table.startswith('<div class="sv-scroll-title">Runs in this session (newest first)')
    assert ('<div class="sv-scroll-frame"><div class="sv-scroll" role="region" tabindex="0" '
            'aria-label="Runs in this session"><table class="history">') in table


def test_wide_dataframes_wrap_their_headers_and_mark_their_scroller():
    demo = build_demo(max_new_tokens=40)
    classes = {c["props"].get("elem_id"): c["props"].get("elem_classes") or [] for c in demo.config["components"]}
    for elem_id in ("arena-table", "arena-prompts", "batching-table"):
        assert "sv-wide-table" in classes[elem_id], elem_id  # style.css and head.html read the class
    assert "sv-wrap-cells" in classes["batching-table"]  # its cells wrap too: it fits a desktop without scrolling


def test_p_and_q_are_shown_with_digits_enough_to_tell_them_apart():
    assert format_apart(0.018, 0.021) == ("0.018", "0.021")
    assert format_apart(0.25, 0.5) == ("0.25", "0.50") and format_apart(0.5, 0.5) == ("0.50", "0.50")
    from test_classroom_stepper import TEXTS, _pass, _prefill

    from specviz.analysis.stepper import Recording, Step, Stepper

    events = (_prefill(), _pass(1, [2, 3], 1, 8, "recovered", p=[0.9, 0.018], q=[0.8, 0.021], u=[0.1, 0.9]))
    caption = Stepper(Recording(events, greedy=False, drafter_name="d", token_texts=TEXTS)).caption(Step(1, "decide"))
    assert "p = 0.018" in caption and "q = 0.021" in caption
    detail = PositionDetail(target_prob=0.0012, draft_prob=0.0014, uniform=None, target_top_id=1, judged=True)
    from app.render import _detail_title

    assert "target p = 0.0012 · draft q = 0.0014" in _detail_title(1, 0, 1, "rejected", detail, None)


def test_every_chart_keeps_its_toolbar_off_the_titles():
    from app import arena as arena_tab
    from app import figures
    from specviz.measure.costs import whatif_curves

    spec, base = paired_runs(4, lambda i: 1.0, lambda i: 1.0)
    s, b = RunStats(), RunStats()
    for event in spec:
        s.add(event)
    for event in base:
        b.add(event)
    grid = {"token_counts": [1, 2], "ms": {1: {1: 10.0, 2: 11.0}}, "gbs": {1: {1: 1.0, 2: 1.0}}, "param_bytes": 1e6}
    charts = [figures.dashboard_figure(s, b), figures.acceptance_figure(s, b), why.forward_figure(grid),
              why.whatif_figure(whatif_curves(0.7, 0.05)), arena_tab.arena_figure([]), arena_tab.predictions_figure([])]
    for fig in charts:
        assert isinstance(fig, go.Figure)
        assert fig.layout.modebar.orientation == "v" and fig.layout.margin.r >= figures.MODEBAR_MARGIN_PX


class FakeRequest:
    def __init__(self, session_hash: str) -> None:
        self.session_hash = session_hash


def test_a_failed_run_keeps_the_previous_good_result_in_both_panes(tiny_model_dir):
    me = FakeRequest("keeps-its-result")
    good = last_values(live.generate({**_GOOD, "target": str(tiny_model_dir)}, history=[], request=me), live.OUTPUTS)
    assert "Done in" in good["status"] and 'data-kind=' in good["spec-output"]
    with no_toast():
        failed = last_output(live.generate({**_GOOD, "target": "/no/such/folder"}, history=[], request=me))
    spec, base, _, stats, status = failed[:5]
    assert spec == good["spec-output"] and base == good["baseline-output"] and stats == good["stats"]
    assert "status-error" in status and "no such local folder" in status
    with no_toast():
        bad_input = last_output(live.generate({**_GOOD, "prompt": " "}, history=[], request=me))
    assert bad_input[0] == good["spec-output"] and "prompt is empty" in bad_input[4]
    live.release_session(me)
    assert not device.DEVICE.locked


_GOOD = dict(prompt="one two three one two three one two three", target="embedded", drafter="ngram", draft_model="",
             exit_layer=0, k=3, adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=12,
             stop_strings="", chat_template=False)
