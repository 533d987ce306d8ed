"""The Classroom tab: stop time inside speculative decoding, and ask "what if k were different?".

Step mode replays a recorded run (:class:`specviz.analysis.stepper.Recording`) one phase of one pass at a time. The
built-in walkthroughs ship as recorded runs (``assets/recordings/<id>.json.gz``, :mod:`specviz.analysis.recording`;
made by ``scripts/record_walkthroughs.py``): choosing one, or opening a link to one, opens its run at once with no model
work, read once per process and shared by every session (each keeps only its own step), so a room can step through
it while a live run computes; steps and openings skip the queue. "Record run" records your own settings on the device
(:class:`specviz.analysis.stepper.Recorder`); "Download this run" offers any open run as a file and "Open a recording
file" opens one (when the operator allows uploads: ``SPECVIZ_ALLOW_UPLOADS``; a refused file is one sentence).
A run is stepped (draft -> verify -> accept/reject -> recovered or bonus token; a pass with nothing drafted
ends in a plain target token) with Previous / Play / Next buttons,
keyboard shortcuts (← →, space; ignored while typing in a field), a per-position table (q, p, min(1, p/q), u,
decision; in greedy mode the target's top token), a caption for students, and at a rejection a bar chart of the
target, draft and residual distributions. A presentation view (large type, high contrast) is one checkbox; the
settings travel in the page address (:func:`share_query` / :func:`settings_from_query`, read on page load), and built-in
walkthroughs live in ``assets/walkthroughs.json``.

What-if k runs one greedy run at the largest k next to standard decoding, predicts the speedup of every smaller k
(:mod:`specviz.analysis.whatif`), and re-runs at the recommended k to put the predicted and measured speedups side by
side. Runs go through the app's device runner (:mod:`app.device`), so they never share the device with another
session's run, and they carry the job's cancel flag into the engine (a closed handler stops them before their next
forward). Errors become a one-line message in the tab's status, never a trace.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import html
import json
import logging
import re
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import urlencode

import gradio as gr
import plotly.graph_objects as go

from app import render
from app.device import Job, load_target, relay, waiting_status
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX
from app.inputs import InputError, Settings, fit_prompt_for, fit_settings_exit_layer, parse_settings
from app.lookahead_view import make_pass, ngram_of, pass_html
from app.messages import report, tell_when_clamped
from specviz.analysis import recording as recording_file
from specviz.analysis.recording import RecordingError, RecordingFile
from specviz.analysis.stepper import (Distributions, Recorder, Recording, Stepper, display_text, no_draft_reason,
                                      phase_label)
from specviz.core.engine import MAX_K, speculative_generate, standard_generate
from specviz.core.race import race
from specviz.drafters.registry import choices, make_drafter
from specviz.policy import current_policy
from specviz.analysis.whatif import (MIN_PASSES, WhatIf, analyze, decode_speedup, end_to_end_speedup, tokens_per_pass,
                                    tokens_per_pass_range, tokens_per_s_speedup)

log = logging.getLogger("specviz.app.classroom")

ASSETS = Path(__file__).resolve().parent.parent / "assets"
WALKTHROUGHS_PATH = ASSETS / "walkthroughs.json"
RECORDINGS = ASSETS / "recordings"  # <walkthrough id>.json.gz: the walkthroughs' runs (scripts/record_walkthroughs.py)
DOWNLOADS = Path(tempfile.gettempdir()) / "specviz-recordings"  # files offered by "Download this run"
STEP_MAX_NEW_TOKENS = 64  # a step run is read pass by pass: keep it short
WHATIF_MAX_NEW_TOKENS = 256
PLAY_INTERVAL_S = 1.8  # Play: seconds per step
FIELDS = ("prompt", "drafter", "exit_layer", "draft_model", "k", "temperature", "seed", "max_new_tokens", "target",
          "repetition_penalty")
"""The settings a classroom run needs, in the order the handlers take them (and the share link carries them)."""
DEFAULTS = {"prompt": "", "drafter": "ngram", "exit_layer": 0, "draft_model": "", "k": 4, "temperature": 0.0,
            "seed": 0, "max_new_tokens": 24, "target": "embedded", "repetition_penalty": 1.0}
CUSTOM, CUSTOM_LABEL = "custom", "Your own prompt and settings"
NO_RECORDING = "No run open: pick a walkthrough (its recorded run opens at once) or press Record run."
CHART_TOKENS = 10  # bars per distribution chart


# ------------------------------------------------------------------------------------------------- presets


def load_walkthroughs(path: Path = WALKTHROUGHS_PATH) -> list[dict]:
    """The built-in walkthroughs: [{id, title, menu, description, settings: {field: value}}] (settings are partial;
    missing fields take :data:`DEFAULTS`; ``menu``, optional, is the short label of the walkthrough menu)."""
    return json.loads(path.read_text(encoding="utf-8"))


MENU_LABEL_MAX = 28
"""The most characters of a walkthrough menu label: the closed menu shows its choice on one line, about 260 px wide
in the Classroom's narrow column on a desktop and on a 400 px phone alike; the full title stands in the note under
the menu."""


def menu_choices(walkthroughs: list[dict]) -> list[tuple[str, str]]:
    """The walkthrough menu's (label, id) pairs: each walkthrough's short ``menu`` label (its title when it has
    none), then "Your own prompt and settings"."""
    return [(w.get("menu") or w["title"], w["id"]) for w in walkthroughs] + [(CUSTOM_LABEL, CUSTOM)]


def walkthrough_settings(walkthrough: dict) -> dict:
    """A walkthrough's full settings (:data:`DEFAULTS` filled in)."""
    return {**DEFAULTS, **walkthrough.get("settings", {})}


_CASTS: dict[str, Callable[[str], object]] = {
    "prompt": str, "drafter": str, "draft_model": str, "target": str,
    "exit_layer": int, "k": int, "seed": int, "max_new_tokens": int, "temperature": float, "repetition_penalty": float,
}


def share_query(values: Mapping[str, object], present: bool = False, preset: str | None = None,
                walkthroughs: list[dict] | None = None) -> str:
    """The query string ("?tab=classroom&...") that reopens the Classroom tab with these settings.

    Without ``preset``, the prompt and the drafter are always written and other fields only where they differ from
    :data:`DEFAULTS`; with a known walkthrough id as ``preset``, only the fields that differ from that walkthrough.
    The exit layer is written only for the early-exit drafter, the draft model only for the model drafter.
    """
    by_id = {w["id"]: w for w in (load_walkthroughs() if walkthroughs is None else walkthroughs)}
    base = walkthrough_settings(by_id[preset]) if preset in by_id else None
    params: dict[str, object] = {"tab": "classroom"}
    if base is not None:
        params["preset"] = preset
    for name in FIELDS:
        value = values.get(name, DEFAULTS[name])
        if name == "exit_layer" and values.get("drafter") != "early-exit":
            continue
        if name == "draft_model" and values.get("drafter") != "model":
            continue
        if value is None or (value == "" and name != "prompt"):
            continue
        always = base is None and name in ("prompt", "drafter")
        if always or not _same(value, (base or DEFAULTS)[name]):
            params[name] = _plain(value)
    if present:
        params["present"] = 1
    return "?" + urlencode(params)


