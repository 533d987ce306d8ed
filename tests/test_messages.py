"""The wording of each user-facing message, checked once, where it is built, from its inputs.

Every other test asserts on behaviour and values (the value used, the status line's kind, that the sentence is
shown) and compares with the builder's own output (``clamp_notice(...)[1] in status``), so a rewording changes this
file only. Builders covered: the input notices of :mod:`app.input_fields` (a slider's clamp, a number box's refusal,
an emptied box, the early-exit layer), the Arena's max-new-tokens notice, and :func:`app.messages.message_for`.
"""

from __future__ import annotations

from app import inputs, messages, render
from app.batching.check_job import N_FIELD
from app.messages import message_for


def test_a_number_typed_outside_a_sliders_range_is_said_in_one_sentence():
    assert inputs.clamp_notice(5000, "Max new tokens", 1, 1024, "the server's limit") == (
        1024, "Max new tokens is at most 1024 here (the server's limit); using 1024.")
    assert inputs.clamp_notice(99, "Draft length k", 1, 16) == (16, "Draft length k is at most 16 here; using 16.")
    assert inputs.clamp_notice(0, "Draft length k", 1, 16) == (1, "Draft length k is at least 1 here; using 1.")
    assert inputs.clamp_notice(0, "Max new tokens per row", 4, 128) == (4, "Max new tokens per row is at least 4 here; "
                                                                          "using 4.")
    assert inputs.clamp_notice(-1, "Temperature", 0, 2) == (0, "Temperature is at least 0 here; using 0.")
    in_range_or_no_number = (1, 64, 12.5, None, "", "abc", float("nan"), True)
    assert [inputs.clamp_notice(v, "x", 1, 64) for v in in_range_or_no_number] == [None] * 8


def test_a_sliders_box_left_empty_or_not_a_number_says_the_earlier_value_it_kept():
    assert inputs.kept_notice(4, "Draft length k", 1, 16) == (4, "Draft length k was empty; kept 4.")
    assert inputs.kept_notice("0.7", "Temperature", 0, 2, bad=True) == (0.7, "Temperature was not a number; kept 0.7.")
    assert inputs.kept_notice(99, "Draft length k", 1, 16) == (16, "Draft length k was empty; kept 16.")  # in range
    assert [inputs.kept_notice(v, "x", 1, 64) for v in (None, "", "abc", float("nan"))] == [None] * 4


def test_the_arenas_max_new_tokens_notice_names_the_end_a_run_uses():
    from app import arena as arena_tab

    assert arena_tab.max_new_tokens_used(3) == (8, "Max new tokens per run is at least 8 here; using 8.")
    assert arena_tab.max_new_tokens_used("300") == (256, "Max new tokens per run is at most 256 here; using 256.")


def test_a_number_box_a_run_refuses_says_the_runs_own_message_and_the_value_used():
    assert inputs.number_notice(-3, inputs.TOP_K) == (0, "Top-k must be between 0 and 1,000,000 (got -3). Using 0.")
    assert inputs.number_notice(1.5, inputs.MIN_P) == (0.99, "Min-p must be between 0 and 0.99 (got 1.5). Using 0.99.")
    assert inputs.number_notice(5, inputs.MIN_P) == (0.99, "Min-p must be between 0 and 0.99 (got 5). Using 0.99.")
    assert inputs.number_notice(2.5, inputs.SEED) == (3, "Seed must be a whole number (got 2.5). Using 3.")
    assert inputs.number_notice(10 ** 9, N_FIELD) == (
        1000, "N runs per side must be between 20 and 1000 (got 1000000000). Using 1000.")
    assert inputs.number_notice(-2, inputs.EXIT_LAYER, inputs.parse_exit_layer) == (
        0, "The early-exit layer must be 0 (half the target's layers) or a layer from 1 to the target's layers − 1 "
           "(got -2). Using 0 (half the target's layers).")
    assert inputs.number_notice([1], inputs.REPETITION_PENALTY) == (1.0, "Repetition penalty must be a number. "
                                                                          "Using 1 (off).")


def test_a_repetition_penalty_of_0_is_refused_with_the_value_that_is_off():
    try:
        inputs.REPETITION_PENALTY.parse(0)
    except inputs.InputError as error:
        assert str(error) == "Repetition penalty must be between 0.01 and 10 (got 0; 1 is off)."
    else:
        raise AssertionError("a repetition penalty of 0 was accepted")


