"""memory_record.csv cells that are not sizes: NaN, inf, 1e300, negative totals are rows
skipped and counted, never polars' error text (issue 12, defect 3)."""

from __future__ import annotations

import pytest

from memtui.sources import open_capture
from tests.sources.test_ascend_profiler import RECORD_7, write


@pytest.mark.parametrize("cell", ["NaN", "inf", "-inf", "1e300", "-5.0"])
def test_an_impossible_total_is_a_skipped_row(tmp_path, cell):
    lines = RECORD_7.splitlines()
    lines[2] = lines[2].replace(",1.0,2.0,1.0,", f",{cell},2.0,1.0,", 1)
    assert cell in lines[2]
    trace = open_capture(write(tmp_path / "memory_record.csv", "\n".join(lines) + "\n"))
    assert any("1 rows skipped (unreadable number)" in w for w in trace.meta.warnings)
    assert int(trace.curves["bytes"].min()) >= 0
