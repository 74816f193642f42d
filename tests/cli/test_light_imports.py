"""Start-up cost (issue 11, goal 5): the command-line paths import only what they need.

Each case runs ``memtui.cli.main`` in a fresh interpreter and lists the heavy libraries
left in ``sys.modules`` afterwards: ``--help`` and a command's ``--help`` import none of
them, ``summary`` never imports textual, and a reopened ``summary`` (its figures kept in the
reopen cache) reads neither polars nor numpy nor pyarrow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.hand_snapshot import write_hand_snapshot

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("textual", "polars", "numpy", "pyarrow", "rich")
_PROBE = """
import contextlib, io, json, sys
from memtui.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        status = main(sys.argv[1:])
    except SystemExit as done:  # argparse's --help
        status = done.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(HEAVY)))
print(json.dumps({"status": status, "heavy": heavy, "out": out.getvalue()}))
"""


def imported_by(*argv: str) -> dict:
    """Status, output and which of HEAVY ``memtui ARGV`` left imported (a fresh process)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.replace("HEAVY", repr(json.dumps(HEAVY))), *argv],
        cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["summary", "--help"], ["cache", "--help"],
                                  ["findings", "--help"], ["state", "--help"],
                                  ["check", "--help"], ["report", "--help"],
                                  ["export", "--help"]])
def test_help_imports_no_heavy_library(argv):
    got = imported_by(*argv)
    assert got["status"] == 0
    assert "usage: memtui" in got["out"]
    assert got["heavy"] == []


@pytest.mark.slow
def test_summary_never_imports_textual_and_a_reopen_reads_no_frames(tmp_path):
    snapshot = write_hand_snapshot(tmp_path / "hand.pickle")
    first = imported_by("summary", str(snapshot))
    assert first["status"] == 0
    assert "textual" not in first["heavy"] and "polars" in first["heavy"]
    again = imported_by("summary", str(snapshot))
    assert again["status"] == 0
    assert again["out"] == first["out"]
    assert again["heavy"] == []  # the figures came from the cache entry, not the trace
    as_json = imported_by("summary", "--json", str(snapshot))
    assert json.loads(as_json["out"])["path"] == str(snapshot)
    assert as_json["heavy"] == []
    fresh = imported_by("summary", "--no-cache", str(snapshot))
    assert fresh["out"] == first["out"]
