"""What the Live tab's handlers send: one :class:`Frame` per message (made into a tuple in
:data:`app.live.defaults.OUTPUTS` order), the end state of a run (:func:`final`), a blank or a failed run
(:func:`blank`, :func:`failed`), the status lines before a run holds the device (:func:`planned_status`) and after
Stop, and the per-session stores the handlers share: the running view (for Stop), the last good result (kept when a
later run fails), suffix decoding's store of earlier outputs."""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass

import gradio as gr

from app import render, stop_marks
from app.device import LOCAL_PREFIX, CancelRegistry
from app.endings import Endings
from app.inputs import Settings
from app.live.view import RunView
from app.messages import report
from app.render.markup import keep_ranges
from app.records import RunSummary
from specviz.drafters.suffix import SuffixStore

HISTORY_ROWS = 12
SPEC_PLACEHOLDER = "The speculative run appears here."
"""The speculative pane's line before any run (and once the message a "No result" line pointed at is gone)."""
BASE_PLACEHOLDER = "The standard-decoding baseline appears here."
"""The baseline pane's line, the same."""
NO_RESULT = "No result: this run did not start or did not finish (see the message above)."
"""Both panes' line when a run failed and the session has no good result to show (:func:`failed`)."""

RUNS = CancelRegistry()  # the Live tab's runs, one per session
_VIEWS: dict[str, RunView] = {}  # session -> its latest run's view, for Stop
_GOOD: dict[str, RunView] = {}  # session -> its latest finished (or stopped) run, kept when a later run fails
_VIEWS_LOCK = threading.Lock()
ENDED = Endings()  # session -> its latest run's handler has ended (Stop's result waits for it)
_SUFFIX_STORES: dict[str, SuffixStore] = {}  # session -> suffix decoding's earlier outputs (lives for a page visit)


def history_html(history: list[RunSummary]) -> str:
    """The run history table (newest first)."""
    return render.history_html(history)


def add_to_history(history: list[RunSummary], view: RunView) -> None:
    """Put ``view``'s run first in ``history`` (at most :data:`HISTORY_ROWS` rows are kept)."""
    history.insert(0, view.summary())
    del history[HISTORY_ROWS:]


@dataclass
class Frame:
    """One message of the Live tab's handlers; a part left None stays as it is on the page.

    Attributes:
        spec, base: the speculative and the baseline pane (HTML).
        figure: the charts (a plotly figure); they stay hidden until the first one arrives.
        stats, status: the stats cards and the status line (HTML).
        history, state: the history table (HTML) and the session's rows (``gr.State``: :class:`RunSummary` list).
        tree, heads: the draft tree and the Medusa heads' table (HTML): shown when given HTML, hidden when "".
        cut: the prompt's cut (:attr:`RunView.cut`), kept as a warning in the phone status (:func:`progress_html`).
        hide_charts: hide the charts (a blank result has none).
        tokens_info: the max-new-tokens slider's info line (:func:`app.costs.tokens_info`; its value is never sent).
    """

    spec: str | None = None
    base: str | None = None
    figure: object | None = None
    stats: str | None = None
    status: str | None = None
    history: str | None = None
    state: list[RunSummary] | None = None
    tree: str | None = None
    heads: str | None = None
    cut: str = ""
    hide_charts: bool = False
    tokens_info: str | None = None

    def values(self) -> tuple:
        """The output tuple, in :data:`app.live.defaults.OUTPUTS` order (``gr.skip()`` for each part left None)."""
        if self.hide_charts:
            chart = gr.update(visible=False)
        else:
            chart = gr.update(value=self.figure, visible=True) if self.figure is not None else None
        progress = None if self.status is None else progress_html(self.status, self.cut)
        stats = None if self.stats is None else keep_ranges(self.stats)  # "(99.8–100.0%)" on one line
        parts = (self.spec, self.base, chart, stats, self.status, self.history, self.state,
                 _shown(self.tree), _shown(self.heads), progress,
                 None if self.tokens_info is None else gr.update(info=self.tokens_info))
        return tuple(gr.skip() if part is None else part for part in parts)


