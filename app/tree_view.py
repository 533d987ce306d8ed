"""HTML for what the EAGLE / Medusa drafters add to a run: the draft tree of a pass and the Medusa heads' accuracy.
Pure: no Gradio, no model (token text is decoded with the run's tokenizer).

**Draft tree** (:class:`TreeView`, a pass whose event carries ``tree`` (a :class:`~specviz.core.events.TreeRecord`)): the candidates laid out left to
right by depth from the root (the last committed token), each node a box of fixed width so that a depth is one
column. Per node ``data-node`` (its index; ``root`` / ``next`` for the two extra boxes), ``data-parent``,
``data-depth``, ``data-kind`` and, for drafted nodes, ``data-accepted="true|false"``. Kinds:

- ``accepted``: on the accepted path (the target's greedy choice at every step);
- ``rejected``: a candidate the target judged and refused (a child of the root or of a path node);
- ``unjudged``: below a refused candidate, never compared;
- ``recovered`` / ``bonus``: the target's own token after the path (``data-node="next"``), drawn as a child of the
  path's last node;
- ``root``: the last committed token.

A node that n-gram lookup copied into the tree (a head drafter with lookup first) also has ``data-copied="true"``
(class ``dt-copied``: italic with a grey bar on its left) and says so in its title; the pass's summary counts them.

The accepted child is drawn first among its siblings, so the accepted path runs along the top row. Each pass is a
``<details class="dtree-pass" data-pass=N>``; while a run streams only the latest pass is shown, at the end the
pass with the longest accepted path (open) and the other kept passes (closed, newest first). "Accepted" there is the
run's counters' rule (:attr:`~specviz.core.events.PassEvent.committed_accepted`): path tokens after the end of the
answer (EOS, a stop string, the token budget) are not counted, and the pass that reached the end of the answer (often
only ". <|im_end|> ⏎ <|im_end|>") is opened only when no other pass was kept.

**Medusa heads** (:class:`HeadAccuracy`): head i (1-based) guesses draft position i; its accuracy is the number of
passes where that position was accepted over the passes where the target judged it. Rows are
``<tr data-head=i data-accepted=x data-judged=y>``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Callable, Sequence

from app.render import PieceDecoder
from specviz.core.events import PassEvent
from specviz.core.tree import depths as tree_depths

MAX_KEPT_PASSES = 64  # tree passes kept for the end-of-run list (the newest)
NODE_KINDS = ("root", "accepted", "rejected", "unjudged", "recovered", "bonus")
_KIND_WORDS = {"accepted": "accepted", "rejected": "rejected by the target", "unjudged": "never judged "
               "(below a rejected candidate)", "recovered": "the target's own token (recovered)",
               "bonus": "the target's own token (bonus: the path ended at a leaf)", "root": "the last committed token"}


def _show(text: str) -> str:
    """A token's text made visible in a box: newline ⏎, tab ⇥, an all-space token as ␣, empty as ∅."""
    if text == "":
        return "∅"
    if not text.strip(" "):
        return "␣" * len(text)
    return text.replace("\n", "⏎").replace("\t", "⇥")


@dataclass(frozen=True)
class TreePass:
    """One tree pass, decoded: node tokens, parents, the accepted path, the target's own token and texts."""

    index: int
    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    path: tuple[int, ...]
    next_id: int | None
    next_kind: str
    next_emitted: bool  # False when the run stopped inside the accepted path (EOS, stop string, length)
    root_id: int
    root_text: str
    texts: tuple[str, ...]
    next_text: str
    committed: int = -1  # path tokens inside the answer (the event's committed_accepted); -1: the whole path
    last: bool = False  # the run's last pass (its event's finish_reason is set): the answer ended in it
    copied: tuple[int, ...] = ()  # the nodes n-gram lookup copied into the tree (lookup first), not the head's guesses

    @property
    def counted(self) -> int:
        """Accepted path tokens the run's counters count (:attr:`PassEvent.committed_accepted`): those that entered
        the output, none after the end of the answer."""
        return len(self.path) if self.committed < 0 else min(self.committed, len(self.path))

    @property
    def reached_end(self) -> bool:
        """True when the answer ended in this pass (EOS, a stop string, the token budget) or path tokens ran past
        its end: a pass the finished run's panel opens only when no other one was kept."""
        return self.last or self.counted < len(self.path)

    @property
    def depth(self) -> int:
        """Depth of the deepest candidate."""
        return max(tree_depths(list(self.parents)), default=0)

    def kinds(self) -> list[str]:
        """Per node: accepted, rejected or unjudged (see the module docstring)."""
        on_path = set(self.path)
        judged_parents = {-1, *self.path}
        return ["accepted" if i in on_path else "rejected" if p in judged_parents else "unjudged"
                for i, p in enumerate(self.parents)]


