"""What a Live run costs here, learned from this process's own runs: the status says before a run how long it should
take (:func:`plan_text`), a long prefill is announced with its expected time (:func:`app.prefill_notes.long_prompt_note`), and the
default max new tokens is derived once from the measured step cost (:func:`derived_default_tokens`).

Where the figures come from:

- :func:`tuned_costs`: forwards timed here (:func:`timed_forwards`: the one-token step and a wide forward, at the
  threads the runs use), before any run of a target; the app's start-up times them and then makes a short real run
  (:func:`app.live.warmup.warm_up`); forwards a tab times later (:func:`note_forwards`: the Why tab's Measure, a
  Batching sweep) replace them: the newest measurement plans (:func:`newest_costs` for the Why and Batching plans);
- every finished run's own costs (:func:`learn_costs`, :func:`costs_of_run`): the median of the latest
  :data:`COST_RUNS` runs of a target plans the next (:func:`known_costs`);
- for a drafter not run here yet, its decoding time as a share of standard decoding's (:mod:`app.shares`, read by
  the Arena's estimate too): measured by an Arena or Live run here, else on the CPU its prior measured on the
  project's CPU.

:func:`app.prefill_notes.settle_prefill_note`: an estimate said before a long prefill ("take about 2 min 47 s to read") is replaced
by the time the prefill took as soon as both runs have read the prompt (:func:`app.prefill_notes.settled_after_prefill`), and at the
latest when the run ends, so no estimate is left under "Done in 28.6 s".

The stores (:data:`_COSTS`, :data:`_TUNED`, :data:`_DEFAULT_TOKENS`) are shared by every session of this process.
A plan's range and the machine's load it moves with are :mod:`app.estimates`' (shared with the other tabs).
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import gradio as gr

from app import device, estimates, shares
from app.device import load_target
from app.estimates import MIN_SPREAD, NOW, PROBE_SPREAD, Estimate, is_busy, make_estimate, span_text
from app.forward_timing import timed_forwards
from app.inputs import Settings
from app.messages import log_failure
from app.render import seconds_text
from app.shares import Method, MethodShare
from specviz.runtime.policy import current_policy

if TYPE_CHECKING:  # the Live tab's run view; only read here, so the Arena can use this module too
    from app.live.view import RunView

_seconds = functools.partial(seconds_text, at_least=1)  # a plan never reads "0 s"

DEFAULT_RUN_S = 20.0  # the derived default of max new tokens aims at a run about this long here
MIN_DEFAULT_TOKENS = 16
DEFAULT_TOKENS_WAIT_S = 3.0  # a page load waits this long for the device to derive its default max new tokens
DEFAULT_TOKENS_RETRY_S = 5.0  # a page opened before the default was derived asks again this often ...
DEFAULT_TOKENS_TRIES = 36  # ... this many times (3 min: the start-up's measurement), then keeps its value
LONG_PREFILL_S = 10.0  # an expected prefill longer than this is announced before the run
CHARS_PER_TOKEN = 4.0  # for an estimate before the prompt is tokenized (English text, BPE)
SPEC_SHARE = 0.8  # before a speculative run was measured: its decoding taken as this share of the baseline's
STEP_OVERHEAD = 1.2  # a decoding step's wall time over its forward alone (sampling, bookkeeping, the page)
COST_RUNS = 3  # estimates use the median of this many latest runs of a target (of each drafter, for its own cost)
KEPT_RUNS = 24  # the latest runs kept per target, of every drafter
OTHER_DRAFTER_SPREAD = (0.5, 2.5)  # a plan for a drafter not run here yet, with no share known (app.shares: none
# measured here, no prior on this device), from other drafters' runs: at least this
PREFILL_SAMPLE_TOKENS = 256  # a run's prefill tells the cost per prompt token from this many prompt tokens on; a
# shorter one is mostly a forward's fixed cost, and read per token it makes a long prompt look minutes long


@dataclass(frozen=True)
class RunCosts:
    """What a Live run costs on this machine for one target, in wall-clock ms (both runs share one device).

    A prefill of n prompt tokens costs ``prefill_fixed_ms + n * prefill_ms_per_token`` per run: a forward's fixed
    cost (about one decoding step) plus a cost per token read.

    Attributes:
        prefill_ms_per_token: one run's prefill, per prompt token beyond its fixed cost.
        base_ms_per_token: the baseline's decoding, per token after the first.
        spec_ms_per_token: the speculative run's decoding, per token after the first (None: not measured yet;
            :data:`SPEC_SHARE` of the baseline's is assumed).
        source: where the figures come from, in words, for the status line.
        spread: (low, high) factors on a planned time: the range a run's time is expected in (earlier runs'
            spread, at least :data:`MIN_SPREAD`; :data:`PROBE_SPREAD` from one timed step).
        prefill_fixed_ms: one run's prefill cost whatever the prompt's length (a forward's fixed cost).
    """

    prefill_ms_per_token: float
    base_ms_per_token: float
    spec_ms_per_token: float | None
    source: str
    spread: tuple[float, float] = (1.0, 1.0)
    prefill_fixed_ms: float = 0.0
    prompt_tokens: int | None = None  # learned from a run: the prompt it read (its prefill's sample size)
    answer_tokens: int | None = None  # a run's answer length when it ended on its own (EOS, a stop) before the cap;
    # planned from several runs: the median of those that did (None: none did)
    answers: tuple[tuple[int, int], ...] = ()  # (prompt key, answer tokens) of the recent runs that ended on their own
    measured_at: float | None = field(default=None, compare=False)  # when measured (time.time() s; None: unknown)
    drafter: str | None = None  # the drafter of the run measured (its decoding cost is that drafter's); None: a step
    method: Method | None = None  # the run's method as the Arena names it (:func:`app.shares.live_method`: drafter
    # variant and k label); None: standard decoding, a step, or a drafter setting the Arena does not run
    measured_load: tuple[float, int] | None = field(default=None, compare=False)  # other programs' load while
    # measured: (load, the CPU count), from :func:`app.estimates.machine_load`; None: unknown. The step costs
    # already hold that load's slowness, so an estimate widens only for the load added since

    def prefill_s(self, prompt_tokens: int, drafter: bool) -> float:
        """Seconds before the first token: both runs read the prompt (one when there is no drafter)."""
        one = self.prefill_fixed_ms + prompt_tokens * self.prefill_ms_per_token
        return (2 if drafter else 1) * one / 1000.0

    def run_s(self, prompt_tokens: int, new_tokens: int, drafter: bool) -> float:
        """Seconds of a whole run: the prefill(s), then ``new_tokens`` of the baseline and, with a drafter, of the
        speculative run."""
        spec = self.spec_ms_per_token if self.spec_ms_per_token is not None else SPEC_SHARE * self.base_ms_per_token
        per_token = self.base_ms_per_token + (spec if drafter else 0.0)
        return self.prefill_s(prompt_tokens, drafter) + max(new_tokens - 1, 0) * per_token / 1000.0


RECENT_RUNS = "recent runs of this model on this server"
"""Where a planned time learned from finished runs comes from, in words: the runs of every visitor of this server
(:data:`_COSTS` is shared), so a visitor with no run of their own yet is not told "your runs"."""
_COSTS: dict[str, list[RunCosts]] = {}  # target spec -> its latest measured runs (newest last)
_TUNED: dict[str, RunCosts] = {}  # target spec -> costs from a one-token step measured here (before any run)
_COSTS_LOCK = threading.Lock()


def costs_of_run(view: RunView) -> RunCosts | None:
    """A finished run's costs per token on its wall clock (the runs' own clocks scaled by the wall time of the
    whole run, which adds rendering and the other run's turns); None for a run too short to tell. The prefill, on
    the baseline's own clock (it runs before the panes stream), is split into a fixed cost (one baseline step: a
    forward of one token) and a cost per prompt token beyond it."""
    s, b = view.spec_stats, view.base_stats
    own_ms = b.elapsed_ms + (s.elapsed_ms if view.spec is not None else 0.0)
    if view.ended is None or own_ms <= 0 or b.emitted < 2 or view.prompt_tokens < 1:
        return None
    scale = min(max((view.ended - view.started) * 1000.0 / own_ms, 1.0), 3.0)
    spec = None
    if view.spec is not None and s.emitted >= 2:
        spec = (s.elapsed_ms - s.prefill_ms) / s.emitted * scale
    step = (b.elapsed_ms - b.prefill_ms) / b.emitted  # own clock: one forward of one token
    fixed = min(step, b.prefill_ms)  # the prefill is not scaled: it runs before the panes stream
    answer = b.generated if b.finish_reason in ("eos", "stop") else None  # ended on its own, not at the cap
    return RunCosts((b.prefill_ms - fixed) / view.prompt_tokens, step * scale, spec, RECENT_RUNS,
                    prefill_fixed_ms=fixed, prompt_tokens=view.prompt_tokens, answer_tokens=answer,
                    answers=((prompt_key(view.settings.prompt), answer),) if answer is not None else (),
                    drafter=view.settings.drafter if view.spec is not None else None,
                    method=shares.live_method(view.settings) if view.spec is not None else None,
                    measured_load=estimates.machine_load())


def prompt_key(prompt: str) -> int:
    """A prompt's key among the recent runs' answer lengths (:attr:`RunCosts.answers`)."""
    return hash(prompt.strip())


def learn_costs(target: str, view: RunView) -> None:
    """Keep a finished run's costs for the estimates of the next runs of ``target``, and its drafter's share of
    standard decoding's time (:func:`app.shares.learn_shares`, under its method: :func:`app.shares.live_method`)."""
    costs = costs_of_run(view)
    learn_prompt_overhead(view.settings.prompt, view.prompt_tokens,
                          getattr(view.settings, "max_prompt_tokens", None))
    if costs is not None:
        costs = replace(costs, measured_at=time.time())
        with _COSTS_LOCK:
            runs = _COSTS.setdefault(target, [])
            runs.append(costs)
            del runs[:-KEPT_RUNS]
        share = shares.run_share(costs.spec_ms_per_token, costs.base_ms_per_token)
        method = shares.live_method(view.settings) if share is not None else None
        if method is not None:  # the Arena's estimate reads it too
            shares.learn_shares(target, {method: share})


