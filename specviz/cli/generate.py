"""``generate``: its flags, reading and fitting the prompt, streaming a run, and the run's record and summary
(the JSON keys are listed in :mod:`specviz.cli`)."""

from __future__ import annotations

import json
import sys

from specviz.cli.common import (UsageError, _check_common, _check_token_ids, _drafter_keys, _load_target, _log,
                                _make_drafter, processor_settings, set_torch_threads, torch_threads)
from specviz.cli.flags import TEMPERATURE, TOP_P, _add_generation_flags, _add_model_flags, _int_in, _k_value


def add_generate_parser(commands) -> None:
    """The ``generate`` command's flags on the sub-parsers ``commands``."""
    gen = commands.add_parser("generate", help="generate text with a drafter and print it (or JSON)",
                              description="Generate from a prompt with speculative decoding (or standard "
                                          "decoding with --drafter none).")
    gen.add_argument("--prompt", required=True, help="the prompt text ('-' reads it from stdin)")
    _add_model_flags(gen)
    gen.add_argument("--drafter", default="ngram", help="|".join(_drafter_keys()) + " (default ngram)")
    gen.add_argument("--k", type=_k_value, default=4,
                     help="draft length 1..16, or 'auto' (chosen per pass from the measured pass costs and "
                          "acceptance, 0 when no k pays; starts at 4)")
    gen.add_argument("--max-new-tokens", type=_int_in("max-new-tokens", 1), default=128)
    gen.add_argument("--temperature", type=TEMPERATURE, default=0.0, help="0 = greedy (default)")
    gen.add_argument("--top-p", type=TOP_P, default=1.0)
    gen.add_argument("--top-k", type=_int_in("top-k", 0), default=0, help="0 = off")
    gen.add_argument("--seed", type=_int_in("seed", 0, 2**63 - 1), default=0,
                     help="seed of the first run (run i uses seed + i)")
    gen.add_argument("--stop", action="append", default=[], metavar="STRING",
                     help="stop after the text contains STRING (repeatable)")
    gen.add_argument("--runs", type=_int_in("runs", 1), default=1, help="independent generations (seeds s, s+1, ...)")
    _add_generation_flags(gen)
    gen.add_argument("--compare", action="store_true",
                     help="also run standard decoding with the same settings and report the speedup and "
                          "whether the ids match (they must when greedy)")
    gen.add_argument("--lookup", action="store_true",
                     help="eagle/medusa: try n-gram prompt lookup first each pass, and let the head draft only "
                          "when the text's last 2-3 tokens have not occurred before (bench: eagle:lookup)")
    gen.add_argument("--json", action="store_true", help="one JSON line per run on stdout, nothing else")
    gen.set_defaults(handler=cmd_generate)


# ----------------------------------------------------------------------------------------------- the prompt


def _read_prompt(flag: str) -> str:
    """The prompt text ('-': stdin, decoded as UTF-8 with undecodable bytes replaced), cleaned of control
    characters and unpaired surrogates (from undecodable argv bytes), with a note on stderr when changed."""
    from specviz.runtime.models import sanitize_prompt

    if flag == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8", "replace")
        text = data.decode("utf-8", errors="replace")
        if "\ufffd" in text and b"\xef\xbf\xbd" not in data:
            _log("note: the prompt on stdin is not valid UTF-8: undecodable bytes were replaced with \ufffd")
    else:
        text = flag
    clean = sanitize_prompt(text)
    if clean.note:
        _log(f"note: {clean.note}")
    return clean.text


