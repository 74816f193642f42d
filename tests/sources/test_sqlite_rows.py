"""The compiled rows reader (``memtui/sources/common/_sqlite_rows.c``): a query's rows as
Arrow columns, checked value by value on tables worked out by hand and on hypothesis-made
tables against Python's ``sqlite3``; it refuses a number column holding anything but whole
numbers, raises on SQLite's errors, and writes nothing, never beside the input.  (That it
gives the same model as the ADBC reference on every DB: tests/sources/test_memscope_arrow.py.)
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.sources.common import sqlite as sq

pytestmark = pytest.mark.skipif(sq._sqlite_rows is None,
                                reason="the compiled rows reader was not built (no sqlite3.h)")

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def make_db(path: Path, columns: str, rows: list[tuple]) -> Path:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE t ({columns})")
    marks = ",".join("?" * len(rows[0])) if rows else ""
    if rows:
        con.executemany(f"INSERT INTO t VALUES ({marks})", rows)
    con.commit()
    con.close()
    return path


def reader(path: Path) -> sq.RowsConnection:
    con = sq.connect_rows(path)
    assert con is not None
    return con


def test_a_table_worked_out_by_hand(tmp_path):
    rows = [(1, "a", "x"), (None, "", "y"), (I64_MIN, None, "x"), (I64_MAX, "héllo", None),
            (0, "a", "")]
    path = make_db(tmp_path / "h.db", "n INTEGER, s TEXT, k TEXT", rows)
    table = reader(path).table("SELECT n, s, k FROM t ORDER BY rowid", "itd")
    n, s, k = table.columns
    assert n.type == pa.int64() and n.to_pylist() == [1, None, I64_MIN, I64_MAX, 0]
    assert n.null_count == 1
    assert s.type == pa.large_string()
    assert s.to_pylist() == ["a", "", None, "héllo", "a"] and s.null_count == 1
    assert k.type == pa.dictionary(pa.int32(), pa.large_string())
    assert k.to_pylist() == ["x", "y", "x", None, ""]
    chunk = k.chunks[0]
    assert chunk.dictionary.to_pylist() == ["x", "y", ""]  # each distinct text once
    assert chunk.indices.to_pylist() == [0, 1, 0, None, 2]


def test_columns_without_a_null_have_no_validity(tmp_path):
    path = make_db(tmp_path / "v.db", "n INTEGER, s TEXT", [(1, "a"), (2, "b")])
    table = reader(path).table("SELECT n, s FROM t", "it")
    for column in table.columns:
        assert column.chunks[0].buffers()[0] is None and column.null_count == 0


def test_an_empty_result_and_an_all_null_column(tmp_path):
    path = make_db(tmp_path / "e.db", "n INTEGER, s TEXT", [(None, None)] * 9)
    con = reader(path)
    empty = con.table("SELECT n, s FROM t WHERE 0", "id")
    assert empty.num_rows == 0 and [c.to_pylist() for c in empty.columns] == [[], []]
    table = con.table("SELECT n, s, s FROM t", "itd")
    assert [c.to_pylist() for c in table.columns] == [[None] * 9] * 3
    assert [c.null_count for c in table.columns] == [9, 9, 9]


@pytest.mark.parametrize("value", [1.5, b"\x00\x01", "12"], ids=["real", "blob", "text"])
def test_a_number_column_holding_anything_else_is_refused(tmp_path, value):
    path = make_db(tmp_path / "r.db", "n", [(1,), (value,), (3,)])
    assert reader(path).table("SELECT n FROM t", "i") is None


def test_a_text_column_takes_any_value_as_sqlites_text_of_it(tmp_path):
    rows = [(1.5,), (b"ab\x00c",), (42,), ("t",)]
    path = make_db(tmp_path / "c.db", "v", rows)
    cast = [r[0] for r in sqlite3.connect(path).execute("SELECT CAST(v AS TEXT) FROM t")]
    con = reader(path)
    for kinds in ("t", "d"):
        table = con.table("SELECT v FROM t", kinds)
        assert table.column(0).to_pylist() == cast == ["1.5", "ab\x00c", "42", "t"]


def test_sqlite_errors_raise_and_wrong_kinds_are_refused(tmp_path):
    path = make_db(tmp_path / "x.db", "n INTEGER", [(1,)])
    con = reader(path)
    with pytest.raises(OSError, match="no such table"):
        con.table("SELECT * FROM missing", "i")
    with pytest.raises(ValueError, match="2 kinds"):
        con.table("SELECT n FROM t", "ii")
    with pytest.raises(ValueError, match="kinds are"):
        con.table("SELECT n FROM t", "x")
    assert con.table("SELECT n FROM t", "i").column(0).to_pylist() == [1]  # still usable
    con.close()
    with pytest.raises(ValueError, match="closed"):
        con.table("SELECT n FROM t", "i")


@pytest.mark.parametrize("wal", [False, True])
def test_it_reads_only_and_writes_nothing_beside_the_input(tmp_path, wal):
    folder = tmp_path / "in"
    folder.mkdir()
    path = make_db(folder / "w.db", "n INTEGER", [(1,), (2,)])
    if wal:
        con = sqlite3.connect(path)
        con.execute("PRAGMA journal_mode=WAL")
        con.close()
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    con = reader(path)
    assert ("immutable=1" in sq.typed_uri(path)) == wal
    with pytest.raises(OSError, match="readonly"):
        con.table("DELETE FROM t", "")
    assert con.table("SELECT n FROM t", "i").column(0).to_pylist() == [1, 2]
    con.close()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_reader_kept_across_queries_starts_each_afresh(tmp_path):
    # Buffers are kept from one query to the next: nothing of one may show in another.
    many = [(i, f"text {i % 3000}", f"stack {i % 1500}") for i in range(20_000)]
    path = make_db(tmp_path / "k.db", "n INTEGER, s TEXT, k TEXT", many)
    con = reader(path)
    whole = con.table("SELECT n, s, k FROM t", "itd")
    assert whole.column(2).chunks[0].dictionary.to_pylist() == [f"stack {i}"
                                                                 for i in range(1500)]
    assert whole.column(1).to_pylist() == [r[1] for r in many]
    few = con.table("SELECT k, n FROM t WHERE n >= 19998", "di")
    assert few.column(0).chunks[0].dictionary.to_pylist() == ["stack 498", "stack 499"]
    assert few.column(1).to_pylist() == [19998, 19999]
    again = con.table("SELECT n, s, k FROM t", "itd")
    assert again.equals(whole)


texts = st.one_of(st.none(), st.text(max_size=40), st.sampled_from(["", "a", "same", "ü"]))
numbers = st.one_of(st.none(), st.integers(I64_MIN, I64_MAX))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(numbers, texts, texts), max_size=300))
def test_made_tables_read_as_sqlite3_reads_them(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("h") / "m.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (n INTEGER, s TEXT, k TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    con.commit()
    expected = con.execute("SELECT n, s, k FROM t ORDER BY rowid").fetchall()
    con.close()
    table = reader(path).table("SELECT n, s, k FROM t ORDER BY rowid", "itd")
    assert table.num_rows == len(expected)
    assert list(zip(*(c.to_pylist() for c in table.columns), strict=True)) == expected
    dictionary = table.column(2).chunks[0].dictionary.to_pylist() if rows else []
    assert len(dictionary) == len(set(dictionary))  # each distinct text stored once


def test_version_line_says_which_reader_reads_the_rows(monkeypatch):
    assert sq.rows_in_use().startswith("SQLite rows: compiled (C, SQLite ")
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1")
    assert sq.rows_in_use() == "SQLite rows: ADBC (MEMTUI_PURE_PYTHON is set)"
    assert sq.connect_rows(Path("any.db")) is None
    monkeypatch.delenv("MEMTUI_PURE_PYTHON")
    monkeypatch.setattr(sq, "_sqlite_rows", None)
    assert sq.rows_in_use() == "SQLite rows: ADBC (the compiled reader was not built)"
    assert sq.connect_rows(Path("any.db")) is None
