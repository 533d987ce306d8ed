"""Prompts: text made safe for a tokenizer, encoded as a chat's user turn (typed control tokens stay text), and cut
from the left to a token budget with the template kept whole (:class:`PromptFit` says what the cut removed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


# C0 (but \t \n \r), DEL, C1, and the bidirectional embeddings, overrides and isolates (U+202A-202E, U+2066-2069),
# which reverse how the rest of the prompt is shown
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class CleanText:
    """Text made safe for a tokenizer, and what was changed (``note`` is "" when nothing was)."""

    text: str
    removed_controls: int = 0
    replaced_invalid: int = 0

    @property
    def note(self) -> str:
        """One sentence for the user, or ""."""
        parts = []
        if self.removed_controls:
            parts.append(f"removed {self.removed_controls} control character{'s' if self.removed_controls > 1 else ''}")
        if self.replaced_invalid:
            parts.append(f"replaced {self.replaced_invalid} invalid character{'s' if self.replaced_invalid > 1 else ''}"
                         " (unpaired surrogates) with \ufffd")
        return ("The prompt was cleaned: " + " and ".join(parts) + ".") if parts else ""


def sanitize_prompt(text: str) -> CleanText:
    """Remove control characters (C0 except tab and newline, DEL, C1, bidirectional overrides, embeddings and
    isolates; \\r\\n and \\r become \\n) and replace
    unpaired UTF-16 surrogates (which no tokenizer can encode, e.g. from JSON "\\ud800" or undecodable argv
    bytes) with U+FFFD. Valid surrogate pairs that arrived as two code points are joined first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    replaced = 0
    if _SURROGATE.search(text):
        before = text.count("\ufffd")
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # pairs -> one code point
        text = _SURROGATE.sub("\ufffd", text)
        replaced = text.count("\ufffd") - before
    cleaned, removed = _CONTROL.subn("", text)
    return CleanText(cleaned, removed, replaced)


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str, *, use_chat_template: bool = True) -> list[int]:
    """Token ids for ``prompt``: as one user message with the tokenizer's chat template (and the assistant's
    generation prompt) when it has one and ``use_chat_template``; else plain tokenization with the tokenizer's
    own special tokens (its BOS, for example).

    The user's text is data: control tokens typed into it (``<|im_start|>``, ``<|endoftext|>``, ...) are encoded
    as the plain text they are, never as the special ids the template writes, so a prompt cannot forge a turn
    (a system message, an end of text). Only the template's own markers become special ids. A prompt without
    such markers gets exactly the ids the tokenizer's normal encoding gives.

    The prompt is passed through :func:`sanitize_prompt` first (silently: callers that want to tell the user
    call it themselves), so no input makes the tokenizer fail.

    Returns a list of int token ids. Raises ValueError (one sentence) for an empty or whitespace-only prompt
    ("The prompt is empty.") and for a typed control token this tokenizer cannot encode as plain text.
    """
    prompt = sanitize_prompt(prompt).text if isinstance(prompt, str) else prompt
    if not prompt or not prompt.strip():
        raise ValueError("The prompt is empty.")
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        try:
            # transformers marks the control tokens in the message and encodes them as text (its
            # `sanitize_control_tokens`); without any there, the ids are those of the plain call
            encoded = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                    add_generation_prompt=True, tokenize=True, return_dict=True,
                                                    sanitize_control_tokens=True)
        except ValueError as error:
            raise _unsanitizable(tokenizer, prompt, error) from None
        ids = encoded["input_ids"]
    else:
        ids = encode_text(tokenizer, prompt, add_special_tokens=True)
    return [int(token_id) for token_id in ids]


