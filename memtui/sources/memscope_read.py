"""Reading msMemScope files (SQLite DBs, dump CSVs, python-trace CSVs) into raw polars frames.

This module owns the file formats of ../shared/formats/msmemscope.md: which tables and
columns exist in which version, how SQLite is opened (read-only, never blocking a writer
in WAL mode), how the CSVs are split (quoted multi-line stacks, rows broken by unquoted
commas), the two Attr grammars (JSON in DBs, ``{k:v,...}`` in CSVs) and the two time units.
It turns each file into a :class:`RawFile`: the dump rows split into *memory* rows
(MALLOC/FREE/ACCESS, their Attr already parsed into columns) and *other* rows (launches,
marks, system), plus python-trace rows, all with normalised column names.  Turning rows
into the model is :mod:`memtui.sources.memscope_build`'s job.

SQLite tables are read in rowid chunks by one query each that has SQLite itself join the
columns of every row with control characters (``printf`` + ``group_concat``), which
polars' CSV reader then splits: no Python object per row.  A chunk whose text holds those
control characters falls back to a plain ``fetchall`` of that chunk.  Each chunk is its own
short read transaction, bounded by the largest rowid seen first: msMemScope only appends,
so rows written meanwhile are left out, and a writer's checkpoint never waits long on us.
"""

from __future__ import annotations

import csv
import io
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memtui.errors import CaptureError

SQLITE_MAGIC = b"SQLite format 3\x00"
DUMP_TABLES = ("memscope_dump", "leaks_dump")
TRACE_TABLE = re.compile(r"python_trace_(\d+)")
MEMORY_EVENTS = ("MALLOC", "FREE", "ACCESS")

#: Normalised column name (lower case, letters and digits only) -> raw column.
_DUMP_COLUMNS = {
    "id": "id", "event": "event", "eventtype": "etype", "name": "name",
    "timestampns": "t", "timestampus": "t_us", "timestamp": "t",
    "processid": "pid", "threadid": "tid", "deviceid": "dev", "ptr": "ptr", "attr": "attr",
    "callstackpython": "py_stack", "callstackc": "c_stack",
}
_REQUIRED = ("event", "etype", "t", "dev", "ptr", "attr")
_INT_COLUMNS = ("id", "t", "pid", "tid")
RAW_COLUMNS = ("id", "event", "etype", "name", "t", "pid", "tid", "dev", "ptr", "attr",
               "py_stack", "c_stack")
_TRACE_COLUMNS = {"funcinfo": "func", "starttimens": "start", "endtimens": "end",
                  "threadid": "tid", "processid": "pid"}
TRACE_HEADER = "FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id"
_LEGACY_HEADER = "Record Index,"
#: Timestamps below this are microseconds (2025 data); above, nanoseconds since 1970.
_US_LIMIT = 10**17
_CHUNK_ROWS = 262_144
_FIELD, _RECORD = "\x1f", "\x1e"
_DEVICE_DIR = re.compile(r"device_(\d+|cpu)")


@dataclass
class RawFile:
    """One file's rows, ready for the model builder (see the module docstring).

    ``memory`` has ``RAW_COLUMNS`` (``t`` in ns) plus the parsed Attr columns ``aid``
    (allocation_id), ``size``, ``total``, ``owner``, ``ineff`` (inefficient_type) and
    ``apool`` (the pool an ACCESS names); ``other`` has ``RAW_COLUMNS``; both carry ``row``,
    the row's order in the file.  ``trace`` has ``func, start, end, tid, pid`` (times in ns,
    null for ``N/A``) and ``row``.  ``device`` is the device the path names
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


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def first_line(path: Path, limit: int = 65536) -> str:
    """The first line of a text file (BOM and line end removed), or '' when unreadable."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(limit)
    except OSError:
        return ""
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
    """Table names of an SQLite file, or None when it cannot be opened."""
    try:
        con = connect_ro(path)
    except (CaptureError, sqlite3.Error):
        return None
    try:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    except sqlite3.Error:
        return None
    finally:
        con.close()


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


# -- SQLite -------------------------------------------------------------------------------


def connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection that never writes the file and never holds up a writer.

    ``mode=ro`` keeps the file unchanged and reads through a live WAL.  A file in WAL mode
    with no ``-wal`` beside it has no writer (a WAL writer keeps one while connected):
    it is opened ``immutable`` so that SQLite does not create ``-wal``/``-shm`` files
    next to the user's capture.  ``timeout`` rides out a rollback-journal writer's locks.
    """
    path = Path(path).resolve()
    params = "mode=ro"
    if _wal_mode(path) and not Path(f"{path}-wal").exists():
        params += "&immutable=1"
    con = sqlite3.connect(f"{path.as_uri()}?{params}", uri=True, timeout=5.0,
                          isolation_level=None, check_same_thread=False)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def _wal_mode(path: Path) -> bool:
    """The header's read/write format versions are 2 in WAL mode."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _sqlite_problem(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return f"the SQLite database is corrupt or truncated ({text})"
    if "locked" in text or "busy" in text:
        return f"the SQLite database is locked by a writer ({text}); try again"
    return f"cannot read the SQLite database ({text})"


def read_db(path: Path) -> RawFile:
    """Every msMemScope table of one SQLite file."""
    try:
        con = connect_ro(path)
    except sqlite3.Error as exc:
        raise CaptureError(path, _sqlite_problem(exc)) from None
    try:
        return _read_db_tables(path, con)
    except sqlite3.Error as exc:
        raise CaptureError(path, _sqlite_problem(exc)) from None
    finally:
        con.close()


def _read_db_tables(path: Path, con: sqlite3.Connection) -> RawFile:
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    dump = next((t for t in DUMP_TABLES if t in tables), None)
    traces = sorted(t for t in tables if TRACE_TABLE.fullmatch(t))
    if dump is None and not traces:
        raise CaptureError(path, "an SQLite file without a memscope_dump, leaks_dump or "
                                 "python_trace_<pid> table: not an msMemScope DB")
    raw = RawFile(path=Path(path), device=device_of_path(path))
    if dump is not None:
        columns = _table_columns(con, dump)
        mapping = _map_columns(path, dump, columns, _DUMP_COLUMNS, _REQUIRED)
        camel = "eventType" in columns
        raw.layout = "Insight prototype (camelCase columns)" if camel else dump
        if camel:
            raw.warnings.append(
                f"{Path(path).name}: an early MindStudio Insight prototype layout "
                "(camelCase columns); read as msLeaks data")
        rows = _read_table(con, dump, mapping, int_columns=_INT_COLUMNS)
        unreadable = _split_dump(raw, _scale_time(rows, "t_us" in mapping.values()),
                                 attr_json=True)
        if unreadable:
            raw.warnings.append(f"{Path(path).name}: {unreadable} rows without a readable "
                                "event or timestamp skipped")
    parts = []
    for table in traces:
        mapping = _map_columns(path, table, _table_columns(con, table), _TRACE_COLUMNS,
                               ("func", "start", "end"))
        part = _read_table(con, table, mapping, int_columns=("tid", "pid"))
        if "pid" not in part.columns or part["pid"].null_count() == part.height:
            part = part.with_columns(pid=pl.lit(int(TRACE_TABLE.fullmatch(table).group(1))))
        parts.append(part)
    if parts:
        raw.trace = _trace_times(pl.concat(parts, how="diagonal_relaxed"))
    return raw


def _table_columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _map_columns(path: Path, table: str, columns: list[str], known: dict[str, str],
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
                int_columns: tuple[str, ...]) -> pl.DataFrame:
    """All rows of ``table``'s mapped columns, in rowid order, as polars columns."""
    sources = list(mapping)
    names = [mapping[c] for c in sources]
    schema = {n: (pl.Int64 if n in int_columns or n == "t_us" else pl.String) for n in names}
    fmt = _FIELD.join(["%s"] * len(sources))
    select = ", ".join(f'"{c}"' for c in sources)
    try:
        lo, hi = con.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
    except sqlite3.OperationalError:  # a WITHOUT ROWID table: one query
        lo = hi = None
    if lo is None:
        ranges = [None] if hi is None and lo is None else []
    else:
        ranges = [(a, min(a + _CHUNK_ROWS - 1, hi)) for a in range(lo, hi + 1, _CHUNK_ROWS)]
    parts = []
    for bounds in ranges:
        where = "" if bounds is None else " WHERE rowid BETWEEN ? AND ?"
        parts.append(_read_chunk(con, table, select, fmt, where, bounds or (), schema))
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))


def _read_chunk(con, table, select, fmt, where, params, schema) -> pl.DataFrame:
    count, blob = con.execute(
        f"SELECT count(*), CAST(group_concat(printf('{fmt}', {select}), char(30)) AS BLOB) "
        f'FROM "{table}" NOT INDEXED{where}', params).fetchone()
    if not count:
        return pl.DataFrame(schema=schema)
    try:
        df = pl.read_csv(blob, separator=_FIELD, eol_char=_RECORD, quote_char=None,
                         has_header=False, schema=schema, ignore_errors=True,
                         encoding="utf8-lossy")
        if df.height == count:
            return df
    except pl.exceptions.PolarsError:
        pass
    # The text holds the separators themselves: read this chunk plainly.
    rows = con.execute(f'SELECT {select} FROM "{table}" NOT INDEXED{where}', params).fetchall()
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in schema]
    return pl.DataFrame(
        {n: pl.Series(n, col, dtype=pl.String, strict=False)
         if dt == pl.String else _ints(n, col) for (n, dt), col in zip(schema.items(), columns,
                                                                       strict=True)}
    ).with_columns(pl.col(pl.String).replace("", None))


