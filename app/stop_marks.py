"""Where a Stop pressed while its tab's run still waits in Gradio's queue learns of that run. Gradio runs a few
handlers of a kind at once (8 Live runs; 4 Arena runs and measurements together); a later one waits in Gradio's own
queue, unseen by the server's cancel flags (:mod:`app.cancels`) until its handler starts. The page knows: its
trigger marks ``window[<mark>]`` true at the click and false once the event has ended; Stop's browser side sends
that mark in place of its last input, and the server then keeps a queued mark for the session
(:meth:`app.cancels.CancelRegistry.cancel` with ``queued``), so that run starts flagged and runs nothing.
The Live tab sets its mark inside its own Generate script (:func:`app.live.layout.starting_js`)."""

from __future__ import annotations

import re


def _checked(mark: str) -> str:
    if not re.fullmatch(r"sv[A-Za-z]+", mark):
        raise ValueError(f"a page mark is a plain name starting with 'sv', not {mark!r}")
    return mark


def sent_js(mark: str) -> str:
    """The run's own event's browser side: its inputs pass unchanged, and the page has sent a run
    (``window[mark] = true``). It rides on the run's event itself: a separate listener on the same click ran after
    a quick run had already ended and left the mark set. Raises ValueError for a name that is not ``sv`` + letters."""
    return f"(...args) => {{ {set_mark(mark)}return args; }}"


def set_mark(mark: str) -> str:
    """The statement that marks the page as having sent a run (``"window.svX = true; "``), for a run event whose
    browser side does more (the Arena's closes old toasts first). Raises ValueError as :func:`sent_js`."""
    return f"window.{_checked(mark)} = true; "


def ended_js(mark: str) -> str:
    """Chained after the run's event (it ended: finished, failed or stopped): ``window[mark] = false``."""
    return f"() => {{ window.{_checked(mark)} = false; }}"


def stop_sent_js(mark: str, inputs: int) -> str:
    """Stop's browser side for a handler of ``inputs`` inputs (at least 1): the first ``inputs - 1`` values pass as
    they are, the last is replaced by whether the page sent a run that has not ended (True / False)."""
    if inputs < 1:
        raise ValueError("Stop's browser side needs an input to carry the page's mark")
    names = ", ".join(f"a{i}" for i in range(inputs))
    kept = "".join(f"a{i}, " for i in range(inputs - 1))
    return f"({names}) => [{kept}window.{_checked(mark)} === true]"


def stopped_in_queue(what: str, reached: bool = False) -> str:
    """The plain line of a ``what`` ("run", "measurement", "sweep", ...) stopped while it still waited in Gradio's
    queue: Stop's answer ("... so it will not run."), or with ``reached`` the handler's own when its turn comes and
    it runs nothing ("... so it did not run.")."""
    return (f"Stopped: your {what} was still waiting for its turn in the server's queue, so it "
            f"{'did' if reached else 'will'} not run.")


def mark_while_sent(event, mark: str) -> None:
    """Clear the page's mark once ``event`` (the run's Dependency, wired with ``js=sent_js(mark)``) has ended:
    finished, failed or stopped. Stop then reads it through :func:`stop_sent_js`."""
    event.then(None, js=ended_js(mark), queue=False, api_visibility="private")
