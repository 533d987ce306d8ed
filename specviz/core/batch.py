"""A batch of prompts decoded together over one target cache (a single prompt is a batch of one).

:class:`Batch` owns what every phase of a pass shares: the target and its cache (or a graph runner), the
rows still running, the clock, the run's vocabulary and context window; :meth:`Batch.forward` is the engine's
only way to the target. :func:`feature_request` says which target features the forwards return for the rows'
drafters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from specviz.core.costs import verify_curve_of
from specviz.core.drafting import Drafter, DrafterBase, as_drafter
from specviz.core.events import NumericalError, RunKind
from specviz.core.graphs import choose_runner
from specviz.core.kv import (PREFILL_CHUNK, Clock, TreeLayout, cache_length, check_cancel, compilations,
                             forward_chunked, forward_rows, new_cache, row_exact)
from specviz.core.output import OutputTracker
from specviz.core.rowpass import Row
from specviz.core.tree import tree_attention_mask, tree_positions
from specviz.core.verify import all_finite, apply_processors, process_logits, restrict_vocab, sample
from specviz.core.window import position_limit, window_budget

if TYPE_CHECKING:
    from specviz.core.engine import GenerationConfig


class Target(Protocol):
    """What the engine needs of a loaded model (:class:`specviz.runtime.models.LoadedModel` is one).

    ``vocab_size`` is the LM head's number of rows; ``num_token_ids`` (optional) the ids the tokenizer defines:
    rows beyond it are padding and get probability 0 (:func:`specviz.core.verify.restrict_vocab`).
    """

    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    eos_token_ids: tuple[int, ...]
    vocab_size: int


def shared_vocab(target: Target) -> int:
    """Ids a run's distributions cover: the LM head's rows, cut to the tokenizer's ids when the head is padded."""
    tokens = getattr(target, "num_token_ids", None)
    return min(target.vocab_size, tokens) if tokens else target.vocab_size


def feature_request(drafters: list[DrafterBase | None]) -> bool | tuple[int, ...]:
    """The target features a batch's forwards return for its drafters' ``needs_hidden``: False (none), True (the
    final features) or a tuple of hidden-state indices (an EAGLE-3 head's; see
    :func:`specviz.core.kv.pick_features`).

    Raises:
        ValueError: drafters of one batch ask for different features.
    """
    wanted = {d.needs_hidden for d in drafters if d is not None and d.needs_hidden}
    if len(wanted) > 1:
        raise ValueError("the drafters of one batch read different target features; run them in separate batches")
    return wanted.pop() if wanted else False


