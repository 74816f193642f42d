"""The answer on the first screen, the analysis half (issue 23 point 1): which finding
the cursor opens at, on the demo, a leak capture and OOM captures, and where."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.analysis.findings import find_all
from memtui.sources import open_capture
from memtui.tui.answer import evidence_changes, finding_note, peak_note, top_finding
from memtui.tui.cursor import CursorState

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "kind"), [
    ("snapshots/demo_training.pickle", "leak"),
    ("snapshots/demo_oom.pickle", "oom"),  # an OOM before the leak it also has
    ("tests/data/cuda_train_leak.pickle", "leak"),
    ("tests/data/cuda_oom_fragmented.pickle", "oom"),
    ("tests/data/cuda_oom_full.pickle", "oom"),
])
def test_the_top_finding_is_the_oom_or_the_leak(name, kind):
    trace = open_capture(REPO / name)
    found = find_all(trace)
    top = top_finding(found, "cuda:0")
    assert top is not None and top.kind == kind and top.severity == "high"
    cursor = CursorState(device="cuda:0", t=0, view=(0, 1))
    changes = evidence_changes(trace, top, cursor)
    events = trace.device_events("cuda:0")
    row = events.row(changes["event"], named=True)
    assert row["seq"] == top.evidence.seq and row["t"] == top.evidence.t
    if top.evidence.block_ids:
        assert changes["block_id"] == top.evidence.block_ids[0]


def test_no_oom_or_leak_leaves_the_cursor_at_the_peak():
    """Fragmentation, the peak and capture limits never lead: the cursor opens at the
    peak (t26: fragmentation is medium, its evidence at event 0, where nothing lives)."""
    trace = open_capture(REPO / "tests/data/cuda_graph_pool.pickle")
    found = find_all(trace)
    assert all(f.kind not in ("oom", "leak") for f in found["cuda:0"])
    assert top_finding(found, "cuda:0") is None
    assert top_finding(None, "cuda:0") is None
    assert top_finding(found, "cuda:9") is None


def test_the_note_holds_while_the_cursor_stays():
    trace = open_capture(REPO / "snapshots/demo_training.pickle")
    top = top_finding(find_all(trace), "cuda:0")
    here = CursorState(device="cuda:0", t=5, view=(0, 10), event=3)
    note = finding_note(top, here)
    assert note.part(here) == "at leak"
    assert note.part(here.with_changes(event=4, t=6)) is None
    assert note.part(here.with_changes(device="cuda:1")) is None
    assert peak_note(here).part(here) == "at peak"
    # a zoom, a window or a block chosen do not move the cursor off its event (issue 35)
    assert note.part(here.with_changes(view=(4, 6), window=(4, 6), block_id=7)) == "at leak"
