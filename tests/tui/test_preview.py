"""A long msMemScope read opens on a preview (the rows read so far), then the whole capture.

The thresholds are made small (tests/sources/test_memscope_preview.py does the same), and
the loader is held just after the preview is handed over, so that the test sees the
preview on screen before the rest of the file is read: the status bar says it is one, the
findings wait for the whole capture, and the whole capture then takes its place with the
cursor at its peak (or where the user moved it).
"""

from __future__ import annotations

import threading

import pytest

import memtui.sources.memscope as memscope
from benchmarks.generate_memscope import generate_db
from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.tui.widgets.status import StatusBar
from tests.sources.test_memscope_preview import PREVIEW_ROWS, ROWS, settled, small_chunks


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return settled(generate_db(tmp_path_factory.mktemp("preview_ui") / "memscope_dump_1.db",
                               ROWS, seed=4, trace_rows=0, leak_bytes=1 << 20))


@pytest.fixture
def held_preview(monkeypatch):
    """Small thresholds; the loader waits after the preview until ``release`` is set."""
    small_chunks(monkeypatch)
    monkeypatch.setattr(memscope, "PREVIEW_MIN_ROWS", ROWS - 1)
    monkeypatch.setattr(memscope, "PREVIEW_ROWS", PREVIEW_ROWS)
    release = threading.Event()
    look = memscope._Previewer.__call__

    def held(self, rows_so_far):
        shown = self.shown
        look(self, rows_so_far)
        if self.shown and not shown:
            release.wait(30)

    monkeypatch.setattr(memscope._Previewer, "__call__", held)
    yield release
    release.set()


def _bar(app) -> str:
    return " | ".join(app.screen.query_one(StatusBar).parts())


async def _until(pilot, condition, seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError("waited in vain")


async def test_the_preview_comes_first_then_the_whole_capture_at_its_peak(db, held_preview):
    whole = open_capture(db)
    app = MemtuiApp(db)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: "trend" in app.painted)
        assert app.preview == {"rows": PREVIEW_ROWS, "of": ROWS}
        assert app.trace.events.height < whole.events.height
        assert "PREVIEW: 2.0K of 6.0K rows read" in _bar(app)
        assert not app._findings_started and app.findings is None  # they wait for the whole
        assert app.whole_shown is None
        held_preview.set()
        await _until(pilot, lambda: app.preview is None)
        assert app.trace.events.height == whole.events.height
        assert "PREVIEW" not in _bar(app)
        timeline = app.timeline(app.cursor.device)
        assert app.cursor.event == timeline.peak_event  # opened as a first open opens
        assert app.cursor.view == (timeline.start, timeline.end)
        await _until(pilot, lambda: app.findings is not None)
        assert app._findings_started


async def test_a_cursor_the_user_moved_on_the_preview_keeps_its_time(db, held_preview):
    app = MemtuiApp(db)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: "trend" in app.painted)
        await pilot.press("home")
        await pilot.press("right", "right", "right")
        moved = app.cursor.t
        held_preview.set()
        await _until(pilot, lambda: app.preview is None)
        timeline = app.timeline(app.cursor.device)
        assert app.cursor.event == timeline.event_at(moved)
        assert app.cursor.event != timeline.peak_event


async def test_the_loader_leaves_the_shown_preview_alone_until_it_hands_the_whole_over(
        db, held_preview, monkeypatch):
    """The whole capture's layer view is built in the loader thread while the preview is
    on screen: the app's layered capture (which ``t`` cycles) stays the preview's until
    the UI thread takes the whole one in."""
    built, go = threading.Event(), threading.Event()
    beside = MemtuiApp._beside
    calls = []

    def held(self, trace):
        out = beside(self, trace)
        calls.append(trace)
        if len(calls) == 2:  # the whole capture's, after the preview's
            built.set()
            go.wait(30)
        return out

    monkeypatch.setattr(MemtuiApp, "_beside", held)
    whole = open_capture(db)
    app = MemtuiApp(db)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: "trend" in app.painted)
        preview_full = app.full_trace
        assert preview_full is not None and preview_full.events.height < whole.events.height
        held_preview.set()
        await _until(pilot, built.is_set)
        assert app.full_trace is preview_full and app.preview is not None
        assert app.trace.events.height < whole.events.height
        go.set()
        await _until(pilot, lambda: app.preview is None)
        assert app.full_trace.events.height == whole.events.height
        assert app.trace.meta.extra["layers"] == {"npu:0": "PTA"}
