"""Kinds of fault found in the field, each pinned by its right value (issue: faults from the field).

- cancel latency: a Stop during a long prefill starts no further forward (counted, not timed);
- metric definitions: counters count committed work; a tree pass counts every node it verified;
- vocabulary shapes: LM heads with different padding rows (both directions), greedy and chi-square;
- numerical health: non-finite draft logits drop the drafter (same output), non-finite target logits stop cleanly;
- n-gram lookup on periodic text fills k; adaptive k grows only when the drafter filled k.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

from specviz.core.drafting import Draft, DraftContext
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.events import NumericalError, PassEvent, PositionDetail, RunCancelled, Timings, TreeRecord
from specviz.core.kv import PREFILL_CHUNK, forward_logits, new_cache
from specviz.core.race import race
from specviz.core.verify import SamplingConfig, process_logits, restrict_vocab
from specviz.drafters import ModelDrafter, NgramDrafter
from specviz.measure.run_stats import RunStats


def _normal(tok) -> list[int]:
    return tok.encode("the cat sat on the mat and the dog sat on the log", add_special_tokens=False)


def _stats(events) -> RunStats:
    stats = RunStats()
    for event in events:
        stats.add(event)
    return stats


# ------------------------------------------------------------------------------------------------ cancel latency


class _Counting:
    """Counts forwards of a model (a forward hook) and sets ``flag`` when the ``at``-th one ends."""

    def __init__(self, model: torch.nn.Module, flag: threading.Event, at: int) -> None:
        self.count, self.after = 0, 0
        self.flag, self.at = flag, at
        self.handle = model.register_forward_pre_hook(self._pre)
        self.post = model.register_forward_hook(self._post)

    def _pre(self, module, args):
        self.count += 1
        if self.flag.is_set():
            self.after += 1  # a forward started after Stop

    def _post(self, module, args, output):
        if self.count == self.at:
            self.flag.set()  # Stop pressed while this forward runs

    def remove(self) -> None:
        self.handle.remove()
        self.post.remove()


@pytest.mark.parametrize("stop_at", [1, 2, 5])
def test_stop_during_a_long_prefill_starts_no_other_forward(tiny_target, tiny_draft, stop_at):
    tok = tiny_target.tokenizer
    prompt = (_normal(tok) * 80)[: 3 * PREFILL_CHUNK + 17]  # 4 chunks per prefill, two prefills in the race
    cancel = threading.Event()
    counters = [_Counting(tiny_target.model, cancel, stop_at), _Counting(tiny_draft.model, cancel, 10 ** 9)]
    config = GenerationConfig(max_new_tokens=8, k=3)
    events = race(speculative_generate(tiny_target, ModelDrafter(tiny_draft.model, "d"), prompt, config, cancel=cancel),
                  standard_generate(tiny_target, prompt, config, cancel=cancel))
    try:
        with pytest.raises(RunCancelled):
            list(events)
    finally:
        for counter in counters:
            counter.remove()
    assert counters[0].count == stop_at  # the target: no forward after the one in progress at Stop
    assert sum(c.after for c in counters) == 0


def test_long_prompts_are_read_in_chunks_with_the_same_output(tiny_target):
    prompt = (_normal(tiny_target.tokenizer) * 60)[: 2 * PREFILL_CHUNK + 5]
    sizes = []
    hook = tiny_target.model.register_forward_pre_hook(lambda m, a, kw: sizes.append(kw["input_ids"].shape[1]),
                                                       with_kwargs=True)
    try:
        result = collect(standard_generate(tiny_target, prompt, GenerationConfig(max_new_tokens=4)),
                         tiny_target.tokenizer, prompt)
    finally:
        hook.remove()
    assert sizes[:3] == [PREFILL_CHUNK, PREFILL_CHUNK, 5] and sizes[3:] == [1, 1, 1]
    # one forward over the whole prompt picks the same first token (chunking changes rounding only)
    whole = forward_logits(tiny_target.model, prompt, new_cache(tiny_target.model), 1)[-1]
    assert int(whole.argmax()) == result.token_ids[0]


# ------------------------------------------------------------------------------------------- metric definitions


def test_counters_count_only_committed_drafts_when_a_stop_cuts_a_pass(tiny_target):
    prompt = _normal(tiny_target.tokenizer)
    plain = collect(standard_generate(tiny_target, prompt, GenerationConfig(max_new_tokens=40)), tiny_target.tokenizer,
                    prompt)
    ids = list(plain.token_ids)
    # an oracle (the target drafts itself: every draft accepted) at k = 8, stopped by a stop string inside a pass
    for cut in range(6, 30):
        stop = tiny_target.tokenizer.decode(ids[cut:cut + 1]).strip()
        config = GenerationConfig(max_new_tokens=40, k=8, stop_strings=(stop,)) if stop else None
        if config is None:
            continue
        spec = collect(speculative_generate(tiny_target, ModelDrafter(tiny_target.model, "o"), prompt, config),
                       tiny_target.tokenizer, prompt)
        last = spec.events[-1]
        if spec.finish_reason == "stop" and last.cut_in_drafts and len(last.emitted_ids) < last.num_drafted:
            break
    else:
        pytest.fail("no stop string cut a pass inside its accepted drafts")
    stats = _stats(spec.events)
    emitted = stats.emitted_after_prefill
    own_tokens = stats.passes - 1  # every pass but the cut one emitted the target's own token
    assert last.num_accepted > last.committed_accepted == len(last.emitted_ids)
    assert stats.accepted == emitted - own_tokens == stats.drafted  # nothing after the stop is counted
    assert stats.acceptance_rate == 1.0 and stats.rejections == 0
    assert stats.tokens_per_pass == pytest.approx(emitted / stats.passes)


def _tree_event(nodes: int, path: tuple[int, ...], shown: tuple[int, ...]) -> PassEvent:
    tokens = tuple(range(10, 10 + nodes))
    parents = tuple(-1 if i < 2 else i - 2 for i in range(nodes))
    n = len(path)
    return PassEvent(
        run="speculative", index=1, kind="pass", k=3, draft_ids=tuple(tokens[i] for i in shown),
        accept_mask=tuple(j < n for j in range(len(shown))), num_accepted=n, next_id=99, next_kind="recovered",
        emitted_ids=tuple(tokens[i] for i in path) + (99,),
        details=tuple(PositionDetail(0.5, 1.0, None, 0, j <= n) for j in range(len(shown))), text_delta="",
        timings=Timings(), t_end_ms=1.0, num_generated=n + 1, tree=TreeRecord(tokens, parents, path, shown))


def test_a_tree_pass_counts_every_verified_node_as_drafted():
    stats = _stats([_tree_event(6, (0, 2), (0, 2, 4))])
    assert (stats.drafted, stats.accepted, stats.rejections) == (6, 2, 1)
    assert stats.acceptance_rate == pytest.approx(2 / 6)  # over nodes verified, not path + one child (2/3)
    assert stats.alpha == pytest.approx(2 / 3)  # per-level: the path went 2 levels and stopped at the third
    assert (stats.tree_passes, stats.tree_nodes, stats.mean_nodes_per_tree) == (1, 6, 6.0)
    assert stats.per_position_acceptance == [1.0, 1.0, 0.0] and stats.per_position_share == [1.0, 1.0, 0.0]


# ------------------------------------------------------------------------------------------ vocabulary shapes


def _padded(folder, tmp_path, name: str, extra_rows: int, seed: int):
    """A copy of the tiny model at ``folder`` whose LM head has ``extra_rows`` padding rows with large random
    weights (so an unmasked padded id would often win), loaded through specviz.runtime.models.load_model."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    from specviz.runtime.models import load_model

    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
    size = model.config.vocab_size
    model.resize_token_embeddings(size + extra_rows, mean_resizing=False)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        weight = model.get_input_embeddings().weight
        weight[size:] = torch.randn(extra_rows, weight.shape[1], generator=gen) * weight[:size].std() * 3
    out = tmp_path / name
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    return load_model(str(out), device="cpu")