def test_an_emptied_box_says_it_is_set_back_to_its_default():
    assert inputs.empty_notice(inputs.SEED) == (0, "Seed: the box was left empty, so it is set back to its default, 0.")
    assert inputs.empty_notice(N_FIELD) == (
        200, "N runs per side: the box was left empty, so it is set back to its default, 200.")
    assert inputs.empty_notice(inputs.EXIT_LAYER) == (
        0, "The early-exit layer: the box was left empty, so it is set back to its default, 0 (half the target's "
           "layers).")


def test_an_early_exit_layer_the_target_lacks_names_the_targets_own_bound():
    bound = ("The early-exit layer must be 0 (half the target's layers) or a layer from 1 to 29 for "
             "SmolLM2-135M-Instruct, which has 30 layers")
    assert inputs.fit_exit_layer(100, 30, "SmolLM2-135M-Instruct") == (29, f"{bound} (got 100). Using 29.")
    assert inputs.fit_exit_layer(-2, 30, "SmolLM2-135M-Instruct") == (
        None, f"{bound} (got -2). Using 0 (half the target's layers).")
    assert inputs.fit_exit_layer(2.5, 30, "SmolLM2-135M-Instruct") == (
        3, "The early-exit layer must be a whole number (got 2.5). Using 3.")
    assert inputs.fit_exit_layer(10 ** 5) == (
        None, "The early-exit layer must be 0 (half the target's layers) or a layer from 1 to the target's layers − 1 "
              "(got 100000). Using 0 (half the target's layers).")


def test_any_error_becomes_one_sentence_for_the_visitor():
    assert message_for(ValueError("Draft length k must be between 1 and 16 (got 99).")) == (
        "Draft length k must be between 1 and 16 (got 99).")
    assert message_for(ValueError()) == "Invalid input."
    assert message_for(NotImplementedError("trees with sampling")) == "Not supported yet: trees with sampling"
    assert message_for(RuntimeError("CUDA error: out of memory\nmore lines")) == (
        "Something went wrong (RuntimeError: CUDA error: out of memory). The details are in the server log.")


def _arena_row(drift: float | None, speedup: float, low: float | None, high: float | None) -> dict:
    """A method's pooled Arena row at 1.5 tokens per pass (30 tokens in 20 passes after the prefill), its decoding
    speedup spanning [low, high]."""
    return {"variant": "ngram k=4", "drafter": "ngram", "baseline_drift": drift, "tokens_per_pass": 1.5,
            "emitted_after_prefill": 30, "passes": 20,
            "decode_speedup": speedup, "decode_speedup_low": low, "decode_speedup_high": high}


def test_an_arena_speedup_cell_and_its_noise_words_read_the_one_rule():
    from app.arena import verdicts
    from app.arena.tables import speedup_cell

    noisy = _arena_row(0.36, 1.07, 0.92, 1.25)
    assert speedup_cell(noisy, "decode_speedup") == (
        "too noisy to tell: 1.07× measured (0.92–1.25×), baselines drifted 36% apart")
    assert verdicts.noise_text(noisy) == "too noisy to tell: its ratios on both sides of 1; baselines drifted 36% apart"
    assert verdicts._noise_word(noisy) == (
        "(too noisy to tell: its ratios on both sides of 1; baselines drifted 36% apart)")
    # one side of 1 beside baselines 36% apart: faster than both the fast and the slow baseline, so faster
    assert speedup_cell(_arena_row(0.36, 1.45, 1.24, 1.69), "decode_speedup") == "1.45× faster (1.24–1.69×)"
    assert speedup_cell(_arena_row(0.12, 1.45, 1.35, 1.51), "decode_speedup") == "1.45× faster (1.35–1.51×)"
    impossible = _arena_row(0.09, 3.56, 3.40, 3.71)
    # timings its tokens per pass cannot give: said calmly, what happened and what to do, the ratio kept as detail;
    # beside baselines 9% apart the machine held steady, so the cause named is the short run's coarse timing
    assert speedup_cell(impossible, "decode_speedup") == (
        "no reading: a run too short to time (3.56× measured, 3.40–3.71×; faster than its 1.5 tokens per pass allow; "
        "30 tokens in 20 passes timed, baselines 9% apart); a longer run or more prompts would read it")
    assert verdicts.noise_text(impossible) == (
        "no reading: a run too short to time (faster than its 1.5 tokens per pass allow; 30 tokens in 20 passes "
        "timed, baselines 9% apart); a longer run or more prompts would read it")
    # baselines 16% apart: the machine's speed did change, and that is the cause named
    assert speedup_cell(impossible | {"baseline_drift": 0.16}, "decode_speedup") == (
        "no reading: the machine's speed changed during the run (3.56× measured, 3.40–3.71×; faster than its 1.5 "
        "tokens per pass allow; baselines drifted 16% apart); run again")
    assert verdicts.noise_text(_arena_row(0.31, 1.2, None, None)) == (
        "no reading: the machine's speed changed during the run (baselines drifted 31% apart); run again")
    # no two baselines to tell which: both causes named, and what reads either
    assert speedup_cell(_arena_row(None, 3.56, None, None), "decode_speedup") == (
        "3.56 (one run: no spread), no reading: a run too short to time, or the machine's speed changed during the "
        "run (faster than its 1.5 tokens per pass allow; 30 tokens in 20 passes timed); run again, longer or on more "
        "prompts")
    assert "not a finding" not in speedup_cell(impossible, "decode_speedup") + verdicts.noise_text(impossible)
    assert speedup_cell(_arena_row(None, 1.5, None, None), "decode_speedup") == "1.50 (one run: no spread)"
    assert speedup_cell(_arena_row(0.31, 1.2, None, None), "decode_speedup") == (  # the cell says what noise_text says
        "1.20 (one run: no spread), no reading: the machine's speed changed during the run (baselines drifted 31% "
        "apart); run again")


