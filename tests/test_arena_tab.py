"""The Arena tab's handler called directly as a generator (drained by arena_support.drain): a table, both charts
and both files; the benchmark suite's categories; a clear message for each bad input; max new tokens clamped to the
slider and said; Stop, and what a stopped race keeps and says; the pace the status gives; the pooled rows as two
tables; the downloads' verdicts, notes and wall time; and, in a browser, refused runs said in the status line with
no toast, and a slider's clamp toast closed by Run. run_arena on tiny models: test_arena_runs.py; the spread of its figures: test_arena_spread.py."""

from __future__ import annotations

import csv
import html
import json
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from arena_support import drain  # noqa: E402
from browser_support import open_page, requires_chromium  # noqa: E402
from toast_support import no_toast  # noqa: E402

from app import arena as arena_tab  # noqa: E402
from app.render.markup import WORD_JOINER  # noqa: E402


GOOD = dict(drafters=["ngram", "early-exit"], ks=["2", "auto"], source="prompt",
            prompt="The quick brown fox jumps over the lazy dog", category="qa", max_new_tokens=16,
            target="embedded", draft_model="", exit_layer=0, temperature=0.0, seed=0, chat_template=True)


def test_handler_yields_a_table_charts_and_files(tiny_model_dir):
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir)})))
    table = out["arena-table"]
    assert table["headers"][:2] == ["Category", "Method"]
    methods = [row[1].replace(WORD_JOINER, "") for row in table["data"]]  # "early-exit" kept whole on the page
    # one category: its rows only (the pooled "all" rows would repeat them; they stay in the CSV)
    assert methods == ["standard", "ngram k=2", "ngram k=auto", "early-exit k=2", "early-exit k=auto"]
    assert all(row[-1] == "✓" for row in table["data"] if row[1] != "standard")
    assert len(out["arena-prompts"]["data"]) == 5
    assert isinstance(out["arena-charts"], go.Figure) and isinstance(out["arena-predictions"], go.Figure)
    assert "Done" in out["arena-status"] and "identical" in out["arena-status"]
    with open(out["arena-csv"], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 + 10 and rows[0]["prompt_id"] == "your-prompt"
    with open(out["arena-json"], encoding="utf-8") as f:
        data = json.load(f)
    assert data["settings"]["target"] == str(tiny_model_dir.resolve()) and data["versions"]["torch"]


def test_handler_runs_a_suite_category(tiny_model_dir):
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "source": "category", "category": "math",
                                         "drafters": ["ngram"], "ks": ["4"], "max_new_tokens": 8})))
    assert {row[0] for row in out["arena-table"]["data"]} == {"math"}
    # the benchmark suite's math prompts (assets/suite.jsonl), each with its baseline row
    assert [row[0].replace(WORD_JOINER, "") for row in out["arena-prompts"]["data"]] == [
        f"math-{i}" for i in range(1, 7) for _ in range(2)]
    assert out["arena-csv"].endswith(".csv")


def test_the_arena_categories_are_the_benchmark_suites():
    """Seen: "one category of the suite" ran 2 prompts of the Live tab's examples (a list with repeated-text and no
    multi-turn), not the 54-prompt suite the README's tables use. The Arena reads the suite itself and says so."""
    from specviz.analysis.prompts import DEFAULT_PROMPTS, load_prompts

    suite = load_prompts(DEFAULT_PROMPTS)
    assert len(suite) == 54 and [p["id"] for p in arena_tab.suite()] == [p.id for p in suite]
    assert arena_tab.categories() == ["chat", "translation", "summarization", "qa", "math", "rag", "code-edit",
                                      "multi-turn"]
    assert ("multi-turn (12 prompts)", "multi-turn") in arena_tab.category_choices()
    assert ("math (6 prompts)", "math") in arena_tab.category_choices()
    assert len(arena_tab.choose_prompts("suite", "", "")) == 54
    assert [p["id"] for p in arena_tab.choose_prompts("category", "", "multi-turn")][-1] == "multi-turn-12"
    with pytest.raises(arena_tab.InputError, match="Pick a category"):
        arena_tab.choose_prompts("category", "", "repeated-text")
    assert arena_tab.SUITE_INFO.format(n=54, c=8) == ("The benchmark suite: assets/suite.jsonl, 54 prompts in 8 "
                                                      "categories (the README's tables use it)")


