"""Captures that grow while a test runs (``memtui --follow``, ``memtui record``).

``BURSTS`` are msMemScope rows in three bursts whose figures are worked out by hand:

    burst 1: MALLOC a 1 KiB @1000, MALLOC b 2 KiB @1100, FREE a @1200  -> 2 blocks, peak 3 KiB
    burst 2: MALLOC c 4 KiB @1300                                      -> 3 blocks, peak 6 KiB
    burst 3: FREE b @1400, MALLOC d 8 KiB @1500                        -> 4 blocks, peak 12 KiB

:class:`DbWriter` writes them as msMemScope does (its connection held open), ``csv_line``
as its CSV; :func:`grown_snapshot` is a PyTorch snapshot with ``n`` 1 MiB blocks.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from memtui.analysis.summary import summary
from tests.helpers.memscope_files import COLUMNS, mem, row

MiB = 1 << 20
SEG = 0x7F00_0000_0000
KiB = 1024
BURSTS = [
    [row(1, "SYSTEM", "START_TRACE", 900, dev="N/A"),
     mem(2, "MALLOC", "PTA", 1000, 1, 0x1000, KiB, total=64 * KiB, used=KiB),
     mem(3, "MALLOC", "PTA", 1100, 2, 0x2000, 2 * KiB, total=64 * KiB, used=3 * KiB),
     mem(4, "FREE", "PTA", 1200, 1, 0x1000, KiB, total=64 * KiB, used=2 * KiB)],
    [mem(5, "MALLOC", "PTA", 1300, 3, 0x3000, 4 * KiB, total=64 * KiB, used=6 * KiB)],
    [mem(6, "FREE", "PTA", 1400, 2, 0x2000, 2 * KiB, total=64 * KiB, used=4 * KiB),
     mem(7, "MALLOC", "PTA", 1500, 4, 0x5000, 8 * KiB, total=64 * KiB, used=12 * KiB)],
]
EXPECTED = [(2, 3 * KiB), (3, 6 * KiB), (4, 12 * KiB)]  # (blocks, peak) after each burst


def figures(trace) -> tuple[int, int]:
    device = summary(trace)["devices"][0]
    return device["blocks"], device["peak_allocated_bytes"]


class DbWriter:
    """An msMemScope writer: the table, then bursts of rows, its connection held open."""

    def __init__(self, path: Path, journal: str = "WAL") -> None:
        self.con = sqlite3.connect(path, check_same_thread=False)
        self.con.execute(f"PRAGMA journal_mode={journal}")
        decl = ", ".join(f'"{c}" TEXT' for c in COLUMNS)
        self.con.execute(f"CREATE TABLE memscope_dump ({decl})")
        self.con.commit()

    def burst(self, rows) -> None:
        self.con.executemany(f"INSERT INTO memscope_dump VALUES ({','.join('?' * 12)})", rows)
        self.con.commit()

    def close(self) -> None:
        self.con.close()


HEADER = ",".join(COLUMNS) + "\n"


def csv_line(r) -> str:
    """One dump row as msMemScope's CSV writes it: ``{k:v,...}`` Attr, quoted."""
    values = list(r)
    attrs = json.loads(values[9])
    values[9] = '"{' + ",".join(f"{k}:{v}" for k, v in attrs.items()) + '}"'
    return ",".join(str(v) for v in values) + "\n"





def grown_snapshot(blocks: int) -> dict:
    """A 64 MiB segment with ``blocks`` 1 MiB blocks allocated (one alloc event each)."""
    live = [{"address": SEG + i * MiB, "size": MiB, "requested_size": MiB,
             "state": "active_allocated", "frames": []} for i in range(blocks)]
    rest = [{"address": SEG + blocks * MiB, "size": (64 - blocks) * MiB,
             "requested_size": 0, "state": "inactive", "frames": []}]
    return {
        "segments": [{"device": 0, "address": SEG, "total_size": 64 * MiB,
                      "allocated_size": blocks * MiB, "active_size": blocks * MiB,
                      "requested_size": blocks * MiB, "stream": 0, "segment_type": "large",
                      "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                      "blocks": live + rest}],
        "device_traces": [[{"action": "alloc", "addr": SEG + i * MiB, "size": MiB,
                            "stream": 0, "time_us": 100 * (i + 1), "frames": []}
                           for i in range(blocks)]],
    }


FRAMES = ["events", "blocks", "segments", "frames", "stacks", "calls", "curves", "markers"]


def assert_same_model(grown, fresh) -> None:
    """Every frame and device fact of two traces equal (markers sharing a time may come in
    either order: compared sorted)."""
    for name in FRAMES:
        left, right = getattr(grown, name), getattr(fresh, name)
        if name == "markers":
            left, right = left.sort(pl.all()), right.sort(pl.all())
        try:
            assert_frame_equal(left, right)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    assert grown.meta.devices == fresh.meta.devices
    assert grown.meta.warnings == fresh.meta.warnings, (grown.meta.warnings, fresh.meta.warnings)
