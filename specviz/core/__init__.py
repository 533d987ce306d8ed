"""The engine's core: the decoding loop (engine), verification math (verify, tree), the KV cache (kv), the event
stream (events), metrics, the two-run race and the drafter protocol (drafting). It imports nothing else of specviz."""
