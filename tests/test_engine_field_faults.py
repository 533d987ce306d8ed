"""Fault kinds reported against other speculative engines (issue 39), each pinned on tiny models by its right value.

- sliding-window targets (Mistral; Qwen2 with ``use_sliding_window``, full and sliding layers mixed): once the text
  outgrows the window, a chain, a lookahead (tree-masked) pass and a batch of rows decode exactly as standard
  decoding, which itself matches a teacher-forced forward; the window really changes the output here;
- the context limit: a prompt within k tokens of the target's position table (a learned one, GPT-2 style, which
  raises past its end) stops at the window's end with a notice, as standard decoding does; a draft model with a
  shorter table stops drafting;
- the probabilities shown for accepted tokens: the target's p, checked against one teacher-forced forward over the
  final ids, and the Live pane's hover shows that number;
- EOS inside the prompt copied by n-gram or suffix lookup; a chat template that writes a BOS the tokenizer adds too.

Cross-tokenizer text edges are in tests/test_drafter_cross_tokenizer_edges.py, the compiled path's graphs per k in
tests/test_compiled.py.
"""

from __future__ import annotations

import re

import pytest
import torch

from conftest import CORPUS, EOS, build_tokenizer
from specviz.core.engine import GenerationConfig, collect, generate_batch, speculative_generate, standard_generate
from specviz.core.events import PassEvent
from specviz.core.verify import SamplingConfig
from specviz.drafters import ModelDrafter, NgramDrafter
from specviz.drafters.lookahead import LookaheadDrafter
from specviz.runtime.models import load_model

WINDOW = 8  # the sliding window of the tiny Mistral and Qwen2 targets, in tokens
SENTENCE = "the cat sat on the mat and the dog sat on the log"


def _tiny_config(kind: str, tokenizer, layers: int, **extra):
    from transformers import GPT2Config, MistralConfig, Qwen2Config

    eos = tokenizer.convert_tokens_to_ids(EOS)
    if kind == "gpt2":  # a learned position table: reading position n_positions or later raises IndexError
        return GPT2Config(vocab_size=len(tokenizer), n_embd=64, n_layer=layers, n_head=4, bos_token_id=eos,
                          eos_token_id=eos, pad_token_id=eos, **extra)
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  tie_word_embeddings=True, initializer_range=0.2, bos_token_id=None, eos_token_id=eos,
                  pad_token_id=eos)
    if kind == "mistral":  # every layer slides
        return MistralConfig(sliding_window=WINDOW, **common)
    # Qwen2: layer 0 full attention, layers 1.. sliding (transformers' layer_types)
    return Qwen2Config(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1, **common)


def _build(folder, kind: str, tokenizer, *, layers: int, seed: int, **extra):
    """Save a tiny model of ``kind`` (random weights, peaked softmax) with ``tokenizer``; load it as a user's."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_tiny_config(kind, tokenizer, layers, **extra)).to(torch.float32)
    with torch.no_grad():
        norm = model.transformer.ln_f if kind == "gpt2" else model.model.norm
        norm.weight.mul_(2.5)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return load_model(str(folder), device="cpu")


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(CORPUS, 400, [EOS, "<|user|>", "<|assistant|>", "<|system|>"])


def _ids(run) -> list[int]:
    return list(run.token_ids)


def _rows(events) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = {}
    for event in events:
        if isinstance(event, PassEvent):
            rows.setdefault(event.row, []).extend(event.emitted_ids)
    return rows


# ------------------------------------------------------------------------------------------ sliding-window targets


@pytest.fixture(scope="module", params=["mistral", "qwen2"])
def sliding_pair(request, tmp_path_factory, tokenizer):
    """(target, draft) of one sliding-window kind: 4 and 2 layers, window 8."""
    tmp = tmp_path_factory.mktemp(f"sliding-{request.param}")
    return (_build(tmp / "target", request.param, tokenizer, layers=4, seed=0),
            _build(tmp / "draft", request.param, tokenizer, layers=2, seed=1))


def _teacher_forced_argmax(model, prompt: list[int], output: list[int]) -> list[int]:
    """The target's greedy token at every output position, from one forward over prompt + output (no cache)."""
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + output]), use_cache=False).logits[0]
    return logits[len(prompt) - 1:-1].argmax(-1).tolist()


