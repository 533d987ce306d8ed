"""The Arena tab: several drafters x k on one prompt, a category or the whole suite, raced one after another
against standard decoding of the same target (:mod:`specviz.analysis.arena` does the measuring; this module is
layout, handlers and figures).

:func:`run` validates the inputs, waits for its turn on the device (:mod:`app.device`: arena runs take turns with
every other tab's runs), loads the target and runs :func:`specviz.analysis.arena.iter_arena` in the job's thread
with the job's cancel flag as ``should_stop`` (checked before every target forward); it yields the table and
charts after every prompt, and the CSV and JSON downloads at the end (also after a Stop: they then hold the
prompts that finished). Every output tuple has the order of :data:`OUTPUTS`. Figures are pure functions of the
pooled rows. Standard decoding is timed before and after every method on each prompt, each method's ratios use
the two baseline runs beside it; each ratio is read by the rule every tab uses (:func:`speedup_reading`: its ratios
against each of those runs all above 1 read faster, all below slower, on both sides too noisy to tell when those
baselines drifted above :data:`NOISY_DRIFT` or spread widely; the table and the status say so; :data:`NOTE`
explains how ratios are formed). Every speedup shown carries its spread, its
ratio against each of those baseline runs alone (:func:`speedup_cell`, error bars from :func:`spread_bars`); so do
the other timed figures, tokens/s, T_step, T_verify, T_draft, c and the predictions (:func:`timed_cell`; the
spreads are :func:`specviz.analysis.arena.timed_spread`'s and :func:`~specviz.analysis.arena.derived_spread`'s).
"""

from __future__ import annotations

import dataclasses
import html
import logging
import math
import re
import time

import gradio as gr
import plotly.graph_objects as go

from app import device, render
from app.device import CancelRegistry, Job, load_target, relay
from app.downloads import write_csv_and_json
from app.drafter_about import add_about
from app.figures import COLORS, FONT, MODEBAR, MODEBAR_MARGIN_PX
from app.inputs import (EXIT_LAYER, MIN_P, REPETITION_PENALTY, SEED, InputError, check_exit_layer, check_models,
                        clamp_notice, number, parse_exit_layer, parse_generation_settings)
from app.messages import enter_commits_js, report, tell_when_clamped, tell_when_invalid
from specviz.analysis.arena import (AUTO, BASELINE, PASS_SPREAD_FIGURES, TIMED_SPREAD_FIGURES, TREE_DRAFTERS,
                                    TREE_NODES, TREE_SUFFIX, ArenaResult, iter_arena, to_csv, to_json)
from specviz.analysis.bench import DEFAULT_PROMPTS, CpuShare, busy_machine_warning, load_prompts
from specviz.core.engine import GenerationConfig
from specviz.core.generation_settings import settings_summary
from specviz.core.metrics import format_apart
from specviz.core.verdict import Verdict, read_speedup
from specviz.core.verify import SamplingConfig
from specviz.drafters.registry import choices
from specviz.policy import PolicyError, current_policy
from specviz.presets import PRESETS, preset

log = logging.getLogger("specviz.app.arena")

OUTPUTS = ("arena-status", "arena-table", "arena-timings", "arena-prompts", "arena-charts", "arena-predictions",
           "arena-csv", "arena-json")
"""What :func:`run` yields, in order (the components' elem_ids)."""

K_CHOICES = ("1", "2", "4", "8", AUTO)
DEFAULT_DRAFTERS = ("ngram", "early-exit")
DEFAULT_KS = ("4", AUTO)
DEFAULT_MAX_NEW_TOKENS = 48
MIN_NEW_TOKENS, MAX_NEW_TOKENS = 8, 256  # the max-new-tokens slider's range, which runs keep to (max_new_tokens_used)
MAX_NEW_TOKENS_NAME = "Max new tokens per run"  # its label, the name its messages give
SOURCES = (("One prompt (typed below)", "prompt"), ("One category of the suite", "category"),
           ("The whole suite", "suite"))
STATUS_INTERVAL_S = 1.0  # a "still running" refresh at most this often between prompts
NOISY_DRIFT = 0.15  # baseline runs beside a method that differ by more than this: the machine's speed changed
IMPOSSIBLE_MARGIN = 0.05  # a decoding speedup this far above the tokens per pass: noise (see _impossible)

SHADES = {  # per drafter, dark to light: one shade per k
    "ngram": ("#0f5323", "#1a7f37", "#2da44e", "#4ac26b", "#6fdd8b", "#aceebb"),
    "early-exit": ("#3e1f79", "#6f42c1", "#8250df", "#a475f9", "#c297ff", "#d8b9ff"),
    "bf16": ("#0a3069", "#0550ae", "#0969da", "#218bff", "#54aeff", "#80ccff"),
    "model": ("#762c00", "#953800", "#bc4c00", "#e16f24", "#fb8f44", "#ffb77c"),
    "oracle": ("#24292f", "#424a53", "#57606a", "#6e7781", "#8c959f", "#afb8c1"),
    "eagle": ("#4d2d00", "#7d4e00", "#9a6700", "#bf8700", "#d4a72c", "#eac54f"),
    "medusa": ("#5c0020", "#99003a", "#bf3989", "#e85aad", "#f692ce", "#ffadda"),
    "eagle:tree": ("#00403e", "#006a67", "#008f8a", "#1fb5ad", "#5fd3cb", "#a6ece6"),
    "medusa:tree": ("#2f3a00", "#4d5e00", "#6b8000", "#8fa61a", "#b3c94d", "#d6e89a"),
    "eagle:lookup": ("#1b1f5e", "#2e3a8c", "#4051b5", "#5c6bc0", "#7986cb", "#9fa8da"),
    "medusa:lookup": ("#67060c", "#a40e26", "#cf222e", "#fa4549", "#ff8182", "#ffcecb"),
    "lookahead": ("#003d4d", "#005f73", "#0a9396", "#2bb3b1", "#6cd0c9", "#a8e6df"),
}
TREE_NOTE = (f"Trees are greedy-only: at temperature > 0 the “:{TREE_SUFFIX}” methods draft a chain (the same "
             "as without “:tree”).")


def drafter_choices() -> list[tuple[str, str]]:
    """(label, key) for the drafters menu: every registry drafter but "none", each head drafter followed by its
    tree variant ("eagle:tree", "medusa:tree": :data:`specviz.analysis.arena.TREE_NODES` nodes) and its lookup-first
    variant ("eagle:lookup", "medusa:lookup")."""
    menu = []
    for c in choices():
        if c.key == BASELINE:
            continue
        menu.append((c.label, c.key))
        if c.key in TREE_DRAFTERS:
            short = c.label.split(" (")[0]
            menu.append((f"{short}, tree of {TREE_NODES} nodes (greedy)", f"{c.key}:{TREE_SUFFIX}"))
            menu.append((f"{short} + n-gram lookup first", f"{c.key}:lookup"))
    return menu


RUNS = CancelRegistry()  # the Arena tab's runs, one per session


# ------------------------------------------------------------------------------------------------ inputs


def suite() -> list[dict]:
    """The Arena's prompts: the benchmark suite (assets/suite.jsonl: 54 prompts in 8 categories, the list ``specviz
    bench`` and the README's tables read, :data:`specviz.analysis.bench.DEFAULT_PROMPTS`) as dicts, in file order.
    (The Arena ran the Live tab's 18 examples before, a list with another category and without multi-turn.)"""
    return [{"id": p.id, "category": p.category, "prompt": p.prompt} for p in load_prompts(DEFAULT_PROMPTS)]


