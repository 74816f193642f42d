"""The typed read of msMemScope DBs gives exactly what the text read gives, falls back to
it chunk by chunk where a value is not of its column's type, and, like it, never writes
beside the input.  Every test runs on both typed readers: the compiled rows reader
(``_sqlite_rows.c``, skipped where it was not built) and the ADBC driver."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

import memtui.sources.memscope.read as read
from memtui.model import SCHEMAS, MemoryTrace
from memtui.sources import open_capture
from memtui.sources.common.sqlite import compiled_rows, connect_arrow, readonly_uri
from tests.conftest import shared_files
from tests.helpers.memscope_files import SCENARIO, SCENARIO_TRACE, T0, mem, row, write_db

pytest.importorskip("adbc_driver_sqlite")


@pytest.fixture(autouse=True, params=["compiled", "adbc"])
def typed_reader(request, monkeypatch) -> str:
    """Which typed reader the test runs on."""
    if request.param == "compiled":
        if not compiled_rows():
            pytest.skip("the compiled rows reader was not built (no sqlite3.h) or is off")
    else:
        monkeypatch.setattr(read, "connect_rows", lambda path: None)
    return request.param


def both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryTrace, MemoryTrace, dict]:
    """(typed read, text read, how many chunks each way took)."""
    counts = {"typed": 0, "text": 0}
    typed_fetch = read.ChunkQuery._fetch_typed

    def counted(self, *args):
        got = typed_fetch(self, *args)
        counts["typed" if got is not None else "text"] += 1
        return got

    monkeypatch.setattr(read.ChunkQuery, "_fetch_typed", counted)
    typed = open_capture(path)
    monkeypatch.setattr(read, "connect_arrow", lambda path: None)
    monkeypatch.setattr(read, "connect_rows", lambda path: None)
    text = open_capture(path)
    return typed, text, counts


def assert_same(a: MemoryTrace, b: MemoryTrace) -> None:
    assert a.meta == b.meta
    for name in SCHEMAS:
        assert a.frame(name).equals(b.frame(name)), name


def test_the_scenario_reads_the_same_typed(tmp_path, monkeypatch):
    path = write_db(tmp_path / "memscope_dump_1.db", SCENARIO, traces={100: SCENARIO_TRACE})
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts == {"typed": 2, "text": 0}  # the dump and the python trace, typed
    assert_same(typed, text)
    assert typed.events.height == 13  # the MALLOC, FREE and ACCESS rows


def test_many_chunks_read_several_at_once_keep_their_order(tmp_path, monkeypatch):
    # Chunks of 3 rows, fetched by several threads (read.typed_fetchers) on a connection
    # each, parsed in rowid order.
    path = write_db(tmp_path / "memscope_dump_9.db", SCENARIO, traces={100: SCENARIO_TRACE})
    whole = open_capture(path)  # (one chunk)
    chunked = read.rowid_chunks
    monkeypatch.setattr(read, "rowid_chunks", lambda con, table: chunked(con, table, rows=3))
    # the fetching threads of each table's read (the query held, so that no later query
    # takes its id; a thread's ident may be reused by the next read's pool, or not)
    threads: dict[read.ChunkQuery, set[int]] = {}
    fetch = read.ChunkQuery.fetch
    lock = threading.Lock()
    # the typed read's first fetches wait for each other: they run at once, a thread each
    # (a fetch done before the next is asked for would leave its thread to that one)
    together = threading.Barrier(read.typed_fetchers())
    waited = []

    def seen(self, bounds):
        threads.setdefault(self, set()).add(threading.get_ident())
        if self.typed is not None and self.table == "memscope_dump":
            with lock:
                wait = len(waited) < together.parties
                waited.append(bounds)
            if wait:
                together.wait(timeout=10)
        return fetch(self, bounds)

    monkeypatch.setattr(read.ChunkQuery, "fetch", seen)
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts["text"] == 0 and counts["typed"] >= len(SCENARIO) // 3
    dump_reads = [fetchers for query, fetchers in threads.items()
                  if query.table == "memscope_dump"]
    # typed: a thread each; text: one
    assert [len(fetchers) for fetchers in dump_reads] == [read.typed_fetchers(), 1]
    assert_same(typed, text)
    assert_same(typed, whole)


def test_values_of_another_type_fall_back_to_text(tmp_path, monkeypatch):
    rows = [*SCENARIO,
            # a timestamp SQLite keeps as text, a device stored as a number, an empty name
            (30, "MALLOC", "PTA", "", f" {T0 + 3300}x", 100, 100, 0, "0x0000000000005000",
             '{"allocation_id":"9","addr":"0x5000","size":"64"}', "", ""),
            row(31, "MSTX", "Mark", 3400, name=""),
            mem(32, "FREE", "PTA", 3500, 9, 0x5000, 64)]
    path = write_db(tmp_path / "memscope_dump_2.db", rows)
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts["text"] >= 1
    assert_same(typed, text)


def test_a_chunk_starting_with_null_texts_is_read_typed(tmp_path, monkeypatch):
    # The driver types a column by its first values: 2000 NULL names, stacks and Attr
    # before the first text would make it a number column, failing the chunk over to text.
    rows = [row(100 + i, "OP_LAUNCH", "ATEN_START", 5000 + i, name=None) for i in range(2000)]
    rows = [(*r[:9], None, None, None) for r in rows] + SCENARIO
    path = write_db(tmp_path / "memscope_dump_5.db", rows)
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts == {"typed": 1, "text": 0}
    assert_same(typed, text)
    assert typed.markers.filter(typed.markers["kind"] == "op").height == 2000 + 1


def test_text_that_is_not_utf8_reads_the_same(tmp_path, monkeypatch):
    path = write_db(tmp_path / "memscope_dump_3.db", SCENARIO)
    con = sqlite3.connect(path)
    con.execute("UPDATE memscope_dump SET Name = CAST(X'66ff6f' AS TEXT) WHERE ID = 18")
    con.commit()
    con.close()
    typed, text, _ = both_ways(path, monkeypatch)
    assert_same(typed, text)


def test_a_call_stack_that_is_not_utf8_reads_the_same(tmp_path, monkeypatch):
    """The call stacks are checked per distinct text (dictionary-encoded in the fetching
    thread): one that is not UTF-8 still sends its chunk the text way."""
    path = write_db(tmp_path / "memscope_dump_4.db", SCENARIO)
    con = sqlite3.connect(path)
    con.execute('UPDATE memscope_dump SET "Call Stack(Python)" = CAST(X\'61ff62\' AS TEXT) '
                "WHERE Event = 'MALLOC'")
    con.commit()
    con.close()
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts == {"typed": 0, "text": 1}
    assert_same(typed, text)


@pytest.mark.parametrize("wal", [False, True])
def test_the_typed_read_writes_nothing_beside_the_input(tmp_path, wal):
    folder = tmp_path / "in"
    folder.mkdir()
    path = write_db(folder / "memscope_dump_4.db", SCENARIO, wal=wal)
    before = sorted(p.name for p in folder.iterdir())
    data = path.read_bytes()
    con = connect_arrow(path)
    assert con is not None
    assert ("immutable=1" in readonly_uri(path)) == wal
    assert con.table("SELECT count(*) AS n FROM memscope_dump").num_rows == 1
    with pytest.raises(Exception):  # noqa: B017 - read-only: any write is refused
        con.execute("DELETE FROM memscope_dump")
    con.close()
    open_capture(path)
    assert sorted(p.name for p in folder.iterdir()) == before
    assert path.read_bytes() == data


def test_an_empty_wal_left_by_a_reader_is_read_typed(tmp_path, monkeypatch):
    # A read-only reader of a WAL file (Insight, the sqlite3 shell) leaves an empty -wal
    # and a -shm behind: every row is in the file, read typed, nothing changed beside it.
    path = write_db(tmp_path / "memscope_dump_6.db", SCENARIO, wal=True)
    reader = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    reader.execute("SELECT count(*) FROM memscope_dump").fetchone()
    reader.close()
    wal = Path(f"{path}-wal")
    assert wal.exists() and wal.stat().st_size == 0
    beside = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts == {"typed": 1, "text": 0}
    assert_same(typed, text)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == beside


def test_a_wal_with_rows_is_read_the_text_way(tmp_path, monkeypatch):
    # Rows still in the -wal (a writer connected): not the typed read, and every row read.
    path = write_db(tmp_path / "memscope_dump_7.db", SCENARIO[:-1], wal=True)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute(f"INSERT INTO memscope_dump VALUES ({','.join('?' * 12)})", SCENARIO[-1])
    writer.commit()
    try:
        assert Path(f"{path}-wal").stat().st_size > 0
        typed, text, counts = both_ways(path, monkeypatch)
    finally:
        writer.close()
    assert counts == {"typed": 0, "text": 0}  # no ADBC connection at all
    assert_same(typed, text)
    whole = open_capture(write_db(tmp_path / "memscope_dump_8.db", SCENARIO))
    for name in ("events", "blocks", "markers"):
        assert typed.frame(name).equals(whole.frame(name)), name


@pytest.mark.parametrize("path", shared_files("msmemscope", "*.db")
                         + shared_files("msmemscope", "*.dat"), ids=lambda p: p.name)
def test_real_dbs_read_the_same_typed(path, monkeypatch):
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts["typed"] >= 1
    assert_same(typed, text)


def test_labels_come_encoded_from_a_typed_read(tmp_path):
    """A typed chunk's event, Event Type and Device Id come as categoricals (each distinct
    label once, as the call stacks), with the text way's values: '' and NULL as null."""
    path = write_db(tmp_path / "memscope_dump_7.db", SCENARIO)
    con = sqlite3.connect(path)
    query = read.ChunkQuery(con, "memscope_dump", read.map_columns(
        path, "memscope_dump", read.table_columns(con, "memscope_dump"), read.DUMP_COLUMNS,
        read.REQUIRED), read.INT_COLUMNS)
    try:
        typed = query.fetch(None)
        text = query.parse(query.con.execute(
            f'SELECT count(*), CAST(group_concat(printf(\'{query.fmt}\', {query.select}), '
            'char(30)) AS BLOB) FROM memscope_dump').fetchone(), None)
    finally:
        query.close()
        con.close()
    for name in ("event", "etype", "dev", "py_stack", "c_stack"):
        assert typed.schema[name] == read.pl.Categorical, name
        assert typed[name].cast(read.pl.String).to_list() == text[name].to_list(), name
    assert typed["dev"].null_count() == 0 and "N/A" in typed["dev"].cast(str).to_list()


