"""app/inputs.py's early-exit layer fitting for a loaded target: one public rule every tab can call once its target
is loaded (the Live tab does; see :func:`app.inputs.fit_loaded_exit_layer`). No model is loaded here: a loaded target
is read only for its ``num_layers`` and ``label``. Then the "Sampling and stopping" number boxes: a value out of range,
left, is set to the value runs use and said in one sentence (setting, range, value used), by our check, not Gradio's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app import inputs
from toast_support import no_toast

TARGET = SimpleNamespace(num_layers=30, label="SmolLM2-135M-Instruct")


def _note(value) -> str:
    """The sentence for early-exit layer ``value`` against TARGET's own layers (wording: tests/test_messages.py)."""
    return inputs.fit_exit_layer(value, TARGET.num_layers, TARGET.label)[1]


def test_a_layer_the_loaded_target_has_is_used_as_asked():
    assert [inputs.fit_loaded_exit_layer(layer, TARGET) for layer in (None, 1, 15, 29)] == [
        (None, None), (1, None), (15, None), (29, None)]


def test_a_layer_beyond_the_loaded_target_takes_its_last_layer_but_one_and_says_so():
    assert inputs.fit_loaded_exit_layer(30, TARGET) == (29, _note(30))
    assert inputs.fit_loaded_exit_layer(100, TARGET) == (29, _note(100))
    assert "1 to 29 for SmolLM2-135M-Instruct, which has 30 layers (got 30)" in _note(30)  # the target's own bound
    # the same sentence as the box's status line when the target's layers are known before the run
    assert inputs.fit_exit_layer(100, 30, TARGET.label) == inputs.fit_loaded_exit_layer(100, TARGET)


def test_a_target_with_no_layer_to_exit_after_is_refused_with_the_run_paths_words():
    single = SimpleNamespace(num_layers=1, label="one-layer")
    with pytest.raises(inputs.InputError, match=r"layer from 1 to the target's layers − 1 \(got 1\)\.$"):
        inputs.fit_loaded_exit_layer(1, single)
    assert inputs.fit_loaded_exit_layer(None, single) == (None, None)  # the default asks for no layer


def test_settings_get_the_fitted_layer_and_the_note_in_their_notes():
    settings = inputs.parse_settings(dict(prompt="hi", target="embedded", drafter="early-exit", draft_model="",
                                          exit_layer=100, k=3, adaptive_k="fixed", temperature=0.0, top_p=1.0,
                                          top_k=0, seed=0, max_new_tokens=8, stop_strings="", chat_template=True))
    assert settings.exit_layer == 100 and not settings.notes
    empty = inputs.parse_settings(dict(prompt="hi", target="  ", drafter="ngram", draft_model="", exit_layer=0, k=3,
                                       adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0, seed=0,
                                       max_new_tokens=8, stop_strings="", chat_template=True))
    assert empty.target == "embedded" and empty.notes == (inputs.EMPTY_TARGET_NOTE,)  # runs the default and says so
    fitted, note = inputs.fit_settings_exit_layer(settings, TARGET)
    assert note == _note(100) and "(got 100). Using 29." in note
    assert fitted.exit_layer == 29 and fitted.notes == (note,) and fitted.prompt == "hi" and fitted.k == 3
    same = inputs.parse_settings(dict(prompt="hi", target="embedded", drafter="early-exit", draft_model="",
                                      exit_layer=12, k=3, adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0,
                                      seed=0, max_new_tokens=8, stop_strings="", chat_template=True))
    assert inputs.fit_settings_exit_layer(same, TARGET) == (same, None)


# ------------------------------------------------------------------ the "Sampling and stopping" number boxes

