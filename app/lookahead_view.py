"""HTML for lookahead decoding's two branches, pass by pass (Fu et al., ICML 2024, "Break the Sequential Dependency
of LLM Inference Using Lookahead Decoding"). Pure: no Gradio, no model (token text is decoded with the run's
tokenizer).

A lookahead pass (an event whose ``lookahead`` is a :class:`~specviz.core.events.LookaheadRecord`) is one target
forward over the last committed token x and two branches:

- **the lookahead branch**, the Jacobi window: a ``<table class="la-window" data-levels=L data-columns=W>``, one
  ``<tr class="la-level" data-level=l>`` per n-gram level (oldest first; N-1 once the window is full), one column
  per window position; the guess at level l, column j stands for the token l + j + 1 places after x. A last row
  ``<tr class="la-new" data-level="new">`` holds what this forward's Jacobi step produced: the target's greedy token
  after each top-level guess, the window's next level. Once the window is full, each column read down to that row
  is an n-gram the pool learns.
- **the verification branch**: ``<ol class="la-candidates">``, one ``<li class="la-cand" data-candidate=i>`` per pool
  n-gram that starts with x (N-1 tokens each), the winner with ``data-winner="true"`` and ``data-accepted=n``: its
  first n tokens are accepted, the next one rejected (later ones never judged), then the target's own token
  (recovered, or bonus when all were accepted). The other candidates were verified in the same forward but accepted
  fewer tokens (their tokens are shown as ``tried``).

Each pass is a ``<details class="la-pass" data-pass=N data-pool=P data-candidates=C data-winner=i|"" data-accepted=n>``
whose summary gives the window size, the pool size and how many candidate tokens were accepted. While a run streams
only the latest pass is shown; at the end the pass with the most accepted tokens (open) and the other kept ones
(closed, newest first). Accepted tokens are counted by the run's counters' rule
(:attr:`~specviz.core.events.PassEvent.committed_accepted`): none after the end of the answer (EOS, a stop string,
the token budget), so a pass of tokens past the end is never featured.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from app.render import PieceDecoder, scroll_box
from app.tree_view import best_pass, earlier_passes_html
from specviz.core.events import PassEvent

MAX_KEPT_PASSES = 64  # lookahead passes kept for the end-of-run list (the newest)


def _show(text: str) -> str:
    """A token's text made visible in a cell: newline ⏎, tab ⇥, an all-space token as ␣, empty as ∅."""
    if text == "":
        return "∅"
    if not text.strip(" "):
        return "␣" * len(text)
    return text.replace("\n", "⏎").replace("\t", "⇥")


def _cell(tag: str, text: str, kind: str, title: str, token_id: int, extra: str = "") -> str:
    title = html.escape(title, quote=True).replace("\n", "&#10;")
    return (f'<{tag} class="la-tok la-{kind}" data-kind="{kind}" data-id="{token_id}"{extra} title="{title}">'
            f"{html.escape(_show(text), quote=False)}</{tag}>")


@dataclass(frozen=True)
class LookaheadPass:
    """One lookahead pass, decoded: the window, the Jacobi step's output, the candidates and the verdict."""

    index: int
    root_id: int
    root_text: str
    levels: tuple[tuple[str, ...], ...]  # per level (oldest first), its W guesses' text
    level_ids: tuple[tuple[int, ...], ...]
    new_level: tuple[str, ...]  # the Jacobi step's W outputs
    new_ids: tuple[int, ...]
    candidates: tuple[tuple[str, ...], ...]
    candidate_ids: tuple[tuple[int, ...], ...]
    winner: int | None
    accepted: int
    pool_size: int
    added: int
    next_text: str
    next_id: int | None
    next_kind: str  # "recovered" or "bonus" (a pass with candidates), else "target"
    full_window: bool  # the window had N-1 levels, so its columns became n-grams (``added`` counts the new ones)
    committed: int = -1  # accepted tokens inside the answer (the event's committed_accepted); -1: all of them

    @property
    def counted(self) -> int:
        """Accepted tokens the run's counters count (:attr:`PassEvent.committed_accepted`), none after the end."""
        return self.accepted if self.committed < 0 else min(self.committed, self.accepted)

    @property
    def columns(self) -> int:
        """W, the window's positions."""
        return max((len(level) for level in self.levels), default=len(self.new_ids))