def _plain(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def settings_from_query(params: Mapping[str, str], walkthroughs: list[dict] | None = None) -> dict | None:
    """Settings from a page address' query parameters, or None when they hold nothing for the classroom.

    ``preset=<walkthrough id>`` starts from that walkthrough; any field given explicitly overrides it; values that
    do not parse are ignored (the field keeps its default). The result has every field of :data:`FIELDS` plus
    ``present`` (bool), ``preset`` (the walkthrough id, or "") and ``unknown_preset`` (a ``preset`` the link names
    that is no walkthrough's id, or ""; the settings then start from :data:`DEFAULTS`).
    """
    params = {str(k): str(v) for k, v in dict(params).items()}
    if params.get("tab") != "classroom" and "preset" not in params:
        return None
    walkthroughs = load_walkthroughs() if walkthroughs is None else walkthroughs
    by_id = {w["id"]: w for w in walkthroughs}
    preset = params.get("preset", "")
    values = walkthrough_settings(by_id[preset]) if preset in by_id else dict(DEFAULTS)
    for name in FIELDS:
        if name in params:
            try:
                values[name] = _CASTS[name](params[name])
            except ValueError:
                pass
    values["present"] = params.get("present", "") in ("1", "true", "yes", "on")
    values["preset"] = preset if preset in by_id else ""
    values["unknown_preset"] = preset if preset and preset not in by_id else ""
    return values


def unknown_preset_message(preset: str, walkthroughs: list[dict]) -> str:
    """What to say for a link whose ``preset=`` names no walkthrough: that it is unknown, the known ids, and what
    the tab shows instead."""
    known = ", ".join(w["id"] for w in walkthroughs) or "none"
    return (f"The link asks for the walkthrough “{preset}”, which this app does not have. Known walkthroughs: "
            f"{known}. The settings below are the link's other values over the defaults: pick a walkthrough, or "
            "press Record run to record them.")


# ------------------------------------------------------------------------------------------------- recorded runs


def recording_path(walkthrough_id: str) -> Path:
    """Where a walkthrough's recorded run ships (made by ``scripts/record_walkthroughs.py``)."""
    return RECORDINGS / f"{walkthrough_id}{recording_file.SUFFIX}"


@functools.lru_cache(maxsize=16)
def _read_shipped(path: str, stamp: int) -> RecordingFile:
    return recording_file.load(path)


def shipped_recording(walkthrough_id: str) -> RecordingFile | None:
    """A walkthrough's recorded run, read once per process and shared by every session; None when none ships (or
    its file cannot be opened: logged)."""
    if not re.fullmatch(r"[\w-]+", walkthrough_id or ""):
        return None
    path = recording_path(walkthrough_id)
    try:
        return _read_shipped(str(path), path.stat().st_mtime_ns)
    except OSError:
        return None
    except RecordingError as error:
        log.warning("the recorded run of walkthrough %s cannot be opened: %s", walkthrough_id, error)
        return None


def recording_meta(values: Mapping[str, object], walkthrough: dict | None = None) -> dict:
    """What a recording file says about its run: its settings (:data:`FIELDS`) and, for a walkthrough, its id and
    title."""
    meta: dict = {"settings": {name: _plain(values.get(name, DEFAULTS[name])) for name in FIELDS}}
    if walkthrough:
        meta |= {"walkthrough": walkthrough["id"], "title": walkthrough["title"]}
    return meta


def meta_settings(meta: Mapping) -> dict | None:
    """The settings a recording file names (every field of :data:`FIELDS`; values that do not parse keep their
    defaults), or None when it names none."""
    settings = meta.get("settings") if isinstance(meta, Mapping) else None
    if not isinstance(settings, Mapping):
        return None
    values = dict(DEFAULTS)
    for name in FIELDS:
        if isinstance(settings.get(name), (str, int, float)) and not isinstance(settings[name], bool):
            try:
                values[name] = _CASTS[name](settings[name])
            except (TypeError, ValueError):
                pass
    return values


def _download_path(data: bytes, name: str) -> str:
    """A file holding ``data`` under ``name`` in the downloads folder (one per content: sessions share it)."""
    path = DOWNLOADS / hashlib.sha256(data).hexdigest()[:16] / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{name}.{time.monotonic_ns()}")
        part.write_bytes(data)
        part.replace(path)
    return str(path)


def download_file(file: RecordingFile) -> str:
    """The file "Download this run" offers for an opened recording (``<walkthrough id>.json.gz`` or
    ``specviz-run.json.gz``)."""
    name = re.sub(r"[^\w-]+", "-", str(file.meta.get("walkthrough") or "specviz-run"))[:60] or "specviz-run"
    return _download_path(recording_file.dumps(file.recording, file.meta), name + recording_file.SUFFIX)


def _summary(recording: Recording) -> str:
    passes = sum(1 for e in recording.events if e.kind == "pass")
    rejections = sum(1 for e in recording.events if e.num_rejections)
    return (f"{len(recording.output_ids)} tokens in {passes} passes ({rejections} with a rejection). Step with Next / "
            "Previous (or → ← on the keyboard), Play with space")


def opened(file: RecordingFile, what: str, shipped: Path | None = None) -> tuple:
    """(stepper, status, progress, caption, table, chart, output, download) of an opened recording; ``shipped``:
    the file it was read from, offered as it is."""
    stepper = Stepper(file.recording)
    status = render.status_html(f"{what}: {_summary(file.recording)}; nothing runs on the model while you step.",
                                "done")
    offer = _download_path(shipped.read_bytes(), shipped.name) if shipped is not None else download_file(file)
    return (stepper, status, *view(stepper), gr.update(value=offer, interactive=True))


def _open_shipped(walkthrough: dict) -> tuple:
    """:func:`opened` for a walkthrough's recorded run (or a note to record it when none ships)."""
    file = shipped_recording(walkthrough["id"])
    if file is None:
        return (None, render.status_html("This walkthrough has no recorded run here: press Record run to record it.",
                                         "info"), *view(None), gr.update(value=None, interactive=False))
    return opened(file, f"Recorded run of “{walkthrough['title']}”", recording_path(walkthrough["id"]))


# ------------------------------------------------------------------------------------------------- rendering


def _fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


_BADGES = {"accepted": "✓ accepted", "rejected": "✗ rejected", "not judged": "– not judged",
           "recovered": "★ recovered", "bonus": "★ bonus", "target": "● plain target token"}


_TIPS = {"q (draft)": "the drafter's probability of its guess", "p (target)": "the target's probability of it",
         "min(1, p/q)": "the chance that rejection sampling keeps the guess",
         "u": "the uniform random number drawn: accept if u < min(1, p/q)",
         "target's top token": "greedy mode: a guess is accepted only if it is the target's top token"}
_PENDING = '<span class="cr-pending" title="revealed in a later phase">…</span>'
_NEXT_KIND = {"recovered": "recovered: the target's own token", "bonus": "bonus: the target's extra token",
              "target": "the target's own token, nothing drafted to check"}


def _table_head(greedy: bool) -> list[str]:
    """The table's column headers: greedy mode shows the target's top token, sampling min(1, p/q) and u."""
    head = ["#", "draft token"] + (["target's top token"] if greedy else []) + ["q (draft)", "p (target)"]
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


def _labels(ids, rec: Recording) -> list[str]:
    labels, seen = [], {}
    for t in ids:
        text = display_text(rec.text(t))
        label = f"“{text if len(text) <= 14 else text[:13] + '…'}”"
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label} #{t}")
    return labels


MARK_HEADROOM = 1.6  # the probability axis' top over the tallest bar: room for the ✗ / ★ marks above it
MARK_ROOM_PX = 64  # the top margin's growth when the axis stops at 1 and a mark stands above the plot


def probability_range(tallest: float) -> tuple[float, int]:
    """(the probability axis' top, extra top margin in px) for a rejection chart whose tallest bar is ``tallest``:
    room above it for the marks, but never past 1, the largest probability; when the axis stops at 1, the marks of a
    tall bar stand above the plot, in a top margin grown by :data:`MARK_ROOM_PX`."""
    top = tallest * MARK_HEADROOM
    return (top, 0) if top <= 1.0 else (1.0, MARK_ROOM_PX)


def rejection_figure(dist: Distributions, rec: Recording, reveal: bool = True) -> go.Figure:
    """Bars of the target's p, the draft's q and (sampling) the residual norm(max(0, p − q)) over their top tokens,
    with the rejected draft token marked and, when ``reveal`` (phase 4, emit), the recovered token: at phase 3
    (accept / reject) the caption says it is drawn in the next step, so the chart does not show it yet."""
    must = {dist.token_ids.index(dist.drafted_id), dist.token_ids.index(dist.chosen_id)}
    rest = [i for i in range(len(dist.token_ids)) if i not in must]  # already most probable first
    keep = sorted(must | set(rest[:max(0, CHART_TOKENS - len(must))]))
    ids = [dist.token_ids[i] for i in keep]
    x = _labels(ids, rec)
    traces = [
        {"type": "bar", "x": x, "y": [dist.target[i] for i in keep], "name": "target p",
         "marker": {"color": COLORS["verify"]}},
        {"type": "bar", "x": x, "y": [dist.draft[i] for i in keep],
         "name": "draft q" + ("" if dist.draft_known else " (only the guess is known)"),
         "marker": {"color": COLORS["draft"]}},
    ]
    if dist.residual is not None:
        traces.append({"type": "bar", "x": x, "y": [dist.residual[i] for i in keep],
                       "name": "residual norm(max(0, p − q))", "marker": {"color": COLORS["accepted"]}})
    heights = [max(t["y"][j] for t in traces) for j in range(len(x))]
    notes = []
    marks = [(dist.drafted_id, "✗ drafted (rejected)", COLORS["rejected"])]
    if reveal:
        marks.append((dist.chosen_id, "★ recovered", COLORS["recovered"]))
    for token, text, color in marks:
        j = ids.index(token)
        shift = 18 if token == dist.drafted_id and dist.drafted_id != dist.chosen_id and reveal else 0
        notes.append({"x": x[j], "y": heights[j], "text": f"<b>{text}</b>", "showarrow": True, "arrowhead": 2,
                      "ax": 0, "ay": -28 - shift, "font": {"color": color, "size": 13}, "arrowcolor": color})
    why = ("the target's top choice replaces the guess" if dist.residual is None else
           "the recovered token is drawn from the residual")
    title = f"At the rejection:<br><span style='font-size:13px'>{why}</span>"  # two short lines fit a phone
    top, room = probability_range(max(heights + [0.05]))
    layout = {"template": "plotly_white", "font": {"family": FONT, "size": 13}, "height": 380 + room,
              "title": {"text": title, "font": {"size": 15}, "x": 0.01, "xanchor": "left"}, "annotations": notes,
              "margin": {"l": 55, "r": MODEBAR_MARGIN_PX, "t": 70 + room, "b": 20}, "barmode": "group",
              "modebar": MODEBAR,
              "xaxis": {"automargin": True, "tickangle": -30 if len(x) > 6 else 0},
              "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero", "range": [0, top]},
              # inside the plot's top right, above the small bars (the most probable tokens come first)
              "legend": {"orientation": "v", "y": 1, "yanchor": "top", "x": 1, "xanchor": "right",
                         "bgcolor": "rgba(255,255,255,0.85)", "font": {"size": 12}}}
    return go.Figure({"data": traces, "layout": layout})


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


