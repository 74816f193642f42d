"""Many ranks (issue 14): discovery, per-rank rows, outliers, summary JSON, pool and Dask.

The generated folder holds eight tiny snapshots whose figures are known by hand: every
rank allocates a 16 MiB block at t=100 us and frees it at t=200 us (peak 16 MiB, nothing
at the end) inside one 64 MiB segment, on its own device ``cuda:{rank}``.  Rank 5
allocates 40 MiB instead (the planted extra peak); rank 6 also keeps a 16 MiB block
alive to the end (the planted leak).  Median peak 16 MiB with a MAD of 0 (floor: 1% of
the median), so rank 5's 40 MiB is an outlier; median at end 0, so rank 6's 16 MiB is.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from memtui.analysis.ranks import CURVE_POINTS, RankRow, flag_outliers, sparkline
from memtui.cli import main
from memtui.rankload import RankTable, dask_available, stream_results, summarize_capture
from memtui.sources.ranks import discover_ranks, rank_of
from tests.conftest import SHARED_DATA

MiB = 1 << 20
SEG = 0x7F00_0000_0000
PEAK_RANK, LEAK_RANK = 5, 6


def rank_snapshot(device: int, peak: int = 16 * MiB, leak: int = 0) -> dict:
    """See the module docstring: one segment, one block allocated and freed, maybe a leak."""
    keep = SEG + 48 * MiB
    trace = [
        {"action": "alloc", "addr": SEG, "size": peak, "stream": 0, "time_us": 100},
        {"action": "free_requested", "addr": SEG, "size": peak, "stream": 0, "time_us": 200},
        {"action": "free_completed", "addr": SEG, "size": peak, "stream": 0, "time_us": 200},
    ]
    if leak:
        trace.append({"action": "alloc", "addr": keep, "size": leak, "stream": 0,
                      "time_us": 300})
    blocks = [{"address": SEG, "size": 48 * MiB, "requested_size": 48 * MiB,
               "state": "inactive", "frames": []},
              {"address": keep, "size": 16 * MiB, "requested_size": 16 * MiB,
               "state": "active_allocated" if leak else "inactive", "frames": []}]
    segment = {"device": device, "address": SEG, "total_size": 64 * MiB,
               "allocated_size": leak, "active_size": leak, "requested_size": leak,
               "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [[] for _ in range(device)] + [trace]}


def write_ranks(folder: Path, n: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(n):
        snapshot = rank_snapshot(rank, peak=40 * MiB if rank == PEAK_RANK else 16 * MiB,
                                 leak=16 * MiB if rank == LEAK_RANK else 0)
        (folder / f"rank{rank}.pickle").write_bytes(pickle.dumps(snapshot, protocol=4))
    return folder


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory) -> Path:
    return write_ranks(tmp_path_factory.mktemp("run") / "snapshots")


def gather(captures, **how) -> RankTable:
    table = RankTable(len(captures))
    for result in stream_results(captures, **how):
        table.add(result)
    return table


def figures(table: RankTable) -> list[tuple]:
    return [(r.rank, r.device, Path(r.path).name, r.peak_allocated, r.peak_reserved,
             r.allocated_at_end, r.peak_time, r.outlier) for r in table.rows]


def expected_figures() -> list[tuple]:
    rows = []
    for rank in range(8):
        peak = 40 * MiB if rank == PEAK_RANK else 16 * MiB
        end = 16 * MiB if rank == LEAK_RANK else 0
        # The peak is at the first alloc, t=100 us, 0 ns after the device's first time.
        rows.append((rank, f"cuda:{rank}", f"rank{rank}.pickle", peak, 64 * MiB, end, 0,
                     rank in (PEAK_RANK, LEAK_RANK)))
    return rows


# -- discovery -------------------------------------------------------------------------

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


# -- rows and outliers -----------------------------------------------------------------

def test_rows_and_outliers_of_the_generated_ranks(ranks_dir):
    table = gather(discover_ranks([ranks_dir]).captures, how="serial")
    assert figures(table) == expected_figures()
    why = {row.rank: row.why for row in table.rows if row.outlier}
    assert "peak allocated 40.0 MiB is 24.0 MiB above the median 16.0 MiB" in why[PEAK_RANK]
    assert "allocated at end 16.0 MiB" in why[LEAK_RANK]
    assert "peak" not in why[LEAK_RANK]
    # The curve: the highest level in each slice of the rank's time, 40 MiB at most.
    curve = table.rows[PEAK_RANK].curve
    assert curve.max() == 40 * MiB and curve.size == CURVE_POINTS


def row(value: int, rank: int = 0) -> RankRow:
    return RankRow(rank=rank, device="d", path="p", peak_allocated=value, peak_reserved=None,
                   allocated_at_end=0, peak_time=0)


def test_outlier_rule_median_plus_three_mad():
    # median 10, |x - 10| = 0 0 1 1 2 -> MAD 1, limit 13: 13 is not beyond it, 14 is.
    values = [10, 10, 11, 9, 12, 13]
    assert [r.outlier for r in flag_outliers([row(v) for v in values])] == [False] * 6
    values = [10 * MiB, 10 * MiB, 11 * MiB, 9 * MiB, 12 * MiB, 14 * MiB]
    flagged = flag_outliers([row(v) for v in values])
    assert [r.outlier for r in flagged] == [False] * 5 + [True]
    # median 10.5 MiB, MAD 1 MiB: limit 13.5 MiB
    assert "limit 13.5 MiB" in flagged[-1].why
    # Two rows are too few to call either an outlier.
    assert not any(r.outlier for r in flag_outliers([row(1), row(100)]))
    # Within a percent of each other: never outliers (MAD 0 otherwise flags any excess).
    assert not any(r.outlier for r in flag_outliers([row(1000), row(1000), row(1009)]))


def test_sparkline_scales_to_the_common_top():
    curve = np.array([0, 4, 8, 4], dtype=np.int64)
    assert sparkline(curve, 8, 4) == "▁▅█▅"
    assert sparkline(curve, 16, 2) == "▃▅"  # 4 and 8 of 16: ceil(1.75), ceil(3.5)
    assert sparkline(np.zeros(0, dtype=np.int64), 8, 4) == ""


# -- the bad file, the real profiler ranks ----------------------------------------------

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
    from tests.test_ascend_profiler_real import db_figures

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


# -- the same answer every way ---------------------------------------------------------

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
