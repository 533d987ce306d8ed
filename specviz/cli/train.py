"""``train``: its flags and the self-distillation run of :mod:`specviz.training.train` (an EAGLE head or Medusa
heads trained on the target's own outputs)."""

from __future__ import annotations

import json

from specviz.cli.common import UsageError, _load_target, _log
from specviz.cli.flags import _float, _int_in

# specviz.training.distill.PROMPT_SETS, written out so that the parser does not import torch (a test keeps them equal)
PROMPT_SET_NAMES = ("default", "part3", "part4", "part5", "part6-docs", "part6")

DEFAULT_BATCH = 32  # prompts per generated batch (CorpusSettings.batch_size; docs/heads.md measures the width)


def add_train_parser(commands) -> None:
    """The ``train`` command's flags on the sub-parsers ``commands``."""
    train = commands.add_parser("train", help="train the EAGLE head or the Medusa heads on the target's own outputs",
                                description="Self-distillation: the target answers a fixed prompt set, its "
                                            "features are recorded, and the head is trained on them. Data and "
                                            "training resume after an interruption.")
    train.add_argument("kind", choices=("eagle", "eagle3", "medusa", "distilled", "data"),
                       help="eagle3: an EAGLE head with the EAGLE-3 recipe (fused layers, training-time test); "
                            "distilled: a small draft model of --layers decoder layers (committed --data sets); "
                            "data: only generate committed id shards (data/distill/<set>, resumable)")
    train.add_argument("--target", default="embedded", help="model spec: 'embedded', a local folder or a hub id")
    train.add_argument("--out", help="head file to write (default <cache>/heads/<kind>.safetensors); for `data`, the "
                                     "folder that holds the sets (default data/distill)")
    train.add_argument("--data", help="folder for the distillation shards (default <cache>/distill), or committed "
                                      "sets made by `train data`, comma-separated (data/distill/part3,...): "
                                      "nothing is generated, features come from a prefill")
    train.add_argument("--shards", help="data: which shards to make, a:b (a..b-1), a: or a (default all)")
    train.add_argument("--batch-size", type=_int_in("batch-size", 1), default=None,
                       help=f"data: prompts per shard, generated as one batch (default {DEFAULT_BATCH})")
    train.add_argument("--ckpt", help="training checkpoint to resume from and keep (commit it to resume elsewhere; "
                                      "default <data>/ckpt-<kind>-seed<seed>.pt, removed when training ends)")
    train.add_argument("--prefill-cache", help="with committed --data sets: a file that keeps the prefill (features "
                                               "and EAGLE-3's fused layers; for distilled, the target's top-k "
                                               "next tokens) so the next training of that family on the same sets "
                                               "reads it instead (a few GB; 0.2 GB for distilled)")
    train.add_argument("--prompts", type=_int_in("prompts", 1), default=None, help="prompts to answer (default 2560: 1280 sampled, then 1280 greedy)")
    train.add_argument("--max-new-tokens", type=_int_in("max-new-tokens", 1), default=None, help="default 192")
    train.add_argument("--epochs", type=_int_in("epochs", 1), default=None, help="default 4 (eagle), 2 (medusa)")
    train.add_argument("--batch-tokens", type=_int_in("batch-tokens", 16), default=None,
                       help="positions per optimizer step (default 1024)")
    train.add_argument("--lr", type=_float("lr", lambda v: 0 < v < 1, "in (0, 1)"), default=None,
                       help="peak learning rate (default 0.002)")
    train.add_argument("--init", choices=("last-layer", "random"), default=None,
                       help="EAGLE head start: random (default) or the target's last layer")
    train.add_argument("--start-from", metavar="FILE",
                       help="eagle/eagle3/medusa: continue training this head file (its weights and draft vocabulary; "
                            "e.g. the shipped head, trained further on new data) instead of a new head")
    train.add_argument("--ce-weight", type=_float("ce-weight", lambda v: v >= 0, ">= 0"), default=None,
                       help="EAGLE: weight of the cross-entropy term (default 0.1)")
    train.add_argument("--prompt-set", choices=PROMPT_SET_NAMES, default="default",
                       help="default: parts one and two (the shipped heads); part3, part4, part5: greedy replies to "
                            "everyday requests, the suite's eight forms, long documents; part6-docs: short texts the "
                            "target writes, sampled; part6: tasks over them, greedy (shard N needs part6-docs shard "
                            "N); docs/heads.md")
    train.add_argument("--forms", help="part3 to part6: comma-separated forms to train on (default all); eagle3 only "
                                       "(with committed --data sets: sequences of other sets, without forms, are left out)")
    train.add_argument("--layers", type=_int_in("layers", 1), default=None,
                       help="distilled: decoder layers of the draft model (default 2); eagle/eagle3: of the head "
                            "(default 1; with --start-from a file of fewer, the new ones start as the identity)")
    train.add_argument("--layer-init", choices=("first", "spaced"), default="first",
                       help="distilled: start from the target's first layers or evenly spaced ones (default first)")
    train.add_argument("--vocab-from", metavar="FILE", help="distilled: use this head file's draft vocabulary "
                                                            "(e.g. assets/heads/smollm2-135m-eagle.safetensors)")
    train.add_argument("--eval-data", help="distilled: committed sets to report held-out figures on "
                                           "(comma-separated, e.g. data/distill/part3)")
    train.add_argument("--seed", type=_int_in("seed", 0, 2**63 - 1), default=0)
    train.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    train.add_argument("--threads", type=_int_in("threads", 1), help="torch CPU threads (default: torch's choice)")
    train.set_defaults(handler=cmd_train)


