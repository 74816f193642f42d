"""Findings on hand-made traces whose answers are worked out by hand (issue 16)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.analysis.findings import counts_by_kind, find_all, findings_json
from memtui.analysis.findings.allocator import advice, settings_of
from memtui.analysis.findings.capture import find_capture_limits
from memtui.analysis.findings.leak import find_leaks
from memtui.analysis.findings.oom import find_ooms
from memtui.analysis.findings.peak import find_peak
from memtui.analysis.timeline.steps import find_steps
from tests.helpers.findings_traces import DEVICE, MiB, TraceBuilder, training_loop


def leaks(trace):
    return find_leaks(trace, DEVICE)


# -- leaks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_leak_every_step(markers):
    """10 steps each keeping 1 MiB from leaky_cache: 1 MiB per step, 10 steps of growth
    seen at the step starts and the end of the last step, which finished (its backward
    and frees came): its block counts (issue 22, point 5)."""
    found = leaks(training_loop(10, markers=markers))
    assert len(found) == 1
    leak = found[0]
    assert leak.detail["function"] == "leaky_cache"
    assert leak.detail["file"] == "/work/leaky_cache.py"
    assert leak.detail["line"] == 10 + 3  # the 4th stack named
    assert leak.detail["bytes_per_step"] == MiB
    assert leak.detail["steps"] == 10
    assert leak.detail["first_step"] == 0
    assert leak.detail["blocks"] == 10
    assert leak.detail["total_bytes"] == 10 * MiB
    assert leak.severity == "high"
    assert len(leak.evidence.block_ids) == 10
    assert leak.evidence.stack[0].name == "leaky_cache"
    t0, t1 = leak.evidence.window  # from the start of the first step that grew to the last
    assert t0 <= leak.evidence.t < t1


def test_leak_steps_from_markers_or_rhythm():
    assert find_steps(training_loop(10), DEVICE).by_markers
    steps = find_steps(training_loop(10, markers=False), DEVICE)
    assert not steps.by_markers and steps.count == 10


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_leak_every_third_step(markers):
    """1 MiB kept in steps 2, 5, 8, ...: a third of a MiB per step on average."""
    found = leaks(training_loop(30, every=3, markers=markers))
    assert len(found) == 1
    assert found[0].detail["bytes_per_step"] == pytest.approx(MiB / 3, rel=0.05)
    assert found[0].detail["first_step"] == 2


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_small_leak_of_one_percent(markers):
    """Each step allocates and frees 100 MiB (+25 MiB gradients) and keeps 1 MiB."""
    found = leaks(training_loop(20, leak=MiB, churn=100 * MiB, markers=markers))
    assert [f.detail["function"] for f in found] == ["leaky_cache"]
    assert found[0].detail["bytes_per_step"] == MiB


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_clean_loop_has_no_leak(markers):
    assert leaks(training_loop(20, leak=0, markers=markers)) == []


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_capture_stopped_mid_step_is_no_leak(markers):
    """The last step's activations are alive at the end: the capture stopped there."""
    trace = training_loop(12, leak=0, markers=markers, stop_mid_step=True)
    assert leaks(trace) == []


def test_profiler_steps_beat_other_step_names():
    """ProfilerStep#N and Optimizer.step#AdamW.step both recur: the steps are the former."""
    b = TraceBuilder()
    for k in range(6):
        b.step(f"ProfilerStep#{k}")
        b.free(b.alloc("forward", MiB))
        b.step("Optimizer.step#AdamW.step")
        b.free(b.alloc("adam", MiB))
    steps = find_steps(b.build(), DEVICE)
    assert steps.source == "markers (ProfilerStep#N)"
    assert steps.names[:2] == ("ProfilerStep#0", "ProfilerStep#1")


def test_warm_up_that_stops_is_no_leak():
    """A cache filled in the first three steps and then flat is not a leak."""
    b = TraceBuilder()
    for k in range(12):
        b.step(f"ProfilerStep#{k}")
        act = b.alloc("forward", 10 * MiB)
        if k < 3:
            b.alloc("warm_cache", MiB)
        b.free(act)
    assert leaks(b.build()) == []


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(6, 24), leak_kib=st.integers(1, 4096),
       clean=st.integers(0, 6), clean_kib=st.integers(1, 100_000), markers=st.booleans())
