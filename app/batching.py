"""The Batching tab (issue 18): where the free verification runs out, and a check that speculative sampling keeps
the target's distribution.

**Speculation × batch size** (:func:`measure`, the Measure button). One :class:`app.device.Job` waits for its turn
on the device, loads the target, encodes a few example prompts (assets/prompts.jsonl; "long" joins them to about
:data:`LONG_PROMPT_TOKENS` tokens each), times a few forwards (:func:`specviz.analysis.arena.probe_forward_ms`) for
the estimate in the status line (:func:`sweep_seconds`), optionally times the forward grid T(B, 1), T(B, k+1)
for the predicted curve (:func:`specviz.analysis.arena.measure_forward_grid`), and runs
:func:`specviz.analysis.batching.batch_sweep` with the job's cancel flag as ``should_stop`` (Stop, or a closed
browser tab, ends it before its next forward; the batch sizes that finished are still shown). Shown: a table per
B (:func:`sweep_table`; every measured figure with the lowest and highest of its repeats, :func:`spread_cell`, and
the predicted speedup, a model, with its inputs' range, :func:`predicted_cell`), the speedup against B beside the pass cost (:func:`sweep_figure`), one sentence that
reads the lesson off the numbers (:func:`sweep_lesson`), and CSV / JSON downloads (:func:`write_sweep_files`).
Every speedup is read by the rule every tab uses (:func:`specviz.core.verdict.read_speedup`, :func:`verdict`) on
its repeats' range: all above (or all below) 1 reads "faster" ("slower") with the median and the range, however
wide and however busy the machine; only repeats on both sides of 1 that disagree by more than :data:`NOISY_SPREAD`
(or on a busy machine) read "too noisy to tell", the median still shown.

**The sampling-law check** (:func:`check`, the Check button). One job runs
:func:`specviz.analysis.batching.sampling_check`: N short sampled runs of standard and of speculative decoding
(batched), the two tokens after the prefill's token counted and compared with the target's exact probabilities
(chi-square goodness of fit) and with each other (homogeneity). Shown: the two histograms side by side with the
exact law's expected counts as markers (:func:`check_figure`), the statistics (:func:`check_stats_html`) and one
sentence (:func:`check_lesson`). The drafters are wrapped to count what they proposed (:class:`CountingDrafter`),
so a drafter that proposed nothing (the speculative runs were standard decoding) is said to have tested nothing.

Figures are pure functions of the results; nothing here imports another tab.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import gradio as gr
import plotly.graph_objects as go

from app import device, render
from app.device import CancelRegistry, Job, load_target, relay
from app.downloads import write_csv_and_json
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX
from app.inputs import InputError, NumberField, check_models, number, text
from app.messages import enter_commits_js, report, tell_when_clamped
from specviz.analysis.arena import grid_seconds, measure_forward_grid, probe_forward_ms
from specviz.analysis.batching import (BATCH_SIZES, MIN_EXPECTED, ONE_SAMPLE, REPEATED_FIGURES, batch_sweep,
                                       repeat_speedups, repeat_values, sampling_check, spread_cell)
from specviz.analysis.bench import (CONTENDED_SHARE, EXAMPLE_PROMPTS, CpuShare, busy_machine_warning, environment,
                                    load_prompts)
from specviz.core.engine import MAX_K, GenerationConfig
from specviz.core.metrics import format_apart
from specviz.core.verdict import FASTER, NARROW, NOISY, SAME, SLOWER, Verdict, read_speedup
from specviz.core.verify import SamplingConfig
from specviz.drafters.registry import NONE, choices, make_drafter
from specviz.policy import PolicyError, current_policy

log = logging.getLogger("specviz.app.batching")

SWEEP_OUTPUTS = ("batching-status", "batching-lesson", "batching-chart", "batching-table", "batching-csv",
                 "batching-json")
"""What :func:`measure` yields, in order (the components' elem_ids)."""
CHECK_OUTPUTS = ("batching-check-status", "batching-check-lesson", "batching-check-chart", "batching-check-stats")
"""What :func:`check` yields, in order (the components' elem_ids)."""

DEFAULT_DRAFTER = "ngram"
DEFAULT_K = 4
DEFAULT_MAX_NEW_TOKENS = 24
MAX_NEW_TOKENS = 128
REPEATS = 3  # standard and speculative runs per batch size, interleaved; rates are their medians
SHORT, LONG = "short", "long"
LONG_PROMPT_TOKENS = 1000  # "long prompts": example prompts joined to about this many tokens each
PROMPT_LENGTHS = (("short prompts (the examples, ~50 tokens)", SHORT), ("long prompts (~1,000 tokens)", LONG))
NOISY_SPREAD = NARROW - 1  # repeats on both sides of 1 spread wider than this (fastest ÷ slowest − 1): too noisy
IMPOSSIBLE_COST = 0.95  # a pass of k+1 tokens per row measured below this many one-token steps: noise
NEAR_ONE = 1.3  # a pass cost T(B, k+1) / T(B, 1) at most this "stays near 1" in the lesson
PROBE_WIDE = 64  # tokens of the probe's wide forward (its per-token cost prices the prefills and wide passes)
ASSUMED_TOKENS_PER_PASS = 1.5  # for the estimate only, before anything was accepted

CHECK_PROMPT = "The sky is grey today. Write one sentence about the sea."
CHECK_N, MIN_N, MAX_N = 200, 20, 1000
N_FIELD = NumberField("N runs per side", MIN_N, MAX_N, True, CHECK_N)  # the N box's rule, named as its label
CHECK_K = 4  # the check's runs make 3 tokens: the one drafted position is the second token
CHECK_BATCH = 16  # rows per batched run of the check
CHECK_TOKENS = 3
LEVEL = 0.01  # the tests' significance level
SHOWN_PAIRS = 12  # the histograms' bars: the most frequent pairs, then "all other pairs"
STATUS_INTERVAL_S = 1.0

SWEEPS = CancelRegistry()  # this tab's sweeps, one per session
CHECKS = CancelRegistry()  # this tab's sampling checks, one per session


# ------------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class Models:
    """The target spec, the drafter key and the draft model spec (the 'model' drafter's only)."""

    target: str
    drafter: str
    draft_spec: str | None = None


@dataclass(frozen=True)
class SweepSettings:
    """A validated sweep: k, new tokens per row, the batch sizes, long prompts or not, and whether to time the
    forward grid for the predicted curve."""

    models: Models
    k: int
    max_new_tokens: int
    batch_sizes: tuple[int, ...]
    long_prompts: bool
    predicted: bool


@dataclass(frozen=True)
class CheckSettings:
    """A validated sampling check: the prompt, the temperature, N runs per side, and the broken verifier."""

    models: Models
    prompt: str
    temperature: float
    n: int
    broken: bool


def drafter_menu() -> list[tuple[str, str]]:
    """(label, key) of every registry drafter but standard decoding."""
    return [(c.label, c.key) for c in choices() if c.key != NONE.key]


def parse_models(target, drafter, draft_model) -> Models:
    """The models, checked against the operator's policy. Raises InputError (or PolicyError), one sentence."""
    spec = text(target, "The target").strip()
    if not spec:
        raise InputError("Give a target model: 'embedded', a hub id or a local folder.")
    if drafter not in {key for _, key in drafter_menu()}:
        raise InputError("Pick a drafter.")
    draft = text(draft_model, "The draft model").strip() or None
    if drafter == "model" and not draft:
        raise InputError("The 'Draft model' drafter needs a draft model: a hub id or a local folder.")
    draft = draft if drafter == "model" else None
    check_models(spec, draft, current_policy())  # the operator's model policy (specviz.policy)
    return Models(spec, drafter, draft)


def parse_sweep(drafter, k, max_new_tokens, batch_sizes, prompt_length, predicted, target,
                draft_model) -> SweepSettings:
    """The sweep's settings. Raises InputError (or PolicyError) with one sentence for the visitor."""
    try:
        sizes = sorted({int(b) for b in batch_sizes or ()})
    except (TypeError, ValueError):
        raise InputError(f"Batch sizes are chosen from {', '.join(map(str, BATCH_SIZES))}.") from None
    if not sizes:
        raise InputError("Pick at least one batch size.")
    if any(b not in BATCH_SIZES for b in sizes):
        raise InputError(f"Batch sizes are chosen from {', '.join(map(str, BATCH_SIZES))}.")
    k = int(number(k, "k (draft length)", 1, MAX_K, True))
    limit = min(MAX_NEW_TOKENS, current_policy().max_new_tokens)
    new = int(number(max_new_tokens, "Max new tokens", 1, limit, True))
    if prompt_length not in (SHORT, LONG):
        raise InputError("Pick short or long prompts.")
    return SweepSettings(parse_models(target, drafter, draft_model), k, new, tuple(sizes), prompt_length == LONG,
                         bool(predicted))


def parse_check(prompt, temperature, drafter, n, broken, target, draft_model) -> CheckSettings:
    """The check's settings. Raises InputError (or PolicyError) with one sentence for the visitor."""
    prompt = text(prompt, "The prompt").strip()
    if not prompt:
        raise InputError("The prompt is empty: type one (an open one, such as a request for a sentence).")
    temperature = float(number(temperature, "Temperature", 0, 2, False))
    if temperature == 0:
        raise InputError("The check needs a temperature above 0: at temperature 0 decoding is greedy and there "
                         "is nothing to sample.")
    n = int(N_FIELD.parse(n))  # an empty box: the default
    return CheckSettings(parse_models(target, drafter, draft_model), prompt, temperature, n, bool(broken))


# ------------------------------------------------------------------------------------------------ work helpers


class CountingDrafter:
    """A drafter that counts what the drafter it wraps proposed (``passes`` asked, ``proposed`` tokens) into a
    shared ``tally`` dict; everything else is the wrapped drafter's."""

    def __init__(self, inner, tally: dict) -> None:
        self.inner, self.tally = inner, tally

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def propose(self, ctx):
        """The wrapped drafter's proposal, counted."""
        draft = self.inner.propose(ctx)
        self.tally["passes"] = self.tally.get("passes", 0) + 1
        self.tally["proposed"] = self.tally.get("proposed", 0) + len(draft.token_ids)
        return draft


def drafter_factory(models: Models, loaded, tally: dict | None = None) -> Callable[[], object]:
    """A factory of fresh drafters (a drafter holds one run's state; a draft model is loaded once and shared).
    Makes one at once, so a drafter that cannot be made fails before any timing. ``tally``: count proposals."""
    def make():
        drafter = make_drafter(models.drafter, loaded, draft_spec=models.draft_spec)
        return CountingDrafter(drafter, tally) if tally is not None else drafter

    make()
    return make


def sweep_prompts(tokenizer, long_prompts: bool, count: int) -> list[list[int]]:
    """``count`` encoded prompts (chat template) from the example prompts: each example once (the sweep recycles
    them to fill B rows); long: row i joins the examples, starting at the i-th, until about
    :data:`LONG_PROMPT_TOKENS` tokens (so the rows differ)."""
    from specviz.models import encode_prompt

    texts = [p.prompt for p in load_prompts(EXAMPLE_PROMPTS)]
    if not long_prompts:
        return [encode_prompt(tokenizer, t) for t in texts[:count]]
    sizes = [len(encode_prompt(tokenizer, t, use_chat_template=False)) for t in texts]
    out = []
    for i in range(count):
        parts, total = [], 0
        while total < LONG_PROMPT_TOKENS:
            j = (i + len(parts)) % len(texts)
            parts.append(texts[j])
            total += sizes[j] + 2
        out.append(encode_prompt(tokenizer, "\n\n".join(parts)))
    return out


def check_room(loaded, prompts: list[list[int]], s: SweepSettings) -> None:
    """Raise InputError when the longest prompt, its new tokens and a draft do not fit the target's window or
    the operator's prompt cap."""
    from specviz.models import context_window

    longest = max(len(p) for p in prompts)
    window = context_window(loaded)
    if window is not None and longest + s.max_new_tokens + s.k + 1 > window:
        raise InputError(f"These prompts need {longest + s.max_new_tokens + s.k + 1:,} positions; {loaded.label} "
                         f"has a context window of {window:,} tokens: pick short prompts or fewer new tokens.")
    cap = current_policy().max_prompt_tokens
    if cap is not None and longest > cap:
        raise InputError(f"Long prompts ({longest:,} tokens) exceed this server's prompt limit of {cap:,} tokens "
                         "(SPECVIZ_MAX_PROMPT_TOKENS): pick short prompts.")


def sweep_seconds(probe: dict[int, float], s: SweepSettings, prompt_len: int) -> float:
    """About how long the sweep takes (seconds), from a probe (ms of one forward over n new tokens at batch 1,
    at least two n). A forward of b rows × n tokens costs max(T(1), b·n·t), t = the widest probe's ms per token
    (memory-bound below, compute-bound above); each repeat prefills b rows twice, decodes standard (one token per
    step) and speculative (:data:`ASSUMED_TOKENS_PER_PASS` tokens per pass); the grid adds its own estimate."""
    wide = max(probe)
    step, per_token = probe[min(probe)], probe[wide] / wide

    def forward(b: int, n: int) -> float:
        return max(step, b * n * per_token)

    total = 0.0
    for b in s.batch_sizes:
        prefill = forward(b, prompt_len)
        standard = s.max_new_tokens * forward(b, 1)
        speculative = s.max_new_tokens / ASSUMED_TOKENS_PER_PASS * forward(b, s.k + 1)
        total += REPEATS * (2 * prefill + standard + speculative)
    seconds = total / 1000.0
    if s.predicted:
        seconds += grid_seconds(probe, prompt_len=prompt_len, token_counts=(1, s.k + 1), batch_sizes=s.batch_sizes)
    return seconds


def device_name(loaded) -> str:
    """"CPU", or "GPU (its name)"."""
    if loaded.device.type == "cuda":
        import torch

        return f"GPU ({torch.cuda.get_device_name(loaded.device)})"
    return loaded.device.type.upper()


# ------------------------------------------------------------------------------------------------ sweep work


def _sweep_work(job: Job, s: SweepSettings) -> dict:
    """In the job's thread: load, encode, probe (the estimate), the grid (when asked) and the sweep. Says
    ("progress", (fraction, message)) and ("estimate", seconds) through the job. Returns batch_sweep's result
    with "settings", "environment", "device", "grid", "prompt_tokens" and "cpu_others" (other programs' share of
    the CPUs while the grid and the sweep were timed, :class:`CpuShare`; None where unknown) added."""

    def say(fraction: float, message: str) -> None:
        job.say(("progress", (fraction, message)))

    say(0.0, f"Loading the target {s.models.target}…")
    loaded = load_target(s.models.target, progress=lambda message: say(0.0, message))
    make = drafter_factory(s.models, loaded)
    prompts = sweep_prompts(loaded.tokenizer, s.long_prompts, max(s.batch_sizes))
    check_room(loaded, prompts, s)
    prompt_len = round(sum(map(len, prompts)) / len(prompts))
    say(0.0, "Timing a few forwards for the estimate…")
    probe = probe_forward_ms(loaded, (1, s.k + 1, PROBE_WIDE))
    job.say(("estimate", sweep_seconds(probe, s, prompt_len)))
    grid, share, cpu = None, 0.0, CpuShare()  # other programs' share of the CPUs from here to the sweep's end
    if s.predicted:
        whole = sweep_seconds(probe, s, prompt_len)
        share = grid_seconds(probe, prompt_len=prompt_len, token_counts=(1, s.k + 1),
                             batch_sizes=s.batch_sizes) / whole if whole > 0 else 0.0
        grid = measure_forward_grid(loaded, prompt_len=prompt_len, token_counts=(1, s.k + 1),
                                    batch_sizes=s.batch_sizes, progress=lambda f, m: say(share * f, m),
                                    should_stop=job.should_stop)
    config = GenerationConfig(max_new_tokens=s.max_new_tokens, k=s.k)
    result = batch_sweep(loaded, prompts, config, make, batch_sizes=s.batch_sizes, repeats=REPEATS,
                         grid=None if grid is None or grid["stopped"] else grid,
                         progress=lambda f, m: say(share + (1 - share) * f, m), should_stop=job.should_stop)
    result["stopped"] = result["stopped"] or bool(grid and grid["stopped"])
    result.update(settings=asdict(s), environment=environment(loaded), device=device_name(loaded),
                  cpu_others=cpu.others(),
                  label=loaded.label, prompt_tokens=[len(p) for p in prompts],
                  grid=None if grid is None else {"ms": grid["ms"], "spread": grid.get("spread"),
                                                   "impossible": grid.get("impossible"),
                                                   "prompt_len": prompt_len})
    return result


# ------------------------------------------------------------------------------------------------ reading rows


def reading(row: dict, busy: bool = False) -> Verdict | None:
    """The rule's reading of a row's speedup (:func:`specviz.core.verdict.read_speedup`): the median with its
    repeats' range (lowest to highest); :func:`impossible` timings are too noisy whatever the range. ``busy``: other
    programs disturbed the sweep (:func:`disturbance`): repeats on both sides of 1 are then too noisy even when
    close, repeats on one side keep their verdict. None when nothing was measured."""
    ups = repeat_speedups(row)
    if row.get("speedup") is None or not ups:
        return None
    why = IMPOSSIBLE_WORDS if impossible(row) else None
    return read_speedup(row["speedup"], min(ups), max(ups), busy="other programs busy" if busy else None,
                        impossible=why)


IMPOSSIBLE_WORDS = "impossible timings (a pass cheaper than a step, or a speedup above the tokens per pass)"


def verdict(row: dict, busy: bool = False) -> str:
    """"pays" (every repeat above 1, however far apart: all faster), "loses" (every repeat below 1: all slower),
    "even" (the repeats straddle 1 but agree within :data:`NOISY_SPREAD` on an undisturbed machine), "noisy" (they
    straddle 1 and spread by more than :data:`NOISY_SPREAD`, or straddle it on a busy machine, or the row is
    :func:`impossible`: too noisy to tell) or "none" (nothing measured): the words of :func:`reading`, the rule
    every tab uses. ``busy`` as there."""
    read = reading(row, busy)
    if read is None:
        return "none"
    return {FASTER: "pays", SLOWER: "loses", SAME: "even", NOISY: "noisy"}[read.word]


def impossible(row: dict) -> bool:
    """A row no real machine can produce: a pass over k+1 tokens per row cheaper than a one-token step (pass cost
    below :data:`IMPOSSIBLE_COST`), or a speedup above the tokens per pass by more than 5 %. The machine's speed
    changed between the timings."""
    cost, speedup, tokens = row.get("pass_cost"), row.get("speedup"), row.get("tokens_per_pass")
    return ((cost is not None and cost < IMPOSSIBLE_COST)
            or (speedup is not None and tokens is not None and speedup > tokens * 1.05))


def crossover(rows: list[dict]) -> dict | None:
    """The smallest batch size whose repeats all lost (speedup below 1), noisy rows never counting."""
    return next((r for r in rows if verdict(r) == "loses"), None)


def _fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


VERDICT_WORDS = {"pays": "faster", "loses": "slower", "even": "even"}
"""The table's word for a measured verdict (:func:`speedup_text`)."""


def speedup_text(row: dict, busy: bool = False) -> str:
    """"2.15× faster (1.84–2.44×)" (every repeat above 1), "0.80× slower (0.75–0.85×)", "1.02× about the same
    (0.98–1.05×)", or "too noisy to tell: 1.05× measured (0.80–1.50×)" (:func:`reading`, ``busy`` as there): the
    median, then the repeats' own range; "–" when not measured."""
    read = reading(row, busy)
    return "–" if read is None else read.cell()


COST_DISAGREEMENT = 1.25  # the grid's and the sweep's pass costs differ by more than this factor: too noisy


def noisy_prediction(row: dict, rows: list[dict]) -> bool:
    """Whether a row's predicted speedup is too noisy to show as a prediction: it is above the B = 1 tokens per pass
    it is made from (by more than 5 %: the forward grid timed a pass over k+1 tokens per row cheaper than a one-token
    step, which no machine does), or the grid's pass cost T(B, k+1) / T(B, 1) and the one the sweep itself measured
    (the table's) differ by more than :data:`COST_DISAGREEMENT` times (the machine's speed changed between the two
    timings, e.g. another program took a core: a contention that makes one-token steps several times slower)."""
    first = next((r for r in rows if r["batch"] == 1 and r.get("tokens_per_pass")), None)
    predicted = row.get("predicted")
    if predicted is None or first is None:
        return False
    if predicted > first["tokens_per_pass"] * 1.05:
        return True
    grid, sweep = row.get("predicted_pass_cost"), row.get("pass_cost")
    return bool(grid and sweep and max(grid / sweep, sweep / grid) > COST_DISAGREEMENT)


def predicted_cell(row: dict) -> str:
    """The model's predicted speedup with the range its inputs' spread gives (``predicted_low`` / ``_high``,
    :func:`specviz.analysis.batching.predict`): "1.23 (1.10–1.35)"; "1.23 (all inputs one sample)" where the range
    is a point; the bare value for a row without the range (a file from before it was kept); "–" without one."""
    value, low, high = row.get("predicted"), row.get("predicted_low"), row.get("predicted_high")
    if value is None:
        return "–"
    if low is None or high is None:
        return f"{value:.2f}"
    if low == high:
        return f"{value:.2f} (all inputs one sample)"
    return f"{value:.2f} ({'–'.join(format_apart(low, high, 2, 4))})"


def sweep_columns(k: int, rows: list[dict] = (), busy: bool = False) -> list[tuple[str, Callable[[dict], str]]]:
    """(header, cell of a row) of the table; ``rows``: the sweep's rows (a noisy prediction is read against them);
    ``busy``: other programs disturbed the sweep (repeats across 1 are too noisy to tell, :func:`verdict`)."""
    return [
        ("B", lambda r: str(r["batch"])),
        ("Standard tok/s", lambda r: spread_cell(r, "standard_tps", ".1f")),
        ("Speculative tok/s", lambda r: spread_cell(r, "speculative_tps", ".1f")),
        ("Speedup (repeats)", lambda r: speedup_text(r, busy)),
        ("Predicted (model)", lambda r: (f"too noisy ({r['predicted']:.2f})" if noisy_prediction(r, rows)
                                         else predicted_cell(r))),
        ("Tokens/pass", lambda r: spread_cell(r, "tokens_per_pass", ".2f")),
        ("T(B,1) ms", lambda r: spread_cell(r, "step_ms", ".1f")),
        (f"T(B,{k + 1}) ms", lambda r: spread_cell(r, "verify_ms", ".1f")),
        ("Pass cost (steps)", lambda r: spread_cell(r, "pass_cost", ".2f")),
        ("KV cache MB", lambda r: _fmt(r["kv_megabytes"], ".1f")),
    ]


def sweep_table(result: dict) -> dict:
    """The gr.Dataframe value ({"headers", "data"}) of a sweep: one row per batch size."""
    columns = sweep_columns(result["k"], result["rows"], disturbance(result) is not None)
    return {"headers": [c[0] for c in columns], "data": [[cell(r) for _, cell in columns] for r in result["rows"]]}


def empty_table(k: int = DEFAULT_K) -> dict:
    """The table's headers and one empty row."""
    columns = sweep_columns(k)
    return {"headers": [c[0] for c in columns], "data": [["" for _ in columns]]}


# ------------------------------------------------------------------------------------------------ the lesson


def cost_verdict(row: dict) -> str:
    """Where a row's pass cost T(B, k+1) / T(B, 1) lies against :data:`NEAR_ONE`, read off every repeat's own cost as
    :func:`verdict` reads the speedup: "near" (every repeat at most NEAR_ONE), "costly" (every repeat above),
    "unclear" (the repeats fall on both sides) or "none" (no pass cost, or :func:`impossible` timings). A row that
    kept no repeats is read off its one pass cost."""
    if row.get("pass_cost") is None or impossible(row):
        return "none"
    costs = repeat_values(row, "pass_cost") or [row["pass_cost"]]
    if max(costs) <= NEAR_ONE:
        return "near"
    return "costly" if min(costs) > NEAR_ONE else "unclear"


def _near_one(rows: list[dict]) -> tuple[int, float] | None:
    """(largest B, the highest pass cost of any repeat up to it) while every repeat's pass cost stays at most
    :data:`NEAR_ONE` (:func:`cost_verdict`), counted from the smallest B; None when the first is not."""
    best = None
    for r in rows:
        if impossible(r):
            continue
        if cost_verdict(r) != "near":
            break
        top = max(repeat_values(r, "pass_cost") or [r["pass_cost"]])
        best = (r["batch"], max(top, best[1] if best else 0.0))
    return best


def _speedup_words(row: dict) -> str:
    """A measured speedup and its repeats for the lesson: "2.15×, every repeat faster: 1.84–2.44×", "0.62×, every
    repeat slower: …", "1.00×, repeats 0.95–1.05×", "1.60×, all repeats equal", or "1.60×, one sample" from a
    single repeat."""
    ups = repeat_speedups(row)
    if len(ups) < 2:
        return f"{row['speedup']:.2f}×, {ONE_SAMPLE}"
    if min(ups) == max(ups):
        return f"{row['speedup']:.2f}×, all repeats equal"
    spread = f"{min(ups):.2f}–{max(ups):.2f}×"
    said = verdict(row)
    if said in ("pays", "loses"):
        return f"{row['speedup']:.2f}×, every repeat {VERDICT_WORDS[said]}: {spread}"
    return f"{row['speedup']:.2f}×, repeats {spread}"


def _words(row: dict, key: str, unit: str) -> str:
    """A cell and its repeats for the lesson, the unit after the value: ``_words(row, 'pass_cost', 'steps')`` gives
    "2.0 steps (1.9–2.1)" or "2.0 steps (one sample)"; ``"tokens_per_pass", "tokens per pass"`` gives
    "2.3 tokens per pass (all repeats equal)"."""
    value, _, spread = spread_cell(row, key, ".1f").partition(" ")
    return f"{value} {unit}" + (f" {spread}" if spread else "")


def _first_clause(rows: list[dict], k: int, where: str) -> str:
    """Where the pass stays cheap, and whether speculation pays at the smallest B that was not noisy; every number
    with its repeats' range, and a pass called near 1 or costly only where every repeat is (:func:`cost_verdict`)."""
    near = _near_one(rows)
    first = next(r for r in rows if verdict(r) != "noisy")
    head = rows[0]
    cost = cost_verdict(head)
    if near:
        cheap = (f"{where} the pass cost T(B, {k + 1}) / T(B, 1) stays near 1 (every repeat at most {near[1]:.2f}) "
                 f"up to B = {near[0]}")
    elif cost in ("costly", "unclear"):
        verb = "already costs" if cost == "costly" else "costs"
        steps = _words(head, "pass_cost", "steps")
        cheap = f"{where} a pass over {head['batch']} × {k + 1} tokens {verb} {steps} at B = {head['batch']}"
    else:  # no pass cost to read: the verdict alone ("On this CPU speculation pays (…)")
        cheap = None
    costly = cost == "costly" and not near  # "already costs N steps": a pass that is not nearly free
    at = f"at B = {first['batch']} ({_speedup_words(first)}"
    tokens = _words(first, "tokens_per_pass", "tokens per pass")
    link, claim = {
        "pays": (", yet" if costly else ", so" if near else ", and",
                 f"speculation pays {at}" + (f"; {tokens} more than cover it)" if costly else ")")),
        "even": (", and", f"speculation breaks even {at})"),
        "loses": (", so" if costly else ", but",
                  f"speculation does not pay even {at}; {tokens} do not cover the pass and the drafting)"),
    }[verdict(first)]
    return f"{cheap}{link} {claim}" if cheap else f"{where} {claim}"


def _second_clause(rows: list[dict], k: int) -> str:
    """Where the speedup falls below 1 (with the pass cost there), or that it never did."""
    first = next(r for r in rows if verdict(r) != "noisy")
    cross = crossover(rows)
    if cross is not None and cross is not first:
        cost = (f"a pass over {cross['batch']} × {k + 1} tokens costs {_words(cross, 'pass_cost', 'steps')} and "
                if cross["pass_cost"] is not None else "")
        return f"; at B = {cross['batch']} {cost}the speedup falls to {_speedup_words(cross)}."
    last = [r for r in rows if verdict(r) != "noisy"][-1]
    if last is first or verdict(last) == "loses":
        return "."
    cost = (f"; a pass over {last['batch']} × {k + 1} tokens costs {_words(last, 'pass_cost', 'steps')} there"
            if last["pass_cost"] is not None else "")
    word = {"pays": "still pays", "even": "breaks even"}[verdict(last)]
    return f"; it {word} at B = {last['batch']} ({_speedup_words(last)}{cost})."


def disturbance(result: dict) -> str | None:
    """Why none of the sweep's timings can be read, or None: other programs took more than
    :data:`CONTENDED_SHARE` of the machine's CPU time while the grid and the sweep were timed (``cpu_others``, from
    :class:`CpuShare`: a descheduled torch thread slows a one-token step far more than a wide pass, so every speedup
    and pass cost is off, in a direction that flatters speculation); where that share is unknown, a load average
    above half the CPUs at the sweep's end (``environment``)."""
    share = result.get("cpu_others")
    if share is not None:
        return (f"other programs used {share:.0%} of this machine's CPU time while it was measured, which slows "
                "one-token steps more than wide passes" if share > CONTENDED_SHARE else None)
    machine = result.get("environment", {}).get("machine", {})
    load, cpus = machine.get("load_average_1min"), machine.get("cpu_count") or 1
    if load is not None and load > 0.5 * cpus:
        return (f"the machine was busy (load average {load:.1f} on {cpus} CPUs), so steps and passes were slowed "
                "unevenly")
    return None


def sweep_lesson(result: dict) -> str:
    """One plain sentence (or a few) that reads the lesson off the measured rows; noisy rows are named as such,
    never read as findings, and a sweep that other work disturbed (:func:`disturbance`) draws no conclusion."""
    rows = [r for r in result["rows"] if verdict(r) != "none"]
    if not rows:
        return "Nothing was measured yet: no batch size finished."
    disturbed = disturbance(result)
    if disturbed:
        read = "; ".join(f"B = {r['batch']}: {speedup_text(r, busy=True)}" for r in rows)
        return (f"Other programs were busy: {disturbed}, so the pass costs cannot be read, and each speedup is read "
                f"off its own repeats (a gain may be smaller on a quiet machine): {read}.")
    k, where = result["k"], f"On this {result.get('device', 'device')}"
    noisy = [r for r in rows if verdict(r) == "noisy"]
    if len(noisy) == len(rows):
        return ("The timings are too noisy to tell at every batch size (repeats on both sides of 1 that disagree by "
                f"more than {NOISY_SPREAD:.0%}, or impossible ones): the machine is busy; measure again when it is "
                "quieter.")
    sentence = _first_clause(rows, k, where) + _second_clause(rows, k)
    for r in noisy:
        ups = repeat_speedups(r)
        sentence += (f" At B = {r['batch']} the timings are impossible (a pass cheaper than a step, or a speedup "
                     "above the tokens per pass): too noisy to tell." if impossible(r) else
                     f" At B = {r['batch']} the repeats fall on both sides of 1 ({min(ups):.2f}× to "
                     f"{max(ups):.2f}×): too noisy to tell.")
    if result.get("settings", {}).get("long_prompts"):
        big = max(rows, key=lambda r: r["batch"])
        sentence += (f" With ~{LONG_PROMPT_TOKENS:,}-token prompts every forward also reads the KV cache "
                     f"({big['kv_megabytes']:,.0f} MB at B = {big['batch']}), which keeps a batch memory-bound "
                     "longer: compare with short prompts.")
    return sentence


# ------------------------------------------------------------------------------------------------ figures


def _layout(height: int) -> dict:
    return {"template": "plotly_white", "font": {"family": FONT, "size": 12}, "height": height,
            "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 90, "b": 55}, "modebar": MODEBAR,
            "legend": {"orientation": "h", "x": 0, "y": 1.12, "yanchor": "bottom", "font": {"size": 12}}}


def _two_panels(layout: dict, titles: tuple[str, str], gap: float = 0.12) -> None:
    """Two side-by-side axes (x/y and x2/y2) with their titles above them."""
    width = (1 - gap) / 2
    notes = []
    for i, title in enumerate(titles):
        n, x0 = ("" if i == 0 else "2"), i * (width + gap)
        layout[f"xaxis{n}"] = {"domain": [x0, x0 + width], "anchor": f"y{n}", "automargin": True}
        layout[f"yaxis{n}"] = {"domain": [0, 1], "anchor": f"x{n}", "automargin": True}
        notes.append({"text": f"<b>{title}</b>", "x": x0 + width / 2, "y": 1, "xref": "paper", "yref": "paper",
                      "xanchor": "center", "yanchor": "bottom", "yshift": 6, "showarrow": False,
                      "font": {"size": 14}})
    layout["annotations"] = notes


def _error_bars(rows: list[dict], color: str) -> dict:
    """From each median speedup up to the fastest repeat and down to the slowest."""
    ups = [repeat_speedups(r) for r in rows]
    return {"type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 5,
            "array": [max(u) - r["speedup"] for u, r in zip(ups, rows)],
            "arrayminus": [r["speedup"] - min(u) for u, r in zip(ups, rows)]}


def sweep_figure(result: dict) -> go.Figure:
    """Left: the measured speedup against B (median, bars spanning the repeats; noisy points hollow and grey), the
    predicted curve, a line at 1× and the batch size where speculation stops paying. Right: the pass cost
    T(B, k+1) / T(B, 1) beside the tokens per pass: speculation pays while a pass costs fewer steps than the
    tokens it emits."""
    k, rows = result["k"], [r for r in result["rows"] if verdict(r) != "none"]
    busy = disturbance(result) is not None  # other programs disturbed the sweep: repeats across 1 are too noisy
    layout = _layout(460)
    _two_panels(layout, ("Speedup over standard decoding", f"Cost of a pass over B × {k + 1} tokens"))
    sizes = [r["batch"] for r in result["rows"]] or list(BATCH_SIZES)
    ticks = {"type": "log", "tickvals": sizes, "ticktext": [str(b) for b in sizes],
             "title": {"text": "batch size B (prompts decoded together)"}}
    layout["xaxis"] |= ticks
    layout["xaxis2"] |= ticks
    layout["yaxis"] |= {"title": {"text": "× standard decoding"}, "rangemode": "tozero"}
    layout["yaxis2"] |= {"title": {"text": "one-token steps · tokens"}, "rangemode": "tozero"}
    data = [{"type": "scatter", "mode": "lines", "x": [sizes[0], sizes[-1]], "y": [1, 1],
             "name": "standard decoding (1×)", "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5},
             "hoverinfo": "skip"}]
    predicted = [r for r in result["rows"] if r.get("predicted") is not None]
    unsure = [r for r in predicted if noisy_prediction(r, result["rows"])]
    predicted = [r for r in predicted if r not in unsure]
    if unsure:
        data.append({"type": "scatter", "mode": "markers", "x": [r["batch"] for r in unsure],
                     "y": [r["predicted"] for r in unsure], "name": "predicted: too noisy (its timings disagree)",
                     "marker": {"size": 8, "symbol": "diamond-open", "color": COLORS["other"]},
                     "hovertemplate": "B = %{x}: predicted %{y:.2f}×, too noisy: its forward timings put a pass below "
                                      "a step or far from the sweep's own pass cost<extra></extra>"})
    if predicted:
        data.append({"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in predicted],
                     "y": [r["predicted"] for r in predicted], "name": "predicted from B = 1 and T(B, n)",
                     "line": {"color": COLORS["expected"], "dash": "dash", "width": 2}, "marker": {"size": 6},
                     "error_y": _prediction_bars(predicted), "text": [predicted_cell(r) for r in predicted],
                     "hovertemplate": "B = %{x}: predicted %{text}× (a model; the range from its inputs' "
                                      "spread)<extra></extra>"})
    data += _measured_traces(rows, busy)
    cross = crossover(rows)
    if cross is not None:
        data.append({"type": "scatter", "mode": "markers", "x": [cross["batch"]], "y": [cross["speedup"]],
                     "name": f"speculation stops paying (B = {cross['batch']})",
                     "marker": {"size": 20, "symbol": "circle-open", "color": COLORS["rejected"],
                                "line": {"width": 3}}, "hoverinfo": "skip"})
        layout["annotations"].append({
            "text": f"below 1× from B = {cross['batch']}", "x": math.log10(cross["batch"]), "y": cross["speedup"],
            "xref": "x", "yref": "y", "ax": -40, "ay": 40, "showarrow": True, "arrowcolor": COLORS["rejected"],
            "font": {"size": 12, "color": COLORS["rejected"]}, "bgcolor": "rgba(255,255,255,0.85)"})
    data += _cost_traces(result["rows"], k, sizes)
    return go.Figure({"data": data, "layout": layout})


def _prediction_bars(rows: list[dict]) -> dict:
    """Error bars from each predicted speedup to the ends of its inputs' range (none where the row kept none)."""
    def reach(r: dict, end: str, sign: int) -> float:
        bound = r.get(f"predicted_{end}")
        return 0.0 if bound is None else max(0.0, sign * (bound - r["predicted"]))

    return {"type": "data", "symmetric": False, "color": COLORS["expected"], "thickness": 1.2, "width": 4,
            "array": [reach(r, "high", 1) for r in rows], "arrayminus": [reach(r, "low", -1) for r in rows]}


def _measured_traces(rows: list[dict], busy: bool) -> list[dict]:
    """The left panel's measured speedups: the rows that are findings on a line (median, bars spanning the repeats),
    the too-noisy ones as hollow grey points (all of them when other programs were ``busy``)."""
    sure = [r for r in rows if verdict(r, busy) != "noisy"]
    noisy = [r for r in rows if verdict(r, busy) == "noisy"]
    traces = []
    if sure:
        traces.append({"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in sure],
                       "y": [r["speedup"] for r in sure], "name": f"measured (median of {REPEATS}; bars: repeats)",
                       "line": {"color": COLORS["speculative"], "width": 3}, "marker": {"size": 9},
                       "error_y": _error_bars(sure, COLORS["speculative"]),
                       "text": [speedup_text(r, busy) for r in sure],
                       "hovertemplate": "B = %{x}: %{text}<extra></extra>"})
    if noisy:
        why = "repeats on both sides of 1" + (", other programs busy" if busy else "")
        traces.append({"type": "scatter", "mode": "markers", "x": [r["batch"] for r in noisy],
                       "y": [r["speedup"] for r in noisy], "name": f"too noisy to tell ({why})",
                       "marker": {"size": 10, "symbol": "circle-open", "color": COLORS["other"], "line": {"width": 2}},
                       "error_y": _error_bars(noisy, COLORS["other"]), "text": [speedup_text(r, busy) for r in noisy],
                       "hovertemplate": "B = %{x}: %{text}<extra></extra>"})
    return traces


def _repeat_bars(rows: list[dict], figure: str, color: str) -> dict:
    """Error bars from each row's ``figure`` up to its highest repeat and down to its lowest (:func:`repeat_values`;
    none on a row with fewer than two repeats)."""
    spans = [repeat_values(r, figure) for r in rows]
    return {"type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 5,
            "array": [max(0.0, max(v) - r[figure]) if len(v) > 1 else 0.0 for v, r in zip(spans, rows)],
            "arrayminus": [max(0.0, r[figure] - min(v)) if len(v) > 1 else 0.0 for v, r in zip(spans, rows)]}


def _cost_traces(rows: list[dict], k: int, sizes: list[int]) -> list[dict]:
    """The right panel: pass cost and tokens per pass against B (each with bars spanning its repeats, the hover
    giving the range), and the one-step line."""
    cost = [r for r in rows if r.get("pass_cost") is not None]
    tpp = [r for r in rows if r.get("tokens_per_pass") is not None]
    return [
        {"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in cost],
         "y": [r["pass_cost"] for r in cost], "name": f"pass cost T(B, {k + 1}) / T(B, 1) (bars: repeats)",
         "line": {"color": COLORS["verify"], "width": 3}, "marker": {"size": 8}, "xaxis": "x2", "yaxis": "y2",
         "error_y": _repeat_bars(cost, "pass_cost", COLORS["verify"]),
         "text": [spread_cell(r, "pass_cost", ".2f") for r in cost],
         "hovertemplate": "B = %{x}: a pass costs %{text} steps<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": [r["batch"] for r in tpp],
         "y": [r["tokens_per_pass"] for r in tpp], "name": "tokens per pass (emitted)",
         "line": {"color": COLORS["accepted"], "width": 2, "dash": "dash"}, "marker": {"size": 7},
         "error_y": _repeat_bars(tpp, "tokens_per_pass", COLORS["accepted"]),
         "text": [spread_cell(r, "tokens_per_pass", ".2f") for r in tpp],
         "xaxis": "x2", "yaxis": "y2", "hovertemplate": "B = %{x}: %{text} tokens per pass<extra></extra>"},
        {"type": "scatter", "mode": "lines", "x": [sizes[0], sizes[-1]], "y": [1, 1], "xaxis": "x2", "yaxis": "y2",
         "name": "one step (free verification)", "showlegend": False,
         "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}, "hoverinfo": "skip"},
    ]


# ------------------------------------------------------------------------------------------------ files


DEFINITIONS = {
    "batch": "B: prompts decoded together (the example prompts recycled to fill B rows)",
    "standard_tps / speculative_tps": "tokens per second over all rows after the prefill, each run on its own "
                                      "clock; median of the repeats",
    "<figure>_min / <figure>_max": "the lowest and highest of the repeats' own values of that figure (tokens/s, "
                                   "tokens per pass, T(B, 1), T(B, k+1) and the pass cost per repeat); equal with "
                                   "one repeat",
    "speedup": "speculative ÷ standard tokens/s (medians); speedup_min / speedup_max: the repeats' own ratios",
    "verdict": f"pays / loses (every repeat above / below 1, however far apart, however busy the machine), even (the "
               f"repeats on both sides of 1 within {NOISY_SPREAD:.0%} of each other, the machine quiet), or noisy (on "
               f"both sides of 1 and spread more than {NOISY_SPREAD:.0%} or the machine busy, or impossible timings: "
               "too noisy to tell)",
    "predicted": "tokens per pass at B = 1 × T(B, 1) / (T(B, k+1) + B × drafting per row at B = 1): a model",
    "predicted_low / predicted_high": "the same formula over its inputs' spread: the B = 1 repeats' tokens per pass "
                                      "and T(B, 1), T(B, k+1) from the grid's fastest and slowest forward (or the "
                                      "sweep's repeats); low = fewest tokens × fastest step ÷ slowest pass",
    "tokens_per_pass": "emitted tokens ÷ target passes of the speculative runs, bonus included",
    "step_ms / verify_ms": "T(B, 1) / T(B, k+1): median ms of the runs' own full-batch forwards",
    "pass_cost": "T(B, k+1) / T(B, 1): one verification pass in one-token steps",
    "kv_megabytes": "the batch's KV cache at its longest row's end (keys and values, all layers)",
    "other_programs_cpu_share": f"share (0..1) of all CPUs' time that other programs used while the grid and the "
                                f"sweep were timed; above {CONTENDED_SHARE:g} the lesson reads no pass cost, and "
                                "repeats on both sides of 1 are too noisy",
}
CSV_COLUMNS = ("batch", "standard_tps", "standard_tps_min", "standard_tps_max", "speculative_tps",
               "speculative_tps_min", "speculative_tps_max", "speedup", "speedup_min", "speedup_max", "verdict",
               "predicted", "predicted_low", "predicted_high", "tokens_per_pass", "tokens_per_pass_min",
               "tokens_per_pass_max", "step_ms", "step_ms_min", "step_ms_max", "verify_ms", "verify_ms_min",
               "verify_ms_max", "pass_cost", "pass_cost_min", "pass_cost_max", "kv_megabytes")


def csv_rows(result: dict) -> list[dict]:
    """The rows with the repeats' spread (``<figure>_min`` / ``_max`` of the speedup and every one of
    :data:`REPEATED_FIGURES`) and the verdict added (all "noisy" in a sweep other programs disturbed)."""
    busy, out = disturbance(result) is not None, []
    for r in result["rows"]:
        spans = {"speedup": repeat_speedups(r)} | {f: repeat_values(r, f) for f in REPEATED_FIGURES}
        ends = {f"{f}_{end}": (pick(v) if v else None) for f, v in spans.items()
                for end, pick in (("min", min), ("max", max))}
        out.append(r | ends | {"verdict": verdict(r, busy)})
    return out


def sweep_csv(result: dict) -> str:
    """The sweep as CSV, columns :data:`CSV_COLUMNS` (an empty cell: not measured)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in csv_rows(result):
        writer.writerow(["" if row.get(c) is None else row[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def sweep_json(result: dict) -> dict:
    """Everything needed to read and reproduce the sweep: settings, versions, machine, device, definitions, rows
    and the forward grid (if timed)."""
    env = result.get("environment", {})
    return {"benchmark": "batching", "settings": result.get("settings", {}), "k": result["k"],
            "max_new_tokens": result["max_new_tokens"], "repeats": REPEATS,
            "prompt_tokens": result.get("prompt_tokens"), "versions": env.get("versions", {}),
            "machine": env.get("machine", {}), "device": env.get("device", {}), "target": env.get("target", {}),
            "definitions": DEFINITIONS, "stopped": result["stopped"],
            "crossover": None if disturbance(result) else (crossover(result["rows"]) or {}).get("batch"),
            "lesson": sweep_lesson(result),
            "other_programs_cpu_share": result.get("cpu_others"),
            "rows": csv_rows(result), "grid": result.get("grid"), "wall_s": result.get("wall_s")}


def write_sweep_files(result: dict, folder: str | None = None) -> tuple[str, str]:
    """Write the sweep as CSV and JSON into a fresh temporary folder (or ``folder``); returns both paths."""
    return write_csv_and_json("batching", sweep_csv(result), sweep_json(result), folder)


# ------------------------------------------------------------------------------------------------ handlers


class _Shown:
    """Turns a job's messages into the progress bar (``gr.Progress`` works in the handler's thread only) and a
    status line about every :data:`STATUS_INTERVAL_S` seconds: the step, the seconds so far and, once known, the
    estimate. ``out(status)`` makes the handler's output tuple."""

    def __init__(self, progress, out: Callable[[str], tuple], verb: str) -> None:
        self.progress, self.out, self.verb = progress, out, verb
        self.started, self.last, self.message, self.estimate = time.monotonic(), 0.0, "", None

    def waiting(self, place) -> tuple:
        """The status while in line for the device."""
        return self.out(device.waiting_status(place.ahead, place.holder))

    def show(self, item) -> tuple | None:
        """The output tuple for one item of the job (None: nothing new to show)."""
        kind, payload = item if item is not None else ("tick", None)
        if kind == "estimate":
            self.estimate, self.last = payload, 0.0
        elif kind == "progress":
            fraction, message = payload
            self.progress(fraction, desc=message)
            if message != self.message:
                self.message, self.last = message, 0.0
        now = time.monotonic()
        if now - self.last < STATUS_INTERVAL_S:
            return None
        self.last = now
        about = (f" of about {self.estimate:.0f} s, estimated from forwards timed here just now"
                 if self.estimate is not None else "")
        return self.out(render.status_html(f"{self.verb}… {self.message} ({now - self.started:.0f} s{about})",
                                           "busy"))


def _sweep_out(status=None, lesson=None, chart=None, table=None, csv_file=None, json_file=None) -> tuple:
    """An output tuple in :data:`SWEEP_OUTPUTS` order; None leaves a component as it is."""
    values = (status, lesson, None if chart is None else gr.update(value=chart, visible=True), table, csv_file,
              json_file)
    return tuple(gr.skip() if v is None else v for v in values)


def lesson_html(sentence: str) -> str:
    """The lesson sentence as a highlighted paragraph (escaped)."""
    import html

    return f"<p class='batching-lesson'>{html.escape(sentence)}</p>" if sentence else ""


def measure(drafter, k, max_new_tokens, batch_sizes, prompt_length, predicted, target, draft_model,
            progress=gr.Progress(), request: gr.Request = None):
    """The Measure button: validate, wait for the device, run the sweep there; yields :data:`SWEEP_OUTPUTS`
    tuples (status updates, then the table, chart, lesson and both files, also after a Stop)."""
    try:
        s = parse_sweep(drafter, k, max_new_tokens, batch_sizes, prompt_length, predicted, target, draft_model)
    except (InputError, PolicyError) as error:
        yield _sweep_out(status=report("checking the batching inputs", error))
        return
    job = device.start(SWEEPS, request, f"the batch-size sweep is running on '{s.models.target}'")
    shown = _Shown(progress, lambda status: _sweep_out(status=status), "Measuring")
    try:
        yield _sweep_out(status=render.status_html("Starting the batch-size sweep…", "busy"))
        result = None
        if (yield from relay(job.turn(), shown.waiting)):
            result = yield from relay(job.call(_sweep_work, job, s, stoppable=True), shown.show)
        yield _swept(result, time.monotonic() - shown.started)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _sweep_out(status=report("batch sweep", error))
    finally:
        job.release()  # also when Gradio closes this handler: the sweep stops before its next forward


def _swept(result: dict | None, seconds: float) -> tuple:
    """The final outputs: table, chart, lesson and files; or why there is nothing to show."""
    if result is None or not result["rows"]:
        return _sweep_out(status=render.status_html("Stopped before the first batch size finished: nothing to "
                                                    "show.", "info"))
    result["wall_s"] = round(seconds, 1)
    csv_path, json_path = write_sweep_files(result)
    busy = disturbance(result)
    sizes = ", ".join(str(r["batch"]) for r in result["rows"])
    head = (f"Stopped after B = {sizes} ({seconds:.0f} s); the downloads hold those." if result["stopped"] else
            f"Measured B = {sizes} in {seconds:.0f} s on {result.get('label', 'the target')} ({result['device']}): "
            f"k = {result['k']}, {result['max_new_tokens']} new tokens per row, {REPEATS} interleaved repeats per "
            "B, medians.")
    status = render.status_html(head + (f" · warning: {busy}: a gain may be smaller on a quiet machine" if busy
                                        else ""),
                                "info" if result["stopped"] else "done")
    return _sweep_out(status, lesson_html(sweep_lesson(result)), sweep_figure(result), sweep_table(result),
                      gr.update(value=csv_path, visible=True), gr.update(value=json_path, visible=True))


def stop_sweep(request: gr.Request = None) -> str:
    """The sweep's Stop button: flag this session's sweep (it ends before its next forward and shows the batch
    sizes that finished)."""
    SWEEPS.cancel(request)
    return render.status_html("Stopping…", "info")


def stop_check(request: gr.Request = None) -> str:
    """The check's Stop button: flag this session's sampling check."""
    CHECKS.cancel(request)
    return render.status_html("Stopping…", "info")


def release_session(request: gr.Request = None) -> None:
    """When a browser tab closes: cancel that session's sweep and check (and no one else's)."""
    SWEEPS.cancel_session(request)
    CHECKS.cancel_session(request)


# ------------------------------------------------------------------------------------------------ the check


def _check_work(job: Job, c: CheckSettings) -> dict:
    """In the job's thread: load, encode the prompt, run the sampling check (the job's flag stops it before its
    next forward). Returns sampling_check's result with "labels" (pair -> text), "first_text", "tally" (what the
    drafter proposed) and "label" added."""
    from specviz.models import context_window, encode_prompt

    job.say(("progress", (0.0, f"Loading the target {c.models.target}…")))
    loaded = load_target(c.models.target, progress=lambda message: job.say(("progress", (0.0, message))))
    tally: dict = {}
    make = drafter_factory(c.models, loaded, tally)
    tally.clear()  # the factory's first drafter only proved it can be made
    prompt = encode_prompt(loaded.tokenizer, c.prompt)
    window = context_window(loaded)
    if window is not None and len(prompt) + CHECK_TOKENS + CHECK_K > window:
        raise InputError(f"The prompt has {len(prompt):,} tokens; {loaded.label} reads at most {window:,}.")
    config = GenerationConfig(max_new_tokens=CHECK_TOKENS, k=CHECK_K,
                              sampling=SamplingConfig(temperature=c.temperature, seed=0))
    counter = _ForwardCounter(job, c.n)
    result = sampling_check(loaded, prompt, config, make, n=c.n, batch=CHECK_BATCH, broken=c.broken,
                            cancel=counter)
    result.update(tally=dict(tally), label=loaded.label, temperature=c.temperature,
                  first_text=loaded.tokenizer.decode([result["first"]]),
                  labels=pair_labels(loaded.tokenizer, result))
    return result


class _ForwardCounter:
    """The check's cancel callable: the job's flag, and a progress message from the forwards started so far
    (about 3 per batch of :data:`CHECK_BATCH` runs, standard then speculative)."""

    def __init__(self, job: Job, n: int) -> None:
        self.job, self.calls = job, 0
        self.expected = 2 * math.ceil(n / CHECK_BATCH) * CHECK_TOKENS

    def __call__(self) -> bool:
        self.calls += 1
        fraction = min(self.calls / self.expected, 1.0)
        side = "standard" if fraction < 0.5 else "speculative"
        self.job.say(("progress", (0.9 * fraction, f"sampling {side} runs, {CHECK_BATCH} at a time")))
        return self.job.should_stop()


def pair_labels(tokenizer, result: dict) -> dict[tuple[int, int], str]:
    """A readable, unique label per (token 2, token 3) pair counted in either sample: the text the pair adds after
    the first token (quoted, newlines shown as ⏎)."""
    first = result["first"]
    head = tokenizer.decode([first])
    labels: dict[tuple[int, int], str] = {}
    seen: dict[str, int] = {}
    for pair in set(result["standard"]) | set(result["speculative"]):
        whole = tokenizer.decode([first, *pair])
        piece = whole[len(head):] if whole.startswith(head) else tokenizer.decode(list(pair))
        label = "“" + piece.replace("\n", "⏎") + "”"
        seen[label] = seen.get(label, 0) + 1
        labels[pair] = label if seen[label] == 1 else f"{label} #{seen[label]}"
    return labels


def check(prompt, temperature, drafter, n, broken, target, draft_model, progress=gr.Progress(),
          request: gr.Request = None):
    """The Check button: validate, wait for the device, run the sampling check there; yields
    :data:`CHECK_OUTPUTS` tuples."""
    try:
        c = parse_check(prompt, temperature, drafter, n, broken, target, draft_model)
    except (InputError, PolicyError) as error:
        yield _check_out(status=report("checking the sampling check's inputs", error))
        return
    job = device.start(CHECKS, request, f"a sampling check is running on '{c.models.target}'")
    shown = _Shown(progress, lambda status: _check_out(status=status), "Checking")
    cpu = CpuShare()
    try:
        yield _check_out(status=render.status_html(f"Starting: {c.n} standard and {c.n} speculative runs…", "busy"))
        result = None
        if (yield from relay(job.turn(), shown.waiting)):
            result = yield from relay(job.call(_check_work, job, c, stoppable=True), shown.show)
        yield _checked(result, c, time.monotonic() - shown.started, cpu)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _check_out(status=report("sampling check", error))
    finally:
        job.release()


def _check_out(status=None, lesson=None, chart=None, stats=None) -> tuple:
    """An output tuple in :data:`CHECK_OUTPUTS` order; None leaves a component as it is."""
    values = (status, lesson, None if chart is None else gr.update(value=chart, visible=True), stats)
    return tuple(gr.skip() if v is None else v for v in values)


def _checked(result: dict | None, c: CheckSettings, seconds: float, cpu: CpuShare | None = None) -> tuple:
    """The check's final outputs, or "Stopped." (``cpu``: started with the check, for the busy warning)."""
    if result is None:
        return _check_out(status=render.status_html("Stopped.", "info"))
    busy = busy_machine_warning(cpu)
    verifier = "a broken verifier that accepts every draft" if c.broken else "the rejection-sampling verifier"
    status = render.status_html(f"Checked in {seconds:.0f} s on {result['label']}: {c.n} standard and {c.n} "
                                f"speculative runs at temperature {c.temperature:g}, {verifier}."
                                + (f" · {busy}" if busy else ""), "done")
    return _check_out(status, lesson_html(check_lesson(result)), check_figure(result), check_stats_html(result))


# ------------------------------------------------------------------------------------------------ check views


def counted(result: dict, side: str) -> int:
    """How many of the side's runs were counted (their first token was the most frequent one)."""
    return sum(result[side].values())


def p_text(p: float) -> str:
    """A p-value as people write it: "p < 0.001", "p = 0.004", "p = 0.43"."""
    if p != p:
        return "p = –"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}" if p < LEVEL else f"p = {p:.2f}"


