"""Several captures opened at once, each in its own thread (compare mode, ranks).

The loaders spend most of their time in polars and in the C unpickler, which release the
GIL for much of their work, so two files load side by side in threads without copying
frames between processes.  Errors keep the one-line rule: the first capture that cannot
be read raises its :class:`~memtui.errors.CaptureError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memtui.model import MemoryTrace
from memtui.sources import open_capture

#: ``progress(index, fraction, message)``: capture ``index`` of the paths reports.
IndexedProgress = Callable[[int, float, str], None]


def open_captures(paths: Sequence[str | Path],
                  progress: IndexedProgress | None = None) -> list[MemoryTrace]:
    """Every path loaded with :func:`open_capture`, in parallel threads, in order."""
    def load(index: int) -> MemoryTrace:
        report = None
        if progress is not None:
            def report(fraction: float, message: str) -> None:
                progress(index, fraction, message)
        return open_capture(paths[index], report)

    if len(paths) == 1:
        return [load(0)]
    with ThreadPoolExecutor(max_workers=len(paths), thread_name_prefix="memtui-open") as pool:
        futures = [pool.submit(load, i) for i in range(len(paths))]
        return [future.result() for future in futures]


__all__ = ["open_captures"]
