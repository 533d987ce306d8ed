"""One rule for reading a measured speedup against 1, used by every tab (Live, Arena, Batching, Why it works).

A speedup is a ratio (speculative ÷ standard rate, or a cost ratio against one step) measured with an interval: a
bootstrap interval over passes (Live), the ratios against each baseline run beside it (Arena), or the range of
repeats (Batching, Why). :func:`read_speedup` reads it so:

- the interval lies wholly above 1: "faster", wholly below 1: "slower", however wide it is, and whatever else ran
  on the machine (other programs' CPU share is said beside the number, never hides it);
- it straddles 1 and is narrow (high ÷ low at most :data:`NARROW`) on an undisturbed machine: "about the same";
- it straddles 1 otherwise (wide, or other programs disturbed the timings): "too noisy to tell";
- the timings are impossible (a speedup above what its tokens per pass allow, more work timed faster than less):
  "not a finding" whatever the interval, with that reason in its own words (never "too noisy to tell", which
  means an interval across 1 only).

The measured value always travels with the word: a too-noisy figure is still shown, only not as a finding.
"""

from __future__ import annotations

from dataclasses import dataclass

FASTER, SLOWER, SAME, NOISY = "faster", "slower", "about the same", "too noisy to tell"
NOT_FINDING = "not a finding"
"""The word for timings that cannot be true (``impossible`` of :func:`read_speedup`), whatever the interval."""
WORDS = (FASTER, SLOWER, SAME, NOISY, NOT_FINDING)
NARROW = 1.2
"""An interval across 1 whose high ÷ low is at most this reads "about the same"; wider, "too noisy to tell"."""
SLOWER_WORDS = "the speed, slower"
"""What follows a ratio read slower (:meth:`Verdict.words`): "0.31× the speed, slower", since "0.31× slower" reads
oddly (a ratio under 1 beside "slower") and not plainly as a run at 31 % of the standard speed."""


def format_apart(a: float, b: float, decimals: int = 2, most: int = 6) -> tuple[str, str]:
    """``a`` and ``b`` with ``decimals`` decimals, or more (up to ``most``) until two different numbers read
    differently: (0.018, 0.021) -> ("0.018", "0.021"), where two decimals would show 0.02 twice."""
    for places in range(decimals, max(decimals, most) + 1):
        x, y = f"{a:.{places}f}", f"{b:.{places}f}"
        if x != y or a == b:
            return x, y
    return x, y


def format_ratio(value: float, decimals: int = 2, most: int = 3) -> str:
    """A ratio read against 1 as text, with ``decimals`` decimals, or more (up to ``most``) where it would print
    as 1 without being 1, since which side of 1 it lies on decides its verdict: 0.82 -> "0.82", 0.997 -> "0.997",
    1.004 -> "1.004", 1.0 -> "1.00". Where even ``most`` decimals print 1, the nearest figure of ``most`` decimals
    on the value's own side of 1: 0.9996 -> "0.999", 1.0002 -> "1.001" (a trial read "0.9996×": four decimals say
    nothing a reader needs beyond the side of 1, which these keep)."""
    for places in range(decimals, max(decimals, most) + 1):
        text = f"{value:.{places}f}"
        if value == 1.0 or text != f"{1.0:.{places}f}":
            return text
    step = 10.0 ** -places
    return f"{1.0 - step if value < 1.0 else 1.0 + step:.{places}f}"


def format_ratio_ends(low: float, high: float, decimals: int = 2, most: int = 3) -> tuple[str, str]:
    """An interval of a ratio as two texts that read apart (:func:`format_apart`) and each on its own side of 1
    (:func:`format_ratio`), so the printed range agrees with the verdict read from it: (0.67, 0.997) ->
    ("0.67", "0.997") (wholly below 1: slower), (0.67, 1.004) -> ("0.67", "1.004") (across 1)."""
    low_text, high_text = format_apart(low, high, decimals, most)
    places = max(decimals, *(len(t.split(".")[1]) for t in (low_text, high_text) if "." in t))
    return format_ratio(low, places, most), format_ratio(high, places, most)


