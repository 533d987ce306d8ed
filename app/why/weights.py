"""The weight formats in the Why tab: the one-token step of the target in float32, bfloat16, int8 and int4 against
the bytes its linears hold, beside the memory floor (those bytes over the measured copy bandwidth), and each
format's verify curve T(n)/T(1).

Asked for with the tab's "also measure the step in each weight format" box (off by default).
:func:`measure_formats` makes the formatted copies of the float32 target (:func:`specviz.runtime.weights.with_weights`: new
linears, everything else shared) and times them interleaved (:func:`specviz.measure.weights_kernel.kernel_by_format`: every
format and every n = 1..9 once per round, medians over :data:`ROUNDS` rounds after :data:`WARMUP`), with the copy
bandwidth the grid measured. :func:`weights_figure` draws step time against weight bytes and the verify curves;
:func:`weights_html` says where the step is memory-bound and where compute or dispatch takes over.
"""

from __future__ import annotations

import html
import time

import plotly.graph_objects as go
import torch

from app import render
from app.figures import COLORS
from app.why.figures import _layout, _note_below, _two_panels
from app.why.noise import BELOW_ONE, below_one, format_noise
from specviz.core.events import RunCancelled

ROUNDS, WARMUP = 4, 1
WEIGHTS_LABEL = "Also measure the step in each weight format (float32, bfloat16, int8, int4)"
WEIGHTS_INFO = ("Makes three formatted copies of the target's linear layers (about 500 MB more for the embedded "
                "model) and times each: half a minute to a minute more on 2 CPUs. int8 and int4 run on the CPU only.")
NEAR_FLOOR = 2.0  # a step within this many times its floor reads as memory-bound
FORMAT_COLORS = {"float32": COLORS["baseline"], "bfloat16": COLORS["bonus"], "int8": COLORS["recovered"],
                 "int4": COLORS["speculative"]}


def _formats(device: torch.device) -> tuple[tuple[str, ...], str]:
    """(the formats to time on ``device``, a note on the ones left out: "" on the CPU)."""
    from specviz.runtime.weights.formats import CPU_ONLY, FORMATS

    if device.type == "cpu":
        return FORMATS, ""
    kept = tuple(f for f in FORMATS if f not in CPU_ONLY)
    return kept, f" {' and '.join(CPU_ONLY)} were left out: their kernels run on the CPU only."


