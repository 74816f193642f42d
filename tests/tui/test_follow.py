"""``memtui --follow`` in the app (Pilot): a writer thread grows a capture in bursts; within two
polls the screens show the new peak and block count, the cursor follows the end while it is
there (LIVE), stays where the user put it (paused) until ``G``, a truncation is said in the
status bar with the last good view kept, and a partial dump is never shown."""

from __future__ import annotations

import asyncio
import pickle

from memtui.record.recorder import write_atomically
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.tables import TablesScreen
from memtui.units import format_bytes
from tests.helpers.live_captures import (
    BURSTS,
    EXPECTED,
    HEADER,
    DbWriter,
    KiB,
    csv_line,
    grown_snapshot,
)
from tests.helpers.memscope_files import T0, mem
from tests.helpers.toy_traces import settle, status_text

POLL = (0.05, 0.2)


async def polls(pilot, count: int, timeout: float = 60.0) -> None:
    """Wait until the follower has finished ``count`` more polls, then let the screen paint."""
    app = pilot.app
    target = app.follow.state.polls + count
    waited = 0.0
    while app.follow.state.polls < target and waited < timeout:
        await pilot.pause(0.02)
        waited += 0.02
    await settle(pilot)


def legend(app) -> str:
    return str(app.screen.query_one("#trend-legend").render())


def first_burst(tmp_path) -> tuple[DbWriter, MemtuiApp]:
    """An msMemScope DB holding the first burst, and the app following it."""
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    return writer, MemtuiApp(path, follow=True, poll=POLL)


async def tables_after_first_poll(pilot):
    """The Tables screen, once the first poll has come."""
    await polls(pilot, 1)
    await pilot.press("5")
    await settle(pilot)
    return pilot.app.screen



