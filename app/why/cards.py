"""The summary cards under the forward-time chart (:func:`summary_html`): weights read, the one-token step, the
copy bandwidth, the cost of verifying k=4, the drafters' c and a lookahead pass's cost, each cost ratio read by the
rule every tab uses (:func:`cost_reading`) with the spread of its repeats."""

from __future__ import annotations

import html
import statistics

from app.why.noise import noisy_c, possible_curve, spread_noise_text, spread_too_wide
from specviz.core.costs import interpolate
from specviz.core.verdict import SAME, Verdict, read_speedup
from specviz.measure.costs import lookahead_pass_cost


def _lookahead_cards(grid: dict, batch: int, settings, latest: bool) -> list[tuple[str, str, str]]:
    """(label, value, note) per lookahead setting: its full pass's forward against a one-token step, read from the
    ``batch`` curve of ``grid`` without its impossible points (:func:`specviz.measure.costs.lookahead_pass_cost`),
    with the range of the same ratio over the repeats (:func:`_ratio_spread`). ``latest``: the first setting is
    the newest Live run's."""
    curve = possible_curve(grid, batch)
    cards = []
    for i, (w, n, g) in enumerate(settings):
        if 1 not in curve or len(curve) < 2:
            break
        cost = lookahead_pass_cost(curve, w, n, g)
        how = "measured" if cost["measured"] else "extrapolated" if cost["extrapolated"] else "interpolated"
        whose = "your latest Live run" if latest and i == 0 else "the default"
        label = f"Lookahead pass (W={w}, N={n}, G={g})"
        ratio = repeats_ratio(grid, batch, cost["tokens"], cost["ratio"])
        head = (f"{whose}: 1 + W(N−1) + G(N−1) = {cost['tokens']} tokens in one forward, T({cost['tokens']})/T(1) "
                f"({how}; {_source(grid, batch, cost['tokens'])})")
        read = cost_reading(grid, batch, cost["tokens"], ratio)
        if not read.finding:  # more tokens timed cheaper than one, or repeats far apart across one step: noise
            cards.append(_noisy_card(label, read, head))
            continue
        cards.append((label, f"{ratio:.2f} <small>steps</small>",
                      f"{head}{ONE_STEP if read.word == SAME else ''}; it pays only above {ratio:.2f} "
                      "tokens per pass" + _ratio_spread(grid, batch, cost["tokens"])))
    return cards


NOISY_TAG = ": too noisy to tell"
"""Put after a card's unit when its repeats spread too far (:func:`app.why.noise.spread_too_wide`): the number is
kept, labelled as :func:`_noisy_card` labels a noisy cost ratio."""
ONE_STEP = " (the same as one step within noise: the flat part of the curve)"
NOT_FREE = 1.5
"""A k = 4 verification at or above this many one-token steps is said not to be nearly free (:data:`NOT_FREE_WORDS`):
the intro's heading holds where a step waits on memory; a trial on int4 weights read 2.61 steps under it."""
NOT_FREE_WORDS = ("; not nearly free here: this step reads so few bytes (or the machine is so busy) that the "
                  "arithmetic of 5 tokens shows, so drafts must be accepted more often to pay")
"""Said of a cost ratio whose repeats straddle 1 narrowly (the rule's "about the same")."""


def cost_reading(grid: dict, batch: int, n: float, cost: float) -> Verdict:
    """A cost ratio T(n)/T(1) at ``batch`` read by the rule every tab uses (:func:`specviz.core.verdict.read_speedup`)
    on its per-repeat ratios (:func:`round_ratios`; the ratio alone without them): every repeat above 1 is a cost
    ("faster" in the rule's words: more than one step), repeats across 1 and close together the same as one step
    ("about the same": the flat part of the curve), every repeat below 1 impossible (more tokens timed cheaper than
    one) and repeats across 1 far apart too noisy to tell."""
    ratios = round_ratios(grid, batch, n) or [cost]
    low, high = min(min(ratios), cost), max(max(ratios), cost)
    return read_speedup(cost, low, high, impossible="more tokens timed cheaper than one" if high < 1 else None)


