"""The pool at any time (analysis.pool_state, analysis.live, analysis.intervals).

A hand-written snapshot (tests/helpers/hand_snapshot.py) checked against states worked out by hand,
and every real snapshot in ../shared/data checked against memory_viz's own algorithm
(undo the trace from the dump) at several events, and against the file's final segments
at the dump.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.analysis.layout.pool_state import (
    Fragmentation,
    explain_oom,
    oom_events,
    state_at,
    state_at_seq,
)
from memtui.analysis.timeline.intervals import INT64_MAX, INT64_MIN, IntervalIndex
from memtui.analysis.timeline.live import device_index
from memtui.sources import open_capture
from memtui.sources.common.safe_pickle import load_pickle
from tests.helpers.hand_snapshot import SNAPSHOTS, reference_replay, us, write_hand_snapshot


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    path = write_hand_snapshot(tmp_path_factory.mktemp("pool") / "hand.pickle")
    return open_capture(path)


def _blocks(state) -> list[tuple[int, int, bool]]:
    return sorted(zip(state.blk_addr.tolist(), state.blk_size.tolist(),
                      state.blk_pending.tolist(), strict=True))


def _gaps(state) -> list[tuple[int, int]]:
    return list(zip(state.gap_addr.tolist(), state.gap_size.tolist(), strict=True))


# -- the hand trace -------------------------------------------------------------------------

def test_before_the_trace_only_the_ghosts_exist(hand):
    state = state_at(hand, "cuda:0", us(0))
    assert state.seg_addr.tolist() == [0x10000]
    assert _blocks(state) == [(0x10000, 512, False), (0x10200, 1024, False)]
    assert _gaps(state) == [(0x10600, 512)]


def test_state_after_three_allocations(hand):
    state = state_at(hand, "cuda:0", us(4))
    assert state.seg_addr.tolist() == [0x1000, 0x10000]
    assert _blocks(state) == [
        (0x1000, 1024, False), (0x1400, 1024, False), (0x1800, 512, False),
        (0x10000, 512, False), (0x10200, 1024, False)]
    assert _gaps(state) == [(0x1A00, 1536), (0x10600, 512)]
    assert (state.reserved, state.allocated, state.pending, state.free) == (6144, 4096, 0, 2048)
    assert state.largest_gap == 1536
    assert state.seg_largest_gap.tolist() == [1536, 512]
    # both segments hold blocks: all 2,048 free bytes are fragmented, none cached
    assert state.fragmentation == Fragmentation(
        reserved=6144, fragmented=2048, fragmented_segments=2, largest_gap=1536, cached=0,
        cached_segments=0, rounding=0)
    assert state.fragmentation.share == pytest.approx(2048 / 6144)


def test_free_requested_is_pending_until_completed(hand):
    state = state_at(hand, "cuda:0", us(5))
    assert (0x1400, 1024, True) in _blocks(state)
    assert (state.allocated, state.pending, state.free) == (3072, 1024, 2048)
    after = state_at(hand, "cuda:0", us(6))
    assert _gaps(after) == [(0x1400, 1024), (0x1A00, 1536), (0x10600, 512)]
    assert after.seg_free.tolist() == [2560, 512]
    assert (after.fragmentation.fragmented, after.fragmentation.largest_gap) == (3072, 1536)


def test_ghost_freed_in_the_trace_and_address_reused(hand):
    state = state_at(hand, "cuda:0", us(9))
    assert _gaps(state) == [(0x1600, 512), (0x1A00, 1536), (0x10000, 512), (0x10600, 512)]
    # b4: the trace says 500 requested, the final state says a 512-byte block
    assert (0x1400, 512, False) in _blocks(state)
    index = device_index(hand, "cuda:0")
    row = index.row_of_block(int(state.blk_id[state.blk_addr.tolist().index(0x1400)]))
    assert index.requested[row] == 500
    assert state.seg_blocks.tolist() == [3, 1]


def test_time_inside_a_step_keeps_the_earlier_state(hand):
    assert _blocks(state_at(hand, "cuda:0", us(4) + 999)) == _blocks(
        state_at(hand, "cuda:0", us(4)))


def test_state_by_event_number_matches_state_by_time(hand):
    for seq in range(len(hand.events)):
        t = int(hand.events.filter(hand.events["seq"] == seq)["t"][0])
        assert _blocks(state_at_seq(hand, "cuda:0", seq)) == _blocks(state_at(hand, "cuda:0", t))


def test_state_by_event_number_is_at_that_events_time(hand):
    # the time a Pool key shows: the latest time of the events up to that number (here each
    # event's own, as the trace's times never step back)
    for seq, t in zip(hand.events["seq"].to_list(), hand.events["t"].to_list(), strict=True):
        assert state_at_seq(hand, "cuda:0", seq).t == t
    assert state_at_seq(hand, "cuda:0", -1).t == int(hand.events["t"].min())


def test_lookups_on_a_state(hand):
    state = state_at(hand, "cuda:0", us(4))
    assert state.segment_at_address(0x1FFF) == 0
    assert state.segment_at_address(0x2000) is None
    assert state.blocks_of_segment(1).tolist() == [3, 4]
    assert state.gaps_of_segment(0).tolist() == [0]
    b3 = int(state.blk_id[2])
    assert state.segment_of_block(b3) == 0
    assert state.orphans == 0


def test_oom_is_explained_by_fragmentation(hand):
    ooms = oom_events(hand, "cuda:0")
    assert ooms["size"].to_list() == [2048]
    why = explain_oom(hand, "cuda:0", int(ooms["seq"][0]))
    assert (why.requested, why.free, why.largest_gap, why.largest_usable_gap) == (
        2048, 3072, 1536, 1536)
    assert why.verdict.startswith("fragmentation")
    assert "100 free on the device" in why.message


def test_fragmentation_measures_one_name_each():
    """The three measures and their share of reserved, as every output names them."""
    measures = Fragmentation(reserved=0, fragmented=0, fragmented_segments=0, largest_gap=0,
                             cached=0, cached_segments=0, rounding=0)
    assert measures.share == 0.0
    measures = Fragmentation(reserved=400, fragmented=100, fragmented_segments=2,
                             largest_gap=60, cached=200, cached_segments=1, rounding=4)
    assert measures.share == pytest.approx(0.25)
    assert measures.to_dict() == {
        "reserved_bytes": 400, "fragmented_bytes": 100, "fragmented_segments": 2,
        "fragmented_share": 0.25, "largest_gap_bytes": 60, "cached_bytes": 200,
        "cached_segments": 1, "rounding_bytes": 4}


# -- the interval index ---------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 60), st.integers(0, 30), st.booleans(),
                          st.booleans()), max_size=300),
       st.integers(1, 8))
def test_interval_index_matches_brute_force(spans, chunk):
    start = np.array([INT64_MIN if g else s for s, _, g, _ in spans], dtype=np.int64)
    end = np.array([INT64_MAX if o else s + d for s, d, _, o in spans], dtype=np.int64)
    index = IntervalIndex(start, end, chunk=chunk)
    for t in range(-6, 95, 7):
        want = np.flatnonzero((start <= t) & (t < end))
        assert sorted(index.at(t).tolist()) == want.tolist()
        assert index.count_at(t) == want.size
    want = np.flatnonzero((start <= 40) & (end > 10))
    assert sorted(set(index.overlapping(10, 40).tolist())) == want.tolist()


def test_interval_index_picks_a_chunk_within_budget(monkeypatch):
    import memtui.analysis.timeline.intervals as intervals
    monkeypatch.setattr(intervals, "CHECKPOINT_BUDGET", 5000)
    start = np.arange(100_000, dtype=np.int64)
    end = np.full(100_000, INT64_MAX, dtype=np.int64)  # nothing is ever freed
    index = IntervalIndex(start, end)
    assert index.cp_members.size <= 5000 + index.chunk
    assert index.count_at(99_999) == 100_000


# -- the real snapshots ---------------------------------------------------------------------

REAL = sorted(SNAPSHOTS.glob("*.p*")) if SNAPSHOTS.is_dir() else []
needs_data = pytest.mark.skipif(not REAL, reason=f"no real snapshots in {SNAPSHOTS}")


def _final(raw, device: int) -> tuple[list, list]:
    segments = raw if isinstance(raw, list) else raw["segments"]
    segs, blocks = [], []
    for s in segments:
        if s.get("device", 0) != device:
            continue
        segs.append((s["address"], s["total_size"]))
        addr = s["address"]
        for b in s["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                blocks.append((b.get("address", addr), b["size"],
                               b["state"] == "active_pending_free"))
            addr += b["size"]
    return sorted(segs), sorted(blocks)


@needs_data
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_at_the_dump_the_pool_is_the_files_final_state(path):
    trace = open_capture(path)
    raw = load_pickle(path)
    for device in trace.meta.device_names:
        index = device_index(trace, device)
        state = state_at(trace, device, index.t_end)
        want_segments, want_blocks = _final(raw, int(device.split(":")[1]))
        assert sorted(zip(state.seg_addr.tolist(), state.seg_size.tolist(),
                          strict=True)) == want_segments
        assert _blocks(state) == want_blocks
        assert state.orphans == 0
        # free bytes are the inactive blocks of the file
        assert state.free == sum(size for _, size in want_segments) - sum(
            size for _, size, _ in want_blocks)


@needs_data
@pytest.mark.parametrize("name", [
    "t21_select_n_snapshot_1f2f548.pickle", "t26_cs336_kk_ctx128_forward.pickle",
    "t26_cs336_kk_ctx512_fullstep.pickle", "t211_cs336_magma27_memory_snapshot.pickle",
])
def test_state_at_events_matches_memory_viz_replay(name):
    path = SNAPSHOTS / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = open_capture(path)
    raw = load_pickle(path)
    events = raw["device_traces"][0]
    device = trace.meta.device_names[0]
    times = trace.device_events(device).sort("seq")["t"].to_list()
    for i in np.linspace(0, len(events) - 1, 9).astype(int).tolist() + [len(events) // 3 + 1]:
        want_segments, want_blocks = reference_replay(raw, 0, i)
        state = state_at_seq(trace, device, i)
        assert set(zip(state.seg_addr.tolist(), state.seg_size.tolist(), strict=True)) \
            == want_segments, f"segments after event {i}"
        assert set(_blocks(state)) == want_blocks, f"blocks after event {i}"
        # by time as well, where no later event shares the timestamp
        if i + 1 == len(times) or times[i + 1] > times[i]:
            assert set(_blocks(state_at(trace, device, times[i]))) == want_blocks


def _brief_block_trace():
    """Block 1 (100 B) is allocated and freed at t=20; block 0 (10 B) lives 10..30.
    Events: alloc 0 @10, alloc 1 @20, free 1 @20, free 0 @30."""
    import polars as pl

    from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

    events = pl.DataFrame({
        "t": [10, 20, 20, 30], "seq": [0, 1, 2, 3], "device": ["cuda:0"] * 4,
        "action": ["alloc", "alloc", "free", "free"], "addr": [0x10, 0x20, 0x20, 0x10],
        "size": [10, 100, 100, 10], "block_id": [0, 1, 1, 0],
        "allocated": [10, 110, 10, 0]})
    blocks = pl.DataFrame({
        "block_id": [0, 1], "device": ["cuda:0"] * 2, "addr": [0x10, 0x20],
        "size": [10, 100], "t_alloc": [10, 20], "t_free": [30, 20],
        "seq_alloc": [0, 1], "seq_free": [3, 2], "ghost": [False] * 2})
    meta = TraceMeta(source="test", path="brief.pickle", devices=[DeviceInfo("cuda:0")])
    return MemoryTrace(meta=meta, events=conform(events, "events"),
                       blocks=conform(blocks, "blocks"))


def test_event_in_life_puts_a_click_on_an_event_that_shows_the_block():
    """QA (issue 15): a click on a band at time t moved the cursor to the last event at t,
    after which the block clicked may be gone (freed at the same time)."""
    from memtui.analysis.layout.pool_state import event_in_life

    trace = _brief_block_trace()
    assert event_in_life(trace, "cuda:0", 1, 20) == 1  # not 2: block 1 is freed by it
    assert event_in_life(trace, "cuda:0", 1, 25) == 1
    assert event_in_life(trace, "cuda:0", 1, 5) == 1
    assert event_in_life(trace, "cuda:0", 0, 25) == 2
    assert event_in_life(trace, "cuda:0", 0, 99) == 2  # freed by event 3
    assert event_in_life(trace, "cuda:0", 7, 20) is None  # no such block
