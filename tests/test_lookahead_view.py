"""Lookahead decoding in the app: the window-and-pool view (app/lookahead_view.py) from a real run on the tiny
target, the pane's hover for pool drafts, the stats card's definitions, the Live tab's settings and handler."""

from __future__ import annotations

import html
import json
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import inputs, live, render  # noqa: E402
from app.lookahead_view import LookaheadView  # noqa: E402
from app.records import RunSummary  # noqa: E402
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate  # noqa: E402
from specviz.drafters.lookahead import LookaheadDrafter  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402

W, N, G = 3, 4, 2


def _run(tiny_target, drafter=None, tokens: int = 60):
    prompt = tiny_target.tokenizer.encode(" the cat sat on the mat", add_special_tokens=False) * 12
    config = GenerationConfig(max_new_tokens=tokens, k=N - 1)
    events = standard_generate(tiny_target, prompt, config) if drafter is None else \
        speculative_generate(tiny_target, drafter, prompt, config)
    return collect(events, tiny_target.tokenizer, prompt)


@pytest.fixture(scope="module")
def run(tiny_target):
    """A real lookahead run on repeated text (the pool fills and candidates win), and its baseline."""
    return _run(tiny_target, LookaheadDrafter(W, N, G)), _run(tiny_target)


def _view(run, tokenizer) -> tuple[LookaheadView, list]:
    view, output, passes = LookaheadView(tokenizer, N), [], []
    for event in run.events:
        view.add(event, list(run.prompt_ids) + output)
        output.extend(event.emitted_ids)
        passes.append(event)
    return view, passes


def _block(markup: str, index: int) -> str:
    """The <details> block of pass ``index``."""
    start = markup.index(f'<details class="la-pass" data-pass="{index}"')
    return markup[start:markup.index("</details>", start)]


def test_the_view_shows_the_window_levels_columns_and_the_winner(run, tiny_target):
    spec, base = run
    assert spec.token_ids == base.token_ids
    view, events = _view(spec, tiny_target.tokenizer)
    won = [e for e in events if e.lookahead is not None and e.lookahead.winner is not None
           and len(e.lookahead.levels) == N - 1 and e.lookahead.accepted > 0]
    assert won, "repeated text should give a full window and a winning candidate"
    markup = view.html(every_pass=True)
    for event in won[:5]:
        record, block = event.lookahead, _block(markup, event.index)
        assert len(re.findall(r'<tr class="la-level"', block)) == N - 1
        rows = re.findall(r'<tr class="la-level" data-level="(\d)">(.*?)</tr>', block)
        assert [int(level) for level, _ in rows] == list(range(N - 1))
        assert all(len(re.findall(r'data-kind="guess"', cells)) == W for _, cells in rows)
        assert re.findall(r'data-id="(\d+)"', rows[0][1]) == [str(t) for t in record.levels[0]]
        assert len(re.findall(r'data-kind="jacobi"', block)) == W
        assert f'data-columns="{W}"' in block and f'data-pool="{record.pool_size}"' in block
        assert len(re.findall(r'<li class="la-cand', block)) == len(record.candidates) <= G
        winner = re.search(r'<li class="la-cand la-winner" data-candidate="(\d+)" data-winner="true" '
                           r'data-accepted="(\d+)">(.*?)</li>', block)
        assert winner and int(winner.group(1)) == record.winner and int(winner.group(2)) == record.accepted
        assert winner.group(3).count('data-kind="accepted"') == record.accepted == event.num_accepted
        shown = re.findall(r'data-kind="(?:accepted|rejected)" data-id="(\d+)"', winner.group(3))
        assert [int(t) for t in shown] == list(event.draft_ids)
    assert f'data-lookahead-passes="{view.total}"' in markup and view.total == len(
        [e for e in events if e.lookahead is not None])


