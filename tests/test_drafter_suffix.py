"""Suffix decoding (specviz.drafters.suffix): exact greedy output over the stress prompts at k = 1, 4, 8 (cold and with
a store of earlier outputs), the proposal on a hand-made sequence, the store's caps and eviction, a second identical
prompt drafting more than the first, the sampling law, the registry, the bench's cold/warm modes and the pane's mark."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

from app import render
from drain_support import last_output, live_field
from specviz.analysis import bench
from specviz.analysis.bench_report import format_bench
from specviz.analysis.prompts import Prompt
from specviz.cli import main
from specviz.core.drafting import DraftContext
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.kv import forward_logits, new_cache
from specviz.core.verify import SamplingConfig, process_logits
from specviz.drafters.registry import drafter_keys, make_drafter
from specviz.drafters.suffix import SuffixDrafter, SuffixStore, SuffixTrie
from specviz.measure.run_stats import RunStats

# a hand-made sequence: the first 10 tokens are the prompt
SEQUENCE = [1, 2, 3, 4, 5, 1, 2, 3, 6, 1, 2, 3, 4, 5, 7, 8, 1, 2]
PROMPT_LEN = 10


def _stress(tok) -> dict[str, list[int]]:
    normal = tok.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)
    mixed = tok.encode("Größe 大小 размер — the size, la taille", add_special_tokens=False)
    return {"one": normal[:1], "repeated": tok.encode(" the cat sat", add_special_tokens=False) * 30, "mixed": mixed,
            "normal": normal}


def _run(target, prompt, config, drafter=None):
    events = standard_generate(target, prompt, config) if drafter is None else \
        speculative_generate(target, drafter, prompt, config)
    return collect(events, target.tokenizer, prompt)


def _tokens_per_pass(result) -> float:
    stats = RunStats()
    for event in result.events:
        stats.add(event)
    return stats.tokens_per_pass


def _propose(drafter: SuffixDrafter, committed: list[int], k: int, vocab_size: int | None = None):
    return drafter.propose(DraftContext(committed, k, SamplingConfig(), None, vocab_size=vocab_size))


def _shape(node) -> tuple:
    """A trie node and everything under it, as nested tuples (the stamps left out)."""
    return (node.count, node.total, node.best, tuple(sorted((t, _shape(c)) for t, c in node.children.items())))


# ------------------------------------------------------------------------------------------------ exact output


@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_ids_identical_on_the_stress_prompts(tiny_target, k):
    config = GenerationConfig(max_new_tokens=40, k=k)
    session = SuffixDrafter()  # remembers every output: later prompts draft from earlier ones
    for label, prompt in _stress(tiny_target.tokenizer).items():
        base = _run(tiny_target, prompt, config)
        for drafter in (SuffixDrafter(remember=False), session, session):  # cold, then twice with a store
            spec = _run(tiny_target, prompt, config, drafter)
            assert spec.token_ids == base.token_ids, (label, k)
            assert spec.text == base.text and spec.finish_reason == base.finish_reason
            assert all(len(e.draft_ids) <= k for e in spec.events)
    sources = {e.draft_source for e in _run(tiny_target, _stress(tiny_target.tokenizer)["normal"], config,
                                            session).events if e.draft_ids}
    assert "earlier" in sources and None not in sources


# ------------------------------------------------------------------------------------------------ the structure


def test_proposal_on_a_hand_made_sequence():
    drafter = SuffixDrafter(remember=False, min_prob=0.1)
    drafter.reset(SEQUENCE[:PROMPT_LEN])
    draft = _propose(drafter, SEQUENCE, 8)
    # "1 2" -> 3 (3 of 3); "1 2 3" -> 4 (2 of 3: chain 2/3); "1 2 3 4" -> 5; "1 2 3 4 5" -> 1 or 7, tied: the
    # latest, 7 (chain 1/3); "5 7" -> 8; "7 8" -> 1; "8 1" -> 2; then "1 2" again -> 3
    assert draft.token_ids == [3, 4, 5, 7, 8, 1, 2, 3]
    assert draft.token_probs == [1.0] * 8 and draft.draft_probs is None and draft.parents is None
    assert draft.source == "output"  # the latest "1 2 3" is in the output (positions 9-11 include the prompt's end)
    assert _propose(drafter, SEQUENCE, 2).token_ids == [3, 4]  # capped at k
    assert _propose(drafter, SEQUENCE, 8, vocab_size=5).token_ids == [3, 4]  # stops before an id outside
    strict = SuffixDrafter(remember=False, min_prob=0.5)
    strict.reset(SEQUENCE[:PROMPT_LEN])
    assert _propose(strict, SEQUENCE, 8).token_ids == [3, 4, 5]  # 7 would bring the chain to 1/3 < 0.5
    assert _propose(strict, SEQUENCE + [9], 8).token_ids == []  # 9 never occurred before
    fresh = SuffixDrafter(remember=False)
    fresh.reset(SEQUENCE[:PROMPT_LEN])
    draft = _propose(fresh, SEQUENCE[:PROMPT_LEN], 3)
    assert draft.token_ids == [2, 3, 6] and draft.source == "prompt"  # "1" -> 2 (3 of 3), "1 2" -> 3, "1 2 3" -> 6


def test_the_trie_counts_every_substring_up_to_its_depth():
    trie, tail = SuffixTrie(max_depth=3), []
    for position, token in enumerate([1, 2, 1, 2, 3]):
        tail = trie.extend(tail, token, position)
    one = trie.root.children[1]
    assert (one.count, one.total, one.best) == (2, 2, 2)
    assert trie.root.children[2].children == {1: trie.root.children[2].children[1],
                                              3: trie.root.children[2].children[3]}
    assert trie.root.children[2].best == 3  # tied 1 to 1: the latest
    assert len(tail) == 2  # the nodes of "3" and "2 3" (a tail is at most max_depth - 1 long)
    assert trie.nodes == 1 + 3 + 3 + 3  # the root, 1 2 3, "1 2" "2 1" "2 3", "1 2 1" "2 1 2" "1 2 3"


def test_the_store_keeps_its_caps_and_forgets_evicted_outputs():
    outputs = [[100 + i, 7, 8, 9, 200 + i] * 4 for i in range(10)]  # 20 tokens each
    store = SuffixStore(max_outputs=3, max_tokens=50, max_depth=6, lead_in=0)
    for output in outputs:
        store.add([], output)
        assert len(store.outputs) <= 3 and store.tokens <= 50
        assert store.trie.nodes <= 1 + store.tokens * store.max_depth
    assert [s[0] for s in store.outputs] == [108, 109]  # 3 outputs would be 60 tokens > 50
    again = SuffixStore(max_outputs=3, max_tokens=50, max_depth=6, lead_in=0)
    for output in outputs[8:]:
        again.add([], output)
    assert _shape(store.trie.root) == _shape(again.trie.root) and store.trie.nodes == again.trie.nodes
    assert 100 not in store.trie.root.children  # the first output is gone: nothing of it is proposed
    drafter = SuffixDrafter(store, remember=False, max_depth=6)
    drafter.reset([5, 100])
    assert _propose(drafter, [5, 100], 4).token_ids == []
    drafter.reset([5, 109])
    draft = _propose(drafter, [5, 109], 4)
    assert draft.token_ids == [7, 8, 9, 209] and draft.source == "earlier"
    store.clear()
    assert store.trie.nodes == 1 and store.tokens == 0 and not store.outputs


def test_a_long_output_keeps_its_last_tokens_and_the_lead_in_comes_first():
    store = SuffixStore(max_outputs=4, max_tokens=10, max_depth=4, lead_in=3)
    store.add([1, 2, 3, 4], [10, 11])
    assert list(store.outputs) == [[2, 3, 4, 10, 11]]
    store.add([1], list(range(20, 40)))
    assert list(store.outputs) == [list(range(30, 40))] and store.tokens == 10


def test_the_store_receives_the_whole_output_the_last_token_included(tiny_target):
    prompt = _stress(tiny_target.tokenizer)["normal"]
    drafter = SuffixDrafter()
    result = _run(tiny_target, prompt, GenerationConfig(max_new_tokens=17, k=4), drafter)
    drafter.store.flush()
    (stored,) = drafter.store.outputs
    assert len(result.token_ids) == 17 and stored[-17:] == list(result.token_ids)


def test_a_second_identical_prompt_drafts_more(tiny_target):
    prompt = _stress(tiny_target.tokenizer)["normal"]
    config = GenerationConfig(max_new_tokens=40, k=4)
    drafter = SuffixDrafter()
    first = _run(tiny_target, prompt, config, drafter)
    second = _run(tiny_target, prompt, config, drafter)
    assert second.token_ids == first.token_ids
    assert _tokens_per_pass(second) > _tokens_per_pass(first) + 1.0
    assert sum(e.draft_source == "earlier" for e in second.events) > sum(e.draft_source == "earlier"
                                                                        for e in first.events) == 0
    cold = SuffixDrafter(remember=False)
    runs = [_tokens_per_pass(_run(tiny_target, prompt, config, cold)) for _ in range(2)]
    assert runs[0] == runs[1] == _tokens_per_pass(first)  # cold: nothing carries over
    assert cold.store.tokens == 0


# ------------------------------------------------------------------------------------------------ sampling


def test_sampling_follows_the_target_distribution(tiny_target):
    """The first two tokens' joint distribution under sampling, with a store that drafts the greedy continuation
    after the greedy first token and a made-up continuation after every other one (often rejected)."""
    prompt = _stress(tiny_target.tokenizer)["normal"]
    sampling = SamplingConfig(temperature=1.0)
    p1 = process_logits(forward_logits(tiny_target.model, prompt, new_cache(tiny_target.model), 1), sampling)[0]
    joint = {}
    for t1 in torch.nonzero(p1 > 1e-6).flatten().tolist():
        p2 = process_logits(forward_logits(tiny_target.model, prompt + [t1], new_cache(tiny_target.model), 1),
                            sampling)[0]
        for t2 in torch.nonzero(p2 > 1e-6).flatten().tolist():
            joint[(t1, t2)] = float(p1[t1] * p2[t2])
    store = SuffixStore()
    store.add([], list(range(tiny_target.vocab_size)))  # after token t: t + 1, t + 2, ...
    store.add(prompt, list(_run(tiny_target, prompt, GenerationConfig(max_new_tokens=6)).token_ids))
    n, counts, drafted = 600, Counter(), 0
    for seed in range(n):
        config = GenerationConfig(max_new_tokens=3, k=3, sampling=SamplingConfig(temperature=1.0, seed=seed))
        events = list(speculative_generate(tiny_target, SuffixDrafter(store, remember=False), prompt, config))
        ids = [t for e in events for t in e.emitted_ids]
        drafted += bool(events[1].draft_ids)
        counts[(ids[0], ids[1])] += 1
    assert drafted >= n * 0.9  # the second token was nearly always judged against a draft
    big = [c for c, p in joint.items() if p * n >= 5]
    observed = [counts[c] for c in big] + [n - sum(counts[c] for c in big)]
    wanted = [joint[c] * n for c in big] + [n - sum(joint[c] * n for c in big)]
    assert not [c for c in counts if c not in joint]
    assert len(big) >= 3 and chisquare(observed, wanted).pvalue > 1e-3


# ------------------------------------------------------------------------------------------------ where it shows


def test_registered_for_the_cli_the_app_and_the_bench(tiny_target, tiny_model_dir, capsys):
    assert "suffix" in drafter_keys()
    store = SuffixStore()
    drafter = make_drafter("suffix", tiny_target, suffix_store=store)
    assert isinstance(drafter, SuffixDrafter) and drafter.store is store and drafter.remember
    assert not make_drafter("suffix", tiny_target, remember_outputs=False).remember
    args = ["generate", "--target", str(tiny_model_dir), "--device", "cpu", "--prompt", "the cat sat on the mat",
            "--max-new-tokens", "12", "--json", "--no-chat-template", "--compare"]
    assert main([*args, "--drafter", "suffix", "--k", "4"]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out.strip().splitlines()[-1])
    assert record["compare"]["ids_identical"] is True, err


def test_the_bench_runs_suffix_cold_unless_asked(tiny_target):
    prompts = [Prompt("a", "multi-turn", "the cat sat on the mat"), Prompt("b", "multi-turn", "the cat")]
    settings = bench.BenchSettings(drafters=("suffix",), ks=(4,), max_new_tokens=12, repeats=2, warmup_tokens=4,
                                   compare_transformers=False, use_chat_template=False)
    cold = bench.run_bench(tiny_target, prompts, settings)
    assert "cold" in cold["suffix_note"] and "cold" in format_bench(cold)
    warm = bench.run_bench(tiny_target, prompts, bench.BenchSettings(**{**settings.__dict__, "warm_suffix": True}))
    assert "warm" in warm["suffix_note"] and warm["settings"]["warm_suffix"] is True
    first = [r["results"]["ours/suffix@k4"] for r in (cold["prompts"][0], warm["prompts"][0])]
    assert first[0]["target_passes"] == first[1]["target_passes"]  # the first prompt has no earlier one
    assert bench.suffix_note(bench.BenchSettings(drafters=("ngram",))) is None


def test_the_live_tab_keeps_one_store_per_page_visit(tiny_model_dir):
    from app import live

    class Visit:
        session_hash = "suffix-visit"

    args = dict(prompt="the cat sat on the mat", target=str(tiny_model_dir), drafter="suffix", draft_model="",
                exit_layer=0, k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=16,
                stop_strings="", chat_template=False, tree_nodes=0)
    for _ in range(3):
        assert "Done in" in live_field(last_output(live.generate(args, request=Visit())), "status")
    store = live.outputs._SUFFIX_STORES["suffix-visit"]
    assert len(store.outputs) == 2  # the first two runs' outputs; the third joins when the next run starts
    first, second = store.outputs  # greedy: the same lead-in and output twice
    assert len(first) >= 16 and first == second
    live.release_session(Visit())
    assert "suffix-visit" not in live.outputs._SUFFIX_STORES


def test_the_pane_marks_a_pass_copied_from_an_earlier_output(tiny_target):
    prompt = _stress(tiny_target.tokenizer)["normal"]
    config = GenerationConfig(max_new_tokens=20, k=4)
    drafter = SuffixDrafter()
    _run(tiny_target, prompt, config, drafter)
    pane = render.Pane(tiny_target.tokenizer)
    for event in _run(tiny_target, prompt, config, drafter).events:
        pane.add(event)
    page = pane.html()
    assert pane.earlier_passes and 'class="pass pass-earlier"' in page and 'class="earlier-mark"' in page
    assert "copied by suffix decoding from an earlier output" in page
    assert "earlier-mark" in render.legend_html() and "earlier output" in render.legend_html()
