"""``memtui --follow`` in the app: how long each update blocks the UI thread.

Writes a synthetic msMemScope DB (``generate_memscope.py``), copies its first half into a
live DB, runs the app headless (``App.run_test``) following it, and appends ``--bursts``
bursts of ``--new`` rows.  For each update it times, on the UI thread:

* ``show``: ``app.show_followed`` (the new trace swapped in: the screens' caches dropped or
  extended, the cursor moved to the new end);
* ``lag``: the longest the event loop did not answer a 5 ms timer during the update and the
  screen's repaint after it (what a key press would wait).

The baseline is the same app's first open of the capture so far (``first``: loading
screen to first paint, in the same run).  Medians over the bursts are printed.

    python benchmarks/bench_follow_ui.py --rows 1000000 --new 20000
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class _Lag:
    """The event loop's longest late wake-up while it runs."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task | None = None

    async def _probe(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - start - 0.005)

    def start(self) -> None:
        self.worst = 0.0
        self._task = asyncio.get_running_loop().create_task(self._probe())

    def stop(self) -> float:
        self._task.cancel()
        return self.worst


async def _run(live: Path, full: Path, cut: int, new: int, bursts: int,
               screen: str) -> dict:
    from memtui.tui.app import MemtuiApp

    app = MemtuiApp(live, follow=True, poll=(0.1, 0.5))
    shows: list[float] = []
    original = app.show_followed

    def timed(*args, **kwargs):
        start = time.perf_counter()
        original(*args, **kwargs)
        shows.append(time.perf_counter() - start)

    app.show_followed = timed
    lags = []
    con = sqlite3.connect(live)
    con.execute(f"ATTACH '{full}' AS src")
    async with app.run_test(size=(120, 40)) as pilot:
        start = time.perf_counter()
        while app.cursor is None:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        first = time.perf_counter() - start
        await pilot.press(screen)
        await pilot.pause(1.0)
        lag = _Lag()
        for index in range(bursts):
            updates = app.follow.state.updates
            low = cut + index * new
            con.execute("INSERT INTO memscope_dump SELECT * FROM src.memscope_dump "
                        "WHERE rowid > ? AND rowid <= ?", (low, low + new))
            con.commit()
            while app.follow.state.updates == updates:
                await pilot.pause(0.02)
            lag.start()
            await pilot.pause(0.3)  # the repaint and the screens' follow-up work
            lags.append(lag.stop())
        events = app.trace.events.height
    con.close()
    return {"first": first, "show": statistics.median(shows[1:]),
            "lag": statistics.median(lags), "events": events}


def main() -> None:
    from benchmarks.generate_memscope import generate_db

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--new", type=int, default=20_000)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--screen", default="1", help="the screen key shown (1: Trend)")
    parser.add_argument("--source", type=Path,
                        help="a DB generate_memscope.py wrote before (instead of --rows)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        full = args.source or generate_db(Path(tmp) / "memscope_dump_full.db", args.rows,
                                          trace_rows=0)
        live = Path(tmp) / "memscope_dump_live.db"
        con = sqlite3.connect(live)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"ATTACH '{full}' AS src")
        total = con.execute("SELECT max(rowid) FROM src.memscope_dump").fetchone()[0]
        cut = total // 2
        con.execute("CREATE TABLE memscope_dump AS SELECT * FROM src.memscope_dump WHERE 0")
        con.execute("INSERT INTO memscope_dump SELECT * FROM src.memscope_dump "
                    "WHERE rowid <= ?", (cut,))
        con.commit()
        con.close()
        m = asyncio.run(_run(live, full, cut, args.new, args.bursts, args.screen))
    print(f"{m['events']:,} events at the end, bursts of {args.new:,} rows, screen {args.screen}")
    print(f"  first open (baseline) {m['first'] * 1000:8.1f} ms")
    for name in ("show", "lag"):
        print(f"  {name:<21} {m[name] * 1000:8.1f} ms   {m[name] / m['first']:6.3f}x first open")


if __name__ == "__main__":
    main()
