"""The capacity a recorded OOM shows (memtui/analysis/replay/predict.py,
``inferred_capacity``): reserved just before the OOM plus what the driver said was free on
the device then.  The hand snapshot (tests/helpers/hand_snapshot.py) ends in an OOM of 2048
bytes with 100 bytes free on the device, its last event (index 10)."""

from __future__ import annotations

import pytest

from memtui.analysis.replay.predict import inferred_capacity
from memtui.analysis.replay.proof import prove
from memtui.sources import open_capture
from tests.helpers.hand_snapshot import write_hand_snapshot


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    trace = open_capture(write_hand_snapshot(tmp_path_factory.mktemp("hand") / "h.pickle"))
    device = trace.meta.device_names[0]
    _, baseline = prove(trace, device)
    assert baseline is not None
    return trace, device, baseline


def test_an_oom_with_the_device_full_gives_reserved_before_it_plus_the_free_bytes(hand):
    trace, device, baseline = hand
    actions = baseline.events["action"].cast(str).to_list()
    oom = actions.index("oom")
    assert oom == len(actions) - 1 == 10  # the last event: nothing after it to read
    capacity, why = inferred_capacity(trace, device, baseline)
    assert capacity == int(baseline.reserved[oom - 1]) + 100
    assert why == "the recorded OOM at event 10"

