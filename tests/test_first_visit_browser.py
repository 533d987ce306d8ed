"""A first visit on a busy machine, in a real browser: the app started as ``python app.py`` starts it
(:func:`app.serve`: the model, its tuning and a short Live run at start-up), with two busy loops holding both CPUs
and a fresh cache folder (no tuning file yet). The first view offers a prompt with the examples in the first
screen, and no Live run in the page measures the machine again ("Measuring the fastest threads…"), the second
included: the start-up's measurement, taken busy, is kept in memory and on disk with its load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import pytest  # noqa: E402
import torch  # noqa: E402
from browser_support import free_port, non_loopback, open_page, requires_chromium  # noqa: E402

pytestmark = requires_chromium

STARTUP_TIMEOUT_S = 600  # tuning (15-25 s quiet) and the start-up run, both on CPUs held by two busy loops
RUN_TIMEOUT_MS = 300_000
MEASURING = "Measuring the fastest threads"
WATCH_STATUS_JS = """() => { window.__svStatus = [];
    new MutationObserver(() => { const e = document.querySelector('#status'); if (!e) return;
        const text = e.textContent; if (window.__svStatus.at(-1) !== text) window.__svStatus.push(text); })
      .observe(document.querySelector('#status'), {subtree: true, childList: true, characterData: true}); }"""


@pytest.fixture
def busy_loops():
    """Two Python processes spinning, one per CPU of the project's 2-core machine; killed at the end."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield loops
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


@pytest.fixture
def fresh_start(tmp_path, monkeypatch, embedded):
    """A fresh cache folder (SPECVIZ_CACHE_DIR: no tuning file) holding a link to the converted embedded model
    (converting it again is not what is tested), tuning on, and no cost or default learned in this process; the
    shared embedded model gets its threads and kernels back afterwards."""
    from app import live
    from specviz.runtime import speed

    from specviz.measure import tuning
    from specviz.runtime.models import cache_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    for folder in cache_dir().glob("embedded-*"):
        (cache / folder.name).symlink_to(folder, target_is_directory=True)
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(cache))
    monkeypatch.setenv("SPECVIZ_TUNE", "1")
    monkeypatch.setenv("SPECVIZ_WEIGHTS", "float32")  # the threads' tuning is the subject: no format measured
    for name in ("_COSTS", "_TUNED", "_DEFAULT_TOKENS"):
        monkeypatch.setattr(live.costs, name, {})
    tuning.forget()
    report = speed.report_of(embedded.model)
    threads, fast = torch.get_num_threads(), report is not None and report.active
    yield cache
    tuning.forget()
    embedded.model._specviz_threads = None
    if report is not None:
        speed.set_fast_path(embedded.model, fast)
        speed.set_row_padding(embedded.model, {})
    torch.set_num_threads(threads)


def _started(spec: str = "embedded") -> bool:
    from app import device, live

    return spec in live.costs._DEFAULT_TOKENS and not device.DEVICE.locked


def _run(page) -> str:
    page.click("#generate")
    page.wait_for_selector("#status .status-done, #status .status-error", state="detached", timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector("#status .status-done, #status .status-error", timeout=RUN_TIMEOUT_MS)
    return page.inner_text("#status")


def test_a_busy_machine_is_measured_at_start_up_and_never_in_a_visitors_run(browser, busy_loops, fresh_start):
    from app import serve

    port = free_port()
    demo = serve("embedded", server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    page = None
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _started() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _started(), "the start-up (model, tuning, start-up run) did not finish"
        records = [json.loads(p.read_text()) for p in (fresh_start / "tuning").glob("*.json")]
        assert len(records) == 1 and records[0]["busy"] is True and records[0]["load"] is not None

        page = open_page(browser, {"width": 1400, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("#generate")
        page.wait_for_selector("#examples .gallery-item")  # the examples render after the button on a busy machine
        first_view = page.evaluate("""() => ({prompt: document.querySelector('#prompt textarea').value,
            examples: document.querySelector('#examples .gallery-item').getBoundingClientRect().bottom})""")
        assert first_view["prompt"].startswith("Use only the context") and first_view["examples"] <= 900
        time.sleep(1.0)  # the page-load event gives max new tokens its derived default (known since start-up)
        box = page.locator("#max-new-tokens input[type=number]")
        box.fill("6")  # a short run: what is tested is the waiting before it, not its length
        box.press("Enter")
        page.evaluate(WATCH_STATUS_JS)
        for _ in range(2):
            assert "Done in" in _run(page)
        seen = page.evaluate("window.__svStatus")
        assert seen and not [s for s in seen if MEASURING in s], seen
        assert sum("Done in" in s for s in seen) >= 2 and "6 tokens" in seen[-1]
        assert not non_loopback(page.requests)
    finally:
        if page is not None:
            page.context.close()
        demo.close()
