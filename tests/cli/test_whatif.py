"""``memtui whatif``: the proof on every capture, predictions where it holds, refusals
where it does not, bad settings as one line and exit 2."""

from __future__ import annotations

import json

import pytest

from memtui.analysis.replay.settings import MIB
from memtui.cli import main
from tests.conftest import require_shared
from tests.helpers.hand_snapshot import write_hand_snapshot
from tests.helpers.replay_snapshots import write_ops

OPS = [("alloc", 40 * MIB, 0), ("free", 0), ("alloc", 10 * MIB, 0)]


def whatif(capsys, *args) -> tuple[int, str, str]:
    code = main(["whatif", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_proof_and_prediction_text(tmp_path, capsys):
    path = write_ops(tmp_path / "ops.pickle", OPS)
    code, out, _ = whatif(capsys, path, "--set", "max_split_size_mb:32")
    assert code == 0
    assert "allocs at the recorded address  2 / 2  100.0%" in out
    assert "segment events reproduced       1 / 1" in out
    assert "=> proven" in out
    assert "what if max_split_size_mb:32" in out
    assert "reserved peak" in out and "40.0 MiB" in out and "50.0 MiB" in out
    assert "cannot know:" in out


def test_json_has_both_runs(tmp_path, capsys):
    path = write_ops(tmp_path / "ops.pickle", OPS)
    code, out, _ = whatif(capsys, path, "--set", "max_split_size_mb:32", "--capacity",
                          "30MiB", "--json")
    assert code == 0
    device = json.loads(out)["devices"][0]
    assert device["proof"]["holds"] is True
    prediction = device["prediction"]
    assert prediction["capacity"] == 30 * MIB
    assert prediction["recorded"]["reserved_peak"] == 40 * MIB
    assert [c["change"] for c in prediction["oom_changes"]] == ["caused"]
    assert prediction["cannot_know"]


def test_no_change_prints_only_the_proof(tmp_path, capsys):
    path = write_ops(tmp_path / "ops.pickle", OPS)
    code, out, _ = whatif(capsys, path, "--json")
    assert code == 0
    assert json.loads(out)["devices"][0]["prediction"] is None


def test_refused_where_the_proof_fails(tmp_path, capsys):
    # the hand snapshot's 4 KiB segment is no caching allocator's: the proof fails, and says
    # which rule (get_allocation_size gives 2 MiB)
    path = write_hand_snapshot(tmp_path / "hand.pickle")
    code, out, err = whatif(capsys, path, "--set", "expandable_segments:True")
    assert code == 2  # a refused prediction (issue 31 item 12): the report, then one line
    assert "NOT proven" in out and "get_allocation_size gives 2.0 MiB" in out
    assert "refused: the replay is not proven" in out
    assert err.count("\n") == 1 and "prediction refused (the replay is not proven" in err


@pytest.mark.parametrize("args, problem", [
    (["--set", "max_split_size_mb:5"], "at least 20"),
    (["--set", "nonsense:1"], "unknown setting"),
    (["--capacity", "lots"], "not a size"),
    (["--device", "cuda:9"], "no device"),
])
def test_bad_settings_are_one_line(tmp_path, capsys, args, problem):
    path = write_ops(tmp_path / "ops.pickle", OPS)
    assert main(["whatif", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert problem in err and err.count("\n") == 1 and "Traceback" not in err


def test_real_capture_prediction(capsys):
    """cs336's full step (6,769 allocs, 589 cudaMallocs, 790 cudaFrees, reserved peak
    62,830,673,920 bytes, all read from the capture below): the replay is proven exactly,
    its recorded figures are the capture's, and expandable segments save what the two
    peaks differ by."""
    import polars as pl

    from memtui.sources import open_capture

    folder = require_shared("torch_snapshots")
    path = folder / "t26_cs336_kk_ctx512_fullstep.pickle"
    code, out, _ = whatif(capsys, path, "--set", "expandable_segments:True", "--json")
    assert code == 0
    [device] = json.loads(out)["devices"]
    events = open_capture(path).device_events("cuda:0")
    count = dict(events.group_by("action").len().iter_rows())
    reserved = events["reserved"]
    proof = device["proof"]
    assert proof["holds"] and proof["refused"] is None
    assert proof["allocs"] == proof["allocs_at_recorded_address"] == count["alloc"]
    recorded_segments = {"segment_alloc": count["segment_alloc"],
                         "segment_free": count["segment_free"]}
    assert proof["segment_events_recorded"] == recorded_segments
    assert proof["segment_events_reproduced"] == recorded_segments
    assert proof["reserved_max_error"] == 0 and proof["reserved_share"] == 1.0
    prediction = device["prediction"]
    assert prediction["settings"] == "expandable_segments:True"
    recorded, predicted = prediction["recorded"], prediction["predicted"]
    assert recorded["reserved_peak"] == reserved.max() == 62_830_673_920
    assert reserved[recorded["reserved_peak_event"]] == reserved.max()
    assert recorded["cuda_malloc"] == count["segment_alloc"]
    assert recorded["cuda_free"] == count["segment_free"]
    assert recorded["reserved_at_end"] == reserved[-1]
    assert recorded["ooms"] == predicted["ooms"] == 0
    # expandable segments: fewer bytes reserved at the peak, and the saving is the gap
    assert 0 < predicted["reserved_peak"] < recorded["reserved_peak"]
    assert prediction["reserved_peak_saving"] == (
        recorded["reserved_peak"] - predicted["reserved_peak"])
    # fewer bytes fragmented at the reserved peak (the finding's measure), and the
    # recorded run's figure is the pool's own at that moment
    assert predicted["fragmented_at_peak"] < recorded["fragmented_at_peak"]
    assert events.filter(pl.col("action") == "oom").is_empty()
    assert any("no device capacity is known" in line for line in prediction["cannot_know"])