def test_clean_loop_around_a_leak_keeps_bytes_per_step(steps, leak_kib, clean, clean_kib,
                                                      markers):
    """Adding clean allocations (freed in the same step) around the leak changes nothing."""
    leak = leak_kib * 1024
    bare = leaks(training_loop(steps, leak=leak, markers=markers))
    wrapped = leaks(training_loop(steps, leak=leak, markers=markers, clean_allocs=clean,
                                  clean_size=clean_kib * 1024))
    assert [f.detail["bytes_per_step"] for f in bare] == [leak]
    assert [f.detail["bytes_per_step"] for f in wrapped] == [leak]


def test_leak_by_owner_without_stacks():
    """msMemScope style: no call stacks, owners, mstx "step start" ranges as steps."""
    b = TraceBuilder(source="msmemscope", path="/toy/leaks_dump.db")
    b.alloc(None, 64 * MiB, owner="PTA@weight")
    for _ in range(8):
        b.step("step start", kind="mstx_range")
        act = b.alloc(None, 32 * MiB, owner="PTA@activation")
        b.alloc(None, 2 * MiB, owner="PTA@leaks_mem")
        b.free(act)
    (leak,) = leaks(b.build())
    assert leak.detail["owner"] == "PTA@leaks_mem"
    assert leak.detail["function"] is None
    assert leak.detail["bytes_per_step"] == 2 * MiB
    assert leak.detail["steps_from"] == "markers (step start)"
    assert leak.title.startswith("PTA@leaks_mem leaks 2.0 MiB per step")
    peak = find_peak(b.build(), DEVICE)[0]
    by_owner = {row["label"]: row["bytes"] for row in peak.detail["by_owner"]}
    assert by_owner == {"PTA@weight": 64 * MiB, "PTA@activation": 32 * MiB,
                        "PTA@leaks_mem": 16 * MiB}


# -- the peak ---------------------------------------------------------------------------------


def test_peak_by_stack():
    """Params 150 MiB + forward 50 + forward_mlp 50 + leaks: the peak is in the last step
    after backward's alloc (150 + 100 + 25 + leaks so far)."""
    trace = training_loop(4)
    peak = find_peak(trace, DEVICE)[0]
    assert peak.bytes == 150 * MiB + 100 * MiB + 25 * MiB + 4 * MiB
    by_stack = {row["label"]: row for row in peak.detail["by_stack"]}
    assert by_stack["init_params (init_params.py:10)"]["bytes"] == 150 * MiB
    assert by_stack["init_params (init_params.py:10)"]["blocks"] == 3
    assert by_stack["leaky_cache (leaky_cache.py:13)"]["bytes"] == 4 * MiB
    assert peak.detail["by_stack"][0]["label"] == "init_params (init_params.py:10)"
    assert peak.detail["by_stack"][0]["share"] == pytest.approx(150 / 279, abs=1e-3)
    assert peak.detail["peak_reserved_bytes"] == 0  # no segments in this trace


# -- OOMs -------------------------------------------------------------------------------------


def _pool_with_gaps() -> TraceBuilder:
    """One 100 MiB segment: four 10 MiB gaps between five 12 MiB blocks (40 MiB free)."""
    b = TraceBuilder()
    base = 0x20_0000_0000
    b.segment(base, 100 * MiB)
    for i in range(5):
        b.alloc("forward", 12 * MiB, addr=base + i * 22 * MiB)
    return b


def test_oom_by_fragmentation():
    b = _pool_with_gaps()
    b.oom(20 * MiB, device_free=0)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert oom.severity == "high"
    assert oom.detail["requested_bytes"] == 20 * MiB
    assert oom.detail["pool_free_bytes"] == 40 * MiB
    assert oom.detail["largest_gap_bytes"] == 10 * MiB
    assert oom.detail["cause_kind"] == "fragmentation"
    assert oom.detail["cause"].startswith(
        "fragmentation: 40.0 MiB free in the pool but the largest gap is 10.0 MiB, less than "
        "the 20.0 MiB asked")
    assert "expandable_segments:True" in oom.detail["advice"]
    assert oom.evidence.seq == 6


