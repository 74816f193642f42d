"""Two figures of the replay read from a capture: the capacity a recorded OOM shows
(memtui/analysis/replay/predict.py, ``inferred_capacity``: reserved just before the OOM
plus what the driver said was free on the device then; the hand snapshot of
tests/helpers/hand_snapshot.py ends in an OOM of 2048 bytes with 100 bytes free, its last
event, index 10), and the share of allocs at their recorded address the proof holds at."""

from __future__ import annotations

from dataclasses import replace

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



@pytest.mark.parametrize(("at_address", "holds"), [(995, True), (990, True), (989, False)])
def test_the_proof_holds_from_99_percent_of_allocs_at_their_address(hand, at_address, holds):
    """The goal is a share (ADDRESS_GOAL, 0.99), not all of them: 995 of 1000 allocs at
    their recorded address is 99.5 % and holds, 989 does not."""
    trace, device, _ = hand
    proof, _ = prove(trace, device)
    proof = replace(proof, refused="", allocs=1000, allocs_at_address=at_address,
                    segment_reproduced=dict(proof.segment_events), unknown_frees=0)
    assert proof.address_share == at_address / 1000
    assert proof.holds is holds
    assert (proof.why_not() == "") is holds
