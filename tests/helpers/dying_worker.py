"""A rank worker that dies as the kernel's OOM killer ends one: importable by the spawned
processes of a pool (tests/cli/test_ranks_faults.py)."""

from __future__ import annotations

import os
import signal

from memtui.rankload import summarize_capture


def summarize_or_die(capture, points):
    """Kill this worker process outright for a capture named ``killed*``."""
    if capture.path.name.startswith("killed"):
        os.kill(os.getpid(), signal.SIGKILL)
    return summarize_capture(capture, points)
