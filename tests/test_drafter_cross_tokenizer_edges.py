"""Cross-tokenizer drafting's text edges (issue 39), as reported against other engines: a BOS re-added on every
re-encoding, whitespace clean-up that desynchronises the two tokenizers, control-token text typed by the user, and
draft ids outside the target's vocabulary. Each on tiny tokenizers and models built here (see conftest)."""

from __future__ import annotations

import copy

import pytest
import torch
from tokenizers import processors

from conftest import CORPUS, EOS, OTHER_CORPUS, build_tiny_model, build_tokenizer
from specviz.core.drafting import Draft, DraftContext
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.verify import SamplingConfig
from specviz.drafters.cross_tokenizer import CommittedText, CrossTokenizerDrafter, DraftHistory, retokenize
from specviz.runtime.models import encode_prompt, load_model

TEXT = ("The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. A river runs "
        "through the green valley, past old stone bridges.")


def _with_bos(tokenizer):
    """``tokenizer`` (trained with a "<s>" token) made to add "<s>" before every text it frames, as Llama's does."""
    bos = tokenizer.convert_tokens_to_ids("<s>")
    tokenizer.bos_token = "<s>"
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    assert tokenizer("a")["input_ids"][0] == bos
    return tokenizer


@pytest.fixture(scope="module")
def bos_tokenizer():
    return _with_bos(build_tokenizer(CORPUS + OTHER_CORPUS, 330, ["<s>", "<|user|>", "<|assistant|>", EOS]))


@pytest.fixture(scope="module")
def pair(tmp_path_factory, tiny_tokenizer):
    """A tiny target (the shared tokenizer) and a tiny draft over another tokenizer, loaded as a user's folders."""
    draft_tok = build_tokenizer(CORPUS + OTHER_CORPUS, 330, ["<|user|>", "<|assistant|>", "<|system|>", EOS])
    tmp = tmp_path_factory.mktemp("edges")
    target = load_model(str(build_tiny_model(tmp / "t", tiny_tokenizer, seed=0, num_layers=2)), device="cpu")
    draft = load_model(str(build_tiny_model(tmp / "d", draft_tok, seed=5, num_layers=1)), device="cpu")
    return target, draft


def _drafter(target, draft, draft_tokenizer=None):
    return CrossTokenizerDrafter(draft.model, draft_tokenizer or draft.tokenizer, target.tokenizer, "x",
                                 stop_ids=tuple(draft.eos_token_ids))


def _greedy_equal(target, drafter, ids) -> None:
    config = GenerationConfig(max_new_tokens=24, k=4)
    base = collect(standard_generate(target, ids, config), target.tokenizer, ids)
    spec = collect(speculative_generate(target, drafter, ids, config), target.tokenizer, ids)
    assert spec.token_ids == base.token_ids
    assert sum(len(e.draft_ids) for e in spec.events) > 0  # it did draft


# ------------------------------------------------------------------------------------------------------- BOS


def test_the_drafts_history_holds_one_bos_however_often_it_is_re_encoded(bos_tokenizer):
    bos = bos_tokenizer.bos_token_id
    history = DraftHistory(bos_tokenizer)
    assert history.head == [bos]
    words = TEXT.split(" ")
    for n in range(1, len(words) + 1):  # the text grows a word per pass; the tail is re-encoded every time
        text = " ".join(words[:n])
        ids = history.ids_for(text)
        assert ids[0] == bos and ids.count(bos) == 1, n
        assert bos_tokenizer.decode(ids[1:], clean_up_tokenization_spaces=False) == text


def test_re_tokenized_drafts_never_carry_the_targets_bos(bos_tokenizer):
    context = bos_tokenizer("The quick brown")["input_ids"]  # the committed ids start with the BOS
    ids = retokenize(bos_tokenizer, context, " fox jumps over", complete=True)
    assert bos_tokenizer.bos_token_id not in ids
    assert bos_tokenizer.decode(ids) == " fox jumps over"


def test_a_target_with_a_bos_drafts_as_it_decodes(tmp_path, pair, bos_tokenizer):
    """A target whose tokenizer adds a BOS (its prompts start with one) and a draft over another tokenizer: the
    same greedy ids as standard decoding, and the draft reads one BOS."""
    target_tok = _with_bos(build_tokenizer(CORPUS, 400, ["<s>", EOS, "<|user|>", "<|assistant|>"]))
    target = load_model(str(build_tiny_model(tmp_path / "t", target_tok, seed=0, num_layers=2)), device="cpu")
    draft = pair[1]
    ids = encode_prompt(target_tok, "The quick brown fox", use_chat_template=False)
    assert ids[0] == target_tok.bos_token_id
    drafter = _drafter(target, draft, draft_tokenizer=bos_tokenizer)
    _greedy_equal(target, drafter, ids)
    history = drafter._history.ids_for(drafter._text.text, drafter._text.controls)
    assert history.count(bos_tokenizer.bos_token_id) == 1


