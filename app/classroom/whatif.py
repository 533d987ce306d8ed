"""What-if k's handlers: "Run what-if" (one greedy run at the largest k beside standard decoding, then the
prediction for every smaller k: :func:`specviz.analysis.whatif.analyze`) and "Re-run at the recommended k" (a new
run pair at k*, measured beside its prediction)."""

from __future__ import annotations

import dataclasses
import functools

import gradio as gr

from app import render
from app.classroom.figures import whatif_figure
from app.classroom.running import failed, on_device, parse, rerun_work, whatif_work
from app.classroom.walkthroughs import WHATIF_MAX_NEW_TOKENS
from app.classroom.whatif_view import plain_range, rerun_button, rerun_k, whatif_html, whatif_status
from app.inputs import InputError, number
from specviz.analysis.whatif import (WhatIf, analyze, decode_speedup, end_to_end_speedup, tokens_per_pass,
                                    tokens_per_pass_range, tokens_per_s_speedup)
from specviz.core.engine import MAX_K


def whatif_run(prompt, drafter, exit_layer, draft_model, seed, target, k_max, tokens):
    """"Run what-if": one greedy run at ``k_max`` and its baseline, then the prediction for every k.
    Yields (what-if state, status, chart, result, re-run button)."""
    skip = gr.skip()
    notes: list[str] = []  # the thread cap's, said while the pair runs (on_device)
    try:
        k_max = number(k_max, "Largest k", 2, MAX_K, True)  # our sentence for an empty box, never a TypeError
        if drafter == "lookahead":
            raise InputError("Lookahead decoding's k is fixed by its n-gram size (N − 1), so there is no k to choose: "
                             "the what-if needs a drafter whose draft length you set (n-gram lookup, a draft model, "
                             "early exit, EAGLE, Medusa, suffix decoding).")
        values = {"prompt": prompt, "drafter": drafter, "exit_layer": exit_layer, "draft_model": draft_model,
                  "k": k_max, "temperature": 0.0, "seed": seed, "max_new_tokens": tokens, "target": target}
        settings = parse(values, limit=WHATIF_MAX_NEW_TOKENS)
        pair = yield from on_device(functools.partial(whatif_work, settings, k_max),
                                    "the classroom is measuring what-if k", 5, notes)
        if pair is None:  # cancelled: the handler is gone
            return
        result = analyze(*pair, k_max)  # off the device: the next run in line need not wait for the bootstrap
    except Exception as error:  # noqa: BLE001
        yield (skip, failed(error), skip, skip, skip)
        return
    state = {"result": result, "settings": settings, "checks": {}}
    yield (state, whatif_status(result, notes), gr.update(value=whatif_figure(result), visible=True), whatif_html(result),
           rerun_button(result))


def whatif_rerun(state):
    """"Re-run at the recommended k": a new speculative run at k* and a new baseline, measured side by side with
    the prediction. Yields (what-if state, status, chart, result, re-run button)."""
    skip = gr.skip()
    if not state:
        yield (skip, render.status_html("Run the what-if first.", "error"), skip, skip, skip)
        return
    result: WhatIf = state["result"]
    k = rerun_k(result)
    if k is None:
        yield (skip, render.status_html(f"k = {result.k_max} is the k the what-if run used: its measured speedup is "
                                        "already shown, so there is nothing to re-run.", "info"), skip, skip, skip)
        return
    settings = dataclasses.replace(state["settings"], k=k)
    notes: list[str] = []  # the thread cap's, said while the pair runs (on_device)
    try:
        pair = yield from on_device(functools.partial(rerun_work, settings, k),
                                    "the classroom is checking a prediction", 5, notes)
    except Exception as error:  # noqa: BLE001
        yield (skip, failed(error), skip, skip, skip)
        return
    if pair is None:  # cancelled: the handler is gone
        return
    yield _checked(state, result, k, *pair, notes=notes)


def _checked(state: dict, result: WhatIf, k: int, spec: list, base: list, notes=()) -> tuple:
    """The re-run's outputs: the prediction at ``k`` beside the measured speedup of ``spec`` over ``base``; ``notes``
    under the status (the thread cap's)."""
    predicted = result.at(k)
    tokens = spec[-1].num_generated
    check = {
        "k": k, "tokens": tokens, "predicted": predicted.speedup, "measured": decode_speedup(spec, base),
        "predicted_tau": predicted.expected_tokens,
        "measured_tau": tokens_per_pass(spec, k),
        "predicted_e2e": end_to_end_speedup(predicted.expected_tokens, result.costs, k, tokens),
        "measured_e2e": tokens_per_s_speedup(spec, base),
    }
    spread = result.spread
    if spread is not None:
        speed, tau = spread.at(k)
        check["ranges"] = {"predicted": speed, "predicted_tau": tau,
                           "predicted_e2e": spread.end_to_end(k, tokens),
                           "measured_tau": tokens_per_pass_range(spec, k, spread.resamples, spread.level)}
    else:
        check["ranges"] = {"measured_tau": tokens_per_pass_range(spec, k)}
    checks = dict(state.get("checks", {}))
    if check["measured"] is not None:
        checks[k] = check["measured"]
    state = {**state, "checks": checks}
    said = (f"k = {k}: predicted {plain_range(predicted.speedup, check['ranges'].get('predicted'))}, measured "
            f"{plain_range(check['measured'], None)} (one run; decoding, prefill excluded).")
    status = render.status_html(said, "done", notes=notes)
    return (state, status, gr.update(value=whatif_figure(result, checks), visible=True), whatif_html(result, check),
            gr.skip())
