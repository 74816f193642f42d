"""Insight's table columns, range filters and editable inefficient thresholds (issue 17):
analysis.table_views Filter / with_alloc_attr and analysis.inefficient parse/format, on
hand-built frames whose answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from memtui.analysis.findings.flags import (
    DEFAULT_THRESHOLDS,
    Threshold,
    format_thresholds,
    parse_thresholds,
)
from memtui.analysis.tables import Filter, TableModel, with_alloc_attr

# four blocks: (id, size, malloc, free, flags)
BLOCKS = pl.DataFrame({
    "block_id": [0, 1, 2, 3], "device": ["d"] * 4, "size": [100, 200, 300, 400],
    "t_alloc": [10, 20, 30, 40], "t_free": [50, None, 35, 45],
    "flags": [0, 1, 0, 6], "stack_id": [None] * 4,
}, schema_overrides={"flags": pl.UInt8, "stack_id": pl.Int32})


def shown(spec: str) -> list[int]:
    model = TableModel.for_blocks(BLOCKS, 0, "event")
    model.apply(Filter.parse(spec, 0, "event"))
    return model.frame["block_id"].gather(model.rows).to_list()


def test_malloc_and_free_ranges_and_the_inefficient_filter():
    assert shown("malloc>=20 malloc<=35") == [1, 2]
    assert shown("free<=45") == [2, 3]  # block 1 never freed: no Free time
    assert shown("free>40") == [0, 3]
    assert shown("inefficient") == [1, 3]
    assert shown("inefficient size>=300") == [3]
    assert shown("t=33") == [0, 1, 2]  # alive at 33 (time ranges overlap the lifetime)
    assert Filter.parse("ineff", 0, "event").inefficient


def test_insight_columns_are_shown_where_there_is_data():
    frame = BLOCKS.with_columns(process=pl.lit(7), thread=pl.lit(9))
    model = TableModel.for_blocks(frame, 0, "event")
    titles = [c.title for c in model.columns]
    assert "Process ID" in titles and "Thread ID" in titles and "Inefficient" in titles
    assert "Attr" not in titles  # no events carry one
    events = pl.DataFrame({"t": [1], "seq": [0], "action": ["alloc"], "event_type": ["PTA"],
                           "name": ["x"], "process": [7], "thread": [9], "device": ["d"],
                           "attr": ["{owner: w}"], "block_id": [0], "size": [1]})
    titles = [c.title for c in TableModel.for_events(events, 0, "event").columns]
    for title in ("Event Type", "Name", "Process ID", "Thread ID", "Device ID", "Attr"):
        assert title in titles


def test_blocks_take_the_attr_of_their_alloc_event():
    events = pl.DataFrame({"action": ["alloc", "free", "alloc"], "block_id": [0, 0, 2],
                           "attr": ["a0", "f0", "a2"]})
    got = with_alloc_attr(BLOCKS, events)
    assert got["attr"].to_list() == ["a0", None, "a2", None]
    assert with_alloc_attr(BLOCKS, None) is BLOCKS


def test_thresholds_are_read_and_written_as_the_user_types_them():
    assert format_thresholds(DEFAULT_THRESHOLDS) == "early=50% late=50% idle=50%"
    got = parse_thresholds("early=2s late=off idle=500ms,20%")
    assert got.early_allocation == Threshold(ns=2_000_000_000, percent=None)
    assert got.late_deallocation == Threshold(ns=None, percent=None)
    assert got.temporary_idleness == Threshold(ns=500_000_000, percent=20.0)
    assert format_thresholds(got) == "early=2s late=off idle=500ms,20%"
    assert parse_thresholds("idle=10%", got).early_allocation == got.early_allocation
    for bad in ("early", "soon=1s", "early=fast", "late=3parsecs"):
        with pytest.raises(ValueError):
            parse_thresholds(bad)


def test_state_column_at_the_cursor_follows_event_order():
    """Issue 15: allocs of 100 (event 1) and 200 (event 2) share t=20, and the 100's free
    is requested at event 2.  Just after event 1 the 200 is "not yet" and the 100 "alive";
    by time (20) the 200 would already be alive and the 100 pending."""
    from memtui.analysis.timeline.at_time import block_positions
    from tests.tui.test_app import shared_time_trace

    trace = shared_time_trace()
    blocks = trace.blocks.with_columns(
        t_free_requested=pl.when(pl.col("block_id") == 1).then(20).otherwise(None),
        seq_free_requested=pl.when(pl.col("block_id") == 1).then(2).otherwise(None))
    trace.blocks = blocks
    model = TableModel.for_blocks(trace.device_blocks("cuda:0"), 10, "ns",
                                  positions=block_positions(trace, "cuda:0"))
    rows = np.arange(3)
    assert model.state_codes(rows, 20).tolist() == [1, 2, 1]  # by time: wrong at event 1
    model.cursor_event = 1
    assert model.state_codes(rows, 20).tolist() == [1, 1, 0]
    model.cursor_event = 2
    assert model.state_codes(rows, 20).tolist() == [1, 2, 1]
    model.cursor_event = 3
    assert model.state_codes(rows, 30).tolist() == [3, 2, 1]
