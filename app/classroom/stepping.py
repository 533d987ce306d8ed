"""Step mode: moving through a recorded run (Next, Previous, Start, Next rejection) and Play, a timer that steps
it. A step is pure Python on the session's :class:`~specviz.analysis.stepper.Stepper`; each handler returns the
stepper and the stage's views (:func:`app.classroom.lesson.view`)."""

from __future__ import annotations

from typing import Callable

import gradio as gr

from app.classroom.lesson import view
from specviz.analysis.stepper import Stepper

PLAY_INTERVAL_S = 1.8  # Play: seconds per step


def stop_playing() -> tuple:
    """(playing, timer, play button) of a paused Play: what opening another run sends, so Play never steps a run
    the user did not start it on (a walkthrough picked while playing opens at its first step and stays there)."""
    return (False, gr.Timer(active=False), gr.Button(value="▶ Play"))


def _step(move: Callable[[Stepper], object]):
    def handler(stepper):
        if stepper is None:
            return (None, *view(None))
        move(stepper)
        return (stepper, *view(stepper, fresh=False))
    return handler


step_next = _step(Stepper.next)
step_prev = _step(Stepper.prev)


def step_rejection(stepper):
    """"Next rejection »": jump to the next decision with a rejection; when there is none ahead, stay and say so
    under the caption (a silent button reads as broken)."""
    if stepper is None:
        return (None, *view(None))
    before = stepper.index
    stepper.next_rejection()
    progress, caption, table, chart, output = view(stepper, fresh=False)
    if stepper.index == before:
        left = "in this run" if before == 0 else "after this step"
        caption = caption.replace("</div>", f'<br><small class="cr-none">No rejection {left}.</small></div>', 1)
    return (stepper, progress, caption, table, chart, output)
step_first = _step(lambda s: s.goto(0))


def play_toggle(stepper, playing):
    """Play / Pause: (playing, timer, play button, stepper, *view). Play at the last step starts over."""
    playing = bool(not playing and stepper is not None)
    if playing and stepper.at_end:
        stepper.goto(0)
    label = "‖ Pause" if playing else "▶ Play"
    views = view(stepper, fresh=False) if playing else (gr.skip(),) * 5
    return (playing, gr.Timer(active=playing), gr.Button(value=label), stepper, *views)


def play_tick(stepper, playing):
    """A timer tick while playing: advance one step; stop at the end."""
    if stepper is None or not playing or stepper.at_end:
        return (False, gr.Timer(active=False), gr.Button(value="▶ Play"), stepper, *(gr.skip(),) * 5)
    stepper.next()
    still = not stepper.at_end
    return (still, gr.Timer(active=still), gr.Button(value="‖ Pause" if still else "▶ Play"), stepper,
            *view(stepper, fresh=False))
