"""SQLite inputs that fight back: non-UTF-8 error text, leftover WAL files, read-only
folders, a writer starting mid-read, a recursive view (issue 12, defects 1, 9, 10)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from memtui.cli import main
from memtui.errors import CaptureError
from memtui.sources import open_capture
from memtui.sources.common.sqlite import connect_readonly, read_consistently
from tests.helpers.memscope_files import SCENARIO, write_db
from tests.sources.test_ascend_profiler import make_pytorch_db


def _one_line(capsys, path) -> str:
    code = main(["summary", str(path), "--json"])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_a_schema_whose_error_text_is_not_utf8_is_one_line(tmp_path, capsys):
    """SQLite quotes the bad schema entry in its error: 0xff bytes used to escape the
    sniff helpers as a UnicodeDecodeError (exit 1, a traceback)."""
    path = write_db(tmp_path / "memscope_dump_1.db", SCENARIO)
    data = bytearray(path.read_bytes())
    at = data.index(b"CREATE TABLE memscope_dump")
    data[at:at + 26] = b"CREATE TABLX \xff\xfe\xfd\xfc\xfb\xfa\xff\xfe\xfd\xfc\xfb\xfa\xff"
    path.write_bytes(bytes(data))
    with pytest.raises(sqlite3.DatabaseError):  # the defect's trigger still holds
        sqlite3.connect(path).execute("SELECT * FROM sqlite_master").fetchall()
    line = _one_line(capsys, path)
    assert line.startswith(f"memtui: {path}: ")


def _wal_with_leftover_log(folder: Path) -> Path:
    """A WAL database whose writer died: its rows only in the ``-wal``, no ``-shm``."""
    live = folder / "live"
    live.mkdir()
    db = write_db(live / "memscope_dump_1.db", [], wal=True)
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    write_db_rows(writer)
    copy = folder / "memscope_dump_1.db"
    shutil.copyfile(db, copy)
    shutil.copyfile(f"{db}-wal", f"{copy}-wal")
    writer.close()
    return copy


def write_db_rows(con: sqlite3.Connection) -> None:
    width = len(SCENARIO[0])
    con.executemany(f"INSERT INTO memscope_dump VALUES ({','.join('?' * width)})", SCENARIO)
    con.commit()


def test_a_leftover_wal_is_read_without_writing_beside_it(tmp_path):
    db = _wal_with_leftover_log(tmp_path)
    before = sorted(os.listdir(tmp_path))
    trace = open_capture(db)
    assert trace.blocks.height == 5  # the rows that are only in the -wal
    assert sorted(os.listdir(tmp_path)) == before  # no -shm created


def test_a_leftover_wal_in_a_read_only_folder_opens(tmp_path):
    db = _wal_with_leftover_log(tmp_path)
    tmp_path.chmod(0o555)
    try:
        assert open_capture(db).blocks.height == 5
    finally:
        tmp_path.chmod(0o755)


def test_the_private_copy_is_removed_on_close(tmp_path):
    db = _wal_with_leftover_log(tmp_path)
    con = connect_readonly(db)
    copy = Path(con.copy_dir)
    assert copy.is_dir()
    con.close()
    assert not copy.exists()


def test_a_writer_that_starts_mid_read_gives_a_consistent_read(tmp_path):
    """Opened immutable (WAL, no -wal), then a writer adds rows and checkpoints them into
    the file while we read: the read is done again from a private copy."""
    db = write_db(tmp_path / "memscope_dump_1.db", SCENARIO[:5], wal=True)
    assert not Path(f"{db}-wal").exists()
    calls = []

    def read(con):
        first = con.execute("SELECT count(*) FROM memscope_dump").fetchone()[0]
        if not calls:
            writer = sqlite3.connect(db)
            write_db_rows(writer)
            writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            writer.close()
            time.sleep(0.01)
        calls.append(first)
        return first

    assert read_consistently(db, read) == 5 + len(SCENARIO)
    assert calls == [5, 5 + len(SCENARIO)]


def test_a_recursive_view_in_a_profiler_db_does_not_hang(tmp_path):
    db = make_pytorch_db(tmp_path / "ascend_pytorch_profiler_0.db")
    con = sqlite3.connect(db)
    con.executescript("""
        DROP TABLE OP_MEMORY;
        CREATE VIEW OP_MEMORY AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)
            SELECT x AS name, x AS size, x AS allocationTime, x AS releaseTime,
                   x AS totalAllocateMemory, x AS totalReserveMemory, x AS deviceId FROM n;
    """)
    con.close()
    started = time.monotonic()
    try:
        trace = open_capture(db)
    except CaptureError as exc:
        assert "\n" not in str(exc)
    else:
        assert any("recursive view" in w for w in trace.meta.warnings)
    assert time.monotonic() - started < 30


def test_an_exploding_query_is_interrupted(tmp_path):
    """The backstop: any query is stopped after a budget of steps for the file's size."""
    db = tmp_path / "small.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    con.commit()
    con.close()
    reader = connect_readonly(db)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        reader.execute("SELECT count(*) FROM t a, t b, t c, t d, t e").fetchone()
    reader.close()
    assert time.monotonic() - started < 30
