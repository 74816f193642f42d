"""``memtui --follow`` on an msMemScope DB: what one poll costs against reopening the file.

Writes a synthetic DB of ``--rows`` rows (``generate_memscope.py``), copies all but the
last ``--new`` rows into a second DB (the capture so far), lets the follower read it, then
appends the last rows and times, in one run:

* ``reopen``: ``memtui.loading.load_trace`` of the whole file (the baseline: what a viewer
  without --follow does to show the new rows);
* ``read new``: the follower's read of the new rows only (``DbTail.read_new``);
* ``build``: the model built again from every row read (``DbTail.trace`` + the load-time
  analyses), which --follow does after each read;
* ``idle poll``: a poll that finds nothing new (one ``max(rowid)`` query).

It prints each time and its ratio to ``reopen``.

    python benchmarks/bench_follow.py --rows 1000000 --new 20000
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _timed(function, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    from benchmarks.generate_memscope import generate_db
    from memtui.loading import load_trace, prepare_trace
    from memtui.sources.follow import open_follower

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--new", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        full = generate_db(Path(tmp) / "memscope_dump_full.db", args.rows, trace_rows=0)
        live = Path(tmp) / "memscope_dump_live.db"
        con = sqlite3.connect(live)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"ATTACH '{full}' AS src")
        total = con.execute("SELECT max(rowid) FROM src.memscope_dump").fetchone()[0]
        cut = total - args.new
        con.execute("CREATE TABLE memscope_dump AS SELECT * FROM src.memscope_dump WHERE 0")
        con.execute(f"INSERT INTO memscope_dump SELECT * FROM src.memscope_dump "
                    f"WHERE rowid <= {cut}")
        con.commit()
        follower = open_follower(live)
        follower.poll()
        con.execute(f"INSERT INTO memscope_dump SELECT * FROM src.memscope_dump "
                    f"WHERE rowid > {cut}")
        con.commit()
        reopen, _ = _timed(lambda: load_trace(full), args.repeat)
        start = time.perf_counter()
        new = follower.tail.read_new()
        read_new = time.perf_counter() - start
        build, trace = _timed(lambda: prepare_trace(follower.tail.trace()), args.repeat)
        idle, _ = _timed(follower.poll, args.repeat)
        con.close()
        print(f"{total:,} rows, {new:,} new; events {trace.events.height:,}")
        for name, seconds in (("reopen (baseline)", reopen), ("read new", read_new),
                              ("build", build), ("read new + build", read_new + build),
                              ("idle poll", idle)):
            print(f"  {name:<18} {seconds * 1000:9.1f} ms   {seconds / reopen:6.3f}x reopen")


if __name__ == "__main__":
    main()
