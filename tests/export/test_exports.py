"""``memtui export`` (issue 24): Perfetto trace-event JSON and Parquet frames.

On the demo: the JSON loads, every counter sample is a number, each track's timestamps
increase, the allocated track's maximum is the summary's peak, and the leak is an instant
event.  On the hand snapshot (times 1..11 us, levels worked out in
``tests/helpers/hand_snapshot.py``): the samples are exactly the levels at each time.
Parquet frames read back equal to the capture's, Arrow types included.
"""

from __future__ import annotations

import json
from collections import defaultdict

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import memtui
from memtui.cli import main
from tests.conftest import REPO
from tests.helpers.hand_snapshot import write_hand_snapshot
from tests.helpers.run_profile import by_profile

DEMO = REPO / "snapshots" / "demo_training.pickle"


def tracks(data: dict) -> dict[tuple[int, str], list[tuple[float, object]]]:
    found = defaultdict(list)
    for event in data["traceEvents"]:
        if event["ph"] == "C":
            found[(event["pid"], event["name"])].append((event["ts"], event["args"]["bytes"]))
    return found


def export(capsys, path, fmt, out) -> int:
    code = main(["export", str(path), "--to", fmt, "-o", str(out)])
    capsys.readouterr()
    return code


def test_perfetto_of_the_demo_is_valid_trace_event_json(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert export(capsys, DEMO, "perfetto", out) == 0
    data = json.loads(out.read_text())
    found = tracks(data)
    roles = {key for key in found if key[1].startswith("role ")}
    assert set(found) - roles == {(1, "allocated"), (1, "reserved")}
    assert {name for _, name in roles} >= {"role parameter", "role activation"}
    # one track per role (issue 32): held since their last samples, they add up to the
    # allocated level at each of its samples
    for ts, value in found[(1, "allocated")]:
        held = [next((v for t, v in reversed(found[key]) if t <= ts), 0) for key in roles]
        assert sum(held) == value, ts
    for samples in found.values():
        times = [ts for ts, _ in samples]
        assert all(isinstance(v, int) and v >= 0 for _, v in samples)
        assert all(isinstance(ts, float | int) for ts in times)
        assert all(a < b for a, b in zip(times, times[1:], strict=False))
    summary = memtui.open(DEMO).summary().devices[0]
    assert max(v for _, v in found[(1, "allocated")]) == summary.peak_allocated_bytes
    assert max(v for _, v in found[(1, "reserved")]) == summary.peak_reserved_bytes
    instants = [e for e in data["traceEvents"] if e["ph"] == "i"]
    leak = next(e for e in instants if e["name"].startswith("leak: log_metrics"))
    assert leak["args"]["bytes_per_step"] == 256 * 1024 and leak["pid"] == 1
    steps = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert steps[0]["name"] == "ProfilerStep#0" and all(e["dur"] >= 0 for e in steps)
    names = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"}
    assert names == {"memtui cuda:0"}


def test_perfetto_samples_are_the_levels_worked_out_by_hand(tmp_path, capsys):
    snapshot = write_hand_snapshot(tmp_path / "hand.pickle")
    out = tmp_path / "hand.json"
    assert export(capsys, snapshot, "perfetto", out) == 0
    found = tracks(json.loads(out.read_text()))
    allocated = found[(1, "allocated")]
    # ghosts g1 (512) and g2 (1024) alive from the start; b1 1024 at 2, b2 1024 at 3,
    # b3 512 at 4, b2's free completes at 6, g1's at 8, b4 512 at 9; b1 stays (pending)
    by_time = {ts: v for ts, v in allocated}
    assert by_time[2.0] == 1536 + 1024
    assert by_time[3.0] == 1536 + 2048
    assert by_time[4.0] == 4096
    assert by_time[6.0] == 3072 and by_time[8.0] == 2560 and by_time[9.0] == 3072
    assert [v for _, v in found[(1, "reserved")]][-1] == 6144  # both segments
    oom = [e for e in json.loads(out.read_text())["traceEvents"]
           if e["ph"] == "i" and e["name"].startswith("oom:")]
    assert len(oom) == 1 and oom[0]["ts"] == 11.0 and oom[0]["args"]["requested_bytes"] == 2048


def test_parquet_frames_read_back_with_their_types(tmp_path, capsys):
    out = tmp_path / "frames"
    assert export(capsys, DEMO, "parquet", out) == 0
    cap = memtui.open(DEMO)
    events = pl.read_parquet(out / "events.parquet")
    blocks = pl.read_parquet(out / "blocks.parquet")
    assert_frame_equal(events, cap.events())
    assert_frame_equal(blocks, cap.blocks())
    assert events.schema["addr"] == pl.UInt64 and events.schema["t"] == pl.Int64
    stacks = pl.read_parquet(out / "stacks.parquet")
    assert stacks.schema["frame_ids"] == pl.List(pl.Int32)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["devices"] == ["cuda:0"] and "events.parquet" in meta["files"]


@pytest.mark.parametrize("fmt", ["perfetto", "parquet"])
def test_an_unwritable_output_is_one_line_and_exit_2(tmp_path, capsys, fmt):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["export", str(DEMO), "--to", fmt, "-o", str(blocker / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"memtui: {blocker / 'out'}: cannot write it")
    assert err.count("\n") == 1


#: Samples per chunk in the test below: 3 under MEMTUI_TEST_PROFILE=long (some ten thousand
#: joins per track of the demo), 97 in the short profile (CI: still some three hundred).
SMALL_CHUNK = by_profile(97, 3)


@pytest.mark.slow
def test_perfetto_chunks_join_seamlessly(tmp_path, capsys, monkeypatch):
    """Written SMALL_CHUNK samples at a time, the demo's tracks are those written whole."""
    from memtui.export import perfetto

    whole = tmp_path / "whole.json"
    assert export(capsys, DEMO, "perfetto", whole) == 0
    monkeypatch.setattr(perfetto, "CHUNK", SMALL_CHUNK)
    chunked = tmp_path / "chunked.json"
    assert export(capsys, DEMO, "perfetto", chunked) == 0
    assert json.loads(chunked.read_text()) == json.loads(whole.read_text())
