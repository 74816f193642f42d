"""A layer view that drops a few rows of another layer keeps the rest as slices of the
capture's own (no copy of every column), and is the same view as a filter makes
(``memtui.analysis.timeline.layers``: ``_kept_rows``, ``_with_levels``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.generate_memscope import generate_db
from memtui.analysis.timeline import layers
from memtui.analysis.timeline.layers import _chunked_as, _kept_rows, layer_view
from memtui.loading import load_trace
from tests.conftest import shared_files


def _rows(n: int) -> pl.DataFrame:
    return pl.DataFrame({"i": np.arange(n), "text": [f"row number {k} of many" for k in range(n)]})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), max_size=60), st.integers(-1, 70))
def test_kept_rows_are_the_filters_rows(keep, few):
    rows = _rows(len(keep))
    mask = pl.Series(keep, dtype=pl.Boolean)
    layers_few = layers._FEW_DROPPED
    try:
        layers._FEW_DROPPED = few  # slices (few dropped) or the filter (more than few)
        got = _kept_rows(rows, pl.lit(mask))
    finally:
        layers._FEW_DROPPED = layers_few
    assert got.equals(rows.filter(mask))


def test_few_dropped_rows_leave_the_rest_shared():
    """Worked by hand: rows 0..9, rows 3 and 7 dropped: three slices (0-2, 4-6, 8-9)."""
    rows = _rows(10)
    keep = ~pl.col("i").is_in([3, 7])
    got = _kept_rows(rows, keep)
    assert got["i"].to_list() == [0, 1, 2, 4, 5, 6, 8, 9]
    assert got["i"].chunk_lengths() == [3, 3, 2]
    assert got["text"].chunk_lengths() == [3, 3, 2]


def test_chunked_as_splits_without_changing_values():
    column = pl.Series("x", [5, 6, 7, 8, 9])
    got = _chunked_as(column, [2, 0, 3])
    assert got.to_list() == [5, 6, 7, 8, 9]
    assert [n for n in got.chunk_lengths() if n] == [2, 3]


def _captures(tmp_path) -> list:
    path = generate_db(tmp_path / "memscope_dump_small.db", 30_000, seed=3)
    return [path, *shared_files("msmemscope", "*.db")]


@pytest.mark.parametrize("which", [0, 1])
def test_sliced_view_is_the_filtered_view(tmp_path, monkeypatch, which):
    """The view made of slices has the same frames and figures as the one a filter makes,
    and its columns share one chunking (an expression over several does not copy them)."""
    captures = _captures(tmp_path)
    if which >= len(captures):
        pytest.skip("../shared/data/msmemscope has no DB here")
    trace = load_trace(captures[which], use_cache=False)
    if not layers.has_layers(trace):
        pytest.skip(f"{captures[which].name} has one layer")
    sliced = layer_view(trace)
    monkeypatch.setattr(layers, "_FEW_DROPPED", -1)
    filtered = layer_view(trace)
    for name in ("events", "blocks", "segments", "curves"):
        assert sliced.frame(name).equals(filtered.frame(name)), name
    assert sliced.meta.devices == filtered.meta.devices
    assert sliced.meta.warnings == filtered.meta.warnings
    events = sliced.events
    kept = events.height
    if which == 0:  # the generator's DB: a few HAL rows among the PTA ones, dropped
        assert kept < trace.events.height and events["t"].n_chunks() > 1
    chunkings = {tuple(events[c].chunk_lengths()) for c in events.columns
                 if events[c].n_chunks() > 1}
    assert len(chunkings) <= 1  # aligned: polars has no reason to make them one chunk
    if chunkings:
        assert sum(next(iter(chunkings))) == kept
