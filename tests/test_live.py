"""The app without a browser: token HTML, figures and the generate handler on tiny models (input checks:
test_live_inputs.py)."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import threading
import time

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from app import DEFAULTS, build_demo, device, figures, inputs, live, render  # noqa: E402
from drain_support import is_update, last_output, last_values  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402
from toast_support import no_toast  # noqa: E402


# ------------------------------------------------------------------------------------------ hand-made events


class FakeTokenizer:
    """Maps ids to fixed strings; id 0 is a special EOS."""

    def __init__(self, pieces: dict[int, str]) -> None:
        self.pieces = pieces
        self.all_special_ids = [0]

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(self.pieces[i] for i in ids if not (skip_special_tokens and i == 0))


PIECES = {0: "<|eos|>", 1: "Hello", 2: " world", 3: " <b>&", 4: "\n", 5: " again", 6: " wrong", 7: " more",
          8: " fix", 9: " yes", 10: "!"}


def _event(run="speculative", index=1, draft=(), n=0, next_id=None, next_kind="target", emitted=None, finish=None,
           t_end=10.0, generated=1, uniforms=None, gap=None, k=None):
    details = tuple(
        PositionDetail(target_prob=0.9 if i < n else 0.1, draft_prob=1.0,
                       uniform=None if uniforms is None else uniforms[i], target_top_id=8, judged=i <= n)
        for i in range(len(draft)))
    if emitted is None:
        emitted = tuple(draft[:n]) + (next_id,)
    return PassEvent(
        run=run, index=index, kind="prefill" if index == 0 else "pass", k=len(draft) if k is None else k,
        draft_ids=tuple(draft), accept_mask=tuple(i < n for i in range(len(draft))), num_accepted=n, next_id=next_id,
        next_kind=next_kind, emitted_ids=tuple(emitted), details=details, text_delta="",
        timings=Timings(1.0, 5.0, 0.5), t_end_ms=t_end, num_generated=generated, finish_reason=finish,
        near_tie_gap=gap, next_k=len(draft),
    )


def _spec_events():
    return [
        _event(index=0, next_id=1, emitted=(1,), generated=1),  # prefill: "Hello"
        # drafted " world", " <b>&", " wrong", " more": 2 accepted, " wrong" rejected, " more" never judged
        _event(index=1, draft=(2, 3, 6, 7), n=2, next_id=8, next_kind="recovered", generated=4, t_end=20),
        # drafted "\n", " again": both accepted, bonus " yes"
        _event(index=2, draft=(4, 5), n=2, next_id=9, next_kind="bonus", generated=7, t_end=30),
        # last pass: drafted "!", EOS; cut at EOS inside the accepted block
        _event(index=3, draft=(10, 0, 5), n=3, next_id=7, next_kind="bonus", emitted=(10, 0), finish="eos",
               generated=9, t_end=40),
    ]


def _spans(markup: str) -> list[dict]:
    return [dict(re.findall(r'(data-kind|data-pass|class)="([^"]*)"', m)) | {"text": t}
            for m, t in re.findall(r"<span (class=\"tok[^>]*)>(.*?)</span>", markup, re.S)]


def test_token_spans_carry_kind_and_pass():
    pane = render.Pane(FakeTokenizer(PIECES))
    for event in _spec_events():
        pane.add(event)
    spans = _spans(pane.html())
    kinds = [(s["data-kind"], s["data-pass"]) for s in spans]
    assert kinds == [
        ("target", "0"),
        ("accepted", "1"), ("accepted", "1"), ("rejected", "1"), ("rejected", "1"), ("recovered", "1"),
        ("accepted", "2"), ("accepted", "2"), ("bonus", "2"),
        ("accepted", "3"), ("accepted", "3"),  # cut at EOS: the third accepted draft and the bonus never emitted
    ]
    assert {s["data-kind"] for s in spans} <= set(render.KINDS)
    # the first rejected token is judged; the one after it is marked as never judged (faded)
    rejected = [s for s in spans if s["data-kind"] == "rejected"]
    assert "tok-unjudged" not in rejected[0]["class"] and "tok-unjudged" in rejected[1]["class"]
    # the plain text skips rejected tokens and reads as the output
    assert pane.text == "Hello world <b>& fix\n again yes!<|eos|>"
    assert pane.output_ids == [1, 2, 3, 8, 4, 5, 9, 10, 0]
    assert pane.count("accepted") == 6 and pane.count("bonus") == 1 and pane.count("recovered") == 1


def test_last_pass_cut_inside_the_accepted_block_shows_no_next_token():
    pane = render.Pane(FakeTokenizer(PIECES))
    for event in _spec_events():
        pane.add(event)
    last = pane.passes[-1]
    assert [t.kind for t in last] == ["accepted", "accepted"]  # "!" and EOS; the bonus was never emitted
    assert last[-1].special and "tok-special" in render.token_html(last[-1])


def test_a_pass_cut_before_its_rejection_shows_nothing_after_the_end():
    pane = render.Pane(FakeTokenizer(PIECES))
    pane.add(_event(index=0, next_id=1, emitted=(1,), generated=1))
    # sampling: EOS and " again" accepted, " wrong" rejected; the run ends at EOS, so only EOS is emitted
    pane.add(_event(index=1, draft=(0, 5, 6), n=2, next_id=8, next_kind="recovered", emitted=(0,), finish="eos",
                    generated=2))
    assert [t.kind for t in pane.passes[-1]] == ["accepted"]  # no struck-through token after the end of the run
    assert pane.text == "Hello<|eos|>"


def test_html_is_escaped_and_newlines_are_marked():
    pane = render.Pane(FakeTokenizer(PIECES))
    for event in _spec_events():
        pane.add(event)
    markup = pane.html()
    assert "<b>" not in markup and "&lt;b&gt;&amp;" in markup
    assert '<i class="nl" aria-hidden="true"></i>\n' in markup  # ⏎ marker via CSS, then a real line break
    assert "&lt;|eos|&gt;" in markup


def test_a_rejected_newline_shows_its_mark_without_breaking_the_line():
    rejected = render.Token("rejected", 3, 7, "\n\n", "pass 3")
    accepted = render.Token("accepted", 3, 7, "\n", "pass 3")
    assert render.token_html(rejected).count("\n") == 0 and render.token_html(rejected).count('class="nl"') == 2
    assert '<i class="nl" aria-hidden="true"></i>\n' in render.token_html(accepted)


def test_hover_titles_tell_pass_and_probabilities():
    pane = render.Pane(FakeTokenizer(PIECES))
    for event in _spec_events():
        pane.add(event)
    spans = re.findall(r'data-kind="(\w+)" data-pass="(\d+)" data-id="\d+" title="([^"]*)"', pane.html())
    titles = {kind: title for kind, _, title in reversed(spans)}
    assert "pass 1" in titles["accepted"] and "target p = 0.900" in titles["accepted"]
    assert "draft q = 1.000" in titles["accepted"]
    assert "rejected" in titles["rejected"] and "target p = 0.100" in titles["rejected"]
    assert "top token here: &#x27; fix&#x27;" in titles["rejected"]
    assert "recovered" in titles["recovered"] and "bonus" in titles["bonus"]
    # "draft N of M", the form of the Draft tree panel's "candidate N of M" (a trial read "draft 1/3" beside it)
    firsts = [title.split("&#10;")[0] for kind, index, title in spans if index == "1"]
    assert firsts[:4] == ["pass 1 · draft 1 of 4 · accepted", "pass 1 · draft 2 of 4 · accepted",
                          "pass 1 · draft 3 of 4 · rejected",
                          "pass 1 · draft 4 of 4 · never judged (after the first rejection)"]
    assert "/4" not in pane.html()


def test_sampling_titles_show_the_uniform():
    pane = render.Pane(FakeTokenizer(PIECES))
    pane.add(_event(index=0, next_id=1, emitted=(1,)))
    pane.add(_event(index=1, draft=(2, 6), n=1, next_id=8, next_kind="recovered", uniforms=[0.3, 0.7]))
    markup = pane.html()
    assert "uniform u = 0.300" in markup and "→ accept" in markup
    assert "uniform u = 0.700" in markup and "→ reject" in markup


def test_baseline_tokens_are_target_kind_with_gap():
    pane = render.Pane(FakeTokenizer(PIECES))
    pane.add(_event(run="baseline", index=0, next_id=1, emitted=(1,), gap=2.5))
    pane.add(_event(run="baseline", index=1, next_id=2, emitted=(2,), gap=0.01, generated=2, finish="length"))
    spans = _spans(pane.html())
    assert [(s["data-kind"], s["data-pass"]) for s in spans] == [("target", "0"), ("target", "1")]
    assert "top-2 logit gap 0.010" in pane.html()
    assert 'class="cursor"' not in pane.html()  # finished: no typing cursor


def test_multibyte_characters_read_correctly(tiny_tokenizer):
    text = "café 😀 naïve — ok"
    ids = tiny_tokenizer.encode(text, add_special_tokens=False)
    assert any("\ufffd" in tiny_tokenizer.decode([i]) for i in ids)  # the emoji spans several byte tokens
    pane = render.Pane(tiny_tokenizer)
    pane.add(_event(run="baseline", index=0, next_id=ids[0], emitted=(ids[0],)))
    for i, token in enumerate(ids[1:], start=1):
        pane.add(_event(run="baseline", index=i, next_id=token, emitted=(token,), finish="length" if i == len(ids) - 1
                        else None))
    assert pane.text == text
    assert "\ufffd" not in pane.html()
    assert any(t.partial for p in pane.passes for t in p)


def test_a_run_cut_inside_a_character_ends_before_it_in_both_panes(tiny_tokenizer):
    """Max new tokens reached between the byte tokens of an emoji: neither pane ends in U+FFFD (the incomplete
    character is held back at the end as while streaming), both read the same, and the token ids are untouched."""
    ids = tiny_tokenizer.encode("ok 😀 fine", add_special_tokens=False)
    cut = next(j for j in range(2, len(ids)) if tiny_tokenizer.decode(ids[:j]).endswith("\ufffd"))
    out = ids[:cut]  # the run's output: it stops one or more bytes into the emoji
    whole = tiny_tokenizer.decode(out)
    assert whole.endswith("\ufffd") and whole.rstrip("\ufffd") == "ok "
    base = render.Pane(tiny_tokenizer, separators=False)
    for i, token in enumerate(out):
        base.add(_event(run="baseline", index=i, next_id=token, emitted=(token,),
                        finish="length" if i == len(out) - 1 else None))
    spec = render.Pane(tiny_tokenizer)  # the prefill's token, then one pass whose accepted drafts hit the limit
    spec.add(_event(index=0, next_id=out[0], emitted=(out[0],)))
    spec.add(_event(index=1, draft=tuple(out[1:]) + (7,), n=len(out) - 1, next_id=9, next_kind="bonus",
                    emitted=tuple(out[1:]), finish="length", generated=len(out)))
    for pane in (base, spec):
        assert pane.text == "ok " and pane.output_ids == out
        assert "\ufffd" not in pane.html()
        shown = [t for p in pane.passes for t in p if not t.partial]
        assert shown and shown[-1].text != "" and not shown[-1].text.endswith("\ufffd")
    assert spec.text == base.text
    # passes that show nothing (an emoji's first bytes, the bytes held back at the cut) are marked so that they take
    # no room and draw no pass bar; the first pass with text draws none before it either
    ids = tiny_tokenizer.encode("😀 ok 😀", add_special_tokens=False)[:-2]  # cut two bytes into the second emoji
    pane = render.Pane(tiny_tokenizer)
    for i, token in enumerate(ids):
        pane.add(_event(run="baseline", index=i, next_id=token, emitted=(token,),
                        finish="length" if i == len(ids) - 1 else None))
    assert pane.text == "😀 ok " and "\ufffd" not in pane.html()
    marks = re.findall(r'<div class="pass" data-pass-index="\d+"( data-empty| data-lead)?>', pane.html())
    shown = [bool(t.text) for p in pane.passes for t in p]
    first = shown.index(True)
    after = [" data-empty" if not s else "" for s in shown[first + 1:]]
    assert marks == [" data-empty"] * first + [" data-lead"] + after
    assert marks[-2:] == [" data-empty", " data-empty"]  # the held-back bytes at the end
    # while streaming the same token is held back too (a later token could complete the character)
    streaming = render.Pane(tiny_tokenizer, separators=False)
    for i, token in enumerate(out):
        streaming.add(_event(run="baseline", index=i, next_id=token, emitted=(token,)))
    assert streaming.text == "ok " and "\ufffd" not in streaming.html()


def test_a_rejected_draft_inside_a_character_shows_its_bytes_in_hex_not_u_fffd(tiny_tokenizer):
    """The draft proposes the first bytes of an emoji and is rejected there: each rejected byte token shows its
    byte in a hex badge ("‹F0›") with a hover line saying so, never U+FFFD; the accepted and committed text, the
    ids and the baseline pane are exactly as before."""
    ids = tiny_tokenizer.encode("ok 😀 fine", add_special_tokens=False)
    emoji = [i for i in ids if "\ufffd" in tiny_tokenizer.decode([i])]  # the emoji's byte tokens
    assert len(emoji) >= 2 and tiny_tokenizer.decode(emoji) == "😀"
    start = ids.index(emoji[0])
    committed = ids[:start] + ids[start + len(emoji):]  # "ok" + " fine": the target never wrote the emoji
    spec = render.Pane(tiny_tokenizer)
    spec.add(_event(index=0, next_id=committed[0], emitted=(committed[0],)))
    drafted = tuple(committed[1:start]) + tuple(emoji[:2])  # accepted "k", " ", then two bytes of the emoji
    recovered = committed[start]  # " f" in place of the emoji's first byte
    spec.add(_event(index=1, draft=drafted, n=start - 1, next_id=recovered, next_kind="recovered",
                    emitted=tuple(committed[1:start]) + (recovered,), generated=start + 1))
    base = render.Pane(tiny_tokenizer, separators=False)
    for i, token in enumerate(committed[:start + 1]):
        base.add(_event(run="baseline", index=i, next_id=token, emitted=(token,)))
    rejected = [t for p in spec.passes for t in p if t.kind == "rejected"]
    assert [t.text for t in rejected] == ["‹F0›", "‹9F›"]  # the emoji's first two bytes, F0 9F
    assert [t.token_id for t in rejected] == list(emoji[:2]) and not any(t.partial for t in rejected)
    assert "bytes of an unfinished character" in rejected[0].title and "‹F0›" in rejected[0].title
    assert "rejected" in rejected[0].title and "never judged" in rejected[1].title  # the verdicts stay
    markup = spec.html()
    assert "\ufffd" not in markup and '<i class="tok-bytes">‹F0›</i>' in markup
    assert spec.text == base.text == tiny_tokenizer.decode(committed[:start + 1])  # committed text unchanged
    assert spec.output_ids == base.output_ids == committed[:start + 1]
    # one byte alone, after a space in the same token's context; and a run the tokenizer cannot give bytes for
    decoder = render.PieceDecoder(tiny_tokenizer)
    assert decoder.pieces(ids[:start], emoji[:1], final=True) == [render.Piece("‹F0›", False, (b"\xf0",))]
    assert decoder.pieces(ids[:start], emoji, final=True)[-1].text == "😀"  # a whole character reads as before
    fake = render.PieceDecoder(FakeTokenizer({**PIECES, 11: "\ufffd"}))
    assert fake.pieces([1], [2, 11], final=True)[-1].text == "‹…›"


def test_legend_and_placeholder_have_no_token_spans():
    assert "data-kind" not in render.legend_html()
    for kind in render.KINDS:
        assert f"tok-{kind}" in render.legend_html()
    # every mark a pane can show is in the key (a trial: the "copy" mark and the faint drafts were unexplained)
    assert "copied-mark" in render.legend_html() and "tok-unjudged" in render.legend_html()
    # and a rejected newline's pill, drawn as the pane draws one (a trial met the ⏎ pill unexplained)
    sample = render.token_html(render.Token("rejected", 1, 5, "\n", ""))
    pill = sample[sample.index(">") + 1:sample.rindex("</span>")]
    assert pill == '<i class="nl" aria-hidden="true"></i>'
    assert (f'<b class="tok tok-rejected">{pill}</b> a rejected newline: its ⏎ in a pill, no line break'
            in render.legend_html())
    assert "&lt;x&gt;" in render.placeholder_html("<x>")


def test_a_copy_mark_is_glued_to_its_first_shown_token():
    """At 400 px a lone "copy" mark ended a line and its token began the next: the mark and the pass's first shown
    token share a no-wrap span (style.css), with a <wbr> before it where that token starts with a space (the line
    may break there, before the mark, as it did after the space); the later tokens stay outside it."""
    pane = render.Pane(FakeTokenizer(PIECES))
    pane.add(_event(index=0, next_id=1, emitted=(1,)))
    pane.add(dataclasses.replace(_event(index=1, draft=(2, 5), n=2, next_id=9, next_kind="bonus"),
                                 draft_source="lookup"))  # " world", " again", bonus " yes"
    pane.add(dataclasses.replace(_event(index=2, draft=(10,), n=1, next_id=7, next_kind="bonus"),
                                 draft_source="earlier"))  # "!" (no leading space), bonus " more"
    markup = pane.html()
    glue = re.findall(r'(<wbr>)?<span class="mark-glue"><i class="(\w+-mark)"[^>]*></i>(.*?)</span></span>', markup)
    assert [(wbr, mark, re.sub(r"<[^>]+>", "", body)) for wbr, mark, body in glue] == [
        ("<wbr>", "copied-mark", " world"), ("", "earlier-mark", "!")]
    assert pane.text == "Hello world again yes! more"  # the marks add no text


def test_compare_outputs():
    tok = FakeTokenizer(PIECES)
    same = render.compare_outputs([1, 2, 3], [1, 2, 3], [1.0, 1.0, 1.0], tok, greedy=True, finished=True)
    assert same.identical is True and "all 3 tokens" in same.message
    running = render.compare_outputs([1, 2], [1, 2, 3], [1.0] * 3, tok, greedy=True, finished=False)
    assert running.identical is None and "so far" in running.message
    diff = render.compare_outputs([1, 2, 5], [1, 2, 3], [1.0, 1.0, 0.02], tok, greedy=True, finished=True)
    assert diff.identical is False and diff.first_diff == 2 and diff.gap == 0.02
    assert "token 3" in diff.message and "0.020" in diff.message and "near-tie" in diff.message
    named = render.compare_outputs([1, 2, 5], [1, 2, 3], [1.0, 1.0, 0.02], tok, greedy=True, finished=True,
                                   precision="bfloat16")
    assert "forward in bfloat16 can flip" in named.message  # the near-tie's explanation names what was computed


def _stats(events) -> RunStats:
    stats = RunStats()
    for event in events:
        stats.add(event)
    return stats


def _base_stats() -> RunStats:
    return _stats([_event(run="baseline", index=i, next_id=1, emitted=(1,), generated=i + 1, t_end=10.0 * (i + 1))
                   for i in range(9)])


def test_stats_cards_show_speedup_and_definitions():
    spec, base = _stats(_spec_events()), _base_stats()
    comparison = render.compare_outputs([1], [1], [1.0], FakeTokenizer(PIECES), greedy=True, finished=True)
    markup = render.stats_html(spec, base, comparison, greedy=True)
    # 3 passes: too short to judge, so no speedup figure at all (and no green or red)
    assert "Decoding speedup" in markup and "too short to judge: 3 passes after the prefill in the run with fewer" in markup
    assert not re.search(r"\d+\.\d\d×", markup) and "hero good" not in markup and "hero bad" not in markup
    for words in ("accepted ÷ drafted", "bonus included", "Time to first token", "Finish reason", "eos", "✓"):
        assert words in markup
    none_markup = render.stats_html(None, base, comparison, greedy=True)
    assert "Decoding speedup" not in none_markup and "Tokens/s" in none_markup


def test_the_none_drafter_says_it_is_standard_decoding_alone_and_compares_nothing():
    """Seen in the browser: drafter "none" showed a "Greedy output = baseline? ✓" card (the baseline against
    itself) and a tokens/s of 0.8 on the card vs 1.0 in the pane. One run is made: the cards say so plainly, give
    the pane's rate (after the prefill) and compare nothing."""
    base = _base_stats()
    comparison = render.compare_outputs([1, 2], [1, 2], [1.0, 1.0], FakeTokenizer(PIECES), greedy=True, finished=True)
    markup = render.stats_html(None, base, comparison, greedy=True)
    assert "Standard decoding only" in markup and "the pane on the right is the whole run" in markup
    assert "Greedy output = baseline?" not in markup and "✓" not in markup and "match the baseline" not in markup
    rate = re.search(r'Tokens/s after the prefill</div><div class="card-value">([\d.]+) <small', markup).group(1)
    assert rate == f"{base.decode_tokens_per_s:.1f}" and f"prefill included: {base.tokens_per_s:.1f} <small" in markup