def _fit_prompt(prompt: str, target, drafter, args) -> list[int]:
    """The prompt's ids, cut from the left (chat template kept) when the prompt, the new tokens and a pass's
    drafts would not fit the target's context window; a note on stderr says so.

    Only the target's window sets the budget: the drafter never changes what the target reads (the baseline of
    ``--compare`` gets the same ids). When a draft model's own window is shorter than the run, it drafts while the
    text fits and the target then decodes alone; a note on stderr says so too (and, for a draft model with another
    tokenizer, that its drafts are re-tokenized and verified as one-hot drafts)."""
    from specviz.drafters.model import drafter_note
    from specviz.core.engine import MAX_K as engine_max_k
    from specviz.runtime.models import PromptTooLongError, context_window, fit_prompt

    window = context_window(target)
    budget = None
    if window is not None:
        k = engine_max_k if args.k == "auto" else args.k
        reserve = args.max_new_tokens + k + 1
        budget = window - reserve
        if budget < 1:
            raise UsageError(f"--max-new-tokens {args.max_new_tokens} does not fit the context window of "
                             f"{target.label} ({window} tokens, prompt and {k} draft tokens included)")
    try:
        fit = fit_prompt(target.tokenizer, prompt, budget, use_chat_template=not args.no_chat_template)
    except PromptTooLongError as error:
        raise UsageError(f"{error} Lower --max-new-tokens.") from None
    if fit.truncated:
        _log(f"note: the prompt has {fit.original_tokens} tokens, more than fit the context window of {window} "
             f"tokens with {args.max_new_tokens} new tokens: its start was cut, keeping the last "
             f"{len(fit.ids)} tokens (chat template included): {fit.cut_note()}")
    note = drafter_note(drafter, len(fit.ids), args.max_new_tokens)
    if note:
        _log(f"note: {note}")
    return fit.ids


# ------------------------------------------------------------------------------------------------- a run


def _run_streaming(target, drafter, prompt_ids, config, on_text):
    """One generation (``drafter`` None: standard decoding); ``on_text(delta)`` gets the text as it becomes
    final. Returns (RunResult, RunStats)."""
    from specviz.core.engine import collect, speculative_generate, standard_generate
    from specviz.measure.run_stats import RunStats

    events = (standard_generate(target, prompt_ids, config) if drafter is None
              else speculative_generate(target, drafter, prompt_ids, config))
    stats = RunStats()
    kept = []
    for event in events:
        stats.add(event)
        kept.append(event)
        if event.notice:
            _log(f"note: {event.notice}")
        if on_text is not None and event.text_delta:
            on_text(event.text_delta)
    return collect(kept, target.tokenizer, prompt_ids), stats


def run_record(result, stats, *, seed: int, drafter: str, k, tree_nodes: int = 0) -> dict:
    """The JSON object of one run (keys listed in this module's docstring)."""
    figures = stats.as_dict()
    return {
        "token_ids": list(result.token_ids),
        "text": result.text,
        "finish_reason": result.finish_reason,
        "num_tokens": len(result.token_ids),
        "prompt_tokens": len(result.prompt_ids),
        "target_passes": figures["target_passes"],
        "drafted": figures["drafted"],
        "accepted": figures["accepted"],
        "acceptance_rate": figures["acceptance_rate"],
        "alpha": figures["alpha"],
        "tokens_per_pass": figures["tokens_per_pass"],
        "expected_tokens_per_pass": figures["expected_tokens_per_pass"],
        "per_position_acceptance": figures["per_position_acceptance"],
        "per_position_share": figures["per_position_share"],
        "tree_passes": figures["tree_passes"],
        "tree_nodes_verified": figures["tree_nodes_verified"],
        "lookahead_window_tokens": figures["lookahead_window_tokens"],
        "wall_s": result.wall_s,
        "ttft_ms": figures["ttft_ms"],
        "draft_ms": figures["draft_ms"],
        "verify_ms": figures["verify_ms"],
        "tokens_per_s": figures["tokens_per_s"],
        "seed": seed,
        "drafter": drafter,
        "k": k,
        "tree_nodes": tree_nodes,
        "compiling": result.compiling,
    }


