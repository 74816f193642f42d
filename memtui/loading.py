"""Open a capture as every consumer sees it: the source's model plus the load-time analyses.

``memtui.sources.open_capture`` reads a file into a :class:`MemoryTrace` and knows nothing
of analyses (data flows one way).  The commands and the UI call :func:`load_trace`, which
adds what depends on user settings rather than on the file: today the inefficient-block
flags under the chosen thresholds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memtui.analysis.inefficient import DEFAULT_THRESHOLDS, Thresholds, with_inefficient_flags
from memtui.model import MemoryTrace
from memtui.sources import open_capture


def load_trace(path: str | Path, progress: Callable[[float, str], None] | None = None,
               thresholds: Thresholds = DEFAULT_THRESHOLDS) -> MemoryTrace:
    """The capture at ``path`` with its load-time analyses applied."""
    return with_inefficient_flags(open_capture(path, progress), thresholds)
