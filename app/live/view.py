"""The Live tab's view-model: :class:`RunView` folds one run's engine events (both streams) into its two panes,
their statistics, the output check and the drafter's insight views (draft tree, lookahead, Medusa heads), judges
the decoding speedup, renders each part (:mod:`app.render`) and sums the run up as a history row
(:class:`app.records.RunSummary`)."""

from __future__ import annotations

import html
import re
import threading
import time
from dataclasses import dataclass, field

from app import estimates, render
from app.figures import dashboard_figure
from app.inputs import Settings
from app.lookahead_view import LookaheadView
from app.records import RunSummary
from app.render.history import CONFIDENCE_GATE, gate_title
from app.render.stats import no_reading_sentence
from app.tree_view import HeadAccuracy, TreeView
from specviz.measure.machine import CONTENDED_SHARE, CpuShare  # above that share: a run's ratio is not judged
from specviz.runtime.compiled import COMPILING_NOTE
from specviz.core.events import PassEvent
from specviz.core.verdict import format_ratio_ends
from specviz.measure.run_stats import RunStats
from specviz.measure.stats import SpeedupJudgement, judge_decode_speedup


LOAD_NAMED_SHARE = 0.1
"""Other programs' share of the CPUs during a run from which a speedup of no reading names it
(:meth:`RunView.load_words`); below it the share is too small to name as what changed the machine's speed."""


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
    clicked: float | None = None  # time.monotonic() when Generate's handler began (None: the runs' start)
    obtained: float | None = None  # time.monotonic() when this run got the device (None: not known, no wait named)
    in_history: bool = False  # a stopped run's row was added to the history (Stop's handlers add it once)
    stop_shown: bool = False  # a stopped run's result was drawn (a later Stop keeps its "Nothing is running." line)
    precision: str = ""  # what the target computes in ("bfloat16", "float32 · int8 weights"), for the comparison
    _judged: tuple = (None, None)  # (pass counts, SpeedupJudgement) of the latest judgement
    _done: str | None = None  # the finished run's status, as first drawn ("Done in ...": the wait ends there)
    _busy: float | None = None  # other programs' CPU share above CONTENDED_SHARE at the latest judgement, else None
    _share: float | None = None  # other programs' CPU share at the latest judgement, whatever it was (None: unknown)
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
                    self.trees = TreeView(self.spec.tokenizer, max_nodes=self.settings.drafted_tree_nodes or 0,
                                          gate=self.settings.gate)
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
        self._share = share
        self._busy = share if share is not None and share > CONTENDED_SHARE else None
        if self._busy is None:
            return None
        return f"other programs used {share:.0%} of the CPUs"  # render.BUSY_NOTE says what that does to the figure

    def load_words(self) -> str | None:
        """The load other programs put on the machine during the runs, in words, where there was one: their share of
        the CPUs at the latest judgement (:meth:`_disturbance`'s measurement) when at least :data:`LOAD_NAMED_SHARE`
        ("other programs used 45% of the CPUs during the run"); where that share is unknown (no /proc/stat, or too
        little time), the machine's load now when busy (:func:`app.estimates.machine_load`, the 5-minute load
        average: "other programs' load averaged 1.4 on 2 CPUs over the last 5 minutes"); else None. What a speedup
        of no reading names (:func:`app.render.stats.no_reading_sentence`)."""
        self.judgement()  # the share measured at the latest judgement (read once per pass)
        if self._share is not None:
            return (f"other programs used {self._share:.0%} of the CPUs during the run"
                    if self._share >= LOAD_NAMED_SHARE else None)
        load = estimates.machine_load()
        if not estimates.is_busy(load):
            return None
        return f"other programs' load averaged {load[0]:.1f} on {load[1]} CPUs over the last 5 minutes"

    def comparison(self) -> render.Comparison:
        """Greedy identity check of the two outputs."""
        spec_ids = self.spec.output_ids if self.spec is not None else self.base.output_ids
        return render.compare_outputs(spec_ids, self.base.output_ids, self.base_gaps, self.base.tokenizer,
                                      greedy=self.settings.greedy, finished=self.finished, precision=self.precision)

    # ------------------------------------------------------------------------------------------ views
    def spec_html(self) -> str:
        """The speculative pane."""
        if self.spec is None:
            return render.placeholder_html(
                "Drafter 'none' is standard decoding: the baseline pane on the right is the whole run. "
                "Pick a drafter to compare.")
        s = self.spec_stats
        accepted = render.counted_spread(s.acceptance_interval(), s, percent=True)
        figures = [_rate_figure(s), (PASSES, s.passes, "{}"), ("accepted", s.acceptance_rate, "{:.0%}", accepted)]
        name, subtitle = pane_title(self.drafter_name, self.settings)
        header = render.pane_header(f"Speculative · {name}", subtitle, figures)
        if CONFIDENCE_GATE in subtitle:  # the gate explains itself on hover, as in the history's k cell
            title = html.escape(gate_title(self.settings.drafter))
            header = header.replace('<span class="pane-sub">', f'<span class="pane-sub" title="{title}">', 1)
        return render.pane_html(header, self.spec.html(), done=self.spec.finished)

    def base_html(self) -> str:
        """The baseline pane."""
        s = self.base_stats
        figures = [_rate_figure(s), (PASSES, s.passes, "{}")]
        header = render.pane_header("Standard decoding (baseline)", "one target forward per token", figures)
        return render.pane_html(header, self.base.html(), done=self.base.finished)

    def stats_html(self) -> str:
        """The stats cards."""
        spec = self.spec_stats if self.spec is not None else None
        judged = self.judgement()
        load = self.load_words() if judged is not None and judged.verdict == "not a finding" else None
        cards = render.stats_html(spec, self.base_stats, self.comparison(), greedy=self.settings.greedy,
                                  stopped=self.cancelled, judgement=judged, load=load, gate=self.settings.gate)
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
        """One line: what is happening. While the runs stream: each run's progress (the speculative run may finish
        long before its baseline). At the end: the time the visitor waited, from Generate's handler to this result
        (:attr:`clicked`), and, when it differs, what the two runs themselves took (:meth:`runs_s`)."""
        seconds = (self.stopped_at or time.monotonic()) - self.started
        if self.cancelled and self.empty:
            return render.status_html(f"Stopped after {seconds:.1f} s, while the prompt was being read.", "info",
                                      notes=self.notes)
        if self.cancelled:
            return render.status_html(f"Stopped after {seconds:.1f} s ({self._counts()}): what was made so far is "
                                      "shown.", "info", notes=self.notes)
        if self.finished:  # kept as first drawn: read again later (a Stop after the end) the wait kept growing
            if self._done is None:
                waited, parts = self._waited()
                details = "; ".join([self._counts(reasons=True), *parts])
                judged = self.judgement()  # a verdict on a busy machine says so here too (verdict_card, the history)
                faster = judged is not None and judged.verdict == "faster"
                busy = "" if judged is None or self._busy is None else (
                    f" · {render.BUSY_MACHINE}: the speedup may be smaller on a quiet one" if faster
                    else f" · {render.BUSY_MACHINE} (other programs used {self._busy:.0%} of the CPU)")
                self._done = render.status_html(f"Done in {waited} ({details}) · {self.target_label}{busy}", "done",
                                                notes=self.notes)
            return self._done
        return render.status_html(f"Generating… {self._progress()} · both runs take turns on one device, each "
                                  "timed on its own clock", "busy", notes=self.notes)

    def runs_s(self) -> float:
        """Seconds from the runs' start (the prompt read by both) to their end (now, while they run)."""
        return (self.ended or self.stopped_at or time.monotonic()) - self.started

    def _waited(self) -> tuple[str, list[str]]:
        """("38.4 s from Generate to this result", ["the two runs: 24.1 s", "before them, loading and preparing:
        14.3 s"]): the visitor's wait and, when it differs from the runs' time by half a second or more, its parts
        (the part after the runs, drawing the result, named when it took half a second or more); ("24.1 s", []) for
        a run with no Generate click (:attr:`clicked` None: Python code). The time before the runs is split at
        :attr:`obtained` (when known): the wait for the device (another visitor's run, or the start-up's measurement,
        held it) apart from loading and preparing."""
        runs = self.runs_s()
        if self.clicked is None:
            return f"{runs:.1f} s", []
        waited = time.monotonic() - self.clicked
        before = self.started - self.clicked
        after = max(waited - runs - before, 0.0)
        head = f"{waited:.1f} s from Generate to this result"
        if waited - runs < 0.5:
            return head, []
        two = self.spec is not None
        parts = [f"the two runs: {runs:.1f} s" if two else f"the run: {runs:.1f} s"]
        parts += _before_runs(before, self.started - self.obtained if self.obtained is not None else None,
                              "them" if two else "it")
        if after >= 0.5:
            parts.append(f"after {'them' if two else 'it'}, drawing the result: {after:.1f} s")
        return head, parts

    def _progress(self) -> str:
        """"pass 31, 37 tokens (finished) · baseline 20 tokens": the speculative run's passes and tokens, then the
        baseline's tokens (only the baseline's for drafter "none")."""
        def made(stats: RunStats) -> str:
            done = " (finished)" if stats.finish_reason is not None else ""
            return f"{stats.generated} token{'' if stats.generated == 1 else 's'}{done}"

        if self.spec is None:
            return f"pass {self.base_stats.passes}, {made(self.base_stats)}"
        return f"pass {self.spec_stats.passes}, {made(self.spec_stats)} · baseline {made(self.base_stats)}"

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
        of the CPU" or "0.85–1.40× spans 1"), or why it is no reading (the card's sentence,
        :func:`app.render.stats.no_reading_sentence`); None when it is neither."""
        judged = self.judgement()
        if judged is not None and judged.verdict == "not a finding":  # the card's sentence (one source)
            return no_reading_sentence(judged.impossible or judged.reason, self.load_words())
        if judged is None or judged.verdict != "too noisy":
            return None
        if self._busy is not None:
            return f"other programs used {self._busy:.0%} of the CPU"
        if judged.interval is None:
            return "its interval spans 1"
        low, high = format_ratio_ends(judged.interval.low, judged.interval.high)  # an end near 1: its side shown
        return f"{low}–{high}× spans 1"

    def summary(self) -> RunSummary:
        """The run's row in the history: rates after the prefill with their intervals over the passes (None for one
        pass); acceptance and tokens per pass with their spreads worded as the cards word them
        (:func:`app.render.counted_spread`); the decoding speedup only when it could be judged (else
        ``speedup_note`` says "too short" or "too noisy"; a too-noisy run keeps what was measured in
        ``speedup_measured`` and why it is noise in ``speedup_reason``, :meth:`noise_reason`); k, its schedule and
        lookahead's (W, N, G) as typed fields."""
        s, b, settings = self.spec_stats, self.base_stats, self.settings
        judged = self.judgement()
        found = judged is not None and judged.finding
        spec = self.spec is not None
        return RunSummary(
            drafter=self.drafter_name if spec else "none", drafter_key=settings.drafter if spec else "none",
            k=k_label(settings),
            k_value=settings.k if spec else None, k_schedule=settings.k_schedule if spec else "",
            lookahead=(settings.window, settings.ngram, settings.candidates)
            if spec and settings.drafter == "lookahead" else None,
            alpha=s.alpha if spec else None, temperature=settings.temperature,
            seed=None if settings.greedy else settings.seed,  # sampling: the run is repeatable by it
            tokens=s.generated if spec else b.generated,
            acceptance=s.acceptance_rate if spec else None, tokens_per_pass=s.tokens_per_pass if spec else None,
            acceptance_spread=render.counted_spread(s.acceptance_interval(), s, percent=True) if spec else "",
            tokens_per_pass_spread=render.counted_spread(s.tokens_per_pass_interval(), s) if spec else "",
            tokens_per_pass_interval=_ends(s.tokens_per_pass_interval()) if spec else None,
            spec_tps=s.decode_tokens_per_s if spec else None, base_tps=b.decode_tokens_per_s,
            spec_tps_interval=_ends(s.decode_rate()) if spec else None,
            base_tps_interval=_ends(b.decode_rate()),  # (low, high) over the passes; None: one pass
            speedup=judged.value if found else None,
            speedup_interval=(judged.interval.low, judged.interval.high) if found else None,
            speedup_cut_at=judged.cut_at if found else None,
            speedup_note=judged.verdict if judged is not None and not found else None,
            speedup_measured=judged.value if judged is not None and not found else None,
            speedup_reason=self.noise_reason(),
            identical=self.comparison().identical if settings.greedy else None,  # sampling: ids may differ
            stopped=self.cancelled, cut_base_tokens=b.generated if self._cut_baseline_only() else None,
            settings=settings.settings_changed, weights=settings.weights,
            busy_share=self._busy if spec else None)  # set by the judgement above

    def _cut_baseline_only(self) -> bool:
        """Stop came after the speculative run had finished (its own finish reason kept: :meth:`mark_stopped`
        stamps "stopped" only on an unfinished run) and cut its baseline."""
        if not self.cancelled or self.spec is None:
            return False
        finished = self.spec_stats.finish_reason not in (None, "stopped")
        return finished and self.base_stats.finish_reason == "stopped"


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


