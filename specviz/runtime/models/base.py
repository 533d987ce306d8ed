"""What every part of :mod:`specviz.runtime.models` shares: the loaded-model record, the errors, the progress callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specviz.runtime.speed import SpeedReport

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from specviz.runtime.compiled import CompileReport

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
    speed: SpeedReport | None = None  # the eager speed-ups applied at load time (specviz.runtime.speed)
    num_token_ids: int | None = None  # ids the tokenizer defines (max id + 1); head rows beyond it are padding
    compiled: CompileReport | None = None  # the compiled forward, when SPECVIZ_COMPILE=1 (specviz.runtime.compiled)
    path: str = "auto"  # forward path: "auto" (graphs on CUDA unless SPECVIZ_GRAPHS=0), "eager" or "graphs"


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _first_line(error: BaseException) -> str:
    line = (str(error).strip().splitlines() or [type(error).__name__])[0].strip()
    return line if line.endswith((".", "!", "?")) else line + "."
