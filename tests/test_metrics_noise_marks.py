"""Timings that are noise are never drawn as findings: the Arena's bars of a method whose baselines drifted are
hatched and say so; a Why-tab cost ratio below 1 (more tokens faster than one) reads "too noisy to tell"."""

from __future__ import annotations

from app import arena, why
from app.arena.verdicts import _noise_word, noise_text, speedup_reading
from specviz.core.verdict import FASTER, NOISY, NOT_FINDING

DECODE = "decode_speedup"  # the cells' wording: tests/test_messages.py; here, which reading each row gets and where


def _row(variant: str, drafter: str, drift: float | None, speedup: float = 1.07) -> dict:
    """A pooled row (30 tokens in 20 passes after the prefill: 1.5 tokens per pass); a method's decoding speedup
    spans its ratios against two baselines ``drift`` apart (high ÷ low = 1 + drift, as measured rows have it)."""
    row = {"level": "category", "category": "chat", "variant": variant, "drafter": drafter, "baseline_drift": drift,
           "decode_speedup": speedup, "tokens_per_pass": 1.5, "emitted_after_prefill": 30, "passes": 20,
           "acceptance_rate": 0.4, "tokens_per_s": 10.0,
           "predicted_speedup_paper": 1.2, "predicted_speedup_measured": 1.1, "tree_passes": 0}
    if drift is not None and drafter != arena.BASELINE:
        row |= {"decode_speedup_low": speedup / (1 + drift) ** 0.5, "decode_speedup_high": speedup * (1 + drift) ** 0.5}
    return row


def test_noisy_arena_bars_are_hatched_and_say_so():
    """A ratio whose spread against the baselines beside it spans 1 (0.92–1.25, baselines 36% apart) is too noisy
    to tell, hatched; one wholly above 1 is a finding even with baselines as far apart (issue 34: the one rule; it
    is faster than both the fast and the slow baseline)."""
    rows = [_row("standard", arena.BASELINE, None), _row("ngram k=4", "ngram", 0.36), _row("eagle k=4", "eagle", 0.05),
            _row("medusa k=4", "medusa", 0.36, speedup=1.45)]
    figure = arena.arena_figure(rows)
    bars = {(t.name, t.yaxis): t for t in figure.data}
    speed = bars[("ngram k=4", "y4")]
    assert speed.marker.pattern.shape == ("/",)
    assert speedup_reading(rows[1]).word == NOISY and "36%" in noise_text(rows[1]) and "drifted" in noise_text(rows[1])
    assert _noise_word(rows[1]) in speed.text[0]
    assert bars[("eagle k=4", "y4")].marker.pattern.shape == ("",)
    assert bars[("medusa k=4", "y4")].marker.pattern.shape == ("",)  # 1.24–1.69: faster, baselines unsteady
    column = arena.table(rows)["headers"].index("Speedup, decode")
    assert [r[column] for r in arena.table(rows)["data"]][1:] == [arena.speedup_cell(r, DECODE) for r in rows[1:]]
    assert [(v.word, v.value, f"{v.low:.2f}–{v.high:.2f}") for v in map(speedup_reading, rows[1:])] == [
        (NOISY, 1.07, "0.92–1.25"), (FASTER, 1.07, "1.04–1.10"), (FASTER, 1.45, "1.24–1.69")]
    assert bars[("ngram k=4", "y")].marker.pattern.shape is None  # tokens per pass is a count, not a timing
    assert any("hatched bars: too noisy to tell" in a.text and "or no reading (too short, or the speed changed)" in a.text
               for a in figure.layout.annotations)
    predicted = arena.predictions_figure(rows).data[0]
    assert list(predicted.marker.pattern.shape) == ["/", "", ""]


