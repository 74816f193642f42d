"""The real ``memtui`` command in a tmux pane: keys in, screen text out.

Runs ``memtui`` (the installed script, else ``python -m memtui.cli``) in an 80x24 pane of
a private tmux server, sends keys with ``send-keys`` and reads the pane with
``capture-pane``.  Skips where tmux is absent.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from memtui.analysis.tables import format_time
from memtui.analysis.timeline.at_time import Timeline
from memtui.sources import open_capture
from tests.conftest import REPO

DEMO = REPO / "snapshots" / "demo_training.pickle"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed: the real-terminal test needs it")


def memtui_command() -> str:
    script = shutil.which("memtui")
    if script:
        return shlex.quote(script)
    return f"{shlex.quote(sys.executable)} -m memtui.cli"


class Pane:
    """One tmux session on a private server, running ``command``."""

    def __init__(self, command: str, width: int = 80, height: int = 24) -> None:
        self.socket = f"memtui-test-{uuid.uuid4().hex[:8]}"
        env_prefix = f"cd {shlex.quote(str(REPO))} && PYTHONPATH={shlex.quote(str(REPO))} "
        shell = f"{env_prefix}{command}; echo EXIT=$?; sleep 30"
        started = self.run_tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y",
                                str(height), "env", "TERM=xterm-256color", "sh", "-c", shell)
        if started.returncode != 0:  # say why, rather than wait on a pane that is not there
            raise AssertionError(f"tmux could not start the pane: {started.stderr.strip()}")

    def run_tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=20, env={**os.environ, "TMUX": ""})

    def tmux(self, *args: str) -> str:
        return self.run_tmux(*args).stdout

    def state(self) -> str:
        """What tmux says of the pane (its process, whether it ended), for a failure."""
        panes = self.run_tmux("list-panes", "-t", "t", "-F",
                              "pid=#{pane_pid} dead=#{pane_dead} command=#{pane_current_command}")
        return (panes.stdout or panes.stderr).strip()

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")  # -J: join wrapped lines

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "t", key)
            time.sleep(0.15)

    def wait_for(self, *texts: str, timeout: float = 60.0) -> str:
        """The screen once one of ``texts`` is on it."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if any(text in screen for text in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{texts!r} never appeared in {timeout:.0f} s (tmux: "
                             f"{self.state()}); the pane shows:\n{screen}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def pane_factory():
    panes = []

    def make(command: str) -> Pane:
        pane = Pane(command)
        panes.append(pane)
        return pane

    yield make
    for pane in panes:
        pane.close()


def test_memtui_alone_opens_the_demo_and_answers_keys(pane_factory):
    trace = open_capture(DEMO)
    timeline = Timeline.build(trace, "cuda:0")
    peak_time = format_time(timeline.peak_t, timeline.start, "ns")
    pane = pane_factory(memtui_command())
    pane.wait_for("cuda:0 │")  # the status bar (wait_for fails the test if it never shows)
    pane.keys("1")  # the Findings screen may come first (the demo has a leak): the Trend
    pane.wait_for("Live at")
    pane.wait_for("▲ peak")  # the loading screen may linger a frame after the first paint
    pane.keys("p")  # (the Findings screen may have come first: the demo has a leak)
    # the status bar at the peak: "at peak" there while the cursor is where the app opened
    # it (issue 23) takes the room of the full forms in 80 columns
    screen = pane.wait_for("alloc 5.4 GiB", "A 5.4G │ R 6.4G │ at peak")
    assert peak_time in screen
    pane.keys("[", "L", "L", "]")  # a window over two tenths of the view
    screen = pane.wait_for("win ")
    assert "ms" in screen.split("win ")[1].splitlines()[0]
    pane.keys("z", "Z", "g")
    pane.wait_for("+0.000000 s")
    pane.keys("p", "5")
    screen = pane.wait_for("[Blocks]")
    assert "Call stack of block" in screen
    pane.keys("Tab")
    pane.wait_for("[Events]")
    pane.keys("q")
    pane.wait_for("EXIT=0")


def test_a_bad_file_prints_one_line_and_exits_2(pane_factory, tmp_path):
    bad = tmp_path / "broken.pickle"
    bad.write_bytes(b"\x80\x04\x95garbage")
    pane = pane_factory(f"{memtui_command()} {shlex.quote(str(bad))}")
    screen = pane.wait_for("EXIT=")
    assert f"memtui: {bad}: " in screen
    assert "EXIT=2" in screen
    assert "Traceback" not in screen


def test_two_paths_compare_in_the_terminal(pane_factory, tmp_path):
    from tests.helpers.compare_traces import MiB, write_loop

    clean = write_loop(tmp_path / "clean.pickle")
    leak = write_loop(tmp_path / "leak.pickle", leak=MiB)
    pane = pane_factory(f"{memtui_command()} {shlex.quote(str(clean))} {shlex.quote(str(leak))}")
    screen = pane.wait_for("B - A")
    assert "A clean.pickle" in screen and "B leak.pickle" in screen
    pane.keys("G")
    pane.wait_for("B - A +3.0 MiB here")
    pane.keys("7")
    screen = pane.wait_for("log_metrics (train.py:60)")
    assert "+4.0 MiB" in screen
    pane.keys("Tab")
    pane.wait_for("B │ cuda:0")
    pane.keys("q")
    pane.wait_for("EXIT=0")
