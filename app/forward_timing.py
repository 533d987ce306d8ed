"""The target's forwards timed as its runs will see them: a one-token step and a wide forward at the thread counts
the runs use (:func:`timed_forwards`), for the costs the app plans with before any run (:func:`app.costs.tuned_costs`)."""

from __future__ import annotations


STEP_PROBE_BUDGET_MS = 1500.0  # the start-up's one-token step is timed in rounds until this much was timed ...
STEP_PROBE_ROUNDS = 15  # ... at most this many (at least three), its median kept


def timed_forwards(loaded, wide: int) -> tuple[float, float]:
    """(T(1) ms, T(``wide``) / ``wide`` ms per token after ``wide`` cached tokens) of ``loaded``'s target, timed here
    (:func:`specviz.measure.grid.probe_forward_ms`, each after an untimed warm-up forward; the step the median of
    up to :data:`STEP_PROBE_ROUNDS` within :data:`STEP_PROBE_BUDGET_MS`) at the thread counts its runs use: the
    per-machine tuning's choice for a one-token step and for a wider forward (:func:`specviz.core.kv.chosen_threads`:
    within a busy machine's cap, which the caller sets first as a run's job does:
    :func:`app.estimates.threads_for_run`), else torch's current count. (Timed at another count the figures mislead:
    on two busy cores a two-thread step took 1.5 s where the one-thread step the runs use took 0.1 s; a start-up
    that timed before any cap was set read 1321 ms a step where its runs took 78 ms.)"""
    import torch

    from specviz.core.kv import chosen_threads
    from specviz.measure.grid import probe_forward_ms

    choice = chosen_threads(loaded.model) or (torch.get_num_threads(),) * 2
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(choice[0])
        step = probe_forward_ms(loaded, (1,), repeats=3, budget_ms=STEP_PROBE_BUDGET_MS,
                                max_repeats=STEP_PROBE_ROUNDS)[1]
        torch.set_num_threads(choice[1])
        per_token = probe_forward_ms(loaded, (wide,), prompt_len=wide)[wide] / wide  # after a cached chunk, as a
        # long prompt's later chunks are read
    finally:
        torch.set_num_threads(before)
    return step, per_token
