"""Verification math on hand-written probability tables (no model)."""

import pytest
import torch

from specviz.core.verify import (
    SamplingConfig,
    process_logits,
    residual_distribution,
    verify_greedy,
    verify_sampling,
)


def _gen(seed=0):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def test_greedy_accepts_matching_prefix_then_recovers():
    logits = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0]])
    v = verify_greedy([1, 1], logits)
    assert (v.num_accepted, v.next_id, v.next_kind) == (1, 2, "recovered")


def test_greedy_all_accepted_gives_bonus():
    logits = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0]])
    v = verify_greedy([1, 2], logits)
    assert (v.num_accepted, v.next_id, v.next_kind) == (2, 0, "bonus")


def test_greedy_no_draft_is_plain_target_token():
    v = verify_greedy([], torch.tensor([[0.0, 1.0]]))
    assert (v.num_accepted, v.next_id, v.next_kind) == (0, 1, "target")


def test_zero_target_probability_is_always_rejected():
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    draft = torch.tensor([[1.0, 0.0]])
    for seed in range(200):
        v = verify_sampling([0], draft, target, _gen(seed))
        assert v.num_accepted == 0 and v.next_id == 1 and v.next_kind == "recovered"


def test_all_accepted_gives_bonus_from_last_row():
    target = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    v = verify_sampling([1, 0], None, target, _gen())
    assert (v.num_accepted, v.next_id, v.next_kind) == (2, 1, "bonus")
    assert len(v.uniforms) == 2


def test_two_token_table_emits_target_frequencies():
    """Draft [0.8, 0.2], target [0.6, 0.4]: the first emitted token must follow [0.6, 0.4]."""
    draft = torch.tensor([0.8, 0.2])
    target = torch.tensor([[0.6, 0.4], [0.5, 0.5]])
    g = _gen(1)
    n = 20000
    counts = [0, 0]
    for _ in range(n):
        token = int(torch.multinomial(draft, 1, generator=g))
        v = verify_sampling([token], draft[None], target, g)
        first = token if v.num_accepted == 1 else v.next_id
        counts[first] += 1
    freq = counts[1] / n
    assert abs(freq - 0.4) < 4 * (0.24 / n) ** 0.5  # within 4 standard errors


def test_acceptance_probability_is_target_over_draft():
    """target 0.3 with draft 0.6 is accepted about half the time."""
    draft = torch.tensor([[0.6, 0.4]])
    target = torch.tensor([[0.3, 0.7], [0.5, 0.5]])
    g = _gen(2)
    n = 10000
    accepted = sum(verify_sampling([0], draft, target, g).num_accepted for _ in range(n))
    assert abs(accepted / n - 0.5) < 4 * (0.25 / n) ** 0.5


def test_recovered_token_never_where_target_le_draft():
    draft = torch.tensor([[0.5, 0.3, 0.2, 0.0]])
    target = torch.tensor([[0.2, 0.3, 0.1, 0.4], [0.25, 0.25, 0.25, 0.25]])
    g = _gen(3)
    for _ in range(2000):
        token = int(torch.multinomial(draft[0], 1, generator=g))
        v = verify_sampling([token], draft, target, g)
        if v.num_accepted == 0:
            assert v.next_id == 3  # the only token with target > draft


def test_residual_without_mass_has_no_nan():
    row = torch.tensor([0.25, 0.75])
    out = residual_distribution(row, row.clone())
    assert torch.isfinite(out).all() and torch.allclose(out, row)


def test_process_logits_top_k_top_p_and_temperature():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    p = process_logits(logits, SamplingConfig(temperature=1.0, top_k=2))
    assert torch.allclose(p, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    p = process_logits(logits, SamplingConfig(temperature=1.0, top_p=0.9))
    assert p[0, 3] == 0.0 and p[0, 2] > 0.0 and torch.isclose(p.sum(), torch.tensor(1.0))
    p = process_logits(logits, SamplingConfig(temperature=1.0, top_p=0.5))
    assert torch.equal(p, torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    hot = process_logits(logits, SamplingConfig(temperature=2.0))
    assert hot[0, 3] > 0.05  # flatter than the original


def test_draft_outside_target_top_k_is_always_rejected():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]]))
    target = process_logits(logits, SamplingConfig(temperature=1.0, top_k=2))
    for seed in range(100):
        v = verify_sampling([3], None, target, _gen(seed))
        assert v.num_accepted == 0 and v.next_id in (0, 1)


@pytest.mark.parametrize("kwargs", [dict(temperature=-1.0), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1)])
def test_sampling_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        SamplingConfig(**kwargs)
