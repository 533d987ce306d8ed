"""The engine's core: the decoding loop and its phases (engine, rowpass, batch, verify_pass, output), verification
math (verify, tree), the KV cache and forwards (kv, static_cache, graphs, window), draft lengths (draft_length),
the event stream (events), counters, the cost model (costs), the verdict rule (verdict), the two-run race and the
drafter contract (drafting). It imports nothing else of specviz."""
