"""specviz: watch speculative decoding draft, verify, accept and roll back, token by token."""

__version__ = "0.1.0"
