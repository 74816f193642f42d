"""Discovery of rank captures (issue 14): ranks and devices from names and profiler_info."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtui.sources.ranks import discover_ranks, rank_of
from tests.helpers.rank_folders import write_ranks


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory) -> Path:
    return write_ranks(tmp_path_factory.mktemp("run") / "snapshots")


def test_rank_and_device_from_names(tmp_path):
    assert rank_of(Path("/x/rank12.pickle")) == 12
    assert rank_of(Path("/x/snapshot_rank_3_step10.pickle")) == 3
    assert rank_of(Path("/x/RANK-7/memory.pickle")) == 7
    assert rank_of(Path("/x/ascend_pytorch_profiler_4.db")) == 4
    assert rank_of(Path("/x/frank1.pickle")) is None  # "rank" inside a word
    assert rank_of(Path("/x/snapshot.pickle")) is None
    scope = tmp_path / "msmemscope_4242_20250101_ascend"
    for device in (1, 0):
        dump = scope / f"device_{device}" / "dump"
        dump.mkdir(parents=True)
        (dump / "memscope_dump_20250101.csv").write_text("ID,Event\n")
        (dump / "python_trace_20250101.csv").write_text("x\n")
    found = discover_ranks([tmp_path]).captures
    assert [(c.path.name, c.device_id) for c in found] == [("device_0", "0"), ("device_1", "1")]


def test_profiler_rank_from_profiler_info(tmp_path):
    for rank in (1, 0):
        root = tmp_path / f"host_{rank}_20250101_ascend_pt"
        (root / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        (root / f"profiler_info_{rank + 10}.json").write_text(json.dumps({"rank_id": rank}))
    found = discover_ranks([tmp_path]).captures
    assert [(c.path.name, c.rank) for c in found] == [
        ("host_0_20250101_ascend_pt", 0), ("host_1_20250101_ascend_pt", 1)]
    # A folder that is one rank is one capture, not several.
    assert len(discover_ranks([found[0].path]).captures) == 1


def test_discovery_orders_by_rank_and_skips_companions(ranks_dir):
    found = discover_ranks([ranks_dir])
    assert [c.rank for c in found.captures] == list(range(8))
    assert found.warnings == []
    assert discover_ranks([ranks_dir / "rank3.pickle", ranks_dir / "rank1.pickle"]
                          ).captures[0].rank == 1


def test_folders_above_the_given_one_name_no_rank(tmp_path):
    run = tmp_path / "rank8_jobs" / "run"
    for name in ("a.pickle", "b.pickle"):
        (run / "snapshots").mkdir(parents=True, exist_ok=True)
        (run / "snapshots" / name).write_bytes(b"x")
    assert [c.rank for c in discover_ranks([run]).captures] == [None, None]
    assert [c.rank for c in discover_ranks([tmp_path]).captures] == [8, 8]
    files = [run / "snapshots" / "a.pickle", run / "snapshots" / "b.pickle"]
    assert [c.rank for c in discover_ranks(files).captures] == [None, None]
