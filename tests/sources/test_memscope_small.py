"""msMemScope source on tiny files the tests write, checked against answers worked by hand.

The DB scenario (tests/helpers/memscope_files.py SCENARIO; times below are ns after T0):

    1100 MALLOC HAL  aid 1  4096  never freed            driver memory, C stack
    1200 MALLOC PTA  aid 2  1024  weight, Python stack   accessed 1220, 1580; freed 1600
    1400 MALLOC PTA  aid 3  2048  ops@aten               accessed 2500, 2600, 2700; freed 3100
    2900 FREE   PTA  aid 4   512  no MALLOC: a ghost, alive from the trace start (1000)
    3000 MALLOC PTA  aid 5   256  accessed 3010, never freed; the trace stops at 3200

allocated (PTA only) starts at the ghost's 512 and after each event is
512 1536 1536 3584 3584 2560 2560 2560 2560 2048 2304 2304 256: peak 3584 at 1400,
256 at the end.  The pool's last ``total`` is 8192 (at 3100).  With the default
thresholds (an interval over half the lifetime): aid 2 idles 360 of 400 (temporary
idleness), aid 3 is first touched 1100 of 1700 after its alloc (early allocation), aid 5
is last touched 190 of 200 before the end (late deallocation).
"""

from __future__ import annotations

import polars as pl
import pytest

from memtui.analysis.findings.flags import Threshold, Thresholds, with_inefficient_flags
from memtui.analysis.summary import summary
from memtui.analysis.timeline.levels import allocated_level, reserved_level
from memtui.model import (
    FLAG_EARLY_ALLOCATION,
    FLAG_LATE_DEALLOCATION,
    FLAG_TEMPORARY_IDLENESS,
    validate,
)
from memtui.sources import memscope, open_capture, torch_snapshot
from tests.helpers.memscope_files import (
    C_STACK,
    COLUMNS,
    PY_STACK,
    SCENARIO,
    SCENARIO_TRACE,
    T0,
    write_db,
)


def _open(path):
    trace = open_capture(path)
    validate(trace)
    return trace


@pytest.fixture
def scenario(tmp_path):
    return _open(write_db(tmp_path / "memscope_dump_20260101000000.db", SCENARIO,
                          traces={100: SCENARIO_TRACE}))


def test_summary_figures(scenario):
    data = summary(scenario)
    assert data["source"] == "msmemscope"
    assert set(data["devices"][0].pop("findings")) >= {"leak", "peak", "oom"}
    pinned = ("device", "events", "segments", "blocks", "ghost_blocks", "peak_allocated_bytes",
              "peak_time_ns", "allocated_at_end_bytes", "reserved_at_end_bytes",
              "peak_reserved_bytes")  # (the level statistics: tests/analysis)
    assert [{k: d[k] for k in pinned} for d in data["devices"]] == [{
        # the PTA layer (issue 15): without the HAL MALLOC and its block; segments: the
        # HAL block (aid 1) holds the PTA blocks, alive at the end
        "device": "npu:0", "events": 12, "segments": 1, "blocks": 4, "ghost_blocks": 1,
        "peak_allocated_bytes": 3584, "peak_time_ns": T0 + 1400,
        "allocated_at_end_bytes": 256, "reserved_at_end_bytes": 8192,
        "peak_reserved_bytes": 8192,
    }]
    # the 4 KiB HAL block holds two PTA blocks, and the 512-byte ghost at 0x2000 and the
    # 256-byte block at 0x3000 lie outside it: the pool holds at least 4,608 then 4,352
    # bytes where its rows say 4,096, until its total reads 8,192 (issue 33)
    assert data["warnings"][0] == "1 python-trace rows ending before they start skipped"
    assert len(data["warnings"]) == 2 and "npu:0 PTA: the pool's own total" in \
        data["warnings"][1]
    assert data["devices"][0]["reserved_floor"]


def test_events_sorted_with_levels(scenario):
    events = scenario.events
    assert (events["t"] - T0).to_list() == [1100, 1200, 1220, 1400, 1580, 1600, 2500, 2600,
                                            2700, 2900, 3000, 3010, 3100]
    assert events["id"].to_list() == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 24, 13]
    assert events["action"].cast(pl.String).to_list() == [
        "alloc", "alloc", "access", "alloc", "access", "free", "access", "access", "access",
        "free", "alloc", "access", "free"]
    assert events["allocated"].to_list() == [512, 1536, 1536, 3584, 3584, 2560, 2560, 2560,
                                             2560, 2048, 2304, 2304, 256]
    assert events["reserved"].to_list() == [None] + [4096] * 11 + [8192]
    assert events["pool"].to_list()[:3] == ["HAL", "PTA", "PTA"]
    assert events["event_type"].to_list()[:3] == ["HAL", "PTA", "WRITE"]
    assert events["name"][2] == "aten.add"
    assert events["addr"][0] == 0x1000 and events["size"][0] == 4096
    info = scenario.meta.device("npu:0")
    assert info.start_allocated == 512
    level = allocated_level(scenario, "npu:0")
    assert level.peak() == (3584, 4)
    assert reserved_level(scenario, "npu:0").values[-1] == 8192


