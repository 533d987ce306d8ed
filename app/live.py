"""The Live tab: a prompt, a drafter and k; the speculative run and its standard-decoding baseline stream side by
side, with stats and charts, and Stop keeps what they made as the run's result.

:func:`generate` (the Generate button) validates the inputs (:func:`app.inputs.parse_settings`), waits for its
turn on the device (:mod:`app.device`: runs of every tab take turns, first come first served, and a waiting
visitor is told how many runs are ahead), loads the target and the drafter, then runs the speculative stream and
its baseline through :func:`specviz.core.race.race` (one thread, interleaved by each run's own clock, so neither is
timed while the other computes) and yields rendered panes, stats and charts at a bounded rate; with the EAGLE /
Medusa drafters also the draft tree of the latest pass and the Medusa heads' accuracy (:mod:`app.tree_view`),
refreshed with the charts. Both engine streams get the job's cancel flag: Stop, or a closed handler, stops them
before their next forward (a long prompt is read 256 tokens per forward). :func:`stop` flags the session's run;
:func:`stop_run` (the Stop button) also shows what the run made so far as its result: panes without the cursor,
finish reason "stopped", the output check up to that point and a history row marked stopped.

A prompt longer than the target's context window (or than ``SPECVIZ_MAX_PROMPT_TOKENS``) is cut from the left
with the chat template kept whole, and the status says so; any exception in a run becomes a message for that
session only (:mod:`app.messages`), and the session's last good result stays in the panes. Every output tuple
has the order of :data:`OUTPUTS`.

Honest numbers: the headline is the decoding speedup (after the prefill) with its bootstrap interval over passes
(:func:`specviz.core.metrics.judge_decode_speedup`); a run too short to judge or too noisy to tell shows no
figure in green or red, and enters the history without a speedup. Time you can plan: before a run the status
says how long it should take (:class:`RunCosts`, learned from the latest runs of the target here, else from its
measured one-token step) and how many runs are ahead; a long prefill is announced with its expected time; the
default max new tokens is derived once from the measured step cost (:func:`derived_default_tokens`). "Output
only" shows the committed text plainly (a class on <body>, :data:`OUTPUT_ONLY_JS`).

:func:`build_tab` lays the tab out inside the current ``gr.Tab`` and wires its events.
"""

from __future__ import annotations

import html
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from app import device, render, zerogpu
from app.device import LOCAL_PREFIX, CancelRegistry, Job, load_target, relay, session_key
from app.figures import dashboard_figure
from app.inputs import (HEAD_DRAFTERS, MAX_CONFIDENCE, MAX_TREE_NODES, Settings, check_settings_vocab,
                        fit_prompt_for, fit_settings_exit_layer, parse_k_schedule, parse_settings)
from app.inputs import LOOKAHEAD_DEFAULTS, MAX_CANDIDATES, MAX_NEW_TOKENS_HINT, MAX_NGRAM, MAX_WINDOW
from app.inputs import (EXIT_LAYER, FREQUENCY_PENALTY, MIN_P, NO_REPEAT_NGRAM_SIZE, PRESENCE_PENALTY,
                        REPETITION_PENALTY, SEED, TOP_K, parse_exit_layer)
from app.live_costs import settle_prefill_note, settled_after_prefill, timed_forwards
from app.lookahead_view import LookaheadView
from app.messages import enter_commits_js, log_failure, report, tell_when_clamped, tell_when_invalid, warn
from app.tree_view import HeadAccuracy, TreeView
from specviz.analysis.bench import CONTENDED_SHARE, CpuShare  # above that share: a run's ratio is not judged
from specviz.compiled import COMPILING_NOTE, forward_path
from specviz.core.graphs import path_label
from specviz.core.engine import MAX_K, speculative_generate, standard_generate
from specviz.core.events import PassEvent
from specviz.core.metrics import RunStats, SpeedupJudgement, format_apart, judge_decode_speedup
from specviz.core.race import race
from specviz.drafters.heads import DEFAULT_MIN_CONFIDENCE
from specviz.drafters.registry import choices, label_of, make_drafter
from specviz.drafters.suffix import SuffixStore
from specviz.policy import current_policy
from specviz.presets import PRESETS, preset

ASSETS = Path(__file__).resolve().parent.parent / "assets"

OUTPUTS = ("spec-output", "baseline-output", "charts", "stats", "status", "history", "history-state", "draft-tree",
           "head-accuracy", "run-progress")
"""What :func:`generate` yields, in order (the components' elem_ids); "run-progress" is the status's compact copy
under the Generate button (:func:`progress_html`)."""

UPDATE_INTERVAL_S = 0.25  # token panes and stats: at most 4 refreshes a second
CHART_INTERVAL_S = 0.5  # charts: at most 2 a second (plotly redraws cost the browser)
HISTORY_ROWS = 12
WHAT = "another session is generating"  # what visitors in line are told a Live run is doing

DEFAULTS = {
    "prompt": "",
    "target": "embedded",
    "drafter": "ngram",
    "draft_model": "",
    "exit_layer": 0,
    "k": 4,
    "adaptive_k": False,
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "seed": 0,
    "max_new_tokens": 64,  # kept until the page learns the derived default (see derived_default_tokens)
    "stop_strings": "",
    "chat_template": True,
    "tree_nodes": 0,
    "confidence": DEFAULT_MIN_CONFIDENCE,
    "lookup": False,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "no_repeat_ngram_size": 0,
    "logit_bias": "",
    "banned_ids": "",
    "stop_token_ids": "",
    "window": LOOKAHEAD_DEFAULTS[0],
    "ngram": LOOKAHEAD_DEFAULTS[1],
    "candidates": LOOKAHEAD_DEFAULTS[2],
}
"""The Live tab's settings before the visitor changes them (:func:`app.build_demo` takes overrides). Left as it is,
``max_new_tokens`` is replaced on page load by a default derived from the target's measured step cost (a run of
about :data:`DEFAULT_RUN_S` seconds here, :func:`derived_default_tokens`); an override is kept as given."""

RUNS = CancelRegistry()  # the Live tab's runs, one per session
_VIEWS: dict[str, "RunView"] = {}  # session -> its latest run's view, for Stop
_GOOD: dict[str, "RunView"] = {}  # session -> its latest finished (or stopped) run, kept when a later run fails
_VIEWS_LOCK = threading.Lock()
_SUFFIX_STORES: dict[str, SuffixStore] = {}  # session -> suffix decoding's earlier outputs (lives for a page visit)


# ------------------------------------------------------------------------------------------------- examples