def test_sliding_window_targets_decode_as_standard_decoding(sliding_pair):
    target, draft = sliding_pair
    tok = target.tokenizer
    prompt = tok.encode(SENTENCE, add_special_tokens=False)
    config = GenerationConfig(max_new_tokens=30, k=4)
    assert len(prompt) + 30 > 3 * WINDOW
    base = _ids(collect(standard_generate(target, prompt, config), tok, prompt))
    assert _teacher_forced_argmax(target.model, prompt, base) == base  # the baseline is the model's own greedy text
    # the window matters: the same weights with a window longer than the text choose other tokens
    window = target.model.config.sliding_window
    target.model.config.sliding_window = 10 ** 6
    try:
        assert _teacher_forced_argmax(target.model, prompt, base) != base
    finally:
        target.model.config.sliding_window = window
    chain = speculative_generate(target, ModelDrafter(draft.model, "d"), prompt, config)
    assert _ids(collect(chain, tok, prompt)) == base
    # a lookahead pass sends its own tree mask: the sliding layers must still see only their window
    assert _ids(collect(speculative_generate(target, LookaheadDrafter(), prompt, config), tok, prompt)) == base
    other = tok.encode("rain falls on the roof", add_special_tokens=False)
    other_base = _ids(collect(standard_generate(target, other, config), tok, other))
    rows = _rows(generate_batch(target, [prompt, other], config,
                                drafters=[ModelDrafter(draft.model, "d"), ModelDrafter(draft.model, "d")]))
    assert rows == {0: base, 1: other_base}  # rows of different lengths: per-row masks, each windowed


def test_sliding_window_passes_wider_than_the_window_roll_back_exactly(sliding_pair):
    """k = 8 feeds 9 tokens per pass, more than the window of 8: a multi-token write that wraps the window, and
    rejected drafts rolled back after it, leave the output the model's own greedy text."""
    target, draft = sliding_pair
    tok = target.tokenizer
    prompt = tok.encode(SENTENCE, add_special_tokens=False)
    config = GenerationConfig(max_new_tokens=30, k=8)
    run = collect(speculative_generate(target, ModelDrafter(draft.model, "d"), prompt, config), tok, prompt)
    assert any(e.num_accepted < len(e.draft_ids) for e in run.events)  # rejections happened
    assert max(len(e.draft_ids) for e in run.events) == 8
    assert _ids(run) == _teacher_forced_argmax(target.model, prompt, _ids(run))


# ------------------------------------------------------------------------------------------------ the context limit

POSITIONS = 64  # the GPT-2-style target's position table
DRAFT_POSITIONS = 32  # its draft's, shorter


@pytest.fixture(scope="module")
def table_pair(tmp_path_factory, tokenizer):
    """(target, draft) with learned position tables of 64 and 32 rows: past its table a model raises IndexError."""
    tmp = tmp_path_factory.mktemp("position-table")
    return (_build(tmp / "target", "gpt2", tokenizer, layers=2, seed=0, n_positions=POSITIONS),
            _build(tmp / "draft", "gpt2", tokenizer, layers=1, seed=1, n_positions=DRAFT_POSITIONS))


def _drafters(draft):
    return {"draft model": ModelDrafter(draft.model, "d"), "n-gram": NgramDrafter(), "lookahead": LookaheadDrafter()}


@pytest.mark.parametrize("prompt_len", [60, 63])
def test_a_prompt_near_the_position_table_stops_at_its_end(table_pair, prompt_len):
    target, draft = table_pair
    tok = target.tokenizer
    prompt = (tok.encode(SENTENCE, add_special_tokens=False) * 10)[:prompt_len]
    config = GenerationConfig(max_new_tokens=16, k=8)
    base = collect(standard_generate(target, prompt, config), tok, prompt)
    room = POSITIONS - prompt_len
    assert len(base.token_ids) == room and base.finish_reason == "length"
    assert base.events[0].notice == (f"The target's context window ends {room} token{'s' if room > 1 else ''} after "
                                     f"the {prompt_len}-token prompt: the run stops there, before 16 new tokens.")
    for name, drafter in _drafters(draft).items():
        spec = collect(speculative_generate(target, drafter, prompt, config), tok, prompt)
        assert spec.token_ids == base.token_ids, name
        assert spec.events[0].notice == base.events[0].notice