_CHARTS: OrderedDict[tuple[int, int], tuple[Recording, go.Figure]] = OrderedDict()
_CHARTS_LOCK = threading.Lock()
CHART_CACHE_SIZE = 256  # rejection charts kept (a 64-token run has at most 128: two per pass)


def rejection_chart(stepper: Stepper) -> go.Figure | None:
    """The rejection chart of the stepper's current step (None when it shows none), the recovered token marked at
    the emit phase only (:func:`rejection_figure`). Built once per recording, pass and phase kind, then shared by every session stepping through that recording: a figure costs tens of milliseconds, a
    step otherwise well under one."""
    dist = stepper.distributions()
    if dist is None:
        return None
    rec = stepper.recording
    reveal = stepper.current.phase == "emit"  # the recovered token is drawn in phase 4, not before
    key = (id(rec), stepper.current.pass_index, reveal)
    with _CHARTS_LOCK:
        hit = _CHARTS.get(key)
        if hit is not None and hit[0] is rec:  # the entry holds its recording, so the id is not reused meanwhile
            _CHARTS.move_to_end(key)
            return hit[1]
    figure = rejection_figure(dist, rec, reveal)
    with _CHARTS_LOCK:
        _CHARTS[key] = (rec, figure)
        while len(_CHARTS) > CHART_CACHE_SIZE:
            _CHARTS.popitem(last=False)
    return figure


def whatif_figure(result: WhatIf, checks: Mapping[int, float] | None = None) -> go.Figure:
    """Predicted speedup against k (the recommended k starred), the paper's prediction, 1× (standard decoding),
    the speedup measured at k_max in the what-if run, and any re-run measurements ``checks`` {k: speedup}."""
    ks = [p.k for p in result.predictions]
    rec = result.recommended
    hover = [f"k = {p.k}<br>E[tokens/pass] = {p.expected_tokens:.2f}<br>pass {p.pass_ms:.1f} ms vs step "
             f"{result.costs.step_ms:.1f} ms<br>predicted {p.speedup:.2f}×" for p in result.predictions]
    predicted = {"type": "scatter", "mode": "lines+markers", "x": ks, "y": [p.speedup for p in result.predictions],
                 "name": "predicted (measured costs)", "line": {"color": COLORS["speculative"], "width": 3},
                 "hovertext": hover, "hoverinfo": "text"}
    spread = result.spread
    if spread is not None:  # the bootstrap range of each k's prediction, as error bars
        level = f"{spread.level:.0%}"
        predicted["name"] = f"predicted (measured costs;<br>bars: {level} of resampled passes)"  # fits 400 px
        predicted["error_y"] = {"type": "data", "symmetric": False, "color": COLORS["speculative"], "thickness": 1.5,
                                "array": [max(0.0, h - p.speedup) for h, p in zip(spread.high, result.predictions)],
                                "arrayminus": [max(0.0, p.speedup - lo) for lo, p in zip(spread.low, result.predictions)]}
        hover[:] = [f"{h}<br>{level} of resamples: {_range_words((lo, hi), 2)}; best in {share:.0%}"
                    for h, lo, hi, share in zip(hover, spread.low, spread.high, spread.best_share)]
    traces = [
        predicted,
        {"type": "scatter", "mode": "lines", "x": ks, "y": [p.paper_speedup for p in result.predictions],
         "name": "paper (a verify costs one step)", "line": {"color": COLORS["baseline"], "dash": "dot", "width": 2}},
        {"type": "scatter", "mode": "markers", "x": [rec.k], "y": [rec.speedup],
         "name": f"recommended k = {rec.k}", "marker": {"symbol": "star", "size": 20, "color": COLORS["recovered"]}},
    ]
    if result.measured_speedup is not None:
        traces.append({"type": "scatter", "mode": "markers", "x": [result.k_max], "y": [result.measured_speedup],
                       "name": f"measured in this run (k = {result.k_max})",
                       "marker": {"symbol": "diamond-open", "size": 13, "color": COLORS["bonus"],
                                  "line": {"width": 2}}})
    if checks:
        traces.append({"type": "scatter", "mode": "markers", "x": list(checks), "y": list(checks.values()),
                       "name": "measured by the re-run",
                       "marker": {"symbol": "diamond", "size": 14, "color": COLORS["accepted"]}})
    layout = {"template": "plotly_white", "font": {"family": FONT, "size": 13}, "height": 380,
              "title": {"text": "What if k were different?<br><span style='font-size:12px'>Predicted decoding "
                                "speedup</span>", "font": {"size": 15}},  # two short lines fit a phone
              "xaxis": {"title": {"text": "draft length k"}, "dtick": 1 if len(ks) <= 16 else None},
              "yaxis": {"title": {"text": "× standard decoding"}, "rangemode": "tozero", "automargin": True},
              "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                          "line": {"color": "#8c959f", "dash": "dash", "width": 1}}],
              "annotations": [{"x": rec.k, "y": rec.speedup, "text": f"<b>k = {rec.k}: {rec.speedup:.2f}×</b>",
                               "showarrow": True, "ay": -34, "ax": 0, "font": {"color": COLORS["recovered"]}}],
              "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 60, "b": 50}, "modebar": MODEBAR,
              # below the axis title (y = -0.2 put its rows on it where a phone wraps the legend into four)
              "legend": {"orientation": "h", "y": -0.3, "yanchor": "top", "x": 0}}
    return go.Figure({"data": traces, "layout": layout})


ONE_RUN = "one run: no spread"
"""The mark of a measured speedup of the what-if: one speculative run against one baseline run, one sample."""


def _with_range(value: float | None, spread: tuple[float, float] | None, digits: int, unit: str = "",
                single: str | None = None, none: str = "–") -> str:
    """A figure with its spread, e.g. "1.96× (1.50–2.30)" (``spread``: (low, high)); with no spread, ``single``
    (e.g. :data:`ONE_RUN`) marks it as one sample; ``none`` when there is no value."""
    if value is None:
        return none
    text = f"{value:.{digits}f}{unit}"
    if spread is not None:
        return f"{text} <small class=\"wi-range\">({_range_words(spread, digits)})</small>"
    return f"{text} <small class=\"wi-range\">({single})</small>" if single else text


def _range_words(spread: tuple[float, float], digits: int) -> str:
    """"1.50–2.30"; "all resamples equal" where both ends read the same at ``digits`` (every resample of the
    passes gave one value, e.g. every pass accepted all k: a range "1.96–1.96" would read as a typo)."""
    low, high = f"{spread[0]:.{digits}f}", f"{spread[1]:.{digits}f}"
    return "all resamples equal" if low == high else f"{low}–{high}"


def _predicts(low: float, high: float) -> str:
    """A speedup's range for a sentence: "1.50–2.30×", or "1.96× in every resample" where both ends read the same."""
    words = _range_words((low, high), 2)
    return f"{low:.2f}× in every resample" if words == "all resamples equal" else f"{words}×"


def _plain_range(value: float | None, spread: tuple[float, float] | None) -> str:
    """A speedup for a status line (plain text): "1.96× (1.50–2.30)", "1.96×" or "–"."""
    if value is None:
        return "–"
    return f"{value:.2f}×" + (f" ({_range_words(spread, 2)})" if spread is not None else "")


def _range_note(spread) -> str:
    """What the ranges after the check's figures are (nothing without a spread)."""
    if spread is None:
        return ""
    return (f' <small>Ranges: {spread.level:.0%} of {spread.resamples} resamples of the run\'s {spread.passes} '
            "passes.</small>")


def whatif_caveats(result: WhatIf) -> list[str]:
    """How far to trust the recommended k (HTML lines): the bootstrap range of its prediction and how often it
    came out best (:func:`specviz.analysis.whatif.spread`), or that the run had too few passes to tell the k apart;
    and, when the best k is the largest tried, that a larger one might be faster still."""
    rec, spread, lines = result.recommended, result.spread, []
    if spread is not None:
        runners = sorted(((share, k) for k, share in enumerate(spread.best_share, 1) if k != rec.k and share >= 0.1),
                         reverse=True)
        others = "".join(f"; k = {k} in {share:.0%}" for share, k in runners)
        lines.append(f"Spread: over {spread.resamples} resamples of the run's {spread.passes} passes, k = {rec.k} "
                     f"predicts {_predicts(spread.low[rec.k - 1], spread.high[rec.k - 1])} ({spread.level:.0%} of "
                     f"them) and comes out best in {spread.best_share[rec.k - 1]:.0%}{others}.")
        if spread.too_few:
            lines.append(f"<b>Too few passes to tell:</b> {spread.passes} passes (fewer than {MIN_PASSES}) say little "
                         "about which k is best: allow more tokens per run and run the what-if again.")
    if result.best_at_edge:
        lines.append(f"<b>The best k is the largest tried</b> (k = {result.k_max}): a larger k might be faster still. "
                     "Raise Largest k and run the what-if again to find the peak.")
    return lines


