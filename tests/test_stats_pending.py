"""The "prefill included" rate of the Live tab's tokens/s card waits for a pass: before the speculative run's first
pass after its prefill, 1 token ÷ the prefill's time is a figure of nothing yet (a new-user trial read one)."""

from __future__ import annotations

from app.render.stats import PENDING, prefill_included_html, rate_pair_html, stats_html, Comparison
from specviz.core.events import PassEvent, Timings
from specviz.measure.run_stats import RunStats


def _event(run: str, index: int, generated: int, t_end: float, finish: str | None = None) -> PassEvent:
    """A pass of standard decoding (index 0: the prefill) that emits token 1."""
    return PassEvent(run=run, index=index, kind="prefill" if index == 0 else "pass", k=0, draft_ids=(),
                     accept_mask=(), num_accepted=0, next_id=1, next_kind="target", emitted_ids=(1,), details=(),
                     text_delta="", timings=Timings(0.0, 50.0 if index == 0 else 10.0, 0.0), t_end_ms=t_end, num_generated=generated,
                     finish_reason=finish, near_tie_gap=None, next_k=0)


def _stats(run: str, passes: int, finish: str | None = None) -> RunStats:
    stats = RunStats(run=run)
    for i in range(passes + 1):  # the prefill (50 ms), then passes of 10 ms each
        stats.add(_event(run, i, i + 1, 50.0 + 10.0 * i, finish if i == passes else None))
    return stats


def test_a_run_with_only_its_prefill_shows_the_pending_mark_not_one_token_over_the_prefill():
    going = _stats("speculative", 0)
    assert going.tokens_per_s == 20.0  # 1 token in 50 ms: what the card showed before the fix
    assert prefill_included_html(going) == PENDING == "…"
    base = _stats("baseline", 3)  # 4 tokens in 80 ms
    pair = rate_pair_html(going, base, decode=False)
    assert pair.startswith("… <small>vs</small> 50.0 <small")


def test_the_rate_appears_with_the_first_pass_and_a_run_that_ended_at_its_prefill_keeps_its_rate():
    one_pass = _stats("speculative", 1)  # 2 tokens in 60 ms
    assert prefill_included_html(one_pass).startswith("33.3 <small")
    ended = _stats("speculative", 0, finish="eos")  # the whole run was its prefill: 1 token in 50 ms, a real rate
    assert prefill_included_html(ended).startswith("20.0 <small")


def test_the_cards_say_prefill_included_pending_for_both_card_forms():
    going, base = _stats("speculative", 0), _stats("baseline", 0)
    comparison = Comparison(None, 0, message="Identical so far (0 tokens).")
    with_drafter = stats_html(going, base, comparison, greedy=True)
    assert "prefill included: … <small>vs</small> …" in with_drafter
    alone = stats_html(None, base, comparison, greedy=True)
    assert "prefill included: …</div>" in alone and "20.0" not in alone
