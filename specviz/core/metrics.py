"""The old home of a run's statistics, kept as a path only: every name here lives elsewhere now.

- the counts of committed work and the figures derived from them (:class:`Counters`, :func:`speedup`,
  :func:`decode_speedup`): :mod:`specviz.core.counters`;
- one run's per-pass series and the spreads of its timed figures (:class:`RunStats`), the bootstrap statistics,
  the verdict on a speedup and the impossible-timing check: :mod:`specviz.measure.run_stats` and
  :mod:`specviz.measure.stats`;
- the cost model (expected tokens, T_verify, T_pass, predicted speedups): :mod:`specviz.core.costs`;
- :func:`format_apart`: :mod:`specviz.core.verdict`.

Import from those modules. This one re-exports their names for the callers not yet moved (the app); the core
contract of ``.importlinter`` lets this module alone import :mod:`specviz.measure`, and that exception goes with it.
"""

from __future__ import annotations

from specviz.core.costs import (Costs, end_to_end_speedup, expected_tokens, expected_tokens_per_pass,  # noqa: F401
                                predicted_speedup, predicted_speedup_measured, predicted_speedup_paper)
from specviz.core.counters import Counters, decode_speedup, speedup  # noqa: F401
from specviz.core.verdict import format_apart  # noqa: F401
from specviz.measure.run_stats import RunStats  # noqa: F401
from specviz.measure.stats import (BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, MIN_JUDGED_PASSES, NOISY_SPREAD,  # noqa: F401
                                   Interval, SpeedupJudgement, bootstrap_mean, bootstrap_rate_ratio,
                                   bootstrap_ratio_of_sums, end_to_end_interval, faster_than_possible,
                                   judge_decode_speedup, judge_speedup)