def conditioning_line(result: dict) -> str:
    """What was counted, in one line."""
    return (f"Counted: the runs whose first token (the prefill's, which never meets the verifier) was the most "
            f"frequent one, “{result['first_text']}”: {counted(result, 'standard')} of {result['n']} standard and "
            f"{counted(result, 'speculative')} of {result['n']} speculative runs; the test compares the next two "
            "tokens, where the drafts are verified.")


def testable(test: tuple) -> bool:
    """Whether a chi-square test (statistic, p, dof) ran: at least two cells were frequent enough (dof > 0 and a
    p-value); :func:`specviz.analysis.batching.sampling_check` returns (nan, nan, 0) for one that had too few."""
    stat, p, dof = test
    return dof > 0 and p == p


def too_few(result: dict) -> bool:
    """Whether the check has too few counted runs to test against the exact law (either side's goodness of fit did
    not run): then no p-value is read or shown at all (:func:`check_stats_html`, :func:`check_lesson`)."""
    return not (testable(result["fit_standard"]) and testable(result["fit_speculative"]))


def runs_needed(result: dict) -> tuple[int, int] | None:
    """(counted runs per side, N runs per side) the goodness of fit needs on this prompt: two pairs of the exact law
    expected at least :data:`MIN_EXPECTED` times among the counted runs, so the second most likely pair (probability
    p2) needs 5 / p2 counted runs; N scales that by the share of runs counted (the side with fewer). None when the
    exact law has fewer than two pairs."""
    ranked = sorted(result["exact"].values(), reverse=True)
    if len(ranked) < 2 or ranked[1] <= 0:
        return None
    need = math.ceil(MIN_EXPECTED / ranked[1] - 1e-9)
    shares = [counted(result, side) / result["n"] for side in ("standard", "speculative")]
    share = min(shares) if min(shares) > 0 else max(max(shares), 1 / result["n"])
    return need, math.ceil(need / share - 1e-9)


