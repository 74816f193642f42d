"""Hand-built traces and Pilot helpers for the UI tests (tests/tui/).

``toy_trace()`` is small enough to know every answer by hand:

    cuda:0  t=500  segment_alloc 1024           allocated   0  reserved 1024
            t=1000 alloc block 0, 100 B, stack 0 allocated 100
            t=2000 alloc block 1, 300 B, stack 1 allocated 400  <- the peak
            t=3000 free  block 0                 allocated 300
            t=4000 alloc block 2,  50 B, stack 0 allocated 350
            t=5000 free  block 1                 allocated  50
    cuda:1  t=1500 alloc block 3, 64 B; t=2500 free block 3

Stack 0 is [allocator frame, forward (model.py:10), main (train.py:20)], stack 1 is
[allocator frame, main (train.py:20)]: their tops are ``forward (model.py:10)`` and
``main (train.py:20)``.  Markers: ranges "step#0" 900..3500 and "step#1" 3600..5200.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

FORWARD = "forward (model.py:10)"
MAIN = "main (train.py:20)"


def toy_trace(time_unit: str = "ns") -> MemoryTrace:
    events = pl.DataFrame(
        {
            "t": [500, 1000, 1500, 2000, 2500, 3000, 4000, 5000],
            "seq": [0, 1, 0, 2, 1, 3, 4, 5],
            "device": ["cuda:0", "cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0", "cuda:0",
                       "cuda:0"],
            "action": ["segment_alloc", "alloc", "alloc", "alloc", "free", "free", "alloc",
                       "free"],
            "addr": [0x1000, 0x1000, 0x9000, 0x1100, 0x9000, 0x1000, 0x1000, 0x1100],
            "size": [1024, 100, 64, 300, 64, 100, 50, 300],
            "block_id": [None, 0, 3, 1, 3, 0, 2, 1],
            "stack_id": [None, 0, 0, 1, 0, 0, 0, 1],
            "allocated": [0, 100, 64, 400, 0, 300, 350, 50],
            "reserved": [1024, 1024, 0, 1024, 0, 1024, 1024, 1024],
            "pool": ["CUDA"] * 8,
            "stream": [0] * 8,
        }
    ).with_columns(active=pl.col("allocated"))
    blocks = pl.DataFrame(
        {
            "block_id": [0, 1, 2, 3],
            "device": ["cuda:0", "cuda:0", "cuda:0", "cuda:1"],
            "addr": [0x1000, 0x1100, 0x1000, 0x9000],
            "size": [100, 300, 50, 64],
            "requested_size": [100, 300, 50, 64],
            "t_alloc": [1000, 2000, 4000, 1500],
            "t_free": [3000, 5000, None, 2500],
            "stack_id": [0, 1, 0, 0],
            "pool": ["CUDA"] * 4,
            "stream": [0] * 4,
            "ghost": [False] * 4,
        }
    )
    segments = pl.DataFrame({"segment_id": [0], "device": ["cuda:0"], "addr": [0x1000],
                             "size": [1024], "t_alloc": [500]})
    frames = pl.DataFrame(
        {
            "frame_id": [0, 1, 2],
            "filename": ["CUDACachingAllocator.cpp", "/work/model.py", "/work/train.py"],
            "line": [0, 10, 20],
            "name": ["c10::cuda::CUDACachingAllocator::malloc", "forward", "main"],
        }
    )
    stacks = pl.DataFrame({"stack_id": [0, 1], "frame_ids": [[0, 1, 2], [0, 2]]},
                          schema={"stack_id": pl.Int32, "frame_ids": pl.List(pl.Int32)})
    markers = pl.DataFrame({"t": [900, 3600], "t_end": [3500, 5200],
                            "device": ["cuda:0", "cuda:0"], "kind": ["annotation"] * 2,
                            "name": ["step#0", "step#1"]})
    meta = TraceMeta(
        source="test", path="/toy/toy.pickle", time_unit=time_unit,
        devices=[DeviceInfo("cuda:0", kind="cuda", has_segments=True, start_reserved=0),
                 DeviceInfo("cuda:1", kind="cuda", has_segments=True, start_reserved=0)],
    )
    return MemoryTrace(
        meta=meta, events=conform(events, "events"), blocks=conform(blocks, "blocks"),
        segments=conform(segments, "segments"), frames=conform(frames, "frames"),
        stacks=conform(stacks, "stacks"), markers=conform(markers, "markers"),
    )


def profiler_trace() -> MemoryTrace:
    """Curves only, as the Ascend profiler sources produce them (one device ``npu:0``).

    Overall: Operators Allocated 10/30/20, Operators Reserved 50/50/60, App Reserved 100
    at t = 0, 10, 20 (ns).  Stream 7: Operators Allocated 5/15/10.  Component PTA:
    Operators Allocated 8/20/12 and Operators Reserved 40/40/40.
    """
    rows = []

    def add(series, values, component=None, stream=None):
        for t, v in zip((0, 10, 20), values, strict=True):
            rows.append({"t": t, "device": "npu:0", "series": series, "component": component,
                         "stream": stream, "bytes": v})

    add("Operators Allocated", (10, 30, 20))
    add("Operators Reserved", (50, 50, 60))
    add("App Reserved", (100, 100, 100))
    add("Operators Allocated", (5, 15, 10), stream=7)
    add("Operators Allocated", (8, 20, 12), component="PTA")
    add("Operators Reserved", (40, 40, 40), component="PTA")
    curves = pl.DataFrame(rows, schema={"t": pl.Int64, "device": pl.String,
                                        "series": pl.String, "component": pl.String,
                                        "stream": pl.Int64, "bytes": pl.Int64})
    meta = TraceMeta(source="ascend_profiler", path="/toy/profiler",
                     devices=[DeviceInfo("npu:0", kind="npu")])
    return MemoryTrace(meta=meta, curves=conform(curves, "curves"))


def big_trace(n_events: int, seed: int = 0) -> MemoryTrace:
    """``n_events`` alternating allocs and frees (n_events / 2 blocks), built with numpy."""
    rng = np.random.default_rng(seed)
    half = n_events // 2
    sizes = rng.integers(1, 1 << 20, half) * 512
    t_alloc = np.arange(half, dtype=np.int64) * 2000
    t_free = t_alloc + 1000 + rng.integers(0, 1000, half)
    order = np.argsort(np.concatenate([t_alloc, t_free]), kind="stable")
    t = np.concatenate([t_alloc, t_free])[order]
    action = np.array(["alloc", "free"])[np.repeat([0, 1], half)][order]
    size = np.concatenate([sizes, sizes])[order]
    block = np.concatenate([np.arange(half), np.arange(half)])[order]
    delta = np.where(action == "alloc", size, -size)
    events = pl.DataFrame({
        "t": t, "seq": np.arange(t.size), "device": "cuda:0", "action": action,
        "addr": (block * 4096).astype(np.uint64), "size": size, "block_id": block,
        "allocated": np.cumsum(delta),
    }).with_columns(active=pl.col("allocated"), pool=pl.lit("CUDA"))
    blocks = pl.DataFrame({
        "block_id": np.arange(half), "device": "cuda:0",
        "addr": (np.arange(half) * 4096).astype(np.uint64), "size": sizes,
        "requested_size": sizes, "t_alloc": t_alloc, "t_free": t_free,
    }).with_columns(ghost=pl.lit(False), pool=pl.lit("CUDA"))
    meta = TraceMeta(source="test", path="/toy/big.pickle", devices=[DeviceInfo("cuda:0")])
    return MemoryTrace(meta=meta, events=conform(events, "events"),
                       blocks=conform(blocks, "blocks"))


async def ready(pilot, timeout: float = 30.0) -> None:
    """Wait until the app has loaded and painted its first screen and its workers are done."""
    app = pilot.app
    waited = 0.0
    while app.cursor is None or "trend" not in app.painted:
        if app.load_error or waited > timeout:
            return
        await pilot.pause(0.02)
        waited += 0.02
    await settle(pilot)


async def settle(pilot) -> None:
    """Let workers finish and the screen repaint."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def status_lines(app) -> list[str]:
    """The status bar's lines as painted."""
    from memtui.tui.widgets.status import StatusBar

    bar = app.screen.query_one(StatusBar)
    return [bar.render_line(y).text.rstrip() for y in range(bar.size.height)]


def status_text(app) -> str:
    """The status bar's lines as painted, joined by the separator where it wrapped (its
    render cache: stale unless it refreshed)."""
    return " " + " │ ".join(line.strip() for line in status_lines(app) if line.strip())


async def answered(pilot) -> None:
    """Loaded, painted, the findings in (and the cursor moved to the answer)."""
    app = pilot.app
    for _ in range(1500):
        if app.load_error or (app.cursor is not None and app.findings is not None):
            break
        await pilot.pause(0.02)
    await ready(pilot)
    await settle(pilot)