def test_a_fragmentation_oom_says_why_the_device_s_free_memory_did_not_help():
    """Issue 35: 40 MiB free in the pool, no gap of 20 MiB, and the device had 1 GiB more:
    a new 20 MiB segment would have fit on the device, so what refused it was the
    process's own limit, just above the 100 MiB reserved; with 0 B free on the device the
    cause stays fragmentation alone."""
    b = _pool_with_gaps()
    b.oom(20 * MiB, device_free=1024 * MiB)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert oom.detail["cause_kind"] == "fragmentation"
    assert oom.detail["cause"].endswith(
        "; the device still had 1.0 GiB free, so a new segment was refused by a per-process "
        "limit (torch.cuda.set_per_process_memory_fraction) just above the 100.0 MiB reserved")
    assert oom.title.endswith(oom.detail["cause"])
    b = _pool_with_gaps()
    b.oom(20 * MiB, device_free=0)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert "per-process" not in oom.detail["cause"]


def test_peak_of_reserved_by_stack():
    """Reserved peaks at 100 MiB from the first event on; the segment holds the five
    12 MiB blocks at the allocated peak, and nothing (yet) at the reserved peak."""
    b = _pool_with_gaps()
    peak = find_peak(b.build(), DEVICE)[0]
    assert peak.detail["peak_reserved_bytes"] == 100 * MiB
    assert peak.detail["reserved_peak_by_stack"] == []
    assert peak.detail["by_stack"] == [{"label": "forward (forward.py:10)", "bytes": 60 * MiB,
                                        "blocks": 5, "share": 1.0, "stack_id": 0}]


def test_oom_by_full_device():
    b = TraceBuilder()
    b.segment(0x20_0000_0000, 100 * MiB)
    b.alloc("forward", 95 * MiB, addr=0x20_0000_0000)
    b.oom(50 * MiB, device_free=10 * MiB)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert oom.detail["cause_kind"] == "full"
    assert oom.detail["device_free_bytes"] == 10 * MiB
    assert oom.detail["cause"].startswith("the device is full")
    assert oom.detail["allocated_bytes"] == 95 * MiB


def test_memscope_oom_trigger_without_an_event():
    """msMemScope writes OOM_DETAIL rows (markers here), no oom memory event."""
    b = _pool_with_gaps()
    b.source = "msmemscope"
    b.oom_trigger(20 * MiB)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert oom.detail["requested_bytes"] == 20 * MiB
    assert oom.detail["cause_kind"] == "fragmentation"
    assert oom.detail["largest_gap_bytes"] == 10 * MiB
    assert "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in oom.detail["advice"]
    assert oom.evidence.seq == 5


def test_oom_advice_knows_the_settings():
    b = _pool_with_gaps()
    b.settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128",
                  "max_split_size": 128 * MiB, "expandable_segments": True}
    b.oom(20 * MiB, device_free=0)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert "already on" in oom.detail["advice"]
    assert "expandable_segments:True" not in oom.detail["advice"].split("already")[0]
    assert len(oom.detail["conflicts"]) == 1
    assert "max_split_size_mb:128" in oom.detail["conflicts"][0]


def _settings(conf: str):
    b = TraceBuilder(settings={"PYTORCH_CUDA_ALLOC_CONF": conf})
    b.alloc("x", 1)
    return settings_of(b.build())


def test_settings_from_the_conf_string_alone():
    """The dict holds only the configuration string: each option is read from it, and the
    advice for a fragmented pool follows what is already set."""
    s = _settings("garbage_collection_threshold:0.6")
    assert s.known and s.garbage_collection_threshold == 0.6 and not s.expandable_segments
    assert s.max_split_size is None
    # expandable segments are what is missing: the advice sets them, not the threshold
    assert advice(s, "fragmentation") == (
        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so that segments grow in "
        "place instead of leaving free gaps too small for large requests")
    s = _settings("expandable_segments:True,garbage_collection_threshold:0.6")
    assert s.expandable_segments and s.garbage_collection_threshold == 0.6
    text = advice(s, "fragmentation")
    assert text.startswith("expandable segments are already on: ")
    assert "garbage_collection_threshold is already 0.6" in text
    assert "garbage_collection_threshold:0.8" not in text
    s = _settings(" expandable_segments : True , max_split_size_mb:256")
    assert s.expandable_segments and s.max_split_size == 256 * MiB
    assert s.garbage_collection_threshold is None
    assert "garbage_collection_threshold:0.8" in advice(s, "fragmentation")


# -- inefficient blocks -----------------------------------------------------------------------


