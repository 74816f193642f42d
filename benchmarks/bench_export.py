"""Export benchmark: what ``memtui export`` costs beyond opening the capture, in one run.

For each size it writes a synthetic snapshot with ``benchmarks/generate.py``, then runs
three fresh interpreters on it (the reopen cache off, so each reads the file):

* the baseline: open the capture and find its findings (what both exports need first);
* ``--to perfetto``: the same, then the trace-event JSON written;
* ``--to parquet``: the same, then the frames written.

It prints each one's wall time and peak resident memory (the child's ``ru_maxrss``), the
exports' as ratios of the baseline's.  Streaming means the exports' peak stays near the
baseline's: no second copy of the events is ever held (goal: at most 1.15x).

    python benchmarks/bench_export.py                      # 2M events
    python benchmarks/bench_export.py --events 10000000    # the issue's 10M
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL = 1.15

_MEASURE = r"""
import sys
from pathlib import Path
from memtui.api import open as open_capture
cap = open_capture(sys.argv[1], use_cache=False)
found = cap.findings().devices
if sys.argv[2] == "perfetto":
    from memtui.export.perfetto import export_perfetto
    export_perfetto(cap.view(), found, Path(sys.argv[3]))
elif sys.argv[2] == "parquet":
    from memtui.export.parquet import export_parquet
    export_parquet(cap.trace, Path(sys.argv[3]))
"""


def measure(path: Path, mode: str, out: Path) -> dict:
    """Wall time (s) and peak RSS (MiB) of one child doing ``mode``."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _MEASURE, str(path), mode, str(out)],
                             cwd=REPO, env={**os.environ, "MEMTUI_NO_CACHE": "1"})
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{mode} failed with status {child.returncode}")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out.is_dir() \
        else (out.stat().st_size if out.exists() else 0)
    return {"mode": mode, "wall_s": time.perf_counter() - start,
            "peak_mib": usage.ru_maxrss / 1024, "output_mb": size / 1e6}


def bench(n_events: int, folder: Path) -> list[dict]:
    from benchmarks.generate import write_snapshot

    path = write_snapshot(folder / f"bench_export_{n_events}.pickle", n_events=n_events)
    runs = [measure(path, "open", folder / "none"),
            measure(path, "perfetto", folder / "trace.json"),
            measure(path, "parquet", folder / "frames")]
    for run in runs:
        run["events"] = n_events
        run["file_mb"] = path.stat().st_size / 1e6
        run["peak_ratio"] = run["peak_mib"] / runs[0]["peak_mib"]
        run["wall_ratio"] = run["wall_s"] / runs[0]["wall_s"]
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[2_000_000])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="memtui-bench-export-") as tmp:
        for n in args.events:
            rows += bench(n, Path(tmp))
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'events':>10} {'mode':>9} {'wall s':>8} {'x open':>7} {'peak MiB':>9} "
          f"{'x open':>7} {'output MB':>10}")
    for r in rows:
        print(f"{r['events']:>10} {r['mode']:>9} {r['wall_s']:>8.2f} {r['wall_ratio']:>7.2f} "
              f"{r['peak_mib']:>9.0f} {r['peak_ratio']:>7.2f} {r['output_mb']:>10.1f}")
    worst = max(r["peak_ratio"] for r in rows)
    print(f"peak memory of an export at most {worst:.2f}x the open's (goal {GOAL}x): "
          f"{'met' if worst <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
