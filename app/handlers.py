"""Event handlers: small named generators that consume engine events and yield UI updates.

:func:`generate` validates the inputs, waits for the device, loads the target (and the drafter), then runs the
speculative stream and its baseline through :func:`specviz.race.race` (one thread, interleaved by each run's own
clock, so neither is timed while the other computes) and yields rendered panes, stats and charts at a bounded
rate; with the EAGLE / Medusa drafters also the draft tree of the latest pass and the Medusa heads' accuracy
(:mod:`app.tree_view`), refreshed with the charts. A process-wide :class:`DeviceLock` makes browser sessions'
generations take turns, first come first served, and tells each waiting visitor how many runs are ahead.
:func:`stop` cancels a session's generation at once and releases the lock; :func:`stop_run` (the Stop button)
also shows what the run made so far as its result: panes without the cursor, finish reason "stopped", the output
check up to that point and a history row marked stopped.

Robustness: every input is checked (:func:`parse_settings`, one sentence per problem); control characters and
invalid surrogates are removed from the prompt; a prompt longer than the target's context window (or than
``SPECVIZ_MAX_PROMPT_TOKENS``) is cut from the left with the chat template kept whole, and the status says so;
the operator's :class:`specviz.policy.Policy` decides which models a visitor may load (checked in one place,
:func:`check_models`); any exception in a run becomes a message for that session only.

Every output tuple has the order of :data:`OUTPUTS`.
"""

from __future__ import annotations

import html
import logging
import queue
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator

import gradio as gr

from app import render
from app.figures import dashboard_figure
from app.sessions import LOCAL_PREFIX, CancelRegistry, session_key
from app.tree_view import HeadAccuracy, TreeView
from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE
from specviz.drafters.registry import DRAFTER_KEYS, DRAFTERS, HEAD_KEYS, make_drafter
from specviz.engine import MAX_K, GenerationConfig, speculative_generate, standard_generate
from specviz.events import NumericalError, PassEvent, RunCancelled
from specviz.metrics import RunStats, speedup
from specviz.policy import Policy, current_policy
from specviz.race import race
from specviz.verify import SamplingConfig

log = logging.getLogger("specviz.app")

OUTPUTS = ("spec-output", "baseline-output", "charts", "stats", "status", "history", "history-state", "draft-tree",
           "head-accuracy")
"""What :func:`generate` yields, in order (the components' elem_ids)."""

UPDATE_INTERVAL_S = 0.25  # token panes and stats: at most 4 refreshes a second
CHART_INTERVAL_S = 0.5  # charts: at most 2 a second (plotly redraws cost the browser)
MAX_PROMPT_CHARS = 200_000  # longer prompts keep only their end (before tokenizing: a pasted book stays cheap)
MAX_STOP_STRINGS = 16
MAX_STOP_STRING_CHARS = 200
HISTORY_ROWS = 12
RUN_THREAD = "specviz-run"  # the thread that drives the engine's events (see _events_in_background)
MAX_TREE_NODES = 32  # the "Tree nodes" slider's top
MAX_CONFIDENCE = 0.95  # the "Confidence gate" slider's top
HEAD_DRAFTERS = HEAD_KEYS  # the drafters with trained heads: trees, the confidence gate, lookup first
TREE_SAMPLING_NOTE = "Trees are greedy-only: this sampling run (temperature > 0) drafts a chain."
DRAFTER_LABELS = {c.key: c.label for c in DRAFTERS}


def __getattr__(name: str):
    """``MAX_NEW_TOKENS``: the operator's cap on new tokens (``SPECVIZ_MAX_NEW_TOKENS``), read when asked for,
    so the slider built by :func:`app.build_demo` follows the environment of the process that builds it."""
    if name == "MAX_NEW_TOKENS":
        return current_policy().max_new_tokens
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class InputError(ValueError):
    """Bad input from the user; the message is one sentence for them."""


# ------------------------------------------------------------------------------------------------- device


