"""Following growing captures (memtui.sources.follow): only what is new is read, a half-written
line or dump is never shown, truncation, rotation and deletion stop the reading.

The captures are written as the test goes, in bursts, some by a writer thread holding its
connection open (as a running job does); tests/helpers/live_captures.py has the rows and the
figures worked out by hand, per burst:

    burst 1: MALLOC a 1 KiB @1000, MALLOC b 2 KiB @1100, FREE a @1200  -> 2 blocks, peak 3 KiB
    burst 2: MALLOC c 4 KiB @1300                                      -> 3 blocks, peak 6 KiB
    burst 3: FREE b @1400, MALLOC d 8 KiB @1500                        -> 4 blocks, peak 12 KiB
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from pathlib import Path

import pytest

from memtui.errors import CaptureError
from memtui.record.recorder import write_atomically
from memtui.sources import open_capture
from memtui.sources.follow import (
    CsvFollower,
    FolderFollower,
    MemscopeDbFollower,
    open_follower,
)
from memtui.sources.memscope.tail import complete_records
from tests.helpers.live_captures import (
    BURSTS,
    EXPECTED,
    HEADER,
    DbWriter,
    KiB,
    csv_line,
    figures,
    grown_snapshot,
)
from tests.helpers.memscope_files import mem


@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
def test_db_follower_reads_each_row_once(tmp_path, journal):
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path, journal)
    follower = open_follower(path)
    assert isinstance(follower, MemscopeDbFollower)
    first = follower.poll()
    assert first.trace is None and "waiting" in first.waiting
    for burst, expected in zip(BURSTS, EXPECTED, strict=True):
        writer.burst(burst)
        update = follower.poll()
        assert update.new_rows == len(burst)  # only the rows of this burst were read
        assert figures(update.trace) == expected
        assert follower.poll().trace is None  # nothing new: nothing read, nothing built
    writer.close()
    full = open_capture(path)
    assert update.trace.events.equals(full.events)
    assert update.trace.blocks.equals(full.blocks)


def test_db_follower_beside_a_writer_thread_never_blocks_it(tmp_path):
    """The writer commits many small bursts while the follower polls: no "locked" error
    on either side, and the followed model ends equal to a full read."""
    path = tmp_path / "memscope_dump_2.db"
    writer = DbWriter(path)
    rows = [mem(2 * i + 1, "MALLOC", "PTA", 1000 + 10 * i, i + 1, 0x1000 * (i + 1), KiB)
            for i in range(300)]
    errors: list[Exception] = []

    def write() -> None:
        try:
            for i in range(0, len(rows), 3):
                writer.burst(rows[i:i + 3])
        except Exception as exc:  # a blocked writer shows here
            errors.append(exc)

    follower = open_follower(path)
    thread = threading.Thread(target=write)
    thread.start()
    read = 0
    while thread.is_alive():
        read += follower.poll().new_rows
    thread.join()
    read += follower.poll().new_rows
    writer.close()
    assert not errors
    assert read == len(rows)
    assert figures(follower.tail.trace()) == (300, 300 * KiB)


def test_db_follower_writes_nothing_beside_a_finished_file(tmp_path):
    path = tmp_path / "memscope_dump_3.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    writer.close()  # the writer is gone: no -wal, no -shm
    before = sorted(os.listdir(tmp_path))
    follower = open_follower(path)
    assert figures(follower.poll().trace) == EXPECTED[0]
    follower.poll()
    assert sorted(os.listdir(tmp_path)) == before


def test_db_truncation_stops_reading_until_restart(tmp_path):
    path = tmp_path / "memscope_dump_4.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    writer.burst(BURSTS[1])
    follower = open_follower(path)
    assert figures(follower.poll().trace) == EXPECTED[1]
    writer.con.execute("DELETE FROM memscope_dump WHERE rowid > 2")
    writer.con.commit()
    update = follower.poll()
    assert update.trace is None and "truncated" in update.problem
    assert "truncated" in follower.poll().problem  # stays stopped
    follower.restart()
    assert follower.poll().new_rows == 2


def test_db_deleted_or_replaced(tmp_path):
    path = tmp_path / "memscope_dump_5.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    writer.close()
    follower = open_follower(path)
    follower.poll()
    path.rename(tmp_path / "old.db")
    assert "deleted" in follower.poll().problem
    follower.restart()
    other = DbWriter(path)  # a new file under the name: rotated
    other.burst(BURSTS[0])
    other.close()
    assert figures(follower.poll().trace) == EXPECTED[0]
    os.replace(tmp_path / "old.db", path)
    assert "replaced" in follower.poll().problem


# -- CSV --------------------------------------------------------------------------------------

def test_csv_follower_reads_complete_lines_only(tmp_path):
    path = tmp_path / "memscope_dump_1.csv"
    path.write_text(HEADER)
    follower = open_follower(path)
    assert isinstance(follower, CsvFollower)
    assert follower.poll().trace is None
    lines = [csv_line(r) for r in BURSTS[0]]
    with open(path, "a") as fh:  # three lines and half of the fourth
        fh.write("".join(lines[:3]) + lines[3][:20])
    update = follower.poll()
    assert update.new_rows == 3
    assert figures(update.trace) == (2, 3 * KiB)  # a freed later: still alive
    with open(path, "a") as fh:
        fh.write(lines[3][20:])
    assert follower.poll().new_rows == 1
    for burst, expected in zip(BURSTS[1:], EXPECTED[1:], strict=True):
        with open(path, "a") as fh:
            fh.write("".join(csv_line(r) for r in burst))
        update = follower.poll()
        assert update.new_rows == len(burst)
        assert figures(update.trace) == expected
        assert update.trace.meta.path == str(path)
    assert not [p for p in tmp_path.iterdir() if p.name != path.name]  # nothing beside it
    follower.close()


def test_complete_records_end_at_newlines_outside_quotes():
    data = b'1,a,"x\ny",2\n3,b,"z\n'  # the second record's quoted stack is unfinished
    assert complete_records(data) == (12, 1)
    assert complete_records(data + b'w",4\n') == (len(data) + 5, 2)
    assert complete_records(b"no newline") == (0, 0)
    assert complete_records(b"") == (0, 0)


def test_csv_with_multiline_stacks_split_mid_record(tmp_path):
    """A quoted Python stack spans lines: a record cut inside it waits for its end, and the
    followed model ends equal to a full read of the file."""
    stack = '"/u/train.py(10): forward\n/u/train.py(20): <module>\n"'
    rows = [r[:10] + (stack, "") if r[1] in ("MALLOC", "FREE") else r
            for burst in BURSTS for r in burst]
    text = "".join(csv_line(r) for r in rows)
    path = tmp_path / "memscope_dump_3.csv"
    path.write_text(HEADER)
    follower = open_follower(path)
    cut = text.index("<module>", text.index("MALLOC,PTA"))  # inside the first stack
    with open(path, "a") as fh:
        fh.write(text[:cut])
    assert follower.poll().new_rows == 1  # START_TRACE; the MALLOC cut in its stack waits
    read = 1
    for piece in (text[cut:len(text) // 2], text[len(text) // 2:]):
        with open(path, "a") as fh:
            fh.write(piece)
        read += follower.poll().new_rows
    assert read == len(rows)
    full = open_capture(path)
    followed = follower.tail.trace()
    assert followed.events.equals(full.events) and followed.blocks.equals(full.blocks)
    assert figures(followed) == EXPECTED[-1]


def test_a_python_trace_csv_new_lines_parsed_from_a_private_file(tmp_path):
    path = tmp_path / "python_trace_1.csv"
    path.write_text("FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id\n"
                    "/m.py(1): a,1764753083000001000,1764753083000002000,7,7\n")
    follower = open_follower(path)
    assert follower.poll().trace.calls.height == 1
    with open(path, "a") as fh:
        fh.write("/m.py(2): b,1764753083000003000,1764753083000004000,7,7\n/m.py(3): c,17")
    update = follower.poll()
    assert update.new_rows == 1 and update.trace.calls.height == 2
    assert not [p for p in tmp_path.iterdir() if p.name != path.name]
    follower.close()


def test_csv_truncated(tmp_path):
    path = tmp_path / "memscope_dump_2.csv"
    path.write_text(HEADER + "".join(csv_line(r) for r in BURSTS[0]))
    follower = open_follower(path)
    assert figures(follower.poll().trace) == EXPECTED[0]
    path.write_text(HEADER)
    assert "truncated" in follower.poll().problem
    follower.close()


# -- snapshot dumps ---------------------------------------------------------------------------


def dump(folder: Path, name: str, blocks: int, age: float) -> Path:
    """A dump written atomically, its modification time ``age`` seconds ago."""
    path = folder / name
    write_atomically(path, pickle.dumps(grown_snapshot(blocks), protocol=4))
    mtime = time.time_ns() - int(age * 1e9)
    os.utime(path, ns=(mtime, mtime))
    return path


def test_snapshot_folder_shows_the_newest_complete_dump(tmp_path):
    follower = open_follower(tmp_path)
    assert isinstance(follower, FolderFollower)
    assert "waiting" in follower.poll().waiting
    dump(tmp_path, "snapshot_1.pickle", 2, age=100)
    assert figures(follower.poll().trace)[0] == 2
    assert follower.poll().trace is None
    # A dump being written under its final name (not atomically), a temporary file:
    data = pickle.dumps(grown_snapshot(9), protocol=4)
    partial = tmp_path / "snapshot_3.pickle"
    partial.write_bytes(data[: len(data) // 2])
    (tmp_path / ".snapshot_4.pickle.tmp").write_bytes(data[:10])
    assert follower.poll().trace is None  # neither is shown
    dump(tmp_path, "snapshot_2.pickle", 5, age=50)
    partial.write_bytes(data[: len(data) // 2])  # still newer, still partial
    update = follower.poll()
    assert figures(update.trace)[0] == 5 and update.trace.meta.path.endswith("snapshot_2.pickle")
    partial.write_bytes(data)  # now complete
    update = follower.poll()
    assert figures(update.trace)[0] == 9 and update.trace.meta.path.endswith("snapshot_3.pickle")


def test_an_msmemscope_result_folder_follows_its_newest_dump_file(tmp_path):
    """``memtui -f memscopeDumpResults`` before the run starts: it waits, follows the run's
    DB as it grows, and a newer run's DB when one appears."""
    results = tmp_path / "memscopeDumpResults"
    results.mkdir()
    follower = open_follower(results)
    assert "msMemScope dump file" in follower.poll().waiting
    first = results / "msmemscope_1_20251203_ascend" / "device_0" / "dump"
    first.mkdir(parents=True)
    writer = DbWriter(first / "memscope_dump_1.db")
    writer.burst(BURSTS[0])
    update = follower.poll()
    assert figures(update.trace) == EXPECTED[0]
    assert update.trace.meta.device_names == ["npu:0"]
    writer.burst(BURSTS[1])
    assert follower.poll().new_rows == len(BURSTS[1])
    writer.close()
    second = results / "msmemscope_2_20251204_ascend" / "device_0" / "dump"
    second.mkdir(parents=True)
    later = DbWriter(second / "memscope_dump_2.db")
    later.burst(BURSTS[0])
    update = follower.poll()
    assert update.trace.meta.path.endswith("memscope_dump_2.db")
    assert figures(update.trace) == EXPECTED[0]
    later.close()
    follower.close()


