"""Pairing allocs and frees by address: the compiled pass (``_pairing.c``) and the numpy
reference give identical lifetimes, and both give the ones worked out by hand.

The builders' own tests (tests/sources/test_snapshot_readers.py loads every real and
generated snapshot with everything compiled and with ``MEMTUI_PURE_PYTHON=1``) cover the
pairing inside a whole model; here it is taken alone, on hypothesis-made traces with null
addresses, repeated frees, requests and other events.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.model import ACTION_DTYPE
from memtui.sources.common import lifetimes
from memtui.sources.common.lifetimes import pair_by_address

needs_compiled = pytest.mark.skipif(lifetimes._pairing is None,
                                    reason="the compiled pairing is not built "
                                           "(python setup.py build_ext --inplace)")

OPEN, CLOSE, REQUEST = ["alloc"], ["free"], ["free_requested"]


def ops_frame(rows: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Events (addr, action) in seq order, with the columns pairing gathers."""
    n = len(rows)
    return pl.DataFrame({
        "addr": pl.Series([a for a, _ in rows], dtype=pl.UInt64),
        "action": pl.Series([b for _, b in rows], dtype=ACTION_DTYPE),
        "seq": pl.Series(range(n), dtype=pl.Int64),
        "t": pl.Series([10 * i for i in range(n)], dtype=pl.Int64),
        "size": pl.Series([100 + i for i in range(n)], dtype=pl.Int64),
        "stack_id": pl.Series([i % 3 if i % 4 else None for i in range(n)], dtype=pl.Int32),
        "stream": pl.Series([0] * n, dtype=pl.Int64),
    })


def paired(ops: pl.DataFrame, compiled: bool, order: str, monkeypatch) -> tuple:
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(lifetimes, "_pairing", None)
        found, tagged = pair_by_address(ops, OPEN, CLOSE, REQUEST, order=order)
    return found.to_dict(as_series=False), tagged["lifetime"].to_list()


def test_lifetimes_by_hand(monkeypatch):
    # addr 1: a free before any alloc (a ghost), then alloc/request/free, then an alloc
    # left open; addr 2: alloc, free, free again (an extra close)
    ops = ops_frame([(1, "free"), (2, "alloc"), (1, "alloc"), (1, "free_requested"),
                     (2, "free"), (1, "free"), (2, "free"), (1, "alloc")])
    for compiled in (False, True) if lifetimes._pairing is not None else (False,):
        found, lifetime = paired(ops, compiled, "first", monkeypatch)
        assert lifetime == [0, 1, 2, 2, 1, 2, 1, 3]
        assert found["addr"] == [1, 2, 1, 1]
        assert found["seq_alloc"] == [None, 1, 2, 7]
        assert found["seq_free"] == [0, 4, 5, None]
        assert found["seq_free_requested"] == [None, None, 3, None]
        assert found["extra_closes"] == [0, 1, 0, 0]
        assert found["t_alloc"] == [None, 10, 20, 70]
        assert found["free_stack_id"] == [None, None, 2, None]
        frame, _ = pair_by_address(ops, OPEN, CLOSE, REQUEST, order="first")
        # what no caller reads is not made (a text column of a block's worth of rows)
        assert frame.columns == [
            "lifetime", "addr", "seq_alloc", "t_alloc", "size", "stack_id", "stream",
            "seq_free", "t_free", "free_size", "free_stack_id", "free_stream",
            "t_free_requested", "seq_free_requested", "extra_closes"]
        by_address, lifetime = paired(ops, compiled, "address", monkeypatch)
        assert by_address["addr"] == [1, 1, 1, 2]  # (addr, first event) order
        assert by_address["seq_alloc"] == [None, 2, 7, 1]
        assert lifetime == [0, 3, 1, 1, 3, 1, 3, 2]


def test_null_addresses_are_lifetimes_of_their_own(monkeypatch):
    ops = ops_frame([(None, "alloc"), (5, "alloc"), (None, "free"), (5, "free")])
    found, lifetime = paired(ops, True, "address", monkeypatch)
    assert found["addr"] == [None, None, 5]  # null addresses first
    assert found["seq_alloc"] == [0, None, 1]
    assert found["seq_free"] == [None, 2, 3]
    assert lifetime == [0, 2, 1, 2]


#: Addresses: a few small ones, and neighbours above 2**53 (where a float64 cannot tell
#: them apart: msprof and NPU addresses reach there).
ADDRESSES = st.one_of(st.integers(0, 6), st.sampled_from([2**62, 2**62 + 1, 2**64 - 2,
                                                          2**64 - 1]))
events = st.lists(st.tuples(st.one_of(st.none(), ADDRESSES),
                            st.sampled_from(["alloc", "free", "free_requested", "oom"])),
                  max_size=60)


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(rows=events)
def test_compiled_and_numpy_agree(rows):
    ops = ops_frame(rows)
    with pytest.MonkeyPatch.context() as monkeypatch:
        for order in ("first", "address"):
            assert paired(ops, True, order, monkeypatch) == \
                paired(ops, False, order, monkeypatch)


