"""msMemScope source on the real captures of ../shared/data/msmemscope (skipped without them).

Expected figures were worked out from the rows (counted with awk/sqlite by hand) and, where
the file carries one, against an independent witness: msMemScope's own ``used`` attribute
(the pool's allocated bytes after each event) and MindStudio Insight's cached
``memory_allocation`` table in the prototype ``.dat``.
"""

from __future__ import annotations

import csv
import re

import polars as pl
import pytest

from memtui.analysis.summary import summary
from memtui.model import validate
from memtui.sources import memscope, open_capture
from memtui.sources.common.sqlite import connect_readonly
from tests.conftest import require_shared


@pytest.fixture(scope="module")
def data():
    return require_shared("msmemscope")


#: The figures these tests pin; the level statistics and what was alive before the
#: capture (average, least, in all, median block) are pinned in tests/analysis.
FIGURES = ("device", "events", "segments", "blocks", "ghost_blocks", "peak_allocated_bytes",
           "peak_time_ns", "allocated_at_end_bytes", "reserved_at_end_bytes",
           "peak_reserved_bytes")


def _figures(trace):
    """The summary by device: its :data:`FIGURES` (findings: tests/test_findings*.py)."""
    return {d["device"]: {k: d[k] for k in FIGURES if k in d}
            for d in summary(trace)["devices"]}


def _max_used(path) -> int:
    """The largest ``used`` msMemScope wrote on a PTA row: its own allocated level."""
    with open(path, newline="") as fh:
        return max(int(re.search(r"used:(\d+)", row["Attr"]).group(1))
                   for row in csv.DictReader(fh) if row["Event Type"] == "PTA")


def test_every_file_opens(data):
    before = sorted(p.name for p in data.iterdir())
    files = sorted(p for p in data.iterdir() if p.suffix in (".csv", ".db", ".dat"))
    assert len(files) == 6
    for path in files:
        assert memscope.sniff(path), path
        trace = open_capture(path)
        validate(trace)
        assert trace.meta.source == "msmemscope" and trace.events.height > 0
    assert sorted(p.name for p in data.iterdir()) == before  # no -wal/-shm left behind


def test_compare_baseline_csv(data):
    path = data / "example__compare__baseline.csv"
    trace = open_capture(path)
    # 18 MALLOC PTA + 14 FREE PTA + 5 MALLOC HAL + 2 FREE HAL, all on device 0.  The
    # summary is the PTA layer's (issue 15: one layer per device, the framework pool by
    # default): its 32 events and 18 blocks; its segments are the HAL allocations holding
    # PTA blocks, none of them alive at the end.
    assert _figures(trace) == {"npu:0": {
        "device": "npu:0", "events": 32, "segments": 0, "blocks": 18, "ghost_blocks": 0,
        "peak_allocated_bytes": 16781824, "peak_time_ns": 1764753084527393370,
        "allocated_at_end_bytes": 3072, "reserved_at_end_bytes": 20971520,
        "peak_reserved_bytes": 20971520}}
    assert _max_used(path) == 16781824
    blocks = trace.blocks
    # Never freed: PTA allocation ids 14 (1536), 15, 20, 21 (512 each); HAL 5, 9, 12.
    alive = blocks.filter(pl.col("t_free").is_null())
    assert sorted(alive.filter(pl.col("pool") == "PTA")["size"].to_list()) == [512, 512, 512, 1536]
    assert sorted(alive.filter(pl.col("pool") == "HAL")["size"].to_list()) == [
        2097152, 2097152, 2815668]
    # Rows are written at free time: events come out sorted by time anyway.
    assert trace.events["t"].is_sorted()
    ops = trace.markers.filter(pl.col("kind") == "op")
    assert ops.height == 40 and ops["t_end"].null_count() == 0
    assert (ops["t_end"] >= ops["t"]).all()
    assert trace.markers.filter(pl.col("kind") == "trace")["name"].to_list() == [
        "start trace", "stop trace"]


def test_compare_leaks_csv(data):
    path = data / "example__compare__leaks.csv"
    trace = open_capture(path)
    (d,) = _figures(trace).values()
    assert (d["events"], d["blocks"], d["ghost_blocks"]) == (34, 20, 0)  # the PTA layer
    assert d["peak_allocated_bytes"] == _max_used(path)
    live = trace.blocks.filter(pl.col("t_free").is_null() & (pl.col("pool") == "PTA"))
    assert d["allocated_at_end_bytes"] == live["size"].sum()


@pytest.mark.parametrize(("name", "kernels"), [
    ("test__smoke__testfile__csvfile__memscope_dump_20250428113810.csv", 12),
    ("test__smoke__testfile__csvfile__memscope_dump_20250428113811.csv", 10)])