def cmd_train(args) -> int:
    from dataclasses import replace
    from pathlib import Path

    from specviz.training.distill import CorpusSettings
    from specviz.runtime.models import cache_dir
    from specviz.training.train import TrainData, TrainSettings, run_training

    if args.start_from and args.kind in ("distilled", "data"):
        raise UsageError(f"--start-from continues an EAGLE or Medusa head file; `train {args.kind}` makes none")
    if args.start_from:  # before the prefill's minutes: a file that cannot be read, or of the other kind
        from specviz.drafters.networks import read_metadata

        stored = read_metadata(args.start_from)["kind"]
        if stored != ("medusa" if args.kind == "medusa" else "eagle"):
            raise UsageError(f"--start-from {args.start_from} holds {stored} heads, not what `train {args.kind}` makes")
    if args.kind in ("medusa", "data") and args.layers is not None:
        raise UsageError(f"--layers sizes a distilled draft model or an EAGLE head; `train {args.kind}` has none")
    if args.kind == "distilled":
        return _train_distilled(args)
    corpus = CorpusSettings(seed=args.seed, prompt_set=args.prompt_set)
    forms = _train_forms(args)
    if args.prompts:
        corpus = replace(corpus, num_prompts=args.prompts)
    if args.max_new_tokens:
        corpus = replace(corpus, max_new_tokens=args.max_new_tokens)
    settings = TrainSettings(seed=args.seed)
    if args.epochs:
        settings = replace(settings, epochs=args.epochs)
    if args.batch_tokens:
        settings = replace(settings, batch_tokens=args.batch_tokens)
    if args.lr:
        settings = replace(settings, lr=args.lr)
    if args.init:
        settings = replace(settings, init=args.init)
    if args.ce_weight is not None:
        settings = replace(settings, ce_weight=args.ce_weight)
    if args.start_from:
        settings = replace(settings, start_from=args.start_from)
    if args.layers is not None:
        settings = replace(settings, head_layers=args.layers)
    if args.batch_size:
        corpus = replace(corpus, batch_size=args.batch_size)
    if args.kind == "data":
        return _make_data(args, corpus)
    sets = _committed_sets(args.data)
    if args.prompt_set == "part6" and not sets:
        raise UsageError("part six is built from committed sets: make them with `train data --prompt-set part6-docs` "
                         "then `--prompt-set part6`, and train with --data data/distill/part6")
    out = Path(args.out) if args.out else cache_dir() / "heads" / f"{args.kind}.safetensors"
    target = _load_target(args)
    data = TrainData(folder=Path(args.data) if args.data and not sets else None, sets=tuple(sets or ()),
                     forms=forms, checkpoint=Path(args.ckpt) if args.ckpt else None,
                     prefill_cache=Path(args.prefill_cache) if args.prefill_cache and sets else None)
    report = run_training(args.kind, target, out, settings=settings, corpus_settings=corpus, data=data,
                          progress=_log)
    print(json.dumps(report, indent=2), flush=True)
    drafter = "medusa" if args.kind == "medusa" else "eagle"
    _log(f"use it with: python -m specviz generate --drafter {drafter} --heads {out} --prompt ...")
    return 0


