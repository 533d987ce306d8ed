"""Trained draft heads that read the target's own features: an EAGLE-style feature head and Medusa heads.

Both heads work on the target's last hidden feature f_t (after the final norm, so the target's logits are
``lm_head(f_t)``) and share the target's frozen LM head, restricted to a *draft vocabulary* of the most
frequent output tokens (8192 rows instead of 49152 for SmolLM2): the draft's largest cost shrinks six-fold and
exactness is untouched, because verification always uses the full target.

- :class:`EagleHead` (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty"):
  from (f_t, embedding of token t+1) one decoder layer predicts f_{t+1}; run autoregressively on its own
  predictions it drafts a chain or a tree.
- EAGLE-3 heads (Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language Models via
  Training-Time Test"): the same :class:`EagleHead` with ``EagleConfig.feature_layers`` set reads
  ``fuse(concat(low, mid, high))`` of three of the target's hidden states instead of its final feature, and its
  output goes through its own norm to the draft LM head (it is trained on tokens only, so its output is a
  hidden state of its own, not a guess of the target's feature).
- :class:`MedusaHeads` (Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with Multiple
  Decoding Heads"): head i is one residual block f + SiLU(W_i f + b_i) whose logits predict the token i+1
  places after the target's own next token.

Files: safetensors (float16 weights, int64 draft vocabulary) with the settings and the target's signature in
the metadata; :func:`load_heads` refuses a file made for another target. Format 1 (no ``format`` key: the
shipped heads) is the EAGLE-1 / Medusa layout; format 2 adds ``format`` and ``recipe`` keys and the EAGLE-3
head's ``fuse`` and ``out_norm`` weights; format 3 an EAGLE head of more than one decoder layer (``extra.<i>.*``
weights, ``extra_layers`` in its settings). A reader of format 1 files reads them unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

HEADS_DIR = Path(__file__).resolve().parents[2] / "assets" / "heads"
FORMAT = 3  # the newest head-file format this code reads (1: no "format" key in the metadata)
# The weights trained heads draft with (load_heads, DraftLMHead): "float" (the target's dtype, as stored) or "int8"
# (one scale per row; torch's CPU kernel). On the CPU a drafted token reads the head layer's and the draft LM head's
# weights (about 9 M parameters, 36 MB in float32) and costs about 0.7 ms; int8 halves that (docs/heads.md). The
# target verifies every drafted token, so the format changes what is drafted at most, never the output.
HEAD_WEIGHTS = ("int8", "float")


class HeadsError(ValueError):
    """A head file is missing, malformed, or made for another target (the message says which)."""


def target_signature(model: nn.Module) -> str:
    """A short string identifying a target's architecture and weights (type, sizes, an embedding checksum: the sum of
    the first 64 embedding rows, in the dtype the target is loaded in)."""
    cfg = model.config
    emb = model.get_input_embeddings().weight
    checksum = float(emb[:64].double().sum())
    return f"{cfg.model_type}-h{cfg.hidden_size}-l{cfg.num_hidden_layers}-v{emb.shape[0]}-c{checksum:.4f}"


def _split_signature(signature: str) -> tuple[str, float] | None:
    """(architecture part, checksum) of a :func:`target_signature` string, or None when it has no checksum."""
    head, sep, checksum = signature.rpartition("-c")
    try:
        return (head, float(checksum)) if sep else None
    except ValueError:
        return None


def signature_fits(stored: str, model: nn.Module) -> bool:
    """Whether a head file's target signature ``stored`` names ``model`` in whatever dtype it is loaded.

    A float32 target must match exactly. A bfloat16 or float16 copy of the same weights has the same architecture
    part, and its embedding checksum differs from the float32 one by the sum of the summed values' rounding errors:
    each at most u|x| (u the dtype's unit roundoff), spread evenly, so the sum's standard deviation is at most
    ``u * sqrt(sum x^2 / 3)``. The copy fits within 8 of those (plus half a subnormal step per value and the
    4-decimal printing of both checksums); the worst case ``u * sum|x|`` would also accept unrelated weights of the
    same sizes. SmolLM2-135M's bfloat16 copy: 0.036 off, bound 0.41. A head trained on one copy then drafts for
    another (its weights are cast to the target's dtype, :func:`follow_target`)."""
    own = target_signature(model)
    if stored == own:
        return True
    emb = model.get_input_embeddings().weight
    if emb.dtype == torch.float32 or not emb.dtype.is_floating_point:
        return False
    theirs, ours = _split_signature(stored), _split_signature(own)
    if theirs is None or ours is None or theirs[0] != ours[0]:
        return False
    rows = emb[:64].detach().double()
    info = torch.finfo(emb.dtype)
    unit = info.eps / 2
    spread = unit * float((rows.pow(2).sum() / 3).sqrt())
    bound = 8 * spread + rows.numel() * info.smallest_normal * unit + 1e-4
    return abs(theirs[1] - ours[1]) <= bound


def target_placement(model: nn.Module) -> tuple[torch.device, torch.dtype]:
    """(device, dtype) of a target's weights (its input embedding's)."""
    weight = model.get_input_embeddings().weight
    return weight.device, weight.dtype


def follow_target(head: nn.Module, model: nn.Module) -> nn.Module:
    """``head`` moved (in place, as ``nn.Module.to``) to the target's device and floating dtype (float32, bfloat16
    or float16); its int64 draft vocabulary stays int64. A head already in a weight format (int8, :func:`load_heads`)
    is returned as it is: it was placed before it was formatted, and a cast would change its scales' dtype.
    Returns ``head``."""
    from specviz.runtime.weights import weights_of

    if weights_of(head) != "float32":
        return head
    device, dtype = target_placement(model)
    return head.to(device=device, dtype=dtype)


def _unit_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x scaled to unit root mean square over the last dimension, computed in float32 and returned in x's dtype (a
    float16 square of a large activation, e.g. 2e4, would overflow; float32 input: unchanged arithmetic)."""
    wide = x.float()
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class RMSNorm(nn.Module):
    """Root-mean-square layer norm over the last dimension (eps inside the square root; the statistics in float32)."""

    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * _unit_rms(x, self.eps)


class DraftLMHead:
    """The target's LM head restricted to a draft vocabulary (frozen; not part of a head file). The heads and the
    distilled draft model (:class:`~specviz.drafters.distilled.SubsetLMHead`) both read their logits through it.

    Args:
        weight: (V, H) the target's LM-head weight.
        vocab_ids: (N,) int64 ids of the draft vocabulary, or None / empty for all V.
        weights: "float" (the rows as given) or "int8" (:meth:`to_int8` at once; drafting only).
    """

    def __init__(self, weight: torch.Tensor, vocab_ids: torch.Tensor | None, weights: str = "float") -> None:
        self.vocab_size = int(weight.shape[0])
        if vocab_ids is None or vocab_ids.numel() == 0:
            self.ids = None
            self.weight = weight.detach()
        else:
            self.ids = vocab_ids.to(weight.device).long()
            self.weight = weight.detach().index_select(0, self.ids).contiguous()
        self.rows = int(self.weight.shape[0])  # N, the draft vocabulary's size
        self.int8 = None
        if weights == "int8":
            self.to_int8()

    def to_int8(self) -> None:
        """Draft with the rows in int8, one scale per row (see HEAD_WEIGHTS), for good: the float rows (19 MB for
        8192 rows of SmolLM2) are dropped, so it is for drafting only, never training. The target verifies every
        drafted token, so this changes what is drafted at most."""
        from specviz.runtime.weights.linears import Int8Linear

        if self.int8 is None:
            self.int8 = Int8Linear.from_float(self.weight)
            self.weight = None

    def subset_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) features -> (..., N) logits over the draft vocabulary (int8 weights when made so; else oneDNN on
        the CPU, see :func:`specviz.runtime.speed.draft_linear`)."""
        if self.int8 is not None:
            return self.int8(h)
        from specviz.runtime.speed import draft_linear

        return draft_linear(h, self.weight.to(h.dtype))

    def to_token_ids(self, index: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary indices -> token ids (same shape)."""
        return index if self.ids is None else self.ids[index]

    def full_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) logits with -inf outside the draft vocabulary (for sampling over token ids)."""
        sub = self.subset_logits(h)
        if self.ids is None:
            return sub
        full = torch.full((*sub.shape[:-1], self.vocab_size), float("-inf"), dtype=sub.dtype, device=sub.device)
        full[..., self.ids] = sub
        return full


@dataclass(frozen=True)
class EagleConfig:
    """Sizes of an :class:`EagleHead` (by default copied from the target's config)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float
    eps: float
    feature_layers: tuple[int, ...] = ()  # EAGLE-3: the target's hidden states fused (indices of hidden_states)
    extra_layers: int = 0  # decoder layers after the first (0: the papers' one layer; format 3 files when above)

    def __post_init__(self) -> None:
        object.__setattr__(self, "feature_layers", tuple(int(i) for i in self.feature_layers))  # JSON gives a list
        if int(self.extra_layers) < 0:
            raise ValueError(f"extra_layers must be 0 or more, got {self.extra_layers}")

    @classmethod
    def from_target(cls, config, feature_layers: tuple[int, ...] = ()) -> "EagleConfig":
        """Sizes copied from a target's config; ``feature_layers`` non-empty makes an EAGLE-3 head."""
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        rope = getattr(config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return cls(config.hidden_size, config.num_attention_heads, config.num_key_value_heads, head_dim,
                   config.intermediate_size, float(theta), float(getattr(config, "rms_norm_eps", 1e-5)),
                   tuple(feature_layers))


def fusion_layers(num_layers: int) -> tuple[int, int, int]:
    """The hidden states an EAGLE-3 head fuses, as indices of the target's ``hidden_states`` (0 = embeddings, i =
    output of decoder layer i): low, middle and high, (2, L // 2, L - 3) as in the EAGLE-3 paper's choice of an
    early, a middle and a late layer; (2, 15, 27) for SmolLM2's 30 layers. Targets under 6 layers get
    (1, L // 2, L - 1)."""
    if num_layers >= 6:
        return 2, num_layers // 2, num_layers - 3
    return 1, max(1, num_layers // 2), max(1, num_layers - 1)


def _rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding (half-split layout, as Llama) of x: (B, heads, T, d) at positions (B, T) or (T,)."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = positions.to(torch.float32)[..., None] * inv  # (B?, T, d/2)
    ang = torch.cat([ang, ang], dim=-1)
    if ang.dim() == 2:
        ang = ang[None]
    cos, sin = ang.cos()[:, None].to(x.dtype), ang.sin()[:, None].to(x.dtype)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class EagleHead(nn.Module):
    """One decoder layer that predicts the target's next feature (EAGLE, Li et al. 2024), or with
    ``config.feature_layers`` an EAGLE-3 head (Li et al. 2025); ``config.extra_layers`` more layers after the
    first (:class:`HeadLayer`, each with its own KV entries) make a deeper head.

    Input at position t+1: ``fc([embed(x_{t+1}); g_t])`` (2H -> H), then a pre-norm Llama-style layer (grouped
    query attention with rotary positions, SwiGLU MLP). EAGLE-1: g_t is the target's final feature f_t and the
    output is the predicted f_{t+1}; the draft's logits for token t+2 are ``DraftLMHead(f̂_{t+1})``. EAGLE-3:
    g_t = ``fuse([h_low; h_mid; h_high])`` (3H -> H, each state RMS-scaled first, :meth:`take_in`) of the
    target's hidden states at t, the logits are ``DraftLMHead(out_norm(o_{t+1}))`` (:meth:`readout`), and
    drafting feeds the raw output o_{t+1} back as the next g. Either way the output is what the next drafting
    step reads. The EAGLE-3 paper feeds the normed embedding and normed g side by side into the attention
    projections (2H wide); this head keeps EAGLE-1's ``fc`` in front of an unchanged layer instead.

    Args:
        config: sizes, see :class:`EagleConfig`.
        vocab_ids: (N,) int64 draft vocabulary (stored with the head), or None for the full vocabulary.
    """

    kind = "eagle"

    def __init__(self, config: EagleConfig, vocab_ids: torch.Tensor | None = None) -> None:
        super().__init__()
        c = config
        self.config = c
        self.fc = nn.Linear(2 * c.hidden, c.hidden, bias=True)
        _add_layer(self, c)  # the first layer's weights sit on the head itself (the names of format 1 files)
        self.extra = nn.ModuleList(HeadLayer(c) for _ in range(c.extra_layers))  # empty: no weights, format 1 kept
        if c.feature_layers:
            self.fuse = nn.Linear(len(c.feature_layers) * c.hidden, c.hidden, bias=False)
            self.out_norm = RMSNorm(c.hidden, c.eps)
        self.register_buffer("vocab_ids", vocab_ids.long() if vocab_ids is not None else torch.zeros(0, dtype=torch.long))

    @property
    def recipe(self) -> str:
        """"eagle3" for a head that fuses several layers (format 2), "eagle" for the EAGLE-1 head."""
        return "eagle3" if self.config.feature_layers else "eagle"

    @property
    def feature_request(self) -> bool | tuple[int, ...]:
        """The target features this head reads, as a drafter's ``needs_hidden``: True for the final feature,
        else the tuple of hidden-state indices whose concatenation it fuses."""
        return self.config.feature_layers or True

    def take_in(self, feats: torch.Tensor) -> torch.Tensor:
        """(..., F) target features of committed positions -> (..., H) head inputs g: for an EAGLE-3 head,
        ``fuse`` of the concatenated layers (F = 3H), each first scaled to unit root mean square (no weights:
        ``fuse`` follows), because a small target's middle and late hidden states carry massive activations
        (SmolLM2: up to 2e4 at the first position, 100-400 in a few dimensions); the final feature itself (F = H)
        for an EAGLE-1 head."""
        if not self.config.feature_layers:
            return feats
        blocks = feats.unflatten(-1, (len(self.config.feature_layers), self.config.hidden))
        return self.fuse(_unit_rms(blocks, self.config.eps).flatten(-2))

    def readout(self, out: torch.Tensor) -> torch.Tensor:
        """(..., H) head outputs -> (..., H) features for the draft LM head (``out_norm`` for EAGLE-3)."""
        return self.out_norm(out) if self.config.feature_layers else out

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor,
                past: tuple[torch.Tensor, torch.Tensor] | None = None,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Predict features.

        Args:
            feats: (B, T, H) input features (true f_t for committed positions, predicted ones while drafting).
            embeds: (B, T, H) embeddings of the tokens one position later.
            positions: (T,) or (B, T) positions of the *embedded* tokens (for rotary embeddings).
            past: cached (keys, values), each (B, L x kv_heads, S, d) for a head of L layers (layer i's
                heads at i x kv_heads ..), or None.
            mask: (B or 1, 1, T, S+T) bool, True = may attend; None = causal over the new tokens (and all of past).

        Returns:
            (B, T, H) predicted features and this call's (keys, values), each (B, L x kv_heads, T, d) (not
            concatenated with ``past``: the caller owns the cache, and appends along dim 2 whatever L is).
        """
        c = self.config
        x = self.fc(torch.cat([embeds, feats], dim=-1))
        if mask is None and x.shape[1] > 1:
            t, s = x.shape[1], (0 if past is None else past[0].shape[2])
            mask = torch.ones(t, s + t, dtype=torch.bool, device=x.device).tril(s)[None, None]
        keys, values = [], []
        for i, layer in enumerate((self, *self.extra)):
            mine = None if past is None else tuple(p[:, i * c.kv_heads:(i + 1) * c.kv_heads] for p in past)
            x, (k, v) = _layer_forward(layer, c, x, positions, mine, mask)
            keys.append(k)
            values.append(v)
        if len(keys) == 1:
            return x, (keys[0], values[0])
        return x, (torch.cat(keys, dim=1), torch.cat(values, dim=1))


class HeadLayer(nn.Module):
    """A decoder layer of an :class:`EagleHead` after its first (``EagleConfig.extra_layers``): the same pre-norm
    Llama-style layer, with its own KV entries."""

    def __init__(self, config: EagleConfig) -> None:
        super().__init__()
        _add_layer(self, config)


def _add_layer(module: nn.Module, c: EagleConfig) -> None:
    """Give ``module`` one decoder layer's weights: norm1, q/k/v/o projections, norm2, gate/up/down."""
    module.norm1 = RMSNorm(c.hidden, c.eps)
    module.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
    module.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
    module.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
    module.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)
    module.norm2 = RMSNorm(c.hidden, c.eps)
    module.gate_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
    module.up_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
    module.down_proj = nn.Linear(c.intermediate, c.hidden, bias=False)


def _layer_forward(m: nn.Module, c: EagleConfig, x: torch.Tensor, positions: torch.Tensor,
                   past: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None):
    """One decoder layer (the weights :func:`_add_layer` gave ``m``) on x (B, T, H): grouped-query attention with
    rotary positions over ``past`` (each (B, kv_heads, S, d)) and the new entries, then a SwiGLU MLP. Returns the
    new x and this layer's new (keys, values), each (B, kv_heads, T, d)."""
    b, t, _ = x.shape
    h = m.norm1(x)
    q = m.q_proj(h).view(b, t, c.heads, c.head_dim).transpose(1, 2)
    k = m.k_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
    v = m.v_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
    q, k = _rope(q, positions, c.rope_theta), _rope(k, positions, c.rope_theta)
    keys = torch.cat([past[0], k], dim=2) if past is not None else k
    values = torch.cat([past[1], v], dim=2) if past is not None else v
    attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=c.heads != c.kv_heads)
    x = x + m.o_proj(attn.transpose(1, 2).reshape(b, t, c.heads * c.head_dim))
    h = m.norm2(x)
    return x + m.down_proj(F.silu(m.gate_proj(h)) * m.up_proj(h)), (k, v)


class MedusaHeads(nn.Module):
    """Medusa heads (Cai et al. 2024): head i maps f_t to f_t + SiLU(W_i f_t + b_i), read by the draft LM head.

    With f_t the feature of the last position the target has processed, the target's own next token comes from
    ``lm_head(f_t)`` and head i (0-based) predicts the token i+1 places after it. Weights start at zero, so an
    untrained head repeats the target's own next-token guess.

    Args:
        hidden: H.
        num_heads: number of heads (the longest chain one pass can draft).
        vocab_ids: (N,) int64 draft vocabulary, or None for the full vocabulary.
    """

    kind = "medusa"

    def __init__(self, hidden: int, num_heads: int = 4, vocab_ids: torch.Tensor | None = None) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_heads))
        for block in self.blocks:
            nn.init.zeros_(block.weight)
            nn.init.zeros_(block.bias)
        self.register_buffer("vocab_ids", vocab_ids.long() if vocab_ids is not None else torch.zeros(0, dtype=torch.long))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """(..., H) features -> (..., num_heads, H) head outputs."""
        return torch.stack([feats + F.silu(block(feats)) for block in self.blocks], dim=-2)