def status_only(status: str, cut: str = "") -> tuple:
    """An output tuple that changes only the status line (and its compact copy)."""
    return Frame(status=status, cut=cut).values()


def _shown(markup: str | None):
    """A draft tree's or heads' table's update: shown with ``markup``, hidden for "", unchanged for None."""
    if markup is None:
        return None
    return gr.update(value=markup, visible=True) if markup else gr.update(visible=False)


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


def blank(message: str, status: str, history: str | None = None, state: list[RunSummary] | None = None,
          cut: str = "") -> tuple:
    """Both panes show ``message``; stats, charts, draft tree and heads' table are cleared (no figures of an
    earlier run are mistaken for this one's; earlier runs stay listed in the history)."""
    empty = render.placeholder_html(message)
    return Frame(empty, empty, stats="", status=status, history=history, state=state, tree="", heads="", cut=cut,
                 hide_charts=True).values()


def failed(what: str, error: BaseException, session: str | None = None) -> tuple:
    """Say what went wrong (in the status line). The session's previous good result (its last finished
    or stopped run) stays in both panes, the stats and the charts; without one the panes say there is no result
    (see :func:`blank`)."""
    status = report(what, error)
    with _VIEWS_LOCK:
        good = _GOOD.get(session) if session else None
    if good is None:
        return blank(NO_RESULT, status)
    return Frame(good.spec_html(), good.base_html(), good.figure(), good.stats_html(), status,
                 tree=good.tree_html(every_pass=True), heads=good.heads_html(), cut=good.cut).values()


def keep_good(session: str, view: RunView) -> None:
    """Remember ``view`` as ``session``'s latest good result (shown again when a later run fails)."""
    if not session.startswith(LOCAL_PREFIX) and not view.empty:
        with _VIEWS_LOCK:
            _GOOD[session] = view


def final(view: RunView, history: str | None = None, state: list[RunSummary] | None = None,
          tokens_info: str | None = None) -> tuple:
    """Everything a finished (or stopped) run shows: panes, charts, stats, status, the whole draft tree; with the
    history table's HTML (``history``), the session's rows (``state``) and the max-new-tokens slider's info line
    (``tokens_info``: the next run's plan, from the costs this run measured) when given."""
    spec, base, figure, stats = view.spec_html(), view.base_html(), view.figure(), view.stats_html()
    tree, heads = view.tree_html(every_pass=True), view.heads_html()
    # the status last: its "Done in" counts the drawing of everything above (the time the visitor waits for it)
    return Frame(spec, base, figure, stats, view.status(), history, state, tree=tree, heads=heads,
                 cut=view.cut, tokens_info=tokens_info).values()


def planned_status(settings: Settings, plan: str, ahead: int, holder: str = "") -> str:
    """The status before a run holds the device: how long it should take ("about 25 s (from recent runs of this
    model on this server)", when known) and how many runs are ahead of it ("1 run ahead of yours", with what the
    device is doing)."""
    if ahead == 0:
        length = f"yours takes {plan}" if plan else "the time a run takes here is measured once the model is loaded"
        return render.status_html(f"Starting: no run ahead of yours; {length}.", "busy", notes=settings.notes)
    runs = "1 run is" if ahead == 1 else f"{ahead} runs are"
    what = f" ({holder})" if holder else ""
    length = f" Yours takes {plan} once it starts." if plan else ""
    return render.status_html(f"Waiting for the device… {runs} ahead of yours{what}.{length} Runs take turns so "
                              "that each one's timing is undisturbed.", "wait", notes=settings.notes)


def stopped_status() -> str:
    """The status line after a Stop."""
    return render.status_html("Stopped.", "info")


def stopped_in_queue(reached: bool = False) -> str:
    """The status line of a run stopped while it still waited in Gradio's queue (more runs going than the server
    takes at once): Stop's answer ("... so it will not run."), or with ``reached`` the run's own when its turn comes
    and it runs nothing ("... so it did not run.")."""
    return render.status_html(stop_marks.stopped_in_queue("run", reached), "info")