class DeviceLock:
    """A process-wide lock around whole generations, first come first served, with an owner so a Stop can
    release only its own run.

    Waiters stand in a line: :meth:`acquire` joins it (or refreshes the caller's place), and the lock goes to the
    head of the line. :meth:`ahead` tells a waiter how many runs are before it. A waiter that stops calling
    :meth:`acquire` for ``stale_s`` seconds (a run whose generator was dropped without cleanup) loses its place,
    so an abandoned visitor never blocks the line; :meth:`leave` gives up a place at once.
    """

    def __init__(self, stale_s: float = 10.0) -> None:
        self._cond = threading.Condition()
        self._owner: str | None = None
        self._what = ""
        self._line: dict[str, float] = {}  # waiting owner -> when it last asked (insertion order = arrival)
        self.stale_s = stale_s

    def _prune(self, now: float) -> None:
        for owner in [o for o, seen in self._line.items() if now - seen > self.stale_s]:
            del self._line[owner]

    def acquire(self, owner: str, what: str, timeout: float) -> bool:
        """Take the lock for ``owner`` (doing ``what``) within ``timeout`` seconds; True on success. On a
        timeout the caller keeps its place in the line (call again, or :meth:`leave`)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                now = time.monotonic()
                self._line[owner] = now
                self._prune(now)
                if self._owner is None and next(iter(self._line)) == owner:
                    del self._line[owner]
                    self._owner, self._what = owner, what
                    return True
                if now >= deadline:
                    return False
                self._cond.wait(min(deadline - now, 0.25))

    def release(self, owner: str) -> bool:
        """Release the lock if ``owner`` holds it (and drop any place it has in the line); True when released."""
        with self._cond:
            self._line.pop(owner, None)
            if self._owner != owner:
                self._cond.notify_all()
                return False
            self._owner, self._what = None, ""
            self._cond.notify_all()
            return True

    def leave(self, owner: str) -> None:
        """Give up ``owner``'s place in the line (a no-op when it has none)."""
        with self._cond:
            if self._line.pop(owner, None) is not None:
                self._cond.notify_all()

    def relabel(self, owner: str, what: str) -> None:
        """Change what the holder ``owner`` is said to be doing."""
        with self._cond:
            if self._owner == owner:
                self._what = what

    def ahead(self, owner: str) -> int:
        """How many runs are before ``owner``: the holder (if any) and the waiters that came earlier."""
        with self._cond:
            self._prune(time.monotonic())
            waiting = list(self._line)
            before = waiting.index(owner) if owner in waiting else len(waiting)
            return before + (self._owner is not None and self._owner != owner)

    @property
    def waiting(self) -> int:
        """How many runs wait in line."""
        with self._cond:
            self._prune(time.monotonic())
            return len(self._line)

    @property
    def holder(self) -> str:
        """What the current holder is doing ("" when free)."""
        return self._what

    @property
    def locked(self) -> bool:
        """Whether a run holds the device."""
        return self._owner is not None


DEVICE = DeviceLock()
RUNS = CancelRegistry()  # the Live tab's runs, one per session
_VIEWS: dict[str, "RunView"] = {}  # session -> its latest run's view, for Stop
_VIEWS_LOCK = threading.Lock()


# ------------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Settings:
    """Validated UI inputs for one generation."""

    prompt: str
    target: str
    drafter: str
    draft_model: str | None
    exit_layer: int | None
    k: int
    adaptive_k: bool
    temperature: float
    top_p: float
    top_k: int
    seed: int
    max_new_tokens: int
    stop_strings: tuple[str, ...]
    chat_template: bool
    notes: tuple[str, ...] = ()  # what was changed in the input (cleaned, cut), said in the status
    max_prompt_tokens: int | None = None  # the operator's cap (SPECVIZ_MAX_PROMPT_TOKENS); None: the window only
    tree_nodes: int = 0  # eagle / medusa: nodes of a draft tree (0 = a chain)
    min_confidence: float = DEFAULT_MIN_CONFIDENCE  # eagle / medusa: the confidence gate (0 = always k tokens)
    lookup: bool = False  # eagle / medusa: n-gram lookup first, the head when nothing repeats

    def config(self) -> GenerationConfig:
        """The engine's configuration for these settings."""
        sampling = SamplingConfig(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, seed=self.seed)
        return GenerationConfig(max_new_tokens=self.max_new_tokens, sampling=sampling, k=self.k,
                                adaptive_k=self.adaptive_k, stop_strings=self.stop_strings)

    @property
    def greedy(self) -> bool:
        """Temperature 0: argmax decoding."""
        return self.temperature == 0

    @property
    def drafted_tree_nodes(self) -> int:
        """The tree size the drafter gets: ``tree_nodes`` in greedy mode, 0 (a chain) when sampling."""
        return self.tree_nodes if self.greedy else 0


def _number(value, name: str, low: float, high: float, integer: bool, hint: str = "") -> float | int:
    if isinstance(value, bool):
        value = int(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name} must be a number.") from None
    if number != number or not low <= number <= high:
        shown = value if len(str(value)) <= 20 else str(value)[:20] + "…"
        above = f"; {hint}" if hint and number == number and number > high else ""

        def bound(x: float) -> str:
            if not (integer or x == int(x)):
                return f"{x:g}"
            return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))

        raise InputError(f"{name} must be between {bound(low)} and {bound(high)} (got {shown}{above}).")
    if integer:
        if number != int(number):
            raise InputError(f"{name} must be a whole number (got {value}).")
        return int(number)
    return number


def parse_stop_strings(text: str | None) -> tuple[str, ...]:
    """Stop strings from a comma- or newline-separated box; ``\\n`` written out means a newline. Control
    characters are removed; at most :data:`MAX_STOP_STRINGS` strings of :data:`MAX_STOP_STRING_CHARS` characters."""
    if not text:
        return ()
    from specviz.models import sanitize_prompt

    text = sanitize_prompt(_text(text, "The stop strings")).text
    items = [part.strip() for line in text.splitlines() for part in line.split(",")]
    stops = tuple(dict.fromkeys(s.replace("\\n", "\n") for s in items if s))
    if len(stops) > MAX_STOP_STRINGS:
        raise InputError(f"Too many stop strings ({len(stops)}; at most {MAX_STOP_STRINGS}).")
    if any(len(s) > MAX_STOP_STRING_CHARS for s in stops):
        raise InputError(f"A stop string is too long (at most {MAX_STOP_STRING_CHARS} characters).")
    return stops


