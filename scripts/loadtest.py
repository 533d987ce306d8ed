"""A bounded load test of the web app, on loopback only: K concurrent sessions through the Gradio client API.

    python scripts/loadtest.py --sessions 4 --requests 2 --max-new-tokens 16            # the embedded model
    python scripts/loadtest.py --target /path/to/tiny-model --sessions 4 --json          # a local folder

Starts the app in this process on a free 127.0.0.1 port (or uses ``--url``, which must be a loopback address),
then:

1. reference: each session's prompt is generated once, alone (this also loads the model);
2. load: K gradio_client sessions (one ``Client`` each, so one session hash each) send R requests apiece, all
   sessions at once, each request bounded by ``--timeout`` seconds;

and reports completions, errors, latency p50/p95 (submit to final result, waiting for the device included),
peak memory (this process's VmHWM: the server's when it runs here), how many sessions were shown their place
in line, model loads during the test, and whether every session saw its own output (greedy: equal to the
reference of its prompt; a different prompt per session, so a mix-up shows). Exit status 0 when every request
completed with its own output, 1 otherwise. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import resource
import socket
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a load test never downloads
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PROMPTS = (
    "Tell me a story about a dragon who lives in the old library.",
    "Explain how a computer stores numbers in memory.",
    "Write a short poem about the sea and the mountains.",
    "What do astronomers search for when they watch distant galaxies?",
    "Describe the market: apples, pears, oranges and grapes.",
    "How does the baker start the morning in the small town?",
    "Why do trains leave the station every hour?",
    "List the numbers one to ten and sing a counting song.",
)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_TOKEN = re.compile(r'<span class="tok[^"]*"[^>]*>(.*?)</span>', re.S)


@dataclass
class Report:
    """What the load test measured (``--json`` prints it)."""

    url: str
    sessions: int
    requests_per_session: int
    max_new_tokens: int
    completions: int = 0
    errors: int = 0
    timeouts: int = 0
    mismatches: int = 0  # a session's output differed from its prompt's reference (someone else's tokens?)
    distinct_outputs: int = 0
    sessions_shown_queue_position: int = 0
    model_loads: int | None = None  # loads during the load phase (None: server not in this process)
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    latency_max_s: float | None = None
    wall_s: float = 0.0
    peak_rss_mb: float | None = None
    error_messages: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every request completed, with its own output."""
        wanted = self.sessions * self.requests_per_session
        return self.errors == 0 and self.mismatches == 0 and self.completions == wanted

    def summary(self) -> str:
        """A few human-readable lines."""
        def s(value):
            return "-" if value is None else f"{value:.2f} s"

        lines = [
            f"load test on {self.url}: {self.sessions} sessions x {self.requests_per_session} requests, "
            f"{self.max_new_tokens} new tokens each",
            f"  completions {self.completions}, errors {self.errors} (timeouts {self.timeouts}), own-output "
            f"mismatches {self.mismatches}, distinct outputs {self.distinct_outputs}",
            f"  latency p50 {s(self.latency_p50_s)}, p95 {s(self.latency_p95_s)}, max {s(self.latency_max_s)}; "
            f"wall {self.wall_s:.1f} s",
            f"  sessions shown their place in line: {self.sessions_shown_queue_position}; model loads during the "
            f"test: {'-' if self.model_loads is None else self.model_loads}; peak memory "
            f"{'-' if self.peak_rss_mb is None else f'{self.peak_rss_mb:.0f} MB'} (VmHWM of this process)",
        ]
        lines += [f"  error: {m}" for m in self.error_messages[:10]]
        return "\n".join(lines)


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(target: str, max_new_tokens: int):
    """Launch the app in this process on a free loopback port; returns (url, demo). ``demo.close()`` stops it."""
    from app import build_demo

    demo = build_demo(target=target, max_new_tokens=max_new_tokens)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return f"http://127.0.0.1:{port}/", demo


def check_loopback(url: str) -> None:
    """Refuse any URL that is not on this machine's loopback interface."""
    if urlparse(url).hostname not in LOOPBACK:
        raise SystemExit(f"error: the load test only runs against loopback (127.0.0.1), not {url}")


def pane_text(markup) -> str:
    """The plain text of a token pane's HTML (the tokens' text, unescaped)."""
    if not isinstance(markup, str):
        return ""
    return html.unescape("".join(re.sub(r"<[^>]+>", "", t) for t in _TOKEN.findall(markup)))


def _request_args(prompt: str, target: str, max_new_tokens: int) -> tuple:
    # the order of app.build_demo's inputs (the session history is server-side state, not an API input)
    return (prompt, target, "ngram", "", 0, 4, "fixed", 0.0, 1.0, 0, 0, max_new_tokens, "", True)


