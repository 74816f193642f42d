"""Open-time benchmark for msMemScope DBs: memtui against a bare scan, paired, in one run.

Writes a synthetic DB with ``benchmarks/generate_memscope.py`` (every column filled: JSON
Attr with allocation ids, owners and inefficient types, Python and C stacks, a python
trace table), then ``--repeat`` rounds of each of these in turn, each a whole fresh
process (peak RSS per measurement; the readers take turns so a shared machine's drift hits
them alike), and prints medians:

* ``adbc``: ``SELECT * FROM memscope_dump`` into an Arrow table through ADBC
  (``adbc-driver-sqlite``): the typed scan of the table, the baseline of issue 11;
* ``fetchall``: the same rows through sqlite3's ``fetchall()`` (the older baseline);
* ``summary``: ``memtui summary --no-cache`` (import, load, every figure, print);
* ``first``: ``memtui summary`` with an empty cache (the entry written in the background);
* ``reopen``: ``memtui summary`` again, from the cache;
* ``paint``, ``paint_reopen``: the TUI from a fresh interpreter's first line to the Trend
  screen's first full paint (``benchmarks/bench_ui.py``'s measure), without the cache and
  then reopened from the entry the summaries stored.

The baselines open the file ``immutable`` as memtui does a WAL file without a writer: a
plain ``mode=ro`` reader of a WAL file leaves an empty ``-wal`` and a ``-shm`` beside it
(which, before memtui read an empty ``-wal`` typed too, sent every later memtui run of
the same round down the slower text read).

Goals: summary <= 1.2x the ADBC scan (issue 11; issue 25: <= 1.4x on the 10M-row DB); reopen
<= 0.1x first; peak RSS at most the scan's plus 150 B/row.

    python benchmarks/bench_open_memscope.py --rows 1000000 2000000
    python benchmarks/bench_open_memscope.py --db some.db --repeat 1
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

from benchmarks.bench_ui import process_paint  # noqa: E402
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


def paired(path: Path, repeat: int) -> dict[str, dict[str, float]]:
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as cache_home:
        env = {**os.environ, "XDG_CACHE_HOME": cache_home, "PYTHONPATH": str(REPO)}
        memtui = [sys.executable, "-m", "memtui.cli", "summary"]
        readers = {
            "adbc": ([sys.executable, "-c", _ADBC, str(path)], None),
            "fetchall": ([sys.executable, "-c", _FETCHALL, str(path)], None),
            "summary": ([*memtui, "--no-cache", str(path)], env),
            "first": ([*memtui, str(path)], env),
            "reopen": ([*memtui, str(path)], env),
        }
        for _ in range(repeat):
            subprocess.run([*memtui[:3], "cache", "clear"], cwd=REPO, env=env,
                           stdout=subprocess.DEVNULL, check=True)
            for what, (argv, reader_env) in readers.items():
                runs.setdefault(what, []).append(run_process(argv, reader_env))
            # the UI, as bench_ui measures it: without the cache, then reopened from the
            # entry the summaries above stored
            for what, cached in (("paint", False), ("paint_reopen", True)):
                wall, cpu = process_paint(path, cached, env)
                runs.setdefault(what, []).append({"wall": wall, "cpu": cpu})
    return {what: {k: statistics.median(r[k] for r in done) for k in done[0]}
            for what, done in runs.items()}


def bench_memscope(rows: int, repeat: int = 1, db: Path | None = None) -> dict:
    """Figures for a DB of ``rows`` rows (written to a temporary folder unless ``db``)."""
    from benchmarks.generate_memscope import generate_db

    with tempfile.TemporaryDirectory() as tmp:
        path = db if db is not None else generate_db(Path(tmp) / "memscope_dump_bench.db", rows)
        if db is not None:
            import sqlite3

            con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
            rows = con.execute("SELECT count(*) FROM memscope_dump").fetchone()[0]
            con.close()
        m = paired(path, repeat)
        adbc = m["adbc"]
        return {
            "rows": rows, "file_mb": path.stat().st_size / 1e6,
            **{f"{what}_{k}": v for what, figures in m.items() for k, v in figures.items()},
            "ratio": m["summary"]["wall"] / adbc["wall"],
            "cpu_ratio": m["summary"]["cpu"] / adbc["cpu"],
            "fetchall_ratio": m["summary"]["wall"] / m["fetchall"]["wall"],
            "reopen_of_first": m["reopen"]["wall"] / m["first"]["wall"],
            "paint_ratio": m["paint"]["wall"] / adbc["wall"],
            "paint_reopen_of_paint": m["paint_reopen"]["wall"] / m["paint"]["wall"],
            "reopen_cpu_of_first": m["reopen"]["cpu"] / m["first"]["cpu"],
            "s_per_m": m["summary"]["wall"] / (rows / 1e6),
            "extra_b_per_row": (m["summary"]["rss"] - adbc["rss"]) / rows,
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 2_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--db", type=Path, help="bench this DB instead of generating one")
    args = parser.parse_args(argv)
    print("msMemScope DBs: medians of paired runs, whole processes (wall s; CPU s in [])")
    print(f"{'rows':>9} {'MB':>5} | {'ADBC scan':>13} {'fetchall':>8} | {'summary':>13} "
          f"{'ratio':>5} {'[cpu]':>5} | {'first':>6} {'reopen':>6} {'re/first':>8} "
          f"{'[cpu]':>5} | {'s/M rows':>8} {'extra B/row':>11}")
    for rows in ([0] if args.db else args.rows):
        r = bench_memscope(rows, args.repeat, args.db)
        print(f"{r['rows']:>9} {r['file_mb']:>5.0f} | {r['adbc_wall']:>6.2f} "
              f"[{r['adbc_cpu']:>5.2f}] {r['fetchall_wall']:>8.2f} | {r['summary_wall']:>6.2f} "
              f"[{r['summary_cpu']:>5.2f}] {r['ratio']:>4.2f}x {r['cpu_ratio']:>4.2f}x | "
              f"{r['first_wall']:>6.2f} {r['reopen_wall']:>6.2f} {r['reopen_of_first']:>7.3f}x "
              f"{r['reopen_cpu_of_first']:>4.2f}x | {r['s_per_m']:>8.2f} "
              f"{r['extra_b_per_row']:>11.0f}", flush=True)
        print(f"{'':>15} UI first paint {r['paint_wall']:6.2f} s [{r['paint_cpu']:5.2f}] "
              f"{r['paint_ratio']:4.2f}x the scan; reopened {r['paint_reopen_wall']:5.2f} s "
              f"[{r['paint_reopen_cpu']:5.2f}] {r['paint_reopen_of_paint']:5.3f}x first",
              flush=True)
    print("goals: summary <= 1.20x the ADBC scan (<= 1.40x at 10M rows); reopen <= 0.10x first; "
          "extra <= 150 B/row")


if __name__ == "__main__":
    main()
