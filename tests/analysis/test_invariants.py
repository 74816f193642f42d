"""No impossible figure (issue 33 items 2 and 7): the invariants of DESIGN.md section 3 hold
at every event, per memory layer, on every capture at hand, or the figure says what is
known.

At every event: allocated <= reserved; free = reserved - allocated is never negative; the
segments listed add up to reserved where the layout is complete (snapshots), never to
more than it elsewhere.  :func:`memtui.model.validate` checks them; the sweep below runs
it on every capture of ../shared/data, tests/data, the demos and the findings corpus
(every layer of a layered capture), and checks what ``summary --json`` and ``state
--json`` say.  Files that contradict the invariants (a pool's own total below the blocks
it holds, a dump whose blocks overflow their segment) are made by hand here with their
right answers: reserved is the least it can be, said ``>= X`` with its ceiling where the
file bounds it, and one warning names the file, the device, the layer and the rows.
"""

from __future__ import annotations

import csv
import io
import json
import pickle
from pathlib import Path

import pytest

from benchmarks.findings_corpus import cases, write_case
from memtui.analysis.layout.state import allocator_state
from memtui.analysis.summary import summary
from memtui.analysis.timeline.layers import default_layers, has_layers, layer_view, layers_of
from memtui.cli import main
from memtui.loading import load_trace
from memtui.model import ModelError, level_breaches, validate
from memtui.sources import open_capture
from tests.conftest import REPO, SHARED_DATA
from tests.helpers.memscope_files import COLUMNS, mem, write_text
from tests.helpers.run_profile import LONG
from tests.sources.test_torch_snapshot_small import block, entry, segment, write

MiB = 1 << 20
SEG = 0x7F00_0000_0000


def _captures() -> list[Path]:
    shared = []
    if SHARED_DATA.is_dir():
        for folder, patterns in (("torch_snapshots", ("*.pickle", "*.pkl")),
                                 ("msmemscope", ("*.db", "*.dat", "*.csv")),
                                 ("profiler", ("*.db", "*.csv"))):
            for pattern in patterns:
                shared += sorted((SHARED_DATA / folder).glob(pattern))
    own = sorted((REPO / "tests" / "data").glob("*.pickle"))
    demos = sorted((REPO / "snapshots").glob("*.pickle"))
    return shared + own + demos


def _views(trace):
    """The trace itself, or for a layered capture every layer of every device."""
    if not has_layers(trace):
        return [trace]
    views = []
    for device in trace.meta.device_names:
        for layer in layers_of(trace, device):
            chosen = default_layers(trace)
            chosen[device] = layer
            views.append(layer_view(trace, chosen))
    return views


def _check_figures(view) -> None:
    """The invariants, and the figures ``summary --json`` and ``state --json`` give."""
    validate(view)
    for figures in summary(view)["devices"]:
        peak, end = figures["peak_reserved_bytes"], figures["reserved_at_end_bytes"]
        if peak is not None and end is not None:
            assert end <= peak
    for device in view.meta.device_names:
        if view.device_events(device).is_empty():
            continue
        for event in ("first", "peak", "last"):
            state = allocator_state(view, device, event)
            level = state["level"]
            if level["reserved"] is None:
                continue
            held = sum(s["size"] for s in state["segments"] if s["size"] is not None)
            assert level["allocated"] <= level["reserved"], (device, event)
            assert held <= level["reserved"], (device, event)
            # free + the bytes the blocks cover never exceed reserved (a file whose live
            # blocks overlap counts their shared bytes once here)
            assert state["free_bytes"] + _covered(state) <= level["reserved"], (device, event)
            _check_placement(state)


def _check_placement(state: dict) -> None:
    """Each listed segment is its blocks (shared bytes once) and its free ranges; what the
    blocks share is ``overlap_bytes``; the reserved bytes in no listed segment are
    ``unplaced_bytes``."""
    held = sum(b["size"] for s in state["segments"] for b in s["blocks"]
               if b["state"] != "free" and b["addr"] is not None)
    assert held - state["overlap_bytes"] == _covered(state)
    listed = 0
    for seg in state["segments"]:
        if seg["addr"] is None:
            continue
        listed += seg["size"]
        assert _covered({"segments": [seg]}) + sum(
            b["size"] for b in seg["blocks"] if b["state"] == "free") == seg["size"]
    assert state["unplaced_bytes"] == max(state["level"]["reserved"] - listed, 0)