def test_an_arena_speedup_above_its_tokens_per_pass_is_impossible_and_marked():
    """Issue 34: an interval wholly above 1 is never "too noisy to tell"; a speedup above its tokens per pass is no
    finding and says that reason, in the table, the hover and the downloads alike: calmly, with the cause its
    timings support: beside baselines 9% apart, "no reading: a run too short to time (...); a longer run or more
    prompts would read it"; beside baselines 16% apart, "no reading: the machine's speed changed during the run
    (...); run again" (a trial read "not a finding" as alarming, and a short race's "the machine's speed changed"
    beside baselines 6% apart as a claim nothing showed)."""
    impossible = _row("ngram k=4", "ngram", 0.09, speedup=3.56)  # 1.5 tokens per pass cannot give 3.56x
    impossible |= {"decode_speedup_low": 3.40, "decode_speedup_high": 3.71}
    possible = _row("eagle k=4", "eagle", None, speedup=1.5)  # no pair of baselines: no spread to tell
    rows = [_row("standard", arena.BASELINE, None), impossible, possible]
    cells = arena.table(rows)["data"]
    column = arena.table(rows)["headers"].index("Speedup, decode")
    read = speedup_reading(impossible)
    assert (read.word, read.value, read.low, read.high) == (NOT_FINDING, 3.56, 3.40, 3.71)
    assert cells[1][column] == arena.speedup_cell(impossible, DECODE) == (
        "no reading: a run too short to time (3.56× measured, 3.40–3.71×; faster than its 1.5 tokens per pass allow; "
        "30 tokens in 20 passes timed, baselines 9% apart); a longer run or more prompts would read it")
    assert cells[2][column] == "1.50 (one run: no spread)" and cells[0][column] == "1.07 (reference)"
    assert arena.noisy_rows(rows) == 1
    speed = {(t.name, t.yaxis): t for t in arena.arena_figure(rows).data}[("ngram k=4", "y4")]
    assert speed.marker.pattern.shape == ("/",) and _noise_word(impossible) in speed.text[0] \
        and NOISY not in speed.text[0]
    noise = {r["variant"]: r["noise"] for r in arena.with_verdicts(rows)}  # the downloads say what the page says
    assert noise["ngram k=4"] == noise_text(impossible) == (
        "no reading: a run too short to time (faster than its 1.5 tokens per pass allow; 30 tokens in 20 passes "
        "timed, baselines 9% apart); a longer run or more prompts would read it")
    drifted = impossible | {"baseline_drift": 0.16}
    assert arena.table([drifted])["data"][0][column] == arena.speedup_cell(drifted, DECODE)
    assert arena.speedup_cell(drifted, DECODE) == (
        "no reading: the machine's speed changed during the run (3.56× measured, 3.40–3.71×; faster than its 1.5 "
        "tokens per pass allow; baselines drifted 16% apart); run again")


def test_a_cost_ratio_below_one_is_not_a_finding_and_says_why():
    grid = {"ms": {1: {1: 100.0, 2: 96.0, 4: 95.0, 8: 97.0}}, "param_bytes": 1e8, "spread": {}, "impossible": []}
    html = why.summary_html(grid, None, lookahead=[(3, 3, 2)])
    assert "Verifying k=4 (batch 1)" in html and "not a finding" in html and "for the price of" not in html
    assert "cannot take less time than over one" in html and "too noisy" not in html  # wholly below 1: its reason
    grid["ms"][1] = {1: 100.0, 2: 104.0, 4: 110.0, 8: 118.0}
    grid["spread"] = {1: {1: (98.0, 103.0), 4: (108.0, 114.0)}}
    html = why.summary_html(grid, None, lookahead=[(3, 3, 2)])
    assert "for the price of 1.12" in html and "too noisy" not in html


