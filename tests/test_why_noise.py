"""The Why tab says "too noisy to tell" where its repeats say so: the weight formats' paragraph and chart, the
one-token step and draft cost cards, and the what-if chart's title. Fake measurements, no clocks."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app import why  # noqa: E402
from app.why.controls import whatif  # noqa: E402
from app.why.weights import weights_figure, weights_html  # noqa: E402

BUSY = "warning: other programs used 64% of this machine's CPU time during the run: timings are slow and noisy"


def _formats(verify: dict[str, list[float]], ranges: dict[str, tuple[float, float]]) -> dict:
    """A kernel_by_format result with T(n)/T(1) for n = 1..9 (1.0 first) and each format's step range."""
    mbs = {"float32": 538.0, "bfloat16": 269.0, "int8": 135.0, "int4": 95.0}
    figures = {}
    for fmt, ratios in verify.items():
        low, high = ranges[fmt]
        step = (low + high) / 2
        figures[fmt] = {"step_ms": step, "linear_mb": mbs[fmt], "floor_ms": mbs[fmt] / 10.0,
                        "step_over_floor": step / (mbs[fmt] / 10.0), "step_ms_range": [low, high],
                        "verify": dict(zip(range(1, 10), [1.0] + ratios))}
    return {"formats": figures, "copy_bandwidth_gbs": 10.0, "threads": 2, "settings": {"rounds": 4},
            "left_out": "", "seconds": 40.0}


# The trial's figures on a loaded 2-core machine: T(5)/T(1) of 0.41, 0.54, 0.68 and 1.13, steps far apart.
TRIAL = _formats({"float32": [0.35, 0.38, 0.40, 0.41, 0.45, 0.5, 0.6, 0.7],
                  "bfloat16": [0.5, 0.52, 0.53, 0.54, 0.6, 0.7, 0.8, 0.9],
                  "int8": [0.6, 0.65, 0.66, 0.68, 0.8, 0.9, 1.0, 1.1],
                  "int4": [1.02, 1.05, 1.1, 1.13, 1.2, 1.3, 1.4, 1.5]},
                 {"float32": (128.0, 927.7), "bfloat16": (90.0, 400.0), "int8": (60.0, 300.0), "int4": (50.0, 70.0)})
CLEAN = _formats({"float32": [1.02, 1.04, 1.06, 1.10, 1.15, 1.2, 1.25, 1.3],
                  "bfloat16": [1.03, 1.05, 1.07, 1.09, 1.12, 1.2, 1.3, 1.4],
                  "int8": [1.04, 1.06, 1.09, 1.12, 1.2, 1.3, 1.4, 1.5],
                  "int4": [1.09, 1.17, 1.27, 1.63, 1.8, 2.0, 2.2, 2.4]},
                 {"float32": (58.0, 62.0), "bfloat16": (38.0, 41.0), "int8": (24.0, 26.0), "int4": (19.0, 21.0)})


def test_the_trials_weight_formats_are_too_noisy_to_tell_and_draw_no_conclusion():
    text = html.unescape(weights_html(TRIAL, BUSY))
    assert "Too noisy to tell (other programs used 64% of this machine's CPU time" in text
    assert "float32: one-token steps 128.0–927.7 ms across rounds, 7.2× apart; T(n)/T(1) below one step at n = " \
           "2, 3, 4, 5, 6, 7, 8, 9" in text
    assert "int8: " in text and "int4: " not in text  # int4's rounds were close and its ratios above one
    assert "cannot take less time than over one" in text and "rounds this far apart" in text
    assert "rises above" not in text and "no steeper" not in text  # no curve read against another
    assert "float32 0.41, bfloat16 0.54, int8 0.68, int4 1.13" in text  # the measured numbers stay
    rings = [t for t in weights_figure(TRIAL).data if t.name == "too noisy to tell"]
    assert [t.showlegend for t in rings] == [True, False, False]  # float32, bfloat16, int8; one legend entry
    assert list(rings[0].x) == list(range(1, 10))  # float32's rounds 7× apart: its whole curve is noise


def test_ratios_below_one_alone_make_a_format_noisy():
    """A tight step range does not save a curve with T(n)/T(1) clearly below one (< 0.9); just under 1 is flat."""
    below = _formats({"float32": [0.95, 0.97, 0.85, 0.98, 1.0, 1.0, 1.1, 1.2],
                      "int4": [1.05, 1.09, 1.17, 1.27, 1.63, 1.8, 2.0, 2.2]},
                     {"float32": (58.0, 62.0), "int4": (19.0, 21.0)})
    text = html.unescape(weights_html(below))
    assert "Too noisy to tell: float32: T(n)/T(1) below one step at n = 4." in text
    assert "rounds this far apart" not in text and "rises above" not in text
    rings = [t for t in weights_figure(below).data if t.name == "too noisy to tell"]
    assert len(rings) == 1 and list(rings[0].x) == [4]


def test_clean_weight_formats_keep_their_finding():
    text = html.unescape(weights_html(CLEAN, None))
    assert "too noisy" not in text.lower()
    assert "int4's curve rises above float32's" in text and "int4 1.63" in text
    assert not [t for t in weights_figure(CLEAN).data if t.name == "too noisy to tell"]
    assert "too noisy" not in weights_figure(CLEAN).layout.annotations[-1].text


def _grid(step_range: tuple[float, float]) -> dict:
    """A one-batch grid whose one-token step is 534 ms with ``step_range`` over its repeats."""
    return {"ms": {1: {1: 534.0, 4: 560.0, 8: 600.0}}, "param_bytes": 5e8, "impossible": [],
            "spread": {1: {1: step_range}}, "settings": {"repeats": 3, "prompt_len": 64}}


TRIAL_C = {"early-exit": 0.90, "early-exit_range": (0.33, 3.98), "ngram": 0.0002, "early_exit_layer": 15}
CLEAN_C = {"early-exit": 0.53, "early-exit_range": (0.49, 0.58), "ngram": 0.0002, "early_exit_layer": 15}


def test_a_step_and_a_c_whose_repeats_spread_7x_are_labelled_too_noisy():
    cards = html.unescape(why.summary_html(_grid((128.0, 927.7)), TRIAL_C))
    assert "534.0 <small>ms: too noisy to tell</small>" in cards
    assert "too noisy to tell: repeats 128.0–927.7 ms, 7.2× apart" in cards
    assert "0.90 <small>early exit: too noisy to tell</small>" in cards
    assert "too noisy to tell: repeats 0.33–3.98, 12.1× apart" in cards
    clean = html.unescape(why.summary_html(_grid((520.0, 560.0)), CLEAN_C))
    assert "too noisy" not in clean
    assert "repeats 520.0–560.0 ms" in clean and "repeats 0.49–0.58" in clean


def test_the_whatif_chart_says_when_the_measured_c_is_noise():
    noisy = {"grid": _grid((128.0, 927.7)), "costs": TRIAL_C}
    title = whatif(0.8, 0.9, 1, None, None, None, noisy).layout.legend.title.text.replace("<br>", " ")  # wrapped
    assert "measured c too noisy to tell: repeats 0.33–3.98" in title
    assert "too noisy" not in whatif(0.8, 0.3, 1, None, None, None, noisy).layout.legend.title.text  # the slider moved
    clean = {"grid": _grid((520.0, 560.0)), "costs": CLEAN_C}
    assert "too noisy" not in whatif(0.8, 0.53, 1, None, None, None, clean).layout.legend.title.text
