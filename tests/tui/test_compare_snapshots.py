"""SVG snapshots of compare mode at 80x24: the Trend of both runs with B - A, the Diff.

The pair is tests/helpers/compare_traces.py's clean loop against the same loop leaking
1 MiB a step.  Accept deliberate changes with
``pytest tests/tui/test_compare_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import re

import pytest

from memtui.sources import open_capture
from memtui.tui.compare_app import CompareApp
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.screen_figures import Shown


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_snap")
    return (open_capture(write_loop(folder / "clean.pickle")),
            open_capture(write_loop(folder / "leak.pickle", leak=MiB)))


def _row(shown: Shown, label: str) -> list[str]:
    return shown.line_with(rf"^ {label}\s").split()[len(label.split()):]


def test_compare_trend_at_the_end(snap_compare, pair):
    """Both curves on A's axis, the cursor on A's last event, B - A under them.  By hand
    (tests/helpers/compare_traces.py, 4 steps of 4 + 2 MiB, B keeping 1 MiB a step): A's
    last event is step 3's last free, where B, aligned by step, holds the three leaks of
    steps 0-2 (step 3's comes after); peaks 6 and 9 MiB, ends 0 and 4 MiB."""
    shown = Shown("G")
    assert snap_compare(CompareApp(*pair), terminal_size=(80, 24), run_before=shown)
    assert "B leak.pickle 3.0M" in shown.lines[0] and "A clean.pickle 0B" in shown.lines[0]
    shown.has("B - A +3.0 MiB here", "4 step pairs")
    assert _row(shown, "peak allocated") == ["6.0", "MiB", "9.0", "MiB", "+3.0", "MiB"]
    assert _row(shown, "peak reserved") == ["64.0", "MiB", "64.0", "MiB", "0"]
    assert _row(shown, "allocated at end") == ["0", "B", "4.0", "MiB", "+4.0", "MiB"]
    assert "event #23/24" in shown.line_with(r"^ A │")  # 4 steps of 6 events


def test_compare_diff(snap_compare, pair):
    """The Diff screen: the leaking stack first, at B's end and at its peak, only in B."""
    shown = Shown("7")
    assert snap_compare(CompareApp(*pair), terminal_size=(80, 24), run_before=shown)
    text = re.sub(r"\s+", " ", shown.text)
    assert "peak 6.0 MiB -> 9.0 MiB (+3.0 MiB) end 0 B -> 4.0 MiB (+4.0 MiB)" in text
    assert "new at B's end: 4 blocks 4.0 MiB" in text
    rows = [line.split() for line in shown.lines if re.match(r"^\s+[+-]\d", line)]
    assert rows == [
        ["+4.0", "MiB", "end", "0", "B", "4.0", "MiB", "stack", "B", "log_metrics",
         "(train.py:60)"],
        ["+3.0", "MiB", "peak", "0", "B", "3.0", "MiB", "stack", "B", "log_metrics",
         "(train.py:60)"]]
