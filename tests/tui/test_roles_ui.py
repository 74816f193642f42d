"""Memory by role in the UI (issue 32), with Pilot at 80x24 and 120x40: the Trend's ``o``
also by role (the roles stacked, the legend naming them, the live table summing to the
level), ``r`` on Stacks and Blocks (one role's blocks), the Tables' Role column, and the
roles in the help."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtui.analysis.roles import ROLE_LABELS, ROLE_SHORT, by_role_at
from memtui.sources.torch_snapshot import load
from memtui.tui.widgets.curve import STACK0
from tests.helpers.map_pilot import maps_app, open_screen, screen_text
from tests.helpers.run_profile import sizes

CAPTURE = Path(__file__).resolve().parents[2] / "tests" / "data" / "cuda_roles_handopt.pickle"
SIZES = [(80, 24), (120, 40)]


async def _settled(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_trend_groups_by_role(size):
    """``o`` twice: by role.  The plot stacks one layer per role in its own colour, the
    legend names each role with its bytes at the cursor, the live table's rows are the
    roles and sum to the level; ``o`` once more: by stack again, the curves as before."""
    trace = load(CAPTURE)
    app = maps_app(trace)
    async with app.run_test(size=size) as pilot:
        await _settled(pilot)
        app.action_peak()
        await _settled(pilot)
        screen = app.screen
        await pilot.press("o", "o")
        await _settled(pilot)
        await pilot.pause()
        assert screen.live_by == "role"
        layers = [s for s in screen._series if s.role == "stack"]
        assert [s.label for s in layers] == [ROLE_LABELS[r] for r in (
            "parameter", "gradient", "optimizer_state", "activation", "temporary", "input",
            "cache")]
        assert len({s.colour for s in layers}) == len(layers)
        plot = screen.query_one("TrendPlot")
        styles = plot.grid().styles
        assert len(np.unique(styles[styles >= STACK0])) >= 4  # layers drawn, each a colour
        text = screen_text(app)
        names = ROLE_SHORT if size[0] < 90 else ROLE_LABELS  # the legend's narrow names
        for role in ("parameter", "optimizer_state", "cache"):
            assert names[role] in text
        assert "by role" in text
        roles = by_role_at(trace, "cuda:0", app.timeline("cuda:0").event_of(app.cursor))
        shown = screen._live_shown
        assert shown[2] == "role" and sum(roles.values()) == shown[-1]
        assert int(shown[4][0]["bytes"].sum()) == shown[-1]  # the rows sum to the level
        await pilot.press("o")
        await _settled(pilot)
        assert screen.live_by == "stack"
        assert [s.role for s in screen._series][0] == "allocated"


@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_stacks_and_blocks_by_role(size):
    """``R`` on Stacks counts only the parameters (64 MiB at the peak), then the next role;
    on Blocks it draws only one role's blocks."""
    trace = load(CAPTURE)
    app = maps_app(trace)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "stacks", at_end=False)
        app.action_peak()
        await _settled(pilot)
        await pilot.press("R")
        await _settled(pilot)
        screen = app.screen
        assert screen.role == "parameter"
        assert screen.tree_view.figures.total == 67141632
        assert "role parameters" in screen_text(app)
        await pilot.press("R")
        await _settled(pilot)
        assert screen.role == "gradient"
        await open_screen(pilot, "blocks", at_end=False)
        await pilot.press("R")
        await _settled(pilot)
        await pilot.pause()
        blocks = app.screen
        assert blocks.role == "parameter"
        assert blocks.index.block_id.size == 8  # the model's 4 weights and 4 biases
        assert "Blocks of role parameters" in screen_text(app)


async def test_tables_role_column_and_help():
    """The Block View has a Role column whose words the filter matches; ``?`` lists the
    roles."""
    trace = load(CAPTURE)
    app = maps_app(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "tables", at_end=False)
        await _settled(pilot)
        model = app.screen.model("blocks")
        assert "role" in [c.key for c in model.columns]
        assert set(model.frame["role"].unique().to_list()) >= {"parameter", "gradient",
                                                                "optimizer_state"}
        assert "Role" in screen_text(app)
        await pilot.press("1")
        await _settled(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        sections = dict(app.screen.sections)
        assert {row[0] for row in sections["Memory by role"]} >= {"optimizer_state", "other"}
        assert "Stack/owner/role" in {row[1] for row in sections["Trend screen"]}


def test_stacked_columns_read_where_the_total_peaks():
    """Each column reads the layers where their sum is highest in it (so the stack's top
    is the allocated curve's maximum there, as min-max binning takes it: the level
    entering a column counts), just before its start where that entering level is the
    highest."""
    from memtui.analysis.timeline.levels import Level
    from memtui.tui.widgets.curve import _column_times, _values_at

    total = Level(np.array([0, 10, 20, 25, 40]), np.array([5, 50, 10, 30, 0]))
    times = _column_times(total, 0, 39, 4)  # columns [0,10) [10,20) [20,30) [30,40)
    assert times.tolist() == [0, 10, 19, 29]
    assert _values_at(total, times).tolist() == [5, 50, 50, 30]
    from memtui.analysis.timeline.downsample import minmax_bins

    assert minmax_bins(total.t, total.values, 0, 39, 4).hi.tolist() == [5, 50, 50, 30]
