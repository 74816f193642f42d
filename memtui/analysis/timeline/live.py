"""One device's blocks and segments as numpy arrays, indexed for "alive at t" queries.

:class:`DeviceIndex` is what the block map, the pool map and the stack tree share: the
device's rows of ``blocks`` and ``segments`` as arrays (addresses as int64: device
addresses fit in 48 bits), with :class:`~memtui.analysis.timeline.intervals.IntervalIndex` over
their lifetimes on the time axis and, built on first use, on the event axis (``seq``).

A ghost lives from before the trace; a block or segment with no ``t_free`` lives past
its end.  Alive at ``t`` means: allocated at or before ``t`` and not freed by ``t``
(every event at ``t`` has happened).  :func:`device_index` caches one index per trace
and device, so screens that ask again get the same object; :func:`cached` does the same
for anything else built from a trace (block-map data, stack trees, address books).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np
import polars as pl

from memtui.analysis.timeline.intervals import INT64_MAX, INT64_MIN, IntervalIndex
from memtui.model import MemoryTrace

T = TypeVar("T")


def _ints(df: pl.DataFrame, column: str, fill: int) -> np.ndarray:
    """``column`` as int64 (nulls as ``fill``): the column's own memory where it is int64
    without nulls in one chunk; an address column (uint64, device addresses below 2**63)
    is read as int64 in place."""
    series = df[column]
    if series.dtype == pl.UInt64 and series.null_count() == 0:
        values = series.to_numpy()
        if values.size == 0 or int(values.max()) < 1 << 63:
            return values.view(np.int64)
    return series.cast(pl.Int64).fill_null(fill).to_numpy().astype(np.int64, copy=False)


def _lifetime(df: pl.DataFrame, start: str, end: str) -> tuple[np.ndarray, np.ndarray]:
    ghost = df["ghost"].fill_null(False).to_numpy()
    begin = np.where(ghost, INT64_MIN, _ints(df, start, INT64_MIN))
    return begin.astype(np.int64), _ints(df, end, INT64_MAX)


def _int_column(frame: str, column: str, fill: int) -> cached_property[np.ndarray]:
    """A :class:`DeviceIndex` array read once, on first use: ``column`` of its ``frame``
    (``blocks`` or ``segments``) by :func:`_ints`."""

    def read(index: DeviceIndex) -> np.ndarray:
        return _ints(getattr(index, frame), column, fill)

    return cached_property(read)


@dataclass
class DeviceIndex:
    """Arrays and lifetime indexes of one device (see the module docstring).

    Each array is made on first use (a one-off question, such as the findings' blocks
    alive at one event, needs only a few of them) and, where the column allows, is the
    column's own memory rather than a copy (int64 columns without nulls)."""

    device: str
    blocks: pl.DataFrame  # the device's rows of trace.blocks, in block_id order
    segments: pl.DataFrame  # the device's rows of trace.segments, in segment_id order
    t_start: int  # first and last time of the device (see time_range)
    t_end: int

    def __post_init__(self) -> None:
        self._seq_lives: tuple[IntervalIndex, IntervalIndex] | None = None

    # -- blocks ---------------------------------------------------------------------------

    block_id = _int_column("blocks", "block_id", -1)
    addr = _int_column("blocks", "addr", 0)
    size = _int_column("blocks", "size", 0)

    @cached_property
    def requested(self) -> np.ndarray:
        requested = self.blocks["requested_size"]
        if requested.null_count() == 0:
            return _ints(self.blocks, "requested_size", 0)
        return np.where(requested.is_null().to_numpy(), self.size,
                        _ints(self.blocks, "requested_size", 0))

    @cached_property
    def _block_lifetime(self) -> tuple[np.ndarray, np.ndarray]:
        return _lifetime(self.blocks, "t_alloc", "t_free")

    @property
    def t_alloc(self) -> np.ndarray:
        return self._block_lifetime[0]

    @property
    def t_free(self) -> np.ndarray:
        return self._block_lifetime[1]

    t_free_requested = _int_column("blocks", "t_free_requested", INT64_MAX)

    @cached_property
    def seq_free_requested(self) -> np.ndarray:
        if "seq_free_requested" not in self.blocks.columns:
            return np.full(self.blocks.height, INT64_MAX, dtype=np.int64)
        return _ints(self.blocks, "seq_free_requested", INT64_MAX)

    @cached_property
    def ghost(self) -> np.ndarray:
        return self.blocks["ghost"].fill_null(False).to_numpy()

    stack_id = _int_column("blocks", "stack_id", -1)

    @cached_property
    def is_segment(self) -> np.ndarray:
        """The block is itself a segment (msMemScope HAL blocks name their segments)."""
        if "block_id" not in self.segments.columns:
            return np.zeros(self.blocks.height, dtype=bool)
        return np.isin(self.block_id, _ints(self.segments, "block_id", -1))

    # -- segments -------------------------------------------------------------------------

    seg_id = _int_column("segments", "segment_id", -1)
    seg_addr = _int_column("segments", "addr", 0)
    seg_size = _int_column("segments", "size", 0)
    seg_stream = _int_column("segments", "stream", 0)

    @cached_property
    def _segment_lifetime(self) -> tuple[np.ndarray, np.ndarray]:
        return _lifetime(self.segments, "t_alloc", "t_free")

    @property
    def seg_t_alloc(self) -> np.ndarray:
        return self._segment_lifetime[0]

    @property
    def seg_t_free(self) -> np.ndarray:
        return self._segment_lifetime[1]

    @cached_property
    def seg_ghost(self) -> np.ndarray:
        return self.segments["ghost"].fill_null(False).to_numpy()

    # The interval indexes are built on first use: a one-off question (the findings' pool
    # at one event) is answered from the arrays without them.

    @cached_property
    def block_life(self) -> IntervalIndex:
        return IntervalIndex(self.t_alloc, self.t_free)

    @cached_property
    def seg_expandable_key(self) -> np.ndarray:
        """Per segment: -1 for an ordinary segment; for a mapped range of an expandable
        segment its stream, which the adjacent ranges of the same expandable segment
        share (:func:`memtui.analysis.layout.pool_state.pool_state` draws them as one
        segment, as PyTorch's viewer merges adjacent mapped ranges of one stream: a range
        unmapped before the dump names no pool there, the dumped ones do)."""
        s = self.segments
        if "kind" not in s.columns or s.is_empty():
            return np.full(s.height, -1, dtype=np.int64)
        expandable = (s["kind"] == "expandable").fill_null(False).to_numpy()
        stream = self.seg_stream - int(self.seg_stream.min()) if s.height else self.seg_stream
        return np.where(expandable, stream, -1)

    @cached_property
    def segment_life(self) -> IntervalIndex:
        return IntervalIndex(self.seg_t_alloc, self.seg_t_free)

    # -- lookups --------------------------------------------------------------------------

    def row_of_block(self, block_id: int | None) -> int | None:
        """Row of ``block_id`` in this device's arrays (None if it is not on this device)."""
        return _row_of(self.block_id, block_id)

    def row_of_segment(self, segment_id: int | None) -> int | None:
        return _row_of(self.seg_id, segment_id)

    def blocks_at(self, t: int) -> np.ndarray:
        """Rows of the blocks alive at ``t``, in order of allocation."""
        return self.block_life.at(t)

    def segments_at(self, t: int) -> np.ndarray:
        return self.segment_life.at(t)

    def seq_lives(self) -> tuple[IntervalIndex, IntervalIndex]:
        """Lifetime indexes on the event axis (``seq_alloc``/``seq_free``), built once."""
        if self._seq_lives is None:
            b0, b1 = _lifetime(self.blocks, "seq_alloc", "seq_free")
            s0, s1 = _lifetime(self.segments, "seq_alloc", "seq_free")
            self._seq_lives = (IntervalIndex(b0, b1), IntervalIndex(s0, s1))
        return self._seq_lives


