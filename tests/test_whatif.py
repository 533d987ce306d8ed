"""What-if k (specviz.analysis.whatif) on hand-made events: per-position acceptance, E[tokens per pass] per k, the cost model,
the speedup formula and the recommended k, all against numbers computed by hand."""

from __future__ import annotations

import pytest

from specviz.analysis.whatif import (MIN_PASSES, RESAMPLES, Costs, alpha, analyze, decode_speedup, end_to_end_speedup,
                            expected_tokens, spread, measure_costs, position_counts, predict, predicted_speedup, recommend,
                            tokens_per_pass, tokens_per_s_speedup)
from specviz.core.costs import predicted_speedup_paper
from specviz.core.events import PassEvent, Timings


def _spec(index, k, drafted, n, draft_ms=4.0, verify_ms=20.0, other_ms=2.0, t_end=0.0, generated=0):
    return PassEvent(run="speculative", index=index, kind="pass", k=k, draft_ids=tuple(range(100, 100 + drafted)),
                     accept_mask=tuple(i < n for i in range(drafted)), num_accepted=n, next_id=7,
                     next_kind="bonus" if n == drafted else "recovered", emitted_ids=tuple(range(n + 1)),
                     details=(), text_delta="", timings=Timings(draft_ms, verify_ms, other_ms), t_end_ms=t_end,
                     num_generated=generated)


def _prefill(run, ms=30.0):
    return PassEvent(run=run, index=0, kind="prefill", k=0, draft_ids=(), accept_mask=(), num_accepted=0, next_id=1,
                     next_kind="target", emitted_ids=(1,), details=(), text_delta="", timings=Timings(0.0, ms, 0.0),
                     t_end_ms=ms, num_generated=1)


def _base(index, verify_ms=10.0, other_ms=1.0):
    return PassEvent(run="baseline", index=index, kind="pass", k=0, draft_ids=(), accept_mask=(), num_accepted=0,
                     next_id=1, next_kind="target", emitted_ids=(1,), details=(), text_delta="",
                     timings=Timings(0.0, verify_ms, other_ms), t_end_ms=30.0 + 11.0 * index, num_generated=index + 1)


def spec_run():
    """k_max = 4, five full passes accepting 4, 2, 0, 4, 1 tokens (emitting 5, 3, 1, 5, 2: 16 tokens)."""
    return [_prefill("speculative")] + [_spec(i + 1, 4, 4, n) for i, n in enumerate([4, 2, 0, 4, 1])]


def base_run(tokens=17):
    return [_prefill("baseline")] + [_base(i) for i in range(1, tokens)]


# hand-computed: position i is reached when n >= i-1, accepted when n >= i
# a1 = 4/5 (n>=1: 4,2,4,1), a2 = 3/4 (n>=2: 4,2,4 of n>=1), a3 = 2/3 (n>=3: 4,4 of n>=2), a4 = 2/2
RATES = (0.8, 0.75, 2 / 3, 1.0)
EXPECTED = {0: 1.0, 1: 1.8, 2: 2.4, 3: 2.8, 4: 3.2}  # 1 + 0.8 + 0.6 + 0.4 + 0.4


def test_per_position_acceptance_counts_reached_and_accepted():
    counts = position_counts(spec_run())
    assert counts.reached == (5, 4, 3, 2)
    assert counts.accepted == (4, 3, 2, 2)
    assert counts.rates == pytest.approx(RATES)


def test_expected_tokens_per_pass_for_each_k():
    for k, value in EXPECTED.items():
        assert expected_tokens(RATES, k) == pytest.approx(value)
    # at k_max it equals the run's measured tokens per pass: 16 tokens / 5 passes
    assert expected_tokens(RATES, 4) == pytest.approx(16 / 5)
    events = spec_run() + [_spec(6, 2, 2, 2)]  # a last pass cut to k = 2 by the token limit: left out
    assert tokens_per_pass(events) == pytest.approx(16 / 5) and tokens_per_pass(events, 2) == 3.0
    assert position_counts(events, 4).rates[2:] == pytest.approx(RATES[2:])  # it only reached positions 1-2
    assert tokens_per_pass(events, 3) is None
    with pytest.raises(ValueError):
        expected_tokens(RATES, 5)
    with pytest.raises(ValueError):
        expected_tokens([1.5], 1)


