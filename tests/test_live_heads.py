"""The app with the EAGLE / Medusa drafters on the tiny target: the Live handler (chain, tree, Medusa heads' table,
a target without heads, tree + sampling), the tree view's HTML, and the Arena with head drafters.

Heads for the tiny target are random, written to a temporary folder that stands in for ``assets/heads``
(``specviz.drafters.networks.HEADS_DIR``). Their draft vocabulary is the 3 tokens the baseline emits most often: a tree drafts
every one of them at each depth (3 candidates per node), so some passes accept a path whatever the weights.
"""

from __future__ import annotations

import dataclasses
import html
import os
import re
from collections import Counter

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
import torch  # noqa: E402

import specviz.drafters.networks  # noqa: E402
from app import arena as arena_tab  # noqa: E402
from app import build_demo, device, inputs, live  # noqa: E402
from app.render import PieceDecoder  # noqa: E402
from app.tree_view import HeadAccuracy, TreeView, tree_html, tree_pass  # noqa: E402
from specviz.analysis.arena import is_drafter_key, variants  # noqa: E402
from specviz.core.engine import GenerationConfig, collect, standard_generate  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings, TreeRecord  # noqa: E402
from specviz.drafters.networks import new_eagle_head, new_medusa_heads, save_heads  # noqa: E402
from test_live import FakeTokenizer, _args, drain  # noqa: E402
from toast_support import no_toast  # noqa: E402

PROMPT = "The quick brown fox"
NEW_TOKENS = 20


@pytest.fixture(scope="module")
def heads_folder(tmp_path_factory, tiny_target):
    """A folder with an EAGLE head and Medusa heads for the tiny target (see the module docstring)."""
    ids, _, _ = inputs.fit_prompt_for(inputs.parse_settings(_settings_args()), tiny_target)  # as the handler
    base = collect(standard_generate(tiny_target, ids, GenerationConfig(max_new_tokens=NEW_TOKENS)),
                   tiny_target.tokenizer, ids)
    common = [t for t, _ in Counter(base.token_ids).most_common(3)]
    common += [t for t in range(tiny_target.vocab_size) if t not in common][: 3 - len(common)]
    vocab = torch.tensor(sorted(common))
    folder = tmp_path_factory.mktemp("heads")
    torch.manual_seed(0)
    save_heads(new_eagle_head(tiny_target.model, vocab_ids=vocab), folder / "tiny-eagle.safetensors",
               tiny_target.model)
    medusa = new_medusa_heads(tiny_target.model, num_heads=4, vocab_ids=vocab)
    for block in medusa.blocks:  # random, not zero, so the heads differ
        torch.nn.init.normal_(block.weight, std=0.05)
    save_heads(medusa, folder / "tiny-medusa.safetensors", tiny_target.model)
    return folder


def _settings_args() -> dict:
    """parse_settings' values for the tests' runs (the handler's)."""
    return _args(prompt=PROMPT, max_new_tokens=NEW_TOKENS)


@pytest.fixture
def shipped(heads_folder, monkeypatch):
    """``specviz.drafters.networks.HEADS_DIR`` points at the tiny target's heads."""
    monkeypatch.setattr(specviz.drafters.networks, "HEADS_DIR", heads_folder)
    return heads_folder


@pytest.fixture
def events(monkeypatch):
    """The speculative events the handler streams (recorded on their way to the view)."""
    seen: list[PassEvent] = []
    original = live.run.speculative_generate

    def recording(*args, **kwargs):
        for event in original(*args, **kwargs):
            seen.append(event)
            yield event

    monkeypatch.setattr(live.run, "speculative_generate", recording)
    return seen


def _run(tiny_model_dir, **change) -> dict:
    return drain(live.generate(_args(**{"target": str(tiny_model_dir), "prompt": PROMPT,
                                          "max_new_tokens": NEW_TOKENS, **change})))


def _nodes(markup: str) -> list[dict]:
    """The attributes of every tree node box in ``markup``."""
    return [dict(re.findall(r'(data-[\w-]+)="([^"]*)"', attrs))
            for attrs in re.findall(r'<span (class="dt-node[^>]*)>', markup)]


def _first_tree(markup: str) -> str:
    """The first (latest, open) pass's ``<details>`` block."""
    return re.search(r'<details class="dtree-pass".*?</details>', markup, re.S).group(0)


