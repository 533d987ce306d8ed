"""The opt-in compiled forward (specviz.runtime.compiled): greedy ids, the status of which forward runs, and the flag on
runs during which torch.compile compiled something. No timings here (docs/performance-journal.md, section 10).

The compile tests are few on purpose: compiling even the tiny model takes tens of seconds on a 2-core CPU
(1-2 minutes cold, ~40 s once inductor's disk cache holds its kernels: dynamo still traces), so they are marked
slow: one checks the compiled forward's ids and flags, one the reuse of its graphs across draft lengths (k).
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import torch

import specviz.runtime.compiled as compiled
from specviz.cli import _summary, build_parser
from specviz.core.drafting import Draft, DraftContext, DrafterBase
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.kv import compilations
from specviz.drafters import NgramDrafter
from specviz.runtime.models import load_model
from specviz.runtime.speed import plain_path
from specviz.measure.tuning import tune


class _CompilingDrafter(NgramDrafter):
    """n-gram lookup that compiles a small function (a new graph) during its ``compile_at``-th proposal."""

    def __init__(self, compile_at: int) -> None:
        super().__init__()
        self.calls, self.compile_at = 0, compile_at

    def propose(self, ctx):
        self.calls += 1
        if self.calls == self.compile_at:
            torch.compile(lambda x: x * 3 + 1, dynamic=False)(torch.ones(4))
        return super().propose(ctx)


def _own_copy(tiny_model_dir, tmp_path):
    """The tiny target loaded from a copy of its folder: a model object no other test shares."""
    folder = tmp_path / "tiny-compiled"
    shutil.copytree(tiny_model_dir, folder)
    return load_model(str(folder), device="cpu")


def _ids(events, target, prompt):
    return collect(events, target.tokenizer, prompt)


@pytest.mark.slow
def test_compiled_forward_gives_identical_greedy_ids_and_flags_compiling_passes(tiny_model_dir, tmp_path):
    target = _own_copy(tiny_model_dir, tmp_path)
    report = compiled.compile_forward(target.model, features=False)  # the head drafters' forwards: make compile
    assert report.graphs >= 3 and report.cache_hits + report.cache_misses >= report.graphs
    assert report.shapes[0].startswith("prefill") and any(s.startswith("verify 5") for s in report.shapes)
    assert compiled.forward_path(target.model) == compiled.COMPILED_LABEL
    assert compiled.compile_forward(target.model) is report  # idempotent: no second compilation
    object.__setattr__(target, "compiled", report)  # what load_model records under SPECVIZ_COMPILE=1
    assert tune(target).source == "compiled"

    prompt = target.tokenizer.encode("the cat sat on the mat and the cat sat on the", add_special_tokens=False)
    cfg = GenerationConfig(max_new_tokens=24, k=4)
    base = _ids(standard_generate(target, prompt, cfg), target, prompt)
    spec = _ids(speculative_generate(target, NgramDrafter(), prompt, cfg), target, prompt)
    assert spec.token_ids == base.token_ids and len(base.token_ids) == 24
    assert not base.compiling and not spec.compiling  # the warm-up covered every shape these runs used
    assert any(e.num_drafted > 0 for e in spec.events)  # verifications of several tokens really ran

    before = compilations()
    flagged = _ids(speculative_generate(target, _CompilingDrafter(compile_at=2), prompt, cfg), target, prompt)
    assert compilations() == before + 1
    assert flagged.token_ids == base.token_ids and flagged.compiling
    assert [e.index for e in flagged.events if e.compiling] == [2]  # only the pass that compiled is marked


# A compiled graph specialised to one k and reused for another (issue 39; vLLM #53366: "expected size 7==9"), or a new
# graph for every k an automatic schedule visits: one compiled target verifies k = 2, 4, 2 and k = auto as it moves.
# The forward is dynamic in the new-token count, so after the warm-up no run should compile anything whichever k it
# verifies; at most one graph in all is allowed (a shape torch specialises), never one per k. It follows the test
# above in this file on purpose: that one counts the graphs of the first compilation of the tiny model in the process
# (a later compilation of the same architecture reuses torch's graphs).


class _FullDrafter(DrafterBase):
    """Always proposes exactly k tokens (the last committed tokens repeated), so every pass verifies k + 1 rows:
    each k of a run reaches the target as its own verification shape, accepted or not."""

    name = "k repeats"

    def reset(self, prompt_ids: list[int]) -> None:
        """Nothing to reset."""

    def propose(self, ctx: DraftContext) -> Draft:
        tail = ctx.committed_ids[-ctx.k:]
        ids = [tail[i % len(tail)] for i in range(ctx.k)]
        return Draft(ids, [1.0] * len(ids))


@pytest.mark.slow
def test_one_compiled_target_verifies_every_k_with_identical_ids_and_bounded_graphs(tiny_model_dir, tmp_path):
    target = _own_copy(tiny_model_dir, tmp_path)
    compiled.compile_forward(target.model, features=False)
    prompt = target.tokenizer.encode("the cat sat on the mat and the cat sat on the", add_special_tokens=False)
    base_config = GenerationConfig(max_new_tokens=12, k=2)
    base = _ids(standard_generate(target, prompt, base_config), target, prompt)
    assert len(base.token_ids) == 12

    start = compilations()
    grown = []
    for k in (2, 4, 2):
        events = speculative_generate(target, _FullDrafter(), prompt, GenerationConfig(max_new_tokens=12, k=k))
        run = _ids(events, target, prompt)
        assert run.token_ids == base.token_ids, f"k = {k} after a compiled run of another k changed the ids"
        widths = {len(e.draft_ids) for e in run.events if e.index > 0}
        assert k in widths, f"no pass verified k = {k} draft tokens: {sorted(widths)}"
        grown.append(compilations() - start)
    assert grown[-1] == grown[1], "k = 2 again compiled a new graph: the k = 2 graph was not reused"

    auto = GenerationConfig(max_new_tokens=24, k=2, auto_k=True, k_max=6)
    runs = [_ids(speculative_generate(target, NgramDrafter(), prompt, auto), target, prompt) for _ in range(2)]
    longer = _ids(standard_generate(target, prompt, GenerationConfig(max_new_tokens=24)), target, prompt)
    for run in runs:
        assert run.token_ids == longer.token_ids
    visited = {e.k for run in runs for e in run.events if e.index > 0}
    assert len(visited) >= 2, f"k = auto never moved ({sorted(visited)}): the test needs a moving k"
    total = compilations() - start
    assert total <= 1, f"{total} graphs compiled across k in 2, 4, 2 and auto {sorted(visited)}: one per k?"


def test_forward_path_names_the_eager_paths(tiny_target):
    assert compiled.compile_report(tiny_target.model) is None
    assert compiled.forward_path(tiny_target.model) == "eager fast path"
    with plain_path(tiny_target.model):
        assert compiled.forward_path(tiny_target.model) == "eager default kernels"


def test_compile_is_requested_by_the_environment_and_the_flags(monkeypatch):
    for value, wanted in (("1", True), ("on", True), ("0", False), ("", False)):
        monkeypatch.setenv(compiled.ENV_COMPILE, value)
        assert compiled.compile_requested() is wanted
    monkeypatch.setenv(compiled.ENV_COMPILE, "1")
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert compiled.compile_requested() is False  # ZeroGPU: off, whatever is asked
    monkeypatch.delenv("SPACES_ZERO_GPU")
    parser = build_parser()
    assert parser.parse_args(["generate", "--prompt", "x", "--compile"]).compile
    assert not parser.parse_args(["generate", "--prompt", "x"]).compile
    assert parser.parse_args(["bench", "--kernel", "--compile"]).compile
    assert parser.parse_args(["compile", "--target", "embedded"]).compile


def test_load_model_compiles_when_asked_and_records_it(tiny_model_dir, tmp_path, monkeypatch):
    fake = compiled.CompileReport(graphs=3, warm_s=1.0, cache_hits=3, cache_misses=0, shapes=("step 1",),
                                  cache_dir=str(tmp_path))
    calls = []
    monkeypatch.setattr(compiled, "compile_forward", lambda model, progress=None: calls.append(model) or fake)
    monkeypatch.setenv(compiled.ENV_COMPILE, "1")
    target = _own_copy(tiny_model_dir, tmp_path)
    assert calls == [target.model] and target.compiled is fake
    assert tune(target).summary().startswith("compiled forward (inductor)")


def test_a_compiling_run_is_flagged_in_the_summary():
    record = {"drafter": "ngram", "k": 4, "seed": 0, "num_tokens": 3, "finish_reason": "length", "wall_s": 1.0,
              "tokens_per_s": 3.0, "ttft_ms": 10.0, "target_passes": 2, "tokens_per_pass": 1.5,
              "expected_tokens_per_pass": 1.5, "drafted": 4, "accepted": 1, "acceptance_rate": 0.25, "alpha": 0.3}
    assert "compilation" not in _summary({**record, "compiling": False}, "tiny")
    assert compiled.COMPILING_NOTE in _summary({**record, "compiling": True}, "tiny")
    assert dataclasses.fields(compiled.CompileReport)  # a plain record (written as JSON by `specviz compile`)