def _covered(state: dict) -> int:
    """The bytes the live blocks of ``state`` cover (overlaps once)."""
    ranges = sorted((b["addr"], b["addr"] + b["size"]) for s in state["segments"]
                    for b in s["blocks"] if b["state"] != "free" and b["addr"] is not None)
    covered, end = 0, None
    for lo, hi in ranges:
        if end is None or lo >= end:
            covered += hi - lo
            end = hi
        elif hi > end:
            covered += hi - end
            end = hi
    return covered


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.name)
def test_every_capture_keeps_the_invariants(path):
    trace = load_trace(path, use_cache=False)
    for view in _views(trace):
        _check_figures(view)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("full" if LONG else "fast"), ids=lambda c: c.name)
def test_every_corpus_capture_keeps_the_invariants(case, tmp_path):
    """The findings corpus (benchmarks/findings_corpus.py): its fast slice in the short
    profile, every case under MEMTUI_TEST_PROFILE=long."""
    path, _ = write_case(case, tmp_path)
    for view in _views(load_trace(path, use_cache=False)):
        validate(view)


# -- what validate refuses --------------------------------------------------------------------

def test_validate_refuses_allocated_above_reserved(tmp_path):
    trace = open_capture(write(tmp_path, {
        "segments": [segment(SEG, [block(SEG, 2 * MiB, "active_allocated")])],
        "device_traces": [[entry("alloc", SEG, 2 * MiB, t=1)]]}))
    validate(trace)
    broken = trace.events.with_columns(reserved=trace.events["reserved"] - 4 * MiB)
    trace.events = broken
    assert level_breaches(trace)
    with pytest.raises(ModelError, match="allocated above reserved"):
        validate(trace)


def test_validate_refuses_segments_that_do_not_add_up(tmp_path):
    trace = open_capture(write(tmp_path, {
        "segments": [segment(SEG, [block(SEG, 2 * MiB, "active_allocated"),
                                   block(SEG + 2 * MiB, 2 * MiB, "inactive")])],
        "device_traces": [[entry("alloc", SEG, 2 * MiB, t=1)]]}))
    trace.events = trace.events.with_columns(reserved=trace.events["reserved"] + MiB)
    with pytest.raises(ModelError, match="segments alive differ from reserved"):
        validate(trace)


# -- a dump whose blocks do not fill their segment (item 7) -----------------------------------

def _overflowing_dump() -> dict:
    """One segment of 250 MiB whose blocks, by the dump, take 2,150 MiB (4 x 512 MiB and
    102 MiB): PyTorch's segsum refuses it."""
    blocks = [block(SEG + i * 512 * MiB, 512 * MiB, "active_allocated") for i in range(4)]
    blocks.append(block(SEG + 2048 * MiB, 102 * MiB, "active_allocated", requested=100 * MiB))
    seg = segment(SEG, blocks)
    seg["total_size"] = 250 * MiB
    return {"segments": [seg], "device_traces": [[]]}


def test_a_dump_whose_blocks_overflow_their_segment_says_what_is_known(tmp_path, capsys):
    path = write(tmp_path, _overflowing_dump(), name="overflow.pickle")
    trace = load_trace(path, use_cache=False)
    validate(trace)
    info = trace.meta.device("cuda:0")
    assert info.reserved_at_end == 2150 * MiB  # at least its blocks; the dump said 250 MiB
    assert info.reserved_floor and "250.0 MiB" in info.reserved_floor
    warnings = [w for w in trace.meta.warnings if "segsum" in w]
    assert len(warnings) == 1 and "overflow.pickle" in warnings[0] and "cuda:0" in warnings[0]
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "reserved >= 2.1 GiB" in out
    assert main(["summary", "--json", str(path)]) == 0
    device = json.loads(capsys.readouterr().out)["devices"][0]
    assert device["reserved_at_end_bytes"] >= device["allocated_at_end_bytes"] == 2150 * MiB
    assert device["reserved_floor"]
    assert main(["state", str(path)]) == 0
    assert "reserved >= 2.1 GiB" in capsys.readouterr().out
    page = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(page)]) == 0
    html = page.read_text()
    assert "&gt;= 2.1 GiB" in html and "segsum" in html


