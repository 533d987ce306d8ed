"""The Arena's "Poorly vs better matched draft" vignette (app/arena/matching.py): the preset ticks the early exit
and the distilled draft at k = 4 on one short category, greedy; after a run of both, one sentence compares them from
the measured rows (made here by the arena's own row builder from hand-made counts and timings: no model runs), and
says one is accepted more often only when the intervals of the two rates do not overlap: over the rows' passes
(resampled whole) where the rows keep per-pass counts, the Wilson interval of their counts where they do not."""

from __future__ import annotations

import html
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import arena as arena_tab  # noqa: E402
from app.arena import matching  # noqa: E402
from app.arena.tables import OVER_COUNTS, OVER_PASSES, share_basis, share_cell, share_interval  # noqa: E402
from specviz.analysis.arena import variants  # noqa: E402
from specviz.analysis.arena_rows import ArenaResult, Measured, _counts, make_row, pool, summarize  # noqa: E402
from specviz.core.counters import Counters  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402
from specviz.measure.stats import wilson_interval  # noqa: E402
from specviz.core.engine import GenerationConfig  # noqa: E402

# (passes, drafted, accepted, ms per token) of each drafter's run: 10 tokens after a 5 ms prefill, 11 in all
POOR_RUN = (8, 32, 2, 200.0)  # 1.25 tokens per pass, acceptance 2 / 32
WELL_RUN = (5, 20, 12, 75.0)  # 2.00 tokens per pass, acceptance 12 / 20


def _result(monkeypatch, baseline_ms: list[float], poor=POOR_RUN, well=WELL_RUN,
            drafters=("early-exit", "distilled")) -> ArenaResult:
    """One prompt raced by the arena's own loop (:func:`specviz.analysis.arena._measure_prompt`, baseline runs of
    ``baseline_ms`` ms per token in order B, early exit, B, distilled, B) with ``measure_run`` replaced by
    hand-made counts, and its rows made and pooled by the arena's row builder."""
    import specviz.analysis.arena as arena
    from specviz.analysis.prompts import Prompt

    times = iter(baseline_ms)
    runs = {"early-exit": poor, "distilled": well}

    def fake_run(target, drafter, ids, config, stop):
        if drafter is None:
            ms = next(times)
            return Measured(Counters(runs=1, passes=10, emitted=10, generated=11, prefill_ms=5.0, verify_ms=10 * ms),
                            (1, 2, 3))
        if len(runs[drafter]) == 2:  # (accepted per pass of 4 drafted, ms per token): a run that keeps its passes
            return Measured(_with_passes(*runs[drafter]), (1, 2, 3))
        passes, drafted, accepted, ms = runs[drafter]
        return Measured(Counters(runs=1, passes=passes, emitted=10, generated=11, drafted=drafted, accepted=accepted,
                                 rejections=passes - 1, prefill_ms=5.0, verify_ms=10 * ms), (1, 2, 3))

    monkeypatch.setattr(arena, "measure_run", fake_run)
    methods = variants(list(drafters), [4])
    session = arena._Session(None, GenerationConfig(), lambda v: None if v.drafter == "none" else v.drafter,
                             lambda: False, lambda _: None)
    measured = arena._measure_prompt(session, methods, 0, Prompt("qa-1", "qa", "x"), [1])
    rows = [make_row("prompt", "qa", "qa-1", v, _counts(*measured[v][:2], True, *measured[v][2:])) for v in methods]
    return ArenaResult(rows=rows, summary=summarize(rows, methods), variants=methods)


def _with_passes(accepted: list[int], ms: float, k: int = 4) -> RunStats:
    """A run's statistics with its per-pass counts, as the arena's runs keep them: ``k`` drafted per pass, the given
    accepted (a pass that accepted fewer than ``k`` had one rejection), 10 tokens after a 5 ms prefill."""
    rejections = [int(a < k) for a in accepted]
    return RunStats(runs=1, passes=len(accepted), emitted=10, generated=11, drafted=k * len(accepted),
                    accepted=sum(accepted), rejections=sum(rejections), prefill_ms=5.0, verify_ms=10 * ms,
                    pass_drafted=[k] * len(accepted), pass_accepted=list(accepted), pass_rejections=rejections)


