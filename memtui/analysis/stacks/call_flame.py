"""The time-axis call flame of one thread (msMemScope python traces), as MindStudio
Insight draws it: depth down, time across.

:class:`CallFlame` keeps one thread's calls per depth, sorted by start (calls at one
depth never overlap).  :meth:`CallFlame.rasterise` gives, for each depth row and column,
the call that meets the column's time span (the longest of them is not needed: at one
depth the first one that meets it is drawn), so a call shorter than a column still
shows; :meth:`CallFlame.stack_at` is the chain of calls open at the cursor.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.model import MemoryTrace

NONE = -1


def threads(trace: MemoryTrace, device: str | None = None) -> list[str]:
    """Threads with calls (on ``device``, or any), busiest first."""
    calls = trace.calls
    if device is not None and calls.height:
        on_device = calls.filter(pl.col("device") == device)
        calls = on_device if on_device.height else calls
    if calls.is_empty():
        return []
    counts = calls.group_by("thread").len().sort(["len", "thread"], descending=[True, False])
    return [str(t) for t in counts["thread"].to_list()]


class CallFlame:
    """One thread's calls, indexed by depth."""

    def __init__(self, trace: MemoryTrace, thread: str, device: str | None = None) -> None:
        calls = trace.calls.filter(pl.col("thread") == thread)
        if device is not None:
            on_device = calls.filter(pl.col("device") == device)
            calls = on_device if on_device.height else calls
        calls = calls.filter(
            pl.col("t_start").is_not_null() & pl.col("t_end").is_not_null()
            & (pl.col("t_end") >= pl.col("t_start"))
        ).sort("depth", "t_start")
        self.thread = thread
        self.calls = calls
        self.name = calls["name"].fill_null("?").to_list()
        self.t_start = calls["t_start"].to_numpy().astype(np.int64)
        self.t_end = calls["t_end"].to_numpy().astype(np.int64)
        depth = calls["depth"].fill_null(0).to_numpy().astype(np.int64)
        self.min_depth = int(depth.min()) if depth.size else 0
        self.depth = depth - self.min_depth
        self.max_depth = int(self.depth.max()) + 1 if depth.size else 0
        self.bounds = np.searchsorted(self.depth, np.arange(self.max_depth + 1), side="left")
        # furthest end so far within each depth: sorted, so it can be searched
        self.running_end = self.t_end.copy()
        for depth in range(self.max_depth):
            a, b = int(self.bounds[depth]), int(self.bounds[depth + 1])
            if b > a:
                self.running_end[a:b] = np.maximum.accumulate(self.t_end[a:b])

    @property
    def t_range(self) -> tuple[int, int]:
        if not self.t_start.size:
            return 0, 0
        return int(self.t_start.min()), int(self.t_end.max())

    def rasterise(self, t0: int, t1: int, width: int, first_depth: int, rows: int) -> np.ndarray:
        """``(rows, width)`` call indices (into :attr:`calls`) from ``first_depth`` down."""
        width = max(int(width), 1)
        edges = t0 + np.arange(width + 1, dtype=np.float64) * ((t1 - t0) / width)
        lo_t = np.floor(edges[:-1]).astype(np.int64)
        hi_t = np.floor(edges[1:]).astype(np.int64)
        hi_t[-1] = t1 + 1
        out = np.full((rows, width), NONE, dtype=np.int64)
        for r in range(rows):
            depth = first_depth + r
            if depth >= self.max_depth:
                break
            a, b = int(self.bounds[depth]), int(self.bounds[depth + 1])
            ends = self.running_end[a:b]
            # the first call at this depth that ends after the column starts...
            first = a + np.searchsorted(ends, lo_t, side="right")
            ok = first < b
            first = np.minimum(first, b - 1)
            # ...drawn if it starts before the column ends
            ok &= self.t_start[first] < np.maximum(hi_t, lo_t + 1)
            out[r] = np.where(ok, first, NONE)
        return out

    def stack_at(self, t: int) -> list[int]:
        """Call indices open at ``t``, outermost first."""
        chain = []
        for depth in range(self.max_depth):
            a, b = int(self.bounds[depth]), int(self.bounds[depth + 1])
            i = a + int(np.searchsorted(self.t_start[a:b], t, side="right")) - 1
            if i >= a and self.t_end[i] > t:
                chain.append(i)
            elif chain:
                break
        return chain

    def label(self, call: int) -> str:
        return self.name[call]
