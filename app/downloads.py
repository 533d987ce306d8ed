"""Result files a tab offers for download: one CSV and one JSON, time-stamped, in a fresh temporary folder under
one root that drops folders older than a day, so a Space that runs for weeks does not fill its disk."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(tempfile.gettempdir()) / "specviz-downloads"  # <name>-<random>/ folders, one per offered result
KEEP_S = 24 * 3600  # a folder older than this (by its last change) is removed when the next one is made


def prune(root: Path, keep_s: float = KEEP_S, now: float | None = None) -> int:
    """Remove the folders directly under ``root`` last changed more than ``keep_s`` seconds before ``now`` (the
    clock, by default); returns how many went. A folder another process removes first, or one that cannot be
    removed, is skipped (never raised: a download must not fail for an old one)."""
    now = time.time() if now is None else now
    gone = 0
    try:
        folders = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return 0
    for folder in folders:
        try:
            if now - folder.stat().st_mtime > keep_s:
                shutil.rmtree(folder)
                gone += 1
        except OSError:
            continue
    return gone


def fresh_folder(name: str, root: Path | None = None) -> Path:
    """A new empty folder ``root/<name>-<random>/`` (``root``: :data:`ROOT` by default, made if missing), after
    folders older than :data:`KEEP_S` there are pruned."""
    root = ROOT if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    prune(root)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))


def write_csv_and_json(name: str, csv_text: str, data: dict, folder: str | None = None) -> tuple[str, str]:
    """Write ``csv_text`` and ``data`` (as indented JSON; values JSON cannot hold become strings) as
    ``specviz-<name>-<YYYYmmdd-HHMMSS>.csv`` / ``.json`` into a fresh folder under :data:`ROOT` (or ``folder``);
    returns both paths (Gradio serves files from the temporary folder)."""
    out = Path(folder) if folder else fresh_folder(name)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    csv_path, json_path = out / f"specviz-{name}-{stamp}.csv", out / f"specviz-{name}-{stamp}.json"
    csv_path.write_text(csv_text, encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return str(csv_path), str(json_path)
