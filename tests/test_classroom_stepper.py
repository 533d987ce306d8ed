"""Step mode (specviz.analysis.stepper): the step state machine, the table numbers and the captions on hand-made events, and
one recorded run on the tiny models (the recorder must not change the run, and its distributions must agree with
the engine's numbers)."""

from __future__ import annotations

import pytest

from specviz.core.events import PassEvent, PositionDetail, Timings
from specviz.core.verify import acceptance_probability
from specviz.analysis.stepper import (Distributions, Recording, Step, Stepper, display_text, no_draft_reason,
                                      phase_label, record_run, steps_of)

TEXTS = {1: "Hello", 2: " world", 3: " and", 4: " all", 5: " of", 6: " you", 7: "!", 8: " them", 9: " friends",
         10: "\n", 11: " "}


def _pass(index, draft, n, next_id, next_kind, p, q, u, top=None, emitted=None, finish=None, k=None):
    details = tuple(PositionDetail(p[i], q[i], u[i] if u is not None and i < len(u) else None,
                                   (top or [0] * len(draft))[i], i <= n) for i in range(len(draft)))
    emitted = tuple(draft[:n]) + (next_id,) if emitted is None else emitted
    return PassEvent(run="speculative", index=index, kind="pass", k=len(draft) if k is None else k,
                     draft_ids=tuple(draft), accept_mask=tuple(i < n for i in range(len(draft))), num_accepted=n,
                     next_id=next_id, next_kind=next_kind, emitted_ids=emitted, details=details, text_delta="",
                     timings=Timings(1.0, 5.0, 0.5), t_end_ms=10.0 * index, num_generated=0, finish_reason=finish)


def _prefill():
    return PassEvent(run="speculative", index=0, kind="prefill", k=0, draft_ids=(), accept_mask=(), num_accepted=0,
                     next_id=1, next_kind="target", emitted_ids=(1,), details=(), text_delta="Hello",
                     timings=Timings(0.0, 8.0, 0.2), t_end_ms=8.2, num_generated=1)


def sampling_recording() -> Recording:
    """prefill "Hello"; pass 1: 4 drafted, 2 accepted, the 3rd rejected, the 4th never judged, recovered " them";
    pass 2: 2 drafted, both accepted, bonus "!"; pass 3: nothing drafted, a plain target token; pass 4: cut by the
    token limit after its first accepted draft."""
    events = (
        _prefill(),
        _pass(1, [2, 3, 4, 5], 2, 8, "recovered", p=[0.8, 0.3, 0.1, 0.2], q=[0.4, 0.6, 0.5, 0.3],
              u=[0.9, 0.2, 0.7]),
        _pass(2, [6, 7], 2, 9, "bonus", p=[0.9, 0.5], q=[0.7, 0.5], u=[0.1, 0.99]),
        _pass(3, [], 0, 10, "target", p=[], q=[], u=None, k=4),  # k = 4 asked, the drafter had no guess
        _pass(4, [3, 4], 2, 5, "bonus", p=[0.5, 0.5], q=[0.5, 0.5], u=[0.1, 0.2], emitted=(3,), finish="length"),
    )
    dist = Distributions(position=2, token_ids=(8, 4, 9), target=(0.5, 0.1, 0.2), draft=(0.1, 0.5, 0.1),
                         residual=(0.8, 0.0, 0.2), drafted_id=4, chosen_id=8)
    return Recording(events, greedy=False, drafter_name="tiny draft", token_texts=TEXTS, prompt_tokens=7,
                     rejections={1: dist})


def greedy_recording() -> Recording:
    """prefill; pass 1: n-gram drafted 3, the 2nd is not the target's top token (it wanted " friends")."""
    events = (_prefill(), _pass(1, [2, 3, 4], 1, 9, "recovered", p=[0.6, 0.2, 0.3], q=[1.0, 1.0, 1.0], u=None,
                                top=[2, 9, 4]))
    return Recording(events, greedy=True, drafter_name="n-gram lookup", deterministic=True, token_texts=TEXTS)


# ------------------------------------------------------------------------------------------------- stepping


def test_steps_follow_the_phase_order_of_each_pass():
    steps = steps_of(sampling_recording().events)
    assert steps[0] == Step(0, "prefill")
    assert [s.phase for s in steps if s.pass_index == 1] == ["draft", "verify", "decide", "emit"]
    assert [s.phase for s in steps if s.pass_index == 3] == ["draft", "verify", "emit"]  # nothing to decide
    assert [s.pass_index for s in steps] == sorted(s.pass_index for s in steps)
    assert len(steps) == 1 + 4 + 4 + 3 + 4


