"""The pool at one event, for findings that ask once: masks over the device's arrays.

:func:`memtui.analysis.layout.pool_state.state_at_seq` answers through interval indexes that
pay off when a screen asks at every cursor move; a finding asks at one or two events,
where one vectorised mask over the lifetimes is cheaper than building them.  Where the
indexes are built already (a screen asked), they are used.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.layout.pool_state import PoolState, pool_state, state_at_seq
from memtui.analysis.timeline.intervals import INT64_MAX, INT64_MIN
from memtui.analysis.timeline.live import cached, device_index
from memtui.model import MemoryTrace


def alive_rows(frame: pl.DataFrame, seq: int) -> np.ndarray:
    """Rows of ``frame`` (blocks or segments) alive just after event ``seq``."""
    return _alive(_seq_bounds(frame), seq)


def alive_block_rows(trace: MemoryTrace, device: str, seq: int) -> np.ndarray:
    """Rows of the device index's blocks alive just after event ``seq``."""
    return _alive(_index_bounds(trace, device)[1], seq)


def pool_at_seq(trace: MemoryTrace, device: str, seq: int, t: int) -> PoolState:
    """The pool of ``device`` just after its event ``seq`` (at time ``t``)."""
    index = device_index(trace, device)
    if index._seq_lives is not None:  # built by a screen already
        return state_at_seq(trace, device, seq)
    segments, blocks = _index_bounds(trace, device)
    return pool_state(index, _alive(segments, seq), _alive(blocks, seq), t, seq=seq)


def _index_bounds(trace: MemoryTrace, device: str
                  ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """:func:`_seq_bounds` of the device index's segments and blocks (cached)."""
    index = device_index(trace, device)
    return cached(trace, ("findings_seq_bounds", device), lambda: (
        _seq_bounds(index.segments), _seq_bounds(index.blocks)))


def _seq_bounds(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's first and past-last event (a ghost from the very start, a block alive
    at the end to the very end): the arrays every question at an event masks (a finding
    asks at a few dozen events: taken out of the frame once)."""
    ghost = frame["ghost"].fill_null(False).to_numpy()
    start = frame["seq_alloc"].fill_null(INT64_MIN).to_numpy().astype(np.int64, copy=False)
    start = np.where(ghost, INT64_MIN, start)
    end = frame["seq_free"].fill_null(INT64_MAX).to_numpy().astype(np.int64, copy=False)
    return start, end


def _alive(bounds: tuple[np.ndarray, np.ndarray], seq: int) -> np.ndarray:
    start, end = bounds
    return np.flatnonzero((start <= seq) & (end > seq))


__all__ = ["alive_block_rows", "alive_rows", "pool_at_seq"]
