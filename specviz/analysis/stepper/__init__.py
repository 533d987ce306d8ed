"""Step mode: a recorded speculative run, replayed one phase of one pass at a time, with plain-language captions.

A :class:`Recording` is a finished run's events plus what a classroom needs beyond them: each token's text, and at
each rejection the top of the target's, the draft's and the residual distribution (:class:`Distributions`).
:class:`Recorder` produces one by running the engine with a thin drafter wrapper that keeps each proposal, and by
running the target (and, in greedy mode, a draft model) once more on the committed prefix of each rejected
position, with a cache of its own (:class:`PrefixForward`): cheap for a small model and a short run, and nothing
in the engine changes.

:class:`Stepper` walks the recording: the prefill is one step (phase ``prefill``), every later pass is four steps
``draft`` -> ``verify`` -> ``decide`` -> ``emit`` (three when the drafter proposed nothing: there is nothing to
decide, and the token at emit is a plain target token: :func:`phase_label`). :meth:`Stepper.table_rows` gives the
per-position numbers revealed so far (q at draft; p and the target's top token at verify; min(1, p/q), the uniform u
and the decision at decide; the recovered / bonus / plain target token at emit) and
:meth:`Stepper.caption` a sentence for students. No Gradio here.

The package's rooms: :mod:`~specviz.analysis.stepper.record` (the recording and the phases),
:mod:`~specviz.analysis.stepper.stepping` (the :class:`Stepper`), :mod:`~specviz.analysis.stepper.captions` and
:mod:`~specviz.analysis.stepper.recorder` (the :class:`Recorder`).
"""

from specviz.analysis.stepper.record import (
    PHASE_LABELS,
    PHASES,
    PLAIN_EMIT_LABEL,
    Distributions,
    Recording,
    display_text,
    no_draft_reason,
    phase_label,
)
from specviz.analysis.stepper.recorder import (
    PrefixForward,
    Recorder,
    RecordingDrafter,
    record_run,
    rejection_distributions,
)
from specviz.analysis.stepper.stepping import Row, Step, Stepper, steps_of

__all__ = ["PHASES", "PHASE_LABELS", "PLAIN_EMIT_LABEL", "Distributions", "PrefixForward", "Recorder", "Recording",
           "RecordingDrafter", "Row", "Step", "Stepper", "display_text", "no_draft_reason", "phase_label", "record_run",
           "rejection_distributions", "steps_of"]
