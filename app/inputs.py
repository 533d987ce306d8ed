"""Parsing and validation of what visitors type, for every tab: each problem is an :class:`InputError` whose
message is one sentence for them (a :class:`specviz.policy.PolicyError`, also a ValueError, for a model the
operator does not allow).

- :func:`number` (bounds written readably), :func:`text`, :func:`parse_stop_strings`, :func:`parse_exit_layer`
  and :func:`check_exit_layer`: single fields; :class:`NumberField` (``TOP_K``, ``SEED``, ...) holds a number box's
  rule, read by the Run path and by :func:`number_notice` when the box is left (:func:`empty_notice` when it was
  emptied; :func:`exit_layer_notice` for the early-exit layer, against the target's layers once they are known);
- :func:`check_models`: the one place the operator's model policy is enforced for visitors;
- :class:`Settings` / :func:`parse_settings`: one generation's validated settings (the Live tab, the Classroom);
  :func:`parse_generation_settings` the logits processors and stop token ids (also the Arena's);
- :func:`fit_prompt_for`: the prompt's token ids within the target's context window and the operator's cap.

Control characters and invalid surrogates are removed from prompts and stop strings; a prompt longer than
:data:`MAX_PROMPT_CHARS` keeps only its end, and the settings' notes say so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from specviz.core.engine import MAX_K, GenerationConfig
from specviz.core.generation_settings import (MAX_BIASED_TOKENS, check_token_ids, parse_logit_bias, parse_token_ids,
                                              settings_summary, with_banned)
from specviz.core.verify import SamplingConfig
from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE
from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW
from specviz.drafters.registry import HEAD_KEYS, drafter_keys
from specviz.policy import Policy, current_policy

MAX_PROMPT_CHARS = 200_000  # longer prompts keep only their end (before tokenizing: a pasted book stays cheap)
MAX_STOP_STRINGS = 16
MAX_STOP_STRING_CHARS = 200
MAX_TREE_NODES = 32  # the "Tree nodes" slider's top
MAX_CONFIDENCE = 0.95  # the "Confidence gate" slider's top
MAX_SEED = 2**53 - 1  # the largest whole number a browser (a 64-bit float) holds exactly: a larger seed would come back changed
MAX_NEW_TOKENS_HINT = "the server's limit, set by the operator with SPECVIZ_MAX_NEW_TOKENS"  # who caps it
MAX_LAYER = 10_000  # a layer number beyond any model's (the model's own bound: check_exit_layer, layer_count)
HEAD_DRAFTERS = HEAD_KEYS  # the drafters with trained heads: trees, the confidence gate, lookup first
TREE_SAMPLING_NOTE = "Trees are greedy-only: this sampling run (temperature > 0) drafts a chain."
LOOKAHEAD_DEFAULTS = (DEFAULT_WINDOW, DEFAULT_NGRAM, DEFAULT_CANDIDATES)  # W, N, G (a measured sweep, docs)
MAX_WINDOW, MAX_NGRAM, MAX_CANDIDATES = 16, 8, 16  # the lookahead sliders' tops (N-1 <= MAX_K)
LOOKAHEAD_SAMPLING_NOTE = ("Lookahead with sampling verifies one pool n-gram per pass (as a one-hot draft), so G "
                           "counts only in greedy mode.")


class InputError(ValueError):
    """Bad input from the user; the message is one sentence for them."""


# ------------------------------------------------------------------------------------------------- fields


def _bound(x: float, integer: bool) -> str:
    """A bound as people write it: 10,000 (thousands separated from 10,000 on), 0.05, 16."""
    if not (integer or x == int(x)):
        return f"{x:g}"
    return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))


def number(value, name: str, low: float, high: float, integer: bool, hint: str = "") -> float | int:
    """``value`` as a number in [low, high] (an int when ``integer``). ``hint`` is added to the message when the
    value is above ``high`` (e.g. who sets that limit). Raises InputError: "{name} must be a number.", "... must
    be between {low} and {high} (got {value})." or "... must be a whole number (got {value})."."""
    if isinstance(value, bool):
        value = int(value)
    try:
        got = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name} must be a number.") from None
    if got != got or not low <= got <= high:
        shown = value if len(str(value)) <= 20 else str(value)[:20] + "…"
        above = f"; {hint}" if hint and got == got and got > high else ""
        raise InputError(f"{name} must be between {_bound(low, integer)} and {_bound(high, integer)} "
                         f"(got {shown}{above}).")
    if integer:
        if got != int(got):
            raise InputError(f"{name} must be a whole number (got {value}).")
        return int(got)
    return got


