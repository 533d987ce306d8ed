"""Single input fields, checked for every tab: each problem is an :class:`InputError` whose message is one sentence
for the visitor (a :class:`specviz.runtime.policy.PolicyError`, also a ValueError, for a model the operator does not allow).

- :func:`number` (bounds written readably), :func:`text`, :func:`parse_stop_strings`, :func:`parse_exit_layer`
  and :func:`check_exit_layer`; :class:`NumberField` (``TOP_K``, ``SEED``, ...) holds a number box's rule, read by
  the Run path and by :func:`number_notice` when the box is left (:func:`empty_notice` when it was emptied;
  :func:`exit_layer_notice` for the early-exit layer, against the target's layers once they are known);
- :func:`check_models`: the one place the operator's model policy is enforced for visitors.

:mod:`app.inputs` re-exports every name here; a whole generation's settings are parsed there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specviz.runtime.policy import Policy

MAX_STOP_STRINGS = 16
MAX_STOP_STRING_CHARS = 200
MAX_SEED = 2**53 - 1  # the largest whole number a browser (a 64-bit float) holds exactly: a larger seed would come back changed
MAX_LAYER = 10_000  # a layer number beyond any model's (the model's own bound: check_exit_layer, layer_count)


class InputError(ValueError):
    """Bad input from the user; the message is one sentence for them."""



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
        shown = value if len(str(value)) <= 20 else f"{got:.3g}" if got == got else str(value)[:20] + "…"
        above = f"; {hint}" if hint and got == got and got > high else ""
        raise InputError(f"{name} must be between {_bound(low, integer)} and {_bound(high, integer)} "
                         f"(got {shown}{above}).")
    if integer:
        if got != int(got):
            raise InputError(f"{name} must be a whole number (got {value}).")
        return int(got)
    return got


def half_up(x: float) -> int:
    """``x`` rounded to the nearest whole number, halves up (2.5 is 3, 0.5 is 1, -1.5 is -1), as people round;
    Python's ``round`` takes halves to the even number (2.5 is 2, 0.5 is 0: a top-k of 0.5 would be off)."""
    return math.floor(x + 0.5)


