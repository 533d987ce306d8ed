"""Threads and kernels chosen by measurement on the machine at hand, kept on disk per machine and model.

Which settings decode fastest depends on the CPU: on one 2-core AVX2 machine a one-token step took 92.6 ms with
the fast path (oneDNN linears, :mod:`specviz.runtime.speed`) and 2 threads but 104.8 ms with 1 thread, while with 1 thread
the default kernels beat the fast path (95.3 ms); on an AVX-512 machine the fast path wins at both. So instead of a
fixed rule, :func:`tune` times a one-token step T(1) and a verification T(5) after a short cached prompt for each
thread count (1 .. min(2, cores)) and for the fast path on and off, interleaved and repeated, and chooses:

- the thread count for a one-token forward (the lower median T(1)) and for a forward of several tokens (the lower
  median T(5)); the engine's forwards switch between them (``kv.forward_logits`` reads the model's choice);
- the fast path, on or off (the lower T(1) + T(5) at the chosen threads; off keeps the default kernels);
- with the fast path on, the row padding (:func:`specviz.runtime.speed.choose_row_padding`): the model's linears are
  timed on 1 .. :data:`PAD_ROWS` rows at the step's and at the verification's thread count, and a forward of n
  rows is computed as m > n rows where m measured at least 10 % faster (on the project's AVX-512 machine one row
  cost more than four; on an AVX2 dispatch nothing is padded).

The choice is written to ``cache_dir()/tuning/<key>.json``; the key is the CPU model, its core count and
instruction set, torch's version, the model spec, dtype and device and the speed-ups applied at load, so a later start on the same machine reads it
(in milliseconds) instead of measuring again (15-25 s on a 2-core machine). A machine is measured once per process:
the choice is kept in memory under the same key whatever the load, and on disk with the load it was taken under
(``load``: the 1-minute load average when it began; ``others``: the share of the CPUs other programs used while it
ran; ``busy``: other programs used more than :data:`BUSY_SHARE` of them, or, where that is unknown, the load
average exceeded the core count). A later start uses the disk's choice, a busy one included; only
``tune(..., remeasure_busy=True)``, called at the app's start-up and never inside a visitor's run, measures again
when the kept choice was busy and the machine is quiet now (a busy measurement never replaces a quiet one on disk).
``SPECVIZ_TUNE=0`` turns tuning off (the settings then stay as loaded).

The app's start-up also asks :func:`tune_weights` for the CPU's default weight format: every format's one-token step
and verify curve (:mod:`specviz.measure.weights_default`, a few seconds), kept in the same record (``weights``,
``weights_ms``), so a restart reads them; k = auto reads each format's curve (:func:`verify_curve`).

Exactness: thread counts and kernels change float32 rounding only, and the baseline and the speculative run use
the same model with the same choice, so greedy output stays identical between them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from specviz.core.kv import Clock, forward_logits, new_cache, rollback_cache
from specviz.runtime.speed import (choose_row_padding, plain_path, report_of, set_fast_path, set_row_padding,
                           time_linear_rows)

ENV_TUNE = "SPECVIZ_TUNE"
PROMPT_TOKENS = 64
VERIFY_TOKENS = 5
REPEATS = 5
WARMUP = 2
BUSY_REPEATS, BUSY_WARMUP = 3, 1  # on a busy machine (load average above the cores when it starts): 4 rounds, not 7
FORMAT = 2  # 2: row padding added (files of format 1 are measured again: the key includes the format)
PAD_ROWS = 8  # row counts timed for the row padding (1 .. PAD_ROWS)
BUSY_SHARE = 0.2  # other programs used more than this share of the CPUs while measuring: the choice is "busy"
QUIET_PROBE_S = 0.5  # how long :func:`tune` watches the CPUs before re-measuring a busy choice


@dataclass(frozen=True)
class Tuning:
    """The settings chosen for one model on this machine.

    Attributes:
        step_threads / verify_threads: torch threads for a one-token forward and for a forward of several tokens.
        fast_path: whether the fast path's kernels run (False: the default kernels).
        pad_rows: {n: m}: a forward of n rows (batch x new tokens) computes m > n rows (fast path only; {}: none).
        ms: the medians measured, "threads/fast|plain" -> {"step": T(1) ms, "verify": T(5) ms}.
        source: "measured", "disk" (read from an earlier measurement), "off" (tuning disabled) or "compiled" (a
            compiled forward, :mod:`specviz.runtime.compiled`: its kernels are inductor's, its threads stay as they are).
        kept: whether the choice is on disk (written now, or read from there).
        load: the 1-minute load average when the measurement began (None: unknown, e.g. a file of an older
            version).
        others: the share (0..1) of all CPUs' time other programs used while it was measured (None: unknown).
        busy: whether the machine was busy then (see the module docstring): its times are slower than the
            machine's, and a start-up on a quiet machine measures again.
        weights: the default weight format measured fastest here (:func:`tune_weights`; None: not measured).
        weights_ms: per format, {"step": median one-token ms, "range": [fastest, slowest], "verify": {n: T(n)/T(1)},
            "verify_gap": largest logit difference of a verification from one-token steps (exactness)}
            (:func:`specviz.measure.weights_default.measure_formats`; {}: not measured).
    """

    step_threads: int
    verify_threads: int
    fast_path: bool
    ms: dict = field(default_factory=dict)
    pad_rows: dict = field(default_factory=dict)
    source: str = "measured"
    kept: bool = False
    load: float | None = None
    others: float | None = None
    busy: bool = False
    weights: str | None = None
    weights_ms: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line for the status and logs."""
        kernels = "fast path" if self.fast_path else "default kernels"
        if self.source == "compiled":
            kernels = "compiled forward (inductor)"
        threads = (f"{self.step_threads} thread{'s' if self.step_threads > 1 else ''}"
                   if self.step_threads == self.verify_threads else
                   f"{self.step_threads} thread(s) per step, {self.verify_threads} per verification")
        padding = ""
        if self.pad_rows:
            padding = ", rows padded " + " ".join(f"{n}->{m}" for n, m in sorted(self.pad_rows.items()))
        busy = "; the machine was busy" if self.busy else ""
        weights = f", default weights {self.weights}" if self.weights else ""
        return f"{kernels}, {threads}{padding}{weights} ({self.source}{busy})"


def tuning_enabled() -> bool:
    """False when ``SPECVIZ_TUNE`` is 0/false/no/off."""
    return os.environ.get(ENV_TUNE, "1").strip().lower() not in ("0", "false", "no", "off")


def machine_key(target) -> str:
    """A short hash of what decides the best settings: CPU model, cores, instruction set, torch, model, dtype and
    the speed-ups its load applied."""
    report = report_of(target.model)
    parts = [_cpu_name(), str(os.cpu_count()), torch.backends.cpu.get_cpu_capability(), torch.__version__,
             str(target.spec), str(target.dtype), str(target.device), str(FORMAT),
             report.summary() if report is not None else "unprepared"]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


_KEPT: dict[str, Tuning] = {}  # the file's path (folder + machine_key) -> this process's choice
_KEPT_LOCK = threading.Lock()  # one measurement at a time: a second caller waits for it and reuses it


def tune(target, *, folder: Path | None = None, force: bool = False, progress=None,
         remeasure_busy: bool = False) -> Tuning:
    """Choose and apply the threads and kernels for ``target`` (see the module docstring); returns the choice.

    The first call in a process for a machine key reads the choice from disk, or measures it (15-25 s on a 2-core
    machine) and writes it with its load; later calls return the choice kept in memory (``source`` stays what it
    was: "measured" or "disk"). Concurrent calls measure once: the others wait for it.

    Args:
        target: a loaded model (:class:`specviz.runtime.models.LoadedModel`); only CPU models are tuned.
        folder: where choices are kept (default ``cache_dir()/tuning``).
        force: measure even when a kept choice exists (in memory or on disk).
        progress: optional callable(str) for a status line.
        remeasure_busy: measure again when the kept choice was measured on a busy machine and the CPUs are quiet
            now (watched for :data:`QUIET_PROBE_S`). For the app's start-up only: never inside a visitor's run.
    """
    if getattr(target, "compiled", None) is not None:  # its graphs guard on the kernels: switching them retraces
        return Tuning(torch.get_num_threads(), torch.get_num_threads(), False, source="compiled")
    if not tuning_enabled() or target.device.type != "cpu":
        return Tuning(torch.get_num_threads(), torch.get_num_threads(), _fast_now(target), source="off")
    path = _path(target, folder)
    with _KEPT_LOCK:
        tuning = None if force else _KEPT.get(str(path))
        if tuning is None or (remeasure_busy and tuning.busy and _quiet_now()):
            tuning = _read_or_measure(target, path, force or tuning is not None, remeasure_busy, progress)
            _KEPT[str(path)] = tuning
    apply(target, tuning)
    return tuning


def known(target, folder: Path | None = None) -> Tuning | None:
    """The choice this process keeps for ``target`` (set by :func:`tune`), without measuring or reading a file;
    None before ``tune`` ran for it (or when tuning is off)."""
    with _KEPT_LOCK:
        return _KEPT.get(str(_path(target, folder)))


MEASURING_WEIGHTS = "Measuring the one-token step in each weight format on this machine (once: about half a minute on 2 free CPUs, longer on busy ones; kept for later starts)…"
"""The progress line :func:`tune_weights` says when it measures."""


def tune_weights(target, *, folder: Path | None = None, progress=None) -> Tuning:
    """The tuning of ``target`` (a float32 LoadedModel, tuned by :func:`tune` first when this process has not) with
    the default weight format measured on this machine (:mod:`specviz.measure.weights_default`: every format's
    one-token step and verify curve, interleaved rounds, a few seconds on the embedded model), measured once and
    kept with the rest of the tuning (in memory, and on disk where the tuning is kept, unless other programs kept
    the CPUs busy meanwhile: then a later start measures again), so a restart reads it.
    Where tuning does not apply (off, a compiled forward, a GPU, a target not loaded in float32) the tuning is
    returned with ``weights`` None: the caller keeps float32."""
    from specviz.measure import weights_default

    tuning = known(target, folder) or tune(target, folder=folder, progress=progress)
    if tuning.source in ("off", "compiled") or target.device.type != "cpu" or target.dtype != torch.float32:
        return tuning
    path = _path(target, folder)
    with _KEPT_LOCK:
        tuning = _KEPT.get(str(path), tuning)
        if tuning.weights is not None and tuning.weights != weights_default.choose_default(tuning.weights_ms):
            tuning = replace(tuning, weights=weights_default.choose_default(tuning.weights_ms))  # kept by an older rule
        if tuning.weights is None:
            if progress:
                progress(MEASURING_WEIGHTS)
            from specviz.measure.machine import CpuShare

            began, load, cpu = time.monotonic(), _load_average(), CpuShare()
            figures = weights_default.measure_formats(target, progress=progress)
            tuning = replace(tuning, weights=weights_default.choose_default(figures), weights_ms=figures)
            if tuning.kept and not _busy(load, cpu.others()):  # busy: this process only; a later start measures
                tuning = _write(path, tuning)
            _KEPT[str(path)] = tuning
            if progress:
                progress(weights_default.describe(figures, tuning.weights, time.monotonic() - began))
    return tuning


def verify_curve(target, fmt: str, folder: Path | None = None) -> dict[int, float] | None:
    """The verify curve {n: T(n)/T(1)} measured for ``target`` (the float32 LoadedModel) in weight format ``fmt``
    by :func:`tune_weights` in this process or an earlier one (None: not measured)."""
    tuning = known(target, folder)
    if tuning is None or fmt not in tuning.weights_ms:
        return None
    return dict(tuning.weights_ms[fmt]["verify"])


def forget() -> None:
    """Drop every choice kept in memory (a test's fresh process); the files stay."""
    with _KEPT_LOCK:
        _KEPT.clear()


def _path(target, folder: Path | None) -> Path:
    from specviz.runtime.models import cache_dir

    return (folder or cache_dir() / "tuning") / f"{machine_key(target)}.json"


MEASURING = "Measuring the fastest threads and kernels on this machine (once)…"
"""The progress line :func:`tune` says when it measures (the app names its start-up's wait with it)."""


def _read_or_measure(target, path: Path, force: bool, remeasure_busy: bool, progress) -> Tuning:
    """The disk's choice at ``path`` (unless ``force``; a busy one is measured again when ``remeasure_busy`` and
    the CPUs are quiet now), else a new measurement, written unless it is busy and the disk holds a quiet one."""
    disk = _read(path)
    if disk is not None and not force and not (remeasure_busy and disk.busy and _quiet_now()):
        return disk
    if progress:
        progress(MEASURING)
    tuning = _measure_with_load(target)
    if tuning.busy and disk is not None and not disk.busy:
        return tuning  # this process uses it; the file keeps the quiet machine's choice
    return _write(path, tuning)


def _measure_with_load(target) -> Tuning:
    """:func:`measure`, with the load it was taken under (``load``, ``others``, ``busy``)."""
    from specviz.measure.machine import CpuShare

    load = _load_average()
    cpu = CpuShare()
    tuning = measure(target)
    others = cpu.others()
    return replace(tuning, load=load, others=others, busy=_busy(load, others))


def apply(target, tuning: Tuning) -> None:
    """Make ``target``'s forwards use the chosen threads (per forward size) and kernels."""
    target.model._specviz_threads = (tuning.step_threads, tuning.verify_threads)
    if report_of(target.model) is not None:
        set_fast_path(target.model, tuning.fast_path)
        set_row_padding(target.model, tuning.pad_rows if tuning.fast_path else {})


def measure(target) -> Tuning:
    """Time T(1) and T(5) for every thread count and kernel choice (interleaved rounds: :data:`WARMUP` +
    :data:`REPEATS`, or :data:`BUSY_WARMUP` + :data:`BUSY_REPEATS` where the load average exceeds the cores when
    it starts, so a busy machine, whose choice is measured again on a quiet start, costs less) and choose."""
    model = target.model
    fast_ready = report_of(model) is not None and report_of(model).active
    threads = list(range(1, min(2, os.cpu_count() or 1) + 1))
    kernels = [True, False] if fast_ready else [_fast_now(target)]
    combos = [(t, fast) for t in threads for fast in kernels]
    before = torch.get_num_threads()
    model._specviz_threads = None
    try:
        times = _time_combos(model, target.device, combos)
    finally:
        torch.set_num_threads(before)
    ms = {f"{t}/{'fast' if fast else 'plain'}": {name: statistics.median(v) for name, v in times[(t, fast)].items()}
          for t, fast in combos}
    fast = min(kernels, key=lambda f: min(ms[f"{t}/{'fast' if f else 'plain'}"]["step"]
                                          + ms[f"{t}/{'fast' if f else 'plain'}"]["verify"] for t in threads))
    label = "fast" if fast else "plain"
    step = min(threads, key=lambda t: ms[f"{t}/{label}"]["step"])
    verify = min(threads, key=lambda t: ms[f"{t}/{label}"]["verify"])
    pad: dict[int, int] = {}
    if fast and fast_ready:
        pad = _measure_padding(model, step, verify, ms)
    return Tuning(step, verify, fast, ms, pad)


def _measure_padding(model, step_threads: int, verify_threads: int, ms: dict) -> dict[int, int]:
    """The row padding at the chosen threads: n = 1 from the step's thread count, n > 1 from the verification's;
    the linears' times go into ``ms`` under "rows/<threads>"."""
    before = torch.get_num_threads()
    tables = {}
    try:
        for threads in sorted({step_threads, verify_threads}):
            torch.set_num_threads(threads)
            times = time_linear_rows(model, list(range(1, PAD_ROWS + 1)))
            ms[f"rows/{threads}"] = times
            tables[threads] = choose_row_padding(times)
    finally:
        torch.set_num_threads(before)
    pad = {n: m for n, m in tables[verify_threads].items() if n > 1}
    if 1 in tables[step_threads]:
        pad[1] = tables[step_threads][1]
    return dict(sorted(pad.items()))


@torch.inference_mode()
def _rounds() -> tuple[int, int]:
    """(warm-up rounds, timed rounds) of :func:`measure`: fewer where the load average exceeds the cores now."""
    return (BUSY_WARMUP, BUSY_REPEATS) if _busy(_load_average(), None) else (WARMUP, REPEATS)


def _time_combos(model, device, combos) -> dict:
    vocab = int(model.config.get_text_config().vocab_size)
    ids = torch.randint(0, vocab, (PROMPT_TOKENS + VERIFY_TOKENS,), generator=torch.Generator().manual_seed(0))
    ids = ids.tolist()
    cache = new_cache(model)
    forward_logits(model, ids[:PROMPT_TOKENS], cache, 1)
    clock = Clock(device)
    warmup, repeats = _rounds()
    times = {combo: {"step": [], "verify": []} for combo in combos}
    for round_ in range(warmup + repeats):
        for combo in (combos if round_ % 2 == 0 else combos[::-1]):
            threads, fast = combo
            torch.set_num_threads(threads)
            with contextlib.nullcontext() if fast else plain_path(model):
                for name, n in (("step", 1), ("verify", VERIFY_TOKENS)):
                    t0 = clock.now_ms()
                    forward_logits(model, ids[PROMPT_TOKENS:PROMPT_TOKENS + n], cache, n)
                    elapsed = clock.now_ms() - t0
                    rollback_cache(cache, PROMPT_TOKENS)
                    if round_ >= warmup:
                        times[combo][name].append(elapsed)
    return times


def _fast_now(target) -> bool:
    report = report_of(target.model)
    return bool(report is not None and report.active)


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _busy(load: float | None, others: float | None) -> bool:
    """Busy: other programs used more than :data:`BUSY_SHARE` of the CPUs; where that share is unknown, a load
    average above the core count."""
    if others is not None:
        return others > BUSY_SHARE
    return load is not None and load > (os.cpu_count() or 1)


def busy_now() -> tuple[bool, float | None]:
    """(whether other programs keep the CPUs busy now, watched for :data:`QUIET_PROBE_S`; the 1-minute load
    average, None where unknown)."""
    return not _quiet_now(), _load_average()


def _quiet_now() -> bool:
    """Whether other programs leave the CPUs free now (watched for :data:`QUIET_PROBE_S`)."""
    from specviz.measure.machine import CpuShare

    cpu = CpuShare()
    time.sleep(QUIET_PROBE_S)
    return not _busy(_load_average(), cpu.others())


def _read(path: Path) -> Tuning | None:
    try:
        data = json.loads(path.read_text())
        pad = {int(n): int(m) for n, m in dict(data.get("pad_rows", {})).items()}
        if any(m < n for n, m in pad.items()):
            return None
        load, others = data.get("load"), data.get("others")
        return Tuning(int(data["step_threads"]), int(data["verify_threads"]), bool(data["fast_path"]),
                      dict(data.get("ms", {})), pad, source="disk", kept=True,
                      load=None if load is None else float(load), others=None if others is None else float(others),
                      busy=bool(data.get("busy", False)), weights=_format_or_none(data.get("weights")),
                      weights_ms=_weights_ms(data.get("weights_ms")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _format_or_none(value) -> str | None:
    """A kept default weight format (a file's ``weights``), None when absent or not a format."""
    from specviz.runtime.weights import FORMATS

    return value if value in FORMATS else None


def _weights_ms(value) -> dict:
    """A file's ``weights_ms`` with the verify curves' token counts back as ints ({}: absent)."""
    if not value:
        return {}
    return {fmt: {"step": float(fig["step"]), "range": [float(x) for x in fig["range"]],
                  "verify": {int(n): float(r) for n, r in dict(fig["verify"]).items()},
                  **({"verify_gap": float(fig["verify_gap"])} if "verify_gap" in fig else {})}
            for fmt, fig in dict(value).items()}


def _write(path: Path, tuning: Tuning) -> Tuning:
    kept = replace(tuning, kept=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {**asdict(kept), "machine": _cpu_name(), "cores": os.cpu_count(), "written": time.time()}
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(scratch, path)
    except OSError:
        return tuning
    return kept


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