def test_next_and_prev_stay_put_at_the_ends_and_goto_clamps():
    s = Stepper(sampling_recording())
    assert s.at_start and s.prev() == Step(0, "prefill") and s.index == 0
    assert s.next() == Step(1, "draft")
    assert s.next() == Step(1, "verify")
    assert s.prev() == Step(1, "draft")
    last = s.goto(10_000)
    assert s.at_end and last == Step(4, "emit")
    assert s.next() == last and s.index == len(s.steps) - 1
    assert s.goto(-5) == Step(0, "prefill")
    assert s.goto(Step(2, "decide")) == Step(2, "decide")
    with pytest.raises(ValueError):
        s.goto(Step(2, "nonsense"))


def test_next_rejection_jumps_to_the_decision_and_then_stays():
    s = Stepper(sampling_recording())
    assert s.next_rejection() == Step(1, "decide")
    assert s.next_rejection() == Step(1, "decide")  # no later rejection: stays put
    assert s.distributions() is not None
    s.next()
    assert s.current == Step(1, "emit") and s.distributions().chosen_id == 8
    s.goto(Step(1, "verify"))
    assert s.distributions() is None  # only at decide / emit
    s.goto(Step(2, "decide"))
    assert s.distributions() is None  # no rejection in pass 2


# ------------------------------------------------------------------------------------------------- the table


def test_table_reveals_q_then_p_then_ratio_uniform_and_decision():
    s = Stepper(sampling_recording())
    draft = s.table_rows(Step(1, "draft"))
    assert [r.token for r in draft] == [" world", " and", " all", " of"]
    assert [r.q for r in draft] == [0.4, 0.6, 0.5, 0.3]
    assert all(r.p is None and r.ratio is None and r.uniform is None and r.decision is None for r in draft)
    verify = s.table_rows(Step(1, "verify"))
    assert [r.p for r in verify] == [0.8, 0.3, 0.1, 0.2] and all(r.decision is None for r in verify)
    decide = s.table_rows(Step(1, "decide"))
    assert [r.decision for r in decide] == ["accepted", "accepted", "rejected", "not judged"]
    assert decide[0].ratio == 1.0  # p >= q: always kept
    assert decide[1].ratio == pytest.approx(0.5)  # min(1, 0.3 / 0.6)
    assert decide[2].ratio == pytest.approx(0.2)  # min(1, 0.1 / 0.5); u = 0.7 >= 0.2: rejected
    assert [r.uniform for r in decide] == [0.9, 0.2, 0.7, None]
    assert decide[3].ratio is None  # never judged: no test, no number drawn
    assert all(r.target_top is None for r in decide)  # sampling mode: no greedy column
    emit = s.table_rows(Step(1, "emit"))
    assert emit[:4] == decide
    assert (emit[4].kind, emit[4].token, emit[4].decision, emit[4].position) == ("next", " them", "recovered", 3)
    assert emit[4].p == 0.5  # the recovered token's target probability, from the recorded distribution


def test_table_of_a_bonus_pass_a_pass_without_draft_and_a_cut_pass():
    s = Stepper(sampling_recording())
    bonus = s.table_rows(Step(2, "emit"))
    assert [r.decision for r in bonus] == ["accepted", "accepted", "bonus"]
    assert bonus[0].ratio == 1.0 and bonus[1].ratio == 1.0
    plain = s.table_rows(Step(3, "emit"))
    assert [(r.kind, r.decision, r.token) for r in plain] == [("next", "target", "⏎")]
    cut = s.table_rows(Step(4, "emit"))
    assert [r.decision for r in cut] == ["accepted", "accepted"]  # the bonus token was never emitted
    assert s.table_rows(Step(0, "prefill"))[0].token == "Hello"


def test_greedy_table_shows_the_targets_top_token_and_no_uniform():
    s = Stepper(greedy_recording())
    assert all(r.target_top is None for r in s.table_rows(Step(1, "draft")))
    rows = s.table_rows(Step(1, "decide"))
    assert [r.target_top for r in rows] == [" world", " friends", " all"]
    assert [r.decision for r in rows] == ["accepted", "rejected", "not judged"]
    assert all(r.ratio is None and r.uniform is None for r in rows)
    assert [r.q for r in rows] == [1.0, 1.0, 1.0]  # n-gram: one-hot


