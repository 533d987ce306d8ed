"""Speculation × batch size, its inputs and its work: the form as the visitor left it (:class:`SweepForm`), its
validated settings (:class:`SweepSettings`, :func:`parse_sweep`), the prompts (:func:`sweep_prompts`), the room
they need (:func:`check_room`), the time estimate (:func:`sweep_seconds`) and the job itself (:func:`sweep_work`):
load, encode, probe, the forward grid (when asked) and :func:`specviz.analysis.batching.batch_sweep`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from app.batching.shared import (ASSUMED_TOKENS_PER_PASS, LATEST_SWEEP, Models, batched_forward_ms, drafter_factory,
                                 learn_timing, parse_models, say_threads, timing_costs)
from app.costs import note_forwards
from app.estimates import PROBE_SPREAD
from app.device import Job, load_target
from app.inputs import InputError, number
from specviz.analysis.batching import BATCH_SIZES, SweepOptions, batch_sweep
from specviz.analysis.prompts import EXAMPLE_PROMPTS, load_prompts
from specviz.core.engine import MAX_K, GenerationConfig
from specviz.measure.grid import grid_seconds, measure_forward_grid, probe_forward_ms
from specviz.measure.machine import CpuShare, environment
from specviz.runtime.policy import current_policy

DEFAULT_K = 4
DEFAULT_MAX_NEW_TOKENS = 24
MAX_NEW_TOKENS = 128
REPEATS = 3  # standard and speculative runs per batch size, interleaved; rates are their medians
SHORT, LONG = "short", "long"
LONG_PROMPT_TOKENS = 1000  # "long prompts": example prompts joined to about this many tokens each
PROMPT_LENGTHS = (("short prompts (the examples, ~50 tokens)", SHORT), ("long prompts (~1,000 tokens)", LONG))
PROBE_WIDE = 64  # tokens of the probe's wide forward (its per-token cost prices the prefills and wide passes)


# ------------------------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class SweepForm:
    """The sweep's controls as the visitor left them, unchecked (:meth:`parse` checks them): the drafter key, k, max
    new tokens per row, the batch sizes ticked, :data:`SHORT` or :data:`LONG` prompts, whether to time the forward
    grid for the predicted curve, the target spec and the draft model spec. The Measure button's ``inputs_kwargs``
    name these fields."""

    drafter: object
    k: object
    max_new_tokens: object
    batch_sizes: object
    prompt_length: object
    predicted: object
    target: object
    draft_model: object

    def parse(self) -> SweepSettings:
        """The validated settings (:func:`parse_sweep`). Raises InputError (or PolicyError), one sentence."""
        return parse_sweep(self.drafter, self.k, self.max_new_tokens, self.batch_sizes, self.prompt_length,
                           self.predicted, self.target, self.draft_model)


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


# -------------------------------------------------------------------------------------------------------------- work


def sweep_prompts(tokenizer, long_prompts: bool, count: int) -> list[list[int]]:
    """``count`` encoded prompts (chat template) from the example prompts: each example once (the sweep recycles
    them to fill B rows); long: row i joins the examples, starting at the i-th, until about
    :data:`LONG_PROMPT_TOKENS` tokens (so the rows differ)."""
    from specviz.runtime.models import encode_prompt

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
    from specviz.runtime.models import context_window

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
    at least two n; before the press, measured costs in that form: :func:`app.batching.plan.costs_probe`). A
    forward of b rows × n tokens costs max(T(1), b·n·t), t = the widest probe's ms per token
    (:func:`app.batching.shared.batched_forward_ms`); each repeat prefills b rows twice, decodes standard (one token
    per step) and speculative (:data:`ASSUMED_TOKENS_PER_PASS` tokens per pass); the grid adds its own estimate."""
    def forward(b: int, n: int) -> float:
        return batched_forward_ms(probe, b, n)

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


MEASURED_PHASE = "measured curve"
"""The sweep's own phase, named before each of its progress lines (:func:`phase_message`)."""


def predicted_phase(k: int) -> str:
    """The predicted curve's phase, named before each line of its grid's progress: "predicted curve: timing T(B, 1)
    and T(B, 5)" for k = 4 (the checkbox's T(B, k+1) with k filled in)."""
    return f"predicted curve: timing T(B, 1) and T(B, {k + 1})"


