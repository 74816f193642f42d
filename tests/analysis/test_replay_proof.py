"""The proof: a replay under the recorded settings reproduces the recording.  Exact on
captures written by the replayed allocator itself (hypothesis), on the real snapshots
with full traces, and able to fail: under other settings it departs, and says where."""

from __future__ import annotations

import pickle
import tempfile
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.analysis.replay.allocator import INVENTED_BASE, CachingAllocator
from memtui.analysis.replay.predict import predict
from memtui.analysis.replay.proof import compare, prove
from memtui.analysis.replay.run import replay_device
from memtui.analysis.replay.settings import (
    MIB,
    Settings,
    apply_changes,
    from_capture,
    parse_size,
)
from memtui.errors import CaptureError
from memtui.loading import NO_DEVICE, load_trace
from tests.conftest import require_shared
from tests.helpers.replay_snapshots import BASE, damage, run_ops, write_ops

sizes = st.one_of(st.integers(1, 4096), st.integers(1, 3 * MIB), st.integers(1, 40 * MIB))
operation = st.one_of(
    st.tuples(st.just("alloc"), sizes, st.sampled_from([0, 0, 0, 7])),
    st.tuples(st.just("free"), st.integers(0, 100)),
    st.tuples(st.just("free_late"), st.integers(0, 100)),
    st.tuples(st.just("empty_cache")),
)
recorded_settings = st.sampled_from([
    Settings(),
    apply_changes(Settings(), ["max_split_size_mb:32"]),
    apply_changes(Settings(), ["roundup_power2_divisions:4"]),
])


def load_ops(ops, recorded: Settings | None, record_from: int):
    with tempfile.TemporaryDirectory() as folder:
        path = write_ops(Path(folder) / "replayed.pickle", ops, recorded, record_from)
        return load_trace(path, use_cache=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=1, max_size=60), recorded=recorded_settings,
       data=st.data())
