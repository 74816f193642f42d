"""Ascend profiler source on tiny files written here, whose right answers are worked out by hand.

MiB = 1048576 bytes; the profiler's "MB" columns are MiB, its "KB" KiB.  Times in the
files are µs; the model's are ns from the rank's first timestamp.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.summary import summary
from memtui.cli import main
from memtui.errors import CaptureError
from memtui.model import validate
from memtui.sources import ascend, open_capture

MIB = 1 << 20
KIB = 1 << 10
TAB = "\t"

RECORD_HEADER = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),"
                 "Total Active(MB),Stream Ptr,Device Type")
RECORD_7 = f"""{RECORD_HEADER}
APP,1000.000{TAB},,10.0,,,NPU:0
PTA,1000.500{TAB},1.0,2.0,1.0,7,NPU:0
PTA+GE,1000.500{TAB},1.0,2.0,1.0,7,NPU:0
GE,1001.250{TAB},0.5,1.0,,,NPU:0
PTA+GE,1001.250{TAB},1.5,3.0,1.0,7,NPU:0
PTA,1002.001{TAB},0.25,2.0,0.25,7,NPU:0
PTA+GE,1002.001{TAB},0.75,3.0,0.25,7,NPU:0
APP,1003.000{TAB},,12.5,,,NPU:0
"""

OPERATOR_15 = (
    "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),"
    "Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),"
    "Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),"
    "Release Total Active(MB),Stream Ptr,Device Type\n"
    f"aten::empty,1024.0,10.000{TAB},12.500{TAB},12.400{TAB},2.500{TAB},2.400{TAB},"
    "1.0,2.0,1.0,0.0,2.0,0.0,7,NPU:0\n"
    f"aten::add,2.5,11.000{TAB},,,,,1.5,2.0,1.5,,,,7,NPU:0\n"
    f"cann::TransData,512.0,11.500{TAB},11.750{TAB},,0.250,,0.5,1.0,,0.0,1.0,,,NPU:0\n"
    f",-256.0,,11.900{TAB},,,,,,,0.25,2.0,,7,NPU:0\n"
    f"aten::mul,4.0,12.000{TAB},N/A,N/A,N/A,N/A,1.0,2.0,N/A,N/A,N/A,N/A,7,NPU:0\n"
    f"aten::bad,4.0,12.000{TAB},,,,,1.0,2.0,1.0,,,,7,NPU:0,extra,cells\n"
    f"aten::nosize,N/A,12.000{TAB},,,,,1.0,2.0,1.0,,,,7,NPU:0\n"
)


def write(path: Path, text: str, newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", newline).encode())
    return path


def series(trace, name: str, device: str | None = None, component=None, stream=None):
    """(t, bytes) rows of one curve, in order."""
    df = trace.curves.filter(pl.col("series") == name)
    if device is not None:
        df = df.filter(pl.col("device") == device)
    df = df.filter(pl.col("component").is_null() if component is None
                   else pl.col("component") == component)
    df = df.filter(pl.col("stream").is_null() if stream is None else pl.col("stream") == stream)
    return df.select("t", "bytes").rows()


def load(path: Path):
    assert ascend.sniff(path)
    trace = open_capture(path)
    validate(trace)
    return trace


# -- memory_record -----------------------------------------------------------------------

@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_memory_record_7_columns_curves_by_hand(tmp_path, newline):
    trace = load(write(tmp_path / "memory_record.csv", RECORD_7, newline))
    device = "npu0"
    assert trace.meta.device_names == [device]
    assert trace.meta.extra["rank_start_ns"][device] == 1_000_000
    # Overall: the PTA+GE rows (the TAB-ended µs keep their ns digits: 1002.001 -> 2001).
    assert series(trace, "Operators Allocated") == [(500, MIB), (1250, 3 * MIB // 2),
                                                    (2001, 3 * MIB // 4)]
    assert series(trace, "Operators Reserved") == [(500, 2 * MIB), (1250, 3 * MIB),
                                                   (2001, 3 * MIB)]
    assert series(trace, "Operators Activated") == [(500, MIB), (1250, MIB), (2001, MIB // 4)]
    assert series(trace, "App Reserved") == [(0, 10 * MIB), (3000, 25 * MIB // 2)]
    # Stream: the PTA+GE rows of stream 7.
    assert series(trace, "Allocated", stream=7) == series(trace, "Operators Allocated")
    assert series(trace, "Reserved", stream=7) == series(trace, "Operators Reserved")
    # Component: PTA rows, GE rows (no Activated), APP.
    assert series(trace, "Allocated", component="PTA") == [(500, MIB), (2001, MIB // 4)]
    assert series(trace, "Allocated", component="GE") == [(1250, MIB // 2)]
    assert series(trace, "Activated", component="GE") == []
    assert series(trace, "Reserved", component="APP") == [(0, 10 * MIB), (3000, 25 * MIB // 2)]
    # events: one per row, levels in bytes, component in pool.
    events = trace.events
    assert events.height == 8
    assert events["action"].cast(pl.String).unique().to_list() == ["snapshot"]
    assert events.filter(pl.col("pool") == "GE").select("allocated", "reserved",
                                                         "active").row(0) == (MIB // 2, MIB, None)
    d = summary(trace)["devices"][0]
    assert (d["events"], d["blocks"]) == (8, 0)
    assert d["peak_allocated_bytes"] == 3 * MIB // 2
    assert d["peak_time_ns"] == 1250
    assert d["allocated_at_end_bytes"] == 3 * MIB // 4
    assert d["reserved_at_end_bytes"] == 3 * MIB


def test_timestamps_keep_nanoseconds(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
            "Stream Ptr,Device Type\n"
            f"PTA+GE,1736408883694238.150{TAB},1.0,2.0,1.0,1,NPU:0\n"
            f"PTA+GE,1736408883694238.151{TAB},2.0,2.0,2.0,1,NPU:0\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert trace.meta.extra["rank_start_ns"]["npu0"] == 1736408883694238150
    assert [t for t, _ in series(trace, "Operators Allocated")] == [0, 1]


def test_old_5_column_format_derives_pta_ge_when_missing(tmp_path):
    # No PTA+GE rows: derived as torch_npu does; on equal times the PTA row comes first.
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
            "PTA,10.0,1.0,2.0,NPU:0\nGE,11.0,0.5,1.0,NPU:0\nPTA,11.0,2.0,2.0,NPU:0\n"
            "GE,12.0,0.25,1.0,NPU:0\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert series(trace, "Operators Allocated") == [
        (0, MIB), (1000, 2 * MIB), (1000, 5 * MIB // 2), (2000, 9 * MIB // 4)]
    assert series(trace, "Operators Reserved") == [
        (0, 2 * MIB), (1000, 2 * MIB), (1000, 3 * MIB), (2000, 3 * MIB)]
    assert series(trace, "Operators Activated") == []  # no stream data: hidden, as Insight
    d = summary(trace)["devices"][0]
    assert (d["peak_allocated_bytes"], d["allocated_at_end_bytes"]) == (5 * MIB // 2,
                                                                        9 * MIB // 4)
    assert d["events"] == 4  # derived rows are curves, not events


def test_old_5_column_format_with_pta_ge_rows(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
            "APP,1.0,,8.0,NPU:3\nPTA,2.0,1.0,2.0,NPU:3\nPTA+GE,2.0,1.0,2.0,NPU:3\n"
            "GE,3.0,0.5,1.0,NPU:3\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert trace.meta.device_names == ["npu3"]
    assert series(trace, "Operators Allocated") == [(1000, MIB)]  # GE rows not in Overall
    assert series(trace, "App Reserved") == [(0, 8 * MIB)]


def test_mindspore_6_column_format(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
            "Device Type\n"
            "MindSpore,5.0,1.0,4.0,1.0,NPU:2\nMindSpore+GE,5.0,1.0,4.0,1.0,NPU:2\n"
            "GE,6.0,1.0,2.0,,NPU:2\nMindSpore+GE,6.0,2.0,6.0,1.0,NPU:2\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert series(trace, "Operators Allocated") == [(0, MIB), (1000, 2 * MIB)]
    assert series(trace, "Operators Activated") == []  # no Stream Ptr column
    assert series(trace, "Allocated", component="GE") == [(1000, MIB)]
    assert series(trace, "Allocated", component="MindSpore") == []  # Insight ignores them
    assert trace.meta.extra["ranks"][0]["framework"] == "mindspore"


def test_msprof_memory_record_in_kb_is_inference(tmp_path):
    text = ("Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device\n"
            f"0,GE,100.000{TAB},64.000,2048.000,NPU:0\n"
            f"0,GE,100.500{TAB},192.000,2048.000,NPU:0\n"
            f"0,GE,101.000{TAB},128.000,4096.000,NPU:0\n")
    trace = load(write(tmp_path / "memory_record_20240101000000.csv", text))
    assert trace.meta.extra["inference"] == {"npu0": True}
    assert series(trace, "Operators Allocated") == [(0, 64 * KIB), (500, 192 * KIB),
                                                    (1000, 128 * KIB)]
    d = summary(trace)["devices"][0]
    assert (d["peak_allocated_bytes"], d["reserved_at_end_bytes"]) == (192 * KIB, 4 * MIB)


def test_workspace_rows_are_their_own_curves(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
            "Stream Ptr,Device Type\n"
            "PTA,1.0,1.0,2.0,1.0,5,NPU:0\nPTA+GE,1.0,1.0,2.0,1.0,5,NPU:0\n"
            "WORKSPACE,1.5,0.5,0.5,0.5,5,NPU:0\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert series(trace, "Workspace Allocated") == [(500, MIB // 2)]
    assert series(trace, "Workspace Reserved") == [(500, MIB // 2)]
    assert series(trace, "Operators Allocated") == [(0, MIB)]


def test_excel_mangled_timestamps_warn_and_are_not_guessed(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
            "Stream Ptr,Device Type\n"
            "APP,1.69512E+15,,10.0,,,NPU:1\n"
            "PTA+GE,1.69512E+15,2.0,4.0,2.0,9.4509E+13,NPU:1\n"
            "PTA+GE,1.69512E+15,1.0,4.0,1.0,9.4509E+13,NPU:1\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert trace.meta.extra["rank_start_ns"]["npu1"] == 1_695_120_000_000_000_000
    assert series(trace, "Operators Allocated") == [(0, 2 * MIB), (0, MIB)]
    assert any("Excel" in w and "5 numbers" in w for w in trace.meta.warnings)
    d = summary(trace)["devices"][0]
    assert d["allocated_at_end_bytes"] == MIB  # file order kept on equal times


def test_rows_with_wrong_cells_are_skipped_and_counted(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
            "Stream Ptr,Device Type\n"
            "PTA+GE,1.0,1.0,2.0,1.0,5,NPU:0\n"
            "PTA+GE,2.0,1.0\n"
            "PTA+GE,3.0,1.0,2.0,1.0,5,NPU:0,9\n"
            "PTA+GE,abc,1.0,2.0,1.0,5,NPU:0\n"
            "PTA+GE,4.0,lots,2.0,1.0,5,NPU:0\n"
            "PTA+GE,5.0,3.0,4.0,3.0,5,NPU:0,\n")
    trace = load(write(tmp_path / "memory_record.csv", text))
    assert series(trace, "Operators Allocated") == [(0, MIB), (4000, 3 * MIB)]
    warnings = " | ".join(trace.meta.warnings)
    assert "2 rows with missing or extra cells" in warnings
    assert "1 rows skipped (missing or unreadable timestamp)" in warnings
    assert "1 rows skipped (unreadable number)" in warnings


def test_all_rows_bad_is_a_one_line_error(tmp_path):
    text = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
            "PTA,x,1.0,2.0,NPU:0\nPTA,y,1.0,2.0,NPU:0\n")
    path = write(tmp_path / "memory_record.csv", text)
    with pytest.raises(CaptureError) as info:
        open_capture(path)
    assert "no readable rows" in str(info.value) and "\n" not in str(info.value)


def test_header_only_file_opens_empty_with_a_warning(tmp_path):
    path = write(tmp_path / "memory_record.csv",
                 "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n")
    trace = load(path)
    assert trace.meta.devices == [] and "no rows" in trace.meta.warnings[0]


def test_npu_mem_app_rows_are_app_reserved(tmp_path):
    text = ("Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n"
            f"0,APP,0.000000,1024.000000,1024.000000,50.000000{TAB}\n"
            f"0,Device,0.000000,4096.000000,4096.000000,50.000000{TAB}\n"
            f"0,APP,0.000000,2048.000000,2048.000000,50.020000{TAB}\n")
    trace = load(write(tmp_path / "npu_mem_20240101.csv", text))
    assert series(trace, "App Reserved") == [(0, MIB), (20, 2 * MIB)]
    assert trace.events.height == 2


# -- operator_memory ---------------------------------------------------------------------

def test_operator_memory_15_columns_blocks_by_hand(tmp_path):
    trace = load(write(tmp_path / "operator_memory.csv", OPERATOR_15, "\r\n"))
    blocks = trace.blocks.select(
        "owner", "size", "t_alloc", "t_free", "t_active_free", "pool", "stream", "ghost",
        "alloc_allocated", "alloc_reserved", "alloc_active", "free_allocated")
    assert blocks.rows() == [
        ("aten::empty", MIB, 0, 2500, 2400, "PTA", 7, False, MIB, 2 * MIB, MIB, 0),
        (None, 256 * KIB, 0, 1900, None, "PTA", 7, True, None, None, None, MIB // 4),
        ("aten::add", 2560, 1000, None, None, "PTA", 7, False, 3 * MIB // 2, 2 * MIB,
         3 * MIB // 2, None),
        ("cann::TransData", 512 * KIB, 1500, 1750, None, "GE", None, False, MIB // 2, MIB,
         None, 0),
        ("aten::mul", 4 * KIB, 2000, None, None, "PTA", 7, False, MIB, 2 * MIB, None, None),
    ]
    assert trace.blocks["block_id"].to_list() == [0, 1, 2, 3, 4]
    d = summary(trace)["devices"][0]
    assert (d["blocks"], d["ghost_blocks"], d["events"]) == (5, 1, 0)
    warnings = " | ".join(trace.meta.warnings)
    assert "1 rows with missing or extra cells" in warnings
    assert "1 rows skipped (missing or unreadable size)" in warnings


def test_operator_memory_10_columns(tmp_path):
    text = ("Name,Size(KB),Allocation Time(us),Release Time(us),Duration(us),"
            "Allocation Total Allocated(MB),Allocation Total Reserved(MB),"
            "Release Total Allocated(MB),Release Total Reserved(MB),Device Type\n"
            "cann::Graph_1,192,100.5,100.75,0.25,0.25,242.0,0.0625,242.0,NPU:0\n")
    trace = load(write(tmp_path / "operator_memory.csv", text))
    assert trace.blocks.select("owner", "size", "t_alloc", "t_free", "pool", "alloc_reserved",
                               "free_allocated").rows() == [
        ("cann::Graph_1", 192 * KIB, 0, 250, "GE", 242 * MIB, MIB // 16)]


def test_msprof_operator_memory_release_is_allocation_plus_duration(tmp_path):
    text = ("Device_id,Name,Size(KB),Allocation Time(us),Duration(us),"
            "Allocation Total Allocated(KB),Allocation Total Reserved(KB),"
            "Release Total Allocated(KB),Release Total Reserved(KB),Device\n"
            f"0,Conv2D,64.000,200.000{TAB},1.500{TAB},64.000,1024.000,0.000,1024.000,NPU:0\n"
            "0,,-32.000,,,,,0.000,1024.000,NPU:0\n")
    trace = load(write(tmp_path / "operator_memory_20240101.csv", text))
    assert trace.blocks.select("owner", "size", "t_alloc", "t_free", "pool", "ghost",
                               "alloc_allocated", "alloc_reserved").rows() == [
        ("Conv2D", 64 * KIB, 0, 1500, "GE", False, 64 * KIB, MIB),
        (None, 32 * KIB, 0, None, "GE", True, None, None),
    ]


# -- npu_module_mem and static_op_mem ----------------------------------------------------

@pytest.mark.parametrize("header,prefix,value", [
    ("Component,Timestamp(us),Total Reserved(MB),Device", "", "100.0"),
    ("Device_id,Component,Timestamp(us),Total Reserved(MB),Device", "0,", "100.0"),
    ("Device_id,Component,Timestamp(us),Total Reserved(KB),Device", "0,", "102400.000000"),
], ids=["torch_npu-4col-MB", "torch_npu-5col-MB", "msprof-KB"])
def test_npu_module_mem_three_forms(tmp_path, header, prefix, value):
    text = (f"{header}\n{prefix}HCCL,1.000{TAB},{value},NPU:0\n"
            f"{prefix}HCCL,1.020{TAB},{value},NPU:0\n{prefix}SLOG,1.000{TAB},0.0,NPU:0\n")
    trace = load(write(tmp_path / "npu_module_mem.csv", text))
    assert series(trace, "Module Reserved", component="HCCL") == [(0, 100 * MIB),
                                                                  (20, 100 * MIB)]
    assert series(trace, "Module Reserved", component="SLOG") == [(0, 0)]


def test_static_op_mem_running_sum_by_node_index(tmp_path):
    text = ("Device_id,Op Name,Model Name,Graph ID,Node Index Start,Node Index End,Size(KB)\n"
            "host,a,0,0,1,3,1.0\nhost,b,0,0,2,4294967295,2.0\nhost,z,0,0,2,5,0\n"
            "host,TOTAL,0,0,1,4294967295,3.0\n")
    trace = load(write(tmp_path / "static_op_mem.csv", text))
    # +a at 1, +b at 2, -a at 3, -b at the end: the last real index (3) + 1.
    assert series(trace, "Static Size", component="graph 0") == [
        (1, KIB), (2, 3 * KIB), (3, 2 * KIB), (4, 0)]
    assert series(trace, "Static Total Size", component="graph 0") == [
        (1, 3 * KIB), (2, 3 * KIB), (3, 3 * KIB), (4, 3 * KIB)]
    assert trace.meta.extra["static_ops"]["name"].to_list() == ["a", "b", "z"]


# -- DBs -------------------------------------------------------------------------------------

def make_pytorch_db(path: Path, wal: bool = False) -> Path:
    db = sqlite3.connect(path)
    db.executescript("""
    CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
    INSERT INTO STRING_IDS VALUES (1,'PTA'),(2,'PTA+GE'),(3,'GE'),(4,'aten::empty'),
      (5,'Conv2D'),(6,'app'),(7,'device');
    CREATE TABLE MEMORY_RECORD (component INTEGER, timestamp INTEGER, totalAllocated INTEGER,
      totalReserved INTEGER, totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
    INSERT INTO MEMORY_RECORD VALUES (1,1000,1048576,2097152,1048576,99,1),
      (2,1000,1048576,2097152,1048576,99,1), (3,1500,524288,1048576,0,NULL,1),
      (2,1500,1572864,3145728,1048576,99,1);
    CREATE TABLE NPU_MEM (type INTEGER, ddr NUMERIC, hbm NUMERIC, timestampNs INTEGER,
      deviceId INTEGER);
    INSERT INTO NPU_MEM VALUES (6,0,4194304,900,1),(7,0,8388608,900,1),(6,1024,4194304,1900,1);
    CREATE TABLE OP_MEMORY (name INTEGER, size INTEGER, allocationTime INTEGER,
      releaseTime INTEGER, activeReleaseTime INTEGER, duration INTEGER, activeDuration INTEGER,
      allocationTotalAllocated INTEGER, allocationTotalReserved INTEGER,
      allocationTotalActive INTEGER, releaseTotalAllocated INTEGER,
      releaseTotalReserved INTEGER, releaseTotalActive INTEGER, streamPtr INTEGER,
      deviceId INTEGER);
    INSERT INTO OP_MEMORY VALUES
      (4,1048576,1000,2000,1900,1000,900,1048576,2097152,1048576,0,2097152,0,99,1),
      (5,524288,1500,NULL,NULL,NULL,NULL,524288,1048576,NULL,NULL,NULL,NULL,NULL,1);
    CREATE TABLE ENUM_MODULE (id INTEGER PRIMARY KEY, name TEXT);
    INSERT INTO ENUM_MODULE VALUES (0,'SLOG'),(3,'HCCL');
    CREATE TABLE NPU_MODULE_MEM (moduleId INTEGER, timestampNs INTEGER,
      totalReserved NUMERIC, deviceId INTEGER);
    INSERT INTO NPU_MODULE_MEM VALUES (3,950,104857600,1);
    CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
    INSERT INTO RANK_DEVICE_MAP VALUES (3,1);
    CREATE TABLE HOST_INFO (hostUid TEXT, hostName TEXT);
    INSERT INTO HOST_INFO VALUES ('123','node-a');
    CREATE TABLE NPU_INFO (id INTEGER, name TEXT);
    INSERT INTO NPU_INFO VALUES (1,'Ascend910B');
    CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);
    INSERT INTO SESSION_TIME_INFO VALUES (800, 3000);
    """)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.commit()
    db.close()
    return path


def test_pytorch_db_by_hand(tmp_path):
    path = make_pytorch_db(tmp_path / "ascend_pytorch_profiler_3.db", wal=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    trace = load(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside it
    device = "rank3/npu1"
    assert trace.meta.device_names == [device]
    info = trace.meta.devices[0]
    assert (info.rank, info.host) == (3, "node-a")
    assert trace.meta.extra["rank_start_ns"][device] == 900
    assert series(trace, "Operators Allocated") == [(100, MIB), (600, 3 * MIB // 2)]
    assert series(trace, "Operators Activated") == [(100, MIB), (600, MIB)]
    assert series(trace, "App Reserved") == [(0, 4 * MIB), (1000, 4 * MIB + 1024)]
    assert series(trace, "Activated", component="GE") == []  # DB's 0 means "none" here
    assert series(trace, "Module Reserved", component="HCCL") == [(50, 100 * MIB)]
    assert trace.events.height == 6  # 4 MEMORY_RECORD rows + 2 NPU_MEM app rows
    assert trace.blocks.select("owner", "size", "t_alloc", "t_free", "pool").rows() == [
        ("aten::empty", MIB, 100, 1100, "PTA"), ("Conv2D", MIB // 2, 600, None, "GE")]
    d = summary(trace)["devices"][0]
    assert (d["peak_allocated_bytes"], d["allocated_at_end_bytes"],
            d["reserved_at_end_bytes"]) == (3 * MIB // 2, 3 * MIB // 2, 3 * MIB)


def test_msprof_db_pairs_ge_events_into_blocks(tmp_path):
    path = tmp_path / "msprof_20240101.db"
    db = sqlite3.connect(path)
    db.executescript("""
    CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
    INSERT INTO STRING_IDS VALUES (10,'GE'),(11,'Conv'),(12,'Relu');
    CREATE TABLE ENUM_MEMORY (id INTEGER PRIMARY KEY, name TEXT);
    INSERT INTO ENUM_MEMORY VALUES (0,'app'),(1,'device'),(5,'allocate'),(6,'release');
    CREATE TABLE NPU_OP_MEM (operatorName INTEGER, addr INTEGER, type INTEGER, size INTEGER,
      timestampNs INTEGER, globalTid INTEGER, totalAllocate NUMERIC, totalReserve NUMERIC,
      component INTEGER, deviceId INTEGER);
    INSERT INTO NPU_OP_MEM VALUES (11,4096,5,1024,100,1,1536,4096,10,0),
      (12,8192,6,512,150,1,1024,4096,10,0), (12,8192,5,2048,200,1,3072,4096,10,0),
      (11,4096,6,1024,300,1,2048,4096,10,0);
    """)
    db.commit()
    db.close()
    trace = load(path)
    assert trace.meta.extra["inference"] == {"npu0": True}
    assert series(trace, "Operators Allocated") == [(0, 1536), (50, 1024), (100, 3072),
                                                    (200, 2048)]
    assert trace.events["action"].cast(pl.String).to_list() == ["alloc", "free", "alloc", "free"]
    # The release of 8192 before any allocation of it: a ghost alive from the start.
    assert trace.blocks.select("block_id", "owner", "size", "t_alloc", "t_free",
                               "ghost").rows() == [
        (0, "Relu", 512, 0, 50, True), (1, "Conv", 1024, 0, 200, False),
        (2, "Relu", 2048, 100, None, False)]
    # every event names its block
    linked = trace.events.join(trace.blocks.select("block_id", "owner", "size"),
                               on="block_id", how="left")
    assert linked["owner"].to_list() == ["Conv", "Relu", "Relu", "Conv"]
    d = summary(trace)["devices"][0]
    assert (d["peak_allocated_bytes"], d["ghost_blocks"]) == (3072, 1)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_db_is_a_one_line_error(tmp_path, capsys, damage):
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    if damage == "garbage":
        path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 200)
    else:
        whole = make_pytorch_db(tmp_path / "whole.db").read_bytes()
        path.write_bytes(whole[: len(whole) // 3])
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memtui: {path}: not a readable profiler database")
    assert err.count("\n") == 1 and "Traceback" not in err


# -- what is not ours --------------------------------------------------------------------

def test_sniff_leaves_other_formats_alone(tmp_path):
    memscope_csv = write(tmp_path / "memscope_dump_1.csv",
                         "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,"
                         "Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n"
                         "1,MALLOC,,,1,1,1,0,1,,,\n")
    other_csv = write(tmp_path / "other.csv", "a,b,c\n1,2,3\n")
    memscope_db = tmp_path / "memscope_dump_1.db"
    db = sqlite3.connect(memscope_db)
    db.execute("CREATE TABLE memscope_dump (id INTEGER)")
    db.execute("CREATE TABLE NPU_MEM (id INTEGER)")
    db.commit()
    db.close()
    folder = tmp_path / "msmemscope_result" / "device_0" / "dump"
    write(folder / "memscope_dump_1.csv", memscope_csv.read_text())
    pickle = tmp_path / "snap.pickle"
    pickle.write_bytes(b"\x80\x04\x95\x00")
    for path in (memscope_csv, other_csv, memscope_db, tmp_path / "msmemscope_result", pickle):
        assert not ascend.sniff(path), path


# -- folders and ranks -------------------------------------------------------------------

def record_text(device: int, base_us: int) -> str:
    return ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
            "Stream Ptr,Device Type\n"
            f"APP,{base_us}.000{TAB},,10.0,,,NPU:{device}\n"
            f"PTA+GE,{base_us + 1}.000{TAB},{device + 1}.0,8.0,1.0,3,NPU:{device}\n")


def operator_text(device: int, base_us: int) -> str:
    header = OPERATOR_15.splitlines()[0]
    return (f"{header}\naten::empty,1024.0,{base_us + 2}.000{TAB},{base_us + 3}.000{TAB},,"
            f"1.000{TAB},,1.0,8.0,1.0,0.0,8.0,0.0,3,NPU:{device}\n")


def make_rank(parent: Path, name: str, rank: int | None, device: int, base_us: int) -> Path:
    root = parent / name
    out = root / "ASCEND_PROFILER_OUTPUT"
    write(out / "memory_record.csv", record_text(device, base_us), "\r\n")
    write(out / "operator_memory.csv", operator_text(device, base_us))
    if rank is not None:
        write(root / f"profiler_info_{rank}.json", json.dumps({"rank_id": str(rank)}))
    return root


def test_two_ranks_side_by_side(tmp_path):
    make_rank(tmp_path, "a_1_ascend_pt", 0, 0, 1_000)
    make_rank(tmp_path, "b_2_ascend_pt", 1, 1, 5_000_000)
    trace = load(tmp_path)
    assert trace.meta.device_names == ["rank0/npu0", "rank1/npu1"]
    assert [d.rank for d in trace.meta.devices] == [0, 1]
    starts = trace.meta.extra["rank_start_ns"]
    assert starts == {"rank0/npu0": 1_000_000, "rank1/npu1": 5_000_000_000}
    for device in trace.meta.device_names:  # each rank's time starts at its own 0
        assert series(trace, "App Reserved", device) == [(0, 10 * MIB)]
    assert series(trace, "Operators Allocated", "rank1/npu1") == [(1000, 2 * MIB)]
    data = summary(trace)
    assert [d["peak_allocated_bytes"] for d in data["devices"]] == [MIB, 2 * MIB]
    assert [d["blocks"] for d in data["devices"]] == [1, 1]
    blocks = trace.blocks.select("device", "t_alloc", "t_free").rows()
    assert blocks == [("rank0/npu0", 2000, 3000), ("rank1/npu1", 2000, 3000)]


@pytest.mark.parametrize("where", ["root", "output", "file", "info"])
def test_one_rank_opens_from_any_of_its_paths(tmp_path, where):
    root = make_rank(tmp_path, "x_ascend_pt", 4, 1, 1_000)
    path = {"root": root, "output": root / "ASCEND_PROFILER_OUTPUT",
            "file": root / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv",
            "info": root / "profiler_info_4.json"}[where]
    trace = load(path)
    assert trace.meta.device_names == ["rank4/npu1"]
    # memory_record.csv opens with its operator_memory.csv: one picture (issue 35 item 11)
    assert trace.blocks.height == 1


def test_unknown_and_colliding_ranks_get_folder_names(tmp_path):
    make_rank(tmp_path, "left_ascend_pt", None, 0, 1_000)
    root = make_rank(tmp_path, "right_ascend_pt", None, 0, 2_000)
    write(root / "profiler_info.json", json.dumps({"rank_id": "-1"}))
    trace = load(tmp_path)
    assert trace.meta.device_names == ["left_ascend_pt/npu0", "right_ascend_pt/npu0"]
    assert [d.rank for d in trace.meta.devices] == [None, None]


def test_db_preferred_over_csv_in_the_same_folder(tmp_path):
    root = make_rank(tmp_path, "r_ascend_pt", 3, 1, 1_000)
    make_pytorch_db(root / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_3.db")
    trace = load(root)
    files = trace.meta.extra["ranks"][0]["files"]
    assert [Path(f).name for f in files] == ["ascend_pytorch_profiler_3.db"]
    assert series(trace, "Operators Allocated") == [(100, MIB), (600, 3 * MIB // 2)]


def test_msprof_folder_of_timestamped_csvs(tmp_path):
    out = tmp_path / "PROF_000001_20240101_abc" / "mindstudio_profiler_output"
    write(out / "memory_record_20240101000000.csv",
          "Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device\n"
          f"0,GE,100.000{TAB},64.000,2048.000,NPU:0\n")
    write(out / "npu_mem_20240101000000.csv",
          "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n"
          f"0,APP,0.000000,1024.000000,1024.000000,99.000000{TAB}\n")
    trace = load(tmp_path)
    assert trace.meta.device_names == ["npu0"]
    assert series(trace, "Operators Allocated") == [(1000, 64 * KIB)]
    assert series(trace, "App Reserved") == [(0, MIB)]
    # the seq of rows from several files stays unique
    assert trace.events["seq"].n_unique() == trace.events.height == 2


def test_framework_output_wins_over_prof_folder(tmp_path):
    root = make_rank(tmp_path, "r_ascend_pt", 0, 0, 1_000)
    write(root / "PROF_1" / "mindstudio_profiler_output" / "memory_record_1.csv",
          "Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device\n"
          "0,GE,1.0,64.0,64.0,NPU:0\n")
    trace = load(tmp_path)
    assert all("mindstudio" not in f for f in trace.meta.extra["ranks"][0]["files"])


def test_folder_without_profiler_data_is_not_ours(tmp_path):
    write(tmp_path / "notes.txt", "hello\n")
    assert not ascend.sniff(tmp_path)
    with pytest.raises(CaptureError):
        open_capture(tmp_path)


def test_summary_json_from_the_command_line(tmp_path, capsys):
    make_rank(tmp_path, "a_ascend_pt", 0, 0, 1_000)
    assert main(["summary", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "ascend_profiler"
    (device,) = data["devices"]
    assert device["device"] == "rank0/npu0"
    assert (device["events"], device["blocks"], device["ghost_blocks"]) == (2, 1, 0)
    assert device["peak_allocated_bytes"] == MIB
    assert device["segments"] is None


@pytest.mark.parametrize("extra_row", [False, True], ids=["polars-reader", "line-reader"])
def test_byte_order_mark_and_quoted_names(tmp_path, extra_row):
    # An extra-cells row sends the file down the line-by-line path; both must agree.
    header = OPERATOR_15.splitlines()[0]
    rows = [f'"aten::cat, fused",2.0,1.000{TAB},2.000{TAB},,1.000{TAB},,1.0,2.0,1.0,'
            "0.0,2.0,0.0,7,NPU:0"]
    if extra_row:
        rows.append("aten::x,1.0,1.0,,,,,1.0,2.0,1.0,,,,7,NPU:0,surplus")
    text = "\ufeff" + header + "\n" + "\n".join(rows) + "\n"
    trace = load(write(tmp_path / "operator_memory.csv", text))
    assert trace.blocks.select("owner", "size", "t_free").rows() == [
        ("aten::cat, fused", 2 * KIB, 1000)]
    assert any("1 rows with missing or extra cells" in w
               for w in trace.meta.warnings) == extra_row


def test_a_bad_file_in_a_folder_is_skipped_with_a_warning(tmp_path):
    make_rank(tmp_path, "good_ascend_pt", 0, 0, 1_000)
    bad = make_rank(tmp_path, "bad_ascend_pt", 1, 1, 1_000)
    out = bad / "ASCEND_PROFILER_OUTPUT"
    write(out / "memory_record.csv", "Component,Timestamp(us),Total Allocated(MB),"
          "Total Reserved(MB),Device Type\nPTA,x,1,2,NPU:1\n")
    (out / "operator_memory.csv").unlink()
    trace = load(tmp_path)
    assert trace.meta.device_names == ["rank0/npu0"]
    assert any(w.startswith("skipped ") and "no readable rows" in w for w in trace.meta.warnings)
    # ...but a folder where nothing can be read is an error.
    with pytest.raises(CaptureError, match="no readable rows"):
        open_capture(bad)
