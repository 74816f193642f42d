"""Every byte attributed (issue 22): the level at an event equals the rows shown, the bytes
no block explains named ("alive before the capture", "in no operator").

The hand profiler folder's answers are in tests/helpers/profiler_folders.py; the real
``pt_st_l2_rank0`` folder (symbolic links to ../shared/data) is the issue's case: at the
peak the level is 10.0 GiB and 623 operator blocks hold 5.8 GiB.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from memtui.analysis.findings.peak import find_peak
from memtui.analysis.layout.state import allocator_state
from memtui.analysis.summary import summary
from memtui.analysis.timeline.attribution import (
    BEFORE_CAPTURE,
    BLOCKS_AHEAD,
    IN_NO_OPERATOR,
    before_capture,
    level_is_reported,
    measure_unexplained,
    remainder_at,
    unexplained,
)
from memtui.analysis.timeline.layers import has_layers, layer_view
from memtui.cli import main
from memtui.sources import open_capture
from tests.conftest import shared_files
from tests.helpers.profiler_folders import (
    LEVELS_MIB,
    PEAK_EVENT,
    hand_profiler_folder,
    real_profiler_folder,
)

MiB = 1 << 20
DEVICE = "rank0/npu0"


@pytest.fixture
def hand(tmp_path):
    return open_capture(hand_profiler_folder(tmp_path))


@pytest.fixture
def real(tmp_path):
    root = real_profiler_folder(tmp_path)
    if root is None:
        pytest.skip("../shared/data/profiler is absent")
    return root


def _rows(rows) -> list[tuple[str, int]]:
    return [(r.label, r.bytes // MiB) for r in rows]


def test_hand_folder_unexplained_bytes_by_hand(hand):
    u = unexplained(hand, DEVICE)
    assert (u.level // MiB).tolist() == LEVELS_MIB
    assert (u.blocks // MiB).tolist() == [10, 30, 30, 20, 20, 20]
    assert u.start == 100 * MiB
    assert [_rows(remainder_at(hand, DEVICE, k)) for k in range(6)] == [
        [(BEFORE_CAPTURE, 100)], [(BEFORE_CAPTURE, 100)],
        [(BEFORE_CAPTURE, 100), (IN_NO_OPERATOR, 5)], [(BEFORE_CAPTURE, 100), (IN_NO_OPERATOR, 5)],
        [(BEFORE_CAPTURE, 90)], [(BLOCKS_AHEAD, -5)],
    ]
    for k in range(6):  # blocks + named rows == level, at every event
        assert u.blocks[k] + sum(r.bytes for r in remainder_at(hand, DEVICE, k)) == u.level[k]
    assert before_capture(hand, DEVICE).to_dict() == {
        "bytes": 100 * MiB, "static_bytes": 0, "static_blocks": 0, "freed_bytes": 0,
        "freed_blocks": 0, "no_block_bytes": 100 * MiB}


def test_hand_folder_peak_lists_sum_to_the_peak_and_name_by_operator(hand):
    (peak,) = find_peak(hand, DEVICE)
    d = peak.detail
    assert d["peak_allocated_bytes"] == 135 * MiB
    assert d["grouped_by"] == "operator"
    assert [(r["label"], r["bytes"] // MiB) for r in d["by_owner"]] == [
        ("aten::b", 20), ("aten::a", 10), (BEFORE_CAPTURE, 100), (IN_NO_OPERATOR, 5)]
    for key in ("by_stack", "by_owner", "by_pool"):
        assert sum(r["bytes"] for r in d[key]) == 135 * MiB, key
        assert sum(r["share"] for r in d[key]) == pytest.approx(1.0, abs=1e-3)
    assert peak.title.startswith("peak 135.0 MiB allocated: aten::b holds 20.0 MiB (15%), "
                                 "100.0 MiB (74%) alive before the capture")
    assert peak.evidence.owner == "aten::b"


def test_hand_folder_state_names_the_rest(hand):
    data = allocator_state(hand, DEVICE, PEAK_EVENT)
    held = sum(b["size"] for s in data["segments"] for b in s["blocks"] if b["state"] != "free")
    assert held == 30 * MiB
    assert data["unattributed"] == [{"label": BEFORE_CAPTURE, "bytes": 100 * MiB},
                                    {"label": IN_NO_OPERATOR, "bytes": 5 * MiB}]
    assert held + sum(r["bytes"] for r in data["unattributed"]) == data["level"]["allocated"]


def test_hand_folder_summary_figures(hand):
    (d,) = summary(hand)["devices"]
    assert d["min_allocated_bytes"] == 15 * MiB
    # levels held 1 µs each from 0 to 5 µs: (110 + 130 + 135 + 125 + 110) / 5
    assert d["average_allocated_bytes"] == 122 * MiB
    assert (d["allocated_in_all_bytes"], d["allocations"]) == (30 * MiB, 2)
    assert d["median_block_bytes"] == 15 * MiB
    assert d["before_capture"]["no_block_bytes"] == 100 * MiB


# -- the case: the real pt_st_l2 folder --------------------------------------------

def test_real_folder_every_list_sums_to_the_status_bars_level(real, capsys):
    trace = open_capture(real)
    (entry,) = summary(trace)["devices"]
    peak_bytes = entry["peak_allocated_bytes"]
    assert peak_bytes == 10782243840  # "alloc 10.0 GiB" on the status bar
    (peak,) = find_peak(trace, DEVICE)
    d = peak.detail
    for key in ("by_stack", "by_owner", "by_pool"):
        assert sum(r["bytes"] for r in d[key]) == peak_bytes, key
    before = next(r for r in d["by_owner"] if r["label"] == BEFORE_CAPTURE)
    assert before["bytes"] == 4514074624  # 4.2 GiB, alive before the profile
    assert d["blocks_alive"] == 623
    first = d["by_owner"][0]
    assert first["label"] == "aten::matmul" and first["share"] == pytest.approx(0.2147, abs=1e-4)
    assert "aten::matmul holds 2.2 GiB (21%)" in peak.title
    assert "4.2 GiB (42%) alive before the capture" in peak.title
    assert entry["before_capture"]["no_block_bytes"] == 4514075136 - 512
    # state --event peak: the blocks and the named rows sum to the level
    assert main(["state", str(real), "--event", "peak", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    held = sum(b["size"] for s in state["segments"] for b in s["blocks"] if b["state"] != "free")
    assert held + sum(r["bytes"] for r in state["unattributed"]) == peak_bytes
    assert state["level"]["allocated"] == peak_bytes
    assert main(["state", str(real), "--event", "peak"]) == 0
    assert "4.2 GiB alive before the capture" in capsys.readouterr().out


def test_real_folder_gap_is_named_at_every_event(real):
    trace = open_capture(real)
    u = unexplained(trace, DEVICE)
    named = np.array([sum(r.bytes for r in remainder_at(trace, DEVICE, k))
                      for k in range(0, u.level.size, 97)])
    assert np.array_equal(u.blocks[::97] + named, u.level[::97])


# -- what pt-snap-cli calls "static" --------------------------------------------------------

T26 = [p for p in shared_files("torch_snapshots", "t26_cs336_kk_ctx512_fullstep.pickle")]


@pytest.mark.skipif(not T26, reason="../shared/data/torch_snapshots is absent")
def test_t26_static_memory_matches_pt_snap_cli():
    """pt-snap-cli's "[static]" group (allocEventId = freeEventId = -1) on t26 ctx512:
    13.8 GB in 326 blocks; memtui's ghosts never freed are the same blocks."""
    trace = open_capture(T26[0])
    b = before_capture(trace, "cuda:0")
    assert (b.static_bytes, b.static_blocks) == (13834545152, 326)
    assert (b.freed_blocks, b.unexplained_bytes) == (0, 0)
    (peak,) = find_peak(trace, "cuda:0")
    before = next(r for r in peak.detail["by_stack"] if r["label"] == BEFORE_CAPTURE)
    assert (before["bytes"], before["blocks"]) == (13834545152, 326)  # all alive then
    assert sum(r["bytes"] for r in peak.detail["by_stack"]) == peak.detail[
        "peak_allocated_bytes"]


@pytest.mark.skipif(not T26, reason="../shared/data/torch_snapshots is absent")
def test_t26_summary_says_what_was_alive_before(capsys):
    assert main(["summary", str(T26[0]), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert ("alive before the capture: 12.9 GiB: 12.9 GiB in 326 blocks never freed (static)"
            in text)
    assert "least 12.9 GiB" in text and "median 20.0 MiB" in text


BUILT_FROM_BLOCKS = (shared_files("torch_snapshots", "*.p*")
                     + [p for p in shared_files("msmemscope") if p.suffix in (".csv", ".db")])


@pytest.mark.parametrize("path", BUILT_FROM_BLOCKS, ids=lambda p: p.name)
def test_sources_that_build_the_level_from_blocks_leave_nothing_over(path):
    """Snapshots and msMemScope: at every event the blocks alive explain the whole level,
    so no remainder row is ever needed (and none is computed for them)."""
    trace = open_capture(path)
    if has_layers(trace):
        trace = layer_view(trace)
    assert not level_is_reported(trace)
    for device in trace.meta.device_names:
        gap = measure_unexplained(trace, device).gap
        assert not gap.any(), (device, int(gap.min()), int(gap.max()))
