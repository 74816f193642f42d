"""The app shell with Pilot: loading, errors, the shared cursor, keys, mouse, devices, help.

Most tests run on the hand-built toy trace of tests/helpers/toy_traces.py, whose every answer
is known: the cursor starts at t=500 (the first event), the peak is 400 B at t=2000.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from textual import events

from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform
from memtui.tui.app import MemtuiApp, run_app
from memtui.tui.screens.modals import DeviceScreen, HelpScreen, LoadingScreen
from memtui.tui.widgets.curve import TrendPlot
from memtui.tui.widgets.status import StatusBar
from tests.conftest import REPO
from tests.helpers.run_profile import by_profile
from tests.helpers.toy_traces import (
    profiler_trace,
    ready,
    settle,
    status_lines,
    status_text,
    toy_trace,
)

DEMO = REPO / "snapshots" / "demo_training.pickle"
SIZE = (80, 24)


async def test_opens_a_path_behind_a_progress_bar():
    app = MemtuiApp(DEMO)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.current_mode == "findings"  # the demo's planted leak, found by itself
        assert app.trace.events.height > 0
        loading = app._screen_stacks["_default"][-1]
        assert isinstance(loading, LoadingScreen) and loading.file_name == DEMO.name
        assert loading.query_one("ProgressBar").progress == 100
        assert "cuda:0" in status_text(app)


async def test_a_loader_thread_reports_without_waiting_and_at_most_every_tenth_second():
    """The loader's reports are posted from its thread (it never waits for a paint), a
    report within 0.1 s of the last one is dropped, and the last (1.0) always shows."""
    import threading

    from textual.app import App

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(LoadingScreen("big.db"))

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, LoadingScreen)

        def loader() -> None:
            screen.report_from_thread(0.25, "reading rows: 1 of 4")
            screen.report_from_thread(0.50, "reading rows: 2 of 4")  # too soon: dropped
            screen.report_from_thread(1.0, "done")

        thread = threading.Thread(target=loader)
        thread.start()
        thread.join(timeout=5)
        assert not thread.is_alive()  # it never waited on the app's loop
        await pilot.pause()
        assert screen.query_one("ProgressBar").progress == 100
        assert str(screen.query_one("#loading-message").render()) == "done"
        shown: list[str] = []
        screen.set_progress = lambda fraction, message: shown.append(message)
        reports = threading.Thread(target=lambda: [
            screen.report_from_thread(i / 400, f"row {i}") for i in range(200)])
        reports.start()
        reports.join(timeout=5)
        await pilot.pause(LoadingScreen.REPORT_EVERY_S * 3)
        assert shown[-1] == "row 199"  # the newest report held back is shown at a tick
        assert len(shown) < 20  # not a paint per report


async def test_a_bad_file_exits_2_with_the_one_line_error(tmp_path):
    bad = tmp_path / "notes.pickle"
    bad.write_text("this is not a pickle\n")
    app = MemtuiApp(bad)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):
            if app.load_error:
                break
            await pilot.pause(0.02)
    assert app.return_code == 2
    assert app.load_error.startswith(str(bad) + ": ")
    assert "\n" not in app.load_error


def test_run_app_on_a_missing_file(tmp_path, capsys):
    assert run_app(tmp_path / "nothing.pickle") == 2
    err = capsys.readouterr().err
    assert err == f"memtui: {tmp_path / 'nothing.pickle'}: no such file or folder\n"


async def test_cursor_keys_move_the_cursor_and_the_status_bar():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.cursor.t == 500 and app.cursor.device == "cuda:0"
        assert "event #0/6" in status_text(app) and "alloc 0 B" in status_text(app)
        await pilot.press("l")
        assert app.cursor.t == 1000
        assert "alloc 100 B" in status_text(app)
        await pilot.press("right", "right")
        assert app.cursor.t == 3000 and "event #3/6" in status_text(app)
        await pilot.press("h")
        assert app.cursor.t == 2000
        await pilot.press("G")
        assert app.cursor.t == 5000 and "alloc 50 B" in status_text(app)
        await pilot.press("g")
        assert app.cursor.t == 500
        await pilot.press("p")
        assert app.cursor.t == 2000 and "alloc 400 B" in status_text(app)
        assert "resv 1.0 KiB" in status_text(app)
        await pilot.press("L")  # a tenth of the view: (5000 - 500) / 10
        assert app.cursor.t == 2450
        await pilot.press("H", "H")
        assert app.cursor.t == 1550


async def test_window_and_zoom():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("l", "left_square_bracket")
        assert app.cursor.window == (1000, 5000)
        await pilot.press("l", "l", "right_square_bracket")
        assert app.cursor.window == (1000, 3000)
        assert "win 2 us" in status_text(app)  # 80 columns: the short form
        await pilot.press("z")
        assert app.cursor.view == (1000, 3000)
        await pilot.press("z")  # no other window inside: zoom in around the cursor
        assert app.cursor.view[1] - app.cursor.view[0] == 1000
        assert app.cursor.view[0] <= app.cursor.t <= app.cursor.view[1]
        await pilot.press("Z", "Z", "Z")
        assert app.cursor.view == (500, 5000)
        await pilot.press("x")
        assert app.cursor.window is None


async def test_the_view_follows_the_cursor_when_zoomed():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.move_cursor(view=(500, 1500), t=1000)
        await pilot.press("l", "l")
        assert app.cursor.t == 3000
        assert app.cursor.view == (2000, 3000)


async def test_mouse_click_drag_and_wheel_on_the_plot():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        plot = app.screen.query_one(TrendPlot)
        x0 = plot.axis_width
        await pilot.click(plot, offset=(x0 + plot.plot_width // 2, 2))
        middle = plot.time_of_column(plot.plot_width // 2)
        assert app.cursor.t == middle and 2600 < middle < 2900
        await pilot.mouse_down(plot, offset=(x0 + 5, 2))
        await pilot._post_mouse_events([events.MouseMove], plot, offset=(x0 + 20, 2), button=1)
        await pilot.mouse_up(plot, offset=(x0 + 20, 2))
        await pilot.pause()
        assert app.cursor.window == (plot.time_of_column(5), plot.time_of_column(20))
        await pilot._post_mouse_events([events.MouseScrollUp], plot, offset=(x0 + 10, 2))
        await pilot.pause()
        width = app.cursor.view[1] - app.cursor.view[0]
        assert width < 4500
        await pilot._post_mouse_events([events.MouseScrollDown], plot, offset=(x0 + 10, 2))
        await pilot._post_mouse_events([events.MouseScrollDown], plot, offset=(x0 + 10, 2))
        await pilot.pause()
        assert app.cursor.view == (500, 5000)


async def test_device_switch():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("p", "d")
        assert isinstance(app.screen, DeviceScreen)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.cursor.device == "cuda:1"
        assert (app.cursor.view, app.cursor.window, app.cursor.block_id) == ((1500, 2500), None,
                                                                            None)
        assert status_text(app).startswith(" cuda:1")
        await pilot.press("d", "escape")
        assert app.cursor.device == "cuda:1"


async def test_help_lists_every_binding():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        sections = dict(app.screen.sections)
        keys = {row[0]: row[1] for row in sections["Everywhere"]}  # (keys, what, binding id)
        for binding in MemtuiApp.BINDINGS:
            assert binding.description in keys.values()
        assert "Stack/owner/role" in {row[1] for row in sections["Trend screen"]}
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_screens_on_keys_and_in_the_palette():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        for key, name in (("2", "blocks"), ("3", "pool"), ("4", "stacks"), ("5", "tables"),
                          ("1", "trend")):
            await pilot.press(key)
            await settle(pilot)
            assert app.current_mode == name
            assert app.screen.query(StatusBar)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Trend screen (1)", "Tables screen (5)", "Go to the peak (p)",
                      "Switch device (d)", "Keys (?)"):
            assert title in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"tables screen")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert app.current_mode == "tables"


async def test_q_quits():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)
    assert not app.is_running


@pytest.mark.slow
@pytest.mark.parametrize("width", by_profile([60, 200], [60, 80, 120, 200]))
async def test_layouts_fit(width):
    """Narrow and wide layouts: the short profile (CI) tries the narrowest and the widest
    width, ``MEMTUI_TEST_PROFILE=long`` two more either side of the 90-column switch."""
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=(width, 24 if width <= 80 else 50)) as pilot:
        await ready(pilot)
        assert app.screen.has_class("-narrow") == (width < 90)
        plot = app.screen.query_one(TrendPlot)
        assert plot.size.height >= 8 and plot.size.width == width
        assert all(len(line) <= width for line in status_lines(app))
        await pilot.press("5")
        await settle(pilot)
        stack = app.screen.query_one("#stack-pane")
        body = app.screen.query_one("#tables-body")
        assert stack.region.right <= width and body.region.bottom <= app.size.height - 2
        if width < 90:
            assert stack.region.y > app.screen.query_one("#tables-main").region.y
        else:
            assert stack.region.x > 0


async def test_event_unit_traces_say_event_numbers():
    app = MemtuiApp(toy_trace(time_unit="event"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("p")
        assert "event #2/6" in status_text(app)  # the position, as everywhere
        assert "+" not in status_text(app).split("│")[1]


async def test_profiler_trend_group_by():
    app = MemtuiApp(profiler_trace())
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = app.screen
        legend = str(screen.query_one("#trend-legend").render())
        assert "Operators Allocated 10 B" in legend and "App Reserved 100 B" in legend
        assert "group: overall" in legend
        await pilot.press("b")
        legend = str(screen.query_one("#trend-legend").render())
        assert "Allocated of stream 7 5 B" in legend and "group: stream" in legend
        await pilot.press("b")
        assert "PTA Operators Reserved" in str(screen.query_one("#trend-legend").render())
        await pilot.press("p")
        assert app.cursor.t == 10
        assert "No blocks" in str(screen.query_one("#live-title").render())


def test_package_data_lists_the_ui():
    """pyproject installs the stylesheet and the screen/widget packages."""
    text = (REPO / "pyproject.toml").read_text()
    assert '"memtui.tui.screens"' in text and '"memtui.tui.widgets"' in text
    assert Path(REPO / "memtui" / "tui" / "memtui.tcss").is_file()


def shared_time_trace() -> MemoryTrace:
    """Four events, the middle two at the same time: allocs of 100 and 200 at t=20, after
    one of 10 at t=10; a free of the 10 at t=30.  Levels after each: 10, 110, 310, 300."""
    events = pl.DataFrame({
        "t": [10, 20, 20, 30], "seq": [0, 1, 2, 3], "device": ["cuda:0"] * 4,
        "action": ["alloc", "alloc", "alloc", "free"], "addr": [0x10, 0x20, 0x30, 0x10],
        "size": [10, 100, 200, 10], "block_id": [0, 1, 2, 0],
        "allocated": [10, 110, 310, 300]})
    blocks = pl.DataFrame({
        "block_id": [0, 1, 2], "device": ["cuda:0"] * 3, "addr": [0x10, 0x20, 0x30],
        "size": [10, 100, 200], "t_alloc": [10, 20, 20], "t_free": [30, None, None],
        "seq_alloc": [0, 1, 2], "seq_free": [3, None, None], "ghost": [False] * 3})
    meta = TraceMeta(source="test", path="shared.pickle", devices=[DeviceInfo("cuda:0")])
    return MemoryTrace(meta=meta, events=conform(events, "events"),
                       blocks=conform(blocks, "blocks"))


async def test_the_cursor_reaches_every_event_sharing_a_timestamp():
    """Defects 3 and 4: l steps one event (not one distinct time), and the status bar
    says the event's position and its exact level."""
    app = MemtuiApp(shared_time_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert (app.cursor.event, app.cursor.t) == (0, 10)
        await pilot.press("l")
        assert (app.cursor.event, app.cursor.t) == (1, 20)
        assert "event #1/4" in status_text(app) and "alloc 110 B" in status_text(app)
        await pilot.press("l")
        assert (app.cursor.event, app.cursor.t) == (2, 20)
        assert "event #2/4" in status_text(app) and "alloc 310 B" in status_text(app)
        live = app.live_blocks("cuda:0")  # the Trend's "Live at" pane, exact too
        assert (live.total(20, event=1), live.total(20, event=2)) == (110, 310)
        await pilot.press("h")
        assert app.cursor.event == 1
        app.move_cursor(t=25)  # a time: the last event at or before it
        assert app.cursor.event == 2
        app.move_cursor(event=3)
        assert app.cursor.t == 30
        app.move_cursor(view=(10, 30))  # neither t nor event: the cursor keeps its event
        assert app.cursor.event == 3


async def test_t_cycles_the_memory_layer_and_every_figure_follows(tmp_path):
    """msMemScope (issue 15, defect 5): the PTA layer by default, t shows HAL; the status
    bar names the layer and its allocated bytes, never the sum of both."""
    from tests.helpers.memscope_files import SCENARIO, write_db

    app = MemtuiApp(write_db(tmp_path / "memscope_dump_1.db", SCENARIO))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.layers == {"npu:0": "PTA"}
        assert "npu:0 PTA" in status_text(app)
        assert set(app.trace.blocks["pool"].to_list()) == {"PTA"}
        await pilot.press("G")
        assert "alloc 256 B" in status_text(app)
        await pilot.press("t")
        await settle(pilot)
        assert app.layers == {"npu:0": "HAL"} and "npu:0 HAL" in status_text(app)
        assert set(app.trace.blocks["pool"].to_list()) == {"HAL"}
        assert "alloc 4.0 KiB" in status_text(app)
        await pilot.press("t")
        await settle(pilot)
        assert app.layers == {"npu:0": "PTA"}
