"""The offloaded case in the Why tab: the verify curve T(n)/T(1) of the target with its decoder layers offloaded,
beside the same target held whole on the device, drawn on the forward chart and read in one paragraph.

Asked for with the tab's "also measure offloaded" box (off by default). :func:`measure_offloaded` loads two copies
of the target with :func:`specviz.runtime.placement.load_placed`, so both run the default kernels on the eager path: one
whole on the main device, one whose decoder layers are streamed to it at every forward (on the CPU: read from disk
through accelerate's offload folder, a temporary one; on a GPU: kept in CPU memory and copied to the GPU), and times
them interleaved (:func:`specviz.analysis.offload.time_curves`, n = 1..9 new tokens, one warm-up and three timed
rounds). :func:`add_offload_lines` draws both curves on the chart's T(n)/T(1) panel; :func:`offload_html` says which
is flatter, why, and the implied speedup of each at the run's tokens per pass.
"""

from __future__ import annotations

import html
import tempfile
import time

import plotly.graph_objects as go
import torch

from app.figures import COLORS
from specviz.analysis.offload import TOKEN_COUNTS, curve_figures, implied_speedup, line_fit, time_curves
from specviz.core.costs import expected_tokens_per_pass
from specviz.core.events import RunCancelled

ROUNDS, WARMUP = 3, 1
OFFLOAD_LABEL = "Also measure with the target's layers offloaded (to disk; to CPU memory on a GPU)"
OFFLOAD_INFO = ("Loads two more copies of the target (one whole, one streaming its layers at every forward) and times "
                "both: half a minute to a minute more for the embedded model on 2 CPUs.")
DEFAULT_K = 4  # the k read without a run in the run boxes


def _where() -> tuple[object, str, str]:
    """(main device, where the layers go, in words): GPU 0 and CPU memory on a machine with CUDA, else the CPU and
    the disk."""
    return (0, "cpu", "CPU memory") if torch.cuda.is_available() else ("cpu", "disk", "disk")


def _layer_names(model: torch.nn.Module) -> list[str]:
    """The module names of ``model``'s decoder layers."""
    from specviz.runtime.placement import decoder_layers

    layers = {id(layer) for layer in decoder_layers(model)}
    return [name for name, module in model.named_modules() if id(module) in layers]


