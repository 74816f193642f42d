"""The one way every source opens an SQLite capture: read-only, never writing beside it.

msMemScope DBs, Ascend profiler DBs and files MindStudio Insight has opened all go
through :func:`connect_readonly`; the sniff helpers use :func:`table_names`, which never
raises, whatever the file holds.  Typed reads of whole tables take one of two read-only
connections, opened by the same rules: :func:`connect_rows`, the compiled reader
(``_sqlite_rows.c``, SQLite's own C API, where it was built), or :func:`connect_arrow`, the
ADBC driver (the reference, and the way where the compiled one is not built or
``MEMTUI_PURE_PYTHON=1`` is set).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from memtui.sources.common.compiled import in_use_line, pure_python_forced
from memtui.sources.common.files import read_head

try:
    from memtui.sources.common import _sqlite_rows  # type: ignore[attr-defined]  # (C)
except ImportError:  # built without a compiler or without sqlite3.h: ADBC reads the rows
    _sqlite_rows = None

SQLITE_MAGIC = b"SQLite format 3\x00"
T = TypeVar("T")


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's magic (never raises)."""
    return read_head(path, 16) == SQLITE_MAGIC


class ReadOnlyConnection(sqlite3.Connection):
    """A connection from :func:`connect_readonly`: knows the file it reads and whether that
    file changed since it was opened, and removes its private copy (if any) on close."""

    source: Path
    copy_dir: str | None = None
    opened_as: tuple | None = None

    def changed_since_open(self) -> bool:
        """Whether the file (or its ``-wal``) changed since the connection opened."""
        return self.copy_dir is None and _state(self.source) != self.opened_as

    def close(self) -> None:
        super().close()
        if self.copy_dir is not None:
            shutil.rmtree(self.copy_dir, ignore_errors=True)
            self.copy_dir = None


def connect_readonly(path: Path, private_copy: bool = False) -> ReadOnlyConnection:
    """A read-only connection that never writes beside the file and never holds up a writer.

    * a rollback-journal file is opened ``mode=ro`` (``timeout`` rides out a writer's locks);
    * a WAL file with no ``-wal`` beside it has no writer: it is opened ``immutable``, so
      that SQLite creates no ``-wal``/``-shm`` beside the capture;
    * a WAL file with a ``-wal`` and a ``-shm``: a writer is connected, its shared memory is
      read through (``mode=ro``), nothing is created;
    * a ``-wal`` without a ``-shm`` is left over by a writer that died: SQLite would create
      a ``-shm`` beside the capture (or fail in a read-only folder), so the file and its
      ``-wal`` are copied to a private temporary folder and read there, as is everything
      when ``private_copy`` (see :func:`read_consistently`).

    Every query is bounded (:func:`_bound_queries`); text that is not UTF-8 is decoded with
    replacement characters instead of failing the read.
    """
    source = Path(path).resolve()
    wal, shm = Path(f"{source}-wal"), Path(f"{source}-shm")
    copy_dir = None
    target, params = source, "mode=ro"
    if private_copy or (wal.exists() and not shm.exists()):
        copy_dir = tempfile.mkdtemp(prefix="memtui-sqlite-")
        target = _copy_beside(source, Path(copy_dir))
        params = "mode=rw"  # our own copy: SQLite may add its -shm there; query_only below
    elif _wal_mode(source) and not wal.exists():
        params += "&immutable=1"
    opened_as = _state(source)
    try:
        con = sqlite3.connect(f"{target.as_uri()}?{params}", uri=True, timeout=5.0,
                              isolation_level=None, check_same_thread=False,
                              factory=ReadOnlyConnection)
    except BaseException:
        if copy_dir is not None:
            shutil.rmtree(copy_dir, ignore_errors=True)
        raise
    con.source, con.copy_dir, con.opened_as = source, copy_dir, opened_as
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    con.execute("PRAGMA query_only = 1")
    _bound_queries(con, source)
    return con


def readonly_uri(path: Path) -> str:
    """The URI every reader opens ``path`` with (see :func:`connect_readonly`): ``mode=ro``,
    plus ``immutable=1`` for a WAL-mode file with no ``-wal`` beside it."""
    path = Path(path).resolve()
    params = "mode=ro"
    if _wal_mode(path) and not Path(f"{path}-wal").exists():
        params += "&immutable=1"
    return f"{path.as_uri()}?{params}"


