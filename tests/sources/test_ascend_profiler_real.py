"""Ascend profiler source on the real files in ../shared/data/profiler (skipped where absent).

Each file is opened alone, then laid out in a temporary folder the way the profiler
writes it (SOURCES.md gives the original paths).  Expected figures are either worked out
here from the files with the standard library (csv + Decimal, sqlite3), independently of
the source, or are the numbers MindStudio Insight's own unit tests expect of the same
fixtures (server/src/test/modules/memory/database/TextMemoryDatabaseTest.cpp), quoted in
../shared/formats/ascend_profiler.md and repeated next to each check.
"""

from __future__ import annotations

import csv
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.summary import summary
from memtui.model import validate
from memtui.sources import ascend, open_capture

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "profiler"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent (shared data)")
MIB = 1 << 20
KIB = 1 << 10


def data_files() -> list[str]:
    if not DATA.is_dir():
        return []
    return sorted(p.name for p in DATA.iterdir()
                  if p.name != "SOURCES.md" and not p.name.endswith(("-wal", "-shm")))


def lay_out(tmp: Path, root: str, files: dict[str, str]) -> Path:
    """Copy ``{prefixed name: path under root}`` to where the profiler writes them."""
    for name, where in files.items():
        target = tmp / root / where
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / name, target)
    return tmp / root


def rows_of(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="", encoding="utf-8") as handle:
        return [{k.strip(): (v or "").strip() for k, v in row.items()}
                for row in csv.DictReader(handle)]


def mib(cell: str) -> int:
    return int(Decimal(cell) * MIB)


def ns(cell: str) -> int:
    return int(Decimal(cell) * 1000)


def overall(trace, device: str, name: str) -> pl.DataFrame:
    return trace.curves.filter(
        (pl.col("device") == device) & (pl.col("series") == name)
        & pl.col("component").is_null() & pl.col("stream").is_null())


def by_hand_from_csv(name: str) -> dict[str, int]:
    """Peak and end figures of the PTA+GE rows, computed with csv and Decimal."""
    rows = [r for r in rows_of(name) if r["Component"] == "PTA+GE"]
    last = max(enumerate(rows), key=lambda ir: (ns(ir[1]["Timestamp(us)"]), ir[0]))[1]
    return {"peak": max(mib(r["Total Allocated(MB)"]) for r in rows),
            "alloc_end": mib(last["Total Allocated(MB)"]),
            "resv_end": mib(last["Total Reserved(MB)"]), "rows": len(rows)}


@pytest.mark.parametrize("name", data_files())
def test_every_file_opens_alone(name):
    path = DATA / name
    assert ascend.sniff(path)
    trace = open_capture(path)
    validate(trace)
    summary(trace)


# -- torch_npu text export ---------------------------------------------------------------

def test_pt_text_level1_laid_out(tmp_path):
    root = lay_out(tmp_path, "rank0_ascend_pt", {
        "pt_text_l1_rank0__profiler_info_0.json": "profiler_info_0.json",
        "pt_text_l1_rank0__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "pt_text_l1_rank0__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
        "pt_text_l1_rank0__npu_module_mem.csv": "ASCEND_PROFILER_OUTPUT/npu_module_mem.csv",
    })
    trace = open_capture(root)
    validate(trace)
    device = "rank0/npu0"
    assert trace.meta.device_names == [device]
    start = trace.meta.extra["rank_start_ns"][device]
    assert start == 1736408883573957920  # the first APP row
    hand = by_hand_from_csv("pt_text_l1_rank0__memory_record.csv")
    d = summary(trace)["devices"][0]
    assert d["events"] == len(rows_of("pt_text_l1_rank0__memory_record.csv")) == 1004
    assert d["blocks"] == len(rows_of("pt_text_l1_rank0__operator_memory.csv")) == 184
    assert (d["peak_allocated_bytes"], d["allocated_at_end_bytes"],
            d["reserved_at_end_bytes"]) == (hand["peak"], hand["alloc_end"], hand["resv_end"])
    assert overall(trace, device, "Operators Allocated").height == hand["rows"] == 495
    # The merge example of the formats notes: 1060.196 = 49.125 (GE) + 1011.071 (last PTA).
    point = overall(trace, device, "Operators Allocated").filter(
        pl.col("t") == 1736408883704614040 - start)
    assert point["bytes"].to_list() == [mib("49.125") + mib("1011.0712890625")]
    assert mib("1060.1962890625") == point["bytes"][0]
    # blocks: a row with all times, one alive at the end, a GE one.
    blocks = trace.blocks
    conv = blocks.filter(pl.col("owner") == "aten::_convolution").row(0, named=True)
    assert conv["size"] == int(Decimal("25009.5") * KIB)
    assert conv["t_alloc"] == 1736408883702735700 - start
    assert conv["t_free"] == 1736408883736793940 - start
    assert conv["t_active_free"] == 1736408883736793430 - start
    cann = blocks.filter(pl.col("owner").str.starts_with("cann::"))
    assert cann["pool"].unique().to_list() == ["GE"]
    assert cann.height == sum(r["Name"].startswith("cann::")
                              for r in rows_of("pt_text_l1_rank0__operator_memory.csv"))
    alive = sum(r["Release Time(us)"] == "" for r in rows_of(
        "pt_text_l1_rank0__operator_memory.csv"))
    assert blocks["t_free"].null_count() == alive
    modules = trace.curves.filter(pl.col("series") == "Module Reserved")
    assert modules.height == len(rows_of("pt_text_l1_rank0__npu_module_mem.csv"))


