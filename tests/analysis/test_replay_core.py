"""The replay's compiled core (``memtui/analysis/replay/_replay.c``) against the Python
reference (``MEMTUI_PURE_PYTHON=1``): identical runs on every real capture under its
recorded settings and under every setting ``--set`` takes, with and without a capacity;
identical on hypothesis-made traces, whole or damaged (where the core leaves a trace to the
reference, the reference's run or error is the answer, and it says why); the handed-over
state's bounds checked (hostile arrays raise ValueError, never crash)."""

from __future__ import annotations

import pickle
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.analysis.replay import compiled, core
from memtui.analysis.replay.proof import can_replay
from memtui.analysis.replay.run import ReplayError, replay_device
from memtui.analysis.replay.settings import MIB, Settings, apply_changes, from_capture
from memtui.errors import CaptureError
from memtui.loading import load_trace
from tests.conftest import shared_files
from tests.helpers.replay_snapshots import damage, run_ops

pytestmark = pytest.mark.skipif(compiled.REPLAY_CORE is None,
                                reason="the compiled replay core was not built here")

H100 = Path(__file__).resolve().parents[1] / "data"
REAL = [*shared_files("torch_snapshots", "*.p*"), *sorted(H100.glob("*.pickle"))]
#: Settings the comparison runs each capture under, beside its recorded ones.
CHANGES = (["expandable_segments:True"], ["max_split_size_mb:20"],
           ["roundup_power2_divisions:4"], ["roundup_power2_divisions:[1:2,64:8,>:1]"],
           ["garbage_collection_threshold:0.5"])


def outcome(trace, device: str, settings: Settings, retries: bool, pure: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple:
    """Everything a replay run hands on, or the error it stopped at."""
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1" if pure else "0")
    try:
        run = replay_device(trace, device, settings, replay_retries=retries)
    except ReplayError as err:
        return ("stopped", str(err))
    return (run.replay_addr.tolist(), run.reserved.tolist(), run.fragmented_at_peak,
            run.cached_at_peak, run.largest_gap_at_peak, run.segments.owner, run.segments.action,
            run.segments.addr, run.segments.size, run.ooms, run.unknown_frees, run.orphans,
            run.start_reserved, run.release_runs)


def variants(recorded: Settings) -> list[tuple[Settings, bool]]:
    """(settings, replay_retries): the proof's run, then predictions."""
    out = [(recorded, True), (recorded, False)]
    out += [(apply_changes(recorded, change), False) for change in CHANGES]
    gc = apply_changes(recorded, ["garbage_collection_threshold:0.5"])
    out += [(replace(gc, capacity=1 << 30, memory_fraction=True), False),
            (replace(apply_changes(recorded, ["expandable_segments:True"]),
                     capacity=1 << 30), False),
            (replace(recorded, capacity=1 << 29), False),
            (replace(apply_changes(recorded, ["max_split_size_mb:20"]), capacity=1 << 28),
             False)]
    return out


def same_runs(trace, monkeypatch, *, expect_core: bool) -> int:
    """Compare both loops on every replayable device under every variant; the number
    of runs compared."""
    compared = 0
    for device in trace.meta.device_names:
        if can_replay(trace, device):
            continue
        recorded = from_capture(trace.meta.extra.get("allocator_settings"))
        for setting, retries in variants(recorded):
            reference = outcome(trace, device, setting, retries, True, monkeypatch)
            compiled = outcome(trace, device, setting, retries, False, monkeypatch)
            assert compiled == reference, (device, setting.describe(), setting.capacity,
                                           core.last_fallback)
            if expect_core and reference[0] != "stopped":  # the core ran what the reference ran
                assert core.last_fallback is None, (setting.describe(), core.last_fallback)
            compared += 1
    return compared


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_capture_same_in_core_and_reference(path, monkeypatch):
    trace = load_trace(path, use_cache=False)
    same_runs(trace, monkeypatch, expect_core=True)


def test_real_captures_are_compared():
    """The comparison above reaches real captures with history (the H100 ones ship in
    tests/data)."""
    assert len([p for p in REAL if p.parent == H100]) >= 10


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
    apply_changes(Settings(), ["expandable_segments:True"]),
])


def trace_of(snapshot: dict):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "replayed.pickle"
        path.write_bytes(pickle.dumps(snapshot, protocol=4))
        return load_trace(path, use_cache=False)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(ops=st.lists(operation, min_size=1, max_size=80), recorded=recorded_settings,
       data=st.data())