def test_blocks_outside_every_segment_raise_reserved_to_allocated(tmp_path):
    """An alloc at an address no segment (traced or dumped) holds: the ring buffer lost
    its segment_alloc and the segment was freed before the dump.  Reserved is at least
    the 3 MiB allocated while it lives, and said to be a floor."""
    data = {"segments": [segment(SEG, [block(SEG, 2 * MiB, "inactive")])],
            "device_traces": [[entry("alloc", SEG + (1 << 32), 3 * MiB, t=1),
                               entry("free_requested", SEG + (1 << 32), 3 * MiB, t=2),
                               entry("free_completed", SEG + (1 << 32), 3 * MiB, t=3)]]}
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    assert trace.events["reserved"].to_list() == [3 * MiB, 3 * MiB, 2 * MiB]
    info = trace.meta.device("cuda:0")
    assert info.reserved_floor and "outside every segment" in info.reserved_floor
    assert not info.layout_complete


# -- msMemScope: a pool's own total below what it holds ---------------------------------------

def _csv(rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return out.getvalue()


def _pool_below_its_blocks() -> list:
    """A HAL allocation of 8 KiB at 0x10000 holds two PTA blocks (4 KiB, 2 KiB) whose rows
    say the pool's total is 2 KiB; a 1 MiB HAL allocation elsewhere holds no PTA block.
    Rows in the writer's order (a block's rows when it is freed)."""
    return [
        mem(6, "FREE", "PTA", 400, 3, 0x10000, 4096, total=2048, used=2048),
        mem(3, "MALLOC", "PTA", 200, 3, 0x10000, 4096, total=2048, used=4096, owner=""),
        mem(7, "FREE", "PTA", 500, 4, 0x11000, 2048, total=2048, used=0),
        mem(5, "MALLOC", "PTA", 300, 4, 0x11000, 2048, total=2048, used=6144, owner=""),
        mem(8, "FREE", "HAL", 600, 1, 0x10000, 8192),
        mem(1, "MALLOC", "HAL", 100, 1, 0x10000, 8192, owner=""),
        mem(2, "MALLOC", "HAL", 150, 2, 0x90000, MiB, owner=""),
    ]


def test_a_pool_total_below_its_blocks_is_a_floor_with_a_ceiling(tmp_path, capsys):
    """PTA layer, worked out by hand: reserved after each PTA event is the 8 KiB HAL
    allocation holding the blocks (more than the pool's 2 KiB and than the 4 KiB and
    6 KiB allocated); at most the HAL layer's peak, 8 KiB + 1 MiB."""
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(_pool_below_its_blocks()))
    trace = load_trace(path, use_cache=False)
    view = layer_view(trace, {"npu:0": "PTA"})
    validate(view)
    events = view.device_events("npu:0")
    assert events["allocated"].to_list() == [4096, 6144, 2048, 0]
    assert events["reserved"].to_list() == [8192, 8192, 8192, 8192]
    info = view.meta.device("npu:0")
    assert info.reserved_ceiling == 8192 + MiB
    assert info.reserved_floor
    said = [w for w in view.meta.warnings if "pool's own total" in w]
    assert len(said) == 1
    assert all(name in said[0] for name in ("memscope_dump_1.csv", "npu:0", "PTA",
                                            "rows 3 to 7", "1.0 MiB"))
    assert main(["state", str(path), "--layer", "PTA"]) == 0
    out = capsys.readouterr().out
    assert "reserved >= 8.0 KiB (at most 1.0 MiB)" in out
    assert main(["summary", "--json", str(path)]) == 0
    device = json.loads(capsys.readouterr().out)["devices"][0]
    assert device["reserved_ceiling_bytes"] == 8192 + MiB and device["reserved_floor"]


def _held_and_not(dev: str, shift: int) -> list:
    """On device ``dev``: a HAL allocation of 8 KiB at 0x10000 (t 100-600) holds the PTA
    block A (4 KiB, t 200-400); the PTA block B (2 KiB at 0x50000, t 300-500) lies in no
    HAL allocation of the capture; the pool's rows say its total is 2 KiB.  ``shift``
    moves the times and the allocation ids (two devices of one process interleaved: the
    process numbers its allocations across its devices)."""
    return [
        mem(1 + shift, "MALLOC", "HAL", 100 + shift, 1 + shift, 0x10000, 8192, dev=dev, owner=""),
        mem(2 + shift, "MALLOC", "PTA", 200 + shift, 3 + shift, 0x10000, 4096, dev=dev, total=2048,
            used=4096, owner=""),
        mem(3 + shift, "MALLOC", "PTA", 300 + shift, 4 + shift, 0x50000, 2048, dev=dev, total=2048,
            used=6144, owner=""),
        mem(4 + shift, "FREE", "PTA", 400 + shift, 3 + shift, 0x10000, 4096, dev=dev, total=2048,
            used=2048),
        mem(5 + shift, "FREE", "PTA", 500 + shift, 4 + shift, 0x50000, 2048, dev=dev, total=2048,
            used=0),
        mem(6 + shift, "FREE", "HAL", 600 + shift, 1 + shift, 0x10000, 8192, dev=dev),
    ]