# Seen in a new-user check: Top-k -3, Seed -1, Frequency penalty 9 and Repetition penalty 0, each typed and left,
# became 0, 0, 2 and 0.01. The box's check (app.messages.refused, on blur) must say so in one sentence naming the
# setting, its range and the value used; a repetition penalty of 0 or below ("off", as 0 is for the other
# penalties) uses 1, which is off, and says so.
SAMPLING_TYPOS = [
    (inputs.TOP_K, "-3", 0, "Top-k must be between 0 and 1,000,000 (got -3). Using 0."),
    (inputs.SEED, "-1", 0, "Seed must be between 0 and 9,007,199,254,740,991 (got -1). Using 0."),
    (inputs.FREQUENCY_PENALTY, "9", 2.0, "Frequency penalty must be between -2 and 2 (got 9). Using 2."),
    (inputs.PRESENCE_PENALTY, "-7", -2.0, "Presence penalty must be between -2 and 2 (got -7). Using -2."),
    (inputs.REPETITION_PENALTY, "0", 1.0,
     "Repetition penalty must be between 0.01 and 10 (got 0; 1 is off). Using 1 (off)."),
    (inputs.REPETITION_PENALTY, "-1", 1.0,  # below 0 means off too (a new-user trial: -3 became 0.01, forcing repeats)
     "Repetition penalty must be between 0.01 and 10 (got -1; 1 is off). Using 1 (off)."),
    (inputs.REPETITION_PENALTY, "0.001", 0.01, "Repetition penalty must be between 0.01 and 10 (got 0.001). Using 0.01."),
    (inputs.REPETITION_PENALTY, "50", 10.0, "Repetition penalty must be between 0.01 and 10 (got 50). Using 10."),
    (inputs.MIN_P, "-0.5", 0.0, "Min-p must be between 0 and 0.99 (got -0.5). Using 0."),
    (inputs.NO_REPEAT_NGRAM_SIZE, "100", 64, "No-repeat n-gram size must be between 0 and 64 (got 100). Using 64."),
]


@pytest.mark.parametrize("field, typed, used, message", SAMPLING_TYPOS, ids=lambda v: getattr(v, "name", None))
def test_a_sampling_box_left_out_of_range_says_the_setting_its_range_and_the_value_used(field, typed, used, message):
    from app import messages

    assert inputs.number_notice(typed, field) == (used, message)
    with no_toast():
        box, status = messages.refused(typed, field)
    assert box["value"] == used and type(box["value"]) is type(used)  # the box is set to the value runs use
    assert message in status  # the status line says the sentence, once (no toast)


def test_a_repetition_penalty_of_0_is_refused_by_the_run_with_the_hint_that_1_is_off():
    with pytest.raises(inputs.InputError) as refused:
        inputs.parse_settings(dict(prompt="hi", target="embedded", drafter="ngram", draft_model="", exit_layer=0,
                                   k=4, adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0, seed=0,
                                   max_new_tokens=64, stop_strings="", chat_template=True, repetition_penalty=0))
    assert str(refused.value) == "Repetition penalty must be between 0.01 and 10 (got 0; 1 is off)."
    assert inputs.REPETITION_PENALTY.parse("") == 1.0 and inputs.REPETITION_PENALTY.parse(0.5) == 0.5
    # the other penalties are off at 0, which their range holds: no hint, no refusal
    assert inputs.FREQUENCY_PENALTY.parse(0) == 0.0 and inputs.number_notice(0, inputs.PRESENCE_PENALTY) is None


def test_the_live_sampling_boxes_leave_the_range_to_our_check_not_to_gradio():
    """Gradio's own minimum / maximum on a gr.Number would change or refuse a typed value before our check runs,
    without our message: the Live tab's checked boxes have none, and each has its blur check."""
    import gradio as gr

    from app import build_demo, live

    demo = build_demo(max_new_tokens=40)
    boxes = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, gr.Number)}
    left = {fn_target for fn in demo.fns.values() for fn_target, event in fn.targets if event == "blur"}
    for name in live.CHECKED_NUMBERS:
        box = boxes[name.replace("_", "-")]
        assert box.minimum is None and box.maximum is None, name
        assert box._id in left, name
    # nor a precision, on any tab's number box: a whole-number box of precision 0 handed the check -1.5 as -2 and
    # 2.5 as 2, so the toast said "(got -2)" and a fractional seed ran rounded without a word
    assert len(boxes) >= 10 and all(box.precision is None for box in boxes.values())
    for elem_id in ("seed", "arena-seed", "classroom-seed", "top-k", "exit-layer", "batching-check-n"):
        assert boxes[elem_id].preprocess(2.5) == 2.5 and boxes[elem_id].preprocess(-1.5) == -1.5, elem_id
    assert inputs.number_notice(-1.5, inputs.SEED)[1] == ("Seed must be between 0 and 9,007,199,254,740,991 "
                                                          "(got -1.5). Using 0.")
    assert inputs.number_notice(2.5, inputs.SEED) == (3, "Seed must be a whole number (got 2.5). Using 3.")
    assert inputs.number_notice(0.5, inputs.TOP_K)[0] == 1  # halves up: a fraction never turns top-k off
    # a slider of whole steps says a fraction as it says a value out of range, with the value it then holds
    assert inputs.clamp_notice(1.5, "Draft length k", 1, 16, whole=True) == (
        2, "Draft length k must be a whole number (got 1.5); using 2.")
    assert inputs.clamp_notice(16.4, "Draft length k", 1, 16, whole=True)[0] == 16
    assert inputs.clamp_notice(1.5, "Temperature", 0, 2) is None and inputs.clamp_notice(3, "k", 1, 16, whole=True) is None


