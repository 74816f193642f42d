"""Private pools as PyTorch's memory viewer reads them (issue 22).

``torch/utils/viz/process_alloc_data.js``: a block is the trace event that made it (its
alloc, or, where the trace lacks the alloc, its free); its pool is the ``segment_pool_id``
that event carries, else the pool of the dumped segment holding its address
(``find_pool_id``), else unknown.  A pool's reserved bytes (the viewer's envelope) move on
``segment_map``/``segment_unmap`` by the mapped size.  Each case below is worked out by
hand from those rules.
"""

from __future__ import annotations

import polars as pl

from memtui.model import validate
from memtui.sources import open_capture
from tests.sources.test_torch_snapshot_small import block, entry, segment, write

MiB = 1 << 20
PRIVATE = 0x7F00_0000_0000
DEFAULT = 0x7E00_0000_0000
GONE = 0x7D00_0000_0000


def pools_by_addr(trace) -> dict[int, str | None]:
    return dict(trace.blocks.select("addr", "pool_id").iter_rows())


def test_event_pool_then_dumped_segment_then_unknown(tmp_path):
    """A: alloc carries (1,0), in a segment freed before the dump: (1,0).  B: alloc carries
    nothing, in the dumped private segment (3,0): (3,0).  C: nothing, in no dumped
    segment: unknown.  D: only its free carries (2,0), its alloc is in the trace: the
    viewer takes the alloc event, so the dump's pool (3,0)."""
    data = {
        "segments": [segment(PRIVATE, [block(PRIVATE, MiB, "active_allocated"),
                                       block(PRIVATE + MiB, MiB, "inactive"),
                                       block(PRIVATE + 2 * MiB, 2 * MiB, "inactive")],
                             pool=(3, 0))],
        "device_traces": [[
            entry("alloc", GONE, MiB, t=1, segment_pool_id=(1, 0)),
            entry("free_requested", GONE, MiB, t=2),
            entry("free_completed", GONE, MiB, t=3),
            entry("alloc", PRIVATE, MiB, t=4),
            entry("alloc", GONE + 4 * MiB, MiB, t=5),
            entry("free_requested", GONE + 4 * MiB, MiB, t=6),
            entry("free_completed", GONE + 4 * MiB, MiB, t=7),
            entry("alloc", PRIVATE + MiB, MiB, t=8),
            entry("free_requested", PRIVATE + MiB, MiB, t=9),
            entry("free_completed", PRIVATE + MiB, MiB, t=10, segment_pool_id=(2, 0)),
        ]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    assert pools_by_addr(trace) == {GONE: "1,0", PRIVATE: "3,0", GONE + 4 * MiB: None,
                                    PRIVATE + MiB: "3,0"}


def test_a_free_without_its_alloc_takes_the_free_events_pool(tmp_path):
    """The alloc fell out of the ring buffer: the block is its free event, pool (2,0),
    although the dumped segment at that address now says (0,0)."""
    data = {
        "segments": [segment(DEFAULT, [block(DEFAULT, 2 * MiB, "inactive")])],
        "device_traces": [[
            entry("free_requested", DEFAULT, MiB, t=1, segment_pool_id=(2, 0)),
            entry("free_completed", DEFAULT, MiB, t=2, segment_pool_id=(2, 0)),
            entry("alloc", DEFAULT + MiB, MiB, t=3),
            entry("free_requested", DEFAULT + MiB, MiB, t=4),
            entry("free_completed", DEFAULT + MiB, MiB, t=5),
        ]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    ghost = trace.blocks.filter(pl.col("ghost"))
    assert ghost.select("addr", "pool_id").rows() == [(DEFAULT, "2,0")]
    assert pools_by_addr(trace)[DEFAULT + MiB] == "0,0"  # no pool on its events: the dump


def test_events_with_and_without_pools_mixed(tmp_path):
    """Pools on some entries only (the first thousand have none): each block still takes
    its own event's pool where it has one."""
    quiet = [entry(action, DEFAULT, MiB, t=k)
             for k in range(600) for action in ("alloc", "free_requested", "free_completed")]
    data = {
        "segments": [segment(DEFAULT, [block(DEFAULT, 4 * MiB, "inactive")])],
        "device_traces": [quiet + [
            entry("alloc", DEFAULT + MiB, MiB, t=700, segment_pool_id=(5, 1)),
            entry("free_requested", DEFAULT + MiB, MiB, t=701),
            entry("free_completed", DEFAULT + MiB, MiB, t=702),
        ]],
    }
    trace = open_capture(write(tmp_path, data))
    pools = trace.blocks.group_by("pool_id").len().sort("pool_id").rows()
    assert pools == [("0,0", 600), ("5,1", 1)]


def test_a_pool_grows_on_segment_map_by_the_mapped_size(tmp_path):
    """An expandable segment of the private pool (4,0) whose range [4, 6) MiB was mapped
    before the trace: the trace maps [0, 2), allocates and frees 1 MiB there, maps [2, 4),
    unmaps [0, 2); the dump shows [2, 6).  [0, 2) is in no dumped segment and its events
    name no pool: the viewer counts it in no pool.  The pool's reserved bytes before the
    trace are the dump's 4 MiB less what the trace mapped into it net (2 MiB), then after
    each event 2, 2, 2, 2, 4, 4 MiB: the map of [2, 4) adds what it maps, never the whole
    segment."""
    data = {
        "segments": [segment(PRIVATE + 2 * MiB, [block(PRIVATE + 2 * MiB, 4 * MiB, "inactive")],
                             expandable=True, pool=(4, 0))],
        "device_traces": [[
            entry("segment_map", PRIVATE, 2 * MiB, t=1),
            entry("alloc", PRIVATE, MiB, t=2),
            entry("free_requested", PRIVATE, MiB, t=3),
            entry("free_completed", PRIVATE, MiB, t=4),
            entry("segment_map", PRIVATE + 2 * MiB, 2 * MiB, t=5),
            entry("segment_unmap", PRIVATE, 2 * MiB, t=6),
        ]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    private = pl.col("pool_id") == "4,0"
    segments = trace.segments.filter(private)
    before = segments.filter(pl.col("ghost"))["size"].sum()
    alive_at = [segments.filter(
        (pl.col("ghost") | (pl.col("seq_alloc") <= seq))
        & (pl.col("seq_free").is_null() | (pl.col("seq_free") > seq)))["size"].sum()
        for seq in trace.events["seq"].to_list()]
    assert before == 2 * MiB
    assert alive_at == [2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB, 4 * MiB, 4 * MiB]
    assert pools_by_addr(trace) == {PRIVATE: None}  # its range is no longer in the dump