def split_name(name: str) -> tuple[str, str]:
    """A drafter's name for a pane header: ("suffix decoding", "prompt + earlier outputs") from "suffix decoding
    (prompt + earlier outputs)": the trailing parenthetical goes to the subtitle, so the title fits one line at
    1400 px and a narrow screen never breaks inside "(1-3)" (its hyphens made non-breaking); (name, "") without
    one."""
    main, bracket, rest = name.partition(" (")
    if not bracket or not rest.endswith(")") or not main:
        return name, ""
    return main, "(" + rest.replace("-", "\u2011")


def pane_title(drafter_name: str, settings: Settings) -> tuple[str, str]:
    """The speculative pane header's drafter name and subtitle: ("n-gram lookup", "(1‑3) · k = 4"), the drafter's
    trailing parenthetical (:func:`split_name`) before :func:`k_label`. A lookahead drafter's parenthetical,
    "(W=3, N=3, G=2)", is left out: :func:`k_label` names W, N and G already (seen: they showed twice); so is a
    tree drafter's "(tree of 8)" and "+ lookup" where :func:`k_label` says "tree of 8 nodes, depth ≤ k" and "lookup
    first" (seen: "(tree of 8) · k = 4 · tree of 8 nodes, depth ≤ k")."""
    if settings.drafted_tree_nodes:
        drafter_name = re.sub(r" \(tree of \d+\)", "", drafter_name)
    if settings.lookup and drafter_name.endswith(" + lookup"):
        drafter_name = drafter_name[:-len(" + lookup")]
    name, detail = split_name(drafter_name)
    if settings.drafter == "lookahead":
        detail = ""
    return name, " · ".join(part for part in (detail, k_label(settings)) if part)