def _ints(name: str, values) -> pl.Series:
    text = pl.Series(name, [None if v is None else str(v) for v in values], dtype=pl.String)
    return text.str.strip_chars().cast(pl.Int64, strict=False)


def _scale_time(rows: pl.DataFrame, micro: bool) -> pl.DataFrame:
    """Timestamps in ns: µs where the header says so or the values are too small for ns."""
    if "t_us" in rows.columns:
        rows = rows.rename({"t_us": "t"})
    top = rows["t"].max() if rows.height else None
    if micro or (top is not None and top < _US_LIMIT):
        rows = rows.with_columns(pl.col("t") * 1000)
    return rows


# -- CSV ------------------------------------------------------------------------------------


def read_csv(path: Path) -> RawFile:
    """A ``memscope_dump_*.csv`` / ``leaks_dump_*.csv`` or a ``python_trace_*.csv``."""
    kind = csv_kind(path)
    if kind == "legacy":
        raise CaptureError(path, "an msLeaks CSV of the early-2025 layout (Record Index, "
                                 "Kernel Index, Flag, ...), which memtui does not read")
    if kind == "trace":
        return _read_trace_csv(path)
    if kind != "dump":
        raise CaptureError(path, "not an msMemScope CSV (unknown header)")
    header = next(csv.reader([first_line(path)]))
    mapping = _map_columns(path, "header", header, _DUMP_COLUMNS, _REQUIRED)
    names = [mapping.get(column, f"_unused{i}") for i, column in enumerate(header)]
    raw = RawFile(path=Path(path), device=device_of_path(path), layout="csv")
    rows, bad = _split_csv(path, names)
    rows = rows.select([c for c in rows.columns if not c.startswith("_unused")])
    for column in _INT_COLUMNS + ("t_us",):
        if column in rows.columns:
            rows = rows.with_columns(pl.col(column).str.strip_chars().cast(pl.Int64, strict=False))
    # A row shifted by an unquoted comma shows as one without a readable timestamp.
    bad += _split_dump(raw, _scale_time(rows, "t_us" in names), attr_json=False)
    if bad:
        raw.warnings.append(f"{Path(path).name}: {bad} malformed rows skipped")
    return raw


def _split_csv(path: Path, names: list[str]) -> tuple[pl.DataFrame, int]:
    """Rows of a dump CSV as strings, and how many were malformed and skipped.

    polars reads it with a few spare columns: a row with text in them had an unquoted
    comma (misaligned, skipped).  A file polars refuses (an unterminated quote, a stray
    quote) is read again with Python's csv module, keeping the rows of the right width.
    """
    spare = [f"_spare{i}" for i in range(4)]
    schema = {n: pl.String for n in names + spare}
    complete = _ends_with_newline(path)
    try:
        df = pl.read_csv(path, has_header=False, skip_rows=1, schema=schema,
                         truncate_ragged_lines=True, missing_columns="insert",
                         encoding="utf8-lossy", infer_schema=False)
    except pl.exceptions.PolarsError:
        return _split_csv_slowly(path, names, complete)
    bad = 0
    if not complete and df.height:  # the writer is mid-row: its last row is incomplete
        df, bad = df.head(df.height - 1), 1
    misaligned = pl.any_horizontal(pl.col(spare).is_not_null())
    bad += int(df.select(misaligned.sum()).item())
    return df.filter(~misaligned).drop(spare).with_row_index("row").with_columns(
        pl.col("row").cast(pl.Int64)), bad


def _split_csv_slowly(path: Path, names: list[str], complete: bool) -> tuple[pl.DataFrame, int]:
    width = len(names)
    kept: list[list[str]] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.reader(fh)
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


