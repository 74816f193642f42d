"""Following real captures of ../shared/data replayed as if written live: the DB's rows
copied into a new file in bursts, the CSVs appended in pieces cut anywhere (also inside a
record), a snapshot renamed into a folder beside a partial copy.  The followed model must
end equal to a plain read of the original.  Skips where ../shared is absent."""

from __future__ import annotations

import os
import sqlite3

import pytest

from memtui.sources import open_capture
from memtui.sources.follow import open_follower
from tests.conftest import require_shared


def same_model(followed, full) -> None:
    assert followed.events.equals(full.events)
    assert followed.blocks.equals(full.blocks)
    assert followed.segments.equals(full.segments)


def test_a_real_db_replayed_in_bursts(tmp_path):
    source = require_shared("msmemscope") / "msinsight_mirror__full_db__leaks_dump_2025.dat"
    live = tmp_path / "leaks_dump_2025.db"
    con = sqlite3.connect(live)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"ATTACH 'file:{source}?mode=ro&immutable=1' AS src")
    con.execute("CREATE TABLE leaks_dump AS SELECT * FROM src.leaks_dump WHERE 0")
    con.commit()
    total = con.execute("SELECT max(rowid) FROM src.leaks_dump").fetchone()[0]
    follower = open_follower(live)
    read = 0
    for low in range(0, total, total // 4 + 1):
        con.execute("INSERT INTO leaks_dump SELECT * FROM src.leaks_dump "
                    "WHERE rowid > ? AND rowid <= ?", (low, low + total // 4 + 1))
        con.commit()
        update = follower.poll()
        read += update.new_rows
    assert read == total
    # The original with Insight's extra tables, read plainly, gives the same model.
    same_model(update.trace, open_capture(source))
    con.close()


@pytest.mark.parametrize("name", [
    "test__smoke__testfile__csvfile__memscope_dump_20250428113810.csv",
    "example__compare__leaks.csv",
])
def test_a_real_csv_appended_in_pieces_cut_anywhere(tmp_path, name):
    source = require_shared("msmemscope") / name
    data = source.read_bytes()
    live = tmp_path / source.name
    live.write_bytes(b"")
    follower = open_follower(live)
    cuts = [0, 37, len(data) // 3 + 5, len(data) // 2 + 11, len(data) - 3, len(data)]
    for a, b in zip(cuts, cuts[1:], strict=False):
        with open(live, "ab") as fh:
            fh.write(data[a:b])
        update = follower.poll()
        if update.trace is not None:
            last = update.trace
    same_model(last, open_capture(source))
    assert sorted(os.listdir(tmp_path)) == [source.name]
    follower.close()


def test_a_real_snapshot_renamed_in_beside_a_partial_copy(tmp_path):
    source = require_shared("torch_snapshots") / "t20_flexgen_oom_snapshot.pickle"
    data = source.read_bytes()
    follower = open_follower(tmp_path)
    (tmp_path / "snapshot_b.pickle").write_bytes(data[: len(data) // 2])
    (tmp_path / ".snapshot_a.pickle.tmp").write_bytes(data)
    assert follower.poll().trace is None
    os.replace(tmp_path / ".snapshot_a.pickle.tmp", tmp_path / "snapshot_a.pickle")
    os.utime(tmp_path / "snapshot_b.pickle")  # the partial one stays the newest
    update = follower.poll()
    assert update.trace.meta.path.endswith("snapshot_a.pickle")
    same_model(update.trace, open_capture(source))
