"""What the end-to-end bench reports besides its figures: the definitions it writes next to them, the trained
drafters' goals checked on a result (:func:`head_targets`), and the readable table of a result
(:func:`format_bench`)."""

from __future__ import annotations

from specviz.analysis.exactness import divergence_line
from specviz.runtime.compiled import COMPILING_NOTE
from specviz.drafters.registry import HEAD_KEYS, split_variant
from specviz.measure.costs import lookahead_cost_line
from specviz.measure.kernel import _fmt


HEAD_TARGETS = {"eagle_chain_k4_tokens_per_pass": 2.5, "tree_tokens_per_pass": 3.0, "medusa_k4_tokens_per_pass": 1.8,
                "best_trained_speedup": 1.5}
OPEN_ENDED = ("chat", "qa", "math", "translation")  # categories where the output is not copied from the prompt


def head_targets(overall: dict, per_category: dict) -> dict | None:
    """The trained drafters' targets (issue: EAGLE/Medusa heads) checked on a bench result, or None when no
    eagle/medusa method ran: EAGLE chain k=4 tokens per pass >= 2.5, the best tree >= 3.0, the best trained
    drafter's speedup >= 1.5, and per open-ended category the best trained drafter's tokens/s against n-gram's.
    Lookup-first variants ("eagle:lookup") do not count as trained drafters here: part of their drafts are copies."""

    def is_trained(name: str) -> bool:  # "ours/eagle:tree@k4" yes, "ours/eagle:lookup@k4" and "ours/ngram@k4" no
        try:
            v = split_variant(name.split("/")[1].split("@")[0])
        except ValueError:  # "ours/standard", transformers' methods
            return False
        return v.base in HEAD_KEYS and not v.lookup

    methods = overall["methods"]
    trained = {n: f for n, f in methods.items() if n.startswith("ours/") and is_trained(n)}
    if not trained:
        return None

    def best(figs: dict, key: str):
        pairs = [(f.get(key), n) for n, f in figs.items() if f.get(key) is not None]
        return max(pairs) if pairs else (None, None)

    chain = methods.get("ours/eagle@k4", {}).get("tokens_per_pass")
    tree_value, tree_name = best({n: f for n, f in trained.items() if ":tree" in n}, "tokens_per_pass")
    medusa_value, medusa_name = best({n: f for n, f in trained.items() if n.startswith("ours/medusa")
                                      and n.endswith("@k4")}, "tokens_per_pass")
    speed_value, speed_name = best(trained, "speedup")
    out = {
        "eagle_chain_k4_tokens_per_pass": {"value": chain, "goal": HEAD_TARGETS["eagle_chain_k4_tokens_per_pass"]},
        "tree_tokens_per_pass": {"value": tree_value, "method": tree_name, "goal": HEAD_TARGETS["tree_tokens_per_pass"]},
        "medusa_k4_tokens_per_pass": {"value": medusa_value, "method": medusa_name,
                                      "goal": HEAD_TARGETS["medusa_k4_tokens_per_pass"]},
        "best_trained_speedup": {"value": speed_value, "method": speed_name, "goal": HEAD_TARGETS["best_trained_speedup"]},
        "vs_ngram_by_category": {},
    }
    for target in HEAD_TARGETS:
        value = out[target]["value"]
        out[target]["met"] = None if value is None else value >= out[target]["goal"]
    for category, summary in per_category.items():
        figs = summary["methods"]
        ngram, _ = best({n: f for n, f in figs.items() if n.startswith("ours/ngram")}, "tokens_per_s")
        mine, name = best({n: f for n, f in figs.items() if n in trained}, "tokens_per_s")
        if ngram is not None and mine is not None:
            out["vs_ngram_by_category"][category] = {"trained": name, "trained_tokens_per_s": mine,
                                                     "ngram_tokens_per_s": ngram, "ratio": mine / ngram,
                                                     "open_ended": category in OPEN_ENDED}
    return out


DEFINITIONS = {
    "tokens_per_s": "generated tokens / wall seconds of the whole call (prefill included, loading excluded)",
    "speedup": "tokens/s over the standard decoding tokens/s of the same implementation",
    "baseline_ratio_vs_transformers": "our standard decoding tokens/s / transformers generate() greedy tokens/s",
    "speedup_ratio_vs_transformers": "our speedup / transformers' speedup with the same drafter and k",
    "tokens_per_pass": "tokens after the prefill / target passes after the prefill (bonus included); not for "
                       "transformers' assisted generate(), which has no separate prefill",
    "tokens_per_forward": "generated tokens / every target forward, the prefill included (all methods)",
    "acceptance_rate": "accepted / drafted (bonus excluded); ours only",
    "ids_identical_to_transformers": "every output of ours has the ids of transformers' greedy generate()",
    "ids_identical_to_standard": "greedy: a speculative output has exactly the ids of our standard decoding of the "
                                 "same target copy; where not, first_divergence = the output position of the first "
                                 "differing token, top2_gap = the baseline's top-2 logit gap there, divergence_reason "
                                 "= why it can happen in this dtype (specviz.analysis.exactness)",
    "aggregation": "pooled over prompts: total tokens / total seconds, total accepted / total drafted",
    "paired": "with --paired: each of our speculative runs advanced one pass at a time together with a standard "
              "run of its own, each timed on its own clock; speedup = its tokens/s over those standard runs' "
              "tokens/s, tokens and seconds summed over every pair; speedup_quartiles = quartiles of the single "
              "pairs' ratios",
}


