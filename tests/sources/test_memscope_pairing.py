"""msMemScope rows paired into blocks: the compiled pass (``_rows.c``) and the numpy reference
give the same blocks on hypothesis-made rows (keys with nulls, frees before any alloc,
accesses alone, repeated mallocs, shared times), and both give the blocks worked out by
hand; the pass refuses inputs whose lengths disagree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.sources.memscope import pairing
from memtui.sources.memscope.pairing import ACCESS, FREE, MALLOC, block_runs
from tests.helpers.run_profile import by_profile

needs_compiled = pytest.mark.skipif(pairing._rows is None,
                                    reason="the compiled pass is not built "
                                           "(python setup.py build_ext --inplace)")
FIELDS = ("block", "first_row", "last_row", "first_access", "last_access", "max_gap",
          "accesses")


def runs_with(compiled: bool, keys, nulls, event, t, monkeypatch) -> dict:
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(pairing, "_rows", None)
        found = block_runs(keys, nulls, event, t)
    return {name: getattr(found, name).tolist() for name in FIELDS}


def rows(spec: list[tuple[int, int]]) -> tuple:
    """(key, event) per row, in time order, at times 0, 10, 20..."""
    n = len(spec)
    keys = np.zeros((n, 5), dtype=np.int64)
    keys[:, 2] = [k for k, _ in spec]
    return (keys, np.zeros(n, dtype=np.uint8), np.array([e for _, e in spec], dtype=np.uint8),
            np.arange(n, dtype=np.int64) * 10)


@pytest.mark.parametrize("compiled", [pytest.param(True, marks=needs_compiled), False])
def test_blocks_worked_out_by_hand(compiled, monkeypatch):
    # key 1: free (from before), malloc, access, access, free, access (alone), free
    # key 2: malloc, malloc (the first never freed), access
    spec = [(1, FREE), (1, MALLOC), (2, MALLOC), (1, ACCESS), (1, ACCESS), (2, MALLOC),
            (1, FREE), (1, ACCESS), (2, ACCESS), (1, FREE)]
    got = runs_with(compiled, *rows(spec), monkeypatch)
    assert got["block"] == [0, 1, 2, 1, 1, 3, 1, 4, 3, 4]
    assert got["first_row"] == [0, 1, 2, 5, 7]
    assert got["last_row"] == [0, 6, 2, 8, 9]
    assert got["accesses"] == [0, 2, 0, 1, 1]
    assert got["first_access"] == [0, 30, 0, 80, 70]
    assert got["last_access"] == [0, 40, 0, 80, 70]
    assert got["max_gap"] == [0, 10, 0, 0, 0]


def test_nulls_tell_keys_apart(monkeypatch):
    """A null value is not the value 0: the rows are two keys, two blocks."""
    keys, nulls, event, t = rows([(0, MALLOC), (0, ACCESS)])
    nulls[1] = 1 << 1
    got = runs_with(False, keys, nulls, event, t, monkeypatch)
    assert got["block"] == [0, 1]
    if pairing._rows is not None:
        assert runs_with(True, keys, nulls, event, t, monkeypatch) == got


@st.composite
def random_rows(draw):
    n = draw(st.integers(0, 60))
    keys = np.array(draw(st.lists(st.lists(st.integers(-2, 2), min_size=5, max_size=5),
                                  min_size=n, max_size=n)), dtype=np.int64).reshape(n, 5)
    nulls = np.array(draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 5, 15]), min_size=n,
                                   max_size=n)), dtype=np.uint8)
    event = np.array(draw(st.lists(st.sampled_from([MALLOC, FREE, ACCESS, 3]), min_size=n,
                                   max_size=n)), dtype=np.uint8)
    t = np.cumsum(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))).astype(np.int64)
    return keys, nulls, event, t


@needs_compiled
@settings(max_examples=by_profile(150, 1000), deadline=None)
@given(random_rows())
def test_compiled_pass_gives_the_reference_blocks(case):
    from _pytest.monkeypatch import MonkeyPatch

    with MonkeyPatch.context() as monkeypatch:
        assert runs_with(True, *case, monkeypatch) == runs_with(False, *case, monkeypatch)


@needs_compiled
def test_lengths_that_disagree_are_refused():
    keys, nulls, event, t = rows([(1, MALLOC), (1, FREE)])
    with pytest.raises(ValueError):
        pairing._rows.runs(keys, nulls[:1], event, t)
    with pytest.raises(ValueError):
        pairing._rows.runs(keys[:1], nulls, event, t)
    with pytest.raises(ValueError):
        pairing._rows.runs(keys, nulls, event, t[:1])


@needs_compiled
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_keys_open_and_closed_give_the_reference_blocks(seed, monkeypatch):
    """Thousands of keys open at once, freed and reused: the pass's table grows, and each
    FREE takes its key out of probe runs that collide and wrap around the table's end."""
    rng = np.random.default_rng(seed)
    n = 60_000
    keys = np.zeros((n, 5), dtype=np.int64)
    keys[:, 0] = rng.integers(0, 2, n)
    keys[:, 2] = rng.integers(0, 4_000, n)
    keys[:, 3] = rng.integers(0, 3, n) << 40
    nulls = rng.choice(np.array([0, 0, 0, 0, 2, 4], dtype=np.uint8), n)
    event = rng.choice(np.array([MALLOC, MALLOC, FREE, FREE, ACCESS, 3], dtype=np.uint8), n)
    t = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    compiled = runs_with(True, keys, nulls, event, t, monkeypatch)
    assert compiled == runs_with(False, keys, nulls, event, t, monkeypatch)
    assert len(compiled["first_row"]) > 10_000


def test_a_build_from_before_the_keys_by_column_is_not_used():
    """An in-place build of ``_rows`` older than its Python side read the keys row by row:
    taken for none (the numpy reference pairs), never for a pass pairing the wrong rows."""
    from types import SimpleNamespace

    assert pairing.usable_pass(SimpleNamespace(runs=len)) is None
    assert pairing.usable_pass(None) is None
    current = SimpleNamespace(runs=len, RUNS_KEYS_BY_COLUMN=1)
    assert pairing.usable_pass(current) is current
    if pairing._rows is not None:
        assert pairing._rows.RUNS_KEYS_BY_COLUMN == 1
