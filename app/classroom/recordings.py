"""Recorded runs: the walkthroughs' shipped recordings (read once per process, shared by every session), the file a
run is offered as ("Download this run"), and opening a run: from the walkthrough menu or from a recording file a
visitor uploads (where the operator allows it). Opening a run is no model work: it shows the run's first step."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Mapping

import gradio as gr

from app import render
from app.downloads import prune
from app.render.stats import counted_spread
from app.classroom.lesson import view
from app.classroom.stepping import stop_playing
from app.classroom.walkthroughs import (ASSETS, CASTS, CUSTOM, DEFAULTS, FIELDS, load_walkthroughs, matches, note_html,
                                        plain, walkthrough_settings)
from specviz.runtime.policy import current_policy
from specviz.analysis import recording as recording_file
from specviz.analysis.recording import RecordingError, RecordingFile
from specviz.analysis.stepper import Recording, Stepper
from specviz.core.counters import Counters
from specviz.measure.run_stats import RunStats

log = logging.getLogger("specviz.app.classroom")

RECORDINGS = ASSETS / "recordings"  # <walkthrough id>.json.gz: the walkthroughs' runs (scripts/record_walkthroughs.py)
DOWNLOADS = Path(tempfile.gettempdir()) / "specviz-recordings"  # files offered by "Download this run"


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
    meta: dict = {"settings": {name: plain(values.get(name, DEFAULTS[name])) for name in FIELDS}}
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
                values[name] = CASTS[name](settings[name])
            except (TypeError, ValueError):
                pass
    return values


def _download_path(data: bytes, name: str) -> str:
    """A file holding ``data`` under ``name`` in the downloads folder (one per content: sessions share it; a content
    folder not offered for a day is removed by :func:`app.downloads.prune`)."""
    path = DOWNLOADS / hashlib.sha256(data).hexdigest()[:16] / name
    prune(DOWNLOADS)  # folders not offered for a day go, so the folder stays bounded on a long-lived Space
    if path.exists():
        os.utime(path.parent)  # offered again: it counts as new
    else:
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


def summary(recording: Recording) -> str:
    """A run in words for the status line: its tokens, passes and passes with a rejection, then its acceptance rate
    in percent as the Live and Arena tabs read it, "61% (14 of 23 drafted; 95% 29–91%)" (accepted of drafted; the
    recording keeps the fraction), and tokens per pass, the run's counters (:meth:`specviz.core.counters.Counters.of`,
    the figures every tab shows), each with its 95% interval over the run's passes (:func:`app.render.stats.
    counted_spread`: "too few to tell" where the run is too short), so two walkthroughs' runs compare at a glance;
    then how to step."""
    passes = sum(1 for e in recording.events if e.kind == "pass")
    rejections = sum(1 for e in recording.events if e.num_rejections)
    counts = Counters.of(recording.events)
    stats = RunStats()
    for event in recording.events:
        stats.add(event)
    rate = "–" if counts.acceptance_rate is None else f"{counts.acceptance_rate:.0%}"  # in percent, as Live, Arena
    tokens = "–" if counts.tokens_per_pass is None else f"{counts.tokens_per_pass:.2f}"
    rate_spread = counted_spread(stats.acceptance_interval(), stats, percent=True)  # "29–91%", the rate's unit
    tokens_spread = counted_spread(stats.tokens_per_pass_interval(), stats)
    return (f"{len(recording.output_ids)} tokens in {passes} passes ({rejections} with a rejection); acceptance rate "
            f"{rate} ({counts.accepted} of {counts.drafted} drafted; 95% {rate_spread}), {tokens} tokens per pass "
            f"(95% {tokens_spread}). Step with Next / Previous (or → ← on the keyboard), Play with space")


def opened(file: RecordingFile, what: str, shipped: Path | None = None) -> tuple:
    """(stepper, status, progress, caption, table, chart, output, download) of an opened recording; ``shipped``:
    the file it was read from, offered as it is."""
    stepper = Stepper(file.recording)
    status = render.status_html(f"{what}: {summary(file.recording)}; nothing runs on the model while you step.",
                                "done")
    offer = _download_path(shipped.read_bytes(), shipped.name) if shipped is not None else download_file(file)
    return (stepper, status, *view(stepper), gr.update(value=offer, interactive=True))


def open_shipped(walkthrough: dict) -> tuple:
    """:func:`opened` for a walkthrough's recorded run (or a note to record it when none ships)."""
    file = shipped_recording(walkthrough["id"])
    if file is None:
        return (None, render.status_html("This walkthrough has no recorded run here: press Record run to record it.",
                                         "info"), *view(None), gr.update(value=None, interactive=False))
    return opened(file, f"Recorded run of “{walkthrough['title']}”", recording_path(walkthrough["id"]))


def open_walkthrough(walkthrough_id: str):
    """The walkthrough menu: its settings and note, and its recorded run opened at the first step (no model
    work), Play paused. Returns (note, *FIELDS, stepper, status, *view, download, playing, timer, play button);
    skips for "Custom" or an unknown id."""
    by_id = {w["id"]: w for w in load_walkthroughs()}
    if walkthrough_id not in by_id:
        return (gr.skip(),) * (len(FIELDS) + 12)
    walkthrough = by_id[walkthrough_id]
    values = walkthrough_settings(walkthrough)
    return (note_html(walkthrough), *(values[f] for f in FIELDS), *open_shipped(walkthrough), *stop_playing())


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
    if walkthrough is None or values is None or not matches(walkthrough, values):
        walkthrough = None
    menu = walkthrough["id"] if walkthrough else CUSTOM
    fields = (values[f] for f in FIELDS) if values is not None else (skip,) * len(FIELDS)
    return (gr.update(value=menu), note_html(walkthrough), *fields, *opened(file, f"Opened {name}"),
            *stop_playing())
