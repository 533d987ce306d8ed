"""The estimates every tab shows, and the machine's load they rest on: a planned length with its range
(:class:`Estimate`, made by :func:`make_estimate`: "about 12 min (9–16 min)", or on a very busy machine a plain
sentence with a wide range), the time a measurement has taken beside it (:func:`progress_text`), and the estimate of
a measurement planned from forwards timed just now (:func:`fresh_estimate`).

The load is other programs' (load, CPU count) now (:func:`machine_load`: their runnable threads sampled each second
over the last seconds; before the first samples, the 5-minute load average less this process's own running
threads). A job's torch threads are capped at the CPUs other programs leave free (:func:`threads_for_run`). A
cost keeps the load it was measured at, and an estimate moves only by the load changed since (:func:`load_factor`):
a cost measured on a busy machine already holds that load's slowness.

Callers read the load as ``estimates.machine_load()``, the module's attribute, so one replacement here (a test's)
reaches every tab. What a run costs, and the Live tab's plan made of it, live in :mod:`app.costs`.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import threading
import time
from dataclasses import dataclass

from app.render import seconds_text
from specviz.measure.machine import cpu_snapshot, others_between, procs_running

_seconds = functools.partial(seconds_text, at_least=1)  # an estimate never reads "0 s"

NOW = object()
"""A ``load`` argument: read the machine's load now (:func:`machine_load`)."""
PROBE_SPREAD = (0.7, 1.6)  # a plan from one timed step: the acceptance, the page and the load are all unknown
MIN_SPREAD = (0.85, 1.25)  # a plan from earlier runs: at least this wide (their spread, the machine's load)
BUSY_PER_CPU = 0.5  # other programs' load above this per CPU: the machine is busy (its estimates say so)
VERY_BUSY_PER_CPU = 2.0  # ... above this per CPU: very busy; an estimate is a plain sentence with a wide range
MAX_WIDTH = 3.0  # an estimate's high end over its low end, at most (a wider spread is drawn in toward its middle)
VERY_BUSY_WIDTH = (0.6, 2.0)  # on a very busy machine the range is at least this (factors on the middle figure) ...
VERY_BUSY_MAX_WIDTH = 4.0  # ... and its high end at most this many times its low end
LOAD_FACTOR_LIMITS = (0.5, 4.0)  # the load changed since a cost was measured moves an estimate by at most this
SHORTER = "fewer tokens or prompts make it shorter"


