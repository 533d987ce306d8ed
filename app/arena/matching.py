"""The Arena's "Poorly vs better matched draft" comparison: a preset that sets it up in one click (:func:`preset`:
the early exit and the distilled draft model, k = 4, one short category, greedy) and, after a run that raced both,
one plain sentence comparing them (:func:`sentence`).

The early exit drafts with the target's own first layers, untrained: a large draft whose distribution is far from
the target's. The distilled draft model is two layers trained on the target's outputs: a small draft taught to
follow it (the shipped one, trained on about 400 k positions, is better matched than the early exit but still
mostly rejected). The sentence reads every figure from the pooled rows the tables show (``acceptance_rate`` with its 95%
interval over the row's passes, or the Wilson interval of its counts for a row without per-pass counts,
:func:`app.arena.tables.share_interval`; ``tokens_per_pass``; and the decoding speedup
read by :func:`app.arena.tables.speedup_cell` and :func:`app.arena.verdicts.speedup_reading`, the rule every tab
uses); it computes none of them again, and it says one drafter is accepted more often only when the two acceptance
rates' intervals do not overlap.
"""

from __future__ import annotations

import gradio as gr

from app import render
from app.arena.progress import UNMEASURED, rough_estimate
from app.arena.settings import DEFAULT_MAX_NEW_TOKENS, categories, choose_prompts, max_new_tokens_used
from app.arena.shorter import quicker
from app.arena.tables import share_cell, share_interval, speedup_cell
from app.arena.verdicts import NO_SPREAD, noise_text, speedup_reading
from app.inputs import InputError
from specviz.core.verdict import FASTER, SLOWER

LABEL = "Poorly vs better matched draft"
"""The preset's button label (and the sentence's first words)."""
POOR, WELL = "early-exit", "distilled"
"""The two drafters compared: the target's first layers untrained (poorly matched), a small draft model trained on
the target's outputs (better matched, where the run shows it)."""
MOSTLY_REJECTED = 0.5
"""An acceptance rate below this: most drafted tokens were rejected."""
NAMES = {POOR: "early exit (the target's first layers, untrained)",
         WELL: "distilled draft (a few layers trained on the target's outputs)"}
SHORT = {POOR: "early exit", WELL: "distilled draft"}
K = "4"
CATEGORY = "qa"
"""The preset's category of the suite: short questions (six of them; about 8 minutes for both drafters on a 2-core
CPU shared with other work)."""
INFO = (f"{LABEL}: ticks exactly the early exit and the distilled draft, k = {K}, the {CATEGORY} category and greedy "
        "decoding; press Run arena to race them")
"""The preset status's first words; :func:`status` adds how long the race should take."""


def preset(offered: list[str]) -> dict:
    """The comparison's settings, by control: {"drafters": [early-exit, distilled], "ks": ["4"], "source":
    "category", "category": :data:`CATEGORY` (the first of the ``offered`` categories when the suite lacks it),
    "temperature": 0.0 (greedy)}. Raises ValueError when no category is offered."""
    if not offered:
        raise ValueError("the suite has no categories")
    return {"drafters": [POOR, WELL], "ks": [K], "source": "category",
            "category": CATEGORY if CATEGORY in offered else offered[0], "temperature": 0.0}


def status(max_new_tokens=None, target=None, prompt: str = "") -> str:
    """The status line once the preset is set: what it ticked, to press Run arena, and the race's rough length
    at ``max_new_tokens`` (the slider's value; its default when missing or not a number) for
    ``target`` (:func:`app.arena.progress.rough_estimate`, from the step cost measured here), or that there is none
    before the first prompt is measured. A long plan names what shortens it (:func:`app.arena.shorter.quicker`,
    the comparison's two drafters and k kept; ``prompt``: the Prompt box's text, for one prompt)."""
    try:
        tokens = max_new_tokens_used(max_new_tokens)[0]
    except InputError:
        tokens = DEFAULT_MAX_NEW_TOKENS
    prompts = choose_prompts("category", "", preset(categories())["category"])
    s = {"prompts": prompts, "drafters": [POOR, WELL], "ks": [K], "max_new_tokens": tokens,
         "target": str(target or "embedded").strip()}
    rough = rough_estimate(s)
    if rough is None:
        return render.status_html(f"{INFO} ({UNMEASURED}).", "info")
    hint = quicker(s, prompt, methods=False)
    return render.status_html(f"{INFO} (at {tokens} new tokens per run, {rough.range_text(not hint)}"
                              + (f". {hint}. This is " if hint else "; ") + f"{rough.basis_text()}; "
                              "the time left shows once the first prompt is measured).", "info")


