"""Trained draft heads that read the target's own features: an EAGLE-style feature head and Medusa heads.

Both heads work on the target's last hidden feature f_t (after the final norm, so the target's logits are
``lm_head(f_t)``) and share the target's frozen LM head, restricted to a *draft vocabulary* of the most
frequent output tokens (8192 rows instead of 49152 for SmolLM2): the draft's largest cost shrinks six-fold and
exactness is untouched, because verification always uses the full target.

- :class:`EagleHead` (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty"):
  from (f_t, embedding of token t+1) one decoder layer predicts f_{t+1}; run autoregressively on its own
  predictions it drafts a chain or a tree.
- :class:`MedusaHeads` (Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with Multiple
  Decoding Heads"): head i is one residual block f + SiLU(W_i f + b_i) whose logits predict the token i+1
  places after the target's own next token.

Files: safetensors (float16 weights, int64 draft vocabulary) with the settings and the target's signature in
the metadata; :func:`load_heads` refuses a file made for another target.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

HEADS_DIR = Path(__file__).resolve().parents[2] / "assets" / "heads"


class HeadsError(ValueError):
    """A head file is missing, malformed, or made for another target (the message says which)."""


def target_signature(model: nn.Module) -> str:
    """A short string identifying a target's architecture and weights (type, sizes, an embedding checksum)."""
    cfg = model.config
    emb = model.get_input_embeddings().weight
    checksum = float(emb[:64].double().sum())
    return f"{cfg.model_type}-h{cfg.hidden_size}-l{cfg.num_hidden_layers}-v{emb.shape[0]}-c{checksum:.4f}"


