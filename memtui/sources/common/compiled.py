"""The switch every compiled extension obeys: ``MEMTUI_PURE_PYTHON=1`` makes memtui take
the Python path of each (the snapshot reader's safe unpickler, the numpy pairing), which is
the reference the compiled one is tested against.  Light on purpose: no numpy, no polars."""

from __future__ import annotations

import os

#: Set to 1 to run the Python reference path of every compiled extension.
PURE_PYTHON_ENV = "MEMTUI_PURE_PYTHON"


def pure_python_forced() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def pairing_in_use() -> str:
    """One line for ``--version`` and ``cache info``: how allocs and frees are paired."""
    try:
        from memtui.sources.common import _pairing  # noqa: F401
    except ImportError:
        return "lifetime pairing: numpy (the compiled pass was not built)"
    if pure_python_forced():
        return f"lifetime pairing: numpy ({PURE_PYTHON_ENV} is set)"
    return "lifetime pairing: compiled (C)"
