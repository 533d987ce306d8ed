"""One source for every derived figure: the Live chart's running series end at the stats card's figures exactly (a
tree run and a lookahead run on the tiny target), and the cost model is one interpolator read one way
(specviz.core.costs: ``verify_ms(k)`` is T_verify of k drafted tokens everywhere)."""

from __future__ import annotations

import pytest
from app import figures, render
from specviz.core.costs import Costs, interpolate, pass_ms, predicted_speedup, predicted_speedup_paper
from specviz.core.draft_length import AutoK
from specviz.core.drafting import Draft
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.measure.run_stats import RunStats
from specviz.drafters.lookahead import LookaheadDrafter


def _stats(target, prompt, config, drafter=None) -> RunStats:
    events = standard_generate(target, prompt, config) if drafter is None else \
        speculative_generate(target, drafter, prompt, config)
    stats = RunStats()
    for event in collect(events, target.tokenizer, prompt).events:
        stats.add(event)
    return stats


def _trace(panel, name: str) -> dict:
    return next(t for t in panel.traces if t["name"] == name)


class _TreeOracle:
    """A tree drafter that knows the greedy answer: per pass, the answer's next k tokens as a chain plus a wrong
    sibling at the root; every other pass the chain's last token is wrong. So some passes accept a whole path to a
    leaf (nothing rejected) while verifying more nodes than the path, the case where counting a rejection per pass
    with fewer accepted than verified gave the chart another alpha than the card's."""

    name = "tree oracle"
    needs_hidden = False
    cache_len = None

    def __init__(self, answer: list[int], vocab_size: int) -> None:
        self.answer, self.vocab, self.passes, self.prompt_len = answer, vocab_size, 0, 0

    def reset(self, prompt_ids: list[int]) -> None:
        self.prompt_len, self.passes = len(prompt_ids), 0

    def propose(self, ctx) -> Draft:
        start = len(ctx.committed_ids) - self.prompt_len
        chain = list(self.answer[start:start + ctx.k])
        if not chain:
            return Draft([])
        self.passes += 1
        if self.passes % 2 == 0:
            chain[-1] = (chain[-1] + 1) % self.vocab  # a rejection at the chain's end
        ids = [chain[0], (chain[0] + 1) % self.vocab] + chain[1:]
        parents = [-1, -1] + [0] + list(range(2, len(chain)))  # node 2 continues node 0, then each the one before
        return Draft(ids, [1.0] * len(ids), parents=parents[:len(ids)])

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        pass


def _assert_chart_ends_at_the_card(spec: RunStats, base: RunStats) -> None:
    """Every running line's last point is the card's figure, compared with ==, and the card's text shows it."""
    assert spec.passes >= 2 and spec.accepted > 0 and spec.alpha is not None
    tokens = figures.tokens_per_pass_panel(spec, base)
    expected_line = _trace(tokens, "expected from α")
    assert len(expected_line["y"]) == spec.passes
    assert expected_line["y"][-1] == spec.expected_tokens_per_pass
    assert _trace(tokens, "tokens/pass, running mean")["y"][-1] == spec.tokens_per_pass
    assert _trace(figures.acceptance_panel(spec, base), "acceptance, running")["y"][-1] == spec.acceptance_rate
    assert spec.running_alpha[-1] == spec.alpha
    assert _trace(figures.position_panel(spec, base), "α (all positions)")["y"][-1] == spec.alpha
    card = render.expected_text(spec)  # the "Tokens per pass" card: "expected from α 0.75, m 5.00: 3.29"
    assert f"α {spec.running_alpha[-1]:.2f}" in card and card.endswith(f": {expected_line['y'][-1]:.2f}")
    # the chart's points before the last are the same properties of the passes so far
    assert all(e is None or 1.0 <= e for e in expected_line["y"])


def test_a_tree_runs_chart_ends_at_the_card(tiny_target):
    prompt = tiny_target.tokenizer.encode("the cat sat on the mat and the dog", add_special_tokens=False)
    config = GenerationConfig(max_new_tokens=24, k=4)
    answer = list(collect(standard_generate(tiny_target, prompt, config), tiny_target.tokenizer, prompt).token_ids)
    spec = _stats(tiny_target, prompt, config, _TreeOracle(answer, tiny_target.vocab_size))
    base = _stats(tiny_target, prompt, config)
    assert spec.tree_passes > 0 and spec.tree_nodes > spec.accepted  # nodes verified outnumber the accepted path
    _assert_chart_ends_at_the_card(spec, base)


def test_a_lookahead_runs_chart_ends_at_the_card(tiny_target):
    prompt = tiny_target.tokenizer.encode(" the cat sat", add_special_tokens=False) * 30
    config = GenerationConfig(max_new_tokens=60, k=8)
    spec = _stats(tiny_target, prompt, config, LookaheadDrafter(4, 3, 4))
    base = _stats(tiny_target, prompt, config)
    assert spec.window_tokens > 0 and spec.drafted > spec.accepted
    _assert_chart_ends_at_the_card(spec, base)


def test_one_interpolator_reads_every_cost_curve():
    curve = {1: 10.0, 2: 10.5, 4: 11.0, 8: 14.0}
    assert interpolate(curve, 4) == 11.0 and interpolate(curve, 6) == pytest.approx(12.5)
    assert interpolate(curve, 12) == pytest.approx(17.0)  # the last slope, 0.75 ms per token, continues
    assert interpolate({1: 10.0, 2: 12.0, 4: 11.0}, 8) == 11.0  # a falling end segment is noise: read flat
    assert interpolate([(4, 2.0)], 7) == 2.0 and interpolate([(4, 2.0)], 7, lone_slope=0.5) == 3.5
    with pytest.raises(ValueError):
        interpolate({}, 1)


def test_verify_ms_means_k_drafted_tokens_in_costs_and_auto_k():
    # the same forward times (n tokens read -> ms): a pass verifying k drafts reads k + 1 tokens
    curve = {1: 40.0, 3: 50.0, 5: 60.0}
    costs = Costs.from_forward_curve(curve, draft_cost=0.1)
    control = AutoK(k_max=8)
    for n, ms in curve.items():
        control.observe(n - 1, n - 1, 0, verify_ms=ms, forward_tokens=n)
    for k in range(0, 9):
        assert costs.verify_ms(k) == pytest.approx(control.verify_ms(k)), k
    assert costs.verify_ms(0) == costs.step_ms == 40.0 and costs.draft_ms_per_token == pytest.approx(4.0)
    assert costs.pass_ms(2) == pass_ms(50.0, 2, 4.0) == pytest.approx(58.0)
    assert costs.speedup(2.5, 2) == predicted_speedup(2.5, 40.0, costs.pass_ms(2))
    # the paper's prediction is the same model with T_verify = T_step and T_draft = c T_step
    paper = Costs(step_ms=1.0, step_forward_ms=1.0, draft_ms_per_token=0.1, verify_points=((8, 1.0),))
    assert predicted_speedup_paper(0.8, 4, 0.1) == pytest.approx(paper.speedup((1 - 0.8 ** 5) / 0.2, 4))