class RMSNorm(nn.Module):
    """Root-mean-square layer norm over the last dimension (eps inside the square root)."""

    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class DraftLMHead:
    """The target's LM head restricted to a draft vocabulary (frozen; not part of a head file).

    Args:
        weight: (V, H) the target's LM-head weight.
        vocab_ids: (N,) int64 ids of the draft vocabulary, or None for all V.
    """

    def __init__(self, weight: torch.Tensor, vocab_ids: torch.Tensor | None) -> None:
        self.vocab_size = int(weight.shape[0])
        if vocab_ids is None or vocab_ids.numel() == 0:
            self.ids = None
            self.weight = weight.detach()
        else:
            self.ids = vocab_ids.to(weight.device).long()
            self.weight = weight.detach().index_select(0, self.ids).contiguous()

    def subset_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) features -> (..., N) logits over the draft vocabulary (oneDNN on the CPU, see
        :func:`specviz.speed.draft_linear`)."""
        from specviz.speed import draft_linear

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

    @classmethod
    def from_target(cls, config) -> "EagleConfig":
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        rope = getattr(config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return cls(config.hidden_size, config.num_attention_heads, config.num_key_value_heads, head_dim,
                   config.intermediate_size, float(theta), float(getattr(config, "rms_norm_eps", 1e-5)))


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
    """One decoder layer that predicts the target's next feature (EAGLE, Li et al. 2024).

    Input at position t+1: ``fc([embed(x_{t+1}); f_t])`` (2H -> H), then a pre-norm Llama-style layer (grouped
    query attention with rotary positions, SwiGLU MLP). The output is the predicted f_{t+1}; the draft's logits
    for token t+2 are ``DraftLMHead(f̂_{t+1})``.

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
        self.norm1 = RMSNorm(c.hidden, c.eps)
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)
        self.norm2 = RMSNorm(c.hidden, c.eps)
        self.gate_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
        self.down_proj = nn.Linear(c.intermediate, c.hidden, bias=False)
        self.register_buffer("vocab_ids", vocab_ids.long() if vocab_ids is not None else torch.zeros(0, dtype=torch.long))

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor,
                past: tuple[torch.Tensor, torch.Tensor] | None = None,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Predict features.

        Args:
            feats: (B, T, H) input features (true f_t for committed positions, predicted ones while drafting).
            embeds: (B, T, H) embeddings of the tokens one position later.
            positions: (T,) or (B, T) positions of the *embedded* tokens (for rotary embeddings).
            past: cached (keys, values), each (B, kv_heads, S, d), or None.
            mask: (B or 1, 1, T, S+T) bool, True = may attend; None = causal over the new tokens (and all of past).

        Returns:
            (B, T, H) predicted features and this call's (keys, values), each (B, kv_heads, T, d) (not
            concatenated with ``past``: the caller owns the cache).
        """
        c = self.config
        b, t, _ = feats.shape
        x = self.fc(torch.cat([embeds, feats], dim=-1))
        h = self.norm1(x)
        q = self.q_proj(h).view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = _rope(q, positions, c.rope_theta), _rope(k, positions, c.rope_theta)
        keys = torch.cat([past[0], k], dim=2) if past is not None else k
        values = torch.cat([past[1], v], dim=2) if past is not None else v
        if mask is None and t > 1:
            s = keys.shape[2] - t
            mask = torch.ones(t, s + t, dtype=torch.bool, device=x.device).tril(s)[None, None]
        attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=c.heads != c.kv_heads)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, t, c.heads * c.head_dim))
        h = self.norm2(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, (k, v)


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


def new_eagle_head(target_model: nn.Module, vocab_ids: torch.Tensor | None = None, seed: int = 0) -> EagleHead:
    """A randomly initialised :class:`EagleHead` sized for ``target_model`` (float32, on its device)."""
    torch.manual_seed(seed)
    head = EagleHead(EagleConfig.from_target(target_model.config), vocab_ids)
    std = getattr(target_model.config, "initializer_range", 0.02)
    for module in head.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
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
    meta = {"kind": head.kind, "settings": json.dumps(settings), "target": target_signature(target_model),
            "info": json.dumps(info or {})}
    save_file(tensors, str(path), metadata=meta)
    path.chmod(0o644)  # a shareable file (safetensors writes it private)
    return path


def read_metadata(path: str | Path) -> dict:
    """The metadata of a head file: kind, settings (dict), target signature, info (dict).

    Raises:
        HeadsError: if the file is missing or not a head file.
    """
    path = Path(path)
    if not path.is_file():
        raise HeadsError(f"head file not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as error:  # noqa: BLE001 - any parse failure means "not a head file"
        raise HeadsError(f"{path.name} is not a safetensors head file ({error})") from None
    if meta.get("kind") not in ("eagle", "medusa"):
        raise HeadsError(f"{path.name} is not a specviz head file (no kind eagle/medusa in its metadata)")
    return {"kind": meta["kind"], "settings": json.loads(meta.get("settings", "{}")),
            "target": meta.get("target", ""), "info": json.loads(meta.get("info", "{}"))}


def load_heads(path: str | Path, target_model: nn.Module, kind: str | None = None) -> EagleHead | MedusaHeads:
    """Load a head file for ``target_model`` (float32, on the target's device, eval mode, no gradients).

    Raises:
        HeadsError: missing or malformed file, another kind than ``kind``, or made for another target.
    """
    from safetensors.torch import load_file

    meta = read_metadata(path)
    if kind is not None and meta["kind"] != kind:
        raise HeadsError(f"{Path(path).name} holds {meta['kind']} heads, not {kind}")
    signature = target_signature(target_model)
    if meta["target"] != signature:
        raise HeadsError(f"{Path(path).name} was trained for another target ({meta['target']}), not this one "
                         f"({signature}); train heads for it with `python -m specviz train {meta['kind']}`")
    state = load_file(str(path))
    vocab = state.get("vocab_ids")
    vocab = vocab if vocab is not None and vocab.numel() else None
    s = meta["settings"]
    head = EagleHead(EagleConfig(**s), vocab) if meta["kind"] == "eagle" else MedusaHeads(s["hidden"], s["num_heads"], vocab)
    state = {k: (v if k == "vocab_ids" else v.float()) for k, v in state.items()}
    head.load_state_dict(state)
    head.eval().requires_grad_(False)
    head = head.to(target_model.device)
    from specviz.speed import prepare_draft_head

    prepare_draft_head(head)
    return head


def shipped_heads(target_model: nn.Module, kind: str) -> Path | None:
    """The head file in ``assets/heads`` made for this target and kind, or None."""
    if not HEADS_DIR.is_dir():
        return None
    signature = target_signature(target_model)
    for path in sorted(HEADS_DIR.glob(f"*{kind}*.safetensors")):
        try:
            meta = read_metadata(path)
        except HeadsError:
            continue
        if meta["kind"] == kind and meta["target"] == signature:
            return path
    return None


def parameter_count(head: nn.Module) -> int:
    """Trainable parameters of a head (the draft vocabulary buffer excluded)."""
    return sum(p.numel() for p in head.parameters())