def test_the_winners_verdict_counts_what_the_step_table_counts(run, tiny_target):
    """Seen in the Classroom's lookahead walkthrough: the step table said "0 of 1 accepted" (the event's draft:
    the accepted tokens and the first rejected one) and the winner's card "0 of 2" (the whole candidate). The card
    now counts the judged tokens too and names the ones after the rejection as never judged."""
    from app.lookahead_view import _winner_verdict

    assert _winner_verdict(0, 2) == "winner: 0 of 1 accepted · 1 never judged"
    assert _winner_verdict(1, 3) == "winner: 1 of 2 accepted · 1 never judged"
    assert _winner_verdict(2, 2) == "winner: 2 of 2 accepted"
    view, events = _view(run[0], tiny_target.tokenizer)
    markup = view.html(every_pass=True)
    won = [e for e in events if e.lookahead is not None and e.lookahead.winner is not None]
    assert any(e.num_accepted < len(e.lookahead.candidates[e.lookahead.winner]) - 1 for e in won)
    for event in won:
        verdict = re.search(r'<small class="la-verdict">winner: (\d+) of (\d+) accepted', _block(markup, event.index))
        assert (int(verdict.group(1)), int(verdict.group(2))) == (event.num_accepted, len(event.draft_ids))


def test_the_latest_pass_while_streaming_and_a_pass_with_no_candidate(run, tiny_target):
    spec, _ = run
    view, events = _view(spec, tiny_target.tokenizer)
    latest = view.html()
    assert latest.count('<details class="la-pass"') == 1
    assert f'data-pass="{[e for e in events if e.lookahead is not None][-1].index}"' in latest
    first = next(e for e in events if e.lookahead is not None)  # the pool is empty at the first pass
    assert not first.lookahead.candidates
    assert "No n-gram in the pool" in _block(view.html(every_pass=True), first.index)
    assert "still filling" in _block(view.html(every_pass=True), first.index)


def test_k_auto_plain_steps_are_counted_not_hidden(run, tiny_target):
    """k = auto gates whole passes: a pass without a lookahead branch (a plain one-token step, k = 0) is not drawn,
    but the view's head says how many there were, so its pass count adds up to the pane's."""
    import dataclasses

    spec, _ = run
    view, events = _view(spec, tiny_target.tokenizer)
    plain_steps = [e for e in events if e.kind == "pass" and e.lookahead is None]  # e.g. a last pass of one token
    assert view.plain_steps == len(plain_steps)
    plain = dataclasses.replace(next(e for e in events if e.lookahead is not None), lookahead=None)
    view.add(plain, list(spec.prompt_ids) + list(spec.token_ids))
    view.add(plain, list(spec.prompt_ids) + list(spec.token_ids))
    n = len(plain_steps) + 2
    assert view.plain_steps == n and view.total == len([e for e in events if e.lookahead is not None])
    assert f"{view.total} lookahead passes (and {n} plain one-token steps, k = 0, not shown)" in view.html()
    assert view.total + view.plain_steps == len(events) - 1 + 2  # every pass of the run (the prefill is none)


def test_pool_drafts_say_so_on_hover_and_the_stats_card_defines_drafted(run, tiny_target):
    spec, base = run
    pane, stats, base_stats = render.Pane(tiny_target.tokenizer), RunStats(), RunStats()
    for event in spec.events:
        pane.add(event)
        stats.add(event)
    for event in base.events:
        base_stats.add(event)
    titles = re.findall(r'data-kind="(?:accepted|rejected)"[^>]*title="([^"]*)"', pane.html())
    assert titles and all("n-gram pool" in t for t in titles)
    assert pane.output_ids == list(base.token_ids)
    html = render.stats_html(stats, base_stats, render.compare_outputs(pane.output_ids, list(base.token_ids), [],
                                                                       tiny_target.tokenizer, greedy=True,
                                                                       finished=True), greedy=True)
    assert "Window tokens per pass (not verified)" in html and "k = N−1" in html
    per_pass = f"{stats.window_tokens / stats.passes:.1f} <small>window tokens / pass</small>"
    assert per_pass in html  # never read as the emitted tokens per pass
    assert f"{stats.window_tokens} window tokens" in html and f"{stats.drafted} candidate tokens verified" in html


