"""A new-user trial: the Arena's table showed the acceptance rate as a fraction ("0.58") where the Live tab's card
shows a percentage ("73%"). The Arena's cells, its chart's axis and hover now say it in percent, in the Live card's
own words (app.render.stats.counted_spread); α stays a fraction, as its Live card; the downloads keep fractions."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest  # noqa: E402

from app import arena as arena_tab  # noqa: E402
from app.arena.tables import share_cell, share_interval  # noqa: E402
from app.render.stats import counted_spread  # noqa: E402
from specviz.analysis.arena_rows import ArenaResult  # noqa: E402
from specviz.measure.run_stats import RunStats  # noqa: E402

PASSES = [4, 4, 4, 0, 0, 4, 2, 4, 3, 4, 0, 4]  # accepted per pass of 4 drafted: 33 of 48
"""A method's row that keeps its per-pass counts (its interval is over the passes, as the Live card's)."""


def _rows() -> list[dict]:
    rejections = [int(a < 4) for a in PASSES]
    method = {"level": "category", "category": "chat", "prompt_id": "chat-1", "variant": "ngram k=4",
              "drafter": "ngram", "k": "4", "prompts": 1, "passes": len(PASSES), "drafted": 48,
              "accepted": sum(PASSES), "rejections": sum(rejections), "acceptance_rate": sum(PASSES) / 48,
              "alpha": sum(PASSES) / (sum(PASSES) + sum(rejections)), "tokens_per_pass": 2.1,
              "pass_drafted": [4] * len(PASSES), "pass_accepted": list(PASSES), "pass_rejections": rejections,
              "decode_speedup": 1.4, "decode_speedup_low": 1.3, "decode_speedup_high": 1.5, "baseline_drift": 0.05,
              "ids_identical": True}
    base = {"level": "category", "category": "chat", "prompt_id": "chat-1", "variant": "standard",
            "drafter": "none", "k": "0", "prompts": 1, "decode_speedup": 1.0, "tokens_per_pass": 1.0,
            "ids_identical": None}
    return [base, method]


def _live_card_words(value: float) -> str:
    """The Live tab's acceptance card for a run with the same passes: "69% (…–…%)" (its text without the HTML)."""
    stats = RunStats(runs=1, passes=len(PASSES), emitted=20, generated=21, drafted=48, accepted=sum(PASSES),
                     pass_drafted=[4] * len(PASSES), pass_accepted=list(PASSES),
                     pass_rejections=[int(a < 4) for a in PASSES])
    assert stats.acceptance_rate == pytest.approx(value)
    return f"{value:.0%} ({counted_spread(stats.acceptance_interval(), stats, percent=True)})"


def test_the_table_shows_acceptance_in_percent_as_the_live_card_and_alpha_as_a_fraction():
    base, method = _rows()
    interval = share_interval(method, "acceptance_rate")
    table = arena_tab.table([base, method])
    cells = dict(zip(table["headers"], table["data"][1]))
    assert cells["Acceptance"] == "69% (44–92%)" == _live_card_words(method["acceptance_rate"])
    assert cells["Acceptance"] == f"{method['acceptance_rate']:.0%} ({interval.low * 100:.0f}–{interval.high:.0%})"
    assert cells["α"] == "0.87 (0.72–0.96)"  # a fraction, as the Live tab's α card
    assert dict(zip(table["headers"], table["data"][0]))["Acceptance"] == "–"  # standard decoding drafts nothing
    prompts = arena_tab.table([method], arena_tab.PROMPT_COLUMNS)
    assert dict(zip(prompts["headers"], prompts["data"][0]))["Acceptance"] == "69% (44–92%)"
    assert share_cell({"acceptance_rate": 0.5}, "acceptance_rate") == "50% (no counts: no spread)"


