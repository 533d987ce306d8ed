"""Drafting with a draft model whose tokenizer differs from the target's: the drafted *text* is re-tokenized.

Token ids of two vocabularies cannot be compared, but the text they spell can. This is the idea of "universal
assisted generation" (Hugging Face and Intel Labs, 2024; Timor et al. 2025, "Accelerating LLM Inference with
Lossless Speculative Decoding Algorithms for Heterogeneous Vocabularies"), written here for this engine. Each pass:

1 sync          the committed target ids are decoded to text incrementally (:class:`CommittedText`) and the text is
                encoded in the draft's vocabulary (:class:`DraftHistory`): a prefix of the draft's ids is *settled*
                (kept for good, with its KV cache), and only the last :data:`TAIL_TOKENS` draft tokens' text and what
                follows is re-encoded, so token boundaries near the end can still move as text arrives; the draft's
                cache is rolled back to the first id that changed.
2 draft         the draft model drafts greedily in its own vocabulary: about (k + 1) target tokens' worth of its own
                tokens (scaled by how many draft tokens a target token takes in this text), stopping early at its EOS
                or any of its special tokens.
3 re-tokenize   the drafted text is encoded with the target's tokenizer after the committed text's last target ids
                (:func:`retokenize`), so a leading space or a merge at the boundary comes out as the target writes
                it; the last target token is dropped unless the draft ended (more text could still merge into it);
                at most k remain. :func:`split_marks` flags the target tokens that do not coincide with one draft
                token (the two tokenizers split the text differently there).
4 verify        the engine verifies them as a deterministic (one-hot) draft: ``Draft.draft_probs`` is None, so the
                greedy output is the target's own and a sampled output follows the target's distribution exactly
                (with q one-hot on x, x is accepted with probability p(x), else the next token is drawn from p
                without x: p again).

Why greedy drafting also when sampling: with a one-hot draft, a drafted x is accepted with probability
p_target(x), so the draft's most likely token is its best guess and a sampled one would be accepted less often. The
run's logits processors (penalties, bans, biases) are defined on target ids, so the draft ignores them; the target's
verification applies them. Exactness never rests on the re-tokenization: any target ids verified as one-hot drafts
leave the greedy output and the sampled distribution unchanged; a poor re-tokenization only lowers acceptance.
"""

from __future__ import annotations

import math

import torch

from specviz.core.drafting import Draft, DraftContext, DrafterBase
from specviz.core.kv import cache_length, forward_chunked, forward_logits, new_cache, rollback_cache
from specviz.core.verify import restrict_vocab
from specviz.runtime.models import VocabularyMismatchError, context_window, encode_text, token_id_count

TAIL_TOKENS = 8  # draft tokens at the end of the committed text that are re-encoded every pass
CONTEXT_TOKENS = 4  # committed target ids the drafted text is re-tokenized after
DECODE_CONTEXT = 6  # ids of context when decoding new ids (a UTF-8 character spans at most 4 byte tokens)
_PARTIAL = "\ufffd"  # what a decoder writes for bytes that do not complete a character yet
_PROBE = "Hello world, 42 apples."


def _decode(tokenizer, ids: list[int]) -> str:
    """Text of ``ids``, special tokens written out, no clean-up of spaces (so decoding is additive)."""
    if not ids:
        return ""
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _encode(tokenizer, text: str) -> list[int]:
    """Ids of ``text`` without the tokenizer's framing; control tokens written in it (e.g. a chat template's, as the
    committed text spells them) become their ids again, unlike :func:`specviz.runtime.models.encode_text` (user input)."""
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]] if text else []


def _added_text(tokenizer, context: list[int], ids: list[int]) -> str | None:
    """The text ``ids`` add after ``context`` (None when decoding them after it rewrites the context's text)."""
    base = _decode(tokenizer, context)
    full = _decode(tokenizer, list(context) + list(ids))
    return full[len(base):] if full.startswith(base) else None