def test_inefficient_blocks_summarised():
    """Flags as memtui.analysis.findings.flags sets them: counts, bytes, top stacks per kind."""
    import polars as pl

    from memtui.analysis.findings.inefficient import find_inefficient
    from memtui.model import FLAG_EARLY_ALLOCATION, FLAG_LATE_DEALLOCATION

    b = TraceBuilder()
    for _ in range(3):
        b.free(b.alloc("early", 4 * MiB))
    b.free(b.alloc("late", 8 * MiB))
    b.free(b.alloc("fine", MiB))
    trace = b.build()
    flags = {"early": FLAG_EARLY_ALLOCATION, "late": FLAG_EARLY_ALLOCATION | FLAG_LATE_DEALLOCATION}
    ids = {name: sid for name, sid in b.stack_names.items()}
    trace.blocks = trace.blocks.with_columns(flags=pl.col("stack_id").replace_strict(
        {ids[n]: f for n, f in flags.items()}, default=0, return_dtype=pl.UInt8))
    found = {f.detail["flag"]: f for f in find_inefficient(trace, DEVICE)}
    assert set(found) == {"early_allocation", "late_deallocation"}
    early = found["early_allocation"]
    assert early.detail["blocks"] == 4 and early.bytes == 20 * MiB
    assert early.detail["by_stack"] == [  # 3 x 4 MiB from early, then 8 MiB from late
        {"label": "early (early.py:10)", "bytes": 12 * MiB, "blocks": 3},
        {"label": "late (late.py:11)", "bytes": 8 * MiB, "blocks": 1}]
    assert found["late_deallocation"].detail["blocks"] == 1
    assert len(early.evidence.block_ids) == 4


# -- fragmentation ----------------------------------------------------------------------------