def test_a_sampled_comparison_says_plainly_where_the_outputs_differ():
    tok = FakeTokenizer(PIECES)
    differ = render.compare_outputs([1, 2, 3], [1, 2, 4], [1.0] * 3, tok, greedy=False, finished=True)
    # the sentence is worded in tests/test_messages.py; here: sampling, the first differing token, why, no "part"
    assert differ.message.startswith("Sampling: ") and " from token 3 on (" in differ.message
    assert "random numbers in a different order" in differ.message
    assert "part" not in differ.message


# ------------------------------------------------------------------------------------------ figures


def test_figure_functions_return_the_expected_traces():
    spec, base = _stats(_spec_events()), _base_stats()
    cases = {
        figures.acceptance_figure: ["acceptance per pass", "acceptance, running"],
        figures.tokens_per_pass_figure: ["tokens per pass", "tokens/pass, running mean", "expected from α",
                                         "standard decoding (1)"],
        figures.latency_figure: ["speculative", "baseline"],
        figures.position_figure: [figures.POSITION_BARS, "α (all positions)"],
        figures.k_figure: ["drafted", "k"],
        figures.time_figure: ["prefill (one measurement)", "draft", "target forwards", "other"],
    }
    for fn, names in cases.items():
        fig = fn(spec, base)
        assert isinstance(fig, go.Figure)
        assert [t.name for t in fig.data] == names, fn.__name__
    latency = figures.latency_figure(spec, base)
    assert list(latency.data[0].y) == [1, 4, 7, 9] and list(latency.data[1].x)[-1] == 90.0
    assert list(figures.position_figure(spec, base).data[0].y) == spec.per_position_acceptance
    dash = figures.dashboard_figure(spec, base, k_schedule="heuristic")
    assert len(dash.data) == sum(len(n) for n in cases.values())
    assert any("adaptive" in a.text for a in dash.layout.annotations)
    assert {t.xaxis for t in dash.data} == {"x", "x2", "x3", "x4", "x5", "x6"}
    assert list(figures.tokens_per_pass_figure(spec, base).data[0].y) == [3, 3, 2]
    prefill, _, verify, _ = figures.time_figure(spec, base).data  # the prefill apart, as the time card counts
    assert list(prefill.x) == [spec.ttft_ms, base.ttft_ms] and list(verify.x) == [spec.verify_ms, base.verify_ms]


