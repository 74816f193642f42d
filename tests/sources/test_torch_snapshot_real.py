"""The PyTorch snapshot source on every real file in ../shared/data/torch_snapshots.

Expected figures are worked out here independently: a plain Python replay over the raw
dicts (read with a restricted unpickler of the test's own), following the definitions of
DESIGN.md section 3, compared with what the columnar loader gives.
"""

from __future__ import annotations

import json
import pickle

import pytest

from memtui.analysis.findings import KINDS
from memtui.cli import main
from memtui.model import validate
from memtui.sources import open_capture
from tests.conftest import shared_files

SNAPSHOTS = shared_files("torch_snapshots", "*.p*")
pytestmark = pytest.mark.skipif(
    not SNAPSHOTS, reason="../shared/data/torch_snapshots is absent (real captures live beside "
    "the checkout)"
)
ACTIVE = ("active_allocated", "active_pending_free")


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name}")


def _raw(path):
    with open(path, "rb") as fh:
        data = _NoGlobals(fh).load()
    if isinstance(data, list):
        data = {"segments": data, "device_traces": []}
    return data


def _block_addresses(segment):
    offset = 0
    for block in segment["blocks"]:
        yield block.get("address", segment["address"] + offset), block
        offset += block["size"]


def _block_sizes(trace, final_active):
    """One size per alloc and free of ``trace``: the dump's size for the lifetimes still
    open at the dump, else the trace's; and the addresses of those open lifetimes."""
    open_alloc: dict[int, int] = {}  # addr -> index of its open alloc
    size_of = [e["size"] for e in trace]
    owner: dict[int, int] = {}  # index of a free -> index of its alloc
    for i, entry in enumerate(trace):
        if entry["action"] == "alloc":
            open_alloc[entry["addr"]] = i
        elif entry["action"] == "free_completed" and entry["addr"] in open_alloc:
            owner[i] = open_alloc.pop(entry["addr"])
    for addr, i in open_alloc.items():
        if addr in final_active:
            size_of[i] = final_active[addr]
    for i, j in owner.items():
        size_of[i] = size_of[j]
    return size_of, set(open_alloc)