def _row_of(ids: np.ndarray, wanted: int | None) -> int | None:
    """Row of ``wanted`` in the sorted id array ``ids``."""
    if wanted is None or ids.size == 0:
        return None
    row = int(np.searchsorted(ids, wanted))
    return row if row < ids.size and ids[row] == wanted else None


#: The one store of what analyses computed from each trace: id(trace) -> (a weak
#: reference to the trace, {key: _Slot}); a trace's results go when the trace does.
_CACHE: dict[int, tuple[weakref.ref, dict]] = {}
_LOCK = threading.RLock()


class _Slot:
    """One cached result: built by the first caller, waited for by the others."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value = None
        self.error: BaseException | None = None


def cached(trace: MemoryTrace, key: Hashable, build: Callable[[], T]) -> T:
    """``build()``, computed once per ``trace`` and ``key`` (thread-safe; the results go
    when the trace does).

    Each key is built outside the lock: a thread warming one analysis in the background
    never holds up another key, and a caller asking for a key being built waits for that
    build instead of starting a second one.  A build that raises is forgotten (the next
    caller tries again) and the error is raised to every caller waiting on it.
    """
    with _LOCK:
        store = _store(trace)
        slot = store.get(key)
        owner = slot is None
        if owner:
            slot = store[key] = _Slot()
    if owner:
        try:
            slot.value = build()
        except BaseException as exc:
            slot.error = exc
            with _LOCK:
                if store.get(key) is slot:
                    del store[key]
            raise
        finally:
            slot.done.set()
    else:
        slot.done.wait()
        if slot.error is not None:
            raise slot.error
    return slot.value  # type: ignore[return-value]


def built(trace: MemoryTrace, key: Hashable) -> object | None:
    """What :func:`cached` built for ``key`` of ``trace``, or None where it has not (yet)."""
    return held(trace, key)[1]


def held(trace: MemoryTrace, key: Hashable) -> tuple[bool, object | None]:
    """(True, the result) where ``key`` of ``trace`` is built or handed over by
    :func:`remember` (a result may be None), else (False, None)."""
    with _LOCK:
        entry = _CACHE.get(id(trace))
        if entry is None or entry[0]() is not trace:
            return False, None
        slot = entry[1].get(key)
    if slot is None or not slot.done.is_set() or slot.error is not None:
        return False, None
    return True, slot.value


def remember(trace: MemoryTrace, key: Hashable, value: object) -> None:
    """Hand over ``key``'s result for ``trace`` ready-made (computed from the same capture
    earlier and kept since: the reopen cache keeps the levels): :func:`cached` answers
    with it from then on."""
    slot = _Slot()
    slot.value = value
    slot.done.set()
    with _LOCK:
        _store(trace)[key] = slot


def _store(trace: MemoryTrace) -> dict:
    """``trace``'s results by key, made on first use (under ``_LOCK``); a trace gone is
    forgotten when the next store is made."""
    entry = _CACHE.get(id(trace))
    if entry is None or entry[0]() is not trace:
        for stale in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
            del _CACHE[stale]
        entry = _CACHE[id(trace)] = (weakref.ref(trace), {})
    return entry[1]


def device_index(trace: MemoryTrace, device: str) -> DeviceIndex:
    """The (cached) :class:`DeviceIndex` of ``device`` in ``trace``."""
    return cached(trace, ("device_index", device), lambda: _build_index(trace, device))


def _build_index(trace: MemoryTrace, device: str) -> DeviceIndex:
    t_start, t_end = time_range(trace, device)
    return DeviceIndex(
        device=device, blocks=sorted_by(trace.device_blocks(device), "block_id"),
        segments=sorted_by(trace.device_segments(device), "segment_id"),
        t_start=t_start, t_end=t_end,
    )


def sorted_by(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """``frame`` sorted by ``column``: itself where it already is (the sources number
    blocks and segments in order; a check costs milliseconds where a sort of millions of
    rows of every column costs most of a second)."""
    return frame if frame[column].is_sorted() else frame.sort(column)


def time_range(trace: MemoryTrace, device: str) -> tuple[int, int]:
    """First and last time of ``device``: its events, or else its blocks' lifetimes
    (profiler operator tables have blocks and no events); (0, 0) with neither."""
    t = trace.device_events(device)["t"]
    if t.len():
        return int(t.min()), int(t.max())
    blocks = trace.device_blocks(device)
    times = pl.concat([blocks["t_alloc"], blocks["t_free"]]).drop_nulls()
    if times.len():
        return int(times.min()), int(times.max())
    return 0, 0


@dataclass(frozen=True)
class EventBlocks:
    """For each event of a device, in time order: its time and the block of the latest
    event at or before it that has one (what the cursor "is on")."""

    t: np.ndarray
    block_id: np.ndarray  # -1 before the first event with a block

    def block_at_event(self, event: int) -> int | None:
        """The block of the event at position ``event`` (or of the latest one before it)."""
        if not 0 <= event < self.block_id.size or self.block_id[event] < 0:
            return None
        return int(self.block_id[event])

    def block_at(self, t: int) -> int | None:
        i = int(np.searchsorted(self.t, t, side="right")) - 1
        if i < 0 or self.block_id[i] < 0:
            return None
        return int(self.block_id[i])


def event_blocks(trace: MemoryTrace, device: str) -> EventBlocks:
    """The (cached) :class:`EventBlocks` of ``device``."""
    def build() -> EventBlocks:
        events = trace.device_events(device).select(
            "t", pl.col("block_id").forward_fill().fill_null(-1))
        return EventBlocks(t=events["t"].to_numpy().astype(np.int64, copy=False),
                           block_id=events["block_id"].to_numpy().astype(np.int64, copy=False))
    return cached(trace, ("event_blocks", device), build)
