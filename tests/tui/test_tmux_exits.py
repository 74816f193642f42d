"""How the real app ends, in a tmux pane: quitting while a capture loads ends the process at
once (q or Ctrl+C), and a crash exits 1 with one line, never 0 (issue 12, defects 6, 11)."""

from __future__ import annotations

import shlex
import shutil
import sys

import pytest

from tests.tui.test_tmux import DEMO, pane_factory  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed: the real-terminal test needs it")

#: run_app on the demo with a loader that never finishes (as a FIFO or a huge file would).
_STUCK_LOADER = (
    "import sys, time, memtui.loading as loading; "
    "loading.load_trace = lambda *a, **k: time.sleep(600); "
    "from memtui.tui.app import run_app; "
    f"sys.exit(run_app({str(DEMO)!r}))"
)
#: run_app on the demo where the p key raises.
_CRASHING_KEY = (
    "import sys; from memtui.tui.app import MemtuiApp, run_app; "
    "MemtuiApp.action_peak = lambda self: 1 / 0; "
    f"sys.exit(run_app({str(DEMO)!r}))"
)


def _python(code: str) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_quitting_while_loading_ends_the_process(pane_factory, key):  # noqa: F811
    pane = pane_factory(_python(_STUCK_LOADER))
    pane.wait_for("loading")
    pane.keys(key)
    screen = pane.wait_for("EXIT=", timeout=15)
    assert "EXIT=0" in screen


def test_a_crash_exits_1_with_one_line(pane_factory):  # noqa: F811
    pane = pane_factory(_python(_CRASHING_KEY))
    # the findings are in (the status bar counts them): the Findings screen, which comes
    # first on the demo (it has a leak), cannot take over after the 1 key any more
    pane.wait_for(" found")
    pane.keys("1")  # back to the Trend
    pane.wait_for("▲ peak")
    pane.keys("p")
    screen = pane.wait_for("EXIT=", timeout=30)
    assert "EXIT=1" in screen
    assert "memtui: internal error (ZeroDivisionError: division by zero)" in screen
    assert "Traceback" not in screen
