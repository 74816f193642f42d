"""Every real capture in ../shared/data opens in the UI and answers the keys of a session.

For each file a source reads: open it (through the loading worker), find the peak, move
through time, select a window and zoom, then read, sort and follow the blocks and events
at the cursor, at 80x24 and 120x40.  Files no source reads yet are skipped, saying so.

A slow sweep: the short profile (CI) opens one representative capture of each kind, each at
one of the two sizes in turn; ``MEMTUI_TEST_PROFILE=long`` opens every capture at both
(tests/helpers/run_profile.py).
"""

from __future__ import annotations

import pytest

from memtui.errors import CaptureError
from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.tui.widgets.table import VirtualTable
from tests.conftest import SHARED_DATA, shared_files
from tests.helpers.run_profile import pairwise, real_captures
from tests.helpers.toy_traces import ready, settle, status_text

FILES = real_captures(p for folder in ("torch_snapshots", "msmemscope", "profiler")
                      for p in shared_files(folder) if not p.name.endswith(("-wal", "-shm")))
SIZES = [(80, 24), (120, 40)]
CASES = [pytest.param(path, size, id=f"{path.name}-{size[0]}x{size[1]}")
         for path, size in pairwise(FILES, SIZES)] if FILES else []


def _readable(path):
    try:
        trace = open_capture(path)
    except CaptureError as exc:
        if "not a format memtui reads" in exc.problem:
            pytest.skip(f"no source reads {path.name} yet")
        raise
    if not trace.meta.devices:  # e.g. profiler_info_N.json away from its profiler folder
        pytest.skip(f"{path.name} holds no memory data on its own")


@pytest.mark.skipif(not FILES, reason=f"{SHARED_DATA} is absent: the real captures live "
                    "beside the checkout, not in it")
@pytest.mark.slow
@pytest.mark.parametrize(("path", "size"), CASES)
async def test_a_session_on_a_real_capture(path, size):
    _readable(path)
    app = MemtuiApp(path)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        # a capture with a finding of high severity opens on the Findings screen
        assert app.load_error is None and app.current_mode in ("trend", "findings")
        await pilot.press("1")
        device = app.cursor.device
        timeline = app.timeline(device)
        await pilot.press("p")
        assert app.cursor.t == timeline.peak_t
        assert device in status_text(app)
        await pilot.press("l", "left_square_bracket", "L", "right_square_bracket", "z")
        assert app.cursor.window is not None
        assert app.cursor.view[0] <= app.cursor.t <= app.cursor.view[1]
        await pilot.press("Z", "g", "p")
        await settle(pilot)
        await pilot.press("5")
        await settle(pilot)
        blocks = app.screen.query_one("#blocks-table", VirtualTable)
        assert blocks.row_count == app.trace.device_blocks(device).height
        await pilot.press("right", "s")
        await settle(pilot)
        if blocks.row_count:
            await pilot.press("enter")
            await settle(pilot)
            assert app.cursor.block_id is not None
        await pilot.press("tab")
        await settle(pilot)
        events = app.screen.query_one("#events-table", VirtualTable)
        assert events.row_count == app.trace.device_events(device).height
        if events.row_count:
            assert events.model.time_of(events.cursor_row) <= app.cursor.t
        await pilot.press("1", "G")
        await settle(pilot)
