"""``memtui state``: the allocator state just after one event, for scripts.

On the hand snapshot the answer is worked out by hand (tests/helpers/hand_snapshot.py);
on every real snapshot and the demos, ``--event first|peak|last`` equals memory_viz's
Allocator State History (tests.helpers.hand_snapshot.reference_replay): segments, blocks
and their states, free bytes and the largest gap.
"""

from __future__ import annotations

import json

import pytest

from memtui.cli import main
from memtui.sources import open_capture
from memtui.sources.common.safe_pickle import load_pickle
from tests.conftest import REPO, shared_files
from tests.helpers.hand_snapshot import reference_replay, us, write_hand_snapshot

CAPTURES = shared_files("torch_snapshots", "*.p*") + sorted((REPO / "snapshots").glob("*.pickle"))
KEYS = ["device", "event", "t", "level", "segments", "free_bytes", "largest_gap_bytes", "gaps",
        "fragmented_bytes", "fragmented_segments", "fragmented_share", "cached_bytes",
        "cached_segments", "rounding_bytes", "unplaced_bytes", "overlap_bytes", "unattributed",
        "by_role"]


def state(capsys, *args) -> dict:
    assert main(["state", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_hand_snapshot_after_the_pending_free(tmp_path, capsys):
    """After event 9 (free_requested of b1 at t=10): b1 pending, b4 a 512-byte block of
    500 requested, b3; the ghost g2 in segment G.  Free: 0x1600 512, 0x1A00 1536 in A;
    0x10000 512, 0x10600 512 in G."""
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    data = state(capsys, path, "--event", 9)
    assert list(data) == KEYS
    assert (data["device"], data["event"], data["t"]) == ("cuda:0", 9, us(10))
    assert data["level"] == {"allocated": 1024 + 512 + 512 + 1024, "active": 3072,
                             "reserved": 6144, "reserved_is_floor": False,
                             "reserved_ceiling": None}
    a, g = data["segments"]
    assert (a["addr"], a["size"], a["stream"]) == (0x1000, 4096, 0)
    assert [(b["addr"], b["size"], b["requested_size"], b["state"]) for b in a["blocks"]] == [
        (0x1000, 1024, 1024, "pending_free"), (0x1400, 512, 500, "allocated"),
        (0x1600, 512, None, "free"), (0x1800, 512, 512, "allocated"),
        (0x1A00, 1536, None, "free")]
    assert [(b["addr"], b["state"]) for b in g["blocks"]] == [
        (0x10000, "free"), (0x10200, "allocated"), (0x10600, "free")]
    # each block by the id every screen gives it (issue 23): the Tables' and findings'
    trace = open_capture(path)
    ids = dict(zip(trace.blocks["addr"].to_list(), trace.blocks["block_id"].to_list(),
                   strict=False))
    for block in a["blocks"] + g["blocks"]:
        if block["state"] == "free":
            assert block["block_id"] is None
        else:
            assert block["block_id"] in trace.blocks["block_id"].to_list()
    assert a["blocks"][1]["block_id"] == ids[0x1400]
    assert (data["free_bytes"], data["largest_gap_bytes"], data["gaps"]) == (3072, 1536, 4)
    # both segments hold blocks: every free byte is fragmented (half of reserved)
    assert (data["fragmented_bytes"], data["fragmented_segments"], data["fragmented_share"],
            data["cached_bytes"], data["cached_segments"], data["rounding_bytes"]) == (
        3072, 2, 0.5, 0, 0, 12)
    # memory by role (issue 32): every role, summing to allocated; each block's role
    assert sum(data["by_role"].values()) == data["level"]["allocated"]
    assert all(b.get("role") for b in a["blocks"] + g["blocks"] if b["state"] != "free")


def test_event_names_and_times(tmp_path, capsys):
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    assert state(capsys, path, "--event", "first")["event"] == 0
    assert state(capsys, path, "--event", "last")["event"] == 10
    assert state(capsys, path)["event"] == 10
    assert state(capsys, path, "--event", "peak")["event"] == 3  # b1, b2, b3 and g1, g2
    assert state(capsys, path, "--time", us(5) + 10)["event"] == 4
    assert state(capsys, path, "--time", "+0.000004s")["event"] == 4


@pytest.mark.parametrize("args, words", [
    (["--event", "99"], "outside 0..10"),
    (["--event", "middle"], "a number, first, peak or last"),
    (["--device", "cuda:7"], "no device 'cuda:7'"),
])
def test_bad_requests_say_so_in_one_line(tmp_path, capsys, args, words):
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    assert main(["state", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memtui: {path}: ") and words in err and err.count("\n") == 1


def _reference(raw: dict, device: int, index: int) -> tuple[set, set, int, int]:
    segments, blocks = reference_replay(raw, device, index)
    largest = 0
    for addr, size in segments:
        inside = sorted((a, s) for a, s, _ in blocks if addr <= a < addr + size)
        cursor = addr
        for a, s in inside:
            largest = max(largest, a - cursor)
            cursor = max(cursor, a + s)
        largest = max(largest, addr + size - cursor)
    free = sum(s for _, s in segments) - sum(s for _, s, _ in blocks)
    return segments, blocks, free, largest


@pytest.mark.skipif(not CAPTURES, reason="no real captures (../shared/data) and no demos")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_first_peak_last_equal_memory_viz(path, capsys):
    raw = load_pickle(path)
    if isinstance(raw, list):
        raw = {"segments": raw, "device_traces": []}
    for device, trace in enumerate(raw.get("device_traces") or []):
        if not trace:
            continue
        for which in ("first", "peak", "last"):
            data = state(capsys, path, "--device", f"cuda:{device}", "--event", which)
            at = -1 if data["event"] is None else data["event"]  # None: before event 0
            segments, blocks, free, largest = _reference(raw, device, at)
            assert {(s["addr"], s["size"]) for s in data["segments"]} == segments
            assert {(b["addr"], b["size"], b["state"] == "pending_free")
                    for s in data["segments"] for b in s["blocks"]
                    if b["state"] != "free"} == blocks
            assert (data["free_bytes"], data["largest_gap_bytes"]) == (free, largest)
            level = sum(s for _, s, _ in blocks)
            assert data["level"]["allocated"] == level


def test_an_expandable_segment_is_one_segment_as_the_dump_says(tmp_path, capsys):
    """Issue 15, defect 9: the dump's expandable segment of 1000 bytes (a 300-byte block at
    its start), the trace maps its first 500: after the last event, one segment of 1000
    with the block and one free range of 700, as the dump."""
    from tests.sources.test_torch_snapshot_small import block, entry, segment, write

    base = 0x7F00_0000_0000
    dumped = segment(base, [block(base, 300, "active_allocated"),
                            block(base + 300, 700, "inactive")], expandable=True)
    data = {"segments": [dumped],
            "device_traces": [[entry("segment_map", base, 500, t=1),
                               entry("alloc", base, 300, t=2)]]}
    out = state(capsys, write(tmp_path, data), "--event", "last")
    (seg,) = out["segments"]
    assert (seg["addr"], seg["size"]) == (base, 1000)
    assert [(b["addr"], b["size"], b["state"]) for b in seg["blocks"]] == [
        (base, 300, "allocated"), (base + 300, 700, "free")]
    assert (out["free_bytes"], out["largest_gap_bytes"], out["gaps"]) == (700, 700, 1)
    first = state(capsys, write(tmp_path, data), "--event", "first")
    assert [(s["addr"], s["size"]) for s in first["segments"]] == [(base, 1000)]
    assert first["level"]["allocated"] == 0


MEMSCOPE_CSVS = shared_files("msmemscope", "test__smoke__*.csv")


@pytest.mark.parametrize("path", MEMSCOPE_CSVS[:1], ids=lambda p: p.name)
def test_summary_peak_time_counts_from_the_same_start_as_state(path, capsys):
    """On a layered capture, ``summary`` and ``state --event peak`` give the peak the same
    ``+s`` time: both count from the first event of the default layer (the npu:0 PTA layer
    starts 7.3 s after the HAL layer; summary once counted from the HAL one: +10.2 s)."""
    assert main(["state", str(path), "--event", "peak", "--device", "npu:0"]) == 0
    state_line = capsys.readouterr().out.splitlines()[0]
    when = state_line.split("(")[1].rstrip(")")
    assert main(["summary", str(path)]) == 0
    summary_out = capsys.readouterr().out
    npu0 = summary_out.split("npu:0:")[1].splitlines()[1]
    assert f"at {when}, peak reserved" in npu0, (state_line, npu0)


def test_summary_gives_the_peak_time_of_a_block_only_profiler_csv(tmp_path, capsys):
    """operator_memory.csv has blocks and no events: ``state`` gave the peak a time,
    ``summary`` none (QA).  By hand: a 2 MiB block from 1000 us to 3000 us and a 1 MiB
    one from 2000 us to 4000 us: 3 MiB at 2000 us, 1000 us = 0.001 s after the start."""
    csv = tmp_path / "operator_memory.csv"
    header = ("Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),"
              "Duration(us),Active Duration(us),Allocation Total Allocated(MB),"
              "Allocation Total Reserved(MB),Allocation Total Active(MB),"
              "Release Total Allocated(MB),Release Total Reserved(MB),"
              "Release Total Active(MB),Stream Ptr,Device Type")
    rows = ["aten::empty,2048.0,1000.0,3000.0,3000.0,2000,2000,2,8,2,1,8,1,1,NPU:0",
            "aten::add,1024.0,2000.0,4000.0,4000.0,2000,2000,3,8,3,0,8,0,1,NPU:0"]
    csv.write_text("\n".join([header, *rows]) + "\n")
    assert main(["summary", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "peak allocated 3.0 MiB at +0.001000 s;" in out, out
    assert main(["state", str(csv), "--event", "peak"]) == 0
    assert "(+0.001000 s)" in capsys.readouterr().out.splitlines()[0]


PROFILER_BLOCK_CSVS = shared_files("profiler", "*operator_memory.csv")


@pytest.mark.parametrize("path", PROFILER_BLOCK_CSVS, ids=lambda p: p.name)
def test_summary_and_state_agree_on_a_real_block_only_capture(path, capsys):
    assert main(["state", str(path), "--event", "peak"]) == 0
    when = capsys.readouterr().out.splitlines()[0].split("(")[1].rstrip(")")
    assert main(["summary", str(path)]) == 0
    assert f"at {when}, peak reserved" in capsys.readouterr().out


def expandable_in_two_pieces(tmp_path):
    """An expandable segment mapped in two 500-byte pieces (t=1, t=3); a 300-byte block at
    its start (t=2) and one at +300 that spans the seam (t=4).  After the last event: one
    segment of 1000 B, 600 B allocated, one free range of 400 B (not 500 in piece two)."""
    from tests.sources.test_torch_snapshot_small import block, entry, segment, write

    base = 0x7F00_0000_0000
    dumped = segment(base, [block(base, 300, "active_allocated"),
                            block(base + 300, 300, "active_allocated"),
                            block(base + 600, 400, "inactive")], expandable=True)
    data = {"segments": [dumped],
            "device_traces": [[entry("segment_map", base, 500, t=1),
                               entry("alloc", base, 300, t=2),
                               entry("segment_map", base + 500, 500, t=3),
                               entry("alloc", base + 300, 300, t=4)]]}
    return write(tmp_path, data, name="expandable.pickle"), base


def test_a_block_across_the_pieces_of_an_expandable_segment(tmp_path, capsys):
    path, base = expandable_in_two_pieces(tmp_path)
    out = state(capsys, path, "--event", "last")
    (seg,) = out["segments"]
    assert (seg["addr"], seg["size"]) == (base, 1000)
    assert [(b["addr"], b["size"], b["state"]) for b in seg["blocks"]] == [
        (base, 300, "allocated"), (base + 300, 300, "allocated"), (base + 600, 400, "free")]
    assert (out["free_bytes"], out["largest_gap_bytes"], out["gaps"]) == (400, 400, 1)
    first_piece = state(capsys, path, "--event", "1")
    assert [(s["addr"], s["size"]) for s in first_piece["segments"]] == [(base, 500)]


def test_the_text_names_each_state_with_its_own_bytes(tmp_path, capsys):
    """Issue 35: ``1 allocated, 0 pending free (64.0 MiB), 0 free`` read as 64 MiB pending.
    After event 9 of the hand snapshot, segment A holds b4 (512 B) and b3 (512 B) allocated,
    b1 (1024 B) pending free, free gaps of 512 B and 1536 B; G holds g2 (1024 B) between
    two free 512 B gaps."""
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    assert main(["state", str(path), "--event", "9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].endswith(": 2 blocks allocated (1.0 KiB), 1 pending free (1.0 KiB), "
                              "2 free gaps (2.0 KiB)")
    assert lines[-1].endswith(": 1 block allocated (1.0 KiB), 2 free gaps (1.0 KiB)")


def test_the_summary_text_names_the_reserved_peak(tmp_path, capsys):
    """The hand snapshot reserves 6 KiB at most (segments A and G), its allocated peak is
    4 KiB: the text says both peaks."""
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    assert main(["summary", str(path), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "peak allocated 4.0 KiB at +" in text and ", peak reserved 6.0 KiB;" in text
