"""Open-time benchmark for msMemScope DBs: memtui's load against a bare scan, in one run.

Writes a synthetic DB with ``benchmarks/generate_memscope.py`` (every column filled: JSON
Attr with allocation ids, owners and inefficient types, Python and C stacks, a python
trace table), then times, each in a fresh subprocess so that peak RSS is per measurement:

* ``fetchall``: ``SELECT * FROM memscope_dump`` with sqlite3's ``fetchall()``, the plain
  read any Python tool starts from (the baseline of DESIGN.md section 5);
* ``iterate``: the same query iterated row by row without keeping the rows (the cheapest
  way Python can see every value; shown for reference);
* ``memtui``: ``memtui.sources.open_capture`` of the file, everything built.

It prints the times, the ratio memtui / fetchall (goal: 1.5 or less), the peak RSS of each
and memtui's RSS beyond the bare read per row (goal: under 200 bytes per event).

    python benchmarks/bench_open_memscope.py --rows 10000000
    python benchmarks/bench_open_memscope.py --rows 200000 --repeat 1
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
import json, resource, sqlite3, sys, time
path, what = sys.argv[1], sys.argv[2]
start = time.perf_counter()
if what in ("fetchall", "iterate"):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    cursor = con.execute("SELECT * FROM memscope_dump")
    if what == "fetchall":
        rows = len(cursor.fetchall())
    else:
        rows = sum(1 for _ in cursor)
    con.close()
else:
    from memtui.sources import open_capture
    trace = open_capture(path)
    rows = trace.events.height + trace.markers.height
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "rows": rows,
                  "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def measure(path: Path, what: str) -> dict:
    """Time one read of ``path`` (``fetchall``, ``iterate`` or ``memtui``) in a fresh process."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path), what], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def best_of(path: Path, repeat: int) -> dict[str, dict]:
    """The fastest of ``repeat`` runs of each reader, the readers taking turns (the
    machines are shared: drift then hits them alike)."""
    runs: dict[str, list[dict]] = {"fetchall": [], "iterate": [], "memtui": []}
    for _ in range(repeat):
        for what, done in runs.items():
            done.append(measure(path, what))
    return {what: min(done, key=lambda r: r["seconds"]) for what, done in runs.items()}


def bench_memscope(rows: int, repeat: int = 1, db: Path | None = None) -> dict:
    """Figures for a DB of ``rows`` rows (written to a temporary folder unless ``db``)."""
    from benchmarks.generate_memscope import generate_db

    with tempfile.TemporaryDirectory() as tmp:
        path = db if db is not None else generate_db(Path(tmp) / "memscope_dump_bench.db", rows)
        best = best_of(path, repeat)
        fetchall, iterate, ours = best["fetchall"], best["iterate"], best["memtui"]
        n = fetchall["rows"]
        return {
            "rows": n,
            "file_mb": path.stat().st_size / 1e6,
            "fetchall_s": fetchall["seconds"],
            "iterate_s": iterate["seconds"],
            "memtui_s": ours["seconds"],
            "ratio": ours["seconds"] / fetchall["seconds"],
            "ratio_iterate": ours["seconds"] / iterate["seconds"],
            "fetchall_rss_mb": fetchall["rss_bytes"] / 1e6,
            "iterate_rss_mb": iterate["rss_bytes"] / 1e6,
            "memtui_rss_mb": ours["rss_bytes"] / 1e6,
            "extra_bytes_per_row": (ours["rss_bytes"] - fetchall["rss_bytes"]) / n,
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs each")
    parser.add_argument("--db", type=Path, help="bench this DB instead of generating one")
    args = parser.parse_args(argv)
    print(f"{'rows':>10} {'file MB':>8} {'fetchall s':>10} {'iterate s':>9} {'memtui s':>8} "
          f"{'ratio':>6} {'(vs iter)':>9} {'fetchall RSS':>12} {'memtui RSS':>10} "
          f"{'extra B/row':>11}")
    for rows in ([0] if args.db else args.rows):
        r = bench_memscope(rows, args.repeat, args.db)
        print(f"{r['rows']:>10} {r['file_mb']:>8.0f} {r['fetchall_s']:>10.2f} "
              f"{r['iterate_s']:>9.2f} {r['memtui_s']:>8.2f} {r['ratio']:>6.2f} "
              f"{r['ratio_iterate']:>9.2f} {r['fetchall_rss_mb']:>10.0f}MB "
              f"{r['memtui_rss_mb']:>8.0f}MB {r['extra_bytes_per_row']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