def test_fragmentation_measured_at_the_peaks():
    """Five 12 MiB blocks at a 22 MiB stride in a 100 MiB segment, then all freed.  At the
    reserved peak (the segment's alloc, moved to the alloc that needed it) 88 MiB free
    beside the first block: fragmented by definition, but one gap (no crumbs).  At the
    allocated peak (after the fifth alloc) 40 MiB free in four 10 MiB gaps: the moment
    the finding names (30 MiB beyond its largest gap); under 64 MiB but 30% of reserved:
    info, the setting named as a thing to try (no replay here: no predicted saving)."""
    from memtui.analysis.findings.fragmentation import find_fragmentation

    b = _pool_with_gaps()
    for block in range(5):
        b.free(block)
    (frag,) = find_fragmentation(b.build(), DEVICE)
    d = frag.detail
    assert [(m["at"], m["seq"], m["fragmented_bytes"], m["largest_gap_bytes"],
             m["cached_bytes"]) for m in d["moments"]] == [
        ("reserved peak", 1, 88 * MiB, 88 * MiB, 0),
        ("allocated peak", 5, 40 * MiB, 10 * MiB, 0)]
    assert (d["measured_at"], d["fragmented_bytes"], d["fragmented_segments"],
            d["largest_gap_bytes"], d["fragmented_share"], d["cached_bytes"]) == (
        "allocated peak", 40 * MiB, 1, 10 * MiB, 0.4, 0)
    assert frag.bytes == 40 * MiB and frag.evidence.seq == 5
    assert frag.severity == "info"
    assert d["advice"].startswith("try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert d["predicted_saving_bytes"] is None
    assert frag.title == ("at the allocated peak: 40.0 MiB fragmented (free inside 1 partly "
                          "used segment; 40% of 100.0 MiB reserved; largest gap 10.0 MiB)")


def test_few_crumbs_in_a_large_pool_name_no_setting():
    """The same five blocks and four 10 MiB gaps in a 1 GiB segment: 30 MiB beyond the
    largest gap is under 64 MiB and under 10% of reserved (3%): no setting to try."""
    from memtui.analysis.findings.fragmentation import find_fragmentation

    b = TraceBuilder()
    base = 0x20_0000_0000
    b.segment(base, 1024 * MiB)
    for i in range(5):
        b.alloc("forward", 12 * MiB, addr=base + i * 22 * MiB)
    b.alloc("forward", (1024 - 100) * MiB, addr=base + 100 * MiB)
    (frag,) = find_fragmentation(b.build(), DEVICE)
    assert (frag.detail["fragmented_bytes"], frag.detail["largest_gap_bytes"]) == (
        40 * MiB, 10 * MiB)
    assert frag.detail["advice"] is None


def _strided_pool(settings: dict | None = None) -> TraceBuilder:
    """A 1 GiB segment holding eight 64 MiB blocks at a 128 MiB stride: 512 MiB free in
    eight 64 MiB gaps (50% of reserved)."""
    b = TraceBuilder(settings=settings)
    base = 0x20_0000_0000
    b.segment(base, 1024 * MiB)
    for i in range(8):
        b.alloc("forward", 64 * MiB, addr=base + i * 128 * MiB)
    return b


def test_fragmentation_without_a_proven_replay_recommends_nothing():
    """512 MiB in eight 64 MiB gaps (448 MiB beyond the largest): low, the setting only
    in the advice as a thing to try; no replay of this trace can be proven (not a
    snapshot), so no title recommends it and no saving is claimed."""
    from memtui.analysis.findings.fragmentation import find_fragmentation

    (frag,) = find_fragmentation(_strided_pool().build(), DEVICE)
    assert frag.severity == "low"
    assert frag.bytes == 512 * MiB == frag.detail["fragmented_bytes"]
    assert frag.title == ("at the allocated peak: 512.0 MiB fragmented (free inside 1 partly "
                          "used segment; 50% of 1.0 GiB reserved; largest gap 64.0 MiB)")
    assert frag.detail["advice"].startswith("try PYTORCH_CUDA_ALLOC_CONF=expandable_segments"
                                            ":True")
    assert frag.detail["predicted_saving_bytes"] is None
    assert "saving_bytes" not in frag.detail


def test_a_proven_saving_of_five_percent_makes_it_medium_and_says_how_much():
    from memtui.analysis.findings.fragmentation import find_fragmentation, with_prediction

    (frag,) = find_fragmentation(_strided_pool().build(), DEVICE)
    kept = with_prediction(frag, 1000 * MiB, 951 * MiB, "PYTORCH_CUDA_ALLOC_CONF", False)
    assert kept is frag  # 4.9%: not enough, nothing recommended
    raised = with_prediction(frag, 1000 * MiB, 950 * MiB, "PYTORCH_CUDA_ALLOC_CONF", False)
    assert raised.severity == "medium"
    assert raised.title.endswith("; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: "
                                 "a proven replay saves 50.0 MiB (5%) of the 1000.0 MiB "
                                 "reserved peak")


def test_fragmentation_is_low_when_the_setting_is_on_already():
    from memtui.analysis.findings.fragmentation import find_fragmentation

    on = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "expandable_segments": True}
    (frag,) = find_fragmentation(_strided_pool(on).build(), DEVICE)
    assert frag.severity == "low" and frag.detail["advice"] is None
    assert frag.detail["fragmented_bytes"] == 512 * MiB


def test_wholly_free_segments_are_not_fragmentation():
    """Two 1 GiB segments, each filled and emptied in turn.  At the allocated and reserved
    peak (the first alloc, after the second segment came) the second is wholly free:
    1 GiB cached, half of reserved: low at most, no setting named."""
    from memtui.analysis.findings.fragmentation import find_fragmentation

    b = TraceBuilder()
    b.segment(0x20_0000_0000, 1024 * MiB)
    b.segment(0x30_0000_0000, 1024 * MiB)
    b.free(b.alloc("forward", 1024 * MiB, addr=0x20_0000_0000))
    b.free(b.alloc("forward", 1024 * MiB, addr=0x30_0000_0000))
    (frag,) = find_fragmentation(b.build(), DEVICE)
    assert frag.severity == "low"
    assert frag.title == ("at the allocated and reserved peak: 1.0 GiB cached (in 1 wholly "
                          "free segment: reusable, not fragmentation)")
    assert frag.detail["fragmented_bytes"] == 0
    assert frag.detail["advice"] is None


def test_no_fragmentation_finding_without_a_segment_layout():
    from memtui.analysis.findings.fragmentation import find_fragmentation

    assert find_fragmentation(training_loop(4), DEVICE) == []


def test_fragmentation_that_explains_an_oom_is_medium():
    from memtui.analysis.findings.fragmentation import find_fragmentation

    b = _pool_with_gaps()
    b.oom(20 * MiB, device_free=0)
    (frag,) = find_fragmentation(b.build(), DEVICE)
    assert frag.severity == "medium"
    assert frag.title.endswith("; explains the out-of-memory error")
    assert frag.detail["explains_oom_t"] == 6000


