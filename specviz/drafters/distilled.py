"""A small draft model distilled from the target: N decoder layers of the target's width, trained on its outputs.

The draft model is a view of the target, as the early exit is (:mod:`specviz.drafters.early_exit`), with two
differences: its N layers and final norm are its *own* (copied from target layers at creation, then trained by
:mod:`specviz.training.draft_model`), and its LM head is the target's, restricted to a draft vocabulary of the
most frequent greedy tokens (:class:`SubsetLMHead`, 8192 of SmolLM2's 49,152 rows by default). The embedding and
LM-head tensors are the target's own (shared, frozen); a file holds only the N layers, the final norm and the draft
vocabulary, so one layer of SmolLM2-135M costs about 7 MB in float16.

Drafting is :class:`~specviz.drafters.model.ModelDrafter`'s (own KV cache, greedy or sampled). Outside the draft
vocabulary the draft's probability is 0: speculative sampling stays exact for any draft distribution, because the
target's residual distribution recovers what the draft cannot propose.

Files: safetensors (float16 weights, int64 draft vocabulary), metadata ``kind`` = "distilled", ``format``, the
target's signature (:func:`specviz.drafters.networks.target_signature`), ``settings`` (the target layers each draft
layer started from) and ``info`` (the training report). :func:`load_draft_model` refuses a file made for another
target in one sentence.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from specviz.drafters.model import ModelDrafter
from specviz.drafters.networks import DraftLMHead, HeadsError, file_metadata, signature_fits, target_signature
from specviz.runtime.placement import rehook_view
from specviz.runtime.weights.formats import head_weight

DRAFTERS_DIR = Path(__file__).resolve().parents[2] / "assets" / "drafters"
KIND = "distilled"
FORMAT = 1


class SubsetLMHead(nn.Module):
    """The target's LM head restricted to a draft vocabulary, as the distilled model's ``lm_head`` module: (..., H)
    -> (..., V) logits, -inf outside the vocabulary (:meth:`forward`, what the drafter samples from), or (..., N)
    logits over it (:meth:`subset_logits`, what training reads). The rows are frozen copies held by a
    :class:`~specviz.drafters.networks.DraftLMHead` (``lm``), the heads' own.

    Args:
        weight: (V, H) the target's LM-head weight.
        vocab_ids: (N,) int64 token ids of the draft vocabulary, or None / empty for all V.
    """

    def __init__(self, weight: torch.Tensor, vocab_ids: torch.Tensor | None) -> None:
        super().__init__()
        self.lm = DraftLMHead(weight, vocab_ids)
        self.vocab_size = self.lm.vocab_size

    @property
    def rows(self) -> int:
        """N, the draft vocabulary's size."""
        return self.lm.rows

    @property
    def int8(self):
        """The int8 rows (:class:`~specviz.runtime.weights.linears.Int8Linear`) once :meth:`use_int8` ran, else None."""
        return self.lm.int8

    def use_int8(self) -> None:
        """Draft with int8 rows for good (:meth:`DraftLMHead.to_int8`; drafting only, never training)."""
        self.lm.to_int8()

    def subset_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., N) logits over the draft vocabulary (N = V without one)."""
        return self.lm.subset_logits(h)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) logits, -inf outside the draft vocabulary."""
        return self.lm.full_logits(h)


def _layer_copies(target_model: nn.Module, source_layers: list[int], copy_weights: bool = True) -> nn.ModuleList:
    """New decoder layers of the target's class, numbered 0..N-1 for the draft's own KV cache, holding copies of the
    target layers ``source_layers``' weights (from their ``state_dict``: a target prepared for decoding keeps packed
    or fused copies that a module copy would not carry), in the target's dtype and on its device. Without
    ``copy_weights`` the layers keep their fresh initial weights, for a file to fill (:func:`load_draft_model`): a
    target whose linears are in another weight format (int8, int4, bfloat16: packed codes and fused projections)
    has no float layer state to copy.

    Raises:
        ValueError: a source layer outside the target's layers, or none.
    """
    total = target_model.config.num_hidden_layers
    if not source_layers or any(not 0 <= i < total for i in source_layers):
        raise ValueError(f"draft layers must be copied from target layers 0..{total - 1}, got {source_layers}")
    weight = target_model.get_input_embeddings().weight
    cls = type(target_model.model.layers[0])
    layers = nn.ModuleList()
    for n, i in enumerate(source_layers):
        layer = cls(target_model.config, n).to(device=weight.device, dtype=weight.dtype)
        if copy_weights:
            layer.load_state_dict({k: v.detach().clone() for k, v in target_model.model.layers[i].state_dict().items()})
        layers.append(layer)
    return layers


