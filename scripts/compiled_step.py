"""Time the compiled forward against the eager ones on one model (docs/performance-journal.md, section 10).

    python scripts/compiled_step.py [--target embedded] [--threads 1,2] [--repeats 7] [--freezing] [--profile]
        [--out result.json]

In one process: load the target (eager fast path), measure the memory floor (copy bandwidth), compile and warm its
forward (:func:`specviz.runtime.compiled.compile_forward`, timed: cold when inductor's disk cache is empty, warm after), then
time T(n) for n = 1, 2, 5, 9 after a 64-token context, interleaved round by round, for three forwards: the eager
fast path, the eager default kernels and the compiled forward (the compiled one is swapped in and out of the same
model object; its guards see the same kernel flag every time, so nothing recompiles; the script checks it).
(The compiled forward runs the fast path's oneDNN linears as one op each, see specviz/runtime/compiled.py.)
``--freezing`` sets inductor's freezing (weights folded and prepacked as constants; not kept in the disk cache).
``--profile`` adds torch.profiler's top operators of 5 compiled one-token steps (where the time goes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specviz.runtime.compiled import compile_forward  # noqa: E402
from specviz.core.kv import Clock, compilations, forward_logits, new_cache, rollback_cache  # noqa: E402
from specviz.measure.machine import copy_bandwidth_gbs, load_average  # noqa: E402
from specviz.runtime.models import load_model  # noqa: E402
from specviz.runtime.speed import set_fast_path  # noqa: E402

PROMPT = 64
COUNTS = (1, 2, 5, 9)


def _variants(model, compiled_forward, eager_forward):
    """name -> a function that switches ``model`` to that forward."""
    def use(forward, fast):
        def switch():
            model.forward = forward
            set_fast_path(model, fast)
        return switch
    return {"eager fast path": use(eager_forward, True), "eager default kernels": use(eager_forward, False),
            "compiled": use(compiled_forward, True)}


@torch.inference_mode()
def _time(model, variants, threads, repeats):
    ids = torch.randint(0, model.config.vocab_size, (PROMPT + max(COUNTS),),
                        generator=torch.Generator().manual_seed(0)).tolist()
    clock, caches = Clock(torch.device("cpu")), {}
    for name, switch in variants.items():
        switch()
        caches[name] = new_cache(model)
        forward_logits(model, ids[:PROMPT], caches[name], 1)
    times = {(t, name, n): [] for t in threads for name in variants for n in COUNTS}
    for round_ in range(repeats + 1):  # round 0 warms each combination up
        for t in threads:
            torch.set_num_threads(t)
            for name, switch in (variants.items() if round_ % 2 else reversed(variants.items())):
                switch()
                for n in COUNTS:
                    t0 = clock.now_ms()
                    forward_logits(model, ids[PROMPT:PROMPT + n], caches[name], n)
                    elapsed = clock.now_ms() - t0
                    rollback_cache(caches[name], PROMPT)
                    if round_:
                        times[(t, name, n)].append(elapsed)
    return {f"{t} thread(s) / {name}": {n: statistics.median(times[(t, name, n)]) for n in COUNTS}
            for t in threads for name in variants}


def _profile(model, switch):
    switch()
    cache, ids = new_cache(model), list(range(100, 100 + PROMPT + 1))
    with torch.inference_mode():
        forward_logits(model, ids[:PROMPT], cache, 1)
        with torch.profiler.profile() as prof:
            for _ in range(5):
                forward_logits(model, ids[PROMPT:PROMPT + 1], cache, 1)
                rollback_cache(cache, PROMPT)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="embedded")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--freezing", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    torch.set_num_threads(threads[0])
    if args.freezing:
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
    load0 = load_average()
    target = load_model(args.target, device="cpu")
    model = target.model
    eager_forward = model.forward
    floor_ms = target.param_bytes / (copy_bandwidth_gbs(target.device) * 1e9) * 1000.0
    started = time.perf_counter()
    report = compile_forward(model, progress=lambda m: print(m, file=sys.stderr))
    compile_s = time.perf_counter() - started
    variants = _variants(model, model.forward, eager_forward)
    before = compilations()
    ms = _time(model, variants, threads, args.repeats)
    result = {"target": target.label, "threads": threads, "freezing": args.freezing, "floor_ms": floor_ms,
              "compile_s": compile_s, "report": report.summary(), "shapes": report.shapes,
              "recompiled_while_timing": compilations() - before, "ms": ms,
              "load_average": [load0, load_average()], "cpu": os.cpu_count()}
    for name, row in ms.items():
        print(f"{name:<36} " + "  ".join(f"T({n}) {row[n]:6.1f}" for n in COUNTS)
              + f"   T(1)/floor {row[1] / floor_ms:.2f}  T(5)/T(1) {row[5] / row[1]:.2f}")
    print(json.dumps({k: v for k, v in result.items() if k != "ms"}, indent=1))
    if args.profile:
        print(_profile(model, variants["compiled"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