def test_blocks_pairs_ghosts_and_access_times(scenario):
    blocks = scenario.blocks.sort("t_alloc", "seq_alloc")
    by_addr = {row["addr"]: row for row in blocks.iter_rows(named=True)}
    ghost = by_addr[0x2000]
    assert ghost["ghost"] and ghost["t_alloc"] == T0 + 1000 and ghost["t_free"] == T0 + 2900
    assert ghost["size"] == 512 and ghost["seq_alloc"] is None
    hal = next(b for b in blocks.iter_rows(named=True) if b["pool"] == "HAL")
    assert hal["t_free"] is None and hal["size"] == 4096 and not hal["ghost"]
    weight = by_addr[0x1400 - 0x400]
    assert weight["owner"] == "PTA@model@weight"
    assert (weight["t_alloc"], weight["t_free"]) == (T0 + 1200, T0 + 1600)
    assert (weight["first_access"], weight["last_access"], weight["max_access_gap"]) == (
        T0 + 1220, T0 + 1580, 360)
    ops = by_addr[0x1400]
    assert ops["owner"] == "PTA@ops@aten"
    assert ops["inefficient_type"] == "early_allocation,temporary_idleness"
    assert (ops["first_access"], ops["last_access"], ops["max_access_gap"]) == (
        T0 + 2500, T0 + 2700, 100)
    alive = by_addr[0x3000]
    assert alive["t_free"] is None and alive["first_access"] == T0 + 3010
    # Each event carries its block's id.
    events = scenario.events.join(blocks.select("block_id", block_addr="addr"), on="block_id")
    assert (events["addr"] == events["block_addr"]).all()


def test_inefficient_flags_default_and_custom(scenario):
    assert scenario.blocks["flags"].null_count() == scenario.blocks.height  # set after loading
    flagged = with_inefficient_flags(scenario)
    flags = {(row["pool"], row["addr"]): row["flags"]
             for row in flagged.blocks.iter_rows(named=True)}
    assert flags == {
        ("HAL", 0x1000): 0,  # never accessed
        ("PTA", 0x2000): 0,  # ghost, never accessed
        ("PTA", 0x1000): FLAG_TEMPORARY_IDLENESS,
        ("PTA", 0x1400): FLAG_EARLY_ALLOCATION,
        ("PTA", 0x3000): FLAG_LATE_DEALLOCATION,
    }
    # A user's thresholds: early allocation over 50 ns, nothing by share of lifetime.
    strict = Thresholds(early_allocation=Threshold(ns=50, percent=None),
                        late_deallocation=Threshold(percent=None),
                        temporary_idleness=Threshold(percent=None))
    custom = with_inefficient_flags(scenario, strict).blocks
    early = custom.filter(pl.col("flags") == FLAG_EARLY_ALLOCATION)["addr"].sort().to_list()
    assert early == [0x1400]  # 1100 ns > 50; aid 2 (20 ns) and aid 5 (10 ns) are not
    assert custom.filter(pl.col("flags") > FLAG_EARLY_ALLOCATION).is_empty()


def test_markers(scenario):
    markers = scenario.markers
    rows = [(r["t"] - T0, None if r["t_end"] is None else r["t_end"] - T0, r["device"],
             r["kind"], r["name"]) for r in markers.iter_rows(named=True)]
    assert rows == [
        (1000, None, None, "trace", "start trace"),
        (1150, 3050, "npu:0", "mstx_range", "step"),
        (1210, 1290, "npu:0", "op", "torch._ops.aten.add.Tensor"),
        (1220, None, "npu:0", "kernel", "k1"),
        (1250, None, "npu:0", "mstx", "hello"),
        (1700, None, None, "step", "step 1"),
        (3150, None, "npu:0", "snapshot", "Memory Snapshot"),
        (3160, None, "npu:0", "oom", "oom trigger"),
        (3200, None, None, "trace", "stop trace"),
    ]
    assert '"req_size":"1073741824"' in markers.filter(pl.col("kind") == "oom")["detail"].item()


