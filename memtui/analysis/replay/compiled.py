"""Which loop replays: the compiled core (``_replay.c``, built by setup.py where a C compiler
was found) or the Python reference, and the line ``--version`` and ``cache info`` print.
Light on purpose (no numpy, no polars): ``memtui --version`` imports it."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _built_core() -> ModuleType | None:
    try:
        return importlib.import_module("memtui.analysis.replay._replay")
    except ImportError:  # not built: no compiler at install
        return None


#: The compiled core's module (``_replay.c``), None where it was not built.
REPLAY_CORE = _built_core()

#: The switch of every compiled extension (``memtui.sources.common.compiled``'s; the
#: analyses import no source module): set to 1, the Python reference runs.
PURE_PYTHON_ENV = "MEMTUI_PURE_PYTHON"


def compiled_replay() -> bool:
    """True where the core was built and ``MEMTUI_PURE_PYTHON`` does not turn it off."""
    return REPLAY_CORE is not None and os.environ.get(PURE_PYTHON_ENV, "") in ("", "0")


def replay_in_use() -> str:
    """One line for ``--version`` and ``cache info``: which loop replays."""
    if REPLAY_CORE is None:
        return "what-if replay: Python (the compiled core was not built)"
    if not compiled_replay():
        return f"what-if replay: Python ({PURE_PYTHON_ENV} is set)"
    return "what-if replay: compiled (C)"