def _noisy_card(label: str, read: Verdict, what: str) -> tuple[str, str, str]:
    """A cost card whose ratio is no finding (:func:`cost_reading`): the number kept, and why."""
    if read.high < 1:
        why = ("a forward over more tokens cannot take less time than over one, so this is noise from other work on "
               "the machine")
    else:
        why = f"its repeats fall on both sides of one step and far apart ({read.low:.2f}–{read.high:.2f})"
    return (label, f"{read.value:.2f} <small>steps: {read.word}</small>",
            f"{what} measured {read.value:.2f}: {why}; measure again when it is quieter")


def round_ratios(grid: dict, batch: int, n: float) -> list[float]:
    """T(n)/T(1) at ``batch`` once per repeat: repeat i of every token count was timed in the same round
    (:func:`specviz.measure.grid.measure_forward_grid`'s ``"samples"``), so each round gives its own curve, read at
    ``n`` as the medians are (:func:`specviz.core.costs.interpolate` between measured counts; points flagged
    impossible left out). [] without per-repeat samples or without T(1)."""
    samples = grid.get("samples", {}).get(batch, {})
    bad = {p["n"] for p in grid.get("impossible", []) if p["batch"] == batch}
    kept = {m: t for m, t in samples.items() if m not in bad and t}
    if 1 not in kept or len(kept) < 2:
        return []
    rounds = min(len(t) for t in kept.values())
    curves = [{m: t[i] for m, t in kept.items()} for i in range(rounds)]
    return [interpolate(curve, n) / curve[1] for curve in curves if curve[1] > 0]


def repeats_ratio(grid: dict, batch: int, n: float, curve_ratio: float) -> float:
    """A card's T(n)/T(1) at ``batch``: the median of the per-repeat ratios (:func:`round_ratios`), the same source
    as the range printed beside it (:func:`_ratio_spread`), so the figure lies within it; ``curve_ratio`` (the
    ratio of the median curve) without per-repeat samples. A trial's k = 4 card read 1.65 steps, the median curve's
    ratio, beside "repeats 1.73–1.85": the medians of T(5) and T(1) came from different rounds."""
    ratios = round_ratios(grid, batch, n)
    return statistics.median(ratios) if ratios else curve_ratio


def _source(grid: dict, batch: int, n: float) -> str:
    """Where a card's ratio comes from, in a few words (:func:`repeats_ratio`)."""
    count = len(round_ratios(grid, batch, n))
    if count > 1:
        return f"the median of {count} repeats, each timed T({n:g}) and T(1) in the same round"
    return "one repeat" if count == 1 else "the median curve"


def _ratio_spread(grid: dict, batch: int, n: float) -> str:
    """"; repeats a–b" for T(n)/T(1) at ``batch``: the lowest and highest of the per-repeat ratios
    (:func:`round_ratios`); "; one repeat: no spread" with a single repeat, "" without per-repeat samples."""
    ratios = round_ratios(grid, batch, n)
    if len(ratios) == 1:
        return "; one repeat: no spread"
    return f"; repeats {min(ratios):.2f}–{max(ratios):.2f}" if ratios else ""


def bandwidth_card(grid: dict) -> tuple[str, str, str]:
    """The memory copy bandwidth card (label, value, note) of ``grid`` (GB/s, the median of its repeats), with the
    repeats' range ("; repeats 17.9–19.2 GB/s"), marked too noisy to tell when they spread too far
    (:func:`app.why.noise.spread_too_wide`), or "; repeats not kept: no spread" for a grid that kept no range (one
    measured before it was kept). A trial's card read "18.6 GB/s" with no spread beside cards that gave theirs."""
    span = grid.get("copy_bandwidth_range")
    noisy = span is not None and spread_too_wide(span[0], span[1])
    what = "read + written by a large tensor copy: the ceiling for reading weights"
    if noisy:
        what += f"; {spread_noise_text(span[0], span[1], ' GB/s')}"
    else:
        what += f"; repeats {span[0]:.1f}–{span[1]:.1f} GB/s" if span else "; repeats not kept: no spread"
    return ("Memory copy bandwidth",
            f"{grid['copy_bandwidth_gbs']:.1f} <small>GB/s{NOISY_TAG if noisy else ''}</small>", what)


