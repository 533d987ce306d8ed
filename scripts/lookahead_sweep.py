"""A small measured sweep of lookahead decoding's (W, N, G) on the shared suite: which setting decodes fastest here.

    python scripts/lookahead_sweep.py                       # W in {3,5}, N in {3,4}, G in {2,4}; 1 prompt/category
    python scripts/lookahead_sweep.py --windows 4 --ngrams 3 --candidates 4 --tokens 64 --out sweep.json

Per prompt (the first of each category of ``assets/suite.jsonl``), after an untimed warm-up and prefill, standard
decoding runs first and last and every setting (and n-gram lookup at k = 4, for reference) runs once in between, the
order rotated from prompt to prompt; greedy, the chat template on, one torch thread. Every run is timed on its own
clock (the engine's pass timings). Lookahead runs with k = N-1 (its candidates' length).

Figures per setting, pooled over the prompts (ratios of sums): tokens per pass (bonus included), pass cost (the
setting's target-forward ms per pass / the baseline's forward ms per token), and the decoding speedup (tokens after
the first / time after the prefill, over the baseline's on the same prompts); ``spread`` is the lowest and highest
per-prompt speedup and ``median_speedup`` their median. ``ids_identical``: every run's token ids equal the baseline's.
The fastest setting is the one with the highest median per-prompt decoding speedup (one run caught by a load burst
of a shared machine drags a pooled ratio, not a median), not the one with the most tokens per pass.

A shared machine's load bursts hit single runs; the forward costs are therefore also timed in a tight interleaved
loop at the end (:func:`specviz.measure.timing.time_forward_ms`, after a 64-token prompt, median of 7):
``forward_cost`` = T(1 + W(N-1) + G(N-1)) / T(1) and ``predicted_speedup`` = tokens per pass / forward_cost, the
speedup the run would show if drafting and bookkeeping were free. ``--costs-from FILE`` redoes only that step on a
saved result.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("SPECVIZ_TUNE", "0")

NGRAM_REFERENCE = "ngram k=4"


def _methods(windows, ngrams, candidates) -> dict[str, tuple]:
    """label -> (W, N, G) per setting, and the n-gram reference (None)."""
    out = {f"W={w} N={n} G={g}": (w, n, g) for w, n, g in itertools.product(windows, ngrams, candidates)}
    out[NGRAM_REFERENCE] = None
    return out


def _drafter(setting):
    from specviz.drafters.lookahead import LookaheadDrafter
    from specviz.drafters.ngram import NgramDrafter

    return NgramDrafter() if setting is None else LookaheadDrafter(*setting)


def _config(tokens: int, setting):
    from specviz.core.engine import GenerationConfig

    return GenerationConfig(max_new_tokens=tokens, k=4 if setting is None else setting[1] - 1)


def _measure_prompt(target, ids, methods: dict, tokens: int, shift: int) -> dict:
    """label -> Measured for one prompt: the baseline first and last (pooled), each method once in between."""
    from specviz.analysis.arena import measure_run
    from specviz.analysis.arena_rows import pool_runs

    labels = list(methods)
    labels = labels[shift % len(labels):] + labels[:shift % len(labels)]
    measure_run(target, None, ids, _config(1, None))  # an untimed prefill of this prompt
    first = measure_run(target, None, ids, _config(tokens, None))
    runs = {label: measure_run(target, _drafter(methods[label]), ids, _config(tokens, methods[label]))
            for label in labels}
    runs["baseline"] = pool_runs([first, measure_run(target, None, ids, _config(tokens, None))])
    return runs


def _figures(rows: list[dict], label: str) -> dict:
    """Pooled figures of one method over the prompts' rows."""
    from specviz.core.counters import Counters

    spec = sum((row[label].stats.counters for row in rows), Counters())
    base = sum((row["baseline"].stats for row in rows), Counters())
    per_prompt = [row[label].stats.decode_tokens_per_s / row["baseline"].stats.decode_tokens_per_s for row in rows]
    return {
        "median_speedup": statistics.median(per_prompt),
        "tokens_per_pass": spec.tokens_per_pass,
        "pass_cost": (spec.verify_ms / spec.passes) / (base.verify_ms / base.passes),
        "decode_speedup": spec.decode_tokens_per_s / base.decode_tokens_per_s,
        "spread": [min(per_prompt), max(per_prompt)],
        "window_tokens_per_pass": spec.window_tokens / spec.passes,
        "ids_identical": all(row[label].token_ids == row["baseline"].token_ids for row in rows),
        "per_category": {row["category"]: {"tokens_per_pass": row[label].stats.tokens_per_pass,
                                           "decode_speedup": p} for row, p in zip(rows, per_prompt)},
    }


