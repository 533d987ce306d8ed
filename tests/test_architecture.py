"""The house rules, checked by ``make test``: the layer contracts of ``.importlinter``, short functions with few
parameters in ``specviz/`` and ``app/``, and the shape of the speculative loop (short, its five phases numbered in order).

A failure names what broke the rule; the fix is to split the code, not to raise a limit. Only figure and
layout builders may run long (one line per widget, trace or flag reads better than a split): they are
listed by name in ``LONG_BUILDERS``, each with its reason.
"""

from __future__ import annotations

import ast
import configparser
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
PACKAGES = ("specviz", "app")
MAX_LINES = 60  # per function or method, decorators excluded, its nested functions included

# "path::qualified name" -> why it may exceed MAX_LINES. Builders only: keep it short.
LONG_BUILDERS = {
}

ENGINE = ROOT / "specviz" / "core" / "engine.py"
LOOP = "_decode"  # the one loop: a single prompt is a batch of one (speculative_generate, generate_batch)
PHASES = [(1, "draft"), (2, "verify"), (3, "commit"), (4, "update"), (5, "event")]


# ------------------------------------------------------------------------------------------- import layers


def _lint_imports(*contracts: str) -> subprocess.CompletedProcess:
    """Run import-linter's console script of this interpreter's environment on ``.importlinter``.

    ``python -m importlinter.cli`` is no substitute: that module has no ``__main__`` guard, so it would
    exit 0 without checking anything."""
    script = Path(sys.executable).parent / "lint-imports"
    assert script.exists(), f"{script} is missing: pip install -r requirements-dev.txt"
    selected = [arg for name in contracts for arg in ("--contract", name)]
    command = [str(script), "--config", str(CONFIG), "--no-cache", "--no-logo", *selected]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _contract_names() -> list[str]:
    """The contract ids declared in ``.importlinter``."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    prefix = "importlinter:contract:"
    return [section[len(prefix):] for section in parser.sections() if section.startswith(prefix)]


def _assert_kept(done: subprocess.CompletedProcess, count: int) -> None:
    """lint-imports exited 0 and reports every one of ``count`` contracts kept."""
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert f"Contracts: {count} kept, 0 broken." in report, report


def test_core_and_ui_layer_contracts_are_kept():
    """specviz/core imports nothing above it; specviz never imports app, gradio or plotly."""
    _assert_kept(_lint_imports("core", "no-ui"), 2)


def test_every_import_contract_is_kept():
    """All of ``.importlinter``, the tabs' independence included."""
    names = _contract_names()
    assert {"layers", "core", "measure", "no-ui", "tabs"} <= set(names)
    _assert_kept(_lint_imports(), len(names))


# ------------------------------------------------------------------------------------------ function length


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function and method under ``tree``, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _function_lengths() -> dict[str, int]:
    """"path::qualified name" -> lines (``end_lineno - lineno + 1``) of every function in the packages."""
    lengths = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            where = path.relative_to(ROOT).as_posix()
            for name, node in _functions(tree):
                lengths[f"{where}::{name}"] = node.end_lineno - node.lineno + 1
    return lengths


def test_functions_are_short():
    """No function or method is longer than MAX_LINES, the listed builders excepted."""
    long = {name: n for name, n in _function_lengths().items() if n > MAX_LINES and name not in LONG_BUILDERS}
    report = [f"{name} ({n} lines)" for name, n in sorted(long.items())]
    assert report == [], f"longer than {MAX_LINES} lines; split into named steps: {report}"


def test_long_builder_list_has_no_stale_entries():
    """Every listed builder still exists and still needs the exception (else remove it from the list)."""
    lengths = _function_lengths()
    stale = [name for name in LONG_BUILDERS if lengths.get(name, 0) <= MAX_LINES]
    assert stale == [], f"no longer needed in LONG_BUILDERS (missing or at most {MAX_LINES} lines): {stale}"
    assert all(reason.strip() for reason in LONG_BUILDERS.values())


# ------------------------------------------------------------------------------------------- parameter count

MAX_PARAMETERS = 8  # self / cls not counted; *args and **kwargs count one each
# "path::qualified name" -> why it may take more. At most three; keep it short.
MANY_PARAMETERS = {
    "specviz/analysis/batching.py::sampling_check": "the check's target, prompt, config and drafter factory, "
    "its sample size and batch, the broken-sampler switch, cancel and progress",
}


def _parameter_counts() -> dict[str, int]:
    """"path::qualified name" -> parameters of every function in the packages (self and cls not counted)."""
    counts = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            where = path.relative_to(ROOT).as_posix()
            for name, node in _functions(tree):
                args = node.args
                named = [a.arg for a in args.posonlyargs + args.args]
                count = len(named) + len(args.kwonlyargs) + bool(args.vararg) + bool(args.kwarg)
                counts[f"{where}::{name}"] = count - (1 if named[:1] in (["self"], ["cls"]) else 0)
    return counts


def test_functions_take_few_parameters():
    """No function takes more than MAX_PARAMETERS parameters, at most three listed ones excepted (a run's settings
    travel as one record, not as 30 positional parameters)."""
    counts = _parameter_counts()
    many = {name: n for name, n in counts.items() if n > MAX_PARAMETERS and name not in MANY_PARAMETERS}
    assert many == {}, f"more than {MAX_PARAMETERS} parameters; pass a record instead: {sorted(many.items())}"
    assert len(MANY_PARAMETERS) <= 3
    stale = [name for name in MANY_PARAMETERS if counts.get(name, 0) <= MAX_PARAMETERS]
    assert stale == [], f"no longer needed in MANY_PARAMETERS: {stale}"


# ------------------------------------------------------------------------------------ the speculative loop


def _loop_span() -> tuple[int, int]:
    """First and last line of the loop function's body, its docstring excluded."""
    tree = ast.parse(ENGINE.read_text(encoding="utf-8"))
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == LOOP]
    assert found, f"{LOOP} is not a top-level function of {ENGINE.relative_to(ROOT)}"
    body = found[0].body
    if ast.get_docstring(found[0]) is not None:
        body = body[1:]
    assert body, f"{LOOP} has no statements"
    return body[0].lineno, found[0].end_lineno


def _numbered_comments(first: int, last: int) -> list[tuple[int, str]]:
    """(number, first word) of every comment ``# <n> <word>`` on lines first..last of the engine."""
    tokens = tokenize.generate_tokens(io.StringIO(ENGINE.read_text(encoding="utf-8")).readline)
    numbered = []
    for token in tokens:
        match = re.match(r"#\s*(\d+)\s+(\w+)", token.string) if token.type == tokenize.COMMENT else None
        if match and first <= token.start[0] <= last:
            numbered.append((int(match.group(1)), match.group(2)))
    return numbered


def test_speculative_loop_is_short():
    """The loop reads on one screen: its body (docstring excluded) is at most MAX_LINES lines."""
    first, last = _loop_span()
    assert last - first + 1 <= MAX_LINES, f"{LOOP}'s body is {last - first + 1} lines"


def test_speculative_loop_numbers_its_phases_in_order():
    """"# 1 draft", "# 2 verify", "# 3 commit", "# 4 update", "# 5 event": each once, in this order."""
    assert _numbered_comments(*_loop_span()) == PHASES
