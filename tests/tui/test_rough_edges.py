"""The rough edges a new user hit (issue 17), each pinned at 80x24 and 120x40 with Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.sources import open_capture
from tests.helpers.map_pilot import maps_app, open_screen, screen_text

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", ["blocks", "pool", "stacks"])
async def test_search_box_shows_what_is_typed(demo, size, name):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, name)
        await pilot.press("slash")
        await pilot.press(*"0x7f")
        await pilot.pause()
        box = app.screen.query_one("#search")
        assert box.has_focus
        assert box.content_region.height == 1
        assert "0x7f" in screen_text(app)


def alive_rows(trace, device: str, t: int) -> int:
    blocks = trace.device_blocks(device)
    t_free = blocks["t_free"].fill_null(2**62)
    return int(((blocks["t_alloc"] <= t) & (t_free > t)).sum())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_tables_alive_at_the_cursor_follows_the_cursor(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "tables", at_end=False)
        app.action_peak()
        await pilot.press("w")  # no window: "all" goes to "alive at the cursor"
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        device, peak_t = app.cursor.device, app.cursor.t
        assert screen.model("blocks").rows.size == alive_rows(demo, device, peak_t)
        # the toast names the keys: [ and ] are not eaten as markup
        toasts = [n for n in app._notifications if "[ and ]" in n.message]
        assert toasts and not toasts[0].markup
        await pilot.press("1")
        app.move_cursor(t=app.timeline(device).start + 1)
        await pilot.press("5")
        await app.workers.wait_for_complete()
        await pilot.pause()
        t = app.cursor.t
        assert t != peak_t
        model = screen.model("blocks")
        assert model.rows.size == alive_rows(demo, device, t)
        codes = model.state_codes(model.rows, t)
        assert not (codes == 0).any()  # no "not yet" row among those alive
        header = str(screen.query_one("#tables-header").render())
        assert f"{model.rows.size:,} of" in header and "alive at" in header


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_pool_arrows_move_the_segment_as_help_says(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "pool")
        screen = app.screen
        segments = [int(s) for s in screen.state.seg_id]
        assert len(segments) > 2
        await pilot.press(*["pageup"] * (len(segments) // 10 + 1))
        await pilot.pause()
        at = 0
        assert app.cursor.segment_id == segments[at]
        await pilot.press("down")
        await pilot.pause()
        assert app.cursor.segment_id == segments[at + 1]
        await pilot.press("j")
        await pilot.pause()
        assert app.cursor.segment_id == segments[at + 2]
        await pilot.press("up")
        await pilot.pause()
        assert app.cursor.segment_id == segments[at + 1]
        await pilot.press("question_mark")
        await pilot.pause()
        rows = dict(row for _, section in app.screen.sections for row in section)
        assert rows["↑, k"] == "Segment up" and rows["↓, j"] == "Segment down"
        assert not any("(" in what for what in rows.values())  # no raw action names


async def test_help_says_clicks_work_on_every_map(demo):
    app = maps_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "blocks")
        await pilot.press("question_mark")
        await pilot.pause()
        app.screen.query_one("#help-box").scroll_end(animate=False, immediate=True)
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        assert "Blocks: select the band" in text and "Pool: select the block" in text


async def test_palette_screenshot_goes_to_the_pictures_folder_and_says_where(
        demo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_PICTURES_DIR", str(tmp_path))
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert sum(title.startswith("Keys") for title in titles) == 1
        assert titles.count("Screenshot") == 1
        saved = app.deliver_screenshot()
        assert saved is not None and Path(saved).parent == tmp_path
        assert Path(saved).read_text().startswith("<svg")
        await pilot.pause()
        assert any(saved in n.message for n in app._notifications)


async def test_screenshot_falls_back_to_the_current_folder(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_PICTURES_DIR", str(tmp_path / "absent"))
    monkeypatch.chdir(tmp_path)
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        saved = app.deliver_screenshot()
        assert Path(saved).parent == tmp_path


@pytest.mark.parametrize("width", [60, 80])
@pytest.mark.parametrize("name", ["trend", "blocks", "tables"])
async def test_footer_keys_never_run_into_the_palette_label(demo, width, name):
    app = maps_app(demo)
    async with app.run_test(size=(width, 24)) as pilot:
        await open_screen(pilot, name)
        last = screen_text(app).splitlines()[-1]
        assert last.rstrip().endswith("▏^p palette")