@pytest.mark.parametrize("change, words", [
    ({"drafters": []}, "at least one drafter"),
    ({"ks": []}, "at least one draft length"),
    ({"prompt": "   "}, "prompt is empty"),
    ({"source": "category", "category": "nope"}, "Pick a category"),
    ({"drafters": ["model"]}, "needs a draft model"),
    ({"max_new_tokens": "lots"}, "Max new tokens per run must be a number"),
    ({"target": "/no/such/folder"}, "no such local folder"),
    ({"exit_layer": 9}, "early-exit layer"),
])
def test_bad_input_gives_a_message(tiny_model_dir, change, words):
    """One sentence in the status line, and no toast saying it again."""
    args = GOOD | {"target": str(tiny_model_dir), "max_new_tokens": 4} | change
    with no_toast():
        out = drain(arena_tab.run(**args))
    assert "status-error" in out["arena-status"] and re.search(words, out["arena-status"], re.I)
    assert "Traceback" not in out["arena-status"] and "arena-csv" not in out


def test_stop_button_flags_the_running_arena(tiny_model_dir, monkeypatch):
    gen = arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "max_new_tokens": 64}))
    first = next(gen)
    assert "Starting" in first[0]
    arena_tab.stop()  # no request: flags every running arena
    out = drain(gen)
    assert "Stopped" in out["arena-status"]


def test_arena_and_why_follow_the_operator_policy(monkeypatch, tmp_path):
    """On a public deployment a visitor cannot point the arena or the why tab at a local folder."""
    from app import arena as arena_tab
    from app import why as why_tab

    monkeypatch.setenv("SPECVIZ_PUBLIC", "1")
    folder = str(tmp_path)
    with no_toast():  # said in each tab's status line only
        arena_out = list(arena_tab.run(["ngram"], [4], "prompt", "Hello there", None, 8, folder, "", 0, 0.0, 0, True))
        why_out = list(why_tab.measure(folder, 0, 0.8, 4, 2.0, 1.2))
    assert any("SPECVIZ_ALLOW_LOCAL_PATHS" in str(part) for part in arena_out[-1])
    assert any("SPECVIZ_ALLOW_LOCAL_PATHS" in str(part) for part in why_out[-1])


def test_a_max_new_tokens_outside_the_slider_is_clamped_and_said(tiny_model_dir):
    """Seen in the browser: 3 typed into the max-new-tokens box (the slider's range is 8..256) stood there with no
    message. The Run path keeps to the slider's range too: a number outside it runs at the nearest end, and the run's
    status says so in the slider's own words (app.inputs.clamp_notice), with no toast repeating it."""
    said = arena_tab.max_new_tokens_used(3)[1]  # its wording: tests/test_messages.py
    assert arena_tab.max_new_tokens_used(3) == (8, said) and "8" in said
    assert arena_tab.max_new_tokens_used("300") == (256, arena_tab.max_new_tokens_used(10 ** 6)[1])
    assert "256" in arena_tab.max_new_tokens_used("300")[1]
    assert arena_tab.max_new_tokens_used(16) == (16, None)
    with pytest.raises(ValueError, match="Max new tokens per run must be a whole number"):
        arena_tab.max_new_tokens_used(12.5)
    args = GOOD | {"target": str(tiny_model_dir), "drafters": ["ngram"], "ks": ["2"], "max_new_tokens": 3}
    with no_toast():
        out = drain(arena_tab.run(**args))
    assert "Done" in out["arena-status"] and said in out["arena-status"]
    with open(out["arena-json"], encoding="utf-8") as f:
        assert json.load(f)["settings"]["max_new_tokens"] == 8


def test_run_closes_earlier_toasts_and_enter_commits_a_number_box():
    """The Run button closes the toasts on the page before its run is sent (Gradio's own: one left from earlier
    neither stays nor comes back grouped with a later one; the app's sentences go to the status line), and Enter in a number box of the controls commits it as leaving
    it does (a blur event: the clamp and its message at once). Both are client-side; the browser test below
    watches them work."""
    import gradio as gr

    with gr.Blocks() as demo:
        arena_tab.build_tab("embedded")
    js = {fn.api_name: fn.js for fn in demo.fns.values() if fn.js}
    assert js["arena"].startswith(f"async (...args) => {{\n  let out = await ({arena_tab.CLEAR_TOASTS_JS})(...args);")
    assert "toast-close" in arena_tab.CLEAR_TOASTS_JS and "window.svSettling" in js["arena"]  # then a box's check waited
    assert arena_tab.ENTER_COMMITS_JS in js.values() and "#arena-controls" in arena_tab.ENTER_COMMITS_JS


