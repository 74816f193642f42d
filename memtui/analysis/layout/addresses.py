"""Finding a block or segment by address, as the user types it.

Accepted forms: hex with or without ``0x`` (``0x7f064c000000``, ``7f064c000000``),
decimal (``139665369792512``), and memory_viz's versioned names: ``b7f064c000000_0`` for
the first block ever at that address, ``s7f064c000000_2`` for the third segment.  A
string of decimal digits only is tried as decimal first, then as hex.  ``block 5083`` (or
``#5083``) is the block of that id: the one name every screen and JSON output gives a
block.

Versions count lifetimes at one address in order, as MemoryViz.js numbers them: a ghost
freed in the trace comes first, then each traced allocation, and a ghost still alive at
the dump last.

:func:`find_address` prefers what is alive at the cursor, then what lived nearest to it,
and always reports the segment holding the address too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.timeline.intervals import INT64_MAX, INT64_MIN
from memtui.analysis.timeline.live import DeviceIndex

_VERSIONED = re.compile(r"^([bs])(?:0x)?([0-9a-f]+)(?:_(\d+))?$")
_HEX = re.compile(r"^(?:0x)?([0-9a-f]+)$")
_BLOCK_ID = re.compile(r"^(?:block\s*|#)(\d+)$")


@dataclass(frozen=True)
class AddressQuery:
    """One reading of what the user typed."""

    addr: int
    kind: str | None = None  # "b" (block), "s" (segment) or None (either)
    version: int | None = None


def parse_address(text: str) -> list[AddressQuery]:
    """Every reading of ``text`` as an address, most likely first; [] if none."""
    cleaned = text.strip().lower().replace(",", "").replace(" ", "")
    match = _VERSIONED.match(cleaned)
    if match and not cleaned.startswith("0x"):
        kind, digits, version = match.groups()
        return [AddressQuery(int(digits, 16), kind, None if version is None else int(version))]
    match = _HEX.match(cleaned)
    if not match:
        return []
    digits = match.group(1)
    if cleaned.startswith("0x") or not digits.isdigit():
        return [AddressQuery(int(digits, 16))]
    return [AddressQuery(int(digits, 10)), AddressQuery(int(digits, 16))]


def _versions(df: pl.DataFrame) -> np.ndarray:
    """memory_viz's version of each row (``addr``, ``seq_alloc``, ``seq_free``)."""
    if df.is_empty():
        return np.zeros(0, dtype=np.int64)
    key = (
        pl.when(pl.col("seq_alloc").is_not_null()).then(pl.col("seq_alloc"))
        .when(pl.col("seq_free").is_not_null()).then(pl.col("seq_free"))
        .otherwise(pl.lit(INT64_MAX))
    )
    return df.select(
        v=key.rank("ordinal").over("addr").cast(pl.Int64) - 1
    )["v"].to_numpy()


class AddressBook:
    """Version numbers and address lookups for one device."""

    def __init__(self, index: DeviceIndex) -> None:
        self.index = index
        self.block_version = _versions(index.blocks)
        self.segment_version = _versions(index.segments)

    def block_name(self, row: int) -> str:
        return f"b{int(self.index.addr[row]):x}_{int(self.block_version[row])}"

    def segment_name(self, row: int) -> str:
        return f"s{int(self.index.seg_addr[row]):x}_{int(self.segment_version[row])}"

    def find(self, query: AddressQuery, t: int) -> AddressHit | None:
        """The block and segment ``query`` names, nearest to ``t`` in time."""
        ix = self.index
        block = segment = None
        if query.kind in (None, "b"):
            if query.version is not None:
                rows = np.flatnonzero((ix.addr == query.addr)
                                      & (self.block_version == query.version))
            else:
                rows = np.flatnonzero((ix.addr <= query.addr)
                                      & (query.addr < ix.addr + np.maximum(ix.size, 1)))
            block = _nearest(rows, ix.t_alloc, ix.t_free, t)
        if query.kind in (None, "s"):
            if query.kind == "s" and query.version is not None:
                rows = np.flatnonzero((ix.seg_addr == query.addr)
                                      & (self.segment_version == query.version))
            else:
                rows = np.flatnonzero((ix.seg_addr <= query.addr)
                                      & (query.addr < ix.seg_addr + ix.seg_size))
            segment = _nearest(rows, ix.seg_t_alloc, ix.seg_t_free, t)
        if block is None and segment is None:
            return None
        # the time to show: the cursor if what was found is alive then, else its start
        start, end = (ix.t_alloc[block], ix.t_free[block]) if block is not None else (
            ix.seg_t_alloc[segment], ix.seg_t_free[segment])
        when = t if start <= t < end else int(max(start, ix.t_start))
        if block is not None:  # the segment that holds the block then
            holder = np.flatnonzero(
                (ix.seg_addr <= ix.addr[block]) & (ix.addr[block] < ix.seg_addr + ix.seg_size)
                & (ix.seg_t_alloc <= when) & (when < ix.seg_t_free))
            segment = int(holder[0]) if holder.size else None
        return AddressHit(
            block_id=int(ix.block_id[block]) if block is not None else None,
            segment_id=int(ix.seg_id[segment]) if segment is not None else None,
            t=when,
        )

    def find_block_id(self, block_id: int, t: int) -> AddressHit | None:
        """The block of id ``block_id`` and the segment holding it."""
        row = self.index.row_of_block(block_id)
        if row is None:
            return None
        return self.find(AddressQuery(int(self.index.addr[row]), "b",
                                      int(self.block_version[row])), t)

    def find_text(self, text: str, t: int) -> AddressHit | None:
        by_id = _BLOCK_ID.match(text.strip().lower())
        if by_id:
            return self.find_block_id(int(by_id.group(1)), t)
        for query in parse_address(text):
            hit = self.find(query, t)
            if hit is not None:
                return hit
        return None


@dataclass(frozen=True)
class AddressHit:
    block_id: int | None
    segment_id: int | None
    t: int  # a time at which they are alive (the cursor's, where it can be)


def _nearest(rows: np.ndarray, start: np.ndarray, end: np.ndarray, t: int) -> int | None:
    """The row alive at ``t``, else the one whose lifetime is closest to ``t``."""
    if rows.size == 0:
        return None
    s = np.maximum(start[rows], INT64_MIN + 1).astype(np.float64)
    e = end[rows].astype(np.float64)
    distance = np.where(t < s, s - t, np.where(t >= e, t - e + 1, 0.0))
    return int(rows[int(np.argmin(distance))])
