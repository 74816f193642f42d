"""No key waits: after the first paint the app builds the Blocks, Pool and Stacks screens'
indexes in the background, and a key pressed on a screen still indexing is held and
replayed once it is ready (never lost).  Big traces take these paths; the tests lower the
threshold (``linked.BACKGROUND_BLOCKS``) so the demo capture does."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

import memtui.tui.screens.blocks as blocks_screen
from memtui.analysis.layout.block_map import bands_at
from memtui.analysis.timeline import live
from memtui.sources import open_capture
from memtui.tui.screens import linked
from tests.helpers.map_pilot import maps_app

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


def cached_keys(trace) -> set:
    entry = live._CACHE.get(id(trace))
    return set(entry[1]) if entry is not None else set()


async def test_indexes_are_built_after_the_first_paint_before_any_visit(demo, monkeypatch):
    monkeypatch.setattr(linked, "BACKGROUND_BLOCKS", 0)
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        device = app.cursor.device
        assert app.current_mode == "trend"
        keys = cached_keys(demo)
        assert {("device_index", device), ("block_map", device), ("block_peaks", device),
                ("addresses", device)} <= keys
        assert any(key[0] == "stack_tree" for key in keys)


async def test_a_key_pressed_while_indexing_is_replayed_when_ready(demo, monkeypatch):
    monkeypatch.setattr(linked, "BACKGROUND_BLOCKS", 0)
    original = blocks_screen.block_analyses
    # the screen's analyses wait while the gate is shut: the keys surely reach it while it
    # indexes, however long they take to arrive on a busy machine (a 0.5 s sleep here did
    # not always outlast them under CI's load)
    gate = threading.Event()
    gate.set()

    def slow_analyses(trace, device):
        time.sleep(0.1)
        gate.wait(30)
        return original(trace, device)

    monkeypatch.setattr(blocks_screen, "block_analyses", slow_analyses)
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        app.move_cursor(t=app.timeline(app.cursor.device).end)
        gate.clear()
        await pilot.press("2", "down")  # down reaches the screen while it is indexing
        screen = app.screen
        assert not screen._ready
        assert "keys held" in str(screen.query_one("#status-line").render())
        gate.set()
        for _ in range(100):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if screen._ready and not screen._held_keys:
                break
            await asyncio.sleep(0.05)
        await pilot.pause()
        assert screen._ready
        # the same as pressing it once the screen was ready: one block down the stack
        rows, _ = bands_at(screen.index, screen.data.rank, app.cursor.t)
        end_block = demo.events.sort("t")["block_id"][-1]
        at = list(rows).index(screen.index.row_of_block(end_block))
        assert app.cursor.block_id == screen.index.block_id[rows[at - 1]]


async def test_a_cached_build_is_shared_by_threads_and_an_error_is_retried():
    trace = open_capture(DEMO)
    calls = []

    def build():
        calls.append(1)
        time.sleep(0.2)
        return len(calls)

    results = await asyncio.gather(*[
        asyncio.to_thread(live.cached, trace, ("test",), build) for _ in range(4)])
    assert results == [1, 1, 1, 1] and len(calls) == 1

    def broken():
        raise ValueError("no")

    with pytest.raises(ValueError):
        live.cached(trace, ("broken",), broken)
    assert live.cached(trace, ("broken",), lambda: 7) == 7