def _read_trace_csv(path: Path) -> RawFile:
    """``FuncInfo`` is not quoted and may hold commas: split each line from the right."""
    lines = pl.read_csv(path, has_header=False, skip_rows=1, separator=_FIELD, quote_char=None,
                        schema={"line": pl.String}, encoding="utf8-lossy", infer_schema=False)
    pattern = r"^(?<func>.*),(?<start>[^,]*),(?<end>[^,]*),(?<tid>[^,]*),(?<pid>[^,]*?)\r?$"
    parts = lines.with_row_index("row").select(
        pl.col("row").cast(pl.Int64), pl.col("line").str.extract_groups(pattern).alias("g")
    ).unnest("g")
    bad = parts.filter(pl.col("func").is_null()).height
    parts = parts.filter(pl.col("func").is_not_null()).with_columns(
        pl.col("tid", "pid").str.strip_chars().cast(pl.Int64, strict=False))
    if not _ends_with_newline(path) and parts.height:
        parts, bad = parts.head(parts.height - 1), bad + 1
    raw = RawFile(path=Path(path), device=device_of_path(path), layout="python trace csv",
                  trace=_trace_times(parts))
    if bad:
        raw.warnings.append(f"{Path(path).name}: {bad} malformed python-trace rows skipped")
    return raw


def _trace_times(parts: pl.DataFrame) -> pl.DataFrame:
    """Start and end as ns integers (null for ``N/A``), µs scaled like the dump."""
    parts = parts.with_columns(
        pl.col("start", "end").cast(pl.String).str.strip_chars().cast(pl.Int64, strict=False))
    top = parts.select(pl.max_horizontal(pl.col("start").max(), pl.col("end").max())).item()
    if top is not None and top < _US_LIMIT:
        parts = parts.with_columns(pl.col("start", "end") * 1000)
    keep = [c for c in ("row", "func", "start", "end", "tid", "pid") if c in parts.columns]
    return parts.select(keep)


# -- rows into memory rows and other rows ---------------------------------------------------


def _split_dump(raw: RawFile, rows: pl.DataFrame, attr_json: bool) -> int:
    """Complete the columns, parse the memory rows' Attr; drop (and count) rows without
    an event or a timestamp."""
    rows = rows.with_columns([pl.lit(None, pl.Int64 if c in _INT_COLUMNS else pl.String).alias(c)
                              for c in RAW_COLUMNS if c not in rows.columns])
    rows = rows.select("row", *RAW_COLUMNS)
    readable = pl.col("event").is_not_null() & pl.col("t").is_not_null()
    unreadable = rows.height - rows.select(readable.sum()).item()
    rows = rows.filter(readable)
    is_memory = pl.col("event").is_in(MEMORY_EVENTS)
    raw.memory = parse_attr(rows.filter(is_memory), attr_json)
    raw.other = rows.filter(~is_memory)
    return unreadable


def parse_attr(rows: pl.DataFrame, attr_json: bool) -> pl.DataFrame:
    """The Attr keys the model needs, as columns, vectorised (regex, no row loop).

    DB Attr is JSON with every value a string (``{"size":"512"}``; the Insight prototype
    puts a space after the colon); CSV Attr is ``{size:512,owner:PTA@ops}``, whose text
    values may contain commas: a text value runs to the next ``,key:`` or the closing ``}``.
    """
    attr = pl.col("attr")
    if attr_json:
        def number(key: str) -> pl.Expr:
            return attr.str.extract(rf'"{key}"\s*:\s*"?\s*(-?\d+)', 1)

        def text(key: str) -> pl.Expr:
            return attr.str.extract(rf'"{key}"\s*:\s*"((?:[^"\\]|\\.)*)"', 1)
    else:
        def number(key: str) -> pl.Expr:
            return attr.str.extract(rf"[{{,]\s*{key}\s*:\s*(-?\d+)", 1)

        def text(key: str) -> pl.Expr:
            return attr.str.extract(rf"[{{,]\s*{key}\s*:(.*?)(?:,[A-Za-z_]\w*\s*:|\}}\s*$)", 1)
    event = pl.col("event")
    aid = number("allocation_id").cast(pl.Int64, strict=False).alias("aid")
    size = number("size").cast(pl.Int64, strict=False).abs().alias("size")
    total = number("total").cast(pl.Int64, strict=False).alias("total")
    none = pl.lit(None, pl.String)
    # Each key is looked for only in the rows that carry it (rows are re-sorted later).
    mallocs = rows.filter(event == "MALLOC").with_columns(
        aid, size, total, owner=text("owner").replace("", None),
        ineff=text("inefficient_type").replace("", None), apool=none)
    frees = rows.filter(event == "FREE").with_columns(
        aid, size, total, owner=none, ineff=none, apool=none)
    accesses = rows.filter(event == "ACCESS").with_columns(
        aid, size, total=pl.lit(None, pl.Int64), owner=none, ineff=none, apool=text("type"))
    return pl.concat([mallocs, frees, accesses])