def _compare_record(spec_result, spec_stats, base_result, base_stats, greedy: bool, dtype: str = "float32") -> dict:
    """Speedup over standard decoding with the same settings, and where the ids first differ (greedy runs
    must match, or say why not: :func:`specviz.analysis.exactness.compare_ids`, whose fields ``top2_gap``, ``dtype`` and
    ``reason`` join the record; sampled runs draw different random numbers, so they differ in general)."""
    from specviz.analysis.exactness import compare_ids, first_divergence
    from specviz.core.counters import speedup
    from specviz.measure.stats import judge_decode_speedup

    diff = first_divergence(spec_result.token_ids, base_result.token_ids)
    judged = judge_decode_speedup(spec_stats, base_stats)
    out = {
        "baseline_tokens_per_s": base_stats.tokens_per_s,
        "baseline_wall_s": base_result.wall_s,
        "speedup": speedup(spec_stats, base_stats),
        "decode_speedup": judged.value,
        "decode_speedup_interval": None if judged.interval is None else [judged.interval.low, judged.interval.high],
        "decode_speedup_verdict": judged.verdict,
        "decode_speedup_reading": judged.describe(),
        "greedy": greedy,
        "ids_identical": diff is None,
        "first_difference": diff,
        "near_tie_gap": None,
        "baseline_compiling": base_result.compiling,
    }
    if diff is not None:
        # baseline event i (0 = prefill) emitted output token i
        gaps = [e.near_tie_gap for e in base_result.events]
        out["near_tie_gap"] = gaps[diff] if diff < len(gaps) else None
        if greedy:
            exact = compare_ids(base_result.token_ids, gaps, spec_result.token_ids, dtype)
            out.update(top2_gap=exact["top2_gap"], dtype=dtype, reason=exact["reason"])
    return out


def _summary(record: dict, target_label: str) -> str:
    from specviz.analysis.exactness import divergence_line
    from specviz.runtime.compiled import COMPILING_NOTE

    def f(value, spec=".2f"):
        return "-" if value is None else format(value, spec)

    gate = f", tree of {record['tree_nodes']}" if record.get("tree_nodes") else ""
    gate += f", gate={record['min_confidence']:g}" if "min_confidence" in record else ""
    if record.get("lookup"):
        gate += f", lookup first ({record['copied_passes']} of {record['target_passes']} passes copied)"
    if record.get("temperature"):
        gate += f", temperature={record['temperature']:g}"
    if record.get("settings_changed"):
        gate += f", {record['settings_changed']}"
    lines = [f"[{record['drafter']}, k={record['k']}{gate}, seed={record['seed']}] {record['num_tokens']} tokens "
             f"({record['finish_reason']}) in {record['wall_s']:.2f} s = {f(record['tokens_per_s'], '.1f')} tok/s; "
             f"time to first token {record['ttft_ms']:.0f} ms; target {target_label}",
             f"  target passes {record['target_passes']}, tokens/pass {f(record['tokens_per_pass'])} "
             f"(expected {f(record['expected_tokens_per_pass'])}), drafted {record['drafted']}, accepted "
             f"{record['accepted']}, acceptance rate {f(record['acceptance_rate'])}, alpha {f(record['alpha'])}"]
    if "compare" in record:
        c = record["compare"]
        if c["ids_identical"]:
            same = "identical ids"
        elif c["greedy"]:
            same = divergence_line({"ids_identical_to_standard": False, "first_divergence": c["first_difference"],
                                    "top2_gap": c["near_tie_gap"], "reason": c.get("reason")})
        else:  # two independent samples: only the distribution is the same
            same = f"ids differ from token {c['first_difference']}; expected when sampling (same distribution)"
        if c.get("decode_speedup_verdict") in ("faster", "slower", "same"):
            reading = (f"decode speedup {f(c['decode_speedup'])}x, {c['decode_speedup_reading']} (end to end "
                       f"{f(c['speedup'])}x, one run each)")
        elif c.get("decode_speedup") is not None:  # too noisy: the figure shown, not as a finding
            reading = f"decode speedup {f(c['decode_speedup'])}x measured, {c['decode_speedup_reading']}"
        else:  # too short: no figure
            reading = f"speedup {c.get('decode_speedup_reading', 'not judged')}"
        lines.append(f"  standard decoding: {f(c['baseline_tokens_per_s'], '.1f')} tok/s -> {reading}; {same}")
    if record.get("compiling") or record.get("compare", {}).get("baseline_compiling"):
        lines.append(f"  note: {COMPILING_NOTE}")
    return "\n".join(lines)


