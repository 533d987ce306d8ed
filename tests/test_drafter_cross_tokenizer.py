"""Cross-tokenizer drafting (specviz.drafters.cross_tokenizer): a draft model whose tokenizer splits words differently
drafts text in its own vocabulary; the text is re-tokenized for the target and verified as a one-hot draft.

The pair: a tiny target over the shared tiny tokenizer whose embedding rows of non-printable tokens are zeroed (so
its greedy text is printable ASCII, as a real model's would be, not random bytes), and a tiny draft over a second
byte-level BPE tokenizer (another corpus and size: it splits most words differently, e.g. "The" as "T"+"he") that
memorized the target's greedy continuations of MEMO_PROMPTS. Both are saved with save_pretrained and loaded through
the loader a user's folder goes through. On the memorized prompts the drafts are mostly accepted (tokens per pass
near k + 1); on others almost never, so both the accepted and the rejected paths run.
"""

from __future__ import annotations

import pytest
import torch
from conftest import CORPUS, EOS, OTHER_CORPUS, build_tiny_model, build_tokenizer
from test_engine import _chi_square, _prompts
from torch_threads import torch_threads

from app.render import Pane
from specviz.cli import main
from specviz.core.drafting import DraftContext
from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
from specviz.core.events import PassEvent, PositionDetail, Timings
from specviz.core.verify import SamplingConfig
from specviz.drafters.cross_tokenizer import (TAIL_TOKENS, CommittedText, CrossTokenizerDrafter, DraftHistory,
                                              retokenize, split_marks)
from specviz.drafters.registry import make_drafter
from specviz.measure.run_stats import RunStats
from specviz.runtime.models import VocabularyMismatchError, encode_prompt, load_model

MEMO_PROMPTS = ("Tell me a story about a dragon.", "The quick brown fox", "What is the capital of France?")
OTHER_PROMPT = "Hello! How are you today?"
MEMO_TOKENS = 64  # new tokens of each memorized continuation