def test_running_acceptance_matches_the_totals():
    spec = _stats(_spec_events())
    running = figures.running_acceptance(spec)
    assert running[-1] == pytest.approx(spec.acceptance_rate)
    assert running[0] == pytest.approx(2 / 4)


def test_figures_on_empty_stats():
    fig = figures.dashboard_figure(RunStats(), RunStats())
    assert isinstance(fig, go.Figure)


def test_a_run_without_a_drafter_draws_only_the_charts_standard_decoding_fills():
    full = figures.dashboard_figure(RunStats("speculative"), RunStats("baseline"))
    alone = figures.dashboard_figure(RunStats("speculative"), RunStats("baseline"), speculative=False)
    titles = [a.text for a in alone.layout.annotations]
    assert len(titles) == len(figures.BASELINE_PANELS) == 2 < len(full.layout.annotations) == len(figures.PANELS)
    assert not any("ccept" in t or "k per pass" in t or "raft length" in t for t in titles)


# ------------------------------------------------------------------------------------------ the handler
# (the input checks are in test_live_inputs.py)

GOOD = dict(prompt="hi", target="embedded", drafter="ngram", draft_model="", exit_layer=0, k=4, adaptive_k=False,
            temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=20, stop_strings="", chat_template=True,
            tree_nodes=0)


def _args(**change):
    return {**GOOD, **change}


def _shown_visible(gen):
    """The messages of ``gen`` as they come, checking that every update with a value also shows its component."""
    for out in gen:
        assert all(value.get("visible") is True for value in out if is_update(value) and "value" in value)
        yield out


def drain(gen) -> dict:
    """Run a handler generator to the end; the last real value of each output, and how many updates."""
    last = last_values(_shown_visible(gen), live.OUTPUTS, every=True, sized=True, counted=True)
    assert not device.DEVICE.locked, "the device lock must be released when a generation ends"
    return last


def test_generate_on_a_tiny_model_folder(tiny_model_dir, tiny_draft_dir):
    t0 = time.monotonic()
    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="model",
                                      draft_model=str(tiny_draft_dir), max_new_tokens=40, k=4)))
    elapsed = time.monotonic() - t0
    # the panes refresh at a bounded rate (plus the first event and the final state), after the one "reading" note
    streamed = [p for p in out["all_spec-output"] if "pane-empty" not in p]
    assert len(out["all_spec-output"]) - len(streamed) == 1
    assert len(streamed) <= elapsed / live.run.UPDATE_INTERVAL_S + 2
    spec, base = out["spec-output"], out["baseline-output"]
    assert 'data-kind="accepted"' in spec and 'data-kind="rejected"' in spec
    assert 'data-kind="recovered"' in spec and 'data-pass="0"' in spec
    assert 'data-kind="target"' in base and 'data-kind="accepted"' not in base
    assert "tokens/s" in spec and "Standard decoding" in base
    assert "Decoding speedup" in out["stats"] and "✓" in out["stats"]  # greedy: identical ids
    assert isinstance(out["charts"], go.Figure) and len(out["charts"].data) > 5
    assert "Done in" in out["status"]
    assert out["history-state"][0].drafter and out["history-state"][0].identical is True
    assert "<table" in out["history"]


def test_a_finished_runs_last_message_carries_the_next_plan_under_max_new_tokens(tiny_model_dir, monkeypatch):
    """Trial: the line under Max new tokens changed a few seconds after "Done in" (a second round trip after the run's
    event ended). The run's own last message, the one with "Done in", carries the line, planned from the costs this
    run just measured (the only run kept here); earlier messages leave it as it is, and never touch its value."""
    monkeypatch.setattr(live.costs, "_COSTS", {})
    messages = list(live.generate(_args(target=str(tiny_model_dir), drafter="ngram", max_new_tokens=12, k=2)))
    index = live.OUTPUTS.index("max-new-tokens")
    assert "Done in" in messages[-1][live.OUTPUTS.index("status")]
    line = messages[-1][index]
    assert set(line) == {"__type__", "info"} and line["info"].startswith("12 new tokens at the latest measured speed: ")
    assert f"(from {live.costs.RECENT_RUNS}" in line["info"]
    assert all(message[index] == {"__type__": "update"} for message in messages[:-1])


def test_a_cut_prompt_keeps_its_warning_in_the_phone_status_through_the_run(tiny_model_dir, monkeypatch):
    """The short status under Generate (the phone's) keeps the cut from the run's own fit (``RunView.cut``) from the
    first status to the final one; a whole prompt shows none."""
    monkeypatch.setenv("SPECVIZ_MAX_PROMPT_TOKENS", "24")
    out = drain(live.generate(_args(target=str(tiny_model_dir), prompt="the cat sat on the mat " * 30,
                                      max_new_tokens=6)))
    assert "Done in" in out["status"]
    progress = [p for p in out["all_run-progress"] if p]
    reading = next(i for i, p in enumerate(progress) if "Reading the prompt" in p)  # the first status after the fit
    assert all("Prompt cut" not in p for p in progress[:reading])  # loading: the prompt is not fitted yet
    assert all("⚠ Prompt cut: its first 254 tokens were removed (an instruction there no longer reaches the model)."
               in p for p in progress[reading:])
    # while the prompt is read both panes say so (not an earlier run's text or failure); then the run's tokens
    first_pane = next(i for i, p in enumerate(out["all_spec-output"]) if "pane-empty" not in p)
    assert live.READING_PANE.replace("’", "'")[:20] in out["all_spec-output"][0]
    assert out["all_baseline-output"][0] == out["all_spec-output"][0] and first_pane >= 1
    assert html.escape(live.run.READING_STATS) in out["all_stats"][0]  # not an earlier run's cards, nor its charts
    assert "Decoding speedup" in out["stats"]
    monkeypatch.delenv("SPECVIZ_MAX_PROMPT_TOKENS")
    whole = drain(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=6)))
    assert whole["run-progress"] and not any("Prompt cut" in p for p in whole["all_run-progress"] if p)


def test_generate_with_no_drafter_and_sampling(tiny_model_dir):
    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="none", temperature=0.8, top_p=0.9,
                                      seed=3, max_new_tokens=12)))
    assert "standard decoding" in out["spec-output"] and 'data-kind="target"' in out["baseline-output"]
    assert "Decoding speedup" not in out["stats"] and "Standard decoding only" in out["stats"]
    assert "Output vs baseline" not in out["stats"]  # nothing to compare: one run


