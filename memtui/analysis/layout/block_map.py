"""The block-lifetime map: blocks stacked over time, rasterised into half-block cells.

Stacking follows memory_viz's Active Memory Timeline: the blocks alive before the trace
(ghosts) lie at the bottom, those alive at the dump lowest, then those freed latest;
above them every allocation goes on top of the stack in the order it happened, and when
a block is freed everything above it slides down. So at any time a live block's offset
is the sum of the live blocks below it in that order.

:func:`rasterise` draws a view ``[t0, t1]`` into ``width`` columns and ``2 * height``
pixel rows (a terminal cell holds two pixels with ``▀``). Each column shows the stack at
one moment: the time of its highest level (:meth:`BlockMapData.level`, the bytes of the
live blocks), so peaks are never lost between columns. The ``detail``
weightiest blocks of the view (by bytes x time alive in it, a quarter by size alone)
get their own band; the rest are summed into one band on top
(memory_viz's "summarized" band). Everything is numpy and independent of how many blocks
are alive: a ``detail`` x ``width`` matrix of which drawn block is alive in which
column, cumulative sums of sizes for the rest, and one ``searchsorted`` for all the
pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.timeline.intervals import INT64_MAX, INT64_MIN, IntervalIndex
from memtui.analysis.timeline.levels import Level
from memtui.analysis.timeline.live import DeviceIndex, sorted_by, time_range
from memtui.arrays import unique_sorted
from memtui.model import MemoryTrace, conform, empty_frame

EMPTY = -1
SUMMARIZED = -2

#: Kinds of band, for colouring.
KIND_NORMAL, KIND_GHOST, KIND_NEVER_FREED, KIND_SUMMARIZED = 0, 1, 2, 3


def stack_rank(index: DeviceIndex) -> np.ndarray:
    """Position of each block in memory_viz's stacking order (lower = nearer the bottom)."""
    ghost = index.ghost
    # ghosts: alive at the dump first, then by free time, latest first; others by alloc
    primary = np.where(ghost, 0, 1)
    secondary = np.where(ghost, -np.minimum(index.t_free, INT64_MAX - 1), index.t_alloc)
    order = np.lexsort((index.block_id, secondary, primary))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank


def block_kinds(index: DeviceIndex) -> np.ndarray:
    """Per block: ghost, never freed (alive at the end of the trace) or normal."""
    kinds = np.full(index.block_id.size, KIND_NORMAL, dtype=np.int8)
    kinds[index.t_free == INT64_MAX] = KIND_NEVER_FREED
    kinds[index.ghost] = KIND_GHOST
    return kinds


