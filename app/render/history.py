"""The Live tab's table of this session's runs (:class:`app.records.RunSummary` rows, newest first). Pure: no
Gradio."""

from __future__ import annotations

import html
import re

from app.inputs import HEAD_DRAFTERS
from app.render.markup import scroll_box
from app.render.stats import NO_READING, cut_words
from app.records import NO_INTERVAL, RunSummary
from specviz.core.verdict import format_apart, format_ratio, format_ratio_ends


CUT_MARK = "†"
"""The history's footnote mark on an interval whose top was cut at the run's tokens per pass (:func:`history_speedup`;
the footnote under the table: :func:`app.render.stats.cut_words`)."""


def history_speedup(row: RunSummary) -> str:
    """The history's speedup cell (HTML): the decoding speedup with its interval when it could be judged ("1.25×
    (1.10–1.40)", ``speedup_interval``; a top cut at the tokens per pass, ``speedup_cut_at``, carries
    :data:`CUT_MARK`, "2.95× (1.72–3.06†)", and says why in its title); a too-noisy one keeps its measured number,
    muted and on one line ("1.12× (too noisy)", ``speedup_measured``), its reason in the title (``speedup_reason``:
    "1.12× measured, too noisy to tell: 0.85–1.40× spans 1"; shown on hover, and on a tap by ``assets/head.html``);
    else the ``speedup_note`` ("too short") or "–"."""
    value, interval = row.speedup, row.speedup_interval
    if value is not None:
        cut = row.speedup_cut_at is not None and interval is not None
        spread = " ({}–{}{})".format(*format_ratio_ends(*interval), CUT_MARK if cut else "") if interval else ""
        text = html.escape(f"{format_ratio(value)}×{spread}")
        if not cut:
            return text
        return f'<span class="hist-cut" title="{html.escape(cut_words(row.speedup_cut_at, value), quote=True)}">{text}</span>'
    note, measured = row.speedup_note, row.speedup_measured
    if note in ("too noisy", "not a finding") and measured is not None:
        reason = f": {row.speedup_reason}" if row.speedup_reason else ""
        words = "too noisy to tell" if note == "too noisy" else NO_READING
        title = html.escape(f"{measured:.2f}× measured, {words}{reason}", quote=True)
        shown = note if note == "too noisy" else NO_READING
        return (f'<span class="hist-noisy" title="{title}" style="color: var(--body-text-color-subdued)">'
                f'{html.escape(f"{measured:.2f}× ({shown})")}</span>')
    return html.escape(note or "–")


BUSY_MARK = "⚠ busy"
"""The history's mark on a run measured on a busy machine (:attr:`app.records.RunSummary.busy_share`)."""


def busy_title(share: float) -> str:
    """The hover title of :data:`BUSY_MARK` for other programs' ``share`` of the CPUs (in [0, 1]) during a run."""
    return (f"Measured on a busy machine: other programs used {share:.0%} of the CPUs during the run. They slow a "
            "one-token step more than a wide pass, so the ratio flatters speculation: on a quiet machine a gain may "
            "be smaller, a loss larger.")


def history_busy(row: RunSummary) -> str:
    """The speedup cell's busy mark (HTML) under the speedup, with :func:`busy_title` on hover (and on a tap:
    ``assets/head.html``); "" for a run measured on a quiet machine (``busy_share`` None)."""
    if row.busy_share is None:
        return ""
    title = html.escape(busy_title(row.busy_share), quote=True)
    return f'<br><small class="hist-busy" title="{title}" style="white-space: nowrap">{html.escape(BUSY_MARK)}</small>'


def history_rate(row: RunSummary, key: str) -> str:
    """The history's tokens/s cell (HTML) for ``key`` ("spec_tps" or "base_tps", after the prefill): the rate with
    its bootstrap interval over the run's passes under it ("20.4" over "(18.1–22.0)", ``<key>_interval``: (low,
    high)), or "(one pass)" where the run had a single pass (interval None), the rate alone for a row that keeps no
    interval (:data:`app.records.NO_INTERVAL`); "–" without a rate."""
    value = getattr(row, key)
    if value is None:
        return "–"
    ends = getattr(row, f"{key}_interval")
    if ends == NO_INTERVAL:
        return f"{value:.1f}"
    spread = "one pass" if ends is None else "–".join(format_apart(*ends, 1, 2))
    return f'{value:.1f}<br><small class="spread" style="white-space: nowrap">({spread})</small>'


