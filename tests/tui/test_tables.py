"""The Tables screen with Pilot: Block and Event View, the cursor link, sort, filter, copy."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.tui.app import MemtuiApp
from memtui.tui.widgets.table import VirtualTable
from tests.helpers.run_profile import by_profile
from tests.helpers.toy_traces import FORWARD, big_trace, ready, settle, status_text, toy_trace

SIZE = (120, 40)


async def open_tables(pilot, view: str = "blocks"):
    await ready(pilot)
    await pilot.press("5")
    await settle(pilot)
    if view == "events":
        await pilot.press("tab")
        await settle(pilot)
    screen = pilot.app.screen
    return screen, screen.query_one(f"#{view}-table", VirtualTable)


def shown(table: VirtualTable, column: str) -> list:
    model = table.model
    return [model.record(i)[column] for i in range(model.rows.size)]


async def test_moving_the_cursor_on_the_trend_moves_the_event_view_and_status_bar():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, events = await open_tables(pilot, "events")
        assert events.model.record(events.cursor_row)["t"] == 500
        await pilot.press("1", "p")  # the peak, on the Trend screen
        await pilot.press("5")
        await settle(pilot)
        assert events.model.record(events.cursor_row)["t"] == 2000
        assert "alloc 400 B" in status_text(app)
        await pilot.press("l")  # and on the Tables screen itself
        await settle(pilot)
        assert events.model.record(events.cursor_row)["t"] == 3000
        assert "alloc 300 B" in status_text(app)


async def test_enter_moves_the_cursor_to_the_row_and_selects_its_block():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, blocks = await open_tables(pilot)
        assert shown(blocks, "block_id") == [0, 1, 2]
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.cursor.t == 2000 and app.cursor.block_id == 1
        assert "event #2/6" in status_text(app)
        text = str(screen.query_one("#stack-text").render())
        assert "Call stack of block 1" in text and "main (train.py:20)" in text
        line = blocks.render_line(2).text
        assert line.startswith("›●")  # highlighted, and the selected block
        await pilot.press("tab")
        await settle(pilot)
        events = screen.query_one("#events-table", VirtualTable)
        assert events.model.record(events.cursor_row)["t"] == 2000
        await pilot.press("down", "enter")  # the free of block 0 at 3000
        await settle(pilot)
        assert app.cursor.t == 3000 and app.cursor.block_id == 0


async def test_sort_by_the_highlighted_column_and_by_a_header_click():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, blocks = await open_tables(pilot)
        await pilot.press("s")  # the column cursor starts on Size: largest first
        await settle(pilot)
        assert shown(blocks, "block_id") == [1, 0, 2]
        assert "sort Size ▼" in str(screen.query_one("#tables-header").render())
        assert "Size ▼" in blocks.render_line(0).text
        await pilot.press("s")
        await settle(pilot)
        assert shown(blocks, "block_id") == [2, 0, 1]
        a, _ = blocks._column_span(0)
        await pilot.click(blocks, offset=(a + 1, 0))  # the ID header
        await settle(pilot)
        assert blocks.model.sort_key == "block_id" and shown(blocks, "block_id") == [0, 1, 2]


async def test_filter_by_size_time_and_text():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, blocks = await open_tables(pilot)
        await pilot.press("f", *"size>=100", "enter")
        await settle(pilot)
        assert shown(blocks, "block_id") == [0, 1]
        assert "filter size>=100" in str(screen.query_one("#tables-header").render())
        await pilot.press("f")
        screen.query_one("#tables-input").value = "forward"
        await pilot.press("enter")
        await settle(pilot)
        assert shown(blocks, "block_id") == [0, 2]
        await pilot.press("f")
        screen.query_one("#tables-input").value = "size>lots"
        await pilot.press("enter")
        await pilot.pause()
        assert shown(blocks, "block_id") == [0, 2]  # a bad filter is refused, said so
        await pilot.press("escape")
        await pilot.press("f")
        screen.query_one("#tables-input").value = ""
        await pilot.press("enter")
        await settle(pilot)
        assert shown(blocks, "block_id") == [0, 1, 2]


async def test_scope_window_and_alive_at_the_cursor():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, blocks = await open_tables(pilot)
        app.move_cursor(t=4500, window=(3500, 4500))
        await settle(pilot)
        await pilot.press("w")  # blocks overlapping the window
        await settle(pilot)
        assert shown(blocks, "block_id") == [1, 2]
        await pilot.press("w")  # alive at the cursor
        await settle(pilot)
        assert shown(blocks, "block_id") == [1, 2]
        await pilot.press("p")
        await settle(pilot)
        assert shown(blocks, "block_id") == [0, 1]
        await pilot.press("tab", "w")
        await settle(pilot)
        events = screen.query_one("#events-table", VirtualTable)
        assert shown(events, "t") == [4000]


async def test_search_jumps_to_the_next_match():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, events = await open_tables(pilot, "events")
        await pilot.press("slash", *"free", "enter")
        await settle(pilot)
        assert events.model.record(events.cursor_row)["t"] == 3000
        await pilot.press("n")
        assert events.model.record(events.cursor_row)["t"] == 5000


async def test_copy_writes_the_visible_rows_as_csv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = MemtuiApp(toy_trace())
    copied = []
    app.copy_to_clipboard = copied.append
    async with app.run_test(size=SIZE) as pilot:
        await open_tables(pilot)
        await pilot.press("c")
        await settle(pilot)
    files = list(tmp_path.glob("memtui-blocks-*.csv"))
    assert len(files) == 1
    text = files[0].read_text()
    assert copied == [text]
    lines = text.splitlines()
    assert lines[0].startswith("ID,Size,State,Role,Stack top,Alloc,Free,Duration")
    assert len(lines) == 4 and FORWARD in lines[1]


#: Rows of the big table: 2M under MEMTUI_TEST_PROFILE=long, 500k in the short profile (CI).
BIG_ROWS = by_profile(500_000, 2_000_000)


@pytest.mark.slow
async def test_a_big_table_scrolls_and_sorts():
    """Virtual rendering: the end of a table of BIG_ROWS rows is one key away, and sorts
    work."""
    last_row = BIG_ROWS - 1
    app = MemtuiApp(big_trace(BIG_ROWS))
    async with app.run_test(size=(80, 24)) as pilot:
        screen, events = await open_tables(pilot, "events")
        assert events.row_count == BIG_ROWS
        await pilot.press("end")
        assert events.cursor_row == last_row
        assert events.first_row == last_row - events.page_rows + 1
        last = events.render_line(events.page_rows).text
        assert str(last_row) in last
        await pilot.press("pageup")
        assert events.cursor_row == last_row - events.page_rows
        await pilot.press("home", "right", "right", "right", "s")  # Size, largest first
        await settle(pilot)
        sizes = events.model.frame["size"].to_numpy()[events.model.rows[:50]]
        assert np.all(np.diff(sizes) <= 0)
        assert sizes[0] == events.model.frame["size"].max()


async def test_state_column_follows_the_cursors_event_among_shared_timestamps():
    """Issue 15: events 1 and 2 allocate at the same t=20; at event 1 the Block View says
    the block of event 2 is "not yet", at event 2 "alive" (by time both were alive)."""
    from tests.tui.test_app import shared_time_trace

    app = MemtuiApp(shared_time_trace())
    async with app.run_test(size=SIZE) as pilot:
        app.move_cursor(event=1)
        screen, blocks = await open_tables(pilot)
        state = [c.key for c in blocks.model.columns].index("state")
        cells = blocks.model.cells(0, 3, app.cursor.t)
        assert [row[state] for row in cells] == ["alive", "alive", "not yet"]
        app.move_cursor(event=2)
        await settle(pilot)
        cells = blocks.model.cells(0, 3, app.cursor.t)
        assert [row[state] for row in cells] == ["alive", "alive", "alive"]


async def test_the_stack_panel_names_the_event_by_its_number_and_the_stack_by_its_name():
    """Issue 23: the Events panel said "Call stack of event 2" for row #0 (msMemScope:
    the DB id); it says the row's event number, then the stack's name as every screen
    gives it, and leaves the allocator's frames out."""
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        screen, events = await open_tables(pilot, "events")
        await pilot.press("home")
        await settle(pilot)
        text = str(screen.query_one("#stack-text").render())
        row = events.model.record(events.cursor_row)
        assert row["event"] == 0 and f"Call stack of event {row['event']}" in text
        await pilot.press("down")  # event 1: an alloc of block 0, stack malloc <- forward
        await settle(pilot)
        text = str(screen.query_one("#stack-text").render())
        assert "Call stack of event 1" in text
        assert f"named {FORWARD}" in text
        assert "CUDACachingAllocator" not in text and "1 allocator" in text