def test_made_traces_same_in_core_and_reference(ops, recorded, data):
    record_from = data.draw(st.integers(0, len(ops) // 2))
    try:
        trace = trace_of(run_ops(ops, recorded, record_from))
    except CaptureError:
        return  # nothing recorded and nothing kept: no trace to replay
    with pytest.MonkeyPatch.context() as monkeypatch:
        same_runs(trace, monkeypatch, expect_core=False)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(ops=st.lists(operation, min_size=3, max_size=50), data=st.data())
def test_damaged_traces_same_in_core_and_reference(ops, data):
    # entries dropped, duplicated or moved: frees of blocks never seen, blocks freed twice,
    # segments freed twice; the core leaves what it does not follow to the reference
    snapshot = run_ops(ops, None, 0)
    damage(snapshot["device_traces"][0], data)
    try:
        trace = trace_of(snapshot)
    except CaptureError:
        return
    with pytest.MonkeyPatch.context() as monkeypatch:
        same_runs(trace, monkeypatch, expect_core=False)


def test_a_free_after_the_release_goes_to_the_reference(monkeypatch):
    """A block's free_completed written after the emptyCache that released its segment
    (a free the reference completes twice: once in the release, once at its event): the
    core stops, names why, and the reference's run is the answer."""
    snapshot = run_ops([("alloc", 4096, 0), ("free_late", 0), ("empty_cache",)])
    entries = snapshot["device_traces"][0]
    actions = [e["action"] for e in entries]
    assert actions == ["segment_alloc", "alloc", "free_requested", "free_completed",
                       "segment_free"]
    entries.append(entries.pop(3))  # the free completes after the segment went
    for i, entry in enumerate(entries):
        entry["time_us"] = i + 1
    trace = trace_of(snapshot)
    reference = outcome(trace, "cuda:0", Settings(), True, True, monkeypatch)
    compiled = outcome(trace, "cuda:0", Settings(), True, False, monkeypatch)
    assert compiled == reference
    assert core.last_fallback == "a free of a block not in use"


def test_the_core_runs_unless_told_not_to(monkeypatch):
    trace = load_trace(H100 / "cuda_train_leak.pickle", use_cache=False)
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "0")
    replay_device(trace, "cuda:0", Settings())
    assert core.last_fallback is None
    assert compiled.replay_in_use() == "what-if replay: compiled (C)"
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1")
    replay_device(trace, "cuda:0", Settings())
    assert core.last_fallback == "compiled replay off"
    assert "MEMTUI_PURE_PYTHON is set" in compiled.replay_in_use()


def test_the_switch_is_the_extensions_one():
    from memtui.sources.common.compiled import PURE_PYTHON_ENV

    assert compiled.PURE_PYTHON_ENV == PURE_PYTHON_ENV


# -- the handed-over state, hostile ---------------------------------------------------------

def _arguments(n_events: int = 4) -> list:
    """A valid call: one large segment with one free block, ``n_events`` allocs."""
    i64 = np.int64
    block = np.array([[0x1000, 20 * MIB, 0, 1, 0, -1, -1, 0, 0, 1, 0, 0]], dtype=i64)
    segment = np.array([[0x1000, 20 * MIB, 0, 0, 0, 0, 1]], dtype=i64)
    pools = np.array([[1, 0, 0], [0, 0, 0]], dtype=i64)
    scalars = np.array([20 * MIB, 1 << 60, -1, 0, 0, -1, 1], dtype=i64)
    return [block, segment, pools, np.zeros(0, i64), np.zeros((0, 2), i64), np.zeros(0, i64),
            scalars, np.zeros(16, i64), 0.0,
            np.zeros(n_events, np.uint8), np.zeros(n_events, i64),
            np.full(n_events, 2 * MIB, i64), np.zeros(n_events, i64),
            np.arange(n_events, dtype=i64), np.full(n_events, -1, np.int32),
            np.zeros(n_events, np.uint8), 0, np.full(n_events, -1, np.int32),
            np.zeros(n_events, np.uint8)]


def test_a_valid_hand_over_runs():
    reason, replay_addr, reserved, log, ooms, figures = compiled.REPLAY_CORE.run(*_arguments())
    assert reason is None
    addresses = np.frombuffer(replay_addr, dtype=np.int64).tolist()
    # best fit from the one free block, split: each 2 MiB request after the one before
    assert addresses == [0x1000 + k * 2 * MIB for k in range(4)]
    assert np.frombuffer(reserved, dtype=np.int64).tolist() == [20 * MIB] * 4
    # the peak is the first event's pool: 18 MiB free beside the block in use (fragmented)
    assert figures == (0, 18 * MIB, 0, 18 * MIB)


ARRAYS = {0: 12, 1: 7, 2: 3}  # argument index -> row width (blocks, segments, pools)


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_hand_overs_never_crash(data):
    args = _arguments(data.draw(st.integers(0, 6)))
    for _ in range(data.draw(st.integers(1, 4))):
        which = data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 13, 15, 17]))
        array = np.array(args[which], copy=True)
        if array.size == 0 or data.draw(st.booleans()):
            width = ARRAYS.get(which, 1)
            rows = data.draw(st.integers(0, 3))
            values = data.draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1),
                                        min_size=rows * width, max_size=rows * width))
            array = np.array(values, dtype=np.int64)
            if args[which].dtype != np.int64:
                array = array.astype(args[which].dtype)
        else:
            flat = array.reshape(-1)
            k = data.draw(st.integers(0, flat.size - 1))
            info = np.iinfo(flat.dtype)
            flat[k] = data.draw(st.integers(int(info.min), int(info.max)))
        args[which] = array
    try:
        result = compiled.REPLAY_CORE.run(*args)
    except ValueError:
        return
    assert len(result) == 6


