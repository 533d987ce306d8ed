"""The command line: ``python -m specviz generate ...`` and ``python -m specviz bench ...``.

Output contract: with ``--json`` stdout carries only JSON (``generate``: one line per run; ``bench``: one
document). Progress, logs and warnings go to stderr. A user error (a bad flag value, an empty prompt, a
model that cannot be loaded, a draft tokenizer that cannot write text back, a missing draft model) prints one line
``error: ...`` on stderr and exits with status 2, never a traceback. ``SPECVIZ_DEBUG=1`` shows tracebacks
of unexpected errors (exit status 1).

``generate --json`` prints, per run, one object with: token_ids (generated ids only, the EOS id included
when the run ended on it), text (special tokens skipped, cut before a stop string), finish_reason ("eos",
"length" or "stop"), target_passes, drafted, accepted, acceptance_rate (accepted / drafted; null when
nothing was drafted, e.g. standard decoding), alpha, tokens_per_pass (1.0 for standard decoding),
expected_tokens_per_pass, per_position_acceptance (conditional), per_position_share (accepted at position i /
passes), tree_passes, tree_nodes_verified, lookahead_window_tokens, wall_s (prefill start to last token; loading
excluded), ttft_ms, draft_ms, verify_ms, tokens_per_s, seed (run i uses seed + i), drafter, k (an int,
"auto", or 0 for standard decoding), forward ("compiled (inductor)", "eager fast path" or "eager default
kernels": which forward ran), compiling (true when torch.compile compiled a graph during the run, so its timings
include compilation), settings (every generation setting: temperature, top_k, top_p, min_p,
repetition_penalty, frequency_penalty, presence_penalty, no_repeat_ngram_size, logit_bias as {"id": bias} with a ban
written "-inf", stop_strings, stop_token_ids, seed), settings_changed (those off their defaults, in words, besides
temperature and seed; "" when none), and with ``--compare`` a "compare" object (baseline tokens/s,
speedup end to end, decode_speedup with its bootstrap interval, verdict and reading (a run of fewer than 8 passes is
"too short"; an interval wide across 1.0 "too noisy": its figure is printed as measured, not as a result), ids_identical,
first_difference and the baseline's near_tie_gap there, for a greedy run that differs also top2_gap (the same gap),
dtype and reason (why it can differ: :mod:`specviz.analysis.exactness`), baseline_compiling); dtype (the target's). See
:mod:`specviz.core.metrics` for the definitions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import warnings
from typing import Sequence

MAX_K = 16  # mirrors specviz.core.engine.MAX_K (checked against it at run time)
EXIT_USAGE = 2


class UsageError(Exception):
    """A user-facing error: printed as one ``error:`` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors ("error: ...", exit 2) instead of the usage block."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        raise UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------- flag types


def _int_in(name: str, low: int, high: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"in {low}..{high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{name} must be {bound}, got {value}")
        return value
    return parse