def one_request(client, prompt: str, target: str, max_new_tokens: int, timeout: float) -> dict:
    """Submit one generation and wait for it: {ok, latency, spec, base, status, saw_queue, error}."""
    started = time.monotonic()
    job = client.submit(*_request_args(prompt, target, max_new_tokens), api_name="/generate")
    try:
        job.result(timeout=timeout)
    except TimeoutError:
        job.cancel()
        return {"ok": False, "timeout": True, "latency": time.monotonic() - started,
                "error": f"no result within {timeout:.0f} s"}
    except Exception as error:  # noqa: BLE001 - reported, not raised: one failure must not end the test
        return {"ok": False, "timeout": False, "latency": time.monotonic() - started,
                "error": f"{type(error).__name__}: {error}"}
    latency = time.monotonic() - started
    last: dict[int, object] = {}
    statuses: list[str] = []
    for output in job.outputs():
        for i, value in enumerate(output):
            if isinstance(value, dict) and value.get("__type__") == "update":
                continue
            last[i] = value
            if i == 4 and isinstance(value, str):
                statuses.append(value)
    status = str(last.get(4, ""))
    ok = "status-done" in status
    return {"ok": ok, "timeout": False, "latency": latency, "spec": pane_text(last.get(0)),
            "base": pane_text(last.get(1)), "status": status, "saw_queue": any("ahead of yours" in s for s in statuses),
            "error": None if ok else re.sub(r"<[^>]+>", "", status).strip() or "no final status"}


def _count_loads():
    """Count model loads in this process (the server's, when it runs here); returns (counter, undo)."""
    from specviz import models

    counter = [0]
    real = models._load_uncached

    def counting(*args, **kwargs):
        counter[0] += 1
        return real(*args, **kwargs)

    models._load_uncached = counting

    def undo():
        models._load_uncached = real

    return counter, undo


def run_load_test(url: str, target: str, *, sessions: int = 4, requests: int = 2, max_new_tokens: int = 16,
                  timeout: float = 120.0, in_process: bool = True) -> Report:
    """Run the reference and the load phase against ``url`` (see the module docstring)."""
    from gradio_client import Client

    check_loopback(url)
    report = Report(url=url, sessions=sessions, requests_per_session=requests, max_new_tokens=max_new_tokens)
    prompts = [PROMPTS[i % len(PROMPTS)] + ("" if i < len(PROMPTS) else f" (session {i})") for i in range(sessions)]

    reference = {}
    solo = Client(url, verbose=False)
    for prompt in prompts:  # one at a time: the outputs the load phase must reproduce, session by session
        result = one_request(solo, prompt, target, max_new_tokens, timeout)
        if not result["ok"]:
            report.errors += 1
            report.error_messages.append(f"reference run failed: {result['error']}")
            return report
        reference[prompt] = (result["spec"], result["base"])

    clients = [Client(url, verbose=False) for _ in range(sessions)]
    results: list[list[dict]] = [[] for _ in range(sessions)]
    start_line = threading.Barrier(sessions)

    def session(i: int) -> None:
        start_line.wait()
        for _ in range(requests):
            results[i].append(one_request(clients[i], prompts[i], target, max_new_tokens, timeout))

    counter, undo = _count_loads() if in_process else (None, lambda: None)
    started = time.monotonic()
    threads = [threading.Thread(target=session, args=(i,), daemon=True) for i in range(sessions)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout * requests + 30)
    finally:
        undo()
    report.wall_s = time.monotonic() - started
    report.model_loads = counter[0] if counter is not None else None

    latencies, outputs = [], set()
    for i, rows in enumerate(results):
        rows = rows + [{"ok": False, "timeout": True, "latency": timeout, "error": "session did not finish"}] * (
            requests - len(rows))
        report.sessions_shown_queue_position += any(r.get("saw_queue") for r in rows)
        for row in rows:
            latencies.append(row["latency"])
            if not row["ok"]:
                report.errors += 1
                report.timeouts += bool(row.get("timeout"))
                report.error_messages.append(f"session {i}: {row['error']}")
                continue
            report.completions += 1
            outputs.add(row["base"])
            if (row["spec"], row["base"]) != reference[prompts[i]]:
                report.mismatches += 1
                report.error_messages.append(f"session {i}: output differs from its prompt's reference")
    report.distinct_outputs = len(outputs)
    if latencies:
        ordered = sorted(latencies)
        report.latency_p50_s = statistics.median(ordered)
        report.latency_p95_s = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
        report.latency_max_s = ordered[-1]
    if in_process:
        report.peak_rss_mb = peak_rss_mb()
    for client in [solo, *clients]:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the load test from the command line; exit status 0 when everything completed with its own output."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4, help="concurrent sessions K (1..32, default 4)")
    parser.add_argument("--requests", type=int, default=2, help="requests per session (1..20, default 2)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="per request (1..256, default 16)")
    parser.add_argument("--target", default="embedded", help="model spec (default: the embedded model)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    parser.add_argument("--url", help="an app already running on loopback (default: start one in this process)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads of the in-process server")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    for name, low, high in (("sessions", 1, 32), ("requests", 1, 20), ("max_new_tokens", 1, 256)):
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name.replace('_', '-')} must be in {low}..{high}")
    if not 1 <= args.timeout <= 3600:
        parser.error("--timeout must be in 1..3600 seconds")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    demo = None
    if args.url:
        check_loopback(args.url)
        url = args.url
    else:
        url, demo = serve(args.target, args.max_new_tokens)
    try:
        report = run_load_test(url, args.target, sessions=args.sessions, requests=args.requests,
                               max_new_tokens=args.max_new_tokens, timeout=args.timeout, in_process=demo is not None)
    finally:
        if demo is not None:
            demo.close()
    print(json.dumps(asdict(report)) if args.json else report.summary(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
