"""The switch every compiled extension obeys: ``MEMTUI_PURE_PYTHON=1`` makes memtui take
the Python path of each (the snapshot reader's safe unpickler, the numpy pairing), which is
the reference the compiled one is tested against.  Light on purpose: no numpy, no polars."""

from __future__ import annotations

import os

#: Set to 1 to run the Python reference path of every compiled extension.
PURE_PYTHON_ENV = "MEMTUI_PURE_PYTHON"


def pure_python_forced() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def in_use_line(what: str, built: bool, reference: str, part: str = "pass",
                compiled: str = "compiled (C)") -> str:
    """One line for ``--version`` and ``cache info``: ``what`` runs ``compiled``, or its
    ``reference`` and why (the compiled ``part`` was not built, or the switch is set)."""
    if not built:
        return f"{what}: {reference} (the compiled {part} was not built)"
    if pure_python_forced():
        return f"{what}: {reference} ({PURE_PYTHON_ENV} is set)"
    return f"{what}: {compiled}"


def pairing_in_use() -> str:
    """How allocs and frees are paired (see :func:`in_use_line`)."""
    try:
        from memtui.sources.common import _pairing  # noqa: F401
        built = True
    except ImportError:
        built = False
    return in_use_line("lifetime pairing", built, "numpy")
