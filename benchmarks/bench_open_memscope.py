"""Open-time benchmark for msMemScope DBs: memtui against the bare ADBC scan, paired, in one run.

Writes a DB with ``benchmarks/generate_memscope.py`` (the writer's habits: rows written
when a block is freed, never-freed blocks last, JSON Attr whose values are all strings,
innermost-first Python stacks of 3 to 30 frames, a ``python_trace_<pid>`` table), or takes
``--db``, then ``--repeat`` rounds of each of these in turn, each a whole fresh process
(the readers take turns so a shared machine's drift hits them alike), and prints medians
of wall time, CPU time and peak RSS:

* ``adbc``: ``SELECT * FROM memscope_dump`` into an Arrow table through ADBC
  (``adbc-driver-sqlite``): the typed scan of the whole table, the baseline;
* ``first``: ``memtui summary`` with an empty cache, as a user's first open runs: the
  reopen cache's entry is written before the process ends (the headline row);
* ``reopen``: ``memtui summary`` again, from that entry;
* ``no-cache``: ``memtui summary --no-cache`` (load, every figure, print; no entry);
* ``paint``: the UI, from a fresh interpreter's first line to the Trend screen's first
  full paint at 120x40 (``benchmarks/bench_ui.py``'s measure), on the user's path: an
  empty cache, the entry written in the background; then ``paint reopened`` from that
  entry, and ``paint --no-cache``.  A DB of millions of rows first shows a preview (the
  rows read so far); ``UI whole capture shown`` is when the whole capture takes its place;
* ``fetchall`` (``--fetchall``): the rows through sqlite3's ``fetchall()``, the older
  baseline (about 1 GB of Python objects per million rows: not at 10M on a small machine).

The baselines open the file ``immutable`` as memtui does a WAL file without a writer: a
plain ``mode=ro`` reader of a WAL file leaves an empty ``-wal`` and a ``-shm`` beside it.

Goals (issue 34): the first open <= 1.5x the scan's time and <= 1.5x its peak memory;
the UI's first paint no later than the scan (<= 1.0x); reopen <= 0.1x the first open.

    python benchmarks/bench_open_memscope.py --rows 1000000 2000000
    flock /tmp/heavy.lock python benchmarks/bench_open_memscope.py --db big.db --repeat 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_ui import paint_figures  # noqa: E402
from benchmarks.processes import run_process  # noqa: E402

_ADBC = r"""
import sys, pathlib
import adbc_driver_manager as manager, adbc_driver_sqlite, pyarrow as pa
uri = f"{pathlib.Path(sys.argv[1]).resolve().as_uri()}?mode=ro&immutable=1"
database = adbc_driver_sqlite.connect(uri)
statement = manager.AdbcStatement(manager.AdbcConnection(database))
statement.set_sql_query("SELECT * FROM memscope_dump")
stream, _ = statement.execute_query()
table = pa.RecordBatchReader.from_stream(stream).read_all()
"""
_FETCHALL = r"""
import sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro&immutable=1", uri=True)
rows = con.execute("SELECT * FROM memscope_dump").fetchall()
"""
GOAL_TIME, GOAL_MEMORY, GOAL_PAINT, GOAL_REOPEN = 1.5, 1.5, 1.0, 0.1


def _clear_cache(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "memtui.cli", "cache", "clear"], cwd=REPO, env=env,
                   stdout=subprocess.DEVNULL, check=True)


def paired(path: Path, repeat: int, fetchall: bool = False) -> dict[str, dict[str, float]]:
    """Medians of every measure (wall, cpu, rss) over ``repeat`` rounds taken in turn."""
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as cache_home:
        env = {**os.environ, "XDG_CACHE_HOME": cache_home, "PYTHONPATH": str(REPO)}
        env.pop("MEMTUI_NO_CACHE", None)
        memtui = [sys.executable, "-m", "memtui.cli", "summary"]
        for _ in range(repeat):
            _clear_cache(env)
            readers = {
                "adbc": [sys.executable, "-c", _ADBC, str(path)],
                "first": [*memtui, str(path)],
                "reopen": [*memtui, str(path)],
                "no_cache": [*memtui, "--no-cache", str(path)],
            }
            if fetchall:
                readers["fetchall"] = [sys.executable, "-c", _FETCHALL, str(path)]
            for what, argv in readers.items():
                runs.setdefault(what, []).append(run_process(argv, env))
            # the UI: an empty cache (the entry written in the background), its reopen,
            # and without the cache
            _clear_cache(env)
            for what, cached in (("paint", True), ("paint_reopen", True),
                                 ("paint_no_cache", False)):
                runs.setdefault(what, []).append(paint_figures(path, cached, env))
    return {what: {k: statistics.median(r[k] for r in done) for k in done[0]}
            for what, done in runs.items()}


def bench_memscope(rows: int, repeat: int = 1, db: Path | None = None,
                   fetchall: bool = False) -> dict:
    """Figures for a DB of ``rows`` rows (written to a temporary folder unless ``db``)."""
    from benchmarks.generate_memscope import generate_db

    with tempfile.TemporaryDirectory() as tmp:
        path = db if db is not None else generate_db(Path(tmp) / "memscope_dump_bench.db", rows)
        if db is not None:
            import sqlite3

            con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
            rows = con.execute("SELECT count(*) FROM memscope_dump").fetchone()[0]
            con.close()
        m = paired(path, repeat, fetchall)
        scan = m["adbc"]
        return {
            "rows": rows, "file_mb": path.stat().st_size / 1e6,
            **{f"{what}_{k}": v for what, figures in m.items() for k, v in figures.items()},
            **{f"{what}_time": m[what]["wall"] / scan["wall"]
               for what in ("first", "no_cache", "paint", "paint_no_cache")},
            **{f"{what}_memory": m[what]["rss"] / scan["rss"]
               for what in ("first", "no_cache", "paint", "paint_no_cache")},
            "reopen_of_first": m["reopen"]["wall"] / m["first"]["wall"],
            "paint_reopen_of_paint": m["paint_reopen"]["wall"] / m["paint"]["wall"],
        }


def _row(label: str, r: dict, what: str, against_scan: bool = True) -> str:
    wall, cpu, rss = r[f"{what}_wall"], r[f"{what}_cpu"], r[f"{what}_rss"] / 1e9
    text = f"  {label:<22} {wall:7.2f} s [{cpu:6.2f}] {rss:6.2f} GB"
    if against_scan:
        text += f" | {r[f'{what}_time']:5.2f}x time {r[f'{what}_memory']:5.2f}x memory"
    return text


def report(r: dict) -> None:
    print(f"{r['rows']:,} rows, {r['file_mb']:.0f} MB", flush=True)
    print(_row("ADBC scan (baseline)", r, "adbc", against_scan=False))
    print(_row("summary, first open", r, "first")
          + f"   goal <= {GOAL_TIME}x / {GOAL_MEMORY}x")
    print(_row("summary, reopened", r, "reopen", against_scan=False)
          + f" | {r['reopen_of_first']:5.3f}x the first open (goal <= {GOAL_REOPEN}x)")
    print(_row("summary --no-cache", r, "no_cache"))
    print(_row("UI first paint", r, "paint") + f"   goal <= {GOAL_PAINT}x time")
    print(f"  {'UI whole capture shown':<22} {r['paint_whole']:7.2f} s"
          f"{'':23}| {r['paint_whole'] / r['adbc_wall']:5.2f}x time (after a preview where "
          "the first paint was one)")
    print(_row("UI paint, reopened", r, "paint_reopen", against_scan=False)
          + f" | {r['paint_reopen_of_paint']:5.3f}x the first paint")
    print(_row("UI paint --no-cache", r, "paint_no_cache"))
    if "fetchall_wall" in r:
        print(_row("sqlite3 fetchall", r, "fetchall", against_scan=False))
    print(flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 2_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--db", type=Path, help="bench this DB instead of generating one")
    parser.add_argument("--fetchall", action="store_true",
                        help="also time sqlite3's fetchall() (much memory at 10M rows)")
    args = parser.parse_args(argv)
    print("msMemScope DBs: medians of paired runs, whole processes "
          "(wall s [CPU s] peak RSS | ratios to the ADBC scan of the same run)", flush=True)
    for rows in ([0] if args.db else args.rows):
        report(bench_memscope(rows, args.repeat, args.db, args.fetchall))


if __name__ == "__main__":
    main()