@dataclass(frozen=True)
class Verdict:
    """How a measured ratio may be read (:func:`read_speedup`).

    ``word``: one of :data:`WORDS`; ``value``: the measured ratio (shown in every case); ``low`` / ``high``: its
    interval (equal where there is a single measurement); ``level``: the interval's confidence (0.95 for a bootstrap
    interval) or None where it is a range (lowest to highest of repeats); ``reason``: what to say beside it (other
    programs' share of the CPUs, impossible timings), None when nothing.
    """

    word: str
    value: float
    low: float
    high: float
    level: float | None = None
    reason: str | None = None

    @property
    def finding(self) -> bool:
        """Whether the ratio reads as a result (faster, slower, about the same), not as noise."""
        return self.word not in (NOISY, NOT_FINDING)

    def span(self) -> str:
        """The interval in words: "95 % 1.30–2.00×" (a confidence interval) or "range 1.30–2.00×"."""
        ends = "–".join(format_ratio_ends(self.low, self.high))
        return f"{self.level:.0%} {ends}×".replace("%", " %", 1) if self.level else f"range {ends}×"

    def words(self) -> str:
        """What follows the number in :meth:`figure`: the word, except :data:`SLOWER_WORDS` for a ratio read
        slower ("0.62× the speed, slower": the ratio stays the speedup every chart and file shows)."""
        return SLOWER_WORDS if self.word == SLOWER else self.word

    def figure(self) -> str:
        """The number and its word: "1.60× faster", "0.62× the speed, slower", "1.02× about the same", "too noisy
        to tell: 1.05× measured" or "2.45× measured, not a finding"."""
        if self.word == NOT_FINDING:
            return f"{self.shown()}× measured, {NOT_FINDING}"
        return f"{self.word}: {self.shown()}× measured" if self.word == NOISY else f"{self.shown()}× {self.words()}"

    def shown(self) -> str:
        """The measured ratio as text (:func:`format_ratio`): "0.82", or "0.997" where two decimals would print a
        ratio below 1 as 1.00 beside the word "slower"."""
        return format_ratio(self.value)

    def headline(self) -> str:
        """One line a teacher can show: "1.60× faster · 95 % 1.30–2.00× · other programs used 74% of the CPUs",
        "0.62× the speed, slower · range 0.55–0.75×"; timings that cannot be true: "2.45× · range 2.27–2.63× · not a
        finding: <reason>"."""
        if self.word == NOT_FINDING:
            return " · ".join((f"{self.shown()}×", self.span(), self.why_not()))
        return " · ".join(part for part in (self.figure(), self.span(), self.reason) if part)

    def why_not(self) -> str:
        """Why the ratio is no finding, in its own words: "not a finding: faster than its 2.1 tokens per pass allow"
        (impossible timings), "too noisy to tell: its interval straddles 1" (with the disturbance where one was
        said); "" for a finding."""
        if self.word == NOT_FINDING:
            return f"{NOT_FINDING}: {self.reason}" if self.reason else NOT_FINDING
        if self.word == NOISY:
            return f"{NOISY}: its interval straddles 1" + (f"; {self.reason}" if self.reason else "")
        return ""

    def cell(self) -> str:
        """A table cell: "1.60× faster (1.30–2.00×)", "0.62× the speed, slower (0.55–0.75×)", "too noisy to tell:
        1.05× measured (0.80–1.40×)", "2.45× (2.27–2.63×), not a finding: faster than its 2.1 tokens per pass
        allow"."""
        ends = "–".join(format_ratio_ends(self.low, self.high))
        if self.word == NOT_FINDING:
            return f"{self.shown()}× ({ends}×), {self.why_not()}"
        return f"{self.figure()} ({ends}×)"


def read_speedup(value: float, low: float, high: float, *, level: float | None = None, busy: str | None = None,
                 impossible: str | None = None, narrow: float = NARROW) -> Verdict:
    """Read a measured ratio ``value`` with its interval [``low``, ``high``] against 1 (the module's rule).

    Args:
        value: the measured ratio (e.g. 1.6 = 1.6× faster).
        low, high: its interval (a bootstrap interval, or the lowest and highest of repeats); equal to ``value``
            where there is one measurement.
        level: the interval's confidence (0.95) or None for a range of repeats.
        busy: what disturbed the timings in words ("other programs used 74% of the CPUs"), or None: said beside
            the number; it turns an interval across 1 into "too noisy to tell" even when narrow, and leaves an
            interval on one side of 1 as it is.
        impossible: why the timings cannot be true ("faster than its 2.1 tokens per pass allow"), or None: "not a
            finding" whatever the interval, this reason first in ``reason``.
        narrow: the widest high ÷ low of an interval across 1 that reads "about the same".

    Returns:
        The :class:`Verdict`, carrying ``value`` in every case.

    Raises:
        ValueError: ``low`` > ``high``.
    """
    if low > high:
        raise ValueError(f"an interval's low end ({low}) is above its high end ({high})")
    reason = "; ".join(r for r in (impossible, busy) if r) or None
    if impossible:
        word = NOT_FINDING
    elif low > 1.0:
        word = FASTER
    elif high < 1.0:
        word = SLOWER
    elif busy or low <= 0 or high / low > narrow:
        word = NOISY
    else:
        word = SAME
    return Verdict(word, float(value), float(low), float(high), level, reason)
