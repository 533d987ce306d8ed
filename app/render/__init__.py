"""HTML the tabs render, pure (no Gradio, no model), in five small modules re-exported here so every tab reads
``from app import render`` / ``render.status_html(...)``:

- :mod:`app.render.markup`: the status line, a sideways-scrolling box for wide tables, a count and a length of time in words
  (every tab);
- :mod:`app.render.tokens`: a token's text decoded as a continuation of the tokens before it (:class:`PieceDecoder`,
  also the draft tree's and lookahead's views);
- :mod:`app.render.pane`: the Live tab's output panes, token by token, from engine events (:class:`Pane`; how each
  kind of token looks, in its module docstring), the legend and pane headers;
- :mod:`app.render.stats`: the stats cards (the greedy identity check, the decoding speedup and its verdict, rates,
  time to first token, where the time went);
- :mod:`app.render.history`: the Live tab's table of the session's runs (:class:`app.records.RunSummary` rows).
"""

from __future__ import annotations

from app.render.history import history_counted, history_html, history_k, history_rate, history_speedup
from app.render.markup import elapsed_text, plural, scroll_box, seconds_text, status_html
from app.render.pane import (KIND_LABELS, SUFFIX_SOURCES, Pane, _detail_title, legend_html, pane_header, pane_html,
                             placeholder_html, text_html, token_html)
from app.render.stats import (BUSY_MACHINE, BUSY_NOTE, END_TO_END_DEFINITION, LOOKAHEAD_DEFINITION, ONE_MEASUREMENT,
                              ONE_PASS, RATES_DEFINITION, SPEEDUP_DEFINITION, TOKENS_PER_PASS_DEFINITION,
                              TTFT_DEFINITION,
                              TOO_FEW_PASSES, VERDICT_RULE, Comparison, compare_outputs, counted_html, counted_spread,
                              expected_text, fmt_ms, largest_ms,
                              lookahead_cards, rate_pair_html, speedup_cards, spread_html, spread_text, stats_html,
                              time_card, ttft_html, verdict_card)
from app.render.tokens import KINDS, Piece, PieceDecoder, Token, byte_label

__all__ = [
    "history_counted", "history_html", "history_k", "history_rate", "history_speedup", "plural", "scroll_box",
    "status_html", "elapsed_text",
    "KIND_LABELS", "SUFFIX_SOURCES", "Pane", "_detail_title", "legend_html", "pane_header", "pane_html",
    "placeholder_html", "text_html", "token_html", "BUSY_MACHINE", "BUSY_NOTE", "END_TO_END_DEFINITION",
    "LOOKAHEAD_DEFINITION",
    "ONE_MEASUREMENT", "ONE_PASS", "RATES_DEFINITION", "SPEEDUP_DEFINITION", "TOKENS_PER_PASS_DEFINITION",
    "TTFT_DEFINITION", "TOO_FEW_PASSES", "VERDICT_RULE", "counted_html", "counted_spread", "Comparison",
    "compare_outputs", "expected_text", "fmt_ms", "largest_ms",
    "lookahead_cards", "rate_pair_html", "speedup_cards", "spread_html", "spread_text", "stats_html", "time_card",
    "ttft_html", "verdict_card", "KINDS", "Piece", "PieceDecoder", "Token", "byte_label",
]