def _text(value, name: str) -> str:
    """A text input as str (None is ""); anything else that is not text is an InputError."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"{name} must be text.")
    return value


def check_models(target: str, draft_model: str | None, policy: Policy) -> None:
    """The one place the operator's model policy is enforced for visitors (raises PolicyError, naming the
    setting): the target, and the draft model of the 'model' drafter. The other drafters load only the target
    (its bfloat16 copy, its own layers) or nothing."""
    policy.check_model(target, "target")
    if draft_model is not None:
        policy.check_model(draft_model, "draft model")


def parse_settings(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p, top_k,
                   seed, max_new_tokens, stop_strings, chat_template, tree_nodes=0, confidence=None, lookup=False,
                   policy: Policy | None = None) -> Settings:
    """Check every input; raises :class:`InputError` (or :class:`specviz.policy.PolicyError`) with a message
    for the user. ``tree_nodes``, ``confidence`` (the confidence gate, in [0, 0.95]; None or "" = the default)
    and ``lookup`` (n-gram lookup first) count only for the head drafters (eagle, medusa). ``policy`` defaults to
    the environment's (:func:`specviz.policy.current_policy`)."""
    from specviz.models import sanitize_prompt

    policy = policy or current_policy()
    prompt = _text(prompt, "The prompt")
    notes: list[str] = []
    if len(prompt) > MAX_PROMPT_CHARS:
        notes.append(f"The prompt had {len(prompt):,} characters: only its last {MAX_PROMPT_CHARS:,} were read.")
        prompt = prompt[-MAX_PROMPT_CHARS:]
    clean = sanitize_prompt(prompt)
    prompt = clean.text
    if not prompt.strip():
        raise InputError("The prompt is empty: type something (or pick an example) first.")
    if clean.note:
        notes.append(clean.note)
    target = _text(target, "The target model").strip() or "embedded"
    drafter = _text(drafter, "The drafter")
    if drafter not in DRAFTER_KEYS:
        raise InputError(f"Unknown drafter {drafter!r}: choose one of {', '.join(DRAFTER_KEYS)}.")
    draft_model = _text(draft_model, "The draft model").strip() or None
    if drafter != "model":
        draft_model = None
    elif draft_model is None:
        raise InputError("The 'model' drafter needs a draft model: a hub id or a local folder.")
    check_models(target, draft_model, policy)
    layer = None
    if drafter == "early-exit" and exit_layer not in (None, "", 0):
        try:
            layer = int(_number(exit_layer, "The early-exit layer", 0, 10_000, True)) or None
        except InputError as error:  # the model's own bound (1 .. layers - 1) is checked once it is loaded
            if "between" not in str(error):
                raise
            raise InputError(f"The early-exit layer must be 0 (half the target's layers) or a layer from 1 to the "
                             f"target's layers − 1 (got {exit_layer}).") from None
    temperature = float(_number(temperature, "Temperature", 0, 5, False))
    nodes = 0
    if drafter in HEAD_DRAFTERS and tree_nodes not in (None, ""):
        nodes = int(_number(tree_nodes, "Tree nodes", 0, MAX_TREE_NODES, True))
        if nodes and temperature > 0:
            notes.append(TREE_SAMPLING_NOTE)
    gate = DEFAULT_MIN_CONFIDENCE
    if drafter in HEAD_DRAFTERS and confidence not in (None, ""):
        gate = float(_number(confidence, "Confidence gate", 0, MAX_CONFIDENCE, False))
    new_tokens = _number(max_new_tokens, "Max new tokens", 1, policy.max_new_tokens, True,
                         hint="the server's limit, set by the operator with SPECVIZ_MAX_NEW_TOKENS")
    return Settings(
        prompt=prompt, target=target, drafter=drafter, draft_model=draft_model, exit_layer=layer,
        k=int(_number(k, "Draft length k", 1, MAX_K, True)), adaptive_k=bool(adaptive_k), temperature=temperature,
        top_p=float(_number(top_p if top_p not in (None, "") else 1.0, "Top-p", 0.01, 1, False)),
        top_k=int(_number(top_k if top_k not in (None, "") else 0, "Top-k", 0, 1_000_000, True)),
        seed=int(_number(seed if seed not in (None, "") else 0, "Seed", 0, 2**63 - 1, True)),
        max_new_tokens=int(new_tokens), stop_strings=parse_stop_strings(stop_strings),
        chat_template=bool(chat_template), notes=tuple(notes), max_prompt_tokens=policy.max_prompt_tokens,
        tree_nodes=nodes, min_confidence=gate, lookup=bool(lookup) and drafter in HEAD_DRAFTERS,
    )


# ------------------------------------------------------------------------------------------------- a run


