"""Held-out accuracy of EAGLE / Medusa head files on committed distillation sets, side by side.

The held-out sequences are the ones ``python -m specviz train eagle|medusa --data SETS`` (seed 0, 5 % held out)
never trains on; they are split by set, because a head trained on fewer sets may have seen some of them (a head
trained on ``default`` alone saw most of ``default``'s). Features come from the same kept prefill
(``--prefill-cache``) the training wrote, so nothing is recomputed when it is there.

    .venv/bin/python scripts/eval_heads.py --data data/distill/default,data/distill/part3 \
        --prefill-cache /tmp/prefill.pt assets/heads/smollm2-135m-eagle.safetensors my-eagle.safetensors

Prints one JSON object: per head file and per set, the accuracy of each drafted position (EAGLE: the head's own
features after the first step; Medusa: head i for position i) and, for EAGLE, the chain (mean accepted tokens of
a k = 4 chain, gate off; tokens per pass ~ 1 + chain on such text).

``--prompts FILE`` (a benchmark suite, JSON lines with "prompt" and "category") measures on the target's own greedy
replies to those prompts instead (``--max-new-tokens``, default 64, as the bench), grouped by category and "all":
how far the benchmark's text is from the held-out training text, with no engine in between (a chain counted from
every reply position runs a little longer than the bench's tokens per pass - 1, whose passes start where the
last one failed).

    .venv/bin/python scripts/eval_heads.py --prompts ../shared/prompts/suite.jsonl assets/heads/*.safetensors
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _held_out_by_set(corpus, sets: list[Path], holdout: float, seed: int) -> dict[str, list]:
    """The held-out (start, end, reply start) sequences of :func:`specviz.training.train._split`, per set name."""
    from specviz.training.idshards import id_shard_paths, load_id_shard
    from specviz.training.train import _split

    counts = [sum(load_id_shard(p)["prompt_lens"].numel() for p in id_shard_paths(s)) for s in sets]
    starts = corpus.offsets.tolist()
    owner = {}
    index = 0
    for s, n in zip(sets, counts):
        for _ in range(n):
            owner[starts[index]] = s.name
            index += 1
    _, hold = _split(corpus, holdout, seed)
    groups: dict[str, list] = {s.name: [] for s in sets}
    for seq in hold:
        groups[owner[seq[0]]].append(seq)
    return groups


def _suite_groups(target, prompts: Path, max_new_tokens: int) -> tuple:
    """(corpus, {category: [(start, end, reply start)], "all": every sequence}) of the target's greedy replies to
    the prompts of ``prompts`` (JSON lines with "prompt" and "category"), made in a temporary folder."""
    import tempfile

    from specviz.training.distill import CorpusSettings, generate_corpus, prefill_corpus

    rows = [json.loads(line) for line in prompts.read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as folder:
        settings = CorpusSettings(num_prompts=len(rows), max_new_tokens=max_new_tokens, prompt_set="part4")
        generate_corpus(target, Path(folder), settings, lambda m: print(m, file=sys.stderr),
                        prompts=[(-1, r["prompt"]) for r in rows])
        corpus = prefill_corpus(target, Path(folder))
    bounds = corpus.offsets.tolist()
    groups: dict[str, list] = {"all": []}
    for i, row in enumerate(rows):
        seq = (bounds[i], bounds[i + 1], bounds[i] + int(corpus.prompt_lens[i]))
        groups.setdefault(row.get("category", "none"), []).append(seq)
        groups["all"].append(seq)
    return corpus, groups


def _measure(path: Path, target, corpus, groups: dict[str, list]) -> dict:
    from specviz.drafters.networks import DraftLMHead, MedusaHeads, load_heads
    from specviz.training.losses import _label_map, unrolled_accuracy
    from specviz.training.train import _medusa_accuracy

    head = load_heads(path, target.model)
    out = {}
    for name, hold in groups.items():
        if isinstance(head, MedusaHeads):
            vocab = head.vocab_ids if head.vocab_ids.numel() else None
            lm = DraftLMHead(target.model.get_output_embeddings().weight, vocab)
            accs = _medusa_accuracy(head, lm, corpus, hold, _label_map(vocab, target.vocab_size), head.num_heads)
            out[name] = {"sequences": len(hold), "per_position": [round(a, 4) for a in accs]}
        else:
            u = unrolled_accuracy(head, target, corpus, hold)
            out[name] = {"sequences": len(hold), "per_position": [round(a, 4) for a in u["per_step"]],
                         "chain": round(u["chain"], 3), "positions": u["positions"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("heads", nargs="+", help="EAGLE or Medusa head files")
    parser.add_argument("--data", help="committed sets, comma-separated, as given to train")
    parser.add_argument("--prefill-cache", help="the kept prefill (made when missing)")
    parser.add_argument("--prompts", type=Path,
                        help="instead of --data: a suite file whose greedy replies to measure on")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="with --prompts: the replies' length")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from specviz.runtime.models import load_model
    from specviz.training.train import cached_prefill

    if not args.prompts and not (args.data and args.prefill_cache):
        parser.error("give --data and --prefill-cache (held-out sequences) or --prompts (a suite's replies)")
    target = load_model("embedded", device="cpu")
    if args.prompts:
        corpus, groups = _suite_groups(target, args.prompts, args.max_new_tokens)
    else:
        sets = [Path(s.strip()) for s in args.data.split(",") if s.strip()]
        from specviz.drafters.networks import read_metadata

        fused = any(read_metadata(p)["recipe"] == "eagle3" for p in args.heads)  # only EAGLE-3 heads read them
        corpus = cached_prefill(target, sets, None, Path(args.prefill_cache), lambda m: print(m, file=sys.stderr),
                                fused=fused)
        groups = _held_out_by_set(corpus, sets, 0.05, 0)
    with torch.inference_mode():
        report = {str(p): _measure(Path(p), target, corpus, groups) for p in args.heads}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