@pytest.mark.parametrize("devices", [("0",), ("0", "1")])
def test_blocks_no_driver_allocation_holds_add_to_what_is_held(tmp_path, devices):
    """Worked out by hand, PTA layer of each device: allocated 4, 6, 2, 0 KiB; held is the
    8 KiB HAL allocation holding A plus B, which none holds (0, 2, 2, 0 KiB): reserved
    8, 10, 10, 8 KiB (above the pool's own 2 KiB).  On two devices whose rows interleave,
    each device's levels are its own."""
    rows = [r for i, dev in enumerate(devices) for r in _held_and_not(dev, shift=10 * i)]
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(rows))
    trace = load_trace(path, use_cache=False)
    view = layer_view(trace, {f"npu:{dev}": "PTA" for dev in devices})
    validate(view)
    for dev in devices:
        events = view.device_events(f"npu:{dev}")
        assert events["allocated"].to_list() == [4096, 6144, 2048, 0]
        assert events["reserved"].to_list() == [8192, 10240, 10240, 8192]


def test_no_block_held_by_a_driver_allocation_is_reserved_at_its_blocks(tmp_path):
    """The same blocks, the HAL allocation elsewhere (0x90000, holding neither): no
    container, every block outside; reserved is the pool's 2 KiB total where it is at
    least what is allocated, else the allocated bytes: 4, 6, 2, 2 KiB."""
    rows = [r if "HAL" not in r else tuple(x.replace("0x0000000000010000", "0x0000000000090000")
                                           if isinstance(x, str) else x for x in r)
            for r in _held_and_not("0", shift=0)]
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(rows))
    view = layer_view(load_trace(path, use_cache=False), {"npu:0": "PTA"})
    validate(view)
    events = view.device_events("npu:0")
    assert events["allocated"].to_list() == [4096, 6144, 2048, 0]
    assert events["reserved"].to_list() == [4096, 6144, 2048, 2048]


def test_a_consistent_pool_is_no_floor(tmp_path):
    """The same rows with the pool's totals true (8 KiB): exact figures, no warning."""
    rows = [tuple(r[:9]) + (r[9].replace('"total":"2048"', '"total":"8192"'),) + tuple(r[10:])
            for r in _pool_below_its_blocks()]
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(rows))
    view = layer_view(load_trace(path, use_cache=False), {"npu:0": "PTA"})
    validate(view)
    assert view.meta.device("npu:0").reserved_floor is None
    assert view.device_events("npu:0")["reserved"].to_list() == [8192] * 4
    assert not [w for w in view.meta.warnings if "pool's own total" in w]


# -- the real files the issue names ---------------------------------------------------------

DAT = SHARED_DATA / "msmemscope" / "msinsight_mirror__full_db__leaks_dump_2025.dat"


def test_the_dat_mirror_says_what_is_known():
    """npu:1 at the peak: allocated 401.7 MiB, the pool's own total 38 MiB, the 456 MiB of
    driver allocations holding its blocks: reserved >= 456 MiB, at most the HAL layer's
    peak; npu:0 at the end: the 4 MiB of driver allocations still holding its pool, not
    free 4 MiB of reserved 0."""
    if not DAT.exists():
        pytest.skip(f"{DAT} is absent (../shared is not checked out)")
    view = layer_view(load_trace(DAT, use_cache=False))
    validate(view)
    peak = allocator_state(view, "npu:1", "peak")
    assert peak["level"]["allocated"] == pytest.approx(401.7 * MiB, rel=1e-3)
    assert peak["level"]["reserved"] >= sum(s["size"] for s in peak["segments"])
    assert peak["level"]["reserved_is_floor"]
    assert peak["level"]["reserved_ceiling"] >= peak["level"]["reserved"]
    end = allocator_state(view, "npu:0", "last")
    assert end["free_bytes"] <= end["level"]["reserved"] - end["level"]["allocated"]
    assert end["level"]["reserved"] == 4 * MiB
    assert len([w for w in view.meta.warnings if "pool's own total" in w]) == 2


