"""A drafter registered with one call shows up everywhere: the CLI's --drafter, the Live tab's drafter menu and
its input check, and the Arena's drafter list; and it runs in each (tiny models, no network).

The toy drafter is defined here: it proposes the last committed token k times (deterministic: no
probabilities, so the engine treats its guesses as one-hot)."""

from __future__ import annotations

import json
import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import arena, build_demo, device, live  # noqa: E402
from drain_support import last_values  # noqa: E402
from specviz.cli import main  # noqa: E402
from specviz.core.drafting import Draft, DraftContext  # noqa: E402
from specviz.drafters import registry  # noqa: E402
from specviz.drafters.registry import DrafterChoice, register  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog while the cat"
KEY = "toy"
LABEL = "Toy (repeat the last token)"


class RepeatLastDrafter:
    """Proposes the last committed token ``k`` times; keeps no cache."""

    name = "toy: repeat the last token"
    needs_hidden = False
    cache_len = None

    def reset(self, prompt_ids: list[int]) -> None:
        """Nothing to reset."""

    def propose(self, ctx: DraftContext) -> Draft:
        """``ctx.k`` copies of the last committed token (each with probability 1)."""
        return Draft([ctx.committed_ids[-1]] * ctx.k, [1.0] * ctx.k)

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Nothing to roll back."""


@pytest.fixture
def toy():
    """The toy drafter, registered for the test and removed after it."""
    register(DrafterChoice(KEY, LABEL, "Proposes the last committed token k times.",
                           lambda target, options: RepeatLastDrafter()))
    try:
        yield KEY
    finally:
        registry.unregister(KEY)
    assert KEY not in registry.drafter_keys()


def _updates(gen, names) -> dict:
    """Drive a handler generator to its end: the last real value of each output, by name."""
    last = last_values(gen, names)
    assert not device.DEVICE.locked, "the device must be free when the run ends"
    return last


def _component(demo, elem_id: str) -> dict:
    return next(c["props"] for c in demo.config["components"] if c.get("props", {}).get("elem_id") == elem_id)


def test_the_cli_accepts_and_runs_a_registered_drafter(toy, tiny_model_dir, capsys):
    code = main(["generate", "--prompt", "Hi", "--drafter", "no-such-drafter", "--target", str(tiny_model_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "choose from" in err and toy in err  # the accepted values list it
    code = main(["generate", "--target", str(tiny_model_dir), "--prompt", PROMPT, "--max-new-tokens", "12",
                 "--device", "cpu", "--json", "--drafter", toy, "--k", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    [run] = [json.loads(line) for line in out.splitlines()]
    assert run["drafter"] == toy and run["k"] == 3 and 1 <= len(run["token_ids"]) <= 12
    assert run["target_passes"] >= 1 and run["drafted"] >= 3


def test_the_live_tab_lists_and_runs_a_registered_drafter(toy, tiny_model_dir):
    demo = build_demo(max_new_tokens=40)
    assert (LABEL, toy) in [tuple(choice) for choice in _component(demo, "drafter")["choices"]]
    args = dict(prompt=PROMPT, target=str(tiny_model_dir), drafter=toy, draft_model="", exit_layer=0, k=3,
                adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, seed=0, max_new_tokens=12, stop_strings="",
                chat_template=True)
    out = _updates(live.generate(args), live.OUTPUTS)
    assert "Done in" in out["status"], out["status"]
    assert "toy: repeat the last token" in out["spec-output"] and "✓" in out["stats"]  # greedy: identical ids
    assert out["history-state"][0].drafter == "toy: repeat the last token"


def test_the_arena_lists_and_runs_a_registered_drafter(toy, tiny_model_dir):
    assert (LABEL, toy) in arena.drafter_choices()
    demo = build_demo(max_new_tokens=40)
    assert toy in [key for _, key in _component(demo, "arena-drafters")["choices"]]
    out = _updates(arena.run([toy], ["2"], "prompt", PROMPT, None, 8, str(tiny_model_dir), "", 0, 0.0, 0, True),
                   arena.OUTPUTS)
    assert "Done" in out["arena-status"], out["arena-status"]
    methods = [row[1] for row in out["arena-table"]["data"]]
    assert methods == ["standard", f"{toy} k=2"]
    assert out["arena-table"]["data"][1][-1] == "✓"  # greedy: the same ids as standard decoding