def test_short_proposals_and_budget_limited_passes():
    events = [_spec(1, 4, 2, 2),  # the drafter had only 2 tokens, both accepted: position 3 reached, not accepted
              _spec(2, 2, 2, 1),  # the last pass asked for k = 2 (token budget): positions 3-4 not reached
              _spec(3, 4, 0, 0)]  # no proposal at all: position 1 reached, not accepted
    counts = position_counts(events, 4)
    assert counts.reached == (3, 2, 1, 0)
    assert counts.accepted == (2, 1, 0, 0)
    assert counts.rates == pytest.approx((2 / 3, 0.5, 0.0, 0.0))  # a position no pass reached counts as 0
    assert expected_tokens(counts.rates, 4) == pytest.approx(1 + 2 / 3 + 1 / 3)


def test_costs_from_the_runs_and_the_verify_interpolation():
    costs = measure_costs(spec_run(), base_run())
    assert costs.step_ms == 11.0 and costs.step_forward_ms == 10.0
    assert costs.draft_ms_per_token == 1.0  # 4 ms per pass for 4 tokens
    assert costs.verify_points == ((4, 20.0),)
    assert costs.pass_overhead_ms == 2.0 and costs.prefill_ms == 30.0
    # T_verify: linear from (0, 10 ms) to (4, 20 ms)
    assert [costs.verify_ms(k) for k in (0, 1, 2, 3, 4)] == pytest.approx([10.0, 12.5, 15.0, 17.5, 20.0])
    assert costs.pass_ms(2) == pytest.approx(15.0 + 2 * 1.0 + 2.0)


def test_verify_curve_with_several_points_extrapolates_the_last_slope():
    costs = Costs(step_ms=11.0, step_forward_ms=10.0, draft_ms_per_token=0.0, verify_points=((2, 12.0), (4, 20.0)))
    assert costs.verify_ms(1) == pytest.approx(11.0)
    assert costs.verify_ms(3) == pytest.approx(16.0)
    assert costs.verify_ms(6) == pytest.approx(28.0)  # slope 4 ms per token after m = 4
    flat = Costs(step_ms=11.0, step_forward_ms=10.0, draft_ms_per_token=0.0, verify_points=())
    assert flat.verify_ms(8) == 10.0


def test_speedup_formula_and_recommended_k():
    costs = measure_costs(spec_run(), base_run())
    predictions = predict(RATES, costs, range(1, 5))
    # E[tau](k) * T_step / (T_verify(k) + k T_draft + T_other), by hand:
    hand = {1: 1.8 * 11 / 15.5, 2: 2.4 * 11 / 19.0, 3: 2.8 * 11 / 22.5, 4: 3.2 * 11 / 26.0}
    for p in predictions:
        assert p.expected_tokens == pytest.approx(EXPECTED[p.k])
        assert p.speedup == pytest.approx(hand[p.k])
    assert recommend(predictions).k == 2
    # without overhead it is the design's formula E[tau] * T_step / (T_verify(k) + k * T_draft)
    assert predicted_speedup(2.4, 11.0, 15.0 + 2 * 1.0) == pytest.approx(2.4 * 11 / 17)
    with pytest.raises(ValueError):
        predicted_speedup(2.0, 11.0, 0.0)


