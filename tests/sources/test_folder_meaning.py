"""A folder means one thing to every command and the API (issue 31 items 2 and 9, issue 35
item 11): its ranks, or one capture when it is one result; a bounded walk that does not
wander; loose profiler files grouped by rank and opened together, what is left out said.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtui
from memtui.cli import main
from memtui.errors import CaptureError
from memtui.sources import open_capture
from memtui.sources.common import walk as walk_module
from memtui.sources.ranks import discover_ranks
from tests.conftest import SHARED_DATA
from tests.helpers.folder_shapes import (
    MiB,
    loose_group,
    memscope_dump,
    profiler_rank,
    snapshot,
)


def peaks(capture) -> list[int]:
    return sorted(d.peak_allocated_bytes for d in capture.summary().devices)


def rank_peaks(capsys, folder) -> list[int]:
    assert main(["summary", str(folder), "--json", "--workers", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    return sorted(d["peak_allocated_bytes"] for d in data["devices"])


def test_a_backup_copy_is_a_second_capture_never_merged(tmp_path, capsys):
    """The issue's probe: a dump beside its backup copy further down.  ``check`` no longer
    sees one capture of doubled events; ``summary`` lists two ranks; the API refuses."""
    run = tmp_path / "run"
    dump = memscope_dump(run / "a" / "memscope_dump_X.db")
    (run / "backup" / "old").mkdir(parents=True)
    shutil.copyfile(dump, run / "backup" / "old" / "memscope_dump_X.db")
    own = peaks(memtui.open(dump))
    assert rank_peaks(capsys, run) == own * 2  # two ranks, each its own figures
    with pytest.raises(CaptureError, match="holds 2 captures"):
        memtui.open(run)
    assert main(["check", str(run), "--max-peak", "5MiB"]) == 2
    err = capsys.readouterr().err
    assert "holds 2 captures (a/memscope_dump_X.db, backup/old/memscope_dump_X.db)" in err
    assert err.count("\n") == 1


def test_a_folder_of_one_capture_is_that_capture(tmp_path):
    snapshot(tmp_path / "run" / "deep" / "er" / "rank3.pickle", rank=3, peak=5 * MiB)
    capture = memtui.open(tmp_path / "run")
    assert capture.path.endswith("rank3.pickle") and peaks(capture) == [5 * MiB]


def test_profiler_rank_folders_side_by_side_are_one_capture_and_ranks(tmp_path, capsys):
    for rank in (0, 1):
        profiler_rank(tmp_path / "prof", f"host_{rank}_ascend_pt", rank, rank, 10 + rank)
    capture = memtui.open(tmp_path / "prof")
    assert capture.devices == ["rank0/npu0", "rank1/npu1"]
    assert peaks(capture) == rank_peaks(capsys, tmp_path / "prof") == [10 * MiB, 11 * MiB]


def test_several_unrelated_captures_are_ranks_for_every_command(tmp_path, capsys):
    run = tmp_path / "run"
    snapshot(run / "rank0.pickle", 0)
    memscope_dump(run / "rank1" / "memscope_dump_1.db")
    for argv in (["findings", run], ["state", run], ["check", run], ["whatif", run],
                 ["export", run, "--to", "perfetto", "-o", tmp_path / "x.json"],
                 ["report", run, "-o", tmp_path / "x.html"], ["compare", run, run]):
        assert main([str(a) for a in argv]) == 2, argv
        err = capsys.readouterr().err
        assert "holds 2 captures" in err and "memtui summary" in err, err
    assert len(rank_peaks(capsys, run)) == 2


def test_a_walk_of_the_root_does_not_wander():
    """``memtui.open("/")`` is one line, never a capture of whatever lies anywhere."""
    with pytest.raises(CaptureError):
        memtui.open("/")


def test_a_walk_stops_at_its_entry_cap(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(walk_module, "MAX_ENTRIES", 50)
    for k in range(60):
        (tmp_path / "big" / f"d{k:02}").mkdir(parents=True)
    snapshot(tmp_path / "big" / "d59" / "rank0.pickle")
    with pytest.raises(CaptureError, match="more than 50 entries"):
        memtui.open(tmp_path / "big")
    assert main(["summary", str(tmp_path / "big")]) == 2
    assert "more than 50 entries" in capsys.readouterr().err


def test_links_to_folders_are_never_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    snapshot(elsewhere / "rank7.pickle", 7)
    run = tmp_path / "run"
    snapshot(run / "rank0.pickle", 0)
    (run / "out").symlink_to(elsewhere, target_is_directory=True)
    (run / "loop").symlink_to(run, target_is_directory=True)
    (run / "up").symlink_to(tmp_path, target_is_directory=True)
    found = discover_ranks([run])
    assert [c.rank for c in found.captures] == [0]
    assert any("link(s) to folders not followed" in w for w in found.warnings)
    assert memtui.open(run).path.endswith("rank0.pickle")


def test_unreadable_entries_are_skipped_with_a_warning(tmp_path, monkeypatch, capsys):
    """Item 9: ``x -> /proc/1/cwd`` (or a folder without permission) is a warning."""
    run = tmp_path / "run"
    snapshot(run / "rank0.pickle", 0)
    snapshot(run / "rank1.pickle", 1)
    (run / "locked").mkdir()
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(walk_module.os, "scandir", scandir)
    assert main(["summary", str(run), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "locked: Permission denied" in out and "Traceback" not in out


@pytest.mark.skipif(not os.path.lexists("/proc/1/cwd"), reason="no /proc/1/cwd here")
def test_a_link_into_proc_is_no_traceback(tmp_path, capsys):
    run = tmp_path / "run"
    snapshot(run / "rank0.pickle", 0)
    (run / "x").symlink_to("/proc/1/cwd")
    for argv in (["summary", str(run)], ["summary", str(run / "x")], ["findings", str(run)]):
        code = main(argv)
        captured = capsys.readouterr()
        assert code in (0, 2) and "Traceback" not in captured.err + captured.out


def test_loose_profiler_files_are_grouped_by_rank_and_opened_together(tmp_path, capsys):
    folder = tmp_path / "flat"
    first = loose_group(folder, "runA_rank0__", rank=5, device=0, mib=12)
    loose_group(folder, "runB_rank1__", rank=1, device=1, mib=20)
    (folder / "runC__profiler_info_0.json").write_text('{"rank_id": 9}')
    found = discover_ranks([folder])
    assert [(c.path.name, c.rank) for c in found.captures] == [
        ("runB_rank1__memory_record.csv", 1), ("runA_rank0__memory_record.csv", 5)]
    assert any("runC__profiler_info_0.json" in w and "left out" in w for w in found.warnings)
    capture = memtui.open(first)  # memory_record opens with its operator_memory
    assert capture.trace.blocks.height == 1 and peaks(capture) == [12 * MiB]
    assert rank_peaks(capsys, folder) == [12 * MiB, 20 * MiB]


def test_a_group_member_changed_is_a_new_cache_entry(tmp_path):
    folder = tmp_path / "flat"
    first = loose_group(folder, "r0_", rank=0)
    assert memtui.open(first).trace.blocks.height == 1
    ops = folder / "r0_operator_memory.csv"
    ops.write_text(ops.read_text() + ops.read_text().splitlines()[1] + "\n")
    assert memtui.open(first).trace.blocks.height == 2  # not the cached one-block trace


def test_the_real_profiler_folder_leaves_nothing_out_silently(capsys):
    folder = SHARED_DATA / "profiler"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent: the real captures live beside the checkout")
    found = discover_ranks([folder])
    names = sorted(c.path.name for c in found.captures)
    assert names == sorted([
        "fulldb__msprof_0.db", "oldfmt_test_rank_0__memory_record.csv",
        "pt_db_l0_rank0__ascend_pytorch_profiler_0.db",
        "pt_db_l0_rank1__ascend_pytorch_profiler_1.db", "pt_st_l2_rank0__memory_record.csv",
        "pt_text_l1_rank0__memory_record.csv", "test_rank_1__memory_record.csv"])
    assert any(w.startswith("rank 0 is named by 4 captures") for w in found.warnings)
    # every memory file of the folder is read by one capture, none by two
    read: list[str] = []
    for capture in found.captures:
        ranks = open_capture(capture.path).meta.extra.get("ranks", [])
        read += [Path(f).name for rank in ranks for f in rank["files"]]
    memory_files = sorted(p.name for p in folder.iterdir()
                          if p.suffix in (".csv", ".db") and "profiler_info" not in p.name)
    assert sorted(read) == memory_files
    trace = open_capture(folder / "pt_st_l2_rank0__memory_record.csv")
    rows = (folder / "pt_st_l2_rank0__operator_memory.csv").read_text().count("\n") - 1
    assert trace.blocks.height == rows == 3103


# -- one meaning, whatever the shape --------------------------------------------------------

PIECES = ["snapshot", "memscope", "profiler rank", "loose group", "backup copy", "link"]


def _build(folder: Path, pieces: list[tuple[str, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index, (piece, depth) in enumerate(pieces):
        where = folder.joinpath(*[f"level{k}" for k in range(depth)])
        if piece == "snapshot":
            snapshot(where / f"rank{index}.pickle", index, (index + 1) * MiB)
        elif piece == "memscope":
            memscope_dump(where / f"run{index}" / "memscope_dump_1.db")
        elif piece == "profiler rank":
            profiler_rank(where, f"h{index}_ascend_pt", index, index, 10 + index)
        elif piece == "loose group":
            loose_group(where, f"copy{index}_", index, index, 30 + index)
        elif piece == "backup copy" and index:
            source = next((p for p in folder.rglob("*.pickle") if p.is_file()), None)
            if source is not None:
                (where / "backup").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, where / "backup" / source.name)
        elif piece == "link":
            where.mkdir(parents=True, exist_ok=True)
            if not (where / "link").exists():
                (where / "link").symlink_to(folder, target_is_directory=True)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pieces=st.lists(st.tuples(st.sampled_from(PIECES), st.integers(0, 3)), min_size=1,
                       max_size=4))
def test_every_command_sees_the_same_folder(tmp_path_factory, capsys, pieces):
    """The API's capture of a folder has the devices (and peaks) of the ranks ``summary``
    lists for it, or it is refused naming as many captures as ``summary`` lists."""
    folder = tmp_path_factory.mktemp("shape") / "run"
    _build(folder, pieces)
    found = discover_ranks([folder])
    try:
        capture = memtui.open(folder)
    except CaptureError as exc:
        message = str(exc)
        assert "\n" not in message
        if len(found.captures) > 1:
            assert f"holds {len(found.captures)} captures" in message
        return
    assert found.captures, "a capture opened from a folder that lists none"
    assert peaks(capture) == rank_peaks(capsys, folder)