def _pooled(result: ArenaResult, drafter: str) -> dict:
    return next(r for r in result.summary if r["level"] == "overall" and r["drafter"] == drafter)


def test_the_interval_is_over_passes_wider_than_wilson_when_passes_are_all_or_nothing():
    """Six passes of 4 drafted, each accepting all or none: 12 of 24. A resample of the passes holds a Binomial(6,
    1/2) count of full ones, so its 2.5% and 97.5% points are 1/6 and 5/6; Wilson, taking 24 independent tokens,
    says 0.31–0.69. The same counts without passes (a row saved before they were kept) get Wilson."""
    row = {"acceptance_rate": 0.5, "accepted": 12, "drafted": 24, "rejections": 3,
           "pass_accepted": [4, 0, 4, 0, 4, 0], "pass_drafted": [4] * 6, "pass_rejections": [0, 1] * 3}
    interval, wilson = share_interval(row, "acceptance_rate"), wilson_interval(12, 24)
    assert (interval.value, interval.low, interval.high) == (0.5, pytest.approx(1 / 6), pytest.approx(5 / 6))
    assert (round(wilson.low, 2), round(wilson.high, 2)) == (0.31, 0.69)
    assert interval.high - interval.low > 1.7 * (wilson.high - wilson.low)
    assert share_basis(row, "acceptance_rate") == OVER_PASSES and share_cell(row, "acceptance_rate") == \
        "50% (17–83%)"
    old = {key: row[key] for key in ("acceptance_rate", "accepted", "drafted")}
    assert share_interval(old, "acceptance_rate") == wilson and share_basis(old, "acceptance_rate") == OVER_COUNTS
    assert share_cell(old, "acceptance_rate") == "50% (31–69%)"
    # per-pass counts that are not the row's own (edited by hand) are not trusted: Wilson
    assert share_interval(row | {"pass_accepted": [4, 0, 4, 0, 4, 4]}, "acceptance_rate") == wilson
    # alpha, out of the judged positions per pass (accepted + rejections): 12 of 15 over the same passes
    alpha = share_interval(row | {"alpha": 0.8}, "alpha")
    assert (round(alpha.low, 3), round(alpha.high, 3)) == (0.444, 0.952) and alpha.low < wilson_interval(12, 15).low


def test_the_interval_is_about_wilson_for_independent_tokens():
    """k = 1: every pass drafts one token, so the passes are the tokens; 20 of 40, alternating: the interval over
    passes is 0.35–0.65 where Wilson is 0.352–0.648 (within 2%). With no spread between passes (each accepting 2 of
    4) the bootstrap draws one value: Wilson's width is kept."""
    accepted = [1, 0] * 20
    row = {"acceptance_rate": 0.5, "accepted": 20, "drafted": 40, "pass_accepted": accepted,
           "pass_drafted": [1] * 40, "pass_rejections": [1 - a for a in accepted]}
    interval, wilson = share_interval(row, "acceptance_rate"), wilson_interval(20, 40)
    assert (interval.low, interval.high) == (pytest.approx(0.35), pytest.approx(0.65))
    assert 1.0 <= (interval.high - interval.low) / (wilson.high - wilson.low) < 1.02
    even = {"acceptance_rate": 0.5, "accepted": 20, "drafted": 40, "pass_accepted": [2] * 10,
            "pass_drafted": [4] * 10, "pass_rejections": [1] * 10}
    assert share_interval(even, "acceptance_rate") == wilson


