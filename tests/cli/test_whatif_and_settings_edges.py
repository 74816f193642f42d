"""Issue 31 items 6 and 12: hostile ``allocator_settings`` and ``whatif``'s refusals.

A snapshot's ``allocator_settings`` may hold anything (a string for a size, NaN, a list
where a table goes, the whole entry a list or a string): every command still answers,
the value left out is a warning naming it, and ``expandable_segments: "False"`` reads as
False.  ``whatif`` refuses in one line with exit status 2 where no device answers (no
replay for msMemScope, the profiler, a state-only dump; a prediction refused on an
unproven replay), and names the option a bad size came from.
"""

from __future__ import annotations

import json
import math
import pickle

import pytest

import memtui
from memtui.analysis.findings.allocator import settings_of
from memtui.analysis.replay.settings import from_capture
from memtui.cli import main
from memtui.sources.torch_snapshot.settings import clean_settings
from tests.conftest import require_shared
from tests.helpers.compare_traces import loop_snapshot
from tests.helpers.memscope_files import SCENARIO, write_db
from tests.helpers.replay_snapshots import write_ops

OPS = [("alloc", 40 << 20, 0), ("free", 0), ("alloc", 10 << 20, 0)]

HOSTILE_SETTINGS = [
    {"max_split_size": "abc"},
    {"max_split_size": math.nan},
    {"max_split_size": math.inf, "garbage_collection_threshold": math.nan},
    {"roundup_power2_divisions": [1, 2, 4]},
    {"roundup_power2_divisions": {"1": "x", "2": 3}},
    {"garbage_collection_threshold": "x"},
    {"garbage_collection_threshold": 7.5},
    {"expandable_segments": [True]},
    {1: 2, "PYTORCH_CUDA_ALLOC_CONF": 5},
    [("max_split_size", 1)],
    "max_split_size:20",
]


def write_with_settings(path, settings) -> str:
    snapshot = loop_snapshot(steps=6, leak=1 << 20)
    snapshot["allocator_settings"] = settings
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return str(path)


@pytest.mark.parametrize("settings", HOSTILE_SETTINGS, ids=repr)
def test_hostile_settings_are_a_warning_on_every_command(tmp_path, capsys, settings):
    path = write_with_settings(tmp_path / "s.pickle", settings)
    for argv in (["summary", path], ["findings", path],
                 ["check", path, "--max-peak", "1GiB", "--max-leak-per-step", "1GiB"],
                 ["report", path, "-o", str(tmp_path / "r.html")],
                 ["export", path, "--to", "perfetto", "-o", str(tmp_path / "r.json")],
                 ["whatif", path], ["whatif", path, "--set", "expandable_segments:True"]):
        code = main(argv)
        captured = capsys.readouterr()
        assert code in (0, 2) and "Traceback" not in captured.err, (argv, captured.err)
        if argv[0] in ("summary", "findings", "check", "report", "export"):
            assert code == 0, (argv, captured.err)
    capture = memtui.open(path)
    assert capture.summary().devices[0].peak_allocated_bytes > 0
    assert any("allocator_settings" in w and "left out" in w for w in capture.warnings)


@pytest.mark.parametrize("flag, expected", [("False", False), ("false", False),
                                            ("True", True), (False, False), (True, True)])
def test_expandable_segments_written_as_text_reads_as_it_says(tmp_path, flag, expected):
    path = write_with_settings(tmp_path / "s.pickle", {"expandable_segments": flag})
    trace = memtui.open(path).trace
    assert from_capture(trace.meta.extra["allocator_settings"]).expandable_segments is expected
    assert settings_of(trace).expandable_segments is expected
    # also where a hand-built trace hands the raw string on
    assert from_capture({"expandable_segments": flag}).expandable_segments is expected


def test_clean_settings_keeps_what_pytorch_writes():
    real = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": True,
            "roundup_power2_divisions": {"1": 0, "2": 4}, "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False}
    assert clean_settings(real) == (real, [])
    kept, warnings = clean_settings({"max_split_size": "abc", "expandable_segments": "False"})
    assert kept == {"expandable_segments": False} and len(warnings) == 1
    assert "max_split_size 'abc'" in warnings[0]
    assert clean_settings([1])[0] == {} and "a list" in clean_settings([1])[1][0]


def test_the_real_settings_still_read(tmp_path):
    folder = require_shared("torch_snapshots")
    trace = memtui.open(folder / "t26_cs336_kk_ctx512_fullstep.pickle").trace
    assert not [w for w in trace.meta.warnings if "allocator_settings" in w]


# -- whatif's refusals (item 12) -------------------------------------------------------------

def whatif(capsys, *argv):
    code = main(["whatif", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_no_replay_is_a_refusal_with_exit_2(tmp_path, capsys):
    db = write_db(tmp_path / "memscope_dump_1.db", SCENARIO)
    code, _, err = whatif(capsys, db, "--set", "expandable_segments:True")
    assert code == 2 and err.count("\n") == 1
    assert "no replay (only PyTorch snapshots record" in err


def test_a_state_only_dump_is_a_refusal(capsys):
    folder = require_shared("torch_snapshots")
    code, _, err = whatif(capsys, folder / "t21_select_n_snapshot_dec166a_state_only.pickle")
    assert code == 2 and "no alloc events" in err


def test_a_proven_prediction_still_exits_0(tmp_path, capsys):
    path = write_ops(tmp_path / "ops.pickle", OPS)
    code, out, err = whatif(capsys, path, "--set", "max_split_size_mb:32", "--json")
    assert code == 0 and err == "" and json.loads(out)["devices"][0]["prediction"]


@pytest.mark.parametrize("argv, said", [
    (["--fraction-limit", "garbage"], "--fraction-limit garbage: not a size"),
    (["--capacity", "0"], "--capacity 0: 0"),
    (["--capacity", "0.5"], "--capacity 0.5: 0"),
    (["--fraction-limit", "0.4"], "--fraction-limit 0.4: 0"),
    (["--capacity", "99999999T"], "more than a petabyte"),
    (["--set", ""], "no setting in it"),
    (["--set", " , "], "no setting in it"),
    (["--set", "max_split_size_mb:99999999999999999999999999"], "more than a petabyte"),
])
def test_bad_options_name_themselves(tmp_path, capsys, argv, said):
    path = write_with_settings(tmp_path / "s.pickle", {})
    code, out, err = whatif(capsys, path, *argv)
    assert code == 2 and out == "" and said in err and err.count("\n") == 1, err