def test_replay_of_a_replayed_capture_is_exact(ops, recorded, data):
    record_from = data.draw(st.integers(0, len(ops) // 2))
    try:
        trace = load_ops(ops, recorded, record_from)
    except CaptureError as exc:  # nothing recorded and no segment kept: a capture of
        assert NO_DEVICE in str(exc)  # nothing, refused in one line as every command does
        assert not any(op[0] == "alloc" for op in ops[record_from:])
        return
    proof, _ = prove(trace, "cuda:0")
    if proof.refused:  # nothing allocated while recording
        assert proof.allocs == 0
        return
    assert proof.first_departure is None, proof.departure_reason
    assert proof.allocs_at_address == proof.allocs
    assert proof.segments_reproduced == proof.segments_recorded
    assert proof.reserved_agree == proof.level_events
    assert proof.holds


def test_the_proof_can_fail_and_says_where():
    # recorded with max_split_size_mb:32: a 10 MiB request may not take the cached 40 MiB
    # block (get_free_block's oversize rule) and gets its own segment; replayed under the
    # defaults the request takes the 40 MiB block: the proof departs at that alloc
    ops = [("alloc", 40 * MIB, 0), ("free", 0), ("alloc", 10 * MIB, 0)]
    trace = load_ops(ops, apply_changes(Settings(), ["max_split_size_mb:32"]), 0)
    assert prove(trace, "cuda:0")[0].holds
    wrong = compare(replay_device(trace, "cuda:0", Settings()))
    assert not wrong.holds
    assert wrong.allocs_at_address == 1 and wrong.allocs == 2
    # segment_alloc, alloc, free_requested, free, segment_alloc, alloc: the second
    # segment_alloc belongs to the malloc of the alloc after it (the trace writes it first)
    assert wrong.first_departure == 5
    assert "recording put the block at" in wrong.departure_reason
    assert wrong.segment_reproduced.get("segment_alloc", 0) == 1  # the second is missing


def test_prediction_refused_where_the_proof_fails():
    ops = [("alloc", 40 * MIB, 0), ("free", 0), ("alloc", 10 * MIB, 0)]
    trace = load_ops(ops, Settings(), 0)
    proof, run = prove(trace, "cuda:0")
    broken = replace(proof, allocs_at_address=0)
    prediction = predict(trace, "cuda:0", Settings(), (broken, run))
    assert prediction.refused.startswith("the replay is not proven")
    assert prediction.predicted is None and prediction.saving is None


def test_prediction_on_a_hand_worked_capture():
    # 40 MiB then 10 MiB on one stream, the first freed: the defaults reuse the 40 MiB
    # segment (peak 40 MiB, 1 cudaMalloc); max_split_size_mb:32 makes the 10 MiB its own
    # segment (peak 50 MiB, 2 cudaMallocs); a 45 MiB card fits the first, not the second
    ops = [("alloc", 40 * MIB, 0), ("free", 0), ("alloc", 10 * MIB, 0)]
    trace = load_ops(ops, Settings(), 0)
    split = apply_changes(Settings(), ["max_split_size_mb:32"])
    p = predict(trace, "cuda:0", split)
    assert (p.recorded.reserved_peak, p.predicted.reserved_peak) == (40 * MIB, 50 * MIB)
    assert (p.recorded.cuda_malloc, p.predicted.cuda_malloc) == (1, 2)
    assert p.saving == -10 * MIB
    small_card = predict(trace, "cuda:0", replace(split, capacity=parse_size("45MiB")))
    # the 10 MiB cudaMalloc fails; release_cached_blocks frees the cached 40 MiB
    # segment (the retry), and the 10 MiB segment then fits: no OOM, one cudaFree more
    assert small_card.predicted.ooms == 0
    assert small_card.predicted.cuda_free == 1
    assert small_card.predicted.reserved_peak == 40 * MIB
    tiny = predict(trace, "cuda:0", replace(Settings(), capacity=parse_size("30MiB")))
    assert [c.change for c in tiny.oom_changes] == ["caused"]
    assert tiny.oom_changes[0].event == 1  # the 40 MiB alloc (after its segment_alloc)


# -- the real captures ---------------------------------------------------------------------

#: file -> (allocs, recorded segment events by action): every one must be reproduced
FULL_TRACES = {
    "t26_cs336_kk_ctx512_fullstep.pickle": (6769, {"segment_alloc": 589, "segment_free": 790}),
    "t26_cs336_kk_ctx128_forward.pickle": (2058, {"segment_alloc": 289}),
    "t21_select_n_snapshot_1f2f548.pickle": (1497, {"segment_alloc": 13}),
    "t211_cs336_magma27_memory_snapshot.pickle": (1721, {}),
}


@pytest.mark.parametrize("name", sorted(FULL_TRACES))
def test_real_capture_replays_exactly(name):
    folder = require_shared("torch_snapshots")
    trace = load_trace(folder / name, use_cache=False)
    proof, _ = prove(trace, "cuda:0")
    allocs, segment_events = FULL_TRACES[name]
    assert proof.allocs == allocs
    assert proof.allocs_at_address == allocs
    assert proof.segment_events == segment_events
    assert proof.segment_reproduced == segment_events
    assert proof.replay_extra_segment_events == 0
    assert proof.reserved_agree == proof.level_events
    assert proof.holds


def test_real_capture_without_history_is_refused():
    folder = require_shared("torch_snapshots")
    trace = load_trace(folder / "t20_flexgen_oom_snapshot.pickle", use_cache=False)
    proof, run = prove(trace, "cuda:0")
    assert run is None and "no alloc events" in proof.refused
    assert not proof.holds


def test_invented_addresses_never_meet_recorded_ones():
    """The writer's segments lie at real device addresses (from BASE, below 2**48, where a
    GPU's virtual addresses are); a cudaMalloc the recording did not make is put at
    INVENTED_BASE and up, one after another, never on a recorded address."""
    snapshot = run_ops([("alloc", 40 * MIB, 0), ("alloc", 3 * MIB, 0), ("free", 0),
                        ("alloc", 100, 7)])
    recorded = {e["addr"] for e in snapshot["device_traces"][0]} \
        | {s["address"] for s in snapshot["segments"]}
    assert min(recorded) == BASE and max(recorded) < 1 << 48
    allocator = CachingAllocator(Settings())
    first, second = allocator.malloc(40 * MIB, 0), allocator.malloc(40 * MIB, 0)
    assert first.addr == INVENTED_BASE > max(recorded)
    assert second.addr >= first.addr + 40 * MIB
    assert [e.addr for e in allocator.segment_events] == [first.addr, second.addr]


# -- the captures recorded on an H100 by memtui record (tests/data) -------------------------

H100 = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("name", ["cuda_train_leak.pickle", "cuda_train_all_stacks.pickle",
                                  "cuda_train_expandable.pickle", "cuda_train_settings.pickle",
                                  "cuda_oom_fragmented.pickle", "cuda_oom_full.pickle"])
def test_h100_capture_replays_exactly(name):
    trace = load_trace(H100 / name, use_cache=False)
    proof, _ = prove(trace, "cuda:0")
    assert proof.allocs > 0 and proof.allocs_at_address == proof.allocs
    assert proof.segments_reproduced == proof.segments_recorded > 0
    assert proof.reserved_agree == proof.level_events
    assert proof.holds, proof.departure_reason


def test_h100_expandable_capture_maps_what_the_allocator_mapped():
    # expandable_segments:True recorded: 16 segment_map events, each reproduced at its
    # address and size (map_block's whole 2 MiB / 20 MiB pages)
    proof, _ = prove(load_trace(H100 / "cuda_train_expandable.pickle", use_cache=False),
                     "cuda:0")
    assert proof.settings.expandable_segments
    assert proof.segment_reproduced == {"segment_map": 16}


def test_h100_settings_capture_replays_under_its_recorded_settings():
    proof, _ = prove(load_trace(H100 / "cuda_train_settings.pickle", use_cache=False),
                     "cuda:0")
    assert proof.settings.describe() == ("max_split_size_mb:64,roundup_power2_divisions:4,"
                                         "garbage_collection_threshold:0.6")
    assert proof.holds


def test_h100_fragmented_oom_avoided_by_expandable_segments():
    # oom.py fragmented: 2 GiB allowed (a memory fraction), 6 MiB tensors fill 20 MiB
    # segments, two of three freed, then 100 MiB asked.  The device had 76.7 GiB free, so
    # the limit was the process's: the capacity is inferred just under reserved + 100 MiB.
    # Under the recorded settings the OOM still happens; with expandable segments the
    # freed pages are mapped into one segment and the 100 MiB fits.
    trace = load_trace(H100 / "cuda_oom_fragmented.pickle", use_cache=False)
    same = predict(trace, "cuda:0", Settings())
    assert "per-process limit" in same.capacity_source
    assert [c.change for c in same.oom_changes] == ["still happens"]
    expandable = predict(trace, "cuda:0", apply_changes(Settings(), ["expandable_segments:True"]))
    assert [c.change for c in expandable.oom_changes] == ["avoided"]
    assert expandable.predicted.ooms == 0 and expandable.recorded.ooms == 1


def test_h100_full_device_oom_stays():
    # oom.py full: twice the device asked; nothing any setting can do
    trace = load_trace(H100 / "cuda_oom_full.pickle", use_cache=False)
    p = predict(trace, "cuda:0", apply_changes(Settings(), ["expandable_segments:True"]))
    assert [c.change for c in p.oom_changes] == ["still happens"]
    # 256 MiB with expandable segments maps 13 pages of 20 MiB
    assert p.predicted.reserved_peak == 260 * MIB


def test_h100_graph_pool_replays_into_its_private_pool(monkeypatch):
    # graph.py: a CUDA graph captured on a side stream; its 5 allocs go to private pool
    # (1, 0) (routed by the segment holding their recorded address), the warm-up's cached
    # segment is freed by the capture's empty_cache; all at their recorded addresses
    trace = load_trace(H100 / "cuda_graph_pool.pickle", use_cache=False)
    proof, run = prove(trace, "cuda:0")
    assert proof.holds and (proof.allocs_at_address, proof.allocs) == (27, 27)
    assert proof.segment_reproduced == {"segment_alloc": 9, "segment_free": 1}
    routed = [run.replay_addr[i] for i in range(run.events.height)
              if run.events["action"][i] == "alloc"
              and run.events["stream"][i] == 644564224 and run.replay_addr[i] != 0]
    assert len(routed) == 7  # 2 small ones in the default pool, 5 in the graph's
    p = predict(trace, "cuda:0", apply_changes(Settings(), ["expandable_segments:True"]),
                (proof, run))
    assert any("private pool" in limit for limit in p.limits)
    # without the private pool the capture's 1 MiB alloc takes the default pool's cached
    # block instead of the graph's new segment: the proof departs there
    from memtui.analysis.replay import run as run_module

    monkeypatch.setattr(run_module, "private_routes", lambda trace, device: None)
    unrouted, _ = prove(trace, "cuda:0")
    assert not unrouted.holds and unrouted.allocs_at_address < 27


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=3, max_size=40), data=st.data())
def test_a_broken_trace_is_refused_or_departs_never_raises(ops, data):
    # a capture written through the replay, then damaged: entries dropped, duplicated or
    # moved (what a hand-made or truncated file looks like); the proof fails or holds and
    # says why, prediction is refused where it fails, nothing raises
    snapshot = run_ops(ops, None, 0)
    trace_entries = snapshot["device_traces"][0]
    damage(trace_entries, data)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "broken.pickle"
        path.write_bytes(pickle.dumps(snapshot, protocol=4))
        try:
            trace = load_trace(path, use_cache=False)
        except CaptureError as exc:  # nothing left to show: the one line, as any command
            assert NO_DEVICE in str(exc)
            assert not trace_entries and not snapshot["segments"]
            return
    for device in trace.meta.device_names:
        proof, run = prove(trace, device)
        prediction = predict(trace, device, apply_changes(Settings(),
                                                          ["expandable_segments:True"]),
                             (proof, run))
        assert proof.holds or prediction.refused
        if not proof.holds:
            assert proof.why_not()