def test_acceptance_ratio_and_display_text():
    assert acceptance_probability(0.2, 0.4) == pytest.approx(0.5)
    assert acceptance_probability(0.9, 0.3) == 1.0
    assert acceptance_probability(0.2, 0.0) == 1.0 and acceptance_probability(0.0, 0.0) == 0.0
    assert display_text("\n") == "⏎" and display_text("  ") == "␣␣" and display_text("") == "∅"
    assert display_text(" the") == " the" and display_text("\x18") == "⟨0x18⟩"
    assert display_text("\xa0") == "⟨U+00A0⟩" and display_text(" \n") == "␣⏎"


# ------------------------------------------------------------------------------------------------- captions


def test_captions_explain_each_phase():
    s = Stepper(sampling_recording())
    assert "prefill" in s.caption(Step(0, "prefill")).lower() and "“Hello”" in s.caption(Step(0, "prefill"))
    draft = s.caption(Step(1, "draft"))
    assert "4 tokens" in draft and "“ world”" in draft and "q" in draft
    assert "single forward pass" in s.caption(Step(1, "verify"))
    decide = s.caption(Step(1, "decide"))
    assert "min(1, p/q)" in decide and "rejected" in decide and "2 of 4 accepted" in decide
    assert "p = 0.10" in decide and "q = 0.50" in decide and "u = 0.70" in decide
    assert "The guess after it was never judged: it was built on a rejected token" in decide
    emit = s.caption(Step(1, "emit"))
    assert "recovered" in emit and "“ them”" in emit and "norm(max(0, p − q))" in emit and "3 tokens" in emit
    assert "bonus" not in emit
    all_ok = s.caption(Step(2, "decide"))
    assert "All 2 guesses were accepted" in all_ok and "rejected" not in all_ok
    bonus = s.caption(Step(2, "emit"))
    assert "bonus" in bonus and "“ friends”" in bonus and "3 tokens" in bonus
    assert "no guess" in s.caption(Step(3, "draft"))
    cut = s.caption(Step(4, "emit"))
    assert "token limit" in cut and "last pass" in cut


def test_greedy_captions_talk_about_the_top_choice():
    s = Stepper(greedy_recording())
    assert "certain" in s.caption(Step(1, "draft"))  # deterministic drafter: q = 1
    decide = s.caption(Step(1, "decide"))
    assert "top choice" in decide and "preferred “ friends”" in decide and "rejected" in decide
    assert "u =" not in decide
    emit = s.caption(Step(1, "emit"))
    assert "“ friends”" in emit and "top choice" in emit and "norm(max" not in emit


def test_progress_names_the_pass_and_phase():
    s = Stepper(sampling_recording())
    s.goto(Step(1, "verify"))
    assert s.progress() == "Pass 1 of 4 · 2 · verify"
    assert s.progress(Step(1, "emit")) == "Pass 1 of 4 · 4 · recovered / bonus token"


def test_a_pass_with_nothing_drafted_gives_a_plain_target_token():
    """k = 0 (k = auto's plain step, or no room before the token limit) and a drafter with no guess: the token at
    the emit phase is a plain target token, never called recovered or bonus (no draft was rejected or accepted)."""
    zero = _pass(1, [], 0, 10, "target", p=[], q=[], u=None, k=0)
    none = _pass(2, [], 0, 7, "target", p=[], q=[], u=None, k=4)
    s = Stepper(Recording((_prefill(), zero, none), greedy=True, drafter_name="n-gram lookup", deterministic=True,
                          token_texts=TEXTS))
    assert [st.phase for st in s.steps if st.pass_index == 1] == ["draft", "verify", "emit"]
    for index in (1, 2):
        assert s.progress(Step(index, "emit")) == f"Pass {index} of 2 · 4 · plain target token"
        emit = s.caption(Step(index, "emit"))
        assert "plain target token" in emit and "not recovered" in emit and "not a bonus" in emit
        rows = s.table_rows(Step(index, "emit"))
        assert [(r.kind, r.decision) for r in rows] == [("next", "target")]
    assert "k = 0 for this pass" in s.caption(Step(1, "draft")) and "plain step" in s.caption(Step(1, "draft"))
    assert "no guess" in s.caption(Step(2, "draft")) and "nothing in the text matched" in s.caption(Step(2, "draft"))
    assert phase_label("emit", drafted=False) == "4 · plain target token"
    assert phase_label("emit") == "4 · recovered / bonus token" and phase_label("verify", False) == "2 · verify"
    assert no_draft_reason(zero).startswith("k = 0") and no_draft_reason(none) == "the drafter had no guess"


