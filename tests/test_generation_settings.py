"""The generation settings wired through every surface: the CLI flags (generate --compare, bench, the JSON
outputs), the Live tab's handler and inputs, the Arena, the Classroom's step view (its p and q are the processed
ones) and the parsing helpers of specviz.core.generation_settings. The engine's own exactness per setting is in
tests/test_processors.py."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
import torch

from drain_support import last_output, last_values
from toast_support import no_toast
from specviz.cli import main
from specviz.core import generation_settings as gs
from specviz.core.verify import SamplingConfig, apply_processors, process_logits

PROMPT = "The quick brown fox jumps over the lazy dog while the cat"
REPETITIVE = "Laugh: ha ha ha ha ha ha ha ha"


# ------------------------------------------------------------------------------------------ parsing


def test_parsing_the_text_forms():
    assert gs.parse_logit_bias("13:2.5, 30:-inf\n7:-1") == ((13, 2.5), (30, -math.inf), (7, -1.0))
    assert gs.parse_logit_bias("") == ()
    assert gs.parse_token_ids("2, 7 7\n9") == (2, 7, 9)
    assert gs.with_banned(((13, 2.5), (30, 1.0)), (30, 31)) == ((13, 2.5), (30, -math.inf), (31, -math.inf))
    for bad, words in (("13", "id:bias"), ("13:x", "number or -inf"), ("13:inf", "finite"), ("13:nan", "finite"),
                       ("-1:2", ">= 0"), ("a:2", "not a token id"), ("1:1,1:2", "twice")):
        with pytest.raises(ValueError, match=words):
            gs.parse_logit_bias(bad)
    with pytest.raises(ValueError, match="at most 64"):
        gs.parse_token_ids(",".join(map(str, range(65))))
    sampling = SamplingConfig(top_p=0.9, repetition_penalty=1.3, no_repeat_ngram_size=3,
                              logit_bias=((5, 1.0), (6, -math.inf), (7, -math.inf)))
    assert gs.settings_summary(sampling, (2,)) == ("top-p 0.9 · repetition penalty 1.3 · no-repeat 3-grams · "
                                                   "1 biased id · 2 banned ids · stop ids 2")
    assert gs.settings_summary(SamplingConfig(temperature=0.7, seed=3)) == ""
    record = gs.settings_record(sampling, (2,), ("END",))
    assert json.loads(json.dumps(record, allow_nan=False))["logit_bias"] == {"5": 1.0, "6": "-inf", "7": "-inf"}
    assert record["stop_token_ids"] == [2] and record["repetition_penalty"] == 1.3
    with pytest.raises(ValueError, match="outside the target's vocabulary"):
        gs.check_token_ids(SamplingConfig(), (500,), 100)
    with pytest.raises(ValueError, match="token id 100 is outside"):
        gs.check_token_ids(SamplingConfig(logit_bias=((100, 1.0),)), (), 100)


# ------------------------------------------------------------------------------------------ the CLI


def _generate(capsys, model_dir, *extra: str, prompt: str = PROMPT) -> tuple[int, list[dict], str]:
    code = main(["generate", "--target", str(model_dir), "--prompt", prompt, "--max-new-tokens", "16",
                 "--device", "cpu", "--threads", "1", "--json", *extra])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


@pytest.mark.parametrize("drafter", [["--drafter", "ngram", "--k", "3"], ["--drafter", "bf16", "--k", "4"]])
def test_cli_greedy_compare_stays_identical_with_a_repetition_penalty(capsys, tiny_model_dir, drafter):
    code, [run], err = _generate(capsys, tiny_model_dir, *drafter, "--compare", "--repetition-penalty", "1.3",
                                 "--no-repeat-ngram-size", "3", "--bad-words-ids", "5")
    assert code == 0, err
    assert run["compare"]["ids_identical"] is True and run["compare"]["first_difference"] is None
    assert 5 not in run["token_ids"]
    settings = run["settings"]
    assert settings["repetition_penalty"] == 1.3 and settings["no_repeat_ngram_size"] == 3
    assert settings["logit_bias"] == {"5": "-inf"} and settings["temperature"] == 0.0
    asked = SamplingConfig(repetition_penalty=1.3, no_repeat_ngram_size=3, logit_bias=((5, -math.inf),))
    assert run["settings_changed"] == gs.settings_summary(asked)  # its wording: test_parsing_the_text_forms
    code, [plain], err = _generate(capsys, tiny_model_dir, *drafter)
    assert code == 0 and plain["token_ids"] != run["token_ids"], "the settings changed nothing"


def test_cli_penalty_changes_the_embedded_models_repetitive_text(capsys):
    ids = {}
    for penalty in ("1.0", "1.3"):
        code, [run], err = _generate(capsys, "embedded", "--compare", "--repetition-penalty", penalty,
                                     prompt=REPETITIVE)
        assert code == 0, err
        assert run["compare"]["ids_identical"] is True
        ids[penalty] = run["token_ids"]
    assert ids["1.0"] != ids["1.3"]


@pytest.mark.parametrize("flags, words", [
    (["--logit-bias", "13"], "argument --logit-bias: logit bias: '13' needs the form id:bias"),
    (["--logit-bias", "13:lots"], "must be a number or -inf"),
    (["--logit-bias", "13:inf"], "finite number or -inf"),
    (["--bad-words-ids", "x"], "argument --bad-words-ids"),
    (["--stop-token-ids", "-3"], "argument --stop-token-ids"),
    (["--repetition-penalty", "0"], "repetition-penalty must be in (0, 10]"),
    (["--frequency-penalty", "3"], "frequency-penalty must be in [-2, 2]"),
    (["--presence-penalty", "nan"], "presence-penalty must be in [-2, 2]"),
    (["--min-p", "1"], "min-p must be in [0, 1)"),
    (["--no-repeat-ngram-size", "-1"], "no-repeat-ngram-size must be in 0..64"),
])
def test_cli_bad_generation_settings_give_one_error_line_and_status_2(capsys, flags, words):
    code = main(["generate", "--prompt", "hi", *flags])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1, err


def test_cli_token_ids_outside_the_vocabulary_are_refused_after_loading(capsys, tiny_model_dir):
    for flags, box in ((["--stop-token-ids", "99999"], "stop token ids"), (["--logit-bias", "99999:1"], "logit bias"),
                       (["--bad-words-ids", "99999"], "banned ids (or a logit bias of -inf)")):
        code, lines, err = _generate(capsys, tiny_model_dir, *flags)
        assert code == 2 and lines == [] and f"{box}: token id 99999 is outside the target's vocabulary" in err, err


def test_cli_stop_token_ids_stop_the_run_at_that_token(capsys, tiny_model_dir):
    code, [plain], err = _generate(capsys, tiny_model_dir, "--drafter", "none")
    assert code == 0, err
    ids = plain["token_ids"]
    at = next(i for i in range(2, len(ids)) if ids[i] not in ids[:i])
    for drafter in ("none", "ngram", "bf16"):
        code, [run], err = _generate(capsys, tiny_model_dir, "--drafter", drafter, "--stop-token-ids", str(ids[at]),
                                     "--compare")
        assert code == 0, err
        assert run["token_ids"] == ids[:at + 1] and run["finish_reason"] == "stop"
        assert run["settings"]["stop_token_ids"] == [ids[at]] and run["compare"]["ids_identical"] is True


def test_cli_plain_summary_names_the_settings(capsys, tiny_model_dir):
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "6",
                 "--device", "cpu", "--threads", "1", "--presence-penalty", "0.5", "--min-p", "0.1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "min-p 0.1 · presence penalty 0.5" in out


def test_bench_records_the_settings_and_checks_them_against_transformers(capsys, tiny_model_dir, tmp_path):
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "fox", "category": "story", "prompt": PROMPT}) + "\n")
    code = main(["bench", "--target", str(tiny_model_dir), "--prompts", str(suite), "--quick", "--drafters", "ngram",
                 "--max-new-tokens", "12", "--device", "cpu", "--threads", "1", "--json",
                 "--repetition-penalty", "1.3", "--no-repeat-ngram-size", "3", "--logit-bias", "7:1.5",
                 "--bad-words-ids", "5"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    recorded = result["settings"]["generation_settings"]
    assert recorded["repetition_penalty"] == 1.3 and recorded["logit_bias"] == {"7": 1.5, "5": "-inf"}
    assert result["ids_identical_to_transformers"] is True  # generate() got the same processors
    runs = result["prompts"][0]["results"]
    assert runs["ours/standard"]["token_ids"] == runs["ours/ngram@k4"]["token_ids"]
    assert 5 not in runs["ours/standard"]["token_ids"]
    # frequency and presence penalties have no generate() counterpart: transformers' runs are skipped, said so
    code = main(["bench", "--target", str(tiny_model_dir), "--prompts", str(suite), "--quick", "--drafters", "ngram",
                 "--max-new-tokens", "6", "--device", "cpu", "--threads", "1", "--json", "--presence-penalty", "1"])
    out, err = capsys.readouterr()
    assert code == 0 and "no frequency or presence penalty" in err
    assert "transformers/standard" not in json.loads(out)["prompts"][0]["results"]


# ------------------------------------------------------------------------------------------ the Live tab


def _live_args(**change) -> dict:
    base = dict(prompt=REPETITIVE, target="embedded", drafter="ngram", draft_model="", exit_layer=0, k=4,
                adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=24, stop_strings="",
                chat_template=True, tree_nodes=0)
    return {**base, **change}


def _drain_live(gen) -> dict:
    from app import live

    return last_values(gen, live.OUTPUTS)


def _pane_ids(pane_html: str) -> list[int]:
    return [int(t) for t in re.findall(r'data-id="(\d+)"', pane_html)]


def test_live_handler_with_a_penalty_matches_its_baseline_and_differs_from_no_penalty():
    from app import live

    plain = _drain_live(live.generate(_live_args()))
    out = _drain_live(live.generate(_live_args(repetition_penalty=1.3, presence_penalty="", min_p=None)))
    assert "Done in" in out["status"], out["status"]
    row = out["history-state"][0]
    assert row.identical is True and row.settings == "repetition penalty 1.3"
    assert plain["history-state"][0].identical is True and plain["history-state"][0].settings == ""
    assert _pane_ids(out["baseline-output"]) != _pane_ids(plain["baseline-output"])
    assert "repetition penalty 1.3" in out["stats"] and "repetition penalty 1.3" in out["history"]
    assert "Generation settings" not in plain["stats"]


@pytest.mark.parametrize("change, words", [
    ({"repetition_penalty": 0}, "Repetition penalty must be between 0.01 and 10"),
    ({"min_p": 1.5}, "Min-p must be between 0 and 0.99"),
    ({"frequency_penalty": "a lot"}, "Frequency penalty must be a number"),
    ({"no_repeat_ngram_size": 2.5}, "No-repeat n-gram size must be a whole number"),
    ({"logit_bias": "13=2"}, "The logit bias: &#x27;13=2&#x27; needs the form id:bias"),
    ({"banned_ids": "ten"}, "The banned token ids"),
    ({"stop_token_ids": "99999"}, "token id 99999 is outside the target&#x27;s vocabulary"),
])
def test_live_bad_generation_settings_give_one_sentence(tiny_model_dir, change, words):
    from app import live

    with no_toast():
        out = _drain_live(live.generate(_live_args(target=str(tiny_model_dir), max_new_tokens=4, **change)))
    assert words in out["status"] and "status-error" in out["status"] and "Traceback" not in out["status"]


def test_live_settings_reach_the_engine_config():
    from app.inputs import parse_settings

    s = parse_settings(dict(prompt="hi", target="embedded", drafter="ngram", draft_model="", exit_layer=0, k=4,
                            adaptive_k="fixed", temperature=0.7, top_p=1.0, top_k=0, seed=1, max_new_tokens=20,
                            stop_strings="", chat_template=True, min_p=0.05, repetition_penalty=1.2,
                            frequency_penalty=0.5, presence_penalty=-0.5, no_repeat_ngram_size=4, logit_bias="3:1",
                            banned_ids="4", stop_token_ids="2, 9"))
    config = s.config()
    assert config.sampling == SamplingConfig(temperature=0.7, seed=1, min_p=0.05, repetition_penalty=1.2,
                                             frequency_penalty=0.5, presence_penalty=-0.5, no_repeat_ngram_size=4,
                                             logit_bias=((3, 1.0), (4, -math.inf)))
    assert config.stop_token_ids == (2, 9)


def test_live_tab_has_the_fields_under_sampling_and_stopping():
    from app import build_demo

    demo = build_demo(max_new_tokens=40)
    config = demo.config["components"]
    ids = {c.get("props", {}).get("elem_id") for c in config}
    for elem_id in ("repetition-penalty", "min-p", "frequency-penalty", "presence-penalty", "no-repeat-ngram-size",
                    "logit-bias", "banned-ids", "stop-token-ids", "arena-repetition-penalty", "arena-min-p",
                    "classroom-repetition-penalty"):
        assert elem_id in ids, elem_id
    labels = {c.get("props", {}).get("label") for c in config}
    assert "Sampling and stopping" in labels


# ------------------------------------------------------------------------------------------ the Arena


def test_arena_passes_the_repetition_penalty_and_min_p(tiny_model_dir):
    from app import arena as arena_tab

    args = dict(drafters=["ngram"], ks=["2"], source="prompt", prompt=PROMPT, category="qa", max_new_tokens=12,
                target=str(tiny_model_dir), draft_model="", exit_layer=0, temperature=0.0, seed=0, chat_template=True,
                repetition_penalty=1.3, min_p=0.1)
    last = last_values(arena_tab.run(**args), arena_tab.OUTPUTS)
    assert "Done" in last["arena-status"] and "repetition penalty 1.3" in last["arena-status"]
    with open(last["arena-json"], encoding="utf-8") as f:
        data = json.load(f)
    sampling = data["settings"]["sampling"]
    assert sampling["repetition_penalty"] == 1.3 and sampling["min_p"] == 0.1 and sampling["presence_penalty"] == 0
    assert data["ids_identical"] is True
    with open(last["arena-csv"], encoding="utf-8") as f:
        assert all(r["ids_identical"] in ("true", "") for r in csv.DictReader(f))
    with no_toast():
        bad = last_output(arena_tab.run(**(args | {"repetition_penalty": -1})))
    assert "Repetition penalty must be between" in str(bad[0])


# ------------------------------------------------------------------------------------------ the Classroom


def _processed(model, prefix: list[int], sampling: SamplingConfig, prompt_len: int) -> torch.Tensor:
    """The processed next-token distribution after ``prefix``, from scratch (a fresh cache)."""
    from specviz.core.kv import forward_logits, new_cache

    logits = forward_logits(model, list(prefix), new_cache(model), 1)
    return process_logits(apply_processors(logits, sampling, [list(prefix)], prompt_len), sampling)[0]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_stepper_probabilities_are_the_processed_ones(tiny_target, tiny_draft, temperature):
    from specviz.analysis.stepper import Recorder, Stepper
    from specviz.core.engine import GenerationConfig
    from specviz.drafters import ModelDrafter

    prompt = tiny_target.tokenizer.encode(PROMPT, add_special_tokens=False)
    sampling = SamplingConfig(temperature=temperature, repetition_penalty=1.5, presence_penalty=0.5, seed=3)
    recorder = Recorder(tiny_target, ModelDrafter(tiny_draft.model, "d"), prompt,
                        GenerationConfig(max_new_tokens=24, k=4, sampling=sampling))
    for _ in recorder.events():
        pass
    recording = recorder.recording()
    assert recording.processing == gs.settings_summary(sampling) and "repetition penalty 1.5" in recording.processing
    assert recording.rejections, "the run needs a rejection to show"
    committed, unprocessed_differs = list(prompt), False
    plain = SamplingConfig(temperature=temperature)
    for index, event in enumerate(recording.events):
        dist = recording.rejections.get(index)
        if dist is not None:
            prefix = committed + list(event.draft_ids[:event.num_accepted])
            target = _processed(tiny_target.model, prefix, sampling, len(prompt))
            assert list(dist.target) == pytest.approx([float(target[t]) for t in dist.token_ids], abs=1e-5)
            if temperature == 0.0:  # a greedy draft model carries no distribution: the step view computes it
                draft = _processed(tiny_draft.model, prefix, sampling, len(prompt))
                assert list(dist.draft) == pytest.approx([float(draft[t]) for t in dist.token_ids], abs=1e-5)
            raw = _processed(tiny_target.model, prefix, plain, len(prompt))
            unprocessed_differs |= abs(float(raw[dist.drafted_id]) - float(target[dist.drafted_id])) > 1e-4
        for i, (token, detail) in enumerate(zip(event.draft_ids, event.details)):  # the table's p per position
            if i <= event.num_accepted:
                p = _processed(tiny_target.model, committed + list(event.draft_ids[:i]), sampling, len(prompt))
                assert detail.target_prob == pytest.approx(float(p[token]), abs=1e-5)
        committed += list(event.emitted_ids)
    assert unprocessed_differs, "the penalties changed none of the shown probabilities"
    stepper = Stepper(recording)
    stepper.next_rejection()
    from app.classroom import table_html

    assert f"p and q after {recording.processing}" in table_html(stepper)


def test_classroom_takes_a_repetition_penalty(tiny_model_dir):
    from app import classroom
    from specviz.analysis import recording as rf

    values = {"prompt": PROMPT, "drafter": "ngram", "exit_layer": 0, "draft_model": "", "k": 3, "temperature": 0.0,
              "seed": 0, "max_new_tokens": 8, "target": str(tiny_model_dir), "repetition_penalty": 1.4}
    settings = classroom.parse(values)
    assert settings.config().sampling.repetition_penalty == 1.4
    query = classroom.share_query({**classroom.DEFAULTS, "prompt": "hi", "repetition_penalty": 1.4})
    assert "repetition_penalty=1.4" in query
    assert classroom.settings_from_query({"tab": "classroom", "repetition_penalty": "1.4"})["repetition_penalty"] == 1.4
    with pytest.raises(classroom.InputError, match="Repetition penalty"):
        classroom.parse({**values, "repetition_penalty": 0})
    recording, *_ = classroom.record_settings(settings)
    assert recording.processing == "repetition penalty 1.4"
    assert rf.loads(rf.dumps(recording)).recording.processing == "repetition penalty 1.4"  # kept in the file
