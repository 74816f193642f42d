"""A few OOMs are read by masks over the blocks, many through the interval indexes
(findings/oom.py ``FEW_OOMS``): the same findings either way, on every capture with OOMs
shipped here and beside the checkout (issue 34: the indexes of 1.7M blocks were the peak
of a 5M-event snapshot's first open with one OOM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.analysis.findings import oom
from memtui.analysis.layout.pool_state import oom_events
from memtui.analysis.timeline.live import device_index
from memtui.sources import open_capture
from tests.conftest import shared_files

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = [ROOT / "snapshots" / "demo_oom.pickle",
            *sorted((ROOT / "tests" / "data").glob("*oom*.pickle")),
            *shared_files("torch_snapshots", "*oom*")]


def _findings(path: Path, few: int) -> tuple[list, bool]:
    """The OOM findings of every device of ``path`` with FEW_OOMS set to ``few``, and
    whether the interval indexes of each device with OOM events were built."""
    trace = open_capture(path)
    saved = oom.FEW_OOMS
    oom.FEW_OOMS = few
    try:
        found = [(f.title, f.detail, f.evidence) for device in trace.meta.device_names
                 for f in oom.find_ooms(trace, device)]
    finally:
        oom.FEW_OOMS = saved
    built = [device_index(trace, d)._seq_lives is not None for d in trace.meta.device_names
             if oom_events(trace, d).height]
    return found, built


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_masks_and_indexes_give_the_same_findings(path):
    by_masks, built_for_masks = _findings(path, 1 << 30)
    by_indexes, built_for_indexes = _findings(path, -1)
    assert by_masks, "a capture with an OOM"
    assert by_masks == by_indexes
    assert not any(built_for_masks)  # no interval index made for a few OOMs
    assert all(built_for_indexes)  # (a device with OOM events: many of them, as it were)
