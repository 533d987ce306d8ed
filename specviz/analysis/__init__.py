"""What is computed from events and timings: the benchmark (bench), the drafter arena (arena), the what-if of k
(whatif) and the step-through recording (stepper)."""