def test_calls_depth_as_insight(scenario):
    calls = scenario.calls
    got = [(r["thread"], r["name"], r["t_start"] - T0, r["t_end"] - T0, r["depth"])
           for r in calls.iter_rows(named=True)]
    # N/A start -> trace start (1000); N/A end -> trace end (3200).
    assert got == [
        ("100", "/m.py(1): a", 1000, 2000, 0),
        ("100", "start: /m.py(9): e", 1000, 1050, 1),
        ("100", "/m.py(2): b", 1100, 1500, 1),
        ("100", "/m.py(3): c", 1200, 1300, 2),
        ("100", "/m.py(4): d", 1600, 1900, 1),
        ("100", "stop: /m.py(5): f", 2500, 3200, 0),
        ("200", "/m.py(6): g", 1300, 1400, 0),
    ]
    assert set(calls["device"]) == {"npu:0"}


def test_stacks_interned(scenario):
    frames = {r["frame_id"]: (r["filename"], r["line"], r["name"])
              for r in scenario.frames.iter_rows(named=True)}
    stacks = {r["stack_id"]: [frames[f] for f in r["frame_ids"]]
              for r in scenario.stacks.iter_rows(named=True)}
    blocks = scenario.blocks
    py_ids = blocks.filter(pl.col("owner").is_in(["PTA@model@weight", "PTA@ops@aten"]))["stack_id"]
    assert py_ids.n_unique() == 1  # the same Python stack, interned once
    assert stacks[py_ids[0]] == [("/home/u/train.py", 10, "forward"),
                                 ("/home/u/train.py", 20, "<module>")]
    hal = blocks.filter(pl.col("pool") == "HAL")
    assert hal["stack_id"].item() == hal["c_stack_id"].item()
    assert stacks[hal["c_stack_id"].item()] == [("/lib/libhook.so", 0, "halMemAlloc+0x118"),
                                                ("/lib/libruntime.so", 0, "+0x3e1214")]
    assert len(stacks) == 2 and len(frames) == 4


@pytest.mark.parametrize("variant", ["insight", "leaks_dump", "no_stacks"])
def test_schema_variants_give_the_same_figures(tmp_path, variant):
    kwargs = {"traces": {100: SCENARIO_TRACE}}
    if variant == "insight":
        kwargs["insight"] = True  # extra tables, indexes, ID primary key, Depth column
    elif variant == "leaks_dump":
        kwargs["table"] = "leaks_dump"
    else:
        kwargs["columns"] = COLUMNS[:10]  # mid-2025: no call-stack columns
    trace = _open(write_db(tmp_path / f"{variant}.db", SCENARIO, **kwargs))
    figures = summary(trace)["devices"][0]
    assert (figures["events"], figures["blocks"], figures["ghost_blocks"]) == (12, 4, 1)
    assert (figures["peak_allocated_bytes"], figures["allocated_at_end_bytes"],
            figures["reserved_at_end_bytes"]) == (3584, 256, 8192)
    assert trace.calls["depth"].to_list() == [0, 1, 1, 2, 1, 0, 0]
    assert trace.markers.height == 9
    if variant == "no_stacks":
        assert trace.frames.is_empty() and trace.blocks["stack_id"].null_count() == 5


def test_ids_repeat_across_processes(tmp_path):
    """Two processes with the same IDs and allocation ids are two sets of blocks."""
    from tests.helpers.memscope_files import mem

    rows = []
    for pid, dev in ((1, "0"), (2, "1")):
        for r in (mem(1, "MALLOC", "PTA", 100, 1, 0x10, 64, total=1024),
                  mem(2, "FREE", "PTA", 200, 1, 0x10, 64, total=1024),
                  mem(3, "MALLOC", "PTA", 300, 2, 0x10, 32, total=2048)):
            r = list(r)
            r[5], r[6], r[7] = pid, pid, dev
            rows.append(tuple(r))
    trace = _open(write_db(tmp_path / "two.db", rows))
    figures = {d["device"]: d for d in summary(trace)["devices"]}
    assert set(figures) == {"npu:0", "npu:1"}
    for d in figures.values():
        assert (d["events"], d["blocks"], d["ghost_blocks"]) == (3, 2, 0)
        assert (d["peak_allocated_bytes"], d["allocated_at_end_bytes"]) == (64, 32)
        assert d["reserved_at_end_bytes"] == 2048