def tree_pass(event: PassEvent, context: list[int], decoder: PieceDecoder) -> TreePass | None:
    """Decode the tree of ``event`` (None when it has none). ``context``: the output ids before this pass (its
    last one is the root)."""
    tree = event.tree
    if tree is None or not context:
        return None
    tokens, parents, path = list(tree.tokens), list(tree.parents), list(tree.path)
    root = int(context[-1])
    root_text = decoder.pieces(context[:-1], [root], final=True)[0][0]

    def piece(after: list[int], token: int) -> str:
        return decoder.pieces(after, [token], final=True)[0][0]

    texts = []
    for i, token in enumerate(tokens):
        chain, node = [], parents[i]
        while node >= 0:
            chain.append(tokens[node])
            node = parents[node]
        texts.append(piece(context + chain[::-1], token))
    next_id = event.next_id
    next_text = piece(context + [tokens[i] for i in path], next_id) if next_id is not None else ""
    return TreePass(index=event.index, tokens=tuple(tokens), parents=tuple(parents), path=tuple(path),
                    next_id=next_id, next_kind=event.next_kind if event.next_kind in ("recovered", "bonus") else
                    "recovered", next_emitted=len(event.emitted_ids) > len(path), root_id=root, root_text=root_text,
                    texts=tuple(texts), next_text=next_text, committed=event.committed_accepted,
                    last=event.finish_reason is not None, copied=tuple(tree.copied))


def _node(label: str, kind: str, place: tuple[str, int, str], title: str, accepted: bool | None = None,
          token_id: int | None = None, copied: bool = False) -> str:
    """One node's box; ``place`` = (its data-node, its depth, its parent's data-node)."""
    node, depth, parent = place
    mark = ' data-copied="true"' if copied else ""
    attrs = (f'class="dt-node dt-{kind}{" dt-copied" if copied else ""}" data-node="{node}" data-kind="{kind}" '
             f'data-depth="{depth}" data-parent="{parent}"{mark}')
    if accepted is not None:
        attrs += f' data-accepted="{"true" if accepted else "false"}"'
    if token_id is not None:
        attrs += f' data-id="{token_id}"'
    title = html.escape(title, quote=True).replace("\n", "&#10;")
    return f'<span {attrs} title="{title}">{html.escape(_show(label), quote=False)}</span>'