def test_a_speedup_cell_says_its_word_its_median_and_its_range():
    """:meth:`specviz.core.verdict.Verdict.cell`, the table cell the Batching and Arena tabs show (more of its wording:
    tests/test_verdict.py)."""
    from specviz.core.verdict import read_speedup

    assert read_speedup(2.15, 1.84, 2.44).cell() == "2.15× faster (1.84–2.44×)"
    assert read_speedup(0.62, 0.55, 0.75).cell() == "0.62× the speed, slower (0.55–0.75×)"
    assert read_speedup(1.05, 0.85, 1.20).cell() == "too noisy to tell: 1.05× measured (0.85–1.20×)"
    assert read_speedup(1.00, 0.95, 1.05).cell() == "1.00× about the same (0.95–1.05×)"
    assert read_speedup(1.00, 0.95, 1.05, busy="other programs busy").cell() == (
        "too noisy to tell: 1.00× measured (0.95–1.05×)")
    assert read_speedup(2.70, 2.60, 2.80, impossible="faster than its 2.0 tokens per pass allow").cell() == (
        "2.70× (2.60–2.80×), not a finding: faster than its 2.0 tokens per pass allow")


def test_a_sampling_run_asked_for_a_tree_is_told_it_drafts_a_chain():
    assert inputs.TREE_SAMPLING_NOTE == "Trees are greedy-only: this sampling run (temperature > 0) drafts a chain."


def test_a_cleaned_prompt_says_what_was_removed_and_replaced():
    from specviz.runtime.models.prompts import sanitize_prompt

    assert sanitize_prompt("a\x00b\x1bc \ud800d \udcff").note == (
        "The prompt was cleaned: removed 2 control characters and replaced 2 invalid characters (unpaired surrogates) "
        "with \ufffd.")
    assert sanitize_prompt("a\x00b \ud800").note == (
        "The prompt was cleaned: removed 1 control character and replaced 1 invalid character (unpaired surrogates) "
        "with \ufffd.")
    assert sanitize_prompt("a\x00b").note == "The prompt was cleaned: removed 1 control character."
    assert sanitize_prompt("plain text").note == ""


def test_a_draft_models_window_shorter_than_the_run_is_said():
    from types import SimpleNamespace

    from specviz.drafters.model import window_note

    short = SimpleNamespace(draft_window=128)
    assert window_note(short, 499, 8) == ("The draft model's window is 128 tokens, no longer than the 499-token "
                                          "prompt: it cannot draft, so the target decodes alone (same output, no "
                                          "speed-up).")
    assert window_note(short, 100, 60) == ("The draft model's window is 128 tokens: it drafts for the first 28 new "
                                           "tokens, then the target decodes alone (same output).")
    assert window_note(short, 100, 29) == ""


def test_a_tuning_choice_is_summed_up_in_one_line():
    from specviz.measure import tuning

    assert tuning.Tuning(2, 2, True, pad_rows={1: 2}, busy=True).summary() == (
        "fast path, 2 threads, rows padded 1->2 (measured; the machine was busy)")