def test_the_cli_compare_judges_a_short_run_instead_of_printing_a_speedup(tiny_model_dir, capsys):
    import json

    from specviz.cli import main

    args = ["generate", "--target", str(tiny_model_dir), "--prompt", "one two one two", "--drafter", "ngram",
            "--k", "4", "--max-new-tokens", "6", "--no-chat-template", "--compare"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "too short to judge" in out and "x;" not in out.split("standard decoding:")[1], out
    assert main([*args, "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["compare"]
    assert record["decode_speedup_verdict"] == "too short" and record["decode_speedup_interval"] is None


def test_the_arena_status_counts_noisy_methods_in_words_that_agree(monkeypatch):
    """One prompt × two methods, both noisy: "2 of 2 methods noisy", not "2 prompt × method pairs"; several prompts
    count prompt × method results; the baseline's rows are never counted."""
    from types import SimpleNamespace

    def per_prompt(prompt_id: str, drifts: list[float]) -> list[dict]:
        rows = [_row("standard", arena.BASELINE, 2.3) | {"prompt_id": prompt_id}]
        return rows + [_row(f"ngram k={i}", "ngram", d) | {"prompt_id": prompt_id} for i, d in enumerate(drifts, 2)]

    one = per_prompt("p1", [0.36, 0.5])
    assert arena.noisy_count(arena.noisy_rows(one), one) == "2 of 2 methods"
    assert arena.noisy_count(1, per_prompt("p1", [0.36])) == "1 of 1 method"
    several = per_prompt("p1", [0.36, 0.01]) + per_prompt("p2", [0.01, 0.01])
    assert arena.noisy_count(arena.noisy_rows(several), several).startswith(
        "1 of 4 prompt × method results (the “Per prompt” table below")
    result = SimpleNamespace(ids_identical=None, rows=one, summary=one, stopped=False,
                             environment={"target": {"label": "T"}}, variants=["standard", "ngram k=2", "ngram k=3"])
    monkeypatch.setattr(arena.handlers, "busy_machine_warning", lambda cpu=None: None)  # whatever else the machine runs
    status = arena._done_status(result, 12.0)
    # the status says which kind of no finding (a trial: "too noisy to tell ...; or no reading ..." did not)
    assert ("Done: 1 prompt × 2 methods and standard decoding in 12 s · T · 2 of 2 methods no finding (too noisy to "
            "tell: ratios against the standard runs of its prompt on both sides of 1): read those ratios as "
            "noise") in status
    impossible = _row("ngram k=5", "ngram", 0.05, speedup=2.5) | {"prompt_id": "p1"}  # above its 1.5 tokens per pass
    both = arena.handlers._no_finding_kinds(one + [impossible])
    assert both == ("2 too noisy to tell: ratios against the standard runs of its prompt on both sides of 1; "
                    "1 no reading: a run too short to time (a speedup more than 5% above its tokens per pass beside "
                    "baselines within 15%)"), both
    # each cause of no reading counted apart: baselines 31% apart with no spread, and no drift measured at all
    drifted = _row("ngram k=6", "ngram", 0.31) | {"prompt_id": "p1", "decode_speedup_low": None,
                                                  "decode_speedup_high": None}
    unknown = _row("ngram k=7", "ngram", None, speedup=2.5) | {"prompt_id": "p1"}
    assert arena.handlers._no_finding_kinds([impossible, drifted, unknown, impossible]) == (
        "2 no reading: a run too short to time (a speedup more than 5% above its tokens per pass beside baselines "
        "within 15%); 1 no reading: the machine's speed changed during the run (baselines more than 15% apart); "
        "1 no reading: a run too short to time, or the machine's speed changed during the run (a speedup more than "
        "5% above its tokens per pass, no two baselines to tell which)")
    assert "pair" not in status


def test_every_drift_cell_is_one_measure_and_names_the_runs_it_spans():
    """Baseline drift is fastest ÷ slowest standard run − 1 on every row, "unsteady" above 15% on every row, with the
    runs it spans in brackets: a trial's per-prompt cards read the standard row's "188% (its runs apart)" beside a
    method's "92% unsteady" and could not tell why they differed (all the prompt's standard runs against the 2
    beside the method). Pooled rows give their worst prompt's."""
    prompt = {"level": "prompt", "prompt_id": "code-edit-4"}
    rows = [_row("standard", arena.BASELINE, 1.88) | prompt | {"runs": 3, "tokens": 48},
            _row("ngram k=4", "ngram", 0.92) | prompt | {"runs": 1, "tokens": 16},
            _row("eagle k=4", "eagle", 0.04) | prompt | {"runs": 1, "tokens": 16}]
    headers = arena.table(rows, arena.PROMPT_COLUMNS)["headers"]
    drift, tokens, runs = (headers.index(h) for h in ("Baseline drift", "Tokens per run", "Runs"))
    cells = arena.table(rows, arena.PROMPT_COLUMNS)["data"]
    assert [r[drift] for r in cells] == ["188% unsteady (all 3 standard runs)", "92% unsteady (the 2 beside it)",
                                         "4% (the 2 beside it)"]
    assert [(r[tokens], r[runs]) for r in cells] == [("16", "3"), ("16", "1"), ("16", "1")]
    pooled = [_row("standard", arena.BASELINE, 2.3, speedup=1.0) | {"runs": 12, "tokens": 170},
              _row("ngram k=4", "ngram", 0.05) | {"runs": 6, "tokens": 96}]
    assert [arena.drift_cell(r) for r in pooled] == ["230% unsteady (all standard runs, worst prompt)",
                                                     "5% (the 2 beside it, worst prompt)"]
    assert [arena.table(pooled, arena.TIMING_COLUMNS)["data"][i][2] for i in (0, 1)] == ["14.2 (mean)", "16"]
    assert arena.table(pooled)["data"][0][2] == "1.00 (reference)"
    assert arena.drift_cell({"baseline_drift": None}) == "–"


def _trial_rows() -> list[dict]:
    """The rows of a trial (one prompt, k = 4, Run, Stop, Run again): standard decoding; the EAGLE head across 1; the
    n-gram drafter at 3.12× decoding with 2.9 tokens per pass (impossible) and a tight 2.78× end to end; the
    distilled draft at 0.74× (0.65–0.83×), tight and wholly below 1, beside baselines 29% apart."""
    common = {"level": "prompt", "category": "typed", "prompt_id": "typed-1", "k": 4, "ids_identical": True,
              "tokens_per_s": 10.0, "acceptance_rate": 0.5, "tree_passes": 0, "predicted_speedup_paper": 1.5,
              "predicted_speedup_measured": 1.3}
    return [common | {"drafter": arena.BASELINE, "k": "", "variant": "standard", "baseline_drift": 0.05,
                      "decode_speedup": 1.0, "speedup": 1.0, "tokens_per_pass": 1.0},
            common | {"drafter": "eagle", "variant": "eagle k=4", "baseline_drift": 0.04, "tokens_per_pass": 2.1,
                      "decode_speedup": 1.02, "decode_speedup_low": 0.80, "decode_speedup_high": 1.30,
                      "speedup": 1.01, "speedup_low": 0.82, "speedup_high": 1.25},
            common | {"drafter": "ngram", "variant": "ngram k=4", "baseline_drift": 0.05, "tokens_per_pass": 2.9,
                      "emitted_after_prefill": 26, "passes": 9,
                      "decode_speedup": 3.12, "decode_speedup_low": 3.02, "decode_speedup_high": 3.17,
                      "speedup": 2.78, "speedup_low": 2.71, "speedup_high": 2.86},
            common | {"drafter": "model", "variant": "model k=4", "baseline_drift": 0.290571, "tokens_per_pass": 1.8,
                      "decode_speedup": 0.74, "decode_speedup_low": 0.65, "decode_speedup_high": 0.83,
                      "speedup": 0.76, "speedup_low": 0.67, "speedup_high": 0.86}]


def test_one_rule_reads_every_cell_chart_file_and_the_status(tmp_path, monkeypatch):
    """A trial: the status said "2 of 3 methods no finding (... no reading: ... baselines more than 15% apart)" while
    the distilled row (baselines 29% apart) read "0.74× the speed, slower (0.65–0.83×)" with a solid bar and noisy
    false in the CSV, and the n-gram row's end-to-end cell read "2.78× faster" beside its decoding "no reading". One
    rule (app.arena.verdicts.no_finding) now decides every place: the distilled row keeps its verdict (slower than
    both the fast and the slow baseline: issue 34's rule) and the status no longer counts such rows as no reading;
    the n-gram row's end-to-end cell follows its decoding "no reading"."""
    import csv
    from types import SimpleNamespace

    from app.arena.verdicts import NOISY_DRIFT, no_finding
    from specviz.analysis.arena_rows import ArenaResult

    rows = _trial_rows()
    assert NOISY_DRIFT == 0.15 and [no_finding(r) for r in rows] == [None, NOISY, "no reading", None]
    table = arena.table(rows)
    decode, end = (table["headers"].index(h) for h in ("Speedup, decode", "Speedup, end to end"))
    drift = table["headers"].index("Baseline drift")
    eagle, ngram, model = table["data"][1:]
    assert model[decode] == "0.74× the speed, slower (0.65–0.83×)"
    assert model[end] == "0.76× the speed, slower (0.67–0.86×)"
    assert model[drift] == "29% unsteady (the 2 beside it)"
    # baselines 5% apart: the machine held steady, so the short run's coarse timing is the cause named
    assert ngram[decode] == ("no reading: a run too short to time (3.12× measured, 3.02–3.17×; faster than its 2.9 "
                             "tokens per pass allow; 26 tokens in 9 passes timed, baselines 5% apart); a longer run "
                             "or more prompts would read it")
    assert ngram[end] == ("no reading: a run too short to time (2.78× measured, 2.71–2.86×; its decoding speedup "
                          "(3.12×) faster than its 2.9 tokens per pass allow; 26 tokens in 9 passes timed, baselines "
                          "5% apart); a longer run or more prompts would read it")
    assert eagle[decode] == "too noisy to tell: 1.02× measured (0.80–1.30×)"
    assert eagle[end] == "too noisy to tell: 1.01× measured (0.82–1.25×)"
    assert not any(word in cell for row in table["data"][1:3] for cell in (row[decode], row[end])
                   for word in ("× faster", "the speed, slower", "about the same"))
    # an end-to-end ratio on one side of 1 in a row whose decoding ratios lie across 1: too noisy too, and why
    across = rows[1] | {"speedup": 1.2, "speedup_low": 1.1, "speedup_high": 1.3}
    assert arena.speedup_cell(across, "speedup") == (
        "too noisy to tell: 1.20× measured (1.10–1.30×), its decoding ratios on both sides of 1")

    pooled = [r | {"level": "category"} for r in rows]  # one prompt: its category's rows hold the same numbers
    speed = {t.name: t for t in arena.arena_figure(pooled).data if t.yaxis == "y4"}  # the decoding speedup panel
    assert [speed[v].marker.pattern.shape for v in ("eagle k=4", "ngram k=4", "model k=4")] == [("/",)] * 2 + [("",)]
    assert "faster than its 2.9 tokens per pass allow" in speed["ngram k=4"].text[0]  # the hover says why
    assert list(arena.predictions_figure(pooled[1:]).data[0].marker.pattern.shape) == ["/", "/", ""]

    result = ArenaResult(rows=rows, summary=pooled, wall_s=30.0)
    csv_path, _ = arena.write_files(result, str(tmp_path), wall_s=31.0)
    with open(csv_path, encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert [(line["level"], line["drafter"], line["baseline_drift"], line["noisy"]) for line in lines] == [
        (level, drafter, shown, noisy) for level in ("prompt", "category") for drafter, shown, noisy in (
            ("none", "0.05", ""), ("eagle", "0.04", "true"), ("ngram", "0.05", "true"), ("model", "0.290571", "false"))]
    assert lines[2]["noise"] == ("no reading: a run too short to time (faster than its 2.9 tokens per pass allow; "
                                 "26 tokens in 9 passes timed, baselines 5% apart); a longer run or more prompts "
                                 "would read it") and lines[3]["noise"] == ""

    monkeypatch.setattr(arena.handlers, "busy_machine_warning", lambda cpu=None: None)
    done = SimpleNamespace(ids_identical=True, rows=rows, summary=pooled, stopped=False, environment={"target": {"label": "T"}},
                           variants=[r["variant"] for r in rows])
    status = arena.plain_status(arena._done_status(done, 30.0))  # the words the page shows
    assert status.startswith("✓ Done: 1 prompt × 3 methods and standard decoding in 30 s")
    assert ("2 of 3 methods no finding (1 too noisy to tell: ratios against the standard runs of its prompt on "
            "both sides of 1; 1 no reading: a run too short to time (a speedup more than 5% above its tokens per "
            "pass beside baselines within 15%)): read those ratios as noise") in status, status
