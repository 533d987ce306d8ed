"""Record the built-in walkthroughs' runs into ``assets/recordings/<walkthrough id>.json.gz``: the Classroom opens
them at once, with no model work, however many visitors step through them.

    python scripts/record_walkthroughs.py                          # every walkthrough in assets/walkthroughs.json
    python scripts/record_walkthroughs.py grounded-ngram chat-ngram  # some of them
    python scripts/record_walkthroughs.py --check                  # re-record; compare token ids with the shipped files

Each run goes through the Classroom's own path (:func:`app.classroom.record_walkthrough`) on the embedded model,
with the per-machine tuning off (``SPECVIZ_TUNE=0``, as in the tests) so the default kernels compute it. Greedy
walkthroughs are deterministic: re-recording reproduces their token ids (``tests/test_recordings.py``); sampling
walkthroughs are seeded, and ``--check`` reports them without failing on them (another CPU's float rounding may
draw differently). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("SPECVIZ_TUNE", "0")


def main(argv: list[str] | None = None) -> int:
    """Record (or with --check compare) the named walkthroughs, all by default."""
    from app import classroom
    from specviz.analysis import recording

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="walkthrough ids (default: all)")
    parser.add_argument("--check", action="store_true", help="compare with the shipped files instead of writing")
    args = parser.parse_args(argv)
    walkthroughs = {w["id"]: w for w in classroom.load_walkthroughs()}
    unknown = [i for i in args.ids if i not in walkthroughs]
    if unknown:
        parser.error(f"unknown walkthrough ids: {', '.join(unknown)} (known: {', '.join(walkthroughs)})")
    failed = 0
    for walkthrough_id in args.ids or list(walkthroughs):
        walkthrough = walkthroughs[walkthrough_id]
        file = classroom.record_walkthrough(walkthrough)
        path = classroom.recording_path(walkthrough_id)
        tokens = len(file.recording.output_ids)
        if not args.check:
            recording.save(path, file.recording, file.meta)
            print(f"{walkthrough_id}: {tokens} tokens, {path.stat().st_size} bytes -> {path.relative_to(ROOT)}")
            continue
        same = recording.token_ids(recording.load(path).recording) == recording.token_ids(file.recording)
        greedy = file.recording.greedy
        failed += greedy and not same
        print(f"{walkthrough_id}: {'same token ids' if same else 'DIFFERENT token ids'}"
              f"{'' if greedy else ' (sampling: reported, not checked)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
