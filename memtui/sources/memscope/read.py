"""Reading msMemScope files (SQLite DBs, dump CSVs, python-trace CSVs) into raw polars frames.

This module owns the file formats of ../shared/formats/msmemscope.md: which tables and
columns exist in which version, how SQLite is opened (read-only, never blocking a writer
in WAL mode), how the CSVs are split (quoted multi-line stacks, rows broken by unquoted
commas), the two Attr grammars (JSON in DBs, ``{k:v,...}`` in CSVs) and the two time units.
It turns each file into a :class:`RawFile`: the dump rows split into *memory* rows
(MALLOC/FREE/ACCESS, their Attr already parsed into columns) and *other* rows (launches,
marks, system), plus python-trace rows, all with normalised column names.  Turning rows
into the model is :mod:`memtui.sources.memscope.build`'s job.

SQLite tables are read in rowid chunks by one query each that has SQLite itself join the
columns of every row with control characters (``printf`` + ``group_concat``), which
polars' CSV reader then splits: no Python object per row.  A chunk whose text holds those
control characters falls back to a plain ``fetchall`` of that chunk.  Each chunk is its own
short read transaction, bounded by the largest rowid seen first: msMemScope only appends,
so rows written meanwhile are left out, and a writer's checkpoint never waits long on us.
Where the compiled rows reader (``_sqlite_rows.c``) was built, or else where
``adbc-driver-sqlite`` is installed, a chunk is read as typed Arrow columns instead
(:class:`ChunkQuery`), several at once in fetching threads (:func:`typed_fetchers`),
where the call stacks are dictionary-encoded and the compiled pass reads the Attr keys
and the ``Ptr`` addresses (:mod:`memtui.sources.memscope.attr`); a chunk the typed read
cannot take goes the text way.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memtui.errors import CaptureError
from memtui.sources.common.files import read_head
from memtui.sources.common.sqlite import (
    ArrowConnection,
    RowsConnection,
    connect_arrow,
    connect_readonly,
    connect_rows,
    is_sqlite,
    read_consistently,
    sqlite_problem,
    table_names,
)
from memtui.sources.memscope.attr import decode_json_attr, decode_pointers

DUMP_TABLES = ("memscope_dump", "leaks_dump")
TRACE_TABLE = re.compile(r"python_trace_(\d+)")
MEMORY_EVENTS = ("MALLOC", "FREE", "ACCESS")
#: Other rows whose Attr says something worth keeping (as the marker's detail).
_DETAIL_EVENTS = ("SNAPSHOT", "OOM_DETAIL", "SYSTEM")

#: Normalised column name (lower case, letters and digits only) -> raw column.
DUMP_COLUMNS = {
    "id": "id", "event": "event", "eventtype": "etype", "name": "name",
    "timestampns": "t", "timestampus": "t_us", "timestamp": "t",
    "processid": "pid", "threadid": "tid", "deviceid": "dev", "ptr": "ptr", "attr": "attr",
    "callstackpython": "py_stack", "callstackc": "c_stack",
}
REQUIRED = ("event", "etype", "t", "dev", "ptr", "attr")
INT_COLUMNS = ("id", "t", "pid", "tid")
RAW_COLUMNS = ("id", "event", "etype", "name", "t", "pid", "tid", "dev", "ptr", "attr",
               "py_stack", "c_stack")
TRACE_COLUMNS = {"funcinfo": "func", "starttimens": "start", "endtimens": "end",
                  "threadid": "tid", "processid": "pid"}
TRACE_HEADER = "FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id"
_LEGACY_HEADER = "Record Index,"
#: Timestamps below this are microseconds (2025 data); above, nanoseconds since 1970.
_US_LIMIT = 10**17
_CHUNK_ROWS = 65_536  # ~18 MB of text: small enough for malloc to reuse, not re-fault
_FIELD, _RECORD = "\x1f", "\x1e"
_DEVICE_DIR = re.compile(r"device_(\d+|cpu)")


def typed_fetchers() -> int:
    """How many typed reads run at once: a core each and one more, at least three, at
    most six (on two cores three were 2-3% quicker than two, and four no quicker)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (no affinity on macOS, Windows)
        cores = os.cpu_count() or 2
    return max(3, min(cores + 1, 6))


@dataclass
class RawFile:
    """One file's rows, ready for the model builder (see the module docstring).

    ``memory`` has :data:`MEMORY_COLUMNS`: ``RAW_COLUMNS`` (``t`` in ns) with ``Device
    Id``, ``Ptr`` and the pool already read (``device``, ``addr``, ``pool``: the Event
    Type, or the pool an ACCESS names), the parsed Attr columns ``aid`` (allocation_id),
    ``size``, ``total``, ``owner``, ``ineff`` (inefficient_type), the call stacks as
    categoricals, and ``seq`` (the row's order in the file); ``other`` has ``RAW_COLUMNS``
    but the stacks, with ``row``, ``seq`` and ``file_device``.
    ``trace`` has ``func, start, end, tid, pid`` (times in ns, null for ``N/A``), ``row``,
    ``seq`` and ``file_device``.  ``device`` is the device the path names
    (``device_N/``), if any.
    """

    path: Path
    memory: pl.DataFrame | None = None
    other: pl.DataFrame | None = None
    trace: pl.DataFrame | None = None
    device: str | None = None
    layout: str = ""
    warnings: list[str] = field(default_factory=list)


# -- sniffing -------------------------------------------------------------------------------


def first_line(path: Path, limit: int = 65536) -> str:
    """The first line of a text file (BOM and line end removed), or '' when unreadable."""
    head = read_head(path, limit)
    return head.split(b"\n", 1)[0].decode("utf-8-sig", "replace").rstrip("\r")