def test_a_finished_runs_panel_names_the_pass_it_opens_and_lists_the_others():
    from types import SimpleNamespace

    from app.tree_view import best_pass, earlier_passes_html

    passes = [SimpleNamespace(index=i, counted=c) for i, c in ((4, 1), (5, 3), (6, 2))]
    assert best_pass(passes, 3, lambda p: p.counted, "the longest accepted path", "tree pass")[1] == (
        "pass 5, the longest accepted path of the run's 3 tree passes")
    assert best_pass(passes, 9, lambda p: p.index, "the most accepted tokens", "kept pass")[1] == (
        "pass 6 (the latest), the most accepted tokens of the run's last 3 kept passes")
    assert best_pass(passes[:1], 1, lambda p: p.counted, "the longest accepted path", "tree pass")[1] == (
        "pass 4, the longest accepted path of the run's 1 tree pass")
    assert earlier_passes_html("<x>", 5) == ('<div class="dtree-earlier"><div class="dtree-earlier-title">Other '
                                             'passes, newest first (5 older not kept): click one to open it</div>'
                                             '<x></div>')
    assert earlier_passes_html("", 0).startswith('<div class="dtree-earlier"><div class="dtree-earlier-title">Other '
                                                 'passes, newest first: click one to open it</div>')


def test_a_run_waiting_for_the_device_sees_its_place_in_line():
    from html import escape
    from types import SimpleNamespace

    from app import device, live

    settings = SimpleNamespace(notes=())  # the status reads only the run's notes from its settings
    said = {escape("Waiting for the device… 1 run is ahead of yours (a test holds the device). Runs take turns so that "
                   "each one's timing is undisturbed."): device.waiting_status(1, "a test holds the device"),
            escape("Waiting for the device… 2 runs are ahead of yours. Runs take turns so that each one's timing is "
                   "undisturbed."): device.waiting_status(2, ""),
            escape("Waiting for the device… 1 run is ahead of yours (running a). Yours takes about 6 s once it starts. "
                   "Runs take turns so that each one's timing is undisturbed."): live.planned_status(
                settings, "about 6 s", 1, "running a"),
            escape("Starting: no run ahead of yours; yours takes about 6 s."): live.planned_status(
                settings, "about 6 s", 0)}
    for sentence, status in said.items():
        assert sentence in status, status


def test_a_long_prompts_estimate_becomes_the_time_its_prefill_took():
    from types import SimpleNamespace

    from app import live
    from specviz.measure.run_stats import RunStats

    def settled(spec, base_ms: float, spec_ms: float) -> list[str]:
        base, spec_stats = RunStats(), RunStats()
        base.prefill_ms, spec_stats.prefill_ms = base_ms, spec_ms
        view = SimpleNamespace(base_stats=base, spec_stats=spec_stats, spec=spec, prompt_tokens=2185, notes=["x"])
        live.settle_prefill_note(view, "x")
        return view.notes

    assert settled(object(), 4_100.0, 4_200.0) == ["The 2,185-token prompt was read in 8.3 s (both runs; the prefill)."]
    assert settled(None, 4_100.0, 0.0) == ["The 2,185-token prompt was read in 4.1 s (the target; the prefill)."]


def test_a_sweeps_lesson_says_what_the_pass_cost_and_the_repeats_show():
    """:func:`app.batching.sweep_lesson` on a busy machine, a pass near 1 and a pass cost straddling the line (the
    rows: tests/test_batching.py)."""
    from app import batching
    from test_batching import _paying_rows, _spread_row

    busy = {"k": 4, "device": "cpu", "rows": _paying_rows(), "cpu_others": 0.45}
    assert batching.sweep_lesson(busy) == (
        "Other programs were busy: other programs used 45% of this machine's CPU time while it was measured, which "
        "slows one-token steps more than wide passes, so the pass costs cannot be read, and each speedup is read off "
        "its own repeats (a gain may be smaller on a quiet machine): B = 1: 1.60× faster (1.60–1.60×); B = 2: 1.60× "
        "faster (1.60–1.60×).")
    near = _spread_row(1, [(80.0, 88.0), (80.0, 96.0), (80.0, 100.0)])
    assert batching.sweep_lesson({"k": 4, "device": "CPU", "rows": [near], "cpu_others": 0.0}) == (
        "On this CPU the pass cost T(B, 5) / T(B, 1) stays near 1 (every repeat at most 1.25) up to B = 1, so "
        "speculation pays at B = 1 (1.60×, every repeat faster: 1.50–1.70×).")
    straddling = _spread_row(1, [(80.0, 88.0), (80.0, 96.0), (80.0, 120.0)])
    assert batching.sweep_lesson({"k": 4, "device": "CPU", "rows": [straddling], "cpu_others": 0.0}) == (
        "On this CPU a pass over 1 × 5 tokens costs 1.2 steps (1.1–1.5) at B = 1, and speculation pays at B = 1 "
        "(1.60×, every repeat faster: 1.50–1.70×).")