PRESET_OUTPUTS = ("drafters", "ks", "source", "category", "temperature", "status")
"""What :func:`chosen` sets, in order (the Arena's controls, then its status line)."""


def chosen(max_new_tokens=None, target=None, prompt="") -> tuple:
    """The preset's button: the values of :data:`PRESET_OUTPUTS` (:func:`preset` on the suite's categories, then
    :func:`status` for the page's max new tokens, target and Prompt box)."""
    values = preset(categories())
    return (*(values[name] for name in PRESET_OUTPUTS[:-1]), status(max_new_tokens, target, str(prompt or "")))


def wire(button, outputs: list, inputs: list | None = None) -> None:
    """Make ``button`` (a gr.Button) set the preset: :func:`chosen` of ``inputs`` (the max new tokens slider and the
    target box, or none) into ``outputs``, the components of :data:`PRESET_OUTPUTS` in that order (in the browser's
    round trip, outside the queue: it runs nothing)."""
    button.click(chosen, inputs=inputs or [], outputs=outputs, queue=False, api_visibility="private")


READY = "Pick drafters, k and prompts, then press Run arena."
"""The status before anything is chosen (and when the chosen inputs give nothing to estimate)."""
MARK = "press Run arena"
"""In every status line that only says what Run arena would do (:data:`READY`, :func:`status`,
:func:`settings_status`): :func:`refresh` replaces those, never a run's progress or results."""


def settings_status(drafters, ks, source, prompt, category, max_new_tokens, target) -> str:
    """The status line for the Arena's chosen inputs before Run arena: the preset's (:func:`status`) while they are
    the preset's drafters, k, source and category, else "6 prompts × 2 methods at 16 new tokens per run:
    about …; a rough estimate from …; press Run arena to race them", or :data:`READY` while they choose no prompt,
    drafter or k, or hold a max new tokens that is not a number."""
    drafters, ks = list(drafters or []), list(ks or [])
    chosen = preset(categories())
    if (sorted(drafters), ks, source, category) == (sorted(chosen["drafters"]), chosen["ks"], chosen["source"],
                                                    chosen["category"]):
        return status(max_new_tokens, target, str(prompt or ""))
    try:
        prompts = choose_prompts(str(source or ""), str(prompt or ""), str(category or ""))
        tokens = max_new_tokens_used(max_new_tokens)[0]
    except InputError:
        prompts, tokens = [], 0
    if not prompts or not drafters or not ks:
        return render.status_html(READY, "info")
    what = (f"{render.plural(len(prompts), 'prompt')} × {render.plural(len(drafters) * len(ks), 'method')} at "
            f"{tokens} new tokens per run")
    s = {"prompts": prompts, "drafters": drafters, "ks": ks, "max_new_tokens": tokens,
         "target": str(target or "embedded").strip()}
    rough = rough_estimate(s)
    if rough is None:
        return render.status_html(f"{what}: {UNMEASURED}; {MARK} to race them.", "info")
    hint = quicker(s, str(prompt or ""))  # a long plan: what shortens it most, and to what
    said = f"{rough.range_text(False)}. {hint}. This is " if hint else f"{rough.range_text()}; "
    return render.status_html(f"{what}: {said}{rough.basis_text()}; {MARK} to race them.", "info")


REFRESH_INPUTS = ("status", "drafters", "ks", "source", "prompt", "category", "max_new_tokens", "target")
"""What :func:`refresh` reads, in order (the status line, then the inputs the estimate follows)."""