def cmd_generate(args) -> int:
    """``generate``: check every flag before loading anything, load the target and the drafter, then run
    ``--runs`` generations (seeds seed, seed+1, ...) and print each as text or as one JSON line."""
    prompt = _checked_prompt(args)
    _check_generate_flags(args)
    base_config = _base_config(args)
    _one_thread_if_busy(args)
    target = _load_target(args)
    _check_token_ids(args, target)
    drafter = _make_drafter(args.drafter, args, target)
    prompt_ids = _fit_prompt(prompt, target, drafter, args)
    _log_generate_setup(args, target, drafter, prompt_ids)
    for index in range(args.runs):
        record = _generate_run(args, target, drafter, prompt_ids, base_config, index)
        _print_run(record, args, target.label)
    return 0


def _checked_prompt(args) -> str:
    """The prompt text, after the checks that come before reading it (n-gram sizes, the drafter's name)."""
    _check_common(args)
    if args.drafter not in _drafter_keys():
        raise UsageError(f"argument --drafter: unknown drafter {args.drafter!r}; choose from "
                         f"{', '.join(_drafter_keys())}")
    prompt = _read_prompt(args.prompt)
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return prompt


def _check_generate_flags(args) -> None:
    """Flags that need another flag (``--drafter model`` a draft model) or a head drafter (eagle, medusa)."""
    from specviz.drafters.registry import GATED_KEYS, HEAD_KEYS

    if args.drafter == "model" and not (args.draft_model or "").strip():
        raise UsageError("--drafter model needs --draft-model SPEC (a local folder or a hub id)")
    if any(not s for s in args.stop):
        raise UsageError("--stop needs a non-empty string")
    if args.tree and args.drafter not in HEAD_KEYS:
        raise UsageError(f"--tree applies to --drafter eagle or medusa, not {args.drafter}")
    if args.confidence is not None and args.drafter not in GATED_KEYS:
        raise UsageError(f"--confidence applies to --drafter eagle, medusa, distilled or model, not {args.drafter}")
    if args.lookup and args.drafter not in HEAD_KEYS:
        raise UsageError(f"--lookup applies to --drafter eagle or medusa (n-gram lookup alone is --drafter ngram), "
                         f"not {args.drafter}")


def _base_config(args) -> dict:
    """The GenerationConfig fields every run shares (``--k auto`` starts at 4), validated with the sampling
    flags before any model is loaded."""
    from specviz.core.engine import GenerationConfig
    from specviz.core.verify import SamplingConfig

    auto = args.k == "auto"
    base_config = dict(max_new_tokens=args.max_new_tokens, k=4 if auto else args.k, auto_k=auto,
                       stop_strings=tuple(args.stop), stop_token_ids=tuple(args.stop_token_ids))
    GenerationConfig(**base_config)
    SamplingConfig(args.temperature, args.top_k, args.top_p, args.seed, **processor_settings(args))
    return base_config


def _one_thread_if_busy(args) -> None:
    """Drop to one torch thread on a busy machine unless ``--threads`` chose (as bench does: OpenMP threads
    stall when another process holds a core; one thread degrades gently)."""
    from specviz.measure.machine import busy_machine_warning

    if args.threads is None and torch_threads() > 1 and busy_machine_warning():
        set_torch_threads(1)
        args.threads = 1  # no tuning either: a busy machine's measurement would mislead
        _log("note: using 1 torch thread because this machine is busy (pass --threads N to choose)")