def test_a_sampling_check_with_too_few_runs_says_how_many_it_needs():
    """:func:`app.batching.check_lesson` (the hand-made check: tests/test_batching.py)."""
    from app import batching
    from test_batching import NAN, _check_result

    result = _check_result({(2, 3): 4, (4, 5): 2, (6, 7): 3, (10, 11): 5}, {(2, 3): 7, (4, 5): 4, (8, 9): 3},
                           ((NAN, NAN, 0), (NAN, NAN, 0)), (0.6, 0.44, 1))
    assert batching.check_lesson(result) == (
        "Too few to test, so no p-value: 14 standard and 14 speculative runs of 20 were counted; the chi-square test "
        "needs two pairs expected at least 5 times, and the second most likely, “ sky is” (p = 0.220), gets there at "
        "23 counted runs: about N = 33 runs per side. Raise N to 33 or more.")


def test_a_link_to_an_unknown_walkthrough_names_it_and_the_known_ones():
    from app.classroom.walkthroughs import unknown_preset_message

    assert unknown_preset_message("nope", [{"id": "chat-ngram"}, {"id": "poor-drafter"}]) == (
        "The link asks for the walkthrough “nope”, which this app does not have. Known walkthroughs: chat-ngram, "
        "poor-drafter. The settings below are the link's other values over the defaults: pick a walkthrough, or press "
        "Record run to record them.")
    assert "Known walkthroughs: none." in unknown_preset_message("nope", [])


def test_the_two_outputs_compared_say_whether_they_match_and_where_they_differ():
    """:func:`app.render.compare_outputs`' sentence (its token-by-token verdicts: tests/test_live.py)."""
    from app import render

    class Tokens:
        all_special_ids = [0]

        def decode(self, ids, **kwargs):
            return "".join(f"<{i}>" for i in ids)

    def said(spec: list[int], base: list[int], greedy: bool) -> str:
        return render.compare_outputs(spec, base, [1.0] * len(base), Tokens(), greedy=greedy, finished=True).message

    assert said([1], [1], True) == "Identical token ids: the one token matches the baseline."
    assert said([1, 2], [1, 2], True) == "Identical token ids: all 2 tokens match the baseline."
    assert said([1, 2, 3], [1, 2, 4], False) == (
        "Sampling: the two outputs differ from token 3 on (the runs draw their random numbers in a different order); "
        "the speculative output still follows the target's distribution exactly.")


def test_a_length_of_time_reads_in_whole_seconds_then_minutes():
    from app.render import seconds_text

    assert [seconds_text(s) for s in (0.2, 40, 119.4, 125, 3600)] == ["0 s", "40 s", "119 s", "2 min 5 s", "60 min 0 s"]
    assert seconds_text(0.2, at_least=1) == "1 s"  # a plan never reads "0 s"


# A new-user trial: the Check's "N runs per side" box, 50 then "abc" (Chromium empties a number box typed over with
# letters), was set back to its default 200 and the 50 was lost; 99999 gave a warning in other words than the
# sliders'. It now keeps its earlier value and says a number out of range as a slider's box does, as an info.
def test_the_n_box_keeps_its_earlier_value_and_says_its_range_as_a_slider_does():
    import warnings

    from app import messages

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning toast outside a request is a UserWarning: none may come
        box, status = messages.kept_or_refused(None, 50, N_FIELD)
        assert box["value"] == 50 and "N runs per side was empty; kept 50." in status
        box, status = messages.kept_or_refused("", 50, N_FIELD)
        assert box["value"] == 50 and "N runs per side was empty; kept 50." in status
        box, status = messages.kept_or_refused(99999, 50, N_FIELD)
        assert box["value"] == 1000 and "N runs per side is at most 1000 here; using 1000." in status
        box, status = messages.kept_or_refused(5, 50, N_FIELD)
        assert box["value"] == 20 and "N runs per side is at least 20 here; using 20." in status
        assert messages.kept_or_refused(300, 50, N_FIELD) == (messages.gr.skip(), messages.gr.skip())
        # no earlier value known: the default, as before
        box, status = messages.kept_or_refused(None, None, N_FIELD)
        assert box["value"] == 200 and "set back to its default, 200." in status
    # what the box remembers: only a value the run takes
    assert messages.accepted_value(50, N_FIELD) == 50
    for bad in (None, "", 99999, 5):
        assert messages.accepted_value(bad, N_FIELD) == messages.gr.skip()