def test_oom_advice_names_no_setting_for_a_few_cached_mib():
    """The device is full with 5 MiB cached: no garbage_collection_threshold for them."""
    b = TraceBuilder()
    b.segment(0x20_0000_0000, 100 * MiB)
    b.alloc("forward", 95 * MiB, addr=0x20_0000_0000)
    b.oom(50 * MiB, device_free=10 * MiB)
    (oom,) = find_ooms(b.build(), DEVICE)
    assert oom.detail["cause_kind"] == "full"
    assert "garbage_collection_threshold" not in oom.detail["advice"]


# -- capture ----------------------------------------------------------------------------------


def test_wrapped_ring_buffer():
    """1000 events (max_entries=1000) starting with frees of blocks whose alloc fell out."""
    b = TraceBuilder()
    for _ in range(10):
        b.ghost_free(MiB)
    while b.seq < 1000:
        b.free(b.alloc("forward", MiB))
    found = find_capture_limits(b.build(), DEVICE)
    (ring,) = [f for f in found if f.detail.get("problem") == "ring_buffer_full"]
    assert ring.detail["freed_without_alloc"] == 10
    assert ring.detail["max_entries"] == 1000
    assert ring.evidence.seq == 0


def test_late_start_is_not_a_full_ring_buffer():
    b = TraceBuilder()
    b.ghost_free(MiB)
    for _ in range(10):
        b.free(b.alloc("forward", MiB))
    (late,) = [f for f in find_capture_limits(b.build(), DEVICE)
               if f.detail.get("problem") == "late_start"]
    assert late.detail["ghost_blocks"] == 1


# -- all together -----------------------------------------------------------------------------


def test_json_shape():
    trace = training_loop(8)
    data = findings_json(trace)
    assert set(data) == {"source", "path", "devices", "warnings"}
    (device,) = data["devices"]
    assert device["device"] == DEVICE
    for finding in device["findings"]:
        assert set(finding) == {"kind", "severity", "title", "bytes", "detail", "evidence"}
        assert set(finding["evidence"]) == {"t", "event", "seq", "block_ids", "stack", "owner"}
    # the event number is the position every screen shows (issue 23): that event has the
    # evidence's seq and time
    events = trace.device_events(DEVICE)
    numbered = [f["evidence"] for f in device["findings"] if f["evidence"]["seq"] is not None]
    assert numbered
    for evidence in numbered:
        row = events.row(evidence["event"], named=True)
        assert (row["seq"], row["t"]) == (evidence["seq"], evidence["t"])
    leak = next(f for f in device["findings"] if f["kind"] == "leak")
    for key in ("function", "file", "line", "owner", "bytes_per_step", "steps", "blocks",
                "total_bytes"):
        assert key in leak["detail"]
    assert leak["evidence"]["stack"][0] == {"filename": "/work/leaky_cache.py", "line": 13,
                                            "name": "leaky_cache"}
    json.dumps(data)  # every value is JSON


def test_counts_by_kind():
    counts = counts_by_kind(find_all(training_loop(8)))
    assert counts["leak"] == 1 and counts["peak"] == 1 and counts["oom"] == 0



def test_leak_bytes_per_step_is_what_the_blocks_hold():
    """A 2 MiB tensor kept every step, handed out alternately as a 2 MiB and a 3 MiB block
    (a free block the allocator does not split): the code keeps 2 MiB a step (the figure,
    exact to the block it asked for), memory grows by 2.5 MiB a step."""
    b = TraceBuilder()
    b.alloc("init_params", 50 * MiB)
    for k in range(8):
        b.step(f"ProfilerStep#{k}")
        acts = [b.alloc("forward", 40 * MiB), b.alloc("forward_mlp", 40 * MiB)]
        b.alloc("leaky_cache", (2 + k % 2) * MiB, requested=2 * MiB)
        for block in acts:
            b.free(block)
    (leak,) = leaks(b.build())
    assert leak.detail["bytes_per_step"] == 2 * MiB
    assert leak.detail["held_bytes_per_step"] == 5 * MiB // 2
    assert leak.detail["every_steps"] == 1
    assert "leaks 2.0 MiB per step" in leak.title