def load_examples(path: Path = ASSETS / "prompts.jsonl") -> list[dict]:
    """The example prompts ({id, category, prompt} per line), sorted by category."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["category"])


FIRST_EXAMPLE = "rag-1"  # in the prompt box when the page opens: grounded, so n-gram drafting shows its gain
DEFAULTS["prompt"] = next(e["prompt"] for e in load_examples() if e["id"] == FIRST_EXAMPLE)


def example_labels(examples: list[dict]) -> list[str]:
    """"category · first words" per example; where two would read the same, each of them gets the start of its
    next line (e.g. two questions over different contexts), and any that still read the same a number: "(2)",
    "(3)", so every label is distinct."""
    first = [f"{e['category']} · {_short(e['prompt'])}" for e in examples]
    labels = list(first)
    for i, e in enumerate(examples):
        lines = [line for line in e["prompt"].strip().splitlines() if line.strip()]
        if first.count(first[i]) > 1 and len(lines) > 1:  # compared with the first labels: every twin changes
            labels[i] += f" — {_short(lines[1], 5)}"
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} ({seen[label]})"
    return labels


def _short(prompt: str, words: int = 7) -> str:
    first = prompt.strip().splitlines()[0].split()
    return " ".join(first[:words]) + ("…" if len(first) > words else "")


# ------------------------------------------------------------------------------------------------- a run


@dataclass
class RunView:
    """What one generation shows: both panes, their statistics and the output comparison."""

    settings: Settings
    target_label: str
    drafter_name: str
    spec: render.Pane | None
    base: render.Pane
    spec_stats: RunStats = field(default_factory=RunStats)
    base_stats: RunStats = field(default_factory=RunStats)
    base_gaps: list[float | None] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    cancelled: bool = False  # stopped by the user (see mark_stopped)
    stopped_at: float | None = None
    notes: list[str] = field(default_factory=list)  # what was changed in the input, repeated in every status
    heads: HeadAccuracy | None = None  # Medusa: accuracy per head
    trees: TreeView | None = None  # made at the first tree pass
    lookahead: LookaheadView | None = None  # made at the first lookahead pass: its window, pool and candidates
    prompt_tokens: int = 0  # what the target read (after any cut)
    cut: str = ""  # the prompt's cut in one clause for the phone status ("" when whole; FittedPrompt.cut)
    ended: float | None = None  # time.monotonic() when both runs finished (for the run-cost estimate)
    cpu: CpuShare | None = None  # other programs' share of the CPUs since the runs started (set when they start)
    _judged: tuple = (None, None)  # (pass counts, SpeedupJudgement) of the latest judgement
    _busy: float | None = None  # other programs' CPU share above CONTENDED_SHARE at the latest judgement, else None
    # (set in one place, _disturbance; noise_reason reads it only when that judgement is "too noisy")
    _frozen: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)  # add vs mark_stopped

    def add(self, event: PassEvent) -> None:
        """Fold one engine event into its pane and statistics; after Stop (:meth:`mark_stopped`) nothing more:
        an event the stream thread held while Stop froze the view would otherwise appear one refresh later."""
        with self._frozen:
            if not self.cancelled:
                self._add(event)

    def _add(self, event: PassEvent) -> None:
        if event.run == "baseline":
            self.base.add(event)
            self.base_stats.add(event)
            self.base_gaps.extend([event.near_tie_gap] * len(event.emitted_ids))
        elif self.spec is not None:
            if event.tree is not None:
                if self.trees is None:
                    self.trees = TreeView(self.spec.tokenizer)
                self.trees.add(event, self.spec.output_ids)  # before the pane: its ids end at the tree's root
            if event.lookahead is not None or (self.settings.drafter == "lookahead" and event.kind == "pass"):
                if self.lookahead is None:  # also counts plain steps (passes without a lookahead branch)
                    self.lookahead = LookaheadView(self.spec.tokenizer, self.settings.ngram)
                self.lookahead.add(event, self.spec.output_ids)  # before the pane: its ids end at x
            if self.heads is not None:
                self.heads.add(event)
            self.spec.add(event)
            self.spec_stats.add(event)
        if event.notice and event.notice not in self.notes:  # e.g. the drafter was dropped mid-run
            self.notes.append(event.notice)
        if event.compiling and COMPILING_NOTE not in self.notes:  # a shape the compiled forward had not seen yet
            self.notes.append(COMPILING_NOTE)

    def mark_stopped(self) -> bool:
        """Stop: freeze this view as the run's result (no cursor, finish reason "stopped" for an unfinished run).
        Returns False when there is nothing to stop (the run finished, or was stopped already)."""
        with self._frozen:
            if self.cancelled or self.finished:
                return False
            self.cancelled, self.stopped_at = True, time.monotonic()
            for pane, stats in ((self.spec, self.spec_stats), (self.base, self.base_stats)):
                if pane is not None:
                    pane.finished = True
                if stats.finish_reason is None:
                    stats.finish_reason = "stopped"
        return True

    @property
    def empty(self) -> bool:
        """No event arrived yet (the prompt is still being read)."""
        return not self.base.passes and (self.spec is None or not self.spec.passes)

    @property
    def finished(self) -> bool:
        """Both runs reached a finish reason (a stopped run is not finished)."""
        if self.cancelled:
            return False
        done = self.base_stats.finish_reason is not None
        return done and (self.spec is None or self.spec_stats.finish_reason is not None)

    def judgement(self) -> SpeedupJudgement | None:
        """The decoding speedup and its bootstrap interval, or why it cannot be read (None without a drafter);
        recomputed only when a run made another pass. Other programs above :data:`CONTENDED_SHARE` of the CPUs
        during the runs disturb it in the speculative run's favour (:func:`judge_decode_speedup`'s ``disturbed``):
        said beside the figure; an interval on one side of 1 keeps its verdict, one across 1 is too noisy to tell."""
        if self.spec is None:
            return None
        counts = (len(self.spec_stats.pass_ms), len(self.base_stats.pass_ms))
        if self._judged[0] != counts:
            judged = judge_decode_speedup(self.spec_stats, self.base_stats, disturbed=self._disturbance())
            self._judged = (counts, judged)
        return self._judged[1]

    def _disturbance(self) -> str | None:
        """Other programs' share of the CPUs during the runs in words when above :data:`CONTENDED_SHARE` (kept in
        ``_busy``), else None."""
        share = self.cpu.others() if self.cpu is not None else None
        self._busy = share if share is not None and share > CONTENDED_SHARE else None
        if self._busy is None:
            return None
        return f"other programs used {share:.0%} of the CPUs"  # render.BUSY_NOTE says what that does to the figure

    def comparison(self) -> render.Comparison:
        """Greedy identity check of the two outputs."""
        spec_ids = self.spec.output_ids if self.spec is not None else self.base.output_ids
        return render.compare_outputs(spec_ids, self.base.output_ids, self.base_gaps, self.base.tokenizer,
                                      greedy=self.settings.greedy, finished=self.finished)

    # ------------------------------------------------------------------------------------------ views
    def spec_html(self) -> str:
        """The speculative pane."""
        if self.spec is None:
            return render.placeholder_html(
                "Drafter 'none' is standard decoding: the baseline pane on the right is the whole run. "
                "Pick a drafter to compare.")
        s = self.spec_stats
        figures = [_rate_figure(s), (PASSES, s.passes, "{}"), ("accepted", s.acceptance_rate, "{:.0%}")]
        header = render.pane_header(f"Speculative · {self.drafter_name}", _k_label(self.settings), figures)
        return render.pane_html(header, self.spec.html())

    def base_html(self) -> str:
        """The baseline pane."""
        s = self.base_stats
        figures = [_rate_figure(s), (PASSES, s.passes, "{}")]
        header = render.pane_header("Standard decoding (baseline)", "one target forward per token", figures)
        return render.pane_html(header, self.base.html())

    def stats_html(self) -> str:
        """The stats cards."""
        spec = self.spec_stats if self.spec is not None else None
        cards = render.stats_html(spec, self.base_stats, self.comparison(), greedy=self.settings.greedy,
                                  stopped=self.cancelled, judgement=self.judgement())
        changed = self.settings.settings_changed
        if not changed:
            return cards
        return cards + (f'<div class="sv-settings" id="run-settings">Generation settings of both runs (target and '
                        f'draft alike): {html.escape(changed)}</div>')

    def tree_html(self, every_pass: bool = False) -> str:
        """The draft tree of the latest pass, or lookahead's window and candidates ("" when no pass drafted a tree
        or ran lookahead); with ``every_pass`` the earlier passes too (closed), for the end of the run."""
        if self.trees is not None:
            return self.trees.html(every_pass=every_pass)
        return self.lookahead.html(every_pass=every_pass) if self.lookahead is not None else ""

    def heads_html(self) -> str:
        """The Medusa heads' accuracy table ("" for other drafters)."""
        return self.heads.html() if self.heads is not None else ""

    def figure(self):
        """The charts (for drafter "none" only those of standard decoding: its latency and time breakdown)."""
        spec = self.spec_stats if self.spec is not None else RunStats(run="speculative")
        figure = dashboard_figure(spec, self.base_stats, k_schedule=self.settings.k_schedule,
                                  speculative=self.spec is not None)
        if self.spec is not None:
            mark_budget_cuts(figure, spec, None if self.settings.k_schedule == "auto" else self.settings.k)
        return figure

    def status(self) -> str:
        """One line: what is happening."""
        seconds = (self.stopped_at or time.monotonic()) - self.started
        if self.cancelled and self.empty:
            return render.status_html(f"Stopped after {seconds:.1f} s, while the prompt was being read.", "info",
                                      notes=self.notes)
        if self.cancelled:
            return render.status_html(f"Stopped after {seconds:.1f} s ({self._counts()}): what was made so far is "
                                      "shown.", "info", notes=self.notes)
        if self.finished:
            return render.status_html(f"Done in {seconds:.1f} s ({self._counts(reasons=True)}) · {self.target_label}",
                                      "done", notes=self.notes)
        stats = self.spec_stats if self.spec is not None else self.base_stats
        made = f"{stats.generated} token{'' if stats.generated == 1 else 's'}"
        return render.status_html(f"Generating… pass {stats.passes}, {made} · both runs take turns on one device, "
                                  "each timed on its own clock", "busy", notes=self.notes)

    def _counts(self, reasons: bool = False) -> str:
        """Tokens (and finish reasons) of both runs: "40 tokens, finish reason: length" when they agree, else
        "speculative 23 tokens (eos), baseline 40 tokens (length)"."""
        def tokens(n: int) -> str:
            return f"{n} token{'' if n == 1 else 's'}"

        s, b = self.spec_stats, self.base_stats
        if self.spec is None or (s.generated == b.generated and s.finish_reason == b.finish_reason):
            return tokens(b.generated) + (f", finish reason: {b.finish_reason}" if reasons else "")
        if reasons:
            return (f"speculative {tokens(s.generated)} ({s.finish_reason}), baseline {tokens(b.generated)} "
                    f"({b.finish_reason})")
        return f"speculative {tokens(s.generated)}, baseline {tokens(b.generated)}"

    def noise_reason(self) -> str | None:
        """Why the decoding speedup is too noisy to tell, in a few words for the history ("other programs used 45%
        of the CPU" or "0.85–1.40× spans 1"); None when it is not "too noisy"."""
        judged = self.judgement()
        if judged is None or judged.verdict != "too noisy":
            return None
        if self._busy is not None:
            return f"other programs used {self._busy:.0%} of the CPU"
        if judged.interval is None:
            return "its interval spans 1"
        low, high = format_apart(judged.interval.low, judged.interval.high)
        return f"{low}–{high}× spans 1"

    def summary(self) -> dict:
        """A row of the run history: rates after the prefill with their intervals over the passes (``spec_tps_interval``,
        ``base_tps_interval``: (low, high), None for one pass); the decoding speedup only when it could be judged
        (else ``speedup_note`` says "too short" or "too noisy"; a too-noisy run keeps what was measured in
        ``speedup_measured`` and why it is noise in ``speedup_reason``, :meth:`noise_reason`)."""
        s, b = self.spec_stats, self.base_stats
        judged = self.judgement()
        return {
            "drafter": self.drafter_name if self.spec is not None else "none",
            "k": _k_label(self.settings), "k_value": self.settings.k if self.spec is not None else None,
            "alpha": s.alpha if self.spec is not None else None, "temperature": self.settings.temperature,
            "seed": None if self.settings.greedy else self.settings.seed,  # sampling: the run is repeatable by it
            "tokens": s.generated if self.spec is not None else b.generated,
            "acceptance": s.acceptance_rate if self.spec is not None else None,
            "tokens_per_pass": s.tokens_per_pass if self.spec is not None else None,
            "spec_tps": s.decode_tokens_per_s if self.spec is not None else None, "base_tps": b.decode_tokens_per_s,
            "spec_tps_interval": _ends(s.decode_rate()) if self.spec is not None else None,
            "base_tps_interval": _ends(b.decode_rate()),  # (low, high) over the passes; None: one pass
            "speedup": judged.value if judged is not None and judged.finding else None,
            "speedup_note": judged.verdict if judged is not None and not judged.finding else None,
            "speedup_measured": judged.value if judged is not None and not judged.finding else None,
            "speedup_reason": self.noise_reason(),
            "speedup_interval": (judged.interval.low, judged.interval.high) if judged is not None and judged.finding
            else None,
            "identical": self.comparison().identical if self.settings.greedy else None,  # sampling: ids may differ
            "stopped": self.cancelled, "settings": self.settings.settings_changed,
        }


PASSES = ("pass", "passes")  # a pane header's pass count, in agreement: "1 pass", "17 passes"