@pytest.fixture(scope="module")
def padded_pairs(tmp_path_factory, tiny_model_dir, tiny_draft_dir, tiny_target, tiny_draft):
    """(target, draft) pairs whose heads differ in padding: the draft's head larger, then the target's."""
    tmp = tmp_path_factory.mktemp("padded")
    return {
        "draft head larger": (tiny_target, _padded(tiny_draft_dir, tmp, "draft-plus-24", 24, 1)),
        "target head larger": (_padded(tiny_model_dir, tmp, "target-plus-16", 16, 2), tiny_draft),
    }


@pytest.mark.parametrize("direction", ["draft head larger", "target head larger"])
def test_padded_heads_greedy_ids_identical_and_never_padded(padded_pairs, direction):
    from specviz.runtime.models import check_same_vocabulary

    target, draft = padded_pairs[direction]
    check_same_vocabulary(target, draft)
    assert target.vocab_size != draft.vocab_size and target.num_token_ids == 400
    prompt = _normal(target.tokenizer)
    config = GenerationConfig(max_new_tokens=30, k=4)
    base = collect(standard_generate(target, prompt, config), target.tokenizer, prompt)
    spec = collect(speculative_generate(target, ModelDrafter(draft.model, "d"), prompt, config), target.tokenizer,
                   prompt)
    assert spec.token_ids == base.token_ids and max(base.token_ids) < 400
    assert all(t < 400 for e in spec.events for t in e.draft_ids)