def encode_turns(tokenizer: PreTrainedTokenizerBase, turns: list[tuple[str, str]]) -> list[int]:
    """Token ids of a conversation, ``turns`` = [(role, text), ...] (roles "user" / "assistant"), with the
    tokenizer's chat template and the assistant's generation prompt; the texts are data, as in
    :func:`encode_prompt` (sanitized; typed control tokens encoded as text). Raises ValueError (one sentence) for
    no turns, an empty turn, or a tokenizer without a chat template."""
    if not turns or any(not str(text).strip() for _, text in turns):
        raise ValueError("A conversation needs turns, none of them empty.")
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("This tokenizer has no chat template to encode a conversation with.")
    messages = [{"role": role, "content": sanitize_prompt(text).text} for role, text in turns]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                            sanitize_control_tokens=True)
    return [int(token_id) for token_id in encoded["input_ids"]]


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str, *, add_special_tokens: bool = False) -> list[int]:
    """Token ids of ``text`` as plain text: control tokens typed into it (the tokenizer's special tokens and its
    ``chat_control_tokens``) are encoded as their characters, never as their special ids. With
    ``add_special_tokens`` the tokenizer's own framing (its BOS / EOS post-processing) is added around the text.

    Text without control tokens gets exactly ``tokenizer(text, add_special_tokens=...)["input_ids"]``. Nothing is
    sanitized here (see :func:`sanitize_prompt`). Raises ValueError (one sentence) when this tokenizer produces a
    typed control token from its plain characters, so it cannot be kept as text.
    """
    pattern = _control_tokens_re(tokenizer)
    if pattern is None or not pattern.search(text):
        return [int(i) for i in tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]]
    from transformers.utils.chat_template_utils import mark_control_tokens

    try:  # the same machinery apply_chat_template(..., sanitize_control_tokens=True) uses for message text
        bare = tokenizer(mark_control_tokens(text, pattern), add_special_tokens=False,
                         sanitize_control_tokens=True)["input_ids"]
    except ValueError as error:
        raise _unsanitizable(tokenizer, text, error) from None
    head, tail = _special_framing(tokenizer) if add_special_tokens else ((), ())
    return [int(i) for i in (*head, *bare, *tail)]


def _control_tokens_re(tokenizer) -> re.Pattern | None:
    """A regex matching the tokenizer's control tokens (special added tokens, and ``chat_control_tokens``),
    longest first; None when it has none."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    extra = set(getattr(tokenizer, "chat_control_tokens", None) or ())
    tokens = {token.content for token in added.values() if getattr(token, "special", False) or token.content in extra}
    tokens.update(str(t) for t in (getattr(tokenizer, "all_special_tokens", None) or ()))
    tokens = sorted((t for t in tokens if t and not t.isspace()), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def _special_framing(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer's post-processor puts before and after a text (e.g. ([bos], []))."""
    probe = "a"
    full = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(bare) + 1):
        if full[start:start + len(bare)] == bare:
            return full[:start], full[start + len(bare):]
    return [], []


def _unsanitizable(tokenizer, text: str, error: ValueError) -> ValueError:
    """The one-sentence error for a typed control token that the tokenizer cannot encode as text."""
    pattern = _control_tokens_re(tokenizer)
    found = pattern.search(text) if pattern is not None else None
    if found is None or "sanitize" not in str(error).lower():  # another problem: its own message
        return error
    return ValueError(f"The prompt contains {found.group(0)!r}, a control token this model's tokenizer cannot keep "
                      f"as plain text: remove it from the prompt.")


class PromptTooLongError(ValueError):
    """Even an empty prompt would not leave room for the requested new tokens; the message says what fits."""


_TYPED_TURN = re.compile(r"(?im)^[ \t]*(?:<\|im_start\|>[ \t]*|\[|###[ \t]*)?(system|user|human|assistant)"
                         r"(?:[ \t]*[:\]]|[ \t]*\n)")
"""A conversation turn typed into the prompt's text: "System: ...", "User:", "[user]", "### Assistant", or a ChatML
"<|im_start|>system" line."""
FIRST_WORDS = 8  # words of the kept text quoted in a cut prompt's note