# ------------------------------------------------------------------------------------------------- in a browser

def _toasts(page) -> list[str]:
    return [" ".join(t.inner_text().split()) for t in page.query_selector_all(".toast-body")]


def _settled_toasts(page, expected: list[str], timeout_ms: int = 5_000) -> list[str]:
    """The toasts once they equal ``expected`` (a closed toast fades out for a moment first), or as they are after
    ``timeout_ms``."""
    for _ in range(timeout_ms // 250):
        if _toasts(page) == expected:
            break
        page.wait_for_timeout(250)
    return _toasts(page)


def _status(page) -> str:
    return " ".join(page.locator("#arena-status").inner_text().split())


@requires_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_in_a_browser_the_clamp_and_refused_runs_are_said_in_the_status_and_no_toast(app_url, browser, width):
    """Seen in the browser: after Enter the box kept 3 unannounced, and a second refused Run showed "Warning (2)" with
    the first attempt's message again, beside the status line that said the same sentence. Now each refused Run is
    said in the status line alone, the latest in place of the earlier, and no toast shows (none that could outlive
    its cause); the clamp's short toast (app.messages.CLAMP_TOAST_S) is closed by Run. Neither needs a model run:
    both refusals happen before the device."""
    page = open_page(browser, {"width": width, "height": 900})
    try:
        page.goto(app_url, wait_until="load")
        page.locator("#tab-arena-button").click()
        box = page.locator("#arena-max-new-tokens input[type=number]")
        box.wait_for()
        box.fill("3")
        box.press("Enter")
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('at least 8')",
                               timeout=20_000)
        assert box.input_value() == "8" and box.evaluate("(el) => el === document.activeElement")
        assert arena_tab.max_new_tokens_used(3)[1] in _status(page)
        assert arena_tab.max_new_tokens_used(3)[1] in " ".join(_toasts(page))  # the slider's clamp: a short toast
        for label in ("N-gram prompt lookup", "Self-speculation"):  # untick both default drafters
            page.locator("#arena-drafters label", has_text=label).first.click()
        page.locator("#arena-run").click()
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('at least one drafter')",
                               timeout=20_000)
        assert "Pick at least one drafter." in _status(page)
        assert _settled_toasts(page, []) == []  # the clamp's toast closed by Run, and none for the refusal
        page.locator("#arena-drafters label", has_text="N-gram prompt lookup").first.click()
        for k in ("4",):  # untick the default k
            page.locator("#arena-ks label", has_text=k).first.click()
        page.locator("#arena-run").click()
        page.wait_for_function("document.querySelector('#arena-status').innerText.includes('draft length k')",
                               timeout=20_000)
        said = _status(page)
        assert "Pick at least one draft length k." in said and "at least one drafter" not in said  # replaced
        page.wait_for_timeout(1_000)
        assert _toasts(page) == []  # neither refusal as a toast
        page.screenshot(path=f"/tmp/arena-no-toasts-{width}.png", full_page=False)
    finally:
        page.context.close()