def test_every_k_box_says_a_number_out_of_range_even_while_an_earlier_release_is_queued():
    """Seen on a busy machine: k = 99 ran k = 16 and 0 ran 1 without a word. The click into a slider's box sends a
    release (the old value) and Gradio's default trigger mode ("once") dropped the typed number's release while that
    one was queued. Every tab's k slider (Live, Classroom and its largest k, Batching) answers each release, with the
    sentence max new tokens gets."""
    import gradio as gr

    from app import build_demo
    from app.messages import RELEASE_TRIGGER_MODE, clamped

    demo = build_demo(max_new_tokens=40)
    sliders = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, gr.Slider)}
    released = {fn_target: fn for fn in demo.fns.values() for fn_target, event in fn.targets if event == "release"}
    for elem_id in ("draft-length", "classroom-k", "whatif-kmax", "batching-k", "max-new-tokens"):
        slider = sliders[elem_id]
        fn = released[slider._id]
        assert fn.trigger_mode == RELEASE_TRIGGER_MODE == "multiple", elem_id
        assert fn.preprocess is False, elem_id
    k = sliders["draft-length"]
    assert (k.minimum, k.maximum) == (1, 16)
    update, status = clamped(99, "Draft length k", k.minimum, k.maximum)
    assert update["value"] == 16 and inputs.clamp_notice(99, "Draft length k", 1, 16)[1] in status
    update, status = clamped(0, "Draft length k", k.minimum, k.maximum)
    assert update["value"] == 1 and inputs.clamp_notice(0, "Draft length k", 1, 16)[1] in status


def test_the_settings_are_one_mapping_by_name_with_the_later_inputs_optional():
    """parse_settings reads one mapping of input names (app.inputs.SETTING_NAMES); the inputs added after the first
    API clients may be left out (a chain, no penalties, lookahead's defaults); a missing or unknown name is one
    sentence, never a TypeError."""
    required = dict(prompt="hi", target="embedded", drafter="ngram", draft_model="", exit_layer=0, k=4,
                    adaptive_k="fixed", temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=64,
                    stop_strings="", chat_template=True)
    assert set(required) | set(inputs.OPTIONAL_SETTINGS) == set(inputs.SETTING_NAMES)
    short = inputs.parse_settings(required)
    full = inputs.parse_settings({**required, **inputs.OPTIONAL_SETTINGS})
    assert short == full and short.repetition_penalty == 1.0 and short.tree_nodes == 0
    with pytest.raises(inputs.InputError, match=r"^The setting 'prompt' is missing\.$"):
        inputs.parse_settings({k: v for k, v in required.items() if k != "prompt"})
    with pytest.raises(inputs.InputError, match=r"^Unknown setting 'promt'"):
        inputs.parse_settings({**required, "promt": "hi"})
    with pytest.raises(inputs.InputError, match="given by name"):
        inputs.parse_settings(["hi", "embedded"])


def test_a_sliders_emptied_or_too_small_box_is_said_as_a_too_large_one_is():
    """Trial: an empty or 0 "Draft length k" silently became k = 1, while 99 got "... is at most 16 here; using 16."."""
    import gradio as gr

    from app.messages import clamped

    for typed, said in ((None, "Draft length k was empty; using 1."), ("", "Draft length k was empty; using 1."),
                        (0, "Draft length k is at least 1 here; using 1."),
                        (-3, "Draft length k is at least 1 here; using 1."),
                        (99, "Draft length k is at most 16 here; using 16.")):
        update, status = clamped(typed, "Draft length k", 1, 16)
        assert update["value"] == (16 if typed == 99 else 1) and said in status, (typed, status)
    assert inputs.emptied_slider_notice("Temperature", 0, 2) == (0, "Temperature was empty; using 0.")
    assert inputs.emptied_slider_notice("Max new tokens per row", 4, 128) == (4, "Max new tokens per row was empty; "
                                                                                "using 4.")
    assert clamped(5, "Draft length k", 1, 16) == (gr.skip(), gr.skip())


def test_a_huge_number_is_said_in_a_readable_form():
    """A new-user trial typed 99999999999999999999999 as the seed and read "(got 1.0000000000000001e+…)"."""
    with pytest.raises(inputs.InputError) as refused:
        inputs.SEED.parse(99999999999999999999999)
    assert str(refused.value) == "Seed must be between 0 and 9,007,199,254,740,991 (got 1e+23)."
