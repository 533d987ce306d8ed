"""``load_model``: a spec (see :mod:`specviz.runtime.models`) to a :class:`LoadedModel`, with the per-process cache, the Hub
checks and the one-sentence errors; ``layer_count`` and ``model_name`` answer without loading anything."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import torch

from specviz.runtime.models.base import LoadedModel, ModelLoadError, Progress, _first_line, _say
from specviz.runtime.models.devices import _DTYPES, _resolve_dtype, exact_float32_on_cuda, resolve_device
from specviz.runtime.models.embedded import (EMBEDDED, EMBEDDED_NAME, EMBEDDED_PACKAGE, HUB_ID_OF_EMBEDDED, _MARKER,
                                     _embedded_folder, embedded_gguf_path, ensure_embedded)
from specviz.runtime.models.vocab import token_id_count
from specviz.runtime.policy import remote_code_allowed
from specviz.runtime.speed import prepare_for_decoding

if TYPE_CHECKING:
    from specviz.runtime.compiled import CompileReport

DEFAULT_MAX_MODELS = 3
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_UNSAFE_IN_NAME = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")  # control characters, lone surrogates

_CacheKey = tuple[str, str, torch.dtype]
_CACHE: OrderedDict[_CacheKey, LoadedModel] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_KEY_LOCKS: dict[_CacheKey, threading.Lock] = {}


def load_model(spec: str = EMBEDDED, *, device: str | torch.device | None = None,
               dtype: torch.dtype | str | None = None, trust_remote_code: bool | None = None,
               progress: Progress | None = None) -> LoadedModel:
    """Load the causal LM named by ``spec`` (see the module docstring) onto ``device`` in ``dtype``.

    ``device`` follows ``resolve_device``. ``dtype`` None means float32 on CPU and bfloat16 on CUDA; the strings
    "float32", "bfloat16" and "float16" are accepted too. Results are cached per process by (canonical spec,
    device, dtype): concurrent callers asking for the same model load it once and share it, and at most
    ``$SPECVIZ_MAX_MODELS`` (default 3) models are kept, the least recently used dropped first.
    ``trust_remote_code`` None (the default) follows the operator setting ``SPECVIZ_ALLOW_REMOTE_CODE`` (off unless
    set, see :mod:`specviz.runtime.policy`): a model repository's own Python code never runs unless the operator allows it.
    Raises ModelLoadError (one clear sentence) when the model cannot be found or loaded, ValueError for a bad dtype.
    """
    if trust_remote_code is None:
        trust_remote_code = remote_code_allowed()
    device = resolve_device(device)
    dtype = _resolve_dtype(dtype, device)
    canonical, kind = _resolve_spec(spec)
    key = (canonical, str(device), dtype)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with key_lock:  # one loader per key; the others wait here and then find it cached
        with _CACHE_LOCK:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                return _CACHE[key]
        loaded = _load_uncached(canonical, kind, device, dtype, trust_remote_code, progress)
        with _CACHE_LOCK:
            _CACHE[key] = loaded
            evicted = False
            while len(_CACHE) > _max_models():
                _CACHE.popitem(last=False)
                evicted = True
        if evicted and torch.cuda.is_available():
            torch.cuda.empty_cache()
    return loaded


def cached_model(spec: str) -> LoadedModel | None:
    """The model ``spec`` names when it is already loaded (any device or dtype; the most recently used copy), else
    None: nothing is loaded or downloaded, so a quick check (e.g. the early-exit layer box, when it is left) can read
    its layer count. A spec that names no model gives None too. Never raises."""
    try:
        canonical, _ = _resolve_spec(spec)
    except Exception:  # noqa: BLE001 - a bad name is no loaded model
        return None
    with _CACHE_LOCK:
        found = [loaded for key, loaded in _CACHE.items() if key[0] == canonical]
    return found[-1] if found else None


def layer_count(spec: str) -> int | None:
    """The number of transformer layers of the model ``spec`` names, read from its ``config.json`` without loading
    weights or tokenizer and without any network call; None when that file is not at hand. It reads: for
    "embedded", the converted folder in :func:`cache_dir` (only once :func:`ensure_embedded` has finished it; where
    "embedded" means the hub copy, as for a hub id); for a local folder, its own ``config.json``; for a hub id, the
    ``config.json`` already in the local Hugging Face cache (``huggingface_hub.try_to_load_from_cache``). The count
    is the text model's ``num_hidden_layers`` (``n_layer`` for GPT-2-style configs; a multimodal config's
    ``text_config``), as :func:`load_model` reports it in :attr:`LoadedModel.num_layers`. A loaded copy
    (:func:`cached_model`) is asked first. None also for a spec that names no model, an unreadable or malformed
    file, or a count below 1. Never raises."""
    loaded = cached_model(spec)
    if loaded is not None:
        return loaded.num_layers or None
    try:
        canonical, kind = _resolve_spec(spec)
        if kind == "embedded":
            config = _embedded_folder(embedded_gguf_path()) / "config.json"
            if not (config.parent / _MARKER).is_file():  # not converted yet (or half written)
                return None
        elif kind == "local":
            config = Path(canonical) / "config.json"
        else:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(canonical, "config.json")
            if not isinstance(found, str):  # not cached, or cached as missing
                return None
            config = Path(found)
        data = json.loads(config.read_text(encoding="utf-8"))
        text_config = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
        count = text_config.get("num_hidden_layers") or text_config.get("n_layer")
        return count if isinstance(count, int) and not isinstance(count, bool) and count >= 1 else None
    except Exception:  # noqa: BLE001 - a missing, unreadable or odd file: the count is unknown
        return None


def model_name(spec: str) -> str:
    """The short name the model ``spec`` names is shown by before it is loaded: "SmolLM2-135M-Instruct" for the
    embedded model, the folder's name for a local folder, the hub id itself; ``spec`` stripped when it names no
    model. Loaded, :attr:`LoadedModel.label` adds where it came from and its dtype. Never raises."""
    try:
        canonical, kind = _resolve_spec(spec)
    except Exception:  # noqa: BLE001 - no model: its own words
        return str(spec).strip()
    return _name_of(canonical, kind)


def _name_of(canonical: str, kind: str) -> str:
    """The short name of a resolved spec (:func:`_resolve_spec`'s canonical spec and kind)."""
    return {"embedded": EMBEDDED_NAME, "local": Path(canonical).name}.get(kind, canonical)


def clear_model_cache() -> None:
    """Forget every cached model (callers still holding a LoadedModel keep theirs)."""
    with _CACHE_LOCK:
        _CACHE.clear()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _max_models() -> int:
    try:
        return max(1, int(os.environ.get("SPECVIZ_MAX_MODELS", DEFAULT_MAX_MODELS)))
    except ValueError:
        return DEFAULT_MAX_MODELS


def _resolve_spec(spec: str | os.PathLike) -> tuple[str, str]:
    """(canonical spec, kind) with kind one of "embedded", "local", "hub"; ModelLoadError if it is neither."""
    text = os.fspath(spec).strip()
    if not text:
        raise ModelLoadError("No model was given: pick 'embedded', a local folder or a Hugging Face Hub id.")
    if _UNSAFE_IN_NAME.search(text):
        raise ModelLoadError("The model name contains control or invalid characters: type a hub id (org/name), "
                             "'embedded' or a folder path.")
    if text.lower() == EMBEDDED:
        if importlib.util.find_spec(EMBEDDED_PACKAGE) is None and not _hub_offline():
            # e.g. on a Hugging Face Space, where the same model comes from the hub instead of the GGUF file
            return HUB_ID_OF_EMBEDDED, "hub"
        return EMBEDDED, "embedded"
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"The folder {path} has no config.json, so it is not a saved transformers model.")
        return str(path.resolve()), "local"
    if path.exists():
        raise ModelLoadError(f"{text!r} is a file; give the folder a model was saved to with save_pretrained.")
    if _HUB_ID.match(text) and ".." not in text:
        return text, "hub"
    raise ModelLoadError(f"There is no such local folder or hub id: {text!r} (hub ids look like 'org/name').")


