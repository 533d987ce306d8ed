"""What-if k, as text: the recommended k with how far to trust it (the bootstrap ranges, a best k at the edge),
the check inside the run and after a re-run (predicted beside measured), the per-k table, the status line and the
re-run button."""

from __future__ import annotations

import html

import gradio as gr

from app import render
from specviz.analysis.whatif import MIN_PASSES, WhatIf


ONE_RUN = "one run: no spread"
"""The mark of a measured speedup of the what-if: one speculative run against one baseline run, one sample."""


def _with_range(value: float | None, spread: tuple[float, float] | None, digits: int, unit: str = "",
                single: str | None = None, none: str = "–") -> str:
    """A figure with its spread, e.g. "1.96× (1.50–2.30)" (``spread``: (low, high)); with no spread, ``single``
    (e.g. :data:`ONE_RUN`) marks it as one sample; ``none`` when there is no value."""
    if value is None:
        return none
    text = f"{value:.{digits}f}{unit}"
    if spread is not None:
        return f"{text} <small class=\"wi-range\">({range_words(spread, digits)})</small>"
    return f"{text} <small class=\"wi-range\">({single})</small>" if single else text


def range_words(spread: tuple[float, float], digits: int) -> str:
    """"1.50–2.30"; "all resamples equal" where both ends read the same at ``digits`` (every resample of the
    passes gave one value, e.g. every pass accepted all k: a range "1.96–1.96" would read as a typo)."""
    low, high = f"{spread[0]:.{digits}f}", f"{spread[1]:.{digits}f}"
    return "all resamples equal" if low == high else f"{low}–{high}"


def _predicts(low: float, high: float) -> str:
    """A speedup's range for a sentence: "1.50–2.30×", or "1.96× in every resample" where both ends read the same."""
    words = range_words((low, high), 2)
    return f"{low:.2f}× in every resample" if words == "all resamples equal" else f"{words}×"


def plain_range(value: float | None, spread: tuple[float, float] | None) -> str:
    """A speedup for a status line (plain text): "1.96× (1.50–2.30)", "1.96×" or "–"."""
    if value is None:
        return "–"
    return f"{value:.2f}×" + (f" ({range_words(spread, 2)})" if spread is not None else "")


def _range_note(spread) -> str:
    """What the ranges after the check's figures are (nothing without a spread)."""
    if spread is None:
        return ""
    return (f' <small>Ranges: {spread.level:.0%} of {spread.resamples} resamples of the run\'s {spread.passes} '
            "passes.</small>")


def whatif_caveats(result: WhatIf) -> list[str]:
    """How far to trust the recommended k (HTML lines): the bootstrap range of its prediction and how often it
    came out best (:func:`specviz.analysis.whatif.spread`), or that the run had too few passes to tell the k apart;
    and, when the best k is the largest tried, that a larger one might be faster still."""
    rec, spread, lines = result.recommended, result.spread, []
    if spread is not None:
        runners = sorted(((share, k) for k, share in enumerate(spread.best_share, 1) if k != rec.k and share >= 0.1),
                         reverse=True)
        others = "".join(f"; k = {k} in {share:.0%}" for share, k in runners)
        lines.append(f"Spread: over {spread.resamples} resamples of the run's {spread.passes} passes, k = {rec.k} "
                     f"predicts {_predicts(spread.low[rec.k - 1], spread.high[rec.k - 1])} ({spread.level:.0%} of "
                     f"them) and comes out best in {spread.best_share[rec.k - 1]:.0%}{others}.")
        if spread.too_few:
            lines.append(f"<b>Too few passes to tell:</b> {spread.passes} passes (fewer than {MIN_PASSES}) say little "
                         "about which k is best: allow more tokens per run and run the what-if again.")
    if result.best_at_edge:
        lines.append(f"<b>The best k is the largest tried</b> (k = {result.k_max}): a larger k might be faster still. "
                     "Raise Largest k and run the what-if again to find the peak.")
    return lines


def rerun_k(result: WhatIf) -> int | None:
    """The k that "Re-run at the recommended k" checks: the recommended k, or None when it is the k the what-if
    run itself used (its measured speedup is already the check)."""
    return None if result.recommended.k == result.k_max else result.recommended.k


def rerun_button(result: WhatIf) -> gr.Button:
    """The re-run button after a what-if: "Re-run at k = k* to check", or, when k* is the run's own k, off and
    saying that it was measured in this run."""
    k = rerun_k(result)
    if k is None:
        return gr.Button(value=f"k = {result.k_max} was measured in this run", interactive=False)
    return gr.Button(value=f"Re-run at k = {k} to check", interactive=True)