def too_few_sentence(result: dict) -> str:
    """Why nothing was tested and how many runs would be: the counted runs, the second most likely pair and the N
    it needs (beyond :data:`MAX_N`: what else to change)."""
    got = (f"{counted(result, 'standard')} standard and {counted(result, 'speculative')} speculative runs of "
           f"{result['n']} were counted")
    needed = runs_needed(result)
    if needed is None:
        return (f"Too few to test, so no p-value: {got}, and the target's exact law has fewer than two likely pairs "
                "here; pick a more open prompt, or raise the temperature.")
    need, n = needed
    second = sorted(result["exact"], key=lambda c: -result["exact"][c])[1]
    label = result.get("labels", {}).get(second, "the second most likely pair")
    head = (f"Too few to test, so no p-value: {got}; the chi-square test needs two pairs expected at least "
            f"{MIN_EXPECTED} times, and the second most likely, {label} (p = {result['exact'][second]:.3f}), gets "
            f"there at {need:,} counted runs")
    if n <= MAX_N:
        return f"{head}: about N = {n:,} runs per side. Raise N to {n:,} or more."
    return (f"{head}: about N = {n:,} runs per side, more than this check allows ({MAX_N:,}). Pick a prompt or a "
            "temperature that makes the two likeliest pairs more frequent.")


