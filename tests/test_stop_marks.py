"""The page marks Stop carries (app.stop_marks): plain names only, and the last input replaced by the mark."""

from __future__ import annotations

import pytest

from app.stop_marks import ended_js, sent_js, stop_sent_js


def test_marks_are_plain_page_names_and_stop_keeps_its_other_inputs():
    assert sent_js("svArenaRunning") == "(...args) => { window.svArenaRunning = true; return args; }"
    assert ended_js("svArenaRunning") == "() => { window.svArenaRunning = false; }"
    assert stop_sent_js("svArenaRunning", 1) == "(a0) => [window.svArenaRunning === true]"
    assert stop_sent_js("svX", 3) == "(a0, a1, a2) => [a0, a1, window.svX === true]"
    for bad in ("svX; alert(1)", "window.x", "", "svX1"):
        with pytest.raises(ValueError):
            sent_js(bad)
    with pytest.raises(ValueError):
        stop_sent_js("svX", 0)
