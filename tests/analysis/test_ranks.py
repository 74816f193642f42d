"""Per-rank rows and outliers (issue 14): the median + 3 MAD rule and the sparkline by
hand, and the rows of the hand-made rank folder (tests/helpers/rank_folders.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtui.analysis.across.ranks import CURVE_POINTS, RankRow, flag_outliers, sparkline
from memtui.sources.ranks import discover_ranks
from tests.helpers.rank_folders import (
    LEAK_RANK,
    PEAK_RANK,
    MiB,
    expected_figures,
    figures,
    gather,
    write_ranks,
)


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory) -> Path:
    return write_ranks(tmp_path_factory.mktemp("run") / "snapshots")


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


def test_leak_and_fragmentation_come_from_the_findings():
    from memtui.analysis.across.ranks import finding_figures
    from memtui.analysis.findings import Finding

    found = [Finding(kind="leak", severity="high", title="a", device="d",
                     detail={"bytes_per_step": 3 * MiB}),
             Finding(kind="leak", severity="low", title="b", device="d",
                     detail={"bytes_per_step": MiB}),
             Finding(kind="fragmentation", severity="low", title="c", device="d",
                     detail={"fragmented_share": 0.25, "cached_bytes": MiB}),
             Finding(kind="peak", severity="info", title="e", device="d")]
    assert finding_figures(found) == (4 * MiB, 0.25)
    assert finding_figures(found[-1:]) == (0, 0.0)
    # A leak per step that only one rank has makes it an outlier.
    rows = [row(16 * MiB, rank) for rank in range(4)]
    rows[2].leak_bytes_per_step = 4 * MiB
    for other in (0, 1, 3):
        rows[other].leak_bytes_per_step = 0
    flagged = flag_outliers(rows)
    assert [r.outlier for r in flagged] == [False, False, True, False]
    assert flagged[2].why.startswith("leak per step 4.0 MiB is 4.0 MiB above the median 0 B")


def test_host_memory_is_compared_with_host_memory_only():
    from memtui.analysis.across.ranks import device_group

    assert [device_group(d) for d in ("host", "cpu", "rank0/host", "npu:0", "cuda:1")] == [
        "host", "host", "host", "device", "device"]
    # Three NPUs at 1 MiB and three hosts at 20 MiB: nobody stands out in their own group.
    rows = [RankRow(rank=r, device=device, path=f"r{r}", peak_allocated=size,
                    peak_reserved=None, allocated_at_end=0, peak_time=0)
            for r in range(3) for device, size in (("npu:0", MiB), ("host", 20 * MiB))]
    assert not any(r.outlier for r in flag_outliers(rows))
    rows[0].peak_allocated = 8 * MiB  # rank 0's NPU
    assert [(r.rank, r.device) for r in flag_outliers(rows) if r.outlier] == [(0, "npu:0")]


def test_a_rank_far_below_the_others_is_an_outlier_too():
    """Issue 23 point 9: only the high side counted, so a rank at half the others' peak
    passed unseen.  median 16 MiB, MAD 0 -> spread 1% (0.16 MiB): the limit below is
    15.52 MiB; 8 MiB is beyond it, 15.6 MiB is not."""
    rows = [row(16 * MiB, rank) for rank in range(4)] + [row(8 * MiB, 4)]
    flagged = flag_outliers(rows)
    assert [r.outlier for r in flagged] == [False] * 4 + [True]
    assert flagged[4].why == ("peak allocated 8.0 MiB is 8.0 MiB below the median 16.0 MiB "
                              "(limit 15.5 MiB: median - 3 MAD)")
    rows[4] = row(int(15.6 * MiB), 4)
    assert not any(r.outlier for r in flag_outliers(rows))
