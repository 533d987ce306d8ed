"""Threads and kernels chosen by measurement on the machine at hand, kept on disk per machine and model.

Which settings decode fastest depends on the CPU: on one 2-core AVX2 machine a one-token step took 92.6 ms with
the fast path (oneDNN linears, :mod:`specviz.speed`) and 2 threads but 104.8 ms with 1 thread, while with 1 thread
the default kernels beat the fast path (95.3 ms); on an AVX-512 machine the fast path wins at both. So instead of a
fixed rule, :func:`tune` times a one-token step T(1) and a verification T(5) after a short cached prompt for each
thread count (1 .. min(2, cores)) and for the fast path on and off, interleaved and repeated, and chooses:

- the thread count for a one-token forward (the lower median T(1)) and for a forward of several tokens (the lower
  median T(5)); the engine's forwards switch between them (``kv.forward_logits`` reads the model's choice);
- the fast path, on or off (the lower T(1) + T(5) at the chosen threads; off keeps the default kernels);
- with the fast path on, the row padding (:func:`specviz.speed.choose_row_padding`): the model's linears are
  timed on 1 .. :data:`PAD_ROWS` rows at the step's and at the verification's thread count, and a forward of n
  rows is computed as m > n rows where m measured at least 10 % faster (on the project's AVX-512 machine one row
  cost more than four; on an AVX2 dispatch nothing is padded).

The choice is written to ``cache_dir()/tuning/<key>.json``; the key is the CPU model, its core count and
instruction set, torch's version, the model spec, dtype and device and the speed-ups applied at load, so a later start on the same machine reads it
(in milliseconds) instead of measuring again (a few seconds). A measurement taken while the machine is busy
(load average above the core count) is used for this process but not kept. ``SPECVIZ_TUNE=0`` turns tuning off
(the settings then stay as loaded).

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
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from specviz.core.kv import Clock, forward_logits, new_cache, rollback_cache
from specviz.speed import (choose_row_padding, plain_path, report_of, set_fast_path, set_row_padding,
                           time_linear_rows)

ENV_TUNE = "SPECVIZ_TUNE"
PROMPT_TOKENS = 64
VERIFY_TOKENS = 5
REPEATS = 5
WARMUP = 2
FORMAT = 2  # 2: row padding added (files of format 1 are measured again: the key includes the format)
PAD_ROWS = 8  # row counts timed for the row padding (1 .. PAD_ROWS)


@dataclass(frozen=True)
class Tuning:
    """The settings chosen for one model on this machine.

    Attributes:
        step_threads / verify_threads: torch threads for a one-token forward and for a forward of several tokens.
        fast_path: whether the fast path's kernels run (False: the default kernels).
        pad_rows: {n: m}: a forward of n rows (batch x new tokens) computes m > n rows (fast path only; {}: none).
        ms: the medians measured, "threads/fast|plain" -> {"step": T(1) ms, "verify": T(5) ms}.
        source: "measured", "disk" (read from an earlier measurement), "off" (tuning disabled) or "compiled" (a
            compiled forward, :mod:`specviz.compiled`: its kernels are inductor's, its threads stay as they are).
        kept: whether the measurement was written to disk (a busy machine's is not).
    """

    step_threads: int
    verify_threads: int
    fast_path: bool
    ms: dict = field(default_factory=dict)
    pad_rows: dict = field(default_factory=dict)
    source: str = "measured"
    kept: bool = False

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
        return f"{kernels}, {threads}{padding} ({self.source})"


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


def tune(target, *, folder: Path | None = None, force: bool = False, progress=None) -> Tuning:
    """Choose and apply the threads and kernels for ``target`` (see the module docstring); returns the choice.

    Args:
        target: a loaded model (:class:`specviz.models.LoadedModel`); only CPU models are tuned.
        folder: where choices are kept (default ``cache_dir()/tuning``).
        force: measure even when a kept choice exists.
        progress: optional callable(str) for a status line.
    """
    if getattr(target, "compiled", None) is not None:  # its graphs guard on the kernels: switching them retraces
        return Tuning(torch.get_num_threads(), torch.get_num_threads(), False, source="compiled")
    if not tuning_enabled() or target.device.type != "cpu":
        return Tuning(torch.get_num_threads(), torch.get_num_threads(), _fast_now(target), source="off")
    from specviz.models import cache_dir

    path = (folder or cache_dir() / "tuning") / f"{machine_key(target)}.json"
    tuning = None if force else _read(path)
    if tuning is None:
        if progress:
            progress("Measuring the fastest threads and kernels on this machine (once)…")
        tuning = measure(target)
        if not _busy():
            tuning = _write(path, tuning)
    apply(target, tuning)
    return tuning


def apply(target, tuning: Tuning) -> None:
    """Make ``target``'s forwards use the chosen threads (per forward size) and kernels."""
    target.model._specviz_threads = (tuning.step_threads, tuning.verify_threads)
    if report_of(target.model) is not None:
        set_fast_path(target.model, tuning.fast_path)
        set_row_padding(target.model, tuning.pad_rows if tuning.fast_path else {})


def measure(target) -> Tuning:
    """Time T(1) and T(5) for every thread count and kernel choice (interleaved rounds) and choose."""
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
def _time_combos(model, device, combos) -> dict:
    vocab = int(model.config.get_text_config().vocab_size)
    ids = torch.randint(0, vocab, (PROMPT_TOKENS + VERIFY_TOKENS,), generator=torch.Generator().manual_seed(0))
    ids = ids.tolist()
    cache = new_cache(model)
    forward_logits(model, ids[:PROMPT_TOKENS], cache, 1)
    clock = Clock(device)
    times = {combo: {"step": [], "verify": []} for combo in combos}
    for round_ in range(WARMUP + REPEATS):
        for combo in (combos if round_ % 2 == 0 else combos[::-1]):
            threads, fast = combo
            torch.set_num_threads(threads)
            with contextlib.nullcontext() if fast else plain_path(model):
                for name, n in (("step", 1), ("verify", VERIFY_TOKENS)):
                    t0 = clock.now_ms()
                    forward_logits(model, ids[PROMPT_TOKENS:PROMPT_TOKENS + n], cache, n)
                    elapsed = clock.now_ms() - t0
                    rollback_cache(cache, PROMPT_TOKENS)
                    if round_ >= WARMUP:
                        times[combo][name].append(elapsed)
    return times


def _fast_now(target) -> bool:
    report = report_of(target.model)
    return bool(report is not None and report.active)


def _busy() -> bool:
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:
        return False


def _read(path: Path) -> Tuning | None:
    try:
        data = json.loads(path.read_text())
        pad = {int(n): int(m) for n, m in dict(data.get("pad_rows", {})).items()}
        if any(m < n for n, m in pad.items()):
            return None
        return Tuning(int(data["step_threads"]), int(data["verify_threads"]), bool(data["fast_path"]),
                      dict(data.get("ms", {})), pad, source="disk", kept=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, tuning: Tuning) -> Tuning:
    kept = Tuning(**{**asdict(tuning), "kept": True})
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