def clamp_notice(value, name: str, low: float, high: float, hint: str = "") -> tuple[float, str] | None:
    """What a slider does with a number typed into its box outside [low, high], said in words: Gradio's slider
    quietly sets itself to the nearest end when the box is left. Returns (the value used, one sentence such as "Max
    new tokens is at most 1024 here; using 1024."), ``hint`` (who sets that end) added in brackets after an upper
    bound; None for a value in range, an empty box or anything that is not a number."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        typed = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if typed != typed or low <= typed <= high:
        return None
    used = high if typed > high else low
    used = int(used) if float(used).is_integer() else used
    shown = _bound(used, isinstance(used, int))
    if typed > high:
        why = f" ({hint})" if hint else ""
        return used, f"{name} is at most {shown} here{why}; using {shown}."
    return used, f"{name} is at least {shown}; using {shown}."


def _or_default(value, default):
    """``default`` for an empty box (None or ""), else ``value``."""
    return default if value in (None, "") else value


@dataclass(frozen=True)
class NumberField:
    """The rule of one number box, shared by the Run path (:meth:`parse`) and the check when the box is left
    (:func:`number_notice`): its name in messages, its range [low, high], whole numbers only or not, and the value
    an empty box takes; ``outside``: the value used for one outside [low, high] (None: the nearest end),
    ``default_note``: what the default means, said after it ("0 (half the target's layers)"), and ``zero``: for a
    field whose range leaves 0 out although 0 means "off" for its neighbours (the repetition penalty, off at 1), the
    value that is off: a typed 0 is refused by the run with "(got 0; 1 is off)" and the box's check uses it."""

    name: str
    low: float
    high: float
    integer: bool
    default: float = 0
    hint: str = ""
    outside: float | None = None
    default_note: str = ""
    zero: float | None = None

    def parse(self, value) -> float | int:
        """``value`` checked by :func:`number` (``default`` for an empty box). Raises InputError; a 0 typed into a
        field with an ``zero`` value says which value is off: "Repetition penalty must be between 0.01 and 10 (got
        0; 1 is off)."."""
        value = _or_default(value, self.default)
        if self._typed_zero(value):
            raise InputError(f"{self.name} must be between {_bound(self.low, self.integer)} and "
                             f"{_bound(self.high, self.integer)} (got {float(value):g}; {_bound(self.zero, self.integer)} "
                             f"is off).")
        return number(value, self.name, self.low, self.high, self.integer, self.hint)

    def _typed_zero(self, value) -> bool:
        """Whether ``value`` is a 0 outside the range of a field whose off value is ``zero`` (not 0)."""
        if self.zero is None or isinstance(value, bool) or self.low <= 0 <= self.high:
            return False
        try:
            return float(value) == 0
        except (TypeError, ValueError, OverflowError):
            return False

    def nearest(self, value) -> float | int:
        """The allowed value nearest ``value``: clamped into [low, high] and, for a whole-number field, rounded as
        Gradio rounds a box of precision 0; ``default`` for what is not a number."""
        try:
            got = float(value)
        except (TypeError, ValueError, OverflowError):
            return self.default
        if got != got:
            return self.default
        if self._typed_zero(got):  # 0 meant "off": use the value that is off, not the range's nearest end
            return int(self.zero) if self.integer else float(self.zero)
        if self.outside is not None and not self.low <= got <= self.high:
            return int(self.outside) if self.integer else float(self.outside)
        if got >= self.high or got <= self.low:
            end = self.high if got >= self.high else self.low
            return int(end) if self.integer else float(end)
        return int(round(got)) if self.integer else got


TOP_K = NumberField("Top-k", 0, 1_000_000, True, 0)
SEED = NumberField("Seed", 0, MAX_SEED, True, 0)
MIN_P = NumberField("Min-p", 0, 0.99, False, 0.0)
REPETITION_PENALTY = NumberField("Repetition penalty", 0.01, 10, False, 1.0, default_note="off",
                                 zero=1.0)  # a typed 0 means off, which is 1 here (0.01 would force repeats)
FREQUENCY_PENALTY = NumberField("Frequency penalty", -2, 2, False, 0.0)  # as OpenAI's
PRESENCE_PENALTY = NumberField("Presence penalty", -2, 2, False, 0.0)
NO_REPEAT_NGRAM_SIZE = NumberField("No-repeat n-gram size", 0, 64, True, 0)
EXIT_LAYER = NumberField("The early-exit layer", 0, MAX_LAYER, True, 0, outside=0,  # the model's: check_exit_layer
                         default_note="half the target's layers")


