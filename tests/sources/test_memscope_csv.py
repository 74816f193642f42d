"""msMemScope CSVs (2025 and current layouts), python-trace CSVs and result folders.

The 2025-layout file below (µs timestamps, decimal Ptr, no allocation_id, negative FREE
sizes, ``host`` device, ``MID``) has, by hand:

* npu:0: MALLOC 512 at 1200 µs freed at 1300: peak 512, 0 at the end, total 2097152;
* npu:1: MALLOC 1024 at 1500 (never freed) and a FREE of 2048 with no MALLOC (a ghost,
  alive from the start): 2048 -> 3072 -> 1024; the pool's last total is 4194304;
* host: a HAL MALLOC of 8192 whose FREE has Device Id N/A (it takes the MALLOC's device):
  driver memory only, so allocated stays 0 and reserved goes 8192 -> 0;
* a row broken by an unquoted comma and a last row cut mid-write: 2 rows skipped.
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.summary import summary
from memtui.model import validate
from memtui.sources import memscope, open_capture
from tests.helpers.memscope_files import write_text

HEADER = ("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,"
          "Call Stack(Python),Call Stack(C)\n")
US = 1746006014000000  # µs, as 2025 msLeaks wrote them
OLD_CSV = HEADER + "".join([
    f"1,SYSTEM,acl init,N/A,{US + 1000},7,7,N/A,N/A,,,\n",
    f'2,MALLOC,HAL,N/A,{US + 1100},7,7,host,4096,"{{addr:4096,size:8192,owner:,MID:7}}",,\n',
    f'3,MALLOC,PTA,N/A,{US + 1200},7,7,0,100000,"{{addr:100000,size:512,total:2097152,'
    f'used:512,owner:PTA@leaks_mem,inefficient_type:early_allocation,late_deallocation}}",'
    '"/a.py(1): f\n/b.py(2): <module>\n",\n',
    f'4,FREE,PTA,N/A,{US + 1300},7,7,0,100000,"{{addr:100000,size:-512,owner:,total:2097152,'
    'used:0}",,\n',
    f'5,FREE,HAL,N/A,{US + 1400},7,8,N/A,4096,"{{addr:4096,size:8192,owner:,MID:-1}}",,\n',
    f"6,KERNEL_LAUNCH,KERNEL_LAUNCH,N/A,{US + 1250},7,9,0,N/A,,,\n",
    f'7,MSTX,Mark,"[mstx]: mstxMarkA :training start ",{US + 1150},7,7,0,N/A,,,\n',
    f"8,OP_LAUNCH,ATEN_START,op(a, b),{US + 1210},7,7,0,N/A,,,\n",
    f'9,MALLOC,PTA,N/A,{US + 1500},7,7,1,200000,"{{addr:200000,size:1024,owner:,'
    'total:2097152,used:1024}",,\n',
    f'10,FREE,PTA,N/A,{US + 1600},7,7,1,300000,"{{addr:300000,size:-2048,owner:,'
    'total:4194304,used:0}",,\n',
    f"11,MALLOC,PTA,N/A,{US}"[:-4],  # cut mid-write: no newline
])


def _ns(us_offset: int) -> int:
    return (US + us_offset) * 1000


def test_2025_layout(tmp_path):
    trace = open_capture(write_text(tmp_path / "memscope_dump_20250428113810.csv", OLD_CSV))
    validate(trace)
    data = {d["device"]: d for d in summary(trace)["devices"]}
    assert list(data) == ["npu:0", "npu:1", "host"]
    assert [(d["events"], d["blocks"], d["ghost_blocks"]) for d in data.values()] == [
        (2, 1, 0), (2, 2, 1), (2, 1, 0)]
    assert [(d["peak_allocated_bytes"], d["allocated_at_end_bytes"], d["reserved_at_end_bytes"])
            for d in data.values()] == [(512, 0, 2097152), (3072, 1024, 4194304), (8192, 0, None)]
    # (the host's layer is HAL, issue 15: its 8192-byte allocation is allocated, freed)
    assert trace.events.filter(pl.col("device") == "npu:1")["allocated"].to_list() == [3072, 1024]
    assert trace.events.filter(pl.col("device") == "host")["reserved"].to_list() == [8192, 0]
    assert trace.events["t"].to_list() == sorted(trace.events["t"].to_list())
    assert trace.events["t"].min() == _ns(1100)  # µs scaled to ns
    assert summary(trace)["warnings"] == [
        "memscope_dump_20250428113810.csv: 2 malformed rows skipped"]
    block = trace.blocks.filter(pl.col("device") == "npu:0").row(0, named=True)
    assert block["owner"] == "PTA@leaks_mem"
    assert block["inefficient_type"] == "early_allocation,late_deallocation"
    assert (block["addr"], block["size"], block["t_free"]) == (100000, 512, _ns(1300))
    frames = trace.frames.sort("frame_id")
    stack = trace.stacks.filter(pl.col("stack_id") == block["stack_id"])["frame_ids"].item()
    assert [frames.row(f, named=True)["name"] for f in stack] == ["f", "<module>"]
    markers = trace.markers.select("kind", "name").rows()
    assert markers == [("system", "acl init"), ("mstx", "[mstx]: mstxMarkA :training start"),
                       ("kernel", "kernel")]


def test_current_layout_with_quoted_attr_commas(tmp_path):
    text = HEADER + "".join([
        "1,SYSTEM,START_TRACE,N/A,1764753083996495030,31,31,N/A,N/A,,,\n",
        "4,OP_LAUNCH,ATEN_START,torch._ops.aten.addmm.default,1764753083998749490,31,31,0,"
        "N/A,,,\n",
        '10,MALLOC,PTA,N/A,1764753084425691000,31,31,0,0x000012c041400000,"{allocation_id:4,'
        'addr:0x000012c041400000,size:16778240,total:20971520,used:16780288,'
        'owner:PTA@ops@aten}",,\n',
        '11,ACCESS,READ,aten.addmm,1764753084425700000,31,31,0,0x000012c041400000,'
        '"{allocation_id:4,addr:0x000012c041400000,size:16778240,type:PTA,dtype:float16,'
        'shape:[2, 3]}",,\n',
        "6,OP_LAUNCH,ATEN_END,torch._ops.aten.addmm.default,1764753084421188680,31,31,0,N/A,,,\n",
        '12,FREE,PTA,N/A,1764753084426805610,31,31,0,0x000012c041400000,"{allocation_id:4,'
        'addr:0x000012c041400000,size:16778240,total:20971520,used:2048}",,\n',
        "121,SYSTEM,STOP_TRACE,N/A,1764753084535647530,31,31,N/A,N/A,,,\n",
    ])
    trace = open_capture(write_text(tmp_path / "memscope_dump_1.csv", text))
    validate(trace)
    (d,) = summary(trace)["devices"]
    assert (d["events"], d["blocks"], d["peak_allocated_bytes"], d["allocated_at_end_bytes"],
            d["reserved_at_end_bytes"]) == (3, 1, 16778240, 0, 20971520)
    access = trace.events.filter(pl.col("action") == "access").row(0, named=True)
    assert access["pool"] == "PTA" and access["block_id"] == 0
    assert trace.blocks["first_access"].item() == 1764753084425700000
    assert trace.markers.filter(pl.col("kind") == "op").select("t", "t_end").row(0) == (
        1764753083998749490, 1764753084421188680)
    assert summary(trace)["warnings"] == []


def test_csv_with_an_unterminated_quote_keeps_the_good_rows(tmp_path):
    text = HEADER + "".join([
        '1,MALLOC,PTA,N/A,1764753084425691000,31,31,0,0x10,"{allocation_id:1,size:64,'
        'total:128}",,\n',
        '2,MSTX,Mark,"oops,1764753084425691001,31,31,0,N/A,,,\n',
    ])
    trace = open_capture(write_text(tmp_path / "memscope_dump_2.csv", text))
    assert trace.events.height == 1
    assert summary(trace)["warnings"] == ["memscope_dump_2.csv: 1 malformed rows skipped"]


TRACE_CSV = (
    "FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id\n"
    "<built-in method foo of Bar object at 0x1>,1764753000000001100,1764753000000001200,5,7\n"
    "f(a, b),1764753000000001300,1764753000000001400,5,7\n"
    "stop: g,1764753000000001500,N/A,5,7\n"
    "/x.py(3): outer,1764753000000001000,1764753000000002000,5,7\n"
    "garbage\n"
)


def test_python_trace_csv(tmp_path):
    path = write_text(tmp_path / "msmemscope_7_1_ascend" / "device_3" / "dump"
                      / "python_trace_20250101.csv", TRACE_CSV)
    assert memscope.sniff(path)
    trace = open_capture(path)
    validate(trace)
    base = 1764753000000000000
    got = [(r["name"], r["t_start"] - base, r["t_end"] - base, r["depth"], r["device"])
           for r in trace.calls.iter_rows(named=True)]
    assert got == [
        ("/x.py(3): outer", 1000, 2000, 0, "npu:3"),
        ("<built-in method foo of Bar object at 0x1>", 1100, 1200, 1, "npu:3"),
        ("f(a, b)", 1300, 1400, 1, "npu:3"),
        ("stop: g", 1500, 2000, 1, "npu:3"),  # N/A end: the end of the capture
    ]
    assert trace.meta.device_names == ["npu:3"]
    assert summary(trace)["warnings"] == [
        "python_trace_20250101.csv: 1 malformed python-trace rows skipped"]


def test_result_folder_every_device(tmp_path):
    root = tmp_path / "memscopeDumpResults" / "msmemscope_31_20251203_ascend"
    system = "1,SYSTEM,START_TRACE,N/A,1764753083996495030,31,31,N/A,N/A,,,\n"
    for device, size in (("0", 64), ("1", 128)):
        write_text(root / f"device_{device}" / "dump" / "memscope_dump_20251203.csv",
                   HEADER + system + f'2,MALLOC,PTA,N/A,1764753083996495100,31,31,{device},0x10,'
                   f'"{{allocation_id:{device},size:{size},total:1024}}",,\n')
    write_text(root / "device_0" / "dump" / "python_trace_20251203.csv",
               "FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id\n"
               "main,1764753083996495000,1764753083996495200,31,31\n")
    write_text(root / "msmemscope_logs" / "msmemscope_1.log", "log text\n")
    for path in (root, root / "device_1"):  # the layout, not whatever lies below
        assert memscope.sniff(path)
    trace = open_capture(tmp_path / "memscopeDumpResults")  # its one process folder
    validate(trace)
    data = {d["device"]: d for d in summary(trace)["devices"]}
    assert list(data) == ["npu:0", "npu:1"]
    assert data["npu:0"]["peak_allocated_bytes"] == 64
    assert data["npu:1"]["peak_allocated_bytes"] == 128
    assert trace.markers.filter(pl.col("kind") == "trace").height == 1  # copied per device
    assert trace.calls["device"].to_list() == ["npu:0"]
    assert len(trace.meta.extra["files"]) == 3


def test_csv_and_db_of_the_same_rows_agree(tmp_path):
    """The generator's DB written out as msMemScope's CSV (``{k:v}`` Attr, quoted
    multi-line stacks) loads to the same blocks, levels and markers."""
    import sqlite3

    from benchmarks.generate_memscope import generate_db

    db = generate_db(tmp_path / "memscope_dump_1.db", 20_000, trace_rows=0)
    con = sqlite3.connect(db)
    cursor = con.execute("SELECT * FROM memscope_dump")
    columns = [d[0] for d in cursor.description]
    rows = pl.DataFrame(cursor.fetchall(), schema=columns, orient="row")
    con.close()
    csv_path = tmp_path / "memscope_dump_1.csv"
    rows.with_columns(pl.col("Attr").str.replace_all('"', "")).write_csv(csv_path)
    from_db, from_csv = open_capture(db), open_capture(csv_path)
    validate(from_csv)
    assert summary(from_db)["devices"] == summary(from_csv)["devices"]
    keep = ["block_id", "addr", "size", "t_alloc", "t_free", "owner", "pool", "ghost",
            "first_access", "last_access", "max_access_gap", "flags", "inefficient_type"]
    assert from_db.blocks.select(keep).equals(from_csv.blocks.select(keep))
    assert from_db.events.select("t", "allocated", "reserved").equals(
        from_csv.events.select("t", "allocated", "reserved"))
    assert from_db.markers.select("t", "t_end", "kind", "name").equals(
        from_csv.markers.select("t", "t_end", "kind", "name"))
    assert from_db.stacks.height == from_csv.stacks.height > 0