def known_costs(target: str, drafter: str | None = None, method: Method | None = None) -> RunCosts | None:
    """The costs to plan a run of ``target`` with: the median of its latest runs (their load while measured: the
    median of those known; the prefill's cost per token floored by a wide forward's only when that was timed after
    the latest run), else the costs of the newest forwards timed here (:func:`tuned_or_none`: the start-up's, or a
    Why Measure's or Batching sweep's since), else None. With ``drafter`` (a registry key) the speculative run's cost per token and the range come from the latest
    runs of the same ``method`` (:func:`_own_runs`: drafter variant and k label; of ``drafter`` where ``method`` is
    None), kept apart (:data:`COST_RUNS` each). Where it has none, from its share of standard
    decoding's time (:func:`app.shares.share_for` of ``method``, the run's drafter and k as the Arena names them,
    :func:`app.shares.live_method`: measured by an Arena or Live run here, else on the CPU the drafter's prior measured
    on the project's CPU; :func:`_with_share`); else from the others' runs with the range widened to at least
    :data:`OTHER_DRAFTER_SPREAD` and the source saying so (a drafter's decoding may cost several times another's: a
    trial's estimate after n-gram runs was a third of an early-exit run's time)."""
    with _COSTS_LOCK:
        kept = list(_COSTS.get(target, ()))
        tuned = _TUNED.get(target)
    own = _own_runs(kept, drafter, method)
    share = shares.share_for(target, method) if drafter not in (None, "none") and not own else None
    if not kept:
        return _with_share(tuned, share, tuned.spread) if tuned is not None and share is not None else tuned
    costs = _median_costs(kept, tuned, own, widen=drafter not in (None, "none") and not own and share is None)
    return _with_share(costs, share, _base_spread(kept[-COST_RUNS:])) if share is not None else costs


