"""One failing worker per screen that had its own error path (issue 17, "one place for
background errors"): the Findings, the Ranks and compare mode's Diff.  Each goes through
the app's one handler (``report_worker``): one error toast saying what failed and why, the
app keeps running, and the screen says so instead of waiting for ever."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from memtui.sources import open_capture
from tests.helpers.map_pilot import maps_app, screen_text
from tests.helpers.toy_traces import ready, settle

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"


def boom(*_args, **_kwargs):
    raise RuntimeError("boom")


def error_toasts(app) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_findings_worker_failure_is_said_on_the_findings_screen(monkeypatch):
    import memtui.analysis.findings as findings

    monkeypatch.setattr(findings, "find_all", boom)
    app = maps_app(open_capture(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("6")
        await settle(pilot)
        assert app.return_code is None
        assert any(m.startswith("the findings failed: RuntimeError: boom")
                   for m in error_toasts(app))
        assert app.findings_error == "RuntimeError: boom"
        title = str(app.screen.query_one("#findings-title", Static).render())
        assert "could not be found: RuntimeError: boom" in title
        assert "Nothing to report" not in screen_text(app)  # not "no leak" when none looked


async def test_ranks_stream_failure_stops_loading_and_says_why(monkeypatch, tmp_path):
    import memtui.tui.ranks_app as ranks_app
    from memtui.sources.ranks import discover_ranks
    from tests.helpers.rank_folders import write_ranks

    monkeypatch.setattr(ranks_app, "stream_results", boom)
    app = ranks_app.RanksApp(discover_ranks([write_ranks(tmp_path / "run", n=2)]),
                             how="serial")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.return_code is None
        assert any(m.startswith("reading the ranks failed: RuntimeError: boom")
                   for m in error_toasts(app))
        title = str(app.screen.query_one("#ranks-title", Static).render())
        assert "stopped: RuntimeError: boom" in title and "loading" not in title


async def test_ranks_open_failure_leaves_the_loading_screen(monkeypatch, tmp_path):
    import memtui.loading
    import memtui.tui.ranks_app as ranks_app
    from memtui.sources.ranks import discover_ranks
    from memtui.tui.screens.modals import LoadingScreen
    from memtui.tui.screens.ranks import RanksScreen
    from tests.helpers.rank_folders import write_ranks

    app = ranks_app.RanksApp(discover_ranks([write_ranks(tmp_path / "run", n=2)]),
                             how="serial")
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(300):
            if app.rank_table.done == 2:
                break
            await pilot.pause(0.02)
        monkeypatch.setattr(memtui.loading, "load_trace", boom)
        await pilot.press("enter")
        await settle(pilot)
        assert app.return_code is None
        assert any(m.startswith("opening the rank failed: RuntimeError: boom")
                   for m in error_toasts(app))
        assert isinstance(app.screen, RanksScreen)
        assert not any(isinstance(s, LoadingScreen) for s in app.screen_stack)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from tests.helpers.compare_traces import MiB, write_loop

    folder = tmp_path_factory.mktemp("failing_diff")
    return (open_capture(write_loop(folder / "clean.pickle")),
            open_capture(write_loop(folder / "leak.pickle", leak=MiB)))


async def test_diff_worker_failure_is_said_on_the_diff_screen(monkeypatch, pair):
    from memtui.tui.compare_app import CompareApp
    from memtui.tui.screens import diff

    monkeypatch.setattr(diff, "diff_rows", boom)
    app = CompareApp(*pair)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("7")
        await settle(pilot)
        assert app.current_mode == "diff" and app.return_code is None
        assert any(m.startswith("the differences failed: RuntimeError: boom")
                   for m in error_toasts(app))
        header = str(app.screen.query_one("#diff-header", Static).render())
        assert "the differences failed: RuntimeError: boom" in header
        table = app.screen.query_one(DataTable)
        assert not table.loading and table.row_count == 0