def test_recommend_prefers_the_smaller_k_on_a_tie_and_needs_predictions():
    costs = Costs(step_ms=10.0, step_forward_ms=10.0, draft_ms_per_token=0.0, verify_points=((4, 10.0),))
    predictions = predict((1.0, 0.0, 0.0, 0.0), costs, range(1, 5))  # E = 2 for every k >= 1, same pass cost
    assert [p.speedup for p in predictions] == pytest.approx([2.0] * 4)
    assert recommend(predictions).k == 1
    with pytest.raises(ValueError):
        recommend([])


def test_paper_prediction_uses_alpha_and_the_draft_cost_ratio():
    events = spec_run()
    a = alpha(events)
    assert a == pytest.approx(11 / 14)  # 11 accepted, 3 rejections
    costs = measure_costs(events, base_run())
    p = predict(RATES, costs, [3], a)[0]
    assert p.paper_speedup == pytest.approx(predicted_speedup_paper(a, 3, 1.0 / 11.0))


def test_end_to_end_and_measured_speedups():
    costs = measure_costs(spec_run(), base_run())
    # (30 + 16 * 11) / (30 + 16 / 2.4 * 19)
    assert end_to_end_speedup(2.4, costs, 2, 17) == pytest.approx((30 + 16 * 11) / (30 + 16 / 2.4 * 19))
    spec = spec_run()  # 16 tokens after the prefill in 5 passes of 26 ms
    base = base_run()  # 16 tokens after the prefill, 11 ms each
    assert decode_speedup(spec, base) == pytest.approx((16 / 130) / (16 / 176))
    spec[-1] = _spec(5, 4, 4, 1, t_end=160.0, generated=17)
    base[-1] = _base(16)  # t_end 206 ms, 17 tokens
    assert tokens_per_s_speedup(spec, base) == pytest.approx((17 / 160) / (17 / 206))


def test_analyze_puts_it_together_and_refuses_runs_without_drafts():
    result = analyze(spec_run(), base_run(), 4)
    assert result.k_max == 4 and result.rates == pytest.approx(RATES)
    assert result.recommended.k == 2
    assert result.at(3).expected_tokens == pytest.approx(2.8)
    assert result.measured_tokens_per_pass == pytest.approx(3.2)
    assert result.measured_speedup == pytest.approx((16 / 130) / (16 / 176))
    with pytest.raises(ValueError, match="proposed nothing"):
        analyze([_prefill("speculative"), _spec(1, 4, 0, 0)], base_run())
    with pytest.raises(ValueError, match="no pass"):
        analyze([_prefill("speculative")], base_run())
    with pytest.raises(ValueError, match="baseline"):
        measure_costs(spec_run(), [_prefill("baseline")])


def test_spread_bootstraps_the_passes_and_brackets_each_prediction():
    """The bootstrap over the 5 passes: every k's range holds its point prediction, the best-k shares sum to 1,
    the same seed gives the same spread, and 5 passes are too few to tell the k apart."""
    result = analyze(spec_run(), base_run(), 4)
    sp = result.spread
    assert sp is not None and sp.passes == 5 and sp.resamples == RESAMPLES and sp.too_few
    assert len(sp.low) == len(sp.high) == len(sp.best_share) == 4
    for p, lo, hi in zip(result.predictions, sp.low, sp.high):
        assert lo <= p.speedup <= hi
        assert lo < hi  # passes accepting 0..4 tokens: resamples disagree
    assert sum(sp.best_share) == pytest.approx(1.0)
    assert spread(spec_run(), base_run(), 4) == sp
    assert analyze(spec_run(), base_run(), 4, resamples=0).spread is None
    with pytest.raises(ValueError, match="no pass"):
        spread([_prefill("speculative")], base_run())