def test_a_folder_of_several_ranks_follows_one(tmp_path):
    """``memtui record`` in a distributed job: every rank dumps into the folder.  The
    lowest rank is followed and said; another rank's newer dump never takes its place;
    ``rank=1`` follows rank 1."""
    dump(tmp_path, "rank1_77_1.pickle", 6, age=100)
    follower = open_follower(tmp_path)
    assert figures(follower.poll().trace)[0] == 6  # the only rank so far
    assert follower.scope is None
    dump(tmp_path, "rank0_76_1.pickle", 2, age=90)
    update = follower.poll()
    assert figures(update.trace)[0] == 2 and follower.scope == "rank 0 of 2"
    dump(tmp_path, "rank1_77_2.pickle", 7, age=10)  # rank 1's newer dump: not shown
    assert follower.poll().trace is None
    dump(tmp_path, "rank0_76_2.pickle", 3, age=5)
    update = follower.poll()
    assert figures(update.trace)[0] == 3 and update.trace.meta.path.endswith("rank0_76_2.pickle")
    assert follower.rank_choice().listing() == "▶ rank 0, rank 1"
    other = open_follower(tmp_path, rank=1)
    assert figures(other.poll().trace)[0] == 7 and other.scope == "rank 1 of 2"
    missing = open_follower(tmp_path, rank=5)
    assert "for rank 5 (ranks seen: rank 0, rank 1)" in missing.poll().waiting