SMOKE = "test__smoke__testfile__csvfile__memscope_dump_2025042811381{}.csv"


@pytest.mark.parametrize("name", [SMOKE.format(0), SMOKE.format(1)])
def test_the_smoke_csvs_never_show_allocated_above_reserved(name):
    path = SHARED_DATA / "msmemscope" / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is not checked out)")
    view = layer_view(load_trace(path, use_cache=False))
    validate(view)
    state = allocator_state(view, "npu:0", "peak")
    assert state["level"]["allocated"] == pytest.approx(3.5 * MiB, rel=0.02)
    assert state["level"]["reserved"] >= state["level"]["allocated"]


def test_overflow_dump_pickle_round_trip(tmp_path):
    """The hand-made dump is what the test above reads: blocks of 2,150 MiB in a segment
    that says 250 MiB."""
    data = pickle.loads(write(tmp_path, _overflowing_dump()).read_bytes())
    seg = data["segments"][0]
    assert seg["total_size"] == 250 * MiB
    assert sum(b["size"] for b in seg["blocks"]) == 2150 * MiB


# -- what a state cannot place: segments the file does not list, blocks that overlap ---------

def _block_over_a_live_block() -> list:
    """An 8 KiB HAL allocation at 0x10000 holds PTA block A (4 KiB at 0x10000, its FREE
    row missing) and then block B (4 KiB at 0x10800): B starts inside A, both live."""
    return [
        mem(1, "MALLOC", "HAL", 100, 1, 0x10000, 8192, owner=""),
        mem(2, "MALLOC", "PTA", 200, 2, 0x10000, 4096, total=8192, used=4096, owner=""),
        mem(3, "MALLOC", "PTA", 300, 3, 0x10800, 4096, total=8192, used=8192, owner=""),
    ]


def test_blocks_sharing_addresses_are_said_and_counted_once(tmp_path, capsys):
    """By hand, after the last event: A [0x10000, 0x11000) and B [0x10800, 0x11800) share
    2 KiB; the segment's free range is [0x11800, 0x12000), 2 KiB; the blocks cover 6 KiB,
    so covered + free = the 8 KiB segment, and the 8 KiB of blocks exceed it by the 2 KiB
    said as overlapping."""
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(_block_over_a_live_block()))
    view = layer_view(load_trace(path, use_cache=False), {"npu:0": "PTA"})
    state = allocator_state(view, "npu:0", "last")
    (segment,) = [s for s in state["segments"] if s["addr"] is not None]
    assert (segment["addr"], segment["size"]) == (0x10000, 8192)
    assert state["free_bytes"] == 2048
    assert state["overlap_bytes"] == 2048
    assert _covered(state) + state["free_bytes"] == 8192
    assert main(["state", str(path), "--layer", "PTA"]) == 0
    assert "overlapping 2.0 KiB: live blocks share these addresses" in capsys.readouterr().out


def test_a_consistent_state_overlaps_nothing(tmp_path):
    """B placed after A's end (0x11000): nothing shared, no word said."""
    rows = _block_over_a_live_block()
    rows[2] = mem(3, "MALLOC", "PTA", 300, 3, 0x11000, 4096, total=8192, used=8192, owner="")
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(rows))
    state = allocator_state(layer_view(load_trace(path, use_cache=False), {"npu:0": "PTA"}),
                            "npu:0", "last")
    assert (state["overlap_bytes"], state["free_bytes"], state["unplaced_bytes"]) == (0, 0, 0)


def test_reserved_in_no_listed_segment_is_said_unplaced(tmp_path, capsys):
    """No HAL rows: the pool says it holds 4 MiB (total) and its one 1 KiB block lies in no
    segment the file lists, so the 4 MiB are unplaced (not free: the file does not say)."""
    rows = [mem(1, "MALLOC", "PTA", 100, 1, 0x50000, 1024, total=4 * MiB, used=1024,
                owner="")]
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv(rows))
    state = allocator_state(layer_view(load_trace(path, use_cache=False), {"npu:0": "PTA"}),
                            "npu:0", "last")
    assert (state["level"]["reserved"], state["free_bytes"]) == (4 * MiB, 0)
    assert state["unplaced_bytes"] == 4 * MiB
    assert main(["state", str(path), "--layer", "PTA"]) == 0
    assert ("unplaced 4.0 MiB: reserved in segments the file does not list (they hold the "
            "1.0 KiB of blocks in no segment below)") in capsys.readouterr().out