def csv_kind(path: Path) -> str | None:
    """``dump``, ``trace`` or ``legacy`` for msMemScope CSVs (by header), else None."""
    header = first_line(path)
    if header.startswith(TRACE_HEADER):
        return "trace"
    if header.startswith(_LEGACY_HEADER) and ",Event,Event Type," in header:
        return "legacy"
    names = {_norm(name) for name in header.split(",")}
    if {"id", "event", "eventtype", "deviceid", "ptr", "attr"} <= names and (
        names & {"timestampns", "timestampus"}
    ):
        return "dump"
    return None


def db_tables(path: Path) -> list[str] | None:
    """Table names of an SQLite file, or None when it cannot be opened (never raises)."""
    tables = table_names(path)
    return None if tables is None else sorted(tables)


def is_memscope_db(path: Path) -> bool:
    tables = db_tables(path) if is_sqlite(path) else None
    return bool(tables) and any(
        t in DUMP_TABLES or TRACE_TABLE.fullmatch(t) for t in tables
    )


def device_of_path(path: Path) -> str | None:
    """``npu:N`` or ``host`` for a file under msMemScope's ``device_N/`` or ``device_cpu/``."""
    for part in reversed(Path(path).parts[:-1]):
        match = _DEVICE_DIR.fullmatch(part)
        if match:
            return "host" if match.group(1) == "cpu" else f"npu:{match.group(1)}"
    return None


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


#: The largest Device Id taken as a device (NPU ids are small; a timestamp is not one).
MAX_DEVICE_ID = 4095


def device_names(raw: pl.Series) -> dict[str, str | None]:
    """Raw ``Device Id`` values -> device names: ``npu:N``, ``host`` (cpu/host), or None."""
    names: dict[str, str | None] = {}
    for value in raw.drop_nulls().unique().to_list():
        text = value.strip()
        if text.isdigit() and int(text) <= MAX_DEVICE_ID:
            names[value] = f"npu:{int(text)}"
        elif text.lower() in ("cpu", "host"):
            names[value] = "host"
        else:
            names[value] = None  # N/A (no device: SYSTEM rows, 2025 host frees), empty
    return names


def device_column(frame: pl.DataFrame) -> pl.Expr:
    """The ``dev`` column of ``frame`` as device names (see :func:`device_names`)."""
    mapping = device_names(frame["dev"])
    if not mapping:
        return pl.lit(None, pl.String)
    return pl.col("dev").replace_strict(mapping, default=None, return_dtype=pl.String)


# -- SQLite -------------------------------------------------------------------------------


#: ``report(rows_read, rows_in_all)`` as chunks come (the total counts rowids: about).
Report = Callable[[int, int], None] | None


#: ``look(rows_so_far)``, called after each chunk of dump rows is read: ``rows_so_far()``
#: makes a RawFile of the rows read until then (sharing their chunks), where the caller
#: wants one (a preview of a long read).
Look = Callable[[Callable[[], RawFile]], None] | None


def read_db(path: Path, report: Report = None, look: Look = None) -> RawFile:
    """Every msMemScope table of one SQLite file (``report`` as chunks come, ``look``
    after each), read again from a private copy if a writer changed the file meanwhile."""
    try:
        return read_consistently(path, lambda con: _read_db_tables(path, con, report, look))
    except sqlite3.Error as exc:
        raise CaptureError(path, sqlite_problem(exc)) from None


def _read_db_tables(path: Path, con: sqlite3.Connection, report: Report,
                    look: Look = None) -> RawFile:
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    dump = next((t for t in DUMP_TABLES if t in tables), None)
    traces = sorted(t for t in tables if TRACE_TABLE.fullmatch(t))
    if dump is None and not traces:
        raise CaptureError(path, "an SQLite file without a memscope_dump, leaks_dump or "
                                 "python_trace_<pid> table: not an msMemScope DB")
    raw = RawFile(path=Path(path), device=device_of_path(path))
    if dump is not None:
        columns = table_columns(con, dump)
        mapping = map_columns(path, dump, columns, DUMP_COLUMNS, REQUIRED)
        camel = "eventType" in columns
        raw.layout = "Insight prototype (camelCase columns)" if camel else dump
        if camel:
            raw.warnings.append(
                f"{Path(path).name}: an early MindStudio Insight prototype layout "
                "(camelCase columns); read as msLeaks data")
        dump_rows = DumpRows(raw, micro="t_us" in mapping.values(), attr_json=True)
        for chunk in _read_table(con, dump, mapping, int_columns=INT_COLUMNS, report=report):
            dump_rows.add(chunk)
            if look is not None:
                look(dump_rows.so_far)
        unreadable = dump_rows.finish()
        if unreadable:
            raw.warnings.append(f"{Path(path).name}: {unreadable} rows without a readable "
                                "event or timestamp skipped")
    parts = []
    for table in traces:
        mapping = map_columns(path, table, table_columns(con, table), TRACE_COLUMNS,
                               ("func", "start", "end"))
        chunks = list(_read_table(con, table, mapping, int_columns=("tid", "pid")))
        if not chunks:
            continue
        part = pl.concat(chunks)
        if "pid" not in part.columns or part["pid"].null_count() == part.height:
            part = part.with_columns(pid=pl.lit(int(TRACE_TABLE.fullmatch(table).group(1))))
        parts.append(part)
    if parts:
        raw.trace = with_order(trace_times(pl.concat(parts, how="diagonal_relaxed")), raw)
    return raw


def with_order(frame: pl.DataFrame, raw: RawFile) -> pl.DataFrame:
    return frame.with_columns(seq=pl.col("row"), file_device=pl.lit(raw.device, pl.String))