def _greedy_identical(out: dict) -> None:
    assert "Done in" in out["status"], out["status"]
    assert out["history-state"][0].identical is True  # the same ids as standard decoding
    assert "✓" in out["stats"]


# ------------------------------------------------------------------------------------------------ the Live handler


def test_eagle_chain_matches_the_baseline_and_shows_no_tree(tiny_model_dir, shipped, events):
    out = _run(tiny_model_dir, drafter="eagle", k=3)
    _greedy_identical(out)
    assert "EAGLE head" in out["spec-output"] and "tree" not in out["history-state"][0].drafter
    assert not any(e.tree for e in events)
    assert "draft-tree" not in out and "head-accuracy" not in out  # hidden (never given a value)


def test_eagle_tree_shows_the_tree_with_the_accepted_path(tiny_model_dir, shipped, events):
    out = _run(tiny_model_dir, drafter="eagle", tree_nodes=10, k=3)
    _greedy_identical(out)
    assert "tree of 10 nodes" in out["spec-output"]
    trees = [e for e in events if e.tree]
    assert trees and all(len(e.tree.tokens) <= 10 for e in trees)
    markup = out["draft-tree"]
    assert f'data-tree-passes="{len(trees)}"' in markup
    # the pass with the longest accepted path is open and first, then every other tree pass (newest first)
    passes = [int(p) for p in re.findall(r'<details class="dtree-pass" data-pass="(\d+)"', markup)]
    best = max(trees, key=lambda e: (len(e.tree.path), e.index))
    assert passes == [best.index] + [e.index for e in reversed(trees) if e is not best]
    assert re.search(rf'<details class="dtree-pass" data-pass="{best.index}"[^>]* open>', markup)
    by_index = {e.index: e for e in trees}
    # per pass: the path nodes (and only they) are data-accepted="true", the target's own token follows them
    blocks = re.findall(r'<details class="dtree-pass".*?</details>', markup, re.S)
    for event, block in zip((by_index[p] for p in passes), blocks):
        tree = event.tree
        nodes = _nodes(block)
        drafted = [n for n in nodes if n["data-node"].isdigit()]
        assert len(drafted) == len(tree.tokens)
        assert {int(n["data-node"]) for n in drafted if n["data-accepted"] == "true"} == set(tree.path)
        assert [int(n["data-id"]) for n in sorted(drafted, key=lambda n: int(n["data-node"]))] == list(tree.tokens)
        nxt = [n for n in nodes if n["data-node"] == "next"]
        assert len(nxt) == 1 and nxt[0]["data-kind"] == event.next_kind and int(nxt[0]["data-id"]) == event.next_id
        assert nxt[0]["data-parent"] == str(tree.path[-1] if tree.path else -1)
        assert nxt[0]["data-depth"] == str(len(tree.path) + 1)
        assert [n["data-node"] for n in nodes].count("root") == 1
    accepted = sum(len(e.tree.path) for e in trees)
    assert accepted > 0, "the 3-token draft vocabulary should make some paths accepted"
    assert markup.count('data-accepted="true"') == accepted


def test_tree_updates_stream_at_the_chart_rate(tiny_model_dir, shipped, monkeypatch):
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    monkeypatch.setattr(live.run, "CHART_INTERVAL_S", 0.0)
    chart, tree = live.OUTPUTS.index("charts"), live.OUTPUTS.index("draft-tree")
    updates = []
    for out in live.generate(_args(target=str(tiny_model_dir), prompt=PROMPT, max_new_tokens=NEW_TOKENS,
                                     drafter="eagle", tree_nodes=6, k=2)):
        if isinstance(out[chart], dict) and out[chart].get("value") is not None:  # a chart refresh
            updates.append(out[tree])
        else:  # the tree is sent with the charts only
            assert not (isinstance(out[tree], dict) and "value" in out[tree])
    shown = [u["value"] for u in updates if u.get("visible")]
    assert len(updates) > len(shown) >= 3  # hidden until the first tree pass, then every chart refresh
    assert all(m.count('class="dtree-pass"') == 1 for m in shown[:-1])  # streaming: the latest pass only
    assert shown[-1].count('class="dtree-pass"') > 1  # at the end: every pass