def test_generate_early_exit_with_adaptive_k_and_stop_string(tiny_model_dir):
    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="early-exit", exit_layer=2,
                                      adaptive_k="heuristic", max_new_tokens=30)))
    assert "Done in" in out["status"] and "adaptive" in out["spec-output"]


def test_generate_with_k_auto_shows_its_choice_and_expected_gain(tiny_model_dir):
    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="ngram", adaptive_k="auto",
                                      max_new_tokens=30)))
    assert "Done in" in out["status"] and "k = auto" in out["spec-output"]
    chart = out["charts"]
    titles = [a["text"] for a in chart["layout"]["annotations"]] if isinstance(chart, dict) else \
        [a.text for a in chart.layout.annotations]
    assert any("k per pass (auto" in t for t in titles)
    names = [t["name"] for t in chart["data"]] if isinstance(chart, dict) else [t.name for t in chart.data]
    assert "expected gain (× a plain step)" in names


def test_the_k_schedule_input_is_checked():
    from app.inputs import InputError, parse_k_schedule

    assert [parse_k_schedule(v) for v in (False, True, "fixed", "heuristic", "auto")] == [
        "fixed", "heuristic", "fixed", "heuristic", "auto"]
    with pytest.raises(InputError, match="fixed, heuristic or auto"):
        parse_k_schedule("sometimes")


@pytest.mark.parametrize("typed, used, shown", [(9, 3, "3"), (-2, 2, "0 (half the target&#x27;s layers)"),
                                                 (10 ** 5, 3, "3")])
def test_an_early_exit_layer_out_of_range_runs_with_the_layer_its_box_names(tiny_model_dir, typed, used, shown):
    """Seen in the browser: exit layer 99, then Generate, said "... Using 29." and the run was refused anyway.
    Whatever is typed out of range, the run uses the layer the box's own sentence names, and its status says the same
    sentence (below 1, above the target's layers and beyond any model's alike)."""
    spec = str(tiny_model_dir)  # 4 layers: exits after 1..3; the default is half, layer 2
    notice = inputs.exit_layer_notice(typed, spec)
    assert notice is not None and notice[1].endswith(f"(got {typed}). Using {shown.replace('&#x27;', chr(39))}.")
    layers, label = inputs.target_layers(spec)  # the target's own bound: the sentence's wording, tests/test_messages.py
    assert layers == 4 and notice[1] == inputs.fit_exit_layer(typed, layers, label)[1]
    with no_toast():
        out = drain(live.generate(_args(target=spec, drafter="early-exit", exit_layer=typed, max_new_tokens=5)))
    assert "Done in" in out["status"] and "status-error" not in out["status"]
    assert html.escape(notice[1]) in out["status"]  # the box's own sentence, said in the run's status
    assert f"layer {used}/4" in out["spec-output"]


def test_an_early_exit_layer_beyond_a_target_whose_layers_were_unknown_is_fitted_once_it_is_loaded(
        tiny_model_dir, monkeypatch):
    """A target whose layer count is unknown before loading (a hub model not in the local cache) cannot be checked
    when the box is left; once loaded, the run fits the layer the same way, with the same sentence, not refuses."""
    monkeypatch.setattr(inputs, "target_layers", lambda spec: (None, None))
    with no_toast():
        out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="early-exit", exit_layer=9,
                                          max_new_tokens=5)))
    assert "Done in" in out["status"] and "layer 3/4" in out["spec-output"]
    assert "or a layer from 1 to 3 for " in out["status"] and "(got 9). Using 3." in out["status"]
    statuses = [s for s in out["all_status"] if isinstance(s, str)]
    first = next(i for i, s in enumerate(statuses) if "(got 9). Using 3." in s)  # said once the target is loaded,
    assert first > 0 and any("Loading the target" in s for s in statuses[:first])  # not before: layers unknown
    assert all("(got 9). Using 3." in s for s in statuses[first:])  # and in every status from then on


@pytest.mark.parametrize("change, words", [
    ({"prompt": ""}, "prompt is empty"),
    ({"target": "/no/such/folder"}, "no such local folder"),
])
def test_generate_bad_input_gives_a_message_and_the_session_stays_usable(tiny_model_dir, change, words):
    change.setdefault("target", str(tiny_model_dir))
    with no_toast():
        out = drain(live.generate(_args(**change)))
    assert words in out["status"] and "status-error" in out["status"]
    assert "Traceback" not in out["status"]
    again = drain(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=5)))
    assert "Done in" in again["status"]


def test_a_draft_model_with_another_vocabulary_is_re_tokenized(tiny_model_dir, tiny_other_vocab_dir):
    out = drain(live.generate(_args(target=str(tiny_model_dir), drafter="model", max_new_tokens=12,
                                      draft_model=str(tiny_other_vocab_dir))))
    assert "Done in" in out["status"] and "re-tokenized for the target" in out["status"]
    assert "re-tokenized from the draft&#x27;s vocabulary" in out["spec-output"]  # the drafted tokens' hover


def _stream_until(gen, updates: int) -> tuple:
    """Advance a generate() stream until ``updates`` updates have shown tokens; returns the last output."""
    seen = 0
    for out in gen:
        if isinstance(out[0], str) and "data-kind" in out[0]:
            seen += 1
            if seen == updates:
                return out
    raise AssertionError(f"the run ended before {updates} token updates")


def test_stop_cancels_and_releases_the_device(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    gen = live.generate(_args(target=str(tiny_model_dir), max_new_tokens=200))
    _stream_until(gen, 2)
    assert device.DEVICE.locked
    assert "Stopped" in live.stop()
    rest = list(gen)
    assert len(rest) <= 1 and not device.DEVICE.locked
    # closing a generator (what Gradio does on cancel) releases the device too
    gen = live.generate(_args(target=str(tiny_model_dir), max_new_tokens=200))
    for out in gen:
        if isinstance(out[0], str) and "data-kind" in out[0]:
            break
    gen.close()
    assert not device.DEVICE.locked


def test_a_second_session_waits_for_the_device(tiny_model_dir):
    assert device.DEVICE.acquire("someone-else", "a test run", timeout=1)
    releaser = threading.Timer(1.2, lambda: device.DEVICE.release("someone-else"))
    releaser.start()
    t0 = time.monotonic()
    out = drain(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=5)))
    assert time.monotonic() - t0 >= 1.0
    assert any("Waiting for the device" in s and "a test run" in s for s in out["all_status"])
    assert "Done in" in out["status"]


def test_defaults_are_valid():
    d = {k: v for k, v in DEFAULTS.items()}
    d["prompt"] = "x"
    inputs.parse_settings(d)


class FakeRequest:
    def __init__(self, session_hash: str) -> None:
        self.session_hash = session_hash


def test_a_stop_while_the_run_waits_in_the_queue_keeps_it_from_running(tiny_model_dir):
    """Gradio runs at most 8 Live handlers at once; a Stop pressed while the page's run still waited in that queue
    found no run to flag, so the run started later anyway. The page now says it sent a run (STOP_SENT_JS): that run
    starts flagged, runs nothing and says so; the session's next run is not touched."""
    from app.cancels import CancelRegistry

    me = FakeRequest("queued-page")
    said = live.stop_now(me, sent=True)[4]
    assert "still waiting for its turn in the server&#x27;s queue" in said
    assert "so it will not run" in said
    out = list(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=8), request=me))
    assert len(out) == 1 and "so it did not run" in out[0][4] and "data-kind" not in str(out[0][0])
    again = list(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=8), request=me))
    assert "Done in" in again[-1][4]  # the mark was spent by the stopped run
    assert "Nothing is running." in live.stop_now(me, sent=False)[4]  # nothing sent, nothing running: no mark
    assert "Done in" in list(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=8), request=me))[-1][4]
    # the registry alone: a queued Stop marks only that session; a run refused before it registers spends it
    registry, other = CancelRegistry(), FakeRequest("other-page")
    assert registry.cancel(me, queued=True) == 0 and registry.take_queued(me) and not registry.take_queued(me)
    registry.cancel(me, queued=True)
    assert registry.start(other)[1].is_set() is False and registry.start(me)[1].is_set() is True
    assert registry.start(me)[1].is_set() is False
    third = FakeRequest("third-page")
    registry.cancel(third, queued=True)
    registry.cancel_session(third)  # the tab closed: its mark goes
    assert not registry.take_queued(third) and not registry.start(third)[1].is_set()


