"""Reading an msMemScope DB or dump CSV while it is written: only what is past the last read.

:class:`DbTail` keeps, per table, the largest rowid read and the raw frames read so far
(:class:`~memtui.sources.memscope.read.RawFile` parts).  :meth:`DbTail.read_new` opens a
fresh read-only connection (:func:`~memtui.sources.common.sqlite.connect_readonly`: never a file
beside the DB; ``immutable`` only while no ``-wal`` exists, which a live WAL writer keeps),
reads ``rowid > last`` in the same short chunks as the full read, parses them as the full
read does and appends them; nothing read is read again.  :meth:`DbTail.trace` extends the
model built so far with the parts read since (:class:`~memtui.sources.memscope.live.LiveBuild`:
msMemScope writes a block's rows when it is freed, so new rows may fall before old ones
in time; only the events from the earliest new one on are levelled again).

A table whose largest rowid went down lost rows: :class:`CaptureError` saying
"truncated".  :class:`CsvTail` does the same for a dump CSV being appended: the complete
records past the byte offset read (a record ends at a newline outside quotes).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.sources.common.sqlite import connect_readonly, sqlite_problem
from memtui.sources.memscope import read
from memtui.sources.memscope.build import build_trace
from memtui.sources.memscope.live import LiveBuild

#: Rows per read statement.  Each statement is its own short read: in WAL mode the writer
#: never waits for it; with a rollback journal a writer's commit waits at most one of these
#: (a few ms), smaller than the full read's chunks.
CHUNK_ROWS = 8192


@dataclass
class _Table:
    """One table's reading position: its column mapping, last rowid, rows read, and what
    tells rows already read from rows written again under the same ids: the table's
    schema, and the content of its first row and of the last row read."""

    name: str
    mapping: dict[str, str]
    last_rowid: int = 0
    rows: int = 0
    schema: str | None = None
    marks: tuple[tuple[int, int], ...] = ()  # (rowid, hash of the row) already read


class RowsRewritten(Exception):
    """Rows already read were deleted and written again (row ids reused, a table
    recreated): what was read no longer is the table; read it again from the start."""


@dataclass
class TailParts:
    """The raw frames read so far, and the model built from them."""

    path: Path
    micro: bool | None = None  # timestamps in µs (decided by the first rows)
    memory: list[pl.DataFrame] = field(default_factory=list)
    other: list[pl.DataFrame] = field(default_factory=list)
    trace_parts: list[pl.DataFrame] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    layout: str = ""
    live: LiveBuild | None = None
    _built: tuple[int, int, int] = (0, 0, 0)  # parts of memory, other, trace built

    def trace(self) -> MemoryTrace | None:
        """The model of every row read so far (None while there is no memory row),
        extended with the parts read since the last call."""
        if not any(part.height for part in self.memory) and not self.trace_parts:
            return None
        if self.live is None:
            self.live = LiveBuild(self.path)
        self.live.layout = self.layout
        parts = (self.memory, self.other, self.trace_parts)
        new = [p[done:] for p, done in zip(parts, self._built, strict=True)]
        self._built = tuple(len(p) for p in parts)
        return self.live.update(*parts, *new, warnings=list(self.warnings))

    def full_trace(self) -> MemoryTrace | None:
        """The model of every row read so far built from scratch (what a fresh open of
        the same rows shows; tests and benchmarks compare it with :meth:`trace`)."""
        if not any(part.height for part in self.memory) and not self.trace_parts:
            return None
        raw = read.RawFile(path=self.path, device=read.device_of_path(self.path),
                           layout=self.layout, warnings=list(self.warnings))
        if self.memory:
            raw.memory = pl.concat(self.memory, rechunk=False)
            raw.other = pl.concat(self.other, rechunk=False)
        if self.trace_parts:
            raw.trace = pl.concat(self.trace_parts, how="diagonal_relaxed")
        return build_trace([raw], self.path)

    def _keep(self, raw: read.RawFile) -> None:
        # (the live build extends frames of texts: the reader's categoricals go back)
        if raw.memory is not None:
            self.memory.append(read.labels_as_texts(raw.memory))
            self.other.append(read.labels_as_texts(raw.other))


@dataclass
class DbTail(TailParts):
    """See the module docstring."""

    dump: _Table | None = None
    traces: dict[str, _Table] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return (self.dump.rows if self.dump else 0) + sum(t.rows for t in self.traces.values())

    def read_new(self) -> int:
        """Read the rows added since the last call; how many there were."""
        try:
            con = connect_readonly(self.path)
        except sqlite3.Error as exc:
            raise CaptureError(self.path, sqlite_problem(exc)) from None
        try:
            self._find_tables(con)
            new = self._read_dump(con) if self.dump is not None else 0
            for table in self.traces.values():
                new += self._read_trace(con, table)
            return new
        except sqlite3.Error as exc:
            raise CaptureError(self.path, sqlite_problem(exc)) from None
        finally:
            con.close()

    # -- tables ---------------------------------------------------------------------------

    def _find_tables(self, con: sqlite3.Connection) -> None:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        if self.dump is not None and self.dump.name not in tables:
            raise CaptureError(self.path, f"was truncated (table {self.dump.name} is gone)")
        if self.dump is None:
            name = next((t for t in read.DUMP_TABLES if t in tables), None)
            if name is not None:
                columns = read.table_columns(con, name)
                mapping = read.map_columns(self.path, name, columns, read.DUMP_COLUMNS,
                                            read.REQUIRED)
                self.dump = _Table(name, mapping)
                self.layout = name
                if "t_us" in mapping.values():
                    self.micro = True
        for name in sorted(t for t in tables if read.TRACE_TABLE.fullmatch(t)):
            if name not in self.traces:
                mapping = read.map_columns(self.path, name, read.table_columns(con, name),
                                            read.TRACE_COLUMNS, ("func", "start", "end"))
                self.traces[name] = _Table(name, mapping)

    def _chunks(self, con: sqlite3.Connection, table: _Table,
                int_columns: tuple[str, ...]):
        """The new rows of ``table`` in rowid chunks, each with its ``row`` (order) index.

        Each chunk starts at the first rowid past the last one read (an indexed seek), so
        sparse rowids cost one chunk per run of rows, never one per gap."""
        top = con.execute(f'SELECT max(rowid) FROM "{table.name}"').fetchone()[0] or 0
        if top < table.last_rowid:
            raise CaptureError(self.path, f"was truncated (table {table.name} lost rows)")
        _check_unchanged(con, table)
        query = read.ChunkQuery(con, table.name, table.mapping, int_columns, typed=False)
        try:
            start = self._next_rowid(con, table.name, table.last_rowid, top)
            while start is not None:
                bounds = (start, min(start + CHUNK_ROWS - 1, top))
                chunk = query.parse(query.fetch(bounds), bounds)
                if chunk.height:
                    yield chunk.with_row_index("row", offset=table.rows).with_columns(
                        pl.col("row").cast(pl.Int64))
                    table.rows += chunk.height
                table.last_rowid = bounds[1]
                start = self._next_rowid(con, table.name, bounds[1], top)
        finally:
            query.close()
        table.last_rowid = top
        _mark(con, table)

    @staticmethod
    def _next_rowid(con: sqlite3.Connection, name: str, after: int, top: int) -> int | None:
        if after >= top:
            return None
        return con.execute(f'SELECT min(rowid) FROM "{name}" WHERE rowid > ?',
                           (after,)).fetchone()[0]

    def _read_dump(self, con: sqlite3.Connection) -> int:
        before = self.dump.rows
        raw = read.RawFile(path=self.path, device=read.device_of_path(self.path))
        rows = read.DumpRows(raw, micro=bool(self.micro), attr_json=True)
        if self.micro is False:
            rows.scale = 1
        for chunk in self._chunks(con, self.dump, read.INT_COLUMNS):
            rows.add(chunk)
        unreadable = rows.finish()
        if rows.scale is not None:
            self.micro = rows.scale != 1
        if unreadable:
            self.warnings.append(f"{self.path.name}: {unreadable} rows without a readable "
                                 "event or timestamp skipped")
        self._keep(raw)
        return self.dump.rows - before

    def _read_trace(self, con: sqlite3.Connection, table: _Table) -> int:
        before = table.rows
        chunks = list(self._chunks(con, table, ("tid", "pid")))
        if not chunks:
            return 0
        part = pl.concat(chunks)
        if "pid" not in part.columns or part["pid"].null_count() == part.height:
            part = part.with_columns(
                pid=pl.lit(int(read.TRACE_TABLE.fullmatch(table.name).group(1))))
        raw = read.RawFile(path=self.path, device=read.device_of_path(self.path))
        self.trace_parts.append(read.with_order(read.trace_times(part), raw))
        return table.rows - before


def _row_hash(con: sqlite3.Connection, table: str, rowid: int) -> int | None:
    row = con.execute(f'SELECT * FROM "{table}" WHERE rowid = ?', (rowid,)).fetchone()
    return None if row is None else hash(row)


def _schema(con: sqlite3.Connection, table: str) -> str | None:
    row = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (table,)).fetchone()
    return None if row is None else row[0]


def _mark(con: sqlite3.Connection, table: _Table) -> None:
    """Remember the schema and the first and last rows read (two indexed reads)."""
    if not table.rows:
        return
    first = con.execute(f'SELECT min(rowid) FROM "{table.name}"').fetchone()[0]
    table.schema = _schema(con, table.name)
    table.marks = tuple((rowid, _row_hash(con, table.name, rowid))
                        for rowid in dict.fromkeys((first, table.last_rowid))
                        if rowid is not None)


def _check_unchanged(con: sqlite3.Connection, table: _Table) -> None:
    """:class:`RowsRewritten` where the rows read are no longer there as they were read:
    the schema changed, or the first or last row read is gone or holds other values
    (rows deleted and inserted again reuse their ids: reading on past the last id would
    mix the old rows with the new)."""
    if not table.marks:
        return
    if _schema(con, table.name) != table.schema or any(
            _row_hash(con, table.name, rowid) != seen for rowid, seen in table.marks):
        raise RowsRewritten(table.name)


@dataclass
class CsvTail(TailParts):
    """A dump CSV being appended: the complete records past the byte offset read.

    A record ends at a newline outside quotes (msMemScope quotes its multi-line call
    stacks), so a row the writer is in the middle of waits for its end.
    """

    offset: int = 0  # bytes of the file read (header included)
    rows: int = 0
    names: list[str] | None = None

    def read_new(self) -> int:
        """Parse the records appended since the last call; how many there were."""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        if self.names is None:
            header_end = data.find(b"\n")
            if header_end < 0:
                return 0
            self.names = read.dump_csv_names(self.path)
            self.layout = "csv"
            if "t_us" in self.names:
                self.micro = True
            self.offset += header_end + 1
            data = data[header_end + 1:]
        end, records = complete_records(data)
        if not records:
            return 0
        raw = read.RawFile(path=self.path, device=read.device_of_path(self.path))
        scale, bad = read.read_dump_csv_rows(raw, data[:end], self.names, self.micro,
                                             row_offset=self.rows)
        if scale is not None:
            self.micro = scale != 1
        if bad:
            self.warnings.append(f"{self.path.name}: {bad} malformed rows skipped")
        self._keep(raw)
        self.offset += end
        self.rows += records
        return records


def complete_records(data: bytes) -> tuple[int, int]:
    """Where the last complete CSV record of ``data`` ends (after its newline), and how many
    records end before it: newlines with an even count of quotes before them."""
    if not data:
        return 0, 0
    codes = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(codes == 10)
    if not newlines.size:
        return 0, 0
    quotes = np.cumsum(codes == 34)
    ends = newlines[quotes[newlines] % 2 == 0]
    if not ends.size:
        return 0, 0
    return int(ends[-1]) + 1, int(ends.size)