def scenario_changed(path: Path, *updates: str) -> Path:
    """The hand-worked scenario's DB at ``path``, then ``updates`` run on it."""
    write_db(path, SCENARIO)
    con = sqlite3.connect(path)
    for update in updates:
        con.execute(update)
    con.commit()
    con.close()
    return path


def test_odd_labels_read_the_same_typed(tmp_path, monkeypatch):
    """Labels as SQLite may hold them: a Device Id stored as a number, an empty Event Type,
    a NULL Device Id."""
    path = scenario_changed(
        tmp_path / "memscope_dump_8.db",
        'UPDATE memscope_dump SET "Device Id" = 0 WHERE ID IN (2, 5)',
        "UPDATE memscope_dump SET \"Event Type\" = '' WHERE Event = 'MSTX'",
        'UPDATE memscope_dump SET "Device Id" = NULL WHERE Event = \'SYSTEM\'')
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts == {"typed": 1, "text": 0}
    assert_same(typed, text)


def test_a_label_that_is_not_utf8_reads_the_same(tmp_path, monkeypatch):
    """A label is checked per distinct text too: one that is not UTF-8 sends its chunk the
    text way."""
    path = scenario_changed(
        tmp_path / "memscope_dump_9.db",
        "UPDATE memscope_dump SET \"Event Type\" = CAST(X'50ff41' AS TEXT) WHERE ID = 3")
    typed, text, counts = both_ways(path, monkeypatch)
    assert counts == {"typed": 0, "text": 1}
    assert_same(typed, text)