def whatif_html(result: WhatIf, check: dict | None = None) -> str:
    """The what-if summary: the recommended k, and after a re-run its predicted and measured figures side by side;
    then the per-k table."""
    rec, costs = result.recommended, result.costs
    # a run too short to tell the k apart names its best k without recommending it (trial: "Recommended k = 6" above
    # "Too few passes to tell")
    head = "Best k in this short run" if result.spread is not None and result.spread.too_few else "Recommended"
    lines = [f'<div class="wi-head">{head} <b>k = {rec.k}</b>: predicted <b>{rec.speedup:.2f}×</b> '
             f'({rec.expected_tokens:.2f} tokens per pass; a pass costs {rec.pass_ms:.1f} ms, a standard step '
             f'{costs.step_ms:.1f} ms).</div>']
    if rec.speedup < 1:
        lines.append('<div class="wi-note">No k beats standard decoding here: drafting and verifying cost more '
                     'than the accepted tokens save on this machine.</div>')
    lines.extend(f'<div class="wi-note wi-caveat">{line}</div>' for line in whatif_caveats(result))
    if result.measured_speedup is not None:
        at_max, spread = result.at(result.k_max), result.spread
        (speed, tau) = spread.at(result.k_max) if spread is not None else (None, None)
        measured_tau = _with_range(result.measured_tokens_per_pass, spread.measured_tokens if spread else None, 2,
                                   none="– (no pass drafted k)")
        lines.append(f'<div class="wi-note" id="whatif-inside">Check inside this run (k = {result.k_max}): predicted '
                     f'{_with_range(at_max.speedup, speed, 2, "×")}, measured '
                     f'{_with_range(result.measured_speedup, None, 2, "×", single=ONE_RUN)}; tokens per pass '
                     f'predicted {_with_range(at_max.expected_tokens, tau, 2)}, measured {measured_tau}.'
                     f'{_range_note(spread)}</div>')
    if check is not None:
        ranges = check.get("ranges", {})
        rows = [(f"tokens per pass (passes drafting k = {check['k']})",
                 _with_range(check["predicted_tau"], ranges.get("predicted_tau"), 2),
                 _with_range(check["measured_tau"], ranges.get("measured_tau"), 2)),
                ("decoding speedup (prefill excluded)",
                 _with_range(check["predicted"], ranges.get("predicted"), 2, "×"),
                 _with_range(check["measured"], None, 2, "×", single=ONE_RUN)),
                ("tokens/s ratio (prefill included)",
                 _with_range(check["predicted_e2e"], ranges.get("predicted_e2e"), 2, "×"),
                 _with_range(check["measured_e2e"], None, 2, "×", single=ONE_RUN))]
        body = "".join(f"<tr><th>{html.escape(a)}</th><td>{b}</td><td>{c}</td></tr>" for a, b, c in rows)
        note = ("Ranges: 80% of the bootstrap resamples of the runs' passes (the what-if run's for the "
                "predictions, the re-run's for its tokens per pass); a speedup from one run pair has no spread.")
        if result.spread is not None:
            note = note.replace("80%", f"{result.spread.level:.0%}")
        lines.append(render.scroll_box(
            f'<table class="wi-check" id="whatif-check"><caption>Re-run at k = {check["k"]} ({check["tokens"]} '
            f'tokens, new baseline run)</caption><thead><tr><th></th><th>predicted</th><th>measured</th></tr></thead>'
            f'<tbody>{body}</tbody></table>', f"Re-run at k = {check['k']}: predicted and measured"))
        lines.append(f'<div class="wi-note wi-range-note">{note}</div>')
    cells = "".join(
        f'<tr{" class=wi-best" if p.k == rec.k else ""}><td>{p.k}</td><td>{result.rates[p.k - 1]:.2f}</td>'
        f'<td>{p.expected_tokens:.2f}</td><td>{p.pass_ms:.1f}</td><td>{p.speedup:.2f}×</td></tr>'
        for p in result.predictions)
    table = render.scroll_box('<table class="wi-table"><thead><tr><th>k</th><th>a_k (accept k | k−1 accepted)</th>'
                              '<th>E[tokens/pass]</th><th>pass ms</th><th>predicted</th></tr></thead>'
                              f'<tbody>{cells}</tbody></table>', "Per-k numbers")
    lines.append(f'<details class="wi-details"><summary>Per-k numbers</summary>{table}'
                 f'<p>Draft {costs.draft_ms_per_token:.2f} ms per token; other work {costs.pass_overhead_ms:.2f} ms '
                 f'per pass; verify time interpolated between the one-token forward ({costs.step_forward_ms:.1f} ms)'
                 f' and the measured passes. Greedy decoding, {result.tokens} tokens. Tokens per pass are measured '
                 f'over the passes that drafted the full k: near the token limit a pass drafts fewer.</p></details>')
    return f'<div class="wi-result">{"".join(lines)}</div>'


def whatif_status(result: WhatIf, notes=()) -> str:
    """The status line after a what-if (HTML): what it was predicted from and what checks it next; ``notes`` under
    it (the thread cap's: :func:`app.classroom.running.on_device`)."""
    said = f"Predicted from one greedy run at k = {result.k_max} ({result.tokens} tokens"
    if result.spread is not None:
        said += f", {result.spread.passes} passes"
    said += "). "
    if rerun_k(result) is None:
        measured = "" if result.measured_speedup is None else f"{result.measured_speedup:.2f}"
        said += (f"The recommended k is the one this run used: its measured speedup "
                 f"({measured + '×, one run' if measured else '–'}) is the check.")
    else:
        said += f"Re-run at k = {result.recommended.k} to check the prediction."
    if result.spread is not None and result.spread.too_few:
        said += " Too few passes to tell the k apart: allow more tokens."
    return render.status_html(said, "done", notes=notes)