def new_eagle_head(target_model: nn.Module, vocab_ids: torch.Tensor | None = None, seed: int = 0,
                   feature_layers: tuple[int, ...] = (), extra_layers: int = 0) -> EagleHead:
    """A randomly initialised :class:`EagleHead` sized for ``target_model`` (float32, on its device); with
    ``feature_layers`` (see :func:`fusion_layers`) an EAGLE-3 head, whose ``out_norm`` starts as a copy of the
    target's final norm (the scale the frozen LM head expects); ``extra_layers`` decoder layers after the first."""
    torch.manual_seed(seed)
    config = replace(EagleConfig.from_target(target_model.config, feature_layers), extra_layers=int(extra_layers))
    head = EagleHead(config, vocab_ids)
    std = getattr(target_model.config, "initializer_range", 0.02)
    for module in head.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    final_norm = getattr(getattr(target_model, "model", None), "norm", None)
    if feature_layers and final_norm is not None and final_norm.weight.shape == head.out_norm.weight.shape:
        with torch.no_grad():
            head.out_norm.weight.copy_(final_norm.weight.detach())
    return head.to(target_model.device)


def new_medusa_heads(target_model: nn.Module, num_heads: int = 4, vocab_ids: torch.Tensor | None = None) -> MedusaHeads:
    """Fresh :class:`MedusaHeads` for ``target_model`` (zero-initialised, float32, on its device)."""
    return MedusaHeads(target_model.config.hidden_size, num_heads, vocab_ids).to(target_model.device)


