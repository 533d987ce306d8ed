"""A token's text as the panes show it: :class:`PieceDecoder` decodes each token as a continuation of the tokens
before it (a multi-byte character split over byte tokens, a tokenizer that drops a leading space alone), so a
pane's plain text equals the decoded output; :class:`Token` is one rendered token. Pure: no Gradio, no model."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple

KINDS = ("accepted", "rejected", "recovered", "bonus", "target")
_WINDOW = 6  # tokens of context to decode a piece against (a UTF-8 character spans at most 4 byte tokens)
_REPLACEMENT = "\ufffd"


@dataclass
class Token:
    """One token as rendered: its kind, pass, id, text piece and hover text."""

    kind: str
    pass_index: int
    token_id: int
    text: str
    title: str
    partial: bool = False  # starts a multi-byte character completed by a later token
    unjudged: bool = False  # a rejected token after the first rejection: the target never judged it
    special: bool = False  # a special token such as EOS
    resplit: bool = False  # re-tokenized from a draft with another tokenizer, which split this text differently
    parts: tuple = ()  # text (str) and bytes of an unfinished character (bytes, shown in hex): see Piece.parts


class Piece(NamedTuple):
    """The text one token adds after its context (see :meth:`PieceDecoder.pieces`).

    ``text``: what the token shows; in a lone token's label (a rejected draft, a tree node) the bytes of a character
    it leaves unfinished show in hex, e.g. "‹F0 9F›", never as U+FFFD. ``partial``: the token shows nothing (it starts a character a later token completes, or
    its bytes were held back at a cut). ``parts``: set only where ``text`` holds such hex: the text pieces (str) and
    the unfinished bytes (bytes, b"" where the tokenizer does not say which) in order; their labels joined give
    ``text``."""

    text: str
    partial: bool
    parts: tuple = ()


def byte_label(data: bytes) -> str:
    """Bytes of an unfinished character, readable: "‹F0 9F›" (two hex digits per byte); "‹…›" for b"" (bytes the
    tokenizer does not name)."""
    return "‹" + (" ".join(f"{b:02X}" for b in data) or "…") + "›"


_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a SentencePiece byte-fallback token


@functools.lru_cache(maxsize=1)
def _byte_alphabet() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2 and its descendants): the character that stands for each byte in a token's
    string. Printable Latin-1 bytes stand for themselves; the 68 others, in byte order, for U+0100 onwards."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in alphabet.values()]
    alphabet.update({chr(0x100 + i): b for i, b in enumerate(others)})
    return alphabet


def _unfinished_start(data: bytes) -> int:
    """Where an unfinished UTF-8 character at the end of ``data`` starts (``len(data)`` when it ends on a whole
    character): its lead byte, or the first of the continuation bytes it ends with when no lead byte precedes them."""
    i = len(data)
    while i > 0 and len(data) - i < 3 and 0x80 <= data[i - 1] < 0xC0:  # continuation bytes
        i -= 1
    if i > 0 and data[i - 1] >= 0xC0:  # a lead byte: 110xxxxx needs 2 bytes, 1110xxxx 3, 11110xxx 4
        need = 2 if data[i - 1] < 0xE0 else 3 if data[i - 1] < 0xF0 else 4
        return i - 1 if len(data) - (i - 1) < need else len(data)
    return i  # continuation bytes with no lead byte before them (or none at all: len(data))


def _chars_by_end(data: bytes) -> list[tuple[int, str | bytes]]:
    """``data`` as (end offset, item) pairs: each whole UTF-8 character (str) with the offset just past its last byte,
    and each byte that is no part of a whole character (bytes, one each) with the offset just past it."""
    out, offset = [], 0
    for char in data.decode("utf-8", "surrogateescape"):
        if 0xDC80 <= ord(char) <= 0xDCFF:  # surrogateescape: a byte that is no whole character
            offset += 1
            out.append((offset, bytes([ord(char) - 0xDC00])))
        else:
            offset += len(char.encode("utf-8"))
            out.append((offset, char))
    return out


def _piece_of(items: list) -> Piece:
    """The :class:`Piece` of a lone token's items (str characters and loose bytes, in order)."""
    if not items:
        return Piece("", True)
    parts: list = []
    for item in items:
        if parts and isinstance(parts[-1], type(item)):
            parts[-1] += item
        else:
            parts.append(item)
    text = "".join(byte_label(part) if isinstance(part, bytes) else part for part in parts)
    return Piece(text, False, tuple(parts) if any(isinstance(part, bytes) for part in parts) else ())


