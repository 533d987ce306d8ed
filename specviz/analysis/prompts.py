"""The benchmark's prompts: the suite (:data:`DEFAULT_PROMPTS`, one JSON object a line: ``{"id", "category",
"prompt"}``), the app's examples (:data:`EXAMPLE_PROMPTS`), how they load and how a quick run picks one per
category."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable


DEFAULT_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "suite.jsonl"  # the benchmark suite
EXAMPLE_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "prompts.jsonl"  # the app's examples


FIRST_EXAMPLE = "rag-1"
"""The example a prompt box starts with (the Live tab's, the Arena's one prompt): grounded in its context, so n-gram
drafting shows its gain."""


def example_prompt(example_id: str = FIRST_EXAMPLE) -> str:
    """The text of the app's example ``example_id`` (:data:`EXAMPLE_PROMPTS`).

    Raises:
        ValueError: no example has that id (or the examples cannot be read: :func:`load_prompts`).
    """
    for prompt in load_prompts(EXAMPLE_PROMPTS):
        if prompt.id == example_id:
            return prompt.prompt
    raise ValueError(f"no example prompt has the id {example_id!r}")


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt: ``{"id", "category", "prompt"}`` in the JSONL suite."""

    id: str
    category: str
    prompt: str


def load_prompts(path: str | os.PathLike) -> list[Prompt]:
    """Read a JSONL prompt file, one object a line (blank lines skipped), in either of two formats, told apart
    line by line:

    - ours: ``{"id", "category", "prompt"}``, all strings (assets/suite.jsonl, assets/prompts.jsonl);
    - Spec-Bench's question.jsonl: ``{"question_id", "category", "turns"}`` (a line with "turns"), the id an
      integer (or a string), ``turns`` the user's turns as strings. Only the first turn is used, as the prompt;
      the id becomes ``str(question_id)``.

    Raises:
        ValueError: the file is missing, empty, or a line is neither (one sentence naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"prompt file not found: {path}")
    prompts: list[Prompt] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        prompt = _prompt_from_line(item, f"{path}:{number}")
        if not prompt.prompt.strip():
            raise ValueError(f"{path}:{number}: the prompt is empty")
        prompts.append(prompt)
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return prompts


def _prompt_from_line(item, where: str) -> Prompt:
    """One parsed line as a :class:`Prompt` (Spec-Bench's format when it has "turns", else ours)."""
    if isinstance(item, dict) and "turns" in item:
        question_id, turns = item.get("question_id"), item["turns"]
        id_ok = isinstance(question_id, str) or (isinstance(question_id, int) and not isinstance(question_id, bool))
        if not (id_ok and isinstance(item.get("category"), str) and isinstance(turns, list) and turns
                and all(isinstance(turn, str) for turn in turns)):
            raise ValueError(f"{where}: expected Spec-Bench's question_id (an integer), category (a string) and "
                             "turns (a non-empty list of strings)")
        return Prompt(str(question_id), item["category"], turns[0])
    if not isinstance(item, dict) or not all(isinstance(item.get(key), str) for key in ("id", "category", "prompt")):
        raise ValueError(f"{where}: expected an object with string fields id, category and prompt (or Spec-Bench's "
                         "question_id, category and turns)")
    return Prompt(item["id"], item["category"], item["prompt"])


def one_per_category(prompts: Iterable[Prompt], max_categories: int | None = None) -> list[Prompt]:
    """The first prompt of each category, in order of first appearance (at most ``max_categories``)."""
    chosen: dict[str, Prompt] = {}
    for prompt in prompts:
        if prompt.category not in chosen and (max_categories is None or len(chosen) < max_categories):
            chosen[prompt.category] = prompt
    return list(chosen.values())