K_CUT_NAME = "k cut by max new tokens"
"""The k chart's marks (and legend entry) on passes whose k the output budget cut: near the end of a run the engine
drafts at most the tokens left (max new tokens − tokens so far − 1), so even a fixed k steps down there."""


def mark_budget_cuts(figure, stats: RunStats, first_asked: int | None) -> None:
    """Mark on the "Draft length k per pass" chart of ``figure`` (:func:`app.figures.dashboard_figure`) the passes
    whose k the output budget cut (:meth:`RunStats.k_cut_by_budget`; ``first_asked``: the run's configured k, for
    the first pass, or None for k = auto, which chooses within the budget itself): each gets a hover text "k = 2:
    cut by max new tokens (asked 4)", and one marker trace named :data:`K_CUT_NAME` shows them in the chart and its
    legend. Nothing changes when no pass was cut or the chart has no k line."""
    cut = stats.k_cut_by_budget(first_asked)
    line = next((trace for trace in figure.data if trace.name == "k"), None)
    if line is None or not any(cut):
        return
    asked = [a if a is not None else first_asked for a in stats.pass_k_asked]
    texts = list(line.text) if line.text is not None and not isinstance(line.text, str) else [
        f"k = {k}" for k in stats.pass_k]
    line.text = [f"{text}: cut by max new tokens (asked {a})" if flag else text
                 for text, flag, a in zip(texts, cut, asked)]
    line.hovertemplate = "pass %{x}: %{text}<extra></extra>"
    xs = [x for x, flag in zip(line.x, cut) if flag]
    ys = [k for k, flag in zip(stats.pass_k, cut) if flag]
    figure.add_scatter(x=xs, y=ys, mode="markers", name=K_CUT_NAME, xaxis=line.xaxis, yaxis=line.yaxis,
                       legend=line.legend, marker={"symbol": "x-thin-open", "size": 11, "line": {"width": 2},
                                                    "color": "#b45309"},
                       text=[f"k = {k}: cut by max new tokens (asked {a})" for k, a, flag
                             in zip(stats.pass_k, asked, cut) if flag],
                       hovertemplate="pass %{x}: %{text}<extra></extra>")


def _ends(interval) -> tuple[float, float] | None:
    """An :class:`~specviz.core.metrics.Interval`'s (low, high) for the history (None stays None)."""
    return None if interval is None else (interval.low, interval.high)


def _rate_figure(stats: RunStats) -> tuple:
    """A pane header's tokens/s figure (after the prefill) with its bootstrap interval over the run's passes
    (:meth:`RunStats.decode_rate`), "one pass" before there are two (:func:`render.pane_header`'s spread)."""
    spread = render.spread_text(stats.decode_rate(), single="one pass")
    return ("tokens/s", stats.decode_tokens_per_s, "{:.1f}", spread)


def _k_label(settings: Settings) -> str:
    """How the run drafts, for the pane header and the history: "k = 4 (adaptive) · tree of 10 nodes, depth ≤ k ·
    gate 0.15 · lookup first" ("" for standard decoding)."""
    if settings.drafter == "none":
        return ""
    label = {"fixed": f"k = {settings.k}", "heuristic": f"k = {settings.k} (adaptive)",
             "auto": "k = auto"}[settings.k_schedule]
    if settings.drafted_tree_nodes:
        label += f" · tree of {render.plural(settings.drafted_tree_nodes, 'node')}, depth ≤ k"
    elif settings.tree_nodes:
        label += " · chain (trees are greedy-only)"
    if settings.drafter in HEAD_DRAFTERS and settings.min_confidence > 0:
        label += f" · gate {settings.min_confidence:g}"
    if settings.lookup:
        label += " · lookup first"
    if settings.drafter == "lookahead":  # k is the candidates' length, N-1; k = auto only gates whole passes
        label = f"k = {settings.k} (N−1)" + (" or a plain step (auto)" if settings.k_schedule == "auto" else "")
        label += f" · W = {settings.window}, N = {settings.ngram}, G = {settings.candidates}"
    return label


def _head_accuracy(drafter) -> HeadAccuracy | None:
    """A per-head accuracy counter for a Medusa drafter (None for the others)."""
    heads = getattr(drafter, "heads", None)
    count = getattr(heads, "num_heads", None)
    return HeadAccuracy(int(count)) if isinstance(count, int) and count > 0 else None


# ------------------------------------------------------------------------------------------------- run costs

DEFAULT_RUN_S = 20.0  # the derived default of max new tokens aims at a run about this long here
MIN_DEFAULT_TOKENS = 16
READING_PANE = "Reading the prompt… this run's tokens appear here as soon as it is read."
DEFAULT_TOKENS_WAIT_S = 3.0  # a page load waits this long for the device to derive its default max new tokens
LONG_PREFILL_S = 10.0  # an expected prefill longer than this is announced before the run
CHARS_PER_TOKEN = 4.0  # for an estimate before the prompt is tokenized (English text, BPE)
SPEC_SHARE = 0.8  # before a speculative run was measured: its decoding taken as this share of the baseline's
STEP_OVERHEAD = 1.2  # a decoding step's wall time over its forward alone (sampling, bookkeeping, the page)
COST_RUNS = 3  # estimates use the median of this many latest runs of a target
PROBE_SPREAD = (0.7, 1.6)  # a plan from one timed step: the acceptance, the page and the load are all unknown
MIN_SPREAD = (0.85, 1.25)  # a plan from earlier runs: at least this wide (their spread, the machine's load)
PREFILL_SAMPLE_TOKENS = 256  # a run's prefill tells the cost per prompt token from this many prompt tokens on; a
# shorter one is mostly a forward's fixed cost, and read per token it makes a long prompt look minutes long


@dataclass(frozen=True)
class RunCosts:
    """What a Live run costs on this machine for one target, in wall-clock ms (both runs share one device).

    A prefill of n prompt tokens costs ``prefill_fixed_ms + n * prefill_ms_per_token`` per run: a forward's fixed
    cost (about one decoding step) plus a cost per token read.

    Attributes:
        prefill_ms_per_token: one run's prefill, per prompt token beyond its fixed cost.
        base_ms_per_token: the baseline's decoding, per token after the first.
        spec_ms_per_token: the speculative run's decoding, per token after the first (None: not measured yet;
            :data:`SPEC_SHARE` of the baseline's is assumed).
        source: where the figures come from, in words, for the status line.
        spread: (low, high) factors on a planned time: the range a run's time is expected in (earlier runs'
            spread, at least :data:`MIN_SPREAD`; :data:`PROBE_SPREAD` from one timed step).
        prefill_fixed_ms: one run's prefill cost whatever the prompt's length (a forward's fixed cost).
    """

    prefill_ms_per_token: float
    base_ms_per_token: float
    spec_ms_per_token: float | None
    source: str
    spread: tuple[float, float] = (1.0, 1.0)
    prefill_fixed_ms: float = 0.0
    prompt_tokens: int | None = None  # learned from a run: the prompt it read (its prefill's sample size)

    def prefill_s(self, prompt_tokens: int, drafter: bool) -> float:
        """Seconds before the first token: both runs read the prompt (one when there is no drafter)."""
        one = self.prefill_fixed_ms + prompt_tokens * self.prefill_ms_per_token
        return (2 if drafter else 1) * one / 1000.0

    def run_s(self, prompt_tokens: int, new_tokens: int, drafter: bool) -> float:
        """Seconds of a whole run: the prefill(s), then ``new_tokens`` of the baseline and, with a drafter, of the
        speculative run."""
        spec = self.spec_ms_per_token if self.spec_ms_per_token is not None else SPEC_SHARE * self.base_ms_per_token
        per_token = self.base_ms_per_token + (spec if drafter else 0.0)
        return self.prefill_s(prompt_tokens, drafter) + max(new_tokens - 1, 0) * per_token / 1000.0


RECENT_RUNS = "recent runs of this model on this server"
"""Where a planned time learned from finished runs comes from, in words: the runs of every visitor of this server
(:data:`_COSTS` is shared), so a visitor with no run of their own yet is not told "your runs"."""
_COSTS: dict[str, list[RunCosts]] = {}  # target spec -> its latest measured runs (newest last)
_TUNED: dict[str, RunCosts] = {}  # target spec -> costs from a one-token step measured here (before any run)
_COSTS_LOCK = threading.Lock()


def costs_of_run(view: RunView) -> RunCosts | None:
    """A finished run's costs per token on its wall clock (the runs' own clocks scaled by the wall time of the
    whole run, which adds rendering and the other run's turns); None for a run too short to tell. The prefill, on
    the baseline's own clock (it runs before the panes stream), is split into a fixed cost (one baseline step: a
    forward of one token) and a cost per prompt token beyond it."""
    s, b = view.spec_stats, view.base_stats
    own_ms = b.elapsed_ms + (s.elapsed_ms if view.spec is not None else 0.0)
    if view.ended is None or own_ms <= 0 or b.emitted < 2 or view.prompt_tokens < 1:
        return None
    scale = min(max((view.ended - view.started) * 1000.0 / own_ms, 1.0), 3.0)
    spec = None
    if view.spec is not None and s.emitted >= 2:
        spec = (s.elapsed_ms - s.prefill_ms) / s.emitted * scale
    step = (b.elapsed_ms - b.prefill_ms) / b.emitted  # own clock: one forward of one token
    fixed = min(step, b.prefill_ms)  # the prefill is not scaled: it runs before the panes stream
    return RunCosts((b.prefill_ms - fixed) / view.prompt_tokens, step * scale, spec, RECENT_RUNS,
                    prefill_fixed_ms=fixed, prompt_tokens=view.prompt_tokens)


def learn_costs(target: str, view: RunView) -> None:
    """Keep a finished run's costs for the estimates of the next runs of ``target``."""
    costs = costs_of_run(view)
    if costs is not None:
        with _COSTS_LOCK:
            runs = _COSTS.setdefault(target, [])
            runs.append(costs)
            del runs[:-COST_RUNS]