def measure_offloaded(spec: str, say, should_stop) -> dict | None:
    """Time the verify curve of ``spec`` held whole and with its decoder layers offloaded (see the module).

    Args:
        spec: the target, as the tab's box names it.
        say: ``say(message)``, the progress of the loads and the rounds (in the job's thread).
        should_stop: True once the measurement is to stop (checked after each round).

    Returns:
        {"figures": {"memory": ..., "offloaded": ...} (:func:`specviz.analysis.offload.curve_figures`), "where":
        "disk" or "CPU memory", "label", "seconds"}; {"error": one sentence} when the target cannot be placed or
        timed so; None when stopped.
    """
    from specviz.runtime.models import ModelLoadError
    from specviz.runtime.placement import load_placed

    main, streamed, words = _where()
    started = time.monotonic()

    def round_done(message: str) -> None:
        say(f"Timing the target offloaded to {words}: {message}")
        if should_stop():
            raise RunCancelled()

    try:
        with tempfile.TemporaryDirectory(prefix="specviz-why-offload-") as folder:
            say("Loading the target whole, with the default kernels…")
            whole = load_placed(spec, device_map={"": main})
            say(f"Loading the target with its layers on {words}…")
            plan = {"": main, **{name: streamed for name in _layer_names(whole.model)}}
            offloaded = load_placed(spec, device_map=plan, offload_folder=folder)
            times = time_curves({"memory": whole.model, "offloaded": offloaded.model}, whole.device,
                                rounds=ROUNDS, warmup=WARMUP, progress=round_done)
    except RunCancelled:
        return None
    except (ModelLoadError, ValueError, RuntimeError, OSError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return {"error": f"The offloaded curve was not measured: {first.rstrip('.')}."}
    return {"figures": {name: curve_figures(t) for name, t in times.items()}, "where": words,
            "label": offloaded.label, "seconds": time.monotonic() - started}


def add_offload_lines(figure: go.Figure, offload: dict | None) -> go.Figure:
    """Draw the two curves of :func:`measure_offloaded` on the T(n)/T(1) panel (axes x2, y2) of the forward chart
    (:func:`app.why.figures.forward_figure`); ``figure`` unchanged without a measured offload. Returns it."""
    if not offload or "figures" not in offload:
        return figure
    styles = {"memory": ("whole, default kernels", COLORS["accepted"], "dash"),  # grey dots: the diagonal's
              "offloaded": (f"layers offloaded to {offload['where']}", COLORS["rejected"], "solid")}
    for name, (words, color, dash) in styles.items():
        curve = offload["figures"][name]
        ns = sorted(curve)
        text = [f"{words}, {n} new token{'s' if n > 1 else ''}: {curve[n]['ms']:.1f} ms, "
                f"T({n})/T(1) = {curve[n]['ratio']:.2f}" for n in ns]
        figure.add_trace(go.Scatter(x=ns, y=[curve[n]["ratio"] for n in ns], mode="lines+markers",
                                    name=f"batch 1, {words}", line={"color": color, "width": 3, "dash": dash},
                                    marker={"size": 6}, text=text, hovertemplate="%{text}<extra></extra>",
                                    xaxis="x2", yaxis="y2"))
    return figure


def run_reading(alpha, run: dict | None) -> tuple[int, float, str]:
    """(k, tokens per pass, whose) to read the curves at: the marked run's (``run``: :func:`app.why.controls.run_point`)
    with k within the measured n (k + 1 <= 9), else k = 4 at the what-if's α."""
    top = max(TOKEN_COUNTS) - 1
    if run:
        k = min(int(run["k"]), top)
        tau = min(float(run["tokens_per_pass"]), k + 1)
        cut = f", read at k = {k}: the largest measured" if k < int(run["k"]) else ""
        return k, tau, f"your run's k = {int(run['k'])} and {run['tokens_per_pass']:g} tokens per pass{cut}"
    alpha = min(max(float(alpha) if alpha is not None else 0.7, 0.0), 1.0)
    tau = expected_tokens_per_pass(alpha, DEFAULT_K)
    return DEFAULT_K, tau, f"k = {DEFAULT_K} and {tau:.2f} tokens per pass (α = {alpha:.2f}; no run marked)"


def offload_html(offload: dict | None, alpha, run: dict | None) -> str:
    """The paragraph under the cards: which curve is flatter and why, the fits' fixed and per-token ms, and each
    copy's implied speedup at the run's tokens per pass (:func:`run_reading`); one sentence for a failure; "" when
    nothing was asked."""
    if not offload:
        return ""
    if "error" in offload:
        return f"<div class='why-note why-offload' style='margin-top:12px'>{html.escape(offload['error'])}</div>"
    memory, offloaded, where = offload["figures"]["memory"], offload["figures"]["offloaded"], offload["where"]
    last = max(memory)
    flat_m, flat_o = memory[last]["ratio"], offloaded[last]["ratio"]
    (fixed_m, per_m), (fixed_o, per_o) = line_fit(memory), line_fit(offloaded)
    if flat_o < flat_m:
        verdict = (f"<b>The offloaded curve is flatter</b>: {last} new tokens cost {flat_o:.2f} one-token steps "
                   f"with the layers on {where} against {flat_m:.2f} whole. A forward of the offloaded target first "
                   f"streams every layer's weights from {where}, the same whether it checks 1 token or k+1; only the "
                   "arithmetic grows with n, and it is the same arithmetic in both copies.")
    else:
        verdict = (f"<b>The offloaded curve came out no flatter here</b> ({flat_o:.2f} against {flat_m:.2f} steps for "
                   f"{last} tokens): streaming is a fixed cost per forward, so this is noise from other work on the "
                   "machine; measure again when it is quieter.")
    k, tau, whose = run_reading(alpha, run)
    speed_m, speed_o = (implied_speedup(tau, f[k + 1]["ratio"]) for f in (memory, offloaded))
    return (f"<div class='why-note why-offload' style='margin-top:12px'>{verdict} Line fits: whole {fixed_m:.0f} ms "
            f"per forward + {per_m:.1f} ms per token; offloaded {fixed_o:.0f} ms + {per_o:.1f} ms per token. At "
            f"{html.escape(whose)}, a pass would run <b>{speed_o:.2f}×</b> standard decoding offloaded and "
            f"{speed_m:.2f}× whole (τ·T(1)/T(k+1), the draft's own cost left out). Timed interleaved on "
            f"{html.escape(offload['label'])} in {offload['seconds']:.0f} s; both copies run the default kernels, "
            "so the whole copy's curve differs from the tuned one above.</div>")
