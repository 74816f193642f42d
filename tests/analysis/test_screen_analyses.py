"""The pure helpers behind the UI: downsampling, state at a time, curves, stacks, tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.analysis.stacks.callstack import stack_lines, stack_tops
from memtui.analysis.tables import (
    Filter,
    TableModel,
    format_flags,
    format_span,
    format_time,
    hex_expr,
    parse_size,
    parse_time,
)
from memtui.analysis.timeline.at_time import LiveBlocks, Timeline
from memtui.analysis.timeline.downsample import bin_of, bin_start, minmax_bins, value_at
from memtui.analysis.timeline.series import group_bys, trend_series
from memtui.tui.cursor import CursorState, fit, pan, settle, zoom
from tests.helpers.toy_traces import FORWARD, MAIN, profiler_trace, toy_trace

# -- downsampling ------------------------------------------------------------------------


def test_minmax_bins_by_hand():
    # Level 0 from t=0, 10 at t=5, 3 at t=6, 7 at t=25; view [0, 40) in 4 bins of 10.
    t = np.array([0, 5, 6, 25])
    v = np.array([0, 10, 3, 7])
    bins = minmax_bins(t, v, 0, 40, 4)
    assert bins.lo.tolist() == [0, 3, 3, 7]
    assert bins.hi.tolist() == [10, 3, 7, 7]
    assert bins.known.all()


def test_minmax_bins_before_the_first_point_is_unknown():
    bins = minmax_bins(np.array([20, 30]), np.array([4, 8]), 0, 40, 4)
    assert bins.known.tolist() == [False, False, True, True]
    assert bins.hi[2:].tolist() == [4, 8]


def test_minmax_bins_keeps_a_transient_peak_at_a_shared_time():
    # Up to 100 and back down at the same instant: the peak must still be drawn.
    bins = minmax_bins(np.array([0, 10, 10]), np.array([1, 100, 1]), 0, 100, 5)
    assert bins.hi.max() == 100


def test_minmax_bins_zoomed_in_is_exact():
    t = np.arange(0, 100, 10)
    v = np.arange(10) * 3
    bins = minmax_bins(t, v, 20, 59, 4)  # one change per bin
    assert bins.hi.tolist() == [6, 9, 12, 15]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 10**6)), min_size=1,
                max_size=60),
       st.integers(1, 50))
def test_minmax_bins_property(points, n):
    """Every bin's range is the true range of the level over the bin (and the step into it)."""
    points.sort(key=lambda p: p[0])
    t = np.array([p[0] for p in points])
    v = np.array([p[1] for p in points])
    t0, t1 = 0, 1000
    bins = minmax_bins(t, v, t0, t1, n)
    for i in range(n):
        start = int(bin_start(i, t0, t1, n))
        end = int(bin_start(i + 1, t0, t1, n)) if i + 1 < n else t1 + 1
        inside = [val for tt, val in points if start <= tt < end]
        before = [val for tt, val in points if tt < start]
        values = inside + before[-1:]
        if not values:
            assert not bins.known[i]
            continue
        assert bins.known[i]
        assert bins.lo[i] == min(values) and bins.hi[i] == max(values)
    assert bins.hi[bins.known].max() == v.max()


def test_bin_of_and_bin_start_are_inverse():
    edges = bin_start(np.arange(7), 100, 170, 7)
    assert bin_of(edges, 100, 170, 7).tolist() == list(range(7))
    assert bin_of(edges - 1, 100, 170, 7)[1:].tolist() == list(range(6))


def test_value_at():
    """Before the first sample: the default, not the first sample held backwards."""
    t, v = np.array([10, 20]), np.array([1, 2])
    assert [value_at(t, v, x) for x in (5, 10, 15, 20, 99)] == [0, 1, 1, 2, 2]
    assert value_at(t, v, 5, default=-1) == -1
    assert value_at(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 5) == 0