def known_costs(target: str) -> RunCosts | None:
    """The costs to plan a run of ``target`` with: the median of its latest runs, else the costs derived from a
    one-token step measured here (:func:`tuned_costs`), else None."""
    with _COSTS_LOCK:
        runs = list(_COSTS.get(target, ()))
        tuned = _TUNED.get(target)
    if not runs:
        return tuned

    def median(values):
        values = sorted(v for v in values if v is not None)
        return values[len(values) // 2] if values else None

    base = median(r.base_ms_per_token for r in runs)
    spec = median(r.spec_ms_per_token for r in runs)
    per_token = [r.base_ms_per_token + (r.spec_ms_per_token or SPEC_SHARE * r.base_ms_per_token) for r in runs]
    middle = median(per_token)
    spread = (min(MIN_SPREAD[0], min(per_token) / middle), max(MIN_SPREAD[1], max(per_token) / middle))
    long_reads = [r for r in runs if (r.prompt_tokens or 0) >= PREFILL_SAMPLE_TOKENS]
    per_token = median(r.prefill_ms_per_token for r in long_reads) if long_reads else None
    if per_token is None:  # only short prompts read: a rough figure; a wide forward's, when larger, is the floor
        per_token = max(median(r.prefill_ms_per_token for r in runs), tuned.prefill_ms_per_token if tuned else 0.0)
    return RunCosts(per_token, base, spec if spec is not None else (tuned.spec_ms_per_token if tuned else None),
                    runs[-1].source, spread, prefill_fixed_ms=median(r.prefill_fixed_ms for r in runs))


def tuned_costs(spec: str, loaded) -> RunCosts:
    """Costs of ``loaded`` (the target ``spec``) from forwards timed here at the threads its runs use
    (:func:`app.live_costs.timed_forwards`, a second or two): the one-token step T(1), and a forward of
    :data:`PREFILL_SAMPLE_TOKENS` tokens, the width a long prompt is read in, per token (a narrow forward's cost
    per token is several times a prefill's: read so, a 2,185-token prompt was planned at minutes and read in
    seconds). Call it while holding the device (the app's
    start-up does, :mod:`app.live_costs`). Remembered per spec; a later call returns the remembered costs."""
    with _COSTS_LOCK:
        if spec in _TUNED:
            return _TUNED[spec]
    step, wide = timed_forwards(loaded, PREFILL_SAMPLE_TOKENS)
    costs = RunCosts(wide, step * STEP_OVERHEAD, None, "forwards timed on this machine", PROBE_SPREAD)
    with _COSTS_LOCK:
        _TUNED[spec] = costs
    return costs


def default_max_new_tokens(costs: RunCosts | None, cap: int, fallback: int) -> int:
    """Max new tokens for a run of about :data:`DEFAULT_RUN_S` seconds with a drafter on a short prompt (rounded
    down to a multiple of 8, at least :data:`MIN_DEFAULT_TOKENS`, at most ``cap``, the operator's limit);
    ``fallback`` (capped) without costs."""
    if costs is None:
        return min(fallback, cap)
    per_token_ms = costs.run_s(0, 2, drafter=True) * 1000.0
    tokens = int(DEFAULT_RUN_S * 1000.0 / max(per_token_ms, 1e-3)) // 8 * 8
    return max(1, min(cap, max(MIN_DEFAULT_TOKENS, tokens)))


_DEFAULT_TOKENS: dict[str, int] = {}  # target spec -> the derived default of max new tokens (computed once)
_DEFAULT_LOCK = threading.Lock()  # one page load measures; the others keep the page's value meanwhile


def derived_default_tokens(spec: str, fallback: int) -> int | None:
    """The default max new tokens for ``spec``, derived once per process from its measured step cost
    (:func:`default_max_new_tokens`, within the operator's SPECVIZ_MAX_NEW_TOKENS): the first call waits up to
    :data:`DEFAULT_TOKENS_WAIT_S` for the device, loads the target (at once when it was pre-loaded) and reads its
    tuned step time or probes it; later calls return the remembered value. None while another call is measuring,
    while a run holds the device, or when the target cannot be loaded (the page then keeps ``fallback``). The wait
    is short because the page's slider gets the value when this returns: after a long wait behind someone's run it
    would replace a number the visitor had typed since the page opened (seen: 32 typed, runs of 91+ tokens)."""
    if spec in _DEFAULT_TOKENS:
        return _DEFAULT_TOKENS[spec]
    if not _DEFAULT_LOCK.acquire(blocking=False):
        return None
    owner = f"defaults:{uuid.uuid4().hex}"
    try:
        if spec not in _DEFAULT_TOKENS:
            costs = known_costs(spec)
            if costs is None:
                if device.DEVICE.acquire(owner, "the default run length is being measured", DEFAULT_TOKENS_WAIT_S):
                    try:
                        costs = tuned_costs(spec, load_target(spec))
                    finally:
                        device.DEVICE.release(owner)
                else:  # a run holds the device: this page keeps its value; a later page load measures
                    device.DEVICE.leave(owner)
            if costs is not None:
                _DEFAULT_TOKENS[spec] = default_max_new_tokens(costs, current_policy().max_new_tokens, fallback)
        return _DEFAULT_TOKENS.get(spec)
    except Exception as error:  # noqa: BLE001 - a page load never fails over its default
        log_failure("deriving the default max new tokens", error)
        return None
    finally:
        _DEFAULT_LOCK.release()


def page_default_tokens(spec: str, fallback: int, shown=None):
    """On page load: the max-new-tokens slider's derived default (:func:`derived_default_tokens`), or no change
    (also when the slider no longer showed ``fallback`` when the page loaded, or when deriving it took longer than
    :data:`DEFAULT_TOKENS_WAIT_S`, e.g. loading the target: the visitor may have typed a number meanwhile)."""
    started = time.monotonic()
    value = derived_default_tokens(spec, fallback)
    if value is None or (shown is not None and shown != fallback):
        return gr.skip()
    if time.monotonic() - started > DEFAULT_TOKENS_WAIT_S:  # the visitor may have typed since: keep it (the value
        return gr.skip()  # stays remembered for the next page load)
    return gr.update(value=value)


def plan_text(settings: Settings, costs: RunCosts | None, prompt_tokens: int | None = None) -> str:
    """"about 20–30 s (from recent runs of this model on this server)" for a run of ``settings`` (the range of ``costs.spread``), with
    the prefill named when it takes over :data:`LONG_PREFILL_S`; "" without costs. ``prompt_tokens`` None:
    estimated from the characters."""
    if costs is None:
        return ""
    tokens = prompt_tokens
    if tokens is None:
        tokens = int(len(settings.prompt) / CHARS_PER_TOKEN) + 1
        if settings.max_prompt_tokens:
            tokens = min(tokens, settings.max_prompt_tokens)
    drafter = settings.drafter != "none"
    total = costs.run_s(tokens, settings.max_new_tokens, drafter)
    prefill = costs.prefill_s(tokens, drafter)
    text = f"about {_range(total, costs.spread)} (from {costs.source})"
    if prefill > LONG_PREFILL_S:  # the same factors on both: the whole run's range holds its reading's
        text += (f", {_range(prefill, costs.spread)} of it reading the {'~' if prompt_tokens is None else ''}"
                 f"{tokens:,}-token prompt")
    return text


def _range(seconds: float, spread: tuple[float, float]) -> str:
    """``seconds`` with its range ``spread`` (low and high factors): "25 s", "20–30 s", "3 min 5 s – 7 min 2 s"."""
    low, high = seconds * spread[0], seconds * spread[1]
    return _seconds(seconds) if _seconds(low) == _seconds(high) else _span(low, high)


def _span(low: float, high: float) -> str:
    """"20–30 s", "1 min 50 s – 3 min 10 s": a planned time's range."""
    if high < 120:
        return f"{max(1, round(low))}–{_seconds(high)}"
    return f"{_seconds(low)} – {_seconds(high)}"


def _seconds(s: float) -> str:
    """"25 s", "3 min 10 s"."""
    s = max(1, round(s))
    return f"{s} s" if s < 120 else f"{s // 60} min {s % 60} s"


def long_prompt_note(settings: Settings, costs: RunCosts | None, prompt_tokens: int) -> str:
    """The warning before a long prefill: its tokens and expected seconds, and the server's prompt cap
    (``SPECVIZ_MAX_PROMPT_TOKENS``); "" when the prefill is short or its cost unknown."""
    if costs is None:
        return ""
    seconds = costs.prefill_s(prompt_tokens, settings.drafter != "none")
    if seconds <= LONG_PREFILL_S:
        return ""
    cap = (f"This server reads at most {settings.max_prompt_tokens:,} prompt tokens (SPECVIZ_MAX_PROMPT_TOKENS)."
           if settings.max_prompt_tokens else
           "The operator can cap prompts with SPECVIZ_MAX_PROMPT_TOKENS.")
    runs = "both runs read it" if settings.drafter != "none" else "the target reads it"
    return (f"A long prompt: {prompt_tokens:,} tokens take about {_seconds(seconds)} to read before the first token "
            f"appears ({runs}; a shorter prompt starts sooner). {cap}")


# ------------------------------------------------------------------------------------------------- outputs


def history_html(history: list[dict]) -> str:
    """The run history table (newest first)."""
    return render.history_html(history)


def _add_to_history(history: list[dict], view: RunView) -> None:
    """Put ``view``'s run first in ``history`` (at most :data:`HISTORY_ROWS` rows are kept)."""
    history.insert(0, view.summary())
    del history[HISTORY_ROWS:]


def _outputs(spec_html=None, base_html=None, figure=None, stats=None, status=None, history=None, state=None,
             tree=None, heads=None, cut=""):
    """An output tuple in :data:`OUTPUTS` order; None leaves a component as it is. The charts stay hidden until
    the first figure arrives; the draft tree and the heads' table show when given HTML and hide when given "".
    ``cut`` (:attr:`RunView.cut`) keeps a cut prompt's warning in the phone status (:func:`progress_html`)."""
    skip = gr.skip()
    chart = gr.update(value=figure, visible=True) if figure is not None else None

    def shown(markup):
        if markup is None:
            return None
        return gr.update(value=markup, visible=True) if markup else gr.update(visible=False)

    progress = None if status is None else progress_html(status, cut)
    return tuple(skip if v is None else v for v in (spec_html, base_html, chart, stats, status, history, state,
                                                     shown(tree), shown(heads), progress))


def progress_html(status: str, cut: str = "") -> str:
    """The compact copy of the status line (``status``: :func:`app.render.status_html` markup) that sits under the
    Generate button: on a narrow screen the status and both panes are a screen or more below the button, so this
    copy (its first two lines, without notes; style.css) says that the run started and how far it got, with a link
    down to the output. One note stays, in short: ``cut``, the prompt's cut (:attr:`RunView.cut`: "⚠ Prompt cut: its
    first 1,024 tokens were removed (an instruction there no longer reaches the model)."), since a phone user would
    not learn otherwise that the start of the request is gone. Wide screens hide it: the status is beside the button
    there. The copy is no live region (``role="status"`` dropped): a screen reader announces the status once."""
    copy = status.replace(' role="status"', "", 1)
    warning = f'<small class="sv-progress-cut">⚠ Prompt cut: {html.escape(cut)}.</small>' if cut else ""
    return f'<div class="sv-progress">{copy}{warning}<a class="sv-jump" href="#status">Output below ↓</a></div>'


def _blank(message: str, status: str, history=None, state=None, cut: str = "") -> tuple:
    """Both panes show ``message``; stats, charts, draft tree and heads' table are cleared (no figures of an
    earlier run are mistaken for this one's; earlier runs stay listed in the history)."""
    blank = render.placeholder_html(message)
    out = _outputs(blank, blank, None, "", status, history, state, tree="", heads="", cut=cut)
    return out[:2] + (gr.update(visible=False),) + out[3:]


def _failed(what: str, error: BaseException, session: str | None = None) -> tuple:
    """Say what went wrong (a toast and the status line). The session's previous good result (its last finished
    or stopped run) stays in both panes, the stats and the charts; without one the panes say there is no result
    (see :func:`_blank`)."""
    status = report(what, error)
    with _VIEWS_LOCK:
        good = _GOOD.get(session) if session else None
    if good is None:
        return _blank("No result: this run did not start or did not finish (see the message above).", status)
    return _outputs(good.spec_html(), good.base_html(), good.figure(), good.stats_html(), status,
                    tree=good.tree_html(every_pass=True), heads=good.heads_html(), cut=good.cut)


def _keep_good(session: str, view: RunView) -> None:
    """Remember ``view`` as ``session``'s latest good result (shown again when a later run fails)."""
    if not session.startswith(LOCAL_PREFIX) and not view.empty:
        with _VIEWS_LOCK:
            _GOOD[session] = view


def _final(view: RunView, history=None, state=None) -> tuple:
    """Everything a finished (or stopped) run shows: panes, charts, stats, status, the whole draft tree."""
    return _outputs(view.spec_html(), view.base_html(), view.figure(), view.stats_html(), view.status(), history,
                    state, tree=view.tree_html(every_pass=True), heads=view.heads_html(), cut=view.cut)


# ------------------------------------------------------------------------------------------------- generate


def generate(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature, top_p, top_k, seed,
             max_new_tokens, stop_strings, chat_template, tree_nodes=0, confidence=None, lookup=False,
             min_p=0.0, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0, no_repeat_ngram_size=0,
             logit_bias="", banned_ids="", stop_token_ids="", window=None, ngram=None, candidates=None, history=None,
             request: gr.Request = None):
    """The Generate button: validate, wait for the device, load, then stream both runs (see the module doc).

    The parameters follow the order of the tab's inputs; ``tree_nodes``, ``confidence`` and ``lookup``, then the
    generation settings ``min_p`` .. ``stop_token_ids`` (:func:`app.inputs.parse_generation_settings`) came last
    (before the session history, which is server-side state), so API clients written before them still work and
    get a chain with the default confidence gate, no lookup and no penalties; then lookahead's ``window``,
    ``ngram`` and ``candidates`` (W, N, G; None: the defaults)."""
    history = list(history) if isinstance(history, list) else []
    try:
        settings = parse_settings(prompt, target, drafter, draft_model, exit_layer, k, adaptive_k, temperature,
                                  top_p, top_k, seed, max_new_tokens, stop_strings, chat_template, tree_nodes,
                                  confidence, lookup, min_p, repetition_penalty, frequency_penalty,
                                  presence_penalty, no_repeat_ngram_size, logit_bias, banned_ids, stop_token_ids,
                                  window, ngram, candidates, fit_layer=True)
    except Exception as error:  # noqa: BLE001 - bad input of any shape is a message, never a crash
        yield _failed("checking the inputs", error, session_key(request))
        return
    job = device.start(RUNS, request, WHAT)
    try:
        plan = plan_text(settings, known_costs(settings.target))

        def waiting(place) -> tuple:
            return _outputs(status=planned_status(settings, plan, place.ahead, place.holder))

        yield _outputs(status=planned_status(settings, plan, device.DEVICE.ahead(job.owner), device.DEVICE.holder))
        if (yield from relay(job.turn(), waiting)):
            yield from _generate_on_device(settings, history, job)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message, the session stays usable
        yield _failed("generation", error, job.session)
    finally:
        job.release()  # also when Gradio closes this handler: the engine starts no other forward
        if job.session.startswith(LOCAL_PREFIX):  # no browser session to press Stop later
            with _VIEWS_LOCK:
                _VIEWS.pop(job.session, None)


def _generate_on_device(settings: Settings, history: list[dict], job: Job):
    """The run, once the device is held: load, open the view, stream both runs; add the run to ``history`` when
    it finished on its own (a stopped run is added by :func:`stopped_view`)."""
    loaded = yield from _load(settings, job)
    if loaded is None:
        return
    settings, target, drafter = loaded
    costs = known_costs(settings.target) or (None if zerogpu.active() else  # no forward here on ZeroGPU
                                             tuned_costs(settings.target, target))  # the device is held here
    view, prompt_ids = _open_view(settings, target, drafter, job.session)  # its clock starts after the timing
    note = long_prompt_note(settings, costs, len(prompt_ids))
    _warn_long_prompt(view, note)
    reading = _reading_status(view, len(prompt_ids), plan_text(settings, costs, len(prompt_ids)))
    waiting = render.placeholder_html(READING_PANE)  # not an earlier run's text or message while this one reads
    yield _outputs(waiting, waiting, status=reading(), cut=view.cut)
    view.cpu = CpuShare()
    stream = job.stream(_engine_events(settings, target, drafter, prompt_ids, job.cancel))
    try:
        yield from _stream(view, settled_after_prefill(stream, view, note), job.cancel, reading)
    finally:  # also when Gradio closes this handler
        stream.close()
        settle_prefill_note(view, note)  # stopped while reading: the estimate goes
    if not (job.cancelled or view.cancelled):
        view.ended = time.monotonic()
        learn_costs(settings.target, view)
        _keep_good(job.session, view)
        _add_to_history(history, view)
        # the whole end state in the handler's last message, history row included: a component that message
        # skips can be put back by the browser to its value from a message before the last (seen: the every-pass
        # draft tree, sent one message earlier, replaced by the latest streamed pass once the history row arrived)
        yield _final(view, history_html(history), history)


def planned_status(settings: Settings, plan: str, ahead: int, holder: str = "") -> str:
    """The status before a run holds the device: how long it should take ("about 25 s (from recent runs
    of this model on this server)", when known) and how many runs are ahead of it ("1 run ahead of yours", with what the device is doing)."""
    if ahead == 0:
        length = f"yours takes {plan}" if plan else "the time a run takes here is measured once the model is loaded"
        return render.status_html(f"Starting: no run ahead of yours; {length}.", "busy", notes=settings.notes)
    runs = "1 run is" if ahead == 1 else f"{ahead} runs are"
    what = f" ({holder})" if holder else ""
    length = f" Yours takes {plan} once it starts." if plan else ""
    return render.status_html(f"Waiting for the device… {runs} ahead of yours{what}.{length} Runs take turns so "
                              "that each one's timing is undisturbed.", "wait", notes=settings.notes)


def _warn_long_prompt(view: RunView, note: str) -> None:
    """Announce a long prefill before it starts: a toast, and a note in every status of the run."""
    if note:
        gr.Warning(html.escape(note))
        view.notes.append(note)


class _Loading:
    """The status while the target and the drafter load: the latest progress message and the seconds so far."""

    def __init__(self, settings: Settings) -> None:
        self.notes = settings.notes
        self.latest = f"Loading the target {settings.target}…"
        self.started = time.monotonic()

    def show(self, message: object = None, **hide) -> tuple:
        """The status tuple; a str ``message`` becomes the latest one (None: a tick)."""
        if isinstance(message, str):
            self.latest = message
        seconds = time.monotonic() - self.started
        return _outputs(status=render.status_html(f"{self.latest} ({seconds:.0f} s)", "busy", notes=self.notes),
                        **hide)


def _load(settings: Settings, job: Job):
    """Load the target and make the drafter in the job's threads, yielding the loading status; returns (settings,
    target, drafter or None), or None when the run was stopped meanwhile (a load cannot be interrupted: it finishes
    in its thread, which keeps the device until then). An early-exit layer the loaded target lacks (its layers were
    unknown before loading) is replaced by its nearest layer, said in a note (:func:`app.inputs.fit_settings_exit_layer`),
    as the box's toast would have said."""

    loading = _Loading(settings)
    yield loading.show(tree="", heads="")  # an earlier run's draft tree and heads' table go
    target = yield from relay(job.call(load_target, settings.target, progress=job.say), loading.show)
    if job.cancelled:
        return None
    settings, note = fit_settings_exit_layer(settings, target)
    if note is not None:
        warn(note)  # the toast the box would have shown, had the target's layers been known when it was left
    check_settings_vocab(settings, target)
    if settings.drafter == "none":
        return settings, target, None
    loading.latest = f"Preparing the drafter ({label_of(settings.drafter)})…"
    drafter = yield from relay(job.call(_new_drafter, settings, target, job.say, job.session), loading.show)
    return None if job.cancelled else (settings, target, drafter)


def _new_drafter(settings: Settings, target, say, session: str | None = None):
    """A fresh drafter for ``settings`` (registry key and options) drafting for ``target``; suffix decoding shares
    the browser session's store of earlier outputs (:func:`_suffix_store`)."""
    return make_drafter(settings.drafter, target, draft_spec=settings.draft_model, exit_layer=settings.exit_layer,
                        tree_nodes=settings.drafted_tree_nodes, min_confidence=settings.min_confidence,
                        lookup=settings.lookup, window=settings.window, ngram=settings.ngram,
                        candidates=settings.candidates, progress=say,
                        suffix_store=_suffix_store(session) if settings.drafter == "suffix" else None)


def _suffix_store(session: str | None) -> SuffixStore | None:
    """The session's store of earlier outputs for suffix decoding (made on first use, dropped when the page
    closes); None without a browser session (the drafter then has a store of its own: cold)."""
    if not session or session.startswith(LOCAL_PREFIX):
        return None
    with _VIEWS_LOCK:
        return _SUFFIX_STORES.setdefault(session, SuffixStore())


def _open_view(settings: Settings, target, drafter, session: str) -> tuple[RunView, list[int]]:
    """Fit the prompt into the target's window (a note says what was cut) and make the run's view, kept for
    Stop under ``session``. Returns (view, prompt ids)."""
    prompt_ids, note, cut = fit_prompt_for(settings, target, drafter)
    if note:
        gr.Info(html.escape(note))
    label = f"{target.label} · {forward_path(target.model)} · {path_label(target)}"
    view = RunView(settings, label, getattr(drafter, "name", "none"),
                   render.Pane(target.tokenizer) if drafter is not None else None,
                   render.Pane(target.tokenizer, separators=False), notes=[*settings.notes, *([note] if note else [])],
                   heads=_head_accuracy(drafter), prompt_tokens=len(prompt_ids), cut=cut)
    with _VIEWS_LOCK:
        _VIEWS[session] = view
    return view, prompt_ids


def _reading_status(view: RunView, prompt_tokens: int, plan: str = ""):
    """A function giving the status while the prompt is read (the prefill), with a ticking timer and the run's
    expected length (``plan``, see :func:`plan_text`)."""
    runs = "both runs read" if view.spec is not None else "the target reads"
    since = time.monotonic()
    whole = f" · the whole run: {plan}" if plan else ""

    def status() -> str:
        return render.status_html(
            f"Reading the prompt: {runs} its {prompt_tokens:,} tokens (the prefill; a long prompt takes a while "
            f"on a CPU)… ({time.monotonic() - since:.0f} s){whole}", "busy", notes=view.notes)

    return status


def _engine_events(settings: Settings, target, drafter, prompt_ids: list[int], cancel: threading.Event):
    """The baseline's events, raced with the speculative run's when there is a drafter; both check ``cancel``
    before every forward. On ZeroGPU the runs happen in the GPU worker (:func:`gpu_events`)."""
    if zerogpu.active():
        return zerogpu.stream(gpu_events, settings, list(prompt_ids), duration=gpu_seconds)
    return _local_events(settings, target, drafter, prompt_ids, cancel)


def gpu_seconds(settings: Settings, prompt_ids: list[int]) -> int:
    """The GPU time a ZeroGPU call asks for this run (:func:`app.zerogpu.duration_for`)."""
    return zerogpu.duration_for(settings.max_new_tokens, len(prompt_ids))


def gpu_events(settings: Settings, prompt_ids: list[int]):
    """In a ZeroGPU worker process: the target (inherited from the app's process, already on the GPU) and a fresh
    drafter, then :func:`_local_events`; each event checked to hold no GPU tensor (:func:`app.zerogpu.plain`).
    Plain arguments only: they are pickled to get here."""
    target = load_target(settings.target)
    drafter = None if settings.drafter == "none" else _new_drafter(settings, target, lambda message: None)
    for event in _local_events(settings, target, drafter, prompt_ids, threading.Event()):
        yield zerogpu.plain(event)


def _local_events(settings: Settings, target, drafter, prompt_ids: list[int], cancel: threading.Event):
    """:func:`_engine_events` in this process."""
    config = settings.config()
    base = standard_generate(target, prompt_ids, config, cancel=cancel)
    if drafter is None:
        return base
    return race(speculative_generate(target, drafter, prompt_ids, config, cancel=cancel), base)


def _stream(view: RunView, events, cancel: threading.Event, idle_status=None):
    """Fold events into ``view``; yield the panes and stats at most every UPDATE_INTERVAL_S, charts less often (the
    end state, :func:`_final`, is the caller's last message).
    ``events`` may yield None while the engine computes (:meth:`app.device.Job.stream`): then Stop is noticed at
    once, and before the first event ``idle_status()`` is shown about once a second (a ticking prefill timer)."""
    last_update = last_chart = last_idle = 0.0
    seen = False
    for event in events:
        if cancel.is_set() or view.cancelled:  # Stop: stop_run shows the view as it is now
            return
        if event is None:
            now = time.monotonic()
            if not seen and idle_status is not None and now - last_idle >= 1.0:
                last_idle = now
                yield _outputs(status=idle_status(), cut=view.cut)
            continue
        seen = True
        view.add(event)
        now = time.monotonic()
        slower = min(4.0, max(1.0, view.base_stats.generated / 256))  # long outputs: big HTML, fewer refreshes
        if now - last_update >= UPDATE_INTERVAL_S * slower:
            chart = tree = heads = None
            if now - last_chart >= CHART_INTERVAL_S * slower:  # the tree and the heads' table at the charts' rate
                chart, tree, heads, last_chart = view.figure(), view.tree_html(), view.heads_html(), now
            last_update = now
            yield _outputs(view.spec_html(), view.base_html(), chart, view.stats_html(), view.status(), tree=tree,
                           heads=heads, cut=view.cut)


# ------------------------------------------------------------------------------------------------- stop


def stop(request: gr.Request = None):
    """Flag the session's run as cancelled: its engine starts no other forward, and the handler ends at once and
    releases the device (Gradio also cancels the event). Returns the status line. Only the caller's own session is
    stopped: a request without a session stops nothing, and a call with no request at all (Python code in this
    process) stops the runs started without a request."""
    RUNS.cancel(request)
    return stopped_status()


def stopped_status() -> str:
    """The status line after a Stop."""
    return render.status_html("Stopped.", "info")


def stop_run(history=None, request: gr.Request = None):
    """The Stop button: cancel the session's run (:func:`stop`) and show what it made so far as its result
    (:func:`stopped_view`). Returns a tuple in :data:`OUTPUTS` order."""
    status = stop(request)
    return stopped_view(history, request, status=status)


def stopped_view(history=None, request: gr.Request = None, status: str | None = None):
    """The result of a stopped run, as a tuple in :data:`OUTPUTS` order: both panes without the typing cursor,
    the stats with finish reason "stopped" and the output check up to the stop, the final charts and draft tree,
    the status, and the run history with the run added (marked stopped). When no run was streaming (still
    loading, or finished on its own) only the status changes. The Stop button calls it a second time, one round
    trip later, to re-send the view after any update the cancelled run still had in flight; the history row is
    added once."""
    key = session_key(request)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key) if key else None
    history = list(history) if isinstance(history, list) else []
    if view is None:
        return _outputs(status=status or stopped_status())
    if view.mark_stopped() and not view.empty:
        _add_to_history(history, view)
        _keep_good(key, view)
    elif not view.cancelled:  # it finished on its own: its result stays as it is
        return _outputs(status=view.status(), cut=view.cut)
    if view.empty:  # stopped while the prompt was read: nothing was measured, so no figures and no history row
        return _blank("Stopped before the first token: nothing was generated or measured.", view.status(),
                      history_html(history), history, cut=view.cut)
    return _final(view, history_html(history), history)