def _damaged_twice_pending() -> dict:
    """Two neighbouring blocks' frees waiting when an emptyCache frees both, then one's
    free completed again after its segment went (hypothesis found it in CI: which block
    survived the merge followed the set's order, so the reference's answer changed from
    run to run)."""
    snapshot = run_ops([("alloc", 1, 0), ("alloc", 1, 0), ("free", 0), ("alloc", 1, 7),
                        ("free", 0), ("empty_cache",)], None, 0)
    entries = snapshot["device_traces"][0]
    entries.insert(9, entries.pop(4))  # the first block's free completes last
    entries.pop(7)  # the second block's free never completes
    for i, entry in enumerate(entries):
        entry["time_us"] = i + 1
    return snapshot


def test_pending_frees_keep_the_order_they_were_requested_in():
    from memtui.analysis.replay.allocator import PendingFrees

    blocks = [object() for _ in range(200)]
    pending = PendingFrees()
    for block in reversed(blocks):
        pending.add(block)
    for block in blocks[::3]:
        pending.discard(block)
    pending.add(blocks[0])
    pending.discard(object())  # not there: nothing happens
    kept = [b for b in reversed(blocks) if blocks.index(b) % 3]
    assert list(pending) == kept + [blocks[0]]


def test_a_replay_whose_answer_turned_on_the_order_of_pending_frees(monkeypatch):
    trace = trace_of(_damaged_twice_pending())
    device = trace.meta.device_names[0]
    recorded = from_capture(trace.meta.extra.get("allocator_settings"))
    answers = {repr(outcome(trace_of(_damaged_twice_pending()), device, recorded, True, True,
                            monkeypatch)) for _ in range(8)}
    assert len(answers) == 1  # the reference gives one answer, whatever the addresses
    assert same_runs(trace, monkeypatch, expect_core=False) == len(variants(recorded))


def _completed_after_the_next_request(snapshot: dict) -> dict:
    """Each free_completed moved to just after the next free_requested: two frees wait
    at once, as when a stream's events complete late."""
    entries, held, out = snapshot["device_traces"][0], None, []
    for entry in entries:
        if entry["action"] == "free_completed" and held is None:
            held = entry
            continue
        out.append(entry)
        if entry["action"] == "free_requested" and held is not None:
            out.append(held)
            held = None
    out += [held] if held is not None else []
    for i, entry in enumerate(out):
        entry["time_us"] = i + 1
    snapshot["device_traces"][0] = out
    return snapshot


def test_many_frees_waiting_then_completing_same_in_core_and_reference(monkeypatch):
    """A hundred frees waiting for their streams' events, two at a time, with allocs
    between: the core's pending list fills with holes and is compacted (from 64 holes)
    with a block still waiting in it; then every block freed and the segments released
    (which walks the pending list); the core runs it all and agrees."""
    ops = [("alloc", 512, 0) for _ in range(120)]
    for k in range(100):
        ops += [("free_late", (7 * k) % 50), ("alloc", 512, 0)]
    ops += [("free", 0)] * 240 + [("empty_cache",)]  # every segment released
    trace = trace_of(_completed_after_the_next_request(run_ops(ops)))
    assert same_runs(trace, monkeypatch, expect_core=True) > 0