def test_a_prompt_that_fills_the_window_is_refused_in_one_sentence(table_pair):
    target, _ = table_pair
    prompt = (target.tokenizer.encode(SENTENCE, add_special_tokens=False) * 10)[:POSITIONS]
    with pytest.raises(ValueError, match=r"^The prompt has 64 tokens, which fills the target's context window of 64 "
                                         r"tokens: shorten it\.$"):
        list(standard_generate(target, prompt, GenerationConfig(max_new_tokens=4)))


@pytest.mark.parametrize("prompt_len", [20, 28, 40])
def test_a_draft_model_with_a_shorter_table_stops_drafting(table_pair, prompt_len):
    """The draft's table (32) ends before the run (prompt + 16 <= 64): it drafts while the text fits, then the
    target decodes alone; the output is the baseline's, and no forward reads past either table."""
    target, draft = table_pair
    tok = target.tokenizer
    prompt = (tok.encode(SENTENCE, add_special_tokens=False) * 10)[:prompt_len]
    config = GenerationConfig(max_new_tokens=16, k=8)
    base = collect(standard_generate(target, prompt, config), tok, prompt)
    spec = collect(speculative_generate(target, ModelDrafter(draft.model, "d"), prompt, config), tok, prompt)
    assert spec.token_ids == base.token_ids and len(base.token_ids) == 16
    for event in spec.events[1:]:
        committed = prompt_len + event.num_generated - len(event.emitted_ids)
        assert committed + len(event.draft_ids) <= DRAFT_POSITIONS + 1 or not event.draft_ids
    assert (prompt_len >= DRAFT_POSITIONS) == (not any(e.draft_ids for e in spec.events))


# ------------------------------------------------------------------------------ the probabilities shown for accepted

HOVER = re.compile(r'data-kind="accepted"[^>]*data-id="(\d+)" title="[^"]*?target p = ([0-9.]+) · draft q = ([0-9.]+)')


def _teacher_forced_probs(target, prompt: list[int], output: list[int], sampling: SamplingConfig) -> torch.Tensor:
    """(len(output), V) the target's processed distribution at every output position, from one forward over the
    final ids (no cache, no chunks)."""
    from specviz.core.verify import process_logits, restrict_vocab

    with torch.inference_mode():
        logits = target.model(torch.tensor([prompt + output]), use_cache=False).logits[0].float()
    rows = restrict_vocab(logits[len(prompt) - 1:-1], target.num_token_ids)
    return process_logits(rows, sampling)


@pytest.mark.parametrize("drafter_kind, temperature", [("draft model", 0.0), ("draft model", 0.8),
                                                       ("n-gram", 0.0), ("lookahead", 0.0)])
