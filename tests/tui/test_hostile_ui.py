"""The UI never trusts a name from a file and never reports success after a crash
(issue 12, defects 7 and 11)."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from memtui.tui.app import MemtuiApp, crash_line, exit_status
from memtui.tui.screens.modals import DeviceScreen
from tests.helpers.hostile import DEVICE0, DEVICE1, hostile_trace
from tests.helpers.toy_traces import ready, settle, toy_trace

SIZE = (100, 30)


async def test_hostile_device_names_are_listed_as_text_and_can_be_picked():
    app = MemtuiApp(hostile_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DeviceScreen)
        options = app.screen.query_one(OptionList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(2)]
        assert prompts[0].startswith(DEVICE0) and prompts[1].startswith(DEVICE1)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.cursor.device == DEVICE1
        for key in "12345":
            await pilot.press(key)
            await settle(pilot)
        assert app.return_code is None, "a name from the file quit the app"
    assert app.crash is None


async def test_every_screen_shows_hostile_names_without_markup_errors():
    app = MemtuiApp(hostile_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        for key in ["2", "right", "right", "3", "right", "4", "5", "1", "p"]:
            await pilot.press(key)
            await settle(pilot)
        assert app.return_code is None
    assert app.crash is None


async def test_page_down_in_an_option_list_not_laid_out_yet_does_not_crash():
    """The palette's list before its first layout (Ctrl+P then PageDown at once):
    Textual's _move_page read an empty line cache (KeyError: 0)."""
    from textual.app import App

    class OneList(App):
        def compose(self):
            hidden = OptionList("a", "b", "c")
            hidden.display = False
            yield hidden

    app = OneList()
    async with app.run_test(size=(40, 10)):
        options = app.query_one(OptionList)
        options.highlighted = 0
        options.action_page_down()
        options.action_page_up()
        assert options.highlighted == 0


async def test_ctrl_p_then_page_down_right_after_loading_does_not_crash():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p", "pagedown", "pageup", "pagedown")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
    assert app.crash is None and exit_status(app) == 0


async def test_a_crash_exits_1_with_one_line_and_the_traceback_in_a_file(monkeypatch):
    def broken(self):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(MemtuiApp, "action_peak", broken)
    app = MemtuiApp(toy_trace())
    with pytest.raises(RuntimeError):
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press("p")
            await pilot.pause()
    assert exit_status(app) == 1
    line = crash_line(app)
    assert "\n" not in line and "RuntimeError: boom" in line
    assert app.crash_log is not None and "action_peak" not in line
    assert "def broken" in app.crash_log.read_text() or "broken" in app.crash_log.read_text()
    app.crash_log.unlink()


async def test_a_clean_quit_exits_0():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("q")
    assert exit_status(app) == 0
