"""Open-time benchmark: memtui's load against the bare read of the same file, in one run.

PyTorch snapshots: for each size it writes a synthetic snapshot with
``benchmarks/generate.py``, then times, each in a fresh subprocess (so peak RSS is per
measurement), the bare ``pickle.load`` of the file and ``memtui.sources.open_capture`` of
it.  It prints both times, their ratio (goal: 1.5 or less, DESIGN.md section 5), the peak
RSS of each, and the RSS beyond the bare read per event (goal: under 200 bytes).  The
machines are shared and noisy: read the ratios.

msMemScope DBs: ``benchmarks/bench_open_memscope.py`` writes a DB of every column and
times ``open_capture`` against sqlite3's ``fetchall`` of the same rows (section 2 below).

    python benchmarks/bench_open.py                 # snapshots 1M, 5M; msMemScope 10M rows
    python benchmarks/bench_open.py --events 200000 --memscope-rows 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_MEASURE = r"""
import json, pickle, resource, sys, time
path, what = sys.argv[1], sys.argv[2]
start = time.perf_counter()
if what == "bare":
    with open(path, "rb") as fh:
        data = pickle.load(fh)
else:
    from memtui.sources import open_capture
    data = open_capture(path)
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed,
                  "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def measure(path: Path, what: str) -> dict:
    """Time one read of ``path`` (``bare`` or ``memtui``) in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path), what], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def best_of(path: Path, what: str, repeat: int) -> dict:
    runs = [measure(path, what) for _ in range(repeat)]
    return min(runs, key=lambda r: r["seconds"])


def bench_snapshot(n_events: int, repeat: int, folder: Path) -> dict:
    from benchmarks.generate import write_snapshot

    path = write_snapshot(folder / f"bench_{n_events}.pickle", n_events=n_events)
    bare = best_of(path, "bare", repeat)
    ours = best_of(path, "memtui", repeat)
    return {
        "events": n_events,
        "file_mb": path.stat().st_size / 1e6,
        "bare_s": bare["seconds"],
        "memtui_s": ours["seconds"],
        "ratio": ours["seconds"] / bare["seconds"],
        "bare_rss_mb": bare["rss_bytes"] / 1e6,
        "memtui_rss_mb": ours["rss_bytes"] / 1e6,
        "extra_bytes_per_event": (ours["rss_bytes"] - bare["rss_bytes"]) / n_events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 5_000_000])
    parser.add_argument("--memscope-rows", type=int, nargs="*", default=[10_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs each")
    args = parser.parse_args()
    print("PyTorch snapshots: memtui open_capture against pickle.load")
    print(f"{'events':>10} {'file MB':>8} {'pickle.load s':>14} {'memtui s':>9} {'ratio':>6} "
          f"{'bare RSS MB':>12} {'memtui RSS MB':>14} {'extra B/event':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for n_events in args.events:
            r = bench_snapshot(n_events, args.repeat, Path(tmp))
            print(f"{r['events']:>10} {r['file_mb']:>8.1f} {r['bare_s']:>14.2f} "
                  f"{r['memtui_s']:>9.2f} {r['ratio']:>6.2f} {r['bare_rss_mb']:>12.0f} "
                  f"{r['memtui_rss_mb']:>14.0f} {r['extra_bytes_per_event']:>14.0f}",
                  flush=True)
    if args.memscope_rows:
        from benchmarks.bench_open_memscope import bench_memscope

        print("\nmsMemScope DBs: memtui open_capture against sqlite3 fetchall of the table")
        print(f"{'rows':>10} {'file MB':>8} {'fetchall s':>10} {'memtui s':>9} {'ratio':>6} "
              f"{'bare RSS MB':>12} {'memtui RSS MB':>14} {'extra B/row':>12}")
        for rows in args.memscope_rows:
            r = bench_memscope(rows, max(1, args.repeat - 2))
            print(f"{r['rows']:>10} {r['file_mb']:>8.0f} {r['fetchall_s']:>10.2f} "
                  f"{r['memtui_s']:>9.2f} {r['ratio']:>6.2f} {r['fetchall_rss_mb']:>12.0f} "
                  f"{r['memtui_rss_mb']:>14.0f} {r['extra_bytes_per_row']:>12.0f}", flush=True)


if __name__ == "__main__":
    main()