def lookahead_pass(event: PassEvent, context: list[int], decoder: PieceDecoder, ngram: int | None = None
                   ) -> LookaheadPass | None:
    """Decode the lookahead record of ``event`` (None when it has none). ``context``: the output ids before this
    pass (its last one is x, the last committed token); ``ngram``: N when known (else the window counts as full when
    the pass added n-grams to the pool)."""
    if event.lookahead is None or not context:
        return None
    root = int(context[-1])
    return make_pass(event, root, decoder.pieces(context[:-1], [root], final=True)[0][0],
                     lambda token: decoder.pieces(context, [int(token)], final=True)[0][0], ngram)


def ngram_of(drafter_name: str) -> int | None:
    """N from a lookahead drafter's name, "lookahead (W=3, N=3, G=2)" (None when it does not say)."""
    match = re.search(r"\bN=(\d+)", drafter_name or "")
    return int(match.group(1)) if match else None


def make_pass(event: PassEvent, root: int, root_text: str, text, ngram: int | None = None) -> LookaheadPass:
    """A :class:`LookaheadPass` of ``event`` (which has a lookahead record) after the last committed token ``root``;
    ``text(token id) -> str`` gives each token's text (a tokenizer's piece, or a recording's stored text)."""
    record = event.lookahead
    levels = tuple(tuple(text(t) for t in level) for level in record.levels)
    candidates = tuple(tuple(text(t) for t in c) for c in record.candidates)
    full = len(record.levels) == ngram - 1 if ngram else record.added > 0
    kind = event.next_kind if record.candidates and event.next_kind in ("recovered", "bonus") else "target"
    return LookaheadPass(
        index=event.index, root_id=root, root_text=root_text, levels=levels,
        level_ids=tuple(tuple(level) for level in record.levels), new_level=tuple(text(t) for t in record.new_level),
        new_ids=tuple(record.new_level), candidates=candidates, candidate_ids=tuple(record.candidates),
        winner=record.winner, accepted=record.accepted, pool_size=record.pool_size, added=record.added,
        next_text=text(event.next_id) if event.next_id is not None else "", next_id=event.next_id, next_kind=kind,
        full_window=full, committed=event.committed_accepted)


def window_html(lp: LookaheadPass, jacobi: bool = True) -> str:
    """The lookahead branch: the Jacobi window as a table (see the module docstring); ``jacobi`` False leaves the
    Jacobi step's row pending (…), as before the forward."""
    w = lp.columns
    head = "".join(f'<th scope="col" title="window position {j + 1}">{j + 1}</th>' for j in range(w))
    rows = []
    for level, (texts, ids) in enumerate(zip(lp.levels, lp.level_ids)):
        cells = "".join(_cell("td", t, "guess", f"level {level + 1}, position {j + 1}: a guess for the token "
                              f"{level + j + 1} after {lp.root_text!r}\ntoken {t!r} (id {i})", i)
                        for j, (t, i) in enumerate(zip(texts, ids)))
        rows.append(f'<tr class="la-level" data-level="{level}"><th scope="row">level {level + 1}</th>{cells}</tr>')
    step = "".join(_cell("td", t, "jacobi", f"position {j + 1}: the target's token after this column's top guess "
                         f"(one Jacobi step)\ntoken {t!r} (id {i})", i) if jacobi else
                   _cell("td", "…", "pending", "made by the target in this pass's forward", -1)
                   for j, (t, i) in enumerate(zip(lp.new_level, lp.new_ids)))
    rows.append(f'<tr class="la-new" data-level="new"><th scope="row">Jacobi step</th>{step}</tr>')
    learned = (f"each column, read down to the Jacobi step, is a {len(lp.levels) + 1}-gram for the pool "
               + (f"({lp.added} new)" if jacobi else "") if lp.full_window else
               "the window is still filling: it learns n-grams once it has N−1 levels")
    table = scroll_box(f'<table class="la-window" data-levels="{len(lp.levels)}" data-columns="{w}"><thead><tr>'
                       f'<th scope="col">position</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>',
                       "Jacobi window")
    return (f'<div class="la-branch la-lookahead"><div class="la-title">Lookahead branch · Jacobi window '
            f'<span>{len(lp.levels)} level{"s" if len(lp.levels) != 1 else ""} × {w} positions; {html.escape(learned)}'
            f'</span></div>{table}</div>')