def test_stop_only_cancels_its_own_session(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    gen = live.generate(_args(target=str(tiny_model_dir), max_new_tokens=200), request=FakeRequest("mine"))
    for out in gen:
        if isinstance(out[0], str) and "data-kind" in out[0]:
            break
    live.stop(FakeRequest("someone-else"))
    assert isinstance(next(gen)[0], str)  # still streaming
    live.release_session(FakeRequest("mine"))  # the tab closed
    rest = list(gen)
    assert len(rest) <= 1 and not device.DEVICE.locked


def test_stop_shows_the_run_so_far_as_its_result(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(live.controls, "STOP_WAIT_S", 0.2)  # nobody reads the handler here: a short wait
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    me = FakeRequest("stopper-view")
    gen = live.generate(_args(target=str(tiny_model_dir), max_new_tokens=200, drafter="ngram"), request=me)
    out = _stream_until(gen, 3)
    assert 'class="cursor"' in out[1]  # still typing
    out = live.stop_run([], me)
    spec, base, _, stats, status, table, history = out[:7]
    assert 'class="cursor"' not in spec and 'class="cursor"' not in base
    assert "stopped" in stats and "…" not in stats and "✓ so far" in stats
    assert "Stopped after" in status and re.search(r"\((speculative )?\d+ tokens?", status)
    assert len(history) == 1 and history[0].stopped and history[0].tokens >= 1
    assert "(stopped)" in table
    again = live.stopped_view(history, me)  # the button's second round trip: same view, the row added once
    assert again[6] == history and again[0] == spec
    assert list(gen) == [] and not device.DEVICE.locked  # the run adds no row of its own
    live.release_session(me)
    assert "Stopped." in live.stopped_view([], me)[4]  # nothing left to show: the status only


def test_preload_holds_the_device_while_loading(tiny_model_dir):
    thread = device.preload(str(tiny_model_dir))
    thread.join(timeout=120)
    assert not thread.is_alive() and not device.DEVICE.locked


@pytest.fixture(scope="module")
def wide_model_dir(tmp_path_factory, tiny_model_dir):
    """The tiny target with a 2,048-token window (the same weights), so a prompt takes several prefill chunks."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-wide")
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir)
    model.config.max_position_embeddings = 2048
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    return folder


def test_stop_during_a_long_prefill_starts_at_most_one_more_target_forward(wide_model_dir):
    """Stop pressed inside the 2nd forward of a long prompt's prefill (read 256 tokens per forward, several
    forwards per run): the engine starts at most one more target forward, and the handler ends quietly; the Stop
    button's view says the run stopped while the prompt was read."""
    from specviz.core.kv import PREFILL_CHUNK
    from specviz.runtime.models import load_model

    model = load_model(str(wide_model_dir)).model  # the handler's copy (loaded models are shared)
    live.tuned_costs(str(wide_model_dir), load_model(str(wide_model_dir)))  # the run-length probe, before the hook
    me = FakeRequest("long-prefill")
    sizes: list[int] = []
    after_stop: list[int] = []
    stopped = threading.Event()

    def count(module, args, kwargs) -> None:
        if stopped.is_set():
            after_stop.append(kwargs["input_ids"].shape[1])
        sizes.append(kwargs["input_ids"].shape[1])
        if len(sizes) == 2:
            live.stop(me)  # pressed while this forward runs
            stopped.set()

    prompt = " ".join(["The river runs through the green valley past the old stone bridge."] * 120)
    hook = model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        out = drain(live.generate(_args(target=str(wide_model_dir), prompt=prompt, drafter="ngram",
                                          max_new_tokens=8), request=me))
    finally:
        hook.remove()
    assert sizes[:2] == [PREFILL_CHUNK, PREFILL_CHUNK]  # a long prompt: more than two chunks to read
    assert len(after_stop) <= 1, f"forwards started after Stop: {after_stop}"
    assert "status-error" not in out["status"]  # a cancelled run is not an error
    view = live.stopped_view([], me)
    assert "while the prompt was being read" in view[4] and "nothing was generated" in view[0]
    live.release_session(me)


def test_the_acceptance_by_position_chart_says_so_when_nothing_was_drafted():
    empty = figures.position_panel(RunStats("speculative"), RunStats("baseline"))
    assert empty.title == "Acceptance by draft position (no token drafted)" and empty.xaxis["range"] == [0.5, 4.5]
    assert all(list(t.get("x", [])) == [] for t in empty.traces)


def test_the_acceptance_rate_chart_says_so_when_nothing_was_drafted():
    """A new user's n-gram run found nothing to copy: the by-position chart said "(no token drafted)" and the
    acceptance-rate chart beside it was blank with no word. It now says the same."""
    none = _stats([_event(index=0, next_id=1, emitted=(1,)), _event(index=1, next_id=2, generated=2, t_end=20),
                   _event(index=2, next_id=3, generated=3, t_end=30)])  # two passes, nothing drafted
    panel = figures.acceptance_panel(none, _base_stats())
    assert none.passes == 2 and list(none.pass_drafted) == [0, 0]
    assert panel.title == "Acceptance rate (no token drafted)"
    assert figures.acceptance_panel(_stats(_spec_events()), _base_stats()).title == \
        "Acceptance rate (accepted ÷ drafted)"
    assert len(panel.traces) == 2  # nothing drafted at all: the title says it, no marks


def test_a_pass_that_drafted_nothing_is_marked_not_left_to_read_as_zero():
    """A trial: passes 1, 5 and 6 of a default run drafted nothing and showed no bar, like 0 % accepted."""
    stats = RunStats("speculative")
    for drafted, accepted in ((0, 0), (4, 2), (0, 0), (3, 3)):
        stats.pass_drafted.append(drafted)
        stats.pass_accepted.append(accepted)
        stats.pass_acceptance.append(accepted / drafted if drafted else None)
        stats.pass_tokens.append(accepted + 1)
    marks = [t for t in figures.acceptance_panel(stats, _base_stats()).traces if t["name"] == "nothing drafted (no rate)"]
    assert len(marks) == 1 and marks[0]["x"] == [1, 3] and marks[0]["y"] == [0.0, 0.0]


def test_the_last_message_of_a_finished_run_carries_the_whole_end_state(tiny_model_dir):
    """Seen in the browser: after Done the draft-tree panel showed "latest tree pass" again. The browser puts a
    component that the handler's last message skips back to an earlier message's value, so the last message of a
    finished run re-sends every output: the every-pass view (lookahead here, an EAGLE tree alike), the panes and
    the charts, beside the history row."""
    out = last_output(live.generate(_args(target=str(tiny_model_dir), drafter="lookahead",
                                            max_new_tokens=24, prompt="one two three one two three one two three")))
    last = dict(zip(live.OUTPUTS, out))
    tree = last["draft-tree"]
    assert isinstance(tree, dict) and tree.get("visible") is True and "Other passes" in tree["value"]
    for name in ("spec-output", "baseline-output", "stats", "status", "history"):
        value = last[name]
        assert isinstance(value, str) and value, name
    assert "Done in" in last["status"] and last["charts"].get("visible") is True


def test_the_tree_panel_at_the_end_names_the_chosen_pass_also_when_it_is_the_latest():
    from app.tree_view import TreeView, best_pass
    from specviz.core.events import TreeRecord

    class Pieces:
        all_special_ids = []

        def decode(self, ids, **kwargs):
            return "".join(f"<{i}>" for i in ids)

    def tree_event(index, path):
        tokens, parents = (5, 6, 7), (-1, 0, 1)
        n = len(path)
        return PassEvent(run="speculative", index=index, kind="pass", k=3, draft_ids=tokens,
                         accept_mask=tuple(j < n for j in range(3)), num_accepted=n, next_id=9,
                         next_kind="bonus" if n == 3 else "recovered", emitted_ids=(*tokens[:n], 9),
                         details=tuple(PositionDetail(0.5, 1.0, None, 0, j <= n) for j in range(3)), text_delta="",
                         timings=Timings(), t_end_ms=1.0, num_generated=4,
                         tree=TreeRecord(tokens, parents, tuple(path), tokens))

    view = TreeView(Pieces())
    view.add(tree_event(1, [0]), [1])
    view.add(tree_event(2, [0, 1, 2]), [1, 5, 9])  # the longest path is the latest pass
    assert "latest tree pass" in view.html()  # streaming
    final = view.html(every_pass=True)
    shown, what = best_pass(view.passes, view.total, lambda tp: tp.counted, "the longest accepted path", "tree pass")
    assert shown is view.passes[-1] and what.startswith("pass 2 (the latest), ") and html.escape(what) in final
    assert "latest tree pass" not in final and final.count('class="dtree-pass"') == 2 and "Other passes" in final


def test_the_best_pass_and_its_caption_are_shared_by_the_pass_panels():
    """One helper picks the pass a finished run's panel opens and names it (the draft tree: the longest accepted path;
    lookahead: the most accepted tokens), and one draws the list of the other passes."""
    from types import SimpleNamespace

    from app.tree_view import best_pass, earlier_passes_html

    passes = [SimpleNamespace(index=i, accepted=a) for i, a in ((4, 1), (5, 3), (6, 3), (7, 0))]
    shown, what = best_pass(passes, 4, lambda p: p.accepted, "the most accepted tokens", "kept pass")
    # its wording is checked once in tests/test_messages.py; here: which pass, the latest mark and the counts
    assert shown is passes[2] and what.startswith("pass 6, the most accepted tokens of ")  # latest of equals
    assert "(the latest)" not in what and "last" not in what and what.endswith(" 4 kept passes")
    shown, what = best_pass(passes[:3], 30, lambda p: p.accepted, "the longest accepted path", "tree pass")
    assert shown is passes[2] and what.startswith("pass 6 (the latest), ") and what.endswith(" last 3 tree passes")
    assert best_pass(passes[:1], 1, lambda p: p.accepted, "x", "tree pass")[1] == "pass 4, x of the run's 1 tree pass"
    with pytest.raises(ValueError):
        best_pass([], 0, lambda p: 0, "x", "tree pass")
    listed = earlier_passes_html("<i>p</i>", 0)  # the passes' HTML after the title (worded in tests/test_messages.py)
    assert listed.startswith('<div class="dtree-earlier">') and listed.endswith("</div><i>p</i></div>")
    assert "older not kept" not in listed and "(12 older not kept)" in earlier_passes_html("", 12)


# ------------------------------------------------------------------ the cards' formulas, units and counts


def _tpp_card(markup: str) -> str:
    """The "Tokens per pass" card of a stats markup (its value, definition and the line under it)."""
    return markup.split("Tokens per pass", 1)[1].split('<div class="card ', 1)[0]


@pytest.mark.parametrize("passes", [
    [((2, 3, 6, 7), 2), ((4, 5), 2), ((10, 5, 3), 1)],  # 9 drafted in 3 passes, 5 accepted, 2 rejections
    [((2, 3, 6), 3), ((4, 5), 2), ((10, 5, 3), 3)],  # all accepted (α = 1): m + 1, 8 drafted in 3 passes
])
def test_the_tokens_per_pass_card_states_the_formula_its_expected_value_computes(passes):
    """Seen: the caption said (1 − α^(k+1)) ÷ (1 − α) with k = 4, but the value used m, the mean drafted per pass
    (3.85 for α 0.92 and m 3.41, not 4.26). The caption names m, and its formula on the shown α and m gives the
    shown value."""
    events, generated = [_event(index=0, next_id=1, emitted=(1,), generated=1)], 1
    for i, (draft, n) in enumerate(passes, start=1):
        generated += n + 1
        events.append(_event(index=i, draft=draft, n=n, next_id=9, next_kind="bonus" if n == len(draft) else
                             "recovered", generated=generated, t_end=10.0 * (i + 1)))
    spec = _stats(events)
    comparison = render.compare_outputs([1], [1], [1.0], FakeTokenizer(PIECES), greedy=True, finished=True)
    card = _tpp_card(render.stats_html(spec, _base_stats(), comparison, greedy=True))
    assert "expected (1 − α^(m+1)) ÷ (1 − α), m = the tokens of the chain a pass offers, on average (m + 1 when α = 1)" in card
    assert "k+1" not in card
    found = re.search(r"expected from α (\d\.\d\d), m (\d\.\d\d): (\d\.\d\d) · 3 target passes vs 8 baseline steps",
                      card)
    assert found, card
    drafted = sum(len(d) for d, _ in passes)
    accepted = sum(n for _, n in passes)
    rejections = sum(n < len(d) for d, n in passes)
    alpha, m = accepted / (accepted + rejections), drafted / len(passes)  # the glossary's α and m, by hand
    expected = m + 1 if alpha == 1 else (1 - alpha ** (m + 1)) / (1 - alpha)
    assert found.groups() == (f"{alpha:.2f}", f"{m:.2f}", f"{expected:.2f}")
    if alpha == 1:
        assert found.groups() == ("1.00", "2.67", "3.67")  # the new-user check's bf16 run: 8 drafted in 3 passes


def test_a_card_reads_its_times_in_one_unit_chosen_by_the_larger():
    """Seen: "12.3 s · baseline: 5932 ms". One card, one unit: seconds when either value reaches 10 s."""
    spec, base = _stats(_spec_events()), _base_stats()
    comparison = render.compare_outputs([1], [1], [1.0], FakeTokenizer(PIECES), greedy=True, finished=True)

    def ttft_card() -> str:
        markup = render.stats_html(spec, base, comparison, greedy=True)
        card = markup.split("Time to first token", 1)[1].split('<div class="card ', 1)[0]
        return re.sub(r"<[^>]+>", "", card)

    spec.prefill_ms, base.prefill_ms = 12_300.0, 5_932.0
    assert "12.3 s (one measurement)" in ttft_card() and "baseline: 5.9 s (one measurement)" in ttft_card()
    spec.prefill_ms, base.prefill_ms = 850.0, 10_400.0
    assert "0.8 s (one measurement)" in ttft_card() and "baseline: 10.4 s" in ttft_card()
    spec.prefill_ms, base.prefill_ms = 850.0, 5_932.0
    assert "850 ms (one measurement)" in ttft_card() and "baseline: 5932 ms" in ttft_card()
    assert render.fmt_ms(5_932.0, scale=12_300.0) == "5.9 s" and render.fmt_ms(5_932.0) == "5932 ms"
    spec.verify_ms, spec.draft_ms, spec.other_ms, base.verify_ms = 12_000.0, 900.0, 40.0, 9_000.0
    time_card = html.unescape(re.sub(r"<[^>]+>", "", render.time_card(spec, base)))
    assert "12.0 s verify" in time_card and "draft 0.9 s · other < 0.1 s · baseline forwards 9.0 s" in time_card
    assert render.fmt_ms(0.0, scale=12_000.0) == "0.0 s" and render.fmt_ms(40.0) == "40 ms"


def _one_pass_view() -> live.RunView:
    settings = inputs.parse_settings(dict(prompt="hi", target="embedded", drafter="ngram", draft_model="",
                                          exit_layer=0, k=4, adaptive_k="fixed", temperature=0.0, top_p=1.0,
                                          top_k=0, seed=0, max_new_tokens=64, stop_strings="", chat_template=True))
    view = live.RunView(settings, "tiny", "ngram", render.Pane(FakeTokenizer(PIECES)),
                        render.Pane(FakeTokenizer(PIECES), separators=False), prompt_tokens=10)
    for event in _spec_events()[:2]:
        view.add(event)
    view.add(_event(run="baseline", index=0, next_id=1, emitted=(1,), generated=1))
    view.add(_event(run="baseline", index=1, next_id=1, emitted=(1,), generated=2))
    return view


def test_counts_agree_with_their_words():
    """Seen: "1 passes" in the pane header."""
    view = _one_pass_view()
    assert "<b>1</b> pass</span>" in view.spec_html() and "<b>1</b> pass</span>" in view.base_html()
    view.add(_spec_events()[2])
    assert "<b>2</b> passes</span>" in view.spec_html()
    tok = FakeTokenizer(PIECES)
    one = render.compare_outputs([1], [1], [1.0], tok, greedy=True, finished=True).message  # tests/test_messages.py
    assert "the one token matches" in one and "tokens match" not in one
    assert render.compare_outputs([1], [1, 2], [1.0] * 2, tok, greedy=True, finished=False).message == (
        "Identical so far (1 token).")


def test_an_event_after_stop_changes_nothing():
    """Seen in the browser: a baseline token appeared a second after "Stopped" (the stream thread folded an event
    it held while Stop froze the view, and Stop's second send showed it). After mark_stopped a view takes no
    event, from any thread; a second Stop has nothing to stop."""
    view = _one_pass_view()
    passes = (view.spec_stats.passes, view.base_stats.passes, view.base_stats.generated)
    assert view.mark_stopped() and not view.mark_stopped()
    spec, base = view.spec_html(), view.base_html()
    assert 'class="cursor"' not in spec + base  # frozen as the run's result
    view.add(_spec_events()[2])
    view.add(_event(run="baseline", index=2, next_id=1, emitted=(1,), generated=3))
    assert (view.spec_stats.passes, view.base_stats.passes, view.base_stats.generated) == passes
    assert view.spec_html() == spec and view.base_html() == base
    assert view.base_stats.finish_reason == view.spec_stats.finish_reason == "stopped"


# ------------------------------------------------------------------ the k chart near the end of a run


def _k_cut_traces(figure: go.Figure):
    line = next(t for t in figure.data if t.name == "k")
    cut = [t for t in figure.data if t.name == live.K_CUT_NAME]
    return line, cut


def test_passes_whose_k_the_budget_cut_are_marked_on_the_k_chart(tiny_target):
    """Seen: with a fixed k = 4 the "Draft length k per pass" chart stepped 4 → 3 → 2 → 1 → 0 over the last
    passes (the max-new-tokens budget), unexplained. Those passes, and only those, are marked "k cut by max new tokens"; on
    each, k is what the budget left (max new tokens − tokens before the pass − 1)."""
    from specviz.core.engine import GenerationConfig, speculative_generate
    from specviz.drafters import NgramDrafter

    prompt = tiny_target.tokenizer.encode("the cat sat on the mat and the cat sat on the", add_special_tokens=False)
    events = list(speculative_generate(tiny_target, NgramDrafter(), prompt, GenerationConfig(max_new_tokens=9, k=4)))
    spec = _stats(events)
    passes = [e for e in events if e.kind == "pass"]
    before = [e.num_generated for e in events[:-1]]  # tokens made before each pass
    budget = [9 - b - 1 for b in before]
    assert spec.k_cut_by_budget(4) == [e.k < 4 for e in passes]
    assert any(spec.k_cut_by_budget(4)) and not all(spec.k_cut_by_budget(4))
    assert all(e.k == left for e, left, cut in zip(passes, budget, spec.k_cut_by_budget(4)) if cut)
    figure = figures.dashboard_figure(spec, _base_stats())
    live.mark_budget_cuts(figure, spec, 4)
    line, cut = _k_cut_traces(figure)
    flagged = [i + 1 for i, e in enumerate(passes) if e.k < 4]
    assert len(cut) == 1 and list(cut[0].x) == flagged and list(cut[0].y) == [passes[i - 1].k for i in flagged]
    assert cut[0].xaxis == line.xaxis and cut[0].legend == line.legend  # drawn on the k chart, in its legend
    assert list(line.text) == [f"k = {e.k}: cut by max new tokens (asked 4)" if e.k < 4 else f"k = {e.k}"
                               for e in passes]
    # a schedule whose every pass drafted the k it asked for (an adaptive k going 4, 2, 3): nothing to mark
    asked = _spec_events()
    asked = [dataclasses.replace(e, next_k=nxt.k) for e, nxt in zip(asked, asked[1:])] + asked[-1:]
    plain_stats = _stats(asked)
    assert plain_stats.pass_k == [4, 2, 3] and plain_stats.k_cut_by_budget(4) == [False] * 3
    plain = figures.dashboard_figure(plain_stats, _base_stats())
    live.mark_budget_cuts(plain, plain_stats, 4)
    assert not _k_cut_traces(plain)[1] and _k_cut_traces(plain)[0].text is None  # the chart is left as it was


def test_the_stop_button_answers_lightly_outside_the_queue_then_sends_the_result():
    """Seen on a busy machine: Stop's status came 8.9 s after the click. The browser sends Gradio's cancel of the run
    only after the Stop handler's answer; that handler drew the whole result. Now the first handler only flags the
    run and freezes its status, outside the queue; the whole result follows in a chained call (the API's "stop")."""
    demo = build_demo(max_new_tokens=40)
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    on_stop = [fn for fn in demo.fns.values() if any(ids.get(target) == "stop" for target, _ in fn.targets)]
    first = next(fn for fn in on_stop if fn.fn is not None)
    # its one input only carries the page's "my run was sent and has not ended" (STOP_SENT_JS), raw
    assert first.fn is live.stop_now and first.queue is False and len(first.inputs) == 1 and not first.preprocess
    assert first.js == live.layout.STOP_SENT_JS
    chained = [fn for fn in demo.fns.values() if fn.fn is live.stop_run]
    # the chained call is queued (with no concurrency limit, so it never waits for another): from a queue-free event
    # the history's change did not reach the Why tab, and a stopped run was never marked there (a second trial)
    assert len(chained) == 1 and chained[0].queue is not False and chained[0].api_name == "stop"
    assert chained[0].concurrency_limit is None
    assert chained[0].trigger_after == first._id
    # no Gradio cancel of the run: the flag ends it on its own (a hard cancel at times left a red "Error" on the status)
    assert not any(fn.is_cancel_function or fn.cancels for fn in on_stop)


def test_stop_never_has_gradio_cancel_the_run_it_ends_on_its_own_and_sends_nothing_after_the_flag(
        tiny_model_dir, monkeypatch):
    """A trial: after Stop a red "Error" pill sat on the status ("Stopped after 5.0 s ..."), now and then. Stop had
    Gradio cancel the Generate event; when the run was still going as the cancel arrived, the server closed the event
    with an empty message, which the browser's client failed to read, and it marked the run's status as failed. Now
    no event cancels the run: Stop's flag ends it on its own (nothing is sent after the flag), and Stop's second
    handler waits for that end before it sends the stopped result, so the browser counts the run as over (the next
    Generate starts at once) and no update of the run lands after Stop's result."""
    demo = build_demo(max_new_tokens=40)
    run = next(fn for fn in demo.fns.values() if fn.api_name == "generate")
    assert not any(run._id in (fn.cancels or []) for fn in demo.fns.values())
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    me = FakeRequest("stop-ends-itself")
    gen = live.generate(_args(target=str(tiny_model_dir), max_new_tokens=400, drafter="ngram"), request=me)
    _stream_until(gen, 2)
    sent_after_flag: list = []
    ended = threading.Event()

    def drive() -> None:  # what Gradio does: keep reading the handler until it ends
        for out in gen:
            sent_after_flag.append(out)
        ended.set()

    live.stop_now(me)  # the flag; the handler is not closed by anyone
    reader = threading.Thread(target=drive)
    t0 = time.monotonic()
    reader.start()
    full = live.stop_run([], me)  # waits for the run's end, then the whole result
    assert ended.is_set() and time.monotonic() - t0 < 5, "Stop's result came before the run had ended"
    reader.join(5)
    assert sent_after_flag == []  # the run said nothing after the flag: Stop's result is the last word
    assert not device.DEVICE.locked
    assert "Stopped after" in full[4] and len(full[6]) == 1 and full[6][0].stopped
    assert 'class="cursor"' not in full[0]
    live.release_session(me)


def test_generate_says_at_once_in_the_browser_that_the_run_was_sent():
    """Seen on a phone: after Generate nothing in sight changed until the server's first message (the status is
    ~900 px below the button). A browser-side answer fills the status and its copy under the button at once."""
    demo = build_demo(max_new_tokens=40)
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    on_click = [fn for fn in demo.fns.values() if fn.fn is None and fn.js
                and any(ids.get(target) == "generate" for target, _ in fn.targets)]
    assert len(on_click) == 1 and on_click[0].js == live.layout.starting_js()
    run = next(fn for fn in demo.fns.values() if fn.api_name == "generate")
    assert on_click[0]._id < run._id  # wired first: the browser runs a click's listeners in turn, the run's to its end
    assert [ids[block._id] for block in on_click[0].outputs] == ["status", "run-progress"]
    assert live.layout.STARTING.replace("…", "\\u2026") in on_click[0].js and "sv-progress" in on_click[0].js


def test_stop_now_freezes_the_run_and_stop_run_adds_its_row_once(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(live.controls, "STOP_WAIT_S", 0.2)  # nobody reads the handler here: a short wait
    monkeypatch.setattr(live.run, "UPDATE_INTERVAL_S", 0.0)
    me = FakeRequest("stop-now")
    gen = live.generate(_args(target=str(tiny_model_dir), max_new_tokens=200, drafter="ngram"), request=me)
    _stream_until(gen, 2)
    quick = live.stop_now(me)
    assert "Stopped after" in quick[4] and all(isinstance(v, dict) for i, v in enumerate(quick) if i not in (4, 9))
    full = live.stop_run([], me)  # the chained call: the whole result, the history row added
    assert len(full[6]) == 1 and full[6][0].stopped and 'class="cursor"' not in full[0]
    assert live.stopped_view(full[6], me)[6] == full[6]  # again: the row is not added twice
    assert list(gen) == [] and not device.DEVICE.locked
    live.release_session(me)


def test_a_pane_title_keeps_the_drafters_parenthetical_apart():
    """At 1400 px "Speculative · suffix decoding (prompt + earlier outputs)" took two lines; at 400 px "n-gram lookup
    (1-" / "3)" broke inside the parenthesis. The parenthetical goes to the subtitle, its hyphens non-breaking."""
    from app.live.view import split_name

    assert split_name("suffix decoding (prompt + earlier outputs)") == ("suffix decoding", "(prompt + earlier outputs)")
    assert split_name("n-gram lookup (1-3)") == ("n-gram lookup", "(1\u20113)")
    assert split_name("EAGLE head (tree of 6) + lookup") == ("EAGLE head (tree of 6) + lookup", "")
    assert split_name("draft model") == ("draft model", "")


def test_the_status_names_both_runs_progress_and_done_counts_from_the_click(monkeypatch):
    """Seen: "pass 31, 37 tokens" stayed for 13 s while the baseline finished, and "Done in 24.1 s" was shown after
    38.4 s of waiting (loading and measuring came before the runs' clock started)."""
    settings = inputs.parse_settings(dict(GOOD, drafter="ngram"))
    view = live.RunView(settings, "tiny", "n-gram lookup (1-3)", render.Pane(FakeTokenizer(PIECES)),
                        render.Pane(FakeTokenizer(PIECES)))
    view.spec_stats.generated, view.spec_stats.passes, view.spec_stats.finish_reason = 37, 31, "eos"
    view.base_stats.generated = 20
    assert "Generating… pass 31, 37 tokens (finished) · baseline 20 tokens ·" in view.status()
    assert "(1\u20113) · k = " in view.spec_html() and "Speculative · n-gram lookup<" in view.spec_html()
    view.base_stats.finish_reason, view.base_stats.generated = "eos", 37
    now = time.monotonic()
    view.clicked, view.started, view.ended = now - 38.4, now - 24.4, now - 0.3
    status = view.status()
    assert re.search(r"Done in 38\.\d s from Generate to this result \(37 tokens, finish reason: eos; the two runs: "
                     r"24\.1 s; before them, loading and preparing: 14\.0 s\)", status), status
    assert view.status() == status  # drawn once: read again later (a Stop after the end), the wait does not grow
    view.clicked, view._done = None, None  # a run from Python code: the runs' time alone (drawn anew)
    assert re.search(r"Done in 24\.1 s \(", view.status())


def test_done_names_the_wait_for_the_device_apart_from_loading():
    """Seen: "before them, loading and preparing: 9.7 s" for 9.7 s spent waiting for another tab's run."""
    settings = inputs.parse_settings(dict(GOOD, drafter="ngram"))
    view = live.RunView(settings, "tiny", "n-gram lookup (1-3)", render.Pane(FakeTokenizer(PIECES)),
                        render.Pane(FakeTokenizer(PIECES)))
    view.spec_stats.generated, view.spec_stats.finish_reason = 37, "eos"
    view.base_stats.generated, view.base_stats.finish_reason = 37, "eos"
    now = time.monotonic()
    view.clicked, view.obtained, view.started, view.ended = now - 30.0, now - 20.0, now - 19.0, now - 0.1
    status = view.status()
    assert re.search(r"the two runs: 18\.9 s; before them, waiting for the device: 10\.0 s; loading and "
                     r"preparing: 1\.0 s\)", status), status
    view.obtained, view._done = view.clicked + 0.2, None  # no wait to speak of: all loading and preparing
    assert "waiting for the device" not in view.status()
    assert re.search(r"before them, loading and preparing: 10\.8 s\)", view.status()), view.status()


def test_a_tree_drafters_pane_title_names_its_tree_once():
    """Trial: the EAGLE pane's header read "(tree of 8) · k = 4 · tree of 8 nodes, depth ≤ k"."""
    s = inputs.parse_settings(dict(live.DEFAULTS, prompt="x", drafter="eagle", k=4, adaptive_k="fixed", tree_nodes=8, confidence=0,
                                   temperature=0.0))
    assert s.drafted_tree_nodes == 8
    assert live.view.pane_title("EAGLE head (tree of 8)", s) == ("EAGLE head", "k = 4 · tree of 8 nodes, depth ≤ k")
    both = inputs.parse_settings(dict(live.DEFAULTS, prompt="x", drafter="eagle", k=4, adaptive_k="fixed",
                                      tree_nodes=8, confidence=0, temperature=0.0, lookup=True))
    title = live.view.pane_title("EAGLE head (tree of 8) + lookup", both)
    assert title == ("EAGLE head", "k = 4 · tree of 8 nodes, depth ≤ k · lookup first")


def test_a_control_token_shows_as_a_readable_chip_with_its_raw_text_in_the_title():
    """Trial: struck-through drafts printed raw "<|im_end|><|im_start|>" in the pane."""
    from app.render.pane import control_label
    from app.render.tokens import Token

    end = Token("rejected", 3, 151645, "<|im_end|>", "draft 2 of 4 · rejected", special=True)
    shown = render.token_html(end)
    assert '<i class="tok-chip" title="&lt;|im_end|&gt;">⏎ end of turn</i>' in shown
    assert "tok-special" in shown and "raw token: &lt;|im_end|&gt;" in shown
    assert shown.count("&lt;|im_end|&gt;") == 2  # the chip's and the token's titles only, not the body
    assert control_label("<|im_start|>") == "▸ start of turn" and control_label("<|tool_call|>") == "◆ tool_call"
    assert control_label("hello") is None and control_label("<b>") is None
    plain = render.token_html(Token("accepted", 3, 17, "hello", "accepted"))
    assert "tok-chip" not in plain and "raw token" not in plain and ">hello<" in plain


def test_a_rejected_end_of_turn_is_struck_through_and_never_breaks_the_line():
    """Trial (EAGLE): rejected "<|im_end|>" drafts showed as unstruck "⏎ end of turn" pills mid-text, one followed by a
    line break, so the answer read as if it ended several times. A rejected end token or newline is a token of kind
    rejected (struck through, rejected colour: assets/style.css) with no line break; an accepted one keeps its look."""
    from pathlib import Path

    pieces = {11: "<|im_end|>", 4: "\n", 1: "Hello", 2: " world", 8: " fix"}
    tokenizer = FakeTokenizer(pieces)
    tokenizer.all_special_ids = [11]
    pane = render.Pane(tokenizer)
    pane.add(_event(index=0, next_id=1, emitted=(1,)))
    # " world" accepted; "<|im_end|>" rejected; "\n", "<|im_end|>" never judged; the target's " fix" recovered
    pane.add(_event(index=1, draft=(2, 11, 4, 11), n=1, next_id=8, next_kind="recovered", generated=3))
    markup = pane.html()
    drafted = re.search(r'<div class="pass" data-pass-index="1">(.*?)</div>', markup).group(1)
    spans = re.findall(r'<span class="([^"]*)" data-kind="(\w+)"[^>]*>(.*?)</span>', drafted)
    assert [kind for _, kind, _ in spans] == ["accepted", "rejected", "rejected", "rejected", "recovered"]
    for classes, _, body in spans[1:4]:
        assert "tok-rejected" in classes.split() and "\n" not in body and "<br" not in body
    assert [c.split()[1:] for c, _, _ in spans[1:4]] == [["tok-rejected", "tok-special"],
                                                      ["tok-rejected", "tok-alt", "tok-unjudged", "tok-space"],
                                                      ["tok-rejected", "tok-unjudged", "tok-special"]]
    assert '⏎ end of turn</i>' in spans[1][2] and spans[2][2] == '<i class="nl" aria-hidden="true"></i>'
    assert "\n" not in drafted and "<br" not in drafted and pane.text == "Hello world fix"
    css = (Path(__file__).parent.parent / "assets" / "style.css").read_text()
    # an inline-block drops its parent's strike, and Gradio's ".prose *" gives it the body's colour
    assert ".tok-rejected .tok-chip { color: inherit; text-decoration: inherit; }" in css
    assert re.search(r"\.tok-rejected \.nl \{ display: inline-block;[^}]*border: 1px solid[^}]*color: inherit; "
                     r"text-decoration: inherit", css)  # a rejected newline: a struck pill in the rejected colour
    end = render.Token("accepted", 5, 11, "<|im_end|>", "pass 5", special=True)  # a committed end: as before
    assert render.token_html(end).startswith('<span class="tok tok-accepted tok-special" data-kind="accepted"')


def test_the_reading_status_calls_a_prompt_long_only_when_it_is():
    """A trial saw every run's status say "a long prompt takes a while on a CPU", a 113-token one's too: the clause
    comes from LONG_PROMPT_TOKENS (512) on."""
    from app.prefill_notes import LONG_PROMPT_TOKENS
    from app.live.run import _reading_status

    view = live.RunView(inputs.parse_settings(_args()), "x", "ngram", None, None)
    short, long = _reading_status(view, 113)(), _reading_status(view, LONG_PROMPT_TOKENS)()
    assert "its 113 tokens (the prefill)…" in short and "long prompt" not in short
    assert "its 512 tokens (the prefill; a long prompt takes a while on a CPU)…" in long and "the target reads" in long


def test_stop_with_nothing_running_says_so_and_keeps_the_last_summary(tiny_model_dir, monkeypatch):
    """A trial: the Arena's Stop after "✓ Done" left "Stopping…" for good, and the Live tab's Stop on an idle page
    said "Stopped." although nothing had run. Now both say "Nothing is running."; the Arena keeps its summary under
    the line, and another press replaces the line instead of stacking it."""
    from app.arena import handlers as arena_handlers

    idle = FakeRequest("nothing-runs-here")
    done = render.status_html("Done: 1 prompt × 1 method and standard decoding in 9 s", "done")
    said = arena_handlers.stop(done, idle)
    assert "Nothing is running." in said and said.endswith(done) and "Stopping" not in said
    assert arena_handlers.stop(said, idle).count("Nothing is running.") == 1
    assert "Nothing is running." in live.stop(idle) and "Stopped." not in live.stop(idle)
    assert "Nothing is running." in live.stop_now(idle)[4]
    assert live.stop_run([], idle)[4] == {"__type__": "update"}  # stop_now's line stays
    # after a run that ended: the line goes above its "Done in ..." summary, which keeps its time (a second trial:
    # a Stop 27 s after the end read "Done in 41.5 s ... drawing the result: 29.8 s")
    me = FakeRequest("finished-here")
    out = drain(live.generate(_args(target=str(tiny_model_dir), max_new_tokens=8), request=me))
    done = out["status"]
    assert "Done in" in done
    time.sleep(0.6)
    stopped = live.stop_now(me)[4]
    assert stopped.startswith('<div class="status-notice" data-box="stop">') and "Nothing is running." in stopped
    assert stopped.endswith(done) and live.stop_now(me)[4] == stopped
    assert live.stop_run([], me)[4] == {"__type__": "update"}  # the result stays as it is
    from app.live.controls import _view_of

    view = _view_of(me)  # as a run stopped earlier: a second Stop says so too (a trial's changed nothing on the page)
    view.cancelled, view.stopped_at, view.stop_shown = True, view.ended, True
    again = live.stop_now(me)[4]
    assert "Nothing is running." in again and again.endswith(view.status()) and "Stopped after" in again
    assert live.stop_run([], me)[4] == {"__type__": "update"}  # the second handler keeps that line (a trial's did not)
    live.release_session(me)


def test_the_confidence_gate_reaches_the_drafters_with_one(monkeypatch):
    """The Live tab's confidence gate reaches the drafters its control is shown for (the heads, the distilled and
    'model' draft models), each with its own default when none is given (0.15, 0.2, 0); the others get None (no
    gate). The distilled draft's 0.2 was measured 1.16x standard decoding on a 2-core CPU (docs/heads.md)."""
    seen = {}
    monkeypatch.setattr(live.run, "make_drafter", lambda key, target, **o: seen.setdefault(key, o["min_confidence"]))
    for key in ("eagle", "medusa", "distilled", "model", "ngram", "early-exit"):
        settings = inputs.parse_settings(_args(drafter=key, draft_model="some/draft" if key == "model" else ""))
        live.run._new_drafter(settings, None, print)
    assert seen == {"eagle": 0.15, "medusa": 0.15, "distilled": 0.2, "model": 0.0, "ngram": None,
                    "early-exit": None}
    seen.clear()
    for key in ("distilled", "model", "ngram"):  # the visitor's own gate, where the drafter has one
        settings = inputs.parse_settings(_args(drafter=key, confidence=0.35,
                                               draft_model="some/draft" if key == "model" else ""))
        live.run._new_drafter(settings, None, print)
    assert seen == {"distilled": 0.35, "model": 0.35, "ngram": None}


def test_the_distilled_draft_gets_its_own_gate_by_default_and_the_visitors_gate_stays():
    """Picking the distilled draft moves the gate slider to 0.2 (the heads' 0.15, a draft model's 0) and shows it;
    a gate the visitor set survives every change of drafter (as their own k does)."""
    assert DEFAULTS["confidence"] is None  # each drafter's own default
    gate = 3  # the confidence slider's place in drafter_changed's outputs
    for key, value in (("distilled", 0.2), ("eagle", 0.15), ("medusa", 0.15), ("model", 0.0)):
        update = live.drafter_changed(key)[gate]
        assert update["visible"] is True and update["interactive"] is True and update["value"] == value, key
    for key in ("ngram", "early-exit", "lookahead", "none"):
        update = live.drafter_changed(key)[gate]
        assert update["visible"] is False and "value" not in update, key
    own = live.gate_chosen(0.4)
    assert own == 0.4 and live.gate_chosen(2) == 0.95 and live.gate_chosen(-1) == 0.0
    assert live.gate_chosen("") == live.gate_chosen(None) == {"__type__": "update"}  # no change
    for key in ("distilled", "eagle", "model"):
        assert live.drafter_changed(key, None, 4, own)[gate]["value"] == 0.4, key
    assert live.drafter_changed("distilled", None, 4, 0.0)[gate]["value"] == 0.0  # "always k", chosen, stays
    components = {c.get("props", {}).get("elem_id"): c["props"] for c in build_demo(drafter="distilled",
                                                                                   max_new_tokens=8).config["components"]}
    assert components["confidence"]["value"] == 0.2 and components["confidence"]["visible"] is True
    components = {c.get("props", {}).get("elem_id"): c["props"] for c in build_demo(max_new_tokens=8).config["components"]}
    assert components["confidence"]["value"] == 0.15 and components["confidence"]["visible"] is False  # ngram's page


def test_the_k_label_and_drafted_counts_show_a_draft_models_gate():
    """The pane header and history ("k = 4 · confidence gate 0.2") and the acceptance card ("6 of 32 drafted, 0.8
    per pass: the confidence gate 0.2 ends a draft ...") show the distilled draft's gate, so fewer than k drafted
    per pass reads as the gate's doing; no gate, no words."""
    gated = inputs.parse_settings(_args(drafter="distilled"))
    assert gated.gate == 0.2 and live.k_label(gated) == "k = 4 · confidence gate 0.2"
    assert live.k_label(inputs.parse_settings(_args(drafter="distilled", confidence=0))) == "k = 4"
    assert live.k_label(inputs.parse_settings(_args(drafter="ngram", confidence=0.3))) == "k = 4"
    assert inputs.parse_settings(_args(drafter="ngram", confidence=0.3)).gate == 0.0
    stats = RunStats(run="speculative")
    stats.accepted, stats.drafted, stats.passes = 6, 32, 40
    assert render.stats.drafted_text(stats, 0.2) == ("6 of 32 drafted, 0.8 per pass: the confidence gate 0.2 ends "
                                                     "a draft where the draft is unsure")
    assert render.stats.drafted_text(stats) == "6 of 32 drafted"
