"""The chunked DB reader follows the rows that exist: extreme rowids cost nothing
(issue 12, defect 2: one row at 2**63-1 made it build ~1.4e14 chunk bounds)."""

from __future__ import annotations

import sqlite3

import pytest

from memtui.sources import open_capture
from memtui.sources.memscope.read import rowid_chunks
from tests.helpers.memscope_files import COLUMNS, SCENARIO, write_db


def _with_rowids(path, rowids):
    write_db(path, [])
    con = sqlite3.connect(path)
    width = len(COLUMNS)
    con.executemany(f"INSERT INTO memscope_dump (rowid, {', '.join(repr(c) for c in COLUMNS)})"
                    f" VALUES (?, {','.join('?' * width)})".replace("'", '"'),
                    [(rowid, *row) for rowid, row in zip(rowids, SCENARIO, strict=False)])
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("last", [2**63 - 1, 20_000_000_000, -(2**63) + 5])
def test_an_extreme_rowid_reads_every_row_at_once(tmp_path, last):
    rowids = list(range(1, len(SCENARIO))) + [last]
    path = _with_rowids(tmp_path / "memscope_dump_1.db", rowids)
    con = sqlite3.connect(path)
    chunks = rowid_chunks(con, "memscope_dump", rows=4)
    con.close()
    assert len(chunks) <= len(SCENARIO)
    covered = [r for r in rowids if any(a <= r <= b for a, b in chunks)]
    assert covered == rowids
    (tmp_path / "plain").mkdir()
    reference = open_capture(write_db(tmp_path / "plain" / "memscope_dump_1.db", SCENARIO))
    trace = open_capture(path)
    assert trace.blocks.height == reference.blocks.height == 5
    assert trace.events.height == reference.events.height


def test_chunks_by_hand():
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t (rowid, x) VALUES (?, 0)",
                    [(r,) for r in (1, 2, 3, 10, 11, 1000, 2**63 - 1)])
    assert rowid_chunks(con, "t", rows=3) == [
        (1, 3), (10, 12), (1000, 1002), (2**63 - 1, 2**63 - 1)]
    con.execute("DELETE FROM t")
    assert rowid_chunks(con, "t") == []