def clamp_notice(value, name: str, low: float, high: float, hint: str = "",
                 whole: bool = False) -> tuple[float, str] | None:
    """What a slider does with a number typed into its box outside [low, high], said in words: Gradio's slider
    quietly sets itself to the nearest end when the box is left. Returns (the value used, one sentence such as "Max
    new tokens is at most 1024 here; using 1024.", "Draft length k is at least 1 here; using 1."), ``hint`` (who sets
    that end) added in brackets after an upper bound; with ``whole`` (a slider of whole steps) a fraction in range
    too: (:func:`half_up` of it, "Draft length k must be a whole number (got 1.5); using 2."), which the slider
    would keep and the run refuse. None for a value the run takes, an empty box (a slider's:
    :func:`emptied_slider_notice`) or anything that is not a number."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        typed = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if typed != typed:
        return None
    if low <= typed <= high:
        if not whole or typed == int(typed):
            return None
        used = min(max(half_up(typed), int(low)), int(high))
        return used, f"{name} must be a whole number (got {typed:g}); using {used}."
    used = high if typed > high else low
    used = int(used) if float(used).is_integer() else used
    shown = _bound(used, isinstance(used, int))
    if typed > high:
        why = f" ({hint})" if hint else ""
        return used, f"{name} is at most {shown} here{why}; using {shown}."
    return used, f"{name} is at least {shown} here; using {shown}."


def emptied_slider_notice(name: str, low: float, high: float) -> tuple[float, str]:
    """What a slider does with its box left empty, said in words: Gradio's slider reads an empty box as 0 and sets
    itself to the nearest end of [low, high] (0 itself where the range holds it). Returns (that value, "Draft length
    k was empty; using 1.")."""
    used = min(max(0, low), high)
    used = int(used) if float(used).is_integer() else used
    shown = _bound(used, isinstance(used, int))
    return used, f"{name} was empty; using {shown}."


def kept_notice(kept, name: str, low: float, high: float, bad: bool = False) -> tuple[float, str] | None:
    """What the page did with a slider's box left empty (``bad``: holding what is not a number): it put back the
    value ``kept`` the box had before the edit (:func:`app.messages.enter_commits_js`). Returns (that value, within
    [low, high], "Draft length k was empty; kept 4." or "Draft length k was not a number; kept 4."); None when
    ``kept`` is not a number."""
    try:
        got = float(kept)
    except (TypeError, ValueError, OverflowError):
        return None
    if got != got:
        return None
    used = min(max(got, low), high)
    used = int(used) if float(used).is_integer() else used
    shown = _bound(used, isinstance(used, int))
    return used, f"{name} was {'not a number' if bad else 'empty'}; kept {shown}."


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
    value that is off: a typed 0 or a negative value is refused by the run with "(got 0; 1 is off)" and the box's
    check uses it (the range's nearest end, 0.01, would force repeats)."""

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
        """``value`` checked by :func:`number` (``default`` for an empty box). Raises InputError; a 0 or a negative
        value typed into a field with a ``zero`` value says which value is off: "Repetition penalty must be between 0.01 and 10 (got
        0; 1 is off)."."""
        value = _or_default(value, self.default)
        if self._means_off(value):
            raise InputError(f"{self.name} must be between {_bound(self.low, self.integer)} and "
                             f"{_bound(self.high, self.integer)} (got {float(value):g}; {_bound(self.zero, self.integer)} "
                             f"is off).")
        return number(value, self.name, self.low, self.high, self.integer, self.hint)

    def _means_off(self, value) -> bool:
        """Whether ``value`` is a 0 or a negative number outside the range of a field whose off value is ``zero``
        (not 0)."""
        if self.zero is None or isinstance(value, bool) or self.low <= 0 <= self.high:
            return False
        try:
            return float(value) <= 0
        except (TypeError, ValueError, OverflowError):
            return False

    def nearest(self, value) -> float | int:
        """The allowed value nearest ``value``: clamped into [low, high] and, for a whole-number field, rounded to
        the nearest whole number (:func:`half_up`: 0.5 is 1, so a fraction never turns a setting off); ``default``
        for what is not a number. The boxes have no Gradio ``precision``, so a typed 2.5 reaches :meth:`parse` as
        typed and is said, not rounded unseen."""
        try:
            got = float(value)
        except (TypeError, ValueError, OverflowError):
            return self.default
        if got != got:
            return self.default
        if self._means_off(got):  # 0 or below meant "off": use the value that is off, not the range's nearest end
            return int(self.zero) if self.integer else float(self.zero)
        if self.outside is not None and not self.low <= got <= self.high:
            return int(self.outside) if self.integer else float(self.outside)
        if got >= self.high or got <= self.low:
            end = self.high if got >= self.high else self.low
            return int(end) if self.integer else float(end)
        return half_up(got) if self.integer else got


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


def empty_notice(field: NumberField, letters: bool = False) -> tuple[float | int, str]:
    """What an emptied number box says when it is left: (its default, put back in the box; "Seed: the box was left
    empty, so it is set back to its default, 0.", or with ``letters`` (what was typed was no number: the browser
    empties such a box) "Seed was not a number, so it is set back to its default, 0."). A run reads an empty box
    as the default too; this shows it."""
    default = int(field.default) if field.integer else field.default
    what = f"{field.name} was not a number" if letters else f"{field.name}: the box was left empty"
    return default, f"{what}, so it is set back to its default, {_using(default, field)}."


def exit_layer_notice(value, target_spec: str | None = None) -> tuple[int, str] | None:
    """What the early-exit layer box says when left (as :func:`number_notice`): :func:`fit_exit_layer` against the
    real layer count of the target ``target_spec`` names ("" means embedded) when it is known without loading
    anything (:func:`target_layers`), so its status line says what the run will do ("The early-exit layer must be 0
    (half the target's layers) or a layer from 1 to 29 for SmolLM2-135M-Instruct, which has 30 layers (got 100).
    Using 29."; below 1: 0, the default). Unknown, only the box's own range is known: a number beyond any model's uses 0.
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
    anything (:func:`specviz.runtime.models.layer_count`: the loaded model, else its config.json in the converted embedded
    folder, the local folder or the local Hugging Face cache; no network); (None, None) when unknown or under 2
    layers (no layer to exit after). Never raises."""
    from specviz.runtime.models import cached_model, layer_count, model_name

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
    for the box's status line when it is left (:func:`exit_layer_notice`) and for the Live run, so both do the same.

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
        used = min(top, max(1, half_up(got)))  # as NumberField.nearest rounds
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
    from specviz.runtime.models import sanitize_prompt

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
    ``label``), the rule the box's status line follows when it is left (:func:`exit_layer_notice`), so a run does
    what that line said even where the target's layers were unknown before loading.

    Args:
        layer: the parsed layer (:func:`parse_exit_layer`; None: the default, half the target's layers).
        target: the loaded target (a ``LoadedModel``: ``num_layers``, ``label``).

    Returns:
        (layer, note): the layer asked for and None when ``target`` has it (1 .. layers − 1; None stays None);
        else its nearest layer (above its last layer but one: that one; below 1: None, the default) and the note
        "The early-exit layer must be 0 (half the target's layers) or a layer from 1 to 29 for SmolLM2-135M-Instruct,
        which has 30 layers (got 100). Using 29." for the status.

    Raises:
        InputError: a layer asked of a target with fewer than 2 layers (none to exit after):
            :func:`check_exit_layer`'s message.
    """
    if layer is None:
        return None, None
    fitted, note = fit_exit_layer(layer, target.num_layers, target.label)
    check_exit_layer(fitted, target)
    return fitted, note


def check_models(target: str, draft_model: str | None, policy: Policy) -> None:
    """The one place the operator's model policy is enforced for visitors (raises PolicyError, naming the
    setting): the target, and the draft model of the 'model' drafter. The other drafters load only the target
    (its bfloat16 copy, its own layers) or nothing."""
    policy.check_model(target, "target")
    if draft_model is not None:
        policy.check_model(draft_model, "draft model")