def number_notice(value, field: NumberField, parse=None) -> tuple[float | int, str] | None:
    """What a number box left with a value its run would refuse says, before the run: (the value used instead,
    :meth:`NumberField.nearest`; the Run path's own message, from ``parse`` (default :meth:`NumberField.parse`), and
    "Using {value}."). None for a value the run accepts, or an empty box (it takes the default). Never raises."""
    if value is None or value == "":
        return None
    try:
        (parse or field.parse)(value)
        return None
    except InputError as error:
        message = str(error)
    except Exception:  # noqa: BLE001 - a payload no parser expects: say it is no number
        message = f"{field.name} must be a number."
    used = field.nearest(value)
    return used, f"{message} Using {_using(used, field)}."


def _using(value, field: NumberField) -> str:
    """``value`` as a notice's "Using ..." says it: "29", or "0 (half the target's layers)" for a default that has a
    meaning of its own (:attr:`NumberField.default_note`)."""
    note = f" ({field.default_note})" if field.default_note and value == field.default else ""
    return f"{_bound(value, field.integer)}{note}"


def empty_notice(field: NumberField) -> tuple[float | int, str]:
    """What an emptied number box says when it is left: (its default, put back in the box; "Seed: the box was left
    empty, so it is set back to its default, 0."). A run reads an empty box as the default too; this shows it."""
    default = int(field.default) if field.integer else field.default
    return default, f"{field.name}: the box was left empty, so it is set back to its default, {_using(default, field)}."


def exit_layer_notice(value, target_spec: str | None = None) -> tuple[int, str] | None:
    """What the early-exit layer box says when left (as :func:`number_notice`): :func:`fit_exit_layer` against the
    real layer count of the target ``target_spec`` names ("" means embedded) when it is known without loading
    anything (:func:`target_layers`), so the toast says what the run will do ("The early-exit layer must be 0 (half
    the target's layers) or a layer from 1 to 29 for SmolLM2-135M-Instruct, which has 30 layers (got 100). Using
    29."; below 1: 0, the default). Unknown, only the box's own range is known: a number beyond any model's uses 0.
    None for a value the run accepts or an empty box. Never raises."""
    if value is None or value == "":
        return None
    layers, label = target_layers(target_spec) if target_spec is not None else (None, None)
    try:
        used, message = fit_exit_layer(value, layers, label)
    except InputError:  # no number: the box's own message
        return number_notice(value, EXIT_LAYER, parse_exit_layer)
    return None if message is None else (used or 0, message)


def target_layers(target_spec: str | None) -> tuple[int | None, str | None]:
    """(layer count, label) of the target ``target_spec`` names ("" or None: embedded), when known without loading
    anything (:func:`specviz.models.layer_count`: the loaded model, else its config.json in the converted embedded
    folder, the local folder or the local Hugging Face cache; no network); (None, None) when unknown or under 2
    layers (no layer to exit after). Never raises."""
    from specviz.models import cached_model, layer_count, model_name

    spec = str(target_spec or "").strip() or "embedded"
    try:
        layers = layer_count(spec)
        if layers is None or layers < 2:
            return None, None
        loaded = cached_model(spec)
        return layers, (loaded.label if loaded is not None else model_name(spec))
    except Exception:  # noqa: BLE001 - a check must never break the page; the run checks again once loaded
        return None, None


def fit_exit_layer(value, layers: int | None = None, label: str | None = None) -> tuple[int | None, str | None]:
    """The early-exit layer a run uses for the box's ``value``, and why when it is not what was typed: one rule
    for the toast when the box is left (:func:`exit_layer_notice`) and for the Live run, so both do the same.

    Args:
        value: the box's payload: None, "" or 0 mean the default (half the target's layers).
        layers / label: the target's layer count and name when known (else only the box's range, 0 ..
            :data:`MAX_LAYER`, is checked here and :func:`check_exit_layer` checks the loaded target).

    Returns:
        (layer, message): ``layer`` is None for the default, else 1 .. layers − 1; ``message`` is None when the
        value is used as typed, else :func:`_exit_layer_message`'s sentence (the same for every value out of
        range, below 1 or above the target's last layer but one) or the whole-number sentence, and "Using {layer}."

    Raises:
        InputError: a value that is no number.
    """
    if value is None or value == "" or (value == 0 and not isinstance(value, bool)):
        return None, None
    try:
        got = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{EXIT_LAYER.name} must be a number.") from None
    if got != got or isinstance(value, bool):
        raise InputError(f"{EXIT_LAYER.name} must be a number.")
    top = layers - 1 if layers is not None and layers >= 2 else MAX_LAYER
    if 1 <= got <= top:
        if got == int(got):
            return int(got), None
        used = min(top, max(1, round(got)))  # as Gradio rounds a box of precision 0
        return used, f"{EXIT_LAYER.name} must be a whole number (got {value}). Using {used}."
    used = top if got > top and layers is not None and layers >= 2 else 0  # unknown layers: beyond any model's
    return used or None, f"{_exit_layer_message(label, layers, value)} Using {_using(used, EXIT_LAYER)}."


