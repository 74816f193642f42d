"""What the benchmarks share: one whole process measured (wall, CPU, peak RSS).

A process's peak RSS (``ru_maxrss``) starts at the high-water mark of the process that
started it: Linux carries the parent's into the child through fork (or vfork) and exec.  A
benchmark that has generated a big input, or loaded one, in its own process would read its
own peak in every command it starts afterwards (a 20M-event snapshot written in-process
made every row read 7.6 GB).  So each command is started by a small launcher process (a
bare interpreter, about 10 MB) that times it and reports its rusage: the figure is the
command's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_LAUNCH = """\
import json, os, subprocess, sys, time
argv = json.loads(sys.argv[1])
start = time.perf_counter()
child = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss": usage.ru_maxrss * 1024,
                  "returncode": os.waitstatus_to_exitcode(status)}))
"""


def run_process(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall seconds, CPU seconds and peak RSS of one whole process (started by a small
    launcher: module docstring)."""
    done = subprocess.run([sys.executable, "-c", _LAUNCH, json.dumps(argv)], cwd=REPO,
                          env=env, stdout=subprocess.PIPE, text=True, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures.pop("returncode"):
        raise RuntimeError(f"{argv} exited with an error")
    return figures
