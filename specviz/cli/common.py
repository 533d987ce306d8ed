"""What every command shares: the one-line usage error, logging to stderr, loading the target (tuned, warmed)
and the drafter, the generation-settings flags read into sampling fields, and quiet libraries."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

MAX_K = 16  # mirrors specviz.core.engine.MAX_K (checked against it at run time)
EXIT_USAGE = 2


class UsageError(Exception):
    """A user-facing error: printed as one ``error:`` line, exit status 2."""


def _drafter_keys():
    from specviz.drafters.registry import drafter_keys

    return drafter_keys()


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def set_torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _check_common(args) -> None:
    if args.ngram_min > args.ngram_max:
        raise UsageError(f"--ngram-min ({args.ngram_min}) must not exceed --ngram-max ({args.ngram_max})")


def _load_target(args):
    """Load the target, then apply the threads and kernels measured fastest on this machine
    (:mod:`specviz.measure.tuning`), unless ``--threads`` chose."""
    from specviz.runtime.compiled import ENV_COMPILE, forward_path
    from specviz.runtime.models import load_model
    from specviz.runtime.placement import load_placed_target, placement_requested
    from specviz.measure.tuning import tune
    from specviz.runtime.weights.loaded import weights_for_run

    if placement_requested(args):  # a target placed by accelerate's device map: loaded and run eagerly
        return load_placed_target(args, _log)
    if getattr(args, "compile", False):
        os.environ[ENV_COMPILE] = "1"  # load_model compiles every model it loads (the draft model too)
    if getattr(args, "path", "auto") != "auto":
        os.environ["SPECVIZ_GRAPHS"] = "1" if args.path == "graphs" else "0"  # read by specviz.core.graphs
    target = load_model(args.target, device=None if args.device == "auto" else args.device,
                        dtype=getattr(args, "dtype", "auto"), progress=_log)
    if getattr(args, "threads", None) is None:
        _log(f"settings: {tune(target, progress=_log).summary()}")
    target = _with_curve(target, weights_for_run(target, args, progress=_log), args)  # --weights: that format
    _log(f"forward: {forward_path(target.model)}")
    from specviz.core.graphs import warm_graphs

    warmed = warm_graphs(target)  # CUDA graphs captured at load on the graph path (None elsewhere)
    if warmed:
        _log(warmed)
    return target


def _asks_auto_k(args) -> bool:
    """Whether ``--k`` is auto (generate) or lists auto (bench)."""
    k = getattr(args, "k", None)
    return k == "auto" or (isinstance(k, (list, tuple)) and "auto" in k)


def _with_curve(base, target, args):
    """``target`` (``base`` in the format ``--weights`` chose) with its verify curve T(n)/T(1) measured here when
    ``--k auto`` will read it (:func:`specviz.core.costs.set_verify_curve`; a few seconds, the CPU only): a format
    whose verification grows with its rows (int8, int4) gets a shorter k than float32's flat curve."""
    if not _asks_auto_k(args) or target.device.type != "cpu" or getattr(args, "kernel", False):
        return target
    from specviz.core.costs import set_verify_curve
    from specviz.measure.weights_default import measure_formats
    from specviz.runtime.weights import weights_of

    fmt = weights_of(target.model)
    figures = measure_formats(base, [fmt]).get(fmt)
    if figures:
        set_verify_curve(target.model, figures["verify"])
        curve = " ".join(f"{ratio:.2f}" for n, ratio in sorted(figures["verify"].items()) if n > 1)
        _log(f"k = auto: {fmt} verify curve T(n)/T(1), n = 2, 3, 5, 9: {curve}")
    return target


def _check_exit_layer(args, target) -> None:
    if args.exit_layer is not None and args.exit_layer > target.num_layers:
        raise UsageError(f"--exit-layer must be in 1..{target.num_layers} for {target.label}, got {args.exit_layer}")


def _make_drafter(key: str, args, target):
    from specviz.drafters.registry import make_drafter

    if key == "model" and not (args.draft_model or "").strip():
        raise UsageError("--drafter model needs --draft-model SPEC (a local folder or a hub id)")
    _check_exit_layer(args, target)
    return make_drafter(key, target, draft_spec=args.draft_model, exit_layer=args.exit_layer,
                        ngram_max=args.ngram_max, ngram_min=args.ngram_min, heads_path=args.heads,
                        tree_nodes=args.tree, tree_width=getattr(args, "tree_width", 3),
                        min_confidence=args.confidence, head_weights=args.head_weights,
                        lookup=bool(getattr(args, "lookup", False)), window=args.window, ngram=args.ngram,
                        candidates=args.candidates, seed=getattr(args, "seed", 0) or 0, progress=_log)


@contextlib.contextmanager
def _quiet_libraries():
    """Silence transformers' and Python's warnings for the duration (our own messages still go to stderr)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            hf_logging.set_verbosity(level)
            hf_logging.enable_progress_bar()


def processor_settings(args) -> dict:
    """The SamplingConfig fields of the generation-settings flags (:func:`_add_generation_flags`): the penalties,
    min_p, the no-repeat n-gram size, and the logit bias with the banned ids added as -inf."""
    from specviz.core.generation_settings import with_banned

    try:
        bias = with_banned(tuple(args.logit_bias), tuple(args.bad_words_ids))
    except ValueError as error:
        raise UsageError(str(error)) from None
    return dict(min_p=args.min_p, repetition_penalty=args.repetition_penalty, frequency_penalty=args.frequency_penalty,
                presence_penalty=args.presence_penalty, no_repeat_ngram_size=args.no_repeat_ngram_size,
                logit_bias=bias)


def _check_token_ids(args, target) -> None:
    """Biased, banned and stop token ids must be ids of the loaded target (else they would do nothing)."""
    from specviz.core.generation_settings import check_token_ids
    from specviz.core.verify import SamplingConfig

    vocab = min(target.vocab_size, target.num_token_ids or target.vocab_size)
    try:
        check_token_ids(SamplingConfig(**processor_settings(args)), tuple(args.stop_token_ids), vocab)
    except ValueError as error:
        raise UsageError(str(error)) from None
