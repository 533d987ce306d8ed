"""Offered files stay bounded on a long-lived server: the Arena's and Batching's result folders and the Classroom's
"Download this run" folders older than a day are removed when the next one is made; a folder offered again counts
as new."""

from __future__ import annotations

import json
import os
import time

from app import downloads
from app.classroom import recordings


def _age(path, seconds):
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_prune_removes_only_folders_older_than_the_limit(tmp_path):
    old, new = tmp_path / "arena-old", tmp_path / "arena-new"
    for folder in (old, new):
        folder.mkdir()
        (folder / "a.csv").write_text("x")
    (tmp_path / "loose.txt").write_text("a file, not a folder: left alone")
    _age(old, downloads.KEEP_S + 60)
    _age(new, downloads.KEEP_S - 60)
    assert downloads.prune(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arena-new", "loose.txt"]
    assert downloads.prune(tmp_path / "missing") == 0  # no root yet: nothing to do, nothing raised


def test_result_files_go_under_the_root_and_old_results_go(tmp_path, monkeypatch):
    monkeypatch.setattr(downloads, "ROOT", tmp_path)
    csv1, json1 = downloads.write_csv_and_json("arena", "a,b\n1,2\n", {"rows": [1, 2]})
    first = os.path.dirname(csv1)
    assert os.path.dirname(first) == str(tmp_path) and os.path.basename(first).startswith("arena-")
    assert open(csv1).read() == "a,b\n1,2\n" and json.load(open(json1)) == {"rows": [1, 2]}
    _age(first, downloads.KEEP_S + 1)
    csv2, _ = downloads.write_csv_and_json("batching", "n\n1\n", {})
    assert not os.path.exists(first) and os.path.exists(csv2)
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == ["batching"]


def test_a_recording_offered_again_counts_as_new(tmp_path, monkeypatch):
    monkeypatch.setattr(recordings, "DOWNLOADS", tmp_path)
    path = recordings._download_path(b"run one", "specviz-run.json.gz")
    folder = os.path.dirname(path)
    _age(folder, downloads.KEEP_S + 60)
    assert recordings._download_path(b"run one", "specviz-run.json.gz") == path  # same content, same file
    assert os.path.exists(path) and time.time() - os.stat(folder).st_mtime < 60
    _age(folder, downloads.KEEP_S + 60)
    other = recordings._download_path(b"run two", "specviz-run.json.gz")  # a new one prunes the stale one
    assert not os.path.exists(path) and open(other, "rb").read() == b"run two"
