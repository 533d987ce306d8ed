"""The sampling-law check, its inputs and its work: the form as the visitor left it (:class:`CheckForm`), its
validated settings (:class:`CheckSettings`, :func:`parse_check`) and the job (:func:`check_work`): load, encode
and :func:`specviz.analysis.batching.sampling_check`, with a readable label per counted pair (:func:`pair_labels`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.batching.shared import Models, drafter_factory, parse_models
from app.device import Job, load_target
from app.inputs import InputError, NumberField, number, text
from specviz.analysis.batching import sampling_check
from specviz.core.engine import GenerationConfig
from specviz.core.verify import SamplingConfig

CHECK_PROMPT = "The sky is grey today. Write one sentence about the sea."
CHECK_N, MIN_N, MAX_N = 200, 20, 1000
N_FIELD = NumberField("N runs per side", MIN_N, MAX_N, True, CHECK_N)  # the N box's rule, named as its label
CHECK_K = 4  # the check's runs make 3 tokens: the one drafted position is the second token
CHECK_BATCH = 16  # rows per batched run of the check
CHECK_TOKENS = 3


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


def check_work(job: Job, c: CheckSettings) -> dict:
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
