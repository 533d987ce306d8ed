"""``bench``: its flags and the three benches it runs (the prompt suite x drafters x k, ``--kernel`` forward costs,
``--batch`` batch sizes); the measuring itself is :mod:`specviz.analysis.bench`."""

from __future__ import annotations

import json

from specviz.cli.common import (UsageError, _check_common, _check_exit_layer, _check_token_ids, _load_target, _log,
                                _make_drafter, processor_settings, set_torch_threads, torch_threads)
from specviz.cli.flags import _add_generation_flags, _add_model_flags, _drafter_list, _int_in, _int_list, _k_list


def add_bench_parser(commands) -> None:
    """The ``bench`` command's flags on the sub-parsers ``commands``."""
    bench = commands.add_parser("bench", help="benchmark drafters against standard decoding and transformers",
                                description="Benchmark a prompt suite x drafters x k against our standard "
                                            "decoding and transformers' generate(); or --kernel: forward cost.")
    bench.add_argument("--prompts", metavar="FILE.jsonl",
                       help="JSONL prompts: {id, category, prompt} per line, or Spec-Bench's question.jsonl "
                            "({question_id, category, turns}: the first turn is the prompt); "
                            "default assets/suite.jsonl")
    _add_model_flags(bench)
    bench.add_argument("--drafters", type=_drafter_list, default=None, help="comma list (default ngram,bf16)")
    bench.add_argument("--k", type=_k_list, default=None, help="comma list of k values or auto (default 2,4,8)")
    bench.add_argument("--max-new-tokens", type=_int_in("max-new-tokens", 1), default=None, help="default 64")
    bench.add_argument("--repeats", type=_int_in("repeats", 1), default=None, help="default 3 (median kept)")
    bench.add_argument("--limit", type=_int_in("limit", 1), default=None, help="use only the first N prompts")
    bench.add_argument("--quick", action="store_true",
                       help="one prompt per category (at most 6), 32 tokens, ngram + bf16, k=4, 1 repeat")
    bench.add_argument("--no-transformers", action="store_true", help="skip transformers' generate() runs")
    bench.add_argument("--paired", action="store_true",
                       help="time each speculative run in lockstep with a standard-decoding run of its own (one "
                            "pass of each in turn, each on its own clock): speedups that a drifting machine speed "
                            "does not move, with the quartiles of the single runs' ratios")
    bench.add_argument("--warm-suffix", action="store_true",
                       help="suffix decoding keeps the outputs of the earlier prompts of this bench in its store "
                            "(default: cold, an empty store for every run)")
    bench.add_argument("--kernel", action="store_true",
                       help="instead: ms per target forward for 1..17 and 32 new tokens, the memory floor, and "
                            "each drafter's pass cost for k=1..16 (--drafters, default ngram,early-exit,eagle,"
                            "eagle:tree,medusa,medusa:tree)")
    bench.add_argument("--batch", type=_int_list("batch"), default=None, metavar="B,B,...",
                       help="instead: standard and speculative decoding of batches of B prompts (e.g. 1,4,16; "
                            "first drafter of --drafters, default ngram; first k of --k, default 4): tokens/s, "
                            "speedup, tokens per pass and pass cost per batch size")
    _add_generation_flags(bench)  # the bench is greedy: --min-p changes nothing there
    bench.add_argument("--out", help="also write the JSON result to this file")
    bench.add_argument("--json", action="store_true", help="print only the JSON result on stdout")
    bench.set_defaults(handler=cmd_bench)


def cmd_bench(args) -> int:
    """``bench``: the prompt suite x drafters x k benchmark, or with ``--kernel`` the forward-cost bench;
    prints the text report (or the JSON with ``--json``) and writes the JSON to ``--out``."""
    from specviz.analysis import bench

    _check_common(args)
    _bench_threads(args)
    result, text = (_kernel_bench(args) if args.kernel else _batch_bench(args) if args.batch
                    else _suite_bench(args))
    if args.out:
        bench.write_json(result, args.out)
        _log(f"wrote {args.out}")
    if args.json:
        print(json.dumps(result), flush=True)
    else:
        print(text, flush=True)
    return 0


def _bench_threads(args) -> None:
    """Warn when the machine is busy and then drop to one torch thread unless ``--threads`` chose: two OpenMP
    threads stall whenever another process takes a core, even for a moment (5-55x slower, docs/performance.md),
    while one thread only slows down ~2x. On a quiet machine the threads and kernels measured fastest here are
    used (:mod:`specviz.measure.tuning`). Every method of the run gets the same setting, so ratios hold."""
    from specviz.measure.machine import busy_machine_warning

    busy = busy_machine_warning()
    if busy:
        _log(busy)
    if busy and not args.kernel and args.threads is None and torch_threads() > 1:
        set_torch_threads(1)
        args.threads = 1
        _log("note: using 1 torch thread because this machine is busy (pass --threads N to choose)")


def _kernel_bench(args) -> tuple[dict, str]:
    """``bench --kernel``: the target's forward cost and each drafter's pass cost; (result, text report)."""
    from specviz.measure.costs import kernel_lookahead_cost
    from specviz.measure.kernel import KERNEL_DRAFTERS, format_kernel, kernel_bench

    target = _load_target(args)
    if args.weights == "all":  # step, memory floor and verify curve of every weight format (specviz.measure.weights_kernel)
        from specviz.measure.weights_kernel import kernel_report

        return kernel_report(target, rounds=args.repeats or 9, progress=_log)
    _log(f"kernel bench on {target.label} ({target.device})...")
    result = kernel_bench(target, drafters=args.drafters or KERNEL_DRAFTERS, progress=_log)
    result["lookahead_cost"] = kernel_lookahead_cost(result, args.window, args.ngram, args.candidates)
    result["settings"]["command"] = args.command_line
    return result, format_kernel(result)


