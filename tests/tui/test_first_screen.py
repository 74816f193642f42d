"""The first screen answers (issue 23 point 1, 6): a capture opens with the cursor at its
top finding's evidence (the OOM, the leak), else at the peak, and the status bar says so;
a reopen hands the findings back from the cache instead of finding them again.

The grid of captures and sizes is covered pairwise in the short profile (CI): each capture
at one size, every size met; ``MEMTUI_TEST_PROFILE=long`` runs every capture at every size."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import memtui.analysis.findings as findings_package
from memtui import cache
from memtui.analysis.findings import find_all
from memtui.sources import open_capture
from memtui.tui.answer import top_finding
from memtui.tui.app import MemtuiApp
from tests.helpers.map_pilot import screen_text
from tests.helpers.run_profile import pairwise
from tests.helpers.toy_traces import answered, settle, status_text

REPO = Path(__file__).resolve().parents[2]
SIZES = [(120, 40), (80, 24), (60, 20)]


TOP_FINDINGS = [
    ("snapshots/demo_training.pickle", "leak"),
    ("snapshots/demo_oom.pickle", "oom"),
    ("tests/data/cuda_train_leak.pickle", "leak"),
    ("tests/data/cuda_oom_fragmented.pickle", "oom"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind", "size"), [
    pytest.param(name, kind, size, id=f"{name}-{kind}-{size[0]}x{size[1]}")
    for (name, kind), size in pairwise(TOP_FINDINGS, SIZES)])
async def test_a_capture_opens_at_its_top_finding(name, kind, size):
    path = REPO / name
    top = top_finding(find_all(open_capture(path)), "cuda:0")
    assert top.kind == kind
    app = MemtuiApp(path)  # as `memtui PATH` opens it
    async with app.run_test(size=size) as pilot:
        await answered(pilot)
        assert app.cursor.event == top.evidence.event
        if top.evidence.block_ids:
            assert app.cursor.block_id == top.evidence.block_ids[0]
        assert f"at {kind}" in status_text(app)
        await pilot.press("1")  # the Trend behind the Findings screen: the answer, not t=0
        await settle(pilot)
        text = screen_text(app)
        assert "Live at +0.000000 s: 0 blocks" not in text
        assert f"at {kind}" in text


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_without_an_oom_or_a_leak_it_opens_at_the_peak(size):
    path = REPO / "tests/data/cuda_graph_pool.pickle"
    app = MemtuiApp(path)
    async with app.run_test(size=size) as pilot:
        await answered(pilot)
        timeline = app.timeline(app.cursor.device)
        assert app.cursor.event == timeline.peak_event
        assert "at peak" in status_text(app)
        await pilot.press("right")  # moved away: the note goes
        await settle(pilot)
        assert "at peak" not in status_text(app)


async def test_the_t26_peak_opens_named_by_its_autograd_node():
    from tests.conftest import require_shared

    path = require_shared("torch_snapshots") / "t26_cs336_kk_ctx512_fullstep.pickle"
    app = MemtuiApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await answered(pilot)
        assert app.cursor.event == app.timeline(app.cursor.device).peak_event
        await pilot.press("1")
        await settle(pilot)
        text = screen_text(app)
        assert "BmmBackward0 (autograd)" in text
        for bad in ("at::meta", "c10::cuda", "unwind"):
            assert bad not in text


async def test_a_cursor_the_user_moved_is_left_where_it_is(monkeypatch):
    gate = threading.Event()
    real = findings_package.find_all

    def slow(trace):
        gate.wait(10)
        return real(trace)

    monkeypatch.setattr(findings_package, "find_all", slow)
    app = MemtuiApp(REPO / "snapshots/demo_training.pickle")
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(1500):
            if app.cursor is not None and "trend" in app.painted:
                break
            await pilot.pause(0.02)
        await pilot.press("g")  # the user goes to the start before the findings are in
        await pilot.pause()
        gate.set()
        await answered(pilot)
        assert app.cursor.event == 0


async def test_a_reopen_takes_the_kept_findings(monkeypatch):
    path = REPO / "snapshots/demo_training.pickle"
    calls = []
    real = findings_package.find_all

    def counting(trace):
        calls.append(time.perf_counter())
        return real(trace)

    monkeypatch.setattr(findings_package, "find_all", counting)
    for _ in range(2):
        app = MemtuiApp(path)
        async with app.run_test(size=(80, 24)) as pilot:
            await answered(pilot)
            assert app.findings and app.cursor.event is not None
        cache.wait_for_stores()
    assert len(calls) == 1  # the second open found nothing again