def test_pt_st_level2_laid_out(tmp_path):
    root = lay_out(tmp_path, "rank_0_ascend_pt", {
        "pt_st_l2_rank0__profiler_info_0.json": "profiler_info_0.json",
        "pt_st_l2_rank0__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "pt_st_l2_rank0__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
        "pt_st_l2_rank0__npu_module_mem.csv": "ASCEND_PROFILER_OUTPUT/npu_module_mem.csv",
    })
    trace = open_capture(root)
    validate(trace)
    hand = by_hand_from_csv("pt_st_l2_rank0__memory_record.csv")
    (d,) = summary(trace)["devices"]
    assert d["device"] == "rank0/npu0"
    assert (d["events"], d["blocks"]) == (18659, 3103)
    assert (d["peak_allocated_bytes"], d["allocated_at_end_bytes"],
            d["reserved_at_end_bytes"]) == (hand["peak"], hand["alloc_end"], hand["resv_end"])
    # the 5-column npu_module_mem (Device_id first, MB)
    module_rows = rows_of("pt_st_l2_rank0__npu_module_mem.csv")
    slog = [mib(r["Total Reserved(MB)"]) for r in module_rows if r["Component"] == "SLOG"]
    got = trace.curves.filter((pl.col("series") == "Module Reserved")
                              & (pl.col("component") == "SLOG"))["bytes"].to_list()
    assert got == slog


# -- Insight's own test fixtures ---------------------------------------------------------

def test_old_format_rank0_matches_insight(tmp_path):
    root = lay_out(tmp_path, "test_rank_0", {
        "oldfmt_test_rank_0__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "oldfmt_test_rank_0__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
        "oldfmt_test_rank_0__npu_module_mem.csv": "ASCEND_PROFILER_OUTPUT/npu_module_mem.csv",
    })
    trace = open_capture(root)
    validate(trace)
    device = "npu0"
    assert trace.meta.device_names == [device]
    # QueryMemoryViewData: Overall = 5 rows x (Time, Operators Allocated, Operators
    # Reserved, App Reserved).
    rows = trace.curves.filter(pl.col("component").is_null() & pl.col("stream").is_null())
    assert set(rows["series"].unique()) == {"Operators Allocated", "Operators Reserved",
                                            "App Reserved"}
    assert rows["t"].n_unique() == 5
    # QueryMemoryEntireOperatorTable: 28 operators; QueryOperatorSizeData: 64..81984 KB.
    blocks = trace.blocks
    assert blocks.height == 28
    assert (blocks["size"].min(), blocks["size"].max()) == (64 * KIB, 81984 * KIB)
    # QueryOperatorsTotalNumWithSize: "cann::Graph_" with Size in [10, 1000] KB -> 15.
    graph = blocks.filter(pl.col("owner").str.contains("cann::Graph_", literal=True)
                          & pl.col("size").is_between(10 * KIB, 1000 * KIB))
    assert graph.height == 15
    # QueryOperatorsTotalNumWithLimitedTime: one operator alive at 1695115378729750000.
    t = 1695115378729750000 - trace.meta.extra["rank_start_ns"][device]
    live = blocks.filter((pl.col("t_alloc") <= t)
                         & (pl.col("t_free").is_null() | (pl.col("t_free") >= t)))
    assert live.height == 1
    # QueryComponentsTotalNum: 2 modules with a peak of at least 100 MB.
    peaks = trace.curves.filter(pl.col("series") == "Module Reserved").group_by(
        "component").agg(pl.col("bytes").max())
    assert peaks.filter(pl.col("bytes") >= 100 * MIB).height == 2