def test_a_curve_that_starts_late_is_zero_before_its_first_sample():
    """Profiler (QA): Operators Allocated starts 10 ns after the Reserved curve; at the
    run's start the status bar said its first sample (30) where the chart drew nothing."""
    import dataclasses

    import polars as pl

    from memtui.analysis.timeline.at_time import Timeline
    from tests.helpers.toy_traces import profiler_trace

    trace = profiler_trace()
    late = (pl.col("series") == "Operators Allocated") & (pl.col("t") == 0)
    trace = dataclasses.replace(trace, curves=trace.curves.filter(~late))
    timeline = Timeline.build(trace, "npu:0")
    assert timeline.start == 0
    assert timeline.levels_at(0).allocated == 0
    assert timeline.levels_at(0).reserved == 50
    assert timeline.levels_at(10).allocated == 30


# -- state at a time ---------------------------------------------------------------------


def test_timeline_levels_steps_and_peak():
    tl = Timeline.build(toy_trace(), "cuda:0")
    assert (tl.start, tl.end) == (500, 5000)
    assert (tl.peak, tl.peak_t) == (400, 2000)
    assert tl.levels_at(2500).allocated == 400
    assert tl.levels_at(3000).allocated == 300  # the free at 3000 has happened
    assert tl.levels_at(2500).reserved == 1024
    assert tl.levels_at(500).allocated == 0
    assert not tl.active_differs
    assert tl.event_number(499) == 0 and tl.event_number(2000) == 3
    assert tl.step(2000, 1) == 3000 and tl.step(2500, 1) == 3000
    assert tl.step(2500, -1) == 2000 and tl.step(2000, -1) == 1000
    assert tl.step(5000, 1) == 5000 and tl.step(500, -3) == 500
    assert tl.markers["name"].to_list() == ["step#0", "step#1"]


def test_live_blocks_by_stack_and_owner():
    trace = toy_trace()
    live = LiveBlocks(trace.device_blocks("cuda:0"), stack_tops(trace))
    assert live.total(2500) == 400 and live.total(3000) == 300 and live.total(999) == 0
    top = live.top(2500)
    assert top.to_dicts() == [
        {"where": MAIN, "bytes": 300, "blocks": 1},
        {"where": FORWARD, "bytes": 100, "blocks": 1},
    ]
    assert live.top(4500)["bytes"].to_list() == [300, 50]
    assert live.top(4500, by="owner").to_dicts() == [
        {"where": "(no owner)", "bytes": 350, "blocks": 2}]
    assert sorted(live.alive_ids(4500).tolist()) == [1, 2]


def test_timeline_without_events_uses_the_curves():
    tl = Timeline.build(profiler_trace(), "npu:0")
    assert tl.times.tolist() == [0, 10, 20]
    assert (tl.peak, tl.peak_t) == (30, 10)
    assert tl.levels_at(15).allocated == 30 and tl.levels_at(15).reserved == 50


# -- curves --------------------------------------------------------------------------------


def test_snapshot_series_are_allocated_and_reserved():
    trace = toy_trace()
    series = trend_series(trace, "cuda:0", Timeline.build(trace, "cuda:0"))
    assert [(s.label, s.role) for s in series] == [("allocated", "allocated"),
                                                    ("reserved", "line")]
    assert group_bys(trace, "cuda:0") == ["overall"]


def test_layered_curves_draw_the_event_levels_overall():
    """msMemScope's curves all name a layer (HAL, PTA): Overall draws the events' levels
    (allocated, reserved), Component the layers' curves."""
    import polars as pl

    from memtui.model import conform

    trace = toy_trace()
    trace.curves = conform(pl.DataFrame({
        "t": [1000, 2000], "device": ["cuda:0"] * 2, "series": ["Allocated"] * 2,
        "component": ["PTA", "PTA"], "bytes": [10, 20]}), "curves")
    timeline = Timeline.build(trace, "cuda:0")
    overall = trend_series(trace, "cuda:0", timeline)
    assert [(s.label, s.role) for s in overall] == [("allocated", "allocated"),
                                                    ("reserved", "line")]
    assert overall[0].level is timeline.allocated
    component = trend_series(trace, "cuda:0", timeline, "component")
    assert [s.label for s in component] == ["PTA Allocated"]
    assert component[0].level.values.tolist() == [10, 20]


