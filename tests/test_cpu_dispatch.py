"""Which CPU kernels this test run dispatches to.

``make test`` runs the suite, then ``make test-avx2`` runs the tests marked ``kernels`` again with oneDNN, ATen and
MKL limited to AVX2, as on a CPU without AVX-512 (see the Makefile). That second run sets
SPECVIZ_EXPECT_CPU_CAPABILITY=AVX2, and the test below checks that the limit took effect, so the second run
cannot pass silently while running the same AVX-512 kernels as the first. In the normal run it only reports what
this CPU dispatches (a skip that names it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ENV_EXPECT = "SPECVIZ_EXPECT_CPU_CAPABILITY"
_CPUINFO_FLAG = {"AVX2": "avx2", "AVX512": "avx512f"}  # ATen's capability name -> the /proc/cpuinfo flag


def _cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def _onednn_isa() -> str:
    """The instruction set oneDNN dispatches in a child process with this environment, as its verbose mode names
    it (e.g. "Intel AVX2"); "unknown" when it prints none."""
    code = "import torch; torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8), torch.ones(4, 8), None, 'none', [], '')"
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ONEDNN_VERBOSE": "1"},
                         capture_output=True, text=True, timeout=120)
    match = re.search(r"cpu,isa:([^\n]*)", run.stdout)
    return match.group(1).strip() if match else "unknown"


@pytest.mark.kernels
def test_kernels_run_on_the_expected_instruction_set(record_property):
    aten = torch.backends.cpu.get_cpu_capability()
    record_property("aten_cpu_capability", aten)
    expected = os.environ.get(ENV_EXPECT, "").strip().upper()
    if not expected:
        pytest.skip(f"normal run: ATen dispatches {aten} kernels on this CPU ({ENV_EXPECT} is set by make test-avx2)")
    flag, flags = _CPUINFO_FLAG.get(expected), _cpu_flags()
    if flag and flags and flag not in flags:
        pytest.skip(f"this CPU has no {expected}: a run limited to {expected} cannot be emulated here")
    assert aten == expected, f"ATEN_CPU_CAPABILITY did not take effect: {aten} kernels, {expected} expected"
    assert os.environ.get("MKL_ENABLE_INSTRUCTIONS", "").upper() == expected  # MKL's verbose names no ISA
    if torch.backends.mkldnn.is_available():
        isa = _onednn_isa()
        assert isa.replace("-", "").startswith(f"Intel {expected}"), f"oneDNN dispatches {isa!r}"
