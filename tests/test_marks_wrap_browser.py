"""The token pane's marks stay on their token's line, in a real browser (Debian's chromium driven by playwright,
loopback only), at 400 px and 1400 px.

A new user's trial at 400 px: a lone "copy" mark (a pass whose draft n-gram lookup copied) ended a line and its
token began the next. The pane here is hand-made (a fake tokenizer of whole words, passes marked "copy" or "earlier",
accepted, rejected, recovered and bonus tokens, the run still typing) and put in the app's speculative pane, under
the app's own style sheet. Measured on the page: each mark's line is its pass's first shown token's line; the typing
cursor's is the last token's (an inline-block could wrap alone too); and every line still breaks between words (at
a space), as the text did without marks.
"""

from __future__ import annotations

import os
import random

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
from browser_support import open_page, requires_chromium  # noqa: E402

from app import render  # noqa: E402
from specviz.core.events import PassEvent, PositionDetail, Timings  # noqa: E402

pytestmark = requires_chromium

WORDS = ["", " the", " quick", " brown", " fox", " jumps", " over", " lazy", " dog", ",", " and", " apples",
         " pears", " plums", "ing", " a", ".", " extraordinarily", " x"]
"""Token id -> text (id 0 unused): whole words with a leading space, a suffix ("ing") and punctuation."""


class WordTokenizer:
    """Decodes ids through :data:`WORDS`."""

    all_special_ids: list[int] = []

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) -> str:
        return "".join(WORDS[i] for i in ids)


def _events(seed: int, passes: int = 60) -> list[PassEvent]:
    """A prefill and ``passes`` passes of 1-3 drafted words (random accepts, recovered or bonus), each drafted by
    lookup, copied from an earlier output or drafted plainly; the run unfinished (the pane shows its cursor)."""
    rnd = random.Random(seed)
    out = [PassEvent("speculative", 0, "prefill", 0, (), (), 0, 1, "target", (1,), (), "", Timings(), 1.0, 1)]
    for index in range(1, passes + 1):
        m = rnd.randint(1, 3)
        n = rnd.randint(0, m)
        draft = tuple(rnd.randint(1, len(WORDS) - 1) for _ in range(m))
        nxt = rnd.randint(1, len(WORDS) - 1)
        source = rnd.choice(["lookup", "lookup", "earlier", None])
        details = tuple(PositionDetail(0.5, 1.0, None, 0, j <= n) for j in range(m))
        out.append(PassEvent("speculative", index, "pass", 3, draft, tuple(j < n for j in range(m)), n, nxt,
                             "bonus" if n == m else "recovered", draft[:n] + (nxt,), details, "", Timings(),
                             float(index), index * 2, draft_source=source))
    return out


MEASURE = """() => {
  const glyph = (el, last) => {  // the box of el's first (or last) character that is not a space
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT); let hit = null;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const at = last ? node.data.search(/\\S\\s*$/) : node.data.search(/\\S/);
      if (at >= 0) { hit = [node, at]; if (!last) break; } }
    if (!hit) return null;
    const range = document.createRange(); range.setStart(hit[0], hit[1]); range.setEnd(hit[0], hit[1] + 1);
    return range.getClientRects()[0]; };
  const middle = (r) => (r.top + r.bottom) / 2;
  const pane = document.querySelector('#spec-output');
  const apart = [], breaks = [];
  for (const mark of pane.querySelectorAll('.copied-mark, .earlier-mark')) {
    const token = [...mark.closest('.pass').querySelectorAll('.tok')].find(t => !t.matches('.tok-partial'));
    const box = glyph(token, false);
    if (Math.abs(middle(mark.getBoundingClientRect()) - middle(box)) > 10)
      apart.push(`${mark.className} before ${JSON.stringify(token.textContent)}`); }
  const tokens = [...pane.querySelectorAll('.tok')].filter(t => glyph(t, false));
  const cursor = pane.querySelector('.cursor'), last = tokens[tokens.length - 1];
  if (Math.abs(middle(cursor.getBoundingClientRect()) - middle(glyph(last, true))) > 10)
    apart.push(`cursor after ${JSON.stringify(last.textContent)}`);
  let lines = 1;
  for (let i = 1; i < tokens.length; i++) {
    const before = tokens[i - 1], after = tokens[i];
    if (glyph(after, false).top - glyph(before, true).top < 10) continue;
    lines += 1;
    if (!/\\s$/.test(before.textContent) && !/^\\s/.test(after.textContent))
      breaks.push(`${JSON.stringify(before.textContent)} | ${JSON.stringify(after.textContent)}`); }
  return {apart, breaks, lines, marks: pane.querySelectorAll('.copied-mark, .earlier-mark').length}; }"""


@pytest.mark.parametrize("width", [400, 1400])
def test_marks_and_the_cursor_stay_on_their_tokens_line_and_lines_break_between_words(browser, app_url, width):
    page = open_page(browser, {"width": width, "height": 900})
    try:
        page.goto(app_url)
        page.wait_for_selector("#spec-output .pane")
        for seed in range(4):
            pane = render.Pane(WordTokenizer())
            for event in _events(seed):
                pane.add(event)
            markup = render.pane_html("Speculative", pane.html())
            page.evaluate("(markup) => { document.querySelector('#spec-output .pane').outerHTML = markup; }", markup)
            found = page.evaluate(MEASURE)
            assert found["marks"] > 20 and found["lines"] > (8 if width == 1400 else 20)  # marks, lines to wrap
            assert found["apart"] == [], f"seed {seed} at {width} px: on another line than their token"
            assert found["breaks"] == [], f"seed {seed} at {width} px: a line broke inside a word"
    finally:
        page.context.close()
