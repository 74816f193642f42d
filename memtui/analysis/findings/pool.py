"""The pool at one event, for findings that ask once: masks over the device's arrays.

:func:`memtui.analysis.pool_state.state_at_seq` answers through interval indexes that
pay off when a screen asks at every cursor move; a finding asks at one or two events,
where one vectorised mask over the lifetimes is cheaper than building them.  Where the
indexes are built already (a screen asked), they are used.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.intervals import INT64_MAX, INT64_MIN
from memtui.analysis.live import device_index
from memtui.analysis.pool_state import PoolState, pool_state, state_at_seq
from memtui.model import MemoryTrace


def alive_rows(frame: pl.DataFrame, seq: int) -> np.ndarray:
    """Rows of ``frame`` (blocks or segments) alive just after event ``seq``."""
    ghost = frame["ghost"].fill_null(False).to_numpy()
    start = frame["seq_alloc"].fill_null(INT64_MIN).to_numpy().astype(np.int64)
    start = np.where(ghost, INT64_MIN, start)
    end = frame["seq_free"].fill_null(INT64_MAX).to_numpy().astype(np.int64)
    return np.flatnonzero((start <= seq) & (end > seq))


def pool_at_seq(trace: MemoryTrace, device: str, seq: int, t: int) -> PoolState:
    """The pool of ``device`` just after its event ``seq`` (at time ``t``)."""
    index = device_index(trace, device)
    if index._seq_lives is not None:  # built by a screen already
        return state_at_seq(trace, device, seq)
    return pool_state(index, alive_rows(index.segments, seq), alive_rows(index.blocks, seq), t,
                      seq=seq)


__all__ = ["alive_rows", "pool_at_seq"]
