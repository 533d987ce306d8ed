"""The sweep's lesson: one plain sentence (or a few) read off the measured rows (:func:`sweep_lesson`), every
number with its repeats' range, a pass called near 1 or costly only where every repeat is (:func:`cost_verdict`)."""

from __future__ import annotations

from app.batching.sweep_job import LONG_PROMPT_TOKENS
from app.batching.sweep_reading import (NOISY_SPREAD, VERDICT_WORDS, crossover, disturbance, impossible,
                                        impossible_reason, speedup_text, unreadable_costs, verdict)
from specviz.analysis.batching import ONE_SAMPLE, repeat_speedups, repeat_values, spread_cell

NEAR_ONE = 1.3  # a pass cost T(B, k+1) / T(B, 1) at most this "stays near 1" in the lesson


def cost_verdict(row: dict) -> str:
    """Where a row's pass cost T(B, k+1) / T(B, 1) lies against :data:`NEAR_ONE`, read off every repeat's own cost as
    :func:`verdict` reads the speedup: "near" (every repeat at most NEAR_ONE), "costly" (every repeat above),
    "unclear" (the repeats fall on both sides) or "none" (no pass cost, or :func:`impossible` timings). A row that
    kept no repeats is read off its one pass cost."""
    if row.get("pass_cost") is None or impossible(row):
        return "none"
    costs = repeat_values(row, "pass_cost") or [row["pass_cost"]]
    if max(costs) <= NEAR_ONE:
        return "near"
    return "costly" if min(costs) > NEAR_ONE else "unclear"


def _near_one(rows: list[dict]) -> tuple[int, float] | None:
    """(largest B, the highest pass cost of any repeat up to it) while every repeat's pass cost stays at most
    :data:`NEAR_ONE` (:func:`cost_verdict`), counted from the smallest B; None when the first is not."""
    best = None
    for r in rows:
        if impossible(r):
            continue
        if cost_verdict(r) != "near":
            break
        top = max(repeat_values(r, "pass_cost") or [r["pass_cost"]])
        best = (r["batch"], max(top, best[1] if best else 0.0))
    return best


def _speedup_words(row: dict) -> str:
    """A measured speedup and its repeats for the lesson: "2.15×, every repeat faster: 1.84–2.44×", "0.62×, every
    repeat slower: …", "1.00×, repeats 0.95–1.05×", "1.60×, all repeats equal", or "1.60×, one sample" from a
    single repeat."""
    ups = repeat_speedups(row)
    if len(ups) < 2:
        return f"{row['speedup']:.2f}×, {ONE_SAMPLE}"
    if min(ups) == max(ups):
        return f"{row['speedup']:.2f}×, all repeats equal"
    spread = f"{min(ups):.2f}–{max(ups):.2f}×"
    said = verdict(row)
    if said in ("pays", "loses"):
        return f"{row['speedup']:.2f}×, every repeat {VERDICT_WORDS[said]}: {spread}"
    return f"{row['speedup']:.2f}×, repeats {spread}"


def _words(row: dict, key: str, unit: str) -> str:
    """A cell and its repeats for the lesson, the unit after the value: ``_words(row, 'pass_cost', 'steps')`` gives
    "2.0 steps (1.9–2.1)" or "2.0 steps (one sample)"; ``"tokens_per_pass", "tokens per pass"`` gives
    "2.3 tokens per pass (all repeats equal)"."""
    value, _, spread = spread_cell(row, key, ".1f").partition(" ")
    return f"{value} {unit}" + (f" {spread}" if spread else "")


