"""Compare benchmark: ``memtui compare A B`` against opening A and B, in one run.

Writes two synthetic snapshots of N events with ``benchmarks/generate.py`` (seeds 0 and
1), then times, each in a fresh interpreter, ``load_trace(A)``, ``load_trace(B)`` (what
every command and the UI open a capture with; the reopen cache off) and
the whole comparison (both files opened in parallel threads, then
``analysis.compare.compare``).  Goal (issue 10): the comparison costs at most the two
opens plus 20%, ratio printed; the compare step alone is printed too.  The machines are
shared and noisy: read the ratios, best of ``--repeat``.

    python benchmarks/bench_compare.py                  # 1M events each
    python benchmarks/bench_compare.py --events 200000 --repeat 1
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

GOAL = 1.2

_MEASURE = r"""
import json, sys, time
what, paths = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
if what == "open":
    from memtui.loading import load_trace
    load_trace(paths[0])
    print(json.dumps({"seconds": time.perf_counter() - start}))
else:
    from memtui.analysis.across.compare import compare
    from memtui.loading import load_traces
    a, b = load_traces(paths)
    opened = time.perf_counter()
    result = compare(a, b)
    json.dumps(result.to_json())
    end = time.perf_counter()
    print(json.dumps({"seconds": end - start, "compare_seconds": end - opened}))
"""


def measure(what: str, *paths: Path) -> dict:
    # the reopen cache off: every measurement reads the files themselves
    env = {**os.environ, "MEMTUI_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", _MEASURE, what, *map(str, paths)],
                          cwd=REPO, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(what: str, paths: list[Path], repeat: int) -> dict:
    return min((measure(what, *paths) for _ in range(repeat)), key=lambda r: r["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.generate import write_snapshot

    with tempfile.TemporaryDirectory() as folder:
        a = write_snapshot(Path(folder) / "a.pickle", n_events=args.events, seed=0)
        b = write_snapshot(Path(folder) / "b.pickle", n_events=args.events, seed=1)
        open_a = best("open", [a], args.repeat)["seconds"]
        open_b = best("open", [b], args.repeat)["seconds"]
        both = best("compare", [a, b], args.repeat)
    opens = open_a + open_b
    ratio = both["seconds"] / opens
    print(f"{args.events:,} events each: open A {open_a:.2f} s + open B {open_b:.2f} s "
          f"= {opens:.2f} s")
    print(f"compare A B {both['seconds']:.2f} s (of which compare itself "
          f"{both['compare_seconds']:.2f} s): ratio {ratio:.2f} (goal <= {GOAL})")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
