"""How a target runs on this machine: loading models (``models``: specs, the embedded GGUF, tokenizers and
prompts), placing them with accelerate's device map (``placement``), their weight formats (``weights``), the eager
CPU fast path (``speed``), the opt-in compiled forward (``compiled``), real target/draft pairs and the memory check
(``presets``) and the operator's model policy (``policy``). Above ``specviz.core``, below the drafters."""
