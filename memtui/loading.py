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
    return prepare_trace(open_capture(path, progress), thresholds)


def prepare_trace(trace: MemoryTrace,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> MemoryTrace:
    """The load-time analyses applied to a trace a source built (``--follow`` builds one
    per new batch of rows)."""
    return with_inefficient_flags(trace, thresholds)


#: ``progress(index, fraction, message)``: the capture at ``paths[index]`` reports.
IndexedProgress = Callable[[int, float, str], None]


def load_traces(paths: list[str | Path], progress: IndexedProgress | None = None,
                thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[MemoryTrace]:
    """Every path loaded with :func:`load_trace`, side by side in threads, in order
    (compare mode).  The loaders spend most of their time in polars and in the C
    unpickler, which release the GIL for much of it, so nothing is copied between
    processes; the first capture that cannot be read raises its CaptureError."""
    from concurrent.futures import ThreadPoolExecutor

    def load(index: int) -> MemoryTrace:
        report = None
        if progress is not None:
            def report(fraction: float, message: str) -> None:
                progress(index, fraction, message)
        return load_trace(paths[index], report, thresholds)

    if len(paths) < 2:
        return [load(i) for i in range(len(paths))]
    with ThreadPoolExecutor(max_workers=len(paths), thread_name_prefix="memtui-load") as pool:
        futures = [pool.submit(load, i) for i in range(len(paths))]
        return [future.result() for future in futures]