@settings(max_examples=150, deadline=None)
@given(rows=events)
def test_null_addresses_leave_the_others_paired_as_without_them(rows):
    """A capture with a null address goes down the numpy path whatever is built (the
    compiled pass takes no nulls), so the comparison above holds it to nothing: here its
    lifetimes of real addresses must be those of the same events without the null rows
    (the compiled pass where built), and each null row a lifetime of its own."""
    ops = ops_frame(rows)
    found, tagged = pair_by_address(ops, OPEN, CLOSE, REQUEST, order="address")
    alone, _ = pair_by_address(ops.filter(pl.col("addr").is_not_null()), OPEN, CLOSE,
                               REQUEST, order="address")
    nulls = ops["addr"].null_count()
    assert found.slice(nulls).drop("lifetime").to_dicts() == alone.drop("lifetime").to_dicts()
    assert found.head(nulls)["addr"].null_count() == nulls
    null_tags = tagged.filter(pl.col("addr").is_null())["lifetime"].to_list()
    assert sorted(null_tags) == list(range(nulls))


def test_neighbouring_addresses_above_2_53_stay_apart_beside_a_null():
    """Two ghosts freed at neighbouring addresses past float64's integers, in a trace
    with a null address: two lifetimes, not one with an extra close."""
    big = 2**62
    found, _ = pair_by_address(ops_frame([(None, "alloc"), (big, "free"), (big + 1, "free")]),
                               OPEN, CLOSE, REQUEST, order="address")
    assert found["addr"].to_list() == [None, big, big + 1]
    assert found["seq_free"].to_list() == [None, 1, 2]
    assert found["extra_closes"].to_list() == [0, 0, 0]


def test_an_event_without_an_action_belongs_to_no_kind(monkeypatch):
    """A null action (a row a source could not name) opens, closes and requests nothing:
    the alloc and free around it stay one lifetime."""
    ops = ops_frame([(1, "alloc"), (1, "oom"), (1, "free")]).with_columns(
        action=pl.Series([ "alloc", None, "free"], dtype=ACTION_DTYPE))
    for compiled in (False, True) if lifetimes._pairing is not None else (False,):
        found, lifetime = paired(ops, compiled, "first", monkeypatch)
        assert lifetime == [0, 0, 0]
        assert (found["seq_alloc"], found["seq_free"]) == ([0], [2])


@needs_compiled
def test_the_compiled_pass_pairs_by_default(monkeypatch):
    """Where it is built, find_runs takes the compiled pass for a trace without null
    addresses (the numpy reference is the fallback, not the default)."""
    calls = []
    real = lifetimes._pairing

    class Spy:
        @staticmethod
        def pair(values, kind):
            calls.append(len(values))
            return real.pair(values, kind)

    monkeypatch.setattr(lifetimes, "_pairing", Spy)
    monkeypatch.delenv("MEMTUI_PURE_PYTHON", raising=False)
    pair_by_address(ops_frame([(1, "alloc"), (2, "alloc"), (1, "free")]), OPEN, CLOSE)
    assert calls == [3]
    pair_by_address(ops_frame([(None, "alloc"), (1, "alloc")]), OPEN, CLOSE)
    assert calls == [3]  # a null address: the numpy reference


@needs_compiled
def test_compiled_pass_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="length"):
        lifetimes._pairing.pair(np.zeros(3, np.uint64), np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="items"):
        lifetimes._pairing.pair(np.zeros(3, np.uint32), np.zeros(3, np.uint8))


@needs_compiled
def test_pure_python_switch_turns_the_compiled_pass_off(monkeypatch):
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1")
    assert not lifetimes.compiled_pairing()
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "0")
    assert lifetimes.compiled_pairing()


@needs_compiled
def test_version_says_how_lifetimes_are_paired(monkeypatch, capsys):
    from memtui.cli import main

    monkeypatch.delenv("MEMTUI_PURE_PYTHON", raising=False)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "lifetime pairing: compiled (C)" in capsys.readouterr().out
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "lifetime pairing: numpy (MEMTUI_PURE_PYTHON is set)" in capsys.readouterr().out


@pytest.mark.parametrize("compiled", [False, True])
def test_first_row_is_the_earliest_event_of_a_lifetime(compiled):
    if compiled and lifetimes._pairing is None:
        pytest.skip("the compiled pairing is not built")
    # addr 1: a ghost whose request comes before its free; addr 3: only an oom (other);
    # addr 2: an alloc, then its free
    ops = ops_frame([(1, "free_requested"), (3, "oom"), (2, "alloc"), (1, "free"),
                     (2, "free")])
    kind = lifetimes._kinds(ops["action"], OPEN, CLOSE, REQUEST)
    runs = lifetimes.find_runs(ops["addr"], kind, compiled=compiled)
    assert runs.lifetime.tolist() == [0, 1, 2, 0, 2]
    assert runs.first_row().tolist() == [0, 1, 2]
    # a ghost whose first event is another kind (an oom at its address) starts at its
    # free: the earliest of its open, close and request; one of other events only at
    # its first event
    ops = ops_frame([(1, "oom"), (1, "free"), (2, "oom"), (2, "oom")])
    kind = lifetimes._kinds(ops["action"], OPEN, CLOSE, REQUEST)
    runs = lifetimes.find_runs(ops["addr"], kind, compiled=compiled)
    assert runs.lifetime.tolist() == [0, 0, 1, 1]
    assert runs.first_row().tolist() == [1, 2]
