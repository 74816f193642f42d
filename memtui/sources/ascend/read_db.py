"""The Ascend profiler's memory DBs, read into the source's intermediate frames.

Owns ``ascend_pytorch_profiler[_N].db`` (and the MindSpore twin) and msprof's
``msprof_*.db`` (../shared/formats/ascend_profiler.md section 4).  Tables read:
MEMORY_RECORD, OP_MEMORY, NPU_MEM (its ``app`` rows: the App Reserved records, ddr + hbm),
NPU_MODULE_MEM with ENUM_MODULE, and, only where neither MEMORY_RECORD nor OP_MEMORY
exists (msprof DBs), NPU_OP_MEM: GE allocate/release events.  Names are joined from
STRING_IDS; NPU_MEM/NPU_OP_MEM ``type`` from the legacy ENUM_MEMORY table where it exists.
Rank and host come from RANK_DEVICE_MAP, HOST_INFO and NPU_INFO; SESSION_TIME_INFO is kept
as metadata.  Units are already bytes and ns.  The file is opened read-only.

Two normalisations so that a DB and the CSVs of the same run agree: GE rows of
MEMORY_RECORD carry ``totalActive = 0`` where the CSV leaves the cell empty (null here),
and a release time of 0 means "not released" (null), as Insight shows it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memtui.errors import CaptureError
from memtui.sources.ascend import frames
from memtui.sources.common.sqlite import read_consistently, sqlite_problem


@dataclass
class DbData:
    """What one DB holds for the memory views."""

    records: pl.DataFrame
    operators: pl.DataFrame
    op_events: pl.DataFrame
    modules: pl.DataFrame
    rank_of_device: dict[int, int] = field(default_factory=dict)
    host: str | None = None
    chips: dict[int, str] = field(default_factory=dict)
    session: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def read_db(path: Path) -> DbData:
    """Read the memory tables of one DB, or raise a CaptureError naming what is wrong."""
    try:
        return read_consistently(path, lambda connection: _Reader(path, connection).read())
    except sqlite3.Error as exc:
        raise CaptureError(path, f"not a readable profiler database: {sqlite_problem(exc)}"
                           ) from None


class _Reader:
    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self.db = connection
        self.warnings: list[str] = []
        self.tables = self._readable_tables()

    def read(self) -> DbData:
        records = self._records()
        operators = self._operators()
        op_events = frames.empty("op_events")
        if "MEMORY_RECORD" not in self.tables and "OP_MEMORY" not in self.tables:
            op_events = self._op_events()
        app = self._app_records(start_seq=records.height)
        return DbData(
            records=pl.concat([records, app]),
            operators=operators,
            op_events=op_events,
            modules=self._modules(),
            rank_of_device=self._rank_map(),
            host=self._host(),
            chips=self._chips(),
            session=self._session(),
            warnings=self.warnings,
        )

    # -- helpers -------------------------------------------------------------------------

    def _readable_tables(self) -> set[str]:
        """Tables and views, but no recursive view (it could run forever)."""
        names = set()
        for name, kind, sql in self.db.execute(
                "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view')"):
            if kind == "view" and "recursive" in (sql or "").lower():
                self.warnings.append(f"{self.path.name}: {name} is a recursive view: not read")
                continue
            names.add(name)
        return names

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self.db.execute(f'PRAGMA table_info("{table}")')}

    def _col(self, table: str, alias: str, column: str) -> str:
        """``alias.column`` if the table has it, else NULL (schemas differ by version)."""
        return f"{alias}.{column}" if column in self._columns(table) else "NULL"

    def _name(self, table: str, alias: str, column: str, lookup: str = "STRING_IDS") -> tuple:
        """(select expression, join clause) decoding an id column through ``lookup``."""
        if column not in self._columns(table):
            return "NULL", ""
        if lookup not in self.tables:
            return f"CAST({alias}.{column} AS TEXT)", ""
        value = "name" if lookup.startswith("ENUM_") else "value"
        join_alias = f"j_{column}"
        return (f"COALESCE({join_alias}.{value}, CAST({alias}.{column} AS TEXT))",
                f"LEFT JOIN {lookup} {join_alias} ON {join_alias}.id = {alias}.{column}")

    def _frame(self, sql: str, schema: dict) -> pl.DataFrame:
        rows = self.db.execute(sql).fetchall()
        return pl.DataFrame(rows, schema=list(schema), orient="row", strict=False,
                            infer_schema_length=None).cast(schema, strict=False)

    def _type_lookup(self) -> str:
        return "ENUM_MEMORY" if "ENUM_MEMORY" in self.tables else "STRING_IDS"

    # -- tables --------------------------------------------------------------------------

    def _records(self) -> pl.DataFrame:
        if "MEMORY_RECORD" not in self.tables:
            return frames.empty("records")
        t = "MEMORY_RECORD"
        component, join = self._name(t, "m", "component")
        sql = (f"SELECT {self._col(t, 'm', 'timestamp')}, m.rowid, "
               f"{self._col(t, 'm', 'deviceId')}, {component}, "
               f"{self._col(t, 'm', 'totalAllocated')}, {self._col(t, 'm', 'totalReserved')}, "
               f"{self._col(t, 'm', 'totalActive')}, {self._col(t, 'm', 'streamPtr')} "
               f"FROM {t} m {join} ORDER BY m.rowid")
        df = self._frame(sql, frames.RECORDS)
        df = df.with_columns(
            seq=pl.int_range(0, pl.len(), dtype=pl.Int64),
            active=pl.when(pl.col("component") == "GE").then(None).otherwise(pl.col("active")),
        )
        return self._drop_untimed(df, "ts", "MEMORY_RECORD")

    def _app_records(self, start_seq: int) -> pl.DataFrame:
        if "NPU_MEM" not in self.tables:
            return frames.empty("records")
        t = "NPU_MEM"
        kind, join = self._name(t, "n", "type", self._type_lookup())
        sql = (f"SELECT {self._col(t, 'n', 'timestampNs')}, {self._col(t, 'n', 'deviceId')}, "
               f"COALESCE({self._col(t, 'n', 'ddr')}, 0) + COALESCE({self._col(t, 'n', 'hbm')}, 0)"
               f" FROM {t} n {join} WHERE lower({kind}) = 'app' ORDER BY n.rowid")
        rows = self.db.execute(sql).fetchall()
        df = pl.DataFrame(rows, schema=["ts", "dev", "reserved"], orient="row", strict=False,
                          infer_schema_length=None)
        df = df.with_columns(
            pl.col("ts").cast(pl.Int64, strict=False), pl.col("dev").cast(pl.Int64, strict=False),
            reserved=pl.col("reserved").cast(pl.Float64, strict=False).round(0).cast(pl.Int64),
            component=pl.lit("APP"),
            seq=pl.int_range(start_seq, start_seq + pl.len(), dtype=pl.Int64),
        )
        return self._drop_untimed(frames.conform_records(df), "ts", "NPU_MEM")

    def _operators(self) -> pl.DataFrame:
        if "OP_MEMORY" not in self.tables:
            return frames.empty("operators")
        t = "OP_MEMORY"
        name, join = self._name(t, "o", "name")
        cols = ["size", "allocationTime", "releaseTime", "activeReleaseTime",
                "allocationTotalAllocated", "allocationTotalReserved", "allocationTotalActive",
                "releaseTotalAllocated", "releaseTotalReserved", "releaseTotalActive",
                "streamPtr", "deviceId"]
        select = ", ".join(self._col(t, "o", c) for c in cols)
        rows = self.db.execute(
            f"SELECT o.rowid, {name}, {select} FROM {t} o {join} ORDER BY o.rowid").fetchall()
        schema = ["seq", "name", "size", "ts_alloc", "ts_free", "ts_active_free",
                  "alloc_allocated", "alloc_reserved", "alloc_active", "free_allocated",
                  "free_reserved", "free_active", "stream", "dev"]
        df = pl.DataFrame(rows, schema=schema, orient="row", strict=False,
                          infer_schema_length=None)
        numeric = [c for c in schema if c != "name"]
        df = df.with_columns(
            [pl.col(c).cast(pl.Float64, strict=False).round(0).cast(pl.Int64) for c in numeric]
        ).with_columns(
            seq=pl.int_range(0, pl.len(), dtype=pl.Int64),
            ts_free=_zero_is_null("ts_free"), ts_active_free=_zero_is_null("ts_active_free"),
            ts_alloc=_zero_is_null("ts_alloc"),
            pool=pl.when(pl.col("stream").is_null()).then(pl.lit("GE")).otherwise(None),
        )
        return frames.conform_operators(df)

    def _op_events(self) -> pl.DataFrame:
        if "NPU_OP_MEM" not in self.tables:
            return frames.empty("op_events")
        t = "NPU_OP_MEM"
        name, join_name = self._name(t, "n", "operatorName")
        kind, join_kind = self._name(t, "n", "type", self._type_lookup())
        sql = (f"SELECT {self._col(t, 'n', 'timestampNs')}, n.rowid, "
               f"{self._col(t, 'n', 'deviceId')}, {name}, {self._col(t, 'n', 'addr')}, "
               f"lower({kind}), {self._col(t, 'n', 'size')}, "
               f"{self._col(t, 'n', 'totalAllocate')}, {self._col(t, 'n', 'totalReserve')} "
               f"FROM {t} n {join_name} {join_kind} ORDER BY n.rowid")
        df = self._frame(sql, {**frames.OP_EVENTS, "addr": pl.Int64})
        df = df.with_columns(
            seq=pl.int_range(0, pl.len(), dtype=pl.Int64),
            action=pl.col("action").replace_strict(
                {"allocate": "alloc", "release": "free"}, default=None),
            size=pl.col("size").abs(),
            addr=pl.col("addr").cast(pl.UInt64, strict=False),
        )
        unknown = df.filter(pl.col("action").is_null()).height
        if unknown:
            self.warnings.append(
                f"{self.path.name}: {unknown} NPU_OP_MEM rows of an unknown type skipped")
        return self._drop_untimed(frames.conform_op_events(df.filter(
            pl.col("action").is_not_null())), "ts", "NPU_OP_MEM")

    def _modules(self) -> pl.DataFrame:
        if "NPU_MODULE_MEM" not in self.tables:
            return frames.empty("modules")
        t = "NPU_MODULE_MEM"
        module, join = self._name(t, "m", "moduleId", "ENUM_MODULE")
        sql = (f"SELECT {self._col(t, 'm', 'timestampNs')}, {self._col(t, 'm', 'deviceId')}, "
               f"{module}, {self._col(t, 'm', 'totalReserved')} FROM {t} m {join} "
               f"ORDER BY m.rowid")
        rows = self.db.execute(sql).fetchall()
        df = pl.DataFrame(rows, schema=["ts", "dev", "module", "reserved"], orient="row",
                          strict=False, infer_schema_length=None)
        df = df.with_columns(
            pl.col("reserved").cast(pl.Float64, strict=False).round(0).cast(pl.Int64))
        return self._drop_untimed(frames.conform_modules(df), "ts", "NPU_MODULE_MEM")

    def _drop_untimed(self, df: pl.DataFrame, column: str, table: str) -> pl.DataFrame:
        bad = df.filter(pl.col(column).is_null()).height
        if bad:
            self.warnings.append(f"{self.path.name}: {bad} {table} rows without a time skipped")
            df = df.filter(pl.col(column).is_not_null())
        return df

    # -- who and where -------------------------------------------------------------------

    def _rank_map(self) -> dict[int, int]:
        if "RANK_DEVICE_MAP" not in self.tables:
            return {}
        rows = self.db.execute("SELECT DISTINCT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall()
        return {int(dev): int(rank) for rank, dev in rows
                if _is_int(rank) and _is_int(dev) and int(rank) >= 0 and int(dev) >= 0}

    def _host(self) -> str | None:
        if "HOST_INFO" not in self.tables or "hostName" not in self._columns("HOST_INFO"):
            return None
        row = self.db.execute("SELECT hostName FROM HOST_INFO LIMIT 1").fetchone()
        return str(row[0]) if row and row[0] not in (None, "") else None

    def _chips(self) -> dict[int, str]:
        if "NPU_INFO" not in self.tables:
            return {}
        rows = self.db.execute("SELECT id, name FROM NPU_INFO").fetchall()
        return {int(i): str(n) for i, n in rows if _is_int(i) and int(i) >= 0 and n}

    def _session(self) -> dict[str, int]:
        if "SESSION_TIME_INFO" not in self.tables:
            return {}
        cursor = self.db.execute("SELECT * FROM SESSION_TIME_INFO LIMIT 1")
        row = cursor.fetchone()
        if not row:
            return {}
        names = [d[0] for d in cursor.description]
        return {n: int(v) for n, v in zip(names, row, strict=True) if _is_int(v)}


def _zero_is_null(column: str) -> pl.Expr:
    return pl.when(pl.col(column) > 0).then(pl.col(column)).otherwise(None)


def _is_int(value) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True
