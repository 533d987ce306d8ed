"""The stats cards under the panes: the greedy identity check of the two outputs (:func:`compare_outputs`), the
decoding speedup with its bootstrap interval and verdict, rates, time to first token, where the time went, and
lookahead's figures. Pure: no Gradio, no model."""

from __future__ import annotations

import html
from dataclasses import dataclass

from app.render.markup import plural
from specviz.core.verdict import format_apart


def time_card(spec, base) -> str:
    """The "Where the time went" card of a speculative run's :class:`RunStats` ``spec`` (``base``: the
    baseline's): the largest of its verify, draft and other times after the prefill as the headline with its
    share of the time and that share's bootstrap interval over the passes (:meth:`RunStats.share`; "one pass: no
    spread" before a second pass), the other two and the baseline's forwards below (totals on the runs' clocks)."""
    parts = {"verify": spec.verify_ms, "draft": spec.draft_ms, "other": spec.other_ms}
    total = sum(parts.values())
    name = max(parts, key=parts.get)
    share = f" ({_share_text(parts[name] / total, spec.share(name))})" if total > 0 else ""
    scale = largest_ms(*parts.values(), base.verify_ms)  # one unit for the whole card
    rest = html.escape(" · ".join(f"{k} {fmt_ms(v, scale)}" for k, v in parts.items() if k != name))
    headline = html.escape(fmt_ms(parts[name], scale))
    return _card("Where the time went", f"{headline} <small>{name}{html.escape(share)}</small>",
                 "speculative run after the prefill: target forwards (verify), drafting, and other (acceptance, "
                 "rollback, detokenization); the largest part is shown with its share of the time and that share's "
                 "95% bootstrap interval over the passes",
                 f"{rest} · baseline forwards {html.escape(fmt_ms(base.verify_ms, scale))}")


def _share_text(share: float, interval) -> str:
    """A share of the time with its interval, "62%; 58–66%", the share with as many decimals as its ends need to
    read apart (at most 2: "99.98%; 99.97–99.99%"); "62%; one pass: no spread" without an interval."""
    if interval is None:
        return f"{share:.0%}; {ONE_PASS}"
    low, high = format_apart(interval.low * 100, interval.high * 100, 0, 2)
    return f"{share * 100:.{len(low.partition('.')[2])}f}%; {low}–{high}%"


def ttft_html(stats, scale: float | None = None) -> str:
    """A run's time to first token, marked as the one measurement it is: "85 ms <small>(one measurement)</small>"
    (a run has one prefill: no repeats, so no spread to give); "–" before the prefill ends. ``scale``: the largest
    time to first token on the same card (ms), which chooses the unit (:func:`fmt_ms`)."""
    if not stats.curve_ms:  # no event yet: the prefill is still running
        return "–"
    shown = html.escape(fmt_ms(stats.ttft_ms, scale))
    return f'{shown} <small class="spread" style="white-space: nowrap">({ONE_MEASUREMENT})</small>'


# ------------------------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Comparison:
    """Whether the speculative output's ids equal the baseline's.

    ``identical``: True / False, or None while undecided (a run still going with equal ids so far).
    ``first_diff``: 0-based position of the first differing token; ``gap``: the baseline's top-two logit gap
    there (a small gap is a near-tie that tiny numeric differences can flip).
    """

    identical: bool | None
    compared: int
    first_diff: int | None = None
    spec_token: str | None = None
    base_token: str | None = None
    gap: float | None = None
    message: str = ""