def own_running_threads() -> int:
    """How many of this process's threads are running or waiting for a CPU now (Linux ``/proc/self/task``; 0
    where unknown): the load average counts them, so :func:`machine_load` takes them out."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    running = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat", encoding="ascii", errors="replace") as stat:
                running += stat.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue
    return running


def machine_load() -> tuple[float, int] | None:
    """(Other programs' load, the CPU count) now: their threads running or waiting for a CPU, sampled every
    :data:`SAMPLE_S` seconds over the last seconds (:func:`recent_load`: the 5-minute load average lagged a load
    that just started, a trial's run taking 23.8 s against "about 6 s (5–9 s)" planned with two busy loops started
    just before, and stayed high for minutes after one ended, inflating the next estimates); before the sampling
    has its first seconds, the 5-minute load average less this process's own running threads
    (:func:`own_running_threads`: the average counts the app's own torch threads). None where the OS has no load
    average."""
    try:
        five = os.getloadavg()[1]
    except (AttributeError, OSError):
        return None
    cpus = os.cpu_count() or 1
    recent = recent_load(cpus)
    return (max(0.0, five - own_running_threads()) if recent is None else recent), cpus


RECENT_S = (3.0, 20.0)  # :func:`recent_load` reads a window of at least 3 s, reaching back at most 20 s
SAMPLE_S = 1.0  # the CPU counters and runnable threads are read this often while the app runs (a few small files)


class RecentShare:
    """Other programs' share of the CPUs over the last seconds: a daemon thread keeps a :func:`cpu_snapshot` every
    :data:`SAMPLE_S` seconds, of the last ``RECENT_S[1]`` seconds (started by the first question), and :meth:`share`
    is the share between the oldest of them and now (None until one is ``RECENT_S[0]`` seconds old, or without
    ``/proc/stat``)."""

    def __init__(self) -> None:
        self._samples: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _keep(self, now: float) -> None:
        snapshot, runnable = cpu_snapshot(), others_runnable()
        with self._lock:
            if snapshot is not None:
                self._samples.append((now, snapshot, runnable))
            while self._samples and now - self._samples[0][0] > RECENT_S[1]:
                self._samples.popleft()

    def start(self) -> None:
        """Start sampling (once; :meth:`share` and :meth:`runnable` start it too)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="specviz-cpu-share", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._keep(time.monotonic())
            time.sleep(SAMPLE_S)

    def share(self, back_s: float = RECENT_S[1]) -> float | None:
        """Other programs' share (0..1) of all CPUs' time since the oldest sample of the last ``back_s`` seconds
        (at most :data:`RECENT_S`'s longer end); None when unknown (no sample yet at least ``RECENT_S[0]`` s old
        within ``back_s``)."""
        self.start()
        with self._lock:
            now = time.monotonic()
            oldest = next(((at, snap) for at, snap, _ in self._samples if now - at <= min(back_s, RECENT_S[1])), None)
        if oldest is None or now - oldest[0] < RECENT_S[0]:
            return None
        return others_between(oldest[1], cpu_snapshot())

    def runnable(self, back_s: float = RECENT_S[1]) -> float | None:
        """Other programs' threads running or waiting for a CPU (:func:`others_runnable`), the mean of the samples
        of the last ``back_s`` seconds (a load average without its lag); None when unknown (no samples reaching
        back ``RECENT_S[0]`` s within ``back_s``). Unlike :meth:`share` it sees more load than there are CPUs, and
        a busy loop counts 1 whether or not this process's run takes its CPU from it."""
        self.start()
        with self._lock:
            now = time.monotonic()
            kept = [(at, n) for at, _, n in self._samples if now - at <= min(back_s, RECENT_S[1]) and n is not None]
        if not kept or now - kept[0][0] < RECENT_S[0]:
            return None
        return sum(n for _, n in kept) / len(kept)


_RECENT = RecentShare()


def others_runnable() -> float | None:
    """Other programs' threads running or waiting for a CPU now: the machine's (:func:`procs_running`) less this
    process's own (:func:`own_running_threads`); None where unknown."""
    running = procs_running()
    return None if running is None else max(0.0, float(running - own_running_threads()))


def recent_load(cpus: int) -> float | None:
    """Other programs' load over the last seconds, as a load average counts it: their runnable threads
    (:meth:`RecentShare.runnable`), the higher of the last :data:`THREADS_WINDOW_S` seconds' mean (a load that just
    started) and the last ``RECENT_S[1]`` seconds'; where those are unknown, their share of the CPUs times ``cpus``
    (:meth:`RecentShare.share`: 2.0 for two busy loops on 2 CPUs); None when unknown."""
    means = [m for m in (_RECENT.runnable(THREADS_WINDOW_S), _RECENT.runnable()) if m is not None]
    if means:
        return max(means)
    share = _RECENT.share()
    return None if share is None else share * cpus


ENV_BUSY_THREADS = "SPECVIZ_BUSY_THREADS"
"""Set to 0 to keep the tuned thread counts on a busy machine (:func:`threads_for_run`; the tests do)."""
THREADS_WINDOW_S = 6.0  # a run's threads follow other programs' share of the CPUs over about the last this many s
THREADS_PROBE_S = 0.5  # ... watched this long first when no share is known yet (the first run after start-up)


def threads_for_run() -> int | None:
    """Cap the thread count of the run about to start (:func:`specviz.core.kv.set_thread_limit`) at the CPUs other
    programs leave free now (:func:`specviz.measure.machine.threads_beside`, their share over the last
    :data:`THREADS_WINDOW_S` seconds, or :data:`THREADS_PROBE_S` watched now); returns the cap (None: none). Called
    when a job takes the device (:meth:`app.device.Job.turn`), so a run's baseline and speculative forwards share
    it. ``SPECVIZ_BUSY_THREADS=0`` turns it off."""
    from specviz.core.kv import set_thread_limit
    from specviz.measure.machine import CpuShare, threads_beside

    if os.environ.get(ENV_BUSY_THREADS, "1").strip() == "0":
        set_thread_limit(None)
        return None
    share = _RECENT.share(THREADS_WINDOW_S)
    if share is None:
        probe = CpuShare()
        time.sleep(THREADS_PROBE_S)
        share = probe.others()
    cpus = os.cpu_count() or 1
    cap = threads_beside(None if share is None else share * cpus, cpus)
    set_thread_limit(cap)
    return cap


THREADS_EFFECTS = {
    "run": ("this run", "Sums round by thread count, so greedy text can differ from a {tuned}-thread run's; both runs "
            "here share it, so they stay identical"),
    "race": ("this race", "Sums round by thread count, so greedy text can differ from a {tuned}-thread run's; every "
             "method's runs and baselines here share it, so each matches its baseline"),
    "recording": ("this run", "Sums round by thread count, so greedy text can differ from a {tuned}-thread run's, "
                  "such as a walkthrough's shipped recording"),
    "measurement": ("this measurement", "Every forward it times shares it, so the curve's points and c compare with "
                    "each other; on a quiet machine the {tuned} threads may time them shorter"),
    "check": ("this check", "Its standard and speculative runs share it, so both samples are drawn alike"),
    "sweep": ("this sweep", "All the sweep's timings share it, standard and speculative at every batch size, so its "
              "speedups compare like with like; on a quiet machine the {tuned} threads may time them shorter"),
}
"""What runs under the cap of :func:`threads_for_run`, and what sharing it means there, by the work a tab runs (the
keys of :func:`threads_note`): one place for every tab's wording of the cap. Live runs a baseline beside a
speculative run ("run"), the Arena every method's runs and baselines ("race"); the Classroom records one run
("recording") or runs a what-if pair ("run"); the Why tab times the forward curve ("measurement"); the Batching tab
samples ("check") and times batches ("sweep")."""


def threads_note(model, work: str = "run") -> str:
    """The note under a tab's status when the cap of :func:`threads_for_run` lowers ``model``'s tuned threads:
    "other programs are using the CPUs: this run uses 1 torch thread of the 2 tuned here, which is faster beside them.
    Sums round …" (a trial saw the same greedy prompt end at 42 tokens on 2 threads and at 60 on 1, in int4); "" when
    it does not (no cap, or a model without tuned threads). ``work``: what runs under it, a key of
    :data:`THREADS_EFFECTS` (its subject and what sharing the cap means there). Call it in the job's thread, after
    :meth:`app.device.Job.turn` set the cap. Raises KeyError for an unknown ``work``."""
    from specviz.core.kv import chosen_threads

    if work not in THREADS_EFFECTS:  # a caller's typo fails with or without a cap
        raise KeyError(work)
    tuned, used = getattr(model, "_specviz_threads", None), chosen_threads(model)
    if not tuned or used == tuned:
        return ""
    return threads_note_text(max(used), max(tuned), work)


THREADS_DEFINITION = ("the torch threads the timings ran under: tuned (the most the target's forwards were tuned to "
                      "use here; null: no tuned choice, torch's own count), used (the most they used, under the cap "
                      "set when other programs are using the CPUs), capped (used below tuned) and note (the sentence "
                      "the page showed under its status; empty without a cap)")
"""What a download's ``threads`` record (:func:`threads_record`) holds, for its definitions."""


def threads_record(model, work: str = "run") -> dict:
    """The thread cap a job's timings ran under, for its downloaded record (a JSON's ``threads``,
    :data:`THREADS_DEFINITION`): ``{"tuned": 2, "used": 1, "capped": True, "note": "other programs are using the
    CPUs: this sweep uses 1 torch thread of the 2 tuned here, …"}``; without a cap ``used`` equals ``tuned`` and the
    note is ""; a model without tuned threads gives ``tuned`` None and torch's own count as ``used``. Call it where
    :func:`threads_note` is called (the job's thread, after the cap was set). Raises KeyError for an unknown
    ``work``."""
    import torch

    from specviz.core.kv import chosen_threads

    note = threads_note(model, work)
    tuned, used = getattr(model, "_specviz_threads", None), chosen_threads(model)
    return {"tuned": max(tuned) if tuned else None, "used": max(used) if used else torch.get_num_threads(),
            "capped": bool(note), "note": note}


def threads_note_text(threads: int, tuned: int, work: str) -> str:
    """:func:`threads_note`'s sentence for ``threads`` torch threads used of ``tuned`` tuned, for ``work`` (a key of
    :data:`THREADS_EFFECTS`). Raises KeyError for an unknown ``work``."""
    subject, effect = THREADS_EFFECTS[work]
    return (f"other programs are using the CPUs: {subject} uses {threads} torch thread{'' if threads == 1 else 's'} "
            f"of the {tuned} tuned here, which is faster beside them. " + effect.format(tuned=tuned))


def is_busy(load: tuple[float, int] | None, per_cpu: float = BUSY_PER_CPU) -> bool:
    """Whether ``load`` ((load, CPU count); None: unknown, not busy) is above ``per_cpu`` per CPU."""
    return load is not None and load[0] > per_cpu * max(1, load[1])


def busy_factor(load: float, cpus: int) -> float:
    """How much longer a run takes on ``cpus`` CPUs (>= 1) beside ``load`` runnable threads of other programs, when
    it gets its fair share: 1 + load / cpus (2.0 at a load of 2 on 2 CPUs)."""
    return 1.0 + max(0.0, load) / max(1, cpus)


def load_factor(now: tuple[float, int] | None, measured: tuple[float, int] | None) -> float:
    """How much slower (above 1) or faster (below 1) a run should go now than when its cost was measured: the
    :func:`busy_factor` of the load now (``now``) over the one then (``measured``), both (load, CPUs) read by
    :func:`machine_load`, so a cost measured on a busy machine is not slowed again for the same load; within
    :data:`LOAD_FACTOR_LIMITS`. 1 when either is unknown (the cost is taken as the machine's as it is)."""
    if now is None or measured is None:
        return 1.0
    return min(max(busy_factor(*now) / busy_factor(*measured), LOAD_FACTOR_LIMITS[0]), LOAD_FACTOR_LIMITS[1])


LOAD_WINDOW_S = RECENT_S[1]
"""A cost measured less than this long ago ran on the machine as it is now: the two load readings share their
samples (:func:`recent_load`), so they differ by the samples' noise, not by a change, and :func:`make_estimate` keeps
the cost's middle. When the load was the 5-minute average this was 300 s, its lag: seen on the project's 2-core VM
beside a benchmark, the start-up timed 109.4 ms a token with its load read as 0.36 (the average still catching up),
the Arena then read load 2.7 and planned 1.99x that, about 12 min; its standard runs took 109.2 ms a token, the race
331 s. With the load sampled as it is now, an older cost moves with the load changed since (a trial had a quiet
cost keep its middle beside two busy loops started just before: "about 10 s (8–18 s)" planned, 25.6 s taken)."""


def start_sampling() -> None:
    """Start reading the machine's load (:class:`RecentShare`) now, so that the first run's plan and thread count
    have seconds of samples (the app's start-up calls it)."""
    _RECENT.start()


def rough_time(seconds: float) -> str:
    """A planned length, as round as an estimate deserves: "8 s", "25 s" (whole seconds under 30 s), "45 s" (5 s
    steps under 2 min), "12 min" (whole minutes under an hour), "1 h 40 min" (5-minute steps)."""
    if seconds < 117.5:
        return f"{max(1, round(seconds / 5) * 5 if seconds >= 30 else round(seconds))} s"
    if seconds < 59.5 * 60:
        return f"{round(seconds / 60)} min"
    minutes = round(seconds / 300) * 5
    return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def span_text(low: float, high: float) -> str:
    """ "10–40 min", "2–6 min" (a low end of a minute or more in minutes beside a high end in minutes), "50 s –
    2 min", "1 h – 1 h 30 min": a range of planned lengths (:func:`rough_time`)."""
    a, b = rough_time(low), rough_time(high)
    if b.endswith(" min") and "h" not in b and low >= 60:  # both in minutes: "2–6 min", not "110 s – 6 min"
        a = f"{round(low / 60)} min"
    if a == b:
        return a
    for unit in (" s", " min"):
        if a.endswith(unit) and b.endswith(unit) and unit not in a[:-len(unit)] and "h" not in a + b:
            return f"{a[:-len(unit)]}–{b}"
    return f"{a} – {b}"


@dataclass(frozen=True)
class Estimate:
    """A planned length in seconds: ``seconds`` the middle figure, ``low``–``high`` its range (at most
    :data:`MAX_WIDTH` wide, :data:`VERY_BUSY_MAX_WIDTH` on a very busy machine), ``load`` other programs' (load,
    CPUs) now (None: unknown) and ``factor`` the load change already applied (:func:`load_factor`)."""

    seconds: float
    low: float
    high: float
    load: tuple[float, int] | None = None
    factor: float = 1.0

    @property
    def very_busy(self) -> bool:
        """Whether the machine is too busy now to estimate well (:data:`VERY_BUSY_PER_CPU`)."""
        return is_busy(self.load, VERY_BUSY_PER_CPU)

    @property
    def busy_lead(self) -> str:
        """ "the machine is very busy now (load 12 on 2 CPUs)": how a very busy machine's estimate begins."""
        return f"the machine is very busy now (load {self.load[0]:.0f} on {self.load[1]} CPUs)"

    def text(self, shorter: str = SHORTER) -> str:
        """ "about 12 min (9–16 min)"; on a very busy machine a plain sentence: "the machine is very busy now (load
        12 on 2 CPUs): this may take 10–40 min; fewer tokens or prompts make it shorter" (``shorter``: what to do)."""
        if self.very_busy:
            return (f"{self.busy_lead}: this may take {span_text(self.low, self.high)}"
                    + (f"; {shorter}" if shorter else ""))
        middle, span = rough_time(self.seconds), span_text(self.low, self.high)
        return f"about {middle}" if span == middle else f"about {middle} ({span})"


def make_estimate(seconds: float, low: float | None = None, high: float | None = None,
                  now: tuple[float, int] | None = None, measured: tuple[float, int] | None = None,
                  age_s: float | None = None) -> Estimate:
    """The :class:`Estimate` of a length planned at ``seconds`` (its range ``low``–``high`` s, None: the figure
    alone) from a cost measured at other programs' load ``measured``, for the load ``now`` ((load, CPUs) from
    :func:`machine_load`; None: unknown): the load change is applied once to all three (:func:`load_factor`), the
    range drawn in toward the middle to :data:`MAX_WIDTH` and, on a very busy machine, widened to at least
    :data:`VERY_BUSY_WIDTH` and at most :data:`VERY_BUSY_MAX_WIDTH`. E.g. 600 s (400–900 s) measured quiet, now at
    load 1 on 2 CPUs: about 15 min (10–22 min), 1.5x. A cost measured ``age_s`` < :data:`LOAD_WINDOW_S` seconds ago
    (None: unknown, taken as old) keeps its middle: its load change only widens the range on its side."""
    if age_s is not None and age_s < LOAD_WINDOW_S and seconds > 0:  # the cost already ran on the machine as it is
        change = load_factor(now, measured)
        low = (low if low is not None else seconds) * min(1.0, change)
        high = (high if high is not None else seconds) * max(1.0, change)
        measured = now
    factor = load_factor(now, measured)
    middle = seconds * factor
    lo = min(1.0, (low if low is not None else seconds) / seconds) if seconds > 0 else 1.0
    hi = max(1.0, (high if high is not None else seconds) / seconds) if seconds > 0 else 1.0
    width = MAX_WIDTH
    if is_busy(now, VERY_BUSY_PER_CPU):
        lo, hi, width = min(lo, VERY_BUSY_WIDTH[0]), max(hi, VERY_BUSY_WIDTH[1]), VERY_BUSY_MAX_WIDTH
    if hi / lo > width:  # drawn in toward the middle, keeping the ends' proportions (in logs)
        shrink = math.log(width) / math.log(hi / lo)
        lo, hi = lo ** shrink, hi ** shrink
    return Estimate(middle, middle * lo, middle * hi, now, factor)


def progress_text(elapsed: float, estimate: Estimate, source: str) -> str:
    """The time a measurement has taken (``elapsed`` s) beside its :class:`Estimate`: "46 s of about 15 min
    (10–23 min), {source}" (``source``: how it was made); past the middle figure "17 min 5 s of up to 23 min";
    "46 s; the machine is very busy now (…): this may take 9–29 min" on a very busy machine; once past the high end
    "25 min 0 s, past the estimate of 10–23 min: the machine is busier or slower than estimated" (a stale "of about"
    is never repeated)."""
    took, span = _seconds(elapsed), span_text(estimate.low, estimate.high)
    if elapsed > estimate.high:
        return f"{took}, past the estimate of {span}: the machine is busier or slower than estimated"
    if estimate.very_busy:
        return f"{took}; {estimate.text('')}"
    if elapsed > estimate.seconds:
        return f"{took} of up to {rough_time(estimate.high)}, {source}"
    return f"{took} of {estimate.text()}, {source}"


def fresh_estimate(seconds: float, load=NOW) -> Estimate:
    """The :class:`Estimate` of a measurement planned at ``seconds`` from forwards timed just now (so at the load of
    now: nothing to move), its range :data:`PROBE_SPREAD`; ``load``: other programs' (load, CPUs) now
    (:data:`NOW`: :func:`machine_load`), which makes it the plain sentence on a very busy machine."""
    now = machine_load() if load is NOW else load
    return make_estimate(seconds, seconds * PROBE_SPREAD[0], seconds * PROBE_SPREAD[1], now, now)
