"""Folders of tiny rank snapshots whose figures are known by hand (issue 14).

Eight ranks: every rank allocates a 16 MiB block at t=100 us and frees it at t=200 us
(peak 16 MiB, nothing at the end) inside one 64 MiB segment, on its own device
``cuda:{rank}``.  Rank 5 allocates 40 MiB instead (the planted extra peak); rank 6 also
keeps a 16 MiB block alive to the end (the planted leak).  Median peak 16 MiB with a MAD
of 0 (floor: 1% of the median), so rank 5's 40 MiB is an outlier; median at end 0, so rank
6's 16 MiB is.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from memtui.rankload import RankTable, stream_results

MiB = 1 << 20
SEG = 0x7F00_0000_0000
PEAK_RANK, LEAK_RANK = 5, 6


def rank_snapshot(device: int, peak: int = 16 * MiB, leak: int = 0) -> dict:
    """See the module docstring: one segment, one block allocated and freed, maybe a leak."""
    keep = SEG + 48 * MiB
    trace = [
        {"action": "alloc", "addr": SEG, "size": peak, "stream": 0, "time_us": 100},
        {"action": "free_requested", "addr": SEG, "size": peak, "stream": 0, "time_us": 200},
        {"action": "free_completed", "addr": SEG, "size": peak, "stream": 0, "time_us": 200},
    ]
    if leak:
        trace.append({"action": "alloc", "addr": keep, "size": leak, "stream": 0,
                      "time_us": 300})
    blocks = [{"address": SEG, "size": 48 * MiB, "requested_size": 48 * MiB,
               "state": "inactive", "frames": []},
              {"address": keep, "size": 16 * MiB, "requested_size": 16 * MiB,
               "state": "active_allocated" if leak else "inactive", "frames": []}]
    segment = {"device": device, "address": SEG, "total_size": 64 * MiB,
               "allocated_size": leak, "active_size": leak, "requested_size": leak,
               "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [[] for _ in range(device)] + [trace]}


def write_ranks(folder: Path, n: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(n):
        snapshot = rank_snapshot(rank, peak=40 * MiB if rank == PEAK_RANK else 16 * MiB,
                                 leak=16 * MiB if rank == LEAK_RANK else 0)
        (folder / f"rank{rank}.pickle").write_bytes(pickle.dumps(snapshot, protocol=4))
    return folder


def expected_figures() -> list[tuple]:
    rows = []
    for rank in range(8):
        peak = 40 * MiB if rank == PEAK_RANK else 16 * MiB
        end = 16 * MiB if rank == LEAK_RANK else 0
        # The peak is at the first alloc, t=100 us, 0 ns after the device's first time.
        rows.append((rank, f"cuda:{rank}", f"rank{rank}.pickle", peak, 64 * MiB, end, 0,
                     rank in (PEAK_RANK, LEAK_RANK)))
    return rows


def gather(captures, **how) -> RankTable:
    """The rank table of ``captures``, loaded as ``how`` says (workers, cluster...)."""
    table = RankTable(len(captures))
    for result in stream_results(captures, **how):
        table.add(result)
    return table


def figures(table: RankTable) -> list[tuple]:
    """The rows of ``table`` as tuples comparable with :func:`expected_figures`."""
    return [(r.rank, r.device, Path(r.path).name, r.peak_allocated, r.peak_reserved,
             r.allocated_at_end, r.peak_time, r.outlier) for r in table.rows]