def check_lesson(result: dict) -> str:
    """The plain sentence of the check: what the p-values say, given the verifier used and what was drafted."""
    fit_std, fit_spec, same = (result[key][1] for key in ("fit_standard", "fit_speculative", "homogeneity"))
    if not result.get("tally", {}).get("proposed", 1):
        return ("The drafter proposed nothing in these runs, so every speculative run was standard decoding and "
                "there is nothing to test: pick a drafter that drafts here, or a prompt it can copy from (the "
                "n-gram drafter copies what followed the same token earlier in the prompt).")
    if too_few(result):
        return too_few_sentence(result)
    if result["broken"]:
        if fit_spec < LEVEL:
            return (f"{p_text(fit_spec)} (< 0.01): accepting every draft makes the output follow the drafter, and "
                    "the test catches it.")
        return (f"{p_text(fit_spec)}: even the broken verifier passed here: the drafter's guesses happen to match "
                "what the target samples, or N is too small to tell; pick a drafter that disagrees, or raise N.")
    if fit_spec >= LEVEL and fit_std >= LEVEL:
        counted_runs = min(counted(result, "standard"), counted(result, "speculative"))
        return (f"No evidence of a difference: neither sample departs from the target's exact probabilities "
                f"({p_text(fit_std)} and {p_text(fit_spec)}; between them "
                f"{p_text(same) if testable(result['homogeneity']) else 'too few runs to compare'}). A test does not "
                "prove "
                f"equality: with {counted_runs} counted runs per side it would catch a gross error (as the broken "
                "verifier shows) but not a small one; raise N to look closer.")
    if fit_std >= LEVEL:
        return (f"The speculative sample disagrees with the exact law ({p_text(fit_spec)}) while the standard one "
                f"agrees ({p_text(fit_std)}): at the 1% level that happens by chance once in a hundred checks; "
                "run it again with a larger N, and if it persists the sampler is wrong.")
    return (f"The standard sample disagrees with the exact law ({p_text(fit_std)}; the speculative one: "
            f"{p_text(fit_spec)}): standard decoding samples the target directly, so this is one of the checks "
            "that fail by chance at the 1% level, or the exact law is off; run it again with a larger N.")


