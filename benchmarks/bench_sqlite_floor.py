"""What a reader of msMemScope DBs on SQLite's own C API could reach: the floor under the
ADBC scan that issue 34's goal is measured against.

Compiles a small C program against the system's SQLite (``cc``, ``sqlite3.h``,
``-lsqlite3``; the benchmark says so and stops where either is missing) that steps every
row of ``memscope_dump`` and touches every value (each integer read, each text's bytes
reached), then runs it and the ADBC SQLite->Arrow scan of ``bench_open_memscope.py`` in
turn, ``--repeat`` rounds, each a whole process, and prints the medians and the ratio.

It measures no memtui code: it says how much of the scan's time is SQLite's and how much
the driver's (its typed Arrow building: type inference per value, validity bits, SQLite's
connection mutex taken for each value), which is what a compiled one-pass reader of the
rows (decoding Attr, Ptr and the stacks as it steps) would save.

    flock /tmp/heavy.lock python benchmarks/bench_sqlite_floor.py --db big.db --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_open_memscope import _ADBC  # noqa: E402
from benchmarks.processes import run_process  # noqa: E402

_COLUMNS = ("ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id", "Thread Id",
            "Device Id", "Ptr", "Attr", "Call Stack(Python)", "Call Stack(C)")

_SCAN_C = r"""
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

int main(int argc, char **argv) {
    sqlite3 *db;
    sqlite3_stmt *statement;
    if (argc != 2 || sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
                                     | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return 1;
    if (sqlite3_prepare_v2(db, "SELECT " SELECTED " FROM memscope_dump", -1, &statement,
                           NULL) != SQLITE_OK) {
        fprintf(stderr, "%s\n", sqlite3_errmsg(db));
        return 1;
    }
    int columns = sqlite3_column_count(statement);
    int64_t rows = 0, ints = 0, bytes = 0, ends = 0;
    while (sqlite3_step(statement) == SQLITE_ROW) {
        rows++;
        for (int c = 0; c < columns; c++) {
            int type = sqlite3_column_type(statement, c);
            if (type == SQLITE_INTEGER) {
                ints += sqlite3_column_int64(statement, c);
            } else if (type == SQLITE_TEXT) {
                const unsigned char *text = sqlite3_column_text(statement, c);
                int n = sqlite3_column_bytes(statement, c);
                bytes += n;
                if (n > 0) ends += text[0] + text[n - 1];
            }
        }
    }
    printf("%lld rows, %lld text bytes (%lld %lld)\n", (long long)rows, (long long)bytes,
           (long long)ints, (long long)ends);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return 0;
}
"""


def compiled_scan(folder: Path) -> Path | None:
    """The C scan built in ``folder``, or None (said why) where it cannot be."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        print("no C compiler (cc): nothing to measure")
        return None
    selected = ", ".join(f'\\"{name}\\"' for name in _COLUMNS)
    source = folder / "scan.c"
    source.write_text(_SCAN_C.replace("SELECTED", f'"{selected}"'))
    program = folder / "scan"
    done = subprocess.run([compiler, "-O2", "-o", str(program), str(source), "-lsqlite3"],
                          capture_output=True, text=True)
    if done.returncode:
        print(f"the C scan did not build (sqlite3.h and libsqlite3 needed):\n{done.stderr}")
        return None
    return program


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="an msMemScope DB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    uri = f"file:{args.db.resolve()}?mode=ro&immutable=1"
    with tempfile.TemporaryDirectory() as folder:
        program = compiled_scan(Path(folder))
        if program is None:
            return 1
        runs: dict[str, list[dict]] = {"adbc": [], "c": []}
        for _ in range(args.repeat):
            runs["adbc"].append(run_process([sys.executable, "-c", _ADBC, str(args.db)]))
            runs["c"].append(run_process([str(program), uri]))
    medians = {name: {key: statistics.median(r[key] for r in found)
                      for key in ("wall", "cpu", "rss")} for name, found in runs.items()}
    print(f"{args.db.name}: medians of {args.repeat} paired rounds (wall s [CPU s] peak RSS)")
    for name, label in (("adbc", "ADBC scan (baseline)"), ("c", "SQLite's C API, every value")):
        m = medians[name]
        ratio = m["wall"] / medians["adbc"]["wall"]
        print(f"  {label:30s} {m['wall']:7.2f} s [{m['cpu']:6.2f}] {m['rss'] / 1e9:6.2f} GB"
              f" | {ratio:5.2f}x the scan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
