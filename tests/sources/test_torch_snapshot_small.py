"""The PyTorch snapshot source on tiny snapshots whose right answers are worked out by hand.

Covers what no real sample has: torch_npu (workspace prefix, no clock, pool_id), OOM
events, expandable segments (segment_map/unmap), pickle protocols 2 to 5, the keys up to
torch 2.15, legacy ``history`` blocks and the bare segment list.
"""

from __future__ import annotations

import json
import pickle

import polars as pl
import pytest

from memtui.analysis.roles import ROLES
from memtui.analysis.summary import summary
from memtui.cli import main
from memtui.model import validate
from memtui.sources import open_capture

SEG = 0x7F00_0000_0000
MiB = 1 << 20
FRAMES_A = [{"filename": "train.py", "line": 10, "name": "forward"},
            {"filename": "train.py", "line": 50, "name": "<module>"}]
FRAMES_B = [{"filename": "train.py", "line": 20, "name": "backward"},
            {"filename": "train.py", "line": 50, "name": "<module>"}]


def block(addr, size, state, frames=None, requested=None):
    return {"address": addr, "size": size, "requested_size": requested or size,
            "state": state, "frames": frames or []}


def segment(addr, blocks, device=0, expandable=False, pool=(0, 0)):
    total = sum(b["size"] for b in blocks)
    return {"device": device, "address": addr, "total_size": total,
            "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0,
            "segment_type": "large", "segment_pool_id": pool, "is_expandable": expandable,
            "frames": [], "blocks": blocks}


def entry(action, addr, size, t=None, frames=None, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, **extra}
    if t is not None:
        e["time_us"] = t
    if frames is not None:
        e["frames"] = frames
    return e


def write(tmp_path, data, protocol=4, name="snap.pickle"):
    path = tmp_path / name
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    return path


def basic_snapshot():
    """A 4 MiB segment; A (1 MiB) and B (2 MiB) allocated, A freed; B alive at the dump.

    start = active at end (2 MiB) - allocs (3 MiB) + frees (1 MiB) = 0
    levels after each event: 1, 3, 3 (free requested: still allocated), 2 MiB; peak 3 MiB
    at the second event (t = 200 us).
    """
    a, b = SEG, SEG + MiB
    return {
        "segments": [segment(SEG, [block(a, MiB, "inactive"),
                                   block(b, 2 * MiB, "active_allocated", FRAMES_B, 2 * MiB - 5),
                                   block(SEG + 3 * MiB, MiB, "inactive")])],
        "device_traces": [[
            entry("alloc", a, MiB, 100, FRAMES_A),
            entry("alloc", b, 2 * MiB, 200, FRAMES_B),
            entry("free_requested", a, MiB, 300, FRAMES_A),
            entry("free_completed", a, MiB, 400, FRAMES_A),
        ]],
    }


#: The figures these tests pin (the level statistics and what was alive before the
#: capture: tests/analysis/test_attribution.py; findings: tests/test_findings.py).
FIGURES = ("device", "events", "segments", "blocks", "ghost_blocks", "peak_allocated_bytes",
           "peak_time_ns", "allocated_at_end_bytes", "reserved_at_end_bytes",
           "peak_reserved_bytes")


def summarise(path):
    """The summary's devices: their :data:`FIGURES`."""
    return [{k: d[k] for k in FIGURES if k in d}
            for d in summary(open_capture(path))["devices"]]


def test_basic_levels_blocks_and_summary(tmp_path):
    path = write(tmp_path, basic_snapshot())
    trace = open_capture(path)
    validate(trace)
    assert trace.events["allocated"].to_list() == [MiB, 3 * MiB, 3 * MiB, 2 * MiB]
    assert trace.events["t"].to_list() == [100_000, 200_000, 300_000, 400_000]
    blocks = trace.blocks.sort("t_alloc")
    assert blocks["t_free"].to_list() == [400_000, None]
    assert blocks["t_free_requested"].to_list() == [300_000, None]
    # trace sizes are requested sizes; the rounded size of B comes from the final state
    assert blocks["requested_size"].to_list() == [MiB, 2 * MiB]
    assert blocks["size"].to_list() == [MiB, 2 * MiB]
    assert blocks["ghost"].to_list() == [False, False]
    # events carry the id of their block
    assert trace.events["block_id"].to_list() == [blocks["block_id"][0], blocks["block_id"][1],
                                                  blocks["block_id"][0], blocks["block_id"][0]]
    assert summarise(path) == [{
        "device": "cuda:0", "events": 4, "segments": 1, "blocks": 2, "ghost_blocks": 0,
        "peak_allocated_bytes": 3 * MiB, "peak_time_ns": 200_000,
        "allocated_at_end_bytes": 2 * MiB, "reserved_at_end_bytes": 4 * MiB,
        "peak_reserved_bytes": 4 * MiB,
    }]