def _cells(result: dict) -> list[tuple[int, int]]:
    """The pairs shown as bars: the most frequent in both samples together."""
    both = {c: result["standard"].get(c, 0) + result["speculative"].get(c, 0)
            for c in set(result["standard"]) | set(result["speculative"])}
    return sorted(both, key=lambda c: (-both[c], c))[:SHOWN_PAIRS]


def check_figure(result: dict) -> go.Figure:
    """Two horizontal histograms side by side (standard, speculative): the counted runs per (token 2, token 3)
    pair, the most frequent :data:`SHOWN_PAIRS` then "all other pairs", each with the exact law's expected count
    (the target's probability × the runs counted) as a marker; both on one x scale (0 to the largest bar or marker
    of either, matched when zoomed)."""
    cells = _cells(result)
    labels = [result["labels"][c] for c in cells] + ["all other pairs"]
    broken = " (broken verifier)" if result["broken"] else ""
    layout = _layout(120 + 30 * len(labels))
    _two_panels(layout, ("Standard decoding", f"Speculative decoding{broken}"))
    data, top = [], 1.0  # top: the largest bar or marker of either panel, for one x scale shared by both
    for i, (side, color) in enumerate((("standard", COLORS["baseline"]), ("speculative", COLORS["speculative"]))):
        n = "" if i == 0 else "2"
        total = counted(result, side)
        observed = [result[side].get(c, 0) for c in cells]
        observed.append(total - sum(observed))
        exact = [result["exact"].get(c) for c in cells]
        rest = 1.0 - sum(p for p in exact if p is not None)
        expected = [None if p is None else p * total for p in exact] + [max(0.0, rest) * total]
        top = max(top, *observed, *(e for e in expected if e is not None))
        data.append({"type": "bar", "orientation": "h", "y": labels, "x": observed, "name": "runs counted",
                     "legendgroup": "counted", "showlegend": i == 1, "marker": {"color": color}, "opacity": 0.8,
                     "xaxis": f"x{n}", "yaxis": f"y{n}",
                     "hovertemplate": "%{y}: %{x} runs<extra>" + side + "</extra>"})
        data.append({"type": "scatter", "mode": "markers", "y": labels, "x": expected,
                     "name": "expected: target's exact probability × runs counted", "legendgroup": "exact",
                     "showlegend": i == 1, "xaxis": f"x{n}", "yaxis": f"y{n}",
                     "marker": {"symbol": "diamond", "size": 11, "color": "#ffffff",
                                "line": {"color": "#24292f", "width": 2}},
                     "hovertemplate": "%{y}: %{x:.1f} expected<extra>exact law</extra>"})
        layout[f"yaxis{n}"] |= {"type": "category", "autorange": "reversed", "tickfont": {"size": 11}}
        layout[f"xaxis{n}"] |= {"title": {"text": f"runs (of {total} counted)"}, "rangemode": "tozero"}
    layout["yaxis2"]["showticklabels"] = True
    shared = [0, top * 1.08]  # one scale for both panels, so that their bars compare by length
    layout["xaxis"] |= {"range": shared, "autorange": False}
    layout["xaxis2"] |= {"range": shared, "autorange": False, "matches": "x"}
    return go.Figure({"data": data, "layout": layout})