def tree_html(tp: TreePass, *, open_: bool = True) -> str:
    """One pass's tree as a ``<details>`` block (see the module docstring)."""
    kinds = tp.kinds()
    depth = tree_depths(list(tp.parents))
    children: dict[int, list[int]] = {}
    for i, p in enumerate(tp.parents):
        children.setdefault(p, []).append(i)
    on_path = set(tp.path)
    last = tp.path[-1] if tp.path else -1
    wanted = {p: (tp.path[j] if j < len(tp.path) else None) for j, p in enumerate([-1, *tp.path])}

    def wanted_text(parent: int) -> str:
        node = wanted.get(parent)
        text = tp.texts[node] if node is not None else tp.next_text
        return repr(text)

    def subtree(i: int) -> str:
        kind = kinds[i]
        title = f"pass {tp.index} · candidate {i + 1} of {len(tp.tokens)} · depth {depth[i]} · {_KIND_WORDS[kind]}"
        if kind == "rejected":
            title += f"\nthe target's choice here: {wanted_text(tp.parents[i])}"
        title += f"\ntoken {tp.texts[i]!r} (id {tp.tokens[i]})"
        if i in tp.copied:
            title += "\ncopied by n-gram lookup: the text's last tokens occurred before (not the head's guess)"
        box = _node(tp.texts[i], kind, (str(i), depth[i], str(tp.parents[i])), title, i in on_path, tp.tokens[i],
                    i in tp.copied)
        return f'<div class="dt-sub">{box}{kids(i)}</div>'

    def kids(parent: int) -> str:
        mine = sorted(children.get(parent, []), key=lambda c: c not in on_path)  # the accepted child first
        parts = [subtree(c) for c in mine]
        if parent == last and tp.next_id is not None:
            kind = tp.next_kind
            note = "" if tp.next_emitted else "\n(not emitted: the run stopped before it)"
            title = (f"pass {tp.index} · {_KIND_WORDS[kind]}: the target's greedy token after the accepted path"
                     f"{note}\ntoken {tp.next_text!r} (id {tp.next_id})")
            box = _node(tp.next_text, kind, ("next", len(tp.path) + 1, str(last)), title, None, tp.next_id)
            parts.insert(0, f'<div class="dt-sub">{box}</div>')  # the path goes on along the top row
        return f'<div class="dt-kids">{"".join(parts)}</div>' if parts else ""

    root = _node(tp.root_text, "root", ("root", 0, ""), f"the last committed token {tp.root_text!r} (id {tp.root_id}): "
                 "every candidate continues it", None, tp.root_id)
    columns = max(tp.depth, len(tp.path) + 1 if tp.next_id is not None else 0)
    heads = "".join(f"<span>{'root' if d == 0 else f'depth {d}' if d <= tp.depth else 'target'}</span>"
                    for d in range(columns + 1))  # a column past the deepest candidate holds the target's own token
    n, m = len(tp.path), len(tp.tokens)
    own = ""
    if tp.next_id is not None:
        own = f" + the target's own token ({tp.next_kind})" + ("" if tp.next_emitted else ", not emitted")
    past = n - tp.counted
    after = (f" ({past} after the end of the answer: not counted as accepted)" if past else "")
    copied = f" ({len(tp.copied)} copied by lookup)" if tp.copied else ""
    summary = (f"<b>Pass {tp.index}</b> · {m} candidate{'s' if m != 1 else ''}{copied}, depth {tp.depth} · "
               f"{n} accepted{after}{own}")
    path = ",".join(str(i) for i in tp.path)
    return (f'<details class="dtree-pass" data-pass="{tp.index}" data-nodes="{m}" data-path="{path}" '
            f'data-counted="{tp.counted}" data-accepted-count="{n}"{" open" if open_ else ""}><summary>{summary}</summary>'
            f'<div class="dtree-body{" dtree-deep" if columns > 3 else ""}">'
            f'<div class="dtree-depths" aria-hidden="true">{heads}</div>'
            f'<div class="dtree"><div class="dt-sub">{root}{kids(-1)}</div></div></div></details>')