def _first_clause(rows: list[dict], k: int, where: str) -> str:
    """Where the pass stays cheap (read at the smallest B whose timings are possible), and whether speculation pays
    at the smallest B that was not noisy; every number with its repeats' range, and a pass called near 1 or costly
    only where every repeat is (:func:`cost_verdict`)."""
    near = _near_one(rows)
    first = next(r for r in rows if verdict(r) != "noisy")
    head = next((r for r in rows if not impossible(r)), rows[0])  # impossible timings carry no pass cost to read
    cost = cost_verdict(head)
    if near:
        cheap = (f"{where} the pass cost T(B, {k + 1}) / T(B, 1) stays near 1 (every repeat at most {near[1]:.2f}) "
                 f"up to B = {near[0]}")
    elif cost in ("costly", "unclear"):
        verb = "already costs" if cost == "costly" else "costs"
        steps = _words(head, "pass_cost", "steps")
        cheap = f"{where} a pass over {head['batch']} × {k + 1} tokens {verb} {steps} at B = {head['batch']}"
    else:  # no pass cost to read: the verdict alone ("On this CPU speculation pays (…)")
        cheap = None
    costly = cost == "costly" and not near  # "already costs N steps": a pass that is not nearly free
    at = f"at B = {first['batch']} ({_speedup_words(first)}"
    tokens = _words(first, "tokens_per_pass", "tokens per pass")
    link, claim = {
        "pays": (", yet" if costly else ", so" if near else ", and",
                 f"speculation pays {at}" + (f"; {tokens} more than cover it)" if costly else ")")),
        "even": (", and", f"speculation breaks even {at})"),
        "loses": (", so" if costly else ", but",
                  f"speculation does not pay even {at}; {tokens} do not cover the pass and the drafting)"),
    }[verdict(first)]
    return f"{cheap}{link} {claim}" if cheap else f"{where} {claim}"


def _second_clause(rows: list[dict], k: int) -> str:
    """Where the speedup falls below 1 (with the pass cost there), or that it never did."""
    first = next(r for r in rows if verdict(r) != "noisy")
    cross = crossover(rows)
    if cross is not None and cross is not first:
        cost = (f"a pass over {cross['batch']} × {k + 1} tokens costs {_words(cross, 'pass_cost', 'steps')} and "
                if cross["pass_cost"] is not None else "")
        return f"; at B = {cross['batch']} {cost}the speedup falls to {_speedup_words(cross)}."
    last = [r for r in rows if verdict(r) != "noisy"][-1]
    if last is first or verdict(last) == "loses":
        return "."
    cost = (f"; a pass over {last['batch']} × {k + 1} tokens costs {_words(last, 'pass_cost', 'steps')} there"
            if last["pass_cost"] is not None else "")
    word = {"pays": "still pays", "even": "breaks even"}[verdict(last)]
    return f"; it {word} at B = {last['batch']} ({_speedup_words(last)}{cost})."


def sweep_lesson(result: dict) -> str:
    """One plain sentence (or a few) that reads the lesson off the measured rows; noisy rows are named as such,
    never read as findings, and a sweep that other work disturbed (:func:`disturbance`) reads no pass cost
    (:func:`unreadable_costs`, as the table and the chart) and each speedup off its own repeats."""
    rows = [r for r in result["rows"] if verdict(r) != "none"]
    if not rows:
        return "Nothing was measured yet: no batch size finished."
    if unreadable_costs(result):  # the one rule the table's pass-cost cells and the chart's line follow too
        read = "; ".join(f"B = {r['batch']}: {speedup_text(r, busy=True)}" for r in rows)
        return (f"Other programs were busy: {disturbance(result)}, so the pass costs cannot be read, and each speedup "
                f"is read off its own repeats (a gain may be smaller on a quiet machine): {read}.")
    k, where = result["k"], f"On this {result.get('device', 'device')}"
    noisy = [r for r in rows if verdict(r) == "noisy"]
    if len(noisy) == len(rows):
        return ("No finding at any batch size (repeats on both sides of 1 that disagree by more than "
                f"{NOISY_SPREAD:.0%}: too noisy to tell; or impossible timings): the machine is busy; measure again "
                "when it is quieter.")
    sentence = _first_clause(rows, k, where) + _second_clause(rows, k)
    for r in noisy:
        ups = repeat_speedups(r)
        sentence += (f" At B = {r['batch']} the timings are impossible ({impossible_reason(r)}): not a finding."
                     if impossible(r) else
                     f" At B = {r['batch']} the repeats fall on both sides of 1 ({min(ups):.2f}× to "
                     f"{max(ups):.2f}×): too noisy to tell.")
    if result.get("settings", {}).get("long_prompts"):
        big = max(rows, key=lambda r: r["batch"])
        sentence += (f" With ~{LONG_PROMPT_TOKENS:,}-token prompts every forward also reads the KV cache "
                     f"({big['kv_megabytes']:,.0f} MB at B = {big['batch']}), which keeps a batch memory-bound "
                     "longer: compare with short prompts.")
    return sentence