def measure_formats(loaded, bandwidth_gbs: float | None, say, should_stop) -> dict | None:
    """Time ``loaded``'s one-token step and verify curve in each weight format (see the module).

    Args:
        loaded: the target as the tab loaded it (a formatted one is measured from its float32 original).
        bandwidth_gbs: the copy bandwidth the grid measured (GB/s), the floors' denominator; None: measured here.
        say: ``say(message)``, the progress of the copies and the rounds (in the job's thread).
        should_stop: True once the measurement is to stop (checked after each format's copy and each round).

    Returns:
        :func:`specviz.measure.weights_kernel.kernel_by_format`'s result plus "left_out" (a sentence or "") and "seconds";
        {"error": one sentence} when a format cannot be made or timed here; None when stopped.
    """
    from specviz.runtime.weights import WeightsError
    from specviz.measure.weights_kernel import kernel_by_format
    from specviz.runtime.weights.loaded import float_target

    target = float_target(loaded)
    formats, left_out = _formats(target.device)
    started = time.monotonic()

    def progress(message: str) -> None:
        say(f"Weight formats: {message}")
        if should_stop():
            raise RunCancelled()

    def after_round(i: int) -> None:
        progress(f"round {i} of {ROUNDS + WARMUP} timed" + (" (warm-up)" if i <= WARMUP else ""))

    try:
        result = kernel_by_format(target, formats, rounds=ROUNDS, warmup=WARMUP, progress=progress,
                                  bandwidth_gbs=bandwidth_gbs, after_round=after_round)
    except RunCancelled:
        return None
    except (WeightsError, RuntimeError, ValueError, OSError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return {"error": f"The weight formats were not measured: {first.rstrip('.')}."}
    return {**result, "left_out": left_out, "seconds": time.monotonic() - started}


def weights_figure(result: dict) -> go.Figure:
    """Left: ms per one-token step against MB of linears read per step, one point per format (error bars: the
    fastest and slowest round) and the memory floor line (MB / copy bandwidth). Right: each format's T(n)/T(1)
    against n beside the diagonal of n separate steps."""
    layout = _layout(440)
    (a, _, _), (b, _, _) = _two_panels(layout, ("One-token step vs weight bytes", "Cost of n tokens, per format"))
    formats, bandwidth = result["formats"], result["copy_bandwidth_gbs"]
    top = max(f["linear_mb"] for f in formats.values()) * 1.3  # room for the labels right of the points
    layout[f"xaxis{a}"] |= {"title": {"text": "MB of linears read per step"}, "range": [0, top]}
    layout[f"yaxis{a}"] |= {"title": {"text": "ms per step"}, "rangemode": "tozero"}
    layout[f"xaxis{b}"] |= {"type": "log", "title": {"text": "new tokens n"}, "tickvals": [1, 2, 4, 8]}
    layout[f"yaxis{b}"] |= {"type": "log", "title": {"text": "T(n) / T(1)"},
                            "tickvals": [0.25, 0.5, 1, 2, 4, 8], "ticktext": ["0.25", "0.5", "1", "2", "4", "8"]}
    data = [{"type": "scatter", "mode": "lines", "x": [0, top], "y": [0, top / bandwidth], "xaxis": f"x{a}",
             "yaxis": f"y{a}", "name": f"memory floor (bytes / {bandwidth:.1f} GB/s copy bandwidth)",
             "line": {"color": COLORS["accepted"], "dash": "dash", "width": 2}, "hoverinfo": "skip"}]
    for fmt, fig in formats.items():
        color = FORMAT_COLORS.get(fmt, COLORS["other"])
        low, high = fig.get("step_ms_range") or (fig["step_ms"], fig["step_ms"])
        data.append({"type": "scatter", "mode": "markers+text", "x": [fig["linear_mb"]], "y": [fig["step_ms"]],
                     "name": fmt, "legendgroup": fmt, "text": [fmt], "textposition": "middle right",
                     "marker": {"size": 11, "color": color},
                     "error_y": {"type": "data", "symmetric": False, "array": [high - fig["step_ms"]],
                                 "arrayminus": [fig["step_ms"] - low], "color": color},
                     "hovertemplate": f"{fmt}: {fig['linear_mb']:.0f} MB, {fig['step_ms']:.1f} ms a step (rounds "
                                      f"{low:.1f}–{high:.1f}), {fig['step_over_floor']:.1f}× its floor"
                                      "<extra></extra>", "xaxis": f"x{a}", "yaxis": f"y{a}"})
        ns = sorted(int(n) for n in fig["verify"])
        data.append({"type": "scatter", "mode": "lines+markers", "x": ns, "y": [fig["verify"][n] for n in ns],
                     "name": fmt, "legendgroup": fmt, "showlegend": False, "line": {"color": color, "width": 3},
                     "hovertemplate": f"{fmt}, n=%{{x}}: %{{y:.2f}} steps<extra></extra>",
                     "xaxis": f"x{b}", "yaxis": f"y{b}"})
    data += _noisy_rings(formats, b)
    ns = sorted(int(n) for n in next(iter(formats.values()))["verify"])
    data.append({"type": "scatter", "mode": "lines", "x": ns, "y": ns, "name": "n separate one-token steps",
                 "line": {"color": COLORS["baseline"], "dash": "dot", "width": 2}, "xaxis": f"x{b}", "yaxis": f"y{b}",
                 "hovertemplate": "n steps: %{y}<extra></extra>"})
    rings = "<br>○ too noisy to tell: below one step or rounds far apart" if _noisy_rings(formats, b) else ""
    _note_below(layout, b, f"Medians of {result['settings']['rounds']} interleaved rounds;<br>bars: fastest and "
                f"slowest round{rings}", COLORS["baseline"])
    return go.Figure({"data": data, "layout": layout})


def _noisy_rings(formats: dict, b: int) -> list[dict]:
    """Rings on the verify curves' points that are noise (panel ``b``): every point of a format whose rounds spread
    too far (:func:`app.why.noise.format_noise`), and any T(n)/T(1) below :data:`app.why.noise.BELOW_ONE`; [] when
    none. One legend entry, "too noisy to tell"."""
    traces = []
    for fmt, fig in formats.items():
        verify = {int(n): v for n, v in fig["verify"].items()}
        wide = format_noise({"step_ms_range": fig.get("step_ms_range")})
        ns = sorted(verify) if wide else below_one(fig)
        if not ns:
            continue
        why = wide or f"T(n)/T(1) below {BELOW_ONE:g}: more tokens timed cheaper than one"
        traces.append({"type": "scatter", "mode": "markers", "x": ns, "y": [verify[n] for n in ns],
                       "name": "too noisy to tell", "legendgroup": "too-noisy", "showlegend": not traces,
                       "marker": {"symbol": "circle-open", "size": 17, "color": "#24292f", "line": {"width": 2}},
                       "hovertemplate": f"{fmt}, n=%{{x}}: %{{y:.2f}} steps, too noisy to tell "
                                        f"({html.escape(why)})<extra></extra>", "xaxis": f"x{b}", "yaxis": f"y{b}"})
    return traces


def _verify_at(fig: dict, n: int = 5) -> float | None:
    """T(n)/T(1) of one format (the verify dict's keys may be ints or, after a JSON round trip, strings)."""
    verify = {int(m): v for m, v in fig["verify"].items()}
    return verify.get(n)


def weights_html(result: dict | None, busy: str | None = None) -> str:
    """The paragraph under the cards: step time against bytes, which formats run near their memory floor and which
    far above it, and how each format's cost of verifying k = 4 grows; one sentence for a failure; "" when nothing
    was asked. Formats whose rounds are too noisy (:func:`app.why.noise.format_noise`) are named with why, beside
    ``busy`` (other programs' share of the CPU, :func:`specviz.measure.machine.busy_machine_warning`, or None), and
    then no curve is read against another."""
    if not result:
        return ""
    if "error" in result:
        return f"<div class='why-note why-weights' style='margin-top:12px'>{html.escape(result['error'])}</div>"
    formats = result["formats"]
    steps = ", ".join(f"{fmt} {f['step_ms']:.1f} ms for {f['linear_mb']:.0f} MB" for fmt, f in formats.items())
    near = [fmt for fmt, f in formats.items() if f["step_over_floor"] <= NEAR_FLOOR]
    far = [f"{fmt} ({f['step_over_floor']:.1f}×)" for fmt, f in formats.items() if f["step_over_floor"] > NEAR_FLOOR]
    bound = (f"<b>Memory-bound</b> (within {NEAR_FLOOR:g}× of the floor, the time to read those bytes once): "
             f"{', '.join(near)}: the step waits on the weights, so fewer bytes make it faster. " if near else
             f"No format ran within {NEAR_FLOOR:g}× of its floor here. ")
    if far:
        bound += (f"<b>Far above the floor</b>: {', '.join(far)}: there the kernels' dispatch and arithmetic (and "
                  "the de-quantizing of packed weights) take over from reading. ")
    curves = ", ".join(f"{fmt} {_verify_at(f):.2f}" for fmt, f in formats.items() if _verify_at(f) is not None)
    noisy = {fmt: why for fmt, f in formats.items() if (why := format_noise(f))}
    verdict = _noisy_formats_text(noisy, busy) if noisy else _int4_verdict(formats)
    return (f"<div class='why-note why-weights' style='margin-top:12px'><b>Step time against weight bytes</b>: "
            f"{steps} (copy bandwidth {result['copy_bandwidth_gbs']:.1f} GB/s, {render.plural(result['threads'], 'thread')}). {bound}"
            f"Verifying k = 4, T(5)/T(1): {curves}.{html.escape(verdict + result.get('left_out', ''))} Timed "
            f"interleaved in {result['seconds']:.0f} s.</div>")


def _int4_verdict(formats: dict) -> str:
    """Whether int4's verify curve rises above float32's, in one sentence ("" without both formats)."""
    if "int4" not in formats or "float32" not in formats:
        return ""
    flatter = _verify_at(formats["int4"]) > _verify_at(formats["float32"])
    fewer = formats["float32"]["linear_mb"] / formats["int4"]["linear_mb"]
    return (f" int4's curve rises above float32's: with {fewer:.1f}× fewer bytes the arithmetic is no longer "
            "hidden behind the reads, and verifying drafts stops being nearly free." if flatter else
            " int4's curve came out no steeper than float32's here: measure again when the machine is quieter.")


def _noisy_formats_text(noisy: dict[str, str], busy: str | None) -> str:
    """The sentence for formats too noisy to tell (``noisy``: format → why, :func:`app.why.noise.format_noise`):
    no curve is compared, and ``busy`` (other programs' CPU share) is said when known."""
    named = "; ".join(f"{fmt}: {why}" for fmt, why in noisy.items())
    share = f" ({busy.removeprefix('warning: ')})" if busy else ""
    below = any("below one" in w for w in noisy.values())
    apart = any("across rounds" in w for w in noisy.values())
    why = " and ".join(text for text, found in (
        ("a forward over more tokens cannot take less time than over one", below),
        ("rounds this far apart timed other programs as much as the step", apart)) if found)
    return (f" Too noisy to tell{share}: {named}. {why[:1].upper() + why[1:]}, so no curve is read against "
            "another here (the noisy points are ringed on the chart); measure again when the machine is quieter.")
