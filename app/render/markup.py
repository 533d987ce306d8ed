"""Small HTML pieces every tab uses: the status line, a sideways-scrolling box for wide tables, a count in words.
Pure: no Gradio."""

from __future__ import annotations

import html
import re


WORD_JOINER = "\u2060"
_RANGE_DASH = re.compile(r"(?<=[\d%×])–(?=\d)")


def keep_ranges(text: str) -> str:
    """``text`` (plain or HTML) with a word joiner after each range's en dash, so that "49–70%" stays on one line (a
    browser may break a line after an en dash: trials read "60% (49–" / "70%)" in the Arena's cells and "(99.8–" /
    "100.0%)" in the Live cards); a break before the bracket stays allowed. Display only: downloads keep plain
    figures."""
    return _RANGE_DASH.sub("–" + WORD_JOINER, text)


_NAME_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")


def keep_names(text: str) -> str:
    """``text`` with a word joiner after each hyphen inside a word, so that a name such as "early-exit" or
    "code-edit" is never split at its hyphen in a narrow table column (at 1400 px the Arena's timings table showed
    "early-" / "exit" / "k=auto"). Display only, as :func:`keep_ranges`."""
    return _NAME_HYPHEN.sub("-" + WORD_JOINER, text)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in agreement: "1 prompt", "3 prompts" (``many``: an irregular plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def seconds_text(seconds: float, at_least: int = 0) -> str:
    """A length of time in words, whole seconds: "40 s", "2 min 5 s" (``at_least``: the smallest number said,
    e.g. 1 so that a plan never reads "0 s")."""
    s = max(at_least, round(seconds))
    return f"{s} s" if s < 120 else f"{s // 60} min {s % 60} s"


PAST_ESTIMATE = "the machine is busier or slower than estimated"
"""Said once a measurement runs past its quiet-machine estimate (:func:`elapsed_text`)."""


def elapsed_text(seconds: float, estimate: float, source: str) -> str:
    """The seconds a measurement has taken beside its estimate (both in seconds): "72 s of about 38 s, {source}"
    (``source``: how the estimate was made) while the estimate is not yet passed, then "72 s, past the quiet-machine
    estimate of 38 s: the machine is busier or slower than estimated", so a stale "of about" is never repeated."""
    if seconds > estimate:
        return f"{seconds:.0f} s, past the quiet-machine estimate of {estimate:.0f} s: {PAST_ESTIMATE}"
    return f"{seconds:.0f} s of about {estimate:.0f} s, {source}"


def status_html(message: str, kind: str = "info", notes=()) -> str:
    """The status line: kind is busy, wait, done, error or info; ``notes`` (what was changed in the input, e.g.
    a prompt cut to fit) follow it, one per line. The icon and message sit in one span (``status-text``: the Live
    tab's compact copy under Generate clamps it to two lines). Everything is escaped: a message may quote user
    input. The icons are plain symbols found in common text fonts (DejaVu Sans on Debian): waiting is ◷, as a
    browser without an emoji font drew ⏳ as an empty box."""
    icon = {"busy": '<i class="spinner" aria-hidden="true"></i>', "wait": "◷", "done": "✓", "error": "⚠",
            "info": "ℹ"}.get(kind, "")
    extra = "".join(f'<br><small class="status-note">ℹ {html.escape(note)}</small>' for note in notes if note)
    return (f'<div class="status status-{kind}" role="status"><span class="status-text">{icon} {html.escape(message)}'
            f'</span>{extra}</div>')


def scroll_box(table: str, label: str, title: str = "") -> str:
    """``table`` (HTML) in a box that scrolls sideways when the table is wider than the page allows (a phone): the
    page itself never scrolls sideways, and while part of the table is hidden on one side a shade on that edge says
    so (``assets/head.html`` marks the frame ``data-sv-more``; ``style.css`` draws it). The box can take keyboard
    focus (arrow keys scroll it); ``label`` (plain text) names it for screen readers. ``title`` (HTML, optional)
    stands above the box, so it stays readable while the table scrolls."""
    head = f'<div class="sv-scroll-title">{title}</div>' if title else ""
    return (f'{head}<div class="sv-scroll-frame"><div class="sv-scroll" role="region" tabindex="0" '
            f'aria-label="{html.escape(label, quote=True)}">{table}</div></div>')
