"""Load time of the Ascend profiler source against a bare polars read of the same CSVs.

Writes a synthetic rank (``memory_record.csv`` with PTA, GE, PTA+GE and APP rows, and
``operator_memory.csv``) into a temporary folder, then prints the seconds of a plain
``polars.read_csv`` of both files (all cells as strings) and of ``open_capture`` on the
folder, and their ratio, best of three.

    PYTHONPATH=. /tmp/venv/bin/python benchmarks/bench_ascend_profiler.py [ROWS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from memtui.sources import open_capture

RECORD_HEADER = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                 "Total Active(MB)", "Stream Ptr", "Device Type"]
OPERATOR_HEADER = [
    "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
    "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
    "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)",
    "Stream Ptr", "Device Type"]


def us(ns: np.ndarray) -> pl.Series:
    """torch_npu's µs strings: three decimals and a TAB."""
    return pl.Series([f"{v // 1000}.{v % 1000:03d}\t" for v in ns.tolist()])


def write_rank(folder: Path, rows: int) -> None:
    out = folder / "bench_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rng = np.random.default_rng(0)
    ts = 1_736_408_883_000_000_000 + np.cumsum(rng.integers(100, 5000, rows))
    alloc = (rng.random(rows) * 4000).round(4)
    components = np.array(["PTA", "PTA+GE", "GE", "PTA+GE", "APP"])[np.arange(rows) % 5]
    records = pl.DataFrame({
        RECORD_HEADER[0]: components, RECORD_HEADER[1]: us(ts),
        RECORD_HEADER[2]: alloc.astype(str), RECORD_HEADER[3]: (alloc + 500).astype(str),
        RECORD_HEADER[4]: alloc.astype(str), RECORD_HEADER[5]: ["897357296"] * rows,
        RECORD_HEADER[6]: ["NPU:0"] * rows,
    })
    records.write_csv(out / "memory_record.csv", line_terminator="\r\n")
    n_ops = rows // 4
    start = ts[: n_ops]
    ops = pl.DataFrame({
        OPERATOR_HEADER[0]: ["aten::empty_strided"] * n_ops,
        OPERATOR_HEADER[1]: (rng.random(n_ops) * 10000).round(1).astype(str),
        OPERATOR_HEADER[2]: us(start), OPERATOR_HEADER[3]: us(start + 5000),
        OPERATOR_HEADER[4]: us(start + 4000), OPERATOR_HEADER[5]: ["5.000\t"] * n_ops,
        OPERATOR_HEADER[6]: ["4.000\t"] * n_ops,
        **{h: alloc[:n_ops].astype(str) for h in OPERATOR_HEADER[7:13]},
        OPERATOR_HEADER[13]: ["897357296"] * n_ops, OPERATOR_HEADER[14]: ["NPU:0"] * n_ops,
    })
    ops.write_csv(out / "operator_memory.csv", line_terminator="\r\n")


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        write_rank(Path(tmp), rows)
        out = Path(tmp) / "bench_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        bare = best(lambda: [pl.read_csv(out / n, infer_schema=False)
                             for n in ("memory_record.csv", "operator_memory.csv")])
        load = best(lambda: open_capture(Path(tmp) / "bench_ascend_pt"))
    print(f"rows={rows} bare_read={bare:.3f}s load={load:.3f}s ratio={load / bare:.2f}")


if __name__ == "__main__":
    main()
