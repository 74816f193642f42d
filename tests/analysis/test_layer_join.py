"""memtui.analysis.timeline.layers._join_asof_by: the same rows as polars' ``join_asof``
with ``by``, whether every left row has the same keys (the quick way: one device, one layer)
or not."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.analysis.timeline.layers import _join_asof_by

KEYS = st.sampled_from(["npu:0", "npu:1", None])


def frame(rows: list[tuple[int, str | None, str | None]], value: str) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"t": pl.Int64, "device": pl.String, "layer": pl.String},
                        orient="row").with_row_index(value).sort("t", maintain_order=True)


def by_polars(left: pl.DataFrame, right: pl.DataFrame) -> pl.DataFrame:
    return left.join_asof(right, on="t", by=["device", "layer"], strategy="backward",
                          check_sortedness=False)


rows = st.lists(st.tuples(st.integers(0, 50), KEYS, st.sampled_from(["PTA", "HAL", None])),
                max_size=40)


@settings(max_examples=200, deadline=None)
@given(rows, rows)
def test_same_rows_as_polars(left_rows, right_rows):
    left, right = frame(left_rows, "i"), frame(right_rows, "j")
    assert _join_asof_by(left, right, on="t", by=["device", "layer"]).equals(
        by_polars(left, right))


@pytest.mark.parametrize("keys", [("npu:0", "PTA"), ("npu:0", None)])
def test_one_key_for_every_left_row(keys):
    left = frame([(1, *keys), (5, *keys), (9, *keys)], "i")
    right = frame([(0, "npu:0", "PTA"), (4, "npu:1", "PTA"), (6, "npu:0", "PTA"),
                   (8, "npu:0", "HAL")], "j")
    got = _join_asof_by(left, right, on="t", by=["device", "layer"])
    assert got.equals(by_polars(left, right))
    if keys[1] == "PTA":  # worked by hand: the latest npu:0 PTA row at or before each t
        assert got["j"].to_list() == [0, 0, 2]
