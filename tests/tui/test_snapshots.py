"""SVG snapshots of the screens on the demo capture, at 80x24 and 120x40.

The baselines live in tests/tui/__snapshots__/test_snapshots/; after a deliberate change
to the looks, look at the new ones and accept them with
``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.units import format_bytes
from tests.conftest import REPO
from tests.helpers.screen_figures import (
    Shown,
    alive_at,
    bytes_by_frame,
    count,
    events_of,
    peak_event,
    seconds,
)
from tests.helpers.toy_traces import profiler_trace, toy_trace

DEMO = REPO / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


def _ids(size):
    return f"{size[0]}x{size[1]}"


def _live_figures(shown: Shown, trace, event: int, rows: int) -> None:
    """The cursor is on ``event``: the status bar names it, the Live line gives the bytes
    and blocks alive after it, and the first ``rows`` rows of the table are those bytes by
    innermost user frame."""
    events = events_of(trace, "cuda:0")
    assert shown.event == event
    alive = alive_at(trace, "cuda:0", event)
    status = shown.line_with(r"^ cuda:0 ")
    assert seconds(events["t"][event], events["t"][0]) in status
    shown.has(f"Live at {seconds(events['t'][event], events['t'][0])}: "
              f"{format_bytes(alive['size'].sum())} in {alive.height} blocks")
    for frame, total, blocks in bytes_by_frame(trace, alive)[:rows]:
        line = shown.line_with(re.escape(frame[:25]))
        assert re.search(rf"^\s*{re.escape(format_bytes(total))}\s+\d+\s+{blocks}\s", line), \
            (frame, total, blocks, line)


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_trend_at_the_peak(snap_compare, demo, size):
    """Trend on the demo: the cursor on the peak, live bytes by stack top below."""
    shown = Shown("p")
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=shown)
    peak = peak_event(demo, "cuda:0")
    _live_figures(shown, demo, peak, rows=4)
    events = events_of(demo, "cuda:0")
    status = shown.line_with(r"^ cuda:0 ")
    assert f"#{peak}/{events.height}" in status
    assert f"alloc {format_bytes(events['allocated'][peak])}" in status
    assert f"resv {format_bytes(events['reserved'][peak])}" in status
    assert _shown_as(events["allocated"].max(), "peak ", shown.lines[0])


def _shown_as(n: int, before: str, text: str) -> bool:
    """Whether ``before`` followed by ``n`` bytes, written long (``5.4 GiB``) or short
    (``5.4G``, narrow panes), is in ``text``."""
    long = format_bytes(n)
    short = long.replace(" ", "").replace("iB", "")
    return before + long in text or before + short in text


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_trend_window_zoomed(snap_compare, demo, size):
    """A window selected around the peak, then zoomed a step out of it."""
    keys = ("p", "H", "left_square_bracket", "L", "L", "right_square_bracket", "z", "Z", "h")
    shown = Shown(*keys)
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=shown)
    peak = peak_event(demo, "cuda:0")
    assert shown.event != peak  # a tenth back, two ahead, zoomed, one event back
    _live_figures(shown, demo, shown.event, rows=3)
    t0, t1 = shown.window  # the one status bar says the window's length at every size
    assert f"win {(t1 - t0) / 1e6:.1f} ms" in shown.text


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_tables_blocks(snap_compare, demo, size):
    """Block View at the peak, sorted by size, largest first."""
    shown = Shown("p", "5", "s")  # the column cursor starts on Size
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=shown)
    blocks = demo.blocks.filter(pl.col("device") == "cuda:0")
    shown.has(f"{count(blocks.height)} of {count(blocks.height)} rows")
    largest = blocks.sort(["size", "block_id"], descending=[True, False])
    rows = _table_rows(shown)
    assert rows[0].startswith("›")  # the cursor on the largest block
    for row, (block, size_bytes) in zip(rows, largest.select("block_id", "size").iter_rows(),
                                        strict=False):
        assert re.match(rf"^.\s+{block}\s+{re.escape(format_bytes(size_bytes))}\s", row), row


def _table_rows(shown: Shown) -> list[str]:
    """The data rows of the Tables screen (under its column header, above the status)."""
    lines = shown.lines
    header = next(i for i, line in enumerate(lines) if re.search(r"(?:^|\s)(?:ID|#)\s", line))
    rows = [line for line in lines[header + 1:] if re.match(r"^[› ]\s+\d+\s", line)]
    assert len(rows) >= 10, shown.text
    return rows


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_tables_events(snap_compare, demo, size):
    """Event View following the cursor at the peak."""
    shown = Shown("p", "5", "tab")
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=shown)
    events = events_of(demo, "cuda:0")
    shown.has(f"{count(events.height)} of {count(events.height)} rows")
    peak = peak_event(demo, "cuda:0")
    rows = _table_rows(shown)
    [chosen] = [row for row in rows if row.startswith("›")]
    row = events.row(peak, named=True)
    assert re.match(rf"^›\s+{row['seq']}\s+{re.escape(seconds(row['t'], events['t'][0]))}"
                    rf"\s+{row['action']}\s+{re.escape(format_bytes(row['size']))}"
                    rf"\s+{row['block_id']}\s", chosen), chosen
    # the rows around it are the events before and after, in order
    numbers = [int(r.split()[1] if r.startswith("›") else r.split()[0]) for r in rows]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))


def test_trend_60_columns(snap_compare, demo):
    """The narrow layout."""
    shown = Shown("p")
    assert snap_compare(MemtuiApp(demo), terminal_size=(60, 24), run_before=shown)
    _live_figures(shown, demo, peak_event(demo, "cuda:0"), rows=3)


def test_tables_60_columns(snap_compare, demo):
    """The narrow layout: the call stack under the table."""
    shown = Shown("p", "5")
    assert snap_compare(MemtuiApp(demo), terminal_size=(60, 24), run_before=shown)
    blocks = demo.blocks.filter(pl.col("device") == "cuda:0").sort("block_id")
    shown.has(f"{count(blocks.height)} of {count(blocks.height)} rows",
              f"Call stack of block {blocks['block_id'][0]}")
    for row, (block, size_bytes) in zip(_table_rows(shown),
                                        blocks.select("block_id", "size").iter_rows(),
                                        strict=False):
        assert re.match(rf"^.\s+{block}\s+{re.escape(format_bytes(size_bytes))}\s", row), row


#: The keys every screen answers (../shared/DESIGN.md, section 4), with the help's words.
EVERYWHERE = {"1": "Trend", "2": "Blocks", "3": "Pool", "4": "Stacks", "5": "Tables",
              "p": "Peak", "g": "Start", "G": "End", "z": "Zoom", "Z": "Zoom out",
              "d": "Device", "?": "Help", "q": "Quit"}


def test_help(snap_compare):
    shown = Shown("question_mark")
    trace = toy_trace()
    assert snap_compare(MemtuiApp(trace), terminal_size=(120, 40), run_before=shown)
    rows = {key: m.group(2) for m in (  # each key of a row (q, ^q: one row) to its words
        re.search(r"│ (\S+(?:, \S+)*)\s{2,}(\S.*?)\s{2,}app\.", line)
        for line in shown.lines) if m for key in m.group(1).split(", ")}
    for key, words in EVERYWHERE.items():
        assert rows.get(key) == words, (key, rows)
    assert rows.get("←") == rows.get("h") == "Previous event"
    assert rows.get("→") == rows.get("l") == "Next event"
    # the toy behind it: 400 B at its peak
    assert _shown_as(trace.events["allocated"].max(), "peak ", shown.lines[0])


def test_profiler_trend(snap_compare):
    """Profiler curves (Overall) on a hand-built trace: at the peak (t = 10 ns) Operators
    Allocated is 30, Operators Reserved 50, App Reserved 100; reserved peaks at 60."""
    shown = Shown("p")
    assert snap_compare(MemtuiApp(profiler_trace()), terminal_size=(80, 24), run_before=shown)
    header = " ".join(shown.lines[:2])
    for part in ("Allocated 30B", "Reserved 50B", "App 100B", "peak 30B", "resv 60B"):
        assert part in header, (part, header)
    assert "event #1/3" in shown.line_with(r"^ npu:0 ")