def _float(name: str, check, bound: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if value != value or not check(value):
            raise argparse.ArgumentTypeError(f"{name} must be {bound}, got {text}")
        return value
    return parse


def _k_value(text: str) -> int | str:
    """An int k in 1..16 or "auto" (the cost-aware k, see specviz.core.draft_length)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"k must be an integer in 1..{MAX_K} or 'auto', got {text!r}") from None
    if not 1 <= value <= MAX_K:
        raise argparse.ArgumentTypeError(f"k must be in 1..{MAX_K} or 'auto', got {value}")
    return value


def _k_list(text: str) -> tuple[int | str, ...]:
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("k needs at least one value, e.g. 2,4,8 or auto")
    return tuple(dict.fromkeys(_k_value(t.strip()) for t in items))


def _int_list(name: str):
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(t) for t in text.split(",") if t.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a comma list of whole numbers, got {text!r}") from None
        if not values or any(not 1 <= v <= 64 for v in values):
            raise argparse.ArgumentTypeError(f"{name} values must be in 1..64, got {text!r}")
        return tuple(dict.fromkeys(values))
    return parse


def _drafter_keys():
    from specviz.drafters.registry import drafter_keys

    return drafter_keys()


def _drafter_list(text: str) -> tuple[str, ...]:
    keys = _drafter_keys()
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("drafters needs at least one name, e.g. ngram,bf16")
    from specviz.drafters.registry import split_variant

    for item in items:
        try:
            split_variant(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"unknown drafter {item!r}; choose from {', '.join(keys)} "
                                             "(eagle:tree and medusa:tree draft trees; eagle:lookup and "
                                             "medusa:lookup try n-gram lookup first; eagle:tree:lookup does both)"
                                             ) from None
    return tuple(dict.fromkeys(items))


TEMPERATURE = _float("temperature", lambda v: v >= 0, ">= 0 (0 = greedy)")
TOP_P = _float("top-p", lambda v: 0 < v <= 1, "in (0, 1]")
MIN_P = _float("min-p", lambda v: 0 <= v < 1, "in [0, 1) (0 = off)")
REPETITION_PENALTY = _float("repetition-penalty", lambda v: 0 < v <= 10, "in (0, 10] (1 = off)")
FREQUENCY_PENALTY = _float("frequency-penalty", lambda v: -2 <= v <= 2, "in [-2, 2] (0 = off)")
PRESENCE_PENALTY = _float("presence-penalty", lambda v: -2 <= v <= 2, "in [-2, 2] (0 = off)")


def _text_setting(parse):
    """An argparse type from a parser of :mod:`specviz.core.generation_settings` (its ValueError is the message)."""
    def read(text: str):
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return read


# ---------------------------------------------------------------------------------------------- the parser


def build_parser() -> argparse.ArgumentParser:
    """The ``specviz`` argument parser with its ``generate``, ``bench`` and ``train`` commands."""
    parser = _Parser(prog="python -m specviz", description="Speculative decoding, token by token.")
    commands = parser.add_subparsers(dest="command", metavar="{generate,bench,train,compile}", parser_class=_Parser)
    commands.required = True

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

    train = commands.add_parser("train", help="train the EAGLE head or the Medusa heads on the target's own outputs",
                                description="Self-distillation: the target answers a fixed prompt set, its "
                                            "features are recorded, and the head is trained on them. Data and "
                                            "training resume after an interruption.")
    train.add_argument("kind", choices=("eagle", "eagle3", "medusa"),
                       help="eagle3: an EAGLE head with the EAGLE-3 recipe (fused layers, training-time test)")
    train.add_argument("--target", default="embedded", help="model spec: 'embedded', a local folder or a hub id")
    train.add_argument("--out", help="head file to write (default <cache>/heads/<kind>.safetensors)")
    train.add_argument("--data", help="folder for the distillation shards (default <cache>/distill)")
    train.add_argument("--prompts", type=_int_in("prompts", 1), default=None, help="prompts to answer (default 2560: 1280 sampled, then 1280 greedy)")
    train.add_argument("--max-new-tokens", type=_int_in("max-new-tokens", 1), default=None, help="default 192")
    train.add_argument("--epochs", type=_int_in("epochs", 1), default=None, help="default 4 (eagle), 2 (medusa)")
    train.add_argument("--batch-tokens", type=_int_in("batch-tokens", 16), default=None,
                       help="positions per optimizer step (default 1024)")
    train.add_argument("--lr", type=_float("lr", lambda v: 0 < v < 1, "in (0, 1)"), default=None,
                       help="peak learning rate (default 0.002)")
    train.add_argument("--init", choices=("last-layer", "random"), default=None,
                       help="EAGLE head start: random (default) or the target's last layer")
    train.add_argument("--ce-weight", type=_float("ce-weight", lambda v: v >= 0, ">= 0"), default=None,
                       help="EAGLE: weight of the cross-entropy term (default 0.1)")
    train.add_argument("--prompt-set", choices=("default", "part3"), default="default",
                       help="default: parts one and two (the shipped heads); part3: everyday requests, open questions, "
                            "stories, dialogues, constrained instructions, follow-ups, all greedy (docs/heads.md)")
    train.add_argument("--forms", help="part3 only: comma-separated forms to train on (default all); eagle3 only")
    train.add_argument("--seed", type=_int_in("seed", 0, 2**63 - 1), default=0)
    train.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    train.add_argument("--threads", type=_int_in("threads", 1), help="torch CPU threads (default: torch's choice)")
    train.set_defaults(handler=cmd_train)

    comp = commands.add_parser("compile", help="compile and warm the models' forward once (torch.compile; its "
                                               "caches go to disk, so later --compile starts are quick)",
                               description="Compile the target's forward (and a draft model's) for the shapes the "
                                           "engine runs, writing inductor's caches under the specviz cache folder "
                                           "(`make compile`). Prints what was compiled and how long it took.")
    comp.add_argument("--target", default="embedded", help="model spec: 'embedded', a local folder or a hub id")
    comp.add_argument("--draft-model", help="also compile this draft model (for --drafter model)")
    comp.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    comp.add_argument("--threads", type=_int_in("threads", 1), help="torch CPU threads (default: torch's choice)")
    comp.add_argument("--json", action="store_true", help="print the reports as one JSON object")
    comp.set_defaults(handler=cmd_compile, compile=True)
    return parser


def _add_generation_flags(p: argparse.ArgumentParser) -> None:
    """The logits processors and stop token ids, named as transformers' generate() names its arguments; applied to
    the target and the draft alike at every draft position, and to the baseline (README: generation settings)."""
    from specviz.core import generation_settings as gs

    group = p.add_argument_group("generation settings (as transformers' generate(); target and draft alike)")
    group.add_argument("--repetition-penalty", type=REPETITION_PENALTY, default=1.0, metavar="R",
                       help="divide the positive logits (multiply the negative ones) of every token already in the "
                            "text, prompt included, by R (1 = off, > 1 discourages repeats)")
    group.add_argument("--frequency-penalty", type=FREQUENCY_PENALTY, default=0.0, metavar="F",
                       help="subtract F x (times the token was generated) from its logit; generated tokens only "
                            "(0 = off; as OpenAI / vLLM)")
    group.add_argument("--presence-penalty", type=PRESENCE_PENALTY, default=0.0, metavar="P",
                       help="subtract P from the logit of every token generated at least once (0 = off)")
    group.add_argument("--min-p", type=MIN_P, default=0.0, metavar="M",
                       help="sampling: drop tokens below M x the top token's probability (0 = off; no effect "
                            "when greedy)")
    group.add_argument("--no-repeat-ngram-size", type=_int_in("no-repeat-ngram-size", 0, 64), default=0, metavar="N",
                       help="ban any token that would repeat an N-gram already in the text, prompt included (0 = off)")
    group.add_argument("--logit-bias", type=_text_setting(gs.parse_logit_bias), default=(), metavar="ID:BIAS,...",
                       help="add BIAS to token ID's logit, e.g. '13:2.5,30:-inf' (-inf bans the token)")
    group.add_argument("--bad-words-ids", type=_text_setting(lambda t: gs.parse_token_ids(t, "bad words ids",
                                                                                          gs.MAX_BIASED_TOKENS)),
                       default=(), metavar="ID,...",
                       help="banned token ids, e.g. '30,31': each gets a logit bias of -inf, so it is never chosen "
                            "(single tokens; generate()'s bad_words_ids also takes sequences)")
    group.add_argument("--stop-token-ids", type=_text_setting(gs.parse_token_ids), default=(), metavar="ID,...",
                       help="stop when one of these ids is generated (kept in the output, like EOS; finish reason "
                            "'stop'); special tokens included, which --stop strings cannot match")


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="embedded", help="model spec: 'embedded', a local folder or a hub id")
    p.add_argument("--draft-model", help="draft model spec for --drafter model")
    p.add_argument("--exit-layer", type=_int_in("exit-layer", 1), help="layers run by the early-exit drafter")
    p.add_argument("--ngram-max", type=_int_in("ngram-max", 1), default=3,
                   help="n-gram lookup (--drafter ngram): longest suffix looked up earlier in the text (default 3)")
    p.add_argument("--ngram-min", type=_int_in("ngram-min", 1), default=1,
                   help="n-gram lookup: shortest suffix looked up (default 1); not lookahead's --ngram")
    p.add_argument("--heads", metavar="FILE", help="head file for --drafter eagle|medusa (default: the shipped "
                                                   "heads for the embedded model)")
    p.add_argument("--tree", type=_int_in("tree", 0, 32), default=0, metavar="N",
                   help="eagle/medusa: draft a tree of N nodes in greedy mode (0 = a chain, the default)")
    p.add_argument("--confidence", type=_float("confidence", lambda v: 0 <= v < 1, "in [0, 1)"), default=None,
                   metavar="P", help="eagle/medusa: stop drafting where the draft's cumulative probability falls "
                                     "below P (0 = always k tokens; default: the drafters' own default)")
    p.add_argument("--window", type=_int_in("window", 1, 32), default=None, metavar="W",
                   help="lookahead: the Jacobi window's columns (default 3)")
    p.add_argument("--ngram", type=_int_in("ngram", 2, 8), default=None, metavar="N",
                   help="lookahead: n-gram size: N-1 levels, candidates of N-1 tokens (default 3)")
    p.add_argument("--candidates", type=_int_in("candidates", 1, 32), default=None, metavar="G",
                   help="lookahead: most pool n-grams verified per pass (default 2; one when sampling)")
    from specviz.models import DTYPE_CHOICES

    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    p.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES,
                   help="the target's weights and activations (draft models and heads follow it); default auto: "
                        "float32 on the CPU, bfloat16 on CUDA. float32 on CUDA runs with TF32 off")
    p.add_argument("--no-chat-template", action="store_true", help="tokenize the prompt as plain text")
    p.add_argument("--threads", type=_int_in("threads", 1), help="torch CPU threads (default: torch's choice)")
    p.add_argument("--compile", action="store_true",
                   help="run the models' forward compiled (torch.compile, as SPECVIZ_COMPILE=1): compiled and "
                        "warmed at load (minutes the first time, `make compile` does it ahead; then read from "
                        "the disk cache); a run during which anything compiled is flagged")
    p.add_argument("--path", default="auto", choices=("auto", "eager", "graphs"),
                   help="the target's forward path: graphs (CUDA graphs over a static device-side cache; the default "
                        "on CUDA) or eager (the default on a CPU; SPECVIZ_GRAPHS=0 too)")
    from specviz.placement import add_placement_flags

    add_placement_flags(p)  # --device-map, --max-memory, --offload-folder: accelerate's placement


# ------------------------------------------------------------------------------------------------ helpers


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def set_torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _check_common(args) -> None:
    if args.ngram_min > args.ngram_max:
        raise UsageError(f"--ngram-min ({args.ngram_min}) must not exceed --ngram-max ({args.ngram_max})")


def _load_target(args):
    """Load the target, then apply the threads and kernels measured fastest on this machine
    (:mod:`specviz.tuning`), unless ``--threads`` chose."""
    from specviz.compiled import ENV_COMPILE, forward_path
    from specviz.models import load_model
    from specviz.placement import load_placed_target, placement_requested
    from specviz.tuning import tune

    if placement_requested(args):  # a target placed by accelerate's device map: loaded and run eagerly
        return load_placed_target(args, _log)
    if getattr(args, "compile", False):
        os.environ[ENV_COMPILE] = "1"  # load_model compiles every model it loads (the draft model too)
    if getattr(args, "path", "auto") != "auto":
        os.environ["SPECVIZ_GRAPHS"] = "1" if args.path == "graphs" else "0"  # read by specviz.core.graphs
    target = load_model(args.target, device=None if args.device == "auto" else args.device,
                        dtype=getattr(args, "dtype", "auto"), progress=_log)
    if getattr(args, "threads", None) is None:
        _log(f"settings: {tune(target, progress=_log).summary()}")
    _log(f"forward: {forward_path(target.model)}")
    from specviz.core.graphs import warm_graphs

    warmed = warm_graphs(target)  # CUDA graphs captured at load on the graph path (None elsewhere)
    if warmed:
        _log(warmed)
    return target


def _check_exit_layer(args, target) -> None:
    if args.exit_layer is not None and args.exit_layer > target.num_layers:
        raise UsageError(f"--exit-layer must be in 1..{target.num_layers} for {target.label}, got {args.exit_layer}")


def _make_drafter(key: str, args, target):
    from specviz.drafters.registry import make_drafter

    if key == "model" and not (args.draft_model or "").strip():
        raise UsageError("--drafter model needs --draft-model SPEC (a local folder or a hub id)")
    _check_exit_layer(args, target)
    return make_drafter(key, target, draft_spec=args.draft_model, exit_layer=args.exit_layer,
                        ngram_max=args.ngram_max, ngram_min=args.ngram_min, heads_path=args.heads,
                        tree_nodes=args.tree, min_confidence=args.confidence,
                        lookup=bool(getattr(args, "lookup", False)), window=args.window, ngram=args.ngram,
                        candidates=args.candidates, seed=getattr(args, "seed", 0) or 0, progress=_log)


@contextlib.contextmanager
def _quiet_libraries():
    """Silence transformers' and Python's warnings for the duration (our own messages still go to stderr)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            hf_logging.set_verbosity(level)
            hf_logging.enable_progress_bar()


# ----------------------------------------------------------------------------------------------- the prompt


def _read_prompt(flag: str) -> str:
    """The prompt text ('-': stdin, decoded as UTF-8 with undecodable bytes replaced), cleaned of control
    characters and unpaired surrogates (from undecodable argv bytes), with a note on stderr when changed."""
    from specviz.models import sanitize_prompt

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
    from specviz.models import PromptTooLongError, context_window, fit_prompt

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


# ----------------------------------------------------------------------------------------------- generate


def _run_streaming(target, drafter, prompt_ids, config, on_text):
    """One generation (``drafter`` None: standard decoding); ``on_text(delta)`` gets the text as it becomes
    final. Returns (RunResult, RunStats)."""
    from specviz.core.engine import collect, speculative_generate, standard_generate
    from specviz.core.metrics import RunStats

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
    from specviz.core.metrics import judge_decode_speedup, speedup

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
    from specviz.compiled import COMPILING_NOTE

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
    from specviz.drafters.registry import HEAD_KEYS

    if args.drafter == "model" and not (args.draft_model or "").strip():
        raise UsageError("--drafter model needs --draft-model SPEC (a local folder or a hub id)")
    if any(not s for s in args.stop):
        raise UsageError("--stop needs a non-empty string")
    if args.tree and args.drafter not in HEAD_KEYS:
        raise UsageError(f"--tree applies to --drafter eagle or medusa, not {args.drafter}")
    if args.confidence is not None and args.drafter not in HEAD_KEYS:
        raise UsageError(f"--confidence applies to --drafter eagle or medusa, not {args.drafter}")
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


def processor_settings(args) -> dict:
    """The SamplingConfig fields of the generation-settings flags (:func:`_add_generation_flags`): the penalties,
    min_p, the no-repeat n-gram size, and the logit bias with the banned ids added as -inf."""
    from specviz.core.generation_settings import with_banned

    try:
        bias = with_banned(tuple(args.logit_bias), tuple(args.bad_words_ids))
    except ValueError as error:
        raise UsageError(str(error)) from None
    return dict(min_p=args.min_p, repetition_penalty=args.repetition_penalty, frequency_penalty=args.frequency_penalty,
                presence_penalty=args.presence_penalty, no_repeat_ngram_size=args.no_repeat_ngram_size,
                logit_bias=bias)


def _check_token_ids(args, target) -> None:
    """Biased, banned and stop token ids must be ids of the loaded target (else they would do nothing)."""
    from specviz.core.generation_settings import check_token_ids
    from specviz.core.verify import SamplingConfig

    vocab = min(target.vocab_size, target.num_token_ids or target.vocab_size)
    try:
        check_token_ids(SamplingConfig(**processor_settings(args)), tuple(args.stop_token_ids), vocab)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _one_thread_if_busy(args) -> None:
    """Drop to one torch thread on a busy machine unless ``--threads`` chose (as bench does: OpenMP threads
    stall when another process holds a core; one thread degrades gently)."""
    from specviz.analysis.bench import busy_machine_warning

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
    from specviz.compiled import forward_path
    from specviz.drafters.registry import HEAD_KEYS
    from specviz.models import dtype_name

    k_label = 0 if drafter is None else args.k  # an int, "auto", or 0 for standard decoding
    tree = args.tree if args.tree and args.temperature == 0 else 0  # sampling drafts a chain
    record = run_record(result, stats, seed=seed, drafter=args.drafter, k=k_label, tree_nodes=tree)
    record["target"] = target.label
    record["device"] = str(target.device)
    record["dtype"] = dtype_name(target.dtype)
    record["forward"] = forward_path(target.model)
    record["path"] = result.forward_path  # the engine's forward path and what it promises (graphs or eager)
    record["temperature"] = args.temperature
    if args.drafter in HEAD_KEYS:
        record["min_confidence"] = drafter.min_confidence
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


# -------------------------------------------------------------------------------------------------- bench


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
    used (:mod:`specviz.tuning`). Every method of the run gets the same setting, so ratios hold."""
    from specviz.analysis.bench import busy_machine_warning

    busy = busy_machine_warning()
    if busy:
        _log(busy)
    if busy and not args.kernel and args.threads is None and torch_threads() > 1:
        set_torch_threads(1)
        args.threads = 1
        _log("note: using 1 torch thread because this machine is busy (pass --threads N to choose)")


def _kernel_bench(args) -> tuple[dict, str]:
    """``bench --kernel``: the target's forward cost and each drafter's pass cost; (result, text report)."""
    from specviz.analysis import bench

    target = _load_target(args)
    _log(f"kernel bench on {target.label} ({target.device})...")
    result = bench.kernel_bench(target, drafters=args.drafters or bench.KERNEL_DRAFTERS, progress=_log)
    result["lookahead_cost"] = bench.kernel_lookahead_cost(result, args.window, args.ngram, args.candidates)
    result["settings"]["command"] = args.command_line
    return result, bench.format_kernel(result)


def _batch_bench(args) -> tuple[dict, str]:
    """``bench --batch``: the batch-size sweep of specviz.analysis.batching; (result, text report)."""
    from specviz.analysis import batching, bench
    from specviz.core.engine import GenerationConfig
    from specviz.core.generation_settings import settings_record
    from specviz.core.verify import SamplingConfig
    from specviz.models import encode_prompt

    key = (args.drafters or ("ngram",))[0]
    k = next((k for k in (args.k or (4,)) if k != "auto"), 4)
    prompts = _bench_prompts(args, args.prompts or bench.DEFAULT_PROMPTS)
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

    drafters = args.drafters or (bench.QUICK_DRAFTERS if args.quick else ("ngram", "bf16"))
    if args.compile and not args.no_transformers:
        args.no_transformers = True  # generate() passes its own cache: the compiled forward would retrace for it
        _log("note: --compile skips transformers' generate() runs (its cache type would compile new graphs)")
    if "model" in drafters and not (args.draft_model or "").strip():
        raise UsageError("the 'model' drafter needs --draft-model SPEC (a local folder or a hub id)")
    path = args.prompts or bench.DEFAULT_PROMPTS
    prompts = _bench_prompts(args, path)
    settings = _bench_settings(args, drafters, path)
    target = _load_target(args)
    _check_token_ids(args, target)
    if "early-exit" in drafters:
        _check_exit_layer(args, target)
    result = bench.run_bench(target, prompts, settings, progress=_log)
    return result, bench.format_bench(result)


def _bench_prompts(args, path) -> list:
    """The suite at ``path``, cut to one prompt per category by ``--quick`` and to ``--limit`` prompts."""
    from specviz.analysis import bench

    try:
        prompts = bench.load_prompts(path)
    except ValueError as error:
        hint = "" if args.prompts else " (give a suite with --prompts FILE.jsonl)"
        raise UsageError(f"{error}{hint}") from None
    if args.quick:
        prompts = bench.one_per_category(prompts, bench.QUICK_MAX_CATEGORIES)
    if args.limit:
        prompts = prompts[: args.limit]
    return prompts


def _bench_settings(args, drafters, path):
    """The suite bench's settings: the flags given, else the ``--quick`` or full defaults."""
    from specviz.analysis import bench
    from specviz.core.verify import SamplingConfig

    quick = args.quick
    return bench.BenchSettings(
        drafters=tuple(drafters),
        ks=args.k or (bench.QUICK_K if quick else (2, 4, 8)),
        max_new_tokens=args.max_new_tokens or (bench.QUICK_MAX_NEW_TOKENS if quick else 64),
        repeats=args.repeats or (bench.QUICK_REPEATS if quick else 3),
        ngram_max=args.ngram_max, ngram_min=args.ngram_min, draft_spec=args.draft_model,
        exit_layer=args.exit_layer, use_chat_template=not args.no_chat_template,
        heads_path=args.heads, tree_nodes=args.tree or bench.DEFAULT_TREE_NODES, min_confidence=args.confidence,
        window=args.window, ngram=args.ngram, candidates=args.candidates,
        compare_transformers=not args.no_transformers, warm_suffix=args.warm_suffix, paired=args.paired,
        sampling=SamplingConfig(**processor_settings(args)), stop_token_ids=tuple(args.stop_token_ids),
        warmup_every_prompt=not quick or bench.QUICK_WARMUP_EVERY_PROMPT,
        extra={"quick": quick, "prompts_file": str(path), "target": args.target, "command": args.command_line},
    )


def cmd_train(args) -> int:
    from dataclasses import replace
    from pathlib import Path

    from specviz.training.distill import CorpusSettings
    from specviz.models import cache_dir
    from specviz.training.train import TrainSettings, run_training

    corpus = CorpusSettings(seed=args.seed, prompt_set=args.prompt_set)
    forms = _train_forms(args)
    if args.prompts:
        corpus = replace(corpus, num_prompts=args.prompts)
    if args.max_new_tokens:
        corpus = replace(corpus, max_new_tokens=args.max_new_tokens)
    settings = TrainSettings(seed=args.seed)
    if args.epochs:
        settings = replace(settings, epochs=args.epochs)
    if args.batch_tokens:
        settings = replace(settings, batch_tokens=args.batch_tokens)
    if args.lr:
        settings = replace(settings, lr=args.lr)
    if args.init:
        settings = replace(settings, init=args.init)
    if args.ce_weight is not None:
        settings = replace(settings, ce_weight=args.ce_weight)
    out = Path(args.out) if args.out else cache_dir() / "heads" / f"{args.kind}.safetensors"
    target = _load_target(args)
    report = run_training(args.kind, target, out, settings=settings, corpus_settings=corpus,
                          folder=Path(args.data) if args.data else None, progress=_log, forms=forms)
    print(json.dumps(report, indent=2), flush=True)
    drafter = "medusa" if args.kind == "medusa" else "eagle"
    _log(f"use it with: python -m specviz generate --drafter {drafter} --heads {out} --prompt ...")
    return 0


def _train_forms(args) -> tuple[int, ...] | None:
    """``--forms`` as indices into part three's forms (None: all).

    Raises:
        UsageError: an unknown form name, or forms without ``eagle3 --prompt-set part3``.
    """
    if not args.forms:
        return None
    from specviz.training.distill import FORMS_3

    if args.kind != "eagle3" or args.prompt_set != "part3":
        raise UsageError("--forms needs `train eagle3 --prompt-set part3`")
    names = [name.strip() for name in args.forms.split(",") if name.strip()]
    unknown = [name for name in names if name not in FORMS_3]
    if unknown:
        raise UsageError(f"unknown form(s) {', '.join(unknown)}; choose from {', '.join(FORMS_3)}")
    return tuple(FORMS_3.index(name) for name in names)


def cmd_compile(args) -> int:
    """``compile``: load the target (and ``--draft-model``) with the compiled forward, which compiles and warms it
    (:mod:`specviz.compiled`); print each model's :class:`~specviz.compiled.CompileReport`."""
    from dataclasses import asdict

    from specviz.models import load_model

    target = _load_target(args)
    loaded = [target]
    if args.draft_model:
        loaded.append(load_model(args.draft_model, device=target.device, progress=_log))
    reports = {m.label: asdict(m.compiled) for m in loaded if m.compiled is not None}
    if args.json:
        print(json.dumps(reports), flush=True)
    else:
        for m in loaded:
            print(f"{m.label}: {m.compiled.summary()}\n  shapes: {', '.join(m.compiled.shapes)}\n"
                  f"  cache: {m.compiled.cache_dir}", flush=True)
    return 0


# --------------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 unexpected error, 130 interrupted)."""
    try:
        args = build_parser().parse_args(argv)
        args.command_line = shlex.join(["python", "-m", "specviz", *(sys.argv[1:] if argv is None else argv)])
    except UsageError as error:
        _log(f"error: {error}")
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    try:
        with _quiet_libraries():
            if args.threads:
                set_torch_threads(args.threads)
            return args.handler(args)
    except UsageError as error:
        _log(f"error: {error}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _log("error: interrupted")
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI's promise: one line, no traceback
        from specviz.core.events import NumericalError
        from specviz.models import ModelLoadError

        if isinstance(error, (ModelLoadError, ValueError, NotImplementedError, OSError)):
            _log(f"error: {_one_line(error)}")
            return EXIT_USAGE
        if isinstance(error, NumericalError):
            _log(f"error: {_one_line(error)}")
            return 1
        if os.environ.get("SPECVIZ_DEBUG"):
            raise
        _log(f"error: unexpected {type(error).__name__}: {_one_line(error)} (set SPECVIZ_DEBUG=1 for a traceback)")
        return 1


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__

