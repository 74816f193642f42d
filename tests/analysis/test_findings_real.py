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
