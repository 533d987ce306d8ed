"""Lookahead decoding (specviz.drafters.lookahead): exact output over the stress prompts at several (W, N, G), the
one-forward mask against separate forwards of each branch, the pool on a hand-made trajectory, an EOS inside a
winning candidate, budgets of 1..5 tokens, and the sampling law."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

from specviz.cli import main
from specviz.core.drafting import DraftContext
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.kv import forward_logits, forward_logits_features, new_cache
from specviz.core.tree import tree_attention_mask, tree_positions
from specviz.core.verify import SamplingConfig, process_logits
from specviz.drafters.lookahead import LookaheadDrafter
from specviz.measure.run_stats import RunStats


def _stress(tok) -> dict[str, list[int]]:
    normal = tok.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)
    return {"one": normal[:1], "repeated": tok.encode(" the cat sat", add_special_tokens=False) * 30,
            "mixed": tok.encode("Größe 大小 размер — the size, la taille", add_special_tokens=False), "normal": normal}


def _run(target, prompt, config, drafter=None):
    events = standard_generate(target, prompt, config) if drafter is None else \
        speculative_generate(target, drafter, prompt, config)
    return collect(events, target.tokenizer, prompt)


@pytest.mark.parametrize("window, ngram, candidates", [(4, 3, 4), (5, 4, 2), (2, 2, 1), (7, 5, 7)])
def test_greedy_ids_identical_on_the_stress_prompts(tiny_target, window, ngram, candidates):
    config = GenerationConfig(max_new_tokens=40, k=8)
    for label, prompt in _stress(tiny_target.tokenizer).items():
        base = _run(tiny_target, prompt, config)
        spec = _run(tiny_target, prompt, config, LookaheadDrafter(window, ngram, candidates))
        assert spec.token_ids == base.token_ids, (label, window, ngram, candidates)
        passes = [e for e in spec.events if e.kind == "pass" and e.lookahead is not None]
        assert passes and all(e.lookahead.window_tokens <= window * (ngram - 1) for e in passes)
        assert all(len(c) <= ngram - 1 for e in passes for c in e.lookahead.candidates)
        assert all(len(e.lookahead.candidates) <= candidates for e in passes)


def test_repeated_text_fills_the_pool_and_gets_accepted(tiny_target):
    prompt = _stress(tiny_target.tokenizer)["repeated"]
    spec = _run(tiny_target, prompt, GenerationConfig(max_new_tokens=60, k=8), LookaheadDrafter(4, 3, 4))
    stats = RunStats()
    for event in spec.events:
        stats.add(event)
    last = [e for e in spec.events if e.lookahead is not None][-1]
    assert last.lookahead.pool_size > 10
    assert stats.drafted == sum(e.lookahead.candidate_tokens for e in spec.events if e.lookahead is not None
                                and not e.cut_in_drafts) + sum(e.committed_accepted for e in spec.events
                                                               if e.lookahead is not None and e.cut_in_drafts)
    assert stats.window_tokens == sum(e.lookahead.window_tokens for e in spec.events if e.lookahead is not None)


def test_the_one_forward_mask_gives_each_branch_its_own_logits(tiny_target):
    model, tok = tiny_target.model, tiny_target.tokenizer
    prompt = _stress(tok)["normal"]
    drafter = LookaheadDrafter(3, 3, 2)
    drafter.reset(prompt)
    drafter.levels = [[prompt[1], prompt[2], prompt[3]], [prompt[5], prompt[6], prompt[7]]]
    drafter.pool = {prompt[-1]: {(prompt[0], prompt[1]): None, (prompt[2], prompt[4]): None}}
    draft = drafter.propose(DraftContext(prompt, 8, SamplingConfig(), None, vocab_size=tiny_target.vocab_size))
    plan = draft.lookahead
    cache = new_cache(model)
    forward_logits(model, prompt[:-1], cache, 1)
    context = len(prompt) - 1
    together, _ = forward_logits_features(
        model, [prompt[-1]] + draft.token_ids, cache, len(draft.token_ids) + 1,
        attention_mask=tree_attention_mask(draft.parents, context), position_ids=tree_positions(draft.parents, context))

    def alone(ids: list[int]) -> torch.Tensor:  # a separate forward of one path: its last row's logits
        return forward_logits(model, prompt + ids, new_cache(model), 1)[0]

    scale = float(together.abs().max())
    for chain in plan.candidates:  # the verification branch: each candidate as a plain continuation
        for i, node in enumerate(chain):
            path = [draft.token_ids[n] for n in chain[: i + 1]]
            assert torch.allclose(together[1 + node], alone(path), atol=2e-4 * scale)
    for level, nodes in enumerate(plan.window_nodes):  # the lookahead branch: level-0 guesses left, column below
        for column, node in enumerate(nodes):
            path = [draft.token_ids[n] for n in plan.window_nodes[0][:column + 1]]
            path += [draft.token_ids[plan.window_nodes[l][column]] for l in range(1, level + 1)]
            assert torch.allclose(together[1 + node], alone(path), atol=2e-4 * scale)


def test_the_pool_takes_each_column_as_an_ngram():
    drafter = LookaheadDrafter(window=3, ngram=3, candidates=2)
    drafter.reset([1])
    drafter.levels = [[10, 11, 12], [20, 21, 22]]
    assert drafter.advance([30, 31, 32]) == 3
    assert drafter.pool == {10: {(20, 30): None}, 11: {(21, 31): None}, 12: {(22, 32): None}}
    assert drafter.levels == [[20, 21, 22], [30, 31, 32]]
    assert drafter.advance([10, 40, 41]) == 3  # (20, 30, 10), (21, 31, 40), (22, 32, 41)
    assert drafter.pool_size == 6 and list(drafter.pool[20]) == [(30, 10)]
    assert drafter._remember((20, 30, 10)) == 0 and drafter.pool_size == 6  # a known n-gram is not added twice
    for i in range(12):  # a key keeps its most recent n-grams only
        drafter._remember((7, i, i))
    assert list(drafter.pool[7])[-1] == (11, 11) and len(drafter.pool[7]) == 8
    warm = LookaheadDrafter(window=2, ngram=4, candidates=1)
    warm.reset([5])
    assert warm.advance([1, 2]) == 0 and warm.advance([3, 4]) == 0 and len(warm.levels) == 3  # warm-up: no n-grams
    assert warm.advance([6, 7]) == 2


class _Seeded(LookaheadDrafter):
    """A lookahead drafter whose pool starts with given n-grams (kept across the run's reset)."""

    def __init__(self, grams: dict[int, list[tuple[int, ...]]], **sizes):
        self.grams = grams
        super().__init__(**sizes)

    def reset(self, prompt_ids):
        super().reset(prompt_ids)
        for key, grams in self.grams.items():
            for gram in grams:
                self._remember((key,) + tuple(gram))


def test_eos_inside_a_winning_candidate_ends_the_run_where_standard_decoding_does(tiny_target):
    prompt = _stress(tiny_target.tokenizer)["normal"]
    plain = _run(tiny_target, prompt, GenerationConfig(max_new_tokens=12)).token_ids
    at = next(i for i in range(3, 12) if plain[i] not in plain[:i])  # pretend this token is an end-of-sequence id
    target = dataclasses.replace(tiny_target, eos_token_ids=(plain[at],))
    config = GenerationConfig(max_new_tokens=12, k=8)
    base = _run(target, prompt, config)
    assert base.token_ids == plain[:at + 1] and base.finish_reason == "eos"
    drafter = _Seeded({plain[0]: [tuple(plain[1:at + 3])]}, window=2, ngram=at + 3, candidates=1)
    spec = _run(target, prompt, config, drafter)
    assert spec.token_ids == base.token_ids and spec.finish_reason == "eos"
    winner = spec.events[1]  # the first pass verified the seeded candidate: EOS inside its accepted tokens
    assert winner.lookahead.winner == 0 and winner.num_accepted == at + 2 and winner.committed_accepted == at
    assert winner.draft_source == "pool" and winner.cut_in_drafts


@pytest.mark.parametrize("budget", [1, 2, 3, 4, 5])
def test_small_budgets(tiny_target, budget):
    prompt = _stress(tiny_target.tokenizer)["repeated"]
    config = GenerationConfig(max_new_tokens=budget, k=4)
    assert _run(tiny_target, prompt, config, LookaheadDrafter(3, 3, 3)).token_ids == \
        _run(tiny_target, prompt, config).token_ids


def test_sampling_follows_the_target_with_a_pool_candidate(tiny_target):
    prompt = _stress(tiny_target.tokenizer)["normal"]
    sampling = SamplingConfig(temperature=1.0)
    p1 = process_logits(forward_logits(tiny_target.model, prompt, new_cache(tiny_target.model), 1), sampling)[0]
    first = int(p1.argmax())
    joint = {}
    for t1 in torch.nonzero(p1 > 1e-6).flatten().tolist():
        p2 = process_logits(forward_logits(tiny_target.model, prompt + [t1], new_cache(tiny_target.model), 1),
                            sampling)[0]
        for t2 in torch.nonzero(p2 > 1e-6).flatten().tolist():
            joint[(t1, t2)] = float(p1[t1] * p2[t2])
    guess = int(process_logits(forward_logits(tiny_target.model, prompt + [first], new_cache(tiny_target.model),
                                              1), sampling)[0].argmin())
    n, counts, verified = 800, Counter(), 0
    for seed in range(n):
        drafter = _Seeded({t: [(guess, first)] for t in range(tiny_target.vocab_size)}, window=2, ngram=3,
                          candidates=3)
        config = GenerationConfig(max_new_tokens=3, k=2, sampling=dataclasses.replace(sampling, seed=seed))
        events = list(speculative_generate(tiny_target, drafter, prompt, config))
        ids = [t for e in events for t in e.emitted_ids]
        verified += bool(events[1].lookahead and events[1].lookahead.candidates)
        counts[(ids[0], ids[1])] += 1
    assert verified == n  # every second token met a pool candidate (one, as sampling verifies one)
    big = [c for c, p in joint.items() if p * n >= 5]
    observed = [counts[c] for c in big] + [n - sum(counts[c] for c in big)]
    wanted = [joint[c] * n for c in big] + [n - sum(joint[c] * n for c in big)]
    assert not [c for c in counts if c not in joint]
    assert len(big) >= 3 and chisquare(observed, wanted).pvalue > 1e-3


def test_cli_lookahead_flags(tiny_model_dir, capsys):
    code = main(["generate", "--target", str(tiny_model_dir), "--device", "cpu", "--prompt", "the cat sat on the mat",
                 "--drafter", "lookahead", "--window", "3", "--ngram", "3", "--candidates", "2", "--max-new-tokens",
                 "12", "--compare", "--json", "--no-chat-template"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert '"lookahead_window_tokens"' in out and "lookahead (W=3, N=3, G=2)" in err + out
    assert main(["generate", "--prompt", "x", "--drafter", "lookahead", "--ngram", "1"]) == 2


@pytest.mark.parametrize("asked", [dict(k=6), dict(k=1), dict(k=4, adaptive_k=True)])  # k = auto: test_draft_length
def test_lookahead_drafts_n_minus_1_whatever_k_is_asked(tiny_target, asked):
    prompt = tiny_target.tokenizer("one two three one two three one two", add_special_tokens=False)["input_ids"]
    config = GenerationConfig(max_new_tokens=20, **asked)
    events = list(speculative_generate(tiny_target, LookaheadDrafter(3, 4, 2), prompt, config))
    ks = [e.k for e in events if e.kind == "pass"]
    assert ks[0] == 3 and ks == sorted(ks, reverse=True)  # N - 1 every pass, cut only by the budget at the end
    assert collect(iter(events), tiny_target.tokenizer, prompt).token_ids == \
        _run(tiny_target, prompt, config).token_ids
