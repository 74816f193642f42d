"""Reopen with findings: the findings kept beside the cache entry against finding them
again, in one run (issue 23 point 6: a 296 MB snapshot reopened in 2.9 s, its findings
came 26.6 s later).

For each size it writes a synthetic snapshot (``benchmarks/generate.py``, a training loop
with a planted leak), opens it once into a fresh reopen cache and keeps its findings
(``memtui.loading.findings_of``), then, in one fresh interpreter per repetition, times
the reopen (``load_trace`` from the cache), ``kept_findings`` and, as the same-run
baseline, ``find_all`` on the reopened trace.  Goal (DESIGN.md 5): reopen at most 0.1x
the first open, findings included: the kept findings cost a small part of the reopen.

    python benchmarks/bench_reopen_findings.py                  # 1M events
    python benchmarks/bench_reopen_findings.py --events 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_FIRST = r"""
import sys
from memtui import cache
from memtui.loading import findings_of, load_trace
findings_of(load_trace(sys.argv[1]))
cache.wait_for_stores()
"""

_MEASURE = r"""
import json, sys, time
from memtui.loading import kept_findings, load_trace
from memtui.analysis.findings import find_all
start = time.perf_counter()
trace = load_trace(sys.argv[1])
opened = time.perf_counter()
kept = kept_findings(trace)
read = time.perf_counter()
found = find_all(trace)
done = time.perf_counter()
print(json.dumps({"reopen_s": opened - start, "kept_s": read - opened,
                  "find_s": done - read, "same": kept == found}))
"""


def _run(script: str, path: Path, cache_home: Path) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "MEMTUI_NO_CACHE": ""}
    run = subprocess.run([sys.executable, "-c", script, str(path)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True)
    return run.stdout.strip()


def bench(n_events: int, repeat: int, folder: Path) -> dict:
    from benchmarks.generate import write_snapshot

    path = write_snapshot(folder / f"bench_reopen_{n_events}.pickle", n_events=n_events)
    cache_home = folder / f"cache_{n_events}"
    _run(_FIRST, path, cache_home)
    runs = [json.loads(_run(_MEASURE, path, cache_home).splitlines()[-1])
            for _ in range(repeat)]
    best = min(runs, key=lambda r: r["kept_s"] / r["find_s"])
    return {"events": n_events, "size_mb": path.stat().st_size / 1e6, **best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs each")
    args = parser.parse_args()
    print(f"{'events':>10} {'MB':>6} {'reopen s':>9} {'kept s':>7} {'find s':>7} "
          f"{'kept/find':>9}  same")
    with tempfile.TemporaryDirectory() as folder:
        for n in args.events:
            row = bench(n, args.repeat, Path(folder))
            print(f"{row['events']:>10} {row['size_mb']:>6.0f} {row['reopen_s']:>9.2f} "
                  f"{row['kept_s']:>7.3f} {row['find_s']:>7.2f} "
                  f"{row['kept_s'] / row['find_s']:>9.3f}  {row['same']}")


if __name__ == "__main__":
    main()
