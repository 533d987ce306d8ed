"""The generation settings as people type, read and record them: parsing the text forms of a logit bias, banned
token ids and stop token ids, a JSON-safe record of every setting, a short summary of the settings that differ from
their defaults, and a check of token ids against a model's vocabulary.

The settings themselves and their meanings live in :class:`specviz.core.verify.SamplingConfig` (temperature, top-k,
top-p, min-p, repetition / frequency / presence penalties, no-repeat n-gram size, logit bias) and
:class:`specviz.core.engine.GenerationConfig` (stop strings, stop token ids); the CLI, the app's tabs and the JSON
outputs all go through here, so a setting reads and records the same everywhere. Errors are ValueErrors whose
message is one sentence for a user.
"""

from __future__ import annotations

import math

from specviz.core.verify import SamplingConfig

MAX_BIASED_TOKENS = 1024  # entries of a logit bias (banned ids included): a typed list, not a vocabulary
MAX_STOP_TOKEN_IDS = 64


def _token_id(text: str, what: str) -> int:
    """One token id (a whole number >= 0) from ``text``; ``what`` names the list in the error."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{what}: {text.strip()!r} is not a token id (a whole number >= 0)") from None
    if value < 0:
        raise ValueError(f"{what}: token ids are >= 0, got {value}")
    return value


def _items(text: str | None, spaces: bool = True) -> list[str]:
    """The non-empty items of ``text`` separated by commas, newlines and (``spaces``) blanks."""
    text = (text or "").replace("\n", ",")
    return [item for item in (text.replace(" ", ",") if spaces else text).split(",") if item.strip()]


def parse_token_ids(text: str | None, what: str = "stop token ids", most: int = MAX_STOP_TOKEN_IDS
                    ) -> tuple[int, ...]:
    """Token ids from "id,id,..." (commas, spaces or newlines between them; repeats kept once, in order).

    Raises:
        ValueError: an item that is not a whole number >= 0, or more than ``most`` ids (one sentence naming ``what``).
    """
    ids = tuple(dict.fromkeys(_token_id(item, what) for item in _items(text)))
    if len(ids) > most:
        raise ValueError(f"{what}: at most {most} ids, got {len(ids)}")
    return ids


def _bias(text: str, token: int) -> float:
    """One bias value: a finite number or -inf (a ban); +inf and NaN are refused (they make no distribution)."""
    word = text.strip().lower()
    if word in ("-inf", "-infinity", "ban", "banned"):
        return -math.inf
    try:
        value = float(word)
    except ValueError:
        raise ValueError(f"logit bias: the bias of token {token} must be a number or -inf, got {text.strip()!r}"
                         ) from None
    if value != value or value == math.inf:
        raise ValueError(f"logit bias: the bias of token {token} must be a finite number or -inf, got {text.strip()}")
    return value


def parse_logit_bias(text: str | None) -> tuple[tuple[int, float], ...]:
    """A logit bias from "id:bias,id:bias" (bias a number added to the token's logit, or -inf to ban it).

    Raises:
        ValueError: an item without "id:bias", a bad id or bias, an id given twice, or more than
            :data:`MAX_BIASED_TOKENS` entries (one sentence).
    """
    pairs: dict[int, float] = {}
    for item in _items(text, spaces=False):
        token_text, colon, bias_text = item.partition(":")
        if not colon:
            raise ValueError(f"logit bias: {item.strip()!r} needs the form id:bias (e.g. 13:2.5 or 30:-inf)")
        token = _token_id(token_text, "logit bias")
        if token in pairs:
            raise ValueError(f"logit bias: token {token} is given twice")
        pairs[token] = _bias(bias_text, token)
    if len(pairs) > MAX_BIASED_TOKENS:
        raise ValueError(f"logit bias: at most {MAX_BIASED_TOKENS} tokens, got {len(pairs)}")
    return tuple(pairs.items())


def with_banned(logit_bias: tuple[tuple[int, float], ...], banned: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
    """``logit_bias`` plus a bias of -inf for each banned id (a ban wins over a bias given for the same id); this is
    how ``bad_words_ids`` of single tokens and the "banned token ids" fields reach the engine."""
    merged = dict(logit_bias)
    merged.update((token, -math.inf) for token in banned)
    if len(merged) > MAX_BIASED_TOKENS:
        raise ValueError(f"logit bias and banned ids: at most {MAX_BIASED_TOKENS} tokens, got {len(merged)}")
    return tuple(merged.items())


def check_token_ids(sampling: SamplingConfig, stop_token_ids: tuple[int, ...], vocab_size: int | None) -> None:
    """Raise ValueError (one sentence) when a biased, banned or stop token id is not below ``vocab_size`` (the ids a
    run can emit; None skips the check): such an id would silently do nothing."""
    if vocab_size is None:
        return
    biased = [t for t, bias in sampling.logit_bias if bias != -math.inf]
    banned = [t for t, bias in sampling.logit_bias if bias == -math.inf]  # the banned ids, or a bias of -inf
    for what, ids in (("logit bias", biased), ("banned ids (or a logit bias of -inf)", banned),
                      ("stop token ids", list(stop_token_ids))):
        outside = [t for t in ids if t >= vocab_size]
        if outside:
            raise ValueError(f"{what}: token id {outside[0]} is outside the target's vocabulary "
                             f"(ids 0..{vocab_size - 1})")


def _bias_value(bias: float) -> float | str:
    return "-inf" if bias == -math.inf else bias


def settings_record(sampling: SamplingConfig, stop_token_ids: tuple[int, ...] = (),
                    stop_strings: tuple[str, ...] = ()) -> dict:
    """Every generation setting as a JSON-safe dict, named as transformers' ``generate()`` names them
    (``logit_bias`` as {"id": bias} with a ban written "-inf", as strict JSON has no infinity)."""
    return {
        "temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p,
        "min_p": sampling.min_p, "repetition_penalty": sampling.repetition_penalty,
        "frequency_penalty": sampling.frequency_penalty, "presence_penalty": sampling.presence_penalty,
        "no_repeat_ngram_size": sampling.no_repeat_ngram_size,
        "logit_bias": {str(token): _bias_value(bias) for token, bias in sampling.logit_bias},
        "stop_strings": list(stop_strings), "stop_token_ids": list(stop_token_ids), "seed": sampling.seed,
    }


def settings_summary(sampling: SamplingConfig, stop_token_ids: tuple[int, ...] = ()) -> str:
    """The settings besides temperature and seed that differ from their defaults, in words: "top-p 0.9 ·
    repetition penalty 1.3 · 2 banned ids · stop ids 2, 7" ("" when all are at their defaults)."""
    s = sampling
    parts = [f"top-k {s.top_k}" if s.top_k else "", f"top-p {s.top_p:g}" if s.top_p < 1 else "",
             f"min-p {s.min_p:g}" if s.min_p else "",
             f"repetition penalty {s.repetition_penalty:g}" if s.repetition_penalty != 1 else "",
             f"frequency penalty {s.frequency_penalty:g}" if s.frequency_penalty else "",
             f"presence penalty {s.presence_penalty:g}" if s.presence_penalty else "",
             f"no-repeat {s.no_repeat_ngram_size}-grams" if s.no_repeat_ngram_size else ""]
    banned = sum(1 for _, bias in s.logit_bias if bias == -math.inf)
    biased = len(s.logit_bias) - banned
    parts += [f"{biased} biased id{'s' if biased > 1 else ''}" if biased else "",
              f"{banned} banned id{'s' if banned > 1 else ''}" if banned else "",
              f"stop ids {', '.join(map(str, stop_token_ids))}" if stop_token_ids else ""]
    return " · ".join(p for p in parts if p)