def test_medusa_head_table_counts_match_the_events(tiny_model_dir, shipped, events):
    out = _run(tiny_model_dir, drafter="medusa", k=4)
    _greedy_identical(out)
    markup = out["head-accuracy"]
    rows = re.findall(r'<tr data-head="(\d+)" data-accepted="(\d+)" data-judged="(\d+)">', markup)
    assert [int(h) for h, _, _ in rows] == [1, 2, 3, 4]
    passes = [e for e in events if e.kind == "pass"]
    for head, accepted, judged in rows:
        i = int(head) - 1
        assert int(judged) == sum(1 for e in passes if i < len(e.draft_ids) and e.details[i].judged)
        assert int(accepted) == sum(1 for e in passes if i < len(e.draft_ids) and e.accept_mask[i])
        rate = f"{int(accepted) / int(judged):.0%}" if int(judged) else "–"
        assert f"head {head}</th>" in markup and f"accepted {accepted} of {judged} judged ({rate})" in markup
    assert int(rows[0][2]) == len([e for e in passes if e.draft_ids])  # head 1 is judged at every drafted pass
    assert "draft-tree" not in out


def test_medusa_tree_keeps_the_output_and_shows_both(tiny_model_dir, shipped):
    out = _run(tiny_model_dir, drafter="medusa", tree_nodes=8, k=3)
    _greedy_identical(out)
    assert 'class="dtree-pass"' in out["draft-tree"] and 'data-heads="4"' in out["head-accuracy"]
    assert "In a tree" in out["head-accuracy"]


