"""What the Live tab starts from and what it reads and shows: its default settings (:data:`DEFAULTS`), the names
of its inputs (:data:`INPUTS`, one mapping of name -> value for :func:`app.live.run.generate`) and of its outputs
(:data:`OUTPUTS`), and the example prompts."""

from __future__ import annotations

import json
from pathlib import Path

from app.inputs import LOOKAHEAD_DEFAULTS, SETTING_NAMES
from specviz.analysis.prompts import FIRST_EXAMPLE, example_prompt

ASSETS = Path(__file__).resolve().parents[2] / "assets"

OUTPUTS = ("spec-output", "baseline-output", "charts", "stats", "status", "history", "history-state", "draft-tree",
           "head-accuracy", "run-progress", "max-new-tokens")
"""What :func:`app.live.run.generate` yields, in order (the components' elem_ids); "run-progress" is the status's
compact copy under the Generate button (:func:`app.live.outputs.progress_html`); "max-new-tokens" the slider, whose
info line a finished run's last message updates (its plan from the costs the run measured; never its value)."""

INPUTS = SETTING_NAMES
"""The controls a run reads, by name (:data:`app.inputs.SETTING_NAMES`): the Generate button sends their values in
this order (then the session's history), and :func:`app.live.run.generate` reads them as one mapping."""

DEFAULTS = {
    "prompt": "",
    "target": "embedded",
    "drafter": "ngram",
    "draft_model": "",
    "exit_layer": 0,
    "k": 4,
    "adaptive_k": False,
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "seed": 0,
    "max_new_tokens": 64,  # kept until the page learns the derived default (costs.derived_default_tokens)
    "stop_strings": "",
    "chat_template": True,
    "tree_nodes": 0,
    "confidence": None,  # the drafter's own gate (app.inputs.default_gate: 0.15 heads, 0.2 distilled, 0 model)
    "lookup": False,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "no_repeat_ngram_size": 0,
    "logit_bias": "",
    "banned_ids": "",
    "stop_token_ids": "",
    "window": LOOKAHEAD_DEFAULTS[0],
    "ngram": LOOKAHEAD_DEFAULTS[1],
    "candidates": LOOKAHEAD_DEFAULTS[2],
    "weights": None,  # the operator's SPECVIZ_WEIGHTS, else the format measured fastest here (read on page load)
}
"""The Live tab's settings before the visitor changes them (:func:`app.build_demo` takes overrides). Left as it is,
``max_new_tokens`` is replaced on page load by a default derived from the target's measured step cost (a run of
about :data:`app.costs.DEFAULT_RUN_S` seconds here, :func:`app.costs.derived_default_tokens`); an
override is kept as given."""


# ------------------------------------------------------------------------------------------------- examples


def load_examples(path: Path = ASSETS / "prompts.jsonl") -> list[dict]:
    """The example prompts ({id, category, prompt} per line), sorted by category."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["category"])


DEFAULTS["prompt"] = example_prompt(FIRST_EXAMPLE)  # in the prompt box when the page opens


def example_labels(examples: list[dict]) -> list[str]:
    """"category · first words" per example; where two would read the same, each of them gets the start of its
    next line (e.g. two questions over different contexts), and any that still read the same a number: "(2)",
    "(3)", so every label is distinct."""
    first = [f"{e['category']} · {_short(e['prompt'])}" for e in examples]
    labels = list(first)
    for i, e in enumerate(examples):
        lines = [line for line in e["prompt"].strip().splitlines() if line.strip()]
        if first.count(first[i]) > 1 and len(lines) > 1:  # compared with the first labels: every twin changes
            labels[i] += f" — {_short(lines[1], 5)}"
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} ({seen[label]})"
    return labels


def _short(prompt: str, words: int = 7) -> str:
    first = prompt.strip().splitlines()[0].split()
    return " ".join(first[:words]) + ("…" if len(first) > words else "")
