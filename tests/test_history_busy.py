"""A run measured on a busy machine carries "⚠ busy" in the Live tab's history, with what that means on hover (a
new-user trial found only the run view's busy warning, and no flag in the table once the next run replaced it).
Hand-made runs (honest_support.py); the load measurement is replaced."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app.records import RunSummary  # noqa: E402
from app.render.history import BUSY_MARK, busy_title, history_busy, history_html  # noqa: E402
from honest_support import FixedShare, paired_runs, run_view  # noqa: E402

TITLE_60 = ("Measured on a busy machine: other programs used 60% of the CPUs during the run. They slow a one-token "
            "step more than a wide pass, so the ratio flatters speculation: on a quiet machine a gain may be smaller, "
            "a loss larger.")


def _row(share):
    """A 20-pass run of 2 tokens per 10 ms pass beside a baseline of 1 token per 8 ms step, with other programs at
    ``share`` of the CPUs during it (None: unknown)."""
    spec, base = paired_runs(20, lambda i: 10.0 + (i % 3), lambda i: 8.0 + (i % 2))
    view = run_view(spec, base)
    view.cpu = FixedShare(share)
    return view.summary()


def test_a_run_on_a_busy_machine_keeps_its_share_in_its_history_row_and_shows_the_mark_with_its_title():
    row = _row(0.6)
    assert row.busy_share == 0.6
    assert busy_title(0.6) == TITLE_60
    cell = history_busy(row)
    assert cell == (f'<br><small class="hist-busy" title="{TITLE_60}" style="white-space: nowrap">⚠ busy</small>')
    table = history_html([row])
    assert table.count(BUSY_MARK) == 1
    speedup_cell = table[table.index('<td class="hist-speedup">'):]
    assert speedup_cell.index(BUSY_MARK) < speedup_cell.index("</td>")  # in the speedup's own cell


def test_a_quiet_or_unmeasured_run_carries_no_mark():
    for share in (0.05, None):
        row = _row(share)
        assert row.busy_share is None and history_busy(row) == ""
        assert BUSY_MARK not in history_html([row])
    assert history_busy(RunSummary()) == ""  # a standard-decoding row, and any row kept from before the field
