"""The sampling-law check, its inputs and its work: the form as the visitor left it (:class:`CheckForm`), its
validated settings (:class:`CheckSettings`, :func:`parse_check`) and the job (:func:`check_work`): load, encode
and :func:`specviz.analysis.batching.sampling_check`, with a readable label per counted pair (:func:`pair_labels`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from app.batching.shared import (ASSUMED_TOKENS_PER_PASS, LATEST_CHECK, Models, batched_forward_ms, drafter_factory,
                                 learn_timing, parse_models, say_threads, timing_costs)
from app.device import Job, load_target
from app.estimates import MIN_SPREAD, PROBE_SPREAD, make_estimate
from app.inputs import InputError, NumberField, number, text
from specviz.analysis.batching import JOINT_CHUNK, MIN_EXPECTED, first_token_law, pairs_needed, sampling_check
from specviz.core.engine import GenerationConfig
from specviz.core.verify import SamplingConfig

CHECK_PROMPT = "The sky is grey today. Write one sentence about the sea."
CHECK_N, MIN_N, MAX_N = 200, 20, 1000
N_FIELD = NumberField("N runs per side", MIN_N, MAX_N, True, CHECK_N)  # the N box's rule, named as its label
N_INFO = ("The prompt decides the least N (the default one needs a few dozen at temperature 1): before sampling, the "
          "check reads the target's law in seconds and says it if yours is too few.")
"""The N box's info line: its range is not all it takes (a trial read 20–1000 and ran N = 20)."""
CHECK_K = 4  # the check's runs make 3 tokens: the one drafted position is the second token
CHECK_BATCH = 16  # rows per batched run of the check
CHECK_TOKENS = 3
FIRST_BATCH = "the time left follows once the first batch is done"


# ------------------------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class CheckForm:
    """The check's controls as the visitor left them, unchecked (:meth:`parse` checks them): the prompt, the
    temperature, the drafter key, N runs per side, the broken verifier's box, the target spec and the draft model
    spec. The Check button's ``inputs_kwargs`` name these fields."""

    prompt: object
    temperature: object
    drafter: object
    n: object
    broken: object
    target: object
    draft_model: object

    def parse(self) -> CheckSettings:
        """The validated settings (:func:`parse_check`). Raises InputError (or PolicyError), one sentence."""
        return parse_check(self.prompt, self.temperature, self.drafter, self.n, self.broken, self.target,
                           self.draft_model)


@dataclass(frozen=True)
class CheckSettings:
    """A validated sampling check: the prompt, the temperature, N runs per side, and the broken verifier."""

    models: Models
    prompt: str
    temperature: float
    n: int
    broken: bool


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


# -------------------------------------------------------------------------------------------------------------- work


def check_seconds(probe: dict[int, float], n: int, prompt_len: int) -> float:
    """About how long a check of ``n`` runs per side takes (seconds) on a prompt of ``prompt_len`` tokens, from a
    probe (ms of one forward over n new tokens at batch 1; before the press, measured costs in that form:
    :func:`app.batching.plan.costs_probe`), each forward by the tab's law
    (:func:`app.batching.shared.batched_forward_ms`). First the law of the first tokens: a forward of the prompt, one
    of the prompt and its first token, and one of :data:`~specviz.analysis.batching.JOINT_CHUNK` rows for the third
    token's law (the most one forward reads; a law with fewer second tokens reads fewer rows). Then, per side,
    ceil(n / :data:`CHECK_BATCH`) batches, each a prefill of its rows and, after it, :data:`CHECK_TOKENS` - 1 tokens:
    one-token steps on the standard side, passes of :data:`CHECK_K` + 1 tokens per row on the speculative side at
    :data:`~app.batching.shared.ASSUMED_TOKENS_PER_PASS` tokens per pass. E.g. T(1) = 48 ms, 5 ms a token of a wide
    forward, n = 200, 43 prompt tokens: 7.6 s of law, 45.0 s standard, 49.7 s speculative, 102.3 s in all."""
    def forward(rows: int, tokens: int) -> float:
        return batched_forward_ms(probe, rows, tokens)

    total = forward(1, prompt_len) + forward(1, prompt_len + 1) + forward(JOINT_CHUNK, prompt_len + 2)
    after = CHECK_TOKENS - 1
    for start in range(0, n, CHECK_BATCH):
        rows = min(CHECK_BATCH, n - start)
        standard = forward(rows, prompt_len) + after * forward(rows, 1)
        speculative = forward(rows, prompt_len) + after / ASSUMED_TOKENS_PER_PASS * forward(rows, CHECK_K + 1)
        total += standard + speculative
    return total / 1000.0