def test_an_msmemscope_folder_of_several_devices_follows_one(tmp_path):
    run = tmp_path / "msmemscope_1_20251203_ascend"
    writers = {}
    for device in (1, 0):
        folder = run / f"device_{device}" / "dump"
        folder.mkdir(parents=True)
        writers[device] = DbWriter(folder / f"memscope_dump_{device}.db")
    writers[0].burst(BURSTS[0])
    writers[1].burst(BURSTS[0] + BURSTS[1])  # written last: the newest file
    follower = open_follower(run)
    update = follower.poll()
    assert update.trace.meta.path.endswith("memscope_dump_0.db")
    assert follower.scope == "device_0 of 2"
    writers[1].burst(BURSTS[2])
    writers[0].burst(BURSTS[1])
    assert figures(follower.poll().trace) == EXPECTED[1]
    other = open_follower(run, rank=1)
    assert figures(other.poll().trace) == EXPECTED[2] and other.scope == "device_1 of 2"
    other.close()
    for writer in writers.values():
        writer.close()
    follower.close()


def test_one_snapshot_file_rewritten_in_place(tmp_path):
    path = dump(tmp_path, "snap.pickle", 3, age=100)
    follower = open_follower(path)
    assert figures(follower.poll().trace)[0] == 3
    dump(tmp_path, "snap.pickle", 4, age=50)
    assert figures(follower.poll().trace)[0] == 4


def test_what_cannot_be_followed(tmp_path):
    with pytest.raises(CaptureError, match="no such file"):
        open_follower(tmp_path / "missing.db")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(CaptureError, match="--follow reads"):
        open_follower(text)
