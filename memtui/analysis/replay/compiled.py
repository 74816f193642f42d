"""Which loop replays: the compiled core (``_replay.c``, built by setup.py where a C compiler
was found) or the Python reference, and the line ``--version`` and ``cache info`` print.
Light on purpose (no numpy, no polars): ``memtui --version`` imports it."""

from __future__ import annotations

import os

try:
    from memtui.analysis.replay import _replay
except ImportError:  # not built: no compiler at install
    _replay = None

#: The switch of every compiled extension (``memtui.sources.common.compiled``'s; the
#: analyses import no source module): set to 1, the Python reference runs.
PURE_PYTHON_ENV = "MEMTUI_PURE_PYTHON"


def compiled_replay() -> bool:
    """True where the core was built and ``MEMTUI_PURE_PYTHON`` does not turn it off."""
    return _replay is not None and os.environ.get(PURE_PYTHON_ENV, "") in ("", "0")


def replay_in_use() -> str:
    """One line for ``--version`` and ``cache info``: which loop replays."""
    if _replay is None:
        return "what-if replay: Python (the compiled core was not built)"
    if not compiled_replay():
        return f"what-if replay: Python ({PURE_PYTHON_ENV} is set)"
    return "what-if replay: compiled (C)"