@dataclass
class TreeView:
    """The tree passes of one run (the newest :data:`MAX_KEPT_PASSES`); feed it events with :meth:`add` *before*
    the pane sees them (``context`` = output ids before the pass)."""

    tokenizer: object
    passes: list[TreePass] = field(default_factory=list)
    total: int = 0
    copied: int = 0  # passes of the run that verified a copied chain (lookup first, no tree: a sampling run's)
    max_nodes: int = 0  # the run's tree size (0: not said)
    gate: float = 0.0  # the run's confidence gate (0: none): it leaves unlikely candidates out, so trees come smaller

    def __post_init__(self) -> None:
        self.decoder = PieceDecoder(self.tokenizer)

    def add(self, event: PassEvent, context: list[int]) -> None:
        """Keep the event's tree (if it has one); count the passes that copied a chain instead (lookup first)."""
        if event.kind == "pass" and event.draft_source == "lookup" and event.tree is None:
            self.copied += 1
        tp = tree_pass(event, context, self.decoder)
        if tp is None:
            return
        self.passes.append(tp)
        self.total += 1
        del self.passes[:-MAX_KEPT_PASSES]

    def _notes(self) -> str:
        """The title's notes: the tree's size and gate (:func:`_size_note`), the copied nodes' mark when shown."""
        grafted = "; italic nodes with a grey bar were copied by lookup" if any(tp.copied for tp in self.passes) else ""
        return _size_note(self.max_nodes, self.gate) + grafted

    def html(self, *, every_pass: bool = False) -> str:
        """"" without tree passes. While streaming: the latest pass's tree ("latest tree pass"). With
        ``every_pass`` (the end of the run): the kept pass with the longest accepted path open, named as such also
        when it is the latest (the latest among equals), leaving out the pass that reached the end of the answer
        (:attr:`TreePass.reached_end`: often end-of-turn marks only) unless it is the only one, then the other kept
        passes closed, newest first."""
        if not self.passes:
            return ""
        if not every_pass:
            shown, what = self.passes[-1], "latest tree pass"
        else:
            shown, what = best_pass(self.passes, self.total, lambda tp: tp.counted, "the longest accepted path",
                                    "tree pass", lambda tp: not tp.reached_end)  # counted as the stats count
            if not shown.reached_end and any(tp.reached_end for tp in self.passes):
                what += ", leaving out the pass that reached the end of the answer"
        if self.copied:
            what += (f" ({self.copied} other pass{'es' if self.copied != 1 else ''} copied by lookup: no tree, see the "
                     "pane)")
        parts = [tree_html(shown, open_=True)]
        others = [tp for tp in reversed(self.passes) if tp is not shown]
        if every_pass and others:
            parts.append(earlier_passes_html("".join(tree_html(tp, open_=False) for tp in others),
                                             self.total - len(self.passes)))
        head = (f"<div class='dtree-title'>Draft tree <span>{html.escape(what)}; the accepted path runs along the top "
                f"row, one column per depth{self._notes()}</span></div>")
        return f'<div class="dtree-view" data-tree-passes="{self.total}">{head}{"".join(parts)}</div>'


def _size_note(max_nodes: int, gate: float) -> str:
    """"; up to 8 candidates a pass, fewer where the confidence gate (0.15) leaves unlikely ones out" ("" for 0)."""
    if max_nodes <= 0:
        return ""
    gate_words = f", fewer where the confidence gate ({gate:g}) leaves unlikely ones out" if gate > 0 else ""
    return f"; up to {max_nodes} candidates a pass{gate_words}"


def best_pass(passes: Sequence, total: int, score: Callable[[object], float], measure: str,
              noun: str, eligible: Callable[[object], bool] | None = None) -> tuple[object, str]:
    """The pass a finished run's panel opens, and its caption: the kept pass with the highest ``score`` (the latest
    among equals: the last pass is often cut short by the token limit or EOS) among the ``eligible`` ones, named as
    such also when it is the latest; when no pass is eligible, the latest ("pass 9, the latest of the run's ...").
    Shared by the draft tree (:class:`TreeView`: the longest accepted path) and lookahead's panel
    (:class:`app.lookahead_view.LookaheadView`: the most accepted tokens).

    Args:
        passes: the kept passes, oldest first, each with an ``index`` (its pass number); at least one.
        total: passes the run made (more than ``len(passes)`` when older ones were not kept).
        score: a pass's figure to maximise, e.g. ``lambda tp: len(tp.path)``.
        measure: what the chosen pass has most of, e.g. "the longest accepted path".
        noun: one pass in words, e.g. "tree pass" (its plural adds "es").
        eligible: which passes may be opened, e.g. ``lambda tp: not tp.reached_end``; None: every pass.

    Returns:
        (the pass, "pass 7 (the latest), the longest accepted path of the run's last 20 tree passes").

    Raises:
        ValueError: no passes.
    """
    if not passes:
        raise ValueError("a best pass needs at least one pass")
    kept = len(passes)
    allowed = [i for i in range(kept) if eligible is None or eligible(passes[i])]
    best = max(allowed, key=lambda i: (score(passes[i]), i)) if allowed else kept - 1
    measure = measure if allowed else "the latest"
    latest = " (the latest)" if best == kept - 1 and kept > 1 and allowed else ""
    return passes[best], (f"pass {passes[best].index}{latest}, {measure} of the run's "
                          f"{'last ' if total > kept else ''}{kept} {noun}{'es' if kept != 1 else ''}")


