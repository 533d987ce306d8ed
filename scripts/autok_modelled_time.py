"""Compare two k = auto controllers on real acceptance with modelled time (docs/performance-journal.md, section 18).

    python scripts/autok_modelled_time.py --baseline-module OLD.py [--prompts translation-1,qa-1]
        [--drafters medusa,ngram,eagle] [--seeds 3] [--tokens 48]

A paired A/B of :class:`specviz.core.draft_length.AutoK` on this machine's timings cannot resolve 1-2 %: one forward
takes 64-80 ms from moment to moment on the project's VM (section 17). Here the engine runs the real target and
drafters (so acceptance is what the drafter really gets on each suite prompt), while its clock is replaced by a
virtual one that charges each forward a modelled cost: a 70 ms step whose speed drifts as a log-AR(1) (0.97 per
forward, sd 0.03) with log-sd 0.07 jitter per forward, times 1 + 0.06 (n - 1) for n tokens (section 17's ratios),
plus a fixed draft cost per drafted token (:data:`DRAFT_MS`) and 0.5 ms of bookkeeping per pass. Standard decoding
is charged the same path, forward by forward, so a run that never drafts scores 1.00. Each seed is one drift path;
both controllers see the same paths (paired). Nothing is timed, so the machine may be busy.

``--baseline-module`` is a copy of specviz/core/draft_length.py to compare with the current one, e.g.
``git show HEAD~1:specviz/core/draft_length.py > /tmp/old.py``. Prints the mean modelled speedup per prompt and
per (drafter, category) for both. It patches the engine's private clock and pass functions (``batch.Clock``,
``engine._verify``, ``engine._draft``): a measuring script, not an API.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.core import batch as batch_module, draft_length, engine  # noqa: E402
from specviz.core.engine import GenerationConfig, speculative_generate  # noqa: E402
from specviz.drafters.registry import make_drafter  # noqa: E402
from specviz.runtime.models import encode_prompt, load_model  # noqa: E402

DRAFT_MS = {"medusa": 1.0, "eagle": 4.0, "ngram": 0.2, "suffix": 0.3}  # modelled ms per drafted token
STEP_MS, PER_TOKEN, OTHER_MS = 70.0, 0.06, 0.5


class _Virtual:
    """The modelled clock and the current run's accounts."""

    now = 0.0
    path: list[float] = []
    forward = 0
    spent = 0.0
    draft_ms = 0.0


class _VirtualClock:
    """Stands in for :class:`specviz.core.kv.Clock`: the modelled time, in ms."""

    def __init__(self, *_device) -> None:
        pass

    def now_ms(self) -> float:
        return _Virtual.now


def drift_path(seed: int, n: int) -> list[float]:
    """``n`` one-token step costs (ms) of the modelled drifting machine, seeded."""
    rng, out, level = random.Random(seed), [], 0.0
    for _ in range(n):
        level = 0.97 * level + rng.gauss(0, 0.03)
        out.append(STEP_MS * math.exp(level + rng.gauss(0, 0.07)))
    return out


def _install() -> None:
    """Route the engine's clock and its draft / verify steps through the model."""
    verify, draft = engine._verify, engine._draft

    def modelled_verify(batch, passes):
        n = 1 + max(len(rp.draft.token_ids) for rp in passes)
        cost = _Virtual.path[min(_Virtual.forward, len(_Virtual.path) - 1)] * (1 + PER_TOKEN * (n - 1))
        _Virtual.forward += 1
        _Virtual.now += cost + OTHER_MS  # the bookkeeping charged here too, so k = auto sees what is scored
        _Virtual.spent += cost + OTHER_MS
        return verify(batch, passes)

    def modelled_draft(batch, row):
        rp = draft(batch, row)
        rp.draft_ms = _Virtual.draft_ms * len(rp.draft.token_ids)
        _Virtual.now += rp.draft_ms
        _Virtual.spent += rp.draft_ms
        return rp

    batch_module.Clock, engine._verify, engine._draft = _VirtualClock, modelled_verify, modelled_draft


def modelled_speedup(target, drafter_name: str, prompt_ids: list[int], control, seed: int, tokens: int) -> float:
    """Standard decoding's modelled ms over the speculative run's, for one drift path (``seed``)."""
    engine.AutoK = control
    _Virtual.path, _Virtual.forward, _Virtual.spent = drift_path(seed, 4 * tokens), 0, 0.0
    _Virtual.draft_ms = DRAFT_MS.get(drafter_name, 1.0)
    config = GenerationConfig(max_new_tokens=tokens, k=4, auto_k=True)
    events = [e for e in speculative_generate(target, make_drafter(drafter_name, target), prompt_ids, config)
              if e.kind == "pass"]
    emitted = sum(len(e.emitted_ids) for e in events)
    return (sum(_Virtual.path[:emitted]) + OTHER_MS * emitted) / _Virtual.spent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-module", required=True, help="a draft_length.py to compare the current one with")
    parser.add_argument("--prompts", default="translation-1,translation-2,translation-3,qa-1,qa-2,rag-1,chat-1,"
                                             "math-1,summarization-1", help="suite ids (assets/suite.jsonl)")
    parser.add_argument("--drafters", default="medusa,ngram,eagle")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args(argv)
    spec = importlib.util.spec_from_file_location("baseline_draft_length", args.baseline_module)
    before = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = before
    spec.loader.exec_module(before)
    torch.set_num_threads(1)  # nothing is timed: leave the other core to whatever else runs
    _install()
    target = load_model("embedded")
    suite = {row["id"]: row for row in map(json.loads, (ROOT / "assets" / "suite.jsonl").read_text().splitlines())}
    results = collections.defaultdict(list)
    for pid in args.prompts.split(","):
        ids, category = encode_prompt(target.tokenizer, suite[pid]["prompt"]), suite[pid]["category"]
        for name in args.drafters.split(","):
            mean = {}
            for label, control in (("before", before.AutoK), ("now", draft_length.AutoK)):
                runs = [modelled_speedup(target, name, ids, control, seed, args.tokens) for seed in range(args.seeds)]
                results[(name, category, label)] += runs
                results[(name, "all", label)] += runs
                mean[label] = round(statistics.mean(runs), 3)
            print(pid, name, mean, flush=True)
    for name, category in sorted({(n, c) for n, c, _ in results}):
        b, n = (statistics.mean(results[(name, category, label)]) for label in ("before", "now"))
        print(f"{name:8} {category:14} before {b:.3f}  now {n:.3f}")


if __name__ == "__main__":
    main()
