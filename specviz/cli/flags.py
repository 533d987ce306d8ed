"""The flags' types (one-sentence errors for bad values) and the flag groups several commands share: the model
flags and the generation settings."""

from __future__ import annotations

import argparse

from specviz.cli.common import MAX_K, UsageError, _drafter_keys

MAX_TREE_NODES = 128  # --tree: the largest draft tree the CLI takes (the app's slider stops at 32)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors ("error: ...", exit 2) instead of the usage block."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        raise UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------- flag types


def _int_in(name: str, low: int, high: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"in {low}..{high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{name} must be {bound}, got {value}")
        return value
    return parse


def _float(name: str, check, bound: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if value != value or not check(value):
            raise argparse.ArgumentTypeError(f"{name} must be {bound}, got {text}")
        return value
    return parse


def _k_value(text: str) -> int | str:
    """An int k in 1..16 or "auto" (the cost-aware k, see specviz.core.draft_length)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"k must be an integer in 1..{MAX_K} or 'auto', got {text!r}") from None
    if not 1 <= value <= MAX_K:
        raise argparse.ArgumentTypeError(f"k must be in 1..{MAX_K} or 'auto', got {value}")
    return value


def _k_list(text: str) -> tuple[int | str, ...]:
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("k needs at least one value, e.g. 2,4,8 or auto")
    return tuple(dict.fromkeys(_k_value(t.strip()) for t in items))


def _int_list(name: str):
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(t) for t in text.split(",") if t.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a comma list of whole numbers, got {text!r}") from None
        if not values or any(not 1 <= v <= 64 for v in values):
            raise argparse.ArgumentTypeError(f"{name} values must be in 1..64, got {text!r}")
        return tuple(dict.fromkeys(values))
    return parse


def _drafter_list(text: str) -> tuple[str, ...]:
    keys = _drafter_keys()
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("drafters needs at least one name, e.g. ngram,bf16")
    from specviz.drafters.registry import split_variant

    for item in items:
        try:
            split_variant(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"unknown drafter {item!r}; choose from {', '.join(keys)} "
                                             "(eagle:tree and medusa:tree draft trees; eagle:lookup and "
                                             "medusa:lookup try n-gram lookup first; eagle:tree:lookup does both)"
                                             ) from None
    return tuple(dict.fromkeys(items))


TEMPERATURE = _float("temperature", lambda v: v >= 0, ">= 0 (0 = greedy)")

TOP_P = _float("top-p", lambda v: 0 < v <= 1, "in (0, 1]")

MIN_P = _float("min-p", lambda v: 0 <= v < 1, "in [0, 1) (0 = off)")

REPETITION_PENALTY = _float("repetition-penalty", lambda v: 0 < v <= 10, "in (0, 10] (1 = off)")

FREQUENCY_PENALTY = _float("frequency-penalty", lambda v: -2 <= v <= 2, "in [-2, 2] (0 = off)")

PRESENCE_PENALTY = _float("presence-penalty", lambda v: -2 <= v <= 2, "in [-2, 2] (0 = off)")


def _text_setting(parse):
    """An argparse type from a parser of :mod:`specviz.core.generation_settings` (its ValueError is the message)."""
    def read(text: str):
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return read


# ------------------------------------------------------------------------------------------- flag groups


def _add_generation_flags(p: argparse.ArgumentParser) -> None:
    """The logits processors and stop token ids, named as transformers' generate() names its arguments; applied to
    the target and the draft alike at every draft position, and to the baseline (README: generation settings)."""
    from specviz.core import generation_settings as gs

    group = p.add_argument_group("generation settings (as transformers' generate(); target and draft alike)")
    group.add_argument("--repetition-penalty", type=REPETITION_PENALTY, default=1.0, metavar="R",
                       help="divide the positive logits (multiply the negative ones) of every token already in the "
                            "text, prompt included, by R (1 = off, > 1 discourages repeats)")
    group.add_argument("--frequency-penalty", type=FREQUENCY_PENALTY, default=0.0, metavar="F",
                       help="subtract F x (times the token was generated) from its logit; generated tokens only "
                            "(0 = off; as OpenAI / vLLM)")
    group.add_argument("--presence-penalty", type=PRESENCE_PENALTY, default=0.0, metavar="P",
                       help="subtract P from the logit of every token generated at least once (0 = off)")
    group.add_argument("--min-p", type=MIN_P, default=0.0, metavar="M",
                       help="sampling: drop tokens below M x the top token's probability (0 = off; no effect "
                            "when greedy)")
    group.add_argument("--no-repeat-ngram-size", type=_int_in("no-repeat-ngram-size", 0, 64), default=0, metavar="N",
                       help="ban any token that would repeat an N-gram already in the text, prompt included (0 = off)")
    group.add_argument("--logit-bias", type=_text_setting(gs.parse_logit_bias), default=(), metavar="ID:BIAS,...",
                       help="add BIAS to token ID's logit, e.g. '13:2.5,30:-inf' (-inf bans the token)")
    group.add_argument("--bad-words-ids", type=_text_setting(lambda t: gs.parse_token_ids(t, "bad words ids",
                                                                                          gs.MAX_BIASED_TOKENS)),
                       default=(), metavar="ID,...",
                       help="banned token ids, e.g. '30,31': each gets a logit bias of -inf, so it is never chosen "
                            "(single tokens; generate()'s bad_words_ids also takes sequences)")
    group.add_argument("--stop-token-ids", type=_text_setting(gs.parse_token_ids), default=(), metavar="ID,...",
                       help="stop when one of these ids is generated (kept in the output, like EOS; finish reason "
                            "'stop'); special tokens included, which --stop strings cannot match")


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="embedded", help="model spec: 'embedded', a local folder or a hub id")
    p.add_argument("--draft-model", help="draft model spec for --drafter model")
    p.add_argument("--exit-layer", type=_int_in("exit-layer", 1), help="layers run by the early-exit drafter")
    p.add_argument("--ngram-max", type=_int_in("ngram-max", 1), default=3,
                   help="n-gram lookup (--drafter ngram): longest suffix looked up earlier in the text (default 3)")
    p.add_argument("--ngram-min", type=_int_in("ngram-min", 1), default=1,
                   help="n-gram lookup: shortest suffix looked up (default 1); not lookahead's --ngram")
    p.add_argument("--heads", metavar="FILE", help="head file for --drafter eagle|medusa, or draft-model file for "
                                                   "distilled (default: the shipped file for the embedded model)")
    p.add_argument("--tree", type=_int_in("tree", 0, MAX_TREE_NODES), default=0, metavar="N",
                   help="eagle/medusa: draft a tree of N nodes in greedy mode (0 = a chain, the default)")
    p.add_argument("--tree-width", type=_int_in("tree-width", 1, 16), default=3, metavar="W",
                   help="eagle/medusa trees: nodes expanded per depth, and candidates taken from each (default 3; "
                        "wider trees need more --tree nodes to use it)")
    p.add_argument("--confidence", type=_float("confidence", lambda v: 0 <= v < 1, "in [0, 1)"), default=None,
                   metavar="P", help="eagle/medusa/distilled/model: stop drafting where the draft's cumulative probability "
                                     "falls below P (0 = always k tokens; default: the drafters' own default)")
    p.add_argument("--head-weights", default="auto", choices=("auto", "int8", "float"),
                   help="eagle/medusa/distilled: the trained drafter's weights while drafting (default auto: int8 on the CPU, "
                        "about half the drafting time; float: the target's dtype). Output is unchanged either way")
    p.add_argument("--window", type=_int_in("window", 1, 32), default=None, metavar="W",
                   help="lookahead: the Jacobi window's columns (default 3)")
    p.add_argument("--ngram", type=_int_in("ngram", 2, 8), default=None, metavar="N",
                   help="lookahead: n-gram size: N-1 levels, candidates of N-1 tokens (default 3)")
    p.add_argument("--candidates", type=_int_in("candidates", 1, 32), default=None, metavar="G",
                   help="lookahead: most pool n-grams verified per pass (default 2; one when sampling)")
    from specviz.runtime.models import DTYPE_CHOICES
    from specviz.runtime.weights.loaded import add_weights_argument

    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    p.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES,
                   help="the target's weights and activations (draft models and heads follow it); default auto: "
                        "float32 on the CPU, bfloat16 on CUDA. float32 on CUDA runs with TF32 off")
    add_weights_argument(p)  # --weights (issue 37, specviz.runtime.weights)
    p.add_argument("--no-chat-template", action="store_true", help="tokenize the prompt as plain text")
    p.add_argument("--threads", type=_int_in("threads", 1), help="torch CPU threads (default: torch's choice)")
    p.add_argument("--compile", action="store_true",
                   help="run the models' forward compiled (torch.compile, as SPECVIZ_COMPILE=1): compiled and "
                        "warmed at load (minutes the first time, `make compile` does it ahead; then read from "
                        "the disk cache); a run during which anything compiled is flagged")
    p.add_argument("--path", default="auto", choices=("auto", "eager", "graphs"),
                   help="the target's forward path: graphs (CUDA graphs over a static device-side cache; the default "
                        "on CUDA) or eager (the default on a CPU; SPECVIZ_GRAPHS=0 too)")
    from specviz.runtime.placement import add_placement_flags

    add_placement_flags(p)  # --device-map, --max-memory, --offload-folder: accelerate's placement
