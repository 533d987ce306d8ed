"""Eager speed-ups for decoding on the CPU, applied once to a loaded model (no compilation, no new numerics split).

Why: on the project's 2-core AVX2/AVX-512 machine the default float32 ``nn.Linear`` (MKL sgemm through
``aten::mm``) re-reads its weight per row for 2..16 rows, so a verification forward over k+1 tokens cost about
1.7x a one-token step, and the 49152 x 576 LM head alone took 9-25 ms instead of the ~4 ms one read of its
113 MB needs. oneDNN's linear (``torch.ops.mkldnn._linear_pointwise``) on the *plain* weight (no reordered copy)
reads it about once for 1..16 rows. Measurements and conditions: docs/performance.md.

What :func:`prepare_for_decoding` does (each step only where it applies, and only after a self-test):
1. ``onednn-linear``: every exact ``torch.nn.Linear`` of a float32 model on the CPU (the tied LM head
   included) computes with oneDNN instead of ``aten::mm``. Same weights, same memory, no copy.
2. ``fused-projections``: the q/k/v projections of each attention block and the gate/up projections of each
   MLP are computed as one wider linear over their weights laid end to end in one buffer (the parameters
   become views of that buffer, so memory does not grow and ``state_dict`` is unchanged). The first
   projection's call computes all of them for that input; the others return their slice when called with
   the same input tensor (and compute on their own otherwise).
3. ``packed-weights``: each fast linear (and each fused group) also keeps its weight reordered by oneDNN for
   several rows (``torch.ops.mkldnn._reorder_linear_weight`` with a batch hint of 16) and computes with that copy:
   the plain layout reads its weight about once for one row but its cost grows with the rows (the LM head:
   5.5 ms for 1 row, 8.6 ms for 5), while the reordered one stays flat (5.6 and 3.4 ms; 6.2 ms for 17), so a
   verification over k+1 tokens costs little more than a one-token step. The copy doubles the weights' memory, so
   it is made only while the machine has at least three times the model's size free
   (:data:`PACK_MEMORY_FACTOR`); the plain parameters stay for ``state_dict``, training and :func:`plain_path`.
4. ``sdpa-gqa``: attention over several new tokens (a verification) reads the grouped key/value heads directly
   (SDPA's ``enable_gqa``) instead of copying them per query head (transformers' ``repeat_kv``, which it does
   whenever a mask is needed, i.e. for every pass of k+1 tokens after a prompt): transformers' own switch
   ``TRANSFORMERS_SDPA_FORCE_GQA=1``, set for the process when a CPU model is prepared (on CUDA the masked GQA
   kernel is the slow math one, so it stays off there). Same values: the kernels compute the same sums.
5. ``folded-gqa``: a layer's query heads that share a key/value head are laid out as extra query rows of that
   head (q (B, H, n, D) -> (B, H_kv, G*n, D), the mask repeated G times; G = H / H_kv), so each key/value head is
   read once per forward and the kernel multiplies G*n rows at a time instead of n. transformers does this for one
   new token without a mask (``pack_gqa``); here it also covers a verification's n > 1 tokens and masked
   (batched, tree) passes. At 1 024 cached tokens (SmolLM2-135M, 30 layers, 1 thread, this machine) attention
   over 5 new tokens took 14.6 ms per forward with SDPA's grouped-query kernel and 11.9 folded; one new token 6.0
   and 5.3 (docs/performance-journal.md, section 12). It folds only where every thread keeps work (:func:`_enough_work`:
   one thread, or two batch x key/value-head units per thread). It runs through transformers' ``sdpa`` entry,
   replaced once per process by :func:`_folded_sdpa`, which folds only for the attention modules of a prepared
   CPU model (flag ``_specviz_fold``, off in :func:`plain_path`) and hands every other call (prefill with
   ``is_causal``, CUDA, dropout, soft-capping, sinks, compilation) to transformers' own function unchanged.
6. ``row-padding`` (chosen by measurement, :mod:`specviz.measure.tuning`): oneDNN picks its kernel by the number of rows,
   and on some CPUs fewer rows are slower. On this project's 2-core AVX-512 machine (1 thread, the 121 packed
   linears of SmolLM2-135M) one row took 26.9 ms, two 35.1, four 21.1; with an AVX2 dispatch the cost grows
   with the rows (28.0, 27.8, ..., 33.2 for four). So a forward of n rows may be computed as m > n rows, the
   extra rows zeros and dropped, where the machine measured m rows faster (:func:`time_linear_rows`,
   :func:`choose_row_padding`, :func:`set_row_padding`); a one-token step then ran 49.5 ms instead of 53.9 and
   a two-token verification 47.5 instead of 64.7 (docs/performance-journal.md, "Row padding").

Exactness: the model object is changed in place, so everything that runs it (the standard baseline, every
verification, early-exit drafters that share its layers, transformers' own ``generate()`` in the benchmark)
uses the same kernels and sees the same numerics. The fast logits differ from the default kernels' only by
float32 rounding (about 1e-5 relative), so greedy outputs can differ from an unprepared model only at
near-ties; within one prepared model the baseline and the speculative run agree as before.

Opt out with ``SPECVIZ_FAST=0`` (checked at load time), or compare within one process with
:func:`plain_path`, which switches a prepared model back to the default kernels temporarily.

The package's rooms: :mod:`~specviz.runtime.speed.prepare` (applying, reporting and switching the fast path),
:mod:`~specviz.runtime.speed.kernels` (the linear kernels, fused groups and row padding) and :mod:`~specviz.runtime.speed.attention`
(steps 4 and 5). Everything public is importable from ``specviz.runtime.speed``; to replace a private helper in a test, patch
the module that defines it (e.g. ``specviz.runtime.speed.kernels._onednn_linear``).
"""

from specviz.runtime.speed.attention import ENV_FORCE_GQA, _folded_sdpa, _install_folded_sdpa
from specviz.runtime.speed.kernels import (
    ENV_FAST,
    PAD_MARGIN,
    _FastLinear,
    choose_row_padding,
    draft_linear,
    fast_path_enabled,
    prepare_draft_head,
    row_padding,
    set_row_padding,
    time_linear_rows,
    without_row_padding,
)
from specviz.runtime.speed.prepare import (
    PACK_BATCH_HINT,
    PACK_MEMORY_FACTOR,
    SpeedReport,
    plain_path,
    prepare_for_decoding,
    report_of,
    set_fast_path,
)

__all__ = ["ENV_FAST", "ENV_FORCE_GQA", "PACK_BATCH_HINT", "PACK_MEMORY_FACTOR", "PAD_MARGIN", "SpeedReport",
           "choose_row_padding", "draft_linear", "fast_path_enabled", "plain_path", "prepare_draft_head",
           "prepare_for_decoding", "report_of", "row_padding", "set_fast_path", "set_row_padding", "time_linear_rows",
           "without_row_padding"]
