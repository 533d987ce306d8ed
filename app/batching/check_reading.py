"""How the check's result is read: what was counted, whether the chi-square tests ran (:func:`too_few`), how many
runs they need (:func:`runs_needed`), the lesson (:func:`check_lesson`) and the statistics
(:func:`check_stats_html`)."""

from __future__ import annotations

from app import render
from app.batching.check_job import CHECK_TOKENS, MAX_N
from specviz.analysis.batching import MIN_EXPECTED, pairs_needed

LEVEL = 0.01  # the tests' significance level


def counted(result: dict, side: str) -> int:
    """How many of the side's runs were counted (their first token was the most frequent one)."""
    return sum(result[side].values())


def p_text(p: float) -> str:
    """A p-value as people write it: "p < 0.001", "p = 0.004", "p = 0.43"."""
    if p != p:
        return "p = –"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}" if p < LEVEL else f"p = {p:.2f}"


def p_verdict(p: float) -> str:
    """A p-value with the rule that reads it beside it, so a p above the level does not read as a failure:
    "p = 0.04 (above 0.01: no evidence of a difference)", "p = 0.004 (below 0.01: evidence of a difference)";
    "p = –" for a test that did not run (nan)."""
    if p != p:
        return p_text(p)
    side = "below" if p < LEVEL else "above"
    found = "evidence of a difference" if p < LEVEL else "no evidence of a difference"
    return f"{p_text(p)} ({side} {LEVEL:g}: {found})"


def conditioning_line(result: dict) -> str:
    """What was counted, in one line."""
    return (f"Counted: the runs whose first token (the prefill's, which never meets the verifier) was the most "
            f"frequent one, “{result['first_text']}”: {counted(result, 'standard')} of {result['n']} standard and "
            f"{counted(result, 'speculative')} of {result['n']} speculative runs; the test compares the next two "
            "tokens, where the drafts are verified.")


def testable(test: tuple) -> bool:
    """Whether a chi-square test (statistic, p, dof) ran: at least two cells were frequent enough (dof > 0 and a
    p-value); :func:`specviz.analysis.batching.sampling_check` returns (nan, nan, 0) for one that had too few."""
    stat, p, dof = test
    return dof > 0 and p == p


def too_few(result: dict) -> bool:
    """Whether the check has too few counted runs to test against the exact law (either side's goodness of fit did
    not run): then no p-value is read or shown at all (:func:`check_stats_html`, :func:`check_lesson`)."""
    return not (testable(result["fit_standard"]) and testable(result["fit_speculative"]))


def runs_needed(result: dict) -> tuple[int, int] | None:
    """(counted runs per side, N runs per side) the goodness of fit needs on this prompt: two pairs of the exact law
    expected at least :data:`MIN_EXPECTED` times among the counted runs, so the second most likely pair (probability
    p2) needs 5 / p2 counted runs; N scales that by the share of runs counted (the side with fewer). None when the
    exact law has fewer than two pairs."""
    shares = [counted(result, side) / result["n"] for side in ("standard", "speculative")]
    share = min(shares) if min(shares) > 0 else max(max(shares), 1 / result["n"])
    return pairs_needed(result["exact"], share)


def too_few_sentence(result: dict) -> str:
    """Why nothing was tested and how many runs would be: the counted runs, the second most likely pair and the N
    it needs (beyond :data:`MAX_N`: what else to change)."""
    got = (f"{counted(result, 'standard')} standard and {counted(result, 'speculative')} speculative runs of "
           f"{result['n']} were counted")
    needed = runs_needed(result)
    if needed is None:
        return (f"Too few to test, so no p-value: {got}, and the target's exact law has fewer than two likely pairs "
                "here; pick a more open prompt, or raise the temperature.")
    need, n = needed
    second = sorted(result["exact"], key=lambda c: -result["exact"][c])[1]
    label = result.get("labels", {}).get(second, "the second most likely pair")
    head = (f"Too few to test, so no p-value: {got}; the chi-square test needs two pairs expected at least "
            f"{MIN_EXPECTED} times, and the second most likely, {label} (p = {result['exact'][second]:.3f}), gets "
            f"there at {need:,} counted runs")
    if n <= MAX_N:
        return f"{head}: about N = {n:,} runs per side. Raise N to {n:,} or more."
    return (f"{head}: about N = {n:,} runs per side, more than this check allows ({MAX_N:,}). Pick a prompt or a "
            "temperature that makes the two likeliest pairs more frequent.")