class Batch:
    """B prompts decoded together over one cache (a single prompt is a batch of one). ``active`` lists the rows
    still running, in cache-row order; :meth:`forward` is the only way to the target."""

    def __init__(self, name: RunKind, target: Target, prompts: list[list[int]], config: GenerationConfig,
                 cancel: object | None, drafters: list[Drafter | None] | None = None) -> None:
        """``config``: the run's :class:`~specviz.core.engine.GenerationConfig`; ``drafters``: one per prompt (None
        entries: standard decoding), each seen through :func:`~specviz.core.drafting.as_drafter`.

        Raises:
            ValueError: an empty prompt, or drafters asking for different target features.
        """
        if not prompts or any(not p for p in prompts):
            raise ValueError("The prompt is empty.")
        self.name, self.target, self.config, self.cancel = name, target, config, cancel
        self.clock = Clock(target.device)
        self.vocab = shared_vocab(target)
        self.window = position_limit(target.model)  # positions 0 .. window - 1 exist (None: no table, no limit)
        drafters = [as_drafter(d) for d in drafters] if drafters is not None else [None] * len(prompts)
        self.features = feature_request(drafters)
        # the forward path: a graph runner over a static device-side cache, or the eager SlabCache
        self.runner, self.path = choose_runner(target, prompts, config, self.features)
        self.cache = self.runner.cache if self.runner is not None else new_cache(target.model)
        self.rows = [Row(name, i, list(p), OutputTracker(target.tokenizer,
                                                          window_budget(target.model, len(p), config.max_new_tokens),
                                                          target.eos_token_ids, config.stop_strings,
                                                          config.stop_token_ids),
                          self._generator(i), d,
                          config.draft_length(d, verify_curve_of(target.model)) if d is not None else None)
                     for i, (p, d) in enumerate(zip(prompts, drafters))]
        self.active = list(self.rows)
        self.index = 0
        self.elapsed_ms = 0.0
        self.compile_mark = compilations()  # torch.compile's graph count when the current pass started

    def _generator(self, row: int) -> torch.Generator:
        gen = torch.Generator(device=self.target.device)
        gen.manual_seed(self.config.sampling.seed + row)  # row r of a batch draws as a single run seeded seed + r
        return gen

    def forward(self, inputs: list[list[int]], parents: list[int] | None = None
                ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The target over each active row's new ids after its cache: per row, (len, vocab) float32 logits and
        (len, H) features (or None). ``parents``: the new ids of a single row are [last committed] + a tree's nodes
        with these parents (see :mod:`specviz.core.tree`). Raises RunCancelled before starting when cancelled,
        NumericalError when the logits are not finite."""
        if self.runner is not None:  # the graph path (a single prompt) builds a tree's mask on the device
            check_cancel(self.cancel)
            return self._checked([self.runner.forward(inputs[0], parents, to_host=self.config.sampling.greedy)])
        if len(inputs) == 1:
            layout = self._tree_layout(parents) if parents is not None else None
            logits, feats = forward_chunked(self.target.model, inputs[0], self.cache, len(inputs[0]),
                                            cancel=self.cancel, features=self.features, tree=layout)
            out = [(logits, feats)]
        else:
            out = self._forward_rows(inputs)
        return self._checked(out)

    def _tree_layout(self, parents: list[int]) -> TreeLayout:
        """The tree attention mask and positions of a tree pass over the single row's cache."""
        context = cache_length(self.cache)  # committed - 1
        device = self.target.device
        return TreeLayout(tree_attention_mask(parents, context, device=device),
                          tree_positions(parents, context, device=device))

    def _checked(self, out: list[tuple[torch.Tensor, torch.Tensor | None]]
                 ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The rows' logits cut to the shared vocabulary, after checking they are finite (NumericalError)."""
        if not all(all_finite(logits) for logits, _ in out):
            raise NumericalError(
                f"The target's logits turned non-finite (NaN or inf) at output token "
                f"{min(len(r.out.ids) for r in self.active) + 1}, so no token can be chosen; the run stops. A "
                f"float16 model can overflow: try float32 or bfloat16.")
        return [(restrict_vocab(logits, self.vocab), feats) for logits, feats in out]

    def _forward_rows(self, inputs: list[list[int]]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Rows of different lengths in one forward: padded at the end, each row's own causal mask and positions."""
        check_cancel(self.cancel)
        lengths, n = self.cache.row_lengths(), max(len(ids) for ids in inputs)
        span = max(lengths) + n
        device = self.target.device
        starts = torch.tensor(lengths, device=device)[:, None]
        offsets = torch.arange(n, device=device)[None, :]
        mask = (torch.arange(span, device=device)[None, None, :] <= (starts + offsets)[:, :, None])[:, None]
        padded = [ids + [ids[-1]] * (n - len(ids)) for ids in inputs]
        logits, feats = forward_rows(self.target.model, padded, self.cache, n, attention_mask=mask,
                                     position_ids=starts + offsets, features=self.features)
        return [(logits[b, :len(ids)], feats[b, :len(ids)] if feats is not None else None)
                for b, ids in enumerate(inputs)]

    def prefill_logits(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Read every prompt (in chunks; rows padded at the end to the longest): per row, the logits at its last
        prompt position and the features of its prompt positions (or None)."""
        if self.runner is not None:
            logits, feats = self.runner.prefill(self.active[0].prompt_ids, self.cancel)
            return self._checked([(logits[-1], feats)])
        if len(self.active) == 1:
            row = self.active[0]
            logits, feats = forward_chunked(self.target.model, row.prompt_ids, self.cache, 1, cancel=self.cancel,
                                            features=self.features)
            return self._checked([(logits[-1], feats)])
        if row_exact(self.target.model):
            return self._prefill_each()
        longest = max(len(r.prompt_ids) for r in self.active)
        padded = [r.prompt_ids + [r.prompt_ids[-1]] * (longest - len(r.prompt_ids)) for r in self.active]
        logits_at: list = [None] * len(padded)
        feats: list[list[torch.Tensor]] = [[] for _ in padded]
        for start in range(0, longest, PREFILL_CHUNK):
            check_cancel(self.cancel)
            piece = [ids[start:start + PREFILL_CHUNK] for ids in padded]
            logits, f = forward_rows(self.target.model, piece, self.cache, len(piece[0]), features=self.features)
            for b, row in enumerate(self.active):
                last = len(row.prompt_ids) - 1 - start
                if 0 <= last < len(piece[0]):
                    logits_at[b] = logits[b, last]
                if f is not None:
                    feats[b].append(f[b])
        self.cache.set_row_lengths([len(r.prompt_ids) for r in self.active])
        return self._checked([(logits_at[b], torch.cat(feats[b])[:len(row.prompt_ids)] if feats[b] else None)
                              for b, row in enumerate(self.active)])

    def _prefill_each(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """:meth:`prefill_logits` for a row-exact model (:func:`~specviz.core.kv.row_exact`: a weight format on the
        CPU): each prompt read alone, as its single-prompt run reads it (padded rows read together differ from it in
        the last bits, which bfloat16 inputs can turn into another greedy token), then the caches stacked."""
        out, caches = [], []
        for row in self.active:
            cache = new_cache(self.target.model)
            logits, feats = forward_chunked(self.target.model, row.prompt_ids, cache, 1, cancel=self.cancel,
                                            features=self.features)
            out.append((logits[-1], feats))
            caches.append(cache)
        self.cache.stack_rows(caches)
        return self._checked(out)

    def processed(self, row: Row, logits: torch.Tensor, prefixes: list[list[int]]) -> torch.Tensor:
        """(n, vocab) logits after the run's logits processors (:func:`specviz.core.verify.apply_processors`),
        row i seeing the committed tokens plus ``prefixes[i]`` (the draft tokens before its position)."""
        sampling = self.config.sampling
        if not sampling.processed:
            return logits
        committed = row.committed
        return apply_processors(logits, sampling, [committed + list(p) for p in prefixes], len(row.prompt_ids))

    def choose(self, row: Row, logits_row: torch.Tensor, prefix: list[int] = ()) -> int:
        """The target's own token from one (vocab,) logits row after the committed tokens and ``prefix``:
        argmax of the processed logits, or a sample with the row's generator."""
        logits = self.processed(row, logits_row[None], [list(prefix)])
        if self.config.sampling.greedy:
            return int(logits[0].argmax())
        return sample(process_logits(logits, self.config.sampling)[0], row.gen)

    def drop_finished(self) -> None:
        """Take finished rows out of the batch (and their cache rows); each finished row's drafter is told the row's
        whole committed sequence (``finish``)."""
        for row in self.active:
            if row.finished and row.drafter is not None:
                row.drafter.finish(row.committed)
        keep = [i for i, row in enumerate(self.active) if not row.finished]
        if len(keep) < len(self.active):
            if keep:
                self.cache.select_rows(keep)
            self.active = [self.active[i] for i in keep]

    def check_invariant(self) -> None:
        """Assert every running row's cache holds its committed - 1 positions."""
