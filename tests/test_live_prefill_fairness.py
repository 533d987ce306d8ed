"""A new user's trial (quiet 2-core machine, browser on it): in the Live tab the speculative run's time to first
token was always 1.5-2x the baseline's (n-gram drafter, same prompt: the same forward), which pushed the end-to-end
ratio against speculation. Measured: both prefills call the target alike; the speculative one runs first
(specviz.core.race) and so shared the CPUs with the browser drawing the frames sent just before it (other processes
34-47% of the CPUs during it, 12-17% during the baseline's). The Live tab now reads the prompt's first chunk once,
untimed, before both timed prefills (app.live.run.warm_prompt_read). These tests count the target's forwards."""

from __future__ import annotations

import os
import threading

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402

from app import inputs  # noqa: E402
from app.live import run  # noqa: E402
from specviz.core.kv import PREFILL_CHUNK  # noqa: E402
from specviz.drafters.registry import make_drafter  # noqa: E402


@pytest.fixture
def forwards(tiny_target, monkeypatch):
    """Every forward of the tiny target: (new ids, cached positions before it, hidden states asked for), in order;
    ``calls.mark(name)`` notes where an engine event arrived."""
    calls = []
    model = tiny_target.model
    original = model.forward

    def counted(*args, **kwargs):
        cache = kwargs.get("past_key_values", kwargs.get("cache"))
        cached = int(cache.get_seq_length()) if cache is not None else 0
        calls.append((tuple(kwargs["input_ids"].shape), cached, bool(kwargs.get("output_hidden_states"))))
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counted)
    return calls


def _events(tiny_target, tiny_model_dir, prompt: str, forwards: list, drafter: str = "ngram"):
    settings = inputs.parse_settings(dict(prompt=prompt, target=str(tiny_model_dir), drafter=drafter, draft_model="",
                                          exit_layer=0, k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0,
                                          seed=0, max_new_tokens=6, stop_strings="", chat_template=False, tree_nodes=0))
    ngram = None if drafter == "none" else make_drafter(drafter, tiny_target)
    prompt_ids = inputs.fit_prompt_for(settings, tiny_target, ngram)[0]
    stream = run._local_events(settings, tiny_target, ngram, prompt_ids, threading.Event())
    assert forwards == []  # nothing runs before the stream is read (it is read in the job's thread)
    seen = []  # per event: (run, index, forwards so far)
    for event in stream:
        seen.append((event.run, event.index, len(forwards)))
    return prompt_ids, seen


def test_both_timed_prefills_read_the_prompt_alike_after_one_untimed_read(tiny_target, tiny_model_dir, forwards):
    prompt_ids, seen = _events(tiny_target, tiny_model_dir, "the cat sat on the mat and the cat sat on", forwards)
    n = len(prompt_ids)
    assert n > 4
    # 1 the untimed read, 2 the speculative prefill, 3 the baseline's: the same shape, into an empty cache, no
    # hidden states (the n-gram drafter reads none); the first events come after all three
    assert forwards[:3] == [((1, n), 0, False)] * 3
    assert seen[0] == ("speculative", 0, 3) and seen[1] == ("baseline", 0, 3)
    # after the prefills each run's forwards continue from its own cache: the baseline's one token at a time
    passes = forwards[3:]
    assert all(cached >= n for _, cached, _ in passes) and not any(hidden for *_, hidden in passes)
    base_steps = [s for s in passes if s[0] == (1, 1)]
    assert len(base_steps) >= 5  # the baseline's 5 steps after its prefill (6 tokens), plain steps of spec aside


def test_a_long_prompt_is_warmed_with_its_first_chunk_only(tiny_target, tiny_model_dir, forwards, monkeypatch):
    monkeypatch.setattr(run, "PREFILL_CHUNK", 4)  # the untimed read stops at one chunk, whatever the prompt's length
    prompt_ids, seen = _events(tiny_target, tiny_model_dir, "the cat sat on the mat and the cat sat on", forwards,
                               drafter="none")
    assert len(prompt_ids) > 4 and PREFILL_CHUNK >= len(prompt_ids)  # the engine reads it in one forward
    assert forwards[:2] == [((1, 4), 0, False), ((1, len(prompt_ids)), 0, False)]
    assert seen[0] == ("baseline", 0, 2)


def test_the_untimed_read_honours_stop():
    stop = threading.Event()
    stop.set()
    from specviz.core.events import RunCancelled

    class Untouched:
        model = None

    with pytest.raises(RunCancelled):
        run.warm_prompt_read(Untouched(), [1, 2, 3], stop)
