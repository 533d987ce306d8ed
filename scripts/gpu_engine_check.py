"""The GPU check's "engine graph path" section (issue 36): the engine's own CUDA-graph path beside the bare graph.

Imported by scripts/gpu_check.py (same folder); it measures, for one model in one dtype:

1. capture: the graphs the runs below captured (widths, milliseconds; :func:`specviz.core.graphs.graph_report`);
2. step: standard decoding through the engine (``standard_generate`` on the graph path, Python loop, clock syncs and
   event building included), ms per token after the prefill (median and mean of the passes' total time), beside
   the bare StaticCache graph step of gpu_check at the same context (``x_bare`` = engine / bare; target <= 1.25), and
   the same in exact mode (every step as wide as a k = 4 verification) for bfloat16;
3. verify: the engine runner's forward of n = k + 1 tokens (ids in, float32 logits out, rollback by length), T(k+1)/
   T(1) for k = 1..8 (target <= 1.15);
4. ids: the graph path's standard decoding vs the eager path's (float32: identical), and early-exit and n-gram runs
   on the graph path vs the graph path's standard decoding, in bfloat16 with exact mode on and off (the measurement
   of whether padding the step to the verify width makes bf16 greedy ids identical).
On a CPU (``--device cpu --quick``) the graph bodies run eagerly (nothing captured): it checks the logic, not speed.
"""

from __future__ import annotations

import os
import statistics
from contextlib import contextmanager

DEFINITIONS = {
    "engine step_ms": "standard decoding through specviz's engine on the graph path (standard_generate: graph replay, "
                      "logits to the verifier, cache rollback, stop checks, event building, clock syncs): median "
                      "per-pass total ms after the prefill, graphs already captured",
    "engine x_bare": "engine step_ms / the bare StaticCache graph step at the same context (target <= 1.25)",
    "engine exact_step_ms": "as step_ms with exact mode (bfloat16): each step padded to the width of a k=4 pass",
    "engine verify ratio": "T(k+1)/T(1) of the engine runner's forward as a greedy pass runs it (GraphRunner.forward: "
                           "ids in, graph replay, logits read back to the host; then rollback by length)",
    "engine ids": "greedy ids: graph path vs eager path (standard decoding), and speculative vs standard on the "
                  "graph path, with exact mode on and off",
}


@contextmanager
def _env(name: str, value: str | None):
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _target(gc, model, device, path: str):
    return gc.RandomTarget(model, gc.IdsTokenizer(), device, (), model.config.vocab_size, path=path)


def _decode(gc, target, prompt, tokens: int, k: int = 4, drafter=None):
    from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate

    config = GenerationConfig(max_new_tokens=tokens, k=k)
    events = standard_generate(target, prompt, config) if drafter is None else \
        speculative_generate(target, drafter, prompt, config)
    return collect(events, target.tokenizer, prompt)


def step_ms(gc, model, device, prompt, tokens: int, exact: bool) -> dict:
    """Engine standard decoding on the graph path: ms per pass after the prefill (a first run captures)."""
    target = _target(gc, model, device, "graphs")
    with _env("SPECVIZ_EXACT", "1" if exact else "0"):
        _decode(gc, target, prompt, tokens)  # captures the widths it needs
        run = _decode(gc, target, prompt, tokens)
    passes = [e.timings.total_ms for e in run.events if e.kind == "pass"]
    return {"median_ms": statistics.median(passes), "mean_ms": statistics.fmean(passes), "passes": len(passes),
            "compiling": run.compiling, "forward_path": run.forward_path}


def verify_curve(gc, model, device, context: int, settings, timer) -> dict:
    """T(k+1)/T(1) of the engine runner's forward at ``context`` cached tokens (graphs per width)."""
    from specviz.core.graphs import CudaGraph, EagerGraph, acquire_runner

    graph_class = CudaGraph if device.type == "cuda" else EagerGraph
    runner = acquire_runner(model, context + 64, graph_class=graph_class)
    if runner is None:
        raise RuntimeError("the model's graph runner is busy")
    try:
        ids = gc.random_ids(context + max(settings.ks) + 1, model.config.vocab_size, settings.seed + 3 * context)
        runner.prefill(ids[:context])
        times = {}
        for n in (1, *(k + 1 for k in settings.ks)):
            def call(n=n):
                runner.forward(ids[context:context + n], to_host=True)
                runner.cache.set_row_lengths([context])
            times[n] = timer.measure(call, settings)["median_ms"]
    finally:
        runner.busy.release()
    return gc.curve(times, settings.ks)


def id_checks(gc, model, device, settings, dtype_name: str) -> dict:
    """Greedy ids on the graph path: vs the eager path (standard decoding), and speculative vs standard with exact
    mode on and off (float32: exact mode does not apply, one variant)."""
    from specviz.drafters.early_exit import EarlyExitDrafter
    from specviz.drafters.ngram import NgramDrafter

    vocab, tokens, k = model.config.vocab_size, settings.new_tokens, settings.draft_k
    prompt = gc.random_ids(16, vocab, seed=settings.seed + 1) * 4
    eager, graphs = _target(gc, model, device, "eager"), _target(gc, model, device, "graphs")
    out = {}
    reference = _decode(gc, eager, prompt, tokens, k)
    for exact in ([False] if dtype_name == "float32" else [True, False]):
        label = "float32" if dtype_name == "float32" else "exact" if exact else "not exact"
        with _env("SPECVIZ_EXACT", "1" if exact else "0"):
            base = _decode(gc, graphs, prompt, tokens, k)
            out[f"standard: graphs ({label}) vs eager"] = gc.compare_to_baseline(reference, list(base.token_ids))
            for name, make in (("early-exit", lambda: EarlyExitDrafter(model, gc.exit_layer(model))),
                               ("n-gram", NgramDrafter)):
                spec = _decode(gc, graphs, prompt, tokens, k, make())
                record = gc.compare_to_baseline(base, list(spec.token_ids))
                record["forward_path"] = spec.forward_path
                out[f"{name}: graphs ({label}) vs graphs standard"] = record
    return out


