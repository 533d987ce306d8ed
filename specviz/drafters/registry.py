"""Build a drafter by name: the one place the CLI, the app and the benchmark turn a choice into a Drafter."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.drafters.base import Drafter
from specviz.drafters.early_exit import EarlyExitDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter


@dataclass(frozen=True)
class DrafterChoice:
    """A drafter the user can pick: its CLI/app key and a one-line description."""

    key: str
    label: str
    description: str


DRAFTERS: tuple[DrafterChoice, ...] = (
    DrafterChoice("none", "None (standard decoding)", "No drafting: one target forward per token."),
    DrafterChoice("ngram", "N-gram prompt lookup", "Copies what followed the latest earlier match of the last few tokens; no model."),
    DrafterChoice("early-exit", "Self-speculation (early exit)", "The target's own first L layers + final norm + LM head; weights shared. Untrained, it agrees with SmolLM2-135M on few tokens below its last layers (46% at layer 28/30, under 15% below 20), so it shows the idea more than a speedup."),
    DrafterChoice("bf16", "bfloat16 copy (draft model)", "The target in reduced precision, with its own KV cache."),
    DrafterChoice("model", "Draft model (hub id or folder)", "A smaller model with the same tokenizer, with its own KV cache."),
    DrafterChoice("eagle", "EAGLE head (trained)", "One trained decoder layer predicts the target's next feature from its current one and the next token; drafts a chain, or a tree with --tree. Ships for the embedded SmolLM2-135M-Instruct."),
    DrafterChoice("medusa", "Medusa heads (trained)", "Four trained residual heads on the target's last feature each guess one future token in a single step; chain of up to 4, or a tree with --tree. Ships for the embedded SmolLM2-135M-Instruct."),
    DrafterChoice("oracle", "Oracle (target drafts itself)", "Greedy acceptance is 100%: shows the cost side of the trade-off."),
)
DRAFTER_KEYS = tuple(c.key for c in DRAFTERS)


HEAD_KEYS = ("eagle", "medusa")  # the drafters with trained heads: trees, the confidence gate, lookup first
VARIANT_SUFFIXES = ("tree", "lookup")  # "eagle:tree", "eagle:lookup", "eagle:tree:lookup" (bench, arena)


@dataclass(frozen=True)
class VariantKey:
    """A drafter key of the bench and the arena, split: ``base`` (a registry key), ``tree`` (":tree", a draft
    tree in greedy mode) and ``lookup`` (":lookup", n-gram lookup first)."""

    base: str
    tree: bool = False
    lookup: bool = False


def split_variant(key: str) -> VariantKey:
    """Parse "eagle", "eagle:tree", "medusa:lookup", "eagle:tree:lookup" (suffixes in any order, once each, on the
    head drafters only).

    Raises:
        ValueError: an unknown base key or suffix, or a suffix on a drafter without trained heads.
    """
    base, *suffixes = key.strip().split(":")
    if base not in DRAFTER_KEYS:
        raise ValueError(f"unknown drafter {key!r}; choose one of: {', '.join(DRAFTER_KEYS)}")
    if suffixes and (base not in HEAD_KEYS or len(set(suffixes)) != len(suffixes)
                     or any(x not in VARIANT_SUFFIXES for x in suffixes)):
        raise ValueError(f"unknown drafter {key!r}: only eagle and medusa take the suffixes :tree (a draft tree) "
                         "and :lookup (n-gram lookup first), e.g. eagle:tree or eagle:lookup")
    return VariantKey(base, "tree" in suffixes, "lookup" in suffixes)


def default_exit_layer(num_layers: int) -> int:
    """The default early-exit layer: half of the target's layers (at least 1)."""
    return max(1, num_layers // 2)


def make_drafter(
    key: str,
    target,
    *,
    draft_spec: str | None = None,
    exit_layer: int | None = None,
    ngram_max: int = 3,
    ngram_min: int = 1,
    heads_path: str | None = None,
    tree_nodes: int = 0,
    min_confidence: float | None = None,
    lookup: bool = False,
    progress=None,
) -> Drafter | None:
    """Create a fresh drafter (per run: drafters hold per-run caches; loaded models are shared).

    Args:
        key: one of :data:`DRAFTER_KEYS`.
        target: the :class:`specviz.models.LoadedModel` being drafted for.
        draft_spec: the draft model's spec (for ``model``).
        exit_layer: layers the early-exit drafter runs (default :func:`default_exit_layer`).
        ngram_max / ngram_min: suffix sizes for the n-gram drafter.
        heads_path: a head file for ``eagle`` / ``medusa`` (default: the shipped one made for this target).
        tree_nodes: for ``eagle`` / ``medusa``: 0 drafts a chain; N > 0 drafts a tree of N nodes in greedy mode.
        min_confidence: for ``eagle`` / ``medusa``: the confidence gate's threshold in [0, 1) (stop drafting where
            the draft's cumulative probability falls below it; 0 = always k tokens); None = the default,
            :data:`specviz.drafters.heads.DEFAULT_MIN_CONFIDENCE`.
        lookup: for ``eagle`` / ``medusa``: try n-gram prompt lookup first each pass and verify its copied
            continuation when the text's last 2-3 tokens occurred before (the head drafts otherwise).
        progress: optional callable(str) for loading messages.

    Returns:
        A drafter, or None for ``none`` (standard decoding).

    Raises:
        ValueError: unknown key, or a missing/invalid option (:class:`specviz.heads.HeadsError` when no
            head file fits the target).
        specviz.models.ModelLoadError: the draft model cannot be loaded, or its vocabulary differs.
    """
    from specviz.models import check_same_vocabulary, load_model

    if key == "none":
        return None
    if key == "ngram":
        return NgramDrafter(max_ngram=ngram_max, min_ngram=ngram_min)
    if key == "early-exit":
        layers = exit_layer if exit_layer is not None else default_exit_layer(target.num_layers)
        return EarlyExitDrafter(target.model, layers)
    if key in ("eagle", "medusa"):
        return _head_drafter(key, target, heads_path, tree_nodes, min_confidence, lookup)
    if key == "oracle":
        return ModelDrafter(target.model, "oracle (the target itself)")
    if key == "bf16":
        import torch

        draft = load_model(target.spec, device=target.device, dtype=torch.bfloat16, progress=progress)
        return ModelDrafter(draft.model, "bfloat16 copy of the target")
    if key == "model":
        if not draft_spec or not draft_spec.strip():
            raise ValueError("The 'model' drafter needs a draft model (a hub id or a local folder).")
        draft = load_model(draft_spec.strip(), device=target.device, progress=progress)
        check_same_vocabulary(target, draft)
        return ModelDrafter(draft.model, f"draft model {draft.label}")
    raise ValueError(f"unknown drafter {key!r}; choose one of: {', '.join(DRAFTER_KEYS)}")


def _head_drafter(key: str, target, heads_path: str | None, tree_nodes: int,
                  min_confidence: float | None = None, lookup: bool = False) -> Drafter:
    from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE, EagleDrafter, MedusaDrafter, TreeSettings
    from specviz.heads import HeadsError, load_heads, shipped_heads

    if tree_nodes < 0:
        raise ValueError(f"tree nodes must be >= 0 (0 = chain), got {tree_nodes}")
    path = heads_path.strip() if heads_path and heads_path.strip() else shipped_heads(target.model, key)
    if path is None:
        raise HeadsError(f"No trained {key} heads fit {target.label}: the shipped heads are for the embedded "
                         f"SmolLM2-135M-Instruct. Train them with `python -m specviz train {key} --target ...`.")
    head = load_heads(path, target.model, key)
    tree = TreeSettings(max_nodes=tree_nodes) if tree_nodes else None
    gate = DEFAULT_MIN_CONFIDENCE if min_confidence is None else float(min_confidence)
    if key == "eagle":
        return EagleDrafter(target.model, head, tree, min_confidence=gate, lookup=lookup)
    return MedusaDrafter(target.model, head, tree, min_confidence=gate, lookup=lookup)