def test_pooled_rows_keep_their_prompts_passes_one_after_another(monkeypatch):
    """The arena's own row builder keeps each method's per-pass counts; a pooled row holds them all, and the
    standard-decoding row, which drafts nothing, none."""
    result = _result(monkeypatch, [100.0, 110.0, 100.0], poor=([1, 0, 0, 0, 1, 0, 0, 0], 200.0),
                     well=([4, 4, 4, 0, 0], 75.0))
    poor, well = _pooled(result, "early-exit"), _pooled(result, "distilled")
    assert well["pass_accepted"] == [4, 4, 4, 0, 0] and well["pass_drafted"] == [4] * 5
    assert well["pass_rejections"] == [0, 0, 0, 1, 1] and (well["accepted"], well["drafted"]) == (12, 20)
    assert _pooled(result, "none")["pass_accepted"] is None
    twice = pool("overall", "all", [poor, poor], poor_variant := result.variants[1])
    assert twice["pass_accepted"] == poor["pass_accepted"] * 2 and poor_variant.drafter == "early-exit"
    assert pool("overall", "all", [poor, poor | {"pass_accepted": None}], poor_variant)["pass_accepted"] is None
    # the chart's error bars say what they are: over the passes here
    figure = arena_tab.arena_figure(result.summary)
    bars = {t.name: t for t in figure.data if t.yaxis == "y2"}
    assert bars["distilled k=4"].text[0] == "(20–100%, 95% interval over its passes)"
    notes = [a.text for a in figure.layout.annotations]
    assert any("error bars: 95% interval over its passes" in n for n in notes) and not any("Wilson" in n for n in notes)


def test_the_sentence_claims_no_difference_that_the_passes_do_not_support(monkeypatch):
    """2 of 32 against 12 of 20: Wilson's intervals (0.02–0.20, 0.39–0.78) are apart, but the distilled draft's 12
    came in three passes that accepted everything and two that accepted nothing: over its five passes the rate lies
    in 0.20–1.00, which overlaps the early exit's, so the sentence makes no claim. With four times as many such
    passes (48 of 80) the intervals separate again, and it does."""
    result = _result(monkeypatch, [100.0, 110.0, 100.0], poor=([1, 0, 0, 0, 1, 0, 0, 0], 200.0),
                     well=([4, 4, 4, 0, 0], 75.0))
    poor, well = _pooled(result, "early-exit"), _pooled(result, "distilled")
    assert wilson_interval(12, 20).low > wilson_interval(2, 32).high  # Wilson alone would claim it
    assert share_interval(well, "acceptance_rate").low <= share_interval(poor, "acceptance_rate").high
    assert share_cell(well, "acceptance_rate") == "60% (20–100%)"
    said = matching.sentence(result.summary)
    assert "the two rates' intervals overlap" in said and "accepted more often" not in said
    more = _result(monkeypatch, [100.0, 110.0, 100.0], poor=([1, 0, 0, 0, 1, 0, 0, 0], 200.0),
                   well=([4, 4, 4, 0, 0] * 4, 75.0))
    a, b = (share_interval(_pooled(more, d), "acceptance_rate") for d in ("early-exit", "distilled"))
    assert b.low > a.high
    assert "The distilled draft, the smaller model, is accepted more often" in matching.sentence(more.summary)


