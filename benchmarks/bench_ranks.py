"""Many-ranks benchmark: one process vs the process pool vs a 2-worker Dask LocalCluster.

Writes a folder of generated ranks (``benchmarks/generate.py`` snapshots, one seed per
rank; the last rank runs a larger peak batch, so that the Ranks screen has an outlier to
name), then, in one run, times :func:`memtui.rankload.stream_results` over them:

* ``serial``: every rank in this process, one after the other (the baseline);
* ``pool``: a process pool sized to the cores;
* ``dask``: a ``LocalCluster`` of 2 single-threaded worker processes (the cluster extra;
  skipped where dask is absent), cluster start-up included.

For each it prints the time to the first rank's rows and to all of them, and the ratios
against ``serial``.  Then it opens the Ranks screen headless (Textual's ``run_test``) on
the pool and prints the time from start to the first row on the screen.  The reopen
cache is off (``--no-cache``): every mode reads the files themselves.  The machines are
shared and noisy: read the ratios.

    python benchmarks/bench_ranks.py             # 32 ranks of 200k events
    python benchmarks/bench_ranks.py --small     # 8 ranks of 20k events (a quick look)
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.generate import make_snapshot  # noqa: E402
from memtui import cache  # noqa: E402
from memtui.rankload import cores, dask_available, prepare_processes, stream_results  # noqa: E402
from memtui.sources.ranks import discover_ranks  # noqa: E402


def write_ranks(folder: Path, ranks: int, events: int) -> Path:
    """``folder/rank{N}.pickle`` for every rank (kept between runs: same sizes, same files)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        path = folder / f"rank{rank}.pickle"
        if path.is_file():
            continue
        peak_batch = 5 if rank == ranks - 1 else 3
        with open(path, "wb") as handle:
            pickle.dump(make_snapshot(events, seed=rank, peak_batch=peak_batch), handle,
                        protocol=4)
    return folder


def time_stream(captures, **how) -> tuple[float, float, int]:
    """(seconds to the first result, seconds to all, rows)."""
    start = time.perf_counter()
    first = None
    rows = 0
    for result in stream_results(captures, **how):
        first = first if first is not None else time.perf_counter() - start
        rows += len(result.rows)
    return first or 0.0, time.perf_counter() - start, rows


async def _first_row_on_screen(discovery) -> float:
    from textual.widgets import DataTable

    from memtui.tui.ranks_app import RanksApp

    start = time.perf_counter()
    app = RanksApp(discovery)
    async with app.run_test(size=(120, 40)) as pilot:
        while True:
            screen = app.screen
            tables = screen.query(DataTable) if screen is not None else []
            if tables and tables.first().row_count > 0:
                return time.perf_counter() - start
            await pilot.pause(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--small", action="store_true", help="8 ranks of 20k events")
    parser.add_argument("--folder", help="where the ranks are written (kept for reruns)")
    args = parser.parse_args()
    if args.small:
        args.ranks, args.events = 8, 20_000
    base = Path(args.folder) if args.folder else Path(tempfile.gettempdir())
    folder = base / f"memtui_bench_ranks_{args.ranks}x{args.events}"
    started = time.perf_counter()
    write_ranks(folder, args.ranks, args.events)
    print(f"{args.ranks} ranks of {args.events:,} events in {folder} "
          f"(written in {time.perf_counter() - started:.1f} s); {cores()} cores")
    captures = discover_ranks([folder]).captures
    cache.disable()  # every mode reads the files (the workers inherit the setting)
    prepare_processes()
    results = {"serial": time_stream(captures, how="serial"),
               "pool": time_stream(captures, how="pool")}
    if dask_available():
        results["dask (2 workers)"] = time_stream(captures, cluster="local", workers=2)
    else:
        print("dask: skipped (the cluster extra, dask[distributed], is not installed)")
    base_first, base_all, _ = results["serial"]
    print(f"{'mode':<18} {'first rank':>10} {'all ranks':>10} {'first/serial':>13} "
          f"{'all/serial':>11}")
    for mode, (first, total, rows) in results.items():
        print(f"{mode:<18} {first:>9.2f}s {total:>9.2f}s {first / base_first:>13.2f} "
              f"{total / base_all:>11.2f}   ({rows} rows)")
    screen = asyncio.run(_first_row_on_screen(discover_ranks([folder])))
    print(f"Ranks screen (pool): first row shown {screen:.2f} s after start "
          f"({screen / base_all:.2f} of the serial run over every rank)")


if __name__ == "__main__":
    main()