def _ends(interval) -> tuple[float, float] | None:
    """An :class:`~specviz.measure.stats.Interval`'s (low, high) for the history (None stays None)."""
    return None if interval is None else (interval.low, interval.high)


def _rate_figure(stats: RunStats) -> tuple:
    """A pane header's tokens/s figure (after the prefill) with its bootstrap interval over the run's passes
    (:meth:`RunStats.decode_rate`), "one pass" before there are two (:func:`render.pane_header`'s spread)."""
    spread = render.spread_text(stats.decode_rate(), single="one pass")
    return ("tokens/s", stats.decode_tokens_per_s, "{:.1f}", spread)


def k_label(settings: Settings) -> str:
    """How the run drafts, for the pane header and the history: "k = 4 (adaptive) · tree of 10 nodes, depth ≤ k ·
    confidence gate 0.15 · lookup first" ("" for standard decoding); the gate of any drafter that has one
    (:attr:`app.inputs.Settings.gate`: the heads, the distilled draft's "k = 4 · confidence gate 0.2"); the history
    explains the gate on hover in the drafter's words, :func:`app.render.history.gate_title`."""
    if settings.drafter == "none":
        return ""
    label = {"fixed": f"k = {settings.k}", "heuristic": f"k = {settings.k} (adaptive)",
             "auto": "k = auto"}[settings.k_schedule]
    if settings.drafted_tree_nodes:
        label += f" · tree of {render.plural(settings.drafted_tree_nodes, 'node')}, depth ≤ k"
    elif settings.tree_nodes:
        label += " · chain (trees are greedy-only)"
    if settings.gate > 0:  # the heads' and the draft models' (a trial: "6 of 32 drafted" under a bare "k = 4")
        label += f" · {CONFIDENCE_GATE} {settings.gate:g}"
    if settings.lookup:
        label += " · lookup first"
    if settings.drafter == "lookahead":  # k is the candidates' length, N-1; k = auto only gates whole passes
        label = f"k = {settings.k} (N−1)" + (" or a plain step (auto)" if settings.k_schedule == "auto" else "")
        label += f" · W = {settings.window}, N = {settings.ngram}, G = {settings.candidates}"
    return label


def head_accuracy(drafter) -> HeadAccuracy | None:
    """A per-head accuracy counter for a Medusa drafter (None for the others)."""
    heads = getattr(drafter, "heads", None)
    count = getattr(heads, "num_heads", None)
    return HeadAccuracy(int(count)) if isinstance(count, int) and count > 0 else None


def _before_runs(before: float, preparing: float | None, them: str) -> list[str]:
    """The status's part for the ``before`` seconds between Generate and the runs' start ("before them, waiting for
    the device: 9.7 s; loading and preparing: 0.6 s"), ``preparing`` of them after the device was obtained (None:
    not known, all of it called loading and preparing); each part named when it took half a second or more."""
    if preparing is None:
        return [f"before {them}, loading and preparing: {before:.1f} s"] if before >= 0.5 else []
    preparing = min(max(preparing, 0.0), before)
    waited = before - preparing
    if waited < 0.5:
        return [f"before {them}, loading and preparing: {preparing:.1f} s"] if preparing >= 0.5 else []
    parts = [f"before {them}, waiting for the device: {waited:.1f} s"]
    return parts + ([f"loading and preparing: {preparing:.1f} s"] if preparing >= 0.5 else [])
