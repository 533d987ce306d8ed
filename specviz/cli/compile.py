"""``compile``: compile and warm the target's (and a draft model's) forward once, so later ``--compile`` starts read
inductor's caches from disk (:mod:`specviz.runtime.compiled`)."""

from __future__ import annotations

import json

from specviz.cli.common import _load_target, _log
from specviz.cli.flags import _int_in


def add_compile_parser(commands) -> None:
    """The ``compile`` command's flags on the sub-parsers ``commands``."""
    comp = commands.add_parser("compile", help="compile and warm the models' forward once (torch.compile; its "
                                               "caches go to disk, so later --compile starts are quick)",
                               description="Compile the target's forward (and a draft model's) for the shapes the "
                                           "engine runs, writing inductor's caches under the specviz cache folder "
                                           "(`make compile`). Prints what was compiled and how long it took.")
    comp.add_argument("--target", default="embedded", help="model spec: 'embedded', a local folder or a hub id")
    comp.add_argument("--draft-model", help="also compile this draft model (for --drafter model)")
    comp.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    comp.add_argument("--threads", type=_int_in("threads", 1), help="torch CPU threads (default: torch's choice)")
    comp.add_argument("--json", action="store_true", help="print the reports as one JSON object")
    comp.set_defaults(handler=cmd_compile, compile=True)


def cmd_compile(args) -> int:
    """``compile``: load the target (and ``--draft-model``) with the compiled forward, which compiles and warms it
    (:mod:`specviz.runtime.compiled`); print each model's :class:`~specviz.runtime.compiled.CompileReport`."""
    from dataclasses import asdict

    from specviz.runtime.models import load_model

    target = _load_target(args)
    loaded = [target]
    if args.draft_model:
        loaded.append(load_model(args.draft_model, device=target.device, progress=_log))
    reports = {m.label: asdict(m.compiled) for m in loaded if m.compiled is not None}
    if args.json:
        print(json.dumps(reports), flush=True)
    else:
        for m in loaded:
            print(f"{m.label}: {m.compiled.summary()}\n  shapes: {', '.join(m.compiled.shapes)}\n"
                  f"  cache: {m.compiled.cache_dir}", flush=True)
    return 0
