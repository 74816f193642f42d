"""Python-call depth: the vectorised count against MindStudio Insight's stack replay."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.sources.common.compiled import PURE_PYTHON_ENV
from memtui.sources.memscope.timeline import call_depths, replayed_depths

try:
    from memtui.sources.memscope import _rows
except ImportError:
    _rows = None


def insight(calls: list[tuple[int, int, int]]) -> list[int]:
    """Insight's ParseThreadPythonTrace, per thread, on calls sorted by start (then end
    descending, the order memtui sorts ties in)."""
    depths = []
    stacks: dict[int, list[int]] = {}
    for tid, start, end in calls:
        stack = stacks.setdefault(tid, [])
        while stack and stack[-1] < start:
            stack.pop()
        depths.append(len(stack))
        stack.append(end)
    return depths


def _sorted(calls):
    return sorted(calls, key=lambda c: (c[0], c[1], -c[2]))


def _run(calls):
    arr = np.array(calls, dtype=np.int64).reshape(-1, 3)
    pid = np.zeros(len(calls), dtype=np.int64)
    return call_depths(pid, arr[:, 0], arr[:, 1], arr[:, 2]).tolist()


def test_nested_calls():
    calls = _sorted([(1, 0, 100), (1, 10, 50), (1, 20, 30), (1, 30, 40), (1, 60, 90),
                     (1, 100, 110), (2, 5, 6)])
    # A call starting when another ends is counted inside it (Insight pops on end < start).
    assert _run(calls) == insight(calls) == [0, 1, 2, 3, 1, 1, 0]


def test_overlapping_calls_replay_insight():
    # b overlaps a without nesting: Insight's stack keeps a below b.
    calls = _sorted([(1, 0, 10), (1, 5, 20), (1, 15, 16)])
    assert _run(calls) == insight(calls) == [0, 1, 2]


nested = st.recursive(
    st.just([]),
    lambda children: st.lists(children, max_size=3),
    max_leaves=30,
)


def _layout(tree, start: int, out: list, tid: int) -> int:
    """Intervals of a call tree: each call spans its children plus gaps."""
    t = start
    for child in tree:
        begin = t
        t = _layout(child, t + 1, out, tid) + 1
        out.append((tid, begin, t))
        t += 1
    return t


@settings(max_examples=200, deadline=None)
@given(st.lists(nested, min_size=1, max_size=3))
def test_proper_nesting_matches_insight(trees):
    calls: list = []
    for tid, tree in enumerate(trees):
        _layout(tree, 0, calls, tid)
    calls = _sorted(calls)
    if calls:
        assert _run(calls) == insight(calls)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 15)),
                max_size=40))
def test_any_intervals_match_insight(raw):
    calls = _sorted([(tid, start, start + length) for tid, start, length in raw])
    if calls:
        assert _run(calls) == insight(calls)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 15)),
                max_size=60))
def test_compiled_replay_matches_the_python_reference(raw):
    calls = _sorted([(g, start, start + length) for g, start, length in raw])
    arr = np.array(calls, dtype=np.int64).reshape(-1, 3)
    group, start, end = arr[:, 0], arr[:, 1], arr[:, 2]
    compiled = replayed_depths(group, start, end).tolist()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(PURE_PYTHON_ENV, "1")
        reference = replayed_depths(group, start, end).tolist()
    assert compiled == reference == insight(calls)


def test_the_replay_is_compiled_where_built():
    pytest.importorskip("memtui.sources.memscope._rows")
    calls = _sorted([(0, 0, 10), (0, 5, 20), (0, 15, 16), (1, 0, 3), (1, 1, 2)])
    arr = np.array(calls, dtype=np.int64)
    out = _rows.depths(*(np.ascontiguousarray(arr[:, i]) for i in range(3)))
    assert np.frombuffer(out, dtype=np.int64).tolist() == insight(calls) == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError):
        _rows.depths(arr[:, 0].copy(), arr[:2, 1].copy(), arr[:, 2].copy())