def history_counted(value: float | None, spread: str, percent: bool = False) -> str:
    """The history's acceptance or tokens-per-pass cell (HTML): the figure as its Live card shows it ("67%" with
    ``percent``, a share in [0, 1]; else "1.90") with the card's spread under it (``spread``: the row's
    ``acceptance_spread`` or ``tokens_per_pass_spread``, :func:`app.render.stats.counted_spread`: "(44–88%)",
    "(3 passes: too few to tell)"); the figure alone for a row that keeps no spread (""); "–" without a value."""
    if value is None:
        return "–"
    shown = f"{value:.0%}" if percent else f"{value:.2f}"
    if not spread:
        return shown
    wrap = "" if " " in spread else ' style="white-space: nowrap"'  # an interval on one line; words may wrap
    return f'{shown}<br><small class="spread"{wrap}>({html.escape(spread)})</small>'


_LOOKAHEAD_K = re.compile(r"^k = (\d+) \(N−1\)( or a plain step \(auto\))?( · W = \d+, N = \d+, G = \d+)?$")


def history_k(k: str) -> str:
    """The history's k cell: a lookahead run's long k label ("k = 2 (N−1) or a plain step (auto) · W = 3, N = 3,
    G = 2", :func:`app.live.view.k_label`) shortened to "k = 2 or step (auto)" or "k = 2 (N−1)" (W, N and G are in the
    drafter cell already); any other label as it is."""
    match = _LOOKAHEAD_K.match(k)
    if not match:
        return k
    return f"k = {match.group(1)} or step (auto)" if match.group(2) else f"k = {match.group(1)} (N−1)"


CONFIDENCE_GATE = "confidence gate"
"""The k label's name for a drafter's gate (:func:`app.live.view.k_label`: "confidence gate 0.15"): the heads' and
the draft models' (distilled, 'model')."""
CONFIDENCE_GATE_TITLE = ("Confidence gate P: the head stops drafting where its own probability of the guess so far "
                         "drops below P (a lower P drafts longer and risks more rejected tokens)")
"""The hover title of "confidence gate 0.15" for the trained heads (eagle, medusa; the drafter's ``--confidence P``,
README); a draft model's: :data:`DRAFT_GATE_TITLE`. Chosen by :func:`gate_title`."""
DRAFT_GATE_TITLE = ("Confidence gate P: the draft model stops drafting where its own probability of the draft so far "
                    "drops below P, so an unsure pass drafts fewer than k tokens, or none (a lower P drafts longer "
                    "and risks more rejected tokens)")
"""The hover title of "confidence gate 0.2" for a draft model (distilled, 'model'). Chosen by :func:`gate_title`."""


def gate_title(drafter: str) -> str:
    """The hover title of a run's confidence gate for the drafter key ``drafter``: the heads' words for eagle and
    medusa (:data:`CONFIDENCE_GATE_TITLE`), a draft model's (:data:`DRAFT_GATE_TITLE`) for the others. The one
    source of both the pane header's title (:mod:`app.live.view`) and the history's k cell's."""
    return CONFIDENCE_GATE_TITLE if drafter in HEAD_DRAFTERS else DRAFT_GATE_TITLE


def _history_k_cell(k: str, drafter: str) -> str:
    """The history's k cell (HTML) for the label ``k`` of a run by the drafter key ``drafter``: on one line ("k = 2
    or step (auto)"); in a label of several parts ("k = 4 (adaptive) · tree of 10 nodes, depth ≤ k · confidence gate
    0.15") only the first, k itself, stays on one line, and the rest wraps as text does (a tree run's label would
    otherwise widen the table past its panel); the confidence gate's part explains itself on hover in the drafter's
    words (:func:`gate_title`: heads or draft model)."""
    first, *rest = [html.escape(part) for part in k.split(" · ")]
    if not rest:
        return f'<td class="hist-k" style="white-space: nowrap">{first}</td>'
    title = html.escape(gate_title(drafter))
    rest = [f'<span title="{title}">{part}</span>' if part.startswith(CONFIDENCE_GATE) else part for part in rest]
    return f'<td class="hist-k"><span style="white-space: nowrap">{first}</span> · {" · ".join(rest)}</td>'