def _first_two_joint(target, prompt, sampling) -> dict[tuple[int, int], float]:
    """The target's exact distribution of the first two tokens, over the shared (tokenizer) ids."""
    vocab = target.num_token_ids

    def probs(ids):
        return process_logits(restrict_vocab(forward_logits(target.model, ids, new_cache(target.model), 1), vocab),
                              sampling)[0]

    p1, joint = probs(prompt), {}
    for t1 in torch.nonzero(p1 > 1e-6).flatten().tolist():
        p2 = probs(prompt + [t1])
        for t2 in torch.nonzero(p2 > 1e-6).flatten().tolist():
            joint[(t1, t2)] = float(p1[t1] * p2[t2])
    return joint


@pytest.mark.parametrize("direction", ["draft head larger", "target head larger"])
def test_padded_heads_sampling_follows_the_target(padded_pairs, direction):
    target, draft = padded_pairs[direction]
    prompt = _normal(target.tokenizer)
    sampling = dict(temperature=1.0)
    expected = _first_two_joint(target, prompt, SamplingConfig(**sampling))
    n, counts = 800, Counter()
    for seed in range(n):
        config = GenerationConfig(max_new_tokens=5, k=3, sampling=SamplingConfig(seed=seed, **sampling))
        ids: list[int] = []
        for event in speculative_generate(target, ModelDrafter(draft.model, "d"), prompt, config):
            ids.extend(event.emitted_ids)
            if event.kind == "pass":
                break
        counts[(ids[0], ids[1])] += 1
    assert not [c for c in counts if c not in expected]  # in particular, no padded id was ever emitted
    big = [c for c, p in expected.items() if p * n >= 5]
    observed = [counts[c] for c in big] + [n - sum(counts[c] for c in big)]
    wanted = [expected[c] * n for c in big] + [n - sum(expected[c] * n for c in big)]
    assert len(big) >= 3 and chisquare(observed, wanted).pvalue > 1e-3


# ------------------------------------------------------------------------------------------ numerical health


class _Overflowing(ModelDrafter):
    """A draft model whose logits turn to inf from its second propose on (as a float16 draft that overflows)."""

    def __init__(self, model):
        super().__init__(model, "overflowing draft")
        self.calls = 0

    def propose(self, ctx: DraftContext) -> Draft:
        self.calls += 1
        draft = super().propose(ctx)
        if self.calls >= 2:
            nan = torch.full((len(draft.token_ids), ctx.vocab_size), float("nan"))
            return Draft(draft.token_ids, [float("nan")] * len(draft.token_ids), None if ctx.sampling.greedy else nan)
        return draft


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_drafter_with_non_finite_numbers_is_dropped_with_a_notice(tiny_target, tiny_draft, temperature):
    prompt = _normal(tiny_target.tokenizer)
    config = GenerationConfig(max_new_tokens=30, k=4, sampling=SamplingConfig(temperature=temperature, seed=3))
    drafter = _Overflowing(tiny_draft.model)
    spec = collect(speculative_generate(tiny_target, drafter, prompt, config), tiny_target.tokenizer, prompt)
    notices = [e for e in spec.events if e.notice]
    assert len(notices) == 1 and "non-finite" in notices[0].notice and notices[0].index == 2
    assert all(not e.draft_ids for e in spec.events[notices[0].index:]) and drafter.calls == 2
    if temperature == 0.0:
        base = collect(standard_generate(tiny_target, prompt, config), tiny_target.tokenizer, prompt)
        assert spec.token_ids == base.token_ids
    else:
        assert len(spec.token_ids) == 30


