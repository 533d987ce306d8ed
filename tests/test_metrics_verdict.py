"""Issue 34: one rule reads every measured speedup against 1 (specviz.core.verdict), in Live, Arena, Batching and
Why it works: an interval wholly above 1 is faster, wholly below slower, whatever the machine's load; only one that
straddles 1 is too noisy to tell (or about the same when narrow on a quiet machine), and the number stays."""

from __future__ import annotations

import pytest

from specviz.core.verdict import FASTER, NOISY, NOT_FINDING, SAME, SLOWER, read_speedup

BUSY = "other programs used 74% of the CPUs"


def test_an_interval_above_one_on_a_busy_machine_is_faster_with_its_number():
    v = read_speedup(2.51, 1.48, 3.98, level=0.95, busy=BUSY)
    assert (v.word, v.value, v.low, v.high, v.reason, v.finding) == (FASTER, 2.51, 1.48, 3.98, BUSY, True)
    assert v.headline() == "2.51× faster · 95 % 1.48–3.98× · other programs used 74% of the CPUs"
    assert v.cell() == "2.51× faster (1.48–3.98×)"


def test_an_interval_straddling_one_is_too_noisy_and_keeps_its_number():
    v = read_speedup(1.05, 0.80, 1.40, level=0.95)
    assert (v.word, v.value, v.finding) == (NOISY, 1.05, False)
    assert v.headline() == "too noisy to tell: 1.05× measured · 95 % 0.80–1.40×"
    busy = read_speedup(1.00, 0.97, 1.03, busy=BUSY)  # narrow, but the machine was busy: too noisy
    assert busy.word == NOISY and busy.cell() == "too noisy to tell: 1.00× measured (0.97–1.03×)"
    quiet = read_speedup(1.00, 0.97, 1.03)  # narrow on a quiet machine: a finding, no clear difference
    assert quiet.word == SAME and quiet.finding and quiet.headline() == "1.00× about the same · range 0.97–1.03×"


def test_an_interval_below_one_is_slower_however_wide_and_busy():
    v = read_speedup(0.40, 0.28, 0.55, level=0.95, busy=BUSY)
    assert (v.word, v.finding) == (SLOWER, True)
    assert v.headline().startswith("0.40× the speed, slower · 95 % 0.28–0.55×")


def test_impossible_timings_are_no_finding_whatever_the_interval_and_say_why_in_their_own_words():
    """Seen on a busy machine (issue 34): "too noisy to tell: 2.45× measured (2.27–2.63×), impossible: noise" on an
    interval wholly above 1. Too noisy to tell means an interval across 1 only; impossible timings give their reason."""
    why = "faster than its 2.1 tokens per pass allow"
    v = read_speedup(2.45, 2.27, 2.63, impossible=why, busy="the two baselines drifted 16% apart")
    assert (v.word, v.value, v.finding) == (NOT_FINDING, 2.45, False) and v.reason.startswith(why)
    assert v.cell() == ("2.45× (2.27–2.63×), not a finding: faster than its 2.1 tokens per pass allow; the two "
                        "baselines drifted 16% apart")
    assert v.headline() == ("2.45× · range 2.27–2.63× · not a finding: faster than its 2.1 tokens per pass allow; "
                            "the two baselines drifted 16% apart")
    assert NOISY not in v.cell() and NOISY not in v.headline()
    below = read_speedup(0.90, 0.85, 0.95, impossible="more tokens timed cheaper than one")
    assert below.word == NOT_FINDING and below.why_not() == "not a finding: more tokens timed cheaper than one"
    straddling = read_speedup(1.05, 0.80, 1.40)
    assert straddling.why_not() == "too noisy to tell: its interval straddles 1"


def test_a_point_has_no_spread_and_an_inverted_interval_is_refused():
    assert read_speedup(1.3, 1.3, 1.3).word == FASTER and read_speedup(1.0, 1.0, 1.0).word == SAME
    with pytest.raises(ValueError):
        read_speedup(1.0, 1.2, 0.9)


def test_a_live_speedup_above_its_tokens_per_pass_is_not_a_finding():
    from app.render.stats import verdict_card
    from specviz.measure.stats import above_possible, judge_speedup

    # the new-user trial's run on a loaded machine: 3.1 tokens per pass, the baseline's steps slowed ~5x
    spec_ms, spec_tokens = [100.0] * 20, [3] * 20
    base_ms, base_tokens = [180.0] * 60, [1] * 60
    judged = above_possible(judge_speedup(spec_ms, spec_tokens, base_ms, base_tokens), 3.1)
    assert judged.value == pytest.approx(5.4) and judged.verdict == "not a finding" and not judged.finding
    assert judged.reason == "faster than its 3.1 tokens per pass allow"
    assert judged.reading.word == NOT_FINDING and "not a finding" in judged.describe()
    card = verdict_card(judged)  # the words lead and the number is small (a second trial: "6.75×" was the largest
    # text on the page), as the end-to-end card beside it says "no reading (3.41× measured)"; calm words (a fourth
    # trial read "not a finding" in large type as alarming), the Arena's own
    assert "noisy unfounded" in card and '<small class="sv-verdict-figure">(5.40× measured)</small>' in card
    assert card.index('<span class="sv-verdict-word">no reading</span>') < card.index("(5.40× measured)")
    assert "not a finding</span>" not in card
    # and says what to do (a third trial met the words alone)
    assert "the machine&#x27;s speed changed during the run: run again to measure</div>" in card
    fine = above_possible(judge_speedup(spec_ms, spec_tokens, [100.0] * 60, base_tokens), 3.1)  # 3.0x at 3.1 tokens per pass
    assert fine.verdict == "faster" and fine.reason is None