def release_session(request: gr.Request = None):
    """When a browser tab closes: cancel its run and forget its last view."""
    RUNS.cancel_session(request)
    key = session_key(request)
    if key:
        with _VIEWS_LOCK:
            _VIEWS.pop(key, None)
            _GOOD.pop(key, None)
            _SUFFIX_STORES.pop(key, None)


PRESET_CHOICES = [("—", "")] + [(p.label, p.key) for p in PRESETS]


def preset_chosen(key: str):
    """A real pair picked (:data:`specviz.presets.PRESETS`): its target, the 'model' drafter and its draft model
    (outputs: target, drafter, draft model); nothing changes for "—"."""
    if not key:
        return gr.skip(), gr.skip(), gr.skip()
    chosen = preset(key)
    return chosen.target, "model", gr.update(value=chosen.draft, visible=True)


def drafter_changed(drafter: str, ngram=None, chosen_k=None):
    """Show the draft-model box for 'model', the exit layer for 'early-exit', the tree size, the confidence
    gate and lookup first for the head drafters (eagle, medusa), and W, N, G for lookahead; k only matters with a
    drafter that takes it (lookahead's is N-1, shown on the k slider from ``ngram``; leaving lookahead puts back
    ``chosen_k``, the visitor's last own k). Outputs: draft model, exit layer, tree nodes, confidence gate, lookup
    first, k, adaptive k, window, n-gram size, candidates."""
    heads, lookahead = drafter in HEAD_DRAFTERS, drafter == "lookahead"
    head_only = gr.update(visible=heads, interactive=heads)
    lookahead_only = gr.update(visible=lookahead, interactive=lookahead)
    own_k = gr.update(interactive=drafter not in ("none", "lookahead"))
    k = lookahead_k(ngram) if lookahead else own_k if chosen_k is None else \
        gr.update(value=chosen_k, interactive=drafter != "none")
    schedule = gr.update(interactive=drafter != "none")  # lookahead: fixed, or auto (whole passes gated)
    return (gr.update(visible=drafter == "model"), gr.update(visible=drafter == "early-exit"),
            head_only, head_only, head_only, k, schedule, lookahead_only, lookahead_only, lookahead_only)