def test_spread_of_identical_passes_is_a_point_and_enough_passes_are_not_too_few():
    """MIN_PASSES passes that all accept 2 of 4: every resample is the run itself, so each range is the point
    prediction and k = 3 (a_3 = 0: nothing gained past 2) never wins; k = 2 always does."""
    spec = [_prefill("speculative")] + [_spec(i + 1, 4, 4, 2) for i in range(MIN_PASSES)]
    result = analyze(spec, base_run(3 * MIN_PASSES + 1), 4)
    sp = result.spread
    assert not sp.too_few and sp.passes == MIN_PASSES
    assert sp.low == pytest.approx([p.speedup for p in result.predictions])
    assert sp.high == pytest.approx(sp.low)
    assert result.recommended.k == 2 and sp.best_share == pytest.approx((0.0, 1.0, 0.0, 0.0))
    assert not result.best_at_edge


def test_best_at_edge_when_the_largest_k_tried_wins():
    """Every pass accepts all 4: the recommended k is k_max, so a larger k might be faster still."""
    spec = [_prefill("speculative")] + [_spec(i + 1, 4, 4, 4) for i in range(6)]
    result = analyze(spec, base_run(31), 4)
    assert result.recommended.k == 4 and result.best_at_edge
    assert result.spread.best_share == pytest.approx((0.0, 0.0, 0.0, 1.0))


def _spread_as_first_written(spec_events, base_events, k_max, resamples, level=0.8, seed=0):
    """The bootstrap as it was first written (every resample re-measured the baseline and re-counted its passes
    from events; quantiles by hand): the reference the hoisted :func:`spread` must match draw for draw."""
    import random

    def quantile(values, q):
        ordered = sorted(values)
        at = q * (len(ordered) - 1)
        below = int(at)
        above = min(below + 1, len(ordered) - 1)
        return ordered[below] + (ordered[above] - ordered[below]) * (at - below)

    passes = [e for e in spec_events if e.kind == "pass"]
    rng = random.Random(seed)
    speedups, wins = [[] for _ in range(k_max)], [0] * k_max
    for _ in range(resamples):
        drawn = [passes[rng.randrange(len(passes))] for _ in passes]
        predictions = predict(position_counts(drawn, k_max).rates, measure_costs(drawn, base_events),
                              range(1, k_max + 1))
        for p in predictions:
            speedups[p.k - 1].append(p.speedup)
        wins[recommend(predictions).k - 1] += 1
    tail = (1 - level) / 2
    return ([quantile(v, tail) for v in speedups], [quantile(v, 1 - tail) for v in speedups],
            [w / resamples for w in wins])


def test_spread_hoists_the_baseline_and_gives_the_same_figures_as_before():
    """The baseline's costs and each pass's counts are computed once, outside the resamples, and the ranges come
    from np.quantile: the same seed still gives the same figures as the first version, draw for draw."""
    accepted = [4, 2, 0, 4, 1, 3, 0, 2, 4, 1, 2, 3]
    spec = [_prefill("speculative")] + [
        _spec(i + 1, 4, 4 if i % 5 else 3, min(n, 4 if i % 5 else 3), draft_ms=3.0 + i % 3, verify_ms=18.0 + i % 4,
              other_ms=1.5 + (i % 2) * 0.5) for i, n in enumerate(accepted)]
    base = base_run(30)
    sp = spread(spec, base, 4, resamples=150, seed=7)
    low, high, share = _spread_as_first_written(spec, base, 4, 150, seed=7)
    assert sp.low == pytest.approx(low, rel=1e-12) and sp.high == pytest.approx(high, rel=1e-12)
    assert sp.best_share == tuple(share)
    assert spread(spec, base, 4, resamples=150, seed=7) == sp  # pinned: the same seed, the same spread
    assert spread(spec, base, 4, resamples=150, seed=8) != sp
    # the new ranges: E[tau](k) and the measured tokens per pass at k_max bracket the run's own figures
    result = analyze(spec, base, 4)
    for k, p in enumerate(result.predictions):
        assert result.spread.tokens_low[k] <= p.expected_tokens + 1e-9 <= result.spread.tokens_high[k] + 2e-9
    m_low, m_high = result.spread.measured_tokens
    assert m_low <= result.measured_tokens_per_pass <= m_high and m_low < m_high
