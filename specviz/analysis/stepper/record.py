"""The record step mode replays: a finished run's events, each token's text, and at each rejection the top of the
target's, the draft's and the residual distribution; the phases a pass is stepped through and their labels."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Mapping

from specviz.core.events import PassEvent

PHASES = ("prefill", "draft", "verify", "decide", "emit")
"""Phases in step order; the prefill has only ``prefill``, a pass without a draft skips ``decide``."""

PHASE_LABELS = {
    "prefill": "prefill",
    "draft": "1 · draft",
    "verify": "2 · verify",
    "decide": "3 · accept / reject",
    "emit": "4 · recovered / bonus token",
}
PLAIN_EMIT_LABEL = "4 · plain target token"
"""The emit phase's label on a pass where nothing was drafted (k = 0): its token is a plain target token, neither
recovered (no draft was rejected) nor bonus (no draft was accepted)."""


def phase_label(phase: str, drafted: bool = True) -> str:
    """The label of ``phase`` (a key of :data:`PHASE_LABELS`); ``drafted`` False (a pass with nothing drafted) gives
    :data:`PLAIN_EMIT_LABEL` for ``emit``. Raises KeyError for an unknown phase."""
    return PLAIN_EMIT_LABEL if phase == "emit" and not drafted else PHASE_LABELS[phase]


def no_draft_reason(event: PassEvent) -> str:
    """Why a pass (not the prefill) drafted nothing, in words: lookahead decoding had no candidate, the pass's k was
    0 (k = auto chose a plain step, or the token limit left no room), or the drafter had no guess."""
    if event.lookahead is not None:
        return "lookahead decoding had no candidate starting with the last token"
    if event.k == 0:
        return "k = 0 for this pass (k = auto chose a plain step, or the token limit left no room to draft)"
    return "the drafter had no guess"


@dataclass(frozen=True)
class Distributions:
    """The top of three distributions at a pass's first rejected draft position (for a small bar chart).

    Attributes:
        position: 0-based drafted position of the rejection (== the pass's number of accepted tokens).
        token_ids: the tokens shown: the union of each distribution's top tokens, the drafted and the chosen one,
            most probable first (by target + draft + residual).
        target: target_probs of those tokens (the processed distribution: the run's penalties, bans and biases with
            the committed text as history, then temperature, top-k, top-p and min-p; the draft's likewise).
        draft: draft_probs of those tokens (one-hot on the drafted token for a deterministic drafter).
        residual: norm(max(0, target - draft)) of those tokens; None in greedy mode (the target's argmax is taken).
        drafted_id: the rejected draft token.
        chosen_id: the recovered token (drawn from the residual; greedy: the target's argmax).
        draft_known: False when the drafter did not expose its distribution (only the drafted token's q is real).
    """

    position: int
    token_ids: tuple[int, ...]
    target: tuple[float, ...]
    draft: tuple[float, ...]
    residual: tuple[float, ...] | None
    drafted_id: int
    chosen_id: int
    draft_known: bool = True


@dataclass(frozen=True)
class Recording:
    """A finished speculative run ready for stepping.

    Attributes:
        events: the run's events, the prefill first.
        greedy: temperature 0 (acceptance = "draft == target's argmax", no uniform numbers).
        drafter_name: shown in captions.
        deterministic: the drafter proposes with certainty (q = 1, e.g. n-gram lookup).
        token_texts: id -> decoded text (a missing id shows as ``#id``).
        prompt_tokens: length of the encoded prompt.
        rejections: index in ``events`` -> :class:`Distributions` at that pass's rejection.
        processing: the run's generation settings off their defaults besides temperature and seed, in words (e.g.
            "repetition penalty 1.3"; "" when none): every p and q shown is after them.
    """

    events: tuple[PassEvent, ...]
    greedy: bool
    drafter_name: str = "drafter"
    deterministic: bool = False
    token_texts: Mapping[int, str] = field(default_factory=dict)
    prompt_tokens: int = 0
    rejections: Mapping[int, Distributions] = field(default_factory=dict)
    processing: str = ""

    def text(self, token_id: int) -> str:
        """The raw decoded text of one token."""
        return self.token_texts.get(int(token_id), f"#{int(token_id)}")

    def label(self, token_id: int) -> str:
        """A token's text made visible: newline as ⏎, tab as ⇥, an all-space token as ␣, empty as ∅."""
        return display_text(self.text(token_id))

    @property
    def output_ids(self) -> list[int]:
        """Every emitted token id, in order."""
        return [t for e in self.events for t in e.emitted_ids]


def display_text(text: str) -> str:
    """Make a token's text visible on a slide: ⏎ for a newline, ⇥ for a tab, ⟨0x..⟩ for a control character;
    in an all-blank token ␣ for a space and ⟨U+....⟩ for another blank (e.g. a no-break space)."""
    if text == "":
        return "∅"
    shown = text.replace("\n", "⏎").replace("\t", "⇥").replace("\r", "")
    shown = "".join(f"⟨0x{ord(c):02x}⟩" if unicodedata.category(c) in ("Cc", "Cf") else c for c in shown)
    if text.strip():
        return shown
    return "".join("␣" if c == " " else c if c in "⏎⇥" else f"⟨U+{ord(c):04X}⟩" for c in shown)
