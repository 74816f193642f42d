"""Snapshots whose values are impossible, hostile or far larger than the file
(issue 12, defects 3, 4 and 5): bad rows skipped and counted, bombs refused in one line."""

from __future__ import annotations

import contextlib
import pickle
import struct
import subprocess
import sys
import time

import pytest

from memtui.errors import CaptureError
from memtui.sources import open_capture
from tests.conftest import REPO

SEGMENT = {"device": 0, "address": 0x1000, "total_size": 4096, "stream": 0,
           "segment_type": "large", "blocks": [
               {"address": 0x1000, "size": 1024, "requested_size": 1000,
                "state": "active_allocated"},
               {"address": 0x1400, "size": 3072, "state": "inactive"}]}


def _entry(action, addr, size, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t}


#: allocated: 512 at t=1, 1536 at t=2 (the peak), 1024 at t=3 (then the dump's 1024 block).
GOOD = [_entry("alloc", 0x2000, 512, 1), _entry("alloc", 0x1000, 1024, 2),
        _entry("free_completed", 0x2000, 512, 3)]


def _write(tmp_path, snapshot, name="snap.pickle"):
    path = tmp_path / name
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return path


def _snapshot(entries, segments=None):
    return {"segments": [dict(SEGMENT)] if segments is None else segments,
            "device_traces": [list(entries)]}


def _peak(trace) -> int:
    return int(trace.events["allocated"].max())


def test_the_good_trace_by_hand(tmp_path):
    trace = open_capture(_write(tmp_path, _snapshot(GOOD)))
    assert _peak(trace) == 1536
    assert trace.meta.warnings == []


@pytest.mark.parametrize("size", [-4096, "512", 1.5, None, [1], 2**70])
def test_an_entry_with_an_impossible_size_is_skipped_and_counted(tmp_path, size):
    bad = _entry("alloc", 0x9000, size, 2)
    if size is None:
        del bad["size"]
    trace = open_capture(_write(tmp_path, _snapshot([GOOD[0], bad, *GOOD[1:]])))
    assert trace.events.height == 3
    assert _peak(trace) == 1536  # a negative size no longer lowers the peak
    assert any("1 trace entries with missing or impossible values" in w
               for w in trace.meta.warnings)


def test_a_negative_segment_size_is_skipped_and_counted(tmp_path):
    negative = dict(SEGMENT, address=0x100000, total_size=-(1 << 20), blocks=[])
    trace = open_capture(_write(tmp_path, _snapshot(GOOD, [dict(SEGMENT), negative])))
    assert trace.meta.devices[0].reserved_at_end == 4096
    assert int(trace.events["reserved"].min()) >= 0
    assert any("1 segments with missing or impossible values" in w
               for w in trace.meta.warnings)


def test_a_negative_block_size_in_the_dump_is_skipped(tmp_path):
    segment = dict(SEGMENT, blocks=[{"address": 0x1000, "size": -1024,
                                     "state": "active_allocated"}])
    trace = open_capture(_write(tmp_path, _snapshot(GOOD, [dict(SEGMENT), segment])))
    assert int(trace.blocks["size"].min()) >= 0
    assert trace.meta.warnings


def test_nothing_readable_is_one_plain_line(tmp_path):
    path = _write(tmp_path, _snapshot([_entry("alloc", 1, -5, 1)], segments=[]))
    with pytest.raises(CaptureError, match="none of its trace entries or segments"):
        open_capture(path)


def _nested_list_pickle(depth: int) -> bytes:
    """A snapshot whose one entry's action is a list nested ``depth`` deep (built with
    opcodes: pickling such a list in Python would recurse too deep)."""
    placeholder = "PLACEHOLDER"
    data = pickle.dumps(_snapshot([{**GOOD[0], "action": placeholder}]), protocol=2)
    op = b"X" + struct.pack("<I", len(placeholder)) + placeholder.encode()
    nested = b"]" * depth + b"a" * (depth - 1)
    assert data.count(op) == 1
    return data.replace(op, nested)


def _self_containing_pickle(key: str) -> bytes:
    loop: list = []
    loop.append(loop)
    return pickle.dumps(_snapshot([GOOD[0], {**GOOD[1], key: loop}]), protocol=4)


_BUILDERS = {
    "deep_action": lambda: _nested_list_pickle(1_000_000),
    "loop_action": lambda: _self_containing_pickle("action"),
    "loop_size": lambda: _self_containing_pickle("size"),
    "loop_frames": lambda: _self_containing_pickle("frames"),
}


@pytest.mark.parametrize("name", sorted(_BUILDERS))
def test_lists_that_would_overflow_polars_stack_never_reach_it(tmp_path, name):
    """In a child process: before the fix this was a segfault (exit 139)."""
    data = _BUILDERS[name]()
    path = tmp_path / f"{name}.pickle"
    path.write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "memtui.cli", "summary", str(path)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode in (0, 2), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_memo_index_bomb_is_refused_in_one_line(tmp_path):
    path = tmp_path / "memo.pickle"
    path.write_bytes(b"\x80\x02N" + b"r" + struct.pack("<I", 2**27) + b".")  # 9 bytes
    started = time.monotonic()
    with pytest.raises(CaptureError, match="refused"):
        open_capture(path)
    assert time.monotonic() - started < 5


def test_one_segment_referenced_a_thousand_times_is_refused(tmp_path):
    block = {"address": 0x1000, "size": 1, "state": "inactive"}
    segment = dict(SEGMENT, blocks=[block] * 10_000)
    path = _write(tmp_path, {"segments": [segment] * 1000, "device_traces": []})
    assert path.stat().st_size < 100_000
    with pytest.raises(CaptureError, match="object graph is far larger than the file"):
        open_capture(path)


def test_shared_structures_in_labels_are_not_printed(tmp_path):
    """``user_metadata`` and a segment's ``device`` that print as gigabytes."""
    bomb: list = ["x" * 10]
    for _ in range(40):
        bomb = [bomb, bomb]
    note = {"action": "annotate", "addr": 0, "size": 0, "stream": 0, "time_us": 2,
            "user_metadata": bomb}
    segment = dict(SEGMENT, address=0x100000, device=bomb)
    path = _write(tmp_path, _snapshot([GOOD[0], note, *GOOD[1:]],
                                      segments=[dict(SEGMENT), segment]))
    assert path.stat().st_size < 2000
    trace = open_capture(path)
    assert trace.markers.filter(trace.markers["kind"] == "annotate")["name"].to_list() == [
        "annotation"]
    assert trace.meta.device_names == ["cuda:0"]


def test_the_memory_limit_is_restored_after_concurrent_loads(tmp_path):
    import resource
    import threading

    before = resource.getrlimit(resource.RLIMIT_DATA)
    path = _write(tmp_path, _snapshot(GOOD))
    bomb = tmp_path / "memo.pickle"
    bomb.write_bytes(b"\x80\x02N" + b"r" + struct.pack("<I", 2**27) + b".")

    def load(target):
        for _ in range(20):
            with contextlib.suppress(CaptureError):
                open_capture(target)

    threads = [threading.Thread(target=load, args=(p,)) for p in (path, bomb, path, bomb)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