def check_stats_html(result: dict) -> str:
    """The statistics: each sample's chi-square goodness of fit against the exact law, the homogeneity test
    between them, what the drafter proposed, and what was counted."""
    import html

    untested = too_few(result)  # then no test is read: every row says so, none prints a p-value

    def row(name: str, test: tuple, runs: str) -> str:
        stat, p, dof = test
        if untested or not testable(test):
            cells = (name, runs, "–", "–", "too few to test")
        else:
            cells = (name, runs, f"{stat:.1f}", str(dof), p_text(p).removeprefix("p "))
        return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"

    tally = result.get("tally", {})
    body = (row("standard vs the exact law", result["fit_standard"], f"{counted(result, 'standard')} of {result['n']}")
            + row("speculative vs the exact law", result["fit_speculative"],
                  f"{counted(result, 'speculative')} of {result['n']}")
            + row("standard vs speculative (homogeneity)", result["homogeneity"], "both"))
    drafted = (f"The drafter proposed {render.plural(tally.get('proposed', 0), 'token')} in "
               f"{render.plural(tally.get('passes', 0), 'pass', 'passes')} "
               f"(each run drafts at most {render.plural(CHECK_TOKENS - 2, 'token')}, the second: a run makes "
               f"{CHECK_TOKENS} tokens and the last is the target's own)." if tally else "")
    table = (f"<table class='batching-stats'><tr><th>chi-square test</th><th>runs counted</th><th>χ²</th>"
             f"<th>dof</th><th>p</th></tr>{body}</table>")
    return (render.scroll_box(table, "Chi-square tests") +
            f"<p class='batching-note'>{html.escape(conditioning_line(result))} {html.escape(drafted)} Cells "
            f"expected fewer than {MIN_EXPECTED} times are pooled into one; p below 0.01 rejects.</p>")


