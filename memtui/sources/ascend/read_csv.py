"""The Ascend profiler's memory CSVs, read into the source's intermediate frames.

Owns the text formats of ../shared/formats/ascend_profiler.md sections 2 and 3:
``memory_record`` (5, 6 and 7 columns, and msprof's KB form), ``operator_memory`` (10 and
15 columns, and msprof's KB form without a release time), the three ``npu_module_mem``
forms, ``static_op_mem`` and msprof's ``npu_mem``.  Units come from the header suffix
(``(MB)``, ``(KB)``, ``(Byte)``), never from the file name.

Each reader returns one of the frames described in ``ascend_frames.py`` with absolute
times in int nanoseconds and sizes in int bytes.  Quirks handled here: CRLF or LF line
ends, a byte-order mark, cells padded with whitespace or a TAB (``"...238.150\\t"``),
``N/A`` and empty cells (missing), rows with missing or extra cells (skipped and
counted), and numbers Excel rewrote in scientific notation (``1.69512E+15``: read as
written, with a warning that their precision is lost).  Timestamps are parsed from the
decimal string itself, so the nanosecond digits survive (a float64 would lose them).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memtui.errors import CaptureError
from memtui.sources.ascend import frames
from memtui.sources.ascend.files import (
    MODULE,
    NPU_MEM,
    OPERATOR,
    RECORD,
    STATIC,
    classify_header,
    first_line,
    read_header,
)

_UNITS = {"(MB)": 1 << 20, "(KB)": 1 << 10, "(Byte)": 1, "(B)": 1, "(Bytes)": 1}
_MISSING = ("", "N/A")
#: The last column of every profiler CSV, which no valid row leaves empty.
_REQUIRED_LAST = frozenset({"Device Type", "Device", "Size(KB)", "timestamp(us)"})


@dataclass
class CsvTable:
    """A CSV as stripped string cells: one column per header name plus ``row``."""

    path: Path
    header: list[str]
    cells: pl.DataFrame
    bad_rows: int = 0
    warnings: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        return name in self.header

    def column(self, prefix: str) -> str | None:
        """The first header name starting with ``prefix`` (``"Total Allocated("``)."""
        return next((name for name in self.header if name.startswith(prefix)), None)


def read_table(path: Path) -> CsvTable:
    """A CSV as stripped cells.  Rows with more cells than the header, or without their
    last cell (every profiler CSV's last column is required), are skipped and counted."""
    header = _header_of(path)
    if header is None:
        raise CaptureError(path, _no_header(path))
    if header[-1] in _REQUIRED_LAST:
        table = _read_fast(path, header)
        if table is not None:
            return table
    return _read_lines(path, header)


def _no_header(path: Path) -> str:
    """Why ``path`` has no CSV header: empty, binary (a NUL in its first line), or a
    first line without commas."""
    line = first_line(path)
    if line is None:
        return "the file is empty: no CSV header"
    if "\x00" in line:
        return "its first line holds a NUL byte: a binary file, not a CSV"
    return "its first line holds no comma: no CSV header"


def _header_of(path: Path) -> list[str] | None:
    cells = read_header(path)
    return _unique(cells) if cells else None


def _read_fast(path: Path, header: list[str]) -> CsvTable | None:
    """polars' own reader; None where a row has more cells than the header."""
    try:
        df = pl.read_csv(path, has_header=True, new_columns=header, infer_schema=False,
                         encoding="utf8-lossy", glob=False)
    except pl.exceptions.ComputeError:
        return None
    except pl.exceptions.PolarsError as exc:
        raise CaptureError(path, f"cannot be read as CSV ({_first_line(exc)})") from None
    if df.width != len(header):
        return None
    df = df.with_row_index("row").select(
        pl.col("row").cast(pl.Int64), *[_clean(pl.col(name)).alias(name) for name in header])
    blank = pl.all_horizontal(pl.col(name).is_null() for name in header)
    short = pl.col(header[-1]).is_null() & ~blank
    bad = int(df.select(short.sum()).item())
    return CsvTable(path=path, header=header, cells=df.filter(~blank & ~short), bad_rows=bad)


def _read_lines(path: Path, header: list[str]) -> CsvTable:
    """Split lines into cells, vectorised (lines with quotes go through :mod:`csv`),
    counting the rows whose number of cells differs from the header's."""
    try:
        lines = pl.read_csv(
            path, has_header=False, new_columns=["line"], separator="\x00", quote_char=None,
            schema={"line": pl.String}, encoding="utf8-lossy", glob=False,
        )
    except pl.exceptions.PolarsError as exc:
        raise CaptureError(path, f"cannot be read as CSV ({_first_line(exc)})") from None
    lines = lines.with_row_index("row").filter(
        pl.col("line").is_not_null() & (pl.col("line").str.strip_chars() != "")
    )
    data = lines.slice(1)
    has_quote = pl.col("line").str.contains('"', literal=True)
    quoted = data.filter(has_quote)
    plain = data.filter(~has_quote).select("row", cells=pl.col("line").str.split(","))
    if quoted.height:
        parsed = [next(csv.reader([line]), []) for line in quoted["line"]]
        quoted = pl.DataFrame({"row": quoted["row"], "cells": parsed},
                              schema={"row": pl.UInt32, "cells": pl.List(pl.String)})
        plain = pl.concat([plain, quoted]).sort("row")
    width = len(header)
    count = pl.col("cells").list.len()
    fits = (count == width) | ((count == width + 1) & (pl.col("cells").list.last() == ""))
    good = plain.filter(fits)
    cells = good.select(
        pl.col("row").cast(pl.Int64),
        *[_clean(pl.col("cells").list.get(i, null_on_oob=True)).alias(name)
          for i, name in enumerate(header)],
    )
    bad = plain.height - good.height
    if header[-1] in _REQUIRED_LAST:
        missing = cells.filter(pl.col(header[-1]).is_null()).height
        cells, bad = cells.filter(pl.col(header[-1]).is_not_null()), bad + missing
    return CsvTable(path=path, header=header, cells=cells, bad_rows=bad)


def read_kind(path: Path, allow_empty: bool = False) -> tuple[str, pl.DataFrame, list[str]]:
    """(kind, intermediate frame, warnings) of one profiler CSV, or a CaptureError (also
    where every row was skipped, unless ``allow_empty``: ``--follow`` reading new lines of
    a file whose earlier rows were readable)."""
    table = read_table(path)
    kind = classify_header(table.header)
    if kind is None:
        raise CaptureError(path, "not an Ascend profiler memory CSV (unknown header)")
    reader = {RECORD: _records, OPERATOR: _operators, MODULE: _modules, STATIC: _static,
              NPU_MEM: _npu_mem}[kind]
    df, skipped = reader(table)
    if table.bad_rows:
        table.warnings.append(
            f"{path.name}: {table.bad_rows} rows with missing or extra cells skipped")
    for reason, n in skipped.items():
        if n:
            table.warnings.append(f"{path.name}: {n} rows skipped ({reason})")
    mangled = _excel_cells(table)
    if mangled:
        table.warnings.append(
            f"{path.name}: {mangled} numbers were rewritten by Excel in scientific notation "
            "(e.g. 1.69512E+15); they are read as written, so their times are approximate")
    total = table.cells.height + table.bad_rows
    if df.is_empty() and total and not allow_empty:
        raise CaptureError(path, f"no readable rows: all {total} rows were skipped "
                                 f"({'; '.join(table.warnings) or 'bad cells'})")
    if total == 0:
        table.warnings.append(f"{path.name}: holds a header and no rows")
    return kind, df, table.warnings


# -- cells into values -------------------------------------------------------------------

def _clean(expr: pl.Expr) -> pl.Expr:
    stripped = expr.str.strip_chars()
    return pl.when(stripped.is_in(_MISSING)).then(None).otherwise(stripped)


def _ns(name: str | None) -> pl.Expr:
    """A µs decimal string as int ns, digit-exact; scientific notation via float."""
    if name is None:
        return pl.lit(None, dtype=pl.Int64)
    cell = pl.col(name)
    parts = cell.str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    digits = parts.struct.field("field_1").fill_null("")
    digits_ok = (digits == "") | digits.cast(pl.UInt64, strict=False).is_not_null()
    frac = digits.str.pad_end(3, "0").str.slice(0, 3).cast(pl.Int64, strict=False)
    sign = pl.when(cell.str.starts_with("-")).then(-1).otherwise(1)
    exact = whole * 1000 + sign * frac
    approx = (cell.cast(pl.Float64, strict=False) * 1000).round(0).cast(pl.Int64, strict=False)
    return pl.when(whole.is_not_null() & digits_ok).then(exact).otherwise(approx)


_BYTES_MAX = 2.0**62


def _bytes(name: str | None, non_negative: bool = False) -> pl.Expr:
    """A size cell in the unit its header names, as int bytes; null where it is not a
    finite number below 2**62 (NaN, inf, 1e300), or negative where ``non_negative``."""
    if name is None:
        return pl.lit(None, dtype=pl.Int64)
    factor = next((f for suffix, f in _UNITS.items() if name.endswith(suffix)), 1)
    value = (pl.col(name).cast(pl.Float64, strict=False) * factor).round(0)
    low = 0.0 if non_negative else -_BYTES_MAX
    usable = value.is_finite() & (value >= low) & (value < _BYTES_MAX)
    return pl.when(usable).then(value).cast(pl.Int64, strict=False)


def _int(name: str | None) -> pl.Expr:
    if name is None:
        return pl.lit(None, dtype=pl.Int64)
    cell = pl.col(name)
    number = cell.cast(pl.Float64, strict=False).round(0)
    return pl.when(cell.str.contains(r"^-?\d+$")).then(cell.cast(pl.Int64, strict=False)).otherwise(
        pl.when(number.is_finite() & (number.abs() < _BYTES_MAX)).then(number)
        .cast(pl.Int64, strict=False))


def _unreadable(name: str | None, parsed: pl.Expr) -> pl.Expr:
    """True where the cell holds something but it did not parse."""
    if name is None:
        return pl.lit(False)
    return pl.col(name).is_not_null() & parsed.is_null()


def _device(table: CsvTable) -> tuple[pl.Expr, pl.Expr]:
    """(device index, is-not-an-NPU) from ``NPU:<n>`` in Device Type/Device, or Device_id."""
    named = "Device Type" if table.has("Device Type") else ("Device" if table.has("Device")
                                                            else None)
    by_id = _int("Device_id") if table.has("Device_id") else pl.lit(None, dtype=pl.Int64)
    if named is None:
        return by_id, pl.lit(False)
    npu = pl.col(named).str.strip_prefix("NPU:").cast(pl.Int64, strict=False)
    device = npu.fill_null(by_id)
    return device, pl.col(named).is_not_null() & npu.is_null() & by_id.is_null()


def _select(table: CsvTable, columns: dict[str, pl.Expr],
            checks: dict[str, pl.Expr]) -> tuple[pl.DataFrame, dict[str, int]]:
    """Compute ``columns``; drop the rows any check flags, counting them by reason."""
    df = table.cells.with_columns(
        **{f"__bad{i}": check for i, check in enumerate(checks.values())},
        **{f"__v_{name}": expr for name, expr in columns.items()},
    )
    counts = {}
    bad_any = pl.lit(False)
    for i, reason in enumerate(checks):
        flag = pl.col(f"__bad{i}")
        counts[reason] = int(df.select((flag & ~bad_any).sum()).item())
        bad_any = bad_any | flag
    kept = df.filter(~bad_any).select(
        **{name: pl.col(f"__v_{name}") for name in columns}
    )
    return kept, counts


# -- the five kinds ----------------------------------------------------------------------

def _records(table: CsvTable) -> tuple[pl.DataFrame, dict[str, int]]:
    ts_col = "Timestamp(us)"
    alloc = table.column("Total Allocated(")
    reserved = table.column("Total Reserved(")
    active = table.column("Total Active(")
    stream = "Stream Ptr" if table.has("Stream Ptr") else None
    device, not_npu = _device(table)
    ts = _ns(ts_col)
    columns = {
        "ts": ts, "seq": pl.col("row"), "dev": device, "component": pl.col("Component"),
        "allocated": _bytes(alloc, True), "reserved": _bytes(reserved, True),
        "active": _bytes(active, True), "stream": _int(stream),
    }
    checks = {
        "missing or unreadable timestamp": ts.is_null(),
        "no component": pl.col("Component").is_null(),
        "not an NPU device": not_npu,
        "unreadable number": _unreadable(
            alloc, _bytes(alloc, True)) | _unreadable(reserved, _bytes(reserved, True))
        | _unreadable(active, _bytes(active, True)),
    }
    df, counts = _select(table, columns, checks)
    return frames.conform_records(df), counts


def _operators(table: CsvTable) -> tuple[pl.DataFrame, dict[str, int]]:
    msprof = table.has("Device_id") and table.column("Allocation Total Allocated(KB)") is not None
    alloc_t = _ns("Allocation Time(us)")
    duration = _ns(table.column("Duration(us)"))
    # msprof files have no release time: release = allocation + duration.
    free_t = _ns("Release Time(us)") if table.has("Release Time(us)") else alloc_t + duration
    size = _bytes("Size(KB)")
    name = pl.col("Name")
    device, not_npu = _device(table)
    is_cann = name.str.starts_with("cann::").fill_null(False)
    columns = {
        "seq": pl.col("row"), "dev": device, "name": name, "size": size,
        "ts_alloc": alloc_t, "ts_free": free_t,
        "ts_active_free": _ns(table.column("Active Release Time(us)")),
        "alloc_allocated": _bytes(table.column("Allocation Total Allocated(")),
        "alloc_reserved": _bytes(table.column("Allocation Total Reserved(")),
        "alloc_active": _bytes(table.column("Allocation Total Active(")),
        "free_allocated": _bytes(table.column("Release Total Allocated(")),
        "free_reserved": _bytes(table.column("Release Total Reserved(")),
        "free_active": _bytes(table.column("Release Total Active(")),
        "stream": _int(table.column("Stream Ptr")),
        "pool": pl.when(is_cann | pl.lit(msprof)).then(pl.lit("GE")).otherwise(None),
    }
    checks = {
        "missing or unreadable size": size.is_null(),
        "unreadable time": _unreadable("Allocation Time(us)", alloc_t)
        | _unreadable(table.column("Release Time(us)"), _ns(table.column("Release Time(us)"))),
        "not an NPU device": not_npu,
    }
    df, counts = _select(table, columns, checks)
    return frames.conform_operators(df), counts


def _modules(table: CsvTable) -> tuple[pl.DataFrame, dict[str, int]]:
    reserved = table.column("Total Reserved(")
    ts = _ns("Timestamp(us)")
    device, not_npu = _device(table)
    columns = {"ts": ts, "dev": device, "module": pl.col("Component"),
               "reserved": _bytes(reserved)}
    checks = {
        "missing or unreadable timestamp": ts.is_null(),
        "no component": pl.col("Component").is_null(),
        "missing or unreadable size": _bytes(reserved).is_null(),
        "not an NPU device": not_npu,
    }
    df, counts = _select(table, columns, checks)
    return frames.conform_modules(df), counts


def _static(table: CsvTable) -> tuple[pl.DataFrame, dict[str, int]]:
    size = _bytes("Size(KB)")
    start, end = _int("Node Index Start"), _int("Node Index End")
    columns = {
        "dev": _int("Device_id") if table.has("Device_id") else pl.lit(None, dtype=pl.Int64),
        "name": pl.col("Op Name"),
        "model": pl.col("Model Name") if table.has("Model Name") else pl.lit(None, pl.String),
        "graph": pl.col("Graph ID"), "start": start, "end": end, "size": size,
    }
    checks = {
        "missing or unreadable size": size.is_null(),
        "missing or unreadable node index": start.is_null() | end.is_null(),
        "no graph id": pl.col("Graph ID").is_null(),
    }
    df, counts = _select(table, columns, checks)
    return frames.conform_static(df), counts


def _npu_mem(table: CsvTable) -> tuple[pl.DataFrame, dict[str, int]]:
    """msprof npu_mem: its ``APP`` rows are the App Reserved records (memory = ddr + hbm)."""
    memory = table.column("memory(")
    ts = _ns("timestamp(us)")
    device, not_npu = _device(table)
    app = table.cells.filter(pl.col("event").str.to_uppercase() == "APP")
    table = CsvTable(path=table.path, header=table.header, cells=app, bad_rows=table.bad_rows)
    columns = {"ts": ts, "seq": pl.col("row"), "dev": device, "component": pl.lit("APP"),
               "reserved": _bytes(memory)}
    checks = {
        "missing or unreadable timestamp": ts.is_null(),
        "missing or unreadable size": _bytes(memory).is_null(),
        "not an NPU device": not_npu,
    }
    df, counts = _select(table, columns, checks)
    return frames.conform_records(df), counts


def _excel_cells(table: CsvTable) -> int:
    """How many cells hold a number in scientific notation (Excel's rewriting)."""
    numeric = [c for c in table.header if c.endswith("(us)") or c == "Stream Ptr"]
    if not numeric or table.cells.is_empty():
        return 0
    sci = r"^-?\d+(?:\.\d+)?[eE][+-]?\d+$"
    return int(table.cells.select(
        pl.sum_horizontal(pl.col(c).str.contains(sci).fill_null(False).cast(pl.Int64)
                          for c in numeric).sum()
    ).item())


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}.{n}")
    return out


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