def test_the_sentence_compares_the_two_drafters_from_their_rows(monkeypatch):
    """Baselines of 100, 110, 100 ms per token: the early exit (200) sits between 100 and 110, the distilled draft
    (75) between 110 and 100; every figure comes from the pooled "all" rows."""
    result = _result(monkeypatch, [100.0, 110.0, 100.0])
    poor, well = (next(r for r in result.summary if r["level"] == "overall" and r["drafter"] == d)
                  for d in ("early-exit", "distilled"))
    assert (poor["acceptance_rate"], poor["tokens_per_pass"]) == (pytest.approx(2 / 32), pytest.approx(1.25))
    assert (well["acceptance_rate"], well["tokens_per_pass"]) == (pytest.approx(12 / 20), pytest.approx(2.0))
    said = matching.sentence(result.summary)
    # Wilson 95%: 2 of 32 -> 0.017–0.20, 12 of 20 -> 0.39–0.78: apart, so the claim is made
    assert said == (
        "Poorly vs better matched draft (k = 4, 1 prompt): early exit (the target's first layers, untrained): "
        "acceptance rate 6% (2–20%), 1.25 tokens per pass; distilled draft (a few layers trained on the "
        "target's outputs): acceptance rate 60% (39–78%), 2.00 tokens per pass. "
        "Speedup, decode: early exit 0.53× the speed, slower (0.47–0.57×), distilled draft 1.40× faster "
        "(1.25–1.52×). "
        "The distilled draft, the smaller model, is accepted more often (the two rates' intervals do not overlap): "
        "it is better matched to the target, so matching, not size, decides acceptance. "
        "Cost decides whether a draft pays: the early exit does not pay; the distilled draft pays.")
    # the speedups and the acceptance rates are the table's own cells (one reading of a row)
    for row in (poor, well):
        assert arena_tab.speedup_cell(row, "decode_speedup") in said
        assert f"acceptance rate {share_cell(row, 'acceptance_rate')}," in said
    summary = arena_tab.table([poor, well])
    column = summary["headers"].index("Acceptance")
    assert [line[column] for line in summary["data"]] == ["6% (2–20%)", "60% (39–78%)"]
    alphas = [line[summary["headers"].index("α")] for line in summary["data"]]
    assert alphas == [share_cell(row, "alpha") for row in (poor, well)] and all("(" in a for a in alphas)


def test_too_noisy_speedups_are_said_so_not_read(monkeypatch):
    """A middle baseline 3x slower (the machine was busy): each drafter's ratios against the standard runs of the
    prompt (widened by their spread) lie on both sides of 1, so neither pays nor fails to pay; the acceptance
    still reads."""
    result = _result(monkeypatch, [100.0, 300.0, 100.0], well=(5, 20, 12, 150.0))
    said = matching.sentence(result.summary)
    assert "Speedup, decode: early exit too noisy to tell: 1.00× measured (0.28–2.50×), baselines drifted 200% " \
           "apart, distilled draft too noisy to tell: 1.33× measured (0.37–3.33×), baselines drifted 200% apart." in said
    assert said.endswith(
        "Cost decides whether a draft pays: for the early exit, too noisy to tell: its ratios on both sides of 1; "
        "baselines drifted 200% apart; for the distilled draft, too noisy to tell: its ratios on both sides of 1; "
        "baselines drifted 200% apart.")
    assert "matching, not size, decides acceptance" in said
    assert " pays" not in said.replace("whether a draft pays", "")


def test_overlapping_intervals_make_no_claim(monkeypatch):
    """2 of 32 (0.017–0.20) against 5 of 20 (0.11–0.47): the rates differ, their intervals overlap, so the sentence
    says the difference is too small to tell, and that both are mostly rejected."""
    result = _result(monkeypatch, [100.0, 110.0, 100.0], well=(5, 20, 5, 75.0))
    said = matching.sentence(result.summary)
    assert "acceptance rate 25% (11–47%), 2.00 tokens per pass." in said
    assert ("The difference in acceptance is too small to tell on this run: the two rates' intervals overlap. "
            "Both are mostly rejected: 6% of the early exit's drafted tokens accepted against 25% of the distilled "
            "draft's. Cost decides") in said
    assert "accepted more often" not in said and "better matched" not in said.replace("Poorly vs better matched", "")


def test_apart_but_both_mostly_rejected_says_both(monkeypatch):
    """1 of 78 (0.002–0.07) against 12 of 40 (0.18–0.45): apart, so better matched, and yet both mostly rejected."""
    result = _result(monkeypatch, [100.0, 110.0, 100.0], poor=(8, 78, 1, 200.0), well=(5, 40, 12, 75.0))
    said = matching.sentence(result.summary)
    assert "acceptance rate 1% (0–7%)" in said and "acceptance rate 30% (18–45%)" in said
    assert ("is accepted more often (the two rates' intervals do not overlap): it is better matched to the target, "
            "so matching, not size, decides acceptance. Both are mostly rejected: 1% of the early exit's drafted "
            "tokens accepted against 30% of the distilled draft's.") in said