def refresh(shown, drafters, ks, source, prompt, category, max_new_tokens, target):
    """On a change of an input the estimate follows: the status line ``shown`` (its HTML) again for the inputs now
    (:func:`settings_status`), while it only says what Run arena would do (it holds :data:`MARK`); gr.skip() for a
    run's progress or results, and for a max new tokens outside the slider's range (its own check says so)."""
    if MARK not in str(shown or ""):
        return gr.skip()
    try:
        if max_new_tokens_used(max_new_tokens)[1] is not None:
            return gr.skip()
    except InputError:
        return gr.skip()
    return settings_status(drafters, ks, source, prompt, category, max_new_tokens, target)


def refresh_unless_running(request: gr.Request, *values):
    """:func:`refresh` of ``values`` (its arguments in order), or gr.skip() while ``request``'s session has an arena
    run registered: ``shown`` was read when the change was sent, and an answer after Run arena was pressed must not
    cover the run's status (a trial's page read "press Run arena to race them" for 400 s while its run waited for
    the device)."""
    from app.arena.handlers import RUNS  # the handlers import this module

    return gr.skip() if RUNS.running(request) else refresh(*values)


def wire_refresh(components: dict, tab: gr.Tab | None = None) -> None:
    """Make every input of :data:`REFRESH_INPUTS` after the status (``components``: name -> component) refresh the
    status line (:func:`refresh`, unless the session's run is registered: :func:`refresh_unless_running`) when the
    visitor changes it (``input``, not ``change``: a value the app itself
    sets, as the slider's clamp to 8 with its own status line, must not be answered by an estimate over that line),
    on page load (the defaults are ticked: the page said only :data:`READY` until the visitor changed
    something), and when the visitor opens the Arena's ``tab`` (its ``select``; a trial: after several Live runs the
    tab still said the page load's "no step time measured ..." until a box changed), in the browser's round trip,
    outside the queue: it reads measured costs and the load average, nothing more. Raw values (preprocess off): a
    number typed outside the slider's range reaches :func:`refresh`, which leaves it to the slider's own check,
    instead of Gradio's range error.

    ``always_last``: the slider's box sends an ``input`` per keystroke, and with Gradio's default trigger mode
    ("once") one sent while the previous was unanswered was dropped: 24 typed sent only "2" (out of range, left to
    its check), and the status kept the estimate for 48 (5 of 9 tries in a trial). The box's ``release`` stays the
    clamp's alone (:func:`app.messages.tell_when_clamped`): an estimate there would race its line."""
    inputs = [components[name] for name in REFRESH_INPUTS]
    options = dict(inputs=inputs, outputs=[components["status"]], queue=False, preprocess=False,
                   show_progress="hidden", api_visibility="private")
    for name in REFRESH_INPUTS[1:]:
        components[name].input(refresh_unless_running, trigger_mode="always_last", **options)
    gr.context.Context.root_block.load(refresh_unless_running, **options)
    if tab is not None:
        tab.select(refresh_unless_running, **options)


def _pair(summary: list[dict]) -> tuple[dict, dict] | None:
    """The overall ("all") pooled rows of the early exit and the distilled draft at the same k (k = 4 when both
    ran it, else the first k both ran, in the rows' order); None unless both ran."""
    rows = [r for r in summary if r.get("level") == "overall" and r.get("drafter") in (POOR, WELL)]
    ks = [r["k"] for r in rows if r["drafter"] == POOR]
    shared = [k for k in ks if any(r["drafter"] == WELL and r["k"] == k for r in rows)]
    if not shared:
        return None
    k = K if K in shared else shared[0]
    pick = {r["drafter"]: r for r in rows if r["k"] == k}
    return pick[POOR], pick[WELL]


def _counted(row: dict) -> str:
    """"early exit (the target's first layers, untrained): acceptance rate 2% (1–7%), 1.08 tokens per pass"
    from a row's own figures (the rate with its interval, :func:`app.arena.tables.share_cell`; "–" for one it
    lacks)."""
    tokens = row.get("tokens_per_pass")
    tokens_text = "–" if tokens is None else f"{tokens:.2f}"
    return (f"{NAMES[row['drafter']]}: acceptance rate {share_cell(row, 'acceptance_rate')}, {tokens_text} tokens "
            "per pass")