def lookahead_k(ngram, drafter: str = "lookahead"):
    """The k slider for lookahead: N-1 and not editable (another drafter, or an N that is no number: no change)."""
    try:
        n = min(max(int(float(ngram)), 2), MAX_NGRAM)  # the raw payload: a number typed out of range is clamped
    except (TypeError, ValueError, OverflowError):
        return gr.update(interactive=False) if drafter == "lookahead" else gr.skip()
    return gr.update(value=n - 1, interactive=False) if drafter == "lookahead" else gr.skip()


# ------------------------------------------------------------------------------------------------- layout


def build_tab(history: gr.State, d: dict) -> None:
    """Lay out the Live tab inside the current ``gr.Tab`` and wire its events. ``history`` is the session's run
    history (gr.State, also read by the "Why it works" tab); ``d`` holds every key of :data:`DEFAULTS`. The
    drafter menu lists the registry's drafters as they are now (:func:`specviz.drafters.registry.choices`)."""
    ui: dict[str, gr.components.Component] = {}  # elem_id-like name -> component
    # four columns in reading order: the prompt, the controls, results, examples. The stylesheet (.sv-main) shows
    # the examples right under the prompt (the controls under them) beside the results on a wide screen, so they
    # are in the first screen; on a phone the results come right after the controls, the examples last.
    with gr.Row(equal_height=False, elem_id="live-main", elem_classes=["sv-main"]):
        with gr.Column(scale=1, min_width=300, elem_id="prompt-column", elem_classes=["sv-top"]):
            _prompt_controls(ui, d)
        with gr.Column(scale=1, min_width=300, elem_id="controls", elem_classes=["sv-side"]):
            _drafter_controls(ui, d)
            _run_controls(ui, d)
        with gr.Column(scale=3, min_width=300, elem_id="results", elem_classes=["sv-results"]):
            _results(ui)
        with gr.Column(scale=1, min_width=300, elem_id="examples-column", elem_classes=["sv-side2"]):
            _examples(ui)
    _wire(ui, history, d)


