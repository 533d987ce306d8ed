"""The what-if status: what the α and c slider boxes and the run boxes cannot use is said in one line right under
the sliders (``#why-whatif-status``), not in the Measure status far above and not as a toast (a new user's trial:
the clamp sentence landed in the Measure status, and at 400 px the toasts covered the what-if heading). The tab's
own event handlers are called as the page calls them; no model, no browser."""

from __future__ import annotations

import html
import os
import re

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import gradio as gr  # noqa: E402
import pytest  # noqa: E402

from app import messages, why  # noqa: E402
from app.why.layout import WHATIF_STATUS_ID  # noqa: E402
from toast_support import toasts_shown  # noqa: E402


@pytest.fixture(scope="module")
def tab():
    """The Why tab built in a Blocks, once (the handlers keep no state of their own): (demo, {elem_id: block id})."""
    with gr.Blocks() as demo:
        why.build_tab(gr.State([]))
    return demo, {b.elem_id: i for i, b in demo.blocks.items() if getattr(b, "elem_id", None)}


@pytest.fixture
def toasts():
    """Every toast the handlers show (gr.Info, gr.Warning), as their text."""
    with toasts_shown() as shown:
        yield shown


def _said(update) -> str:
    """The plain text of a status line's HTML (its ℹ icon and tags dropped)."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", str(update)))).replace("ℹ", "").strip()


def _fire(demo, ids: dict, elem_id: str, event: str, *values) -> dict:
    """Call the one handler of ``elem_id``'s ``event`` that writes the what-if status, with ``values`` as its
    inputs; returns its outputs by elem_id (the kept state under "kept"). Fails when the Measure status is among
    them."""
    fns = [fn for fn in demo.fns.values() if (ids[elem_id], event) in fn.targets
           and ids[WHATIF_STATUS_ID] in [o._id for o in fn.outputs]]
    assert len(fns) == 1, (elem_id, event)
    names = [o.elem_id or "kept" for o in fns[0].outputs]
    assert "why-status" not in names
    out = fns[0].fn(*values)
    return dict(zip(names, out if isinstance(out, tuple) else (out,)))


def test_the_whatif_status_sits_right_under_the_sliders(tab):
    """In the what-if controls column, the line follows the draft cost slider, before the batch choice."""
    demo, ids = tab

    def named(block) -> list[str]:  # the elem_ids under block, in page order (Gradio wraps inputs in forms)
        return [name for child in getattr(block, "children", []) for name in
                ([child.elem_id] if getattr(child, "elem_id", None) else named(child))]

    assert named(demo.blocks[ids["whatif-controls"]])[:4] == ["why-alpha", "why-c", WHATIF_STATUS_ID, "why-batch"]
    assert demo.blocks[ids[WHATIF_STATUS_ID]].value == ""  # nothing said until something is typed


def test_a_clamped_c_is_said_once_in_the_whatif_status_and_not_in_the_measure_status(tab, toasts):
    """Draft cost c typed as 2.48: while typing, the slider goes to 2, the state keeps 2 and the what-if status says
    the clamp; leaving the box (its release) sets 2 again and says nothing more. No toast either time."""
    demo, ids = tab
    kept = dict(why.KEPT)
    typed = _fire(demo, ids, "why-c", "input", 2.48, kept, None)
    assert typed["why-c"] == gr.update(value=2) and typed["kept"] == {"alpha": 0.7, "c": 2.0}
    assert _said(typed[WHATIF_STATUS_ID]) == "Draft cost c is at most 2 here; using 2."
    assert "status-info" in typed[WHATIF_STATUS_ID]
    left = _fire(demo, ids, "why-c", "release", 2.48, typed["kept"], None)
    assert left == {"why-c": gr.update(value=2), WHATIF_STATUS_ID: gr.skip(), "kept": {"alpha": 0.7, "c": 2.0}}
    assert toasts == []


def test_alpha_out_of_range_or_emptied_is_said_in_the_whatif_status(tab, toasts):
    demo, ids = tab
    kept = {"alpha": 0.8, "c": 0.3}
    low = _fire(demo, ids, "why-alpha", "input", -0.5, kept, None)
    assert _said(low[WHATIF_STATUS_ID]) == "Per-token acceptance α is at least 0 here; using 0."
    assert low["kept"] == {"alpha": 0.0, "c": 0.3}
    emptied = _fire(demo, ids, "why-alpha", "release", None, kept, None)
    assert emptied["why-alpha"] == gr.update(value=0.8) and emptied["kept"] == kept
    assert _said(emptied[WHATIF_STATUS_ID]) == "Per-token acceptance α must be a number from 0 to 1; keeping 0.8."
    # a number in range: nothing said, the status left as it is
    fine = _fire(demo, ids, "why-alpha", "input", 0.55, kept, None)
    assert fine[WHATIF_STATUS_ID] == gr.skip() and fine["kept"] == {"alpha": 0.55, "c": 0.3}
    assert toasts == []


def test_a_typed_run_no_run_gives_is_said_in_the_whatif_status(tab, toasts):
    """Leaving the tokens-per-pass box at 9 for k = 4 (at most k + 1 = 5): the what-if status says why the run is
    not marked, with no toast; mended to 2.5, the same line says what is marked."""
    demo, ids = tab
    bad = _fire(demo, ids, "why-run-tpp", "blur", "4", "9", "1.5", "")[WHATIF_STATUS_ID]
    assert _said(bad) == ("Tokens per pass at k = 4 lies between 1 (nothing accepted) and 5 (all k drafts accepted "
                          "+ the bonus token), not 9: the run is not marked.")
    mended = _fire(demo, ids, "why-run-tpp", "blur", "4", "2.5", "1.5", bad)[WHATIF_STATUS_ID]
    assert _said(mended) == "Your run is marked on the what-if chart (k = 4, 2.5 tokens per pass, 1.5× speedup)."
    assert toasts == []
    # Enter in a run box (a text box's submit) says the same at once: a trial typed -3, abc, 99 and pressed Enter
    for elem_id in ("why-run-k", "why-run-tpp", "why-run-speedup"):
        assert _said(_fire(demo, ids, elem_id, "submit", "4", "9", "1.5", "")[WHATIF_STATUS_ID]) == _said(bad)
    said = _said(_fire(demo, ids, "why-run-k", "submit", "-3", "2", "1.5", "")[WHATIF_STATUS_ID])
    assert said.startswith("Run: k must be a whole number from 1 to") and "(got “-3”)" in said


def test_the_measure_status_is_written_by_measurement_events_only(tab):
    """Measure, Stop and the early-exit layer box write the Measure status; no what-if control does."""
    demo, ids = tab
    whatif_ids = {ids[e] for e in ("why-alpha", "why-c", "why-batch", "why-run-k", "why-run-tpp", "why-run-speedup")}
    writers = {ids_ for fn in demo.fns.values() if ids["why-status"] in [o._id for o in fn.outputs]
               for ids_, _ in fn.targets}
    assert writers and not writers & whatif_ids
    assert {ids["why-measure"], ids["why-stop"]} <= writers


def test_enter_commits_the_early_exit_layer_box_and_leaves_the_whatif_boxes_to_their_own_handlers(tab):
    """A new user's trial: -3 or 1e9 in "Early-exit layer for c" and Enter kept the value with no sentence (its check
    ran only when the box was left). The measurement column now has the other tabs' Enter script; the what-if
    sliders, which answer Enter themselves, stay outside its scope (one script for both said everything twice)."""
    demo, _ = tab
    assert why.ENTER_COMMITS_JS == messages.enter_commits_js("#why-controls")
    assert why.ENTER_COMMITS_JS in [fn.js for fn in demo.fns.values() if fn.js]  # registered on page load

    def inside(block, elem_id: str) -> bool:
        parent = getattr(block, "parent", None)
        while parent is not None and getattr(parent, "elem_id", None) != elem_id:
            parent = getattr(parent, "parent", None)
        return parent is not None

    boxes = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, (gr.Number, gr.Slider)) and b.elem_id}
    assert inside(boxes["why-exit-layer"], "why-controls")
    assert [e for e in ("why-alpha", "why-c") if inside(boxes[e], "why-controls")] == []
    exit_id = next(i for i, b in demo.blocks.items() if getattr(b, "elem_id", None) == "why-exit-layer")
    blur = [fn for fn in demo.fns.values() if (exit_id, "blur") in [tuple(t) for t in fn.targets]]
    assert len(blur) == 1  # the check that Enter now reaches (tell_when_invalid)