@dataclass
class RunView:
    """What one generation shows: both panes, their statistics and the output comparison."""

    settings: Settings
    target_label: str
    drafter_name: str
    spec: render.Pane | None
    base: render.Pane
    spec_stats: RunStats = field(default_factory=RunStats)
    base_stats: RunStats = field(default_factory=RunStats)
    base_gaps: list[float | None] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    cancelled: bool = False  # stopped by the user (see mark_stopped)
    stopped_at: float | None = None
    notes: list[str] = field(default_factory=list)  # what was changed in the input, repeated in every status
    heads: HeadAccuracy | None = None  # Medusa: accuracy per head
    trees: TreeView | None = None  # made at the first tree pass

    def add(self, event: PassEvent) -> None:
        """Fold one engine event into its pane and statistics."""
        if event.run == "baseline":
            self.base.add(event)
            self.base_stats.add(event)
            self.base_gaps.extend([event.near_tie_gap] * len(event.emitted_ids))
        elif self.spec is not None:
            if event.tree is not None:
                if self.trees is None:
                    self.trees = TreeView(self.spec.tokenizer)
                self.trees.add(event, self.spec.output_ids)  # before the pane: its ids end at the tree's root
            if self.heads is not None:
                self.heads.add(event)
            self.spec.add(event)
            self.spec_stats.add(event)
        if event.notice and event.notice not in self.notes:  # e.g. the drafter was dropped mid-run
            self.notes.append(event.notice)

    def mark_stopped(self) -> bool:
        """Stop: freeze this view as the run's result (no cursor, finish reason "stopped" for an unfinished run).
        Returns False when there is nothing to stop (the run finished, or was stopped already)."""
        if self.cancelled or self.finished:
            return False
        self.cancelled, self.stopped_at = True, time.monotonic()
        for pane, stats in ((self.spec, self.spec_stats), (self.base, self.base_stats)):
            if pane is not None:
                pane.finished = True
            if stats.finish_reason is None:
                stats.finish_reason = "stopped"
        return True

    @property
    def empty(self) -> bool:
        """No event arrived yet (the prompt is still being read)."""
        return not self.base.passes and (self.spec is None or not self.spec.passes)

    @property
    def finished(self) -> bool:
        """Both runs reached a finish reason (a stopped run is not finished)."""
        if self.cancelled:
            return False
        done = self.base_stats.finish_reason is not None
        return done and (self.spec is None or self.spec_stats.finish_reason is not None)

    def comparison(self) -> render.Comparison:
        """Greedy identity check of the two outputs."""
        spec_ids = self.spec.output_ids if self.spec is not None else self.base.output_ids
        return render.compare_outputs(spec_ids, self.base.output_ids, self.base_gaps, self.base.tokenizer,
                                      greedy=self.settings.greedy, finished=self.finished)

    # ------------------------------------------------------------------------------------------ views
    def spec_html(self) -> str:
        """The speculative pane."""
        if self.spec is None:
            return render.placeholder_html(
                "Drafter 'none' is standard decoding: the baseline pane on the right is the whole run. "
                "Pick a drafter to compare.")
        s = self.spec_stats
        figures = [("tokens/s", s.tokens_per_s, "{:.1f}"), ("passes", s.passes, "{}"),
                   ("accepted", s.acceptance_rate, "{:.0%}")]
        header = render.pane_header(f"Speculative · {self.drafter_name}", _k_label(self.settings), figures)
        return render.pane_html(header, self.spec.html())

    def base_html(self) -> str:
        """The baseline pane."""
        s = self.base_stats
        figures = [("tokens/s", s.tokens_per_s, "{:.1f}"), ("passes", s.passes, "{}")]
        header = render.pane_header("Standard decoding (baseline)", "one target forward per token", figures)
        return render.pane_html(header, self.base.html())

    def stats_html(self) -> str:
        """The stats cards."""
        spec = self.spec_stats if self.spec is not None else None
        return render.stats_html(spec, self.base_stats, self.comparison(), greedy=self.settings.greedy,
                                 stopped=self.cancelled)

    def tree_html(self, every_pass: bool = False) -> str:
        """The draft tree of the latest pass ("" when no pass drafted a tree); with ``every_pass`` the earlier
        passes too (closed), for the end of the run."""
        return self.trees.html(every_pass=every_pass) if self.trees is not None else ""

    def heads_html(self) -> str:
        """The Medusa heads' accuracy table ("" for other drafters)."""
        return self.heads.html() if self.heads is not None else ""

    def figure(self):
        """The charts."""
        spec = self.spec_stats if self.spec is not None else RunStats(run="speculative")
        return dashboard_figure(spec, self.base_stats, adaptive_k=self.settings.adaptive_k)

    def status(self) -> str:
        """One line: what is happening."""
        seconds = (self.stopped_at or time.monotonic()) - self.started
        if self.cancelled and self.empty:
            return render.status_html(f"Stopped after {seconds:.1f} s, while the prompt was being read.", "info",
                                      notes=self.notes)
        if self.cancelled:
            return render.status_html(f"Stopped after {seconds:.1f} s ({self._counts()}): what was made so far is "
                                      "shown.", "info", notes=self.notes)
        if self.finished:
            return render.status_html(f"Done in {seconds:.1f} s ({self._counts(reasons=True)}) · {self.target_label}",
                                      "done", notes=self.notes)
        n = self.spec_stats.passes if self.spec is not None else self.base_stats.passes
        return render.status_html(f"Generating… pass {n} · both runs take turns on one device, each timed on "
                                  f"its own clock", "busy", notes=self.notes)

    def _counts(self, reasons: bool = False) -> str:
        """Tokens (and finish reasons) of both runs: "40 tokens, finish reason: length" when they agree, else
        "speculative 23 tokens (eos), baseline 40 tokens (length)"."""
        def tokens(n: int) -> str:
            return f"{n} token{'' if n == 1 else 's'}"

        s, b = self.spec_stats, self.base_stats
        if self.spec is None or (s.generated == b.generated and s.finish_reason == b.finish_reason):
            return tokens(b.generated) + (f", finish reason: {b.finish_reason}" if reasons else "")
        if reasons:
            return (f"speculative {tokens(s.generated)} ({s.finish_reason}), baseline {tokens(b.generated)} "
                    f"({b.finish_reason})")
        return f"speculative {tokens(s.generated)}, baseline {tokens(b.generated)}"

    def summary(self) -> dict:
        """A row of the run history."""
        s, b = self.spec_stats, self.base_stats
        return {
            "drafter": self.drafter_name if self.spec is not None else "none",
            "k": _k_label(self.settings), "k_value": self.settings.k if self.spec is not None else None,
            "alpha": s.alpha if self.spec is not None else None, "temperature": self.settings.temperature,
            "tokens": s.generated if self.spec is not None else b.generated,
            "acceptance": s.acceptance_rate if self.spec is not None else None,
            "tokens_per_pass": s.tokens_per_pass if self.spec is not None else None,
            "spec_tps": s.tokens_per_s if self.spec is not None else None, "base_tps": b.tokens_per_s,
            "speedup": speedup(s, b) if self.spec is not None else None,
            "identical": self.comparison().identical if self.settings.greedy else None,  # sampling: ids may differ
            "stopped": self.cancelled,
        }