def table_columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def map_columns(path: Path, table: str, columns: list[str], known: dict[str, str],
                 required: tuple[str, ...]) -> dict[str, str]:
    """Source column -> raw name, by name; a CaptureError naming what is missing."""
    mapping = {}
    for column in columns:
        name = known.get(_norm(column))
        if name is not None and name not in mapping.values():
            mapping[column] = name
    got = {("t" if v == "t_us" else v) for v in mapping.values()}
    missing = [r for r in required if r not in got]
    if missing:
        raise CaptureError(path, f"table {table} lacks the column(s) {', '.join(missing)} "
                                 "that msMemScope writes")
    return mapping


def _read_table(con: sqlite3.Connection, table: str, mapping: dict[str, str],
                int_columns: tuple[str, ...], report: Report = None) -> Iterator[pl.DataFrame]:
    """The rows of ``table``'s mapped columns in rowid chunks, each with its ``row`` index.

    SQLite reads the next chunk in a worker thread (``sqlite3`` lets go of the GIL while
    SQLite works) while the caller parses the current one.
    """
    query = ChunkQuery(con, table, mapping, int_columns)
    try:
        yield from _chunks(con, table, query, report)
    finally:
        query.close()


def _chunks(con: sqlite3.Connection, table: str, query: ChunkQuery,
            report: Report) -> Iterator[pl.DataFrame]:
    try:
        ranges = rowid_chunks(con, table)
    except sqlite3.OperationalError:  # a WITHOUT ROWID table: one query
        ranges = [None]
    offset = 0
    # about: the rowids a range spans (none for a WITHOUT ROWID table or an empty one)
    total = sum(high - low + 1 for low, high in ranges) if None not in ranges else 0
    # Typed reads run on their own connections, several at once (one a core, and one more
    # for the moments the others wait for the GIL while the caller turns a batch into
    # columns); the text way shares one connection: one.
    ahead = typed_fetchers() if query.typed is not None else 1
    with ThreadPoolExecutor(max_workers=ahead) as workers:
        pending = deque(workers.submit(query.fetch, bounds) for bounds in ranges[:ahead])
        for index, bounds in enumerate(ranges):
            fetched = pending.popleft().result()
            if index + ahead < len(ranges):
                pending.append(workers.submit(query.fetch, ranges[index + ahead]))
            chunk = query.parse(fetched, bounds)
            del fetched
            if report is not None:
                report(offset + chunk.height, max(total, offset + chunk.height))
            if chunk.height:
                yield chunk.with_row_index("row", offset=offset).with_columns(
                    pl.col("row").cast(pl.Int64))
                offset += chunk.height


_MAX_ROWID = 2**63 - 1


def rowid_chunks(con: sqlite3.Connection, table: str,
                 rows: int = _CHUNK_ROWS) -> list[tuple[int, int]]:
    """Rowid ranges of about ``rows`` rows each, following the rows that exist.

    Each range starts at the first rowid after the last one (an indexed seek), so a table
    whose rowids are sparse (one row at 2**63-1) costs as many ranges as it has runs of
    rows, never ``(max - min) / rows``; a range ending past the largest rowid is clamped.
    """
    # Two queries: SQLite seeks the rowid b-tree for a lone min() or max(), but scans the
    # whole table for both in one query.
    lo = con.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
    hi = con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
    ranges: list[tuple[int, int]] = []
    start = lo
    while start is not None:
        end = min(start + rows - 1, hi, _MAX_ROWID)
        ranges.append((start, end))
        if end >= hi:
            break
        start = con.execute(f'SELECT min(rowid) FROM "{table}" WHERE rowid > ?',
                            (end,)).fetchone()[0]
    return ranges


