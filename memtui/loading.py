"""Open a capture as every consumer sees it: the source's model plus the load-time analyses.

``memtui.sources.open_capture`` reads a file into a :class:`MemoryTrace` and knows nothing
of analyses (data flows one way).  The commands and the UI call :func:`load_trace`, which
first asks the reopen cache (:mod:`memtui.cache`) for the file's trace, reads it with the
source where the cache has none (and stores it for next time), then adds what depends on
user settings rather than on the file: today the inefficient-block flags under the chosen
thresholds (so the cache holds the source's trace, never the flags).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memtui.analysis.inefficient import DEFAULT_THRESHOLDS, Thresholds, with_inefficient_flags
from memtui.model import MemoryTrace
from memtui.sources import open_capture

Progress = Callable[[float, str], None]


def load_trace(path: str | Path, progress: Progress | None = None,
               thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
               use_cache: bool = True) -> MemoryTrace:
    """The capture at ``path`` with its load-time analyses applied.

    ``use_cache=False`` (``--no-cache``) neither reads nor writes the reopen cache.
    """
    trace = _cached_or_loaded(path, progress) if use_cache else open_capture(path, progress)
    return with_inefficient_flags(trace, thresholds)


def _cached_or_loaded(path: str | Path, progress: Progress | None) -> MemoryTrace:
    from memtui import cache

    key = cache.key_of(path)
    if key is not None:
        trace = cache.lookup(key)
        if trace is not None:
            if progress is not None:
                progress(1.0, "opened from the cache")
            return trace
    trace = open_capture(path, progress)
    if key is not None:
        if progress is not None:
            progress(1.0, "storing in the cache")
        cache.store(key, trace)
    return trace