def earlier_passes_html(closed: str, older: int) -> str:
    """The finished run's list of its other kept passes under the open one: ``closed`` (their HTML, each closed,
    newest first) under the title "Other passes, newest first: click one to open it", which also counts the
    ``older`` passes that were not kept (0: none). Shared as :func:`best_pass` is."""
    more = f" ({older} older not kept)" if older else ""
    return (f'<div class="dtree-earlier"><div class="dtree-earlier-title">Other passes, newest first{more}: click one '
            f'to open it</div>{closed}</div>')


@dataclass
class HeadAccuracy:
    """Per Medusa head: passes where its position was accepted / judged (:meth:`add` each speculative event)."""

    num_heads: int
    accepted: list[int] = field(default_factory=list)
    judged: list[int] = field(default_factory=list)
    tree: bool = False  # some pass drafted a tree (the note under the table says what a head's hit means then)
    copied: int = 0  # passes copied by lookup first, left out of the table

    def __post_init__(self) -> None:
        self.accepted = [0] * self.num_heads
        self.judged = [0] * self.num_heads

    def add(self, event: PassEvent) -> None:
        """Count one pass (prefill, drafts-less passes and passes copied by lookup first count nothing)."""
        if event.run != "speculative" or event.kind != "pass":
            return
        if event.draft_source == "lookup":  # not the heads' guesses
            self.copied += 1
            return
        self.tree = self.tree or event.tree is not None
        for i in range(min(self.num_heads, len(event.draft_ids), len(event.details))):
            if event.details[i].judged:
                self.judged[i] += 1
                self.accepted[i] += bool(event.accept_mask[i])

    def rows(self) -> list[tuple[int, int, int, float | None]]:
        """(head number from 1, accepted, judged, accuracy or None) per head."""
        return [(i + 1, a, j, a / j if j else None) for i, (a, j) in enumerate(zip(self.accepted, self.judged))]

    def html(self) -> str:
        """The table (one row per head, a bar and "head i: accepted x of y judged (z%)")."""
        rows = []
        for head, a, j, rate in self.rows():
            pct = "–" if rate is None else f"{rate:.0%}"
            width = 0 if rate is None else round(rate * 100, 1)
            rows.append(f'<tr data-head="{head}" data-accepted="{a}" data-judged="{j}"><th>head {head}</th>'
                        f'<td class="ha-bar"><div class="ha-track"><span style="width:{width}%"></span></div></td>'
                        f"<td>accepted {a} of {j} judged ({pct})</td></tr>")
        tree = (" In a tree, a head scores when one of its candidates at its depth is on the accepted path."
                if self.tree else "")
        copied = (f" The {self.copied} pass{'es' if self.copied != 1 else ''} copied by lookup first "
                  f"{'are' if self.copied != 1 else 'is'} left out." if self.copied else "")
        note = ("Head i guesses draft position i: the token i places after the target's own latest token. Judged = "
                "the target got to that position (every guess before it was accepted)." + tree + copied)
        return (f'<div class="head-acc" data-heads="{self.num_heads}"><div class="dtree-title">Medusa heads '
                f'<span>accuracy per head</span></div><table class="head-acc-table">{"".join(rows)}</table>'
                f'<div class="head-acc-note">{html.escape(note)}</div></div>')
