"""Expandable segments as PyTorch keeps them (issue 33 item 2).

With ``expandable_segments:True`` the trace maps and unmaps ranges of one large address
range per stream, and a map and the unmap that gives its bytes back need not cover the
same range.  memtui undoes the maps and unmaps from the dump back, as PyTorch's viewer
(MemoryViz.js, Allocator State History) does: these tests hold ``state`` to the viewer's
replay (``tests/helpers/hand_snapshot.reference_replay``) at every event, on hand-made
traces whose answers are worked out below, on random histories (hypothesis) and on the
two real H100 captures made with the setting; and the what-if replay, seeded with what
was mapped before the history began, proves both captures.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.analysis.layout.pool_state import state_at_event
from memtui.analysis.layout.state import allocator_state
from memtui.analysis.replay.proof import prove
from memtui.loading import load_trace
from memtui.model import validate
from memtui.sources import open_capture
from memtui.sources.common.safe_pickle import load_pickle
from tests.helpers.hand_snapshot import reference_replay
from tests.sources.test_torch_snapshot_small import block, entry, segment, write

DATA = Path(__file__).resolve().parents[1] / "data"
BASE = 0x7F00_0000_0000
PAGE = 2 << 20
MiB = 1 << 20


def _segments(state) -> set[tuple[int, int]]:
    return set(zip(state.seg_addr.tolist(), state.seg_size.tolist(), strict=True))


def _assert_viewer_parity(trace, snapshot: dict, device: int = 0) -> None:
    """At every event: the segments memtui shows are the viewer's, the blocks too, and
    the reserved level is the bytes of those segments."""
    name = trace.meta.device_names[device]
    events = trace.device_events(name)
    for k in range(events.height):
        state = state_at_event(trace, name, k)
        segments, blocks = reference_replay(snapshot, device, k)
        assert _segments(state) == segments, f"event {k}"
        assert {(a, s, p) for a, s, p in zip(state.blk_addr.tolist(), state.blk_size.tolist(),
                                             state.blk_pending.tolist(), strict=True)} \
            == blocks, f"event {k}"
        assert events["reserved"][k] == sum(size for _, size in segments), f"event {k}"


def _crossing_unmap_snapshot() -> dict:
    """[B, B+4P) mapped before the history; the trace maps [B+4P, B+6P), allocates and
    frees there, maps [B+6P, B+8P), unmaps [B+2P, B+8P) (across what the history found
    mapped and both its maps), records an OOM, maps [B+2P, B+3P); the dump holds
    [B, B+3P)."""
    return {
        "segments": [segment(BASE, [block(BASE, 3 * PAGE, "inactive")], expandable=True)],
        "device_traces": [[
            entry("segment_map", BASE + 4 * PAGE, 2 * PAGE, t=1),
            entry("alloc", BASE + 4 * PAGE, 2 * PAGE, t=2),
            entry("segment_map", BASE + 6 * PAGE, 2 * PAGE, t=3),
            entry("free_requested", BASE + 4 * PAGE, 2 * PAGE, t=4),
            entry("free_completed", BASE + 4 * PAGE, 2 * PAGE, t=5),
            entry("segment_unmap", BASE + 2 * PAGE, 6 * PAGE, t=6),
            {"action": "oom", "size": 40 * PAGE, "device_free": PAGE, "stream": 0,
             "time_us": 7},
            entry("segment_map", BASE + 2 * PAGE, PAGE, t=8),
        ]],
    }


def test_an_unmap_across_maps_and_what_was_mapped_before(tmp_path):
    """Reserved, worked out by hand: 4P before the first event, then 6P, 6P, 8P, 8P, 8P,
    2P (the unmap gives back 6P: 2P mapped before the history and both maps), 2P, 3P; one
    segment at B throughout, of those sizes."""
    data = _crossing_unmap_snapshot()
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    info = trace.meta.device("cuda:0")
    assert info.start_reserved == 4 * PAGE
    assert trace.events["reserved"].to_list() == [
        p * PAGE for p in (6, 6, 8, 8, 8, 2, 2, 3)]
    for k, pages in enumerate((6, 6, 8, 8, 8, 2, 2, 3)):
        assert _segments(state_at_event(trace, "cuda:0", k)) == {(BASE, pages * PAGE)}
    assert not trace.meta.warnings
    _assert_viewer_parity(trace, data)


def test_state_json_segments_add_up_to_reserved(tmp_path):
    """``memtui state``'s figures at the OOM: one 4 MiB segment, free 4 MiB, never more
    than reserved."""
    trace = open_capture(write(tmp_path, _crossing_unmap_snapshot()))
    got = allocator_state(trace, "cuda:0", 6)
    assert got["level"]["reserved"] == 2 * PAGE
    assert [(s["addr"], s["size"]) for s in got["segments"]] == [(BASE, 2 * PAGE)]
    assert got["free_bytes"] == 2 * PAGE <= got["level"]["reserved"]


def test_whatif_replays_a_hand_made_expandable_history(tmp_path):
    """The large pool maps 20 MiB pages.  [B, B+40 MiB) was mapped before the history: the
    start pool holds it and unmapped space after it, so the 40 MiB alloc takes it whole
    and the 20 MiB alloc maps [B+40, B+60) MiB exactly where the recording did."""
    large = 20 * MiB
    data = {
        "segments": [segment(BASE, [block(BASE, 3 * large, "inactive")], expandable=True)],
        "allocator_settings": {"expandable_segments": True},
        "device_traces": [[
            entry("alloc", BASE, 2 * large, t=1),
            entry("segment_map", BASE + 2 * large, large, t=2),
            entry("alloc", BASE + 2 * large, large, t=3),
            entry("free_requested", BASE + 2 * large, large, t=4),
            entry("free_completed", BASE + 2 * large, large, t=5),
            entry("free_requested", BASE, 2 * large, t=6),
            entry("free_completed", BASE, 2 * large, t=7),
        ]],
    }
    trace = load_trace(write(tmp_path, data), use_cache=False)
    assert trace.meta.device("cuda:0").start_reserved == 2 * large
    proof, _ = prove(trace, "cuda:0")
    assert proof.holds, proof.why_not()
    assert proof.allocs_at_address == proof.allocs == 2
    assert proof.segment_reproduced == {"segment_map": 1}


def test_a_map_the_dump_does_not_hold_is_said_once(tmp_path):
    """[B, B+2P) mapped by the trace, never unmapped, absent from the dump (events lost):
    one warning names the device and the bytes; the segments still add up to reserved."""
    data = {
        "segments": [segment(BASE + 8 * PAGE, [block(BASE + 8 * PAGE, PAGE, "inactive")],
                             expandable=True)],
        "device_traces": [[entry("segment_map", BASE, 2 * PAGE, t=1),
                           entry("alloc", BASE + 8 * PAGE, PAGE, t=2)]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    warnings = [w for w in trace.meta.warnings if "maps and unmaps" in w]
    assert len(warnings) == 1 and "cuda:0" in warnings[0] and "4.0 MiB mapped" in warnings[0]
    for k in range(trace.events.height):
        state = state_at_event(trace, "cuda:0", k)
        assert trace.events["reserved"][k] == int(state.seg_size.sum())


def test_an_unmap_of_unmapped_bytes_is_said(tmp_path):
    """The same range unmapped twice: the second unmap gives back nothing; said once."""
    data = {
        "segments": [segment(BASE + 8 * PAGE, [block(BASE + 8 * PAGE, PAGE, "inactive")],
                             expandable=True)],
        "device_traces": [[entry("segment_unmap", BASE, 2 * PAGE, t=1),
                           entry("segment_unmap", BASE, 2 * PAGE, t=2)]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    warnings = [w for w in trace.meta.warnings if "maps and unmaps" in w]
    assert len(warnings) == 1 and "unmapped that were not mapped" in warnings[0]
    assert trace.meta.device("cuda:0").start_reserved == 2 * PAGE + PAGE


# -- random histories ------------------------------------------------------------------------

@st.composite
def histories(draw) -> dict:
    """A random expandable history of one or two streams (each its own address range of
    24 pages): maps of runs of unmapped pages, unmaps of runs of mapped pages (across
    earlier maps, or cutting one), the history cut at a random event (what was mapped
    before it is a ghost), the dump the mapped ranges at the end."""
    streams = draw(st.integers(1, 2))
    pages = 24
    mapped = [np.zeros(pages, dtype=bool) for _ in range(streams)]
    ops = []
    for _ in range(draw(st.integers(1, 30))):
        s = draw(st.integers(0, streams - 1))
        lo = draw(st.integers(0, pages - 1))
        want = draw(st.booleans())  # map (True) or unmap
        if mapped[s][lo] == want:
            continue
        hi = lo
        limit = draw(st.integers(1, 8))
        while hi < pages and mapped[s][hi] != want and hi - lo < limit:
            hi += 1
        mapped[s][lo:hi] = want
        ops.append(("segment_map" if want else "segment_unmap", s, lo, hi))
    cut = draw(st.integers(0, len(ops)))
    base = [BASE + s * (1 << 36) for s in range(streams)]
    trace = [entry(action, base[s] + lo * PAGE, (hi - lo) * PAGE, t=i + 1, stream=s)
             for i, (action, s, lo, hi) in enumerate(ops[cut:])]
    for e, (_, s, _, _) in zip(trace, ops[cut:], strict=True):
        e["stream"] = s
    dumped = []
    for s in range(streams):
        runs = np.flatnonzero(np.diff(np.concatenate([[0], mapped[s].astype(int), [0]])))
        for lo, hi in zip(runs[::2], runs[1::2], strict=True):
            seg = segment(base[s] + int(lo) * PAGE,
                          [block(base[s] + int(lo) * PAGE, int(hi - lo) * PAGE, "inactive")],
                          expandable=True)
            seg["stream"] = s
            dumped.append(seg)
    return {"segments": dumped, "device_traces": [trace]}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=histories())
def test_random_histories_agree_with_the_viewer(tmp_path, data):
    if not data["device_traces"][0]:
        return
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    assert not [w for w in trace.meta.warnings if "maps and unmaps" in w]
    _assert_viewer_parity(trace, data)


# -- the real captures -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cuda_expandable_oom", "cuda_train_expandable"])
def test_real_expandable_capture_is_the_viewer_at_every_event(name):
    path = DATA / f"{name}.pickle"
    trace = load_trace(path, use_cache=False)
    validate(trace)
    _assert_viewer_parity(trace, load_pickle(path))


def test_expandable_oom_figures():
    """cuda_expandable_oom.pickle (tests/data/cuda_recipes/expandable_oom.py): 2060 MiB
    mapped before the history (2 GiB of weights in 20 MiB pages); 59.0 GiB mapped at the
    dump; the reserved peak 77,842 MiB (the viewer's replay, checked at every event by
    the test above), 18 MiB above the allocated peak (partial pages beside the 1 GiB
    tensors); allocated never above reserved; whatif proves it."""
    trace = load_trace(DATA / "cuda_expandable_oom.pickle", use_cache=False)
    info = trace.meta.device("cuda:0")
    assert info.start_reserved == 2060 * MiB
    assert info.reserved_at_end == sum(s["total_size"] for s in pickle.loads(
        (DATA / "cuda_expandable_oom.pickle").read_bytes())["segments"])
    events = trace.device_events("cuda:0")
    assert events["reserved"].max() == 77842 * MiB
    assert (events["allocated"] <= events["reserved"]).all()
    oom = events.filter(pl.col("action") == "oom")
    assert oom.height == 1
    proof, _ = prove(trace, "cuda:0")
    assert proof.holds, proof.why_not()
    assert proof.allocs_at_address == proof.allocs
