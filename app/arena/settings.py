"""The Arena's inputs: the drafters and k it offers, the prompts it races (one typed prompt, a category of the
benchmark suite or the whole suite), and :func:`parse_inputs`, which turns the controls' raw values
(:class:`ArenaInputs`) into checked settings or one sentence for the user."""

from __future__ import annotations

import dataclasses

from app import render
from app.inputs import SEED, InputError, check_models, clamp_notice, number, parse_exit_layer, parse_generation_settings
from specviz.analysis.arena_rows import AUTO, BASELINE, TREE_DRAFTERS, TREE_NODES, TREE_SUFFIX
from specviz.analysis.prompts import DEFAULT_PROMPTS, example_prompt, load_prompts
from specviz.drafters.registry import choices
from specviz.runtime.policy import current_policy


K_CHOICES = ("1", "2", "4", "8", AUTO)
DEFAULT_DRAFTERS = ("ngram", "early-exit")
DEFAULT_KS = ("4",)
"""k = 4 alone: with n-gram lookup and the early exit, 6 prompts x 2 methods at 48 new tokens, which the plan put at
about 70 s (45 s – 2 min) on the project's 2-core CPU at its start-up's 33 ms step (int4), against 110 s with k = auto
too; at 124 ms a step, measured beside two other jobs, 4 min against 7 (docs/app.md, Arena). k = auto is one tick
away."""
DEFAULT_MAX_NEW_TOKENS = 48
MIN_NEW_TOKENS, MAX_NEW_TOKENS = 8, 256  # the max-new-tokens slider's range, which runs keep to (max_new_tokens_used)
MAX_NEW_TOKENS_NAME = "Max new tokens per run"  # its label, the name its messages give
DEFAULT_PROMPT = example_prompt()
"""The prompt box's text when the page opens (the app's first example, as the Live tab's), so "one prompt" runs at
once; the box's placeholder still asks for one when it is cleared."""
SOURCES = (("One prompt (typed below)", "prompt"), ("One category of the suite", "category"),
           ("The whole suite", "suite"))


TREE_NOTE = (f"Trees are greedy-only: at temperature > 0 the “:{TREE_SUFFIX}” methods draft a chain (the same "
             "as without “:tree”).")


def drafter_choices() -> list[tuple[str, str]]:
    """(label, key) for the drafters menu: every registry drafter but "none", each head drafter followed by its
    tree variant ("eagle:tree", "medusa:tree": :data:`specviz.analysis.arena_rows.TREE_NODES` nodes), its
    lookup-first variant ("eagle:lookup", "medusa:lookup") and both ("eagle:tree:lookup": the copy one branch of the
    tree)."""
    menu = []
    for c in choices():
        if c.key == BASELINE:
            continue
        menu.append((c.label, c.key))
        if c.key in TREE_DRAFTERS:
            short = c.label.split(" (")[0]
            menu.append((f"{short}, tree of {TREE_NODES} nodes (greedy)", f"{c.key}:{TREE_SUFFIX}"))
            menu.append((f"{short} + n-gram lookup first", f"{c.key}:lookup"))
            menu.append((f"{short}, tree of {TREE_NODES} nodes + lookup (greedy)", f"{c.key}:{TREE_SUFFIX}:lookup"))
    return menu


def suite() -> list[dict]:
    """The Arena's prompts: the benchmark suite (assets/suite.jsonl: 54 prompts in 8 categories, the list ``specviz
    bench`` and the README's tables read, :data:`specviz.analysis.prompts.DEFAULT_PROMPTS`) as dicts, in file order.
    (The Arena ran the Live tab's 18 examples before, a list with another category and without multi-turn.)"""
    return [{"id": p.id, "category": p.category, "prompt": p.prompt} for p in load_prompts(DEFAULT_PROMPTS)]


def category_choices() -> list[tuple[str, str]]:
    """(label, category) for the category menu: each suite category with its number of prompts, "math (6 prompts)"."""
    counts: dict[str, int] = {}
    for p in suite():
        counts[p["category"]] = counts.get(p["category"], 0) + 1
    return [(f"{c} ({render.plural(n, 'prompt')})", c) for c, n in counts.items()]


SUITE_INFO = "The benchmark suite: assets/suite.jsonl, {n} prompts in {c} categories (the README's tables use it)"
"""The Prompts radio's info line: which list "a category" and "the whole suite" read (:func:`suite`)."""


def categories() -> list[str]:
    """The suite's categories, in order of first appearance."""
    return list(dict.fromkeys(p["category"] for p in suite()))


