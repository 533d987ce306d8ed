"""The Classroom's rejection chart marks the target's own token: a trial in greedy mode read the subtitle "the
target's top choice replaces the guess" over a chart whose only mark was the drafted token, the bar of the target's
choice (p about 0.71) unmarked."""

from __future__ import annotations

import dataclasses
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app import classroom  # noqa: E402
from app.figures import COLORS, visible_lines  # noqa: E402
from specviz.analysis.stepper import Distributions, Recording, Step, Stepper  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402


def _greedy_recording() -> Recording:
    """A greedy run of one pass: guess " cat" (id 3) is rejected at position 0; the target's argmax is " dog"
    (id 6, p = 0.71), the recovered token."""
    prefill = PassEvent(run="speculative", index=0, kind="prefill", k=0, draft_ids=(), accept_mask=(),
                        num_accepted=0, next_id=1, next_kind="target", emitted_ids=(1,), details=(), text_delta="",
                        timings=Timings(), t_end_ms=5.0, num_generated=1)
    details = (PositionDetail(0.12, 1.0, None, 3, False), PositionDetail(0.3, 1.0, None, 4, False))
    one = PassEvent(run="speculative", index=1, kind="pass", k=2, draft_ids=(3, 4), accept_mask=(False, False),
                    num_accepted=0, next_id=6, next_kind="recovered", emitted_ids=(6,), details=details,
                    text_delta="", timings=Timings(), t_end_ms=9.0, num_generated=2, finish_reason="length")
    dist = Distributions(0, (6, 3, 5), (0.71, 0.12, 0.08), (0.0, 1.0, 0.0), None, drafted_id=3, chosen_id=6)
    texts = {1: "The", 3: " cat", 4: " sat", 5: " fox", 6: " dog"}
    return Recording((prefill, one), greedy=True, drafter_name="ngram", token_texts=texts, rejections={1: dist})


def _marks(figure) -> list[tuple[str, str, float, str]]:
    """(words, bar label, bar height, colour) of each mark on the wide chart."""
    return [(a.text, a.x, a.y, a.font.color) for a in figure.layout.annotations]


def test_greedy_decision_marks_the_targets_top_choice_beside_the_rejected_guess():
    stepper = Stepper(_greedy_recording())
    stepper.goto(Step(1, "decide"))
    figure = classroom.rejection_chart(stepper)
    assert "the target's top choice replaces the guess" in figure.layout.title.text
    assert _marks(figure) == [("<b>✗ drafted (rejected)</b>", "“ cat”", 1.0, COLORS["rejected"]),
                              ("<b>★ target's top choice</b>", "“ dog”", 0.71, COLORS["recovered"])]
    target = next(t for t in figure.data if t.name == "target p")
    assert dict(zip(target.x, target.y))["“ dog”"] == 0.71  # the marked bar is the target's tallest
    drafted, chosen = figure.layout.annotations
    assert drafted.ay < chosen.ay  # the rejected guess's mark stands higher, clear of the other
    narrow = figure.layout.meta["sv_narrow"]["annotations"]
    assert [visible_lines(n["text"]) for n in narrow] == [["✗ drafted", "(rejected)"], ["★ target's", "top choice"]]
    assert [n["x"] for n in narrow] == ["“ cat”", "“ dog”"]
    stepper.goto(Step(1, "emit"))  # emitted: the same bar, now the recovered token
    assert [m[:2] for m in _marks(classroom.rejection_chart(stepper))] == [
        ("<b>✗ drafted (rejected)</b>", "“ cat”"), ("<b>★ recovered</b>", "“ dog”")]


def test_sampling_decision_marks_no_choice_before_it_is_drawn():
    rec = _greedy_recording()
    dist = dataclasses.replace(rec.rejections[1], residual=(0.8, 0.0, 0.2))
    sampled = dataclasses.replace(rec, greedy=False, rejections={1: dist})
    before = classroom.rejection_figure(dist, sampled, reveal=False)
    assert "drawn from the residual" in before.layout.title.text
    assert [m[0] for m in _marks(before)] == ["<b>✗ drafted (rejected)</b>"]
    after = classroom.rejection_figure(dist, sampled, reveal=True)
    assert [m[:2] for m in _marks(after)] == [("<b>✗ drafted (rejected)</b>", "“ cat”"), ("<b>★ recovered</b>", "“ dog”")]
