"""The stopping rules of a run, applied token by token exactly as standard decoding applies them.

:class:`OutputTracker` holds one row's emitted ids and text: the commit phase of a pass pushes the accepted tokens
and the target's own token through it, and it stops at the first token that ends the run (EOS, a stop id, a stop
string, max_new_tokens), so a speculative pass never emits past where standard decoding would have stopped.
"""

from __future__ import annotations

from typing import Iterable

class OutputTracker:
    """Emits tokens one at a time and applies the stopping rules exactly as standard decoding would.

    Rules, checked after each token in order: the token is an EOS id ("eos", the id is kept in
    ``ids``); it is a stop token id ("stop", kept too); the decoded text now contains a stop string ("stop"; the
    text is cut before it); the
    budget is spent ("length"). Streaming text is released incrementally: a trailing incomplete UTF-8
    sequence (U+FFFD) and any suffix that could still grow into a stop string are held back.
    """

    def __init__(self, tokenizer, max_new_tokens: int, eos_ids: Iterable[int], stop_strings: tuple[str, ...],
                 stop_ids: Iterable[int] = ()):
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.eos_ids = frozenset(eos_ids)
        self.stop_ids = frozenset(stop_ids)
        self.stop_strings = stop_strings
        self.ids: list[int] = []
        self.finish_reason: str | None = None
        self._released = ""
        self._stop_at: int | None = None  # character index where a stop string begins

    def _decode(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)

    def push(self, tokens: list[int]) -> list[int]:
        """Append ``tokens`` one by one until a stopping rule fires; return the ones actually emitted."""
        taken: list[int] = []
        for token in tokens:
            if self.finish_reason is not None:
                break
            self.ids.append(token)
            taken.append(token)
            if token in self.eos_ids:
                self.finish_reason = "eos"
            elif token in self.stop_ids:
                self.finish_reason = "stop"
            elif self.stop_strings and self._find_stop() is not None:
                self.finish_reason = "stop"
            elif len(self.ids) >= self.max_new_tokens:
                self.finish_reason = "length"
        return taken

    def _find_stop(self) -> int | None:
        text = self._decode()
        hits = [text.find(s) for s in self.stop_strings if s in text]
        self._stop_at = min(hits) if hits else None
        return self._stop_at

    @property
    def text(self) -> str:
        """The output text so far (special tokens skipped; cut before a stop string)."""
        text = self._decode()
        return text[: self._stop_at] if self._stop_at is not None else text

    def release(self) -> str:
        """The newly final part of the text since the last call."""
        text = self.text
        if self.finish_reason is None:
            text = text.rstrip("\ufffd")
            for s in self.stop_strings:  # hold back a tail that may be the start of a stop string
                for n in range(min(len(s) - 1, len(text)), 0, -1):
                    if text.endswith(s[:n]):
                        text = text[:-n]
                        break
        if not text.startswith(self._released):
            return ""  # the decoder rewrote earlier text; wait for a stable prefix
        delta = text[len(self._released):]
        self._released = text
        return delta