def continuation_ends(tokenizer, context: list[int], ids: list[int]) -> tuple[str, list[int]]:
    """The text ``ids`` add after ``context`` and, per id, the character offset in that text where it ends.

    A trailing incomplete character (U+FFFD) is cut from the text and the offsets are clamped to it. Costs one
    decode per id (of at most len(context) + len(ids) ids).
    """
    base = _decode(tokenizer, context)
    text, ends = "", []
    for i in range(len(ids)):
        full = _decode(tokenizer, list(context) + list(ids[: i + 1]))
        text = full[len(base):] if full.startswith(base) else _decode(tokenizer, ids[: i + 1])
        ends.append(len(text))
    text = text.rstrip(_PARTIAL)
    return text, [min(end, len(text)) for end in ends]


def split_marks(target_ends: list[int], draft_ends: list[int]) -> tuple[bool, ...]:
    """Per target token, True where it does not coincide with exactly one draft token.

    Args:
        target_ends: the character offsets where each target token ends, in order, in a text starting at 0.
        draft_ends: the same for the draft's tokens of that text.
    """
    cuts = set(draft_ends) | {0}
    marks, start = [], 0
    for end in target_ends:
        same = start in cuts and end in cuts and not any(start < cut < end for cut in cuts)
        marks.append(not same)
        start = end
    return tuple(marks)


def retokenize(tokenizer, context_ids: list[int], new_text: str, *, complete: bool) -> list[int]:
    """Target ids that write ``new_text`` after ``context_ids`` (the committed sequence's last few ids).

    ``context text + new_text`` is encoded as one string and the ids after the context's own ids are kept, so a
    leading space or a merge at the boundary comes out as the tokenizer writes it. The context is shortened from its
    start until its ids come back first (a tokenizer that writes a word-start space differently at the start of a
    text, e.g. SentencePiece's, matches from a word boundary). When none does (the new text merges into the
    context's last token), ``new_text`` is encoded alone, and kept only if the context's ids followed by it decode to
    exactly the joined text. Unless ``complete`` (the draft ended), the last id is dropped: text after the drafted
    text could still merge into it.

    Returns:
        The ids (possibly empty). Control tokens written in the text become their ids.
    """
    if not new_text:
        return []
    context_ids = [int(i) for i in context_ids]
    for start in range(len(context_ids)):
        context = context_ids[start:]
        joined = _encode(tokenizer, _decode(tokenizer, context) + new_text)
        if joined[: len(context)] == context:
            ids = joined[len(context):]
            break
    else:
        ids = _encode(tokenizer, new_text)
        if _decode(tokenizer, context_ids + ids) != _decode(tokenizer, context_ids) + new_text:
            return []
    return ids if complete else ids[:-1]


def _framing_head(tokenizer) -> list[int]:
    """The ids the tokenizer puts before a text when it adds its special tokens (e.g. [bos]), else []."""
    bare = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    full = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    for start in range(len(full) - len(bare) + 1):
        if full[start:start + len(bare)] == bare:
            return [int(i) for i in full[:start]]
    return []