def _load_uncached(spec: str, kind: str, device: torch.device, dtype: torch.dtype, trust_remote_code: bool,
                   progress: Progress | None) -> LoadedModel:
    source = str(ensure_embedded(progress)) if kind == "embedded" else spec
    name = _name_of(spec, kind)
    _say(progress, f"Loading {name}...")
    hub_kwargs = {}
    if kind == "hub":
        hub_kwargs = {"local_files_only": _hub_needs_local_only(spec, trust_remote_code)}
    try:
        model, tokenizer, stored = _from_pretrained(source, dtype, trust_remote_code, hub_kwargs, device, name)
    except ModelLoadError:
        raise
    except Exception as error:
        raise _explain(spec, kind, error) from error
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # parameters() dedups ties
    speed = prepare_for_decoding(model)  # after param_bytes: fused projections re-point weights to views
    compiled = _compiled(model, progress)
    where = {"embedded": "embedded, ", "local": "local, "}.get(kind, "")
    copy = " copy" if stored is not None and stored != dtype else ""
    label = f"{name} ({where}{str(dtype).removeprefix('torch.')}{copy})"
    head = model.get_output_embeddings()
    text_config = model.config.get_text_config()
    return LoadedModel(
        model=model, tokenizer=tokenizer, spec=spec, label=label, device=device, dtype=dtype,
        eos_token_ids=_eos_token_ids(model, tokenizer),
        num_layers=int(getattr(text_config, "num_hidden_layers", 0) or getattr(text_config, "n_layer", 0)),
        vocab_size=int(head.weight.shape[0]) if head is not None else int(text_config.vocab_size),
        param_bytes=param_bytes, speed=speed, num_token_ids=token_id_count(tokenizer), compiled=compiled,
    )


