"""The verify curve T(n)/T(1), n = 1..9, of the embedded model held in memory beside the same model offloaded to disk.

    python scripts/offload_bench.py                       # embedded model, 3 timed rounds, 1 thread
    python scripts/offload_bench.py --rounds 5 --out offload.json
    python scripts/offload_bench.py --target DIR --offload-folder /tmp/offload

Both copies are loaded by :func:`specviz.runtime.placement.load_placed`, so both run the default kernels on the eager path
(the app's CPU speed-ups of :mod:`specviz.runtime.speed` are left out on both sides): "memory" has every weight in CPU memory
(device map {"": "cpu"}), "disk" keeps the input embedding, the final norm and the (tied) LM head in memory and reads
every decoder layer from the checkpoint at each forward (accelerate's disk offload; the OS page cache may hold the
file, so "disk" often means a copy out of the page cache). The forwards are timed interleaved in one process
(:func:`specviz.analysis.offload.time_curves`); T(n)/T(1) is taken within a round, its median kept; the implied
speedup of a pass yielding tau tokens is tau * T(1) / T(k+1) (the draft's cost left out). The machine's load average
is printed before and after: on a shared machine the absolute ms move, the ratios less.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def disk_map(num_layers: int) -> dict:
    """Every decoder layer on disk; the embedding, the final norm, the rotary table and the LM head in memory."""
    resident = {"model.embed_tokens": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    return {**resident, **{f"model.layers.{i}": "disk" for i in range(num_layers)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="embedded", help="model spec (default: the embedded SmolLM2-135M)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3; one warm-up round first)")
    parser.add_argument("--prompt-len", type=int, default=64, help="cached tokens before each forward (default 64)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    parser.add_argument("--offload-folder", help="accelerate's offload folder (default: a temporary one)")
    parser.add_argument("--out", help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    import torch

    from specviz.analysis.offload import curve_figures, format_markdown, speedup_table, time_curves
    from specviz.runtime.placement import PlacementError, load_placed
    from specviz.runtime.models import ModelLoadError, layer_count

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} (1 min) on {os.cpu_count()} CPUs; torch threads {args.threads}",
          file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="specviz-offload-") as scratch:
        try:
            memory = load_placed(args.target, device_map={"": "cpu"}, progress=lambda m: print(m, file=sys.stderr))
            disk = load_placed(args.target, device_map=disk_map(layer_count(args.target) or memory.num_layers),
                               offload_folder=args.offload_folder or scratch,
                               progress=lambda m: print(m, file=sys.stderr))
        except (PlacementError, ModelLoadError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        started = time.perf_counter()
        times = time_curves({"memory": memory.model, "disk": disk.model}, memory.device, prompt_len=args.prompt_len,
                            rounds=args.rounds, progress=lambda m: print(m, file=sys.stderr))
    figures = {name: curve_figures(t) for name, t in times.items()}
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f}; timing took {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    print(f"{memory.label} vs {disk.label}; {args.prompt_len} cached tokens, {args.rounds} rounds, "
          f"{args.threads} thread(s), load {load_before[0]:.1f} -> {load_after[0]:.1f} on {os.cpu_count()} CPUs\n")
    print(format_markdown(figures))
    if args.out:
        record = {"target": memory.label, "offloaded": disk.label, "times_ms": times, "figures": figures,
                  "speedups": speedup_table(figures), "prompt_len": args.prompt_len, "rounds": args.rounds,
                  "threads": args.threads, "load_average": [load_before[0], load_after[0]],
                  "cpus": os.cpu_count()}
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