def test_accepted_tokens_show_the_targets_probability(tiny_target, tiny_draft, drafter_kind, temperature):
    from app.render import Pane

    tok = tiny_target.tokenizer
    prompt = tok.encode(SENTENCE + " " + SENTENCE, add_special_tokens=False)
    sampling = SamplingConfig(temperature=temperature, seed=4)
    config = GenerationConfig(max_new_tokens=40, k=4, sampling=sampling)
    drafter = {"draft model": ModelDrafter(tiny_draft.model, "d"), "n-gram": NgramDrafter(),
               "lookahead": LookaheadDrafter()}[drafter_kind]
    run = collect(speculative_generate(tiny_target, drafter, prompt, config), tok, prompt)
    output = list(run.token_ids)
    probs = _teacher_forced_probs(tiny_target, prompt, output, sampling)
    shown, at = [], 0  # (output position, token, the p the event carries) of every accepted token
    for event in run.events:
        for i in range(min(event.committed_accepted, len(event.emitted_ids))):
            assert event.emitted_ids[i] == event.draft_ids[i]
            shown.append((at + i, event.draft_ids[i], event.details[i].target_prob, event.details[i].draft_prob))
        at += len(event.emitted_ids)
    assert len(shown) >= (3 if drafter_kind == "draft model" else 1), drafter_kind
    for position, token, p, q in shown:
        assert p == pytest.approx(float(probs[position, token]), abs=2e-4), (position, token)
        assert 0.0 < p < 1.0 - 1e-6  # neither 1.0 (a one-hot q shown as p) nor 0
        if drafter_kind != "draft model":
            assert q == 1.0  # a deterministic drafter's q is one-hot: p must not be it
    pane = Pane(tok)
    for event in run.events:
        pane.add(event)
    hovers = HOVER.findall(pane.html())
    assert [int(token) for token, _, _ in hovers] == [token for _, token, _, _ in shown]
    for (position, token, p, _), (_, p_text, _) in zip(shown, hovers):
        assert float(p_text) == pytest.approx(float(probs[position, token]), abs=5e-4 + 2e-4)


# --------------------------------------------------------------------------- EOS in copied text; a doubled BOS


def test_an_eos_copied_from_the_prompt_ends_the_answer(embedded):
    """The conversation already holds the answer and its end of turn: n-gram and suffix lookup copy the answer, the
    <|im_end|> and the next turn's start; the target accepts past the <|im_end|>, and the run still ends at it, as
    standard decoding does, counting nothing after it."""
    from specviz.drafters.suffix import SuffixDrafter
    from specviz.measure.run_stats import RunStats
    from specviz.runtime.models import encode_turns

    tok = embedded.tokenizer
    ask = "Repeat exactly: The sky is blue."
    ids = encode_turns(tok, [("user", ask), ("assistant", "The sky is blue."), ("user", ask)])
    assert embedded.eos_token_ids[0] in ids[:-3]
    config = GenerationConfig(max_new_tokens=12, k=8)
    base = collect(standard_generate(embedded, ids, config), tok, ids)
    for drafter in (NgramDrafter(), SuffixDrafter()):
        spec = collect(speculative_generate(embedded, drafter, ids, config), tok, ids)
        assert spec.token_ids == base.token_ids and spec.finish_reason == base.finish_reason == "eos"
        assert spec.token_ids[-1] in embedded.eos_token_ids and spec.text == base.text == "The sky is blue."
        last = spec.events[-1]
        end = last.draft_ids.index(spec.token_ids[-1])
        assert last.num_accepted > end + 1  # the verifier accepted drafts after the copied EOS ...
        assert last.committed_accepted == end + 1 == len(last.emitted_ids)  # ... and none of them was kept
        stats = RunStats()
        for event in spec.events:
            stats.add(event)
        assert stats.accepted == sum(e.committed_accepted for e in spec.events) == len(spec.token_ids) - stats.passes


def test_a_chat_template_that_writes_the_bos_the_tokenizer_adds_gives_one_bos():
    from tokenizers import processors

    from specviz.runtime.models import encode_prompt, encode_turns, fit_prompt

    tok = build_tokenizer(CORPUS, 400, [EOS, "<s>", "<|user|>", "<|assistant|>"])
    bos = tok.convert_tokens_to_ids("<s>")
    tok.bos_token = "<s>"
    tok._tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    assert tok("hello")["input_ids"][0] == bos  # the tokenizer adds a BOS itself ...
    tok.chat_template = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}" + EOS
                         + "\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")  # ... as does this
    encodings = [encode_prompt(tok, "hello there"), encode_prompt(tok, "hello there", use_chat_template=False),
                 encode_turns(tok, [("user", "hi"), ("assistant", "yo"), ("user", "again")]),
                 encode_prompt(tok, "<s> typed as text <s>"), fit_prompt(tok, "hello there " * 50, 40).ids]
    for ids in encodings:
        assert ids[0] == bos and ids.count(bos) == 1, ids[:4]
