"""Lookahead's "expected" tokens per pass: the chain formula E = (1 − α^(m+1)) ÷ (1 − α) reads m as the kept
candidate's tokens per pass (k = N−1 at most), never every candidate's tokens (a trial at W = 3, N = 3, G = 2 read
"expected from α 0.77, m 3.00: 2.83", while no pass can give more than N = 3 tokens); a tree's m is its depth. One
source (:attr:`specviz.core.counters.Counters.chained`), so the CLI, the card and the chart agree. A real lookahead run
on the tiny model, through the Live handler."""

from __future__ import annotations

import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app import live, render  # noqa: E402
from specviz.core.counters import chain_tokens  # noqa: E402
from specviz.core.costs import expected_tokens_per_pass  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402

W, N, G = 3, 3, 2
PROMPT = "the cat sat on the mat and the cat sat on the mat and the cat sat on the mat and the cat"
EXPECTED = re.compile(r"expected from α ([\d.]+), m ([\d.]+) \(the kept candidate's tokens, k = N−1 at most\): "
                      r"([\d.]+)")


def test_the_card_and_chart_read_the_kept_candidate_as_the_chain(tiny_model_dir):
    from tests.test_live import _args, drain

    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="lookahead", window=W, ngram=N,
                                      candidates=G, max_new_tokens=48, prompt=PROMPT)))
    stats = out["stats"]
    assert "Done in" in out["status"], out["status"]
    found = EXPECTED.search(stats)
    assert found, stats
    alpha, m, expected = (float(x) for x in found.groups())
    assert 0 < m <= N - 1 and 1 <= expected <= N  # at most k + 1 = N tokens per pass
    assert abs(expected - expected_tokens_per_pass(alpha, m)) < 0.02  # checkable by hand from the shown α and m
    drafted = int(re.search(r"(\d+) candidate tokens verified", stats).group(1))
    passes = int(re.search(r"· (\d+) target passes vs", stats).group(1))
    assert drafted / passes > m  # G = 2 candidates verified per pass: "drafted" is no chain length
    figure = out["charts"]
    line = next(trace for trace in figure.data if trace.name == "expected from α")
    ys = [y for y in line.y if y is not None]
    assert ys and max(ys) <= N and abs(ys[-1] - expected) < 0.01  # the line ends at the card's figure


def test_the_kept_candidate_is_counted_per_pass(tiny_target):
    """chain_tokens: a lookahead pass's kept candidate (N−1 tokens), 0 without candidates; "drafted" counts every
    candidate; the counters' expected tokens per pass (the CLI's figure) reads m from the kept candidates."""
    from specviz.core.engine import GenerationConfig, speculative_generate
    from specviz.drafters.lookahead import LookaheadDrafter

    prompt = tiny_target.tokenizer.encode(" the cat sat on the mat", add_special_tokens=False) * 12
    events = [e for e in speculative_generate(tiny_target, LookaheadDrafter(W, N, G), prompt,
                                              GenerationConfig(max_new_tokens=40, k=N - 1)) if e.kind != "prefill"]
    chain = [chain_tokens(e) for e in events]
    two = [e for e in events if e.lookahead is not None and len(e.lookahead.candidates) == 2 and not e.cut_in_drafts]
    assert two, "repeated text should give passes with two candidates"
    kept = [chain_tokens(e) for e in two]  # N−1, or fewer where max new tokens cut the candidates
    assert kept.count(N - 1) >= 2 and all(0 < n <= N - 1 for n in kept)
    assert [e.counted_drafted for e in two] == [2 * n for n in kept]  # "drafted": both candidates' tokens
    assert all(c == 0 for c, e in zip(chain, events) if e.lookahead is not None and not e.lookahead.candidates)
    stats = RunStats()
    for event in events:
        stats.add(event)
    assert stats.chained == sum(chain) and stats.mean_chain == sum(chain) / len(events)
    assert stats.mean_proposed > stats.mean_chain and stats.mean_chain <= N - 1
    expected = expected_tokens_per_pass(stats.alpha, stats.mean_chain)
    assert stats.as_dict()["expected_tokens_per_pass"] == expected <= N
    assert stats.running_expected[-1] == expected
    value = float(render.expected_text(stats).rsplit(": ", 1)[1])
    assert value == round(expected, 2)
    assert (stats.counters + stats.counters).chained == 2 * stats.chained  # pooled as every count is


def test_a_trees_chain_is_its_depth():
    """A tree pass offers its target one path at most: m is the tree's depth (a node's ancestors, itself
    included), not its node count, so the expected tokens per pass stays within depth + 1."""
    from types import SimpleNamespace

    from specviz.core.events import TreeRecord

    tree = TreeRecord(tokens=(5, 6, 7, 8, 9), parents=(-1, -1, 0, 2, 1), path=(0, 2), shown=(0, 2, 3))
    event = SimpleNamespace(cut_in_drafts=False, tree=tree, lookahead=None, counted_drafted=tree.num_nodes)
    assert chain_tokens(event) == 3  # root's child 0 -> node 2 -> node 3; 5 nodes verified
    assert chain_tokens(SimpleNamespace(cut_in_drafts=True, tree=tree, lookahead=None, counted_drafted=2)) == 2
