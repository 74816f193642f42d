"""msMemScope bad input and safety: one-line errors, skipped rows, read-only, live writers."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time

import polars as pl
import pytest

from memtui.cli import main
from memtui.sources import open_capture
from tests.helpers.memscope_files import COLUMNS, SCENARIO, mem, write_db, write_text


def _error_line(capsys, path) -> str:
    code = main(["summary", str(path), "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    assert lines[0].startswith(f"memtui: {path}: ")
    return lines[0]


def test_corrupt_db(tmp_path, capsys):
    path = tmp_path / "memscope_dump_1.db"
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 40)
    assert "the SQLite database is corrupt or truncated" in _error_line(capsys, path)


def test_truncated_db(tmp_path, capsys):
    good = write_db(tmp_path / "good.db", SCENARIO * 200)
    data = good.read_bytes()
    path = tmp_path / "memscope_dump_cut.db"
    path.write_bytes(data[: len(data) // 2])
    assert "the SQLite database is corrupt or truncated" in _error_line(capsys, path)


def test_table_without_required_columns(tmp_path, capsys):
    path = write_db(tmp_path / "memscope_dump_1.db", [r[:3] for r in SCENARIO],
                    columns=COLUMNS[:3])
    line = _error_line(capsys, path)
    assert "lacks the column(s) Timestamp" not in line  # named by what the model calls them
    assert "table memscope_dump lacks the column(s) t, dev, ptr, attr" in line


def test_empty_table(tmp_path, capsys):
    path = write_db(tmp_path / "memscope_dump_1.db", [])
    assert "without a single row" in _error_line(capsys, path)


def test_legacy_csv_layout(tmp_path, capsys):
    path = write_text(tmp_path / "leaks_dump_1.csv",
                      "Record Index,Timestamp(us),Event,Event Type,Process Id,Thread Id,"
                      "Device Id,Kernel Index,Flag,Addr,Size(byte),Total Allocated(byte),"
                      "Total Reserved(byte)\n1,2,malloc,,3,3,0,0,0,16,512,512,2097152\n")
    assert "early-2025 layout" in _error_line(capsys, path)


def test_header_only_csv(tmp_path, capsys):
    path = write_text(tmp_path / "memscope_dump_1.csv", ",".join(COLUMNS) + "\n")
    assert "without a single row" in _error_line(capsys, path)


def test_rows_with_bad_numbers_are_skipped_and_counted(tmp_path):
    rows = list(SCENARIO) + [(99, "MALLOC", "PTA", "N/A", "yesterday", 100, 100, "0", "0x9",
                              '{"allocation_id":"99","size":"8"}', "", "")]
    trace = open_capture(write_db(tmp_path / "memscope_dump_1.db", rows))
    assert trace.events.height == 13
    assert any("1 rows without a readable event or timestamp" in w
               for w in trace.meta.warnings)


def test_separator_characters_in_text_fall_back(tmp_path):
    """Text holding the control characters the fast path splits on is read plainly."""
    rows = list(SCENARIO)
    rows[2] = rows[2][:3] + ("op\x1fwith\x1eseparators",) + rows[2][4:]
    trace = open_capture(write_db(tmp_path / "memscope_dump_1.db", rows))
    assert trace.events.height == 13
    assert "op\x1fwith\x1eseparators" in trace.markers["name"].to_list()


def test_db_is_never_written(tmp_path):
    finished = write_db(tmp_path / "memscope_dump_1.db", SCENARIO, wal=True)
    plain = write_db(tmp_path / "memscope_dump_2.db", SCENARIO)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (finished, plain)}
    for path in (finished, plain):
        open_capture(path)
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memscope_dump_1.db",
                                                           "memscope_dump_2.db"]


def test_read_only_folder(tmp_path):
    path = write_db(tmp_path / "memscope_dump_1.db", SCENARIO, wal=True)
    tmp_path.chmod(0o555)
    try:
        assert open_capture(path).events.height == 13
    finally:
        tmp_path.chmod(0o755)


def test_opening_while_msmemscope_writes(tmp_path):
    """A WAL writer keeps committing (with no busy timeout) while the file is opened."""
    path = tmp_path / "memscope_dump_live.db"
    writer = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    decl = ", ".join(f'"{c}"' for c in COLUMNS)
    writer.execute(f"CREATE TABLE memscope_dump ({decl})")
    insert = f"INSERT INTO memscope_dump VALUES ({','.join('?' * 12)})"
    writer.executemany(insert, [mem(i, "MALLOC", "PTA", i, i, 16 * i, 8, total=1 << 20)
                                for i in range(1, 20001)])
    errors: list[Exception] = []
    commits = [0]
    stop = threading.Event()

    def write() -> None:
        i = 20001
        while not stop.is_set():
            try:
                writer.execute("BEGIN IMMEDIATE")
                writer.executemany(insert, [mem(j, "MALLOC", "PTA", j, j, 16 * j, 8,
                                                total=1 << 20) for j in range(i, i + 50)])
                writer.execute("COMMIT")
                commits[0] += 1
                i += 50
            except sqlite3.Error as exc:  # "database is locked": the reader blocked it
                errors.append(exc)
                return

    thread = threading.Thread(target=write)
    thread.start()
    try:
        time.sleep(0.05)
        loads = [open_capture(path) for _ in range(3)]
    finally:
        stop.set()
        thread.join()
    total = writer.execute("SELECT count(*) FROM memscope_dump").fetchone()[0]
    writer.close()
    assert errors == []
    assert commits[0] > 0
    heights = [t.events.height for t in loads]
    assert all(20000 <= h <= total for h in heights)
    for trace in loads:  # every row read is whole: a MALLOC with its size
        assert trace.events["size"].null_count() == 0
        assert trace.events.filter(pl.col("size") != 8).is_empty()


@pytest.mark.parametrize("text", ["", "ID,Event\n", "\x00\x01\x02"])
def test_small_garbage_csv_is_not_claimed(tmp_path, capsys, text):
    path = write_text(tmp_path / "memscope_dump_1.csv", text)
    line = _error_line(capsys, path)
    assert "empty" in line or "not a format memtui reads" in line
