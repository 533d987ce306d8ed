"""A bounded load test of the web app, on loopback only: K concurrent sessions through the Gradio client API, or
a classroom of V visitors stepping through a recorded walkthrough while live runs compute.

    python scripts/loadtest.py --sessions 4 --requests 2 --max-new-tokens 16            # the embedded model
    python scripts/loadtest.py --target /path/to/tiny-model --sessions 4 --json          # a local folder
    python scripts/loadtest.py --classroom --visitors 20 --steps 20                      # a classroom

Starts the app in this process on a free 127.0.0.1 port (or uses ``--url``, which must be a loopback address),
then:

1. reference: each session's prompt is generated once, alone (this also loads the model);
2. load: K gradio_client sessions (one ``Client`` each, so one session hash each) send R requests apiece, all
   sessions at once, each request bounded by ``--timeout`` seconds;

and reports completions, errors, latency p50/p95 (submit to final result, waiting for the device included),
peak memory (this process's VmHWM: the server's when it runs here), how many sessions were shown their place
in line, model loads during the test, and whether every session saw its own output (greedy: equal to the
reference of its prompt; a different prompt per session, so a mix-up shows). Exit status 0 when every request
completed with its own output, 1 otherwise.

The classroom test (``--classroom``) warms the model with a short live run, then keeps Live-tab generations of
``--live-tokens`` running back to back; once the first one is decoding, V visitors at once open the recorded
walkthrough (the walkthrough menu's event) and press Next ``--steps`` times, ``--think`` seconds apart, each in its
own browser session (the page's own queue protocol: join, then the session's event stream). It reports the step
response times (request to result, p50/p95/max), whether every visitor saw its own next step, and how much of the
stepping phase a live run was computing. Exit status 0 when every step arrived, in order, with p95 under 1 s.
Nothing leaves 127.0.0.1.
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
    from specviz.runtime import models


    counter = [0]
    real = models.loading._load_uncached

    def counting(*args, **kwargs):
        counter[0] += 1
        return real(*args, **kwargs)

    models.loading._load_uncached = counting

    def undo():
        models.loading._load_uncached = real

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


# ------------------------------------------------------------------------------------------------- a classroom


@dataclass
class ClassroomReport:
    """The classroom load test: V visitors step through a recorded walkthrough while live runs compute."""

    url: str
    visitors: int
    steps: int
    walkthrough: str
    think_s: float
    budget_s: float = 1.0  # the 95th percentile of a step's response must stay under this
    opened: int = 0
    steps_done: int = 0
    errors: int = 0
    wrong_steps: int = 0  # a response showed another step than this visitor's next one
    open_p95_s: float | None = None
    step_p50_s: float | None = None
    step_p95_s: float | None = None
    step_max_s: float | None = None
    live_runs_completed: int = 0
    live_busy_fraction: float = 0.0  # of the stepping phase, the part during which a live run was in flight
    live_run_p50_s: float | None = None  # a whole live run's response time: what a step queued behind one would wait
    wall_s: float = 0.0
    error_messages: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every visitor opened the run and made every step, in order, fast enough, with a live run computing."""
        return (self.errors == 0 and self.wrong_steps == 0 and self.steps_done == self.visitors * self.steps
                and self.step_p95_s is not None and self.step_p95_s < self.budget_s and self.live_busy_fraction > 0.9)

    def summary(self) -> str:
        """A few human-readable lines."""
        def s(value):
            return "-" if value is None else f"{value:.3f} s"

        lines = [
            f"classroom load test on {self.url}: {self.visitors} visitors x {self.steps} steps of the recorded "
            f"walkthrough {self.walkthrough!r} (think time {self.think_s:.2f} s), live runs computing meanwhile",
            f"  opened {self.opened}/{self.visitors} (p95 {s(self.open_p95_s)}), steps {self.steps_done}, errors "
            f"{self.errors}, steps out of order {self.wrong_steps}",
            f"  step response p50 {s(self.step_p50_s)}, p95 {s(self.step_p95_s)}, max {s(self.step_max_s)} "
            f"(budget: p95 < {self.budget_s:.1f} s); wall {self.wall_s:.1f} s",
            f"  live runs: {self.live_runs_completed} completed (p50 {s(self.live_run_p50_s)} each), in flight "
            f"{self.live_busy_fraction:.0%} of the stepping phase",
        ]
        lines += [f"  error: {m}" for m in self.error_messages[:10]]
        return "\n".join(lines)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def event_ids(url: str) -> dict[str, int]:
    """The fn_index of the Classroom's events a visitor's browser calls: "open" (the walkthrough menu) and "next"
    (the Next button), found in the page's /config by the components' elem_id."""
    import httpx

    config = httpx.get(url.rstrip("/") + "/config", timeout=30).json()
    ids = {c["props"].get("elem_id"): c["id"] for c in config["components"] if c.get("props", {}).get("elem_id")}
    wanted = {"open": (ids["classroom-walkthrough"], "input"), "next": (ids["classroom-next"], "click")}
    found = {}
    for dependency in config["dependencies"]:
        for name, target in wanted.items():
            if list(target) in [list(t) for t in dependency["targets"]]:
                found[name] = (dependency["id"], dependency.get("queue") is not False)
    return found


