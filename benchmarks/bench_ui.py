"""How fast the UI opens and answers keys, on generated snapshots of 1M and 10M events.

For each size: the bare read (``pickle.load`` of the file, the baseline), the source's
load (``open_capture``), the time from starting the app to the Trend screen's first full
paint, and for key presses (cursor move, jump, peak, screen switch, sort; on the Blocks,
Pool and Stacks screens cursor moves, selection moves and zooms) the median and 95th
percentile time from the key to the next painted frame.  A sort of millions of rows
runs in a worker: the table says "sorting" in the first frame, and the time until the
sorted rows are painted is reported too.

Issue 11's figures beside them: the time from pressing ``2`` half a second after the first
paint to the painted Blocks map (its index is built in the background from the first
paint on), and, each in fresh processes (imports included, paired medians), the start to
the first paint without the reopen cache and reopened from it, for every size and for a
small real capture (``--small``; goal under 0.5 s reopened).  The run uses its own empty
cache (``XDG_CACHE_HOME``).

The app runs headless (``App.run_test``): a frame counts as painted when Textual hands
the composed update to the driver (the headless driver then skips only the write of the
escape codes).  Ratios are against the bare read measured in the same run.

    python benchmarks/bench_ui.py                  # 1M and 10M events
    python benchmarks/bench_ui.py --events 1000000 --presses 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generate import write_snapshot  # noqa: E402
from memtui.sources import open_capture  # noqa: E402
from memtui.tui.app import MemtuiApp  # noqa: E402
from memtui.tui.widgets.table import VirtualTable  # noqa: E402

VERBOSE = "-v" in sys.argv
REPO = Path(__file__).resolve().parents[1]
SMALL = REPO.parent / "shared" / "data" / "torch_snapshots" / "t26_cs336_kk_ctx512_fullstep.pickle"


def capture(n_events: int, folder: Path) -> Path:
    path = folder / f"bench_ui_{n_events}.pickle"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        write_snapshot(path, n_events=n_events, seed=0)
    return path


def timed(fn) -> float:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    del result
    gc.collect()
    return elapsed


class FrameClock:
    """Records when the app hands a frame to the driver."""

    def __init__(self, app: MemtuiApp) -> None:
        self.frames: list[float] = []
        original = app._display

        def display(screen, renderable):
            original(screen, renderable)
            if renderable is not None:
                self.frames.append(time.perf_counter())

        app._display = display  # type: ignore[method-assign]

    async def next_after(self, t: float, timeout: float = 60.0) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            later = [f for f in self.frames if f > t]
            if later:
                return later[0]
            await asyncio.sleep(0.0005)
        raise TimeoutError("no frame painted")


async def key_latency(pilot, clock: FrameClock, key: str, timeout: float = 60.0) -> float:
    start = time.perf_counter()
    await pilot.press(key)
    return await clock.next_after(start, timeout) - start


async def settle(pilot) -> None:
    await pilot.pause(0.15)


async def run_app(path: Path, size: tuple[int, int], presses: int) -> dict:  # noqa: C901
    results: dict[str, list[float] | float] = {}
    log = print if VERBOSE else (lambda *a, **k: None)
    start = time.perf_counter()
    app = MemtuiApp(path)
    async with app.run_test(size=size) as pilot:
        clock = FrameClock(app)
        while "trend" not in app.painted:
            await asyncio.sleep(0.005)
        results["first_paint"] = app.painted["trend"] - start
        # a user going to the Blocks at once (its index is being built in the background
        # since the first paint): the key is answered when the map is painted
        await pilot.pause(0.5)
        visit = time.perf_counter()
        await pilot.press("2")
        while "blocks" not in app.painted:
            await asyncio.sleep(0.005)
        results["first_visit_blocks"] = app.painted["blocks"] - visit
        await pilot.press("1")
        await settle(pilot)
        for name, keys in (("cursor move (l/h)", ["l", "h"]), ("jump a tenth (L/H)", ["L", "H"]),
                           ("peak / start (p/g)", ["p", "g"])):
            times = []
            for i in range(presses):
                times.append(await key_latency(pilot, clock, keys[i % 2]))
                await pilot.pause(0.02)
            results[name] = times
            log(name, flush=True)
            await settle(pilot)
        times = []
        for i in range(presses):
            times.append(await key_latency(pilot, clock, "5" if i % 2 == 0 else "1"))
            await settle(pilot)
            if i == 0:  # the first visit builds the tables: wait for them
                await wait_tables(app, pilot)
        results["screen switch (5/1)"] = times
        log("screens", flush=True)
        await pilot.press("5")
        await wait_tables(app, pilot)
        await pilot.press("tab")  # the Event View, following the cursor
        await settle(pilot)
        times = []
        for i in range(presses):
            times.append(await key_latency(pilot, clock, "l" if i % 2 == 0 else "h"))
            await pilot.pause(0.02)
        results["Tables: cursor move, events follow"] = times
        await pilot.press("tab")
        await settle(pilot)
        table = app.screen.query_one("#blocks-table", VirtualTable)
        swapped: list[float] = []  # when the sorted rows reach the table
        refresh_rows = table.refresh_rows

        def timed_refresh_rows(*args, **kwargs):
            swapped.append(time.perf_counter())
            return refresh_rows(*args, **kwargs)

        table.refresh_rows = timed_refresh_rows  # type: ignore[method-assign]
        first, done = [], []
        for _ in range(max(presses // 4, 3)):
            table.cursor_column = 1  # Size
            start = time.perf_counter()
            await pilot.press("s")
            first.append(await clock.next_after(start) - start)
            while not swapped or swapped[-1] < start:
                await asyncio.sleep(0.0005)
            done.append(await clock.next_after(swapped[-1]) - start)
            await settle(pilot)
        results["sort blocks by size (s): first frame"] = first
        results["sort blocks by size (s): sorted rows"] = done
        await map_screens(app, pilot, clock, presses, results)
        results["blocks"] = float(app.trace.blocks.height)
    return results


MAP_SCREENS = (("Blocks", "2", "blocks", ("down", "up")), ("Pool", "3", "pool", ("down", "up")),
               ("Stacks", "4", "stacks", ("down", "up")))


async def map_screens(app, pilot, clock: FrameClock, presses: int, results: dict) -> None:
    """Issue 6's screens: a cursor move (l/h), a selection move, and zooms on the Blocks,
    around the peak (where there are blocks and segments to select)."""
    await pilot.press("p")
    await settle(pilot)
    for title, key, name, select in MAP_SCREENS:
        await pilot.press(key)
        while name not in app.painted:  # built in a worker on big traces
            await asyncio.sleep(0.01)
        await settle(pilot)
        for label, keys in (("cursor move (l/h)", ["l", "h"]), ("select (down/up)", select)):
            times = []
            for i in range(presses):
                # a selection at the end of its list does not move: nothing is painted
                with contextlib.suppress(TimeoutError):
                    times.append(await key_latency(pilot, clock, keys[i % 2], timeout=2.0))
                await pilot.pause(0.02)
            results[f"{title}: {label}"] = times or [float("nan")]
            await settle(pilot)
        if name == "blocks":
            times = []
            for i in range(presses):
                times.append(await key_latency(pilot, clock, "z" if i % 2 == 0 else "Z"))
                await pilot.pause(0.02)
            results["Blocks: zoom (z/Z)"] = times
            await settle(pilot)


async def wait_tables(app, pilot) -> None:
    for _ in range(6000):
        tables = app.screen.query(VirtualTable)
        if tables and all(t.model is not None and not t.busy for t in tables):
            return
        await pilot.pause(0.01)


_PAINT = r"""
import time
start = time.perf_counter()
import asyncio, sys
from memtui.tui.app import MemtuiApp
async def main():
    app = MemtuiApp(sys.argv[1])
    async with app.run_test(size=(120, 40)):
        while "trend" not in app.painted:
            await asyncio.sleep(0.002)
        print(app.painted["trend"] - start)
