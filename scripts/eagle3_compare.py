"""EAGLE-1 recipe vs EAGLE-3 recipe on the same part-three data, judged on forms the data does not contain.

Stages (each resumable; results and times go to ``<out>/results.json``):

    gen      greedy replies to part three (``--prompts`` prompts, ``--max-new-tokens``) and to ``--suite`` (the
             held-out suite set; default ../shared/prompts/suite.jsonl, the benchmark's 14 prompts), token ids
             only, one shard per batch of 32 (skipped when on disk)
    train    prefill the training forms / held-out forms / suite (features in memory), train both recipes on the
             training forms, then the EAGLE-3 recipe on the first 25 % and 50 % of the training prompts; every head
             and the shipped one are scored with ``unrolled_accuracy`` (acceptance of drafted positions 1..4 and the
             mean accepted tokens of a k = 4 chain) on all three sets

    python scripts/eagle3_compare.py gen   --out /tmp/h/eagle3 --threads 2
    python scripts/eagle3_compare.py train --out /tmp/h/eagle3 --threads 2

Held out by default: the part-three forms "dialogue" and "constrained" (``--holdout-forms``), and the suite.
Docs: docs/heads.md (EAGLE-3 section).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, flush=True)


def _results(out: Path) -> dict:
    """Every recorded result: one ``result-<key>.json`` per key (runs in parallel processes never share a file)."""
    return {p.stem[len("result-"):]: json.loads(p.read_text()) for p in sorted(out.glob("result-*.json"))}


def _record(out: Path, key: str, value) -> None:
    (out / f"result-{key}.json").write_text(json.dumps(value, indent=2))


def _suite_prompts(path: Path) -> list[tuple[int, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cats = sorted({r["category"] for r in rows})
    return [(cats.index(r["category"]), r["prompt"]) for r in rows]


def stage_gen(target, args) -> None:
    from specviz.training.distill import CorpusSettings, generate_corpus

    settings = CorpusSettings(num_prompts=args.prompts, max_new_tokens=args.max_new_tokens, prompt_set="part3")
    t0 = time.perf_counter()
    generate_corpus(target, args.out / "part3", settings, _log)
    _record(args.out, "gen_part3_s", round(time.perf_counter() - t0))
    t0 = time.perf_counter()
    generate_corpus(target, args.out / "suite", settings, _log, prompts=_suite_prompts(args.suite))
    _record(args.out, "gen_suite_s", round(time.perf_counter() - t0))


def _subset(corpus, count: int):
    """The first ``count`` sequences of a corpus (prompts rotate through the forms, so every form keeps its share)."""
    from specviz.training.distill import Corpus

    end = int(corpus.offsets[count])
    return Corpus(corpus.ids[:end], corpus.features[:end], corpus.top1[:end], corpus.offsets[:count + 1],
                  corpus.prompt_lens[:count], corpus.layer_features[:end], corpus.forms[:count], corpus.layers)


def _score(head, target, sets: dict) -> dict:
    from specviz.training.train import unrolled_accuracy

    out = {}
    for name, corpus in sets.items():
        r = unrolled_accuracy(head, target, corpus)
        out[name] = {"per_step": [round(a, 4) for a in r["per_step"]], "chain": round(r["chain"], 3),
                     "positions": r["positions"]}
    return out


def stage_prefill(target, args) -> None:
    """Features of the training forms, the held-out forms and the suite by one prefill each, saved for the
    training processes (``<out>/prefill.pt``; the recipe itself keeps them in memory)."""
    from dataclasses import asdict

    from specviz.drafters.networks import fusion_layers
    from specviz.training.distill import FORMS_3, prefill_corpus

    layers = fusion_layers(target.model.config.num_hidden_layers)
    held = tuple(FORMS_3.index(f) for f in args.holdout_forms.split(","))
    kept = tuple(i for i in range(len(FORMS_3)) if i not in held)
    t0 = time.perf_counter()
    sets = {"train": prefill_corpus(target, args.out / "part3", layers, kept, _log),
            "heldout_forms": prefill_corpus(target, args.out / "part3", layers, held, _log),
            "suite": prefill_corpus(target, args.out / "suite", layers, None, _log)}
    torch.save({k: asdict(v) for k, v in sets.items()}, args.out / "prefill.pt")
    _record(args.out, "prefill", {"seconds": round(time.perf_counter() - t0),
                                  "positions": {k: v.num_positions for k, v in sets.items()},
                                  "sequences": {k: int(v.offsets.numel() - 1) for k, v in sets.items()}})


def stage_train(target, args) -> None:
    from specviz.drafters.networks import load_heads, save_heads, shipped_heads
    from specviz.training.distill import Corpus
    from specviz.training.train import TrainSettings, train_eagle

    sets = {k: Corpus(**v) for k, v in torch.load(args.out / "prefill.pt", weights_only=False).items()}
    train = sets.pop("train")
    n = int(train.offsets.numel() - 1)
    runs = {"eagle": ("eagle", n), "eagle3": ("eagle3", n)}
    runs |= {f"eagle3-{p}pct": ("eagle3", n * p // 100) for p in (25, 50)}
    runs |= {f"eagle-{p}pct": ("eagle", n * p // 100) for p in (25, 50)}
    for name in args.runs.split(","):
        if name in _results(args.out):
            continue
        if name == "shipped":
            t1 = time.perf_counter()
            head = load_heads(shipped_heads(target.model, "eagle"), target.model, "eagle")
            _record(args.out, name, {"scores": _score(head, target, sets), "eval_s": round(time.perf_counter() - t1)})
            continue
        recipe, count = runs[name]
        data = train if count == n else _subset(train, count)
        settings = TrainSettings(recipe=recipe, holdout=0.05, epochs=args.epochs, batch_tokens=args.batch_tokens)
        t1 = time.perf_counter()
        head, report = train_eagle(target, data, settings, progress=_log)
        minutes = round((time.perf_counter() - t1) / 60, 1)
        save_heads(head, args.out / f"{name}.safetensors", target.model, report)
        _record(args.out, name, {"sequences": count, "positions": data.num_positions, "minutes": minutes,
                                 "train_holdout": report["holdout_acc_per_step"],
                                 "scores": _score(head, target, sets)})
        _log(f"{name}: {json.dumps(_results(args.out)[name])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("gen", "prefill", "train"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/eagle3-compare"))
    parser.add_argument("--prompts", type=int, default=640)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--holdout-forms", default="dialogue,constrained")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--runs", default="shipped,eagle,eagle3,eagle3-25pct,eagle3-50pct",
                        help="train stage: runs in order (eagle, eagle3, eagle3-25pct, eagle3-50pct, eagle-25pct, "
                             "eagle-50pct, shipped = score the shipped head)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", default="embedded")
    parser.add_argument("--suite", type=Path, default=ROOT.parent / "shared" / "prompts" / "suite.jsonl",
                        help="held-out prompts answered for the second evaluation set (default: the shared suite)")
    parser.add_argument("--batch-tokens", type=int, default=1024)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from specviz.runtime.models import load_model

    args.out.mkdir(parents=True, exist_ok=True)
    target = load_model(args.target, device="cpu")
    {"gen": stage_gen, "prefill": stage_prefill, "train": stage_train}[args.stage](target, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