def test_rank1_matches_insight(tmp_path):
    root = lay_out(tmp_path, "test_rank_1", {
        "test_rank_1__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "test_rank_1__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
        "test_rank_1__static_op_mem.csv": "ASCEND_PROFILER_OUTPUT/static_op_mem.csv",
    })
    trace = open_capture(root)
    validate(trace)
    device = "npu1"
    assert trace.meta.device_names == [device]  # static_op_mem's "host" joins the one NPU
    assert any("Excel" in w for w in trace.meta.warnings)
    curves = trace.curves

    def count(series, **where):
        df = curves.filter(pl.col("series") == series)
        for column, value in where.items():
            df = df.filter(pl.col(column) == value)
        return df.height

    # QueryMemoryViewDataByComponentExpectSeveral: 145 = 29 rows x 5 legends
    # (PTA Allocated/Activated/Reserved for 2 PTA rows, App Reserved for 27 APP rows).
    assert [count(s, component="PTA") for s in ("Allocated", "Activated", "Reserved")] == [2] * 3
    assert count("Reserved", component="APP") == 27
    # QueryMemoryViewDataByStreamExpectSeveral: 1 row x (Time + 3 series of one stream).
    streams = curves.filter(pl.col("stream").is_not_null())
    assert streams["stream"].n_unique() == 1 and streams.height == 3
    # QueryOperatorsTotalNumByStreamExpectSeveral: 21 operators with a stream.
    assert trace.blocks.filter(pl.col("stream").is_not_null()).height == 21
    # QueryStaticOperatorGraph: graph 0 has 24 points, point 5 is 4.35 MB of 16.81 MB;
    # ...WithGraphId: graph 1 has 26 points, point 19 is 4.48 MB.
    for graph, points, index, size_mb in (("graph 0", 24, 5, "4.35"), ("graph 1", 26, 19,
                                                                        "4.48")):
        line = curves.filter((pl.col("series") == "Static Size")
                             & (pl.col("component") == graph)).sort("t")
        assert line.height == points
        assert f"{line['bytes'][index] / MIB:.2f}" == size_mb
    assert curves.filter((pl.col("series") == "Static Size") & (pl.col("component") == "graph 0")
                         ).sort("t")["t"][5] == 6
    total = curves.filter((pl.col("series") == "Static Total Size")
                          & (pl.col("component") == "graph 0"))["bytes"].unique().to_list()
    assert [f"{b / MIB:.2f}" for b in total] == ["16.81"]
    # QueryEntireStaticOperatorTable: 54 rows; ...WithNodeIndex: 16 of graph 0 overlap
    # [0, 10]; ...WithSizeFileter: 4 of graph 0 in [800, 3000] KB;
    # QueryStaticOperatorSizeData: 0.211914063 .. 2343.78125 KB.
    ops = trace.meta.extra["static_ops"]
    assert ops.height == 54
    graph0 = ops.filter(pl.col("graph") == "0")
    assert graph0.filter(pl.col("start") <= 10).height == 16
    assert graph0.filter(pl.col("size").is_between(800 * KIB, 3000 * KIB)).height == 4
    assert (ops["size"].min(), ops["size"].max()) == (217, int(Decimal("2343.78125") * KIB))


def test_insight_test_ranks_side_by_side(tmp_path):
    lay_out(tmp_path, "test_data/test_rank_0", {
        "oldfmt_test_rank_0__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "oldfmt_test_rank_0__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
    })
    lay_out(tmp_path, "test_data/test_rank_1", {
        "test_rank_1__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "test_rank_1__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
    })
    trace = open_capture(tmp_path / "test_data")
    validate(trace)
    assert trace.meta.device_names == ["npu0", "npu1"]
    assert [d["blocks"] for d in summary(trace)["devices"]] == [28, 21]


# -- DBs -------------------------------------------------------------------------------------

