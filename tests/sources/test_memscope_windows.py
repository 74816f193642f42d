"""The build's running figures split only by the keys that vary: a key of one value (one
device, one process) is left out of the window, which gives the same values; worked out by
hand."""

from __future__ import annotations

import polars as pl

from memtui.sources.memscope.build import over, varying


def test_keys_of_one_value_are_left_out():
    frame = pl.DataFrame({
        "device": pl.Series(["npu:0"] * 4).cast(pl.Categorical),
        "pid": [7, 7, 7, 7],
        "pool": pl.Series(["PTA", "HAL", "PTA", "HAL"]).cast(pl.Categorical),
        "half": [None, 1, None, 1],  # a null and a value: two groups
        "none": pl.Series([None] * 4, dtype=pl.Int64),  # all null: one group
    })
    assert varying(frame, ["device", "pid", "pool", "half", "none"]) == ["pool", "half"]
    assert varying(frame.head(0), ["device", "pid"]) == []


def test_a_window_over_the_varying_keys_gives_the_same_values():
    frame = pl.DataFrame({"device": ["npu:0"] * 5, "pool": ["A", "B", "A", "A", "B"],
                          "x": [1, 2, 3, 4, 5]})
    keys = varying(frame, ["device", "pool"])
    got = frame.select(over(pl.col("x").cum_sum(), keys))["x"].to_list()
    assert got == frame.select(pl.col("x").cum_sum().over("device", "pool"))["x"].to_list()
    assert got == [1, 2, 4, 8, 7]
    alone = frame.select(over(pl.col("x").cum_sum(), varying(frame, ["device"])))
    assert alone["x"].to_list() == [1, 3, 6, 10, 15]
