"""Batched decoding (specviz.core.engine.generate_batch): rows of different lengths, ragged acceptance, rows that
finish at different passes, caches equal to a fresh prefill, and the sampling law per row."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

from specviz.core.drafting import Draft
from specviz.core.engine import GenerationConfig, collect, generate_batch, standard_generate
from specviz.core.events import BatchStep, PassEvent
from specviz.core.kv import forward_logits, new_cache
from specviz.core.verify import SamplingConfig, process_logits
from specviz.drafters import ModelDrafter, NgramDrafter


def _prompts(tok) -> list[list[int]]:
    normal = tok.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)
    long = tok.encode(" ".join(["the river runs past old stone bridges and quiet farms"] * 20),
                      add_special_tokens=False)[:200]
    return [normal[:1], normal, long]


def _rows(events) -> dict[int, list[PassEvent]]:
    out: dict[int, list[PassEvent]] = {}
    for event in events:
        if isinstance(event, PassEvent):
            out.setdefault(event.row, []).append(event)
    return out


def _single(target, prompt, config):
    return collect(standard_generate(target, prompt, config), target.tokenizer, prompt).token_ids


@pytest.mark.parametrize("drafter", [None, "ngram", "model"])
def test_each_row_equals_its_single_prompt_decoding(tiny_target, tiny_draft, drafter):
    prompts = _prompts(tiny_target.tokenizer)
    config = GenerationConfig(max_new_tokens=24, k=4)
    make = {None: lambda: None, "ngram": NgramDrafter, "model": lambda: ModelDrafter(tiny_draft.model, "d")}[drafter]
    drafters = None if drafter is None else [make() for _ in prompts]
    rows = _rows(generate_batch(tiny_target, prompts, config, drafters=drafters))
    for r, prompt in enumerate(prompts):
        ids = tuple(t for e in rows[r] for t in e.emitted_ids)
        assert ids == _single(tiny_target, prompt, config), (drafter, r, len(prompt))
        assert rows[r][-1].finish_reason == "length" and all(e.row == r for e in rows[r])


class _Wrong:
    """Drafts k copies of a token the tiny target never picks first (rejected at once, nearly always)."""

    needs_hidden = False
    cache_len = None
    name = "wrong"

    def reset(self, prompt_ids):
        pass

    def propose(self, ctx):
        return Draft([ctx.vocab_size - 1] * ctx.k, [1.0] * ctx.k)

    def commit(self, committed_ids, num_accepted):
        pass


def test_ragged_acceptance_in_one_pass(tiny_target):
    prompts = _prompts(tiny_target.tokenizer)[1:]
    config = GenerationConfig(max_new_tokens=20, k=3)
    events = list(generate_batch(tiny_target, prompts, config,
                                 drafters=[ModelDrafter(tiny_target.model, "oracle"), _Wrong()]))
    by_pass: dict[int, dict[int, int]] = {}
    for event in events:
        if isinstance(event, PassEvent) and event.kind == "pass":
            by_pass.setdefault(event.index, {})[event.row] = event.num_accepted
    assert any(rows.get(0) == 3 and rows.get(1) == 0 for rows in by_pass.values())
    steps = [e for e in events if isinstance(e, BatchStep) and e.index > 0]
    assert steps and all(step.new_tokens == 4 and step.rows == 2 for step in steps[:3])
    rows = _rows(events)
    for r, prompt in enumerate(prompts):
        assert tuple(t for e in rows[r] for t in e.emitted_ids) == _single(tiny_target, prompt, config)


def test_rows_finish_at_different_passes_and_leave_the_batch(tiny_target):
    prompts = _prompts(tiny_target.tokenizer)
    plain = [_single(tiny_target, p, GenerationConfig(max_new_tokens=30)) for p in prompts]
    stop = tiny_target.tokenizer.decode(plain[0][5:6]).strip()  # row 0 stops early; others may stop elsewhere
    assert stop
    config = GenerationConfig(max_new_tokens=30, k=2, stop_strings=(stop,))
    events = list(generate_batch(tiny_target, prompts, config, drafters=[NgramDrafter() for _ in prompts]))
    rows = _rows(events)
    finished_at = {r: evs[-1].index for r, evs in rows.items()}
    assert rows[0][-1].finish_reason == "stop" and len(set(finished_at.values())) >= 2
    widths = [e.rows for e in events if isinstance(e, BatchStep)]
    assert widths[0] == 3 and widths[-1] < 3 and widths == sorted(widths, reverse=True)
    for r, prompt in enumerate(prompts):
        assert tuple(t for e in rows[r] for t in e.emitted_ids) == _single(tiny_target, prompt, config)


def test_caches_equal_a_fresh_prefill_after_rejections(tiny_target, tiny_draft):
    prompts = _prompts(tiny_target.tokenizer)
    config = GenerationConfig(max_new_tokens=16, k=4)
    stream = generate_batch(tiny_target, prompts, config,
                            drafters=[ModelDrafter(tiny_draft.model, "d") for _ in prompts])
    committed = [list(p) for p in prompts]
    checked = 0
    for event in stream:
        if not isinstance(event, PassEvent):
            continue
        committed[event.row].extend(event.emitted_ids)
        batch = stream.gi_frame.f_locals["batch"]  # the engine's own state, read between passes
        if event.index < 2 or event.row != batch.active[-1].row:
            continue  # check once every row of this pass has been seen
        lengths = batch.cache.row_lengths()
        for slot, row in enumerate(batch.active):
            if row.finished:
                continue
            ids = committed[row.row]
            fresh = new_cache(tiny_target.model)
            forward_logits(tiny_target.model, ids[:-1], fresh, 1)
            assert lengths[slot] == len(ids) - 1
            for mine, theirs in zip(batch.cache.layers, fresh.layers):
                got, want = mine.keys[slot, :, :lengths[slot]], theirs.keys[0, :, :lengths[slot]]
                assert torch.allclose(got, want, atol=1e-4 * float(want.abs().max().clamp_min(1.0)))
            checked += 1
        if checked >= 6:
            break
    assert checked >= 6


def _first_two(target, prompt, sampling) -> dict[tuple[int, int], float]:
    def probs(ids):
        return process_logits(forward_logits(target.model, ids, new_cache(target.model), 1), sampling)[0]

    p1, joint = probs(prompt), {}
    for t1 in torch.nonzero(p1 > 1e-6).flatten().tolist():
        p2 = probs(prompt + [t1])
        for t2 in torch.nonzero(p2 > 1e-6).flatten().tolist():
            joint[(t1, t2)] = float(p1[t1] * p2[t2])
    return joint


def test_sampling_follows_the_target_in_every_row(tiny_target, tiny_draft):
    prompts = _prompts(tiny_target.tokenizer)[1:]
    sampling = dict(temperature=1.0)
    expected = [_first_two(tiny_target, p, SamplingConfig(**sampling)) for p in prompts]
    n, counts = 500, [Counter() for _ in prompts]
    for seed in range(n):
        config = GenerationConfig(max_new_tokens=4, k=3, sampling=SamplingConfig(seed=seed * 7, **sampling))
        rows = _rows(generate_batch(tiny_target, prompts, config,
                                    drafters=[ModelDrafter(tiny_draft.model, "d") for _ in prompts]))
        for r, evs in rows.items():
            ids = [t for e in evs for t in e.emitted_ids]
            counts[r][(ids[0], ids[1])] += 1
    for r in range(len(prompts)):
        big = [c for c, p in expected[r].items() if p * n >= 5]
        observed = [counts[r][c] for c in big] + [n - sum(counts[r][c] for c in big)]
        wanted = [expected[r][c] * n for c in big] + [n - sum(expected[r][c] * n for c in big)]
        assert not [c for c in counts[r] if c not in expected[r]]
        assert len(big) >= 3 and chisquare(observed, wanted).pvalue > 1e-3, r