def db_figures(name: str) -> dict[str, int]:
    """Peak/end of the PTA+GE rows and counts, straight from SQL."""
    with sqlite3.connect(f"{(DATA / name).as_uri()}?mode=ro&immutable=1", uri=True) as db:
        rows = db.execute(
            "SELECT m.totalAllocated, m.totalReserved FROM MEMORY_RECORD m JOIN STRING_IDS s "
            "ON s.id = m.component WHERE s.value = 'PTA+GE' ORDER BY m.timestamp, m.rowid"
        ).fetchall()
        app = db.execute("SELECT count(*) FROM NPU_MEM n JOIN STRING_IDS s ON s.id = n.type "
                         "WHERE s.value = 'app'").fetchone()[0]
        records = db.execute("SELECT count(*) FROM MEMORY_RECORD").fetchone()[0]
        ops = db.execute("SELECT count(*) FROM OP_MEMORY").fetchone()[0]
    return {"peak": max(r[0] for r in rows), "alloc_end": rows[-1][0],
            "resv_end": rows[-1][1], "events": records + app, "blocks": ops}


def test_two_db_ranks_side_by_side(tmp_path):
    for rank in (0, 1):
        lay_out(tmp_path / "run", f"rank{rank}_ascend_pt", {
            f"pt_db_l0_rank{rank}__ascend_pytorch_profiler_{rank}.db":
                f"ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db"})
    trace = open_capture(tmp_path / "run")
    validate(trace)
    assert trace.meta.device_names == ["rank0/npu0", "rank1/npu1"]
    assert [(d.rank, d.host) for d in trace.meta.devices] == [(0, "ubuntu"), (1, "ubuntu")]
    for rank, d in enumerate(summary(trace)["devices"]):
        hand = db_figures(f"pt_db_l0_rank{rank}__ascend_pytorch_profiler_{rank}.db")
        assert (d["events"], d["blocks"]) == (hand["events"], hand["blocks"])
        assert (d["peak_allocated_bytes"], d["allocated_at_end_bytes"],
                d["reserved_at_end_bytes"]) == (hand["peak"], hand["alloc_end"],
                                                hand["resv_end"])
        device = d["device"]
        assert overall(trace, device, "Operators Allocated")["t"].min() >= 0
        assert overall(trace, device, "App Reserved").height > 0
    ge = trace.blocks.filter(pl.col("pool") == "GE")
    assert ge.height and not ge["owner"].str.starts_with("aten::").any()


def test_msprof_db_laid_out(tmp_path):
    root = lay_out(tmp_path, "PROF_000001", {"fulldb__msprof_0.db": "msprof_0.db"})
    before = sorted(p.name for p in root.iterdir())
    trace = open_capture(tmp_path)
    validate(trace)
    assert sorted(p.name for p in root.iterdir()) == before  # nothing written beside it
    with sqlite3.connect(f"{(DATA / 'fulldb__msprof_0.db').as_uri()}?mode=ro&immutable=1",
                         uri=True) as db:
        rows = db.execute("SELECT deviceId, addr, type, totalAllocate FROM NPU_OP_MEM "
                          "ORDER BY timestampNs, rowid").fetchall()
        by_rowid = db.execute("SELECT deviceId, addr, type FROM NPU_OP_MEM ORDER BY rowid"
                              ).fetchall()
    # blocks by hand: per address in table order, 5 (allocate) opens, 6 (release) closes;
    # a release before any allocation of its address is a ghost, a second release of an
    # address already released is a duplicate (this test-modified DB has one).
    state, blocks, ghosts, duplicates = {}, 0, 0, 0
    for device, addr, kind in by_rowid:
        key = (device, addr)
        if kind == 5:
            state[key] = "open"
            blocks += 1
        elif state.get(key) == "open":
            state[key] = "closed"
        elif key not in state:
            state[key] = "closed"
            ghosts += 1
        else:
            duplicates += 1
    assert any(f"{duplicates} GE releases of an address already released" in w
               for w in trace.meta.warnings)
    (d,) = summary(trace)["devices"]
    assert d["device"] == "npu0"
    assert d["events"] == len(rows)
    assert (d["blocks"], d["ghost_blocks"]) == (blocks + ghosts, ghosts)
    assert d["peak_allocated_bytes"] == max(r[3] for r in rows)
    assert d["allocated_at_end_bytes"] == rows[-1][3]
    assert trace.meta.extra["inference"] == {"npu0": True}