class ChunkQuery:
    """One table's columns per rowid range: typed Arrow batches through ADBC where it is
    installed and the values have the types their columns declare; else one text per range
    that polars splits (any chunk the typed read cannot take goes the text way)."""

    def __init__(self, con: sqlite3.Connection, table: str, mapping: dict[str, str],
                 int_columns: tuple[str, ...], typed: bool = True) -> None:
        """``typed=False``: text only, no ADBC connection (``--follow`` beside a live WAL
        writer: a second SQLite library in the process mapping the writer's ``-shm``
        crashed with SIGBUS)."""
        sources = list(mapping)
        self.con = con  # used by the worker thread only
        self.path = Path(con.execute("PRAGMA database_list").fetchone()[2])
        self.table = table
        self.schema = {mapping[c]: (pl.Int64 if mapping[c] in int_columns or mapping[c] == "t_us"
                                    else pl.String) for c in sources}
        self.select = ", ".join(f'"{c}"' for c in sources)
        self.fmt = _FIELD.join(["%s"] * len(sources))
        # Text columns as SQLite's own text of any value (what printf('%s') gives), never
        # NULL: the driver takes a column's type from its first values, and a batch
        # starting with NULLs would be typed as numbers and fail on the first text.
        # Whole numbers as stored, checked below.
        self.typed_select = ", ".join(
            f'"{c}"' if self.schema[mapping[c]] == pl.Int64
            else f"""COALESCE(CAST("{c}" AS TEXT), '')""" for c in sources)
        # The compiled reader takes any value of a text column as its text, and a NULL as
        # null, which the typed read makes of '' too: the bare columns.
        self.rows_select = ", ".join(f'"{c}"' for c in sources)
        # Text columns kept long (not the stacks and labels, categoricals at once).
        self.kept_texts = frozenset(
            i for i, (name, dtype) in enumerate(self.schema.items())
            if dtype == pl.String and name not in _ENCODED)
        self.encoded = frozenset(i for i, name in enumerate(self.schema) if name in _ENCODED)
        self.typed = _connect_typed(self.path) if typed else None  # None: text only
        # the compiled reader's kind of each column: int64, text, or dictionary (_ENCODED)
        self.kinds = "".join("i" if dtype == pl.Int64 else "d" if name in _ENCODED else "t"
                             for name, dtype in self.schema.items())
        self.attr_json = True  # Attr is JSON in every DB msMemScope writes
        self._typed: dict[int, TypedConnection | None] = {}  # per fetching thread
        self._typed_lock = threading.Lock()

    def _thread_typed(self) -> TypedConnection | None:
        """This thread's typed connection (the first thread takes ``self.typed``)."""
        ident = threading.get_ident()
        with self._typed_lock:
            if ident not in self._typed:
                taken = any(con is self.typed for con in self._typed.values())
                self._typed[ident] = _connect_typed(self.path) if taken else self.typed
            return self._typed[ident]

    def close(self) -> None:
        with self._typed_lock:
            connections = {id(c): c for c in [self.typed, *self._typed.values()] if c}
            self.typed, self._typed = None, {}
        for con in connections.values():
            with contextlib.suppress(Exception):
                con.close()

    @staticmethod
    def _where(bounds) -> tuple[str, tuple]:
        return ("", ()) if bounds is None else (" WHERE rowid BETWEEN ? AND ?", bounds)

    def fetch(self, bounds) -> pl.DataFrame | tuple[int, bytes | None]:
        if self.typed is not None:
            con = self._thread_typed()
            typed = self._fetch_typed(bounds, con) if con is not None else None
            if typed is not None:
                return typed
        where, params = self._where(bounds)
        return self.con.execute(
            f"SELECT count(*), CAST(group_concat(printf('{self.fmt}', {self.select}), "
            f'char(30)) AS BLOB) FROM "{self.table}" NOT INDEXED{where}', params).fetchone()

    def _fetch_typed(self, bounds, con: TypedConnection) -> pl.DataFrame | None:
        """The range as typed columns, or None where a value is not of its column's type
        (a number column holding text, text that is not UTF-8...): the text way reads it."""
        where = "" if bounds is None else f" WHERE rowid BETWEEN {int(bounds[0])} AND " \
                                          f"{int(bounds[1])}"
        rows = f' FROM "{self.table}" NOT INDEXED{where}'
        try:
            if isinstance(con, RowsConnection):  # columns of their exact size, stacks encoded
                table = con.table(f"SELECT {self.rows_select}{rows}", self.kinds)
                if table is None:
                    return None
            else:
                table = _interned(con.table(f"SELECT {self.typed_select}{rows}",
                                            batch_rows=_CHUNK_ROWS, compact=self.kept_texts),
                                  self.encoded)
            table.validate(full=True)  # SQLite text need not be UTF-8: the text way decodes it
            df = pl.from_arrow(table, rechunk=False)
        except Exception:  # noqa: BLE001 - the typed read is an optimisation only
            return None
        if not isinstance(df, pl.DataFrame):
            return None
        df.columns = list(self.schema)
        columns = []
        for name, dtype in self.schema.items():
            got = df.schema[name]
            if got == pl.Null or (got == dtype and dtype == pl.Int64):
                columns.append(pl.col(name).cast(dtype))
            elif dtype == pl.String and (got == pl.String or (
                    got == pl.Categorical and name in _ENCODED)):
                columns.append(_empty_as_null(name))  # as the text way reads ''
            else:
                return None
        typed = df.select(columns)
        if self.attr_json and "attr" in self.schema:
            # the Attr keys read here, in the fetching thread, from SQLite's own buffers
            decoded = decode_json_attr(table.column(list(self.schema).index("attr")))
            if decoded is not None:
                typed = typed.hstack(decoded.rename({c: f"_{c}" for c in decoded.columns}))
        if "ptr" in self.schema:
            pointers = decode_pointers(table.column(list(self.schema).index("ptr")))
            if pointers is not None:
                typed = typed.with_columns(pointers.alias("_addr"))
        return typed

    def parse(self, fetched: pl.DataFrame | tuple[int, bytes | None], bounds) -> pl.DataFrame:
        if isinstance(fetched, pl.DataFrame):
            return fetched
        count, blob = fetched
        if not count:
            return pl.DataFrame(schema=self.schema)
        try:
            df = pl.read_csv(blob, separator=_FIELD, eol_char=_RECORD, quote_char=None,
                             has_header=False, schema=self.schema, ignore_errors=True,
                             encoding="utf8-lossy")
            if df.height == count:
                return df
        except pl.exceptions.PolarsError:
            pass
        return self._plain(bounds)

    def _plain(self, bounds) -> pl.DataFrame:
        """The text holds the separators themselves: read this chunk row by row."""
        where, params = self._where(bounds)
        con = connect_readonly(self.path)  # its own connection: the worker may be using self.con
        try:
            rows = con.execute(f'SELECT {self.select} FROM "{self.table}" NOT INDEXED{where}',
                               params).fetchall()
        finally:
            con.close()
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in self.schema]
        return pl.DataFrame(
            {n: pl.Series(n, col, dtype=pl.String, strict=False) if dt == pl.String
             else _ints(n, col) for (n, dt), col in zip(self.schema.items(), columns,
                                                        strict=True)}
        ).with_columns(pl.col(pl.String).replace("", None))


#: The call stack columns: long texts of few distinct values.
_STACKS = ("py_stack", "c_stack")
#: The columns a typed read hands over dictionary-encoded (categoricals from the chunk on:
#: each distinct text once): the stacks, and the labels of a handful of values that the
#: rows' reading casts to categoricals anyway (an event's kind, its Event Type, Device Id).
_ENCODED = (*_STACKS, "event", "etype", "dev")

#: A connection that reads a query's rows into an Arrow table.
TypedConnection = RowsConnection | ArrowConnection


def _connect_typed(path: Path) -> TypedConnection | None:
    """The compiled rows reader where it is in use, else ADBC's, else None (text only)."""
    return connect_rows(path) or connect_arrow(path)