def _printable_only(folder, tokenizer) -> None:
    """Zero the (tied) embedding rows of every token that is not printable ASCII, EOS kept: their logits become 0
    while the others' spread far around it, so greedy text never picks them."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
    bad = [i for i in range(len(tokenizer)) if i != tokenizer.eos_token_id
           and not (tokenizer.decode([i]).isascii() and tokenizer.decode([i]).isprintable())]
    with torch.no_grad():
        model.model.embed_tokens.weight[bad] = 0.0
    model.save_pretrained(folder)


def _memorize(folder, texts: list[str], tokenizer, steps: int = 200) -> None:
    """Train the draft in ``folder`` (full batch, Adam) until it repeats ``texts`` in its own vocabulary."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    with torch_threads(1):
        model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).train()
        rows = [torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"])[None] for text in texts]
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(steps):
            loss = sum(model(input_ids=row, labels=row).loss for row in rows) / len(rows)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if loss.item() < 0.02:
                break
    model.eval().save_pretrained(folder)


@pytest.fixture(scope="module")
def draft_tokenizer():
    """A second byte-level BPE: another corpus, 330 tokens, special tokens in another order (other ids)."""
    return build_tokenizer(CORPUS + OTHER_CORPUS, 330, ["<|user|>", "<|assistant|>", "<|system|>", EOS])


@pytest.fixture(scope="module")
def clean_target(tmp_path_factory, tiny_tokenizer):
    folder = build_tiny_model(tmp_path_factory.mktemp("cross-target"), tiny_tokenizer, seed=0, num_layers=4)
    _printable_only(folder, tiny_tokenizer)
    return load_model(str(folder), device="cpu")


@pytest.fixture(scope="module")
def memo_draft_dir(tmp_path_factory, clean_target, draft_tokenizer):
    """Folder of the draft that memorized the target's greedy continuation of each of MEMO_PROMPTS."""
    texts = []
    for prompt in MEMO_PROMPTS:
        ids = encode_prompt(clean_target.tokenizer, prompt)
        run = collect(standard_generate(clean_target, ids, GenerationConfig(max_new_tokens=MEMO_TOKENS)),
                      clean_target.tokenizer, ids)
        texts.append(clean_target.tokenizer.decode(ids + list(run.token_ids), skip_special_tokens=False))
    folder = build_tiny_model(tmp_path_factory.mktemp("cross-draft"), draft_tokenizer, seed=5, num_layers=2)
    _memorize(folder, texts, draft_tokenizer)
    return folder


@pytest.fixture(scope="module")
def memo_draft(memo_draft_dir):
    return load_model(str(memo_draft_dir), device="cpu")


def _run(target, ids, cfg, drafter=None):
    events = standard_generate(target, ids, cfg) if drafter is None else \
        speculative_generate(target, drafter, ids, cfg)
    return collect(events, target.tokenizer, ids)


def _stats(run) -> RunStats:
    stats = RunStats()
    for event in run.events:
        stats.add(event)
    return stats


# ------------------------------------------------------------------------------------------ the pieces, by hand


def test_retokenize_keeps_the_boundary_as_the_target_writes_it(tiny_tokenizer):
    tok = tiny_tokenizer
    context = tok.encode("The cat sat on", add_special_tokens=False)
    # a leading space after the committed text: " the" is one token, as in the whole sentence
    ids = retokenize(tok, context, " the mat and", complete=False)
    assert tok.convert_ids_to_tokens(ids) == ["Ġthe", "Ġm", "at"]  # " and" dropped: more text could merge into it
    whole = tok.encode("The cat sat on the mat and", add_special_tokens=False)
    assert context + retokenize(tok, context, " the mat and", complete=True) == whole
    # the drafted text merges into the committed text's last token ("Ġth" + "e" is "Ġthe"): encoded on its own
    context = tok.encode("sat on th", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(context)[-1] == "Ġth"
    ids = retokenize(tok, context, "e cat sat", complete=True)
    assert tok.convert_ids_to_tokens(ids) == ["e", "Ġc", "at", "Ġs", "at"]
    assert tok.decode(context + ids) == "sat on the cat sat"
    # control tokens written in the text come back as their ids; no text, no ids
    ids = retokenize(tok, [], "hi<|endoftext|>", complete=True)
    assert ids[-1] == tok.eos_token_id
    assert retokenize(tok, context, "", complete=True) == []


def test_retokenize_with_a_sentencepiece_style_tokenizer():
    """A Metaspace tokenizer (SentencePiece style: "▁" marks a word start, and decoding drops a text's first one):
    after any cut of a sentence, the re-tokenized rest is exactly the sentence's own ids; the draft's history spells
    a longer text back and settles most of it."""
    from tokenizers import SentencePieceBPETokenizer
    from transformers import PreTrainedTokenizerFast

    backend = SentencePieceBPETokenizer()
    backend.train_from_iterator(CORPUS.splitlines(), vocab_size=400, special_tokens=["<unk>", "</s>"],
                                show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend._tokenizer, unk_token="<unk>", eos_token="</s>")
    full = tok.encode("The cat sat on the mat and the dog", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(full)[:4] == ["▁The", "▁cat", "▁s", "at"]
    text = tok.decode(full)
    for cut in range(1, len(full)):
        rest = text[len(tok.decode(full[:cut])):]
        assert retokenize(tok, full[max(0, cut - 4):cut], rest, complete=True) == full[cut:], cut
    history = DraftHistory(tok)
    longer = text + " sat on the log while the cat sleeps in the warm sun"
    assert tok.decode(history.ids_for(longer)) == longer and len(history._ids) > 0


def test_split_marks_flag_tokens_that_do_not_match_one_draft_token():
    # "Thecat": target "The"|"cat", draft "T"|"he"|"cat" -> the first is split differently, the second is the same
    assert split_marks([3, 6], [1, 3, 6]) == (True, False)
    # target " quick" covers the draft's " qu"+"ick"; target "ly" lies inside the draft's "lyX"
    assert split_marks([6, 8], [3, 6, 9]) == (True, True)
    assert split_marks([2, 4], [2, 4]) == (False, False)
    assert split_marks([], [1]) == ()


def test_committed_text_waits_for_a_whole_character(tiny_tokenizer):
    ids = tiny_tokenizer.encode("a héllo wörld", add_special_tokens=False)
    text = CommittedText(tiny_tokenizer)
    complete = [text.update(ids[:n]) for n in range(1, len(ids) + 1)]
    assert text.text == "a héllo wörld"
    assert complete.count(False) == 2  # once inside "é" and once inside "ö" (two byte tokens each)
    assert not text.update(ids[:3])  # another sequence (a new run) starts over; it ends inside "é"
    assert text.update(ids[:2]) and text.text == "a h"


def test_draft_history_settles_a_prefix_and_always_spells_the_text(draft_tokenizer):
    words = "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun".split(" ")
    history = DraftHistory(draft_tokenizer)
    settled: list[int] = []
    for n in range(1, len(words) + 1):
        text = " ".join(words[:n])
        ids = history.ids_for(text)
        assert draft_tokenizer.decode(ids) == text
        assert ids[: len(settled)] == settled  # settled ids never change (their cache entries are kept)
        settled = list(history._ids)
        assert len(ids) - len(settled) <= TAIL_TOKENS + len(draft_tokenizer.encode(" " + words[n - 1]))
    assert len(settled) > 0


# ------------------------------------------------------------------------------------------ exactness


@pytest.mark.kernels  # 1-row steps vs (k+1)-row verification passes, as in test_engine
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_ids_equal_standard_decoding(clean_target, memo_draft_dir, k):
    for prompt in (*MEMO_PROMPTS, OTHER_PROMPT):
        ids = encode_prompt(clean_target.tokenizer, prompt)
        cfg = GenerationConfig(max_new_tokens=MEMO_TOKENS, k=k)
        drafter = make_drafter("model", clean_target, draft_spec=str(memo_draft_dir))  # the user's path
        assert isinstance(drafter, CrossTokenizerDrafter)
        base, spec = _run(clean_target, ids, cfg), _run(clean_target, ids, cfg, drafter)
        assert spec.token_ids == base.token_ids and spec.text == base.text, (prompt, k)
        assert spec.finish_reason == base.finish_reason
        stats = _stats(spec)
        drafted = [e for e in spec.events if e.draft_ids]
        assert drafted and all(e.draft_source == "retokenized" and len(e.resplit) == len(e.draft_ids)
                               and e.details and all(d.draft_prob == 1.0 for d in e.details) for e in drafted)
        if prompt in MEMO_PROMPTS:  # the draft knows this text: most drafts are accepted
            assert stats.tokens_per_pass > 0.75 * (k + 1), (prompt, k, stats.tokens_per_pass)
    marks = [m for e in spec.events for m in e.resplit]
    assert any(marks) and not all(marks)  # the two tokenizers split some tokens alike, some not


@pytest.mark.kernels  # 1-row steps vs (k+1)-row verification passes, as in test_engine
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_ids_equal_standard_decoding_with_random_bytes(tiny_target, tiny_other_vocab_dir, k):
    """The shared tiny target writes random bytes (many end inside a character): still identical."""
    for label, prompt in _prompts(tiny_target.tokenizer).items():
        cfg = GenerationConfig(max_new_tokens=30, k=k)
        drafter = make_drafter("model", tiny_target, draft_spec=str(tiny_other_vocab_dir))
        base, spec = _run(tiny_target, prompt, cfg), _run(tiny_target, prompt, cfg, drafter)
        assert spec.token_ids == base.token_ids, (label, k)


def test_the_target_drafting_itself_through_text_keeps_the_cache_in_step(clean_target):
    """With the target's own tokenizer and model as the draft (text canonical: re-encoding gives the committed ids
    back), the draft's cache ends every pass at committed - 1 positions and most drafts are accepted."""
    ids = encode_prompt(clean_target.tokenizer, OTHER_PROMPT)
    drafter = CrossTokenizerDrafter(clean_target.model, clean_target.tokenizer, clean_target.tokenizer, "self",
                                    stop_ids=clean_target.eos_token_ids)
    spec = _run(clean_target, ids, GenerationConfig(max_new_tokens=40, k=4), drafter)
    committed = len(ids)
    for event in spec.events:
        committed += len(event.emitted_ids)
        if event.index > 0 and event.finish_reason is None:
            assert event.draft_cache_len == committed - 1
    assert _stats(spec).acceptance_rate > 0.5


def test_proposal_is_one_hot_and_at_most_k(clean_target, memo_draft):
    drafter = CrossTokenizerDrafter(memo_draft.model, memo_draft.tokenizer, clean_target.tokenizer, "memo")
    ids = encode_prompt(clean_target.tokenizer, MEMO_PROMPTS[0])
    drafter.reset(ids)
    for k in (1, 3, 6):
        draft = drafter.propose(DraftContext(ids, k, SamplingConfig(), None, vocab_size=clean_target.vocab_size))
        assert 1 <= len(draft.token_ids) <= k and draft.draft_probs is None
        assert draft.token_probs == [1.0] * len(draft.token_ids) and len(draft.resplit) == len(draft.token_ids)
        drafter.commit(ids, 0)


@pytest.mark.parametrize("sampling_kwargs", [dict(temperature=1.0, top_k=50), dict(temperature=0.7, top_k=20, top_p=0.9)],
                         ids=["t1-k50", "t0.7-k20-p0.9"])
def test_sampling_follows_the_target_distribution(clean_target, memo_draft, sampling_kwargs):
    """The memorized draft: its drafts are often accepted. (Top-k keeps the clean target's zero-logit tokens out:
    their pairs fall below the helper's 1e-6 cut yet, thousands of them, add up to draws.)"""
    prompt = encode_prompt(clean_target.tokenizer, MEMO_PROMPTS[1])

    def drafter():
        return CrossTokenizerDrafter(memo_draft.model, memo_draft.tokenizer, clean_target.tokenizer, "memo",
                                     stop_ids=memo_draft.eos_token_ids)

    assert _chi_square(clean_target, drafter, sampling_kwargs, n=600, k=3, prompt=prompt) > 1e-3


def test_sampling_follows_the_target_distribution_with_random_bytes(tiny_target, tiny_other_vocab_dir):
    """A random draft over another vocabulary and a target writing random bytes: mostly rejections."""
    draft = load_model(str(tiny_other_vocab_dir), device="cpu")

    def drafter():
        return CrossTokenizerDrafter(draft.model, draft.tokenizer, tiny_target.tokenizer, "random",
                                     stop_ids=draft.eos_token_ids)

    assert _chi_square(tiny_target, drafter, dict(temperature=1.0), n=600, k=3) > 1e-3


# ------------------------------------------------------------------------------------------ loading, UI, CLI


@pytest.fixture(scope="module")
def unreadable_draft_dir(tmp_path_factory):
    """A draft whose word-level tokenizer knows two words: everything else decodes as "[UNK]"."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, EOS: 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", eos_token=EOS)
    return build_tiny_model(tmp_path_factory.mktemp("unreadable"), tokenizer, seed=4, num_layers=1)


def test_a_tokenizer_that_cannot_write_text_back_is_refused(capsys, tiny_target, tiny_model_dir,
                                                            unreadable_draft_dir):
    with pytest.raises(VocabularyMismatchError, match="does not write text back"):
        make_drafter("model", tiny_target, draft_spec=str(unreadable_draft_dir))
    assert main(["generate", "--target", str(tiny_model_dir), "--prompt", "hi", "--drafter", "model",
                 "--draft-model", str(unreadable_draft_dir)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error:") and "write text back" in err and "Traceback" not in err


def test_the_live_pane_says_where_the_tokenizers_split_differently(tiny_tokenizer):
    event = PassEvent(run="speculative", index=1, kind="pass", k=3, draft_ids=(300, 301, 302),
                      accept_mask=(True, False, False), num_accepted=1, next_id=303, next_kind="recovered",
                      emitted_ids=(300, 303), details=tuple(PositionDetail(0.5, 1.0, None, 303, i <= 1)
                                                            for i in range(3)),
                      text_delta="", timings=Timings(), t_end_ms=1.0, num_generated=3,
                      draft_source="retokenized", resplit=(True, False, True))
    pane = Pane(tiny_tokenizer)
    pane.add(event)
    drafted = [t for t in pane.passes[0] if t.kind in ("accepted", "rejected")]
    assert [t.resplit for t in drafted] == [True, False, True]
    assert all("re-tokenized from the draft's vocabulary" in t.title for t in drafted)
    assert pane.html().count("tok-resplit") == 2
    assert "re-tokenized" not in pane.passes[0][-1].title  # the target's own (recovered) token


def test_the_arena_shows_the_note(tiny_target, tiny_other_vocab_dir):
    from specviz.analysis.arena import run_arena
    from specviz.analysis.arena_rows import to_json

    result = run_arena(tiny_target, [{"id": "fox", "prompt": "The quick brown fox"}], ["model"], [2],
                       GenerationConfig(max_new_tokens=6), draft_spec=str(tiny_other_vocab_dir), warmup_tokens=0)
    assert any("re-tokenized" in note for note in result.notes) and to_json(result)["notes"] == result.notes
    assert result.ids_identical is True


def test_a_draft_models_confidence_gate_reaches_it_and_a_retokenizing_draft_refuses_one(tiny_target, tiny_draft_dir,
                                                                                         tiny_other_vocab_dir):
    """The 'model' drafter takes the confidence gate (the Live tab's control, ``--confidence``): a draft model with
    the target's tokenizer drafts with it (None: 0, always k); one with another tokenizer has no gate, and a gate
    above 0 is one sentence, not a silently ignored setting."""
    assert make_drafter("model", tiny_target, draft_spec=str(tiny_draft_dir), min_confidence=0.3).min_confidence == 0.3
    assert make_drafter("model", tiny_target, draft_spec=str(tiny_draft_dir)).min_confidence == 0.0
    assert isinstance(make_drafter("model", tiny_target, draft_spec=str(tiny_other_vocab_dir), min_confidence=0.0),
                      CrossTokenizerDrafter)
    with pytest.raises(ValueError, match="The confidence gate needs a draft model with the target's tokenizer") as err:
        make_drafter("model", tiny_target, draft_spec=str(tiny_other_vocab_dir), min_confidence=0.2)
    assert "\n" not in str(err.value) and str(err.value).endswith("set the gate to 0.")
