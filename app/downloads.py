"""Result files a tab offers for download: one CSV and one JSON, time-stamped, in a fresh temporary folder."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path


def write_csv_and_json(name: str, csv_text: str, data: dict, folder: str | None = None) -> tuple[str, str]:
    """Write ``csv_text`` and ``data`` (as indented JSON; values JSON cannot hold become strings) as
    ``specviz-<name>-<YYYYmmdd-HHMMSS>.csv`` / ``.json`` into a fresh temporary folder (or ``folder``); returns
    both paths (Gradio serves files from the temporary folder)."""
    out = Path(folder or tempfile.mkdtemp(prefix=f"specviz-{name}-"))
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    csv_path, json_path = out / f"specviz-{name}-{stamp}.csv", out / f"specviz-{name}-{stamp}.json"
    csv_path.write_text(csv_text, encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return str(csv_path), str(json_path)