def _interned(table, positions: frozenset[int]):
    """``table`` with the text columns at ``positions`` dictionary-encoded, in the fetching
    thread (pyarrow's hashing lets go of the GIL): each distinct call stack (or label) is
    then checked for UTF-8 and handed to polars once, as a categorical, instead of every
    row's copy (the stacks are half of a DB's text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not positions:
        return table
    columns = [pc.dictionary_encode(column) if index in positions and (
        pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) else column
        for index, column in enumerate(table.columns)]
    return pa.Table.from_arrays(columns, names=table.column_names)


def _empty_as_null(name: str) -> pl.Expr:
    """Column ``name`` with its empty texts null (cheaper than ``replace("", None)``)."""
    return pl.when(pl.col(name) != "").then(pl.col(name)).alias(name)


def _ints(name: str, values) -> pl.Series:
    text = pl.Series(name, [None if v is None else str(v) for v in values], dtype=pl.String)
    return text.str.strip_chars().cast(pl.Int64, strict=False)


# -- CSV ------------------------------------------------------------------------------------


def read_csv(path: Path) -> RawFile:
    """A ``memscope_dump_*.csv`` / ``leaks_dump_*.csv`` or a ``python_trace_*.csv``."""
    kind = csv_kind(path)
    if kind == "legacy":
        raise CaptureError(path, "an msLeaks CSV of the early-2025 layout (Record Index, "
                                 "Kernel Index, Flag, ...), which memtui does not read")
    if kind == "trace":
        return read_trace_csv(path)
    if kind != "dump":
        raise CaptureError(path, "not an msMemScope CSV (unknown header)")
    names = dump_csv_names(path)
    raw = RawFile(path=Path(path), device=device_of_path(path), layout="csv")
    bad = read_dump_csv_rows(raw, path, names, micro=True if "t_us" in names else None)[1]
    if bad:
        raw.warnings.append(f"{Path(path).name}: {bad} malformed rows skipped")
    return raw


def dump_csv_names(path: Path) -> list[str]:
    """The raw column names of a dump CSV's header (``_unusedN`` for columns not read)."""
    header = next(csv.reader([first_line(path)]))
    mapping = map_columns(path, "header", header, DUMP_COLUMNS, REQUIRED)
    return [mapping.get(column, f"_unused{i}") for i, column in enumerate(header)]


def read_dump_csv_rows(raw: RawFile, source: Path | bytes, names: list[str],
                       micro: bool | None, row_offset: int = 0) -> tuple[int | None, int]:
    """The dump rows of ``source`` (the CSV file, or its rows without the header as bytes:
    ``--follow`` reads the lines appended) into ``raw.memory`` / ``raw.other``, numbered
    from ``row_offset``.  ``micro``: timestamps in µs (None: decided by the values).
    Returns the time scale decided (1000 for µs, 1 for ns) and the rows skipped."""
    rows, bad = _split_csv(source, names)
    if row_offset:
        rows = rows.with_columns(pl.col("row") + row_offset)
    rows = rows.select([c for c in rows.columns if not c.startswith("_unused")])
    for column in INT_COLUMNS + ("t_us",):
        if column in rows.columns:
            rows = rows.with_columns(pl.col(column).str.strip_chars().cast(pl.Int64, strict=False))
    # A row shifted by an unquoted comma shows as one without a readable timestamp.
    dump_rows = DumpRows(raw, micro=bool(micro), attr_json=False)
    if micro is False:
        dump_rows.scale = 1
    for offset in range(0, rows.height, _CHUNK_ROWS):
        dump_rows.add(rows.slice(offset, _CHUNK_ROWS))
    del rows
    bad += dump_rows.finish()
    return dump_rows.scale, bad


def _split_csv(source: Path | bytes, names: list[str]) -> tuple[pl.DataFrame, int]:
    """Rows of a dump CSV as strings, and how many were malformed and skipped.

    polars reads it with a few spare columns: a row with text in them had an unquoted
    comma (misaligned, skipped).  A file polars refuses (an unterminated quote, a stray
    quote) is read again with Python's csv module, keeping the rows of the right width.
    """
    spare = [f"_spare{i}" for i in range(4)]
    schema = {n: pl.String for n in names + spare}
    in_memory = isinstance(source, bytes)
    complete = source.endswith(b"\n") or not source if in_memory else _ends_with_newline(source)
    try:
        df = pl.read_csv(io.BytesIO(source) if in_memory else source, has_header=False,
                         skip_rows=0 if in_memory else 1, schema=schema,
                         truncate_ragged_lines=True, missing_columns="insert",
                         encoding="utf8-lossy", infer_schema=False, glob=False)
    except pl.exceptions.PolarsError:
        return _split_csv_slowly(source, names, complete)
    bad = 0
    if not complete and df.height:  # the writer is mid-row: its last row is incomplete
        df, bad = df.head(df.height - 1), 1
    misaligned = pl.any_horizontal(pl.col(spare).is_not_null())
    bad += int(df.select(misaligned.sum()).item())
    return df.filter(~misaligned).drop(spare).with_row_index("row").with_columns(
        pl.col("row").cast(pl.Int64)), bad


def _split_csv_slowly(source: Path | bytes, names: list[str],
                      complete: bool) -> tuple[pl.DataFrame, int]:
    width = len(names)
    kept: list[list[str]] = []
    bad = 0
    in_memory = isinstance(source, bytes)
    opened = io.StringIO(source.decode("utf-8", "replace"), newline="") if in_memory else \
        open(source, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115
    with opened as fh:
        reader = csv.reader(fh)
        if not in_memory:
            next(reader, None)
        try:
            for row in reader:
                if len(row) == width:
                    kept.append(row)
                else:
                    bad += 1
        except csv.Error:
            bad += 1
    if not complete and kept:
        kept.pop()
        bad += 1
    columns = list(zip(*kept, strict=True)) if kept else [[] for _ in names]
    df = pl.DataFrame({n: pl.Series(n, c, dtype=pl.String) for n, c in zip(names, columns,
                                                                             strict=True)})
    return df.with_columns(pl.col(pl.String).replace("", None)).with_row_index("row").with_columns(
        pl.col("row").cast(pl.Int64)), bad


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, io.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, io.SEEK_END)
        return fh.read(1) == b"\n"


