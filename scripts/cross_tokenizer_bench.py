"""Tokens per pass of cross-tokenizer drafting on the tiny pair of ``tests/test_drafter_cross_tokenizer.py``, beside transformers'
universal assisted generation (UAG) on the same pair.

    python scripts/cross_tokenizer_bench.py                    # k in {1, 3, 6}, 64 new tokens, greedy
    python scripts/cross_tokenizer_bench.py --out bench.json

The pair (built here, in a temporary folder, exactly as the tests build it): a tiny 4-layer target over the tests'
tiny BPE tokenizer, its non-printable tokens' embedding rows zeroed (printable greedy text), and a 2-layer draft over a
second BPE tokenizer (another corpus and size: it splits most words differently) trained to memorize the target's
greedy continuations of three prompts ("memorized"); a fourth prompt it never saw ("unseen"). So the figures show the
mechanism on a draft that knows the text and on one that does not; they say nothing about real model pairs.

Figures per k and prompt group, pooled (ratios of sums): ``tokens_per_pass`` = tokens emitted after the prefill /
target passes (bonus included; 1.0 = standard decoding, at most k + 1), ``acceptance_rate`` = accepted / drafted;
``ids_identical``: every run's ids equal standard decoding's. UAG: transformers' ``generate(assistant_model=...,
tokenizer=..., assistant_tokenizer=...)`` with a constant ``num_assistant_tokens`` = k (its assistant drafts k of its
own tokens per pass), greedy; its target forwards are counted with a forward hook. Its first forward reads the
prompt *and* verifies the first draft, so its figure is every new token / every target forward. Wall-clock
times are not reported: on models this small they measure Python overhead, not decoding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def build_pair(folder: Path):
    """(target, draft) LoadedModels of the tests' tiny pair, saved under ``folder``."""
    from conftest import CORPUS, EOS, OTHER_CORPUS, build_tiny_model, build_tokenizer
    from test_drafter_cross_tokenizer import MEMO_PROMPTS, MEMO_TOKENS, _memorize, _printable_only

    from specviz.core.engine import GenerationConfig, collect, standard_generate
    from specviz.runtime.models import encode_prompt, load_model

    tokenizer = build_tokenizer(CORPUS, 400, [EOS, "<|user|>", "<|assistant|>", "<|system|>"])
    target_dir = build_tiny_model(folder / "target", tokenizer, seed=0, num_layers=4)
    _printable_only(target_dir, tokenizer)
    target = load_model(str(target_dir), device="cpu")
    texts = []
    for prompt in MEMO_PROMPTS:
        ids = encode_prompt(target.tokenizer, prompt)
        run = collect(standard_generate(target, ids, GenerationConfig(max_new_tokens=MEMO_TOKENS)),
                      target.tokenizer, ids)
        texts.append(target.tokenizer.decode(ids + list(run.token_ids), skip_special_tokens=False))
    draft_tokenizer = build_tokenizer(CORPUS + OTHER_CORPUS, 330, ["<|user|>", "<|assistant|>", "<|system|>", EOS])
    draft_dir = build_tiny_model(folder / "draft", draft_tokenizer, seed=5, num_layers=2)
    _memorize(draft_dir, texts, draft_tokenizer)
    return target, load_model(str(draft_dir), device="cpu"), target_dir, draft_dir


def ours(target, draft, prompts: list[list[int]], k: int, tokens: int) -> dict:
    """specviz's cross-tokenizer drafter: pooled figures over ``prompts``."""
    from specviz.core.engine import GenerationConfig, collect, speculative_generate, standard_generate
    from specviz.drafters.cross_tokenizer import cross_tokenizer_drafter
    from specviz.measure.run_stats import RunStats

    stats, same = RunStats(), True
    for ids in prompts:
        cfg = GenerationConfig(max_new_tokens=tokens, k=k)
        base = collect(standard_generate(target, ids, cfg), target.tokenizer, ids)
        run = collect(speculative_generate(target, cross_tokenizer_drafter(target, draft), ids, cfg),
                      target.tokenizer, ids)
        same = same and run.token_ids == base.token_ids
        for event in run.events:
            stats.add(event)
    return {"tokens_per_pass": round(stats.tokens_per_pass, 3), "acceptance_rate": round(stats.acceptance_rate, 3),
            "passes": stats.passes, "ids_identical": same}


def uag(target_dir: Path, draft_dir: Path, prompts: list[list[int]], k: int, tokens: int) -> dict:
    """transformers' universal assisted generation on the same pair: pooled tokens per target pass."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()
    target_tok, draft_tok = AutoTokenizer.from_pretrained(target_dir), AutoTokenizer.from_pretrained(draft_dir)
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    calls = [0]
    hook = target.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    emitted = passes = 0
    same = True
    try:
        for ids in prompts:
            inputs = torch.tensor([ids])
            with torch.no_grad():
                plain = target.generate(inputs, do_sample=False, max_new_tokens=tokens)
                calls[0] = 0
                out = target.generate(inputs, assistant_model=draft, tokenizer=target_tok,
                                      assistant_tokenizer=draft_tok, do_sample=False, max_new_tokens=tokens)
            emitted, passes = emitted + out.shape[1] - len(ids), passes + calls[0]
            same = same and torch.equal(out[0, : plain.shape[1]], plain[0]) and out.shape == plain.shape
    finally:
        hook.remove()
    return {"tokens_per_pass": round(emitted / max(1, passes), 3), "passes": passes, "ids_identical": same}


def main(argv: list[str] | None = None) -> int:
    """Build the pair, measure both methods per k and prompt group, print (and optionally save) JSON."""
    import torch
    from test_drafter_cross_tokenizer import MEMO_PROMPTS, OTHER_PROMPT

    from specviz.runtime.models import encode_prompt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        target, draft, target_dir, draft_dir = build_pair(Path(tmp))
        groups = {"memorized": [encode_prompt(target.tokenizer, p) for p in MEMO_PROMPTS],
                  "unseen": [encode_prompt(target.tokenizer, OTHER_PROMPT)]}
        rows = []
        for k in args.ks:
            for group, prompts in groups.items():
                rows.append({"k": k, "prompts": group, "specviz": ours(target, draft, prompts, k, args.tokens),
                             "transformers_uag": uag(target_dir, draft_dir, prompts, k, args.tokens)})
                print(json.dumps(rows[-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"tokens": args.tokens, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
