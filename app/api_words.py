"""What Gradio's API page ("Use via API", under every tab) says of each public endpoint: plain sentences for
someone calling the app from code (the handlers' own docstrings are written for this project's developers). Each
event passes its entry as ``api_description``; docs/app.md, "From code: the app's API", shows a call."""

from __future__ import annotations

_STOP = ("A Stop sent while the run still waits in the queue keeps it from running. Returns the status line (HTML). "
         "Its parameters are the page's own marks: call it with their defaults.")

API = {
    "generate": (
        "Generates from one prompt twice, with speculative decoding and with standard decoding, and streams both: "
        "the parameters are the Live tab's controls by name (prompt; target: 'embedded', a hub id or a local "
        "folder; drafter: one of the drafter menu's keys, e.g. 'ngram', 'lookahead', 'eagle', 'distilled'; k; "
        "temperature (0 = greedy); max_new_tokens; ...). A parameter left out takes the control's default. Bad "
        "input gives one sentence in the status output, never an error."),
    "stop": ("Stops this session's /generate run and returns what it made so far, in /generate's outputs (the "
             "run ends before its next pass)."),
    "arena": (
        "Runs the Arena: every drafter x k on every chosen prompt against standard decoding, timed in turn "
        "(standard, method, standard, ...). Streams the status, the tables (per category and pooled, timings, per "
        "prompt), the charts and, at the end, CSV and JSON files. Bad input gives one sentence in the status."),
    "arena_stop": "Stops this session's /arena run; the prompts that finished stay in its tables and files. " + _STOP,
    "why_measure": (
        "Measures the target's forward time over batch sizes and new tokens per forward (why a pass of k+1 tokens "
        "costs about one step) and each drafter's cost c; streams the status, the charts and the tables."),
    "why_stop": "Stops this session's /why_measure; what was measured so far stays. " + _STOP,
    "batching_measure": (
        "Sweeps batch sizes: standard and speculative decoding of the same batch, interleaved repeats, each timed "
        "on its own clock; returns the status, the lesson, the chart, the table and CSV and JSON files."),
    "batching_stop": "Stops this session's /batching_measure; the batch sizes that finished stay. " + _STOP,
    "batching_check": (
        "Samples N short runs each way at a temperature above 0 and tests whether speculative decoding keeps the "
        "target's distribution (chi-square); 'broken' accepts every draft to show the test catching it."),
    "batching_check_stop": "Stops this session's /batching_check. " + _STOP,
}
"""Endpoint name (its ``api_name``) -> the API page's description."""
