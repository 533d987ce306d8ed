"""The lesson: what the stage shows at one step of a recorded run. The phase pills and step count, the caption for
students, the pass as a table (q, p, min(1, p/q), u and the decision; in greedy mode the target's top token; a value
not revealed yet shows …), a lookahead pass's window, and the output so far coloured by how each token was made."""

from __future__ import annotations

import html

import gradio as gr

from app import render
from app.classroom.figures import rejection_chart
from app.lookahead_view import make_pass, ngram_of, pass_html
from specviz.analysis.stepper import Stepper, no_draft_reason, phase_label

NO_RECORDING = "No run open: pick a walkthrough (its recorded run opens at once) or press Record run."


def _fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


_BADGES = {"accepted": "✓ accepted", "rejected": "✗ rejected", "not judged": "– not judged",
           "recovered": "★ recovered", "bonus": "★ bonus", "target": "● plain target token"}


_TIPS = {"token": "a drafted token, or the target's own token (its row says which)",
         "q (draft)": "the drafter's probability of its guess", "p (target)": "the target's probability of it",
         "min(1, p/q)": "the chance that rejection sampling keeps the guess",
         "u": "the uniform random number drawn: accept if u < min(1, p/q)",
         "target's top token": "greedy mode: a guess is accepted only if it is the target's top token"}
_PENDING = '<span class="cr-pending" title="revealed in a later phase">…</span>'
_NEXT_KIND = {"recovered": "recovered: the target's own token", "bonus": "bonus: the target's extra token",
              "target": "the target's own token, nothing drafted to check"}


def _table_head(greedy: bool) -> list[str]:
    """The table's column headers: greedy mode shows the target's top token, sampling min(1, p/q) and u."""
    head = ["#", "token"] + (["target's top token"] if greedy else []) + ["q (draft)", "p (target)"]
    head += [] if greedy else ["min(1, p/q)", "u"]
    return head + ["decision"]


def _next_cells(row, greedy: bool, prefill: bool = False) -> list[str]:
    """The cells of the target's own token (recovered, bonus or plain; ``prefill``: the prefill's first token),
    before the decision."""
    what = "the target's first token, from the prefill" if prefill else _NEXT_KIND[row.decision or "target"]
    cells = [f'<td data-col="position">{row.position}</td>',
             f'<td data-col="token"><code class="cr-tok">{html.escape(row.token)}</code> '
             f'<small>{html.escape(what)}</small></td>']
    cells += ['<td></td>'] if greedy else []
    cells += ['<td data-col="q"></td>', f'<td data-col="p">{_fmt(row.p)}</td>']
    return cells + ([] if greedy else ['<td data-col="ratio"></td>', '<td data-col="u"></td>'])


def _draft_cells(row, greedy: bool) -> list[str]:
    """The cells of a drafted token, before the decision (… where a value is revealed in a later phase)."""
    cells = [f'<td data-col="position">{row.position}</td>',
             f'<td data-col="token"><code class="cr-tok">{html.escape(row.token)}</code></td>']
    if greedy:
        if row.target_top is None:
            cells.append(f'<td data-col="top">{_PENDING}</td>')
        else:
            mark = "=" if row.target_top == row.token else "≠"
            cells.append(f'<td data-col="top"><span class="cr-eq">{mark}</span> '
                         f'<code class="cr-tok">{html.escape(row.target_top)}</code></td>')
    cells.append(f'<td data-col="q">{_fmt(row.q) or _PENDING}</td>')
    cells.append(f'<td data-col="p">{_fmt(row.p) or _PENDING}</td>')
    if not greedy:
        blank = "" if row.decision is not None else _PENDING  # decided but not judged: nothing to show
        cells.append(f'<td data-col="ratio">{_fmt(row.ratio) or blank}</td>')
        test = ""
        if row.uniform is not None and row.ratio is not None:
            test = f' <span class="cr-test">{"<" if row.uniform < row.ratio else "≥"} ratio</span>'
        cells.append(f'<td data-col="u">{_fmt(row.uniform) + test if row.uniform is not None else blank}</td>')
    return cells


def _table_row(row, greedy: bool, prefill: bool = False) -> str:
    """One ``<tr>``: the row's cells and its decision badge (… until decided); ``prefill``: the prefill's row."""
    cells = _next_cells(row, greedy, prefill) if row.kind == "next" else _draft_cells(row, greedy)
    decision = row.decision
    badge = (f'<span class="cr-badge cr-badge-{decision.replace(" ", "-")}">{_BADGES[decision]}</span>'
             if decision else '<span class="cr-pending" title="decided in phase 3">…</span>')
    cells.append(f'<td data-col="decision">{badge}</td>')
    cls = f"cr-row cr-{(decision or 'undecided').replace(' ', '-')}" + (" cr-next" if row.kind == "next" else "")
    return f'<tr class="{cls}" data-decision="{html.escape(decision or "")}">{"".join(cells)}</tr>'


def _table_title(stepper: Stepper) -> str:
    """The caption: the prefill, or the pass, its guesses and (once decided) how many were accepted."""
    step, event = stepper.current, stepper.event()
    if step.phase == "prefill":
        return "Prefill: the prompt goes through the target once"
    if not event.draft_ids:
        return f"Pass {event.index}: nothing drafted ({no_draft_reason(event)}), a plain step"
    guesses = len(event.draft_ids)
    title = f"Pass {event.index}: {guesses} guess{'' if guesses == 1 else 'es'} (k = {event.k})"
    if step.phase in ("decide", "emit"):
        title += f" · {event.num_accepted} of {len(event.draft_ids)} accepted"
    return title