def category_choices() -> list[tuple[str, str]]:
    """(label, category) for the category menu: each suite category with its number of prompts, "math (6 prompts)"."""
    counts: dict[str, int] = {}
    for p in suite():
        counts[p["category"]] = counts.get(p["category"], 0) + 1
    return [(f"{c} ({render.plural(n, 'prompt')})", c) for c, n in counts.items()]


SUITE_INFO = "The benchmark suite: assets/suite.jsonl, {n} prompts in {c} categories (the README's tables use it)"
"""The Prompts radio's info line: which list "a category" and "the whole suite" read (:func:`suite`)."""


def categories() -> list[str]:
    """The suite's categories, in order of first appearance."""
    return list(dict.fromkeys(p["category"] for p in suite()))


def choose_prompts(source: str, prompt: str, category: str) -> list[dict]:
    """The prompts for a source ("prompt", "category" or "suite"); InputError with a sentence when empty."""
    if source == "prompt":
        if not prompt or not prompt.strip():
            raise InputError("The prompt is empty: type one, or pick a category or the whole suite.")
        return [{"id": "your-prompt", "category": "your prompt", "prompt": prompt.strip()}]
    prompts = suite()
    if source == "suite":
        return prompts
    if source == "category":
        chosen = [p for p in prompts if p["category"] == category]
        if not chosen:
            raise InputError(f"Pick a category of the suite ({', '.join(categories())}).")
        return chosen
    raise InputError("Pick where the prompts come from: one prompt, a category or the whole suite.")


def max_new_tokens_used(value) -> tuple[int, str | None]:
    """The max new tokens a run uses, and what to say about it: a number inside the slider's range
    [:data:`MIN_NEW_TOKENS`, :data:`MAX_NEW_TOKENS`] as it is (None: nothing to say); one typed outside it the
    nearest end, with the sentence :func:`app.messages.tell_when_clamped` shows when the box is left ("Max new tokens
    per run is at least 8; using 8.", :func:`app.inputs.clamp_notice`), so a run never uses a number the slider
    cannot hold. Raises InputError for anything that is not a whole number."""
    found = clamp_notice(value, MAX_NEW_TOKENS_NAME, MIN_NEW_TOKENS, MAX_NEW_TOKENS)
    if found is not None:
        return int(found[0]), found[1]
    return int(number(value, MAX_NEW_TOKENS_NAME, MIN_NEW_TOKENS, MAX_NEW_TOKENS, True)), None


def parse_inputs(drafters, ks, source, prompt, category, max_new_tokens, target, draft_model, exit_layer,
                 temperature, seed, repetition_penalty=1.0, min_p=0.0) -> dict:
    """Validated arena settings: {prompts, drafters, ks, max_new_tokens, target, draft_spec, exit_layer (None: half
    the target's layers), temperature, seed, generation, notices}: ``generation`` holds the generation settings
    (:func:`app.inputs.parse_generation_settings`): the Arena sets the repetition penalty and min-p; the other
    processors stay off; ``notices``: sentences about values used instead of the ones given (a max new tokens
    outside the slider's range, :func:`max_new_tokens_used`). Raises InputError (or PolicyError) with one sentence
    for the user."""
    drafters = [d for d in (drafters or []) if d != BASELINE]
    if not drafters:
        raise InputError("Pick at least one drafter.")
    if not ks:
        raise InputError("Pick at least one draft length k.")
    if "model" in drafters and not (draft_model or "").strip():
        raise InputError("The 'Draft model' drafter needs a draft model: a hub id or a local folder.")
    if not (target or "").strip():
        raise InputError("Give a target model: 'embedded', a hub id or a local folder.")
    # the operator's model policy (specviz.policy): raises PolicyError, a ValueError naming the setting
    check_models(target.strip(), (draft_model or "").strip() if "model" in drafters else None, current_policy())
    tokens, notice = max_new_tokens_used(max_new_tokens)
    return {
        "prompts": choose_prompts(source, prompt, category), "drafters": drafters, "ks": list(ks),
        "max_new_tokens": tokens, "notices": [notice] if notice else [],
        "target": target.strip(), "draft_spec": (draft_model or "").strip() or None,
        "exit_layer": parse_exit_layer(exit_layer),
        "temperature": float(number(temperature or 0.0, "Temperature", 0, 2, False)),
        "seed": int(SEED.parse(seed)),
        "generation": parse_generation_settings(min_p=min_p, repetition_penalty=repetition_penalty),
    }


# ------------------------------------------------------------------------------------------------ tables

SUMMARY_COLUMNS = (  # (header, key, decimals or None for text): what each method did, its speedups and its check
    ("Category", "category", None), ("Method", "variant", None), ("Prompts", "prompts", 0),
    ("Tokens/pass", "tokens_per_pass", 2), ("Acceptance", "acceptance_rate", 2), ("α", "alpha", 2),
    ("Speedup, decode", "decode_speedup", 2), ("Baseline drift", "baseline_drift", "%"),
    ("Speedup, end to end", "speedup", 2), ("Same ids", "ids_identical", None),
)
TIMING_COLUMNS = (  # the rates, the predictions and the timings they are made from, with the runs they come from
    ("Category", "category", None), ("Method", "variant", None), ("Runs", "runs", 0), ("Tokens", "tokens", 0),
    ("Tokens/s", "tokens_per_s", 1), ("Predicted, paper", "predicted_speedup_paper", 2),
    ("Predicted, measured costs", "predicted_speedup_measured", 2), ("T_step ms", "t_step_ms", 1),
    ("T_verify ms", "t_verify_ms", 1), ("T_draft ms", "t_draft_ms", 1), ("c", "c", 3),
)
"""The pooled rows are shown as two tables, :data:`SUMMARY_COLUMNS` and these, each narrow enough for a 1400 px
page (one table of all 19 columns was about 1,670 px wide)."""
_ALL_COLUMNS = {c[1]: c for c in SUMMARY_COLUMNS + TIMING_COLUMNS}
PROMPT_COLUMNS = (("Prompt", "prompt_id", None),) + tuple(_ALL_COLUMNS[key] for key in (  # one table, in an accordion
    "category", "variant", "runs", "tokens", "tokens_per_pass", "acceptance_rate", "alpha", "tokens_per_s",
    "decode_speedup", "baseline_drift", "speedup", "predicted_speedup_paper", "predicted_speedup_measured",
    "t_step_ms", "t_verify_ms", "t_draft_ms", "c", "ids_identical"))