def rerun_k(result: WhatIf) -> int | None:
    """The k that "Re-run at the recommended k" checks: the recommended k, or None when it is the k the what-if
    run itself used (its measured speedup is already the check)."""
    return None if result.recommended.k == result.k_max else result.recommended.k


def rerun_button(result: WhatIf) -> gr.Button:
    """The re-run button after a what-if: "Re-run at k = k* to check", or, when k* is the run's own k, off and
    saying that it was measured in this run."""
    k = rerun_k(result)
    if k is None:
        return gr.Button(value=f"k = {result.k_max} was measured in this run", interactive=False)
    return gr.Button(value=f"Re-run at k = {k} to check", interactive=True)


def whatif_html(result: WhatIf, check: dict | None = None) -> str:
    """The what-if summary: the recommended k, and after a re-run its predicted and measured figures side by side;
    then the per-k table."""
    rec, costs = result.recommended, result.costs
    lines = [f'<div class="wi-head">Recommended <b>k = {rec.k}</b>: predicted <b>{rec.speedup:.2f}×</b> '
             f'({rec.expected_tokens:.2f} tokens per pass; a pass costs {rec.pass_ms:.1f} ms, a standard step '
             f'{costs.step_ms:.1f} ms).</div>']
    if rec.speedup < 1:
        lines.append('<div class="wi-note">No k beats standard decoding here: drafting and verifying cost more '
                     'than the accepted tokens save on this machine.</div>')
    lines.extend(f'<div class="wi-note wi-caveat">{line}</div>' for line in whatif_caveats(result))
    if result.measured_speedup is not None:
        at_max, spread = result.at(result.k_max), result.spread
        (speed, tau) = spread.at(result.k_max) if spread is not None else (None, None)
        measured_tau = _with_range(result.measured_tokens_per_pass, spread.measured_tokens if spread else None, 2,
                                   none="– (no pass drafted k)")
        lines.append(f'<div class="wi-note" id="whatif-inside">Check inside this run (k = {result.k_max}): predicted '
                     f'{_with_range(at_max.speedup, speed, 2, "×")}, measured '
                     f'{_with_range(result.measured_speedup, None, 2, "×", single=ONE_RUN)}; tokens per pass '
                     f'predicted {_with_range(at_max.expected_tokens, tau, 2)}, measured {measured_tau}.'
                     f'{_range_note(spread)}</div>')
    if check is not None:
        ranges = check.get("ranges", {})
        rows = [(f"tokens per pass (passes drafting k = {check['k']})",
                 _with_range(check["predicted_tau"], ranges.get("predicted_tau"), 2),
                 _with_range(check["measured_tau"], ranges.get("measured_tau"), 2)),
                ("decoding speedup (prefill excluded)",
                 _with_range(check["predicted"], ranges.get("predicted"), 2, "×"),
                 _with_range(check["measured"], None, 2, "×", single=ONE_RUN)),
                ("tokens/s ratio (prefill included)",
                 _with_range(check["predicted_e2e"], ranges.get("predicted_e2e"), 2, "×"),
                 _with_range(check["measured_e2e"], None, 2, "×", single=ONE_RUN))]
        body = "".join(f"<tr><th>{html.escape(a)}</th><td>{b}</td><td>{c}</td></tr>" for a, b, c in rows)
        note = ("Ranges: 80% of the bootstrap resamples of the runs' passes (the what-if run's for the "
                "predictions, the re-run's for its tokens per pass); a speedup from one run pair has no spread.")
        if result.spread is not None:
            note = note.replace("80%", f"{result.spread.level:.0%}")
        lines.append(render.scroll_box(
            f'<table class="wi-check" id="whatif-check"><caption>Re-run at k = {check["k"]} ({check["tokens"]} '
            f'tokens, new baseline run)</caption><thead><tr><th></th><th>predicted</th><th>measured</th></tr></thead>'
            f'<tbody>{body}</tbody></table>', f"Re-run at k = {check['k']}: predicted and measured"))
        lines.append(f'<div class="wi-note wi-range-note">{note}</div>')
    cells = "".join(
        f'<tr{" class=wi-best" if p.k == rec.k else ""}><td>{p.k}</td><td>{result.rates[p.k - 1]:.2f}</td>'
        f'<td>{p.expected_tokens:.2f}</td><td>{p.pass_ms:.1f}</td><td>{p.speedup:.2f}×</td></tr>'
        for p in result.predictions)
    table = render.scroll_box('<table class="wi-table"><thead><tr><th>k</th><th>a_k (accept k | k−1 accepted)</th>'
                              '<th>E[tokens/pass]</th><th>pass ms</th><th>predicted</th></tr></thead>'
                              f'<tbody>{cells}</tbody></table>', "Per-k numbers")
    lines.append(f'<details class="wi-details"><summary>Per-k numbers</summary>{table}'
                 f'<p>Draft {costs.draft_ms_per_token:.2f} ms per token; other work {costs.pass_overhead_ms:.2f} ms '
                 f'per pass; verify time interpolated between the one-token forward ({costs.step_forward_ms:.1f} ms)'
                 f' and the measured passes. Greedy decoding, {result.tokens} tokens. Tokens per pass are measured '
                 f'over the passes that drafted the full k: near the token limit a pass drafts fewer.</p></details>')
    return f'<div class="wi-result">{"".join(lines)}</div>'


# ------------------------------------------------------------------------------------------------- running


def parse(prompt, drafter, exit_layer, draft_model, k, temperature, seed, max_new_tokens, target,
          repetition_penalty=1.0, *, limit: int = STEP_MAX_NEW_TOKENS) -> Settings:
    """Validate the classroom's settings through :func:`app.inputs.parse_settings`; a classroom run needs a
    drafter and at most ``limit`` new tokens; its repetition penalty (1 = off) applies to the target and the draft
    alike, so the step view's p and q are the penalized ones. Raises :class:`app.inputs.InputError`."""
    if drafter == "none" or not drafter:
        raise InputError("The classroom needs a drafter: pick one (n-gram lookup needs no model).")
    try:
        tokens = int(float(max_new_tokens))
    except (TypeError, ValueError):
        raise InputError("Max new tokens must be a whole number.") from None
    if tokens > limit:
        raise InputError(f"Keep it short in the classroom: at most {limit} new tokens (got {tokens}).")
    return parse_settings(dict(prompt=prompt, target=target, drafter=drafter, draft_model=draft_model,
                               exit_layer=exit_layer, k=k, adaptive_k=False, temperature=temperature, top_p=1.0,
                               top_k=0, seed=seed, max_new_tokens=max_new_tokens, stop_strings="", chat_template=True,
                               repetition_penalty=repetition_penalty))


def _prepare(settings: Settings, say: Callable[[str], None]):
    """Load the target and a fresh drafter, and encode the prompt: (target, drafter, prompt ids, note, settings
    as run). An
    early-exit layer the loaded target lacks is fitted to its layers, as in Live
    (:func:`app.inputs.fit_settings_exit_layer`): the note says so, before the prompt's note ("" when neither has
    one). Raises InputError for a target with no layer to exit after, or a prompt that does not fit."""

    say(f"Loading the target {settings.target}…")
    target = load_target(settings.target, progress=say)
    settings, layer_note = fit_settings_exit_layer(settings, target)
    say("Preparing the drafter…")
    drafter = make_drafter(settings.drafter, target, draft_spec=settings.draft_model, exit_layer=settings.exit_layer,
                           window=settings.window, ngram=settings.ngram, candidates=settings.candidates, progress=say)
    prompt_ids, prompt_note, _ = fit_prompt_for(settings, target, drafter)
    note = " ".join(n for n in (layer_note, prompt_note) if n)
    return target, drafter, prompt_ids, note, settings


def _record_work(settings, job: Job):
    """In the job's thread: record a run (:func:`record_settings`). Module-level, so it can run in a ZeroGPU
    worker (:mod:`app.zerogpu`)."""
    return record_settings(settings, job.say, job.cancel)


def _whatif_work(settings, k_max: int, job: Job):
    """In the job's thread: one greedy run at ``k_max`` and one of standard decoding: (spec events, base events).
    The analysis (:func:`specviz.analysis.whatif.analyze`, its bootstrap included) runs after the job, so the device
    is held only while the model computes."""
    target_model, drafter_obj, prompt_ids, note, _ = _prepare(settings, job.say)
    job.say(f"{note + ' ' if note else ''}Running k = {k_max} and standard decoding (greedy, "
            f"{settings.max_new_tokens} tokens)…")
    return _run_pair(target_model, drafter_obj, prompt_ids, settings.config(), job.cancel)