def _k_label(settings: Settings) -> str:
    if settings.drafter == "none":
        return ""
    label = f"k = {settings.k}" + (" (adaptive)" if settings.adaptive_k else "")
    if settings.drafted_tree_nodes:
        label += f" · tree of {settings.drafted_tree_nodes} nodes, depth ≤ k"
    elif settings.tree_nodes:
        label += " · chain (trees are greedy-only)"
    if settings.drafter in HEAD_DRAFTERS and settings.min_confidence > 0:
        label += f" · gate {settings.min_confidence:g}"
    if settings.lookup:
        label += " · lookup first"
    return label


# ------------------------------------------------------------------------------------------------- helpers


def _in_background(fn: Callable, on_message: Callable[[str], None], threads: list[threading.Thread]
                   ) -> Iterator[None]:
    """Run ``fn(progress)`` in a thread (appended to ``threads``); yield every 0.25 s until it ends; re-raise its
    error. The result is the generator's return value (use ``result = yield from _in_background(...)``)."""
    box: dict = {}

    def work() -> None:
        try:
            box["value"] = fn(on_message)
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error

    thread = threading.Thread(target=work, name="specviz-load", daemon=True)
    threads.append(thread)
    thread.start()
    while thread.is_alive():
        thread.join(0.25)
        yield None
    if "error" in box:
        raise box["error"]
    return box.get("value")


def log_failure(what: str, error: BaseException) -> None:
    """Log a failed run for the operator: a user's mistake (bad input, a model that cannot be found or loaded)
    as one line, anything else with its traceback. ``what`` names the run ("generation", "arena", ...)."""
    from specviz.models import ModelLoadError

    if isinstance(error, (ValueError, ModelLoadError)):
        log.info("%s refused: %s", what, error)
    else:
        log.error("%s failed:\n%s", what, "".join(traceback.format_exception(error)))


def _message_for(error: BaseException) -> str:
    """A user-facing sentence for an error (never a stack trace)."""
    from specviz.models import ModelLoadError

    if isinstance(error, (InputError, ModelLoadError)):
        return str(error)
    if isinstance(error, ValueError):
        return str(error) or "Invalid input."
    if isinstance(error, NotImplementedError):
        return f"Not supported yet: {error}"
    if isinstance(error, NumericalError):
        return str(error)
    first = (str(error).strip().splitlines() or [""])[0]
    return f"Something went wrong ({type(error).__name__}: {first}). The details are in the server log."


def history_html(history: list[dict]) -> str:
    """The run history table (newest first)."""
    return render.history_html(history)


def _outputs(spec_html=None, base_html=None, figure=None, stats=None, status=None, history=None, state=None,
             tree=None, heads=None):
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is. The charts stay hidden until
    the first figure arrives; the draft tree and the heads' table show when given HTML and hide when given ""."""
    skip = gr.skip()
    chart = gr.update(value=figure, visible=True) if figure is not None else None

    def shown(markup):
        if markup is None:
            return None
        return gr.update(value=markup, visible=True) if markup else gr.update(visible=False)

    return tuple(skip if v is None else v for v in (spec_html, base_html, chart, stats, status, history, state,
                                                     shown(tree), shown(heads)))


# ------------------------------------------------------------------------------------------------- handlers


def generate(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p, top_k, seed,
             max_new_tokens, stop_strings, chat_template, tree_nodes=0, confidence=None, lookup=False, history=None,
             request: gr.Request = None):
    """The Generate button: validate, wait for the device, load, then stream both runs (see module doc).

    The parameters follow the order of the app's inputs; ``tree_nodes``, ``confidence`` and ``lookup`` came last
    (before the session history, which is server-side state), so API clients written before them still work and
    get a chain with the default confidence gate and no lookup."""
    history = list(history) if isinstance(history, list) else []
    try:
        settings = parse_settings(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature,
                                  top_p, top_k, seed, max_new_tokens, stop_strings, chat_template, tree_nodes,
                                  confidence, lookup)
    except Exception as error:  # noqa: BLE001 - bad input of any shape is a message, never a crash
        log_failure("checking the inputs", error)
        yield from _fail(error)
        return
    session, cancel = RUNS.start(request)
    owner = f"{session}:{uuid.uuid4().hex}"
    loaders: list[threading.Thread] = []  # background loads of this run (they cannot be interrupted)
    try:
        timeout = 0.0  # the first try does not wait: a visitor in line sees their place at once
        while not DEVICE.acquire(owner, "another session is generating", timeout=timeout):
            timeout = 0.5
            if cancel.is_set():
                return
            yield _outputs(status=waiting_status(DEVICE.ahead(owner), DEVICE.holder, settings.notes))
        yield from _generate_locked(settings, history, cancel, loaders, session)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        log_failure("generation", error)
        yield from _fail(error)
    finally:
        _release(owner, loaders)
        RUNS.finish(session, cancel)
        if session.startswith(LOCAL_PREFIX):  # no browser session to press Stop later
            with _VIEWS_LOCK:
                _VIEWS.pop(session, None)


