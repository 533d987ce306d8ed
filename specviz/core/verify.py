"""Verification math: pure functions with no model inside.

Greedy acceptance keeps the longest prefix of draft tokens that equal the target's argmax. Speculative
(rejection) sampling follows Leviathan et al. 2023 ("Fast Inference from Transformers via Speculative
Decoding", Alg. 1) and Chen et al. 2023 ("Accelerating LLM Decoding with Speculative Sampling"): draft token
x at position i is accepted with probability min(1, target_probs[x] / draft_probs[x]); at the first rejection
the next token is drawn from norm(max(0, target_probs - draft_probs)); if all are accepted a bonus token is
drawn from the target at position k+1. The emitted tokens then follow the target's distribution exactly.

A deterministic drafter (n-gram lookup) has a one-hot draft distribution: draft_probs is None, and the
acceptance probability is target_probs[x].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingConfig:
    """How tokens are chosen. ``temperature == 0`` means greedy (argmax).

    The same transformations are applied to the draft and to the target, position by position along a draft
    (:func:`apply_processors`, then :func:`process_logits`), so the acceptance ratio compares like with like and
    greedy speculative output equals standard decoding with the same settings. They follow transformers'
    ``generate()`` (same names, same order): logit bias, repetition penalty, no-repeat n-grams, then temperature,
    top-k, top-p and min-p; frequency and presence penalties, which ``generate()`` lacks, follow vLLM / OpenAI.

    Attributes:
        temperature: 0 for greedy, else the softmax temperature (> 0).
        top_k: keep only the k most likely tokens (0 = off).
        top_p: nucleus sampling: keep the smallest set of most likely tokens whose mass reaches top_p (1.0 = off).
        seed: seed of the run's torch.Generator (reproducible runs).
        min_p: drop tokens whose probability is below min_p x the top token's (after temperature; 0 = off).
        repetition_penalty: CTRL's penalty (Keskar et al. 2019) on every token already in the sequence, prompt
            included: a positive logit is divided by it, a negative one multiplied (1.0 = off, > 1 discourages).
        frequency_penalty / presence_penalty: subtract penalty x (times the token was generated) and penalty x
            (1 if it was generated) from its logit; generated tokens only, not the prompt (0 = off).
        no_repeat_ngram_size: a token that would complete an n-gram of this size already in the sequence (prompt
            included) is banned (0 = off).
        logit_bias: (token id, bias) pairs added to the logits; a bias of -inf bans the token.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if not (self.temperature >= 0.0):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not (0.0 <= self.min_p < 1.0):
            raise ValueError(f"min_p must be in [0, 1), got {self.min_p}")
        if not (self.repetition_penalty > 0.0):
            raise ValueError(f"repetition_penalty must be > 0 (1.0 = off), got {self.repetition_penalty}")
        if self.no_repeat_ngram_size < 0:
            raise ValueError(f"no_repeat_ngram_size must be >= 0 (0 = off), got {self.no_repeat_ngram_size}")
        if any(not isinstance(t, int) or t < 0 for t, _ in self.logit_bias):
            raise ValueError("logit_bias needs (token id >= 0, bias) pairs")

    @property
    def greedy(self) -> bool:
        """True when tokens are chosen by argmax (temperature 0)."""
        return self.temperature == 0.0

    @property
    def processed(self) -> bool:
        """True when any history-dependent or bias processor is on (:func:`apply_processors` changes logits)."""
        return (self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
                or self.no_repeat_ngram_size > 0 or bool(self.logit_bias))


def apply_processors(logits: torch.Tensor, sampling: SamplingConfig, histories: list[list[int]] | None,
                     prompt_len: int = 0) -> torch.Tensor:
    """The logits processors of :class:`SamplingConfig` on (n, V) logits, row i seeing ``histories[i]`` (the
    committed tokens plus the draft tokens before row i's position; ``prompt_len`` of them are the prompt).

    Returns ``logits`` itself when no processor is on; else a new (n, V) float32 tensor. This is the one place
    both the target's and the drafters' distributions get them, so a draft position and its verification see the
    same history.
    """
    if not sampling.processed or histories is None:
        return logits
    x = logits.float().clone()
    vocab = x.shape[-1]
    for token, bias in sampling.logit_bias:
        if token < vocab:
            x[:, token] += bias
    for row, history in enumerate(histories):
        _penalize(x[row], history, prompt_len, sampling, vocab)
    return x