def _rerun_work(settings, k: int, job: Job):
    """In the job's thread: the what-if's check, a run at the recommended ``k`` and standard decoding."""
    target_model, drafter_obj, prompt_ids, note, _ = _prepare(settings, job.say)
    job.say(f"{note + ' ' if note else ''}Re-running at k = {k} and standard decoding…")
    return _run_pair(target_model, drafter_obj, prompt_ids, settings.config(), job.cancel)


def _on_device(work: Callable[[Job], object], what: str, width: int):
    """Run ``work(job)`` on the device in a job's thread; yield output tuples of ``width`` with the status second
    (the place in line while waiting, then the latest message ``work`` gave :meth:`Job.say`, every 0.25 s).
    Returns ``work``'s result, or None when the run was cancelled (the handler went away: ``work`` passes the job's
    flag to the engine, which then starts no other forward); re-raises its error."""
    skip = gr.skip()
    job = Job(what, session="classroom")
    latest, started = ["Starting…"], time.monotonic()

    def status(html_status: str) -> tuple:
        return (skip, html_status) + (skip,) * (width - 2)

    def show(item) -> tuple:
        if isinstance(item, str):
            latest[0] = item
        return status(render.status_html(f"{latest[0]} ({time.monotonic() - started:.0f} s)", "busy"))

    try:
        if not (yield from relay(job.turn(), lambda place: status(waiting_status(place.ahead, place.holder)))):
            return None
        started = time.monotonic()
        return (yield from relay(job.call(work, job, stoppable=True), show))
    finally:
        job.release()


def _failed(error: BaseException) -> str:
    """The error status of a failed classroom run (logged; no toast: the tab's status line says it)."""
    return report("classroom run", error, toast=False)


def record_settings(settings: Settings, say: Callable[[str], None] = lambda message: None, cancel=None):
    """Record one run with ``settings`` (loads the target and the drafter): (Recording, note on the layer and the
    prompt, the early-exit layer it ran at: the asked one fitted to the target's layers).
    ``cancel``: the job's flag (RunCancelled before the next forward once it is set)."""
    target_model, drafter_obj, prompt_ids, note, settings = _prepare(settings, say)
    say("Recording the run…")
    recorder = Recorder(target_model, drafter_obj, prompt_ids, settings.config(), cancel=cancel)
    for event in recorder.events():
        say(f"Recording… pass {event.index}, {event.num_generated} tokens")
    return recorder.recording(), note, settings.exit_layer


def record(prompt, drafter, exit_layer, draft_model, k, temperature, seed, max_new_tokens, target,
           repetition_penalty=1.0):
    """"Record run": validate, record a run on the device, then show its first step.
    Yields (stepper state, status, progress, caption, table, chart, output, download)."""
    skip = gr.skip()
    values = dict(zip(FIELDS, (prompt, drafter, exit_layer, draft_model, k, temperature, seed, max_new_tokens,
                               target, repetition_penalty)))
    try:
        settings = parse(*values.values())
        recorded = yield from _on_device(functools.partial(_record_work, settings),
                                         "the classroom is recording a run", 8)
    except Exception as error:  # noqa: BLE001 - any failure is a message, the tab stays usable
        yield (skip, _failed(error), skip, skip, skip, skip, skip, skip)
        return
    if recorded is None:  # cancelled: the handler is gone
        return
    recording, note, values["exit_layer"] = recorded  # the file names the layer the run used
    file = RecordingFile(recording, recording_meta(values))
    stepper, status, *rest = opened(file, "Recorded")
    if note:
        status = render.status_html(f"Recorded: {_summary(recording)}.", "done", notes=[note])
    yield (stepper, status, *rest)


def record_walkthrough(walkthrough: dict, target: str = "embedded",
                       say: Callable[[str], None] = lambda message: None) -> RecordingFile:
    """Record a walkthrough's run as the Classroom would (on ``target``), with the file's meta: how the shipped
    recordings are made (``scripts/record_walkthroughs.py``) and checked."""
    values = {**walkthrough_settings(walkthrough), "target": target}
    recording, _, values["exit_layer"] = record_settings(parse(*(values[f] for f in FIELDS)), say)
    return RecordingFile(recording, recording_meta(values, walkthrough))


def stop_playing() -> tuple:
    """(playing, timer, play button) of a paused Play: what opening another run sends, so Play never steps a run
    the user did not start it on (a walkthrough picked while playing opens at its first step and stays there)."""
    return (False, gr.Timer(active=False), gr.Button(value="▶ Play"))


def open_walkthrough(walkthrough_id: str):
    """The walkthrough menu: its settings and note, and its recorded run opened at the first step (no model
    work), Play paused. Returns (note, *FIELDS, stepper, status, *view, download, playing, timer, play button);
    skips for "Custom" or an unknown id."""
    by_id = {w["id"]: w for w in load_walkthroughs()}
    if walkthrough_id not in by_id:
        return (gr.skip(),) * (len(FIELDS) + 12)
    walkthrough = by_id[walkthrough_id]
    values = walkthrough_settings(walkthrough)
    return (_note_html(walkthrough), *(values[f] for f in FIELDS), *_open_shipped(walkthrough), *stop_playing())


def uploads_allowed() -> bool:
    """Whether visitors may open recording files they upload here (SPECVIZ_ALLOW_UPLOADS)."""
    return current_policy().allow_uploads


KEPT_RUN = "Nothing else changed: the run shown is the one open before."
"""Said after a refused recording file, so its status is not read as the shown run's."""


PICK_FILE = ("Pick a recording file (.json.gz, at most 1 MB) to open; the run shown stays open until one opens.")
"""The status while the file picker is open (:func:`upload_started`)."""


def upload_started() -> str:
    """"Open a recording file" clicked: the status says a file is being picked, so no earlier upload's message
    stays under it (a file over Gradio's own size limit is refused in the browser with a toast, open_upload never
    runs)."""
    return render.status_html(PICK_FILE, "info")


def open_upload(path):
    """"Open a recording file": check it (operator setting, size, format) and open it at the first step; the
    settings it names fill the fields, Play paused. Returns (walkthrough, note, *FIELDS, stepper, status, *view,
    download, playing, timer, play button); a refused file changes nothing but the status (one sentence)."""
    skip = gr.skip()

    def refused(message: str) -> tuple:
        return (*(skip,) * (len(FIELDS) + 3), render.status_html(message, "error"), *(skip,) * 9)

    if not uploads_allowed():
        return refused("Opening recording files is turned off on this server (SPECVIZ_ALLOW_UPLOADS).")
    if not path:
        return refused("No file arrived: pick a recording file (.json.gz) to open.")
    name = Path(str(path)).name
    try:
        file = recording_file.load(path)
    except RecordingError as error:
        log.info("refused recording file %s: %s", name, error)
        return refused(f"{name}: {error} {KEPT_RUN}")
    values = meta_settings(file.meta)
    by_id = {w["id"]: w for w in load_walkthroughs()}
    walkthrough = by_id.get(str(file.meta.get("walkthrough")))
    if walkthrough is None or values is None or not _matches(walkthrough, values):
        walkthrough = None
    menu = walkthrough["id"] if walkthrough else CUSTOM
    fields = (values[f] for f in FIELDS) if values is not None else (skip,) * len(FIELDS)
    return (gr.update(value=menu), _note_html(walkthrough), *fields, *opened(file, f"Opened {name}"),
            *stop_playing())


def _step(move: Callable[[Stepper], object]):
    def handler(stepper):
        if stepper is None:
            return (None, *view(None))
        move(stepper)
        return (stepper, *view(stepper, fresh=False))
    return handler


step_next = _step(Stepper.next)
step_prev = _step(Stepper.prev)
def step_rejection(stepper):
    """"Next rejection »": jump to the next decision with a rejection; when there is none ahead, stay and say so
    under the caption (a silent button reads as broken)."""
    if stepper is None:
        return (None, *view(None))
    before = stepper.index
    stepper.next_rejection()
    progress, caption, table, chart, output = view(stepper, fresh=False)
    if stepper.index == before:
        left = "in this run" if before == 0 else "after this step"
        caption = caption.replace("</div>", f'<br><small class="cr-none">No rejection {left}.</small></div>', 1)
    return (stepper, progress, caption, table, chart, output)
step_first = _step(lambda s: s.goto(0))


def play_toggle(stepper, playing):
    """Play / Pause: (playing, timer, play button, stepper, *view). Play at the last step starts over."""
    playing = bool(not playing and stepper is not None)
    if playing and stepper.at_end:
        stepper.goto(0)
    label = "‖ Pause" if playing else "▶ Play"
    views = view(stepper, fresh=False) if playing else (gr.skip(),) * 5
    return (playing, gr.Timer(active=playing), gr.Button(value=label), stepper, *views)


def play_tick(stepper, playing):
    """A timer tick while playing: advance one step; stop at the end."""
    if stepper is None or not playing or stepper.at_end:
        return (False, gr.Timer(active=False), gr.Button(value="▶ Play"), stepper, *(gr.skip(),) * 5)
    stepper.next()
    still = not stepper.at_end
    return (still, gr.Timer(active=still), gr.Button(value="‖ Pause" if still else "▶ Play"), stepper,
            *view(stepper, fresh=False))


