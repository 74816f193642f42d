"""Bytes by call stack (analysis.stack_tree): sums worked out by hand on the hand trace,
frame filtering, search, and the sums on a real snapshot checked against a plain walk."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from memtui.analysis.stacks.stack_tree import (
    ROOT,
    StackTree,
    block_rows_for,
    format_stack,
    frame_keep_mask,
)
from memtui.analysis.timeline.live import device_index
from memtui.sources import open_capture
from tests.helpers.hand_snapshot import SNAPSHOTS, us, write_hand_snapshot


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    trace = open_capture(write_hand_snapshot(tmp_path_factory.mktemp("tree") / "h.pickle"))
    return trace, StackTree(trace), device_index(trace, "cuda:0")


def _tree(tree: StackTree, figures, node=ROOT) -> dict:
    """``{label: (bytes, {children...})}`` of the nodes holding bytes."""
    return {tree.label(int(k)): (int(figures.bytes[k]), _tree(tree, figures, int(k)))
            for k in tree.children(node, figures)}


def _figures(hand, mode, t=0, window=None):
    trace, tree, index = hand
    rows, _ = block_rows_for(trace, index, mode, t, window)
    return tree.figures(index.stack_id[rows], index.size[rows])


def test_live_at_the_end(hand):
    figures = _figures(hand, "cursor", us(11))
    assert figures.total == 3072
    assert _tree(hand[1], figures) == {
        "main  train.py:1": (2048, {
            "forward  model.py:5": (1536, {
                "alloc_b1  model.py:10": (1024, {}),
                "alloc_b2  model.py:11": (512, {}),
            }),
            "step  opt.py:1": (512, {"alloc_b3  opt.py:3": (512, {})}),
        }),
        "(no stack recorded)": (1024, {}),
    }
    assert figures.blocks[ROOT] == 4


def test_live_at_the_peak(hand):
    trace, tree, index = hand
    rows, t = block_rows_for(trace, index, "peak", 0)
    assert t == us(4)
    figures = tree.figures(index.stack_id[rows], index.size[rows])
    assert figures.total == 4096
    got = _tree(tree, figures)
    assert got["main  train.py:1"][0] == 2560
    assert got["main  train.py:1"][1]["forward  model.py:5"][0] == 2048
    assert got["(no stack recorded)"] == (1536, {})  # the ghosts g1 and g2


def test_allocated_over_a_window(hand):
    assert _figures(hand, "window", window=(us(2), us(4))).total == 2560
    figures = _figures(hand, "window", window=(us(9), us(9)))
    assert _tree(hand[1], figures) == {"main  train.py:1": (512, {"forward  model.py:5": (
        512, {"alloc_b2  model.py:11": (512, {})})})}
    assert _figures(hand, "window").total == 1024 + 1024 + 512 + 512  # the traced allocs


def test_search_ancestors_and_blocks_under_a_node(hand):
    trace, tree, index = hand
    found = tree.search("ALLOC_B")
    assert sorted(tree.label(int(n)) for n in found) == [
        "alloc_b1  model.py:10", "alloc_b2  model.py:11", "alloc_b3  opt.py:3"]
    step = [int(n) for n in tree.search("opt.py") if tree.label(int(n)).startswith("step")][0]
    assert [tree.label(n) for n in tree.ancestors(step)] == ["all", "main  train.py:1"]
    forward = int(tree.search("forward")[0])
    rows = tree.block_rows_under(forward, index, index.blocks_at(us(11)))
    assert sorted(index.addr[rows].tolist()) == [0x1000, 0x1400]
    assert tree.search("") .size == 0
    nostack = tree.block_rows_under(1, index, index.blocks_at(us(11)))
    assert index.addr[nostack].tolist() == [0x10200]


def test_format_stack_and_hidden_frames(hand):
    trace, _, index = hand
    row = int(np.flatnonzero(index.addr == 0x1800)[0])
    assert format_stack(trace, int(index.stack_id[row])) == [
        "/src/opt.py:3:alloc_b3", "/src/opt.py:1:step", "/src/train.py:1:main"]
    assert format_stack(trace, None)[0].startswith("(no stack recorded")
    frames = pl.DataFrame({
        "frame_id": [0, 1, 2, 3], "line": [0, 0, 3, 0],
        "name": ["torch::unwind::unwind()", "_PyEval_EvalFrameDefault", "forward", "x"],
        "filename": ["", "", "m.py", "/pytorch/aten/src/ATen/core/boxing/impl.h"],
    })
    assert frame_keep_mask(frames).tolist() == [False, False, True, False]


def test_real_sums_match_a_plain_walk():
    path = SNAPSHOTS / "t26_cs336_kk_ctx128_forward.pickle"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = open_capture(path)
    tree = StackTree(trace)
    index = device_index(trace, trace.meta.device_names[0])
    rows = index.blocks_at(index.t_end)
    figures = tree.figures(index.stack_id[rows], index.size[rows])
    assert figures.total == index.size[rows].sum()
    # a node holds at least what its children hold
    child_sum = np.bincount(tree.parent[1:], weights=figures.bytes[1:], minlength=tree.size)
    assert np.all(figures.bytes + 0.5 >= child_sum)
    # the first-level nodes against a walk of the stacks in Python
    hidden = set(trace.frames.filter(pl.Series(~frame_keep_mask(trace.frames)))["frame_id"])
    frames_of = dict(zip(trace.stacks["stack_id"].to_list(),
                         trace.stacks["frame_ids"].to_list(), strict=True))
    outermost: dict[int, int] = {}
    for stack, size in zip(index.stack_id[rows].tolist(), index.size[rows].tolist(),
                           strict=True):
        kept = [f for f in frames_of.get(stack, []) if f not in hidden]
        key = kept[-1] if kept else -1
        outermost[key] = outermost.get(key, 0) + size
    for node in tree.children(ROOT, figures):
        frame = int(tree.frame[node])
        assert figures.bytes[node] == outermost[frame if frame >= 0 else -1]


def test_user_frames_only_and_self_bytes():
    """toy_trace: stack 0 is malloc (C++) <- forward (model.py) <- main (train.py), stack 1
    malloc <- main.  Blocks of 100 and 25 bytes with stack 0, 50 with stack 1."""
    from memtui.analysis.stacks.stack_tree import ROOT, StackTree
    from tests.helpers.toy_traces import toy_trace

    trace = toy_trace()
    stacks, sizes = np.array([0, 1, 0]), np.array([100, 50, 25])
    for user_only in (False, True):
        tree = StackTree(trace, user_only=user_only)
        figures = tree.figures(stacks, sizes)
        labels = {tree.label(n): n for n in range(2, tree.size)}
        main = labels["main  train.py:20"]
        forward = labels["forward  model.py:10"]
        assert figures.bytes[main] == 175 and figures.blocks[main] == 3
        assert figures.bytes[forward] == 125 and figures.blocks[forward] == 2
        assert figures.self_bytes[ROOT] == 0
        malloc = [n for n in range(2, tree.size) if "malloc" in tree.label(n)]
        if user_only:  # the C++ frame is gone: the stacks end at forward and main
            assert malloc == []
            assert figures.self_bytes[main] == 50 and figures.self_bytes[forward] == 125
        else:
            assert len(malloc) == 2
            assert figures.self_bytes[main] == 0 and figures.self_bytes[forward] == 0
            assert sorted(figures.self_bytes[malloc].tolist()) == [50, 125]


def test_live_at_the_cursor_counts_by_event_not_by_time():
    """Issue 15: allocs of 100 and 200 share t=20; just after event 1 only the 100 is
    alive (110 B with the 10 of event 0), which the time (20) alone cannot tell (310 B)."""
    from tests.tui.test_app import shared_time_trace

    trace = shared_time_trace()
    index = device_index(trace, "cuda:0")
    by_time, _ = block_rows_for(trace, index, "cursor", 20)
    assert int(index.size[by_time].sum()) == 310
    totals = [int(index.size[block_rows_for(trace, index, "cursor", t, event=k)[0]].sum())
              for k, t in enumerate([10, 20, 20, 30])]
    assert totals == [10, 110, 310, 300]


@pytest.mark.slow
def test_live_at_the_cursor_is_the_status_bar_level_on_a_real_snapshot():
    """t26 ctx512: ~30% of its events share a microsecond with another; at sampled events
    the Stacks total equals the status bar's allocated at that event."""
    from memtui.analysis.timeline.at_time import Timeline
    from tests.conftest import require_shared

    path = require_shared("torch_snapshots") / "t26_cs336_kk_ctx512_fullstep.pickle"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    trace = open_capture(path)
    device = trace.meta.device_names[0]
    index, timeline = device_index(trace, device), Timeline.build(trace, device)
    times = trace.device_events(device)["t"].to_numpy()
    shared = np.flatnonzero(np.diff(times) == 0)  # events sharing a time with the next
    picks = np.unique(np.concatenate([shared[:: max(1, shared.size // 40)],
                                      np.linspace(0, times.size - 1, 20).astype(int)]))
    for k in picks.tolist():
        rows, _ = block_rows_for(trace, index, "cursor", int(times[k]), event=k)
        assert int(index.size[rows].sum()) == timeline.levels_at_event(k).allocated, k


def test_live_at_the_peak_counts_by_event_not_by_time():
    """QA (issue 15 follow-up): alloc 10 at t=10, alloc 100 and free of the 10 both at
    t=20.  The peak (110 B) is just after the second event; by time (t=20) the 10 is
    already freed and the tree counted 100 B."""
    import polars as pl

    from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

    events = pl.DataFrame({
        "t": [10, 20, 20], "seq": [0, 1, 2], "device": ["cuda:0"] * 3,
        "action": ["alloc", "alloc", "free"], "addr": [0x10, 0x20, 0x10],
        "size": [10, 100, 10], "block_id": [0, 1, 0], "allocated": [10, 110, 100]})
    blocks = pl.DataFrame({
        "block_id": [0, 1], "device": ["cuda:0"] * 2, "addr": [0x10, 0x20],
        "size": [10, 100], "t_alloc": [10, 20], "t_free": [20, None],
        "seq_alloc": [0, 1], "seq_free": [2, None], "ghost": [False] * 2})
    meta = TraceMeta(source="test", path="peak.pickle", devices=[DeviceInfo("cuda:0")])
    trace = MemoryTrace(meta=meta, events=conform(events, "events"),
                        blocks=conform(blocks, "blocks"))
    index = device_index(trace, "cuda:0")
    rows, t = block_rows_for(trace, index, "peak", 0)
    assert t == 20
    assert int(index.size[rows].sum()) == 110
    assert int(index.size[index.blocks_at(20)].sum()) == 100  # what time alone says


def test_ghosts_marked_go_under_alive_before_the_capture(hand):
    """At the start the ghosts g1 and g2 (1536 B, no stack) are alive: marked with
    BEFORE_STACK they hang under "alive before the capture", the rest of the tree as
    before; the f-filter of that node gives them, of "(no stack recorded)" none."""
    from memtui.analysis.stacks.stack_tree import BEFORE_STACK

    trace, tree, index = hand
    rows, _ = block_rows_for(trace, index, "cursor", us(1))
    ghost = index.ghost[rows]
    assert index.size[rows][ghost].sum() == 1536
    marked = np.where(ghost, BEFORE_STACK, index.stack_id[rows])
    figures = tree.figures(marked, index.size[rows])
    plain = tree.figures(index.stack_id[rows], index.size[rows])
    assert figures.total == plain.total  # the same bytes, named otherwise
    got = _tree(tree, figures)
    assert got["alive before the capture"] == (1536, {})
    assert "(no stack recorded)" not in got or got["(no stack recorded)"][0] == (
        plain.bytes[1] - 1536)
    node = tree.remainder_node["alive before the capture"]
    assert figures.blocks[node] == int(ghost.sum())
    under = tree.block_rows_under(node, index, rows, ghosts_apart=True)
    assert sorted(under.tolist()) == sorted(rows[ghost].tolist())
    assert not index.ghost[tree.block_rows_under(1, index, rows, ghosts_apart=True)].any()
