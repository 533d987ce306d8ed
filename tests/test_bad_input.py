"""Bad input, in the web app's handler and on the command line: every case gives a clear message (asserted here),
never a traceback or a hang, and the session stays usable. Also the operator policy (specviz.runtime.policy): remote code,
allowed models, local folders, and the caps on prompt and new tokens. Tiny models only, no network."""

from __future__ import annotations

import html
import io
import os
import sys
import time
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import device, inputs, live  # noqa: E402
from drain_support import last_values  # noqa: E402
from toast_support import no_toast  # noqa: E402
from specviz.runtime import models  # noqa: E402
from specviz.cli import main  # noqa: E402
from specviz.runtime.models import (ModelLoadError, PromptTooLongError, context_window, encode_prompt, fit_prompt,  # noqa: E402
                            load_model, sanitize_prompt)
from specviz.runtime.policy import PUBLIC_MODELS, Policy, PolicyError  # noqa: E402

POLICY_VARS = ("SPACE_ID", "SPECVIZ_PUBLIC", "SPECVIZ_ALLOW_REMOTE_CODE", "SPECVIZ_ALLOWED_MODELS",
               "SPECVIZ_ALLOW_LOCAL_PATHS", "SPECVIZ_MAX_NEW_TOKENS", "SPECVIZ_MAX_PROMPT_TOKENS", "SPECVIZ_TARGET")
LONG_PROMPT = "START " + " ".join(["The river runs through the green valley past the old stone bridge."] * 120) + \
    " Tell me where the river goes."


@pytest.fixture(autouse=True)
def local_policy(monkeypatch):
    """Every test starts from the local defaults, whatever the machine's environment says."""
    for name in POLICY_VARS:
        monkeypatch.delenv(name, raising=False)


def _args(model_dir, **change):
    base = dict(prompt="The quick brown fox", target=str(model_dir), drafter="ngram", draft_model="", exit_layer=0,
                k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=8,
                stop_strings="", chat_template=True)
    return {**base, **change}


def run(**kwargs) -> dict:
    """Drive the generate handler to its end (as Gradio would); the last value of each output."""
    last = last_values(live.generate(kwargs), live.OUTPUTS, every=True)
    last["statuses"] = last.get("all_status", [])
    assert not device.DEVICE.locked, "the device must be free after every run, failed or not"
    return last


def fails_with(words: str, **kwargs) -> str:
    """Run the handler, expect an error status containing ``words``; returns the status."""
    started = time.monotonic()
    with no_toast():
        out = run(**kwargs)
    status = html.unescape(out["status"])
    assert "status-error" in status and words in status, status
    assert "Traceback" not in status and 'File "' not in status
    assert time.monotonic() - started < 20, "an error must come quickly, not after a hang"
    return status


def still_usable(tiny_model_dir) -> None:
    out = run(**_args(tiny_model_dir, max_new_tokens=4))
    assert "Done in" in out["status"], out["status"]


# --------------------------------------------------------------------------------------- the web app: prompt


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t \n", "\x00\x01\x1b", None])
def test_empty_or_blank_prompt(tiny_model_dir, prompt):
    fails_with("The prompt is empty", **_args(tiny_model_dir, prompt=prompt))
    still_usable(tiny_model_dir)


def test_prompt_longer_than_the_context_window_is_cut_from_the_left(tiny_model_dir, tiny_target):
    assert context_window(tiny_target) == 512
    assert len(encode_prompt(tiny_target.tokenizer, LONG_PROMPT)) > 512
    out = run(**_args(tiny_model_dir, prompt=LONG_PROMPT, max_new_tokens=8))
    assert "Done in" in out["status"], out["status"]
    assert "The prompt was too long" in out["status"] and "its start was cut" in out["status"]
    assert "context window of 512 tokens" in out["status"]
    running = [s for s in out["statuses"] if "Generating" in s or "Done in" in s]
    assert running and all("too long" in s for s in running)  # said from the first token to the end
    assert 'data-kind="target"' in out["baseline-output"]


