"""msMemScope rows paired into blocks: the compiled pass (``_rows.c``) and the numpy reference
give the same blocks on hypothesis-made rows (keys of both families with nulls, frees before
any alloc, accesses alone, repeated mallocs, shared times), and both give the blocks worked
out by hand; the keys are made from their rows' fields as msMemScope pairs them; the pass
refuses inputs whose lengths disagree."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.sources.memscope import pairing
from memtui.sources.memscope.pairing import ACCESS, FREE, MALLOC, RowKeys, block_runs, row_keys
from tests.helpers.run_profile import by_profile

needs_compiled = pytest.mark.skipif(pairing._rows is None,
                                    reason="the compiled pass is not built "
                                           "(python setup.py build_ext --inplace)")
FIELDS = ("block", "first_row", "last_row", "first_access", "last_access", "max_gap",
          "accesses")


def runs_with(compiled: bool, keys, event, t, monkeypatch) -> dict:
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(pairing, "_rows", None)
        found = block_runs(keys, event, t)
    return {name: getattr(found, name).tolist() for name in FIELDS}


def keys_of(family, pid, aid, device, addr, pool, nulls) -> RowKeys:
    ints = [np.asarray(v, dtype=np.int64) for v in (pid, aid, device, addr, pool)]
    return RowKeys(np.asarray(family, dtype=np.uint8), *ints, np.asarray(nulls, dtype=np.uint8))


def rows(spec: list[tuple[int, int]]) -> tuple:
    """(key, event) per row, in time order, at times 0, 10, 20...; the key is the device
    (no allocation_id)."""
    n = len(spec)
    zeros = np.zeros(n, dtype=np.int64)
    keys = keys_of(zeros, zeros, zeros, [k for k, _ in spec], zeros, zeros, zeros)
    return (keys, np.array([e for _, e in spec], dtype=np.uint8),
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
    keys, event, t = rows([(0, MALLOC), (0, ACCESS)])
    keys.nulls[1] = 1 << 1
    got = runs_with(False, keys, event, t, monkeypatch)
    assert got["block"] == [0, 1]
    if pairing._rows is not None:
        assert runs_with(True, keys, event, t, monkeypatch) == got


@pytest.mark.parametrize("compiled", [pytest.param(True, marks=needs_compiled), False])
def test_the_family_decides_which_fields_make_the_key(compiled, monkeypatch):
    """With an allocation_id only the process and the id count (another device, pointer
    or pool is the same block); without one the device, pointer and pool do (the id is
    not read); the two families never share a key."""
    keys = keys_of(family=[1, 1, 1, 0, 0, 0, 0, 1],
                   pid=[7, 7, 7, 7, 7, 7, 7, 8],
                   aid=[5, 9, 5, 0, 3, 0, 0, 5],
                   device=[0, 1, 2, 0, 0, 0, 0, 0],
                   addr=[100, 200, 300, 100, 100, 100, 100, 100],
                   pool=[0, 0, 1, 0, 0, 1, 0, 0],
                   nulls=[0] * 8)
    event = np.array([MALLOC, MALLOC, FREE, MALLOC, ACCESS, ACCESS, FREE, FREE], dtype=np.uint8)
    got = runs_with(compiled, keys, event, np.arange(8, dtype=np.int64), monkeypatch)
    # rows 0 and 2: pid 7, id 5 (the device, pointer and pool differ); row 1: id 9;
    # rows 3, 4, 6: device 0, pointer 100, pool 0 (row 4's id 3 is not read); row 5:
    # pool 1; row 7: pid 8
    assert got["block"] == [0, 1, 0, 2, 2, 3, 2, 4]


def test_row_keys_from_the_columns():
    """A row with an allocation_id: family 1 and its id; one without: its device, pointer
    and pool (texts as category codes); the null bits of the values its key reads."""
    memory = pl.DataFrame({
        "pid": [7, 7, None], "aid": [5, None, None],
        "device": ["npu:0", "npu:1", None], "addr": [None, 0x20, None],
        "pool": [None, "PTA", "HAL"]},
        schema={"pid": pl.Int64, "aid": pl.Int64, "device": pl.String, "addr": pl.UInt64,
                "pool": pl.String})
    keys = row_keys(memory)
    matrix = keys.matrix()
    assert keys.family.tolist() == [1, 0, 0]
    assert matrix[0].tolist() == [1, 7, 5, 0, 0]
    assert matrix[1, [0, 1, 3]].tolist() == [0, 7, 0x20]
    assert matrix[1, 2] != matrix[2, 2] or keys.nulls[2] & 2  # two devices, or one null
    assert matrix[1, 4] != matrix[2, 4]  # PTA and HAL
    # row 0: only its id read (its pointer and pool are null, not read); row 2: pid,
    # device and pointer null
    assert keys.nulls.tolist() == [0, 0, 1 | 2 | 4]


@st.composite
def random_rows(draw):
    n = draw(st.integers(0, 60))

    def column(values):
        return draw(st.lists(values, min_size=n, max_size=n))

    keys = keys_of(column(st.integers(0, 1)), *(column(st.integers(-2, 2)) for _ in range(5)),
                   column(st.sampled_from([0, 0, 0, 1, 2, 5, 15])))
    event = np.array(column(st.sampled_from([MALLOC, FREE, ACCESS, 3])), dtype=np.uint8)
    t = np.cumsum(column(st.integers(0, 5))).astype(np.int64)
    return keys, event, t


@needs_compiled
@settings(max_examples=by_profile(150, 1000), deadline=None)
@given(random_rows())
def test_compiled_pass_gives_the_reference_blocks(case):
    from _pytest.monkeypatch import MonkeyPatch

    with MonkeyPatch.context() as monkeypatch:
        assert runs_with(True, *case, monkeypatch) == runs_with(False, *case, monkeypatch)


@needs_compiled
@pytest.mark.parametrize("short", range(9))
def test_lengths_that_disagree_are_refused(short):
    keys, event, t = rows([(1, MALLOC), (1, FREE)])
    arguments = [keys.family, keys.pid, keys.aid, keys.device, keys.addr, keys.pool,
                 keys.nulls, event, t]
    arguments[short] = arguments[short][:1]
    with pytest.raises(ValueError):
        pairing._rows.runs(*arguments)


@needs_compiled
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_keys_open_and_closed_give_the_reference_blocks(seed, monkeypatch):
    """Thousands of keys open at once, freed and reused: the pass's table grows, and each
    FREE takes its key out of probe runs that collide and wrap around the table's end."""
    rng = np.random.default_rng(seed)
    n = 60_000
    zeros = np.zeros(n, dtype=np.int64)
    keys = keys_of(rng.integers(0, 2, n), zeros, rng.integers(0, 4_000, n),
                   rng.integers(0, 4_000, n), rng.integers(0, 3, n) << 40, zeros,
                   rng.choice(np.array([0, 0, 0, 0, 2, 4], dtype=np.uint8), n))
    event = rng.choice(np.array([MALLOC, MALLOC, FREE, FREE, ACCESS, 3], dtype=np.uint8), n)
    t = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    compiled = runs_with(True, keys, event, t, monkeypatch)
    assert compiled == runs_with(False, keys, event, t, monkeypatch)
    assert len(compiled["first_row"]) > 10_000


def test_a_build_from_before_the_keys_by_field_is_not_used():
    """An in-place build of ``_rows`` older than its Python side took the keys made (row
    by row, then column by column): taken for none (the numpy reference pairs)."""
    from types import SimpleNamespace

    assert pairing.usable_pass(SimpleNamespace(runs=len)) is None
    assert pairing.usable_pass(SimpleNamespace(runs=len, RUNS_KEYS_BY_COLUMN=1)) is None
    assert pairing.usable_pass(None) is None
    current = SimpleNamespace(runs=len, RUNS_KEYS_BY_FIELD=1)
    assert pairing.usable_pass(current) is current
    if pairing._rows is not None:
        assert pairing._rows.RUNS_KEYS_BY_FIELD == 1