@dataclass(frozen=True)
class PromptFit:
    """An encoded prompt cut to a budget: ``ids`` (template and generation prompt intact), how many tokens the
    whole prompt had, and how many were cut from the start of the user's text. A cut prompt also keeps
    ``kept_text`` (the user's text the model reads, "" when nothing was cut), ``removed_text`` (what the cut took
    from its start, "" when unknown) and ``chat`` (the text went into a chat template's user turn)."""

    ids: list[int]
    original_tokens: int
    budget: int | None
    kept_text: str = ""
    removed_text: str = ""
    chat: bool = False

    @property
    def dropped_tokens(self) -> int:
        """Tokens cut from the start (0: the prompt is whole)."""
        return self.original_tokens - len(self.ids)

    @property
    def truncated(self) -> bool:
        """Whether the start of the prompt was cut."""
        return self.dropped_tokens > 0

    @property
    def instruction_lost(self) -> bool:
        """Whether the cut took the start of a request: the text was a chat's user turn, or it held turns typed as
        text ("System: ...") and the cut removed some of them."""
        return self.truncated and (self.chat or bool(_TYPED_TURN.search(self.removed_text)))

    def cut_summary(self) -> str:
        """The cut in one short clause for narrow places ("" when the prompt is whole): "its first 1,024 tokens were
        removed (an instruction there no longer reaches the model)", the bracket only when
        :attr:`instruction_lost`."""
        if not self.truncated:
            return ""
        lost = " (an instruction there no longer reaches the model)" if self.instruction_lost else ""
        return f"its first {self.dropped_tokens:,} tokens were removed{lost}"

    def cut_note(self) -> str:
        """What a cut removed, in words ("" when the prompt is whole): how many tokens left the start, the first
        words the model now reads, and, where the text was a chat's user turn or held turns typed as text
        ("System: ..."), that the start of the request (an instruction there) is gone."""
        if not self.truncated:
            return ""
        words = self.kept_text.split()
        shown = " ".join(words[:FIRST_WORDS])
        shown = shown if len(shown) <= 80 else shown[:79].rstrip() + "…"
        more = "…" if len(words) > FIRST_WORDS and not shown.endswith("…") else ""
        note = (f"{self.dropped_tokens:,} tokens were removed from its start, so it now begins “…{shown}{more}”"
                if shown else f"{self.dropped_tokens:,} tokens were removed from its start")
        roles = sorted({m.group(1).lower() for m in _TYPED_TURN.finditer(self.removed_text)},
                       key=["system", "user", "human", "assistant"].index)
        if roles:
            note += (f". The removed start held the {' and '.join(roles)} turn{'s' if len(roles) > 1 else ''} typed "
                     "into the prompt: the start of the request was removed, and an instruction there no longer "
                     "reaches the model")
        elif self.chat:
            note += (". The start of your request (the chat's user turn) was removed, so an instruction at its start "
                     "no longer reaches the model; the system prompt and the chat format were kept whole")
        if roles or self.chat:
            return note + ". Put the instruction at the end, or shorten the text."
        return note + "."


def fit_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str, budget: int | None, *,
               use_chat_template: bool = True) -> PromptFit:
    """Encode ``prompt`` (see :func:`encode_prompt`) in at most ``budget`` tokens (None: no limit).

    A longer prompt is truncated from the left: the start of the user's text is dropped, and the chat template
    around it (system prompt, role markers, the assistant's generation prompt) is kept whole, so the model still
    sees a well-formed conversation and answers the end of the text (:meth:`PromptFit.cut_note` says what went).
    Control tokens typed into the text stay text in the cut prompt too. ``budget`` is in tokens, chat template
    included.

    Raises :class:`PromptTooLongError` when the template alone does not fit the budget, and ValueError (one
    sentence, see :func:`encode_prompt`) for an empty prompt or a typed control token that cannot be kept as text.
    """
    ids = encode_prompt(tokenizer, prompt, use_chat_template=use_chat_template)
    if budget is None or len(ids) <= budget:
        return PromptFit(ids, len(ids), budget)
    chat = bool(use_chat_template and getattr(tokenizer, "chat_template", None))
    text = sanitize_prompt(prompt).text
    content = encode_text(tokenizer, text)  # typed control tokens stay text, as in encode_prompt
    overhead = max(0, len(ids) - len(content))  # template + special tokens around the user's text
    keep = budget - overhead
    for _ in range(8):  # re-tokenizing the cut text can merge differently: shrink until it fits
        if keep < 1:
            break
        tail = tokenizer.decode(content[-keep:], skip_special_tokens=False).lstrip("\ufffd")
        if tail.strip():
            cut = encode_prompt(tokenizer, tail, use_chat_template=use_chat_template)
            if len(cut) <= budget:
                removed = text[:len(text) - len(tail)] if text.endswith(tail) else ""
                return PromptFit(cut, len(ids), budget, kept_text=tail, removed_text=removed, chat=chat)
            keep -= max(1, len(cut) - budget)
        else:
            keep -= 1
    raise PromptTooLongError(f"The prompt does not fit: the chat template alone takes {overhead} of the "
                             f"{budget} tokens available for the prompt.")
