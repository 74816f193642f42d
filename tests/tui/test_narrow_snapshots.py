"""Every screen in a 60x20 side pane keeps its key figures (issue 23 point 5): wrapped or
abbreviated, never dropped.  An SVG snapshot of each screen at that size on the demo as it
opens (the cursor at the answer: point 1), and the figures each must show, read off the
painted text.  Accept deliberate changes with
``pytest tests/tui/test_narrow_snapshots.py --snapshot-update`` after looking at them.
"""

from __future__ import annotations

import re

import pytest

from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.tui.compare_app import CompareApp
from tests.conftest import REPO
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.map_pilot import screen_text
from tests.helpers.toy_traces import ready, settle

NARROW = (60, 20)
DEMO = REPO / "snapshots" / "demo_training.pickle"

#: What each screen must show at 60x20: the figures a person opened it for.
KEY_FIGURES = {
    "1": [r"alloc\s+\d", r"resv\s+\d", r"peak\s+\d", r"△ resv\s+\d"],
    "2": [r"detail\s+[\d,]+/[\d,]+"],
    "3": [r"resv\s+\d", r"alloc\s+\d", r"free\s+\d", r"frag\s+\d", r"\d+% of\s+resv"],
    "4": [r"\d\s+\w?i?B\s+live\s+at", r"[\d,]+\s+blocks\s+\(m\)", r"user\s+frames"],
    "5": [r"[\d,]+ of [\d,]+ rows"],
    "6": [r"\d+ found", r"HIGH leak"],
}


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


def opened_on(key: str):
    """A run_before: the app as it opens (findings in, the cursor at the answer), then the
    screen of ``key``."""

    async def run(pilot):
        await ready(pilot)
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        await settle(pilot)

    return run


@pytest.mark.parametrize("key", list(KEY_FIGURES), ids=lambda k: f"screen{k}")
def test_each_screen_at_60x20(snap_compare, demo, key):
    assert snap_compare(MemtuiApp(demo, open_at_answer=True), terminal_size=NARROW,
                        run_before=opened_on(key))


@pytest.mark.parametrize("key", list(KEY_FIGURES), ids=lambda k: f"screen{k}")
async def test_each_screen_keeps_its_key_figures_at_60x20(demo, key):
    app = MemtuiApp(demo, open_at_answer=True)
    async with app.run_test(size=NARROW) as pilot:
        await opened_on(key)(pilot)
        text = screen_text(app)
        for figure in KEY_FIGURES[key]:
            assert re.search(figure, text), (figure, text)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("narrow_pair")
    return (open_capture(write_loop(folder / "clean.pickle")),
            open_capture(write_loop(folder / "leak.pickle", leak=MiB)))


def test_diff_at_60x20(snap_compare, pair):
    assert snap_compare(CompareApp(*pair), terminal_size=NARROW, run_before=opened_on("7"))


async def test_diff_keeps_its_figures_at_60x20(pair):
    app = CompareApp(*pair)
    async with app.run_test(size=NARROW) as pilot:
        await opened_on("7")(pilot)
        text = screen_text(app)
        for figure in (r"peak \d[^\n]*-> \d", r"end \d[^\n]*-> \d", r"\+4\.0 MiB",
                       r"log_metrics \(train\.py:60\)"):
            assert re.search(figure, text), (figure, text)


@pytest.fixture
def ranks_here(tmp_path, monkeypatch):
    """The eight hand-made ranks of tests/helpers/rank_folders.py, named relative to the
    test's folder (the paths on the screen are then the same on every run)."""
    from tests.helpers.rank_folders import write_ranks

    monkeypatch.chdir(tmp_path)
    write_ranks(tmp_path / "run")
    from pathlib import Path

    from memtui.sources.ranks import discover_ranks

    return discover_ranks([Path("run")])


async def ranks_streamed(pilot):
    for _ in range(500):
        if pilot.app.rank_table.done == 8:
            break
        await pilot.pause(0.02)
    await settle(pilot)


def test_ranks_at_60x20(snap_compare, ranks_here):
    from memtui.tui.ranks_app import RanksApp

    assert snap_compare(RanksApp(ranks_here, how="serial"), terminal_size=NARROW,
                        run_before=ranks_streamed)


async def test_ranks_keeps_its_key_figures_at_60x20(ranks_here):
    from memtui.tui.ranks_app import RanksApp

    app = RanksApp(ranks_here, how="serial")
    async with app.run_test(size=NARROW) as pilot:
        await ranks_streamed(pilot)
        text = screen_text(app)
    # the title's counts, every rank's peak, reserved and end, and the flagged outliers:
    # rank 5 peaks at 40 MiB, rank 6 keeps 16 MiB to the end (hand-made, see the helper)
    assert re.search(r"8/8 ranks\s+8 rows\s+! 2 outliers", text), text
    rows = [line for line in text.splitlines() if re.search(r"cuda:\d", line)]
    assert len(rows) >= 8, text
    assert re.search(r"!\s+5\s+cuda:5\s+40\.0M\s+64\.0M\s+0B", text), text
    assert re.search(r"!\s+6\s+cuda:6\s+16\.0M\s+64\.0M\s+16\.0M", text), text
