"""memtui/units.py: sizes and counts as people read them (issue 23 point 9: "1 blocks",
"1 matches", "(0 event)")."""

from __future__ import annotations

from memtui.units import counted, format_bytes


def test_a_count_has_its_noun_in_the_right_number():
    assert counted(1, "block") == "1 block"
    assert counted(0, "event") == "0 events"
    assert counted(2, "block") == "2 blocks"
    assert counted(1, "match") == "1 match"
    assert counted(3, "match") == "3 matches"
    assert counted(2, "entry") == "2 entries"
    assert counted(2, "day") == "2 days"
    assert counted(1234, "row") == "1,234 rows"


def test_sizes_in_binary_units():
    assert format_bytes(None) == "-"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 << 30) == "3.0 GiB"


def test_a_snapshot_without_history_says_0_events(tmp_path):
    """The capture finding of a snapshot with no trace entries read "(0 event)"."""
    import pickle

    from memtui.analysis.findings.capture import find_capture_limits
    from memtui.sources import open_capture
    from tests.helpers.compare_traces import MiB, loop_snapshot

    snapshot = loop_snapshot(steps=1, leak=MiB)  # one leaked block alive in the dump
    snapshot["device_traces"] = [[]]  # and no history at all
    path = tmp_path / "state_only.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    titles = [f.title for f in find_capture_limits(open_capture(path), "cuda:0")]
    assert any(t.startswith("no allocation history (0 events): only the state") for t in titles)