def test_the_sentence_says_when_the_early_exit_was_accepted_more(monkeypatch):
    result = _result(monkeypatch, [100.0, 110.0, 100.0], poor=(8, 32, 20, 200.0), well=(8, 32, 1, 75.0))
    said = matching.sentence(result.summary)
    assert "acceptance rate 3% (1–16%), 1.25 tokens per pass." in said
    assert ("Here the early exit is accepted more often (the two rates' intervals do not overlap), so this run does "
            "not show what training on the target's outputs buys.") in said
    assert "mostly rejected" not in said  # 20 of 32 of the early exit's were accepted


def test_no_sentence_without_both_drafters(monkeypatch):
    result = _result(monkeypatch, [100.0, 110.0], drafters=("early-exit",))
    assert matching.sentence(result.summary) is None
    assert matching.sentence([]) is None
    status = arena_tab._done_status(result, 3.0)
    assert "Poorly vs better" not in status


def test_the_status_of_a_finished_run_carries_the_sentence(monkeypatch):
    result = _result(monkeypatch, [100.0, 110.0, 100.0])
    status = arena_tab._done_status(result, 3.0, notes=["another note"])
    said = html.escape(matching.sentence(result.summary))
    assert said in status and status.index(said) < status.index("another note")  # the comparison comes first


def test_the_preset_ticks_the_early_exit_and_the_distilled_draft_at_k_4_greedy():
    values = dict(zip(matching.PRESET_OUTPUTS, matching.chosen()))
    assert values["drafters"] == ["early-exit", "distilled"] and values["ks"] == ["4"]
    assert (values["source"], values["category"], values["temperature"]) == ("category", "qa", 0.0)
    assert "Run arena" in values["status"] and "status-info" in values["status"]
    assert "the time left follows once the first prompt is measured" in values["status"]  # an estimate, or none
    # every value is one the controls offer
    assert set(values["drafters"]) <= {key for _, key in arena_tab.drafter_choices()}
    assert set(values["ks"]) <= set(arena_tab.K_CHOICES) and values["category"] in arena_tab.categories()
    # and the Run button accepts them: the suite's qa prompts, both drafters, k = 4, greedy
    s = arena_tab.parse_inputs(arena_tab.ArenaInputs(values["drafters"], values["ks"], values["source"], "",
                                                     values["category"], 48, "embedded", "", 0,
                                                     values["temperature"], 0, True))
    assert s["drafters"] == ["early-exit", "distilled"] and s["ks"] == ["4"] and s["temperature"] == 0.0
    assert {p["category"] for p in s["prompts"]} == {"qa"} and len(s["prompts"]) == 6
    assert matching.preset(["chat", "math"])["category"] == "chat"  # a suite without qa: its first category
    with pytest.raises(ValueError):
        matching.preset([])


def test_the_acceptance_chart_carries_the_same_intervals(monkeypatch):
    """The acceptance panel's bars have error bars to the ends of the Wilson interval of each row's counts, the
    same interval the table's cell and the sentence give."""
    result = _result(monkeypatch, [100.0, 110.0, 100.0])
    figure = arena_tab.arena_figure(result.summary)
    bars = {t.name: t for t in figure.data if t.yaxis == "y2"}  # the second panel: acceptance
    assert set(bars) == {"early-exit k=4", "distilled k=4"}  # standard decoding drafts nothing
    for row in (r for r in result.summary if r["drafter"] in ("early-exit", "distilled")):
        trace, interval = bars[row["variant"]], share_interval(row, "acceptance_rate")
        assert trace.error_y.array[0] == pytest.approx(interval.high - row["acceptance_rate"])
        assert trace.error_y.arrayminus[0] == pytest.approx(row["acceptance_rate"] - interval.low)
        assert "95% Wilson interval of its counts" in trace.text[0]
    assert any("95% Wilson interval of its counts" in a.text for a in figure.layout.annotations)