# ------------------------------------------------------------------------------------------------- a real run


def test_recorded_sampling_run_on_tiny_models(tiny_target, tiny_draft):
    from specviz.drafters import ModelDrafter
    from specviz.core.engine import GenerationConfig, collect, speculative_generate
    from specviz.runtime.models import encode_prompt
    from specviz.core.verify import SamplingConfig

    config = GenerationConfig(max_new_tokens=20, sampling=SamplingConfig(temperature=1.0, seed=3), k=4)
    ids = encode_prompt(tiny_target.tokenizer, "The quick brown fox")
    rec = record_run(tiny_target, ModelDrafter(tiny_draft.model, "tiny draft"), ids, config)
    plain = collect(speculative_generate(tiny_target, ModelDrafter(tiny_draft.model, "tiny draft"), ids, config),
                    tiny_target.tokenizer, ids)
    assert tuple(rec.output_ids) == plain.token_ids  # recording does not change the run
    assert not rec.greedy and not rec.deterministic and rec.prompt_tokens == len(ids)
    rejected = [i for i, e in enumerate(rec.events) if e.num_rejections]
    assert rejected and set(rec.rejections) == set(rejected)
    s = Stepper(rec)
    seen = 0
    for step in s.steps:
        if step.phase != "decide":
            continue
        event = s.event(step)
        for row in s.table_rows(step):
            if row.decision in ("accepted", "rejected"):
                assert row.ratio == pytest.approx(min(1.0, row.p / row.q))
                assert (row.uniform < row.ratio) == (row.decision == "accepted")
                seen += 1
        dist = s.distributions(step)
        if event.num_rejections:
            n = event.num_accepted
            at = dist.token_ids.index(event.draft_ids[n])
            assert dist.target[at] == pytest.approx(event.details[n].target_prob, abs=1e-4)
            assert dist.draft[at] == pytest.approx(event.details[n].draft_prob, abs=1e-5)
            assert dist.residual[at] == 0.0  # a rejected token had p < q: no residual mass
            assert dist.residual[dist.token_ids.index(event.next_id)] > 0  # the recovered token came from there
            assert sum(dist.residual) <= 1.0 + 1e-5
            assert "rejected" in s.caption(step)
    assert seen > 0
    assert s.next_rejection().phase == "decide"


def test_recorded_greedy_ngram_run_is_deterministic_with_one_hot_q(tiny_target):
    from specviz.drafters import NgramDrafter
    from specviz.core.engine import GenerationConfig
    from specviz.runtime.models import encode_prompt

    ids = encode_prompt(tiny_target.tokenizer, "the cat and the dog and the cat and the dog and the",
                        use_chat_template=False)
    rec = record_run(tiny_target, NgramDrafter(), ids, GenerationConfig(max_new_tokens=16, k=3))
    assert rec.greedy and rec.deterministic
    s = Stepper(rec)
    judged = 0
    for step in s.steps:
        event = s.event(step)
        for i, row in enumerate(s.table_rows(step)):
            if row.kind == "draft":
                assert row.q == 1.0
            if step.phase == "decide" and row.decision in ("accepted", "rejected"):
                matches = event.draft_ids[i] == event.details[i].target_top_id
                assert matches == (row.decision == "accepted")
                judged += 1
    assert judged > 0 and rec.rejections
    for index, dist in rec.rejections.items():
        assert dist.residual is None and dist.chosen_id == rec.events[index].next_id
        assert dist.draft[dist.token_ids.index(dist.drafted_id)] == 1.0
        assert dist.target[dist.token_ids.index(dist.chosen_id)] == max(dist.target)  # greedy: the argmax


def test_one_guess_reads_in_the_singular():
    """A pass that drafted one guess, accepted with a bonus: "the guess", never "all 1 guesses"."""
    events = (_prefill(), _pass(1, [6], 1, 9, "bonus", p=[0.9], q=[0.7], u=[0.1]))
    s = Stepper(Recording(events, greedy=False, drafter_name="tiny draft", token_texts=TEXTS, prompt_tokens=7))
    said = [s.caption(Step(1, phase)) for phase in ("verify", "decide", "emit")]
    assert said[0].startswith("The target checked the guess in a single forward pass (one pass over 2 positions")
    assert "The guess was accepted." in said[1]
    assert said[2].startswith("The guess was accepted, so the target's forward pass gives one more token for free")
    assert not any("all 1" in text.lower() or "1 guesses" in text for text in said)