def read_trace_csv(path: Path) -> RawFile:
    """``FuncInfo`` is not quoted and may hold commas: split each line from the right."""
    lines = pl.read_csv(path, has_header=False, skip_rows=1, separator=_FIELD, quote_char=None,
                        schema={"line": pl.String}, encoding="utf8-lossy", infer_schema=False,
                        glob=False)  # a file name is never a pattern ("run[1].csv")
    pattern = r"^(?<func>.*),(?<start>[^,]*),(?<end>[^,]*),(?<tid>[^,]*),(?<pid>[^,]*?)\r?$"
    parts = lines.with_row_index("row").select(
        pl.col("row").cast(pl.Int64), pl.col("line").str.extract_groups(pattern).alias("g")
    ).unnest("g")
    bad = parts.filter(pl.col("func").is_null()).height
    parts = parts.filter(pl.col("func").is_not_null()).with_columns(
        pl.col("tid", "pid").str.strip_chars().cast(pl.Int64, strict=False))
    if not _ends_with_newline(path) and parts.height:
        parts, bad = parts.head(parts.height - 1), bad + 1
    raw = RawFile(path=Path(path), device=device_of_path(path), layout="python trace csv")
    raw.trace = with_order(trace_times(parts), raw)
    if bad:
        raw.warnings.append(f"{Path(path).name}: {bad} malformed python-trace rows skipped")
    return raw


def trace_times(parts: pl.DataFrame) -> pl.DataFrame:
    """Start and end as ns integers (null for ``N/A``), µs scaled like the dump."""
    parts = parts.with_columns(
        pl.col("start", "end").cast(pl.String).str.strip_chars().cast(pl.Int64, strict=False))
    top = parts.select(pl.max_horizontal(pl.col("start").max(), pl.col("end").max())).item()
    if top is not None and top < _US_LIMIT:
        parts = parts.with_columns(pl.col("start", "end") * 1000)
    keep = [c for c in ("row", "func", "start", "end", "tid", "pid") if c in parts.columns]
    return parts.select(keep)


# -- rows into memory rows and other rows ---------------------------------------------------