def check_lesson(result: dict) -> str:
    """The plain sentence of the check: what the p-values say, given the verifier used and what was drafted."""
    fit_std, fit_spec, same = (result[key][1] for key in ("fit_standard", "fit_speculative", "homogeneity"))
    if not result.get("tally", {}).get("proposed", 1):
        return ("The drafter proposed nothing in these runs, so every speculative run was standard decoding and "
                "there is nothing to test: pick a drafter that drafts here, or a prompt it can copy from (the "
                "n-gram drafter copies what followed the same token earlier in the prompt).")
    if too_few(result):
        return too_few_sentence(result)
    if result["broken"]:
        if fit_spec < LEVEL:
            return (f"Speculative vs the exact law: {p_verdict(fit_spec)}: accepting every draft makes the output "
                    "follow the drafter, and the test catches it.")
        return (f"Speculative vs the exact law: {p_verdict(fit_spec)}: even the broken verifier passed here: the "
                "drafter's guesses happen to match what the target samples, or N is too small to tell; pick a "
                "drafter that disagrees, or raise N.")
    if fit_spec >= LEVEL and fit_std >= LEVEL:
        return _both_agree(result, fit_std, fit_spec, same)
    if fit_std >= LEVEL:
        return (f"The speculative sample disagrees with the exact law ({p_verdict(fit_spec)}) while the standard one "
                f"agrees ({p_verdict(fit_std)}): at the 1% level that happens by chance once in a hundred checks; "
                "run it again with a larger N, and if it persists the sampler is wrong.")
    return (f"The standard sample disagrees with the exact law ({p_verdict(fit_std)}; the speculative one: "
            f"{p_verdict(fit_spec)}): standard decoding samples the target directly, so this is one of the checks "
            "that fail by chance at the 1% level, or the exact law is off; run it again with a larger N.")


def _both_agree(result: dict, fit_std: float, fit_spec: float, same: float) -> str:
    """The lesson when neither sample departs from the exact law (both p at or above :data:`LEVEL`), with the
    homogeneity test between them (``same``) read by the same rule."""
    fits = (f"standard {p_text(fit_std)}, speculative {p_text(fit_spec)}: each above {LEVEL:g}, where only a p below it "
            "rejects")
    if testable(result["homogeneity"]) and same < LEVEL:
        return (f"Each sample agrees with the exact law ({fits}), but they differ from each other "
                f"({p_verdict(same)}): at the 1% level that happens by chance once in a hundred checks; run it "
                "again with a larger N, and if it persists the sampler is wrong.")
    between = p_verdict(same) if testable(result["homogeneity"]) else "too few runs to compare"
    counted_runs = min(counted(result, "standard"), counted(result, "speculative"))
    return (f"No evidence of a difference: neither sample departs from the target's exact probabilities ({fits}; "
            f"between them {between}). A test does not prove equality: with {counted_runs} counted runs per side it "
            "would catch a gross error (as the broken verifier shows) but not a small one; raise N to look closer.")


def check_stats_html(result: dict) -> str:
    """The statistics: each sample's chi-square goodness of fit against the exact law, the homogeneity test
    between them, what the drafter proposed, and what was counted."""
    import html

    untested = too_few(result)  # then no test is read: every row says so, none prints a p-value

    def row(name: str, test: tuple, runs: str) -> str:
        stat, p, dof = test
        if untested or not testable(test):
            cells = (name, runs, "–", "–", "too few to test")
        else:
            cells = (name, runs, f"{stat:.1f}", str(dof), p_text(p).removeprefix("p "))
        return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"

    tally = result.get("tally", {})
    body = (row("standard vs the exact law", result["fit_standard"], f"{counted(result, 'standard')} of {result['n']}")
            + row("speculative vs the exact law", result["fit_speculative"],
                  f"{counted(result, 'speculative')} of {result['n']}")
            + row("standard vs speculative (homogeneity)", result["homogeneity"], "both"))
    drafted = (f"The drafter proposed {render.plural(tally.get('proposed', 0), 'token')} in "
               f"{render.plural(tally.get('passes', 0), 'pass', 'passes')} "
               f"(each run drafts at most {render.plural(CHECK_TOKENS - 2, 'token')}, the second: a run makes "
               f"{CHECK_TOKENS} tokens and the last is the target's own)." if tally else "")
    table = (f"<table class='batching-stats'><tr><th>chi-square test</th><th>runs counted</th><th>χ²</th>"
             f"<th>dof</th><th>p (below {LEVEL:g} rejects)</th></tr>{body}</table>")
    return (render.scroll_box(table, "Chi-square tests") +
            f"<p class='batching-note'>{html.escape(conditioning_line(result))} {html.escape(drafted)} Cells "
            f"expected fewer than {MIN_EXPECTED} times are pooled into one; p below 0.01 rejects.</p>")
