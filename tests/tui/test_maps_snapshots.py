"""SVG snapshots of the Blocks, Pool and Stacks screens on the demo captures (snapshots/),
at 80x24 and 120x40.  Regenerate with ``--snapshot-update`` after a deliberate change,
and look at the pictures (tests/tui/__snapshots__/) before committing them."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.findings.oom import find_ooms
from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.units import format_bytes
from tests.helpers.map_pilot import screen_text
from tests.helpers.screen_figures import (
    alive_at,
    count,
    events_of,
    innermost_user_frame,
    peak_event,
    pool_at,
    seconds,
)

DEMOS = Path(__file__).resolve().parents[2] / "snapshots"
SIZES = [(80, 24), (120, 40)]


KEYS = {"blocks": "2", "pool": "3", "stacks": "4"}


def _app(name: str) -> MemtuiApp:
    return MemtuiApp(open_capture(DEMOS / name))


async def _settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


class _AtPeakOn:
    """A run_before: open ``screen`` with the cursor at the peak (``p``), then press
    ``keys``; keeps the screen's text and the cursor's event as the picture is taken."""

    def __init__(self, screen: str, *keys: str) -> None:
        self.screen, self.keys, self.text, self.event = screen, keys, "", -1

    async def __call__(self, pilot) -> None:
        await _settle(pilot)
        await pilot.press("p", KEYS[self.screen])
        await _settle(pilot)
        await pilot.press(*self.keys)
        await _settle(pilot)
        self.text, self.event = screen_text(pilot.app), pilot.app.cursor.event


DEMO = open_capture(DEMOS / "demo_training.pickle")


def _flat(text: str) -> str:
    """The screen's text with its lines joined and runs of spaces made one (a figure
    wrapped at 80 columns reads on)."""
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_blocks_screen(snap_compare, size):
    shown = _AtPeakOn("blocks")
    assert snap_compare(_app("demo_training.pickle"), terminal_size=size, run_before=shown)
    peak = peak_event(DEMO, "cuda:0")
    assert shown.event == peak
    blocks = DEMO.blocks.filter(pl.col("device") == "cuda:0")
    assert re.search(rf"detail [\d,]+/{count(blocks.height)}\b", shown.text)
    # the Slice Detail: the block the peak's event allocated
    events = events_of(DEMO, "cuda:0")
    block = blocks.filter(pl.col("block_id") == events["block_id"][peak]).row(0, named=True)
    start = events["t"][0]
    text = _flat(shown.text)
    assert (f"block {block['block_id']} at {block['addr']:#x} {format_bytes(block['size'])} "
            f"(requested {block['requested_size']:,} B)") in text
    assert (f"allocated {seconds(block['t_alloc'], start)}, free requested "
            f"{seconds(block['t_free_requested'], start)}, freed "
            f"{seconds(block['t_free'], start)}") in text


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pool_screen(snap_compare, size):
    shown = _AtPeakOn("pool")
    assert snap_compare(_app("demo_training.pickle"), terminal_size=size, run_before=shown)
    pool = pool_at(DEMO, "cuda:0", peak_event(DEMO, "cuda:0"))
    text = _flat(shown.text)
    assert (f"{pool.segments} segments reserved {format_bytes(pool.reserved)} "
            f"allocated {format_bytes(pool.allocated)}") in text
    assert (f"pending 0 B free {format_bytes(pool.free)} in {pool.gaps} gaps "
            f"{pool.fragmented_text()}") in text


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_stacks_screen(snap_compare, size):
    shown = _AtPeakOn("stacks", "down", "down", "down", "enter")
    assert snap_compare(_app("demo_training.pickle"), terminal_size=size, run_before=shown)
    peak = peak_event(DEMO, "cuda:0")
    alive = alive_at(DEMO, "cuda:0", peak)
    total = int(alive["size"].sum())
    events = events_of(DEMO, "cuda:0")
    text = _flat(shown.text)
    assert (f"{format_bytes(total)} live at the cursor "
            f"{seconds(events['t'][peak], events['t'][0])} in {alive.height} blocks") in text
    # three rows down: <module>, train, then train's largest child, Block.forward at
    # model.py:172 (MLP.forward's caller), opened; the pane under the tree says its share
    under = _under_frame(alive, "Block.forward", 172)
    share = 100 * under["size"].sum() / total
    assert (f"{format_bytes(under['size'].sum())} ({share:.1f}% of all, {share:.1f}% of its "
            f"parent) in {under.height} blocks") in text
    assert innermost_user_frame(DEMO, under)["frame"].unique().to_list() == [
        "MLP.forward (model.py:150)"]
    [row] = [line for line in shown.text.splitlines()
             if "Block.forward  model.py:172" in line and "%" in line]
    assert re.search(rf"{share:.1f}%\s+{_short(under['size'].sum())}\s", row), row


def _short(n: int) -> str:
    """Bytes as the stack tree's column writes them: ``1.9G``, ``996M``."""
    value, unit = format_bytes(n).split()
    return f"{float(value):.3g}{unit[0]}" if unit != "B" else value


def _under_frame(blocks: pl.DataFrame, name: str, line: int) -> pl.DataFrame:
    """The rows of ``blocks`` whose call stack passes through ``name`` at ``line``."""
    frame_ids = DEMO.frames.filter((pl.col("name") == name) & (pl.col("line") == line))[
        "frame_id"].to_list()
    stacks = DEMO.stacks.filter(pl.col("frame_ids").list.eval(
        pl.element().is_in(frame_ids)).list.any())["stack_id"]
    return blocks.filter(pl.col("stack_id").is_in(stacks.implode()))


def test_pool_screen_at_the_oom(snap_compare):
    app = _app("demo_oom.pickle")
    trace = app.trace
    seen = {}

    async def at_oom(pilot) -> None:
        await _settle(pilot)
        await pilot.press("3")
        await _settle(pilot)
        await pilot.press("o")  # the next OOM event
        await _settle(pilot)
        seen["text"], seen["event"] = screen_text(pilot.app), pilot.app.cursor.event

    assert snap_compare(app, terminal_size=(120, 40), run_before=at_oom)
    events = events_of(trace, "cuda:0")
    [oom] = events.with_row_index("event").filter(pl.col("action") == "oom")["event"]
    assert seen["event"] == oom
    assert f"#{oom}/{events.height}" in seen["text"]
    pool = pool_at(trace, "cuda:0", oom)
    text = _flat(seen["text"])
    assert (f"{pool.segments} segments reserved {format_bytes(pool.reserved)} "
            f"allocated {format_bytes(pool.allocated)}") in text
    assert (f"free {format_bytes(pool.free)} in {pool.gaps} gaps "
            f"{pool.fragmented_text()}") in text
    # the banner says the OOM finding's title once, in human units (issue 35 item 6)
    said = [f.title for f in find_ooms(trace, "cuda:0")
            if "OUT OF MEMORY" + _flat(f.title).removeprefix("out of memory") in text]
    assert len(said) == 1 and format_bytes(events["size"][oom]) in said[0], text
    assert text.count("OUT OF MEMORY") == 1 and "bytes requested" not in text