def _control_ids(tokenizer) -> frozenset[int]:
    """Ids of the tokenizer's control tokens (special added tokens, e.g. a chat template's turn markers, and its
    BOS / EOS / pad)."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids = {int(i) for i, token in added.items() if getattr(token, "special", False)}
    return frozenset(ids | {int(i) for i in (getattr(tokenizer, "all_special_ids", None) or ())})


class CommittedText:
    """The text of a growing sequence of target ids, decoded incrementally: new ids are decoded after
    :data:`DECODE_CONTEXT` ids of context, so the cost per pass does not grow with the text. ``controls`` lists the
    character spans (start, end) of the text written by control ids (a chat template's markers): only those are
    control tokens for the draft; the same characters typed by the user came as plain pieces and stay text."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.text = ""
        self.controls: list[tuple[int, int]] = []
        self._control_ids = _control_ids(tokenizer)
        self._ids: list[int] = []  # the ids whose text is in ``text``

    def update(self, ids: list[int]) -> bool:
        """Bring ``text`` up to ``ids`` (a sequence that extends the previous one; any other starts over).

        Returns False, leaving the text as it was, while the last ids end inside a character (U+FFFD): the next
        ids complete it. After 4 such ids the text is taken as it is (a decoder that writes U+FFFD for good).
        """
        read = len(self._ids)
        if list(ids[:read]) != self._ids:
            self.text, self.controls, self._ids, read = "", [], [], 0
        if read == len(ids):
            return True
        start = max(0, read - DECODE_CONTEXT)
        before = _decode(self.tokenizer, self._ids[start:])
        after = _decode(self.tokenizer, list(ids[start:]))
        if after.endswith(_PARTIAL) and len(ids) - read < 4:
            return False
        if after.startswith(before):
            self.text += after[len(before):]
        else:  # the decoder wrote the context differently with the new ids after it: decode everything
            self.text = _decode(self.tokenizer, list(ids))
        for j in range(read, len(ids)):
            if int(ids[j]) in self._control_ids:  # where its text starts: the decoding is additive
                begin = len(_decode(self.tokenizer, list(ids[:j])))
                self.controls.append((begin, begin + len(_decode(self.tokenizer, [int(ids[j])]))))
        self._ids = [int(i) for i in ids]
        return True


def _encode_marked(tokenizer, text: str, offset: int, controls: list[tuple[int, int]]) -> list[int]:
    """Ids of ``text`` (which starts at ``offset`` in the committed text): the spans in ``controls`` are encoded as
    control tokens, the rest as plain text (a control token typed by the user stays text:
    :func:`specviz.runtime.models.encode_text`)."""
    ids, at = [], 0
    for begin, end in controls:
        begin, end = begin - offset, end - offset
        if end <= at or begin >= len(text):
            continue
        ids += _plain(tokenizer, text[at:max(at, begin)]) if begin > at else []
        ids += _encode(tokenizer, text[max(at, begin):end])
        at = end
    return ids + (_plain(tokenizer, text[at:]) if at < len(text) else [])


def _plain(tokenizer, text: str) -> list[int]:
    """Ids of ``text`` as plain text; where the draft's tokenizer cannot keep a typed control token as text, as it
    encodes it (the draft then reads a control token there: only its guesses suffer, never the output)."""
    try:
        return encode_text(tokenizer, text)
    except ValueError:
        return _encode(tokenizer, text)


class DraftHistory:
    """The draft's token ids for the committed text: settled ids (never re-encoded) + the encoding of the rest.

    Each call re-encodes only the text after the settled part; once that gives more than :data:`TAIL_TOKENS` ids,
    the ones before the last :data:`TAIL_TOKENS` are settled (when their decoded text is exactly the start of the
    rest, so the settled ids always spell a prefix of the text). The tokenizer's own framing (e.g. BOS) comes first.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.head = _framing_head(tokenizer)
        self._ids: list[int] = []  # settled ids
        self._text = ""  # the text they spell

    def ids_for(self, text: str, controls: list[tuple[int, int]] = ()) -> list[int]:
        """The draft's ids for ``text`` (which extends earlier calls' text; any other text starts over); the
        character spans ``controls`` of ``text`` are control tokens, the rest is plain text
        (:attr:`CommittedText.controls`)."""
        if not text.startswith(self._text):
            self._ids, self._text = [], ""
        rest = text[len(self._text):]
        tail = _encode_marked(self.tokenizer, rest, len(self._text), list(controls))
        ids = self._ids + tail
        extra = len(tail) - TAIL_TOKENS
        if extra > 0:
            piece = _added_text(self.tokenizer, self._ids[-DECODE_CONTEXT:], tail[:extra])
            if piece and rest.startswith(piece) and _PARTIAL not in piece:
                self._ids, self._text = self._ids + tail[:extra], self._text + piece
        return ids if ids[: len(self.head)] == self.head else self.head + ids


class CrossTokenizerDrafter(DrafterBase):
    """A draft model with its own tokenizer: drafts text in its vocabulary, proposes the text's target tokens as a
    one-hot draft (see the module docstring for the four steps).

    Args:
        model: the draft causal LM (its ids are ``draft_tokenizer``'s).
        draft_tokenizer / target_tokenizer: the two tokenizers (each must write text back from its ids; see
            :func:`check_round_trip`).
        name: label shown in the UI and CLI.
        stop_ids: draft ids that end the drafted text (its EOS ids); every special token of ``draft_tokenizer``
            ends it too.

    Cost per pass: the draft model's forwards (one per draft token, plus one to catch up with the committed text)
    and a few tokenizer calls on short strings (the committed text is decoded and encoded incrementally).
    ``Draft.token_probs`` are 1.0 (one-hot), ``Draft.source`` is "retokenized" and ``Draft.resplit`` flags the
    target tokens that do not coincide with one draft token. ``window`` is the draft model's context window in
    *its own* tokens (None when its config states none); drafting stops where the draft's text outgrows it.
    """

    needs_hidden = False

    def __init__(self, model: torch.nn.Module, draft_tokenizer, target_tokenizer, name: str, *,
                 stop_ids: tuple[int, ...] = ()) -> None:
        self.model = model
        self.name = name
        self.draft_tokenizer = draft_tokenizer
        self.target_tokenizer = target_tokenizer
        self.window = context_window(model)
        self._vocab = token_id_count(draft_tokenizer)
        special = getattr(draft_tokenizer, "all_special_ids", None) or ()
        self._stop = frozenset(int(i) for i in (*stop_ids, *special))
        self.note = ("The draft model uses another tokenizer than the target: it drafts text in its own vocabulary, "
                     "the text is re-tokenized for the target, and the target verifies those tokens as one-hot "
                     "drafts (greedy output unchanged, sampling exact).")
        self.reset([])

    def reset(self, prompt_ids: list[int]) -> None:
        """Start a new run: an empty cache and text (the prompt is read by the first ``propose``)."""
        self._cache = new_cache(self.model)
        self._fed: list[int] = []  # draft ids whose keys/values are in the cache, in order
        self._text = CommittedText(self.target_tokenizer)
        self._history = DraftHistory(self.draft_tokenizer)
        self._synced: tuple[int, list[int] | None] = (-1, None)  # (committed length, the draft's ids for it)

    @property
    def cache_len(self) -> int:
        """Positions in the draft model's KV cache (draft tokens)."""
        return cache_length(self._cache)

    def _draft_ids(self, committed_ids: list[int]) -> list[int] | None:
        """The draft's ids for the committed text (None while the committed ids end inside a character)."""
        if self._synced[0] != len(committed_ids):
            ids = self._history.ids_for(self._text.text, self._text.controls) \
                if self._text.update(committed_ids) else None
            self._synced = (len(committed_ids), ids)
        return self._synced[1]

    def _roll_back(self, history: list[int]) -> int:
        """Keep the cached prefix that ``history`` still starts with (at most all but its last id); returns its
        length."""
        keep, limit = 0, min(len(self._fed), len(history) - 1)
        while keep < limit and self._fed[keep] == history[keep]:
            keep += 1
        rollback_cache(self._cache, keep)
        del self._fed[keep:]
        return keep

    def propose(self, ctx: DraftContext) -> Draft:
        """Up to ``ctx.k`` target tokens re-tokenized from the draft's greedy text (none while the committed ids end
        inside a character, or once the draft's window is full)."""
        history = self._draft_ids(ctx.committed_ids)
        if not history:
            return Draft([])
        ratio = min(4.0, max(0.25, len(history) / max(1, len(ctx.committed_ids))))  # draft tokens per target token
        budget = math.ceil((ctx.k + 1) * ratio)
        if self.window is not None:
            budget = min(budget, self.window + 1 - len(history))
        if budget < 1:
            return Draft([])
        keep = self._roll_back(history)
        logits = forward_chunked(self.model, history[keep:], self._cache, 1, cancel=ctx.cancel)[0][-1]
        self._fed.extend(history[keep:])
        drafted, ended = self._greedy(logits, budget)
        return self._retokenized(ctx, history, drafted, ended)

    def _greedy(self, logits: torch.Tensor, budget: int) -> tuple[list[int], bool]:
        """Up to ``budget`` greedy draft tokens from (V,) ``logits`` (all but the last fed to the cache); True when a
        stop id ended them."""
        drafted: list[int] = []
        while len(drafted) < budget:
            if drafted:
                logits = forward_logits(self.model, [drafted[-1]], self._cache, 1)[-1]
                self._fed.append(drafted[-1])
            token = int(restrict_vocab(logits, self._vocab).argmax())
            if token in self._stop:
                return drafted, True
            drafted.append(token)
        return drafted, False

    def _retokenized(self, ctx: DraftContext, history: list[int], drafted: list[int], ended: bool) -> Draft:
        """The target's tokens for the drafted text (at most k, ids below ``ctx.vocab_size``), with split marks."""
        text, draft_ends = continuation_ends(self.draft_tokenizer, history[-DECODE_CONTEXT:], drafted)
        complete = ended and len(text) == (draft_ends[-1] if draft_ends else 0)
        context = list(ctx.committed_ids[-CONTEXT_TOKENS:])
        ids = retokenize(self.target_tokenizer, context, text, complete=complete)[: ctx.k]
        if ctx.vocab_size is not None:
            ids = ids[: next((i for i, t in enumerate(ids) if not 0 <= t < ctx.vocab_size), len(ids))]
        if not ids:
            return Draft([])
        _, target_ends = continuation_ends(self.target_tokenizer, context, ids)
        return Draft(ids, [1.0] * len(ids), None, source="retokenized",
                     resplit=split_marks(target_ends, draft_ends))

    def commit(self, committed_ids: list[int], num_accepted: int) -> None:
        """Roll the cache back to the draft ids the new committed text still starts with."""
        history = self._draft_ids(committed_ids)
        if history:
            self._roll_back(history)


def check_round_trip(tokenizer, label: str) -> None:
    """Raise VocabularyMismatchError (one sentence naming ``label``) unless ``tokenizer`` writes a plain sentence
    back from its own ids: without that, text cannot pass from one vocabulary to the other."""
    try:
        back = _decode(tokenizer, _encode(tokenizer, _PROBE))
    except Exception as error:  # noqa: BLE001 - any failure means the same thing to the user
        back = f"<{type(error).__name__}>"
    if _PROBE not in back:
        raise VocabularyMismatchError(
            f"The tokenizer of {label} does not write text back from its tokens ({_PROBE!r} came back as "
            f"{back[:60]!r}), so drafts cannot be re-tokenized between it and the other model's tokenizer.")


def cross_tokenizer_drafter(target, draft) -> CrossTokenizerDrafter:
    """A :class:`CrossTokenizerDrafter` for two :class:`specviz.runtime.models.LoadedModel` s whose tokenizers differ.

    Raises:
        VocabularyMismatchError: either tokenizer cannot write text back from its ids (:func:`check_round_trip`).
    """
    check_round_trip(draft.tokenizer, f"the draft {draft.label}")
    check_round_trip(target.tokenizer, f"the target {target.label}")
    return CrossTokenizerDrafter(draft.model, draft.tokenizer, target.tokenizer,
                                 f"draft model {draft.label} (re-tokenized)", stop_ids=tuple(draft.eos_token_ids))