def _cell(value, decimals: int | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "✓" if value else "✗ differs"
    if decimals is None:
        return str(value)
    if decimals == "%":  # a drift: "4%", and "31% unsteady" above NOISY_DRIFT (the machine's speed changed)
        return f"{value:.0%}" + (" unsteady" if value > NOISY_DRIFT else "")
    return f"{value:.{decimals}f}"


SPEEDUP_KEYS = ("speedup", "decode_speedup")  # the measured ratios: each shown with its spread (speedup_cell)
NO_SPREAD = "one run: no spread"
NO_PASS_SPREAD = "one pass: no spread"  # T_verify / T_draft: their spread is over the passes of the run


def spread_text(row: dict, key: str) -> str:
    """The spread of a row's ratio ``key`` ("speedup" or "decode_speedup") in words: "1.15–1.31" (its rate over each
    standard run beside the method taken alone; pooled rows: lowest to highest over their prompts), "reference"
    for standard decoding (1 by definition), or :data:`NO_SPREAD` where no pair of standard runs gave one."""
    if row.get("drafter") == BASELINE:
        return "reference"
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    if low is None or high is None:
        return NO_SPREAD
    return "–".join(format_apart(low, high))


def reference_drift_cell(drift: float | None) -> str:
    """The standard-decoding row's Baseline drift cell: how far its own runs' decoding rates lie apart, "230% (its
    runs apart)", with no "noisy" flag (that marks a method's ratio; this row is the reference, 1 by definition);
    "–" without two runs."""
    return "–" if drift is None else f"{drift:.0%} (its runs apart)"


def speedup_reading(row: dict, key: str = "decode_speedup") -> Verdict | None:
    """The rule's reading (:func:`specviz.core.verdict.read_speedup`, the one every tab uses) of a method's ratio
    ``key`` on its spread against each standard run beside it (:func:`spread_text`): baselines that drifted more
    than :data:`NOISY_DRIFT` apart are the disturbance (a spread across 1 then reads too noisy even when narrow; one
    wholly on one side of 1 keeps its verdict), and a decoding speedup above its tokens per pass is impossible
    (:func:`_impossible`). None for the reference row, without the ratio, or without a spread (one run)."""
    value = row.get(key)
    if value is None or row.get("drafter") == BASELINE or not _has_spread(row, key):
        return None
    drift = row.get("baseline_drift") or 0
    busy = f"baselines {drift:.0%} apart" if drift > NOISY_DRIFT else None
    why = "impossible: noise" if key == "decode_speedup" and _impossible(row) else None  # above its tokens/pass
    low, high = row[f"{key}_low"], row[f"{key}_high"]
    return read_speedup(value, min(low, value), max(high, value), busy=busy, impossible=why)


def speedup_cell(row: dict, key: str) -> str:
    """A measured speedup as the table shows it, read by :func:`speedup_reading`: "1.23× faster (1.15–1.31×)", "too
    noisy to tell: 1.05× measured (0.90–1.25×), baselines 36% apart"; "1.00 (reference)" for standard decoding,
    "1.23 (one run: no spread)" where none can be told (" impossible: noise" added above its tokens per pass); "–"
    without a ratio."""
    value = row.get(key)
    if value is None:
        return "–"
    read = speedup_reading(row, key)
    if read is None:
        text = f"{value:.2f} ({spread_text(row, key)})"
        return text + " impossible: noise" if key == "decode_speedup" and _impossible(row) else text
    return read.cell() + (f", {read.reason}" if not read.finding and read.reason else "")


def range_text(low: float, high: float, decimals: int, extra: int = 1) -> str:
    """"39.8–43.0": two ends with ``decimals`` decimals, or up to ``extra`` more until they read differently
    (:func:`specviz.core.metrics.format_apart`); ends that still read alike say the spread is below that precision."""
    return "–".join(format_apart(low, high, decimals, decimals + extra))


def _places(value: float, decimals: int, most: int = 6) -> int:
    """``decimals``, or more for a small value, so that it shows two significant digits (0.04 ms: "0.040", not
    "0.0"); at most ``most``."""
    if not value or not math.isfinite(value) or abs(value) >= 1:
        return decimals
    return min(most, max(decimals, 1 - math.floor(math.log10(abs(value)))))


def timed_cell(row: dict, key: str, decimals: int) -> str:
    """A timed figure (tokens/s, T_step, T_verify, T_draft, c, a prediction) with its spread, "41.2 (39.8–43.0)"
    (a value below 1 with two significant digits, and the ends with one more decimal where that makes them read
    apart, the value then as many); "41.2 (one run: no spread)" where none can be told (:data:`NO_PASS_SPREAD` for the
    per-pass figures); "–" without a value. What each spread is: :data:`specviz.analysis.arena.DEFINITIONS`
    (``<figure>_low``)."""
    value = row.get(key)
    if value is None:
        return "–"
    places = _places(value, decimals)
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    if low is None or high is None:
        return f"{value:.{places}f} ({NO_PASS_SPREAD if key in PASS_SPREAD_FIGURES else NO_SPREAD})"
    ends = range_text(low, high, places)
    return f"{value:.{max(places, len(ends.split('–')[0].partition('.')[2]))}f} ({ends})"


def table(rows: list[dict], columns=SUMMARY_COLUMNS) -> dict:
    """A gr.Dataframe value ({"headers", "data"}) of ``rows`` with ``columns`` formatted as text; a speedup
    carries its spread, and a decoding speedup above what its tokens per pass allow reads "… impossible: noise"
    (:func:`speedup_cell`); so do the other timed figures (:func:`timed_cell`)."""
    def cell(r: dict, key: str, decimals) -> str:
        if key == "baseline_drift" and r.get("drafter") == BASELINE:
            return reference_drift_cell(r.get(key))
        if key in SPEEDUP_KEYS:
            return speedup_cell(r, key)
        return timed_cell(r, key, decimals) if key in TIMED_SPREAD_FIGURES else _cell(r.get(key), decimals)

    return {"headers": [c[0] for c in columns],
            "data": [[cell(r, key, decimals) for _, key, decimals in columns] for r in rows]}


def empty_table(columns=SUMMARY_COLUMNS) -> dict:
    """A table with headers only."""
    return {"headers": [c[0] for c in columns], "data": [["" for _ in columns]]}


# ------------------------------------------------------------------------------------------------ figures


def variant_colors(rows: list[dict]) -> dict[str, str]:
    """A colour per method label: the baseline grey, each drafter its own hue (a tree variant such as
    "eagle:tree" a hue of its own), each k a shade of it, spread from dark to light so that two k's of one
    drafter stay apart."""
    labels: dict[str, list[str]] = {}  # drafter -> its method labels, in order of appearance
    colors = {}
    for r in rows:
        label = r["variant"]
        if r["drafter"] == BASELINE:
            colors[label] = COLORS["baseline"]
        elif label not in labels.setdefault(r["drafter"], []):
            labels[r["drafter"]].append(label)
    for drafter, names in labels.items():
        shades = SHADES.get(drafter, SHADES["oracle"])
        top = len(shades) - 1
        for i, label in enumerate(names):  # indices 1..top (the darkest is kept for text), evenly spread
            index = 1 + round(i * (top - 1) / (len(names) - 1)) if len(names) > 1 else 2
            colors[label] = shades[min(index, top)]
    return colors


def _layout(height: int) -> dict:
    return {"template": "plotly_white", "font": {"family": FONT, "size": 12}, "height": height,
            "margin": {"l": 60, "r": MODEBAR_MARGIN_PX, "t": 70, "b": 50}, "modebar": MODEBAR, "barmode": "group",
            "bargap": 0.25,
            "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 12},
                       "title": {"text": "method "}}}


ARENA_PANELS = (  # (title, key, y-axis title, include the baseline, y range)
    ("Tokens per target pass (bonus included)", "tokens_per_pass", "tokens / pass", True, None),
    ("Acceptance rate (accepted ÷ drafted)", "acceptance_rate", "acceptance", False, [0, 1.05]),
    ("Tokens per second<br>(own clock, prefill included)", "tokens_per_s", "tokens / s", True, None),
    ("Decoding speedup (after the prefill)", "decode_speedup", "× standard", False, None),
)


TIMED_KEYS = ("tokens_per_s", "decode_speedup")  # the panels whose bars are timings (noise can mislead them)
SPREAD_PANELS = SPEEDUP_KEYS + ("tokens_per_s",)  # the panels whose bars carry error bars (spread_bars)


def _impossible(row: dict) -> bool:
    """A method's decoding speedup above its tokens per pass by more than :data:`IMPOSSIBLE_MARGIN`: a pass would
    have cost less than one standard step, although it does the same forward with more tokens and drafts too. The
    machine's speed changed between the runs; the ratio is noise."""
    speedup, tokens = row.get("decode_speedup"), row.get("tokens_per_pass")
    return (row.get("drafter") != BASELINE and speedup is not None and tokens is not None
            and speedup > tokens * (1 + IMPOSSIBLE_MARGIN))