def _train_distilled(args) -> int:
    """``train distilled``: a draft model of ``--layers`` layers on committed sets (:mod:`specviz.training.draft_model`).

    Raises:
        UsageError: no committed ``--data`` (or ``--eval-data``) sets, or more layers than the target has.
    """
    from dataclasses import replace
    from pathlib import Path

    from specviz.runtime.models import cache_dir
    from specviz.training.draft_model import DistillSettings, DraftPaths, run_draft_training

    sets = _committed_sets(args.data)
    if not sets:
        raise UsageError("train distilled needs --data with committed sets, e.g. --data data/distill/default "
                         "(make them with `python -m specviz train data`)")
    evals = _committed_sets(args.eval_data) if args.eval_data else []
    if evals is None:
        raise UsageError(f"--eval-data {args.eval_data} holds no committed id shards")
    layers = 2 if args.layers is None else args.layers  # the distilled draft's default depth
    settings = DistillSettings(layers=layers, init=args.layer_init, seed=args.seed, vocab_from=args.vocab_from)
    for flag, field in (("epochs", "epochs"), ("batch_tokens", "batch_tokens"), ("lr", "lr")):
        if getattr(args, flag):
            settings = replace(settings, **{field: getattr(args, flag)})
    target = _load_target(args)
    if layers > target.model.config.num_hidden_layers:
        raise UsageError(f"--layers {layers} is more than the target's {target.model.config.num_hidden_layers} layers")
    out = Path(args.out) if args.out else cache_dir() / "drafters" / f"distilled-L{layers}.safetensors"
    paths = DraftPaths(out, Path(args.ckpt) if args.ckpt else None,
                       Path(args.prefill_cache) if args.prefill_cache else None)
    report = run_draft_training(target, sets, paths, settings, evals, progress=_log)
    print(json.dumps(report, indent=2), flush=True)
    _log(f"use it with: python -m specviz generate --drafter distilled --heads {out} --prompt ...")
    return 0


def _train_forms(args) -> tuple[int, ...] | None:
    """``--forms`` as stored form indices (into ``ALL_FORMS``: part three's, part four's, then part five's; None: all).

    Raises:
        UsageError: an unknown form name, or forms without ``eagle3`` on part three (``--prompt-set part3``, or
            committed sets: sequences without a form are then left out).
    """
    if not args.forms:
        return None
    from specviz.training.distill import ALL_FORMS

    if args.kind != "eagle3" or (args.prompt_set == "default" and not _committed_sets(args.data)):
        raise UsageError("--forms needs `train eagle3 --prompt-set part3|part4|part5|part6` or `train eagle3 --data "
                         "<committed sets>`")
    names = [name.strip() for name in args.forms.split(",") if name.strip()]
    unknown = [name for name in names if name not in ALL_FORMS]
    if unknown:
        raise UsageError(f"unknown form(s) {', '.join(unknown)}; choose from {', '.join(ALL_FORMS)}")
    return tuple(ALL_FORMS.index(name) for name in names)


def _make_data(args, corpus) -> int:
    """``train data``: generate the shards asked for into ``<out>/<set>`` (:func:`specviz.training.dataset.generate_set`).

    Raises:
        UsageError: the folder's recipe differs, or --shards is out of range.
    """
    from pathlib import Path

    from specviz.training.dataset import DEFAULT_ROOT, DataSetError, generate_set, set_name

    folder = Path(args.out or DEFAULT_ROOT) / set_name(corpus)
    target = _load_target(args)
    try:
        generate_set(target, folder, corpus, args.shards, progress=_log)
    except DataSetError as error:
        raise UsageError(str(error)) from None
    return 0


def _committed_sets(data: str | None):
    """``--data`` as committed set folders (those holding ``ids-*.npz`` or a manifest), or None for a cache folder.

    Raises:
        UsageError: a listed folder does not exist, or a list mixes committed sets with a cache folder.
    """
    from pathlib import Path

    if not data:
        return None
    folders = [Path(part.strip()) for part in data.split(",") if part.strip()]
    committed = [f.is_dir() and (any(f.glob("ids-*.npz")) or (f / "manifest.json").exists()) for f in folders]
    if len(folders) > 1 or any(committed):
        missing = [str(f) for f, ok in zip(folders, committed) if not ok]
        if missing:
            raise UsageError(f"--data: {', '.join(missing)} holds no committed id shards (make them with "
                             f"`python -m specviz train data`)")
        return folders
    return None
