"""Stop after the speculative run had finished (only its baseline still going): the history row keeps the
speculative run's count unmarked and says where the baseline was cut; a trial read "48 (stopped)" for a run that
had made all 48 tokens. Real runs of the tiny model (n-gram lookup and its baseline), fed to the Live view-model."""

from __future__ import annotations

import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import inputs, live, render  # noqa: E402
from honest_support import unlabelled  # noqa: E402
from specviz.core.engine import GenerationConfig, speculative_generate, standard_generate  # noqa: E402
from specviz.drafters.ngram import NgramDrafter  # noqa: E402

TOKENS = 48


@pytest.fixture(scope="module")
def runs(tiny_target):
    """(speculative events, baseline events) of one greedy 48-token run on repeated text."""
    prompt = tiny_target.tokenizer.encode(" the cat sat on the mat", add_special_tokens=False) * 8
    config = GenerationConfig(max_new_tokens=TOKENS, k=3)
    return (list(speculative_generate(tiny_target, NgramDrafter(), prompt, config)),
            list(standard_generate(tiny_target, prompt, config)))


def _view(tokenizer, spec_events, base_events) -> live.RunView:
    settings = inputs.parse_settings(dict(live.DEFAULTS, prompt="x", drafter="ngram", k=3, adaptive_k="fixed",
                                          temperature=0.0, max_new_tokens=TOKENS))
    view = live.RunView(settings, "tiny", "n-gram lookup", render.Pane(tokenizer), render.Pane(tokenizer))
    for event in [*spec_events, *base_events]:
        view.add(event)
    return view


def _tokens_cell(history_html: str) -> str:
    """The "tokens" cell (the 4th) of the table's first run row."""
    row = unlabelled(history_html).split("</tr>")[1]  # after the header
    return re.findall(r"<td[^>]*>(.*?)</td>", row)[3]


def test_a_stop_after_the_speculative_run_finished_marks_only_the_baseline(runs, tiny_target):
    spec_events, base_events = runs
    assert spec_events[-1].finish_reason == "length" and spec_events[-1].num_generated == TOKENS
    cut = len(base_events) // 2  # the baseline is halfway when Stop comes
    view = _view(tiny_target.tokenizer, spec_events, base_events[:cut])
    made = base_events[cut - 1].num_generated
    assert 0 < made < TOKENS
    assert view.mark_stopped()
    row = view.summary()
    assert row.stopped and row.tokens == TOKENS and row.cut_base_tokens == made
    table = render.history_html([row])
    assert _tokens_cell(table) == f"{TOKENS} (baseline stopped at {made})"
    assert f"{TOKENS} (stopped)" not in table
    assert "length <small>/</small> stopped" in view.stats_html()  # the finish reasons: speculative / baseline


def test_a_stop_while_the_speculative_run_went_on_marks_its_count(runs, tiny_target):
    spec_events, base_events = runs
    view = _view(tiny_target.tokenizer, spec_events[:4], base_events[:6])
    made = spec_events[3].num_generated
    assert view.mark_stopped()
    row = view.summary()
    assert row.tokens == made < TOKENS and row.cut_base_tokens is None
    assert _tokens_cell(render.history_html([row])) == f"{made} (stopped)"
    assert "stopped <small>/</small> stopped" in view.stats_html()


def test_a_finished_run_has_nothing_to_stop(runs, tiny_target):
    spec_events, base_events = runs
    view = _view(tiny_target.tokenizer, spec_events, base_events)
    assert not view.mark_stopped()
    row = view.summary()
    assert not row.stopped and row.cut_base_tokens is None
    assert _tokens_cell(render.history_html([row])) == str(TOKENS)