class PieceDecoder:
    """Decodes each token as the text it adds after its context (the tokens before it)."""

    def __init__(self, tokenizer, window: int = _WINDOW) -> None:
        self.tokenizer = tokenizer
        self.window = window
        special = getattr(tokenizer, "all_special_ids", None) or ()
        self.special_ids = frozenset(int(i) for i in special)
        self._bytes: dict[int, bytes | None] = {}

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_bytes(self, token_id: int) -> bytes | None:
        """The UTF-8 bytes a token stands for: a byte-level BPE token (GPT-2 style, e.g. SmolLM2's) or a
        SentencePiece byte-fallback token ``<0xF0>``, a special token's literal text; None when the tokenizer does not
        say (another kind of tokenizer, or bytes its own decoding of the token does not confirm)."""
        token_id = int(token_id)
        if token_id not in self._bytes:
            self._bytes[token_id] = self._read_bytes(token_id)
        return self._bytes[token_id]

    def _read_bytes(self, token_id: int) -> bytes | None:
        if token_id in self.special_ids:  # shown as its literal text, e.g. "<|endoftext|>"
            text = self._decode([token_id])
            return text.encode("utf-8") if _REPLACEMENT not in text else None
        convert = getattr(self.tokenizer, "convert_ids_to_tokens", None)
        if convert is None:
            return None
        try:
            name = convert(token_id)
        except (IndexError, KeyError, TypeError, ValueError, OverflowError):
            return None
        if not isinstance(name, str) or not name:
            return None
        match = _BYTE_TOKEN.fullmatch(name)
        if match:
            return bytes([int(match.group(1), 16)])
        alphabet = _byte_alphabet()
        if not all(c in alphabet for c in name):
            return None
        data = bytes(alphabet[c] for c in name)
        return data if data.decode("utf-8", "replace") == self._decode([token_id]) else None  # the tokenizer agrees

    def pieces(self, context: list[int], new: list[int], final: bool, cut: bool = False) -> list[Piece]:
        """One :class:`Piece` (text, partial) per id of ``new``, decoded after ``context``.

        A token whose piece ends inside a multi-byte character gets "" and partial=True (the token completing
        the character carries it). ``final`` without ``cut``: ``new`` is a lone run of labels (rejected drafts, a
        tree node) that no later token continues (:meth:`lone_pieces`): bytes of a character it leaves unfinished
        show in hex ("‹F0 9F›"), each on the token that holds them, never as U+FFFD. ``cut``: the text ends with
        ``new`` (a run stopped by max new tokens or a stop, maybe inside a character), so no later token will complete
        a character its last token starts: that token keeps only the text before the incomplete character
        (partial=True when nothing is left), and the text never ends in U+FFFD made by the cut.
        """
        if final and not cut:
            return self.lone_pieces(context, new)
        window = list(context[-self.window:])
        out: list[Piece] = []
        for j, token in enumerate(new):
            before = self._decode(window).rstrip(_REPLACEMENT)
            window.append(int(token))
            after = self._decode(window)
            piece = after[len(before):] if after.startswith(before) else self._decode([int(token)])
            last = final and j == len(new) - 1
            if piece.endswith(_REPLACEMENT) and last:  # cut inside a character: keep the text before it
                kept = piece.rstrip(_REPLACEMENT)
                out.append(Piece(kept, not kept))
            elif piece.endswith(_REPLACEMENT) and not last:
                out.append(Piece("", True))
            else:
                out.append(Piece(piece, False))
            window = window[-self.window:]
        return out

    def lone_pieces(self, context: list[int], new: list[int]) -> list[Piece]:
        """The pieces of ``new``, a run of tokens after ``context`` that no later token continues (rejected drafts, a
        tree node, a lookahead candidate). From the tokens' bytes (:meth:`token_bytes`): each whole character shows
        on the token holding its last byte (an unfinished one the context began included); a byte that ends no whole
        character, because the run ends first or the next byte does not continue it, shows in hex on its own token
        ("‹F0›", ``Piece.parts``); a token that shows nothing (its bytes complete a character later in the run) is
        partial. Without the bytes (another kind of tokenizer, a special token), the tokens decode as text, and a
        U+FFFD the run's last token ends with shows as "‹…›"."""
        if not new:
            return []
        before = list(context[-self.window:])
        known = [self.token_bytes(t) for t in [*before, *new]]
        if any(data is None for data in known):
            return self._lone_by_text(before, new)
        ctx = b"".join(known[:len(before)])
        carried = ctx[_unfinished_start(ctx):]  # an unfinished character the context began
        ends, total = [], len(carried)
        for data in known[len(before):]:
            total += len(data)
            ends.append(total)
        items: list[list] = [[] for _ in new]
        for end, item in _chars_by_end(carried + b"".join(known[len(before):])):
            token = next((i for i, stop in enumerate(ends) if end <= stop), len(new) - 1)
            items[token].append(item)
        return [_piece_of(chars) for chars in items]

    def _lone_by_text(self, context: list[int], new: list[int]) -> list[Piece]:
        """:meth:`lone_pieces` for a tokenizer whose bytes are unknown: decoded text, U+FFFD shown as "‹…›"."""
        out = self.pieces(context, new, final=False)
        if not new:
            return out
        window = [*context, *new]
        text = self._decode(window[-self.window - 1:-1]).rstrip(_REPLACEMENT)
        whole = self._decode(window[-self.window - 1:])
        last = whole[len(text):] if whole.startswith(text) else self._decode([int(new[-1])])
        if _REPLACEMENT in last:
            parts = tuple(b"" if chunk[0] == _REPLACEMENT else chunk
                          for chunk in re.split(f"({_REPLACEMENT}+)", last) if chunk)
            out[-1] = Piece("".join(byte_label(p) if isinstance(p, bytes) else p for p in parts), False, parts)
        else:
            out[-1] = Piece(last, False)
        return out