def format_bench(result: dict) -> str:
    """A readable table of :func:`run_bench`'s result."""
    lines = [COMPILING_NOTE] if result.get("compiling") else []
    header = (f"{'category':<15}{'method':<26}{'tok/pass':>9}{'tok/fwd':>8}{'accept':>8}{'tok/s':>8}"
              f"{'speedup':>9}{'ids=HF':>8}")
    sections = list(result["categories"].items()) + [("OVERALL", result["overall"])]
    lines.append(header)
    lines.append("-" * len(header))
    for category, summary in sections:
        for i, (name, fig) in enumerate(summary["methods"].items()):
            same = fig.get("ids_identical_to_transformers")
            lines.append(f"{category if i == 0 else '':<15}{name:<26}{_fmt(fig['tokens_per_pass']):>9}"
                         f"{_fmt(fig['tokens_per_forward']):>8}{_fmt(fig['acceptance_rate']):>8}{_fmt(fig['tokens_per_s'], '.1f'):>8}"
                         f"{_fmt(fig['speedup']):>9}{'-' if same is None else ('yes' if same else 'NO'):>8}"
                         + _paired_cell(fig))
        if summary["baseline_ratio_vs_transformers"] is not None:
            ratios = ", ".join(f"{v}: {_fmt(r)}" for v, r in summary["speedup_ratio_vs_transformers"].items())
            lines.append(f"{'':<15}baseline ours/transformers: {_fmt(summary['baseline_ratio_vs_transformers'])}; "
                         f"speedup ours/transformers: {ratios or '-'}")
    lines.append("")
    same = result["ids_identical_to_transformers"]
    lines.append("ids identical to transformers' greedy: " + ("not checked (no transformers runs)" if same is None
                                                               else "yes" if same else "NO"))
    if result["settings"].get("paired"):
        lines.append("paired: each ours/<drafter> speedup is against the standard runs timed in lockstep with it; "
                     "'paired runs' = quartiles of the single runs' ratios (how many runs)")
    if result.get("lookahead_cost"):
        lines.append(lookahead_cost_line(result["lookahead_cost"]))
    same = result.get("ids_identical_to_standard")
    if same is not None:
        lines.append(f"ids identical to our standard decoding ({result.get('dtype')}): " + ("yes" if same else "NO"))
    lines += _difference_lines(result)
    if result.get("suffix_note"):
        lines.append(result["suffix_note"])
    targets = result.get("head_targets")
    if targets:
        lines.append("")
        weights = result.get("settings", {}).get("head_weights")
        lines.append("trained drafters (goals of the EAGLE/Medusa issue)"
                     + (f", head weights {weights}:" if weights else ":"))
        for key, label in (("eagle_chain_k4_tokens_per_pass", "EAGLE chain k=4 tokens/pass"),
                           ("tree_tokens_per_pass", "best tree tokens/pass"),
                           ("medusa_k4_tokens_per_pass", "Medusa k=4 tokens/pass"),
                           ("best_trained_speedup", "best trained speedup")):
            fig = targets[key]
            met = "-" if fig["met"] is None else ("met" if fig["met"] else "NOT met")
            lines.append(f"  {label:<30}{_fmt(fig['value']):>7}  (goal >= {fig['goal']}: {met})"
                         + (f"  {fig['method']}" if fig.get("method") else ""))
        for category, fig in targets["vs_ngram_by_category"].items():
            lines.append(f"  {category:<15} {fig['trained']} {fig['trained_tokens_per_s']:.1f} tok/s vs n-gram "
                         f"{fig['ngram_tokens_per_s']:.1f} tok/s = {fig['ratio']:.2f}x"
                         + (" (open-ended)" if fig["open_ended"] else ""))
    m = result["machine"]
    lines.append(f"{result['target']['label']} on {result['device']['device']} ({result['target']['kernels']}); "
                 f"{m['cpu_count']} CPUs, "
                 f"{m['torch_threads']} torch threads; torch {result['versions']['torch']}, transformers "
                 f"{result['versions']['transformers']}; {result['wall_s']:.1f} s; load average at start "
                 f"{_fmt(m.get('load_average_1min'), '.1f')}, at end {_fmt(m.get('load_average_1min_end'), '.1f')}")
    return "\n".join(lines)


def _difference_lines(result: dict) -> list[str]:
    """One line per run whose greedy ids left our standard decoding's or transformers' (where and the gap)."""
    lines = []
    for rec in result["prompts"]:
        for name, res in rec["results"].items():
            if res.get("ids_identical_to_standard") is False:
                lines.append(f"  {rec['id']} {name}: {divergence_line(res | {'reason': res['divergence_reason']})}")
            if res.get("ids_identical_to_transformers") is False:
                lines.append(f"  {rec['id']} {name}: first difference at token {res['first_difference']} "
                             f"(baseline top-2 logit gap there: {_fmt(res.get('baseline_near_tie_gap'), '.4f')})")
    return lines


def _paired_cell(fig: dict) -> str:
    """The spread of a paired figure: "  paired runs 0.97-1.05 (12)" (quartiles of the single pairs' ratios, how
    many pairs), "  one paired run" (no spread to give), or "" for an unpaired figure."""
    q, runs = fig.get("speedup_quartiles"), fig.get("paired_runs")
    if not q:
        return ""
    if runs == 1:
        return "  one paired run: no spread"
    return f"  paired runs {_fmt(q[0])}-{_fmt(q[1])} ({runs})"