def phase_message(phase: str, message: str) -> str:
    """A progress line with its phase named first, so the grid's "batch 2: round 3/3" and the sweep's "batch 2: ..."
    cannot be mistaken for each other: "predicted curve: timing T(B, 1) and T(B, 5), batch 2: round 3/3". A line
    about no batch size ("Done.", "Stopped.") is left as it is."""
    return f"{phase}, {message}" if message.startswith("batch ") else message


def sweep_work(job: Job, s: SweepSettings) -> dict:
    """In the job's thread: load, encode, probe (the estimate), the grid (when asked) and the sweep. Says
    ("progress", (fraction, message)), ("estimate", seconds), ("note", text) when other programs' work caps the threads
    (:func:`app.batching.shared.say_threads`) and, after each finished batch size, ("partial", the result so far,
    "stopped" False) through the job. Returns batch_sweep's result with "settings", "environment",
    "device", "grid", "prompt_tokens" and "cpu_others" (other programs' share of the CPUs while the grid and the
    sweep were timed, :class:`CpuShare`; None where unknown) added. Once the grid is timed it says ("grid", those
    keys): the timings a Stop before the first batch size finished keeps. "threads": the thread cap every timing ran
    under (:func:`app.estimates.threads_record`). A Stop while the grid is timed ends the
    grid (its ``"stopped"`` True; the batch sizes it finished kept), and the sweep then measures no batch size."""

    def say(fraction: float, message: str) -> None:
        job.say(("progress", (fraction, message)))

    say(0.0, f"Loading the target {s.models.target}…")
    loaded = load_target(s.models.target, progress=lambda message: say(0.0, message))
    threads = say_threads(job, loaded, "sweep")  # every timing below shares the cap; the JSON records it
    make = drafter_factory(s.models, loaded)
    prompts = sweep_prompts(loaded.tokenizer, s.long_prompts, max(s.batch_sizes))
    check_room(loaded, prompts, s)
    prompt_len = round(sum(map(len, prompts)) / len(prompts))
    say(0.0, "Timing a few forwards for the estimate…")
    probe = probe_forward_ms(loaded, (1, s.k + 1, PROBE_WIDE))
    job.say(("estimate", sweep_seconds(probe, s, prompt_len)))
    step, per_token = probe[1], probe[PROBE_WIDE] / PROBE_WIDE  # the next sweep's plan (app.batching.plan)
    timing = timing_costs(step, per_token, LATEST_SWEEP, PROBE_SPREAD)
    learn_timing(s.models.target, "sweep", timing,
                 f"{step:.0f} ms a one-token step and {per_token:.1f} ms a token of a wide forward")
    note_forwards(s.models.target, step, per_token, LATEST_SWEEP, at=timing.measured_at)  # the other tabs' plans
    grid, share, cpu = None, 0.0, CpuShare()  # other programs' share of the CPUs from here to the sweep's end
    if s.predicted:
        whole = sweep_seconds(probe, s, prompt_len)
        share = grid_seconds(probe, prompt_len=prompt_len, token_counts=(1, s.k + 1),
                             batch_sizes=s.batch_sizes) / whole if whole > 0 else 0.0
        grid = measure_forward_grid(loaded, prompt_len=prompt_len, token_counts=(1, s.k + 1),
                                    batch_sizes=s.batch_sizes,
                                    progress=lambda f, m: say(share * f, phase_message(predicted_phase(s.k), m)),
                                    should_stop=job.should_stop)
    about = dict(settings=asdict(s), environment=environment(loaded), device=device_name(loaded),
                 label=loaded.label, prompt_tokens=[len(p) for p in prompts], threads=threads,
                 grid=None if grid is None else {"ms": grid["ms"], "spread": grid.get("spread"),
                                                  "impossible": grid.get("impossible"), "prompt_len": prompt_len,
                                                  "stopped": grid["stopped"]})
    if grid is not None:  # the timings kept, should a Stop end the job before its own result comes back
        job.say(("grid", about))
    config = GenerationConfig(max_new_tokens=s.max_new_tokens, k=s.k)
    options = SweepOptions(batch_sizes=s.batch_sizes, repeats=REPEATS,
                           grid=None if grid is None or grid["stopped"] else grid,
                           progress=lambda f, m: say(share + (1 - share) * f, phase_message(MEASURED_PHASE, m)),
                           should_stop=job.should_stop,
                           on_row=lambda partial: job.say(("partial", {**partial, **about,
                                                                       "cpu_others": cpu.others()})))
    result = batch_sweep(loaded, prompts, config, make, options)
    result["stopped"] = result["stopped"] or bool(grid and grid["stopped"])
    return {**result, **about, "cpu_others": cpu.others()}