class ArrowConnection:
    """A read-only ADBC connection (``adbc-driver-sqlite``): :meth:`table` runs one query
    into an Arrow table, typed columns with no Python object per row.  Uses the driver
    manager directly, not its DB-API layer (which imports much more of pyarrow)."""

    def __init__(self, manager, database, connection) -> None:
        self._manager = manager
        self._database = database
        self._connection = connection

    def table(self, sql: str, batch_rows: int | None = None,
              compact: Collection[int] = ()):
        """The rows of ``sql``; ``batch_rows``: rows per Arrow batch (the driver's default
        is 1024: many small chunks cost every later step); ``compact``: the positions of
        text columns to copy into buffers of their exact size (the driver grows its
        buffers by doubling, and a frame made from them without a copy keeps them whole:
        worth it for the columns kept long)."""
        import pyarrow as pa

        statement = self._manager.AdbcStatement(self._connection)
        try:
            if batch_rows is not None:
                statement.set_options(**{"adbc.sqlite.query.batch_rows": str(int(batch_rows))})
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            table = pa.RecordBatchReader.from_stream(stream).read_all()
        finally:
            statement.close()
        return _compacted(table, compact) if compact else table

    def execute(self, sql: str) -> None:
        statement = self._manager.AdbcStatement(self._connection)
        try:
            statement.set_sql_query(sql)
            statement.execute_update()
        finally:
            statement.close()

    def close(self) -> None:
        self._connection.close()
        self._database.close()


def _compacted(table, positions: Collection[int]):
    """``table`` with its text columns at ``positions`` each one fresh, exact array."""
    import pyarrow as pa

    columns = []
    for index, column in enumerate(table.columns):
        if index in positions and (pa.types.is_string(column.type)
                                   or pa.types.is_large_string(column.type)):
            # (concatenating with an empty array always copies; one chunk alone would not)
            column = pa.concat_arrays([*column.chunks, pa.array([], column.type)])
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def typed_uri(path: Path) -> str | None:
    """The URI a typed reader opens ``path`` by (:func:`readonly_uri`'s rules), or None
    where the file has a writer's rows in its ``-wal``: the sqlite3 text path reads it."""
    uri = readonly_uri(path)
    wal = Path(f"{path}-wal")
    if wal.exists():
        if _size(wal) != 0:
            # A writer is (or was) connected and its rows may be in the -wal: the sqlite3
            # text path reads it.  A leftover -wal alone would make SQLite create a -shm
            # beside the capture; beside a live writer using Python's sqlite3 in this
            # process, ADBC's own SQLite mapping the same -shm died of SIGBUS
            # (tests/sources/test_memscope_robust.py, tests of --follow).
            return None
        # An empty -wal (what any read-only reader of a WAL file leaves behind, a
        # writer's too after a checkpoint): every row is in the file itself, read
        # ``immutable`` (no -shm mapped, nothing created); a write meanwhile changes the
        # file, which ``read_consistently`` sees.
        uri = f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1"
    return uri


def connect_arrow(path: Path) -> ArrowConnection | None:
    """An :class:`ArrowConnection` to ``path`` opened through :func:`typed_uri`, or None
    where ``adbc-driver-sqlite`` is missing or cannot open it (the sqlite3 path reads it
    then)."""
    uri = typed_uri(path)
    if uri is None:
        return None
    try:
        import adbc_driver_manager
        import adbc_driver_sqlite
    except ImportError:
        return None
    try:
        database = adbc_driver_sqlite.connect(uri)
        con = ArrowConnection(adbc_driver_manager, database,
                              adbc_driver_manager.AdbcConnection(database))
        con.execute("PRAGMA query_only = 1")
    except Exception:  # noqa: BLE001 - any failure: the sqlite3 path reads it instead
        return None
    return con


def compiled_rows() -> bool:
    """Whether the compiled reader steps typed reads' rows in this process."""
    return _sqlite_rows is not None and not pure_python_forced()


def rows_in_use() -> str:
    """What reads an SQLite table's rows into columns (see :func:`in_use_line`)."""
    version = getattr(_sqlite_rows, "sqlite_version", "")
    return in_use_line("SQLite rows", _sqlite_rows is not None, "ADBC", "reader",
                       f"compiled (C, SQLite {version})")


class RowsConnection:
    """A read-only connection of the compiled reader: :meth:`table` steps a query's rows
    through SQLite's C API into an Arrow table (int64, large text and dictionary columns),
    without the GIL and without SQLite's per-value connection mutex.  One thread at a
    time: each fetching thread opens its own."""

    def __init__(self, reader) -> None:
        self._reader = reader

    def table(self, sql: str, kinds: str):
        """The rows of ``sql`` as an Arrow table, its columns of ``kinds`` (one letter a
        column: ``i`` int64, ``t`` text, ``d`` dictionary-encoded text), or None where a
        number column holds anything but whole numbers (a text column takes any value as
        SQLite's text of it).  Raises OSError on an SQLite error."""
        import pyarrow as pa

        got = self._reader.query(sql, kinds)
        if got is None:
            return None
        rows, columns = got
        return pa.Table.from_arrays([_arrow_column(kind, rows, buffers)
                                     for kind, buffers in zip(kinds, columns, strict=True)],
                                    names=[f"c{i}" for i in range(len(kinds))])

    def close(self) -> None:
        self._reader.close()