def _exit_layer_message(label: str | None, layers: int | None, got) -> str:
    """The sentence for an early-exit layer ``got`` (the box's payload, as typed) outside 1 .. layers − 1, the same
    for every such value: with the target's ``label`` and ``layers`` when known, else its bound in words."""
    shown = got if len(str(got)) <= 20 else str(got)[:20] + "…"
    if layers is not None and layers >= 2:
        bound = f"{layers - 1} for {label or 'the target'}, which has {layers} layers"
    else:
        bound = "the target's layers − 1"
    return f"The early-exit layer must be 0 (half the target's layers) or a layer from 1 to {bound} (got {shown})."


def text(value, name: str) -> str:
    """A text input as str (None is ""; a number is its digits); anything else that is not text is an
    InputError."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"{name} must be text.")
    return value


def parse_stop_strings(value: str | None) -> tuple[str, ...]:
    """Stop strings from a comma- or newline-separated box; ``\\n`` written out means a newline. Control
    characters are removed; at most :data:`MAX_STOP_STRINGS` strings of :data:`MAX_STOP_STRING_CHARS` characters.
    Raises InputError."""
    if not value:
        return ()
    from specviz.models import sanitize_prompt

    cleaned = sanitize_prompt(text(value, "The stop strings")).text
    items = [part.strip() for line in cleaned.splitlines() for part in line.split(",")]
    stops = tuple(dict.fromkeys(s.replace("\\n", "\n") for s in items if s))
    if len(stops) > MAX_STOP_STRINGS:
        raise InputError(f"Too many stop strings ({len(stops)}; at most {MAX_STOP_STRINGS}).")
    if any(len(s) > MAX_STOP_STRING_CHARS for s in stops):
        raise InputError(f"A stop string is too long (at most {MAX_STOP_STRING_CHARS} characters).")
    return stops


def parse_exit_layer(value) -> int | None:
    """The early-exit layer box: None, "" or 0 mean the default (half the target's layers) and give None; else a
    layer number (its upper bound, the model's layers − 1, is checked by :func:`check_exit_layer` once the model
    is loaded). Raises InputError."""
    if value in (None, "", 0):
        return None
    try:
        return int(EXIT_LAYER.parse(value)) or None
    except InputError as error:
        if "between" not in str(error):
            raise
        raise InputError(_exit_layer_message(None, None, value)) from None


def check_exit_layer(layer: int | None, target) -> None:
    """Raise InputError when ``layer`` (None: the default) is not a layer of the loaded ``target`` to exit
    after (1 .. layers − 1)."""
    if layer is not None and not 1 <= layer < target.num_layers:
        raise InputError(_exit_layer_message(target.label, target.num_layers, layer))


def fit_loaded_exit_layer(layer: int | None, target) -> tuple[int | None, str | None]:
    """The early-exit layer a run uses once its target is loaded, and the note that says so when it is not the
    layer asked for: :func:`fit_exit_layer` against the loaded ``target``'s own layers (its ``num_layers`` and
    ``label``), the rule the box's toast follows when it is left (:func:`exit_layer_notice`), so a run does what
    the toast said even where the target's layers were unknown before loading.

    Args:
        layer: the parsed layer (:func:`parse_exit_layer`; None: the default, half the target's layers).
        target: the loaded target (a ``LoadedModel``: ``num_layers``, ``label``).

    Returns:
        (layer, note): the layer asked for and None when ``target`` has it (1 .. layers − 1; None stays None);
        else its nearest layer (above its last layer but one: that one; below 1: None, the default) and the note
        "The early-exit layer must be 0 (half the target's layers) or a layer from 1 to 29 for SmolLM2-135M-Instruct,
        which has 30 layers (got 100). Using 29." for the status and a toast.

    Raises:
        InputError: a layer asked of a target with fewer than 2 layers (none to exit after):
            :func:`check_exit_layer`'s message.
    """
    if layer is None:
        return None, None
    fitted, note = fit_exit_layer(layer, target.num_layers, target.label)
    check_exit_layer(fitted, target)
    return fitted, note


def fit_settings_exit_layer(settings: Settings, target) -> tuple[Settings, str | None]:
    """``settings`` with its early-exit layer fitted to the loaded ``target`` (:func:`fit_loaded_exit_layer`), the
    note added to ``settings.notes`` (said in every status of the run) and returned for a toast; ``settings`` itself
    and None when nothing changed. Raises InputError as :func:`fit_loaded_exit_layer` does."""
    layer, note = fit_loaded_exit_layer(settings.exit_layer, target)
    if note is None:
        return settings, None
    return replace(settings, exit_layer=layer, notes=(*settings.notes, note)), note


def check_models(target: str, draft_model: str | None, policy: Policy) -> None:
    """The one place the operator's model policy is enforced for visitors (raises PolicyError, naming the
    setting): the target, and the draft model of the 'model' drafter. The other drafters load only the target
    (its bfloat16 copy, its own layers) or nothing."""
    policy.check_model(target, "target")
    if draft_model is not None:
        policy.check_model(draft_model, "draft model")


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
    min_confidence: float = DEFAULT_MIN_CONFIDENCE  # eagle / medusa: the confidence gate (0 = always k tokens)
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
    def drafted_tree_nodes(self) -> int:
        """The tree size the drafter gets: ``tree_nodes`` in greedy mode, 0 (a chain) when sampling."""
        return self.tree_nodes if self.greedy else 0


def _prompt(value, notes: list[str]) -> str:
    """The prompt, cleaned (control characters out) and cut to its last :data:`MAX_PROMPT_CHARS` characters;
    what was changed goes to ``notes``. Raises InputError for an empty prompt."""
    from specviz.models import sanitize_prompt

    prompt = text(value, "The prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        notes.append(f"The prompt had {len(prompt):,} characters: only its last {MAX_PROMPT_CHARS:,} were read.")
        prompt = prompt[-MAX_PROMPT_CHARS:]
    clean = sanitize_prompt(prompt)
    if not clean.text.strip():
        raise InputError("The prompt is empty: type something first (or start from an example or a walkthrough).")
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
        raise InputError("The 'model' drafter needs a draft model: a hub id or a local folder.")
    return drafter, spec


def _head_options(drafter: str, tree_nodes, confidence, lookup, temperature: float,
                  notes: list[str]) -> tuple[int, float, bool]:
    """(tree nodes, confidence gate, lookup first) for the head drafters (eagle, medusa); the defaults for the
    others. A tree with sampling adds :data:`TREE_SAMPLING_NOTE` to ``notes``."""
    if drafter not in HEAD_DRAFTERS:
        return 0, DEFAULT_MIN_CONFIDENCE, False
    nodes = 0
    if tree_nodes not in (None, ""):
        nodes = int(number(tree_nodes, "Tree nodes", 0, MAX_TREE_NODES, True))
        if nodes and temperature > 0:
            notes.append(TREE_SAMPLING_NOTE)
    gate = DEFAULT_MIN_CONFIDENCE
    if confidence not in (None, ""):
        gate = float(number(confidence, "Confidence gate", 0, MAX_CONFIDENCE, False))
    return nodes, gate, bool(lookup)


def _with_lookahead(window, ngram, candidates, settings: Settings) -> Settings:
    """``settings`` with lookahead's W, N and G checked (window 1..:data:`MAX_WINDOW`, n-gram size
    2..:data:`MAX_NGRAM`, candidates 1..:data:`MAX_CANDIDATES`; None or "" = the default) and, for the lookahead
    drafter, k = N-1 (its candidates' length), fixed, or with k = auto gated (each pass a full lookahead pass or a
    plain step, :class:`~specviz.core.draft_length.GateK`); with sampling a note says one candidate is verified per
    pass. Other drafters keep the defaults. Raises InputError."""
    if settings.drafter != "lookahead":
        return settings
    w = int(number(_or_default(window, LOOKAHEAD_DEFAULTS[0]), "Window W", 1, MAX_WINDOW, True))
    n = int(number(_or_default(ngram, LOOKAHEAD_DEFAULTS[1]), "N-gram size N", 2, MAX_NGRAM, True))
    g = int(number(_or_default(candidates, LOOKAHEAD_DEFAULTS[2]), "Candidates G", 1, MAX_CANDIDATES, True))
    notes = settings.notes
    if not settings.greedy and g > 1:
        notes += (LOOKAHEAD_SAMPLING_NOTE,)
    schedule = "auto" if settings.k_schedule == "auto" else "fixed"
    return replace(settings, window=w, ngram=n, candidates=g, k=n - 1, k_schedule=schedule, notes=notes)


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


def parse_settings(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p,
                   top_k, seed, max_new_tokens, stop_strings, chat_template, tree_nodes=0, confidence=None,
                   lookup=False, min_p=0.0, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0,
                   no_repeat_ngram_size=0, logit_bias="", banned_ids="", stop_token_ids="", window=None, ngram=None,
                   candidates=None, policy: Policy | None = None, fit_layer: bool = False) -> Settings:
    """Check every input of a generation. ``tree_nodes``, ``confidence`` (the confidence gate, in [0, 0.95]; None
    or "" = the default) and ``lookup`` (n-gram lookup first) count only for the head drafters (eagle, medusa).
    ``min_p`` .. ``stop_token_ids``: the generation settings (:func:`parse_generation_settings`). ``window``,
    ``ngram``, ``candidates``: lookahead's W, N and G (:func:`_with_lookahead`; its k becomes N-1: fixed, or gated with k = auto).
    ``policy`` defaults to the environment's (:func:`specviz.policy.current_policy`). ``fit_layer``: an early-exit
    layer outside the target's layers (as far as they are known before loading, :func:`target_layers`) is replaced
    by the one its box's toast names, with the same sentence as a note (:func:`fit_exit_layer`), not refused.

    Raises:
        InputError: a message for the user, one sentence.
        specviz.policy.PolicyError: a model the operator does not allow (naming the setting).
    """
    policy = policy or current_policy()
    notes: list[str] = []
    prompt = _prompt(prompt, notes)
    target = text(target, "The target model").strip() or "embedded"
    drafter, draft_model = _drafter(drafter, draft_model)
    check_models(target, draft_model, policy)
    layer = None
    if drafter == "early-exit" and fit_layer:
        layer, note = fit_exit_layer(exit_layer, *target_layers(target))
        notes.extend([note] if note else [])
    elif drafter == "early-exit":
        layer = parse_exit_layer(exit_layer)
    temperature = float(number(temperature, "Temperature", 0, 5, False))
    nodes, gate, lookup = _head_options(drafter, tree_nodes, confidence, lookup, temperature, notes)
    new_tokens = number(max_new_tokens, "Max new tokens", 1, policy.max_new_tokens, True,
                        hint=MAX_NEW_TOKENS_HINT)
    return _with_lookahead(window, ngram, candidates, Settings(
        prompt=prompt, target=target, drafter=drafter, draft_model=draft_model, exit_layer=layer,
        k=int(number(k, "Draft length k", 1, MAX_K, True)), k_schedule=parse_k_schedule(adaptive_k),
        temperature=temperature,
        top_p=float(number(_or_default(top_p, 1.0), "Top-p", 0.01, 1, False)),
        top_k=int(TOP_K.parse(top_k)), seed=int(SEED.parse(seed)),
        max_new_tokens=int(new_tokens), stop_strings=parse_stop_strings(stop_strings),
        chat_template=bool(chat_template), notes=tuple(notes), max_prompt_tokens=policy.max_prompt_tokens,
        tree_nodes=nodes, min_confidence=gate, lookup=lookup,
        **parse_generation_settings(min_p, repetition_penalty, frequency_penalty, presence_penalty,
                                    no_repeat_ngram_size, logit_bias, banned_ids, stop_token_ids),
    ))


# ------------------------------------------------------------------------------------------------- the prompt


def _prompt_budget(settings: Settings, target) -> tuple[int | None, list[str]]:
    """The most prompt tokens that fit (None: no limit) and the limit that sets it, in words. Raises InputError
    when max new tokens alone do not fit the target's context window."""
    from specviz.models import context_window

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
    whole; :meth:`specviz.models.PromptFit.cut_summary`)."""

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
    :meth:`specviz.models.PromptFit.cut_note`; the draft model's window, the re-tokenized drafts). Raises
    InputError (one sentence) when max new tokens alone do not fit the window, or for a prompt that cannot be
    encoded (empty, or a typed control token the tokenizer cannot keep as text)."""
    from specviz.drafters.model import drafter_note
    from specviz.models import PromptTooLongError, fit_prompt

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
