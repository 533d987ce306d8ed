"""Token HTML for the two output panes, built from engine events. Pure: no Gradio, no model.

Every rendered token is ``<span class="tok tok-KIND" data-kind=KIND data-pass=N title=...>``, KIND one of

- ``accepted``: a drafted token the target kept (green, solid underline);
- ``rejected``: the first drafted token the target refused (red, struck through, left visible), and the
  drafted tokens after it, which the target never judged (the same, faded);
- ``recovered``: the target's own token after a rejection (amber, dotted box);
- ``bonus``: the target's extra token when every drafted token was accepted (blue, double underline);
- ``target``: a plain target token (the prefill's token, every baseline token, and a pass with no draft).

Shape (underline, strike, box) distinguishes the kinds as well as hue. No token adds space around its text:
every other token has class ``tok-alt`` (a slightly different tint), so boundaries show without gaps that would
read as spaces. Passes are wrapped in
``<div class="pass" data-pass-index=N>`` (inline) so a thin separator shows each pass boundary; a pass whose
drafts were copied by lookup first (a head drafter's option) has class ``pass-copied`` and starts with a small “copy”
mark (CSS content, so not in the plain text); a pass whose draft suffix decoding copied from an earlier output of the
page visit (``draft_source`` "earlier") has class ``pass-earlier`` and a small “earlier” mark. A token's
``title`` (hover text) tells its pass and, where known, the target's and the draft's probability of it and the
uniform number drawn for its acceptance test; a lookahead pass's drafted tokens also say they came from the n-gram
pool (``draft_source`` "pool"), and a draft model with another tokenizer's that they were re-tokenized from its
vocabulary (``draft_source`` "retokenized"); where the two tokenizers split the text differently the token has class
``tok-resplit`` (a dotted top edge).

Token text is decoded as a continuation of the tokens before it, so byte-level pieces of a multi-byte
character and tokenizers that drop a leading space when decoding one token alone still read right: a token
that only starts a character shows nothing (class ``tok-partial``) and the token that completes it shows
the whole character, so the pane's plain text equals the decoded output. A run cut inside a character (max new
tokens reached between its bytes) never completes it: its last token keeps only the text before that character,
so neither pane ends in a U+FFFD the cut made (both are cut alike and still read the same); the token ids are
untouched. A rejected draft (never part of the text) that ends inside a character shows that character's bytes in hex
instead, e.g. “‹F0 9F›” in an ``<i class="tok-bytes">`` badge, and says so in its hover text: never U+FFFD.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from specviz.analysis.stepper import no_draft_reason
from specviz.core.events import PassEvent
from specviz.core.metrics import format_apart

KINDS = ("accepted", "rejected", "recovered", "bonus", "target")
_WINDOW = 6  # tokens of context to decode a piece against (a UTF-8 character spans at most 4 byte tokens)
_REPLACEMENT = "\ufffd"

SUFFIX_SOURCES = {  # a suffix decoding pass's draft_source -> the hover text added to its drafted tokens
    "prompt": "copied by suffix decoding from the prompt",
    "output": "copied by suffix decoding from earlier in this output",
    "earlier": "copied by suffix decoding from an earlier output of this page visit",
}

KIND_LABELS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "recovered": "recovered (target's token after a rejection)",
    "bonus": "bonus (all drafts accepted)",
    "target": "plain target token",
}



def time_card(spec, base) -> str:
    """The "Where the time went" card of a speculative run's :class:`RunStats` ``spec`` (``base``: the
    baseline's): the largest of its verify, draft and other times after the prefill as the headline with its
    share of the time and that share's bootstrap interval over the passes (:meth:`RunStats.share`; "one pass: no
    spread" before a second pass), the other two and the baseline's forwards below (totals on the runs' clocks)."""
    parts = {"verify": spec.verify_ms, "draft": spec.draft_ms, "other": spec.other_ms}
    total = sum(parts.values())
    name = max(parts, key=parts.get)
    share = f" ({_share_text(parts[name] / total, spec.share(name))})" if total > 0 else ""
    scale = largest_ms(*parts.values(), base.verify_ms)  # one unit for the whole card
    rest = html.escape(" · ".join(f"{k} {fmt_ms(v, scale)}" for k, v in parts.items() if k != name))
    headline = html.escape(fmt_ms(parts[name], scale))
    return _card("Where the time went", f"{headline} <small>{name}{html.escape(share)}</small>",
                 "speculative run after the prefill: target forwards (verify), drafting, and other (acceptance, "
                 "rollback, detokenization); the largest part is shown with its share of the time and that share's "
                 "95% bootstrap interval over the passes",
                 f"{rest} · baseline forwards {html.escape(fmt_ms(base.verify_ms, scale))}")


def _share_text(share: float, interval) -> str:
    """A share of the time with its interval, "62%; 58–66%", the share with as many decimals as its ends need to
    read apart (at most 2: "99.98%; 99.97–99.99%"); "62%; one pass: no spread" without an interval."""
    if interval is None:
        return f"{share:.0%}; {ONE_PASS}"
    low, high = format_apart(interval.low * 100, interval.high * 100, 0, 2)
    return f"{share * 100:.{len(low.partition('.')[2])}f}%; {low}–{high}%"


def ttft_html(stats, scale: float | None = None) -> str:
    """A run's time to first token, marked as the one measurement it is: "85 ms <small>(one measurement)</small>"
    (a run has one prefill: no repeats, so no spread to give); "–" before the prefill ends. ``scale``: the largest
    time to first token on the same card (ms), which chooses the unit (:func:`fmt_ms`)."""
    if not stats.curve_ms:  # no event yet: the prefill is still running
        return "–"
    shown = html.escape(fmt_ms(stats.ttft_ms, scale))
    return f'{shown} <small class="spread" style="white-space: nowrap">({ONE_MEASUREMENT})</small>'