def _compiled(model, progress: Progress | None) -> CompileReport | None:
    """Compile and warm ``model``'s forward when ``SPECVIZ_COMPILE=1`` (:mod:`specviz.runtime.compiled`), else None.
    Raises ModelLoadError (one sentence) when torch.compile fails; the model then keeps its eager forward."""
    from specviz.runtime.compiled import compile_forward, compile_requested

    if not compile_requested():
        return None
    try:
        report = compile_forward(model, progress=progress)
    except RuntimeError as error:
        raise ModelLoadError(f"{_first_line(error)} Unset SPECVIZ_COMPILE (or drop --compile) to run "
                             f"eagerly.") from error
    _say(progress, report.summary())
    return report


def _from_pretrained(source: str, dtype: torch.dtype, trust_remote_code: bool, hub_kwargs: dict,
                     device: torch.device | None = None, name: str = ""):
    """(model, tokenizer, dtype the weights are stored in or None) for a folder or hub id. Before any weight is
    read, the config's size is checked against the device's free memory (:func:`specviz.runtime.presets.check_fits`:
    ModelLoadError when it cannot fit). On CUDA with ``accelerate`` installed the weights are placed by its
    device_map as they load; a CUDA load turns TF32 matmuls off (:func:`exact_float32_on_cuda`)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from specviz.runtime.presets import MemoryTooSmallError, check_fits

    config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code, **hub_kwargs)
    stored = getattr(config.get_text_config(), "dtype", None) or getattr(config, "dtype", None)
    stored = _DTYPES.get(stored.removeprefix("torch."), None) if isinstance(stored, str) else stored
    common = dict(dtype=dtype, trust_remote_code=trust_remote_code, **hub_kwargs)
    if device is not None:
        try:
            check_fits(config, dtype, device, name or source)
        except MemoryTooSmallError as error:
            raise ModelLoadError(str(error)) from None
        except (AttributeError, TypeError, ValueError):  # a config without the usual sizes: no estimate
            pass
        if device.type == "cuda":
            exact_float32_on_cuda()
            if importlib.util.find_spec("accelerate") is not None:
                common["device_map"] = str(device)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="sdpa", **common)
    except (ValueError, ImportError) as error:
        if "sdpa" not in str(error).lower() and "attn" not in str(error).lower():
            raise
        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager", **common)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **hub_kwargs)
    return model, tokenizer, stored


def _hub_needs_local_only(spec: str, trust_remote_code: bool) -> bool:
    """True when ``spec`` is fully in the local Hub cache; ModelLoadError at once when it is not and the
    Hub cannot be reached (offline mode or no network), instead of transformers' slow retries."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(spec, local_files_only=True, trust_remote_code=trust_remote_code)
        return True
    except Exception:  # not cached (or not loadable): only the Hub can tell
        pass
    if _hub_offline() or not _hub_reachable():
        raise ModelLoadError(f"Could not load {spec!r}: it is not a local folder, not in the local Hugging Face "
                             f"cache, and the Hugging Face Hub is unreachable (offline?).")
    return False


def _hub_offline() -> bool:
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    if any(flag.strip().lower() in ("1", "true", "yes", "on") for flag in flags):
        return True
    try:
        from huggingface_hub import is_offline_mode
        return bool(is_offline_mode())
    except ImportError:
        return False


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub's endpoint opens within ``timeout_s`` (assumed yes behind a proxy)."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    try:
        from huggingface_hub import constants
        endpoint = urlparse(constants.ENDPOINT)
    except ImportError:
        endpoint = urlparse("https://huggingface.co")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _explain(spec: str, kind: str, error: Exception) -> ModelLoadError:
    """Turn a transformers / hub exception into a one-sentence ModelLoadError."""
    text = str(error)
    lowered = text.lower()
    if "unrecognized configuration class" in lowered or ("does not support" in lowered and "causal" in lowered):
        return ModelLoadError(f"{spec!r} is not a causal language model (AutoModelForCausalLM cannot load it).")
    if kind == "hub" and ("repository not found" in lowered or "not a valid model identifier" in lowered
                          or type(error).__name__ in ("RepositoryNotFoundError", "GatedRepoError")):
        return ModelLoadError(f"Could not load {spec!r}: no such model on the Hugging Face Hub, or it is "
                              f"private or gated.")
    if "trust_remote_code" in lowered or "custom code" in lowered:
        return ModelLoadError(f"{spec!r} needs to run its own Python code from the model repository, and running "
                              f"a repository's code is off (operator setting SPECVIZ_ALLOW_REMOTE_CODE=1 turns it "
                              f"on, for models you trust).")
    return ModelLoadError(f"Could not load {spec!r}: {_first_line(error)}")


def _eos_token_ids(model, tokenizer) -> tuple[int, ...]:
    """End-of-sequence ids from the generation config, the model config and the tokenizer, in that order."""
    found: list[int] = []
    sources = (getattr(getattr(model, "generation_config", None), "eos_token_id", None),
               getattr(model.config.get_text_config(), "eos_token_id", None),
               getattr(tokenizer, "eos_token_id", None))
    for ids in sources:
        for token_id in ([ids] if isinstance(ids, int) else list(ids or [])):
            if int(token_id) not in found:
                found.append(int(token_id))
    return tuple(found)