def _run_pair(target, drafter, prompt_ids, config, cancel) -> tuple[list, list]:
    """The speculative run and its baseline, interleaved by their own clocks (:func:`specviz.core.race.race`);
    both check ``cancel`` before every forward (raising RunCancelled)."""
    spec, base = [], []
    for event in race(speculative_generate(target, drafter, prompt_ids, config, cancel=cancel),
                      standard_generate(target, prompt_ids, config, cancel=cancel)):
        (spec if event.run == "speculative" else base).append(event)
    return spec, base


def whatif_run(prompt, drafter, exit_layer, draft_model, seed, target, k_max, tokens):
    """"Run what-if": one greedy run at ``k_max`` and its baseline, then the prediction for every k.
    Yields (what-if state, status, chart, result, re-run button)."""
    skip = gr.skip()
    try:
        k_max = int(float(k_max))
        if drafter == "lookahead":
            raise InputError("Lookahead decoding's k is fixed by its n-gram size (N − 1), so there is no k to choose: "
                             "the what-if needs a drafter whose draft length you set (n-gram lookup, a draft model, "
                             "early exit, EAGLE, Medusa, suffix decoding).")
        settings = parse(prompt, drafter, exit_layer, draft_model, k_max, 0.0, seed, tokens, target,
                         limit=WHATIF_MAX_NEW_TOKENS)
        pair = yield from _on_device(functools.partial(_whatif_work, settings, k_max),
                                     "the classroom is measuring what-if k", 5)
        if pair is None:  # cancelled: the handler is gone
            return
        result = analyze(*pair, k_max)  # off the device: the next run in line need not wait for the bootstrap
    except Exception as error:  # noqa: BLE001
        yield (skip, _failed(error), skip, skip, skip)
        return
    state = {"result": result, "settings": settings, "checks": {}}
    yield (state, whatif_status(result), gr.update(value=whatif_figure(result), visible=True), whatif_html(result),
           rerun_button(result))


def whatif_status(result: WhatIf) -> str:
    """The status line after a what-if (HTML): what it was predicted from and what checks it next."""
    said = f"Predicted from one greedy run at k = {result.k_max} ({result.tokens} tokens"
    if result.spread is not None:
        said += f", {result.spread.passes} passes"
    said += "). "
    if rerun_k(result) is None:
        measured = _fmt(result.measured_speedup, 2)
        said += (f"The recommended k is the one this run used: its measured speedup "
                 f"({measured + '×, one run' if measured else '–'}) is the check.")
    else:
        said += f"Re-run at k = {result.recommended.k} to check the prediction."
    if result.spread is not None and result.spread.too_few:
        said += " Too few passes to tell the k apart: allow more tokens."
    return render.status_html(said, "done")


def whatif_rerun(state):
    """"Re-run at the recommended k": a new speculative run at k* and a new baseline, measured side by side with
    the prediction. Yields (what-if state, status, chart, result, re-run button)."""
    skip = gr.skip()
    if not state:
        yield (skip, render.status_html("Run the what-if first.", "error"), skip, skip, skip)
        return
    result: WhatIf = state["result"]
    k = rerun_k(result)
    if k is None:
        yield (skip, render.status_html(f"k = {result.k_max} is the k the what-if run used: its measured speedup is "
                                        "already shown, so there is nothing to re-run.", "info"), skip, skip, skip)
        return
    settings = dataclasses.replace(state["settings"], k=k)
    try:
        pair = yield from _on_device(functools.partial(_rerun_work, settings, k),
                                     "the classroom is checking a prediction", 5)
    except Exception as error:  # noqa: BLE001
        yield (skip, _failed(error), skip, skip, skip)
        return
    if pair is None:  # cancelled: the handler is gone
        return
    yield _checked(state, result, k, *pair)


def _checked(state: dict, result: WhatIf, k: int, spec: list, base: list) -> tuple:
    """The re-run's outputs: the prediction at ``k`` beside the measured speedup of ``spec`` over ``base``."""
    predicted = result.at(k)
    tokens = spec[-1].num_generated
    check = {
        "k": k, "tokens": tokens, "predicted": predicted.speedup, "measured": decode_speedup(spec, base),
        "predicted_tau": predicted.expected_tokens,
        "measured_tau": tokens_per_pass(spec, k),
        "predicted_e2e": end_to_end_speedup(predicted.expected_tokens, result.costs, k, tokens),
        "measured_e2e": tokens_per_s_speedup(spec, base),
    }
    spread = result.spread
    if spread is not None:
        speed, tau = spread.at(k)
        check["ranges"] = {"predicted": speed, "predicted_tau": tau,
                           "predicted_e2e": spread.end_to_end(k, tokens),
                           "measured_tau": tokens_per_pass_range(spec, k, spread.resamples, spread.level)}
    else:
        check["ranges"] = {"measured_tau": tokens_per_pass_range(spec, k)}
    checks = dict(state.get("checks", {}))
    if check["measured"] is not None:
        checks[k] = check["measured"]
    state = {**state, "checks": checks}
    said = (f"k = {k}: predicted {_plain_range(predicted.speedup, check['ranges'].get('predicted'))}, measured "
            f"{_plain_range(check['measured'], None)} (one run; decoding, prefill excluded).")
    status = render.status_html(said, "done")
    return (state, status, gr.update(value=whatif_figure(result, checks), visible=True), whatif_html(result, check),
            gr.skip())


def _same_setting(a, b) -> bool:
    """Two values of one setting are the same (numbers compared as numbers, text without outer spaces)."""
    try:
        return abs(float(a) - float(b)) < 1e-9
    except (TypeError, ValueError):
        return str(a if a is not None else "").strip() == str(b if b is not None else "").strip()


def settings_edited(walkthrough_id: str, *fields):
    """A setting was changed by hand (``fields`` in :data:`FIELDS` order): when they no longer match the selected
    walkthrough, the menu switches to "Custom" and the walkthrough's note goes, so neither describes settings that
    are not in use (the share link then carries the settings themselves). Returns (menu, note)."""
    by_id = {w["id"]: w for w in load_walkthroughs()}
    walkthrough = by_id.get(walkthrough_id)
    if walkthrough is None:
        return gr.skip(), gr.skip()
    if _matches(walkthrough, dict(zip(FIELDS, fields))):
        return gr.skip(), gr.skip()
    return gr.update(value=CUSTOM), ""


def _matches(walkthrough: dict, values: Mapping[str, object]) -> bool:
    """``values`` are the walkthrough's settings (the target aside: a walkthrough runs on the app's target)."""
    wanted = walkthrough_settings(walkthrough)
    return all(_same_setting(wanted[f], values.get(f)) for f in FIELDS if f != "target")


def _note_html(walkthrough: dict | None) -> str:
    if not walkthrough:
        return ""
    return (f'<div class="cr-note"><b>{html.escape(walkthrough["title"])}.</b> '
            f'{html.escape(walkthrough["description"])}</div>')


def share_link(*values):
    """The share box's value: a query string (made absolute in the browser by the next step). Takes the
    :data:`FIELDS`, the presentation flag and the walkthrough id."""
    *fields, present, preset = values
    return share_query(dict(zip(FIELDS, fields)), bool(present), preset or None)


def share_follows(shown: str, *values):
    """The share box after another run was opened (a walkthrough from the menu, a recording file): a box holding a
    link gets the link to what is now open (:func:`share_link`; ``values``: its inputs), so a teacher never hands out
    the previous walkthrough's; an empty box stays empty."""
    if not (shown or "").strip():
        return ""
    return share_link(*values)


def tab_to_open(params: Mapping[str, str], tab_ids: tuple[str, ...] = ()):
    """The page's tab selection for a page address: the tab its ``tab=`` names when that is one of ``tab_ids`` (the
    app's tab ids), the Classroom for ``tab=classroom`` or for classroom settings without a ``tab=`` (a bare
    ``?preset=...``), else ``gr.skip()`` (the page's first tab). A ``preset=`` never overrides the tab asked for:
    ``?tab=arena&preset=x`` opens the Arena (the Classroom still applies and names the preset)."""
    asked = str(params.get("tab", "") or "")
    if asked == "classroom" or (not asked and settings_from_query(params) is not None):
        return gr.Tabs(selected="classroom")
    return gr.Tabs(selected=asked) if asked in tab_ids else gr.skip()