def _log_generate_setup(args, target, drafter, prompt_ids: list[int]) -> None:
    """What runs on what (stderr), and notes on flags the drafter cannot fully honour."""
    _log(f"target {target.label} on {target.device}; drafter {args.drafter}"
         f"{'' if drafter is None else ' (' + drafter.name + ')'}; {len(prompt_ids)} prompt tokens")
    if args.tree and args.temperature > 0:
        _log("note: trees are greedy-only; this sampling run drafts a chain")
    heads = getattr(getattr(drafter, "heads", None), "num_heads", None)
    if heads is not None and args.k != "auto" and args.k > heads:
        _log(f"note: the Medusa heads draft at most {heads} tokens per pass (k = {args.k} asked)")


def _generate_run(args, target, drafter, prompt_ids: list[int], base_config: dict, index: int) -> dict:
    """Run number ``index`` (seed ``args.seed + index``), streaming its text unless ``--json``, and with
    ``--compare`` a standard-decoding run of the same settings; returns the run's record."""
    from specviz.core.engine import GenerationConfig
    from specviz.core.generation_settings import settings_record, settings_summary
    from specviz.core.verify import SamplingConfig

    seed = args.seed + index
    sampling = SamplingConfig(args.temperature, args.top_k, args.top_p, seed, **processor_settings(args))
    config = GenerationConfig(sampling=sampling, **base_config)
    on_text = None if args.json else _stdout_stream(args, index, seed)
    result, stats = _run_streaming(target, drafter, prompt_ids, config, on_text)
    if index == 0:
        _log(f"path: {result.forward_path}")
    record = _generate_record(args, target, drafter, result, stats, seed)
    record["settings"] = settings_record(sampling, config.stop_token_ids, config.stop_strings)
    record["settings_changed"] = settings_summary(sampling, config.stop_token_ids)
    if args.compare:
        base_result, base_stats = _run_streaming(target, None, prompt_ids, config, None)
        record["compare"] = _compare_record(result, stats, base_result, base_stats, sampling.greedy,
                                            record["dtype"])
    return record


def _stdout_stream(args, index: int, seed: int):
    """Print the run's header when there are several runs; return the callback that prints its text."""
    if args.runs > 1:
        print(f"--- run {index + 1}/{args.runs} (seed {seed}) ---", flush=True)
    return lambda text: print(text, end="", flush=True)


def _generate_record(args, target, drafter, result, stats, seed: int) -> dict:
    """:func:`run_record` plus the settings of ``generate`` (target, device, forward path, temperature,
    head-drafter gates)."""
    from specviz.runtime.compiled import forward_path
    from specviz.drafters.registry import GATED_KEYS, HEAD_KEYS
    from specviz.runtime.models import dtype_name
    from specviz.runtime.weights import weights_of

    k_label = 0 if drafter is None else args.k  # an int, "auto", or 0 for standard decoding
    tree = args.tree if args.tree and args.temperature == 0 else 0  # sampling drafts a chain
    record = run_record(result, stats, seed=seed, drafter=args.drafter, k=k_label, tree_nodes=tree)
    record["target"] = target.label
    record["device"] = str(target.device)
    record["dtype"] = dtype_name(target.dtype)
    record["weights"] = weights_of(target.model)  # the linears' format (specviz.runtime.weights)
    record["forward"] = forward_path(target.model)
    record["path"] = result.forward_path  # the engine's forward path and what it promises (graphs or eager)
    record["temperature"] = args.temperature
    if args.drafter in GATED_KEYS:
        record["min_confidence"] = getattr(drafter, "min_confidence", 0.0)  # a re-tokenizing draft model: none
    if args.drafter in HEAD_KEYS:
        record["lookup"] = args.lookup
        record["copied_passes"] = drafter.copied_passes
    return record


def _print_run(record: dict, args, target_label: str) -> None:
    """One JSON line with ``--json``; otherwise end the streamed text and print the summary."""
    if args.json:
        print(json.dumps(record), flush=True)
    else:
        print("\n", flush=True)
        print(_summary(record, target_label), flush=True)