# ------------------------------------------------------------------------------------------------ layout

INTRO = (
    "<div class='batching-intro'><p><b>Where the free verification runs out.</b> A decode step of a few rows waits "
    "on memory (reading the weights), so verifying k+1 tokens per row costs about one step: speculation's profit. "
    "A batch spends the same slack: B rows per forward also cost little more than one. Together they run out of "
    "it: at some B a forward over B × (k+1) tokens is bound by arithmetic, a pass costs clearly more than a step, "
    "and speculation stops paying (serving stacks turn it down as the batch grows). Long prompts add KV-cache "
    "reads to every forward, which keeps a batch memory-bound longer (MagicDec).</p></div>"
)
SWEEP_NOTE = (
    "<div class='batching-note'>Per batch size B, the same example prompts (recycled to B rows) are decoded by "
    f"standard and by speculative decoding (greedy), {REPEATS} interleaved repeats, each timed on the batch's own "
    "clock after the prefill. Every measured figure is a median (tokens/s: of the repeats; T: of all the runs' "
    "forwards; the pass cost: their ratio), <b>in brackets the lowest and highest of the repeats' own</b> (“all "
    "repeats equal” where they agree exactly, “one sample” from one repeat). <b>Speedup</b> = speculative ÷ "
    "standard tokens/s (medians; in brackets the repeats' own ratios; “faster” or “slower” when every repeat is, "
    f"however far apart and however busy the machine; repeats on both sides of 1 spread wider than "
    f"{NOISY_SPREAD:.0%}, or on a busy machine: “too noisy to tell”, the median still given; the same rule as the "
    "Live headline). "
    "<b>Pass cost</b> = T(B, k+1) ÷ T(B, 1) from the runs' own forwards. <b>Predicted (model)</b>: a model's "
    "estimate, not a measurement, = tokens per pass at B = 1 × T(B, 1) ÷ (T(B, k+1) + B × drafting per row), T from "
    "the forward grid when timed; in brackets the same over its inputs' spread (“too noisy” above the tokens per "
    "pass: the grid timed a pass cheaper than a step). <b>KV cache</b>: the batch's keys and values at its longest "
    "row's end.</div>"
)
CHECK_NOTE = (
    "<div class='batching-note'>N sampled runs of 3 tokens each way (16 at a time). The first token comes from the "
    "prefill and never meets the verifier, so the check keeps the runs whose first token was the most frequent one "
    "and counts the next two tokens, where a draft is verified; it compares them with the target's exact "
    "probabilities (chi-square) and with each other. The default prompt starts with “The sky”, so the n-gram "
    "drafter guesses “ sky” after a first “The”: a guess the target seldom makes.</div>"
)