def test_2025_smoke_csv(data, name, kernels):
    """Two processes (devices 0 and 1), µs times, decimal pointers, host HAL memory.

    npu:0: 36 MALLOC HAL + 226 MALLOC PTA + 7 FREE PTA; npu:1: 2 + 15 + 7, four of whose
    FREEs have no MALLOC before them (ghosts); host: 10 MALLOC HAL and 7 of the 9 HAL
    FREEs with Device Id N/A (their pointer's MALLOCs are on host; one FREE comes before
    them: a ghost); the other 2 match no MALLOC at all and are skipped.
    """
    trace = open_capture(data / name)
    figures = _figures(trace)
    # the summary is per layer: PTA on the devices (226 + 7, 15 + 7 rows), HAL on the host
    assert [(k, d["events"], d["blocks"], d["ghost_blocks"]) for k, d in figures.items()] == [
        ("npu:0", 233, 226, 0), ("npu:1", 22, 19, 4), ("host", 17, 11, 1)]
    assert trace.meta.warnings == [
        "2 memory rows with no device and no MALLOC of their pointer skipped"]
    assert trace.events["t"].min() == 1746006014361575000  # µs -> ns
    host = trace.events.filter(pl.col("device") == "host")
    assert host["allocated"].max() == 0  # HAL is not a framework pool
    # the host's layer is HAL: its live driver allocations are its allocated bytes
    assert figures["host"]["allocated_at_end_bytes"] == trace.blocks.filter(
        (pl.col("device") == "host") & pl.col("t_free").is_null())["size"].sum()
    assert figures["host"]["reserved_at_end_bytes"] is None
    mstx = trace.markers.filter(pl.col("kind").str.starts_with("mstx"))
    assert sorted(mstx["name"].to_list()) == ["[mstx]: mstxMarkA :------training start-----",
                                              "[mstx]: mstxMarkA :------training start-----",
                                              "step start", "step start"]
    assert trace.markers.filter(pl.col("kind") == "kernel").height == kernels


def test_insight_host_pinned_db(data):
    """10 rows: 6 HOST_PINNED MALLOCs on ``cpu``, 1 FREE, SYSTEM rows; Insight's tables."""
    path = data / "msinsight__host_pinned__memscope_dump_20260527062213.db"
    trace = open_capture(path)
    assert _figures(trace) == {"host": {
        "device": "host", "events": 7, "segments": None, "blocks": 6, "ghost_blocks": 0,
        # the HOST_PINNED layer (no framework pool here, issue 15): its bytes are allocated;
        # one 3018752-byte pinned block was freed: 19664896 + 3018752 at the most
        "peak_allocated_bytes": 22683648, "peak_time_ns": 1779862932853914150,
        "allocated_at_end_bytes": 19664896, "reserved_at_end_bytes": None,
        "peak_reserved_bytes": None}}
    # Insight's own memory_allocation ends at the same 19664896 live pinned bytes.
    con = connect_readonly(path)  # plain mode=ro would leave -wal/-shm files beside a WAL file
    assert con.execute("SELECT totalSize FROM memory_allocation ORDER BY timestamp DESC "
                       "LIMIT 1").fetchone()[0] == 19664896
    con.close()
    block = trace.blocks.filter(pl.col("addr") == 0x12C080800000).row(0, named=True)
    assert block["t_free"] == 1779862932853939150
    frames = {r["frame_id"]: r for r in trace.frames.iter_rows(named=True)}
    stack = trace.stacks.filter(pl.col("stack_id") == block["stack_id"])["frame_ids"].item()
    assert [(frames[f]["filename"], frames[f]["line"], frames[f]["name"]) for f in stack] == [
        ("/home/maochen/tools/msmemscope/python/msmemscope/aten_collection.py", 174,
         "__torch_dispatch__"), ("/home/maochen/a.py", 11, "<module>")]
    # A block keeps its MALLOC's stacks; its FREE row has its own (halMemFree).
    c_stack = trace.stacks.filter(pl.col("stack_id") == block["c_stack_id"])["frame_ids"].item()
    assert len(c_stack) == 10
    assert frames[c_stack[0]]["name"] == "halMemAlloc+0x118"
    free = trace.events.filter(pl.col("action") == "free").row(0, named=True)
    free_stack = trace.stacks.filter(pl.col("stack_id") == free["c_stack_id"])["frame_ids"].item()
    assert frames[free_stack[0]]["name"] == "halMemFree+0x118"


def test_insight_prototype_dat(data):
    """Early Insight prototype schema: camelCase columns, JSON Attr with spaces, µs times.

    Insight's cached memory_allocation (PTA totals per device) peaks at 20428800 on
    device 0 and 421186048 on device 1 (two processes share it): memtui's peaks match.
    All 217 HAL FREEs with Device Id N/A find their pointer's MALLOC.
    """
    path = data / "msinsight_mirror__full_db__leaks_dump_2025.dat"
    trace = open_capture(path)
    figures = _figures(trace)
    assert [(k, d["events"], d["blocks"], d["ghost_blocks"], d["peak_allocated_bytes"])
            for k, d in figures.items()] == [
        # per layer (issue 15): PTA on the devices, HAL on the host
        ("npu:0", 4540, 2270, 0, 20428800), ("npu:1", 4740, 2370, 0, 421186048),
        ("host", 70, 35, 0, 34033728)]
    con = connect_readonly(path)  # plain mode=ro would leave -wal/-shm files beside a WAL file
    memory_rows = con.execute(
        "SELECT count(*) FROM leaks_dump WHERE event IN ('MALLOC','FREE','ACCESS')").fetchone()[0]
    insight = dict(con.execute("SELECT deviceId, max(totalSize) FROM memory_allocation "
                               "WHERE eventType = 'PTA' GROUP BY deviceId").fetchall())
    con.close()
    assert trace.events.height == memory_rows == 9741  # no memory row lost
    assert insight == {"0": 20428800, "1": 421186048}
    assert "Insight prototype" in trace.meta.warnings[0]
    ranges = trace.markers.filter(pl.col("kind") == "mstx_range")
    assert ranges.height == 100  # 50 Range_start per device
    assert ranges["t_end"].null_count() == 2  # one range per device never ended
