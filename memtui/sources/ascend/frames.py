"""The Ascend profiler source's intermediate frames: what the CSV and DB readers produce.

Both readers (``ascend_csv.py``, ``ascend_db.py``) bring their rows to these shapes, with
absolute times in int nanoseconds, sizes in int bytes and ``dev`` the NPU index (null
where a file names no device, such as static_op_mem's ``host``); ``ascend_build.py`` turns
them into the canonical model.

* records (memory_record rows, DB MEMORY_RECORD and NPU_MEM ``app`` rows): ``ts, seq,
  dev, component, allocated, reserved, active, stream``;
* operators (operator_memory rows, DB OP_MEMORY): ``seq, dev, name, size`` (negative: a
  release without its allocation), ``ts_alloc, ts_free, ts_active_free``, the pool totals
  at allocation and release ``alloc_allocated ... free_active``, ``stream``, ``pool``;
* op_events (msprof DB NPU_OP_MEM: GE allocate/release events): ``ts, seq, dev, name,
  addr, action`` ("alloc" / "free"), ``size, allocated, reserved``;
* modules (npu_module_mem, DB NPU_MODULE_MEM): ``ts, dev, module, reserved``;
* static (static_op_mem): ``dev, name, model, graph, start, end, size``.
"""

from __future__ import annotations

import polars as pl

RECORDS = {
    "ts": pl.Int64, "seq": pl.Int64, "dev": pl.Int64, "component": pl.String,
    "allocated": pl.Int64, "reserved": pl.Int64, "active": pl.Int64, "stream": pl.Int64,
}
OPERATORS = {
    "seq": pl.Int64, "dev": pl.Int64, "name": pl.String, "size": pl.Int64,
    "ts_alloc": pl.Int64, "ts_free": pl.Int64, "ts_active_free": pl.Int64,
    "alloc_allocated": pl.Int64, "alloc_reserved": pl.Int64, "alloc_active": pl.Int64,
    "free_allocated": pl.Int64, "free_reserved": pl.Int64, "free_active": pl.Int64,
    "stream": pl.Int64, "pool": pl.String,
}
OP_EVENTS = {
    "ts": pl.Int64, "seq": pl.Int64, "dev": pl.Int64, "name": pl.String, "addr": pl.UInt64,
    "action": pl.String, "size": pl.Int64, "allocated": pl.Int64, "reserved": pl.Int64,
}
MODULES = {"ts": pl.Int64, "dev": pl.Int64, "module": pl.String, "reserved": pl.Int64}
STATIC = {
    "dev": pl.Int64, "name": pl.String, "model": pl.String, "graph": pl.String,
    "start": pl.Int64, "end": pl.Int64, "size": pl.Int64,
}
KINDS = {"records": RECORDS, "operators": OPERATORS, "op_events": OP_EVENTS,
         "modules": MODULES, "static": STATIC}


def conform_to(df: pl.DataFrame | None, schema: dict) -> pl.DataFrame:
    """``df`` with exactly ``schema``'s columns (missing ones as nulls), cast."""
    if df is None:
        return pl.DataFrame(schema=schema)
    return df.select([
        pl.col(c).cast(t, strict=False) if c in df.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in schema.items()
    ])


def empty(kind: str) -> pl.DataFrame:
    return pl.DataFrame(schema=KINDS[kind])


def conform_records(df: pl.DataFrame) -> pl.DataFrame:
    return conform_to(df, RECORDS)


def conform_operators(df: pl.DataFrame) -> pl.DataFrame:
    return conform_to(df, OPERATORS)


def conform_op_events(df: pl.DataFrame) -> pl.DataFrame:
    return conform_to(df, OP_EVENTS)


def conform_modules(df: pl.DataFrame) -> pl.DataFrame:
    return conform_to(df, MODULES)


def conform_static(df: pl.DataFrame) -> pl.DataFrame:
    return conform_to(df, STATIC)