def test_settings_take_w_n_g_and_set_k_to_n_minus_one():
    base = dict(live.DEFAULTS, prompt="x", drafter="lookahead", k=9, adaptive_k="auto")
    s = inputs.parse_settings({**base, "window": 5, "ngram": 4, "candidates": 3})
    assert (s.window, s.ngram, s.candidates, s.k, s.k_schedule) == (5, 4, 3, 3, "auto")  # gated: GateK
    assert live.k_label(s) == "k = 3 (N−1) or a plain step (auto) · W = 5, N = 4, G = 3"
    s = inputs.parse_settings({**base, "window": 5, "ngram": 4, "candidates": 3, "adaptive_k": "heuristic"})
    assert (s.k, s.k_schedule) == (3, "fixed") and live.k_label(s) == "k = 3 (N−1) · W = 5, N = 4, G = 3"
    assert inputs.parse_settings({**base, "drafter": "ngram", "window": 99}).k == 9  # other drafters: unchecked
    sampled = inputs.parse_settings({**base, "temperature": 0.7})
    assert inputs.LOOKAHEAD_SAMPLING_NOTE in sampled.notes
    for change, words in (({"ngram": 1}, "N-gram size N must be between 2 and 8"),
                          ({"window": 0}, "Window W must be between 1 and 16"),
                          ({"candidates": "many"}, "Candidates G must be a number")):
        with pytest.raises(inputs.InputError, match=words):
            inputs.parse_settings({**base, **change})
    updates = live.drafter_changed("lookahead")
    assert [u.get("visible") for u in updates[-3:]] == [True, True, True]
    assert updates[5]["interactive"] is False and live.drafter_changed("ngram")[-1]["visible"] is False
    assert updates[6]["interactive"] is True and live.drafter_changed("none")[6]["interactive"] is False  # schedule
    back = live.drafter_changed("eagle", 3, 6)[5]  # leaving lookahead: the visitor's own k comes back
    assert back["value"] == 6 and back["interactive"] is True


def test_live_lookahead_run_matches_the_baseline(tiny_model_dir):
    from tests.test_live import _args, drain

    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="lookahead", window=W, ngram=N,
                                      candidates=G, max_new_tokens=40,
                                      prompt="the cat sat on the mat and the cat sat on the mat and the cat")))
    row = out["history-state"][0]
    assert "Done in" in out["status"] and row.identical is True and row.drafter.startswith("lookahead")
    assert row.k == f"k = {N - 1} (N−1) · W = {W}, N = {N}, G = {G}" and row.lookahead == (W, N, G)
    assert 'class="la-window"' in out["draft-tree"] and "Window tokens per pass (not verified)" in out["stats"]


def test_the_classroom_walkthrough_reveals_a_lookahead_pass_phase_by_phase():
    from app import classroom
    from specviz.analysis.stepper import Stepper

    file = classroom.shipped_recording("lookahead-jacobi")
    assert file is not None and file.recording.greedy and file.recording.drafter_name.startswith("lookahead")
    stepper = Stepper(file.recording)
    index = next(i for i, e in enumerate(file.recording.events) if e.lookahead is not None
                 and e.lookahead.winner is not None and e.num_accepted > 0)
    event, seen = file.recording.events[index], {}
    for phase in ("draft", "verify", "decide"):
        stepper.goto(next(s for s in stepper.steps if s.pass_index == index and s.phase == phase))
        seen[phase] = (classroom.table_html(stepper), stepper.caption())
    width = len(event.lookahead.new_level)
    draft, verify, decide = (seen[p][0] for p in ("draft", "verify", "decide"))
    assert draft.count('data-kind="pending"') == width and 'data-kind="jacobi"' not in draft
    assert 'data-winner="true"' not in draft and 'data-kind="candidate"' in draft
    assert verify.count('data-kind="jacobi"') == width and 'data-winner="true"' not in verify
    assert f'data-winner="true" data-accepted="{event.lookahead.accepted}"' in decide
    assert "no draft model" in seen["draft"][1] and "Jacobi iteration" in seen["verify"][1]
    assert all(str(t) in file.recording.token_texts or t in file.recording.token_texts
               for level in event.lookahead.levels for t in level)  # the window's tokens have their text


def test_the_arena_runs_lookahead(tiny_target):
    from app.arena import drafter_choices
    from specviz.analysis.arena import run_arena

    assert "lookahead" in [key for _, key in drafter_choices()]
    result = run_arena(tiny_target, [{"id": "p", "category": "qa", "prompt": "the cat sat on the mat the cat sat"}],
                       ["lookahead"], [2], GenerationConfig(max_new_tokens=16), warmup_tokens=0)
    assert result.ids_identical is True and [v.label for v in result.variants] == ["standard", "lookahead k=2"]


