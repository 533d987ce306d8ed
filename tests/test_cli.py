"""The command line (``python -m specviz generate``), run in-process on the tiny models (and once as a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.cli import main

REQUIRED = {"token_ids", "text", "finish_reason", "target_passes", "drafted", "accepted", "acceptance_rate",
            "tokens_per_pass", "wall_s", "alpha", "expected_tokens_per_pass", "ttft_ms", "tokens_per_s", "seed",
            "drafter", "k"}
PROMPT = "The quick brown fox jumps over the lazy dog while the cat"
ROOT = Path(__file__).resolve().parents[1]


def _generate(capsys, model_dir, *extra: str) -> tuple[int, list[dict], str]:
    """Run ``generate --json`` in-process; (exit status, one dict per stdout line, stderr)."""
    code = main(["generate", "--target", str(model_dir), "--prompt", PROMPT, "--max-new-tokens", "12",
                 "--device", "cpu", "--json", *extra])
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]  # every stdout line must be JSON
    return code, lines, err


def test_json_is_one_line_per_run_with_the_required_keys(capsys, tiny_model_dir):
    code, lines, err = _generate(capsys, tiny_model_dir, "--drafter", "ngram", "--k", "3")
    assert code == 0, err
    assert len(lines) == 1
    run = lines[0]
    assert REQUIRED <= run.keys()
    assert run["drafter"] == "ngram" and run["k"] == 3 and run["seed"] == 0
    assert run["finish_reason"] in ("eos", "length", "stop")
    assert 1 <= len(run["token_ids"]) <= 12
    assert run["finish_reason"] != "length" or len(run["token_ids"]) == 12
    assert run["tokens_per_pass"] >= 1.0 and run["wall_s"] > 0
    assert run["acceptance_rate"] is None or 0.0 <= run["acceptance_rate"] <= 1.0
    assert "Traceback" not in err


def test_standard_decoding_has_no_acceptance_and_one_token_per_pass(capsys, tiny_model_dir):
    code, [run], err = _generate(capsys, tiny_model_dir, "--drafter", "none")
    assert code == 0, err
    assert run["acceptance_rate"] is None and run["alpha"] is None
    assert run["drafted"] == 0 and run["accepted"] == 0
    assert run["tokens_per_pass"] == 1.0
    assert run["target_passes"] == len(run["token_ids"]) - 1  # the prefill emits the first token


@pytest.mark.parametrize("extra", [
    ["--drafter", "ngram", "--k", "2"],
    ["--drafter", "ngram", "--k", "auto"],
    ["--drafter", "model", "--k", "4"],  # --draft-model added below
    ["--drafter", "early-exit", "--exit-layer", "2", "--k", "3"],
    ["--drafter", "bf16", "--k", "5"],
    ["--drafter", "oracle", "--k", "8"],
])
def test_greedy_ids_equal_standard_decoding_for_every_drafter(capsys, tiny_model_dir, tiny_draft_dir, extra):
    if "model" in extra:
        extra = [*extra, "--draft-model", str(tiny_draft_dir)]
    code, [base], err = _generate(capsys, tiny_model_dir, "--drafter", "none")
    assert code == 0, err
    code, [spec], err = _generate(capsys, tiny_model_dir, *extra)
    assert code == 0, err
    assert spec["token_ids"] == base["token_ids"]
    assert spec["text"] == base["text"]
    assert spec["finish_reason"] == base["finish_reason"]
    if "oracle" in extra:
        assert spec["acceptance_rate"] == 1.0


def test_runs_give_one_line_each_with_consecutive_seeds(capsys, tiny_model_dir):
    code, lines, err = _generate(capsys, tiny_model_dir, "--runs", "3", "--seed", "7", "--temperature", "1.0",
                                 "--top-p", "0.9", "--drafter", "model", "--draft-model", str(tiny_model_dir))
    assert code == 0, err
    assert [run["seed"] for run in lines] == [7, 8, 9]
    # the same seed reproduces the same run
    code, [again], err = _generate(capsys, tiny_model_dir, "--runs", "1", "--seed", "8", "--temperature", "1.0",
                                   "--top-p", "0.9", "--drafter", "model", "--draft-model", str(tiny_model_dir))
    assert again["token_ids"] == lines[1]["token_ids"]


def test_compare_reports_speedup_and_identical_ids(capsys, tiny_model_dir):
    code, [run], err = _generate(capsys, tiny_model_dir, "--drafter", "oracle", "--compare")
    assert code == 0, err
    compare = run["compare"]
    assert compare["ids_identical"] is True and compare["first_difference"] is None
    assert compare["speedup"] > 0 and compare["baseline_tokens_per_s"] > 0


def test_stop_string_ends_the_run(capsys, tiny_model_dir):
    code, [base], err = _generate(capsys, tiny_model_dir, "--drafter", "none", "--no-chat-template")
    assert code == 0, err
    words = base["text"].split()
    if not words:
        pytest.skip("the tiny model generated only whitespace")
    code, [run], err = _generate(capsys, tiny_model_dir, "--drafter", "ngram", "--no-chat-template", "--stop", words[0])
    assert code == 0, err
    assert run["finish_reason"] == "stop" and words[0] not in run["text"]


def test_plain_output_prints_text_and_summary(capsys, tiny_model_dir):
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "6",
                 "--device", "cpu", "--compare"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "tokens/pass" in out and "speedup" in out and "acceptance rate" in out


@pytest.mark.parametrize("bad", [
    ["--k", "17"], ["--k", "0"], ["--k", "four"], ["--temperature", "-0.5"], ["--temperature", "nan"],
    ["--top-p", "0"], ["--top-p", "1.5"], ["--max-new-tokens", "0"], ["--runs", "0"], ["--top-k", "-1"], ["--seed", "-1"],
    ["--drafter", "bogus"], ["--drafter", "model"], ["--ngram-min", "3", "--ngram-max", "2"],
    ["--drafter", "early-exit", "--exit-layer", "99"], ["--device", "tpu"], ["--no-such-flag"],
    ["--prompt", ""], ["--prompt", "   "],
])
def test_bad_values_give_one_error_line_and_status_2(capsys, tiny_model_dir, bad):
    argv = ["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--json", *bad]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert "Traceback" not in err


def test_missing_target_folder_is_a_clear_error_and_another_vocabulary_is_re_tokenized(capsys, tmp_path,
                                                                                        tiny_model_dir,
                                                                                        tiny_other_vocab_dir):
    assert main(["generate", "--target", str(tmp_path / "nowhere"), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error:") and "nowhere" in err and "Traceback" not in err
    assert main(["generate", "--target", str(tiny_model_dir), "--prompt", "hi", "--drafter", "model",
                 "--draft-model", str(tiny_other_vocab_dir), "--max-new-tokens", "6"]) == 0
    err = capsys.readouterr().err  # a draft model with another tokenizer: accepted, with a note
    assert "note: The draft model uses another tokenizer" in err and "one-hot" in err and "Traceback" not in err


def test_missing_command_and_help(capsys):
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("error:")
    assert main(["generate", "--help"]) == 0
    assert "--drafter" in capsys.readouterr().out


def test_module_entry_point_keeps_stdout_pure_json(tiny_model_dir):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "specviz", "generate", "--target", str(tiny_model_dir), "--prompt", PROMPT,
         "--max-new-tokens", "5", "--runs", "2", "--json", "--device", "cpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(REQUIRED <= json.loads(line).keys() for line in lines)
    done = subprocess.run([sys.executable, "-m", "specviz", "generate", "--prompt", "hi", "--k", "99"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("error:") and len(done.stderr.strip().splitlines()) == 1


def test_head_drafters_and_tree_flags(capsys, tiny_model_dir, tiny_target, tmp_path):
    from specviz.drafters.networks import new_eagle_head, save_heads

    heads = save_heads(new_eagle_head(tiny_target.model), tmp_path / "e.safetensors", tiny_target.model)
    assert oct(heads.stat().st_mode & 0o777) == "0o644"
    code, records, err = _generate(capsys, tiny_model_dir, "--drafter", "eagle", "--heads", str(heads), "--tree", "5",
                                   "--compare")
    assert code == 0, err
    assert records[0]["tree_nodes"] == 5 and records[0]["drafter"] == "eagle"
    code, records, err = _generate(capsys, tiny_model_dir, "--drafter", "eagle", "--heads", str(heads), "--tree", "5",
                                   "--temperature", "0.8")
    assert code == 0 and records[0]["tree_nodes"] == 0 and "greedy-only" in err
    wide = ("--drafter", "eagle", "--heads", str(heads), "--k", "4", "--tree", "40", "--confidence", "0", "--compare")
    code, records, err = _generate(capsys, tiny_model_dir, *wide, "--tree-width", "6")
    assert code == 0 and records[0]["compare"]["ids_identical"], err
    # width 3 offers at most 3 + 9 + 9 + 9 = 30 candidates at k = 4; width 6 fills 40 nodes where a pass drafts 4 deep
    assert 30 * records[0]["tree_passes"] < records[0]["tree_nodes_verified"] <= 40 * records[0]["tree_passes"]
    code, records, err = _generate(capsys, tiny_model_dir, *wide)
    assert code == 0 and records[0]["tree_nodes_verified"] <= 30 * records[0]["tree_passes"]
    code, _, err = _generate(capsys, tiny_model_dir, *wide, "--tree-width", "0")
    assert code == 2 and "tree-width" in err
    code, _, err = _generate(capsys, tiny_model_dir, "--drafter", "ngram", "--tree", "4")
    assert code == 2 and "--tree applies to --drafter eagle or medusa" in err
    drafted = {}
    for gate in ("0", "0.999"):
        code, records, err = _generate(capsys, tiny_model_dir, "--drafter", "eagle", "--heads", str(heads),
                                       "--confidence", gate, "--compare")
        assert code == 0 and records[0]["min_confidence"] == float(gate) and records[0]["compare"]["ids_identical"]
        drafted[gate] = records[0]["drafted"]
    assert drafted["0.999"] < drafted["0"] / 2  # the gate leaves out the unsure guesses
    code, _, err = _generate(capsys, tiny_model_dir, "--drafter", "ngram", "--confidence", "0.2")
    assert code == 2 and "--confidence applies to --drafter eagle, medusa, distilled or model, not ngram" in err
    code, records, err = _generate(capsys, tiny_model_dir, "--drafter", "eagle", "--heads", str(heads), "--lookup",
                                   "--compare")
    assert code == 0 and records[0]["lookup"] is True and records[0]["compare"]["ids_identical"]
    assert 0 <= records[0]["copied_passes"] <= records[0]["target_passes"]
    code, _, err = _generate(capsys, tiny_model_dir, "--drafter", "ngram", "--lookup")
    assert code == 2 and "--lookup applies to --drafter eagle or medusa" in err
    code, _, err = _generate(capsys, tiny_model_dir, "--drafter", "eagle", "--confidence", "1.5")
    assert code == 2 and "confidence must be in [0, 1)" in err
    code, _, err = _generate(capsys, tiny_model_dir, "--drafter", "medusa")
    assert code == 2 and "No trained medusa heads" in err and "Traceback" not in err
    code, _, err = _generate(capsys, tiny_model_dir, "--drafter", "eagle", "--heads", str(tmp_path / "none.safetensors"))
    assert code == 2 and "not found" in err


def test_train_eagle3_on_part_three_forms(capsys, tiny_model_dir, tmp_path):
    """`train eagle3 --prompt-set part3 --forms ...` writes an EAGLE-3 head trained on those forms only; bad
    forms are one-line usage errors."""
    out = tmp_path / "e3.safetensors"
    code = main(["train", "eagle3", "--target", str(tiny_model_dir), "--device", "cpu", "--prompt-set", "part3",
                 "--prompts", "8", "--max-new-tokens", "6", "--epochs", "1", "--batch-tokens", "64",
                 "--forms", "story,letter", "--data", str(tmp_path / "d"), "--out", str(out)])
    printed, err = capsys.readouterr()
    report = json.loads(printed)
    assert code == 0 and report["recipe"] == "eagle3" and report["data"]["forms"] == [2, 7]
    assert report["train_sequences"] + report["holdout_sequences"] == 2 and "--drafter eagle --heads" in err
    code = main(["train", "eagle3", "--target", str(tiny_model_dir), "--prompt-set", "part3", "--forms", "poems"])
    assert code == 2 and "unknown form(s) poems" in capsys.readouterr().err
    code = main(["train", "eagle", "--target", str(tiny_model_dir), "--forms", "story"])
    assert code == 2 and "--forms needs" in capsys.readouterr().err
