"""Parsing and validation of what visitors type, for every tab: each problem is an :class:`InputError` whose
message is one sentence for them (a :class:`specviz.runtime.policy.PolicyError`, also a ValueError, for a model the
operator does not allow).

- single fields (:func:`number`, :func:`text`, :class:`NumberField`, the early-exit layer, the operator's model
  policy in :func:`check_models`): :mod:`app.input_fields`, re-exported here;
- :class:`Settings` / :func:`parse_settings`: one generation's validated settings from one mapping of input names
  (:data:`SETTING_NAMES`) to values (the Live tab, the Classroom);
  :func:`parse_generation_settings` the logits processors and stop token ids (also the Arena's);
- :func:`fit_prompt_for`: the prompt's token ids within the target's context window and the operator's cap.

Control characters and invalid surrogates are removed from prompts and stop strings; a prompt longer than
:data:`MAX_PROMPT_CHARS` keeps only its end, and the settings' notes say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from app.input_fields import (EXIT_LAYER, FREQUENCY_PENALTY, MAX_LAYER, MAX_SEED,  # noqa: F401 - re-exported
                              MAX_STOP_STRING_CHARS, MAX_STOP_STRINGS, MIN_P, NO_REPEAT_NGRAM_SIZE, PRESENCE_PENALTY,
                              REPETITION_PENALTY, SEED, TOP_K, InputError, NumberField, check_exit_layer, check_models,
                              clamp_notice, emptied_slider_notice, empty_notice, exit_layer_notice, fit_exit_layer,
                              kept_notice,
                              fit_loaded_exit_layer,
                              number, number_notice, parse_exit_layer, parse_stop_strings, target_layers, text)
from app.input_fields import _or_default
from specviz.core.engine import MAX_K, GenerationConfig
from specviz.core.generation_settings import (MAX_BIASED_TOKENS, check_token_ids, parse_logit_bias, parse_token_ids,
                                              settings_summary, with_banned)
from specviz.core.verify import SamplingConfig
from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE
from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW
from specviz.drafters.registry import HEAD_KEYS, drafter_keys
from specviz.runtime.policy import Policy, current_policy

MAX_PROMPT_CHARS = 200_000  # longer prompts keep only their end (before tokenizing: a pasted book stays cheap)
MAX_TREE_NODES = 32  # the "Tree nodes" slider's top
MAX_CONFIDENCE = 0.95  # the "Confidence gate" slider's top
MAX_NEW_TOKENS_HINT = "the server's limit, set by the operator with SPECVIZ_MAX_NEW_TOKENS"  # who caps it
HEAD_DRAFTERS = HEAD_KEYS  # the drafters with trained heads: trees, the confidence gate, lookup first
GATED_DRAFTERS = (*HEAD_KEYS, "distilled", "model")  # the drafters the Live tab's confidence gate reaches
DISTILLED_GATE = 0.2
"""The distilled draft model's confidence gate in the Live tab (and the Generate API) unless the visitor sets one:
measured 1.16x standard decoding at k = 4 on a 2-core CPU, against 1.00x without it (docs/heads.md, "a confidence
gate for the distilled draft model"); the CLI, the bench, the Arena and the Classroom draft it ungated (always k)."""
TREE_SAMPLING_NOTE = "Trees are greedy-only: this sampling run (temperature > 0) drafts a chain."
LOOKAHEAD_DEFAULTS = (DEFAULT_WINDOW, DEFAULT_NGRAM, DEFAULT_CANDIDATES)  # W, N, G (a measured sweep, docs)
MAX_WINDOW, MAX_NGRAM, MAX_CANDIDATES = 16, 8, 16  # the lookahead sliders' tops (N-1 <= MAX_K)
LOOKAHEAD_SAMPLING_NOTE = ("Lookahead with sampling verifies one pool n-gram per pass (as a one-hot draft), so G "
                           "counts only in greedy mode.")

SETTING_NAMES = ("prompt", "target", "drafter", "draft_model", "exit_layer", "k", "adaptive_k", "temperature",
                 "top_p", "top_k", "seed", "max_new_tokens", "stop_strings", "chat_template", "tree_nodes",
                 "confidence", "lookup", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty",
                 "no_repeat_ngram_size", "logit_bias", "banned_ids", "stop_token_ids", "window", "ngram",
                 "candidates", "weights")
"""The names of a generation's inputs, as :func:`parse_settings` reads them from one mapping (the Live tab's controls
in this order, :data:`app.live.INPUTS`)."""
OPTIONAL_SETTINGS = {"tree_nodes": 0, "confidence": None, "lookup": False, "min_p": 0.0, "repetition_penalty": 1.0,
                     "frequency_penalty": 0.0, "presence_penalty": 0.0, "no_repeat_ngram_size": 0, "logit_bias": "",
                     "banned_ids": "", "stop_token_ids": "", "window": None, "ngram": None, "candidates": None,
                     "weights": None}
"""The inputs a mapping may leave out, with the value taken then (added after the first API clients were written:
a chain with the default confidence gate, no lookup, no penalties, lookahead's default W, N, G, and the target's
weights in the operator's format, :func:`parse_weights`)."""


def fit_settings_exit_layer(settings: Settings, target) -> tuple[Settings, str | None]:
    """``settings`` with its early-exit layer fitted to the loaded ``target`` (:func:`fit_loaded_exit_layer`), the
    note added to ``settings.notes`` (said in every status of the run) and returned; ``settings`` itself
    and None when nothing changed. Raises InputError as :func:`fit_loaded_exit_layer` does."""
    layer, note = fit_loaded_exit_layer(settings.exit_layer, target)
    if note is None:
        return settings, None
    return replace(settings, exit_layer=layer, notes=(*settings.notes, note)), note


# ------------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """Validated UI inputs for one generation."""

    prompt: str
    target: str
    drafter: str
    draft_model: str | None
    exit_layer: int | None
    k: int
    k_schedule: str  # "fixed", "heuristic" (adaptive k) or "auto" (cost-aware), see K_SCHEDULES
    temperature: float
    top_p: float
    top_k: int
    seed: int
    max_new_tokens: int
    stop_strings: tuple[str, ...]
    chat_template: bool
    notes: tuple[str, ...] = ()  # what was changed in the input (cleaned, cut), said in the status
    max_prompt_tokens: int | None = None  # the operator's cap (SPECVIZ_MAX_PROMPT_TOKENS); None: the window only
    tree_nodes: int = 0  # eagle / medusa: nodes of a draft tree (0 = a chain)
    min_confidence: float = DEFAULT_MIN_CONFIDENCE  # GATED_DRAFTERS: the confidence gate (0 = always k tokens)
    lookup: bool = False  # eagle / medusa: n-gram lookup first, the head when nothing repeats
    # the logits processors (specviz.core.verify.SamplingConfig; target and draft alike) and stop token ids
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()  # the banned token ids included, as -inf
    stop_token_ids: tuple[int, ...] = ()
    # lookahead: W window positions, N n-gram size (k = N-1, the candidates' length), G candidates per pass
    window: int = LOOKAHEAD_DEFAULTS[0]
    ngram: int = LOOKAHEAD_DEFAULTS[1]
    candidates: int = LOOKAHEAD_DEFAULTS[2]
    # the target's weight format (specviz.runtime.weights.FORMATS): the baseline and the speculative run both use it
    weights: str = "float32"

    @property
    def sampling(self) -> SamplingConfig:
        """The run's sampling settings and logits processors."""
        return SamplingConfig(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, seed=self.seed,
                              min_p=self.min_p, repetition_penalty=self.repetition_penalty,
                              frequency_penalty=self.frequency_penalty, presence_penalty=self.presence_penalty,
                              no_repeat_ngram_size=self.no_repeat_ngram_size, logit_bias=self.logit_bias)

    @property
    def settings_changed(self) -> str:
        """The generation settings off their defaults besides temperature and seed, in words ("" when none)."""
        return settings_summary(self.sampling, self.stop_token_ids)

    def config(self) -> GenerationConfig:
        """The engine's configuration for these settings."""
        return GenerationConfig(max_new_tokens=self.max_new_tokens, sampling=self.sampling, k=self.k,
                                adaptive_k=self.k_schedule == "heuristic", auto_k=self.k_schedule == "auto",
                                stop_strings=self.stop_strings, stop_token_ids=self.stop_token_ids)

    @property
    def adaptive_k(self) -> bool:
        """Whether k changes during the run (the heuristic or k = auto)."""
        return self.k_schedule != "fixed"

    @property
    def greedy(self) -> bool:
        """Temperature 0: argmax decoding."""
        return self.temperature == 0

    @property
    def gate(self) -> float:
        """The confidence gate in [0, 1) the run's drafter drafts with: ``min_confidence`` for
        :data:`GATED_DRAFTERS`, 0 (always k) for the others."""
        return self.min_confidence if self.drafter in GATED_DRAFTERS else 0.0

    @property
    def drafted_tree_nodes(self) -> int:
        """The tree size the drafter gets: ``tree_nodes`` in greedy mode, 0 (a chain) when sampling."""
        return self.tree_nodes if self.greedy else 0


EMPTY_PROMPT = "The prompt is empty: type something first (or start from an example or a walkthrough)."
"""What a run with an empty prompt is refused with (the Live tab clears it once the prompt is not empty:
:mod:`app.live.prompt_check`)."""


def _prompt(value, notes: list[str]) -> str:
    """The prompt, cleaned (control characters out) and cut to its last :data:`MAX_PROMPT_CHARS` characters;
    what was changed goes to ``notes``. Raises InputError for an empty prompt."""
    from specviz.runtime.models import sanitize_prompt

    prompt = text(value, "The prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        notes.append(f"The prompt had {len(prompt):,} characters: only its last {MAX_PROMPT_CHARS:,} were read.")
        prompt = prompt[-MAX_PROMPT_CHARS:]
    clean = sanitize_prompt(prompt)
    if not clean.text.strip():
        raise InputError(EMPTY_PROMPT)
    if clean.note:
        notes.append(clean.note)
    return clean.text


def _drafter(value, draft_model) -> tuple[str, str | None]:
    """(drafter key, draft model spec or None): the key must be registered (read at call time, so a drafter
    registered later is accepted); only the 'model' drafter keeps a draft model, and it needs one."""
    drafter = text(value, "The drafter")
    if drafter not in drafter_keys():
        raise InputError(f"Unknown drafter {drafter!r}: choose one of {', '.join(drafter_keys())}.")
    spec = text(draft_model, "The draft model").strip() or None
    if drafter != "model":
        return drafter, None
    if spec is None:
        raise InputError("The 'Draft model' drafter needs a draft model: a hub id or a local folder.")
    return drafter, spec


def default_gate(drafter: str) -> float:
    """The confidence gate a drafter runs with in the Live tab when none is given: the heads'
    :data:`~specviz.drafters.heads.DEFAULT_MIN_CONFIDENCE` (0.15) for eagle and medusa, :data:`DISTILLED_GATE` (0.2)
    for the distilled draft model, 0 (always k) for any other drafter (a ``model`` draft model: nothing measured)."""
    if drafter in HEAD_DRAFTERS:
        return DEFAULT_MIN_CONFIDENCE
    return DISTILLED_GATE if drafter == "distilled" else 0.0


def _head_options(drafter: str, values: Mapping[str, object], temperature: float,
                  notes: list[str], fit_whole: bool = False) -> tuple[int, float, bool]:
    """(tree nodes, confidence gate, lookup first) from ``values``' ``tree_nodes``, ``confidence`` and ``lookup``:
    the gate for :data:`GATED_DRAFTERS` (None or "" = :func:`default_gate`), trees and lookup for the head drafters
    (eagle, medusa); (0, :func:`default_gate`, False) for the others. A tree with sampling adds
    :data:`TREE_SAMPLING_NOTE` to ``notes``; ``fit_whole``: a fraction of tree nodes runs rounded, said in
    ``notes`` (:func:`whole_setting`)."""
    tree_nodes, confidence = values["tree_nodes"], values["confidence"]
    gate = default_gate(drafter)
    if drafter not in GATED_DRAFTERS:
        return 0, gate, False
    if confidence not in (None, ""):
        gate = float(number(confidence, "Confidence gate", 0, MAX_CONFIDENCE, False))
    if drafter not in HEAD_DRAFTERS:
        return 0, gate, False
    nodes = 0
    if tree_nodes not in (None, ""):
        nodes = whole_setting(tree_nodes, "Tree nodes", (0, MAX_TREE_NODES), notes if fit_whole else None)
        if nodes and temperature > 0:
            notes.append(TREE_SAMPLING_NOTE)
    return nodes, gate, bool(values["lookup"])


def _with_lookahead(window, ngram, candidates, settings: Settings, fit_whole: bool = False) -> Settings:
    """``settings`` with lookahead's W, N and G checked (window 1..:data:`MAX_WINDOW`, n-gram size
    2..:data:`MAX_NGRAM`, candidates 1..:data:`MAX_CANDIDATES`; None or "" = the default) and, for the lookahead
    drafter, k = N-1 (its candidates' length), fixed, or with k = auto gated (each pass a full lookahead pass or a
    plain step, :class:`~specviz.core.draft_length.GateK`); with sampling a note says one candidate is verified per
    pass; ``fit_whole``: a fraction runs rounded, said in the notes (:func:`whole_setting`). Other drafters keep the
    defaults. Raises InputError."""
    if settings.drafter != "lookahead":
        return settings
    said: list[str] | None = [] if fit_whole else None
    w = whole_setting(_or_default(window, LOOKAHEAD_DEFAULTS[0]), "Window W", (1, MAX_WINDOW), said)
    n = whole_setting(_or_default(ngram, LOOKAHEAD_DEFAULTS[1]), "N-gram size N", (2, MAX_NGRAM), said)
    g = whole_setting(_or_default(candidates, LOOKAHEAD_DEFAULTS[2]), "Candidates G", (1, MAX_CANDIDATES), said)
    notes = settings.notes + tuple(said or ())
    if not settings.greedy and g > 1:
        notes += (LOOKAHEAD_SAMPLING_NOTE,)
    schedule = "auto" if settings.k_schedule == "auto" else "fixed"
    return replace(settings, window=w, ngram=n, candidates=g, k=n - 1, k_schedule=schedule, notes=notes)


def parse_weights(value) -> str:
    """The target's weight format from the "Weights" control: one of :data:`specviz.runtime.weights.FORMATS` (case
    and spaces ignored); None or "" = the operator's (``SPECVIZ_WEIGHTS``, else float32,
    :func:`app.weights_setting.operator_weights`). Raises InputError (one sentence) for anything else."""
    from app.weights_setting import operator_weights
    from specviz.runtime.weights import FORMATS

    if value is None or (isinstance(value, str) and not value.strip()):
        return operator_weights()
    fmt = value.strip().lower() if isinstance(value, str) else value
    if fmt not in FORMATS:
        raise InputError(f"Unknown weight format {value!r}: choose {', '.join(FORMATS[:-1])} or {FORMATS[-1]}.")
    return fmt


K_SCHEDULES = {
    "fixed": "k stays as set",
    "heuristic": "adaptive k: +1 after a fully accepted pass, −1 after a rejection",
    "auto": "k = auto: each pass's k (0 = no draft) chosen from this run's measured pass costs and acceptance",
}


def parse_k_schedule(value) -> str:
    """"fixed", "heuristic" or "auto" from the app's choice (a bool means the heuristic on or off)."""
    if isinstance(value, bool) or value is None:
        return "heuristic" if value else "fixed"
    key = str(value).strip().lower().split(" ")[0]
    if key not in K_SCHEDULES:
        raise InputError(f"Unknown draft-length schedule {value!r}: choose fixed, heuristic or auto.")
    return key


def _token_list(value, parse, name: str):
    """A typed list of token ids (or id:bias pairs) through ``parse``; its ValueError becomes one sentence."""
    try:
        return parse(text(value, name))
    except ValueError as error:
        message = str(error)
        raise InputError(f"{name}: {message[message.find(':') + 1:].strip()}.") from None


GENERATION_SETTING_NAMES = ("min_p", "repetition_penalty", "frequency_penalty", "presence_penalty",
                            "no_repeat_ngram_size", "logit_bias", "banned_ids", "stop_token_ids")
"""The inputs of :func:`parse_generation_settings`, in the order of its parameters."""


def parse_generation_settings(min_p=0.0, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0,
                              no_repeat_ngram_size=0, logit_bias="", banned_ids="", stop_token_ids="") -> dict:
    """The logits processors and stop token ids of the "Sampling and stopping" fields, checked: the :class:`Settings`
    fields of the same names (banned ids join ``logit_bias`` as -inf). Empty boxes take the defaults (off).
    Ranges: min-p in [0, 0.99], repetition penalty in [0.01, 10], frequency and presence penalties in [-2, 2] (as
    OpenAI's), no-repeat n-gram size in 0..64; a logit bias is "id:bias, ..." with a finite bias or -inf.

    Raises:
        InputError: one sentence naming the field.
    """
    bias = _token_list(logit_bias, parse_logit_bias, "The logit bias")
    banned = _token_list(banned_ids, lambda t: parse_token_ids(t, "banned ids", MAX_BIASED_TOKENS),
                         "The banned token ids")
    try:
        bias = with_banned(bias, banned)
    except ValueError as error:
        raise InputError(f"{str(error)[0].upper()}{str(error)[1:]}.") from None
    return {
        "min_p": float(MIN_P.parse(min_p)), "repetition_penalty": float(REPETITION_PENALTY.parse(repetition_penalty)),
        "frequency_penalty": float(FREQUENCY_PENALTY.parse(frequency_penalty)),
        "presence_penalty": float(PRESENCE_PENALTY.parse(presence_penalty)),
        "no_repeat_ngram_size": int(NO_REPEAT_NGRAM_SIZE.parse(no_repeat_ngram_size)),
        "logit_bias": bias, "stop_token_ids": _token_list(stop_token_ids, parse_token_ids, "The stop token ids"),
    }


def check_settings_vocab(settings: Settings, target) -> None:
    """Raise InputError when a biased, banned or stop token id is not an id of the loaded ``target``."""
    vocab = min(target.vocab_size, getattr(target, "num_token_ids", None) or target.vocab_size)
    try:
        check_token_ids(settings.sampling, settings.stop_token_ids, vocab)
    except ValueError as error:
        message = str(error)
        raise InputError(f"{message[0].upper()}{message[1:]}.") from None


def setting_values(values: Mapping[str, object]) -> dict[str, object]:
    """Every input of a generation by name (:data:`SETTING_NAMES`): ``values`` with the optional ones it leaves out
    at :data:`OPTIONAL_SETTINGS`. Raises InputError for an input that is missing (and not optional) or unknown."""
    if not isinstance(values, Mapping):
        raise InputError("The settings must be given by name (a mapping of input names to values).")
    unknown = [name for name in values if name not in SETTING_NAMES]
    if unknown:
        raise InputError(f"Unknown setting {unknown[0]!r}: the settings are {', '.join(SETTING_NAMES)}.")
    full = {**OPTIONAL_SETTINGS, **values}
    missing = [name for name in SETTING_NAMES if name not in full]
    if missing:
        raise InputError(f"The setting {missing[0]!r} is missing.")
    return full


EMPTY_TARGET_NOTE = "The target model was empty, so the embedded default (SmolLM2-135M-Instruct) ran."


def parse_settings(values: Mapping[str, object], policy: Policy | None = None, fit_layer: bool = False,
                   fit_whole: bool = False) -> Settings:
    """Check every input of a generation, given by name in ``values`` (:data:`SETTING_NAMES`; the optional ones at
    :data:`OPTIONAL_SETTINGS` when left out, :func:`setting_values`). ``confidence`` (the confidence gate, in [0, 0.95];
    None or "" = the drafter's default, :func:`default_gate`) counts for :data:`GATED_DRAFTERS` (eagle, medusa, the
    distilled and ``model`` draft models); ``tree_nodes`` and ``lookup`` (n-gram lookup first) for the head drafters
    (eagle, medusa). ``min_p`` .. ``stop_token_ids``: the generation settings
    (:func:`parse_generation_settings`). ``window``, ``ngram``, ``candidates``: lookahead's W, N and G
    (:func:`_with_lookahead`; its k becomes N-1: fixed, or gated with k = auto). ``weights``: the target's weight
    format (:func:`parse_weights`; left out: the operator's). ``policy`` defaults to the environment's
    (:func:`specviz.runtime.policy.current_policy`). ``fit_layer``: an early-exit layer outside the target's layers
    (as far as they are known before loading, :func:`target_layers`) is replaced by the one its box's status line names,
    with the same sentence as a note (:func:`fit_exit_layer`), not refused. ``fit_whole``: a fraction typed for k,
    max new tokens, tree nodes or lookahead's W, N and G within their range runs rounded (halves up), with the
    sentence their box says as a note (:func:`whole_setting`), not refused.

    Raises:
        InputError: a message for the user, one sentence.
        specviz.runtime.policy.PolicyError: a model the operator does not allow (naming the setting).
    """
    v = setting_values(values)
    policy = policy or current_policy()
    notes: list[str] = []
    prompt = _prompt(v["prompt"], notes)
    target = text(v["target"], "The target model").strip()
    if not target:  # runs the default, and says so: the box stays empty while every other emptied box is said
        target = "embedded"
        notes.append(EMPTY_TARGET_NOTE)
    drafter, draft_model = _drafter(v["drafter"], v["draft_model"])
    check_models(target, draft_model, policy)
    layer = None
    if drafter == "early-exit" and fit_layer:
        layer, note = fit_exit_layer(v["exit_layer"], *target_layers(target))
        notes.extend([note] if note else [])
    elif drafter == "early-exit":
        layer = parse_exit_layer(v["exit_layer"])
    temperature = float(number(v["temperature"], "Temperature", 0, 5, False))
    nodes, gate, lookup = _head_options(drafter, v, temperature, notes, fit_whole)
    new_tokens = whole_setting(v["max_new_tokens"], "Max new tokens", (1, policy.max_new_tokens),
                               notes if fit_whole else None, hint=MAX_NEW_TOKENS_HINT)
    return _with_lookahead(v["window"], v["ngram"], v["candidates"], fit_whole=fit_whole, settings=Settings(
        prompt=prompt, target=target, drafter=drafter, draft_model=draft_model, exit_layer=layer,
        k=whole_setting(v["k"], "Draft length k", (1, MAX_K), notes if fit_whole else None),
        k_schedule=parse_k_schedule(v["adaptive_k"]),
        temperature=temperature,
        top_p=float(number(_or_default(v["top_p"], 1.0), "Top-p", 0.01, 1, False)),
        top_k=int(TOP_K.parse(v["top_k"])), seed=int(SEED.parse(v["seed"])),
        max_new_tokens=int(new_tokens), stop_strings=parse_stop_strings(v["stop_strings"]),
        chat_template=bool(v["chat_template"]), notes=tuple(notes), max_prompt_tokens=policy.max_prompt_tokens,
        tree_nodes=nodes, min_confidence=gate, lookup=lookup, weights=parse_weights(v["weights"]),
        **parse_generation_settings(*(v[name] for name in GENERATION_SETTING_NAMES)),
    ))


def whole_setting(value, name: str, bounds: tuple[int, int], notes: list[str] | None, hint: str = "") -> int:
    """A whole-number setting of a slider of whole steps (k, max new tokens, tree nodes, W, N, G) in ``bounds``
    (low, high). With ``notes`` (the Live page's Generate), a fraction within the bounds is rounded as the slider's box rounds it
    (halves up: 2.5 runs 3) and said there with the box's own sentence (:func:`app.input_fields.clamp_notice`: "Draft
    length k must be a whole number (got 2.5); using 3."): a trial typed k = 2.5 and pressed Generate at once, and
    the box showed 3 while the run was refused "(got 2.5)"; the Generate API (``/generate``) runs the same way.
    Without ``notes`` (the Classroom, the hint, the start-up run) a fraction is refused. Raises InputError for what
    is not a number, or a number out of the bounds (``hint`` added above them)."""
    low, high = bounds
    if notes is not None:
        found = clamp_notice(value, name, low, high, hint, whole=True)
        if found is not None and low <= float(value) <= high:  # a fraction in range; out of range stays refused
            notes.append(found[1])
            return int(found[0])
    return int(number(value, name, low, high, True, hint=hint))


# ------------------------------------------------------------------------------------------------- the prompt


def _prompt_budget(settings: Settings, target) -> tuple[int | None, list[str]]:
    """The most prompt tokens that fit (None: no limit) and the limit that sets it, in words. Raises InputError
    when max new tokens alone do not fit the target's context window."""
    from specviz.runtime.models import context_window

    window = context_window(target)
    budget, limits = None, []
    drafts = MAX_K if settings.adaptive_k else settings.k
    if settings.drafter == "lookahead":  # the window's last guess sits W + N - 2 places after the last token
        drafts = max(drafts, settings.window + settings.ngram - 2)
    if window is not None:
        reserve = settings.max_new_tokens + drafts + 1
        budget = window - reserve
        limits.append(f"the context window of {window:,} tokens less {reserve:,} for the new and drafted tokens")
        if budget < 1:
            most = max(1, window - drafts - 1 - 64)
            raise InputError(f"Max new tokens ({settings.max_new_tokens}) does not fit the target's context window "
                             f"({window:,} tokens, drafts and prompt included): choose at most {most:,}.")
    if settings.max_prompt_tokens is not None and (budget is None or settings.max_prompt_tokens < budget):
        budget = settings.max_prompt_tokens
        limits = [f"the server's limit of {budget:,} prompt tokens (SPECVIZ_MAX_PROMPT_TOKENS)"]
    return budget, limits


class FittedPrompt(NamedTuple):
    """What :func:`fit_prompt_for` gives: the prompt's ``ids`` the target reads, the ``note`` to show ("" when
    nothing needs saying) and ``cut``, the cut in one short clause for the phone status ("" when the prompt is
    whole; :meth:`specviz.runtime.models.PromptFit.cut_summary`)."""

    ids: list[int]
    note: str
    cut: str


def fit_prompt_for(settings: Settings, target, drafter=None) -> FittedPrompt:
    """The prompt's ids within what fits: the target's context window less the new tokens and the draft tokens a
    pass may add, and the operator's ``SPECVIZ_MAX_PROMPT_TOKENS``. A longer prompt loses its start (the chat
    template stays whole).

    Only the target sets the budget: the drafter never changes what the target reads (the baseline reads the same
    ids). ``drafter`` is used only to tell the user when a draft model's own, shorter window ends during the run
    (it then stops drafting and the target decodes alone), and that a draft model with another tokenizer has its
    drafts re-tokenized (:func:`specviz.drafters.model.drafter_note`).

    Returns a :class:`FittedPrompt` (ids, note, cut): the note is "" when nothing needs saying, else one sentence
    per fact (the cut, with how
    many tokens left the start, the first words kept and, for a chat, that the start of the request is gone:
    :meth:`specviz.runtime.models.PromptFit.cut_note`; the draft model's window, the re-tokenized drafts). Raises
    InputError (one sentence) when max new tokens alone do not fit the window, or for a prompt that cannot be
    encoded (empty, or a typed control token the tokenizer cannot keep as text)."""
    from specviz.drafters.model import drafter_note
    from specviz.runtime.models import PromptTooLongError, fit_prompt

    budget, limits = _prompt_budget(settings, target)
    try:
        fit = fit_prompt(target.tokenizer, settings.prompt, budget, use_chat_template=settings.chat_template)
    except PromptTooLongError as error:
        raise InputError(f"{error} Lower max new tokens.") from None
    except ValueError as error:  # an empty prompt, an unencodable control token: already one sentence
        raise InputError(str(error)) from None
    notes = []
    if fit.truncated:
        notes.append(f"The prompt was too long ({fit.original_tokens:,} tokens): its start was cut, keeping its "
                     f"last part ({len(fit.ids):,} tokens with the chat template) to fit {limits[0]}: "
                     + fit.cut_note())
    notes.append(drafter_note(drafter, len(fit.ids), settings.max_new_tokens))
    return FittedPrompt(fit.ids, " ".join(note for note in notes if note), fit.cut_summary())