def _own_runs(kept: list[RunCosts], drafter: str | None, method: Method | None) -> list[RunCosts]:
    """The latest :data:`COST_RUNS` of ``kept`` (newest last) that ran ``method`` (drafter variant and k label, as
    the Arena names it: an EAGLE run at k = 8 does not plan one at k = 4); where ``method`` is None (a setting the
    Arena does not run: a draft model of the visitor's choice, an early exit at a layer of its choice), those of
    ``drafter`` that had no method either. [] without ``drafter``."""
    if drafter is None:
        return []
    if method is not None:
        return [r for r in kept if r.method == method][-COST_RUNS:]
    return [r for r in kept if r.drafter == drafter and r.method is None][-COST_RUNS:]


def _median_costs(kept: list[RunCosts], tuned: RunCosts | None, own: list[RunCosts], widen: bool) -> RunCosts:
    """:func:`known_costs`' figures from the ``kept`` runs (newest last): the medians of the latest
    :data:`COST_RUNS`, the speculative run's cost and range from ``own`` (a drafter's own runs; [] : all runs');
    ``widen``: the range widened to at least :data:`OTHER_DRAFTER_SPREAD`, the source saying "with other drafters"."""
    runs = kept[-COST_RUNS:]
    spec, spread = _decoding_costs(own or runs)
    source = runs[-1].source
    if widen:
        spread = (min(spread[0], OTHER_DRAFTER_SPREAD[0]), max(spread[1], OTHER_DRAFTER_SPREAD[1]))
        source = f"{source}, with other drafters"
    loads = sorted((r.measured_load for r in runs if r.measured_load is not None), key=lambda load: load[0])
    long_reads = [r for r in kept if (r.prompt_tokens or 0) >= PREFILL_SAMPLE_TOKENS][-COST_RUNS:]
    per_token = _median(r.prefill_ms_per_token for r in long_reads) if long_reads else None
    if per_token is None:  # only short prompts read: a rough figure; a wide forward's, when larger, is the floor,
        # if timed after the latest run (an older one is not the machine now: a start-up's 28.6 ms a token, timed
        # at the wrong threads, planned a run of 6.5 s at 9-13 s after that run)
        newer = tuned is not None and (tuned.measured_at or 0.0) > (runs[-1].measured_at or 0.0)
        per_token = max(_median(r.prefill_ms_per_token for r in runs), tuned.prefill_ms_per_token if newer else 0.0)
    return RunCosts(per_token, _median(r.base_ms_per_token for r in runs),
                    spec if spec is not None else (tuned.spec_ms_per_token if tuned else None),
                    source, spread, prefill_fixed_ms=_median(r.prefill_fixed_ms for r in runs),
                    answer_tokens=_median(r.answer_tokens for r in runs),
                    answers=tuple(answer for r in kept for answer in r.answers), measured_at=runs[-1].measured_at,
                    measured_load=loads[len(loads) // 2] if loads else None)


def _base_spread(runs: list[RunCosts]) -> tuple[float, float]:
    """How far ``runs``' baseline costs per token lie from their median (factors), at least :data:`MIN_SPREAD`."""
    base = [r.base_ms_per_token for r in runs]
    middle = _median(base)
    return min(MIN_SPREAD[0], min(base) / middle), max(MIN_SPREAD[1], max(base) / middle)


def _with_share(costs: RunCosts, share: MethodShare, base_spread: tuple[float, float]) -> RunCosts:
    """``costs`` with the speculative run's decoding at ``share`` of the baseline's (its ms per token: the share
    times the baseline's), the range the baseline's (``base_spread``) times the share's on the whole decoding
    ((1 + low) / (1 + share) .. (1 + high) / (1 + share)), and the source saying where the share comes from: a run
    here, or the drafter's prior (:data:`app.shares.PRIOR_WORDS`). E.g. 100 ms a token, the early exit's prior 3.1
    (2.6-4.2), base spread (0.85, 1.25): 310 ms a token, range (0.746, 1.585)."""
    whole = 1.0 + share.share
    spread = (base_spread[0] * (1.0 + share.low) / whole, base_spread[1] * (1.0 + share.high) / whole)
    words = f"its decoding {shares.share_words(share)} standard decoding's time"
    said = (f"{shares.PRIOR_WORDS}: {words}" if isinstance(share, shares.PriorShare)
            else f"this drafter's share from its latest run here: {words}")
    if isinstance(share, shares.ScaledPrior):
        said += f" ({shares.SCALED_WORDS})"
    return replace(costs, spec_ms_per_token=share.share * costs.base_ms_per_token, source=f"{costs.source}; {said}",
                   spread=(min(1.0, spread[0]), max(1.0, spread[1])))


def _median(values):
    """The median (the upper one of an even count) of ``values`` that are not None; None when none is."""
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def _decoding_costs(runs: list[RunCosts]) -> tuple[float | None, tuple[float, float]]:
    """(the speculative run's ms per token, the range's factors) from ``runs``: the median of their speculative
    costs, and how far their whole decoding costs per token (baseline plus speculative) lie from their median, at
    least :data:`MIN_SPREAD`."""
    per_token = [r.base_ms_per_token + (r.spec_ms_per_token or SPEC_SHARE * r.base_ms_per_token) for r in runs]
    middle = _median(per_token)
    spread = (min(MIN_SPREAD[0], min(per_token) / middle), max(MIN_SPREAD[1], max(per_token) / middle))
    return _median(r.spec_ms_per_token for r in runs), spread


def newest_run(target: str) -> RunCosts | None:
    """The costs of the latest finished run of ``target`` (a key of :func:`learn_costs`), None before any: the
    figure of the machine as it is now, where :func:`known_costs`' median may still be a quieter moment's."""
    with _COSTS_LOCK:
        runs = _COSTS.get(target)
        return runs[-1] if runs else None


def as_probe(costs: RunCosts, wide: int) -> dict[int, float]:
    """``costs`` in the form of a probe (ms of one forward over n new tokens at batch 1, as
    :func:`specviz.measure.grid.probe_forward_ms` gives): {1: the one-token step, ``wide``: that many tokens at a wide
    forward's cost per token, never below one step}. E.g. 48 ms a step, 5 ms a token, wide 64: {1: 48.0, 64: 320.0}.
    The Why and Batching tabs plan a press from it before their own probe."""
    return {1: costs.base_ms_per_token, wide: max(costs.base_ms_per_token, wide * costs.prefill_ms_per_token)}


STARTUP_FORWARDS = "forwards timed on this machine"
"""The source of :func:`tuned_costs`' figures, in words (the start-up's forwards)."""


def tuned_or_none(spec: str) -> RunCosts | None:
    """The newest forwards timed of ``spec`` in this process (:func:`tuned_costs` at the start-up, or a tab's later
    ones: :func:`note_forwards`), None when none were: nothing is timed here."""
    with _COSTS_LOCK:
        return _TUNED.get(spec)


def _forward_costs(step_ms: float, per_token_ms: float, source: str, at: float | None = None) -> RunCosts:
    """Costs from a timed one-token step (``step_ms``, its forward alone: a run's step is :data:`STEP_OVERHEAD`
    times it) and a wide forward's ``per_token_ms``, range :data:`PROBE_SPREAD`, measured at ``at`` (time.time() s;
    None: now) under the load of now."""
    return RunCosts(per_token_ms, step_ms * STEP_OVERHEAD, None, source, PROBE_SPREAD,
                    measured_at=time.time() if at is None else at, measured_load=estimates.machine_load())


def note_forwards(spec: str, step_ms: float, per_token_ms: float, source: str, at: float | None = None) -> RunCosts:
    """Keep forwards a tab timed of ``spec`` (the Why tab's Measure, a Batching sweep's probe: a one-token step of
    ``step_ms`` and a wide forward's ``per_token_ms``, ``source`` in words, ``at`` time.time() s or None: now) in
    place of older ones: the newest forwards plan what rests on them (:func:`tuned_or_none`, :func:`newest_costs`).
    A start-up's probe 11 minutes old had planned Batching at 14–47 min after the Why tab had timed the forwards 18
    times faster. Returns the costs kept."""
    costs = _forward_costs(step_ms, per_token_ms, source, at)
    with _COSTS_LOCK:
        older = _TUNED.get(spec)
        if older is None or (older.measured_at or 0.0) <= costs.measured_at:
            _TUNED[spec] = costs
    return costs


def newest_costs(spec: str) -> RunCosts | None:
    """The newest measurement of ``spec``'s costs in this process, for a plan that reads a step and a wide
    forward's cost per token (the Why and Batching tabs'): the newest forwards timed (:func:`tuned_or_none`: the
    start-up's, a Why Measure's, a Batching sweep's) or the Live runs' (:func:`known_costs` of the latest runs, as
    of the latest one's end), whichever was measured last; None when neither exists. Its ``source`` says which."""
    tuned, runs = tuned_or_none(spec), known_costs(spec)  # the latter is the former where no run ended yet
    found = [c for c in (tuned, runs) if c is not None]
    return max(found, key=lambda c: c.measured_at if c.measured_at is not None else float("-inf"), default=None)


def tuned_costs(spec: str, loaded) -> RunCosts:
    """Costs of ``loaded`` (the target ``spec``) from forwards timed here at the threads its runs use
    (:func:`timed_forwards`, a second or two): the one-token step T(1), and a forward of
    :data:`PREFILL_SAMPLE_TOKENS` tokens, the width a long prompt is read in, per token (a narrow forward's cost
    per token is several times a prefill's: read so, a 2,185-token prompt was planned at minutes and read in
    seconds). Call it while holding the device (the app's start-up does, :func:`app.live.warmup.warm_up`, with the
    threads capped as a run's job caps them). Remembered per spec; a later call returns the newest forwards timed
    (these, or a tab's since: :func:`note_forwards`)."""
    with _COSTS_LOCK:
        if spec in _TUNED:
            return _TUNED[spec]
    step, wide = timed_forwards(loaded, PREFILL_SAMPLE_TOKENS)
    costs = _forward_costs(step, wide, STARTUP_FORWARDS)
    with _COSTS_LOCK:
        _TUNED.setdefault(spec, costs)
        return _TUNED[spec]


def default_max_new_tokens(costs: RunCosts | None, cap: int, fallback: int) -> int:
    """Max new tokens for a run of about :data:`DEFAULT_RUN_S` seconds with a drafter on a short prompt (rounded
    down to a multiple of 8, at least :data:`MIN_DEFAULT_TOKENS`, at most ``cap``, the operator's limit);
    ``fallback`` (capped) without costs."""
    if costs is None:
        return min(fallback, cap)
    per_token_ms = costs.run_s(0, 2, drafter=True) * 1000.0
    tokens = int(DEFAULT_RUN_S * 1000.0 / max(per_token_ms, 1e-3)) // 8 * 8
    return max(1, min(cap, max(MIN_DEFAULT_TOKENS, tokens)))


_DEFAULT_TOKENS: dict[str, int] = {}  # target spec -> the derived default of max new tokens (computed once)
_DEFAULT_LOCK = threading.Lock()  # one page load measures; the others keep the page's value meanwhile


def derived_default_tokens(spec: str, fallback: int) -> int | None:
    """The default max new tokens for ``spec``, derived once per process from its measured step cost
    (:func:`default_max_new_tokens`, within the operator's SPECVIZ_MAX_NEW_TOKENS): the first call waits up to
    :data:`DEFAULT_TOKENS_WAIT_S` for the device, loads the target (at once when it was pre-loaded) and reads its
    tuned step time or probes it; later calls return the remembered value. None while another call is measuring,
    while a run holds the device, or when the target cannot be loaded (the page then keeps ``fallback``). The wait
    is short because the page's slider gets the value when this returns: after a long wait behind someone's run it
    would replace a number the visitor had typed since the page opened (seen: 32 typed, runs of 91+ tokens)."""
    if spec in _DEFAULT_TOKENS:
        return _DEFAULT_TOKENS[spec]
    if not _DEFAULT_LOCK.acquire(blocking=False):
        return None
    owner = f"defaults:{uuid.uuid4().hex}"
    try:
        if spec not in _DEFAULT_TOKENS:
            costs = known_costs(spec)
            if costs is None:
                if device.DEVICE.acquire(owner, "the default run length is being measured", DEFAULT_TOKENS_WAIT_S):
                    try:
                        costs = tuned_costs(spec, load_target(spec))
                    finally:
                        device.DEVICE.release(owner)
                else:  # a run holds the device: this page keeps its value; a later page load measures
                    device.DEVICE.leave(owner)
            if costs is not None:
                _DEFAULT_TOKENS[spec] = default_max_new_tokens(costs, current_policy().max_new_tokens, fallback)
        return _DEFAULT_TOKENS.get(spec)
    except Exception as error:  # noqa: BLE001 - a page load never fails over its default
        log_failure("deriving the default max new tokens", error)
        return None
    finally:
        _DEFAULT_LOCK.release()


def page_default_tokens(spec: str, fallback: int, shown=None):
    """On page load: the max-new-tokens slider's derived default (:func:`derived_default_tokens`), or no change
    (also when the slider no longer showed ``fallback`` when the page loaded, or when deriving it took longer than
    :data:`DEFAULT_TOKENS_WAIT_S`, e.g. loading the target: the visitor may have typed a number meanwhile)."""
    started = time.monotonic()
    value = derived_default_tokens(spec, fallback)
    if value is None or (shown is not None and shown != fallback):
        return gr.skip()
    if time.monotonic() - started > DEFAULT_TOKENS_WAIT_S:  # the visitor may have typed since: keep it (the value
        return gr.skip()  # stays remembered for the next page load)
    costs = known_costs(spec)  # the latest: runs finished since the default was derived included
    seconds = costs.run_s(0, value, drafter=True) if costs is not None else None
    return gr.update(value=value, info=derived_info(value, seconds))


def derived_info(value: int, seconds: float | None = None) -> str:
    """The max-new-tokens slider's info line once the page set its derived default: why it changed (a trial saw 64
    on one page load and 16 on the next, with no word why). ``seconds``: what a run of ``value`` tokens takes at the
    latest measured speed (:func:`known_costs`; None: :data:`DEFAULT_RUN_S`, the default's aim): a trial read
    "about 20 s", the aim, while its runs took 10 s. The smallest default (:data:`MIN_DEFAULT_TOKENS`) well over
    :data:`DEFAULT_RUN_S` says so (a trial on a busy machine read "about 20 s" and waited 81 s)."""
    if seconds is not None and value <= MIN_DEFAULT_TOKENS and seconds > 1.5 * DEFAULT_RUN_S:
        return (f"Set to {value} on load, the smallest default: even that is a run of about {seconds:.0f} s at this "
                "machine's measured speed; any number up to the slider's end works")
    seconds = DEFAULT_RUN_S if seconds is None else seconds
    return (f"Set to {value} on load: a run of about {_seconds(seconds)} at this machine's measured speed; "
            "any number up to the slider's end works")


def tokens_info(settings: Settings, costs: RunCosts | None, load=None) -> str | None:
    """The info line of :func:`tokens_plan` (None without costs)."""
    plan = tokens_plan(settings, costs, load)
    return None if plan is None else plan[0]


def tokens_plan(settings: Settings, costs: RunCosts | None, load=None) -> tuple[str, str] | None:
    """The Live tab's max-new-tokens info line for ``settings`` at the latest measured ``costs``
    (:func:`known_costs`), before Generate: "512 new tokens at the latest measured speed: up to about 3 min (…)
    (from recent runs of this model on this server) if it writes all 512 tokens (…)" (:func:`plan_text`; ``load``
    as there); "Set to 48 on load: …; any number up to the slider's end works" while the slider holds the default
    derived on load (:func:`derived_default_tokens`); with it, the plan's short form (:func:`run_plan`: one estimate
    for both), which the Live tab's ready status carries. None without costs (the line stays as it is)."""
    if costs is None:
        return None
    n = settings.max_new_tokens
    plan, short = run_plan(settings, costs, load=load)
    if _DEFAULT_TOKENS.get(settings.target) == n:
        return (f"Set to {n} on load; at the latest measured speed: {plan}; any number up to the slider's end works",
                short)
    return f"{n:,} new token{'' if n == 1 else 's'} at the latest measured speed: {plan}", short


def retry_default_tokens(spec: str, fallback: int, shown, tries: int):
    """A tick of the Live tab's retry timer: a page opened while the start-up was still measuring showed
    ``fallback``; it gets the derived default as soon as there is one (:func:`page_default_tokens`), so pages opened
    before and after the measurement agree. Returns (slider update, timer update, tries + 1): the timer stops once
    the slider shows anything but ``fallback`` (the derived value, or the visitor's own), or after
    :data:`DEFAULT_TOKENS_TRIES` ticks."""
    tries = int(tries or 0) + 1
    if shown is not None and shown != fallback:
        return gr.skip(), gr.Timer(active=False), tries
    update = page_default_tokens(spec, fallback, shown)
    done = "value" in update or tries >= DEFAULT_TOKENS_TRIES
    return update, gr.Timer(active=not done), tries


def planned_estimate(costs: RunCosts, seconds: float, now: tuple[float, int] | None) -> Estimate:
    """The :class:`~app.estimates.Estimate` of ``seconds`` planned from ``costs``: its range from ``costs.spread``,
    moved once by the load changed since they were measured (``now``: other programs' (load, CPUs); None: unknown;
    :func:`app.estimates.make_estimate`). One source for the plan's time (:func:`plan_text`) and a long prompt's
    reading time (:func:`app.prefill_notes.long_prompt_note`).

    Its middle is the stored costs' own at any age (they are taken as measured now): the load change since only
    widens the range on its side. A trial on a busy machine read one prompt's plan as 17 s, then 8 s (7–10 s) after
    a page reload, then 16 s (the run took 14.5 s): the same stored runs, planned within 20 s of the run's end (the
    middle kept) and then a minute later, moved by the ratio of two noisy load readings (the one taken as the run
    ended counted the browser drawing the run's last frames). The same stored measurements now give the same middle
    before and after a reload. On a very busy machine too: a run measured there took 17.9 s where the plan moved by
    the load read before it said "may take 28–95 s" (load 10 on 2 CPUs); its range is then at least
    :data:`app.estimates.VERY_BUSY_WIDTH` about that middle."""
    return make_estimate(seconds, seconds * costs.spread[0], seconds * costs.spread[1], now, costs.measured_load,
                         age_s=0.0)  # the middle is the stored costs' own, whatever their age: see above


def plan_text(settings: Settings, costs: RunCosts | None, prompt_tokens: int | None = None, load=None) -> str:
    """The plan's sentence of :func:`run_plan` ("" without costs)."""
    return run_plan(settings, costs, prompt_tokens, load)[0] if costs is not None else ""


def run_plan(settings: Settings, costs: RunCosts, prompt_tokens: int | None = None, load=None) -> tuple[str, str]:
    """(the plan's sentence, its short form) from one estimate. The short form is the whole run's time for
    max new tokens, with its range: "48 new tokens: about 25 s (20–30 s)" ("up to about …" when an answer may end
    sooner; "may take 15–60 s" on a very busy machine), for the Live tab's ready status.

    The sentence: "about 25 s (20–30 s) (from recent runs of this model on this server)" for a run of ``settings``
    (:func:`make_estimate` of ``costs.spread``, moved once by the load changed since the costs were measured; for
    costs measured under :data:`app.estimates.LOAD_WINDOW_S` ago that change only widens the range), with
    the prefill named when it takes over :data:`LONG_PREFILL_S`; "" without costs. ``prompt_tokens`` None: counted
    before tokenizing (:func:`estimated_prompt_tokens`, said "about"). ``load``: other programs' (load, CPUs) now
    (:func:`app.estimates.machine_load`; :data:`app.estimates.NOW` reads it; None: left out). On a very busy
    machine: "the machine is very busy now (load 12 on 2 CPUs): this may take 2–8 min (from …); fewer new tokens
    make it shorter".

    That time is for all of max new tokens. When recent runs here ended on their own sooner (EOS, a stop:
    :attr:`RunCosts.answers`), the plan says both: "up to about 8 min (4–11 min) … if it writes all 1,024 tokens;
    most answers end sooner (this prompt's ended after 123 tokens here: about 20 s (15–25 s))"; this prompt's own
    answer length when a recent run read it, else the median of the recent answers. Without one, a cap of
    :data:`LONG_CAP_TOKENS` or more says only that an answer ending sooner takes less. A busy machine (other
    programs' load above :data:`app.estimates.BUSY_PER_CPU` per CPU) is named after the source: "(from …; the machine
    is busy now: load 1.9 on 2 CPUs)"."""
    now = estimates.machine_load() if load is NOW else load
    tokens = prompt_tokens if prompt_tokens is not None else estimated_prompt_tokens(settings)
    drafter = settings.drafter != "none"

    def planned(seconds: float) -> Estimate:
        return planned_estimate(costs, seconds, now)

    whole = planned(costs.run_s(tokens, settings.max_new_tokens, drafter))
    busy = f"; the machine is busy now: load {now[0]:.1f} on {now[1]} CPUs" if (
        is_busy(now) and not whole.very_busy) else ""  # as the Arena's plan says it (a trial saw no word of it)
    said = f"may take {span_text(whole.low, whole.high)}" if whole.very_busy else whole.text("")
    text = f"{said} (from {costs.source}{busy})"
    prefill = planned(costs.prefill_s(tokens, drafter))
    if prefill.seconds > LONG_PREFILL_S:  # the same factors on both: the whole run's range holds its reading's
        text += (f", {prefill.text('') if not prefill.very_busy else span_text(prefill.low, prefill.high)} of it "
                 f"reading the {'' if prompt_tokens is not None else 'about '}{tokens:,}-token prompt")
    likely = _likely_answer(settings, costs)
    sooner = None
    if likely is not None and likely[0] < settings.max_new_tokens:
        answer, whose = likely
        took = planned(costs.run_s(tokens, answer, drafter))
        took = span_text(took.low, took.high) if took.very_busy else took.text("")
        tokens_said = f"{answer:,} token{'' if answer == 1 else 's'}"
        sooner = f"most answers end sooner ({whose} ended after {tokens_said} here: {took})"
    n = settings.max_new_tokens
    short = (f"may take {span_text(whole.low, whole.high)}" if whole.very_busy else
             ("up to " if sooner or n >= LONG_CAP_TOKENS else "") + whole.text(""))
    return _whole_plan(text, whole, n, sooner), f"{n:,} new token{'' if n == 1 else 's'}: {short}"


def _whole_plan(text: str, whole: Estimate, max_new_tokens: int, sooner: str | None) -> str:
    """:func:`plan_text`'s sentence from its parts: ``text`` ("about 25 s (20–30 s) (from …)", or on a very busy
    machine "may take 15–60 s (from …)"), ``whole`` the whole run's estimate, ``sooner`` what a likely shorter answer
    takes (None: none known). A very busy machine's lead comes first, and the advice last: "the machine is very busy
    now (load 4 on 2 CPUs): writing all 100 tokens may take 15–60 s (from …); most answers end sooner (…: 7–29 s);
    fewer new tokens make it shorter" (a trial read the busy sentence set inside "up to … if it writes all")."""
    cap = f"{max_new_tokens:,} token{'' if max_new_tokens == 1 else 's'}"
    long = max_new_tokens >= LONG_CAP_TOKENS
    if whole.very_busy:
        what = f"writing all {cap} " if sooner or long else "this "
        after = f"; {sooner}" if sooner else " (an answer that ends sooner takes less)" if long else ""
        return f"{whole.busy_lead}: {what}{text}{after}; fewer new tokens make it shorter"
    if sooner:
        return f"up to {text} if it writes all {cap}; {sooner}"
    if long:
        return f"up to {text} if it writes all {cap} (an answer that ends sooner takes less)"
    return text


_OVERHEAD: list[int] = []  # the chat template's tokens beyond a prompt's own (the latest run's), for estimates


def learn_prompt_overhead(prompt: str, prompt_tokens: int, cap: int | None = None) -> None:
    """Keep how many tokens a run read beyond ``prompt``'s characters' estimate (the chat template's own tokens)
    from a run that read ``prompt_tokens``; nothing when the prompt was cut to ``cap``."""
    if prompt_tokens > 0 and not (cap and prompt_tokens >= cap):
        _OVERHEAD[:] = [max(0, prompt_tokens - round(len(prompt.strip()) / CHARS_PER_TOKEN))]


def tokens_about(prompt: str) -> int:
    """About how many tokens a run reads for ``prompt`` (>= 1): its characters over :data:`CHARS_PER_TOKEN` plus the
    chat template's tokens the latest run here read beyond that (:func:`learn_prompt_overhead`; 0 before any)."""
    return max(1, round(len(str(prompt).strip()) / CHARS_PER_TOKEN)) + (_OVERHEAD[0] if _OVERHEAD else 0)


def estimated_prompt_tokens(settings: Settings) -> int:
    """About how many tokens ``settings.prompt`` is read as, before tokenizing: its characters over
    :data:`CHARS_PER_TOKEN`, plus the chat template's tokens the latest run here read beyond that
    (:func:`learn_prompt_overhead`; 0 before any run), within the server's prompt cap."""
    tokens = tokens_about(settings.prompt)
    return min(tokens, settings.max_prompt_tokens) if settings.max_prompt_tokens else tokens


LONG_CAP_TOKENS = 256  # a plan for this many new tokens or more says that an answer may end sooner


def _likely_answer(settings: Settings, costs: RunCosts) -> tuple[int, str] | None:
    """(answer tokens, whose) of a likely answer: this prompt's own, when a recent run here read it and ended on its
    own ("this prompt's"), else the recent answers' median ("recent ones"); None when no recent run ended so."""
    key = prompt_key(settings.prompt)
    own = [tokens for prompt, tokens in costs.answers if prompt == key]
    if own:
        return own[-1], "this prompt's"
    return (costs.answer_tokens, "recent ones") if costs.answer_tokens is not None else None
