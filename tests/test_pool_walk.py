"""The Pool screen's stepped pool state (analysis.layout.pool_walk) against the full
computation (pool_state.state_at_event), array for array, on random cursor walks over
real captures (tests/data, ../shared/data) and generated snapshots."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.generate import write_snapshot
from memtui.analysis.layout.pool_state import PoolState, state_at_event, state_at_seq
from memtui.analysis.layout.pool_walk import PoolWalk
from memtui.loading import load_trace
from tests.conftest import REPO, shared_files

OWN = sorted((REPO / "tests" / "data").glob("cuda_*.pickle"))
SHARED = shared_files("torch_snapshots", "*.pickle") + shared_files("msmemscope", "*.db")

#: cursor moves: the Pool's keys (one event), a few events, a jump, a far jump
MOVES = st.lists(st.one_of(st.integers(-3, 3), st.integers(-60, 60),
                           st.sampled_from([-5000, -400, 400, 5000])), min_size=1, max_size=25)


@lru_cache(maxsize=4)
def _trace(path: str):
    return load_trace(path, use_cache=False)


@lru_cache(maxsize=4)
def _generated(seed: int) -> str:
    folder = Path(__import__("tempfile").mkdtemp(prefix="pool_walk_"))
    path = folder / f"gen_{seed}.pickle"
    write_snapshot(path, n_events=20_000, seed=seed)
    return str(path)


def assert_same(stepped: PoolState, full: PoolState) -> None:
    for field in dataclasses.fields(PoolState):
        a, b = getattr(stepped, field.name), getattr(full, field.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, field.name
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a == b, field.name


def walk_and_compare(trace, start: float, moves: list[int]) -> PoolWalk | None:
    """Walk every device from ``start`` (a fraction of its events) by ``moves``, each
    stepped state compared with the full one; the last device's walk."""
    walk = None
    for device in trace.meta.device_names:
        n = trace.device_events(device).height
        walk = PoolWalk(trace, device)
        event = int(start * max(n - 1, 0))
        for move in [0, *moves]:
            event = min(max(event + move, 0), max(n - 1, 0))
            assert_same(walk.state_at_event(event), state_at_event(trace, device, event))
    return walk


WALK = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("path", OWN, ids=lambda p: p.name)
@WALK
@given(start=st.floats(0, 1), moves=MOVES)
def test_walk_on_own_captures(path: Path, start: float, moves: list[int]) -> None:
    walk_and_compare(_trace(str(path)), start, moves)


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
@WALK
@given(start=st.floats(0, 1), moves=MOVES)
def test_walk_on_shared_captures(path: Path, start: float, moves: list[int]) -> None:
    walk_and_compare(_trace(str(path)), start, moves)


@pytest.mark.parametrize("seed", [0, 1, 2])
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(start=st.floats(0, 1), moves=MOVES)
def test_walk_on_generated(seed: int, start: float, moves: list[int]) -> None:
    walk = walk_and_compare(_trace(_generated(seed)), start, moves)
    assert walk is not None


def test_neighbouring_events_are_stepped_not_rebuilt() -> None:
    """Keys one event at a time make the state by steps (the point of the walk): on a
    generated snapshot, most of a 200-event walk is stepped, every state still equal."""
    trace = _trace(_generated(0))
    device = trace.meta.device_names[0]
    walk = PoolWalk(trace, device)
    n = trace.device_events(device).height
    for event in range(n // 2, n // 2 + 200):
        assert_same(walk.state_at_event(event), state_at_event(trace, device, event))
    for event in range(n // 2 + 200, n // 2, -3):  # and back
        assert_same(walk.state_at_event(event), state_at_event(trace, device, event))
    assert walk.steps > 200 and walk.full < 40, (walk.steps, walk.full)


def test_state_at_seq_and_repeat_event() -> None:
    """By seq as by position; asking again for the same event gives the same state."""
    trace = _trace(_generated(1))
    device = trace.meta.device_names[0]
    seqs = trace.device_events(device)["seq"].to_numpy()
    walk = PoolWalk(trace, device)
    for seq in (int(seqs[100]), int(seqs[101]), int(seqs[99]), int(seqs[0]) - 1):
        assert_same(walk.state_at_seq(seq), state_at_seq(trace, device, seq))
    again = walk.state_at_event(7)
    assert walk.state_at_event(7) is again
