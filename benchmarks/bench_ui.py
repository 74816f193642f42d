"""Cursor moves on the Blocks, Pool and Stacks screens: time from the move to the
repainted screen, at 10M events, against the same moves on the 30k-event demo.

For each capture it opens the app headless (120x40), shows each screen, moves the cursor
to random events (and pans and zooms the block map), and after each move waits until the
app has handled it and renders the whole screen (every line, not only the changed ones:
an upper bound of a repaint).  It prints the median, 90th percentile and
worst time per screen, the median's ratio to the demo's (the baseline measured in the
same run) and to the 50 ms budget of DESIGN.md section 5.

    python benchmarks/bench_ui.py                       # 10M events (generated)
    python benchmarks/bench_ui.py --events 1000000 --moves 20
    python benchmarks/bench_ui.py --file capture.pickle
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.generate import write_snapshot  # noqa: E402
from memtui.sources import open_capture  # noqa: E402

BUDGET_MS = 50.0
SCREENS = ("blocks", "pool", "stacks")


def make_app(trace):
    """The app on ``trace`` (the stand-in with the shell's contract: see tests/ui2_app.py)."""
    from tests.ui2_app import StandInApp

    return StandInApp(trace, "blocks")


async def _settle_and_paint(app, pilot) -> None:
    """Wait until the screen has handled what the move queued (twice: a handler may move
    the cursor again), then render every line of the screen.

    ``Pilot.pause`` sleeps until the process looks idle, which measures its own sleeps;
    ``Pilot._wait_for_screen`` returns as soon as the queued messages are handled.
    """
    await pilot._wait_for_screen()
    await pilot._wait_for_screen()
    app.screen._compositor.render_full_update()


async def measure(trace, moves: int, seed: int = 0) -> dict[str, list[float]]:
    """Milliseconds per cursor move on each screen (and per zoom on the block map)."""
    rng = random.Random(seed)
    times = trace.events["t"].to_list() if trace.events.height < 200_000 else \
        trace.events["t"].gather_every(max(trace.events.height // 200_000, 1)).to_list()
    app = make_app(trace)
    results: dict[str, list[float]] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        for screen in SCREENS:
            await pilot.press({"blocks": "2", "pool": "3", "stacks": "4"}[screen])
            await pilot.pause()
            await app.workers.wait_for_complete()
            await _settle_and_paint(app, pilot)  # the first showing is not a cursor move
            samples = []
            for _ in range(moves):
                t = rng.choice(times)
                start = time.perf_counter()
                app.move_cursor(t=t)
                await _settle_and_paint(app, pilot)
                samples.append((time.perf_counter() - start) * 1e3)
            results[screen] = samples
        await pilot.press("2")
        await _settle_and_paint(app, pilot)
        t0, t1 = app.cursor.view
        samples = []
        for k in range(moves):
            span = (t1 - t0) // (2 + k % 5)
            a = t0 + rng.randrange(max(t1 - t0 - span, 1))
            start = time.perf_counter()
            app.move_cursor(view=(a, a + span), t=a + span // 2)
            await _settle_and_paint(app, pilot)
            samples.append((time.perf_counter() - start) * 1e3)
        results["blocks zoom"] = samples
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--file", type=Path, help="a capture to use instead of generating")
    args = parser.parse_args()
    baseline = asyncio.run(measure(open_capture(REPO / "snapshots" / "demo_training.pickle"),
                                   args.moves))
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or write_snapshot(Path(tmp) / "bench.pickle", args.events)
        start = time.perf_counter()
        trace = open_capture(path)
        print(f"{path.name}: {trace.events.height:,} events, {trace.blocks.height:,} blocks "
              f"(opened in {time.perf_counter() - start:.1f} s)", flush=True)
        results = asyncio.run(measure(trace, args.moves))
    print(f"{'screen':<12} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} "
          f"{'demo ms':>8} {'x demo':>7} {'x budget':>9}")
    for screen, samples in results.items():
        ordered = sorted(samples)
        median = statistics.median(ordered)
        base = statistics.median(baseline[screen])
        print(f"{screen:<12} {median:>10.1f} {ordered[int(0.9 * (len(ordered) - 1))]:>8.1f} "
              f"{ordered[-1]:>8.1f} {base:>8.1f} {median / base:>7.2f} "
              f"{median / BUDGET_MS:>9.2f}")


if __name__ == "__main__":
    main()
