"""What the benchmarks share: one whole process measured (wall, CPU, peak RSS)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_process(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall seconds, CPU seconds and peak RSS of one whole process."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"{argv} exited {child.returncode}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": usage.ru_maxrss * 1024}
