"""Measurement and cost: how long the target and the drafters take, on what machine, and what those timings may be
read as. One place for every timing the app, the CLI and the benchmarks take.

- :mod:`~specviz.measure.timing`: one target forward over n new tokens after a cached prompt, in interleaved rounds;
  one drafter proposal.
- :mod:`~specviz.measure.grid`: the forward grid (n new tokens x batch sizes), its impossible points, and the quick
  probe that estimates its duration.
- :mod:`~specviz.measure.machine`: the CPU-load probes (:class:`~specviz.measure.machine.CpuShare`, the busy-machine
  warning), the environment record and the memory-copy bandwidth.
- :mod:`~specviz.measure.stats`: bootstrap intervals of timed figures and the verdict on a speedup;
  :mod:`~specviz.measure.run_stats`: one run's per-pass series and their spreads.
- :mod:`~specviz.measure.costs`: measured costs read through the one cost model (draft cost c, a lookahead pass's
  cost, the what-if curves); the model and the one interpolator are :mod:`specviz.core.costs`, in the core because
  k = auto reads them every pass.
- :mod:`~specviz.measure.kernel`: the kernel bench (``specviz bench --kernel``).

Layers: this package imports the core, the drafters and the runtime modules; the core never imports it
(``.importlinter``). This file imports nothing, so a submodule loads only what it needs.
"""
