"""Our standard decoding and n-gram drafter against llama.cpp on the same GGUF file and the same threads.

llama.cpp is what a CPU user would pick instead. This script measures, on the embedded GGUF
(SmolLM2-135M-Instruct Q4_1, the file ``specviz.runtime.models.embedded_gguf_path`` finds):

    llama-bench    tokens/s of generation (tg64) and prompt processing (pp64) at --threads N
    llama-lookup   llama.cpp's n-gram lookup speculative decoding (greedy, --draft k) on prompts of the suite:
                   its tokens/s, its acceptance rate, and its speedup over the same binary without drafting
    ours           standard decoding tokens/s in each weight format (float32, int8, int4) and the n-gram
                   drafter's speedup over standard decoding on the same prompts

interleaved (one llama.cpp measurement, then ours, for ``--rounds`` rounds; medians), and prints a table of
tokens/s with the ratio llama.cpp / ours per format, and the two lookup speedups side by side. The figures, the
versions, the threads and the load average go to ``--json`` (default ``<cache>/llama.cpp/compare-t<N>.json``).

llama.cpp is built from its source, as vendored in the llama-cpp-python sdist, only when asked::

    python scripts/llama_cpp_compare.py --build --threads 2     # pip download + cmake (several minutes, once)
    python scripts/llama_cpp_compare.py --threads 1             # reuses the build in <cache>/llama.cpp/

Never at test time: tests/test_llama_cpp_compare.py checks the parsing on captured output. Docs: docs/weights.md
("Against llama.cpp"), docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.16"
TOOLS = ("llama-bench", "llama-lookup")
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=OFF",
               "-DLLAMA_BUILD_TESTS=OFF", "-DBUILD_SHARED_LIBS=OFF")


def _log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, flush=True)


# --- the build ---------------------------------------------------------------------------------------------------


def llama_home() -> Path:
    """``<specviz cache>/llama.cpp``: the sdist, its extracted source and the build (not created here)."""
    from specviz.runtime.models import cache_dir

    return cache_dir() / "llama.cpp"


def tool_paths(home: Path, version: str = SDIST_VERSION) -> dict[str, Path]:
    """Where ``--build`` puts each tool of :data:`TOOLS` for sdist ``version`` under ``home``."""
    return {tool: home / f"build-{version}" / "bin" / tool for tool in TOOLS}


def missing_build_message(home: Path, version: str = SDIST_VERSION) -> str | None:
    """None when every tool is built under ``home``; else one sentence saying how to build them."""
    missing = [tool for tool, path in tool_paths(home, version).items() if not path.is_file()]
    if not missing:
        return None
    return (f"llama.cpp is not built in {home} (no {', '.join(missing)}): run "
            f"`python scripts/llama_cpp_compare.py --build` once (pip download of the {SDIST_PACKAGE} "
            f"{version} sdist and a cmake build, several minutes).")


def build(home: Path, version: str = SDIST_VERSION, jobs: int = 2) -> dict[str, Path]:
    """Download the ``llama-cpp-python==version`` sdist with pip, extract its vendored llama.cpp and build
    :data:`TOOLS` with cmake (``jobs`` parallel jobs), reusing whatever of that is already under ``home``.

    Returns the tools' paths. Raises RuntimeError (one sentence) when pip, tar or cmake fails."""
    sdist_dir = home / "sdist"
    sdist_dir.mkdir(parents=True, exist_ok=True)
    archives = sorted(sdist_dir.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not archives:
        _log(f"pip download {SDIST_PACKAGE}=={version} (sdist)")
        _run([sys.executable, "-m", "pip", "download", f"{SDIST_PACKAGE}=={version}", "--no-deps",
              "--no-binary", ":all:", "-d", str(sdist_dir)], "pip download")
        archives = sorted(sdist_dir.glob(f"llama_cpp_python-{version}.tar.gz"))
        if not archives:
            raise RuntimeError(f"pip download left no llama_cpp_python-{version}.tar.gz in {sdist_dir}.")
    source = home / f"src-{version}"
    if not (source / "CMakeLists.txt").is_file():
        _log(f"extracting the vendored llama.cpp of {archives[0].name}")
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        scratch = home / f"src-{version}.partial"
        shutil.rmtree(scratch, ignore_errors=True)
        with tarfile.open(archives[0]) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(prefix) and (m.isfile() or m.isdir())]
            for member in members:
                member.name = member.name[len(prefix):]
            archive.extractall(scratch, members=[m for m in members if m.name], filter="data")
        if not (scratch / "CMakeLists.txt").is_file():
            raise RuntimeError(f"{archives[0].name} holds no vendor/llama.cpp/CMakeLists.txt.")
        shutil.rmtree(source, ignore_errors=True)
        scratch.rename(source)
    out = home / f"build-{version}"
    if not (out / "CMakeCache.txt").is_file():
        _log("cmake configure")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(["cmake", "-S", str(source), "-B", str(out), *generator, *CMAKE_FLAGS], "cmake configure")
    _log(f"cmake build {' '.join(TOOLS)} with {jobs} jobs (several minutes)")
    _run(["cmake", "--build", str(out), "--target", *TOOLS, "-j", str(jobs)], "cmake build")
    message = missing_build_message(home, version)
    if message:
        raise RuntimeError(f"The build finished without its tools: {message}")
    return tool_paths(home, version)