def on_load(request: gr.Request = None, tab_ids: tuple[str, ...] = ()):
    """Page load: apply the classroom settings in the address, if any, open the tab the address asks for
    (:func:`tab_to_open`; ``tab_ids``: the app's tab ids), and open a recorded run: the walkthrough's when the
    settings are a walkthrough's (a link with ``preset=<id>`` and nothing changed, or no classroom settings at all:
    the first walkthrough). Returns (walkthrough, note, *FIELDS, present, stepper, status, *view, download, tab
    selection)."""
    params = dict(getattr(request, "query_params", None) or {}) if request is not None else {}
    params = {str(k): str(v) for k, v in params.items()}
    tab = tab_to_open(params, tab_ids)
    walkthroughs = load_walkthroughs()
    if walkthroughs and params.get("tab") == "classroom" and "preset" not in params and not any(
            name in params for name in FIELDS):
        params["preset"] = walkthroughs[0]["id"]  # "?tab=classroom" alone: the first walkthrough
    values = settings_from_query(params)
    by_id = {w["id"]: w for w in walkthroughs}
    if values is None:  # no classroom settings in the address: the first walkthrough's run, ready to step
        opened_run = _open_shipped(walkthroughs[0]) if walkthroughs else (gr.skip(),) * 8
        return (*(gr.skip(),) * (len(FIELDS) + 3), *opened_run, tab)
    preset = by_id.get(values["preset"])
    if preset is not None and _matches(preset, values):
        opened_run = _open_shipped(preset)
    else:
        said = ("Settings from the link: press Record run to record this run.", "info")
        if values["unknown_preset"]:
            said = (unknown_preset_message(values["unknown_preset"], walkthroughs), "error")
        opened_run = (None, render.status_html(*said), *view(None), gr.update(value=None, interactive=False))
    return (gr.update(value=values["preset"] or CUSTOM), _note_html(preset), *(values[f] for f in FIELDS),
            values["present"], *opened_run, tab)


def drafter_changed(drafter: str):
    """Show the exit layer for early exit, the draft model box for 'model'."""
    return gr.update(visible=drafter == "early-exit"), gr.update(visible=drafter == "model")


# ------------------------------------------------------------------------------------------------- layout

KEYS_JS = """
if (!window.__specvizClassroomKeys) {
  window.__specvizClassroomKeys = true;
  document.addEventListener('keydown', (ev) => {
    const next = document.getElementById('classroom-next');
    if (!next || next.offsetParent === null || ev.altKey || ev.ctrlKey || ev.metaKey) return;  // tab not shown
    const t = ev.target;
    const tag = t && t.tagName ? t.tagName.toUpperCase() : '';
    if (t && (t.isContentEditable || tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT')) return;
    const press = (id) => { const b = document.getElementById(id); if (b && !b.disabled) b.click(); };
    if (ev.key === 'ArrowRight') { ev.preventDefault(); press('classroom-next'); }
    else if (ev.key === 'ArrowLeft') { ev.preventDefault(); press('classroom-prev'); }
    else if ((ev.key === ' ' || ev.code === 'Space') && tag !== 'BUTTON') {  // a focused button clicks itself
      ev.preventDefault(); press('classroom-play');
    }
  });
}
"""
PRESENT_JS = "(on) => { document.body.classList.toggle('sv-present', !!on); window.scrollTo(0, 0); }"  # the view starts at the top
ABSOLUTE_JS = ("(q) => (typeof q === 'string' && q.startsWith('?')) ? "
               "window.location.origin + window.location.pathname + q : q")
INTRO = ('<div class="cr-intro"><b>Classroom.</b> Step through a recorded run: what the drafter proposed, what '
         'the target thought of each guess, why each was accepted or rejected, and where the next token came from. '
         'Each walkthrough opens its run at once; change the settings and press Record run for your own. Keys: '
         '<kbd>→</kbd> next, <kbd>←</kbd> previous, <kbd>space</kbd> play / pause.</div>')
OWN_RUN = ('<div class="cr-heading">Your own run</div><div class="cr-note">Change the prompt or the settings, then '
           'record the run on the model (a few seconds; others may be in line).</div>')


def build_tab(target: str = "embedded") -> None:
    """Build the Classroom tab's contents inside the current ``gr.Tab`` and wire its events (including a page-load
    event that applies settings from the address and opens a recorded run).

    Three columns in the page's order: the walkthrough menu and the recording files, the stage (where a run is
    stepped through) and the settings of your own run. The stylesheet shows them as two columns on a wide screen
    (menu above settings, stage beside them) and as one column, stage second, on a narrow one."""
    walkthroughs = load_walkthroughs()
    first = walkthrough_settings(walkthroughs[0]) if walkthroughs else dict(DEFAULTS)
    first["target"] = target
    tab = gr.context.Context.block
    tabs = tab.parent if isinstance(getattr(tab, "parent", None), gr.Tabs) else None
    ui: dict = {}
    with gr.Column(elem_id="classroom-root", elem_classes=["classroom"]):
        gr.HTML(INTRO, elem_id="classroom-intro")
        with gr.Row(equal_height=False, elem_id="classroom-main", elem_classes=["sv-main"]):
            with gr.Column(scale=1, min_width=300, elem_id="classroom-pick", elem_classes=["sv-side"]):
                _walkthrough_controls(ui, walkthroughs)
            with gr.Column(scale=3, min_width=300, elem_id="classroom-stage", elem_classes=["sv-results"]):
                _stage(ui)
            with gr.Column(scale=1, min_width=300, elem_id="classroom-controls", elem_classes=["sv-side2"]):
                _settings_controls(ui, first)
        _whatif_controls(ui)
    ui["stepper"] = gr.State(None)
    ui["playing"] = gr.State(False)  # Play: whether the timer steps the run
    ui["timer"] = gr.Timer(PLAY_INTERVAL_S, active=False)
    _wire(ui, tabs)


def _walkthrough_controls(ui: dict, walkthroughs: list[dict]) -> None:
    """The walkthrough menu and its note, downloading and opening recording files (opening only where the operator
    allows uploads), and the presentation view."""
    ui["walkthrough"] = gr.Dropdown(menu_choices(walkthroughs),
                                    value=walkthroughs[0]["id"] if walkthroughs else None, label="Walkthrough",
                                    elem_id="classroom-walkthrough")
    ui["note"] = gr.HTML(_note_html(walkthroughs[0] if walkthroughs else None), elem_id="classroom-note")
    with gr.Row(elem_id="classroom-files"):
        ui["download"] = gr.DownloadButton("⬇ Download this run", value=None, interactive=False, size="sm",
                                           elem_id="classroom-download", min_width=140)
        # no file_types: Gradio would refuse another type in the browser, before open_upload runs, with a toast
        # and no status, so the status kept the previous upload's message; open_upload names and refuses any file
        # that is not a recording itself
        ui["upload"] = gr.UploadButton("⬆ Open a recording file", type="filepath", size="sm",
                                       elem_id="classroom-upload", min_width=140, visible=uploads_allowed())
    ui["present"] = gr.Checkbox(False, label="Presentation view (large type, high contrast)",
                                elem_id="classroom-present")


def _stage(ui: dict) -> None:
    """Status, progress, the step buttons, caption, table, rejection chart and the output so far."""
    ui["status"] = gr.HTML(render.status_html("Opening the walkthrough's recorded run…", "info"),
                           elem_id="classroom-status")
    ui["progress"] = gr.HTML("", elem_id="classroom-progress")
    with gr.Row(elem_id="classroom-nav"):
        ui["first"] = gr.Button("« Start", size="sm", elem_id="classroom-first", min_width=70)
        ui["prev"] = gr.Button("◀ Previous", elem_id="classroom-prev", min_width=100)
        ui["play"] = gr.Button("▶ Play", elem_id="classroom-play", min_width=90)
        ui["next"] = gr.Button("Next ▶", variant="primary", elem_id="classroom-next", min_width=100)
        ui["rejection"] = gr.Button("Next rejection »", size="sm", elem_id="classroom-next-rejection",
                                    min_width=130)
    ui["caption"] = gr.HTML(f'<div class="cr-caption">{html.escape(NO_RECORDING)}</div>', elem_id="classroom-caption")
    ui["table"] = gr.HTML("", elem_id="classroom-table")
    ui["chart"] = gr.Plot(elem_id="classroom-chart", show_label=False, visible=False)
    ui["output"] = gr.HTML("", elem_id="classroom-output")
    gr.HTML("", js_on_load=KEYS_JS, elem_id="classroom-keys")


