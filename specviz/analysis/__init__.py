"""What is computed from events and timings: the benchmark (bench: its prompts, runs and report in prompts,
bench_runs, bench_report), the drafter arena (arena, its rows in arena_rows), the what-if of k (whatif), the
batching sweep (batching) and the step-through recording (stepper). Timing and costs are :mod:`specviz.measure`'s."""
