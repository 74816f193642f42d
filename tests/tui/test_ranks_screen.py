"""The Ranks screen with Pilot at 80x24: rows streamed in, outliers flagged, sorting,
Enter opens a rank in the other screens, ``d`` switches ranks there, ``r`` comes back.

The folder is the one of tests/helpers/rank_folders.py (eight hand-made ranks: rank 5 peaks at
40 MiB instead of 16 MiB, rank 6 keeps 16 MiB to the end) plus one file that is not a
capture, which is skipped with a warning.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from memtui.sources.ranks import discover_ranks
from memtui.tui.ranks_app import RanksApp
from memtui.tui.screens.modals import DeviceScreen
from memtui.tui.screens.ranks import RanksScreen
from tests.helpers.rank_folders import LEAK_RANK, PEAK_RANK, write_ranks

SIZE = (80, 24)


async def wait_for(pilot, condition, tries: int = 300) -> None:
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError("timed out")


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def first_column(table: DataTable, key: str) -> list[str]:
    return [str(table.get_cell_at((i, table.get_column_index(key))))
            for i in range(table.row_count)]


async def test_ranks_screen(tmp_path: Path):
    folder = write_ranks(tmp_path / "run")
    (folder / "rank8.pickle").write_bytes(b"not a snapshot")
    app = RanksApp(discover_ranks([folder]), how="serial")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.rank_table.done == 9)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RanksScreen) and app.current_mode == "ranks"
        title = text_of(screen, "#ranks-title")
        assert "9/9 ranks" in title and "8 rows" in title and "2 outliers" in title
        assert title.endswith("1 warning")  # not "1 warnings" (issue 23 point 9)
        assert any("rank8.pickle" in w for w in app.rank_table.warnings)
        table = screen.query_one(DataTable)
        assert first_column(table, "rank") == [str(r) for r in range(8)]
        flags = first_column(table, "flag")
        assert [i for i, flag in enumerate(flags) if flag == "!"] == [PEAK_RANK, LEAK_RANK]
        # o: the next outlier, and why it is one
        await pilot.press("o")
        assert table.cursor_row == PEAK_RANK
        assert "peak allocated 40.0 MiB" in text_of(screen, "#ranks-detail")
        await pilot.press("o")
        assert table.cursor_row == LEAK_RANK
        assert "allocated at end 16.0 MiB" in text_of(screen, "#ranks-detail")
        # s twice: by peak allocated, highest first; the highlighted rank stays highlighted
        await pilot.press("s", "s")
        assert screen.sort_key == "peak" and screen.descending
        assert first_column(table, "rank")[0] == str(PEAK_RANK)
        assert first_column(table, "rank")[table.cursor_row] == str(LEAK_RANK)
        # Enter: rank 6 in the Trend screen
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "trend" and app.cursor is not None)
        assert app.trace.meta.path.endswith(f"rank{LEAK_RANK}.pickle")
        assert app.cursor.device == f"cuda:{LEAK_RANK}"
        # d: another rank, from any screen
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "blocks")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DeviceScreen))
        await pilot.press("home", "down", "enter")  # rank 1
        await wait_for(pilot, lambda: app.trace.meta.path.endswith("rank1.pickle")
                       and app.current_mode == "trend" and app.cursor is not None)
        assert app.cursor.device == "cuda:1"
        # the findings are rank 1's own, found again after its first paint
        await wait_for(pilot, lambda: app.findings is not None)
        assert set(app.findings) == {"cuda:1"}
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "blocks")
        assert "cuda:1" in str(app.screen.query_one("StatusBar").render())
        # r: back to the Ranks screen, as it was
        await pilot.press("r")
        assert app.current_mode == "ranks" and app.screen.sort_key == "peak"


async def test_keys_before_a_rank_is_open_say_what_to_do(tmp_path: Path):
    folder = write_ranks(tmp_path / "run", n=3)
    app = RanksApp(discover_ranks([folder]), how="serial")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.rank_table.done == 3)
        await pilot.press("1", "p")
        assert app.current_mode == "ranks"
        assert app.cursor is None


@pytest.mark.skipif(shutil.which("tmux") is None,
                    reason="tmux is not installed: the real-terminal test needs it")
def test_memtui_on_a_folder_in_a_real_terminal(tmp_path: Path):
    """The real command: a process pool under a full-screen UI, Enter, q."""
    from tests.tui.test_tmux import Pane, memtui_command

    folder = write_ranks(tmp_path / "run")
    pane = Pane(f"{memtui_command()} {shlex.quote(str(folder))}")
    try:
        screen = pane.wait_for("8/8 ranks")
        assert "! 2 outliers" in screen
        pane.keys("o")
        pane.wait_for("peak allocated 40.0 MiB is 24.0 MiB above the median")
        pane.keys("Enter")
        pane.wait_for(f"cuda:{PEAK_RANK} │")
        pane.keys("q")
        pane.wait_for("EXIT=0")
    finally:
        pane.close()


async def test_cursor_keys_on_the_ranks_screen_leave_the_hidden_rank_alone(tmp_path: Path):
    """p / z / G on the Ranks screen moved the cursor of the rank open behind it (QA): now
    they say how to see a rank and change nothing."""
    app = RanksApp(discover_ranks([write_ranks(tmp_path / "run", n=2)]), how="serial")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.rank_table.done == 2)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "trend" and app.cursor is not None)
        await pilot.press("G")
        before = app.cursor
        await pilot.press("r")
        await wait_for(pilot, lambda: app.current_mode == "ranks")
        await pilot.press("p", "z", "g", "left_square_bracket")
        await pilot.pause()
        assert app.cursor == before
        assert any("The Ranks screen has no cursor" in n.message for n in app._notifications)
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "trend")
        await pilot.press("p")
        await pilot.pause()
        timeline = app.timeline(app.cursor.device)
        assert timeline.event_of(app.cursor) == timeline.peak_event != timeline.event_of(before)