def test_profiler_group_by():
    trace = profiler_trace()
    tl = Timeline.build(trace, "npu:0")
    assert group_bys(trace, "npu:0") == ["overall", "stream", "component"]
    overall = trend_series(trace, "npu:0", tl, "overall")
    assert [s.label for s in overall] == ["Operators Allocated", "Operators Reserved",
                                          "App Reserved"]
    assert overall[0].role == "allocated"
    assert overall[2].level.values.tolist() == [100, 100, 100]
    stream = trend_series(trace, "npu:0", tl, "stream")
    assert [s.label for s in stream] == ["Allocated of stream 7"]
    assert stream[0].level.values.tolist() == [5, 15, 10]
    component = trend_series(trace, "npu:0", tl, "component")
    assert [s.label for s in component] == ["PTA Operators Allocated", "PTA Operators Reserved"]


# -- call stacks ------------------------------------------------------------------------


def test_stack_tops_skip_the_allocator():
    tops = stack_tops(toy_trace()).sort("stack_id")
    assert tops["top"].to_list() == [FORWARD, MAIN]


def test_stack_lines_mark_omitted_frames():
    lines = stack_lines(toy_trace(), 0)
    assert [label for label, _ in lines] == [
        "c10::cuda::CUDACachingAllocator::malloc (CUDACachingAllocator.cpp)", FORWARD, MAIN]
    assert stack_lines(toy_trace(), None) == []


# -- tables ------------------------------------------------------------------------------


def _blocks_model(trace=None):
    trace = trace or toy_trace()
    return TableModel.for_blocks(trace.device_blocks("cuda:0"), 500, "ns", stack_tops(trace))


def _events_model(trace=None):
    trace = trace or toy_trace()
    return TableModel.for_events(trace.device_events("cuda:0"), 500, "ns", stack_tops(trace))


def test_columns_only_where_the_source_has_data():
    keys = [c.key for c in _blocks_model().columns]
    assert keys == ["block_id", "size", "state", "top", "t_alloc", "t_free", "duration",
                    "addr", "pool", "stream"]
    assert "owner" not in keys and "requested_size" not in keys


def test_cells_are_formatted_for_the_visible_rows_only():
    model = _blocks_model()
    rows = model.cells(0, 2, cursor_t=2500)
    assert rows[0][:7] == ["0", "100 B", "alive", FORWARD, format_time(1000, 500, "ns"),
                           format_time(3000, 500, "ns"), "2 us"]
    assert rows[1][2] == "alive"
    assert model.cells(2, 5, cursor_t=2500)[0][2] == "not yet"
    assert model.cells(0, 1, cursor_t=3000)[0][2] == "freed"


def test_sort_and_positions():
    model = _blocks_model()
    model.sort("size", descending=True)
    assert [model.record(i)["block_id"] for i in range(3)] == [1, 0, 2]
    assert model.position_of_block(2) == 2
    model.sort("top")
    assert [model.record(i)["block_id"] for i in range(3)] == [0, 2, 1]  # forward < main
    model.sort(None)
    assert [model.record(i)["block_id"] for i in range(3)] == [0, 1, 2]


def test_filters():
    model = _blocks_model()
    model.apply(Filter.parse("size>=100", 500, "ns"))
    assert model.rows.tolist() == [0, 1]
    model.apply(Filter.parse("main", 500, "ns"))
    assert [model.record(i)["block_id"] for i in range(model.rows.size)] == [1]
    model.apply(Filter(), scope=(4500, 4500))  # alive at 4500
    assert [model.record(i)["block_id"] for i in range(model.rows.size)] == [1, 2]
    model.apply(Filter.parse("addr=0x1100", 500, "ns"), scope=None)
    assert [model.record(i)["block_id"] for i in range(model.rows.size)] == [1]
    events = _events_model()
    events.apply(Filter.parse("t>=+0.0000015s t<=+0.0000025s", 500, "ns"))
    assert [events.record(i)["t"] for i in range(events.rows.size)] == [2000, 3000]
    events.apply(Filter.parse("free", 500, "ns"))
    assert events.rows.size == 2


def test_event_positions_follow_time():
    model = _events_model()
    assert model.position_at_time(2500) == 2  # the alloc at 2000
    assert model.position_at_time(3000) == 3
    model.sort("size", descending=True)
    assert model.record(model.position_at_time(2500))["t"] == 2000