def _prompt_controls(ui: dict, d: dict) -> None:
    """The prompt box and the Generate / Stop buttons."""
    ui["prompt"] = gr.Textbox(d["prompt"], label="Prompt", lines=5, max_lines=8, elem_id="prompt",
                              placeholder="Ask something, or pick an example below…")
    with gr.Row():
        ui["generate"] = gr.Button("Generate", variant="primary", elem_id="generate", scale=2,
                                   min_width=100)  # with Stop beside it in the 300 px column
        ui["stop"] = gr.Button("Stop", variant="stop", elem_id="stop", scale=1, min_width=80)
    ui["progress"] = gr.HTML("", elem_id="run-progress")  # the status's compact copy, shown on a phone (style.css)


def _drafter_controls(ui: dict, d: dict) -> None:
    """The drafter menu (read from the registry now) and what each drafter takes: a draft model, an exit layer,
    the head drafters' tree, confidence gate and lookup first, and k (with adaptive k)."""
    ui["drafter"] = gr.Dropdown([(c.label, c.key) for c in choices()], value=d["drafter"], label="Drafter",
                                elem_id="drafter", info="What proposes the tokens the target checks")
    from app.drafter_about import add_about  # what the chosen drafter is and costs, under the menu

    ui["drafter_about"] = add_about(ui["drafter"], "drafter-about", d["drafter"])
    ui["draft_model"] = gr.Textbox(d["draft_model"], label="Draft model", elem_id="draft-model",
                                   placeholder="hub id (org/name) or local folder; another tokenizer is re-tokenized",
                                   visible=d["drafter"] == "model")
    ui["exit_layer"] = gr.Number(d["exit_layer"], label="Early-exit layer (0 = half the target's layers)",
                                 precision=0, elem_id="exit-layer",
                                 info="Untrained, the first layers agree with the full model on few tokens "
                                      "(SmolLM2-135M: 46% at layer 28/30, under 15% below 20): expect a "
                                      "low acceptance rate; the idea shows, the speedup does not.",
                                 visible=d["drafter"] == "early-exit")
    heads = d["drafter"] in HEAD_DRAFTERS
    ui["tree_nodes"] = gr.Slider(0, MAX_TREE_NODES, value=d["tree_nodes"], step=1, label="Tree nodes (0 = a chain)",
                                 elem_id="tree-nodes",
                                 info="EAGLE / Medusa: draft a tree of candidates (depth ≤ k) and verify it in one "
                                      "target pass. Greedy only: at temperature > 0 the drafter drafts a chain.",
                                 visible=heads, interactive=heads)
    ui["confidence"] = gr.Slider(0, MAX_CONFIDENCE, value=d["confidence"], step=0.05,
                                 label="Confidence gate (0 = always k)", elem_id="confidence",
                                 info="EAGLE / Medusa: stop drafting where the head's own probability of the whole "
                                      "guess so far drops below this; an unsure pass drafts fewer tokens, or none. "
                                      "The output stays exact.",
                                 visible=heads, interactive=heads)
    ui["lookup"] = gr.Checkbox(d["lookup"], label="Lookup first (copy repeated text, else the head)",
                               elem_id="lookup-first",
                               info="EAGLE / Medusa: each pass, n-gram lookup looks for the text's last 2-3 tokens "
                                    "earlier on and, if found, the target checks what followed them (such passes "
                                    "are marked “copy”); the head drafts only otherwise.",
                               visible=heads, interactive=heads)
    _lookahead_controls(ui, d)
    own_k = d["drafter"] not in ("none", "lookahead")  # lookahead's k is N-1
    ui["k"] = gr.Slider(1, MAX_K, value=d["k"] if d["drafter"] != "lookahead" else d["ngram"] - 1, step=1,
                        label="Draft length k", elem_id="draft-length", interactive=own_k)
    ui["adaptive_k"] = gr.Radio([("fixed", "fixed"), ("adaptive", "heuristic"), ("auto (cost-aware)", "auto")],
                                value=parse_k_schedule(d["adaptive_k"]), label="Draft length schedule",
                                elem_id="k-schedule", interactive=d["drafter"] != "none",
                                info="adaptive: +1 after a fully accepted pass, −1 after a rejection. auto: each "
                                     "pass's k, 0 included, chosen from this run's measured costs and acceptance "
                                     "(lookahead: a full pass or a plain step).")


def _lookahead_controls(ui: dict, d: dict) -> None:
    """Lookahead decoding's window W, n-gram size N and candidates G (shown for that drafter only)."""
    shown = d["drafter"] == "lookahead"
    ui["window"] = gr.Slider(1, MAX_WINDOW, value=d["window"], step=1, label="Window W (Jacobi positions)",
                             elem_id="lookahead-window", visible=shown, interactive=shown,
                             info="Lookahead: the target also guesses W positions ahead by Jacobi iteration in "
                                  "every forward; its guesses feed an n-gram pool. No draft model.")
    ui["ngram"] = gr.Slider(2, MAX_NGRAM, value=d["ngram"], step=1, label="N-gram size N (k = N−1)",
                            elem_id="lookahead-ngram", visible=shown, interactive=shown,
                            info="The window keeps N−1 levels; a candidate is N−1 tokens after the last one.")
    ui["candidates"] = gr.Slider(1, MAX_CANDIDATES, value=d["candidates"], step=1, label="Candidates G per pass",
                                 elem_id="lookahead-candidates", visible=shown, interactive=shown,
                                 info="Pool n-grams verified in the same forward (one when sampling). A forward "
                                      "reads 1 + W(N−1) + G(N−1) tokens: on a CPU that costs more than one step.")


def _run_controls(ui: dict, d: dict) -> None:
    """Max new tokens (up to the operator's cap, read now), the target, sampling and stopping."""
    max_tokens = current_policy().max_new_tokens  # SPECVIZ_MAX_NEW_TOKENS
    ui["max_new_tokens"] = gr.Slider(1, max_tokens, value=min(d["max_new_tokens"], max_tokens), step=1,
                                     label="Max new tokens", elem_id="max-new-tokens")
    ui["target"] = gr.Textbox(d["target"], label="Target model", elem_id="target",
                              info="'embedded' (SmolLM2-135M-Instruct, shipped), a hub id or a local folder")
    ui["preset"] = gr.Dropdown(PRESET_CHOICES, value="", label="Or a real pair (needs a network)", elem_id="preset",
                               info="Fills the target and its draft model of the same family, downloaded from the "
                                    "Hub on the first run (a GPU is advised; gated models need HF_TOKEN)")
    with gr.Accordion("Sampling and stopping", open=False, elem_id="sampling"):
        ui["temperature"] = gr.Slider(0, 2, value=d["temperature"], step=0.05, elem_id="temperature",
                                      label="Temperature (0 = greedy)")
        with gr.Row():
            ui["top_p"] = gr.Slider(0.05, 1, value=d["top_p"], step=0.05, label="Top-p (1 = off)", elem_id="top-p")
            # no minimum= on number boxes: Gradio would refuse a negative number in a popup before the handler
            # runs; the handler says what is wrong in the status line
            ui["top_k"] = gr.Number(d["top_k"], label="Top-k (0 = off)", precision=0, elem_id="top-k")
        ui["seed"] = gr.Number(d["seed"], label="Seed", precision=0, elem_id="seed")
        ui["stop_strings"] = gr.Textbox(d["stop_strings"], label="Stop strings", elem_id="stop-strings",
                                        placeholder="comma- or newline-separated; \\n for a newline")
        ui["chat_template"] = gr.Checkbox(d["chat_template"], label="Use the chat template", elem_id="chat-template")
        _processor_controls(ui, d)


