"""Quitting while a screen is being shown never crashes (memtui.tui.textual_fixes).

The findings' arrival switches to the Findings screen by itself; a ``q`` (or the end of a
test) a moment later closes the app while that screen mounts, and its widgets are removed
under it.  Its own ``on_mount`` / ``on_screen_resume`` then found no widgets (NoMatches):
a crash on quitting, seen in CI as a test that failed one run in many.  Here the close comes
at once after the switch, which made every run fail for the Findings and Tables screens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.analysis.findings import find_all
from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.tui.compare_app import CompareApp
from memtui.tui.screens import SCREENS
from tests.helpers.compare_traces import MiB, write_loop

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"


@pytest.fixture(scope="module")
def demo():
    return open_capture(SNAPSHOTS / "demo_oom.pickle")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quit_compare")
    return write_loop(folder / "clean.pickle"), write_loop(folder / "leak.pickle", leak=MiB)


async def _until(pilot, condition) -> None:
    for _ in range(1500):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError("waited in vain")


@pytest.mark.parametrize("name", list(SCREENS))
async def test_a_screen_switched_to_just_before_the_close(demo, name):
    app = MemtuiApp(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: "trend" in app.painted)
        app.switch_mode(name)  # not awaited: the close comes while it mounts
    assert app.return_code in (None, 0)


async def test_the_findings_arriving_just_before_q(demo):
    found = find_all(demo)
    assert any(f.severity == "high" for items in found.values() for f in items)
    app = MemtuiApp(demo, findings_first=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: "trend" in app.painted)
        app._findings_ready(app.trace, found)  # switches to the Findings screen by itself
        assert app.current_mode == "findings"
        app.exit()
    assert app.return_code == 0


@pytest.mark.parametrize("name", ["trend", "diff", "tables"])
async def test_a_compare_screen_switched_to_just_before_the_close(pair, name):
    app = CompareApp(*pair)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: app.trace is not None and app.cursor is not None)
        await pilot.pause()
        app.switch_mode(name)
    assert app.return_code in (None, 0)