def test_csv_of_visible_rows():
    text = _events_model().csv(1, 2)
    lines = text.strip().splitlines()
    assert lines[0].startswith("#,Time,Action,Size,Block,Stack top,Address")
    assert lines[1].split(",")[:7] == ["1", "0.000000500", "alloc", "100", "0", FORWARD, "0x1000"]
    assert len(lines) == 3


def test_parsers_and_formatters():
    assert parse_size("1.5K") == 1536 and parse_size("2GiB") == 2 << 30
    assert parse_time("+1.5s", 100, "ns") == 100 + 1_500_000_000
    assert parse_time("250ms", 0, "ns") == 250_000_000 and parse_time("#7", 0, "event") == 7
    with pytest.raises(ValueError):
        parse_size("lots")
    assert format_time(1_500_000_500, 500, "ns") == "+1.500000 s"
    assert format_time(12, 0, "event") == "#12"
    assert format_span(2_500_000, "ns") == "2.5 ms" and format_span(3, "event") == "3 ev"
    assert format_flags(5) == "ET" and format_flags(0) == ""
    df = pl.DataFrame({"a": pl.Series([0, 255, None], dtype=pl.UInt64)})
    assert df.select(hex_expr(pl.col("a")).alias("a"))["a"].to_list() == ["0x0", "0xff", None]


# -- cursor rules ---------------------------------------------------------------------------


def test_cursor_rules():
    assert fit(-5, 20, (0, 100)) == (0, 25)
    assert fit(90, 150, (0, 100)) == (40, 100)
    assert fit(3, 3, (10, 10)) == (10, 11)
    assert pan((0, 10), 15, (0, 100)) == (5, 15)
    assert zoom((0, 100), 50, 0.5, (0, 100)) == (25, 75)
    assert zoom((0, 100), 0, 0.5, (0, 100)) == (0, 50)
    assert zoom((25, 75), 50, 4, (0, 100)) == (0, 100)
    state = settle(CursorState("d", t=500, view=(0, 10), window=(90, -5)), (0, 100))
    assert state.t == 100 and state.view == (90, 100) and state.window == (0, 90)


def test_group_by_legend_puts_the_biggest_part_first_and_hides_empty_series():
    """Issue 17: ``ADETECT Module Reserved 0 B`` came first and cut off the parts with
    data.  Parts: ADETECT all zero, PTA peaks at 40, APP at 90: APP first, then PTA,
    ADETECT left out; inside PTA Insight's order (Allocated before Reserved)."""
    trace = profiler_trace()
    extra = []
    for t in (0, 10, 20):
        extra.append({"t": t, "device": "npu:0", "series": "Operators Reserved",
                      "component": "ADETECT", "stream": None, "bytes": 0})
        extra.append({"t": t, "device": "npu:0", "series": "Operators Allocated",
                      "component": "APP", "stream": None, "bytes": 30 * (1 + t // 10)})
    curves = pl.concat([trace.curves, pl.DataFrame(extra, schema=trace.curves.schema)])
    trace = dataclasses.replace(trace, curves=curves)
    series = trend_series(trace, "npu:0", Timeline.build(trace, "npu:0"), "component")
    assert [s.label for s in series] == ["APP Operators Allocated", "PTA Operators Allocated",
                                         "PTA Operators Reserved"]
    assert series[0].role == "allocated"
    assert series[0].level.values.tolist() == [30, 60, 90]


def test_stack_top_rules():
    """Stack 0 is malloc <- forward <- main, stack 1 malloc <- main (innermost first)."""
    trace = toy_trace()
    by_rule = {rule: stack_tops(trace, rule).sort("stack_id")["top"].to_list()
               for rule in ("user", "outer", "innermost")}
    assert by_rule["user"] == [FORWARD, MAIN]
    assert by_rule["outer"] == [MAIN, MAIN]
    assert by_rule["innermost"] == [FORWARD, MAIN]  # the allocator's own frame is skipped
    with pytest.raises(ValueError):
        stack_tops(trace, "middle")