def run_section(gc, check, where: str, model, result: dict) -> None:
    """Fill ``result["engine"]`` (capture, step, verify, ids) for one model and dtype, each part in its own
    gpu_check section (a failure is recorded and the others go on)."""
    from specviz.core.graphs import graph_report

    s, device = check.settings, check.device
    engine = result.setdefault("engine", {"step": {}, "verify": {}, "ids": None, "capture": None})
    dtype_name = where.split("/")[-1]
    for context in s.contexts:
        key = str(context)
        if check.skip(f"{where}/engine/{key}"):
            continue
        with check.section(f"{where}/engine/{key}/step"):
            prompt = gc.random_ids(context, model.config.vocab_size, s.seed + context)
            step = {"plain": step_ms(gc, model, device, prompt, s.graph_tokens, exact=False)}
            if dtype_name != "float32":
                step["exact"] = step_ms(gc, model, device, prompt, s.graph_tokens, exact=True)
            bare = (result.get("step", {}).get(key) or {}).get("static_graph_ms")
            step["bare_graph_ms"] = bare
            step["x_bare"] = step["plain"]["median_ms"] / bare if bare else None
            if "exact" in step:
                step["x_bare_exact"] = step["exact"]["median_ms"] / bare if bare else None
            engine["step"][key] = step
        with check.section(f"{where}/engine/{key}/verify"):
            engine["verify"][key] = verify_curve(gc, model, device, context, s, check.timer)
    if not check.skip(f"{where}/engine/ids"):
        with check.section(f"{where}/engine/ids"):
            engine["ids"] = id_checks(gc, model, device, s, dtype_name)
    engine["capture"] = graph_report(model)


def markdown_rows(report: dict) -> list[str]:
    """The section's Markdown tables (appended to gpu_check's report)."""
    steps, verifies, ids = [], [], []
    for name, entry in report["models"].items():
        for dtype, r in entry["dtypes"].items():
            engine = r.get("engine") or {}
            for ctx, st in (engine.get("step") or {}).items():
                plain, exact = st.get("plain") or {}, st.get("exact") or {}
                steps.append(f"| {name} | {dtype} | {ctx} | {gc_f(plain.get('median_ms'), '{:.3f}')} | "
                             f"{gc_f(st.get('bare_graph_ms'), '{:.3f}')} | {gc_f(st.get('x_bare'))} | "
                             f"{gc_f(exact.get('median_ms'), '{:.3f}')} | {gc_f(st.get('x_bare_exact'))} |")
            for ctx, c in (engine.get("verify") or {}).items():
                ratios = " | ".join(f"{v:.2f}" for v in c["ratio"].values())
                verifies.append(f"| {name} | {dtype} | {ctx} | {c['t1_ms']:.3f} | {ratios} |")
            for label, e in (engine.get("ids") or {}).items():
                ids.append(f"| {name} | {dtype} | {label} | {e['tokens']} | {'yes' if e['identical'] else 'no'} | "
                           f"{gc_f(e['first_divergence'], '{}')} | {gc_f(e['gap_at_divergence'], '{:.4f}')} |")
            capture = engine.get("capture") or {}
            for runner in capture.get("runners", []):
                widths = ", ".join(f"{w}{' (tree)' if tree else ''}" for w, tree in runner["widths"])
                error = f"; capture failed: {runner['capture_error']}" if runner.get("capture_error") else ""
                ids.append(f"| {name} | {dtype} | graphs {'captured' if runner['captured'] else 'run eagerly'}: "
                           f"widths {widths} in {runner['capture_ms']:.0f} ms{error} | – | – | – | – |")
    if not (steps or verifies or ids):
        return []
    ks = report["settings"]["ks"]
    return (["", "## Engine graph path (issue 36)", "",
             "| model | dtype | context | engine step ms | bare graph ms | x bare (<= 1.25) | exact-mode step ms | "
             "exact x bare |", "|---|---|---|---|---|---|---|---|"] + steps
            + ["", "| model | dtype | context | runner T(1) ms | " + " | ".join(f"k={k}" for k in ks) + " |",
               "|---|---|---|---|" + "---|" * len(ks)] + verifies
            + ["", "| model | dtype | greedy ids | tokens | identical | first divergence | top-2 gap there |",
               "|---|---|---|---|---|---|---|"] + ids)


def gc_f(value, fmt: str = "{:.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def float32_inexact(report: dict) -> list[str]:
    """Where the graph path's float32 greedy ids differed (from the eager path, or speculative from standard)."""
    return [f"{name}/engine/{label}" for name, entry in report["models"].items()
            for label, e in ((((entry["dtypes"].get("float32") or {}).get("engine") or {}).get("ids")) or {}).items()
            if not e["identical"]]
