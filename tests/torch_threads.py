"""torch's intra-op thread count for the length of a block (tests/conftest.py's fixtures, tests/test_cpu_fast_path.py)."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def torch_threads(count: int):
    """Set torch's intra-op thread count to ``count`` inside the block and put the previous count back after it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