def _rejected(a: float, b: float) -> str:
    """" Both are mostly rejected: 1% of the early exit's drafted tokens accepted against 5% of the distilled
    draft's." when both rates (early exit ``a``, distilled ``b``, in [0, 1]) lie below :data:`MOSTLY_REJECTED`; ""
    otherwise."""
    if a < MOSTLY_REJECTED and b < MOSTLY_REJECTED:
        return (f" Both are mostly rejected: {a:.0%} of the {SHORT[POOR]}'s drafted tokens accepted against {b:.0%} "
                f"of the {SHORT[WELL]}'s.")
    return ""


def _acceptance_meaning(poor: dict, well: dict) -> str:
    """What the two acceptance rates say about matching: a drafter is said to be accepted more often only when the
    rows' intervals (:func:`app.arena.tables.share_interval`: over their passes, resampled whole, since a pass's
    tokens after a rejection are rejected together; Wilson on the counts only for a row without per-pass counts) do
    not overlap; otherwise the difference is too small to tell on this run. Adds whether both are mostly rejected
    (:func:`_rejected`)."""
    a, b = share_interval(poor, "acceptance_rate"), share_interval(well, "acceptance_rate")
    if a is None or b is None:
        return "Without drafted tokens on both sides there is no acceptance to compare."
    rejected = _rejected(a.value, b.value)
    if b.low > a.high:
        return ("The distilled draft, the smaller model, is accepted more often (the two rates' intervals do not "
                "overlap): it is better matched to the target, so matching, not size, decides acceptance."
                + rejected)
    if a.low > b.high:
        return ("Here the early exit is accepted more often (the two rates' intervals do not overlap), so this run "
                "does not show what training on the target's outputs buys." + rejected)
    return ("The difference in acceptance is too small to tell on this run: the two rates' intervals overlap."
            + rejected)


def _pays(row: dict) -> str:
    """Whether a drafter pays, by the rule's reading of its decoding speedup: "the early exit does not pay"
    (slower), "the distilled draft pays" (faster), "the distilled draft costs about what it saves", or why it cannot
    be told in the page's words (:func:`app.arena.verdicts.noise_text`): "for the early exit, too noisy to tell: its
    ratios on both sides of 1"."""
    name = SHORT[row["drafter"]]
    noise = noise_text(row)
    if noise:
        return f"for the {name}, {noise}"
    read = speedup_reading(row)
    if read is None:
        return f"for the {name}, it cannot be told ({NO_SPREAD})"
    return {FASTER: f"the {name} pays", SLOWER: f"the {name} does not pay"}.get(
        read.word, f"the {name} costs about what it saves")


def sentence(summary: list[dict]) -> str | None:
    """One plain paragraph comparing the early exit and the distilled draft from the pooled rows ``summary``
    (:attr:`specviz.analysis.arena_rows.ArenaResult.summary`): the acceptance rate and tokens per pass of each, their
    decoding speedups with spread (:func:`app.arena.tables.speedup_cell`; too noisy to tell when the rule says so),
    and what it means; None unless both drafters ran at a common k."""
    pair = _pair(summary)
    if pair is None:
        return None
    poor, well = pair
    prompts = render.plural(int(well.get("prompts") or 0), "prompt")
    counted = f"{LABEL} (k = {well['k']}, {prompts}): {_counted(poor)}; {_counted(well)}."
    speeds = (f"Speedup, decode: {SHORT[POOR]} {speedup_cell(poor, 'decode_speedup')}, {SHORT[WELL]} "
              f"{speedup_cell(well, 'decode_speedup')}.")
    cost = f"Cost decides whether a draft pays: {_pays(poor)}; {_pays(well)}."
    return " ".join((counted, speeds, _acceptance_meaning(poor, well), cost))