def test_the_cost_of_a_lookahead_pass_in_the_bench_and_the_why_tab():
    from app import why
    from specviz.drafters.lookahead import forward_tokens
    from specviz.measure.costs import (describe_lookahead_cost, kernel_lookahead_cost, lookahead_cost_line,
                                       lookahead_pass_cost)

    assert forward_tokens(3, 3, 2) == 11 and forward_tokens(4, 4, 4) == 25
    cost = lookahead_pass_cost({1: 10.0, 8: 12.0, 16: 20.0}, 3, 3, 2)  # T(11) = 12 + 8 * 3/8 = 15
    assert (cost["tokens"], cost["pass_ms"], cost["ratio"], cost["measured"]) == (11, 15.0, 1.5, False)
    assert describe_lookahead_cost(cost) == ("lookahead pass at W=3, N=3, G=2: 11 tokens, T(11)/T(1) = 1.50 "
                                             "(interpolated)")
    kernel = {"curve": [{"new_tokens": n, "ms": ms} for n, ms in ((1, 10.0), (11, 16.0), (32, 40.0))],
              "settings": {"prompt_len": 64}}
    assert kernel_lookahead_cost(kernel, 3, 3, 2)["ratio"] == 1.6
    assert "pays only above 1.60 tokens per pass" in lookahead_cost_line(kernel_lookahead_cost(kernel))
    history = [RunSummary(drafter="n-gram", k="k = 4"),
               RunSummary(drafter="lookahead (W=5, N=4, G=3)", lookahead=(5, 4, 3))]
    assert why.lookahead_settings(history) == [(5, 4, 3), (3, 3, 2)] and why.lookahead_settings([]) == [(3, 3, 2)]
    grid = {"ms": {1: {1: 10.0, 8: 12.0, 16: 20.0, 32: 40.0}}, "param_bytes": 1e6}
    html = why.summary_html(grid, None, why.lookahead_settings(history))
    assert "Lookahead pass (W=5, N=4, G=3)" in html and "your latest Live run" in html
    assert "1 + W(N−1) + G(N−1) = 25 tokens" in html and "Lookahead pass (W=3, N=3, G=2)" in html


