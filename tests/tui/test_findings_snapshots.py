"""SVG snapshots of the Findings screen on the demo capture, at 80x24 and 120x40.

Accept a deliberate change of looks with
``pytest tests/tui/test_findings_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from memtui.loading import load_trace
from memtui.tui.app import MemtuiApp
from tests.conftest import REPO
from tests.helpers.toy_traces import ready, settle

DEMO = REPO / "snapshots" / "demo_training.pickle"


@pytest.fixture(scope="module")
def demo():
    return load_trace(DEMO)


def _keys(*keys):
    async def run(pilot):
        await ready(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_findings_screen_first_on_the_demo(snap_compare, demo, size):
    """The demo's planted leak is of high severity: the Findings screen comes first."""
    assert snap_compare(MemtuiApp(demo, findings_first=True), terminal_size=size,
                        run_before=_keys())


def test_findings_screen_on_the_peak(snap_compare, demo):
    """The peak's detail: bytes by stack, share and blocks."""
    assert snap_compare(MemtuiApp(demo), terminal_size=(120, 40),
                        run_before=_keys("6", "down", "down"))
