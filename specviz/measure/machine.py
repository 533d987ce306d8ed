"""The machine a timing runs on: how busy it is (the CPU-load probes), what it is (versions, device, kernels) and
its memory bandwidth (the floor of a one-token step).

Other work on the CPUs skews timings, and not evenly: with two torch threads a forward whose second thread is
descheduled waits at every operation, so a one-token step slows far more than a wide verification. A run therefore
starts a :class:`CpuShare` and reads :func:`busy_machine_warning` at its end; :data:`CONTENDED_SHARE` is the share
of the CPUs above which its ratios are not read.
"""

from __future__ import annotations

import math
import os
import platform
import statistics

import torch

from specviz.runtime.compiled import forward_path
from specviz.core.graphs import requested_path
from specviz.core.kv import Clock


def load_average() -> float | None:
    """The 1-minute load average (None where the OS has none): other work on the machine skews timings."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


CONTENDED_SHARE = 0.2  # other programs took more than this share of the CPUs during a timing: its ratios are not read


class CpuShare:
    """How much of this machine's CPU time other processes took since this object was made: (busy CPU time of all
    processes, from ``/proc/stat``, steal time included) minus this process's own (``os.times``), over all CPUs'
    time. A run's timings are distorted where it is high: with two torch threads, a forward whose second thread is
    descheduled waits at every operation, so a one-token step slows down far more than a wide verify (seen in the
    browser: a second program at one full core made steps 5-14x slower and lookahead look 2.1x faster where its
    passes cost 1.9 steps). Linux only; elsewhere :meth:`others` is None."""

    def __init__(self) -> None:
        self._start = self._snapshot()

    @staticmethod
    def _snapshot() -> tuple[float, float, float] | None:
        return cpu_snapshot()

    def others(self) -> float | None:
        """The share (0..1) of all CPUs' time used by other processes since the start; None when unknown or when
        too little time passed to tell (under 0.2 s of CPU time)."""
        return others_between(self._start, self._snapshot())


def cpu_snapshot() -> tuple[float, float, float] | None:
    """(all CPUs' time, their busy time, this process's CPU time), in seconds; None without /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            ticks = [int(v) for v in stat.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
        hertz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    own = os.times()
    total = sum(ticks) / hertz
    return total, total - (ticks[3] + ticks[4]) / hertz, own.user + own.system


def procs_running() -> int | None:
    """The machine's threads running or waiting for a CPU now (``procs_running`` of ``/proc/stat``, the count the
    load average averages); None where unknown."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def others_between(start: tuple[float, float, float] | None, end: tuple[float, float, float] | None) -> float | None:
    """The share (0..1) of all CPUs' time other processes used between two :func:`cpu_snapshot` readings; None when
    either is unknown or under 0.2 s of CPU time lies between them."""
    if start is None or end is None:
        return None
    total, busy, own = (b - a for a, b in zip(start, end))
    if total < 0.2:
        return None
    return min(1.0, max(0.0, (busy - own) / total))


SHARED_CPU = 0.6
"""Other programs' work, in CPUs, from which a CPU counts as taken for a run's threads (:func:`threads_beside`).
Measured 2026-12-07 on the project's 2-core AVX2 VM, the embedded model in int4, 64 tokens of standard decoding,
median of 4 runs: quiet, 2 threads 2.4 s and 1 thread 3.1 s; beside one busy loop 8.8 s and 3.1 s; beside two,
10-20 s and 5.5 s; beside a loop busy a quarter of the time 2.8 s and 4.6 s (float32 alike: 3.5 / 4.1 quiet, 13.8 /
4.3 beside one loop)."""


def threads_beside(others: float | None, cpus: int) -> int | None:
    """The most torch threads a run should use beside ``others`` CPUs' worth of other programs' work (their share
    of the CPUs times ``cpus``; None: unknown) on ``cpus`` CPUs: the CPUs they leave free, a CPU counted as taken
    from :data:`SHARED_CPU` of one's work, at least 1; None when they leave every CPU free (or when unknown: no cap).
    E.g. 2 CPUs: others 0.5 -> None, 0.6 -> 1, 2.0 -> 1. An OpenMP thread that shares its CPU stalls the others at
    every operation, so fewer threads on free CPUs run faster (measured: :data:`SHARED_CPU`)."""
    if others is None or cpus <= 1:
        return None
    taken = math.floor(max(0.0, others) + (1.0 - SHARED_CPU) + 1e-9)  # a CPU from SHARED_CPU of one's work
    free = cpus - taken
    return None if free >= cpus else max(1, free)


def busy_machine_warning(cpu: CpuShare | None = None) -> str | None:
    """A warning line when other work slowed a run, else None.

    Args:
        cpu: started when the run began. Where it can tell, the warning is its share of the CPUs taken by other
            programs above :data:`CONTENDED_SHARE`. The load average would count the run's own threads (two
            busy torch threads make a load of 2 on a 2-CPU machine), so it decides only before a run (``cpu``
            None) or where the share is unknown: above half the CPU count.
    """
    share = cpu.others() if cpu is not None else None
    if share is not None:
        if share > CONTENDED_SHARE:
            return (f"warning: other programs used {share:.0%} of this machine's CPU time during the run: timings "
                    f"are slow and noisy")
        return None
    load, cpus = load_average(), os.cpu_count() or 1
    if load is not None and load > 0.5 * cpus:
        return (f"warning: this machine is busy (load average {load:.1f} on {cpus} CPUs): timings will be slow "
                f"and noisy")
    return None


def environment(target=None) -> dict:
    """Versions and machine facts needed to reproduce a result."""
    import transformers

    import specviz

    info = {
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "specviz": getattr(specviz, "__version__", "unknown")},
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "load_average_1min": load_average()},
    }
    if target is not None:
        device = target.device
        info["device"] = {"device": str(device), "dtype": str(target.dtype).removeprefix("torch."),
                          "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
        speed = getattr(target, "speed", None)
        info["target"] = {"spec": target.spec, "label": target.label, "num_layers": target.num_layers,
                          "param_bytes": target.param_bytes,
                          # kernels of the loaded model, shared by our runs and transformers' generate()
                          "kernels": speed.summary() if speed is not None else "default kernels",
                          "forward": forward_path(target.model),
                          "engine_path": requested_path(target)}  # graphs or eager (specviz.core.graphs)
    return info


def copy_bandwidth_repeats(device: torch.device, megabytes: int = 256, repeats: int = 5) -> list[float]:
    """Memory bandwidth in GB/s of each of ``repeats`` copies of a ``megabytes`` MB float32 tensor on ``device``
    (after one warm-up copy), counting bytes read + written; a list of ``repeats`` floats, in the order timed."""
    n = megabytes * 1024 * 1024 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    clock = Clock(device)
    dst.copy_(src)  # warm-up: page in both buffers
    rates = []
    for _ in range(repeats):
        t0 = clock.now_ms()
        dst.copy_(src)
        seconds = (clock.now_ms() - t0) / 1000.0
        rates.append(2 * src.numel() * src.element_size() / seconds / 1e9 if seconds > 0 else math.inf)
    return rates


def copy_bandwidth_gbs(device: torch.device, megabytes: int = 256, repeats: int = 5) -> float:
    """Memory bandwidth in GB/s from a large tensor copy, counting bytes read + written: the median of
    :func:`copy_bandwidth_repeats`."""
    return statistics.median(copy_bandwidth_repeats(device, megabytes, repeats))
