"""The real CUDA captures memtui recorded itself (tests/data, made by tests/data/cuda_recipes)."""

from pathlib import Path

import pytest

from memtui.analysis.findings import find_all, flat
from memtui.loading import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"
MiB = 2**20


def _load(name: str):
    return load_trace(DATA / f"{name}.pickle", use_cache=False)


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("cuda_*.pickle")))
def test_every_recorded_capture_loads_with_events(name):
    trace = _load(name)
    assert trace.events.height > 0
    assert trace.meta.device_names == ["cuda:0"]


@pytest.mark.parametrize("name", ["cuda_oom_fragmented", "cuda_oom_full"])
def test_recorded_oom_is_an_oom_event(name):
    trace = _load(name)
    assert "oom" in set(trace.events["action"].to_list())


def test_expandable_capture_has_expandable_segments():
    trace = _load("cuda_train_expandable")
    assert "expandable" in set(trace.segments["kind"].to_list())


def test_planted_leak_found_at_three_mib_per_step():
    trace = _load("cuda_train_leak")
    leaks = [f for f in flat(find_all(trace)) if f.kind == "leak"]
    assert leaks, "the planted 3 MiB-per-step leak was not found"
    assert "remember_for_debugging" in leaks[0].title
    # the code keeps 3 MiB a step: the figure, exact (issue 33: it said 3.1); the
    # allocator handed out one 4 MiB block whole, so memory grows by 22 MiB over the 7
    # steps seen (22/7 MiB a step)
    assert leaks[0].detail["bytes_per_step"] == 3 * MiB
    assert "leaks 3.0 MiB per step" in leaks[0].title
    assert leaks[0].detail["held_bytes_per_step"] == pytest.approx(22 * MiB / 7, rel=0.02)
