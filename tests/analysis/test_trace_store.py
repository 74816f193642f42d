"""One store per trace for what the analyses compute (memtui/analysis/timeline/live.py):
levels handed over by the reopen cache sit in it beside what :func:`cached` built, a
handed-over None is an answer, and the store never keeps its trace alive."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from memtui.analysis.timeline.levels import (
    Level,
    allocated_level,
    reserved_level,
    seed_levels,
)
from memtui.analysis.timeline.live import built, cached, held
from memtui.sources import open_capture
from tests.helpers.hand_snapshot import write_hand_snapshot


def _never() -> object:
    raise AssertionError("built again, though handed over")


def test_seeded_levels_are_the_traces_cached_results(tmp_path):
    trace = open_capture(write_hand_snapshot(tmp_path / "hand.pickle"))
    device = trace.meta.device_names[0]
    computed = allocated_level(trace, device)
    seeded = Level(t=np.array([0, 5], dtype=np.int64), values=np.array([7, 9], dtype=np.int64))
    seed_levels(trace, device, seeded, None)
    assert allocated_level(trace, device) is seeded
    assert not np.array_equal(seeded.values, computed.values)  # the seed is what answers
    assert reserved_level(trace, device) is None  # a handed-over None is an answer
    assert held(trace, ("reserved_level", device)) == (True, None)
    assert cached(trace, ("allocated_level", device), _never) is seeded  # one store
    assert built(trace, ("allocated_level", device)) is seeded


def test_nothing_is_held_for_a_key_never_built(tmp_path):
    trace = open_capture(write_hand_snapshot(tmp_path / "hand.pickle"))
    assert held(trace, ("allocated_level", "cuda:9")) == (False, None)
    assert built(trace, ("allocated_level", "cuda:9")) is None


def test_the_store_does_not_keep_its_trace_alive(tmp_path):
    trace = open_capture(write_hand_snapshot(tmp_path / "hand.pickle"))
    device = trace.meta.device_names[0]
    seed_levels(trace, device, allocated_level(trace, device), None)
    cached(trace, "something", lambda: [1, 2, 3])
    gone = weakref.ref(trace)
    del trace
    gc.collect()
    assert gone() is None