asyncio.run(main())
"""


def process_paint(path: Path, cache: bool) -> float:
    """Seconds from a fresh interpreter's first line to the Trend screen's first paint
    (imports included: what a user waits for), reading the cache or not."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if not cache:
        env["MEMTUI_NO_CACHE"] = "1"
    done = subprocess.run([sys.executable, "-c", _PAINT, str(path)], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def whole_process(path: Path, bare: float, rounds: int = 3) -> None:
    """Paired medians: first paint without the cache, and reopened from the cache."""
    process_paint(path, cache=True)  # the entry this file's reopen reads
    first, reopen = [], []
    for _ in range(rounds):
        first.append(process_paint(path, cache=False))
        reopen.append(process_paint(path, cache=True))
    f, r = statistics.median(first), statistics.median(reopen)
    print(f"  whole process to first paint    {f:7.2f} s   {f / bare:5.2f}x bare (goal 1.0)")
    print(f"  whole process, reopened         {r:7.2f} s   {r / f:5.3f}x first (goal 0.1)")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(round(q * (len(ordered) - 1))), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--folder", default=tempfile.gettempdir())
    parser.add_argument("-v", action="store_true", help="say which part runs")
    parser.add_argument("--small", type=Path, default=SMALL,
                        help="a small real capture: whole-process paint, first and reopened")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    cache_home = tempfile.TemporaryDirectory()  # this run's own reopen cache
    os.environ["XDG_CACHE_HOME"] = cache_home.name
    if args.small is not None and args.small.is_file():
        with open(args.small, "rb") as fh:
            small_bare = timed(lambda: pickle.load(fh))
        print(f"== small real capture {args.small.name} "
              f"({args.small.stat().st_size / 1e6:.1f} MB): pickle.load {small_bare:.3f} s")
        whole_process(args.small, small_bare)
    for n in args.events:
        path = capture(n, Path(args.folder))
        with open(path, "rb") as fh:  # warm the page cache for every reader alike
            while fh.read(1 << 24):
                pass
        bare = timed(lambda p=path: pickle.load(open(p, "rb")))  # noqa: SIM115
        load = timed(lambda p=path: open_capture(p))
        results = asyncio.run(run_app(path, size, args.presses))
        print(f"\n== {n:,} events ({path.stat().st_size / 1e6:.0f} MB, "
              f"{int(results.pop('blocks')):,} blocks), terminal {args.size}")
        first = results.pop("first_paint")
        visit = results.pop("first_visit_blocks")
        print(f"  bare read (pickle.load)        {bare:7.2f} s")
        print(f"  source load (open_capture)     {load:7.2f} s   {load / bare:5.2f}x bare")
        print(f"  start to first full paint      {first:7.2f} s   {first / bare:5.2f}x bare"
              f"   (UI beyond the load: {first - load:+.2f} s)")
        print(f"  Blocks visited 0.5 s after it  {visit:7.2f} s   key to painted map")
        whole_process(path, bare)
        print(f"  {'key to painted frame':34s} {'median':>8s} {'p95':>8s}  (ms)")
        for name, values in results.items():
            ms = [v * 1000 for v in values]
            print(f"  {name:34s} {statistics.median(ms):8.1f} {pct(ms, 0.95):8.1f}")


if __name__ == "__main__":
    main()