def waiting_status(ahead: int, holder: str, notes=()) -> str:
    """The status of a run waiting in line for the device."""
    runs = "1 run is" if ahead == 1 else f"{ahead} runs are"
    what = f" ({holder})" if holder else ""
    return render.status_html(f"Waiting for the device… {runs} ahead of yours{what}. Runs take turns so that "
                              f"each one's timing is undisturbed.", "wait", notes=notes)


def _events_in_background(events: Iterator[PassEvent], cancel: threading.Event, threads: list[threading.Thread],
                          tick_s: float = 0.25) -> Iterator[PassEvent | None]:
    """Drive the engine's ``events`` in a thread (appended to ``threads``) and yield each event as it arrives, or
    None every ``tick_s`` while none does, so the handler can refresh its status and notice Stop during a long
    forward (a prefill of thousands of tokens takes many seconds on a CPU). On ``cancel`` the thread stops after
    the forward in progress (it cannot be interrupted) and the caller returns at once; the device stays held
    until the thread ends (:func:`_release`). An engine error is re-raised in the caller's thread."""
    items: queue.SimpleQueue = queue.SimpleQueue()
    done = object()
    left = threading.Event()  # the caller stopped reading (Stop, or Gradio closed the handler)

    def work() -> None:
        try:
            for event in events:
                items.put(event)
                if cancel.is_set() or left.is_set():
                    break
        except RunCancelled:  # Stop during a forward: the engine started no other one
            pass
        except BaseException as error:  # handed to the caller's thread
            items.put(_Failure(error))
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
            items.put(done)

    thread = threading.Thread(target=work, name=RUN_THREAD, daemon=True)
    threads.append(thread)
    thread.start()
    try:
        while True:
            try:
                item = items.get(timeout=tick_s)
            except queue.Empty:
                yield None
                continue
            if item is done:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        left.set()


@dataclass
class _Failure:
    error: BaseException


def _release(owner: str, loaders: list[threading.Thread]) -> None:
    """Free the device at once, or, when a model load or a run this run started is still going (it was stopped
    during a load or a long forward), as soon as it ends, so two never overlap. Either way the run's worker is
    free now."""
    DEVICE.leave(owner)
    for thread in loaders:  # a stopped run's engine thread usually ends within one pass (a load takes longer)
        if thread.name == RUN_THREAD:
            thread.join(timeout=0.5)
    alive = [thread for thread in loaders if thread.is_alive()]
    if not alive:
        DEVICE.release(owner)
        return
    DEVICE.relabel(owner, "finishing the model load or forward pass of a stopped run")

    def wait_then_release() -> None:
        for thread in alive:
            thread.join()
        DEVICE.release(owner)

    threading.Thread(target=wait_then_release, name="specviz-release", daemon=True).start()


def _fail(error: BaseException):
    """Say what went wrong; clear the panes, stats and charts so an earlier run's figures are not mistaken for
    this one's (earlier runs stay listed in the history)."""
    message = _message_for(error)
    gr.Warning(html.escape(message))
    blank = render.placeholder_html("No result: this run did not start or did not finish (see the message above).")
    out = _outputs(spec_html=blank, base_html=blank, stats="", status=render.status_html(message, "error"), tree="",
                   heads="")
    yield out[:2] + (gr.update(visible=False),) + out[3:]


