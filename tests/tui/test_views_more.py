"""Owner layers on the Stacks screen and segments over time on the Blocks screen (issue
17), by hand on small traces and with Pilot at 80x24 and 120x40."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memtui.analysis.layout.block_map import BlockMapData, segment_index
from memtui.analysis.stacks.owner_tree import owner_tree
from memtui.sources import open_capture
from tests.helpers.map_pilot import maps_app, open_screen, screen_text
from tests.helpers.run_profile import sizes
from tests.helpers.toy_traces import toy_trace

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


def test_owner_tree_by_layer_then_owner():
    """PTA: weight 10 + 20, optimizer_state 30 (the layer's own name is not repeated);
    HAL: a block without owner, 40."""
    blocks = pl.DataFrame({"pool": ["PTA", "PTA", "PTA", "HAL"],
                           "owner": ["PTA@weight", "PTA@weight", "@optimizer_state", None],
                           "size": [10, 20, 30, 40]})
    owners = owner_tree(toy_trace(), blocks)
    figures = owners.tree.figures(owners.codes, blocks["size"].to_numpy())
    rest = set(owners.tree.remainder_node.values())  # named bytes in no block: none here
    by_label = {(owners.tree.label(n), int(owners.tree.depth[n])): int(figures.bytes[n])
                for n in range(2, owners.tree.size) if n not in rest}
    assert not figures.bytes[list(rest)].any()
    assert by_label == {("PTA", 1): 60, ("HAL", 1): 40, ("weight", 2): 30,
                        ("optimizer_state", 2): 30, ("(no owner)", 2): 40}
    pta = next(n for n in range(owners.tree.size) if owners.tree.label(n) == "PTA")
    assert owners.block_rows_under(pta, np.arange(4)).tolist() == [0, 1, 2]


def test_segments_over_time_stack_to_the_reserved_level():
    trace = toy_trace()  # cuda:0: one 1024-byte segment from 500 on
    index = segment_index(trace, "cuda:0")
    assert index.block_id.tolist() == [0] and index.size.tolist() == [1024]
    level = BlockMapData(index).level()
    assert level.values.max() == 1024


def owned_demo():
    trace = open_capture(DEMO)
    owners = np.array(["PTA@weight", "PTA@activation", "@gradient", None], dtype=object)
    owner = pl.Series(owners[np.arange(trace.blocks.height) % 4].tolist(), dtype=pl.String)
    return dataclasses.replace(trace, blocks=trace.blocks.with_columns(owner=owner))


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_stacks_owner_layers(size):
    app = maps_app(owned_demo())
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "stacks", at_end=False)
        app.action_peak()
        await pilot.press("O")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert screen.owners is not None
        labels = {screen.stack_tree.label(n) for n in screen.tree_view.rows}
        assert {"weight", "activation", "gradient", "(no owner)"} & labels
        assert "by owner layer" in str(screen.query_one("#status-line").render())
        await pilot.press("O")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.owners is None


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_blocks_segments_over_time(size):
    app = maps_app(open_capture(DEMO))
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "blocks", at_end=False)
        app.action_peak()
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert screen.segments_mode
        assert "Segments" in str(screen.query_one("#status-line").render())
        raster = screen.map.raster
        reserved = app.timeline(app.cursor.device).reserved
        assert raster.totals.max() == reserved.values.max()  # stacked to the reserved peak
        await pilot.press("down")
        await pilot.pause()
        assert app.cursor.segment_id is not None
        assert f"segment {app.cursor.segment_id}" in screen_text(app)
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not app.screen.segments_mode
