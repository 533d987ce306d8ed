"""Weight formats for a loaded target: float32, bfloat16, int8 and int4 weight-only (docs/weights.md).

- :mod:`specviz.runtime.weights.linears`: the formatted linear layers and their quantizers (torch's own CPU kernels).
- :mod:`specviz.runtime.weights.fused`: q/k/v and gate/up computed as one formatted linear per group.
- :mod:`specviz.runtime.weights.q4_1`: the embedded GGUF's Q4_1 blocks read as int4 codes, scales and minimums.
- :mod:`specviz.runtime.weights.formats`: a model's linears swapped for a format (:func:`apply_weights`).
- :mod:`specviz.runtime.weights.loaded`: a LoadedModel in a format (:func:`with_weights`, the loading hook).
- :mod:`specviz.measure.weights_kernel`: the step time, memory floor and verify curve per format (``bench --kernel``).
"""

from specviz.runtime.weights.formats import FORMATS, WeightsError, WeightsReport, apply_weights, check_format, weights_of
from specviz.runtime.weights.loaded import weights_report, with_weights

__all__ = ["FORMATS", "WeightsError", "WeightsReport", "apply_weights", "check_format", "weights_of",
           "weights_report", "with_weights"]