def _processor_controls(ui: dict, d: dict) -> None:
    """The logits processors and stop token ids (as transformers' generate() names them), inside "Sampling and
    stopping": applied to the target and the draft alike at every draft position, and to the baseline."""
    gr.Markdown("Penalties, bans and stop ids apply to the target and the draft alike at every drafted position "
                "(and to the baseline), as transformers' generate() applies them.", elem_id="processors-note")
    with gr.Row():
        ui["repetition_penalty"] = gr.Number(d["repetition_penalty"], label="Repetition penalty (1 = off)",
                                             elem_id="repetition-penalty")
        ui["min_p"] = gr.Number(d["min_p"], label="Min-p (0 = off; sampling only)", elem_id="min-p")
    with gr.Row():
        ui["frequency_penalty"] = gr.Number(d["frequency_penalty"], label="Frequency penalty (0 = off)",
                                            elem_id="frequency-penalty")
        ui["presence_penalty"] = gr.Number(d["presence_penalty"], label="Presence penalty (0 = off)",
                                           elem_id="presence-penalty")
    ui["no_repeat_ngram_size"] = gr.Number(d["no_repeat_ngram_size"], label="No-repeat n-gram size (0 = off)",
                                           precision=0, elem_id="no-repeat-ngram-size")
    ui["logit_bias"] = gr.Textbox(d["logit_bias"], label="Logit bias", elem_id="logit-bias",
                                  placeholder="id:bias, e.g. 13:2.5, 30:-inf (-inf bans the token)")
    with gr.Row():
        ui["banned_ids"] = gr.Textbox(d["banned_ids"], label="Banned token ids", elem_id="banned-ids",
                                      placeholder="e.g. 30, 31 (a bias of -inf)")
        ui["stop_token_ids"] = gr.Textbox(d["stop_token_ids"], label="Stop token ids", elem_id="stop-token-ids",
                                          placeholder="e.g. 2 (special tokens too)")


def _examples(ui: dict) -> None:
    """The example prompts (a click fills the prompt box)."""
    examples = load_examples()
    gr.Examples(examples=[[e["prompt"]] for e in examples], inputs=[ui["prompt"]], label="Example prompts",
                example_labels=example_labels(examples), examples_per_page=EXAMPLES_PER_PAGE, elem_id="examples")


EXAMPLES_PER_PAGE = 6  # one line each (style.css): the prompt above them and the drafter menu below them fit the
# first screen at 1400x900


def _results(ui: dict) -> None:
    """The status line, the legend, both panes, the draft tree and heads' table, stats, charts and history."""
    ui["status"] = gr.HTML(render.status_html("Ready: press Generate, or type your own prompt or pick an "
                                                   "example.", "info"), elem_id="status")
    gr.HTML(render.legend_html(), elem_id="legend")
    ui["output_only"] = gr.Checkbox(False, label="Output only: the committed text, plain (no drafts, no colours)",
                                    elem_id="output-only", container=False)
    with gr.Row(equal_height=True, elem_id="panes"):  # side by side; stacked on a phone (style.css)
        ui["spec_out"] = gr.HTML(render.placeholder_html("The speculative run appears here."),
                                 elem_id="spec-output", elem_classes=["out-pane"])
        ui["base_out"] = gr.HTML(render.placeholder_html("The standard-decoding baseline appears here."),
                                 elem_id="baseline-output", elem_classes=["out-pane"])
    with gr.Row(equal_height=False, elem_id="drafter-insight"):
        ui["tree_out"] = gr.HTML("", elem_id="draft-tree", visible=False, scale=3)
        ui["heads_out"] = gr.HTML("", elem_id="head-accuracy", visible=False, scale=1, min_width=280)
    ui["stats"] = gr.HTML("", elem_id="stats")
    ui["charts"] = gr.Plot(label="Charts", elem_id="charts", show_label=False, visible=False)
    ui["history_out"] = gr.HTML("", elem_id="history")


INPUTS = ("prompt", "target", "drafter", "draft_model", "exit_layer", "k", "adaptive_k", "temperature", "top_p",
          "top_k", "seed", "max_new_tokens", "stop_strings", "chat_template", "tree_nodes", "confidence", "lookup",
          "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty", "no_repeat_ngram_size", "logit_bias",
          "banned_ids", "stop_token_ids", "window", "ngram", "candidates")
"""The controls :func:`generate` reads, in the order of its parameters (the history follows)."""


def _wire(ui: dict, history: gr.State, d: dict | None = None) -> None:
    """Generate, Stop (which cancels the run and shows what it made, then re-sends that view one round trip
    later, after any update the cancelled run still had in flight), the drafter menu's dependent controls, and
    :func:`_wire_helpers` (numbers typed out of a slider's range, output only, the derived default of max new tokens)."""
    inputs = [ui[name] for name in INPUTS] + [history]
    outputs = [ui["spec_out"], ui["base_out"], ui["charts"], ui["stats"], ui["status"], ui["history_out"], history,
               ui["tree_out"], ui["heads_out"], ui["progress"]]  # the order of OUTPUTS
    run = ui["generate"].click(generate, inputs=inputs, outputs=outputs, api_name="generate", show_progress="minimal",
                               show_progress_on=[ui["status"]], concurrency_limit=8,
                               concurrency_id="generate")  # a queued visitor sees "queue: 3/5"
    ui["stop"].click(stop_run, inputs=[history], outputs=outputs, cancels=[run], queue=False, api_name="stop").then(
        stopped_view, inputs=[history], outputs=outputs, queue=False, api_visibility="private")
    # preprocess off on listeners a slider triggers: a number typed out of its range reaches them before the slider
    # clamps it, and Gradio's range check would answer with a server error; these handlers parse the raw number
    ui["ngram"].change(lookahead_k, inputs=[ui["ngram"], ui["drafter"]], outputs=[ui["k"]], queue=False,
                       preprocess=False, api_visibility="private")
    chosen_k = gr.State(d["k"] if d else DEFAULTS["k"])  # the visitor's own k, put back when lookahead is left
    ui["k"].input(k_chosen, inputs=[ui["k"]], outputs=[chosen_k], queue=False, preprocess=False,
                  api_visibility="private")
    ui["drafter"].change(drafter_changed, inputs=[ui["drafter"], ui["ngram"], chosen_k],
                         outputs=[ui[name] for name in ("draft_model", "exit_layer", "tree_nodes", "confidence",
                                                        "lookup", "k", "adaptive_k", "window", "ngram",
                                                        "candidates")],
                         queue=False, api_visibility="private")
    _wire_helpers(ui, d or DEFAULTS)


OUTPUT_ONLY_JS = "(on) => { document.body.classList.toggle('sv-output-only', !!on); }"
"""The "Output only" checkbox: a class on <body> that the stylesheet reads (no round trip, also while a run
streams): both panes show the committed text plainly, without rejected drafts, colours or pass marks."""


ENTER_COMMITS_JS = enter_commits_js("#controls")
"""On page load: Enter in a number box of the Live tab's controls column (top-k, seed, exit layer, the penalties)
commits it as leaving the box does (:func:`app.messages.enter_commits_js`): the box is checked and a refused value
said at once. The sliders' own boxes (k, max new tokens, temperature, ...) commit when they are left, which says a
number out of range (Enter there clamped silently). The other tabs' boxes are left alone."""


def _wire_helpers(ui: dict, d: dict) -> None:
    """Enter in a number box of the controls (:data:`ENTER_COMMITS_JS`), numbers typed out of a slider's range (max new tokens and :data:`CLAMPED_SLIDERS`: the box is set to the value
    runs use, and a toast and the status say so) and number boxes left with a value a run would refuse
    (:data:`CHECKED_NUMBERS`, the same), the "Output only" view, and, when max new tokens was left at its default,
    the derived default on each page load."""
    tell_when_clamped(ui["max_new_tokens"], ui["status"], "Max new tokens", hint=MAX_NEW_TOKENS_HINT)
    for name, label in CLAMPED_SLIDERS.items():
        tell_when_clamped(ui[name], ui["status"], label)
    for name, field in CHECKED_NUMBERS.items():
        if name in ui:
            layer = field is EXIT_LAYER  # checked against the target's layer count (its config, without loading)
            tell_when_invalid(ui[name], ui["status"], field, parse_exit_layer if layer else None,
                              target=ui.get("target") if layer else None)
    from gradio.context import Context

    Context.root_block.load(None, js=ENTER_COMMITS_JS, queue=False, api_visibility="private")
    if "output_only" in ui:
        ui["output_only"].change(None, inputs=[ui["output_only"]], js=OUTPUT_ONLY_JS, queue=False)
    if "preset" in ui:
        ui["preset"].change(preset_chosen, inputs=[ui["preset"]], outputs=[ui["target"], ui["drafter"],
                                                                          ui["draft_model"]],
                            queue=False, api_visibility="private")
    if d["max_new_tokens"] == DEFAULTS["max_new_tokens"]:
        spec, fallback, box = d["target"], d["max_new_tokens"], ui["max_new_tokens"]
        Context.root_block.load(lambda shown: page_default_tokens(spec, fallback, shown), inputs=[box],
                                outputs=[box], show_progress="hidden", concurrency_limit=None,
                                api_visibility="private")


CLAMPED_SLIDERS = {"k": "Draft length k", "tree_nodes": "Tree nodes", "confidence": "The confidence gate",
                   "window": "Window W", "ngram": "N-gram size N", "candidates": "Candidates G",
                   "temperature": "Temperature", "top_p": "Top-p"}
"""The Live tab's sliders (besides max new tokens) whose numbers typed out of range are said
(:func:`app.messages.tell_when_clamped`), with the name each message gives."""
CHECKED_NUMBERS = {"top_k": TOP_K, "seed": SEED, "exit_layer": EXIT_LAYER, "min_p": MIN_P,
                   "repetition_penalty": REPETITION_PENALTY, "frequency_penalty": FREQUENCY_PENALTY,
                   "presence_penalty": PRESENCE_PENALTY, "no_repeat_ngram_size": NO_REPEAT_NGRAM_SIZE}
"""The Live tab's number boxes, checked when left (:func:`app.messages.tell_when_invalid`) by the rules the Run
path reads (:class:`app.inputs.NumberField`)."""


def k_chosen(value):
    """The visitor's own k after an edit of the k slider, for :func:`drafter_changed` to put back: ``value`` (the
    raw payload, perhaps typed out of range) as an int within 1..MAX_K, as the slider clamps it; no change for an
    empty box or anything that is not a number."""
    try:
        typed = float(value)
    except (TypeError, ValueError, OverflowError):
        return gr.skip()
    if typed != typed:
        return gr.skip()
    return int(round(min(max(typed, 1), MAX_K)))
