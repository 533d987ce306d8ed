"""The Classroom tab: stop time inside speculative decoding, and ask "what if k were different?".

Step mode replays a recorded run (:class:`specviz.analysis.stepper.Recording`) one phase of one pass at a time. The
built-in walkthroughs ship as recorded runs (``assets/recordings/<id>.json.gz``, :mod:`specviz.analysis.recording`;
made by ``scripts/record_walkthroughs.py``): choosing one, or opening a link to one, opens its run at once with no model
work, read once per process and shared by every session (each keeps only its own step), so a room can step through
it while a live run computes; steps and openings skip the queue. "Record run" records your own settings on the device
(:class:`specviz.analysis.stepper.Recorder`); "Download this run" offers any open run as a file and "Open a recording
file" opens one (when the operator allows uploads: ``SPECVIZ_ALLOW_UPLOADS``; a refused file is one sentence).
A run is stepped (draft -> verify -> accept/reject -> recovered or bonus token; a pass with nothing drafted
ends in a plain target token) with Previous / Play / Next buttons,
keyboard shortcuts (← →, space; ignored while typing in a field), a per-position table (q, p, min(1, p/q), u,
decision; in greedy mode the target's top token), a caption for students, and at a rejection a bar chart of the
target, draft and residual distributions. A presentation view (large type, high contrast) is one checkbox; the
settings travel in the page address (:func:`share_query` / :func:`settings_from_query`, read on page load), and built-in
walkthroughs live in ``assets/walkthroughs.json``.

What-if k runs one greedy run at the largest k next to standard decoding, predicts the speedup of every smaller k
(:mod:`specviz.analysis.whatif`), and re-runs at the recommended k to put the predicted and measured speedups side by
side. Runs go through the app's device runner (:mod:`app.device`), so they never share the device with another
session's run, and they carry the job's cancel flag into the engine (a closed handler stops them before their next
forward). Errors become a one-line message in the tab's status, never a trace.

The package, one module per concern (each imports only those listed before it):

- :mod:`~app.classroom.walkthroughs`: the settings a run needs (:data:`FIELDS`) and the built-in walkthroughs;
- :mod:`~app.classroom.whatif_view`: what-if k as text (ranges, caveats, the check, the status line);
- :mod:`~app.classroom.figures`: the rejection chart and the what-if chart (Plotly);
- :mod:`~app.classroom.lesson`: the stage at one step (pills, caption, table, output so far);
- :mod:`~app.classroom.stepping`: step mode's buttons and Play;
- :mod:`~app.classroom.recordings`: shipped recordings, downloads, opening a walkthrough or a file;
- :mod:`~app.classroom.links`: the page address, the share box and the page load;
- :mod:`~app.classroom.running`: validating settings and runs on the device (record, the what-if's run pairs);
- :mod:`~app.classroom.whatif`: What-if k's handlers;
- :mod:`~app.classroom.wiring` and :mod:`~app.classroom.layout`: the tab's events and its layout
  (:func:`build_tab`).

This module re-exports the names the app, the scripts and the tests use (``from app import classroom``).
"""

from __future__ import annotations

import html  # noqa: F401 - the tests escape titles as the tab does

import gradio as gr  # noqa: F401 - the tests compare with gr.skip()

from app.classroom.figures import (CHART_TOKENS, MARK_HEADROOM, MARK_ROOM_PX, probability_range,  # noqa: F401
                                   rejection_chart, rejection_figure, whatif_figure)
from app.classroom.layout import build_tab  # noqa: F401
from app.classroom.lesson import (NO_RECORDING, caption_html, lookahead_html, output_html, progress_html,  # noqa: F401
                                  table_html, view)
from app.classroom.links import (on_load, settings_from_query, share_follows, share_link, share_query,  # noqa: F401
                                 tab_to_open)
from app.classroom.recordings import (KEPT_RUN, PICK_FILE, download_file, meta_settings, open_upload,  # noqa: F401
                                      open_walkthrough, recording_meta, recording_path, shipped_recording,
                                      upload_started, uploads_allowed)
from app.classroom.running import (_record_work, on_device, parse, record, record_run,  # noqa: F401
                                   record_settings, record_walkthrough)
from app.classroom.stepping import (PLAY_INTERVAL_S, play_tick, play_toggle, step_first, step_next,  # noqa: F401
                                    step_prev, step_rejection, stop_playing)
from app.classroom.walkthroughs import (CUSTOM, DEFAULTS, EDITED, EDITED_NO_RUN, FIELDS, MENU_LABEL_MAX,  # noqa: F401
                                        STEP_MAX_NEW_TOKENS, WHATIF_MAX_NEW_TOKENS, edited_note_html,
                                        load_walkthroughs, menu_choices, note_html, recorded_menu, settings_edited,
                                        walkthrough_settings)
from app.classroom.whatif import _checked, whatif_rerun, whatif_run  # noqa: F401
from app.classroom.wiring import ENTER_COMMITS_JS  # noqa: F401
from app.classroom.whatif_view import (ONE_RUN, _predicts, _with_range, plain_range, rerun_button,  # noqa: F401
                                       rerun_k, whatif_caveats, whatif_html, whatif_status)
from app.inputs import InputError  # noqa: F401 - what parse raises