def test_the_pooled_rows_fit_a_desktop_page_as_two_tables():
    """A new-user check measured the one 19-column summary table at about 1,671 px, a sideways scroll on a 1400 px
    desktop: the pooled rows are two tables now, what each method did (speedups, acceptance, the check) and the
    rates, predictions and timings behind them; every column is in one of them, each once but Category and Method,
    and the per-prompt table keeps them all but the category, which its prompt's id names."""
    summary = [c[0] for c in arena_tab.SUMMARY_COLUMNS]
    timings = [c[0] for c in arena_tab.TIMING_COLUMNS]
    assert summary[:2] == timings[:2] == ["Category", "Method"] and summary[-1] == "Same ids"
    assert len(summary) <= 10 and len(timings) <= 11
    assert set(summary[2:]).isdisjoint(timings[2:])
    # the per-prompt table names the prompt once: its id names its category ("code-edit-3"; a trial's phone card
    # read "code-edit-3" above "code-edit")
    assert {c[0] for c in arena_tab.PROMPT_COLUMNS} == (set(summary) | set(timings) | {"Prompt"}) - {"Prompts",
                                                                                                    "Category"}
    assert [c[0] for c in arena_tab.PROMPT_COLUMNS][:2] == ["Prompt", "Method"]
    assert arena_tab.OUTPUTS[1:3] == ("arena-table", "arena-timings")
    out = arena_tab._outputs(summary="s", timings="t")
    assert out[1:3] == ("s", "t")
    # a prediction's hover says it is a model's figure and where its range comes from
    row = {"predicted_speedup_paper": 1.5, "predicted_speedup_paper_low": 1.4, "predicted_speedup_paper_high": 1.61}
    assert arena_tab._prediction_word(row, "predicted_speedup_paper") == (
        "(a model of the measured α; 1.40–1.61 from α's 95% interval and the spread of T_step, T_verify, T_draft)")
    assert "one sample" in arena_tab._prediction_word({"predicted_speedup_paper": 1.5}, "predicted_speedup_paper")


