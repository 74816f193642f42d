"""Findings benchmark: the time of every finding as a ratio of the open time, in one run.

For each size it writes a synthetic snapshot with ``benchmarks/generate.py`` (a training
loop with a planted leak, so the leak finder does its full work), then, in one fresh
interpreter per repetition, times ``load_trace`` (the open, from the file: the reopen
cache is off) and
``memtui.analysis.findings.find_all`` on the loaded trace.  Goal (issue 16): findings on
a 5M-event snapshot cost at most 0.3x the open time.  Each size is measured twice: with the
generator's ``ProfilerStep#N`` markers, and without them (the steps found from the trace's
own period, issue 33).  The machines are shared and noisy: read the ratio, best of
``--repeat``.

    python benchmarks/bench_findings.py                    # 1M and 5M events
    python benchmarks/bench_findings.py --events 200000 --repeat 1
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

GOAL = 0.3

_MEASURE = r"""
import json, sys, time
from memtui.loading import load_trace
from memtui.analysis.findings import find_all, flat
start = time.perf_counter()
trace = load_trace(sys.argv[1])
opened = time.perf_counter()
findings = find_all(trace)
done = time.perf_counter()
print(json.dumps({"open_s": opened - start, "findings_s": done - opened,
                  "found": [f.title for f in flat(findings)]}))
"""


def measure(path: Path) -> dict:
    env = {**os.environ, "MEMTUI_NO_CACHE": "1"}  # the open reads the file, not the cache
    run = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def bench(n_events: int, repeat: int, folder: Path, markers: bool = True) -> dict:
    from benchmarks.generate import write_snapshot

    path = write_snapshot(folder / f"bench_findings_{n_events}_{markers}.pickle",
                          n_events=n_events, markers=markers)
    runs = [measure(path) for _ in range(repeat)]
    path.unlink()
    best = min(runs, key=lambda r: r["findings_s"] / r["open_s"])
    return {"events": n_events, "markers": markers, "open_s": best["open_s"],
            "findings_s": best["findings_s"], "ratio": best["findings_s"] / best["open_s"],
            "found": best["found"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 5_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs each")
    args = parser.parse_args()
    print(f"{'events':>10} {'markers':>8} {'open s':>8} {'findings s':>10} {'ratio':>6}  "
          f"(goal <= {GOAL})")
    with tempfile.TemporaryDirectory() as folder:
        for n, markers in ((n, m) for n in args.events for m in (True, False)):
            row = bench(n, args.repeat, Path(folder), markers)
            flag = "ok" if row["ratio"] <= GOAL else "OVER"
            print(f"{row['events']:>10} {'yes' if markers else 'no':>8} {row['open_s']:>8.2f} "
                  f"{row['findings_s']:>10.2f} {row['ratio']:>6.2f}  {flag}")
            for title in row["found"][:3]:
                print(f"{'':>12}{title}")


if __name__ == "__main__":
    main()
