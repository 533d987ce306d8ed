"""A new user's trial: the Live tab's acceptance, α and tokens-per-pass cards showed bare numbers. Each now carries
its 95% interval over the run's passes (specviz.measure.stats.pass_share_interval, bootstrap_mean) and says when the
run has too few passes to tell."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import render  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402
from specviz.measure.stats import MIN_JUDGED_PASSES, bootstrap_mean, pass_share_interval, wilson_interval  # noqa: E402

Z95 = 1.959963984540054


def _event(index: int, drafted: int = 0, accepted: int = 0, run: str = "speculative") -> PassEvent:
    """A pass drafting ``drafted`` tokens (ids 2, 3, …) of which the first ``accepted`` are kept; a rejection when
    fewer were accepted than drafted (then a recovered token), else the bonus; index 0 is the prefill."""
    draft = tuple(range(2, 2 + drafted))
    details = tuple(PositionDetail(target_prob=0.9 if i < accepted else 0.1, draft_prob=1.0, uniform=None,
                                   target_top_id=1, judged=i <= accepted) for i in range(drafted))
    return PassEvent(run=run, index=index, kind="prefill" if index == 0 else "pass", k=drafted, draft_ids=draft,
                     accept_mask=tuple(i < accepted for i in range(drafted)), num_accepted=accepted, next_id=1,
                     next_kind="bonus" if accepted == drafted and index else ("recovered" if index else "target"),
                     emitted_ids=draft[:accepted] + (1,), details=details, text_delta="",
                     timings=Timings(1.0, 5.0, 0.5), t_end_ms=10.0 * (index + 1), num_generated=index + 1,
                     finish_reason=None, near_tie_gap=None, next_k=drafted)


def _run(passes: list[tuple[int, int]], run: str = "speculative") -> RunStats:
    """A RunStats of a prefill and one pass per (drafted, accepted)."""
    stats = RunStats()
    for i, (drafted, accepted) in enumerate([(0, 0)] + passes):
        stats.add(_event(i, drafted, accepted, run))
    return stats


def test_the_wilson_interval_keeps_a_width_when_every_trial_succeeded():
    full = wilson_interval(40, 40)
    assert full.value == 1.0 and full.high == 1.0
    assert full.low == pytest.approx(40 / (40 + Z95 ** 2))  # p = 1: the lower end is n / (n + z²)
    half = wilson_interval(5, 10)
    assert (half.low, half.high) == (pytest.approx(0.236593, abs=1e-6), pytest.approx(0.763407, abs=1e-6))
    assert wilson_interval(0, 0) is None and wilson_interval(0, 12).low == 0.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_a_counted_share_holds_both_the_bootstrap_over_passes_and_the_wilson_interval():
    # every pass accepted all 4: the bootstrap draws 100% every time; the Wilson interval of 40 / 40 keeps a width
    full = pass_share_interval([4] * 10, [4] * 10)
    assert (full.value, full.high) == (1.0, 1.0) and full.low == pytest.approx(40 / (40 + Z95 ** 2))
    # passes that drafted nothing (k = auto's plain steps) count nothing
    assert pass_share_interval([4] * 10 + [0, 0], [4] * 10 + [0, 0]) == full
    mixed = pass_share_interval([4, 0, 4, 0, 4, 0], [4] * 6)  # all or nothing: passes, not tokens, are the units
    wilson = wilson_interval(12, 24)
    assert mixed.value == 0.5 and mixed.low < wilson.low and mixed.high > wilson.high  # the bootstrap is wider
    assert pass_share_interval([3], [4]) is None and pass_share_interval([3, 0], [4, 0]) is None


def test_the_runs_intervals_are_of_its_own_figures():
    spec = _run([(4, 2), (4, 4), (4, 0), (4, 3), (4, 4), (2, 1), (4, 4), (4, 1), (3, 3)])
    assert spec.pass_rejections == [1, 0, 1, 1, 0, 1, 0, 1, 0] and sum(spec.pass_rejections) == spec.rejections
    acceptance, alpha, tpp = spec.acceptance_interval(), spec.alpha_interval(), spec.tokens_per_pass_interval()
    assert acceptance.value == spec.acceptance_rate == 22 / 33
    assert alpha.value == spec.alpha == 22 / 27
    assert tpp == bootstrap_mean([3, 5, 1, 4, 5, 2, 5, 2, 4]) and tpp.value == spec.tokens_per_pass == 31 / 9
    for interval in (acceptance, alpha, tpp):
        assert interval.low < interval.value < interval.high
    assert not spec.too_few_passes and _run([(4, 2)] * (MIN_JUDGED_PASSES - 1)).too_few_passes


def _cards(spec: RunStats) -> str:
    base = _run([(0, 0)] * 12, run="baseline")
    comparison = render.compare_outputs([1], [1], [1.0], None, greedy=True, finished=True)
    return html.unescape(re.sub(r"<[^>]+>", " ", render.stats_html(spec, base, comparison, greedy=True)))


def _card(text: str, label: str) -> str:
    return " ".join(text.split(label, 1)[1].split())[:120]


def test_the_acceptance_alpha_and_tokens_per_pass_cards_carry_their_intervals():
    spec = _run([(4, 2), (4, 4), (4, 0), (4, 3), (4, 4), (2, 1), (4, 4), (4, 1), (3, 3)])
    text = _cards(spec)
    a, al, t = spec.acceptance_interval(), spec.alpha_interval(), spec.tokens_per_pass_interval()
    assert _card(text, "Acceptance rate").startswith(f"67% ({a.low * 100:.0f}–{a.high * 100:.0f}%)")
    assert _card(text, "Per-token α").startswith(f"0.81 ({al.low:.2f}–{al.high:.2f})")
    assert _card(text, "Tokens per pass").startswith(f"3.44 ({t.low:.2f}–{t.high:.2f})")
    assert "too few" not in text and "interval over the passes" in _card(text, "Per-token α") + text


def test_a_short_run_says_it_has_too_few_passes_to_tell():
    three = _cards(_run([(4, 2), (4, 4), (4, 0)]))
    for label in ("Acceptance rate", "Per-token α", "Tokens per pass"):
        assert "; 3 passes: too few to tell)" in _card(three, label), _card(three, label)
    one = _cards(_run([(4, 2)]))
    assert _card(one, "Acceptance rate").startswith("50% (one pass: no spread)")
    assert _card(one, "Tokens per pass").startswith("3.00 (one pass: no spread)")
    plain = _cards(_run([(0, 0), (0, 0), (4, 2)]))  # k = auto's plain steps: one pass drafted
    assert _card(plain, "Acceptance rate").startswith("50% (3 passes: too few to tell)")  # the one form, as above
    assert "too few passes to tell" not in plain


def test_the_speculative_pane_header_gives_the_acceptance_its_interval():
    spec = _run([(4, 2), (4, 4), (4, 0), (4, 3), (4, 4), (2, 1), (4, 4), (4, 1), (3, 3)])
    a = spec.acceptance_interval()
    spread = render.counted_spread(a, spec, percent=True)
    assert spread == f"{a.low * 100:.0f}–{a.high * 100:.0f}%"
    header = render.pane_header("Speculative", "", [("accepted", spec.acceptance_rate, "{:.0%}", spread)])
    assert "<b>67%</b>" in header and f"({spread})</small> accepted" in header


def test_a_long_pane_spread_wraps_and_a_short_one_stays_on_one_line():
    """At 400 px "(0–100%; 3 passes: too few to tell)" ran past the speculative pane's right edge (a trial): only a
    short range is kept on one line now, and the figures wrap."""
    from app.render.pane import pane_header

    header = pane_header("Speculative", "", [("tokens/s", 0.6, "{:.1f}", "0.3–0.9"),
                                              ("accepted", 0.5, "{:.0%}", "0–100%; 3 passes: too few to tell")])
    assert '<small class="figure-spread" style="white-space: nowrap">(0.3–0.9)</small>' in header
    assert ('<small class="figure-spread" style="white-space: normal">(0–100%; 3 passes: too few to tell)</small>'
            in header)
    css = (Path(__file__).resolve().parents[1] / "assets" / "style.css").read_text()
    assert ".pane-figures { margin-left: auto; display: flex; flex-wrap: wrap;" in css


def test_the_acceptance_by_position_bars_carry_their_wilson_intervals():
    """A trial: the Live tab's "Acceptance by draft position" bars had no error bars, two of them at 1.0 after ~10
    passes. Each bar now carries the 95% Wilson interval of accepted / judged at its position, the legend says what
    the bars and the error bars are, and the hover gives the counts."""
    from app import figures

    passes = [(3, 3)] * 8 + [(3, 1), (3, 0)]  # positions judged: 10, 9, 8; accepted: 9, 8, 8
    spec = _run(passes)
    assert list(spec.position_tried) == [10, 9, 8] and list(spec.position_accepted) == [9, 8, 8]
    intervals = spec.position_intervals()
    assert [i.value for i in intervals] == pytest.approx([0.9, 8 / 9, 1.0])
    assert [i.value for i in intervals] == pytest.approx(spec.per_position_acceptance)
    assert (intervals[0].low, intervals[0].high) == (wilson_interval(9, 10).low, wilson_interval(9, 10).high)
    assert intervals[2].high == 1.0 and intervals[2].low == pytest.approx(8 / (8 + Z95 ** 2))  # 8 of 8: keeps a width
    bars = figures.position_panel(spec, _run([], run="baseline")).traces[0]
    assert bars["type"] == "bar" and bars["y"] == spec.per_position_acceptance
    assert bars["error_y"]["array"] == pytest.approx([i.high - i.value for i in intervals])
    assert bars["error_y"]["arrayminus"] == pytest.approx([i.value - i.low for i in intervals])
    assert bars["error_y"]["arrayminus"][2] == pytest.approx(1.0 - 8 / (8 + Z95 ** 2)) and bars["error_y"]["visible"]
    assert bars["name"] == "accepted ÷ judged at each position<br>error bars: 95% Wilson interval"
    assert all(len(line) <= figures.PHONE_LINE_CHARS for line in figures.visible_lines(bars["name"]))
    assert bars["text"][0] == "9 of 10 judged; 95% 60%–98%" and bars["text"][2] == "8 of 8 judged; 95% 68%–100%"
    assert "%{text}" in bars["hovertemplate"]
    # a position no pass judged (drafted only after a rejection) has no interval and no error bar
    unjudged = _run([(2, 0), (2, 0)])
    assert list(unjudged.position_tried) == [2, 0] and unjudged.position_intervals()[1] is None
    trace = figures.position_panel(unjudged, _run([], run="baseline")).traces[0]
    assert trace["error_y"]["array"][1] == 0.0 and trace["text"][1] == "no pass judged it"