def check_work(job: Job, c: CheckSettings) -> dict:
    """In the job's thread: load, encode the prompt, run the sampling check (the job's flag stops it before its
    next forward). Returns sampling_check's result with "labels" (pair -> text), "first_text", "tally" (what the
    drafter proposed) and "label" added. Once the first batch is done the job says ("estimate", None): the status
    drops the estimate planned before the press (:mod:`app.batching.plan`) for the rate measured
    (:class:`CheckProgress`). Says ("note", text) when other programs' work caps the threads
    (:func:`app.batching.shared.say_threads`)."""
    from specviz.runtime.models import context_window, encode_prompt

    job.say(("progress", (0.0, f"Loading the target {c.models.target}…")))
    loaded = load_target(c.models.target, progress=lambda message: job.say(("progress", (0.0, message))))
    say_threads(job, loaded, "check")
    tally: dict = {}
    make = drafter_factory(c.models, loaded, tally)
    tally.clear()  # the factory's first drafter only proved it can be made
    prompt = encode_prompt(loaded.tokenizer, c.prompt)
    window = context_window(loaded)
    if window is not None and len(prompt) + CHECK_TOKENS + CHECK_K > window:
        raise InputError(f"The prompt has {len(prompt):,} tokens; {loaded.label} reads at most {window:,}.")
    config = GenerationConfig(max_new_tokens=CHECK_TOKENS, k=CHECK_K,
                              sampling=SamplingConfig(temperature=c.temperature, seed=0))
    job.say(("progress", (0.0, "Reading the target's law of the first tokens, to see whether N is enough…")))
    began = time.monotonic()
    first, share, exact = first_token_law(loaded, prompt, config)
    too_few = too_few_ahead(c, first, share, exact, loaded.tokenizer)
    if too_few:
        raise InputError(too_few)
    shown = CheckProgress(c.n, lambda fraction, message: job.say(("progress", (fraction, message))))

    def batch_done(side: str, runs: int) -> None:
        if not any(shown.done.values()):  # the first batch: the measured rate takes over from the plan
            job.say(("estimate", None))
        shown.batch_done(side, runs)

    shown.start()
    result = sampling_check(loaded, prompt, config, make, n=c.n, batch=CHECK_BATCH, broken=c.broken,
                            cancel=job.should_stop, progress=batch_done, law=(first, exact))
    learn_check(c, len(prompt), time.monotonic() - began)
    result.update(tally=dict(tally), label=loaded.label, temperature=c.temperature,
                  first_text=loaded.tokenizer.decode([result["first"]]),
                  labels=pair_labels(loaded.tokenizer, result))
    return result


def learn_check(c: CheckSettings, prompt_len: int, seconds: float) -> None:
    """Keep what a finished check of ``c`` on a ``prompt_len``-token prompt took (``seconds``, from its law of the
    first tokens to its last batch) for the next check's plan (:mod:`app.batching.plan`): the ms a token its
    forwards read, its seconds over the tokens :func:`check_seconds` counts (its law at 1 ms a token), so the same
    check is planned at the time it took, its range :data:`app.estimates.MIN_SPREAD`."""
    per_token = seconds / check_seconds({1: 1.0, 2: 2.0}, c.n, prompt_len)  # both in s: the ratio is ms a token
    learn_timing(c.models.target, "check", timing_costs(per_token, per_token, LATEST_CHECK, MIN_SPREAD),
                 f"{per_token:.1f} ms a token its forwards read")