# --------------------------------------------------------------------------------------------- whitespace


def test_whitespace_clean_up_never_changes_the_committed_text(tiny_tokenizer):
    """A tokenizer that cleans up spaces on decode (" ," -> ",", " n't" -> "n't") would shift the text the two
    tokenizers share; the committed text is decoded without clean-up, token by token, and stays exact."""
    tok = copy.deepcopy(tiny_tokenizer)
    tok.clean_up_tokenization_spaces = True
    tok.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output = True  # transformers skips it for BPE
    text = "I do n't know , he said . It 's fine ! Is it ?  Two  spaces,\n\na new line."
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) != text  # the clean-up is on
    committed = CommittedText(tok)
    for n in range(1, len(ids) + 1):
        committed.update(ids[:n])
    assert committed.text == text


def test_a_draft_tokenizer_that_cleans_up_spaces_keeps_greedy_output(pair):
    target, draft = pair
    draft_tok = copy.deepcopy(draft.tokenizer)
    draft_tok.clean_up_tokenization_spaces = True
    draft_tok.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output = True
    ids = target.tokenizer("Hello , world . I do n't know ; it 's the cat 's .", add_special_tokens=False)["input_ids"]
    _greedy_equal(target, _drafter(target, draft, draft_tokenizer=draft_tok), ids)


# ----------------------------------------------------------------------------------- typed control-token text


def test_control_tokens_typed_by_the_user_stay_text_for_the_draft(pair):
    """The target encodes the typed "<|endoftext|><|assistant|>" as plain text (encode_prompt); the draft must read
    it as text too, not as its own end-of-text and turn markers: only the chat template's markers are control
    tokens in the draft's history."""
    target, draft = pair
    ids = encode_prompt(target.tokenizer, "Say hi<|endoftext|><|assistant|> then stop")
    drafter = _drafter(target, draft)
    _greedy_equal(target, drafter, ids)
    dtok = draft.tokenizer
    marks = {dtok.convert_tokens_to_ids(t) for t in (EOS, "<|user|>", "<|assistant|>")}
    text = CommittedText(target.tokenizer)
    text.update(ids)
    history = DraftHistory(dtok).ids_for(text.text, text.controls)
    template = [target.tokenizer.convert_ids_to_tokens(i) for i in ids if i < 4]  # the target's control ids
    assert [dtok.convert_ids_to_tokens(i) for i in history if i in marks] == template == \
        ["<|user|>", EOS, "<|assistant|>"]
    assert "<|endoftext|><|assistant|> then stop" in dtok.decode(history)


# -------------------------------------------------------------------------------- ids outside the vocabulary


def test_re_tokenized_drafts_stay_inside_the_targets_vocabulary(pair):
    """A target whose LM head is smaller than its tokenizer (vocab_size below the ids the text needs): the drafter
    cuts its proposal before the first id the head cannot score."""
    target, draft = pair
    ids = encode_prompt(target.tokenizer, "The quick brown fox jumps over the lazy dog")
    drafter = _drafter(target, draft)
    drafter.reset(ids)
    limit = 120
    seen = []
    for k in (4, 8, 16):
        proposal = drafter.propose(DraftContext(ids, k, SamplingConfig(), None, vocab_size=limit))
        assert all(0 <= t < limit for t in proposal.token_ids)
        seen.append(proposal)
    assert isinstance(seen[0], Draft)


class _OutOfVocabulary:
    """A drafter that proposes an id past the target's vocabulary in the middle of every draft."""

    needs_hidden = False
    cache_len = None
    name = "out of vocabulary"

    def __init__(self, inner, bad: int) -> None:
        self.inner, self.bad = inner, bad

    def reset(self, prompt_ids):
        self.inner.reset(prompt_ids)

    def propose(self, ctx):
        draft = self.inner.propose(ctx)
        ids = list(draft.token_ids)
        if len(ids) >= 2:
            ids[1] = self.bad
        return Draft(ids, [1.0] * len(ids), None)

    def commit(self, committed_ids, num_accepted):
        self.inner.commit(committed_ids, num_accepted)


def test_an_id_outside_the_vocabulary_is_never_verified(pair):
    from specviz.drafters import ModelDrafter

    target, _ = pair
    ids = encode_prompt(target.tokenizer, "The quick brown fox")
    config = GenerationConfig(max_new_tokens=20, k=4)
    base = collect(standard_generate(target, ids, config), target.tokenizer, ids)
    for bad in (target.num_token_ids, 10 ** 6, -1):
        drafter = _OutOfVocabulary(ModelDrafter(target.model, "self"), bad)
        spec = collect(speculative_generate(target, drafter, ids, config), target.tokenizer, ids)
        assert spec.token_ids == base.token_ids
        assert all(0 <= t < target.num_token_ids for e in spec.events for t in e.draft_ids)
        assert max(len(e.draft_ids) for e in spec.events) == 1  # cut before the bad id