def test_bench_commands_print_the_lookahead_pass_cost(capsys, tiny_model_dir):
    from specviz.cli import main

    code = main(["bench", "--target", str(tiny_model_dir), "--device", "cpu", "--drafters", "lookahead", "--k", "2",
                 "--max-new-tokens", "8", "--repeats", "1", "--limit", "1", "--no-transformers", "--window", "2",
                 "--candidates", "1", "--threads", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ours/lookahead@k2" in out and "lookahead pass at W=2, N=3, G=1: 7 tokens, T(7)/T(1) = " in out
    code = main(["bench", "--kernel", "--target", str(tiny_model_dir), "--device", "cpu", "--drafters", "ngram",
                 "--json"])
    out, err = capsys.readouterr()
    cost = json.loads(out)["lookahead_cost"]
    assert code == 0 and (cost["tokens"], cost["measured"]) == (11, True) and cost["ratio"] > 0


def test_the_classroom_what_if_explains_that_lookahead_has_no_k_to_choose():
    from app import classroom

    (out,) = list(classroom.whatif_run("the cat", "lookahead", 0, "", 0, "embedded", 4, 16))
    assert "k is fixed by its n-gram size" in out[1] and "Traceback" not in out[1]


def test_the_end_of_run_title_names_the_best_pass_even_when_it_is_the_latest(run, tiny_target):
    spec, _ = run
    view, _ = _view(spec, tiny_target.tokenizer)
    best = max(range(len(view.passes)), key=lambda i: (view.passes[i].accepted, i))
    view.passes = view.passes[:best + 1]  # the best pass is now the newest one kept
    title = re.search(r"<div class='dtree-title'>.*?<span>(.*?) · ", view.html(every_pass=True)).group(1)
    assert title.startswith(f"pass {view.passes[-1].index}") and "most accepted tokens" in title
    assert "latest pass" not in title and ("(the latest)" in title) == (len(view.passes) > 1)
    assert re.search(r"<span>latest pass · ", view.html())  # while streaming: the latest pass


def test_the_end_of_run_captions_are_the_shared_tree_view_ones(run, tiny_target):
    """LookaheadView.html uses app.tree_view's best_pass and earlier_passes_html (it had its own copy): the same
    words as before, whole: the best pass's caption and the title of the other passes, with the older ones counted."""
    spec, _ = run
    view, _ = _view(spec, tiny_target.tokenizer)
    assert len(view.passes) > 1
    best = max(range(len(view.passes)), key=lambda i: (view.passes[i].accepted, i))
    view.total = len(view.passes) + 5  # as if 5 older passes were not kept
    page = view.html(every_pass=True)
    latest = " (the latest)" if best == len(view.passes) - 1 else ""
    caption = (f"pass {view.passes[best].index}{latest}, the most accepted tokens of the run's last "
               f"{len(view.passes)} kept passes")
    title = re.search(r"<div class='dtree-title'>Lookahead decoding <span>(.*?) · ", page).group(1)
    assert title == html.escape(caption)  # the page escapes the apostrophe of "run's"
    from app.tree_view import earlier_passes_html  # its wording: tests/test_messages.py

    listed = earlier_passes_html("", 5).removesuffix("</div>")  # the list's title, counting the 5 not kept
    assert listed in page and "5 older not kept" in listed
    assert page.count('class="dtree-earlier"') == 1


def test_the_lookahead_panel_never_features_a_pass_past_the_end_of_the_answer():
    """The finished run's panel ranks passes by the counters' own rule (PassEvent.committed_accepted): a last pass
    whose winner's accepted tokens run past EOS counts only those inside the answer, and says so."""
    from app.lookahead_view import LookaheadView
    from specviz.core.events import LookaheadRecord, PassEvent, Timings

    class Pieces:
        all_special_ids = []

        def decode(self, ids, **kwargs):
            return "".join(f"<{i}>" for i in ids)

    def event(index, candidate, accepted, emitted, finish=None):
        record = LookaheadRecord(levels=((11, 12),), new_level=(13, 14), candidates=(candidate,), winner=0,
                                 accepted=accepted, pool_size=5)
        shown = candidate[:accepted + 1]
        return PassEvent(run="speculative", index=index, kind="pass", k=len(candidate), draft_ids=shown,
                         accept_mask=tuple(j < accepted for j in range(len(shown))), num_accepted=accepted,
                         next_id=9, next_kind="bonus" if accepted == len(candidate) else "recovered",
                         emitted_ids=emitted, details=(), text_delta="", timings=Timings(), t_end_ms=1.0,
                         num_generated=4, finish_reason=finish, lookahead=record)

    view = LookaheadView(Pieces(), 4)
    view.add(event(1, (5, 6, 7), 2, (5, 6, 8)), [1])  # 2 accepted, both in the answer, then its own token
    past = event(2, (0, 4, 4), 3, (0,), "eos")  # all 3 accepted by the verifier; the answer ends at EOS (0)
    assert past.committed_accepted == 1 and past.num_accepted == 3
    view.add(past, [1, 5, 6, 8])
    page = view.html(every_pass=True)
    title = re.search(r"<div class='dtree-title'>Lookahead decoding <span>(.*?) · ", page).group(1)
    assert title == html.escape("pass 1, the most accepted tokens of the run's 2 kept passes")  # not pass 2's 3
    assert "candidate 1 won: 3 tokens accepted (2 after the end of the answer: not counted as accepted)" in page
    assert "candidate 1 won: 2 tokens accepted" in _block(page, 1) and view.accepted == 2 + 1


def test_the_pane_header_names_w_n_and_g_once():
    """A new user's trial: the lookahead pane's header read "(W=5, N=4, G=3) · k = 3 (N−1) · W = 5, N = 4, G = 3"."""
    base = dict(live.DEFAULTS, prompt="x", drafter="lookahead", k=9, adaptive_k="fixed")
    s = inputs.parse_settings({**base, "window": 5, "ngram": 4, "candidates": 3})
    name = LookaheadDrafter(window=5, ngram=4, candidates=3).name
    assert name == "lookahead (W=5, N=4, G=3)"
    assert live.view.pane_title(name, s) == ("lookahead", "k = 3 (N−1) · W = 5, N = 4, G = 3")
    view = live.RunView(s, "tiny", name, render.Pane(None), render.Pane(None, separators=False))
    header = html.unescape(view.spec_html())
    assert header.count("W = 5") == 1 and "W=5" not in header and "Speculative · lookahead<" in header
    ngram = inputs.parse_settings({**base, "drafter": "ngram"})  # other drafters keep their parenthetical
    assert live.view.pane_title("n-gram lookup (1-3)", ngram) == ("n-gram lookup", "(1\u20113) · k = 9")
