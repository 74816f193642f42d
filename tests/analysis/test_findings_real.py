"""Findings on the real captures of ../shared/data and on the demos in snapshots/."""

from __future__ import annotations

import pickle

import pytest

from memtui.analysis.findings import find_all, findings_json, flat
from memtui.loading import load_trace as open_capture
from tests.conftest import REPO, shared_files

DEMO = REPO / "snapshots" / "demo_training.pickle"
DEMO_OOM = REPO / "snapshots" / "demo_oom.pickle"
REAL = [p for folder in ("torch_snapshots", "msmemscope", "profiler")
        for p in shared_files(folder) if p.suffix != ".json"]


@pytest.mark.skipif(not REAL, reason="../shared/data is absent: the real captures live beside "
                                     "the checkout, not in it")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_captures_run(path):
    trace = open_capture(path)
    data = findings_json(trace)
    assert [d["device"] for d in data["devices"]] == trace.meta.device_names


NOT_FAILED = [p for p in REAL if "oom" not in p.name.lower()]


@pytest.mark.skipif(not NOT_FAILED, reason="../shared/data is absent: the real captures live "
                                           "beside the checkout, not in it")
@pytest.mark.parametrize("path", NOT_FAILED, ids=lambda p: p.name)
def test_no_medium_fragmentation_where_nothing_failed(path):
    """Issues 22 and 33: on a capture that did not fail, fragmentation is medium only where
    a proven replay predicts that expandable segments save at least 5% of the reserved
    peak, and its title then says how much; its figures agree with each other (one pool
    state per moment: the largest gap within the fragmented bytes, the split within
    reserved), and a capture without segments has no fragmentation finding."""
    trace = open_capture(path)
    for finding in flat(find_all(trace)):
        if finding.kind != "fragmentation":
            continue
        assert trace.device_segments(finding.device).height > 0
        d = finding.detail
        if finding.severity not in ("low", "info"):
            saving, predicted = d["predicted_saving_bytes"], d["predicted_reserved_peak_bytes"]
            assert saving / (saving + predicted) >= 0.05, finding.title
            assert "a proven replay saves" in finding.title
        for moment in d["moments"]:
            assert moment["largest_gap_bytes"] <= moment["fragmented_bytes"]
            assert moment["fragmented_bytes"] + moment["cached_bytes"] <= \
                moment["reserved_bytes"]
        assert d["advice"] is None or d["fragmented_bytes"] - d["largest_gap_bytes"] \
            >= 64 << 20 or "proven on it" in d["advice"]


def test_magma27_cached_segments_are_not_fragmentation():
    """t211_cs336_magma27 at the reserved peak: 10.9 GiB of the 13.2 GiB reserved are 169
    wholly free cached segments; free space inside partly used segments is 0.96 GiB (41
    segments); low for the cache, and the proven replay says expandable segments would
    not help (13.2 GiB either way): the title recommends nothing."""
    paths = [p for p in REAL if p.name == "t211_cs336_magma27_memory_snapshot.pickle"]
    if not paths:
        pytest.skip("../shared/data/torch_snapshots/t211_cs336_magma27... is absent")
    (frag,) = [f for f in flat(find_all(open_capture(paths[0]))) if f.kind == "fragmentation"]
    d = frag.detail
    assert d["measured_at"] == "reserved peak"
    assert (d["cached_segments"], round(d["cached_bytes"] / (1 << 30), 1)) == (169, 10.9)
    assert (d["fragmented_segments"], round(d["fragmented_bytes"] / (1 << 30), 2)) == (41, 0.96)
    assert frag.severity == "low"
    assert frag.title.startswith("at the reserved peak: 982.1 MiB fragmented (free inside 41 "
                                 "partly used segments")
    assert "expandable_segments" not in frag.title
    assert d["advice"].startswith("expandable_segments:True would not help here")


def test_flexgen_oom_dump_says_what_is_known():
    """Dumped by an OOM observer without the oom event: the pool state is all there is."""
    paths = [p for p in shared_files("torch_snapshots") if p.name ==
             "t20_flexgen_oom_snapshot.pickle"]
    if not paths:
        pytest.skip("../shared/data/torch_snapshots/t20_flexgen_oom_snapshot.pickle is absent")
    trace = open_capture(paths[0])
    ooms = [f for f in flat(find_all(trace)) if f.kind == "oom"]
    assert len(ooms) == 1
    oom = ooms[0]
    assert oom.detail["requested_bytes"] is None
    assert "not in the file" in oom.detail["cause"]
    assert oom.detail["largest_gap_bytes"] > 0
    assert oom.detail["reserved_bytes"] == trace.meta.devices[0].reserved_at_end
    # 4.3 MiB cached: no allocator setting is worth naming for them
    assert "garbage_collection_threshold" not in oom.detail["advice"]


def test_demo_oom_yields_its_oom():
    with open(DEMO_OOM, "rb") as fh:
        raw = pickle.load(fh)
    oom_entry = raw["device_traces"][0][-1]
    assert oom_entry["action"] == "oom"
    findings = flat(find_all(open_capture(DEMO_OOM)))
    assert findings[0].kind == "oom" and findings[0].severity == "high"
    assert findings[0].detail["requested_bytes"] == oom_entry["size"]
    assert findings[0].detail["device_free_bytes"] == oom_entry["device_free"]
    assert findings[0].detail["cause_kind"] == "fragmentation"


def _planted_leak(raw: dict) -> tuple[int, str]:
    """The generator's leak: one LEAK_SIZE alloc a step from log_metrics, never freed."""
    from benchmarks.generate import LEAK_SIZE, STACKS

    frame = STACKS["leak"][0]
    return LEAK_SIZE, frame["name"]


@pytest.mark.parametrize("strip_markers", [False, True], ids=["markers", "no-markers"])
def test_demo_yields_its_planted_leak(strip_markers, tmp_path):
    path = DEMO
    with open(DEMO, "rb") as fh:
        raw = pickle.load(fh)
    if strip_markers:
        raw["external_annotations"] = []
        path = tmp_path / "demo_no_markers.pickle"
        path.write_bytes(pickle.dumps(raw, protocol=4))
    per_step, function = _planted_leak(raw)
    leaks = [f for f in flat(find_all(open_capture(path))) if f.kind == "leak"]
    assert len(leaks) == 1
    assert leaks[0].detail["function"] == function
    assert leaks[0].detail["bytes_per_step"] == pytest.approx(per_step, rel=0.05)
    assert leaks[0].severity == "high"
