"""The snapshot trace check that also takes the columns (issue 11): it accepts exactly the
entries the entry-by-entry check accepts, wherever in the trace a bad value sits (the
entries are taken in chunks), and polars never sees a container."""

from __future__ import annotations

import pytest

from memtui.sources.torch_snapshot.validate import _CHUNK, _entry_ok, clean_trace, trace_columns

GOOD = {"action": "alloc", "addr": 0x1000, "size": 512, "stream": 0, "time_us": 7,
        "frames": []}

#: One bad value each: the key, the value, and whether the entry may be read.
VALUES = [
    ("size", True, False), ("stream", False, False), ("addr", True, False),
    ("size", 2.0, False), ("size", -1, False), ("size", 2**62, False),
    ("size", 2**62 - 1, True), ("addr", 2**64, False), ("addr", 2**64 - 1, True),
    ("addr", -1, False), ("addr", None, True), ("time_us", 2**63 // 1000, False),
    ("time_us", -1, False), ("time_us", None, True), ("stream", 2**63, False),
    ("stream", -(2**63), True), ("action", 5, False), ("action", None, False),
    ("action", b"alloc", False), ("frames", "x", False), ("frames", (), False),
    ("frames", None, True), ("size", None, False), ("size", "512", False),
]


def _trace(bad: object, at: int, n: int) -> list:
    return [dict(GOOD, time_us=i) for i in range(at)] + [bad] + [
        dict(GOOD, time_us=i) for i in range(at + 1, n)]


@pytest.mark.parametrize(("key", "value", "ok"), VALUES)
@pytest.mark.parametrize("at", [0, _CHUNK + 5])
def test_a_value_is_refused_exactly_when_the_entry_check_refuses_it(key, value, ok, at):
    entry = {**GOOD, key: value}
    assert _entry_ok(entry) is ok
    trace = _trace(entry, at, _CHUNK * 2 + 3)
    assert (trace_columns(trace) is not None) is ok
    dropped, columns = clean_trace(trace)
    assert dropped == (0 if ok else 1)
    assert columns.size.len() == len(trace) == _CHUNK * 2 + 3 - dropped
    if not ok:  # the entries kept, in order
        assert columns.time_us.to_list() == [i for i in range(_CHUNK * 2 + 3) if i != at]


@pytest.mark.parametrize("bad", [[1], "alloc", None, 5, ("alloc",)])
def test_an_entry_that_is_not_a_dict_is_dropped(bad):
    trace = _trace(bad, _CHUNK + 1, _CHUNK + 10)
    assert trace_columns(trace) is None
    dropped, columns = clean_trace(trace)
    assert dropped == 1 and columns.action.len() == _CHUNK + 9


def test_a_missing_key_in_a_later_chunk_is_a_null_in_its_place():
    trace = [dict(GOOD, addr=i) for i in range(_CHUNK + 4)]
    del trace[_CHUNK + 2]["addr"], trace[1]["frames"]
    columns = trace_columns(trace)
    assert columns is not None
    assert columns.addr.null_count() == 1 and columns.addr[_CHUNK + 2] is None
    assert columns.addr[_CHUNK + 3] == _CHUNK + 3
    assert columns.frames[1] is None and columns.frames[0] is trace[0]["frames"]


@pytest.fixture(scope="module")
def deep() -> list:
    """A list nested a million deep, built once for the module (a second or so to build and
    to free; nothing here changes it)."""
    nested: list = []
    for _ in range(1_000_000):  # converting this overflows polars' stack (a segfault)
        nested = [nested]
    return nested


@pytest.mark.parametrize("key", ["action", "addr", "size", "stream", "time_us"])
def test_a_deep_list_in_any_key_never_reaches_polars(key, deep):
    trace = _trace({**GOOD, key: deep}, _CHUNK + 1, _CHUNK + 3)
    assert trace_columns(trace) is None
    assert clean_trace(trace)[0] == 1


def test_the_columns_by_hand():
    trace = [dict(GOOD), {"action": "free_completed", "addr": 0x1000, "size": 512,
                          "stream": 3}]
    columns = trace_columns(trace)
    assert columns.action.to_list() == ["alloc", "free_completed"]
    assert columns.addr.to_list() == [0x1000, 0x1000]
    assert columns.stream.to_list() == [0, 3]
    assert columns.time_us.to_list() == [7, None]
    assert columns.frames == [GOOD["frames"], None]
    assert columns.frame().columns == ["addr", "size", "stream", "time_us"]
    assert columns.actions() is columns.action  # the Python reader's own texts
    assert columns.rows_with_action(("free_completed",)) == [1]