def test_operator_cap_on_prompt_tokens(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SPECVIZ_MAX_PROMPT_TOKENS", "24")
    out = run(**_args(tiny_model_dir, prompt=LONG_PROMPT[:600]))
    assert "Done in" in out["status"] and "SPECVIZ_MAX_PROMPT_TOKENS" in out["status"], out["status"]


def test_a_pasted_book_is_cut_before_tokenizing(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_PROMPT_CHARS", 2_000)
    out = run(**_args(tiny_model_dir, prompt="word " * 5_000))
    assert "only its last 2,000 were read" in out["status"] and "Done in" in out["status"], out["status"]


def test_fit_prompt_keeps_the_chat_template_and_the_end_of_the_text(tiny_target, embedded):
    for loaded, generation_prompt in ((tiny_target, "<|assistant|>\n"), (embedded, "<|im_start|>assistant\n")):
        tokenizer = loaded.tokenizer
        fit = fit_prompt(tokenizer, LONG_PROMPT, 60)
        assert fit.truncated and len(fit.ids) <= 60 and fit.original_tokens > 60
        text = tokenizer.decode(fit.ids)
        assert text.endswith(generation_prompt) and "Tell me where the river goes." in text
        assert "START" not in text  # the start is what goes
        whole = fit_prompt(tokenizer, "Hi there", 60)
        assert not whole.truncated and whole.ids == encode_prompt(tokenizer, "Hi there")
    plain = fit_prompt(embedded.tokenizer, LONG_PROMPT, 40, use_chat_template=False)
    assert len(plain.ids) <= 40 and embedded.tokenizer.decode(plain.ids).endswith("Tell me where the river goes.")
    with pytest.raises(PromptTooLongError, match="chat template alone takes"):
        fit_prompt(embedded.tokenizer, LONG_PROMPT, 10)


def test_max_new_tokens_beyond_the_context_window(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SPECVIZ_MAX_NEW_TOKENS", "4096")  # the operator allows it; the model's window does not
    fails_with("does not fit the target's context window (512 tokens", **_args(tiny_model_dir, max_new_tokens=600))
    still_usable(tiny_model_dir)


def test_control_characters_and_invalid_surrogates_are_removed_and_said(tiny_model_dir):
    prompt = "The quick\x00 brown\x1b[31m fox\x7f \ud800jumps \udcff over\r\nthe \ud83d\ude00 lazy dog\x85"
    out = run(**_args(tiny_model_dir, prompt=prompt))
    assert "Done in" in out["status"], out["status"]
    clean = sanitize_prompt(prompt)  # the note's wording: tests/test_messages.py
    assert (clean.removed_controls, clean.replaced_invalid) == (4, 2) and clean.note in out["status"]
    assert clean.text == "The quick brown[31m fox \ufffdjumps \ufffd over\nthe \U0001F600 lazy dog"
    assert encode_prompt(models.load_model(str(tiny_model_dir), device="cpu").tokenizer, prompt)  # never raises
    bidi = sanitize_prompt("price \u202e01$\u202c and \u2067x\u2069 \u200f")  # overrides/isolates go, RLM stays
    assert bidi.text == "price 01$ and x \u200f" and bidi.removed_controls == 4


@pytest.mark.parametrize("change, words", [
    ({"prompt": ["not", "text"]}, "The prompt must be text"),
    ({"target": "bad\x00name"}, "control or invalid characters"),
    ({"stop_strings": ",".join(f"s{i}" for i in range(40))}, "Too many stop strings"),
    ({"drafter": None}, "Unknown drafter"),
])
def test_malformed_api_inputs(tiny_model_dir, change, words):
    fails_with(words, **_args(tiny_model_dir, **change))


# --------------------------------------------------------------------------------------- the web app: numbers


@pytest.mark.parametrize("change, words", [
    ({"max_new_tokens": 0}, "Max new tokens must be between 1 and 1024 (got 0)"),
    ({"max_new_tokens": 5000}, "Max new tokens must be between 1 and 1024 (got 5000; the server's limit, set by "
                               "the operator with SPECVIZ_MAX_NEW_TOKENS)"),
    ({"max_new_tokens": 1024.5}, "Max new tokens must be between 1 and 1024 (got 1024.5;"),  # a fraction out of range
    ({"k": 0}, "Draft length k must be between 1 and 16 (got 0)"),
    ({"k": 17}, "Draft length k must be between 1 and 16 (got 17)"),
    ({"k": "x"}, "Draft length k must be a number"),
    ({"temperature": -0.1}, "Temperature must be between 0 and 5 (got -0.1)"),
    ({"temperature": float("nan")}, "Temperature must be between 0 and 5"),
    ({"temperature": float("inf")}, "Temperature must be between 0 and 5"),
    ({"top_p": 0}, "Top-p must be between 0.01 and 1 (got 0)"),
    ({"top_p": 1.5}, "Top-p must be between 0.01 and 1 (got 1.5)"),
    ({"top_k": -1}, "Top-k must be between 0 and 1,000,000 (got -1)"),
    ({"seed": -5}, "Seed must be between 0 and 9,007,199,254,740,991 (got -5)"),
    ({"top_k": 2.5}, "Top-k must be a whole number"),
    ({"seed": "abc"}, "Seed must be a number"),
])
def test_numbers_out_of_range(tiny_model_dir, change, words):
    fails_with(words, **_args(tiny_model_dir, **change))


def test_a_fraction_for_k_or_max_new_tokens_runs_what_its_box_shows_and_says_so(tiny_model_dir):
    """A trial typed k = 2.5 and pressed Generate at once: the box showed 3 (its release rounds and says so) while
    the run was refused "(got 2.5)". Generate now runs the box's value with the box's sentence in its status."""
    out = run(**_args(tiny_model_dir, k=2.5, max_new_tokens=4.5))
    status = html.unescape(out["status"])
    assert "Done in" in status and "status-error" not in status, status
    assert "Draft length k must be a whole number (got 2.5); using 3." in status
    assert "Max new tokens must be a whole number (got 4.5); using 5." in status
    assert any("k = 3" in html.unescape(v) for v in out.values() if isinstance(v, str))


def test_session_usable_after_bad_numbers(tiny_model_dir):
    for change in ({"k": 99}, {"top_p": -1}, {"max_new_tokens": -5}):
        with no_toast():
            run(**_args(tiny_model_dir, **change))
    still_usable(tiny_model_dir)


# --------------------------------------------------------------------------------------- the web app: models


def test_missing_local_path(tiny_model_dir, tmp_path):
    fails_with("There is no such local folder or hub id", **_args(tiny_model_dir, target=str(tmp_path / "nowhere")))
    still_usable(tiny_model_dir)


def test_unknown_hub_id_offline(tiny_model_dir):
    fails_with("Could not load 'no-such-org-xyz/no-such-model'", **_args(tiny_model_dir,
                                                                         target="no-such-org-xyz/no-such-model"))
    still_usable(tiny_model_dir)


def test_no_network_is_a_message_not_a_hang(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(models.loading, "_hub_offline", lambda: False)
    monkeypatch.setattr(models.loading, "_hub_reachable", lambda timeout_s=3.0: False)
    fails_with("the Hugging Face Hub is unreachable", **_args(tiny_model_dir, target="some-org/some-model"))
    still_usable(tiny_model_dir)


def test_unknown_hub_id_with_a_network(tiny_model_dir, monkeypatch):
    class RepositoryNotFoundError(Exception):
        pass

    def not_found(*args, **kwargs):
        raise RepositoryNotFoundError("404 Client Error. Repository Not Found for url: https://huggingface.co/...")

    monkeypatch.setattr(models.loading, "_hub_needs_local_only", lambda spec, trust: False)
    monkeypatch.setattr(models.loading, "_from_pretrained", not_found)
    fails_with("no such model on the Hugging Face Hub, or it is private or gated",
               **_args(tiny_model_dir, target="no-such-org-xyz/model-404"))


def test_draft_model_with_another_vocabulary(tiny_model_dir, tiny_other_vocab_dir):
    out = run(**_args(tiny_model_dir, drafter="model", draft_model=str(tiny_other_vocab_dir)))
    assert "Done in" in out["status"] and "re-tokenized" in out["status"]  # drafts re-tokenized, not refused
    still_usable(tiny_model_dir)


def test_draft_model_missing(tiny_model_dir, tmp_path):
    fails_with("needs a draft model", **_args(tiny_model_dir, drafter="model", draft_model="  "))
    fails_with("no such local folder", **_args(tiny_model_dir, drafter="model", draft_model=str(tmp_path / "x")))


# --------------------------------------------------------------------------------------- remote code


def _custom_code_folder(folder: Path) -> Path:
    """A 'model' whose config needs its own Python code, which would leave a file behind if it ever ran."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(
        '{"model_type": "specviz-custom", "architectures": ["CustomModel"], "auto_map": {"AutoConfig": '
        '"configuration_custom.CustomConfig", "AutoModelForCausalLM": "modeling_custom.CustomModel"}}')
    code = "import pathlib\npathlib.Path(__file__).with_name('CODE_RAN').write_text('yes')\n"
    (folder / "configuration_custom.py").write_text(code)
    (folder / "modeling_custom.py").write_text(code)
    return folder


def test_remote_code_stays_off(tiny_model_dir, tmp_path):
    folder = _custom_code_folder(tmp_path / "custom")
    fails_with("running a repository's code is off (operator setting SPECVIZ_ALLOW_REMOTE_CODE=1",
               **_args(tiny_model_dir, target=str(folder)))
    with pytest.raises(ModelLoadError, match="SPECVIZ_ALLOW_REMOTE_CODE"):
        load_model(str(folder), device="cpu")
    assert not (folder / "CODE_RAN").exists()


def test_remote_code_follows_the_operator_setting(monkeypatch, tmp_path):
    seen = []

    def record(source, dtype, trust_remote_code, hub_kwargs, *where):
        seen.append(trust_remote_code)
        raise ValueError("stop here")

    monkeypatch.setattr(models.loading, "_from_pretrained", record)
    folder = _custom_code_folder(tmp_path / "custom")
    for value, expected in (("", False), ("0", False), ("maybe", False), ("1", True)):
        monkeypatch.setenv("SPECVIZ_ALLOW_REMOTE_CODE", value)
        with pytest.raises(ModelLoadError):
            load_model(str(folder), device="cpu")
        assert seen[-1] is expected, value


# --------------------------------------------------------------------------------------- the operator policy


def test_policy_defaults_local_and_on_a_space():
    local = Policy.from_env({})
    assert not local.public and local.allow_local_paths and local.allowed_models is None
    assert not local.allow_remote_code and local.max_new_tokens == 1024 and local.max_prompt_tokens is None
    space = Policy.from_env({"SPACE_ID": "someone/specviz"})
    assert space.public and not space.allow_local_paths and space.allowed_models == PUBLIC_MODELS
    assert not space.allow_remote_code and space.max_new_tokens == 512 and space.max_prompt_tokens == 2048
    assert not Policy.from_env({"SPACE_ID": "x/y", "SPECVIZ_PUBLIC": "0"}).public
    assert Policy.from_env({"SPECVIZ_PUBLIC": "1"}).public
    assert Policy.from_env({"SPECVIZ_PUBLIC": "perhaps"}).public  # unreadable: the restricted choice
    odd = Policy.from_env({"SPECVIZ_MAX_NEW_TOKENS": "lots", "SPECVIZ_ALLOW_LOCAL_PATHS": "hmm"})
    assert odd.max_new_tokens == 1024 and not odd.allow_local_paths


def test_policy_allow_list():
    policy = Policy.from_env({"SPECVIZ_ALLOWED_MODELS": "embedded, HuggingFaceTB/*", "SPECVIZ_TARGET": "/srv/mine"})
    assert policy.check_model("embedded") == "embedded"
    assert policy.check_model("huggingfacetb/SmolLM2-360M-Instruct")
    assert policy.check_model("/srv/mine")  # the operator's default target is always allowed
    with pytest.raises(PolicyError, match=r"'evil/model' is not allowed on this server.*SPECVIZ_ALLOWED_MODELS"):
        policy.check_model("evil/model")
    assert Policy.from_env({"SPECVIZ_ALLOWED_MODELS": "*"}).allowed_models is None


def test_public_space_refuses_local_paths_and_other_models(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/specviz")
    fails_with("Loading a local folder as the target is disabled on this server (SPECVIZ_ALLOW_LOCAL_PATHS)",
               **_args(tiny_model_dir, target="/etc"))
    fails_with("SPECVIZ_ALLOW_LOCAL_PATHS", **_args(tiny_model_dir, target="../../etc/passwd"))
    fails_with("The target 'evil-org/big-model' is not allowed on this server",
               **_args(tiny_model_dir, target="evil-org/big-model"))
    fails_with("The draft model 'evil-org/drafter' is not allowed",
               **_args(tiny_model_dir, target="embedded", drafter="model", draft_model="evil-org/drafter"))
    fails_with("Max new tokens must be between 1 and 512 (got 600; the server's limit",
               **_args(tiny_model_dir, target="embedded", max_new_tokens=600))
    # a hub-shaped name that is a folder here is a local path in disguise
    monkeypatch.chdir(tiny_model_dir.parent.parent)
    hub_shaped = f"{tiny_model_dir.parent.name}/{tiny_model_dir.name}"
    fails_with("names a folder on this server", **_args(tiny_model_dir, target=hub_shaped))
    monkeypatch.setenv("SPECVIZ_ALLOW_LOCAL_PATHS", "1")  # the operator may open it again
    still_usable(tiny_model_dir)


def test_public_space_allows_the_embedded_model_to_be_chosen():
    Policy.from_env({"SPACE_ID": "x/y"}).check_model("embedded")
    inputs.check_models("embedded", None, Policy.from_env({"SPACE_ID": "x/y"}))


# --------------------------------------------------------------------------------------- the command line


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _gen(target, *extra: str) -> list[str]:
    return ["generate", "--target", str(target), "--device", "cpu", "--max-new-tokens", "6", "--json", *extra]


@pytest.mark.parametrize("prompt", ["", "   ", "\x00\x07"])
def test_cli_empty_prompt(capsys, tiny_model_dir, prompt):
    code, out, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", prompt))
    assert code == 2 and out == "" and "error: the prompt is empty" in err


def test_cli_long_prompt_is_cut_with_a_note(capsys, tiny_model_dir):
    code, out, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", LONG_PROMPT))
    assert code == 0, err
    assert "note: the prompt has" in err and "its start was cut" in err and "context window of 512" in err
    assert out.count("\n") == 1


def test_cli_max_new_tokens_beyond_the_window(capsys, tiny_model_dir):
    code, _, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", "hi", "--max-new-tokens", "600"))
    assert code == 2 and "error: --max-new-tokens 600 does not fit the context window" in err


@pytest.mark.parametrize("flags, words", [
    (["--max-new-tokens", "0"], "max-new-tokens must be >= 1, got 0"),
    (["--k", "17"], "k must be in 1..16 or 'auto', got 17"),
    (["--temperature", "-1"], "temperature must be >= 0 (0 = greedy), got -1"),
    (["--temperature", "nan"], "temperature must be >= 0"),
    (["--top-p", "1.5"], "top-p must be in (0, 1], got 1.5"),
    (["--top-k", "-3"], "top-k must be >= 0, got -3"),
])
def test_cli_numbers_out_of_range(capsys, tiny_model_dir, flags, words):
    code, out, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", "hi", *flags))
    assert code == 2 and out == "" and words in err and err.startswith("error:")


def test_cli_models_that_cannot_be_loaded(capsys, tiny_model_dir, tiny_other_vocab_dir, tmp_path):
    code, _, err = cli(capsys, *_gen(tmp_path / "nowhere", "--prompt", "hi"))
    assert code == 2 and "error: There is no such local folder or hub id" in err
    code, _, err = cli(capsys, *_gen("no-such-org-xyz/no-such-model", "--prompt", "hi"))
    assert code == 2 and "error: Could not load 'no-such-org-xyz/no-such-model'" in err and "unreachable" in err
    code, _, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", "hi", "--drafter", "model", "--draft-model",
                                     str(tiny_other_vocab_dir)))
    assert code == 0 and "re-tokenized" in err  # another vocabulary is drafted through re-tokenization
    code, _, err = cli(capsys, *_gen(_custom_code_folder(tmp_path / "custom"), "--prompt", "hi"))
    assert code == 2 and "SPECVIZ_ALLOW_REMOTE_CODE" in err and not (tmp_path / "custom" / "CODE_RAN").exists()


def test_cli_is_not_restricted_by_the_public_policy(capsys, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/specviz")
    code, out, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", "hi"))  # a local folder: fine here
    assert code == 0, err


def test_cli_control_characters_and_bad_bytes(capsys, tiny_model_dir, monkeypatch):
    code, out, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", "the fox\x00\x1b and \udcff dog"))
    assert code == 0, err
    clean = sanitize_prompt("the fox\x00\x1b and \udcff dog")  # the note's wording: tests/test_messages.py
    assert (clean.removed_controls, clean.replaced_invalid) == (2, 1) and f"note: {clean.note}" in err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the quick \xff\xfe brown fox"), encoding="utf-8"))
    code, out, err = cli(capsys, *_gen(tiny_model_dir, "--prompt", "-"))
    assert code == 0, err
    assert "not valid UTF-8: undecodable bytes were replaced" in err