async def test_the_memscope_events_panel_says_the_rows_number():
    from memtui.sources import open_capture
    from tests.conftest import require_shared

    trace = open_capture(require_shared("msmemscope") / "example__compare__leaks.csv")
    app = MemtuiApp(trace)
    async with app.run_test(size=SIZE) as pilot:
        screen, events = await open_tables(pilot, "events")
        await pilot.press("home")
        await settle(pilot)
        row = events.model.record(events.cursor_row)
        assert row["event"] == 0 and row["source_id"] != 0  # its own id differs
        text = str(screen.query_one("#stack-text").render())
        assert text.startswith("Call stack of event 0 ")


async def test_behind_memtui_serve_no_file_is_written_on_the_server(tmp_path, monkeypatch):
    """``memtui serve`` sets MEMTUI_SERVED: copy goes to the clipboard only, the export to
    the browser as a download; the page's visitor never writes into the server's folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMTUI_SERVED", "1")
    app = MemtuiApp(toy_trace())
    copied, delivered = [], []
    app.copy_to_clipboard = copied.append
    app.deliver_text = lambda stream, save_filename=None, **_: delivered.append(
        (save_filename, stream.read()))
    async with app.run_test(size=SIZE) as pilot:
        await open_tables(pilot)
        await pilot.press("c")
        await settle(pilot)
        app.screen.action_export()
        await settle(pilot)
        await pilot.pause(0.5)
    assert list(tmp_path.iterdir()) == []
    assert copied and copied[0].startswith("ID,Size")
    assert delivered and delivered[0][0].startswith("memtui-blocks-")
    assert delivered[0][1].startswith("ID,Size")