def _penalize(row: torch.Tensor, history: list[int], prompt_len: int, s: SamplingConfig, vocab: int) -> None:
    """Repetition, no-repeat n-gram, frequency and presence processing of one (V,) logits row, in place."""
    if s.repetition_penalty != 1.0 and history:
        seen = torch.tensor(sorted(set(t for t in history if t < vocab)), dtype=torch.long, device=row.device)
        values = row[seen]
        row[seen] = torch.where(values < 0, values * s.repetition_penalty, values / s.repetition_penalty)
    n = s.no_repeat_ngram_size
    if n and len(history) >= n:
        tail = tuple(history[len(history) - n + 1:]) if n > 1 else ()
        banned = {history[i + n - 1] for i in range(len(history) - n + 1)
                  if tuple(history[i:i + n - 1]) == tail}
        for token in banned:
            if token < vocab:
                row[token] = float("-inf")
    if s.frequency_penalty or s.presence_penalty:
        counts: dict[int, int] = {}
        for token in history[prompt_len:]:
            counts[token] = counts.get(token, 0) + 1
        for token, count in counts.items():
            if token < vocab:
                row[token] -= s.frequency_penalty * count + s.presence_penalty


def process_logits(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """Turn (processed) logits into the sampling distribution: temperature, then top-k, then top-p, then min-p.

    Args:
        logits: (n, V) raw logits (any float dtype).
        sampling: the settings; in greedy mode the plain softmax (temperature 1) is returned, which the
            engine uses only for display.

    Returns:
        (n, V) float32 probabilities; rows sum to 1; tokens outside the top-k / top-p set are exactly 0.
    """
    x = logits.float()
    if sampling.greedy:
        return torch.softmax(x, dim=-1)
    x = x / sampling.temperature
    if sampling.top_k and sampling.top_k < x.shape[-1]:
        kth = torch.topk(x, sampling.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        drop_sorted = mass_before >= sampling.top_p  # the first token is never dropped (mass_before == 0)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if sampling.min_p > 0.0:  # after temperature, as transformers' MinPLogitsWarper (the top token always stays)
        probs = probs.masked_fill(probs < sampling.min_p * probs.amax(dim=-1, keepdim=True), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def restrict_vocab(logits: torch.Tensor, vocab_size: int | None) -> torch.Tensor:
    """The first ``vocab_size`` columns of (..., V) logits or probabilities: the ids both sides of a run share.

    LM heads are often padded beyond the tokenizer (Qwen2.5's heads have 152064 rows for 151665 ids, and a
    draft's padding can differ from its target's). Padded ids have no token, so every distribution of a run is
    cut to the same ``vocab_size`` columns before anything is chosen or compared: they get probability 0 on both
    sides and no drafter can propose one. A view, no copy. None or a size >= V returns ``logits`` unchanged.
    """
    if vocab_size is None or vocab_size >= logits.shape[-1]:
        return logits
    return logits[..., :vocab_size]


def fit_vocab(probs: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(m, W) draft distributions as (m, vocab_size): cut to the shared ids (:func:`restrict_vocab`; a drafter
    never puts mass beyond them) or padded with zeros when its head has fewer rows."""
    if probs.shape[-1] >= vocab_size:
        return restrict_vocab(probs, vocab_size)
    return torch.nn.functional.pad(probs, (0, vocab_size - probs.shape[-1]))


def all_finite(values: torch.Tensor | list[float]) -> bool:
    """True when no element is NaN or +-inf (a float16 model that overflowed produces them)."""
    if isinstance(values, torch.Tensor):
        return bool(torch.isfinite(values).all())
    return all(v == v and abs(v) != float("inf") for v in values)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """Draw one token id from a (V,) probability vector with the run's generator."""
    return int(torch.multinomial(probs.float(), 1, generator=generator).item())


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one draft.

    Attributes:
        num_accepted: how many draft tokens were accepted (a prefix), 0..m.
        next_id: the target's own token: recovered (after a rejection) or bonus (all accepted), or the plain
            target token when nothing was drafted.
        next_kind: "recovered", "bonus" or "target".
        uniforms: the uniform number drawn per judged position (sampling only; empty in greedy mode).
    """

    num_accepted: int
    next_id: int
    next_kind: str
    uniforms: tuple[float, ...] = ()


def _kind(num_accepted: int, num_drafted: int) -> str:
    if num_drafted == 0:
        return "target"
    return "bonus" if num_accepted == num_drafted else "recovered"


def verify_greedy(draft_ids: list[int], target_logits: torch.Tensor) -> Verdict:
    """Greedy verification: accept the longest prefix equal to the target's argmax.

    Args:
        draft_ids: m drafted token ids.
        target_logits: (m+1, V) target logits at the positions that predict each draft token and the one after.

    Returns:
        A :class:`Verdict`; next_id is the target's argmax at the first mismatch (recovered) or at m+1 (bonus).
    """
    top = target_logits.argmax(dim=-1).tolist()
    n = 0
    while n < len(draft_ids) and draft_ids[n] == top[n]:
        n += 1
    return Verdict(n, int(top[n]), _kind(n, len(draft_ids)))


def acceptance_probability(target_prob: float, draft_prob: float) -> float:
    """min(1, target_prob / draft_prob): the chance that rejection sampling keeps a drafted token.

    ``draft_prob`` is the draft's probability of the token it drafted (1.0 for a deterministic drafter). A token
    the draft gave probability 0 (which it could only propose by rounding) is kept when the target allows it.
    """
    if draft_prob <= 0.0:
        return 1.0 if target_prob > 0.0 else 0.0
    return min(1.0, target_prob / draft_prob)


def one_hot_row(token: int, like: torch.Tensor) -> torch.Tensor:
    """The draft distribution of a deterministic drafter at one position: (V,) zeros with 1.0 at ``token``, in
    the dtype and on the device of ``like`` (a (V,) target row)."""
    row = torch.zeros_like(like)
    row[token] = 1.0
    return row


def residual_distribution(target_row: torch.Tensor, draft_row: torch.Tensor) -> torch.Tensor:
    """norm(max(0, target_probs - draft_probs)) for one position, both (V,).

    A rejection implies target < draft at the drafted token, so the residual has mass in exact arithmetic;
    if rounding leaves it empty, the target row itself is returned, so no NaN can appear.
    """
    residual = torch.clamp(target_row - draft_row, min=0.0)
    total = residual.sum()
    if not torch.isfinite(total) or total.item() <= 0.0:
        return target_row
    return residual / total


def verify_sampling(
    draft_ids: list[int],
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    generator: torch.Generator | None,
) -> Verdict:
    """Speculative (rejection) sampling over a chain of drafted tokens.

    Args:
        draft_ids: m drafted token ids.
        draft_probs: (m, V) the exact distributions the draft tokens were drawn from, or None for a
            deterministic drafter (treated as one-hot on each drafted token).
        target_probs: (m+1, V) the target's processed distributions (same temperature/top-k/top-p).
        generator: the run's seeded generator (uniforms and the recovered/bonus draw come from it).

    Returns:
        A :class:`Verdict` whose emitted tokens follow ``target_probs`` exactly (Leviathan et al. 2023, Thm 1).
    """
    uniforms: list[float] = []
    device = generator.device if generator is not None else target_probs.device  # a CUDA generator draws on CUDA
    for i, token in enumerate(draft_ids):
        p = float(target_probs[i, token])
        q = 1.0 if draft_probs is None else float(draft_probs[i, token])
        u = float(torch.rand((), generator=generator, device=device).item())
        uniforms.append(u)
        if not u < acceptance_probability(p, q):
            if draft_probs is None:
                draft_row = one_hot_row(token, target_probs[i])
            else:
                draft_row = draft_probs[i].to(target_probs.dtype)
            next_id = sample(residual_distribution(target_probs[i], draft_row), generator)
            return Verdict(i, next_id, "recovered", tuple(uniforms))
    m = len(draft_ids)
    return Verdict(m, sample(target_probs[m], generator), _kind(m, m), tuple(uniforms))