def test_a_target_without_heads_gets_a_clear_message(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(specviz.drafters.networks, "HEADS_DIR", tmp_path)  # no head files at all
    with no_toast():
        out = _run(tiny_model_dir, drafter="eagle", tree_nodes=4)
    status = out["status"]
    assert "status-error" in status and "No trained eagle heads fit" in status
    assert "SmolLM2-135M-Instruct" in status and "specviz train eagle" in status
    assert "Traceback" not in status and "Something went wrong" not in status
    assert not device.DEVICE.locked
    again = _run(tiny_model_dir, drafter="ngram", max_new_tokens=5)  # the session stays usable
    assert "Done in" in again["status"]


def test_heads_of_another_target_are_not_used(tiny_draft_dir, shipped):
    with no_toast():
        out = _run(tiny_draft_dir, drafter="medusa")
    assert "No trained medusa heads fit" in out["status"]


def test_tree_with_sampling_says_it_drafts_a_chain(tiny_model_dir, shipped, events):
    out = _run(tiny_model_dir, drafter="eagle", tree_nodes=10, temperature=0.8, seed=2)
    assert "Done in" in out["status"]
    assert html.escape(inputs.TREE_SAMPLING_NOTE) in out["status"]  # its wording: tests/test_messages.py
    assert "chain (trees are greedy-only)" in out["spec-output"]
    assert not any(e.tree for e in events) and "draft-tree" not in out
    greedy = _run(tiny_model_dir, drafter="eagle", tree_nodes=10, max_new_tokens=4)
    assert "greedy-only" not in greedy["status"]


# ------------------------------------------------------------------------------------------------ inputs and layout


def test_tree_nodes_input_is_checked_and_ignored_for_other_drafters():
    args = _settings_args()
    assert inputs.parse_settings({**args, "drafter": "eagle", "tree_nodes": 12}).tree_nodes == 12
    assert inputs.parse_settings({**args, "drafter": "ngram", "tree_nodes": 12}).tree_nodes == 0
    assert inputs.parse_settings({**args, "drafter": "medusa", "tree_nodes": None}).tree_nodes == 0
    sampling = inputs.parse_settings({**args, "drafter": "medusa", "tree_nodes": 5, "temperature": 0.5})
    assert sampling.drafted_tree_nodes == 0 and inputs.TREE_SAMPLING_NOTE in sampling.notes
    with pytest.raises(inputs.InputError, match="Tree nodes must be between 0 and 32"):
        inputs.parse_settings({**args, "drafter": "eagle", "tree_nodes": 33})
    with pytest.raises(inputs.InputError, match="Tree nodes must be a whole number"):
        inputs.parse_settings({**args, "drafter": "eagle", "tree_nodes": 2.5})


def test_confidence_gate_input_is_checked_and_shown_in_the_k_label(tiny_model_dir, shipped):
    args = _settings_args()
    assert inputs.parse_settings({**args, "drafter": "eagle", "confidence": 0.3}).min_confidence == 0.3
    assert inputs.parse_settings({**args, "drafter": "eagle", "confidence": ""}).min_confidence == \
        inputs.DEFAULT_MIN_CONFIDENCE
    assert inputs.parse_settings({**args, "drafter": "ngram", "confidence": 0.3}).min_confidence == 0.0  # no gate
    for bad in (1.0, -0.1, "x"):
        with pytest.raises(inputs.InputError, match="Confidence gate"):
            inputs.parse_settings({**args, "drafter": "medusa", "confidence": bad})
    out = _run(tiny_model_dir, drafter="eagle", k=3, confidence=0.9)
    _greedy_identical(out)
    assert "gate 0.9" in out["spec-output"]


@pytest.fixture
def shipped_distilled(tmp_path, tiny_target, monkeypatch):
    """A distilled draft model for the tiny target (its layers 0 and 2, noised, over every second token id), in a
    folder that stands in for ``assets/drafters`` (``specviz.drafters.distilled.DRAFTERS_DIR``)."""
    import specviz.drafters.distilled as distilled

    draft = distilled.DraftModel(tiny_target.model, [0, 2], torch.arange(0, tiny_target.vocab_size, 2))
    torch.manual_seed(0)
    with torch.no_grad():
        for p in draft.trainable():
            p.add_(0.02 * torch.randn_like(p))
    distilled.save_draft_model(draft, tmp_path / "tiny-distilled.safetensors", tiny_target.model, {})
    monkeypatch.setattr(distilled, "DRAFTERS_DIR", tmp_path)
    return tmp_path


def test_the_distilled_draft_runs_gated_by_default_with_the_baselines_ids(tiny_model_dir, shipped_distilled, events):
    """Live's distilled draft with its default gate (0.2, the confidence slider left out): greedy ids equal the
    baseline's, passes draft fewer than k where the draft is unsure (fewer drafted than with the gate at 0), and the
    pane header, the history and the acceptance card say the gate."""
    out = _run(tiny_model_dir, drafter="distilled", k=4)
    _greedy_identical(out)
    gated = [len(e.draft_ids) for e in events if e.kind == "pass"]
    assert 0 < sum(gated) < 4 * len(gated) and min(gated) < 4
    assert "k = 4 · confidence gate 0.2" in out["spec-output"] and "confidence gate 0.2" in out["history"]
    assert f"{sum(gated) / len(gated):.1f} per pass: the confidence gate 0.2" in out["stats"]
    events.clear()
    ungated = _run(tiny_model_dir, drafter="distilled", k=4, confidence=0)
    _greedy_identical(ungated)
    assert ungated["history-state"][0].identical and "confidence gate" not in ungated["spec-output"]
    assert sum(len(e.draft_ids) for e in events if e.kind == "pass") > sum(gated)


def test_drafter_menu_and_tree_control():
    demo = build_demo(max_new_tokens=40)
    components = {c.get("props", {}).get("elem_id"): c for c in demo.config["components"]}
    for elem_id in ("tree-nodes", "confidence", "lookup-first", "draft-tree", "head-accuracy"):
        assert elem_id in components, elem_id
    slider = components["tree-nodes"]["props"]
    assert slider["minimum"] == 0 and slider["maximum"] == 32 and slider["value"] == 0 and not slider["visible"]
    choices = [key for _, key in components["drafter"]["props"]["choices"]]
    assert "eagle" in choices and "medusa" in choices
    for drafter, shown in (("eagle", True), ("medusa", True), ("ngram", False), ("early-exit", False)):
        updates = live.drafter_changed(drafter)
        assert len(updates) == 10 and all(updates[i]["visible"] is shown for i in (2, 3, 4))
        assert updates[1]["visible"] is (drafter == "early-exit")
    arena_keys = [key for _, key in arena_tab.drafter_choices()]
    assert arena_keys.index("eagle:tree") == arena_keys.index("eagle") + 1 and "medusa:tree" in arena_keys
    assert arena_keys.index("eagle:lookup") == arena_keys.index("eagle") + 2 and "medusa:lookup" in arena_keys
    assert arena_keys.index("eagle:tree:lookup") == arena_keys.index("eagle") + 3 and "medusa:tree:lookup" in arena_keys


# ------------------------------------------------------------------------------------------------ tree view HTML


def _tree_event(tokens, parents, path, next_id, next_kind, emitted=None) -> PassEvent:
    shown = list(path) + [c for c, p in enumerate(parents) if p == (path[-1] if path else -1)][:1]
    n = len(path)
    return PassEvent(
        run="speculative", index=3, kind="pass", k=3, draft_ids=tuple(tokens[i] for i in shown),
        accept_mask=tuple(j < n for j in range(len(shown))), num_accepted=n, next_id=next_id, next_kind=next_kind,
        emitted_ids=tuple(tokens[i] for i in path) + (next_id,) if emitted is None else emitted,
        details=tuple(PositionDetail(0.5, 1.0, None, 0, j <= n) for j in range(len(shown))), text_delta="",
        timings=Timings(), t_end_ms=1.0, num_generated=4,
        tree=TreeRecord(tuple(tokens), tuple(parents), tuple(path), tuple(shown)))


PIECES = {0: "<|eos|>", 1: "Hello", 2: " world", 3: " <b>&", 4: "\n", 5: " again", 6: " wrong", 7: " more",
          8: " fix", 9: " yes", 10: "!"}


def test_tree_html_kinds_order_and_escaping():
    # root "Hello"; candidates: 0 " world" (accepted) -> {2 " <b>&" (accepted) -> 4 "\n" (rejected),
    # 3 " again" (rejected) -> 5 " more" (never judged)}; 1 " wrong" (rejected) -> 6 " fix" (never judged)
    tokens, parents, path = [2, 6, 3, 5, 4, 7, 8], [-1, -1, 0, 0, 2, 3, 1], [0, 2]
    event = _tree_event(tokens, parents, path, next_id=9, next_kind="recovered")
    tp = tree_pass(event, [1], PieceDecoder(FakeTokenizer(PIECES)))
    assert tp.kinds() == ["accepted", "rejected", "accepted", "rejected", "rejected", "unjudged", "unjudged"]
    markup = tree_html(tp)
    nodes = _nodes(markup)
    by = {n["data-node"]: n for n in nodes}
    assert by["root"]["data-kind"] == "root" and by["root"]["data-depth"] == "0"
    assert [n for n in by if by[n].get("data-accepted") == "true"] == ["0", "2"]
    assert by["next"]["data-kind"] == "recovered" and by["next"]["data-parent"] == "2"
    assert by["next"]["data-depth"] == "3"
    assert by["5"]["data-kind"] == "unjudged" and by["6"]["data-depth"] == "2" and by["6"]["data-parent"] == "1"
    # the accepted path runs along the top row: root, 0, 2, then the target's own token
    assert [n["data-node"] for n in nodes][:4] == ["root", "0", "2", "next"]
    assert "&lt;b&gt;&amp;" in markup and "<b>&" not in markup and "⏎" in markup  # escaped; newline made visible
    # a rejected node's hover text says what the target chose there: the accepted sibling, or its own token
    assert "the target&#x27;s choice here: &#x27; world&#x27;" in markup  # on node 1
    assert "the target&#x27;s choice here: &#x27; yes&#x27;" in markup  # on node 4
    assert markup.count("depth ") >= 3 and 'data-path="0,2"' in markup
    # "candidate N of M", the form of the token pane's "draft N of M"
    assert 'title="pass 3 · candidate 1 of 7 · depth 1 · accepted&#10;' in markup
    assert 'title="pass 3 · candidate 2 of 7 · depth 1 · rejected by the target&#10;' in markup


def test_tree_view_bonus_cut_and_history():
    view = TreeView(FakeTokenizer(PIECES))
    view.add(_tree_event([2, 6], [-1, -1], [0], next_id=9, next_kind="bonus"), [1])
    cut = _tree_event([10, 0], [-1, 0], [0, 1], next_id=7, next_kind="bonus", emitted=(10, 0))  # EOS in the path
    view.add(cut, [1, 2, 9])
    markup = view.html(every_pass=True)
    assert markup.count('class="dtree-pass"') == 2 and "Other passes" in markup
    nxt = [n for n in _nodes(markup) if n["data-node"] == "next"]
    assert [n["data-kind"] for n in nxt] == ["bonus", "bonus"]
    assert "not emitted" in _first_tree(markup)
    assert view.html().count('class="dtree-pass"') == 1  # streaming: the latest only
    assert TreeView(FakeTokenizer(PIECES)).html() == ""


def test_tree_view_opens_the_longest_path_at_the_end():
    view = TreeView(FakeTokenizer(PIECES))
    view.add(_tree_event([2, 6, 3], [-1, -1, 0], [0, 2], next_id=9, next_kind="bonus"), [1])
    view.add(_tree_event([6, 5], [-1, -1], [], next_id=2, next_kind="recovered"), [1, 2, 3, 9])
    view.add(_tree_event([3, 7], [-1, 0], [0], next_id=8, next_kind="recovered"), [1, 2, 3, 9, 2])
    streaming = view.html()
    assert 'data-accepted-count="1" open' in streaming and "latest tree pass" in streaming
    final = view.html(every_pass=True)
    opened = [m for m in re.findall(r'<details class="dtree-pass"[^>]*>', final) if m.endswith(" open>")]
    assert len(opened) == 1 and 'data-accepted-count="2"' in opened[0]
    assert "the longest accepted path of the run" in final and "3 tree passes" in final and final.count('class="dtree-pass"') == 3
    # lookup first: passes that copied have no tree, and the caption says how many there were
    copy = dataclasses.replace(_tree_event([5], [-1], [0], next_id=7, next_kind="bonus"), draft_source="lookup", tree=None)
    view.add(copy, [1, 2, 3, 9, 2, 3, 8])
    assert "(1 other pass copied by lookup" in view.html(every_pass=True)
    assert view.html(every_pass=True).count('class="dtree-pass"') == 3


def test_a_copied_branch_is_marked_in_the_tree_and_the_pane():
    from app.render import Pane

    # root "Hello"; the head's candidates 0 " world" -> 2 " again"; lookup copied " world" " <b>&" (0 -> 3), and
    # " fix" (1); the target accepted " world" " <b>&" (the copy) and then said "!" (bonus)
    tokens, parents, path = [2, 8, 5, 3], [-1, -1, 0, 0], [0, 3]
    event = dataclasses.replace(_tree_event(tokens, parents, path, next_id=10, next_kind="bonus"),
                                draft_source="lookup")
    event = dataclasses.replace(event, tree=dataclasses.replace(event.tree, copied=(0, 3)))
    assert event.copied_drafts == (True, True)  # the shown path: 0, 3 (no rejected child after a leaf)
    view = TreeView(FakeTokenizer(PIECES))
    view.add(event, [1])
    markup = view.html(every_pass=True)
    copied = [n["data-node"] for n in _nodes(markup) if "data-copied" in n]
    assert copied == ["0", "3"] and "4 candidates (2 copied by lookup)" in markup
    assert "italic nodes with a grey bar were copied by lookup" in markup
    # the column after the deepest candidate (depth 2) holds only the target's own token: named so, not "depth 3"
    assert "<span>depth 2</span><span>target</span>" in markup and "depth 3" not in markup
    sized = TreeView(FakeTokenizer(PIECES), max_nodes=8, gate=0.15)
    sized.add(event, [1])
    assert "; up to 8 candidates a pass, fewer where the confidence gate (0.15) leaves unlikely ones out" in sized.html()
    assert "other pass" not in markup  # a tree with a copied branch is a tree pass, not a copied chain
    pane = Pane(FakeTokenizer(PIECES))
    pane.add(event)
    drafted = [t for t in pane.passes[0] if t.kind == "accepted"]
    assert [t.token_id for t in drafted] == [2, 3] and all("copied by n-gram lookup" in t.title for t in drafted)
    head_only = dataclasses.replace(event, tree=dataclasses.replace(event.tree, copied=(1,)))
    assert head_only.copied_drafts == (False, False)
    pane = Pane(FakeTokenizer(PIECES))
    pane.add(head_only)
    assert not pane.copied_passes and not any("copied" in t.title for t in pane.passes[0])


def test_head_accuracy_counts_judged_positions():
    acc = HeadAccuracy(4)
    acc.add(_tree_event([2, 6, 3], [-1, 0, 1], [0, 1, 2], next_id=9, next_kind="bonus"))
    acc.add(_tree_event([2, 6, 3], [-1, 0, 1], [0], next_id=9, next_kind="recovered"))
    assert acc.rows() == [(1, 2, 2, 1.0), (2, 1, 2, 0.5), (3, 1, 1, 1.0), (4, 0, 0, None)]
    assert "accepted 1 of 2 judged (50%)" in acc.html() and "accepted 0 of 0 judged (–)" in acc.html()
    copied = dataclasses.replace(_tree_event([2, 6], [-1, 0], [0, 1], next_id=9, next_kind="bonus"),
                                 draft_source="lookup", tree=None)
    acc.add(copied)  # a pass copied by lookup first: not the heads' guesses, so not counted
    assert acc.rows()[0] == (1, 2, 2, 1.0) and "1 pass copied by lookup first is left out" in acc.html()


# ------------------------------------------------------------------------------------------------ the Arena


def test_arena_keys_for_trees():
    assert is_drafter_key("eagle:tree") and is_drafter_key("medusa") and not is_drafter_key("ngram:tree")
    assert [v.label for v in variants(["eagle", "eagle:tree"], [2])] == ["standard", "eagle k=2", "eagle:tree k=2"]
    with pytest.raises(ValueError, match="unknown drafter 'ngram:tree'"):
        variants(["ngram:tree"], [2])


ARENA = dict(ks=["2"], source="prompt", prompt=PROMPT, category="qa", max_new_tokens=12, draft_model="", exit_layer=0,
             temperature=0.0, seed=0, chat_template=True)


def test_arena_races_eagle_chain_and_tree(tiny_model_dir, shipped):
    from arena_support import drain as arena_drain

    out = arena_drain(arena_tab.run(**ARENA, drafters=["eagle", "eagle:tree", "eagle:tree:lookup"],
                                    target=str(tiny_model_dir)))
    methods = [row[1] for row in out["arena-table"]["data"]]
    assert methods == ["standard", "eagle k=2", "eagle:tree k=2", "eagle:tree:lookup k=2"]
    assert all(row[-1] == "✓" for row in out["arena-table"]["data"] if row[1] != "standard")
    assert "Done" in out["arena-status"] and "greedy-only" not in out["arena-status"]
    headers = out["arena-timings"]["headers"]  # the predictions and their timings: the Arena's second table
    chain, tree, _ = out["arena-timings"]["data"][1:]
    for column in ("c", "Predicted, paper", "Predicted, measured costs"):  # chain formulas: not for a tree
        assert chain[headers.index(column)] != "–" and tree[headers.index(column)] == "–"


def test_arena_without_heads_and_with_sampling(tiny_model_dir, tmp_path, monkeypatch, heads_folder):
    from arena_support import drain as arena_drain

    monkeypatch.setattr(specviz.drafters.networks, "HEADS_DIR", tmp_path)
    with no_toast():
        out = arena_drain(arena_tab.run(**ARENA, drafters=["ngram", "medusa:tree"], target=str(tiny_model_dir)))
    assert "status-error" in out["arena-status"] and "No trained medusa heads fit" in out["arena-status"]
    assert "Traceback" not in out["arena-status"]
    monkeypatch.setattr(specviz.drafters.networks, "HEADS_DIR", heads_folder)
    out = arena_drain(arena_tab.run(**(ARENA | {"temperature": 0.7, "max_new_tokens": 8}),
                                    drafters=["medusa:tree"], target=str(tiny_model_dir)))
    assert "Done" in out["arena-status"] and "greedy-only" in out["arena-status"]


def test_the_tree_panel_never_features_a_path_past_the_end_of_the_answer():
    """Seen in the app: the finished run's tree panel featured, as "the longest accepted path", a last pass whose path
    ran past the end of the answer (". <|im_end|> ⏎ <|im_end|>", "4 accepted"), tokens the stats count as neither
    drafted nor accepted. The panel ranks passes by the counters' own rule (PassEvent.committed_accepted)."""
    view = TreeView(FakeTokenizer(PIECES))
    inside = _tree_event([2, 5, 4, 6], [-1, 0, 1, -1], [0, 1, 2], next_id=9, next_kind="bonus")  # 3 accepted, all in
    view.add(inside, [1])
    # the last pass: "!" then EOS (0) then " again", " yes" all accepted by the verifier; the answer ends at EOS
    past = dataclasses.replace(_tree_event([10, 0, 5, 9], [-1, 0, 1, 2], [0, 1, 2, 3], next_id=7, next_kind="bonus",
                                           emitted=(10, 0)), finish_reason="eos")
    assert past.num_accepted == 4 and past.committed_accepted == 2
    view.add(past, [1, 2, 5, 4, 9])
    final = view.html(every_pass=True)
    opened = [m for m in re.findall(r'<details class="dtree-pass"[^>]*>', final) if m.endswith(" open>")]
    assert len(opened) == 1 and 'data-pass="3"' in opened[0]
    assert 'data-counted="3" data-accepted-count="3"' in opened[0]
    assert 'data-counted="2" data-accepted-count="4"' in final  # the last pass, listed closed below
    assert "4 accepted (2 after the end of the answer: not counted as accepted)" in final
    assert "pass 3, the longest accepted path of the run&#x27;s 2 tree passes" in final
    alone = TreeView(FakeTokenizer(PIECES))
    alone.add(past, [1])
    assert "4 accepted (2 after the end" in alone.html(every_pass=True)


def test_the_tree_panel_opens_the_best_pass_before_the_end_of_the_answer():
    """Trial (EAGLE, tree 10, greedy): the finished run's panel opened on its last pass, ". <|im_end|> ⏎ <|im_end|>"
    (2 counted, as many as any pass, and ties went to the latest). It opens the pass with the most accepted tokens
    (the latest of equals) among those that did not reach the end of the answer; the last pass only when alone."""
    from types import SimpleNamespace

    from app.tree_view import best_pass

    view = TreeView(FakeTokenizer(PIECES))
    for index, (tokens, parents, path, nxt, context) in enumerate((
            ([2, 5, 6], [-1, 0, -1], [0, 1], 9, [1]),  # 2 accepted
            ([3, 6], [-1, -1], [0], 5, [1, 2, 5, 9]),  # 1 accepted
            ([2, 5, 4], [-1, 0, 0], [0, 1], 9, [1, 2, 5, 9, 3, 5])), start=1):  # 2 accepted: the latest of equals
        view.add(dataclasses.replace(_tree_event(tokens, parents, path, nxt, "bonus"), index=index), context)
    # the last pass: "!" EOS accepted, then "\n" EOS past the end; 2 counted, as many as passes 1 and 3
    past = dataclasses.replace(_tree_event([10, 0, 4, 0], [-1, 0, 1, 2], [0, 1, 2, 3], next_id=7, next_kind="bonus",
                                           emitted=(10, 0)), index=4, finish_reason="eos")
    view.add(past, [1, 2, 5, 9, 3, 5, 2, 5, 9])
    assert [tp.counted for tp in view.passes] == [2, 1, 2, 2]
    assert [tp.reached_end for tp in view.passes] == [False, False, False, True]
    final = view.html(every_pass=True)
    opened = [m for m in re.findall(r'<details class="dtree-pass"[^>]*>', final) if m.endswith(" open>")]
    assert len(opened) == 1 and 'data-pass="3"' in opened[0]
    assert ("pass 3, the longest accepted path of the run&#x27;s 4 tree passes, leaving out the pass that reached "
            "the end of the answer;") in final
    assert re.findall(r'<details class="dtree-pass" data-pass="(\d+)"', final) == ["3", "4", "2", "1"]  # all listed
    # a pass whose whole path counted still reached the end when the run ended in it (the token budget)
    budget = dataclasses.replace(_tree_event([2, 5], [-1, 0], [0, 1], next_id=9, next_kind="bonus"),
                                 finish_reason="length")
    assert tree_pass(budget, [1], PieceDecoder(FakeTokenizer(PIECES))).reached_end
    # the choice on its own: the most accepted among the eligible passes, the latest of equals; else the latest
    passes = [SimpleNamespace(index=i, counted=c, end=i == 8) for i, c in ((5, 3), (6, 1), (7, 3), (8, 4))]
    pick = best_pass(passes, 4, lambda p: p.counted, "the longest accepted path", "tree pass", lambda p: not p.end)
    assert pick == (passes[2], "pass 7, the longest accepted path of the run's 4 tree passes")
    assert best_pass(passes, 4, lambda p: p.counted, "m", "tree pass", lambda p: False) == (
        passes[3], "pass 8, the latest of the run's 4 tree passes")
    assert best_pass(passes, 4, lambda p: p.counted, "m", "tree pass")[0] is passes[3]  # no filter: as before
    alone = TreeView(FakeTokenizer(PIECES))
    alone.add(past, [1])
    shown = alone.html(every_pass=True)
    assert 'data-pass="4"' in shown and "pass 4, the latest of the run&#x27;s 1 tree pass;" in shown
