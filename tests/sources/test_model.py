"""The model contract: conform() fills and casts, validate() catches breaches."""

from __future__ import annotations

import polars as pl
import pytest

from memtui.model import DeviceInfo, MemoryTrace, ModelError, TraceMeta, conform, validate


def _trace(**frames):
    meta = TraceMeta(source="test", path="x", devices=[DeviceInfo("cuda:0")])
    return MemoryTrace(meta=meta, **{k: conform(v, k) for k, v in frames.items()})


def test_conform_adds_missing_columns_and_keeps_extras():
    df = conform(pl.DataFrame({"t": [2, 1], "extra": ["a", "b"], "size": [1, 2]}), "events")
    assert df.columns[:3] == ["t", "seq", "device"]
    assert df.columns[-1] == "extra"
    assert df.schema["addr"] == pl.UInt64 and df["addr"].null_count() == 2


def test_validate_accepts_an_empty_trace():
    validate(_trace())


def test_validate_rejects_unsorted_events():
    events = pl.DataFrame({"t": [2, 1], "device": ["cuda:0", "cuda:0"], "action": ["alloc"] * 2})
    with pytest.raises(ModelError, match="sorted"):
        validate(_trace(events=events))


def test_validate_rejects_unknown_devices_and_duplicate_ids():
    blocks = pl.DataFrame({"block_id": [1], "device": ["cuda:7"]})
    with pytest.raises(ModelError, match="cuda:7"):
        validate(_trace(blocks=blocks))
    blocks = pl.DataFrame({"block_id": [1, 1], "device": ["cuda:0"] * 2})
    with pytest.raises(ModelError, match="unique"):
        validate(_trace(blocks=blocks))


def test_validate_rejects_wrong_dtypes():
    trace = _trace()
    trace.events = trace.events.with_columns(pl.col("size").cast(pl.Float64))
    with pytest.raises(ModelError, match="size"):
        validate(trace)


# -- columns held as one value, asked by an expression (issue 34) ---------------------------

def test_column_helpers_answer_as_the_column_would():
    from memtui.model import column_where, distinct_values, null_count

    frame = pl.DataFrame({"x": [1, 2, 3, 4]}).with_columns(
        one=pl.lit("cuda:0", pl.String), none=pl.lit(None, pl.String),
        pool=pl.Series(["A", None, "B", "A"]))
    for name in ("one", "none", "pool"):
        assert null_count(frame, name) == frame[name].null_count()
        assert sorted(distinct_values(frame, name)) == sorted(
            frame[name].drop_nulls().unique().to_list())
    assert column_where(frame, pl.col("pool").fill_null("") == "A").to_list() == [
        True, False, False, True]
    assert column_where(frame, pl.col("one")).to_list() == ["cuda:0"] * 4