def sweep(windows, ngrams, candidates, tokens: int = 32, say=print) -> dict:
    """Run the sweep on the embedded model (see the module docstring); the JSON-able result."""
    import torch

    from specviz.analysis.arena import measure_run
    from specviz.analysis.prompts import DEFAULT_PROMPTS, load_prompts, one_per_category
    from specviz.measure.machine import environment
    from specviz.runtime.models import encode_prompt, load_model

    torch.set_num_threads(1)
    started = time.perf_counter()
    target = load_model("embedded")
    prompts = one_per_category(load_prompts(DEFAULT_PROMPTS))
    methods = _methods(windows, ngrams, candidates)
    encoded = [encode_prompt(target.tokenizer, p.prompt) for p in prompts]
    for label in methods:  # warm-up: one short untimed run of each method
        measure_run(target, _drafter(methods[label]), encoded[0], _config(8, methods[label]))
    rows = []
    for i, (prompt, ids) in enumerate(zip(prompts, encoded)):
        say(f"[{i + 1}/{len(prompts)}] {prompt.id} ({prompt.category})")
        rows.append({"category": prompt.category, **_measure_prompt(target, ids, methods, tokens, i)})
    result = {"results": {label: _figures(rows, label) for label in methods}, "prompts": [p.id for p in prompts],
              "max_new_tokens": tokens, "torch_threads": 1, "environment": environment(target),
              "wall_s": time.perf_counter() - started, "date": time.strftime("%Y-%m-%d")}
    return add_forward_costs(result, target)


def add_forward_costs(result: dict, target=None) -> dict:
    """Time T(n) / T(1) for every setting's full pass (n = 1 + W(N-1) + G(N-1)) and add ``forward_cost`` and
    ``predicted_speedup`` (tokens per pass / forward_cost) to each setting's figures; the n-gram reference gets
    T(k+1)/T(1) at k = 4."""
    import torch

    from specviz.core.costs import predicted_speedup
    from specviz.drafters.lookahead import forward_tokens
    from specviz.measure.costs import lookahead_pass_cost
    from specviz.measure.timing import time_forward_ms
    from specviz.runtime.models import load_model

    torch.set_num_threads(1)
    target = target or load_model("embedded")
    settings = {label: _parse(label) for label in result["results"] if label != NGRAM_REFERENCE}
    sizes = sorted({1, 5} | {forward_tokens(*s) for s in settings.values()})
    times = time_forward_ms(target.model, target.device, 64, sizes)
    for label, fig in result["results"].items():
        cost = (times[5] / times[1] if label == NGRAM_REFERENCE else
                lookahead_pass_cost(times, *settings[label])["ratio"])
        fig["forward_cost"] = cost  # a pass in steps: the speedup is E[tau] x T_step / T_pass with T_step = 1
        fig["predicted_speedup"] = predicted_speedup(fig["tokens_per_pass"], 1.0, cost)
    result["forward_ms"] = times
    return pick_fastest(result)


def pick_fastest(result: dict) -> dict:
    """Name the setting with the highest median per-prompt decoding speedup (``fastest``, ``fastest_setting``) and
    the one with the most tokens per pass (``most_tokens_per_pass``)."""
    figures = {label: fig for label, fig in result["results"].items() if label != NGRAM_REFERENCE}
    for fig in figures.values():
        fig.setdefault("median_speedup", statistics.median(c["decode_speedup"] for c in fig["per_category"].values()))
    result["fastest"] = max(figures, key=lambda label: figures[label]["median_speedup"])
    result["fastest_setting"] = _parse(result["fastest"])
    result["most_tokens_per_pass"] = max(figures, key=lambda label: figures[label]["tokens_per_pass"])
    return result


def _parse(label: str) -> tuple[int, int, int]:
    """(W, N, G) of a label "W=3 N=4 G=2"."""
    return tuple(int(part.split("=")[1]) for part in label.split())


def format_sweep(result: dict) -> str:
    """The sweep as a Markdown table (the fastest setting in bold)."""
    lines = ["| setting | tokens/pass | pass cost in runs (steps) | decoding speedup pooled | median per prompt "
             "(range) | forward cost T(n)/T(1) | predicted speedup | ids = baseline |",
             "|---|---|---|---|---|---|---|---|"]
    for label, fig in result["results"].items():
        name = f"**{label}**" if label == result["fastest"] else label
        cost = f"{fig['forward_cost']:.2f} | {fig['predicted_speedup']:.2f}x" if "forward_cost" in fig else "- | -"
        lines.append(f"| {name} | {fig['tokens_per_pass']:.2f} | {fig['pass_cost']:.2f} | "
                     f"{fig['decode_speedup']:.2f}x | {_median(fig):.2f}x ({fig['spread'][0]:.2f}-"
                     f"{fig['spread'][1]:.2f}x) | {cost} | "
                     f"{'yes' if fig['ids_identical'] else 'NO'} |")
    return "\n".join(lines)


def _median(fig: dict) -> float:
    return fig.get("median_speedup") or statistics.median(c["decode_speedup"] for c in fig["per_category"].values())


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run the sweep, print the table (and write the JSON to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", default="3,5", help="comma list of W (default 3,5)")
    parser.add_argument("--ngrams", default="3,4", help="comma list of N (default 3,4)")
    parser.add_argument("--candidates", default="2,4", help="comma list of G (default 2,4)")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens per run (default 32)")
    parser.add_argument("--out", help="also write the JSON result here")
    parser.add_argument("--costs-from", metavar="FILE", help="only time the forward costs for a saved result")
    args = parser.parse_args(argv)
    if args.costs_from:
        result = add_forward_costs(json.loads(Path(args.costs_from).read_text(encoding="utf-8")))
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(format_sweep(result))
        return 0

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    result = sweep(ints(args.windows), ints(args.ngrams), ints(args.candidates), args.tokens,
                   say=lambda message: print(message, file=sys.stderr, flush=True))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(format_sweep(result))
    print(f"fastest: {result['fastest']}; most tokens per pass: {result['most_tokens_per_pass']}; "
          f"{result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