def save_heads(head: EagleHead | MedusaHeads, path: str | Path, target_model: nn.Module, info: dict | None = None) -> Path:
    """Write ``head`` to ``path`` (float16 weights, int64 vocabulary; settings, target signature and ``info``
    in the metadata). Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, value in head.state_dict().items():
        tensors[name] = value.detach().cpu().contiguous() if name == "vocab_ids" else value.detach().to(torch.float16).cpu().contiguous()
    settings = asdict(head.config) if isinstance(head, EagleHead) else {"hidden": head.blocks[0].in_features,
                                                                        "num_heads": head.num_heads}
    if isinstance(head, EagleHead) and not head.config.extra_layers:
        settings.pop("extra_layers")  # one-layer files keep the settings older readers know
    meta = {"kind": head.kind, "settings": json.dumps(settings), "target": target_signature(target_model),
            "info": json.dumps(info or {})}
    if isinstance(head, EagleHead) and (head.config.feature_layers or head.config.extra_layers):
        meta.update(format="3" if head.config.extra_layers else "2", recipe=head.recipe)  # format 1 files: as before
    save_file(tensors, str(path), metadata=meta)
    path.chmod(0o644)  # a shareable file (safetensors writes it private)
    return path


def file_metadata(path: Path, what: str) -> dict:
    """The safetensors metadata of ``path`` ({} when it has none); ``what`` names the file in the errors ("head
    file", "draft-model file"). Raises HeadsError (one sentence) when it is missing or not a safetensors file."""
    if not path.is_file():
        raise HeadsError(f"{what} not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            return f.metadata() or {}
    except Exception as error:  # noqa: BLE001 - any parse failure means "not such a file"
        raise HeadsError(f"{path.name} is not a safetensors {what} ({error})") from None


def read_metadata(path: str | Path) -> dict:
    """The metadata of a head file: kind, settings (dict), target signature, info (dict), format (int; 1 when the
    file has no ``format`` key) and recipe ("eagle", "eagle3" or "medusa").

    Raises:
        HeadsError: if the file is missing, not a head file, or of a newer format than :data:`FORMAT`.
    """
    path = Path(path)
    meta = file_metadata(path, "head file")
    if meta.get("kind") not in ("eagle", "medusa"):
        raise HeadsError(f"{path.name} is not a specviz head file (no kind eagle/medusa in its metadata)")
    stated = str(meta.get("format", "1"))
    version = int(stated) if stated.isdigit() else -1
    if not 1 <= version <= FORMAT:
        raise HeadsError(f"{path.name} has head-file format {meta.get('format')!r}; this specviz reads formats "
                         f"1 to {FORMAT}: update specviz to load it")
    return {"kind": meta["kind"], "settings": json.loads(meta.get("settings", "{}")),
            "target": meta.get("target", ""), "info": json.loads(meta.get("info", "{}")), "format": version,
            "recipe": meta.get("recipe", meta["kind"])}


def read_head_state(path: str | Path, target_model: nn.Module, kind: str | None = None) -> tuple[dict, dict, torch.Tensor | None]:
    """A head file's (metadata, tensors in float32 with ``vocab_ids`` as stored, draft vocabulary or None for the
    full one), checked against ``kind`` and ``target_model``: what :func:`load_heads` builds a head from, and what
    training continues from (:func:`specviz.training.train.start_state`).

    Raises:
        HeadsError: missing or malformed file, another kind than ``kind``, or made for another target.
    """
    from safetensors.torch import load_file

    meta = read_metadata(path)
    if kind is not None and meta["kind"] != kind:
        raise HeadsError(f"{Path(path).name} holds {meta['kind']} heads, not {kind}")
    if not signature_fits(meta["target"], target_model):
        raise HeadsError(f"{Path(path).name} was trained for another target ({meta['target']}), not this one "
                         f"({target_signature(target_model)}); train heads for it with `python -m specviz train "
                         f"{meta['kind']}`")
    state = load_file(str(path))
    vocab = state.get("vocab_ids")
    vocab = vocab if vocab is not None and vocab.numel() else None
    return meta, {k: (v if k == "vocab_ids" else v.float()) for k, v in state.items()}, vocab


def head_weights_for(target_model: nn.Module, asked: str | None = None) -> str:
    """The weight format trained heads draft with for ``target_model``: ``asked`` ("int8" or "float") or, for None /
    "auto", "int8" on a CPU target and "float" elsewhere (see :data:`HEAD_WEIGHTS`).

    Raises:
        HeadsError: an unknown value, or int8 for a target off the CPU (torch's int8 kernel used here is a CPU one).
    """
    value = (asked or "auto").strip().lower()
    if value not in ("auto", *HEAD_WEIGHTS):
        raise HeadsError(f"Head weights must be auto, int8 or float, got {asked!r}.")
    on_cpu = target_placement(target_model)[0].type == "cpu"
    if value == "int8" and not on_cpu:
        raise HeadsError("Int8 head weights run on the CPU only; use float (the target's dtype) on this device.")
    if value == "auto":
        return "int8" if on_cpu else "float"
    return value


def load_heads(path: str | Path, target_model: nn.Module, kind: str | None = None,
               weights: str = "float") -> EagleHead | MedusaHeads:
    """Load a head file for ``target_model``: on the target's device and in its dtype (float32, bfloat16 or float16:
    a head trained in one dtype drafts for a target in another, :func:`signature_fits`), eval mode, no gradients;
    with ``weights="int8"`` (CPU only, :func:`head_weights_for`) its linears hold int8 weights, q/k/v and gate/up
    fused (:func:`specviz.runtime.weights.apply_weights`).

    Raises:
        HeadsError: missing or malformed file, another kind than ``kind``, or made for another target.
    """
    meta, state, vocab = read_head_state(path, target_model, kind)
    s = meta["settings"]
    head = EagleHead(EagleConfig(**s), vocab) if meta["kind"] == "eagle" else MedusaHeads(s["hidden"], s["num_heads"], vocab)
    head.load_state_dict(state)
    head.eval().requires_grad_(False)
    head = follow_target(head, target_model)
    if weights == "int8":
        from specviz.runtime.weights import apply_weights

        apply_weights(head, "int8", target=False)
        return head
    from specviz.runtime.speed import prepare_draft_head

    prepare_draft_head(head)
    return head


def shipped_heads(target_model: nn.Module, kind: str) -> Path | None:
    """The head file in ``assets/heads`` made for this target (in any dtype, :func:`signature_fits`) and kind, or
    None."""
    if not HEADS_DIR.is_dir():
        return None
    for path in sorted(HEADS_DIR.glob(f"*{kind}*.safetensors")):
        try:
            meta = read_metadata(path)
        except HeadsError:
            continue
        if meta["kind"] == kind and signature_fits(meta["target"], target_model):
            return path
    return None


def parameter_count(head: nn.Module) -> int:
    """Trainable parameters of a head (the draft vocabulary buffer excluded)."""
    return sum(p.numel() for p in head.parameters())