ENTER_COMMITS_JS = enter_commits_js("#batching-controls, #batching-check-controls")
"""On page load: Enter in a number box of this tab's controls (the N box) commits it as leaving the box does
(:func:`app.messages.enter_commits_js`): it gets its check (:func:`app.messages.tell_when_invalid`) at once. The
sliders' own boxes (k, max new tokens, temperature) commit when they are left, where
:func:`app.messages.tell_when_clamped` says a number out of range (Enter there clamped silently)."""


def build_tab(target: str = "embedded") -> None:
    """Lay out the Batching tab inside the current ``gr.Tab`` and wire its events; ``target`` is the default
    target of both parts."""
    gr.HTML(INTRO, elem_id="batching-intro")
    with gr.Accordion("Target and draft model", open=False, elem_id="batching-models"):
        with gr.Row():
            target_box = gr.Textbox(target, label="Target model", elem_id="batching-target",
                                    info="'embedded', a hub id or a local folder")
            draft_model = gr.Textbox("", label="Draft model (for the 'Draft model' drafter)",
                                     elem_id="batching-draft-model", placeholder="hub id or local folder")
    _sweep_section(target_box, draft_model)
    _check_section(target_box, draft_model)
    gr.context.Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")


def _sweep_section(target_box: gr.Textbox, draft_model: gr.Textbox) -> None:
    """The speculation × batch size part: its controls, results and events."""
    gr.HTML("<h3 class='batching-heading'>Speculation × batch size</h3>")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="batching-controls"):
            drafter = gr.Dropdown(drafter_menu(), value=DEFAULT_DRAFTER, label="Drafter", elem_id="batching-drafter")
            from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

            add_about(drafter, "batching-drafter-about", DEFAULT_DRAFTER)
            k = gr.Slider(1, MAX_K, value=DEFAULT_K, step=1, label="Draft length k", elem_id="batching-k")
            max_new = gr.Slider(4, MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=4,
                                label="Max new tokens per row", elem_id="batching-max-new-tokens")
            sizes = gr.CheckboxGroup([(str(b), b) for b in BATCH_SIZES], value=list(BATCH_SIZES),
                                     label="Batch sizes B", elem_id="batching-sizes")
            length = gr.Radio([(label, key) for label, key in PROMPT_LENGTHS], value=SHORT, label="Prompts",
                              elem_id="batching-prompt-length")
            predicted = gr.Checkbox(True, label="Predicted curve (times T(B, 1) and T(B, k+1) first)",
                                    elem_id="batching-predicted")
            with gr.Row():
                measure_btn = gr.Button("Measure", variant="primary", elem_id="batching-measure", scale=2,
                                        min_width=100)  # with Stop beside it in the 300 px column
                stop_btn = gr.Button("Stop", variant="stop", elem_id="batching-stop", scale=1, min_width=80)
        with gr.Column(scale=3, min_width=600, elem_id="batching-results"):
            status = gr.HTML(render.status_html("Pick a drafter, k and batch sizes, then press Measure: a few forwards "
                                                "are timed first to tell how long it will take.", "info"),
                             elem_id="batching-status")
            lesson = gr.HTML("", elem_id="batching-lesson")
            chart = gr.Plot(elem_id="batching-chart", show_label=False, visible=False)
            table = gr.Dataframe(empty_table(), label="Per batch size", interactive=False, elem_id="batching-table",
                                 elem_classes=["sv-wide-table", "sv-wrap-cells"], wrap=True)
            with gr.Row(elem_id="batching-downloads"):
                csv_file = gr.File(label="Results (CSV)", elem_id="batching-csv", interactive=False, visible=False)
                json_file = gr.File(label="Results, settings, versions and device (JSON)", elem_id="batching-json",
                                    interactive=False, visible=False)
            gr.HTML(SWEEP_NOTE, elem_id="batching-definitions")
    measure_btn.click(measure, inputs=[drafter, k, max_new, sizes, length, predicted, target_box, draft_model],
                      outputs=[status, lesson, chart, table, csv_file, json_file], api_name="batching_measure",
                      show_progress="full", show_progress_on=[status], concurrency_limit=4, concurrency_id="arena")
    stop_btn.click(stop_sweep, outputs=[status], queue=False, api_name="batching_stop")
    tell_when_clamped(max_new, status, "Max new tokens per row")
    tell_when_clamped(k, status, "Draft length k")


def _check_section(target_box: gr.Textbox, draft_model: gr.Textbox) -> None:
    """The sampling-law check part: its controls, results and events."""
    gr.HTML("<h3 class='batching-heading'>Does speculative sampling keep the target's distribution?</h3>")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="batching-check-controls"):
            prompt = gr.Textbox(CHECK_PROMPT, label="Prompt", lines=2, elem_id="batching-check-prompt")
            temperature = gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature",
                                    elem_id="batching-check-temperature")
            check_drafter = gr.Dropdown(drafter_menu(), value=DEFAULT_DRAFTER, label="Drafter",
                                        elem_id="batching-check-drafter")
            from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

            add_about(check_drafter, "batching-check-drafter-about", DEFAULT_DRAFTER)
            n = gr.Number(CHECK_N, label=f"{N_FIELD.name} ({MIN_N}–{MAX_N})", precision=0, elem_id="batching-check-n")
            broken = gr.Checkbox(False, label="Accept every draft (a broken verifier)", elem_id="batching-check-broken")
            with gr.Row():
                check_btn = gr.Button("Check", variant="primary", elem_id="batching-check", scale=2, min_width=100)
                check_stop = gr.Button("Stop", variant="stop", elem_id="batching-check-stop", scale=1,
                                       min_width=80)
        with gr.Column(scale=3, min_width=600, elem_id="batching-check-results"):
            check_status = gr.HTML(render.status_html("Press Check to sample both ways and test them.", "info"),
                                   elem_id="batching-check-status")
            check_lesson_box = gr.HTML("", elem_id="batching-check-lesson")
            check_chart = gr.Plot(elem_id="batching-check-chart", show_label=False, visible=False)
            stats = gr.HTML("", elem_id="batching-check-stats")
            gr.HTML(CHECK_NOTE, elem_id="batching-check-note")
    check_btn.click(check, inputs=[prompt, temperature, check_drafter, n, broken, target_box, draft_model],
                    outputs=[check_status, check_lesson_box, check_chart, stats], api_name="batching_check",
                    show_progress="full", show_progress_on=[check_status], concurrency_limit=4,
                    concurrency_id="arena")
    check_stop.click(stop_check, outputs=[check_status], queue=False, api_name="batching_check_stop")
    tell_when_clamped(temperature, check_status, "Temperature")
    from app.messages import tell_when_invalid  # the N box checked when left, with the Run path's name and limits
    tell_when_invalid(n, check_status, N_FIELD)