def _arrow_column(kind: str, rows: int, buffers: tuple):
    import pyarrow as pa

    def buf(data):
        return None if data is None else pa.py_buffer(data)

    if kind == "i":
        values, validity, nulls = buffers
        return pa.Array.from_buffers(pa.int64(), rows, [buf(validity), buf(values)], nulls)
    if kind == "t":
        offsets, data, validity, nulls = buffers
        return pa.Array.from_buffers(pa.large_string(), rows,
                                     [buf(validity), buf(offsets), buf(data)], nulls)
    indices, offsets, data, validity, nulls = buffers
    dictionary = pa.Array.from_buffers(pa.large_string(), len(offsets) // 8 - 1,
                                       [None, buf(offsets), buf(data)])
    codes = pa.Array.from_buffers(pa.int32(), rows, [buf(validity), buf(indices)], nulls)
    return pa.DictionaryArray.from_arrays(codes, dictionary)


def connect_rows(path: Path) -> RowsConnection | None:
    """A :class:`RowsConnection` to ``path`` opened through :func:`typed_uri`, or None
    where the compiled reader is not in use or cannot open it (ADBC reads it then)."""
    uri = typed_uri(path) if compiled_rows() else None
    if uri is None:
        return None
    try:
        return RowsConnection(_sqlite_rows.Reader(uri))
    except OSError:
        return None


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def read_consistently(path: Path, read: Callable[[ReadOnlyConnection], T]) -> T:
    """``read(connection)``, again from a private copy if the file changed meanwhile (a
    writer that started after an ``immutable`` open could have torn the read)."""
    con = connect_readonly(path)
    try:
        result = read(con)
        changed = con.changed_since_open()
    finally:
        con.close()
    if not changed:
        return result
    con = connect_readonly(path, private_copy=True)
    try:
        return read(con)
    finally:
        con.close()


#: Virtual-machine steps a query may take per byte of the file (plus a floor): far more
#: than any scan or join of real tables needs, far less than forever (a recursive view).
_STEPS_PER_BYTE = 2_000
_STEPS_FLOOR = 100_000_000
_CHECK_EVERY = 100_000


def _bound_queries(con: sqlite3.Connection, source: Path) -> None:
    """Interrupt any query past its budget of steps (SQLite then raises "interrupted")."""
    try:
        size = source.stat().st_size
    except OSError:
        size = 0
    budget = (_STEPS_FLOOR + _STEPS_PER_BYTE * size) // _CHECK_EVERY
    calls = [0]

    def over_budget() -> int:
        calls[0] += 1
        return int(calls[0] > budget)

    con.set_progress_handler(over_budget, _CHECK_EVERY)


def _state(path: Path) -> tuple:
    """What tells that a file or its ``-wal`` changed: sizes and modification times."""
    def one(p: str) -> tuple:
        try:
            info = os.stat(p)
        except OSError:
            return ()
        return info.st_size, info.st_mtime_ns
    return one(str(path)), one(f"{path}-wal")


def _copy_beside(source: Path, folder: Path) -> Path:
    """Copy ``source`` and its ``-wal`` into ``folder``, retrying a copy torn by a writer."""
    target = folder / "capture.db"
    for _ in range(3):
        before = _state(source)
        shutil.copyfile(source, target)
        wal = Path(f"{source}-wal")
        if wal.exists():
            with contextlib.suppress(FileNotFoundError):  # checkpointed meanwhile
                shutil.copyfile(wal, f"{target}-wal")
        if _state(source) == before:
            break
    return target


def table_names(path: Path, views: bool = False) -> set[str] | None:
    """The tables (and views, if asked) of an SQLite file; None if it is not a readable one.

    Never raises: a corrupt file can make SQLite fail with text that is not UTF-8.
    """
    if not is_sqlite(path):
        return None
    kinds = "('table', 'view')" if views else "('table')"
    try:
        con = connect_readonly(path)
        try:
            rows = con.execute(f"SELECT name FROM sqlite_master WHERE type IN {kinds}").fetchall()
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError, ValueError, OSError):
        return None
    return {row[0] for row in rows}


def sqlite_problem(exc: sqlite3.Error) -> str:
    """One plain sentence for an SQLite failure."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return f"the SQLite database is corrupt or truncated ({text})"
    if "interrupted" in text:
        return ("a query ran far longer than a file of this size allows (a recursive or "
                "exploding view?): reading stopped")
    if "locked" in text or "busy" in text:
        return f"the SQLite database is locked by a writer ({text}); try again"
    return f"cannot read the SQLite database ({text})"


def _wal_mode(path: Path) -> bool:
    """The header's read/write format versions are 2 in WAL mode."""
    header = read_head(path, 20)
    return len(header) == 20 and header[18] == 2 and header[19] == 2
