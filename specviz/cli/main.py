"""The entry point: the parser of the four commands, and ``main``, which turns every user error into one
``error:`` line on stderr (exit status 2) and never shows a traceback unless ``SPECVIZ_DEBUG=1``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Sequence

from specviz.cli.bench import add_bench_parser
from specviz.cli.common import EXIT_USAGE, UsageError, _log, _quiet_libraries, set_torch_threads
from specviz.cli.compile import add_compile_parser
from specviz.cli.flags import _Parser
from specviz.cli.generate import add_generate_parser
from specviz.cli.train import add_train_parser


def build_parser() -> argparse.ArgumentParser:
    """The ``specviz`` argument parser with its ``generate``, ``bench`` and ``train`` commands."""
    parser = _Parser(prog="python -m specviz", description="Speculative decoding, token by token.")
    commands = parser.add_subparsers(dest="command", metavar="{generate,bench,train,compile}", parser_class=_Parser)
    commands.required = True

    add_generate_parser(commands)
    add_bench_parser(commands)
    add_train_parser(commands)
    add_compile_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 unexpected error, 130 interrupted)."""
    try:
        args = build_parser().parse_args(argv)
        args.command_line = shlex.join(["python", "-m", "specviz", *(sys.argv[1:] if argv is None else argv)])
    except UsageError as error:
        _log(f"error: {error}")
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    try:
        with _quiet_libraries():
            if args.threads:
                set_torch_threads(args.threads)
            return args.handler(args)
    except UsageError as error:
        _log(f"error: {error}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _log("error: interrupted")
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI's promise: one line, no traceback
        from specviz.core.events import NumericalError
        from specviz.runtime.models import ModelLoadError

        if isinstance(error, (ModelLoadError, ValueError, NotImplementedError, OSError)):
            _log(f"error: {_one_line(error)}")
            return EXIT_USAGE
        if isinstance(error, NumericalError):
            _log(f"error: {_one_line(error)}")
            return 1
        if os.environ.get("SPECVIZ_DEBUG"):
            raise
        _log(f"error: unexpected {type(error).__name__}: {_one_line(error)} (set SPECVIZ_DEBUG=1 for a traceback)")
        return 1


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__