def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in agreement: "1 prompt", "3 prompts" (``many``: an irregular plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"

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


def _fmt_prob(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _mark_retokenized(tokens: list[Token], event: PassEvent) -> None:
    """Hover text (and class ``tok-resplit`` where the two tokenizers split the text differently) for the drafted
    tokens of a pass whose draft model has another tokenizer (``event.draft_source == "retokenized"``)."""
    drafted = [token for token in tokens if token.kind in ("accepted", "rejected")]  # in draft order
    for i, token in enumerate(drafted):
        token.title += "\nre-tokenized from the draft's vocabulary (verified as a one-hot draft, q = 1)"
        if i < len(event.resplit) and event.resplit[i]:
            token.resplit = True
            token.title += "\nthe draft's tokenizer split this text differently (dotted top edge)"


def _detail_title(pass_index: int, position: int, drafted: int, verdict: str, detail, top_text: str | None) -> str:
    lines = [f"pass {pass_index} · draft {position + 1}/{drafted} · {verdict}"]
    if detail is not None:
        if detail.target_prob is not None and detail.draft_prob is not None:  # digits enough to tell p from q
            p_text, q_text = format_apart(detail.target_prob, detail.draft_prob, 3)
        else:
            p_text, q_text = _fmt_prob(detail.target_prob), _fmt_prob(detail.draft_prob)
        lines.append(f"target p = {p_text} · draft q = {q_text}")
        if detail.uniform is not None:
            ratio = detail.target_prob / detail.draft_prob if detail.draft_prob > 0 else float("inf")
            test = "accept" if detail.uniform < min(1.0, ratio) else "reject"
            u_text, r_text = format_apart(detail.uniform, min(1.0, ratio), 3)
            lines.append(f"uniform u = {u_text} vs min(1, p/q) = {r_text} → {test}")
        if top_text is not None:
            lines.append(f"target's top token here: {top_text!r}")
    return "\n".join(lines)


@dataclass
class Pane:
    """The rendered tokens of one run, grouped by pass; feed it events with :meth:`add`."""

    tokenizer: object
    separators: bool = True  # a thin bar between passes (off for the baseline: one token per pass)
    passes: list[list[Token]] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    finished: bool = False
    copied_passes: set[int] = field(default_factory=set)  # passes whose drafts lookup first copied
    earlier_passes: set[int] = field(default_factory=set)  # passes suffix decoding copied from an earlier output

    def __post_init__(self) -> None:
        self.decoder = PieceDecoder(self.tokenizer)

    # ------------------------------------------------------------------------------------------- building
    def add(self, event: PassEvent) -> None:
        """Render one event's tokens (speculative or baseline)."""
        if event.draft_source == "lookup" and event.draft_ids:
            self.copied_passes.add(event.index)
        if event.draft_source == "earlier" and event.draft_ids:
            self.earlier_passes.add(event.index)
        final = event.finish_reason is not None
        tokens = self._pass_tokens(event, final)
        self.passes.append(tokens)
        self.output_ids.extend(int(t) for t in event.emitted_ids)
        self.finished = self.finished or final

    def _emitted(self, ids: list[int], final: bool) -> list[tuple[str, bool]]:
        """The pieces of a pass's emitted tokens; at the run's end (``final``) an incomplete last character is held
        back for good (:meth:`PieceDecoder.pieces` with ``cut``)."""
        return self.decoder.pieces(self.output_ids, ids, final, cut=final)

    def _token(self, kind: str, event: PassEvent, token_id: int, piece: Piece, title: str,
               unjudged: bool = False) -> Token:
        if piece.parts:  # a lone label with bytes of an unfinished character, shown in hex
            shown = " ".join(byte_label(part) for part in piece.parts if isinstance(part, bytes))
            title += f"\n{shown}: bytes of an unfinished character (the draft stopped before its other bytes), in hex"
        return Token(kind, event.index, int(token_id), piece.text, title, partial=piece.partial, unjudged=unjudged,
                     special=int(token_id) in self.decoder.special_ids, parts=piece.parts)

    def _pass_tokens(self, event: PassEvent, final: bool) -> list[Token]:
        emitted = list(event.emitted_ids)
        pieces = self._emitted(emitted, final)
        if not event.draft_ids:  # prefill, baseline token, or a pass whose drafter proposed nothing
            return [self._token("target", event, t, p, self._target_title(event, i)) for i, (t, p) in
                    enumerate(zip(emitted, pieces))]
        n, m = event.num_accepted, len(event.draft_ids)
        out: list[Token] = []
        for i in range(min(n, len(emitted))):
            detail = event.details[i] if i < len(event.details) else None
            title = _detail_title(event.index, i, m, "accepted", detail, None)
            out.append(self._token("accepted", event, emitted[i], pieces[i], title))
        cut = len(emitted) <= n  # the run ended inside the accepted tokens: nothing after the end is shown
        if n < m and not cut:  # the first rejected draft token (judged) and the never-judged ones after it
            context = self.output_ids + emitted[:n]
            rejected = list(event.draft_ids[n:])
            rejected_pieces = self.decoder.pieces(context, rejected, final=True)
            for j, (token, piece) in enumerate(zip(rejected, rejected_pieces)):
                i = n + j
                detail = event.details[i] if i < len(event.details) else None
                if j == 0:
                    top = self._top_text(detail, context)
                    title = _detail_title(event.index, i, m, "rejected", detail, top)
                else:
                    title = f"pass {event.index} · draft {i + 1}/{m} · never judged (after the first rejection)"
                out.append(self._token("rejected", event, token, piece, title, unjudged=j > 0))
        if len(emitted) > n:
            kind = event.next_kind if event.next_kind in ("recovered", "bonus") else "target"
            out.append(self._token(kind, event, emitted[n], pieces[n], self._next_title(event, kind)))
        if event.draft_source == "lookup":  # a head drafter with lookup first copied this pass
            for token in out:
                if token.kind in ("accepted", "rejected"):
                    token.title += "\ncopied by n-gram lookup: the text's last tokens occurred before"
        if event.draft_source in SUFFIX_SOURCES:  # suffix decoding: where its chain was copied from
            for token in out:
                if token.kind in ("accepted", "rejected"):
                    token.title += "\n" + SUFFIX_SOURCES[event.draft_source]
        if event.draft_source == "pool":  # lookahead decoding: the winning candidate came from its n-gram pool
            for token in out:
                if token.kind in ("accepted", "rejected"):
                    token.title += ("\nfrom lookahead decoding's n-gram pool: an n-gram the target's own Jacobi "
                                    "window made earlier, starting with the last committed token")
        if event.draft_source == "retokenized":  # a draft model with another tokenizer
            _mark_retokenized(out, event)
        return out

    def _top_text(self, detail, context: list[int]) -> str | None:
        """The target's top token at a rejected position, as a label after ``context`` (no U+FFFD)."""
        if detail is None:
            return None
        return self.decoder.pieces(context, [int(detail.target_top_id)], final=True)[0].text

    @staticmethod
    def _target_title(event: PassEvent, i: int) -> str:
        if event.kind == "prefill":
            title = f"prefill (pass 0): the target's first token, after {event.t_end_ms:.0f} ms"
        elif event.run == "baseline":
            title = f"baseline token {event.num_generated} · one target forward each"
        else:
            title = (f"pass {event.index} · nothing drafted ({no_draft_reason(event)}): a plain target token, "
                     "neither recovered nor bonus")
        if event.near_tie_gap is not None:
            title += f"\ntop-2 logit gap {event.near_tie_gap:.3f}"
        return title

    @staticmethod
    def _next_title(event: PassEvent, kind: str) -> str:
        if kind == "recovered":
            return (f"pass {event.index} · recovered: the target's token at the first rejection\n"
                    f"(greedy: its top choice; sampling: drawn from norm(max(0, p − q)))")
        if kind == "bonus":
            drafts = "the one draft was" if len(event.draft_ids) == 1 else f"all {len(event.draft_ids)} drafts were"
            return (f"pass {event.index} · bonus: {drafts} accepted, "
                    f"so the same target pass gives one more token")
        return f"pass {event.index} · target token"

    # ------------------------------------------------------------------------------------------- output
    @property
    def text(self) -> str:
        """The plain text of the emitted tokens (rejected ones excluded)."""
        return "".join(t.text for p in self.passes for t in p if t.kind != "rejected")

    def count(self, kind: str) -> int:
        """How many rendered tokens have ``kind``."""
        return sum(1 for p in self.passes for t in p if t.kind == kind)

    def html(self) -> str:
        """The tokens as HTML (one inline block per pass). Every other shown token has class ``tok-alt`` (a
        slightly different tint), so token boundaries show without gaps that would read as spaces. A pass whose
        tokens all show nothing (bytes of a character a later pass completes, or held back at a cut) is marked
        ``data-empty`` and the first pass that shows text ``data-lead``: style.css draws neither a pass of their own
        nor a pass bar before the text's start."""
        parts = [f'<div class="tokens{"" if self.separators else " no-sep"}">']
        shown = 0
        for tokens in self.passes:
            if not tokens:
                continue
            index = tokens[0].pass_index
            visible = any(not t.partial for t in tokens)
            mark = "" if visible and shown else " data-lead" if visible else " data-empty"
            if index in self.copied_passes:  # lookup first: this pass verified a copy, not the head's guess
                parts.append(f'<div class="pass pass-copied" data-pass-index="{index}" data-source="lookup"{mark}>'
                             '<i class="copied-mark" aria-hidden="true" title="copied by n-gram lookup"></i>')
            elif index in self.earlier_passes:  # suffix decoding copied this pass's draft from an earlier output
                parts.append(f'<div class="pass pass-earlier" data-pass-index="{index}" data-source="earlier"{mark}>'
                             '<i class="earlier-mark" aria-hidden="true" title="copied from an earlier output"></i>')
            else:
                parts.append(f'<div class="pass" data-pass-index="{index}"{mark}>')
            for t in tokens:
                parts.append(token_html(t, alt=shown % 2 == 1))
                shown += not t.partial
            parts.append("</div>")
        if not self.finished and self.passes:
            parts.append('<i class="cursor" aria-hidden="true"></i>')
        parts.append("</div>")
        return "".join(parts)


def text_html(text: str, breaks: bool = True) -> str:
    """Escape a token's text; mark each newline with a visible ⏎ (CSS content, so not in the plain text).
    ``breaks`` False: the ⏎ only, no line break (a rejected draft is not part of the text's layout)."""
    escaped = html.escape(text, quote=False)
    return escaped.replace("\n", '<i class="nl" aria-hidden="true"></i>' + ("\n" if breaks else ""))


def token_html(token: Token, alt: bool = False) -> str:
    """One token's span (see the module docstring for the attributes); ``alt`` adds class ``tok-alt`` (the
    alternate tint of every other token)."""
    classes = ["tok", f"tok-{token.kind}"]
    if alt:
        classes.append("tok-alt")
    if token.unjudged:
        classes.append("tok-unjudged")
    if token.partial:
        classes.append("tok-partial")
    if token.special:
        classes.append("tok-special")
    if token.resplit:
        classes.append("tok-resplit")
    if token.text and not token.text.strip():
        classes.append("tok-space")
    title = html.escape(token.title, quote=True).replace("\n", "&#10;")
    breaks = token.kind != "rejected"
    body = "".join(f'<i class="tok-bytes">{html.escape(byte_label(part))}</i>' if isinstance(part, bytes) else
                   text_html(part, breaks) for part in token.parts) if token.parts else text_html(token.text, breaks)
    return (f'<span class="{" ".join(classes)}" data-kind="{token.kind}" data-pass="{token.pass_index}" '
            f'data-id="{token.token_id}" title="{title}">{body}</span>')


def legend_html() -> str:
    """The colour/shape legend (samples carry classes only, no data-kind, so they never count as tokens)."""
    items = "".join(
        f'<span class="legend-item"><b class="tok tok-{kind}">{sample}</b> {html.escape(label)}</span>'
        for kind, sample, label in (
            ("accepted", "accepted", "drafted, kept by the target"),
            ("rejected", "rejected", "drafted, refused (struck through)"),
            ("recovered", "recovered", "target's token after a rejection"),
            ("bonus", "bonus", "free extra token: all drafts kept"),
            ("target", "target", "plain target token (prefill, baseline, a pass with nothing drafted)"),
        )
    )
    earlier = ('<span class="legend-item"><i class="earlier-mark" aria-hidden="true"></i> draft copied from an '
               'earlier output (suffix decoding)</span>')
    resplit = ('<span class="legend-item"><b class="tok tok-accepted tok-resplit">split</b> split differently by a '
               'draft model with another tokenizer</span>')
    return (f'<div class="legend">{items}<span class="legend-item"><b class="pass-sample"></b> pass boundary</span>'
            f'{earlier}{resplit}</div>')


def pane_html(header: str, body: str, note: str = "") -> str:
    """A pane: a header line (run name, live figures), an optional note, then the token body in a scroller
    that stays at the bottom while tokens arrive (column-reverse keeps the newest text in view)."""
    note_html = f'<div class="pane-note">{note}</div>' if note else ""
    return (f'<div class="pane"><div class="pane-header">{header}</div>{note_html}'
            f'<div class="pane-body">{body}</div></div>')


def placeholder_html(message: str) -> str:
    """An empty pane's message (escaped)."""
    return f'<div class="pane"><div class="pane-empty">{html.escape(message)}</div></div>'


def pane_header(title: str, subtitle: str, figures: list[tuple]) -> str:
    """A pane's header: title, subtitle and live figures (label, value or None, format[, spread]); a label given as
    (one, many), e.g. ("pass", "passes"), agrees with its count ("1 pass", "3 passes"); ``spread``
    (plain text, e.g. "38.0–44.1" or "one pass") follows the value in small type, as :func:`spread_html`'s."""
    def cell(label, value, fmt: str, spread: str = "") -> str:
        if isinstance(label, tuple):  # (one, many): the word that agrees with a count
            label = label[0] if value == 1 else label[1]
        shown = "–" if value is None else html.escape(fmt.format(value))
        small = (f' <small class="figure-spread" style="white-space: nowrap">({html.escape(spread)})</small>'
                 if spread and value is not None else "")
        return f'<span class="figure"><b>{shown}</b>{small} {html.escape(label)}</span>'

    cells = "".join(cell(*figure) for figure in figures)
    sub = f'<span class="pane-sub">{html.escape(subtitle)}</span>' if subtitle else ""
    return f'<span class="pane-title">{html.escape(title)}</span>{sub}<span class="pane-figures">{cells}</span>'


# ------------------------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Comparison:
    """Whether the speculative output's ids equal the baseline's.

    ``identical``: True / False, or None while undecided (a run still going with equal ids so far).
    ``first_diff``: 0-based position of the first differing token; ``gap``: the baseline's top-two logit gap
    there (a small gap is a near-tie that tiny numeric differences can flip).
    """

    identical: bool | None
    compared: int
    first_diff: int | None = None
    spec_token: str | None = None
    base_token: str | None = None
    gap: float | None = None
    message: str = ""


def compare_outputs(spec_ids: list[int], base_ids: list[int], base_gaps: list[float | None], tokenizer,
                    *, greedy: bool, finished: bool) -> Comparison:
    """Compare two outputs token by token (see :class:`Comparison`)."""
    n = min(len(spec_ids), len(base_ids))
    diff = next((i for i in range(n) if spec_ids[i] != base_ids[i]), None)
    if diff is None and finished and len(spec_ids) != len(base_ids):
        diff = n
    if diff is None:
        if finished:
            what = "Identical token ids" if greedy else "Identical token ids (same seed)"
            every = "the one token matches" if n == 1 else f"all {n} tokens match"
            return Comparison(True, n, message=f"{what}: {every} the baseline.")
        return Comparison(None, n, message=f"Identical so far ({plural(n, 'token')}).")

    def piece(ids: list[int]) -> str | None:
        return repr(tokenizer.decode([ids[diff]], skip_special_tokens=False)) if diff < len(ids) else "(ended)"

    gap = base_gaps[diff] if diff < len(base_gaps) else None
    spec_tok, base_tok = piece(spec_ids), piece(base_ids)
    if not greedy:
        message = (f"Sampling: the two outputs differ from token {diff + 1} on (the runs draw their random numbers in "
                   f"a different order); "
                   f"the speculative output still follows the target's distribution exactly.")
    else:
        message = f"Outputs differ at token {diff + 1}: speculative {spec_tok} vs baseline {base_tok}."
        if gap is not None:
            message += (f" The baseline's top-two logit gap there is {gap:.3f}"
                        + (" — a near-tie, which tiny numeric differences between a (k+1)-token verify forward"
                           " and a one-token forward can flip." if gap < 0.5 else "."))
    return Comparison(False, n, diff, spec_tok, base_tok, gap, message)


# ------------------------------------------------------------------------------------------- stats


def _fmt(value, fmt: str, none: str = "–") -> str:
    return none if value is None else fmt.format(value)


def fmt_ms(ms: float | None, scale: float | None = None) -> str:
    """A duration: "85 ms", or "12.3 s" from 10 s up. ``scale``: the largest duration shown beside it (in ms), which
    chooses the unit instead, so one card reads in one unit ("5.9 s · baseline: 12.3 s", not "5932 ms"); a time
    above 0 that seconds would show as 0.0 reads "< 0.1 s"."""
    if ms is None:
        return "–"
    if max(ms, scale or 0) < 10_000:
        return f"{ms:.0f} ms"
    return "< 0.1 s" if 0 < ms < 50 else f"{ms / 1000:.1f} s"


def largest_ms(*values: float | None) -> float | None:
    """The largest of the durations given (ms; None ignored), the ``scale`` of :func:`fmt_ms` for one card."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


ONE_PASS = "one pass: no spread"
"""What a per-pass figure shows beside it before a second pass gives it a spread."""
ONE_MEASUREMENT = "one measurement"
"""What a figure measured once per run (time to first token: one prefill) shows beside it: no spread to give."""


def spread_text(interval, decimals: int = 1, single: str = ONE_PASS) -> str:
    """An interval's ends as text, "38.0–44.1" (:func:`~specviz.core.metrics.format_apart`: one more decimal where
    that makes them read apart, as the Arena's ranges; ends that still read alike say the spread is below that
    precision); ``single`` when there is no interval (None)."""
    if interval is None:
        return single
    low, high = format_apart(interval.low, interval.high, decimals, decimals + 1)
    return f"{low}–{high}"


def spread_html(value: float | None, interval, fmt: str = "{:.1f}", decimals: int = 1, single: str = ONE_PASS) -> str:
    """A measured figure and its spread, compactly: "41.2 <small>(38.0–44.1)</small>" (``interval``: a
    :class:`~specviz.core.metrics.Interval` over the run's passes), or "41.2 <small>(one pass: no spread)</small>"
    where there is none yet (``single``); "–" without a value."""
    if value is None:
        return "–"
    return (f'{fmt.format(value)} <small class="spread" style="white-space: nowrap">'
            f'({html.escape(spread_text(interval, decimals, single))})</small>')


def rate_pair_html(spec, base, decode: bool = True) -> str:
    """Both runs' rates with their spreads, "41.2 (38.0–44.1) vs 30.1 (29.0–31.3)": after the prefill
    (``decode``, :meth:`~specviz.core.metrics.RunStats.decode_rate`) or with it (:meth:`RunStats.rate`)."""
    def one(stats) -> str:
        value = stats.decode_tokens_per_s if decode else stats.tokens_per_s
        return spread_html(value, stats.decode_rate() if decode else stats.rate())

    return f"{one(spec)} <small>vs</small> {one(base)}"


def _card(label: str, value: str, definition: str, extra: str = "", cls: str = "") -> str:
    return (f'<div class="card {cls}"><div class="card-label">{html.escape(label)}</div>'
            f'<div class="card-value">{value}</div>'
            + (f'<div class="card-extra">{extra}</div>' if extra else "")
            + f'<div class="card-def">{html.escape(definition)}</div></div>')


SPEEDUP_DEFINITION = ("speculative ÷ baseline decoding rate: tokens after the first ÷ time after the prefill, each "
                      "run on its own clock; the interval resamples both runs' passes (bootstrap)")
RATES_DEFINITION = ("speculative vs baseline decoding rate, own clocks; in brackets each rate's 95% bootstrap interval "
                    "over its run's passes (the prefill included: each prefill is one measurement, taken as measured)")
END_TO_END_DEFINITION = ("tokens/s ratio with the prefill (time to first token) included: a long prompt's prefill "
                         "dominates it, so read the decoding speedup; in brackets the 95% bootstrap interval over both "
                         "runs' passes (each prefill is one measurement, taken as measured)")
TTFT_DEFINITION = "the prefill forward over the prompt: one measurement per run (a single prefill, so no spread)"


BUSY_NOTE = ("Other programs on the same CPUs slow a one-token step more than a wide pass, so they flatter the "
             "speculative run: a gain measured then may be smaller on a quiet machine, a loss larger. A browser "
             "showing this page on the same machine counts (it redraws the panes as they stream); the Arena, which "
             "does not stream tokens, or a browser on another device, measure without it.")
VERDICT_RULE = ("How it is read: the whole interval above 1 is faster, below 1 slower, however wide; an interval "
                "across 1 is about the same when narrow (high ÷ low at most 1.2) on a quiet machine, else too noisy "
                "to tell. The number is shown in every case.")


def verdict_card(judgement) -> str:
    """The Live headline card (HTML) of a judged run (:class:`specviz.core.metrics.SpeedupJudgement` with an
    interval): the measured speedup large with its word ("2.51× faster"; "1.05× too noisy to tell" keeps the
    number), under it the interval and what disturbed the timings ("95 % 1.48–3.98× · other programs used 74% of
    the CPUs"), and the long explanation folded in a ``<details>`` element. Green for faster, red for slower,
    neutral otherwise."""
    reading = judgement.reading
    cls = {"faster": "good", "slower": "bad", "too noisy to tell": "noisy"}.get(reading.word, "neutral")
    figure = (f'<span class="sv-verdict-figure">{reading.value:.2f}×</span> '
              f'<span class="sv-verdict-word">{html.escape(reading.word)}</span>')
    under = " · ".join(html.escape(part) for part in (reading.span(), reading.reason) if part)
    why = [judgement.describe(), VERDICT_RULE, SPEEDUP_DEFINITION] + ([BUSY_NOTE] if reading.reason else [])
    details = ('<details class="sv-verdict-why"><summary>How this is judged</summary>'
               + "".join(f"<p>{html.escape(text)}</p>" for text in why) + "</details>")
    return (f'<div class="card hero {cls} sv-verdict" title="{html.escape(reading.headline(), quote=True)}">'
            f'<div class="card-label">Decoding speedup</div><div class="card-value">{figure}</div>'
            f'<div class="card-extra sv-verdict-span">{under}</div>{details}</div>')


def speedup_cards(spec, base, judgement=None) -> list[str]:
    """The headline cards of a run with a drafter: the decoding speedup (after the prefill) with its interval
    (:func:`verdict_card`: the number shown whatever the verdict, never in green or red when too noisy to tell),
    or "too short to judge" instead of a number, the end-to-end ratio beside it (prefill included, never
    coloured), and both runs' rates. ``judgement`` is :func:`specviz.core.metrics.judge_decode_speedup` of the runs
    (computed here when None)."""
    from specviz.core.metrics import end_to_end_interval, judge_decode_speedup, speedup

    j = judgement if judgement is not None else judge_decode_speedup(spec, base)
    running = spec.finish_reason is None  # the speculative run still going: its verdict is not in yet
    if j.verdict == "too short":
        words = "measuring… (judged once enough passes are in)" if running else j.describe()
        hero = _card("Decoding speedup", "–", SPEEDUP_DEFINITION, html.escape(words), cls="hero short")
        end = _card("End to end", "–", "tokens/s ratio with the prefill included: not judged either")
    else:
        hero = verdict_card(j)
        value = speedup(spec, base)
        ratio = spread_html(value, end_to_end_interval(spec, base), "{:.2f}×", 2)
        end = _card("End to end", ratio if j.verdict != "too noisy" else
                    f"too noisy <small>({_fmt(value, '{:.2f}×')} measured)</small>", END_TO_END_DEFINITION)
    rates = _card("Tokens/s after the prefill", rate_pair_html(spec, base), RATES_DEFINITION,
                  f"prefill included: {rate_pair_html(spec, base, decode=False)}")
    return [hero, end, rates]


LOOKAHEAD_DEFINITION = ("lookahead decoding: k = N−1, a candidate's length; drafted = the candidates' tokens the "
                        "target verified (every candidate of the pass, one per pass when sampling); the Jacobi "
                        "window's tokens ride in the same forwards but are never verified, so they are counted here "
                        "and not as drafted")


def lookahead_cards(spec) -> list[str]:
    """The lookahead card of a run whose passes carried a Jacobi window (``spec.window_tokens`` > 0), else none:
    the window's tokens per pass (fed to the target for the Jacobi guesses, never verified nor emitted: not to be
    read as tokens per pass), with the definitions of k and "drafted" for lookahead."""
    if not getattr(spec, "window_tokens", 0) or not spec.passes:
        return []
    per_pass = spec.window_tokens / spec.passes
    return [_card("Window tokens per pass (not verified)", f"{per_pass:.1f} <small>window tokens / pass</small>",
                  LOOKAHEAD_DEFINITION,
                  f"{plural(spec.window_tokens, 'window token')} in {plural(spec.passes, 'pass', 'passes')} · "
                  f"{plural(spec.drafted, 'candidate token')} verified (drafted), {spec.accepted} accepted")]


TOKENS_PER_PASS_DEFINITION = ("emitted ÷ target passes, bonus included; expected (1 − α^(m+1)) ÷ (1 − α), "
                              "m = tokens drafted per pass on average (m + 1 when α = 1)")
"""The "Tokens per pass" card's definition: the formula :attr:`~specviz.core.metrics.RunStats.expected_tokens_per_pass`
computes (Leviathan et al. 2023, eq. 1, with the run's mean drafted length m for k: a pass may draft fewer than k)."""


def expected_text(spec) -> str:
    """The "Tokens per pass" card's expected value with the α and m it is computed from, so the formula of
    :data:`TOKENS_PER_PASS_DEFINITION` can be checked by hand: "expected from α 0.92, m 3.41: 3.85"; "expected: –
    (nothing judged yet)" before the target judged a draft."""
    expected = spec.expected_tokens_per_pass
    if expected is None:
        return "expected: – (nothing judged yet)"
    return f"expected from α {spec.alpha:.2f}, m {spec.mean_proposed:.2f}: {expected:.2f}"


def stats_html(spec, base, comparison: Comparison, *, greedy: bool, stopped: bool = False, judgement=None) -> str:
    """The figures of a run (spec RunStats or None when there was no drafter, baseline RunStats), each card
    with its definition underneath. ``stopped``: the user stopped the run, so an output check that found no
    difference reads "so far" instead of waiting for the end. ``judgement``: the decoding speedup's
    (see :func:`speedup_cards`)."""
    esc = html.escape
    cards = []
    if spec is not None:
        cards.extend(speedup_cards(spec, base, judgement))
        drafted_what = (f"{spec.accepted} accepted of {spec.drafted} drafted; tree passes count every node verified "
                        f"({_fmt(spec.mean_nodes_per_tree, '{:.1f}')} per tree)" if spec.tree_passes
                        else f"{spec.accepted} of {spec.drafted} drafted")
        cards.append(_card("Acceptance rate", _fmt(spec.acceptance_rate, "{:.0%}"),
                           "accepted ÷ drafted (bonus excluded); only committed drafts count: drafts after the end "
                           "(EOS, stop, max tokens) are neither", drafted_what))
        cards.extend(lookahead_cards(spec))
        cards.append(_card("Per-token α", _fmt(spec.alpha, "{:.2f}"),
                           "accepted ÷ (accepted + rejections): only positions the target judged"))
        cards.append(_card("Tokens per pass", _fmt(spec.tokens_per_pass, "{:.2f}"), TOKENS_PER_PASS_DEFINITION,
                           f"{expected_text(spec)} · {plural(spec.passes, 'target pass', 'target passes')} vs "
                           f"{plural(base.passes, 'baseline step')}"))
        scale = largest_ms(*(run.ttft_ms for run in (spec, base) if run.curve_ms))  # one unit for the card
        cards.append(_card("Time to first token", ttft_html(spec, scale), TTFT_DEFINITION,
                           f"baseline: {ttft_html(base, scale)}"))
        cards.append(time_card(spec, base))
        cards.append(_card("Finish reason", f"{esc(spec.finish_reason or '…')} <small>/</small> "
                           f"{esc(base.finish_reason or '…')}", "speculative / baseline: eos, stop string or "
                           "max new tokens (length)"))
    else:  # drafter "none": one run, standard decoding; nothing is drafted, so there is nothing to compare
        cards.append(_card("Tokens/s after the prefill", spread_html(base.decode_tokens_per_s, base.decode_rate()),
                           "tokens after the first ÷ time after the prefill, own clock (the pane's figure); in "
                           "brackets its 95% bootstrap interval over the run's passes",
                           f"prefill included: {spread_html(base.tokens_per_s, base.rate())}", cls="hero"))
        cards.append(_card("Time to first token", ttft_html(base), TTFT_DEFINITION))
        cards.append(_card("Finish reason", esc(base.finish_reason or "…"), "eos, stop string or length"))
        cards.append(_card("Standard decoding only", "no comparison", "drafter “none” runs the target alone, one "
                           "forward per token: the pane on the right is the whole run",
                           "Nothing is drafted, so there is no acceptance, tokens per pass (1 by definition), speedup "
                           "or output check, and only the latency and time charts are drawn. Pick a "
                           "drafter to race it against this standard decoding.", cls="wide none-run"))
        return f'<div class="stats">{"".join(cards)}</div>'
    mark = {True: "✓", False: "✗", None: "…"}[comparison.identical]
    cls = {True: "good", False: "warn", None: ""}[comparison.identical]
    if stopped and comparison.identical is None:
        mark, cls = ("✓ so far", "good") if greedy else ("– (stopped)", "")
    if not greedy and comparison.identical is False:  # expected when sampling: same distribution, other draws
        mark, cls = "≠ ids, same distribution", ""
    title = "Greedy output = baseline?" if greedy else "Output vs baseline (sampling)"
    rule = ("speculative decoding must not change the output: greedy ids are the baseline's" if greedy else
            "sampling draws other random numbers in each run, so the ids may differ; what must not change is the "
            "distribution they are drawn from (the Batching tab's check tests it)")
    cards.append(_card(title, mark, rule, esc(comparison.message), cls=f"wide {cls}"))
    return f'<div class="stats">{"".join(cards)}</div>'


def status_html(message: str, kind: str = "info", notes=()) -> str:
    """The status line: kind is busy, wait, done, error or info; ``notes`` (what was changed in the input, e.g.
    a prompt cut to fit) follow it, one per line. The icon and message sit in one span (``status-text``: the Live
    tab's compact copy under Generate clamps it to two lines). Everything is escaped: a message may quote user
    input."""
    icon = {"busy": '<i class="spinner" aria-hidden="true"></i>', "wait": "⏳", "done": "✓", "error": "⚠",
            "info": "ℹ"}.get(kind, "")
    extra = "".join(f'<br><small class="status-note">ℹ {html.escape(note)}</small>' for note in notes if note)
    return (f'<div class="status status-{kind}" role="status"><span class="status-text">{icon} {html.escape(message)}'
            f'</span>{extra}</div>')


def scroll_box(table: str, label: str, title: str = "") -> str:
    """``table`` (HTML) in a box that scrolls sideways when the table is wider than the page allows (a phone): the
    page itself never scrolls sideways, and while part of the table is hidden on one side a shade on that edge says
    so (``assets/head.html`` marks the frame ``data-sv-more``; ``style.css`` draws it). The box can take keyboard
    focus (arrow keys scroll it); ``label`` (plain text) names it for screen readers. ``title`` (HTML, optional)
    stands above the box, so it stays readable while the table scrolls."""
    head = f'<div class="sv-scroll-title">{title}</div>' if title else ""
    return (f'{head}<div class="sv-scroll-frame"><div class="sv-scroll" role="region" tabindex="0" '
            f'aria-label="{html.escape(label, quote=True)}">{table}</div></div>')


def history_speedup(row: dict) -> str:
    """The history's speedup cell (HTML): the decoding speedup with its interval when it could be judged ("1.25×
    (1.10–1.40)", ``speedup_interval``); a too-noisy one keeps its measured number, muted and on one line ("1.12×
    (too noisy)", ``speedup_measured``), its reason in the title (``speedup_reason``: "1.12× measured, too noisy to
    tell: 0.85–1.40× spans 1"; shown on hover, and on a tap by ``assets/head.html``); else the ``speedup_note``
    ("too short") or "–"."""
    value, interval = row.get("speedup"), row.get("speedup_interval")
    if value is not None:
        spread = " ({}–{})".format(*format_apart(*interval)) if interval else ""
        return html.escape(f"{value:.2f}×{spread}")
    note, measured = row.get("speedup_note"), row.get("speedup_measured")
    if note == "too noisy" and measured is not None:
        reason = f": {row['speedup_reason']}" if row.get("speedup_reason") else ""
        title = html.escape(f"{measured:.2f}× measured, too noisy to tell{reason}", quote=True)
        return (f'<span class="hist-noisy" title="{title}" style="color: var(--body-text-color-subdued)">'
                f'{html.escape(f"{measured:.2f}× (too noisy)")}</span>')
    return html.escape(note or "–")


def history_rate(row: dict, key: str) -> str:
    """The history's tokens/s cell (HTML) for ``key`` ("spec_tps" or "base_tps", after the prefill): the rate with
    its bootstrap interval over the run's passes under it ("20.4" over "(18.1–22.0)", ``<key>_interval``: (low,
    high)), or "(one pass)" where the run had a single pass (interval None), the rate alone for a row that keeps no
    interval; "–" without a rate."""
    value = row.get(key)
    if value is None:
        return "–"
    if f"{key}_interval" not in row:
        return f"{value:.1f}"
    ends = row[f"{key}_interval"]
    spread = "one pass" if ends is None else "–".join(format_apart(*ends, 1, 2))
    return f'{value:.1f}<br><small class="spread" style="white-space: nowrap">({spread})</small>'


_LOOKAHEAD_K = re.compile(r"^k = (\d+) \(N−1\)( or a plain step \(auto\))?( · W = \d+, N = \d+, G = \d+)?$")


def history_k(k: str) -> str:
    """The history's k cell: a lookahead run's long k label ("k = 2 (N−1) or a plain step (auto) · W = 3, N = 3,
    G = 2", :func:`app.live._k_label`) shortened to "k = 2 or step (auto)" or "k = 2 (N−1)" (W, N and G are in the
    drafter cell already); any other label as it is."""
    match = _LOOKAHEAD_K.match(k)
    if not match:
        return k
    return f"k = {match.group(1)} or step (auto)" if match.group(2) else f"k = {match.group(1)} (N−1)"


def _history_k_cell(k: str) -> str:
    """The history's k cell (HTML) for the label ``k``: on one line ("k = 2 or step (auto)"); in a label of several
    parts ("k = 4 (adaptive) · tree of 10 nodes, depth ≤ k · gate 0.15") only the first, k itself, stays on one
    line, and the rest wraps as text does (a tree run's label would otherwise widen the table past its panel)."""
    first, *rest = [html.escape(part) for part in k.split(" · ")]
    if not rest:
        return f'<td class="hist-k" style="white-space: nowrap">{first}</td>'
    return f'<td class="hist-k"><span style="white-space: nowrap">{first}</span> · {" · ".join(rest)}</td>'


def history_html(history: list[dict]) -> str:
    """The table of this session's runs, newest first. A row's speedup is :func:`history_speedup`: the decoding
    speedup with its interval when it could be judged, the measured number with why it is too noisy to tell, or
    "too short". The k cell never wraps inside a part of its label (:func:`history_k`, :func:`_history_k_cell`).
    The temperature cell also gives a sampled run's seed (``seed``) and the generation settings that differ from
    their defaults (``settings``). The columns are sized to fit the Live tab's results column at a 1400 px window
    (``assets/style.css``, ``.history``); a phone scrolls the table inside its box."""
    if not history:
        return ""
    head = ("<tr><th>drafter</th><th>k</th><th>temperature, settings</th><th>tokens</th><th>acceptance</th>"
            "<th>tokens/<wbr>pass</th><th>spec tok/s*</th><th>base tok/s*</th><th>decoding speedup*</th>"
            "<th>same ids</th></tr>")
    rows = []
    for row in history:
        same = {True: "✓", False: "✗", None: "–"}[row.get("identical")]
        if row.get("stopped"):
            same = "✓ so far" if row.get("identical") is None and row.get("temperature") == 0 else same
        cells = [f'<td class="hist-drafter">{html.escape(str(row["drafter"]))}</td>',  # wide enough: style.css
                 _history_k_cell(history_k(str(row["k"] or "–")))]
        cells += [f"<td>{html.escape(str(v))}</td>" for v in (
            f"{row['temperature']:g}" + (f" · seed {row['seed']}" if row.get("seed") is not None else "")
            + (f" · {row['settings']}" if row.get("settings") else ""),
            f"{row['tokens']} (stopped)" if row.get("stopped") else row["tokens"],
            _fmt(row["acceptance"], "{:.0%}"), _fmt(row["tokens_per_pass"], "{:.2f}"))]
        cells += [f"<td>{history_rate(row, key)}</td>" for key in ("spec_tps", "base_tps")]
        cells += [f'<td class="hist-speedup">{history_speedup(row)}</td>', f"<td>{same}</td>"]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return scroll_box(f'<table class="history">{head}{"".join(rows)}</table>', "Runs in this session",
                      "Runs in this session (newest first) <small>* after the prefill, each run on its own "
                      "clock</small>")