def _settings_controls(ui: dict, first: dict) -> None:
    """The settings of your own run (:data:`FIELDS`), Record run and the share link."""
    gr.HTML(OWN_RUN, elem_id="classroom-own")
    ui["prompt"] = gr.Textbox(first["prompt"], label="Prompt", lines=4, max_lines=10, elem_id="classroom-prompt")
    ui["drafter"] = gr.Dropdown([(c.label, c.key) for c in choices() if c.key != "none"], value=first["drafter"],
                                label="Drafter", elem_id="classroom-drafter")
    from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

    ui["drafter_about"] = add_about(ui["drafter"], "classroom-drafter-about", first["drafter"])
    ui["exit_layer"] = gr.Number(first["exit_layer"], label="Early-exit layer (0 = half the target's layers)",
                                 precision=0, elem_id="classroom-exit-layer", visible=first["drafter"] == "early-exit")
    ui["draft_model"] = gr.Textbox(first["draft_model"], label="Draft model", elem_id="classroom-draft-model",
                                   placeholder="hub id or local folder (same tokenizer, or re-tokenized)",
                                   visible=first["drafter"] == "model")
    ui["k"] = gr.Slider(1, MAX_K, value=first["k"], step=1, label="Draft length k", elem_id="classroom-k")
    with gr.Row():
        ui["temperature"] = gr.Slider(0, 2, value=first["temperature"], step=0.05, label="Temperature (0 = greedy)",
                                      elem_id="classroom-temperature")
        ui["seed"] = gr.Number(first["seed"], label="Seed", precision=0, elem_id="classroom-seed")
    ui["max_new_tokens"] = gr.Slider(1, STEP_MAX_NEW_TOKENS, value=first["max_new_tokens"], step=1,
                                     label="Max new tokens", elem_id="classroom-max-new-tokens")
    ui["target"] = gr.Textbox(first["target"], label="Target model", elem_id="classroom-target")
    ui["repetition_penalty"] = gr.Number(first["repetition_penalty"], label="Repetition penalty (1 = off)",
                                         elem_id="classroom-repetition-penalty",
                                         info="target and draft alike: the p and q shown are the penalized ones")
    ui["record"] = gr.Button("Record run", variant="primary", elem_id="classroom-record")
    ui["share_btn"] = gr.Button("Share link to these settings", size="sm", elem_id="classroom-share-btn")
    ui["share"] = gr.Textbox("", show_label=False, placeholder="a link with this prompt and settings",
                             buttons=["copy"], lines=1, max_lines=3, elem_id="classroom-share")


def _whatif_controls(ui: dict) -> None:
    """The what-if k accordion: largest k, tokens, Run what-if, the re-run, and their status, chart and result."""
    with gr.Accordion("What if k were different?", open=True, elem_id="whatif"):
        gr.HTML('<div class="cr-intro">One greedy run at the largest k (with the prompt and drafter above) measures '
                'how often each draft position is accepted and what drafting and verifying cost; that predicts the '
                'speedup of every smaller k. Then re-run at the recommended k to check.</div>')
        with gr.Row(equal_height=True):
            ui["k_max"] = gr.Slider(2, MAX_K, value=8, step=1, label="Largest k", elem_id="whatif-kmax", scale=2,
                                    min_width=200)
            ui["tokens"] = gr.Slider(8, WHATIF_MAX_NEW_TOKENS, value=48, step=1, label="Tokens per run",
                                     elem_id="whatif-tokens", scale=2, min_width=200)
            ui["whatif_run"] = gr.Button("Run what-if", variant="primary", elem_id="whatif-run", scale=1)
            ui["whatif_rerun"] = gr.Button("Re-run at the recommended k", elem_id="whatif-rerun", interactive=False,
                                           scale=1)
        ui["whatif_status"] = gr.HTML("", elem_id="whatif-status")
        ui["whatif_chart"] = gr.Plot(elem_id="whatif-chart", show_label=False, visible=False)
        ui["whatif_result"] = gr.HTML("", elem_id="whatif-result")


QUIET = {"show_progress": "hidden", "api_visibility": "private"}


def _wire(ui: dict, tabs: gr.Tabs | None) -> None:
    """Every event of the tab: opening runs (walkthrough menu, file, page load), recording, stepping, playing,
    settings, sharing and what-if k."""
    settings = [ui[name] for name in FIELDS]
    views = [ui[name] for name in ("progress", "caption", "table", "chart", "output")]
    opened_outputs = [ui["stepper"], ui["status"], *views, ui["download"]]
    share = {"fn": share_link, "inputs": [*settings, ui["present"], ui["walkthrough"]], "outputs": [ui["share"]]}
    paused = [ui["playing"], ui["timer"], ui["play"]]  # opening another run pauses Play (stop_playing)
    ui["record"].click(stop_playing, outputs=paused, queue=False, **QUIET)  # at once, before the run is recorded
    ui["record"].click(record, inputs=settings, outputs=opened_outputs, concurrency_limit=4,
                       concurrency_id="classroom-run", **QUIET).then(**share, **QUIET).then(
        None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS, **QUIET)
    # opening a recorded run is no model work either: outside the queue, like a step
    follows = {"fn": share_follows, "inputs": [ui["share"], *share["inputs"]], "outputs": [ui["share"]]}
    ui["walkthrough"].input(open_walkthrough, inputs=[ui["walkthrough"]],
                            outputs=[ui["note"], *settings, *opened_outputs, *paused], queue=False, **QUIET).then(
        **follows, queue=False, **QUIET).then(None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS,
                                              **QUIET)  # the share box follows the open walkthrough
    # a click on the button (before the file picker) replaces an earlier upload's message: a file Gradio itself
    # refuses in the browser (over its size limit) never reaches open_upload, and its toast must not sit under
    # another file's refusal
    ui["upload"].click(upload_started, outputs=[ui["status"]], queue=False, **QUIET)
    ui["upload"].upload(open_upload, inputs=[ui["upload"]],
                        outputs=[ui["walkthrough"], ui["note"], *settings, *opened_outputs, *paused],
                        concurrency_limit=None, **QUIET).then(**follows, queue=False, **QUIET).then(
        None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS, **QUIET)
    _wire_stepping(ui, views)
    for box in settings:  # a hand edit away from the walkthrough's settings makes them "Custom"; preprocess off:
        # a number typed out of a slider's range arrives before the slider clamps it (Gradio's range check would
        # answer with a server error), and settings_edited compares the raw values as numbers
        box.input(settings_edited, inputs=[ui["walkthrough"], *settings], outputs=[ui["walkthrough"], ui["note"]],
                  queue=False, preprocess=False, **QUIET)
    ui["drafter"].change(drafter_changed, inputs=[ui["drafter"]], outputs=[ui["exit_layer"], ui["draft_model"]],
                         queue=False, **QUIET)
    ui["present"].change(None, inputs=[ui["present"]], js=PRESENT_JS, **QUIET)
    tell_when_clamped(ui["max_new_tokens"], ui["status"], "Max new tokens")
    tell_when_clamped(ui["k"], ui["status"], "Draft length k")
    tell_when_clamped(ui["temperature"], ui["status"], "Temperature")
    from app.inputs import EXIT_LAYER, REPETITION_PENALTY, SEED, parse_exit_layer  # number boxes, checked when left
    from app.messages import tell_when_invalid
    tell_when_invalid(ui["exit_layer"], ui["status"], EXIT_LAYER, parse_exit_layer, target=ui["target"])
    tell_when_invalid(ui["repetition_penalty"], ui["status"], REPETITION_PENALTY)
    if "seed" in ui:
        tell_when_invalid(ui["seed"], ui["status"], SEED)
    ui["share_btn"].click(**share, **QUIET).then(None, inputs=[ui["share"]], outputs=[ui["share"]], js=ABSOLUTE_JS,
                                                 **QUIET)
    _wire_whatif(ui)
    load_outputs = [ui["walkthrough"], ui["note"], *settings, ui["present"], *opened_outputs]
    load_outputs += [tabs] if tabs is not None else []

    def load(request: gr.Request = None):
        if tabs is None:
            return on_load(request)[:-1]
        return on_load(request, tuple(str(t.id) for t in tabs.children if isinstance(t, gr.Tab)))

    gr.context.Context.root_block.load(load, outputs=load_outputs, queue=False, **QUIET)


def _wire_stepping(ui: dict, views: list) -> None:
    """The step buttons and Play's timer. A step is pure Python on the session's stepper (well under a millisecond
    with the shared rejection charts), so it skips the queue: a plain request, answered at once, however many
    sessions step while a live run computes."""
    for name, handler in (("next", step_next), ("prev", step_prev), ("rejection", step_rejection),
                          ("first", step_first)):
        ui[name].click(handler, inputs=[ui["stepper"]], outputs=[ui["stepper"], *views], queue=False,
                       trigger_mode="always_last", **QUIET)  # clicks during a step: one more step after it
    playing, timer = ui["playing"], ui["timer"]
    ui["play"].click(play_toggle, inputs=[ui["stepper"], playing],
                     outputs=[playing, timer, ui["play"], ui["stepper"], *views], concurrency_limit=None, **QUIET)
    timer.tick(play_tick, inputs=[ui["stepper"], playing], outputs=[playing, timer, ui["play"], ui["stepper"], *views],
               concurrency_limit=None, **QUIET)


def _wire_whatif(ui: dict) -> None:
    """Run what-if and the re-run at the recommended k (on the device, in line with other runs)."""
    state = gr.State(None)
    inputs = [ui[name] for name in ("prompt", "drafter", "exit_layer", "draft_model", "seed", "target", "k_max",
                                    "tokens")]
    outputs = [state, ui["whatif_status"], ui["whatif_chart"], ui["whatif_result"], ui["whatif_rerun"]]
    ui["whatif_run"].click(whatif_run, inputs=inputs, outputs=outputs, concurrency_limit=4,
                           concurrency_id="classroom-run", **QUIET)
    ui["whatif_rerun"].click(whatif_rerun, inputs=[state], outputs=outputs, concurrency_limit=4,
                             concurrency_id="classroom-run", **QUIET)
    tell_when_clamped(ui["tokens"], ui["whatif_status"], "Tokens per run")
    tell_when_clamped(ui["k_max"], ui["whatif_status"], "Largest k")