def expected_devices(data):
    """The summary's device entries by a plain replay of the raw dicts (one size per
    block: the dump's where it knows the block, else the trace's; a trace-allocated
    block the dump lacks counts alive to the end)."""
    traces = data.get("device_traces") or []
    indices = {i for i, trace in enumerate(traces) if trace}
    indices |= {s["device"] for s in data["segments"]}
    has_time = any(traces) and all("time_us" in e for trace in traces for e in trace)
    out = []
    for index in sorted(indices):
        trace = traces[index] if index < len(traces) else []
        segments = [s for s in data["segments"] if s["device"] == index]
        final = [(a, b) for s in segments for a, b in _block_addresses(s)]
        final_active = {a: b["size"] for a, b in final if b["state"] in ACTIVE}
        size_of, open_at_end = _block_sizes(trace, final_active)
        lacking = sum(size_of[i] for i, e in enumerate(trace) if e["action"] == "alloc"
                      and e["addr"] in open_at_end and e["addr"] not in final_active
                      and size_of[i] == e["size"])
        active_end = sum(final_active.values()) + lacking
        level = active_end - sum(size_of[i] for i, e in enumerate(trace)
                                 if e["action"] == "alloc") + sum(
            size_of[i] for i, e in enumerate(trace) if e["action"] == "free_completed")
        peak, peak_index = level, 0
        reserved = sum(s["total_size"] for s in segments) - sum(
            e["size"] for e in trace if e["action"] in ("segment_alloc", "segment_map")) + sum(
            e["size"] for e in trace if e["action"] in ("segment_free", "segment_unmap"))
        peak_reserved = reserved
        live: dict[int, bool] = {}
        blocks = ghosts = 0
        for i, entry in enumerate(trace):
            if entry["action"] == "alloc":
                level += size_of[i]
                live[entry["addr"]] = True
                blocks += 1
            elif entry["action"] == "free_completed":
                level -= size_of[i]
                if live.pop(entry["addr"], None) is None:
                    ghosts += 1
                    blocks += 1
            elif entry["action"] in ("segment_alloc", "segment_map"):
                reserved += entry["size"]
            elif entry["action"] in ("segment_free", "segment_unmap"):
                reserved -= entry["size"]
            assert level >= 0
            peak_reserved = max(peak_reserved, reserved)
            if level > peak:
                peak, peak_index = level, i
        for addr, block in final:
            if block["state"] in ACTIVE and addr not in live:
                ghosts += 1
                blocks += 1
        out.append({
            "device": f"cuda:{index}",
            "events": len(trace),
            "segments": len(segments),
            "blocks": blocks,
            "ghost_blocks": ghosts,
            "peak_allocated_bytes": peak,
            "peak_time_ns": trace[peak_index]["time_us"] * 1000
            if has_time and trace and peak else None,
            "allocated_at_end_bytes": sum(
                b["size"] for _, b in final if b["state"] == "active_allocated") + lacking,
            "reserved_at_end_bytes": sum(s["total_size"] for s in segments),
            "peak_reserved_bytes": peak_reserved,
        })
    return out


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_summary_matches_independent_replay(path, capsys):
    assert main(["summary", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "torch_snapshot"
    assert data["path"] == str(path)
    for device in data["devices"]:  # counts per kind of memtui findings (tested there)
        assert set(device.pop("findings")) == set(KINDS)
    expected = expected_devices(_raw(path))
    # the figures the independent replay makes (the level statistics: test_attribution.py)
    assert [{k: d[k] for k in want} for d, want in zip(data["devices"], expected,
                                                        strict=True)] == expected
    assert data["warnings"] == []


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_model_contract_and_final_state(path):
    """Frames keep the contract; segments alive at the end are exactly the file's segments."""
    trace = open_capture(path)
    validate(trace)
    raw = _raw(path)
    alive = trace.segments.filter(trace.segments["t_free"].is_null())
    by_device = {}
    for device, size in alive.select("device", "size").iter_rows():
        by_device[device] = by_device.get(device, 0) + size
    want = {}
    for s in raw["segments"]:
        want[f"cuda:{s['device']}"] = want.get(f"cuda:{s['device']}", 0) + s["total_size"]
    assert by_device == want
    # every alloc/free event of the trace carries the id of its block
    paired = trace.events.filter(trace.events["action"].is_in(["alloc", "free"]))
    assert paired["block_id"].null_count() == 0
    # levels end where the final state is: allocated + pending free
    for info in trace.meta.devices:
        events = trace.device_events(info.name)
        if events.height:
            index = int(info.name.split(":")[1])
            active = sum(b["size"] for s in raw["segments"] if s["device"] == index
                         for b in s["blocks"] if b["state"] in ACTIVE)
            assert events["allocated"][-1] == active


def test_frames_interned_once():
    """t26 shares frame lists through the pickle memo: stacks are interned, not copied."""
    path = next((p for p in SNAPSHOTS if p.name.startswith("t26_cs336_kk_ctx512")), None)
    if path is None:
        pytest.skip("t26 sample absent")
    trace = open_capture(path)
    raw = _raw(path)
    distinct = {
        tuple((f["filename"], f["line"], f["name"]) for f in e["frames"])
        for e in raw["device_traces"][0] if e.get("frames")
    } | {
        tuple((f["filename"], f["line"], f["name"]) for f in b["frames"])
        for s in raw["segments"] for b in s["blocks"]
        if b["state"] in ACTIVE and b.get("frames")
    }
    assert trace.stacks.height == len(distinct)
    frames = {frame for stack in distinct for frame in stack}
    assert trace.frames.height == len(frames)
    # an event's stack resolves to its own frames, innermost first
    entry = next(e for e in raw["device_traces"][0] if e.get("frames"))
    row = trace.events.filter(trace.events["seq"] == 0)
    stack = trace.stacks.filter(trace.stacks["stack_id"] == row["stack_id"][0])["frame_ids"][0]
    names = trace.frames
    got = [names.filter(names["frame_id"] == i)["name"][0] for i in stack]
    assert got == [f["name"] for f in entry["frames"]]


def test_annotations_become_markers():
    path = next((p for p in SNAPSHOTS if p.name.startswith("t26_cs336_kk_ctx512")), None)
    if path is None:
        pytest.skip("t26 sample absent")
    trace = open_capture(path)
    raw = _raw(path)
    names = [a["name"] for a in raw["external_annotations"] if a["stage"] == "START"]
    marks = trace.markers.filter(trace.markers["kind"] == "annotation")
    assert sorted(marks["name"].to_list()) == sorted(names)
    assert (marks["t_end"] >= marks["t"]).all()


def test_time_unit_follows_time_us():
    for path in SNAPSHOTS:
        raw = _raw(path)
        events = [e for trace in raw.get("device_traces") or [] for e in trace]
        trace = open_capture(path)
        has_time = bool(events) and all("time_us" in e for e in events)
        assert trace.meta.time_unit == ("ns" if has_time else "event"), path.name