# -- a prediction checked against the same program recorded with the setting ------------------

LEVEL_ACTIONS = ("alloc", "free_requested", "free")


@pytest.mark.parametrize("recorded_with", ["cuda_train_expandable.pickle",
                                           "cuda_train_settings.pickle"])
def test_prediction_matches_the_run_recorded_with_the_setting(recorded_with):
    # train.py 8 was recorded on the H100 three times: with the defaults (cuda_train_leak),
    # with expandable_segments:True and with max_split_size_mb:64,
    # garbage_collection_threshold:0.6,roundup_power2_divisions:4.  Predicted from the
    # default run, the reserved curve after every alloc and free, and every cudaMalloc /
    # page map (action and size, in order), are the ones recorded with the setting.
    default = load_trace(H100 / "cuda_train_leak.pickle", use_cache=False)
    actual = load_trace(H100 / recorded_with, use_cache=False)
    setting = from_capture(actual.meta.extra["allocator_settings"])
    p = predict(default, "cuda:0", apply_changes(Settings(), [setting.describe()]))
    assert p.predicted is not None, p.refused
    ours = default.device_events("cuda:0").sort("seq")
    level = ours["action"].cast(str).is_in(LEVEL_ACTIONS).to_numpy()
    theirs = actual.device_events("cuda:0").sort("seq")
    recorded_level = theirs.filter(pl.col("action").cast(str).is_in(LEVEL_ACTIONS))
    assert p.curve[level].tolist() == recorded_level["reserved"].to_list()
    recorded_segments = theirs.filter(pl.col("action").cast(str).str.starts_with("segment"))
    predicted_run = replay_device(default, "cuda:0", p.settings, replay_retries=False)
    assert list(zip(predicted_run.segments.action, predicted_run.segments.size, strict=True)) \
        == recorded_segments.select(pl.col("action").cast(str), "size").rows()
    assert p.predicted.cuda_malloc == recorded_segments.height
    assert p.predicted.reserved_peak == max(recorded_level["reserved"].to_list())
