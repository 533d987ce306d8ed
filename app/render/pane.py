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
page visit (``draft_source`` "earlier") has class ``pass-earlier`` and a small “earlier” mark. Either mark sits in a
``<span class="mark-glue">`` with the pass's first shown token (:func:`glued_html`: never a line of its own). A token's
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

import html
import re
from dataclasses import dataclass, field

from app.render.tokens import Piece, PieceDecoder, Token, byte_label
from specviz.analysis.stepper import no_draft_reason
from specviz.core.events import PassEvent
from specviz.core.verdict import format_apart

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
    """A drafted token's hover text: "pass 9 · draft 1 of 3 · accepted" (``position`` 0-based of ``drafted``; the
    "N of M" form of the Draft tree panel's "candidate 1 of 6"), then its probabilities from ``detail``."""
    lines = [f"pass {pass_index} · draft {position + 1} of {drafted} · {verdict}"]
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
        if any(event.copied_drafts):
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
                    title = f"pass {event.index} · draft {i + 1} of {m} · never judged (after the first rejection)"
                out.append(self._token("rejected", event, token, piece, title, unjudged=j > 0))
        if len(emitted) > n:
            kind = event.next_kind if event.next_kind in ("recovered", "bonus") else "target"
            out.append(self._token(kind, event, emitted[n], pieces[n], self._next_title(event, kind)))
        if event.draft_source == "lookup":  # a head drafter with lookup first copied this pass's chain or branch
            copied = event.copied_drafts
            for i, token in enumerate(t for t in out if t.kind in ("accepted", "rejected")):
                if copied[i]:
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
            badge = ""
            if index in self.copied_passes:  # lookup first: this pass verified a copy, not the head's guess
                parts.append(f'<div class="pass pass-copied" data-pass-index="{index}" data-source="lookup"{mark}>')
                badge = '<i class="copied-mark" aria-hidden="true" title="copied by n-gram lookup"></i>'
            elif index in self.earlier_passes:  # suffix decoding copied this pass's draft from an earlier output
                parts.append(f'<div class="pass pass-earlier" data-pass-index="{index}" data-source="earlier"{mark}>')
                badge = '<i class="earlier-mark" aria-hidden="true" title="copied from an earlier output"></i>'
            else:
                parts.append(f'<div class="pass" data-pass-index="{index}"{mark}>')
            cells = []
            for t in tokens:
                cells.append(token_html(t, alt=shown % 2 == 1))
                shown += not t.partial
            parts.append(glued_html(badge, tokens, cells) if badge else "".join(cells))
            parts.append("</div>")
        if not self.finished and self.passes:
            parts.append('<i class="cursor" aria-hidden="true"></i>')
        parts.append("</div>")
        return "".join(parts)


def glued_html(badge: str, tokens: list[Token], cells: list[str]) -> str:
    """A pass's mark (``badge``: the “copy” or “earlier” mark) and its tokens (``tokens``, rendered as ``cells``, one
    HTML string each), the mark kept on the line of the first token that shows text: both in a
    ``<span class="mark-glue">`` that never wraps inside (style.css); at 400 px a lone mark ended a line and its token
    began the next. A ``<wbr>`` before it when that token starts with a space keeps the line break the space gave
    (before the mark, not after it), so the text wraps at the same words."""
    first = next((i for i, t in enumerate(tokens) if not t.partial), len(tokens) - 1)
    lead = "<wbr>" if tokens and tokens[first].text[:1].isspace() else ""
    return f'{lead}<span class="mark-glue">{badge}{"".join(cells[:first + 1])}</span>{"".join(cells[first + 1:])}'


def text_html(text: str, breaks: bool = True) -> str:
    """Escape a token's text; mark each newline with a visible ⏎ (CSS content, so not in the plain text).
    ``breaks`` False: the ⏎ only, no line break (a rejected draft is not part of the text's layout)."""
    escaped = html.escape(text, quote=False)
    return escaped.replace("\n", '<i class="nl" aria-hidden="true"></i>' + ("\n" if breaks else ""))


CONTROL_LABELS = {"<|im_end|>": "⏎ end of turn", "<|eot_id|>": "⏎ end of turn", "<|end|>": "⏎ end of turn",
                  "<end_of_turn>": "⏎ end of turn", "<|im_start|>": "▸ start of turn",
                  "<|start_header_id|>": "▸ header", "<|end_header_id|>": "◂ header",
                  "<start_of_turn>": "▸ start of turn", "<|endoftext|>": "■ end of text", "</s>": "■ end of text",
                  "<|end_of_text|>": "■ end of text", "<s>": "▸ start of text", "<|begin_of_text|>": "▸ start of text"}
"""Readable markers of the control tokens seen most (chat templates' turn marks, end of text)."""
_CONTROL = re.compile(r"^<\|[^<>|\s]{1,40}\|>$")


def control_label(text: str) -> str | None:
    """The readable marker of a control token's literal text: "⏎ end of turn" for "<|im_end|>" (:data:`CONTROL_LABELS`),
    "◆ tool_call" for another "<|tool_call|>"-like mark; None for text that is no control mark."""
    if text in CONTROL_LABELS:
        return CONTROL_LABELS[text]
    if _CONTROL.match(text):
        return "◆ " + text[2:-2]
    return None