def _noisy(row: dict) -> bool:
    """A method's row whose decoding speedup is too noisy to tell (:func:`speedup_reading`) or impossible
    (:func:`_impossible`), or, without a spread to read, whose baselines drifted beyond :data:`NOISY_DRIFT`: its
    timings are no finding."""
    if row.get("drafter") == BASELINE:
        return False
    read = speedup_reading(row)
    if read is None:  # no spread to read (one baseline beside it, or a file without one): drifted baselines decide
        return _impossible(row) or (row.get("baseline_drift") or 0) > NOISY_DRIFT
    return _impossible(row) or not read.finding


def _noise_marks(rows: list[dict]) -> dict:
    """Plotly marker settings: noisy rows' bars hatched and faded."""
    return {"pattern": {"shape": ["/" if _noisy(r) else "" for r in rows], "fillmode": "overlay", "size": 6,
                        "solidity": 0.4},
            "opacity": [0.45 if _noisy(r) else 1.0 for r in rows]}


def _noise_word(row: dict) -> str:
    """The hover's word on a bar: "(too noisy to tell: its ratios on both sides of 1, baselines 36% apart)", "(too
    noisy to tell: faster than its tokens per pass allow)" or ""."""
    if _impossible(row):
        return "(too noisy to tell: faster than its tokens per pass allow, no finding)"
    if not _noisy(row):
        return ""
    drift = row.get("baseline_drift") or 0
    return ("(too noisy to tell: its ratios on both sides of 1"
            + (f", baselines {drift:.0%} apart" if drift > NOISY_DRIFT else "") + ", no finding)")


HATCHED_NOTE = ("hatched bars: too noisy to tell (ratios against<br>the standard runs beside it on both sides "
                "of 1,<br>or faster than its tokens per pass): no finding")
"""The note under the Arena's charts when a bar is hatched, in lines short enough for a phone-wide chart."""

SPREAD_NOTE = "error bars: its ratio against each standard run<br>beside the method alone, lowest to highest"
RATE_SPREAD_NOTE = "error bars: its slowest to its fastest run"
"""What the tokens/s panel's error bars are (:func:`specviz.analysis.arena.timed_spread`)."""


def _has_spread(row: dict, key: str) -> bool:
    return row.get(f"{key}_low") is not None and row.get(f"{key}_high") is not None


def _spread_subtitle(rows: list[dict], key: str = "decode_speedup") -> str:
    """The line under a panel's title that says what its error bars are (and where there are none): a speedup's
    (:data:`SPREAD_NOTE`, methods only) or tokens/s's (:data:`RATE_SPREAD_NOTE`)."""
    speedup = key in SPEEDUP_KEYS
    shown = [r for r in rows if r["drafter"] != BASELINE] if speedup else rows
    if not shown:
        return ""
    none = any(not _has_spread(r, key) for r in shown if r.get(key) is not None)
    text = (SPREAD_NOTE if speedup else RATE_SPREAD_NOTE) + (f"<br>{NO_SPREAD} where no bar is drawn" if none else "")
    return f"<br><span style='font-size:11px;color:#57606a;font-weight:normal'>{text}</span>"


def spread_bars(rows: list[dict], key: str = "decode_speedup") -> dict:
    """Plotly error bars for the figure ``key`` of ``rows``: from each value down to its ``<key>_low`` and up to its
    ``<key>_high`` (a speedup: its ratio against one standard run beside the method, :func:`spread_text`; tokens/s:
    its slowest and fastest run); none for a row without a spread, nor for the standard row's speedups (the
    reference)."""
    def ends(r: dict) -> tuple[float, float]:
        value, low, high = r.get(key), r.get(f"{key}_low"), r.get(f"{key}_high")
        if value is None or low is None or high is None or (key in SPEEDUP_KEYS and r.get("drafter") == BASELINE):
            return 0.0, 0.0
        return max(0.0, high - value), max(0.0, value - low)

    up, down = zip(*(ends(r) for r in rows)) if rows else ((), ())
    return {"type": "data", "symmetric": False, "array": list(up), "arrayminus": list(down), "visible": any(up + down),
            "color": "#24292f", "thickness": 1.5, "width": 4}


def _spread_word(row: dict, key: str) -> str:
    """The hover's spread of a bar: "(1.15–1.31 against each standard run beside it)", "(reference)" or
    "(one run: no spread)" for a speedup; "(12.1–13.0 from its slowest to its fastest run)" for tokens/s."""
    if key not in SPEEDUP_KEYS:
        if not _has_spread(row, key):
            return f"({NO_SPREAD})"
        return f"({range_text(row[f'{key}_low'], row[f'{key}_high'], 1)} from its slowest to its fastest run)"
    text = spread_text(row, key)
    return f"({text} against each standard run beside it)" if text not in ("reference", NO_SPREAD) else f"({text})"


def _prediction_word(row: dict, key: str) -> str:
    """The hover's spread of a prediction marker, which is a model's figure, not a measurement: "(a model of the
    measured α; 1.40–1.61 from the spread of T_step, T_verify, T_draft, α taken as counted)" or "(a model of the
    measured α; its timings one sample: no spread)". The range holds α fixed: it is a count over the pooled passes."""
    if not _has_spread(row, key):
        return "(a model of the measured α; its timings one sample: no spread)" if row.get(key) is not None else ""
    return (f"(a model of the measured α; {range_text(row[f'{key}_low'], row[f'{key}_high'], 2)} from the spread of "
            "T_step, T_verify, T_draft, α taken as counted)")


def shown_rows(summary: list[dict]) -> list[dict]:
    """The pooled rows worth showing: per category, and "all" only when there is more than one category."""
    several = len({r["category"] for r in summary if r["level"] == "category"}) > 1
    return [r for r in summary if r["level"] == "category" or (r["level"] == "overall" and several)]