def test_the_downloads_carry_every_verdict_and_note_the_page_shows(tmp_path):
    """Seen on a busy machine: the CSV had no noisy column, the JSON's notes were empty and its wall_s (32.6 s, the
    races alone) disagreed with the status's 50 s. The files now carry each row's noise verdict as the page marks it,
    the notes under the status, the status in words, and the status's own seconds."""
    from app import render
    from specviz.analysis.arena_rows import ArenaResult

    base = {"level": "prompt", "category": "qa", "prompt_id": "qa-1", "drafter": "none", "k": "", "variant": "standard",
            "ids_identical": True}
    rows = [base,
            dict(base, drafter="ngram", k=4, variant="ngram k=4", baseline_drift=0.31, decode_speedup=1.2,
                 tokens_per_pass=1.5),
            dict(base, drafter="suffix", k=4, variant="suffix k=4", baseline_drift=0.02, decode_speedup=3.0,
                 tokens_per_pass=1.5),
            dict(base, drafter="oracle", k=4, variant="oracle k=4", baseline_drift=0.02, decode_speedup=1.1,
                 tokens_per_pass=4.0)]
    result = ArenaResult(rows=rows, summary=[], wall_s=32.64, notes=["Drafts were re-tokenized."])
    note = "Every run (baseline, target and draft alike) uses: repetition penalty 1.2."
    status = render.status_html("Done: 1 prompt × 3 methods and standard decoding in 50 s · 2 of 3 methods noisy",
                                "done", notes=[note, "Drafts were re-tokenized."])
    csv_path, json_path = arena_tab.write_files(result, str(tmp_path), wall_s=50.3, notes=[note], status=status)
    with open(csv_path, encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert [(line["drafter"], line["noisy"]) for line in lines] == [("none", ""), ("ngram", "true"),
                                                                    ("suffix", "true"), ("oracle", "false")]
    # no spread to read here: the drifted baselines are the reason, said as such (not "too noisy to tell")
    from app.arena.verdicts import noise_text  # its wording: tests/test_messages.py

    assert [line["noise"] for line in lines] == [noise_text(row) for row in rows] and lines[3]["noise"] == ""
    assert "drifted 31%" in lines[1]["noise"] and "too noisy" not in lines[1]["noise"]
    assert "its 1.5 tokens per pass" in lines[2]["noise"]
    with open(json_path, encoding="utf-8") as f:
        data = json.load(f)
    assert data["wall_s"] == 50.3 and data["race_wall_s"] == 32.6
    assert data["notes"] == [note, "Drafts were re-tokenized."]
    assert data["status"] == ("✓ Done: 1 prompt × 3 methods and standard decoding in 50 s · 2 of 3 methods noisy · "
                              f"ℹ {note} · ℹ Drafts were re-tokenized.")
    assert [r["noisy"] for r in data["rows"]] == [None, True, True, False]
    assert {"wall_s", "race_wall_s", "noisy", "noise", "status"} <= set(data["definitions"])


def test_the_json_gives_the_wall_time_the_status_gave(tiny_model_dir):
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "drafters": ["ngram"], "ks": ["2"],
                                         "max_new_tokens": 8})))
    seconds = int(re.search(r" in (\d+) s", out["arena-status"]).group(1))
    with open(out["arena-json"], encoding="utf-8") as f:
        data = json.load(f)
    assert round(data["wall_s"]) == seconds and data["race_wall_s"] <= data["wall_s"]
    assert data["status"].startswith("✓ Done: 1 prompt × 1 method and standard decoding in") or \
        data["status"].startswith("ℹ Done")
    with open(out["arena-csv"], encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert {line["noisy"] for line in lines if line["drafter"] == "ngram"} <= {"true", "false"}
    assert all(line["noisy"] == "" for line in lines if line["drafter"] == "none")


def test_arena_pace_says_where_the_run_is_and_the_time_left_from_the_first_prompt():
    """The status's "prompt i of N, method j of M" and the time left, from a fake clock (no timing)."""
    from app.arena.progress import ArenaPace

    now = [100.0]
    pace = ArenaPace(["a-1", "b-2", "c-3"], 2, clock=lambda: now[0])  # 5 timed runs per prompt
    assert not pace.started(0.0, "Warming up (one short run of each method)…") and pace.position() == ""
    assert pace.started(0.0, "a-1 (code): standard decoding")
    assert pace.position() == "prompt 1 of 3, standard decoding before method 1 of 2"
    assert "follows once the first prompt is measured" in pace.timing()
    pace.started(3 / 15, "a-1 (code): n-gram k=4")
    assert pace.position() == "prompt 1 of 3, method 2 of 2"
    pace.started(4 / 15, "a-1 (code): standard decoding")
    assert pace.position() == "prompt 1 of 3, standard decoding after method 2 of 2"
    now[0] = 160.0  # the first prompt took 60 s
    pace.prompts_done(1)
    pace.started(6 / 15, "b-2 (qa): n-gram k=4")
    assert pace.position() == "prompt 2 of 3, method 1 of 2"
    assert pace.seconds_per_prompt() == 60.0
    now[0] = 170.0
    assert pace.timing() == "about 110 s left of about 3 min 0 s (the pace of the first prompt)"


def test_the_one_prompt_box_starts_with_an_example_so_run_works_at_once():
    """A new user's trial: picking "one prompt" showed an empty box, and Run answered that the prompt is empty. The
    box starts with the app's first example (the Live tab's too); its placeholder still asks for one when cleared."""
    import gradio as gr

    from app.arena.layout import build_tab
    from app.arena.settings import DEFAULT_PROMPT, choose_prompts
    from specviz.analysis.prompts import EXAMPLE_PROMPTS, FIRST_EXAMPLE, load_prompts

    example = next(p.prompt for p in load_prompts(EXAMPLE_PROMPTS) if p.id == FIRST_EXAMPLE)
    assert DEFAULT_PROMPT == example and example.startswith("Use only the context to answer the question.")
    with gr.Blocks() as demo:
        build_tab()
    box = next(c for c in demo.config["components"] if c.get("props", {}).get("elem_id") == "arena-prompt")
    assert box["props"]["value"] == example and box["props"]["placeholder"] == "Type a prompt…"
    assert choose_prompts("prompt", box["props"]["value"], "") == [
        {"id": "your-prompt", "category": "your prompt", "prompt": example.strip()}]


def test_a_stop_after_the_first_prompt_keeps_its_rows_and_says_so(tiny_model_dir, monkeypatch):
    """A new user's trial: Stop 9 s into a race said "Stopped before the first prompt finished: nothing to show".
    A prompt's rows, once all its runs finished, stay through a Stop: the table, the downloads and the status.
    The worker pauses after each prompt (0.5 s), so that a loaded machine cannot let it finish all six before the
    handler has shown the first one and flagged the Stop (a fresh-clone run failed so)."""
    import time

    from app.arena import handlers
    from drain_support import settled

    real = handlers.iter_arena

    def paced(*args, **kwargs):
        for result in real(*args, **kwargs):
            yield result
            time.sleep(0.5)

    monkeypatch.setattr(handlers, "iter_arena", paced)

    def stop_once_a_prompt_shows(gen):
        for out in gen:
            rows = settled(out, arena_tab.OUTPUTS).get("arena-prompts")
            if isinstance(rows, dict) and rows.get("data"):
                arena_tab.stop()  # no request: flags every running arena
            yield out

    args = GOOD | {"target": str(tiny_model_dir), "source": "category", "category": "math", "drafters": ["ngram"],
                   "ks": ["2"], "max_new_tokens": 8}
    out = drain(stop_once_a_prompt_shows(arena_tab.run(**args)))
    shown = int(re.search(r"Stopped after (\d) prompts? in \d+ s; the downloads hold those", out["arena-status"])[1])
    assert 1 <= shown < 6  # the worker may finish the prompt under way before it sees the flag
    assert len(out["arena-prompts"]["data"]) == 2 * shown  # each prompt: standard decoding and ngram k=2
    with open(out["arena-csv"], encoding="utf-8") as f:
        ids = [line["prompt_id"] for line in csv.DictReader(f) if line["level"] == "prompt"]
    assert ids == [f"math-{i}" for i in range(1, shown + 1) for _ in range(2)]


def test_a_stop_inside_the_first_prompt_says_what_was_running(tiny_model_dir, monkeypatch):
    """Stopped during the first prompt's method run: nothing finished, and the status says which prompt and run."""
    from specviz.analysis import arena

    real = arena.measure_run

    def stop_in_the_first_timed_method_run(target, drafter, ids, config, stop):
        if drafter is not None and config.max_new_tokens == 16:  # not a warm-up (8 tokens) nor a prefill
            arena_tab.stop()
        return real(target, drafter, ids, config, stop)

    monkeypatch.setattr(arena, "measure_run", stop_in_the_first_timed_method_run)
    out = drain(arena_tab.run(**(GOOD | {"target": str(tiny_model_dir), "source": "category", "category": "math",
                                         "drafters": ["ngram"], "ks": ["2"]})))
    status = html.unescape(out["arena-status"])
    assert ("Stopped while prompt 1 of 6 was running (1 of its 3 runs done, ngram k=2 under way): nothing "
            "finished to show; a prompt's rows appear once all 3 of its runs finish") in status
    assert "arena-csv" not in out


def test_the_stop_message_names_the_run_under_way():
    from app.arena.progress import ArenaPace

    pace = ArenaPace(["a-1", "b-2"], 2)
    assert pace.stopped_text().startswith("Stopped while loading or warming up")
    pace.started(2 / 10, "a-1 (code): early-exit k=auto")
    assert pace.stopped_text().startswith("Stopped while prompt 1 of 2 was running (2 of its 5 runs done, "
                                          "early-exit k=auto under way): nothing finished to show")


def test_a_stop_while_the_arena_waits_in_the_queue_keeps_it_from_running(tiny_model_dir):
    """Gradio runs at most 4 Arena runs and measurements at once; a Stop pressed while the page's run still waited
    in that queue found nothing to flag, so it ran later anyway. Run arena now marks the page (with its toast
    closing, app.stop_marks) and Stop carries the mark: the run starts flagged, runs nothing and says so; a run
    refused for its input spends the mark; the next one runs."""
    import gradio as gr

    from app.arena import handlers
    from app.stop_marks import stop_sent_js

    with gr.Blocks() as demo:
        arena_tab.build_tab("embedded")
    deps = demo.get_config_file()["dependencies"]
    stop_dep = next(d for d in deps if d.get("api_name") == "arena_stop")
    assert stop_dep["js"] == stop_sent_js("svArenaRunning", 2) and stop_dep["inputs"][0] == stop_dep["inputs"][1]
    assert "window.svArenaRunning = true; " in arena_tab.CLEAR_TOASTS_JS
    assert sum("window.svArenaRunning = false" in (d.get("js") or "") for d in deps) == 1

    me = type("R", (), {"session_hash": "arena-queued"})()
    good = GOOD | {"target": str(tiny_model_dir)}
    said = html.unescape(handlers.stop("<p>earlier</p>", me, sent=True))
    assert "your run was still waiting for its turn in the server's queue, so it will not run." in said
    out = list(arena_tab.run(**good, request=me))
    assert len(out) == 1 and "so it did not run" in html.unescape(out[0][0])
    assert "Nothing is running." in handlers.stop("<p>earlier</p>", me, sent=False)  # no mark left behind
    handlers.stop(None, me, sent=True)
    refused = list(arena_tab.run(**(good | {"drafters": []}), request=me))  # refused before it starts
    assert "status-error" in refused[-1][0]
    assert "Done" in drain(arena_tab.run(**good, request=me))["arena-status"]  # the refused one spent the mark
