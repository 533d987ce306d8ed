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
:mod:`specviz.core.counters` and :mod:`specviz.measure.stats` for the definitions.

The package's rooms: :mod:`~specviz.cli.main` (the parser and ``main``), :mod:`~specviz.cli.generate`,
:mod:`~specviz.cli.bench`, :mod:`~specviz.cli.train` and :mod:`~specviz.cli.compile` (one command each: its flags and
its handler), :mod:`~specviz.cli.flags` (flag types and the shared flag groups) and :mod:`~specviz.cli.common` (the
usage error, logging, loading the target and the drafter).
"""

from specviz.cli.bench import cmd_bench
from specviz.cli.common import EXIT_USAGE, MAX_K, UsageError, processor_settings, set_torch_threads, torch_threads
from specviz.cli.compile import cmd_compile
from specviz.cli.generate import _summary, cmd_generate, run_record
from specviz.cli.main import build_parser, main
from specviz.cli.train import cmd_train

__all__ = ["EXIT_USAGE", "MAX_K", "UsageError", "build_parser", "cmd_bench", "cmd_compile", "cmd_generate", "cmd_train",
           "main", "processor_settings", "run_record", "set_torch_threads", "torch_threads"]