def table_html(stepper: Stepper) -> str:
    """The current pass as an HTML table (cells not revealed yet show …; see :meth:`Stepper.table_rows`)."""
    greedy = stepper.recording.greedy
    head = _table_head(greedy)
    header = "".join(f'<th title="{html.escape(_TIPS.get(h, ""))}">{html.escape(h)}</th>' for h in head)
    rows = stepper.table_rows()
    body = [_table_row(row, greedy, stepper.current.phase == "prefill") for row in rows]
    if not rows:
        body.append(f'<tr><td colspan="{len(head)}" class="cr-none">No drafted tokens in this pass.</td></tr>')
    mode = "greedy: accept = draft matches the target's top token" if greedy else \
        "sampling: accept if u < min(1, p/q)"
    if stepper.recording.processing:
        mode += f"; p and q after {stepper.recording.processing}"
    return (f'<table class="cr-table" data-phase="{stepper.current.phase}"><caption>'
            f'{html.escape(_table_title(stepper))} <small>· {html.escape(mode)}</small></caption><thead><tr>{header}'
            f'</tr></thead><tbody>{"".join(body)}</tbody></table>') + lookahead_html(stepper)


LOOKAHEAD_REVEAL = {"draft": "draft", "verify": "verify", "decide": "all", "emit": "all"}
"""What a lookahead pass's window view shows at each phase (:data:`app.lookahead_view.REVEALS`)."""


def lookahead_html(stepper: Stepper) -> str:
    """For a lookahead pass: its Jacobi window and its candidates (:mod:`app.lookahead_view`), revealed with the
    phase (the window's new level at verify, the winner at decide); "" for other passes."""
    step, event, rec = stepper.current, stepper.event(), stepper.recording
    if event.lookahead is None or step.phase not in LOOKAHEAD_REVEAL:
        return ""
    before = [t for e in rec.events[: step.pass_index] for t in e.emitted_ids]
    if not before:
        return ""
    lp = make_pass(event, before[-1], rec.text(before[-1]), rec.text, ngram_of(rec.drafter_name))
    return (f'<div class="la-view cr-lookahead">{pass_html(lp, open_=True, reveal=LOOKAHEAD_REVEAL[step.phase])}'
            "</div>")


def progress_html(stepper: Stepper) -> str:
    """Where we are: the pass, the phase pills (the current one highlighted) and the step count."""
    step = stepper.current
    no_decision = step.phase != "prefill" and not stepper.event().draft_ids  # a pass without a draft
    pills = []
    for phase in ("draft", "verify", "decide", "emit"):
        cls = "cr-phase" + (" cr-phase-on" if phase == step.phase else "")
        cls += " cr-phase-skip" if no_decision and phase == "decide" else ""
        pills.append(f'<span class="{cls}">{html.escape(phase_label(phase, not no_decision))}</span>')
    pills = "".join(pills)
    if step.phase == "prefill":
        pills = '<span class="cr-phase cr-phase-on">prefill</span>' + pills
    return (f'<div class="cr-progress"><b>{html.escape(stepper.progress())}</b><span class="cr-pills">{pills}</span>'
            f'<span class="cr-count">step {stepper.index + 1} / {len(stepper.steps)}</span></div>')


def caption_html(stepper: Stepper) -> str:
    """The caption for students."""
    return f'<div class="cr-caption" data-phase="{stepper.current.phase}">{html.escape(stepper.caption())}</div>'


def output_html(stepper: Stepper) -> str:
    """The output so far, one span per token coloured by how it was made (the current pass framed). A token that
    is only spaces or newlines has class ``tok-space`` (a minimum width, so it is no sliver on a phone) and each
    newline a ⏎ mark, as in the Live panes (:func:`app.render.text_html`)."""
    rec, step = stepper.recording, stepper.current
    parts = []
    for i, event in enumerate(rec.events[: step.pass_index + 1]):
        if i == step.pass_index and step.phase not in ("emit", "prefill"):
            break
        spans = []
        n = event.num_accepted
        for j, token in enumerate(event.emitted_ids):
            kind = "accepted" if j < n and event.draft_ids else (
                event.next_kind if event.draft_ids and event.next_kind in ("recovered", "bonus") else "target")
            text = rec.text(token)
            space = " tok-space" if text and not text.strip() else ""  # a visible width and ⏎: assets/style.css
            spans.append(f'<span class="tok tok-{kind}{space}" data-kind="{kind}">{render.text_html(text)}</span>')
        current = " cr-current" if i == step.pass_index else ""
        parts.append(f'<span class="pass{current}" data-pass-index="{event.index}">{"".join(spans)}</span>')
    body = "".join(parts) or '<span class="cr-none">(nothing yet)</span>'
    return (f'<div class="cr-output"><div class="cr-output-label">Output so far</div>'
            f'<div class="tokens">{body}</div></div>')


def view(stepper: Stepper | None, fresh: bool = True) -> tuple:
    """(progress, caption, table, chart update, output) for the stepper's current step. A step within the same
    stepper (``fresh`` False) sends the chart only when it changes: the page still shows the one sent last."""
    if stepper is None:
        return ("", f'<div class="cr-caption">{html.escape(NO_RECORDING)}</div>', "", gr.update(visible=False), "")
    figure = rejection_chart(stepper)
    key = (stepper.current.pass_index, stepper.current.phase == "emit") if figure is not None else None
    if not fresh and key == getattr(stepper, "chart_shown", None):
        chart = gr.skip()
    else:
        chart = gr.update(value=figure, visible=True) if figure is not None else gr.update(visible=False)
    stepper.chart_shown = key
    return progress_html(stepper), caption_html(stepper), table_html(stepper), chart, output_html(stepper)