HISTORY_COLUMNS = (("drafter", "drafter"), ("k", "k"), ("temperature, settings", "temperature, settings"),
                   ("tokens", "tokens"), ("acceptance", "acceptance"), ("tokens/<wbr>pass", "tok/pass"),
                   ("spec tok/s*", "spec tok/s*"), ("base tok/s*", "base tok/s*"),
                   ("decoding speedup*", "decoding speedup*"), ("same ids", "same ids"))
"""The history's columns: (the header's HTML, the label a phone shows inside each cell: a quarter of a 400 px
phone's box holds "acceptance" in its small bold type, and "tokens/pass" was cut to "tokens/p…")."""


def _labelled(cell: str, label: str) -> str:
    """A ``<td>`` with its column's ``label`` first, in a span a phone shows above the value (below 640 px the
    header row is hidden and each cell names itself; on a wider screen the span is hidden: ``assets/style.css``)."""
    opened = cell.index(">") + 1
    return f'{cell[:opened]}<span class="hist-label">{html.escape(label)}</span>{cell[opened:]}'


def history_html(history: list[RunSummary]) -> str:
    """The table of this session's runs, newest first. A row's speedup is :func:`history_speedup`: the decoding
    speedup with its interval when it could be judged, the measured number with why it is too noisy to tell, or
    "too short". Acceptance and tokens per pass carry their Live cards' spreads (:func:`history_counted`). The k
    cell never wraps inside a part of its label (:func:`history_k`, :func:`_history_k_cell`). The temperature cell
    also gives a sampled run's seed (``seed``), the generation settings that differ from their defaults
    (``settings``) and a weight format other than float32 (``weights``). The columns are sized to fit the Live
    tab's results column at a 1400 px window (``assets/style.css``, ``.history``); below 640 px the header row is
    hidden and each run is a grid of labelled cells (:func:`_labelled`), so a 400 px phone shows every figure under
    its own name without scrolling sideways. When a shown speedup interval was cut at its run's tokens per pass,
    the title's note says what its :data:`CUT_MARK` means (:func:`app.render.stats.cut_words`). A run measured on a
    busy machine carries :data:`BUSY_MARK` under its speedup (:func:`history_busy`)."""
    if not history:
        return ""
    head = "<tr>" + "".join(f"<th>{h}</th>" for h, _ in HISTORY_COLUMNS) + "</tr>"
    rows = []
    for row in history:
        same = {True: "✓", False: "✗", None: "–"}[row.identical]
        if row.stopped:
            same = "✓ so far" if row.identical is None and row.temperature == 0 else same
        cells = [f'<td class="hist-drafter">{html.escape(str(row.drafter))}</td>',  # wide enough: style.css
                 _history_k_cell(history_k(str(row.k or "–")), row.drafter_key)]
        cells += [f"<td>{html.escape(str(v))}</td>" for v in (
            f"{row.temperature:g}" + (f" · seed {row.seed}" if row.seed is not None else "")
            + (f" · {row.settings}" if row.settings else "")
            + (f" · {row.weights} weights" if row.weights != "float32" else ""),
            row.tokens_text)]
        cells += [f"<td>{history_counted(row.acceptance, row.acceptance_spread, percent=True)}</td>",
                  f"<td>{history_counted(row.tokens_per_pass, row.tokens_per_pass_spread)}</td>"]
        cells += [f"<td>{history_rate(row, key)}</td>" for key in ("spec_tps", "base_tps")]
        cells += [f'<td class="hist-speedup">{history_speedup(row)}{history_busy(row)}</td>', f"<td>{same}</td>"]
        rows.append("<tr>" + "".join(_labelled(cell, label) for cell, (_, label) in zip(cells, HISTORY_COLUMNS))
                    + "</tr>")
    cut = f" · {CUT_MARK} {cut_words()}" if any(r.speedup is not None and r.speedup_cut_at is not None
                                                 for r in history) else ""
    return scroll_box(f'<table class="history">{head}{"".join(rows)}</table>', "Runs in this session",
                      "Runs in this session (newest first) <small>* after the prefill, each run on its own "
                      f"clock{html.escape(cut)}</small>")
