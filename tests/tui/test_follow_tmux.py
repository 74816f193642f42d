"""``memtui --follow`` in a real tmux pane while the test writes the capture: the peak grows
live, the cursor follows (LIVE), ``g`` pauses it, ``G`` follows again, ``q`` quits."""

from __future__ import annotations

import shlex

from tests.helpers.live_captures import BURSTS, DbWriter
from tests.tui.test_tmux import Pane, memtui_command, pytestmark  # noqa: F401 (skip rule)


def test_follow_a_db_written_beside_the_pane(tmp_path):
    path = tmp_path / "memscope_dump_1.db"
    writer = DbWriter(path)
    writer.burst(BURSTS[0])
    pane = Pane(f"{memtui_command()} --follow {shlex.quote(str(path))}")
    try:
        pane.wait_for("● LIVE")
        pane.wait_for("peak 3.0K")  # burst 1: a (1 KiB) and b (2 KiB) together
        writer.burst(BURSTS[1])
        writer.burst(BURSTS[2])
        screen = pane.wait_for("peak 12.0K")  # c and d together
        assert "● LIVE" in screen
        pane.keys("g")
        pane.wait_for("⏸")
        pane.keys("G")
        pane.wait_for("● LIVE")
        pane.keys("q")
        pane.wait_for("EXIT=0")
    finally:
        writer.close()
        pane.close()