def _generate_locked(settings: Settings, history: list[dict], cancel: threading.Event,
                     loaders: list[threading.Thread], session: str = ""):
    from specviz.models import load_model

    messages: queue.SimpleQueue[str] = queue.SimpleQueue()
    latest = [f"Loading the target {settings.target}…"]
    started = time.monotonic()

    def loading_status(**hide) -> tuple:
        while not messages.empty():
            latest[0] = messages.get()
        seconds = time.monotonic() - started
        return _outputs(status=render.status_html(f"{latest[0]} ({seconds:.0f} s)", "busy", notes=settings.notes),
                        **hide)

    yield loading_status(tree="", heads="")  # an earlier run's draft tree and heads' table go
    target = yield from _each(_in_background(lambda say: load_model(settings.target, progress=say), messages.put,
                                             loaders), loading_status, cancel)
    if cancel.is_set():
        return
    if settings.exit_layer is not None and not 1 <= settings.exit_layer < target.num_layers:
        raise InputError(f"The early-exit layer must be between 1 and {target.num_layers - 1} for "
                         f"{target.label} ({target.num_layers} layers); got {settings.exit_layer}.")
    config = settings.config()
    drafter = None
    if settings.drafter != "none":
        latest[0] = f"Preparing the drafter ({DRAFTER_LABELS[settings.drafter]})…"
        drafter = yield from _each(_in_background(
            lambda say: make_drafter(settings.drafter, target, draft_spec=settings.draft_model,
                                     exit_layer=settings.exit_layer, tree_nodes=settings.drafted_tree_nodes,
                                     min_confidence=settings.min_confidence, lookup=settings.lookup, progress=say),
            messages.put, loaders),
            loading_status, cancel)
    if cancel.is_set():
        return
    prompt_ids, note = fit_prompt_for(settings, target, drafter)
    notes = [*settings.notes, *([note] if note else [])]
    if note:
        gr.Info(html.escape(note))
    view = RunView(settings, target.label, getattr(drafter, "name", "none"),
                   render.Pane(target.tokenizer) if drafter is not None else None,
                   render.Pane(target.tokenizer, separators=False), notes=notes, heads=_head_accuracy(drafter))
    with _VIEWS_LOCK:
        _VIEWS[session] = view
    runs = "both runs read" if drafter is not None else "the target reads"
    reading_since = time.monotonic()

    def reading_status() -> str:
        return render.status_html(
            f"Reading the prompt: {runs} its {len(prompt_ids):,} tokens in one forward each (the prefill; a long "
            f"prompt takes a while on a CPU)… ({time.monotonic() - reading_since:.0f} s)", "busy", notes=notes)

    yield _outputs(status=reading_status())
    base_events = standard_generate(target, prompt_ids, config, cancel=cancel)
    events = race(speculative_generate(target, drafter, prompt_ids, config, cancel=cancel), base_events) \
        if drafter else base_events
    stream = _events_in_background(events, cancel, loaders)
    try:
        yield from _stream(view, stream, cancel, reading_status)
    finally:  # also when Gradio closes this handler: the engine thread stops after its current forward
        stream.close()
    if not (cancel.is_set() or view.cancelled):
        history.insert(0, view.summary())
        del history[HISTORY_ROWS:]
        yield _outputs(status=view.status(), history=history_html(history), state=history)


def _head_accuracy(drafter) -> HeadAccuracy | None:
    """A per-head accuracy counter for a Medusa drafter (None for the others)."""
    heads = getattr(drafter, "heads", None)
    count = getattr(heads, "num_heads", None)
    return HeadAccuracy(int(count)) if isinstance(count, int) and count > 0 else None


def fit_prompt_for(settings: Settings, target, drafter=None) -> tuple[list[int], str]:
    """The prompt's ids within what fits: the target's context window less the new tokens and the draft tokens a
    pass may add, and the operator's ``SPECVIZ_MAX_PROMPT_TOKENS``. A longer prompt loses its start (the chat
    template stays whole).

    Only the target sets the budget: the drafter never changes what the target reads (the baseline reads the same
    ids). ``drafter`` is used only to tell the user when a draft model's own, shorter window ends during the run
    (it then stops drafting and the target decodes alone).

    Returns (ids, note): the note is "" when nothing needs saying, else one sentence per fact (the cut, the draft
    model's window). Raises InputError (one sentence) when max new tokens alone do not fit the window, or for a
    prompt that cannot be encoded (empty, or a typed control token the tokenizer cannot keep as text)."""
    from specviz.drafters.model import window_note
    from specviz.models import PromptTooLongError, context_window, fit_prompt

    window = context_window(target)
    budget, limits = None, []
    if window is not None:
        reserve = settings.max_new_tokens + (MAX_K if settings.adaptive_k else settings.k) + 1
        budget = window - reserve
        limits.append(f"the context window of {window:,} tokens less {reserve:,} for the new and drafted tokens")
        if budget < 1:
            most = max(1, window - (MAX_K if settings.adaptive_k else settings.k) - 1 - 64)
            raise InputError(f"Max new tokens ({settings.max_new_tokens}) does not fit the target's context window "
                             f"({window:,} tokens, drafts and prompt included): choose at most {most:,}.")
    if settings.max_prompt_tokens is not None and (budget is None or settings.max_prompt_tokens < budget):
        budget = settings.max_prompt_tokens
        limits = [f"the server's limit of {budget:,} prompt tokens (SPECVIZ_MAX_PROMPT_TOKENS)"]
    try:
        fit = fit_prompt(target.tokenizer, settings.prompt, budget, use_chat_template=settings.chat_template)
    except PromptTooLongError as error:
        raise InputError(f"{error} Lower max new tokens.") from None
    except ValueError as error:  # an empty prompt, an unencodable control token: already one sentence
        raise InputError(str(error)) from None
    notes = []
    if fit.truncated:
        notes.append(f"The prompt was too long ({fit.original_tokens:,} tokens): its start was cut, keeping its "
                     f"last part ({len(fit.ids):,} tokens with the chat template) to fit {limits[0]}.")
    notes.append(window_note(drafter, len(fit.ids), settings.max_new_tokens))
    return fit.ids, " ".join(note for note in notes if note)


def _each(inner: Iterator[None], status: Callable[[], tuple], cancel: threading.Event | None = None):
    """Drive ``inner`` (a background task), yielding ``status()`` while it runs; returns its result, or None
    at once when ``cancel`` is set (the task goes on in its thread; see :func:`_release`)."""
    while True:
        if cancel is not None and cancel.is_set():
            return None
        try:
            next(inner)
        except StopIteration as done:
            return done.value
        yield status()