def test_stacks_are_interned_by_content(tmp_path):
    trace = open_capture(write(tmp_path, basic_snapshot()))
    # FRAMES_A and FRAMES_B share their <module> frame: 3 distinct frames, 2 stacks
    assert trace.frames.height == 3
    assert trace.stacks.height == 2
    ids = trace.events["stack_id"].to_list()
    assert ids[0] == ids[2] == ids[3] != ids[1]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_protocols(tmp_path, protocol):
    path = write(tmp_path, basic_snapshot(), protocol=protocol)
    assert summarise(path)[0]["peak_allocated_bytes"] == 3 * MiB


def test_ghost_blocks(tmp_path):
    """C freed without its alloc; D alive at the dump without one: two ghosts.

    start = active at end (D 1 MiB) - 0 + 2 MiB (C) = 3 MiB, the peak, held from the start.
    """
    c, d = SEG, SEG + 2 * MiB
    data = {
        "segments": [segment(SEG, [block(c, 2 * MiB, "inactive"),
                                   block(d, MiB, "active_allocated", FRAMES_A)])],
        "device_traces": [[entry("free_requested", c, 2 * MiB, 10),
                           entry("free_completed", c, 2 * MiB, 20)]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    blocks = trace.blocks.sort("addr")
    assert blocks["ghost"].to_list() == [True, True]
    assert blocks["t_alloc"].to_list() == [10_000, 10_000]  # alive from the trace start
    assert blocks["t_free"].to_list() == [20_000, None]
    (dev,) = summary(trace)["devices"]
    assert (dev["blocks"], dev["ghost_blocks"]) == (2, 2)
    assert dev["peak_allocated_bytes"] == 3 * MiB
    assert dev["peak_time_ns"] == 10_000


def test_pending_free_at_dump_counts_as_allocated(tmp_path):
    """A block freed (requested) but not completed is still allocated for the levels."""
    a = SEG
    data = {
        "segments": [segment(SEG, [block(a, MiB, "active_pending_free", FRAMES_A),
                                   block(SEG + MiB, MiB, "inactive")])],
        "device_traces": [[entry("alloc", a, MiB, 1, FRAMES_A),
                           entry("free_requested", a, MiB, 2, FRAMES_A)]],
    }
    trace = open_capture(write(tmp_path, data))
    assert trace.events["allocated"].to_list() == [MiB, MiB]
    (dev,) = summary(trace)["devices"]
    assert dev["allocated_at_end_bytes"] == 0  # only active_allocated blocks count here
    assert dev["peak_allocated_bytes"] == MiB
    assert trace.blocks["t_free_requested"].to_list() == [2_000]


def test_a_free_requested_alone_is_one_ghost_pending(tmp_path):
    """A (1 MiB) allocated before the trace, its free requested at 10 us and not done by
    the dump: one block, a ghost pending from that request (not a traced block beside the
    dump's ghost); B allocated at 20 us.  Levels: start = active at end (A pending 1 MiB +
    B 1 MiB) - 1 MiB allocated = 1 MiB; after each event 1, then 2 MiB."""
    a, b = SEG, SEG + MiB
    data = {
        "segments": [segment(SEG, [block(a, MiB, "active_pending_free", FRAMES_A),
                                   block(b, MiB, "active_allocated", FRAMES_B)])],
        "device_traces": [[entry("free_requested", a, MiB, 10, FRAMES_A),
                           entry("alloc", b, MiB, 20, FRAMES_B)]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    blocks = trace.blocks.sort("addr")
    assert blocks["addr"].to_list() == [a, b]
    assert blocks["ghost"].to_list() == [True, False]
    assert blocks["seq_free_requested"].to_list() == [0, None]
    assert blocks["t_free"].to_list() == [None, None]
    assert trace.events["allocated"].to_list() == [MiB, 2 * MiB]


def test_expandable_segments_map_and_unmap(tmp_path):
    """segment_map/unmap move reserved; the final segment is the mapped size.

    reserved at end 4 MiB; trace maps 2 MiB then 2 MiB, unmaps 2 MiB: start = 4 - 4 + 2.
    """
    base = SEG
    data = {
        "segments": [segment(base, [block(base, MiB, "active_allocated"),
                                    block(base + MiB, 3 * MiB, "inactive")], expandable=True)],
        "device_traces": [[
            entry("segment_map", base, 2 * MiB, 1),
            entry("alloc", base, MiB, 2),
            entry("segment_map", base + 2 * MiB, 2 * MiB, 3),
            entry("segment_map", base + 4 * MiB, 2 * MiB, 4),
            entry("segment_unmap", base + 4 * MiB, 2 * MiB, 5),
        ]],
    }
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    assert trace.events["reserved"].to_list() == [2 * MiB, 2 * MiB, 4 * MiB, 6 * MiB, 4 * MiB]
    assert trace.meta.devices[0].start_reserved == 0
    alive = trace.segments.filter(trace.segments["t_free"].is_null())
    assert alive["size"].sum() == 4 * MiB  # what the final state says is reserved
    assert set(trace.segments["kind"].to_list()) == {"expandable"}
    (dev,) = summary(trace)["devices"]
    assert dev["reserved_at_end_bytes"] == 4 * MiB


def test_oom_event_is_an_event_and_a_marker(tmp_path):
    data = basic_snapshot()
    data["device_traces"][0].append(
        {"action": "oom", "device_free": 3 * MiB, "size": 8 * MiB, "stream": 0,
         "time_us": 500})
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    oom = trace.events.filter(trace.events["action"] == "oom")
    assert oom.height == 1 and oom["size"][0] == 8 * MiB and oom["addr"][0] is None
    marker = trace.markers.filter(trace.markers["kind"] == "oom")
    assert marker["t"].to_list() == [500_000]
    assert "8388608 bytes requested" in marker["name"][0]
    assert "3145728 free" in marker["name"][0]
    assert summary(trace)["devices"][0]["events"] == 5


def test_npu_snapshot_with_workspace_prefix(tmp_path):
    """torch_npu: no time_us, pool_id on entries, the workspace trace first (ending at its
    workspace_snapshot), workspace segments appended to segments."""
    ws = 0x1240_0000_0000
    data = {
        "segments": [
            segment(SEG, [block(SEG, MiB, "active_allocated"), block(SEG + MiB, MiB, "inactive")]),
            segment(ws, [block(ws, 2 * MiB, "inactive")]),
        ],
        "device_traces": [[
            entry("segment_alloc", ws, 2 * MiB, pool_id=(0, 0)),
            entry("alloc", ws, 2 * MiB, pool_id=(0, 0)),
            entry("free_completed", ws, 2 * MiB, pool_id=(0, 0)),
            entry("workspace_snapshot", 0, 0, pool_id=(0, 0)),
            entry("alloc", SEG, MiB, frames=FRAMES_A, pool_id=(0, 0)),
        ]],
    }
    trace = open_capture(write(tmp_path, data, name="oom_snapshot_1234_20260101120000.pickle"))
    validate(trace)
    assert trace.meta.time_unit == "event"
    assert trace.meta.device_names == ["npu:0"]
    assert trace.events["t"].to_list() == [0, 1, 2, 3, 4]
    assert trace.events["pool"].to_list() == ["PTA_WORKSPACE"] * 4 + ["PTA"]
    assert trace.events["action"].cast(str).to_list()[3] == "workspace"
    (dev,) = summary(trace)["devices"]
    # start = 1 MiB active - 3 MiB allocs + 2 MiB frees = 0; levels 0, 2, 0, 0, 1 MiB
    assert dev["peak_allocated_bytes"] == 2 * MiB
    assert dev["peak_time_ns"] is None
    assert (dev["segments"], dev["reserved_at_end_bytes"]) == (2, 4 * MiB)


def test_newer_keys_annotate_and_unknown_keys(tmp_path):
    """Keys up to torch 2.15 are read or ignored; annotate events become markers."""
    data = basic_snapshot()
    data["allocator_settings"] = {"expandable_segments": False, "max_split_size": -1}
    data["external_annotations"] = [
        {"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": 150},
        {"stage": "END", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": 350},
    ]
    data["host_segments"], data["host_traces"] = [], []
    data["a_key_from_torch_2_99"] = {"whatever": [1, 2]}
    for e in data["device_traces"][0]:
        e.update(compile_context="N/A", user_metadata="", pool_id=(0, 0),
                 forward_frames=["x.py:1"], internal_metadata="mallocWithAddress")
    data["device_traces"][0].append(
        entry("annotate", SEG + MiB, 2 * MiB, 450, user_metadata="weights of layer 3"))
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    assert trace.meta.device_names == ["cuda:0"]  # no time_us lost: still a CUDA capture
    assert trace.meta.extra["allocator_settings"]["max_split_size"] == -1
    marks = {(k, n): (t, e) for t, e, _, k, n in trace.markers.iter_rows()}
    assert marks[("annotation", "Optimizer.step#AdamW.step")] == (150_000, 350_000)
    assert marks[("annotate", "weights of layer 3")] == (450_000, None)
    assert summary(trace)["devices"][0]["peak_allocated_bytes"] == 3 * MiB


def test_legacy_history_blocks_get_addresses_from_the_segment(tmp_path):
    """torch 2.0: blocks have no address (they tile the segment) and carry ``history``."""
    seg = {"device": 0, "address": SEG, "total_size": 3 * MiB, "allocated_size": 2 * MiB,
           "active_size": 2 * MiB, "requested_size": 2 * MiB, "stream": 0,
           "segment_type": "large", "blocks": [
               {"size": MiB, "requested_size": MiB, "state": "inactive", "history": []},
               {"size": 2 * MiB, "requested_size": 2 * MiB - 1, "state": "active_allocated",
                "history": [{"addr": SEG + MiB, "real_size": 2 * MiB - 1, "frames": FRAMES_B}]},
           ]}
    data = {"segments": [seg], "device_traces": [[entry("free_completed", SEG, MiB)]]}
    trace = open_capture(write(tmp_path, data))
    validate(trace)
    ghosts = trace.blocks.sort("addr")
    assert ghosts["addr"].to_list() == [SEG, SEG + MiB]
    assert ghosts["ghost"].to_list() == [True, True]
    alive = ghosts.filter(ghosts["t_free"].is_null())
    assert alive["requested_size"].to_list() == [2 * MiB - 1]
    assert alive["size"].to_list() == [2 * MiB]
    stack = trace.stacks.filter(trace.stacks["stack_id"] == alive["stack_id"][0])
    assert len(stack["frame_ids"][0]) == 2


def test_bare_segment_list(tmp_path, capsys):
    """``torch.cuda.memory_snapshot()`` pickled: a list of segments, no trace."""
    data = [segment(SEG, [block(SEG, MiB, "active_allocated"), block(SEG + MiB, MiB, "inactive")],
                    device=1)]
    path = write(tmp_path, data)
    assert main(["summary", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["devices"][0].pop("findings")["peak"] == 1
    # the one block has no stack and no trace to pair it with: no rule explains it, so it is
    # `other`, said as such, at the end and at the peak (the roles sum to allocated)
    only_other = {role: 0 for role in ROLES} | {"other": MiB}
    assert out["devices"][0].pop("by_role") == only_other
    roles = out["devices"][0].pop("roles")
    assert (roles["at_peak"], roles["at_end"]) == (only_other, only_other)
    assert roles["inferred_blocks"] == 0
    assert out["devices"] == [{
        "device": "cuda:1", "events": 0, "segments": 1, "blocks": 1, "ghost_blocks": 1,
        "peak_allocated_bytes": MiB, "peak_time_ns": None, "allocated_at_end_bytes": MiB,
        "reserved_at_end_bytes": 2 * MiB, "peak_reserved_bytes": 2 * MiB,
        "reserved_floor": None, "reserved_ceiling_bytes": None,  # the dump is consistent
        # the one block, alive all along and never freed: before the capture (static)
        "average_allocated_bytes": MiB, "min_allocated_bytes": MiB,
        "allocated_in_all_bytes": 0, "allocations": 0, "median_block_bytes": None,
        "before_capture": {"bytes": MiB, "static_bytes": MiB, "static_blocks": 1,
                           "freed_bytes": 0, "freed_blocks": 0, "no_block_bytes": 0},
    }]


def test_devices_without_trace_or_segments_are_not_listed(tmp_path):
    data = basic_snapshot()
    data["device_traces"] += [[], []]
    assert [d["device"] for d in summarise(write(tmp_path, data))] == ["cuda:0"]


def test_human_summary(tmp_path, capsys):
    assert main(["summary", str(write(tmp_path, basic_snapshot()))]) == 0
    out = capsys.readouterr().out
    assert "cuda:0: 4 events, 2 blocks (0 ghost), 1 segment" in out
    assert "peak allocated 3.0 MiB at +0.000100 s" in out


def test_trace_sizes_are_requested_sizes_and_final_blocks_give_the_rounded_size(tmp_path):
    """torch records the requested size in trace entries; a block alive at the dump gets its
    rounded size from the final state, one freed in the trace keeps the requested size."""
    a, b = SEG, SEG + MiB
    data = {
        "segments": [segment(SEG, [block(a, MiB, "inactive"),
                                   block(b, MiB, "active_allocated", FRAMES_B, MiB - 100)])],
        "device_traces": [[entry("alloc", a, MiB - 7, 1, FRAMES_A),
                           entry("alloc", b, MiB - 100, 2, FRAMES_B),
                           entry("free_completed", a, MiB - 7, 3, FRAMES_A)]],
    }
    blocks = open_capture(write(tmp_path, data)).blocks.sort("addr")
    assert blocks["size"].to_list() == [MiB - 7, MiB]
    assert blocks["requested_size"].to_list() == [MiB - 7, MiB - 100]


def test_a_second_free_of_the_same_block_is_ignored_and_warned(tmp_path):
    """alloc A, free A, free A again (a broken trace): the block ends at the first free."""
    a = SEG
    data = {
        "segments": [segment(SEG, [block(a, MiB, "inactive")])],
        "device_traces": [[entry("alloc", a, MiB, 1), entry("free_completed", a, MiB, 2),
                           entry("free_completed", a, MiB, 3)]],
    }
    trace = open_capture(write(tmp_path, data))
    assert trace.blocks["t_free"].to_list() == [2_000]
    assert trace.blocks["ghost"].to_list() == [False]
    assert any("already freed" in w for w in trace.meta.warnings)


def compiled_snapshot():
    """basic_snapshot() with torch 2.11 texts on its entries: block A's alloc ran inside a
    torch.compile region with a label and the forward pass's traceback; B's outside
    (``"N/A"``, ``""``, no forward frames)."""
    data = basic_snapshot()
    forward = ['  File "model.py", line 10, in forward\n', "    y = self.lin(x)\n"]
    for e in data["device_traces"][0]:
        e.update(compile_context="N/A", user_metadata="")
    data["device_traces"][0][0].update(
        compile_context="Torch-Compiled Region: 0/1", user_metadata='{"layer": 3}',
        forward_frames=forward)
    return data


def test_block_keeps_its_alloc_entry_texts(tmp_path):
    """user_metadata, compile_context and forward_frames of a block's alloc entry become
    its optional ``blocks`` columns (Slice Detail shows them); "N/A" and "" are none."""
    trace = open_capture(write(tmp_path, compiled_snapshot()))
    validate(trace)
    a, b = (trace.blocks.filter(pl.col("addr") == addr).row(0, named=True)
            for addr in (SEG, SEG + MiB))
    assert a["user_metadata"] == '{"layer": 3}'
    assert a["compile_context"] == "Torch-Compiled Region: 0/1"
    assert a["forward_frames"] == '  File "model.py", line 10, in forward\n    y = self.lin(x)'
    assert (b["user_metadata"], b["compile_context"], b["forward_frames"]) == (None,) * 3
    assert not {"compile_context", "forward_frames"} & set(trace.events.columns)


def test_no_text_column_where_no_entry_has_one(tmp_path):
    data = basic_snapshot()
    for e in data["device_traces"][0]:
        e.update(compile_context="N/A", user_metadata="")
    trace = open_capture(write(tmp_path, data))
    assert not {"user_metadata", "compile_context", "forward_frames"} & set(trace.blocks.columns)


def test_a_block_alive_before_the_trace_keeps_its_forward_frames(tmp_path):
    """A ghost block knows only its dump dict: its ``forward_frames`` (torch 2.11+, on any
    dict with frames) are kept as for traced blocks."""
    data = basic_snapshot()
    ghost = data["segments"][0]["blocks"][2]
    ghost.update(state="active_allocated",
                 forward_frames=['  File "model.py", line 20, in forward\n'])
    trace = open_capture(write(tmp_path, data))
    row = trace.blocks.filter(pl.col("ghost")).row(0, named=True)
    assert row["addr"] == SEG + 3 * MiB
    assert row["forward_frames"] == '  File "model.py", line 20, in forward'
