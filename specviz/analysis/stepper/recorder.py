"""Recording a run: the engine's speculative loop with a thin drafter wrapper that keeps each proposal, and at each
rejection one more forward of the target (and, greedy, of a draft model) on the committed prefix."""

from __future__ import annotations

from typing import Iterator

from specviz.analysis.stepper.captions import _lookahead_ids
from specviz.analysis.stepper.record import Distributions, Recording
from specviz.core.events import PassEvent
from specviz.core.generation_settings import settings_summary


class RecordingDrafter:
    """Wraps a drafter and keeps its latest :class:`~specviz.core.drafting.Draft` (everything else passes through)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.needs_hidden = getattr(inner, "needs_hidden", False)
        self.last = None

    def reset(self, prompt_ids: list[int]) -> None:
        self.last = None
        self.inner.reset(prompt_ids)

    def propose(self, ctx):
        self.last = self.inner.propose(ctx)
        return self.last

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        self.inner.commit(committed_ids, num_accepted)

    def advance(self, new_level: list[int]) -> int:
        """Lookahead decoding: hand the Jacobi step's outputs to the wrapped drafter (its window and pool)."""
        return self.inner.advance(new_level)

    @property
    def cache_len(self):
        return getattr(self.inner, "cache_len", None)


class PrefixForward:
    """Next-token distributions of ``model`` after growing prefixes, reusing a KV cache across calls.

    The committed text only grows, so each call feeds just the tokens after the longest prefix it shares with the
    previous call (rolling back the rest): a whole run's rejections cost about one extra prefill of the prompt
    plus short forwards.
    """

    def __init__(self, model) -> None:
        from specviz.core.kv import new_cache

        self.model = model
        self.cache = new_cache(model)
        self.fed: list[int] = []

    def probs(self, prefix: list[int], sampling, prompt_len: int = 0):
        """The processed distribution (V,) of the next token after ``prefix`` (non-empty; its first ``prompt_len``
        tokens are the prompt): the run's logits processors with ``prefix`` as the history
        (:func:`specviz.core.verify.apply_processors`, as the engine and the drafters apply them), then temperature,
        top-k, top-p and min-p."""
        from specviz.core.kv import forward_logits, rollback_cache
        from specviz.core.verify import apply_processors, process_logits

        keep = 0
        limit = min(len(self.fed), len(prefix) - 1)  # feed at least one token to get logits
        while keep < limit and self.fed[keep] == prefix[keep]:
            keep += 1
        rollback_cache(self.cache, keep)
        logits = forward_logits(self.model, list(prefix[keep:]), self.cache, 1)
        self.fed = list(prefix)
        return process_logits(apply_processors(logits, sampling, [list(prefix)], prompt_len), sampling)[0]


def rejection_distributions(target: PrefixForward, draft_model: PrefixForward | None, draft, prefix: list[int],
                            event: PassEvent, sampling, top: int = 8, prompt_len: int = 0) -> Distributions:
    """The target / draft / residual distributions at ``event``'s first rejection.

    Args:
        target: the target's model behind a :class:`PrefixForward` (run once more over ``prefix``).
        draft_model: the draft model behind a :class:`PrefixForward` (None for a drafter without a model); run
            only when the draft carries no distributions (a draft model in greedy mode).
        draft: the pass's :class:`~specviz.core.drafting.Draft`.
        prefix: prompt + tokens emitted before this pass + the pass's accepted draft tokens.
        event: the pass (with num_accepted < num_drafted).
        sampling: the run's :class:`~specviz.core.verify.SamplingConfig` (its logits processors see ``prefix``, of
            which the first ``prompt_len`` tokens are the prompt, on both sides).
        top: tokens kept from each distribution's top.
    """
    import torch

    from specviz.core.verify import one_hot_row, residual_distribution

    i = event.num_accepted
    drafted = int(event.draft_ids[i])
    target_row = target.probs(prefix, sampling, prompt_len)
    known = True
    if draft is not None and draft.draft_probs is not None and i < len(draft.draft_probs):
        draft_row = draft.draft_probs[i].float().to(target_row.device)
    elif draft_model is not None:
        draft_row = draft_model.probs(prefix, sampling, prompt_len).to(target_row.device)
    else:  # a deterministic drafter: one-hot on its guess (q < 1 without a distribution: only that q is known)
        q = float(draft.token_probs[i]) if draft is not None and i < len(draft.token_probs) else 1.0
        draft_row = one_hot_row(drafted, target_row) * q
        known = q >= 1.0
    size = min(target_row.shape[-1], draft_row.shape[-1])
    target_row, draft_row = target_row[:size], draft_row[:size]
    residual = None if sampling.greedy else residual_distribution(target_row, draft_row)
    rows = [target_row, draft_row] + ([residual] if residual is not None else [])
    chosen = int(event.next_id) if event.next_id is not None else int(target_row.argmax())
    ids = {drafted, chosen}
    for row in rows:
        ids.update(int(t) for t in torch.topk(row, min(top, size)).indices.tolist())
    score = sum(rows)
    ordered = sorted(ids, key=lambda t: -float(score[t]))
    pick = lambda row: tuple(float(row[t]) for t in ordered)  # noqa: E731
    return Distributions(i, tuple(ordered), pick(target_row), pick(draft_row),
                         pick(residual) if residual is not None else None, drafted, chosen, known)