def test_pairing_by_pointer_without_allocation_id(tmp_path):
    """Old rows: no allocation_id; pairs on (process, device, pointer, pool) in time order.

    Pointer 0x10: FREE (ghost) - MALLOC - FREE - FREE (a second ghost) - MALLOC (alive).
    The same pointer in the HAL pool is a separate block.
    """
    from tests.helpers.memscope_files import row

    def r(id_, event, t, size, pool="PTA"):
        attrs = {"addr": "16", "size": size, "owner": ""}
        if pool == "PTA":
            attrs["total"] = 4096
        return row(id_, event, pool, t, ptr="16", attrs=attrs)

    rows = [r(1, "FREE", 100, -64), r(2, "MALLOC", 200, 128), r(3, "MALLOC", 250, 999, "HAL"),
            r(4, "FREE", 300, -128), r(5, "FREE", 400, -32), r(6, "MALLOC", 500, 16)]
    trace = _open(write_db(tmp_path / "old.db", rows))
    blocks = trace.blocks.sort("seq_alloc", "seq_free", nulls_last=False)
    got = [(b["pool"], b["size"], b["ghost"], b["t_free"] is None)
           for b in blocks.iter_rows(named=True)]
    assert sorted(got) == sorted([("PTA", 64, True, False), ("PTA", 32, True, False),
                                  ("PTA", 128, False, False), ("HAL", 999, False, True),
                                  ("PTA", 16, False, True)])
    # start = 64 + 32 (the ghosts), then -64 +128 (HAL: no change) -128 -32 +16
    assert trace.events["allocated"].to_list() == [32, 160, 160, 32, 0, 16]
    assert trace.meta.device("npu:0").start_allocated == 96


def test_sniff_claims_only_memscope(tmp_path):
    import pickle
    import sqlite3

    db = write_db(tmp_path / "x.db", SCENARIO[:3])
    assert memscope.sniff(db)
    profiler = tmp_path / "ascend_pytorch_profiler_0.db"
    con = sqlite3.connect(profiler)
    con.execute("CREATE TABLE MEMORY_RECORD (component TEXT, timestamp INTEGER)")
    con.commit()
    con.close()
    assert not memscope.sniff(profiler)
    snapshot = tmp_path / "snap.pickle"
    snapshot.write_bytes(pickle.dumps({"segments": [], "device_traces": []}))
    assert not memscope.sniff(snapshot) and torch_snapshot.sniff(snapshot)
    other_csv = tmp_path / "memory_record.csv"
    other_csv.write_text("Component,Timestamp(us),Total Allocated(MB)\nAPP,1,2\n")
    assert not memscope.sniff(other_csv)
    assert not memscope.sniff(tmp_path / "missing.db")
    (tmp_path / "prof_ascend_pt").mkdir()
    assert not memscope.sniff(tmp_path / "prof_ascend_pt")


def test_stack_texts_parse_with_and_without_quotes(tmp_path):
    from tests.helpers.memscope_files import mem

    unquoted = PY_STACK.strip('"')
    rows = [mem(1, "MALLOC", "PTA", 100, 1, 0x10, 8, py=PY_STACK, c=C_STACK, total=64),
            mem(2, "MALLOC", "PTA", 200, 2, 0x20, 8, py=unquoted, total=64),
            mem(3, "MALLOC", "PTA", 300, 3, 0x30, 8, py='"NA"', total=64)]
    trace = _open(write_db(tmp_path / "s.db", rows))
    ids = trace.blocks.sort("t_alloc")["stack_id"].to_list()
    assert ids[0] == ids[1] and ids[2] is None
    assert trace.stacks.height == 2  # the Python stack once, the C stack once


def test_per_pool_curves(scenario):
    """Insight's one line per Event Type: Allocated for every pool, Reserved (total) for PTA."""
    curves = scenario.curves
    assert levels_of(curves, "Allocated", "PTA") == [
        (1200, 1536), (1400, 3584), (1600, 2560), (2900, 2048), (3000, 2304), (3100, 256)]
    assert levels_of(curves, "Allocated", "HAL") == [(1100, 4096)]
    assert levels_of(curves, "Reserved", "PTA") == [
        (1200, 4096), (1400, 4096), (1600, 4096), (2900, 4096), (3000, 4096), (3100, 8192)]
    assert curves.filter(pl.col("series") == "Reserved", pl.col("component") == "HAL").is_empty()
    # The device-wide level still comes from the events (no "Operators Allocated" curve).
    assert allocated_level(scenario, "npu:0").peak()[0] == 3584


def levels_of(curves, series, component):
    rows = curves.filter(pl.col("series") == series, pl.col("component") == component)
    return [(t - T0, b) for t, b in rows.select("t", "bytes").iter_rows()]