def choose_prompts(source: str, prompt: str, category: str) -> list[dict]:
    """The prompts for a source ("prompt", "category" or "suite"); InputError with a sentence when empty."""
    if source == "prompt":
        if not prompt or not prompt.strip():
            raise InputError("The prompt is empty: type one, or pick a category or the whole suite.")
        return [{"id": "your-prompt", "category": "your prompt", "prompt": prompt.strip()}]
    prompts = suite()
    if source == "suite":
        return prompts
    if source == "category":
        chosen = [p for p in prompts if p["category"] == category]
        if not chosen:
            raise InputError(f"Pick a category of the suite ({', '.join(categories())}).")
        return chosen
    raise InputError("Pick where the prompts come from: one prompt, a category or the whole suite.")


def max_new_tokens_used(value) -> tuple[int, str | None]:
    """The max new tokens a run uses, and what to say about it: a number inside the slider's range
    [:data:`MIN_NEW_TOKENS`, :data:`MAX_NEW_TOKENS`] as it is (None: nothing to say); one typed outside it the
    nearest end, with the sentence :func:`app.messages.tell_when_clamped` shows when the box is left ("Max new tokens
    per run is at least 8 here; using 8.", :func:`app.inputs.clamp_notice`), so a run never uses a number the slider
    cannot hold. Raises InputError for anything that is not a whole number."""
    found = clamp_notice(value, MAX_NEW_TOKENS_NAME, MIN_NEW_TOKENS, MAX_NEW_TOKENS)
    if found is not None:
        return int(found[0]), found[1]
    return int(number(value, MAX_NEW_TOKENS_NAME, MIN_NEW_TOKENS, MAX_NEW_TOKENS, True)), None


@dataclasses.dataclass(frozen=True)
class ArenaInputs:
    """The Arena's controls as the Run button sends them, in the order of its API (``arena``): raw values, checked
    by :func:`parse_inputs`. The repetition penalty and min-p came last, so API clients written before them still
    work (both off)."""

    drafters: list[str] | None
    ks: list[str] | None
    source: str | None
    prompt: str | None
    category: str | None
    max_new_tokens: object
    target: str | None
    draft_model: str | None
    exit_layer: object
    temperature: object
    seed: object
    chat_template: bool
    repetition_penalty: object = 1.0
    min_p: object = 0.0


RUN_INPUTS = tuple(field.name for field in dataclasses.fields(ArenaInputs))
"""The Run button's inputs by name, in its API's order (:class:`ArenaInputs`)."""


def parse_inputs(inputs: ArenaInputs) -> dict:
    """Validated arena settings: {prompts, drafters, ks, max_new_tokens, target, draft_spec, exit_layer (None: half
    the target's layers), temperature, seed, chat_template, generation, notices}: ``generation`` holds the generation
    settings (:func:`app.inputs.parse_generation_settings`): the Arena sets the repetition penalty and min-p; the
    other processors stay off; ``notices``: sentences about values used instead of the ones given (a max new tokens
    outside the slider's range, :func:`max_new_tokens_used`). Raises InputError (or PolicyError) with one sentence
    for the user."""
    drafters = [d for d in (inputs.drafters or []) if d != BASELINE]
    target, draft_model = (inputs.target or "").strip(), (inputs.draft_model or "").strip()
    if not drafters:
        raise InputError("Pick at least one drafter.")
    if not inputs.ks:
        raise InputError("Pick at least one draft length k.")
    if "model" in drafters and not draft_model:
        raise InputError("The 'Draft model' drafter needs a draft model: a hub id or a local folder.")
    if not target:
        raise InputError("Give a target model: 'embedded', a hub id or a local folder.")
    # the operator's model policy (specviz.runtime.policy): raises PolicyError, a ValueError naming the setting
    check_models(target, draft_model if "model" in drafters else None, current_policy())
    tokens, notice = max_new_tokens_used(inputs.max_new_tokens)
    return {
        "prompts": choose_prompts(inputs.source, inputs.prompt, inputs.category), "drafters": drafters,
        "ks": list(inputs.ks), "max_new_tokens": tokens, "notices": [notice] if notice else [],
        "target": target, "draft_spec": draft_model or None, "exit_layer": parse_exit_layer(inputs.exit_layer),
        "temperature": float(number(inputs.temperature or 0.0, "Temperature", 0, 2, False)),
        "seed": int(SEED.parse(inputs.seed)), "chat_template": bool(inputs.chat_template),
        "generation": parse_generation_settings(min_p=inputs.min_p, repetition_penalty=inputs.repetition_penalty),
    }