def test_non_finite_target_logits_stop_with_one_sentence(tiny_model_dir):
    from specviz.runtime.models import load_model

    broken = load_model(str(tiny_model_dir), device="cpu", dtype="float16")
    with torch.no_grad():
        broken.model.model.norm.weight.fill_(float("inf"))
    prompt = _normal(broken.tokenizer)
    with pytest.raises(NumericalError, match=r"^The target's logits turned non-finite \(NaN or inf\) at output "
                                             r"token 1.*float32"):
        list(standard_generate(broken, prompt, GenerationConfig(max_new_tokens=5)))
    from specviz.runtime.models import clear_model_cache

    clear_model_cache()


# --------------------------------------------------------------------------------- n-gram lookup and adaptive k


@pytest.mark.parametrize("ids, k, expected", [
    ([1, 2, 1, 2, 1, 2], 4, [1, 2, 1, 2]),
    ([7, 7, 7], 5, [7, 7, 7, 7, 7]),
    ([3, 9, 4, 5, 9, 4], 6, [5, 9, 4, 5, 9, 4]),
    ([1, 2, 3, 4, 5, 1, 2], 2, [3, 4]),  # a match with room after it: plain copy
])
def test_ngram_lookup_fills_k_on_periodic_text(ids, k, expected):
    draft = NgramDrafter().propose(DraftContext(ids, k, SamplingConfig(), None))
    assert draft.token_ids == expected


def test_ngram_lookup_never_drafts_less_than_k_when_it_finds_a_match(tiny_target):
    tok = tiny_target.tokenizer
    prompt = tok.encode(" ha" * 12, add_special_tokens=False)
    events = list(speculative_generate(tiny_target, NgramDrafter(), prompt, GenerationConfig(max_new_tokens=40, k=8)))
    drafted = [e.num_drafted for e in events if e.kind == "pass" and e.k == 8]
    assert 8 in drafted and set(drafted) <= {0, 8}


def test_ngram_lookup_on_laughter_fills_k_with_the_embedded_model(embedded):
    from specviz.runtime.models import encode_prompt

    ids = encode_prompt(embedded.tokenizer, "Laugh: ha ha ha ha ha ha ha ha")
    config = GenerationConfig(max_new_tokens=48, k=8)
    spec = collect(speculative_generate(embedded, NgramDrafter(), ids, config), embedded.tokenizer, ids)
    base = collect(standard_generate(embedded, ids, config), embedded.tokenizer, ids)
    assert spec.token_ids == base.token_ids
    stats = _stats(spec.events)
    assert stats.tokens_per_pass > 4.0, stats.tokens_per_pass  # one token per pass when drafts stop at the period


class _OneToken:
    """The target drafting itself one token at a time: always accepted, never fills k > 1."""

    needs_hidden = False
    cache_len = None

    def __init__(self, target):
        self.inner = ModelDrafter(target.model, "one")
        self.name = "one token"

    def reset(self, prompt_ids):
        self.inner.reset(prompt_ids)

    def propose(self, ctx):
        from dataclasses import replace

        return self.inner.propose(replace(ctx, k=1))

    def commit(self, committed_ids, num_accepted):
        self.inner.commit(committed_ids, num_accepted)


def test_adaptive_k_grows_only_when_the_drafter_filled_k(tiny_target):
    prompt = _normal(tiny_target.tokenizer)
    config = GenerationConfig(max_new_tokens=30, k=2, adaptive_k=True, k_max=16)
    events = [e for e in speculative_generate(tiny_target, _OneToken(tiny_target), prompt, config) if e.kind == "pass"]
    assert all(e.num_accepted == e.num_drafted == 1 for e in events[:-1])
    assert {e.next_k for e in events} == {2}  # one-token drafts, all accepted: k stays where it started
