"""The sampling check's N box says more than its range: the prompt decides the least N (a new-user trial read
"20–1000", ran N = 20 and was refused), and the check says it before sampling."""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

from app.batching.check_job import MAX_N, MIN_N, N_INFO  # noqa: E402


def test_the_n_box_info_says_the_prompt_decides_the_least_n_and_the_check_names_it_before_sampling():
    assert (MIN_N, MAX_N) == (20, 1000)
    assert N_INFO == ("The prompt decides the least N (the default one needs a few dozen at temperature 1): before "
                      "sampling, the check reads the target's law in seconds and says it if yours is too few.")


def test_the_n_box_shows_the_info_line():
    import gradio as gr

    from app.batching.layout import build_tab

    with gr.Blocks() as demo:
        build_tab()
    box = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "batching-check-n")
    assert box.info == N_INFO
