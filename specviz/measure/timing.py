"""Forward and drafter timing: ms of one target forward over n new tokens after a cached prompt (each forward
rolled back, so every measurement starts from the same cache), timed in interleaved rounds so that a machine whose
speed drifts slows every n alike; and ms of one drafter proposal from a fixed state."""

from __future__ import annotations

import contextlib
import statistics
from typing import Callable, Iterable

import torch

from specviz.core.drafting import DraftContext
from specviz.core.kv import Clock, forward_logits, forward_logits_features, new_cache, rollback_cache
from specviz.core.verify import SamplingConfig


def time_forward_ms(model: torch.nn.Module, device: torch.device, prompt_len: int, token_counts: Iterable[int],
                    repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict[int, float]:
    """Median ms of one forward over n new tokens after a ``prompt_len``-token cached prompt, for each n.

    Every forward computes logits for all n positions (as a verification does) and is then rolled back, so
    each measurement starts from the same cache of ``prompt_len`` positions.
    """
    variants = {"default": contextlib.nullcontext}
    return time_forward_variants(model, device, prompt_len, token_counts, variants, repeats, warmup, seed)["default"]


def time_forward_variants(model: torch.nn.Module, device: torch.device, prompt_len: int,
                          token_counts: Iterable[int],
                          variants: dict[str, Callable[[], contextlib.AbstractContextManager]],
                          repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict[str, dict[int, float]]:
    """Like :func:`time_forward_ms` for several ways of running the same model, measured interleaved.

    ``variants`` maps a name to a context-manager factory entered around each timed forward (e.g.
    :func:`specviz.runtime.speed.plain_path` for the default kernels). Returns variant name -> {n: median ms} of
    :func:`time_forward_rounds`.
    """
    rounds = time_forward_rounds(model, device, prompt_len, token_counts, variants, repeats, warmup, seed)
    return {name: {n: statistics.median(ms) for n, ms in per_n.items()} for name, per_n in rounds.items()}


def time_forward_rounds(model: torch.nn.Module, device: torch.device, prompt_len: int,
                        token_counts: Iterable[int],
                        variants: dict[str, Callable[[], contextlib.AbstractContextManager]],
                        repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict[str, dict[int, list[float]]]:
    """ms of one forward over n new tokens after a ``prompt_len``-token cached prompt, per round.

    Every round times each n once for each variant (``warmup`` untimed rounds first, then ``repeats`` timed
    ones); the order of the n and of the variants alternates between rounds. So a machine whose speed drifts
    (a shared VM: +-20 % between seconds was seen) slows every n of a round alike, and the ratio T(n)/T(1) taken
    within a round (:func:`_cost_figures`) cancels the drift that a ratio of medians timed minutes apart keeps.
    Each forward computes logits for all n positions (as a verification does) and is then rolled back.

    Returns:
        variant name -> {n: [ms of round 1, ..., ms of round ``repeats``]}.
    """
    token_counts = list(token_counts)
    vocab = int(model.config.get_text_config().vocab_size)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (prompt_len + max(token_counts),), generator=gen).tolist()
    cache = new_cache(model)
    forward_logits(model, ids[:prompt_len], cache, 1)
    clock = Clock(device)
    names = list(variants)
    out: dict[str, dict[int, list[float]]] = {name: {n: [] for n in token_counts} for name in names}
    for i in range(warmup + repeats):
        for n in (token_counts if i % 2 == 0 else token_counts[::-1]):
            new = ids[prompt_len:prompt_len + n]
            for name in (names if i % 2 == 0 else names[::-1]):
                with variants[name]():
                    t0 = clock.now_ms()
                    forward_logits(model, new, cache, n)
                    t1 = clock.now_ms()
                rollback_cache(cache, prompt_len)
                if i >= warmup:
                    out[name][n].append(t1 - t0)
    return out


def time_drafter_ms(target, drafter, prompt_len: int, ks: Iterable[int], repeats: int = 5, seed: int = 0) -> dict:
    """Median ms of one ``propose`` of k tokens, for each k, from a caught-up state after a cached prompt.

    The drafter starts a run on ``prompt_len`` tokens, a random block written twice (plus the target's
    features when it reads them),
    proposes once (catch-up, not timed), then each timed call proposes again for the same committed sequence
    and is followed by ``commit(committed, 0)``, so every call drafts from the same state. The per-pass
    catch-up of 1 + accepted tokens is not included. Returns {k: {"draft_ms", "nodes"}}, where nodes is the
    number of tokens the target verifies besides the root (k for a chain; the tree's size for a tree).
    """

    vocab = int(target.model.config.get_text_config().vocab_size)
    gen = torch.Generator().manual_seed(seed)
    block = torch.randint(0, vocab, (max(1, prompt_len // 2),), generator=gen).tolist()
    prompt = (block * 2)[:prompt_len]  # a repeated block, so that n-gram lookup finds a match and drafts k tokens
    clock = Clock(target.device)
    sampling = SamplingConfig()
    out = {}
    for k in ks:
        drafter.reset(prompt[:-1])
        hidden = None
        wanted = getattr(drafter, "needs_hidden", False)
        if wanted:
            _, hidden = forward_logits_features(target.model, prompt[:-1], new_cache(target.model), 1,
                                                layers=wanted if isinstance(wanted, tuple) else ())
        draft = drafter.propose(DraftContext(prompt, k, sampling, None, hidden))
        drafter.commit(prompt, 0)
        times = []
        for _ in range(repeats):
            t0 = clock.now_ms()
            draft = drafter.propose(DraftContext(prompt, k, sampling, None, None))
            times.append(clock.now_ms() - t0)
            drafter.commit(prompt, 0)
        out[k] = {"draft_ms": statistics.median(times), "nodes": len(draft.token_ids)}
    return out
