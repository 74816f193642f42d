"""Following when rows are written again under reused ids, and when what is new cannot be
read (issue 27, points 6 and 7).  Figures per burst: tests/helpers/live_captures.py."""

from __future__ import annotations

import os
import pickle
import time

from memtui.sources import open_capture
from memtui.sources.follow import open_follower
from tests.helpers.live_captures import BURSTS, EXPECTED, DbWriter, figures, grown_snapshot
from tests.helpers.memscope_files import mem

KiB = 1024


def test_rows_deleted_and_inserted_again_under_the_same_ids_are_read_again(tmp_path):
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0] + BURSTS[1] + BURSTS[2])
    follower = open_follower(path)
    assert figures(follower.poll().trace) == EXPECTED[2]
    # every row past the first four deleted, and as many others written in their place
    writer.con.execute("DELETE FROM memscope_dump WHERE rowid > 4")
    writer.burst([mem(50 + i, "MALLOC", "PTA", 1300 + i, 50 + i, 0x9000 + i * 0x1000,
                      32 * KiB, total=256 * KiB, used=32 * KiB) for i in range(3)])
    update = follower.poll()
    assert update.notice and "written again under the same ids" in update.notice
    fresh = open_capture(path)
    assert update.trace.events.equals(fresh.events)
    assert update.trace.blocks.equals(fresh.blocks)
    writer.close()


def test_a_table_emptied_and_filled_again_is_read_again(tmp_path):
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    follower = open_follower(path)
    assert figures(follower.poll().trace) == EXPECTED[0]
    writer.con.execute("DELETE FROM memscope_dump")
    writer.burst(BURSTS[1] + BURSTS[0])  # more rows than before: the ids run past the old
    update = follower.poll()
    fresh = open_capture(path)
    assert update.notice is not None
    assert update.trace.blocks.equals(fresh.blocks)
    writer.close()


def test_a_changed_schema_is_read_again(tmp_path):
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    follower = open_follower(path)
    follower.poll()
    writer.con.execute('ALTER TABLE memscope_dump ADD COLUMN "Extra" TEXT')
    writer.con.commit()
    writer.con.executemany(f"INSERT INTO memscope_dump VALUES ({','.join('?' * 13)})",
                           [(*r, None) for r in BURSTS[1]])
    writer.con.commit()
    update = follower.poll()
    assert update.notice is not None
    assert figures(update.trace) == EXPECTED[1]
    writer.close()


def write_dump(path, blocks: int, age: float) -> None:
    path.write_bytes(pickle.dumps(grown_snapshot(blocks), protocol=4))
    mtime = time.time_ns() - int(age * 1e9)
    os.utime(path, ns=(mtime, mtime))


def test_a_newest_dump_that_never_loads_says_the_view_is_stale(tmp_path):
    write_dump(tmp_path / "snapshot_1.pickle", 2, age=100)
    follower = open_follower(tmp_path)
    assert figures(follower.poll().trace)[0] == 2
    broken = tmp_path / "snapshot_2.pickle"
    broken.write_bytes(pickle.dumps(grown_snapshot(5), protocol=4)[:-40])
    first = follower.poll()  # just written: perhaps still being written
    assert first.trace is None and first.stale is None
    old = time.time_ns() - 60 * 10**9
    os.utime(broken, ns=(old, old))  # its writer left it alone long ago
    update = follower.poll()
    assert update.trace is None
    assert update.stale and "no readable dump: snapshot_2.pickle does not load" in update.stale


def test_every_dump_deleted_says_the_view_is_stale(tmp_path):
    write_dump(tmp_path / "snapshot_1.pickle", 2, age=100)
    follower = open_follower(tmp_path)
    follower.poll()
    (tmp_path / "snapshot_1.pickle").unlink()
    assert "no dump left" in follower.poll().stale
