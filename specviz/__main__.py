"""``python -m specviz``: see :mod:`specviz.cli`."""

from specviz.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