def _winner_verdict(accepted: int, size: int) -> str:
    """The winner's verdict, counted as the pass's event counts it (drafted = the tokens the target judged: the
    accepted ones and the first rejected one), so it reads as the step table's "n of m accepted"; the candidate's
    tokens after the rejection are "never judged"."""
    judged = min(accepted + 1, size)
    rest = size - judged
    return f"winner: {accepted} of {judged} accepted" + (f" · {rest} never judged" if rest else "")


def _candidate_html(lp: LookaheadPass, i: int, verdict: bool = True) -> str:
    """One candidate: x, then its tokens marked accepted / rejected / unjudged (the winner) or tried; ``verdict``
    False shows them all as candidates not yet judged."""
    if not verdict:
        tokens = "".join(_cell("span", t, "candidate", f"candidate {i + 1}, token {j + 1}: not judged yet\ntoken "
                               f"{t!r} (id {token})", token)
                         for j, (t, token) in enumerate(zip(lp.candidates[i], lp.candidate_ids[i])))
        root = _cell("span", lp.root_text, "root", "the last committed token", lp.root_id)
        return f'<li class="la-cand" data-candidate="{i}">{root}{tokens}</li>'
    win = i == lp.winner
    parts = [_cell("span", lp.root_text, "root", f"the last committed token {lp.root_text!r}: every candidate "
                   "continues it", lp.root_id)]
    for j, (t, token) in enumerate(zip(lp.candidates[i], lp.candidate_ids[i])):
        kind = ("accepted" if j < lp.accepted else "rejected" if j == lp.accepted else "unjudged") if win else "tried"
        words = {"accepted": "accepted", "rejected": "rejected: the target chose otherwise here",
                 "unjudged": "never judged (after the rejection)", "tried": "verified; this candidate did not win"}
        title = f"candidate {i + 1}, token {j + 1}: {words[kind]}\ntoken {t!r} (id {token})"
        parts.append(_cell("span", t, kind, title, token))
    if win and lp.next_id is not None:
        own = "bonus: every token of the candidate was accepted" if lp.next_kind == "bonus" else \
            "recovered: the target's own token at the first rejection"
        parts.append(_cell("span", lp.next_text, lp.next_kind, f"the target's own token ({own})\ntoken "
                           f"{lp.next_text!r} (id {lp.next_id})", lp.next_id))
    verdict = _winner_verdict(lp.accepted, len(lp.candidates[i])) if win else "tried"
    attrs = f' data-winner="true" data-accepted="{lp.accepted}"' if win else ""
    return (f'<li class="la-cand{" la-winner" if win else ""}" data-candidate="{i}"{attrs}>{"".join(parts)}'
            f'<small class="la-verdict">{verdict}</small></li>')


def verification_html(lp: LookaheadPass, verdict: bool = True) -> str:
    """The verification branch: the pool n-grams for x that were verified, the winner marked (``verdict`` False:
    before the target judged them)."""
    n = len(lp.candidates)
    if not n:
        body = (f'<div class="la-none">No n-gram in the pool starts with {html.escape(repr(lp.root_text))}: this '
                "forward verified nothing and gives one token, as standard decoding would.</div>")
    else:
        body = f'<ol class="la-candidates">{"".join(_candidate_html(lp, i, verdict) for i in range(n))}</ol>'
    return (f'<div class="la-branch la-verify"><div class="la-title">Verification branch · pool n-grams that start '
            f'with {html.escape(repr(lp.root_text))} <span>{n} candidate{"s" if n != 1 else ""} of a pool of '
            f"{lp.pool_size} n-grams</span></div>{body}</div>")


REVEALS = ("draft", "verify", "all")
"""How much of a pass :func:`pass_html` shows: its inputs (the window and the candidates), also the Jacobi step's
outputs, or also the verdict (the Classroom's phases; the Live tab shows all)."""