def _norm_copy(target_model: nn.Module) -> nn.Module:
    """A new final norm of the target's class with a copy of its weight."""
    source = target_model.model.norm
    norm = type(source)(target_model.config.hidden_size, eps=getattr(target_model.config, "rms_norm_eps", 1e-6))
    norm.load_state_dict({k: v.detach().clone() for k, v in source.state_dict().items()})
    return norm.to(source.weight.device)


def draft_view(target_model: nn.Module, layers: nn.ModuleList, norm: nn.Module, head: SubsetLMHead) -> nn.Module:
    """A shallow copy of the target's ``*ForCausalLM`` running ``layers`` (N), ``norm`` and ``head`` over the
    target's own embedding (shared tensors): a causal LM the :class:`ModelDrafter` machinery drives."""
    config = copy.copy(target_model.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[0]] * len(layers)
    inner = copy.copy(target_model.model)
    inner._modules = dict(inner._modules)
    inner.config = config
    inner.layers = layers
    inner.norm = norm
    outer = copy.copy(target_model)
    outer._modules = dict(outer._modules)
    outer.config = config
    outer.model = inner
    outer.lm_head = head
    return rehook_view(outer)


class DraftModel:
    """A distilled draft model for one target: its own ``layers`` and ``norm``, the draft vocabulary's ``head``, and
    ``view``, the causal LM over them (:func:`draft_view`). ``source_layers``: the target layers each draft layer
    started from. ``trainable()`` lists the parameters training updates (layers and norm; embedding and head stay
    frozen). ``copy_weights``: start the layers from the target's (training); False leaves them for a file to fill
    (:func:`load_draft_model`), which works whatever the target's weight format."""

    def __init__(self, target_model: nn.Module, source_layers: list[int], vocab_ids: torch.Tensor | None,
                 copy_weights: bool = True) -> None:
        self.source_layers = [int(i) for i in source_layers]
        self.layers = _layer_copies(target_model, self.source_layers, copy_weights)
        self.norm = _norm_copy(target_model)
        self.head = SubsetLMHead(head_weight(target_model), vocab_ids)
        self.vocab_ids = None if vocab_ids is None or not vocab_ids.numel() else vocab_ids.long().cpu()
        self.view = draft_view(target_model, self.layers, self.norm, self.head)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def trainable(self) -> list[nn.Parameter]:
        return [*self.layers.parameters(), *self.norm.parameters()]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The file's weights: ``layers.<i>.<name>`` and ``norm.weight``."""
        state = {f"layers.{k}": v for k, v in self.layers.state_dict().items()}
        state.update({f"norm.{k}": v for k, v in self.norm.state_dict().items()})
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Weights from :meth:`state_dict` (cast to the layers' dtype and device)."""
        like = next(self.layers.parameters())
        self.layers.load_state_dict({k[len("layers."):]: v.to(like) for k, v in state.items() if k.startswith("layers.")})
        self.norm.load_state_dict({k[len("norm."):]: v.to(like) for k, v in state.items() if k.startswith("norm.")})


def spaced_layers(num_layers: int, total: int, how: str = "first") -> list[int]:
    """Target layers a draft of ``num_layers`` layers starts from: the first ones ("first") or evenly spaced from
    the first to the last ("spaced"; 2 of 30: [0, 29]).

    Raises:
        ValueError: ``num_layers`` outside 1..``total``, or an unknown ``how``.
    """
    if not 1 <= num_layers <= total:
        raise ValueError(f"a distilled draft model has 1..{total} layers, got {num_layers}")
    if how == "first":
        return list(range(num_layers))
    if how == "spaced":
        if num_layers == 1:
            return [0]
        return [round(i * (total - 1) / (num_layers - 1)) for i in range(num_layers)]
    raise ValueError(f"unknown layer choice {how!r}; choose first or spaced")


def save_draft_model(draft: DraftModel, path: str | Path, target_model: nn.Module, info: dict | None = None) -> Path:
    """Write ``draft`` to ``path``: float16 layers and norm, int64 draft vocabulary, target signature, the source
    layers and ``info`` in the metadata. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).cpu().contiguous() for k, v in draft.state_dict().items()}
    if draft.vocab_ids is not None:
        tensors["vocab_ids"] = draft.vocab_ids.contiguous()
    meta = {"kind": KIND, "format": str(FORMAT), "target": target_signature(target_model),
            "settings": json.dumps({"source_layers": draft.source_layers}), "info": json.dumps(info or {})}
    save_file(tensors, str(path), metadata=meta)
    path.chmod(0o644)
    return path


def read_draft_metadata(path: str | Path) -> dict:
    """kind, format, target signature, settings (dict: ``source_layers``) and info (dict) of a draft-model file.

    Raises:
        HeadsError: the file is missing, not a distilled draft-model file, or of a newer format.
    """
    path = Path(path)
    meta = file_metadata(path, "draft-model file")
    if meta.get("kind") != KIND:
        raise HeadsError(f"{path.name} is not a distilled draft-model file (its kind is {meta.get('kind')!r})")
    if meta.get("format") != str(FORMAT):
        raise HeadsError(f"{path.name} has draft-model format {meta.get('format')!r}; this specviz reads {FORMAT}")
    return {"kind": KIND, "format": FORMAT, "target": meta.get("target", ""),
            "settings": json.loads(meta.get("settings", "{}")), "info": json.loads(meta.get("info", "{}"))}


def load_draft_model(path: str | Path, target_model: nn.Module, weights: str = "float") -> DraftModel:
    """A draft-model file for ``target_model``, in the target's dtype and on its device, eval mode, no gradients;
    with ``weights="int8"`` (a CPU target, :func:`~specviz.drafters.networks.head_weights_for`) its layers' linears
    and its LM-head rows hold int8 weights, q/k/v and gate/up fused, as the trained heads' (one drafted token of the
    shipped 2-layer file: 2.3 -> 0.9 ms at 1 thread, docs/heads.md).

    Raises:
        HeadsError: missing or malformed file, or made for another target.
    """
    meta = read_draft_metadata(path)
    if not signature_fits(meta["target"], target_model):
        raise HeadsError(f"{Path(path).name} was distilled from another target ({meta['target']}), not this one "
                         f"({target_signature(target_model)}); train one with `python -m specviz train distilled`.")
    state = load_file(str(path))
    vocab = state.pop("vocab_ids", None)
    # the file holds every layer weight (loaded strictly): nothing is copied from the target, whose linears may be
    # packed in another weight format
    draft = DraftModel(target_model, meta["settings"]["source_layers"], vocab, copy_weights=False)
    draft.load_state_dict(state)
    for module in (draft.layers, draft.norm):
        module.eval().requires_grad_(False)
    if weights == "int8":
        from specviz.runtime.weights import apply_weights

        apply_weights(draft.layers, "int8", target=False)
        draft.head.use_int8()
        return draft
    from specviz.runtime.speed import prepare_draft_head

    prepare_draft_head(draft.layers)  # oneDNN linears on the CPU, as the heads (drafting only; exactness untouched)
    return draft


def shipped_draft_model(target_model: nn.Module) -> Path | None:
    """The distilled draft-model file in ``assets/drafters`` made for this target (any dtype), or None."""
    if not DRAFTERS_DIR.is_dir():
        return None
    for path in sorted(DRAFTERS_DIR.glob("*distilled*.safetensors")):
        try:
            meta = read_draft_metadata(path)
        except HeadsError:
            continue
        if signature_fits(meta["target"], target_model):
            return path
    return None


class DistilledDrafter(ModelDrafter):
    """A :class:`ModelDrafter` over a :class:`DraftModel`'s view (own layers and KV cache, the target's embedding and
    LM-head rows)."""

    def __init__(self, draft: DraftModel, min_confidence: float = 0.0) -> None:
        super().__init__(draft.view, f"distilled draft model ({draft.num_layers} layers)", min_confidence)
        self.draft = draft
        self.weights = "int8" if draft.head.int8 is not None else "float"  # what it drafts with (HEAD_WEIGHTS)
