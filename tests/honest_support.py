"""A run's passes made by hand, shared by the honest-numbers tests (test_honest_numbers.py, test_honest_timings.py,
test_honest_faults.py): a speculative run and its baseline as pass events of chosen timings, and the Live tab's view of
them. No model and no clock: every time is the one given. And the run history's HTML without its phone labels
(:func:`unlabelled`), for tests that read its cells."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app import inputs, live, render  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402


class Tokens:
    """Token i reads "t<i>"; id 0 is EOS."""

    all_special_ids = [0]

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(f"t{i}" for i in ids)


class FixedShare:
    """A stand-in for :class:`specviz.measure.machine.CpuShare` with a fixed share of other programs (None:
    unknown)."""

    def __init__(self, share):
        self.share = share

    def others(self):
        return self.share


def pass_event(run: str, index: int, emitted: tuple[int, ...], ms: float, draft: tuple[int, ...] = (), n: int = 0,
               finish: str | None = None, generated: int = 0) -> PassEvent:
    """Pass ``index`` of ``run`` ("speculative" or "baseline"; index 0 is the prefill) emitting the token ids
    ``emitted`` in ``ms`` milliseconds of verify time (no draft or other time), after drafting ``draft`` of which
    the first ``n`` are accepted (each with target p 0.9 and draft q 1.0); ``generated`` tokens in all so far and
    ``finish`` (e.g. "length") on the last pass. The next token is the bonus when every drafted token was accepted."""
    details = tuple(PositionDetail(0.9, 1.0, None, 1, True) for _ in draft)
    return PassEvent(run=run, index=index, kind="prefill" if index == 0 else "pass", k=len(draft),
                     draft_ids=draft, accept_mask=tuple(i < n for i in range(len(draft))), num_accepted=n,
                     next_id=emitted[-1], next_kind="bonus" if draft and n == len(draft) else "target",
                     emitted_ids=emitted, details=details, text_delta="", timings=Timings(0.0, ms, 0.0),
                     t_end_ms=0.0, num_generated=generated, finish_reason=finish)


def paired_runs(passes: int, spec_ms, base_ms,
                finish: str | None = "length") -> tuple[list[PassEvent], list[PassEvent]]:
    """A speculative run of ``passes`` passes of 2 tokens (one accepted draft and the bonus) taking ``spec_ms(i)``
    and its baseline of 2 * ``passes`` one-token steps taking ``base_ms(i)``, each after a 50 ms prefill."""
    spec = [pass_event("speculative", 0, (1,), 50.0)]
    spec += [pass_event("speculative", i, (2, 3), spec_ms(i), draft=(2,), n=1,
                         finish=finish if i == passes else None, generated=1 + 2 * i) for i in range(1, passes + 1)]
    base = [pass_event("baseline", 0, (1,), 50.0)]
    base += [pass_event("baseline", i, (2,), base_ms(i), finish=finish if i == 2 * passes else None, generated=1 + i)
             for i in range(1, 2 * passes + 1)]
    return spec, base


def run_view(spec_events, base_events, drafter="ngram") -> live.RunView:
    """The Live tab's view of a greedy run of k = 1 with ``drafter`` on a 10-token prompt, fed ``spec_events`` then
    ``base_events`` (lists of :class:`PassEvent`), its panes reading token i as "t<i>" (:class:`Tokens`)."""
    settings = inputs.parse_settings(dict(prompt="hi", target="embedded", drafter=drafter, draft_model="",
                                          exit_layer=0, k=1, adaptive_k="fixed", temperature=0.0, top_p=1.0,
                                          top_k=0, seed=0, max_new_tokens=64, stop_strings="", chat_template=True))
    view = live.RunView(settings, "tiny", drafter, render.Pane(Tokens()), render.Pane(Tokens(), separators=False),
                        prompt_tokens=10)
    for event in [*spec_events, *base_events]:
        view.add(event)
    return view


def unlabelled(table: str) -> str:
    """The history's HTML without the labels each cell carries for a phone (app.render.history._labelled)."""
    import re

    return re.sub(r'<span class="hist-label">[^<]*</span>', "", table)
