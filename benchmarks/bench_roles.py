"""Memory by role benchmark: the roles' time and memory as ratios of the open's, in one run.

For each capture (synthetic snapshots of ``benchmarks/generate.py`` at the sizes asked, and
any ``--file``, such as the recorded 5M-event ``long_loop_5m.pickle``) one fresh
interpreter per repetition times ``load_trace`` (the open, from the file: the reopen cache
is off), then the roles of every block (``block_roles``: stacks, phases, lifetimes,
pairing), their levels over the events (``levels_by_role``) and the savings findings, and
reads the process's peak RSS after the open and after the roles.  Goals (issue 32): the
roles at most 0.3x the open time (they run inside ``memtui findings`` and ``summary``),
and at most 0.3x more peak memory than the open.  The machines are shared and noisy: read
the ratios, best of ``--repeat``.

    python benchmarks/bench_roles.py                                  # 1M and 5M events
    python benchmarks/bench_roles.py --events --file /work/data/long_loop_5m.pickle
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

TIME_GOAL = 0.3
MEMORY_GOAL = 0.3

_MEASURE = r"""
import json, resource, sys, time
from memtui.loading import load_trace
from memtui.analysis.roles import block_roles, levels_by_role
from memtui.analysis.findings.savings import find_savings

def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

start = time.perf_counter()
trace = load_trace(sys.argv[1])
opened = time.perf_counter()
open_rss = rss()
found = {}
for device in trace.meta.device_names:
    roles = block_roles(trace, device)
    levels_by_role(trace, device)
    found[device] = [f.title for f in find_savings(trace, device)]
done = time.perf_counter()
print(json.dumps({"open_s": opened - start, "roles_s": done - opened, "open_rss": open_rss,
                  "roles_rss": rss(), "events": trace.events.height,
                  "blocks": trace.blocks.height, "phases": roles.phases,
                  "found": [t for titles in found.values() for t in titles]}))
"""


def measure(path: Path) -> dict:
    env = {**os.environ, "MEMTUI_NO_CACHE": "1"}  # the open reads the file, not the cache
    run = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def bench(path: Path, repeat: int) -> dict:
    runs = [measure(path) for _ in range(repeat)]
    best = min(runs, key=lambda r: r["roles_s"] / r["open_s"])
    best["time_ratio"] = best["roles_s"] / best["open_s"]
    best["memory_ratio"] = (best["roles_rss"] - best["open_rss"]) / best["open_rss"]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 5_000_000])
    parser.add_argument("--file", type=Path, action="append", default=[],
                        help="a capture to measure too (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs each")
    args = parser.parse_args()
    print(f"{'capture':>24} {'events':>10} {'open s':>7} {'roles s':>7} {'ratio':>6} "
          f"{'open GB':>7} {'+roles':>7}  (goals: time <= {TIME_GOAL}, memory <= "
          f"+{MEMORY_GOAL:.0%})")
    with tempfile.TemporaryDirectory() as folder:
        from benchmarks.generate import write_snapshot

        paths = [write_snapshot(Path(folder) / f"bench_roles_{n}.pickle", n_events=n)
                 for n in args.events]
        for path in paths + args.file:
            row = bench(path, args.repeat)
            flag = "ok" if row["time_ratio"] <= TIME_GOAL \
                and row["memory_ratio"] <= MEMORY_GOAL else "OVER"
            print(f"{path.name[:24]:>24} {row['events']:>10,} {row['open_s']:>7.2f} "
                  f"{row['roles_s']:>7.2f} {row['time_ratio']:>6.2f} "
                  f"{row['open_rss'] / 1e9:>7.2f} {row['memory_ratio']:>+7.0%}  {flag}"
                  f"  phases: {row['phases']}")
            for title in row["found"][:3]:
                print(f"{'':>26}{title}")


if __name__ == "__main__":
    main()