class DumpRows:
    """Dump rows chunk by chunk into ``raw.memory`` and ``raw.other``, parsed as they come.

    Each chunk is split and its memory rows' Attr parsed before the next is read, so the
    raw text of the whole table is never held at once; call stacks become categoricals
    (one copy of each distinct text).  Rows without an event or a timestamp are dropped
    and counted.  Timestamps are µs where the header says so or the first values are too
    small for ns (2025 data).
    """

    def __init__(self, raw: RawFile, micro: bool, attr_json: bool) -> None:
        self.raw = raw
        self.scale: int | None = 1000 if micro else None
        self.attr_json = attr_json
        self.memory: list[pl.DataFrame] = []
        self.other: list[pl.DataFrame] = []
        self.unreadable = 0
        self.impossible = 0  # memory rows with a negative, missing or non-number size
        self.no_device = 0  # rows whose Device Id is no device number (shifted columns)
        self.no_device_example: str | None = None
        self.possible_devices: set[str | None] = set()  # Device Id values judged possible
        self.json_attr = 0  # CSV rows whose Attr has the DB's JSON form

    def add(self, rows: pl.DataFrame) -> None:
        if "t_us" in rows.columns:
            rows = rows.rename({"t_us": "t"})
        decoded = [c for c in _DECODED if c in rows.columns]
        rows = rows.with_columns([
            pl.lit(None, pl.Int64 if c in INT_COLUMNS else pl.String).alias(c)
            for c in RAW_COLUMNS if c not in rows.columns]).select(
            "row", *RAW_COLUMNS, *decoded, seq=pl.col("row"),
            file_device=pl.lit(self.raw.device, pl.String))
        if rows["event"].null_count() or rows["t"].null_count():  # (no copy when none)
            kept = rows.filter(pl.col("event").is_not_null() & pl.col("t").is_not_null())
            self.unreadable += rows.height - kept.height
        else:
            kept = rows
        kept = self._drop_impossible_devices(kept)
        if kept.is_empty():
            return
        if self.scale is None:
            self.scale = 1000 if kept["t"].max() < _US_LIMIT else 1
        if self.scale != 1:
            kept = kept.with_columns(pl.col("t") * self.scale)
        is_memory = kept["event"].is_in(MEMORY_EVENTS)
        memory = self._parse_attr(kept.filter(is_memory))
        memory, impossible = drop_impossible_sizes(memory)
        self.impossible += impossible
        # Each chunk made contiguous now (cheap, small): the concatenated frame's columns
        # then share their chunks, so later column work never has to copy it whole.  The
        # texts the model does not keep (Device Id, Ptr) are read here, chunk by chunk.
        self.memory.append(memory_columns(memory).with_columns(
            pl.col("py_stack", "c_stack", *_MEMORY_LABELS).cast(pl.Categorical)).rechunk())
        detail = pl.col("event").is_in(_DETAIL_EVENTS)
        self.other.append(kept.drop("py_stack", "c_stack", *decoded).filter(~is_memory)
                          .with_columns(pl.col(*_OTHER_LABELS).cast(pl.Categorical),
                                        attr=pl.when(detail).then(pl.col("attr"))).rechunk())

    def _drop_impossible_devices(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Rows whose ``Device Id`` is a number no device has (a timestamp where the id
        belongs: the columns of the row are shifted) dropped and counted."""
        # (a chunk names a device or two: judged once each; a typed read's are categorical)
        values = rows["dev"].unique().cast(pl.String)
        if self.possible_devices.issuperset(values.to_list()):
            return rows
        number = values.str.strip_chars().cast(pl.Int64, strict=False)
        wrong = values.filter(((number < 0) | (number > MAX_DEVICE_ID)).fill_null(False))
        self.possible_devices.update(set(values.to_list()) - set(wrong.to_list()))
        if wrong.len() == 0:
            return rows
        impossible = pl.col("dev").is_in(wrong.implode())
        bad = rows.filter(impossible)
        self.no_device += bad.height
        if self.no_device_example is None:
            self.no_device_example = str(bad["dev"][0])[:24]
        return rows.filter(~impossible)

    def _parse_attr(self, memory: pl.DataFrame) -> pl.DataFrame:
        """Attr parsed in its grammar: a CSV row may carry the DB's JSON form.  A DB's
        rows the compiled pass read (``_aid``... beside them) take its columns."""
        if "_aid" in memory.columns:
            base = [c for c in memory.columns if c not in _DECODED]
            pointers = ["_addr"] if "_addr" in memory.columns else []
            return memory.select(*base, *pointers, aid="_aid", size=pl.col("_raw_size").abs(),
                                 raw_size="_raw_size", total="_total", owner="_owner",
                                 ineff="_ineff", apool="_apool")
        if self.attr_json:
            return parse_attr(memory, attr_json=True)
        json_form = pl.col("attr").str.starts_with('{"')
        count = int(memory.select(json_form.sum()).item() or 0)
        if not count:
            return parse_attr(memory, attr_json=False)
        self.json_attr += count
        return pl.concat([parse_attr(memory.filter(~json_form.fill_null(False)), False),
                          parse_attr(memory.filter(json_form.fill_null(False)), True)]
                         ).sort("row")

    def so_far(self) -> RawFile:
        """The rows added so far as a RawFile of their own: new frames over the same
        chunks (nothing copied; the builder empties the frames it is given, never these
        ones), the warnings of :meth:`finish` not yet said."""
        raw = RawFile(path=self.raw.path, device=self.raw.device, layout=self.raw.layout,
                      warnings=list(self.raw.warnings))
        if self.memory:
            raw.memory = pl.concat(self.memory, rechunk=False).clone()
            raw.other = pl.concat(self.other, rechunk=False).clone()
        return raw

    def finish(self) -> int:
        name = self.raw.path.name
        if self.impossible:
            self.raw.warnings.append(f"{name}: {self.impossible} memory rows with a negative, "
                                     "missing or non-number size or total skipped")
        if self.json_attr:
            self.raw.warnings.append(f"{name}: {self.json_attr} rows with the DB's JSON Attr "
                                     "in a CSV, read as JSON")
        if self.no_device:
            self.raw.warnings.append(
                f"{name}: {self.no_device} rows skipped whose Device Id is no device "
                f"({self.no_device_example}): their columns look shifted")
        if self.memory:
            self.raw.memory = pl.concat(self.memory, rechunk=False)
            self.raw.other = pl.concat(self.other, rechunk=False)
        self.memory, self.other = [], []
        return self.unreadable


#: The texts of few distinct values (an event's kind, its pool, device and owner), held as
#: categoricals from the chunk on: 4 bytes a row, not a 16-byte view each, through the
#: whole build (millions of rows; the model's frames take them back as texts).
_MEMORY_LABELS = ("event", "etype", "owner", "ineff", "device", "pool")
_OTHER_LABELS = ("event", "etype", "dev", "file_device")


def labels_as_texts(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the columns :class:`DumpRows` holds as categoricals (but the call
    stacks) as texts again."""
    labels = [c for c in (*_MEMORY_LABELS, *_OTHER_LABELS)
              if c in frame.columns and frame.schema[c] == pl.Categorical]
    return frame.with_columns(pl.col(labels).cast(pl.String)) if labels else frame


#: The Attr columns the compiled pass adds to a fetched chunk of a DB (and ``Ptr`` read).
_DECODED = ("_aid", "_raw_size", "_total", "_owner", "_ineff", "_apool", "_addr")
_POOL_ALIASES = {"MindSpore": "MINDSPORE", "mindspore": "MINDSPORE"}
#: The memory rows' columns, in order (see :class:`RawFile`).
MEMORY_COLUMNS = ("id", "event", "etype", "name", "t", "pid", "tid", "attr", "py_stack",
                  "c_stack", "seq", "aid", "size", "total", "owner", "ineff", "device", "addr",
                  "pool")


def memory_columns(memory: pl.DataFrame) -> pl.DataFrame:
    """Memory rows' device names (``Device Id``, else the file's folder's), addresses
    (``Ptr``, hex or decimal) and pools (``Event Type``, or the pool an ACCESS names);
    the texts they were read from dropped."""
    pool = pl.when(pl.col("event") == "ACCESS").then(pl.col("apool")).otherwise(pl.col("etype"))
    return memory.with_columns(
        device=device_column(memory).fill_null(pl.col("file_device")),
        addr=_pointers_read(memory),
        pool=pool.replace(_POOL_ALIASES),
    ).select(MEMORY_COLUMNS)


def _pointers_read(memory: pl.DataFrame) -> pl.Series:
    """The addresses the compiled pass read in the fetching thread (``_addr``) where it
    read every row's ``Ptr``, else :func:`addresses`."""
    if "_addr" in memory.columns and memory.select(
            (pl.col("_addr").is_not_null() | pl.col("ptr").is_null()).all()).item():
        return memory["_addr"].alias("addr")
    return addresses(memory)


def addresses(memory: pl.DataFrame) -> pl.Series:
    """The ``Ptr`` column as numbers: hex with ``0x`` (msMemScope's way) or decimal, blanks
    around either ignored (null where it is neither)."""
    raw = pl.col("ptr")
    if memory.select(raw.str.starts_with("0x").all()).item():
        # msMemScope's own notation, read without copying every text to trim it
        addr = memory.select(raw.str.slice(2).str.to_integer(base=16, strict=False)
                             .cast(pl.UInt64, strict=False)).to_series()
        if addr.null_count() == memory["ptr"].null_count():
            return addr.alias("addr")
    ptr = raw.str.strip_chars()
    is_hex = ptr.str.starts_with("0x") | ptr.str.starts_with("0X")
    hexadecimal = ptr.str.slice(2).str.to_integer(base=16, strict=False)
    decimal = ptr.str.to_integer(base=10, strict=False)
    hex_rows = memory.select(is_hex.sum()).item()  # one notation per file, as a rule
    addr = (hexadecimal if hex_rows == memory.height else decimal if hex_rows == 0
            else pl.when(is_hex).then(hexadecimal).otherwise(decimal))
    return memory.select(addr.cast(pl.UInt64, strict=False).alias("addr")).to_series()


def drop_impossible_sizes(memory: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Memory rows without a usable size dropped: a MALLOC whose size is missing, not a
    number or negative (a FREE's size may be negative: 2025 msLeaks wrote frees so, and
    ``parse_attr`` takes its magnitude); a row whose pool ``total`` is negative is
    dropped too (no pool reserves less than nothing: a byte figure is never negative)."""
    bad = ((pl.col("event") == "MALLOC") & (pl.col("size").is_null() | (pl.col("raw_size") < 0))
           | (pl.col("total") < 0).fill_null(False))
    count = int(memory.select(bad.sum()).item() or 0)
    if count:
        memory = memory.filter(~bad)
    return memory.drop("raw_size"), count


def parse_attr(rows: pl.DataFrame, attr_json: bool) -> pl.DataFrame:
    """The Attr keys the model needs, as columns, vectorised (no row loop).

    DB Attr is JSON with every value a string (``{"size":"512"}``; the Insight prototype
    puts a space after the colon); CSV Attr is ``{size:512,owner:PTA@ops}``, whose text
    values may contain commas: a text value runs to the next ``,key:`` or the closing ``}``.
    """
    attr = pl.col("attr")

    if attr_json:
        def number(key: str) -> pl.Expr:
            # The text after the first ``"key":`` and its spaces and quotes, up to the next
            # quote: one regex (its literal start found by memmem) costs less than slicing.
            return attr.str.extract(f'"{key}":[ "]*([^"]*)"', 1)

        def text(key: str) -> pl.Expr:
            # the text after the first ``"key":`` (split there: ``str.find`` counts bytes
            # where ``str.slice`` counts characters), then a JSON string at its start
            after = attr.str.splitn(f'"{key}":', 2).struct.field("field_1")
            return after.str.extract(r'^\s*"((?:[^"\\]|\\.)*)"', 1)
    else:
        def number(key: str) -> pl.Expr:
            # the first ``{key:`` or ``,key:``, then blanks and the digits
            return attr.str.extract(rf"[{{,]{key}:\s*(-?\d+)?", 1)

        def text(key: str) -> pl.Expr:
            return attr.str.extract(rf"[{{,]\s*{key}\s*:(.*?)(?:,[A-Za-z_]\w*\s*:|\}}\s*$)", 1)
    numbers = {"aid": "allocation_id", "raw_size": "size", "total": "total"}
    texts = dict(owner=text("owner").replace("", None),
                 ineff=text("inefficient_type").replace("", None), apool=text("type"))
    # One pass over all rows: splitting them by event to skip absent keys costs more.
    # (Eager frames eliminate no common subexpressions: the size is parsed once, then used.)
    if attr_json:
        parsed = _json_numbers(rows, numbers, number).with_columns(**texts)
    else:
        parsed = rows.with_columns(
            **{name: number(key).cast(pl.Int64, strict=False) for name, key in numbers.items()},
            **texts)
    return parsed.select(*rows.columns, "aid", size=pl.col("raw_size").abs(), raw_size="raw_size",
                         total="total", owner="owner", ineff="ineff", apool="apool")


#: The head msMemScope writes every memory row's Attr with (``dump.cpp``): the allocation
#: id, the address, the size and, for the framework pools, the pool's total.
_JSON_HEAD = (r'^\{"allocation_id":"(?<aid>-?\d+)","addr":"[^"\\]*","size":"(?<raw_size>-?\d+)"'
              r'(?:,"total":"(?<total>-?\d+)")?')


def _json_numbers(rows: pl.DataFrame, numbers: dict[str, str], number) -> pl.DataFrame:
    """The number keys of JSON Attr as columns: one anchored regex reads the head every
    msMemScope row starts with (its keys are the first of their names: the texts before
    them hold no quote); rows without that head, or with a ``total`` elsewhere, are read
    key by key with ``number`` (each key's first occurrence), as every row was before."""
    head = pl.col("attr").str.extract_groups(_JSON_HEAD)
    parsed = rows.with_columns(_head=head).with_columns(
        pl.col("_head").struct.field(*numbers).cast(pl.Int64, strict=False)).drop("_head")
    elsewhere = (pl.col("aid").is_null() & pl.col("attr").is_not_null()) | (
        pl.col("total").is_null()
        & pl.col("attr").str.contains('"total":', literal=True).fill_null(False))
    where = parsed.select(pl.arg_where(elsewhere)).to_series()
    if where.len() == 0:
        return parsed
    slow = rows[where].select(
        **{name: number(key).cast(pl.Int64, strict=False) for name, key in numbers.items()})
    return parsed.with_columns(
        parsed[name].scatter(where, slow[name]) for name in numbers)


ATTR_SIZE = r'[{,]\s*"?size"?\s*:\s*"?\s*(-?\d+)'