def summary_html(grid: dict, costs: dict | None, lookahead=()) -> str:
    """Cards: weights read per forward, the one-token step and its GB/s, the copy bandwidth, the cost of a
    k=4 verification at batch 1 and the largest batch, the measured c of the drafters, and a full lookahead pass's
    cost for each (W, N, G) of ``lookahead`` (:func:`lookahead_settings`)."""
    ms = {b: possible_curve(grid, b) for b in grid["ms"]}
    first, last = min(ms), max(ms)
    step = ms[first].get(1)
    spread = grid.get("spread", {}).get(first, {}).get(1)
    cards = [("Weights read per forward", f"{grid['param_bytes'] / 1e6:,.0f} <small>MB</small>",
              "every parameter once, whatever the number of tokens")]
    if grid.get("impossible"):
        cards.insert(0, ("Impossible points", f"{len(grid['impossible'])} <small>flagged ✕</small>",
                         "faster than less work even when measured again: noise, left out of every figure here"))
    if step:
        noisy = spread is not None and spread_too_wide(spread[0], spread[1])
        cards.append(("One-token step (batch 1)", f"{step:.1f} <small>ms{NOISY_TAG if noisy else ''}</small>",
                      f"= {grid['param_bytes'] / (step / 1000) / 1e9:.1f} GB/s of weights (effective)"
                      + (f"; {spread_noise_text(spread[0], spread[1], ' ms')}" if noisy else
                         f"; repeats {spread[0]:.1f}–{spread[1]:.1f} ms" if spread else "")))
    if grid.get("copy_bandwidth_gbs"):
        cards.append(bandwidth_card(grid))
    for batch in dict.fromkeys((first, last)):
        row = ms[batch]
        if 1 in row and len(row) > 1:
            cost = repeats_ratio(grid, batch, 5, interpolate(row, 5) / row[1])
            read = cost_reading(grid, batch, 5, cost)
            what = f"T(5)/T(1) ({_source(grid, batch, 5)})"
            if not read.finding:
                cards.append(_noisy_card(f"Verifying k=4 (batch {batch})", read, what))
                continue
            cards.append((f"Verifying k=4 (batch {batch})", f"{cost:.2f} <small>steps</small>",
                          f"{what}: 5 tokens for the price of {cost:.2f}{ONE_STEP if read.word == SAME else ''}"
                          + _ratio_spread(grid, batch, 5) + (NOT_FREE_WORDS if cost >= NOT_FREE else "")))
    if costs:
        layer = int(costs.get("early_exit_layer", 0))
        span = costs.get("early-exit_range")
        noisy = noisy_c(costs)
        tag = NOISY_TAG if noisy else ""
        cards.append(("Draft cost c", f"{costs['early-exit']:.2f} <small>early exit{tag}</small>",
                      f"first {layer} layers, 1 token ÷ a target step"
                      + (f"; {noisy}" if noisy else f"; repeats {span[0]:.2f}–{span[1]:.2f}" if span else "")
                      + f"; n-gram lookup: {ngram_text(costs)}"))
    cards += _lookahead_cards(grid, first, lookahead, latest=len(lookahead) > 1)
    body = "".join(f"<div class='card'><div class='card-label'>{html.escape(label)}</div>"
                   f"<div class='card-value'>{value}</div><div class='card-def'>{html.escape(note)}</div></div>"
                   for label, value, note in cards)
    return f"<div class='stats why-cards'>{body}</div>"


def ngram_text(costs: dict) -> str:
    """The n-gram lookup's measured c with its repeats' range (``costs``:
    :func:`specviz.measure.costs.measure_draft_costs`'s; a
    measurement from before the range was kept gives the figure alone): "0.0003 (repeats 0.0002–0.0005; the lookup
    alone, microseconds)"."""
    span = costs.get("ngram_range")
    spread = f"repeats {span[0]:.4f}–{span[1]:.4f}; " if span else ""
    return f"{costs['ngram']:.4f} ({spread}the lookup alone, microseconds)"