def test_the_batching_n_box_is_wired_to_keep_its_earlier_value():
    from app import build_demo

    demo = build_demo(max_new_tokens=40)
    names = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    left = [fn for fn in demo.fns.values() for t, event in fn.targets if event == "blur"
            and names[t] == "batching-check-n"]
    assert len(left) == 1 and len(left[0].inputs) == 3  # the box, the value it kept and the status it stands above
    after = [d for d in demo.config["dependencies"] if d.get("trigger_after") == left[0]._id]
    planned = [d for d in after if d["outputs"]]  # besides the browser step that ends the check's in-flight mark
    assert len(planned) == 1 and planned[0]["targets"][0][1] == "then"  # the plan, made again for the settled N
    cleared = [d for d in after if not d["outputs"]]
    assert len(cleared) == 1 and "svSettling" in cleared[0]["js"] and "batching-check-n" in cleared[0]["js"]
    box, status = left[0].fn(None, 77, "<p>the plan</p>")
    assert box["value"] == 77 and "N runs per side was empty; kept 77." in status and status.endswith("<p>the plan</p>")


def test_letters_in_a_box_that_takes_its_default_back_are_said_as_no_number():
    """Chromium empties a number box typed over with letters; the page sends {"letters": true} (a trial read "Seed:
    the box was left empty" after typing "abc")."""
    assert inputs.empty_notice(inputs.SEED, letters=True) == (
        0, "Seed was not a number, so it is set back to its default, 0.")
    update, status = messages.refused({"letters": True}, inputs.SEED)
    assert update["value"] == 0 and "Seed was not a number, so it is set back to its default, 0." in status


def test_a_kept_boxs_sentence_goes_when_the_box_is_left_with_another_value_and_a_new_plan_keeps_it_on_top():
    """The Batching N box (keep): 0 says "using 20" above the plan; the plan, planned again for 20 on the box's
    change, keeps the sentence on top; 100 typed and left takes it away (a trial read "using 20" beside 100)."""
    from app.batching.check_job import N_FIELD as N
    from app.batching.plan import refresh

    plan = render.status_html("Press Check: about 30 s", "info")
    update, status = messages.kept_status(messages.kept_or_refused(0, 200, N), plan, "batching-n", 0)
    assert update["value"] == 20 and "using 20" in status and status.endswith(plan)
    replanned = refresh(status, (), "Press Check", lambda: render.status_html("Press Check: about 9 s", "info"))
    assert messages.leading_notice(replanned) and "using 20" in replanned and replanned.endswith(
        render.status_html("Press Check: about 9 s", "info"))
    after = messages.kept_status(messages.kept_or_refused(100, 20, N), replanned, "batching-n", 100)
    assert after[1] == render.status_html("Press Check: about 9 s", "info")
    assert messages.leading_notice(plan) == ""


def test_a_run_button_sends_the_value_a_box_its_press_left_settled_on():
    """One press of Check after N = 3 typed without Enter sent 3 (refused) while the box's check was on its round trip
    (a trial): the button's browser side now waits for checks in flight and sends the box's settled value, by index
    of the event's inputs; the box's check marks itself in flight (its blur's browser side) and is cleared after."""
    import gradio as gr

    with gr.Blocks():
        a, n = gr.Textbox(elem_id="prompt-x"), gr.Number(50, elem_id="n-x")
        js = messages.settled_inputs_js([a, n], "(...args) => { window.svMark = true; return args; }")
    assert js.startswith("async (...args) =>") and '["prompt-x", "n-x"]' in js
    assert f"limit = {messages.SETTLE_WAIT_MS}" in js and "window.svMark = true" in js
    assert "window.svSettling" in messages.settling_js("n-x") and '"n-x"' in messages.settling_js("n-x")
    assert messages.settling_js("n-x") in messages._keep_blur_js("n-x")
    assert messages.settling_js("draft-length") in messages.kept_js("draft-length")