def test_a_faster_headline_on_a_busy_machine_warns_in_its_own_line():
    """A trial read a large green "2.12× faster" and missed "other programs used 60% of the CPUs" in small print."""
    from app.render.stats import verdict_card
    from specviz.measure.stats import judge_speedup

    spec_ms, spec_tokens, base_ms, base_tokens = [100.0] * 20, [3] * 20, [60.0] * 60, [1] * 60
    busy = judge_speedup(spec_ms, spec_tokens, base_ms, base_tokens, disturbed="other programs used 60% of the CPUs")
    card = verdict_card(busy)
    assert busy.verdict == "faster" and busy.value == pytest.approx(1.8)
    assert 'class="card hero good busy sv-verdict"' in card
    assert ('<div class="sv-verdict-busy">⚠ measured on a busy machine (other programs used 60% of the CPUs), which '
            'flatters speculation: on a quiet machine the gain may be smaller</div>') in card
    shown = card.split("<details")[0]  # the warning line and the hover title, not the interval's line too
    assert shown.count("other programs used 60%") == 2
    quiet = verdict_card(judge_speedup(spec_ms, spec_tokens, base_ms, base_tokens))
    assert "busy" not in quiet and 'class="card hero good sv-verdict"' in quiet
    slower = verdict_card(judge_speedup(spec_ms, [1] * 20, base_ms, base_tokens, disturbed="other programs used 60%"))
    assert "sv-verdict-busy" not in slower  # a loss on a busy machine is larger on a quiet one: no warning needed


def test_an_interval_end_that_rounds_to_one_shows_which_side_of_one_it_is():
    """0.67–0.997 is wholly below 1 (slower); printed with two decimals it read "0.67–1.00", as if it touched 1."""
    from specviz.core.verdict import format_ratio, format_ratio_ends

    below = read_speedup(0.82, 0.67, 0.997, level=0.95)
    assert below.word == "slower" and below.span() == "95 % 0.67–0.997×"
    across = read_speedup(0.82, 0.67, 1.004, level=0.95)
    assert across.word == "too noisy to tell" and across.span() == "95 % 0.67–1.004×"
    # a trial's Arena read "0.9996×": at most three decimals, the nearest such figure on the value's side of 1
    assert read_speedup(0.997, 0.99, 0.9996).headline() == "0.997× the speed, slower · range 0.99–0.999×"
    assert read_speedup(1.02, 1.0003, 1.05).cell() == "1.02× faster (1.001–1.05×)"
    assert format_ratio(1.0) == "1.00" and format_ratio(0.82) == "0.82" and format_ratio(0.999999) == "0.999"
    assert format_ratio(0.9996) == "0.999" and format_ratio(1.0004) == "1.001" and format_ratio(0.9994) == "0.999"
    assert format_ratio_ends(1.3, 2.0) == ("1.30", "2.00")


def test_the_live_history_and_the_batching_prediction_show_an_end_near_one_on_its_side():
    from app.batching.sweep_reading import predicted_cell
    from app.records import RunSummary
    from app.render.history import history_speedup

    assert predicted_cell({"predicted": 0.9, "predicted_low": 0.8, "predicted_high": 0.997}) == "0.90 (0.80–0.997)"
    fields = {f: None for f in RunSummary.__dataclass_fields__}
    row = RunSummary(**{**fields, "speedup": 0.9, "speedup_interval": (0.8, 0.996)})
    assert history_speedup(row) == "0.90× (0.80–0.996)"


def test_the_history_says_no_reading_where_the_timings_cannot_be_true():
    """The run history's muted cell uses the Live card's calm words: "3.41× (no reading)", the reason on hover."""
    from app.records import RunSummary
    from app.render.history import history_speedup

    row = RunSummary(speedup=None, speedup_note="not a finding", speedup_measured=3.41,
                     speedup_reason="faster than its 2.1 tokens per pass allow")
    cell = history_speedup(row)
    assert ">3.41× (no reading)</span>" in cell and "not a finding" not in cell
    assert 'title="3.41× measured, no reading: faster than its 2.1 tokens per pass allow"' in cell
