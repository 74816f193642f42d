"""The peak by ``user_metadata`` (torch 2.10+ ``_set_memory_metadata``) on a hand-made
snapshot pickle; captures without it have no ``by_metadata``."""

from __future__ import annotations

import pickle
from pathlib import Path

from memtui.analysis.findings.peak import find_peak
from memtui.loading import load_trace
from memtui.tui.screens.findings import detail_text
from tests.helpers.hand_snapshot import STACK_B1, STACK_B2, write_hand_snapshot

# t (us): 1 segment_alloc 0x1000 (8192); 2 alloc 0x1000 1024 "encoder"; 3 alloc 0x1400
# 2048 "decoder"; 4 alloc 0x1C00 512 with a non-string metadata (ignored); 5 alloc 0x1E00
# 1024 "encoder"; 6/7 free 0x1E00; 8 alloc 0x2200 256 "late".  A segment 0x10000 from
# before the trace holds a ghost block of 512 bytes whose dump block says "[b]weights[/b]".
# Allocated peaks after t=5: 1024 + 2048 + 512 + 1024 + the ghost's 512 = 4608 + 512.
# By metadata there: decoder 2048 (1 block), encoder 2048 (2), [b]weights[/b] 512 (1).
TRACE = [
    {"action": "segment_alloc", "addr": 0x1000, "size": 8192, "stream": 0, "time_us": 1,
     "user_metadata": ""},
    {"action": "alloc", "addr": 0x1000, "size": 1024, "stream": 0, "time_us": 2,
     "frames": STACK_B1, "user_metadata": "encoder"},
    {"action": "alloc", "addr": 0x1400, "size": 2048, "stream": 0, "time_us": 3,
     "frames": STACK_B2, "user_metadata": "decoder"},
    {"action": "alloc", "addr": 0x1C00, "size": 512, "stream": 0, "time_us": 4,
     "frames": STACK_B2, "user_metadata": {"not": "a string"}},
    {"action": "alloc", "addr": 0x1E00, "size": 1024, "stream": 0, "time_us": 5,
     "frames": STACK_B1, "user_metadata": "encoder"},
    {"action": "free_requested", "addr": 0x1E00, "size": 1024, "stream": 0, "time_us": 6,
     "user_metadata": ""},
    {"action": "free_completed", "addr": 0x1E00, "size": 1024, "stream": 0, "time_us": 7,
     "user_metadata": ""},
    {"action": "alloc", "addr": 0x2200, "size": 256, "stream": 0, "time_us": 8,
     "frames": STACK_B1, "user_metadata": "late"},
]


def _block(address: int, size: int, state: str, **extra) -> dict:
    return {"address": address, "size": size, "requested_size": size, "state": state,
            "frames": [], **extra}


SEGMENTS = [
    {"device": 0, "address": 0x1000, "total_size": 8192, "stream": 0, "segment_type": "large",
     "blocks": [_block(0x1000, 1024, "active_allocated"),
                _block(0x1400, 2048, "active_allocated"),
                _block(0x1C00, 512, "active_allocated"),
                _block(0x1E00, 1024, "inactive"),
                _block(0x2200, 256, "active_allocated"),
                _block(0x2300, 8192 - 0x1300, "inactive")]},
    {"device": 0, "address": 0x10000, "total_size": 4096, "stream": 0, "segment_type": "large",
     "blocks": [_block(0x10000, 512, "active_allocated", user_metadata="[b]weights[/b]"),
                _block(0x10200, 4096 - 512, "inactive")]},
]


def _write(path: Path) -> Path:
    with open(path, "wb") as f:
        pickle.dump({"segments": SEGMENTS, "device_traces": [TRACE]}, f, protocol=4)
    return path


def test_peak_by_user_metadata(tmp_path):
    trace = load_trace(_write(tmp_path / "meta.pickle"))
    peak = find_peak(trace, "cuda:0")[0]
    assert peak.bytes == 4608 + 512
    rows = [{k: row[k] for k in ("label", "bytes", "blocks")}
            for row in peak.detail["by_metadata"]]
    assert rows == [{"label": "decoder", "bytes": 2048, "blocks": 1},
                    {"label": "encoder", "bytes": 2048, "blocks": 2},
                    {"label": "[b]weights[/b]", "bytes": 512, "blocks": 1},
                    {"label": "(no metadata)", "bytes": 512, "blocks": 1}]  # sums to the peak
    assert peak.detail["by_metadata"][0]["share"] == round(2048 / 5120, 4)
    assert "user_metadata" not in trace.events.columns  # carried by the blocks only
    shown = detail_text(peak, None).plain
    assert "by metadata:" in shown and "[b]weights[/b]" in shown  # as text, not markup


def test_no_metadata_no_by_metadata(tmp_path):
    trace = load_trace(write_hand_snapshot(tmp_path / "hand.pickle"))
    peak = find_peak(trace, "cuda:0")[0]
    assert not peak.detail.get("by_metadata")
    assert "by metadata" not in detail_text(peak, None).plain


def test_empty_metadata_everywhere_adds_no_column(tmp_path):
    """torch 2.10+ writes ``user_metadata: ""`` on every entry when none is set."""
    trace_rows = [{**entry, "user_metadata": ""} for entry in TRACE]
    segments = [{**s, "blocks": [{k: v for k, v in b.items() if k != "user_metadata"}
                                 for b in s["blocks"]]} for s in SEGMENTS]
    path = tmp_path / "empty.pickle"
    with open(path, "wb") as f:
        pickle.dump({"segments": segments, "device_traces": [trace_rows]}, f, protocol=4)
    trace = load_trace(path)
    assert "user_metadata" not in trace.blocks.columns
    assert "by_metadata" not in find_peak(trace, "cuda:0")[0].detail