def arena_figure(summary: list[dict]) -> go.Figure:
    """Four grouped bar charts of the pooled rows: x = category (then "all"), one bar per method."""
    rows = shown_rows(summary)
    cats = list(dict.fromkeys(r["category"] for r in rows))
    colors = variant_colors(rows)
    labels = list(colors)
    columns, gap_x, gap_y = 2, 0.08, 0.2
    width, height = (1 - gap_x) / 2, (1 - gap_y) / 2
    layout = _layout(760)
    data, notes = [], []
    for i, (title, key, ytitle, with_base, yrange) in enumerate(ARENA_PANELS):
        row, col = divmod(i, columns)
        n = "" if i == 0 else str(i + 1)
        x0 = col * (width + gap_x)
        y1 = 1 - row * (height + gap_y)
        layout[f"xaxis{n}"] = {"domain": [x0, x0 + width], "anchor": f"y{n}", "type": "category",
                               "categoryorder": "array", "categoryarray": cats, "automargin": True}
        layout[f"yaxis{n}"] = {"domain": [max(0.0, y1 - height), y1], "anchor": f"x{n}", "automargin": True,
                               "title": {"text": ytitle, "font": {"size": 12}}, "rangemode": "tozero",
                               **({"range": yrange} if yrange else {})}
        for label in labels:
            mine = [r for r in rows if r["variant"] == label]
            if not with_base and mine and mine[0]["drafter"] == BASELINE:
                continue
            timed = key in TIMED_KEYS
            words = [(_spread_word(r, key) + " " if key in SPREAD_PANELS else "") + (_noise_word(r) if timed else "")
                     for r in mine]
            data.append({"type": "bar", "x": [r["category"] for r in mine], "y": [r.get(key) for r in mine],
                         "name": label, "legendgroup": label, "showlegend": i == 0 or (i == 2 and not with_base),
                         "marker": {"color": colors[label], **(_noise_marks(mine) if timed else {})},
                         **({"error_y": spread_bars(mine, key)} if key in SPREAD_PANELS else {}),
                         "xaxis": f"x{n}", "yaxis": f"y{n}", "text": words, "textposition": "none",  # hover only
                         "hovertemplate": f"{label}<br>%{{x}}: %{{y:.2f}} %{{text}}<extra>{title}</extra>"})
        if key == "decode_speedup":
            layout["shapes"] = [{"type": "line", "xref": f"x{n} domain", "yref": f"y{n}", "x0": 0, "x1": 1, "y0": 1,
                                 "y1": 1, "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}}]
        notes.append({"text": f"<b>{title}</b>" + (_spread_subtitle(rows, key) if key in SPREAD_PANELS else ""),
                      "x": x0 + width / 2, "y": y1, "xref": "paper", "yref": "paper",
                      "xanchor": "center", "yanchor": "bottom", "yshift": 4, "showarrow": False,
                      "font": {"size": 14}})
    if any(_noisy(r) for r in rows):
        # under the last chart's axis (y of the last panel's domain, so that assets/head.html, which moves only
        # paper-placed notes, keeps it under the last chart when a phone stacks them, not between two charts)
        notes.append({"text": HATCHED_NOTE, "x": 0, "y": -0.17, "xref": "paper", "yref": f"y{len(ARENA_PANELS)} domain",
                      "xanchor": "left", "yanchor": "top", "align": "left", "showarrow": False,
                      "font": {"size": 11, "color": COLORS["rejected"]}})
    layout["annotations"] = notes
    layout["legend"]["y"] = 1.06
    layout["margin"]["t"] = 90
    layout["margin"]["b"] = 100  # room for the hatched-bars note's three lines
    return go.Figure({"data": data, "layout": layout})


def predictions_figure(summary: list[dict]) -> go.Figure:
    """Measured speedup after the prefill (bars) beside the two predictions from the measured α (markers), per
    category and method; the gap between the markers is the verification overhead."""
    rows = [r for r in shown_rows(summary) if r["drafter"] != BASELINE]
    colors = variant_colors(rows)
    x = [[r["category"] for r in rows], [r["variant"] for r in rows]]
    data = [
        {"type": "bar", "x": x, "y": [r["decode_speedup"] for r in rows],
         "name": "measured (after the prefill)",
         "marker": {"color": [colors[r["variant"]] for r in rows], **_noise_marks(rows)}, "opacity": 0.85,
         "error_y": spread_bars(rows), "text": [f"{_spread_word(r, 'decode_speedup')} {_noise_word(r)}" for r in rows],
         "textposition": "none", "hovertemplate": "%{x}<br>measured %{y:.2f}× %{text}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "x": x, "y": [r["predicted_speedup_paper"] for r in rows],
         "name": "predicted, paper (verification = 1 step)",
         "marker": {"symbol": "diamond", "size": 11, "color": "#ffffff", "line": {"color": "#24292f", "width": 2}},
         "text": [_prediction_word(r, "predicted_speedup_paper") for r in rows],
         "hovertemplate": "%{x}<br>paper %{y:.2f}× %{text}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "x": x, "y": [r["predicted_speedup_measured"] for r in rows],
         "name": "predicted with measured costs",
         "marker": {"symbol": "x-thin", "size": 12, "color": COLORS["rejected"], "line": {"color": COLORS["rejected"],
                                                                                      "width": 3}},
         "text": [_prediction_word(r, "predicted_speedup_measured") for r in rows],
         "hovertemplate": "%{x}<br>measured costs %{y:.2f}× %{text}<extra></extra>"},
    ]
    layout = _layout(440) | {
        "title": {"text": "<b>Speedup: measured vs predicted</b><br>from the measured α", "font": {"size": 14},
                  "x": 0.5, "xanchor": "center", "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 12}},
        "xaxis": {"type": "multicategory", "automargin": True, "tickfont": {"size": 11}},
        "yaxis": {"title": {"text": "× standard decoding"}, "rangemode": "tozero", "automargin": True},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                    "line": {"color": COLORS["baseline"], "dash": "dot", "width": 1.5}}],
    }
    # the legend under the chart (below the two rows of category labels), one row at 1400 px and up to three on a
    # phone: it never covers the title or the bars; the notes go under it, wrapped to fit a phone-wide chart
    layout["legend"] = {"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yref": "container", "yanchor": "bottom",
                        "font": {"size": 12}}
    layout["margin"] |= {"t": 100, "b": 135}
    layout["height"] = 500
    said = ["error bars: the ratio against each standard run<br>beside the method"] if rows else []
    if any(r["predicted_speedup_paper"] is None and r.get("tree_passes") for r in rows):
        said.append("tree methods: no markers<br>(the formulas are for chains)")
    if said:
        layout["annotations"] = [{"text": "<br>".join(said), "xref": "paper", "yref": "paper", "x": 1, "y": 1,
                                  "xanchor": "right", "yanchor": "bottom", "align": "right", "showarrow": False,
                                  "font": {"size": 11, "color": "#57606a"}}]
    return go.Figure({"data": data, "layout": layout})


# ------------------------------------------------------------------------------------------------ files


FILE_DEFINITIONS = {
    "wall_s": "seconds from the Run click to the end, as the status says (waiting for the device and loading the "
              "target included)",
    "race_wall_s": "seconds of the arena once the target was loaded: the drafters' set-up, the warm-up and the runs",
    "noisy": "true where the page marks the row noisy: the standard runs beside it more than "
             f"{NOISY_DRIFT:.0%} apart, or a decoding speedup above its tokens per pass; no finding",
    "noise": "why a noisy row is noisy, in the page's words",
    "status": "the status line the page showed at the end, in words",
}
"""What the downloads add to :data:`specviz.analysis.arena.DEFINITIONS`."""

VERDICT_COLUMNS = ("noisy", "noise")
"""The columns the downloads add to every row: ``noisy`` (true where the page hatches the row's bar and marks its
drift "noisy" or its speedup "impossible: noise", :func:`_noisy`; empty for standard decoding) and ``noise`` (why,
in the chart hover's words)."""


def with_verdicts(rows: list[dict]) -> list[dict]:
    """``rows`` with :data:`VERDICT_COLUMNS` added, as the page judges each one."""
    def words(row: dict) -> str:
        return _noise_word(row).strip("()").removeprefix("noisy: ")

    return [dict(r, noisy=None if r.get("drafter") == BASELINE else _noisy(r), noise=words(r)) for r in rows]


def plain_status(status: str) -> str:
    """A status line's HTML (:func:`app.render.status_html`) as the words the page shows, notes included."""
    text = html.unescape(re.sub(r"<br\s*/?>", " · ", re.sub(r"<i [^>]*></i>", "", status)))
    return " ".join(re.sub(r"<[^>]+>", "", text).split())


def write_files(result: ArenaResult, folder: str | None = None, *, wall_s: float | None = None, notes=(),
                status: str = "") -> tuple[str, str]:
    """Write the result as CSV and JSON into a fresh temporary folder (or ``folder``); returns both paths.

    The files carry what the page shows: every row's noise verdict (:data:`VERDICT_COLUMNS`), and in the JSON the
    ``notes`` shown under the status, the status itself in words (``status``, HTML) and ``wall_s``: the seconds the
    status gives (from the Run click: waiting for the device and loading the target included); ``race_wall_s`` is the
    arena after loading (:attr:`ArenaResult.wall_s`, which ``wall_s`` was before: 32.6 s beside a status's 50 s)."""
    shown = dataclasses.replace(result, rows=with_verdicts(result.rows), summary=with_verdicts(result.summary))
    data = to_json(shown)
    data["race_wall_s"] = round(result.wall_s, 1)
    data["wall_s"] = round(result.wall_s if wall_s is None else wall_s, 1)
    data["notes"] = list(dict.fromkeys([*notes, *result.notes]))
    data["status"] = plain_status(status) if status else ""
    data["definitions"] = {**data.get("definitions", {}), **FILE_DEFINITIONS}
    return write_csv_and_json("arena", to_csv(shown, VERDICT_COLUMNS), data, folder)


# ------------------------------------------------------------------------------------------------ handlers


def _outputs(status=None, summary=None, timings=None, prompts=None, charts=None, predictions=None, csv=None,
             json_file=None):
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is."""
    skip = gr.skip()

    def shown(figure):
        return None if figure is None else gr.update(value=figure, visible=True)

    values = (status, summary, timings, prompts, shown(charts), shown(predictions), csv, json_file)
    return tuple(skip if v is None else v for v in values)


def _failed(what: str, error: BaseException) -> tuple:
    """The output tuple of a failed run: a toast, and the message in the status line (:func:`app.messages.report`)."""
    return _outputs(status=report(what, error))


def _result_outputs(result: ArenaResult, status: str):
    return _outputs(status=status, summary=table(shown_rows(result.summary)),
                    timings=table(shown_rows(result.summary), TIMING_COLUMNS), prompts=table(result.rows, PROMPT_COLUMNS),
                    charts=arena_figure(result.summary), predictions=predictions_figure(result.summary))


def _done_status(result: ArenaResult, seconds: float, notes=(), cpu: CpuShare | None = None) -> str:
    same = result.ids_identical
    check = {True: " · greedy outputs identical to standard decoding ✓",
             False: " · some greedy outputs differ from standard decoding (see “Same ids”)",
             None: ""}[same]
    n = len({r["prompt_id"] for r in result.rows})
    if result.stopped:
        return render.status_html(f"Stopped after {render.plural(n, 'prompt')} in {seconds:.0f} s; the downloads "
                                  "hold those.", "info", notes=notes)
    target = result.environment.get("target", {}).get("label", "")
    busy = busy_machine_warning(cpu)
    noisy = noisy_rows(result.rows)
    drift = (f" · {noisy_count(noisy, result.rows)} too noisy to tell (ratios against the standard runs beside "
             "the method on both sides of 1, or a speedup above its tokens per pass): read those ratios as noise"
             if noisy else "")
    methods = render.plural(len(result.variants) - 1, "method") + " and standard decoding"  # variants: baseline first
    return render.status_html(f"Done: {render.plural(n, 'prompt')} × {methods} in {seconds:.0f} s{check}"
                              f" · {target}" + (f" · {busy}" if busy else "") + drift,
                              "done" if same is not False else "info", notes=notes)


def noisy_rows(rows: list[dict]) -> int:
    """How many per-prompt rows of a method (not the baseline) are noisy (:func:`_noisy`)."""
    return sum(1 for r in rows if _noisy(r))


def noisy_count(noisy: int, rows: list[dict]) -> str:
    """``noisy`` of the per-prompt method rows in ``rows`` (the baseline's not counted), in words that agree: "1 of
    2 methods" for one prompt, "3 of 8 prompt × method results" for several."""
    methods = [r for r in rows if r.get("drafter") != BASELINE]
    prompts = len({r.get("prompt_id") for r in methods})
    if prompts <= 1:
        return f"{noisy} of {render.plural(len(methods), 'method')}"
    return f"{noisy} of {render.plural(len(methods), 'prompt × method result')}"


def run(drafters, ks, source, prompt, category, max_new_tokens, target, draft_model, exit_layer, temperature,
        seed, chat_template, repetition_penalty=1.0, min_p=0.0, progress=gr.Progress(), request: gr.Request = None):
    """The Run button: validate, wait for the device, load, race every method on every prompt; yields
    :data:`OUTPUTS` tuples (the table and charts after each prompt, the files at the end). The repetition penalty
    and min-p came last, so API clients written before them still work (both off)."""
    try:
        s = parse_inputs(drafters, ks, source, prompt, category, max_new_tokens, target, draft_model, exit_layer,
                         temperature, seed, repetition_penalty, min_p)
    except (InputError, PolicyError) as error:
        yield _failed("checking the arena's inputs", error)
        return
    trees = [d for d in s["drafters"] if d.endswith(f":{TREE_SUFFIX}")]
    notes = list(s["notices"])  # e.g. a max new tokens typed outside the slider's range: the value this run uses
    for notice in notes:
        gr.Info(html.escape(notice))  # as the slider's own check says it (app.messages.clamped)
    notes += [TREE_NOTE] if trees and s["temperature"] > 0 else []
    changed = settings_summary(SamplingConfig(repetition_penalty=s["generation"]["repetition_penalty"],
                                              min_p=s["generation"]["min_p"]))
    notes += [f"Every run (baseline, target and draft alike) uses: {changed}."] if changed else []
    methods = len(s["drafters"]) * len(s["ks"]) + 1
    prompts = render.plural(len(s["prompts"]), "prompt")
    job = device.start(RUNS, request, f"the arena is running ({prompts} × {render.plural(methods, 'method')})")
    started, cpu = time.monotonic(), CpuShare()
    try:
        hidden = gr.update(visible=False)  # a previous run's results never stand beside this one's status
        yield _outputs(status=render.status_html(
            f"Starting: {prompts} × {render.plural(methods - 1, 'method')}, with standard decoding timed before "
            f"and after each ({2 * methods - 1} runs per prompt), {s['max_new_tokens']} new tokens each…", "busy",
            notes=notes), summary=table([]), timings=table([], TIMING_COLUMNS),
            prompts=table([], PROMPT_COLUMNS))[:4] + (hidden,) * 4
        result = yield from _race_on_device(job, s, bool(chat_template), _Progress(progress, notes, started))
        yield from _show_result(result, job, time.monotonic() - started, notes, cpu)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _failed("arena", error)
    finally:
        job.release()  # also when Gradio closes this handler: the arena stops before its next target forward


def _race_on_device(job: Job, s: dict, chat_template: bool, shown: "_Progress"):
    """Wait for the device, then run :func:`_arena_work` in the job's thread, yielding status and partial
    results; returns the last result (None when stopped before any)."""
    def waiting(place) -> tuple:
        return _outputs(status=render.status_html(
            f"Waiting for the device… ({place.holder or 'another run holds it'})", "wait"))

    if not (yield from relay(job.turn(), waiting)):
        return None
    result = yield from relay(job.call(_arena_work, job, s, chat_template, stoppable=True), shown.show)
    return result or shown.result


def _arena_work(job: Job, s: dict, chat_template: bool) -> ArenaResult | None:
    """In the job's thread: load the target, then race every method on every prompt (stopping before the next
    target forward once the job is cancelled). Says ("progress", (fraction, message)) and ("partial", a
    snapshot of the result so far) through the job; returns the final result (None when nothing ran).
    Raises InputError for an early-exit layer the target lacks."""

    def say_progress(fraction: float, message: str) -> None:
        job.say(("progress", (fraction, message)))

    say_progress(0.0, f"Loading the target {s['target']}…")
    loaded = load_target(s["target"], progress=lambda message: say_progress(0.0, message))
    check_exit_layer(s["exit_layer"], loaded)
    if "model" in s["drafters"] or "bf16" in s["drafters"]:
        say_progress(0.0, "Loading the draft model…")
    generation = dict(s.get("generation") or {})
    stop_token_ids = tuple(generation.pop("stop_token_ids", ()))
    config = GenerationConfig(max_new_tokens=s["max_new_tokens"], stop_token_ids=stop_token_ids,
                              sampling=SamplingConfig(temperature=s["temperature"], seed=s["seed"], **generation))
    result = None
    for result in iter_arena(loaded, s["prompts"], s["drafters"], s["ks"], config, say_progress, job.should_stop,
                             draft_spec=s["draft_spec"], exit_layer=s["exit_layer"], use_chat_template=chat_template):
        # a snapshot: the worker extends the rows again while the handler renders these
        job.say(("partial", dataclasses.replace(result, rows=list(result.rows), summary=list(result.summary))))
    return result


class _Progress:
    """Turns the arena job's messages into the progress bar (``gr.Progress`` works only in the handler's thread)
    and status updates: a new message at once, the table and charts after each prompt, "still running" about
    every :data:`STATUS_INTERVAL_S` seconds."""

    def __init__(self, progress, notes: list[str], started: float) -> None:
        self.progress, self.notes, self.started = progress, notes, started
        self.message, self.fraction, self.last = "", 0.0, 0.0
        self.result: ArenaResult | None = None  # the latest partial result

    def show(self, item) -> tuple | None:
        """The output tuple for one item of the job (None: nothing to show now)."""
        now = time.monotonic()
        kind, payload = item if item is not None else ("tick", None)
        if kind == "progress":
            self.fraction, message = payload
            self.progress(self.fraction, desc=message)
            if message == self.message:
                return None
            self.message = message  # the status names the same run as the progress bar
            return self._status(now)
        if kind == "partial" and payload.rows:
            self.result = payload
            self.notes.extend(note for note in payload.notes if note not in self.notes)  # e.g. re-tokenized drafts
            return _result_outputs(payload, self._running(now))
        if now - self.last < STATUS_INTERVAL_S:
            return None
        self.progress(self.fraction, desc=self.message or "Working…")
        return self._status(now)

    def _running(self, now: float) -> str:
        """The "Running… message (seconds)" status line; counts as shown now."""
        self.last = now
        return render.status_html(f"Running… {self.message} ({now - self.started:.0f} s)", "busy", notes=self.notes)

    def _status(self, now: float) -> tuple:
        return _outputs(status=self._running(now))


def _show_result(result: ArenaResult | None, job: Job, seconds: float, notes: list[str], cpu: CpuShare | None = None):
    """The final outputs: the table, charts and both downloads; or why there is nothing to show (``cpu``: started
    with the run, for the busy warning)."""
    if result is None:
        if job.cancelled:
            yield _outputs(status=render.status_html("Stopped.", "info"))
        return
    if not result.rows:
        yield _outputs(status=render.status_html("Stopped before the first prompt finished: nothing to show.",
                                                 "info"))
        return
    shown_notes = notes + [n for n in result.notes if n not in notes]
    status = _done_status(result, seconds, shown_notes, cpu)
    csv_path, json_path = write_files(result, wall_s=seconds, notes=shown_notes, status=status)  # what the page says
    final = _result_outputs(result, status)
    yield final[:6] + (gr.update(value=csv_path, visible=True), gr.update(value=json_path, visible=True))


def stop(request: gr.Request = None) -> str:
    """The Stop button: flag this session's arena run (it ends before its next target pass and shows what
    finished)."""
    RUNS.cancel(request)
    return render.status_html("Stopping…", "info")


def release_session(request: gr.Request = None) -> None:
    """When a browser tab closes: cancel that session's arena run (and no one else's)."""
    RUNS.cancel_session(request)


def preset_chosen(key: str, chosen: list[str] | None):
    """A real pair picked (:data:`specviz.presets.PRESETS`): its target and draft model, and the 'Draft model'
    drafter ticked beside the chosen ones (outputs: target, draft model, drafters); nothing changes for "—"."""
    if not key:
        return gr.skip(), gr.skip(), gr.skip()
    pair = preset(key)
    return pair.target, pair.draft, [*(chosen or []), *([] if "model" in (chosen or []) else ["model"])]


def source_changed(source: str):
    """Show the prompt box for one prompt, the category menu for a category."""
    return gr.update(visible=source == "prompt"), gr.update(visible=source == "category")


# ------------------------------------------------------------------------------------------------ layout

NOTE = (
    "<div class='arena-note'><b>How ratios are formed.</b> Per prompt, each drafter × k runs once, with standard "
    "decoding timed before the first method, between every two and after the last (standard, method, standard, "
    "method, …, standard; the methods' order rotates from prompt to prompt), every run on its own clock. A method's "
    "<b>speedup</b> divides its rate by the pooled rate of the two standard runs right beside it, so a slow moment "
    "of the machine weighs on both sides of one ratio instead of on every method of the prompt. <b>Baseline "
    "drift</b> = how much those two standard runs differ (fastest ÷ slowest − 1); above 15% the machine's speed "
    "changed during the measurement (“unsteady”). <b>Speedup, decode</b> (after the prefill) is "
    "the headline; <b>speedup, end to end</b> includes the prefill. <b>The range after each speedup</b>, e.g. "
    "1.23× faster (1.15–1.31×), is its spread: the method's rate over each of those two standard runs taken alone (the "
    "chart's error bars); a category or “all” row gives the lowest and highest over its prompts. A method runs "
    "once per prompt, so its own run-to-run noise is read from the baselines' (how much two runs of the same work "
    "differ); where no pair of standard runs gives a spread, the cell says “one run: no spread”. The words follow the "
    "rule of every tab: a range wholly above 1 is faster, wholly below slower, however wide; one that spans 1.00 is "
    "too noisy to tell (about the same when narrow and the baselines steady), its number still given. The standard row pools all its runs (Runs) and is the reference (1 by "
    "definition); its baseline drift is how far all those runs lie apart (“its runs apart”), no flag of its own. "
    "<b>How to read the rest.</b> "
    "<b>Tokens/pass</b> counts the bonus token; <b>acceptance</b> = accepted ÷ drafted; <b>α</b> = accepted ÷ "
    "(accepted + rejections), the per-token acceptance of the formulas. <b>Predicted, paper</b> = "
    "(1 − α<sup>m+1</sup>) / ((1 − α)(c·m + 1)), which assumes a verification costs one target step; "
    "<b>predicted, measured costs</b> = E[tokens/pass] × T_step / (T_verify + T_draft). m = drafted tokens per pass, "
    "c = drafting ms per drafted token ÷ T_step. The gap between the two predictions is the verification overhead. "
    "The predictions model decoding after the prefill, as <b>speedup, decode</b> does. <b>The range after "
    "tokens/s, T_step, T_verify, T_draft, c and the predictions</b> is their spread too: tokens/s from the slowest "
    "to the fastest run pooled in the row (a method runs once per prompt, so its prompt row says “one run: no "
    "spread”); T_step from the standard runs beside the method taken alone (the standard row: all its runs); "
    "T_verify and T_draft (means per pass) the 95% bootstrap interval of that mean over the method's passes "
    "(“one pass: no spread” with a single pass; a few slow passes stretch it upwards); c and the predictions "
    "computed from the ends of those spreads that push them furthest each way. A category or “all” row spans its "
    "prompts. Category and "
    "“all” rows pool their prompts' counts and times; the CSV and JSON hold every prompt and the definitions.</div>"
)


CLEAR_TOASTS_JS = ("(...inputs) => { document.querySelectorAll('[data-testid=\"toast-close\"]').forEach((close) => "
                   "close.click()); return inputs; }")
"""Run arena's client side, before the run is sent: close every toast on the page (their own close buttons), so
that the warnings of an earlier attempt (a refused input, a failed run) neither stay beside this run nor come back
inside its toasts (Gradio adds a new warning to the open group of older ones: "Warning (2)"); this run's own
toasts arrive after it. Returns the inputs unchanged."""

ENTER_COMMITS_JS = enter_commits_js("#arena-controls", sliders=True)
"""On page load: Enter in a number box of the Arena's controls commits it as leaving the box does
(:func:`app.messages.enter_commits_js`): a slider's box then clamps a number typed outside its range and
:func:`app.messages.tell_when_clamped` says so at once, and a number box gets its check
(:func:`app.messages.tell_when_invalid`). Without it Enter did nothing: the box kept showing e.g. 3 below the
slider's 8, unannounced until the box was left."""


def _preset_picker(target_box: gr.Textbox, draft_model: gr.Textbox, drafters: gr.CheckboxGroup) -> None:
    """The real-pair menu (:func:`preset_chosen` fills the models and ticks the 'Draft model' drafter)."""
    box = gr.Dropdown([("—", "")] + [(p.label, p.key) for p in PRESETS], value="",
                      label="Or a real pair (needs a network)", elem_id="arena-preset",
                      info="Fills the target and draft model and ticks the 'Draft model' drafter")
    box.change(preset_chosen, inputs=[box, drafters], outputs=[target_box, draft_model, drafters], queue=False,
               api_visibility="private")


def _results_column() -> tuple:
    """The results column's components: status, summary table, timings table, per-prompt table, charts, predictions,
    CSV, JSON."""
    status = gr.HTML(render.status_html("Pick drafters, k and prompts, then press Run arena.", "info"),
                     elem_id="arena-status")
    summary = gr.Dataframe(empty_table(), label="Per category, and all prompts pooled", interactive=False,
                           elem_id="arena-table", elem_classes=["sv-wide-table", "sv-wrap-cells"], max_height=420,
                           wrap=True)  # a value and its spread may sit on two lines
    timings = gr.Dataframe(empty_table(TIMING_COLUMNS), label="Rates, predictions and the timings behind them",
                           interactive=False, elem_id="arena-timings", elem_classes=["sv-wide-table", "sv-wrap-cells"],
                           max_height=420, wrap=True)  # the summary's other half: each fits a 1400 px page
    charts = gr.Plot(elem_id="arena-charts", show_label=False, visible=False)
    predictions = gr.Plot(elem_id="arena-predictions", show_label=False, visible=False)
    with gr.Row(elem_id="arena-downloads"):
        csv_file = gr.File(label="Results (CSV)", elem_id="arena-csv", interactive=False, visible=False)
        json_file = gr.File(label="Results, settings, versions and device (JSON)", elem_id="arena-json",
                            interactive=False, visible=False)
    with gr.Accordion("Per prompt", open=False, elem_id="arena-per-prompt"):
        per_prompt = gr.Dataframe(empty_table(PROMPT_COLUMNS), interactive=False, elem_id="arena-prompts",
                                  elem_classes=["sv-wide-table", "sv-wrap-cells"], max_height=480, wrap=True,
                                  show_label=False)
    gr.HTML(NOTE, elem_id="arena-definitions")
    return status, summary, timings, per_prompt, charts, predictions, csv_file, json_file


def _drafter_list() -> gr.CheckboxGroup:
    """The drafters to race, with what each ticked one is and costs under the list (:func:`app.drafter_about.add_about`)."""
    drafters = gr.CheckboxGroup(drafter_choices(), value=list(DEFAULT_DRAFTERS), label="Drafters",
                                elem_id="arena-drafters", info="Each runs against the same standard-decoding baseline")
    add_about(drafters, "arena-drafters-about", list(DEFAULT_DRAFTERS))
    return drafters


def build_tab(target: str = "embedded") -> None:
    """Lay out the Arena tab inside the current ``gr.Tab`` and wire its events."""
    cats = categories()
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="arena-controls"):
            drafters = _drafter_list()
            ks = gr.CheckboxGroup(list(K_CHOICES), value=list(DEFAULT_KS), label="Draft length k",
                                  elem_id="arena-ks",
                                  info="auto = cost-aware k, as in the Live tab: chosen each pass from the measured "
                                  "pass cost and acceptance (0 when no k pays), starting at 4")
            source = gr.Radio([(label, key) for label, key in SOURCES], value="category", label="Prompts",
                              elem_id="arena-source", info=SUITE_INFO.format(n=len(suite()), c=len(cats)))
            prompt = gr.Textbox("", label="Prompt", lines=3, max_lines=10, visible=False, elem_id="arena-prompt",
                                placeholder="Type a prompt…")
            category = gr.Dropdown(category_choices(), value="code-edit" if "code-edit" in cats else cats[0],
                                   label="Category", elem_id="arena-category")
            max_new_tokens = gr.Slider(MIN_NEW_TOKENS, MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=8,
                                       label="Max new tokens per run", elem_id="arena-max-new-tokens",
                                       info="Small keeps a category to minutes on a CPU (the suite: 9 times that)")
            with gr.Row():
                run_btn = gr.Button("Run arena", variant="primary", elem_id="arena-run", scale=2,
                                    min_width=100)  # with Stop beside it in the 300 px column
                stop_btn = gr.Button("Stop", variant="stop", elem_id="arena-stop", scale=1, min_width=80)
            with gr.Accordion("Target, draft model and sampling", open=False, elem_id="arena-settings"):
                target_box = gr.Textbox(target, label="Target model", elem_id="arena-target",
                                        info="'embedded', a hub id or a local folder")
                draft_model = gr.Textbox("", label="Draft model (for the 'Draft model' drafter)",
                                         elem_id="arena-draft-model", placeholder="hub id or local folder")
                _preset_picker(target_box, draft_model, drafters)
                exit_layer = gr.Number(0, label="Early-exit layer (0 = half the target's layers)", precision=0,
                                       elem_id="arena-exit-layer")
                temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy: outputs are "
                                        "checked identical)", elem_id="arena-temperature")
                seed = gr.Number(0, label="Seed", precision=0, elem_id="arena-seed")
                with gr.Row():  # applied to the target and the draft alike, and to the baseline
                    repetition_penalty = gr.Number(1.0, label="Repetition penalty (1 = off)",
                                                   elem_id="arena-repetition-penalty")
                    min_p = gr.Number(0.0, label="Min-p (0 = off; sampling only)", elem_id="arena-min-p")
                chat_template = gr.Checkbox(True, label="Use the chat template", elem_id="arena-chat-template")
        with gr.Column(scale=3, min_width=600, elem_id="arena-results"):
            status, summary, timings, per_prompt, charts, predictions, csv_file, json_file = _results_column()
    outputs = [status, summary, timings, per_prompt, charts, predictions, csv_file, json_file]
    inputs = [drafters, ks, source, prompt, category, max_new_tokens, target_box, draft_model, exit_layer,
              temperature, seed, chat_template, repetition_penalty, min_p]
    # Stop only flags the run: it ends before its next target pass and still shows (and offers for download)
    # the prompts that finished
    run_btn.click(run, inputs=inputs, outputs=outputs, api_name="arena", show_progress="full",
                  show_progress_on=[status], concurrency_limit=4, concurrency_id="arena", js=CLEAR_TOASTS_JS)
    gr.context.Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    stop_btn.click(stop, outputs=[status], queue=False, api_name="arena_stop")
    tell_when_clamped(max_new_tokens, status, MAX_NEW_TOKENS_NAME)
    tell_when_clamped(temperature, status, "Temperature")
    tell_when_invalid(exit_layer, status, EXIT_LAYER, parse_exit_layer, target=target_box)  # its layers, once loaded
    tell_when_invalid(seed, status, SEED)
    tell_when_invalid(repetition_penalty, status, REPETITION_PENALTY)
    tell_when_invalid(min_p, status, MIN_P)
    source.change(source_changed, inputs=[source], outputs=[prompt, category], queue=False,
                  api_visibility="private")