class PeakFinder:
    """Where a level is highest within any range of its steps, fast for long ranges:
    the maxima of buckets of :data:`BUCKET` steps are computed once."""

    BUCKET = 1024

    def __init__(self, level: Level) -> None:
        self.level = level
        values = level.values
        n = values.size // self.BUCKET * self.BUCKET
        body = values[:n].reshape(-1, self.BUCKET)
        self.bucket_max = body.max(axis=1) if n else np.zeros(0, dtype=values.dtype)
        self.bucket_arg = body.argmax(axis=1) if n else np.zeros(0, dtype=np.int64)

    def argmax(self, a: int, b: int) -> int:
        """Index of the first maximum of ``values[a:b]`` (``a < b``)."""
        values, bucket = self.level.values, self.BUCKET
        if b - a <= 4 * bucket:
            return a + int(np.argmax(values[a:b]))
        first, last = -(-a // bucket), b // bucket  # the whole buckets [first, last)
        candidates = [a + int(np.argmax(values[a:first * bucket]))] if a < first * bucket else []
        mid = first + int(np.argmax(self.bucket_max[first:last]))
        candidates.append(mid * bucket + int(self.bucket_arg[mid]))
        if last * bucket < b:
            candidates.append(last * bucket + int(np.argmax(values[last * bucket:b])))
        return max(candidates, key=lambda i: (values[i], -i))

    def column_times(self, t0: int, t1: int, width: int) -> np.ndarray:
        """For each of ``width`` columns over ``[t0, t1]``: the time of its highest level.

        A column with no event inside shows the level in force at its start.
        """
        level = self.level
        edges = t0 + np.arange(width + 1, dtype=np.float64) * ((t1 - t0) / max(width, 1))
        edges = np.floor(edges).astype(np.int64)
        edges[-1] = t1 + 1
        times = edges[:-1].copy()
        if level.t.size == 0:
            return times
        lo = np.maximum(np.searchsorted(level.t, edges[:-1], side="right") - 1, 0)
        hi = np.searchsorted(level.t, edges[1:], side="left")
        for c in np.flatnonzero(hi > lo + 1):
            best = self.argmax(int(lo[c]), int(hi[c]))
            times[c] = max(int(level.t[best]), int(edges[c]))
        return times


@dataclass(frozen=True)
class BlockRaster:
    """A rasterised view.  ``pixels[y, x]`` (row 0 at the top) is a block row of the
    :class:`DeviceIndex`, :data:`SUMMARIZED` or :data:`EMPTY`."""

    t0: int
    t1: int
    times: np.ndarray  # per column: the moment it shows
    pixels: np.ndarray  # (2 * height, width) int64
    ymax: int  # bytes at the top of the map
    totals: np.ndarray  # per column: bytes stacked (drawn + summarized)
    drawn: np.ndarray  # block rows with their own band
    candidates: int  # blocks seen in the view (drawn + summarized)

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    def column_of(self, t: int) -> int | None:
        """The column whose time span holds ``t`` (None outside the view)."""
        if not self.t0 <= t <= self.t1 or self.width == 0:
            return None
        span = (self.t1 - self.t0) / self.width
        return min(int((t - self.t0) / span) if span > 0 else 0, self.width - 1)

    def band_at(self, x: int, y: int) -> int:
        if 0 <= x < self.width and 0 <= y < self.pixels.shape[0]:
            return int(self.pixels[y, x])
        return EMPTY


class BlockMapData:
    """What the map of one device needs whatever the view: stacking ranks, blocks by
    size, and running sums of sizes by allocation and by free time."""

    def __init__(self, index: DeviceIndex) -> None:
        self.index = index
        self.rank = stack_rank(index)
        self.kinds = block_kinds(index)
        self.by_size = np.argsort(-index.size, kind="stable")
        life = index.block_life
        self.starts = life.start
        self.start_bytes = np.concatenate([[0], np.cumsum(index.size[life.order])])
        by_end = np.argsort(index.t_free, kind="stable")
        self.ends = index.t_free[by_end]
        self.end_bytes = np.concatenate([[0], np.cumsum(index.size[by_end])])
        self._by_area: np.ndarray | None = None
        self._level: Level | None = None
        self.kept = False  # made from kept arrays (:meth:`from_arrays`), not built here
        _ = self.by_area  # built here, where a big trace's screen builds in a thread

    #: Per block (``rank`` ... ``by_area``) and per running sum (``start_bytes`` ...).
    _PER_BLOCK = ("rank", "kinds", "by_size", "ends", "by_area")
    _SUMS = ("start_bytes", "end_bytes")

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything :meth:`from_arrays` needs to make this map's data and its device's
        block lifetimes index again without building them (kept in the reopen cache)."""
        level = self.level()
        return {**{part: getattr(self, part) for part in (*self._PER_BLOCK, *self._SUMS)},
                "level_t": level.t, "level_values": level.values,
                **{f"life_{part}": a for part, a in self.index.block_life.arrays().items()}}

    @classmethod
    def from_arrays(cls, index: DeviceIndex, arrays: dict[str, np.ndarray]) -> BlockMapData:
        """The data :meth:`arrays` described, for ``index`` (the same device of the same
        capture); a ValueError where the arrays do not fit it: never trusted blindly."""
        life = IntervalIndex.from_arrays(
            {k.removeprefix("life_"): v for k, v in arrays.items() if k.startswith("life_")})
        n = index.block_id.size
        parts = {part: np.asarray(arrays[part]) for part in (*cls._PER_BLOCK, *cls._SUMS)}
        level = Level(t=np.asarray(arrays["level_t"]), values=np.asarray(arrays["level_values"]))
        if (life.size != n or any(parts[p].size != n for p in cls._PER_BLOCK)
                or any(parts[p].size != n + 1 for p in cls._SUMS)
                or parts["kinds"].dtype != np.int8
                or any(parts[p].dtype != np.int64 for p in parts if p != "kinds")
                or level.t.dtype != np.int64 or level.values.dtype != np.int64
                or level.t.size != level.values.size
                or bool(np.any(np.diff(parts["ends"]) < 0))
                or (n and any(parts[p].min() < 0 or parts[p].max() >= n
                              for p in ("rank", "by_size", "by_area")))):
            raise ValueError("block map arrays that do not fit the device's blocks")
        if "block_life" not in index.__dict__:
            index.__dict__["block_life"] = life  # the cached_property's own slot
        data = cls.__new__(cls)
        data.index = index
        data._by_area = parts.pop("by_area")
        for part, array in parts.items():
            setattr(data, part, array)
        data.starts = index.block_life.start
        data._level = level
        data.kept = True
        return data

    def live_bytes(self, times: np.ndarray) -> np.ndarray:
        """Bytes in blocks alive at each of ``times``."""
        allocated = self.start_bytes[np.searchsorted(self.starts, times, side="right")]
        freed = self.end_bytes[np.searchsorted(self.ends, times, side="right")]
        return allocated - freed

    def level(self) -> Level:
        """Bytes of the blocks alive after each allocation and free: the level the map
        stacks (a source's own allocated level may count fewer pools, or be absent);
        made once."""
        if self._level is None:
            finite = np.concatenate([self.starts[self.starts > INT64_MIN],
                                     self.ends[self.ends < INT64_MAX]])
            times = unique_sorted(finite)
            if times.size == 0:
                times = np.zeros(1, dtype=np.int64)
            self._level = Level(t=times, values=self.live_bytes(times).astype(np.int64))
        return self._level

    def count_overlapping(self, t0: int, t1: int) -> int:
        """Blocks alive at some moment of ``[t0, t1]``."""
        return int(np.searchsorted(self.starts, t1, side="right")
                   - np.searchsorted(self.ends, t0, side="right"))

    def largest_overlapping(self, t0: int, t1: int, n: int) -> np.ndarray:
        """Rows of the ``n`` largest blocks alive at some moment of ``[t0, t1]``."""
        return self._first_overlapping(self.by_size, t0, t1, n)

    def _first_overlapping(self, order: np.ndarray, t0: int, t1: int, n: int) -> np.ndarray:
        """The first ``n`` rows of ``order`` alive at some moment of ``[t0, t1]``."""
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        ix, found, at = self.index, [], 0
        step = max(4 * n, 4096)
        while at < order.size and sum(f.size for f in found) < n:
            rows = order[at:at + step]
            found.append(rows[(ix.t_alloc[rows] <= t1) & (ix.t_free[rows] > t0)])
            at += step
            step *= 2
        rows = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        return rows[:n]

    def area_in(self, rows: np.ndarray, t0: int, t1: int) -> np.ndarray:
        """Bytes x time alive inside ``[t0, t1]`` of each of ``rows`` (the area its band
        covers in that view)."""
        ix = self.index
        begin = np.maximum(ix.t_alloc[rows], t0).astype(np.float64)
        end = np.minimum(ix.t_free[rows], t1).astype(np.float64)
        return ix.size[rows].astype(np.float64) * np.maximum(end - begin + 1.0, 0.0)

    @property
    def by_area(self) -> np.ndarray:
        """Rows by bytes x time alive over the whole trace, largest first."""
        if self._by_area is None:
            ix = self.index
            area = self.area_in(np.arange(ix.block_id.size), ix.t_start, ix.t_end)
            self._by_area = np.argsort(-area, kind="stable")
        return self._by_area

    def weightiest_overlapping(self, t0: int, t1: int, n: int) -> np.ndarray:
        """Rows of the ``n`` blocks that explain the picture of ``[t0, t1]``: a quarter by
        size alone (short spikes), the rest by bytes x time alive inside the view (the
        area a band covers: long-lived blocks, a leak's staircase); each at most once.

        The candidates for the rest are the ``4 n`` in view with the most area over the
        whole trace (a block's area in a view is at most its whole area), so the cost
        does not grow with the blocks alive; over the whole trace the choice is exact."""
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        by_size = self.largest_overlapping(t0, t1, max(n // 4, 1))
        want = n - by_size.size
        candidates = self._first_overlapping(self.by_area, t0, t1, 4 * n)
        candidates = candidates[~np.isin(candidates, by_size)]
        if want <= 0 or candidates.size == 0:
            return by_size
        area = self.area_in(candidates, t0, t1)
        best = candidates[np.argsort(-area, kind="stable")[:want]]
        return np.concatenate([by_size, best]).astype(np.int64)


def rasterise(
    data: BlockMapData, peaks: PeakFinder, t0: int, t1: int,
    width: int, height: int, detail: int, ymax: int | None = None,
) -> BlockRaster:
    """Draw ``[t0, t1]`` into ``width`` x ``2 * height`` pixels (see the module docstring)."""
    ix = data.index
    width, pixel_rows = max(int(width), 1), max(int(height), 1) * 2
    times = peaks.column_times(t0, t1, width)
    drawn = data.weightiest_overlapping(t0, t1, detail)
    drawn = drawn[np.argsort(data.rank[drawn], kind="stable")]  # bottom first
    alive = (ix.t_alloc[drawn][:, None] <= times[None, :]) & (
        ix.t_free[drawn][:, None] > times[None, :])
    heights = np.where(alive, ix.size[drawn][:, None], 0).astype(np.float64)
    totals = data.live_bytes(times).astype(np.float64)
    summarized = np.maximum(totals - heights.sum(axis=0), 0.0)
    # one band list per column: the drawn blocks (zero high where dead), then the rest
    band_rows = np.concatenate([drawn, [SUMMARIZED]]).astype(np.int64)
    tops = np.cumsum(np.vstack([heights, summarized[None, :]]), axis=0)  # (bands, width)
    top = int(ymax if ymax is not None else max(totals.max() if totals.size else 0, 1))
    pixels = _pixels(band_rows, tops, totals, top, pixel_rows)
    return BlockRaster(t0=t0, t1=t1, times=times, pixels=pixels, ymax=top,
                       totals=totals.astype(np.int64), drawn=drawn,
                       candidates=data.count_overlapping(t0, t1))


def _pixels(band_rows: np.ndarray, tops: np.ndarray, totals: np.ndarray, ymax: int,
            pixel_rows: int) -> np.ndarray:
    """Which band covers the centre of each pixel: one searchsorted for all columns.

    Each column's tops are lifted above every value of the columns before it, so one
    sorted array answers all of them: the band is the first whose top is above the
    pixel's centre (a dead band has no height, so it is never the first).
    """
    n_bands, width = tops.shape
    lift = float(max(ymax, float(totals.max()) if totals.size else 0.0)) * 2 + 1
    keys = (tops + np.arange(width, dtype=np.float64)[None, :] * lift).T.ravel()
    centres = (np.arange(pixel_rows, dtype=np.float64)[::-1] + 0.5) * (ymax / pixel_rows)
    queries = centres[:, None] + np.arange(width, dtype=np.float64)[None, :] * lift
    found = np.searchsorted(keys, queries.ravel(), side="right").reshape(pixel_rows, width)
    band = found - np.arange(width)[None, :] * n_bands
    inside = centres[:, None] < totals[None, :]
    band = np.clip(band, 0, n_bands - 1)
    return np.where(inside, band_rows[band], EMPTY).astype(np.int64)


def bands_at(
    index: DeviceIndex, rank: np.ndarray, t: int, seq: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The blocks alive at ``t`` in stacking order (bottom first), and their bottoms; with
    ``seq`` (:func:`~memtui.analysis.layout.pool_state.event_seq`), alive just after that event
    (exact among events sharing a timestamp)."""
    rows = index.blocks_at(t) if seq is None else index.seq_lives()[0].at(seq)
    rows = rows[np.argsort(rank[rows], kind="stable")]
    sizes = index.size[rows]
    return rows, np.cumsum(sizes) - sizes


def segment_index(trace: MemoryTrace, device: str) -> DeviceIndex:
    """The segments of ``device`` as the blocks of a :class:`DeviceIndex` (block id =
    segment id), so the block map draws them over time: memory_viz's Active Cached
    Segment Timeline, whose top is the reserved level."""
    segments = sorted_by(trace.device_segments(device), "segment_id")
    blocks = conform(segments.select(
        block_id=pl.col("segment_id"), device=pl.col("device"), addr=pl.col("addr"),
        size=pl.col("size"), requested_size=pl.col("size"), t_alloc=pl.col("t_alloc"),
        t_free=pl.col("t_free"), stream=pl.col("stream"), pool=pl.col("kind"),
        ghost=pl.col("ghost").fill_null(False), seq_alloc=pl.col("seq_alloc"),
        seq_free=pl.col("seq_free")), "blocks")
    t_start, t_end = time_range(trace, device)
    return DeviceIndex(device=device, blocks=blocks, segments=empty_frame("segments"),
                       t_start=t_start, t_end=t_end)