def _stream(view: RunView, events: Iterator[PassEvent | None], cancel: threading.Event,
            idle_status: Callable[[], str] | None = None):
    """Fold events into ``view``; yield the panes and stats at most every UPDATE_INTERVAL_S, charts less often.
    ``events`` may yield None while the engine computes (:func:`_events_in_background`): then Stop is noticed at
    once, and before the first event ``idle_status()`` is shown about once a second (a ticking prefill timer)."""
    last_update = last_chart = last_idle = 0.0
    seen = False
    for event in events:
        if cancel.is_set() or view.cancelled:  # Stop: stop_run shows the view as it is now
            return
        if event is None:
            now = time.monotonic()
            if not seen and idle_status is not None and now - last_idle >= 1.0:
                last_idle = now
                yield _outputs(status=idle_status())
            continue
        seen = True
        view.add(event)
        now = time.monotonic()
        slower = min(4.0, max(1.0, view.base_stats.generated / 256))  # long outputs: big HTML, fewer refreshes
        if now - last_update >= UPDATE_INTERVAL_S * slower:
            chart = tree = heads = None
            if now - last_chart >= CHART_INTERVAL_S * slower:  # the tree and the heads' table at the charts' rate
                chart, tree, heads, last_chart = view.figure(), view.tree_html(), view.heads_html(), now
            last_update = now
            yield _outputs(view.spec_html(), view.base_html(), chart, view.stats_html(), view.status(), tree=tree,
                           heads=heads)
    yield _outputs(view.spec_html(), view.base_html(), view.figure(), view.stats_html(), view.status(),
                   tree=view.tree_html(every_pass=True), heads=view.heads_html())


def stop(request: gr.Request = None):
    """The Stop button: flag the session's run as cancelled (the generator ends at its next event and releases
    the device; Gradio also cancels the event). Returns the status line. Only the caller's own session is
    stopped: a request without a session stops nothing, and a call with no request at all (Python code in this
    process) stops the runs started without a request."""
    RUNS.cancel(request)
    return stopped_status()


def stopped_status() -> str:
    """The status line after a Stop."""
    return render.status_html("Stopped.", "info")


def stop_run(history=None, request: gr.Request = None):
    """The Stop button: cancel the session's run (:func:`stop`) and show what it made so far as its result
    (:func:`stopped_view`). Returns a tuple in :data:`OUTPUTS` order."""
    status = stop(request)
    return stopped_view(history, request, status=status)


def stopped_view(history=None, request: gr.Request = None, status: str | None = None):
    """The result of a stopped run, as a tuple in :data:`OUTPUTS` order: both panes without the typing cursor,
    the stats with finish reason "stopped" and the output check up to the stop, the final charts and draft tree,
    the status, and the run history with the run added (marked stopped). When no run was streaming (still
    loading, or finished on its own) only the status changes. The Stop button calls it a second time, one round
    trip later, to re-send the view after any update the cancelled run still had in flight; the history row is
    added once."""
    key = session_key(request)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key) if key else None
    history = list(history) if isinstance(history, list) else []
    if view is None:
        return _outputs(status=status or stopped_status())
    if view.mark_stopped() and not view.empty:
        history.insert(0, view.summary())
        del history[HISTORY_ROWS:]
    elif not view.cancelled:  # it finished on its own: its result stays as it is
        return _outputs(status=view.status())
    if view.empty:  # stopped while the prompt was read: nothing was measured, so no figures and no history row
        blank = render.placeholder_html("Stopped before the first token: nothing was generated or measured.")
        out = _outputs(blank, blank, None, "", view.status(), history_html(history), history, tree="", heads="")
        return out[:2] + (gr.update(visible=False),) + out[3:]
    return _outputs(view.spec_html(), view.base_html(), view.figure(), view.stats_html(), view.status(),
                    history_html(history), history, tree=view.tree_html(every_pass=True), heads=view.heads_html())


def release_session(request: gr.Request = None):
    """When a browser tab closes: cancel its run and forget its last view."""
    RUNS.cancel_session(request)
    key = session_key(request)
    if key:
        with _VIEWS_LOCK:
            _VIEWS.pop(key, None)


def preload(spec: str = "embedded") -> threading.Thread:
    """Load ``spec`` in a background thread under the device lock, so the first Generate does not wait for it.
    Returns the thread (already started). Logs the operator policy in force."""
    log.info("%s", current_policy().describe())

    def work() -> None:
        from specviz.models import ModelLoadError, load_model

        owner = f"preload:{uuid.uuid4().hex}"
        DEVICE.acquire(owner, f"the model '{spec}' is loading", timeout=3600)
        try:
            log.info("pre-loading %s", spec)
            load_model(spec, progress=lambda message: log.info("%s", message))
            log.info("pre-loaded %s", spec)
        except ModelLoadError as error:
            log.warning("could not pre-load %s: %s", spec, error)
        finally:
            DEVICE.release(owner)

    thread = threading.Thread(target=work, name="specviz-preload", daemon=True)
    thread.start()
    return thread


def drafter_changed(drafter: str):
    """Show the draft-model box for 'model', the exit layer for 'early-exit', and the tree size, the confidence
    gate and lookup first for the head drafters (eagle, medusa); k only matters with a drafter. Outputs: draft
    model, exit layer, tree nodes, confidence gate, lookup first, k, adaptive k."""
    heads = drafter in HEAD_DRAFTERS
    head_only = gr.update(visible=heads, interactive=heads)
    return (gr.update(visible=drafter == "model"), gr.update(visible=drafter == "early-exit"),
            head_only, head_only, head_only,
            gr.update(interactive=drafter != "none"), gr.update(interactive=drafter != "none"))