def _run(command: list[str], what: str) -> str:
    """Run ``command``; its stdout, or RuntimeError naming ``what`` and the last line of its error output."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {lines[-1]}")
    return done.stdout


# --- llama.cpp's output ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LookupFigures:
    """What one llama-lookup run prints: ``decoded`` tokens in ``seconds`` (its decode phase, after the prompt),
    ``tokens_per_s`` = decoded / seconds, ``draft`` (the --draft k asked), ``drafted`` and ``accepted`` tokens, and
    ``acceptance_rate`` = accepted / drafted in [0, 1] (None when nothing was drafted)."""

    decoded: int
    seconds: float
    tokens_per_s: float
    draft: int
    drafted: int
    accepted: int

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


_LOOKUP_FIELDS = {
    "decoded": re.compile(r"decoded\s+(\d+)\s+tokens in\s+([\d.]+)\s+seconds, speed:\s+([\d.]+)\s+t/s"),
    "draft": re.compile(r"n_draft\s+=\s+(\d+)"),
    "drafted": re.compile(r"n_drafted\s+=\s+(\d+)"),
    "accepted": re.compile(r"n_accept\s+=\s+(\d+)"),
}


def parse_lookup(text: str) -> LookupFigures:
    """The figures of llama-lookup's closing report in ``text`` (its stderr). Raises ValueError (one sentence)
    naming the first line it could not find."""
    found = {}
    for name, pattern in _LOOKUP_FIELDS.items():
        match = pattern.search(text)
        if match is None:
            raise ValueError(f"llama-lookup's output has no {name!r} line ({pattern.pattern!r}).")
        found[name] = match.groups()
    decoded, seconds, rate = found["decoded"]
    return LookupFigures(decoded=int(decoded), seconds=float(seconds), tokens_per_s=float(rate),
                         draft=int(found["draft"][0]), drafted=int(found["drafted"][0]),
                         accepted=int(found["accepted"][0]))


_CANDIDATE = re.compile(r" - draft candidate: token=\d+\n")


def same_reply(drafted: str, plain: str) -> bool:
    """Whether llama-lookup's text with drafting (its stdout, with the draft-candidate lines it interleaves
    removed) and without it say the same; one may run a token or more past the other (the lookup loop stops after
    the pass that crosses -n), so the shorter must be a prefix of the longer."""
    a, b = _CANDIDATE.sub("", drafted).rstrip(), _CANDIDATE.sub("", plain).rstrip()
    return a.startswith(b) or b.startswith(a)


def parse_bench(text: str) -> dict:
    """llama-bench's ``-o json`` output (a JSON list, one object per test) as ``{"pp64": {...}, "tg64": {...}}``:
    per test ``tokens_per_s`` (the median of its repetitions' tokens/s: on a shared machine one stalled repetition
    drags the mean), ``mean`` and ``stddev`` (llama-bench's own), ``samples`` (tokens/s of each repetition) and
    ``threads``, plus ``"build"`` (llama.cpp's commit and build number, the CPU it saw). Raises
    ValueError (one sentence) when ``text`` holds no such list."""
    start = text.find("[")
    try:
        rows = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        rows = None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) and "avg_ts" in r for r in rows):
        raise ValueError("llama-bench's output is not its JSON list of tests (run it with -o json).")
    out: dict = {}
    for row in rows:
        name = f"pp{row['n_prompt']}" if row.get("n_gen", 0) == 0 else f"tg{row['n_gen']}"
        samples = [float(x) for x in row.get("samples_ts", [])]
        out[name] = {"tokens_per_s": statistics.median(samples) if samples else float(row["avg_ts"]),
                     "mean": float(row["avg_ts"]), "stddev": float(row.get("stddev_ts", 0.0)), "samples": samples,
                     "threads": row.get("n_threads")}
    first = rows[0]
    out["build"] = {"commit": first.get("build_commit"), "number": first.get("build_number"),
                    "cpu": first.get("cpu_info"), "model_type": first.get("model_type")}
    return out


def run_llama_bench(bench: Path, gguf: Path, threads: int, reps: int, tokens: int) -> dict:
    """llama-bench's pp<tokens> and tg<tokens> on ``gguf`` at ``threads`` threads, ``reps`` repetitions
    (:func:`parse_bench`'s dict). Raises RuntimeError when it fails."""
    return parse_bench(_run([str(bench), "-m", str(gguf), "-p", str(tokens), "-n", str(tokens), "-t", str(threads),
                             "-r", str(reps), "-o", "json"], "llama-bench"))


def run_llama_lookup(lookup: Path, gguf: Path, prompt_file: Path, threads: int, draft: int,
                     new_tokens: int) -> tuple[LookupFigures, str]:
    """llama-lookup on the text in ``prompt_file`` (the chat template already applied), greedy, at most
    ``draft`` tokens drafted per pass (0: standard decoding through the same program), about ``new_tokens``
    tokens. Returns its figures and its text (stdout: the prompt and the reply). Raises RuntimeError when it fails,
    ValueError when its report cannot be read."""
    done = subprocess.run([str(lookup), "-m", str(gguf), "-f", str(prompt_file), "-n", str(new_tokens),
                           "-t", str(threads), "-tb", str(threads), "--draft-max", str(draft), "--temp", "0",
                           "--top-k", "1", "-c", "2048"], capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise RuntimeError(f"llama-lookup failed (exit {done.returncode}): {lines[-1]}")
    return parse_lookup(done.stderr + done.stdout), done.stdout


# --- ours --------------------------------------------------------------------------------------------------------


def suite_prompts(ids: list[str], path: Path = ROOT / "assets" / "suite.jsonl") -> dict[str, str]:
    """The prompts of the suite with these ids, in order. Raises ValueError (one sentence) for an unknown id."""
    rows = {r["id"]: r["prompt"] for r in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}
    unknown = [i for i in ids if i not in rows]
    if unknown:
        raise ValueError(f"{path.name} has no prompt {unknown[0]!r} (ids look like {', '.join(list(rows)[:3])}).")
    return {i: rows[i] for i in ids}


def our_run(target, prompt_ids: list[int], new_tokens: int, k: int, ngram: bool):
    """One greedy run of ours (standard decoding, or the n-gram drafter at draft length ``k``): its RunStats and
    the generated ids."""
    from specviz.core.engine import GenerationConfig, speculative_generate, standard_generate
    from specviz.drafters.registry import make_drafter
    from specviz.measure.run_stats import RunStats

    config = GenerationConfig(max_new_tokens=new_tokens, k=k)
    events = (speculative_generate(target, make_drafter("ngram", target), prompt_ids, config) if ngram
              else standard_generate(target, prompt_ids, config))
    stats, ids = RunStats(), []
    for event in events:
        stats.add(event)
        ids.extend(event.emitted_ids)
    return stats, ids


def load_ours(formats: list[str]) -> dict:
    """The embedded target in each of ``formats`` (``specviz.runtime.weights.with_weights``), after the threads
    are set."""
    from specviz.runtime.models import load_model
    from specviz.runtime.weights import with_weights

    base = load_model("embedded", device="cpu", dtype="float32", progress=_log)
    return {fmt: with_weights(base, fmt, progress=_log) for fmt in formats}


# --- the interleaved rounds ------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Every round's figures by name (tokens/s, speedups, acceptance rates), and their medians."""

    values: dict

    def add(self, name: str, value) -> None:
        """Append one round's ``value`` to ``name`` (None, a figure not defined this round, is left out)."""
        if value is not None:
            self.values.setdefault(name, []).append(value)

    def medians(self) -> dict:
        """The median of each name's values over the rounds."""
        return {name: statistics.median(v) for name, v in self.values.items()}


def one_round(args, tools: dict, gguf: Path, ours: dict, prompts: dict, samples: Samples) -> None:
    """One round: llama-bench, then our standard decoding per format; then per prompt llama-lookup (draft k and
    0), then our n-gram drafter and standard decoding in ``args.lookup_weights``."""
    bench = run_llama_bench(tools["llama-bench"], gguf, args.threads, args.reps, args.new_tokens)
    for name in (f"pp{args.new_tokens}", f"tg{args.new_tokens}"):
        samples.add(f"llama.{name}", bench[name]["tokens_per_s"])
    samples.values["llama.build"] = [bench["build"]]
    standard_ids = prompts["ids"][args.standard_prompt]
    for fmt, target in ours.items():
        samples.add(f"ours.standard.{fmt}", our_run(target, standard_ids, args.new_tokens, 1, False)[0]
                    .decode_tokens_per_s)
    for pid, files in prompts["files"].items():
        drafted, drafted_text = run_llama_lookup(tools["llama-lookup"], gguf, files, args.threads, args.k,
                                                 args.new_tokens)
        plain, plain_text = run_llama_lookup(tools["llama-lookup"], gguf, files, args.threads, 0, args.new_tokens)
        samples.add(f"llama.lookup.{pid}.same_reply", int(same_reply(drafted_text, plain_text)))
        samples.add(f"llama.lookup.{pid}.tokens_per_s", drafted.tokens_per_s)
        samples.add(f"llama.lookup.{pid}.standard_tokens_per_s", plain.tokens_per_s)
        samples.add(f"llama.lookup.{pid}.speedup", drafted.tokens_per_s / plain.tokens_per_s)
        samples.add(f"llama.lookup.{pid}.acceptance_rate", drafted.acceptance_rate)
        samples.add(f"llama.lookup.{pid}.decoded", drafted.decoded)
        target = ours[args.lookup_weights]
        spec, spec_ids = our_run(target, prompts["ids"][pid], args.new_tokens, args.k, True)
        base, base_ids = our_run(target, prompts["ids"][pid], args.new_tokens, args.k, False)
        samples.add(f"ours.ngram.{pid}.ids_identical", int(spec_ids == base_ids))
        samples.add(f"ours.ngram.{pid}.tokens_per_s", spec.decode_tokens_per_s)
        samples.add(f"ours.ngram.{pid}.standard_tokens_per_s", base.decode_tokens_per_s)
        samples.add(f"ours.ngram.{pid}.speedup", _speedup(spec, base))
        samples.add(f"ours.ngram.{pid}.acceptance_rate", spec.acceptance_rate)
        samples.add(f"ours.ngram.{pid}.decoded", spec.generated)


def _speedup(spec, base) -> float | None:
    """Our decode speedup of ``spec`` over ``base`` (RunStats), from the one place the project derives it."""
    from specviz.core.counters import speedup

    return speedup(spec, base)


def prepare_prompts(args, ours: dict, home: Path) -> dict:
    """Each chosen suite prompt as our ids (chat template applied) and as a text file for llama-lookup (the same
    ids decoded with their special tokens, so both programs read the same conversation)."""
    from specviz.runtime.models import fit_prompt

    tokenizer = next(iter(ours.values())).tokenizer
    ids, files = {}, {}
    chosen = list(dict.fromkeys([args.standard_prompt, *args.lookup_prompts]))
    for pid, text in suite_prompts(chosen).items():
        ids[pid] = list(fit_prompt(tokenizer, text, None).ids)
        files[pid] = home / "prompts" / f"{pid}.txt"
        files[pid].parent.mkdir(parents=True, exist_ok=True)
        files[pid].write_text(tokenizer.decode(ids[pid], skip_special_tokens=False))
    return {"ids": ids, "files": {pid: files[pid] for pid in args.lookup_prompts}}


# --- the report --------------------------------------------------------------------------------------------------


def ratios(medians: dict, formats: list[str], tokens: int) -> dict[str, float | None]:
    """Per format: llama-bench's tg<tokens> tokens/s over our standard decoding's (above 1: llama.cpp is faster;
    None where either is missing)."""
    tg = medians.get(f"llama.tg{tokens}")
    return {fmt: tg / medians[f"ours.standard.{fmt}"] if tg and medians.get(f"ours.standard.{fmt}") else None
            for fmt in formats}


def table(medians: dict, formats: list[str], lookup_prompts: list[str], tokens: int, weights: str) -> str:
    """The printed table: llama-bench's tg/pp tokens/s, our standard decoding per format with the ratio
    llama.cpp tg / ours, then per prompt both lookup speedups side by side."""
    def f(value, spec=".1f"):
        return "-" if value is None else format(value, spec)

    tg = medians.get(f"llama.tg{tokens}")
    lines = [f"llama.cpp llama-bench: tg{tokens} {f(tg)} tok/s, pp{tokens} {f(medians.get(f'llama.pp{tokens}'))} tok/s",
             "", f"{'ours, standard decoding':<28}{'tok/s':>9}{'llama.cpp / ours':>19}"]
    for fmt, ratio in ratios(medians, formats, tokens).items():
        lines.append(f"{fmt:<28}{f(medians.get(f'ours.standard.{fmt}')):>9}{f(ratio, '.2f') + 'x':>19}")
    lines += ["", f"n-gram lookup, greedy, k = draft max ({weights} weights for ours):",
              f"{'prompt':<18}{'llama tok/s':>12}{'speedup':>9}{'accept':>8}{'ours tok/s':>12}{'speedup':>9}"
              f"{'accept':>8}{'plain llama/ours':>18}"]
    for pid in lookup_prompts:
        got = {side: {key: medians.get(f"{side}.{pid}.{key}") for key in
                      ("tokens_per_s", "speedup", "acceptance_rate", "standard_tokens_per_s")}
               for side in ("llama.lookup", "ours.ngram")}
        llama, ours = got["llama.lookup"], got["ours.ngram"]
        plain = (llama["standard_tokens_per_s"] / ours["standard_tokens_per_s"]
                 if llama["standard_tokens_per_s"] and ours["standard_tokens_per_s"] else None)
        lines.append(f"{pid:<18}{f(llama['tokens_per_s']):>12}{f(llama['speedup'], '.2f') + 'x':>9}"
                     f"{f(llama['acceptance_rate'], '.2f'):>8}{f(ours['tokens_per_s']):>12}"
                     f"{f(ours['speedup'], '.2f') + 'x':>9}{f(ours['acceptance_rate'], '.2f'):>8}"
                     f"{f(plain, '.2f') + 'x':>18}")
    word = {1: "yes", 0: "no", None: "-"}
    same = [f"{pid}: llama-lookup {word.get(medians.get(f'llama.lookup.{pid}.same_reply'), 'in some rounds')}, "
            f"ours {word.get(medians.get(f'ours.ngram.{pid}.ids_identical'), 'in some rounds')}"
            for pid in lookup_prompts]
    lines.append("reply with drafting the same as without (median round): " + "; ".join(same))
    return "\n".join(lines)


def versions() -> dict:
    """The sdist, torch, transformers and Python versions, the CPU's model name and the CPU count."""
    import platform

    import torch
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"llama_cpp_sdist": f"{SDIST_PACKAGE}=={SDIST_VERSION}", "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(), "cpu": cpu,
            "cpus": os.cpu_count()}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags (argparse exits with one sentence for a bad one); ``formats`` and ``lookup_prompts`` as lists."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", action="store_true", help="pip download the sdist and build llama.cpp's tools first")
    p.add_argument("--jobs", type=int, default=2, help="parallel build jobs (default 2)")
    p.add_argument("--threads", type=int, default=2, help="threads of both programs (default 2)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are reported (default 5)")
    p.add_argument("--reps", type=int, default=3, help="llama-bench repetitions per round (default 3)")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens generated per run (default 64)")
    p.add_argument("--k", type=int, default=4, help="draft length of both n-gram drafters (default 4)")
    p.add_argument("--formats", default="float32,int8,int4", help="our weight formats (default float32,int8,int4)")
    p.add_argument("--lookup-weights", default="int4", help="our format for the n-gram runs (default int4)")
    p.add_argument("--standard-prompt", default="chat-1", help="suite id of our standard decoding's prompt")
    p.add_argument("--lookup-prompts", default="rag-1,chat-1",
                   help="suite ids of the lookup prompts (default rag-1,chat-1: the first rag and chat prompts, whose "
                        "replies run past 64 tokens; summarization-1 ends after 18)")
    p.add_argument("--json", type=Path, help="where the figures go (default <cache>/llama.cpp/compare-t<N>.json)")
    args = p.parse_args(argv)
    args.formats = [x for x in args.formats.split(",") if x]
    args.lookup_prompts = [x for x in args.lookup_prompts.split(",") if x]
    if args.lookup_weights not in args.formats:
        p.error(f"--lookup-weights {args.lookup_weights} must be one of --formats ({','.join(args.formats)})")
    if min(args.threads, args.rounds, args.reps, args.new_tokens, args.k, args.jobs) < 1:
        p.error("--threads, --rounds, --reps, --new-tokens, --k and --jobs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Build when asked, then the interleaved rounds, the table and the JSON. Returns the exit status (1 with
    one sentence on stderr when llama.cpp is not built or a step fails)."""
    args = parse_args(argv)
    home = llama_home()
    try:
        if args.build:
            build(home, jobs=args.jobs)
        message = missing_build_message(home)
        if message:
            print(message, file=sys.stderr)
            return 1
        return _compare(args, home)
    except (RuntimeError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _compare(args, home: Path) -> int:
    """Load ours at ``args.threads`` torch threads, warm each format, run the rounds, print the table and write
    the JSON. Returns 0."""
    import torch

    from specviz.runtime.models import embedded_gguf_path

    torch.set_num_threads(args.threads)
    gguf = embedded_gguf_path()
    ours = load_ours(args.formats)
    prompts = prepare_prompts(args, ours, home)
    for target in ours.values():  # warm-up: the first run of each format pays one-time costs
        our_run(target, prompts["ids"][args.standard_prompt], 8, 1, False)
    load_before = os.getloadavg()
    samples = Samples({})
    for index in range(args.rounds):
        _log(f"round {index + 1}/{args.rounds} (load average {os.getloadavg()[0]:.2f})")
        one_round(args, tool_paths(home), gguf, ours, prompts, samples)
    medians = {k: v for k, v in samples.medians().items() if k != "llama.build"} if samples.values else {}
    print(table(medians, args.formats, args.lookup_prompts, args.new_tokens, args.lookup_weights))
    record = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "threads": args.threads, "rounds": args.rounds,
              "llama_bench_reps": args.reps, "new_tokens": args.new_tokens, "k": args.k, "gguf": str(gguf),
              "standard_prompt": args.standard_prompt, "lookup_prompts": args.lookup_prompts,
              "lookup_weights": args.lookup_weights, "load_average_before": list(load_before),
              "load_average_after": list(os.getloadavg()), "versions": versions(),
              "llama_cpp_build": samples.values.get("llama.build", [None])[0], "medians": medians,
              "llama_over_ours": ratios(medians, args.formats, args.new_tokens),
              "samples": {k: v for k, v in samples.values.items() if k != "llama.build"}}
    out = args.json or home / f"compare-t{args.threads}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    print(f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after; figures in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