def test_the_acceptance_chart_reads_in_percent_on_its_axis_and_hover():
    figure = arena_tab.arena_figure(_rows())
    panel = next(t for t in figure.data if t.yaxis == "y2")  # the second panel: acceptance
    assert figure.layout.yaxis2.tickformat == ".0%" and list(figure.layout.yaxis2.range) == [0, 1.05]
    assert "%{y:.0%}" in panel.hovertemplate and panel.text[0].startswith("(44–92%, 95% interval over its passes)")
    speed = next(t for t in figure.data if t.yaxis == "y4")  # the others keep their numbers
    assert figure.layout.yaxis4.tickformat is None and "%{y:.2f}" in speed.hovertemplate


def test_the_downloads_keep_the_acceptance_rate_a_fraction(tmp_path):
    rows = _rows()
    result = ArenaResult(rows=rows, summary=[])
    csv_path, json_path = arena_tab.write_files(result, str(tmp_path))
    with open(csv_path, newline="") as f:
        written = {r["drafter"]: r for r in csv.DictReader(f)}
    assert written["ngram"]["acceptance_rate"] == "0.6875"  # 33 / 48, the number itself, not "69%"
    saved = json.loads(Path(json_path).read_text())
    assert {r["drafter"]: r.get("acceptance_rate") for r in saved["rows"]}["ngram"] == 0.6875


def test_the_page_keeps_each_range_on_one_line_and_the_table_stays_plain():
    """A trial read "60% (49–" / "70%)" in a narrow column: a browser may break a line after an en dash. The page's
    cells join each range's dash to its end (a word joiner); a break before the bracket stays allowed."""
    from app.arena.tables import shown_table
    from app.render.markup import WORD_JOINER, keep_ranges

    assert keep_ranges("60% (49–70%)") == "60% (49–\u206070%)"
    assert keep_ranges("1.42× faster (1.31–1.55×)") == "1.42× faster (1.31–\u20601.55×)"
    assert keep_ranges("–") == "–" and keep_ranges("standard – reference") == "standard – reference"
    base, method = _rows()
    plain, shown = arena_tab.table([base, method]), shown_table([base, method])
    assert shown["headers"] == plain["headers"]
    assert [[cell.replace(WORD_JOINER, "") for cell in line] for line in shown["data"]] == plain["data"]
    acceptance = plain["headers"].index("Acceptance")
    assert shown["data"][1][acceptance] == "69% (44–\u206092%)" and WORD_JOINER not in "".join(plain["data"][1])


def test_the_page_keeps_each_hyphenated_name_whole():
    """At 1400 px the timings table's Method column showed "early-" / "exit" / "k=auto": the page's name columns (a
    prompt, a category, a method) join a hyphen to the rest of its word; the other cells and the plain table keep
    theirs."""
    from app.arena.tables import PROMPT_COLUMNS, shown_table
    from app.render.markup import WORD_JOINER, keep_names

    assert keep_names("early-exit k=auto") == "early-\u2060exit k=auto" and keep_names("k=4 - 2") == "k=4 - 2"
    base, method = _rows()
    row = dict(method, variant="early-exit k=4", category="code-edit", prompt_id="code-edit-1")
    shown, plain = shown_table([row], PROMPT_COLUMNS), arena_tab.table([row], PROMPT_COLUMNS)
    cells = dict(zip(shown["headers"], shown["data"][0]))
    assert (cells["Prompt"], cells["Method"]) == ("code-\u2060edit-\u20601", "early-\u2060exit k=4")
    summary = dict(zip(*(lambda t: (t["headers"], t["data"][0]))(shown_table([row]))))
    assert summary["Category"] == "code-\u2060edit"
    assert [cell.replace(WORD_JOINER, "") for cell in shown["data"][0]] == plain["data"][0]


def test_the_live_cards_keep_each_range_on_one_line_as_sent():
    """Trial: "7.6 s verify (99.9%; 99.8–" / "100.0%)" in a Live card. The cards the page is sent join each range's
    dash to its end, as the Arena's cells do (one function: app.render.markup.keep_ranges)."""
    from app.live.outputs import Frame

    sent = Frame(stats='<div class="card-extra">verify (99.9%; 99.8–100.0%)</div>').values()[3]
    assert sent == '<div class="card-extra">verify (99.9%; 99.8–\u2060100.0%)</div>'