class Visitor:
    """One browser session, speaking the page's own queue protocol (join, then read the session's event stream), so
    it reaches the private events the page uses; the session state (its stepper) lives on the server."""

    def __init__(self, url: str, timeout: float) -> None:
        import uuid

        import httpx

        self.base = url.rstrip("/") + "/gradio_api"
        self.session = uuid.uuid4().hex[:12]
        self.http = httpx.Client(timeout=timeout)

    def call(self, fn: tuple[int, bool], data: list) -> tuple[float, list]:
        """Run one event (``fn``: its fn_index and whether it is queued, as :func:`event_ids` gives it); returns
        (seconds from the request to the result, the outputs). Raises RuntimeError."""
        fn_index, queued = fn
        started = time.monotonic()
        body = {"data": data, "fn_index": fn_index, "session_hash": self.session, "event_data": None,
                "trigger_id": None}
        if not queued:  # an event outside the queue: one plain request, as the page sends it
            answer = self.http.post(f"{self.base}/run/predict", json=body)
            if answer.status_code != 200:
                raise RuntimeError(f"event failed: HTTP {answer.status_code} {answer.text[:200]}")
            return time.monotonic() - started, answer.json()["data"]
        joined = self.http.post(f"{self.base}/queue/join", json=body)
        joined.raise_for_status()
        event_id = joined.json()["event_id"]
        with self.http.stream("GET", f"{self.base}/queue/data", params={"session_hash": self.session}) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") != event_id or message.get("msg") != "process_completed":
                    continue
                if not message.get("success"):
                    raise RuntimeError(f"event failed: {str(message.get('output'))[:200]}")
                return time.monotonic() - started, message["output"]["data"]
        raise RuntimeError("the event stream ended before the result")

    def close(self) -> None:
        self.http.close()


_STEP = re.compile(r"step (\d+) / (\d+)")


def _shown_step(outputs: list) -> tuple[int, int] | None:
    """(step, of) in a response's progress line, or None."""
    for value in outputs:
        match = _STEP.search(value) if isinstance(value, str) else None
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


def _visit(url: str, fns: dict, walkthrough: str, steps: int, think: float, timeout: float, start, out: dict):
    """One visitor: open the walkthrough, then press Next ``steps`` times, ``think`` seconds apart."""
    visitor = Visitor(url, timeout)
    try:
        start.wait()
        seconds, outputs = visitor.call(fns["open"], [walkthrough])
        out["open"] = seconds
        shown = _shown_step(outputs)
        for i in range(steps):
            time.sleep(think)
            seconds, outputs = visitor.call(fns["next"], [None])
            out["steps"].append(seconds)
            now = _shown_step(outputs)
            if shown is None or now is None or now[0] != min(shown[0] + 1, shown[1]):
                out["wrong"] += 1
            shown = now
    except Exception as error:  # noqa: BLE001 - reported, not raised: one visitor's failure must not end the test
        out["error"] = f"{type(error).__name__}: {error}"
    finally:
        visitor.close()