def compare_outputs(spec_ids: list[int], base_ids: list[int], base_gaps: list[float | None], tokenizer,
                    *, greedy: bool, finished: bool, precision: str = "") -> Comparison:
    """Compare two outputs token by token (see :class:`Comparison`). ``precision``: what the target computes in
    ("bfloat16", "float32 · int4 weights"; "" unknown), named where a near-tie explains a greedy difference."""
    n = min(len(spec_ids), len(base_ids))
    diff = next((i for i in range(n) if spec_ids[i] != base_ids[i]), None)
    if diff is None and finished and len(spec_ids) != len(base_ids):
        diff = n
    if diff is None:
        if finished:
            what = "Identical token ids" if greedy else "Identical token ids (same seed)"
            every = "the one token matches" if n == 1 else f"all {n} tokens match"
            return Comparison(True, n, message=f"{what}: {every} the baseline.")
        return Comparison(None, n, message=f"Identical so far ({plural(n, 'token')}).")

    def piece(ids: list[int]) -> str | None:
        return repr(tokenizer.decode([ids[diff]], skip_special_tokens=False)) if diff < len(ids) else "(ended)"

    gap = base_gaps[diff] if diff < len(base_gaps) else None
    spec_tok, base_tok = piece(spec_ids), piece(base_ids)
    if not greedy:
        message = (f"Sampling: the two outputs differ from token {diff + 1} on (the runs draw their random numbers in "
                   f"a different order); "
                   f"the speculative output still follows the target's distribution exactly.")
    else:
        message = f"Outputs differ at token {diff + 1}: speculative {spec_tok} vs baseline {base_tok}."
        if gap is not None:
            where = f" in {precision}" if precision else ""
            message += (f" The baseline's top-two logit gap there is {gap:.3f}"
                        + (f" — a near-tie, which tiny numeric differences between a (k+1)-token verify forward"
                           f" and a one-token forward{where} can flip." if gap < 0.5 else "."))
    return Comparison(False, n, diff, spec_tok, base_tok, gap, message)


# ------------------------------------------------------------------------------------------- stats


def _fmt(value, fmt: str, none: str = "–") -> str:
    return none if value is None else fmt.format(value)


def fmt_ms(ms: float | None, scale: float | None = None) -> str:
    """A duration: "85 ms", or "12.3 s" from 10 s up. ``scale``: the largest duration shown beside it (in ms), which
    chooses the unit instead, so one card reads in one unit ("5.9 s · baseline: 12.3 s", not "5932 ms"); a time
    above 0 that seconds would show as 0.0 reads "< 0.1 s"."""
    if ms is None:
        return "–"
    if max(ms, scale or 0) < 10_000:
        return f"{ms:.0f} ms"
    return "< 0.1 s" if 0 < ms < 50 else f"{ms / 1000:.1f} s"


