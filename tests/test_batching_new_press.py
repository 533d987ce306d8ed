"""A new user's trial: after a sampling check with N = 200 finished, a check with N = 20 was refused before sampling
("Raise N to 44 or more; nothing was sampled.") right above the N = 200 verdict, charts and chi-square table, with
nothing saying they belonged to the earlier check. Each new press of Check (or Measure), refused or started, now
hides the earlier results first, as the Live tab hides its cards while a new run reads its prompt. The tests fold
the handlers' yields onto the page as Gradio does (a skip leaves a component, an update merges, a value replaces)."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app import batching, device  # noqa: E402


def _page(names: tuple[str, ...], yields, page: dict | None = None) -> dict:
    """The components ``names`` after the handler's ``yields``, starting from ``page`` ({name: {"value",
    "visible"}}), as the browser would show them."""
    page = {name: dict(state) for name, state in (page or {}).items()} or {
        name: {"value": None, "visible": True} for name in names}
    for out in yields:
        for name, value in zip(names, out):
            if isinstance(value, dict) and value.get("__type__") == "update":
                page[name] |= {key: v for key, v in value.items() if key != "__type__"}
            else:
                page[name]["value"] = value
    return page


def _check(n: int, tiny_model_dir, page: dict | None = None) -> dict:
    form = batching.CheckForm("Hello there", 1.0, "ngram", n, False, str(tiny_model_dir), "")
    return _page(batching.check_handlers.CHECK_OUTPUTS, batching.check(form), page)


def _hidden(page: dict, name: str) -> bool:
    return page[name]["visible"] is False or page[name]["value"] in ("", None)


def test_a_check_refused_before_sampling_hides_the_earlier_checks_verdict_chart_and_table(tiny_model_dir):
    done = _check(100, tiny_model_dir)
    assert "Checked in" in done["batching-check-status"]["value"]
    assert "standard vs speculative" in done["batching-check-stats"]["value"]  # the earlier check's table
    assert done["batching-check-chart"]["visible"] is True and done["batching-check-lesson"]["value"]
    assert done["batching-check-lesson"]["visible"] is done["batching-check-stats"]["visible"] is True
    refused = _check(30, tiny_model_dir, done)  # too few for this prompt: refused after reading the first tokens
    status = refused["batching-check-status"]["value"]
    assert "Raise N to 98 or more; nothing was sampled." in status and "Checked" not in status, status
    assert refused["batching-check-lesson"] == refused["batching-check-stats"] == {"value": "", "visible": False}
    assert refused["batching-check-chart"]["visible"] is False
    invalid = _check(5, tiny_model_dir, done)  # refused by the form itself, before the device
    assert "N runs per side must be between 20 and 1000 (got 5)" in invalid["batching-check-status"]["value"]
    assert all(_hidden(invalid, name) for name in ("batching-check-lesson", "batching-check-chart",
                                                   "batching-check-stats"))
    assert not device.DEVICE.locked


def test_a_check_that_starts_hides_the_earlier_one_before_its_first_sample(tiny_model_dir):
    form = batching.CheckForm("Hello there", 1.0, "ngram", 100, False, str(tiny_model_dir), "")
    running = batching.check(form)
    first = next(running)  # the "Starting: …" update, before any sampling
    running.close()
    status, lesson, chart, stats = first
    assert "Starting: 100 standard and 100 speculative runs" in status
    assert lesson["visible"] is stats["visible"] is chart["visible"] is False  # hidden, as before any check
    assert lesson["value"] == stats["value"] == "" and chart["value"] is None


def test_a_sweep_refused_or_started_clears_the_earlier_sweeps_results(tiny_model_dir):
    names = batching.sweep_handlers.SWEEP_OUTPUTS
    done = _page(names, batching.measure(batching.SweepForm("ngram", 2, 6, [1], batching.SHORT, False,
                                                            str(tiny_model_dir), "")))
    assert [row[0] for row in done["batching-table"]["value"]["data"]] == ["1"]
    assert done["batching-csv"]["visible"] is True and done["batching-chart"]["visible"] is True
    refused = _page(names, batching.measure(batching.SweepForm("ngram", 99, 6, [1], batching.SHORT, False,
                                                               str(tiny_model_dir), "")), done)
    assert "k (draft length)" in refused["batching-status"]["value"]
    assert refused["batching-table"]["value"]["data"] == [[""] * 10]  # the empty table, its headers kept
    assert refused["batching-lesson"] == {"value": "", "visible": False}
    assert [refused[n]["visible"] for n in ("batching-chart", "batching-csv", "batching-json")] == [False] * 3
    running = batching.measure(batching.SweepForm("ngram", 3, 6, [1], batching.SHORT, False, str(tiny_model_dir), ""))
    started = next(running)
    running.close()
    status, lesson, chart, table, csv_file, json_file = started
    assert "Starting the batch-size sweep" in status and lesson == {"__type__": "update", "value": "", "visible": False}
    assert chart["visible"] is False
    assert "T(B,4) ms" in table["headers"] and table["data"] == [[""] * 10]  # headers for the new k = 3
    assert csv_file["visible"] is False and json_file["visible"] is False
    assert not device.DEVICE.locked