def _batch_bench(args) -> tuple[dict, str]:
    """``bench --batch``: the batch-size sweep of specviz.analysis.batching; (result, text report)."""
    from specviz.analysis import batching
    from specviz.analysis.prompts import DEFAULT_PROMPTS
    from specviz.core.engine import GenerationConfig
    from specviz.core.generation_settings import settings_record
    from specviz.core.verify import SamplingConfig
    from specviz.runtime.models import encode_prompt

    key = (args.drafters or ("ngram",))[0]
    k = next((k for k in (args.k or (4,)) if k != "auto"), 4)
    prompts = _bench_prompts(args, args.prompts or DEFAULT_PROMPTS)
    target = _load_target(args)
    _check_token_ids(args, target)
    encoded = [encode_prompt(target.tokenizer, p.prompt) for p in prompts[: max(args.batch)]]
    config = GenerationConfig(max_new_tokens=args.max_new_tokens or 32, k=k,
                              sampling=SamplingConfig(**processor_settings(args)),
                              stop_token_ids=tuple(args.stop_token_ids))
    _log(f"batch sweep on {target.label}: B = {', '.join(map(str, args.batch))}, drafter {key}, k = {k}")
    result = batching.batch_sweep(target, encoded, config, lambda: _make_drafter(key, args, target),
                                  batching.SweepOptions(batch_sizes=args.batch, repeats=args.repeats or 3,
                                                        progress=lambda f, m: _log(f"{f:4.0%} {m}")))
    result.update(drafter=key, target=target.label, command=args.command_line,
                  generation_settings=settings_record(config.sampling, config.stop_token_ids))
    return result, batching.format_sweep(result)


def _suite_bench(args) -> tuple[dict, str]:
    """``bench``: every prompt x drafter x k against standard decoding (and transformers); (result, text)."""
    from specviz.analysis import bench
    from specviz.analysis.bench_report import format_bench
    from specviz.analysis.prompts import DEFAULT_PROMPTS

    drafters = args.drafters or (bench.QUICK_DRAFTERS if args.quick else ("ngram", "bf16"))
    if args.compile and not args.no_transformers:
        args.no_transformers = True  # generate() passes its own cache: the compiled forward would retrace for it
        _log("note: --compile skips transformers' generate() runs (its cache type would compile new graphs)")
    if "model" in drafters and not (args.draft_model or "").strip():
        raise UsageError("the 'model' drafter needs --draft-model SPEC (a local folder or a hub id)")
    path = args.prompts or DEFAULT_PROMPTS
    prompts = _bench_prompts(args, path)
    settings = _bench_settings(args, drafters, path)
    target = _load_target(args)
    _check_token_ids(args, target)
    if "early-exit" in drafters:
        _check_exit_layer(args, target)
    result = bench.run_bench(target, prompts, settings, progress=_log)
    return result, format_bench(result)


def _bench_prompts(args, path) -> list:
    """The suite at ``path``, cut to one prompt per category by ``--quick`` and to ``--limit`` prompts."""
    from specviz.analysis import bench
    from specviz.analysis.prompts import load_prompts, one_per_category

    try:
        prompts = load_prompts(path)
    except ValueError as error:
        hint = "" if args.prompts else " (give a suite with --prompts FILE.jsonl)"
        raise UsageError(f"{error}{hint}") from None
    if args.quick:
        prompts = one_per_category(prompts, bench.QUICK_MAX_CATEGORIES)
    if args.limit:
        prompts = prompts[: args.limit]
    return prompts


def _bench_settings(args, drafters, path):
    """The suite bench's settings: the flags given, else the ``--quick`` or full defaults."""
    from specviz.analysis import bench
    from specviz.core.verify import SamplingConfig
    from specviz.drafters.heads import DEFAULT_TREE_NODES

    quick = args.quick
    return bench.BenchSettings(
        drafters=tuple(drafters),
        ks=args.k or (bench.QUICK_K if quick else (2, 4, 8)),
        max_new_tokens=args.max_new_tokens or (bench.QUICK_MAX_NEW_TOKENS if quick else 64),
        repeats=args.repeats or (bench.QUICK_REPEATS if quick else 3),
        ngram_max=args.ngram_max, ngram_min=args.ngram_min, draft_spec=args.draft_model,
        exit_layer=args.exit_layer, use_chat_template=not args.no_chat_template,
        heads_path=args.heads, tree_nodes=args.tree or DEFAULT_TREE_NODES, tree_width=args.tree_width,
        min_confidence=args.confidence,
        head_weights=args.head_weights, window=args.window, ngram=args.ngram, candidates=args.candidates,
        compare_transformers=not args.no_transformers, warm_suffix=args.warm_suffix, paired=args.paired,
        sampling=SamplingConfig(**processor_settings(args)), stop_token_ids=tuple(args.stop_token_ids),
        warmup_every_prompt=not quick or bench.QUICK_WARMUP_EVERY_PROMPT,
        extra={"quick": quick, "prompts_file": str(path), "target": args.target, "command": args.command_line},
    )