def _control_html(token: Token) -> str | None:
    """A special or control token as a small chip with a readable marker (:func:`control_label`), its raw text in
    the chip's title; None for another token."""
    label = control_label(token.text.strip()) if token.text else None
    if label is None and token.special and token.text.strip():
        label = "◆ " + token.text.strip()
    if label is None:
        return None
    return (f'<i class="tok-chip" title="{html.escape(token.text.strip(), quote=True)}">{html.escape(label)}</i>')


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
    chip = _control_html(token)
    if token.special or chip is not None:
        classes.append("tok-special")
    if token.resplit:
        classes.append("tok-resplit")
    if token.text and not token.text.strip():
        classes.append("tok-space")
    raw = f"\nraw token: {token.text.strip()}" if chip is not None else ""
    title = html.escape(token.title + raw, quote=True).replace("\n", "&#10;")
    breaks = token.kind != "rejected"
    body = chip if chip is not None else "".join(f'<i class="tok-bytes">{html.escape(byte_label(part))}</i>' if isinstance(part, bytes) else
                   text_html(part, breaks) for part in token.parts) if token.parts else text_html(token.text, breaks)
    return (f'<span class="{" ".join(classes)}" data-kind="{token.kind}" data-pass="{token.pass_index}" '
            f'data-id="{token.token_id}" title="{title}">{body}</span>')


def legend_html() -> str:
    """The colour/shape legend (samples carry classes only, no data-kind, so they never count as tokens): the kinds,
    the pass boundary, the never-judged drafts, a rejected newline's ⏎ pill (the newline of a refused draft is no
    part of the text, so it draws its mark and breaks no line: :func:`token_html`), the copy and earlier marks, a
    re-split token and the two tints."""
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
    unjudged = ('<span class="legend-item"><b class="tok tok-rejected tok-unjudged">after</b> drafted after a '
                'rejection: never judged (faint, dashed)</span>')
    newline = (f'<span class="legend-item"><b class="tok tok-rejected">{text_html(chr(10), breaks=False)}</b> a '
               'rejected newline: its ⏎ in a pill, no line break</span>')
    copied = ('<span class="legend-item"><i class="copied-mark" aria-hidden="true"></i> draft copied by lookup '
              'first, not the head\'s guess</span>')
    earlier = ('<span class="legend-item"><i class="earlier-mark" aria-hidden="true"></i> draft copied from an '
               'earlier output (suffix decoding)</span>')
    resplit = ('<span class="legend-item"><b class="tok tok-accepted tok-resplit">split</b> split differently by a '
               'draft model with another tokenizer</span>')
    tint = ('<span class="legend-item"><b class="tok tok-accepted">to</b><b class="tok tok-accepted tok-alt">ken</b> '
            'neighbouring tokens in two tints, only to tell them apart</span>')
    return (f'<div class="legend">{items}<span class="legend-item"><b class="pass-sample"></b> pass boundary</span>'
            f'{unjudged}{newline}{copied}{earlier}{resplit}{tint}</div>')


def pane_html(header: str, body: str, note: str = "", done: bool = False) -> str:
    """A pane: a header line (run name, live figures), an optional note, then the token body in a scroller
    that stays at the bottom while tokens arrive (column-reverse keeps the newest text in view). ``done``: the run
    finished or was stopped: the scroller shows the text from its start (class ``pane-done``), so no line is left
    cut at the top edge."""
    note_html = f'<div class="pane-note">{note}</div>' if note else ""
    body_class = "pane-body pane-done" if done else "pane-body"
    return (f'<div class="pane"><div class="pane-header">{header}</div>{note_html}'
            f'<div class="{body_class}">{body}</div></div>')


def placeholder_html(message: str) -> str:
    """An empty pane's message (escaped)."""
    return f'<div class="pane"><div class="pane-empty">{html.escape(message)}</div></div>'


SHORT_SPREAD = 16
"""A pane figure's spread up to this many characters ("38.0–44.1", "0.3–0.9") is kept on one line."""


def pane_header(title: str, subtitle: str, figures: list[tuple]) -> str:
    """A pane's header: title, subtitle and live figures (label, value or None, format[, spread]); a label given as
    (one, many), e.g. ("pass", "passes"), agrees with its count ("1 pass", "3 passes"); ``spread``
    (plain text, e.g. "38.0–44.1" or "one pass") follows the value in small type, as :func:`spread_html`'s."""
    def cell(label, value, fmt: str, spread: str = "") -> str:
        if isinstance(label, tuple):  # (one, many): the word that agrees with a count
            label = label[0] if value == 1 else label[1]
        shown = "–" if value is None else html.escape(fmt.format(value))
        # a short range stays on one line; a long note wraps (at 400 px "(0–100%; 3 passes: too few to tell)"
        # ran past the pane's edge)
        wrap = "normal" if len(spread) > SHORT_SPREAD else "nowrap"
        small = (f' <small class="figure-spread" style="white-space: {wrap}">({html.escape(spread)})</small>'
                 if spread and value is not None else "")
        return f'<span class="figure"><b>{shown}</b>{small} {html.escape(label)}</span>'

    cells = "".join(cell(*figure) for figure in figures)
    sub = f'<span class="pane-sub">{html.escape(subtitle)}</span>' if subtitle else ""
    return f'<span class="pane-title">{html.escape(title)}</span>{sub}<span class="pane-figures">{cells}</span>'
