"""Compare mode with Pilot at 80x24 (and 120x40): ``memtui A B`` on the hand-made pair of
tests/helpers/compare_traces.py (a clean loop, the same loop leaking 1 MiB a step), whose
figures are worked out in tests/analysis/test_compare.py."""

from __future__ import annotations

import pytest

from memtui.analysis.across.compare import steps_of
from memtui.sources import open_capture
from memtui.tui.compare_app import CompareApp, run_compare
from memtui.tui.widgets.curve import TrendPlot
from memtui.tui.widgets.delta import DeltaStrip
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.toy_traces import ready, settle, status_text


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_ui")
    return write_loop(folder / "clean.pickle"), write_loop(folder / "leak.pickle", leak=MiB)


def screen_text(app) -> str:
    """The current screen as painted, one line per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_both_curves_on_one_axis_with_the_delta(pair, size):
    app = CompareApp(*pair)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        assert app.current_mode == "trend" and app.side == "a"
        plot = app.screen.query_one(TrendPlot)
        assert [s.role for s in plot.series] == ["allocated", "line"]
        legend = str(app.screen.query_one("#cmp-legend").render())
        assert "A clean.pickle" in legend and "B leak.pickle" in legend
        assert status_text(app).startswith(" A │ cuda:0")
        # at A's last event B holds the three leaks of the steps before (aligned by step)
        await pilot.press("G")
        await settle(pilot)
        title = str(app.screen.query_one("#cmp-delta-title").render())
        assert "B - A +3.0 MiB here" in title and "aligned by step" in title
        strip = app.screen.query_one(DeltaStrip)
        assert strip.columns()[1] == 3 * MiB  # the view's largest growth
        figures = screen_text(app)
        assert "+4.0" in figures  # allocated at end: 0 B -> 4.0 MiB


async def test_tab_moves_the_one_cursor_to_the_aligned_point_of_b(pair):
    app = CompareApp(*pair)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        a_steps = steps_of(app.traces[0], "cuda:0")
        b_steps = steps_of(app.traces[1], "cuda:0")
        app.move_cursor(t=int(a_steps["t"][2]) + 25_000)  # step 2, both tensors alive
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        assert app.side == "b" and app.trace is app.traces[1]
        # B's step 2 at the same offset (or its last event before it, where the cursor
        # addresses events)
        aligned = int(b_steps["t"][2]) + 25_000
        assert aligned - 10_000 < app.cursor.t <= aligned
        assert status_text(app).startswith(" B │ cuda:0")
        assert "alloc 8.0 MiB" in status_text(app)  # 6 MiB live + 2 leaks
        await pilot.press("tab")
        await settle(pilot)
        assert app.side == "a"
        assert int(a_steps["t"][2]) + 15_000 < app.cursor.t <= int(a_steps["t"][2]) + 25_000
        assert "alloc 6.0 MiB" in status_text(app)


async def test_shift_and_alignment_keys(pair):
    app = CompareApp(*pair)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        pair_now = app.comparison_for("cuda:0")
        assert pair_now.alignment.mode == "step" and len(pair_now.steps) == 4
        await pilot.press("greater_than_sign")
        await settle(pilot)
        shifted = app.comparison_for("cuda:0")
        assert shifted.alignment.shift == 1 and [s["step"] for s in shifted.steps] == [0, 1, 2]
        assert "B shifted +1 steps" in str(app.screen.query_one("#cmp-delta-title").render())
        await pilot.press("less_than_sign")
        await settle(pilot)
        assert app.comparison_for("cuda:0").alignment.shift == 0
        await pilot.press("a")
        await settle(pilot)
        assert app.comparison_for("cuda:0").alignment.mode == "time"
        await pilot.press("a")
        await settle(pilot)
        assert app.comparison_for("cuda:0").alignment.mode == "position"


async def test_diff_enter_selects_the_leak_in_both_runs(pair):
    app = CompareApp(open_capture(pair[0]), open_capture(pair[1]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("7")
        await settle(pilot)
        assert app.current_mode == "diff"
        shot = screen_text(app)
        assert "log_metrics (train.py:60)" in shot and "+4.0 MiB" in shot
        await pilot.press("enter")  # the first row: the leak, at the end, only in B
        for _ in range(50):
            await settle(pilot)
            if app.current_mode == "stacks" and "1 matches" in screen_text(app):
                break
        # A never ran log_metrics: Enter shows B's Stacks, which hold it (issue 23)
        assert app.side == "b" and app.current_mode == "stacks"
        assert app.cursor.t == app.timeline("cuda:0").end
        stacks = app.screen
        assert stacks.stack_tree.label(stacks.tree_view.selected) == "log_metrics  train.py:60"
        assert "4.0 MiB" in screen_text(app)
        await pilot.press("5")  # B's Block table: its four leaked blocks
        await settle(pilot)
        assert app.current_mode == "tables"
        shot = screen_text(app)
        assert "4 of" in shot and "log_metrics" in shot
        await pilot.press("tab")  # run A: nothing behind the row
        await settle(pilot)
        assert app.side == "a" and app.current_mode == "tables"
        assert "0 of" in screen_text(app)
        await pilot.press("7")
        await settle(pilot)
        await pilot.press("tab")  # on the Diff: the status bar says B at once
        await settle(pilot)
        assert app.side == "b" and status_text(app).startswith(" B │")


def test_run_compare_on_a_missing_file(pair, tmp_path, capsys):
    assert run_compare(pair[0], tmp_path / "nothing.pickle") == 2
    assert capsys.readouterr().err == (
        f"memtui: {tmp_path / 'nothing.pickle'}: no such file or folder\n")


async def test_help_lists_the_app_keys_and_the_compare_keys(pair):
    app = CompareApp(open_capture(pair[0]), open_capture(pair[1]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        titles = {title: {row[1]: row[0] for row in rows} for title, rows in app.help_sections()}
        assert "Peak" in titles["Everywhere"] and "Quit" in titles["Everywhere"]
        assert {"Diff", "A/B", "Shift B back", "Shift B on", "Align"} <= set(titles["Compare"])


async def test_a_bad_second_file_ends_with_the_one_line_error(pair, tmp_path):
    bad = tmp_path / "notes.pickle"
    bad.write_text("this is not a pickle\n")
    app = CompareApp(pair[0], bad)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(300):
            if app.load_error:
                break
            await pilot.pause(0.02)
    assert app.return_code == 2
    assert app.load_error.startswith(str(bad) + ": ") and "\n" not in app.load_error


async def test_diff_enter_on_a_row_of_the_other_run_shows_that_run(pair):
    """A row only in B chosen while A is shown: A's Stacks do not hold its frame (a user
    saw "0 of 18 rows" and nothing else), so B is shown, and a note says so."""
    app = CompareApp(open_capture(pair[0]), open_capture(pair[1]))
    notes = []
    app.notify = lambda message, **_: notes.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("7")
        await settle(pilot)
        assert app.side == "a"
        await pilot.press("enter")  # the first row: the leak, at the end, only in B
        for _ in range(50):
            await settle(pilot)
            if app.current_mode == "stacks" and app.side == "b":
                break
        assert app.side == "b" and app.current_mode == "stacks"
        assert "showing B: A has no block behind this row" in notes


async def test_diff_rows_computed_slowly_still_get_the_focus(pair, monkeypatch):
    """The Diff's rows come from a worker: however late they come, the table keeps the
    focus (a loading indicator used to take it, and under load in CI the footer then
    differed), so its keys work and the screen looks as when the rows come at once."""
    import time

    from textual.widgets import DataTable

    from memtui.tui.screens import diff

    fast = CompareApp(open_capture(pair[0]), open_capture(pair[1]))
    async with fast.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("7")
        await settle(pilot)
        quick = screen_text(fast)
    rows_of = diff.diff_rows

    def slow_rows(comparison):
        time.sleep(0.5)
        return rows_of(comparison)

    app = CompareApp(open_capture(pair[0]), open_capture(pair[1]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        monkeypatch.setattr(diff, "diff_rows", slow_rows)
        await pilot.press("7")
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert table.row_count and app.screen.focused is table
        assert screen_text(app) == quick