class Recorder:
    """Runs the engine's speculative loop and records what step mode needs (see the module docstring).

    Use ``for event in recorder.events(): ...`` (e.g. to show progress), then :meth:`recording`.
    """

    def __init__(self, target, drafter, prompt_ids: list[int], config, top: int = 8, cancel=None) -> None:
        self.target = target
        self.drafter = RecordingDrafter(drafter)
        self.prompt_ids = list(prompt_ids)
        self.config = config
        self.top = top
        self.cancel = cancel  # a threading.Event or a callable; set: RunCancelled before the next forward
        self._events: list[PassEvent] = []
        self._rejections: dict[int, Distributions] = {}
        self._proposed_probs = False

    def events(self) -> Iterator[PassEvent]:
        """Run the engine; yields each event after recording it. Raises RunCancelled when ``cancel`` is set
        (checked before every forward, the extra ones of a rejection's distributions included)."""
        from specviz.core.engine import speculative_generate
        from specviz.core.kv import check_cancel

        output: list[int] = []
        target = PrefixForward(self.target.model)
        model = getattr(self.drafter.inner, "model", None)
        draft_model = PrefixForward(model) if model is not None else None
        for event in speculative_generate(self.target, self.drafter, self.prompt_ids, self.config,
                                          cancel=self.cancel):
            draft = self.drafter.last if event.kind == "pass" and event.draft_ids else None
            if draft is not None and draft.draft_probs is not None:
                self._proposed_probs = True
            if draft is not None and event.num_rejections:
                check_cancel(self.cancel)
                prefix = self.prompt_ids + output + list(event.draft_ids[:event.num_accepted])
                self._rejections[len(self._events)] = rejection_distributions(
                    target, draft_model, draft, prefix, event, self.config.sampling, self.top, len(self.prompt_ids))
            output.extend(event.emitted_ids)
            self._events.append(event)
            yield event

    def recording(self) -> Recording:
        """The finished :class:`Recording`."""
        events = tuple(self._events)
        ids = set(t for e in events for t in e.emitted_ids + e.draft_ids)
        ids.update(t for e in events if e.lookahead is not None for t in _lookahead_ids(e.lookahead))
        ids.update(d.target_top_id for e in events for d in e.details)
        ids.update(t for dist in self._rejections.values() for t in dist.token_ids)
        decode = self.target.tokenizer.decode
        texts = {t: decode([t], skip_special_tokens=False, clean_up_tokenization_spaces=False) for t in ids}
        inner = self.drafter.inner
        deterministic = getattr(inner, "model", None) is None and not self._proposed_probs and all(
            d.draft_prob == 1.0 for e in events for d in e.details)
        return Recording(events, self.config.sampling.greedy, self.drafter.name, deterministic, texts,
                         len(self.prompt_ids), dict(self._rejections),
                         settings_summary(self.config.sampling, self.config.stop_token_ids))


def record_run(target, drafter, prompt_ids: list[int], config, top: int = 8) -> Recording:
    """Run and record in one call (see :class:`Recorder`)."""
    recorder = Recorder(target, drafter, prompt_ids, config, top)
    for _ in recorder.events():
        pass
    return recorder.recording()