def pass_html(lp: LookaheadPass, *, open_: bool = True, reveal: str = "all") -> str:
    """One pass as a ``<details>`` block: its summary, then the two branches side by side, as much as ``reveal``
    (:data:`REVEALS`) says."""
    jacobi, verdict = reveal != "draft", reveal == "all"
    window = sum(len(level) for level in lp.levels)
    past = lp.accepted - lp.counted
    after = f" ({past} after the end of the answer: not counted as accepted)" if past else ""
    won = (f"candidate {lp.winner + 1} won: {lp.accepted} token{'s' if lp.accepted != 1 else ''} accepted{after}"
           if lp.winner is not None else "no candidate") if verdict else "not judged yet"
    added = f", {lp.added} new after this pass" if jacobi else ""
    summary = (f"<b>Pass {lp.index}</b> · window {len(lp.levels)}×{lp.columns} = {window} tokens · pool "
               f"{lp.pool_size} n-grams{added} · {len(lp.candidates)} candidate"
               f"{'s' if len(lp.candidates) != 1 else ''} · {won}")
    winner = "" if lp.winner is None or not verdict else lp.winner
    return (f'<details class="la-pass" data-pass="{lp.index}" data-pool="{lp.pool_size}" data-added="{lp.added}" '
            f'data-candidates="{len(lp.candidates)}" data-winner="{winner}" '
            f'data-accepted="{lp.accepted if verdict else ""}" data-reveal="{reveal}"{" open" if open_ else ""}>'
            f'<summary>{summary}</summary><div class="la-body">{window_html(lp, jacobi)}'
            f"{verification_html(lp, verdict)}</div></details>")


@dataclass
class LookaheadView:
    """The lookahead passes of one run (the newest :data:`MAX_KEPT_PASSES`); feed it events with :meth:`add`
    *before* the pane sees them (``context`` = output ids before the pass). ``ngram``: N of the run, if known."""

    tokenizer: object
    ngram: int | None = None
    passes: list[LookaheadPass] = field(default_factory=list)
    total: int = 0
    accepted: int = 0  # candidate tokens accepted over the run
    window_tokens: int = 0  # tokens the lookahead branch added to the run's forwards
    plain_steps: int = 0  # passes without a lookahead branch (k = 0): k = auto's plain steps, a 1-token last pass

    def __post_init__(self) -> None:
        self.decoder = PieceDecoder(self.tokenizer)

    def add(self, event: PassEvent, context: list[int]) -> None:
        """Keep the event's lookahead pass (if it has one); a pass without one (a plain step, k = 0) is counted."""
        lp = lookahead_pass(event, context, self.decoder, self.ngram)
        if lp is None:
            self.plain_steps += event.kind == "pass" and event.lookahead is None
            return
        self.passes.append(lp)
        self.total += 1
        self.accepted += event.committed_accepted
        self.window_tokens += event.lookahead.window_tokens
        del self.passes[:-MAX_KEPT_PASSES]

    def html(self, *, every_pass: bool = False) -> str:
        """"" without lookahead passes. While streaming: the latest pass. With ``every_pass`` (the end of the run):
        the kept pass with the most accepted tokens open (the latest among equals), named as such also when it is the
        latest, then the others closed, newest first."""
        if not self.passes:
            return ""
        shown, what = self.passes[-1], "latest pass"
        if every_pass:  # the pass with the most accepted tokens, as the draft tree picks its longest path
            shown, what = best_pass(self.passes, self.total, lambda lp: lp.counted, "the most accepted tokens",
                                    "kept pass")  # counted as the stats count: nothing after the answer's end
        parts = [pass_html(shown, open_=True)]
        others = [lp for lp in reversed(self.passes) if lp is not shown]
        if every_pass and others:
            parts.append(earlier_passes_html("".join(pass_html(lp, open_=False) for lp in others),
                                             self.total - len(self.passes)))
        plain = (f" (and {self.plain_steps} plain one-token step{'s' if self.plain_steps != 1 else ''}, k = 0, "
                 f"not shown)" if self.plain_steps else "")
        note = (f"{self.total} lookahead passes{plain}: {self.accepted} candidate tokens accepted; the window added "
                f"{self.window_tokens} tokens to the forwards (not verified, not counted as drafted)")
        head = (f"<div class='dtree-title'>Lookahead decoding <span>{html.escape(what)} · one forward carries x (the last "
                f"committed token), the Jacobi window and the candidates · {html.escape(note)}</span></div>")
        return f'<div class="la-view dtree-view" data-lookahead-passes="{self.total}">{head}{"".join(parts)}</div>'