def largest_ms(*values: float | None) -> float | None:
    """The largest of the durations given (ms; None ignored), the ``scale`` of :func:`fmt_ms` for one card."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


ONE_PASS = "one pass: no spread"
"""What a per-pass figure shows beside it before a second pass gives it a spread."""
ONE_MEASUREMENT = "one measurement"
"""What a figure measured once per run (time to first token: one prefill) shows beside it: no spread to give."""


def spread_text(interval, decimals: int = 1, single: str = ONE_PASS) -> str:
    """An interval's ends as text, "38.0–44.1" (:func:`~specviz.core.verdict.format_apart`: one more decimal where
    that makes them read apart, as the Arena's ranges; ends that still read alike say the spread is below that
    precision); ``single`` when there is no interval (None)."""
    if interval is None:
        return single
    low, high = format_apart(interval.low, interval.high, decimals, decimals + 1)
    return f"{low}–{high}"


def spread_html(value: float | None, interval, fmt: str = "{:.1f}", decimals: int = 1, single: str = ONE_PASS) -> str:
    """A measured figure and its spread, compactly: "41.2 <small>(38.0–44.1)</small>" (``interval``: a
    :class:`~specviz.measure.stats.Interval` over the run's passes), or "41.2 <small>(one pass: no spread)</small>"
    where there is none yet (``single``); "–" without a value."""
    if value is None:
        return "–"
    return (f'{fmt.format(value)} <small class="spread" style="white-space: nowrap">'
            f'({html.escape(spread_text(interval, decimals, single))})</small>')


TOO_FEW_PASSES = "too few passes to tell"
"""Kept for old imports; the cards say :func:`too_few_words` ("3 passes: too few to tell"), one form with or
without an interval."""


def too_few_words(passes: int) -> str:
    """The one form every card uses for a run with too few passes to read a figure: "3 passes: too few to tell"."""
    return f"{plural(passes, 'pass', 'passes')}: too few to tell"


def counted_spread(interval, stats, *, percent: bool = False) -> str:
    """The spread of a figure counted over a run's passes as plain text: its 95% interval, "55–70%" (``percent``: a
    share in [0, 1], its ends in %) or "2.10–2.75"; with "; 5 passes: too few to tell" while ``stats`` (the
    run's :class:`~specviz.measure.run_stats.RunStats`) has fewer than
    :data:`~specviz.measure.stats.MIN_JUDGED_PASSES` passes; without an interval :data:`ONE_PASS` after one pass,
    :func:`too_few_words` after more (passes that drafted nothing, a plain step of k = auto, count nothing)."""
    if interval is None:
        return ONE_PASS if stats.passes <= 1 else too_few_words(stats.passes)
    if percent:
        text = "{}–{}%".format(*format_apart(interval.low * 100, interval.high * 100, 0, 1))
    else:
        text = spread_text(interval, 2)
    if stats.too_few_passes:
        text += f"; {too_few_words(stats.passes)}"
    return text


def counted_html(value: float | None, interval, stats, *, percent: bool = False) -> str:
    """A figure counted over a run's passes with its spread (:func:`counted_spread`): "62% <small>(55–70%)</small>"
    (``percent``) or "2.41 <small>(2.10–2.75)</small>"; "–" without a value."""
    if value is None:
        return "–"
    shown = f"{value:.0%}" if percent else f"{value:.2f}"
    return f'{shown} <small class="spread">({html.escape(counted_spread(interval, stats, percent=percent))})</small>'


PENDING = "…"
"""What a figure shows while the run it measures has not made the pass it needs yet."""


def prefill_included_html(stats) -> str:
    """A run's rate with the prefill included and its spread (:meth:`RunStats.rate`), "32.5 <small>(30.1–34.0)
    </small>"; :data:`PENDING` while the run is still going and has made no pass after its prefill (its rate would
    be 1 token ÷ the prefill's time, a figure of nothing yet); a run that ended with its prefill keeps that rate,
    its whole run."""
    if not stats.passes and stats.finish_reason is None:
        return PENDING
    return spread_html(stats.tokens_per_s, stats.rate())


def rate_pair_html(spec, base, decode: bool = True) -> str:
    """Both runs' rates with their spreads, "41.2 (38.0–44.1) vs 30.1 (29.0–31.3)": after the prefill
    (``decode``, :meth:`~specviz.measure.run_stats.RunStats.decode_rate`) or with it (:func:`prefill_included_html`,
    :data:`PENDING` for a run whose first pass is not done)."""
    def one(stats) -> str:
        if not decode:
            return prefill_included_html(stats)
        return spread_html(stats.decode_tokens_per_s, stats.decode_rate())

    return f"{one(spec)} <small>vs</small> {one(base)}"


def _card(label: str, value: str, definition: str, extra: str = "", cls: str = "") -> str:
    return (f'<div class="card {cls}"><div class="card-label">{html.escape(label)}</div>'
            f'<div class="card-value">{value}</div>'
            + (f'<div class="card-extra">{extra}</div>' if extra else "")
            + f'<div class="card-def">{html.escape(definition)}</div></div>')


SPEEDUP_DEFINITION = ("speculative ÷ baseline decoding rate: tokens after the first ÷ time after the prefill, each "
                      "run on its own clock; the interval resamples both runs' passes (bootstrap)")
RATES_DEFINITION = ("speculative vs baseline decoding rate, own clocks; in brackets each rate's 95% bootstrap interval "
                    "over its run's passes (the prefill included: each prefill is one measurement, taken as measured)")
END_TO_END_DEFINITION = ("tokens/s ratio with the prefill (time to first token) included: a long prompt's prefill "
                         "dominates it, so read the decoding speedup; in brackets the 95% bootstrap interval over both "
                         "runs' passes (each prefill is one measurement, taken as measured)")
TTFT_DEFINITION = "the prefill forward over the prompt: one measurement per run (a single prefill, so no spread)"


BUSY_NOTE = ("Other programs on the same CPUs slow a one-token step more than a wide pass, so they flatter the "
             "speculative run: a gain measured then may be smaller on a quiet machine, a loss larger. A browser "
             "showing this page on the same machine counts (it redraws the panes as they stream); the Arena, which "
             "does not stream tokens, or a browser on another device, measure without it.")
VERDICT_RULE = ("How it is read: the whole interval above 1 is faster, below 1 slower, however wide; an interval "
                "across 1 is about the same when narrow (high ÷ low at most 1.2) on a quiet machine, else too noisy "
                "to tell. The number is shown in every case.")


def cut_words(cut_at: float | None = None, value: float | None = None) -> str:
    """Why a decoding speedup's interval ends where it does, when its top was cut
    (:attr:`specviz.measure.stats.SpeedupJudgement.cut_at`, the tokens per pass it was cut at): "top cut at its 3.06
    tokens per pass: no faster is possible"; without ``cut_at``, "top cut at its tokens per pass: …" (a table's
    footnote, each row holding its own). Where the measured ``value`` itself lies above them (within
    :data:`specviz.measure.stats.IMPOSSIBLE_MARGIN`, the timings' noise; the top is then the value): "top cut at the
    measured 1.23×, within timing noise of its 1.18 tokens per pass, which no speedup can pass" (a trial read "1.23×
    … 0.92–1.23× (top cut at its 1.18 tokens per pass: no faster is possible)" as a contradiction). The words of
    the Live card and of the run history's footnote and hover."""
    if cut_at is not None and value is not None and round(value, 2) > round(cut_at, 2):
        return (f"top cut at the measured {value:.2f}×, within timing noise of its {cut_at:.2f} tokens per pass, "
                "which no speedup can pass")
    at = f"{cut_at:.2f} " if cut_at is not None else ""
    return f"top cut at its {at}tokens per pass: no faster is possible"


NO_READING = "no reading"
"""The page's word for a speedup its timings cannot give (the rule's "not a finding",
:data:`specviz.core.verdict.NOT_FINDING`): said calmly, as what happened and what to do, in the Live card and the
Arena (:func:`app.arena.verdicts.no_reading_words`). A trial read "not a finding" in large type as alarming."""
SPEED_CHANGED = "the machine's speed changed during the run"
RUN_AGAIN = "run again"


def no_reading_sentence(impossible: str | None, load: str | None = None) -> str:
    """The Live tab's one sentence for a decoding speedup of :data:`NO_READING`, after its number: why the timings
    cannot be true (``impossible``, :attr:`specviz.measure.stats.SpeedupJudgement.impossible`), what that means and
    what to do, naming the load measured during the run where there was one (``load``, in words:
    :meth:`app.live.view.RunView.load_words`):

    - "faster than its 3.1 tokens per pass allow, so the machine's speed changed during the run: other programs used
      45% of the CPUs during the run; run again when the machine is quieter";
    - "faster than its 3.1 tokens per pass allow, so the machine's speed changed during the run: run again to measure"
      (no load measured).

    One source for the card (:func:`verdict_card`) and the history's hover (:meth:`RunView.noise_reason`). A trial
    on a loaded machine read only "the machine's speed changed during the run", again and again, with no word of
    the load that changed it."""
    then = f"{load}; {RUN_AGAIN} when the machine is quieter" if load else f"{RUN_AGAIN} to measure"
    return f"{impossible}, so {SPEED_CHANGED}: {then}" if impossible else f"{SPEED_CHANGED}: {then}"


BUSY_MACHINE = "measured on a busy machine"


def busy_warning(reason: str) -> str:
    """The warning a "faster" headline carries when other programs disturbed its timings (``reason``, what
    disturbed them, :attr:`specviz.core.verdict.Verdict.reason`): "⚠ measured on a busy machine (other programs used
    60% of the CPUs), which flatters speculation: on a quiet machine the gain may be smaller"."""
    return f"⚠ {BUSY_MACHINE} ({reason}), which flatters speculation: on a quiet machine the gain may be smaller"


def verdict_card(judgement, load: str | None = None) -> str:
    """The Live headline card (HTML) of a judged run (:class:`specviz.measure.stats.SpeedupJudgement` with an
    interval): the measured speedup large with its words ("2.51× faster", "0.62× the speed, slower"; "1.05× too
    noisy to tell" keeps the number; "no reading (6.75× measured)", a speedup its tokens per pass cannot give
    (:data:`NO_READING`), puts the words first and the number small, as the end-to-end card does), under it the interval and what
    disturbed the timings ("95 % 1.48–3.98× · other programs used 74% of the CPUs"; for no reading, the interval and
    :func:`no_reading_sentence` of ``load``, the load measured during the run in words or None), and the long
    explanation folded in a ``<details>`` element. Green for faster, red for slower, neutral otherwise. A faster
    verdict on a busy machine carries :func:`busy_warning` in its own line (class ``busy``)."""
    reading = judgement.reading
    cls = {"faster": "good", "slower": "bad", "too noisy to tell": "noisy", "not a finding": "noisy unfounded"}.get(
        reading.word, "neutral")
    figure = (f'<span class="sv-verdict-figure">{reading.shown()}×</span> '
              f'<span class="sv-verdict-word">{html.escape(reading.words())}</span>')
    if reading.word == "not a finding":  # a timing the tokens per pass cannot give: the words lead, the number small
        figure = (f'<span class="sv-verdict-word">{NO_READING}</span> '
                  f'<small class="sv-verdict-figure">({reading.shown()}× measured)</small>')
    span = reading.span()
    if judgement.cut_at is not None:  # a trial read "3.96× / 95 % 3.07–3.96×" as a quietly clipped interval
        span += f" ({cut_words(judgement.cut_at, judgement.value)})"
    said = reading.reason
    if reading.word == "not a finding":  # a trial met the words alone with no idea what to do next
        said = no_reading_sentence(judgement.impossible or reading.reason, load)
    busy = reading.word == "faster" and bool(reading.reason)
    if busy:  # a trial read a large green "2.12× faster" and missed the small "other programs used 60%" under it
        cls += " busy"
        said = None
    under = " · ".join(html.escape(part) for part in (span, said) if part)
    if busy:
        under += f'<div class="sv-verdict-busy">{html.escape(busy_warning(reading.reason))}</div>'
    why = [judgement.describe(), VERDICT_RULE, SPEEDUP_DEFINITION] + ([BUSY_NOTE] if reading.reason else [])
    details = ('<details class="sv-verdict-why"><summary>How this is judged</summary>'
               + "".join(f"<p>{html.escape(text)}</p>" for text in why) + "</details>")
    return (f'<div class="card hero {cls} sv-verdict" title="{html.escape(reading.headline(), quote=True)}">'
            f'<div class="card-label">Decoding speedup</div><div class="card-value">{figure}</div>'
            f'<div class="card-extra sv-verdict-span">{under}</div>{details}</div>')


def speedup_cards(spec, base, judgement=None, load: str | None = None) -> list[str]:
    """The headline cards of a run with a drafter: the decoding speedup (after the prefill) with its interval
    (:func:`verdict_card`: the number shown whatever the verdict, never in green or red when too noisy to tell),
    or "too short to judge" instead of a number, the end-to-end ratio beside it (prefill included, never
    coloured), and both runs' rates. ``judgement`` is :func:`specviz.measure.stats.judge_decode_speedup` of the runs
    (computed here when None); ``load``: the load measured during the runs, in words, for a no-reading card."""
    from specviz.core.counters import speedup
    from specviz.measure.stats import end_to_end_interval, judge_decode_speedup

    j = judgement if judgement is not None else judge_decode_speedup(spec, base)
    running = spec.finish_reason is None  # the speculative run still going: its verdict is not in yet
    if j.verdict == "too short":
        words = "measuring… (judged once enough passes are in)" if running else j.describe()
        hero = _card("Decoding speedup", "–", SPEEDUP_DEFINITION, html.escape(words), cls="hero short")
        end = _card("End to end", "–", "tokens/s ratio with the prefill included: not judged either")
    else:
        hero = verdict_card(j, load)
        value = speedup(spec, base)
        ratio = spread_html(value, end_to_end_interval(spec, base), "{:.2f}×", 2)
        end = _card("End to end", ratio if j.finding else
                    f"{NO_READING if j.verdict == 'not a finding' else j.verdict} "
                    f"<small>({_fmt(value, '{:.2f}×')} measured)</small>", END_TO_END_DEFINITION)
    rates = _card("Tokens/s after the prefill", rate_pair_html(spec, base), RATES_DEFINITION,
                  f"prefill included: {rate_pair_html(spec, base, decode=False)}")
    return [hero, end, rates]


LOOKAHEAD_DEFINITION = ("lookahead decoding: k = N−1, a candidate's length; drafted = the candidates' tokens the "
                        "target verified (every candidate of the pass, one per pass when sampling); the Jacobi "
                        "window's tokens ride in the same forwards but are never verified, so they are counted here "
                        "and not as drafted")


def lookahead_cards(spec) -> list[str]:
    """The lookahead card of a run whose passes carried a Jacobi window (``spec.window_tokens`` > 0), else none:
    the window's tokens per pass (fed to the target for the Jacobi guesses, never verified nor emitted: not to be
    read as tokens per pass), with the definitions of k and "drafted" for lookahead."""
    if not getattr(spec, "window_tokens", 0) or not spec.passes:
        return []
    per_pass = spec.window_tokens / spec.passes
    return [_card("Window tokens per pass (not verified)", f"{per_pass:.1f} <small>window tokens / pass</small>",
                  LOOKAHEAD_DEFINITION,
                  f"{plural(spec.window_tokens, 'window token')} in {plural(spec.passes, 'pass', 'passes')} · "
                  f"{plural(spec.drafted, 'candidate token')} verified (drafted), {spec.accepted} accepted")]


COUNTED_SPREAD = ("in brackets the 95% interval over the passes: the wider of the bootstrap over the passes and "
                  "the Wilson interval of the counts")
"""How the acceptance and α cards' intervals are drawn (:func:`specviz.measure.stats.pass_share_interval`)."""

TOKENS_PER_PASS_DEFINITION = ("emitted ÷ target passes, bonus included; expected (1 − α^(m+1)) ÷ (1 − α), "
                              "m = the tokens of the chain a pass offers, on average (m + 1 when α = 1)")
"""The "Tokens per pass" card's definition: the formula
:attr:`~specviz.measure.run_stats.RunStats.expected_tokens_per_pass` computes (Leviathan et al. 2023, eq. 1, with
the run's mean chain m for k: a pass may draft fewer than k, a tree offers its depth, lookahead its kept candidate;
:func:`specviz.core.counters.chain_tokens`)."""

def drafted_text(spec, gate: float = 0.0) -> str:
    """The acceptance card's counts: "6 of 32 drafted"; a tree's "accepted of drafted" with its nodes per tree; with
    a confidence gate ``gate`` > 0 (chains), the drafted tokens per pass and the gate that cut them: "6 of 32
    drafted, 1.2 per pass: the confidence gate 0.2 ends a draft where the draft is unsure" (a trial read "6 of 32
    drafted" under "k = 4" and could not tell why fewer than k were drafted)."""
    if spec.tree_passes:
        return (f"{spec.accepted} accepted of {spec.drafted} drafted; tree passes count every node verified "
                f"({_fmt(spec.mean_nodes_per_tree, '{:.1f}')} per tree)")
    counts = f"{spec.accepted} of {spec.drafted} drafted"
    if gate <= 0 or not spec.passes:
        return counts
    return (f"{counts}, {spec.drafted / spec.passes:.1f} per pass: the confidence gate {gate:g} ends a draft where "
            "the draft is unsure")


_CHAIN_OF = {"tree": "a tree's depth", "lookahead": "the kept candidate's tokens, k = N−1 at most"}


def expected_text(spec) -> str:
    """The "Tokens per pass" card's expected value with the α and m it is computed from, so the formula of
    :data:`TOKENS_PER_PASS_DEFINITION` can be checked by hand: "expected from α 0.92, m 3.41: 3.85"; "expected: –
    (nothing judged yet)" before the target judged a draft. m is the counters' mean chain
    (:attr:`~specviz.core.counters.Counters.mean_chain`), said when it is not the drafted tokens per pass: a tree's
    depth, or lookahead's kept candidate (it verifies G candidates but keeps one; a trial read "m 3.00: 2.83" at
    N = 3, G = 2, where no pass can give more than 3 tokens)."""
    expected = spec.expected_tokens_per_pass
    if expected is None:
        return "expected: – (nothing judged yet)"
    kind = "tree" if spec.tree_passes else "lookahead" if spec.window_tokens else None
    said = f" ({_CHAIN_OF[kind]})" if kind else ""
    return f"expected from α {spec.alpha:.2f}, m {spec.mean_chain:.2f}{said}: {expected:.2f}"


def stats_html(spec, base, comparison: Comparison, *, greedy: bool, stopped: bool = False, judgement=None,
               load: str | None = None, gate: float = 0.0) -> str:
    """The figures of a run (spec RunStats or None when there was no drafter, baseline RunStats), each card
    with its definition underneath. ``stopped``: the user stopped the run, so an output check that found no
    difference reads "so far" instead of waiting for the end. ``judgement``: the decoding speedup's, ``load``: the
    load measured during the runs in words (see :func:`speedup_cards`). ``gate``: the run's confidence gate in
    [0, 1) (0: none), said beside the drafted count (:func:`drafted_text`)."""
    esc = html.escape
    cards = []
    if spec is not None:
        cards.extend(speedup_cards(spec, base, judgement, load))
        drafted_what = drafted_text(spec, gate)
        cards.append(_card("Acceptance rate", counted_html(spec.acceptance_rate, spec.acceptance_interval(), spec,
                                                           percent=True),
                           "accepted ÷ drafted (bonus excluded); only committed drafts count: drafts after the end "
                           f"(EOS, stop, max tokens) are neither; {COUNTED_SPREAD}", drafted_what))
        cards.extend(lookahead_cards(spec))
        cards.append(_card("Per-token α", counted_html(spec.alpha, spec.alpha_interval(), spec),
                           f"accepted ÷ (accepted + rejections): only positions the target judged; {COUNTED_SPREAD}"))
        cards.append(_card("Tokens per pass", counted_html(spec.tokens_per_pass, spec.tokens_per_pass_interval(), spec),
                           f"{TOKENS_PER_PASS_DEFINITION}; in brackets the 95% bootstrap interval over the passes",
                           f"{expected_text(spec)} · {plural(spec.passes, 'target pass', 'target passes')} vs "
                           f"{plural(base.passes, 'baseline step')}"))
        scale = largest_ms(*(run.ttft_ms for run in (spec, base) if run.curve_ms))  # one unit for the card
        cards.append(_card("Time to first token", ttft_html(spec, scale), TTFT_DEFINITION,
                           f"baseline: {ttft_html(base, scale)}"))
        cards.append(time_card(spec, base))
        cards.append(_card("Finish reason", f"{esc(spec.finish_reason or '…')} <small>/</small> "
                           f"{esc(base.finish_reason or '…')}", "speculative / baseline: eos, stop string or "
                           "max new tokens (length)"))
    else:  # drafter "none": one run, standard decoding; nothing is drafted, so there is nothing to compare
        cards.append(_card("Tokens/s after the prefill", spread_html(base.decode_tokens_per_s, base.decode_rate()),
                           "tokens after the first ÷ time after the prefill, own clock (the pane's figure); in "
                           "brackets its 95% bootstrap interval over the run's passes",
                           f"prefill included: {prefill_included_html(base)}", cls="hero"))
        cards.append(_card("Time to first token", ttft_html(base), TTFT_DEFINITION))
        cards.append(_card("Finish reason", esc(base.finish_reason or "…"), "eos, stop string or length"))
        cards.append(_card("Standard decoding only", "no comparison", "drafter “none” runs the target alone, one "
                           "forward per token: the pane on the right is the whole run",
                           "Nothing is drafted, so there is no acceptance, tokens per pass (1 by definition), speedup "
                           "or output check, and only the latency and time charts are drawn. Pick a "
                           "drafter to race it against this standard decoding.", cls="wide none-run"))
        return f'<div class="stats">{"".join(cards)}</div>'
    mark = {True: "✓", False: "✗", None: "…"}[comparison.identical]
    cls = {True: "good", False: "warn", None: ""}[comparison.identical]
    if stopped and comparison.identical is None:
        mark, cls = ("✓ so far", "good") if greedy else ("– (stopped)", "")
    if not greedy and comparison.identical is False:  # expected when sampling: same distribution, other draws
        mark, cls = "≠ ids, same distribution", ""
    title = "Greedy output = baseline?" if greedy else "Output vs baseline (sampling)"
    rule = ("speculative decoding must not change the output: greedy ids are the baseline's" if greedy else
            "sampling draws other random numbers in each run, so the ids may differ; what must not change is the "
            "distribution they are drawn from (the Batching tab's check tests it)")
    cards.append(_card(title, mark, rule, esc(comparison.message), cls=f"wide {cls}"))
    return f'<div class="stats">{"".join(cards)}</div>'