def too_few_ahead(c: CheckSettings, first: int, share: float, exact: dict, tokenizer) -> str:
    """Before sampling, the sentence that N runs per side (``c.n``) cannot be tested on this prompt and temperature:
    the likeliest first token ``first`` (probability ``share``) and the exact law after it (``exact``, from
    :func:`specviz.analysis.batching.first_token_law`) need more (:func:`~specviz.analysis.batching.pairs_needed`);
    "" when N is enough or the law too narrow to tell (the result then says why). A trial ran N = 20, the box's
    least, for 96 s and read only then "Raise N to 36 or more"."""
    needed = pairs_needed(exact, share)
    if needed is None or c.n >= needed[1]:
        return ""
    second = sorted(exact, key=lambda pair: -exact[pair])[1]
    pair = "“" + tokenizer.decode(list(second)).replace("\n", "⏎") + "”"
    head = (f"N = {c.n} runs per side is too few for this prompt at temperature {c.temperature:g}: after its likeliest "
            f"first token (p = {share:.2f}) the chi-square test needs the second most likely pair, {pair} "
            f"(p = {exact[second]:.3f}), expected at least {MIN_EXPECTED} times, so about "
            f"N = {needed[1]:,} runs per side")
    if needed[1] <= MAX_N:
        return f"{head}. Raise N to {needed[1]:,} or more; nothing was sampled."
    return (f"{head}, more than this check allows ({MAX_N:,}). Pick a prompt or a temperature that makes the two "
            "likeliest pairs more frequent; nothing was sampled.")


class CheckProgress:
    """The check's progress in words, said after each batch of :data:`CHECK_BATCH` runs: the runs done of N per
    side and, once a first batch of a side is done, the time left estimated from the rate measured so far (each
    side at its own rate; the speculative side at the standard one until its first batch is done), e.g. "sampling
    speculative runs, 16 at a time: standard 200 of 200, speculative 48 of 200 done; about 70 s (60–90 s) left".

    ``say(fraction 0..0.9, message)`` receives each line; ``clock`` gives seconds (a test passes its own)."""

    SIDES = ("standard", "speculative")

    def __init__(self, n: int, say: Callable[[float, str], None], clock: Callable[[], float] = time.monotonic):
        self.n, self.say, self.clock = n, say, clock
        self.done = {side: 0 for side in self.SIDES}
        self.seconds = {side: 0.0 for side in self.SIDES}  # time spent on each side's finished batches
        self.mark = clock()

    def start(self) -> None:
        """Say the first line (nothing done yet) and start the clock."""
        self.mark = self.clock()
        self.say(0.0, self.message("standard"))

    def batch_done(self, side: str, runs: int) -> None:
        """``sampling_check``'s progress callback: ``runs`` of N done on ``side`` ("standard" or "speculative")."""
        now = self.clock()
        self.seconds[side] += now - self.mark
        self.mark, self.done[side] = now, runs
        current = "speculative" if side == "speculative" or runs >= self.n else "standard"
        self.say(0.9 * sum(self.done.values()) / (2 * self.n), self.message(current))

    def seconds_left(self) -> float | None:
        """The time left, from the measured seconds per run (None before a first batch is done)."""
        rates = {s: self.seconds[s] / self.done[s] for s in self.SIDES if self.done[s]}
        if not rates:
            return None
        standard = rates.get("standard")
        speculative = rates.get("speculative", standard)
        return sum((self.n - self.done[s]) * r for s, r in (("standard", standard), ("speculative", speculative)))

    def estimate_left(self):
        """The time left with its range (:func:`app.estimates.make_estimate`, as the other tabs' estimates): the
        measured rates carry :data:`app.estimates.MIN_SPREAD`; while the speculative side is still assumed to run at
        the standard rate, the wider :data:`app.estimates.PROBE_SPREAD`. None before a first batch is done."""
        left = self.seconds_left()
        if left is None:
            return None
        low, high = MIN_SPREAD if self.done["speculative"] else PROBE_SPREAD
        return make_estimate(left, left * low, left * high)

    def message(self, side: str) -> str:
        """The progress line while ``side`` is being sampled."""
        done = self.done
        counts = f"standard {done['standard']} of {self.n}, speculative {done['speculative']} of {self.n} done"
        left = self.estimate_left()
        when = f"{left.text()} left" if left is not None else FIRST_BATCH
        return f"sampling {side} runs, {CHECK_BATCH} at a time: {counts}; {when}"


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