async def test_a_growing_db_shows_each_burst_within_two_polls(tmp_path):
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path)
    app = MemtuiApp(path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        assert app.cursor is None  # nothing to show yet: the loading screen waits
        for burst, (blocks, peak) in zip(BURSTS, EXPECTED, strict=True):
            await asyncio.to_thread(writer.burst, burst)
            await polls(pilot, 2)
            assert app.trace.blocks.height == blocks
            assert f"peak {format_bytes(peak)}" in legend(app)
            assert "● LIVE" in status_text(app)
            assert app.cursor.t == app.timeline(app.cursor.device).end
        # Moved away, the cursor stays put while data comes; G follows again.
        await pilot.press("g")
        start = app.cursor.t
        assert "paused" in status_text(app)
        await asyncio.to_thread(writer.burst, [mem(8, "MALLOC", "PTA", 1600, 5, 0x9000, KiB)])
        await polls(pilot, 2)
        assert app.trace.blocks.height == 5
        assert app.cursor.t == start and "paused" in status_text(app)
        await pilot.press("G")
        assert "● LIVE" in status_text(app)
        assert app.cursor.t == app.timeline(app.cursor.device).end == 1600 + T0
        # The file loses rows: said, and the last good view stays.
        writer.con.execute("DELETE FROM memscope_dump WHERE rowid > 3")
        writer.con.commit()
        await polls(pilot, 2)
        assert "truncated" in status_text(app)
        assert app.trace.blocks.height == 5
        await pilot.press("R")  # read again from the start
        await polls(pilot, 2)
        assert app.trace.blocks.height == 2 and "● LIVE" in status_text(app)
    writer.close()


async def test_other_screens_follow_too(tmp_path):
    writer, app = first_burst(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await tables_after_first_poll(pilot)
        assert isinstance(screen, TablesScreen)
        assert screen.model("blocks").total == 2
        await asyncio.to_thread(writer.burst, BURSTS[1])
        await polls(pilot, 2)
        assert screen.model("blocks").total == 3
        await pilot.press("2")  # the Blocks screen, built on the grown trace
        await settle(pilot)
        assert "● LIVE" in status_text(app)
    writer.close()


async def test_a_sorted_table_keeps_its_order(tmp_path):
    """The Blocks table sorted by size (largest first) stays sorted when the capture grows:
    the new 4 KiB block comes first."""
    writer, app = first_burst(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await tables_after_first_poll(pilot)
        screen._sort("size")
        await settle(pilot)
        model = screen.model("blocks")
        assert (model.sort_key, model.descending) == ("size", True)
        await asyncio.to_thread(writer.burst, BURSTS[1])
        await polls(pilot, 2)
        await settle(pilot)
        model = screen.model("blocks")
        assert model.total == 3
        assert (model.sort_key, model.descending) == ("size", True)
        sizes = model.frame["size"].gather(model.rows).to_list()
        assert sizes == [4 * KiB, 2 * KiB, KiB]
        assert "sort Size ▼" in str(screen.query_one("#tables-header").render())
    writer.close()


async def test_the_layer_view_is_built_in_the_worker(tmp_path, monkeypatch):
    """msMemScope is shown per memory layer: the follower builds each grown trace's layer
    view beside it in its worker, and the UI thread only swaps it in."""
    import threading

    from memtui.analysis.timeline import layers
    from memtui.tui import app as app_module

    threads: list[str] = []
    original = layers.layer_view

    def recording(trace, chosen=None):
        threads.append(threading.current_thread().name)
        return original(trace, chosen)

    monkeypatch.setattr(layers, "layer_view", recording)
    monkeypatch.setattr(app_module, "layer_view", recording)
    writer, app = first_burst(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        for burst in BURSTS[1:]:
            await asyncio.to_thread(writer.burst, burst)
            await polls(pilot, 2)
        assert app.trace.meta.extra["layers"] == {"npu:0": "PTA"}
        assert app.trace.blocks.height == 4
        assert threads and threading.main_thread().name not in threads
    writer.close()


async def test_a_folder_of_ranks_says_which_is_followed(tmp_path):
    for rank, blocks in ((1, 5), (0, 2)):
        write_atomically(tmp_path / f"rank{rank}_7{rank}_1.pickle",
                         pickle.dumps(grown_snapshot(blocks), protocol=4))
    app = MemtuiApp(tmp_path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        assert app.trace.blocks.height == 2  # rank 0's
        assert "● LIVE · rank 0 of 2" in status_text(app)
        said = " ".join(str(n.message) for n in app._notifications)
        assert "following rank 0 of 2 (▶ rank 0, rank 1)" in said and "--rank N" in said
    app = MemtuiApp(tmp_path, follow=True, poll=POLL, follow_rank=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await polls(pilot, 1)
        assert app.trace.blocks.height == 5
        assert "● LIVE · rank 1 of 2" in status_text(app)  # one status bar: its words at every size


async def test_a_long_waiting_message_wraps_at_80_columns(tmp_path):
    folder = tmp_path / ("a_folder_whose_name_is_long_" * 2)
    folder.mkdir()
    app = MemtuiApp(folder, follow=True, poll=POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await polls(pilot, 1)
        message = app.screen.query_one("#loading-message")
        assert "waiting for" in str(message.render()) and message.size.height >= 2
        assert message.size.width <= 80


async def test_rows_not_later_than_the_end_keep_the_cursor_live(tmp_path):
    """A profiler CSV grouped by component: the second burst's rows fall inside the time
    already shown.  The pinned cursor still goes to the new last event (LIVE)."""
    header = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),"
              "Total Active(MB),Stream Ptr,Device Type\n")
    app_rows = "".join(f"APP,{1000 + i}.000\t,,{10 + i}.0,,,NPU:0\n" for i in range(4))
    pta_rows = "".join(f"PTA,{1000 + i}.500\t,{i}.0,{i + 1}.0,{i}.0,7,NPU:0\n"
                       for i in range(3))
    path = tmp_path / "memory_record.csv"
    path.write_text(header + app_rows)
    app = MemtuiApp(path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        end = app.cursor.t
        assert "● LIVE" in status_text(app)
        with open(path, "a") as fh:
            fh.write(pta_rows)
        await polls(pilot, 2)
        timeline = app.timeline(app.cursor.device)
        assert timeline.positions == 7 and app.cursor.t == end
        assert app.cursor.event == 6 and "● LIVE" in status_text(app)


async def test_an_appended_csv(tmp_path):
    path = tmp_path / "memscope_dump_1.csv"
    path.write_text(HEADER + "".join(csv_line(r) for r in BURSTS[0]))
    app = MemtuiApp(path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        assert app.trace.blocks.height == 2
        lines = "".join(csv_line(r) for r in BURSTS[1] + BURSTS[2])
        with open(path, "a") as fh:
            fh.write(lines[:-5])  # the last line half written
        await polls(pilot, 2)
        assert app.trace.blocks.height == 3  # c, not yet d
        with open(path, "a") as fh:
            fh.write(lines[-5:])
        await polls(pilot, 2)
        assert app.trace.blocks.height == 4
        assert f"peak {format_bytes(EXPECTED[2][1])}" in legend(app)


async def test_a_folder_of_dumps_never_shows_a_partial_one(tmp_path):
    tmp_path = tmp_path / "dumps [bold]of run"  # a name that is not markup on screen
    tmp_path.mkdir()
    shown: list[str] = []

    def write_dumps() -> None:
        for blocks in range(1, 6):
            data = pickle.dumps(grown_snapshot(blocks), protocol=4)
            # A careless writer's partial file beside the atomic ones:
            (tmp_path / f"snapshot_{blocks}_partial.pickle").write_bytes(data[: len(data) // 2])
            write_atomically(tmp_path / f"snapshot_{blocks}.pickle", data)

    app = MemtuiApp(tmp_path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        waiting = str(app.screen.query_one("#loading-message").render())
        assert "waiting for a complete snapshot dump" in waiting
        assert "dumps [bold]of run" in waiting
        await asyncio.to_thread(write_dumps)
        for _ in range(4):
            await polls(pilot, 1)
            if app.trace is not None:
                shown.append(app.trace.meta.path)
        await polls(pilot, 2)
        assert app.trace.meta.path.endswith("snapshot_5.pickle")
        assert app.timeline(app.cursor.device).peak == 5 << 20
        assert "● LIVE" in status_text(app)
    assert shown and not [p for p in shown if "partial" in p]


async def test_after_r_on_a_csv_truncated_to_its_header_the_badge_is_not_live(tmp_path):
    path = tmp_path / "memscope_dump_2.csv"
    path.write_text(HEADER + "".join(csv_line(r) for r in BURSTS[0]))
    app = MemtuiApp(path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        assert "LIVE" in status_text(app)
        path.write_text(HEADER)
        await polls(pilot, 2)
        assert "truncated" in status_text(app)
        await pilot.press("R")
        await polls(pilot, 3)
        text = status_text(app)
        assert "LIVE" not in text and "⚠" in text, text


async def test_a_dump_that_never_loads_is_said_on_the_badge(tmp_path):
    import os
    import time

    first = tmp_path / "snapshot_1.pickle"
    write_atomically(first, pickle.dumps(grown_snapshot(2), protocol=4))
    old = time.time_ns() - 100 * 10**9
    os.utime(first, ns=(old, old))
    app = MemtuiApp(tmp_path, follow=True, poll=POLL)
    async with app.run_test(size=(120, 40)) as pilot:
        await polls(pilot, 1)
        assert "LIVE" in status_text(app)
        broken = tmp_path / "snapshot_2.pickle"
        broken.write_bytes(pickle.dumps(grown_snapshot(5), protocol=4)[:-40])
        settled = time.time_ns() - 50 * 10**9
        os.utime(broken, ns=(settled, settled))
        await polls(pilot, 3)
        text = status_text(app)
        assert "LIVE" not in text and "⚠" in text, text
