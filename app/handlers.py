"""Event handlers: small named generators that consume engine events and yield UI updates.

:func:`generate` validates the inputs, waits for the device, loads the target (and the drafter), then runs the
speculative stream and its baseline through :func:`specviz.race.race` (one thread, interleaved by each run's own
clock, so neither is timed while the other computes) and yields rendered panes, stats and charts at a bounded
rate. A process-wide :class:`DeviceLock` makes two browser sessions' generations take turns. :func:`stop` cancels
a session's generation at once and releases the lock.

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
from specviz.drafters.registry import DRAFTER_KEYS, DRAFTERS, make_drafter
from specviz.engine import MAX_K, GenerationConfig, speculative_generate, standard_generate
from specviz.events import PassEvent
from specviz.metrics import RunStats, speedup
from specviz.race import race
from specviz.verify import SamplingConfig

log = logging.getLogger("specviz.app")

OUTPUTS = ("spec-output", "baseline-output", "charts", "stats", "status", "history", "history-state")
"""What :func:`generate` yields, in order (the components' elem_ids)."""

UPDATE_INTERVAL_S = 0.25  # token panes and stats: at most 4 refreshes a second
CHART_INTERVAL_S = 0.5  # charts: at most 2 a second (plotly redraws cost the browser)
MAX_NEW_TOKENS = 1024
MAX_PROMPT_CHARS = 20_000
HISTORY_ROWS = 12
DRAFTER_LABELS = {c.key: c.label for c in DRAFTERS}


class InputError(ValueError):
    """Bad input from the user; the message is one sentence for them."""


# ------------------------------------------------------------------------------------------------- device


class DeviceLock:
    """A process-wide lock around whole generations, with an owner so a Stop can release only its own run."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: str | None = None
        self._what = ""

    def acquire(self, owner: str, what: str, timeout: float) -> bool:
        """Take the lock for ``owner`` (doing ``what``) within ``timeout`` seconds; True on success."""
        with self._cond:
            if self._owner is not None and not self._cond.wait_for(lambda: self._owner is None, timeout):
                return False
            self._owner, self._what = owner, what
            return True

    def release(self, owner: str) -> bool:
        """Release the lock if ``owner`` holds it; True when released."""
        with self._cond:
            if self._owner != owner:
                return False
            self._owner, self._what = None, ""
            self._cond.notify_all()
            return True

    @property
    def holder(self) -> str:
        """What the current holder is doing ("" when free)."""
        return self._what

    @property
    def locked(self) -> bool:
        """Whether a run holds the device."""
        return self._owner is not None


DEVICE = DeviceLock()
_CANCEL: dict[str, threading.Event] = {}  # session -> the cancel flag of its current run
_CANCEL_LOCK = threading.Lock()


def _session_key(request) -> str:
    key = getattr(request, "session_hash", None) if request is not None else None
    return key or f"local-{uuid.uuid4().hex}"


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

    def config(self) -> GenerationConfig:
        """The engine's configuration for these settings."""
        sampling = SamplingConfig(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, seed=self.seed)
        return GenerationConfig(max_new_tokens=self.max_new_tokens, sampling=sampling, k=self.k,
                                adaptive_k=self.adaptive_k, stop_strings=self.stop_strings)

    @property
    def greedy(self) -> bool:
        """Temperature 0: argmax decoding."""
        return self.temperature == 0


def _number(value, name: str, low: float, high: float, integer: bool) -> float | int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number.") from None
    if number != number or not low <= number <= high:
        raise InputError(f"{name} must be between {low:g} and {high:g} (got {value}).")
    if integer:
        if number != int(number):
            raise InputError(f"{name} must be a whole number (got {value}).")
        return int(number)
    return number


def parse_stop_strings(text: str | None) -> tuple[str, ...]:
    """Stop strings from a comma- or newline-separated box; ``\\n`` written out means a newline."""
    if not text:
        return ()
    items = [part.strip() for line in text.splitlines() for part in line.split(",")]
    return tuple(dict.fromkeys(s.replace("\\n", "\n") for s in items if s))


def parse_settings(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p, top_k,
                   seed, max_new_tokens, stop_strings, chat_template) -> Settings:
    """Check every input; raises :class:`InputError` with a message for the user."""
    if prompt is None or not str(prompt).strip():
        raise InputError("The prompt is empty: type something (or pick an example) first.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"The prompt is too long ({len(prompt)} characters; at most {MAX_PROMPT_CHARS}).")
    target = (target or "").strip() or "embedded"
    if drafter not in DRAFTER_KEYS:
        raise InputError(f"Unknown drafter {drafter!r}: choose one of {', '.join(DRAFTER_KEYS)}.")
    draft_model = (draft_model or "").strip() or None
    if drafter == "model" and draft_model is None:
        raise InputError("The 'model' drafter needs a draft model: a hub id or a local folder.")
    layer = None
    if drafter == "early-exit" and exit_layer not in (None, "", 0):
        layer = int(_number(exit_layer, "The early-exit layer", 0, 10_000, True)) or None
    temperature = float(_number(temperature, "Temperature", 0, 5, False))
    return Settings(
        prompt=str(prompt), target=target, drafter=drafter, draft_model=draft_model, exit_layer=layer,
        k=int(_number(k, "Draft length k", 1, MAX_K, True)), adaptive_k=bool(adaptive_k), temperature=temperature,
        top_p=float(_number(top_p if top_p not in (None, "") else 1.0, "Top-p", 0.01, 1, False)),
        top_k=int(_number(top_k if top_k not in (None, "") else 0, "Top-k", 0, 1_000_000, True)),
        seed=int(_number(seed if seed not in (None, "") else 0, "Seed", 0, 2**63 - 1, True)),
        max_new_tokens=int(_number(max_new_tokens, "Max new tokens", 1, MAX_NEW_TOKENS, True)),
        stop_strings=parse_stop_strings(stop_strings), chat_template=bool(chat_template),
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
    cancelled: bool = False

    def add(self, event: PassEvent) -> None:
        """Fold one engine event into its pane and statistics."""
        if event.run == "baseline":
            self.base.add(event)
            self.base_stats.add(event)
            self.base_gaps.extend([event.near_tie_gap] * len(event.emitted_ids))
        elif self.spec is not None:
            self.spec.add(event)
            self.spec_stats.add(event)

    @property
    def finished(self) -> bool:
        """Both runs reached a finish reason."""
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
        return render.stats_html(spec, self.base_stats, self.comparison(), greedy=self.settings.greedy)

    def figure(self):
        """The charts."""
        spec = self.spec_stats if self.spec is not None else RunStats(run="speculative")
        return dashboard_figure(spec, self.base_stats, adaptive_k=self.settings.adaptive_k)

    def status(self) -> str:
        """One line: what is happening."""
        seconds = time.monotonic() - self.started
        if self.cancelled:
            return render.status_html("Stopped.", "info")
        if self.finished:
            reason = self.base_stats.finish_reason
            return render.status_html(
                f"Done in {seconds:.1f} s ({self.base_stats.generated} tokens, finish reason: {reason}) · "
                f"{self.target_label}", "done")
        n = self.spec_stats.passes if self.spec is not None else self.base_stats.passes
        return render.status_html(f"Generating… pass {n} · both runs take turns on one device, each timed on "
                                  f"its own clock", "busy")

    def summary(self) -> dict:
        """A row of the run history."""
        s, b = self.spec_stats, self.base_stats
        return {
            "drafter": self.drafter_name if self.spec is not None else "none",
            "k": _k_label(self.settings), "temperature": self.settings.temperature,
            "tokens": b.generated, "acceptance": s.acceptance_rate if self.spec is not None else None,
            "tokens_per_pass": s.tokens_per_pass if self.spec is not None else None,
            "spec_tps": s.tokens_per_s if self.spec is not None else None, "base_tps": b.tokens_per_s,
            "speedup": speedup(s, b) if self.spec is not None else None,
            "identical": self.comparison().identical if self.settings.greedy else None,  # sampling: ids may differ
        }


def _k_label(settings: Settings) -> str:
    if settings.drafter == "none":
        return ""
    return f"k = {settings.k}" + (" (adaptive)" if settings.adaptive_k else "")


# ------------------------------------------------------------------------------------------------- helpers


def _in_background(fn: Callable, on_message: Callable[[str], None]) -> Iterator[None]:
    """Run ``fn(progress)`` in a thread; yield every 0.25 s until it ends; re-raise its error. The result is
    the generator's return value (use ``result = yield from _in_background(...)``)."""
    box: dict = {}

    def work() -> None:
        try:
            box["value"] = fn(on_message)
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error

    thread = threading.Thread(target=work, name="specviz-load", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.25)
        yield None
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _message_for(error: BaseException) -> str:
    """A user-facing sentence for an error (never a stack trace)."""
    from specviz.models import ModelLoadError

    if isinstance(error, (InputError, ModelLoadError)):
        return str(error)
    if isinstance(error, ValueError):
        return str(error) or "Invalid input."
    if isinstance(error, NotImplementedError):
        return f"Not supported yet: {error}"
    first = (str(error).strip().splitlines() or [""])[0]
    return f"Something went wrong ({type(error).__name__}: {first}). The details are in the server log."


def history_html(history: list[dict]) -> str:
    """The run history table (newest first)."""
    return render.history_html(history)


def _outputs(spec_html=None, base_html=None, figure=None, stats=None, status=None, history=None, state=None):
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is. The charts stay hidden until
    the first figure arrives."""
    skip = gr.skip()
    chart = gr.update(value=figure, visible=True) if figure is not None else None
    return tuple(skip if v is None else v for v in (spec_html, base_html, chart, stats, status, history, state))


# ------------------------------------------------------------------------------------------------- handlers


def generate(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p, top_k, seed,
             max_new_tokens, stop_strings, chat_template, history, request: gr.Request = None):
    """The Generate button: validate, wait for the device, load, then stream both runs (see module doc)."""
    history = list(history or [])
    try:
        settings = parse_settings(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature,
                                  top_p, top_k, seed, max_new_tokens, stop_strings, chat_template)
    except InputError as error:
        yield from _fail(error)
        return
    session = _session_key(request)
    cancel = threading.Event()
    with _CANCEL_LOCK:
        previous = _CANCEL.get(session)
        if previous is not None:
            previous.set()
        _CANCEL[session] = cancel
    owner = f"{session}:{uuid.uuid4().hex}"
    try:
        while not DEVICE.acquire(owner, "another session is generating", timeout=0.5):
            if cancel.is_set():
                return
            holder = DEVICE.holder or "another run holds it"
            yield _outputs(status=render.status_html(f"Waiting for the device… ({holder})", "wait"))
        yield from _generate_locked(settings, history, cancel)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        if not isinstance(error, (InputError, ValueError)):
            log.error("generation failed:\n%s", traceback.format_exc())
        yield from _fail(error)
    finally:
        DEVICE.release(owner)
        with _CANCEL_LOCK:
            if _CANCEL.get(session) is cancel:
                del _CANCEL[session]


def _fail(error: BaseException):
    message = _message_for(error)
    gr.Warning(html.escape(message))
    yield _outputs(status=render.status_html(message, "error"))


def _generate_locked(settings: Settings, history: list[dict], cancel: threading.Event):
    from specviz.models import encode_prompt, load_model

    messages: queue.SimpleQueue[str] = queue.SimpleQueue()
    latest = [f"Loading the target {settings.target}…"]
    started = time.monotonic()

    def loading_status() -> tuple:
        while not messages.empty():
            latest[0] = messages.get()
        seconds = time.monotonic() - started
        return _outputs(status=render.status_html(f"{latest[0]} ({seconds:.0f} s)", "busy"))

    yield loading_status()
    target = yield from _each(_in_background(lambda say: load_model(settings.target, progress=say), messages.put),
                              loading_status)
    if cancel.is_set():
        return
    prompt_ids = encode_prompt(target.tokenizer, settings.prompt, use_chat_template=settings.chat_template)
    if settings.exit_layer is not None and not 1 <= settings.exit_layer < target.num_layers:
        raise InputError(f"The early-exit layer must be between 1 and {target.num_layers - 1} for "
                         f"{target.label} ({target.num_layers} layers); got {settings.exit_layer}.")
    config = settings.config()
    drafter = None
    if settings.drafter != "none":
        latest[0] = f"Preparing the drafter ({DRAFTER_LABELS[settings.drafter]})…"
        drafter = yield from _each(_in_background(
            lambda say: make_drafter(settings.drafter, target, draft_spec=settings.draft_model,
                                     exit_layer=settings.exit_layer, progress=say), messages.put), loading_status)
    if cancel.is_set():
        return
    view = RunView(settings, target.label, getattr(drafter, "name", "none"),
                   render.Pane(target.tokenizer) if drafter is not None else None,
                   render.Pane(target.tokenizer, separators=False))
    base_events = standard_generate(target, prompt_ids, config)
    events = race(speculative_generate(target, drafter, prompt_ids, config), base_events) if drafter else base_events
    yield from _stream(view, events, cancel)
    if not view.cancelled:
        history.insert(0, view.summary())
        del history[HISTORY_ROWS:]
        yield _outputs(status=view.status(), history=history_html(history), state=history)


def _each(inner: Iterator[None], status: Callable[[], tuple]):
    """Drive ``inner`` (a background task), yielding ``status()`` while it runs; returns its result."""
    while True:
        try:
            next(inner)
        except StopIteration as done:
            return done.value
        yield status()


def _stream(view: RunView, events: Iterator[PassEvent], cancel: threading.Event):
    """Fold events into ``view``; yield the panes and stats at most every UPDATE_INTERVAL_S, charts less often."""
    last_update = last_chart = 0.0
    for event in events:
        if cancel.is_set():
            view.cancelled = True
            return
        view.add(event)
        now = time.monotonic()
        slower = min(4.0, max(1.0, view.base_stats.generated / 256))  # long outputs: big HTML, fewer refreshes
        if now - last_update >= UPDATE_INTERVAL_S * slower:
            chart = None
            if now - last_chart >= CHART_INTERVAL_S * slower:
                chart, last_chart = view.figure(), now
            last_update = now
            yield _outputs(view.spec_html(), view.base_html(), chart, view.stats_html(), view.status())
    yield _outputs(view.spec_html(), view.base_html(), view.figure(), view.stats_html(), view.status())


def stop(request: gr.Request = None):
    """The Stop button: flag the session's run as cancelled (the generator ends at its next event and releases
    the device; Gradio also cancels the event). Returns the status line."""
    key = getattr(request, "session_hash", None) if request is not None else None
    with _CANCEL_LOCK:
        flags = [_CANCEL[key]] if key in _CANCEL else ([] if key else list(_CANCEL.values()))
    for flag in flags:
        flag.set()
    return stopped_status()


def stopped_status() -> str:
    """The status line after a Stop."""
    return render.status_html("Stopped.", "info")


def release_session(request: gr.Request = None):
    """When a browser tab closes: cancel its run."""
    key = getattr(request, "session_hash", None) if request is not None else None
    with _CANCEL_LOCK:
        flag = _CANCEL.get(key) if key else None
    if flag is not None:
        flag.set()


def preload(spec: str = "embedded") -> threading.Thread:
    """Load ``spec`` in a background thread under the device lock, so the first Generate does not wait for it.
    Returns the thread (already started)."""

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
    """Show the draft-model box for 'model', the exit layer for 'early-exit'; k only matters with a drafter."""
    return (gr.update(visible=drafter == "model"), gr.update(visible=drafter == "early-exit"),
            gr.update(interactive=drafter != "none"), gr.update(interactive=drafter != "none"))