def _live_runs(url: str, target: str, tokens: int, timeout: float, stop, runs: list) -> None:
    """Live-tab generations, one after another, until ``stop`` is set: (start, end, ok) each."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    try:
        while not stop.is_set():
            started = time.monotonic()
            result = one_request(client, PROMPTS[1], target, tokens, timeout)
            runs.append((started, time.monotonic(), result["ok"]))
    finally:
        client.close()


def _busy_fraction(runs: list, begin: float, end: float) -> float:
    covered = sum(max(0.0, min(e, end) - max(s, begin)) for s, e, _ in runs)
    return covered / (end - begin) if end > begin else 0.0


def run_classroom_test(url: str, target: str, *, visitors: int = 20, steps: int = 20,
                       walkthrough: str = "poor-drafter", think: float = 0.3, live_tokens: int = 128,
                       timeout: float = 120.0) -> ClassroomReport:
    """Warm the model with a short live run, start live runs (one at a time, back to back), and once the first is
    computing let ``visitors`` sessions open the recorded walkthrough and step through it at once."""
    from gradio_client import Client

    check_loopback(url)
    report = ClassroomReport(url=url, visitors=visitors, steps=steps, walkthrough=walkthrough, think_s=think)
    warm = Client(url, verbose=False)
    if not one_request(warm, PROMPTS[0], target, 4, timeout)["ok"]:  # loads the model before anything is timed
        report.errors += 1
        report.error_messages.append("the warm-up live run failed")
        return report
    warm.close()
    fns = event_ids(url)
    stop, runs = threading.Event(), []
    live = threading.Thread(target=_live_runs, args=(url, target, live_tokens, timeout, stop, runs), daemon=True)
    live.start()
    time.sleep(2.0)  # the first live run is past its prompt and decoding
    results = [{"open": None, "steps": [], "wrong": 0, "error": None} for _ in range(visitors)]
    start = threading.Barrier(visitors)
    threads = [threading.Thread(target=_visit, args=(url, fns, walkthrough, steps, think, timeout, start, r),
                                daemon=True) for r in results]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout * (steps + 1))
    ended = time.monotonic()
    stop.set()
    live.join(timeout)
    _fill_classroom_report(report, results, runs, began, ended)
    return report


def _fill_classroom_report(report: ClassroomReport, results: list[dict], runs: list, began: float,
                           ended: float) -> None:
    latencies = [s for r in results for s in r["steps"]]
    opens = [r["open"] for r in results if r["open"] is not None]
    report.opened, report.steps_done = len(opens), len(latencies)
    report.wrong_steps = sum(r["wrong"] for r in results)
    for i, r in enumerate(results):
        if r["error"]:
            report.errors += 1
            report.error_messages.append(f"visitor {i}: {r['error']}")
    report.open_p95_s = _percentile(opens, 0.95)
    report.step_p50_s = statistics.median(latencies) if latencies else None
    report.step_p95_s = _percentile(latencies, 0.95)
    report.step_max_s = max(latencies) if latencies else None
    report.live_runs_completed = sum(1 for _, _, ok in runs if ok)
    report.live_busy_fraction = _busy_fraction(runs, began, ended)
    durations = [e - s for s, e, ok in runs if ok]
    report.live_run_p50_s = statistics.median(durations) if durations else None
    report.wall_s = ended - began


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4, help="concurrent sessions K (1..32, default 4)")
    parser.add_argument("--requests", type=int, default=2, help="requests per session (1..20, default 2)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="per request (1..256, default 16)")
    parser.add_argument("--target", default="embedded", help="model spec (default: the embedded model)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    parser.add_argument("--url", help="an app already running on loopback (default: start one in this process)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads of the in-process server")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    room = parser.add_argument_group("classroom", "V visitors step through a recorded walkthrough while live runs "
                                                  "compute (--classroom)")
    room.add_argument("--classroom", action="store_true", help="run the classroom load test instead")
    room.add_argument("--visitors", type=int, default=20, help="visitors V (1..64, default 20)")
    room.add_argument("--steps", type=int, default=20, help="Next presses per visitor (1..200, default 20)")
    room.add_argument("--walkthrough", default="poor-drafter", help="the recorded walkthrough (default poor-drafter)")
    room.add_argument("--think", type=float, default=0.3, help="seconds between a visitor's steps (default 0.3)")
    room.add_argument("--live-tokens", type=int, default=128, help="new tokens per live run (default 128)")
    return parser


def _check(parser: argparse.ArgumentParser, args) -> None:
    for name, low, high in (("sessions", 1, 32), ("requests", 1, 20), ("max_new_tokens", 1, 256),
                            ("visitors", 1, 64), ("steps", 1, 200), ("live_tokens", 1, 1024)):
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name.replace('_', '-')} must be in {low}..{high}")
    if not 1 <= args.timeout <= 3600:
        parser.error("--timeout must be in 1..3600 seconds")
    if not 0 <= args.think <= 60:
        parser.error("--think must be in 0..60 seconds")


def main(argv: list[str] | None = None) -> int:
    """Run the load test from the command line; exit status 0 when everything completed (with its own output; in
    the classroom test: in order, the 95th percentile of a step's response under 1 s)."""
    parser = _parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    demo = None
    if args.url:
        check_loopback(args.url)
        url = args.url
    else:
        url, demo = serve(args.target, max(args.max_new_tokens, args.live_tokens))
    try:
        if args.classroom:
            report = run_classroom_test(url, args.target, visitors=args.visitors, steps=args.steps,
                                        walkthrough=args.walkthrough, think=args.think, live_tokens=args.live_tokens,
                                        timeout=args.timeout)
        else:
            report = run_load_test(url, args.target, sessions=args.sessions, requests=args.requests,
                                   max_new_tokens=args.max_new_tokens, timeout=args.timeout,
                                   in_process=demo is not None)
    finally:
        if demo is not None:
            demo.close()
    print(json.dumps(asdict(report)) if args.json else report.summary(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
