"""``memtui --follow`` on an msMemScope DB: what one update costs against building anew.

For each ``--rows`` size: writes a synthetic DB (``generate_memscope.py``, rows in the order
msMemScope writes them: a block's rows when it is freed), copies its first half into a
second DB (the capture so far: a running job, whose never-freed blocks' rows come at its
exit), lets the follower read it, then appends ``--bursts`` bursts of ``--new`` rows and
times, in the same run, for each burst:

* ``extend``: the follower's read of the new rows (``DbTail.read_new``) and the model
  extended with them (``DbTail.trace``: ``memscope.live.LiveBuild``) plus the load-time
  analyses: what --follow does after each poll;
* ``rebuild`` (the baseline): the model built from every row read (``DbTail.full_trace``,
  what --follow did before) plus the analyses;
* once, ``reopen``: ``memtui.loading.load_trace`` of the whole file (a viewer without
  --follow), and an idle poll (one ``max(rowid)`` query).

It prints the medians over the bursts, wall and CPU time (of every thread: polars works in
several; CPU time holds on a loaded machine), and ``extend / rebuild``, which falls as the
capture grows (the update costs the new rows plus the suffix they touch, not the whole
capture).

    python benchmarks/bench_follow.py --rows 250000 1000000 --new 20000
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _seconds(function) -> tuple[tuple[float, float], object]:
    """((wall seconds, CPU seconds of the process, all threads), result)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = function()
    return (time.perf_counter() - start, time.process_time() - cpu), result


def _measure(folder: Path, rows: int, new: int, bursts: int) -> dict:
    from benchmarks.generate_memscope import generate_db
    from memtui.loading import load_trace, prepare_trace
    from memtui.sources.follow import open_follower

    full = generate_db(folder / f"memscope_dump_full_{rows}.db", rows, trace_rows=0)
    live = folder / f"memscope_dump_live_{rows}.db"
    con = sqlite3.connect(live)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"ATTACH '{full}' AS src")
    total = con.execute("SELECT max(rowid) FROM src.memscope_dump").fetchone()[0]
    cut = total // 2  # a running job: the rows of blocks never freed come at its exit
    con.execute("CREATE TABLE memscope_dump AS SELECT * FROM src.memscope_dump WHERE 0")
    con.execute("INSERT INTO memscope_dump SELECT * FROM src.memscope_dump WHERE rowid <= ?",
                (cut,))
    con.commit()
    follower = open_follower(live)
    follower.poll()
    tail = follower.tail
    extend, rebuild, suffix = [], [], []
    for index in range(bursts):
        low = cut + index * new
        con.execute("INSERT INTO memscope_dump SELECT * FROM src.memscope_dump "
                    "WHERE rowid > ? AND rowid <= ?", (low, low + new))
        con.commit()
        seconds, _ = _seconds(lambda: prepare_trace(tail.trace()) if tail.read_new() else None)
        extend.append(seconds)
        suffix.append(tail.live.last_suffix)
        seconds, trace = _seconds(lambda: prepare_trace(tail.full_trace()))
        rebuild.append(seconds)
    reopen, _ = _seconds(lambda: load_trace(live, use_cache=False))
    idle, _ = _seconds(follower.poll)
    con.close()
    def median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
        return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))

    return {"rows": total, "events": trace.events.height,
            "extend": median(extend), "rebuild": median(rebuild),
            "suffix": statistics.median(suffix), "reopen": reopen, "idle": idle,
            "extended": tail.live.extended, "rebuilt": tail.live.rebuilds - 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--new", type=int, default=20_000, help="rows per burst")
    parser.add_argument("--bursts", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            m = _measure(Path(tmp), rows, args.new, args.bursts)
            print(f"{m['rows']:,} rows ({m['events']:,} events), bursts of {args.new:,} rows: "
                  f"{m['extended']} extended, {m['rebuilt']} built anew; median suffix "
                  f"levelled {m['suffix']:,.0f} events")
            print("             wall ms   CPU ms   wall/rebuild  CPU/rebuild  wall/reopen")
            for name in ("reopen", "rebuild", "extend", "idle"):
                wall, cpu = m[name]
                print(f"  {name:<8} {wall * 1000:9.1f} {cpu * 1000:8.1f}   "
                      f"{wall / m['rebuild'][0]:10.3f}x {cpu / m['rebuild'][1]:10.3f}x "
                      f"{wall / m['reopen'][0]:10.3f}x")


if __name__ == "__main__":
    main()
