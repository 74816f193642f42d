"""Many ranks from the command line and every way of loading them (issue 14): summary
JSON of a folder and of several paths, a bad file skipped with a warning, the real
two-rank profiler DBs, and the same rows from one process, the pool and a Dask
LocalCluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtui.analysis.across.ranks import flag_outliers
from memtui.cli import main
from memtui.rankload import dask_available, summarize_capture
from memtui.sources.ranks import discover_ranks
from tests.conftest import SHARED_DATA, require_shared
from tests.helpers.rank_folders import expected_figures, figures, gather, write_ranks


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory) -> Path:
    return write_ranks(tmp_path_factory.mktemp("run") / "snapshots")


def test_a_bad_file_is_skipped_with_a_warning(tmp_path, capsys):
    folder = write_ranks(tmp_path / "run", n=4)
    (folder / "rank9.pickle").write_bytes(b"\x80\x04not a pickle at all")
    assert main(["summary", str(folder), "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert [r["rank"] for r in data["ranks"]] == [0, 1, 2, 3]
    assert len(data["devices"]) == 4
    assert any(w.startswith("skipped ") and "rank9.pickle" in w for w in data["warnings"])
    assert "rank9.pickle" in err and "warning" in err


def test_no_readable_rank_is_an_error(tmp_path, capsys):
    for name in ("rank0.pickle", "rank1.pickle"):
        (tmp_path / name).write_bytes(b"garbage")
    assert main(["summary", str(tmp_path)]) == 2
    assert "no rank could be read" in capsys.readouterr().err


def test_real_profiler_ranks(tmp_path):
    from tests.sources.test_ascend_profiler_real import db_figures

    names = [f"pt_db_l0_rank{r}__ascend_pytorch_profiler_{r}.db" for r in (0, 1)]
    if not all((SHARED_DATA / "profiler" / name).is_file() for name in names):
        pytest.skip(f"{SHARED_DATA / 'profiler'} is absent (shared data)")
    for name in names:
        (tmp_path / name).symlink_to(SHARED_DATA / "profiler" / name)
    found = discover_ranks([tmp_path]).captures
    assert [c.rank for c in found] == [0, 1]
    table = gather(found, how="serial")
    assert [(r.rank, r.device) for r in table.rows] == [(0, "rank0/npu0"), (1, "rank1/npu1")]
    for r, name in zip(table.rows, names, strict=True):
        hand = db_figures(name)
        assert (r.peak_allocated, r.allocated_at_end) == (hand["peak"], hand["alloc_end"])
        assert r.peak_reserved >= hand["resv_end"]
    assert not any(r.outlier for r in table.rows)  # two ranks: too few to judge


def test_summary_json_of_a_folder(ranks_dir, capsys):
    assert main(["summary", str(ranks_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "torch_snapshot"
    assert [(r["rank"], r["device"], r["peak_allocated_bytes"], r["peak_reserved_bytes"],
             r["allocated_at_end_bytes"], r["outlier"]) for r in data["ranks"]] == [
        (rank, dev, peak, resv, end, out) for rank, dev, _, peak, resv, end, _, out
        in expected_figures()]
    assert all(set(r) == {"rank", "device", "path", "peak_allocated_bytes",
                          "peak_reserved_bytes", "allocated_at_end_bytes", "outlier", "why"}
               for r in data["ranks"])
    assert [(d["device"], d["rank"], d["events"]) for d in data["devices"]][:2] == [
        ("cuda:0", 0, 3), ("cuda:1", 1, 3)]


def test_summary_of_several_paths(ranks_dir, capsys):
    paths = [str(ranks_dir / f"rank{r}.pickle") for r in (6, 5, 0, 1)]
    assert main(["summary", *paths]) == 0
    out = capsys.readouterr().out
    assert "4 rank devices" in out
    # Four ranks: median end 0, rank 6 keeps 16 MiB; median peak 16 MiB, rank 5 40 MiB.
    assert "outlier: rank 5 cuda:5: peak allocated 40.0 MiB" in out
    assert "outlier: rank 6 cuda:6: allocated at end 16.0 MiB" in out


def test_process_pool_gives_the_same_rows(ranks_dir):
    captures = discover_ranks([ranks_dir]).captures
    assert figures(gather(captures, how="pool", workers=2)) == expected_figures()


@pytest.mark.slow
@pytest.mark.skipif(not dask_available(), reason="dask[distributed] (the cluster extra) "
                                                 "is not installed")


def test_local_dask_cluster_gives_the_same_rows(ranks_dir, capsys):
    captures = discover_ranks([ranks_dir]).captures
    serial = [summarize_capture(c) for c in captures]
    table = gather(captures, cluster="local", workers=2)
    assert figures(table) == expected_figures()
    assert [r.why for r in table.rows] == [r.why for r in flag_outliers(
        [row for result in serial for row in result.rows])]


PROFILER_DBS = sorted((SHARED_DATA / "profiler").glob("pt_db_l0_rank*.db"))


@pytest.mark.skipif(len(PROFILER_DBS) < 2, reason="needs ../shared/data/profiler/pt_db_l0_*")
def test_rank_peak_time_counts_from_where_summary_counts(tmp_path, capsys):
    """A profiler DB's level starts 0.11 s after its first operator event: the Ranks row
    gave the peak at +0.048 s (from the level), ``summary`` and ``state`` at +0.159 s (from
    the device's first time, as the UI).  Both count from the device's first time now."""
    for db in PROFILER_DBS:
        (tmp_path / db.name).symlink_to(db)
    assert main(["summary", str(tmp_path)]) == 0
    ranks_out = capsys.readouterr().out
    for db in PROFILER_DBS:
        assert main(["summary", str(db)]) == 0
        single = capsys.readouterr().out
        when = single.split(" at +")[1].split(" s")[0]  # +0.158571 -> 0.159 at 3 digits
        row = next(line for line in ranks_out.splitlines() if line.endswith(db.name))
        assert f"+{float(when):.3f} s" in row, (row, single)


def test_a_layered_rank_reads_its_default_layer_as_summary_does(tmp_path, capsys):
    """An msMemScope dump among ranks: its rows are the single-file summary's (the default
    memory layer, reserved raised to what its blocks hold), never reserved below allocated.
    The smoke CSV's npu:0 PTA total says 2.0 MiB while its blocks take 4.0 MiB: the Ranks
    row said 'peak alloc 3.5 MiB, peak resv 2.0 MiB', summary of the file 4.0 MiB."""
    dump = require_shared("msmemscope") / (
        "test__smoke__testfile__csvfile__memscope_dump_20250428113810.csv")
    for rank in ("a", "b"):
        (tmp_path / rank).mkdir()
        (tmp_path / rank / dump.name).write_bytes(dump.read_bytes())  # links: one rank
    assert main(["summary", str(tmp_path), "--json"]) == 0
    ranks = json.loads(capsys.readouterr().out)
    assert main(["summary", str(dump), "--json"]) == 0
    single = {d["device"]: d for d in json.loads(capsys.readouterr().out)["devices"]}
    rows = ranks["ranks"]  # the table's rows (the devices' entries are summary's own)
    assert sorted(row["device"] for row in rows) == sorted(2 * list(single))
    for row in rows:
        alone = single[row["device"]]
        assert row["peak_reserved_bytes"] == alone["peak_reserved_bytes"], row["device"]
        assert row["peak_allocated_bytes"] == alone["peak_allocated_bytes"]
        if row["peak_reserved_bytes"] is not None:
            assert row["peak_reserved_bytes"] >= row["peak_allocated_bytes"]
