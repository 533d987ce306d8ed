"""Drafters by name: the one place the CLI, the app's tabs, the arena and the benchmark turn a key into a Drafter.

Every drafter is a :class:`DrafterChoice` (key, label, description) with a factory ``factory(target, options)``.
The built-in ones are registered below; :func:`register` adds another with one call, and it then appears in the
CLI's ``--drafter`` choices, the Live tab's drafter menu and the Arena's drafter list (they read :func:`choices`
when they are built, not at import).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specviz.core.drafting import Drafter
from specviz.drafters.early_exit import EarlyExitDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter


@dataclass(frozen=True)
class DrafterOptions:
    """What a factory may read besides the target; each drafter uses the options that concern it.

    Attributes:
        draft_spec: the draft model's spec (``model``).
        exit_layer: layers the early-exit drafter runs (None: :func:`default_exit_layer`).
        ngram_max / ngram_min: suffix sizes (tokens) for n-gram lookup.
        heads_path: a head file for ``eagle`` / ``medusa``, or a draft-model file for ``distilled`` (None: the
            shipped one made for this target).
        tree_nodes: ``eagle`` / ``medusa``: 0 drafts a chain; N > 0 a tree of N nodes in greedy mode.
        tree_width: a tree's nodes expanded per depth and candidates taken from each (EAGLE-2's top-k; default 3:
            :class:`specviz.drafters.heads.TreeSettings`).
        min_confidence: ``eagle`` / ``medusa`` / ``distilled`` / ``model``: the confidence gate in [0, 1) (None:
            the drafter's default: 0.15 for the heads, 0 for the draft models; a ``model`` draft with another
            tokenizer takes none).
        lookup: ``eagle`` / ``medusa``: try n-gram lookup first each pass.
        window / ngram / candidates: ``lookahead``: W, N and G (None: the defaults of
            :mod:`specviz.drafters.lookahead`).
        seed: ``lookahead``: seeds the window's first guesses.
        suffix_store: ``suffix``: the session's store of earlier outputs (a :class:`specviz.drafters.suffix.SuffixStore`
            shared by a session's drafters); None: a new one owned by the drafter.
        remember_outputs: ``suffix``: each run's output joins the store when the next run starts (False: cold, as
            the bench runs it unless ``--warm-suffix``).
        progress: optional callable(str) for loading messages.
        draft_weights: ``model``: the draft model's weight format (float32, bfloat16, int8, int4:
            :func:`specviz.runtime.weights.with_weights`, made from its float32 load; None: as loaded), e.g. an int4
            copy of the target drafting for it (``draft_spec`` the target's spec).
        head_weights: ``eagle`` / ``medusa`` / ``distilled``: the trained drafter's weights, "int8" or "float" (None
            or "auto": int8 on the CPU, :func:`specviz.drafters.networks.head_weights_for`).
    """

    draft_spec: str | None = None
    exit_layer: int | None = None
    ngram_max: int = 3
    ngram_min: int = 1
    heads_path: str | None = None
    tree_nodes: int = 0
    tree_width: int = 3
    min_confidence: float | None = None
    lookup: bool = False
    window: int | None = None
    ngram: int | None = None
    candidates: int | None = None
    seed: int = 0
    suffix_store: object | None = None
    remember_outputs: bool = True
    progress: Callable[[str], None] | None = None
    draft_weights: str | None = None
    head_weights: str | None = None


Factory = Callable[[object, DrafterOptions], Drafter]


@dataclass(frozen=True)
class DrafterChoice:
    """A drafter the user can pick: its CLI/app key, a short label (it fits the app's drafter menu, about 30
    characters), a one-line description (what it is), its factory (None only for ``none``, standard decoding) and
    ``cost``: what it costs per pass, in a few words ("" when unknown). :meth:`line` puts the two together; the
    app shows it under each drafter menu."""

    key: str
    label: str
    description: str
    factory: Factory | None = None
    cost: str = ""

    def line(self) -> str:
        """What the drafter is and what it costs, one line: "<description> Cost: <cost>"."""
        return f"{self.description} Cost: {self.cost}" if self.cost else self.description


_REGISTRY: dict[str, DrafterChoice] = {}


def register(choice: DrafterChoice) -> None:
    """Add (or replace) a drafter: one call makes it available in the CLI, the Live tab and the Arena.

    Raises:
        ValueError: an empty key, a key with ':' or whitespace (the bench and arena use ':' for variants), or no
            factory.
    """
    if not choice.key or ":" in choice.key or choice.key != choice.key.strip() or " " in choice.key:
        raise ValueError(f"a drafter key is a non-empty word without ':' or spaces, got {choice.key!r}")
    if choice.factory is None:
        raise ValueError(f"drafter {choice.key!r} needs a factory(target, options) -> Drafter")
    _REGISTRY[choice.key] = choice


def unregister(key: str) -> None:
    """Remove a drafter added with :func:`register` (the built-in ones stay)."""
    if key in _BUILT_IN_KEYS:
        raise ValueError(f"{key!r} is a built-in drafter")
    _REGISTRY.pop(key, None)


def choices() -> tuple[DrafterChoice, ...]:
    """Every drafter, ``none`` (standard decoding) first, then the built-in ones, then registered ones."""
    return (NONE, *_REGISTRY.values())


def drafter_keys() -> tuple[str, ...]:
    """The keys of :func:`choices`."""
    return tuple(c.key for c in choices())


def label_of(key: str) -> str:
    """The label of a drafter key (the key itself when unknown)."""
    return next((c.label for c in choices() if c.key == key), key)


def describe(key: str) -> str:
    """What a drafter key is and what it costs, one line (:meth:`DrafterChoice.line`); a bench / arena variant
    ("eagle:tree", "medusa:lookup") adds what its suffix changes. "" for an unknown key."""
    try:
        variant = split_variant(key)
    except ValueError:
        return ""
    choice = next(c for c in choices() if c.key == variant.base)
    extra = (" As a tree: many candidates, verified in one pass (greedy only)." if variant.tree else "") + \
        (" Lookup first: n-gram lookup before the head each pass." if variant.lookup else "")
    return choice.line() + extra


HEAD_KEYS = ("eagle", "medusa")  # the drafters with trained heads: trees, the confidence gate, lookup first
GATED_KEYS = (*HEAD_KEYS, "distilled", "model")  # the drafters with a confidence gate (--confidence)
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
    if base not in drafter_keys():
        raise ValueError(f"unknown drafter {key!r}; choose one of: {', '.join(drafter_keys())}")
    if suffixes and (base not in HEAD_KEYS or len(set(suffixes)) != len(suffixes)
                     or any(x not in VARIANT_SUFFIXES for x in suffixes)):
        raise ValueError(f"unknown drafter {key!r}: only eagle and medusa take the suffixes :tree (a draft tree) "
                         "and :lookup (n-gram lookup first), e.g. eagle:tree or eagle:lookup")
    return VariantKey(base, "tree" in suffixes, "lookup" in suffixes)


def default_exit_layer(num_layers: int) -> int:
    """The default early-exit layer: half of the target's layers (at least 1)."""
    return max(1, num_layers // 2)


def make_drafter(key: str, target, **options) -> Drafter | None:
    """Create a fresh drafter (per run: drafters hold per-run caches; loaded models are shared).

    Args:
        key: one of :func:`drafter_keys`.
        target: the :class:`specviz.runtime.models.LoadedModel` being drafted for.
        **options: fields of :class:`DrafterOptions`.

    Returns:
        A drafter, or None for ``none`` (standard decoding).

    Raises:
        ValueError: unknown key, or a missing/invalid option (:class:`specviz.drafters.networks.HeadsError` when
            no head file fits the target).
        specviz.runtime.models.ModelLoadError: the draft model cannot be loaded, or its tokenizer (or the target's) cannot
            write text back from its ids, so drafts cannot be re-tokenized between two different vocabularies.
    """
    if key == NONE.key:
        return None
    choice = next((c for c in choices() if c.key == key), None)
    if choice is None:
        raise ValueError(f"unknown drafter {key!r}; choose one of: {', '.join(drafter_keys())}")
    return choice.factory(target, DrafterOptions(**options))


def _ngram(target, o: DrafterOptions) -> Drafter:
    return NgramDrafter(max_ngram=o.ngram_max, min_ngram=o.ngram_min)


def _early_exit(target, o: DrafterOptions) -> Drafter:
    return EarlyExitDrafter(target.model, o.exit_layer if o.exit_layer is not None else
                            default_exit_layer(target.num_layers))


def _lookahead(target, o: DrafterOptions) -> Drafter:
    from specviz.drafters.lookahead import DEFAULT_CANDIDATES, DEFAULT_NGRAM, DEFAULT_WINDOW, LookaheadDrafter

    return LookaheadDrafter(o.window or DEFAULT_WINDOW, o.ngram or DEFAULT_NGRAM, o.candidates or DEFAULT_CANDIDATES,
                            seed=o.seed)


def _suffix(target, o: DrafterOptions) -> Drafter:
    from specviz.drafters.suffix import SuffixDrafter

    return SuffixDrafter(o.suffix_store, remember=o.remember_outputs)


def _oracle(target, o: DrafterOptions) -> Drafter:
    return ModelDrafter(target.model, "oracle (the target itself)")


def _bf16(target, o: DrafterOptions) -> Drafter:
    import torch

    from specviz.runtime.models import load_model

    draft = load_model(target.spec, device=target.device, dtype=torch.bfloat16, progress=o.progress)
    return ModelDrafter(draft.model, "bfloat16 copy of the target")


def _draft_model(target, o: DrafterOptions) -> Drafter:
    """The draft model, loaded on the target's device and in its dtype, then in ``o.draft_weights`` where given
    (:func:`specviz.runtime.weights.with_weights`: float32 loads only; raises WeightsError, a ValueError, in one
    sentence otherwise, or for int8/int4 off the CPU). The target's tokenizer: a :class:`ModelDrafter` with the
    confidence gate ``o.min_confidence`` (None: 0, always k); another tokenizer: a
    :class:`~specviz.drafters.cross_tokenizer.CrossTokenizerDrafter` (its text is re-tokenized for the target), which
    has no gate: a gate above 0 raises ValueError (one sentence)."""
    from specviz.runtime.models import check_same_vocabulary, load_model, same_vocabulary
    from specviz.runtime.weights import with_weights

    if not o.draft_spec or not o.draft_spec.strip():
        raise ValueError("The 'model' drafter needs a draft model (a hub id or a local folder).")
    draft = load_model(o.draft_spec.strip(), device=target.device, dtype=target.dtype, progress=o.progress)
    if o.draft_weights:
        draft = with_weights(draft, o.draft_weights.strip().lower(), progress=o.progress)
    gate = 0.0 if o.min_confidence is None else float(o.min_confidence)
    if not same_vocabulary(target, draft):
        if gate > 0:
            raise ValueError(f"The confidence gate needs a draft model with the target's tokenizer; {draft.label} "
                             f"has another (its drafts are re-tokenized): set the gate to 0.")
        from specviz.drafters.cross_tokenizer import cross_tokenizer_drafter

        return cross_tokenizer_drafter(target, draft)
    check_same_vocabulary(target, draft)
    return ModelDrafter(draft.model, f"draft model {draft.label}", min_confidence=gate)


def _heads(kind: str) -> Factory:
    def factory(target, o: DrafterOptions) -> Drafter:
        from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE, EagleDrafter, MedusaDrafter, TreeSettings
        from specviz.drafters.networks import HeadsError, head_weights_for, load_heads, shipped_heads

        if o.tree_nodes < 0:
            raise ValueError(f"tree nodes must be >= 0 (0 = chain), got {o.tree_nodes}")
        given = o.heads_path.strip() if o.heads_path and o.heads_path.strip() else None
        path = given or shipped_heads(target.model, kind)
        if path is None:
            raise HeadsError(f"No trained {kind} heads fit {target.label}: the shipped heads are for the embedded "
                             f"SmolLM2-135M-Instruct. Train them with `python -m specviz train {kind} --target ...`.")
        head = load_heads(path, target.model, kind, head_weights_for(target.model, o.head_weights))
        tree = TreeSettings(max_nodes=o.tree_nodes, branch=o.tree_width, width=o.tree_width) if o.tree_nodes else None
        gate = DEFAULT_MIN_CONFIDENCE if o.min_confidence is None else float(o.min_confidence)
        cls = EagleDrafter if kind == "eagle" else MedusaDrafter
        return cls(target.model, head, tree, min_confidence=gate, lookup=o.lookup)

    return factory


def _distilled(target, o: DrafterOptions) -> Drafter:
    """The distilled draft model: ``o.heads_path`` or the shipped file made for this target.

    Raises:
        HeadsError: no file fits the target, or the file given is malformed or made for another target.
    """
    from specviz.drafters.distilled import DistilledDrafter, load_draft_model, shipped_draft_model
    from specviz.drafters.networks import HeadsError, head_weights_for

    given = o.heads_path.strip() if o.heads_path and o.heads_path.strip() else None
    path = given or shipped_draft_model(target.model)
    if path is None:
        raise HeadsError(f"No distilled draft model fits {target.label}: the shipped one is for the embedded "
                         f"SmolLM2-135M-Instruct. Train one with `python -m specviz train distilled --layers 2`.")
    gate = 0.0 if o.min_confidence is None else float(o.min_confidence)
    return DistilledDrafter(load_draft_model(path, target.model, head_weights_for(target.model, o.head_weights)),
                            min_confidence=gate)


NONE = DrafterChoice("none", "None (standard decoding)", "No drafting: one target forward per token.",
                     cost="the reference.")
_BUILT_IN = (
    DrafterChoice("ngram", "N-gram prompt lookup", "Copies what followed the latest earlier match of the last few "
                  "tokens; no model.", _ngram, cost="next to nothing; it pays where the answer repeats the prompt."),
    DrafterChoice("early-exit", "Self-speculation (early exit)", "The target's own first L layers and its LM head "
                  "draft, weights shared; untrained, they agree with the target on few tokens.", _early_exit,
                  cost="L of the target's layers per drafted token, no extra memory."),
    DrafterChoice("bf16", "bfloat16 copy (draft model)", "The target in reduced precision, with its own KV cache.",
                  _bf16, cost="a second copy of the weights and a full forward per drafted token."),
    DrafterChoice("model", "Draft model (hub id or folder)", "A smaller model with its own KV cache; another "
                  "tokenizer's drafts are re-tokenized for the target.", _draft_model,
                  cost="a draft-model forward per drafted token, and its weights."),
    DrafterChoice("eagle", "EAGLE head (trained)", "One trained decoder layer predicts the target's next feature; "
                  "drafts a chain or a tree (shipped for the embedded SmolLM2-135M-Instruct).", _heads("eagle"),
                  cost="one layer and the LM head per drafted token (int8 weights on the CPU)."),
    DrafterChoice("medusa", "Medusa heads (trained)", "Four trained heads on the target's last feature each guess "
                  "one future token (shipped for the embedded SmolLM2-135M-Instruct).", _heads("medusa"),
                  cost="four small heads and the LM head, once per pass (int8 weights on the CPU)."),
    DrafterChoice("distilled", "Distilled draft (trained)", "A few layers of the target's width trained on its "
                  "outputs, sharing its embedding and LM head; gated at 0.2 in Live, always k in the Arena and CLI.",
                  _distilled, cost="its layers per drafted token (int8); at k = 4 on 2 cores 1.16x gated, 1.00x "
                  "ungated."),
    DrafterChoice("lookahead", "Lookahead decoding (no draft)", "The target guesses ahead by Jacobi iteration and "
                  "verifies n-grams it produced, in the same forward (W window, N n-gram size, G candidates).",
                  _lookahead, cost="no draft model; every target forward is wider."),
    DrafterChoice("suffix", "Suffix decoding (no model)", "Suffix tries over the prompt, the output and earlier "
                  "outputs propose the likeliest continuation (the Live tab keeps this visit's outputs; the Arena and "
                  "the bench run it cold).", _suffix, cost="next to nothing; it pays on text seen before."),
    DrafterChoice("oracle", "Oracle (target drafts itself)", "The target drafts for itself: greedy acceptance is "
                  "100%.", _oracle, cost="a full target step per drafted token: the cost side of the trade-off."),
)
_BUILT_IN_KEYS = frozenset(c.key for c in _BUILT_IN)
for _choice in _BUILT_IN:
    register(_choice)
